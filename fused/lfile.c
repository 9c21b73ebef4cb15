/* lfile.c — log-layout files and snapshots (see lfile.h).
 *
 * Reading a snapshot: metadata bytes come from the skeleton's image; each
 * raw region is one block (chunk or slab). For each block, in this order:
 *   1. skip path: if the newest record of the block alone covers it as one
 *      contiguous run of the log (a sequential writer's data), pread the
 *      requested bytes straight from the log into the reply;
 *   1b. gather path: if the block's records never write an element twice,
 *      serve a cached copy if there is one, else read just the requested
 *      bytes from the log, box by box, into the reply (an edge chunk's
 *      padding as zeros): nothing assembled, nothing cached;
 *   2. the shared chunk cache, keyed by the block's content version, so
 *      unchanged blocks are shared across ticks (cache.h): blocks whose
 *      records overlap (or are many);
 *   3. a block the cache cannot hold is assembled into the reply (whole
 *      block) or a per-thread scratch buffer (part of one).
 * For closed files the reader drops the log's pages behind the readers
 * (h5l_reader_dropbehind): the mount's page cache holds those bytes.
 * Assembling = fill value, then the block's records in sequence order, by
 * pread at absolute offsets (libcore reader). No libhdf5 on this path. */
#include "lfile.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "badlog.h"
#include "h5log/box.h"
#include "cache.h"
#include "h5log/codec.h"
#include "h5log/format.h"
#include "h5log/query.h"
#include "h5log/grow.h"
#include "tbuf.h"
#include "watch.h"
#include <xxhash.h>

/* Blocks larger than this are never assembled whole (nor cached): a read
 * gathers just its bytes. Bounds what one request can make the daemon
 * allocate, whatever chunk shape a file declares. */
#ifndef HFS_ASSEMBLE_MAX
#define HFS_ASSEMBLE_MAX ((uint64_t)64 << 20)
#endif

struct hfs_lfile {
    atomic_int refs;
    char *path;
    dev_t dev;
    ino_t ino;
    /* a closed file's size and mtime when it was loaded: a writer that
     * reopens it (h5l_open) changes both, in place (same inode) */
    off_t csize;
    struct timespec cmtime;
    uint8_t cub[H5L_UB_LEN]; /* and its user block */
    /* the sidecar of a file loaded live: a close in progress still has
     * it, a reopened run has another (side_id) */
    int side_known;
    uint64_t side_id[3]; /* dev, inode, birth time in ns (0 where the file system has none) */
    h5l_reader_t *reader;
    pthread_mutex_t mu; /* skel, snap, failed, reported, entry */
    hfs_skel_t *skel;   /* newest skeleton */
    hfs_snap_t *snap;   /* newest snapshot */
    int failed;         /* nothing can be served (sticky) */
    int reported;       /* ... and that was logged */
    h5l_err_t ferr;
    int damaged; /* a tick failed to load: the ticks before it are served */
    uint64_t damaged_tick;
    h5l_err_t derr;
    uint64_t parent;
    char *name;
    _Atomic double last_use; /* set by lookups under mu or reg_mu, read by the ticker */
    int closed_seen; /* ticker: the CLOSE record was announced */
    atomic_int wd;      /* inotify watch on the sidecar (watch.h), or -1 */
    atomic_int changed; /* the watch saw a write, or a poll was skipped: refresh soon */
    hfs_cds_t **cds; /* per object id: this file's cache index */
    size_t ncds;
    _Atomic uint64_t st_reads, st_hits, st_misses, st_skipped, st_assembled, st_evictions;
    _Atomic uint64_t st_skeletons, st_snapshots;
    _Atomic int64_t st_cached;    /* bytes of this file in the cache */
    _Atomic uint64_t st_gathered; /* part of st_skipped: by the gather path */
    _Atomic uint64_t st_siblings; /* tiles of sibling chunks assembled in one pass */
    atomic_int fallback_said;     /* a build fell back to libhdf5's chunk indexes: logged once */
    /* skeleton builds (the builder thread; guarded by mu) */
    int building;           /* queued or being built */
    int announce;           /* a build landed: the ticker invalidates the name */
    uint64_t bfail_version; /* a build of this skeleton version failed ... */
    int bfailed;            /* ... (not retried until the version changes) */
    h5l_err_t berr;
    hfs_skel_live_t *live; /* the newest skeleton kept open for patching
                            * (builder thread only; live files) */
    pthread_cond_t built;  /* building 1 -> 0 */
    hfs_lfile_t *bnext;    /* build queue */
    hfs_lfile_t *next;     /* registry */
};

static hfs_cds_t *file_cds_locked(hfs_lfile_t *lf, uint32_t objid);
static void report_damage(hfs_lfile_t *lf);
static _Atomic uint64_t st_fallbacks; /* builds whose own indexes a guard refused */

/* A skeleton just built: when a guard made it give up the daemon's own
 * chunk indexes (the file is still served right, with libhdf5's), count it
 * and say why, once per file: a live file could fall back every tick, and
 * the reason is a daemon or libhdf5 surprise worth a bug report. */
static void note_fallback(hfs_lfile_t *lf, const hfs_skel_t *k)
{
    if (!k || !k->fallback) return;
    atomic_fetch_add(&st_fallbacks, 1);
    if (!atomic_exchange(&lf->fallback_said, 1))
        hfs_log("%s (built with libhdf5's chunk indexes instead; the file is served as usual)", k->fallback);
}

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static hfs_lfile_t *reg_head;
static hfs_cache_t *g_cache;

/* The build queue: files whose newest tick needs a skeleton, built one at a
 * time by one thread (libhdf5 is serial anyway), so no request thread ever
 * runs or waits for libhdf5 unless its own file has no skeleton yet. Each
 * queued file holds a reference. Lock order: a file's mu, then bq_mu. */
static pthread_mutex_t bq_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bq_cv = PTHREAD_COND_INITIALIZER;
static hfs_lfile_t *bq_head, *bq_tail;
static int bq_started, bq_stop;
static pthread_t bq_thread;
static hfs_lfile_t *bq_current; /* being built (identity only; under bq_mu) */
static _Atomic uint64_t st_builds, st_build_fail, st_build_ns, st_build_max_ns, st_patched;
static _Atomic uint64_t st_own_idx, st_own_chunks; /* chunk indexes the daemon wrote (btree.h) */
static _Atomic uint64_t st_rounds, st_woken; /* ticker rounds: every tick / on a change or a landed build */

/* Wakes the ticker (hfs_lfile_set_kick); NULL: it wakes every tick only. */
static void (*g_kick)(void);
void hfs_lfile_set_kick(void (*kick)(void)) { g_kick = kick; }

/* Live files whose newest skeleton stays open for patching, at most
 * LIVE_MAX at once (each holds its libhdf5 file: metadata cache and
 * capture, about the size of its image twice); others build in full. */
#define LIVE_MAX 16
static atomic_int n_live;

int hfs_lfile_init(size_t cache_limit)
{
    pthread_mutex_lock(&bq_mu);
    bq_started = bq_stop = 0;
    pthread_mutex_unlock(&bq_mu);
    hfs_skel_cancel(0);
    g_cache = hfs_cache_new(cache_limit);
    return g_cache ? 0 : -1;
}

static atomic_int use_syslog;

void hfs_log_to_syslog(void)
{
    openlog("h5logfs", LOG_PID, LOG_DAEMON);
    atomic_store(&use_syslog, 1);
}

void hfs_log(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (atomic_load(&use_syslog)) {
        syslog(LOG_WARNING, "%s", line);
        return;
    }
    fprintf(stderr, "h5logfs: %s\n", line);
    fflush(stderr);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void lfile_free(hfs_lfile_t *lf)
{
    for (size_t i = 0; i < lf->ncds; i++)
        if (lf->cds[i]) hfs_cds_close(lf->cds[i]);
    free(lf->cds);
    hfs_watch_rm(atomic_load(&lf->wd));
    hfs_snap_unref(lf->snap);
    hfs_skel_unref(lf->skel);
    if (lf->live) {
        hfs_skel_live_free(lf->live);
        atomic_fetch_sub(&n_live, 1);
    }
    h5l_reader_close(lf->reader);
    pthread_mutex_destroy(&lf->mu);
    pthread_cond_destroy(&lf->built);
    free(lf->path);
    free(lf->name);
    free(lf);
}

void hfs_lfile_unref(hfs_lfile_t *lf)
{
    if (lf && atomic_fetch_sub(&lf->refs, 1) == 1) lfile_free(lf);
}

/* Which sidecar path+".h5lj" is (dev, inode, birth time: an inode number
 * freed by a removed sidecar may be reused by the next run's): 0 if there
 * is none. */
static int side_ident(const char *path, uint64_t id[3])
{
    char *j;
    if (asprintf(&j, "%s%s", path, H5L_SIDECAR_SUFFIX) < 0) return 0;
    struct statx sx;
    int ok = statx(AT_FDCWD, j, 0, STATX_INO | STATX_BTIME, &sx) == 0;
    free(j);
    if (!ok) return 0;
    id[0] = ((uint64_t)sx.stx_dev_major << 32) | sx.stx_dev_minor;
    id[1] = sx.stx_ino;
    id[2] = (sx.stx_mask & STATX_BTIME) ? (uint64_t)sx.stx_btime.tv_sec * 1000000000u + sx.stx_btime.tv_nsec : 0;
    return 1;
}

/* A file loaded closed that a writer has opened again (h5l_open: same
 * inode, its user block live again, or closed again by then with its
 * journal elsewhere): its user block is not the one the file had when it
 * was seen closed. Its size or mtime moved first, so the user block is
 * read only then (and once after the file was first seen closed). Under
 * reg_mu. */
static int reopened(hfs_lfile_t *lf, const char *path)
{
    struct stat st;
    if (!lf->closed_seen || stat(path, &st) != 0) return 0;
    if (lf->csize && st.st_size == lf->csize && st.st_mtim.tv_sec == lf->cmtime.tv_sec &&
        st.st_mtim.tv_nsec == lf->cmtime.tv_nsec)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t b[H5L_UB_LEN];
    h5l_ub_t ub;
    int ok = fd >= 0 && pread(fd, b, sizeof b, 0) == (ssize_t)sizeof b && h5l_ub_decode(b, &ub, path, NULL) == H5L_OK;
    if (fd >= 0) close(fd);
    if (!ok) return 0;
    if (!(ub.flags & H5L_UB_CLOSED) && !lf->csize && lf->side_known) {
        /* live, and never seen closed: the run the reader loaded is still
         * closing (its CLOSE frame is written before its user block says
         * closed) while its sidecar is the one loaded; a reopened run has
         * made another */
        uint64_t id[3];
        if (side_ident(path, id) && !memcmp(id, lf->side_id, sizeof id)) return 0;
    }
    if (!(ub.flags & H5L_UB_CLOSED) || (lf->csize && memcmp(b, lf->cub, 48) != 0)) return 1;
    /* closed as seen (or seen closed by the ticker): remember how it looks */
    memcpy(lf->cub, b, sizeof b);
    lf->csize = st.st_size;
    lf->cmtime = st.st_mtim;
    return 0;
}

int hfs_lfile_get(const char *path, dev_t dev, ino_t ino, hfs_lfile_t **out, h5l_err_t *err)
{
    *out = NULL;
    pthread_mutex_lock(&reg_mu);
    for (hfs_lfile_t **pp = &reg_head, *lf; (lf = *pp); pp = &lf->next) {
        if (lf->dev == dev && lf->ino == ino) {
            if (reopened(lf, path)) { /* a new writer goes on with it: load it anew */
                *pp = lf->next;
                hfs_lfile_unref(lf);
                break;
            }
            atomic_fetch_add(&lf->refs, 1);
            lf->last_use = now_s();
            pthread_mutex_unlock(&reg_mu);
            *out = lf;
            return H5L_OK;
        }
    }
    pthread_mutex_unlock(&reg_mu);
    /* open outside the registry lock: loading a big file takes a while */
    h5l_reader_t *r;
    /* lazy attributes: a log setting an attribute at every tick opens from
     * its checkpoints' summaries too (skeletons of old ticks inside a
     * segment ask h5l_reader_schema_at) */
    int rc = h5l_reader_open_flags(path, H5L_READER_LAZY_ATTRS, &r, err);
    if (rc) return rc;
    hfs_lfile_t *lf = calloc(1, sizeof *lf);
    if (!lf || !(lf->path = strdup(path))) {
        free(lf);
        h5l_reader_close(r);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    }
    atomic_init(&lf->refs, 2); /* the registry's and the caller's */
    lf->dev = dev;
    lf->ino = ino;
    lf->reader = r;
    lf->side_known = h5l_reader_live(r) && side_ident(path, lf->side_id);
    lf->closed_seen = h5l_reader_closed(r); /* already closed: nothing to announce */
    if (lf->closed_seen) (void)reopened(lf, path); /* its look when closed */
    atomic_init(&lf->wd, -1);
    atomic_init(&lf->changed, 0);
    if (h5l_reader_damage(r, &lf->damaged_tick, &lf->derr)) {
        lf->damaged = 1; /* logged once, when the registry takes it */
    }
    lf->last_use = now_s();
    pthread_mutex_init(&lf->mu, NULL);
    pthread_cond_init(&lf->built, NULL);
    pthread_mutex_lock(&reg_mu);
    for (hfs_lfile_t *o = reg_head; o; o = o->next) {
        if (o->dev == dev && o->ino == ino) { /* another thread won the race */
            atomic_fetch_add(&o->refs, 1);
            pthread_mutex_unlock(&reg_mu);
            lfile_free(lf);
            *out = o;
            return H5L_OK;
        }
    }
    int watch = !lf->closed_seen && h5l_reader_live(r); /* (the ticker owns closed_seen once lf is listed) */
    lf->next = reg_head;
    reg_head = lf;
    pthread_mutex_unlock(&reg_mu);
    if (watch) { /* its ticks are appended to the sidecar */
        char *j;
        if (asprintf(&j, "%s%s", path, H5L_SIDECAR_SUFFIX) >= 0) {
            atomic_store(&lf->wd, hfs_watch_add(j));
            free(j);
        }
        /* a commit between the reader's open and the watch (or whose event
         * came before wd was stored) made no mark: one refresh soon */
        atomic_store(&lf->changed, 1);
        if (g_kick) g_kick();
    }
    if (lf->damaged) report_damage(lf);
    *out = lf;
    return H5L_OK;
}

void hfs_lfile_set_entry(hfs_lfile_t *lf, uint64_t parent, const char *name)
{
    pthread_mutex_lock(&lf->mu);
    if (lf->parent != parent || !lf->name || strcmp(lf->name, name) != 0) {
        char *n = strdup(name);
        if (n) {
            free(lf->name);
            lf->name = n;
            lf->parent = parent;
        }
    }
    lf->last_use = now_s();
    pthread_mutex_unlock(&lf->mu);
}

/* A damaged tick found while loading: one line per file version (the
 * version that went bad, if the path still names this file), saying which
 * tick is served instead. */
static void report_damage(hfs_lfile_t *lf)
{
    struct stat st;
    if (stat(lf->path, &st) != 0 || st.st_dev != lf->dev || st.st_ino != lf->ino) {
        memset(&st, 0, sizeof st);
        st.st_dev = lf->dev;
        st.st_ino = lf->ino;
        st.st_size = -1;
    }
    if (hfs_badlog_first(&st))
        hfs_log("%s (serving tick %llu, the last intact one)", lf->derr.msg,
                (unsigned long long)h5l_reader_ntick(lf->reader));
}

void hfs_lfile_report(hfs_lfile_t *lf, const struct stat *st, const char *msg)
{
    int first = hfs_badlog_first(st);
    if (lf) { /* a file that went bad stays bad while loaded: one line */
        pthread_mutex_lock(&lf->mu);
        if (lf->failed) {
            if (lf->reported) first = 0;
            lf->reported = 1;
        }
        pthread_mutex_unlock(&lf->mu);
    }
    if (first) hfs_log("%s", msg);
}

const char *hfs_snap_source(const hfs_snap_t *s) { return s->lf->path; }

int hfs_snap_damage(const hfs_snap_t *s, char *buf, size_t cap)
{
    hfs_lfile_t *lf = s->lf;
    pthread_mutex_lock(&lf->mu);
    int n = lf->damaged ? snprintf(buf, cap, "tick %llu: %s", (unsigned long long)lf->damaged_tick, lf->derr.msg) : -1;
    pthread_mutex_unlock(&lf->mu);
    return n;
}

void hfs_snap_unref(hfs_snap_t *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    hfs_skel_unref(s->skel);
    hfs_lfile_unref(s->lf);
    free(s);
}

/* A new snapshot of tick `tick` on skeleton k (its reference taken), with
 * lf->mu held; one reference, the caller's. NULL if out of memory. */
static hfs_snap_t *snap_alloc_locked(hfs_lfile_t *lf, uint64_t tick, int closed, hfs_skel_t *k)
{
    hfs_snap_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    atomic_init(&s->refs, 1);
    atomic_fetch_add(&lf->refs, 1);
    s->lf = lf;
    s->tick = tick;
    s->closed = closed;
    s->skel = hfs_skel_ref(k);
    h5l_tick_info_t ti;
    s->time_ns = h5l_reader_tick_info(lf->reader, tick, &ti) == 0 ? ti.time_ns : 0;
    return s;
}

/* A new snapshot of tick `tick` on lf->skel, made lf->snap; lf->mu held. */
static int new_snap_locked(hfs_lfile_t *lf, uint64_t tick, int closed, h5l_err_t *err)
{
    hfs_snap_t *s = snap_alloc_locked(lf, tick, closed, lf->skel); /* lf->snap's reference */
    if (!s) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", lf->path);
    /* The last snapshot of a closed file never changes, so the mount's page
     * cache keeps what it was served: the log's pages behind the readers
     * are a second copy. Dropping them halves the memory a streamed file
     * takes, and the freed pages are reused at once for the mount's page
     * cache (on this project's VM fresh memory costs ~0.5 GB/s to touch
     * against ~15 GB/s for reused pages: it was most of the daemon's CPU). */
    if (closed) h5l_reader_dropbehind(lf->reader);
    hfs_snap_unref(lf->snap);
    lf->snap = s;
    atomic_fetch_add(&lf->st_snapshots, 1);
    return H5L_OK;
}

static void *builder_main(void *arg);

/* Directories with a lookup of a log file in progress (hfs_lfile_lookup).
 * The kernel holds the parent directory's lock (shared) for a whole
 * lookup, and an entry invalidation takes it exclusively: sent meanwhile
 * (during a first build or the loading of a big file), it waits for that
 * lookup, and every later lookup in the directory queues behind it. So the
 * ticker sends none into such a directory (the entries still expire after
 * one tick). */
#define MAX_WAITDIRS 64
static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t wd_parent[MAX_WAITDIRS];
static int wd_count[MAX_WAITDIRS];

void hfs_lfile_lookup(uint64_t parent, int delta)
{
    pthread_mutex_lock(&wd_mu);
    int i, free_i = -1;
    for (i = 0; i < MAX_WAITDIRS; i++) {
        if (wd_count[i] && wd_parent[i] == parent) break;
        if (!wd_count[i] && free_i < 0) free_i = i;
    }
    if (i == MAX_WAITDIRS) i = free_i; /* full: the directory is not protected */
    if (i >= 0) {
        wd_parent[i] = parent;
        wd_count[i] += delta;
        if (wd_count[i] < 0) wd_count[i] = 0;
    }
    pthread_mutex_unlock(&wd_mu);
}

static int dir_waiting(uint64_t parent)
{
    pthread_mutex_lock(&wd_mu);
    int w = 0;
    for (int i = 0; i < MAX_WAITDIRS && !w; i++) w = wd_count[i] && wd_parent[i] == parent;
    pthread_mutex_unlock(&wd_mu);
    return w;
}

/* How long a lookup waits for its file's build when an older snapshot can
 * be served instead: a lookup of a file with a skeleton answers within
 * this (plus its own work), whatever else is being built. */
#define BUILD_WAIT_MS 50

/* Queue lf for a build of its newest tick (lf->mu held). */
static void enqueue_build_locked(hfs_lfile_t *lf)
{
    if (lf->building) return;
    pthread_mutex_lock(&bq_mu);
    if (!bq_started && !bq_stop) bq_started = pthread_create(&bq_thread, NULL, builder_main, NULL) == 0;
    if (bq_started && !bq_stop) {
        lf->building = 1;
        atomic_fetch_add(&lf->refs, 1);
        lf->bnext = NULL;
        if (bq_tail)
            bq_tail->bnext = lf;
        else
            bq_head = lf;
        bq_tail = lf;
        pthread_cond_signal(&bq_cv);
    }
    pthread_mutex_unlock(&bq_mu);
}

/* The snapshot a lookup gets: the newest tick whose skeleton is built.
 * When the newest loaded tick needs a skeleton that does not exist yet
 * (schema, extents or allocated chunks changed), the build is queued for
 * the builder thread and, if an older snapshot exists, that one is
 * returned at once: a lookup never waits for libhdf5 unless its file has
 * no skeleton at all (then it waits for its own build only). When the
 * build lands the ticker invalidates the name and the next lookup gets it.
 * A build that failed is not retried for the same skeleton version (its
 * error is returned, or the older snapshot served), so a broken file costs
 * one build per change, not one per lookup. */
int hfs_lfile_snapshot(hfs_lfile_t *lf, hfs_snap_t **out, h5l_err_t *err)
{
    *out = NULL;
    pthread_mutex_lock(&lf->mu);
    int rc = H5L_OK, waited = 0;
    for (;;) {
        if (lf->failed) {
            if (err) *err = lf->ferr;
            rc = lf->ferr.code;
            break;
        }
        uint64_t tick = h5l_reader_ntick(lf->reader);
        int closed = h5l_reader_closed(lf->reader);
        if (!lf->snap || lf->snap->tick != tick || lf->snap->closed != closed) {
            h5l_reader_rdlock(lf->reader);
            uint64_t version = hfs_skel_version(lf->reader, h5l_reader_schema(lf->reader), tick);
            h5l_reader_unlock(lf->reader);
            /* (a live skeleton of a closed file's last tick is served only
             * until its full build lands: build_one) */
            if (lf->skel && lf->skel->version == version && !(closed && lf->skel->live)) {
                rc = new_snap_locked(lf, tick, closed, err);
                if (rc) break;
            } else if (lf->bfailed && lf->bfail_version == version) {
                if (!lf->snap) { /* nothing built: the build's error */
                    if (err) *err = lf->berr;
                    rc = lf->berr.code ? lf->berr.code : H5L_EHDF5;
                    break;
                }
            } else {
                enqueue_build_locked(lf);
                if (!lf->building && !lf->snap) { /* shutting down */
                    rc = h5l_err_set(err, H5L_EIO, "%s: the daemon is stopping", lf->path);
                    break;
                }
                if (!lf->snap) {
                    pthread_cond_wait(&lf->built, &lf->mu);
                    continue; /* look again: built, failed, or newer */
                }
                /* most builds take milliseconds: wait a little for this
                 * one (the newest tick at once), never longer than
                 * BUILD_WAIT_MS (then the older snapshot), and not at all
                 * while another file's build runs */
                pthread_mutex_lock(&bq_mu);
                int other = bq_current && bq_current != lf; /* behind another file's build */
                pthread_mutex_unlock(&bq_mu);
                if (lf->building && !waited && !other) {
                    waited = 1;
                    struct timespec dl;
                    clock_gettime(CLOCK_REALTIME, &dl);
                    dl.tv_nsec += BUILD_WAIT_MS * 1000000L;
                    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
                    while (lf->building && pthread_cond_timedwait(&lf->built, &lf->mu, &dl) == 0) {}
                    continue;
                }
            }
        }
        atomic_fetch_add(&lf->snap->refs, 1);
        *out = lf->snap;
        break;
    }
    lf->last_use = now_s();
    pthread_mutex_unlock(&lf->mu);
    return rc;
}

uint64_t hfs_lfile_ntick(hfs_lfile_t *lf)
{
    pthread_mutex_lock(&lf->mu);
    uint64_t n = lf->failed ? 0 : h5l_reader_ntick(lf->reader);
    lf->last_use = now_s();
    pthread_mutex_unlock(&lf->mu);
    return n;
}

/* An old tick (the ticks tree, ticks.h): the newest snapshot if it is that
 * tick, a snapshot on the newest skeleton if the file's structure has not
 * changed since — either only if its skeleton is a full build: a tick
 * file's bytes must be the same whenever it is built (ticks.h), and a live
 * skeleton's are not — else one on a skeleton built here for it — on the calling
 * thread, without lf->mu (lookups of the newest tick and the builder go
 * on), never adopted as the newest. */
int hfs_lfile_snapshot_at(hfs_lfile_t *lf, uint64_t tick, hfs_snap_t **out, h5l_err_t *err)
{
    *out = NULL;
    pthread_mutex_lock(&lf->mu);
    int rc = H5L_OK;
    uint64_t n = h5l_reader_ntick(lf->reader);
    int closed = tick == n && h5l_reader_closed(lf->reader);
    hfs_skel_t *k = NULL;
    if (lf->failed) {
        if (err) *err = lf->ferr;
        rc = lf->ferr.code;
    } else if (tick == 0 || tick > n) {
        rc = h5l_err_set(err, H5L_ENOTFOUND, "%s: tick %llu is not committed (%llu are)", lf->path,
                         (unsigned long long)tick, (unsigned long long)n);
    } else if (lf->snap && lf->snap->tick == tick && !lf->snap->skel->live) { /* the newest: shared */
        atomic_fetch_add(&lf->snap->refs, 1);
        *out = lf->snap;
    } else {
        h5l_reader_rdlock(lf->reader);
        uint64_t version = hfs_skel_version(lf->reader, h5l_reader_schema(lf->reader), tick);
        h5l_reader_unlock(lf->reader);
        if (lf->skel && lf->skel->version == version && !lf->skel->live) k = hfs_skel_ref(lf->skel);
    }
    if (rc || *out || k) {
        if (k && !(*out = snap_alloc_locked(lf, tick, closed, k)))
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", lf->path);
        if (*out && k) atomic_fetch_add(&lf->st_snapshots, 1);
        hfs_skel_unref(k);
        lf->last_use = now_s();
        pthread_mutex_unlock(&lf->mu);
        return rc;
    }
    pthread_mutex_unlock(&lf->mu);
    rc = hfs_skel_build(lf->reader, tick, &k, err);
    if (!rc) note_fallback(lf, k);
    pthread_mutex_lock(&lf->mu);
    if (!rc) {
        for (size_t i = 0; i < k->nvars; i++) k->vars[i].cds = file_cds_locked(lf, k->vars[i].objid);
        atomic_fetch_add(&lf->st_skeletons, 1);
        if (!(*out = snap_alloc_locked(lf, tick, closed, k)))
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", lf->path);
        else
            atomic_fetch_add(&lf->st_snapshots, 1);
        hfs_skel_unref(k);
    }
    lf->last_use = now_s();
    pthread_mutex_unlock(&lf->mu);
    return rc;
}

/* Build the newest tick of lf (the builder thread; no lock of lf held while
 * libhdf5 runs, so lookups of lf return its older snapshot meanwhile and
 * reads of any snapshot go on) and adopt the skeleton. */
static void build_one(hfs_lfile_t *lf)
{
    uint64_t tick = h5l_reader_ntick(lf->reader);
    int closed = h5l_reader_closed(lf->reader);
    h5l_reader_rdlock(lf->reader);
    uint64_t version = hfs_skel_version(lf->reader, h5l_reader_schema(lf->reader), tick);
    h5l_reader_unlock(lf->reader);
    pthread_mutex_lock(&lf->mu);
    /* (a closed file's last tick is served from a full build only) */
    int need = !lf->skel || lf->skel->version != version || (closed && lf->skel->live);
    int stale = !lf->skel || lf->skel->version != version;
    pthread_mutex_unlock(&lf->mu);
    hfs_skel_t *k = NULL;
    h5l_err_t e = {0};
    int rc = H5L_OK;
    if (need && closed && stale && lf->live) {
        /* The last tick, shown at once from the live skeleton patched to it
         * (milliseconds; the full build below takes half a second for
         * 10,000 variables, and the writer's last write would be seen that
         * late): served as a live snapshot of the tick until the full
         * build lands. Not patchable: the full build alone. */
        uint64_t patches = hfs_skel_live_patches(lf->live);
        h5l_err_t pe = {0};
        if (hfs_skel_patch_live(lf->reader, tick, &lf->live, &k, &pe) == H5L_OK &&
            hfs_skel_live_patches(lf->live) > patches) {
            atomic_fetch_add(&st_patched, 1);
            atomic_fetch_add(&st_builds, 1);
            atomic_fetch_add(&st_build_ns, k->build_ns);
            pthread_mutex_lock(&lf->mu);
            for (size_t i = 0; i < k->nvars; i++) k->vars[i].cds = file_cds_locked(lf, k->vars[i].objid);
            atomic_fetch_add(&lf->st_skeletons, 1);
            hfs_skel_unref(lf->skel);
            lf->skel = k;
            int had = lf->snap != NULL;
            if (new_snap_locked(lf, tick, 0, &pe) == H5L_OK && had) lf->announce = 1;
            pthread_mutex_unlock(&lf->mu);
            if (g_kick) g_kick();
        } else if (k) {
            hfs_skel_unref(k);
        }
        if (!lf->live) atomic_fetch_sub(&n_live, 1); /* (a failed patch dropped it) */
        k = NULL;
    }
    if (need && closed) { /* the last tick: a full build (the same bytes as any build of it), nothing kept */
        if (lf->live) {
            hfs_skel_live_free(lf->live);
            lf->live = NULL;
            atomic_fetch_sub(&n_live, 1);
        }
        rc = hfs_skel_build(lf->reader, tick, &k, &e);
    } else if (need) {
        int had = lf->live != NULL;
        uint64_t patches = hfs_skel_live_patches(lf->live);
        if (had || atomic_fetch_add(&n_live, 1) < LIVE_MAX) {
            rc = hfs_skel_build_live(lf->reader, tick, &lf->live, &k, &e);
            if (!lf->live)
                atomic_fetch_sub(&n_live, 1);
            else if (had && hfs_skel_live_patches(lf->live) > patches)
                atomic_fetch_add(&st_patched, 1);
        } else {
            atomic_fetch_sub(&n_live, 1);
            rc = hfs_skel_build(lf->reader, tick, &k, &e);
        }
    }
    if (need) {
        atomic_fetch_add(rc ? &st_build_fail : &st_builds, 1);
        if (!rc) {
            note_fallback(lf, k);
            for (size_t i = 0; i < k->nbts; i++) {
                atomic_fetch_add(&st_own_idx, 1);
                atomic_fetch_add(&st_own_chunks, k->bts[i].n);
            }
            atomic_fetch_add(&st_build_ns, k->build_ns);
            uint64_t m = atomic_load(&st_build_max_ns);
            while (k->build_ns > m && !atomic_compare_exchange_weak(&st_build_max_ns, &m, k->build_ns)) {}
        }
    }
    int log = 0;
    pthread_mutex_lock(&lf->mu);
    if (rc) {
        /* with nothing built the lookup fails and reports the error
         * (hfs_lfile_report, once per file version); with an older tick
         * served nobody would: said here, once per skeleton version */
        log = lf->snap && !(lf->bfailed && lf->bfail_version == version);
        lf->bfailed = 1;
        lf->bfail_version = version;
        lf->berr = e;
    } else {
        if (k) {
            for (size_t i = 0; i < k->nvars; i++) k->vars[i].cds = file_cds_locked(lf, k->vars[i].objid);
            atomic_fetch_add(&lf->st_skeletons, 1);
            hfs_skel_unref(lf->skel);
            lf->skel = k;
            lf->bfailed = 0;
        }
        if (!lf->snap || lf->snap->tick < tick || lf->snap->closed != closed) {
            int had = lf->snap != NULL;
            if (new_snap_locked(lf, tick, closed, &e) == H5L_OK && had) lf->announce = 1;
        }
    }
    int wake = lf->announce || atomic_load(&lf->changed);
    lf->building = 0;
    pthread_cond_broadcast(&lf->built);
    pthread_mutex_unlock(&lf->mu);
    pthread_mutex_lock(&bq_mu);
    int stopping = bq_stop; /* a cancelled build is no news */
    pthread_mutex_unlock(&bq_mu);
    /* the ticker sends the invalidation now, not up to a tick later (not
     * from here: an invalidation can wait for a lookup that waits for
     * this thread) */
    if (wake && g_kick && !stopping) g_kick();
    if (log && !stopping) hfs_log("%s (the last tick built stays served; retried when the file changes)", e.msg);
}

static void *builder_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bq_mu);
    for (;;) {
        while (!bq_head && !bq_stop) pthread_cond_wait(&bq_cv, &bq_mu);
        if (bq_stop) break;
        hfs_lfile_t *lf = bq_head;
        bq_head = lf->bnext;
        if (!bq_head) bq_tail = NULL;
        bq_current = lf;
        pthread_mutex_unlock(&bq_mu);
        build_one(lf);
        pthread_mutex_lock(&bq_mu);
        bq_current = NULL;
        pthread_mutex_unlock(&bq_mu);
        hfs_lfile_unref(lf);
        pthread_mutex_lock(&bq_mu);
    }
    /* stopping: whoever waits for a queued build gets an error */
    while (bq_head) {
        hfs_lfile_t *lf = bq_head;
        bq_head = lf->bnext;
        pthread_mutex_unlock(&bq_mu);
        pthread_mutex_lock(&lf->mu);
        lf->building = 0;
        pthread_cond_broadcast(&lf->built);
        pthread_mutex_unlock(&lf->mu);
        hfs_lfile_unref(lf);
        pthread_mutex_lock(&bq_mu);
    }
    bq_tail = NULL;
    pthread_mutex_unlock(&bq_mu);
    return NULL;
}

/* Assemble block g of the snapshot into dst (g->len bytes). */
static int assemble(hfs_snap_t *s, const hfs_region_t *g, uint8_t *dst, h5l_err_t *err)
{
    const hfs_svar_t *v = &s->skel->vars[g->var];
    uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
    hfs_skel_block_box(v, g->blk, st, ct);
    int full = 1;
    for (uint32_t d = 0; d < v->ndims; d++) full &= !v->chunked || ct[d] == v->block[d];
    if (full) /* the block's bytes are the box in row-major order */
        return h5l_reader_read(s->lf->reader, s->tick, v->objid, st, ct, dst, err);
    /* an edge chunk: the clipped box goes into the full-size chunk, the
     * padding HDF5 ignores is zero */
    size_t n = (size_t)h5l_box_nelem(v->ndims, ct) * v->esize;
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", s->lf->path);
    int rc = h5l_reader_read(s->lf->reader, s->tick, v->objid, st, ct, tmp, err);
    if (!rc) {
        memset(dst, 0, g->len);
        h5l_box_copy(v->ndims, v->esize, st, ct, st, ct, tmp, st, v->block, dst);
    }
    free(tmp);
    return rc;
}

typedef struct asm_ctx {
    hfs_snap_t *s;
    const hfs_region_t *g;
    h5l_err_t *err;
} asm_ctx_t;

/* Layout callback: one code path for chunks and slabs (assemble() knows
 * the difference: padding of edge chunks). */
static int layout_assemble(void *ctx, const hfs_ckey_t *key, void *buf, size_t len)
{
    (void)key;
    asm_ctx_t *a = ctx;
    if (len != a->g->len) return H5L_EINVAL;
    return assemble(a->s, a->g, buf, a->err);
}

static void layout_evicted(void *owner, const hfs_ckey_t *key, size_t len)
{
    (void)key;
    hfs_lfile_t *lf = owner;
    atomic_fetch_add(&lf->st_evictions, 1);
    atomic_fetch_sub(&lf->st_cached, (int64_t)len);
}

static const hfs_layout_t layout = {layout_assemble, layout_evicted};

/* The cache index of variable objid of lf (created on first use). Called
 * with lf->mu held, when a skeleton is adopted, so the read path finds the
 * index in the skeleton without taking any lock. */
static hfs_cds_t *file_cds_locked(hfs_lfile_t *lf, uint32_t objid)
{
    if (h5l_grow((void **)&lf->cds, &lf->ncds, (size_t)objid + 1, sizeof *lf->cds)) return NULL;
    if (!lf->cds[objid]) lf->cds[objid] = hfs_cds_new(g_cache, &layout, lf);
    return lf->cds[objid];
}

typedef struct gather {
    hfs_snap_t *s;
    const hfs_svar_t *v;
    const uint64_t *st, *ct; /* the block's box: start, in-shape count */
    uint8_t *out;
    h5l_err_t *err;
} gather_t;

/* One box (rs, rc) of the stored block (relative to it), whose row-major
 * order is one run of the output at element `first`. Inside the shape it
 * is read straight there; a box that reaches into an edge chunk's padding
 * gets zeros there and its in-shape part scattered in. */
static int gather_box(void *ctx, const uint64_t *rs, const uint64_t *rc, uint64_t first)
{
    gather_t *g = ctx;
    uint32_t nd = g->v->ndims;
    size_t es = g->v->esize;
    uint8_t *dst = g->out + first * es;
    uint64_t zero[H5L_MAX_DIMS] = {0}, xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS], as[H5L_MAX_DIMS];
    int any = h5l_box_intersect(nd, rs, rc, zero, g->ct, xs, xc);
    int whole = any;
    for (uint32_t d = 0; whole && d < nd; d++) whole = xs[d] == rs[d] && xc[d] == rc[d];
    if (whole) {
        for (uint32_t d = 0; d < nd; d++) as[d] = g->st[d] + rs[d];
        return h5l_reader_read(g->s->lf->reader, g->s->tick, g->v->objid, as, rc, dst, g->err);
    }
    memset(dst, 0, (size_t)h5l_box_nelem(nd, rc) * es);
    if (!any) return H5L_OK;
    size_t n = (size_t)h5l_box_nelem(nd, xc) * es;
    uint8_t *tmp = malloc(n ? n : 1);
    if (!tmp) return h5l_err_set(g->err, H5L_ENOMEM, "%s: out of memory", g->s->lf->path);
    for (uint32_t d = 0; d < nd; d++) as[d] = g->st[d] + xs[d];
    int rc2 = h5l_reader_read(g->s->lf->reader, g->s->tick, g->v->objid, as, xc, tmp, g->err);
    if (!rc2) {
        h5l_box_copy(nd, es, xs, xc, xs, xc, tmp, rs, rc, dst);
    }
    free(tmp);
    return rc2;
}

/* Bytes [r0, r1) of the block with box (st, ct), stored with shape sh (ct,
 * or the full chunk shape for an edge chunk, padded with zeros), read from
 * the log piece by piece straight into out: only the part asked for,
 * nothing assembled or cached. Records are applied in sequence order by
 * the reader, so this is right for overlapping records too (they only cost
 * their overlap in extra reads). */
static int gather_range(hfs_snap_t *s, const hfs_svar_t *v, const uint64_t *st, const uint64_t *ct, const uint64_t *sh,
                        uint64_t r0, uint64_t r1, uint8_t *out, h5l_err_t *err)
{
    size_t es = v->esize;
    uint64_t e0 = r0 / es, e1 = (r1 + es - 1) / es;
    gather_t g = {s, v, st, ct, out, err};
    if (r0 % es || r1 % es) { /* a reply that cuts an element: via scratch */
        g.out = hfs_tbuf(HFS_TBUF_SCRATCH, (size_t)(e1 - e0) * es);
        if (!g.out) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", s->lf->path);
    }
    int rc = h5l_box_linear(v->ndims, sh, e0, e1, gather_box, &g);
    if (!rc && g.out != out) memcpy(out, g.out + (r0 - e0 * es), (size_t)(r1 - r0));
    return rc;
}

/* Siblings. A chunk whose pieces lie thinly across the log (a z-plane
 * chunk of x-slabs: a 4-byte piece in every 1 KiB each rank wrote) reads
 * the log's segments under all of its pieces, as much as the whole slab,
 * and so does each of its siblings: a cold read of the variable read the
 * log once per chunk. So such a chunk is assembled with the chunks that
 * share its log: a *tile* of whole chunks — the chunk's own in the
 * dimensions before some t, a run of m chunks from it along t, every
 * chunk after t — assembled in one pass (the reader reads each log
 * segment once), cut into chunks (h5l_box_scatter) and put into the
 * cache, whose memory bound stays the bound: a tile is at most a quarter
 * of the cache (and 256 MiB). t is the first dimension at which one
 * chunk-row fits: a z-plane chunk of a [256,256,256] float variable gets
 * all 256 planes (64 MiB); of [512,512,512], 256 planes at a time, which
 * read the log twice in all. */
#define SIB_FACTOR 4 /* fill siblings when a chunk alone reads more than this many times its bytes */
#define SIB_MIN ((uint64_t)1 << 20) /* ... and more than this: below, a few segments, which the reader's
                                     * per-thread segment cache shares between neighbours anyway */
#define SIB_MAX ((uint64_t)256 << 20)

static uint64_t sib_budget(void)
{
    hfs_cache_stats_t cs;
    hfs_cache_get_stats(g_cache, &cs);
    uint64_t b = cs.limit / 4;
    return b < SIB_MAX ? b : SIB_MAX;
}

/* Fill the siblings of chunk cc (coordinates) of v in snapshot s: H5L_OK
 * (filled, or nothing to gain), or the reader's error. The chunks to cache
 * are reserved first and the tile is cut straight into their entries:
 * on this VM fresh pages cost more than the copy, and a chunk buffer of
 * our own between tile and cache would be 2 of the 3 passes over fresh
 * memory. A chunk not cached (there already, no data, no room) is cut into
 * a scratch chunk and dropped. */
static int fill_siblings(hfs_snap_t *s, const hfs_svar_t *v, const hfs_region_t *g, const uint64_t *cc, h5l_err_t *err)
{
    uint32_t nd = v->ndims;
    uint64_t S = g->len, g0[H5L_MAX_DIMS], gn[H5L_MAX_DIMS], st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
    uint64_t ng = h5l_box_tile(nd, v->nblk, S, cc, sib_budget(), g0, gn);
    if (ng <= 1 || !v->cds) return H5L_OK; /* the chunk alone, or no cache to fill */
    for (uint32_t d = 0; d < nd; d++) {
        st[d] = g0[d] * v->block[d];
        uint64_t e = (g0[d] + gn[d]) * v->block[d];
        ct[d] = (e < v->shape[d] ? e : v->shape[d]) - st[d];
    }
    h5l_reader_t *r = s->lf->reader;
    size_t es = v->esize;
    uint8_t *tile = malloc((size_t)(h5l_box_nelem(nd, ct) * es));
    uint8_t *scratch = malloc((size_t)S);
    h5l_box_dst_t *cells = malloc((size_t)ng * sizeof *cells);
    hfs_centry_t **ents = calloc((size_t)ng, sizeof *ents);
    int rc = tile && scratch && cells && ents ? H5L_OK : h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", s->lf->path);
    uint64_t gi[H5L_MAX_DIMS] = {0}, nres = 0;
    for (uint64_t i = 0; !rc && i < ng; i++) {
        hfs_ckey_t key;
        memset(&key, 0, sizeof key);
        key.ndims = nd;
        uint64_t cs[H5L_MAX_DIMS], cn[H5L_MAX_DIMS];
        int edge = 0;
        for (uint32_t d = 0; d < nd; d++) {
            key.coord[d] = g0[d] + gi[d];
            cs[d] = key.coord[d] * v->block[d];
            cn[d] = v->shape[d] - cs[d] < v->block[d] ? v->shape[d] - cs[d] : v->block[d];
            edge |= cn[d] < v->block[d];
        }
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
        cells[i] = (h5l_box_dst_t){scratch, 0};
        h5l_chunk_info_t ci;
        if ((rc = h5l_reader_chunk_info(r, s->tick, v->objid, key.coord, cs, cn, &ci, err))) break;
        if (!ci.nrec) continue; /* no data: not in the image */
        memcpy(key.ver, ci.ver, sizeof key.ver);
        key.extent = XXH3_64bits(cn, nd * sizeof cn[0]);
        if (!(ents[i] = hfs_cache_reserve(v->cds, &key, (size_t)S))) continue;
        cells[i].base = hfs_centry_buf(ents[i]);
        if (edge) memset(cells[i].base, 0, (size_t)S); /* an edge chunk's padding: zeros */
        nres++;
    }
    if (!rc && nres) rc = h5l_reader_read(r, s->tick, v->objid, st, ct, tile, err);
    if (!rc && nres) {
        h5l_box_scatter(nd, es, st, ct, tile, v->block, cells);
        atomic_fetch_add(&s->lf->st_assembled, ng * S);
    }
    for (uint64_t i = 0; ents && i < ng; i++)
        if (ents[i] && hfs_cache_publish(ents[i], rc) == 1) atomic_fetch_add(&s->lf->st_cached, (int64_t)S);
    free(tile);
    free(scratch);
    free(ents);
    free(cells);
    atomic_fetch_add(&s->lf->st_siblings, 1);
    return rc;
}

/* Serve [a, b) of block g from cache entry e (released here). */
static int serve_hit(hfs_lfile_t *lf, hfs_centry_t *e, const hfs_region_t *g, uint64_t a, uint64_t b, uint8_t *out)
{
    memcpy(out, (const uint8_t *)hfs_centry_data(e) + (a - g->addr), b - a);
    hfs_cache_release(e);
    hfs_cache_count_hit(g_cache, b - a);
    atomic_fetch_add(&lf->st_hits, 1);
    return H5L_OK;
}

/* Serve [a, b) of block g into out (which is at file offset a). */
static int read_block(hfs_snap_t *s, const hfs_region_t *g, uint64_t a, uint64_t b, uint8_t *out, h5l_err_t *err)
{
    hfs_lfile_t *lf = s->lf;
    const hfs_svar_t *v = &s->skel->vars[g->var];
    hfs_ckey_t key;
    memset(&key, 0, sizeof key);
    uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
    hfs_skel_block_box(v, g->blk, st, ct);
    int full = 1;
    key.ndims = v->ndims;
    for (uint32_t d = 0; d < v->ndims; d++) {
        key.coord[d] = st[d] / v->block[d];
        full &= !v->chunked || ct[d] == v->block[d];
    }
    h5l_chunk_info_t ci;
    int rc = h5l_reader_chunk_info(lf->reader, s->tick, v->objid, key.coord, st, ct, &ci, err);
    if (rc) return rc;
    if (ci.direct && full) { /* 1. skip path */
        rc = h5l_reader_pread(lf->reader, ci.direct_tick, ci.direct_rank, out, b - a, ci.direct_off + (a - g->addr),
                              err);
        if (rc) return rc;
        atomic_fetch_add(&lf->st_skipped, b - a);
        hfs_cache_count_skip(g_cache, b - a);
        return H5L_OK;
    }
    memcpy(key.ver, ci.ver, sizeof key.ver);
    key.extent = XXH3_64bits(ct, v->ndims * sizeof ct[0]);
    hfs_cds_t *d = v->cds; /* NULL only if out of memory: served uncached */
    /* A block a live file's newest tick wrote will most likely change again
     * next tick: a cached copy would serve this snapshot only (whose bytes
     * the mount's page cache keeps) and be superseded, so it is gathered
     * too, whatever its records. Gathering a range reads the records'
     * bytes in that range only, so requests that cover the block once read
     * what assembling it once would; what they lose is the cache's sharing
     * across snapshots, which such a block does not have. */
    int fresh = !s->closed && ci.ver[0] == s->tick;
    /* An edge chunk that is mostly padding is gathered too: the padding
     * costs a memset of the reply, while a cached copy would be mostly
     * zeros (a growing variable's last chunk, 1 MiB per variable for a
     * few rows). */
    int padded = !full && 2 * h5l_box_nelem(v->ndims, ct) * v->esize <= g->len;
    if (v->chunked && d && g->len <= HFS_ASSEMBLE_MAX) {
        /* a chunk thinly spread over the log: with its siblings, once */
        hfs_centry_t *e = hfs_cache_peek(d, &key);
        uint64_t cost = 0;
        if (!e && !h5l_reader_read_cost(lf->reader, s->tick, v->objid, st, ct, &cost, err) &&
            cost > SIB_FACTOR * g->len && cost > SIB_MIN) {
            if ((rc = fill_siblings(s, v, g, key.coord, err))) return rc;
            e = hfs_cache_peek(d, &key);
        }
        if (e) return serve_hit(lf, e, g, a, b, out);
    }
    if (ci.disjoint || fresh || padded) {
        /* 1b. gather path: records that never overwrite each other in this
         * block make reading any part of it read each log byte once, so
         * assembling the whole block to cache it would only cost (memory,
         * fresh pages, the bytes of the block not asked for) and a
         * sequential reader would never hit it: the mount's page cache
         * keeps what was served. Serve a cached copy if there is one.
         * Edge chunks too (their padding is zeros written into the reply):
         * a live file's newest rows are in an edge chunk whose version
         * changes every tick, so caching it would assemble the whole
         * chunk per tick for a reader that wants one row. */
        hfs_centry_t *e = d ? hfs_cache_peek(d, &key) : NULL;
        if (e) return serve_hit(lf, e, g, a, b, out);
        rc = gather_range(s, v, st, ct, full ? ct : v->block, a - g->addr, b - g->addr, out, err);
        if (rc) return rc;
        atomic_fetch_add(&lf->st_skipped, b - a);
        atomic_fetch_add(&lf->st_gathered, b - a);
        hfs_cache_count_skip(g_cache, b - a);
        return H5L_OK;
    }
    if (g->len > HFS_ASSEMBLE_MAX) {
        /* a block too big to assemble whole (a chunk of a GiB is legal
         * HDF5): only the bytes asked for, whatever the records */
        rc = gather_range(s, v, st, ct, v->chunked ? v->block : ct, a - g->addr, b - g->addr, out, err);
        if (rc) return rc;
        atomic_fetch_add(&lf->st_skipped, b - a);
        atomic_fetch_add(&lf->st_gathered, b - a);
        hfs_cache_count_skip(g_cache, b - a);
        return H5L_OK;
    }
    asm_ctx_t ac = {s, g, err};
    int hit = 0;
    hfs_centry_t *e = d ? hfs_cache_get(d, &key, g->len, &ac, &rc, &hit) : NULL;
    if (e) { /* 2. cache */
        memcpy(out, (const uint8_t *)hfs_centry_data(e) + (a - g->addr), b - a);
        hfs_cache_release(e);
        if (hit) hfs_cache_count_hit(g_cache, b - a);
        atomic_fetch_add(hit ? &lf->st_hits : &lf->st_misses, 1);
        if (!hit) {
            atomic_fetch_add(&lf->st_assembled, g->len);
            atomic_fetch_add(&lf->st_cached, (int64_t)g->len);
        }
        return H5L_OK;
    }
    if (rc) return rc;
    atomic_fetch_add(&lf->st_misses, 1); /* 3. not cacheable */
    atomic_fetch_add(&lf->st_assembled, g->len);
    if (a == g->addr && b == g->addr + g->len) return assemble(s, g, out, err);
    uint8_t *tmp = hfs_tbuf(HFS_TBUF_SCRATCH, g->len);
    if (!tmp) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", lf->path);
    rc = assemble(s, g, tmp, err);
    if (!rc) memcpy(out, tmp + (a - g->addr), b - a);
    return rc;
}

long hfs_snap_read(hfs_snap_t *s, uint64_t off, size_t len, void *buf, h5l_err_t *err)
{
    const hfs_skel_t *k = s->skel;
    if (off >= k->eof) return 0;
    if (len > k->eof - off) len = (size_t)(k->eof - off);
    atomic_fetch_add(&s->lf->st_reads, 1);
    uint8_t *out = buf;
    uint64_t pos = off; /* bytes before pos are served */
    int rc;
    for (size_t i = hfs_skel_find(k, off); i < k->nregions; i++) {
        const hfs_region_t *g = &k->regions[i];
        if (g->addr >= off + len) break;
        uint64_t a = g->addr > off ? g->addr : off;
        uint64_t b = g->addr + g->len < off + len ? g->addr + g->len : off + len;
        /* metadata (or holes) only between raw regions: no zeroing of
         * bytes the region is about to overwrite */
        if (a > pos && (rc = hfs_skel_meta_read(k, pos, (size_t)(a - pos), out + (pos - off))))
            return h5l_err_set(err, rc, "%s: out of memory", s->lf->path);
        for (uint64_t x = a; x < b;) { /* a run region: chunk by chunk */
            hfs_region_t one = g->bt ? hfs_skel_run_block(k, g, x) : *g;
            uint64_t y = one.addr + one.len < b ? one.addr + one.len : b;
            if ((rc = read_block(s, &one, x, y, out + (x - off), err))) return rc;
            x = y;
        }
        pos = b;
    }
    if (pos < off + len && (rc = hfs_skel_meta_read(k, pos, (size_t)(off + len - pos), out + (pos - off))))
        return h5l_err_set(err, rc, "%s: out of memory", s->lf->path);
    return (long)len;
}

char *hfs_lfile_stats_text(void)
{
    h5l_buf_t b = {0};
    char line[1024];
    hfs_cache_stats_t cs;
    hfs_cache_get_stats(g_cache, &cs);
    uint64_t lookups = cs.hits + cs.waits + cs.misses;
    int n = snprintf(line, sizeof line,
                     "cache: limit %llu bytes, in use %llu (peak %llu), %llu chunks\n"
                     "cache: hits %llu, waits %llu, misses %llu (hit ratio %.3f), not cached %llu, evictions %llu, "
                     "superseded %llu\n"
                     "cache: bytes assembled %llu, served from cache %llu, skipped past the cache %llu\n",
                     (unsigned long long)cs.limit, (unsigned long long)cs.mem, (unsigned long long)cs.peak,
                     (unsigned long long)cs.entries, (unsigned long long)cs.hits, (unsigned long long)cs.waits,
                     (unsigned long long)cs.misses, lookups ? (double)(cs.hits + cs.waits) / (double)lookups : 0.0,
                     (unsigned long long)cs.uncached, (unsigned long long)cs.evictions,
                     (unsigned long long)cs.superseded, (unsigned long long)cs.bytes_assembled,
                     (unsigned long long)cs.bytes_hit, (unsigned long long)cs.bytes_skipped);
    h5l_buf_put(&b, line, (size_t)n);
    n = snprintf(line, sizeof line,
                 "skeletons: built %llu (failed %llu, patched in place %llu, live skeletons kept %d of %d), %.3f s "
                 "building, longest %.3f s; chunk indexes written by the daemon %llu (%llu chunks), grown in place "
                 "%llu, given up for libhdf5's %llu\n",
                 (unsigned long long)atomic_load(&st_builds), (unsigned long long)atomic_load(&st_build_fail),
                 (unsigned long long)atomic_load(&st_patched), atomic_load(&n_live), LIVE_MAX,
                 (double)atomic_load(&st_build_ns) * 1e-9, (double)atomic_load(&st_build_max_ns) * 1e-9,
                 (unsigned long long)atomic_load(&st_own_idx), (unsigned long long)atomic_load(&st_own_chunks),
                 (unsigned long long)hfs_skel_own_appends(), (unsigned long long)atomic_load(&st_fallbacks));
    h5l_buf_put(&b, line, (size_t)n);
    uint64_t nheld, held_bytes;
    hfs_skel_held(&nheld, &held_bytes);
    n = snprintf(line, sizeof line, "skeletons held: %llu (images %llu bytes)\n", (unsigned long long)nheld,
                 (unsigned long long)held_bytes);
    h5l_buf_put(&b, line, (size_t)n);
    n = snprintf(line, sizeof line, "ticker: rounds %llu on the tick, %llu woken by a change; journals watched %zu (watches refused %zu)\n",
                 (unsigned long long)atomic_load(&st_rounds), (unsigned long long)atomic_load(&st_woken),
                 hfs_watch_count(), hfs_watch_failed());
    h5l_buf_put(&b, line, (size_t)n);
    pthread_mutex_lock(&reg_mu);
    for (hfs_lfile_t *lf = reg_head; lf; lf = lf->next) {
        uint64_t th, tl, te;
        h5l_reader_tables(lf->reader, &th, &tl, &te);
        n = snprintf(line, sizeof line,
                     "file %s: ticks %llu, snapshots %llu, skeletons %llu, records %llu, reads %llu, hits %llu, "
                     "misses %llu, assembled %llu B, skipped %llu B (gathered %llu B), cached %lld B, evictions %llu, "
                     "sibling tiles %llu, "
                     "log dropped %llu B, tables decoded %llu (held %llu B, evicted %llu), index %llu B%s%s\n",
                     lf->path, (unsigned long long)h5l_reader_ntick(lf->reader), (unsigned long long)lf->st_snapshots,
                     (unsigned long long)lf->st_skeletons, (unsigned long long)h5l_reader_nrecords(lf->reader),
                     (unsigned long long)lf->st_reads, (unsigned long long)lf->st_hits,
                     (unsigned long long)lf->st_misses, (unsigned long long)lf->st_assembled,
                     (unsigned long long)lf->st_skipped, (unsigned long long)lf->st_gathered, (long long)lf->st_cached,
                     (unsigned long long)lf->st_evictions, (unsigned long long)lf->st_siblings,
                     (unsigned long long)h5l_reader_dropped(lf->reader),
                     (unsigned long long)tl, (unsigned long long)th, (unsigned long long)te,
                     (unsigned long long)h5l_reader_index_bytes(lf->reader), lf->failed ? " (FAILED)" : "", lf->damaged ? " (DAMAGED: later ticks not served)" : "");
        h5l_buf_put(&b, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
    }
    pthread_mutex_unlock(&reg_mu);
    h5l_buf_u8(&b, 0);
    if (b.oom) {
        h5l_buf_free(&b);
        return NULL;
    }
    return (char *)b.p;
}

/* Break the cycle lf->snap <-> snap->lf when nothing else holds either:
 * then the file's references are the registry's and its snapshot's. Under
 * reg_mu, so no lookup can take a new reference meanwhile. */
static int release_if_idle(hfs_lfile_t *lf)
{
    pthread_mutex_lock(&lf->mu);
    hfs_snap_t *s = lf->snap;
    int idle = s ? atomic_load(&s->refs) == 1 && atomic_load(&lf->refs) == 2 : atomic_load(&lf->refs) == 1;
    if (idle) lf->snap = NULL;
    pthread_mutex_unlock(&lf->mu);
    hfs_snap_unref(s == NULL || !idle ? NULL : s); /* drops the snapshot's reference to lf */
    return idle;
}

typedef struct note {
    uint64_t parent;
    char *name;
} note_t;
typedef struct notes {
    note_t *v;
    size_t n, cap;
} notes_t;

/* Remember lf's name (lf->mu held) to be invalidated. */
static void note_name_locked(notes_t *ns, hfs_lfile_t *lf)
{
    if (!lf->name) return;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        note_t *v = realloc(ns->v, cap * sizeof *v);
        if (!v) return;
        ns->v = v;
        ns->cap = cap;
    }
    ns->v[ns->n++] = (note_t){lf->parent, strdup(lf->name)};
}

/* The registry lock is held only to walk the list: refreshing a file
 * (which waits for its reader's write lock, held for reading by a build of
 * that file) happens outside it, so a slow build never holds up
 * hfs_lfile_get of other files. A file being built is not refreshed this
 * round (its build holds the reader's read lock; waiting would delay the
 * other files' ticks): it is marked changed, and refreshed in the round
 * its build's landing wakes. all: every live file (the tick's round; also
 * drops idle files); else only those marked changed. */
static void tick_files(hfs_newtick_fn fn, void *ctx, double idle_s, int all)
{
    notes_t ns = {0};
    hfs_lfile_t **live = NULL;
    size_t nlive = 0, cap = 0;
    double now = now_s();
    atomic_fetch_add(all ? &st_rounds : &st_woken, 1);
    pthread_mutex_lock(&reg_mu);
    hfs_lfile_t **pp = &reg_head;
    while (*pp) {
        hfs_lfile_t *lf = *pp;
        /* drop files unused for a while that nobody holds but the registry
         * and the file's own newest snapshot (which points back at it) */
        if (all && now - lf->last_use > idle_s && release_if_idle(lf)) {
            *pp = lf->next;
            hfs_lfile_unref(lf);
            continue;
        }
        pp = &lf->next;
        pthread_mutex_lock(&lf->mu);
        if (lf->announce) { /* a build landed: lookups get the new tick */
            lf->announce = 0;
            note_name_locked(&ns, lf);
        }
        pthread_mutex_unlock(&lf->mu);
        if (lf->closed_seen) continue;
        if (!atomic_exchange(&lf->changed, 0) && !all) continue;
        if (nlive == cap) {
            size_t c2 = cap ? cap * 2 : 16;
            hfs_lfile_t **v = realloc(live, c2 * sizeof *v);
            if (!v) { /* refreshed in a later round */
                atomic_store(&lf->changed, 1);
                continue;
            }
            live = v;
            cap = c2;
        }
        atomic_fetch_add(&lf->refs, 1);
        live[nlive++] = lf;
    }
    pthread_mutex_unlock(&reg_mu);
    for (size_t i = 0; i < nlive; i++) {
        hfs_lfile_t *lf = live[i];
        pthread_mutex_lock(&lf->mu);
        int busy = lf->building;
        /* refreshed when its build lands: set under mu, where the builder
         * reads it to decide whether to wake the ticker */
        if (busy) atomic_store(&lf->changed, 1);
        pthread_mutex_unlock(&lf->mu);
        if (busy) continue;
        int nnew = 0;
        h5l_err_t e = {0};
        int rc = h5l_reader_refresh(lf->reader, &nnew, &e);
        pthread_mutex_lock(&lf->mu);
        if (h5l_reader_closed(lf->reader) && !lf->closed_seen) { /* the name's snapshot changes: closed */
            lf->closed_seen = 1;
            hfs_watch_rm(atomic_exchange(&lf->wd, -1)); /* no more ticks */
            if (!nnew) nnew = -1;
        }
        if (rc && rc != H5L_EIO && rc != H5L_ENOMEM && !lf->damaged) {
            /* damage: the ticks before it stay served (reader), said once */
            lf->damaged = 1;
            h5l_reader_damage(lf->reader, &lf->damaged_tick, &lf->derr);
            report_damage(lf);
        }
        if (nnew) {
            note_name_locked(&ns, lf);
            /* someone reads this file: build its new tick now rather than
             * at the next lookup, which then finds it ready */
            if (lf->snap && now - lf->last_use < idle_s) enqueue_build_locked(lf);
        }
        pthread_mutex_unlock(&lf->mu);
    }
    for (size_t i = 0; i < nlive; i++) hfs_lfile_unref(live[i]);
    free(live);
    for (size_t i = 0; i < ns.n; i++) {
        if (ns.v[i].name && !dir_waiting(ns.v[i].parent)) fn(ctx, ns.v[i].parent, ns.v[i].name);
        free(ns.v[i].name);
    }
    free(ns.v);
}

void hfs_lfile_tick_all(hfs_newtick_fn fn, void *ctx, double idle_s) { tick_files(fn, ctx, idle_s, 1); }

void hfs_lfile_tick_changed(hfs_newtick_fn fn, void *ctx, double idle_s) { tick_files(fn, ctx, idle_s, 0); }

void hfs_lfile_watch_events(void)
{
    int wds[256], lost = 0;
    size_t n = hfs_watch_drain(wds, sizeof wds / sizeof wds[0], &lost);
    if (!n && !lost) return;
    pthread_mutex_lock(&reg_mu);
    for (hfs_lfile_t *lf = reg_head; lf; lf = lf->next) {
        int wd = atomic_load(&lf->wd);
        if (wd >= 0 && lost) /* events not named (too many, or the queue overflowed): every watched file */
            atomic_store(&lf->changed, 1);
        for (size_t i = 0; wd >= 0 && i < n; i++)
            if (wds[i] == wd) atomic_store(&lf->changed, 1);
    }
    pthread_mutex_unlock(&reg_mu);
}

/* Stop the builder thread (queued files are released, their waiters get
 * an error); a build in progress finishes first. */
static void builder_stop(void)
{
    hfs_skel_cancel(1); /* a long build in progress gives up at its next variable */
    pthread_mutex_lock(&bq_mu);
    bq_stop = 1;
    int started = bq_started;
    pthread_cond_broadcast(&bq_cv);
    pthread_mutex_unlock(&bq_mu);
    if (started) pthread_join(bq_thread, NULL);
}

void hfs_lfile_shutdown(void)
{
    builder_stop();
    pthread_mutex_lock(&reg_mu);
    while (reg_head) {
        hfs_lfile_t *lf = reg_head;
        reg_head = lf->next;
        pthread_mutex_lock(&lf->mu); /* break the lf <-> newest snapshot cycle */
        hfs_snap_t *s = lf->snap;
        lf->snap = NULL;
        pthread_mutex_unlock(&lf->mu);
        hfs_snap_unref(s);
        hfs_lfile_unref(lf);
    }
    pthread_mutex_unlock(&reg_mu);
    hfs_cache_free(g_cache);
    g_cache = NULL;
    hfs_badlog_clear();
}
