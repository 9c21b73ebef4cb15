/* codec.c — little-endian encoding helpers (see codec.h). */
#include "h5log/codec.h"

#include <stdlib.h>

void h5l_buf_free(h5l_buf_t *b)
{
    if (!b) return;
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

int h5l_buf_reserve(h5l_buf_t *b, size_t n)
{
    if (b->oom) return -1;
    if (b->len + n <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void h5l_buf_put(h5l_buf_t *b, const void *src, size_t n)
{
    if (n == 0 || h5l_buf_reserve(b, n)) return;
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

void h5l_buf_u8(h5l_buf_t *b, uint8_t v) { h5l_buf_put(b, &v, 1); }

void h5l_buf_u16(h5l_buf_t *b, uint16_t v)
{
    uint8_t t[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    h5l_buf_put(b, t, 2);
}

void h5l_buf_u32(h5l_buf_t *b, uint32_t v)
{
    uint8_t t[4];
    h5l_put_le32(t, v);
    h5l_buf_put(b, t, 4);
}

void h5l_buf_u64(h5l_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    h5l_put_le64(t, v);
    h5l_buf_put(b, t, 8);
}

void h5l_buf_str(h5l_buf_t *b, const char *s)
{
    size_t n = strlen(s);
    h5l_buf_u32(b, (uint32_t)n);
    h5l_buf_put(b, s, n);
}

void h5l_buf_pad8(h5l_buf_t *b)
{
    static const uint8_t z[8];
    size_t r = b->len % 8;
    if (r) h5l_buf_put(b, z, 8 - r);
}

char *h5l_cur_str(h5l_cur_t *c)
{
    uint32_t n = h5l_cur_u32(c);
    const uint8_t *p = h5l_cur_take(c, n);
    if (!p || memchr(p, 0, n)) {
        c->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        c->bad = c->oom = 1;
        return NULL;
    }
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

void h5l_buf_varint(h5l_buf_t *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        t[n++] = (uint8_t)(byte | (v ? 0x80 : 0));
    } while (v);
    h5l_buf_put(b, t, n);
}

uint64_t h5l_cur_varint_slow(h5l_cur_t *c)
{
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (c->pos >= c->len) break;
        uint8_t byte = c->p[c->pos++];
        /* the 10th byte holds bit 63 only: anything more overflows */
        if (i == 9 && byte > 1) break;
        v |= (uint64_t)(byte & 0x7f) << (7 * i);
        if (!(byte & 0x80)) return v;
    }
    c->bad = 1;
    return 0;
}
