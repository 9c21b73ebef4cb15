/* anchor.c — the HDF5 file as rank 0 sees it (see anchor.h).
 *
 * Why sec2 on one rank and not the MPI-IO driver on all: every libhdf5 call
 * on a parallel file is collective and synchronising, and a tick needs only
 * two dataset creations. Rank 0 makes them alone and broadcasts the offsets;
 * the ranks then move the bytes with MPI-IO at those offsets. libhdf5 never
 * writes inside those datasets (early allocation, fill time never), and our
 * MPI-IO never writes outside them, so the two never touch the same bytes.
 * The user block (bytes 0..4095) is ours too: libhdf5 leaves it alone. */
#include "anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>

#include "canon.h"
#include "journal.h"

struct h5l_anchor {
    hid_t file;
    char *path;
    uint8_t id[16];
};

static int write_ub(const char *path, const uint8_t id[16], uint64_t off, uint64_t len,
                    uint64_t flags, int sync, h5l_err_t *err)
{
    h5l_ub_t ub = {.version = H5L_FORMAT_VERSION, .jr_off = off, .jr_len = len, .flags = flags};
    memcpy(ub.id, id, 16);
    uint8_t b[H5L_UB_LEN];
    h5l_ub_encode(&ub, b);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(err, H5L_EIO, "%s: %s", path, strerror(errno));
    int rc = h5l_pwrite_full(fd, b, sizeof b, 0);
    if (!rc && sync && fsync(fd) != 0) rc = -errno;
    close(fd);
    if (rc) return h5l_err_set(err, H5L_EIO, "%s: writing user block: %s", path, strerror(-rc));
    return H5L_OK;
}

int h5l_anchor_create(const char *path, const uint8_t id[16], h5l_anchor_t **out,
                      h5l_err_t *err)
{
    *out = NULL;
    h5l_anchor_t *a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(path))) {
        free(a);
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    }
    memcpy(a->id, id, 16);
    hid_t fcpl = h5l_canon_fcpl();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_userblock(fcpl, H5L_USERBLOCK_SIZE);
    H5Pset_fapl_sec2(fapl);
    a->file = H5Fcreate(path, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    int rc = H5L_OK;
    if (a->file < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot create HDF5 file", path);
    } else {
        hid_t g = H5Gcreate2(a->file, "/_h5log", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        uint32_t v = H5L_FORMAT_VERSION;
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t at = g < 0 ? -1 : H5Acreate2(g, "h5log_format", H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (at < 0 || H5Awrite(at, H5T_NATIVE_UINT32, &v) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot create /_h5log", path);
        if (at >= 0) H5Aclose(at);
        H5Sclose(sp);
        if (g >= 0) H5Gclose(g);
    }
    if (!rc) rc = write_ub(path, id, 0, 0, 0, 0, err);
    if (rc) {
        h5l_anchor_abort(a);
        return rc;
    }
    *out = a;
    return H5L_OK;
}

int h5l_anchor_op(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick,
                  const h5l_op_t *op, h5l_err_t *err)
{
    switch (op->kind) {
    case H5L_OP_GROUP: {
        if (H5Lexists(a->file, op->name, H5P_DEFAULT) > 0) return H5L_OK;
        int rc = h5l_canon_group(a->file, op->name, err);
        if (rc) h5l_err_set(err, rc, "%s: cannot create group '%s'", a->path, op->name);
        return rc;
    }
    case H5L_OP_VAR: {
        if (H5Lexists(a->file, op->name, H5P_DEFAULT) > 0) return H5L_OK;
        hid_t ds;
        int rc = h5l_canon_dataset(a->file, s, op->id, tick, H5L_ALLOC_NONE, &ds, err);
        if (rc) return rc;
        H5Dclose(ds);
        return H5L_OK;
    }
    case H5L_OP_ATTR: {
        const h5l_obj_t *o = &s->objs[op->id];
        hid_t obj = H5Oopen(a->file, o->path, H5P_DEFAULT);
        if (obj < 0) return h5l_err_set(err, H5L_EHDF5, "%s: cannot open '%s'", a->path, o->path);
        h5l_attr_t at = {op->id, op->name, op->type, op->len, op->data, tick};
        int rc = h5l_canon_attr(obj, &at, err);
        H5Oclose(obj);
        return rc;
    }
    default: /* dimensions live in the journal; extents are set at close */
        return H5L_OK;
    }
}

int h5l_anchor_alloc(h5l_anchor_t *a, const char *name, uint64_t size,
                     uint64_t *off, h5l_err_t *err)
{
    char path[256];
    snprintf(path, sizeof path, "/_h5log/%s", name);
    if (H5Lexists(a->file, path, H5P_DEFAULT) > 0) {
        /* made by an attempt that failed later (a retried flush): reuse it */
        hid_t ds = H5Dopen2(a->file, path, H5P_DEFAULT);
        hid_t sp = ds < 0 ? -1 : H5Dget_space(ds);
        hsize_t n = 0;
        if (sp >= 0) H5Sget_simple_extent_dims(sp, &n, NULL);
        haddr_t addr = ds < 0 ? HADDR_UNDEF : H5Dget_offset(ds);
        if (sp >= 0) H5Sclose(sp);
        if (ds >= 0) H5Dclose(ds);
        if (n == size && addr != HADDR_UNDEF) {
            *off = addr;
            return H5L_OK;
        }
        H5Ldelete(a->file, path, H5P_DEFAULT);
    }
    hsize_t n = size;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(a->file, path, H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(sp);
    int rc = H5L_OK;
    haddr_t addr = ds < 0 ? HADDR_UNDEF : H5Dget_offset(ds);
    if (addr == HADDR_UNDEF) rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot allocate %s (%llu bytes)", a->path, path, (unsigned long long)size);
    else *off = addr;
    if (ds >= 0) H5Dclose(ds);
    return rc;
}

static int set_extents(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, h5l_err_t *err)
{
    for (size_t i = 1; i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        if (o->kind != H5L_OBJ_VAR || !o->chunked) continue;
        hsize_t dims[H5L_MAX_DIMS];
        int grows = 0;
        for (uint32_t d = 0; d < o->ndims; d++) {
            dims[d] = h5l_schema_dimlen(s, o->dimids[d], tick);
            grows |= s->dims[o->dimids[d]].unlimited;
        }
        if (!grows) continue;
        hid_t ds = H5Dopen2(a->file, o->path, H5P_DEFAULT);
        int bad = ds < 0 || H5Dset_extent(ds, dims) < 0;
        if (ds >= 0) H5Dclose(ds);
        if (bad) return h5l_err_set(err, H5L_EHDF5, "%s: cannot set the extent of '%s'", a->path, o->path);
    }
    return H5L_OK;
}

int h5l_anchor_finish(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick,
                      const void *journal, size_t jlen, int sync, h5l_err_t *err)
{
    uint64_t joff = 0;
    int rc = set_extents(a, s, tick, err);
    if (!rc) rc = h5l_anchor_alloc(a, "journal", jlen, &joff, err);
    if (H5Fclose(a->file) < 0 && !rc) rc = h5l_err_set(err, H5L_EHDF5, "%s: closing the HDF5 file failed", a->path);
    a->file = -1;
    if (!rc) {
        int fd = open(a->path, O_WRONLY | O_CLOEXEC);
        int e = fd < 0 ? -errno : h5l_pwrite_full(fd, journal, jlen, joff);
        if (!e && sync && fsync(fd) != 0) e = -errno;
        if (fd >= 0) close(fd);
        if (e) rc = h5l_err_set(err, H5L_EIO, "%s: embedding the journal: %s", a->path, strerror(-e));
    }
    /* the commit point of close: after it the file is self-contained.
     * Without sync the order still holds for every reader on this node
     * (page cache); a node crash may lose the close, and then the sidecar,
     * whose unlink comes after, is still there: nothing is lost. */
    if (!rc) rc = write_ub(a->path, a->id, joff, jlen, H5L_UB_CLOSED, sync, err);
    free(a->path);
    free(a);
    return rc;
}

void h5l_anchor_abort(h5l_anchor_t *a)
{
    if (!a) return;
    if (a->file >= 0) H5Fclose(a->file);
    free(a->path);
    free(a);
}
