/* test_canon.c — the canonical file at scale (libcore canon.c, fused/skel.c).
 *
 * Why: canon.c writes the dimension-scale attributes (DIMENSION_LIST,
 * REFERENCE_LIST) itself instead of calling H5DSattach_scale per variable
 * (quadratic), and the skeleton allocates only the chunks that hold data
 * (of chunked variables whose shape has more than 2^16 chunks).
 * Both are easy to get subtly wrong in ways that still give a valid file:
 *   1. test_scales_like_h5ds: a schema with a coordinate variable,
 *      placeholder scales, a variable using one dimension twice, a variable
 *      in a group, a scalar and a variable whose dimension has no scale is
 *      built by canon into a file; a copy gets its scale attributes
 *      deleted and re-made with H5DSattach_scale, the way canon did before;
 *      every dataset's scale attributes (file type, shape, references
 *      resolved to names, dimension indices) must be the same, and H5DS's
 *      own readers must see the attachments;
 *   2. test_many_vars: 20,000 variables sharing two dimensions: the
 *      skeleton builds (it used to fail or take many seconds);
 *   3. test_sparse: a variable whose 2^30 possible chunks hold data in 3:
 *      the skeleton has exactly 3 raw blocks for it (one run of two behind
 *      the chunk index the daemon writes), and the image read with libhdf5
 *      gives the data there and the fill value elsewhere;
 *   4. test_build_out_of_memory: a skeleton build (sparse variables, own
 *      roots, a group, attributes, scales) with each of the daemon's
 *      allocations failing in turn (tests/unit/oom.h): the build fails
 *      with a reason naming the file, leaves no HDF5 object open, and a
 *      build once memory is back has the reference's bytes;
 *   5. test_too_big: a variable that grows to 2^63 bytes ([time, y] of
 *      int32 with y = 2^24 and time grown to 2^37; past 2^64 chunks their numbers
 *      wrapped in the daemon, which then served data at wrong places or
 *      none) is refused at that tick with a reason, and built before it.
 * Log files are written with libh5log on one rank (MPI singleton). */
#include <mpi.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5log/canon.h"
#include "h5log.h"
#include "schema.h"
#include "lfile.h"
#include "skel.h"
#include "tharness.h"
#include "snaphelp.h"
#include "oom.h"

static char g_dir[256];

#define W(call)                                                                                                        \
    do {                                                                                                               \
        if ((call) != 0) {                                                                                             \
            fprintf(stderr, "  writer: %s: %s\n", #call, h5l_errmsg(f));                                               \
            h5l_close(f);                                                                                              \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)

/* The schema of test 1 (see the top of the file). */
static int write_schema_file(const char *path)
{
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f)) return -1;
    int t, x, y, z, lev, id;
    W(h5l_def_dim(f, "time", H5L_UNLIMITED, &t));
    W(h5l_def_dim(f, "x", 4, &x));
    W(h5l_def_dim(f, "y", 3, &y));
    W(h5l_def_dim(f, "z", 2, &z));
    W(h5l_def_dim(f, "lev", 5, &lev));
    int d_tx[2] = {t, x}, d_yy[2] = {y, y}, d_txy[3] = {t, x, y}, d_zx[2] = {z, x};
    W(h5l_def_var(f, "/time", H5T_NATIVE_DOUBLE, 1, &t, NULL, &id));
    W(h5l_def_var(f, "/a", H5T_NATIVE_FLOAT, 2, d_tx, NULL, &id));
    W(h5l_put_att_text(f, id, "units", "K"));
    W(h5l_def_var(f, "/yy", H5T_NATIVE_INT, 2, d_yy, NULL, &id));
    W(h5l_def_var(f, "/g/b", H5T_NATIVE_SHORT, 3, d_txy, NULL, &id));
    W(h5l_def_var(f, "/zx", H5T_NATIVE_FLOAT, 2, d_zx, NULL, &id)); /* before its coordinate variable */
    W(h5l_def_var(f, "/z", H5T_NATIVE_FLOAT, 1, &z, NULL, &id));
    W(h5l_def_var(f, "/s", H5T_NATIVE_DOUBLE, 0, NULL, NULL, &id));
    W(h5l_def_grp(f, "/lev", &id)); /* takes the name of dimension lev: no scale */
    W(h5l_def_var(f, "/nolev", H5T_NATIVE_FLOAT, 1, &lev, NULL, &id));
    W(h5l_def_var(f, "/x1", H5T_NATIVE_FLOAT, 1, &x, NULL, &id)); /* 1-D, not a coordinate variable */
    W(h5l_flush(f));
    return h5l_close(f);
}

/* The scale attributes of one dataset as text: types, shapes and the
 * references resolved to object names. */
static void describe(hid_t file, hid_t ds, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    static const char *names[] = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid"};
    for (int a = 0; a < 5; a++) {
        if (H5Aexists(ds, names[a]) <= 0) continue;
        hid_t at = H5Aopen(ds, names[a], H5P_DEFAULT);
        hid_t ft = H5Aget_type(at), sp = H5Aget_space(at);
        hssize_t np = H5Sget_simple_extent_npoints(sp);
        int nd = H5Sget_simple_extent_ndims(sp);
        n += (size_t)snprintf(out + n, cap - n, "%s: class %d size %zu rank %d n %lld", names[a], (int)H5Tget_class(ft),
                              H5Tget_size(ft), nd, (long long)np);
        if (a == 0) {
            hid_t vt = H5Tvlen_create(H5T_STD_REF_OBJ);
            hvl_t *v = calloc((size_t)np, sizeof *v);
            CHECK(H5Tequal(ft, vt) > 0);
            CHECK(H5Aread(at, vt, v) >= 0);
            for (hssize_t i = 0; i < np; i++)
                for (size_t j = 0; j < v[i].len; j++) {
                    char nm[256] = "";
                    H5Rget_name(file, H5R_OBJECT, (hobj_ref_t *)v[i].p + j, nm, sizeof nm);
                    n += (size_t)snprintf(out + n, cap - n, " [%lld]%s", (long long)i, nm);
                }
            H5Dvlen_reclaim(vt, sp, H5P_DEFAULT, v);
            free(v);
            H5Tclose(vt);
        } else if (a == 1) {
            typedef struct {
                hobj_ref_t ref;
                int dim;
            } ent_t;
            hid_t ct = H5Tcreate(H5T_COMPOUND, sizeof(ent_t));
            H5Tinsert(ct, "dataset", HOFFSET(ent_t, ref), H5T_STD_REF_OBJ);
            H5Tinsert(ct, "dimension", HOFFSET(ent_t, dim), H5T_NATIVE_INT);
            CHECK(H5Tequal(ft, ct) > 0);
            ent_t *e = calloc((size_t)np, sizeof *e);
            CHECK(H5Aread(at, ct, e) >= 0);
            for (hssize_t i = 0; i < np; i++) {
                char nm[256] = "";
                H5Rget_name(file, H5R_OBJECT, &e[i].ref, nm, sizeof nm);
                n += (size_t)snprintf(out + n, cap - n, " (%s,%d)", nm, e[i].dim);
            }
            free(e);
            H5Tclose(ct);
        }
        n += (size_t)snprintf(out + n, cap - n, "; ");
        H5Sclose(sp);
        H5Tclose(ft);
        H5Aclose(at);
    }
}

typedef struct visit {
    hid_t a, b;
    int ndatasets, nattached;
} visit_t;

static herr_t cmp_one(hid_t obj, const char *name, const H5O_info_t *info, void *ctx)
{
    (void)obj;
    visit_t *v = ctx;
    if (info->type != H5O_TYPE_DATASET) return 0;
    hid_t da = H5Dopen2(v->a, name, H5P_DEFAULT), db = H5Dopen2(v->b, name, H5P_DEFAULT);
    CHECK(da >= 0 && db >= 0);
    static char ta[1 << 14], tb[1 << 14];
    describe(v->a, da, ta, sizeof ta);
    describe(v->b, db, tb, sizeof tb);
    if (strcmp(ta, tb)) fprintf(stderr, "  /%s:\n    direct: %s\n    H5DS:   %s\n", name, ta, tb);
    CHECK(strcmp(ta, tb) == 0);
    v->ndatasets++;
    int rank = H5Sget_simple_extent_ndims(H5Dget_space(da)); /* leaks a tiny id: test only */
    if (H5Aexists(da, "DIMENSION_LIST") > 0)
        for (int k = 0; k < rank; k++) {
            CHECK_EQ(H5DSget_num_scales(da, (unsigned)k), 1);
            v->nattached++;
        }
    H5Dclose(da);
    H5Dclose(db);
    return 0;
}

/* Re-make the scale attributes of file with H5DSattach_scale, variable by
 * variable in creation order, dimension by dimension: what canon.c did
 * before it wrote them directly. */
static herr_t strip_one(hid_t obj, const char *name, const H5O_info_t *info, void *ctx)
{
    (void)ctx;
    if (info->type != H5O_TYPE_DATASET) return 0;
    hid_t d = H5Dopen2(obj, name, H5P_DEFAULT);
    if (H5Aexists(d, "DIMENSION_LIST") > 0) CHECK(H5Adelete(d, "DIMENSION_LIST") >= 0);
    if (H5Aexists(d, "REFERENCE_LIST") > 0) CHECK(H5Adelete(d, "REFERENCE_LIST") >= 0);
    H5Dclose(d);
    return 0;
}

static const char *const attached[][4] = {
    /* variable, its dimensions' scales (in canon's creation order) */
    {"/a", "/time", "/x", NULL}, {"/yy", "/y", "/y", NULL}, {"/g/b", "/time", "/x", "/y"},
    {"/zx", "/z", "/x", NULL},   {"/x1", "/x", NULL, NULL},
};

static void test_scales_like_h5ds(void)
{
    char log[300], fa[300], fb[300];
    snprintf(log, sizeof log, "%s/schema.h5", g_dir);
    snprintf(fa, sizeof fa, "%s/direct.h5", g_dir);
    snprintf(fb, sizeof fb, "%s/h5ds.h5", g_dir);
    CHECK_EQ(write_schema_file(log), 0);
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(log, &r, &e), 0);
    if (!r) return;
    const h5l_schema_t *s = h5l_reader_schema(r);
    const char *out[2] = {fa, fb};
    for (int i = 0; i < 2; i++) {
        hid_t fcpl = h5l_canon_fcpl();
        hid_t f = H5Fcreate(out[i], H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
        CHECK_EQ(h5l_canon_build(f, s, h5l_reader_ntick(r), H5L_ALLOC_NONE, NULL, NULL, &e), 0);
        H5Pclose(fcpl);
        H5Fclose(f);
    }
    h5l_reader_close(r);
    hid_t b = H5Fopen(fb, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(H5Ovisit(b, H5_INDEX_NAME, H5_ITER_INC, strip_one, NULL) >= 0);
    for (size_t i = 0; i < sizeof attached / sizeof *attached; i++) {
        hid_t d = H5Dopen2(b, attached[i][0], H5P_DEFAULT);
        for (unsigned k = 0; k < 3 && attached[i][k + 1]; k++) {
            hid_t sc = H5Dopen2(b, attached[i][k + 1], H5P_DEFAULT);
            CHECK(H5DSattach_scale(d, sc, k) >= 0);
            H5Dclose(sc);
        }
        H5Dclose(d);
    }
    H5Fclose(b);
    visit_t v = {H5Fopen(fa, H5F_ACC_RDONLY, H5P_DEFAULT), H5Fopen(fb, H5F_ACC_RDONLY, H5P_DEFAULT), 0, 0};
    CHECK(v.a >= 0 && v.b >= 0);
    CHECK(H5Ovisit(v.a, H5_INDEX_NAME, H5_ITER_INC, cmp_one, &v) >= 0);
    CHECK_EQ(v.ndatasets, 11); /* 9 variables, placeholders x and y */
    CHECK_EQ(v.nattached, 10); /* a 2, yy 2, g/b 3, zx 2, x1 1 */
    H5Fclose(v.a);
    H5Fclose(v.b);
}

static int write_many(const char *path, int n)
{
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f)) return -1;
    int dims[2], id;
    W(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    W(h5l_def_dim(f, "x", 4, &dims[1]));
    uint64_t chunk[2] = {1, 4};
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "/v%05d", i);
        W(h5l_def_var(f, name, H5T_NATIVE_FLOAT, 2, dims, chunk, &id));
        float row[4] = {(float)i, 1, 2, 3};
        uint64_t st[2] = {0, 0}, ct[2] = {1, 4};
        W(h5l_put(f, id, st, ct, row));
    }
    W(h5l_flush(f));
    return h5l_close(f);
}

static void test_many_vars(void)
{
    char log[300];
    snprintf(log, sizeof log, "%s/many.h5", g_dir);
    CHECK_EQ(write_many(log, 20000), 0);
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(log, &r, &e), 0);
    if (!r) return;
    hfs_skel_t *k = NULL;
    int rc = hfs_skel_build(r, h5l_reader_ntick(r), &k, &e);
    if (rc) fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ(rc, 0);
    if (k) {
        fprintf(stderr, "  20000 variables: skeleton built in %.3f s, %zu regions, %llu bytes\n",
                (double)k->build_ns / 1e9, k->nregions, (unsigned long long)k->eof);
        CHECK_EQ(k->nregions, 20000);
        /* its time is a benchmark's (make bench-scale), not a check: on a
         * loaded machine any bound here fails for the wrong reason */
    }
    hfs_skel_unref(k);
    h5l_reader_close(r);
    unlink(log);
}

/* Three rows of a [time, 64] int32 variable, chunk (16, 64), fill -1: in
 * chunk rows 0, 2^29 and 2^30 - 1 of 2^30. */
static const uint64_t sparse_rows[3] = {3, 1ull << 33, (1ull << 34) - 1};

static int32_t sparse_value(uint64_t row, int j) { return (int32_t)(row % 1000 * 100 + (uint64_t)j); }

static int write_sparse(const char *path)
{
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f)) return -1;
    int dims[2], id, fill = -1;
    W(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    W(h5l_def_dim(f, "x", 64, &dims[1]));
    uint64_t chunk[2] = {16, 64};
    W(h5l_def_var(f, "/s", H5T_NATIVE_INT32, 2, dims, chunk, &id));
    W(h5l_def_var_fill(f, id, &fill));
    for (int r = 0; r < 3; r++) {
        int32_t row[64];
        for (int j = 0; j < 64; j++) row[j] = sparse_value(sparse_rows[r], j);
        uint64_t st[2] = {sparse_rows[r], 0}, ct[2] = {1, 64};
        W(h5l_put(f, id, st, ct, row));
    }
    W(h5l_flush(f));
    return h5l_close(f);
}

/* Rows [row, row + n) of /s in the HDF5 file img. */
static int read_rows(hid_t file, uint64_t row, int n, int32_t *out)
{
    hid_t d = H5Dopen2(file, "/s", H5P_DEFAULT);
    hid_t fs = d < 0 ? -1 : H5Dget_space(d);
    hsize_t st[2] = {row, 0}, ct[2] = {(hsize_t)n, 64};
    hid_t ms = H5Screate_simple(2, ct, NULL);
    int bad = fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, ct, NULL) < 0 ||
              H5Dread(d, H5T_NATIVE_INT32, ms, fs, H5P_DEFAULT, out) < 0;
    H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (d >= 0) H5Dclose(d);
    return bad ? -1 : 0;
}

static void test_sparse(void)
{
    char log[300], ipath[320];
    snprintf(log, sizeof log, "%s/sparse.h5", g_dir);
    snprintf(ipath, sizeof ipath, "%s/sparse.img", g_dir);
    CHECK_EQ(write_sparse(log), 0);
    hfs_lfile_t *lf;
    hfs_snap_t *s = snap_open(log, (size_t)16 << 20, &lf);
    if (!s) return;
    h5l_err_t e = {0};
    const hfs_skel_t *k = s->skel;
    fprintf(stderr, "  sparse: skeleton built in %.3f s, %llu bytes, %zu regions\n", (double)k->build_ns / 1e9,
            (unsigned long long)k->eof, k->nregions);
    /* exactly the 3 chunks with data, at their block indices: the first
     * where libhdf5 put it, the other two in a run after the index the
     * daemon writes for them (btree.h) */
    CHECK_EQ(k->nregions, 2);
    CHECK_EQ(k->nbts, 1);
    uint64_t want_blk[3] = {0, 1ull << 29, (1ull << 30) - 1};
    hfs_region_t blocks[3];
    size_t nb = 0;
    for (size_t i = 0; i < k->nregions; i++)
        for (uint64_t x = k->regions[i].addr; nb < 3 && x < k->regions[i].addr + k->regions[i].len; nb++) {
            blocks[nb] = k->regions[i].bt ? hfs_skel_run_block(k, &k->regions[i], x) : k->regions[i];
            x = blocks[nb].addr + blocks[nb].len;
        }
    CHECK_EQ(nb, 3);
    for (size_t i = 0; i < nb; i++) {
        const hfs_svar_t *v = &k->vars[blocks[i].var];
        CHECK_EQ(v->nblocks, 1ull << 30);
        CHECK_EQ(blocks[i].len, 16 * 64 * 4);
        CHECK_EQ(blocks[i].blk, want_blk[i]);
    }
    CHECK(k->eof < (1u << 20));
    size_t eof = (size_t)k->eof;
    uint8_t *img = malloc(eof);
    CHECK_EQ(hfs_snap_read(s, 0, eof, img, &e), (long)eof);
    FILE *fp = fopen(ipath, "wb");
    CHECK(fp && fwrite(img, 1, eof, fp) == eof);
    if (fp) fclose(fp);
    free(img);
    hid_t file = H5Fopen(ipath, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(file >= 0);
    if (file >= 0) {
        /* around each row with data (rows of the same chunk: fill), and
         * rows of chunks not in the file (fill) */
        uint64_t from[5] = {0, (1ull << 33) - 2, (1ull << 34) - 4, 1000, 1ull << 40 >> 8};
        int32_t got[8 * 64];
        long bad = 0;
        for (int f = 0; f < 5; f++) {
            int n = (1ull << 34) - from[f] < 8 ? 4 : 8;
            memset(got, 0x55, sizeof got); /* a read that fills nothing fails */
            CHECK_EQ(read_rows(file, from[f], n, got), 0);
            for (int r = 0; r < n; r++) {
                uint64_t row = from[f] + (uint64_t)r;
                int data = row == sparse_rows[0] || row == sparse_rows[1] || row == sparse_rows[2];
                for (int j = 0; j < 64; j++) bad += got[r * 64 + j] != (data ? sparse_value(row, j) : -1);
            }
        }
        CHECK_EQ(bad, 0);
        H5Fclose(file);
    }
    snap_close(s, lf);
}

/* The sparse variable of write_sparse, a second one (an own root in a
 * closed skeleton), a small chunked one, a contiguous one in a group and
 * attributes. */
static int write_mixed(const char *path)
{
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f)) return -1;
    int dims[2], s, t, u, c, fill = -1;
    W(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    W(h5l_def_dim(f, "x", 64, &dims[1]));
    uint64_t chunk[2] = {16, 64}, small[2] = {4, 64};
    W(h5l_def_var(f, "/s", H5T_NATIVE_INT32, 2, dims, chunk, &s));
    W(h5l_def_var_fill(f, s, &fill));
    W(h5l_def_var(f, "/t", H5T_NATIVE_INT32, 2, dims, chunk, &t));
    W(h5l_def_var(f, "/u", H5T_NATIVE_INT32, 2, dims, small, &u));
    W(h5l_def_var(f, "/g/c", H5T_NATIVE_INT32, 1, &dims[1], NULL, &c));
    W(h5l_put_att_text(f, s, "units", "K"));
    int32_t row[64];
    for (int r = 0; r < 3; r++) {
        for (int j = 0; j < 64; j++) row[j] = sparse_value(sparse_rows[r], j);
        uint64_t st[2] = {sparse_rows[r], 0}, ct[2] = {1, 64};
        W(h5l_put(f, s, st, ct, row));
        W(h5l_put(f, t, st, ct, row));
        uint64_t su[2] = {(uint64_t)r * 5, 0};
        W(h5l_put(f, u, su, ct, row));
    }
    uint64_t s1 = 0, c1 = 64;
    W(h5l_put(f, c, &s1, &c1, row));
    W(h5l_flush(f));
    return h5l_close(f);
}

static void test_build_out_of_memory(void)
{
    char log[300];
    snprintf(log, sizeof log, "%s/mixed.h5", g_dir);
    hfs_skel_cancel(0); /* (test_sparse's snapshots stopped the daemon's side: builds cancelled since) */
    CHECK_EQ(write_mixed(log), 0);
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(log, &r, &e), 0);
    if (!r) return;
    uint64_t tick = h5l_reader_ntick(r);
    hfs_skel_t *ref = NULL;
    CHECK_EQ(hfs_skel_build(r, tick, &ref, &e), 0);
    if (!ref) {
        fprintf(stderr, "  %s\n", e.msg);
        h5l_reader_close(r);
        return;
    }
    CHECK(ref->nbts >= 2); /* own roots in play */
    uint8_t *want = malloc((size_t)ref->eof), *got = malloc((size_t)ref->eof);
    CHECK_EQ(hfs_skel_meta_read(ref, 0, (size_t)ref->eof, want), 0);
    int fired = 1, bad = 0;
    long n;
    for (n = 1; fired && n < 100000; n++) {
        hfs_skel_t *k = NULL;
        oom_arm(n);
        int rc = hfs_skel_build(r, tick, &k, &e);
        fired = oom_off();
        if (rc) {
            if (!fired || !strstr(e.msg, log)) {
                fprintf(stderr, "  allocation %ld failing: rc %d, reason '%s'\n", n, rc, e.msg);
                bad++;
            }
        } else if (k->eof != ref->eof || k->fallback || hfs_skel_meta_read(k, 0, (size_t)k->eof, got) ||
                   memcmp(got, want, (size_t)k->eof)) {
            fprintf(stderr, "  allocation %ld failing: a build unlike the reference (%s)\n", n,
                    k->fallback ? k->fallback : "other bytes");
            bad++;
        }
        hfs_skel_unref(k);
        ssize_t open_now = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
        if (open_now != 0) {
            fprintf(stderr, "  allocation %ld failing: %zd HDF5 objects left open\n", n, open_now);
            bad++;
            break; /* (each later build would count them again) */
        }
    }
    CHECK(!fired && n > 20);
    CHECK_EQ(bad, 0);
    CHECK_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0); /* no file or object left open by a failed build */
    free(want);
    free(got);
    hfs_skel_unref(ref);
    h5l_reader_close(r);
    unlink(log);
}

/* The schema of test 5, built from ops (libh5log's writer may refuse to
 * write such a file): tick 1 /v [time, y] int32, chunk (1, 1), time 0 and
 * y 2^24 long; tick 2 time grows to 2^37 - 1 (2^63 - 2^26 bytes), tick 3
 * to 2^37 (2^63 bytes). */
static void test_too_big(void)
{
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    h5l_type_t i32 = {H5L_CLASS_INT, 4, 1, 0};
    uint32_t dimids[2] = {0, 1};
    uint64_t chunk[2] = {1, 1};
    int32_t fill = -1;
    h5l_op_t ops[] = {{.kind = H5L_OP_DIM, .id = 0, .name = "time", .len = 0, .flags = 1},
                      {.kind = H5L_OP_DIM, .id = 1, .name = "y", .len = 1u << 24},
                      {.kind = H5L_OP_VAR, .id = 1, .name = "/v", .type = i32, .flags = 1, .ndims = 2,
                       .dimids = dimids, .chunk = chunk, .data = &fill, .data_len = 4}};
    h5l_err_t e = {0};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) CHECK_EQ(h5l_schema_apply(&s, 1, &ops[i], &e), H5L_OK);
    h5l_op_t grow = {.kind = H5L_OP_DIMLEN, .id = 0, .len = (1ull << 37) - 1};
    CHECK_EQ(h5l_schema_apply(&s, 2, &grow, &e), H5L_OK);
    grow.len = 1ull << 37;
    CHECK_EQ(h5l_schema_apply(&s, 3, &grow, &e), H5L_OK);
    for (uint64_t tick = 1; tick <= 3; tick++) {
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        H5Pset_fapl_core(fapl, 1 << 20, 0);
        hid_t file = H5Fcreate("too_big.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
        H5Pclose(fapl);
        CHECK(file >= 0);
        memset(&e, 0, sizeof e);
        int rc = h5l_canon_build(file, &s, tick, H5L_ALLOC_CHUNKS, NULL, NULL, &e);
        if (tick < 3) {
            CHECK_EQ(rc, H5L_OK);
        } else {
            CHECK_EQ(rc, H5L_ERANGE);
            CHECK(strstr(e.msg, "'/v'") && strstr(e.msg, "2^63") && strstr(e.msg, "tick 3"));
            fprintf(stderr, "  refused: %s\n", e.msg);
        }
        H5Fclose(file);
    }
    h5l_schema_free(&s);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    snprintf(g_dir, sizeof g_dir, "/tmp/h5l-test-canon.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    static const th_test_t tests[] = {{"test_scales_like_h5ds", test_scales_like_h5ds},
                                      {"test_many_vars", test_many_vars},
                                      {"test_sparse", test_sparse},
                                      {"test_build_out_of_memory", test_build_out_of_memory},
                                      {"test_too_big", test_too_big}};
    int failed = th_run(tests, sizeof tests / sizeof *tests);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    MPI_Finalize();
    return failed ? 1 : 0;
}
