/* ticks.c — names in the ticks tree (see ticks.h).
 *
 * A tick's name is strict ("7.h5", never "07.h5" or "7.H5"), so each tick
 * has one name and one inode while the kernel holds it. Looking up N.h5
 * checks that the source file is still the one the tlog inode was made
 * for (same st_dev and st_ino): a replaced file's ticks are not the old
 * file's. */
#include "ticks.h"

#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5log_reader.h"
#include "lfile.h"

int hfs_ticks_name(uint64_t t, char *buf, size_t cap) { return snprintf(buf, cap, "%llu.h5", (unsigned long long)t); }

uint64_t hfs_ticks_parse(const char *name)
{
    uint64_t t = 0;
    const char *p = name;
    if (*p < '1' || *p > '9') return 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (t > (UINT64_MAX - 9) / 10) return 0;
        t = t * 10 + (uint64_t)(*p - '0');
    }
    return strcmp(p, ".h5") == 0 ? t : 0;
}

static int is_logfile(const char *dir, const char *name)
{
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0) return 0;
    int is = h5l_probe(path, NULL) == H5L_OK;
    free(path);
    return is;
}

int hfs_ticks_listed(const hfs_inode_t *p, const char *name, unsigned char d_type)
{
    if (d_type == DT_DIR) return 1;
    if (d_type != DT_REG && d_type != DT_UNKNOWN) return 0;
    if (d_type == DT_UNKNOWN) {
        struct stat st;
        if (fstatat(p->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
        if (S_ISDIR(st.st_mode)) return 1;
        if (!S_ISREG(st.st_mode)) return 0;
    }
    return is_logfile(p->path, name);
}

/* A directory or log-layout file of the source, in the tdir p. */
static int lookup_in_dir(hfs_itab_t *t, hfs_inode_t *p, const char *name, hfs_inode_t **out)
{
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return ENOENT; /* the kernel resolves these */
    int fd;
    struct stat st;
    char *path;
    int er = hfs_itab_entry(p, name, &fd, &st, &path);
    if (er) return er;
    if (!S_ISDIR(st.st_mode) && !(S_ISREG(st.st_mode) && h5l_probe(path, NULL) == H5L_OK)) {
        close(fd);
        free(path);
        return ENOENT;
    }
    *out = hfs_itab_mirror(t, S_ISDIR(st.st_mode) ? HFS_K_TDIR : HFS_K_TLOG, path, fd, &st); /* takes fd */
    free(path);
    return *out ? 0 : ENOMEM;
}

/* The last old-tick snapshots taken, most recent first. Where the kernel
 * skips opens (fs.c) every read of a tick file takes its snapshot here, so
 * a few readers of different ticks at once must not evict each other (a
 * miss builds the tick's skeleton anew). */
#define SLOTS 8
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    hfs_snap_t *snap;
    dev_t dev;
    ino_t ino;
} slots[SLOTS];

/* The slots' snapshot of tick `tick` of source file (dev, ino), one
 * reference more and moved to the front, or NULL. */
static hfs_snap_t *slot_find(dev_t dev, ino_t ino, uint64_t tick)
{
    hfs_snap_t *snap = NULL;
    pthread_mutex_lock(&slot_mu);
    for (int i = 0; i < SLOTS && slots[i].snap; i++) {
        if (slots[i].dev == dev && slots[i].ino == ino && slots[i].snap->tick == tick) {
            snap = slots[i].snap;
            atomic_fetch_add(&snap->refs, 1);
            if (i) { /* to the front */
                __typeof__(slots[0]) hit = slots[i];
                memmove(&slots[1], &slots[0], (size_t)i * sizeof slots[0]);
                slots[0] = hit;
            }
            break;
        }
    }
    pthread_mutex_unlock(&slot_mu);
    return snap;
}

/* A snapshot of tick `tick` of the source file path (identified by dev,
 * ino; its stat st for the log): a slot's if it is that one, else a new
 * one, which takes the first slot (the oldest is dropped). An errno. */
static int tick_snapshot(const char *path, const struct stat *st, uint64_t tick, hfs_snap_t **out)
{
    if ((*out = slot_find(st->st_dev, st->st_ino, tick))) return 0;
    hfs_lfile_t *lf = NULL;
    h5l_err_t e = {0};
    int rc = hfs_lfile_get(path, st->st_dev, st->st_ino, &lf, &e);
    if (!rc) rc = hfs_lfile_snapshot_at(lf, tick, out, &e);
    if (rc && rc != H5L_ENOTFOUND) hfs_lfile_report(lf, st, e.msg); /* once per file version */
    hfs_lfile_unref(lf);
    if (rc) return rc == H5L_ENOTFOUND ? ENOENT : rc == H5L_ENOMEM ? ENOMEM : EIO;
    atomic_fetch_add(&(*out)->refs, 1);
    pthread_mutex_lock(&slot_mu);
    hfs_snap_t *old = slots[SLOTS - 1].snap;
    memmove(&slots[1], &slots[0], (SLOTS - 1) * sizeof slots[0]);
    slots[0].snap = *out;
    slots[0].dev = st->st_dev;
    slots[0].ino = st->st_ino;
    pthread_mutex_unlock(&slot_mu);
    hfs_snap_unref(old);
    return 0;
}

void hfs_ticks_shutdown(void)
{
    pthread_mutex_lock(&slot_mu);
    hfs_snap_t *old[SLOTS];
    for (int i = 0; i < SLOTS; i++) {
        old[i] = slots[i].snap;
        slots[i].snap = NULL;
    }
    pthread_mutex_unlock(&slot_mu);
    for (int i = 0; i < SLOTS; i++) hfs_snap_unref(old[i]);
}

/* Tick N.h5 of the log file p (a tlog). */
static int lookup_tick(hfs_itab_t *t, hfs_inode_t *p, const char *name, hfs_inode_t **out)
{
    uint64_t tick = hfs_ticks_parse(name);
    if (!tick) return ENOENT;
    struct stat st;
    if (stat(p->path, &st) != 0 || st.st_dev != p->dev || st.st_ino != p->sino) return ENOENT;
    if ((*out = hfs_itab_tsnap_find(t, &st, tick))) return 0;
    hfs_snap_t *snap;
    int er = tick_snapshot(p->path, &st, tick, &snap);
    if (er) return er;
    *out = hfs_itab_tsnap(t, p->path, snap, &st); /* drops snap */
    return *out ? 0 : ENOMEM;
}

int hfs_ticks_open(const hfs_inode_t *n, hfs_snap_t **out)
{
    struct stat st;
    int er = 0;
    /* still in a slot: served even if the source was replaced since (a
     * descriptor keeps reading what it opened while the daemon can) */
    if (!(*out = slot_find(n->dev, n->sino, n->tick))) {
        if (stat(n->path, &st) != 0 || st.st_dev != n->dev || st.st_ino != n->sino) return ENOENT; /* replaced */
        er = tick_snapshot(n->path, &st, n->tick, out);
    }
    if (!er && (*out)->skel->eof != n->eof) { /* not what the inode showed: never serve other bytes */
        hfs_snap_unref(*out);
        *out = NULL;
        er = ESTALE;
    }
    return er;
}

int hfs_ticks_lookup(hfs_itab_t *t, hfs_inode_t *p, const char *name, hfs_inode_t **out)
{
    *out = NULL;
    if (p->kind == HFS_K_TDIR) return lookup_in_dir(t, p, name, out);
    if (p->kind == HFS_K_TLOG) return lookup_tick(t, p, name, out);
    return ENOTDIR;
}
