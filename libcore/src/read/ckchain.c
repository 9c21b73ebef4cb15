/* ckchain.c — the chain of checkpoints a reader starts from (ckchain.h,
 * format.md 3.5, Readers). Only headers and fixed fields are read here;
 * each frame is decoded (and verified again) when the reader applies it. */
#include "ckchain.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/grow.h"

#define SWIN ((size_t)1 << 20) /* backward search window */

/* The fixed fields of a checkpoint (format.md 3.5, offsets 0..47). */
typedef struct fixed {
    uint64_t first, last, tickpos, selfpos, prevpos;
    uint32_t slen; /* its summary's bytes (0: none) */
} fixed_t;

#define CKPT_TICK_MIN 9 /* varints of a tick's entry (h5l_ckpt_encode), a byte each at least */

/* Verify the frame at journal offset pos (its header's checksum, its type;
 * with whole, n bytes: the whole frame, and its payload's checksum) and
 * read its fixed fields, with the checks h5l_ckpt_decode makes of them. 0,
 * or -1. */
static int frame_fixed(const uint8_t *frame, size_t n, int whole, uint64_t seed, uint64_t pos, fixed_t *f)
{
    h5l_frame_hdr_t h;
    if (n < H5L_FRAME_LEN + H5L_CKPT_HDR || h5l_frame_hdr_decode(frame, seed, &h) != H5L_FRAME_OK ||
        h.type != H5L_REC_CKPT || h.len < H5L_CKPT_HDR ||
        (whole && (h5l_frame_size(h.len) != n || h5l_hash(frame + H5L_FRAME_LEN, h.len, seed) != h.sum)))
        return -1;
    const uint8_t *p = frame + H5L_FRAME_LEN;
    f->first = h5l_get_le64(p);
    f->last = h5l_get_le64(p + 8);
    f->tickpos = h5l_get_le64(p + 16);
    f->selfpos = h5l_get_le64(p + 24);
    f->prevpos = h5l_get_le64(p + 32);
    f->slen = (uint32_t)h5l_get_le64(p + 40);
    if (f->slen && (uint64_t)h.len < (uint64_t)H5L_CKPT_HDR + 8 + f->slen) return -1;
    /* each tick's entry takes at least CKPT_TICK_MIN bytes: a segment
     * cannot claim more ticks than its bytes hold (the reader sizes its
     * tables by the chain's last tick before decoding any segment) */
    if (f->last >= f->first && f->last - f->first >= (h.len - H5L_CKPT_HDR) / CKPT_TICK_MIN) return -1;
    if ((h5l_get_le64(p + 40) >> 32) || f->first == 0 || f->last < f->first || f->selfpos != pos || f->tickpos >= pos ||
        f->tickpos < H5L_JHDR_LEN || f->prevpos >= f->tickpos || (f->first == 1) != (f->prevpos == 0) ||
        (f->prevpos && f->prevpos < H5L_JHDR_LEN))
        return -1;
    return 0;
}

/* Read and verify the checkpoint frame at journal offset pos (< end): with
 * whole, all of it (frame_fixed); else its header and fixed fields only,
 * the rest being checked when it is decoded (h5l_ckpt_decode), which makes
 * the reader read the whole journal if it fails: the chain's older links
 * are then read once, not twice. 1 and *n its size (with whole, *buf its
 * bytes, owned) on success, 0 when it is not a usable checkpoint,
 * H5L_ENOMEM. */
/* The summary of the frame whose first `have` bytes are at fr (its fixed
 * fields in f), read from the file when it lies further, checked against
 * its checksum: 1 and *sum (owned, NULL when it has none), 0 when the
 * checksum fails or it cannot be read, H5L_ENOMEM. */
static int frame_sum(int fd, uint64_t base, uint64_t pos, const uint8_t *fr, size_t have, const fixed_t *f,
                     uint64_t seed, const char *what, uint8_t **sum)
{
    *sum = NULL;
    if (!f->slen) return 1;
    size_t at = H5L_FRAME_LEN + H5L_CKPT_HDR + 8;
    uint8_t *s = malloc(f->slen);
    if (!s) return H5L_ENOMEM;
    if (at + f->slen <= have)
        memcpy(s, fr + at, f->slen);
    else if (h5l_fd_read_all(fd, s, f->slen, base + pos + at, what, NULL)) {
        free(s);
        return 0;
    }
    if (h5l_hash(s, f->slen, seed) != h5l_get_le64(fr + at - 8)) {
        free(s);
        return 0;
    }
    *sum = s;
    return 1;
}

static int frame_at(int fd, uint64_t base, uint64_t pos, uint64_t end, uint64_t seed, const char *what, int whole,
                    uint8_t **buf, size_t *n, fixed_t *f, uint8_t **sum)
{
    *sum = NULL;
    uint8_t h[H5L_FRAME_LEN];
    h5l_frame_hdr_t fh;
    *buf = NULL;
    if (pos < H5L_JHDR_LEN || pos > end || end - pos < H5L_FRAME_LEN ||
        h5l_fd_read_all(fd, h, sizeof h, base + pos, what, NULL) ||
        h5l_frame_hdr_decode(h, seed, &fh) != H5L_FRAME_OK || fh.type != H5L_REC_CKPT ||
        h5l_frame_size(fh.len) > end - pos)
        return 0;
    *n = (size_t)h5l_frame_size(fh.len);
    if (!whole) { /* the first bytes: header, fixed fields, the summary's checksum and, mostly, the summary */
        uint8_t fx[1024];
        size_t want = *n < sizeof fx ? *n : sizeof fx;
        if (want < H5L_FRAME_LEN + H5L_CKPT_HDR + 8 || h5l_fd_read_all(fd, fx, want, base + pos, what, NULL) ||
            frame_fixed(fx, want, 0, seed, pos, f))
            return 0;
        return frame_sum(fd, base, pos, fx, want, f, seed, what, sum);
    }
    uint8_t *b = malloc(*n);
    if (!b) return H5L_ENOMEM;
    if (h5l_fd_read_all(fd, b, *n, base + pos, what, NULL) || frame_fixed(b, *n, 1, seed, pos, f)) {
        free(b);
        return 0;
    }
    int k = frame_sum(fd, base, pos, b, *n, f, seed, what, sum);
    if (k != 1) {
        free(b);
        return k;
    }
    *buf = b;
    return 1;
}

void h5l_ckpt_chain_free(h5l_ckpt_chain_t *ch)
{
    for (size_t i = 0; ch->sum && i < ch->n; i++) free(ch->sum[i]);
    free(ch->sum);
    free(ch->slen);
    free(ch->firsts);
    free(ch->lasts);
    free(ch->lens);
    free(ch->pos);
    memset(ch, 0, sizeof *ch);
}

/* Note a verified frame (newest first while walking back) and free its
 * bytes: the reader reads each again when it applies it, so a long chain
 * never sits in memory at once. */
/* One of the chain's parallel arrays from old to nc elements. */
static int grow_to(void **p, size_t old, size_t nc, size_t elem) { return h5l_grow(p, &old, nc, elem); }

static int chain_push(h5l_ckpt_chain_t *ch, size_t *cap, uint8_t *buf, size_t n, uint64_t pos, const fixed_t *f,
                      uint8_t *sum)
{
    free(buf);
    if (ch->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        if (grow_to((void **)&ch->lens, *cap, nc, sizeof *ch->lens) ||
            grow_to((void **)&ch->pos, *cap, nc, sizeof *ch->pos) ||
            grow_to((void **)&ch->firsts, *cap, nc, sizeof *ch->firsts) ||
            grow_to((void **)&ch->lasts, *cap, nc, sizeof *ch->lasts) ||
            grow_to((void **)&ch->slen, *cap, nc, sizeof *ch->slen) ||
            grow_to((void **)&ch->sum, *cap, nc, sizeof *ch->sum)) {
            free(sum);
            return H5L_ENOMEM;
        }
        *cap = nc;
    }
    ch->lens[ch->n] = n;
    ch->firsts[ch->n] = f->first;
    ch->lasts[ch->n] = f->last;
    ch->sum[ch->n] = sum;
    ch->slen[ch->n] = sum ? f->slen : 0;
    ch->pos[ch->n++] = pos;
    return 0;
}

int h5l_ckpt_chain_read(int fd, uint64_t base, uint64_t end, uint64_t seed, const char *what, h5l_ckpt_chain_t *ch)
{
    memset(ch, 0, sizeof *ch);
    if (end < H5L_JHDR_LEN + H5L_FRAME_LEN) return 0;
    uint64_t lim = end - H5L_JHDR_LEN > H5L_CKPT_SEARCH ? end - H5L_CKPT_SEARCH : H5L_JHDR_LEN;
    uint8_t *w = malloc(SWIN);
    if (!w) return H5L_ENOMEM;
    uint64_t wlo = 0, whi = 0, at = 0; /* the window holds journal bytes [wlo, whi) */
    uint8_t *buf = NULL, *sum = NULL;
    size_t n = 0;
    fixed_t f;
    int found = 0;
    /* frames start 8-aligned: the newest checkpoint header, from the end back */
    for (uint64_t p = (end - H5L_FRAME_LEN) & ~(uint64_t)7; p >= lim && !found; p -= 8) {
        if (p < wlo || p + H5L_FRAME_LEN > whi) {
            whi = p + H5L_FRAME_LEN;
            wlo = whi - lim > SWIN ? whi - SWIN : lim;
            size_t got;
            if (h5l_fd_read(fd, w, (size_t)(whi - wlo), base + wlo, &got, what, NULL) || got != whi - wlo) break;
        }
        const uint8_t *h = w + (p - wlo);
        if (h[4] == (H5L_REC_CKPT & 0xFF) && h[5] == H5L_REC_CKPT >> 8 && h[6] == 2 && h[7] == 0) {
            found = frame_at(fd, base, p, end, seed, what, 1, &buf, &n, &f, &sum); /* the newest: sizes the reader */
            at = p;
            if (found < 0) break;
        }
        if (p < 8) break;
    }
    free(w);
    if (found <= 0) return found;
    size_t cap = 0;
    int rc = chain_push(ch, &cap, buf, n, at, &f, sum);
    if (rc) {
        h5l_ckpt_chain_free(ch); /* (its first arrays may be made) */
        return rc;
    }
    ch->last = f.last;
    ch->next = at + n;
    /* back along the chain: each link ends right where the next segment's
     * first TICK frame begins, and covers the ticks just before it */
    while (f.first > 1) {
        fixed_t pf;
        uint8_t *pb = NULL, *ps = NULL;
        size_t pn;
        int k = frame_at(fd, base, f.prevpos, f.tickpos, seed, what, 0, &pb, &pn, &pf, &ps);
        if (k == 1 && (pf.last + 1 != f.first || f.prevpos + pn != f.tickpos)) {
            free(pb);
            free(ps);
            k = 0;
        }
        if (k == 1) {
            if ((k = chain_push(ch, &cap, pb, pn, f.prevpos, &pf, ps)) == 0) {
                f = pf;
                continue;
            }
        }
        h5l_ckpt_chain_free(ch);
        return k; /* 0: broken chain; or H5L_ENOMEM */
    }
    for (size_t i = 0, j = ch->n - 1; i < j; i++, j--) { /* oldest first */
        size_t l = ch->lens[i];
        ch->lens[i] = ch->lens[j];
        ch->lens[j] = l;
        l = ch->slen[i];
        ch->slen[i] = ch->slen[j];
        ch->slen[j] = l;
        uint64_t q = ch->pos[i];
        ch->pos[i] = ch->pos[j];
        ch->pos[j] = q;
        q = ch->firsts[i];
        ch->firsts[i] = ch->firsts[j];
        ch->firsts[j] = q;
        q = ch->lasts[i];
        ch->lasts[i] = ch->lasts[j];
        ch->lasts[j] = q;
        uint8_t *sp = ch->sum[i];
        ch->sum[i] = ch->sum[j];
        ch->sum[j] = sp;
    }
    return 1;
}
