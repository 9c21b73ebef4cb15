/* bench_write.c — write benchmark: libh5log against raw MPI-IO, native
 * parallel HDF5 and PnetCDF, on the same data and the same access pattern.
 *
 *   mpirun -np P bench_write --pattern S|C|M --impl IMPL --dir DIR
 *          [--size N] [--planes Z] [--every G]
 *          [--nvars V] [--steps T] [--rowlen L] [--verify] [--keep] [--cold]
 *          [--small-pages]
 *
 * IMPL: h5l_put, h5l_iput (libh5log, copying or zero-copy puts), mpiio,
 * hdf5, pnetcdf. float32 everywhere. Patterns:
 *   S  one [Z,N,N] variable (Z 256, N 1024: 1 GiB), whole planes per rank:
 *      rank r owns planes r*Z/P..(r+1)*Z/P and writes them G at a time
 *      (G 8). h5l_*: one put per plane, a flush after every G planes.
 *      mpiio: one independent MPI_File_write_at of the G planes at their
 *      canonical offset (the ceiling). hdf5: one collective H5Dwrite of the
 *      G planes. pnetcdf: one ncmpi_iput_vara per plane, ncmpi_wait_all
 *      after G planes.
 *   C  the same variable decomposed along its last dimension: rank r owns
 *      x[:, :, r*N/P:(r+1)*N/P] (256 elements of every row for N 1024,
 *      P 4). h5l_*: one put per row piece ([1,1,N/P]), a flush after every
 *      G planes (the adjacent puts merge: one record per rank, flush and
 *      variable). hdf5: one collective H5Dwrite of the rank's [G,N,N/P]
 *      box per G planes; pnetcdf: one ncmpi_iput_vara of that box and
 *      ncmpi_wait_all; mpiio: a subarray file view and one
 *      MPI_File_write_all per G planes (the canonical layout's ceiling).
 *      Native and PnetCDF get their best case: one request per G planes.
 *   M  V variables [time(unlimited),L] (V 1000, L 256), T steps (100); at
 *      every step every variable gets one row, written by rank (v+t)%P.
 *      h5l_*: a put per row and one flush per step; mpiio: each step's rows
 *      appended at a running offset (MPI_Exscan) with one independent
 *      MPI_File_write_at per rank; hdf5: chunked [1,L] datasets, a
 *      collective H5Dset_extent and one collective H5Dwrite per variable
 *      per step; pnetcdf: record variables, one ncmpi_iput_vara per row and
 *      ncmpi_wait_all per step.
 * Native HDF5 uses the MPI-IO driver, collective transfers and metadata and
 * no fill values; PnetCDF writes CDF-5 without fill; MPI-IO a plain file.
 *
 * Timing: the data is generated before the clock starts (every page touched)
 * and the page cache warmed (warm_memory; --cold skips it); after a barrier
 * each rank times from before the file is created to after it is closed.
 * Nothing is synced. `seconds` is the maximum over ranks, and so is each
 * phase in `phases` (phases of different ranks need not add up): `write` is
 * the time in puts / write calls, `flush` in h5l_flush / ncmpi_wait_all.
 * `cpu_phases` are the CPU seconds of the ranks' main threads per phase,
 * summed over ranks (busy-polling in collectives included).
 *
 * Output: one JSON object on one line from rank 0; for libh5log also the
 * ticks and records the reader finds (opened after the clock stopped).
 * --verify (outside the timing) reads the file back on rank 0 and checks
 * every element; --keep leaves the file in DIR. On any failure the reason
 * goes to stderr and the job is aborted with a non-zero status. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <pnetcdf.h>

#include "h5log.h"
#include "h5log_reader.h"

enum { PAT_S, PAT_C, PAT_M, NPAT };
enum { IMPL_PUT, IMPL_IPUT, IMPL_MPIIO, IMPL_HDF5, IMPL_PNETCDF, NIMPL };
enum { PH_CREATE, PH_DEFINE, PH_EXTEND, PH_WRITE, PH_FLUSH, PH_CLOSE, NPH };

static const char *const pat_name[NPAT] = {"S", "C", "M"};
static const char *const impl_name[NIMPL] = {"h5l_put", "h5l_iput", "mpiio", "hdf5", "pnetcdf"};
static const char *const ph_name[NPH] = {"create", "define", "extend", "write", "flush", "close"};

typedef struct bench {
    int pattern, impl;
    const char *dir;
    uint64_t n, z, every; /* S, C: [z,n,n], flush every `every` planes */
    int nvars, nsteps;    /* M */
    uint64_t rowlen;      /* M */
    int verify, keep;
    int cold;        /* 1: skip warm_memory */
    int small_pages; /* 1: the data buffer without MADV_HUGEPAGE */
    int finalize;    /* 1: libh5log finalizes at close (its default); 0: no_finalize, the write
                         * path alone (the finalizing cost is bench-standalone's) */
    int early;       /* 1: h5l_opts_t.early_writes (puts write as they come) */
    int rank, nranks;
    char path[4096];
    /* this rank's data, generated before the clock starts */
    float *buf;
    size_t nbuf;      /* floats in buf */
    uint64_t lo, hi;  /* S: planes [lo,hi) of dim 0; C: columns [lo,hi) of dim 2 */
    size_t *step_row; /* M: index in buf (in rows) of step t's first row; nsteps+1 */
    uint64_t bytes;   /* payload over all ranks */
    double ph[NPH];   /* seconds per phase on this rank */
    double cpu[NPH];  /* CPU seconds of this rank's thread per phase */
    double mark;      /* end of the last timed phase */
    double cpu_mark;  /* the thread's CPU time then */
    uint64_t nflush;  /* flushes (h5l) or waits (pnetcdf) or write groups made */
} bench_t;

static int g_rank = -1;

/* perf's control fifo (BENCH_PERF_CTL, set by bench/perf_ranks.sh): the
 * timed part alone is profiled, not the data generation or the warm-up. */
static void perf_ctl(const char *cmd)
{
    const char *path = getenv("BENCH_PERF_CTL");
    if (!path || !path[0]) return;
    int fd = open(path, O_WRONLY);
    if (fd < 0) return;
    if (write(fd, cmd, strlen(cmd)) < 0) {
        /* profiling is best effort */
    }
    close(fd);
}

static void die_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4), noreturn));

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
#define H5L_CHECK(call, f)                                                                                             \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != H5L_OK) DIE("%s: %s [%s]", #call, h5l_errmsg(f), h5l_strerror(rc_));                                \
    } while (0)

#define MPI_CHECK(call)                                                                                                \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != MPI_SUCCESS) {                                                                                      \
            char s_[MPI_MAX_ERROR_STRING];                                                                             \
            int l_ = 0;                                                                                                \
            MPI_Error_string(rc_, s_, &l_);                                                                            \
            DIE("%s: %s", #call, s_);                                                                                  \
        }                                                                                                              \
    } while (0)

#define NC_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != NC_NOERR) DIE("%s: %s", #call, ncmpi_strerror(rc_));                                                \
    } while (0)

/* libhdf5 calls return a negative hid_t or herr_t on failure (and print
 * their error stack). */
static hid_t h5_ok(hid_t v, const char *what, int line)
{
    if (v < 0) die_at(__FILE__, line, "%s failed", what);
    return v;
}
#define H5OK(expr) h5_ok((hid_t)(expr), #expr, __LINE__)

/* The value of the element with global linear index g: exact in float32 and
 * never the fill value 0. */
static inline float val(uint64_t g) { return (float)(g % 16777199u + 1u); }

/* CPU time of the calling thread: wall-clock phases of 4 ranks on 2 cores
 * include time spent waiting for a core; this does not. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Add the time since the last mark to phase ph. */
static void lap(bench_t *b, int ph)
{
    double now = MPI_Wtime(), c = cpu_now();
    b->ph[ph] += now - b->mark;
    b->cpu[ph] += c - b->cpu_mark;
    b->mark = now;
    b->cpu_mark = c;
}

/* Pattern M: the first variable rank q owns at step t; it owns every P-th
 * one from there. */
static int first_var(const bench_t *b, int q, int t) { return ((q - t) % b->nranks + b->nranks) % b->nranks; }

/* Pattern M: rows rank q writes at step t. */
static size_t rows_of(const bench_t *b, int q, int t)
{
    int v0 = first_var(b, q, t);
    return v0 < b->nvars ? (size_t)(b->nvars - v0 + b->nranks - 1) / (size_t)b->nranks : 0;
}

static float *alloc_floats(size_t n)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    bytes = (bytes + 4095) / 4096 * 4096;
    float *p = aligned_alloc(4096, bytes);
    if (!p) DIE("out of memory (%zu bytes)", bytes);
    return p;
}

/* The buffer the data is written from, on transparent huge pages unless
 * --small-pages: on this VM the source's page size changes how fast the
 * kernel writes it into fresh tmpfs pages (a 64 MiB pwrite into a new file:
 * 0.4-0.6 GB/s from 4 KiB pages, 1.7-2.6 GB/s from 2 MiB pages), and
 * h5l_put writes from its arena, which asks for huge pages: every
 * implementation gets the same kind of source. */
static float *alloc_data(const bench_t *b, size_t n)
{
    size_t bytes = ((n ? n : 1) * sizeof(float) + 4095) / 4096 * 4096;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) DIE("out of memory (%zu bytes)", bytes);
    if (!b->small_pages) (void)madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

static void free_data(bench_t *b)
{
    if (b->buf) munmap(b->buf, ((b->nbuf ? b->nbuf : 1) * sizeof(float) + 4095) / 4096 * 4096);
    b->buf = NULL;
}

/* Generate this rank's data (touches every page before the clock starts). */
static void setup(bench_t *b)
{
    uint64_t n = b->n, z = b->z, P = (uint64_t)b->nranks, r = (uint64_t)b->rank;
    if (b->pattern == PAT_S) {
        b->lo = r * z / P;
        b->hi = (r + 1) * z / P;
        b->nbuf = (size_t)((b->hi - b->lo) * n * n);
        b->buf = alloc_data(b, b->nbuf);
        uint64_t g0 = b->lo * n * n;
        for (size_t l = 0; l < b->nbuf; l++) b->buf[l] = val(g0 + l);
        b->bytes = z * n * n * sizeof(float);
    } else if (b->pattern == PAT_C) {
        b->lo = r * n / P;
        b->hi = (r + 1) * n / P;
        uint64_t w = b->hi - b->lo;
        b->nbuf = (size_t)(z * n * w);
        b->buf = alloc_data(b, b->nbuf);
        float *p = b->buf;
        for (uint64_t i = 0; i < z; i++)
            for (uint64_t j = 0; j < n; j++)
                for (uint64_t k = 0; k < w; k++) *p++ = val((i * n + j) * n + b->lo + k);
        b->bytes = z * n * n * sizeof(float);
    } else {
        uint64_t L = b->rowlen;
        b->step_row = calloc((size_t)b->nsteps + 1, sizeof *b->step_row);
        if (!b->step_row) DIE("out of memory");
        for (int t = 0; t < b->nsteps; t++) b->step_row[t + 1] = b->step_row[t] + rows_of(b, b->rank, t);
        b->nbuf = b->step_row[b->nsteps] * L;
        b->buf = alloc_data(b, b->nbuf);
        float *p = b->buf;
        for (int t = 0; t < b->nsteps; t++)
            for (int v = first_var(b, b->rank, t); v < b->nvars; v += b->nranks)
                for (uint64_t j = 0; j < L; j++) *p++ = val(((uint64_t)v * (uint64_t)b->nsteps + (uint64_t)t) * L + j);
        b->bytes = (uint64_t)b->nvars * (uint64_t)b->nsteps * L * sizeof(float);
    }
}

/* Pattern M: this rank's row of variable v at step t (v must be ours). */
static const float *row_ptr(const bench_t *b, int v, int t)
{
    size_t k = (size_t)(v - first_var(b, b->rank, t)) / (size_t)b->nranks;
    return b->buf + (b->step_row[t] + k) * b->rowlen;
}

static void var_name(char *out, size_t cap, int v) { snprintf(out, cap, "v%04d", v); }

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
    if (fd < 0) DIE("warm-up %s: open: %s", path, strerror(errno));
    unlink(path); /* pages stay until close */
    const size_t blk = (size_t)4 << 20;
    char *zero = calloc(1, blk);
    if (!zero) DIE("out of memory");
    for (size_t done = 0; done < bytes; done += blk)
        if (pwrite(fd, zero, blk, (off_t)done) != (ssize_t)blk) DIE("warm-up %s: write: %s", path, strerror(errno));
    close(fd);
    free(zero);
}

/* Groups of `every` planes: S counts this rank's planes, C all planes.
 * Every rank makes the same number of groups (Z is a multiple of P). */
static uint64_t ngroups(const bench_t *b)
{
    uint64_t planes = b->pattern == PAT_S ? b->hi - b->lo : b->z;
    return (planes + b->every - 1) / b->every;
}

/* Group g: planes [*p0, *p1) of dim 0 (global indices). */
static void group_planes(const bench_t *b, uint64_t g, uint64_t *p0, uint64_t *p1)
{
    uint64_t first = b->pattern == PAT_S ? b->lo : 0, end = b->pattern == PAT_S ? b->hi : b->z;
    *p0 = first + g * b->every;
    *p1 = *p0 + b->every < end ? *p0 + b->every : end;
}

/* Where plane i of this rank's data starts in buf. */
static const float *plane_ptr(const bench_t *b, uint64_t i)
{
    if (b->pattern == PAT_S) return b->buf + (i - b->lo) * b->n * b->n;
    return b->buf + i * b->n * (b->hi - b->lo);
}

/* ---- libh5log -------------------------------------------------------- */

static void run_h5log(bench_t *b)
{
    int (*put)(h5l_file_t *, int, const uint64_t *, const uint64_t *, const void *) =
        b->impl == IMPL_PUT ? h5l_put : h5l_iput;
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.no_finalize = !b->finalize;
    o.early_writes = b->early;
    h5l_file_t *f = NULL;
    H5L_CHECK(h5l_create(b->path, MPI_COMM_WORLD, &o, &f), f);
    lap(b, PH_CREATE);

    if (b->pattern != PAT_M) {
        static const char *const dn[3] = {"z", "y", "x"};
        int d[3], var;
        uint64_t n = b->n, len[3] = {b->z, n, n};
        for (int i = 0; i < 3; i++) H5L_CHECK(h5l_def_dim(f, dn[i], len[i], &d[i]), f);
        H5L_CHECK(h5l_def_var(f, "/x", H5T_IEEE_F32LE, 3, d, NULL, &var), f);
        lap(b, PH_DEFINE);
        uint64_t w = b->hi - b->lo;
        for (uint64_t g = 0, ng = ngroups(b); g < ng; g++) {
            uint64_t p0, p1;
            group_planes(b, g, &p0, &p1);
            for (uint64_t i = p0; i < p1; i++) {
                const float *p = plane_ptr(b, i);
                if (b->pattern == PAT_S) {
                    uint64_t start[3] = {i, 0, 0}, count[3] = {1, n, n};
                    H5L_CHECK(put(f, var, start, count, p), f);
                } else {
                    for (uint64_t j = 0; j < n; j++) {
                        uint64_t start[3] = {i, j, b->lo}, count[3] = {1, 1, w};
                        H5L_CHECK(put(f, var, start, count, p + j * w), f);
                    }
                }
            }
            lap(b, PH_WRITE);
            H5L_CHECK(h5l_flush(f), f);
            lap(b, PH_FLUSH);
            b->nflush++;
        }
    } else {
        int d[2], *var = malloc((size_t)b->nvars * sizeof *var);
        if (!var) DIE("out of memory");
        H5L_CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &d[0]), f);
        H5L_CHECK(h5l_def_dim(f, "x", b->rowlen, &d[1]), f);
        uint64_t chunk[2] = {1, b->rowlen};
        for (int v = 0; v < b->nvars; v++) {
            char name[32] = "/";
            var_name(name + 1, sizeof name - 1, v);
            H5L_CHECK(h5l_def_var(f, name, H5T_IEEE_F32LE, 2, d, chunk, &var[v]), f);
        }
        lap(b, PH_DEFINE);
        for (int t = 0; t < b->nsteps; t++) {
            for (int v = first_var(b, b->rank, t); v < b->nvars; v += b->nranks) {
                uint64_t start[2] = {(uint64_t)t, 0}, count[2] = {1, b->rowlen};
                H5L_CHECK(put(f, var[v], start, count, row_ptr(b, v, t)), f);
            }
            lap(b, PH_WRITE);
            H5L_CHECK(h5l_flush(f), f);
            lap(b, PH_FLUSH);
            b->nflush++;
        }
        free(var);
    }
    /* h5l_close frees f even when it fails; the writer then leaves the
     * reason where h5l_errmsg(NULL) finds it */
    int rc = h5l_close(f);
    if (rc != H5L_OK) DIE("h5l_close: %s [%s]", h5l_errmsg(NULL), h5l_strerror(rc));
    lap(b, PH_CLOSE);
}

/* ---- native parallel HDF5 -------------------------------------------- */

static void run_hdf5(bench_t *b)
{
    hid_t fapl = H5OK(H5Pcreate(H5P_FILE_ACCESS));
    H5OK(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL));
    /* collective metadata reads and writes: the recommended setting for
     * many datasets (measured: about 1.2-2x faster on pattern M) */
    H5OK(H5Pset_all_coll_metadata_ops(fapl, 1));
    H5OK(H5Pset_coll_metadata_write(fapl, 1));
    hid_t dxpl = H5OK(H5Pcreate(H5P_DATASET_XFER));
    H5OK(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE));
    hid_t file = H5OK(H5Fcreate(b->path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
    lap(b, PH_CREATE);

    /* never write fill values: native's best case */
    hid_t dcpl = H5OK(H5Pcreate(H5P_DATASET_CREATE));
    H5OK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    if (b->pattern != PAT_M) {
        hsize_t n = b->n, dims[3] = {b->z, n, n}, start[3], count[3];
        hid_t fs = H5OK(H5Screate_simple(3, dims, NULL));
        hid_t ds = H5OK(H5Dcreate2(file, "x", H5T_IEEE_F32LE, fs, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        lap(b, PH_DEFINE);
        for (uint64_t g = 0, ng = ngroups(b); g < ng; g++) {
            uint64_t p0, p1;
            group_planes(b, g, &p0, &p1);
            start[0] = p0, count[0] = p1 - p0;
            start[1] = 0, count[1] = n;
            start[2] = b->pattern == PAT_S ? 0 : b->lo;
            count[2] = b->pattern == PAT_S ? n : b->hi - b->lo;
            hid_t ms = H5OK(H5Screate_simple(3, count, NULL));
            H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
            H5OK(H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, dxpl, plane_ptr(b, p0)));
            H5OK(H5Sclose(ms));
            b->nflush++;
        }
        lap(b, PH_WRITE);
        H5OK(H5Sclose(fs));
        H5OK(H5Dclose(ds));
    } else {
        hsize_t dims[2] = {0, b->rowlen}, maxd[2] = {H5S_UNLIMITED, b->rowlen};
        hsize_t chunk[2] = {1, b->rowlen}, row = b->rowlen;
        H5OK(H5Pset_chunk(dcpl, 2, chunk));
        hid_t fs0 = H5OK(H5Screate_simple(2, dims, maxd));
        hid_t *ds = malloc((size_t)b->nvars * sizeof *ds);
        if (!ds) DIE("out of memory");
        for (int v = 0; v < b->nvars; v++) {
            char name[32];
            var_name(name, sizeof name, v);
            ds[v] = H5OK(H5Dcreate2(file, name, H5T_IEEE_F32LE, fs0, H5P_DEFAULT, dcpl, H5P_DEFAULT));
        }
        H5OK(H5Sclose(fs0));
        hid_t ms_row = H5OK(H5Screate_simple(1, &row, NULL));
        hid_t ms_none = H5OK(H5Screate_simple(1, &row, NULL));
        H5OK(H5Sselect_none(ms_none));
        lap(b, PH_DEFINE);
        for (int t = 0; t < b->nsteps; t++) {
            hsize_t ext[2] = {(hsize_t)t + 1, b->rowlen};
            for (int v = 0; v < b->nvars; v++) H5OK(H5Dset_extent(ds[v], ext));
            lap(b, PH_EXTEND);
            for (int v = 0; v < b->nvars; v++) {
                hid_t fs = H5OK(H5Dget_space(ds[v]));
                if ((v + t) % b->nranks == b->rank) {
                    hsize_t start[2] = {(hsize_t)t, 0}, count[2] = {1, b->rowlen};
                    H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
                    H5OK(H5Dwrite(ds[v], H5T_NATIVE_FLOAT, ms_row, fs, dxpl, row_ptr(b, v, t)));
                } else {
                    H5OK(H5Sselect_none(fs));
                    H5OK(H5Dwrite(ds[v], H5T_NATIVE_FLOAT, ms_none, fs, dxpl, b->buf));
                }
                H5OK(H5Sclose(fs));
            }
            lap(b, PH_WRITE);
            b->nflush++;
        }
        H5OK(H5Sclose(ms_row));
        H5OK(H5Sclose(ms_none));
        for (int v = 0; v < b->nvars; v++) H5OK(H5Dclose(ds[v]));
        free(ds);
    }
    H5OK(H5Pclose(dcpl));
    H5OK(H5Fclose(file));
    lap(b, PH_CLOSE);
    H5OK(H5Pclose(dxpl));
    H5OK(H5Pclose(fapl));
}

/* ---- PnetCDF ---------------------------------------------------------- */

/* Non-blocking puts posted as they come and completed by one collective
 * ncmpi_wait_all per group (S, C) or step (M): PnetCDF's way of turning
 * many requests into one collective MPI-IO write. */
static void run_pnetcdf(bench_t *b)
{
    int nc;
    NC_CHECK(ncmpi_create(MPI_COMM_WORLD, b->path, NC_CLOBBER | NC_64BIT_DATA, MPI_INFO_NULL, &nc));
    int old;
    NC_CHECK(ncmpi_set_fill(nc, NC_NOFILL, &old));
    lap(b, PH_CREATE);
    if (b->pattern != PAT_M) {
        int d[3], var;
        NC_CHECK(ncmpi_def_dim(nc, "z", (MPI_Offset)b->z, &d[0]));
        NC_CHECK(ncmpi_def_dim(nc, "y", (MPI_Offset)b->n, &d[1]));
        NC_CHECK(ncmpi_def_dim(nc, "x", (MPI_Offset)b->n, &d[2]));
        NC_CHECK(ncmpi_def_var(nc, "x", NC_FLOAT, 3, d, &var));
        NC_CHECK(ncmpi_enddef(nc));
        lap(b, PH_DEFINE);
        MPI_Offset n = (MPI_Offset)b->n, w = (MPI_Offset)(b->hi - b->lo);
        for (uint64_t g = 0, ng = ngroups(b); g < ng; g++) {
            uint64_t p0, p1;
            group_planes(b, g, &p0, &p1);
            int req;
            if (b->pattern == PAT_S) {
                for (uint64_t i = p0; i < p1; i++) {
                    MPI_Offset start[3] = {(MPI_Offset)i, 0, 0}, count[3] = {1, n, n};
                    NC_CHECK(ncmpi_iput_vara_float(nc, var, start, count, plane_ptr(b, i), &req));
                }
            } else {
                MPI_Offset start[3] = {(MPI_Offset)p0, 0, (MPI_Offset)b->lo};
                MPI_Offset count[3] = {(MPI_Offset)(p1 - p0), n, w};
                NC_CHECK(ncmpi_iput_vara_float(nc, var, start, count, plane_ptr(b, p0), &req));
            }
            lap(b, PH_WRITE);
            NC_CHECK(ncmpi_wait_all(nc, NC_REQ_ALL, NULL, NULL));
            lap(b, PH_FLUSH);
            b->nflush++;
        }
    } else {
        int d[2], *var = malloc((size_t)b->nvars * sizeof *var);
        if (!var) DIE("out of memory");
        NC_CHECK(ncmpi_def_dim(nc, "time", NC_UNLIMITED, &d[0]));
        NC_CHECK(ncmpi_def_dim(nc, "x", (MPI_Offset)b->rowlen, &d[1]));
        for (int v = 0; v < b->nvars; v++) {
            char name[32];
            var_name(name, sizeof name, v);
            NC_CHECK(ncmpi_def_var(nc, name, NC_FLOAT, 2, d, &var[v]));
        }
        NC_CHECK(ncmpi_enddef(nc));
        lap(b, PH_DEFINE);
        for (int t = 0; t < b->nsteps; t++) {
            for (int v = first_var(b, b->rank, t); v < b->nvars; v += b->nranks) {
                MPI_Offset start[2] = {t, 0}, count[2] = {1, (MPI_Offset)b->rowlen};
                int req;
                NC_CHECK(ncmpi_iput_vara_float(nc, var[v], start, count, row_ptr(b, v, t), &req));
            }
            lap(b, PH_WRITE);
            NC_CHECK(ncmpi_wait_all(nc, NC_REQ_ALL, NULL, NULL));
            lap(b, PH_FLUSH);
            b->nflush++;
        }
        free(var);
    }
    NC_CHECK(ncmpi_close(nc));
    lap(b, PH_CLOSE);
}

/* ---- raw MPI-IO ------------------------------------------------------ */

static void run_mpiio(bench_t *b)
{
    MPI_File fh;
    MPI_Status st;
    MPI_CHECK(MPI_File_open(MPI_COMM_WORLD, b->path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    lap(b, PH_CREATE);
    int n = (int)b->n;
    if (b->pattern == PAT_S) {
        MPI_Datatype plane; /* one [N,N] plane: counts stay small for big N */
        MPI_CHECK(MPI_Type_contiguous(n * n, MPI_FLOAT, &plane));
        MPI_CHECK(MPI_Type_commit(&plane));
        lap(b, PH_DEFINE);
        for (uint64_t g = 0, ng = ngroups(b); g < ng; g++) {
            uint64_t p0, p1;
            group_planes(b, g, &p0, &p1);
            MPI_Offset off = (MPI_Offset)(p0 * b->n * b->n * sizeof(float));
            MPI_CHECK(MPI_File_write_at(fh, off, (void *)plane_ptr(b, p0), (int)(p1 - p0), plane, &st));
            b->nflush++;
        }
        lap(b, PH_WRITE);
        MPI_CHECK(MPI_Type_free(&plane));
    } else if (b->pattern == PAT_C) {
        int w = (int)(b->hi - b->lo);
        MPI_Datatype mt;
        MPI_CHECK(MPI_Type_contiguous(w, MPI_FLOAT, &mt));
        MPI_CHECK(MPI_Type_commit(&mt));
        lap(b, PH_DEFINE);
        for (uint64_t g = 0, ng = ngroups(b); g < ng; g++) {
            uint64_t p0, p1;
            group_planes(b, g, &p0, &p1);
            int sizes[3] = {(int)(p1 - p0), n, n}, sub[3] = {(int)(p1 - p0), n, w}, starts[3] = {0, 0, (int)b->lo};
            MPI_Datatype ft;
            MPI_CHECK(MPI_Type_create_subarray(3, sizes, sub, starts, MPI_ORDER_C, MPI_FLOAT, &ft));
            MPI_CHECK(MPI_Type_commit(&ft));
            MPI_Offset disp = (MPI_Offset)(p0 * b->n * b->n * sizeof(float));
            MPI_CHECK(MPI_File_set_view(fh, disp, MPI_FLOAT, ft, "native", MPI_INFO_NULL));
            MPI_CHECK(MPI_File_write_all(fh, (void *)plane_ptr(b, p0), (int)(p1 - p0) * n, mt, &st));
            MPI_CHECK(MPI_Type_free(&ft));
            b->nflush++;
        }
        lap(b, PH_WRITE);
        MPI_CHECK(MPI_Type_free(&mt));
    } else {
        uint64_t step_bytes = (uint64_t)b->nvars * b->rowlen * sizeof(float), base = 0;
        for (int t = 0; t < b->nsteps; t++) {
            size_t rows = b->step_row[t + 1] - b->step_row[t];
            uint64_t mine = rows * b->rowlen * sizeof(float), before = 0;
            MPI_CHECK(MPI_Exscan(&mine, &before, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
            if (b->rank == 0) before = 0; /* MPI_Exscan leaves rank 0's result undefined */
            MPI_CHECK(MPI_File_write_at(fh, (MPI_Offset)(base + before), b->buf + b->step_row[t] * b->rowlen,
                                        (int)(rows * b->rowlen), MPI_FLOAT, &st));
            base += step_bytes;
            b->nflush++;
        }
        lap(b, PH_WRITE);
    }
    MPI_CHECK(MPI_File_close(&fh));
    lap(b, PH_CLOSE);
}

/* ---- verification (rank 0, after the clock stopped) ------------------- */

/* Compare n floats read back with the values of global indices g0..g0+n-1. */
static void check_run(const bench_t *b, const float *got, uint64_t g0, size_t n, const char *where)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != val(g0 + i))
            DIE("verify %s (%s): element %zu is %.9g, expected %.9g", b->path, where, i, (double)got[i],
                (double)val(g0 + i));
}

/* Each verifier reads plane i of the cube (S, C) or all of variable v (M). */
typedef struct reader_ops {
    void (*plane)(void *ctx, const bench_t *b, uint64_t i, float *out);
    void (*var)(void *ctx, const bench_t *b, int v, float *out);
} reader_ops_t;

static void mpiio_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    size_t len = (size_t)(b->n * b->n) * sizeof(float);
    ssize_t got = pread(*(int *)ctx, out, len, (off_t)(i * len));
    if (got != (ssize_t)len) DIE("verify %s: short read of plane %" PRIu64, b->path, i);
}

static void mpiio_var(void *ctx, const bench_t *b, int v, float *out)
{
    const size_t row = b->rowlen * sizeof(float);
    for (int t = 0; t < b->nsteps; t++) {
        int owner = (v + t) % b->nranks;
        size_t before = 0;
        for (int q = 0; q < owner; q++) before += rows_of(b, q, t);
        size_t k = (size_t)(v - first_var(b, owner, t)) / (size_t)b->nranks;
        off_t off = (off_t)((size_t)t * (size_t)b->nvars * row + (before + k) * row);
        if (pread(*(int *)ctx, out + (size_t)t * b->rowlen, row, off) != (ssize_t)row)
            DIE("verify %s: short read of row %d of variable %d", b->path, t, v);
    }
}

static void hdf5_read(hid_t file, const bench_t *b, const char *name, int rank, const hsize_t *shape,
                      const hsize_t *start, const hsize_t *count, float *out)
{
    hid_t ds = H5OK(H5Dopen2(file, name, H5P_DEFAULT));
    hid_t fs = H5OK(H5Dget_space(ds));
    hsize_t dims[3];
    if (H5Sget_simple_extent_ndims(fs) != rank) DIE("verify %s: %s has the wrong rank", b->path, name);
    H5OK(H5Sget_simple_extent_dims(fs, dims, NULL));
    for (int i = 0; i < rank; i++)
        if (dims[i] != shape[i])
            DIE("verify %s: %s dim %d is %llu, expected %llu", b->path, name, i, (unsigned long long)dims[i],
                (unsigned long long)shape[i]);
    H5OK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t ms = H5OK(H5Screate_simple(rank, count, NULL));
    H5OK(H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out));
    H5OK(H5Sclose(ms));
    H5OK(H5Sclose(fs));
    H5OK(H5Dclose(ds));
}

static void hdf5_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    hsize_t shape[3] = {b->z, b->n, b->n}, start[3] = {i, 0, 0}, count[3] = {1, b->n, b->n};
    hdf5_read(*(hid_t *)ctx, b, "x", 3, shape, start, count, out);
}

static void hdf5_var(void *ctx, const bench_t *b, int v, float *out)
{
    char name[32];
    var_name(name, sizeof name, v);
    hsize_t shape[2] = {(hsize_t)b->nsteps, b->rowlen}, start[2] = {0, 0};
    hdf5_read(*(hid_t *)ctx, b, name, 2, shape, start, shape, out);
}

static void pnetcdf_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    int nc = *(int *)ctx, var;
    NC_CHECK(ncmpi_inq_varid(nc, "x", &var));
    MPI_Offset start[3] = {(MPI_Offset)i, 0, 0}, count[3] = {1, (MPI_Offset)b->n, (MPI_Offset)b->n};
    NC_CHECK(ncmpi_get_vara_float_all(nc, var, start, count, out));
}

static void pnetcdf_var(void *ctx, const bench_t *b, int v, float *out)
{
    int nc = *(int *)ctx, var;
    char name[32];
    var_name(name, sizeof name, v);
    NC_CHECK(ncmpi_inq_varid(nc, name, &var));
    MPI_Offset start[2] = {0, 0}, count[2] = {b->nsteps, (MPI_Offset)b->rowlen};
    NC_CHECK(ncmpi_get_vara_float_all(nc, var, start, count, out));
}

/* libh5log: read through the reader library as of the newest tick. */
static uint32_t h5log_objid(h5l_reader_t *r, const bench_t *b, const char *path)
{
    long found = -1;
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    for (size_t i = 0; i < s->nobjs && found < 0; i++)
        if (s->objs[i].kind == H5L_OBJ_VAR && strcmp(s->objs[i].path, path) == 0) found = (long)i;
    h5l_reader_unlock(r);
    if (found < 0) DIE("verify %s: variable %s not found by the reader", b->path, path);
    return (uint32_t)found;
}

static void h5log_read(h5l_reader_t *r, const bench_t *b, const char *path, const uint64_t *start,
                       const uint64_t *count, float *out)
{
    h5l_err_t e;
    uint32_t id = h5log_objid(r, b, path);
    int rc = h5l_reader_read(r, h5l_reader_ntick(r), id, start, count, out, &e);
    if (rc != H5L_OK) DIE("verify %s: h5l_reader_read %s: %s", b->path, path, e.msg);
}

static void h5log_plane(void *ctx, const bench_t *b, uint64_t i, float *out)
{
    uint64_t start[3] = {i, 0, 0}, count[3] = {1, b->n, b->n};
    h5log_read(ctx, b, "/x", start, count, out);
}

static void h5log_var(void *ctx, const bench_t *b, int v, float *out)
{
    char name[32] = "/";
    var_name(name + 1, sizeof name - 1, v);
    uint64_t start[2] = {0, 0}, count[2] = {(uint64_t)b->nsteps, b->rowlen};
    h5log_read(ctx, b, name, start, count, out);
}

static void verify_all(const bench_t *b, const reader_ops_t *ops, void *ctx)
{
    if (b->pattern != PAT_M) {
        size_t len = (size_t)(b->n * b->n);
        float *out = alloc_floats(len);
        for (uint64_t i = 0; i < b->z; i++) {
            char where[64];
            snprintf(where, sizeof where, "plane %" PRIu64, i);
            memset(out, 0, len * sizeof(float));
            ops->plane(ctx, b, i, out);
            check_run(b, out, i * len, len, where);
        }
        free(out);
    } else {
        size_t len = (size_t)b->nsteps * b->rowlen;
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
        if (fd < 0) DIE("verify %s: open: %s", b->path, strerror(errno));
        off_t want = (off_t)b->bytes, size = lseek(fd, 0, SEEK_END);
        if (size != want) DIE("verify %s: size %lld, expected %lld", b->path, (long long)size, (long long)want);
        verify_all(b, &ops, &fd);
        close(fd);
    } else if (b->impl == IMPL_HDF5) {
        static const reader_ops_t ops = {hdf5_plane, hdf5_var};
        hid_t file = H5OK(H5Fopen(b->path, H5F_ACC_RDONLY, H5P_DEFAULT));
        verify_all(b, &ops, &file);
        H5OK(H5Fclose(file));
    } else if (b->impl == IMPL_PNETCDF) {
        static const reader_ops_t ops = {pnetcdf_plane, pnetcdf_var};
        int nc;
        NC_CHECK(ncmpi_open(MPI_COMM_SELF, b->path, NC_NOWRITE, MPI_INFO_NULL, &nc));
        verify_all(b, &ops, &nc);
        NC_CHECK(ncmpi_close(nc));
    } else {
        static const reader_ops_t ops = {h5log_plane, h5log_var};
        h5l_reader_t *r = NULL;
        h5l_err_t e;
        if (h5l_reader_open(b->path, &r, &e) != H5L_OK) DIE("verify %s: h5l_reader_open: %s", b->path, e.msg);
        if (!h5l_reader_closed(r)) DIE("verify %s: the reader sees no CLOSE record", b->path);
        if (h5l_reader_ntick(r) < b->nflush)
            DIE("verify %s: %" PRIu64 " ticks, expected at least %" PRIu64, b->path, h5l_reader_ntick(r), b->nflush);
        verify_all(b, &ops, r);
        h5l_reader_close(r);
        /* the anchors must make it a plain HDF5 file of the right shape */
        hid_t file = H5OK(H5Fopen(b->path, H5F_ACC_RDONLY, H5P_DEFAULT));
        hid_t ds = H5OK(H5Dopen2(file, b->pattern == PAT_M ? "v0000" : "x", H5P_DEFAULT));
        hid_t fs = H5OK(H5Dget_space(ds));
        hsize_t dims[3] = {0, 0, 0};
        int nd = H5Sget_simple_extent_ndims(fs);
        H5OK(H5Sget_simple_extent_dims(fs, dims, NULL));
        int ok = b->pattern == PAT_M ? nd == 2 && dims[0] == (hsize_t)b->nsteps && dims[1] == b->rowlen
                                     : nd == 3 && dims[0] == b->z && dims[1] == b->n && dims[2] == b->n;
        if (!ok)
            DIE("verify %s: the HDF5 anchor has rank %d and dims %llu x %llu x %llu", b->path, nd,
                (unsigned long long)dims[0], (unsigned long long)dims[1], (unsigned long long)dims[2]);
        H5OK(H5Sclose(fs));
        H5OK(H5Dclose(ds));
        H5OK(H5Fclose(file));
    }
}

/* libh5log: ticks and records as a reader finds them (how well adjacent
 * puts merged), and the file's size. */
static void h5log_counts(const bench_t *b, uint64_t *ticks, uint64_t *recs)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e;
    if (h5l_reader_open(b->path, &r, &e) != H5L_OK) DIE("%s: h5l_reader_open: %s", b->path, e.msg);
    *ticks = h5l_reader_ntick(r);
    *recs = h5l_reader_nrecords(r);
    h5l_reader_close(r);
}

/* ---- driver ----------------------------------------------------------- */

static void remove_files(const bench_t *b)
{
    char side[sizeof b->path + 8];
    snprintf(side, sizeof side, "%s.h5lj", b->path);
    if (unlink(b->path) != 0 && errno != ENOENT) DIE("unlink %s: %s", b->path, strerror(errno));
    if (unlink(side) != 0 && errno != ENOENT) DIE("unlink %s: %s", side, strerror(errno));
}

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static int parse_count(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > max) return -1;
    *out = v;
    return 0;
}

static const char usage[] = "usage: bench_write --pattern S|C|M --impl h5l_put|h5l_iput|mpiio|hdf5|pnetcdf --dir DIR\n"
                            "                   [--size N] [--planes Z] [--every G]\n"
                            "                   [--nvars V] [--steps T] [--rowlen L] [--verify] [--keep] [--cold]\n"
                            "                   [--small-pages] [--finalize] [--early]\n";

/* Returns 0, or -1 after printing why on rank 0. */
static int parse_args(bench_t *b, int argc, char **argv)
{
    uint64_t nv = 1000, ns = 100;
    b->pattern = b->impl = -1;
    b->n = 1024;
    b->z = 256;
    b->every = 8;
    b->rowlen = 256;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--verify"))
            b->verify = 1;
        else if (!strcmp(a, "--cold"))
            b->cold = 1;
        else if (!strcmp(a, "--keep"))
            b->keep = 1;
        else if (!strcmp(a, "--small-pages"))
            b->small_pages = 1;
        else if (!strcmp(a, "--finalize"))
            b->finalize = 1;
        else if (!strcmp(a, "--early"))
            b->early = 1;
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
            else if (!strcmp(a, "--planes"))
                bad = parse_count(v, 1u << 20, &b->z) != 0;
            else if (!strcmp(a, "--every"))
                bad = parse_count(v, 1u << 20, &b->every) != 0;
            else if (!strcmp(a, "--nvars"))
                bad = parse_count(v, 1000000, &nv) != 0;
            else if (!strcmp(a, "--steps"))
                bad = parse_count(v, 1000000, &ns) != 0;
            else if (!strcmp(a, "--rowlen"))
                bad = parse_count(v, 1u << 24, &b->rowlen) != 0;
            else
                bad = 1;
        }
        if (bad) {
            if (b->rank == 0) fprintf(stderr, "bench_write: bad argument '%s'\n%s", a, usage);
            return -1;
        }
    }
    b->nvars = (int)nv;
    b->nsteps = (int)ns;
    if (b->pattern < 0 || b->impl < 0 || !b->dir) {
        if (b->rank == 0) fputs(usage, stderr);
        return -1;
    }
    if (b->pattern != PAT_M && (b->n % (uint64_t)b->nranks || b->z % (uint64_t)b->nranks)) {
        if (b->rank == 0)
            fprintf(stderr, "bench_write: --size and --planes must be multiples of the number of ranks\n");
        return -1;
    }
    if (b->pattern != PAT_M && (b->z * b->n > INT32_MAX || b->every * b->n > INT32_MAX)) {
        if (b->rank == 0) fprintf(stderr, "bench_write: --planes x --size too large for MPI int counts\n");
        return -1;
    }
    const char *ext = b->impl == IMPL_MPIIO ? "dat" : b->impl == IMPL_PNETCDF ? "nc" : "h5";
    if ((size_t)snprintf(b->path, sizeof b->path, "%s/bench_%s_%s.%s", b->dir, pat_name[b->pattern], impl_name[b->impl],
                         ext) >= sizeof b->path) {
        if (b->rank == 0) fprintf(stderr, "bench_write: --dir too long\n");
        return -1;
    }
    return 0;
}

static void print_result(const bench_t *b, double seconds, const double *ph, const double *cpu)
{
    double mib = (double)b->bytes / (1024.0 * 1024.0);
    printf("{\"pattern\":\"%s\",\"impl\":\"%s%s\",\"nranks\":%d,", pat_name[b->pattern], impl_name[b->impl],
           b->early ? "_early" : "", b->nranks);
    if (b->pattern == PAT_M)
        printf("\"nvars\":%d,\"nsteps\":%d,\"rowlen\":%" PRIu64 ",", b->nvars, b->nsteps, b->rowlen);
    else
        printf("\"z\":%" PRIu64 ",\"n\":%" PRIu64 ",\"every\":%" PRIu64 ",", b->z, b->n, b->every);
    printf("\"flushes\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"seconds\":%.6f,\"MiB_per_s\":%.2f,\"phases\":{", b->nflush,
           b->bytes, seconds, seconds > 0 ? mib / seconds : 0.0);
    for (int i = 0, first = 1; i < NPH; i++) {
        if (ph[i] <= 0) continue;
        printf("%s\"%s\":%.6f", first ? "" : ",", ph_name[i], ph[i]);
        first = 0;
    }
    printf("},\"cpu_phases\":{");
    for (int i = 0, first = 1; i < NPH; i++) {
        if (cpu[i] <= 0) continue;
        printf("%s\"%s\":%.6f", first ? "" : ",", ph_name[i], cpu[i]);
        first = 0;
    }
    printf("}");
    if (b->impl == IMPL_PUT || b->impl == IMPL_IPUT) {
        uint64_t ticks, recs;
        h5log_counts(b, &ticks, &recs);
        printf(",\"ticks\":%" PRIu64 ",\"records\":%" PRIu64, ticks, recs);
    }
    printf(",\"warm\":%s,\"huge_pages\":%s,\"verified\":%s}\n", b->cold ? "false" : "true",
           b->small_pages ? "false" : "true", b->verify ? "true" : "false");
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
    if (b.rank == 0) remove_files(&b); /* MPI_MODE_CREATE does not truncate a stale file */

    /* this rank's share of the file's page cache, and room for the
     * libraries' own buffers */
    if (!b.cold) {
        MPI_Barrier(MPI_COMM_WORLD);
        warm_memory(&b, (size_t)(b.bytes / (uint64_t)b.nranks) + ((size_t)64 << 20));
    }
    perf_ctl("enable\n");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    b.mark = t0;
    b.cpu_mark = cpu_now();
    if (b.impl == IMPL_PUT || b.impl == IMPL_IPUT)
        run_h5log(&b);
    else if (b.impl == IMPL_HDF5)
        run_hdf5(&b);
    else if (b.impl == IMPL_PNETCDF)
        run_pnetcdf(&b);
    else
        run_mpiio(&b);
    double mine = MPI_Wtime() - t0, seconds = 0, ph[NPH], cpu[NPH];
    perf_ctl("disable\n");
    MPI_CHECK(MPI_Reduce(&mine, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce(b.ph, ph, NPH, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    MPI_CHECK(MPI_Reduce(b.cpu, cpu, NPH, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));

    free_data(&b); /* return the memory before rank 0 reads the file back */
    MPI_Barrier(MPI_COMM_WORLD);
    if (b.rank == 0) {
        if (b.verify) verify(&b);
        print_result(&b, seconds, ph, cpu);
        if (!b.keep) remove_files(&b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(b.step_row);
    MPI_Finalize();
    return 0;
}
