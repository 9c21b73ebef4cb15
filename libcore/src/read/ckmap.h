/* ckmap.h — the reader's chunk map of a checkpointed log: which
 * checkpointed ticks touch each index chunk, merged from every segment's
 * chunk entries or summary runs, so a read of a chunk decodes the tables
 * of those ticks only (read/reader.c's lazy ticks). */
#ifndef H5L_CKMAP_H
#define H5L_CKMAP_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

/* Which checkpointed ticks touch each index chunk: the chunk entries of
 * every segment, merged. Read-only after loading (lookups need no lock). */
typedef struct h5l_ckmap h5l_ckmap_t;
h5l_ckmap_t *h5l_ckmap_new(void);
void h5l_ckmap_free(h5l_ckmap_t *m);
/* Add segment c's chunk entries (segments in tick order). 0 or H5L_ENOMEM. */
int h5l_ckmap_add(h5l_ckmap_t *m, const h5l_ckpt_t *c);
/* Add a simple segment's chunk runs (its summary, format.md 3.5): the same
 * map as h5l_ckmap_add of its entries. 0, H5L_ENOMEM or H5L_ECORRUPT. */
int h5l_ckmap_add_runs(h5l_ckmap_t *m, const h5l_cksum_t *s);
/* After the last add: give back the room kept for growth. */
void h5l_ckmap_trim(h5l_ckmap_t *m);
/* The ticks <= tick listed for chunk coord of objid, increasing, into
 * (*buf, *cap) (grown); *n of them. 0 or H5L_ENOMEM. */
int h5l_ckmap_ticks(const h5l_ckmap_t *m, uint32_t objid, const uint64_t *coord, uint64_t tick, uint64_t **buf,
                    size_t *cap, size_t *n);
/* fn(ctx, coord, n) for the chunks coord + i e0 (i < n, n >= 1, along
 * the first dimension) of objid with a listed tick <= tick: every such
 * chunk once, in no particular order; stops at and returns fn's first
 * non-zero. */
int h5l_ckmap_chunk_runs(const h5l_ckmap_t *m, uint32_t objid, uint64_t tick,
                         int (*fn)(void *, const uint64_t *, uint64_t), void *ctx);
/* The newest tick <= tick at which a chunk got its first listed tick, or 0. */
uint64_t h5l_ckmap_version(const h5l_ckmap_t *m, uint64_t tick);
size_t h5l_ckmap_memory(const h5l_ckmap_t *m);

#endif
