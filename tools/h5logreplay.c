/* h5logreplay — write a canonical HDF5 file from a log-layout file.
 *
 * Usage: h5logreplay [--tick N] IN OUT
 *
 * The output has real datasets with the variables' shapes, chunking, fill
 * values and attributes, and named dimensions as dimension scales — the same
 * skeleton the daemon serves (libcore canon.c), filled through the reader.
 * It is the oracle the daemon's tests compare against. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5.h>

#include "h5log_reader.h"
#include "canon.h"
#include "h5type.h"
#include "schema.h"

typedef struct varjob {
    uint32_t objid, ndims;
    char *path;
    h5l_type_t type;
    uint64_t shape[H5L_MAX_DIMS], block[H5L_MAX_DIMS];
} varjob_t;

static void usage(FILE *o)
{
    fprintf(o, "usage: h5logreplay [--tick N] IN OUT\n"
               "Write the canonical HDF5 file of log-layout file IN (newest tick, or tick N) to OUT.\n");
}

/* Write one variable block by block (its chunks, or its index slabs). */
static int copy_var(h5l_reader_t *r, hid_t file, uint64_t tick, const varjob_t *v)
{
    hid_t ds = H5Dopen2(file, v->path, H5P_DEFAULT);
    hid_t mt = h5l_type_to_hid(v->type, 0);
    if (ds < 0 || mt < 0) return -1;
    uint64_t nblk = 1, bytes = v->type.size, nb[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndims; d++) {
        if (v->shape[d] == 0) nblk = 0;
        nb[d] = v->shape[d] ? (v->shape[d] + v->block[d] - 1) / v->block[d] : 0;
        nblk *= nb[d];
        bytes *= v->block[d] < v->shape[d] ? v->block[d] : v->shape[d];
    }
    void *buf = malloc(bytes ? bytes : 1);
    int rc = buf ? 0 : -1;
    hid_t fs = H5Dget_space(ds);
    for (uint64_t b = 0; b < nblk && !rc; b++) {
        uint64_t start[H5L_MAX_DIMS], count[H5L_MAX_DIMS], rem = b;
        hsize_t hs[H5L_MAX_DIMS], hc[H5L_MAX_DIMS];
        for (int d = (int)v->ndims - 1; d >= 0; d--) {
            uint64_t c = rem % nb[d];
            rem /= nb[d];
            start[d] = c * v->block[d];
            count[d] = v->shape[d] - start[d] < v->block[d] ? v->shape[d] - start[d] : v->block[d];
            hs[d] = start[d];
            hc[d] = count[d];
        }
        h5l_err_t e;
        if (h5l_reader_read(r, tick, v->objid, start, count, buf, &e)) {
            fprintf(stderr, "h5logreplay: %s\n", e.msg);
            rc = -1;
            break;
        }
        hid_t ms = v->ndims ? H5Screate_simple((int)v->ndims, hc, NULL) : H5Screate(H5S_SCALAR);
        if (v->ndims) H5Sselect_hyperslab(fs, H5S_SELECT_SET, hs, NULL, hc, NULL);
        if (H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, buf) < 0) rc = -1;
        H5Sclose(ms);
    }
    if (v->ndims == 0 && nblk == 1 && rc) fprintf(stderr, "h5logreplay: cannot write '%s'\n", v->path);
    H5Sclose(fs);
    free(buf);
    H5Tclose(mt);
    H5Dclose(ds);
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t tick = 0;
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--tick") && a + 1 < argc) tick = strtoull(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) { usage(stdout); return 0; }
        else { usage(stderr); return 2; }
    }
    if (argc - a != 2) { usage(stderr); return 2; }
    const char *in = argv[a], *out = argv[a + 1];
    h5l_err_t e = {0};
    h5l_reader_t *r;
    if (h5l_reader_open(in, &r, &e)) {
        fprintf(stderr, "h5logreplay: %s\n", e.msg);
        return 1;
    }
    uint64_t newest = h5l_reader_ntick(r);
    if (tick == 0) tick = newest;
    if (tick == 0 || tick > newest) {
        fprintf(stderr, "h5logreplay: %s: tick %llu does not exist (newest is %llu)\n", in,
                (unsigned long long)tick, (unsigned long long)newest);
        h5l_reader_close(r);
        return 1;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    hid_t fcpl = h5l_canon_fcpl();
    hid_t file = H5Fcreate(out, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (file < 0) {
        fprintf(stderr, "h5logreplay: %s: cannot create\n", out);
        h5l_reader_close(r);
        return 1;
    }
    /* the skeleton and the job list under the schema lock; data after it */
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    int rc = h5l_canon_build(file, s, tick, H5L_ALLOC_WRITE, NULL, NULL, &e);
    varjob_t *jobs = calloc(s->nobjs, sizeof *jobs);
    size_t njobs = 0;
    for (size_t i = 1; jobs && !rc && i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        if (o->kind != H5L_OBJ_VAR || o->tick > tick) continue;
        varjob_t *v = &jobs[njobs++];
        v->objid = (uint32_t)i;
        v->ndims = o->ndims;
        v->type = o->type;
        v->path = strdup(o->path);
        h5l_schema_shape(s, (uint32_t)i, tick, v->shape);
        memcpy(v->block, o->chunk, o->ndims * sizeof *o->chunk);
    }
    h5l_reader_unlock(r);
    if (rc) fprintf(stderr, "h5logreplay: %s: %s\n", out, e.msg);
    for (size_t i = 0; !rc && i < njobs; i++) {
        rc = copy_var(r, file, tick, &jobs[i]);
        if (rc) fprintf(stderr, "h5logreplay: %s: cannot copy '%s'\n", in, jobs[i].path);
    }
    for (size_t i = 0; i < njobs; i++) free(jobs[i].path);
    free(jobs);
    if (H5Fclose(file) < 0) rc = -1;
    h5l_reader_close(r);
    return rc ? 1 : 0;
}
