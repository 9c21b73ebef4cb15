/* test_ticker.c — the ticker's rounds between ticks (lfile.c with watch.c):
 * what a round woken by a journal write does for a file in use.
 *
 * Why: with inotify, most new ticks are loaded by woken rounds, not by the
 * round every tick. A woken round that loads a tick must also start its
 * skeleton's build at once, as the periodic round does, so the next lookup
 * finds it ready (a review found it never did: the idle rule was fed 0 s).
 * And a commit made while a file is being opened, before its watch exists,
 * leaves no event: the first woken round must refresh the file anyway.
 * Checked without FUSE, through lfile.h, on a live file written by libh5log
 * on one rank (MPI singleton). */
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
#include "watch.h"

static char g_dir[64], g_path[128];
static h5l_file_t *g_w;
static int g_var;
static uint64_t g_rows;

static int commit_row(void)
{
    float r[4] = {1, 2, 3, (float)g_rows};
    uint64_t st[2] = {g_rows, 0}, ct[2] = {1, 4};
    if (h5l_put(g_w, g_var, st, ct, r) || h5l_flush(g_w)) {
        fprintf(stderr, "  writer: %s\n", h5l_errmsg(g_w));
        return -1;
    }
    g_rows++;
    return 0;
}

static long builds(void)
{
    char *t = hfs_lfile_stats_text();
    const char *p = t ? strstr(t, "skeletons: built ") : NULL;
    long n = p ? atol(p + strlen("skeletons: built ")) : -1;
    free(t);
    return n;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int g_news;
static void on_new(void *ctx, uint64_t parent, const char *name)
{
    (void)ctx;
    (void)parent;
    (void)name;
    g_news++;
}

/* Wait up to 5 s for the build count to pass n. */
static long builds_after(long n)
{
    long b = builds();
    for (int i = 0; i < 500 && b <= n; i++) {
        nap_ms(10);
        b = builds();
    }
    return b;
}

static void test_woken_round(void)
{
    CHECK_EQ(commit_row(), 0);
    struct stat st;
    CHECK_EQ(stat(g_path, &st), 0);
    hfs_lfile_t *lf = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(hfs_lfile_get(g_path, st.st_dev, st.st_ino, &lf, &e), 0);
    if (!lf) return;
    hfs_lfile_set_entry(lf, 1, "live.h5");
    CHECK_EQ(hfs_watch_count(), 1); /* the sidecar */
    /* a commit whose event is never read (as if made before the watch):
     * the first woken round refreshes the file all the same */
    CHECK_EQ(commit_row(), 0);
    hfs_lfile_tick_changed(on_new, NULL, 30.0);
    CHECK_EQ(hfs_lfile_ntick(lf), 2);
    hfs_watch_drain((int[8]){0}, 8, &(int){0}); /* (that commit's event) */
    hfs_snap_t *s = NULL;
    CHECK_EQ(hfs_lfile_snapshot(lf, &s, &e), 0); /* in use: it has a snapshot */
    if (s) CHECK_EQ(s->tick, 2);
    hfs_snap_unref(s);
    /* a commit, its event read: the woken round loads it, says so, and
     * starts the build at once */
    long b0 = builds();
    int news0 = g_news;
    CHECK_EQ(commit_row(), 0);
    nap_ms(20);
    hfs_lfile_watch_events();
    hfs_lfile_tick_changed(on_new, NULL, 30.0);
    CHECK_EQ(hfs_lfile_ntick(lf), 3);
    CHECK(g_news > news0);
    long b1 = builds_after(b0);
    if (b1 <= b0) fprintf(stderr, "  no build started by the woken round (%ld before, %ld after)\n", b0, b1);
    CHECK(b1 > b0);
    s = NULL;
    CHECK_EQ(hfs_lfile_snapshot(lf, &s, &e), 0); /* ready: no build waited for */
    if (s) CHECK_EQ(s->tick, 3);
    hfs_snap_unref(s);
    CHECK_EQ(builds(), b1);
    /* nothing written: a woken round loads nothing and says nothing (the
     * first one sends the landed build's news, which is pending) */
    hfs_lfile_tick_changed(on_new, NULL, 30.0);
    int news1 = g_news;
    hfs_lfile_watch_events();
    hfs_lfile_tick_changed(on_new, NULL, 30.0);
    CHECK_EQ(hfs_lfile_ntick(lf), 3);
    CHECK_EQ(g_news, news1);
    hfs_lfile_unref(lf);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    snprintf(g_dir, sizeof g_dir, "/tmp/h5ltick.XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    snprintf(g_path, sizeof g_path, "%s/live.h5", g_dir);
    int dims[2];
    uint64_t chunk[2] = {1, 4};
    if (h5l_create(g_path, MPI_COMM_WORLD, NULL, &g_w) || h5l_def_dim(g_w, "time", H5L_UNLIMITED, &dims[0]) ||
        h5l_def_dim(g_w, "x", 4, &dims[1]) || h5l_def_var(g_w, "/v", H5T_NATIVE_FLOAT, 2, dims, chunk, &g_var)) {
        fprintf(stderr, "writer: %s\n", h5l_errmsg(g_w));
        return 1;
    }
    if (hfs_lfile_init((size_t)64 << 20) || hfs_watch_init()) return 1;
    static const th_test_t tests[] = {{"woken_round", test_woken_round}};
    int failed = th_run(tests, 1);
    hfs_lfile_shutdown();
    hfs_watch_shutdown();
    h5l_close(g_w);
    char p[160];
    snprintf(p, sizeof p, "%s/live.h5", g_dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/live.h5.h5lj", g_dir);
    unlink(p);
    rmdir(g_dir);
    MPI_Finalize();
    return failed ? 1 : 0;
}
