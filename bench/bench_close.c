/* bench_close.c — what finalizing costs at h5l_close (docs/performance.md,
 * "Reading through the mount").
 *
 *   mpirun -np P bench_close --dir DIR --pattern a|c [--mib M] [--no-finalize]
 *
 *   a  one float32 variable /x [M, 1024, 256], contiguous (M planes of 1 MiB);
 *      rank r puts its share of the planes with one h5l_iput; one flush.
 *   c  1000 float32 variables [time(unlimited), 256] (default chunks
 *      [1, 256]: 1 KiB each), M steps; every step every variable gets one
 *      row from rank (v + t) % P, and a flush: M * 1000 chunks of 1 KiB.
 * The data is generated before the clock starts. After a barrier each rank
 * times its writes and flushes, then h5l_close; each time is the maximum
 * over ranks. Output: one JSON line from rank 0 with the times, the data
 * bytes, the file's size and its allocated bytes (st_blocks: the log's
 * unused extent tail is a hole). The file is left in DIR/close_PATTERN.h5. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <mpi.h>

#include "h5log.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define DIE(...)                                                                                                       \
    do {                                                                                                               \
        fprintf(stderr, "bench_close: " __VA_ARGS__);                                                                  \
        fprintf(stderr, "\n");                                                                                         \
        MPI_Abort(MPI_COMM_WORLD, 1);                                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, np;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *dir = ".", *pat = "a";
    uint64_t mib = 256;
    int nofin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--pattern") && i + 1 < argc)
            pat = argv[++i];
        else if (!strcmp(argv[i], "--mib") && i + 1 < argc)
            mib = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--no-finalize"))
            nofin = 1;
        else
            DIE("usage: bench_close --dir DIR --pattern a|c [--mib M] [--no-finalize]");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/close_%s.h5", dir, pat);
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.no_finalize = nofin;
    o.buffer_limit = (size_t)4 << 30;
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, &o, &f)) DIE("%s", h5l_errmsg(NULL));
    uint64_t data = 0;
    float *buf = NULL;
    double t0 = 0;
    if (pat[0] == 'a') {
        uint64_t n = mib, lo = n * rank / np, hi = n * (rank + 1) / np;
        int d[3], v;
        h5l_def_dim(f, "z", n, &d[0]);
        h5l_def_dim(f, "y", 1024, &d[1]);
        h5l_def_dim(f, "x", 256, &d[2]);
        if (h5l_def_var(f, "/x", H5T_IEEE_F32LE, 3, d, NULL, &v)) DIE("%s", h5l_errmsg(f));
        size_t cnt = (size_t)(hi - lo) * 1024 * 256;
        buf = malloc(cnt * sizeof *buf + 1);
        for (size_t i = 0; i < cnt; i++) buf[i] = (float)(lo * 262144 + i) * 0.5f;
        data = n * 1024 * 256 * 4;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        uint64_t s[3] = {lo, 0, 0}, c[3] = {hi - lo, 1024, 256};
        if (hi > lo && h5l_iput(f, v, s, c, buf)) DIE("%s", h5l_errmsg(f));
        if (h5l_flush(f)) DIE("%s", h5l_errmsg(f));
    } else {
        enum { V = 1000, W = 256 };
        int dt, dx, v[V];
        h5l_def_dim(f, "time", H5L_UNLIMITED, &dt);
        h5l_def_dim(f, "x", W, &dx);
        for (int i = 0; i < V; i++) {
            char name[32];
            snprintf(name, sizeof name, "/v%04d", i);
            if (h5l_def_var(f, name, H5T_IEEE_F32LE, 2, (int[]){dt, dx}, NULL, &v[i])) DIE("%s", h5l_errmsg(f));
        }
        buf = malloc(W * sizeof *buf);
        data = mib * V * W * 4;
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = now();
        for (uint64_t t = 0; t < mib; t++) {
            for (int i = 0; i < V; i++) {
                if ((int)((i + t) % (uint64_t)np) != rank) continue;
                for (int k = 0; k < W; k++) buf[k] = (float)(t * 1000 + i) + k * 1e-3f;
                uint64_t s[2] = {t, 0}, c[2] = {1, W};
                if (h5l_put(f, v[i], s, c, buf)) DIE("%s", h5l_errmsg(f));
            }
            if (h5l_flush(f)) DIE("%s", h5l_errmsg(f));
        }
    }
    double t1 = now();
    int rc = h5l_close(f);
    double t2 = now();
    if (rc) DIE("h5l_close: %s", h5l_errmsg(NULL));
    double w = t1 - t0, c = t2 - t1;
    MPI_Reduce(rank ? &w : MPI_IN_PLACE, &w, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(rank ? &c : MPI_IN_PLACE, &c, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        struct stat st;
        if (stat(path, &st)) DIE("%s: stat failed", path);
        printf("{\"pattern\": \"%s\", \"ranks\": %d, \"finalize\": %s, \"data_bytes\": %" PRIu64
               ", \"write_flush_s\": %.4f, \"close_s\": %.4f, \"file_bytes\": %lld, \"allocated_bytes\": %lld}\n",
               pat, np, nofin ? "false" : "true", data, w, c, (long long)st.st_size, (long long)st.st_blocks * 512);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
