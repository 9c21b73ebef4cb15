/* test_watch.c — inotify watches on journals (watch.h).
 *
 * Why: the ticker relies on a drain naming every watched file written
 * since the last drain (once, however many writes), nothing for files not
 * written or no longer watched, and on every call being harmless when
 * inotify is absent (then polling alone serves). */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tharness.h"
#include "watch.h"

static char dir[] = "/tmp/h5lwatch.XXXXXX";

static char *file(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void append(const char *name, int times)
{
    int fd = open(file(name), O_WRONLY | O_CREAT | O_APPEND, 0644);
    CHECK(fd >= 0);
    for (int i = 0; i < times; i++) CHECK(write(fd, "x", 1) == 1);
    close(fd);
}

static int readable(int ms)
{
    struct pollfd p = {.fd = hfs_watch_fd(), .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void test_disabled(void)
{
    /* before init: no descriptor, and nothing fails */
    CHECK_EQ(hfs_watch_fd(), -1);
    append("a", 1);
    CHECK_EQ(hfs_watch_add(file("a")), -1);
    hfs_watch_rm(3);
    int wds[4], lost = 1;
    CHECK_EQ(hfs_watch_drain(wds, 4, &lost), 0);
    CHECK_EQ(lost, 0);
}

static void test_writes_named_once(void)
{
    CHECK_EQ(hfs_watch_init(), 0);
    CHECK(hfs_watch_fd() >= 0);
    append("a", 1);
    append("b", 1);
    append("c", 1);
    int wa = hfs_watch_add(file("a")), wb = hfs_watch_add(file("b")), wc = hfs_watch_add(file("c"));
    CHECK(wa >= 0 && wb >= 0 && wc >= 0 && wa != wb && wb != wc);
    CHECK_EQ(hfs_watch_count(), 3);
    int wds[8];
    int lost = 0;
    CHECK_EQ(hfs_watch_drain(wds, 8, &lost), 0); /* nothing written since */
    CHECK_EQ(lost, 0);
    CHECK(!readable(0));
    append("a", 50); /* many writes: one name */
    append("c", 3);
    CHECK(readable(1000));
    size_t n = hfs_watch_drain(wds, 8, &lost);
    CHECK_EQ(n, 2);
    CHECK_EQ(lost, 0);
    int sa = 0, sc = 0;
    for (size_t i = 0; i < n; i++) {
        sa += wds[i] == wa;
        sc += wds[i] == wc;
    }
    CHECK(sa == 1 && sc == 1);
    CHECK_EQ(hfs_watch_drain(wds, 8, &lost), 0); /* drained */
    /* more names than room: the rest are said to be lost (the caller then
     * refreshes every watched file), none is made up */
    append("a", 1);
    append("b", 1);
    append("c", 1);
    CHECK(readable(1000));
    CHECK_EQ(hfs_watch_drain(wds, 1, &lost), 1);
    CHECK_EQ(lost, 1);
    CHECK(wds[0] == wa || wds[0] == wb || wds[0] == wc);
    CHECK_EQ(hfs_watch_drain(wds, 8, &lost), 0);
    CHECK_EQ(lost, 0);
    /* no longer watched: its writes name nothing (the removal's own
     * IN_IGNORED event may name it once) */
    hfs_watch_rm(wb);
    CHECK_EQ(hfs_watch_count(), 2);
    hfs_watch_drain(wds, 8, &lost);
    append("b", 5);
    usleep(20000);
    n = hfs_watch_drain(wds, 8, &lost);
    for (size_t i = 0; i < n; i++) CHECK(wds[i] != wb);
    hfs_watch_rm(wb); /* twice: harmless */
    /* a removed file (the sidecar at the writer's close) names its watch */
    CHECK_EQ(unlink(file("c")), 0);
    CHECK(readable(1000));
    n = hfs_watch_drain(wds, 8, &lost);
    CHECK(n >= 1 && wds[0] == wc);
    hfs_watch_rm(wc); /* the kernel dropped it already: harmless */
    /* a path that is not there */
    size_t failed = hfs_watch_failed();
    CHECK_EQ(hfs_watch_add(file("missing")), -1);
    CHECK_EQ(hfs_watch_failed(), failed + 1);
    hfs_watch_shutdown();
    CHECK_EQ(hfs_watch_fd(), -1);
    CHECK_EQ(hfs_watch_count(), 0);
    hfs_watch_rm(wa); /* after shutdown: harmless */
}

static void cleanup(void)
{
    const char *names[] = {"a", "b", "c"};
    for (size_t i = 0; i < 3; i++) unlink(file(names[i]));
    rmdir(dir);
}

static void test_setup(void)
{
    CHECK(mkdtemp(dir) != NULL);
    atexit(cleanup);
}

TEST_MAIN(T(test_setup), T(test_disabled), T(test_writes_named_once))
