/* skel.h — the skeleton of one canonical file: the metadata image libhdf5
 * produced for a snapshot, and the map of its raw-data regions.
 *
 * Every raw byte of the canonical file belongs to one *block* of one
 * variable: a chunk of a chunked variable (stored full-size, edge chunks
 * padded), or an index slab of a contiguous one (a contiguous run of the
 * dataset). Blocks are exactly the reader's index chunks, so assembling one
 * block touches only the records bucketed under it. Only chunks that hold
 * data are allocated (and have a region): the others are not in the file
 * and every HDF5 reader reads them as the fill value. A skeleton depends
 * only on the schema, the extents and which chunks hold data, so data-only
 * ticks that start no chunk share it; it is immutable and
 * reference-counted. Building one takes the daemon's libhdf5
 * lock; everything else is lock-free reads. */
#ifndef HFS_SKEL_H
#define HFS_SKEL_H

#include <stdatomic.h>
#include <stdint.h>
#include "h5log/btree.h"
#include "h5log_reader.h"
#include "memvfd.h"

typedef struct hfs_svar {
    uint32_t objid, ndims;
    size_t esize;
    int chunked;
    /* ndims each, in the skeleton's dimv (fixed arrays of H5L_MAX_DIMS were
     * 816 bytes a variable: 16 MB, fresh pages, for 20,000 variables) */
    uint64_t *shape;
    uint64_t *block; /* chunk or slab shape */
    uint64_t *nblk;  /* blocks per dimension */
    uint64_t nblocks;
    int sparse;          /* chunked, only the chunks holding data allocated */
    uint32_t own;        /* 0, or 1 + the index in bts of the chunk index the daemon writes for it */
    struct hfs_cds *cds; /* its chunk-cache index (set by lfile.c) */
    uint64_t ds_at;      /* 0, or (a patched live skeleton, own root) where its dataspace's dimensions lie
                          * in its object header: served from shape, libhdf5's are those of the full build
                          * (skel.c, own_dims) */
    int ds_no;           /* its header is not one whose dimensions the daemon serves: libhdf5 extends it */
} hfs_svar_t;

typedef struct hfs_region {
    uint64_t addr, len; /* bytes of the canonical file */
    uint32_t var;       /* index into hfs_skel_t.vars */
    uint32_t bt;        /* 0: one block; else a run of chunks of hfs_skel_t.bts[bt - 1],
                         * chunk_bytes each, see btree.h */
    uint64_t blk;       /* row-major block index within the variable; for a run,
                         * the ordinal of its first chunk */
} hfs_region_t;

/* Bytes [lo, hi) of the file that chunk index bt (index into
 * hfs_skel_t.bts) writes over the image: a root, a node area, an own
 * root's layout address or checksum. */
typedef struct hfs_ovl {
    uint64_t lo, hi;
    uint32_t bt;
    uint32_t var; /* 1 + index in vars: that variable's dimensions (ds_at) instead of bt's bytes */
} hfs_ovl_t;

typedef struct hfs_skel {
    atomic_int refs;
    uint64_t version; /* newest tick <= the snapshot's that changed schema or extents */
    uint64_t eof;     /* st_size of the canonical file */
    hfs_memvfd_image_t *img;
    hfs_svar_t *vars;
    size_t nvars;
    uint64_t *dimv; /* the vars' shape, block and nblk arrays, back to back */
    size_t ndimv;
    hfs_region_t *regions; /* sorted by addr, disjoint */
    size_t nregions;
    h5l_bt_t *bts; /* chunk indexes written by the daemon (sparse variables of full builds) */
    size_t nbts;
    hfs_ovl_t *ovl; /* what the bts write, sorted, disjoint: a metadata read finds its few in O(log) */
    size_t novl;
    uint64_t build_ns; /* time the build took */
    int live;          /* the image of a file kept open (hfs_skel_build_live): same objects and
                        * values as hfs_skel_build's, not the same bytes */
    int counted;       /* in hfs_skel_held's count */
    char *fallback;    /* why the daemon's own chunk indexes were given up and this was built with
                        * libhdf5's (a guard refused them); NULL: not given up. For the log. */
} hfs_skel_t;

/* The tick <= tick of the newest change of schema, extents or the set of
 * chunks that hold data (those are the allocated ones). Call with the
 * reader's read lock held (s is its schema). */
uint64_t hfs_skel_version(h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick);

/* Build the skeleton of reader r as of tick (takes the libhdf5 lock). */
int hfs_skel_build(h5l_reader_t *r, uint64_t tick, hfs_skel_t **out, h5l_err_t *err);

/* A skeleton kept open for patching: the in-memory HDF5 file of a live
 * file's newest skeleton, with its datasets. When the ticks after it only
 * grew dimensions, gave chunks data and set attributes that exist already
 * to values of the same type and shape (no object, dimension or attribute
 * defined, nothing shrank), the next skeleton is this file patched in
 * place — H5Dset_extent of the variables and scales that grew, the new
 * chunks of sparse variables written, the attributes' new values written
 * over the old — flushed and its image copied: work
 * that follows what changed, not the whole schema (a full build of 1,000
 * variables takes ~150 ms, libhdf5 creating every object again). Patched
 * images have the same objects, values and attributes as a full build of
 * the tick, not the same byte layout. Owned by one thread at a time. */
typedef struct hfs_skel_live hfs_skel_live_t;

/* Build the skeleton of reader r as of tick like hfs_skel_build, by
 * patching *live when it can (a patch that cannot be made or fails drops
 * it and builds in full: a patch never gives up the build), else in full,
 * keeping the file open as the new *live. On failure *live may be NULL. */
int hfs_skel_build_live(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **live, hfs_skel_t **out, h5l_err_t *err);

/* Only the patch of hfs_skel_build_live: H5L_ESTATE (or the patch's
 * error) when *live is NULL or cannot be patched to tick, and then *live is
 * freed and set to NULL; no full build. */
int hfs_skel_patch_live(h5l_reader_t *r, uint64_t tick, hfs_skel_live_t **live, hfs_skel_t **out, h5l_err_t *err);

/* Free a live state (takes the libhdf5 lock). NULL is ignored. */
void hfs_skel_live_free(hfs_skel_live_t *l);

/* Patches applied to l since its full build (statistics, tests). */
uint64_t hfs_skel_live_patches(const hfs_skel_live_t *l);

/* on 1: builds in progress and later ones fail soon (at the next
 * variable) with "cancelled": the daemon is stopping and must not wait for
 * a long build. 0 allows builds again. */
void hfs_skel_cancel(int on);

/* Skeletons built and not freed (held by snapshots the kernel has not
 * forgotten, or by a file), and the bytes of their images. */
void hfs_skel_held(uint64_t *n, uint64_t *bytes);

hfs_skel_t *hfs_skel_ref(hfs_skel_t *k);
void hfs_skel_unref(hfs_skel_t *k); /* accepts NULL */

/* Box (start, count) of block blk of variable v, clipped to the shape. */
void hfs_skel_block_box(const hfs_svar_t *v, uint64_t blk, uint64_t *start, uint64_t *count);

/* The region containing off, or the first one after it; nregions if none. */
size_t hfs_skel_find(const hfs_skel_t *k, uint64_t off);

/* The one-block region of run region g (bt != 0) that holds offset off
 * (inside g). */
hfs_region_t hfs_skel_run_block(const hfs_skel_t *k, const hfs_region_t *g, uint64_t off);

/* The metadata bytes [off, off + len) of k into buf: the image's, with the
 * nodes of the chunk indexes the daemon writes (zeros where there are
 * neither: holes, raw data). 0, or H5L_ENOMEM. */
int hfs_skel_meta_read(const hfs_skel_t *k, uint64_t off, size_t len, void *buf);

/* Chunk indexes are written by the daemon (btree.h) for sparse variables
 * with at least n chunks holding data; libhdf5 writes the others. Default
 * 2; above 2, builds not kept live also keep libhdf5's early allocation
 * and indexes (no own roots); UINT64_MAX turns it all off. */
void hfs_skel_set_synth_min(uint64_t n);

/* Patches that grew a chunk index of the daemon's (statistics). */
uint64_t hfs_skel_own_appends(void);
/* Variables whose new chunks a patch took from the reader's prefix of
 * rows without probing each (h5l_reader_chunk_prefix; statistics). */
uint64_t hfs_skel_own_prefixes(void);

/* The one lock around every libhdf5 call of the process (not thread-safe). */
void hfs_hdf5_lock(void);
void hfs_hdf5_unlock(void);

#endif
