/* test_format.c — the byte format of docs/format.md, one structure at a time:
 * user block, journal header, schema ops (all five kinds), TICK header,
 * record-block header, records and type descriptors.
 *
 * Why: every reader and the writer meet only through these bytes. Each
 * encoder is checked against the layout tables of format.md field by field
 * (offsets, little-endian, XXH3 checksums computed here, not by the library),
 * each decoder must give back what was encoded, and each decoder must reject
 * damaged input — bad magic, bad checksum, unknown version, every truncated
 * prefix, absurd element counts — with an error, never a crash or an
 * over-read (buffers are exact-size heap copies so ASan sees any over-read). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t layout, to dirty the stack like one */
#include <xxhash.h>

#include "h5log/codec.h"
#include "h5log/error.h"
#include "h5log/format.h"
#include "tharness.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }
static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* An exact-size heap copy of the first n bytes, so reading byte n trips ASan. */
static uint8_t *dup_n(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);
    if (n) memcpy(q, p, n);
    return q;
}

static const uint8_t ID[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0xF0};

/* ---- codec ---------------------------------------------------------- */

static void test_codec_le_and_pad(void)
{
    h5l_buf_t b = {0};
    h5l_buf_u8(&b, 0xAB);
    h5l_buf_u16(&b, 0x1234);
    h5l_buf_u32(&b, 0xDEADBEEF);
    h5l_buf_u64(&b, 0x0102030405060708ull);
    h5l_buf_str(&b, "xyz");
    CHECK_EQ(b.len, 1 + 2 + 4 + 8 + 4 + 3);
    const uint8_t want[] = {0xAB, 0x34, 0x12, 0xEF, 0xBE, 0xAD, 0xDE, 8, 7,   6,   5,
                            4,    3,    2,    1,    3,    0,    0,    0, 'x', 'y', 'z'};
    CHECK(b.len == sizeof want && memcmp(b.p, want, sizeof want) == 0);
    h5l_buf_pad8(&b);
    CHECK_EQ(b.len, 24);
    CHECK(b.p[22] == 0 && b.p[23] == 0);
    h5l_buf_pad8(&b); /* already aligned: no-op */
    CHECK_EQ(b.len, 24);
    CHECK(!b.oom);

    h5l_cur_t c = h5l_cur(b.p, b.len);
    CHECK_EQ(h5l_cur_u8(&c), 0xAB);
    CHECK_EQ(h5l_cur_u16(&c), 0x1234);
    CHECK_EQ(h5l_cur_u32(&c), 0xDEADBEEFu);
    CHECK(h5l_cur_u64(&c) == 0x0102030405060708ull);
    char *s = h5l_cur_str(&c);
    CHECK(s && strcmp(s, "xyz") == 0);
    free(s);
    CHECK(!c.bad);
    CHECK_EQ(h5l_cur_u16(&c), 0); /* the 2 pad bytes */
    CHECK(!c.bad);
    CHECK_EQ(h5l_cur_u8(&c), 0); /* past the end: 0 and sticky bad */
    CHECK(c.bad);
    CHECK(h5l_cur_take(&c, 0) == NULL);
    h5l_buf_free(&b);
}

static void test_codec_str_rejects(void)
{
    /* length runs past the end */
    uint8_t a[] = {5, 0, 0, 0, 'a', 'b'};
    uint8_t *p = dup_n(a, sizeof a);
    h5l_cur_t c = h5l_cur(p, sizeof a);
    CHECK(h5l_cur_str(&c) == NULL);
    CHECK(c.bad);
    free(p);
    /* embedded NUL */
    uint8_t z[] = {3, 0, 0, 0, 'a', 0, 'b'};
    p = dup_n(z, sizeof z);
    c = h5l_cur(p, sizeof z);
    CHECK(h5l_cur_str(&c) == NULL);
    CHECK(c.bad);
    free(p);
    /* huge length must not wrap the bounds check */
    uint8_t h[] = {0xFF, 0xFF, 0xFF, 0xFF, 'a'};
    p = dup_n(h, sizeof h);
    c = h5l_cur(p, sizeof h);
    CHECK(h5l_cur_str(&c) == NULL);
    free(p);
    /* empty string is fine */
    uint8_t e[] = {0, 0, 0, 0};
    c = h5l_cur(e, sizeof e);
    char *s = h5l_cur_str(&c);
    CHECK(s && s[0] == 0 && !c.bad);
    free(s);
}

/* ---- user block ----------------------------------------------------- */

static void test_ub_layout_roundtrip(void)
{
    h5l_ub_t ub = {.version = 2, .jr_off = 0x1122334455667788ull, .jr_len = 4242, .flags = H5L_UB_CLOSED};
    memcpy(ub.id, ID, 16);
    uint8_t out[H5L_UB_LEN];
    memset(out, 0xCC, sizeof out);
    h5l_ub_encode(&ub, out);
    static const uint8_t magic[8] = {0x89, 0x48, 0x35, 0x4C, 0x4F, 0x47, 0x0D, 0x0A};
    CHECK(memcmp(out, magic, 8) == 0);
    CHECK_EQ(le32(out + 8), 2);
    CHECK_EQ(le32(out + 12), 64);
    CHECK(memcmp(out + 16, ID, 16) == 0);
    CHECK(le64(out + 32) == 0x1122334455667788ull);
    CHECK_EQ(le64(out + 40), 4242);
    CHECK_EQ(le64(out + 48), 1);
    CHECK(le64(out + 56) == XXH3_64bits_withSeed(out, 56, 0));

    h5l_ub_t d;
    memset(&d, 0, sizeof d);
    h5l_err_t e = {0};
    CHECK_EQ(h5l_ub_decode(out, &d, "f.h5", &e), H5L_OK);
    CHECK_EQ(d.version, 2);
    CHECK(memcmp(d.id, ID, 16) == 0);
    CHECK(d.jr_off == ub.jr_off);
    CHECK_EQ(d.jr_len, 4242);
    CHECK_EQ(d.flags, H5L_UB_CLOSED);

    /* seed = u64(id[0..8)) XOR u64(id[8..16)) */
    CHECK(h5l_seed(ID) == (le64(ID) ^ le64(ID + 8)));
    CHECK(h5l_hash("abc", 3, 77) == XXH3_64bits_withSeed("abc", 3, 77));
}

static void test_ub_rejects(void)
{
    h5l_ub_t ub = {.version = 2, .flags = 0};
    memcpy(ub.id, ID, 16);
    uint8_t good[H5L_UB_LEN], b[H5L_UB_LEN];
    h5l_ub_encode(&ub, good);
    h5l_ub_t d;
    h5l_err_t e;

    /* no magic: "not a log-layout file", EFORMAT, names the file */
    for (int i = 0; i < 8; i++) {
        memcpy(b, good, sizeof b);
        b[i] ^= 0x01;
        e.code = 0;
        CHECK_EQ(h5l_ub_decode(b, &d, "myfile.h5", &e), H5L_EFORMAT);
        CHECK_EQ(e.code, H5L_EFORMAT);
        CHECK(strstr(e.msg, "myfile.h5") != NULL);
    }
    /* any flipped bit in 12..63: checksum (or header length) mismatch */
    for (int i = 12; i < H5L_UB_LEN; i++) {
        memcpy(b, good, sizeof b);
        b[i] ^= 0x40;
        e.code = 0;
        CHECK_EQ(h5l_ub_decode(b, &d, "myfile.h5", &e), H5L_ECORRUPT);
        CHECK(strstr(e.msg, "myfile.h5") != NULL);
    }
    /* another version, correctly checksummed: EFORMAT naming the version
     * and whether an older or newer h5logfs wrote it */
    uint64_t h;
    for (int v = 1; v <= 3; v += 2) {
        memcpy(b, good, sizeof b);
        b[8] = (uint8_t)v;
        h = XXH3_64bits_withSeed(b, 56, 0);
        for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(h >> (8 * i));
        CHECK_EQ(h5l_ub_decode(b, &d, "v.h5", &e), H5L_EFORMAT);
        CHECK(strstr(e.msg, v == 1 ? "version 1 (written by an older" : "version 3 (written by a newer") != NULL);
        CHECK(strstr(e.msg, "v.h5") != NULL);
    }
    /* header length field other than 64, correctly checksummed */
    memcpy(b, good, sizeof b);
    b[12] = 65;
    h = XXH3_64bits_withSeed(b, 56, 0);
    for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(h >> (8 * i));
    CHECK(h5l_ub_decode(b, &d, "v.h5", NULL) != H5L_OK);
    /* NULL err is allowed */
    memcpy(b, good, sizeof b);
    b[0] = 0;
    CHECK_EQ(h5l_ub_decode(b, &d, "x", NULL), H5L_EFORMAT);
}

/* ---- journal header ------------------------------------------------- */

static void test_jhdr_layout_roundtrip_rejects(void)
{
    h5l_jhdr_t h = {.version = 2, .ctime_ns = 1700000000123456789ull, .seglog = 15};
    memcpy(h.id, ID, 16);
    uint8_t out[H5L_JHDR_LEN];
    memset(out, 0xCC, sizeof out);
    h5l_jhdr_encode(&h, out);
    static const uint8_t magic[8] = {0x89, 0x48, 0x35, 0x4C, 0x4A, 0x4E, 0x4C, 0x0A};
    CHECK(memcmp(out, magic, 8) == 0);
    CHECK_EQ(le32(out + 8), 2);
    CHECK_EQ(le32(out + 12), 64);
    CHECK(memcmp(out + 16, ID, 16) == 0);
    CHECK(le64(out + 32) == 1700000000123456789ull);
    CHECK_EQ(le32(out + 40), 15);
    for (int i = 44; i < 56; i++) CHECK_EQ(out[i], 0);
    CHECK(le64(out + 56) == XXH3_64bits_withSeed(out, 56, 0));

    h5l_jhdr_t d;
    h5l_err_t e;
    CHECK_EQ(h5l_jhdr_decode(out, &d, "j", &e), H5L_OK);
    CHECK(memcmp(d.id, ID, 16) == 0);
    CHECK(d.ctime_ns == h.ctime_ns);
    CHECK_EQ(d.version, 2);
    CHECK_EQ(d.seglog, 15);

    uint8_t b[H5L_JHDR_LEN];
    for (int i = 0; i < H5L_JHDR_LEN; i++) {
        memcpy(b, out, sizeof b);
        b[i] ^= 0x10;
        CHECK(h5l_jhdr_decode(b, &d, "j.h5lj", &e) != H5L_OK);
        CHECK(strstr(e.msg, "j.h5lj") != NULL);
    }
    memcpy(b, out, sizeof b);
    b[8] = 9;
    uint64_t x = XXH3_64bits_withSeed(b, 56, 0);
    for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(x >> (8 * i));
    CHECK_EQ(h5l_jhdr_decode(b, &d, "j", &e), H5L_EFORMAT);
    CHECK(strstr(e.msg, "9") != NULL);
    /* a segment size outside 2^12 .. 2^20, correctly checksummed */
    const uint32_t segs[] = {0, 11, 21, 64};
    for (int k = 0; k < 4; k++) {
        memcpy(b, out, sizeof b);
        for (int i = 0; i < 4; i++) b[40 + i] = (uint8_t)(segs[k] >> (8 * i));
        x = XXH3_64bits_withSeed(b, 56, 0);
        for (int i = 0; i < 8; i++) b[56 + i] = (uint8_t)(x >> (8 * i));
        CHECK_EQ(h5l_jhdr_decode(b, &d, "j", &e), H5L_ECORRUPT);
    }
}

/* ---- frame ---------------------------------------------------------- */

static void test_frame_layout(void)
{
    uint64_t seed = h5l_seed(ID);
    for (uint32_t len = 0; len < 20; len++) {
        uint8_t pl[20];
        for (uint32_t i = 0; i < len; i++) pl[i] = (uint8_t)(i * 7 + 1);
        h5l_buf_t b = {0};
        h5l_frame_encode(&b, H5L_REC_CLOSE, pl, len, seed);
        CHECK_EQ(b.len, (24 + len + 7) / 8 * 8);
        CHECK_EQ(b.len, h5l_frame_size(len));
        CHECK_EQ(le32(b.p), len);
        CHECK_EQ(le16(b.p + 4), 2);
        CHECK_EQ(le16(b.p + 6), 2);
        CHECK(le64(b.p + 8) == XXH3_64bits_withSeed(pl, len, seed));
        CHECK(le64(b.p + 16) == XXH3_64bits_withSeed(b.p, 16, seed));
        CHECK(len == 0 || memcmp(b.p + 24, pl, len) == 0);
        for (size_t i = 24 + len; i < b.len; i++) CHECK_EQ(b.p[i], 0);
        /* the decoder next to the encoder reads back what was written */
        h5l_frame_hdr_t fh;
        CHECK_EQ(h5l_frame_hdr_decode(b.p, seed, &fh), H5L_FRAME_OK);
        CHECK_EQ(fh.len, len);
        CHECK_EQ(fh.type, H5L_REC_CLOSE);
        CHECK_EQ(fh.version, 2);
        CHECK(fh.sum == XXH3_64bits_withSeed(pl, len, seed));
        /* any header byte changed: its own checksum fails */
        for (int i = 0; i < 24; i++) {
            b.p[i] ^= 0x10;
            CHECK_EQ(h5l_frame_hdr_decode(b.p, seed, &fh), H5L_FRAME_BADSUM);
            b.p[i] ^= 0x10;
        }
        CHECK_EQ(h5l_frame_hdr_decode(b.p, seed + 1, &fh), H5L_FRAME_BADSUM); /* another file's seed */
        /* another version, or a length over the limit, with a valid header sum */
        b.p[6] = 3;
        h5l_put_le64(b.p + 16, XXH3_64bits_withSeed(b.p, 16, seed));
        CHECK_EQ(h5l_frame_hdr_decode(b.p, seed, &fh), H5L_FRAME_BADVER);
        b.p[6] = 2;
        h5l_put_le32(b.p, H5L_FRAME_MAX + 1);
        h5l_put_le64(b.p + 16, XXH3_64bits_withSeed(b.p, 16, seed));
        CHECK_EQ(h5l_frame_hdr_decode(b.p, seed, &fh), H5L_FRAME_BADVER);
        h5l_buf_free(&b);
    }
}

/* ---- hashing -------------------------------------------------------- */

/* Fill a stack region (larger than an XXH3 state) so that a hash state
 * later placed anywhere in it (states are 64-byte aligned) looks already
 * reset for `seed` but holds a garbage secret: every 64-byte line has the
 * seed where the state's seed field falls and NULL where its extSecret
 * falls. That stale stack made xxhash 0.8.1 skip its secret derivation. */
static __attribute__((noinline)) void dirty_stack(uint64_t seed)
{
    size_t so = offsetof(XXH3_state_t, seed) % 64, eo = offsetof(XXH3_state_t, extSecret) % 64;
    _Alignas(64) volatile uint8_t junk[16384];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(0xA5 ^ i);
    for (size_t l = 0; l < sizeof junk; l += 64) {
        for (int b = 0; b < 8; b++) junk[l + so + (size_t)b] = (uint8_t)(seed >> (8 * b));
        for (int b = 0; b < 8; b++) junk[l + eo + (size_t)b] = 0;
    }
    (void)junk[0];
}

/* A streaming hash of pl through h5l_hstream, in two updates. */
static __attribute__((noinline)) uint64_t stream_sum(const uint8_t *pl, uint32_t len, uint64_t seed)
{
    h5l_hstream_t *h = h5l_hstream_new();
    if (!h) return 0;
    h5l_hstream_reset(h, seed);
    h5l_hstream_update(h, pl, len / 2);
    h5l_hstream_update(h, pl + len / 2, len - len / 2);
    uint64_t s = h5l_hstream_digest(h);
    h5l_hstream_free(h);
    return s;
}

/* Streaming hashes (two pieces) equal one-shot XXH3 for every length up to
 * 4096, call after call on a dirtied stack: with an uninitialised state,
 * frames over 240 bytes hashed wrong and healthy files read as corrupt. */
static void test_hash2_streaming_equals_oneshot(void)
{
    static uint8_t buf[4100];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131 + 7);
    uint64_t seed = h5l_seed(ID);
    int bad = 0, badframe = 0;
    CHECK(offsetof(XXH3_state_t, seed) % 64 != offsetof(XXH3_state_t, extSecret) % 64);
    for (uint32_t len = 0; len <= 4096; len++) {
        size_t cut = len / 3;
        dirty_stack(seed);
        uint64_t got = h5l_hash2(buf, cut, buf + cut, len - cut, seed);
        bad += got != XXH3_64bits_withSeed(buf, len, seed);
        dirty_stack(seed);
        badframe += stream_sum(buf, len, seed) != XXH3_64bits_withSeed(buf, len, seed);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(badframe, 0);
}

/* ---- types ---------------------------------------------------------- */

static void test_type_valid(void)
{
    for (int cls = 0; cls < 5; cls++)
        for (int size = 0; size < 17; size++)
            for (int sign = 0; sign < 3; sign++)
                for (int order = 0; order < 3; order++) {
                    h5l_type_t t = {(uint8_t)cls, (uint8_t)size, (uint8_t)sign, (uint8_t)order};
                    int want = 0;
                    if (order <= 1) {
                        if (cls == 1) want = (size == 1 || size == 2 || size == 4 || size == 8) && sign <= 1;
                        if (cls == 2) want = (size == 4 || size == 8) && sign == 0;
                        if (cls == 3) want = size == 1 && sign == 0;
                    }
                    if (!!h5l_type_valid(t) != want) {
                        fprintf(stderr, "  type %d/%d/%d/%d: valid=%d want %d\n", cls, size, sign, order,
                                h5l_type_valid(t), want);
                        CHECK(0);
                    }
                }
    h5l_type_t t = {H5L_CLASS_FLOAT, 8, 0, 1};
    h5l_buf_t b = {0};
    h5l_type_encode(&b, t);
    CHECK(b.len == 4 && b.p[0] == 2 && b.p[1] == 8 && b.p[2] == 0 && b.p[3] == 1);
    h5l_cur_t c = h5l_cur(b.p, b.len);
    h5l_type_t u = h5l_type_decode(&c);
    CHECK(u.cls == 2 && u.size == 8 && u.sign == 0 && u.order == 1 && !c.bad);
    CHECK_EQ(h5l_type_size(u), 8);
    c = h5l_cur(b.p, 3);
    u = h5l_type_decode(&c);
    CHECK(c.bad);
    h5l_buf_free(&b);
}

/* ---- schema ops ----------------------------------------------------- */

static const h5l_type_t T_I32 = {H5L_CLASS_INT, 4, 1, 0};
static const h5l_type_t T_F64 = {H5L_CLASS_FLOAT, 8, 0, 0};
static const h5l_type_t T_STR = {H5L_CLASS_STRING, 1, 0, 0};

static uint32_t var_dimids[3] = {0, 2, 1};
static uint64_t var_chunk[3] = {1, 0x100000000ull, 7};
static double var_fill = -9999.5;
static int32_t attr_ints[5] = {1, -2, 300000, INT32_MIN, INT32_MAX};

/* One op of every kind, with every field set to something distinctive. */
static h5l_op_t sample_op(int kind)
{
    h5l_op_t op;
    memset(&op, 0, sizeof op);
    op.kind = (uint16_t)kind;
    switch (kind) {
    case H5L_OP_GROUP:
        op.id = 3;
        op.name = "/atm/ocean";
        break;
    case H5L_OP_DIM:
        op.id = 2;
        op.flags = 1;
        op.len = 0x123456789ull;
        op.name = "time";
        break;
    case H5L_OP_VAR:
        op.id = 4;
        op.name = "/atm/temp";
        op.type = T_F64;
        op.flags = 1;
        op.ndims = 3;
        op.dimids = var_dimids;
        op.chunk = var_chunk;
        op.data = &var_fill;
        op.data_len = 8;
        break;
    case H5L_OP_ATTR:
        op.id = 4;
        op.name = "valid_range";
        op.type = T_I32;
        op.len = 5;
        op.data = attr_ints;
        op.data_len = sizeof attr_ints;
        break;
    case H5L_OP_DIMLEN:
        op.id = 2;
        op.len = 0xFEDCBA9876543210ull;
        break;
    }
    return op;
}

static int ops_equal(const h5l_op_t *a, const h5l_op_t *b)
{
    if (a->kind != b->kind || a->id != b->id) return 0;
    switch (a->kind) {
    case H5L_OP_GROUP:
        return strcmp(a->name, b->name) == 0;
    case H5L_OP_DIM:
        return a->flags == b->flags && a->len == b->len && strcmp(a->name, b->name) == 0;
    case H5L_OP_VAR:
        return strcmp(a->name, b->name) == 0 && memcmp(&a->type, &b->type, sizeof a->type) == 0 &&
               a->flags == b->flags && a->ndims == b->ndims &&
               memcmp(a->dimids, b->dimids, a->ndims * sizeof *a->dimids) == 0 &&
               memcmp(a->chunk, b->chunk, a->ndims * sizeof *a->chunk) == 0 && b->data_len == a->type.size &&
               memcmp(a->data, b->data, a->type.size) == 0;
    case H5L_OP_ATTR:
        return strcmp(a->name, b->name) == 0 && memcmp(&a->type, &b->type, sizeof a->type) == 0 && a->len == b->len &&
               a->data_len == b->data_len && (a->data_len == 0 || memcmp(a->data, b->data, a->data_len) == 0);
    case H5L_OP_DIMLEN:
        return a->len == b->len;
    }
    return 0;
}

static void test_op_roundtrip_all_kinds(void)
{
    h5l_buf_t b = {0};
    for (int k = 1; k <= 5; k++) {
        h5l_op_t op = sample_op(k);
        h5l_op_encode(&b, &op);
        CHECK_EQ(b.len % 8, 0);
    }
    /* extra ATTR variants: string attribute, empty attribute, float */
    h5l_op_t sa = {
        .kind = H5L_OP_ATTR, .id = 0, .name = "title", .type = T_STR, .len = 11, .data = "hello world", .data_len = 11};
    h5l_op_encode(&b, &sa);
    h5l_op_t ea = {.kind = H5L_OP_ATTR, .id = 1, .name = "empty", .type = T_I32, .len = 0, .data = NULL, .data_len = 0};
    h5l_op_encode(&b, &ea);
    double dv[2] = {1.5, -0.25};
    h5l_op_t da = {.kind = H5L_OP_ATTR, .id = 2, .name = "scale", .type = T_F64, .len = 2, .data = dv, .data_len = 16};
    h5l_op_encode(&b, &da);
    /* scalar VAR (no dims), fill of an int */
    int32_t fi = 77;
    uint32_t nod[1] = {0};
    uint64_t noc[1] = {0};
    h5l_op_t sv = {.kind = H5L_OP_VAR,
                   .id = 9,
                   .name = "/s",
                   .type = T_I32,
                   .flags = 0,
                   .ndims = 0,
                   .dimids = nod,
                   .chunk = noc,
                   .data = &fi,
                   .data_len = 4};
    h5l_op_encode(&b, &sv);
    CHECK(!b.oom);

    uint8_t *copy = dup_n(b.p, b.len);
    h5l_cur_t c = h5l_cur(copy, b.len);
    for (int k = 1; k <= 9; k++) {
        h5l_op_t want = k <= 5 ? sample_op(k) : k == 6 ? sa : k == 7 ? ea : k == 8 ? da : sv;
        h5l_op_t got;
        int rc = h5l_op_decode(&c, &got);
        CHECK_EQ(rc, H5L_OK);
        if (rc == H5L_OK) {
            if (!ops_equal(&want, &got)) {
                fprintf(stderr, "  op %d decoded differently\n", k);
                CHECK(0);
            }
            h5l_op_clear(&got);
        }
    }
    CHECK_EQ(c.pos, b.len);
    CHECK(!c.bad);
    free(copy);
    h5l_buf_free(&b);
}

/* The bytes of each op kind against the table of format.md 3.3. */
static void test_op_layout(void)
{
    h5l_buf_t b = {0};
    h5l_op_t op = sample_op(H5L_OP_DIMLEN);
    h5l_op_encode(&b, &op);
    CHECK_EQ(b.len, 24); /* 8 header + 12 body + 4 pad */
    CHECK_EQ(le16(b.p), 5);
    CHECK_EQ(le16(b.p + 2), 0);
    CHECK_EQ(le32(b.p + 4), 12);
    CHECK_EQ(le32(b.p + 8), 2);
    CHECK(le64(b.p + 12) == 0xFEDCBA9876543210ull);
    CHECK_EQ(le32(b.p + 20), 0);
    h5l_buf_free(&b);

    op = sample_op(H5L_OP_GROUP);
    h5l_op_encode(&b, &op);
    CHECK_EQ(le16(b.p), 1);
    CHECK_EQ(le32(b.p + 4), 4 + 4 + 10);
    CHECK_EQ(le32(b.p + 8), 3);
    CHECK_EQ(le32(b.p + 12), 10);
    CHECK(memcmp(b.p + 16, "/atm/ocean", 10) == 0);
    CHECK_EQ(b.len, 32);
    h5l_buf_free(&b);

    op = sample_op(H5L_OP_DIM);
    h5l_op_encode(&b, &op);
    CHECK_EQ(le16(b.p), 2);
    CHECK_EQ(le32(b.p + 4), 4 + 4 + 8 + 4 + 4);
    CHECK_EQ(le32(b.p + 8), 2);
    CHECK_EQ(le32(b.p + 12), 1);
    CHECK(le64(b.p + 16) == 0x123456789ull);
    CHECK_EQ(le32(b.p + 24), 4);
    CHECK(memcmp(b.p + 28, "time", 4) == 0);
    h5l_buf_free(&b);

    op = sample_op(H5L_OP_VAR);
    h5l_op_encode(&b, &op);
    const uint8_t *p = b.p + 8;
    CHECK_EQ(le16(b.p), 3);
    CHECK_EQ(le32(b.p + 4), 4 + 4 + 4 + 4 + 3 * 4 + 3 * 8 + 8 + 4 + 9);
    CHECK_EQ(le32(p), 4);
    CHECK(p[4] == 2 && p[5] == 8 && p[6] == 0 && p[7] == 0);
    CHECK_EQ(le32(p + 8), 1);
    CHECK_EQ(le32(p + 12), 3);
    CHECK(le32(p + 16) == 0 && le32(p + 20) == 2 && le32(p + 24) == 1);
    CHECK(le64(p + 28) == 1 && le64(p + 36) == 0x100000000ull && le64(p + 44) == 7);
    double f;
    memcpy(&f, p + 52, 8);
    CHECK(f == -9999.5);
    CHECK_EQ(le32(p + 60), 9);
    CHECK(memcmp(p + 64, "/atm/temp", 9) == 0);
    CHECK_EQ(b.len % 8, 0);
    h5l_buf_free(&b);

    op = sample_op(H5L_OP_ATTR);
    h5l_op_encode(&b, &op);
    p = b.p + 8;
    CHECK_EQ(le16(b.p), 4);
    CHECK_EQ(le32(b.p + 4), 4 + 4 + 8 + 20 + 4 + 11);
    CHECK_EQ(le32(p), 4);
    CHECK(p[0 + 4] == 1 && p[5] == 4 && p[6] == 1 && p[7] == 0);
    CHECK_EQ(le64(p + 8), 5);
    CHECK((int32_t)le32(p + 16 + 12) == INT32_MIN);
    CHECK_EQ(le32(p + 36), 11);
    CHECK(memcmp(p + 40, "valid_range", 11) == 0);
    h5l_buf_free(&b);
}

/* Every prefix of an encoded op is an error, never a crash or over-read;
 * every shortened body B' < B (outer framing consistent, body cut short) too. */
static void test_op_truncation_every_length(void)
{
    for (int k = 1; k <= 5; k++) {
        h5l_op_t op = sample_op(k);
        h5l_buf_t b = {0};
        h5l_op_encode(&b, &op);
        for (size_t n = 0; n < b.len; n++) {
            uint8_t *p = dup_n(b.p, n);
            h5l_cur_t c = h5l_cur(p, n);
            h5l_op_t got;
            int rc = h5l_op_decode(&c, &got);
            if (rc == H5L_OK) {
                fprintf(stderr, "  kind %d: prefix %zu of %zu decoded\n", k, n, b.len);
                CHECK(0);
                h5l_op_clear(&got);
            }
            free(p);
        }
        uint32_t blen = le32(b.p + 4);
        for (uint32_t nb = 0; nb < blen; nb++) {
            h5l_buf_t t = {0};
            h5l_buf_u16(&t, (uint16_t)k);
            h5l_buf_u16(&t, 0);
            h5l_buf_u32(&t, nb);
            h5l_buf_put(&t, b.p + 8, nb);
            h5l_buf_pad8(&t);
            uint8_t *p = dup_n(t.p, t.len);
            h5l_cur_t c = h5l_cur(p, t.len);
            h5l_op_t got;
            int rc = h5l_op_decode(&c, &got);
            if (rc == H5L_OK) {
                fprintf(stderr, "  kind %d: body cut to %u of %u decoded\n", k, nb, blen);
                CHECK(0);
                h5l_op_clear(&got);
            }
            CHECK(got.name == NULL && got.data == NULL && got.dimids == NULL && got.chunk == NULL);
            free(p);
            h5l_buf_free(&t);
        }
        /* one byte too many in the body: trailing bytes are corruption */
        h5l_buf_t t = {0};
        h5l_buf_u16(&t, (uint16_t)k);
        h5l_buf_u16(&t, 0);
        h5l_buf_u32(&t, blen + 1);
        h5l_buf_put(&t, b.p + 8, blen);
        h5l_buf_u8(&t, 0);
        h5l_buf_pad8(&t);
        h5l_cur_t c = h5l_cur(t.p, t.len);
        h5l_op_t got;
        CHECK(h5l_op_decode(&c, &got) != H5L_OK);
        h5l_buf_free(&t);
        h5l_buf_free(&b);
    }
}

/* Build an op from a raw body (header and padding added here). */
static int decode_raw(uint16_t kind, const h5l_buf_t *body)
{
    h5l_buf_t t = {0};
    h5l_buf_u16(&t, kind);
    h5l_buf_u16(&t, 0);
    h5l_buf_u32(&t, (uint32_t)body->len);
    h5l_buf_put(&t, body->p, body->len);
    h5l_buf_pad8(&t);
    uint8_t *p = dup_n(t.p, t.len);
    h5l_cur_t c = h5l_cur(p, t.len);
    h5l_op_t got;
    int rc = h5l_op_decode(&c, &got);
    if (rc == H5L_OK) h5l_op_clear(&got);
    free(p);
    h5l_buf_free(&t);
    return rc;
}

static void test_op_rejects(void)
{
    /* ATTR with n too large for the bytes present, including n * size wraps */
    const uint64_t bad_n[] = {6, 1000, (1ull << 61) + 1, (1ull << 62), UINT64_MAX, UINT64_MAX / 4 + 1};
    for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_type_encode(&body, T_I32);
        h5l_buf_u64(&body, bad_n[i]);
        h5l_buf_put(&body, attr_ints, 20); /* 5 elements */
        h5l_buf_str(&body, "x");
        CHECK_EQ(decode_raw(H5L_OP_ATTR, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    /* the same with n = 5 decodes: the check above is about n, not the bytes */
    {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_type_encode(&body, T_I32);
        h5l_buf_u64(&body, 5);
        h5l_buf_put(&body, attr_ints, 20);
        h5l_buf_str(&body, "x");
        CHECK_EQ(decode_raw(H5L_OP_ATTR, &body), H5L_OK);
        h5l_buf_free(&body);
    }
    /* ATTR with an invalid type */
    {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_type_t bt = {H5L_CLASS_INT, 3, 0, 0};
        h5l_type_encode(&body, bt);
        h5l_buf_u64(&body, 1);
        h5l_buf_put(&body, "abc", 3);
        h5l_buf_str(&body, "x");
        CHECK_EQ(decode_raw(H5L_OP_ATTR, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    /* VAR: ndims > H5L_MAX_DIMS, string type, zero-size type */
    const uint32_t nds[] = {H5L_MAX_DIMS + 1, 0xFFFFFFFFu};
    for (size_t i = 0; i < 2; i++) {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_type_encode(&body, T_I32);
        h5l_buf_u32(&body, 0);
        h5l_buf_u32(&body, nds[i]);
        CHECK_EQ(decode_raw(H5L_OP_VAR, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    const h5l_type_t badvt[] = {T_STR, {H5L_CLASS_INT, 0, 0, 0}, {7, 4, 0, 0}};
    for (size_t i = 0; i < 3; i++) {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_type_encode(&body, badvt[i]);
        h5l_buf_u32(&body, 0);
        h5l_buf_u32(&body, 0);
        h5l_buf_put(&body, "\0\0\0\0", 4);
        h5l_buf_str(&body, "/v");
        CHECK_EQ(decode_raw(H5L_OP_VAR, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    /* unknown kinds */
    for (uint16_t kind = 0; kind < 12; kind += (kind == 0 ? 6 : 1)) {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_buf_u64(&body, 1);
        CHECK_EQ(decode_raw(kind, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    /* a name holding a NUL */
    {
        h5l_buf_t body = {0};
        h5l_buf_u32(&body, 1);
        h5l_buf_u32(&body, 3);
        h5l_buf_put(&body, "/a\0", 3);
        CHECK_EQ(decode_raw(H5L_OP_GROUP, &body), H5L_ECORRUPT);
        h5l_buf_free(&body);
    }
    /* missing padding after the body */
    {
        h5l_op_t op = sample_op(H5L_OP_DIMLEN);
        h5l_buf_t b = {0};
        h5l_op_encode(&b, &op);
        uint8_t *p = dup_n(b.p, 20);
        h5l_cur_t c = h5l_cur(p, 20);
        h5l_op_t got;
        CHECK_EQ(h5l_op_decode(&c, &got), H5L_ECORRUPT);
        free(p);
        h5l_buf_free(&b);
    }
}

/* ---- TICK header ---------------------------------------------------- */

static void test_tick_header(void)
{
    h5l_tick_info_t t = {.tick = 7,
                         .time_ns = 0x0102030405060708ull,
                         .nranks = 12,
                         .data_off = 8192,
                         .data_size = 1234567,
                         .table_off = 0x100000000ull,
                         .table_size = 96,
                         .nrecords = 3};
    h5l_buf_t b = {0};
    h5l_tick_encode(&b, &t, 5);
    CHECK_EQ(b.len, H5L_TICK_LEN);
    CHECK_EQ(le64(b.p), 7);
    CHECK(le64(b.p + 8) == 0x0102030405060708ull);
    CHECK_EQ(le32(b.p + 16), 12);
    CHECK_EQ(le32(b.p + 20), 5);
    CHECK_EQ(le64(b.p + 24), 8192);
    CHECK_EQ(le64(b.p + 32), 1234567);
    CHECK(le64(b.p + 40) == 0x100000000ull);
    CHECK_EQ(le64(b.p + 48), 96);
    CHECK_EQ(le64(b.p + 56), 3);

    h5l_tick_info_t d;
    uint32_t nops = 0;
    h5l_cur_t c = h5l_cur(b.p, b.len);
    CHECK_EQ(h5l_tick_decode(&c, &d, &nops), H5L_OK);
    CHECK(d.tick == t.tick && d.time_ns == t.time_ns && d.nranks == t.nranks && d.data_off == t.data_off &&
          d.data_size == t.data_size && d.table_off == t.table_off && d.table_size == t.table_size &&
          d.nrecords == t.nrecords);
    CHECK_EQ(nops, 5);
    for (size_t n = 0; n < H5L_TICK_LEN; n++) {
        uint8_t *p = dup_n(b.p, n);
        c = h5l_cur(p, n);
        CHECK_EQ(h5l_tick_decode(&c, &d, &nops), H5L_ECORRUPT);
        free(p);
    }
    h5l_buf_free(&b);
}

/* ---- record block header -------------------------------------------- */

static void test_block_header(void)
{
    h5l_block_t blk = {.checksum = 0xABCDEF0123456789ull, .payload = 0x1000, .nrec = 4, .size = 1ull << 40};
    uint8_t out[H5L_BLOCK_LEN];
    h5l_block_encode(&blk, out);
    CHECK(le64(out) == 0xABCDEF0123456789ull);
    CHECK_EQ(le32(out + 8), 0x1000);
    CHECK_EQ(le32(out + 12), 4);
    CHECK(le64(out + 16) == 1ull << 40);
    h5l_block_t d;
    h5l_block_decode(out, &d);
    CHECK(d.checksum == blk.checksum && d.payload == 0x1000 && d.nrec == 4 && d.size == blk.size);
    /* the seed binds (tick, rank): format.md 4, computed here */
    uint64_t seed = h5l_seed(ID);
    CHECK(h5l_block_seed(seed, 7, 3) == (seed ^ (7 * 0x9E3779B97F4A7C15ull) ^ (4 * 0xC2B2AE3D27D4EB4Full)));
    CHECK(h5l_block_seed(seed, 7, 3) != h5l_block_seed(seed, 7, 2));
    CHECK(h5l_block_seed(seed, 7, 3) != h5l_block_seed(seed, 8, 3));
    /* the checksum covers bytes 8 .. 24+P */
    uint8_t blkb[H5L_BLOCK_LEN + 5] = {0};
    blk.payload = 5;
    h5l_block_encode(&blk, blkb);
    memcpy(blkb + H5L_BLOCK_LEN, "abcde", 5);
    CHECK(h5l_block_sum(blkb, seed, 7, 3) == XXH3_64bits_withSeed(blkb + 8, 21, h5l_block_seed(seed, 7, 3)));
    CHECK(h5l_seg_seed(seed, 7, 3, 0) == (h5l_block_seed(seed, 7, 3) ^ 0xD6E8FEB86659FD93ull));
    CHECK(h5l_seg_seed(seed, 7, 3, 9) == (h5l_block_seed(seed, 7, 3) ^ (10 * 0xD6E8FEB86659FD93ull)));
}

/* ---- records -------------------------------------------------------- */

/* LEB128 written here, independently. */
static size_t leb(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static void test_varints(void)
{
    const uint64_t vals[] = {0,          1,          127, 128, 300, 16383, 16384, (1ull << 21) - 1, 1ull << 21,
                             (1ull << 32) - 1, 1ull << 35, UINT64_MAX - 1, UINT64_MAX};
    { /* all of them back to back: each read stops at its own last byte (the inline paths see the next one) */
        h5l_buf_t all = {0};
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) h5l_buf_varint(&all, vals[i]);
        h5l_cur_t c = h5l_cur(all.p, all.len);
        for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) CHECK_EQ(h5l_cur_varint(&c), vals[i]);
        CHECK(!c.bad && c.pos == all.len);
        h5l_buf_free(&all);
    }
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        h5l_buf_t b = {0};
        h5l_buf_varint(&b, vals[i]);
        uint8_t want[10];
        size_t n = leb(want, vals[i]);
        CHECK(b.len == n && memcmp(b.p, want, n) == 0);
        h5l_cur_t c = h5l_cur(b.p, b.len);
        CHECK(h5l_cur_varint(&c) == vals[i] && !c.bad && c.pos == n);
        for (size_t k = 0; k < n; k++) { /* every truncation */
            uint8_t *p = dup_n(b.p, k);
            c = h5l_cur(p, k);
            h5l_cur_varint(&c);
            CHECK(c.bad);
            free(p);
        }
        h5l_buf_free(&b);
    }
    /* over 64 bits: a 10th byte above 1, or an 11th byte */
    uint8_t big[11];
    memset(big, 0xff, sizeof big);
    big[9] = 0x02;
    h5l_cur_t c = h5l_cur(big, 10);
    h5l_cur_varint(&c);
    CHECK(c.bad);
    big[9] = 0x81;
    c = h5l_cur(big, 11);
    h5l_cur_varint(&c);
    CHECK(c.bad);
}

static void test_records(void)
{
    const uint32_t nd = 3;
    uint64_t st[6] = {1, 2, 3, 1ull << 40, 0, 9};
    uint64_t ct[6] = {4, 5, 6, 1, 2, 3};
    h5l_buf_t b = {0};
    h5l_rec_encode(&b, 17, 2, nd, st, ct);
    /* objid, nboxes, then per box start[nd] count[nd], all LEB128 */
    uint8_t want[128];
    size_t n = leb(want, 17);
    n += leb(want + n, 2);
    for (uint32_t k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < nd; i++) n += leb(want + n, st[k * nd + i]);
        for (uint32_t i = 0; i < nd; i++) n += leb(want + n, ct[k * nd + i]);
    }
    CHECK(b.len == n && memcmp(b.p, want, n) == 0);
    uint32_t objid = 0, nb = 0;
    h5l_cur_t c = h5l_cur(b.p, b.len);
    CHECK_EQ(h5l_rec_head_decode(&c, &objid, &nb), H5L_OK);
    CHECK(objid == 17 && nb == 2 && c.pos == 2);
    for (size_t k = 0; k < 2; k++) {
        uint8_t *p = dup_n(b.p, k);
        c = h5l_cur(p, k);
        CHECK_EQ(h5l_rec_head_decode(&c, &objid, &nb), H5L_ECORRUPT);
        free(p);
    }
    /* an objid over 32 bits */
    h5l_buf_t o = {0};
    h5l_buf_varint(&o, 1ull << 32);
    h5l_buf_varint(&o, 1);
    c = h5l_cur(o.p, o.len);
    CHECK_EQ(h5l_rec_head_decode(&c, &objid, &nb), H5L_ECORRUPT);
    h5l_buf_free(&o);
    h5l_buf_free(&b);
}

/* A reason prefixed with its context from the same h5l_err_t, as callers
 * do: the whole reason survives (a message that was its own source came
 * out garbled to a few letters), and a message too long is cut, not
 * overrun. */
static void test_err_prefix_own_message(void)
{
    h5l_err_t e = {0};
    CHECK_EQ(h5l_err_set(&e, H5L_ECORRUPT, "%s: no room for %s", "/a/f.h5", "the index"), H5L_ECORRUPT);
    CHECK_EQ(h5l_err_set(&e, H5L_EIO, "%s: building tick %d: %s", "/a/f.h5", 3, e.msg), H5L_EIO);
    CHECK(e.code == H5L_EIO && !strcmp(e.msg, "/a/f.h5: building tick 3: /a/f.h5: no room for the index"));
    char big[2 * sizeof e.msg];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    h5l_err_set(&e, H5L_EIO, "%s", big);
    h5l_err_set(&e, H5L_EIO, "p: %s", e.msg);
    CHECK(strlen(e.msg) == sizeof e.msg - 1 && !strncmp(e.msg, "p: xxx", 6));
    CHECK_EQ(h5l_err_set(NULL, H5L_ENOMEM, "%s", "nowhere"), H5L_ENOMEM);
}

TEST_MAIN(T(test_codec_le_and_pad), T(test_codec_str_rejects), T(test_ub_layout_roundtrip), T(test_ub_rejects),
          T(test_jhdr_layout_roundtrip_rejects), T(test_frame_layout), T(test_hash2_streaming_equals_oneshot),
          T(test_type_valid), T(test_op_roundtrip_all_kinds), T(test_op_layout), T(test_op_truncation_every_length),
          T(test_op_rejects), T(test_tick_header), T(test_block_header), T(test_varints), T(test_records),
          T(test_err_prefix_own_message))
