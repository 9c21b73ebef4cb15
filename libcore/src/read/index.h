/* index.h — records of a file bucketed by the chunks they touch.
 *
 * Every variable is tiled by its index chunks (its HDF5 chunks, or the
 * contiguous slabs of docs/format.md 3.3). A record is listed in the bucket
 * of each chunk one of its boxes touches, and buckets list records in
 * sequence order, so "every record of ticks <= T touching chunk C, in the
 * order they apply" is a hash lookup plus a binary search: a read costs the
 * records that touch it, never a scan of the log. A box touching many chunks
 * is listed in a few cells of a coarser grid instead (index.c), so no record
 * costs more than a few entries however many chunks it claims to cover.
 *
 * The index owns its records (arena-allocated; pointers stay valid until
 * h5l_index_free). Not thread-safe: the reader serialises inserts against
 * lookups with its rwlock. */
#ifndef H5L_INDEX_H
#define H5L_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct h5l_rec {
    uint64_t seq; /* set by h5l_index_insert: insertion serial (= sequence order) */
    uint64_t tick, order;
    uint32_t rank, objid;
    uint64_t offset, size; /* absolute file offset of the data, bytes */
    uint32_t nboxes, ndims;
    uint64_t *boxes; /* nboxes x (start[ndims], count[ndims]) */
} h5l_rec_t;

typedef struct h5l_index h5l_index_t;

h5l_index_t *h5l_index_new(void);
void h5l_index_free(h5l_index_t *x);

/* Register a variable's index chunk shape. 0, or H5L_ENOMEM/H5L_EINVAL (an
 * id registered with another shape; the same again is 0). */
int h5l_index_add_var(h5l_index_t *x, uint32_t objid, uint32_t ndims, const uint64_t *chunk);

/* A record with room for its boxes, owned by the index; NULL if out of
 * memory. Fill it, then h5l_index_insert it. */
h5l_rec_t *h5l_index_new_rec(h5l_index_t *x, uint32_t nboxes, uint32_t ndims);

/* List rec in every chunk it touches. Records must be inserted in
 * increasing sequence (tick, rank, order). 0 or H5L_ENOMEM/H5L_EBADID. */
int h5l_index_insert(h5l_index_t *x, h5l_rec_t *rec);

/* Room a lookup may need to merge its answer: the caller's, one per
 * thread (lookups run concurrently under the reader's read lock). Zero it
 * to start; h5l_index_scratch_free releases it. */
typedef struct h5l_index_scratch {
    h5l_rec_t **p;
    size_t cap;
} h5l_index_scratch_t;
void h5l_index_scratch_free(h5l_index_scratch_t *s);

/* The records touching chunk `coord` (chunk coordinates, not elements) of
 * objid whose tick <= tick, in sequence order, each once: *n of them at
 * *list, which points into the index or into scratch (valid until the next
 * insert or the next lookup with this scratch). 0, or H5L_ENOMEM. */
int h5l_index_chunk(const h5l_index_t *x, uint32_t objid, const uint64_t *coord, uint64_t tick,
                    h5l_index_scratch_t *scratch, h5l_rec_t *const **list, size_t *n);

/* Call fn(ctx, coord) for every chunk of objid (chunk coordinates) that
 * holds a record of tick <= tick, in no particular order and possibly more
 * than once (a wide box kept in coarse cells); stop at and return the first
 * non-zero result of fn, else 0; H5L_ERANGE past H5L_INDEX_CHUNKS_MAX calls.
 * Cost: O(chunks that ever held a record), not the chunks of its shape. */
#define H5L_INDEX_CHUNKS_MAX ((uint64_t)1 << 24)
typedef int (*h5l_index_chunk_fn)(void *ctx, const uint64_t *coord);
int h5l_index_chunks(const h5l_index_t *x, uint32_t objid, uint64_t tick, h5l_index_chunk_fn fn, void *ctx);

/* The number of distinct chunks of objid that hold a record (any tick
 * indexed), or -1 when some records of it are kept in coarse cells (their
 * chunks are not counted). O(1): a live skeleton's patch asks it of every
 * variable at every tick, where h5l_index_chunks is O(chunks so far). */
int64_t h5l_index_nchunks(const h5l_index_t *x, uint32_t objid);

/* n when the chunks of objid holding a record (any tick indexed) are
 * exactly those whose first coordinate is < n and whose others are 0 (a
 * time series written row after row), else -1. O(1): a live skeleton's
 * patch then knows a variable's new chunks without probing each (10^4
 * probes a tick, each a cache miss or two in an index of gigabytes). */
int64_t h5l_index_col_prefix(const h5l_index_t *x, uint32_t objid);

/* Does chunk `coord` of objid hold a record of tick <= tick in the fine
 * grid? (Coarse cells are not looked at: callers know there are none,
 * h5l_index_nchunks.) */
int h5l_index_has_chunk(const h5l_index_t *x, uint32_t objid, const uint64_t *coord, uint64_t tick);

/* The newest tick <= tick at which some chunk (of any variable) got its
 * first record, or 0: the set h5l_index_chunks enumerates is the same at
 * two ticks with the same answer. O(log ticks). */
uint64_t h5l_index_chunks_version(const h5l_index_t *x, uint64_t tick);

/* The chunk shape registered for objid, or NULL. */
const uint64_t *h5l_index_chunk_shape(const h5l_index_t *x, uint32_t objid);

uint64_t h5l_index_nrecords(const h5l_index_t *x);
/* Bytes held by the index (records, boxes, buckets, tables). */
size_t h5l_index_memory(const h5l_index_t *x);

#endif
