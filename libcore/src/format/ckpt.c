/* ckpt.c — index checkpoints (see ckpt.h, docs/format.md 3.5).
 *
 * The encoder writes the fixed 48-byte header and then varints; the decoder
 * takes nothing on trust: both frame checksums, the type and version, every
 * count bounded by the bytes left (every varint takes a byte), ticks inside
 * the segment and increasing, chunk entries strictly increasing, and the
 * payload consumed exactly.
 *
 * The writer's builder keeps the segment's tick entries (a few dozen bytes
 * per tick) and, when a checkpoint is due, reads the segment's record
 * tables back from the file (rank 0 does not see other ranks' records
 * otherwise; they were written and ordered before the commit), checks their
 * block checksums, and lists each (variable, index chunk, tick) once. A
 * table that cannot be read back or does not check makes its tick eager: the
 * checkpoint stays correct, readers just decode that tick's table at open. */
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

/* ---- the writer's builder ---- */

struct h5l_ckpt_w {
    char *path;
    int fd;
    uint64_t every, seed;
    uint64_t prevpos; /* the last checkpoint appended, 0: none */
    uint64_t first;   /* first tick of the pending segment */
    uint64_t tickpos; /* journal offset of its TICK frame */
    h5l_tick_info_t *ti;
    size_t nti, cap_ti;
    uint64_t tbytes;  /* record table bytes of the pending ticks */
    uint64_t *opsoff; /* per pending tick: [offset into ops, nops] */
    size_t cap_opsoff;
    h5l_buf_t ops;
    /* a pending build: entries [objid, nd, coord[nd], tick], flat */
    uint64_t *ent;
    size_t nent, cap_ent;
    size_t tick_mark; /* nent when the current table began */
    uint64_t cur_tick;
    int broken; /* a previous failure that makes a chain impossible: stop */
    int fails;  /* builds failed in a row (each tried again at the next tick) */
};

/* Builds that may fail in a row before the file gets no more checkpoints:
 * a failure that lasts (a segment too large to frame, memory that stays
 * short) would otherwise be retried at every tick, reading the segment's
 * tables back each time while the pending ops and ticks grow. */
#define CKPT_TRIES 4

uint64_t h5l_ckpt_every(void)
{
    const char *e = getenv(H5L_CKPT_ENV);
    if (!e || !*e) return H5L_CKPT_EVERY_DEFAULT;
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    return *end ? H5L_CKPT_EVERY_DEFAULT : (uint64_t)v;
}

h5l_ckpt_w_t *h5l_ckpt_w_new(const char *path, uint64_t every, uint64_t seed)
{
    if (!every) return NULL;
    h5l_ckpt_w_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return NULL;
    }
    w->fd = -1;
    w->every = every;
    w->seed = seed;
    w->first = 1;
    return w;
}

void h5l_ckpt_w_free(h5l_ckpt_w_t *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    free(w->ti);
    free(w->opsoff);
    free(w->ent);
    h5l_buf_free(&w->ops);
    free(w);
}

static int add_ent(void *ctx, uint32_t objid, uint32_t nd, const uint64_t *coord)
{
    h5l_ckpt_w_t *w = ctx;
    if (h5l_grow((void **)&w->ent, &w->cap_ent, w->nent + nd + 3, sizeof *w->ent)) return H5L_ENOMEM;
    uint64_t *e = w->ent + w->nent;
    e[0] = objid;
    e[1] = nd;
    memcpy(e + 2, coord, nd * sizeof *coord);
    e[2 + nd] = w->cur_tick;
    w->nent += nd + 3;
    return 0;
}

static const uint64_t *sort_base;
static int ent_cmp(const void *a, const void *b)
{
    const uint64_t *x = sort_base + *(const size_t *)a, *y = sort_base + *(const size_t *)b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    size_t n = x[1] + 1; /* coords then tick (same variable: same nd) */
    for (size_t i = 2; i < 2 + n; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Read the table of ti into buf (grown); 0 or -1. */
/* Room to read a segment's tables back: small tables (a long log of small
 * ticks has them a few hundred bytes apart) come through a window of the
 * file, one pread for hundreds of ticks; a larger one is read alone. */
#define RWIN ((size_t)256 << 10)
typedef struct rback {
    uint8_t *win, *own;
    uint64_t woff;
    size_t wlen, owncap;
} rback_t;

/* The table of ti, read back: a pointer into rb, or NULL. */
static const uint8_t *read_table(h5l_ckpt_w_t *w, const h5l_tick_info_t *ti, rback_t *rb)
{
    uint64_t off = ti->table_off, n = ti->table_size;
    size_t got;
    if (n > ((uint64_t)1 << 30)) return NULL;
    if (rb->win && off >= rb->woff && n <= rb->wlen && off - rb->woff <= rb->wlen - n)
        return rb->win + (off - rb->woff);
    if (n <= RWIN / 4) {
        if (!rb->win && !(rb->win = malloc(RWIN))) return NULL;
        rb->wlen = 0;
        if (h5l_fd_read(w->fd, rb->win, RWIN, off, &got, w->path, NULL) || got < n) return NULL;
        rb->woff = off;
        rb->wlen = got;
        return rb->win;
    }
    if (rb->owncap < n) {
        uint8_t *b = realloc(rb->own, (size_t)n);
        if (!b) return NULL;
        rb->own = b;
        rb->owncap = (size_t)n;
    }
    if (h5l_fd_read(w->fd, rb->own, (size_t)n, off, &got, w->path, NULL) || got != n) return NULL;
    return rb->own;
}

/* Build and append the checkpoint of the pending segment, ending at the
 * tick whose frame is at `pos` (its payload ops: the last pending entry). */
static int build(h5l_ckpt_w_t *w, uint64_t pos, const h5l_schema_t *s, h5l_buf_t *out)
{
    if (w->fd < 0 && (w->fd = open(w->path, O_RDONLY | O_CLOEXEC)) < 0) {
        w->broken = 1; /* no checkpoints for this file */
        return -1;
    }
    uint64_t *eager = malloc(w->nti * sizeof *eager);
    rback_t rb = {0};
    size_t neager = 0;
    int rc = eager ? 0 : -1;
    w->nent = 0;
    for (size_t i = 0; i < w->nti && !rc; i++) {
        const h5l_tick_info_t *ti = &w->ti[i];
        w->tick_mark = w->nent;
        w->cur_tick = ti->tick;
        const uint8_t *tab = read_table(w, ti, &rb);
        int k = !tab ? 1 : h5l_ckpt_table_chunks(tab, ti, w->seed, s, add_ent, w);
        if (k == H5L_ENOMEM) rc = -1;
        if (k) { /* eager: drop what it listed */
            w->nent = w->tick_mark;
            eager[neager++] = ti->tick;
        }
    }
    free(rb.win);
    free(rb.own);
    size_t *ix = NULL, nix = 0;
    for (size_t p = 0; !rc && p < w->nent; p += w->ent[p + 1] + 3) nix++;
    if (!rc && !(ix = malloc((nix ? nix : 1) * sizeof *ix))) rc = -1;
    h5l_ckpt_chunk_t *ch = NULL;
    uint64_t *lists = NULL;
    size_t nch = 0;
    if (!rc) {
        size_t j = 0;
        for (size_t p = 0; p < w->nent; p += w->ent[p + 1] + 3) ix[j++] = p;
        sort_base = w->ent;
        qsort(ix, nix, sizeof *ix, ent_cmp);
        ch = malloc((nix ? nix : 1) * sizeof *ch);
        lists = malloc((nix ? nix : 1) * sizeof *lists);
        if (!ch || !lists) rc = -1;
    }
    for (size_t i = 0, nl = 0; !rc && i < nix; i++) {
        const uint64_t *e = w->ent + ix[i];
        uint32_t nd = (uint32_t)e[1];
        uint64_t tick = e[2 + nd];
        h5l_ckpt_chunk_t *last = nch ? &ch[nch - 1] : NULL;
        if (last && last->objid == e[0] && !memcmp(last->coord, e + 2, nd * sizeof *e)) {
            if (last->ticks[last->nt - 1] != tick) { /* a repeat of (chunk, tick) is listed once */
                lists[nl++] = tick;
                last->nt++;
            }
            continue;
        }
        ch[nch].objid = (uint32_t)e[0];
        ch[nch].nd = nd;
        ch[nch].coord = e + 2;
        ch[nch].ticks = lists + nl;
        ch[nch].nt = 1;
        lists[nl++] = tick;
        nch++;
    }
    if (!rc) {
        h5l_ckpt_tick_t *tk = malloc(w->nti * sizeof *tk);
        if (!tk) rc = -1;
        for (size_t i = 0; !rc && i < w->nti; i++) {
            tk[i].info = w->ti[i];
            tk[i].ops = w->ops.p + w->opsoff[2 * i];
            tk[i].nops = (uint32_t)w->opsoff[2 * i + 1];
            tk[i].opslen = (i + 1 < w->nti ? w->opsoff[2 * i + 2] : w->ops.len) - w->opsoff[2 * i];
        }
        if (!rc) {
            uint64_t fsize = h5l_frame_size(H5L_TICK_LEN + tk[w->nti - 1].opslen);
            h5l_ckpt_t c = {
                w->first, w->ti[w->nti - 1].tick, w->tickpos, pos + fsize, w->prevpos, tk, eager, neager, ch, nch,
                NULL};
            size_t before = out->len;
            h5l_ckpt_encode(out, &c, w->seed);
            if (out->oom) {
                out->len = before;
                out->oom = 0; /* the TICK frame before it is intact */
                rc = -1;
            } else {
                w->prevpos = c.selfpos;
            }
        }
        free(tk);
    }
    free(ix);
    free(ch);
    free(lists);
    free(eager);
    return rc;
}

void h5l_ckpt_w_tick(h5l_ckpt_w_t *w, const h5l_tick_info_t *ti, uint32_t nops, const uint8_t *ops, size_t opslen,
                     uint64_t pos, const h5l_schema_t *s, h5l_buf_t *out)
{
    if (!w || w->broken) return;
    if (ti->tick != w->first + w->nti) { /* a gap: the chain cannot go on */
        w->broken = 1;
        return;
    }
    if (h5l_grow((void **)&w->ti, &w->cap_ti, w->nti + 1, sizeof *w->ti) ||
        h5l_grow((void **)&w->opsoff, &w->cap_opsoff, 2 * (w->nti + 1), sizeof *w->opsoff)) {
        w->broken = 1;
        return;
    }
    if (!w->nti) w->tickpos = pos;
    w->opsoff[2 * w->nti] = w->ops.len;
    w->opsoff[2 * w->nti + 1] = nops;
    h5l_buf_put(&w->ops, ops, opslen);
    if (w->ops.oom) {
        w->broken = 1;
        return;
    }
    w->ti[w->nti++] = *ti;
    w->tbytes += ti->table_size;
    /* due every N ticks, or sooner when their tables (read back to build
     * it) and ops (copied into it) add up to H5L_CKPT_TABLES: one flush
     * never reads back much, and a segment stays far below a frame's
     * largest payload (H5L_FRAME_MAX) however large its attributes */
    if (w->nti < w->every && w->tbytes + w->ops.len < H5L_CKPT_TABLES) return;
    if (build(w, pos, s, out)) { /* tried again at the next tick, a few times */
        if (++w->fails >= CKPT_TRIES) w->broken = 1;
        return;
    }
    w->fails = 0;
    w->first = ti->tick + 1;
    w->nti = 0;
    w->tbytes = 0;
    w->ops.len = 0;
}

void h5l_ckpt_w_resume(h5l_ckpt_w_t *w, uint64_t first, uint64_t prevpos)
{
    if (!w) return;
    w->first = first;
    w->prevpos = prevpos;
    w->nti = 0;
    w->tbytes = 0;
    w->ops.len = 0;
}

/* ---- the reader's side: the chain ---- */

#define SWIN ((size_t)1 << 20) /* backward search window */

/* The fixed fields of a checkpoint (format.md 3.5, offsets 0..47). */
typedef struct fixed {
    uint64_t first, last, tickpos, selfpos, prevpos;
    uint32_t slen; /* its summary's bytes (0: none) */
} fixed_t;

#define CKPT_TICK_MIN 9 /* varints of a tick's entry (h5l_ckpt_encode), a byte each at least */

/* Verify the frame at journal offset pos (its header's checksum, its type;
 * with whole, n bytes: the whole frame, and its payload's checksum) and
 * read its fixed fields, with the checks h5l_ckpt_decode makes of them. 0,
 * or -1. */
static int frame_fixed(const uint8_t *frame, size_t n, int whole, uint64_t seed, uint64_t pos, fixed_t *f)
{
    h5l_frame_hdr_t h;
    if (n < H5L_FRAME_LEN + H5L_CKPT_HDR || h5l_frame_hdr_decode(frame, seed, &h) != H5L_FRAME_OK ||
        h.type != H5L_REC_CKPT || h.len < H5L_CKPT_HDR ||
        (whole && (h5l_frame_size(h.len) != n || h5l_hash(frame + H5L_FRAME_LEN, h.len, seed) != h.sum)))
        return -1;
    const uint8_t *p = frame + H5L_FRAME_LEN;
    f->first = h5l_get_le64(p);
    f->last = h5l_get_le64(p + 8);
    f->tickpos = h5l_get_le64(p + 16);
    f->selfpos = h5l_get_le64(p + 24);
    f->prevpos = h5l_get_le64(p + 32);
    f->slen = (uint32_t)h5l_get_le64(p + 40);
    if (f->slen && (uint64_t)h.len < (uint64_t)H5L_CKPT_HDR + 8 + f->slen) return -1;
    /* each tick's entry takes at least CKPT_TICK_MIN bytes: a segment
     * cannot claim more ticks than its bytes hold (the reader sizes its
     * tables by the chain's last tick before decoding any segment) */
    if (f->last >= f->first && f->last - f->first >= (h.len - H5L_CKPT_HDR) / CKPT_TICK_MIN) return -1;
    if ((h5l_get_le64(p + 40) >> 32) || f->first == 0 || f->last < f->first || f->selfpos != pos || f->tickpos >= pos ||
        f->tickpos < H5L_JHDR_LEN || f->prevpos >= f->tickpos || (f->first == 1) != (f->prevpos == 0) ||
        (f->prevpos && f->prevpos < H5L_JHDR_LEN))
        return -1;
    return 0;
}

/* Read and verify the checkpoint frame at journal offset pos (< end): with
 * whole, all of it (frame_fixed); else its header and fixed fields only,
 * the rest being checked when it is decoded (h5l_ckpt_decode), which makes
 * the reader read the whole journal if it fails: the chain's older links
 * are then read once, not twice. 1 and *n its size (with whole, *buf its
 * bytes, owned) on success, 0 when it is not a usable checkpoint,
 * H5L_ENOMEM. */
/* The summary of the frame whose first `have` bytes are at fr (its fixed
 * fields in f), read from the file when it lies further, checked against
 * its checksum: 1 and *sum (owned, NULL when it has none), 0 when the
 * checksum fails or it cannot be read, H5L_ENOMEM. */
static int frame_sum(int fd, uint64_t base, uint64_t pos, const uint8_t *fr, size_t have, const fixed_t *f,
                     uint64_t seed, const char *what, uint8_t **sum)
{
    *sum = NULL;
    if (!f->slen) return 1;
    size_t at = H5L_FRAME_LEN + H5L_CKPT_HDR + 8;
    uint8_t *s = malloc(f->slen);
    if (!s) return H5L_ENOMEM;
    if (at + f->slen <= have)
        memcpy(s, fr + at, f->slen);
    else if (h5l_fd_read_all(fd, s, f->slen, base + pos + at, what, NULL)) {
        free(s);
        return 0;
    }
    if (h5l_hash(s, f->slen, seed) != h5l_get_le64(fr + at - 8)) {
        free(s);
        return 0;
    }
    *sum = s;
    return 1;
}

static int frame_at(int fd, uint64_t base, uint64_t pos, uint64_t end, uint64_t seed, const char *what, int whole,
                    uint8_t **buf, size_t *n, fixed_t *f, uint8_t **sum)
{
    *sum = NULL;
    uint8_t h[H5L_FRAME_LEN];
    h5l_frame_hdr_t fh;
    *buf = NULL;
    if (pos < H5L_JHDR_LEN || pos > end || end - pos < H5L_FRAME_LEN ||
        h5l_fd_read_all(fd, h, sizeof h, base + pos, what, NULL) ||
        h5l_frame_hdr_decode(h, seed, &fh) != H5L_FRAME_OK || fh.type != H5L_REC_CKPT ||
        h5l_frame_size(fh.len) > end - pos)
        return 0;
    *n = (size_t)h5l_frame_size(fh.len);
    if (!whole) { /* the first bytes: header, fixed fields, the summary's checksum and, mostly, the summary */
        uint8_t fx[1024];
        size_t want = *n < sizeof fx ? *n : sizeof fx;
        if (want < H5L_FRAME_LEN + H5L_CKPT_HDR + 8 || h5l_fd_read_all(fd, fx, want, base + pos, what, NULL) ||
            frame_fixed(fx, want, 0, seed, pos, f))
            return 0;
        return frame_sum(fd, base, pos, fx, want, f, seed, what, sum);
    }
    uint8_t *b = malloc(*n);
    if (!b) return H5L_ENOMEM;
    if (h5l_fd_read_all(fd, b, *n, base + pos, what, NULL) || frame_fixed(b, *n, 1, seed, pos, f)) {
        free(b);
        return 0;
    }
    int k = frame_sum(fd, base, pos, b, *n, f, seed, what, sum);
    if (k != 1) {
        free(b);
        return k;
    }
    *buf = b;
    return 1;
}

void h5l_ckpt_chain_free(h5l_ckpt_chain_t *ch)
{
    for (size_t i = 0; ch->sum && i < ch->n; i++) free(ch->sum[i]);
    free(ch->sum);
    free(ch->slen);
    free(ch->firsts);
    free(ch->lasts);
    free(ch->lens);
    free(ch->pos);
    memset(ch, 0, sizeof *ch);
}

/* Note a verified frame (newest first while walking back) and free its
 * bytes: the reader reads each again when it applies it, so a long chain
 * never sits in memory at once. */
/* One of the chain's parallel arrays from old to nc elements. */
static int grow_to(void **p, size_t old, size_t nc, size_t elem) { return h5l_grow(p, &old, nc, elem); }

static int chain_push(h5l_ckpt_chain_t *ch, size_t *cap, uint8_t *buf, size_t n, uint64_t pos, const fixed_t *f,
                      uint8_t *sum)
{
    free(buf);
    if (ch->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        if (grow_to((void **)&ch->lens, *cap, nc, sizeof *ch->lens) ||
            grow_to((void **)&ch->pos, *cap, nc, sizeof *ch->pos) ||
            grow_to((void **)&ch->firsts, *cap, nc, sizeof *ch->firsts) ||
            grow_to((void **)&ch->lasts, *cap, nc, sizeof *ch->lasts) ||
            grow_to((void **)&ch->slen, *cap, nc, sizeof *ch->slen) ||
            grow_to((void **)&ch->sum, *cap, nc, sizeof *ch->sum)) {
            free(sum);
            return H5L_ENOMEM;
        }
        *cap = nc;
    }
    ch->lens[ch->n] = n;
    ch->firsts[ch->n] = f->first;
    ch->lasts[ch->n] = f->last;
    ch->sum[ch->n] = sum;
    ch->slen[ch->n] = sum ? f->slen : 0;
    ch->pos[ch->n++] = pos;
    return 0;
}

int h5l_ckpt_chain_read(int fd, uint64_t base, uint64_t end, uint64_t seed, const char *what, h5l_ckpt_chain_t *ch)
{
    memset(ch, 0, sizeof *ch);
    if (end < H5L_JHDR_LEN + H5L_FRAME_LEN) return 0;
    uint64_t lim = end - H5L_JHDR_LEN > H5L_CKPT_SEARCH ? end - H5L_CKPT_SEARCH : H5L_JHDR_LEN;
    uint8_t *w = malloc(SWIN);
    if (!w) return H5L_ENOMEM;
    uint64_t wlo = 0, whi = 0, at = 0; /* the window holds journal bytes [wlo, whi) */
    uint8_t *buf = NULL, *sum = NULL;
    size_t n = 0;
    fixed_t f;
    int found = 0;
    /* frames start 8-aligned: the newest checkpoint header, from the end back */
    for (uint64_t p = (end - H5L_FRAME_LEN) & ~(uint64_t)7; p >= lim && !found; p -= 8) {
        if (p < wlo || p + H5L_FRAME_LEN > whi) {
            whi = p + H5L_FRAME_LEN;
            wlo = whi - lim > SWIN ? whi - SWIN : lim;
            size_t got;
            if (h5l_fd_read(fd, w, (size_t)(whi - wlo), base + wlo, &got, what, NULL) || got != whi - wlo) break;
        }
        const uint8_t *h = w + (p - wlo);
        if (h[4] == (H5L_REC_CKPT & 0xFF) && h[5] == H5L_REC_CKPT >> 8 && h[6] == 2 && h[7] == 0) {
            found = frame_at(fd, base, p, end, seed, what, 1, &buf, &n, &f, &sum); /* the newest: sizes the reader */
            at = p;
            if (found < 0) break;
        }
        if (p < 8) break;
    }
    free(w);
    if (found <= 0) return found;
    size_t cap = 0;
    int rc = chain_push(ch, &cap, buf, n, at, &f, sum);
    if (rc) {
        h5l_ckpt_chain_free(ch); /* (its first arrays may be made) */
        return rc;
    }
    ch->last = f.last;
    ch->next = at + n;
    /* back along the chain: each link ends right where the next segment's
     * first TICK frame begins, and covers the ticks just before it */
    while (f.first > 1) {
        fixed_t pf;
        uint8_t *pb = NULL, *ps = NULL;
        size_t pn;
        int k = frame_at(fd, base, f.prevpos, f.tickpos, seed, what, 0, &pb, &pn, &pf, &ps);
        if (k == 1 && (pf.last + 1 != f.first || f.prevpos + pn != f.tickpos)) {
            free(pb);
            free(ps);
            k = 0;
        }
        if (k == 1) {
            if ((k = chain_push(ch, &cap, pb, pn, f.prevpos, &pf, ps)) == 0) {
                f = pf;
                continue;
            }
        }
        h5l_ckpt_chain_free(ch);
        return k; /* 0: broken chain; or H5L_ENOMEM */
    }
    for (size_t i = 0, j = ch->n - 1; i < j; i++, j--) { /* oldest first */
        size_t l = ch->lens[i];
        ch->lens[i] = ch->lens[j];
        ch->lens[j] = l;
        l = ch->slen[i];
        ch->slen[i] = ch->slen[j];
        ch->slen[j] = l;
        uint64_t q = ch->pos[i];
        ch->pos[i] = ch->pos[j];
        ch->pos[j] = q;
        q = ch->firsts[i];
        ch->firsts[i] = ch->firsts[j];
        ch->firsts[j] = q;
        q = ch->lasts[i];
        ch->lasts[i] = ch->lasts[j];
        ch->lasts[j] = q;
        uint8_t *sp = ch->sum[i];
        ch->sum[i] = ch->sum[j];
        ch->sum[j] = sp;
    }
    return 1;
}

/* ---- the reader's side: the chunk map ---- */

/* Per variable: its chunks as records [coord[nd], ref, rn] in one array.
 * ref with its top bit set is a chunk's only tick, else the offset in the
 * map's pool of its first run of ticks, a run being [next run, k,
 * ticks[k]] (one per segment listing the chunk; 0 ends the list). rn packs
 * a count and a step: the record stands for cnt chunks, coord[0] + i for
 * i < cnt with the other coordinates the same, chunk i's only tick being
 * ref's + i * dt. A log of rows — a chunk a tick along the first
 * dimension, netCDF's default for a time series — keeps one record per
 * variable for its whole history (a record a chunk was 24 bytes, written
 * into fresh pages: a third of opening a log of a million such ticks). A
 * chunk of a run listed again by a later segment splits the variable's
 * runs for good (flat: a record a chunk, as a log that rewrites old rows
 * needs anyway).
 *
 * A log that appends (each segment's new chunks after all earlier ones,
 * as a growing time dimension makes them) keeps the array sorted and
 * looks chunks up by binary search: loading is appending, with no hash
 * table to build and no memory for one. The first chunk that arrives out
 * of order turns the variable flat and hashed (an open-addressing table
 * of record numbers, load <= 1/2). */
#define ONE ((uint64_t)1 << 63)
#define RN(cnt, dt) (((uint64_t)(cnt) << 32) | (uint64_t)(dt))
#define RN_CNT(x) ((x) >> 32)
#define RN_DT(x) ((x) & 0xFFFFFFFFu)
typedef struct cmvar {
    uint32_t nd;
    int hashed;     /* looked up by hash (implies flat) */
    int flat;       /* every record one chunk */
    uint64_t *ents; /* n records of nd + 2 u64s */
    size_t n, cap;  /* cap in u64s */
    size_t *slots;  /* hashed: record number + 1, 0: empty */
    size_t nslots;
} cmvar_t;

/* Births as runs: ticks t0 + i * dt for i < n (a log of rows has one a
 * tick, evenly spaced: one run). */
typedef struct brun {
    uint32_t t0, n, dt;
} brun_t;

struct h5l_ckmap {
    cmvar_t *vars; /* by objid; n 0: none yet */
    size_t nvars;
    uint64_t *pool; /* runs; pool[0] unused: offset 0 means none */
    size_t npool, cap_pool;
    brun_t *births; /* increasing ticks at which some chunk got its first tick (32 bits: a map of
                     * later ticks is refused, and the reader reads the whole journal) */
    size_t nbirths, cap_births;
    uint32_t *sb; /* scratch: one segment's births */
    size_t cap_sb;
    struct prog *pg; /* one segment's births so far, as progressions */
    size_t npg, cap_pg;
};

/* Ticks t0 + i * dt, i < cnt. */
typedef struct prog {
    uint64_t t0, cnt, dt;
} prog_t;

h5l_ckmap_t *h5l_ckmap_new(void) { return calloc(1, sizeof(h5l_ckmap_t)); }

void h5l_ckmap_free(h5l_ckmap_t *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->nvars; i++) {
        free(m->vars[i].ents);
        free(m->vars[i].slots);
    }
    free(m->vars);
    free(m->pool);
    free(m->births);
    free(m->sb);
    free(m->pg);
    free(m);
}

static uint64_t coord_hash(const uint64_t *c, uint32_t nd)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t d = 0; d < nd; d++) {
        h = (h ^ c[d]) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return h * 0x94D049BB133111EBull ^ (h >> 32);
}

static int coord_cmp(const uint64_t *a, const uint64_t *b, uint32_t nd)
{
    for (uint32_t d = 0; d < nd; d++)
        if (a[d] != b[d]) return a[d] < b[d] ? -1 : 1;
    return 0;
}

/* Hashed: the slot of coord, or the empty slot where it goes. */
static size_t cm_slot(const cmvar_t *v, const uint64_t *coord)
{
    size_t mask = v->nslots - 1, i = (size_t)coord_hash(coord, v->nd) & mask;
    while (v->slots[i] && coord_cmp(v->ents + (v->slots[i] - 1) * (v->nd + 2), coord, v->nd)) i = (i + 1) & mask;
    return i;
}

static int cm_rehash(cmvar_t *v, size_t n)
{
    size_t *s = calloc(n, sizeof *s);
    if (!s) return H5L_ENOMEM;
    free(v->slots);
    v->slots = s;
    v->nslots = n;
    for (size_t i = 0; i < v->n; i++) v->slots[cm_slot(v, v->ents + i * (v->nd + 2))] = i + 1;
    return 0;
}

/* Is coord after every chunk of the (sorted) variable's last record? */
static int after_last(const cmvar_t *v, const uint64_t *coord)
{
    const uint64_t *e = v->ents + (v->n - 1) * (v->nd + 2);
    if (!v->nd) return 0; /* a scalar has one chunk */
    uint64_t last0 = e[0] + RN_CNT(e[v->nd + 1]) - 1;
    if (coord[0] != last0) return coord[0] > last0;
    return coord_cmp(e + 1, coord + 1, v->nd - 1) < 0;
}

/* The record holding coord, and *idx its place in the record's run; or
 * NULL. */
static uint64_t *cm_find(const cmvar_t *v, const uint64_t *coord, uint64_t *idx)
{
    size_t st = v->nd + 2;
    *idx = 0;
    if (v->hashed) {
        size_t s = cm_slot(v, coord);
        return v->slots[s] ? v->ents + (v->slots[s] - 1) * st : NULL;
    }
    size_t lo = 0, hi = v->n; /* the last record whose first chunk is <= coord */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (coord_cmp(v->ents + mid * st, coord, v->nd) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return NULL;
    uint64_t *e = v->ents + (lo - 1) * st;
    uint64_t cnt = RN_CNT(e[v->nd + 1]);
    if (cnt == 1) return coord_cmp(e, coord, v->nd) ? NULL : e;
    if (coord_cmp(e + 1, coord + 1, v->nd - 1) || coord[0] - e[0] >= cnt) return NULL; /* (coord >= e) */
    *idx = coord[0] - e[0];
    return e;
}

/* Every record one chunk from now on. 0 or H5L_ENOMEM (nothing changed). */
static int cm_flatten(cmvar_t *v)
{
    size_t st = v->nd + 2, total = 0;
    for (size_t i = 0; i < v->n; i++) total += RN_CNT(v->ents[i * st + v->nd + 1]);
    if (total != v->n) {
        if (total > SIZE_MAX / st / sizeof(uint64_t)) return H5L_ENOMEM;
        uint64_t *ne = malloc(total * st * sizeof *ne), *o = ne;
        if (!ne) return H5L_ENOMEM;
        for (size_t i = 0; i < v->n; i++) {
            const uint64_t *e = v->ents + i * st;
            uint64_t cnt = RN_CNT(e[v->nd + 1]), dt = RN_DT(e[v->nd + 1]);
            for (uint64_t j = 0; j < cnt; j++, o += st) {
                memcpy(o, e, v->nd * sizeof *o);
                o[0] += j;
                o[v->nd] = cnt > 1 ? e[v->nd] + j * dt : e[v->nd]; /* a run's chunks have one tick each */
                o[v->nd + 1] = RN(1, 0);
            }
        }
        free(v->ents);
        v->ents = ne;
        v->n = total;
        v->cap = total * st;
    }
    v->flat = 1;
    return 0;
}

/* A new record [coord, ref] for cnt chunks along the first dimension (the
 * ticks of chunk i: ref's + i dt; cnt > 1 only for a run that comes after
 * every chunk of a sorted variable), or as many more on the last record's
 * run when they continue it. */
static int cm_append(cmvar_t *v, const uint64_t *coord, uint64_t ref, uint64_t cnt, uint64_t dt)
{
    size_t st = v->nd + 2;
    if (!v->hashed && v->n && !after_last(v, coord)) {
        size_t n = 64; /* out of order: flat and hashed from now on */
        if (cm_flatten(v)) return H5L_ENOMEM;
        while (n < 2 * (v->n + 1)) n *= 2;
        if (cm_rehash(v, n)) return H5L_ENOMEM;
        v->hashed = 1;
    }
    if (!v->flat && v->nd && v->n && (ref & ONE)) { /* the next chunks of the last run, at the next ticks of its step? */
        uint64_t *l = v->ents + (v->n - 1) * st, lc = RN_CNT(l[v->nd + 1]), lt0 = l[v->nd] & ~ONE, t0 = ref & ~ONE;
        uint64_t step = lc == 1 ? t0 - lt0 : RN_DT(l[v->nd + 1]); /* a record of one chunk takes the new step */
        if ((l[v->nd] & ONE) && coord[0] == l[0] + lc && !coord_cmp(l + 1, coord + 1, v->nd - 1) &&
            lc + cnt < UINT32_MAX && (lc > 1 || t0 > lt0) && step <= UINT32_MAX && t0 == lt0 + lc * step &&
            (cnt == 1 || dt == step)) {
            l[v->nd + 1] = RN(lc + cnt, step);
            return 0;
        }
    }
    if (v->hashed && 2 * (v->n + 1) > v->nslots && cm_rehash(v, 2 * v->nslots)) return H5L_ENOMEM;
    size_t cap0 = v->cap;
    if (h5l_grow_raw((void **)&v->ents, &v->cap, (v->n + 1) * st, sizeof *v->ents)) return H5L_ENOMEM;
    if (v->cap != cap0) /* filled from start to end: h5l_ckmap_trim gives back what is not */
        h5l_prefault(v->ents + cap0, (v->cap - cap0) * sizeof *v->ents);
    uint64_t *e = v->ents + v->n * st;
    for (uint32_t d = 0; d < v->nd; d++) e[d] = coord[d]; /* (a memcpy call of 16 bytes a chunk was 7%) */
    e[v->nd] = ref;
    e[v->nd + 1] = RN(cnt, cnt > 1 ? dt : 0);
    v->n++;
    if (v->hashed) v->slots[cm_slot(v, coord)] = v->n;
    return 0;
}

/* A run of k ticks in the pool; its offset, or 0 when out of memory. With
 * ARITH in its count the run is [next, k | ARITH, t0, dt]: the ticks t0 +
 * j dt, j < k (a segment's summary lists a chunk a time axis fills over
 * many ticks that way: 32 bytes, not 8 a tick). */
#define ARITH ((uint64_t)1 << 63)
static uint64_t cm_run_arith(h5l_ckmap_t *m, uint64_t t0, uint64_t k, uint64_t dt)
{
    if (!m->npool) m->npool = 1;
    if (h5l_grow_raw((void **)&m->pool, &m->cap_pool, m->npool + 4, sizeof *m->pool)) return 0;
    uint64_t run = m->npool;
    m->pool[run] = 0;
    m->pool[run + 1] = k | ARITH;
    m->pool[run + 2] = t0;
    m->pool[run + 3] = dt;
    m->npool += 4;
    return run;
}

static uint64_t cm_run(h5l_ckmap_t *m, const uint64_t *t, size_t k)
{
    if (!m->npool) m->npool = 1;
    if (h5l_grow_raw((void **)&m->pool, &m->cap_pool, m->npool + 2 + k, sizeof *m->pool)) return 0;
    uint64_t run = m->npool;
    m->pool[run] = 0;
    m->pool[run + 1] = k;
    memcpy(m->pool + run + 2, t, k * sizeof *t);
    m->npool += 2 + k;
    return run;
}

/* Birth tick b, after every earlier one. */
static int birth_push(h5l_ckmap_t *m, uint32_t b)
{
    brun_t *l = m->nbirths ? &m->births[m->nbirths - 1] : NULL;
    if (l && l->n == 1 && b > l->t0) {
        l->dt = b - l->t0;
        l->n = 2;
        return 0;
    }
    if (l && l->n > 1 && l->n < UINT32_MAX && (uint64_t)b == (uint64_t)l->t0 + (uint64_t)l->n * l->dt) {
        l->n++;
        return 0;
    }
    if (h5l_grow_raw((void **)&m->births, &m->cap_births, m->nbirths + 1, sizeof *m->births)) return H5L_ENOMEM;
    m->births[m->nbirths++] = (brun_t){b, 1, 0};
    return 0;
}

/* Births t0 + i * dt, i < cnt (after every earlier one, increasing). */
static int births_push(h5l_ckmap_t *m, uint64_t t0, uint64_t cnt, uint64_t dt)
{
    uint64_t i = 0;
    for (; i < cnt && i < 2; i++)
        if (birth_push(m, (uint32_t)(t0 + i * dt))) return H5L_ENOMEM;
    brun_t *l = &m->births[m->nbirths - 1];
    if (cnt > 2 && l->n >= 2 && l->dt == dt && (uint64_t)l->t0 + (uint64_t)(l->n - 1) * dt == t0 + dt &&
        (uint64_t)l->n + (cnt - 2) < UINT32_MAX) { /* the rest continue the run they joined */
        l->n += (uint32_t)(cnt - 2);
        return 0;
    }
    for (; i < cnt; i++)
        if (birth_push(m, (uint32_t)(t0 + i * dt))) return H5L_ENOMEM;
    return 0;
}

/* A segment's new chunks got their first ticks t0 + i * dt, i < cnt. */
static int prog_add(h5l_ckmap_t *m, uint64_t t0, uint64_t cnt, uint64_t dt)
{
    if (t0 + (cnt - 1) * dt > UINT32_MAX) return H5L_ENOMEM; /* (the map keeps births in 32 bits) */
    if (h5l_grow_raw((void **)&m->pg, &m->cap_pg, m->npg + 1, sizeof *m->pg)) return H5L_ENOMEM;
    m->pg[m->npg++] = (prog_t){t0, cnt, dt};
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The segment's births, sorted, each once, onto the map's (all after
 * earlier segments'). Every variable written at every tick gives the same
 * progression many times: pushed once. */
static int births_flush(h5l_ckmap_t *m)
{
    size_t n = m->npg, total = 0, same = 1;
    m->npg = 0;
    if (!n) return 0;
    for (size_t i = 0; i < n; i++) {
        const prog_t *p = &m->pg[i];
        same &= p->t0 == m->pg[0].t0 && p->cnt == m->pg[0].cnt && p->dt == m->pg[0].dt;
        total += p->cnt;
    }
    if (same) return births_push(m, m->pg[0].t0, m->pg[0].cnt, m->pg[0].dt);
    if (h5l_grow_raw((void **)&m->sb, &m->cap_sb, total, sizeof *m->sb)) return H5L_ENOMEM;
    size_t k = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < m->pg[i].cnt; j++) {
            uint32_t t = (uint32_t)(m->pg[i].t0 + j * m->pg[i].dt);
            if (k && t < m->sb[k - 1]) sorted = 0;
            m->sb[k++] = t;
        }
    /* (variables one after another: their ticks restart, an insertion sort was quadratic) */
    if (!sorted) qsort(m->sb, k, sizeof *m->sb, u32_cmp);
    for (size_t i = 0; i < k; i++)
        if ((!i || m->sb[i - 1] != m->sb[i]) && birth_push(m, m->sb[i])) return H5L_ENOMEM;
    return 0;
}

/* Chunk coord of objid (rank nd) listed with ticks t[0..nt) by the segment
 * being added. */
static int add_entry(h5l_ckmap_t *m, uint32_t objid, uint32_t nd, const uint64_t *coord, const uint64_t *t, size_t nt,
                     const prog_t *ar)
{
    if (h5l_grow((void **)&m->vars, &m->nvars, (size_t)objid + 1, sizeof *m->vars)) return H5L_ENOMEM;
    cmvar_t *v = &m->vars[objid];
    if (!v->n) v->nd = nd;
    if (v->nd != nd) return H5L_ECORRUPT;
    /* appending (sorted, after the last chunk): new, no search */
    int after = !v->n || (!v->hashed && after_last(v, coord));
    uint64_t idx;
    uint64_t *e = after ? NULL : cm_find(v, coord, &idx);
    if (e && RN_CNT(e[v->nd + 1]) > 1) { /* in a run: a record a chunk from now on */
        if (cm_flatten(v)) return H5L_ENOMEM;
        e = cm_find(v, coord, &idx);
    }
    /* ar: the ticks ar->t0 + j ar->dt, j < ar->cnt, instead of t[0..nt) */
    uint64_t first = ar ? ar->t0 : t[0];
    int one = ar ? ar->cnt == 1 : nt == 1;
    if (e) { /* listed by an earlier segment: a run more at the end */
        if (e[v->nd] & ONE) {
            uint64_t t0 = e[v->nd] & ~ONE, r0 = cm_run(m, &t0, 1);
            if (!r0) return H5L_ENOMEM;
            e[v->nd] = r0;
        }
        uint64_t run = ar ? cm_run_arith(m, ar->t0, ar->cnt, ar->dt) : cm_run(m, t, nt), at = e[v->nd];
        if (!run) return H5L_ENOMEM;
        while (m->pool[at]) at = m->pool[at];
        m->pool[at] = run;
        return 0;
    }
    uint64_t ref = one ? first | ONE : ar ? cm_run_arith(m, ar->t0, ar->cnt, ar->dt) : cm_run(m, t, nt);
    if (!ref || cm_append(v, coord, ref, 1, 0)) return H5L_ENOMEM;
    return prog_add(m, first, 1, 0);
}

int h5l_ckmap_add(h5l_ckmap_t *m, const h5l_ckpt_t *c)
{
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        int rc = add_entry(m, k->objid, k->nd, k->coord, k->ticks, k->nt, NULL);
        if (rc) return rc;
    }
    return births_flush(m);
}

/* cnt chunks coord + i e0 along the first dimension, each new, after the
 * variable's last, with the one tick t0 + i dt: as one record, or one
 * more stretch of the last record's run. 1 if done so, 0 if the run must
 * go chunk by chunk (the variable is flat, or ticks past 32 bits). */
static int add_row_run(h5l_ckmap_t *m, const h5l_ckchunk_run_t *r)
{
    if (h5l_grow((void **)&m->vars, &m->nvars, (size_t)r->objid + 1, sizeof *m->vars)) return H5L_ENOMEM;
    cmvar_t *v = &m->vars[r->objid];
    if (v->n && (v->nd != r->nd || v->flat || v->hashed || !after_last(v, r->coord))) return 0;
    if (r->dt > UINT32_MAX || r->t0 + (r->cnt - 1) * r->dt > UINT32_MAX) return 0;
    if (!v->n) v->nd = r->nd;
    int rc = cm_append(v, r->coord, r->t0 | ONE, r->cnt, r->dt);
    if (!rc) rc = prog_add(m, r->t0, r->cnt, r->dt);
    return rc ? rc : 1;
}

int h5l_ckmap_add_runs(h5l_ckmap_t *m, const h5l_cksum_t *s)
{
    for (size_t i = 0; i < s->ncr; i++) {
        const h5l_ckchunk_run_t *r = &s->cr[i];
        if (r->cnt > 1) {
            int k = add_row_run(m, r);
            if (k < 0) return k;
            if (k == 1) continue;
        }
        if (r->cnt == 1) { /* one chunk, its k ticks evenly spaced */
            prog_t ar = {r->t0, r->k, r->dt};
            int rc = add_entry(m, r->objid, r->nd, r->coord, NULL, 0, &ar);
            if (rc) return rc;
            continue;
        }
        uint64_t co[H5L_MAX_DIMS], tk; /* chunk by chunk, a tick each */
        memcpy(co, r->coord, r->nd * sizeof *co);
        for (uint64_t j = 0; j < r->cnt; j++) {
            co[0] = r->coord[0] + j;
            tk = r->t0 + j * r->dt;
            int rc = add_entry(m, r->objid, r->nd, co, &tk, 1, NULL);
            if (rc) return rc;
        }
    }
    return births_flush(m);
}

/* Shrink *p (capacity *cap elements) to n. */
static void shrink(void **p, size_t *cap, size_t n, size_t elem)
{
    void *q = n ? realloc(*p, n * elem) : NULL;
    if (q) {
        *p = q;
        *cap = n;
    }
}

void h5l_ckmap_trim(h5l_ckmap_t *m)
{
    shrink((void **)&m->pool, &m->cap_pool, m->npool, sizeof *m->pool);
    shrink((void **)&m->births, &m->cap_births, m->nbirths, sizeof *m->births);
    free(m->sb);
    m->sb = NULL;
    m->cap_sb = 0;
    free(m->pg);
    m->pg = NULL;
    m->cap_pg = 0;
    for (size_t i = 0; i < m->nvars; i++) {
        cmvar_t *v = &m->vars[i];
        shrink((void **)&v->ents, &v->cap, v->n * (v->nd + 2), sizeof *v->ents);
    }
}

int h5l_ckmap_ticks(const h5l_ckmap_t *m, uint32_t objid, const uint64_t *coord, uint64_t tick, uint64_t **buf,
                    size_t *cap, size_t *n)
{
    *n = 0;
    if (objid >= m->nvars || !m->vars[objid].n) return 0;
    const cmvar_t *v = &m->vars[objid];
    uint64_t idx;
    const uint64_t *e = cm_find(v, coord, &idx);
    if (!e) return 0;
    uint64_t ref = e[v->nd];
    if (ref & ONE) {
        uint64_t t = (ref & ~ONE) + idx * RN_DT(e[v->nd + 1]);
        if (t > tick) return 0;
        if (h5l_grow((void **)buf, cap, 1, sizeof **buf)) return H5L_ENOMEM;
        (*buf)[(*n)++] = t;
        return 0;
    }
    for (uint64_t run = ref; run; run = m->pool[run]) {
        uint64_t k = m->pool[run + 1] & ~ARITH;
        int ar = (m->pool[run + 1] & ARITH) != 0;
        const uint64_t *t = m->pool + run + 2;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t ti = ar ? t[0] + i * t[1] : t[i];
            if (ti > tick) return 0;
            if (h5l_grow((void **)buf, cap, *n + 1, sizeof **buf)) return H5L_ENOMEM;
            (*buf)[(*n)++] = ti;
        }
    }
    return 0;
}

int h5l_ckmap_chunk_runs(const h5l_ckmap_t *m, uint32_t objid, uint64_t tick,
                         int (*fn)(void *, const uint64_t *, uint64_t), void *ctx)
{
    if (objid >= m->nvars) return 0;
    const cmvar_t *v = &m->vars[objid];
    for (size_t i = 0; i < v->n; i++) {
        const uint64_t *e = v->ents + i * (v->nd + 2);
        uint64_t ref = e[v->nd], cnt = RN_CNT(e[v->nd + 1]), dt = RN_DT(e[v->nd + 1]);
        uint64_t first = ref & ONE ? ref & ~ONE : m->pool[ref + 2];
        if (first > tick) continue;
        uint64_t n = cnt > 1 ? (tick - first) / dt + 1 : 1; /* a run's ticks increase */
        int rc = fn(ctx, e, n < cnt ? n : cnt);
        if (rc) return rc;
    }
    return 0;
}

uint64_t h5l_ckmap_version(const h5l_ckmap_t *m, uint64_t tick)
{
    size_t lo = 0, hi = m->nbirths;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->births[mid].t0 <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return 0;
    const brun_t *b = &m->births[lo - 1];
    uint64_t i = b->n == 1 ? 0 : (tick - b->t0) / b->dt;
    if (i > b->n - 1) i = b->n - 1;
    return b->t0 + i * b->dt;
}

size_t h5l_ckmap_memory(const h5l_ckmap_t *m)
{
    size_t b = sizeof *m + m->cap_pool * 8 + m->cap_births * sizeof *m->births + m->cap_sb * 4 +
               m->cap_pg * sizeof *m->pg + m->nvars * sizeof *m->vars;
    for (size_t i = 0; i < m->nvars; i++) b += m->vars[i].cap * 8 + m->vars[i].nslots * sizeof(size_t);
    return b;
}
