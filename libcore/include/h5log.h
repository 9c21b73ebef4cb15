/* h5log.h — libh5log, the parallel log-layout HDF5 writer (public API).
 *
 * MPI ranks buffer hyperslab writes with h5l_put / h5l_iput; a collective
 * h5l_flush appends them to the file as one log dataset plus one record table
 * and commits one "tick" to the journal. Readers (h5logfs, h5logreplay) see
 * the file tick by tick. The byte format is docs/format.md.
 *
 * Conventions: every function returns H5L_OK (0) or a negative H5L_E* code;
 * h5l_errmsg() tells why. Collective functions must be called by every rank
 * of the communicator with the same arguments. */
#ifndef H5LOG_H
#define H5LOG_H

#include <stddef.h>
#include <stdint.h>
#include <hdf5.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "h5log_common.h" /* H5L_VERSION_STRING, error codes, H5L_API */

/* Durability of a tick (h5l_opts_t.sync). */
enum h5l_sync {
    H5L_SYNC_NONE = 0, /* order writes before each commit; never fsync (default):
                        * safe against a killed process, like H5Fclose */
    H5L_SYNC_TICK = 1  /* also MPI_File_sync the data and fsync the journal per
                        * tick, and fsync each step of close: safe against a
                        * node crash */
};

typedef struct h5l_opts {
    size_t buffer_limit;  /* bytes h5l_put may buffer per rank; default 1 GiB */
    int sync;             /* enum h5l_sync */
    int check_collective; /* verify ranks made identical definitions; default 1 */
    int no_finalize;      /* 0 (default): h5l_close lays the newest tick's data
                          * into the file's datasets, so plain libhdf5 readers
                          * (h5py, netCDF, ncdump) read the right values
                          * without h5logfs. 1: a cheaper close, and plain
                          * libhdf5 readers get an error reading any
                          * variable (never fill values): read through the
                          * mount or h5logreplay, or finalize later with
                          * h5logrecover. Zero also when the struct is
                          * zero-initialised, so the default is safe. */
    int early_writes;     /* 1: once a tick's data has the sizes of the
                          * tick before it, the flush reserves the same
                          * place for the next tick and puts write their
                          * data there as they come (h5l_put without a copy
                          * once 4 MiB are pending), so the flush writes
                          * only what is left; for writers that compute
                          * between puts, on file systems that take writes
                          * to one file in parallel. 0 (default): every
                          * byte is written by the flush, which measured
                          * as fast or faster on a local file system
                          * (docs/performance.md). Takes effect only when
                          * every rank passes 1. */
    int pad_;
    /* Room for options to come without changing the struct's size (the
     * ABI of libh5log.so.0): zero (h5l_opts_init sets it so). */
    uint64_t reserved_[7];
} h5l_opts_t;

typedef struct h5l_file h5l_file_t;

/* Fill *o with the defaults. Cannot fail. */
H5L_API void h5l_opts_init(h5l_opts_t *o);

/* Collective. Create (truncate) `path` and its journal sidecar `path.h5lj`.
 * On failure *f is NULL and h5l_errmsg(NULL) tells why (per thread). */
H5L_API int h5l_create(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **f);

/* Collective. Go on writing an existing log-layout file (a restart), from
 * any number of ranks: the file continues at its newest committed tick
 * (a file whose writer was killed: its last complete tick, as
 * h5logrecover decides), with that tick's dimensions, groups, variables
 * and attributes (look them up with h5l_inq_*); new ones may be defined,
 * unlimited dimensions keep growing, tick numbers go on. Nothing of the
 * data is copied. A file with a damaged journal is refused and left
 * untouched (H5L_ECORRUPT). One writer at a time: a file open for writing
 * (h5l_create or h5l_open elsewhere, its lock file PATH.h5lock) is refused
 * with H5L_EBUSY, naming the holder. Until the next h5l_close the file is
 * live again (docs/api.md, "Continuing a file"). On failure *f is NULL and
 * h5l_errmsg(NULL) tells why. */
H5L_API int h5l_open(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **f);

/* Lookups, local (no communication), of what is defined so far (committed
 * or pending on this rank): the id of dimension `name`, of the group or
 * variable at absolute `path`; a dimension's length as of the last flush
 * (pending growth counts at the next one) and whether it is unlimited; a
 * variable's number of dimensions and their ids (dimids: room for
 * H5L_MAX_DIMS). H5L_ENOTFOUND / H5L_EBADID when there is no such thing. */
#define H5L_HAVE_OPEN 1
H5L_API int h5l_inq_dimid(const h5l_file_t *f, const char *name, int *dimid);
H5L_API int h5l_inq_varid(const h5l_file_t *f, const char *path, int *varid);
H5L_API int h5l_inq_grpid(const h5l_file_t *f, const char *path, int *grpid);
H5L_API int h5l_inq_dimlen(const h5l_file_t *f, int dimid, uint64_t *len);
H5L_API int h5l_inq_unlimited(const h5l_file_t *f, int dimid, int *unlimited);
H5L_API int h5l_inq_varndims(const h5l_file_t *f, int varid, int *ndims);
H5L_API int h5l_inq_vardimid(const h5l_file_t *f, int varid, int *dimids);
/* Enumeration (what a binding needs to show an opened file): the number
 * of dimensions (ids 0..n-1) and of objects (ids 0..n-1, 0 the root
 * group); an object's kind (1 group, 2 variable) and path; a dimension's
 * name; a variable's type (a predefined HDF5 type id, not to be closed),
 * chunk shape (*chunked 0: index slab shape, a contiguous variable) and
 * fill value (one element; *fill_mode 0 netCDF's default, 1 set, 2 none).
 * Names are copied into buf (cap bytes, NUL-terminated; H5L_ERANGE if too
 * small). */
H5L_API int h5l_inq_counts(const h5l_file_t *f, int *ndims, int *nobjs);
H5L_API int h5l_inq_dimname(const h5l_file_t *f, int dimid, char *buf, size_t cap);
H5L_API int h5l_inq_obj(const h5l_file_t *f, int objid, int *kind, char *buf, size_t cap);
H5L_API int h5l_inq_var(const h5l_file_t *f, int varid, hid_t *type, int *chunked, uint64_t *chunk, void *fill,
                        int *fill_mode);

/* Collective. Define a dimension; len may be H5L_UNLIMITED (starts at 0). */
H5L_API int h5l_def_dim(h5l_file_t *f, const char *name, uint64_t len, int *dimid);

/* Collective. Define a group (parents created as needed); returns its id,
 * usable with h5l_put_att. Defining an existing group returns its id. */
H5L_API int h5l_def_grp(h5l_file_t *f, const char *path, int *grpid);

/* Collective. Define a variable at `path` ("/atm/temp"; groups are created as
 * needed). `type` is an HDF5 integer or IEEE float type; the data passed to
 * h5l_put is in this type. chunk NULL means contiguous (a variable with an
 * unlimited dimension gets a default chunk shape). */
H5L_API int h5l_def_var(h5l_file_t *f, const char *path, hid_t type, int ndims, const int *dimids,
                        const uint64_t *chunk, int *varid);

/* Collective. Set the fill value (one element of the variable's type): what
 * never-written elements read as. The canonical file shows it as the HDF5
 * fill value and as a _FillValue attribute (netCDF readers mask by it).
 * h5l_put_att(f, varid, "_FillValue", type, 1, &x) does the same.
 * Only before the flush that publishes the variable. Without a call, a
 * variable's fill is netCDF's default for its type (NC_FILL_FLOAT, ...) and
 * no _FillValue attribute is written, as netCDF-4 does. */
H5L_API int h5l_def_var_fill(h5l_file_t *f, int varid, const void *fill);

/* Collective. No fill value (netCDF's NOFILL): no _FillValue attribute, no
 * HDF5 fill value; never-written elements read as zero bytes and netCDF
 * readers mask nothing. Only before the flush that publishes the variable. */
#define H5L_HAVE_NOFILL 1
H5L_API int h5l_def_var_nofill(h5l_file_t *f, int varid);

/* Collective. Attach an attribute to a variable, a group or H5L_GLOBAL.
 * Redefining a name replaces it from the next tick on (it keeps its place
 * in the canonical file's attribute order). Names that HDF5 dimension
 * scales and netCDF-4 reserve (DIMENSION_LIST, REFERENCE_LIST, CLASS, NAME,
 * _Netcdf4Dimid, _Netcdf4Coordinates, _NCProperties, _nc3_strict, ...) are
 * refused with H5L_EINVAL; _FillValue sets the fill (h5l_def_var_fill). */
H5L_API int h5l_put_att(h5l_file_t *f, int objid, const char *name, hid_t type, size_t n, const void *value);
H5L_API int h5l_put_att_text(h5l_file_t *f, int objid, const char *name, const char *text);

/* Independent. Buffer a write of the box (start, count) of `varid`; copies
 * `buf` (row-major, the variable's type) and returns. Past the current length
 * of an unlimited dimension the dimension grows at the next flush. On any
 * error nothing is buffered and what was buffered before stays. */
H5L_API int h5l_put(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf);

/* Independent. As h5l_put, but does not copy: `buf` must stay unchanged until
 * a flush that publishes it succeeds (a failed flush keeps referring to it)
 * or h5l_close returns. Does not count against the limit. */
H5L_API int h5l_iput(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf);

/* Independent. As h5l_put, converting from `memtype` to the variable's type
 * with libhdf5 (e.g. double data into a float variable). */
H5L_API int h5l_put_conv(h5l_file_t *f, int varid, hid_t memtype, const uint64_t *start, const uint64_t *count,
                         const void *buf);

/* Collective. Write everything buffered and publish one tick.
 *
 * Failure (a full disk, an I/O error, an MPI-IO write that transferred
 * fewer bytes than asked — OpenMPI reports a full disk that way — or a
 * failed journal append): every rank returns the same code (H5L_EIO for
 * I/O) and h5l_errmsg(f) on every rank names the file and the reason as
 * the failing rank saw it ("No space left on device", "Input/output
 * error", "short write"), what was being written and where. Nothing of
 * this flush is committed: readers see exactly the ticks before it and
 * h5l_ntick() does not change. The buffered writes are kept, so the call
 * may be retried (after space was freed): the retry writes the same bytes
 * to the same place and commits them. If only the journal append failed,
 * the tick is already complete on disk and fixed: the next h5l_flush or
 * h5l_close commits exactly it first (a partly written journal record is
 * completed with the same bytes), and writes put since go into the tick
 * after — so that h5l_flush may publish two ticks. */
H5L_API int h5l_flush(h5l_file_t *f);

/* Collective. Flush (if anything is pending), finalize (unless
 * opts.no_finalize: rank 0 lays the newest tick's data into the file's
 * datasets, so plain HDF5/netCDF clients read it without h5logfs), embed
 * the journal in the file, remove the sidecar and free f (also on failure:
 * then h5l_errmsg(NULL) tells why, on every rank).
 *
 * Failure: a failed last flush loses what it held (the caller is told);
 * the file is then still closed with the committed ticks if the close
 * steps succeed ("the file was closed with ticks 1..N"). A failed close
 * step (the journal's CLOSE record, finalizing, the HDF5 metadata, the embedded
 * journal, the user block) leaves the file open for reading: its user
 * block still says live, the sidecar FILE.h5lj is kept, and every
 * committed tick reads through libh5log's reader, h5logdump, h5logreplay
 * and the daemon ("the file was not closed: ticks 1..N stay readable from
 * its journal"). libhdf5 has let go of the file either way, so the process
 * may go on to MPI_Finalize. A close cannot be retried: h5logreplay makes
 * a closed canonical copy. */
H5L_API int h5l_close(h5l_file_t *f);

/* Number of ticks published so far. */
H5L_API uint64_t h5l_ntick(const h5l_file_t *f);

/* Bytes currently buffered by h5l_put on this rank. */
H5L_API size_t h5l_buffered(const h5l_file_t *f);

/* The reason for the last error on f (NULL: the last failed h5l_create of
 * this thread). Never NULL; "" when there was none. */
H5L_API const char *h5l_errmsg(const h5l_file_t *f);

#ifdef __cplusplus
}
#endif
#endif
