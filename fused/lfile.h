/* lfile.h — log-layout files as the daemon holds them, and their snapshots.
 *
 * An hfs_lfile_t is one source file: its libcore reader (loaded
 * incrementally by the ticker), the newest skeleton, and where its name was
 * last looked up (for entry invalidation). An hfs_snap_t is one immutable
 * (file, tick) view: the tick, a skeleton reference and the bytes of the
 * canonical file it defines. Snapshots hold a reference to their file; the
 * registry holds one more while the file is in use and drops idle files.
 *
 * Who frees what: hfs_lfile_get and hfs_lfile_snapshot return references
 * the caller gives back with hfs_lfile_unref / hfs_snap_unref. */
#ifndef HFS_LFILE_H
#define HFS_LFILE_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "h5log_reader.h"
#include "skel.h"

typedef struct hfs_lfile hfs_lfile_t;

typedef struct hfs_snap {
    atomic_int refs;
    hfs_lfile_t *lf;
    uint64_t tick, time_ns;
    int closed; /* the writer had closed the file: this is its last tick */
    hfs_skel_t *skel;
} hfs_snap_t;

/* The source path of a snapshot's file. */
const char *hfs_snap_source(const hfs_snap_t *s);

/* If the snapshot's file has a damaged tick: "tick N: reason" into buf
 * (snprintf's return); -1 if the file is intact. */
int hfs_snap_damage(const hfs_snap_t *s, char *buf, size_t cap);

/* Create the shared chunk cache (limit in bytes). Call once before use. */
int hfs_lfile_init(size_t cache_limit);

/* The file at path (identified by dev/ino), opened and loaded on first use.
 * Fails with the reader's error (message names the file). */
int hfs_lfile_get(const char *path, dev_t dev, ino_t ino, hfs_lfile_t **out, h5l_err_t *err);
void hfs_lfile_unref(hfs_lfile_t *lf);

/* Log msg, a problem met with the source file whose attributes are st (lf:
 * its loaded file, or NULL if it could not be opened), unless it was logged
 * before: each version of a file (badlog.h) once, whichever path meets it
 * first (lookup, read, the ticker), and a file whose journal went bad once
 * while it stays loaded, however its source changes meanwhile. */
void hfs_lfile_report(hfs_lfile_t *lf, const struct stat *st, const char *msg);

/* A lookup of a log file in directory `parent` starts (delta 1) or ends
 * (-1): meanwhile the ticker sends no entry invalidation into that
 * directory (the kernel would hold every other lookup there behind it). */
void hfs_lfile_lookup(uint64_t parent, int delta);

/* Remember (parent inode, name) as where the kernel knows this file. */
void hfs_lfile_set_entry(hfs_lfile_t *lf, uint64_t parent, const char *name);

/* A snapshot of the newest loaded tick (skeleton rebuilt only when the
 * schema or extents changed). Fails if the file went bad. */
int hfs_lfile_snapshot(hfs_lfile_t *lf, hfs_snap_t **out, h5l_err_t *err);
void hfs_snap_unref(hfs_snap_t *s);

/* The number of committed ticks loaded (0 if the file went bad). */
uint64_t hfs_lfile_ntick(hfs_lfile_t *lf);

/* A snapshot of committed tick `tick` (1 .. hfs_lfile_ntick) whose bytes
 * are the same every time: the newest snapshot if it is that tick, else a
 * new one — on the newest skeleton when the file's structure has not
 * changed since that tick — as long as that skeleton is a full build (not
 * a live one: skel.h), else on a skeleton built for it (not kept beyond
 * its snapshots). H5L_ENOTFOUND
 * for a tick not committed. */
int hfs_lfile_snapshot_at(hfs_lfile_t *lf, uint64_t tick, hfs_snap_t **out, h5l_err_t *err);

/* Read [off, off+len) of the snapshot's canonical file into buf. Returns
 * the number of bytes (short only at EOF) or a negative H5L_E* code. Calls
 * no libhdf5. */
long hfs_snap_read(hfs_snap_t *s, uint64_t off, size_t len, void *buf, h5l_err_t *err);

/* Ticker: refresh every live file; for each that gained ticks call
 * fn(ctx, parent, name) (after all locks are released). Also drops files
 * unused for idle_s seconds. Logs a journal that went bad (as
 * hfs_lfile_report does: once). */
typedef void (*hfs_newtick_fn)(void *ctx, uint64_t parent, const char *name);
void hfs_lfile_tick_all(hfs_newtick_fn fn, void *ctx, double idle_s);
/* The same for the files marked changed only (their inotify watch saw a
 * write, or their poll was skipped during a build), and the names of
 * builds that landed since: what the ticker does when woken between
 * ticks. */
void hfs_lfile_tick_changed(hfs_newtick_fn fn, void *ctx, double idle_s);
/* Read the inotify events (watch.h) and mark the files they were for. */
void hfs_lfile_watch_events(void);
/* kick() is called (from the builder thread) when a build lands whose
 * news the ticker should send now, rather than at its next tick. */
void hfs_lfile_set_kick(void (*kick)(void));

/* A readable statistics report (cache and per file); caller frees. */
char *hfs_lfile_stats_text(void);

/* Free every file (at unmount). */
void hfs_lfile_shutdown(void);

/* One log line naming the file: to stderr, or to syslog (daemon facility)
 * after hfs_log_to_syslog (the daemon in the background). */
void hfs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void hfs_log_to_syslog(void);

#endif
