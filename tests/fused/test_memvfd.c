/* test_memvfd.c — the in-memory capture driver (fused/memvfd.[ch]).
 *
 * Builds canonical skeletons with libhdf5 on the driver, then assembles
 * real files from the image (metadata bytes from the image, raw regions
 * filled by the test at the recorded addresses) and reads them back with
 * plain libhdf5 (sec2). Set TEST_MEMVFD_KEEP=/path/file.h5 to keep the
 * assembled file of test_roundtrip (for h5dump / h5py). */
#include "memvfd.h"
#include "tharness.h"

#include <fcntl.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static hid_t skel_dcpl(int rank, const hsize_t *chunk, hid_t type, const void *fill)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunk) H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    if (fill) H5Pset_fill_value(dcpl, type, fill);
    return dcpl;
}

/* Structural invariants of an image: extents sorted, disjoint, never
 * touching, sum == meta_bytes, within eof; allocations in address order;
 * no extent overlaps a (non global-heap) raw region. */
static void check_image_shape(const hfs_memvfd_image_t *img)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < img->n_extents; i++) {
        const hfs_memvfd_extent_t *e = &img->extents[i];
        CHECK(e->len > 0);
        CHECK(e->bytes != NULL);
        if (i > 0) CHECK(img->extents[i - 1].addr + img->extents[i - 1].len < e->addr);
        sum += e->len;
        CHECK(e->addr + e->len <= img->eof);
    }
    CHECK_EQ(sum, img->meta_bytes);
    CHECK_EQ(img->eof, img->eoa);
    for (size_t i = 1; i < img->n_allocs; i++)
        CHECK(img->allocs[i - 1].addr + img->allocs[i - 1].size <= img->allocs[i].addr);
    /* merge walk: raw regions (sorted) against extents (sorted) */
    size_t x = 0, overlaps = 0;
    uint64_t raw_sum = 0;
    for (size_t r = 0; r < img->n_raw; r++) {
        const hfs_memvfd_alloc_t *a = &img->raw[r];
        CHECK(a->addr + a->size <= img->eof);
        if (a->flags & (HFS_MEMVFD_ALLOC_GHEAP | HFS_MEMVFD_ALLOC_META))
            continue; /* libhdf5's own raw-typed objects: bytes are kept */
        CHECK_EQ(a->type, H5FD_MEM_DRAW);
        raw_sum += a->size;
        while (x < img->n_extents && img->extents[x].addr + img->extents[x].len <= a->addr) x++;
        if (x < img->n_extents && img->extents[x].addr < a->addr + a->size) overlaps++;
    }
    CHECK_EQ(overlaps, 0);
    CHECK_EQ(raw_sum, img->raw_bytes);
}

/* Write the image to path: metadata from the image, holes elsewhere, the
 * file exactly eof bytes long. Raw data is written by the caller. */
static int write_image(const hfs_memvfd_image_t *img, const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    int rc = ftruncate(fd, (off_t)img->eof);
    for (size_t i = 0; rc == 0 && i < img->n_extents; i++)
        if (pwrite(fd, img->extents[i].bytes, img->extents[i].len, (off_t)img->extents[i].addr) !=
            (ssize_t)img->extents[i].len)
            rc = -1;
    if (close(fd) < 0) rc = -1;
    return rc;
}

static int pwrite_at(const char *path, uint64_t off, const void *buf, size_t len)
{
    int fd = open(path, O_RDWR);
    if (fd < 0) return -1;
    ssize_t n = pwrite(fd, buf, len, (off_t)off);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

static void tmp_path(char *buf, size_t n, const char *tag)
{
    const char *d = getenv("TMPDIR");
    snprintf(buf, n, "%s/test_memvfd_%d_%s.h5", d && *d ? d : "/tmp", (int)getpid(), tag);
}

static int host_is_le(void)
{
    uint32_t one = 1;
    unsigned char c;
    memcpy(&c, &one, 1);
    return c == 1;
}

/* Where chunk k (row-major chunk order) of a dataset lives, given the raw
 * records [r0, r1) appended while it was created: one record per chunk
 * (v1 B-tree; fixed or extensible array), or one record holding every
 * chunk back to back (1.10 implicit index, single chunk). */
static int chunk_rec(const hfs_memvfd_alloc_t *recs, size_t nrec, size_t nchunks, size_t k, uint64_t csize,
                     uint64_t *addr)
{
    if (k >= nchunks) return -1;
    if (nrec == 1 && recs[0].size == nchunks * csize) {
        *addr = recs[0].addr + k * csize;
        return 0;
    }
    if (nrec != nchunks || recs[k].size != csize) return -1;
    *addr = recs[k].addr;
    return 0;
}

/* The same while the file is open. */
static int live_chunk(const hfs_memvfd_t *s, size_t r0, size_t r1, size_t nchunks, size_t k, uint64_t csize,
                      uint64_t *addr)
{
    hfs_memvfd_alloc_t rec;
    if (r1 - r0 == 1) {
        if (hfs_memvfd_raw_get(s, r0, &rec) < 0) return -1;
        return chunk_rec(&rec, 1, nchunks, k, csize, addr);
    }
    if (r1 - r0 != nchunks || hfs_memvfd_raw_get(s, r0 + k, &rec) < 0 || rec.size != csize) return -1;
    *addr = rec.addr;
    return 0;
}

static hsize_t num_chunks(hid_t d)
{
    hsize_t n = 0;
    hid_t sp = H5Dget_space(d); /* 1.10.8 refuses H5S_ALL here */
    if (H5Dget_num_chunks(d, sp, &n) < 0) n = 0;
    H5Sclose(sp);
    return n;
}

/* Known contents. */
#define CN0 1000
#define CN1 1000
#define KN0 100
#define KN1 200
#define KC0 10
#define KC1 50
#define XN 200
static float contig_val(size_t i, size_t j) { return (float)(i * CN1 + j); }
static int32_t chunk_val(size_t i, size_t j) { return (int32_t)(i * KN1 + j) * 3 - 7; }

/* ------------------------------------------------------------------ */

static void roundtrip(H5F_libver_t low)
{
    CHECK(host_is_le());
    hid_t fapl = hfs_memvfd_fapl();
    CHECK(fapl >= 0);
    H5Pset_libver_bounds(fapl, low, H5F_LIBVER_LATEST);
    hid_t f = H5Fcreate("roundtrip", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(f >= 0);
    /* earliest: default mode, bare counting; latest: windowed mode */
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    if (low == H5F_LIBVER_LATEST) hfs_memvfd_use_windows(s);
    CHECK(s != NULL);
    if (!s) return;

    /* groups and attributes */
    hid_t g1 = H5Gcreate2(f, "/g1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g2 = H5Gcreate2(g1, "g2", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t scalar = H5Screate(H5S_SCALAR);
    hsize_t three = 3;
    hid_t sp3 = H5Screate_simple(1, &three, NULL);
    int ver[3] = {1, 2, 3};
    hid_t a = H5Acreate2(f, "version", H5T_STD_I32LE, sp3, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(a, H5T_NATIVE_INT, ver) >= 0);
    H5Aclose(a);
    double scale = 2.5;
    a = H5Acreate2(g1, "scale", H5T_IEEE_F64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(a, H5T_NATIVE_DOUBLE, &scale) >= 0);
    H5Aclose(a);
    hid_t fstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(fstr, 32);
    char title[32] = "h5logfs memvfd test";
    a = H5Acreate2(f, "title", fstr, scalar, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(a, fstr, title) >= 0);
    H5Aclose(a);
    hid_t vstr = H5Tcopy(H5T_C_S1);
    H5Tset_size(vstr, H5T_VARIABLE);
    const char *hist = "created on the in-memory capture driver";
    a = H5Acreate2(g2, "history", vstr, scalar, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Awrite(a, vstr, &hist) >= 0); /* global heap: DRAW-typed in 1.10.8 */
    H5Aclose(a);

    /* contiguous float [1000,1000] */
    hsize_t cd[2] = {CN0, CN1};
    hid_t csp = H5Screate_simple(2, cd, NULL);
    float cfill = -1.0f;
    hid_t dcpl = skel_dcpl(2, NULL, H5T_NATIVE_FLOAT, &cfill);
    size_t r0 = hfs_memvfd_raw_begin(s);
    hid_t dc = H5Dcreate2(g1, "contig", H5T_IEEE_F32LE, csp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t r1 = hfs_memvfd_raw_end(s);
    CHECK(dc >= 0);
    CHECK_EQ(r1 - r0, 1);
    H5Pclose(dcpl);
    hfs_memvfd_alloc_t rec;
    CHECK(hfs_memvfd_raw_get(s, r0, &rec) == 0);
    CHECK_EQ(rec.addr, H5Dget_offset(dc));
    CHECK_EQ(rec.size, (uint64_t)CN0 * CN1 * 4);
    CHECK_EQ(rec.type, H5FD_MEM_DRAW);
    size_t contig_idx = r0;

    /* chunked int32 [100,200], chunk [10,50] */
    hsize_t kd[2] = {KN0, KN1}, kc[2] = {KC0, KC1};
    hid_t ksp = H5Screate_simple(2, kd, NULL);
    int32_t kfill = -99;
    dcpl = skel_dcpl(2, kc, H5T_NATIVE_INT32, &kfill);
    r0 = hfs_memvfd_raw_begin(s);
    hid_t dk = H5Dcreate2(g2, "chunked", H5T_STD_I32LE, ksp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    r1 = hfs_memvfd_raw_end(s);
    CHECK(dk >= 0);
    H5Pclose(dcpl);
    const size_t nck0 = KN0 / KC0, nck1 = KN1 / KC1, nchunks = nck0 * nck1;
    const uint64_t csize = KC0 * KC1 * 4;
    /* v1 B-tree (earliest): one record per chunk; implicit index (latest,
     * fixed dims, early allocation, no filter): one record for all */
    CHECK(r1 - r0 == (low == H5F_LIBVER_LATEST ? 1 : nchunks));
    size_t chunk_idx = r0, chunk_nrec = r1 - r0;
    CHECK_EQ(num_chunks(dk), nchunks);
    /* row-major chunk order at increasing addresses; every chunk checked
     * here (40 calls are cheap; the big test only spot-checks) */
    uint64_t prev_end = 0;
    for (size_t k = 0; k < nchunks; k++) {
        uint64_t ca = 0;
        CHECK(live_chunk(s, r0, r1, nchunks, k, csize, &ca) == 0);
        CHECK(ca >= prev_end);
        prev_end = ca + csize;
        hsize_t off[2] = {(k / nck1) * KC0, (k % nck1) * KC1};
        unsigned mask = 1;
        haddr_t addr = HADDR_UNDEF;
        hsize_t sz = 0;
        CHECK(H5Dget_chunk_info_by_coord(dk, off, &mask, &addr, &sz) >= 0);
        CHECK_EQ(addr, ca);
        CHECK_EQ(sz, csize);
        CHECK_EQ(mask, 0);
    }

    /* a dimension scale on dim 1 of the chunked dataset (DIMENSION_LIST is a
     * vlen attribute: another global heap collection) */
    hsize_t xd = XN;
    hid_t xsp = H5Screate_simple(1, &xd, NULL);
    dcpl = skel_dcpl(1, NULL, H5T_NATIVE_INT32, NULL);
    r0 = hfs_memvfd_raw_begin(s);
    hid_t dx = H5Dcreate2(g2, "x", H5T_STD_I32LE, xsp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    r1 = hfs_memvfd_raw_end(s);
    CHECK_EQ(r1 - r0, 1);
    size_t x_idx = r0;
    H5Pclose(dcpl);
    CHECK(H5DSset_scale(dx, "x") >= 0);
    CHECK(H5DSattach_scale(dk, dx, 1) >= 0);
    CHECK(hfs_memvfd_raw_get(s, x_idx, &rec) == 0);
    CHECK_EQ(rec.addr, H5Dget_offset(dx));

    H5Dclose(dx);
    H5Dclose(dk);
    H5Dclose(dc);
    H5Sclose(xsp);
    H5Sclose(ksp);
    H5Sclose(csp);
    H5Sclose(sp3);
    H5Sclose(scalar);
    H5Tclose(fstr);
    H5Tclose(vstr);
    H5Gclose(g2);
    H5Gclose(g1);
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);

    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    CHECK_EQ(img->dropped_writes, 0);
    CHECK_EQ(img->dropped_bytes, 0);
    CHECK_EQ(img->raw_freed, 0);
    CHECK(img->meta_bytes < 64 * 1024);
    size_t ngheap = 0;
    for (size_t i = 0; i < img->n_raw; i++)
        if (img->raw[i].flags & HFS_MEMVFD_ALLOC_GHEAP) {
            ngheap++;
            CHECK_EQ(img->raw[i].type, H5FD_MEM_GHEAP);
            /* windowed mode: allocated outside windows, so META as well */
            CHECK_EQ(!!(img->raw[i].flags & HFS_MEMVFD_ALLOC_META), low == H5F_LIBVER_LATEST);
        } else {
            CHECK_EQ(img->raw[i].flags, 0);
        }
    CHECK(ngheap >= 1); /* vlen attribute + DIMENSION_LIST */
    CHECK_EQ(img->n_raw - ngheap, 1 + chunk_nrec + 1);
    CHECK_EQ(img->raw_bytes, (uint64_t)CN0 * CN1 * 4 + nchunks * KC0 * KC1 * 4 + XN * 4);
    printf("     roundtrip %s: eof %llu, metadata %llu bytes in %zu extents, %zu allocs, %zu raw "
           "(%zu global heap)\n",
           low == H5F_LIBVER_LATEST ? "latest" : "earliest", (unsigned long long)img->eof,
           (unsigned long long)img->meta_bytes, img->n_extents, img->n_allocs, img->n_raw, ngheap);

    /* hfs_memvfd_image_read: the whole file at once, then odd slices of it */
    unsigned char *whole = malloc(img->eof + 100);
    CHECK(whole != NULL);
    hfs_memvfd_image_read(img, 0, img->eof + 100, whole);
    for (uint64_t k = img->eof; k < img->eof + 100; k++) CHECK(whole[k] == 0);
    for (size_t i = 0; i < img->n_extents; i++)
        CHECK(memcmp(whole + img->extents[i].addr, img->extents[i].bytes, img->extents[i].len) == 0);
    {
        unsigned char part[777];
        size_t bad = 0;
        for (uint64_t off = 0; off < img->eof; off += 4093) {
            size_t len = sizeof part;
            if (off + len > img->eof + 100) len = (size_t)(img->eof + 100 - off);
            hfs_memvfd_image_read(img, off, len, part);
            if (memcmp(part, whole + off, len) != 0) bad++;
        }
        CHECK_EQ(bad, 0);
        /* trimmed (what a skeleton keeps), the image reads the same */
        hfs_memvfd_image_t cut = *img;
        cut.allocs = malloc(img->n_allocs * sizeof *img->allocs + 1);
        cut.raw = malloc(img->n_raw * sizeof *img->raw + 1);
        CHECK(cut.allocs && cut.raw);
        hfs_memvfd_image_trim(&cut);
        CHECK(cut.n_allocs == 0 && cut.n_raw == 0 && !cut.allocs && !cut.raw && cut.raw_bytes == img->raw_bytes);
        unsigned char *again = malloc(img->eof + 100);
        CHECK(again != NULL);
        if (again) {
            hfs_memvfd_image_read(&cut, 0, img->eof + 100, again);
            CHECK(memcmp(again, whole, img->eof + 100) == 0);
        }
        free(again);
        /* every non-gheap raw region reads as zeros */
        for (size_t i = 0; i < img->n_raw; i++) {
            if (img->raw[i].flags & (HFS_MEMVFD_ALLOC_GHEAP | HFS_MEMVFD_ALLOC_META)) continue;
            for (uint64_t o = img->raw[i].addr; o < img->raw[i].addr + img->raw[i].size; o++)
                if (whole[o]) {
                    bad++;
                    break;
                }
        }
        CHECK_EQ(bad, 0);
    }
    free(whole);

    /* assemble a real file */
    char path[512];
    const char *keep = getenv("TEST_MEMVFD_KEEP");
    if (keep && *keep)
        snprintf(path, sizeof path, "%s%s", keep, low == H5F_LIBVER_LATEST ? ".latest" : "");
    else
        tmp_path(path, sizeof path, "roundtrip");
    CHECK(write_image(img, path) == 0);
    {
        const hfs_memvfd_alloc_t *c = &img->raw[contig_idx];
        float *buf = malloc(c->size);
        for (size_t i = 0; i < CN0; i++)
            for (size_t j = 0; j < CN1; j++) buf[i * CN1 + j] = contig_val(i, j);
        CHECK(pwrite_at(path, c->addr, buf, c->size) == 0);
        free(buf);
        int32_t cb[KC0 * KC1];
        for (size_t k = 0; k < nchunks; k++) {
            size_t ci = k / nck1, cj = k % nck1;
            for (size_t a0 = 0; a0 < KC0; a0++)
                for (size_t a1 = 0; a1 < KC1; a1++) cb[a0 * KC1 + a1] = chunk_val(ci * KC0 + a0, cj * KC1 + a1);
            uint64_t ca = 0;
            CHECK(chunk_rec(img->raw + chunk_idx, chunk_nrec, nchunks, k, csize, &ca) == 0);
            CHECK(pwrite_at(path, ca, cb, sizeof cb) == 0);
        }
        int32_t xb[XN];
        for (size_t j = 0; j < XN; j++) xb[j] = (int32_t)(j * 10);
        CHECK(pwrite_at(path, img->raw[x_idx].addr, xb, sizeof xb) == 0);
    }
    struct stat st;
    CHECK(stat(path, &st) == 0);
    CHECK_EQ((uint64_t)st.st_size, img->eof);

    /* read it back with plain libhdf5 (sec2) */
    hid_t rf = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(rf >= 0);
    if (rf >= 0) {
        hsize_t fsz = 0;
        CHECK(H5Fget_filesize(rf, &fsz) >= 0);
        CHECK_EQ(fsz, img->eof);
        float *cv = malloc(sizeof(float) * CN0 * CN1);
        hid_t d = H5Dopen2(rf, "/g1/contig", H5P_DEFAULT);
        CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, cv) >= 0);
        size_t bad = 0;
        for (size_t i = 0; i < CN0; i++)
            for (size_t j = 0; j < CN1; j++)
                if (cv[i * CN1 + j] != contig_val(i, j)) bad++;
        CHECK_EQ(bad, 0);
        hid_t pl = H5Dget_create_plist(d);
        float fv = 0;
        CHECK(H5Pget_fill_value(pl, H5T_NATIVE_FLOAT, &fv) >= 0);
        CHECK(fv == -1.0f);
        H5D_fill_time_t ft;
        H5Pget_fill_time(pl, &ft);
        CHECK_EQ(ft, H5D_FILL_TIME_NEVER);
        H5Pclose(pl);
        H5Dclose(d);
        free(cv);

        int32_t *kv = malloc(sizeof(int32_t) * KN0 * KN1);
        d = H5Dopen2(rf, "/g1/g2/chunked", H5P_DEFAULT);
        CHECK(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, kv) >= 0);
        bad = 0;
        for (size_t i = 0; i < KN0; i++)
            for (size_t j = 0; j < KN1; j++)
                if (kv[i * KN1 + j] != chunk_val(i, j)) bad++;
        CHECK_EQ(bad, 0);
        CHECK_EQ(H5DSis_attached(d, H5Dopen2(rf, "/g1/g2/x", H5P_DEFAULT), 1), 1);
        pl = H5Dget_create_plist(d);
        int32_t kf = 0;
        CHECK(H5Pget_fill_value(pl, H5T_NATIVE_INT32, &kf) >= 0);
        CHECK_EQ(kf, -99);
        H5Pclose(pl);
        H5Dclose(d);
        free(kv);

        int32_t xv[XN];
        d = H5Dopen2(rf, "/g1/g2/x", H5P_DEFAULT);
        CHECK(H5Dread(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, xv) >= 0);
        bad = 0;
        for (size_t j = 0; j < XN; j++)
            if (xv[j] != (int32_t)(j * 10)) bad++;
        CHECK_EQ(bad, 0);
        H5Dclose(d);

        int rv[3] = {0, 0, 0};
        a = H5Aopen(rf, "version", H5P_DEFAULT);
        CHECK(H5Aread(a, H5T_NATIVE_INT, rv) >= 0);
        CHECK(rv[0] == 1 && rv[1] == 2 && rv[2] == 3);
        H5Aclose(a);
        double sv = 0;
        a = H5Aopen_by_name(rf, "/g1", "scale", H5P_DEFAULT, H5P_DEFAULT);
        CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, &sv) >= 0);
        CHECK(sv == 2.5);
        H5Aclose(a);
        char tv[32] = {0};
        a = H5Aopen(rf, "title", H5P_DEFAULT);
        hid_t at = H5Aget_type(a);
        CHECK_EQ(H5Tget_size(at), 32);
        CHECK(H5Aread(a, at, tv) >= 0);
        CHECK(strcmp(tv, "h5logfs memvfd test") == 0);
        H5Tclose(at);
        H5Aclose(a);
        char *hv = NULL;
        hid_t vt = H5Tcopy(H5T_C_S1);
        H5Tset_size(vt, H5T_VARIABLE);
        a = H5Aopen_by_name(rf, "/g1/g2", "history", H5P_DEFAULT, H5P_DEFAULT);
        CHECK(H5Aread(a, vt, &hv) >= 0);
        CHECK(hv && strcmp(hv, "created on the in-memory capture driver") == 0);
        H5free_memory(hv);
        H5Tclose(vt);
        H5Aclose(a);
        /* close the x dataset opened for H5DSis_attached */
        hid_t objs[8];
        ssize_t n = H5Fget_obj_ids(rf, H5F_OBJ_DATASET, 8, objs);
        for (ssize_t i = 0; i < n; i++) H5Dclose(objs[i]);
        CHECK(H5Fclose(rf) >= 0);
    }
    if (!(keep && *keep))
        unlink(path);
    else
        printf("     kept %s\n", path);
    hfs_memvfd_image_free(img);
}

static void test_roundtrip_earliest(void) { roundtrip(H5F_LIBVER_EARLIEST); }
static void test_roundtrip_latest(void) { roundtrip(H5F_LIBVER_LATEST); }

/* ------------------------------------------------------------------ */

static hfs_memvfd_image_t *small_file(hid_t fapl, int tag, int hold_open_group)
{
    hid_t f = H5Fcreate("small", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "tag", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &tag);
    H5Aclose(a);
    H5Sclose(sp);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (!hold_open_group) H5Gclose(g);
    H5Fclose(f);
    if (hold_open_group) H5Gclose(g);
    return hfs_memvfd_take(s);
}

static int image_tag(const hfs_memvfd_image_t *img, const char *path)
{
    if (write_image(img, path) < 0) return -1;
    int tag = -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f >= 0) {
        hid_t a = H5Aopen(f, "tag", H5P_DEFAULT);
        if (a < 0 || H5Aread(a, H5T_NATIVE_INT, &tag) < 0) tag = -2;
        H5Aclose(a);
        if (H5Oexists_by_name(f, "g", H5P_DEFAULT) <= 0) tag = -3;
        H5Fclose(f);
    }
    unlink(path);
    return tag;
}

/* Many files in sequence on one fapl; two files open at once; images that
 * outlive each other; the weak close degree. */
static void test_many_files(void)
{
    char path[512];
    tmp_path(path, sizeof path, "small");
    hid_t fapl = hfs_memvfd_fapl();
    double t0 = now_s();
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        hfs_memvfd_image_t *img = small_file(fapl, i, 0);
        if (!img || img->dropped_bytes || img->n_raw || (i % 50 == 0 && image_tag(img, path) != i)) bad++;
        hfs_memvfd_image_free(img);
    }
    double t1 = now_s();
    CHECK_EQ(bad, 0);
    printf("     200 small skeletons in sequence: %.2f ms each\n", (t1 - t0) * 1e3 / 200);

    /* two files open at the same time, closed in the other order */
    hid_t fa = H5Fcreate("same-name", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t fb = H5Fcreate("same-name", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(fa >= 0 && fb >= 0);
    hfs_memvfd_t *sa = hfs_memvfd_get(fa), *sb = hfs_memvfd_get(fb);
    hfs_memvfd_use_windows(sb);
    CHECK(sa && sb && sa != sb);
    hid_t sp = H5Screate(H5S_SCALAR);
    int va = 111, vb = 222;
    hid_t a = H5Acreate2(fa, "tag", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &va);
    H5Aclose(a);
    a = H5Acreate2(fb, "tag", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT, &vb);
    H5Aclose(a);
    H5Gclose(H5Gcreate2(fa, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Gclose(H5Gcreate2(fb, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(sp);
    H5Fclose(fb);
    hfs_memvfd_image_t *ib = hfs_memvfd_take(sb);
    H5Fclose(fa);
    hfs_memvfd_image_t *ia = hfs_memvfd_take(sa);
    CHECK(ia && ib);
    if (ia && ib) {
        CHECK_EQ(image_tag(ib, path), 222);
        hfs_memvfd_image_free(ib);
        CHECK_EQ(image_tag(ia, path), 111);
        hfs_memvfd_image_free(ia);
    }

    /* weak close: an open group keeps the file open, so take fails; a
     * second reference taken after the real close gets the image */
    hid_t f = H5Fcreate("weak", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s1 = hfs_memvfd_get(f), *s2 = hfs_memvfd_get(f);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(H5Fclose(f) >= 0);
    CHECK(hfs_memvfd_take(s1) == NULL);
    H5Gclose(g); /* the file really closes here */
    hfs_memvfd_image_t *iw = hfs_memvfd_take(s2);
    CHECK(iw != NULL);
    hfs_memvfd_image_free(iw);

    /* nobody holds a session: the image is dropped at close */
    hfs_memvfd_image_t *none = small_file(fapl, 5, 1);
    CHECK(none != NULL); /* small_file holds one */
    hfs_memvfd_image_free(none);
    f = H5Fcreate("unwatched", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    CHECK(H5Fclose(f) >= 0);
    /* put without take */
    f = H5Fcreate("put", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_put(hfs_memvfd_get(f));
    CHECK(H5Fclose(f) >= 0);

    /* not our file; opening is not supported */
    hid_t sec2 = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(hfs_memvfd_get(sec2) == NULL);
    H5Fclose(sec2);
    unlink(path);
    H5E_BEGIN_TRY { f = H5Fopen("anything", H5F_ACC_RDONLY, fapl); }
    H5E_END_TRY;
    CHECK(f < 0);
    H5Pclose(fapl);
}

/* ------------------------------------------------------------------ */

/* Raw data written by libhdf5 (fill values at allocation) is dropped and
 * counted, never stored. */
static void test_raw_never_stored(void)
{
    hid_t fapl = hfs_memvfd_fapl();
    hid_t f = H5Fcreate("fill", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    hfs_memvfd_use_windows(s);
    hsize_t d[1] = {100000};
    hid_t sp = H5Screate_simple(1, d, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC);
    int fill = 42;
    H5Pset_fill_value(dcpl, H5T_NATIVE_INT, &fill);
    hfs_memvfd_raw_begin(s);
    hid_t ds = H5Dcreate2(f, "filled", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    hfs_memvfd_raw_end(s);
    int v[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    hsize_t start = 500, cnt = 10;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
    CHECK(H5Dwrite(ds, H5T_NATIVE_INT, ms, sp, H5P_DEFAULT, v) >= 0);
    /* libhdf5 reads raw data back: it gets zeros, not what it wrote */
    int back[10] = {0};
    CHECK(H5Dread(ds, H5T_NATIVE_INT, ms, sp, H5P_DEFAULT, back) >= 0);
    CHECK_EQ(back[0], 0);
    H5Sclose(ms);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Fclose(f);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    CHECK_EQ(img->n_raw, 1);
    CHECK(img->dropped_writes >= 2);
    CHECK(img->dropped_bytes >= 400000 + 40);
    CHECK(img->meta_bytes < 4096);
    hfs_memvfd_image_free(img);
}

/* ------------------------------------------------------------------ */

/* H5Pset_alignment is honoured: with threshold 1 every allocation,
 * so every raw region, is page aligned, and the records say so. */
static void test_alignment(void)
{
    hid_t fapl = hfs_memvfd_fapl();
    H5Pset_alignment(fapl, 1, 4096);
    hid_t f = H5Fcreate("aligned", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    hsize_t d[2] = {64, 64}, c[2] = {16, 10}; /* 4 x 7 chunks, edge chunks */
    hid_t sp = H5Screate_simple(2, d, NULL);
    hid_t dcpl = skel_dcpl(2, c, H5T_NATIVE_INT16, NULL);
    size_t r0 = hfs_memvfd_raw_count(s);
    hid_t ds = H5Dcreate2(f, "a", H5T_STD_I16LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t r1 = hfs_memvfd_raw_count(s);
    CHECK_EQ(r1 - r0, 4 * 7);
    size_t bad = 0;
    for (size_t k = 0; k < r1 - r0; k++) {
        hfs_memvfd_alloc_t rec;
        hfs_memvfd_raw_get(s, r0 + k, &rec);
        hsize_t off[2] = {(k / 7) * 16, (k % 7) * 10};
        haddr_t addr;
        hsize_t sz;
        unsigned m;
        H5Dget_chunk_info_by_coord(ds, off, &m, &addr, &sz);
        if (rec.addr % 4096 || rec.addr != addr || rec.size != 16 * 10 * 2 || sz != rec.size) bad++;
    }
    CHECK_EQ(bad, 0);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Dclose(ds);
    H5Fclose(f);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    CHECK_EQ(img->dropped_bytes, 0);
    /* a chunk's worth of data round-trips through sec2 */
    char path[512];
    tmp_path(path, sizeof path, "aligned");
    CHECK(write_image(img, path) == 0);
    int16_t ch[16 * 10];
    for (int i = 0; i < 160; i++) ch[i] = (int16_t)(i + 1);
    const hfs_memvfd_alloc_t *last = &img->raw[r1 - 1]; /* chunk (3,6): edge */
    CHECK(pwrite_at(path, last->addr, ch, sizeof ch) == 0);
    hid_t rf = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(rf >= 0);
    if (rf >= 0) {
        int16_t all[64 * 64];
        hid_t rd = H5Dopen2(rf, "a", H5P_DEFAULT);
        CHECK(H5Dread(rd, H5T_NATIVE_INT16, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) >= 0);
        CHECK_EQ(all[48 * 64 + 60], 1); /* chunk origin (48, 60) */
        CHECK_EQ(all[63 * 64 + 63], 15 * 10 + 3 + 1);
        CHECK_EQ(all[0], 0);
        H5Dclose(rd);
        H5Fclose(rf);
    }
    unlink(path);
    hfs_memvfd_image_free(img);
}

/* ------------------------------------------------------------------ */

/* The sparse store and the allocation records, driven directly through
 * the public H5FD* calls against a byte-for-byte model. */
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void test_store_model(void)
{
    enum { SPAN = 1 << 16 };
    hid_t fapl = hfs_memvfd_fapl();
    H5FD_t *fd = H5FDopen("model", H5F_ACC_RDWR | H5F_ACC_CREAT | H5F_ACC_TRUNC, fapl, HADDR_UNDEF);
    CHECK(fd != NULL);
    if (!fd) return;
    hfs_memvfd_t *s = hfs_memvfd_get_vfd(fd);
    CHECK(s != NULL);
    /* records: A, B, C raw; C freed at EOA (removed), A freed (flagged),
     * then the EOA grows with no alloc (try_extend): B grows */
    haddr_t a = H5FDalloc(fd, H5FD_MEM_DRAW, H5P_DEFAULT, 100);
    haddr_t b = H5FDalloc(fd, H5FD_MEM_OHDR, H5P_DEFAULT, 50);
    haddr_t c = H5FDalloc(fd, H5FD_MEM_DRAW, H5P_DEFAULT, 30);
    CHECK(a == 0 && b == 100 && c == 150);
    CHECK_EQ(hfs_memvfd_raw_count(s), 2);
    CHECK(H5FDfree(fd, H5FD_MEM_DRAW, H5P_DEFAULT, c, 30) >= 0);
    CHECK_EQ(H5FDget_eoa(fd, H5FD_MEM_DEFAULT), 150);
    CHECK_EQ(hfs_memvfd_raw_count(s), 1);
    CHECK(H5FDfree(fd, H5FD_MEM_DRAW, H5P_DEFAULT, a, 100) >= 0);
    CHECK(H5FDset_eoa(fd, H5FD_MEM_DEFAULT, 170) >= 0);
    CHECK(H5FDset_eoa(fd, H5FD_MEM_DEFAULT, SPAN) >= 0);

    static unsigned char model[SPAN], have[SPAN], buf[4096], got[4096];
    size_t bad = 0;
    for (int it = 0; it < 20000; it++) {
        uint64_t lo = rng() % SPAN;
        size_t len = 1 + (size_t)(rng() % ((it % 10) ? 64 : 3000));
        if (lo + len > SPAN) len = (size_t)(SPAN - lo);
        if (rng() % 4 == 0) {
            if (H5FDread(fd, H5FD_MEM_OHDR, H5P_DEFAULT, lo, len, got) < 0) bad++;
            for (size_t i = 0; i < len; i++)
                if (got[i] != (have[lo + i] ? model[lo + i] : 0)) bad++;
            continue;
        }
        for (size_t i = 0; i < len; i++) buf[i] = (unsigned char)rng();
        /* a DRAW write outside any raw record is dropped: model untouched */
        H5FD_mem_t ty = (it % 97 == 0 && lo >= 200) ? H5FD_MEM_DRAW : H5FD_MEM_BTREE;
        if (H5FDwrite(fd, ty, H5P_DEFAULT, lo, len, buf) < 0) bad++;
        if (ty != H5FD_MEM_DRAW)
            for (size_t i = 0; i < len; i++) {
                model[lo + i] = buf[i];
                have[lo + i] = 1;
            }
    }
    CHECK_EQ(bad, 0);
    uint64_t live = hfs_memvfd_meta_bytes(s), want = 0;
    for (size_t i = 0; i < SPAN; i++) want += have[i];
    CHECK_EQ(live, want);
    CHECK(H5FDclose(fd) >= 0);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    CHECK_EQ(img->eof, SPAN);
    CHECK_EQ(img->meta_bytes, want);
    CHECK(img->dropped_writes > 0);
    CHECK_EQ(img->raw_freed, 2);
    CHECK_EQ(img->n_allocs, 2);
    if (img->n_allocs == 2) {
        CHECK_EQ(img->allocs[0].flags, HFS_MEMVFD_ALLOC_FREED);
        CHECK_EQ(img->allocs[1].size, SPAN - 100); /* grown by both set_eoa calls */
        CHECK_EQ(img->allocs[1].flags, HFS_MEMVFD_ALLOC_EXTENDED);
    }
    /* extents are exactly the written runs */
    size_t runs = 0;
    for (size_t i = 0; i < SPAN; i++)
        if (have[i] && (i == 0 || !have[i - 1])) runs++;
    CHECK_EQ(img->n_extents, runs);
    for (size_t i = 0; i < img->n_extents; i++) {
        const hfs_memvfd_extent_t *e = &img->extents[i];
        if (e->addr > 0) CHECK(!have[e->addr - 1]);
        if (e->addr + e->len < SPAN) CHECK(!have[e->addr + e->len]);
        for (uint64_t k = 0; k < e->len; k++)
            if (!have[e->addr + k] || e->bytes[k] != model[e->addr + k]) bad++;
    }
    CHECK_EQ(bad, 0);
    static unsigned char all[SPAN + 10];
    hfs_memvfd_image_read(img, 0, SPAN + 10, all);
    for (size_t i = 0; i < SPAN + 10; i++)
        if (all[i] != (i < SPAN && have[i] ? model[i] : 0)) bad++;
    CHECK_EQ(bad, 0);
    hfs_memvfd_image_read(img, UINT64_MAX - 5, 3, buf); /* no overflow */
    CHECK(buf[0] == 0 && buf[2] == 0);
    hfs_memvfd_image_free(img);
}

/* Windows hold a dataset's regions and nothing else; counting from one
 * H5Dcreate to the next also picks up the global heap collection of a vlen
 * attribute written in between, which is only recognised when written. */
static void test_windows_exclude_gheap(void)
{
    hid_t fapl = hfs_memvfd_fapl();
    hid_t f = H5Fcreate("win", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    hfs_memvfd_use_windows(s);
    hsize_t n = 100;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = skel_dcpl(1, NULL, H5T_NATIVE_INT, NULL);
    size_t a0 = hfs_memvfd_raw_begin(s);
    hid_t d1 = H5Dcreate2(f, "d1", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t a1 = hfs_memvfd_raw_end(s);
    hid_t vt = H5Tcopy(H5T_C_S1);
    H5Tset_size(vt, H5T_VARIABLE);
    hid_t sc = H5Screate(H5S_SCALAR);
    const char *units = "m s-1";
    hid_t at = H5Acreate2(d1, "units", vt, sc, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(at, vt, &units);
    H5Aclose(at);
    size_t b0 = hfs_memvfd_raw_begin(s);
    hid_t d2 = H5Dcreate2(f, "d2", H5T_STD_I32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t b1 = hfs_memvfd_raw_end(s);
    CHECK_EQ(a1 - a0, 1);
    CHECK_EQ(b1 - b0, 1);
    CHECK_EQ(b1 - a1, 2); /* the naive count: the collection + d2 */
    hfs_memvfd_alloc_t r;
    CHECK(hfs_memvfd_raw_get(s, a1, &r) == 0);
    CHECK_EQ(r.flags, HFS_MEMVFD_ALLOC_META); /* not yet known as GHEAP */
    CHECK(hfs_memvfd_raw_get(s, b0, &r) == 0);
    CHECK_EQ(r.addr, H5Dget_offset(d2));
    H5Tclose(vt);
    H5Sclose(sc);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Dclose(d1);
    H5Dclose(d2);
    H5Fclose(f);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    CHECK_EQ(img->n_raw, 3);
    if (img->n_raw == 3) CHECK_EQ(img->raw[a1].flags, HFS_MEMVFD_ALLOC_META | HFS_MEMVFD_ALLOC_GHEAP);
    CHECK_EQ(img->raw_bytes, 800);
    CHECK_EQ(img->dropped_writes, 0);
    hfs_memvfd_image_free(img);
}

/* Latest format, more than 8 attributes: dense storage, and attributes
 * over about 4 KiB become fractal-heap "huge" objects that 1.10.8 writes
 * as H5FD_MEM_DRAW. Windowed mode keeps them; the default mode drops them
 * and says so in dropped_writes. */
static void huge_attrs(int mode, int *nmeta, uint64_t *dropped, int *readback_ok)
{
    enum { NATT = 10, ALEN = 5000 };
    hid_t fapl = hfs_memvfd_fapl();
    H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
    hid_t f = H5Fcreate("huge", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    if (mode) hfs_memvfd_use_windows(s);
    static unsigned char buf[ALEN];
    hsize_t n = ALEN;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5E_BEGIN_TRY
    {
        for (int i = 0; i < NATT; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "att%d", i);
            for (size_t j = 0; j < ALEN; j++) buf[j] = (unsigned char)(i * 31 + j);
            hid_t a = H5Acreate2(g, nm, H5T_STD_U8LE, sp, H5P_DEFAULT, H5P_DEFAULT);
            H5Awrite(a, H5T_NATIVE_UCHAR, buf);
            H5Aclose(a);
        }
        /* and a dataset with its region, in a window */
        hsize_t dn = 1000;
        hid_t dsp = H5Screate_simple(1, &dn, NULL);
        hid_t dcpl = skel_dcpl(1, NULL, H5T_NATIVE_INT, NULL);
        hfs_memvfd_raw_begin(s);
        H5Dclose(H5Dcreate2(g, "d", H5T_STD_I32LE, dsp, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        hfs_memvfd_raw_end(s);
        H5Pclose(dcpl);
        H5Sclose(dsp);
        H5Gclose(g);
        H5Fclose(f);
    }
    H5E_END_TRY;
    H5Sclose(sp);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    *nmeta = 0;
    for (size_t i = 0; i < img->n_raw; i++)
        if (img->raw[i].flags & HFS_MEMVFD_ALLOC_META) (*nmeta)++;
    *dropped = img->dropped_writes;
    if (mode)
        CHECK_EQ(img->raw_bytes, 4000); /* the dataset only */
    else
        CHECK(img->raw_bytes > 4000 + 10 * 5000); /* huge objects count as regions */
    *readback_ok = 0;
    char path[512];
    tmp_path(path, sizeof path, "huge");
    CHECK(write_image(img, path) == 0);
    H5E_BEGIN_TRY
    {
        hid_t rf = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        int good = 0;
        for (int i = 0; rf >= 0 && i < NATT; i++) {
            char nm[16];
            snprintf(nm, sizeof nm, "att%d", i);
            unsigned char in[ALEN];
            hid_t a = H5Aopen_by_name(rf, "g", nm, H5P_DEFAULT, H5P_DEFAULT);
            int ok = a >= 0 && H5Aread(a, H5T_NATIVE_UCHAR, in) >= 0;
            for (size_t j = 0; ok && j < ALEN; j++) ok = in[j] == (unsigned char)(i * 31 + j);
            good += ok;
            H5Aclose(a);
        }
        *readback_ok = good == NATT;
        H5Fclose(rf);
    }
    H5E_END_TRY;
    unlink(path);
    hfs_memvfd_image_free(img);
}

static void test_huge_attributes(void)
{
    int nmeta = -1, ok = 0;
    uint64_t dropped = 99;
    huge_attrs(1, &nmeta, &dropped, &ok);
    CHECK_EQ(nmeta, 10);
    CHECK_EQ(dropped, 0);
    CHECK(ok);
    huge_attrs(0, &nmeta, &dropped, &ok);
    CHECK_EQ(nmeta, 0);
    CHECK(dropped >= 10); /* the loss is visible */
    CHECK(!ok);
}

/* ------------------------------------------------------------------ */

/* 100,000 early-allocated chunks: the skeleton is cheap and the records
 * give every chunk address with no index walk. */
static void big_chunks(H5F_libver_t low, int unlimited, const char *label)
{
    const hsize_t n0 = 10000, n1 = 10000, c0 = 100, c1 = 10; /* 100 x 1000 chunks */
    const size_t ng1 = (size_t)(n1 / c1), nchunks = (size_t)((n0 / c0) * (n1 / c1));
    const uint64_t csize = c0 * c1 * 4;
    double t0 = now_s();
    hid_t fapl = hfs_memvfd_fapl();
    H5Pset_libver_bounds(fapl, low, H5F_LIBVER_LATEST);
    hid_t f = H5Fcreate("big", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    hfs_memvfd_use_windows(s);
    hsize_t d[2] = {n0, n1}, c[2] = {c0, c1}, mx[2] = {H5S_UNLIMITED, n1};
    hid_t sp = H5Screate_simple(2, d, unlimited ? mx : NULL);
    float fill = 0.5f;
    hid_t dcpl = skel_dcpl(2, c, H5T_NATIVE_FLOAT, &fill);
    size_t r0 = hfs_memvfd_raw_begin(s);
    hid_t ds = H5Dcreate2(f, "big", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t r1 = hfs_memvfd_raw_end(s);
    double t1 = now_s();
    CHECK(ds >= 0);
    CHECK(r1 - r0 == nchunks || r1 - r0 == 1);
    /* a few spot checks against the index (each walks it) */
    const size_t probe[] = {0, 1, ng1 - 1, ng1, 12345, 54321, nchunks / 2, nchunks - 2, nchunks - 1};
    const size_t nprobe = sizeof probe / sizeof probe[0];
    size_t bad = 0;
    double t2 = now_s();
    for (size_t p = 0; p < nprobe; p++) {
        size_t k = probe[p];
        uint64_t ca = 0;
        hsize_t off[2] = {(k / ng1) * c0, (k % ng1) * c1};
        haddr_t addr = HADDR_UNDEF;
        hsize_t sz = 0;
        unsigned m;
        if (live_chunk(s, r0, r1, nchunks, k, csize, &ca) < 0 ||
            H5Dget_chunk_info_by_coord(ds, off, &m, &addr, &sz) < 0 || addr != ca || sz != csize)
            bad++;
    }
    double t3 = now_s();
    CHECK_EQ(bad, 0);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Dclose(ds);
    double t4 = now_s();
    CHECK(H5Fclose(f) >= 0);
    H5Pclose(fapl);
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    double t5 = now_s();
    CHECK(img != NULL);
    if (!img) return;
    check_image_shape(img);
    CHECK_EQ(img->dropped_bytes, 0);
    CHECK_EQ(img->raw_freed, 0);
    /* all chunk addresses from the records: increasing, disjoint */
    bad = 0;
    uint64_t prev_end = 0;
    for (size_t k = 0; k < nchunks; k++) {
        uint64_t ca = 0;
        if (chunk_rec(img->raw + r0, r1 - r0, nchunks, k, csize, &ca) < 0 || ca < prev_end) bad++;
        prev_end = ca + csize;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(img->raw_bytes, (uint64_t)n0 * n1 * 4);
    printf("     %s: 100000 chunks in %zu raw record(s): create %.1f ms, close+take %.1f ms, "
           "%zu by_coord checks %.2f ms each; metadata %llu B (%.1f B/chunk) in %zu extents, "
           "eof %llu\n",
           label, r1 - r0, (t1 - t0) * 1e3, (t5 - t4) * 1e3, nprobe, (t3 - t2) * 1e3 / (double)nprobe,
           (unsigned long long)img->meta_bytes, (double)img->meta_bytes / (double)nchunks, img->n_extents,
           (unsigned long long)img->eof);

    /* the metadata alone makes a valid sparse file whose index names the
     * same addresses; one chunk's data reads back */
    char path[512];
    tmp_path(path, sizeof path, "big");
    CHECK(write_image(img, path) == 0);
    size_t k = 54321;
    float cb[100 * 10];
    for (int i = 0; i < 1000; i++) cb[i] = (float)i;
    uint64_t ca = 0;
    CHECK(chunk_rec(img->raw + r0, r1 - r0, nchunks, k, csize, &ca) == 0);
    CHECK(pwrite_at(path, ca, cb, sizeof cb) == 0);
    hid_t rf = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(rf >= 0);
    if (rf >= 0) {
        hid_t rd = H5Dopen2(rf, "big", H5P_DEFAULT);
        CHECK_EQ(num_chunks(rd), nchunks);
        hsize_t start[2] = {(k / ng1) * c0, (k % ng1) * c1}, cnt[2] = {c0, c1};
        hid_t fs = H5Dget_space(rd);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL);
        hid_t ms = H5Screate_simple(2, cnt, NULL);
        float out[1000];
        CHECK(H5Dread(rd, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out) >= 0);
        CHECK(memcmp(out, cb, sizeof cb) == 0);
        H5Sclose(ms);
        H5Sclose(fs);
        H5Dclose(rd);
        H5Fclose(rf);
    }
    unlink(path);
    hfs_memvfd_image_free(img);
}

static void test_100k_chunks_v1btree(void) { big_chunks(H5F_LIBVER_EARLIEST, 0, "v1 B-tree (earliest)"); }
static void test_100k_chunks_implicit(void) { big_chunks(H5F_LIBVER_LATEST, 0, "implicit index (latest)"); }
static void test_100k_chunks_earray(void)
{
    big_chunks(H5F_LIBVER_LATEST, 1, "extensible array (latest, unlimited dim 0)");
}

/* hfs_memvfd_reserve: space at the EOA, 8-aligned, that libhdf5's later
 * allocations come after and the superblock's end of file covers; it reads
 * as zeros, is recorded as a reserved raw allocation outside every window;
 * size 0, an address space run out and a closed file are refused. */
static void test_reserve(void)
{
    hid_t fapl = hfs_memvfd_fapl();
    hid_t f = H5Fcreate("reserve", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hfs_memvfd_t *s = hfs_memvfd_get(f);
    CHECK(s != NULL);
    uint64_t a = 0, b = 0;
    size_t n0 = hfs_memvfd_alloc_count(s), r0 = hfs_memvfd_raw_begin(s);
    CHECK_EQ(hfs_memvfd_reserve(s, 13, &a), 0);
    CHECK_EQ(a % 8, 0);
    CHECK_EQ(hfs_memvfd_reserve(s, 5, &b), 0);
    CHECK(b >= a + 13 && b % 8 == 0);
    CHECK_EQ(hfs_memvfd_raw_end(s), r0); /* no window sees it */
    hfs_memvfd_alloc_t al;
    CHECK_EQ(hfs_memvfd_alloc_count(s), n0 + 2);
    CHECK(hfs_memvfd_alloc_get(s, n0, &al) == 0 && al.addr == a && al.size == 13 &&
          (al.flags & HFS_MEMVFD_ALLOC_RESERVED));
    CHECK(hfs_memvfd_reserve(s, 0, &a) < 0);
    CHECK(hfs_memvfd_reserve(s, UINT64_MAX / 2, &a) < 0);
    CHECK(hfs_memvfd_reserve(s, (uint64_t)INT64_MAX, &a) < 0);
    hid_t sp = H5Screate(H5S_SCALAR); /* libhdf5 allocates after it */
    hid_t at = H5Acreate2(f, "after", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int v = 42;
    H5Awrite(at, H5T_NATIVE_INT, &v);
    H5Aclose(at);
    hid_t g = H5Gcreate2(f, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(g);
    H5Sclose(sp);
    size_t n1 = hfs_memvfd_alloc_count(s);
    for (size_t i = n0 + 2; i < n1; i++)
        if (hfs_memvfd_alloc_get(s, i, &al) == 0) CHECK(al.addr >= b + 5);
    CHECK(n1 > n0 + 2);
    H5Fclose(f);
    uint64_t c;
    CHECK(hfs_memvfd_reserve(s, 8, &c) < 0); /* closed */
    hfs_memvfd_image_t *img = hfs_memvfd_take(s);
    CHECK(img != NULL);
    if (img) {
        CHECK(img->eof >= b + 5);
        uint8_t z[13];
        memset(z, 0xee, sizeof z);
        hfs_memvfd_image_read(img, a, sizeof z, z);
        for (size_t i = 0; i < sizeof z; i++) CHECK_EQ(z[i], 0);
        char path[] = "/tmp/h5l-test-reserve.XXXXXX";
        int fd = mkstemp(path);
        if (fd >= 0) close(fd);
        CHECK(write_image(img, path) == 0);
        hid_t rf = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); /* the file, its end past the reserve, opens */
        CHECK(rf >= 0);
        if (rf >= 0) {
            hid_t ra = H5Aopen(rf, "after", H5P_DEFAULT);
            int got = 0;
            CHECK(ra >= 0 && H5Aread(ra, H5T_NATIVE_INT, &got) >= 0 && got == 42);
            if (ra >= 0) H5Aclose(ra);
            H5Fclose(rf);
        }
        unlink(path);
        hfs_memvfd_image_free(img);
    }
    H5Pclose(fapl);
}

TEST_MAIN(T(test_reserve), T(test_roundtrip_earliest), T(test_roundtrip_latest), T(test_many_files), T(test_raw_never_stored),
          T(test_store_model), T(test_windows_exclude_gheap), T(test_huge_attributes), T(test_alignment),
          T(test_100k_chunks_v1btree), T(test_100k_chunks_implicit), T(test_100k_chunks_earray))
