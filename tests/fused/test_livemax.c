/* test_livemax.c — the daemon keeps at most LIVE_MAX (16) live skeletons
 * open for patching (lfile.c), and gives a slot back when a file goes.
 *
 * Why: each kept skeleton holds an open libhdf5 file; the limit bounds that
 * memory, and the accounting is a counter shared by every file. A file past
 * the limit must still be served right (built in full every tick), and a
 * slot leaked when a file is dropped would silently end patching for every
 * file the daemon opens later. Checked without FUSE, through lfile.h, with
 * 18 live files written by libh5log on one rank (MPI singleton):
 *   1. the first round of ticks: 16 files keep a live skeleton
 *      ("live skeletons kept 16"), the next tick is patched in 16 of them
 *      and built in full in 2, and every file's snapshot has the new shape;
 *   2. the files dropped (unused), then loaded again: the 16 slots are free
 *      again, so the next tick is patched in 16 files once more. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "h5log.h"
#include "lfile.h"
#include "tharness.h"

#define NFILES 18
#define LIVE_LIMIT 16 /* lfile.c's LIVE_MAX */

static char g_dir[64];
static h5l_file_t *g_w[NFILES];
static int g_var[NFILES];
static uint64_t g_rows; /* rows written to every file so far (one per tick) */

static void path_of(int i, char *b, size_t n) { snprintf(b, n, "%s/f%02d.h5", g_dir, i); }

/* One more row of every file, one tick each. */
static int tick_all_writers(void)
{
    for (int i = 0; i < NFILES; i++) {
        float row[4];
        for (int k = 0; k < 4; k++) row[k] = (float)(i * 1000 + (int)g_rows * 10 + k);
        uint64_t st[2] = {g_rows, 0}, ct[2] = {1, 4};
        if (h5l_put(g_w[i], g_var[i], st, ct, row) || h5l_flush(g_w[i])) {
            fprintf(stderr, "  writer %d: %s\n", i, h5l_errmsg(g_w[i]));
            return -1;
        }
    }
    g_rows++;
    return 0;
}

static int open_writers(void)
{
    for (int i = 0; i < NFILES; i++) {
        char p[128];
        path_of(i, p, sizeof p);
        int dims[2];
        uint64_t chunk[2] = {1, 4};
        if (h5l_create(p, MPI_COMM_WORLD, NULL, &g_w[i]) || h5l_def_dim(g_w[i], "time", H5L_UNLIMITED, &dims[0]) ||
            h5l_def_dim(g_w[i], "x", 4, &dims[1]) ||
            h5l_def_var(g_w[i], "/v", H5T_NATIVE_FLOAT, 2, dims, chunk, &g_var[i])) {
            fprintf(stderr, "  writer %d: %s\n", i, h5l_errmsg(g_w[i]));
            return -1;
        }
    }
    return 0;
}

/* The number after key in the daemon's statistics now, -1 if absent. */
static long stat_now(const char *key)
{
    char *t = hfs_lfile_stats_text();
    const char *p = t ? strstr(t, key) : NULL;
    long n = p ? atol(p + strlen(key)) : -1;
    free(t);
    return n;
}

#define KEPT "live skeletons kept "
#define PATCHED "patched in place "

static void ignore_new(void *ctx, uint64_t parent, const char *name)
{
    (void)ctx;
    (void)parent;
    (void)name;
}

/* Every file loaded (lf[i]) and snapshotted at the newest tick g_rows:
 * waits for the builder thread (a lookup serves the older snapshot while a
 * build runs). Checks the snapshot's shape. */
static void snapshot_all(hfs_lfile_t **lf)
{
    hfs_lfile_tick_all(ignore_new, NULL, 1e9); /* load the new ticks */
    for (int i = 0; i < NFILES; i++) {
        char p[128];
        path_of(i, p, sizeof p);
        h5l_err_t e = {0};
        if (!lf[i]) {
            struct stat st;
            CHECK_EQ(stat(p, &st), 0);
            CHECK_EQ(hfs_lfile_get(p, st.st_dev, st.st_ino, &lf[i], &e), 0);
            if (!lf[i]) continue;
        }
        hfs_snap_t *s = NULL;
        for (int tries = 0; tries < 3000; tries++) {
            hfs_snap_unref(s);
            s = NULL;
            CHECK_EQ(hfs_lfile_snapshot(lf[i], &s, &e), 0);
            if (!s || s->tick == g_rows) break;
            struct timespec ts = {0, 10000000L};
            nanosleep(&ts, NULL);
        }
        CHECK(s != NULL);
        if (!s) continue;
        CHECK_EQ(s->tick, g_rows);
        CHECK_EQ(s->skel->nvars, 1);
        if (s->skel->nvars == 1) CHECK_EQ(s->skel->vars[0].shape[0], g_rows);
        hfs_snap_unref(s);
    }
}

static void test_live_limit(void)
{
    CHECK_EQ(hfs_lfile_init((size_t)64 << 20), 0);
    hfs_lfile_t *lf[NFILES] = {0};
    /* 1. all loaded at tick 2: 16 keep a live skeleton */
    snapshot_all(lf);
    CHECK_EQ(stat_now(KEPT), LIVE_LIMIT);
    long p0 = stat_now(PATCHED);
    CHECK(p0 >= 0);
    CHECK_EQ(tick_all_writers(), 0);
    snapshot_all(lf);
    long p1 = stat_now(PATCHED);
    CHECK_EQ(p1 - p0, LIVE_LIMIT); /* and 2 built in full */
    CHECK_EQ(stat_now(KEPT), LIVE_LIMIT);
    /* 2. dropped, then loaded again: the slots came back */
    for (int i = 0; i < NFILES; i++) {
        hfs_lfile_unref(lf[i]);
        lf[i] = NULL;
    }
    /* the ticker drops files nobody uses (a file the builder thread still
     * holds goes at a later turn) */
    for (int turn = 0; turn < 500 && stat_now(KEPT) != 0; turn++) {
        hfs_lfile_tick_all(ignore_new, NULL, 0.0);
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(stat_now(KEPT), 0);
    CHECK_EQ(tick_all_writers(), 0);
    snapshot_all(lf);
    CHECK_EQ(stat_now(KEPT), LIVE_LIMIT);
    long p2 = stat_now(PATCHED);
    CHECK_EQ(tick_all_writers(), 0);
    snapshot_all(lf);
    CHECK_EQ(stat_now(PATCHED) - p2, LIVE_LIMIT);
    for (int i = 0; i < NFILES; i++) hfs_lfile_unref(lf[i]);
    hfs_lfile_shutdown();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    snprintf(g_dir, sizeof g_dir, "/tmp/h5l-test-livemax.XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = open_writers();
    for (int t = 0; !rc && t < 2; t++) rc = tick_all_writers();
    if (rc) {
        fprintf(stderr, "cannot write the live files\n0 passed, 1 failed\n");
        MPI_Finalize();
        return 1;
    }
    static const th_test_t tests[] = {{"test_live_limit", test_live_limit}};
    int failed = th_run(tests, 1);
    for (int i = 0; i < NFILES; i++) {
        char p[128], j[140];
        path_of(i, p, sizeof p);
        h5l_close(g_w[i]);
        snprintf(j, sizeof j, "%s.h5lj", p);
        unlink(p);
        unlink(j);
    }
    rmdir(g_dir);
    MPI_Finalize();
    return failed ? 1 : 0;
}
