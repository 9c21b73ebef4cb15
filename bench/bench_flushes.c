/* bench_flushes.c — flush cost over a long run, and the log's overhead per
 * tick: N flushes of one row each of a [time, 64] float32 variable, every
 * rank writing its share of the row.
 *
 * Usage: mpirun -np P bench_flushes FILE [N] [--no-finalize] [--step-attr]
 * --step-attr: every flush also sets the global attribute "step" (a double,
 * the row's index), as models stamp their step: a log whose checkpoint
 * segments are not simple (docs/performance.md, "Opening long logs").
 * --no-finalize: h5l_close does not finalize (make bench-write's default,
 * like its other runs: finalizing stores the data a second time, in 100,000
 * one-row chunks here, which is make bench-standalone's subject).
 * Prints one JSON object (rank 0): mean flush time of the first and last
 * 10% of flushes and their ratio, the file's size after close, the data
 * bytes, and the overhead per tick ((size - data) / N), once for the
 * apparent size and once for the blocks on disk (the last log extent's
 * unwritten tail is sparse: up to 32 MiB of apparent size). Why: with one HDF5
 * dataset per tick a flush got slower as the file's metadata grew (0.05 ms
 * at the start, 2 ms after 100k flushes) and each tick cost 1.1-1.4 KB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "h5log.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: bench_flushes FILE [N] [--no-finalize] [--step-attr]\n");
        MPI_Finalize();
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 100000;
    h5l_opts_t o;
    h5l_opts_init(&o);
    int step_attr = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--no-finalize") == 0)
            o.no_finalize = 1;
        else if (strcmp(argv[i], "--step-attr") == 0)
            step_attr = 1;
    }
    h5l_file_t *f;
    if (h5l_create(argv[1], MPI_COMM_WORLD, &o, &f)) {
        fprintf(stderr, "%s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int t, x, v;
    h5l_def_dim(f, "time", H5L_UNLIMITED, &t);
    h5l_def_dim(f, "x", 64, &x);
    h5l_def_var(f, "/v", H5T_NATIVE_FLOAT, 2, (int[]){t, x}, NULL, &v);
    uint64_t share = 64 / (uint64_t)size, lo = share * (uint64_t)rank;
    if (rank == size - 1) share = 64 - lo;
    float row[64];
    double *dt = malloc((size_t)n * sizeof *dt);
    for (long i = 0; i < n; i++) {
        for (uint64_t k = 0; k < share; k++) row[k] = (float)i + (float)(lo + k) * 1e-3f;
        uint64_t st[2] = {(uint64_t)i, lo}, ct[2] = {1, share};
        h5l_put(f, v, st, ct, row);
        if (step_attr) {
            double step = (double)i;
            h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_DOUBLE, 1, &step);
        }
        double t0 = now();
        if (h5l_flush(f)) {
            fprintf(stderr, "%s\n", h5l_errmsg(f));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        dt[i] = now() - t0;
    }
    if (h5l_close(f)) fprintf(stderr, "%s\n", h5l_errmsg(NULL));
    if (rank == 0) {
        long k = n / 10 ? n / 10 : 1;
        double a = 0, b = 0;
        for (long i = 0; i < k; i++) {
            a += dt[i];
            b += dt[n - k + i];
        }
        struct stat s;
        stat(argv[1], &s);
        double data = (double)n * 64 * 4;
        printf("{\"benchmark\": \"flushes\", \"ranks\": %d, \"flushes\": %ld, \"first10_mean_ms\": %.4f, "
               "\"last10_mean_ms\": %.4f, \"ratio_last_first\": %.3f, \"file_bytes\": %lld, \"data_bytes\": %.0f, "
               "\"overhead_bytes_per_tick\": %.1f, \"disk_bytes\": %lld, \"disk_overhead_bytes_per_tick\": %.1f}\n",
               size, n, a / k * 1e3, b / k * 1e3, b / a, (long long)s.st_size, data,
               ((double)s.st_size - data) / (double)n, (long long)s.st_blocks * 512,
               ((double)s.st_blocks * 512 - data) / (double)n);
    }
    free(dt);
    MPI_Finalize();
    return 0;
}
