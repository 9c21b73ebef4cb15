/* wlock.h — one writer at a time per log-layout file (docs/operations.md,
 * "One writer at a time"): a lock file FILE.h5lock made with O_EXCL next to
 * the file, holding who took it (host, pid, process start time, when).
 * Taken by rank 0 of h5l_create and h5l_open, removed by h5l_close. */
#ifndef H5L_WLOCK_H
#define H5L_WLOCK_H
#include "h5log_common.h"
#include "h5log_reader.h"

#define H5L_LOCK_SUFFIX ".h5lock"
#define H5L_LOCK_BREAK_ENV "H5L_LOCK_BREAK"

/* Take the lock of `path`. A lock left by a process of this host that is
 * gone (no such pid, or a pid reused by a process started later) is
 * stale and taken over; with H5L_LOCK_BREAK=1 in the environment any lock
 * is. 0 and *lockpath (the caller's, for h5l_wlock_drop); H5L_EBUSY with
 * a message naming the file and the holder; H5L_EIO, H5L_ENOMEM. */
int h5l_wlock_take(const char *path, char **lockpath, h5l_err_t *err);

/* Remove a lock taken by h5l_wlock_take and free lockpath. NULL is fine. */
void h5l_wlock_drop(char *lockpath);

/* For tools (h5logrecover): 1 if path's lock is held by a live writer
 * (or one this host cannot check: another host's), with the holder in
 * err; 0 if there is none or it is stale. */
int h5l_wlock_held(const char *path, h5l_err_t *err);
#endif
