/* test_lfile.c — the daemon's read path (lfile.h) without FUSE.
 *
 * Why: a snapshot's bytes are served by three paths (skip: one log record
 * covers the block; gather: records that never overlap, read piece by piece
 * for just the requested range; cache: assembled whole and cached), and the
 * kernel asks for any byte range, cut anywhere inside an element. A wrong
 * offset in any path gives a valid HDF5 file with wrong numbers. Checked,
 * with a large and with a tiny cache:
 *   1. the whole canonical image, written to a file and read with libhdf5,
 *      equals a reference computed here from the writes the test made;
 *   2. thousands of random byte ranges (any offset, any length) equal the
 *      same bytes of the whole image;
 *   3. every path was taken (statistics: skipped, gathered, assembled), and
 *      drop-behind advised the kernel to drop the log's read segments;
 *   4. with each allocation of a whole-image read failing in turn
 *      (tests/unit/oom.h; nothing cached, so every block is served again),
 *      the read gives the right bytes or H5L_ENOMEM, and the next read,
 *      memory back, gives the whole image right;
 *   5. a second file whose chunks are thinly spread over the log (z-plane
 *      chunks of x-bands): with a large cache assembled with their
 *      siblings in one pass, right, and so with each allocation failing
 *      in turn; with a tiny cache one by one.
 * The log file is written with libh5log on one rank (MPI singleton). */
#include <mpi.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5log.h"
#include "lfile.h"
#include "tharness.h"
#include "snaphelp.h"
#include "oom.h"

static char g_path[512];

/* var A: contiguous f32 [64,100], 8 rows per put (one record per block) */
#define AR 64
#define AC 100
/* var B: chunked i16 [40,30,20] chunk [8,16,8], slabs of 5 rows (records
 * never overlap, but cut chunks: gather path; edge chunks) */
#define B0 40
#define B1 30
#define B2 20
/* var C: chunked f64 [50,50] chunk [16,16], overlapping boxes over two
 * ticks (cache path) */
#define CN 50
/* var D: contiguous i64 [333] in 1 put (skip path) */
#define DN 333

/* var E: contiguous u8 [4,1048576], one put per row (4 MiB of log: whole
 * 2 MiB segments for drop-behind) */
#define ER 4
#define EC (1 << 20)

/* In a second file: var F, chunked f32 [128,64,64] in z-plane chunks
 * [128,64,1], written as two x-bands: each chunk needs a 4-byte piece of
 * every 256 bytes of the log (2 MiB), so a chunk is assembled with its
 * siblings (lfile.c) when the cache allows a tile. */
#define F0 128
#define F1 64
#define F2 64

static float refA[AR][AC];
static uint8_t refE[ER][EC];
static int16_t refB[B0][B1][B2];
static double refC[CN][CN];
static int64_t refD[DN];
static float refF[F0][F1][F2];
static char g_path2[512];

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return n ? rng % n : 0;
}

static int put_c_box(h5l_file_t *f, int v, double base)
{
    uint64_t s[2] = {rnd(CN), rnd(CN)}, c[2];
    c[0] = 1 + rnd(CN - s[0]);
    c[1] = 1 + rnd(CN - s[1]);
    double *b = malloc(c[0] * c[1] * sizeof *b);
    for (uint64_t i = 0; i < c[0]; i++)
        for (uint64_t j = 0; j < c[1]; j++) {
            double x = base + (double)((s[0] + i) * CN + s[1] + j);
            b[i * c[1] + j] = x;
            refC[s[0] + i][s[1] + j] = x;
        }
    int rc = h5l_put(f, v, s, c, b);
    free(b);
    return rc;
}

static int write_file(void)
{
    h5l_file_t *f;
    int rc = h5l_create(g_path, MPI_COMM_WORLD, NULL, &f);
    if (rc) return rc;
    /* /c is written only in part and has no fill of its own: the rest
     * reads as netCDF's default double fill (NC_FILL_DOUBLE) */
    for (int i = 0; i < CN; i++)
        for (int j = 0; j < CN; j++) refC[i][j] = 9.9692099683868690e+36;
    int da[2], db[3], dc[2], dd, de[2], va, vb, vc, vd, ve;
    h5l_def_dim(f, "ar", AR, &da[0]);
    h5l_def_dim(f, "ac", AC, &da[1]);
    h5l_def_dim(f, "b0", B0, &db[0]);
    h5l_def_dim(f, "b1", B1, &db[1]);
    h5l_def_dim(f, "b2", B2, &db[2]);
    h5l_def_dim(f, "cn", CN, &dc[0]);
    h5l_def_dim(f, "cm", CN, &dc[1]);
    h5l_def_dim(f, "dn", DN, &dd);
    h5l_def_dim(f, "er", ER, &de[0]);
    h5l_def_dim(f, "ec", EC, &de[1]);
    uint64_t chb[3] = {8, 16, 8}, chc[2] = {16, 16};
    rc |= h5l_def_var(f, "/a", H5T_IEEE_F32LE, 2, da, NULL, &va);
    rc |= h5l_def_var(f, "/g/b", H5T_STD_I16LE, 3, db, chb, &vb);
    rc |= h5l_def_var(f, "/c", H5T_IEEE_F64LE, 2, dc, chc, &vc);
    rc |= h5l_def_var(f, "/d", H5T_STD_I64LE, 1, &dd, NULL, &vd);
    rc |= h5l_def_var(f, "/e", H5T_STD_U8LE, 2, de, NULL, &ve);
    for (int i = 0; i < ER && !rc; i++) {
        for (int j = 0; j < EC; j++) refE[i][j] = (uint8_t)(i * 31 + j * 7 + (j >> 12));
        uint64_t s[2] = {(uint64_t)i, 0}, c[2] = {1, EC};
        rc = h5l_put(f, ve, s, c, refE[i]);
    }
    for (int i = 0; i < AR; i++)
        for (int j = 0; j < AC; j++) refA[i][j] = (float)(i * 1000 + j) * 0.25f;
    for (int i = 0; i < AR && !rc; i += 8) {
        uint64_t s[2] = {(uint64_t)i, 0}, c[2] = {8, AC};
        rc = h5l_put(f, va, s, c, refA[i]);
    }
    for (int i = 0; i < B0; i++)
        for (int j = 0; j < B1; j++)
            for (int k = 0; k < B2; k++) refB[i][j][k] = (int16_t)(i * 600 + j * 20 + k - 7000);
    for (int i = 0; i < B0 && !rc; i += 5) {
        uint64_t s[3] = {(uint64_t)i, 0, 0}, c[3] = {5, B1, B2};
        rc = h5l_put(f, vb, s, c, refB[i]);
    }
    for (int n = 0; n < 12 && !rc; n++) rc = put_c_box(f, vc, 1e6 * n);
    for (int i = 0; i < DN; i++) refD[i] = (int64_t)i * 1000003 - 99;
    if (!rc) { /* one record for the whole (one-block) variable: skip path */
        uint64_t s = 0, c = DN;
        rc = h5l_put(f, vd, &s, &c, refD);
    }
    if (!rc) rc = h5l_flush(f);
    for (int n = 0; n < 12 && !rc; n++) rc = put_c_box(f, vc, 5e7 + 1e6 * n);
    if (rc) fprintf(stderr, "writer: %s\n", h5l_errmsg(f));
    int crc = h5l_close(f);
    return rc ? rc : crc;
}

/* Read dataset name of the HDF5 file img and compare with ref (n elements
 * of the given memory type). */
static void check_dataset(hid_t file, const char *name, hid_t mt, const void *ref, size_t n, size_t es)
{
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    CHECK(d >= 0);
    if (d < 0) return;
    void *got = calloc(n, es);
    CHECK(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) >= 0);
    int same = memcmp(got, ref, n * es) == 0;
    if (!same) fprintf(stderr, "  %s differs from the reference\n", name);
    CHECK(same);
    free(got);
    H5Dclose(d);
}

static long stat_of(const char *text, const char *key)
{
    const char *p = strstr(text, "\nfile ");
    p = p ? strstr(p, key) : NULL;
    return p ? atol(p + strlen(key)) : -1;
}

static int write_file2(void)
{
    h5l_file_t *f;
    int rc = h5l_create(g_path2, MPI_COMM_WORLD, NULL, &f);
    if (rc) return rc;
    int df[3], vf;
    h5l_def_dim(f, "f0", F0, &df[0]);
    h5l_def_dim(f, "f1", F1, &df[1]);
    h5l_def_dim(f, "f2", F2, &df[2]);
    uint64_t chf[3] = {F0, F1, 1};
    rc = h5l_def_var(f, "/f", H5T_IEEE_F32LE, 3, df, chf, &vf);
    for (int i = 0; i < F0; i++)
        for (int j = 0; j < F1; j++)
            for (int k = 0; k < F2; k++) refF[i][j][k] = (float)(i * 10000 + j * 100 + k) + 0.5f;
    for (int i = 0; i < F0 && !rc; i += F0 / 2) {
        uint64_t st[3] = {(uint64_t)i, 0, 0}, c[3] = {F0 / 2, F1, F2};
        rc = h5l_put(f, vf, st, c, refF[i]);
    }
    if (!rc) rc = h5l_flush(f);
    if (rc) fprintf(stderr, "writer: %s\n", h5l_errmsg(f));
    int crc = h5l_close(f);
    return rc ? rc : crc;
}

/* The second file through a cache of limit bytes: the image holds /f, and
 * its chunks were assembled with their siblings iff a tile fits a quarter
 * of the cache (2 MiB; never in the gather build, which assembles
 * nothing whole). */
static void siblings_with_cache(size_t limit, int want)
{
    hfs_lfile_t *lf;
    hfs_snap_t *s = snap_open(g_path2, limit, &lf);
    if (!s) return;
    h5l_err_t e = {0};
    size_t eof = (size_t)s->skel->eof;
    uint8_t *img = malloc(eof);
    CHECK_EQ(hfs_snap_read(s, 0, eof, img, &e), (long)eof);
    char ipath[600];
    snprintf(ipath, sizeof ipath, "%s.img", g_path2);
    FILE *fp = fopen(ipath, "wb");
    CHECK(fp && fwrite(img, 1, eof, fp) == eof);
    if (fp) fclose(fp);
    hid_t file = H5Fopen(ipath, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(file >= 0);
    if (file >= 0) {
        check_dataset(file, "/f", H5T_NATIVE_FLOAT, refF, (size_t)F0 * F1 * F2, sizeof(float));
        H5Fclose(file);
    }
    unlink(ipath);
    char *text = hfs_lfile_stats_text();
    long siblings = text ? stat_of(text, "sibling tiles ") : -1;
    if (want)
        CHECK(siblings > 0);
    else
        CHECK_EQ(siblings, 0);
    free(text);
    free(img);
    snap_close(s, lf);
}

static void test_siblings(void)
{
#ifdef LFILE_ALL_GATHER
    siblings_with_cache((size_t)64 << 20, 0);
#else
    siblings_with_cache((size_t)64 << 20, 1);
#endif
    siblings_with_cache(1024, 0);
}

#ifndef LFILE_ALL_GATHER
/* Siblings assembled in one pass, each allocation failing in turn: a
 * fresh cache (and snapshot) for each, so every read assembles; the read
 * gives the right bytes or H5L_ENOMEM, and the next read, memory back,
 * the whole image right. */
static void test_siblings_out_of_memory(void)
{
    hfs_lfile_t *lf;
    hfs_snap_t *s = snap_open(g_path2, (size_t)64 << 20, &lf);
    if (!s) return;
    h5l_err_t e = {0};
    size_t eof = (size_t)s->skel->eof;
    uint8_t *img = malloc(eof), *got = malloc(eof);
    CHECK_EQ(hfs_snap_read(s, 0, eof, img, &e), (long)eof);
    snap_close(s, lf);
    int fired = 1, bad = 0, failed = 0;
    long n;
    for (n = 1; fired && n < 100000; n++) {
        if (!(s = snap_open(g_path2, (size_t)64 << 20, &lf))) break;
        memset(got, 0xA5, eof);
        oom_arm(n);
        long k = hfs_snap_read(s, 0, eof, got, &e);
        fired = oom_off();
        if (k < 0) {
            failed++;
            if (k != H5L_ENOMEM || !fired) {
                fprintf(stderr, "  allocation %ld failing: %ld (%s)\n", n, k, e.msg);
                bad++;
            }
        } else if (k != (long)eof || memcmp(got, img, eof)) {
            fprintf(stderr, "  allocation %ld failing: %ld bytes, not the image\n", n, k);
            bad++;
        }
        if (hfs_snap_read(s, 0, eof, got, &e) != (long)eof || memcmp(got, img, eof)) {
            fprintf(stderr, "  after allocation %ld failed: the next read is wrong\n", n);
            bad++;
        }
        snap_close(s, lf);
    }
    CHECK(!fired && n > 5 && failed > 0);
    CHECK_EQ(bad, 0);
    free(img);
    free(got);
}
#endif

static void run_with_cache(size_t limit)
{
    hfs_lfile_t *lf;
    hfs_snap_t *s = snap_open(g_path, limit, &lf);
    if (!s) return;
    h5l_err_t e = {0};
    size_t eof = (size_t)s->skel->eof;
    uint8_t *img = malloc(eof), *part = malloc(eof);
    CHECK_EQ(hfs_snap_read(s, 0, eof, img, &e), (long)eof);

    /* 1. the image is an HDF5 file holding the reference */
    char ipath[600];
    snprintf(ipath, sizeof ipath, "%s.img", g_path);
    FILE *fp = fopen(ipath, "wb");
    CHECK(fp && fwrite(img, 1, eof, fp) == eof);
    if (fp) fclose(fp);
    hid_t file = H5Fopen(ipath, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(file >= 0);
    if (file >= 0) {
        check_dataset(file, "/a", H5T_NATIVE_FLOAT, refA, AR * AC, sizeof(float));
        check_dataset(file, "/g/b", H5T_NATIVE_INT16, refB, B0 * B1 * B2, sizeof(int16_t));
        check_dataset(file, "/c", H5T_NATIVE_DOUBLE, refC, CN * CN, sizeof(double));
        check_dataset(file, "/d", H5T_NATIVE_INT64, refD, DN, sizeof(int64_t));
        check_dataset(file, "/e", H5T_NATIVE_UINT8, refE, (size_t)ER * EC, 1);
        H5Fclose(file);
    }
    unlink(ipath);

    /* 1b. the padding of edge chunks is zero (docs: stored full-size,
     * padded with zeros), whichever path served them */
    long padbad = 0, padded = 0;
    for (size_t i = 0; i < s->skel->nregions; i++)
    for (uint64_t x = s->skel->regions[i].addr; x < s->skel->regions[i].addr + s->skel->regions[i].len;) {
        /* each block, a run region's one by one (chunk indexes of the daemon's) */
        const hfs_region_t *run = &s->skel->regions[i];
        hfs_region_t one = run->bt ? hfs_skel_run_block(s->skel, run, x) : *run;
        const hfs_region_t *g = &one;
        x = one.addr + one.len;
        const hfs_svar_t *v = &s->skel->vars[g->var];
        if (!v->chunked) continue;
        uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS], idx[H5L_MAX_DIMS] = {0};
        hfs_skel_block_box(v, g->blk, st, ct);
        for (uint64_t e = 0; e < g->len / v->esize; e++) {
            uint64_t rem = e;
            int inside = 1;
            for (int d = (int)v->ndims - 1; d >= 0; d--) {
                idx[d] = rem % v->block[d];
                rem /= v->block[d];
                inside &= idx[d] < ct[d];
            }
            if (inside) continue;
            padded++;
            for (size_t k = 0; k < v->esize; k++) padbad += img[g->addr + e * v->esize + k] != 0;
        }
    }
    CHECK(padded > 0);
    CHECK_EQ(padbad, 0);

    /* 2. any byte range equals the same bytes of the whole image */
    int bad = 0;
    for (int i = 0; i < 4000; i++) {
        size_t off = (size_t)rnd(eof), len = 1 + (size_t)rnd(i % 4 ? 9000 : 70000);
        if (i % 5 == 0) off &= ~(size_t)4095; /* page-aligned, as the kernel asks */
        long n = hfs_snap_read(s, off, len, part, &e);
        size_t want = len < eof - off ? len : eof - off;
        if (n != (long)want || memcmp(part, img + off, want) != 0) bad++;
    }
    CHECK_EQ(bad, 0);

    /* 3. every path was taken */
    char *text = hfs_lfile_stats_text();
    CHECK(text != NULL);
    if (text) {
        long skipped = stat_of(text, " B, skipped "), gathered = stat_of(text, "(gathered "),
             assembled = stat_of(text, ", assembled ");
        CHECK(gathered > 0);
        CHECK(skipped > gathered); /* the skip path proper served some bytes too */
#ifdef LFILE_ALL_GATHER
        /* built with HFS_ASSEMBLE_MAX 0: no block is ever assembled whole,
         * edge chunks and overlapping records included */
        CHECK_EQ(assembled, 0);
#else
        CHECK(assembled > 0);
#endif
        /* a closed file: the log's fully read 2 MiB segments were dropped */
        CHECK(stat_of(text, "log dropped ") >= (long)(2 << 20));
        if (gathered <= 0 || assembled <= 0) fprintf(stderr, "%s", text);
        free(text);
    }
    free(img);
    free(part);
    snap_close(s, lf);
}

/* 4. */
static void test_read_out_of_memory(void)
{
    hfs_lfile_t *lf;
    hfs_snap_t *s = snap_open(g_path, 1024, &lf);
    if (!s) return;
    h5l_err_t e = {0};
    size_t eof = (size_t)s->skel->eof;
    uint8_t *img = malloc(eof), *got = malloc(eof);
    CHECK_EQ(hfs_snap_read(s, 0, eof, img, &e), (long)eof);
    int fired = 1, bad = 0, failed = 0;
    long n;
    for (n = 1; fired && n < 100000; n++) {
        memset(got, 0xA5, eof);
        oom_arm(n);
        long k = hfs_snap_read(s, 0, eof, got, &e);
        fired = oom_off();
        if (k < 0) {
            failed++;
            if (k != H5L_ENOMEM || !fired) {
                fprintf(stderr, "  allocation %ld failing: %ld (%s)\n", n, k, e.msg);
                bad++;
            }
        } else if (k != (long)eof || memcmp(got, img, eof)) {
            fprintf(stderr, "  allocation %ld failing: %ld bytes, not the image\n", n, k);
            bad++;
        }
        if (hfs_snap_read(s, 0, eof, got, &e) != (long)eof || memcmp(got, img, eof)) {
            fprintf(stderr, "  after allocation %ld failed: the next read is wrong\n", n);
            bad++;
        }
    }
    CHECK(!fired && n > 5 && failed > 0);
    CHECK_EQ(bad, 0);
    free(img);
    free(got);
    snap_close(s, lf);
}

static void test_large_cache(void) { run_with_cache((size_t)64 << 20); }
static void test_tiny_cache(void) { run_with_cache(1024); }

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/h5l-test-lfile.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/f.h5", dir);
    snprintf(g_path2, sizeof g_path2, "%s/g.h5", dir);
    int rc = write_file();
    if (!rc) rc = write_file2();
    if (rc) {
        fprintf(stderr, "cannot write %s\n0 passed, 1 failed\n", g_path);
        MPI_Finalize();
        return 1;
    }
    static const th_test_t tests[] = {{"test_large_cache", test_large_cache},
                                      {"test_tiny_cache", test_tiny_cache},
                                      {"test_read_out_of_memory", test_read_out_of_memory},
                                      {"test_siblings", test_siblings},
#ifndef LFILE_ALL_GATHER /* (no block is assembled there: no siblings) */
                                      {"test_siblings_out_of_memory", test_siblings_out_of_memory},
#endif
    };
    int failed = th_run(tests, (int)(sizeof tests / sizeof tests[0]));
    unlink(g_path);
    unlink(g_path2);
    rmdir(dir);
    MPI_Finalize();
    return failed ? 1 : 0;
}
