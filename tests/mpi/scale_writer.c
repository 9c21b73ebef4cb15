/* scale_writer.c — log files at the scales the canonical view must handle
 * (tests/e2e/test_scale.py): many variables sharing one dimension, and a
 * sparse unlimited axis with one row far out.
 *
 * Usage: scale_writer many N OUT.h5   N float variables v00000.. over
 *                                     (time unlimited, x = 4), chunk (1, 4),
 *                                     two rows each: v_i[t][j] = i*100+t*10+j
 *        scale_writer sparse T OUT.h5  one int32 variable "s" over (time
 *                                     unlimited, x = 64), chunk (16, 64),
 *                                     fill -1; row 3 and row T hold
 *                                     s[t][j] = t % 1000 * 100 + j
 *        scale_writer sparse-nofill T OUT.h5  the same with netCDF's NOFILL
 *                                     instead of a fill value
 * Run on one rank. Exit status 0 on success, 1 on a failed call (message on
 * stderr), 2 on usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>
#include "h5log.h"

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != 0) {                                                                                             \
            fprintf(stderr, "scale_writer: %s: %s\n", #call, h5l_errmsg(f));                                           \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

static int many(h5l_file_t *f, long n)
{
    int dims[2];
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    CHECK(h5l_def_dim(f, "x", 4, &dims[1]));
    uint64_t chunk[2] = {1, 4};
    int tid;
    CHECK(h5l_def_var(f, "/time", H5T_NATIVE_DOUBLE, 1, dims, chunk, &tid));
    int *ids = malloc((size_t)n * sizeof *ids);
    if (!ids) return 1;
    for (long i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "/v%05ld", i);
        CHECK(h5l_def_var(f, name, H5T_NATIVE_FLOAT, 2, dims, chunk, &ids[i]));
    }
    for (long i = 0; i < n; i++) {
        float row[2][4];
        for (int t = 0; t < 2; t++)
            for (int j = 0; j < 4; j++) row[t][j] = (float)(i * 100 + t * 10 + j);
        uint64_t st[2] = {0, 0}, ct[2] = {2, 4};
        CHECK(h5l_put(f, ids[i], st, ct, row));
    }
    double tv[2] = {0.5, 1.5};
    uint64_t st0 = 0, ct0 = 2;
    CHECK(h5l_put(f, tid, &st0, &ct0, tv));
    free(ids);
    return 0;
}

static int sparse(h5l_file_t *f, unsigned long long far, int nofill)
{
    int dims[2], id;
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &dims[0]));
    CHECK(h5l_def_dim(f, "x", 64, &dims[1]));
    uint64_t chunk[2] = {16, 64};
    CHECK(h5l_def_var(f, "/s", H5T_NATIVE_INT32, 2, dims, chunk, &id));
    int fill = -1;
    if (nofill)
        CHECK(h5l_def_var_nofill(f, id));
    else
        CHECK(h5l_def_var_fill(f, id, &fill));
    unsigned long long rows[2] = {3, far};
    for (int r = 0; r < 2; r++) {
        int32_t row[64];
        for (int j = 0; j < 64; j++) row[j] = (int32_t)(rows[r] % 1000 * 100 + (unsigned long long)j);
        uint64_t st[2] = {rows[r], 0}, ct[2] = {1, 64};
        CHECK(h5l_put(f, id, st, ct, row));
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int nofill = argc == 4 && !strcmp(argv[1], "sparse-nofill");
    if (argc != 4 || (strcmp(argv[1], "many") && strcmp(argv[1], "sparse") && !nofill)) {
        fprintf(stderr, "usage: scale_writer many N OUT.h5 | sparse T OUT.h5 | sparse-nofill T OUT.h5\n");
        MPI_Finalize();
        return 2;
    }
    h5l_file_t *f = NULL;
    if (h5l_create(argv[3], MPI_COMM_WORLD, NULL, &f) != 0) {
        fprintf(stderr, "scale_writer: %s: %s\n", argv[3], h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rc = !strcmp(argv[1], "many") ? many(f, strtol(argv[2], NULL, 10))
                                      : sparse(f, strtoull(argv[2], NULL, 10), nofill);
    CHECK(h5l_flush(f));
    if (h5l_close(f) != 0) {
        fprintf(stderr, "scale_writer: close: %s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return rc;
}
