/* watch.c — inotify watches on live journals (see watch.h).
 *
 * One descriptor for the whole daemon, non-blocking, close-on-exec. Events
 * asked for: IN_MODIFY (an append: possibly a committed tick) and
 * IN_DELETE_SELF / IN_MOVE_SELF (the writer closed the file: its journal
 * was embedded and the sidecar removed; the file's last poll then sees the
 * CLOSE record). The kernel merges identical unread events, so a burst of
 * appends costs one wakeup. */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <unistd.h>

static atomic_int g_fd = -1;
static atomic_size_t g_count, g_failed;

int hfs_watch_init(void)
{
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    atomic_store(&g_fd, fd);
    atomic_store(&g_count, 0);
    atomic_store(&g_failed, 0);
    return fd >= 0 ? 0 : -1;
}

void hfs_watch_shutdown(void)
{
    int fd = atomic_exchange(&g_fd, -1);
    if (fd >= 0) close(fd); /* drops every watch */
    atomic_store(&g_count, 0);
}

int hfs_watch_fd(void) { return atomic_load(&g_fd); }

int hfs_watch_add(const char *path)
{
    int fd = atomic_load(&g_fd);
    if (fd < 0) return -1;
    int wd = inotify_add_watch(fd, path, IN_MODIFY | IN_DELETE_SELF | IN_MOVE_SELF);
    if (wd < 0) {
        atomic_fetch_add(&g_failed, 1);
        return -1;
    }
    atomic_fetch_add(&g_count, 1);
    return wd;
}

void hfs_watch_rm(int wd)
{
    int fd = atomic_load(&g_fd);
    if (fd < 0 || wd < 0) return;
    (void)inotify_rm_watch(fd, wd); /* EINVAL: the kernel dropped it already */
    size_t c = atomic_load(&g_count);
    while (c && !atomic_compare_exchange_weak(&g_count, &c, c - 1)) {}
}

size_t hfs_watch_drain(int *wds, size_t cap, int *lost)
{
    int fd = atomic_load(&g_fd);
    size_t n = 0;
    *lost = 0;
    if (fd < 0) return 0;
    /* aligned as the kernel's records are */
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0) break; /* EAGAIN: drained */
        for (char *p = buf; p < buf + got;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (ev->wd < 0 || (ev->mask & IN_Q_OVERFLOW)) { /* events were dropped */
                *lost = 1;
                continue;
            }
            size_t i = 0;
            while (i < n && wds[i] != ev->wd) i++;
            if (i == n) {
                if (n < cap)
                    wds[n++] = ev->wd;
                else
                    *lost = 1;
            }
        }
    }
    return n;
}

size_t hfs_watch_count(void) { return atomic_load(&g_count); }
size_t hfs_watch_failed(void) { return atomic_load(&g_failed); }
