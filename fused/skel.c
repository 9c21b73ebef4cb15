/* skel.c — canonical skeletons (see skel.h).
 *
 * The file is built by libcore's canon module on the capture driver with
 * early allocation and fill time never, so libhdf5 allocates every raw
 * region inside H5Dcreate and writes none. The driver's raw allocation
 * records that appear inside the capture window around one variable's
 * H5Dcreate are that variable's regions (canon calls us just before and just
 * after it): one for a contiguous dataset, one per chunk in row-major chunk
 * order for a chunked one (DESIGN.md point 1). Both facts are checked on
 * every build: the contiguous address against H5Dget_offset, and the first
 * and last chunk against H5Dget_chunk_info_by_coord (two calls, not one per
 * chunk, which would be quadratic in 1.10.8). */
#include "skel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <hdf5.h>

#include "canon.h"

static pthread_mutex_t hdf5_mu = PTHREAD_MUTEX_INITIALIZER;
void hfs_hdf5_lock(void) { pthread_mutex_lock(&hdf5_mu); }
void hfs_hdf5_unlock(void) { pthread_mutex_unlock(&hdf5_mu); }

uint64_t hfs_skel_version(const h5l_schema_t *s, uint64_t tick)
{
    uint64_t v = 0;
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
        if (k->regions[mid].addr + k->regions[mid].len <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

typedef struct build {
    hfs_skel_t *k;
    const h5l_schema_t *s;
    uint64_t tick;
    hfs_memvfd_t *cap;
    size_t raw_seen;
    size_t cap_regions;
    h5l_err_t *err;
} build_t;

static int add_region(build_t *b, uint64_t addr, uint64_t len, uint32_t var, uint64_t blk)
{
    hfs_skel_t *k = b->k;
    if (k->nregions == b->cap_regions) {
        size_t cap = b->cap_regions ? b->cap_regions * 2 : 256;
        hfs_region_t *r = realloc(k->regions, cap * sizeof *r);
        if (!r) return H5L_ENOMEM;
        k->regions = r;
        b->cap_regions = cap;
    }
    k->regions[k->nregions++] = (hfs_region_t){addr, len, var, blk};
    return H5L_OK;
}

/* Called by canon right after each variable's H5Dcreate. */
static int on_var(void *ctx, uint32_t objid, hid_t dset)
{
    build_t *b = ctx;
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
    k->version = hfs_skel_version(s, tick);
    k->vars = calloc(s->nobjs + 1, sizeof *k->vars);
    if (!k->vars) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    hfs_hdf5_lock();
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
        build_t b = {k, s, tick, cap, 0, 0, err};
        rc = h5l_canon_build(file, s, tick, H5L_ALLOC_EARLY, on_var, &b, err);
        if (rc) h5l_err_set(err, rc, "%s: building the canonical skeleton of tick %llu: %s", h5l_reader_path(r),
                            (unsigned long long)tick, err ? err->msg : h5l_strerror(rc));
    }
    if (file >= 0 && H5Fclose(file) < 0 && !rc) rc = h5l_err_set(err, H5L_EHDF5, "%s: closing the skeleton failed", h5l_reader_path(r));
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
