/* rlazy.c — the record tables of checkpointed ticks, decoded when a read
 * first needs them (docs/format.md 3.5) and kept up to lazy_max bytes per
 * reader: past it the least recently used go (lazy_trim, at the end of a
 * read call that did not use them) and are decoded again when needed, so
 * reading a whole long log does not keep every table. */
#include "rdint.h"

/* ---- lazily decoded tables of checkpointed ticks ---- */

#define LZBLK ((size_t)1 << 20)

static h5l_rec_t *lz_rec(void *ctx, uint32_t nboxes, uint32_t ndims)
{
    lztick_t *l = ctx;
    size_t n = (sizeof(h5l_rec_t) + (size_t)nboxes * ndims * 2 * sizeof(uint64_t) + 15) & ~(size_t)15;
    if (!l->blk || l->blk->cap - l->blk->used < n) {
        size_t cap = n > LZBLK ? n : LZBLK;
        if (!l->blk && n * l->hint < LZBLK) /* a small tick's first block is its size (one box a record) */
            cap = n * (l->hint ? l->hint : 1);
        lzblk_t *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = l->blk;
        b->used = 0;
        b->cap = cap;
        l->blk = b;
        l->bytes += sizeof *b + cap;
    }
    h5l_rec_t *rec = (h5l_rec_t *)(l->blk->mem + l->blk->used);
    l->blk->used += n;
    memset(rec, 0, sizeof *rec);
    rec->nboxes = nboxes;
    rec->ndims = ndims;
    rec->boxes = (uint64_t *)(rec + 1);
    return rec;
}

static void lz_free(lztick_t *l)
{
    if (!l) return;
    while (l->blk) {
        lzblk_t *n = l->blk->next;
        free(l->blk);
        l->blk = n;
    }
    free(l);
}

/* Decode and check the record table of lazy tick `tick` (every check an
 * eager load makes: format.md 4 and 4.1). Under the read lock and lazy_mu. */
static int lazy_load(h5l_reader_t *r, uint64_t tick, lztick_t **out, h5l_err_t *err)
{
    const tickrec_t *tr;
    int trc = h5l_rd_tick_rec(r, tick, &tr, err);
    if (trc) return trc;
    const h5l_tick_info_t tv = tick_info_of(tr, tick), *t = &tv;
    uint64_t hole;
    if (t->table_size >= HOLE_CHECK_MIN && h5l_rd_table_hole(r->fd, t->table_off, t->table_size, &hole))
        return h5l_err_set(
            err, H5L_ECORRUPT,
            "%s: tick %llu: record table [%llu, +%llu) lies over a hole of the file at %llu (never written)", r->path,
            (unsigned long long)t->tick, (unsigned long long)t->table_off, (unsigned long long)t->table_size,
            (unsigned long long)hole);
    uint64_t seg = (uint64_t)1 << r->seglog;
    uint64_t maxsums = t->data_size / seg + t->nranks;
    uint64_t tabsums = (t->table_size - (uint64_t)t->nranks * H5L_BLOCK_LEN) / 8;
    if (maxsums > tabsums) maxsums = tabsums;
    size_t xneed = 2 * ((size_t)t->nranks + 1) + (size_t)maxsums;
    uint8_t *tab = malloc(t->table_size ? (size_t)t->table_size : 1);
    lztick_t *l = calloc(1, sizeof *l + xneed * sizeof(uint64_t));
    if (!tab || !l) {
        free(tab);
        free(l);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    }
    h5l_err_t e2 = {0};
    if (h5l_fd_read_all(r->fd, tab, (size_t)t->table_size, t->table_off, r->path, &e2)) {
        free(tab);
        free(l);
        return h5l_err_set(err, H5L_EIO, "%s: tick %llu: cannot read record table: %s", r->path,
                           (unsigned long long)t->tick, e2.msg);
    }
    l->hint = t->nrecords;
    l->bytes = sizeof *l + xneed * sizeof(uint64_t);
    l->x.nranks = t->nranks;
    l->x.rstart = l->arr;
    l->x.segbase = l->x.rstart + t->nranks + 1;
    l->x.sums = l->x.segbase + t->nranks + 1;
    h5l_rec_t **recs = NULL;
    size_t cap = 0, n = 0;
    int rc = h5l_rd_load_table(r, t, tab, &l->x, maxsums, &recs, &cap, &n, lz_rec, l, err);
    free(tab);
    if (rc) {
        free(recs);
        lz_free(l);
        return rc;
    }
    l->recs = recs;
    l->nrec = n;
    l->bytes += cap * sizeof *recs;
    if (n > LZ_INDEX_MIN) {
        l->bytes += n * 64; /* the tick's own index: about this a record */
        if (!(l->idx = h5l_index_new())) rc = H5L_ENOMEM;
        for (size_t i = 0; !rc && i < n; i++) {
            const h5l_rec_t *rec = recs[i];
            if (!h5l_index_chunk_shape(l->idx, rec->objid))
                rc = h5l_index_add_var(l->idx, rec->objid, rec->ndims, h5l_index_chunk_shape(r->index, rec->objid));
        }
        for (size_t i = 0; !rc && i < n; i++) rc = h5l_index_insert(l->idx, recs[i]);
        if (rc) {
            h5l_index_free(l->idx);
            free(recs);
            lz_free(l);
            return h5l_err_set(err, rc, "%s: tick %llu: cannot index its records: %s", r->path,
                               (unsigned long long)tick, h5l_strerror(rc));
        }
    }
    *out = l;
    return H5L_OK;
}

int h5l_rd_lazy_get(h5l_reader_t *r, uint64_t tick, const lztick_t **out, h5l_err_t *err)
{
    size_t pg = (size_t)((tick - 1) / LZPAGE), at = (size_t)((tick - 1) % LZPAGE);
    lzslot_t *page = atomic_load_explicit(&r->lzdir[pg], memory_order_acquire);
    lztick_t *l = page ? atomic_load_explicit(&page[at], memory_order_acquire) : NULL;
    int rc = H5L_OK;
    if (!l) {
        pthread_mutex_lock(&r->lazy_mu);
        page = atomic_load_explicit(&r->lzdir[pg], memory_order_acquire);
        if (!page) {
            if ((page = calloc(LZPAGE, sizeof *page)))
                atomic_store_explicit(&r->lzdir[pg], page, memory_order_release);
            else
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        }
        l = page ? atomic_load_explicit(&page[at], memory_order_acquire) : NULL;
        if (page && !l && !(rc = lazy_load(r, tick, &l, err))) {
            atomic_fetch_add_explicit(&r->lazy_bytes, l->bytes, memory_order_relaxed);
            atomic_fetch_add_explicit(&r->lazy_loads, 1, memory_order_relaxed);
            atomic_store_explicit(&page[at], l, memory_order_release);
        }
        pthread_mutex_unlock(&r->lazy_mu);
    }
    if (l) /* its use, for eviction order (relaxed: an approximate LRU is enough) */
        atomic_store_explicit(&l->used, atomic_fetch_add_explicit(&r->lazy_clock, 1, memory_order_relaxed),
                              memory_order_relaxed);
    *out = l;
    return rc;
}

static void lz_drop(lztick_t *l)
{
    if (!l) return;
    free(l->recs);
    h5l_index_free(l->idx);
    lz_free(l);
}

/* The lazy clock when this thread's current read call began, for the
 * reader with that serial: lazy_trim keeps what the call used. */
static _Thread_local struct {
    uint64_t serial, mark;
} tl_read;

/* Take the read lock for a read call (its tables are kept by the trim at
 * its end, h5l_rd_unlock). */
void h5l_rd_lock(h5l_reader_t *r)
{
    tl_read.serial = r->serial;
    tl_read.mark = atomic_load_explicit(&r->lazy_clock, memory_order_relaxed);
    pthread_rwlock_rdlock(&r->lock);
}

/* Free the least recently used decoded tables until they hold at most
 * half of lazy_max (a pass frees many, so passes are rare), if they hold
 * more than lazy_max. Takes the write lock only if it is free at once
 * (trywrlock): no reader is then inside a table, and a caller that still
 * holds a read lock, or a busy file, just leaves it to a later call.
 * Oldest first by a histogram of last uses over 256 buckets: two passes
 * over the directory, no sort. */
static void lazy_trim(h5l_reader_t *r)
{
    if (atomic_load_explicit(&r->lazy_bytes, memory_order_relaxed) <= r->lazy_max) return;
    /* the tables this thread's read call used are kept whatever their
     * age: the next read (the next chunk of the same rows) needs them
     * again, and trimming them made a finalize that read one chunk at a
     * time decode every table once per chunk (hours, not seconds) */
    uint64_t keep = tl_read.serial == r->serial ? tl_read.mark : UINT64_MAX;
    if (pthread_rwlock_trywrlock(&r->lock)) return;
    size_t npg = (size_t)((r->ck_last + LZPAGE - 1) / LZPAGE);
    uint64_t lo = UINT64_MAX, hi = 0, held = atomic_load(&r->lazy_bytes);
    for (size_t pg = 0; r->lzdir && pg < npg; pg++) {
        lzslot_t *page = atomic_load(&r->lzdir[pg]);
        for (size_t i = 0; page && i < LZPAGE; i++) {
            lztick_t *l = atomic_load(&page[i]);
            if (!l) continue;
            uint64_t u = atomic_load_explicit(&l->used, memory_order_relaxed);
            if (u < lo) lo = u;
            if (u > hi) hi = u;
        }
    }
    uint64_t bucket[256] = {0}, span = hi >= lo ? (hi - lo) / 256 + 1 : 1;
    for (int pass = 0; pass < 2 && hi >= lo; pass++) {
        uint64_t cut = 0; /* pass 1: free tables whose bucket is below cut */
        if (pass) {
            uint64_t need = held - r->lazy_max / 2, sum = 0; /* (from the tables it may drop) */
            while (cut < 256 && sum < need) sum += bucket[cut++];
        }
        for (size_t pg = 0; pg < npg; pg++) {
            lzslot_t *page = atomic_load(&r->lzdir[pg]);
            size_t left = 0;
            for (size_t i = 0; page && i < LZPAGE; i++) {
                lztick_t *l = atomic_load(&page[i]);
                if (!l) continue;
                uint64_t u = atomic_load_explicit(&l->used, memory_order_relaxed), b = (u - lo) / span;
                if (!pass) {
                    if (u < keep) bucket[b] += l->bytes;
                } else if (b < cut && u < keep) {
                    atomic_store(&page[i], NULL);
                    atomic_fetch_sub(&r->lazy_bytes, l->bytes);
                    atomic_fetch_add(&r->lazy_evicted, 1);
                    lz_drop(l);
                } else {
                    left++;
                }
            }
            if (pass && page && !left) { /* a page of nothing */
                atomic_store(&r->lzdir[pg], NULL);
                free((void *)page);
            }
        }
    }
    pthread_rwlock_unlock(&r->lock);
}

/* Release a read lock taken by one of the read calls, and keep the
 * decoded tables within lazy_max. */
void h5l_rd_unlock(h5l_reader_t *r)
{
    pthread_rwlock_unlock(&r->lock);
    lazy_trim(r);
}

void h5l_rd_lazy_free_all(h5l_reader_t *r)
{
    for (size_t pg = 0; r->lzdir && pg < (r->ck_last + LZPAGE - 1) / LZPAGE; pg++) {
        lzslot_t *page = atomic_load(&r->lzdir[pg]);
        for (size_t i = 0; page && i < LZPAGE; i++) lz_drop(atomic_load(&page[i]));
        free((void *)page);
    }
    free((void *)r->lzdir);
    r->lzdir = NULL;
    h5l_ckmap_free(r->ckmap);
    r->ckmap = NULL;
    r->ck_last = r->lazy_nrec = 0;
    atomic_store(&r->lazy_bytes, 0);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
}
