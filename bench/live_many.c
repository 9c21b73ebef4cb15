/* live_many.c — a live file of many small-row variables, for the daemon's
 * scale benchmark (bench/bench_scale.sh) and tests/e2e/test_scale.py.
 *
 * Usage: mpirun -np 1 live_many FILE --vars N --ticks T --interval SECONDS
 *                                    [--chunk-rows R] [--step-attr 1]
 *
 * Dimensions: time (unlimited), x = 16. Variables /v00000.. float32
 * [time, x], chunk [R, 16] (R = 16384 by default: 1 MiB chunks, so the
 * newest rows are in an edge chunk; R = 0: the library's default chunking,
 * one row per chunk), and /stamp int64 [time], chunk [R]. At tick k (1-based) row k-1 of every variable is written, element
 * j of /vI = I * 1000 + k + j / 100, and /stamp[k-1] = k: 64-byte rows, the
 * case where a poller must not make the daemon assemble whole chunks.
 * --step-attr 1: each tick also sets the global int64 attribute "step" to
 * k, as models stamp their step or time (the attribute is set again with a
 * value of the same type and shape at every tick).
 * Rank 0 prints "tick K <seconds since the epoch>" after each flush
 * (stdout, flushed), so a reader can measure how late it sees a tick.
 * Exit status 0 on success, 1 on a failed call, 2 on usage errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log.h"

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != 0) {                                                                                             \
            fprintf(stderr, "live_many: %s: %s\n", #call, h5l_errmsg(f));                                              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

static void sleep_until(double t)
{
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = t - ((double)now.tv_sec + (double)now.tv_nsec * 1e-9);
        if (left <= 0) return;
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        if (nanosleep(&ts, NULL) == 0) return;
        if (errno != EINTR) return;
    }
}

static double mono(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long nvars = -1, ticks = -1, crows = 16384, step_attr = 0;
    double interval = -1;
    if (argc < 2 || argv[1][0] == '-') goto usage;
    for (int i = 2; i + 1 < argc; i += 2) {
        char *end = NULL;
        if (!strcmp(argv[i], "--vars"))
            nvars = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--ticks"))
            ticks = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--interval"))
            interval = strtod(argv[i + 1], &end);
        else if (!strcmp(argv[i], "--chunk-rows"))
            crows = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--step-attr"))
            step_attr = strtol(argv[i + 1], &end, 10);
        else
            goto usage;
        if (!end || *end) goto usage;
    }
    if (nvars < 1 || nvars > 100000 || ticks < 1 || interval < 0 || crows < 0 || crows > (1L << 24)) goto usage;
    h5l_file_t *f = NULL;
    CHECK(h5l_create(argv[1], MPI_COMM_WORLD, NULL, &f));
    int dims[2], sid;
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    CHECK(h5l_def_dim(f, "x", 16, &dims[1]));
    uint64_t chunk[2] = {(uint64_t)crows, 16};
    const uint64_t *cp = crows ? chunk : NULL;
    int *ids = malloc((size_t)nvars * sizeof *ids);
    if (!ids) return 1;
    for (long i = 0; i < nvars; i++) {
        char name[32];
        snprintf(name, sizeof name, "/v%05ld", i);
        CHECK(h5l_def_var(f, name, H5T_NATIVE_FLOAT, 2, dims, cp, &ids[i]));
    }
    CHECK(h5l_def_var(f, "/stamp", H5T_NATIVE_INT64, 1, dims, cp, &sid));
    double t0 = mono();
    for (long k = 1; k <= ticks; k++) {
        if (rank == 0) {
            for (long i = 0; i < nvars; i++) {
                float row[16];
                for (int j = 0; j < 16; j++) row[j] = (float)(i * 1000 + k) + (float)j / 100.0f;
                uint64_t st[2] = {(uint64_t)k - 1, 0}, ct[2] = {1, 16};
                CHECK(h5l_put(f, ids[i], st, ct, row));
            }
            int64_t s = k;
            uint64_t st = (uint64_t)k - 1, ct = 1;
            CHECK(h5l_put(f, sid, &st, &ct, &s));
        }
        if (step_attr) {
            int64_t s = k;
            CHECK(h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_INT64, 1, &s));
        }
        CHECK(h5l_flush(f));
        if (rank == 0) {
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            printf("tick %ld %.6f\n", k, (double)now.tv_sec + (double)now.tv_nsec * 1e-9);
            fflush(stdout);
        }
        if (k < ticks) sleep_until(t0 + (double)k * interval);
    }
    CHECK(h5l_close(f));
    free(ids);
    MPI_Finalize();
    return 0;
usage:
    fprintf(stderr, "usage: live_many FILE --vars N --ticks T --interval SECONDS [--chunk-rows R] [--step-attr 1]\n");
    MPI_Finalize();
    return 2;
}
