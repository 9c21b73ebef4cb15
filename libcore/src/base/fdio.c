/* fdio.c — pread/pwrite loops (see fdio.h). errno survives the message
 * formatting, so a caller that must hand an errno on (the writer's HDF5
 * driver reports one to libhdf5's error stack) still can. */
#include "h5log/fdio.h"

#include <errno.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h5log/error.h"

static int io_fail(int e, const char *op, size_t n, uint64_t off, const char *what, h5l_err_t *err)
{
    h5l_err_set(err, H5L_EIO, "%s: %s %zu bytes at %llu: %s", what ? what : "(file)", op, n, (unsigned long long)off,
                strerror(e));
    errno = e;
    return H5L_EIO;
}

int h5l_fd_read(int fd, void *buf, size_t n, uint64_t off, size_t *got, const char *what, h5l_err_t *err)
{
    uint8_t *p = buf;
    size_t done = 0;
    *got = 0;
    while (done < n) {
        ssize_t r = pread(fd, p + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            *got = done;
            return io_fail(errno, "reading", n, off, what, err);
        }
        if (r == 0) break;
        done += (size_t)r;
    }
    *got = done;
    return H5L_OK;
}

int h5l_fd_read_all(int fd, void *buf, size_t n, uint64_t off, const char *what, h5l_err_t *err)
{
    size_t got;
    int rc = h5l_fd_read(fd, buf, n, off, &got, what, err);
    if (rc) return rc;
    if (got < n) {
        h5l_err_set(err, H5L_EIO, "%s: reading %zu bytes at %llu: the file ends after %zu of them",
                    what ? what : "(file)", n, (unsigned long long)off, got);
        errno = EIO;
        return H5L_EIO;
    }
    return H5L_OK;
}

int h5l_fd_write(int fd, const void *buf, size_t n, uint64_t off, const char *what, h5l_err_t *err)
{
    const uint8_t *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, p + done, n - done, (off_t)(off + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_fail(errno, "writing", n, off, what, err);
        }
        if (w == 0) return io_fail(ENOSPC, "writing", n, off, what, err); /* no progress: the device is full */
        done += (size_t)w;
    }
    return H5L_OK;
}

int h5l_fd_writev(int fd, struct iovec *iov, int niov, uint64_t off, const char *what, h5l_err_t *err)
{
    size_t n = 0, done = 0;
    for (int i = 0; i < niov; i++) n += iov[i].iov_len;
    while (niov > 0) {
        if (!iov->iov_len) { /* nothing left of this one */
            iov++, niov--;
            continue;
        }
        ssize_t w = pwritev(fd, iov, niov, (off_t)(off + done));
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_fail(errno, "writing", n, off, what, err);
        }
        if (w == 0) return io_fail(ENOSPC, "writing", n, off, what, err);
        done += (size_t)w;
        for (size_t left = (size_t)w; left;) { /* skip what went out */
            size_t k = left < iov->iov_len ? left : iov->iov_len;
            iov->iov_base = (uint8_t *)iov->iov_base + k;
            iov->iov_len -= k;
            left -= k;
            if (!iov->iov_len) iov++, niov--;
        }
    }
    return H5L_OK;
}
