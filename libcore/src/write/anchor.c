/* anchor.c — the HDF5 file as rank 0 sees it (see anchor.h).
 *
 * Why sec2 on one rank and not the MPI-IO driver on all: every libhdf5 call
 * on a parallel file is collective and synchronising, and a tick needs only
 * two dataset creations. Rank 0 makes them alone and broadcasts the offsets;
 * the ranks then move the bytes with MPI-IO at those offsets. libhdf5 never
 * writes inside those datasets (early allocation, fill time never), and our
 * MPI-IO never writes outside them, so the two never touch the same bytes.
 * The user block (bytes 0..4095) is ours too: libhdf5 leaves it alone.
 *
 * Why our own file driver (a POSIX driver like sec2, below) and not sec2:
 * libhdf5 1.10.8 must never see a write fail inside H5Fclose. There,
 * H5F__dest frees the file structure even when flushing fails, but the
 * failure leaves the file's ID registered (fixed upstream much later,
 * HDFGroup/hdf5#2291). Every later touch of that ID reads freed memory:
 * retrying H5Fclose, H5Fclose with H5F_CLOSE_STRONG, H5close, and the
 * library's own shutdown, which parallel HDF5 runs from MPI_Finalize (an
 * attribute callback on MPI_COMM_SELF, so H5dont_atexit does not avoid
 * it): on a full disk the application then died in MPI_Finalize in
 * H5F__close_cb. Keeping the ID open instead only moves the crash to
 * shutdown, which closes it the same way. So the driver has a closing mode:
 * while our H5Fclose runs, an I/O error is recorded (errno, what, where)
 * and then every later write is dropped, so libhdf5 finishes the close,
 * frees everything and unregisters the ID; we report the recorded error
 * and leave the file live (user block untouched, journal sidecar kept).
 * libhdf5's metadata in the file may then be incomplete, but no reader of
 * a live file looks at it: the sidecar journal is the truth. Outside close
 * a failed write fails the libhdf5 call as usual (its state stays valid:
 * the metadata cache keeps the entry dirty) and the flush retries. The
 * driver also gives messages their reason (ENOSPC, EIO) instead of
 * libhdf5's "driver write request failed". Nothing global changes in the
 * application's libhdf5: the driver is registered once, used only for our
 * files, and the application's error printing is left as it set it. */
#include "anchor.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <hdf5.h>

#include "h5log/canon.h"
#include "final.h"
#include "h5log/grow.h"
#include "h5log/fdio.h"
#include "h5log/h5type.h"
#include "journal.h"

/* I/O errors of one anchor's driver: the first since the last reset. */
typedef struct vio {
    int closing;    /* our H5Fclose is running: report nothing to libhdf5 */
    int err;        /* errno of the first failure, 0 if none */
    const char *op; /* what failed: "writing", "reading", ... */
    uint64_t off, len;
} vio_t;

struct h5l_anchor {
    hid_t file;
    char *path;
    uint8_t id[16];
    vio_t io;
    h5l_ub_t was; /* the user block on disk before ub_close (live: zeros) */
};

/* ------------------------------------------------------------------ */
/* the driver                                                           */

#define VFD_NAME "h5log_anchor"
#define VFD_MAXADDR ((haddr_t)INT64_MAX)

typedef struct vinfo { /* the file access property's driver info */
    vio_t *io;
    int over; /* h5l_anchor_recreate: create over the existing bytes (no
               * truncation; libhdf5 is told the file is empty) */
} vinfo_t;

typedef struct vfile {
    H5FD_t pub; /* first: libhdf5 sees an H5FD_t */
    int fd;
    haddr_t eoa, eof;
    dev_t dev;
    ino_t ino;
    vio_t *io;
} vfile_t;

static hid_t g_vfd = H5I_INVALID_HID;

static void vio_note(vio_t *io, int err, const char *op, uint64_t off, uint64_t len)
{
    if (io->err) return;
    io->err = err ? err : EIO;
    io->op = op;
    io->off = off;
    io->len = len;
}

static H5FD_t *v_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    const vinfo_t *vi = H5Pget_driver_info(fapl);
    if (!name || !vi || !vi->io || maxaddr == 0 || (maxaddr != HADDR_UNDEF && maxaddr > VFD_MAXADDR)) return NULL;
    int o = O_CLOEXEC | ((flags & H5F_ACC_RDWR) ? O_RDWR : O_RDONLY);
    if ((flags & H5F_ACC_TRUNC) && !vi->over) o |= O_TRUNC;
    if (flags & H5F_ACC_CREAT) o |= O_CREAT;
    if (flags & H5F_ACC_EXCL) o |= O_EXCL;
    int fd = open(name, o, 0666);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        /* libhdf5 first tries without CREAT to see whether the file is
         * already open: that failing is expected, not an error to report */
        if (flags & H5F_ACC_CREAT) vio_note(vi->io, errno, "opening", 0, 0);
        return NULL;
    }
    vfile_t *v = calloc(1, sizeof *v);
    if (!v) {
        close(fd);
        return NULL;
    }
    v->fd = fd;
    v->eof = vi->over ? 0 : (haddr_t)st.st_size;
    v->dev = st.st_dev;
    v->ino = st.st_ino;
    v->io = vi->io;
    return &v->pub;
}

static herr_t v_close(H5FD_t *file)
{
    vfile_t *v = (vfile_t *)file;
    if (close(v->fd) != 0) vio_note(v->io, errno, "closing", 0, 0);
    free(v);
    return 0; /* never a failure inside H5Fclose (see the top of this file) */
}

static int v_cmp(const H5FD_t *a, const H5FD_t *b)
{
    const vfile_t *x = (const vfile_t *)a, *y = (const vfile_t *)b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return 0;
}

static herr_t v_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    /* what sec2 reports, so libhdf5 lays the file out as it would with sec2 */
    *flags = H5FD_FEAT_AGGREGATE_METADATA | H5FD_FEAT_ACCUMULATE_METADATA | H5FD_FEAT_DATA_SIEVE |
             H5FD_FEAT_AGGREGATE_SMALLDATA | H5FD_FEAT_DEFAULT_VFD_COMPATIBLE;
    return 0;
}

static haddr_t v_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const vfile_t *)file)->eoa;
}

static herr_t v_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    (void)type;
    if (addr > VFD_MAXADDR) return -1;
    ((vfile_t *)file)->eoa = addr;
    return 0;
}

static haddr_t v_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const vfile_t *)file)->eof;
}

static herr_t v_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
    (void)fapl;
    if (!handle) return -1;
    *handle = &((vfile_t *)file)->fd;
    return 0;
}

static herr_t v_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    (void)type;
    (void)dxpl;
    vfile_t *v = (vfile_t *)file;
    if (addr == HADDR_UNDEF || addr > VFD_MAXADDR || size > VFD_MAXADDR - addr) return -1;
    size_t got;
    if (h5l_fd_read(v->fd, buf, size, addr, &got, NULL, NULL)) {
        vio_note(v->io, errno, "reading", addr, size);
        if (!v->io->closing) return -1;
        got = 0;
    }
    memset((uint8_t *)buf + got, 0, size - got); /* past the end of the file: zeros, as sec2 */
    return 0;
}

static herr_t v_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    (void)type;
    (void)dxpl;
    vfile_t *v = (vfile_t *)file;
    if (addr == HADDR_UNDEF || addr > VFD_MAXADDR || size > VFD_MAXADDR - addr) return -1;
    if (v->io->closing && v->io->err) return 0;             /* closing after a failure: drop, let the close finish */
    if (h5l_fd_write(v->fd, buf, size, addr, NULL, NULL)) { /* every byte, or errno says why */
        vio_note(v->io, errno, "writing", addr, size);
        return v->io->closing ? 0 : -1;
    }
    if (addr + size > v->eof) v->eof = addr + size;
    return 0;
}

static herr_t v_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl;
    (void)closing;
    vfile_t *v = (vfile_t *)file;
    if (v->eoa == v->eof) return 0;
    if (!(v->io->closing && v->io->err) && ftruncate(v->fd, (off_t)v->eoa) != 0) {
        vio_note(v->io, errno, "extending", v->eoa, 0);
        if (!v->io->closing) return -1;
    }
    v->eof = v->eoa;
    return 0;
}

/* Locks as sec2 takes them (a live file is locked by its writer); a file
 * system without flock is not an error. */
static herr_t v_lock(H5FD_t *file, hbool_t rw)
{
    if (flock(((vfile_t *)file)->fd, (rw ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 && errno != ENOSYS) return -1;
    return 0;
}

static herr_t v_unlock(H5FD_t *file)
{
    (void)flock(((vfile_t *)file)->fd, LOCK_UN); /* closing anyway */
    return 0;
}

static herr_t v_terminate(void)
{
    g_vfd = H5I_INVALID_HID; /* H5close unregistered us: register again if used again */
    return 0;
}

static const H5FD_class_t vfd_class = {
    .name = VFD_NAME,
    .maxaddr = VFD_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .terminate = v_terminate,
    .fapl_size = sizeof(vinfo_t), /* copied with memcpy, freed with free */
    .open = v_open,
    .close = v_close,
    .cmp = v_cmp,
    .query = v_query,
    .get_eoa = v_get_eoa,
    .set_eoa = v_set_eoa,
    .get_eof = v_get_eof,
    .get_handle = v_get_handle,
    .read = v_read,
    .write = v_write,
    .truncate = v_truncate,
    .lock = v_lock,
    .unlock = v_unlock,
    .fl_map = H5FD_FLMAP_DICHOTOMY,
};

static hid_t vfd_id(void)
{
    if (g_vfd >= 0 && H5Iis_valid(g_vfd) > 0 && H5Iget_type(g_vfd) == H5I_VFL) return g_vfd;
    g_vfd = H5FDregister(&vfd_class);
    return g_vfd;
}

/* The reason of the last I/O failure, for messages ("" if none). */
static const char *vio_reason(const h5l_anchor_t *a, char *buf, size_t n)
{
    const vio_t *io = &a->io;
    if (!io->err) return "";
    if (io->len)
        snprintf(buf, n, ": %s (%s %llu bytes at %llu)", strerror(io->err), io->op, (unsigned long long)io->len,
                 (unsigned long long)io->off);
    else
        snprintf(buf, n, ": %s (%s)", strerror(io->err), io->op);
    return buf;
}

/* Close the HDF5 file in the driver's closing mode (top of this file):
 * H5Fclose always completes and frees libhdf5's state; an I/O error met
 * on the way is returned (the metadata written before it stays). */
static int close_h5(h5l_anchor_t *a, h5l_err_t *err)
{
    if (a->file < 0) return H5L_OK;
    memset(&a->io, 0, sizeof a->io);
    a->io.closing = 1;
    herr_t r = H5Fclose(a->file);
    a->file = -1;
    a->io.closing = 0;
    char why[256];
    if (a->io.err)
        return h5l_err_set(err, H5L_EIO, "%s: writing the HDF5 metadata at close failed%s", a->path,
                           vio_reason(a, why, sizeof why));
    if (r < 0) return h5l_err_set(err, H5L_EHDF5, "%s: closing the HDF5 file failed (libhdf5)", a->path);
    return H5L_OK;
}

/* ------------------------------------------------------------------ */
/* the anchor                                                           */

/* The whole user block (create): header then zeros. */
static int write_ub(const char *path, const uint8_t id[16], h5l_err_t *err)
{
    h5l_ub_t ub = {.version = H5L_FORMAT_VERSION};
    memcpy(ub.id, id, 16);
    uint8_t b[H5L_USERBLOCK_SIZE] = {0};
    h5l_ub_encode(&ub, b);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(err, H5L_EIO, "%s: %s", path, strerror(errno));
    h5l_err_t e2;
    int rc = h5l_fd_write(fd, b, sizeof b, 0, path, &e2);
    close(fd);
    if (rc) return h5l_err_set(err, H5L_EIO, "writing the user block: %s", e2.msg);
    return H5L_OK;
}

/* Mark the file closed (format.md 2): only bytes 32..63 of the user block
 * change (journal offset and length, flags, checksum), so only they are
 * written, with one write. If it fails part way, the user block no longer
 * verifies and no reader could open the file at all — the intact sidecar
 * would not even be looked at — so the live bytes are put back. */
static int ub_close(h5l_anchor_t *a, uint64_t joff, uint64_t jlen, uint64_t flags, int sync, h5l_err_t *err)
{
    h5l_ub_t ub = a->was;
    ub.version = H5L_FORMAT_VERSION;
    memcpy(ub.id, a->id, 16);
    uint8_t live[H5L_UB_LEN], closed[H5L_UB_LEN];
    h5l_ub_encode(&ub, live); /* what to put back on failure */
    ub.jr_off = joff;
    ub.jr_len = jlen;
    ub.flags = flags;
    h5l_ub_encode(&ub, closed);
    int fd = open(a->path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(err, H5L_EIO, "%s: marking the file closed: %s", a->path, strerror(errno));
    int e = h5l_fd_write(fd, closed + 32, 32, 32, NULL, NULL) ? errno : 0;
    int rc = H5L_OK;
    if (e) {
        int r = h5l_fd_write(fd, live + 32, 32, 32, NULL, NULL);
        if (!r && sync) (void)fsync(fd);
        rc = h5l_err_set(err, H5L_EIO, "%s: marking the file closed in its user block failed: %s; %s", a->path,
                         strerror(e),
                         r ? "putting the live user block back failed too: the file cannot be opened until "
                             "bytes 32..63 are restored (its journal sidecar is intact)"
                           : "the user block is as it was (the file stays readable from its journal sidecar)");
    } else if (sync && fsync(fd) != 0) {
        rc = h5l_err_set(err, H5L_EIO, "%s: fsync after marking the file closed: %s", a->path, strerror(errno));
    }
    close(fd);
    return rc;
}

static int anchor_new(const char *path, const uint8_t id[16], int over, h5l_anchor_t **out, h5l_err_t *err);

int h5l_anchor_create(const char *path, const uint8_t id[16], h5l_anchor_t **out, h5l_err_t *err)
{
    return anchor_new(path, id, 0, out, err);
}

/* Where a new file is made before it is renamed over path: a hidden name
 * in the same directory (so the rename is atomic). NULL when out of memory,
 * or when path is a symbolic link (then the file is made through the link,
 * in place: renaming would replace the link itself). */
static char *creating_name(const char *path)
{
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) return NULL;
    const char *slash = strrchr(path, '/');
    int dl = slash ? (int)(slash - path + 1) : 0;
    char *t = NULL;
    if (asprintf(&t, "%.*s.%s.h5l-creating", dl, path, path + dl) < 0) return NULL;
    return t;
}

/* The HDF5 file with /_h5log (and its format attribute); with over, made
 * over the existing bytes of path (h5l_anchor_recreate), else new, with a
 * live user block. A new file appears at path only with its user block
 * written: it is made under a hidden name next to path and renamed over
 * path once its magic is in, so a reader never finds a log file being
 * created that looks like a plain one (zeros where the user block goes:
 * the daemon would serve it as a plain file, h5logdump call it no log
 * file), nor an older file truncated under its feet. */
static int anchor_new(const char *path, const uint8_t id[16], int over, h5l_anchor_t **out, h5l_err_t *err)
{
    *out = NULL;
    h5l_anchor_t *a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(path))) {
        free(a);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    }
    a->file = -1;
    memcpy(a->id, id, 16);
    hid_t fcpl = h5l_canon_fcpl();
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t drv = vfd_id();
    vinfo_t vi = {&a->io, over};
    H5Pset_userblock(fcpl, H5L_USERBLOCK_SIZE);
    int rc = H5L_OK;
    if (fcpl < 0 || fapl < 0 || drv < 0 || H5Pset_driver(fapl, drv, &vi) < 0)
        rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot set up libhdf5 for the file", path);
    char *tmp = over ? NULL : creating_name(path);
    const char *cpath = tmp ? tmp : path;
    if (!rc) a->file = H5Fcreate(cpath, H5F_ACC_TRUNC, fcpl, fapl);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (fapl >= 0) H5Pclose(fapl);
    char why[256];
    if (!rc && a->file < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot create HDF5 file%s", path, vio_reason(a, why, sizeof why));
    } else if (!rc) {
        memset(&a->io, 0, sizeof a->io);
        hid_t g = H5Gcreate2(a->file, "/_h5log", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        uint32_t v = H5L_FORMAT_VERSION;
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t at = g < 0 ? -1 : H5Acreate2(g, "h5log_format", H5T_STD_U32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (at < 0 || H5Awrite(at, H5T_NATIVE_UINT32, &v) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot create /_h5log%s", path, vio_reason(a, why, sizeof why));
        if (at >= 0) H5Aclose(at);
        H5Sclose(sp);
        if (g >= 0) H5Gclose(g);
    }
    if (!rc && !over) rc = write_ub(cpath, id, err);
    if (!rc && tmp && rename(tmp, path) != 0)
        rc = h5l_err_set(err, H5L_EIO, "%s: cannot move the new file into place: %s", path, strerror(errno));
    if (rc) {
        h5l_anchor_abort(a);
        if (tmp) unlink(tmp);
        free(tmp);
        return rc;
    }
    free(tmp);
    *out = a;
    return H5L_OK;
}

/* A contiguous byte dataset of n bytes at path, allocated now and never
 * filled: the HDF5 object that holds log bytes (a log extent, or the whole
 * log of a recovered file) so libhdf5 keeps off them. Its address, or
 * HADDR_UNDEF. */
static haddr_t byte_dataset(hid_t file, const char *path, hsize_t n)
{
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t ds = H5Dcreate2(file, path, H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(sp);
    haddr_t addr = ds < 0 ? HADDR_UNDEF : H5Dget_offset(ds);
    if (ds >= 0) H5Dclose(ds);
    return addr;
}

/* Append the driver's reason to a failed call's message. */
static int with_reason(h5l_anchor_t *a, int rc, h5l_err_t *err)
{
    char why[256];
    if (rc && a->io.err && err) {
        size_t n = strlen(err->msg);
        snprintf(err->msg + n, sizeof err->msg - n, "%s", vio_reason(a, why, sizeof why));
    }
    return rc;
}

static int op_apply(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
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

int h5l_anchor_op(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    memset(&a->io, 0, sizeof a->io);
    return with_reason(a, op_apply(a, s, tick, op, err), err);
}

static int alloc_ext(h5l_anchor_t *a, const char *name, uint64_t size, uint64_t *off, h5l_err_t *err)
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
    haddr_t addr = byte_dataset(a->file, path, size);
    if (addr == HADDR_UNDEF)
        return h5l_err_set(err, H5L_EHDF5, "%s: cannot allocate %s (%llu bytes)", a->path, path,
                           (unsigned long long)size);
    *off = addr;
    return H5L_OK;
}

int h5l_anchor_alloc(h5l_anchor_t *a, const char *name, uint64_t size, uint64_t *off, h5l_err_t *err)
{
    memset(&a->io, 0, sizeof a->io);
    return with_reason(a, alloc_ext(a, name, size, off, err), err);
}

void h5l_anchor_drop(h5l_anchor_t *a, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "/_h5log/%s", name);
    memset(&a->io, 0, sizeof a->io);
    if (H5Lexists(a->file, path, H5P_DEFAULT) > 0) H5Ldelete(a->file, path, H5P_DEFAULT);
    memset(&a->io, 0, sizeof a->io);
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

/* ------------------------------------------------------------------ */
/* finalizing: the canonical objects with their data (format.md 1)     */

typedef struct names {
    char **v;
    size_t n, cap;
    int oom;
} names_t;

static herr_t collect_link(hid_t g, const char *name, const H5L_info_t *info, void *op)
{
    (void)g;
    (void)info;
    names_t *l = op;
    if (strcmp(name, "_h5log") == 0) return 0;
    if (h5l_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v) || !(l->v[l->n] = strdup(name))) {
        l->oom = 1;
        return -1;
    }
    l->n++;
    return 0;
}

/* Remove the anchors: every link of the root group but /_h5log, and the
 * root group's attributes. The canonical build then starts from an HDF5
 * file that holds only /_h5log. */
static int drop_anchors(h5l_anchor_t *a, h5l_err_t *err)
{
    names_t l = {0};
    hid_t root = H5Gopen2(a->file, "/", H5P_DEFAULT);
    int rc = H5L_OK;
    if (root < 0 || H5Literate(root, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, collect_link, &l) < 0)
        rc = l.oom ? h5l_err_set(err, H5L_ENOMEM, "%s: out of memory listing the anchors", a->path)
                   : h5l_err_set(err, H5L_EHDF5, "%s: cannot list the anchors", a->path);
    for (size_t i = 0; !rc && i < l.n; i++)
        if (H5Ldelete(root, l.v[i], H5P_DEFAULT) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot remove the anchor '/%s'", a->path, l.v[i]);
    H5O_info_t oi;
    if (!rc && H5Oget_info2(root, &oi, H5O_INFO_NUM_ATTRS) < 0)
        rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot look at the root group", a->path);
    for (hsize_t i = 0; !rc && i < oi.num_attrs; i++)
        if (H5Adelete_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_NATIVE, 0, H5P_DEFAULT) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot remove the root group's attributes", a->path);
    for (size_t i = 0; i < l.n; i++) free(l.v[i]);
    free(l.v);
    if (root >= 0) H5Gclose(root);
    return rc;
}

/* Refuse to start finalizing without room for what it adds (plus 1% and
 * 4 MiB for libhdf5's metadata): a full disk is the likely cause of a
 * failure half way, and undoing one then needs room too. */
static int check_room(h5l_anchor_t *a, const h5l_final_t *p, h5l_err_t *err)
{
    uint64_t need = h5l_final_room(p);
    need += need / 100 + ((uint64_t)4 << 20);
    struct statvfs sv;
    int fd = open(a->path, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && fstatvfs(fd, &sv) == 0;
    if (fd >= 0) close(fd);
    if (!ok) return H5L_OK; /* cannot tell: try */
    uint64_t room = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (room < need)
        return h5l_err_set(err, H5L_EIO,
                           "%s: finalizing needs about %llu bytes, the file system has %llu free: "
                           "No space left on device",
                           a->path, (unsigned long long)need, (unsigned long long)room);
    return H5L_OK;
}

static int alloc_cb(void *ctx, const char *name, uint64_t size, uint64_t *off, h5l_err_t *err)
{
    return alloc_ext(ctx, name, size, off, err);
}

/* Prefix a finalizing failure's message with the file and the step. */
static int final_err(h5l_anchor_t *a, int rc, h5l_err_t *err)
{
    if (rc && err && strncmp(err->msg, a->path, strlen(a->path)) != 0) {
        char m[sizeof err->msg];
        snprintf(m, sizeof m, "%s", err->msg);
        h5l_err_set(err, rc, "%s: finalizing: %s", a->path, m);
    }
    return with_reason(a, rc, err);
}

/* Replace the anchors by plan p's finalized objects (canon.c, from the
 * reader's schema, which verifies every byte it reads) and allocate
 * their storage: fin.K, contiguous datasets. */
static int final_build(h5l_anchor_t *a, h5l_final_t *p, h5l_reader_t *r, h5l_err_t *err)
{
    int rc = check_room(a, p, err);
    if (!rc) rc = drop_anchors(a, err);
    if (!rc) rc = h5l_final_build(p, a->file, r, alloc_cb, a, err);
    return final_err(a, rc, err);
}

/* A serial finalize (h5logrecover): reader, plan, build, and the copies
 * of one process. *pp: the plan, for the steps of h5l_anchor_finish. */
static int finalize_serial(h5l_anchor_t *a, uint64_t tick, h5l_final_t **pp, h5l_err_t *err)
{
    *pp = NULL;
    h5l_reader_t *r = NULL;
    int rc = h5l_reader_open(a->path, &r, err);
    if (rc) return rc;
    uint64_t bad = 0;
    if (h5l_reader_damage(r, &bad, err)) {
        h5l_reader_close(r);
        return H5L_ECORRUPT;
    }
    if (h5l_reader_ntick(r) != tick) {
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: finalizing: its journal holds %llu ticks, not %llu", a->path,
                         (unsigned long long)h5l_reader_ntick(r), (unsigned long long)tick);
        h5l_reader_close(r);
        return rc;
    }
    h5l_final_t *p = NULL;
    rc = final_err(a, h5l_final_plan(r, tick, &p, err), err);
    if (!rc) rc = final_build(a, p, r, err);
    if (!rc) {
        int fd = open(a->path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) rc = h5l_err_set(err, H5L_EIO, "%s: finalizing: cannot open it: %s", a->path, strerror(errno));
        if (!rc) rc = final_err(a, h5l_final_copy(p, r, fd, 0, 1, err), err);
        if (fd >= 0) close(fd);
    }
    h5l_reader_close(r);
    *pp = p;
    return rc;
}

/* Finalizing failed (a full disk, most likely: the data is written a
 * second time): put anchors back — the canonical objects built so far
 * have fill values and may lack data, which plain readers would show as
 * fill — so the close can still complete, unfinalized, with variables
 * plain libhdf5 refuses to read. Deleting the new datasets also frees
 * their space for the close's metadata. */
static int unfinalize(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const h5l_final_t *p)
{
    h5l_err_t e = {0};
    memset(&a->io, 0, sizeof a->io);
    int rc = drop_anchors(a, &e);
    if (!rc) rc = h5l_canon_build(a->file, s, tick, H5L_ALLOC_NONE, NULL, NULL, &e);
    const char *fin = p ? h5l_final_name(p) : NULL;
    for (int k = 0; !rc && fin && fin[0] && k < 2; k++) { /* its storage: nothing points there now */
        char path[80];
        snprintf(path, sizeof path, "/_h5log/%s%s", fin, k ? ".index" : "");
        if (H5Lexists(a->file, path, H5P_DEFAULT) > 0 && H5Ldelete(a->file, path, H5P_DEFAULT) < 0) rc = H5L_EHDF5;
    }
    return rc;
}

int h5l_anchor_final_build(h5l_anchor_t *a, h5l_final_t *p, h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick,
                           h5l_err_t *err)
{
    memset(&a->io, 0, sizeof a->io);
    int rc = final_build(a, p, r, err);
    if (rc && unfinalize(a, s, tick, p) != H5L_OK)
        return h5l_err_set(err, H5L_EHDF5, "%s; putting the anchors back failed too", err ? err->msg : "");
    return rc;
}

int h5l_anchor_final_undo(h5l_anchor_t *a, const h5l_final_t *p, const h5l_schema_t *s, uint64_t tick)
{
    return unfinalize(a, s, tick, p);
}

/* Finalizing failed after libhdf5 closed the file (a layout could not be
 * pointed, or libhdf5 reads it otherwise): layouts given back, then the
 * file opened again and the anchors rebuilt, so it closes unfinalized. */
static int undo_closed(h5l_anchor_t *a, h5l_final_t *p, const h5l_schema_t *s, uint64_t tick, int fd)
{
    h5l_err_t e = {0};
    int rc = h5l_final_unpoint(p, fd, &e);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t drv = vfd_id();
    vinfo_t vi = {&a->io, 0};
    memset(&a->io, 0, sizeof a->io);
    if (!rc && fapl >= 0 && drv >= 0 && H5Pset_driver(fapl, drv, &vi) >= 0) a->file = H5Fopen(a->path, H5F_ACC_RDWR, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    if (!rc && a->file < 0) rc = H5L_EHDF5;
    if (!rc) rc = unfinalize(a, s, tick, p);
    int crc = close_h5(a, NULL);
    return rc ? rc : crc;
}

int h5l_anchor_finish(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const void *journal, size_t jlen, int sync,
                      h5l_final_t *p, int *final, h5l_err_t *err)
{
    uint64_t joff = 0;
    memset(&a->io, 0, sizeof a->io);
    int rc = H5L_OK, wanted = *final;
    h5l_final_t *own = NULL;
    if (wanted && !p) { /* serial: this process does every step */
        rc = finalize_serial(a, tick, &own, err);
        p = own;
        if (rc && unfinalize(a, s, tick, p) == H5L_OK) {
            *final = 0; /* err keeps why; the close goes on */
            rc = H5L_OK;
        }
    } else if (!wanted) {
        rc = with_reason(a, set_extents(a, s, tick, err), err);
    }
    h5l_err_t jerr = {0}, *e0 = err;
    if (!rc && wanted && !*final) err = &jerr; /* keep the finalizing failure's message */
    int fd = -1;
    if (!rc && *final) { /* the chunk index nodes, into fin.K */
        fd = open(a->path, O_RDWR | O_CLOEXEC); /* (pointing reads the headers) */
        int r = fd < 0 ? h5l_err_set(err, H5L_EIO, "%s: finalizing: cannot open it: %s", a->path, strerror(errno))
                       : final_err(a, h5l_final_index(p, a->file, fd, err), err);
        if (!r && sync && fsync(fd) != 0)
            r = h5l_err_set(err, H5L_EIO, "%s: finalizing: fsync: %s", a->path, strerror(errno));
        if (r && unfinalize(a, s, tick, p) == H5L_OK) {
            *final = 0;
            err = &jerr;
        } else if (r) {
            rc = r;
        }
    }
    if (!rc) rc = h5l_anchor_alloc(a, "journal", jlen, &joff, err);
    int crc = close_h5(a, rc ? NULL : err); /* always: libhdf5 must let go of the file */
    if (!rc) rc = crc;
    if (!rc && *final) { /* the layouts pointed at the roots, and checked */
        h5l_err_t pe = {0};
        int r = h5l_final_point(p, a->path, fd, &pe);
        if (!r && sync && fsync(fd) != 0) r = h5l_err_set(&pe, H5L_EIO, "%s: fsync: %s", a->path, strerror(errno));
        if (r) {
            if (e0) *e0 = pe;
            if (undo_closed(a, p, s, tick, fd) == H5L_OK) {
                *final = 0;
                err = &jerr;
            } else {
                rc = h5l_err_set(e0, r, "%s; undoing it failed too (the file stays live: h5logrecover)", pe.msg);
            }
        }
    }
    if (fd >= 0) close(fd);
    if (!rc) {
        int jfd = open(a->path, O_WRONLY | O_CLOEXEC);
        int e = jfd < 0 ? errno : h5l_fd_write(jfd, journal, jlen, joff, NULL, NULL) ? errno : 0;
        if (!e && sync && fsync(jfd) != 0) e = errno;
        if (jfd >= 0) close(jfd);
        if (e)
            rc = h5l_err_set(err, H5L_EIO, "%s: embedding the journal (%zu bytes at %llu) failed: %s", a->path, jlen,
                             (unsigned long long)joff, strerror(e));
    }
    /* the commit point of close: after it the file is self-contained.
     * Without sync the order still holds for every reader on this node
     * (page cache); a node crash may lose the close, and then the sidecar,
     * whose unlink comes after, is still there: nothing is lost. */
    if (!rc) rc = ub_close(a, joff, jlen, H5L_UB_CLOSED | (*final ? H5L_UB_FINALIZED : 0), sync, err);
    if (rc && err != e0 && e0) *e0 = jerr; /* a later step failed: that is the message */
    h5l_final_free(own);
    free(a->path);
    free(a);
    return rc;
}

int h5l_anchor_recreate(const char *path, const uint8_t id[16], uint64_t keep_from, uint64_t keep_to,
                        h5l_anchor_t **out, h5l_err_t *err)
{
    h5l_anchor_t *a;
    int rc = anchor_new(path, id, 1, &a, err);
    if (rc) return rc;
    if (keep_to > keep_from) {
        /* The log's bytes become the storage of one byte dataset, which
         * keeps libhdf5 off them: it must start at or before keep_from and
         * end at or after keep_to. Where libhdf5 puts it is its choice,
         * but never before the user block's end: sized from there, it
         * reaches keep_to wherever it starts (running past the old end of
         * the file by at most the new metadata before it, a few KB, which
         * stay unwritten). */
        haddr_t addr = byte_dataset(a->file, "/_h5log/log", keep_to - H5L_USERBLOCK_SIZE);
        if (addr == HADDR_UNDEF)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: cannot make /_h5log/log", path);
        else if (addr > keep_from)
            rc = h5l_err_set(err, H5L_EFORMAT,
                             "%s: its log starts at byte %llu, before where a new HDF5 file can keep it "
                             "(%llu): cannot rebuild it in place",
                             path, (unsigned long long)keep_from, (unsigned long long)addr);
    }
    if (rc) {
        h5l_anchor_abort(a);
        return rc;
    }
    *out = a;
    return H5L_OK;
}

int h5l_anchor_open(const char *path, const uint8_t id[16], h5l_anchor_t **out, h5l_err_t *err)
{
    *out = NULL;
    h5l_anchor_t *a = calloc(1, sizeof *a);
    if (!a || !(a->path = strdup(path))) {
        free(a);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    }
    memcpy(a->id, id, 16);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t drv = vfd_id();
    vinfo_t vi = {&a->io, 0};
    a->file = -1;
    if (fapl >= 0 && drv >= 0 && H5Pset_driver(fapl, drv, &vi) >= 0) a->file = H5Fopen(path, H5F_ACC_RDWR, fapl);
    if (fapl >= 0) H5Pclose(fapl);
    char why[256];
    if (a->file < 0) {
        h5l_err_set(err, H5L_EHDF5, "%s: libhdf5 cannot open it for writing%s", path, vio_reason(a, why, sizeof why));
        free(a->path);
        free(a);
        return H5L_EHDF5;
    }
    *out = a;
    return H5L_OK;
}

int h5l_anchor_finalize_closed(h5l_anchor_t *a, uint64_t tick, uint64_t joff, uint64_t jlen, int sync, h5l_err_t *err)
{
    memset(&a->io, 0, sizeof a->io);
    a->was = (h5l_ub_t){.jr_off = joff, .jr_len = jlen, .flags = H5L_UB_CLOSED};
    h5l_final_t *p = NULL;
    int rc = finalize_serial(a, tick, &p, err), fd = -1;
    if (!rc) {
        fd = open(a->path, O_RDWR | O_CLOEXEC);
        rc = fd < 0 ? h5l_err_set(err, H5L_EIO, "%s: finalizing: cannot open it: %s", a->path, strerror(errno))
                    : final_err(a, h5l_final_index(p, a->file, fd, err), err);
    }
    int crc = close_h5(a, rc ? NULL : err);
    if (!rc) rc = crc;
    if (!rc) {
        rc = h5l_final_point(p, a->path, fd, err);
        if (!rc && sync && fsync(fd) != 0) rc = h5l_err_set(err, H5L_EIO, "%s: fsync: %s", a->path, strerror(errno));
        if (rc) h5l_final_unpoint(p, fd, NULL); /* the file stays closed, not finalized */
    }
    if (fd >= 0) close(fd);
    if (!rc) rc = ub_close(a, joff, jlen, H5L_UB_CLOSED | H5L_UB_FINALIZED, sync, err);
    h5l_final_free(p);
    free(a->path);
    free(a);
    return rc;
}

void h5l_anchor_abort(h5l_anchor_t *a)
{
    if (!a) return;
    close_h5(a, NULL);
    free(a->path);
    free(a);
}

/* A writer continuing a file (h5l_open) makes its HDF5 file with
 * h5l_anchor_recreate (the old metadata, a finalized file's included, is
 * never edited: its in-place chunks would be freed by libhdf5 deleting
 * them, format.md 1.1), so the anchors of the objects defined before are
 * made only when first needed — a definition that touches them, or a
 * close without finalizing — and opening costs no libhdf5 call per
 * variable. */
int h5l_anchor_rebuild(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, h5l_err_t *err)
{
    memset(&a->io, 0, sizeof a->io);
    int rc = h5l_canon_build(a->file, s, tick, H5L_ALLOC_NONE, NULL, NULL, err);
    return with_reason(a, rc, err);
}
