/* bench_swmr_writer.c — the writers of the live-view tests at the scale of
 * the VFD SWMR design's own acceptance tests (bench/bench_swmr.py,
 * tests/e2e/test_swmr.py).
 *
 * Usage: mpirun -np R bench_swmr_writer FILE vars|planes --passes P --flush SECONDS
 *                                        [--vars N] [--row L] [--side S] [--planes-vars M]
 *
 * vars:   N variables /v00000.. int32 [time, L] (L = 4), default chunking
 *         (netCDF's: one row per chunk), extended round-robin: pass k
 *         (1-based) writes row k-1 of every variable, variable i by rank
 *         i mod R, then one flush (one tick per pass).
 * planes: M variables /p0.. (M = 10) int32 [time, S, S] (S = 1000), default
 *         chunking (a plane per chunk), grown a plane at a time: pass k
 *         writes plane k-1 of every variable, each rank a band of its rows.
 *
 * Values (so any reader can check any element without the writer): element
 * j of row t of /vI is (uint32)((t * N + I) * L + j); element (y, x) of
 * plane t of /pI is (uint32)(t * 1000003 + I * 7919 + y * S + x); stored as
 * int32 (two's complement of that).
 *
 * One flush per pass, every SECONDS (a pass that takes longer is followed at
 * once by the next). After each flush rank 0 prints "tick K T" (T: seconds
 * since the epoch, CLOCK_REALTIME, when the flush returned: the commit) on
 * stdout, flushed, so a reader can measure how late it sees pass K. The file
 * is closed without finalizing (no_finalize): the benchmark is the live view;
 * copying 10^8 one-row chunks into place at close would take hours.
 * Exit status 0, 1 on a failed call, 2 on usage errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log.h"

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != 0) {                                                                                             \
            fprintf(stderr, "bench_swmr_writer: %s: %s\n", #call, h5l_errmsg(f));                                      \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

static double mono(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    for (;;) {
        double left = t - mono();
        if (left <= 0) return;
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        if (nanosleep(&ts, NULL) == 0 || errno != EINTR) return;
    }
}

static int arg_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return end == s || *end || errno;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long nvars = 10000, passes = -1, row = 4, side = 1000, nplanes = 10;
    double flush = -1;
    int planes;
    h5l_file_t *f = NULL;
    if (argc < 3 || argv[1][0] == '-') goto usage;
    if (!strcmp(argv[2], "vars"))
        planes = 0;
    else if (!strcmp(argv[2], "planes"))
        planes = 1;
    else
        goto usage;
    for (int i = 3; i + 1 < argc; i += 2) {
        int bad = 0;
        if (!strcmp(argv[i], "--vars"))
            bad = arg_long(argv[i + 1], &nvars);
        else if (!strcmp(argv[i], "--passes"))
            bad = arg_long(argv[i + 1], &passes);
        else if (!strcmp(argv[i], "--row"))
            bad = arg_long(argv[i + 1], &row);
        else if (!strcmp(argv[i], "--side"))
            bad = arg_long(argv[i + 1], &side);
        else if (!strcmp(argv[i], "--planes-vars"))
            bad = arg_long(argv[i + 1], &nplanes);
        else if (!strcmp(argv[i], "--flush")) {
            char *end;
            flush = strtod(argv[i + 1], &end);
            bad = end == argv[i + 1] || *end;
        } else
            goto usage;
        if (bad) goto usage;
    }
    if ((argc - 3) % 2 || passes < 1 || flush < 0 || nvars < 1 || nvars > 1000000 || row < 1 || row > 4096 ||
        side < 1 || side > 8192 || nplanes < 1 || nplanes > 1000)
        goto usage;
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.no_finalize = 1;
    CHECK(h5l_create(argv[1], MPI_COMM_WORLD, &o, &f));
    int dims[3];
    long nv = planes ? nplanes : nvars;
    int *ids = malloc((size_t)nv * sizeof *ids);
    size_t bufn = planes ? (size_t)side * (size_t)side : (size_t)row; /* one rank's part, at most */
    uint32_t *buf = malloc(bufn * sizeof *buf);
    if (!ids || !buf) {
        fprintf(stderr, "bench_swmr_writer: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    if (planes) {
        CHECK(h5l_def_dim(f, "y", (uint64_t)side, &dims[1]));
        CHECK(h5l_def_dim(f, "x", (uint64_t)side, &dims[2]));
    } else {
        CHECK(h5l_def_dim(f, "col", (uint64_t)row, &dims[1]));
    }
    for (long i = 0; i < nv; i++) {
        char name[32];
        snprintf(name, sizeof name, planes ? "/p%ld" : "/v%05ld", i);
        CHECK(h5l_def_var(f, name, H5T_NATIVE_INT32, planes ? 3 : 2, dims, NULL, &ids[i]));
    }
    /* a band of rows per rank (planes) */
    uint64_t y0 = (uint64_t)side * (uint64_t)rank / (uint64_t)nranks;
    uint64_t y1 = (uint64_t)side * (uint64_t)(rank + 1) / (uint64_t)nranks;
    double t0 = mono();
    for (long k = 1; k <= passes; k++) {
        uint64_t t = (uint64_t)k - 1;
        if (planes) {
            for (long i = 0; i < nv && y1 > y0; i++) {
                size_t n = 0;
                for (uint64_t y = y0; y < y1; y++)
                    for (uint64_t x = 0; x < (uint64_t)side; x++)
                        buf[n++] = (uint32_t)(t * 1000003u + (uint64_t)i * 7919u + y * (uint64_t)side + x);
                uint64_t st[3] = {t, y0, 0}, ct[3] = {1, y1 - y0, (uint64_t)side};
                CHECK(h5l_put(f, ids[i], st, ct, buf));
            }
        } else {
            for (long i = rank; i < nv; i += nranks) {
                for (long j = 0; j < row; j++)
                    buf[j] = (uint32_t)((t * (uint64_t)nvars + (uint64_t)i) * (uint64_t)row + (uint64_t)j);
                uint64_t st[2] = {t, 0}, ct[2] = {1, (uint64_t)row};
                CHECK(h5l_put(f, ids[i], st, ct, buf));
            }
        }
        CHECK(h5l_flush(f));
        if (rank == 0) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            printf("tick %ld %.6f\n", k, (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
            fflush(stdout);
        }
        if (k < passes) sleep_until(t0 + (double)k * flush);
    }
    CHECK(h5l_close(f));
    if (rank == 0) {
        printf("done %.3f\n", mono() - t0);
        fflush(stdout);
    }
    free(ids);
    free(buf);
    MPI_Finalize();
    return 0;
usage:
    if (rank == 0)
        fprintf(stderr, "usage: bench_swmr_writer FILE vars|planes --passes P --flush SECONDS [--vars N] [--row L] "
                        "[--side S] [--planes-vars M]\n");
    MPI_Finalize();
    return 2;
}
