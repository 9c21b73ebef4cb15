/* test_faults.c — libh5log under real write faults: a full file system and
 * writes made to fail by the LD_PRELOAD shim tests/fault/fault_shim.c.
 *
 * Usage: mpirun -np P test_faults full DIR SNAPDIR
 *        mpirun -np P -x LD_PRELOAD=.../fault_shim.so test_faults shim DIR SNAPDIR
 *
 * Why: on a full disk MPI-IO (OpenMPI's ompio) returns MPI_SUCCESS with a
 * short count, and a flush once committed a tick whose data was not on
 * disk; a failed close then left the file unreadable and MPI_Finalize
 * crashed in libhdf5. Here every failure must (1) fail the call on every
 * rank with the same code and a message naming the file and the reason,
 * (2) commit nothing: a reader sees exactly the ticks before it, every
 * value right, (3) leave the writer able to retry — the retry commits the
 * same data — or to close, and (4) a failed close leaves every committed
 * tick readable and lets the process reach the end of MPI_Finalize.
 *
 * full: DIR is a small file system (tests mount an 8 MiB tmpfs). Rank 0
 *   first fills 1 MiB of it with a ballast file; ticks are flushed until
 *   one fails; then the ballast is deleted and the flush retried, and the
 *   file closed. Then a second file fills the disk again and is closed
 *   while the disk stays full.
 * shim: DIR is an ordinary directory; faults are armed with setenv on one
 *   rank before a step and disarmed after: data and record block writes
 *   (ENOSPC, EIO, a short write then ENOSPC, a short write alone; early
 *   writes at put time failing alike), journal
 *   appends (a torn frame, kept by a reader across the retry; puts made
 *   after a failed commit; a journal that stays full), and every step of
 *   close (HDF5 metadata, embedded journal, user block, CLOSE frame, the
 *   last flush, a tick that cannot be committed).
 * oom: DIR is an ordinary directory; one allocation of the library fails
 *   on one rank (tests/unit/oom.h: this program links with malloc, calloc
 *   and realloc wrapped), the first, the second, .. of a call in turn: in
 *   h5l_put, h5l_iput and h5l_put_att (local: the call fails, nothing is
 *   buffered, the put is made again), in h5l_flush (on rank 0, which also
 *   builds index checkpoints here, every 3 ticks, and on the last rank:
 *   every rank must fail with the same code, no rank may hang in a
 *   collective, nothing is committed, and the retry commits the tick) and
 *   in h5l_close (the file is then closed, or left live and readable), and
 *   in h5l_open of a closed file (it fails on every rank and the file
 *   stays readable and openable, or it opens).
 *
 * Values are in closed form, independent of the number of ranks: at tick
 * t, row t-1 of /v[t][X] is t*1e6 + j, all of /w[W] is t*1e5 + j, and the
 * global attribute "tick" is t. Rank r writes columns [r*X/P, (r+1)*X/P) of
 * both (/w with h5l_iput, so each rank's write has two pieces).
 * At interesting moments rank 0 copies the file (and its sidecar) to
 * SNAPDIR/NAME/ and adds a line "NAME FILE TICKS CLOSED X W" to
 * SNAPDIR/expect.txt, for tests/e2e/test_faults.py to check with
 * h5logdump --check, h5logreplay and the daemon.
 * Prints "N passed, N failed" on rank 0. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expect.h"
#include "h5log.h"
#include "h5log_reader.h"
#include "oom.h"

static int g_size;
static const char *g_dir, *g_snap;


/* ------------------------------------------------------------------ */
/* the data                                                             */

typedef struct geom {
    uint64_t x, w;  /* lengths of /v's row and of /w (multiples of P) */
    int v_id, w_id; /* variable ids (= object ids in the reader) */
    double **wbufs; /* h5l_iput buffers, kept until the end (a failed
                      * flush still refers to them) */
    int nwbufs;
} geom_t;

static double vval(uint64_t t, uint64_t j) { return (double)t * 1e6 + (double)j; }
static double wval(uint64_t t, uint64_t j) { return (double)t * 1e5 + (double)j; }

static void path_of(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", g_dir, name); }

/* h5l_opts_t.early_writes for the files make_file makes */
static int g_early;

/* Collective: create name in DIR with /v and /w. */
static h5l_file_t *make_file(const char *name, geom_t *g, uint64_t x, uint64_t w)
{
    char p[4096];
    path_of(p, sizeof p, name);
    h5l_file_t *f = NULL;
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.early_writes = g_early;
    int rc = h5l_create(p, MPI_COMM_WORLD, &o, &f);
    EXPECT(rc == 0, "create %s: %s", p, h5l_errmsg(NULL));
    if (rc) MPI_Abort(MPI_COMM_WORLD, 1);
    g->x = x;
    g->w = w;
    int dt, dx, dw;
    h5l_def_dim(f, "t", H5L_UNLIMITED, &dt);
    h5l_def_dim(f, "x", x, &dx);
    h5l_def_dim(f, "y", w, &dw);
    int dv[2] = {dt, dx};
    rc = h5l_def_var(f, "/v", H5T_NATIVE_DOUBLE, 2, dv, NULL, &g->v_id);
    rc |= h5l_def_var(f, "/w", H5T_NATIVE_DOUBLE, 1, &dw, NULL, &g->w_id);
    EXPECT(rc == 0, "def_var: %s", h5l_errmsg(f));
    return f;
}

static int has(const char *msg, const char *word) { return !word || strcasestr(msg, word) != NULL; }

/* Every rank: buffer the puts of tick t. With oom, each put is first made
 * with its k-th allocation failing (oom.h), for k = 1, 2, .. until one
 * makes fewer: a failed put returns H5L_ENOMEM with a reason and buffers
 * nothing, and is made again. */
static void put_tick_oom(h5l_file_t *f, geom_t *g, uint64_t t, int oom)
{
    uint64_t nx = g->x / (uint64_t)g_size, x0 = nx * (uint64_t)g_rank;
    uint64_t nw = g->w / (uint64_t)g_size, w0 = nw * (uint64_t)g_rank;
    double *v = malloc(nx * sizeof *v), *w = malloc(nw * sizeof *w);
    for (uint64_t i = 0; i < nx; i++) v[i] = vval(t, x0 + i);
    for (uint64_t i = 0; i < nw; i++) w[i] = wval(t, w0 + i);
    int64_t tt = (int64_t)t;
    for (int call = 0; call < 3; call++) {
        for (long k = 1;; k++) {
            size_t before = h5l_buffered(f);
            uint64_t vs[2] = {t - 1, x0}, vc[2] = {1, nx};
            if (oom) oom_arm(k);
            int rc = call == 0   ? h5l_put(f, g->v_id, vs, vc, v)
                     : call == 1 ? h5l_iput(f, g->w_id, &w0, &nw, w)
                                 : h5l_put_att(f, H5L_GLOBAL, "tick", H5T_NATIVE_INT64, 1, &tt);
            int fired = oom && oom_off();
            if (rc && fired) {
                EXPECT(rc == H5L_ENOMEM && has(h5l_errmsg(f), "memory"),
                       "put %d of tick %llu, allocation %ld failing: code %d: %s", call, (unsigned long long)t, k, rc,
                       h5l_errmsg(f));
                EXPECT(h5l_buffered(f) == before, "put %d of tick %llu, allocation %ld failing: %zu bytes buffered",
                       call, (unsigned long long)t, k, h5l_buffered(f) - before);
                continue;
            }
            EXPECT(rc == 0, "put %d of tick %llu: %s", call, (unsigned long long)t, h5l_errmsg(f));
            if (!fired) break;
        }
    }
    memset(v, 0xAB, nx * sizeof *v); /* h5l_put copied */
    free(v);
    g->wbufs = realloc(g->wbufs, (size_t)(g->nwbufs + 1) * sizeof *g->wbufs);
    g->wbufs[g->nwbufs++] = w;
}

static void put_tick(h5l_file_t *f, geom_t *g, uint64_t t) { put_tick_oom(f, g, t, 0); }

static void free_geom(geom_t *g)
{
    for (int i = 0; i < g->nwbufs; i++) free(g->wbufs[i]);
    free(g->wbufs);
    g->wbufs = NULL;
    g->nwbufs = 0;
}

/* Collective: ticks a..b, each put and flushed, every flush must succeed. */
static void good_ticks(h5l_file_t *f, geom_t *g, uint64_t a, uint64_t b)
{
    for (uint64_t t = a; t <= b; t++) {
        put_tick(f, g, t);
        int rc = h5l_flush(f);
        EXPECT(rc == 0, "flush of tick %llu: %s", (unsigned long long)t, h5l_errmsg(f));
    }
}

/* ------------------------------------------------------------------ */
/* checks                                                               */

/* Every rank: rc failed, with the same code on every rank, and msg names
 * the file (name) and every word given. */
static void expect_fail(const char *step, int rc, const char *msg, const char *name, const char *w1, const char *w2,
                        const char *w3)
{
    int lo = rc, hi = rc;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT(rc != 0, "%s: succeeded, expected a failure", step);
    EXPECT(lo == hi, "%s: ranks returned different codes (%d..%d)", step, lo, hi);
    EXPECT(has(msg, name) && has(msg, w1) && has(msg, w2) && has(msg, w3),
           "%s: message does not name '%s', '%s', '%s', '%s': %s", step, name, w1 ? w1 : "", w2 ? w2 : "", w3 ? w3 : "",
           msg);
}

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Rank 0: what a reader sees in path: exactly `ticks` ticks and no
 * damage; closed / live as given (-1: either); at every tick T the values
 * of tick T (row T-1 of /v, all of /w, attribute tick), and at the newest
 * tick every row of /v. */
static void check_reader(h5l_reader_t *r, const char *path, const geom_t *g, uint64_t ticks)
{
    h5l_err_t e = {0};
    uint64_t dt = 0;
    EXPECT(h5l_reader_ntick(r) == ticks, "%s: %llu ticks, expected %llu", path, (unsigned long long)h5l_reader_ntick(r),
           (unsigned long long)ticks);
    EXPECT(h5l_reader_damage(r, &dt, &e) == 0, "%s: damage at tick %llu: %s", path, (unsigned long long)dt, e.msg);
    if (h5l_reader_ntick(r) < ticks) ticks = h5l_reader_ntick(r);
    double *buf = malloc((g->x > g->w ? g->x : g->w) * ticks * sizeof *buf + 8);
    for (uint64_t t = 1; t <= ticks; t++) {
        uint64_t s2[2] = {t - 1, 0}, c2[2] = {1, g->x}, s1 = 0, c1 = g->w;
        int rc = h5l_reader_read(r, t, (uint32_t)g->v_id, s2, c2, buf, &e);
        uint64_t bad = 0;
        for (uint64_t j = 0; !rc && j < g->x; j++) bad += buf[j] != vval(t, j);
        EXPECT(rc == 0 && bad == 0, "%s: tick %llu: /v row %llu: %llu values wrong (%s)", path, (unsigned long long)t,
               (unsigned long long)(t - 1), (unsigned long long)bad, e.msg);
        rc = h5l_reader_read(r, t, (uint32_t)g->w_id, &s1, &c1, buf, &e);
        bad = 0;
        for (uint64_t j = 0; !rc && j < g->w; j++) bad += buf[j] != wval(t, j);
        EXPECT(rc == 0 && bad == 0, "%s: tick %llu: /w: %llu values wrong (%s)", path, (unsigned long long)t,
               (unsigned long long)bad, e.msg);
        int64_t at = -1;
        h5l_reader_rdlock(r);
        const h5l_schema_t *s = h5l_reader_schema(r);
        for (size_t i = 0; i < s->nattrs; i++)
            if (s->attrs[i].objid == 0 && !strcmp(s->attrs[i].name, "tick") && h5l_schema_attr_current(s, i, t))
                memcpy(&at, s->attrs[i].value, sizeof at);
        uint64_t rows = s->ndims ? h5l_schema_dimlen(s, 0, t) : 0;
        h5l_reader_unlock(r);
        EXPECT(at == (int64_t)t && rows == t, "%s: tick %llu: attribute tick = %lld, %llu rows", path,
               (unsigned long long)t, (long long)at, (unsigned long long)rows);
    }
    if (ticks) {
        uint64_t s2[2] = {0, 0}, c2[2] = {ticks, g->x};
        int rc = h5l_reader_read(r, ticks, (uint32_t)g->v_id, s2, c2, buf, &e);
        uint64_t bad = 0;
        for (uint64_t i = 0; !rc && i < ticks * g->x; i++) bad += buf[i] != vval(i / g->x + 1, i % g->x);
        EXPECT(rc == 0 && bad == 0, "%s: all of /v at tick %llu: %llu values wrong (%s)", path,
               (unsigned long long)ticks, (unsigned long long)bad, e.msg);
    }
    free(buf);
}

static void check_file(const char *name, const geom_t *g, uint64_t ticks, int closed, int live)
{
    if (g_rank != 0) return;
    char p[4096];
    path_of(p, sizeof p, name);
    h5l_reader_t *r;
    h5l_err_t e = {0};
    int rc = h5l_reader_open(p, &r, &e);
    EXPECT(rc == 0, "open %s: %s", p, e.msg);
    if (rc) return;
    EXPECT(closed < 0 || h5l_reader_closed(r) == closed, "%s: closed is %d, expected %d", p, h5l_reader_closed(r),
           closed);
    EXPECT(live < 0 || h5l_reader_live(r) == live, "%s: live is %d, expected %d", p, h5l_reader_live(r), live);
    char side[4200];
    snprintf(side, sizeof side, "%s.h5lj", p);
    if (live >= 0) EXPECT((file_size(side) >= 0) == live, "%s: sidecar %s", p, live ? "missing" : "still there");
    check_reader(r, p, g, ticks);
    h5l_reader_close(r);
}

/* Rank 0: the sidecar of name ends `torn` bytes past the last complete
 * frame a fresh reader loads (a torn tail; 0: it ends cleanly). */
static void check_tail(const char *name, long torn)
{
    if (g_rank != 0) return;
    char p[4096], side[4200];
    path_of(p, sizeof p, name);
    snprintf(side, sizeof side, "%s.h5lj", p);
    h5l_reader_t *r;
    h5l_err_t e = {0};
    if (h5l_reader_open(p, &r, &e)) {
        EXPECT(0, "open %s: %s", p, e.msg);
        return;
    }
    long pos = (long)h5l_reader_journal_pos(r), size = file_size(side);
    EXPECT(size - pos == torn, "%s: %ld journal bytes after the last frame, expected %ld", side, size - pos, torn);
    h5l_reader_close(r);
}

/* ------------------------------------------------------------------ */
/* snapshots for tests/e2e/test_faults.py                               */

/* Copy src to dst keeping holes (log extents are sparse). */
static int copy_sparse(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = in < 0 || out < 0 ? -1 : 0;
    static char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        if (rc) break;
        ssize_t n = pread(in, buf, sizeof buf, off);
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        ssize_t z = 0;
        while (z < n && !buf[z]) z++;
        if (z < n && pwrite(out, buf, (size_t)n, off) != n) rc = -1;
        off += n;
    }
    if (!rc && ftruncate(out, off) != 0) rc = -1;
    if (in >= 0) close(in);
    if (out >= 0) close(out);
    return rc;
}

/* Rank 0: copy name (and its sidecar) to SNAPDIR/tag/ and note what a
 * reader must find there. */
static void snapshot(const char *tag, const char *name, const geom_t *g, uint64_t ticks, int closed)
{
    if (g_rank != 0 || !g_snap) return;
    char d[4096], src[4096], dst[8400];
    snprintf(d, sizeof d, "%s/%s", g_snap, tag);
    mkdir(d, 0755);
    path_of(src, sizeof src, name);
    snprintf(dst, sizeof dst, "%s/%s", d, name);
    EXPECT(copy_sparse(src, dst) == 0, "snapshot of %s: %s", src, strerror(errno));
    strcat(src, ".h5lj");
    strcat(dst, ".h5lj");
    if (file_size(src) >= 0) EXPECT(copy_sparse(src, dst) == 0, "snapshot of %s: %s", src, strerror(errno));
    snprintf(d, sizeof d, "%s/expect.txt", g_snap);
    FILE *e = fopen(d, "a");
    if (e) {
        fprintf(e, "%s %s %llu %d %llu %llu\n", tag, name, (unsigned long long)ticks, closed, (unsigned long long)g->x,
                (unsigned long long)g->w);
        fclose(e);
    }
}

/* ------------------------------------------------------------------ */
/* the shim                                                             */

static long (*g_fired)(void);

static long fired(void) { return g_fired ? g_fired() : 0; }

/* Arm a fault on rank `who` (see tests/fault/fault_shim.c); size < 0: any. */
static void arm(int who, const char *path_end, long call, long times, const char *kind, long size)
{
    if (g_rank != who) return;
    char b[32];
    snprintf(b, sizeof b, "%ld", call);
    setenv("H5L_FAULT_CALL", b, 1);
    snprintf(b, sizeof b, "%ld", times);
    setenv("H5L_FAULT_TIMES", b, 1);
    setenv("H5L_FAULT_KIND", kind, 1);
    if (size >= 0) {
        snprintf(b, sizeof b, "%ld", size);
        setenv("H5L_FAULT_SIZE", b, 1);
    } else {
        unsetenv("H5L_FAULT_SIZE");
    }
    setenv("H5L_FAULT_PATH", path_end, 1);
}

static void disarm(void)
{
    unsetenv("H5L_FAULT_PATH");
    unsetenv("H5L_FAULT_SIZE");
}

/* Collective: rank who's fault fired (at least once since `before`). */
static void expect_fired(int who, long before, const char *step)
{
    if (g_rank == who) EXPECT(fired() > before, "%s: the fault never fired", step);
}

/* Collective: the flush of tick t fails as described, on every rank;
 * nothing is committed (ntick stays t-1); then disarmed, a retry commits
 * tick t with the values of tick t. */
static void flush_fails_then_retry(h5l_file_t *f, geom_t *g, const char *name, uint64_t t, int who, const char *w1,
                                   const char *w2)
{
    char step[128];
    snprintf(step, sizeof step, "%s: flush of tick %llu", name, (unsigned long long)t);
    long before = fired();
    int rc = h5l_flush(f);
    expect_fail(step, rc, h5l_errmsg(f), name, w1, w2, NULL);
    expect_fired(who, before, step);
    EXPECT(h5l_ntick(f) == t - 1, "%s: ntick %llu after the failure", step, (unsigned long long)h5l_ntick(f));
    disarm();
    check_file(name, g, t - 1, 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = h5l_flush(f);
    EXPECT(rc == 0, "%s: retry: %s", step, h5l_errmsg(f));
    EXPECT(h5l_ntick(f) == t, "%s: ntick %llu after the retry", step, (unsigned long long)h5l_ntick(f));
    check_file(name, g, t, 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Data and record block writes. */
static void shim_data(void)
{
    const char *name = "s1.h5";
    char end[64];
    snprintf(end, sizeof end, "/%s", name);
    geom_t g = {0};
    int P = g_size, last = P - 1, mid = P / 2;
    h5l_file_t *f = make_file(name, &g, 512 * (uint64_t)P, 64 * (uint64_t)P);
    good_ticks(f, &g, 1, 2);
    /* the data write fails: ENOSPC on the last rank, EIO on rank 0, a
     * short write and then ENOSPC on the middle one */
    put_tick(f, &g, 3);
    arm(last, end, 1, 1, "enospc", -1);
    flush_fails_then_retry(f, &g, name, 3, last, "data of tick 3", "no space left on device");
    put_tick(f, &g, 4);
    arm(0, end, 1, 1, "eio", -1);
    flush_fails_then_retry(f, &g, name, 4, 0, "data of tick 4", "input/output error");
    put_tick(f, &g, 5);
    arm(mid, end, 1, 2, "short:1000", -1);
    flush_fails_then_retry(f, &g, name, 5, mid, "no space left on device", "1000 bytes written");
    /* a short write alone is completed by writing the rest, inside the
     * first piece and from the second one on */
    for (uint64_t t = 6; t <= 7; t++) {
        put_tick(f, &g, t);
        long before = fired();
        arm(last, end, 1, 1, t == 6 ? "short:1000" : "short:4500", -1);
        int rc = h5l_flush(f);
        disarm();
        EXPECT(rc == 0, "flush of tick %llu after a short write: %s", (unsigned long long)t, h5l_errmsg(f));
        expect_fired(last, before, "short write alone");
        check_file(name, &g, t, 0, 1);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* the record block write fails */
    put_tick(f, &g, 8);
    arm(last, end, 2, 1, "enospc", -1);
    flush_fails_then_retry(f, &g, name, 8, last, "record block of tick 8", "no space left on device");
    int rc = h5l_close(f);
    EXPECT(rc == 0, "close %s: %s", name, h5l_errmsg(NULL));
    check_file(name, &g, 8, 1, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
}

/* Early writes (h5l_opts_t.early_writes, docs/format.md 6): from tick 2 on
 * each tick's place is reserved, and h5l_put writes /v's row (128 KiB per
 * rank) there at once.
 * A write failing then loses nothing: the put succeeds, the flush writes
 * what the early write did not, at the same place, and reports if it
 * fails too. */
static void shim_early(void)
{
    const char *name = "s_early.h5";
    char end[64];
    snprintf(end, sizeof end, "/%s", name);
    geom_t g = {0};
    int P = g_size, last = P - 1, mid = P / 2;
    g_early = 1;
    h5l_file_t *f = make_file(name, &g, 16384 * (uint64_t)P, 64 * (uint64_t)P);
    g_early = 0;
    good_ticks(f, &g, 1, 2);
    /* the early write fails (ENOSPC; a short write, then ENOSPC): the
     * flush writes the row */
    for (uint64_t t = 3; t <= 4; t++) {
        int who = t == 3 ? last : mid;
        long before = fired();
        arm(who, end, 1, t == 3 ? 1 : 2, t == 3 ? "enospc" : "short:1000", -1);
        put_tick(f, &g, t);
        expect_fired(who, before, "early write");
        disarm();
        int rc = h5l_flush(f);
        EXPECT(rc == 0, "flush of tick %llu after a failed early write: %s", (unsigned long long)t, h5l_errmsg(f));
        check_file(name, &g, t, 0, 1);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* the disk stays full from the early write on: the flush fails,
     * commits nothing, and its retry commits the tick */
    arm(last, end, 1, 0, "enospc", -1);
    put_tick(f, &g, 5);
    flush_fails_then_retry(f, &g, name, 5, last, "data of tick 5", "no space left on device");
    /* the early writes succeeded; the last bytes' write at the flush
     * fails, and so does the flush's second try of them */
    put_tick(f, &g, 6);
    arm(0, end, 1, 2, "eio", -1);
    flush_fails_then_retry(f, &g, name, 6, 0, "data of tick 6", "input/output error");
    /* every byte written before the flush waited; the record block fails;
     * then the same puts again (a tick twice the size its place was made
     * for: the bytes written are moved) and the retry commits */
    put_tick(f, &g, 7);
    long before = fired();
    arm(last, end, 2, 1, "enospc", -1);
    int rc = h5l_flush(f);
    expect_fail("s_early: flush of tick 7", rc, h5l_errmsg(f), name, "record block of tick 7", "no space", NULL);
    expect_fired(last, before, "s_early: flush of tick 7");
    disarm();
    MPI_Barrier(MPI_COMM_WORLD);
    put_tick(f, &g, 7);
    rc = h5l_flush(f);
    EXPECT(rc == 0, "s_early: flush of tick 7 with more puts: %s", h5l_errmsg(f));
    check_file(name, &g, 7, 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    /* ticks 8 and 9 alike (9's flush reserves tick 10's place); tick 10,
     * put twice, is twice that size, so its flush reads the bytes written
     * early back to move them, and that read fails (EIO): the flush fails
     * and commits nothing, its retry moves them. Then 11 and 12 alike, and
     * tick 13 the same way with a short read followed by EIO. */
    good_ticks(f, &g, 8, 9);
    for (uint64_t t = 10; t <= 13; t += 3) {
        if (t == 13) good_ticks(f, &g, 11, 12);
        put_tick(f, &g, t);
        put_tick(f, &g, t);
        if (g_rank == last) setenv("H5L_FAULT_OP", "read", 1);
        arm(last, end, 1, t == 10 ? 1 : 2, t == 10 ? "eio" : "short:100", -1);
        flush_fails_then_retry(f, &g, name, t, last, "reading back", "of tick");
        unsetenv("H5L_FAULT_OP");
    }
    rc = h5l_close(f);
    EXPECT(rc == 0, "close %s: %s", name, h5l_errmsg(NULL));
    check_file(name, &g, 13, 1, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
}

/* Journal appends (rank 0). */
static void shim_journal(void)
{
    const char *name = "s2.h5";
    char end[64], path[4096];
    snprintf(end, sizeof end, "/%s.h5lj", name);
    path_of(path, sizeof path, name);
    geom_t g = {0};
    h5l_file_t *f = make_file(name, &g, 256 * (uint64_t)g_size, 32 * (uint64_t)g_size);
    good_ticks(f, &g, 1, 3);

    /* a torn frame: 30 bytes land, then ENOSPC */
    put_tick(f, &g, 4);
    long before = fired();
    arm(0, end, 1, 2, "short:30", -1);
    int rc = h5l_flush(f);
    disarm();
    expect_fail("journal: flush of tick 4", rc, h5l_errmsg(f), name, "committing tick 4", "no space left on device",
                NULL);
    expect_fired(0, before, "journal: flush of tick 4");
    EXPECT(h5l_ntick(f) == 3, "journal: ntick %llu after a failed commit", (unsigned long long)h5l_ntick(f));
    check_file(name, &g, 3, 0, 1);
    check_tail(name, 30);
    snapshot("journal-torn", name, &g, 3, 0);
    /* a reader that saw the torn frame keeps it across the retry */
    h5l_reader_t *r1 = NULL, *r2 = NULL;
    h5l_err_t e = {0};
    if (g_rank == 0) EXPECT(h5l_reader_open(path, &r1, &e) == 0, "open %s: %s", path, e.msg);
    MPI_Barrier(MPI_COMM_WORLD);
    /* the application goes on: puts of tick 5, then a flush commits the
     * sealed tick 4 as it was and then tick 5 */
    put_tick(f, &g, 5);
    rc = h5l_flush(f);
    EXPECT(rc == 0, "journal: flush after a failed commit: %s", h5l_errmsg(f));
    EXPECT(h5l_ntick(f) == 5, "journal: ntick %llu", (unsigned long long)h5l_ntick(f));
    check_file(name, &g, 5, 0, 1);
    check_tail(name, 0);
    if (r1) {
        int n = 0;
        EXPECT(h5l_reader_refresh(r1, &n, &e) == 0 && n == 2, "journal: reader refresh: %d new ticks (%s)", n, e.msg);
        check_reader(r1, path, &g, 5);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* the journal stays full: a torn frame, a retry that fails again, a
     * reader between; then room again and the retry commits the tick */
    put_tick(f, &g, 6);
    before = fired();
    arm(0, end, 1, 0, "short:100", -1);
    rc = h5l_flush(f);
    expect_fail("journal: flush of tick 6", rc, h5l_errmsg(f), name, "committing tick 6", "no space left on device",
                NULL);
    rc = h5l_flush(f);
    expect_fail("journal: retried flush of tick 6", rc, h5l_errmsg(f), name, "committing tick 6",
                "no space left on device", NULL);
    expect_fired(0, before, "journal: flush of tick 6");
    disarm();
    check_tail(name, 100);
    if (g_rank == 0) EXPECT(h5l_reader_open(path, &r2, &e) == 0, "open %s: %s", path, e.msg);
    if (r2) check_reader(r2, path, &g, 5);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = h5l_flush(f);
    EXPECT(rc == 0 && h5l_ntick(f) == 6, "journal: retry of tick 6: %s", h5l_errmsg(f));
    check_tail(name, 0);
    h5l_reader_t *rs[2] = {r1, r2};
    for (int i = 0; i < 2; i++) {
        if (!rs[i]) continue;
        int n = 0;
        EXPECT(h5l_reader_refresh(rs[i], &n, &e) == 0 && n == 1, "journal: reader %d refresh: %d (%s)", i, n, e.msg);
        check_reader(rs[i], path, &g, 6);
        h5l_reader_close(rs[i]);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* EIO: nothing lands */
    put_tick(f, &g, 7);
    arm(0, end, 1, 1, "eio", -1);
    flush_fails_then_retry(f, &g, name, 7, 0, "committing tick 7", "input/output error");
    check_tail(name, 0);
    /* a commit fails, and close (with room again) commits it first */
    put_tick(f, &g, 8);
    arm(0, end, 1, 2, "short:50", -1);
    rc = h5l_flush(f);
    disarm();
    expect_fail("journal: flush of tick 8", rc, h5l_errmsg(f), name, "committing tick 8", NULL, NULL);
    check_tail(name, 50);
    rc = h5l_close(f);
    EXPECT(rc == 0, "close %s with a tick to commit: %s", name, h5l_errmsg(NULL));
    check_file(name, &g, 8, 1, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
}

/* One close whose step fails. name: the file; pending: puts of tick 3
 * left for close to flush; then the fault (on rank who, on the file's
 * path end + suffix), the words the message must hold, and what a reader
 * must find after: ticks, closed (CLOSE frame seen), live (sidecar). */
static void shim_close_case(const char *name, int pending, int who, const char *suffix, long call, long times,
                            const char *kind, long size, const char *w1, const char *w2, const char *w3, uint64_t ticks,
                            int closed, int live, long torn, const char *snap)
{
    char end[64], path[4096], side[4200];
    snprintf(end, sizeof end, "/%s%s", name, suffix);
    path_of(path, sizeof path, name);
    snprintf(side, sizeof side, "%s.h5lj", path);
    geom_t g = {0};
    h5l_file_t *f = make_file(name, &g, 128 * (uint64_t)g_size, 16 * (uint64_t)g_size);
    good_ticks(f, &g, 1, 2);
    if (pending) put_tick(f, &g, 3);
    /* size -2: the embedded journal, the sidecar plus the 40-byte CLOSE frame */
    long sz = size == -2 ? file_size(side) + 40 : size;
    long before = fired();
    arm(who, end, call, times, kind, sz);
    int rc = h5l_close(f);
    disarm();
    char step[128];
    snprintf(step, sizeof step, "close of %s", name);
    expect_fail(step, rc, h5l_errmsg(NULL), name, w1, w2, w3);
    expect_fired(who, before, step);
    check_file(name, &g, ticks, closed, live);
    if (torn >= 0) check_tail(name, torn);
    if (snap) snapshot(snap, name, &g, ticks, closed);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
}

static void shim_close(void)
{
    int last = g_size - 1;
    /* the HDF5 metadata cannot be written: libhdf5 must still let go of
     * the file (MPI_Finalize at the end of this program proves it) */
    shim_close_case("c_hdf5.h5", 0, 0, "", 1, 0, "enospc", -1, "HDF5 metadata", "no space left on device", "not closed",
                    2, 1, 1, 0, "close-hdf5");
    /* the embedded journal cannot be written */
    shim_close_case("c_embed.h5", 0, 0, "", 1, 1, "enospc", -2, "embedding the journal", "no space left on device",
                    "not closed", 2, 1, 1, 0, NULL);
    /* the user block: half of it lands, then ENOSPC: put back as it was */
    shim_close_case("c_ub.h5", 0, 0, "", 1, 2, "short:16", 32, "user block", "no space left on device", "as it was", 2,
                    1, 1, 0, "close-userblock");
    shim_close_case("c_ub2.h5", 0, 0, "", 1, 1, "eio", 32, "user block", "input/output error", "as it was", 2, 1, 1, 0,
                    NULL);
    /* the CLOSE frame is torn */
    shim_close_case("c_frame.h5", 0, 0, ".h5lj", 1, 2, "short:10", -1, "journal append", "no space left on device",
                    "not closed", 2, 0, 1, 10, NULL);
    /* the last flush fails on its data: the file is closed with the
     * committed ticks */
    shim_close_case("c_flush.h5", 1, last, "", 1, 1, "enospc", -1, "data of tick 3", "no space left on device",
                    "closed with ticks 1..2", 2, 1, 0, -1, NULL);
    /* the last flush cannot commit (100 bytes of its frame land, then
     * ENOSPC; the next write would succeed): no CLOSE frame over the torn
     * one — only that frame may ever go there — so the file stays live */
    shim_close_case("c_sealed.h5", 1, 0, ".h5lj", 1, 2, "short:100", -1, "committing tick 3", "no space left on device",
                    "not closed", 2, 0, 1, 100, "close-sealed");
}

/* ------------------------------------------------------------------ */
/* out of memory                                                        */

/* Collective: whether the failure armed on rank who (oom_arm) fired, on
 * every rank; disarms. */
static int oom_fired_on(int who)
{
    int fired = oom_off();
    MPI_Bcast(&fired, 1, MPI_INT, who, MPI_COMM_WORLD);
    return fired;
}

/* Flushes with the k-th allocation of rank who failing, k = 1, 2, .. (a
 * tick each) until a flush makes fewer: the flush fails on every rank
 * with the same code and commits nothing, and its retry commits the
 * tick. Returns the next tick. */
static uint64_t oom_flush_sweep(h5l_file_t *f, geom_t *g, const char *name, uint64_t t, int who)
{
    for (long k = 1;; k++, t++) {
        put_tick_oom(f, g, t, 1);
        char step[160];
        snprintf(step, sizeof step, "%s: flush of tick %llu, allocation %ld of rank %d failing", name,
                 (unsigned long long)t, k, who);
        if (g_rank == who) oom_arm(k);
        int rc = h5l_flush(f);
        int fired = oom_fired_on(who), any = rc != 0;
        MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            expect_fail(step, rc, h5l_errmsg(f), name, "memory", NULL, NULL);
            EXPECT(fired, "%s: failed with no allocation failing: %s", step, h5l_errmsg(f));
            if (g_rank == who) /* its own reason, not another rank's */
                EXPECT(!has(h5l_errmsg(f), "another rank"), "%s: %s", step, h5l_errmsg(f));
            EXPECT(h5l_ntick(f) == t - 1, "%s: ntick %llu after the failure", step, (unsigned long long)h5l_ntick(f));
            rc = h5l_flush(f);
            EXPECT(rc == 0, "%s: retry: %s", step, h5l_errmsg(f));
        }
        EXPECT(h5l_ntick(f) == t, "%s: ntick %llu", step, (unsigned long long)h5l_ntick(f));
        if (k % 16 == 0) { /* a reader sees every tick right so far */
            check_file(name, g, t, 0, 1);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (!fired) return t + 1;
    }
}

/* One close with the k-th allocation of rank who failing: it succeeds
 * (finalized or not: finalizing is given up on a failure) or fails on
 * every rank with the same code, and the file keeps its two ticks, closed
 * or live. Returns whether the failure fired. */
static int oom_close_case(int who, long k)
{
    char name[64], path[4096];
    snprintf(name, sizeof name, "m_close_%d_%ld.h5", who, k);
    path_of(path, sizeof path, name);
    geom_t g = {0};
    h5l_file_t *f = make_file(name, &g, 64 * (uint64_t)g_size, 16 * (uint64_t)g_size);
    good_ticks(f, &g, 1, 2);
    if (g_rank == who) oom_arm(k);
    int rc = h5l_close(f);
    int fired = oom_fired_on(who), any = rc != 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char step[160];
    snprintf(step, sizeof step, "close of %s, allocation %ld of rank %d failing", name, k, who);
    if (any) {
        expect_fail(step, rc, h5l_errmsg(NULL), name, NULL, NULL, NULL);
        EXPECT(fired, "%s: failed with no allocation failing: %s", step, h5l_errmsg(NULL));
        /* the reason, before what it meant for the file, names the file */
        char why[1024];
        snprintf(why, sizeof why, "%s", h5l_errmsg(NULL));
        why[strcspn(why, ";")] = 0;
        if (g_rank == who) EXPECT(has(why, name), "%s: %s", step, h5l_errmsg(NULL));
        check_file(name, &g, 2, -1, -1);
    } else {
        check_file(name, &g, 2, 1, 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        unlink(path);
        strcat(path, ".h5lj");
        unlink(path);
    }
    free_geom(&g);
    return fired;
}

/* One h5l_open of a closed file of two ticks with the k-th allocation of
 * rank who failing: it succeeds, or fails on every rank with the same
 * code and a message naming the file, leaving it readable with its two
 * ticks (closed, or live again if the failure came after its journal went
 * back to the sidecar) and openable: a second h5l_open goes on to tick 3,
 * and the closed file has three. Returns whether the failure fired. */
static int oom_open_case(int who, long k)
{
    char name[64], path[4096];
    snprintf(name, sizeof name, "m_open_%d_%ld.h5", who, k);
    path_of(path, sizeof path, name);
    geom_t g = {0};
    h5l_file_t *f = make_file(name, &g, 64 * (uint64_t)g_size, 16 * (uint64_t)g_size);
    good_ticks(f, &g, 1, 2);
    EXPECT(h5l_close(f) == 0, "close %s: %s", name, h5l_errmsg(NULL));
    if (g_rank == who) oom_arm(k);
    int rc = h5l_open(path, MPI_COMM_WORLD, NULL, &f);
    int fired = oom_fired_on(who), any = rc != 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char step[160];
    snprintf(step, sizeof step, "open of %s, allocation %ld of rank %d failing", name, k, who);
    if (any) {
        expect_fail(step, rc, h5l_errmsg(NULL), name, NULL, NULL, NULL);
        EXPECT(fired, "%s: failed with no allocation failing: %s", step, h5l_errmsg(NULL));
        EXPECT(f == NULL, "%s: failed but gave a file", step);
        check_file(name, &g, 2, -1, -1);
        MPI_Barrier(MPI_COMM_WORLD);
        rc = h5l_open(path, MPI_COMM_WORLD, NULL, &f);
        EXPECT(rc == 0, "%s: then a clean open: %s", step, h5l_errmsg(NULL));
        if (rc) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    EXPECT(h5l_ntick(f) == 2, "%s: ntick %llu after the open", step, (unsigned long long)h5l_ntick(f));
    good_ticks(f, &g, 3, 3);
    rc = h5l_close(f);
    EXPECT(rc == 0, "%s: close after the open: %s", step, h5l_errmsg(NULL));
    check_file(name, &g, 3, 1, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        unlink(path);
        char more[4200];
        snprintf(more, sizeof more, "%s.h5lj", path);
        unlink(more);
        snprintf(more, sizeof more, "%s.h5lock", path);
        EXPECT(file_size(more) < 0, "%s: its lock file is left", step);
        unlink(more);
    }
    free_geom(&g);
    return fired;
}

static void oom(void)
{
    const char *name = "m_flush.h5";
    int last = g_size - 1;
    geom_t g = {0};
    setenv("H5L_CKPT_TICKS", "3", 1); /* checkpoints are built in the sweep too */
    h5l_file_t *f = make_file(name, &g, 64 * (uint64_t)g_size, 16 * (uint64_t)g_size);
    unsetenv("H5L_CKPT_TICKS");
    good_ticks(f, &g, 1, 2);
    uint64_t t = oom_flush_sweep(f, &g, name, 3, 0);
    if (last) t = oom_flush_sweep(f, &g, name, t, last);
    snapshot("oom-live", name, &g, t - 1, 0); /* its checkpoints are checked there */
    int rc = h5l_close(f);
    EXPECT(rc == 0, "close %s: %s", name, h5l_errmsg(NULL));
    check_file(name, &g, t - 1, 1, 0);
    snapshot("oom-closed", name, &g, t - 1, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
    /* close: every allocation up to 64, then a sample (finalizing makes
     * hundreds on rank 0) */
    long n = 0;
    for (long k = 1; oom_close_case(0, k); k += k < 64 ? 1 : k / 8) n++;
    EXPECT(n > 10, "close made only %ld allocations on rank 0", n);
    long m = 0;
    if (last)
        for (long k = 1; oom_close_case(last, k); k++) m++;
    /* open (a restart): every allocation on rank 0 up to 64, then a
     * sample; every one on the last rank */
    long no = 0, mo = 0;
    for (long k = 1; oom_open_case(0, k); k += k < 64 ? 1 : k / 8) no++;
    EXPECT(no > 10, "open made only %ld allocations on rank 0", no);
    if (last)
        for (long k = 1; oom_open_case(last, k); k++) mo++;
    if (g_rank == 0)
        printf("oom: flushes to tick %llu; closes: %ld failing on rank 0, %ld on rank %d; opens: %ld on rank 0, "
               "%ld on rank %d\n",
               (unsigned long long)(t - 1), n, m, last, no, mo, last);
}

/* ------------------------------------------------------------------ */
/* a full file system                                                   */

/* Collective: fill DIR with ticks of file name until a flush fails; the
 * failure must be ENOSPC, on every rank, committing nothing. Returns the
 * number of good ticks. */
static uint64_t fill_up(h5l_file_t *f, geom_t *g, const char *name)
{
    uint64_t t = 1;
    int rc = 0;
    for (; t < 1000; t++) {
        put_tick(f, g, t);
        rc = h5l_flush(f);
        if (rc) break;
    }
    expect_fail("flush on a full file system", rc, h5l_errmsg(f), name, "no space left on device", NULL, NULL);
    uint64_t good = t - 1;
    EXPECT(h5l_ntick(f) == good, "ntick %llu after the failure, expected %llu", (unsigned long long)h5l_ntick(f),
           (unsigned long long)good);
    EXPECT(good >= 3, "only %llu ticks fit: is DIR the small file system?", (unsigned long long)good);
    if (g_rank == 0) printf("full: %s: tick %llu failed: %s\n", name, (unsigned long long)t, h5l_errmsg(f));
    check_file(name, g, good, 0, 1);
    return good;
}

static void full(void)
{
    char ballast[4096];
    path_of(ballast, sizeof ballast, "ballast");
    uint64_t X = 32768, W = 4096; /* 288 KiB a tick */
    if (g_rank == 0) {
        int fd = open(ballast, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        static char b[1 << 20];
        memset(b, 0x5A, sizeof b);
        EXPECT(fd >= 0 && write(fd, b, sizeof b) == (ssize_t)sizeof b, "ballast %s: %s", ballast, strerror(errno));
        if (fd >= 0) close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 1. full, then room again: the retry commits the same data */
    geom_t g = {0};
    h5l_file_t *f = make_file("retry.h5", &g, X, W);
    uint64_t good = fill_up(f, &g, "retry.h5");
    snapshot("full-failed", "retry.h5", &g, good, 0);
    if (g_rank == 0) EXPECT(unlink(ballast) == 0, "unlink %s: %s", ballast, strerror(errno));
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = h5l_flush(f);
    EXPECT(rc == 0, "retry after freeing space: %s", h5l_errmsg(f));
    EXPECT(h5l_ntick(f) == good + 1, "ntick %llu after the retry", (unsigned long long)h5l_ntick(f));
    check_file("retry.h5", &g, good + 1, 0, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = h5l_close(f);
    /* freeing the ballast left room for the retried tick, not for
     * finalizing (the data a second time): the file is closed, and the
     * close says it is not finalized (docs/api.md) */
    EXPECT(rc == 0 || (strstr(h5l_errmsg(NULL), "not finalized") &&
                       strstr(h5l_errmsg(NULL), "the file was closed with ticks")),
           "close after the retry: %s", h5l_errmsg(NULL));
    check_file("retry.h5", &g, good + 1, 1, 0);
    snapshot("full-retried", "retry.h5", &g, good + 1, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
    char p[4096];
    path_of(p, sizeof p, "retry.h5");
    if (g_rank == 0) unlink(p);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. full, and it stays full: close fails, the ticks stay readable */
    f = make_file("stay.h5", &g, X, W);
    good = fill_up(f, &g, "stay.h5");
    rc = h5l_close(f);
    expect_fail("close on a full file system", rc, h5l_errmsg(NULL), "stay.h5", "no space left on device", "not closed",
                NULL);
    if (g_rank == 0) printf("full: close of stay.h5: %s\n", h5l_errmsg(NULL));
    check_file("stay.h5", &g, good, -1, 1);
    snapshot("full-stay", "stay.h5", &g, good, -1);
    MPI_Barrier(MPI_COMM_WORLD);
    free_geom(&g);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (argc < 3 || (strcmp(argv[1], "full") && strcmp(argv[1], "shim") && strcmp(argv[1], "oom"))) {
        if (!g_rank) fprintf(stderr, "usage: test_faults full|shim|oom DIR [SNAPDIR]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    g_dir = argv[2];
    g_snap = argc > 3 ? argv[3] : NULL;
    /* the application's choice: keep libhdf5's error stacks off stderr
     * (the library reports its own reasons) */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (!strcmp(argv[1], "shim")) {
        g_fired = (long (*)(void))dlsym(RTLD_DEFAULT, "h5l_fault_fired");
        EXPECT(g_fired != NULL, "the fault shim is not loaded (LD_PRELOAD=build/tests/fault_shim.so)");
        if (g_fired) {
            shim_data();
            shim_early();
            shim_journal();
            shim_close();
        }
    } else if (!strcmp(argv[1], "oom")) {
        oom();
    } else {
        full();
    }
    int fails = g_fail, passes = g_pass;
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &passes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize(); /* after failed closes: must return, not crash in libhdf5 */
    if (g_rank == 0) printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
