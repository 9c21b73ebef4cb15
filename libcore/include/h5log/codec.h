/* codec.h — little-endian byte encoding: a growable output buffer and a
 * bounds-checked input cursor. Owns nothing but the buffer it grows.
 *
 * Why: every on-file structure (docs/format.md) is a sequence of little-endian
 * fields with no alignment inside bodies; these helpers make encoding total
 * (only allocation can fail) and decoding safe against any byte string. */
#ifndef H5L_CODEC_H
#define H5L_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct h5l_buf {
    uint8_t *p;
    size_t len, cap;
    int oom; /* sticky: an allocation failed; contents are then incomplete */
} h5l_buf_t;

void h5l_buf_free(h5l_buf_t *b);
/* Make room for n more bytes; 0 on success, -1 (and b->oom) on failure. */
int h5l_buf_reserve(h5l_buf_t *b, size_t n);
void h5l_buf_put(h5l_buf_t *b, const void *src, size_t n);
void h5l_buf_u8(h5l_buf_t *b, uint8_t v);
void h5l_buf_u16(h5l_buf_t *b, uint16_t v);
void h5l_buf_u32(h5l_buf_t *b, uint32_t v);
void h5l_buf_u64(h5l_buf_t *b, uint64_t v);
void h5l_buf_str(h5l_buf_t *b, const char *s); /* u32 length + bytes */
void h5l_buf_pad8(h5l_buf_t *b);               /* zeros to a multiple of 8 */
void h5l_buf_varint(h5l_buf_t *b, uint64_t v); /* unsigned LEB128, 1..10 bytes */

typedef struct h5l_cur {
    const uint8_t *p;
    size_t len, pos;
    int bad; /* sticky: a read ran past the end */
    int oom; /* ... or a copy (h5l_cur_str) found no memory: bad too, but not the bytes' fault */
} h5l_cur_t;

static inline h5l_cur_t h5l_cur(const void *p, size_t len)
{
    h5l_cur_t c = {(const uint8_t *)p, len, 0, 0, 0};
    return c;
}
/* The cursor's reads are inline: decoding a long log's checkpoints makes
 * ten of them per tick, and the calls were a fifth of opening 10^6 ticks
 * (docs/performance.md). */
static inline uint32_t h5l_get_le32(const uint8_t *p);
static inline uint64_t h5l_get_le64(const uint8_t *p);
/* Pointer to the next n bytes and advance, or NULL (and c->bad). */
static inline const uint8_t *h5l_cur_take(h5l_cur_t *c, size_t n)
{
    if (c->bad || n > c->len - c->pos) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *p = c->p + c->pos;
    c->pos += n;
    return p;
}
static inline uint8_t h5l_cur_u8(h5l_cur_t *c)
{
    const uint8_t *p = h5l_cur_take(c, 1);
    return p ? p[0] : 0;
}
static inline uint16_t h5l_cur_u16(h5l_cur_t *c)
{
    const uint8_t *p = h5l_cur_take(c, 2);
    return p ? (uint16_t)(p[0] | (p[1] << 8)) : 0;
}
static inline uint32_t h5l_cur_u32(h5l_cur_t *c)
{
    const uint8_t *p = h5l_cur_take(c, 4);
    return p ? h5l_get_le32(p) : 0;
}
static inline uint64_t h5l_cur_u64(h5l_cur_t *c)
{
    const uint8_t *p = h5l_cur_take(c, 8);
    return p ? h5l_get_le64(p) : 0;
}
/* The general case of h5l_cur_varint (codec.c). */
uint64_t h5l_cur_varint_slow(h5l_cur_t *c);
/* An unsigned LEB128 varint; 0 and c->bad if truncated or over 64 bits.
 * Up to three bytes (values below 2^21: most of a checkpoint's, a tick's
 * time step in ns among them) inline. */
static inline uint64_t h5l_cur_varint(h5l_cur_t *c)
{
    size_t left = c->pos < c->len ? c->len - c->pos : 0;
    if (!left) return h5l_cur_varint_slow(c);
    const uint8_t *p = c->p + c->pos;
    if (!(p[0] & 0x80)) {
        c->pos++;
        return p[0];
    }
    if (left >= 2 && !(p[1] & 0x80)) {
        c->pos += 2;
        return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
    }
    if (left >= 3 && !(p[2] & 0x80)) { /* p[1] has its high bit: the test above */
        c->pos += 3;
        return (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 | (uint64_t)p[2] << 14;
    }
    return h5l_cur_varint_slow(c);
}
/* A u32-length string as a fresh NUL-terminated copy (caller frees), or NULL
 * (and c->bad) if it runs past the end or holds a NUL (or c->oom too: no
 * memory for the copy). */
char *h5l_cur_str(h5l_cur_t *c);

static inline void h5l_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void h5l_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t h5l_get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t h5l_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#endif
