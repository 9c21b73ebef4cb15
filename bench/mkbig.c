/* mkbig.c — write one big log-layout file for the read benchmark.
 *
 *   mpirun -np P mkbig FILE [--gib G] [--chunked] [--rows R] [--flushes F]
 *
 * One float32 variable /x of shape [N, 1024, 512], N = round(G * 512) so the
 * variable is G GiB (G defaults to 2: N = 1024). Rank r owns the contiguous
 * slab of rows [r*N/P, (r+1)*N/P) of dim 0 and writes it with h5l_put in
 * pieces of R rows (default 8: 16 MiB a piece), in F flushes (default 4)
 * spread evenly over the pieces. Contiguous by default (chunk NULL: the
 * reader indexes it in 1 MiB slabs of [1,512,512]); --chunked uses chunks of
 * [16, 256, 512] (8 MiB), which pieces of fewer than 16 rows only half
 * cover, so every chunk is assembled from two records.
 *
 * Values are deterministic and exact to check:
 *   x[i,j,k] = (float)(i*0.5 + j + k*1e-3)   (computed in double, left to
 *                                            right, then rounded once)
 *
 * Output (rank 0): one JSON object on one line: the shape, bytes, layout and
 * the write time (MPI_Wtime, max over ranks, h5l_create to h5l_close). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5log.h"

#define NJ 1024
#define NK 512

static int g_rank = -1;

static void die_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die_at(int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "mkbig[rank %d] line %d: ", g_rank, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#define DIE(...) die_at(__LINE__, __VA_ARGS__)

#define H5L_CHECK(call, f)                                                                                             \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != H5L_OK) DIE("%s: %s [%s]", #call, h5l_errmsg(f), h5l_strerror(rc_));                                \
    } while (0)

static void usage(FILE *o)
{
    fprintf(o, "usage: mpirun -np P mkbig FILE [--gib G] [--chunked] [--rows R] [--flushes F]\n"
               "  writes /x float32 [N,1024,512], N = G*512 (G default 2), x[i,j,k] = i*0.5+j+k*1e-3\n");
}

/* Rows [i0, i0+nrows) of x into buf. */
static void fill_rows(float *buf, uint64_t i0, uint64_t nrows)
{
    for (uint64_t i = 0; i < nrows; i++) {
        double base = (double)(i0 + i) * 0.5;
        float *p = buf + i * NJ * NK;
        for (uint64_t j = 0; j < NJ; j++)
            for (uint64_t k = 0; k < NK; k++) *p++ = (float)(base + (double)j + (double)k * 1e-3);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    g_rank = rank;

    const char *path = NULL;
    double gib = 2.0;
    int chunked = 0;
    long rows = 8, flushes = 4;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--gib") && a + 1 < argc)
            gib = atof(argv[++a]);
        else if (!strcmp(argv[a], "--chunked"))
            chunked = 1;
        else if (!strcmp(argv[a], "--rows") && a + 1 < argc)
            rows = atol(argv[++a]);
        else if (!strcmp(argv[a], "--flushes") && a + 1 < argc)
            flushes = atol(argv[++a]);
        else if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            if (rank == 0) usage(stdout);
            MPI_Finalize();
            return 0;
        } else if (argv[a][0] != '-' && !path)
            path = argv[a];
        else {
            if (rank == 0) usage(stderr);
            MPI_Finalize();
            return 2;
        }
    }
    if (!path || !(gib > 0) || rows < 1 || flushes < 1) {
        if (rank == 0) usage(stderr);
        MPI_Finalize();
        return 2;
    }
    uint64_t n = (uint64_t)(gib * 512.0 + 0.5); /* rows of 2 MiB */
    if (n < (uint64_t)nranks) n = (uint64_t)nranks;
    const uint64_t rowel = (uint64_t)NJ * NK;
    uint64_t lo = (uint64_t)rank * n / (uint64_t)nranks, hi = (uint64_t)(rank + 1) * n / (uint64_t)nranks;
    /* every rank flushes at the same piece indices: count pieces of the
     * biggest slab */
    uint64_t maxrows = (n + (uint64_t)nranks - 1) / (uint64_t)nranks;
    uint64_t maxpieces = (maxrows + (uint64_t)rows - 1) / (uint64_t)rows;
    uint64_t per_flush = (maxpieces + (uint64_t)flushes - 1) / (uint64_t)flushes;
    if (per_flush == 0) per_flush = 1;

    float *buf = malloc((size_t)rows * rowel * sizeof(float));
    if (!buf) DIE("out of memory");

    h5l_opts_t o;
    h5l_opts_init(&o);
    size_t need = (size_t)(per_flush * (uint64_t)rows * rowel * sizeof(float));
    if (o.buffer_limit < need + ((size_t)64 << 20)) o.buffer_limit = need + ((size_t)64 << 20);

    double gen_s = 0, t0, t1;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    h5l_file_t *f = NULL;
    H5L_CHECK(h5l_create(path, MPI_COMM_WORLD, &o, &f), f);
    int d[3], var;
    H5L_CHECK(h5l_def_dim(f, "i", n, &d[0]), f);
    H5L_CHECK(h5l_def_dim(f, "j", NJ, &d[1]), f);
    H5L_CHECK(h5l_def_dim(f, "k", NK, &d[2]), f);
    uint64_t chunk[3] = {16, 256, 512};
    H5L_CHECK(h5l_def_var(f, "/x", H5T_IEEE_F32LE, 3, d, chunked ? chunk : NULL, &var), f);
    H5L_CHECK(h5l_put_att_text(f, var, "formula", "x[i,j,k] = i*0.5 + j + k*1e-3"), f);
    uint64_t nflush = 0;
    for (uint64_t p = 0; p < maxpieces; p++) {
        uint64_t i0 = lo + p * (uint64_t)rows;
        if (i0 < hi) {
            uint64_t nr = hi - i0 < (uint64_t)rows ? hi - i0 : (uint64_t)rows;
            double g = MPI_Wtime();
            fill_rows(buf, i0, nr);
            gen_s += MPI_Wtime() - g;
            uint64_t start[3] = {i0, 0, 0}, count[3] = {nr, NJ, NK};
            H5L_CHECK(h5l_put(f, var, start, count, buf), f);
        }
        if ((p + 1) % per_flush == 0 || p + 1 == maxpieces) {
            H5L_CHECK(h5l_flush(f), f);
            nflush++;
        }
    }
    H5L_CHECK(h5l_close(f), NULL);
    t1 = MPI_Wtime();
    double secs = t1 - t0, maxs = 0, maxgen = 0;
    MPI_Reduce(&secs, &maxs, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&gen_s, &maxgen, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        uint64_t bytes = n * rowel * sizeof(float);
        printf("{\"file\":\"%s\",\"var\":\"/x\",\"shape\":[%llu,%d,%d],\"layout\":\"%s\","
               "\"chunk\":%s,\"bytes\":%llu,\"nranks\":%d,\"rows_per_put\":%ld,\"flushes\":%llu,"
               "\"seconds\":%.6f,\"generate_seconds\":%.6f}\n",
               path, (unsigned long long)n, NJ, NK, chunked ? "chunked" : "contiguous",
               chunked ? "[16,256,512]" : "null", (unsigned long long)bytes, nranks, rows, (unsigned long long)nflush,
               maxs, maxgen);
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
