/* ckpt.c — index checkpoints (see ckpt.h, docs/format.md 3.5).
 *
 * The encoder writes the fixed 48-byte header and then varints; the decoder
 * takes nothing on trust: both frame checksums, the type and version, every
 * count bounded by the bytes left (every varint takes a byte), ticks inside
 * the segment and increasing, chunk entries strictly increasing, and the
 * payload consumed exactly.
 *
 * The writer's builder is write/ckbuild.c; the reader's chain walk and
 * chunk map are read/ckchain.c and read/ckmap.c. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/grow.h"

static uint64_t zz(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static int64_t unzz(uint64_t u) { return (int64_t)(u >> 1) ^ -(int64_t)(u & 1); }

/* Ticks as differences: the first from base, each next from the one before. */
static void put_ticks(h5l_buf_t *b, uint64_t base, const uint64_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h5l_buf_varint(b, t[i] - base);
        base = t[i];
    }
}

/* ---- the summary (format.md 3.5) ---- */

/* One ATTR op of a segment (the summary's attribute list): its key, its
 * bytes as encoded in its tick, and its place among the segment's ATTR ops
 * (seq); grouped by key, first is the seq of the key's first op. */
typedef struct at_ent {
    uint32_t objid;
    char *name; /* owned */
    const uint8_t *raw;
    size_t len, seq, first;
} at_ent_t;

static int at_key_cmp(const void *a, const void *b)
{
    const at_ent_t *x = a, *y = b;
    if (x->objid != y->objid) return x->objid < y->objid ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int at_first_cmp(const void *a, const void *b)
{
    const at_ent_t *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* The attribute list (format.md 3.5) of the segment's n ATTR ops e[] (in
 * segment order), appended to out: each key's last op, in the order of
 * the keys' first ops. Sorts e. */
static void put_attr_list(h5l_buf_t *out, at_ent_t *e, size_t n)
{
    at_ent_t *g = malloc(n * sizeof *g); /* a key each: its last op, with its first op's seq */
    if (!g) {
        out->oom = 1;
        return;
    }
    qsort(e, n, sizeof *e, at_key_cmp);
    size_t ng = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && e[j].objid == e[i].objid && !strcmp(e[j].name, e[i].name)) j++;
        g[ng] = e[j - 1];
        g[ng++].first = e[i].seq;
        i = j;
    }
    qsort(g, ng, sizeof *g, at_first_cmp);
    h5l_buf_varint(out, ng);
    for (size_t i = 0; i < ng; i++) h5l_buf_put(out, g[i].raw, g[i].len);
    free(g);
}

typedef struct dl_ent {
    uint32_t dimid;
    uint64_t tick, len;
} dl_ent_t;

static int dl_cmp(const void *a, const void *b)
{
    const dl_ent_t *x = a, *y = b;
    if (x->dimid != y->dimid) return x->dimid < y->dimid ? -1 : 1;
    return x->tick < y->tick ? -1 : x->tick > y->tick;
}

/* Evenly spaced ticks t[0..n)? *dt the step (0 for one tick). */
static int even_ticks(const uint64_t *t, size_t n, uint64_t *dt)
{
    *dt = n > 1 ? t[1] - t[0] : 0;
    for (size_t i = 2; i < n; i++)
        if (t[i] - t[i - 1] != *dt) return 0;
    return 1;
}

void h5l_cksum_of(const h5l_ckpt_t *c, h5l_buf_t *out)
{
    uint64_t nrec = 0, nt = c->last - c->first + 1;
    size_t nops = 0;
    for (uint64_t i = 0; i < nt; i++) {
        nrec += c->ticks[i].info.nrecords;
        nops += c->ticks[i].nops;
    }
    int simple = c->neager == 0;
    dl_ent_t *dl = simple ? malloc((nops ? nops : 1) * sizeof *dl) : NULL;
    at_ent_t *at = simple ? malloc((nops ? nops : 1) * sizeof *at) : NULL;
    size_t ndl = 0, nat = 0;
    int oom = 0;
    if (simple && (!dl || !at)) { /* out of memory is no summary: the caller's buffer says so */
        free(dl);
        free(at);
        out->oom = 1;
        return;
    }
    for (uint64_t i = 0; i < nt && simple; i++) {
        h5l_cur_t cur = h5l_cur(c->ticks[i].ops, c->ticks[i].opslen);
        for (uint32_t j = 0; j < c->ticks[i].nops && simple; j++) {
            size_t at0 = cur.pos;
            h5l_op_t op;
            int orc = h5l_op_decode(&cur, &op); /* (failing, it freed what it took) */
            if (orc) {
                oom |= orc == H5L_ENOMEM; /* not "not simple": a decoder comparing would call that damage */
                simple = 0;
                break;
            }
            if (op.kind != H5L_OP_DIMLEN && op.kind != H5L_OP_ATTR) {
                h5l_op_clear(&op);
                simple = 0;
                break;
            }
            if (op.kind == H5L_OP_DIMLEN) {
                dl[ndl++] = (dl_ent_t){op.id, c->ticks[i].info.tick, op.len};
            } else {
                at[nat] = (at_ent_t){op.id, op.name, c->ticks[i].ops + at0, cur.pos - at0, nat, 0};
                op.name = NULL;
                nat++;
            }
            h5l_op_clear(&op);
        }
        if (cur.pos != cur.len) simple = 0; /* bytes after its ops: a reader refuses the tick */
    }
    h5l_buf_t runs = {0};
    size_t nruns = 0;
    if (simple) {
        qsort(dl, ndl, sizeof *dl, dl_cmp);
        for (size_t i = 1; i < ndl; i++) /* two for one dimension in one tick (ops of ticks: any number) */
            if (dl[i].dimid == dl[i - 1].dimid && dl[i].tick == dl[i - 1].tick) simple = 0;
    }
    if (simple) {
        for (size_t i = 0; i < ndl;) { /* a run from dl[i] */
            size_t j = i + 1;
            uint64_t dt = 0, dl_ = 0;
            if (j < ndl && dl[j].dimid == dl[i].dimid && dl[j].len >= dl[i].len) {
                dt = dl[j].tick - dl[i].tick;
                dl_ = dl[j].len - dl[i].len;
                j++;
                while (j < ndl && dl[j].dimid == dl[i].dimid && dl[j].tick - dl[j - 1].tick == dt &&
                       dl[j].len >= dl[j - 1].len && dl[j].len - dl[j - 1].len == dl_)
                    j++;
            }
            h5l_buf_varint(&runs, dl[i].dimid);
            h5l_buf_varint(&runs, dl[i].tick - c->first);
            h5l_buf_varint(&runs, dl[i].len);
            h5l_buf_varint(&runs, j - i);
            h5l_buf_varint(&runs, dt);
            h5l_buf_varint(&runs, dl_);
            nruns++;
            i = j;
        }
    }
    free(dl);
    h5l_buf_t cr = {0};
    size_t ncr = 0;
    for (size_t i = 0; i < c->nchunks && simple;) {
        const h5l_ckpt_chunk_t *a = &c->chunks[i];
        size_t j = i + 1;
        uint64_t dt = 0, k = a->nt;
        if (a->nt == 1 && a->nd >= 1) { /* along the first dimension, a tick each */
            while (j < c->nchunks && j - i < UINT32_MAX) {
                const h5l_ckpt_chunk_t *b = &c->chunks[j], *p = &c->chunks[j - 1];
                if (b->objid != a->objid || b->nd != a->nd || b->nt != 1 || b->coord[0] != p->coord[0] + 1 ||
                    memcmp(b->coord + 1, a->coord + 1, (a->nd - 1) * sizeof *a->coord) || b->ticks[0] <= p->ticks[0] ||
                    (j > i + 1 && b->ticks[0] - p->ticks[0] != dt))
                    break;
                dt = b->ticks[0] - p->ticks[0];
                j++;
            }
        } else if (!even_ticks(a->ticks, a->nt, &dt)) {
            simple = 0;
            break;
        }
        h5l_buf_varint(&cr, a->objid);
        h5l_buf_varint(&cr, a->nd);
        for (uint32_t d = 0; d < a->nd; d++) h5l_buf_varint(&cr, a->coord[d]);
        h5l_buf_varint(&cr, j - i);
        h5l_buf_varint(&cr, j - i > 1 ? 1 : k);
        h5l_buf_varint(&cr, a->ticks[0] - c->first);
        h5l_buf_varint(&cr, dt);
        ncr++;
        i = j;
    }
    h5l_buf_t al = {0};
    if (simple && nat) put_attr_list(&al, at, nat);
    for (size_t i = 0; i < nat; i++) free(at[i].name);
    free(at);
    if (oom || runs.oom || cr.oom || al.oom) {
        out->oom = 1;
        h5l_buf_free(&runs);
        h5l_buf_free(&cr);
        h5l_buf_free(&al);
        return;
    }
    h5l_buf_varint(out, (uint64_t)simple | (simple && nat ? 2u : 0u));
    h5l_buf_varint(out, nrec);
    h5l_buf_varint(out, simple ? nruns : 0);
    if (simple) h5l_buf_put(out, runs.p, runs.len);
    h5l_buf_varint(out, simple ? ncr : 0);
    if (simple) h5l_buf_put(out, cr.p, cr.len);
    if (simple && nat) h5l_buf_put(out, al.p, al.len);
    h5l_buf_free(&runs);
    h5l_buf_free(&cr);
    h5l_buf_free(&al);
}

void h5l_cksum_free(h5l_cksum_t *s)
{
    free(s->dr);
    free(s->cr);
    for (size_t i = 0; i < s->nat; i++) h5l_op_clear(&s->at[i]);
    free(s->at);
    memset(s, 0, sizeof *s);
}

int h5l_cksum_decode(const uint8_t *p, size_t n, uint64_t first, uint64_t last, uint64_t avail, h5l_cksum_t *s)
{
    memset(s, 0, sizeof *s);
    h5l_cur_t c = h5l_cur(p, n);
    uint64_t flags = h5l_cur_varint(&c), span = last - first;
    /* what the runs stand for must fit the entries they summarise (a tick
     * entry 9 bytes at least, a chunk entry 4 + nd, a further tick 1): a
     * summary of a few bytes cannot make a reader build millions of
     * chunks the frame never listed */
    if (span >= avail / 9) return H5L_ECORRUPT;
    uint64_t budget = avail - (span + 1) * 9;
    s->nrec = h5l_cur_varint(&c);
    uint64_t ndr = h5l_cur_varint(&c);
    if (c.bad || flags > 3 || flags == 2 || ndr > (c.len - c.pos) / 6 || (!flags && ndr)) return H5L_ECORRUPT;
    s->simple = (int)(flags & 1);
    s->attrs = (int)(flags >> 1);
    s->dr = malloc((ndr ? (size_t)ndr : 1) * sizeof *s->dr);
    if (!s->dr) return H5L_ENOMEM;
    for (size_t i = 0; i < ndr; i++) {
        h5l_ckdim_run_t *r = &s->dr[i];
        uint64_t id = h5l_cur_varint(&c), t = h5l_cur_varint(&c);
        r->len = h5l_cur_varint(&c);
        r->n = h5l_cur_varint(&c);
        r->dt = h5l_cur_varint(&c);
        r->dl = h5l_cur_varint(&c);
        if (c.bad || id > UINT32_MAX || t > span || r->n == 0 || (r->n == 1) != (r->dt == 0) ||
            (r->n == 1 && r->dl) || (r->n > 1 && (r->n - 1 > (span - t) / r->dt)) ||
            (r->n > 1 && r->dl && r->n - 1 > (UINT64_MAX - r->len) / r->dl))
            return H5L_ECORRUPT;
        r->dimid = (uint32_t)id;
        r->tick = first + t;
        s->ndr++;
    }
    uint64_t ncr = h5l_cur_varint(&c);
    if (c.bad || ncr > (c.len - c.pos) / 6 || (!flags && ncr)) return H5L_ECORRUPT;
    s->cr = malloc((ncr ? (size_t)ncr : 1) * sizeof *s->cr);
    if (!s->cr) return H5L_ENOMEM;
    for (size_t i = 0; i < ncr; i++) {
        h5l_ckchunk_run_t *r = &s->cr[i];
        uint64_t id = h5l_cur_varint(&c), nd = h5l_cur_varint(&c);
        if (c.bad || id > UINT32_MAX || nd > H5L_MAX_DIMS) return H5L_ECORRUPT;
        r->objid = (uint32_t)id;
        r->nd = (uint32_t)nd;
        for (uint32_t d = 0; d < r->nd; d++) r->coord[d] = h5l_cur_varint(&c);
        r->cnt = h5l_cur_varint(&c);
        r->k = h5l_cur_varint(&c);
        uint64_t t = h5l_cur_varint(&c);
        r->dt = h5l_cur_varint(&c);
        uint64_t steps = r->cnt > 1 ? r->cnt - 1 : r->k - 1; /* (a 0 count is refused below first) */
        if (c.bad || r->cnt == 0 || r->k == 0 || r->cnt > UINT32_MAX || (r->cnt > 1 && (r->k != 1 || !r->nd)) ||
            t > span || (steps == 0) != (r->dt == 0) || (steps && steps > (span - t) / r->dt) ||
            (r->cnt > 1 && r->coord[0] > UINT64_MAX - r->cnt))
            return H5L_ECORRUPT;
        uint64_t cost = r->cnt * (4 + r->nd) + (r->k - 1);
        if (cost > budget) return H5L_ECORRUPT;
        budget -= cost;
        if (i) { /* after the run before it, as the entries are: each chunk once */
            const h5l_ckchunk_run_t *q = &s->cr[i - 1];
            int cmp = q->objid < r->objid ? -1 : q->objid > r->objid;
            if (!cmp && q->nd != r->nd) return H5L_ECORRUPT;
            for (uint32_t d = 0; !cmp && d < r->nd; d++) {
                uint64_t qd = q->coord[d] + (d == 0 ? q->cnt - 1 : 0); /* its last chunk */
                cmp = qd < r->coord[d] ? -1 : qd > r->coord[d];
            }
            if (cmp >= 0) return H5L_ECORRUPT;
        }
        r->t0 = first + t;
        s->ncr++;
    }
    if (s->attrs) { /* the last values: ATTR ops of 32 bytes at least (8 of header, a body of 20 padded) */
        uint64_t nat = h5l_cur_varint(&c);
        if (c.bad || nat == 0 || nat > (c.len - c.pos) / 32) return H5L_ECORRUPT;
        if (!(s->at = calloc((size_t)nat, sizeof *s->at))) return H5L_ENOMEM;
        for (size_t i = 0; i < nat; i++) {
            int rc = h5l_op_decode(&c, &s->at[i]);
            if (rc == H5L_OK && s->at[i].kind != H5L_OP_ATTR) {
                h5l_op_clear(&s->at[i]);
                rc = H5L_ECORRUPT;
            }
            if (rc) return rc;
            s->nat++;
        }
    }
    return c.pos == c.len ? H5L_OK : H5L_ECORRUPT;
}

static void ckpt_encode(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed, int with_sum)
{
    h5l_buf_t p = {0}, sm = {0};
    if (with_sum) h5l_cksum_of(c, &sm);
    if (sm.oom || sm.len > UINT32_MAX) {
        b->oom = 1;
        h5l_buf_free(&sm);
        return;
    }
    h5l_buf_u64(&p, c->first);
    h5l_buf_u64(&p, c->last);
    h5l_buf_u64(&p, c->tickpos);
    h5l_buf_u64(&p, c->selfpos);
    h5l_buf_u64(&p, c->prevpos);
    h5l_buf_u64(&p, sm.len); /* S, then 4 zero bytes */
    if (sm.len) {
        h5l_buf_u64(&p, h5l_hash(sm.p, sm.len, seed));
        h5l_buf_put(&p, sm.p, sm.len);
    }
    h5l_buf_free(&sm);
    uint64_t ptime = 0, pend = 0;
    for (uint64_t i = 0; i <= c->last - c->first; i++) {
        const h5l_ckpt_tick_t *t = &c->ticks[i];
        const h5l_tick_info_t *ti = &t->info;
        h5l_buf_varint(&p, zz((int64_t)(ti->time_ns - ptime)));
        h5l_buf_varint(&p, ti->nranks);
        h5l_buf_varint(&p, zz((int64_t)(ti->data_off - pend)));
        h5l_buf_varint(&p, ti->data_size);
        h5l_buf_varint(&p, zz((int64_t)(ti->table_off - (ti->data_off + ti->data_size))));
        h5l_buf_varint(&p, ti->table_size);
        h5l_buf_varint(&p, ti->nrecords);
        h5l_buf_varint(&p, t->nops);
        h5l_buf_varint(&p, t->opslen);
        h5l_buf_put(&p, t->ops, t->opslen);
        ptime = ti->time_ns;
        pend = ti->table_off + ti->table_size;
    }
    h5l_buf_varint(&p, c->neager);
    put_ticks(&p, c->first - 1, c->eager, c->neager);
    h5l_buf_varint(&p, c->nchunks);
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        h5l_buf_varint(&p, k->objid);
        h5l_buf_varint(&p, k->nd);
        for (uint32_t d = 0; d < k->nd; d++) h5l_buf_varint(&p, k->coord[d]);
        h5l_buf_varint(&p, k->nt);
        put_ticks(&p, c->first - 1, k->ticks, k->nt);
    }
    if (p.oom || p.len > H5L_FRAME_MAX)
        b->oom = 1;
    else
        h5l_frame_encode(b, H5L_REC_CKPT, p.p, (uint32_t)p.len, seed);
    h5l_buf_free(&p);
}

void h5l_ckpt_encode(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed) { ckpt_encode(b, c, seed, 1); }
void h5l_ckpt_encode_nosum(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed) { ckpt_encode(b, c, seed, 0); }

void h5l_ckpt_clear(h5l_ckpt_t *c)
{
    free(c->ticks);
    free(c->chunks);
    free(c->u64s);
    memset(c, 0, sizeof *c);
}

/* the message first: its arguments may point into what clearing frees */
#define BAD(...) (h5l_err_set(err, H5L_ECORRUPT, __VA_ARGS__), h5l_ckpt_clear(c), H5L_ECORRUPT)

/* Read n tick differences into out (ticks of [lo, hi], strictly increasing). */
static int get_ticks(h5l_cur_t *cur, uint64_t lo, uint64_t hi, uint64_t *out, size_t n)
{
    uint64_t t = lo - 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t d = h5l_cur_varint(cur);
        if (cur->bad || d == 0 || d > hi - t) return -1;
        t += d;
        out[i] = t;
    }
    return 0;
}

/* The first of the n increasing ticks e that is at least t. */
static size_t eager_from(const uint64_t *e, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e[mid] < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int h5l_ckpt_decode(const uint8_t *frame, size_t n, uint64_t seed, uint64_t pos, h5l_ckpt_t *c, const char *what,
                    h5l_err_t *err)
{
    memset(c, 0, sizeof *c);
    unsigned long long at = (unsigned long long)pos;
    h5l_frame_hdr_t h;
    if (n < H5L_FRAME_LEN || h5l_frame_hdr_decode(frame, seed, &h) != H5L_FRAME_OK || h.type != H5L_REC_CKPT)
        return BAD("%s: checkpoint at journal offset %llu: bad frame header", what, at);
    if (h.len > n - H5L_FRAME_LEN || h5l_frame_size(h.len) > n)
        return BAD("%s: checkpoint at journal offset %llu: cut off (%u bytes, %zu present)", what, at, h.len, n);
    const uint8_t *pl = frame + H5L_FRAME_LEN;
    if (h5l_hash(pl, h.len, seed) != h.sum)
        return BAD("%s: checkpoint at journal offset %llu fails its checksum", what, at);
    for (uint64_t i = H5L_FRAME_LEN + h.len; i < h5l_frame_size(h.len); i++)
        if (frame[i]) return BAD("%s: checkpoint at journal offset %llu: non-zero padding", what, at);
    h5l_cur_t cur = h5l_cur(pl, h.len);
    c->first = h5l_cur_u64(&cur);
    c->last = h5l_cur_u64(&cur);
    c->tickpos = h5l_cur_u64(&cur);
    c->selfpos = h5l_cur_u64(&cur);
    c->prevpos = h5l_cur_u64(&cur);
    uint64_t sfield = h5l_cur_u64(&cur), slen = sfield & 0xFFFFFFFFu, ssum = 0;
    const uint8_t *sp = NULL;
    if (slen) {
        ssum = h5l_cur_u64(&cur);
        sp = h5l_cur_take(&cur, (size_t)slen);
    }
    if (cur.bad || (slen && !sp) || (sfield >> 32) || c->first == 0 || c->last < c->first || c->selfpos != pos || c->tickpos >= pos ||
        c->prevpos >= c->tickpos || (c->first == 1) != (c->prevpos == 0) || (c->prevpos && c->prevpos < H5L_JHDR_LEN) ||
        c->tickpos < H5L_JHDR_LEN)
        return BAD("%s: checkpoint at journal offset %llu: bad header fields", what, at);
    /* every tick entry takes at least 9 bytes */
    uint64_t nt = c->last - c->first + 1;
    if (nt > (cur.len - cur.pos) / 9)
        return BAD("%s: checkpoint at journal offset %llu: %llu ticks cannot fit", what, at, (unsigned long long)nt);
    c->ticks = malloc((size_t)nt * sizeof *c->ticks); /* every field is set below: a calloc here cleared 100 KB a segment */
    if (!c->ticks) {
        h5l_ckpt_clear(c);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", what);
    }
    uint64_t ptime = 0, pend = 0, fpos = c->tickpos;
    for (uint64_t i = 0; i < nt; i++) {
        h5l_ckpt_tick_t *t = &c->ticks[i];
        h5l_tick_info_t *ti = &t->info;
        ti->tick = c->first + i;
        ti->time_ns = ptime + (uint64_t)unzz(h5l_cur_varint(&cur));
        uint64_t nr = h5l_cur_varint(&cur);
        ti->data_off = pend + (uint64_t)unzz(h5l_cur_varint(&cur));
        ti->data_size = h5l_cur_varint(&cur);
        ti->table_off = ti->data_off + ti->data_size + (uint64_t)unzz(h5l_cur_varint(&cur));
        ti->table_size = h5l_cur_varint(&cur);
        ti->nrecords = h5l_cur_varint(&cur);
        uint64_t nops = h5l_cur_varint(&cur), olen = h5l_cur_varint(&cur);
        if (cur.bad || nr == 0 || nr > UINT32_MAX || nops > UINT32_MAX || olen > cur.len - cur.pos || nops > olen / 8 ||
            olen > H5L_FRAME_MAX - H5L_TICK_LEN || olen % 8)
            return BAD("%s: checkpoint at journal offset %llu: tick %llu entry is malformed", what, at,
                       (unsigned long long)ti->tick);
        ti->nranks = (uint32_t)nr;
        t->nops = (uint32_t)nops;
        t->opslen = (size_t)olen;
        t->ops = h5l_cur_take(&cur, (size_t)olen);
        ptime = ti->time_ns;
        pend = ti->table_off + ti->table_size;
        fpos += h5l_frame_size(H5L_TICK_LEN + olen);
    }
    if (fpos != pos) return BAD("%s: checkpoint at journal offset %llu: its ticks' frames end elsewhere", what, at);
    /* the eager ticks, the coordinates and the chunk tick lists: every
     * varint takes a byte, so the bytes left bound them all */
    size_t left = cur.len - cur.pos;
    c->u64s = malloc((left + 1) * sizeof *c->u64s);
    uint64_t *u = c->u64s;
    if (!u) {
        h5l_ckpt_clear(c);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", what);
    }
    uint64_t ne = h5l_cur_varint(&cur);
    if (cur.bad || ne > nt || ne > cur.len - cur.pos || get_ticks(&cur, c->first, c->last, u, (size_t)ne))
        return BAD("%s: checkpoint at journal offset %llu: bad eager ticks", what, at);
    c->eager = u;
    c->neager = (size_t)ne;
    u += ne;
    uint64_t nk = h5l_cur_varint(&cur);
    if (cur.bad || nk > (cur.len - cur.pos) / 4) /* objid, nd, k, a tick: 4 bytes at least */
        return BAD("%s: checkpoint at journal offset %llu: bad chunk count", what, at);
    c->chunks = malloc((nk ? (size_t)nk : 1) * sizeof *c->chunks); /* every field is set below */
    if (!c->chunks) {
        h5l_ckpt_clear(c);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", what);
    }
    c->nchunks = (size_t)nk;
    for (size_t i = 0; i < c->nchunks; i++) {
        h5l_ckpt_chunk_t *k = &c->chunks[i];
        uint64_t objid = h5l_cur_varint(&cur), nd = h5l_cur_varint(&cur);
        if (cur.bad || objid > UINT32_MAX || nd > H5L_MAX_DIMS || nd > cur.len - cur.pos)
            return BAD("%s: checkpoint at journal offset %llu: chunk entry %zu is malformed", what, at, i);
        k->objid = (uint32_t)objid;
        k->nd = (uint32_t)nd;
        for (uint32_t d = 0; d < k->nd; d++) u[d] = h5l_cur_varint(&cur);
        k->coord = u;
        u += nd;
        uint64_t kt = h5l_cur_varint(&cur);
        if (cur.bad || kt == 0 || kt > nt || kt > cur.len - cur.pos ||
            get_ticks(&cur, c->first, c->last, u, (size_t)kt))
            return BAD("%s: checkpoint at journal offset %llu: chunk entry %zu is malformed", what, at, i);
        k->ticks = u;
        k->nt = (size_t)kt;
        u += kt;
        /* strictly after the entry before it */
        if (i) {
            const h5l_ckpt_chunk_t *p = &c->chunks[i - 1];
            int cmp = p->objid < k->objid ? -1 : p->objid > k->objid;
            if (!cmp && p->nd != k->nd)
                return BAD("%s: checkpoint at journal offset %llu: variable %u with two ranks", what, at, k->objid);
            for (uint32_t d = 0; !cmp && d < k->nd; d++)
                cmp = p->coord[d] < k->coord[d] ? -1 : p->coord[d] > k->coord[d];
            if (cmp >= 0)
                return BAD("%s: checkpoint at journal offset %llu: chunk entries out of order at %zu", what, at, i);
        }
        /* an eager tick is never listed: each listed tick looked up (a
         * merge with the eager list from its start, per chunk, cost chunks
         * x eager ticks) */
        for (size_t j = 0; j < k->nt && c->neager; j++) {
            size_t e = eager_from(c->eager, c->neager, k->ticks[j]);
            if (e < c->neager && c->eager[e] == k->ticks[j])
                return BAD("%s: checkpoint at journal offset %llu: eager tick %llu listed in a chunk", what, at,
                           (unsigned long long)k->ticks[j]);
        }
    }
    if (cur.pos != cur.len) return BAD("%s: checkpoint at journal offset %llu: trailing bytes", what, at);
    if (slen) { /* the summary: its own checksum, and what the entries say */
        if (h5l_hash(sp, (size_t)slen, seed) != ssum)
            return BAD("%s: checkpoint at journal offset %llu: its summary fails its checksum", what, at);
        h5l_cksum_t sm;
        int src = h5l_cksum_decode(sp, (size_t)slen, c->first, c->last, h.len - H5L_CKPT_HDR - 8 - slen, &sm);
        int simple = sm.simple;
        uint64_t nrec = sm.nrec;
        h5l_cksum_free(&sm);
        if (src == H5L_ENOMEM) {
            h5l_ckpt_clear(c);
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", what);
        }
        uint64_t sum = 0;
        for (uint64_t i = 0; i < nt; i++) sum += c->ticks[i].info.nrecords;
        int same = !src && nrec == sum;
        if (same && simple) { /* recomputed from the entries, byte for byte */
            h5l_buf_t again = {0};
            h5l_cksum_of(c, &again);
            if (again.oom) {
                h5l_buf_free(&again);
                h5l_ckpt_clear(c);
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", what);
            }
            same = again.len == slen && !memcmp(again.p, sp, (size_t)slen);
            h5l_buf_free(&again);
        }
        if (!same)
            return BAD("%s: checkpoint at journal offset %llu: its summary is not what its entries say", what, at);
    }
    return H5L_OK;
}

/* ---- chunks of a record table ---- */

int h5l_ckpt_table_chunks(const uint8_t *tab, const h5l_tick_info_t *t, uint64_t seed, const h5l_schema_t *s,
                          h5l_ckpt_chunk_fn fn, void *ctx)
{
    size_t pos = 0;
    for (uint32_t rank = 0; rank < t->nranks; rank++) {
        pos = (pos + 7) & ~(size_t)7;
        if (pos > t->table_size || t->table_size - pos < H5L_BLOCK_LEN) return H5L_ECORRUPT;
        h5l_block_t blk;
        h5l_block_decode(tab + pos, &blk);
        if (blk.payload > t->table_size - pos - H5L_BLOCK_LEN) return H5L_ECORRUPT;
        if (h5l_block_sum(tab + pos, seed, t->tick, rank) != blk.checksum) return H5L_ECORRUPT;
        h5l_cur_t c = h5l_cur(tab + pos + H5L_BLOCK_LEN, blk.payload);
        for (uint32_t i = 0; i < blk.nrec; i++) {
            uint32_t objid, nboxes;
            if (h5l_rec_head_decode(&c, &objid, &nboxes) || objid >= s->nobjs || s->objs[objid].kind != H5L_OBJ_VAR ||
                nboxes == 0 || nboxes > H5L_REC_MAXBOXES)
                return H5L_ECORRUPT;
            const h5l_obj_t *o = &s->objs[objid];
            uint32_t nd = o->ndims;
            for (uint32_t k = 0; k < nboxes; k++) {
                uint64_t st[H5L_MAX_DIMS], cn[H5L_MAX_DIMS], lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], cur[H5L_MAX_DIMS];
                uint64_t nch = 1;
                for (uint32_t d = 0; d < nd; d++) st[d] = h5l_cur_varint(&c);
                for (uint32_t d = 0; d < nd; d++) cn[d] = h5l_cur_varint(&c);
                if (c.bad) return H5L_ECORRUPT;
                for (uint32_t d = 0; d < nd; d++) {
                    if (cn[d] == 0 || st[d] > UINT64_MAX - (cn[d] - 1)) return H5L_ECORRUPT;
                    lo[d] = st[d] / o->chunk[d];
                    hi[d] = (st[d] + cn[d] - 1) / o->chunk[d];
                    uint64_t span = hi[d] - lo[d] + 1;
                    nch = span > H5L_CKPT_WIDE || nch * span > H5L_CKPT_WIDE ? H5L_CKPT_WIDE + 1 : nch * span;
                    cur[d] = lo[d];
                }
                if (nch > H5L_CKPT_WIDE) return 1;
                for (;;) {
                    int rc = fn(ctx, objid, nd, cur);
                    if (rc) return rc;
                    int d = (int)nd - 1;
                    for (; d >= 0; d--) {
                        if (++cur[d] <= hi[d]) break;
                        cur[d] = lo[d];
                    }
                    if (d < 0) break;
                }
            }
        }
        pos += H5L_BLOCK_LEN + blk.payload;
    }
    return H5L_OK;
}
