/* live_writer.c — an MPI writer that publishes a predictable tick stream, for
 * the live-reading tests of the h5logfs daemon (tests/e2e/test_fused.py).
 *
 * Usage: mpirun -np P live_writer FILE --ticks N --interval SECONDS
 *                                      [--rows-per-tick R] [--hold SECONDS]
 *
 * Dimensions: t (unlimited), n = 64, m = 1024, one = 1.
 * Variables:
 *   /v      float64 [t, n], default chunking: at tick k (1-based) the ranks
 *           together write rows (k-1)*R .. k*R-1, every element = k;
 *   /w      int32 [m], contiguous: each tick every rank overwrites its share,
 *           so after tick k all of /w equals k;
 *   /stamp  int64 [one], contiguous, written by rank 0: k at tick k.
 * Global text attribute "title"; /v has "units".
 *
 * Hence a reader that sees stamp == S must see /w all S and /v of shape
 * (S*R, 64) with row i == i / R + 1; anything else is a torn or mixed
 * snapshot. One flush per tick, a sleep of --interval between ticks, close at
 * the end. --hold sleeps that long after creating the file and defining
 * everything, before the first flush: meanwhile the file is at tick 0
 * (nothing committed), and rank 0 prints "created" when the hold starts;
 * --first-delay S is the same without the note (h5logtail's tests). Rank 0 prints "tick K" after each flush (stdout, flushed) and
 * "live_writer: N ticks, R rows per tick" at the end. Exit status 0 on
 * success. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log.h"

enum { NCOLS = 64, MLEN = 1024 };

static int g_rank;

static void die(h5l_file_t *f, const char *what, int rc)
{
    fprintf(stderr, "live_writer rank %d: %s failed (%d): %s\n", g_rank, what, rc, h5l_errmsg(f));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void sleep_seconds(double s)
{
    if (s <= 0) return;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* [lo, hi) of `total` items owned by `rank` of `size`. */
static void share(uint64_t total, int rank, int size, uint64_t *lo, uint64_t *hi)
{
    *lo = total * (uint64_t)rank / (uint64_t)size;
    *hi = total * (uint64_t)(rank + 1) / (uint64_t)size;
}

static void usage(void)
{
    if (g_rank == 0)
        fprintf(stderr, "usage: live_writer FILE --ticks N --interval SECONDS [--rows-per-tick R] [--hold SECONDS] "
                        "[--first-delay SECONDS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_rank = rank;
    if (argc < 2 || argv[1][0] == '-') usage();
    const char *path = argv[1];
    long ticks = -1, rows = 4;
    double interval = -1, hold = 0, first_delay = 0;
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc) usage();
        char *end = NULL;
        if (!strcmp(argv[i], "--ticks"))
            ticks = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--interval"))
            interval = strtod(argv[i + 1], &end);
        else if (!strcmp(argv[i], "--rows-per-tick"))
            rows = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--hold"))
            hold = strtod(argv[i + 1], &end);
        else if (!strcmp(argv[i], "--first-delay"))
            first_delay = strtod(argv[i + 1], &end);
        else
            usage();
        if (!end || *end) usage();
    }
    if (ticks < 1 || interval < 0 || hold < 0 || first_delay < 0 || rows < 0 || rows > 1000000)
        usage(); /* 0: data-only ticks */

    h5l_file_t *f;
    int rc = h5l_create(path, MPI_COMM_WORLD, NULL, &f);
    if (rc) die(NULL, "h5l_create", rc);

    int dt, dn, dm, d1, vv, vw, vs;
    if ((rc = h5l_def_dim(f, "t", H5L_UNLIMITED, &dt))) die(f, "def_dim t", rc);
    if ((rc = h5l_def_dim(f, "n", NCOLS, &dn))) die(f, "def_dim n", rc);
    if ((rc = h5l_def_dim(f, "m", MLEN, &dm))) die(f, "def_dim m", rc);
    if ((rc = h5l_def_dim(f, "one", 1, &d1))) die(f, "def_dim one", rc);
    if ((rc = h5l_def_var(f, "/v", H5T_NATIVE_DOUBLE, 2, (int[]){dt, dn}, NULL, &vv))) die(f, "def_var /v", rc);
    if ((rc = h5l_def_var(f, "/w", H5T_NATIVE_INT32, 1, (int[]){dm}, NULL, &vw))) die(f, "def_var /w", rc);
    if ((rc = h5l_def_var(f, "/stamp", H5T_NATIVE_INT64, 1, (int[]){d1}, NULL, &vs))) die(f, "def_var /stamp", rc);
    if ((rc = h5l_put_att_text(f, H5L_GLOBAL, "title", "h5log live writer"))) die(f, "put_att title", rc);
    if ((rc = h5l_put_att_text(f, vv, "units", "tick"))) die(f, "put_att units", rc);

    uint64_t wlo, whi, rlo, rhi;
    share(MLEN, rank, size, &wlo, &whi);
    share((uint64_t)rows, rank, size, &rlo, &rhi);
    int32_t *wbuf = malloc((whi - wlo + 1) * sizeof *wbuf);
    double *vbuf = malloc((rhi - rlo + 1) * NCOLS * sizeof *vbuf);
    if (!wbuf || !vbuf) die(f, "malloc", H5L_ENOMEM);

    if (hold > 0) {
        if (rank == 0) {
            printf("created\n");
            fflush(stdout);
        }
        sleep_seconds(hold);
    }
    for (long k = 1; k <= ticks; k++) {
        sleep_seconds(k > 1 ? interval : first_delay);
        if (rhi > rlo) {
            for (uint64_t i = 0; i < (rhi - rlo) * NCOLS; i++) vbuf[i] = (double)k;
            uint64_t st[2] = {(uint64_t)(k - 1) * (uint64_t)rows + rlo, 0}, ct[2] = {rhi - rlo, NCOLS};
            if ((rc = h5l_put(f, vv, st, ct, vbuf))) die(f, "put /v", rc);
        }
        if (whi > wlo) {
            for (uint64_t i = 0; i < whi - wlo; i++) wbuf[i] = (int32_t)k;
            uint64_t st[1] = {wlo}, ct[1] = {whi - wlo};
            if ((rc = h5l_put(f, vw, st, ct, wbuf))) die(f, "put /w", rc);
        }
        if (rank == 0) {
            int64_t s = k;
            uint64_t st[1] = {0}, ct[1] = {1};
            if ((rc = h5l_put(f, vs, st, ct, &s))) die(f, "put /stamp", rc);
        }
        if ((rc = h5l_flush(f))) die(f, "flush", rc);
        if (h5l_ntick(f) != (uint64_t)k) {
            fprintf(stderr, "live_writer: ntick %llu after flush %ld\n", (unsigned long long)h5l_ntick(f), k);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (rank == 0) {
            printf("tick %ld\n", k);
            fflush(stdout);
        }
    }
    if ((rc = h5l_close(f))) die(NULL, "close", rc);
    free(wbuf);
    free(vbuf);
    if (rank == 0) {
        printf("live_writer: %ld ticks, %ld rows per tick\n", ticks, rows);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
