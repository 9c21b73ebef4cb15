/* canon.h — building canonical HDF5 objects from a schema with libhdf5:
 * groups, datasets (shape, max dims, chunking, fill value), attributes and
 * netCDF-compatible dimension scales. One code path serves the writer's
 * anchors (no storage), h5logreplay (real storage) and the daemon's
 * skeletons (early allocation, never filled). Needs libhdf5, not MPI. */
#ifndef H5L_CANON_H
#define H5L_CANON_H

#include <hdf5.h>
#include "h5log_reader.h"
#include "h5log/error.h"

enum h5l_alloc {
    H5L_ALLOC_NONE = 0,  /* late allocation: anchors in the log file */
    H5L_ALLOC_WRITE = 1, /* default allocation: data written with H5Dwrite */
    H5L_ALLOC_EARLY = 2, /* daemon skeletons, fill never: contiguous data
                          * allocated early; chunked data incrementally, the
                          * caller allocates the chunks that hold data
                          * (H5Dwrite_chunk, fused/skel.c) */
    H5L_ALLOC_CHUNKS = 3, /* the same, but every chunked variable is left to
                           * the caller (none allocated early, whatever its
                           * number of chunks): skeletons whose chunk
                           * indexes the daemon writes (fused/btree.h) */
    H5L_ALLOC_LIVE = 4    /* H5L_ALLOC_CHUNKS for the chunked variables that
                           * can grow in their first dimension only (the
                           * daemon's index of one grows by appending: a
                           * live skeleton's patch), H5L_ALLOC_EARLY for the
                           * others (libhdf5's index, extended by
                           * H5Dset_extent in any dimension) */
};

/* A file creation property list that tracks and indexes link and
 * attribute creation order (as netCDF-4 files do); caller closes. <0 on
 * failure. */
hid_t h5l_canon_fcpl(void);

/* Create group path (parents must exist), tracking creation order. */
int h5l_canon_group(hid_t file, const char *path, h5l_err_t *err);

/* Create the dataset of variable objid as of tick under file (parents must
 * exist). *dset gets it (caller closes). */
int h5l_canon_dataset(hid_t file, const h5l_schema_t *s, uint32_t objid, uint64_t tick, int alloc, hid_t *dset,
                      h5l_err_t *err);

/* Set (create or replace) attribute a on object obj. */
int h5l_canon_attr(hid_t obj, const h5l_attr_t *a, h5l_err_t *err);
/* Give the attribute a->name of obj, which exists with the type and shape
 * h5l_canon_attr would give a, a's value in place (its place in the
 * creation order kept, as a rebuild would keep it). H5L_ESTATE when it is
 * not there or differs in type or shape (then only a rebuild is right). */
int h5l_canon_attr_rewrite(hid_t obj, const h5l_attr_t *a, h5l_err_t *err);

/* Called for each variable twice: with dset < 0 just before its dataset is
 * created, and with the dataset right after. Non-zero return aborts the
 * build with that code. */
typedef int (*h5l_canon_var_fn)(void *ctx, uint32_t objid, hid_t dset);

/* Build every group, variable, attribute and dimension scale visible at
 * tick into file (created with h5l_canon_fcpl), in the writer's order:
 * dimension scales by dimension id, then objects by id (canon.c). */
int h5l_canon_build(hid_t file, const h5l_schema_t *s, uint64_t tick, int alloc, h5l_canon_var_fn fn, void *ctx,
                    h5l_err_t *err);

/* h5l_canon_build with, for H5L_ALLOC_CHUNKS, contiguous variables stored
 * chunked: rechunk[objid] (NULL, or an array of nobjs) is the chunk shape
 * of a contiguous variable the finalizer keeps in place (docs/format.md
 * 1.1), NULL for the others. */
int h5l_canon_build_final(hid_t file, const h5l_schema_t *s, uint64_t tick, int alloc, const uint64_t *const *rechunk,
                          h5l_canon_var_fn fn, void *ctx, h5l_err_t *err);

/* Would variable objid's dataset be sparse at tick (chunked, more than
 * 2^16 chunks: incremental allocation, only chunks with data written)? */
int h5l_canon_sparse(const h5l_schema_t *s, uint32_t objid, uint64_t tick);

/* A skeleton patched in place (fused/skel.c): dimension d's data-less
 * scale, if it has one (no coordinate variable), takes its length at tick:
 * extent and netCDF's NAME marker, which carries the length. H5L_ESTATE
 * when that cannot be done in place (the caller rebuilds). */
int h5l_canon_grow_dim(hid_t file, const h5l_schema_t *s, uint32_t d, uint64_t tick, h5l_err_t *err);

#endif
