/* watch.h — inotify watches on the journals of live source files.
 *
 * Owns: the daemon's one inotify descriptor and the set of watch
 * descriptors that had events since they were last drained.
 * Why: the ticker polls each live file's journal once per tick, so a tick
 * committed just after a poll waited up to a whole tick before anyone saw
 * it (half a tick on average). A writer commits a tick by appending to the
 * journal (the sidecar), so a watch on the sidecar wakes the ticker at the
 * commit itself. Where inotify sees nothing (a network file system written
 * from another node) or cannot be had (the watch limit), nothing is lost:
 * the poll still runs every tick. Thread use: add and remove from any
 * thread; drain from the ticker only. */
#ifndef HFS_WATCH_H
#define HFS_WATCH_H
#include <stddef.h>

/* Open the inotify descriptor. 0, or -1 (then every call below is a no-op
 * and hfs_watch_fd is -1: polling only). */
int hfs_watch_init(void);
void hfs_watch_shutdown(void);

/* The descriptor to poll for events, or -1. */
int hfs_watch_fd(void);

/* Watch path for writes (and for its removal). A watch descriptor (>= 0),
 * or -1 when none could be had (counted in hfs_watch_failed). */
int hfs_watch_add(const char *path);
/* Stop watching wd (-1: nothing). A watch the kernel already dropped (its
 * file was removed) is fine. */
void hfs_watch_rm(int wd);

/* Read the pending events without blocking; writes the distinct watch
 * descriptors they were for into wds (at most cap). The count. *lost is
 * set to 1 when some events named no descriptor here (more than cap, or
 * the kernel's queue overflowed): the caller must then treat every watch
 * as written. */
size_t hfs_watch_drain(int *wds, size_t cap, int *lost);

/* Watches held now, and hfs_watch_add calls that failed, since init. */
size_t hfs_watch_count(void);
size_t hfs_watch_failed(void);

#endif
