/* h5floor.c — what libhdf5 alone needs to create the datasets of a
 * skeleton: the floor under the skeleton build of bench-scale's
 * many_20000, measured on the same machine in the same round.
 *
 * Usage: h5floor N
 * Creates N datasets /v00000.. of float [2, 4], chunks (1, 4), in one
 * group of an in-memory (core driver) file, with what every canonical
 * variable has (docs/architecture.md): link and attribute creation order
 * tracked and indexed, no times, chunks allocated incrementally and none
 * written (the daemon writes the chunk indexes, docs/format.md 6.2, so
 * libhdf5 makes no B-tree for them).
 * Nothing else: no attributes, no dimension scales, no callbacks, one
 * property list for all. Prints {"n", "create_s", "close_s", "floor_s"}.
 * The skeleton does all of this and more, so its build time over floor_s
 * says how much of it is ours. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    if (n <= 0) {
        fprintf(stderr, "usage: h5floor N\n");
        return 2;
    }
    unsigned crt = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t dims[2] = {2, 4}, maxd[2] = {H5S_UNLIMITED, 4}, chunk[2] = {1, 4};
    hid_t sp = H5Screate_simple(2, dims, maxd);
    if (fapl < 0 || fcpl < 0 || dcpl < 0 || sp < 0 || H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
        H5Pset_link_creation_order(fcpl, crt) < 0 || H5Pset_attr_creation_order(fcpl, crt) < 0 ||
        H5Pset_obj_track_times(fcpl, 0) < 0 || H5Pset_chunk(dcpl, 2, chunk) < 0 ||
        H5Pset_attr_creation_order(dcpl, crt) < 0 || H5Pset_obj_track_times(dcpl, 0) < 0 ||
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR) < 0) {
        fprintf(stderr, "h5floor: cannot set up the property lists\n");
        return 1;
    }
    double t0 = now();
    hid_t f = H5Fcreate("h5floor.h5", H5F_ACC_TRUNC, fcpl, fapl);
    if (f < 0) {
        fprintf(stderr, "h5floor: cannot create the in-memory file\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "/v%05ld", i);
        hid_t ds = H5Dcreate2(f, name, H5T_NATIVE_FLOAT, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (ds < 0) {
            fprintf(stderr, "h5floor: cannot create %s\n", name);
            return 1;
        }
        H5Dclose(ds);
    }
    double t1 = now();
    H5Fclose(f);
    double t2 = now();
    printf("{\"n\": %ld, \"create_s\": %.3f, \"close_s\": %.3f, \"floor_s\": %.3f}\n", n, t1 - t0, t2 - t1, t2 - t0);
    H5Sclose(sp);
    H5Pclose(dcpl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return 0;
}
