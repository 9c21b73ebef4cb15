/* reader.c — open a log-layout file, load its ticks, answer about them.
 *
 * Loading a tick: the TICK frame's ops are applied to the schema, its record
 * table is read with one pread, every block is checked (checksum bound to
 * its tick and rank, records decoded, boxes inside the shape of that tick,
 * records accounting for the rank's data exactly), then records go into the
 * index in sequence order and the tick becomes visible by bumping `nticks`.
 * Anything wrong is damage: the reader keeps the ticks before it, serves
 * them, and reports the same error (naming the tick) from then on.
 *
 * A long log opens from its index checkpoints instead (format.md 3.5): the
 * checkpointed ticks' tables are decoded when first needed (rlazy.c).
 * Reading data and chunk queries are rdata.c's. */
#include "rdint.h"

static int start_from_checkpoints(h5l_reader_t *r);
void h5l_rd_lazy_free_all(h5l_reader_t *r);

static _Atomic uint64_t reader_serial; /* tells readers apart in the segment caches */

static uint64_t file_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int read_ub(int fd, const char *path, h5l_ub_t *ub, h5l_err_t *err)
{
    uint8_t b[H5L_UB_LEN];
    size_t n;
    int rc = h5l_fd_read(fd, b, sizeof b, 0, &n, path, err);
    if (rc) return rc;
    if (n < sizeof b) return h5l_err_set(err, H5L_EFORMAT, "%s: not a log-layout file (too short)", path);
    return h5l_ub_decode(b, ub, path, err);
}

int h5l_probe(const char *path, h5l_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(err, errno == ENOENT ? H5L_ENOTFOUND : H5L_EIO, "%s: %s", path, strerror(errno));
    uint8_t m[8];
    size_t n;
    int rc = h5l_fd_read(fd, m, sizeof m, 0, &n, path, err);
    close(fd);
    if (rc) return rc;
    if (n < 8 || memcmp(m, h5l_ub_magic, 8) != 0)
        return h5l_err_set(err, H5L_EFORMAT, "%s: not a log-layout file", path);
    return H5L_OK;
}

/* Point the reader at its journal: the sidecar while the file is live, else
 * the embedded copy. Handles a writer closing between our two looks. */
static int attach_journal(h5l_reader_t *r, h5l_err_t *err)
{
    h5l_ub_t ub;
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = read_ub(r->fd, r->path, &ub, err);
        if (rc) return rc;
        memcpy(r->id, ub.id, 16);
        r->seed = h5l_seed(ub.id);
        if (ub.flags & H5L_UB_CLOSED) {
            uint64_t fsz = file_size(r->fd);
            if (ub.jr_len < H5L_JHDR_LEN || ub.jr_off < H5L_USERBLOCK_SIZE || ub.jr_len > fsz ||
                ub.jr_off > fsz - ub.jr_len)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal [%llu, +%llu) lies outside the file",
                                   r->path, (unsigned long long)ub.jr_off, (unsigned long long)ub.jr_len);
            r->jfd = r->fd;
            r->live = 0;
            r->jbase = ub.jr_off;
            r->jlimit = ub.jr_len;
            return H5L_OK;
        }
        r->jfd = open(r->jpath, O_RDONLY | O_CLOEXEC);
        if (r->jfd >= 0) {
            r->live = 1;
            r->jbase = 0;
            r->jlimit = 0;
            return H5L_OK;
        }
        if (errno != ENOENT) return h5l_err_set(err, H5L_EIO, "%s: %s", r->jpath, strerror(errno));
        /* sidecar gone: the writer may have closed meanwhile; look again */
    }
    return h5l_err_set(err, H5L_ECORRUPT, "%s: file is open for writing but its journal %s is missing", r->path,
                       r->jpath);
}

static int check_jhdr(h5l_reader_t *r, h5l_err_t *err)
{
    uint8_t b[H5L_JHDR_LEN];
    const char *what = r->live ? r->jpath : r->path;
    size_t n;
    int rc = h5l_fd_read(r->jfd, b, sizeof b, r->jbase, &n, what, err);
    if (rc) return rc;
    if (n < sizeof b) return h5l_err_set(err, H5L_ECORRUPT, "%s: journal shorter than its header", what);
    h5l_jhdr_t h;
    rc = h5l_jhdr_decode(b, &h, what, err);
    if (rc) return rc;
    if (memcmp(h.id, r->id, 16) != 0)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal belongs to another file (identity mismatch)", what);
    r->seglog = h.seglog;
    r->jpos = H5L_JHDR_LEN;
    h5l_jscan_init(&r->scan, r->jfd, NULL, r->jbase, r->live, r->seed, what);
    return H5L_OK;
}

int h5l_reader_open(const char *path, h5l_reader_t **out, h5l_err_t *err)
{
    return h5l_reader_open_flags(path, 0, out, err);
}

int h5l_reader_open_flags(const char *path, unsigned flags, h5l_reader_t **out, h5l_err_t *err)
{
    *out = NULL;
    h5l_reader_t *r = calloc(1, sizeof *r);
    if (!r) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    r->fd = r->jfd = -1;
    r->serial = atomic_fetch_add(&reader_serial, 1) + 1;
    r->unshared = 1;
    r->lazy_attrs = (flags & H5L_READER_LAZY_ATTRS) != 0;
    r->no_map = (flags & H5L_READER_NO_CHUNK_MAP) != 0;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* writer preference: a stream of reads must not starve tick loading */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&r->refresh_mu, NULL);
    pthread_mutex_init(&r->lazy_mu, NULL);
    pthread_mutex_init(&r->seg_mu, NULL);
    const char *lm = getenv("H5L_LAZY_MAX");
    r->lazy_max = lm && *lm ? strtoull(lm, NULL, 10) : LAZY_MAX_DEFAULT;
    int rc;
    r->path = strdup(path);
    if (r->path && asprintf(&r->jpath, "%s%s", path, H5L_SIDECAR_SUFFIX) < 0) r->jpath = NULL;
    r->index = h5l_index_new();
    if (!r->path || !r->jpath || !r->index || h5l_schema_init(&r->schema)) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        rc = h5l_err_set(err, errno == ENOENT ? H5L_ENOTFOUND : H5L_EIO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if ((rc = attach_journal(r, err)) || (rc = check_jhdr(r, err))) goto fail;
    if (!(flags & H5L_READER_FULL) && start_from_checkpoints(r)) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    /* damage found while loading is kept (h5l_reader_damage): the ticks
     * before it are served; only an error that lets nothing be read fails */
    rc = h5l_reader_refresh(r, NULL, err);
    if (rc == H5L_ENOMEM) goto fail;
    r->unshared = 0; /* published: from here on other threads may hold it */
    *out = r;
    return H5L_OK;
fail:
    h5l_reader_close(r);
    return rc;
}

void h5l_reader_close(h5l_reader_t *r)
{
    if (!r) return;
    if (r->jfd >= 0 && r->jfd != r->fd) close(r->jfd);
    if (r->fd >= 0) close(r->fd);
    h5l_jscan_free(&r->scan);
    h5l_rd_lazy_free_all(r);
    pthread_mutex_destroy(&r->lazy_mu);
    pthread_mutex_destroy(&r->seg_mu);
    free(r->twin);
    free(r->pend);
    h5l_schema_free(&r->schema);
    h5l_index_free(r->index);
    h5l_drop_free(atomic_load(&r->drop));
    free((void *)atomic_load(&r->vseg));
    free(r->pool);
    free(r->ticks);
    free(r->path);
    free(r->jpath);
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->refresh_mu);
    free(r);
}

/* Decode and check one record's boxes against the schema as of tick t;
 * rec->size gets the bytes its boxes need. */
static int check_rec(h5l_reader_t *r, const h5l_tick_info_t *t, h5l_rec_t *rec, h5l_err_t *err)
{
    const h5l_obj_t *o = &r->schema.objs[rec->objid];
    uint64_t nbytes = 0;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * o->ndims, *c = s + o->ndims;
        for (uint32_t d = 0; d < o->ndims; d++) {
            uint64_t len = h5l_schema_dimlen(&r->schema, o->dimids[d], t->tick);
            if (c[d] == 0 || s[d] > len || c[d] > len - s[d])
                return h5l_err_set(err, H5L_ECORRUPT,
                                   "%s: tick %llu: record of '%s' selects outside its shape (dim %u: start %llu count "
                                   "%llu length %llu)",
                                   r->path, (unsigned long long)t->tick, o->path, d, (unsigned long long)s[d],
                                   (unsigned long long)c[d], (unsigned long long)len);
        }
        uint64_t ne = h5l_box_nelem(o->ndims, c); /* saturates at UINT64_MAX */
        if (ne > (UINT64_MAX - nbytes) / o->type.size)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record of '%s' is larger than 2^64 bytes", r->path,
                               (unsigned long long)t->tick, o->path);
        nbytes += ne * o->type.size;
    }
    rec->size = nbytes;
    return H5L_OK;
}

/* Decode and check the record table of tick t into pend[] (not indexed
 * yet) and fill x (rank starts, checksums). Runs under the write lock. */
/* The view of loaded tick `tick`'s part of the pool. Under the lock. */
int h5l_rd_lazy_get(h5l_reader_t *r, uint64_t tick, const lztick_t **out, h5l_err_t *err);

static int tick_check(const h5l_reader_t *r, const h5l_tick_info_t *tp, uint64_t *fsize_seen, h5l_err_t *err);

/* Read segment sg's checkpoint frame again into *fb (the caller frees it)
 * and decode it into *c (h5l_ckpt_clear): it must verify and be the frame
 * the open used (its segment, and its summary as applied then). 0, or
 * H5L_ENOMEM, H5L_EIO, H5L_ECORRUPT with err set. */
static int seg_reread(h5l_reader_t *r, const ckseg_t *sg, uint8_t **fb, h5l_ckpt_t *c, h5l_err_t *err)
{
    h5l_err_t e = {0};
    int rc = H5L_OK;
    if (!(*fb = malloc(sg->len)))
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    else if (h5l_fd_read_all(r->jfd, *fb, sg->len, r->jbase + sg->pos, r->scan.what, &e))
        rc = h5l_err_set(err, H5L_EIO, "%s", e.msg);
    else if ((rc = h5l_ckpt_decode(*fb, sg->len, r->seed, sg->pos, c, r->scan.what, &e)))
        h5l_err_set(err, rc, "%s (it verified when the file was opened)", e.msg);
    else if (c->first != sg->first || c->last != sg->last ||
             (sg->summary && ((uint32_t)h5l_get_le64(*fb + H5L_FRAME_LEN + 40) != sg->slen ||
                              h5l_get_le64(*fb + H5L_FRAME_LEN + 48) != sg->ssum)))
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: checkpoint at journal offset %llu changed since it was read",
                         r->scan.what, (unsigned long long)sg->pos); /* (open applied its summary as it was) */
    return rc;
}

/* Write the records of segment sg's non-eager ticks (eager ones were
 * loaded at open) into r->ticks, from its checkpoint frame read and
 * decoded again, every entry checked as at open. Under the read lock (or
 * unshared); one at a time (seg_mu). 0, or H5L_ENOMEM, H5L_EIO,
 * H5L_ECORRUPT (the frame changed since open) with err set; the next call
 * needing the segment tries again. */
static int seg_fill(h5l_reader_t *r, ckseg_t *sg, h5l_err_t *err)
{
    pthread_mutex_lock(&r->seg_mu);
    int rc = H5L_OK;
    if (!atomic_load_explicit(&sg->filled, memory_order_acquire)) {
        uint8_t *fb = NULL;
        h5l_ckpt_t c = {0};
        rc = seg_reread(r, sg, &fb, &c, err);
        uint64_t fsize = 0; /* looked up at the first tick (r->fsize is the refreshing thread's) */
        for (uint64_t j = 0, ei = 0; !rc && j <= c.last - c.first; j++) {
            const h5l_tick_info_t *t = &c.ticks[j].info;
            if (ei < c.neager && c.eager[ei] == t->tick) {
                ei++;
                continue;
            }
            if (!(rc = tick_check(r, t, &fsize, err))) tickrec_set(&r->ticks[t->tick - 1], t, TX_LAZY);
        }
        if (!rc) atomic_store_explicit(&sg->filled, 1, memory_order_release);
        h5l_ckpt_clear(&c);
        free(fb);
    }
    pthread_mutex_unlock(&r->seg_mu);
    return rc;
}

/* The checkpointed segment holding tick t, or NULL (t after them). */
static ckseg_t *ckseg_of(const h5l_reader_t *r, uint64_t t)
{
    if (t > r->ck_last || !r->nsegs) return NULL;
    size_t lo = 0, hi = r->nsegs; /* the first whose last tick is >= t */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->segs[mid].last < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &r->segs[lo < r->nsegs ? lo : r->nsegs - 1];
}

/* *out: tick t's record (1 <= t <= r->nticks), its segment filled first if
 * it is checkpointed. 0, or seg_fill's error. Under the read lock. */
int h5l_rd_tick_rec(h5l_reader_t *r, uint64_t t, const tickrec_t **out, h5l_err_t *err)
{
    *out = NULL;
    ckseg_t *sg = ckseg_of(r, t);
    if (sg) {
        if (!atomic_load_explicit(&sg->filled, memory_order_acquire)) {
            int rc = seg_fill(r, sg, err);
            if (rc) return rc;
        }
    }
    *out = &r->ticks[t - 1];
    return H5L_OK;
}

static tickx_t tx_of(const h5l_reader_t *r, uint64_t tick)
{
    tickx_t x;
    x.nranks = r->ticks[tick - 1].nranks;
    x.rstart = r->pool + r->ticks[tick - 1].tx;
    x.segbase = x.rstart + x.nranks + 1;
    x.sums = x.segbase + x.nranks + 1;
    return x;
}

static h5l_rec_t *index_rec(void *ctx, uint32_t nboxes, uint32_t ndims)
{
    return h5l_index_new_rec(ctx, nboxes, ndims);
}

/* The view of tick `tick`'s rank offsets and checksums, decoding its table
 * first if it is lazy. Under the read lock. */
int h5l_rd_tick_x(h5l_reader_t *r, uint64_t tick, tickx_t *x, h5l_err_t *err)
{
    const tickrec_t *tr;
    int trc = h5l_rd_tick_rec(r, tick, &tr, err);
    if (trc) return trc;
    if (tr->tx != TX_LAZY) {
        *x = tx_of(r, tick);
        return H5L_OK;
    }
    const lztick_t *l;
    int rc = h5l_rd_lazy_get(r, tick, &l, err);
    if (!rc) *x = l->x;
    return rc;
}

int h5l_rd_load_table(h5l_reader_t *r, const h5l_tick_info_t *t, const uint8_t *tab, tickx_t *x, uint64_t maxsums,
                      h5l_rec_t ***pend, size_t *cap_pend, size_t *npend, newrec_fn newrec, void *rctx, h5l_err_t *err)
{
    size_t pos = 0;
    uint64_t total = 0, seg = (uint64_t)1 << r->seglog, nsums = 0;
    x->rstart[0] = t->data_off;
    for (uint32_t rank = 0; rank < t->nranks; rank++) {
        h5l_block_t blk;
        pos = (pos + 7) & ~(size_t)7;
        if (pos > t->table_size || t->table_size - pos < H5L_BLOCK_LEN)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record table ends before the block of rank %u",
                               r->path, (unsigned long long)t->tick, rank);
        h5l_block_decode(tab + pos, &blk);
        if (blk.payload > t->table_size - pos - H5L_BLOCK_LEN)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record block of rank %u runs past its table", r->path,
                               (unsigned long long)t->tick, rank);
        if (h5l_block_sum(tab + pos, r->seed, t->tick, rank) != blk.checksum)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record block of rank %u fails its checksum", r->path,
                               (unsigned long long)t->tick, rank);
        if (blk.size > t->data_off + t->data_size - x->rstart[rank])
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u claims more data than the tick has", r->path,
                               (unsigned long long)t->tick, rank);
        x->rstart[rank + 1] = x->rstart[rank] + blk.size;
        x->segbase[rank] = nsums;
        uint64_t nseg = (blk.size + seg - 1) / seg;
        const uint8_t *pl = tab + pos + H5L_BLOCK_LEN;
        h5l_cur_t c = h5l_cur(pl, blk.payload);
        uint64_t off = x->rstart[rank];
        for (uint64_t i = 0; i < blk.nrec; i++) {
            uint32_t objid, nboxes;
            if (h5l_rec_head_decode(&c, &objid, &nboxes) || objid >= r->schema.nobjs ||
                r->schema.objs[objid].kind != H5L_OBJ_VAR || r->schema.objs[objid].tick > t->tick || nboxes == 0)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu is malformed", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            uint32_t nd = r->schema.objs[objid].ndims;
            /* every varint takes a byte: bound the boxes by what is left */
            if (nd == 0 ? nboxes != 1 : nboxes > (c.len - c.pos) / (2 * (uint64_t)nd))
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu runs past its block", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            /* every read visits every box of every record it meets */
            if (nboxes > H5L_REC_MAXBOXES)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu has %u boxes (at most %u)",
                                   r->path, (unsigned long long)t->tick, rank, (unsigned long long)i, nboxes,
                                   H5L_REC_MAXBOXES);
            if (*npend == t->nrecords)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: more records than announced", r->path,
                                   (unsigned long long)t->tick);
            if (*npend == *cap_pend) { /* grown as records are met, not as announced */
                size_t cap = *cap_pend ? *cap_pend * 2 : 256;
                if (cap > t->nrecords) cap = (size_t)t->nrecords;
                h5l_rec_t **p = realloc(*pend, cap * sizeof *p);
                if (!p) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory loading records", r->path);
                *pend = p;
                *cap_pend = cap;
            }
            h5l_rec_t *rec = newrec(rctx, nboxes, nd);
            if (!rec) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory loading records", r->path);
            rec->tick = t->tick;
            rec->rank = rank;
            rec->order = i;
            rec->objid = objid;
            for (size_t j = 0; j < (size_t)nboxes * 2 * nd; j++) rec->boxes[j] = h5l_cur_varint(&c);
            if (c.bad)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu runs past its block", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            int rc = check_rec(r, t, rec, err);
            if (rc) return rc;
            if (rec->size > x->rstart[rank + 1] - off)
                return h5l_err_set(err, H5L_ECORRUPT,
                                   "%s: tick %llu: rank %u records need more data than the rank wrote", r->path,
                                   (unsigned long long)t->tick, rank);
            rec->offset = off;
            off += rec->size;
            (*pend)[(*npend)++] = rec;
        }
        if (off != x->rstart[rank + 1])
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u records do not account for its data", r->path,
                               (unsigned long long)t->tick, rank);
        if (c.len - c.pos != nseg * 8 || nseg > maxsums - nsums) /* the second cannot be, but x ends there */
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u block has %zu bytes for %llu data checksums",
                               r->path, (unsigned long long)t->tick, rank, c.len - c.pos, (unsigned long long)nseg);
        for (uint64_t j = 0; j < nseg; j++) x->sums[nsums + j] = h5l_get_le64(c.p + c.pos + 8 * j);
        nsums += nseg;
        total += blk.nrec;
        pos += H5L_BLOCK_LEN + blk.payload;
    }
    x->segbase[t->nranks] = nsums;
    if (total != t->nrecords || ((pos + 7) & ~(size_t)7) != t->table_size ||
        x->rstart[t->nranks] != t->data_off + t->data_size)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record table disagrees with its journal entry", r->path,
                           (unsigned long long)t->tick);
    return H5L_OK;
}

/* Does [off, off + len) of fd lie over a hole, by at least 64 bytes? 1
 * and *at = where, or 0 (also when the file system cannot tell: then the
 * bytes are read and checked as usual). Looks at a few holes at most. */
int h5l_rd_table_hole(int fd, uint64_t off, uint64_t len, uint64_t *at)
{
    uint64_t end = off + len, pos = off;
    for (int i = 0; i < 16 && pos < end; i++) {
        off_t h = lseek(fd, (off_t)pos, SEEK_HOLE);
        if (h < 0 || (uint64_t)h >= end) return 0;
        off_t d = lseek(fd, h, SEEK_DATA);
        uint64_t hend = d < 0 ? end : (uint64_t)d; /* ENXIO: a hole to the end of the file */
        if (hend > end) hend = end;
        if (hend - (uint64_t)h >= 64) {
            *at = (uint64_t)h;
            return 1;
        }
        pos = hend;
    }
    return 0;
}

/* The record table of tick t (inside the file, sizes checked): *p points
 * at it, in the table window or in *own (the caller frees it). A long log
 * of small ticks has its tables a few hundred bytes apart: one pread of the
 * window serves hundreds of ticks instead of one pread each. Called under
 * refresh_mu only (the window is the refresh's). */
static int table_bytes(h5l_reader_t *r, const h5l_tick_info_t *t, const uint8_t **p, uint8_t **own, h5l_err_t *err)
{
    uint64_t off = t->table_off, n = t->table_size;
    *own = NULL;
    if (off >= r->twin_off && n <= r->twin_len && off - r->twin_off <= r->twin_len - n) {
        *p = r->twin + (off - r->twin_off);
        return H5L_OK;
    }
    int win = t->data_size + n < TWIN_TICK;
    size_t want = win ? TWIN : (size_t)n;
    if (win && r->fsize - off < want) want = (size_t)(r->fsize - off); /* the file holds [off, off + n) */
    uint8_t *b;
    if (win) {
        if (!r->twin && !(r->twin = malloc(TWIN))) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        r->twin_len = 0;
        b = r->twin;
    } else if (!(b = *own = malloc(n ? (size_t)n : 1))) {
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    }
    size_t got;
    h5l_err_t e2 = {0};
    if (h5l_fd_read(r->fd, b, want, off, &got, r->path, &e2) || got < n) {
        free(*own);
        *own = NULL;
        return h5l_err_set(err, e2.code ? H5L_EIO : H5L_ECORRUPT, "%s: tick %llu: cannot read record table: %s",
                           r->path, (unsigned long long)t->tick, e2.code ? e2.msg : "the file ends inside it");
    }
    if (win) {
        r->twin_off = off;
        r->twin_len = got;
    }
    *p = b;
    return H5L_OK;
}

/* The checks of a tick's TICK payload fields against the file (the HDF5
 * file's size, as seen in *fsize, looked up again only when a tick points
 * past it: one fstat per tick was a third of opening a long log) and
 * against each other. */
static int tick_check(const h5l_reader_t *r, const h5l_tick_info_t *tp, uint64_t *fsize_seen, h5l_err_t *err)
{
    const h5l_tick_info_t t = *tp;
    if (t.data_off + t.data_size > *fsize_seen || t.table_off + t.table_size > *fsize_seen)
        *fsize_seen = file_size(r->fd);
    uint64_t fsize = *fsize_seen;
    if (t.data_off + t.data_size > fsize || t.data_off + t.data_size < t.data_off ||
        t.table_off + t.table_size > fsize || t.table_off + t.table_size < t.table_off)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu points past the end of the file (%llu bytes)", r->path,
                           (unsigned long long)t.tick, (unsigned long long)fsize);
    if (t.table_size > TABLE_MAX)
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: tick %llu: record table of %llu bytes (this reader loads at most %llu)", r->path,
                           (unsigned long long)t.tick, (unsigned long long)t.table_size, (unsigned long long)TABLE_MAX);
    /* every rank has a block header, every record at least a few bytes of
     * table and one byte of data */
    if (t.nranks > t.table_size / H5L_BLOCK_LEN || t.nrecords > t.table_size / H5L_REC_MIN || t.nrecords > t.data_size)
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: tick %llu: %u ranks and %llu records cannot fit %llu table bytes and %llu data bytes",
                           r->path, (unsigned long long)t.tick, t.nranks, (unsigned long long)t.nrecords,
                           (unsigned long long)t.table_size, (unsigned long long)t.data_size);
    return H5L_OK;
}

/* Load tick *tp (its TICK payload header decoded, its nops schema ops at
 * the cursor): check its fields, apply its ops, and decode, check and index
 * its record table (lazy 0); or leave the table to be decoded when a read
 * first needs it (lazy 1, h5l_rd_lazy_get); or also leave its record in r->ticks
 * to its segment's fill (lazy 2: a checkpointed tick at open, seg_fill).
 * The tick becomes visible: r->nticks. */
static int load_tick_body(h5l_reader_t *r, const h5l_tick_info_t *tp, h5l_cur_t *cp, uint32_t nops, int lazy,
                          h5l_err_t *err)
{
    h5l_tick_info_t t = *tp;
    h5l_cur_t c = *cp;
    if (t.tick != r->nticks + 1 || t.nranks == 0)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu follows tick %zu", r->path, (unsigned long long)t.tick,
                           r->nticks);
    int crc = tick_check(r, &t, &r->fsize, err);
    if (crc) return crc;
    /* A sparse file can claim any size for nothing: a table over a hole
     * (bytes never written, read as zeros; a real table never has 64 zero
     * bytes in a row) is refused before it is allocated and read. */
    uint64_t hole;
    /* (a lazy tick's table is looked for holes when it is decoded) */
    /* Only a table that would cost an allocation worth avoiding is looked
     * for holes: SEEK_HOLE may walk the file from the table to the next
     * hole (tmpfs: page by page to the end), once per tick made opening a
     * long log quadratic. A smaller table over a hole is read, and its
     * zeros fail the block checksum. */
    if (!lazy && t.table_size >= HOLE_CHECK_MIN && h5l_rd_table_hole(r->fd, t.table_off, t.table_size, &hole))
        return h5l_err_set(
            err, H5L_ECORRUPT,
            "%s: tick %llu: record table [%llu, +%llu) lies over a hole of the file at %llu (never written)", r->path,
            (unsigned long long)t.tick, (unsigned long long)t.table_off, (unsigned long long)t.table_size,
            (unsigned long long)hole);
    /* segment checksums: one per started segment of each rank, and 8 table
     * bytes each besides the ranks' block headers (data_size alone may be a
     * hole of terabytes) */
    uint64_t seg = (uint64_t)1 << r->seglog;
    uint64_t maxsums = t.data_size / seg + t.nranks;
    uint64_t tabsums = (t.table_size - (uint64_t)t.nranks * H5L_BLOCK_LEN) / 8;
    if (maxsums > tabsums) maxsums = tabsums;
    size_t xneed = 2 * ((size_t)t.nranks + 1) + (size_t)maxsums; /* pool entries at most */
    uint8_t *tab = NULL;
    const uint8_t *tabp = NULL;
    int trc = lazy ? H5L_OK : table_bytes(r, &t, &tabp, &tab, err);
    if (trc) return trc;
    if (lazy) xneed = 0;
    int rc = H5L_OK;
    if (!r->unshared) pthread_rwlock_wrlock(&r->lock);
    if (!lazy && (uint64_t)r->pool_len + xneed >= TX_LAZY) /* tickrec keeps pool offsets in 32 bits */
        rc = h5l_err_set(err, H5L_ENOMEM,
                         "%s: tick %llu: the reader's pool of offsets and checksums is full (2^32 entries)", r->path,
                         (unsigned long long)t.tick);
    if (!rc &&
        r->pool_cap - r->pool_len < xneed) { /* moved only under the write lock: views are taken under a read lock */
        size_t cap = r->pool_cap ? 2 * r->pool_cap : 4096;
        if (cap < r->pool_len + xneed) cap = r->pool_len + xneed;
        uint64_t *p = realloc(r->pool, cap * sizeof *p);
        if (p) {
            r->pool = p;
            r->pool_cap = cap;
        } else {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        }
    }
    tickx_t xv = {0}, *x = &xv;
    if (!rc && !lazy) {
        x->nranks = t.nranks;
        x->rstart = r->pool + r->pool_len;
        x->segbase = x->rstart + t.nranks + 1;
        x->sums = x->segbase + t.nranks + 1;
    }
    for (uint32_t i = 0; i < nops && !rc; i++) {
        h5l_op_t op;
        /* out of memory is no damage: the tick is loaded again later */
        int drc = h5l_op_decode(&c, &op);
        if (drc) {
            rc = drc == H5L_ENOMEM ? h5l_err_set(err, drc, "%s: tick %llu: out of memory", r->path,
                                                 (unsigned long long)t.tick)
                                   : h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: schema op %u is malformed",
                                                 r->path, (unsigned long long)t.tick, i);
            break;
        }
        h5l_err_t e2;
        rc = h5l_schema_apply(&r->schema, t.tick, &op, &e2);
        if (rc) {
            rc = h5l_err_set(err, rc == H5L_ENOMEM ? rc : H5L_ECORRUPT, "%s: tick %llu: %s", r->path,
                             (unsigned long long)t.tick, e2.msg);
        } else if (op.kind == H5L_OP_VAR) {
            rc = h5l_index_add_var(r->index, op.id, op.ndims, op.chunk);
            if (rc)
                h5l_err_set(err, rc, "%s: cannot index variable '%s'%s", r->path, op.name,
                            rc == H5L_ENOMEM ? ": out of memory" : "");
        }
        h5l_op_clear(&op);
    }
    if (!rc && c.pos != c.len)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: trailing bytes after ops", r->path,
                         (unsigned long long)t.tick);
    /* Check every record before indexing any, and undo the tick's schema ops
     * on failure: a tick that fails leaves neither records nor definitions. */
    size_t npend = 0;
    if (!rc && !lazy)
        rc = h5l_rd_load_table(r, &t, tabp, x, maxsums, &r->pend, &r->cap_pend, &npend, index_rec, r->index, err);
    for (size_t i = 0; !rc && i < npend; i++)
        if ((rc = h5l_index_insert(r->index, r->pend[i])))
            rc = h5l_err_set(err, rc, "%s: cannot index record: %s", r->path, h5l_strerror(rc));
    if (r->cap_pend > 4096) { /* a big tick's room is not kept for the reader's life */
        free(r->pend);
        r->pend = NULL;
        r->cap_pend = 0;
    }
    if (rc) h5l_schema_rollback(&r->schema, t.tick);
    if (!rc && r->nticks == r->cap_ticks) {
        size_t cap = r->cap_ticks ? r->cap_ticks * 2 : 64;
        tickrec_t *ti = realloc(r->ticks, cap * sizeof *ti);
        if (ti) r->ticks = ti;
        if (!ti)
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        else
            r->cap_ticks = cap;
    }
    if (!rc) { /* the tick becomes visible here (lazy: its table decoded when first needed) */
        if (lazy < 2) tickrec_set(&r->ticks[r->nticks], &t, lazy ? TX_LAZY : (uint32_t)r->pool_len);
        if (lazy)
            r->lazy_nrec += t.nrecords;
        else
            r->pool_len += 2 * ((size_t)t.nranks + 1) + (size_t)x->segbase[t.nranks]; /* the sums it has */
        r->nticks++;
    }
    if (!r->unshared) pthread_rwlock_unlock(&r->lock);
    free(tab);
    *cp = c;
    return rc;
}

static int load_tick(h5l_reader_t *r, const uint8_t *payload, uint32_t len, h5l_err_t *err)
{
    h5l_cur_t c = h5l_cur(payload, len);
    h5l_tick_info_t t;
    uint32_t nops;
    if (h5l_tick_decode(&c, &t, &nops)) return h5l_err_set(err, H5L_ECORRUPT, "%s: tick record too short", r->path);
    return load_tick_body(r, &t, &c, nops, 0, err);
}

/* Forget everything loaded: back to a reader that has read only the
 * journal header. 0 or H5L_ENOMEM. */
static int reset_load(h5l_reader_t *r)
{
    h5l_rd_lazy_free_all(r);
    h5l_schema_free(&r->schema);
    h5l_index_free(r->index);
    r->index = h5l_index_new();
    r->nticks = 0;
    r->pool_len = 0;
    r->jpos = H5L_JHDR_LEN;
    return !r->index || h5l_schema_init(&r->schema) ? H5L_ENOMEM : H5L_OK;
}

/* Start from the journal's index checkpoints (docs/format.md 3.5): the
 * schema and ticks of every checkpointed segment from their compact
 * entries, eager ticks' tables indexed now, every other table decoded when
 * first needed; then the frames after the newest checkpoint are read as
 * usual. Anything that does not line up — and anything a tick's own checks
 * refuse — and the reader starts over and reads the whole journal, so a
 * checkpoint never changes an answer. 0, or H5L_ENOMEM. */
/* Every chunk entry of checkpoint c names a variable defined by its last
 * tick, with that variable's rank, and a chunk inside the variable's
 * shape then (format.md 3.5): the chunk map and the skeletons index by
 * them. Checksums do not prove it (a crafted file, a writer bug): one that
 * does not fit makes the reader read the whole journal instead. Called
 * after the segment's ticks are applied to the schema. */
static int ck_chunks_fit(const h5l_reader_t *r, const h5l_ckpt_t *c)
{
    const h5l_schema_t *s = &r->schema;
    uint64_t nblk[H5L_MAX_DIMS];
    uint32_t cur = UINT32_MAX; /* entries come sorted by variable: its grid once */
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        if (k->objid != cur) {
            if (k->objid >= s->nobjs) return 0;
            const h5l_obj_t *o = &s->objs[k->objid];
            if (o->kind != H5L_OBJ_VAR || o->tick > c->last || o->ndims != k->nd) return 0;
            for (uint32_t d = 0; d < o->ndims; d++) {
                uint64_t len = h5l_schema_dimlen(s, o->dimids[d], c->last);
                nblk[d] = len && o->chunk[d] ? (len - 1) / o->chunk[d] + 1 : 0;
            }
            cur = k->objid;
        }
        if (k->nd != s->objs[cur].ndims) return 0;
        for (uint32_t d = 0; d < k->nd; d++)
            if (k->coord[d] >= nblk[d]) return 0;
    }
    return 1;
}

/* The chunk runs of a simple segment's summary fit the schema as
 * ck_chunks_fit's entries must (every chunk of a run inside the variable's
 * grid at the segment's last tick). */
static int ck_runs_fit(const h5l_reader_t *r, const h5l_cksum_t *sm, uint64_t last)
{
    const h5l_schema_t *s = &r->schema;
    for (size_t i = 0; i < sm->ncr; i++) {
        const h5l_ckchunk_run_t *k = &sm->cr[i];
        if (k->objid >= s->nobjs) return 0;
        const h5l_obj_t *o = &s->objs[k->objid];
        if (o->kind != H5L_OBJ_VAR || o->tick > last || o->ndims != k->nd) return 0;
        for (uint32_t d = 0; d < o->ndims; d++) {
            uint64_t len = h5l_schema_dimlen(s, o->dimids[d], last);
            uint64_t nblk = len && o->chunk[d] ? (len - 1) / o->chunk[d] + 1 : 0;
            if (k->coord[d] >= nblk || (d == 0 && k->cnt - 1 >= nblk - k->coord[d])) return 0;
        }
    }
    return 1;
}

/* A simple segment (format.md 3.5) from its summary alone: its dimension
 * runs, its record count, its chunk runs; its frame is read and decoded
 * when a call first needs one of its ticks (seg_fill, whose decoding also
 * checks the summary against the entries). 1, or 0: the reader then reads
 * the whole journal. */
static int apply_summary(h5l_reader_t *r, const h5l_cksum_t *sm, uint64_t first, uint64_t last)
{
    if (first != r->nticks + 1 || last > r->cap_ticks) return 0;
    for (size_t i = 0; i < sm->ndr; i++) {
        const h5l_ckdim_run_t *d = &sm->dr[i];
        if (h5l_schema_dimlen_run(&r->schema, d->dimid, d->tick, d->len, d->n, d->dt, d->dl, NULL)) return 0;
    }
    /* the last values, as of the last tick: exact from it on; a tick inside
     * the segment gets its own (h5l_reader_schema_at) */
    for (size_t i = 0; i < sm->nat; i++)
        if (h5l_schema_apply(&r->schema, last, &sm->at[i], NULL)) return 0;
    r->nticks = (size_t)last;
    r->lazy_nrec += sm->nrec;
    return r->no_map || (ck_runs_fit(r, sm, last) && h5l_ckmap_add_runs(r->ckmap, sm) == H5L_OK);
}

static int start_from_checkpoints(h5l_reader_t *r)
{
    uint64_t end = r->live ? file_size(r->jfd) : r->jlimit;
    h5l_ckpt_chain_t ch;
    int k = h5l_ckpt_chain_read(r->jfd, r->jbase, end, r->seed, r->scan.what, &ch);
    if (k != 1) return k == H5L_ENOMEM ? k : H5L_OK;
    uint64_t last = ch.last;
    int ok = (r->ckmap = h5l_ckmap_new()) != NULL &&
             (r->lzdir = calloc((size_t)((last + LZPAGE - 1) / LZPAGE), sizeof *r->lzdir)) != NULL;
    if (ok) r->ck_last = last;
    if (ok) { /* room for every checkpointed tick at once (pages untouched until a segment is filled) */
        tickrec_t *ti = realloc(r->ticks, (size_t)last * sizeof *ti);
        if (ti) r->ticks = ti;
        ok = ti != NULL;
        if (ok) r->cap_ticks = (size_t)last;
    }
    if (ok && (ok = (r->segs = calloc(ch.n ? ch.n : 1, sizeof *r->segs)) != NULL)) r->nsegs = ch.n;
    r->fsize = file_size(r->fd);
    h5l_err_t e = {0};
    uint8_t *fb = NULL; /* one segment read and decoded at a time */
    size_t fcap = 0;
    for (size_t i = 0; ok && i < ch.n; i++) {
        h5l_ckpt_t c = {0};
        h5l_cksum_t sm = {0};
        uint64_t avail = ch.lens[i] - H5L_FRAME_LEN - H5L_CKPT_HDR - 8 - ch.slen[i]; /* (frames_fixed: it fits) */
        if (ch.sum[i] && h5l_cksum_decode(ch.sum[i], ch.slen[i], ch.firsts[i], ch.lasts[i], avail, &sm) == H5L_OK &&
            sm.simple && (!sm.attrs || r->lazy_attrs)) { /* its summary is all the open needs */
            ok = apply_summary(r, &sm, ch.firsts[i], ch.lasts[i]);
            int attrs = sm.attrs;
            h5l_cksum_free(&sm);
            if (ok)
                r->segs[i] = (ckseg_t){.first = ch.firsts[i],
                                       .last = ch.lasts[i],
                                       .pos = ch.pos[i],
                                       .len = ch.lens[i],
                                       .summary = 1,
                                       .attrs = attrs,
                                       .slen = (uint32_t)ch.slen[i],
                                       .ssum = h5l_hash(ch.sum[i], ch.slen[i], r->seed)};
            continue;
        }
        h5l_cksum_free(&sm);
        if (fcap < ch.lens[i]) {
            free(fb);
            fcap = ch.lens[i];
            if (!(fb = malloc(fcap))) fcap = 0;
        }
        ok = fb && !h5l_fd_read_all(r->jfd, fb, ch.lens[i], r->jbase + ch.pos[i], r->scan.what, NULL) &&
             h5l_ckpt_decode(fb, ch.lens[i], r->seed, ch.pos[i], &c, r->scan.what, &e) == H5L_OK &&
             c.first == r->nticks + 1;
        size_t ei = 0;
        for (uint64_t j = 0; ok && j <= c.last - c.first; j++) {
            const h5l_ckpt_tick_t *t = &c.ticks[j];
            int eager = ei < c.neager && c.eager[ei] == t->info.tick;
            ei += eager;
            h5l_cur_t cur = h5l_cur(t->ops, t->opslen);
            ok = load_tick_body(r, &t->info, &cur, t->nops, eager ? 0 : 2, &e) == H5L_OK && cur.pos == cur.len;
        }
        if (ok) r->segs[i] = (ckseg_t){.first = c.first, .last = c.last, .pos = ch.pos[i], .len = ch.lens[i]};
        ok = ok && (r->no_map || (ck_chunks_fit(r, &c) && h5l_ckmap_add(r->ckmap, &c) == H5L_OK));
        h5l_ckpt_clear(&c);
    }
    free(fb);
    if (ok) { /* the journal goes on with the next tick, its CLOSE or its end */
        h5l_frame_t fr;
        int n = h5l_jscan_next(&r->scan, ch.next, end, &fr, &e);
        ok = n == 0 || (n == 1 && (fr.type == H5L_REC_CLOSE || (fr.type & H5L_REC_OPTIONAL) ||
                                   (fr.type == H5L_REC_TICK && fr.len >= 8 && h5l_get_le64(fr.payload) == last + 1)));
    }
    if (ok) {
        r->jpos = ch.next;
        h5l_ckmap_trim(r->ckmap);
    }
    h5l_ckpt_chain_free(&ch);
    return ok ? H5L_OK : reset_load(r);
}

int h5l_reader_refresh(h5l_reader_t *r, int *nnew, h5l_err_t *err)
{
    if (nnew) *nnew = 0;
    pthread_mutex_lock(&r->refresh_mu);
    int rc = H5L_OK;
    if (r->failed) {
        if (err) *err = r->ferr;
        rc = r->ferr.code;
        goto out;
    }
    if (r->closed) goto out;
    uint64_t end = r->live ? file_size(r->jfd) : r->jlimit;
    /* Every frame this refresh can load lies below `end`, so it was
     * committed, its table written, before any read below: the table
     * window may serve them. A window kept from an earlier refresh may
     * hold bytes read before a later tick's table was written. */
    r->twin_len = 0;
    if (r->live && r->scan.need && end < r->scan.need) goto out; /* a torn tail not grown enough: read nothing */
    for (;;) {
        h5l_frame_t fr;
        int k = h5l_jscan_next(&r->scan, r->jpos, end, &fr, err);
        if (k < 0) {
            rc = k;
            if (rc == H5L_ECORRUPT) r->damaged_tick = r->nticks + 1;
            break;
        }
        if (k == 0) break;
        uint16_t type = fr.type;
        if (r->closed) {
            rc = h5l_err_set(err, H5L_ECORRUPT, "%s: journal continues after its CLOSE record (offset %llu)",
                             r->scan.what, (unsigned long long)fr.pos);
            break;
        }
        if (type == H5L_REC_TICK) {
            rc = load_tick(r, fr.payload, fr.len, err);
            if (rc) {
                if (rc != H5L_ENOMEM && rc != H5L_EIO) r->damaged_tick = r->nticks + 1; /* (those: tried again) */
                break;
            }
            if (nnew) (*nnew)++;
        } else if (type == H5L_REC_CLOSE) {
            r->closed = 1;
        } else if (!(type & H5L_REC_OPTIONAL)) {
            rc = h5l_err_set(err, H5L_ECORRUPT, "%s: journal frame at offset %llu has unknown type %u", r->scan.what,
                             (unsigned long long)fr.pos, type);
            break;
        }
        r->jpos = fr.next;
    }
    if (!rc && !r->live && r->jpos != end)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal ends in an incomplete record", r->path);
    if (!rc && !r->live && !r->closed)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal has no CLOSE record", r->path);
    if (rc && rc != H5L_EIO && rc != H5L_ENOMEM) {
        r->failed = 1;
        if (err)
            r->ferr = *err;
        else
            h5l_err_set(&r->ferr, rc, "%s: %s", r->path, h5l_strerror(rc));
    }
out:
    pthread_mutex_unlock(&r->refresh_mu);
    return rc;
}

int h5l_reader_damage(h5l_reader_t *r, uint64_t *tick, h5l_err_t *err)
{
    pthread_mutex_lock(&r->refresh_mu);
    int rc = r->failed ? r->ferr.code : H5L_OK;
    if (rc && err) *err = r->ferr;
    if (tick) *tick = r->failed ? r->damaged_tick : 0;
    pthread_mutex_unlock(&r->refresh_mu);
    return rc;
}

uint64_t h5l_reader_ntick(h5l_reader_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    uint64_t n = r->nticks;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int h5l_reader_closed(h5l_reader_t *r)
{
    pthread_mutex_lock(&r->refresh_mu);
    int c = r->closed;
    pthread_mutex_unlock(&r->refresh_mu);
    return c;
}

int h5l_reader_live(h5l_reader_t *r) { return r->live; }
uint64_t h5l_reader_ckpt_last(h5l_reader_t *r) { return r->ck_last; }
void h5l_reader_ckpt_segments(h5l_reader_t *r, uint64_t *nseg, uint64_t *nsummary)
{
    uint64_t k = 0;
    for (size_t i = 0; i < r->nsegs; i++) k += r->segs[i].summary;
    *nseg = r->nsegs;
    *nsummary = k;
}

int h5l_reader_check_checkpoints(h5l_reader_t *r, void (*report)(void *ctx, const char *msg), void *ctx,
                                 uint64_t *found, uint64_t *bad, h5l_err_t *err)
{
    pthread_mutex_lock(&r->refresh_mu); /* the schema and tick count stay as they are */
    /* The journal up to where this reader read, not to the end of a live
     * file: a checkpoint the writer appended since covers ticks whose
     * schema and tables were never loaded, so it cannot be compared, and
     * counting it would pass it as verified. */
    h5l_ckv_in_t in = {r->jfd, r->jbase, r->jpos, r->live, r->fd, r->seed, r->scan.what, &r->schema, r->nticks};
    h5l_ckv_out_t out;
    int rc = h5l_ckv_check(&in, report, ctx, &out, err);
    pthread_mutex_unlock(&r->refresh_mu);
    if (found) *found = out.found;
    if (bad) *bad = out.bad;
    return rc;
}
const uint8_t *h5l_reader_id(h5l_reader_t *r) { return r->id; }
const char *h5l_reader_path(h5l_reader_t *r) { return r->path; }

uint64_t h5l_reader_journal_pos(h5l_reader_t *r)
{
    pthread_mutex_lock(&r->refresh_mu);
    uint64_t p = r->jpos;
    pthread_mutex_unlock(&r->refresh_mu);
    return p;
}

uint64_t h5l_reader_index_bytes(h5l_reader_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    uint64_t n = h5l_index_memory(r->index);
    pthread_rwlock_unlock(&r->lock);
    return n;
}

uint64_t h5l_reader_nrecords(h5l_reader_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    uint64_t n = h5l_index_nrecords(r->index) + r->lazy_nrec;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int h5l_reader_tick_info(h5l_reader_t *r, uint64_t t, h5l_tick_info_t *out)
{
    pthread_rwlock_rdlock(&r->lock);
    int rc = H5L_ENOTFOUND;
    if (t >= 1 && t <= r->nticks) {
        const tickrec_t *tr;
        rc = h5l_rd_tick_rec(r, t, &tr, NULL);
        if (!rc) *out = tick_info_of(tr, t);
    }
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

void h5l_reader_rdlock(h5l_reader_t *r) { h5l_rd_lock(r); }
void h5l_reader_unlock(h5l_reader_t *r) { h5l_rd_unlock(r); }
const h5l_schema_t *h5l_reader_schema(h5l_reader_t *r) { return &r->schema; }

/* The lazy attribute segment holding tick t strictly inside, or NULL. */
static const ckseg_t *attr_seg_of(const h5l_reader_t *r, uint64_t t)
{
    const ckseg_t *sg = ckseg_of(r, t);
    return sg && sg->attrs && t >= sg->first && t < sg->last ? sg : NULL;
}

int h5l_reader_attrs_exact(h5l_reader_t *r, uint64_t tick) { return attr_seg_of(r, tick) == NULL; }

/* A view (h5l_schema_view) of the schema as of tick, inside the lazy
 * attribute segment sg: the versions set before it, then its ATTR ops of
 * ticks first..tick, read from its checkpoint frame (read, verified and
 * decoded again: it must be the frame whose summary the open applied). */
static int attrs_view(h5l_reader_t *r, const ckseg_t *sg, uint64_t tick, h5l_schema_t *v, h5l_err_t *err)
{
    uint8_t *fb = NULL;
    h5l_ckpt_t c = {0};
    h5l_err_t e = {0};
    int rc = seg_reread(r, sg, &fb, &c, err);
    if (!rc && h5l_schema_view(v, &r->schema, sg->first - 1))
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    for (uint64_t j = 0; !rc && j <= tick - sg->first; j++) {
        const h5l_ckpt_tick_t *t = &c.ticks[j];
        h5l_cur_t cur = h5l_cur(t->ops, t->opslen);
        for (uint32_t k = 0; !rc && k < t->nops; k++) {
            h5l_op_t op;
            int drc = h5l_op_decode(&cur, &op), arc = H5L_OK; /* (a failed decode freed what it took) */
            if (!drc && op.kind == H5L_OP_ATTR) arc = h5l_schema_apply(v, t->info.tick, &op, &e);
            if (!drc) h5l_op_clear(&op);
            if (drc == H5L_ENOMEM || arc == H5L_ENOMEM)
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            else if (drc || arc) /* (the open applied the same ops' last values: a writer bug or damage) */
                rc = h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: %s", r->scan.what,
                                 (unsigned long long)t->info.tick, drc ? "malformed schema op" : e.msg);
        }
    }
    if (rc && v->base) h5l_schema_free(v);
    h5l_ckpt_clear(&c);
    free(fb);
    return rc;
}

int h5l_reader_schema_at(h5l_reader_t *r, uint64_t tick, const h5l_schema_t **out, h5l_err_t *err)
{
    *out = &r->schema;
    const ckseg_t *sg = attr_seg_of(r, tick);
    if (!sg) return H5L_OK;
    h5l_schema_t *v = malloc(sizeof *v);
    if (!v) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    memset(v, 0, sizeof *v);
    int rc = attrs_view(r, sg, tick, v, err);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return H5L_OK;
}

void h5l_reader_schema_release(h5l_reader_t *r, const h5l_schema_t *s)
{
    if (!s || s == &r->schema) return;
    h5l_schema_t *v = (h5l_schema_t *)s; /* (made by h5l_reader_schema_at, owned by its caller) */
    h5l_schema_free(v);
    free(v);
}

void h5l_reader_stats(h5l_reader_t *r, uint64_t *bytes, uint64_t *records)
{
    if (bytes) *bytes = atomic_load(&r->stat_bytes);
    if (records) *records = atomic_load(&r->stat_records);
}

static void drop_seg(void *ctx, uint64_t off, uint64_t len)
{
    h5l_reader_t *r = ctx;
    if (posix_fadvise(r->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED) == 0) atomic_fetch_add(&r->stat_dropped, len);
}

uint64_t h5l_reader_dropped(h5l_reader_t *r) { return atomic_load(&r->stat_dropped); }

void h5l_reader_tables(h5l_reader_t *r, uint64_t *held, uint64_t *loads, uint64_t *evicted)
{
    if (held) *held = atomic_load(&r->lazy_bytes);
    if (loads) *loads = atomic_load(&r->lazy_loads);
    if (evicted) *evicted = atomic_load(&r->lazy_evicted);
}

/* Log bytes delivered to a caller (not metadata), for drop-behind: only
 * what the caller got counts, not the whole checksum segment read to
 * verify it. Counting the segment made a reader of a few bytes per segment
 * (chunks across a rank's row-major data) complete drop segments at its
 * first pass and drop pages the next chunk needed: 2.1 GB re-read from
 * disk to serve 16 MiB. */
void h5l_rd_count_delivered(h5l_reader_t *r, uint64_t off, uint64_t n)
{
    h5l_drop_t *d = atomic_load(&r->drop);
    if (d) h5l_drop_count(d, off, n, drop_seg, r);
}

/* Log bytes read for a caller and delivered whole: statistics and
 * drop-behind. */
void h5l_rd_count_read(h5l_reader_t *r, uint64_t off, uint64_t n)
{
    atomic_fetch_add(&r->stat_bytes, n);
    h5l_rd_count_delivered(r, off, n);
}

void h5l_reader_dropbehind(h5l_reader_t *r)
{
    if (atomic_load(&r->drop)) return;
    h5l_drop_t *d = h5l_drop_new(), *none = NULL;
    if (d && !atomic_compare_exchange_strong(&r->drop, &none, d)) h5l_drop_free(d);
}
