/* rdata.c — verified reads of a log-layout file's data, and chunk queries.
 *
 * Reading: the records of every index chunk the box touches (chunks
 * partition space; a record hidden under newer ones in every chunk it
 * touches is left out), each once, in sequence order, go to the
 * transposition engine (xfer.h): it marks the log segments their pieces
 * need, reads each once in windows and copies the pieces out in log
 * order, so the later sequence wins. Data comes from the log with pread at
 * absolute offsets — no mmap, so a file truncated under us yields EIO,
 * never SIGBUS — and every byte is verified against the checksum of its
 * data segment before it is used (log_read): a segment wholly inside a
 * read is hashed where it lands, a segment the read only touches is read
 * whole into a small per-thread cache of verified segments (consecutive
 * small reads of one segment then cost one pread and one hash), and its
 * offset into the reader's table of verified segments: a later small read
 * of a segment found there reads its own bytes only. */
#include "rdint.h"

/* ---- verified reads of log data ------------------------------------- */

/* A few verified segments per thread, so consecutive small reads of one
 * segment (a column, a reply cut mid-segment) read and hash it once. Keyed
 * by the reader's serial number (never reused) and the segment's offset:
 * log bytes never change once committed. Freed when the thread ends. */
#define SEGC_N 4
typedef struct segent {
    uint64_t serial, off;
    size_t len, cap;
    uint8_t *data;
} segent_t;
typedef struct segcache {
    segent_t e[SEGC_N];
    unsigned next;
} segcache_t;

static pthread_key_t segc_key;
static pthread_once_t segc_once = PTHREAD_ONCE_INIT;

static void segc_free(void *p)
{
    segcache_t *c = p;
    for (int i = 0; i < SEGC_N; i++) free(c->e[i].data);
    free(c);
}
static void segc_init(void) { pthread_key_create(&segc_key, segc_free); }

static segcache_t *segc_get(void)
{
    pthread_once(&segc_once, segc_init);
    segcache_t *c = pthread_getspecific(segc_key);
    if (!c && (c = calloc(1, sizeof *c)) && pthread_setspecific(segc_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

/* Segments this reader has verified whole: a lossy table (two slots a
 * segment offset may take, a later segment overwriting), so memory stays
 * 64 KiB a reader whatever the log's size; a segment pushed out is
 * verified again when next read. Why: a live daemon serving a page of
 * one-row chunks reads 256 chunks of 16 bytes, each from another tick's
 * segment; reading and hashing each 32 KiB segment to deliver 16 bytes,
 * again at every poll, was 1.3 GB/s of copies and hashes, most of the
 * daemon's time after 3,000 ticks. Log bytes never change once committed
 * (a file changed in place afterwards is seen by the next reader, as with
 * the per-thread cache). Lock-free: slots hold offset + 1, written and
 * read atomically, under the reader's read lock (any thread). */
#define VSEG_LOG 13

static _Atomic uint64_t *vseg_table(h5l_reader_t *r)
{
    _Atomic uint64_t *t = atomic_load(&r->vseg);
    if (t) return t;
    _Atomic uint64_t *n = calloc((size_t)1 << VSEG_LOG, sizeof *n);
    if (!n) return NULL;
    _Atomic uint64_t *none = NULL;
    if (atomic_compare_exchange_strong(&r->vseg, &none, n)) return n;
    free((void *)n);
    return none; /* another thread's */
}

static size_t vseg_slot(uint64_t so) { return (size_t)((so * 0x9E3779B97F4A7C15ull) >> (64 - VSEG_LOG)); }

static int vseg_has(h5l_reader_t *r, uint64_t so)
{
    _Atomic uint64_t *t = atomic_load(&r->vseg);
    if (!t) return 0;
    size_t h = vseg_slot(so);
    return atomic_load_explicit(&t[h], memory_order_relaxed) == so + 1 ||
           atomic_load_explicit(&t[h ^ 1], memory_order_relaxed) == so + 1;
}

static void vseg_put(h5l_reader_t *r, uint64_t so)
{
    _Atomic uint64_t *t = vseg_table(r);
    if (!t) return; /* (out of memory: verified again next time) */
    size_t h = vseg_slot(so);
    if (atomic_load_explicit(&t[h], memory_order_relaxed) != 0) h ^= 1;
    atomic_store_explicit(&t[h], so + 1, memory_order_relaxed);
}

uint64_t h5l_rd_vseg_count(h5l_reader_t *r)
{
    _Atomic uint64_t *t = atomic_load(&r->vseg);
    uint64_t n = 0;
    for (size_t i = 0; t && i < ((size_t)1 << VSEG_LOG); i++)
        n += atomic_load_explicit(&t[i], memory_order_relaxed) != 0;
    return n;
}

static int seg_mismatch(h5l_reader_t *r, uint64_t tick, uint32_t rank, uint64_t off, uint64_t len, h5l_err_t *err)
{
    return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu, rank %u: log data [%llu, %llu) fails its checksum", r->path,
                       (unsigned long long)tick, rank, (unsigned long long)off, (unsigned long long)(off + len));
}

/* Read exactly n log bytes at off: H5L_OK or H5L_EIO (a read error, or a
 * file truncated under us). */
static int seg_pread(h5l_reader_t *r, void *buf, size_t n, uint64_t off, h5l_err_t *err)
{
    size_t got;
    h5l_err_t e2;
    if (h5l_fd_read(r->fd, buf, n, off, &got, r->path, &e2))
        return h5l_err_set(err, H5L_EIO, "%s: reading log data at %llu: %s", r->path, (unsigned long long)off,
                           strerror(errno));
    if (got != n)
        return h5l_err_set(err, H5L_EIO, "%s: reading log data at %llu: file truncated", r->path,
                           (unsigned long long)off);
    return H5L_OK;
}

/* Segment j of (tick, rank) — absolute offset *off, length *len — and its
 * checksum. */
static uint64_t seg_of(const h5l_reader_t *r, const tickx_t *x, uint32_t rank, uint64_t j, uint64_t *off, uint64_t *len)
{
    uint64_t seg = (uint64_t)1 << r->seglog, rs = x->rstart[rank], re = x->rstart[rank + 1];
    *off = rs + j * seg;
    *len = re - *off < seg ? re - *off : seg;
    return x->sums[x->segbase[rank] + j];
}

/* Read n log bytes at absolute offset off, inside the data of (tick,
 * rank), into dst, verified by whole segments. Call with the read lock. */
static int log_read(h5l_reader_t *r, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err)
{
    if (n == 0) return H5L_OK;
    if (tick < 1 || tick > r->nticks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    tickx_t xv;
    const tickx_t *x = &xv;
    int xrc = h5l_rd_tick_x(r, tick, &xv, err); /* (its segment's records filled first, if need be) */
    if (xrc) return xrc;
    if (rank >= x->nranks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    uint64_t rs = x->rstart[rank], re = x->rstart[rank + 1];
    if (off < rs || n > re - off)
        return h5l_err_set(err, H5L_EINVAL, "%s: read [%llu, +%zu) outside the data of tick %llu rank %u", r->path,
                           (unsigned long long)off, n, (unsigned long long)tick, rank);
    uint64_t seglog = r->seglog, end = off + n;
    uint64_t j = (off - rs) >> seglog, jlast = (end - 1 - rs) >> seglog;
    for (; j <= jlast; j++) {
        uint64_t so, sl;
        uint64_t sum = seg_of(r, x, rank, j, &so, &sl);
        if (so >= off && so + sl <= end) {
            /* whole segments inside the read: into place with one pread,
             * then hashed there */
            uint64_t k = j;
            uint64_t run = sl;
            while (k < jlast) {
                uint64_t o2, l2;
                seg_of(r, x, rank, k + 1, &o2, &l2);
                if (o2 + l2 > end) break;
                run += l2;
                k++;
            }
            int e = seg_pread(r, dst + (so - off), (size_t)run, so, err);
            if (e) return e;
            h5l_rd_count_read(r, so, run);
            for (uint64_t q = j; q <= k; q++) {
                uint64_t o2, l2;
                uint64_t s2 = seg_of(r, x, rank, q, &o2, &l2);
                if (h5l_hash(dst + (o2 - off), (size_t)l2, h5l_seg_seed(r->seed, tick, rank, q)) != s2)
                    return seg_mismatch(r, tick, rank, o2, l2, err);
                vseg_put(r, o2);
            }
            j = k;
            continue;
        }
        /* a segment the read only touches: through the cache */
        uint64_t a = so > off ? so : off, b = so + sl < end ? so + sl : end;
        segcache_t *c = segc_get();
        segent_t *e = NULL;
        for (int i = 0; c && i < SEGC_N; i++)
            if (c->e[i].serial == r->serial && c->e[i].off == so && c->e[i].len == sl) e = &c->e[i];
        if (!e && vseg_has(r, so)) { /* verified before: its bytes alone */
            int ioe = seg_pread(r, dst + (a - off), (size_t)(b - a), a, err);
            if (ioe) return ioe;
            atomic_fetch_add(&r->stat_bytes, b - a);
            h5l_rd_count_delivered(r, a, b - a);
            continue;
        }
        uint8_t *tmp = NULL;
        const uint8_t *src;
        if (e) {
            src = e->data;
        } else {
            uint8_t *buf;
            if (c) {
                e = &c->e[c->next++ % SEGC_N];
                if (e->cap < sl) {
                    uint8_t *d = realloc(e->data, (size_t)sl);
                    if (!d) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
                    e->data = d;
                    e->cap = (size_t)sl;
                }
                e->serial = 0; /* invalid until verified */
                buf = e->data;
            } else if (!(buf = tmp = malloc((size_t)sl))) {
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            }
            int ioe = seg_pread(r, buf, (size_t)sl, so, err);
            if (ioe) {
                free(tmp);
                return ioe;
            }
            atomic_fetch_add(&r->stat_bytes, sl);
            if (h5l_hash(buf, (size_t)sl, h5l_seg_seed(r->seed, tick, rank, j)) != sum) {
                free(tmp);
                return seg_mismatch(r, tick, rank, so, sl, err);
            }
            if (e) {
                e->serial = r->serial;
                e->off = so;
                e->len = (size_t)sl;
            }
            vseg_put(r, so);
            src = buf;
        }
        memcpy(dst + (a - off), src + (a - so), (size_t)(b - a));
        h5l_rd_count_delivered(r, a, b - a);
        free(tmp);
    }
    return H5L_OK;
}

int h5l_reader_pread(h5l_reader_t *r, uint64_t tick, uint32_t rank, void *buf, size_t n, uint64_t off, h5l_err_t *err)
{
    h5l_rd_lock(r);
    int rc = log_read(r, tick, rank, off, n, buf, err);
    h5l_rd_unlock(r);
    return rc;
}

int h5l_reader_verify(h5l_reader_t *r, uint64_t tick, uint64_t *bad, h5l_err_t *err)
{
    h5l_rd_lock(r);
    int rc = H5L_OK;
    *bad = 0;
    if (tick < 1 || tick > r->nticks) {
        rc = h5l_err_set(err, H5L_ENOTFOUND, "%s: tick %llu not loaded", r->path, (unsigned long long)tick);
        goto out;
    }
    tickx_t xv;
    const tickx_t *x = &xv;
    if ((rc = h5l_rd_tick_x(r, tick, &xv, err))) goto out;
    size_t cap = (size_t)1 << r->seglog;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        goto out;
    }
    h5l_err_t first = {0};
    for (uint32_t rank = 0; rank < x->nranks && rc != H5L_EIO; rank++) {
        uint64_t nseg = x->segbase[rank + 1] - x->segbase[rank];
        for (uint64_t j = 0; j < nseg; j++) {
            uint64_t so, sl;
            uint64_t sum = seg_of(r, x, rank, j, &so, &sl);
            if ((rc = seg_pread(r, buf, (size_t)sl, so, err))) break;
            if (h5l_hash(buf, (size_t)sl, h5l_seg_seed(r->seed, tick, rank, j)) != sum) {
                if (!(*bad)++) seg_mismatch(r, tick, rank, so, sl, &first);
            }
        }
    }
    free(buf);
    if (!rc && *bad) {
        if (err) *err = first;
        rc = H5L_ECORRUPT;
    }
out:
    h5l_rd_unlock(r);
    return rc;
}

/* Room for chunk_list's answer when checkpointed ticks take part: the
 * caller's, one per call. */
typedef struct lzscr {
    uint64_t *ticks;
    size_t tcap;
    h5l_rec_t **p;
    size_t cap;
    h5l_index_scratch_t iscr; /* lookups in a lazy tick's own index */
} lzscr_t;

static void lzscr_free(lzscr_t *s)
{
    free(s->ticks);
    free(s->p);
    h5l_index_scratch_free(&s->iscr);
}

/* Does a box of rec touch index chunk coord (chunk shape ch)? */
static int rec_touches(const h5l_rec_t *rec, const uint64_t *coord, const uint64_t *ch)
{
    uint32_t nd = rec->ndims;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * nd, *c = s + nd;
        uint32_t d = 0;
        while (d < nd && s[d] / ch[d] <= coord[d] && (s[d] + c[d] - 1) / ch[d] >= coord[d]) d++;
        if (d == nd) return 1;
    }
    return 0;
}

static int seq_before(const h5l_rec_t *a, const h5l_rec_t *b)
{
    if (a->tick != b->tick) return a->tick < b->tick;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->order < b->order;
}

/* What the newest records of one chunk cover, met newest first: once
 * they cover the chunk's box (clipped to the shape at the tick read), the
 * records before them are hidden and a lookup stops there. One record box
 * over the whole box, or pieces that are pairwise disjoint and add up to
 * it (ranks writing their parts of a slab); overlapping or too many pieces
 * end the conclusions, except a later whole cover. */
#define COV_PIECES 8
typedef struct cov {
    uint32_t nd;
    uint64_t cs[H5L_MAX_DIMS], cc[H5L_MAX_DIMS]; /* the chunk's box at the tick */
    uint64_t need, got;                          /* its elements; the pieces' */
    size_t np;
    uint64_t ps[COV_PIECES][H5L_MAX_DIMS], pc[COV_PIECES][H5L_MAX_DIMS];
    int dead; /* pieces overlapped or were too many */
} cov_t;

/* The box of chunk coord (shape ch) of objid at tick. 0: nothing to cover
 * (an empty box, or no shape): the lookup then keeps every record. */
static int cov_init(cov_t *c, const h5l_reader_t *r, uint32_t objid, const uint64_t *coord, const uint64_t *ch,
                    uint64_t tick)
{
    uint64_t shape[H5L_MAX_DIMS];
    const h5l_obj_t *o = &r->schema.objs[objid];
    c->nd = o->ndims;
    c->np = 0;
    c->got = 0;
    c->dead = 0;
    if (!ch || h5l_schema_shape(&r->schema, objid, tick, shape)) return 0;
    for (uint32_t d = 0; d < c->nd; d++) {
        c->cs[d] = coord[d] * ch[d];
        if (c->cs[d] >= shape[d]) return 0;
        c->cc[d] = shape[d] - c->cs[d] < ch[d] ? shape[d] - c->cs[d] : ch[d];
    }
    c->need = h5l_box_nelem(c->nd, c->cc);
    return c->need > 0;
}

/* Add rec (older than every record added before); 1 if the chunk's box is
 * covered now. */
static int cov_add(cov_t *c, const h5l_rec_t *rec)
{
    if (rec->ndims != c->nd) return 0;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *bs = rec->boxes + (size_t)k * 2 * c->nd, *bc = bs + c->nd;
        uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS], ys[H5L_MAX_DIMS], yc[H5L_MAX_DIMS];
        if (!h5l_box_intersect(c->nd, bs, bc, c->cs, c->cc, xs, xc)) continue;
        uint64_t e = h5l_box_nelem(c->nd, xc);
        if (e == c->need) return 1;
        if (c->dead) continue;
        for (size_t p = 0; p < c->np && !c->dead; p++)
            c->dead = h5l_box_intersect(c->nd, xs, xc, c->ps[p], c->pc[p], ys, yc);
        if (c->dead || c->np == COV_PIECES) {
            c->dead = 1;
            continue;
        }
        memcpy(c->ps[c->np], xs, c->nd * sizeof *xs);
        memcpy(c->pc[c->np++], xc, c->nd * sizeof *xc);
        c->got += e;
    }
    return !c->dead && c->got == c->need;
}

/* The records of ticks <= tick touching chunk coord of objid that can
 * still show, in sequence order: those of the index (ticks read at open:
 * after the checkpoints, and the checkpointed ticks that are eager) merged
 * with those of the checkpointed ticks the chunk map lists for it (their
 * tables decoded now if they were not yet), walking back from the newest
 * tick of either and stopping at the newest records that cover the chunk
 * (cov_t): a chunk every tick overwrites (a time stamp, a state slab) costs
 * its newest tick, not one record and one decoded table per tick of the
 * log. Under the read lock. */
static int chunk_list(h5l_reader_t *r, uint32_t objid, const uint64_t *coord, uint64_t tick, h5l_index_scratch_t *iscr,
                      lzscr_t *ls, h5l_rec_t *const **list, size_t *n, h5l_err_t *err)
{
    if (h5l_index_chunk(r->index, objid, coord, tick, iscr, list, n))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    const uint64_t *ch = h5l_index_chunk_shape(r->index, objid);
    cov_t cv;
    int cover = cov_init(&cv, r, objid, coord, ch, tick), done = 0;
    size_t nt = 0, e = *n; /* the index's records list[e..] are kept */
    if (r->ckmap && h5l_ckmap_ticks(r->ckmap, objid, coord, tick, &ls->ticks, &ls->tcap, &nt))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    size_t m = 0; /* lazy records kept, newest first in ls->p */
    for (size_t i = nt; !done && (i > 0 || e > 0);) {
        if (e > 0 && (i == 0 || (*list)[e - 1]->tick > ls->ticks[i - 1])) { /* the index's record is newer */
            e--;
            done = cover && cov_add(&cv, (*list)[e]);
            continue;
        }
        const lztick_t *l;
        int rc = h5l_rd_lazy_get(r, ls->ticks[--i], &l, err);
        if (rc) return rc;
        h5l_rec_t *const *cand = l->recs;
        size_t nc = l->nrec;
        if (l->idx && h5l_index_chunk(l->idx, objid, coord, UINT64_MAX, &ls->iscr, &cand, &nc))
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        for (size_t j = nc; !done && j-- > 0;) {
            h5l_rec_t *rec = cand[j];
            if (rec->objid != objid || !rec_touches(rec, coord, ch)) continue;
            if (h5l_grow((void **)&ls->p, &ls->cap, m + 1, sizeof *ls->p))
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            ls->p[m++] = rec;
            done = cover && cov_add(&cv, rec);
        }
    }
    if (done && e) { /* covered: the index's records before e are hidden (not covered: all show) */
        *list += e;
        *n -= e;
    }
    for (size_t i = 0; i < m / 2; i++) { /* into sequence order */
        h5l_rec_t *t = ls->p[i];
        ls->p[i] = ls->p[m - 1 - i];
        ls->p[m - 1 - i] = t;
    }
    if (!m) return H5L_OK; /* no lazy record touches the chunk: the list stays (and ls->p may be NULL) */
    size_t n0 = *n;
    if (h5l_grow((void **)&ls->p, &ls->cap, 2 * m + n0, sizeof *ls->p))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    h5l_rec_t *const *a = *list;
    h5l_rec_t **out = ls->p + m;
    size_t i = 0, j = 0, k = 0;
    while (i < m || j < n0) out[k++] = j == n0 || (i < m && seq_before(ls->p[i], a[j])) ? ls->p[i++] : a[j++];
    *list = out;
    *n = k;
    return H5L_OK;
}

/* Sequence order (tick, rank, order): the index's serials and a lazy
 * tick's records (which have none of the reader's serials) alike. */
static int cmp_rec_seq(const void *x, const void *y)
{
    const h5l_rec_t *a = *(h5l_rec_t *const *)x, *b = *(h5l_rec_t *const *)y;
    return seq_before(a, b) ? -1 : seq_before(b, a);
}

/* Sort records by sequence and drop repeats; the new count. */
static size_t uniq_recs(h5l_rec_t **all, size_t n)
{
    if (n < 2) return n;
    qsort(all, n, sizeof *all, cmp_rec_seq);
    size_t m = 1;
    for (size_t i = 1; i < n; i++)
        if (all[i] != all[m - 1]) all[m++] = all[i];
    return m;
}

/* The records of ticks <= tick that touch the index chunks [lo, hi] of
 * objid and can still show there (chunk_list), each once, in sequence
 * order, into *all (the caller's, grown here). Read lock held. */
static int box_records(h5l_reader_t *r, uint32_t objid, uint64_t tick, uint32_t nd, const uint64_t *lo,
                       const uint64_t *hi, h5l_index_scratch_t *iscr, lzscr_t *ls, h5l_rec_t ***all, size_t *cap,
                       size_t *nout, h5l_err_t *err)
{
    uint64_t cur[H5L_MAX_DIMS];
    memcpy(cur, lo, nd * sizeof *cur);
    size_t n = 0, kept = 0, chunks = 0;
    for (;;) {
        h5l_rec_t *const *list;
        size_t k;
        int rc = chunk_list(r, objid, cur, tick, iscr, ls, &list, &k, err);
        if (rc) return rc;
        chunks++;
        if (h5l_grow_raw((void **)all, cap, n + k + 1, sizeof **all))
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        if (k) memcpy(*all + n, list, k * sizeof *list);
        n += k;
        if (n > 4096 && n > 2 * kept) { /* the same records again and again: keep the list small */
            n = uniq_recs(*all, n);
            kept = n;
        }
        int d = (int)nd - 1;
        for (; d >= 0; d--) {
            if (++cur[d] <= hi[d]) break;
            cur[d] = lo[d];
        }
        if (d < 0) break;
    }
    *nout = chunks > 1 ? uniq_recs(*all, n) : n; /* one chunk's list is in order, each record once */
    return H5L_OK;
}

/* The transposition engine's view of the log (xfer.h): verified reads
 * (log_read) and each (tick, rank)'s data. Read lock held. */
static int xs_read(void *ctx, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err)
{
    return log_read(ctx, tick, rank, off, n, dst, err);
}

static int xs_range(void *ctx, uint64_t tick, uint32_t rank, uint64_t *s, uint64_t *e, h5l_err_t *err)
{
    h5l_reader_t *r = ctx;
    tickx_t x;
    int rc = h5l_rd_tick_x(r, tick, &x, err);
    if (rc) return rc;
    if (rank >= x.nranks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    *s = x.rstart[rank];
    *e = x.rstart[rank + 1];
    return H5L_OK;
}

/* Check a read of box (start, count) of objid at tick and find its index
 * chunks [lo, hi]. Read lock held. H5L_OK, or the error with err set;
 * *o NULL when the box is empty (nothing to do). */
static int read_check(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                      const h5l_obj_t **o, uint64_t *lo, uint64_t *hi, h5l_err_t *err)
{
    *o = NULL;
    if (tick > r->nticks)
        return h5l_err_set(err, H5L_ENOTFOUND, "%s: tick %llu not loaded (newest %zu)", r->path,
                           (unsigned long long)tick, r->nticks);
    if (objid >= r->schema.nobjs || r->schema.objs[objid].kind != H5L_OBJ_VAR || r->schema.objs[objid].tick > tick)
        return h5l_err_set(err, H5L_EBADID, "%s: no variable with id %u at tick %llu", r->path, objid,
                           (unsigned long long)tick);
    const h5l_obj_t *v = &r->schema.objs[objid];
    uint32_t nd = v->ndims;
    uint64_t shape[H5L_MAX_DIMS];
    h5l_schema_shape(&r->schema, objid, tick, shape);
    for (uint32_t d = 0; d < nd; d++)
        if (start[d] > shape[d] || count[d] > shape[d] - start[d])
            return h5l_err_set(err, H5L_ERANGE, "%s: read of '%s' outside its shape in dimension %u", r->path, v->path,
                               d);
    if (h5l_box_nelem(nd, count) == 0) return H5L_OK;
    const uint64_t *ch = h5l_index_chunk_shape(r->index, objid);
    for (uint32_t d = 0; d < nd; d++) {
        lo[d] = start[d] / ch[d];
        hi[d] = (start[d] + count[d] - 1) / ch[d];
    }
    *o = v;
    return H5L_OK;
}

/* Read (buf), or only plan the read (*bytes, with buf NULL): the records
 * of every index chunk the box touches, each once, in sequence order,
 * handed to the transposition engine (xfer.h), which reads each log
 * segment they need once and copies their pieces out. */
static int read_box(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                    void *buf, uint64_t *bytes, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    h5l_rec_t **all = NULL;
    size_t cap = 0, n = 0;
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS];
    h5l_rd_lock(r);
    int rc = read_check(r, tick, objid, start, count, &o, lo, hi, err);
    if (!rc && o) rc = box_records(r, objid, tick, o->ndims, lo, hi, &iscr, &ls, &all, &cap, &n, err);
    if (!rc && o) {
        h5l_xsrc_t src = {xs_read, xs_range, r, r->seglog, 0};
        h5l_xstats_t st = {0};
        if (buf)
            rc = h5l_xfer_read(&src, o->ndims, o->type.size, o->fill, all, n, start, count, buf, &st, err);
        else
            rc = h5l_xfer_cost(&src, o->ndims, o->type.size, all, n, start, count, bytes, err);
        atomic_fetch_add(&r->stat_records, st.pieces);
        size_t pl = strlen(r->path);
        if (rc && err && strncmp(err->msg, r->path, pl) != 0) { /* the engine's own reasons name no file */
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            h5l_err_set(err, rc, "%s: %s", r->path, m);
        }
    }
    h5l_rd_unlock(r);
    free(all);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc;
}

int h5l_reader_read(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                    void *buf, h5l_err_t *err)
{
    uint8_t dummy;
    return read_box(r, tick, objid, start, count, buf ? buf : &dummy, NULL, err);
}

int h5l_reader_read_cost(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                         uint64_t *bytes, h5l_err_t *err)
{
    *bytes = 0;
    return read_box(r, tick, objid, start, count, NULL, bytes, err);
}

/* One piece of a box for chunk_run: where it starts in the box (row-major
 * element), where in the log, and its elements. */
typedef struct rpiece {
    uint64_t bs, la, len;
} rpiece_t;

static int cmp_rpiece(const void *x, const void *y)
{
    const rpiece_t *a = x, *b = y;
    return (a->bs > b->bs) - (a->bs < b->bs);
}

typedef struct onerun {
    uint64_t n, src, dst;
} onerun_t;

static int one_run(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    onerun_t *c = ctx;
    if (c->n++ == 0) {
        c->src = src;
        c->dst = dst;
    }
    (void)n;
    return c->n > 1; /* a second run: not one */
}

/* Are the box's bytes one contiguous run of the log? Records are taken
 * newest first until their parts of the box add up to it (older ones are
 * then hidden: a band rewritten whole at a later tick); each record box's
 * part must be one run in the record and in the box, and the parts, in
 * the box's order, must follow each other in the log and fill the box
 * exactly (so no two overlap). The finalizer keeps such a chunk in place
 * (format.md 1.1): ranks writing the parts of one row in one tick lay them
 * side by side. */
#define RUN_PIECES 64
static void chunk_run(const h5l_obj_t *o, h5l_rec_t *const *list, size_t n, const uint64_t *start,
                      const uint64_t *count, h5l_chunk_info_t *out)
{
    uint32_t nd = o->ndims;
    size_t es = o->type.size, np = 0;
    uint64_t want = nd ? h5l_box_nelem(nd, count) : 1, got = 0;
    rpiece_t p[RUN_PIECES];
    for (size_t i = n; i-- > 0 && got < want;) { /* newest first */
        uint64_t boff = list[i]->offset;
        for (uint32_t k = 0; k < list[i]->nboxes; k++) {
            const uint64_t *bs = list[i]->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
            if (nd == 0 || h5l_box_intersect(nd, bs, bc, start, count, xs, xc)) {
                if (np == RUN_PIECES) return;
                onerun_t c = {0, 0, 0};
                if (nd && h5l_box_runs(nd, xs, xc, bs, bc, start, count, one_run, &c)) return;
                p[np++] = (rpiece_t){c.dst, boff + c.src * es, nd ? h5l_box_nelem(nd, xc) : 1};
                got += p[np - 1].len;
            }
            boff += h5l_box_nelem(nd, bc) * es;
        }
    }
    if (!np || got != want) return; /* (more: parts overlap; less: unwritten elements) */
    qsort(p, np, sizeof *p, cmp_rpiece);
    uint64_t at = 0;
    for (size_t i = 0; i < np; i++) {
        if (p[i].bs != at || (i && p[i].la != p[i - 1].la + p[i - 1].len * es)) return;
        at += p[i].len;
    }
    if (at != (nd ? h5l_box_nelem(nd, count) : 1)) return;
    out->run = 1;
    out->run_off = p[0].la;
}

int h5l_reader_box_run(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                       uint64_t *off, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    h5l_rec_t **all = NULL;
    size_t cap = 0, n = 0;
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS];
    h5l_rd_lock(r);
    int rc = read_check(r, tick, objid, start, count, &o, lo, hi, err), run = 0;
    if (!rc && o) rc = box_records(r, objid, tick, o->ndims, lo, hi, &iscr, &ls, &all, &cap, &n, err);
    if (!rc && o && n <= H5L_CHUNK_INFO_SCAN) {
        h5l_chunk_info_t ci = {0};
        chunk_run(o, all, n, start, count, &ci);
        run = ci.run;
        *off = ci.run_off;
    }
    h5l_rd_unlock(r);
    free(all);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc ? rc : run;
}

int h5l_reader_newest_box(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *point, uint64_t *start,
                          uint64_t *count, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], one[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < H5L_MAX_DIMS; d++) one[d] = 1;
    h5l_rd_lock(r);
    int rc = read_check(r, tick, objid, point, one, &o, lo, hi, err), found = 0;
    h5l_rec_t *const *list = NULL;
    size_t n = 0;
    if (!rc && o) rc = chunk_list(r, objid, lo, tick, &iscr, &ls, &list, &n, err);
    for (size_t i = n; !rc && !found && i-- > 0;) { /* the newest record, its last box, that holds the point */
        uint32_t nd = o->ndims;
        for (uint32_t k = list[i]->nboxes; !found && k-- > 0;) {
            const uint64_t *bs = list[i]->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint32_t d = 0;
            while (d < nd && bs[d] <= point[d] && point[d] - bs[d] < bc[d]) d++;
            if (d == nd) {
                memcpy(start, bs, nd * sizeof *start);
                memcpy(count, bc, nd * sizeof *count);
                found = 1;
            }
        }
    }
    h5l_rd_unlock(r);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc ? rc : found;
}

/* Count runs of a copy: 1 means the box is one contiguous run of the record. */
static int count_run(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    (void)dst;
    (void)n;
    uint64_t *c = ctx;
    if (c[0]++ == 0) c[1] = src;
    return c[0] > 1; /* stop at the second run */
}

/* Index chunks not listed by the chunk map (those it lists come from it). */
typedef struct unlisted {
    h5l_reader_t *r;
    uint32_t objid;
    uint64_t tick;
    h5l_chunk_fn fn;
    void *ctx;
    uint64_t *buf;
    size_t cap;
} unlisted_t;

static int unlisted_fn(void *vctx, const uint64_t *coord)
{
    unlisted_t *u = vctx;
    size_t n;
    if (h5l_ckmap_ticks(u->r->ckmap, u->objid, coord, u->tick, &u->buf, &u->cap, &n)) return H5L_ENOMEM;
    return n ? 0 : u->fn(u->ctx, coord);
}

typedef struct one_run {
    h5l_chunk_run_fn fn;
    void *ctx;
} one_run_t;

static int one_run_fn(void *vctx, const uint64_t *coord)
{
    one_run_t *o = vctx;
    return o->fn(o->ctx, coord, 1);
}

int h5l_reader_chunk_runs(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_run_fn fn, void *ctx)
{
    one_run_t o = {fn, ctx};
    if (!r->ckmap) return h5l_index_chunks(r->index, objid, tick, one_run_fn, &o);
    int rc = h5l_ckmap_chunk_runs(r->ckmap, objid, tick, fn, ctx);
    if (rc) return rc;
    unlisted_t u = {r, objid, tick, one_run_fn, &o, NULL, 0};
    rc = h5l_index_chunks(r->index, objid, tick, unlisted_fn, &u);
    free(u.buf);
    return rc;
}

/* h5l_reader_chunks is h5l_reader_chunk_runs with each run's chunks
 * handed over one by one (nd: the variable's rank, for the copy). */
typedef struct each_chunk {
    h5l_chunk_fn fn;
    void *ctx;
    uint32_t nd;
} each_chunk_t;

static int each_chunk_fn(void *vctx, const uint64_t *coord, uint64_t n)
{
    each_chunk_t *x = vctx;
    if (n == 1 || !x->nd) return x->fn(x->ctx, coord);
    uint64_t c[H5L_MAX_DIMS];
    memcpy(c, coord, x->nd * sizeof *c);
    for (uint64_t i = 0; i < n; i++) {
        c[0] = coord[0] + i;
        int rc = x->fn(x->ctx, c);
        if (rc) return rc;
    }
    return 0;
}

int h5l_reader_chunks(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_fn fn, void *ctx)
{
    each_chunk_t x = {fn, ctx, objid < r->schema.nobjs ? r->schema.objs[objid].ndims : 0};
    return h5l_reader_chunk_runs(r, tick, objid, each_chunk_fn, &x);
}

int h5l_reader_chunk_count(h5l_reader_t *r, uint64_t tick, uint32_t objid, uint64_t *n)
{
    if (r->ckmap || tick != r->nticks) return H5L_ESTATE;
    int64_t c = h5l_index_nchunks(r->index, objid);
    if (c < 0) return H5L_ESTATE;
    *n = (uint64_t)c;
    return H5L_OK;
}

int h5l_reader_chunk_prefix(h5l_reader_t *r, uint64_t tick, uint32_t objid, uint64_t *n)
{
    if (r->ckmap || tick != r->nticks) return H5L_ESTATE;
    int64_t c = h5l_index_col_prefix(r->index, objid);
    if (c < 0) return H5L_ESTATE;
    *n = (uint64_t)c;
    return H5L_OK;
}

int h5l_reader_has_chunk(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord)
{
    return h5l_index_has_chunk(r->index, objid, coord, tick);
}

uint64_t h5l_reader_chunks_version(h5l_reader_t *r, uint64_t tick)
{
    uint64_t a = h5l_index_chunks_version(r->index, tick), b = r->ckmap ? h5l_ckmap_version(r->ckmap, tick) : 0;
    return a > b ? a : b;
}

int h5l_reader_chunk_info(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord, const uint64_t *start,
                          const uint64_t *count, h5l_chunk_info_t *out, h5l_err_t *err)
{
    memset(out, 0, sizeof *out);
    int rc = H5L_OK;
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    h5l_rd_lock(r);
    if (tick > r->nticks || objid >= r->schema.nobjs || r->schema.objs[objid].kind != H5L_OBJ_VAR) {
        rc = h5l_err_set(err, H5L_EBADID, "%s: no variable %u at tick %llu", r->path, objid, (unsigned long long)tick);
        goto out;
    }
    const h5l_obj_t *o = &r->schema.objs[objid];
    h5l_rec_t *const *list;
    size_t n;
    if ((rc = chunk_list(r, objid, coord, tick, &iscr, &ls, &list, &n, err))) goto out;
    out->nrec = n;
    if (n == 0) goto out;
    const h5l_rec_t *last = list[n - 1];
    out->ver[0] = last->tick;
    out->ver[1] = last->rank;
    out->ver[2] = last->order;
    if (n <= H5L_CHUNK_INFO_SCAN) { /* disjoint iff the pieces add up to no more than the box */
        uint64_t sum = 0, xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
        for (size_t i = 0; i < n; i++)
            for (uint32_t k = 0; k < list[i]->nboxes; k++) {
                const uint64_t *b = list[i]->boxes + (size_t)k * 2 * o->ndims;
                if (h5l_box_intersect(o->ndims, b, b + o->ndims, start, count, xs, xc))
                    sum += h5l_box_nelem(o->ndims, xc);
            }
        out->disjoint = sum <= h5l_box_nelem(o->ndims, count);
    }
    if (n <= H5L_CHUNK_INFO_SCAN) chunk_run(o, list, n, start, count, out);
    if (last->nboxes != 1) goto out;
    const uint64_t *bs = last->boxes, *bc = bs + o->ndims;
    uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
    if (!h5l_box_intersect(o->ndims, bs, bc, start, count, xs, xc)) goto out;
    for (uint32_t d = 0; d < o->ndims; d++)
        if (xs[d] != start[d] || xc[d] != count[d]) goto out; /* not covered */
    uint64_t runs[2] = {0, 0};
    h5l_box_runs(o->ndims, start, count, bs, bc, start, count, count_run, runs);
    if (runs[0] == 1) {
        out->direct = 1;
        out->direct_off = last->offset + runs[1] * o->type.size;
        out->direct_tick = last->tick;
        out->direct_rank = last->rank;
    }
out:
    h5l_rd_unlock(r);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc;
}
