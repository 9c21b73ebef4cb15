/* readvar.c — read one whole variable with plain serial libhdf5, timed.
 *
 *   readvar FILE VAR [--slab-mib M]
 *
 * Opens FILE with the default (sec2) driver, reads VAR (any rank >= 1, its
 * native type) with H5Dread in hyperslabs of whole rows along dim 0, about
 * M MiB each (default 64; at least one row), into one reused buffer, and
 * prints one JSON object on one line:
 *   {"file", "var", "bytes", "slabs", "slab_bytes", "open_seconds",
 *    "read_seconds", "seconds", "MB_per_s", "checksum"}
 * seconds = open (H5Fopen .. type query) + every H5Dread + close (CLOCK_MONOTONIC;
 * the buffer's allocation and the checksum are outside the clock);
 * MB_per_s is bytes / seconds / 1e6. checksum is a 64-bit sum of the words
 * of every slab, taken outside the timed intervals, so runs can be compared
 * without a second read. Needs no MPI (the parallel libhdf5 is linked but
 * its MPI-IO driver is never used). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hdf5.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "readvar: %s failed\n", what);
    exit(1);
}
#define CK(expr)                                                                                                       \
    do {                                                                                                               \
        if ((expr) < 0) die(#expr);                                                                                    \
    } while (0)

int main(int argc, char **argv)
{
    const char *file = NULL, *var = NULL;
    double slab_mib = 64;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--slab-mib") && a + 1 < argc)
            slab_mib = atof(argv[++a]);
        else if (argv[a][0] != '-' && !file)
            file = argv[a];
        else if (argv[a][0] != '-' && !var)
            var = argv[a];
        else {
            fprintf(stderr, "usage: readvar FILE VAR [--slab-mib M]\n");
            return 2;
        }
    }
    if (!file || !var || !(slab_mib > 0)) {
        fprintf(stderr, "usage: readvar FILE VAR [--slab-mib M]\n");
        return 2;
    }

    double t0 = now_s();
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) die("H5Fopen");
    hid_t d = H5Dopen2(f, var, H5P_DEFAULT);
    if (d < 0) die("H5Dopen2");
    hid_t fs = H5Dget_space(d);
    if (fs < 0) die("H5Dget_space");
    int nd = H5Sget_simple_extent_ndims(fs);
    if (nd < 1 || nd > 32) die("a variable of rank 1..32");
    hsize_t dims[32], start[32], count[32];
    CK(H5Sget_simple_extent_dims(fs, dims, NULL));
    hid_t ft = H5Dget_type(d);
    if (ft < 0) die("H5Dget_type");
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    if (mt < 0) die("H5Tget_native_type");
    size_t es = H5Tget_size(mt);
    uint64_t rowbytes = es;
    for (int i = 1; i < nd; i++) rowbytes *= dims[i];
    uint64_t rows = (uint64_t)(slab_mib * 1048576.0) / (rowbytes ? rowbytes : 1);
    if (rows < 1) rows = 1;
    if (rows > dims[0]) rows = dims[0] ? dims[0] : 1;
    size_t cap = (size_t)(rows * rowbytes);
    double t_open = now_s() - t0, t_read = 0;
    uint8_t *buf = malloc(cap ? cap : 1); /* untimed */
    if (!buf) die("malloc");
    memset(buf, 0, cap); /* fault the buffer in outside the clock */
    uint64_t sum = 0, bytes = 0, slabs = 0;
    for (uint64_t i0 = 0; i0 < dims[0]; i0 += rows) {
        uint64_t nr = dims[0] - i0 < rows ? dims[0] - i0 : rows;
        for (int i = 0; i < nd; i++) {
            start[i] = 0;
            count[i] = dims[i];
        }
        start[0] = i0;
        count[0] = nr;
        CK(H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL));
        hid_t ms = H5Screate_simple(nd, count, NULL);
        if (ms < 0) die("H5Screate_simple");
        double r0 = now_s();
        CK(H5Dread(d, mt, ms, fs, H5P_DEFAULT, buf));
        t_read += now_s() - r0;
        CK(H5Sclose(ms));
        size_t n = (size_t)(nr * rowbytes);
        uint64_t w;
        for (size_t o = 0; o + 8 <= n; o += 8) { /* untimed */
            memcpy(&w, buf + o, 8);
            sum += w;
        }
        bytes += n;
        slabs++;
    }
    double c0 = now_s();
    CK(H5Tclose(mt));
    CK(H5Tclose(ft));
    CK(H5Sclose(fs));
    CK(H5Dclose(d));
    CK(H5Fclose(f));
    double t_close = now_s() - c0;
    double secs = t_open + t_read + t_close;
    printf("{\"file\":\"%s\",\"var\":\"%s\",\"bytes\":%llu,\"slabs\":%llu,\"slab_bytes\":%zu,"
           "\"open_seconds\":%.6f,\"read_seconds\":%.6f,\"seconds\":%.6f,\"MB_per_s\":%.1f,"
           "\"checksum\":\"%016llx\"}\n",
           file, var, (unsigned long long)bytes, (unsigned long long)slabs, cap, t_open, t_read, secs,
           secs > 0 ? (double)bytes / secs / 1e6 : 0.0, (unsigned long long)sum);
    free(buf);
    return 0;
}
