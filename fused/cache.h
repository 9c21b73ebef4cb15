/* cache.h — the daemon's shared cache of assembled chunks.
 *
 * One cache, one memory limit, for every dataset of every mounted file
 * (docs/architecture.md, "The cache"). A *dataset* (hfs_cds_t:
 * one variable of one file) has its own hash index of cached chunks, keyed
 * by chunk coordinates and content version; one replacement policy spans all
 * datasets. Because the key holds the content version (the newest record
 * sequence touching the chunk, plus the chunk's clipped extent), a chunk
 * that did not change between ticks is one entry shared by every snapshot,
 * and a new tick makes only the chunks it touched miss. Caching a version
 * of a chunk drops the older versions of that chunk (same coordinates),
 * so a live file's chunks that change every tick keep one entry each.
 *
 * Replacement (scan resistance): segmented LRU with CLOCK bits. New chunks
 * enter a *probation* FIFO; a chunk hit while on probation is promoted to the
 * *protected* segment (at most 3/4 of the limit) when the evictor reaches it;
 * protected chunks get a second chance per hit bit. A reader streaming a huge
 * variable only ever churns probation, so the hot set other readers keep
 * hitting stays protected. Hits set an atomic bit and take a pin under the
 * dataset's lock; the global replacement lock is taken only on insert/evict.
 *
 * Concurrency: two threads missing the same chunk assemble it once — the
 * first inserts a LOADING entry and assembles outside every lock, the others
 * wait on the dataset's condition variable. Pinned entries are never evicted;
 * the limit is never exceeded: a chunk that cannot be made room for (larger
 * than the limit, or everything pinned) is not cached and the caller
 * assembles it into its own buffer.
 *
 * Who frees what: hfs_cache_get returns a pinned entry the caller releases
 * with hfs_cache_release; datasets are freed by hfs_cds_close once their
 * owner and every entry are gone. */
#ifndef HFS_CACHE_H
#define HFS_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "h5log_common.h"

typedef struct hfs_cache hfs_cache_t;
typedef struct hfs_cds hfs_cds_t;
typedef struct hfs_centry hfs_centry_t;

typedef struct hfs_ckey {
    uint32_t ndims;
    uint64_t coord[H5L_MAX_DIMS]; /* chunk coordinates */
    uint64_t ver[3];              /* content version (tick, rank, order) */
    uint64_t extent;              /* hash of the clipped chunk extent */
} hfs_ckey_t;

/* Layout callbacks (RFC: lookup / decode / evict): how a dataset's chunk is
 * made. assemble fills buf (len bytes) and returns 0 or an H5L_E* code. */
typedef struct hfs_layout {
    int (*assemble)(void *ctx, const hfs_ckey_t *key, void *buf, size_t len);
    void (*evicted)(void *owner, const hfs_ckey_t *key, size_t len); /* may be NULL */
} hfs_layout_t;

typedef struct hfs_cache_stats {
    uint64_t hits, misses, waits, uncached, evictions;
    uint64_t superseded; /* entries dropped because a newer version of their chunk was cached */
    uint64_t bytes_assembled, bytes_skipped, bytes_hit;
    uint64_t mem, peak, limit, entries;
} hfs_cache_stats_t;

hfs_cache_t *hfs_cache_new(size_t limit);
void hfs_cache_free(hfs_cache_t *c); /* all datasets must be gone */

/* A dataset index for `owner` (opaque; passed to layout->evicted). */
hfs_cds_t *hfs_cds_new(hfs_cache_t *c, const hfs_layout_t *layout, void *owner);
/* The owner is done: its cached entries are dropped (as pins allow). */
void hfs_cds_close(hfs_cds_t *d);

/* A pinned entry holding chunk key (len bytes), assembled by
 * layout->assemble(ctx, ...) on a miss. NULL when the chunk is not cached
 * (*rc 0: the caller must assemble it itself; negative: assembly failed). */
hfs_centry_t *hfs_cache_get(hfs_cds_t *d, const hfs_ckey_t *key, size_t len, void *ctx, int *rc, int *hit);
/* A pinned entry if chunk key is cached and ready (counted as a hit), else
 * NULL: nothing is assembled, inserted or counted. For callers that can
 * serve a miss more cheaply than by assembling the whole chunk. */
hfs_centry_t *hfs_cache_peek(hfs_cds_t *d, const hfs_ckey_t *key);
/* Cache chunk key (len bytes, made by layout->assemble(ctx, ...)) if no
 * entry of that key exists, in whatever state: never waits for another
 * thread's assembly, so a caller filling many chunks at once (siblings
 * assembled in one pass, lfile.c) cannot deadlock against another such
 * caller. 1 if cached, 0 if not (there already, or no room), or the
 * assembly's negative code. */
int hfs_cache_put(hfs_cds_t *d, const hfs_ckey_t *key, size_t len, void *ctx);
/* The same in two steps, for a caller that fills many chunks in one pass
 * straight into their entries (siblings, lfile.c): a pinned LOADING entry
 * for key, charged against the limit (NULL: an entry of that key exists in
 * any state, or no room; never waits), whose buffer (hfs_centry_buf, len
 * bytes) the caller fills; then hfs_cache_publish(e, rc) with rc 0 (filled:
 * READY) or the failure's code (dropped; waiters get rc), which releases
 * the caller's pin. Returns as hfs_cache_put. Threads that ask for such a
 * chunk meanwhile wait for its publication, so the caller must publish
 * every entry it reserved, and must not wait for another thread's chunk
 * while it holds any. */
hfs_centry_t *hfs_cache_reserve(hfs_cds_t *d, const hfs_ckey_t *key, size_t len);
void *hfs_centry_buf(hfs_centry_t *e);
int hfs_cache_publish(hfs_centry_t *e, int rc);
const void *hfs_centry_data(const hfs_centry_t *e);
void hfs_cache_release(hfs_centry_t *e);

/* Count bytes served without the cache (the skip path), and bytes served
 * from cache hits (the part of a chunk a read used, not the chunk). */
void hfs_cache_count_skip(hfs_cache_t *c, uint64_t bytes);
void hfs_cache_count_hit(hfs_cache_t *c, uint64_t bytes);
void hfs_cache_get_stats(hfs_cache_t *c, hfs_cache_stats_t *out);

#endif
