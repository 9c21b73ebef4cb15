/* bench_write.c — write benchmark: libh5log against native parallel HDF5 and
 * raw MPI-IO, on the same data and the same access pattern.
 *
 *   mpirun -np P bench_write --pattern a|b|c --impl h5log|hdf5|mpiio --dir DIR
 *          [--size N] [--nvars V] [--steps T] [--verify] [--keep] [--cold]
 *
 * Patterns (N defaults to 512, V to 1000, T to 100; float32 everywhere):
 *   a  one [N,N,N] variable; rank r writes rows r*N/P..(r+1)*N/P of dim 0,
 *      one contiguous slab, with one call.
 *   b  the same variable decomposed along the last dim: rank r owns
 *      x[:, :, r*N/P:(r+1)*N/P]. h5log: N puts of [1,N,N/P] and one flush;
 *      hdf5: one collective H5Dwrite of the [N,N,N/P] hyperslab; mpiio: an
 *      MPI subarray file view and one MPI_File_write_all (the ceiling for
 *      writing the canonical layout).
 *   c  V variables [time(unlimited),256], T steps; at every step every
 *      variable gets one row, written by rank (v+t)%P. h5log: h5l_put per row
 *      and one h5l_flush per step; hdf5: chunked [1,256] datasets, a
 *      collective H5Dset_extent and one collective H5Dwrite per variable per
 *      step (empty selection on the ranks that do not own the row); mpiio:
 *      each step appended at a running offset (MPI_Exscan), one
 *      MPI_File_write_at_all per step.
 * h5log uses h5l_iput (zero-copy) for a and b, h5l_put for c, default
 * options. Native HDF5 uses the MPI-IO driver, collective transfers,
 * collective metadata and no fill values. MPI-IO writes a plain file.
 *
 * Timing: the data is generated before the clock starts (every page touched)
 * and the page cache warmed (warm_memory; --cold skips it); after a barrier
 * each rank times from before the file is created to after it is closed.
 * The benchmark never syncs (h5l_close does fsync the file itself: that is
 * part of its cost). `seconds` is the maximum over ranks, and so is each
 * phase in `phases` (so phases of different ranks need not add up).
 *
 * Output: one JSON object on one line from rank 0. --verify (outside the
 * timing) reads the file back on rank 0 and checks every element; --keep
 * leaves the file in DIR. On any failure the reason goes to stderr and the
 * job is aborted with a non-zero status. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log.h"
#include "h5log_reader.h"

#define ROWLEN 256 /* elements in a row of pattern c */

enum { PAT_A, PAT_B, PAT_C, NPAT };
enum { IMPL_H5LOG, IMPL_HDF5, IMPL_MPIIO, NIMPL };
enum { PH_CREATE, PH_DEFINE, PH_EXTEND, PH_WRITE, PH_FLUSH, PH_CLOSE, NPH };

static const char *const pat_name[NPAT] = {"a", "b", "c"};
static const char *const impl_name[NIMPL] = {"h5log", "hdf5", "mpiio"};
static const char *const ph_name[NPH] = {"create", "define", "extend",
                                         "write",  "flush",  "close"};

typedef struct bench {
    int pattern, impl;
    const char *dir;
    uint64_t n;         /* a, b: edge of the cube */
    int nvars, nsteps;  /* c */
    int verify, keep;
    int cold;           /* 1: skip warm_memory */
    int rank, nranks;
    char path[4096];
    /* this rank's data, generated before the clock starts */
    float *buf;
    size_t nbuf;        /* floats in buf */
    uint64_t lo, hi;    /* a: rows [lo,hi) of dim 0; b: columns [lo,hi) of dim 2 */
    size_t *step_row;   /* c: index in buf (in rows) of step t's first row; nsteps+1 */
    uint64_t bytes;     /* payload over all ranks */
    double ph[NPH];     /* seconds per phase on this rank */
    double mark;        /* end of the last timed phase */
} bench_t;

static int g_rank = -1;

static void die_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Print the reason and abort the whole job: one rank failing inside a
 * collective would leave the others waiting forever. */
static void die_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bench_write[rank %d] %s:%d: ", g_rank, file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#define DIE(...) die_at(__FILE__, __LINE__, __VA_ARGS__)

/* h5l call; f is read after the call, so a failed h5l_create (f NULL) gets
 * the thread's create error. */
#define H5L_CHECK(call, f)                                                    \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != H5L_OK)                                                    \
            DIE("%s: %s [%s]", #call, h5l_errmsg(f), h5l_strerror(rc_));      \
    } while (0)

#define MPI_CHECK(call)                                                       \
    do {                                                                      \
        int rc_ = (call);                                                     \
        if (rc_ != MPI_SUCCESS) {                                             \
            char s_[MPI_MAX_ERROR_STRING];                                    \
            int l_ = 0;                                                       \
            MPI_Error_string(rc_, s_, &l_);                                   \
            DIE("%s: %s", #call, s_);                                         \
        }                                                                     \
    } while (0)

/* libhdf5 calls return a negative hid_t or herr_t on failure (and print
 * their error stack). */
static hid_t h5_ok(hid_t v, const char *what, int line)
{
    if (v < 0)
        die_at(__FILE__, line, "%s failed", what);
    return v;
}
#define H5OK(expr) h5_ok((hid_t)(expr), #expr, __LINE__)

/* The value of the element with global linear index g: exact in float32 and
 * never the fill value 0. */
static inline float val(uint64_t g)
{
    return (float)(g % 16777199u + 1u);
}

/* Add the time since the last mark to phase ph. */
static void lap(bench_t *b, int ph)
{
    double now = MPI_Wtime();
    b->ph[ph] += now - b->mark;
    b->mark = now;
}

/* Pattern c: the first variable rank q owns at step t; it owns every P-th
 * one from there. */
static int first_var(const bench_t *b, int q, int t)
{
    return ((q - t) % b->nranks + b->nranks) % b->nranks;
}

/* Pattern c: rows rank q writes at step t. */
static size_t rows_of(const bench_t *b, int q, int t)
{
    int v0 = first_var(b, q, t);
    return v0 < b->nvars ? (size_t)(b->nvars - v0 + b->nranks - 1) / (size_t)b->nranks
                         : 0;
}

static float *alloc_floats(size_t n)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 4095) / 4096 * 4096;
    float *p = aligned_alloc(4096, bytes);
    if (!p)
        DIE("out of memory (%zu bytes)", bytes);
    return p;
}

/* Generate this rank's data (touches every page before the clock starts). */
static void setup(bench_t *b)
{
    uint64_t n = b->n, P = (uint64_t)b->nranks, r = (uint64_t)b->rank;
    if (b->pattern == PAT_A) {
        b->lo = r * n / P;
        b->hi = (r + 1) * n / P;
        b->nbuf = (size_t)((b->hi - b->lo) * n * n);
        b->buf = alloc_floats(b->nbuf);
        uint64_t g0 = b->lo * n * n;
        for (size_t l = 0; l < b->nbuf; l++)
            b->buf[l] = val(g0 + l);
        b->bytes = n * n * n * sizeof(float);
    } else if (b->pattern == PAT_B) {
        b->lo = r * n / P;
        b->hi = (r + 1) * n / P;
        uint64_t w = b->hi - b->lo;
        b->nbuf = (size_t)(n * n * w);
        b->buf = alloc_floats(b->nbuf);
        float *p = b->buf;
        for (uint64_t i = 0; i < n; i++)
            for (uint64_t j = 0; j < n; j++)
                for (uint64_t k = 0; k < w; k++)
                    *p++ = val((i * n + j) * n + b->lo + k);
        b->bytes = n * n * n * sizeof(float);
    } else {
        b->step_row = calloc((size_t)b->nsteps + 1, sizeof *b->step_row);
        if (!b->step_row)
            DIE("out of memory");
        for (int t = 0; t < b->nsteps; t++)
            b->step_row[t + 1] = b->step_row[t] + rows_of(b, b->rank, t);
        b->nbuf = b->step_row[b->nsteps] * ROWLEN;
        b->buf = alloc_floats(b->nbuf);
        float *p = b->buf;
        for (int t = 0; t < b->nsteps; t++)
            for (int v = first_var(b, b->rank, t); v < b->nvars; v += b->nranks)
                for (int j = 0; j < ROWLEN; j++)
                    *p++ = val(((uint64_t)v * (uint64_t)b->nsteps + (uint64_t)t) * ROWLEN +
                               (uint64_t)j);
        b->bytes = (uint64_t)b->nvars * (uint64_t)b->nsteps * ROWLEN * sizeof(float);
    }
}

/* Pattern c: this rank's row of variable v at step t (v must be ours). */
static const float *row_ptr(const bench_t *b, int v, int t)
{
    size_t k = (size_t)(v - first_var(b, b->rank, t)) / (size_t)b->nranks;
    return b->buf + (b->step_row[t] + k) * ROWLEN;
}

static void var_name(char *out, size_t cap, int v)
{
    snprintf(out, cap, "/v%04d", v);
}

/* Write `bytes` to a scratch file in DIR and delete it, so the memory the
 * timed run allocates (page cache above all) is memory the guest has just
 * used. This VM (Firecracker, free page reporting with
 * page_reporting_order=11) hands freed guest memory back to the host about
 * two seconds after it is freed, and the first touch of such a page costs a
 * host fault: `dd` of 512 MiB into the page cache then runs at about
 * 270 MB/s instead of about 3 GB/s, whatever the program. Touching anonymous
 * memory instead (even MAP_POPULATE) was measured not to help. The deleted
 * file's dirty pages are dropped, never written back. */
static void warm_memory(const bench_t *b, size_t bytes)
{
    char path[sizeof b->path + 32];
    snprintf(path, sizeof path, "%s/.bench_warm.%d", b->dir, b->rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        DIE("warm-up %s: open: %s", path, strerror(errno));
    unlink(path); /* pages stay until close */
    const size_t blk = (size_t)4 << 20;
    char *zero = calloc(1, blk);
    if (!zero)
        DIE("out of memory");
    for (size_t done = 0; done < bytes; done += blk)
        if (pwrite(fd, zero, blk, (off_t)done) != (ssize_t)blk)
            DIE("warm-up %s: write: %s", path, strerror(errno));
    close(fd);
    free(zero);
}

/* ---- libh5log -------------------------------------------------------- */

static void run_h5log(bench_t *b)
{
    h5l_opts_t o;
    h5l_opts_init(&o);
    h5l_file_t *f = NULL;
    H5L_CHECK(h5l_create(b->path, MPI_COMM_WORLD, &o, &f), f);
    lap(b, PH_CREATE);

    if (b->pattern != PAT_C) {
        static const char *const dn[3] = {"z", "y", "x"};
        int d[3], var;
        uint64_t n = b->n;
        for (int i = 0; i < 3; i++)
            H5L_CHECK(h5l_def_dim(f, dn[i], n, &d[i]), f);
        H5L_CHECK(h5l_def_var(f, "/x", H5T_IEEE_F32LE, 3, d, NULL, &var), f);
        lap(b, PH_DEFINE);
        if (b->pattern == PAT_A) {
            uint64_t start[3] = {b->lo, 0, 0}, count[3] = {b->hi - b->lo, n, n};
            H5L_CHECK(h5l_iput(f, var, start, count, b->buf), f);
        } else {
            uint64_t w = b->hi - b->lo;
            for (uint64_t i = 0; i < n; i++) {
                uint64_t start[3] = {i, 0, b->lo}, count[3] = {1, n, w};
                H5L_CHECK(h5l_iput(f, var, start, count, b->buf + i * n * w), f);
            }
        }
        lap(b, PH_WRITE);
        H5L_CHECK(h5l_flush(f), f);
        lap(b, PH_FLUSH);
    } else {
        int d[2], *var = malloc((size_t)b->nvars * sizeof *var);
        if (!var)
            DIE("out of memory");
        H5L_CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &d[0]), f);
        H5L_CHECK(h5l_def_dim(f, "x", ROWLEN, &d[1]), f);
        uint64_t chunk[2] = {1, ROWLEN};
        for (int v = 0; v < b->nvars; v++) {
            char name[32];
            var_name(name, sizeof name, v);
            H5L_CHECK(h5l_def_var(f, name, H5T_IEEE_F32LE, 2, d, chunk, &var[v]), f);
        }
        lap(b, PH_DEFINE);
        for (int t = 0; t < b->nsteps; t++) {
            for (int v = first_var(b, b->rank, t); v < b->nvars; v += b->nranks) {
                uint64_t start[2] = {(uint64_t)t, 0}, count[2] = {1, ROWLEN};
                H5L_CHECK(h5l_put(f, var[v], start, count, row_ptr(b, v, t)), f);
            }
            lap(b, PH_WRITE);
            H5L_CHECK(h5l_flush(f), f);
            lap(b, PH_FLUSH);
        }
        free(var);
    }
    /* h5l_close frees f even when it fails; the writer then leaves the
     * reason where h5l_errmsg(NULL) finds it */
    int rc = h5l_close(f);
    if (rc != H5L_OK)
        DIE("h5l_close: %s [%s]", h5l_errmsg(NULL), h5l_strerror(rc));
    lap(b, PH_CLOSE);
}

/* ---- native parallel HDF5 -------------------------------------------- */

static void run_hdf5(bench_t *b)
{
    hid_t fapl = H5OK(H5Pcreate(H5P_FILE_ACCESS));
    H5OK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    /* collective metadata reads and writes: the recommended setting for
     * many datasets (measured: about 1.2-2x faster on pattern c) */
    H5OK(H5Pset_all_coll_metadata_ops(fapl, 1));
    H5OK(H5Pset_coll_metadata_write(fapl, 1));
    hid_t dxpl = H5OK(H5Pcreate(H5P_DATASET_XFER));
    H5OK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
    hid_t file = H5OK(H5Fcreate(b->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
    lap(b, PH_CREATE);

    /* never write fill values: native's best case */
    hid_t dcpl = H5OK(H5Pcreate(H5P_DATASET_CREATE));
    H5OK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    if (b->pattern != PAT_C) {
        hsize_t n = b->n, dims[3] = {n, n, n}, start[3], count[3];
        hid_t fs = H5OK(H5Screate_simple(3, dims, NULL));
        hid_t ds = H5OK(H5Dcreate2(file, "x", H5T_IEEE_F32LE, fs, H5P_DEFAULT, dcpl,
                                   H5P_DEFAULT));
        lap(b, PH_DEFINE);
        if (b->pattern == PAT_A) {
            start[0] = b->lo, start[1] = 0, start[2] = 0;
            count[0] = b->hi - b->lo, count[1] = n, count[2] = n;
        } else {
            start[0] = 0, start[1] = 0, start[2] = b->lo;
            count[0] = n, count[1] = n, count[2] = b->hi - b->lo;
        }
        hid_t ms = H5OK(H5Screate_simple(3, count, NULL));
        H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
        H5OK(H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, dxpl, b->buf));
        lap(b, PH_WRITE);
        H5OK(H5Sclose(ms));
        H5OK(H5Sclose(fs));
        H5OK(H5Dclose(ds));
    } else {
        hsize_t dims[2] = {0, ROWLEN}, maxd[2] = {H5S_UNLIMITED, ROWLEN};
        hsize_t chunk[2] = {1, ROWLEN}, row = ROWLEN;
        H5OK(H5Pset_chunk(dcpl, 2, chunk));
        hid_t fs0 = H5OK(H5Screate_simple(2, dims, maxd));
        hid_t *ds = malloc((size_t)b->nvars * sizeof *ds);
        if (!ds)
            DIE("out of memory");
        for (int v = 0; v < b->nvars; v++) {
            char name[32];
            var_name(name, sizeof name, v);
            ds[v] = H5OK(H5Dcreate2(file, name + 1, H5T_IEEE_F32LE, fs0, H5P_DEFAULT,
                                    dcpl, H5P_DEFAULT));
        }
        H5OK(H5Sclose(fs0));
        hid_t ms_row = H5OK(H5Screate_simple(1, &row, NULL));
        hid_t ms_none = H5OK(H5Screate_simple(1, &row, NULL));
        H5OK(H5Sselect_none(ms_none));
        lap(b, PH_DEFINE);
        for (int t = 0; t < b->nsteps; t++) {
            hsize_t ext[2] = {(hsize_t)t + 1, ROWLEN};
            for (int v = 0; v < b->nvars; v++)
                H5OK(H5Dset_extent(ds[v], ext));
            lap(b, PH_EXTEND);
            for (int v = 0; v < b->nvars; v++) {
                hid_t fs = H5OK(H5Dget_space(ds[v]));
                if ((v + t) % b->nranks == b->rank) {
                    hsize_t start[2] = {(hsize_t)t, 0}, count[2] = {1, ROWLEN};
                    H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
                    H5OK(H5Dwrite(ds[v], H5T_NATIVE_FLOAT, ms_row, fs, dxpl, row_ptr(b, v, t)));
                } else {
                    H5OK(H5Sselect_none(fs));
                    H5OK(H5Dwrite(ds[v], H5T_NATIVE_FLOAT, ms_none, fs, dxpl, b->buf));
                }
                H5OK(H5Sclose(fs));
            }
            lap(b, PH_WRITE);
        }
        H5OK(H5Sclose(ms_row));
        H5OK(H5Sclose(ms_none));
        for (int v = 0; v < b->nvars; v++)
            H5OK(H5Dclose(ds[v]));
        free(ds);
    }
    H5OK(H5Pclose(dcpl));
    H5OK(H5Fclose(file));
    lap(b, PH_CLOSE);
    H5OK(H5Pclose(dxpl));
    H5OK(H5Pclose(fapl));
}

/* ---- raw MPI-IO ------------------------------------------------------ */

static void run_mpiio(bench_t *b)
{
    MPI_File fh;
    MPI_Status st;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, b->path, MPI_MODE_CREATE | MPI_MODE_WRONLY,
                            MPI_INFO_NULL, &fh));
    lap(b, PH_CREATE);
    int n = (int)b->n;
    if (b->pattern == PAT_A) {
        MPI_Datatype plane; /* one [N,N] plane: counts stay small for big N */
        MPI_CHECK(MPI_Type_contiguous(n * n, MPI_FLOAT, &plane));
        MPI_CHECK(MPI_Type_commit(&plane));
        lap(b, PH_DEFINE);
        MPI_Offset off = (MPI_Offset)(b->lo * b->n * b->n * sizeof(float));
        MPI_CHECK(MPI_File_write_at_all(fh, off, b->buf, (int)(b->hi - b->lo), plane, &st));
        lap(b, PH_WRITE);
        MPI_CHECK(MPI_Type_free(&plane));
    } else if (b->pattern == PAT_B) {
        int w = (int)(b->hi - b->lo);
        int sizes[3] = {n, n, n}, sub[3] = {n, n, w}, starts[3] = {0, 0, (int)b->lo};
        MPI_Datatype ft, mt;
        MPI_CHECK(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_FLOAT, &ft));
        MPI_CHECK(MPI_Type_commit(&ft));
        MPI_CHECK(MPI_Type_contiguous(w, MPI_FLOAT, &mt));
        MPI_CHECK(MPI_Type_commit(&mt));
        MPI_CHECK(MPI_File_set_view(fh, 0, MPI_FLOAT, ft, "native", MPI_INFO_NULL));
        lap(b, PH_DEFINE);
        MPI_CHECK(MPI_File_write_all(fh, b->buf, n * n, mt, &st));
        lap(b, PH_WRITE);
        MPI_CHECK(MPI_Type_free(&mt));
        MPI_CHECK(MPI_Type_free(&ft));
    } else {
        uint64_t step_bytes = (uint64_t)b->nvars * ROWLEN * sizeof(float), base = 0;
        for (int t = 0; t < b->nsteps; t++) {
            size_t rows = b->step_row[t + 1] - b->step_row[t];
            uint64_t mine = rows * ROWLEN * sizeof(float), before = 0;
            MPI_CHECK(MPI_Exscan(&mine, &before, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
            if (b->rank == 0)
                before = 0; /* MPI_Exscan leaves rank 0's result undefined */
            MPI_CHECK(MPI_File_write_at_all(fh, (MPI_Offset)(base + before),
                                            b->buf + b->step_row[t] * ROWLEN,
                                            (int)(rows * ROWLEN), MPI_FLOAT, &st));
            base += step_bytes;
        }
        lap(b, PH_WRITE);
    }
    MPI_CHECK(MPI_File_close(&fh));
    lap(b, PH_CLOSE);
}

/* ---- verification (rank 0, after the clock stopped) ------------------- */

/* Compare n floats read back with the values of global indices g0..g0+n-1. */
static void check_run(const bench_t *b, const float *got, uint64_t g0, size_t n,
                      const char *where)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != val(g0 + i))
            DIE("verify %s (%s): element %zu is %.9g, expected %.9g", b->path, where, i,
                (double)got[i], (double)val(g0 + i));
}

/* Each verifier reads plane i of the cube (a, b) or all of variable v (c). */
typedef struct reader_ops {
    void (*plane)(void *ctx, const bench_t *b, uint64_t i, float *out);
    void (*var)(void *ctx, const bench_t *b, int v, float *out);
} reader_ops_t;

static void mpiio_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    size_t len = (size_t)(b->n * b->n) * sizeof(float);
    ssize_t got = pread(*(int *)ctx, out, len, (off_t)(i * len));
    if (got != (ssize_t)len)
        DIE("verify %s: short read of plane %" PRIu64, b->path, i);
}

static void mpiio_var(void *ctx, const bench_t *b, int v, float *out)
{
    const size_t row = ROWLEN * sizeof(float);
    for (int t = 0; t < b->nsteps; t++) {
        int owner = (v + t) % b->nranks;
        size_t before = 0;
        for (int q = 0; q < owner; q++)
            before += rows_of(b, q, t);
        size_t k = (size_t)(v - first_var(b, owner, t)) / (size_t)b->nranks;
        off_t off = (off_t)((size_t)t * (size_t)b->nvars * row + (before + k) * row);
        if (pread(*(int *)ctx, out + (size_t)t * ROWLEN, row, off) != (ssize_t)row)
            DIE("verify %s: short read of row %d of variable %d", b->path, t, v);
    }
}

static void hdf5_read(hid_t file, const bench_t *b, const char *name, int rank,
                      const hsize_t *shape, const hsize_t *start, const hsize_t *count,
                      float *out)
{
    hid_t ds = H5OK(H5Dopen2(file, name, H5P_DEFAULT));
    hid_t fs = H5OK(H5Dget_space(ds));
    hsize_t dims[3];
    if (H5Sget_simple_extent_ndims(fs) != rank)
        DIE("verify %s: %s has the wrong rank", b->path, name);
    H5OK(H5Sget_simple_extent_dims(fs, dims, NULL));
    for (int i = 0; i < rank; i++)
        if (dims[i] != shape[i])
            DIE("verify %s: %s dim %d is %llu, expected %llu", b->path, name, i,
                (unsigned long long)dims[i], (unsigned long long)shape[i]);
    H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t ms = H5OK(H5Screate_simple(rank, count, NULL));
    H5OK(H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out));
    H5OK(H5Sclose(ms));
    H5OK(H5Sclose(fs));
    H5OK(H5Dclose(ds));
}

static void hdf5_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    hsize_t shape[3] = {b->n, b->n, b->n}, start[3] = {i, 0, 0}, count[3] = {1, b->n, b->n};
    hdf5_read(*(hid_t *)ctx, b, "x", 3, shape, start, count, out);
}

static void hdf5_var(void *ctx, const bench_t *b, int v, float *out)
{
    char name[32];
    var_name(name, sizeof name, v);
    hsize_t shape[2] = {(hsize_t)b->nsteps, ROWLEN}, start[2] = {0, 0};
    hdf5_read(*(hid_t *)ctx, b, name + 1, 2, shape, start, shape, out);
}

/* libh5log: read through the reader library as of the newest tick. */
static uint32_t h5log_objid(h5l_reader_t *r, const bench_t *b, const char *path)
{
    long found = -1;
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    for (size_t i = 0; i < s->nobjs && found < 0; i++)
        if (s->objs[i].kind == H5L_OBJ_VAR && strcmp(s->objs[i].path, path) == 0)
            found = (long)i;
    h5l_reader_unlock(r);
    if (found < 0)
        DIE("verify %s: variable %s not found by the reader", b->path, path);
    return (uint32_t)found;
}

static void h5log_read(h5l_reader_t *r, const bench_t *b, const char *path,
                       const uint64_t *start, const uint64_t *count, float *out)
{
    h5l_err_t e;
    uint32_t id = h5log_objid(r, b, path);
    int rc = h5l_reader_read(r, h5l_reader_ntick(r), id, start, count, out, &e);
    if (rc != H5L_OK)
        DIE("verify %s: h5l_reader_read %s: %s", b->path, path, e.msg);
}

static void h5log_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    uint64_t start[3] = {i, 0, 0}, count[3] = {1, b->n, b->n};
    h5log_read(ctx, b, "/x", start, count, out);
}

static void h5log_var(void *ctx, const bench_t *b, int v, float *out)
{
    char name[32];
    var_name(name, sizeof name, v);
    uint64_t start[2] = {0, 0}, count[2] = {(uint64_t)b->nsteps, ROWLEN};
    h5log_read(ctx, b, name, start, count, out);
}

static void verify_all(const bench_t *b, const reader_ops_t *ops, void *ctx)
{
    if (b->pattern != PAT_C) {
        size_t len = (size_t)(b->n * b->n);
        float *out = alloc_floats(len);
        for (uint64_t i = 0; i < b->n; i++) {
            char where[64];
            snprintf(where, sizeof where, "plane %" PRIu64, i);
            memset(out, 0, len * sizeof(float));
            ops->plane(ctx, b, i, out);
            check_run(b, out, i * len, len, where);
        }
        free(out);
    } else {
        size_t len = (size_t)b->nsteps * ROWLEN;
        float *out = alloc_floats(len);
        for (int v = 0; v < b->nvars; v++) {
            char where[64];
            snprintf(where, sizeof where, "variable %d", v);
            memset(out, 0, len * sizeof(float));
            ops->var(ctx, b, v, out);
            check_run(b, out, (uint64_t)v * len, len, where);
        }
        free(out);
    }
}

static void verify(const bench_t *b)
{
    if (b->impl == IMPL_MPIIO) {
        static const reader_ops_t ops = {mpiio_plane, mpiio_var};
        int fd = open(b->path, O_RDONLY);
        if (fd < 0)
            DIE("verify %s: open: %s", b->path, strerror(errno));
        off_t want = (off_t)b->bytes, size = lseek(fd, 0, SEEK_END);
        if (size != want)
            DIE("verify %s: size %lld, expected %lld", b->path, (long long)size,
                (long long)want);
        verify_all(b, &ops, &fd);
        close(fd);
    } else if (b->impl == IMPL_HDF5) {
        static const reader_ops_t ops = {hdf5_plane, hdf5_var};
        hid_t file = H5OK(H5Fopen(b->path, H5F_ACC_RDONLY, H5P_DEFAULT));
        verify_all(b, &ops, &file);
        H5OK(H5Fclose(file));
    } else {
        static const reader_ops_t ops = {h5log_plane, h5log_var};
        h5l_reader_t *r = NULL;
        h5l_err_t e;
        if (h5l_reader_open(b->path, &r, &e) != H5L_OK)
            DIE("verify %s: h5l_reader_open: %s", b->path, e.msg);
        if (!h5l_reader_closed(r))
            DIE("verify %s: the reader sees no CLOSE record", b->path);
        uint64_t want = b->pattern == PAT_C ? (uint64_t)b->nsteps : 1;
        if (h5l_reader_ntick(r) < want)
            DIE("verify %s: %" PRIu64 " ticks, expected at least %" PRIu64, b->path,
                h5l_reader_ntick(r), want);
        verify_all(b, &ops, r);
        h5l_reader_close(r);
        /* the anchors must make it a plain HDF5 file of the right shape */
        hid_t file = H5OK(H5Fopen(b->path, H5F_ACC_RDONLY, H5P_DEFAULT));
        hid_t ds = H5OK(H5Dopen2(file, b->pattern == PAT_C ? "v0000" : "x", H5P_DEFAULT));
        hid_t fs = H5OK(H5Dget_space(ds));
        hsize_t dims[3] = {0, 0, 0};
        int nd = H5Sget_simple_extent_ndims(fs);
        H5OK(H5Sget_simple_extent_dims(fs, dims, NULL));
        int ok = b->pattern == PAT_C
                     ? nd == 2 && dims[0] == (hsize_t)b->nsteps && dims[1] == ROWLEN
                     : nd == 3 && dims[0] == b->n && dims[1] == b->n && dims[2] == b->n;
        if (!ok)
            DIE("verify %s: the HDF5 anchor has rank %d and dims %llu x %llu x %llu", b->path,
                nd, (unsigned long long)dims[0], (unsigned long long)dims[1],
                (unsigned long long)dims[2]);
        H5OK(H5Sclose(fs));
        H5OK(H5Dclose(ds));
        H5OK(H5Fclose(file));
    }
}

/* ---- driver ----------------------------------------------------------- */

static void remove_files(const bench_t *b)
{
    char side[sizeof b->path + 8];
    snprintf(side, sizeof side, "%s.h5lj", b->path);
    if (unlink(b->path) != 0 && errno != ENOENT)
        DIE("unlink %s: %s", b->path, strerror(errno));
    if (unlink(side) != 0 && errno != ENOENT)
        DIE("unlink %s: %s", side, strerror(errno));
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int parse_count(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > max)
        return -1;
    *out = v;
    return 0;
}

static const char usage[] =
    "usage: bench_write --pattern a|b|c --impl h5log|hdf5|mpiio --dir DIR\n"
    "                   [--size N] [--nvars V] [--steps T] [--verify] [--keep] [--cold]\n";

/* Returns 0, or -1 after printing why on rank 0. */
static int parse_args(bench_t *b, int argc, char **argv)
{
    uint64_t nv = 1000, ns = 100;
    b->pattern = b->impl = -1;
    b->n = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--verify"))
            b->verify = 1;
        else if (!strcmp(a, "--cold"))
            b->cold = 1;
        else if (!strcmp(a, "--keep"))
            b->keep = 1;
        else if (!v)
            bad = 1;
        else {
            i++;
            if (!strcmp(a, "--pattern"))
                bad = (b->pattern = lookup(v, pat_name, NPAT)) < 0;
            else if (!strcmp(a, "--impl"))
                bad = (b->impl = lookup(v, impl_name, NIMPL)) < 0;
            else if (!strcmp(a, "--dir"))
                b->dir = v;
            else if (!strcmp(a, "--size"))
                bad = parse_count(v, 46340, &b->n) != 0; /* N*N must fit an int */
            else if (!strcmp(a, "--nvars"))
                bad = parse_count(v, 1000000, &nv) != 0;
            else if (!strcmp(a, "--steps"))
                bad = parse_count(v, 1000000, &ns) != 0;
            else
                bad = 1;
        }
        if (bad) {
            if (b->rank == 0)
                fprintf(stderr, "bench_write: bad argument '%s'\n%s", a, usage);
            return -1;
        }
    }
    b->nvars = (int)nv;
    b->nsteps = (int)ns;
    if (b->pattern < 0 || b->impl < 0 || !b->dir) {
        if (b->rank == 0)
            fputs(usage, stderr);
        return -1;
    }
    if (b->pattern != PAT_C && b->n < (uint64_t)b->nranks) {
        if (b->rank == 0)
            fprintf(stderr, "bench_write: --size must be at least the number of ranks\n");
        return -1;
    }
    const char *ext = b->impl == IMPL_MPIIO ? "dat" : "h5";
    if ((size_t)snprintf(b->path, sizeof b->path, "%s/bench_%s_%s.%s", b->dir,
                         pat_name[b->pattern], impl_name[b->impl], ext) >= sizeof b->path) {
        if (b->rank == 0)
            fprintf(stderr, "bench_write: --dir too long\n");
        return -1;
    }
    return 0;
}

static void print_result(const bench_t *b, double seconds, const double *ph)
{
    double mib = (double)b->bytes / (1024.0 * 1024.0);
    printf("{\"pattern\":\"%s\",\"impl\":\"%s\",\"nranks\":%d,", pat_name[b->pattern],
           impl_name[b->impl], b->nranks);
    if (b->pattern == PAT_C)
        printf("\"nvars\":%d,\"nsteps\":%d,\"rowlen\":%d,", b->nvars, b->nsteps, ROWLEN);
    else
        printf("\"n\":%" PRIu64 ",", b->n);
    printf("\"bytes\":%" PRIu64 ",\"seconds\":%.6f,\"MiB_per_s\":%.2f,\"phases\":{",
           b->bytes, seconds, seconds > 0 ? mib / seconds : 0.0);
    for (int i = 0, first = 1; i < NPH; i++) {
        if (ph[i] <= 0)
            continue;
        printf("%s\"%s\":%.6f", first ? "" : ",", ph_name[i], ph[i]);
        first = 0;
    }
    printf("},\"warm\":%s,\"verified\":%s}\n", b->cold ? "false" : "true",
           b->verify ? "true" : "false");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    bench_t b;
    memset(&b, 0, sizeof b);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &b.nranks);
    g_rank = b.rank;
    if (parse_args(&b, argc, argv) != 0) {
        MPI_Finalize();
        return 2;
    }
    setup(&b);
    if (b.rank == 0)
        remove_files(&b); /* MPI_MODE_CREATE does not truncate a stale file */

    /* this rank's share of the file's page cache, and room for the
     * libraries' own buffers */
    if (!b.cold) {
        MPI_Barrier(MPI_COMM_WORLD);
        warm_memory(&b, (size_t)(b.bytes / (uint64_t)b.nranks) + ((size_t)64 << 20));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    b.mark = t0;
    if (b.impl == IMPL_H5LOG)
        run_h5log(&b);
    else if (b.impl == IMPL_HDF5)
        run_hdf5(&b);
    else
        run_mpiio(&b);
    double mine = MPI_Wtime() - t0, seconds = 0, ph[NPH];
    MPI_CHECK(MPI_Reduce(&mine, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce(b.ph, ph, NPH, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));

    free(b.buf); /* return the memory before rank 0 reads the file back */
    b.buf = NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    if (b.rank == 0) {
        if (b.verify)
            verify(&b);
        print_result(&b, seconds, ph);
        if (!b.keep)
            remove_files(&b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(b.step_row);
    MPI_Finalize();
    return 0;
}
