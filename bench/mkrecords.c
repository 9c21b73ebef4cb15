/* mkrecords — write a log-layout file with many small records, for
 * measuring what an index costs per record (bench/bench_memory.sh).
 *
 * Usage: mpirun -np P mkrecords FILE --records N [--flushes F]
 * One variable /r int32 [t unlimited, 4]; every put is one row, so the file
 * holds N records of 16 bytes; rows go round-robin over the ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5log.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: mkrecords FILE --records N [--flushes F]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t n = 1000000, flushes = 10;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--records"))
            n = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--flushes"))
            flushes = strtoull(argv[i + 1], NULL, 10);
    }
    h5l_opts_t o;
    h5l_opts_init(&o);
    h5l_file_t *f;
    int t, c, v;
    if (h5l_create(argv[1], MPI_COMM_WORLD, &o, &f)) {
        fprintf(stderr, "mkrecords: %s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    h5l_def_dim(f, "t", H5L_UNLIMITED, &t);
    h5l_def_dim(f, "c", 4, &c);
    h5l_def_var(f, "/r", H5T_NATIVE_INT32, 2, (int[]){t, c}, NULL, &v);
    uint64_t per = (n + flushes - 1) / flushes;
    for (uint64_t row = 0; row < n; row++) {
        if ((int)(row % (uint64_t)size) == rank) {
            int32_t vals[4] = {(int32_t)row, 1, 2, 3};
            uint64_t st[2] = {row, 0}, ct[2] = {1, 4};
            if (h5l_put(f, v, st, ct, vals)) {
                fprintf(stderr, "mkrecords: %s\n", h5l_errmsg(f));
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        if ((row + 1) % per == 0 || row + 1 == n) h5l_flush(f);
    }
    if (h5l_close(f)) {
        fprintf(stderr, "mkrecords: %s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
