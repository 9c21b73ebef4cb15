/* bench_open.c — what h5l_open (a restart) costs on a long log with many
 * variables, against the ticks in the file: it must not grow with the log
 * (issue 31: at most 50 ms for 10^6 ticks and 1,000 variables).
 *
 * Usage: mpirun -np P bench_open FILE TICKS VARS [ROUNDS] [--keep]
 * Writes FILE (unless --keep and FILE exists): VARS variables
 * /g/vK [time, 16] float32 (netCDF's default chunks, [1, 16]) and TICKS
 * ticks, tick t writing row t-1 of variable (t-1) mod VARS, with an
 * attribute set on every variable at tick 1 and the time axis growing by
 * one row a tick; closed without finalizing (the cheaper close: finalizing
 * is make bench-finalize's subject, and a reopened file is opened the
 * same way finalized or not). Then ROUNDS times (default 5): h5l_open on
 * P ranks (timed, wall clock, from the call on every rank to the return on
 * the slowest rank), one more tick (one row of /g/v0), h5l_close without
 * finalizing. Prints one JSON object: the sizes, the journal's bytes, each
 * round's open time in ms and their median, and the reopened file's tick
 * count (checked: TICKS + ROUNDS).
 *
 * Why a variable per tick in turn: every tick then has a record and a
 * DIMLEN op like a simulation's output step, and the checkpoints cover
 * 1000 variables' chunks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "h5log.h"
#include "h5log_reader.h"
#include "h5log/format.h" /* H5L_READER_NO_CHUNK_MAP: the reader h5l_open uses */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define DIE(...)                                                                                                       \
    do {                                                                                                               \
        fprintf(stderr, "bench_open: " __VA_ARGS__);                                                                   \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                                                  \
    } while (0)

static void write_file(const char *path, long ticks, int nvars, int rank)
{
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.no_finalize = 1;
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, &o, &f)) DIE("%s\n", h5l_errmsg(NULL));
    int t, x, *v = malloc(sizeof *v * (size_t)nvars);
    h5l_def_dim(f, "time", H5L_UNLIMITED, &t);
    h5l_def_dim(f, "x", 16, &x);
    for (int k = 0; k < nvars; k++) {
        char name[64];
        snprintf(name, sizeof name, "/g/v%d", k);
        if (h5l_def_var(f, name, H5T_NATIVE_FLOAT, 2, (int[]){t, x}, NULL, &v[k])) DIE("%s\n", h5l_errmsg(f));
        h5l_put_att_text(f, v[k], "units", "K");
    }
    float row[16];
    for (long i = 0; i < ticks; i++) {
        for (int k = 0; k < 16; k++) row[k] = (float)i + (float)k * 1e-3f;
        if (rank == 0 && h5l_put(f, v[i % nvars], (uint64_t[]){(uint64_t)i, 0}, (uint64_t[]){1, 16}, row))
            DIE("%s\n", h5l_errmsg(f));
        if (h5l_flush(f)) DIE("%s\n", h5l_errmsg(f));
    }
    if (h5l_close(f)) DIE("%s\n", h5l_errmsg(NULL));
    free(v);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int keep = argc > 1 && !strcmp(argv[argc - 1], "--keep");
    int na = argc - keep;
    if (na < 4) {
        if (!rank) fprintf(stderr, "usage: mpirun -np P bench_open FILE TICKS VARS [ROUNDS] [--keep]\n");
        MPI_Finalize();
        return 2;
    }
    const char *path = argv[1];
    long ticks = atol(argv[2]);
    int nvars = atoi(argv[3]), rounds = na > 4 ? atoi(argv[4]) : 5;
    struct stat st;
    double tw = 0;
    if (!(keep && stat(path, &st) == 0)) {
        double t0 = now();
        write_file(path, ticks, nvars, rank);
        tw = now() - t0;
    }
    stat(path, &st);
    double *ms = calloc((size_t)rounds, sizeof *ms);
    uint64_t nt = 0;
    int vid = -1;
    for (int r = 0; r < rounds; r++) {
        h5l_opts_t o;
        h5l_opts_init(&o);
        o.no_finalize = 1;
        h5l_file_t *f;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        int rc = h5l_open(path, MPI_COMM_WORLD, &o, &f);
        double dt = now() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rc) DIE("%s\n", h5l_errmsg(NULL));
        ms[r] = dt * 1e3;
        uint64_t len = 0;
        int t;
        if (h5l_inq_varid(f, "/g/v0", &vid) || h5l_inq_dimid(f, "time", &t) || h5l_inq_dimlen(f, t, &len))
            DIE("lookups failed after open\n");
        float row[16] = {0};
        if (rank == 0 && h5l_put(f, vid, (uint64_t[]){len, 0}, (uint64_t[]){1, 16}, row)) DIE("%s\n", h5l_errmsg(f));
        if (h5l_flush(f)) DIE("%s\n", h5l_errmsg(f));
        nt = h5l_ntick(f);
        if (h5l_close(f)) DIE("%s\n", h5l_errmsg(NULL));
    }
    /* the reader's share: the same open h5l_open's rank 0 makes first */
    double *rd = calloc((size_t)rounds, sizeof *rd), *rf = calloc((size_t)rounds, sizeof *rf);
    uint64_t jbytes = 0;
    for (int r = 0; rank == 0 && r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            h5l_reader_t *rr;
            h5l_err_t e = {0};
            double t0 = now();
            if (h5l_reader_open_flags(path, k ? 0 : H5L_READER_NO_CHUNK_MAP, &rr, &e)) DIE("%s\n", e.msg);
            (k ? rf : rd)[r] = (now() - t0) * 1e3;
            jbytes = h5l_reader_journal_pos(rr);
            h5l_reader_close(rr);
        }
    }
    qsort(rd, (size_t)rounds, sizeof *rd, cmpd);
    qsort(rf, (size_t)rounds, sizeof *rf, cmpd);
    double *sorted = malloc(sizeof *sorted * (size_t)rounds);
    memcpy(sorted, ms, sizeof *sorted * (size_t)rounds);
    qsort(sorted, (size_t)rounds, sizeof *sorted, cmpd);
    if (!rank) {
        printf("{\"bench\": \"open\", \"ranks\": %d, \"ticks\": %ld, \"vars\": %d, \"file_bytes\": %lld, "
               "\"write_s\": %.2f, \"open_ms\": [",
               size, ticks, nvars, (long long)st.st_size, tw);
        for (int r = 0; r < rounds; r++) printf("%s%.2f", r ? ", " : "", ms[r]);
        printf(
            "], \"open_ms_median\": %.2f, \"reader_open_ms_median\": %.2f, \"reader_open_with_map_ms_median\": %.2f, "
            "\"journal_bytes\": %llu, \"ticks_after\": %llu, \"ticks_ok\": %s}\n",
            sorted[rounds / 2], rd[rounds / 2], rf[rounds / 2], (unsigned long long)jbytes, (unsigned long long)nt,
            keep || nt == (uint64_t)(ticks + rounds) ? "true" : "false");
    }
    free(ms);
    free(rd);
    free(rf);
    free(sorted);
    MPI_Finalize();
    return 0;
}
