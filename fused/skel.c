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
 * quadratic in 1.10.8). In a full build, a sparse variable with two chunks
 * or more gets a chunk index of our own instead (synth_coords, btree.h):
 * libhdf5 writes only its first chunk, and the index's nodes are made
 * from the chunk list when read — a million one-row ticks cost 2 s and
 * ~90 bytes a chunk the other way. A build not kept live goes further
 * (own_root): every chunked variable is sparse, and after the first one
 * with data, whose root guards the encoder, libhdf5 writes no index at
 * all; our tree's root is ours too and the layout message is pointed at
 * it when read (h5l_bt_point_layout). Live skeletons keep libhdf5's
 * indexes of early-allocated chunks, which their patches extend. */
#include "skel.h"

#include <pthread.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <hdf5.h>

#include "h5log/canon.h"
#include "h5log/codec.h"
#include "h5log/grow.h"
#include "h5log/query.h"

static atomic_int g_cancel;
void hfs_skel_cancel(int on) { atomic_store(&g_cancel, on); }

#ifdef HFS_TEST_HOOKS
#include <errno.h>
#include <stdio.h>
/* Test builds only (build/tests/h5logfs_hooks, tests/e2e/test_scale.py):
 * a build (or patch) of a file whose path contains $H5LOGFS_TEST_SLOW_BUILD sleeps
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

/* $H5LOGFS_TEST_BAD_GUARD "root", "layout" or "own": the guard of the
 * daemon's chunk indexes (check_roots) or of its own roots
 * (h5l_bt_point_layout) fails as it would with a libhdf5 that writes
 * otherwise, or an own root finds no room (own_root), so the build starts
 * again with libhdf5's indexes (tests/e2e/test_differential.py). */
static int guard_hook(const char *which)
{
    const char *g = getenv("H5LOGFS_TEST_BAD_GUARD");
    return g && strcmp(g, which) == 0;
}

/* A patch to tick $H5LOGFS_TEST_PATCH_FAIL fails its chunk-order guard
 * after extending the first variable that grew (the live file is then
 * half patched), as a libhdf5 that allocated elsewhere would make it
 * (tests/fused/test_skelpatch.c). */
static int patch_fail_hook(uint64_t tick)
{
    const char *t = getenv("H5LOGFS_TEST_PATCH_FAIL");
    return t && *t && strtoull(t, NULL, 10) == tick;
}
#endif

static pthread_mutex_t hdf5_mu = PTHREAD_MUTEX_INITIALIZER;
void hfs_hdf5_lock(void) { pthread_mutex_lock(&hdf5_mu); }
void hfs_hdf5_unlock(void) { pthread_mutex_unlock(&hdf5_mu); }

/* The hole before the first chunk of a skeleton (hfs_memvfd_raw_gap): the
 * readahead window (1 MiB, main.c) when the file is 64 MiB or more. A
 * reader's first look at the metadata (h5py, netCDF, xarray opening the
 * file) then never reaches the data: the first chunk of a z-plane variable
 * of x-slabs is assembled with its siblings in a pass over the whole log
 * (lfile.c), 0.2 s for 64 MiB and 0.5-1.4 s for 512 MiB, which a header
 * look paid in full. Smaller files keep no hole (their size stays near
 * netCDF's for the same content: test_clients); a hole costs nothing but
 * apparent size (under 2% here). The source file's size, not the shapes:
 * a sparse variable's shape says nothing of its data. */
static uint64_t raw_gap(h5l_reader_t *r)
{
    struct stat st;
    if (stat(h5l_reader_path(r), &st) != 0 || st.st_size < ((off_t)64 << 20)) return 0;
    return (uint64_t)1 << 20;
}

uint64_t hfs_skel_version(h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick)
{
    uint64_t v = h5l_reader_chunks_version(r, tick); /* a chunk got data: allocate it */
    for (size_t i = 0; i < s->nobjs; i++)
        if (s->objs[i].kind && s->objs[i].tick <= tick && s->objs[i].tick > v) v = s->objs[i].tick;
    for (size_t i = 0; i < s->ndims; i++) { /* the newest length change <= tick */
        uint64_t t = h5l_schema_dimlen_tick(s, (uint32_t)i, tick);
        if (t > v) v = t;
    }
    size_t na = h5l_schema_attrs_after(s, tick); /* the newest attribute set <= tick is na - 1 */
    if (na && s->attrs[na - 1].tick > v) v = s->attrs[na - 1].tick;
    /* inside a segment the reader opened from its last attribute values
     * (H5L_READER_LAZY_ATTRS): which of its ticks set attributes is not
     * known without reading it, so the tick is its own version (no skeleton
     * shared with another tick of it; only old ticks, never the newest) */
    if (!h5l_reader_attrs_exact(r, tick) && tick > v) v = tick;
    return v;
}

hfs_skel_t *hfs_skel_ref(hfs_skel_t *k)
{
    atomic_fetch_add(&k->refs, 1);
    return k;
}

/* skeletons built and not yet freed, and their images' bytes (statistics) */
static _Atomic uint64_t g_held, g_held_bytes;

void hfs_skel_held(uint64_t *n, uint64_t *bytes)
{
    *n = atomic_load(&g_held);
    *bytes = atomic_load(&g_held_bytes);
}

static void held(hfs_skel_t *k)
{
    k->counted = 1;
    atomic_fetch_add(&g_held, 1);
    atomic_fetch_add(&g_held_bytes, k->img ? k->img->meta_bytes : 0);
}

void hfs_skel_unref(hfs_skel_t *k)
{
    if (!k || atomic_fetch_sub(&k->refs, 1) != 1) return;
    if (k->counted) {
        atomic_fetch_sub(&g_held, 1);
        atomic_fetch_sub(&g_held_bytes, k->img ? k->img->meta_bytes : 0);
    }
    hfs_memvfd_image_free(k->img);
    free(k->ovl);
    for (size_t i = 0; i < k->nbts; i++) h5l_bt_free(&k->bts[i]);
    free(k->bts);
    free(k->vars);
    free(k->dimv);
    free(k->regions);
    free(k->fallback);
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

static _Atomic uint64_t g_synth_min = 2;
void hfs_skel_set_synth_min(uint64_t n) { atomic_store(&g_synth_min, n); }

hfs_region_t hfs_skel_run_block(const hfs_skel_t *k, const hfs_region_t *g, uint64_t off)
{
    const h5l_bt_t *bt = &k->bts[g->bt - 1];
    uint64_t i = (off - g->addr) / bt->chunk_bytes; /* ordinal g->blk + i */
    return (hfs_region_t){g->addr + i * bt->chunk_bytes, bt->chunk_bytes, g->var, 0, h5l_bt_blk(bt, g->blk + i)};
}

int hfs_skel_meta_read(const hfs_skel_t *k, uint64_t off, size_t len, void *buf)
{
    hfs_memvfd_image_read(k->img, off, len, buf);
    size_t lo = 0, hi = k->novl;
    while (lo < hi) { /* the first range ending past off */
        size_t mid = (lo + hi) / 2;
        if (k->ovl[mid].hi <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < k->novl && k->ovl[i].lo < off + len; i++) {
        const hfs_ovl_t *o = &k->ovl[i];
        if (o->var) { /* a variable's current dimensions, little-endian 8 bytes each */
            const hfs_svar_t *v = &k->vars[o->var - 1];
            for (uint64_t a = o->lo > off ? o->lo : off; a < o->hi && a < off + len; a++) {
                uint64_t d = (a - o->lo) / 8, byte = (a - o->lo) % 8;
                ((uint8_t *)buf)[a - off] = (uint8_t)(v->shape[d] >> (8 * byte));
            }
            continue;
        }
        int rc = h5l_bt_read(&k->bts[o->bt], off, len, buf);
        if (rc) return rc;
    }
    return H5L_OK;
}

/* a[0..n) sorted by lo, stably: a least-significant-digit radix sort over
 * the bytes in which the keys differ (three or four for the addresses of
 * an image). A patch sorts four overlays a variable at every tick, 40,000
 * for 10,000 variables; qsort's comparisons through a callback were 6 % of
 * the daemon's time. One path for every size, so every test sorts with it. */
static int sort_ovl(hfs_ovl_t *a, size_t n)
{
    if (n < 2) return H5L_OK;
    uint64_t diff = 0;
    for (size_t i = 1; i < n; i++) diff |= a[i].lo ^ a[0].lo;
    hfs_ovl_t *tmp = malloc(n * sizeof *tmp), *src = a, *dst = tmp;
    if (!tmp) return H5L_ENOMEM;
    for (unsigned sh = 0; sh < 64; sh += 8) {
        if (!((diff >> sh) & 0xff)) continue; /* every key has the same byte here */
        size_t at[256] = {0}, sum = 0;
        for (size_t i = 0; i < n; i++) at[(src[i].lo >> sh) & 0xff]++;
        for (int d = 0; d < 256; d++) {
            size_t c = at[d];
            at[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[at[(src[i].lo >> sh) & 0xff]++] = src[i];
        hfs_ovl_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
    free(tmp);
    return H5L_OK;
}

/* k->ovl from k->bts (once they are final: a build's or a patch's). */
static int index_overlays(hfs_skel_t *k)
{
    free(k->ovl);
    k->novl = 0;
    size_t nds = 0;
    for (size_t i = 0; i < k->nvars; i++) nds += k->vars[i].ds_at != 0;
    k->ovl = malloc((4 * k->nbts + nds + 1) * sizeof *k->ovl);
    if (!k->ovl) return H5L_ENOMEM;
    for (size_t i = 0; i < k->nvars; i++)
        if (k->vars[i].ds_at)
            k->ovl[k->novl++] = (hfs_ovl_t){k->vars[i].ds_at, k->vars[i].ds_at + 8 * (uint64_t)k->vars[i].ndims, 0,
                                            (uint32_t)i + 1};
    for (size_t i = 0; i < k->nbts; i++) {
        const h5l_bt_t *bt = &k->bts[i];
        uint64_t r[4][2] = {{bt->root, bt->root + bt->node_size},
                            {bt->nodes, bt->nodes + bt->nodes_len},
                            {bt->lay_at, bt->lay_at ? bt->lay_at + 8 : 0},
                            {bt->ck_at, bt->lay_at ? bt->ck_at + 4 : 0}};
        for (int j = 0; j < 4; j++)
            if (r[j][0] < r[j][1]) k->ovl[k->novl++] = (hfs_ovl_t){r[j][0], r[j][1], (uint32_t)i, 0};
    }
    int rc = sort_ovl(k->ovl, k->novl);
    if (rc) return rc;
    for (size_t i = 1; i < k->novl; i++)
        if (k->ovl[i].lo < k->ovl[i - 1].hi) return H5L_ECORRUPT;
    return H5L_OK;
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
    uint64_t *blks;   /* chunks of the variable being built that hold data: row-major indices */
    size_t nblks, capblks;
    uint64_t *coords; /* the same chunks' coordinates (coords_of_blks) */
    size_t ncoords, capcoords; /* coordinates held; capacity in bytes (one list serves every rank) */
    const uint64_t *nblk; /* its chunks per dimension */
    uint32_t ndims;
    void *zero; /* chunk-sized zeros for H5Dwrite_chunk (never stored) */
    size_t zero_len;
    size_t cap_bts;
    uint64_t *oh;   /* own roots (H5L_ALLOC_CHUNKS builds): per k->vars index, the object header of a sparse one */
    uint32_t two_k; /* children per chunk B-tree node: from the first root libhdf5 made (synth_coords) */
    hid_t *keep_dsets; /* a build kept live: per k->vars index, its chunked datasets kept open (else NULL) */
    size_t *bt_last;   /* a patch: per own index (1 + index in k->bts), its run region at the highest
                        * address, SIZE_MAX if none (own_append: a search of every region per variable
                        * was 10^8 steps a tick for 10,000 variables) */
} build_t;

/* Reserve size bytes of the image for the daemon's own index and chunks
 * (hfs_memvfd_reserve): H5L_ECORRUPT when the address space has no room
 * (the caller's guard falls back to libhdf5's indexes), H5L_ENOMEM when
 * memory ran out (the build fails as out of memory, not as a guard). */
static int reserve(build_t *b, uint64_t size, uint64_t *addr)
{
    if (!hfs_memvfd_reserve(b->cap, size, addr)) return H5L_OK;
    return hfs_memvfd_failed(b->cap) ? H5L_ENOMEM : H5L_ECORRUPT;
}

static int add_region(build_t *b, uint64_t addr, uint64_t len, uint32_t var, uint64_t blk)
{
    hfs_skel_t *k = b->k;
    if (h5l_grow_raw((void **)&k->regions, &b->cap_regions, k->nregions + 1, sizeof *k->regions)) return H5L_ENOMEM;
    k->regions[k->nregions++] = (hfs_region_t){.addr = addr, .len = len, .var = var, .blk = blk};
    return H5L_OK;
}

/* h5l_reader_chunks callback: collect one chunk, as its row-major index
 * in the grid of the variable being built (b->nblk). */
static int add_coord(void *ctx, const uint64_t *coord)
{
    build_t *b = ctx;
    uint64_t blk = 0;
    for (uint32_t d = 0; d < b->ndims; d++) {
        if (coord[d] >= b->nblk[d]) return H5L_ECORRUPT; /* a record outside the shape */
        blk = blk * b->nblk[d] + coord[d];
    }
    if (h5l_grow_raw((void **)&b->blks, &b->capblks, b->nblks + 1, sizeof *b->blks)) return H5L_ENOMEM;
    b->blks[b->nblks++] = blk;
    return H5L_OK;
}

/* add_coord for n chunks along the first dimension (h5l_reader_chunk_runs):
 * their row-major numbers step by the chunks of a row, written in a tight
 * loop instead of a call and a coordinate conversion each. */
static int add_run(void *ctx, const uint64_t *coord, uint64_t n)
{
    build_t *b = ctx;
    if (n == 1 || !b->ndims) return add_coord(ctx, coord);
    uint64_t blk = 0, stride = 1;
    for (uint32_t d = 0; d < b->ndims; d++) {
        if (coord[d] >= b->nblk[d]) return H5L_ECORRUPT;
        blk = blk * b->nblk[d] + coord[d];
        if (d) stride *= b->nblk[d];
    }
    if (n - 1 >= b->nblk[0] - coord[0]) return H5L_ECORRUPT; /* the run ends outside the shape */
    size_t cap0 = b->capblks;
    if (n > SIZE_MAX - b->nblks || h5l_grow_raw((void **)&b->blks, &b->capblks, b->nblks + (size_t)n, sizeof *b->blks))
        return H5L_ENOMEM;
    if (b->capblks != cap0) h5l_prefault(b->blks + cap0, (b->capblks - cap0) * sizeof *b->blks);
    uint64_t *o = b->blks + b->nblks;
    for (uint64_t i = 0; i < n; i++) o[i] = blk + i * stride;
    b->nblks += (size_t)n;
    return H5L_OK;
}

/* Sort a[0..n) (LSD radix, a byte a pass, only the bytes the largest
 * value has: a million chunks of a time axis take three passes, against
 * a fifth of a first open in qsort), tmp n elements of scratch. */
static void radix_u64(uint64_t *a, uint64_t *tmp, size_t n)
{
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] > max) max = a[i];
    uint64_t *src = a, *dst = tmp;
    for (int shift = 0; shift < 64 && (max >> shift); shift += 8) {
        size_t count[257] = {0};
        for (size_t i = 0; i < n; i++) count[((src[i] >> shift) & 0xff) + 1]++;
        for (int k = 0; k < 256; k++) count[k + 1] += count[k];
        for (size_t i = 0; i < n; i++) dst[count[(src[i] >> shift) & 0xff]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, n * sizeof *a);
}

/* Sort a[0..n): its sorted prefix is left as it is and only the rest is
 * sorted, then merged in from the end. The chunk map lists a long log's
 * chunks in order and the ticks after its last checkpoint add a few in
 * hash order: three radix passes over a million chunks for a thousand
 * out of place were a seventh of a first open. 0 or H5L_ENOMEM. */
static int sort_u64(uint64_t *a, size_t n)
{
    size_t p = 1;
    while (p < n && a[p - 1] <= a[p]) p++;
    if (p >= n) return H5L_OK;
    size_t m = n - p;
    uint64_t *t = malloc(2 * m * sizeof *t);
    if (!t) return H5L_ENOMEM;
    memcpy(t, a + p, m * sizeof *t);
    radix_u64(t, t + m, m);
    size_t i = p, j = m, o = n; /* a[0..i) and t[0..j) into a[..o) from the largest */
    while (j) a[--o] = i && a[i - 1] > t[j - 1] ? a[--i] : t[--j];
    free(t);
    return H5L_OK;
}

/* b->coords from b->blks (the chunk coordinates, rank b->ndims). */
static int coords_of_blks(build_t *b)
{
    size_t w = b->ndims * sizeof *b->coords;
    if (h5l_grow((void **)&b->coords, &b->capcoords, b->nblks * w, 1)) return H5L_ENOMEM;
    for (size_t i = 0; i < b->nblks; i++) {
        uint64_t x = b->blks[i];
        for (int d = (int)b->ndims - 1; d >= 0; d--) {
            b->coords[i * b->ndims + (uint32_t)d] = x % b->nblk[d];
            x /= b->nblk[d];
        }
    }
    b->ncoords = b->nblks;
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
    v->shape = k->dimv + k->ndimv; /* (build_full sized dimv for every variable) */
    v->block = v->shape + o->ndims;
    v->nblk = v->block + o->ndims;
    k->ndimv += 3 * (size_t)o->ndims;
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
    /* kept open for the patches: opening 10,000 datasets by name again at
     * the first patch took 0.6 s (libhdf5 walking the group's name index,
     * evicting what it had just written) */
    if (b->keep_dsets && v->chunked && H5Iinc_ref(dset) >= 0) b->keep_dsets[vi] = dset;
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
    if (nraw == 0) { /* sparse: incremental allocation, chunks allocated after the metadata */
        v->sparse = 1;
        if (b->oh) { /* where an own root's layout message will be (own_root) */
            H5O_info_t info;
            if (H5Oget_info2(dset, &info, H5O_INFO_BASIC) < 0) return H5L_EHDF5;
            b->oh[vi] = info.addr;
        }
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

/* The chunks of variable vi that hold data at b->tick into b->blks, sorted
 * (so the file does not depend on the index's hash order), each once (a
 * wide record's chunks may come more than once, index.h); with coords,
 * their coordinates into b->coords too. */
static int chunks_with_data(build_t *b, uint32_t vi, int coords)
{
    hfs_svar_t *v = &b->k->vars[vi];
    b->nblks = b->ncoords = 0;
    b->ndims = v->ndims;
    b->nblk = v->nblk;
    int rc = h5l_reader_chunk_runs(b->r, b->tick, v->objid, add_run, b);
    if (rc || !b->nblks) return rc;
    if (sort_u64(b->blks, b->nblks)) return H5L_ENOMEM;
    size_t k = 0;
    for (size_t c = 0; c < b->nblks; c++)
        if (!k || b->blks[k - 1] != b->blks[c]) b->blks[k++] = b->blks[c];
    b->nblks = k;
    return coords ? coords_of_blks(b) : H5L_OK;
}

/* b->zero: at least len bytes of zeros. */
static int zeros(build_t *b, uint64_t len)
{
    if (b->zero_len >= len) return H5L_OK;
    free(b->zero);
    b->zero = calloc(1, (size_t)len);
    b->zero_len = b->zero ? (size_t)len : 0;
    return b->zero ? H5L_OK : H5L_ENOMEM;
}

/* Write one chunk of zeros (b->zero, block_bytes) at element offsets off
 * with H5Dwrite_chunk in a capture window of its own: *a is the one raw
 * allocation the window must hold, the chunk's place (the driver drops the
 * bytes). With check, libhdf5 is asked where it put the chunk, which must
 * be there (each call costs the chunks allocated so far in 1.10.8: the
 * callers check a few). */
static int write_chunk(build_t *b, hid_t dset, const hsize_t *off, uint64_t block_bytes, int check,
                       hfs_memvfd_alloc_t *a)
{
    size_t r0 = hfs_memvfd_raw_begin(b->cap);
    herr_t w = H5Dwrite_chunk(dset, H5P_DEFAULT, 0, off, (size_t)block_bytes, b->zero);
    size_t r1 = hfs_memvfd_raw_end(b->cap);
    if (w < 0) return H5L_EHDF5;
    if (r1 - r0 != 1 || hfs_memvfd_raw_get(b->cap, r0, a) || a->size != block_bytes) return H5L_ECORRUPT;
    if (check) {
        hsize_t size = 0;
        haddr_t addr = HADDR_UNDEF;
        unsigned mask = 0;
        if (H5Dget_chunk_info_by_coord(dset, off, &mask, &addr, &size) < 0) return H5L_EHDF5;
        if (addr != a->addr || size != block_bytes) return H5L_ECORRUPT;
    }
    return H5L_OK;
}

/* Allocate chunks b->coords[0 .. ncoords) (sorted, distinct) of chunked
 * variable vi, each in its own capture window. */
static int write_coords(build_t *b, uint32_t vi, hid_t dset)
{
    hfs_svar_t *v = &b->k->vars[vi];
    uint64_t block_bytes = v->esize;
    for (uint32_t d = 0; d < v->ndims; d++) block_bytes *= v->block[d];
    hfs_memvfd_alloc_t a;
    int rc = zeros(b, block_bytes);
    if (rc) return rc;
    for (size_t c = 0; c < b->ncoords; c++) {
        const uint64_t *cc = b->coords + c * v->ndims;
        hsize_t off[H5L_MAX_DIMS];
        uint64_t blk = 0;
        for (uint32_t d = 0; d < v->ndims; d++) {
            if (cc[d] >= v->nblk[d]) return H5L_ECORRUPT; /* a record outside the shape */
            blk = blk * v->nblk[d] + cc[d];
            off[d] = cc[d] * v->block[d];
        }
        /* the mapping guarded on the first and the last chunk written */
        if ((rc = write_chunk(b, dset, off, block_bytes, c == 0 || c == b->ncoords - 1, &a))) return rc;
        if ((rc = add_region(b, a.addr, a.size, vi, blk))) return rc;
    }
    return H5L_OK;
}

/* Index chunks b->blks[0 .. nblks) (sorted, distinct, at least 2) of
 * sparse variable vi with a chunk B-tree of our own (btree.h): libhdf5
 * writes the first chunk, which makes the root node and points the
 * layout message at it; the other nodes and chunks go to space reserved
 * at the EOA, a run region holds chunks 1 .. n-1, and the skeleton's
 * reads give the nodes (the root's too: ours is written over libhdf5's
 * when read). O(n) and 16 bytes a run of consecutive chunks, against
 * ~2 us and ~90 bytes a chunk for H5Dwrite_chunk and a region each. */
static int synth_coords(build_t *b, uint32_t vi, hid_t dset)
{
    hfs_skel_t *k = b->k;
    hfs_svar_t *v = &k->vars[vi];
    uint64_t block_bytes = v->esize, n = b->nblks, *blks = b->blks;
    for (uint32_t d = 0; d < v->ndims; d++) block_bytes *= v->block[d];
    int rc = zeros(b, block_bytes);
    if (rc) return rc;
    hsize_t off[H5L_MAX_DIMS];
    uint64_t first = blks[0]; /* the first chunk's offset */
    for (int d = (int)v->ndims - 1; d >= 0; d--) {
        off[d] = first % v->nblk[d] * v->block[d];
        first /= v->nblk[d];
    }
    hfs_memvfd_alloc_t chunk0, a, root = {0, 0, 0, 0};
    size_t a0 = hfs_memvfd_alloc_count(b->cap);
    rc = write_chunk(b, dset, off, block_bytes, 1, &chunk0);
    size_t a1 = hfs_memvfd_alloc_count(b->cap);
    for (size_t i = a0; !rc && i < a1; i++) { /* the root node: the window's one B-tree allocation */
        if (hfs_memvfd_alloc_get(b->cap, i, &a) || a.type != H5FD_MEM_BTREE) continue;
        if (root.size) rc = H5L_ECORRUPT;
        root = a;
    }
    uint64_t key = 8 + 8 * ((uint64_t)v->ndims + 1);
    if (!rc && (root.size <= 24 + key || (root.size - 24 - key) % (8 + key))) rc = H5L_ECORRUPT;
    h5l_bt_t bt;
    memset(&bt, 0, sizeof bt);
    if (!rc) /* the tree's K, from the root's size: 24 + 2K (8 + key) + key */
        rc = h5l_bt_init(&bt, v->ndims, v->nblk, v->block, v->esize, (uint32_t)((root.size - 24 - key) / (8 + key)),
                         blks, n);
    if (rc) return rc;
    b->two_k = bt.two_k;
    uint64_t base = 0;
    if (bt.node_size != root.size || n - 1 > (UINT64_MAX / 2 - bt.nodes_len) / block_bytes)
        rc = H5L_ECORRUPT;
    else if (n > 1) /* (one chunk: the root is the tree, nothing to reserve) */
        rc = reserve(b, bt.nodes_len + (n - 1) * block_bytes, &base);
    if (!rc && h5l_grow_raw((void **)&k->bts, &b->cap_bts, k->nbts + 1, sizeof *k->bts)) rc = H5L_ENOMEM;
    if (rc) {
        h5l_bt_free(&bt);
        return rc;
    }
    if (h5l_bt_place(&bt, root.addr, base, chunk0.addr, base + bt.nodes_len)) {
        h5l_bt_free(&bt);
        return H5L_ENOMEM;
    }
    k->bts[k->nbts++] = bt;
    v->own = (uint32_t)k->nbts;
    if ((rc = add_region(b, chunk0.addr, block_bytes, vi, h5l_bt_blk(&bt, 0)))) return rc;
    if (n == 1) return H5L_OK;
    if ((rc = add_region(b, base + bt.nodes_len, (n - 1) * block_bytes, vi, 1))) return rc;
    k->regions[k->nregions - 1].bt = (uint32_t)k->nbts;
    return H5L_OK;
}

/* Index chunks b->blks[0 .. nblks) (sorted, distinct, at least 1) of
 * sparse variable vi with a tree of our own whose root is ours too: libhdf5
 * made no index for it (H5L_ALLOC_CHUNKS: no chunk written), so its layout
 * message says "none" until h5l_bt_point_layout, once the image is final,
 * makes reads of it point at our root. Root, nodes and chunks go to one
 * reserved stretch, the chunks as one run region. No libhdf5 call: the
 * per-dataset B-tree libhdf5 would create (a 2.6 KB node, the metadata
 * cache evicting for it) was a third of a 20,000-variable build. Needs
 * b->two_k from a root libhdf5 made in this build (synth_coords), which
 * check_roots compares with ours. */
static int own_root(build_t *b, uint32_t vi)
{
    hfs_skel_t *k = b->k;
    hfs_svar_t *v = &k->vars[vi];
    uint64_t cb = v->esize, n = b->nblks;
    for (uint32_t d = 0; d < v->ndims; d++) cb *= v->block[d];
    h5l_bt_t bt;
    memset(&bt, 0, sizeof bt);
    int rc = h5l_bt_init(&bt, v->ndims, v->nblk, v->block, v->esize, b->two_k, b->blks, n);
    if (rc) return rc;
    uint64_t base = 0, nodes = bt.node_size + bt.nodes_len;
    if (!b->oh[vi] || n > (UINT64_MAX / 2 - nodes) / cb)
        rc = H5L_ECORRUPT;
    else
        rc = reserve(b, nodes + n * cb, &base);
    if (!rc && h5l_grow_raw((void **)&k->bts, &b->cap_bts, k->nbts + 1, sizeof *k->bts)) rc = H5L_ENOMEM;
    if (!rc && h5l_bt_place(&bt, base, base + bt.node_size, base + nodes, base + nodes + cb)) rc = H5L_ENOMEM;
    if (rc) {
        h5l_bt_free(&bt);
        return rc;
    }
    bt.oh = b->oh[vi];
    k->bts[k->nbts++] = bt;
    v->own = (uint32_t)k->nbts;
    if ((rc = add_region(b, base + nodes, n * cb, vi, 0))) return rc;
    k->regions[k->nregions - 1].bt = (uint32_t)k->nbts;
    return H5L_OK;
}

/* Only its first dimension can grow: the row-major numbers of its chunks
 * never change, which a live skeleton's own index needs (own_append). */
static int grows_first_only(const h5l_schema_t *s, uint32_t objid)
{
    const h5l_obj_t *o = &s->objs[objid];
    for (uint32_t d = 1; d < o->ndims; d++)
        if (s->dims[o->dimids[d]].unlimited) return 0;
    return 1;
}

/* A live patch of own-index variable vi (synth_coords): the chunks that got
 * data since (b->blks, sorted, all of them) join its index when they all
 * come after its last chunk, as a time axis's new rows do; they go to the
 * room reserved after its chunks, or to new room for an eighth of the
 * index's chunks more (so a file patched every tick makes O(log ticks)
 * placements and run regions, not one a tick, and its size runs at most an
 * eighth ahead of its chunks), and the node area moves to twice its need
 * when it outgrows its room (the old one is left unused: at most what the
 * nodes take now). H5L_ESTATE when a chunk came before the last one (the
 * caller then builds in full). */
static _Atomic uint64_t g_own_appends, g_own_prefixes;
uint64_t hfs_skel_own_appends(void) { return atomic_load(&g_own_appends); }
uint64_t hfs_skel_own_prefixes(void) { return atomic_load(&g_own_prefixes); }

static int own_append(build_t *b, uint32_t vi, const hfs_svar_t *v, const uint64_t *nb, uint64_t add)
{
    hfs_skel_t *k = b->k;
    h5l_bt_t *bt = &k->bts[v->own - 1];
    uint64_t n0 = bt->n, cb = bt->chunk_bytes;
    if (!add) return H5L_OK;
    uint64_t end = h5l_bt_chunks_end(bt), at = end;
    size_t last = k->nregions; /* the run region ending at end */
    if (b->bt_last) {
        size_t i = b->bt_last[v->own];
        if (i < k->nregions && k->regions[i].addr + k->regions[i].len == end) last = i;
    } else {
        for (size_t i = k->nregions; i-- > 0;)
            if (k->regions[i].bt == v->own && k->regions[i].addr + k->regions[i].len == end) {
                last = i;
                break;
            }
    }
    if (last == k->nregions || add > (bt->room - end) / cb) { /* new room: an eighth of the chunks ahead */
        uint64_t want = add > n0 / 8 ? add : n0 / 8;
        if (want < 64) want = 64;
        if (want > (UINT64_MAX / 4) / cb) return H5L_ECORRUPT;
        int rc = reserve(b, want * cb, &at);
        if (rc) return rc;
        bt->room = at + want * cb;
        last = k->nregions;
    }
    int rc = h5l_bt_append(bt, nb, add, at);
    if (rc) return rc;
    if (bt->nodes_len > bt->nodes_cap) {
        uint64_t nodes;
        if (bt->nodes_len > UINT64_MAX / 4) return H5L_ECORRUPT;
        if ((rc = reserve(b, 2 * bt->nodes_len, &nodes))) return rc;
        h5l_bt_set_nodes(bt, nodes, 2 * bt->nodes_len);
    }
    atomic_fetch_add(&g_own_appends, 1);
    if (last < k->nregions) {
        k->regions[last].len += add * cb;
        return H5L_OK;
    }
    if ((rc = add_region(b, at, add * cb, vi, n0))) return rc;
    k->regions[k->nregions - 1].bt = v->own;
    if (b->bt_last) b->bt_last[v->own] = k->nregions - 1;
    return H5L_OK;
}

/* The chunks of own-index variable vi that got data since its index's
 * last chunk: b->blks[0 .. *add), sorted. A variable of one chunk a row
 * whose chunks with data are a prefix of its rows, and its index that
 * prefix up to its last chunk (a time series written row after row: the
 * common case), gets the rest of the prefix without a probe. When the reader counts the
 * variable's chunks in O(1) (h5l_reader_chunk_count) and few blocks lie
 * after the index's last chunk, those are probed one by one; else every
 * chunk is enumerated (chunks_with_data: O(chunks so far), 10^4 variables
 * times the ticks so far at every patch, most of a patch after a few
 * hundred ticks). H5L_ESTATE when a chunk got data before the last one
 * (the index cannot grow in place). */
static void blk_coords(uint32_t nd, const uint64_t *nblk, uint64_t blk, uint64_t *c);

static int own_new_chunks(build_t *b, uint32_t vi, const hfs_svar_t *v, uint64_t *add)
{
    const h5l_bt_t *bt = &b->k->bts[v->own - 1];
    uint64_t n0 = bt->n, last = h5l_bt_blk(bt, n0 - 1), total;
    *add = 0;
    int rows = 1; /* one chunk a row: a block's number is its first coordinate */
    for (uint32_t d = 1; d < v->ndims; d++) rows &= v->nblk[d] == 1;
    if (rows && n0 == last + 1 && h5l_reader_chunk_prefix(b->r, b->tick, v->objid, &total) == H5L_OK &&
        total >= n0 && total <= v->nblocks) { /* chunks 0 .. total-1 hold data: the new ones are known */
        if (h5l_grow_raw((void **)&b->blks, &b->capblks, (size_t)(total - n0) + 1, sizeof *b->blks))
            return H5L_ENOMEM;
        for (uint64_t blk = n0; blk < total; blk++) b->blks[blk - n0] = blk;
        b->nblks = (size_t)(total - n0);
        *add = total - n0;
        atomic_fetch_add(&g_own_prefixes, 1);
        return H5L_OK;
    }
    if (h5l_reader_chunk_count(b->r, b->tick, v->objid, &total) == H5L_OK && total >= n0 &&
        v->nblocks - last - 1 <= 64 * (total - n0) + 64) {
        uint64_t want = total - n0;
        b->nblks = 0;
        for (uint64_t blk = last + 1; blk < v->nblocks && b->nblks < want; blk++) {
            uint64_t c[H5L_MAX_DIMS];
            blk_coords(v->ndims, v->nblk, blk, c);
            if (!h5l_reader_has_chunk(b->r, b->tick, v->objid, c)) continue;
            if (h5l_grow_raw((void **)&b->blks, &b->capblks, b->nblks + 1, sizeof *b->blks)) return H5L_ENOMEM;
            b->blks[b->nblks++] = blk;
        }
        if (b->nblks < want) return H5L_ESTATE; /* the others lie before the last chunk */
        *add = want;
        return H5L_OK;
    }
    int rc = chunks_with_data(b, vi, 0);
    if (rc) return rc;
    if (b->nblks < n0 || b->blks[n0 - 1] != last) return H5L_ESTATE;
    *add = b->nblks - n0;
    memmove(b->blks, b->blks + n0, *add * sizeof *b->blks);
    return H5L_OK;
}

/* The guard of synth_coords, once the image is final: the root libhdf5
 * wrote for the first chunk is, byte for byte, the root this module gives
 * a tree of that one chunk (same node size, key layout, right key,
 * addresses). A libhdf5 that wrote chunk B-trees otherwise fails it, and
 * the file is built again with libhdf5's own indexes. */
static int check_roots(const hfs_skel_t *k)
{
    int rc = H5L_OK;
    for (size_t i = 0; !rc && i < k->nbts; i++) {
        const h5l_bt_t *bt = &k->bts[i];
        if (bt->oh) continue; /* an own root: libhdf5 made none */
        uint64_t blk0 = h5l_bt_blk(bt, 0), block[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < bt->ndims; d++) block[d] = bt->dim[d];
        h5l_bt_t one;
        uint8_t *want = malloc(2 * bt->node_size);
        if (!want) return H5L_ENOMEM;
        rc = h5l_bt_init(&one, bt->ndims, bt->nblk, block, (size_t)bt->dim[bt->ndims], bt->two_k, &blk0, 1);
        if (!rc && (rc = h5l_bt_place(&one, bt->root, 0, h5l_bt_chunk_addr(bt, 0), 0))) h5l_bt_free(&one);
        if (!rc) {
            h5l_bt_node(&one, 0, 0, want);
            hfs_memvfd_image_read(k->img, bt->root, (size_t)bt->node_size, want + bt->node_size);
            if (memcmp(want, want + bt->node_size, (size_t)bt->node_size)) rc = H5L_ECORRUPT;
            h5l_bt_free(&one);
        }
        free(want);
    }
    return rc;
}

static void image_read(const void *img, uint64_t off, size_t n, void *buf)
{
    hfs_memvfd_image_read(img, off, n, buf);
}

static int cmp_region(const void *x, const void *y)
{
    const hfs_region_t *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The result rc of a guard of the daemon's chunk indexes (hook: its test
 * hook's name): H5L_ECORRUPT sets *synth_bad (the caller builds again with
 * libhdf5's indexes) and says what differed. */
static int guarded(int rc, const char *hook, int *synth_bad, h5l_err_t *err, h5l_reader_t *r, const char *what)
{
#ifdef HFS_TEST_HOOKS
    if (!rc && guard_hook(hook)) rc = H5L_ECORRUPT;
#else
    (void)hook;
#endif
    if (rc == H5L_ECORRUPT) {
        *synth_bad = 1;
        h5l_err_set(err, rc, "%s: %s", h5l_reader_path(r), what);
    } else if (rc) { /* not the guard's refusal (out of memory): the build fails, saying so */
        h5l_err_set(err, rc, "%s: %s", h5l_reader_path(r), h5l_strerror(rc));
    }
    return rc;
}

/* A reason without the file's name in front (it is prefixed with more
 * context, which names the file already). */
static const char *unprefixed(const char *msg, h5l_reader_t *r)
{
    size_t n = strlen(h5l_reader_path(r));
    return !strncmp(msg, h5l_reader_path(r), n) && msg[n] == ':' && msg[n + 1] == ' ' ? msg + n + 2 : msg;
}

/* The superblock of image img (at address 0: skeletons have no user
 * block) records img's end of address space. libhdf5 writes the EOA it
 * knows when it writes the superblock, and it rewrites the superblock
 * only after allocating through itself: room taken behind its back
 * (hfs_memvfd_reserve, the daemon's own chunk indexes) after its last
 * allocation was left out, and every read there failed ("addr
 * overflow"). Versions 2 and 3 (what the canonical creation-order
 * properties give): EOA at byte 28, lookup3 of bytes 0..43 at 44;
 * versions 0 and 1: EOA at byte 40, no checksum (docs/format.md 6.2).
 * H5L_ECORRUPT when the superblock is not one of those or its stored
 * EOA is past the image's (the caller then builds again). */
static int fix_super_eoa(hfs_memvfd_image_t *img)
{
    static const unsigned char sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    unsigned char *p = hfs_memvfd_image_bytes(img, 0, 48);
    if (!p || memcmp(p, sig, 8)) return H5L_ECORRUPT;
    size_t at;
    if (p[8] >= 2 && p[8] <= 3 && p[9] == 8)
        at = 28;
    else if (p[8] <= 1 && p[13] == 8 && hfs_memvfd_image_bytes(img, 0, 56))
        at = 40;
    else
        return H5L_ECORRUPT;
    uint64_t eoa = h5l_get_le64(p + at);
    if (eoa == img->eoa) return H5L_OK;
    if (eoa > img->eoa) return H5L_ECORRUPT;
    h5l_put_le64(p + at, img->eoa);
    if (at == 28) h5l_put_le32(p + 44, h5l_bt_lookup3(p, 44));
    return H5L_OK;
}

/* Metadata of a full build past which its freed memory is given back
 * (build_full): a few ms of malloc_trim against tens of MB. */
#define BIG_BUILD_META ((uint64_t)8 << 20)

/* The metadata cache of a live skeleton's file (build_full). */
#define LIVE_MDC_BYTES ((size_t)64 << 20)

/* The live state of a skeleton kept open (see skel.h). */
typedef struct sparse_set {
    uint64_t *c; /* sorted chunk coordinates written (ndims each) */
    size_t n, cap;
} sparse_set_t;

struct hfs_skel_live {
    hid_t file;
    hfs_memvfd_t *cap;
    uint64_t tick;     /* the tick the file reflects */
    hfs_skel_t *k;     /* the skeleton published for it (a reference) */
    hid_t *dsets;      /* per k->vars index: the dataset (chunked ones kept open by the full build, others
                        * opened on first use) */
    size_t ndsets;     /* entries of dsets */
    sparse_set_t *sp;  /* per k->vars index: chunks written (sparse variables) */
    uint64_t chunks_v; /* h5l_reader_chunks_version at tick */
    uint64_t patches;  /* patches applied since the full build */
};

/* Close the file of a live state and free it (hfs_hdf5_lock held). */
static void live_free_locked(hfs_skel_live_t *l)
{
    if (!l) return;
    if (l->dsets)
        for (size_t i = 0; i < l->ndsets; i++)
            if (l->dsets[i] > 0) H5Dclose(l->dsets[i]);
    if (l->file >= 0) H5Fclose(l->file);
    hfs_memvfd_put(l->cap);
    if (l->sp)
        for (size_t i = 0; l->k && i < l->k->nvars; i++) free(l->sp[i].c);
    free(l->sp);
    free(l->dsets);
    hfs_skel_unref(l->k);
    free(l);
}

void hfs_skel_live_free(hfs_skel_live_t *l)
{
    if (!l) return;
    hfs_hdf5_lock();
    live_free_locked(l);
    hfs_hdf5_unlock();
}

uint64_t hfs_skel_live_patches(const hfs_skel_live_t *l) { return l ? l->patches : 0; }

/* Sort k's regions by address (new ones are appended; libhdf5 hands new
 * space out at the end of the file, so usually they already are) and check
 * that they are disjoint and inside the file; index what its chunk indexes
 * write over the image (k->ovl). */
static int finish_regions(hfs_skel_t *k, h5l_reader_t *r, h5l_err_t *err)
{
    int sorted = 1;
    for (size_t i = 1; i < k->nregions && sorted; i++) sorted = k->regions[i - 1].addr < k->regions[i].addr;
    if (!sorted) qsort(k->regions, k->nregions, sizeof *k->regions, cmp_region);
    for (size_t i = 0; i < k->nregions; i++) {
        const hfs_region_t *g = &k->regions[i];
        if ((i && g->addr < k->regions[i - 1].addr + k->regions[i - 1].len) || g->addr + g->len > k->eof)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: raw regions of the skeleton overlap", h5l_reader_path(r));
    }
    int rc = index_overlays(k);
    if (rc)
        return h5l_err_set(err, rc, "%s: %s", h5l_reader_path(r),
                           rc == H5L_ENOMEM ? "out of memory" : "the chunk indexes of the skeleton overlap");
    return H5L_OK;
}

/* A full build. With keep, the file stays open (flushed, its image
 * copied) and becomes the live state *keep for later patches. With synth,
 * sparse variables get chunk indexes of our own (synth_coords); *synth_bad
 * is set when their guard fails (check_roots), and the caller builds again
 * without. */
static int build_full(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **keep, hfs_skel_t **out, h5l_err_t *err,
                      int synth, int *synth_bad)
{
    *out = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    hfs_skel_t *k = calloc(1, sizeof *k);
    if (!k) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    atomic_init(&k->refs, 1);
    int rc = H5L_OK;
    hfs_skel_live_t *l = NULL;
    uint64_t lists = 0; /* bytes the chunk lists of sparse variables took at most */
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    k->version = hfs_skel_version(r, s, tick);
    /* the attributes of tick: a view when the reader has only its
     * segment's last values (objects and dimensions are the same) */
    rc = h5l_reader_schema_at(r, tick, &s, err);
    size_t ndimv = 1;
    for (size_t i = 0; !rc && i < s->nobjs; i++) ndimv += 3 * (size_t)s->objs[i].ndims;
    k->vars = rc ? NULL : malloc((s->nobjs + 1) * sizeof *k->vars); /* (on_var sets each) */
    k->dimv = rc ? NULL : malloc(ndimv * sizeof *k->dimv);
    if (!rc && (!k->vars || !k->dimv)) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    if (!rc && keep) {
        l = calloc(1, sizeof *l);
        if (l) {
            l->file = -1;
            l->dsets = calloc(s->nobjs + 1, sizeof *l->dsets);
            l->ndsets = l->dsets ? s->nobjs + 1 : 0;
            l->sp = calloc(s->nobjs + 1, sizeof *l->sp);
        }
        if (!l || !l->dsets || !l->sp) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    }
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
        hfs_memvfd_raw_gap(cap, raw_gap(r));
        build_t b = {.k = k, .r = r, .s = s, .tick = tick, .cap = cap, .err = err, .keep_dsets = l ? l->dsets : NULL};
        uint64_t synth_min = synth ? atomic_load(&g_synth_min) : UINT64_MAX;
        /* own roots (own_root) in skeletons not kept live: every chunked
         * variable is then sparse (a live one's patches extend libhdf5's
         * indexes of early-allocated chunks) */
        int own = synth && synth_min <= 2;
#ifdef HFS_TEST_HOOKS
        /* tests that need chunks of fill assembled and cached (a closed
         * file then has none: chunks without data are not allocated) */
        if (getenv("H5LOGFS_TEST_NO_OWN_ROOTS")) own = 0;
#endif
        if (own && !(b.oh = calloc(s->nobjs + 1, sizeof *b.oh)))
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
        if (!rc) rc = h5l_canon_build(file, s, tick, !own ? H5L_ALLOC_EARLY : l ? H5L_ALLOC_LIVE : H5L_ALLOC_CHUNKS, on_var, &b, err);
        for (size_t i = 0; !rc && i < k->nvars; i++) {
            if (!k->vars[i].sparse) continue;
            const char *path = s->objs[k->vars[i].objid].path;
            hid_t ds = -1;
            /* (a live skeleton's patch appends to our index only along the
             * first dimension: a variable that grows in another keeps
             * libhdf5's) */
            int mine = own && (!l || grows_first_only(s, k->vars[i].objid));
            if (!(rc = chunks_with_data(&b, (uint32_t)i, 0)) && b.nblks) {
                if (mine && b.two_k) /* no room for it (or no header to point at it): libhdf5's indexes */
                    rc = guarded(own_root(&b, (uint32_t)i), "own", synth_bad, err, r,
                                 "no room could be reserved for the daemon's own chunk index");
                else if ((ds = H5Dopen2(file, path, H5P_DEFAULT)) < 0)
                    rc = H5L_EHDF5;
                else if (mine || (b.nblks >= synth_min && (!l || grows_first_only(s, k->vars[i].objid))))
                    rc = synth_coords(&b, (uint32_t)i, ds); /* own: the first with data, whose root is the guard's */
                else if (!(rc = coords_of_blks(&b)))
                    rc = write_coords(&b, (uint32_t)i, ds);
            }
            if (ds >= 0) H5Dclose(ds);
            if (!rc && l && b.ncoords) { /* what a patch compares against */
                size_t bytes = b.ncoords * k->vars[i].ndims * sizeof *b.coords;
                l->sp[i].c = malloc(bytes);
                if (!l->sp[i].c)
                    rc = H5L_ENOMEM;
                else {
                    memcpy(l->sp[i].c, b.coords, bytes);
                    l->sp[i].n = l->sp[i].cap = b.ncoords;
                }
            }
            if (rc && !*synth_bad) /* (a guard's refusal already says why) */
                h5l_err_set(err, rc, "%s: allocating the chunks of '%s' in the skeleton", h5l_reader_path(r), path);
        }
        lists = b.capcoords + b.capblks * sizeof *b.blks;
        free(b.oh);
        free(b.coords);
        free(b.blks);
        free(b.zero);
        if (rc)
            h5l_err_set(err, rc, "%s: building the canonical skeleton of tick %llu: %s", h5l_reader_path(r),
                        (unsigned long long)tick, err ? unprefixed(err->msg, r) : h5l_strerror(rc));
    }
    if (l && !rc) { /* kept open: the image of the flushed file */
        k->live = 1;
        if (H5Fflush(file, H5F_SCOPE_LOCAL) < 0 || !(k->img = hfs_memvfd_snapshot(cap)))
            rc = h5l_err_set(err, H5L_EHDF5, "%s: flushing the skeleton failed", h5l_reader_path(r));
        else if (fix_super_eoa(k->img))
            rc = h5l_err_set(err, H5L_EHDF5, "%s: the skeleton's superblock is not one the daemon can amend",
                             h5l_reader_path(r));
        /* A patch touches every variable that grew: with libhdf5's adaptive
         * metadata cache (2 MB to start) the 10,000 object headers of such
         * a file did not fit, and each H5Dset_extent evicted (serialised)
         * another header: 100 ms a patch, half of it evictions. A fixed
         * cache that holds them all; memory is what the headers take. A
         * refusal leaves the default (slower, not wrong). */
        H5AC_cache_config_t mdc;
        mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
        if (H5Fget_mdc_config(file, &mdc) >= 0) {
            mdc.set_initial_size = 1;
            mdc.initial_size = mdc.max_size = mdc.min_size = LIVE_MDC_BYTES;
            mdc.incr_mode = H5C_incr__off;
            mdc.flash_incr_mode = H5C_flash_incr__off;
            mdc.decr_mode = H5C_decr__off;
            H5Fset_mdc_config(file, &mdc);
        }
        l->file = file;
        l->cap = cap;
        l->tick = tick;
        l->chunks_v = h5l_reader_chunks_version(r, tick);
        file = -1;
        cap = NULL;
    }
    if (file >= 0 && H5Fclose(file) < 0 && !rc)
        rc = h5l_err_set(err, H5L_EHDF5, "%s: closing the skeleton failed", h5l_reader_path(r));
    if (cap) {
        int oom = hfs_memvfd_failed(cap);
        k->img = hfs_memvfd_take(cap);
        if (!k->img && !rc)
            rc = oom ? h5l_err_set(err, H5L_ENOMEM, "%s: out of memory building the skeleton", h5l_reader_path(r))
                     : h5l_err_set(err, H5L_EHDF5, "%s: skeleton image not available", h5l_reader_path(r));
        if (k->img && !rc && fix_super_eoa(k->img))
            rc = h5l_err_set(err, H5L_EHDF5, "%s: the skeleton's superblock is not one the daemon can amend",
                             h5l_reader_path(r));
    }
    if (fapl >= 0) H5Pclose(fapl);
    if (l && rc) {
        live_free_locked(l);
        l = NULL;
    }
    hfs_hdf5_unlock();
    h5l_reader_schema_release(r, s);
    h5l_reader_unlock(r);
    if (!rc) {
        k->eof = k->img->eof;
        hfs_memvfd_image_trim(k->img); /* a snapshot has none already */
    }
    if (!rc && k->nbts)
        rc = guarded(check_roots(k), "root", synth_bad, err, r,
                     "the chunk index libhdf5 began is not the one the daemon writes");
    for (size_t i = 0; !rc && i < k->nbts; i++)
        if (k->bts[i].oh)
            rc = guarded(h5l_bt_point_layout(&k->bts[i], image_read, k->img), "layout", synth_bad, err, r,
                         "a dataset's layout message is not the one the daemon can point at its index");
    if (!rc) rc = finish_regions(k, r, err);
    if (rc) {
        hfs_skel_live_free(l);
        hfs_skel_unref(k);
        return rc;
    }
#ifdef __GLIBC__
    /* a big build leaves libhdf5's freed working memory (and our chunk
     * lists) in malloc's free lists, which glibc hands back only from the
     * top of the heap: a million chunks left 20 MB there with libhdf5's
     * chunk index (daemon RSS 208 -> 188 MB), 8 MB with ours (107 -> 99) */
    if (k->img->meta_bytes >= BIG_BUILD_META || lists >= BIG_BUILD_META) malloc_trim(0);
#endif
    clock_gettime(CLOCK_MONOTONIC, &t1);
    k->build_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
    if (l) {
        l->k = hfs_skel_ref(k);
        *keep = l;
    }
    held(k);
    *out = k;
    return H5L_OK;
}

/* A full build with the daemon's own chunk indexes; when a guard refuses
 * them, again with libhdf5's, the guard's reason kept in the skeleton (the
 * second build's own error, if it fails, is what *err says). */
static int build_guarded(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **keep, hfs_skel_t **out, h5l_err_t *err)
{
    int bad = 0, rc = build_full(r, tick, keep, out, err, 1, &bad);
    if (!bad) return rc;
    h5l_err_t why = *err;
    rc = build_full(r, tick, keep, out, err, 0, &bad);
    if (!rc) (*out)->fallback = strdup(why.msg); /* NULL when out of memory: only the log line is lost */
    return rc;
}

int hfs_skel_build(h5l_reader_t *r, uint64_t tick, hfs_skel_t **out, h5l_err_t *err)
{
    return build_guarded(r, tick, NULL, out, err);
}

/* The chunks H5Dset_extent allocates when a dataset with early allocation
 * grows from old_nblk to nblk chunks per dimension, in the order libhdf5
 * 1.10 allocates them (H5D__chunk_allocate): one pass per dimension op,
 * over the chunks beyond the old extent in dimension op, within the old
 * extent in the dimensions before it and anywhere in those after it,
 * row-major within the pass; a pass that starts at 0 allocates everything
 * left and ends the walk. fn(ctx, blk) gets each chunk's row-major index in
 * the new shape. */
static int each_new_chunk(uint32_t nd, const uint64_t *old_nblk, const uint64_t *nblk,
                          int (*fn)(void *ctx, uint64_t blk), void *ctx)
{
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], c[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++) hi[d] = nblk[d]; /* exclusive */
    for (uint32_t op = 0; op < nd; op++) {
        if (old_nblk[op] < nblk[op]) {
            for (uint32_t d = 0; d < nd; d++) lo[d] = 0;
            lo[op] = old_nblk[op];
            int empty = 0;
            for (uint32_t d = 0; d < nd; d++) empty |= lo[d] >= hi[d];
            for (uint32_t d = 0; d < nd; d++) c[d] = lo[d];
            while (!empty) {
                uint64_t blk = 0;
                for (uint32_t d = 0; d < nd; d++) blk = blk * nblk[d] + c[d];
                int rc = fn(ctx, blk);
                if (rc) return rc;
                int d = (int)nd - 1;
                for (; d >= 0; d--) {
                    if (++c[d] < hi[d]) break;
                    c[d] = lo[d];
                }
                if (d < 0) break;
            }
        }
        if (old_nblk[op] == 0) break;
        hi[op] = old_nblk[op];
    }
    return H5L_OK;
}

typedef struct grow_ctx {
    build_t *b;
    uint32_t vi;
    size_t next, end; /* raw records of the window not yet matched */
    uint64_t bytes;
    uint64_t first_blk, last_blk;
    size_t n;
} grow_ctx_t;

static int grow_one(void *ctx, uint64_t blk)
{
    grow_ctx_t *g = ctx;
    hfs_memvfd_alloc_t a;
    if (g->next >= g->end || hfs_memvfd_raw_get(g->b->cap, g->next, &a) || a.size != g->bytes) return H5L_ECORRUPT;
    g->next++;
    if (!g->n++) g->first_blk = blk;
    g->last_blk = blk;
    return add_region(g->b, a.addr, a.size, g->vi, blk);
}

/* Chunk coordinates of row-major block blk of a variable with nblk blocks
 * per dimension. */
static void blk_coords(uint32_t nd, const uint64_t *nblk, uint64_t blk, uint64_t *c)
{
    for (int d = (int)nd - 1; d >= 0; d--) {
        c[d] = blk % nblk[d];
        blk /= nblk[d];
    }
}

/* The address libhdf5 has for chunk blk of v (guard; O(chunks) in 1.10.8). */
static int chunk_addr(hid_t ds, const hfs_svar_t *v, uint64_t blk, haddr_t *addr)
{
    uint64_t c[H5L_MAX_DIMS];
    hsize_t off[H5L_MAX_DIMS], size = 0;
    unsigned mask = 0;
    blk_coords(v->ndims, v->nblk, blk, c);
    for (uint32_t d = 0; d < v->ndims; d++) off[d] = c[d] * v->block[d];
    *addr = HADDR_UNDEF;
    return H5Dget_chunk_info_by_coord(ds, off, &mask, addr, &size) < 0 ? H5L_EHDF5 : H5L_OK;
}

/* The live file's dataset of variable vi, opened on first use. */
static int live_dset(hfs_skel_live_t *l, const h5l_schema_t *s, uint32_t vi, const char *path, h5l_err_t *err)
{
    const char *p = s->objs[l->k->vars[vi].objid].path;
    if (!l->dsets[vi] && (l->dsets[vi] = H5Dopen2(l->file, p, H5P_DEFAULT)) < 0) {
        l->dsets[vi] = 0;
        return h5l_err_set(err, H5L_EHDF5, "%s: cannot open '%s' in the live skeleton", path, p);
    }
    return H5L_OK;
}

static int own_dims(hfs_skel_t *k, uint32_t vi, int apply);

/* Patch the live file from l->tick to tick, publishing a new skeleton.
 * H5L_ESTATE: the change is not one a patch makes (an object or attribute
 * changed, a dimension shrank, a variable turns sparse); other errors:
 * libhdf5 or the mapping guard failed. Either way the caller drops the
 * live state (it may be half patched) and builds in full. Reader's read
 * lock and the libhdf5 lock held. */
#define CLOSES_PER_PATCH 256

static int patch_locked(hfs_skel_live_t *l, h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick, hfs_skel_t *k,
                        h5l_err_t *err)
{
    const hfs_skel_t *k0 = l->k;
    uint64_t t0 = l->tick;
    const char *path = h5l_reader_path(r);
    if (tick <= t0)
        return h5l_err_set(err, H5L_ESTATE, "%s: tick %llu is not after the live skeleton's", path,
                           (unsigned long long)tick);
    /* (from t0 the history has every key set since, but inside a segment
     * opened from its last values only those values: from one of its
     * ticks the patch is right, to one of them it would not be) */
    if (!h5l_reader_attrs_exact(r, tick))
        return h5l_err_set(err, H5L_ESTATE, "%s: tick %llu lies inside a segment of attribute ops not read", path,
                           (unsigned long long)tick);
    for (size_t i = 0; i < s->nobjs; i++)
        if (s->objs[i].kind && s->objs[i].tick > t0 && s->objs[i].tick <= tick)
            return h5l_err_set(err, H5L_ESTATE, "%s: '%s' was defined", path, s->objs[i].path);
    for (size_t d = 0; d < s->ndims; d++) {
        if (s->dims[d].tick > t0 && s->dims[d].tick <= tick)
            return h5l_err_set(err, H5L_ESTATE, "%s: dimension '%s' was defined", path, s->dims[d].name);
        if (s->dims[d].tick <= t0 && h5l_schema_dimlen(s, (uint32_t)d, tick) < h5l_schema_dimlen(s, (uint32_t)d, t0))
            return h5l_err_set(err, H5L_ESTATE, "%s: dimension '%s' shrank", path, s->dims[d].name);
    }
    /* attributes set since t0: the value each has at tick, written over the
     * old one in place (same type and shape, so its place and every other
     * byte stay as a rebuild would have them; else a full build). A model
     * that stamps its step or time into an attribute at every flush must
     * not cost a full build per tick. */
    for (size_t i = h5l_schema_attrs_after(s, t0); i < s->nattrs && s->attrs[i].tick <= tick; i++) {
        if (!h5l_schema_attr_current(s, i, tick)) continue; /* set again before tick */
        const h5l_attr_t *a = &s->attrs[i];
        hid_t o = H5Oopen(l->file, s->objs[a->objid].path, H5P_DEFAULT);
        if (o < 0) return h5l_err_set(err, H5L_EHDF5, "%s: cannot open '%s'", path, s->objs[a->objid].path);
        h5l_err_t ae = {0};
        int arc = h5l_canon_attr_rewrite(o, a, &ae);
        H5Oclose(o);
        if (arc) return h5l_err_set(err, arc, "%s: '%s': %s", path, s->objs[a->objid].path, ae.msg);
    }
    k->nvars = k0->nvars;
    memcpy(k->vars, k0->vars, k0->nvars * sizeof *k->vars);
    if (!(k->dimv = malloc((k0->ndimv + 1) * sizeof *k->dimv))) return H5L_ENOMEM;
    memcpy(k->dimv, k0->dimv, k0->ndimv * sizeof *k->dimv);
    k->ndimv = k0->ndimv;
    for (size_t i = 0; i < k->nvars; i++) { /* the same places in this skeleton's dimv */
        hfs_svar_t *v = &k->vars[i];
        v->shape = k->dimv + (k0->vars[i].shape - k0->dimv);
        v->block = v->shape + v->ndims;
        v->nblk = v->block + v->ndims;
    }
    build_t b = {.k = k, .r = r, .s = s, .tick = tick, .cap = l->cap, .err = err};
    if (k0->nregions) {
        if (h5l_grow((void **)&k->regions, &b.cap_regions, k0->nregions, sizeof *k->regions)) return H5L_ENOMEM;
        memcpy(k->regions, k0->regions, k0->nregions * sizeof *k->regions);
        k->nregions = k0->nregions;
    }
    if (k0->nbts) { /* our chunk indexes: the new skeleton's own copies */
        if (h5l_grow((void **)&k->bts, &b.cap_bts, k0->nbts, sizeof *k->bts)) return H5L_ENOMEM;
        for (size_t i = 0; i < k0->nbts; i++) {
            if (h5l_bt_copy(&k->bts[i], &k0->bts[i])) return H5L_ENOMEM;
            k->nbts++;
        }
    }
    int rc = H5L_OK, closes = 0;
    for (uint32_t vi = 0; !rc && vi < k->nvars; vi++) {
        hfs_svar_t *v = &k->vars[vi];
        uint64_t shape[H5L_MAX_DIMS], nblk[H5L_MAX_DIMS], nblocks = 1, bytes = v->esize;
        h5l_schema_shape(s, v->objid, tick, shape);
        if (!memcmp(shape, v->shape, v->ndims * sizeof *shape)) continue;
        if (atomic_load(&g_cancel)) return h5l_err_set(err, H5L_EIO, "%s: skeleton build cancelled (stopping)", path);
        if (!v->chunked) return h5l_err_set(err, H5L_ESTATE, "%s: a contiguous variable changed shape", path);
        if (!v->sparse && h5l_canon_sparse(s, v->objid, tick))
            return h5l_err_set(err, H5L_ESTATE, "%s: '%s' became sparse", path, s->objs[v->objid].path);
        for (uint32_t d = 1; v->own && d < v->ndims; d++) /* our index numbers chunks in the grid */
            if (shape[d] != v->shape[d])
                return h5l_err_set(err, H5L_ESTATE, "%s: '%s' grew in a dimension after its first", path,
                                   s->objs[v->objid].path);
        for (uint32_t d = 0; d < v->ndims; d++) {
            nblk[d] = (shape[d] + v->block[d] - 1) / v->block[d];
            nblocks *= nblk[d];
            bytes *= v->block[d];
        }
        /* an own root's dimensions are served by the daemon (own_dims):
         * libhdf5 keeps the full build's */
        if (v->own && k->bts[v->own - 1].oh && !v->ds_at && !v->ds_no) /* first time: can it be? */
            v->ds_no = own_dims((hfs_skel_t *)k0, vi, 0) != H5L_OK;
        int served = v->own && k->bts[v->own - 1].oh && !v->ds_no;
        if (served && l->dsets[vi] > 0 && closes < CLOSES_PER_PATCH) { /* (kept open by the full build) */
            /* closed: libhdf5's flush visits every open dataset, and
             * 10,000 it does not extend were a quarter of its flush; a
             * few hundred a patch, as 10,000 closes at once (0.2 s) made
             * the first patch late */
            H5Dclose(l->dsets[vi]);
            l->dsets[vi] = 0;
            closes++;
        }
        hid_t ds = -1;
        size_t r0 = 0, r1 = 0;
        if (!served) {
            if ((rc = live_dset(l, s, vi, path, err))) return rc;
            ds = l->dsets[vi];
            hsize_t ext[H5L_MAX_DIMS];
            for (uint32_t d = 0; d < v->ndims; d++) ext[d] = shape[d];
            r0 = hfs_memvfd_raw_begin(l->cap);
            herr_t x = H5Dset_extent(ds, ext);
            r1 = hfs_memvfd_raw_end(l->cap);
            if (x < 0) return h5l_err_set(err, H5L_EHDF5, "%s: cannot extend '%s'", path, s->objs[v->objid].path);
        }
        int renumber = 0;
        for (uint32_t d = 1; d < v->ndims; d++) renumber |= nblk[d] != v->nblk[d];
        if (renumber) /* the row-major numbers of its old blocks change */
            for (size_t i = 0; i < k->nregions; i++) {
                if (k->regions[i].var != vi) continue;
                uint64_t c[H5L_MAX_DIMS], blk = 0;
                blk_coords(v->ndims, v->nblk, k->regions[i].blk, c);
                for (uint32_t d = 0; d < v->ndims; d++) blk = blk * nblk[d] + c[d];
                k->regions[i].blk = blk;
            }
        uint64_t old_nblk[H5L_MAX_DIMS];
        memcpy(old_nblk, v->nblk, v->ndims * sizeof *old_nblk);
        memcpy(v->shape, shape, v->ndims * sizeof *shape);
        memcpy(v->nblk, nblk, v->ndims * sizeof *nblk);
        v->nblocks = nblocks;
        if (v->own) k->bts[v->own - 1].nblk[0] = nblk[0];
        if (v->sparse) {
            if (r1 != r0)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: extending sparse '%s' allocated", path,
                                   s->objs[v->objid].path);
            continue;
        }
        grow_ctx_t g = {&b, vi, r0, r1, bytes, 0, 0, 0};
        rc = each_new_chunk(v->ndims, old_nblk, nblk, grow_one, &g);
        if (!rc && g.next != r1) rc = H5L_ECORRUPT;
        for (int e = 0; !rc && e < 2 && g.n; e++) { /* guard the order at both ends */
            haddr_t addr;
            uint64_t blk = e ? g.last_blk : g.first_blk;
            rc = chunk_addr(ds, v, blk, &addr);
            const hfs_region_t *reg = &k->regions[k->nregions - (e ? 1 : g.n)];
            if (!rc && (reg->blk != blk || addr != reg->addr)) rc = H5L_ECORRUPT;
        }
#ifdef HFS_TEST_HOOKS
        if (!rc && patch_fail_hook(tick)) rc = H5L_ECORRUPT;
#endif
        if (rc)
            return h5l_err_set(err, rc, "%s: the chunks allocated by extending '%s' are not where expected", path,
                               s->objs[v->objid].path);
    }
    for (uint32_t d = 0; d < s->ndims; d++)
        if (h5l_schema_dimlen(s, d, tick) != h5l_schema_dimlen(s, d, t0) &&
            (rc = h5l_canon_grow_dim(l->file, s, d, tick, err)))
            return rc;
    uint64_t cv = h5l_reader_chunks_version(r, tick);
    if (cv != l->chunks_v && k->nbts) {
        if (!(b.bt_last = malloc((k->nbts + 1) * sizeof *b.bt_last))) return H5L_ENOMEM;
        for (size_t i = 0; i <= k->nbts; i++) b.bt_last[i] = SIZE_MAX;
        for (size_t i = 0; i < k->nregions; i++) {
            uint32_t t = k->regions[i].bt;
            if (t && t <= k->nbts && (b.bt_last[t] == SIZE_MAX || k->regions[i].addr > k->regions[b.bt_last[t]].addr))
                b.bt_last[t] = i;
        }
    }
    for (uint32_t vi = 0; cv != l->chunks_v && vi < k->nvars; vi++) { /* chunks that got data */
        hfs_svar_t *v = &k->vars[vi];
        if (!v->sparse) continue;
        if (v->own) {
            uint64_t add;
            if ((rc = own_new_chunks(&b, vi, v, &add)) || (rc = own_append(&b, vi, v, b.blks, add))) {
                if (rc == H5L_ESTATE)
                    h5l_err_set(err, rc, "%s: '%s' got data before its last chunk", path, s->objs[v->objid].path);
                break;
            }
            continue;
        }
        if ((rc = chunks_with_data(&b, vi, 1))) break;
        sparse_set_t *ss = &l->sp[vi];
        size_t w = v->ndims * sizeof *b.coords, fresh = 0, j = 0;
        for (size_t c = 0; c < b.ncoords; c++) { /* keep those not written yet */
            const uint64_t *cc = b.coords + c * v->ndims;
            int cmp = 1;
            while (j < ss->n && (cmp = cmp_coord(ss->c + j * v->ndims, cc, &b.ndims)) < 0) j++;
            if (j < ss->n && cmp == 0) continue;
            memmove(b.coords + fresh++ * v->ndims, cc, w);
        }
        b.ncoords = fresh;
        if (!fresh) continue;
        if ((rc = live_dset(l, s, vi, path, err)) || (rc = write_coords(&b, vi, l->dsets[vi]))) break;
        /* merge them into the set written */
        size_t n = ss->n + fresh;
        if (h5l_grow((void **)&ss->c, &ss->cap, n, w)) {
            rc = H5L_ENOMEM;
            break;
        }
        size_t a = ss->n, c = fresh;
        while (c) { /* from the back: both sorted */
            const uint64_t *fc = b.coords + (c - 1) * v->ndims;
            if (a && cmp_coord(ss->c + (a - 1) * v->ndims, fc, &b.ndims) > 0) {
                memmove(ss->c + (a + c - 1) * v->ndims, ss->c + (a - 1) * v->ndims, w);
                a--;
            } else {
                memmove(ss->c + (a + c - 1) * v->ndims, fc, w);
                c--;
            }
        }
        ss->n = n;
    }
    free(b.coords);
    free(b.blks);
    free(b.zero);
    free(b.bt_last);
    if (rc) return rc;
    l->chunks_v = cv;
    return H5L_OK;
}

static uint64_t le_get(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A patched live skeleton serves the dimensions of an own-root variable
 * itself when it can: libhdf5 is not asked to extend it (H5Dset_extent of
 * 10,000 datasets and the flush of their headers were most of a patch),
 * so the header in the image keeps the full build's dimensions. Finds
 * them (the dataspace message, in the header's first chunk with the
 * layout message h5l_bt_point_layout pointed; a header continued
 * elsewhere, as a dimension scale's with its attributes may be, is
 * extended by libhdf5 as before) and with apply sets v->ds_at and makes
 * the chunk's checksum again over the header as served: our root in the
 * layout, our dimensions (bt->ck). H5L_ECORRUPT on a header not of that
 * form. */
static int own_dims(hfs_skel_t *k, uint32_t vi, int apply)
{
    hfs_svar_t *v = &k->vars[vi];
    h5l_bt_t *bt = &k->bts[v->own - 1];
    uint8_t pre[6 + 16 + 4 + 8];
    image_read(k->img, bt->oh, sizeof pre, pre);
    if (memcmp(pre, "OHDR", 4) || pre[4] != 2) return H5L_ECORRUPT;
    uint8_t flags = pre[5];
    size_t at = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    int szb = 1 << (flags & 3);
    uint64_t len = at + (uint64_t)szb + le_get(pre + at, szb), mhdr = (flags & 0x04) ? 6 : 4;
    if (len > (1u << 20) || bt->ck_at != bt->oh + len || bt->lay_at < bt->oh || bt->lay_at + 8 > bt->ck_at)
        return H5L_ECORRUPT; /* (the layout message not in the first chunk) */
    uint8_t stack[1024]; /* a dataset's header fits: no malloc per variable at every patch */
    uint8_t *img = len <= sizeof stack ? stack : malloc((size_t)len);
    if (!img) return H5L_ENOMEM;
    image_read(k->img, bt->oh, (size_t)len, img);
    int rc = H5L_ECORRUPT;
    for (uint64_t p = at + (uint64_t)szb; p + mhdr <= len;) {
        uint64_t msz = le_get(img + p + 1, 2), d = p + mhdr;
        if (d + msz > len) break;
        if (img[p] == 0x01) { /* dataspace: version 1 or 2, simple, not shared */
            const uint8_t *m = img + d;
            uint64_t dims = m[0] == 2 ? 4 : m[0] == 1 ? 8 : 0;
            if (!dims || (img[p + 3] & 0x02) || m[1] != v->ndims || (m[0] == 2 && m[3] != 1) ||
                dims + 8 * (uint64_t)v->ndims > msz)
                break;
            int ok = le_get(m + dims, 8) <= v->shape[0];
            for (uint32_t i = 1; i < v->ndims; i++) ok &= le_get(m + dims + 8 * i, 8) == v->shape[i];
            if (!ok) break;
            rc = H5L_OK;
            if (!apply) break;
            for (uint32_t i = 0; i < v->ndims; i++)
                for (int b = 0; b < 8; b++) img[d + dims + 8 * i + b] = (uint8_t)(v->shape[i] >> (8 * b));
            for (int b = 0; b < 8; b++) img[bt->lay_at - bt->oh + b] = (uint8_t)(bt->root >> (8 * b));
            v->ds_at = bt->oh + d + dims;
            bt->ck = h5l_bt_lookup3(img, (size_t)len);
            break;
        }
        p = d + msz;
    }
    if (img != stack) free(img);
    return rc;
}

int hfs_skel_patch_live(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **live, hfs_skel_t **out, h5l_err_t *err)
{
    *out = NULL;
    hfs_skel_live_t *l = *live;
    if (!l) return h5l_err_set(err, H5L_ESTATE, "%s: no live skeleton to patch", h5l_reader_path(r));
    {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        h5l_err_t pe = {0};
        hfs_skel_t *k = calloc(1, sizeof *k);
        int rc = k ? H5L_OK : H5L_ENOMEM;
        if (k) atomic_init(&k->refs, 1);
        h5l_reader_rdlock(r);
        const h5l_schema_t *s = h5l_reader_schema(r);
        if (!rc && !(k->vars = calloc(l->k->nvars + 1, sizeof *k->vars))) rc = H5L_ENOMEM;
        hfs_hdf5_lock();
#ifdef HFS_TEST_HOOKS
        if (!rc) rc = test_hook(r, &pe);
#endif
        if (!rc) rc = patch_locked(l, r, s, tick, k, &pe);
        /* (an own index that grew reserved room libhdf5's superblock does
         * not know of: fix_super_eoa) */
        if (!rc && (H5Fflush(l->file, H5F_SCOPE_LOCAL) < 0 || !(k->img = hfs_memvfd_snapshot(l->cap)) ||
                    fix_super_eoa(k->img)))
            rc = H5L_EHDF5;
        for (size_t i = 0; !rc && i < k->nbts; i++)
            if (k->bts[i].oh && h5l_bt_point_layout(&k->bts[i], image_read, k->img)) rc = H5L_ECORRUPT;
        for (uint32_t i = 0; !rc && i < k->nvars; i++)
            if (k->vars[i].own && k->bts[k->vars[i].own - 1].oh && !k->vars[i].ds_no && (rc = own_dims(k, i, 1)) != H5L_OK)
                h5l_err_set(&pe, rc, "%s: the header of '%s': %s", h5l_reader_path(r), s->objs[k->vars[i].objid].path,
                            rc == H5L_ENOMEM ? "out of memory" : "not one whose dimensions the daemon can serve");
        if (!rc) {
            k->version = hfs_skel_version(r, s, tick);
            k->live = 1;
        }
        hfs_hdf5_unlock();
        h5l_reader_unlock(r);
        if (!rc) {
            k->eof = k->img->eof;
            rc = finish_regions(k, r, &pe);
        }
        if (!rc) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            k->build_ns = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u + (uint64_t)(t1.tv_nsec - t0.tv_nsec);
            hfs_skel_unref(l->k);
            l->k = hfs_skel_ref(k);
            l->tick = tick;
            l->patches++;
            held(k);
            *out = k;
            return H5L_OK;
        }
        /* not patchable, or the patch failed half way: the live state is
         * dropped (it may be half patched) */
        hfs_skel_unref(k);
        hfs_skel_live_free(l);
        *live = NULL;
        if (err) *err = pe;
        return rc;
    }
}

int hfs_skel_build_live(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **live, hfs_skel_t **out, h5l_err_t *err)
{
    h5l_err_t pe = {0};
    if (*live && hfs_skel_patch_live(r, tick, live, out, &pe) == H5L_OK) return H5L_OK;
    return build_guarded(r, tick, live, out, err); /* a patch never gives up the build */
}
