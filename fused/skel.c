/* skel.c — canonical skeletons (see skel.h).
 *
 * The file is built by libcore's canon module on the capture driver; libhdf5
 * writes no raw byte we keep. Most data is allocated early (fill time
 * never): the raw allocation records inside the capture window around a
 * dataset's H5Dcreate (canon calls us just before and just after it) are its
 * regions: one for a contiguous dataset (checked against H5Dget_offset), one
 * per chunk in row-major order for a chunked one. A chunked dataset whose
 * shape has more than 2^16 chunks (canon.c, SPARSE_CHUNKS) is *sparse*:
 * allocated incrementally, H5Dcreate allocates no chunk; once the metadata
 * is built we write, with H5Dwrite_chunk, exactly the chunks the reader's
 * index says hold data (a buffer of zeros the driver drops), one capture
 * window each, so each window's one record is that chunk's address. A
 * sparse axis (one row at t = 2^40) thus costs its chunks with data, not the
 * 2^36 of its shape; chunks not written are not in the file and every HDF5
 * reader reads them as the fill value. The mapping is checked on every
 * build on the first and last chunk of each chunked variable with
 * H5Dget_chunk_info_by_coord (two calls, not one per chunk, which would be
 * quadratic in 1.10.8). */
#include "skel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hdf5.h>

#include "canon.h"
#include "grow.h"

static atomic_int g_cancel;
void hfs_skel_cancel(int on) { atomic_store(&g_cancel, on); }

#ifdef HFS_TEST_HOOKS
#include <errno.h>
#include <stdio.h>
/* Test builds only (build/tests/h5logfs_hooks, tests/e2e/test_scale.py):
 * a build of a file whose path contains $H5LOGFS_TEST_SLOW_BUILD sleeps
 * $H5LOGFS_TEST_SLOW_SECONDS (default 3) holding the libhdf5 lock, as a
 * huge schema would; one whose path contains $H5LOGFS_TEST_FAIL_BUILD
 * fails. Counted in a file $H5LOGFS_TEST_BUILD_COUNT (one line per build)
 * if set, so a test can see retries. Not compiled into the daemon. */
static int test_hook(h5l_reader_t *r, h5l_err_t *err)
{
    const char *path = h5l_reader_path(r), *slow = getenv("H5LOGFS_TEST_SLOW_BUILD");
    const char *fail = getenv("H5LOGFS_TEST_FAIL_BUILD"), *count = getenv("H5LOGFS_TEST_BUILD_COUNT");
    if (count) {
        FILE *f = fopen(count, "a");
        if (f) {
            fprintf(f, "%s\n", path);
            fclose(f);
        }
    }
    if (slow && *slow && strstr(path, slow)) {
        const char *sec = getenv("H5LOGFS_TEST_SLOW_SECONDS");
        double t = sec ? atof(sec) : 3.0;
        for (double slept = 0; slept < t && !atomic_load(&g_cancel); slept += 0.01) { /* cancellable */
            struct timespec ts = {0, 10000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
        }
    }
    if (fail && *fail && strstr(path, fail))
        return h5l_err_set(err, H5L_EHDF5, "%s: test hook: this build fails", path);
    return H5L_OK;
}
#endif

static pthread_mutex_t hdf5_mu = PTHREAD_MUTEX_INITIALIZER;
void hfs_hdf5_lock(void) { pthread_mutex_lock(&hdf5_mu); }
void hfs_hdf5_unlock(void) { pthread_mutex_unlock(&hdf5_mu); }

uint64_t hfs_skel_version(h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick)
{
    uint64_t v = h5l_reader_chunks_version(r, tick); /* a chunk got data: allocate it */
    for (size_t i = 0; i < s->nobjs; i++)
        if (s->objs[i].kind && s->objs[i].tick <= tick && s->objs[i].tick > v) v = s->objs[i].tick;
    for (size_t i = 0; i < s->ndims; i++)
        for (size_t j = 0; j < s->dims[i].nlens; j++)
            if (s->dims[i].lens[j].tick <= tick && s->dims[i].lens[j].tick > v) v = s->dims[i].lens[j].tick;
    for (size_t i = 0; i < s->nattrs; i++)
        if (s->attrs[i].tick <= tick && s->attrs[i].tick > v) v = s->attrs[i].tick;
    return v;
}

hfs_skel_t *hfs_skel_ref(hfs_skel_t *k)
{
    atomic_fetch_add(&k->refs, 1);
    return k;
}

void hfs_skel_unref(hfs_skel_t *k)
{
    if (!k || atomic_fetch_sub(&k->refs, 1) != 1) return;
    hfs_memvfd_image_free(k->img);
    free(k->vars);
    free(k->regions);
    free(k);
}

void hfs_skel_block_box(const hfs_svar_t *v, uint64_t blk, uint64_t *start, uint64_t *count)
{
    for (int d = (int)v->ndims - 1; d >= 0; d--) {
        uint64_t c = blk % v->nblk[d];
        blk /= v->nblk[d];
        start[d] = c * v->block[d];
        count[d] = v->shape[d] - start[d] < v->block[d] ? v->shape[d] - start[d] : v->block[d];
    }
}

size_t hfs_skel_find(const hfs_skel_t *k, uint64_t off)
{
    size_t lo = 0, hi = k->nregions;
    while (lo < hi) { /* first region whose end is past off */
        size_t mid = (lo + hi) / 2;
        if (k->regions[mid].addr + k->regions[mid].len <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

typedef struct build {
    hfs_skel_t *k;
    h5l_reader_t *r;
    const h5l_schema_t *s;
    uint64_t tick;
    hfs_memvfd_t *cap;
    size_t raw_seen;
    size_t cap_regions;
    h5l_err_t *err;
    uint64_t *coords; /* chunk coordinates of the variable being built */
    size_t ncoords, capcoords;
    uint32_t ndims;
    void *zero; /* chunk-sized zeros for H5Dwrite_chunk (never stored) */
    size_t zero_len;
} build_t;

static int add_region(build_t *b, uint64_t addr, uint64_t len, uint32_t var, uint64_t blk)
{
    hfs_skel_t *k = b->k;
    if (h5l_grow((void **)&k->regions, &b->cap_regions, k->nregions + 1, sizeof *k->regions)) return H5L_ENOMEM;
    k->regions[k->nregions++] = (hfs_region_t){addr, len, var, blk};
    return H5L_OK;
}

/* h5l_reader_chunks callback: collect one chunk's coordinates. */
static int add_coord(void *ctx, const uint64_t *coord)
{
    build_t *b = ctx;
    if (h5l_grow((void **)&b->coords, &b->capcoords, b->ncoords + 1, b->ndims * sizeof *b->coords)) return H5L_ENOMEM;
    memcpy(b->coords + b->ncoords++ * b->ndims, coord, b->ndims * sizeof *coord);
    return H5L_OK;
}

/* Row-major order of chunk coordinates (arg: the rank). */
static int cmp_coord(const void *x, const void *y, void *arg)
{
    const uint64_t *a = x, *c = y;
    for (uint32_t d = 0; d < *(const uint32_t *)arg; d++)
        if (a[d] != c[d]) return a[d] < c[d] ? -1 : 1;
    return 0;
}

/* Called by canon right after each variable's H5Dcreate. */
static int on_var(void *ctx, uint32_t objid, hid_t dset)
{
    build_t *b = ctx;
    if (atomic_load(&g_cancel)) /* the daemon is stopping: give up (canon.c unwinds) */
        return h5l_err_set(b->err, H5L_EIO, "%s: skeleton build cancelled (stopping)", h5l_reader_path(b->r));
    if (dset < 0) { /* about to create it: open the capture window */
        b->raw_seen = hfs_memvfd_raw_begin(b->cap);
        return H5L_OK;
    }
    hfs_skel_t *k = b->k;
    const h5l_obj_t *o = &b->s->objs[objid];
    size_t now = hfs_memvfd_raw_end(b->cap), first = b->raw_seen;
    hfs_svar_t *v = &k->vars[k->nvars];
    memset(v, 0, sizeof *v);
    v->objid = objid;
    v->ndims = o->ndims;
    v->esize = o->type.size;
    v->chunked = o->chunked;
    h5l_schema_shape(b->s, objid, b->tick, v->shape);
    v->nblocks = 1;
    uint64_t block_bytes = v->esize;
    for (uint32_t d = 0; d < o->ndims; d++) {
        v->block[d] = o->chunk[d];
        v->nblk[d] = (v->shape[d] + v->block[d] - 1) / v->block[d];
        v->nblocks *= v->nblk[d];
        block_bytes *= v->block[d];
    }
    uint32_t vi = (uint32_t)k->nvars++;
    size_t nraw = now - first;
    if (v->nblocks == 0) return nraw == 0 ? H5L_OK : H5L_ECORRUPT;
    hfs_memvfd_alloc_t a;
    if (!v->chunked) {
        haddr_t off = H5Dget_offset(dset);
        if (nraw != 1 || hfs_memvfd_raw_get(b->cap, first, &a) || a.addr != off) return H5L_ECORRUPT;
        for (uint64_t blk = 0; blk < v->nblocks; blk++) {
            uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS], lin = 0, n = 1;
            hfs_skel_block_box(v, blk, st, ct);
            for (uint32_t d = 0; d < v->ndims; d++) {
                lin = lin * v->shape[d] + st[d];
                n *= ct[d];
            }
            int rc = add_region(b, a.addr + lin * v->esize, n * v->esize, vi, blk);
            if (rc) return rc;
        }
        return H5L_OK;
    }
    if (nraw == 0) { /* sparse: incremental allocation, chunks written by write_chunks */
        v->sparse = 1;
        return H5L_OK;
    }
    /* early allocation: every chunk, in row-major chunk order */
    if (nraw != v->nblocks) return H5L_ECORRUPT;
    for (uint64_t blk = 0; blk < v->nblocks; blk++) {
        if (hfs_memvfd_raw_get(b->cap, first + blk, &a) || a.size != block_bytes) return H5L_ECORRUPT;
        int rc = add_region(b, a.addr, a.size, vi, blk);
        if (rc) return rc;
    }
    /* guard the row-major assumption at both ends of the chunk order */
    uint64_t ends[2] = {0, v->nblocks - 1};
    for (int e = 0; e < 2; e++) {
        uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
        hsize_t coord[H5L_MAX_DIMS], size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        hfs_skel_block_box(v, ends[e], st, ct);
        for (uint32_t d = 0; d < v->ndims; d++) coord[d] = st[d];
        if (H5Dget_chunk_info_by_coord(dset, coord, &mask, &addr, &size) < 0) return H5L_EHDF5;
        hfs_memvfd_raw_get(b->cap, first + ends[e], &a);
        if (addr != a.addr) return H5L_ECORRUPT;
    }
    return H5L_OK;
}

/* Allocate the chunks of chunked variable vi that hold data: write each
 * (sorted, so the file does not depend on the index's hash order) in its
 * own capture window, after the whole metadata is built. */
static int write_chunks(build_t *b, uint32_t vi, hid_t dset)
{
    hfs_svar_t *v = &b->k->vars[vi];
    uint32_t objid = v->objid;
    uint64_t block_bytes = v->esize;
    for (uint32_t d = 0; d < v->ndims; d++) block_bytes *= v->block[d];
    hfs_memvfd_alloc_t a;
    b->ncoords = 0;
    b->ndims = v->ndims;
    int rc = h5l_reader_chunks(b->r, b->tick, objid, add_coord, b);
    if (rc) return rc;
    if (!b->ncoords) return H5L_OK;
    qsort_r(b->coords, b->ncoords, v->ndims * sizeof *b->coords, cmp_coord, &b->ndims);
    { /* a wide record's chunks may come more than once (index.h): each once */
        size_t k = 0, w = v->ndims * sizeof *b->coords;
        for (size_t c = 0; c < b->ncoords; c++)
            if (!k || memcmp(b->coords + (k - 1) * v->ndims, b->coords + c * v->ndims, w) != 0)
                memmove(b->coords + k++ * v->ndims, b->coords + c * v->ndims, w);
        b->ncoords = k;
    }
    if (b->zero_len < block_bytes) {
        free(b->zero);
        b->zero = calloc(1, (size_t)block_bytes);
        b->zero_len = b->zero ? (size_t)block_bytes : 0;
        if (!b->zero) return H5L_ENOMEM;
    }
    for (size_t c = 0; c < b->ncoords; c++) {
        const uint64_t *cc = b->coords + c * v->ndims;
        hsize_t off[H5L_MAX_DIMS];
        uint64_t blk = 0;
        for (uint32_t d = 0; d < v->ndims; d++) {
            if (cc[d] >= v->nblk[d]) return H5L_ECORRUPT; /* a record outside the shape */
            blk = blk * v->nblk[d] + cc[d];
            off[d] = cc[d] * v->block[d];
        }
        size_t r0 = hfs_memvfd_raw_begin(b->cap);
        herr_t w = H5Dwrite_chunk(dset, H5P_DEFAULT, 0, off, (size_t)block_bytes, b->zero);
        size_t r1 = hfs_memvfd_raw_end(b->cap);
        if (w < 0) return H5L_EHDF5;
        if (r1 - r0 != 1 || hfs_memvfd_raw_get(b->cap, r0, &a) || a.size != block_bytes) return H5L_ECORRUPT;
        if ((rc = add_region(b, a.addr, a.size, vi, blk))) return rc;
        /* guard the mapping on the first and the last chunk written (each
         * call costs the chunks allocated so far in 1.10.8) */
        if (c == 0 || c == b->ncoords - 1) {
            hsize_t size = 0;
            haddr_t addr = HADDR_UNDEF;
            unsigned mask = 0;
            if (H5Dget_chunk_info_by_coord(dset, off, &mask, &addr, &size) < 0) return H5L_EHDF5;
            if (addr != a.addr || size != block_bytes) return H5L_ECORRUPT;
        }
    }
    return H5L_OK;
}

static int cmp_region(const void *x, const void *y)
{
    const hfs_region_t *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

int hfs_skel_build(h5l_reader_t *r, uint64_t tick, hfs_skel_t **out, h5l_err_t *err)
{
    *out = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hfs_skel_t *k = calloc(1, sizeof *k);
    if (!k) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    atomic_init(&k->refs, 1);
    int rc = H5L_OK;
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    k->version = hfs_skel_version(r, s, tick);
    k->vars = calloc(s->nobjs + 1, sizeof *k->vars);
    if (!k->vars) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    hfs_hdf5_lock();
#ifdef HFS_TEST_HOOKS
    if (!rc) rc = test_hook(r, err);
#endif
    hid_t fapl = rc ? -1 : hfs_memvfd_fapl();
    hid_t fcpl = fapl < 0 ? -1 : h5l_canon_fcpl();
    hid_t file = fcpl < 0 ? -1 : H5Fcreate("skeleton", H5F_ACC_TRUNC, fcpl, fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    hfs_memvfd_t *cap = file < 0 ? NULL : hfs_memvfd_get(file);
    if (!rc && !cap) rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot create an in-memory HDF5 file", h5l_reader_path(r));
    if (!rc) {
        /* windowed capture: only raw allocations inside a dataset's
         * H5Dcreate count as its regions (global heaps and large attributes
         * are raw-typed too) */
        hfs_memvfd_use_windows(cap);
        build_t b = {k, r, s, tick, cap, 0, 0, err, NULL, 0, 0, 0, NULL, 0};
        rc = h5l_canon_build(file, s, tick, H5L_ALLOC_EARLY, on_var, &b, err);
        for (size_t i = 0; !rc && i < k->nvars; i++) {
            if (!k->vars[i].sparse) continue;
            const char *path = s->objs[k->vars[i].objid].path;
            hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
            rc = ds < 0 ? H5L_EHDF5 : write_chunks(&b, (uint32_t)i, ds);
            if (ds >= 0) H5Dclose(ds);
            if (rc) h5l_err_set(err, rc, "%s: allocating the chunks of '%s' in the skeleton", h5l_reader_path(r), path);
        }
        free(b.coords);
        free(b.zero);
        if (rc)
            h5l_err_set(err, rc, "%s: building the canonical skeleton of tick %llu: %s", h5l_reader_path(r),
                        (unsigned long long)tick, err ? err->msg : h5l_strerror(rc));
    }
    if (file >= 0 && H5Fclose(file) < 0 && !rc)
        rc = h5l_err_set(err, H5L_EHDF5, "%s: closing the skeleton failed", h5l_reader_path(r));
    if (cap) {
        k->img = hfs_memvfd_take(cap);
        if (!k->img && !rc) rc = h5l_err_set(err, H5L_EHDF5, "%s: skeleton image not available", h5l_reader_path(r));
    }
    if (fapl >= 0) H5Pclose(fapl);
    hfs_hdf5_unlock();
    h5l_reader_unlock(r);
    if (!rc) {
        if (k->nregions) qsort(k->regions, k->nregions, sizeof *k->regions, cmp_region);
        k->eof = k->img->eof;
        for (size_t i = 0; i < k->nregions; i++) {
            const hfs_region_t *g = &k->regions[i];
            if ((i && g->addr < k->regions[i - 1].addr + k->regions[i - 1].len) || g->addr + g->len > k->eof) {
                rc = h5l_err_set(err, H5L_ECORRUPT, "%s: raw regions of the skeleton overlap", h5l_reader_path(r));
                break;
            }
        }
    }
    if (rc) {
        hfs_skel_unref(k);
        return rc;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    k->build_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
    *out = k;
    return H5L_OK;
}
