/* journal.c — journal framing (docs/format.md 3). Like LevelDB's log, a
 * frame that runs past the data or fails its checksum as the very last
 * frame is a torn tail — the writer may still be writing it, or died while
 * writing it — and is not an error; a bad frame with bytes after it can only
 * be damage, and is reported. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include "codec.h"
#include "format.h"

int h5l_journal_next(const uint8_t *data, size_t len, size_t pos,
                     uint64_t seed, const char *what, uint64_t base,
                     h5l_frame_t *fr, h5l_err_t *err)
{
    if (pos >= len || len - pos < H5L_FRAME_LEN) return 0;
    const uint8_t *h = data + pos;
    uint32_t plen = h5l_get_le32(h);
    uint16_t type = (uint16_t)(h[4] | (h[5] << 8));
    uint16_t ver = (uint16_t)(h[6] | (h[7] << 8));
    uint64_t sum = h5l_get_le64(h + 8);
    uint64_t flen = H5L_FRAME_LEN + (uint64_t)plen;
    flen = (flen + 7) & ~(uint64_t)7;
    if (flen > len - pos) return 0; /* runs past the data: torn or unwritten */
    if (h5l_hash2(h + 4, 4, h + H5L_FRAME_LEN, plen, seed) != sum) {
        if (pos + flen == len) return 0; /* last frame: torn write */
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: journal record at offset %llu fails its checksum",
                           what, (unsigned long long)(base + pos));
    }
    if (ver != 1 || (type != H5L_REC_TICK && type != H5L_REC_CLOSE))
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: journal record at offset %llu has unknown type %u version %u",
                           what, (unsigned long long)(base + pos), type, ver);
    fr->type = type;
    fr->payload = h + H5L_FRAME_LEN;
    fr->len = plen;
    fr->next = pos + (size_t)flen;
    return 1;
}

int h5l_pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

ssize_t h5l_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, p + got, n - got, (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -errno;
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int h5l_journal_create(const char *path, const uint8_t id[16],
                       uint64_t ctime_ns, int *fd, h5l_buf_t *copy,
                       h5l_err_t *err)
{
    int d = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (d < 0)
        return h5l_err_set(err, H5L_EIO, "%s: cannot create journal: %s", path, strerror(errno));
    h5l_jhdr_t h = {.version = H5L_FORMAT_VERSION, .ctime_ns = ctime_ns};
    memcpy(h.id, id, 16);
    uint8_t hdr[H5L_JHDR_LEN];
    h5l_jhdr_encode(&h, hdr);
    int rc = h5l_pwrite_full(d, hdr, sizeof hdr, 0);
    if (rc) {
        close(d);
        return h5l_err_set(err, H5L_EIO, "%s: cannot write journal header: %s", path, strerror(-rc));
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

int h5l_journal_append(int fd, uint64_t *off, uint16_t type,
                       const void *payload, uint32_t len, uint64_t seed,
                       int sync, const char *what, h5l_buf_t *copy,
                       h5l_err_t *err)
{
    h5l_buf_t tmp = {0};
    h5l_buf_t *b = copy ? copy : &tmp;
    size_t before = b->len;
    h5l_frame_encode(b, type, payload, len, seed);
    int rc = 0;
    if (b->oom) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory framing a journal record", what);
    } else {
        /* One write per frame: a reader sees either a prefix (torn, retried)
         * or the whole frame, never a frame stitched from two writes. */
        int e = h5l_pwrite_full(fd, b->p + before, b->len - before, *off);
        if (!e && sync && fdatasync(fd) != 0) e = -errno;
        if (e) rc = h5l_err_set(err, H5L_EIO, "%s: journal append failed: %s", what, strerror(-e));
        else *off += b->len - before;
    }
    if (rc) { /* leave the caller's copy as it was */
        b->oom = 0;
        b->len = before;
    }
    h5l_buf_free(&tmp);
    return rc;
}
