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

#include "fdio.h"
#include "format.h"
#include "grow.h"

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

void h5l_ckpt_encode(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed)
{
    h5l_buf_t p = {0};
    h5l_buf_u64(&p, c->first);
    h5l_buf_u64(&p, c->last);
    h5l_buf_u64(&p, c->tickpos);
    h5l_buf_u64(&p, c->selfpos);
    h5l_buf_u64(&p, c->prevpos);
    h5l_buf_u64(&p, 0);
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
    uint64_t zero = h5l_cur_u64(&cur);
    if (cur.bad || zero || c->first == 0 || c->last < c->first || c->selfpos != pos || c->tickpos >= pos ||
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

/* ---- the reader's side: the chain ---- */

#define SWIN ((size_t)1 << 20) /* backward search window */

/* The fixed fields of a checkpoint (format.md 3.5, offsets 0..47). */
typedef struct fixed {
    uint64_t first, last, tickpos, selfpos, prevpos;
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
    /* each tick's entry takes at least CKPT_TICK_MIN bytes: a segment
     * cannot claim more ticks than its bytes hold (the reader sizes its
     * tables by the chain's last tick before decoding any segment) */
    if (f->last >= f->first && f->last - f->first >= (h.len - H5L_CKPT_HDR) / CKPT_TICK_MIN) return -1;
    if (h5l_get_le64(p + 40) || f->first == 0 || f->last < f->first || f->selfpos != pos || f->tickpos >= pos ||
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
static int frame_at(int fd, uint64_t base, uint64_t pos, uint64_t end, uint64_t seed, const char *what, int whole,
                    uint8_t **buf, size_t *n, fixed_t *f)
{
    uint8_t h[H5L_FRAME_LEN];
    h5l_frame_hdr_t fh;
    *buf = NULL;
    if (pos < H5L_JHDR_LEN || pos > end || end - pos < H5L_FRAME_LEN ||
        h5l_fd_read_all(fd, h, sizeof h, base + pos, what, NULL) ||
        h5l_frame_hdr_decode(h, seed, &fh) != H5L_FRAME_OK || fh.type != H5L_REC_CKPT ||
        h5l_frame_size(fh.len) > end - pos)
        return 0;
    *n = (size_t)h5l_frame_size(fh.len);
    if (!whole) {
        uint8_t fx[H5L_FRAME_LEN + H5L_CKPT_HDR];
        return *n >= sizeof fx && !h5l_fd_read_all(fd, fx, sizeof fx, base + pos, what, NULL) &&
               !frame_fixed(fx, sizeof fx, 0, seed, pos, f);
    }
    uint8_t *b = malloc(*n);
    if (!b) return H5L_ENOMEM;
    if (h5l_fd_read_all(fd, b, *n, base + pos, what, NULL) || frame_fixed(b, *n, 1, seed, pos, f)) {
        free(b);
        return 0;
    }
    *buf = b;
    return 1;
}

void h5l_ckpt_chain_free(h5l_ckpt_chain_t *ch)
{
    free(ch->lens);
    free(ch->pos);
    memset(ch, 0, sizeof *ch);
}

/* Note a verified frame (newest first while walking back) and free its
 * bytes: the reader reads each again when it applies it, so a long chain
 * never sits in memory at once. */
static int chain_push(h5l_ckpt_chain_t *ch, size_t *cap, uint8_t *buf, size_t n, uint64_t pos)
{
    free(buf);
    if (ch->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        size_t *l = realloc(ch->lens, nc * sizeof *l);
        if (l) ch->lens = l;
        uint64_t *p = l ? realloc(ch->pos, nc * sizeof *p) : NULL;
        if (p) ch->pos = p;
        if (!p) return H5L_ENOMEM;
        *cap = nc;
    }
    ch->lens[ch->n] = n;
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
    uint8_t *buf = NULL;
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
            found = frame_at(fd, base, p, end, seed, what, 1, &buf, &n, &f); /* the newest: sizes the reader */
            at = p;
            if (found < 0) break;
        }
        if (p < 8) break;
    }
    free(w);
    if (found <= 0) return found;
    size_t cap = 0;
    int rc = chain_push(ch, &cap, buf, n, at);
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
        uint8_t *pb = NULL;
        size_t pn;
        int k = frame_at(fd, base, f.prevpos, f.tickpos, seed, what, 0, &pb, &pn, &pf);
        if (k == 1 && (pf.last + 1 != f.first || f.prevpos + pn != f.tickpos)) {
            free(pb);
            k = 0;
        }
        if (k == 1) {
            if ((k = chain_push(ch, &cap, pb, pn, f.prevpos)) == 0) {
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
        uint64_t q = ch->pos[i];
        ch->pos[i] = ch->pos[j];
        ch->pos[j] = q;
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
};

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

/* A new record [coord, ref], or one chunk more on the last record's run. */
static int cm_insert(cmvar_t *v, const uint64_t *coord, uint64_t ref)
{
    size_t st = v->nd + 2;
    if (!v->hashed && v->n && !after_last(v, coord)) {
        size_t n = 64; /* out of order: flat and hashed from now on */
        if (cm_flatten(v)) return H5L_ENOMEM;
        while (n < 2 * (v->n + 1)) n *= 2;
        if (cm_rehash(v, n)) return H5L_ENOMEM;
        v->hashed = 1;
    }
    if (!v->flat && v->nd && v->n && (ref & ONE)) { /* the next chunk of the last run, the next tick of its step? */
        uint64_t *l = v->ents + (v->n - 1) * st, cnt = RN_CNT(l[v->nd + 1]), dt = RN_DT(l[v->nd + 1]);
        uint64_t t = ref & ~ONE, t0 = l[v->nd] & ~ONE;
        if ((l[v->nd] & ONE) && coord[0] == l[0] + cnt && !coord_cmp(l + 1, coord + 1, v->nd - 1) &&
            cnt < UINT32_MAX) {
            if (cnt == 1 && t > t0 && t - t0 <= UINT32_MAX) {
                l[v->nd + 1] = RN(2, t - t0);
                return 0;
            }
            if (cnt > 1 && t == t0 + cnt * dt) {
                l[v->nd + 1] = RN(cnt + 1, dt);
                return 0;
            }
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
    e[v->nd + 1] = RN(1, 0);
    v->n++;
    if (v->hashed) v->slots[cm_slot(v, coord)] = v->n;
    return 0;
}

/* A run of k ticks in the pool; its offset, or 0 when out of memory. */
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

int h5l_ckmap_add(h5l_ckmap_t *m, const h5l_ckpt_t *c)
{
    size_t nb = 0; /* this segment's births, in m->sb */
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        if (h5l_grow((void **)&m->vars, &m->nvars, (size_t)k->objid + 1, sizeof *m->vars)) return H5L_ENOMEM;
        cmvar_t *v = &m->vars[k->objid];
        if (!v->n) v->nd = k->nd;
        if (v->nd != k->nd) return H5L_ECORRUPT;
        /* appending (sorted, after the last chunk): new, no search */
        int after = !v->n || (!v->hashed && after_last(v, k->coord));
        uint64_t idx;
        uint64_t *e = after ? NULL : cm_find(v, k->coord, &idx);
        if (e && RN_CNT(e[v->nd + 1]) > 1) { /* in a run: a record a chunk from now on */
            if (cm_flatten(v)) return H5L_ENOMEM;
            e = cm_find(v, k->coord, &idx);
        }
        if (e) { /* listed by an earlier segment: a run more at the end */
            if (e[v->nd] & ONE) {
                uint64_t t0 = e[v->nd] & ~ONE, r0 = cm_run(m, &t0, 1);
                if (!r0) return H5L_ENOMEM;
                e[v->nd] = r0;
            }
            uint64_t run = cm_run(m, k->ticks, k->nt), at = e[v->nd];
            if (!run) return H5L_ENOMEM;
            while (m->pool[at]) at = m->pool[at];
            m->pool[at] = run;
            continue;
        }
        uint64_t ref = k->nt == 1 ? k->ticks[0] | ONE : cm_run(m, k->ticks, k->nt);
        if (!ref || cm_insert(v, k->coord, ref)) return H5L_ENOMEM;
        if (k->ticks[0] > UINT32_MAX || h5l_grow_raw((void **)&m->sb, &m->cap_sb, nb + 1, sizeof *m->sb))
            return H5L_ENOMEM;
        m->sb[nb++] = (uint32_t)k->ticks[0];
    }
    /* this segment's births: sorted, each once (all after earlier segments') */
    uint32_t *b = m->sb;
    for (size_t i = 1; i < nb; i++) { /* mostly sorted already: insertion sort */
        uint32_t t = b[i];
        size_t j = i;
        while (j && b[j - 1] > t) {
            b[j] = b[j - 1];
            j--;
        }
        b[j] = t;
    }
    for (size_t i = 0; i < nb; i++)
        if ((!i || b[i - 1] != b[i]) && birth_push(m, b[i])) return H5L_ENOMEM;
    return 0;
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
        uint64_t k = m->pool[run + 1];
        const uint64_t *t = m->pool + run + 2;
        for (uint64_t i = 0; i < k; i++) {
            if (t[i] > tick) return 0;
            if (h5l_grow((void **)buf, cap, *n + 1, sizeof **buf)) return H5L_ENOMEM;
            (*buf)[(*n)++] = t[i];
        }
    }
    return 0;
}

int h5l_ckmap_chunks(const h5l_ckmap_t *m, uint32_t objid, uint64_t tick, int (*fn)(void *, const uint64_t *),
                     void *ctx)
{
    if (objid >= m->nvars) return 0;
    const cmvar_t *v = &m->vars[objid];
    uint64_t c[H5L_MAX_DIMS];
    for (size_t i = 0; i < v->n; i++) {
        const uint64_t *e = v->ents + i * (v->nd + 2);
        uint64_t ref = e[v->nd], cnt = RN_CNT(e[v->nd + 1]), dt = RN_DT(e[v->nd + 1]);
        uint64_t first = ref & ONE ? ref & ~ONE : m->pool[ref + 2];
        if (first > tick) continue;
        if (cnt == 1) {
            int rc = fn(ctx, e);
            if (rc) return rc;
            continue;
        }
        memcpy(c, e, v->nd * sizeof *c);
        for (uint64_t j = 0; j < cnt && first + j * dt <= tick; j++) { /* a run's ticks increase */
            c[0] = e[0] + j;
            int rc = fn(ctx, c);
            if (rc) return rc;
        }
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
               m->nvars * sizeof *m->vars;
    for (size_t i = 0; i < m->nvars; i++) b += m->vars[i].cap * 8 + m->vars[i].nslots * sizeof(size_t);
    return b;
}
