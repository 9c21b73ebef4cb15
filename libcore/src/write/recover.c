/* recover.c — h5l_recover (h5log/recover.h): a log-layout file whose
 * writer died, made into a closed, finalized file at its last complete
 * tick, readable by plain libhdf5 clients (h5py, netCDF, ncdump).
 *
 * A live file (its writer never reached h5l_close: killed, crashed, its
 * node lost) has its journal in the sidecar FILE.h5lj and HDF5 metadata
 * that rank 0's libhdf5 may never have flushed. That metadata is never
 * trusted: a new HDF5 file is written over the old one's bytes
 * (h5l_anchor_recreate), keeping the log where it is as the storage of one
 * byte dataset /_h5log/log, so every offset the journal states stays
 * valid. The journal up to its last complete frame, plus a CLOSE frame, is
 * embedded; the variables' data of the last complete tick is laid into
 * canonical datasets (as h5l_close does, docs/format.md 1); the user block
 * is marked closed and finalized; the sidecar is removed — in this order,
 * each step fsynced before the next, so an interrupted recovery leaves a
 * live file that the project's readers still read and recovery can run
 * on again.
 *
 * A closed file written with no_finalize is finalized in place. A closed,
 * finalized file is left alone. A file whose journal is damaged (not just
 * torn at its end) is refused: its ticks before the damage can be copied
 * with h5logreplay --tick. A file whose writer is still running (it holds
 * the file's lock, or its lock file FILE.h5lock) is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <hdf5.h>

#include "anchor.h"
#include "h5log/codec.h"
#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/recover.h"
#include "wlock.h"

typedef struct {
    h5l_recover_say_fn fn;
    void *ctx;
} say_t;

/* Format one line and hand it to the caller (dropped if out of memory:
 * the return code still tells the outcome). */
__attribute__((format(printf, 3, 4))) static void say(const say_t *s, int level, const char *fmt, ...)
{
    if (!s->fn) return;
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    int n = vasprintf(&m, fmt, ap);
    va_end(ap);
    if (n >= 0) s->fn(s->ctx, level, m);
    free(m);
}

/* Read the whole of [0, n) of path into a new buffer. */
static int slurp(const say_t *s, const char *path, uint64_t n, h5l_buf_t *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say(s, H5L_RECOVER_ERR, "%s: %s", path, strerror(errno));
        return H5L_EIO;
    }
    int rc = H5L_OK;
    if (h5l_buf_reserve(b, n + 64)) {
        say(s, H5L_RECOVER_ERR, "out of memory (%llu bytes of journal)", (unsigned long long)n);
        rc = H5L_ENOMEM;
    } else {
        h5l_err_t e = {0};
        if ((rc = h5l_fd_read_all(fd, b->p, (size_t)n, 0, path, &e)) != H5L_OK)
            say(s, H5L_RECOVER_ERR, "reading its journal: %s", e.msg);
        else
            b->len = n;
    }
    close(fd);
    return rc;
}

/* The writer's libhdf5 holds an exclusive lock on the file while it is
 * open: a file still being written is not a crashed one. (Its lock file
 * FILE.h5lock, which works where flock does not, is looked at by
 * h5l_recover.) */
static int check_unlocked(const say_t *s, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        say(s, H5L_RECOVER_ERR, "%s: %s", path, strerror(errno));
        return H5L_EIO;
    }
    int rc = H5L_OK;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            say(s, H5L_RECOVER_ERR, "%s: a process holds its lock (its writer is still running?): not recovered",
                path);
            rc = H5L_EBUSY;
        } /* a file system without flock: nothing to learn */
    } else {
        flock(fd, LOCK_UN);
    }
    close(fd);
    return rc;
}

/* A closed file: finalize it if it is not. */
static int finalize_closed(const say_t *s, const char *path, h5l_reader_t *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t b[H5L_UB_LEN];
    h5l_ub_t ub;
    h5l_err_t e = {0};
    int bad =
        fd < 0 || h5l_fd_read_all(fd, b, sizeof b, 0, path, &e) != H5L_OK || h5l_ub_decode(b, &ub, path, &e) != H5L_OK;
    if (fd >= 0) close(fd);
    if (bad) {
        say(s, H5L_RECOVER_ERR, "%s: cannot read its user block%s%s", path, e.msg[0] ? ": " : "", e.msg);
        return e.code ? e.code : H5L_EIO;
    }
    if (ub.flags & H5L_UB_FINALIZED) {
        say(s, H5L_RECOVER_INFO, "%s: closed and finalized already (ticks 1..%llu): nothing to do", path,
            (unsigned long long)h5l_reader_ntick(r));
        return H5L_OK;
    }
    uint64_t tick = h5l_reader_ntick(r);
    h5l_anchor_t *a;
    int rc = check_unlocked(s, path);
    if (!rc && ((rc = h5l_anchor_open(path, ub.id, &a, &e)) ||
                (rc = h5l_anchor_finalize_closed(a, tick, ub.jr_off, ub.jr_len, 1, &e)))) {
        if (e.msg[0]) say(s, H5L_RECOVER_ERR, "%s", e.msg);
        return rc;
    }
    if (rc) return rc;
    say(s, H5L_RECOVER_INFO, "%s: finalized at tick %llu", path, (unsigned long long)tick);
    return H5L_OK;
}

static int recover(const say_t *s, const char *path)
{
    h5l_err_t e = {0};
    h5l_reader_t *r;
    /* every frame and record table checked before the file is rewritten:
     * index checkpoints would let damage before them go unseen */
    int rc = h5l_reader_open_flags(path, H5L_READER_FULL, &r, &e);
    if (rc) {
        say(s, H5L_RECOVER_ERR, "%s", e.msg);
        return rc;
    }
    uint64_t bad = 0;
    h5l_err_t de = {0};
    if (h5l_reader_damage(r, &bad, &de)) {
        say(s, H5L_RECOVER_ERR, "%s", de.msg);
        say(s, H5L_RECOVER_ERR,
            "%s: damaged at tick %llu: not recovered (ticks 1..%llu are intact: "
            "h5logreplay --tick %llu %s OUT copies the newest of them)",
            path, (unsigned long long)bad, (unsigned long long)h5l_reader_ntick(r),
            (unsigned long long)h5l_reader_ntick(r), path);
        h5l_reader_close(r);
        return H5L_ECORRUPT;
    }
    if (!h5l_reader_live(r)) {
        rc = finalize_closed(s, path, r);
        h5l_reader_close(r);
        return rc;
    }
    uint64_t tick = h5l_reader_ntick(r), jpos = h5l_reader_journal_pos(r);
    int has_close = h5l_reader_closed(r);
    uint8_t id[16];
    memcpy(id, h5l_reader_id(r), 16);
    /* the log's place: from the first byte a tick points at to the end */
    uint64_t from = UINT64_MAX;
    for (uint64_t t = 1; t <= tick; t++) {
        h5l_tick_info_t ti;
        if (h5l_reader_tick_info(r, t, &ti)) continue;
        if (ti.data_size && ti.data_off < from) from = ti.data_off;
        if (ti.table_size && ti.table_off < from) from = ti.table_off;
    }
    char side[4096];
    snprintf(side, sizeof side, "%s" H5L_SIDECAR_SUFFIX, path);
    h5l_buf_t j = {0};
    struct stat st;
    if ((rc = check_unlocked(s, path)) == H5L_OK) {
        if (stat(path, &st) != 0) {
            say(s, H5L_RECOVER_ERR, "%s: %s", path, strerror(errno));
            rc = H5L_EIO;
        } else {
            rc = slurp(s, side, jpos, &j);
        }
    }
    if (!rc && !has_close) {
        uint8_t pl[16];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        h5l_put_le64(pl, tick);
        h5l_put_le64(pl + 8, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
        h5l_frame_encode(&j, H5L_REC_CLOSE, pl, sizeof pl, h5l_seed(id));
        if (j.oom) {
            say(s, H5L_RECOVER_ERR, "out of memory (%llu bytes of journal)", (unsigned long long)jpos);
            rc = H5L_ENOMEM;
        }
    }
    /* the schema for the anchors' extents is the reader's (used only
     * without finalizing; finalizing reads its own) */
    h5l_anchor_t *a = NULL;
    if (!rc && (rc = h5l_anchor_recreate(path, id, from == UINT64_MAX ? 0 : from,
                                         from == UINT64_MAX ? 0 : (uint64_t)st.st_size, &a, &e)))
        say(s, H5L_RECOVER_ERR, "%s", e.msg);
    int closed = 0;
    if (!rc) {
        h5l_reader_rdlock(r);
        int final = 1;
        int c = h5l_anchor_finish(a, h5l_reader_schema(r), tick, j.p, j.len, 1, NULL, &final, &e);
        h5l_reader_unlock(r);
        closed = !c;
        if (!c && !final) {
            say(s, H5L_RECOVER_ERR, "%s", e.msg);
            say(s, H5L_RECOVER_ERR,
                "%s: closed at tick %llu but not finalized: run h5logrecover again once there is room", path,
                (unsigned long long)tick);
            rc = e.code ? e.code : H5L_EIO;
        } else if (c) {
            say(s, H5L_RECOVER_ERR, "%s", e.msg);
            say(s, H5L_RECOVER_ERR,
                "%s: not recovered; it stays readable from its journal %s by h5logfs, h5logreplay and h5logdump",
                path, side);
            rc = c;
        }
    }
    if (closed && unlink(side) != 0) {
        say(s, H5L_RECOVER_ERR, "%s: the file is closed, but its journal sidecar cannot be removed: %s", side,
            strerror(errno));
        rc = H5L_EIO;
    }
    if (!rc) say(s, H5L_RECOVER_INFO, "%s: closed and finalized at tick %llu", path, (unsigned long long)tick);
    h5l_buf_free(&j);
    h5l_reader_close(r);
    return rc;
}

int h5l_recover(const char *path, h5l_recover_say_fn fn, void *ctx)
{
    say_t s = {fn, ctx};
    /* one writer at a time (wlock.c): a live writer's lock file refuses
     * the recovery (as its flock does, check_unlocked); a dead one's is
     * removed once the file is recovered, and left as it was otherwise */
    h5l_err_t le = {0};
    if (h5l_wlock_held(path, &le)) {
        say(&s, H5L_RECOVER_ERR, "%s: not recovered (its writer is still running?)", le.msg);
        return H5L_EBUSY;
    }
    int rc = recover(&s, path);
    if (!rc && !h5l_wlock_held(path, NULL)) {
        char lock[4096];
        snprintf(lock, sizeof lock, "%s%s", path, H5L_LOCK_SUFFIX);
        (void)unlink(lock);
    }
    return rc;
}
