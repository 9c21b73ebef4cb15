/* tbuf.h — per-thread buffers for the daemon's read path.
 *
 * Owns: for each thread, one buffer per slot, grown on demand and freed when
 * the thread ends (a pthread key destructor: libfuse ends idle worker
 * threads). Why not malloc per request: on a VM that hands freed memory back
 * to its host, touching fresh pages costs ~0.5-1 GB/s against ~15 GB/s for
 * reused ones (measured), and a 1 MiB reply per request adds up. */
#ifndef HFS_TBUF_H
#define HFS_TBUF_H
#include <stddef.h>

enum { HFS_TBUF_REPLY, HFS_TBUF_SCRATCH, HFS_TBUF_NSLOTS };

/* This thread's buffer of the slot, at least n bytes; valid until the next
 * call for the same slot on this thread. NULL if out of memory. */
void *hfs_tbuf(int slot, size_t n);

#endif
