/* badlog.h — the bad file versions already reported, so that each one is
 * logged once for the daemon's life.
 *
 * A log-layout file that cannot be served is met again and again: each
 * lookup of its name (ls -l, a monitor polling it), each read, the ticker.
 * Its reason must reach the log once, not once per request, yet a changed
 * file is a new case worth a line. A version is (st_dev, st_ino, st_size,
 * st_mtim) of the source file. The set is never trimmed (a ring forgets,
 * and a forgotten version is logged again): 40 bytes per bad version. */
#ifndef HFS_BADLOG_H
#define HFS_BADLOG_H
#include <sys/stat.h>

/* 1 the first time the version of st is passed (it is remembered), 0 after.
 * Thread-safe. Out of memory: 1 without remembering (a line twice rather
 * than none). */
int hfs_badlog_first(const struct stat *st);

/* Forget every version (at shutdown). */
void hfs_badlog_clear(void);

#endif
