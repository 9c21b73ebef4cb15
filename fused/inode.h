/* inode.h — the daemon's inode table: what each node id the kernel holds
 * stands for, and how many lookups it owes us.
 *
 * Kinds of inode (node ids are pointers to these, as in libfuse's
 * passthrough_ll; the root is FUSE_ROOT_ID):
 *   - mirror (directories, plain files, symlinks): an O_PATH descriptor of
 *     the source object, one inode per source (st_dev, st_ino), so a hard
 *     link or a second path is the same inode;
 *   - snapshot: one per (log-layout file, tick), holding an immutable
 *     hfs_snap_t: a lookup of a log file's name gives its newest tick's
 *     snapshot inode; descriptors open on an older one keep reading it;
 *     FORGET frees it (its bytes stay valid until then);
 *   - bad: a log-layout file of which nothing can be read, one inode per
 *     version of it (st_dev, st_ino, size, mtime), so an unchanged bad
 *     file is one inode and one log line;
 *   - the statistics file (at the root, not listed): a new inode per
 *     lookup holding the text made then, so an open reads one immutable
 *     text through the page cache whether or not the kernel sends the
 *     open to us (fs.c: opens);
 *   - the ticks tree (ticks.h), under the hidden root directory
 *     .h5logfs-ticks (static, not listed): its directories (tdir: an
 *     O_PATH descriptor, one per source directory, apart from its mirror
 *     inode), each log-layout file as a directory of its ticks (tlog, one
 *     per source file), and each of its committed ticks as an immutable
 *     file (tsnap, one per (file, tick), so every lookup of N.h5 while
 *     the kernel holds it is the same inode); a tsnap keeps only the
 *     snapshot's size and times, so an inode the kernel caches costs no
 *     skeleton: each open takes a snapshot (ticks.c).
 * Lookups and FORGETs are counted exactly (nlookup); an inode leaves the
 * table when the kernel has forgotten every lookup of it. One mutex guards
 * the table; a hash index makes a lookup O(1) whatever the table's size.
 * Owns: every inode and what it holds (descriptor, snapshot reference). */
#ifndef HFS_INODE_H
#define HFS_INODE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include "lfile.h"

enum {
    HFS_K_MIRROR = 1,
    HFS_K_SNAP = 2,
    HFS_K_BAD = 3,
    HFS_K_STATS = 4,
    HFS_K_TDIR = 5,
    HFS_K_TLOG = 6,
    HFS_K_TSNAP = 7
};

/* Kinds whose bytes are a snapshot's canonical file. */
static inline int hfs_kind_is_snap(int kind) { return kind == HFS_K_SNAP || kind == HFS_K_TSNAP; }

typedef struct hfs_inode {
    int kind;
    int fd; /* mirror: O_PATH descriptor */
    dev_t dev;
    ino_t sino;
    mode_t mode;                   /* source file type and permissions at lookup */
    char *path;                    /* absolute source path */
    uint64_t nlookup;              /* guarded by the table's mutex */
    hfs_snap_t *snap;              /* snapshot: its reference (a tsnap holds none: ticks.h) */
    uint64_t tick, eof, time_ns;   /* snapshot, tsnap: its tick, size, commit time */
    int closed;                    /* snapshot, tsnap: the file's last tick, closed */
    struct stat src_st;            /* snapshot, bad: the source's attributes at lookup */
    char *text;                    /* statistics: the text made at lookup */
    struct hfs_inode *next, *prev; /* every inode (freed at the end) */
    struct hfs_inode *hnext;       /* hash chain */
    int hashed;
} hfs_inode_t;

typedef struct hfs_itab {
    pthread_mutex_t mu;
    hfs_inode_t root;
    hfs_inode_t ticks;  /* the root of the ticks tree (a tdir of the source root) */
    hfs_inode_t *head;  /* every inode but the static ones */
    hfs_inode_t **htab; /* mirrors by (dev, ino), snapshots by snap, bad by (dev, ino) */
    size_t hslots, hcount;
} hfs_itab_t;

/* Open the source root (path) as the root inode. 0, or -1 and the reason in
 * err. */
int hfs_itab_init(hfs_itab_t *t, const char *source, char *err, size_t errlen);
/* Free every inode (at unmount). */
void hfs_itab_fini(hfs_itab_t *t);

/* The inode of a node id the kernel gave us. */
hfs_inode_t *hfs_itab_of(hfs_itab_t *t, uint64_t ino);
/* The node id of an inode. */
uint64_t hfs_itab_id(const hfs_itab_t *t, const hfs_inode_t *n);

/* The inode of kind HFS_K_MIRROR, HFS_K_TDIR or HFS_K_TLOG of the source
 * at path (fd: its O_PATH descriptor, st: its stat), one more lookup. Takes
 * fd (closes it if the inode exists). NULL (fd closed) if out of memory. */
hfs_inode_t *hfs_itab_mirror(hfs_itab_t *t, int kind, const char *path, int fd, const struct stat *st);
/* The tsnap inode of tick `tick` of the file st, one more lookup, if the
 * kernel still holds it; NULL otherwise. */
hfs_inode_t *hfs_itab_tsnap_find(hfs_itab_t *t, const struct stat *st, uint64_t tick);
/* The tsnap inode of snap's tick, one more lookup: made from snap's
 * attributes (the reference is dropped: the inode keeps none). NULL if out
 * of memory. */
hfs_inode_t *hfs_itab_tsnap(hfs_itab_t *t, const char *path, hfs_snap_t *snap, const struct stat *st);
/* A new statistics inode holding text (taken: freed with the inode), one
 * lookup; NULL if out of memory (text is then freed). */
hfs_inode_t *hfs_itab_stats(hfs_itab_t *t, char *text);
/* The bad inode of this version of a file, one more lookup; NULL if none. */
hfs_inode_t *hfs_itab_bad_find(hfs_itab_t *t, const struct stat *st);
/* The inode of snap (taking the reference) or, with snap NULL, the bad
 * inode of this version; made if needed, one more lookup. NULL if out of
 * memory (the reference is then dropped). */
hfs_inode_t *hfs_itab_log(hfs_itab_t *t, const char *path, hfs_snap_t *snap, const struct stat *st);
/* Open `name` in the source directory of p (O_PATH, a symlink not
 * followed), stat it and make its source path: 0 with *fd, *st and *path
 * (the caller's), or an errno with nothing to free. */
int hfs_itab_entry(const hfs_inode_t *p, const char *name, int *fd, struct stat *st, char **path);
/* The kernel forgot k lookups of n; frees it at zero. */
void hfs_itab_forget(hfs_itab_t *t, hfs_inode_t *n, uint64_t k);

#endif
