/* demo_writer — a small climate-model-like writer for `make demo`.
 *
 * Usage: mpirun -np P demo_writer FILE [--steps N] [--interval SECONDS]
 * Dimensions time (unlimited), lat = 90, lon = 180; coordinate variables
 * lat and lon; /atm/temperature and /atm/pressure (float32 [time, lat, lon],
 * chunked one step per chunk), /diag/global_mean (float64 [time]); CF-style
 * attributes. Each rank owns a band of latitudes; one h5l_flush per step,
 * so every step is one tick a reader can see. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log.h"

#define NLAT 90
#define NLON 180

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        if ((call) != H5L_OK) {                                                                                        \
            fprintf(stderr, "demo_writer: %s\n", h5l_errmsg(f));                                                       \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: demo_writer FILE [--steps N] [--interval SECONDS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int steps = 20;
    double interval = 0.5;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps"))
            steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--interval"))
            interval = atof(argv[i + 1]);
    }
    h5l_file_t *f = NULL;
    if (h5l_create(argv[1], MPI_COMM_WORLD, NULL, &f) != H5L_OK) {
        fprintf(stderr, "demo_writer: %s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int dt, dlat, dlon, vlat, vlon, vt, vp, vm;
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &dt));
    CHECK(h5l_def_dim(f, "lat", NLAT, &dlat));
    CHECK(h5l_def_dim(f, "lon", NLON, &dlon));
    CHECK(h5l_def_var(f, "/lat", H5T_NATIVE_FLOAT, 1, &dlat, NULL, &vlat));
    CHECK(h5l_def_var(f, "/lon", H5T_NATIVE_FLOAT, 1, &dlon, NULL, &vlon));
    uint64_t chunk[3] = {1, NLAT, NLON};
    int d3[3] = {dt, dlat, dlon};
    CHECK(h5l_def_var(f, "/atm/temperature", H5T_NATIVE_FLOAT, 3, d3, chunk, &vt));
    CHECK(h5l_def_var(f, "/atm/pressure", H5T_NATIVE_FLOAT, 3, d3, chunk, &vp));
    CHECK(h5l_def_var(f, "/diag/global_mean", H5T_NATIVE_DOUBLE, 1, &dt, NULL, &vm));
    float fill = -999.0f;
    CHECK(h5l_def_var_fill(f, vt, &fill));
    CHECK(h5l_put_att_text(f, H5L_GLOBAL, "title", "h5logfs demo: a tiny atmosphere"));
    CHECK(h5l_put_att_text(f, H5L_GLOBAL, "Conventions", "CF-1.8"));
    CHECK(h5l_put_att_text(f, vlat, "units", "degrees_north"));
    CHECK(h5l_put_att_text(f, vlon, "units", "degrees_east"));
    CHECK(h5l_put_att_text(f, vt, "units", "K"));
    CHECK(h5l_put_att_text(f, vt, "long_name", "air temperature"));
    CHECK(h5l_put_att_text(f, vp, "units", "hPa"));
    CHECK(h5l_put_att_text(f, vm, "long_name", "global mean temperature"));
    if (rank == 0) {
        float lat[NLAT], lon[NLON];
        for (int i = 0; i < NLAT; i++) lat[i] = -89.0f + 2.0f * (float)i;
        for (int i = 0; i < NLON; i++) lon[i] = 1.0f + 2.0f * (float)i;
        uint64_t s0 = 0, nlat = NLAT, nlon = NLON;
        CHECK(h5l_put(f, vlat, &s0, &nlat, lat));
        CHECK(h5l_put(f, vlon, &s0, &nlon, lon));
    }
    int lat0 = NLAT * rank / size, lat1 = NLAT * (rank + 1) / size;
    size_t n = (size_t)(lat1 - lat0) * NLON;
    float *t = malloc(n * sizeof *t), *p = malloc(n * sizeof *p);
    for (int step = 0; step < steps; step++) {
        double sum = 0;
        for (int i = lat0; i < lat1; i++) {
            for (int j = 0; j < NLON; j++) {
                double la = (-89.0 + 2.0 * i) * M_PI / 180, lo = (1.0 + 2.0 * j) * M_PI / 180;
                size_t k = (size_t)(i - lat0) * NLON + (size_t)j;
                t[k] = (float)(288.0 - 40.0 * sin(la) * sin(la) + 5.0 * sin(lo + 0.3 * step) + 0.25 * step);
                p[k] = (float)(1013.0 + 10.0 * cos(2 * lo - 0.2 * step) * cos(la));
                sum += t[k];
            }
        }
        uint64_t st[3] = {(uint64_t)step, (uint64_t)lat0, 0}, ct[3] = {1, (uint64_t)(lat1 - lat0), NLON};
        CHECK(h5l_put(f, vt, st, ct, t));
        CHECK(h5l_put(f, vp, st, ct, p));
        double all = 0;
        MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            double mean = all / (NLAT * NLON);
            uint64_t s1 = (uint64_t)step, c1 = 1;
            CHECK(h5l_put(f, vm, &s1, &c1, &mean));
        }
        CHECK(h5l_flush(f));
        if (rank == 0) {
            printf("demo_writer: step %d published (tick %llu)\n", step, (unsigned long long)h5l_ntick(f));
            fflush(stdout);
        }
        usleep((useconds_t)(interval * 1e6));
    }
    CHECK(h5l_close(f));
    free(t);
    free(p);
    MPI_Finalize();
    return 0;
}
