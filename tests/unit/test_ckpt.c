/* test_ckpt.c — index checkpoints (docs/format.md 3.5): the frame's bytes
 * against the layout table, decode(encode(x)) == x, and rejection of every
 * damaged form: each byte flipped, each truncated prefix, a wrong journal
 * offset, and payloads that verify but break a rule (ticks out of the
 * segment, entries out of order, an eager tick listed, trailing bytes).
 * Then the writer's side: chunks of a record table (checked against boxes
 * chosen here), a wide box making its tick eager, a damaged block refused,
 * and the builder end to end on a file of tables written here.
 *
 * Why: a checkpoint lets readers skip decoding ticks; a wrong one would give
 * wrong answers, so the decoder must refuse anything not exactly right
 * (readers then read the whole journal). Buffers are exact-size heap copies
 * so ASan sees any over-read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckbuild.h"
#include "ckchain.h"
#include "ckmap.h"
#include "h5log/codec.h"
#include "h5log/format.h"
#include "oom.h"
#include "schema.h"
#include "tharness.h"

static const uint8_t ID[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 11, 12, 13, 14, 15, 0xA0};

static uint8_t *dup_n(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);
    if (n) memcpy(q, p, n);
    return q;
}

/* One DIMLEN op (24 bytes), as a TICK payload would hold it. */
static void dimlen_op(h5l_buf_t *b, uint32_t dimid, uint64_t len)
{
    h5l_op_t op = {0};
    op.kind = H5L_OP_DIMLEN;
    op.id = dimid;
    op.len = len;
    h5l_op_encode(b, &op);
}

/* A checkpoint of ticks 5..7 with ops, one eager tick, three chunks. */
typedef struct sample {
    h5l_buf_t ops[3];
    h5l_ckpt_tick_t ticks[3];
    uint64_t eager[1];
    uint64_t coords[6], lists[4];
    h5l_ckpt_chunk_t chunks[3];
    h5l_ckpt_t c;
} sample_t;

static void sample(sample_t *s, uint64_t pos)
{
    memset(s, 0, sizeof *s);
    uint64_t fpos = 1000;
    for (int i = 0; i < 3; i++) {
        if (i != 1) dimlen_op(&s->ops[i], 0, 5 + (uint64_t)i);
        h5l_tick_info_t ti = {5 + (uint64_t)i,
                              1700000000000000000ull + 1000 * (uint64_t)i,
                              2,
                              8192 + 512 * (uint64_t)i,
                              256,
                              8192 + 512 * (uint64_t)i + 256,
                              64,
                              2};
        if (i == 2) ti.time_ns -= 5000; /* a clock going back: a negative difference */
        s->ticks[i].info = ti;
        s->ticks[i].nops = i != 1;
        s->ticks[i].ops = s->ops[i].p;
        s->ticks[i].opslen = s->ops[i].len;
        if (i < 2) fpos += h5l_frame_size(H5L_TICK_LEN + s->ops[i].len);
    }
    /* the frame of tick 7 starts at fpos and ends at pos */
    (void)fpos;
    s->eager[0] = 6;
    uint64_t co[6] = {0, 3, 4, 0, 4, 1};
    memcpy(s->coords, co, sizeof co);
    uint64_t li[4] = {5, 7, 5, 7};
    memcpy(s->lists, li, sizeof li);
    s->chunks[0] = (h5l_ckpt_chunk_t){1, 2, s->coords, 2, s->lists};
    s->chunks[1] = (h5l_ckpt_chunk_t){1, 2, s->coords + 2, 1, s->lists + 2};
    s->chunks[2] = (h5l_ckpt_chunk_t){3, 2, s->coords + 4, 1, s->lists + 3};
    s->c = (h5l_ckpt_t){5, 7, 1000, pos, 600, s->ticks, s->eager, 1, s->chunks, 3, NULL};
}

static void sample_free(sample_t *s)
{
    for (int i = 0; i < 3; i++) h5l_buf_free(&s->ops[i]);
}

static uint64_t sample_pos(void)
{
    sample_t s;
    sample(&s, 0);
    uint64_t p = 1000;
    for (int i = 0; i < 3; i++) p += h5l_frame_size(H5L_TICK_LEN + s.ops[i].len);
    sample_free(&s);
    return p;
}

static void test_roundtrip(void)
{
    uint64_t seed = h5l_seed(ID), pos = sample_pos();
    sample_t s;
    sample(&s, pos);
    h5l_buf_t b = {0};
    h5l_ckpt_encode(&b, &s.c, seed);
    CHECK(!b.oom);
    CHECK_EQ(b.len % 8, 0);
    /* frame header (3.2) and fixed payload fields (3.5) */
    CHECK_EQ(h5l_get_le32(b.p), b.len - 24 - (b.len - 24 - h5l_get_le32(b.p)));
    CHECK_EQ(b.p[4] | b.p[5] << 8, 0x8003);
    CHECK_EQ(b.p[6] | b.p[7] << 8, 2);
    CHECK(h5l_hash(b.p + 24, h5l_get_le32(b.p), seed) == h5l_get_le64(b.p + 8));
    CHECK_EQ(h5l_get_le64(b.p + 24), 5);
    CHECK_EQ(h5l_get_le64(b.p + 32), 7);
    CHECK_EQ(h5l_get_le64(b.p + 40), 1000);
    CHECK_EQ(h5l_get_le64(b.p + 48), pos);
    CHECK_EQ(h5l_get_le64(b.p + 56), 600);
    /* its summary (an eager tick: not simple): flags 0, nrec 6, no runs */
    CHECK_EQ(h5l_get_le64(b.p + 64), 4);
    CHECK(h5l_get_le64(b.p + 72) == h5l_hash(b.p + 80, 4, seed));
    CHECK(b.p[80] == 0 && b.p[81] == 6 && b.p[82] == 0 && b.p[83] == 0);
    /* the first tick entry: zz(time) as a varint starts the varints */
    uint8_t *f = dup_n(b.p, b.len);
    h5l_ckpt_t d;
    h5l_err_t e = {0};
    /* the layout of earlier writers (no summary) decodes to the same */
    h5l_buf_t old = {0};
    h5l_ckpt_encode_nosum(&old, &s.c, seed);
    CHECK_EQ(h5l_get_le64(old.p + 64), 0);
    CHECK_EQ(b.len, h5l_frame_size(h5l_get_le32(old.p) + 12)); /* its checksum and 4 bytes more */
    CHECK_EQ(h5l_ckpt_decode(old.p, old.len, seed, pos, &d, "t.h5", &e), 0);
    CHECK_EQ(d.nchunks, 3);
    h5l_ckpt_clear(&d);
    h5l_buf_free(&old);
    CHECK_EQ(h5l_ckpt_decode(f, b.len, seed, pos, &d, "t.h5", &e), 0);
    CHECK_EQ(d.first, 5);
    CHECK_EQ(d.last, 7);
    CHECK_EQ(d.tickpos, 1000);
    CHECK_EQ(d.selfpos, pos);
    CHECK_EQ(d.prevpos, 600);
    for (int i = 0; i < 3; i++) {
        const h5l_tick_info_t *x = &d.ticks[i].info, *y = &s.ticks[i].info; /* field by field: padding is not set */
        CHECK(x->tick == y->tick && x->time_ns == y->time_ns && x->nranks == y->nranks && x->data_off == y->data_off &&
              x->data_size == y->data_size && x->table_off == y->table_off && x->table_size == y->table_size &&
              x->nrecords == y->nrecords);
        CHECK_EQ(d.ticks[i].nops, s.ticks[i].nops);
        CHECK_EQ(d.ticks[i].opslen, s.ticks[i].opslen);
        CHECK(d.ticks[i].opslen == 0 || memcmp(d.ticks[i].ops, s.ticks[i].ops, d.ticks[i].opslen) == 0);
    }
    CHECK_EQ(d.neager, 1);
    CHECK_EQ(d.eager[0], 6);
    CHECK_EQ(d.nchunks, 3);
    for (int i = 0; i < 3 && d.nchunks == 3; i++) {
        CHECK_EQ(d.chunks[i].objid, s.chunks[i].objid);
        CHECK_EQ(d.chunks[i].nd, 2);
        CHECK(memcmp(d.chunks[i].coord, s.chunks[i].coord, 16) == 0);
        CHECK_EQ(d.chunks[i].nt, s.chunks[i].nt);
        CHECK(memcmp(d.chunks[i].ticks, s.chunks[i].ticks, s.chunks[i].nt * 8) == 0);
    }
    h5l_ckpt_clear(&d);
    /* elsewhere than it says: refused */
    CHECK_EQ(h5l_ckpt_decode(f, b.len, seed, pos + 8, &d, "t.h5", &e), H5L_ECORRUPT);
    /* another file's seed: refused */
    CHECK_EQ(h5l_ckpt_decode(f, b.len, seed ^ 1, pos, &d, "t.h5", &e), H5L_ECORRUPT);
    free(f);
    /* every byte flipped (each bit pattern 0xFF, then one low bit): refused */
    int accepted = 0;
    for (size_t i = 0; i < b.len; i++) {
        for (int m = 0; m < 2; m++) {
            f = dup_n(b.p, b.len);
            f[i] ^= m ? 0x01 : 0xFF;
            if (h5l_ckpt_decode(f, b.len, seed, pos, &d, "t.h5", &e) != H5L_ECORRUPT) accepted++;
            h5l_ckpt_clear(&d);
            free(f);
        }
    }
    CHECK_EQ(accepted, 0);
    /* every truncated prefix: refused */
    accepted = 0;
    for (size_t n = 0; n < b.len; n++) {
        f = dup_n(b.p, n);
        if (h5l_ckpt_decode(f, n, seed, pos, &d, "t.h5", &e) != H5L_ECORRUPT) accepted++;
        h5l_ckpt_clear(&d);
        free(f);
    }
    CHECK_EQ(accepted, 0);
    h5l_buf_free(&b);
    sample_free(&s);
}

/* Encode a modified sample (checksums right) and expect a refusal. */
static void expect_bad(sample_t *s, uint64_t pos, const char *why)
{
    uint64_t seed = h5l_seed(ID);
    h5l_buf_t b = {0};
    h5l_ckpt_encode(&b, &s->c, seed);
    uint8_t *f = dup_n(b.p, b.len);
    h5l_ckpt_t d;
    h5l_err_t e = {0};
    int rc = h5l_ckpt_decode(f, b.len, seed, pos, &d, "t.h5", &e);
    if (rc != H5L_ECORRUPT) fprintf(stderr, "  accepted: %s\n", why);
    CHECK_EQ(rc, H5L_ECORRUPT);
    h5l_ckpt_clear(&d);
    free(f);
    h5l_buf_free(&b);
}

static void test_rules(void)
{
    uint64_t pos = sample_pos();
    sample_t s;
    sample(&s, pos);
    s.chunks[1].coord = s.coords; /* the same chunk twice */
    expect_bad(&s, pos, "chunk twice");
    sample_free(&s);
    sample(&s, pos);
    s.chunks[0].objid = 2; /* out of order */
    expect_bad(&s, pos, "out of order");
    sample_free(&s);
    sample(&s, pos);
    s.lists[1] = 6; /* an eager tick listed */
    expect_bad(&s, pos, "eager listed");
    sample_free(&s);
    sample(&s, pos);
    s.lists[1] = 8; /* a tick after the segment */
    expect_bad(&s, pos, "tick past the segment");
    sample_free(&s);
    sample(&s, pos);
    s.lists[0] = 7; /* not increasing */
    expect_bad(&s, pos, "ticks not increasing");
    sample_free(&s);
    sample(&s, pos);
    s.eager[0] = 4; /* eager before the segment */
    expect_bad(&s, pos, "eager before the segment");
    sample_free(&s);
    sample(&s, pos);
    s.c.prevpos = 0; /* F = 5 needs a previous checkpoint */
    expect_bad(&s, pos, "no previous");
    sample_free(&s);
    sample(&s, pos);
    s.c.tickpos = 1008; /* frames would end elsewhere */
    expect_bad(&s, pos, "tick frames elsewhere");
    sample_free(&s);
    sample(&s, pos);
    s.chunks[2].nd = 3; /* a coordinate more: the frames still line up, the entries do not */
    s.chunks[2].coord = s.coords + 3;
    s.chunks[1].objid = 1;
    s.chunks[2].objid = 1;
    expect_bad(&s, pos, "two ranks for one variable");
    sample_free(&s);
    /* trailing bytes after a valid payload */
    sample(&s, pos);
    uint64_t seed = h5l_seed(ID);
    h5l_buf_t b = {0};
    h5l_ckpt_encode(&b, &s.c, seed);
    uint32_t len = h5l_get_le32(b.p);
    h5l_buf_t pl = {0}, fr = {0};
    h5l_buf_put(&pl, b.p + 24, len);
    h5l_buf_u8(&pl, 0);
    h5l_frame_encode(&fr, H5L_REC_CKPT, pl.p, (uint32_t)pl.len, seed);
    h5l_ckpt_t d;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_ckpt_decode(fr.p, fr.len, seed, pos, &d, "t.h5", &e), H5L_ECORRUPT);
    CHECK(strstr(e.msg, "t.h5") != NULL);
    h5l_ckpt_clear(&d);
    h5l_buf_free(&b);
    h5l_buf_free(&pl);
    h5l_buf_free(&fr);
    sample_free(&s);
}

/* A schema: dims t (unlimited), x (64); /v [t, x] float chunked [1, 16]. */
static void mk_schema(h5l_schema_t *s)
{
    h5l_schema_init(s);
    h5l_op_t d0 = {.kind = H5L_OP_DIM, .id = 0, .flags = 1, .len = 0, .name = "t"};
    h5l_op_t d1 = {.kind = H5L_OP_DIM, .id = 1, .flags = 0, .len = 64, .name = "x"};
    uint32_t dimids[2] = {0, 1};
    uint64_t chunk[2] = {1, 16};
    float fill = 0;
    h5l_op_t v = {.kind = H5L_OP_VAR,
                  .id = 1,
                  .name = "/v",
                  .type = {H5L_CLASS_FLOAT, 4, 0, 0},
                  .flags = 1,
                  .ndims = 2,
                  .dimids = dimids,
                  .chunk = chunk,
                  .data = &fill,
                  .data_len = 4};
    h5l_err_t e = {0};
    CHECK_EQ(h5l_schema_apply(s, 1, &d0, &e), 0);
    CHECK_EQ(h5l_schema_apply(s, 1, &d1, &e), 0);
    CHECK_EQ(h5l_schema_apply(s, 1, &v, &e), 0);
}

/* A one-rank record table of tick `tick` with the given boxes of /v. */
static void mk_table(h5l_buf_t *t, uint64_t tick, int nrec, const uint64_t (*box)[4])
{
    uint64_t seed = h5l_seed(ID);
    h5l_buf_t p = {0};
    for (int i = 0; i < nrec; i++) h5l_rec_encode(&p, 1, 1, 2, box[i], box[i] + 2);
    h5l_buf_u64(&p, 0x1234); /* one data checksum */
    uint8_t hdr[H5L_BLOCK_LEN];
    h5l_block_t blk = {0, (uint32_t)p.len, (uint32_t)nrec, 100};
    h5l_block_encode(&blk, hdr);
    size_t at = t->len;
    h5l_buf_put(t, hdr, sizeof hdr);
    h5l_buf_put(t, p.p, p.len);
    h5l_put_le64(t->p + at, h5l_block_sum(t->p + at, seed, tick, 0));
    h5l_buf_pad8(t);
    h5l_buf_free(&p);
}

typedef struct seen {
    uint64_t c[64][2];
    int n;
} seen_t;

static int note(void *ctx, uint32_t objid, uint32_t nd, const uint64_t *coord)
{
    seen_t *s = ctx;
    if (objid != 1 || nd != 2 || s->n == 64) return -7;
    s->c[s->n][0] = coord[0];
    s->c[s->n][1] = coord[1];
    s->n++;
    return 0;
}

static void test_table_chunks(void)
{
    h5l_schema_t s;
    mk_schema(&s);
    uint64_t seed = h5l_seed(ID);
    /* row 3, columns 10..33: chunks (3,0) (3,1) (3,2); then (7, 48..63): (7,3) */
    const uint64_t box[2][4] = {{3, 10, 1, 24}, {7, 48, 1, 16}};
    h5l_buf_t t = {0};
    mk_table(&t, 9, 2, box);
    h5l_tick_info_t ti = {9, 0, 1, 4096, 100, 4096 + 100, t.len, 2};
    uint8_t *tab = dup_n(t.p, t.len);
    seen_t sn = {0};
    CHECK_EQ(h5l_ckpt_table_chunks(tab, &ti, seed, &s, note, &sn), 0);
    CHECK_EQ(sn.n, 4);
    uint64_t want[4][2] = {{3, 0}, {3, 1}, {3, 2}, {7, 3}};
    for (int i = 0; i < 4 && sn.n == 4; i++) CHECK(sn.c[i][0] == want[i][0] && sn.c[i][1] == want[i][1]);
    /* bound to its tick: another tick's seed fails */
    ti.tick = 10;
    sn.n = 0;
    CHECK_EQ(h5l_ckpt_table_chunks(tab, &ti, seed, &s, note, &sn), H5L_ECORRUPT);
    ti.tick = 9;
    /* a flipped byte: refused */
    tab[30] ^= 1;
    CHECK_EQ(h5l_ckpt_table_chunks(tab, &ti, seed, &s, note, &sn), H5L_ECORRUPT);
    free(tab);
    h5l_buf_free(&t);
    /* a box over 5 rows x 64 columns touches 20 chunks: eager */
    const uint64_t wide[1][4] = {{0, 0, 5, 64}};
    mk_table(&t, 9, 1, wide);
    ti.table_size = t.len;
    ti.nrecords = 1;
    tab = dup_n(t.p, t.len);
    sn.n = 0;
    CHECK_EQ(h5l_ckpt_table_chunks(tab, &ti, seed, &s, note, &sn), 1);
    free(tab);
    h5l_buf_free(&t);
    h5l_schema_free(&s);
}

/* The builder end to end: three ticks with every = 3, tables in a file
 * written here, the third wide; the checkpoint appended after tick 3 says
 * what the boxes say. */
/* A checkpoint writer over a temporary file of record tables, with the
 * schema of mk_schema. */
typedef struct bld {
    char path[32];
    int fd;
    h5l_schema_t s;
    uint64_t seed;
    h5l_ckpt_w_t *w;
} bld_t;

static void bld_open(bld_t *b, uint64_t every)
{
    snprintf(b->path, sizeof b->path, "/tmp/test_ckpt.XXXXXX");
    b->fd = mkstemp(b->path);
    CHECK(b->fd >= 0);
    mk_schema(&b->s);
    b->seed = h5l_seed(ID);
    b->w = h5l_ckpt_w_new(b->path, every, b->seed);
    CHECK(b->w != NULL);
}

/* Tick `tick`: its one-record table of box at file offset off, then the
 * writer told of it (TICK frame at jpos, ops); what it appends goes to out. */
static void bld_tick(bld_t *b, uint64_t tick, const uint64_t (*box)[4], uint64_t off, uint32_t nops,
                     const h5l_buf_t *ops, uint64_t jpos, h5l_buf_t *out)
{
    h5l_buf_t t = {0};
    mk_table(&t, tick, 1, box);
    CHECK_EQ(pwrite(b->fd, t.p, t.len, (off_t)off), (ssize_t)t.len);
    h5l_tick_info_t ti = {tick, 1000 * tick, 1, off - 100, 100, off, t.len, 1};
    h5l_ckpt_w_tick(b->w, &ti, nops, ops->p, ops->len, jpos, &b->s, out);
    h5l_buf_free(&t);
}

static void bld_close(bld_t *b)
{
    h5l_ckpt_w_free(b->w);
    h5l_schema_free(&b->s);
    close(b->fd);
    unlink(b->path);
}

static void test_builder(void)
{
    bld_t bl;
    bld_open(&bl, 3);
    const char *path = bl.path;
    uint64_t seed = bl.seed;
    const uint64_t boxes[3][4] = {{0, 0, 1, 20}, {0, 16, 2, 16}, {0, 0, 4, 64}};
    h5l_buf_t ops = {0};
    dimlen_op(&ops, 0, 1);
    uint64_t jpos = 64, off = 4096;
    h5l_buf_t out = {0};
    for (uint64_t tick = 1; tick <= 3; tick++) {
        out.len = 0;
        h5l_buf_put(&out, "TICKFRM!", 8); /* stands for the TICK frame before it */
        bld_tick(&bl, tick, &boxes[tick - 1], off, 1, &ops, jpos, &out);
        CHECK_EQ(out.len > 8, tick == 3);
        jpos += h5l_frame_size(H5L_TICK_LEN + ops.len);
        off += 4096;
    }
    h5l_ckpt_t d;
    h5l_err_t e = {0};
    uint8_t *f = dup_n(out.p + 8, out.len - 8);
    CHECK_EQ(h5l_ckpt_decode(f, out.len - 8, seed, jpos, &d, path, &e), 0);
    CHECK_EQ(d.first, 1);
    CHECK_EQ(d.last, 3);
    CHECK_EQ(d.prevpos, 0);
    CHECK_EQ(d.neager, 1);
    CHECK_EQ(d.neager ? d.eager[0] : 0, 3);
    /* tick 1: (0,0) (0,1); tick 2: (0,1) (1,1) */
    CHECK_EQ(d.nchunks, 3);
    if (d.nchunks == 3) {
        CHECK(d.chunks[0].coord[0] == 0 && d.chunks[0].coord[1] == 0 && d.chunks[0].nt == 1 &&
              d.chunks[0].ticks[0] == 1);
        CHECK(d.chunks[1].coord[0] == 0 && d.chunks[1].coord[1] == 1 && d.chunks[1].nt == 2 &&
              d.chunks[1].ticks[0] == 1 && d.chunks[1].ticks[1] == 2);
        CHECK(d.chunks[2].coord[0] == 1 && d.chunks[2].coord[1] == 1 && d.chunks[2].ticks[0] == 2);
    }
    if (d.ticks) CHECK_EQ(d.ticks[1].info.table_off, 4096 * 2);
    if (e.code) fprintf(stderr, "  %s\n", e.msg);
    h5l_ckpt_clear(&d);
    free(f);
    h5l_buf_free(&out);
    h5l_buf_free(&ops);
    bld_close(&bl);
}

/* A segment is cut when its ops, not only its tables, reach 16 MiB: ticks
 * that set a large attribute each made a segment that grew past what a
 * frame can hold, and its build failed at every tick from then on. */
static void test_builder_large_ops(void)
{
    bld_t bl;
    bld_open(&bl, 1000);
    const uint64_t box[1][4] = {{0, 0, 1, 20}};
    h5l_buf_t ops = {0};
    uint32_t nops = 0;
    while (ops.len < ((size_t)9 << 20)) { /* 9 MiB of ops a tick */
        dimlen_op(&ops, 0, 1);
        nops++;
    }
    uint64_t jpos = 64, off = 4096;
    h5l_buf_t out = {0};
    int built = 0;
    for (uint64_t tick = 1; tick <= 6; tick++) {
        out.len = 0;
        bld_tick(&bl, tick, box, off, nops, &ops, jpos, &out);
        CHECK_EQ(out.len > 0, tick % 2 == 0); /* two ticks: 18 MiB of ops */
        built += out.len > 0;
        jpos += h5l_frame_size(H5L_TICK_LEN + ops.len) + out.len;
        off += 4096;
    }
    CHECK_EQ(built, 3);
    h5l_buf_free(&out);
    h5l_buf_free(&ops);
    bld_close(&bl);
}

/* ---- the summary (format.md 3.5) ---- */

/* Ticks 5..9 that only grow dimension 0 (by 2 a tick) and dimension 3 (at
 * ticks 5 and 8); chunks: variable 1 a row a tick along its first
 * dimension, variable 2 one chunk every tick, variable 3 (a scalar) every
 * other tick: simple, each in one run. Then each way of not being simple,
 * and a summary that verifies but is not what the entries say. */
typedef struct ssample {
    h5l_buf_t ops[5];
    h5l_ckpt_tick_t ticks[5];
    uint64_t coords[8], lists[16];
    h5l_ckpt_chunk_t chunks[8];
    h5l_ckpt_t c;
} ssample_t;

static void ssample(ssample_t *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < 5; i++) {
        dimlen_op(&s->ops[i], 0, 10 + 2 * (uint64_t)i);
        if (i == 0 || i == 3) dimlen_op(&s->ops[i], 3, 100 + (uint64_t)i);
        s->ticks[i].info = (h5l_tick_info_t){5 + (uint64_t)i, 1000 + (uint64_t)i, 1, 4096 + 512 * (uint64_t)i, 256,
                                             4096 + 512 * (uint64_t)i + 256, 64, 3};
        s->ticks[i].nops = i == 0 || i == 3 ? 2 : 1;
        s->ticks[i].ops = s->ops[i].p;
        s->ticks[i].opslen = s->ops[i].len;
    }
    size_t nl = 0;
    static uint64_t pairs[5][2];
    for (int i = 0; i < 5; i++) { /* variable 1: chunk (i, 2) at tick 5 + i */
        pairs[i][0] = (uint64_t)i;
        pairs[i][1] = 2;
        s->lists[nl] = 5 + (uint64_t)i;
        s->chunks[i] = (h5l_ckpt_chunk_t){1, 2, pairs[i], 1, s->lists + nl++};
    }
    s->coords[5] = 7; /* variable 2: chunk (7) at every tick */
    s->chunks[5] = (h5l_ckpt_chunk_t){2, 1, s->coords + 5, 5, s->lists + nl};
    for (int i = 0; i < 5; i++) s->lists[nl++] = 5 + (uint64_t)i;
    s->chunks[6] = (h5l_ckpt_chunk_t){3, 0, NULL, 3, s->lists + nl}; /* variable 3: ticks 5, 7, 9 */
    s->lists[nl++] = 5;
    s->lists[nl++] = 7;
    s->lists[nl++] = 9;
    s->c = (h5l_ckpt_t){5, 9, 1000, 0, 600, s->ticks, NULL, 0, s->chunks, 7, NULL};
    s->c.selfpos = 1000; /* right after the five TICK frames from journal offset 1000 */
    for (int i = 0; i < 5; i++) s->c.selfpos += h5l_frame_size(H5L_TICK_LEN + s->ops[i].len);
}

static void ssample_free(ssample_t *s)
{
    for (int i = 0; i < 5; i++) h5l_buf_free(&s->ops[i]);
}

static int sum_of(const h5l_ckpt_t *c, h5l_cksum_t *sm)
{
    h5l_buf_t b = {0};
    h5l_cksum_of(c, &b);
    int rc = h5l_cksum_decode(b.p, b.len, c->first, c->last, UINT32_MAX, sm);
    h5l_buf_free(&b);
    return rc;
}

static void test_summary(void)
{
    ssample_t s;
    ssample(&s);
    h5l_cksum_t sm;
    CHECK_EQ(sum_of(&s.c, &sm), H5L_OK);
    CHECK_EQ(sm.simple, 1);
    CHECK_EQ(sm.nrec, 15);
    CHECK_EQ(sm.ndr, 2);
    if (sm.ndr == 2) {
        const h5l_ckdim_run_t *a = &sm.dr[0], *b = &sm.dr[1];
        CHECK(a->dimid == 0 && a->tick == 5 && a->len == 10 && a->n == 5 && a->dt == 1 && a->dl == 2);
        CHECK(b->dimid == 3 && b->tick == 5 && b->len == 100 && b->n == 2 && b->dt == 3 && b->dl == 3);
    }
    CHECK_EQ(sm.ncr, 3);
    if (sm.ncr == 3) {
        const h5l_ckchunk_run_t *r = sm.cr;
        CHECK(r[0].objid == 1 && r[0].nd == 2 && r[0].coord[0] == 0 && r[0].coord[1] == 2 && r[0].cnt == 5 &&
              r[0].k == 1 && r[0].t0 == 5 && r[0].dt == 1);
        CHECK(r[1].objid == 2 && r[1].nd == 1 && r[1].coord[0] == 7 && r[1].cnt == 1 && r[1].k == 5 && r[1].t0 == 5 &&
              r[1].dt == 1);
        CHECK(r[2].objid == 3 && r[2].nd == 0 && r[2].cnt == 1 && r[2].k == 3 && r[2].t0 == 5 && r[2].dt == 2);
    }
    h5l_cksum_free(&sm);
    /* the frame: decodes, and a summary changed (checksums made right
     * again) is refused for not being what the entries say */
    uint64_t seed = h5l_seed(ID), pos = s.c.selfpos;
    h5l_buf_t b = {0};
    h5l_ckpt_encode(&b, &s.c, seed);
    h5l_ckpt_t d;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_ckpt_decode(b.p, b.len, seed, pos, &d, "t.h5", &e), H5L_OK);
    h5l_ckpt_clear(&d);
    uint32_t slen = (uint32_t)h5l_get_le64(b.p + 64);
    CHECK(slen > 10);
    for (uint32_t at = 0; at < slen; at++) {
        uint8_t *pl = dup_n(b.p + 24, h5l_get_le32(b.p));
        pl[56 + at] ^= 0x01;
        h5l_put_le64(pl + 48, h5l_hash(pl + 56, slen, seed));
        h5l_buf_t f2 = {0};
        h5l_frame_encode(&f2, H5L_REC_CKPT, pl, h5l_get_le32(b.p), seed);
        int rc = h5l_ckpt_decode(f2.p, f2.len, seed, pos, &d, "t.h5", &e);
        CHECK_EQ(rc, H5L_ECORRUPT);
        if (rc != H5L_ECORRUPT) fprintf(stderr, "  summary byte %u changed: accepted\n", at);
        h5l_ckpt_clear(&d);
        h5l_buf_free(&f2);
        free(pl);
    }
    h5l_buf_free(&b);
    /* summaries a reader must refuse though their checksum verifies: runs
     * standing for more chunks than the entries could list (a few bytes
     * making a reader build millions of chunks), a run repeating the
     * chunks of the one before it, runs out of order */
    {
        uint64_t span = 99999, avail = (span + 1) * 9 + 1000; /* 100,000 ticks, room for ~200 chunks */
        for (int bad = 0; bad < 4; bad++) {
            h5l_buf_t sb = {0};
            h5l_buf_varint(&sb, 1);
            h5l_buf_varint(&sb, 0);
            h5l_buf_varint(&sb, 0);
            uint64_t runs[3][3] = {{0, 0, 100}, {0, 100, 50}, {1, 0, 10}}; /* objid, coord, cnt: fits */
            if (bad == 1) runs[1][2] = 100000;      /* 100,000 chunks listed in 1000 bytes */
            if (bad == 2) runs[1][1] = 50;          /* chunks 50..99 again */
            if (bad == 3) runs[2][0] = 0, runs[2][1] = 7; /* before the runs of its variable */
            h5l_buf_varint(&sb, 3);
            for (int i = 0; i < 3; i++) {
                h5l_buf_varint(&sb, runs[i][0]);
                h5l_buf_varint(&sb, 1);
                h5l_buf_varint(&sb, runs[i][1]);
                h5l_buf_varint(&sb, runs[i][2]);
                h5l_buf_varint(&sb, 1);
                h5l_buf_varint(&sb, 0);
                h5l_buf_varint(&sb, runs[i][2] > 1 ? 1 : 0);
            }
            CHECK_EQ(h5l_cksum_decode(sb.p, sb.len, 1, 1 + span, avail, &sm), bad ? H5L_ECORRUPT : H5L_OK);
            h5l_cksum_free(&sm);
            h5l_buf_free(&sb);
        }
    }
    /* not simple: an eager tick; another op; two lengths of one dimension
     * in a tick; a chunk's ticks unevenly spaced; bytes after a tick's ops
     * (a reader refuses that tick) */
    for (int way = 0; way < 5; way++) {
        ssample_t t;
        ssample(&t);
        uint64_t eg = 6, uneven[3] = {5, 6, 9};
        h5l_buf_t extra = {0};
        if (way == 0) { /* (the summary does not look at the chunk lists then) */
            t.c.eager = &eg;
            t.c.neager = 1;
        } else if (way == 1) {
            h5l_op_t op = {.kind = H5L_OP_GROUP, .id = 9, .name = "g"};
            h5l_buf_put(&extra, t.ops[2].p, t.ops[2].len);
            h5l_op_encode(&extra, &op);
            t.ticks[2].ops = extra.p;
            t.ticks[2].opslen = extra.len;
            t.ticks[2].nops = 2;
        } else if (way == 2) {
            h5l_buf_put(&extra, t.ops[2].p, t.ops[2].len);
            dimlen_op(&extra, 0, 99);
            t.ticks[2].ops = extra.p;
            t.ticks[2].opslen = extra.len;
            t.ticks[2].nops = 2;
        } else if (way == 3) {
            t.chunks[6].ticks = uneven;
        } else {
            h5l_buf_put(&extra, t.ops[2].p, t.ops[2].len);
            h5l_buf_u64(&extra, 0);
            t.ticks[2].ops = extra.p;
            t.ticks[2].opslen = extra.len;
        }
        CHECK_EQ(sum_of(&t.c, &sm), H5L_OK);
        CHECK_EQ(sm.simple, 0);
        CHECK_EQ(sm.nrec, 15);
        CHECK(sm.ndr == 0 && sm.ncr == 0);
        h5l_cksum_free(&sm);
        h5l_buf_free(&extra);
        ssample_free(&t);
    }
    /* ATTR ops among the DIMLEN ops: still simple, with the attribute
     * list: each (object, name)'s last op byte for byte, in the order of
     * the keys' first ops */
    {
        ssample_t t;
        ssample(&t);
        h5l_type_t st = {H5L_CLASS_STRING, 1, 0, 0};
        h5l_buf_t x2 = {0}, x3 = {0}, want = {0};
        h5l_op_t b1 = {.kind = H5L_OP_ATTR, .id = 0, .name = "b", .type = st, .len = 1, .data = "1", .data_len = 1};
        h5l_op_t a1 = {.kind = H5L_OP_ATTR, .id = 0, .name = "a", .type = st, .len = 1, .data = "1", .data_len = 1};
        h5l_op_t b2 = {.kind = H5L_OP_ATTR, .id = 0, .name = "b", .type = st, .len = 2, .data = "22", .data_len = 2};
        h5l_op_t a3 = {.kind = H5L_OP_ATTR, .id = 1, .name = "a", .type = st, .len = 3, .data = "333", .data_len = 3};
        h5l_buf_put(&x2, t.ops[2].p, t.ops[2].len); /* tick 2: b, a (root); tick 3: b again, then a of object 1 */
        h5l_op_encode(&x2, &b1);
        h5l_op_encode(&x2, &a1);
        h5l_op_encode(&x3, &b2);
        h5l_op_encode(&x3, &a3);
        h5l_buf_put(&x3, t.ops[3].p, t.ops[3].len);
        t.ticks[2].ops = x2.p;
        t.ticks[2].opslen = x2.len;
        t.ticks[2].nops += 2;
        t.ticks[3].ops = x3.p;
        t.ticks[3].opslen = x3.len;
        t.ticks[3].nops += 2;
        h5l_op_encode(&want, &b2);
        h5l_op_encode(&want, &a1);
        h5l_op_encode(&want, &a3);
        h5l_buf_t sb = {0};
        h5l_cksum_of(&t.c, &sb);
        CHECK_EQ(h5l_cksum_decode(sb.p, sb.len, t.c.first, t.c.last, UINT32_MAX, &sm), H5L_OK);
        CHECK(sm.simple && sm.attrs && sm.nat == 3 && sm.nrec == 15);
        CHECK(sb.len > want.len && !memcmp(sb.p + sb.len - want.len, want.p, want.len));
        if (sm.nat == 3)
            CHECK(!strcmp(sm.at[0].name, "b") && sm.at[0].len == 2 && !strcmp(sm.at[1].name, "a") && sm.at[1].id == 0 &&
                  !strcmp(sm.at[2].name, "a") && sm.at[2].id == 1);
        h5l_cksum_free(&sm);
        /* refused: flags 2 (attributes without simple), no attributes
         * after bit 1, an op of the list that is not an ATTR */
        size_t lstart = sb.len - want.len - 1; /* the varint 3 before the list */
        CHECK_EQ(sb.p[lstart], 3);
        for (int bad = 0; bad < 3; bad++) {
            h5l_buf_t c2 = {0};
            h5l_buf_put(&c2, sb.p, sb.len);
            if (bad == 0) c2.p[0] = 2;
            if (bad == 1) c2.len = lstart; /* the list cut off */
            if (bad == 2) c2.p[lstart + 1] = H5L_OP_DIMLEN; /* its first op's kind */
            CHECK_EQ(h5l_cksum_decode(c2.p, c2.len, t.c.first, t.c.last, UINT32_MAX, &sm), H5L_ECORRUPT);
            h5l_cksum_free(&sm);
            h5l_buf_free(&c2);
        }
        h5l_buf_free(&sb);
        h5l_buf_free(&x2);
        h5l_buf_free(&x3);
        h5l_buf_free(&want);
        ssample_free(&t);
    }
    ssample_free(&s);
}

/* ---- the reader's chunk map against a plain model ---- */

/* Four variables: 0 [rows, 1 chunk] a row a tick (one run), sometimes an
 * old row rewritten (the runs split); 1 [rows, 3 chunks] a row every other
 * tick, two ticks per row, some columns; 2 [rows] every third tick, rows
 * skipped and filled in later (out of order: hashed); 3 a scalar. The model
 * keeps, per chunk, the set of ticks; after every segment added (and some
 * trims), each chunk's ticks <= T, the chunks with a tick <= T and the
 * newest birth <= T are checked at ticks T in and before the segment. */
#define CM_ROWS 260
#define CM_COLS 3
#define CM_TICKS 620
static uint8_t cm_model[4][CM_ROWS][CM_COLS][CM_TICKS + 1];

typedef struct {
    int n;
    uint8_t seen[CM_ROWS][CM_COLS];
    uint32_t nd;
    int dup;
} cmseen_t;

/* h5l_ckmap_chunk_runs callback: each chunk of the run seen once */
static int cm_seen_fn(void *ctx, const uint64_t *coord, uint64_t n)
{
    cmseen_t *s = ctx;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = s->nd ? coord[0] + i : 0, c = s->nd > 1 ? coord[1] : 0;
        if (r >= CM_ROWS || c >= CM_COLS || (!s->nd && n != 1)) {
            s->dup++;
            continue;
        }
        s->dup += s->seen[r][c];
        s->seen[r][c] = 1;
        s->n++;
    }
    return 0;
}

static void test_chunk_map_model(void)
{
    static const uint32_t nds[4] = {2, 2, 1, 0};
    for (int round = 0; round < 6; round++) {
        memset(cm_model, 0, sizeof cm_model);
        srand(1000 + round);
        h5l_ckmap_t *m = h5l_ckmap_new(), *m2 = h5l_ckmap_new();
        uint64_t next0 = 0, next1 = 0, next2 = 0, tick = 0;
        int nsimple = 0;
        int ok = 1;
        while (tick < CM_TICKS - 30 && ok) {
            uint64_t F = tick + 1, L = 1 + (uint64_t)(rand() % 25);
            /* (var, row, col, tick) touches of this segment */
            static uint64_t tv[4000][4];
            size_t nt = 0;
            for (uint64_t t = F; t < F + L; t++) {
                if (round % 2 == 0 || rand() % 10) { tv[nt][0] = 0, tv[nt][1] = next0++, tv[nt][2] = 0, tv[nt][3] = t, nt++; }
                if (round > 0 && rand() % 20 == 0 && next0 > 1) { /* an old row again */
                    tv[nt][0] = 0, tv[nt][1] = (uint64_t)rand() % next0, tv[nt][2] = 0, tv[nt][3] = t, nt++;
                }
                if (t % 2 == 0) {
                    for (uint64_t c = 0; c < CM_COLS; c++)
                        if (round < 3 || rand() % 3) tv[nt][0] = 1, tv[nt][1] = next1 / 2, tv[nt][2] = c, tv[nt][3] = t, nt++;
                    next1++;
                }
                if (t % 3 == 0) {
                    uint64_t r = next2++;
                    if (round >= 2 && rand() % 8 == 0) r = next2++, next2++; /* one skipped, filled below */
                    tv[nt][0] = 2, tv[nt][1] = r, tv[nt][2] = 0, tv[nt][3] = t, nt++;
                    if (round >= 2 && r >= 2 && rand() % 8 == 0 && !cm_model[2][r - 1][0][0]) {
                        tv[nt][0] = 2, tv[nt][1] = r - 1, tv[nt][2] = 0, tv[nt][3] = t, nt++;
                    }
                }
                if (rand() % 3 == 0) tv[nt][0] = 3, tv[nt][1] = 0, tv[nt][2] = 0, tv[nt][3] = t, nt++;
            }
            tick = F + L - 1;
            if (next0 >= CM_ROWS || next1 / 2 >= CM_ROWS || next2 + 2 >= CM_ROWS) break;
            /* the segment's chunk entries: sorted (var, row, col), ticks increasing, each once */
            static uint64_t coords[4000][2], ticks[4000];
            static h5l_ckpt_chunk_t ents[4000];
            size_t ne = 0, ntk = 0;
            for (uint32_t v = 0; v < 4; v++)
                for (uint64_t r = 0; r < CM_ROWS; r++)
                    for (uint64_t c = 0; c < CM_COLS; c++) {
                        size_t t0 = ntk;
                        for (uint64_t t = F; t <= tick; t++) {
                            int hit = 0;
                            for (size_t i = 0; i < nt && !hit; i++)
                                hit = tv[i][0] == v && tv[i][1] == r && tv[i][2] == c && tv[i][3] == t;
                            if (hit) ticks[ntk++] = t;
                        }
                        if (ntk == t0) continue;
                        coords[ne][0] = nds[v] ? r : 0;
                        coords[ne][1] = c;
                        ents[ne] = (h5l_ckpt_chunk_t){v, nds[v], nds[v] == 1 ? &coords[ne][0] : coords[ne], ntk - t0,
                                                      ticks + t0};
                        if (nds[v] == 1) coords[ne][0] = r;
                        ne++;
                        for (size_t i = t0; i < ntk; i++) cm_model[v][r][c][ticks[i]] = 1;
                        cm_model[v][r][c][0] = 1; /* listed */
                    }
            static h5l_ckpt_tick_t cts[64];
            memset(cts, 0, sizeof cts);
            for (uint64_t t = F; t <= tick; t++) cts[t - F].info.tick = t;
            h5l_ckpt_t ck = {.first = F, .last = tick, .ticks = cts, .chunks = ents, .nchunks = ne};
            /* the second map from the segment's summary when it is simple
             * (its chunk runs), else from its entries as the first */
            h5l_cksum_t sm;
            CHECK_EQ(sum_of(&ck, &sm), H5L_OK);
            nsimple += sm.simple;
            CHECK_EQ(h5l_ckmap_add(m, &ck), H5L_OK);
            CHECK_EQ(sm.simple ? h5l_ckmap_add_runs(m2, &sm) : h5l_ckmap_add(m2, &ck), H5L_OK);
            h5l_cksum_free(&sm);
            if (rand() % 4 == 0) h5l_ckmap_trim(m); /* trimmed, then added to again */
            if (rand() % 4 == 0) h5l_ckmap_trim(m2);
            /* check every chunk at ticks around this segment and earlier ones */
            uint64_t Ts[9] = {0, 1, F - 1, F, (F + tick) / 2, tick, tick + 1, (uint64_t)rand() % (tick + 1),
                              (uint64_t)rand() % (tick + 1)};
            for (int ti = 0; ti < 18 && ok; ti++) {
                uint64_t T = Ts[ti % 9];
                h5l_ckmap_t *mm = ti < 9 ? m : m2;
                uint64_t want_version = 0;
                for (uint32_t v = 0; v < 4 && ok; v++) {
                    cmseen_t sn;
                    memset(&sn, 0, sizeof sn);
                    sn.nd = nds[v];
                    CHECK_EQ(h5l_ckmap_chunk_runs(mm, v, T, cm_seen_fn, &sn), 0);
                    int want_n = 0;
                    for (uint64_t r = 0; r < CM_ROWS && ok; r++)
                        for (uint64_t c = 0; c < CM_COLS && ok; c++) {
                            uint64_t first = 0, got[CM_TICKS + 1], nw = 0;
                            for (uint64_t t = 1; t <= T && t <= tick; t++)
                                if (cm_model[v][r][c][t]) {
                                    if (!first) first = t;
                                    got[nw++] = t;
                                }
                            if (first) {
                                want_n++;
                                if (!sn.seen[r][c]) ok = 0;
                            }
                            for (uint64_t t = 1; t <= tick; t++) /* its birth: its first tick */
                                if (cm_model[v][r][c][t]) {
                                    if (t <= T && t > want_version) want_version = t;
                                    break;
                                }
                            if ((nds[v] < 2 && c) || (!nds[v] && r)) continue; /* not a chunk of v */
                            uint64_t co[2] = {r, c}, *buf = NULL;
                            size_t cap = 0, n = 0;
                            CHECK_EQ(h5l_ckmap_ticks(mm, v, co, T, &buf, &cap, &n), 0);
                            if (n != nw || (n && memcmp(buf, got, n * sizeof *buf))) ok = 0;
                            if (!ok)
                                fprintf(stderr, "  round %d, map %d: var %u chunk (%llu, %llu) at tick %llu: %zu ticks, want %llu\n",
                                        round, ti / 9, v, (unsigned long long)r, (unsigned long long)c,
                                        (unsigned long long)T, n, (unsigned long long)nw);
                            free(buf);
                        }
                    if (sn.n != want_n || sn.dup) {
                        fprintf(stderr, "  round %d, map %d: var %u at tick %llu: %d chunks (%d twice), want %d\n", round, ti / 9, v,
                                (unsigned long long)T, sn.n, sn.dup, want_n);
                        ok = 0;
                    }
                }
                if (h5l_ckmap_version(mm, T) != want_version) {
                    fprintf(stderr, "  round %d, map %d: version at %llu: %llu, want %llu\n", round, ti / 9,
                            (unsigned long long)T, (unsigned long long)h5l_ckmap_version(mm, T),
                            (unsigned long long)want_version);
                    ok = 0;
                }
            }
        }
        CHECK(ok);
        if (round % 2 == 0) CHECK(nsimple > 0); /* (the rounds without rewrites have simple segments) */
        h5l_ckmap_free(m);
        h5l_ckmap_free(m2);
    }
    /* a row a tick for 10^5 ticks in segments of 1000, then rewritten rows:
     * one record, then a record a chunk */
    h5l_ckmap_t *m = h5l_ckmap_new();
    static uint64_t co[1000], tk[1000];
    static h5l_ckpt_chunk_t en[1000];
    for (uint64_t F = 1; F < 100000; F += 1000) {
        for (uint64_t i = 0; i < 1000; i++) {
            co[i] = F - 1 + i;
            tk[i] = F + i;
            en[i] = (h5l_ckpt_chunk_t){0, 1, &co[i], 1, &tk[i]};
        }
        h5l_ckpt_t ck = {.first = F, .last = F + 999, .chunks = en, .nchunks = 1000};
        CHECK_EQ(h5l_ckmap_add(m, &ck), H5L_OK);
    }
    h5l_ckmap_trim(m);
    CHECK(h5l_ckmap_memory(m) < 2048); /* its fixed parts: a record a chunk would be 2.4 MB */
    CHECK_EQ(h5l_ckmap_version(m, 54321), 54321);
    uint64_t c0 = 54320, *buf = NULL;
    size_t cap = 0, n = 0;
    CHECK_EQ(h5l_ckmap_ticks(m, 0, &c0, 100000, &buf, &cap, &n), 0);
    CHECK(n == 1 && buf[0] == 54321);
    co[0] = 7; /* row 7 again at tick 100001: every chunk its record */
    tk[0] = 100001;
    en[0] = (h5l_ckpt_chunk_t){0, 1, &co[0], 1, &tk[0]};
    h5l_ckpt_t ck = {.first = 100001, .last = 100001, .chunks = en, .nchunks = 1};
    CHECK_EQ(h5l_ckmap_add(m, &ck), H5L_OK);
    CHECK(h5l_ckmap_memory(m) >= 100000 * 24);
    c0 = 7;
    CHECK_EQ(h5l_ckmap_ticks(m, 0, &c0, 200000, &buf, &cap, &n), 0);
    CHECK(n == 2 && buf[0] == 8 && buf[1] == 100001);
    c0 = 54320;
    CHECK_EQ(h5l_ckmap_ticks(m, 0, &c0, 200000, &buf, &cap, &n), 0);
    CHECK(n == 1 && buf[0] == 54321);
    free(buf);
    h5l_ckmap_free(m);
}

/* Out of memory while a summary is made or checked is that, never damage:
 * the n-th allocation of encode or decode fails, for every n they make.
 * An encoder short of memory must say so (a frame without the summary
 * would pass for a segment that cannot have one); a decoder must say
 * ENOMEM (ECORRUPT would make a reader give up the file's checkpoints). */
static void test_summary_oom(void)
{
    ssample_t s;
    ssample(&s);
    uint64_t seed = h5l_seed(ID), pos = s.c.selfpos;
    h5l_buf_t want = {0};
    h5l_ckpt_encode(&want, &s.c, seed);
    CHECK(!want.oom && want.len > 0);
    int enc_failures = 0, dec_failures = 0, enc_done = 0, dec_done = 0;
    for (long n = 1; n < 1000; n++) {
        h5l_buf_t b = {0};
        oom_arm(n);
        h5l_ckpt_encode(&b, &s.c, seed);
        int fired = oom_off();
        if (!fired) {
            CHECK(!b.oom && b.len == want.len && !memcmp(b.p, want.p, want.len));
            h5l_buf_free(&b);
            enc_done = 1;
            break;
        }
        enc_failures++;
        CHECK(b.oom);
        h5l_buf_free(&b);
    }
    for (long n = 1; n < 1000; n++) {
        h5l_ckpt_t d;
        h5l_err_t e = {0};
        oom_arm(n);
        int rc = h5l_ckpt_decode(want.p, want.len, seed, pos, &d, "t.h5", &e);
        int fired = oom_off();
        if (!fired) {
            CHECK_EQ(rc, H5L_OK);
            h5l_ckpt_clear(&d);
            dec_done = 1;
            break;
        }
        dec_failures++;
        CHECK_EQ(rc, H5L_ENOMEM);
        if (rc == H5L_OK) h5l_ckpt_clear(&d);
        if (rc != H5L_ENOMEM) fprintf(stderr, "  allocation %ld failed: decode said %d (%s)\n", n, rc, e.msg);
    }
    CHECK(enc_done && dec_done); /* every allocation was failed once */
    CHECK(enc_failures >= 2 && dec_failures >= 2); /* the summary's own allocations among them */
    h5l_buf_free(&want);
    ssample_free(&s);
}

int main(void)
{
    const th_test_t tests[] = {
        {"roundtrip", test_roundtrip},
        {"rules", test_rules},
        {"table_chunks", test_table_chunks},
        {"builder", test_builder},
        {"builder_large_ops", test_builder_large_ops},
        {"chunk_map_model", test_chunk_map_model},
        {"summary", test_summary},
        {"summary_out_of_memory", test_summary_oom},
    };
    return th_run(tests, (int)(sizeof tests / sizeof tests[0]));
}
