/* journal.c — journal frames (docs/format.md 3): scanning with the
 * torn-tail rules, creating, appending.
 *
 * Like LevelDB's log, only the very end of a live journal may be
 * incomplete: a frame whose verified header says it runs past the end is
 * still being written (or its writer died), and a crash may leave zeros.
 * Anything else that fails verification — a header, or a payload with
 * non-zero bytes after it — was committed and then damaged, and is reported
 * with its offset rather than taken for the end. The header's own checksum
 * is what makes a damaged length detectable; without it one flipped length
 * bit turned every later tick into a "torn tail". */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "h5log/codec.h"
#include "h5log/fdio.h"
#include "h5log/format.h"

#define WINDOW ((size_t)1 << 20) /* journal bytes read at once */

void h5l_jscan_init(h5l_jscan_t *s, int fd, const uint8_t *mem, uint64_t base, int live, uint64_t seed,
                    const char *what)
{
    memset(s, 0, sizeof *s);
    s->fd = fd;
    s->mem = mem;
    s->base = base;
    s->live = live;
    s->seed = seed;
    s->what = what;
}

void h5l_jscan_free(h5l_jscan_t *s)
{
    if (!s) return;
    free(s->buf);
    s->buf = NULL;
    s->cap = s->wlen = 0;
}

/* Journal bytes [pos, pos + n) (all inside the available journal) as a
 * pointer into memory or into the window, reading when needed; NULL with
 * s->werr saying why (out of memory is not an I/O error: a caller retries
 * the one, reports the other). */
static const uint8_t *jbytes(h5l_jscan_t *s, uint64_t pos, size_t n, uint64_t end, h5l_err_t *err)
{
    if (s->fd < 0) return s->mem + pos;
    if (pos >= s->wpos && pos + n <= s->wpos + s->wlen) return s->buf + (pos - s->wpos);
    size_t want = n > WINDOW ? n : WINDOW;
    if (want > end - pos) want = (size_t)(end - pos);
    if (want < n) want = n;
    if (s->cap < want) {
        uint8_t *b = realloc(s->buf, want);
        if (!b) {
            s->werr = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory reading the journal", s->what);
            return NULL;
        }
        s->buf = b;
        s->cap = want;
    }
    size_t got;
    h5l_err_t e2;
    if (h5l_fd_read(s->fd, s->buf, want, s->base + pos, &got, s->what, &e2) || got < n) {
        s->wlen = 0;
        s->werr = h5l_err_set(err, H5L_EIO, "%s: reading the journal at %llu: %s", s->what, (unsigned long long)pos,
                    got < n && !e2.code ? "file shrank" : e2.msg);
        return NULL;
    }
    s->wpos = pos;
    s->wlen = got;
    return s->buf;
}

/* 1 if journal bytes [a, end) are all zero (a crash's zero-filled tail),
 * 0 if not, <0 on a read error. Remembers how far it checked. Holes of a
 * sparse file are skipped, not read: a journal can claim gigabytes of them
 * for nothing. */
static int zero_tail(h5l_jscan_t *s, uint64_t a, uint64_t end, h5l_err_t *err)
{
    if (a >= s->zlo && a <= s->zhi)
        a = s->zhi; /* already known zero */
    else
        s->zlo = a;
    while (a < end) {
        if (s->fd >= 0) {
            off_t d = lseek(s->fd, (off_t)(s->base + a), SEEK_DATA);
            uint64_t next = d >= 0 ? (uint64_t)d - s->base : errno == ENXIO ? end : a; /* else: cannot tell */
            if (next > a) {
                a = next < end ? next : end;
                s->zhi = a;
                continue;
            }
        }
        size_t n = end - a < WINDOW ? (size_t)(end - a) : WINDOW;
        const uint8_t *p = jbytes(s, a, n, end, err);
        if (!p) return s->werr;
        for (size_t i = 0; i < n; i++)
            if (p[i]) return 0;
        a += n;
        s->zhi = a;
    }
    return 1;
}

/* A torn tail: not an error while live; corruption in a closed journal. */
static int torn(h5l_jscan_t *s, uint64_t pos, uint64_t need, const char *why, h5l_err_t *err)
{
    if (!s->live)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal ends inside a frame at offset %llu (%s)", s->what,
                           (unsigned long long)(s->base + pos), why);
    s->need = need;
    return 0;
}

int h5l_jscan_next(h5l_jscan_t *s, uint64_t pos, uint64_t end, h5l_frame_t *fr, h5l_err_t *err)
{
    s->need = 0;
    if (s->cap > WINDOW) { /* a big frame's room is not kept for the reader's life */
        free(s->buf);
        s->buf = NULL;
        s->cap = s->wlen = 0;
    }
    if (pos >= end) return 0; /* clean end */
    uint64_t avail = end - pos;
    if (avail < H5L_FRAME_LEN) return torn(s, pos, pos + H5L_FRAME_LEN, "short header", err);
    const uint8_t *h = jbytes(s, pos, H5L_FRAME_LEN, end, err);
    if (!h) return s->werr;
    h5l_frame_hdr_t fh;
    int hs = h5l_frame_hdr_decode(h, s->seed, &fh);
    if (hs == H5L_FRAME_BADSUM) {
        int z = zero_tail(s, pos, end, err);
        if (z < 0) return z;
        if (z) return torn(s, pos, end + 1, "zero-filled tail", err);
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal frame at offset %llu: header fails its checksum", s->what,
                           (unsigned long long)(s->base + pos));
    }
    if (hs == H5L_FRAME_BADVER)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal frame at offset %llu: version %u, length %u", s->what,
                           (unsigned long long)(s->base + pos), fh.version, fh.len);
    uint32_t len = fh.len;
    uint16_t type = fh.type;
    uint64_t sum = fh.sum;
    uint64_t flen = h5l_frame_size(len);
    if (flen > avail) return torn(s, pos, pos + flen, "frame not complete", err);
    const uint8_t *p = jbytes(s, pos, (size_t)flen, end, err);
    if (!p) return s->werr;
    if (h5l_hash(p + H5L_FRAME_LEN, len, s->seed) != sum) {
        int z = zero_tail(s, pos + flen, end, err);
        if (z < 0) return z;
        if (z) return torn(s, pos, end + 1, "last frame incomplete", err);
        if (type & H5L_REC_OPTIONAL) { /* skipped, not lost: nothing depends on it */
            fr->type = type;
            fr->payload = NULL;
            fr->len = 0;
            fr->pos = pos;
            fr->next = pos + flen;
            fr->damaged = 1;
            return 1;
        }
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal frame at offset %llu fails its checksum", s->what,
                           (unsigned long long)(s->base + pos));
    }
    fr->type = type;
    fr->damaged = 0;
    fr->payload = p + H5L_FRAME_LEN;
    fr->len = len;
    fr->pos = pos;
    fr->next = pos + flen;
    return 1;
}

int h5l_journal_create(const char *path, const uint8_t id[16], uint64_t ctime_ns, uint32_t seglog, int *fd,
                       h5l_buf_t *copy, h5l_err_t *err)
{
    int d = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d < 0) return h5l_err_set(err, H5L_EIO, "%s: cannot create journal: %s", path, strerror(errno));
    h5l_jhdr_t h = {.version = H5L_FORMAT_VERSION, .ctime_ns = ctime_ns, .seglog = seglog};
    memcpy(h.id, id, 16);
    uint8_t hdr[H5L_JHDR_LEN];
    h5l_jhdr_encode(&h, hdr);
    h5l_err_t e2;
    if (h5l_fd_write(d, hdr, sizeof hdr, 0, path, &e2)) {
        close(d);
        return h5l_err_set(err, H5L_EIO, "cannot write the journal header: %s", e2.msg);
    }
    if (copy) {
        h5l_buf_put(copy, hdr, sizeof hdr);
        if (copy->oom) {
            close(d);
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
        }
    }
    *fd = d;
    return H5L_OK;
}

int h5l_journal_write(int fd, uint64_t *off, const void *frame, size_t n, int sync, const char *what, h5l_buf_t *copy,
                      h5l_err_t *err)
{
    /* room in the copy first: once the frame is on disk nothing may fail */
    if (copy && h5l_buf_reserve(copy, n)) {
        copy->oom = 0;
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory keeping a journal record", what);
    }
    /* One write per frame (h5l_fd_write loops only on short writes): a
     * reader sees a prefix (torn, waited for) or the whole frame. */
    h5l_err_t e2 = {0};
    int e = h5l_fd_write(fd, frame, n, *off, what, &e2) ? errno : 0;
    if (!e && sync && fdatasync(fd) != 0) e = errno;
    if (e)
        return h5l_err_set(err, H5L_EIO, "%s: journal append of %zu bytes at %llu failed: %s", what, n,
                           (unsigned long long)*off, strerror(e));
    if (copy) h5l_buf_put(copy, frame, n);
    *off += n;
    return H5L_OK;
}

int h5l_journal_append(int fd, uint64_t *off, uint16_t type, const void *payload, uint32_t len, uint64_t seed, int sync,
                       const char *what, h5l_buf_t *copy, h5l_err_t *err)
{
    if (len > H5L_FRAME_MAX)
        return h5l_err_set(err, H5L_EINVAL, "%s: a journal frame of %u bytes exceeds the %u-byte limit", what, len,
                           H5L_FRAME_MAX);
    h5l_buf_t b = {0};
    h5l_frame_encode(&b, type, payload, len, seed);
    int rc = b.oom ? h5l_err_set(err, H5L_ENOMEM, "%s: out of memory framing a journal record", what)
                   : h5l_journal_write(fd, off, b.p, b.len, sync, what, copy, err);
    h5l_buf_free(&b);
    return rc;
}
