/* box.h — N-dimensional boxes (start, count) in row-major arrays: intersection
 * and the copy of one box between two row-major layouts. Pure, no I/O.
 * Used by the reader to place log records into read buffers and, in the
 * daemon, to assemble chunks. */
#ifndef H5L_BOX_H
#define H5L_BOX_H

#include <stddef.h>
#include <stdint.h>

/* Intersect (as, ac) with (bs, bc) into (os, oc). Returns 1 if not empty. */
int h5l_box_intersect(uint32_t nd, const uint64_t *as, const uint64_t *ac, const uint64_t *bs, const uint64_t *bc,
                      uint64_t *os, uint64_t *oc);

/* Element offset of point p inside the row-major box (s, c). */
uint64_t h5l_box_offset(uint32_t nd, const uint64_t *s, const uint64_t *c, const uint64_t *p);

/* Number of elements of a box (saturates at UINT64_MAX). */
uint64_t h5l_box_nelem(uint32_t nd, const uint64_t *c);

/* Walk the contiguous runs of box X inside both row-major layouts A (the
 * source) and B (the destination); X must lie inside both. For each run,
 * fn(ctx, src_elem_offset, dst_elem_offset, run_elems) is called, runs in
 * increasing source order. Trailing dimensions X covers fully in both A and B
 * are merged, so a fully contiguous copy is a single run. Stops and returns
 * fn's value at the first non-zero. */
typedef int (*h5l_run_fn)(void *ctx, uint64_t src, uint64_t dst, uint64_t n);
int h5l_box_runs(uint32_t nd, const uint64_t *xs, const uint64_t *xc, const uint64_t *as, const uint64_t *ac,
                 const uint64_t *bs, const uint64_t *bc, h5l_run_fn fn, void *ctx);

/* h5l_box_runs copying: box X's elements (es bytes each) from src, laid
 * out as box A, to dst, laid out as box B, a memcpy per run. */
void h5l_box_copy(uint32_t nd, size_t es, const uint64_t *xs, const uint64_t *xc, const uint64_t *as,
                  const uint64_t *ac, const uint8_t *src, const uint64_t *bs, const uint64_t *bc, uint8_t *dst);

/* Elements [e0, e1) of a box of shape sh, in row-major order, as at most
 * 2*nd boxes (rs, rc) relative to the box, each of whose own row-major order
 * is one run of the range: fn(ctx, rs, rc, position of the box's first
 * element counted from e0), in order. Used to read a byte range of a chunk
 * (a reply cut anywhere) as boxes. Stops at fn's first non-zero value. */
typedef int (*h5l_lin_fn)(void *ctx, const uint64_t *rs, const uint64_t *rc, uint64_t first);
int h5l_box_linear(uint32_t nd, const uint64_t *sh, uint64_t e0, uint64_t e1, h5l_lin_fn fn, void *ctx);

/* One destination chunk of h5l_box_scatter: element e of the chunk (its
 * row-major index in the full chunk shape) goes to base + (e - shift) *
 * es; base NULL: the chunk is skipped. */
typedef struct h5l_box_dst {
    uint8_t *base;
    uint64_t shift;
} h5l_box_dst_t;

/* Copy box T (start ts, count tc), held row-major in src, into the chunks
 * (shape ch) it meets: cells[] has one entry per chunk of the grid T meets
 * (chunk coordinates g0 = ts / ch up to (ts + tc - 1) / ch, row-major).
 * Walks src once, row by row of T's last dimension, each row's piece of
 * each chunk to that chunk, so every destination is filled in its own
 * order: a transposing copy at memory speed (chunks of one element per
 * row of T are 256 streams side by side, not 256 strided passes). Only
 * elements of T are written. nd >= 1. */
void h5l_box_scatter(uint32_t nd, size_t es, const uint64_t *ts, const uint64_t *tc, const uint8_t *src,
                     const uint64_t *ch, const h5l_box_dst_t *cells);

/* The same walk, but each chunk's destination is T's part of it packed
 * row-major (the box T meets the chunk in: its own layout): cells[g] is
 * its first byte, NULL to skip it. The writer lays a put out so, chunk by
 * chunk (h5l_put). nd >= 1. */
void h5l_box_split(uint32_t nd, size_t es, const uint64_t *ts, const uint64_t *tc, const uint8_t *src,
                   const uint64_t *ch, uint8_t *const *cells);

/* The tile of whole chunks that chunk c (coordinates, in a grid of nblk
 * chunks of chunk_bytes each) is assembled with when its pieces lie
 * thinly across the log: c's own coordinate in the dimensions before
 * some t, m chunks from c on along t, every chunk after t — t the first
 * dimension at which one such row of chunks holds at most budget bytes, m
 * as many rows as fit. Such a tile is read from the log in one pass and
 * cut into its chunks (h5l_box_scatter): a z-plane chunk of x-slabs then
 * costs the log once per tile, not once per chunk. *g0, *gn: the tile's
 * chunks (first coordinate, count per dimension). Returns the number of
 * chunks, 1 when nothing beyond c fits. */
uint64_t h5l_box_tile(uint32_t nd, const uint64_t *nblk, uint64_t chunk_bytes, const uint64_t *c, uint64_t budget,
                      uint64_t *g0, uint64_t *gn);

#endif
