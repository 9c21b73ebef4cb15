/* fdio.h — whole reads and writes at an offset of a file descriptor, in
 * libcore's one error space: H5L_OK or H5L_EIO, the reason (strerror of the
 * errno, the file, the offset) in the message. Short transfers and EINTR
 * are retried here so no caller has to. Used by the journal, the reader,
 * the writer's HDF5 driver and the tools; owns nothing. */
#ifndef H5L_FDIO_H
#define H5L_FDIO_H

#include <stddef.h>
#include <stdint.h>
#include "h5log_reader.h"

/* Read up to n bytes at off into buf. H5L_OK with *got = bytes read (less
 * than n only at the end of the file), or H5L_EIO: err (may be NULL) says
 * "what: reading n bytes at off: reason", errno is left set to the cause
 * and *got holds what was read before it. */
int h5l_fd_read(int fd, void *buf, size_t n, uint64_t off, size_t *got, const char *what, h5l_err_t *err);

/* Read exactly n bytes at off: H5L_OK, or H5L_EIO when reading fails or the
 * file ends first (the message says which; errno is EIO for the latter). */
int h5l_fd_read_all(int fd, void *buf, size_t n, uint64_t off, const char *what, h5l_err_t *err);

/* Write all n bytes of buf at off. H5L_OK, or H5L_EIO: err (may be NULL)
 * says "what: writing n bytes at off: reason" and errno is left set to the
 * cause (a write that makes no progress is ENOSPC). */
int h5l_fd_write(int fd, const void *buf, size_t n, uint64_t off, const char *what, h5l_err_t *err);

/* Write the niov buffers of iov back to back from off (one pwritev where
 * the kernel takes them all; short writes continue where they stopped, so
 * iov is modified). niov <= IOV_MAX. Errors as h5l_fd_write's, n being
 * their total. */
struct iovec;
int h5l_fd_writev(int fd, struct iovec *iov, int niov, uint64_t off, const char *what, h5l_err_t *err);

#endif
