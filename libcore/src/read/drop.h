/* drop.h — drop-behind accounting for a file served to clients that cache
 * what they were served (the daemon: the mount's page cache).
 *
 * Owns: a small table of partly read 2 MiB segments of one file and how many
 * of their bytes were read. When every byte of a segment has been counted,
 * the segment is handed to a callback (the reader advises the kernel to drop
 * it: posix_fadvise DONTNEED) and leaves the table. Segments are aligned to
 * 2 MiB because the kernel only drops a large folio whole. Bytes counted
 * twice (a range read again) can end a segment early; segments that never
 * complete (the file's tail, metadata) are never dropped; a full table
 * forgets its oldest entry. Every outcome costs at most a re-read from disk,
 * never wrong data. Thread-safe. */
#ifndef H5L_DROP_H
#define H5L_DROP_H

#include <stdint.h>

#define H5L_DROP_SEG ((uint64_t)2 << 20)

typedef struct h5l_drop h5l_drop_t;
typedef void (*h5l_drop_fn)(void *ctx, uint64_t off, uint64_t len);

h5l_drop_t *h5l_drop_new(void); /* NULL: out of memory */
void h5l_drop_free(h5l_drop_t *d);
/* n bytes at off were read: fn(ctx, off, H5L_DROP_SEG) for each segment
 * they complete (called with no lock held). */
void h5l_drop_count(h5l_drop_t *d, uint64_t off, uint64_t n, h5l_drop_fn fn, void *ctx);

#endif
