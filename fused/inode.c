/* inode.c — the daemon's inode table (see inode.h for the kinds of inode
 * and why there are three).
 *
 * Hashing: mirrors and bad inodes by (kind, st_dev, st_ino) — a bad file's
 * older versions share a chain and are told apart by size and mtime —,
 * snapshots by their hfs_snap_t pointer (the same snapshot is the same
 * inode), tick snapshots by (st_dev, st_ino, tick). The table doubles when full; failing to grow only makes chains
 * longer. Everything here runs under t->mu except freeing an inode, which
 * may close a descriptor or drop the last reference of a snapshot. */
#include "inode.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

/* snap: the snapshot (HFS_K_SNAP); tick: the tick (HFS_K_TSNAP) */
static size_t hkey(int kind, dev_t dev, ino_t ino, const void *snap, uint64_t tick)
{
    uint64_t k = kind == HFS_K_SNAP ? (uint64_t)(uintptr_t)snap
                                    : ((uint64_t)dev * 0x9E3779B97F4A7C15ull) ^ (uint64_t)ino ^ (uint64_t)kind ^
                                          (tick * 0xC2B2AE3D27D4EB4Full);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

static size_t hkey_of(const hfs_inode_t *n) { return hkey(n->kind, n->dev, n->sino, n->snap, n->tick); }

static void hash_insert(hfs_itab_t *t, hfs_inode_t *n)
{
    if (t->hcount + 1 > t->hslots) {
        size_t ns = t->hslots ? t->hslots * 2 : 1024;
        hfs_inode_t **h = calloc(ns, sizeof *h);
        if (h) {
            for (size_t i = 0; i < t->hslots; i++) {
                for (hfs_inode_t *x = t->htab[i], *nx; x; x = nx) {
                    nx = x->hnext;
                    x->hnext = h[hkey_of(x) & (ns - 1)];
                    h[hkey_of(x) & (ns - 1)] = x;
                }
            }
            free(t->htab);
            t->htab = h;
            t->hslots = ns;
        }
    }
    if (!t->hslots) return;
    size_t b = hkey_of(n) & (t->hslots - 1);
    n->hnext = t->htab[b];
    t->htab[b] = n;
    n->hashed = 1;
    t->hcount++;
}

static void hash_remove(hfs_itab_t *t, hfs_inode_t *n)
{
    if (!n->hashed) return;
    hfs_inode_t **pp = &t->htab[hkey_of(n) & (t->hslots - 1)];
    while (*pp && *pp != n) pp = &(*pp)->hnext;
    if (*pp) *pp = n->hnext;
    n->hashed = 0;
    t->hcount--;
}

static hfs_inode_t *hash_find(hfs_itab_t *t, int kind, dev_t dev, ino_t ino, const void *snap, uint64_t tick)
{
    if (!t->hslots) return NULL;
    for (hfs_inode_t *n = t->htab[hkey(kind, dev, ino, snap, tick) & (t->hslots - 1)]; n; n = n->hnext) {
        if (n->kind != kind) continue;
        if (kind == HFS_K_SNAP ? n->snap == snap : (n->dev == dev && n->sino == ino && n->tick == tick)) return n;
    }
    return NULL;
}

/* A bad inode of this very file version (same dev, ino, size and mtime). */
static hfs_inode_t *find_bad(hfs_itab_t *t, const struct stat *st)
{
    if (!t->hslots) return NULL;
    for (hfs_inode_t *n = t->htab[hkey(HFS_K_BAD, st->st_dev, st->st_ino, NULL, 0) & (t->hslots - 1)]; n;
         n = n->hnext) {
        if (n->kind == HFS_K_BAD && n->dev == st->st_dev && n->sino == st->st_ino && n->src_st.st_size == st->st_size &&
            n->src_st.st_mtim.tv_sec == st->st_mtim.tv_sec && n->src_st.st_mtim.tv_nsec == st->st_mtim.tv_nsec)
            return n;
    }
    return NULL;
}

/* Copy what a snapshot inode shows of snap (attributes, xattrs). */
static void snap_fields(hfs_inode_t *n, const hfs_snap_t *snap)
{
    n->tick = snap->tick;
    n->eof = snap->skel->eof;
    n->time_ns = snap->time_ns;
    n->closed = snap->closed;
}

static void inode_free(hfs_inode_t *n)
{
    if (n->fd >= 0) close(n->fd);
    hfs_snap_unref(n->snap);
    free(n->text);
    free(n->path);
    free(n);
}

/* A new inode in the table (one lookup), or NULL if out of memory. */
static hfs_inode_t *inode_new(hfs_itab_t *t, int kind, const char *path, const struct stat *st)
{
    hfs_inode_t *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->fd = -1;
    n->nlookup = 1;
    n->path = strdup(path);
    if (!n->path) {
        free(n);
        return NULL;
    }
    n->src_st = *st;
    n->dev = st->st_dev;
    n->sino = st->st_ino;
    n->mode = st->st_mode;
    n->next = t->head;
    if (t->head) t->head->prev = n;
    t->head = n;
    return n;
}

int hfs_itab_init(hfs_itab_t *t, const char *source, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    hfs_inode_t *r = &t->root;
    r->kind = HFS_K_MIRROR;
    r->nlookup = 1;
    r->path = realpath(source, NULL);
    r->fd = r->path ? open(r->path, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    struct stat st;
    if (r->fd < 0 || fstat(r->fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", source, strerror(errno));
        if (r->fd >= 0) close(r->fd);
        r->fd = -1;
        free(r->path);
        r->path = NULL;
        return -1;
    }
    r->mode = st.st_mode;
    r->dev = st.st_dev;
    r->sino = st.st_ino;
    r->src_st = st;
    /* the ticks tree's root: the source root again, as a tdir */
    hfs_inode_t *k = &t->ticks;
    *k = *r;
    k->kind = HFS_K_TDIR;
    k->path = strdup(r->path);
    k->fd = k->path ? open(k->path, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (k->fd < 0) {
        snprintf(err, errlen, "%s: %s", source, k->path ? strerror(errno) : "out of memory");
        free(k->path);
        k->path = NULL;
        close(r->fd);
        r->fd = -1;
        free(r->path);
        r->path = NULL;
        return -1;
    }
    return 0;
}

void hfs_itab_fini(hfs_itab_t *t)
{
    pthread_mutex_lock(&t->mu);
    while (t->head) {
        hfs_inode_t *n = t->head;
        t->head = n->next;
        inode_free(n);
    }
    free(t->htab);
    t->htab = NULL;
    t->hslots = t->hcount = 0;
    pthread_mutex_unlock(&t->mu);
    if (t->root.fd >= 0) close(t->root.fd);
    t->root.fd = -1;
    free(t->root.path);
    t->root.path = NULL;
    if (t->ticks.fd >= 0) close(t->ticks.fd);
    t->ticks.fd = -1;
    free(t->ticks.path);
    t->ticks.path = NULL;
}

hfs_inode_t *hfs_itab_of(hfs_itab_t *t, uint64_t ino)
{
    return ino == FUSE_ROOT_ID ? &t->root : (hfs_inode_t *)(uintptr_t)ino;
}

uint64_t hfs_itab_id(const hfs_itab_t *t, const hfs_inode_t *n)
{
    return n == &t->root ? FUSE_ROOT_ID : (uint64_t)(uintptr_t)n;
}

hfs_inode_t *hfs_itab_mirror(hfs_itab_t *t, int kind, const char *path, int fd, const struct stat *st)
{
    pthread_mutex_lock(&t->mu);
    hfs_inode_t *n = hash_find(t, kind, st->st_dev, st->st_ino, NULL, 0);
    if (n) {
        n->nlookup++;
    } else if ((n = inode_new(t, kind, path, st))) {
        n->fd = fd;
        fd = -1;
        hash_insert(t, n);
    }
    pthread_mutex_unlock(&t->mu);
    if (fd >= 0) close(fd);
    return n;
}

hfs_inode_t *hfs_itab_stats(hfs_itab_t *t, char *text)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFREG | 0444;
    clock_gettime(CLOCK_REALTIME, &st.st_mtim); /* when the text was made */
    st.st_ctim = st.st_atim = st.st_mtim;
    pthread_mutex_lock(&t->mu);
    hfs_inode_t *n = inode_new(t, HFS_K_STATS, t->root.path, &st); /* not hashed: one per lookup */
    if (n) n->text = text;
    pthread_mutex_unlock(&t->mu);
    if (!n) free(text);
    return n;
}

hfs_inode_t *hfs_itab_bad_find(hfs_itab_t *t, const struct stat *st)
{
    pthread_mutex_lock(&t->mu);
    hfs_inode_t *n = find_bad(t, st);
    if (n) n->nlookup++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

hfs_inode_t *hfs_itab_log(hfs_itab_t *t, const char *path, hfs_snap_t *snap, const struct stat *st)
{
    pthread_mutex_lock(&t->mu);
    /* the inode of this snapshot if the kernel still has it; the bad inode
     * of this version if a concurrent lookup made it first */
    hfs_inode_t *n = snap ? hash_find(t, HFS_K_SNAP, 0, 0, snap, 0) : find_bad(t, st);
    if (n) {
        n->nlookup++;
    } else if ((n = inode_new(t, snap ? HFS_K_SNAP : HFS_K_BAD, path, st))) {
        if (snap) snap_fields(n, snap);
        n->snap = snap;
        snap = NULL;
        hash_insert(t, n);
    }
    pthread_mutex_unlock(&t->mu);
    hfs_snap_unref(snap);
    return n;
}

int hfs_itab_entry(const hfs_inode_t *p, const char *name, int *fd, struct stat *st, char **path)
{
    *fd = openat(p->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0) return errno;
    int er = 0;
    *path = NULL;
    if (fstatat(*fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
        er = errno;
    else if (asprintf(path, "%s/%s", p->path, name) < 0)
        er = ENOMEM, *path = NULL;
    if (er) {
        close(*fd);
        *fd = -1;
    }
    return er;
}

hfs_inode_t *hfs_itab_tsnap_find(hfs_itab_t *t, const struct stat *st, uint64_t tick)
{
    pthread_mutex_lock(&t->mu);
    hfs_inode_t *n = hash_find(t, HFS_K_TSNAP, st->st_dev, st->st_ino, NULL, tick);
    if (n) n->nlookup++;
    pthread_mutex_unlock(&t->mu);
    return n;
}

hfs_inode_t *hfs_itab_tsnap(hfs_itab_t *t, const char *path, hfs_snap_t *snap, const struct stat *st)
{
    pthread_mutex_lock(&t->mu);
    hfs_inode_t *n = hash_find(t, HFS_K_TSNAP, st->st_dev, st->st_ino, NULL, snap->tick);
    if (n) {
        n->nlookup++;
    } else if ((n = inode_new(t, HFS_K_TSNAP, path, st))) {
        snap_fields(n, snap);
        hash_insert(t, n);
    }
    pthread_mutex_unlock(&t->mu);
    hfs_snap_unref(snap);
    return n;
}

void hfs_itab_forget(hfs_itab_t *t, hfs_inode_t *n, uint64_t k)
{
    if (n == &t->root || n == &t->ticks) return;
    pthread_mutex_lock(&t->mu);
    /* the kernel forgets no more than it looked up: a larger count is our
     * bug (a lookup reply we did not count), caught in make asan */
    assert(k <= n->nlookup);
    n->nlookup -= k < n->nlookup ? k : n->nlookup;
    int dead = n->nlookup == 0;
    if (dead) {
        hash_remove(t, n);
        if (n->prev)
            n->prev->next = n->next;
        else
            t->head = n->next;
        if (n->next) n->next->prev = n->prev;
    }
    pthread_mutex_unlock(&t->mu);
    if (dead) inode_free(n);
}
