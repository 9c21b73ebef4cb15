/* h5logrecover — make a log-layout file whose writer crashed into a closed,
 * finalized file at its last complete tick, readable by plain libhdf5
 * clients (h5py, netCDF, ncdump) as well as by the project's tools.
 *
 * Usage: h5logrecover FILE
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
 * live file that the project's readers still read and h5logrecover can
 * run on again.
 *
 * A closed file written with no_finalize is finalized in place. A closed,
 * finalized file is left alone. A file whose journal is damaged (not just
 * torn at its end) is refused: its ticks before the damage can be copied
 * with h5logreplay --tick. A file whose writer is still running (it holds
 * the file's lock, or its lock file FILE.h5lock) is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <hdf5.h>

#include "h5log_reader.h"
#include "anchor.h"
#include "codec.h"
#include "fdio.h"
#include "format.h"
#include "journal.h"
#include "wlock.h"

static void usage(FILE *o)
{
    fprintf(o, "usage: h5logrecover FILE\n"
               "Close the log-layout FILE whose writer crashed, at its last complete tick, and finalize it:\n"
               "plain HDF5 and netCDF readers then read its newest data without h5logfs.\n"
               "A closed file written without finalization is finalized.\n"
               "  -h, --help  this text\n"
               "Exit status: 0 done (or nothing to do), 1 error (the file is left as it was), 2 usage.\n");
}

/* Read the whole of [0, n) of path into a new buffer. */
static int slurp(const char *path, uint64_t n, h5l_buf_t *b)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "h5logrecover: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (h5l_buf_reserve(b, n + 64)) {
        fprintf(stderr, "h5logrecover: out of memory (%llu bytes of journal)\n", (unsigned long long)n);
        rc = -1;
    } else {
        h5l_err_t e = {0};
        if (h5l_fd_read_all(fd, b->p, (size_t)n, 0, path, &e) != H5L_OK) {
            fprintf(stderr, "h5logrecover: reading its journal: %s\n", e.msg);
            rc = -1;
        } else {
            b->len = n;
        }
    }
    close(fd);
    return rc;
}

/* The writer's libhdf5 holds an exclusive lock on the file while it is
 * open: a file still being written is not a crashed one. (Its lock file
 * FILE.h5lock, which works where flock does not, is looked at by main.) */
static int check_unlocked(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "h5logrecover: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            fprintf(stderr,
                    "h5logrecover: %s: a process holds its lock (its writer is still running?): "
                    "not recovered\n",
                    path);
            rc = -1;
        } /* a file system without flock: nothing to learn */
    } else {
        flock(fd, LOCK_UN);
    }
    close(fd);
    return rc;
}

/* A closed file: finalize it if it is not. */
static int finalize_closed(const char *path, h5l_reader_t *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint8_t b[H5L_UB_LEN];
    h5l_ub_t ub;
    h5l_err_t e = {0};
    int bad =
        fd < 0 || h5l_fd_read_all(fd, b, sizeof b, 0, path, &e) != H5L_OK || h5l_ub_decode(b, &ub, path, &e) != H5L_OK;
    if (fd >= 0) close(fd);
    if (bad) {
        fprintf(stderr, "h5logrecover: %s: cannot read its user block%s%s\n", path, e.msg[0] ? ": " : "", e.msg);
        return 1;
    }
    if (ub.flags & H5L_UB_FINALIZED) {
        printf("%s: closed and finalized already (ticks 1..%llu): nothing to do\n", path,
               (unsigned long long)h5l_reader_ntick(r));
        return 0;
    }
    uint64_t tick = h5l_reader_ntick(r);
    h5l_anchor_t *a;
    if (check_unlocked(path) || h5l_anchor_open(path, ub.id, &a, &e) ||
        h5l_anchor_finalize_closed(a, tick, ub.jr_off, ub.jr_len, 1, &e)) {
        if (e.msg[0]) fprintf(stderr, "h5logrecover: %s\n", e.msg);
        return 1;
    }
    printf("%s: finalized at tick %llu\n", path, (unsigned long long)tick);
    return 0;
}

static int recover(const char *path)
{
    h5l_err_t e = {0};
    h5l_reader_t *r;
    /* every frame and record table checked before the file is rewritten:
     * index checkpoints would let damage before them go unseen */
    if (h5l_reader_open_flags(path, H5L_READER_FULL, &r, &e)) {
        fprintf(stderr, "h5logrecover: %s\n", e.msg);
        return 1;
    }
    uint64_t bad = 0;
    h5l_err_t de = {0};
    if (h5l_reader_damage(r, &bad, &de)) {
        fprintf(stderr,
                "h5logrecover: %s\nh5logrecover: %s: damaged at tick %llu: not recovered (ticks 1..%llu are intact: "
                "h5logreplay --tick %llu %s OUT copies the newest of them)\n",
                de.msg, path, (unsigned long long)bad, (unsigned long long)h5l_reader_ntick(r),
                (unsigned long long)h5l_reader_ntick(r), path);
        h5l_reader_close(r);
        return 1;
    }
    if (!h5l_reader_live(r)) {
        int rc = finalize_closed(path, r);
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
    int rc = 0;
    if (check_unlocked(path) || stat(path, &st) != 0 || slurp(side, jpos, &j)) {
        rc = 1;
    } else if (!has_close) {
        uint8_t pl[16];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        h5l_put_le64(pl, tick);
        h5l_put_le64(pl + 8, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
        h5l_frame_encode(&j, H5L_REC_CLOSE, pl, sizeof pl, h5l_seed(id));
    }
    /* the schema for the anchors' extents is the reader's (used only
     * without finalizing; finalizing reads its own) */
    h5l_anchor_t *a = NULL;
    if (!rc && h5l_anchor_recreate(path, id, from == UINT64_MAX ? 0 : from,
                                   from == UINT64_MAX ? 0 : (uint64_t)st.st_size, &a, &e)) {
        fprintf(stderr, "h5logrecover: %s\n", e.msg);
        rc = 1;
    }
    int closed = 0;
    if (!rc) {
        h5l_reader_rdlock(r);
        int final = 1;
        int c = h5l_anchor_finish(a, h5l_reader_schema(r), tick, j.p, j.len, 1, NULL, &final, &e);
        h5l_reader_unlock(r);
        closed = !c;
        if (!c && !final) {
            fprintf(stderr,
                    "h5logrecover: %s\nh5logrecover: %s: closed at tick %llu but not finalized: "
                    "run h5logrecover again once there is room\n",
                    e.msg, path, (unsigned long long)tick);
            rc = 1;
        } else if (c) {
            fprintf(stderr,
                    "h5logrecover: %s\nh5logrecover: %s: not recovered; it stays readable from its journal %s "
                    "by h5logfs, h5logreplay and h5logdump\n",
                    e.msg, path, side);
            rc = 1;
        }
    }
    if (closed && unlink(side) != 0) {
        fprintf(stderr, "h5logrecover: %s: the file is closed, but its journal sidecar cannot be removed: %s\n", side,
                strerror(errno));
        rc = 1;
    }
    if (!rc) printf("%s: closed and finalized at tick %llu\n", path, (unsigned long long)tick);
    h5l_buf_free(&j);
    h5l_reader_close(r);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || argv[1][0] == '-') {
        usage(stderr);
        return 2;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our messages say what failed */
    /* one writer at a time (wlock.c): a live writer's lock file refuses
     * the recovery (as its flock does, check_unlocked); a dead one's is
     * removed once the file is recovered, and left as it was otherwise */
    h5l_err_t le = {0};
    if (h5l_wlock_held(argv[1], &le)) {
        fprintf(stderr, "h5logrecover: %s: not recovered (its writer is still running?)\n", le.msg);
        return 1;
    }
    int rc = recover(argv[1]);
    if (!rc && !h5l_wlock_held(argv[1], NULL)) {
        char lock[4096];
        snprintf(lock, sizeof lock, "%s%s", argv[1], H5L_LOCK_SUFFIX);
        (void)unlink(lock);
    }
    H5close();
    return rc;
}
