/* fault_shim.c — an LD_PRELOAD library that makes chosen writes fail, for
 * the fault tests (tests/mpi/test_faults.c, tests/e2e/test_faults.py).
 *
 * Why a shim: a full disk, a failing device or a quota show up only as the
 * result of a write call, deep inside OpenMPI's ompio, libhdf5 or libh5log.
 * strace of a writer shows the pwrite64 system call for all three (data and
 * record blocks from ompio, HDF5 metadata from libh5log's driver, journal
 * frames); the libc symbols they call are pwrite (ompio's posix fbtl,
 * libh5log) and pwritev (ompio, for several pieces). pwrite64, pwritev64,
 * write and writev are intercepted too, so a library that switches call
 * does not silently escape. Not intercepted: aio_write, which ompio uses
 * only for non-blocking MPI-IO (libh5log uses none).
 *
 * The fault is described by environment variables, read again at every
 * call, so a test program can arm and disarm faults with setenv/unsetenv
 * between steps (the count starts again whenever the description changes):
 *
 *   H5L_FAULT_PATH   how the file's path (/proc/self/fd/N) ends, e.g.
 *                    "/run.h5" or ".h5lj" (an end, not any substring:
 *                    ompio's shared-file-pointer file for run.h5 is
 *                    run.h5_cid-0-PID.sm in its session directory); unset:
 *                    no fault, every call passes straight through
 *   H5L_FAULT_CALL   the first matching call that fails, 1-based (default 1)
 *   H5L_FAULT_TIMES  how many matching calls fail from there (default 1;
 *                    0: every one until the description changes — a disk
 *                    that stays full)
 *   H5L_FAULT_KIND   enospc (default) | eio: the call writes nothing and
 *                    fails with that errno; short[:N]: the first failing
 *                    call writes only N bytes (default half) and returns N,
 *                    later failing calls fail with ENOSPC — how a filling
 *                    disk looks (a short write, then ENOSPC)
 *   H5L_FAULT_SIZE   the first failing call is the CALL-th one writing
 *                    exactly this many bytes; the TIMES-1 failing calls
 *                    after it are the next ones on the file, any size
 *   H5L_FAULT_RANK   only the MPI process of this rank (OMPI_COMM_WORLD_RANK)
 *   H5L_FAULT_OP     write (default) | read: which calls the fault is for.
 *                    Reads (pread, pread64, preadv, preadv64, read) fail
 *                    with EIO whatever the kind, except that short[:N]
 *                    makes the first one return N bytes; a writer reads
 *                    its data file back only to move bytes it wrote early
 *                    (libcore/src/write/wflush.c)
 *
 * h5l_fault_fired() (found with dlsym) tells a test how many calls failed,
 * so a test can insist its fault really happened. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*pwritev_fn)(int, const struct iovec *, int, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec *, int);
typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*read_fn)(int, void *, size_t);

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char g_key[1024]; /* the description the counters belong to */
static long g_seen;      /* matching calls since the description was set */
static long g_left;      /* failures still to come after the first (-1: all) */
static long g_fired;     /* calls failed, over the whole process */

/* Calls failed so far (for tests). */
long h5l_fault_fired(void)
{
    pthread_mutex_lock(&mu);
    long n = g_fired;
    pthread_mutex_unlock(&mu);
    return n;
}

static void *real(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) abort(); /* no libc below us: nothing sensible to do */
    return p;
}

static long env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* What to do with a call of n bytes on fd. 0: pass through; else the
 * errno to fail with, or -1 for a short write of *keep bytes. */
static int decide_op(int fd, size_t n, size_t *keep, int is_read);
static int decide(int fd, size_t n, size_t *keep) { return decide_op(fd, n, keep, 0); }

static int decide_op(int fd, size_t n, size_t *keep, int is_read)
{
    const char *path = getenv("H5L_FAULT_PATH");
    if (!path || !*path) return 0;
    const char *op = getenv("H5L_FAULT_OP");
    if (is_read != (op && !strcmp(op, "read"))) return 0;
    const char *rank = getenv("H5L_FAULT_RANK");
    if (rank && *rank) {
        const char *me = getenv("OMPI_COMM_WORLD_RANK");
        if (!me) me = getenv("PMIX_RANK");
        if (!me || strtol(me, NULL, 10) != strtol(rank, NULL, 10)) return 0;
    }
    long size = env_long("H5L_FAULT_SIZE", -1);
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = readlink(link, target, sizeof target - 1);
    if (l < 0) return 0;
    target[l] = 0;
    size_t lp = strlen(path);
    if ((size_t)l < lp || strcmp(target + l - lp, path) != 0) return 0;

    const char *kind = getenv("H5L_FAULT_KIND");
    if (!kind || !*kind) kind = "enospc";
    char key[1024];
    snprintf(key, sizeof key, "%s|%d|%s|%s|%s|%s|%s", path, is_read, kind, getenv("H5L_FAULT_CALL") ? getenv("H5L_FAULT_CALL") : "",
             getenv("H5L_FAULT_TIMES") ? getenv("H5L_FAULT_TIMES") : "", rank ? rank : "",
             getenv("H5L_FAULT_SIZE") ? getenv("H5L_FAULT_SIZE") : "");
    long first = env_long("H5L_FAULT_CALL", 1), times = env_long("H5L_FAULT_TIMES", 1);
    int hit = 0, is_first = 0;
    pthread_mutex_lock(&mu);
    if (strcmp(key, g_key) != 0) {
        snprintf(g_key, sizeof g_key, "%s", key);
        g_seen = 0;
        g_left = 0;
    }
    if (g_left) {
        /* the calls after the first failure: any size (the rest of a
         * short write, the next write to a disk that stays full) */
        hit = 1;
        if (g_left > 0) g_left--;
    } else if (g_seen < first && (size < 0 || (size_t)size == n) && ++g_seen == first) {
        hit = is_first = 1;
        g_left = times == 0 ? -1 : times - 1;
    }
    if (hit) g_fired++;
    pthread_mutex_unlock(&mu);
    if (!hit) return 0;
    if (!strcmp(kind, "eio")) return EIO;
    if (!strncmp(kind, "short", 5) && is_first) {
        size_t want = kind[5] == ':' ? (size_t)strtoull(kind + 6, NULL, 10) : n / 2;
        *keep = want < n ? want : (n ? n - 1 : 0);
        return *keep ? -1 : is_read ? EIO : ENOSPC; /* a write of 0 bytes is a failure, not a short write */
    }
    return is_read ? EIO : ENOSPC;
}

static ssize_t do_pwrite(const char *name, int fd, const void *buf, size_t n, off_t off)
{
    pwrite_fn f = (pwrite_fn)real(name);
    size_t keep = 0;
    int d = decide(fd, n, &keep);
    if (d > 0) {
        errno = d;
        return -1;
    }
    return f(fd, buf, d < 0 ? keep : n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) { return do_pwrite("pwrite", fd, buf, n, off); }
ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return do_pwrite("pwrite64", fd, buf, n, off); }

ssize_t write(int fd, const void *buf, size_t n)
{
    write_fn f = (write_fn)real("write");
    size_t keep = 0;
    int d = decide(fd, n, &keep);
    if (d > 0) {
        errno = d;
        return -1;
    }
    return f(fd, buf, d < 0 ? keep : n);
}

/* The first `keep` bytes of iov as a shorter vector in out (at most cnt). */
static int cut_iov(const struct iovec *iov, int cnt, size_t keep, struct iovec *out)
{
    int k = 0;
    for (int i = 0; i < cnt && keep; i++, k++) {
        out[k] = iov[i];
        if (out[k].iov_len > keep) out[k].iov_len = keep;
        keep -= out[k].iov_len;
    }
    return k;
}

static size_t iov_bytes(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt; i++) n += iov[i].iov_len;
    return n;
}

/* pwritev / preadv (is_read) through the fault's decision: one helper,
 * as both take the same vector and a short transfer is the vector cut. */
static ssize_t do_vec(const char *name, int is_read, int fd, const struct iovec *iov, int cnt, off_t off)
{
    pwritev_fn f = (pwritev_fn)real(name); /* (preadv has the same type) */
    size_t keep = 0;
    int d = cnt < 0 ? 0 : decide_op(fd, iov_bytes(iov, cnt), &keep, is_read);
    if (d > 0) {
        errno = d;
        return -1;
    }
    if (d == 0) return f(fd, iov, cnt, off);
    struct iovec *v = malloc((size_t)cnt * sizeof *v);
    if (!v) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t r = f(fd, v, cut_iov(iov, cnt, keep, v), off);
    free(v);
    return r;
}

static ssize_t do_pwritev(const char *name, int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_vec(name, 0, fd, iov, cnt, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev("pwritev", fd, iov, cnt, off);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_pwritev("pwritev64", fd, iov, cnt, off);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    writev_fn f = (writev_fn)real("writev");
    size_t keep = 0;
    int d = cnt < 0 ? 0 : decide(fd, iov_bytes(iov, cnt), &keep);
    if (d > 0) {
        errno = d;
        return -1;
    }
    if (d == 0) return f(fd, iov, cnt);
    struct iovec *v = malloc((size_t)cnt * sizeof *v);
    if (!v) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t r = f(fd, v, cut_iov(iov, cnt, keep, v));
    free(v);
    return r;
}

/* ---- reads (H5L_FAULT_OP=read) ---- */

static ssize_t do_pread(const char *name, int fd, void *buf, size_t n, off_t off)
{
    pread_fn f = (pread_fn)real(name);
    size_t keep = 0;
    int d = decide_op(fd, n, &keep, 1);
    if (d > 0) {
        errno = d;
        return -1;
    }
    return f(fd, buf, d < 0 ? keep : n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off) { return do_pread("pread", fd, buf, n, off); }
ssize_t pread64(int fd, void *buf, size_t n, off_t off) { return do_pread("pread64", fd, buf, n, off); }

ssize_t read(int fd, void *buf, size_t n)
{
    read_fn f = (read_fn)real("read");
    size_t keep = 0;
    int d = decide_op(fd, n, &keep, 1);
    if (d > 0) {
        errno = d;
        return -1;
    }
    return f(fd, buf, d < 0 ? keep : n);
}

static ssize_t do_preadv(const char *name, int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_vec(name, 1, fd, iov, cnt, off);
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off) { return do_preadv("preadv", fd, iov, cnt, off); }
ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    return do_preadv("preadv64", fd, iov, cnt, off);
}
