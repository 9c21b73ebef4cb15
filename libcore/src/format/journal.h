/* journal.h — the append-only journal: creating and appending (writer) and
 * scanning frames (readers), with the torn-tail rules of docs/format.md 3.2.
 *
 * A scanner reads the journal through a window of its bytes (from a file
 * descriptor, or from memory for tests and fuzzing), so a reader never holds
 * more than the window and the largest frame, whatever the journal claims.
 * The scanner keeps what it learned about a torn tail between calls: how many
 * bytes must exist before a retry can succeed, and how far the tail is known
 * to be zero, so a live reader polling a stuck tail reads nothing again.
 * Owns its window; frames point into it until the next call. */
#ifndef H5L_JOURNAL_H
#define H5L_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "h5log/codec.h"
#include "h5log_reader.h"
#include "h5log/error.h"

typedef struct h5l_frame {
    uint16_t type;
    const uint8_t *payload; /* valid until the next h5l_jscan_next */
    uint32_t len;
    uint64_t pos, next; /* journal offsets of this frame and of the next */
    int damaged;        /* an optional frame whose payload fails its checksum
                         * (header verified): payload is NULL, skip it */
} h5l_frame_t;

typedef struct h5l_jscan {
    int fd;             /* journal bytes are at fd offsets base.., or: */
    const uint8_t *mem; /* (fd < 0) all journal bytes in memory */
    uint64_t base;
    int live; /* 1: the journal may still grow (sidecar) */
    uint64_t seed;
    const char *what;  /* names the file in messages */
    uint64_t need;     /* a retry needs the journal to reach this length */
    uint64_t zlo, zhi; /* journal bytes [zlo, zhi) are known to be zero */
    uint8_t *buf;      /* the window: journal bytes [wpos, wpos + wlen) */
    size_t cap, wlen;
    uint64_t wpos;
    int werr; /* why the window could not be had: H5L_ENOMEM or H5L_EIO */
} h5l_jscan_t;

/* Set up a scanner (no I/O). For memory, fd = -1 and mem holds the bytes. */
void h5l_jscan_init(h5l_jscan_t *s, int fd, const uint8_t *mem, uint64_t base, int live, uint64_t seed,
                    const char *what);
void h5l_jscan_free(h5l_jscan_t *s);

/* The frame at journal offset pos, with end bytes of journal available.
 * Returns 1 and fills fr for a complete, verified frame; 0 when there is
 * none: a clean end or (live only) a torn tail — then s->need says how long
 * the journal must get before a retry can change the answer; H5L_ECORRUPT
 * when the bytes are damaged (message names `what` and the frame's offset in
 * that file: base + pos), H5L_EIO
 * when reading fails. A frame of an optional type (bit 15) whose header
 * verifies but whose payload does not, with more journal after it, is
 * returned with fr->damaged set and no payload: nothing depends on an
 * optional frame, and its verified header says where the next one starts
 * (docs/format.md 3.2). */
int h5l_jscan_next(h5l_jscan_t *s, uint64_t pos, uint64_t end, h5l_frame_t *fr, h5l_err_t *err);

/* Create (truncate) the sidecar at path with a header for id; *fd gets an
 * O_WRONLY descriptor; the next frame goes at H5L_JHDR_LEN. If copy is not
 * NULL the header bytes are appended to it (the writer keeps every journal
 * byte, to embed an identical copy at close). */
int h5l_journal_create(const char *path, const uint8_t id[16], uint64_t ctime_ns, uint32_t seglog, int *fd,
                       h5l_buf_t *copy, h5l_err_t *err);

/* Append one frame at *off (updated), with one write. With sync, fdatasync
 * after. If copy is not NULL the frame's bytes are appended to it; on
 * failure copy and *off are as they were. A prefix of the frame may have
 * reached the file: readers take it for a torn tail, and may have read it,
 * so the next frame written at *off must begin with the same bytes — the
 * writer keeps the frame and writes it again unchanged (h5l_journal_write). */
int h5l_journal_append(int fd, uint64_t *off, uint16_t type, const void *payload, uint32_t len, uint64_t seed, int sync,
                       const char *what, h5l_buf_t *copy, h5l_err_t *err);

/* Write an encoded frame (n bytes) at *off as h5l_journal_append does:
 * one write, fdatasync with sync, *off and copy advanced only on success. */
int h5l_journal_write(int fd, uint64_t *off, const void *frame, size_t n, int sync, const char *what, h5l_buf_t *copy,
                      h5l_err_t *err);

#endif
