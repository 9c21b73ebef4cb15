/* fs.c — the FUSE low-level operations: a read-only mirror of the source
 * directory in which log-layout files appear as canonical HDF5 files.
 *
 * An adapter, in the manner of libfuse's passthrough_ll: what a node id
 * stands for is the inode table's (inode.c: mirror, snapshot and bad
 * inodes, lookups counted); what a log-layout file holds is lfile.c's. A
 * lookup of a log file's name returns the snapshot inode of its newest
 * tick; when the ticker loads a new tick it invalidates the name (from its
 * own thread, never inside a request), the next lookup gets a new inode,
 * and descriptors open on the old one keep reading the old tick byte for
 * byte from the kernel page cache (keep_cache) or from us. The daemon's
 * state (configuration, inode table, open handles) is one hfs_fs_t passed
 * to libfuse as the session's userdata. Every mutating operation answers
 * EROFS. Errors from libcore become errno in one place (errno_of). The
 * hidden directory .h5logfs-ticks holds every committed tick of every log
 * file (ticks.h): names there are resolved by ticks.c, the requests are
 * answered here like the mirror's and the snapshots'. */
#include "fs.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "h5log/format.h"
#include "lfile.h"
#include "inode.h"
#include "tbuf.h"
#include "ticks.h"

#define STATS_NAME ".h5logfs-stats" /* at the root, not listed */

/* node ids are our inode pointers (as in libfuse's passthrough_ll) */
_Static_assert(sizeof(fuse_ino_t) >= sizeof(uintptr_t), "fuse_ino_t must hold a pointer");

typedef struct hfs_fh hfs_fh_t;

struct hfs_fs {
    hfs_config_t cfg;
    hfs_itab_t itab;
    pthread_mutex_t fh_mu;
    hfs_fh_t *fh_head;   /* every open handle (freed at the end) */
    int no_open;         /* opens of files are answered ENOSYS: the kernel then skips them (below) */
    atomic_ullong opens; /* OPEN requests of files received (the statistics file tells) */
};

static hfs_fs_t *fs_of(fuse_req_t req) { return fuse_req_userdata(req); }
static hfs_inode_t *ino_of(fuse_req_t req, fuse_ino_t ino) { return hfs_itab_of(&fs_of(req)->itab, ino); }

/* How long the kernel may keep an entry or attributes: one tick (at most a
 * second), so permissions follow the source within one tick. */
static double valid_for(const hfs_fs_t *fs) { return fs->cfg.tick < 1.0 ? fs->cfg.tick : 1.0; }

static int errno_of(int code)
{
    switch (code) {
    case H5L_ENOMEM:
        return ENOMEM;
    case H5L_ENOTFOUND:
        return ENOENT;
    default:
        return EIO;
    }
}

/* A journal sidecar is hidden: its name is BASE.h5lj and either BASE exists
 * or the file starts with the journal magic (the writer creates the sidecar
 * just before BASE, so BASE may not exist yet). */
static int is_sidecar_of_existing(int dirfd, const char *name)
{
    size_t n = strlen(name), s = strlen(H5L_SIDECAR_SUFFIX);
    if (n <= s || strcmp(name + n - s, H5L_SIDECAR_SUFFIX) != 0) return 0;
    char base[NAME_MAX + 1];
    if (n - s > NAME_MAX) return 0;
    memcpy(base, name, n - s);
    base[n - s] = 0;
    if (faccessat(dirfd, base, F_OK, AT_SYMLINK_NOFOLLOW) == 0) return 1;
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t m[8];
    int is = pread(fd, m, sizeof m, 0) == (ssize_t)sizeof m && memcmp(m, h5l_jhdr_magic, 8) == 0;
    close(fd);
    return is;
}

/* ".NAME.h5l-creating" next to NAME's sidecar: a log file a writer is
 * creating (libh5log renames it over NAME once its user block is written,
 * docs/format.md 6). Not shown: NAME appears when it is ready. */
#define CREATING_SUFFIX ".h5l-creating"
static int is_file_being_created(int dirfd, const char *name)
{
    size_t n = strlen(name), s = strlen(CREATING_SUFFIX), j = strlen(H5L_SIDECAR_SUFFIX);
    if (name[0] != '.' || n <= s + 1 || strcmp(name + n - s, CREATING_SUFFIX) != 0) return 0;
    char side[NAME_MAX + 1];
    if (n - s - 1 + j > NAME_MAX) return 0;
    memcpy(side, name + 1, n - s - 1);
    memcpy(side + n - s - 1, H5L_SIDECAR_SUFFIX, j + 1);
    return faccessat(dirfd, side, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The source's current permission bits and owner: a snapshot's bytes never
 * change, but who may read them must follow the source (chmod 600 on a
 * running job's file closes it to others within one tick). The kernel
 * caches attributes for attr_timeout (one tick for these inodes). */
static void source_access(const hfs_inode_t *n, mode_t *mode, uid_t *uid, gid_t *gid)
{
    struct stat st;
    *mode = n->mode;
    *uid = n->src_st.st_uid;
    *gid = n->src_st.st_gid;
    if (n->path && stat(n->path, &st) == 0 && st.st_dev == n->dev && st.st_ino == n->sino) {
        *mode = st.st_mode;
        *uid = st.st_uid;
        *gid = st.st_gid;
    }
}

static void snap_attr(const hfs_inode_t *n, struct stat *st)
{
    mode_t mode;
    uid_t uid;
    gid_t gid;
    source_access(n, &mode, &uid, &gid);
    memset(st, 0, sizeof *st);
    st->st_ino = (ino_t)(uintptr_t)n;
    st->st_mode = S_IFREG | (mode & 0444);
    st->st_nlink = 1;
    st->st_uid = uid;
    st->st_gid = gid;
    st->st_size = (off_t)n->eof;
    st->st_blksize = 1 << 20;
    st->st_blocks = (blkcnt_t)((n->eof + 511) / 512);
    uint64_t t = n->time_ns; /* the tick's commit time */
    if (t == 0) {            /* tick 0 (nothing committed yet): the source's times, not 1970 */
        st->st_mtim = n->src_st.st_mtim;
        st->st_ctim = n->src_st.st_ctim;
        st->st_atim = n->src_st.st_atim;
        return;
    }
    st->st_mtim.tv_sec = (time_t)(t / 1000000000u);
    st->st_mtim.tv_nsec = (long)(t % 1000000000u);
    st->st_ctim = st->st_mtim;
    st->st_atim = st->st_mtim;
}

static int get_attr(hfs_inode_t *n, struct stat *st)
{
    if (n->kind == HFS_K_STATS) { /* its text, made at lookup, never changes */
        *st = n->src_st;
        st->st_ino = (ino_t)(uintptr_t)n;
        st->st_nlink = 1;
        st->st_size = (off_t)strlen(n->text);
        return 0;
    }
    if (hfs_kind_is_snap(n->kind)) {
        snap_attr(n, st);
        return 0;
    }
    if (n->kind == HFS_K_TLOG) { /* a log file as the directory of its ticks */
        mode_t mode;
        *st = n->src_st;
        source_access(n, &mode, &st->st_uid, &st->st_gid);
        mode &= 0444;
        st->st_mode = S_IFDIR | mode | (mode >> 2); /* r gives x: listable where readable */
        st->st_nlink = 2;
        st->st_size = 0;
        st->st_blocks = 0;
        st->st_ino = (ino_t)(uintptr_t)n;
        return 0;
    }
    if (n->kind == HFS_K_BAD) {
        *st = n->src_st;
        mode_t mode;
        source_access(n, &mode, &st->st_uid, &st->st_gid);
        st->st_mode = (st->st_mode & S_IFMT) | (mode & 07777);
    } else if (fstatat(n->fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
        return errno;
    }
    st->st_mode &= ~(mode_t)0222; /* read-only view */
    st->st_ino = (ino_t)(uintptr_t)n;
    return 0;
}

/* A snapshot or bad inode for the log file `path` (stat st), one lookup
 * more; NULL if out of memory. */
static hfs_inode_t *log_inode(hfs_fs_t *fs, fuse_ino_t parent, const char *name, const char *path,
                              const struct stat *st)
{
    /* a file already found bad and unchanged since: same inode, no new log */
    hfs_inode_t *n = hfs_itab_bad_find(&fs->itab, st);
    if (n) return n;
    hfs_lfile_t *lf = NULL;
    hfs_snap_t *snap = NULL;
    h5l_err_t e = {0};
    int rc = hfs_lfile_get(path, st->st_dev, st->st_ino, &lf, &e);
    if (!rc) {
        hfs_lfile_set_entry(lf, parent, name);
        rc = hfs_lfile_snapshot(lf, &snap, &e);
    }
    if (rc) hfs_lfile_report(lf, st, e.msg); /* once per file version */
    hfs_lfile_unref(lf);
    return hfs_itab_log(&fs->itab, path, rc ? NULL : snap, st);
}

/* The statistics file's text: lfile.c's, then the daemon's own counters;
 * NULL if out of memory. */
static char *stats_text(hfs_fs_t *fs)
{
    char *lf = hfs_lfile_stats_text(), *text = NULL;
    if (lf && asprintf(&text, "%sopens: %llu requests received, %s\n", lf,
                       (unsigned long long)atomic_load(&fs->opens),
                       fs->no_open ? "the kernel skips them (answered ENOSYS once)" : "each one answered") < 0)
        text = NULL;
    free(lf);
    return text;
}

/* Look name up in parent: fill *e (one lookup of its inode counted) or
 * return an errno. The shape of libfuse's lo_do_lookup: one reply, made by
 * the caller. */
static int do_lookup(hfs_fs_t *fs, fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
    hfs_inode_t *p = hfs_itab_of(&fs->itab, parent);
    memset(e, 0, sizeof *e);
    if (p->kind == HFS_K_TDIR || p->kind == HFS_K_TLOG) {
        hfs_inode_t *n;
        int er = hfs_ticks_lookup(&fs->itab, p, name, &n);
        if (er) return er;
        e->ino = hfs_itab_id(&fs->itab, n);
        e->entry_timeout = valid_for(fs);
        e->attr_timeout = valid_for(fs); /* permissions follow the source */
        if ((er = get_attr(n, &e->attr))) hfs_itab_forget(&fs->itab, n, 1);
        return er;
    }
    if (p->kind != HFS_K_MIRROR || !S_ISDIR(p->mode)) return ENOTDIR;
    if (is_sidecar_of_existing(p->fd, name) || is_file_being_created(p->fd, name)) return ENOENT;
    if (p == &fs->itab.root && strcmp(name, STATS_NAME) == 0) {
        /* a new inode with the text of now; entry_timeout 0: every path
         * walk looks it up again, so each open reads fresh statistics */
        hfs_inode_t *n = hfs_itab_stats(&fs->itab, stats_text(fs));
        if (!n) return ENOMEM;
        e->ino = hfs_itab_id(&fs->itab, n);
        e->attr_timeout = valid_for(fs);
        return get_attr(n, &e->attr);
    }
    if (p == &fs->itab.root && strcmp(name, HFS_TICKS_NAME) == 0) {
        e->ino = hfs_itab_id(&fs->itab, &fs->itab.ticks);
        e->entry_timeout = e->attr_timeout = valid_for(fs);
        return get_attr(&fs->itab.ticks, &e->attr);
    }
    int fd;
    struct stat st;
    char *path;
    int er = hfs_itab_entry(p, name, &fd, &st, &path);
    if (er) return er;
    int logfile = S_ISREG(st.st_mode) && h5l_probe(path, NULL) == H5L_OK;
    hfs_inode_t *n;
    if (logfile) {
        close(fd);
        hfs_lfile_lookup(parent, 1); /* no invalidations into parent meanwhile */
        n = log_inode(fs, parent, name, path, &st);
        hfs_lfile_lookup(parent, -1);
        e->entry_timeout = fs->cfg.tick; /* the ticker also invalidates at once */
        /* a snapshot's size and times never change, but its permissions
         * follow the source's: attributes are valid for one tick */
        e->attr_timeout = n && n->kind == HFS_K_SNAP ? valid_for(fs) : 0;
    } else {
        n = hfs_itab_mirror(&fs->itab, HFS_K_MIRROR, path, fd, &st); /* takes fd */
        e->entry_timeout = valid_for(fs);
        e->attr_timeout = e->entry_timeout; /* follows the source within a tick */
    }
    free(path);
    if (!n) return ENOMEM;
    e->ino = hfs_itab_id(&fs->itab, n);
    if ((er = get_attr(n, &e->attr))) hfs_itab_forget(&fs->itab, n, 1);
    return er;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct fuse_entry_param e;
    int er = do_lookup(fs_of(req), parent, name, &e);
    if (er)
        fuse_reply_err(req, er);
    else
        fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    hfs_itab_forget(&fs_of(req)->itab, ino_of(req, ino), nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    hfs_fs_t *fs = fs_of(req);
    for (size_t i = 0; i < count; i++) hfs_itab_forget(&fs->itab, ino_of(req, f[i].ino), f[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct stat st;
    hfs_inode_t *n = ino_of(req, ino);
    int er = get_attr(n, &st);
    if (er)
        fuse_reply_err(req, er);
    else
        fuse_reply_attr(req, &st, n->kind == HFS_K_BAD ? 0 : valid_for(fs_of(req)));
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    hfs_inode_t *n = ino_of(req, ino);
    char buf[PATH_MAX + 1];
    ssize_t r = n->kind == HFS_K_MIRROR ? readlinkat(n->fd, "", buf, PATH_MAX) : -1;
    if (r < 0) {
        fuse_reply_err(req, n->kind == HFS_K_MIRROR ? errno : EINVAL);
        return;
    }
    buf[r] = 0;
    fuse_reply_readlink(req, buf);
}

/* An open file or directory handle (fi->fh). Every handle is on a list, so
 * the ones whose RELEASE never comes (the session ended first, e.g. on
 * SIGTERM) are freed when the session is destroyed. */
struct hfs_fh {
    hfs_fs_t *fs;
    struct hfs_fh *prev, *next;
    int fd;               /* passthrough file; directory: a dup for lookups */
    DIR *dp;              /* directory */
    struct dirent *entry; /* directory: entry not yet returned */
    off_t offset;         /* directory: position */
    hfs_snap_t *snap;     /* snapshot file: its reference */
    hfs_inode_t *dir;     /* directory: its inode (the ticks tree lists by kind) */
    uint64_t nticks;      /* tlog directory: the ticks committed at opendir */
};

static hfs_fh_t *fh_new(hfs_fs_t *fs)
{
    hfs_fh_t *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->fd = -1;
    h->fs = fs;
    pthread_mutex_lock(&fs->fh_mu);
    h->next = fs->fh_head;
    if (fs->fh_head) fs->fh_head->prev = h;
    fs->fh_head = h;
    pthread_mutex_unlock(&fs->fh_mu);
    return h;
}

static void fh_free(hfs_fh_t *h)
{
    hfs_fs_t *fs = h->fs;
    pthread_mutex_lock(&fs->fh_mu);
    if (h->prev)
        h->prev->next = h->next;
    else
        fs->fh_head = h->next;
    if (h->next) h->next->prev = h->prev;
    pthread_mutex_unlock(&fs->fh_mu);
    if (h->dp) closedir(h->dp);
    if (h->fd >= 0) close(h->fd);
    hfs_snap_unref(h->snap);
    free(h);
}

static hfs_fh_t *fh_of(const struct fuse_file_info *fi) { return (hfs_fh_t *)(uintptr_t)fi->fh; }

static void reply_open(fuse_req_t req, struct fuse_file_info *fi, hfs_fh_t *h)
{
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) != 0) fh_free(h); /* the open was interrupted */
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    hfs_inode_t *n = ino_of(req, ino);
    if (n->kind == HFS_K_TLOG) { /* listed from the tick count, no descriptor */
        struct stat st;
        hfs_lfile_t *lf = NULL;
        h5l_err_t e = {0};
        hfs_fh_t *h = NULL;
        int er = stat(n->path, &st) != 0 || st.st_dev != n->dev || st.st_ino != n->sino ? ENOENT
                 : hfs_lfile_get(n->path, n->dev, n->sino, &lf, &e) != H5L_OK           ? EIO
                 : !(h = fh_new(fs_of(req)))                                            ? ENOMEM
                                                                                        : 0;
        if (h) {
            h->dir = n;
            h->nticks = hfs_lfile_ntick(lf);
        }
        hfs_lfile_unref(lf);
        if (er)
            fuse_reply_err(req, er);
        else
            reply_open(req, fi, h);
        return;
    }
    if (n->kind != HFS_K_MIRROR && n->kind != HFS_K_TDIR) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    hfs_fh_t *h = fh_new(fs_of(req));
    if (h) h->dir = n;
    int fd = h ? openat(n->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0 && (h->fd = dup(fd)) >= 0 && !(h->dp = fdopendir(fd))) {
        int er = errno;
        close(fd);
        errno = er;
    }
    if (!h || !h->dp) {
        int er = h ? errno : ENOMEM;
        if (h) {
            if (fd >= 0 && h->fd < 0) close(fd);
            fh_free(h);
        }
        fuse_reply_err(req, er ? er : EIO);
        return;
    }
    fi->cache_readdir = 0;
    reply_open(req, fi, h);
}

/* A tlog directory: ".", "..", then one entry per committed tick (offset
 * k + 2 after tick k), made from the count: 10^5 ticks list in one pass of
 * fuse_add_direntry calls. */
static void readdir_ticks(fuse_req_t req, hfs_fh_t *d, size_t size, off_t off)
{
    char *buf = calloc(1, size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    for (uint64_t o = off < 0 ? 0 : (uint64_t)off; o < d->nticks + 2; o++) {
        char name[32];
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_mode = o < 2 ? S_IFDIR : S_IFREG;
        st.st_ino = o < 2 ? 1 : o;
        if (o < 2)
            snprintf(name, sizeof name, "%s", o ? ".." : ".");
        else
            hfs_ticks_name(o - 1, name, sizeof name);
        size_t len = fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(o + 1));
        if (len > size - used) break; /* full: this entry goes next time */
        used += len;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    (void)ino;
    hfs_fh_t *d = fh_of(fi);
    if (d->dir->kind == HFS_K_TLOG) {
        readdir_ticks(req, d, size, off);
        return;
    }
    int ticks = d->dir->kind == HFS_K_TDIR;
    char *buf = calloc(1, size);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    if (off != d->offset) {
        seekdir(d->dp, off);
        d->entry = NULL;
        d->offset = off;
    }
    size_t used = 0;
    for (;;) {
        if (!d->entry) {
            errno = 0;
            d->entry = readdir(d->dp);
            if (!d->entry) break;
        }
        off_t next = d->entry->d_off;
        const char *name = d->entry->d_name;
        int listed = ticks ? hfs_ticks_listed(d->dir, name, d->entry->d_type) : !is_sidecar_of_existing(d->fd, name) && !is_file_being_created(d->fd, name);
        if (listed) {
            struct stat st;
            memset(&st, 0, sizeof st);
            st.st_ino = d->entry->d_ino;
            st.st_mode = ticks ? S_IFDIR : (mode_t)(d->entry->d_type << 12); /* a log file is a directory there */
            size_t len = fuse_add_direntry(req, buf + used, size - used, name, &st, next);
            if (len > size - used) break; /* full: this entry goes next time */
            used += len;
        }
        d->entry = NULL;
        d->offset = next;
    }
    fuse_reply_buf(req, buf, used);
    free(buf);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fh_free(fh_of(fi));
    fuse_reply_err(req, 0);
}

/* A readable descriptor of the mirror inode n's source (n->fd is O_PATH),
 * or -1 with errno. */
static int reopen(const hfs_inode_t *n)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/self/fd/%d", n->fd);
    return open(p, O_RDONLY | O_CLOEXEC);
}

/* Opens. What a file's descriptor reads is fixed by its inode alone: a
 * snapshot inode holds its snapshot until FORGET (which the kernel sends
 * only once no descriptor is open on it), a tsnap's bytes are its tick's
 * whoever builds them, a statistics inode holds its text, a mirror reads
 * its source. So an open needs no handle, and a file open costs two
 * requests (OPEN, RELEASE) for nothing: a reader polling a live file opens
 * it a thousand times a second (docs/performance.md). Where the kernel
 * allows it (FUSE_CAP_NO_OPEN_SUPPORT), the first open of a file is
 * answered ENOSYS, after which the kernel opens files without asking us,
 * with keep_cache, and reads arrive without a handle (op_read). Otherwise
 * each open gets a handle as before. Write opens do not reach us either
 * way: the mount is read-only, so the kernel answers them EROFS itself
 * (the check below is for a mount made otherwise). */
static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    hfs_fs_t *fs = fs_of(req);
    hfs_inode_t *n = ino_of(req, ino);
    atomic_fetch_add(&fs->opens, 1);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
        fuse_reply_err(req, EROFS);
        return;
    }
    if (fs->no_open) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (n->kind == HFS_K_BAD) {
        fuse_reply_err(req, EIO);
        return;
    }
    hfs_fh_t *h = fh_new(fs);
    if (!h) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    if (n->kind == HFS_K_STATS) {
        fi->keep_cache = 1; /* the inode's text never changes */
    } else if (n->kind == HFS_K_SNAP) {
        atomic_fetch_add(&n->snap->refs, 1);
        h->snap = n->snap;
        fi->keep_cache = 1;              /* the inode's bytes never change */
    } else if (n->kind == HFS_K_TSNAP) { /* its snapshot is taken at open (ticks.h) */
        int er = hfs_ticks_open(n, &h->snap);
        if (er) {
            fh_free(h);
            fuse_reply_err(req, er);
            return;
        }
        fi->keep_cache = 1;
    } else if ((h->fd = reopen(n)) < 0) {
        int er = errno;
        fh_free(h);
        fuse_reply_err(req, er);
        return;
    }
    reply_open(req, fi, h);
}

/* Reads come with the handle of op_open or, where the kernel skips opens,
 * none (fi->fh 0): then the inode says what to read (op_open says why
 * that is the same). */
static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
    hfs_fh_t *h = fh_of(fi);
    hfs_inode_t *n = ino_of(req, ino);
    if (n->kind == HFS_K_STATS) {
        /* replied from the thread's buffer: the kernel may forget the
         * inode once it has the reply, before writev returns */
        size_t len = strlen(n->text);
        size_t o = (size_t)off < len ? (size_t)off : len, k = size < len - o ? size : len - o;
        char *buf = hfs_tbuf(HFS_TBUF_REPLY, k ? k : 1);
        if (!buf) {
            fuse_reply_err(req, ENOMEM);
            return;
        }
        memcpy(buf, n->text + o, k);
        fuse_reply_buf(req, buf, k);
        return;
    }
    if (hfs_kind_is_snap(n->kind)) {
        hfs_snap_t *snap = h ? h->snap : n->snap, *taken = NULL;
        if (!snap) { /* a tsnap read without a handle: its tick's snapshot (ticks.h) */
            int er = hfs_ticks_open(n, &taken);
            if (er) {
                fuse_reply_err(req, er == ENOENT ? ESTALE : er); /* the source was replaced */
                return;
            }
            snap = taken;
        }
        char *buf = hfs_tbuf(HFS_TBUF_REPLY, size); /* tbuf.h: why per thread */
        if (!buf) {
            hfs_snap_unref(taken);
            fuse_reply_err(req, ENOMEM);
            return;
        }
        h5l_err_t e = {0};
        long r = hfs_snap_read(snap, (uint64_t)off, size, buf, &e);
        if (r < 0) { /* logged once per file version, like a bad lookup */
            char msg[sizeof e.msg + 64];
            snprintf(msg, sizeof msg, "%s (read of %zu bytes at %lld)", e.msg, size, (long long)off);
            hfs_lfile_report(snap->lf, &n->src_st, msg);
            fuse_reply_err(req, errno_of((int)r));
        } else {
            fuse_reply_buf(req, buf, (size_t)r);
        }
        hfs_snap_unref(taken);
        return;
    }
    if (n->kind != HFS_K_MIRROR) { /* a bad log file: nothing of it can be read (its lookup logged why) */
        fuse_reply_err(req, EIO);
        return;
    }
    int fd = h ? h->fd : reopen(n);
    if (fd < 0) {
        fuse_reply_err(req, errno);
        return;
    }
    struct fuse_bufvec b = FUSE_BUFVEC_INIT(size);
    b.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
    b.buf[0].fd = fd;
    b.buf[0].pos = off;
    fuse_reply_data(req, &b, FUSE_BUF_SPLICE_MOVE);
    if (!h) close(fd);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    struct statvfs s;
    if (fstatvfs(fs_of(req)->itab.root.fd, &s) != 0)
        fuse_reply_err(req, errno);
    else
        fuse_reply_statfs(req, &s);
}

/* Snapshot files tell what they are through extended attributes: a
 * monitor reading through the mount (h5logtail) learns the tick and whether
 * the writer has closed the file. */
static int snap_xattr(const hfs_inode_t *n, const char *name, char *buf, size_t cap)
{
    if (strcmp(name, "user.h5logfs.tick") == 0) return snprintf(buf, cap, "%llu", (unsigned long long)n->tick);
    if (strcmp(name, "user.h5logfs.closed") == 0) return snprintf(buf, cap, "%d", n->closed);
    /* final: nothing under this name will ever change (a tick file, or the
     * last tick of a closed file) — a monitor stops there */
    if (strcmp(name, "user.h5logfs.final") == 0) return snprintf(buf, cap, "%d", n->kind == HFS_K_TSNAP || n->closed);
    if (strcmp(name, "user.h5logfs.source") == 0) return snprintf(buf, cap, "%s", n->path);
    if (strcmp(name, "user.h5logfs.time") == 0) /* the tick's commit time: seconds.nanoseconds since the epoch */
        return snprintf(buf, cap, "%llu.%09llu", (unsigned long long)(n->time_ns / 1000000000u),
                        (unsigned long long)(n->time_ns % 1000000000u));
    /* a tsnap's tick is intact by definition: damage is of later ticks */
    if (strcmp(name, "user.h5logfs.damaged") == 0) return n->snap ? hfs_snap_damage(n->snap, buf, cap) : -1;
    return -1;
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    hfs_inode_t *n = ino_of(req, ino);
    char buf[PATH_MAX + 64];
    int len = hfs_kind_is_snap(n->kind) ? snap_xattr(n, name, buf, sizeof buf) : -1;
    if (len < 0)
        fuse_reply_err(req, ENODATA);
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)len);
    else if ((size_t)len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, buf, (size_t)len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    /* damaged is listed only when the file has a damaged tick */
    static const char names[] =
        "user.h5logfs.tick\0user.h5logfs.time\0user.h5logfs.closed\0user.h5logfs.final\0user.h5logfs.source\0"
        "user.h5logfs.damaged";
    hfs_inode_t *n = ino_of(req, ino);
    char tmp[8];
    size_t len = !hfs_kind_is_snap(n->kind) ? 0
                 : n->snap && hfs_snap_damage(n->snap, tmp, sizeof tmp) >= 0
                     ? sizeof names
                     : sizeof names - sizeof "user.h5logfs.damaged";
    if (size == 0)
        fuse_reply_xattr(req, len);
    else if (len > size)
        fuse_reply_err(req, ERANGE);
    else
        fuse_reply_buf(req, names, len);
}

/* Everything that would change the tree. */
static void rofs_entry(fuse_req_t req) { fuse_reply_err(req, EROFS); }
static void op_setattr(fuse_req_t req, fuse_ino_t i, struct stat *a, int s, struct fuse_file_info *f)
{
    (void)i;
    (void)a;
    (void)s;
    (void)f;
    rofs_entry(req);
}
static void op_mknod(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, dev_t r)
{
    (void)p;
    (void)n;
    (void)m;
    (void)r;
    rofs_entry(req);
}
static void op_mkdir(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m)
{
    (void)p;
    (void)n;
    (void)m;
    rofs_entry(req);
}
static void op_unlink(fuse_req_t req, fuse_ino_t p, const char *n)
{
    (void)p;
    (void)n;
    rofs_entry(req);
}
static void op_symlink(fuse_req_t req, const char *l, fuse_ino_t p, const char *n)
{
    (void)l;
    (void)p;
    (void)n;
    rofs_entry(req);
}
static void op_rename(fuse_req_t req, fuse_ino_t p, const char *n, fuse_ino_t np, const char *nn, unsigned f)
{
    (void)p;
    (void)n;
    (void)np;
    (void)nn;
    (void)f;
    rofs_entry(req);
}
static void op_link(fuse_req_t req, fuse_ino_t i, fuse_ino_t p, const char *n)
{
    (void)i;
    (void)p;
    (void)n;
    rofs_entry(req);
}
static void op_write(fuse_req_t req, fuse_ino_t i, const char *b, size_t s, off_t o, struct fuse_file_info *f)
{
    (void)i;
    (void)b;
    (void)s;
    (void)o;
    (void)f;
    rofs_entry(req);
}
static void op_create(fuse_req_t req, fuse_ino_t p, const char *n, mode_t m, struct fuse_file_info *f)
{
    (void)p;
    (void)n;
    (void)m;
    (void)f;
    rofs_entry(req);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    /* 1 MiB requests: libfuse derives max_pages from max_write */
    conn->max_write = 1 << 20;
    conn->max_readahead = 1 << 20;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
    conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
    /* Asked for so that the kernel may send lookups of one directory in
     * parallel (a first skeleton build can take seconds); measured on
     * Linux 6.18, a lookup of a name not in the dentry cache still waited
     * for one in progress in its directory (docs/architecture.md). */
    if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
    /* pages a read brings in are checked against the attributes (size,
     * mtime) when those expire: how a mirrored file that changed is read
     * anew, now that no open drops its pages (op_open) */
    if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA) conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
    int skip = 1;
#ifdef HFS_TEST_HOOKS
    /* test builds only (build/tests/h5logfs_hooks): keep every open, to
     * test the handle path that kernels without the capability take */
    if (getenv("H5LOGFS_TEST_OPENS")) skip = 0;
#endif
    hfs_fs_t *fs = userdata;
    if (skip && (conn->capable & FUSE_CAP_NO_OPEN_SUPPORT)) {
        conn->want |= FUSE_CAP_NO_OPEN_SUPPORT;
        fs->no_open = 1;
    }
}

static void op_destroy(void *userdata)
{
    hfs_fs_t *fs = userdata;
    while (fs->fh_head) fh_free(fs->fh_head); /* handles whose RELEASE never came */
}

static const struct fuse_lowlevel_ops ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .readlink = op_readlink,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .releasedir = op_release,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .statfs = op_statfs,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setattr = op_setattr,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .unlink = op_unlink,
    .rmdir = op_unlink,
    .symlink = op_symlink,
    .rename = op_rename,
    .link = op_link,
    .write = op_write,
    .create = op_create,
};

const struct fuse_lowlevel_ops *hfs_fs_ops(void) { return &ops; }

hfs_fs_t *hfs_fs_new(const hfs_config_t *c, char *err, size_t errlen)
{
    hfs_fs_t *fs = calloc(1, sizeof *fs);
    if (!fs) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    fs->cfg = *c;
    pthread_mutex_init(&fs->fh_mu, NULL);
    if (hfs_itab_init(&fs->itab, c->source, err, errlen) != 0) {
        pthread_mutex_destroy(&fs->fh_mu);
        free(fs);
        return NULL;
    }
    return fs;
}

void hfs_fs_free(hfs_fs_t *fs)
{
    if (!fs) return;
    while (fs->fh_head) fh_free(fs->fh_head);
    hfs_itab_fini(&fs->itab);
    pthread_mutex_destroy(&fs->fh_mu);
    free(fs);
}
