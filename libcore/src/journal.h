/* journal.h — the append-only journal: creating and appending (writer) and
 * walking frames (readers). The walk is a pure function over bytes, so the
 * torn-tail rules of docs/format.md 3.2 are tested without files.
 * Owns no memory: frames point into the caller's bytes. */
#ifndef H5L_JOURNAL_H
#define H5L_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "codec.h"
#include "h5log_reader.h"

typedef struct h5l_frame {
    uint16_t type;
    const uint8_t *payload;
    uint32_t len;
    size_t next; /* offset just past this frame (padding included) */
} h5l_frame_t;

/* Decode the frame starting at data[pos] (pos < len is not required).
 * Returns 1 and fills fr when a complete, verified frame is there; 0 when
 * there is none yet (clean end or torn tail); H5L_ECORRUPT (message names
 * `what` and the offset, relative to `base`) when the bytes are damaged. */
int h5l_journal_next(const uint8_t *data, size_t len, size_t pos,
                     uint64_t seed, const char *what, uint64_t base,
                     h5l_frame_t *fr, h5l_err_t *err);

/* Create (truncate) the sidecar at path with a header for id; *fd gets an
 * O_WRONLY descriptor; the next frame goes at H5L_JHDR_LEN. If copy is not
 * NULL the header bytes are appended to it (the writer keeps every journal
 * byte, to embed an identical copy at close). */
int h5l_journal_create(const char *path, const uint8_t id[16],
                       uint64_t ctime_ns, int *fd, h5l_buf_t *copy,
                       h5l_err_t *err);

/* Append one frame at *off (updated), with one write. With sync, fdatasync
 * after. If copy is not NULL the frame's bytes are appended to it; on
 * failure copy is as it was. */
int h5l_journal_append(int fd, uint64_t *off, uint16_t type,
                       const void *payload, uint32_t len, uint64_t seed,
                       int sync, const char *what, h5l_buf_t *copy,
                       h5l_err_t *err);

/* Write all of buf at off, retrying short writes. 0 or -errno. */
int h5l_pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* Read up to n bytes at off, retrying short reads; returns bytes read
 * (less than n only at end of file) or -errno. */
ssize_t h5l_pread_full(int fd, void *buf, size_t n, uint64_t off);

#endif
