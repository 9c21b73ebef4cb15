/* wlock.c — the writer's lock file (wlock.h).
 *
 * Why a lock file made with O_EXCL and not flock/fcntl: fcntl locks are
 * unreliable or off on some Lustre mounts (flock needs -o flock, localflock
 * is node-local), and NFS before v4 makes them depend on lockd; O_CREAT |
 * O_EXCL is atomic on every POSIX file system the project targets (NFSv3+,
 * Lustre, GPFS, local). A lock file outlives a killed writer, so it says
 * who took it: a lock of this host whose process is gone is stale and
 * taken over; another host's cannot be checked from here and is refused
 * with the holder named, until the user removes it or sets H5L_LOCK_BREAK=1
 * (docs/operations.md). Takeover renames the stale lock aside before
 * making a new one, so two processes that both judged it stale cannot both
 * win: only one rename of it succeeds. */
#include "wlock.h"
#include "h5log/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The start time of process pid (clock ticks since boot, /proc/PID/stat
 * field 22): tells a pid reused by a later process from the locker. 0 if
 * unknown; *zombie (may be NULL) 1 if the process has exited and only
 * waits to be reaped (kill(pid, 0) still succeeds then: an MPI job's rank
 * killed a moment ago). */
static unsigned long long proc_start2(long pid, int *zombie)
{
    if (zombie) *zombie = 0;
    char p[64], b[1024];
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    FILE *fp = fopen(p, "re");
    if (!fp) return 0;
    size_t n = fread(b, 1, sizeof b - 1, fp);
    fclose(fp);
    b[n] = 0;
    char *s = strrchr(b, ')'); /* the command name may hold spaces */
    if (!s) return 0;
    if (zombie && (s[1] == ' ') && (s[2] == 'Z' || s[2] == 'X')) *zombie = 1;
    unsigned long long v = 0;
    /* after ')': state is field 3; starttime is field 22 */
    int field = 2;
    for (char *q = s + 1; *q; q++)
        if (*q == ' ' && ++field == 22) {
            v = strtoull(q + 1, NULL, 10);
            break;
        }
    return v;
}

static unsigned long long proc_start(long pid) { return proc_start2(pid, NULL); }

typedef struct holder {
    char host[256];
    long pid;
    unsigned long long start;
    long long when;
} holder_t;

static int read_holder(const char *lp, holder_t *h, char *raw, size_t cap)
{
    memset(h, 0, sizeof *h);
    raw[0] = 0;
    int fd = open(lp, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, raw, cap - 1);
    close(fd);
    if (n < 0) return -1;
    raw[n] = 0;
    const char *s;
    if ((s = strstr(raw, "host=")) && sscanf(s, "host=%255s", h->host) != 1) h->host[0] = 0;
    if ((s = strstr(raw, "pid="))) h->pid = strtol(s + 4, NULL, 10);
    if ((s = strstr(raw, "start="))) h->start = strtoull(s + 6, NULL, 10);
    if ((s = strstr(raw, "time="))) h->when = strtoll(s + 5, NULL, 10);
    return 0;
}

static void my_host(char *host, size_t n)
{
    if (gethostname(host, n) != 0) snprintf(host, n, "unknown");
    host[n - 1] = 0;
}

/* Is the holder gone? Only answerable on its own host. */
static int stale(const holder_t *h)
{
    char host[256];
    my_host(host, sizeof host);
    if (!h->host[0] || strcmp(h->host, host) != 0 || h->pid <= 0) return 0;
    if (kill((pid_t)h->pid, 0) != 0 && errno == ESRCH) return 1;
    int zombie;
    unsigned long long st = proc_start2(h->pid, &zombie);
    return zombie || (h->start && st && st != h->start); /* gone, or the pid now names a later process */
}

static void describe(const holder_t *h, char *out, size_t n)
{
    char when[64] = "an unknown time";
    time_t t = (time_t)h->when;
    struct tm tm;
    if (h->when && gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
    snprintf(out, n, "process %ld on host %s since %s", h->pid, h->host[0] ? h->host : "?", when);
}

static int breaking(void)
{
    const char *e = getenv(H5L_LOCK_BREAK_ENV);
    return e && strcmp(e, "1") == 0;
}

int h5l_wlock_take(const char *path, char **lockpath, h5l_err_t *err)
{
    *lockpath = NULL;
    char *lp = NULL;
    if (asprintf(&lp, "%s%s", path, H5L_LOCK_SUFFIX) < 0)
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    char host[256], body[512];
    my_host(host, sizeof host);
    long pid = (long)getpid();
    int n = snprintf(body, sizeof body, "h5log writer lock\nhost=%s\npid=%ld\nstart=%llu\ntime=%lld\n", host, pid,
                     proc_start(pid), (long long)time(NULL));
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            int ok = write(fd, body, (size_t)n) == n;
            int e = errno;
            close(fd);
            if (!ok) {
                unlink(lp);
                free(lp);
                return h5l_err_set(err, H5L_EIO, "%s: cannot write its lock file: %s", path, strerror(e));
            }
            *lockpath = lp;
            return H5L_OK;
        }
        if (errno != EEXIST) {
            int e = errno;
            free(lp);
            return h5l_err_set(err, H5L_EIO, "%s: cannot make its lock file%s: %s", path, H5L_LOCK_SUFFIX, strerror(e));
        }
        holder_t h;
        char raw[1024], who[384];
        if (read_holder(lp, &h, raw, sizeof raw) != 0) continue; /* removed meanwhile: try again */
        if (!stale(&h) && !breaking()) {
            describe(&h, who, sizeof who);
            int rc = h5l_err_set(err, H5L_EBUSY,
                                 "%s: the file is open for writing by another writer (%s; lock file %s). If that "
                                 "job is gone, remove the lock file or set %s=1",
                                 path, who, lp, H5L_LOCK_BREAK_ENV);
            free(lp);
            return rc;
        }
        /* stale (or broken on request): move it aside, check it is the
         * one we judged, drop it, then make ours */
        char aside[PATH_MAX];
        snprintf(aside, sizeof aside, "%s.stale.%ld", lp, pid);
        if (rename(lp, aside) != 0) continue;
        holder_t h2;
        char raw2[1024];
        if (read_holder(aside, &h2, raw2, sizeof raw2) == 0 && strcmp(raw, raw2) != 0) {
            /* a fresh lock replaced the stale one between our looks: give it back */
            if (link(aside, lp) != 0) { /* someone else holds it now anyway */
            }
        }
        unlink(aside);
    }
    free(lp);
    return h5l_err_set(err, H5L_EBUSY, "%s: cannot take its lock file%s (others keep taking it)", path,
                       H5L_LOCK_SUFFIX);
}

void h5l_wlock_drop(char *lockpath)
{
    if (!lockpath) return;
    unlink(lockpath);
    free(lockpath);
}

int h5l_wlock_held(const char *path, h5l_err_t *err)
{
    char *lp = NULL;
    if (asprintf(&lp, "%s%s", path, H5L_LOCK_SUFFIX) < 0) return 0;
    holder_t h;
    char raw[1024], who[384];
    int held = read_holder(lp, &h, raw, sizeof raw) == 0 && !stale(&h) && !breaking();
    if (held) {
        describe(&h, who, sizeof who);
        h5l_err_set(err, H5L_EBUSY, "%s: the file is open for writing (%s; lock file %s)", path, who, lp);
    }
    free(lp);
    return held;
}
