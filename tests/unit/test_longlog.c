/* test_longlog.c — a reader opened on a long log (tens of thousands of
 * small ticks, the shape that made opening slow) answers every tick right,
 * and damage in the middle of it is still found and reported as
 * docs/operations.md says: the ticks before it are served, the damaged tick
 * is named.
 *
 * The files are crafted here byte by byte (docs/format.md), one tick per
 * row of a [t, 4] int32 variable: tick k writes row k-1 with k*10 + column,
 * and every 100th tick also rewrites row 0 with its own values. The model
 * is that rule, not the reader: row 0 as of tick T holds the values of the
 * newest tick <= T among 1 and the multiples of 100. Small ticks lie a few
 * hundred bytes apart, so one window of the file holds the record tables of
 * hundreds of ticks (reader.c reads them that way): a live file that grows
 * inside an extent allocated ahead (zeros at first, as the writer's extents
 * are) must still read each new table as written, not as the zeros a window
 * read earlier saw. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "h5log/codec.h"
#include "h5log/format.h"
#include "h5log_reader.h"
#include "tharness.h"

#define SEGLOG 12
#define COLS 4

typedef struct {
    char dir[64], path[128], jpath[160];
    uint8_t id[16];
    uint64_t seed;
    h5l_buf_t file, jr;
    uint64_t ntick;
    size_t *frame_at;   /* journal offset of tick k's frame: frame_at[k] */
    uint64_t *table_at; /* file offset of tick k's record table */
    size_t cap;
} ll_t;

static uint64_t xseed(const ll_t *l, uint64_t tick, uint32_t rank)
{
    return l->seed ^ (tick * 0x9E3779B97F4A7C15ull) ^ (((uint64_t)rank + 1) * 0xC2B2AE3D27D4EB4Full);
}

static void ll_init(ll_t *l)
{
    memset(l, 0, sizeof *l);
    strcpy(l->dir, "/tmp/h5llgXXXXXX");
    CHECK(mkdtemp(l->dir) != NULL);
    snprintf(l->path, sizeof l->path, "%s/run.h5", l->dir);
    snprintf(l->jpath, sizeof l->jpath, "%s/run.h5.h5lj", l->dir);
    for (int i = 0; i < 16; i++) l->id[i] = (uint8_t)(i * 29 + 7);
    l->seed = h5l_seed(l->id);
    uint8_t zero[H5L_USERBLOCK_SIZE] = {0};
    h5l_buf_put(&l->file, zero, sizeof zero);
    h5l_jhdr_t h = {.version = 2, .ctime_ns = 1, .seglog = SEGLOG};
    memcpy(h.id, l->id, 16);
    uint8_t hdr[H5L_JHDR_LEN];
    h5l_jhdr_encode(&h, hdr);
    h5l_buf_put(&l->jr, hdr, sizeof hdr);
}

static void ll_free(ll_t *l)
{
    h5l_buf_free(&l->file);
    h5l_buf_free(&l->jr);
    free(l->frame_at);
    free(l->table_at);
    unlink(l->path);
    unlink(l->jpath);
    rmdir(l->dir);
}

static int32_t val(uint64_t tick, int c) { return (int32_t)(tick * 10 + (uint64_t)c); }

/* The model: row i as of tick T (i < T). */
static int32_t model(uint64_t T, uint64_t i, int c)
{
    if (i > 0) return val(i + 1, c);
    uint64_t k = T / 100 * 100;
    return val(k ? k : 1, c);
}

/* Commit the next tick: its ops, its data (row k-1, and row 0 again every
 * 100th tick), its record table, its frame. */
static void ll_tick(ll_t *l)
{
    uint64_t k = l->ntick + 1;
    if (k >= l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->frame_at = realloc(l->frame_at, l->cap * sizeof *l->frame_at);
        l->table_at = realloc(l->table_at, l->cap * sizeof *l->table_at);
    }
    h5l_buf_t ops = {0};
    uint32_t nops = 0;
    if (k == 1) {
        h5l_op_t t = {.kind = H5L_OP_DIM, .id = 0, .name = "t", .len = 1, .flags = 1};
        h5l_op_t x = {.kind = H5L_OP_DIM, .id = 1, .name = "x", .len = COLS};
        int32_t fill = -1;
        uint32_t di[2] = {0, 1};
        uint64_t ch[2] = {1, COLS};
        h5l_op_t v = {.kind = H5L_OP_VAR,
                      .id = 1,
                      .name = "/v",
                      .type = {H5L_CLASS_INT, 4, 1, 0},
                      .flags = 1,
                      .ndims = 2,
                      .dimids = di,
                      .chunk = ch,
                      .data = &fill,
                      .data_len = 4};
        h5l_op_encode(&ops, &t);
        h5l_op_encode(&ops, &x);
        h5l_op_encode(&ops, &v);
        nops = 3;
    } else {
        h5l_op_t d = {.kind = H5L_OP_DIMLEN, .id = 0, .len = k};
        h5l_op_encode(&ops, &d);
        nops = 1;
    }
    int again = k % 100 == 0;
    h5l_tick_info_t ti = {.tick = k, .time_ns = k, .nranks = 1, .nrecords = again ? 2 : 1};
    h5l_buf_pad8(&l->file);
    ti.data_off = l->file.len;
    uint8_t row[COLS * 4];
    for (int c = 0; c < COLS; c++) h5l_put_le32(row + 4 * c, (uint32_t)val(k, c));
    h5l_buf_put(&l->file, row, sizeof row);
    if (again) h5l_buf_put(&l->file, row, sizeof row);
    ti.data_size = l->file.len - ti.data_off;
    h5l_buf_pad8(&l->file);
    ti.table_off = l->file.len;
    h5l_buf_t pl = {0};
    uint64_t s1[2] = {k - 1, 0}, s0[2] = {0, 0}, cnt[2] = {1, COLS};
    h5l_rec_encode(&pl, 1, 1, 2, s1, cnt);
    if (again) h5l_rec_encode(&pl, 1, 1, 2, s0, cnt);
    h5l_buf_u64(&pl,
                XXH3_64bits_withSeed(l->file.p + ti.data_off, ti.data_size, xseed(l, k, 0) ^ 0xD6E8FEB86659FD93ull));
    uint8_t hdr[H5L_BLOCK_LEN];
    h5l_put_le32(hdr + 8, (uint32_t)pl.len);
    h5l_put_le32(hdr + 12, (uint32_t)ti.nrecords);
    h5l_put_le64(hdr + 16, ti.data_size);
    h5l_buf_t blk = {0};
    h5l_buf_put(&blk, hdr, sizeof hdr);
    h5l_buf_put(&blk, pl.p, pl.len);
    h5l_put_le64(blk.p, XXH3_64bits_withSeed(blk.p + 8, 16 + pl.len, xseed(l, k, 0)));
    h5l_buf_put(&l->file, blk.p, blk.len);
    h5l_buf_pad8(&l->file);
    ti.table_size = l->file.len - ti.table_off;
    h5l_buf_t pay = {0};
    h5l_tick_encode(&pay, &ti, nops);
    h5l_buf_put(&pay, ops.p, ops.len);
    l->frame_at[k] = l->jr.len;
    l->table_at[k] = ti.table_off;
    h5l_frame_encode(&l->jr, H5L_REC_TICK, pay.p, (uint32_t)pay.len, l->seed);
    h5l_buf_free(&pay);
    h5l_buf_free(&blk);
    h5l_buf_free(&pl);
    h5l_buf_free(&ops);
    l->ntick = k;
    CHECK(!l->file.oom && !l->jr.oom);
}

static void put_file(const char *path, const void *p, size_t n, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, (const uint8_t *)p + done, n - done, (off_t)done);
        if (w <= 0) break;
        done += (size_t)w;
    }
    CHECK_EQ(done, n);
    CHECK(ftruncate(fd, (off_t)(size > n ? size : n)) == 0);
    close(fd);
}

static void set_ub(ll_t *l, h5l_buf_t *f, uint64_t flags, uint64_t off, uint64_t len)
{
    h5l_ub_t ub = {.version = 2, .jr_off = off, .jr_len = len, .flags = flags};
    memcpy(ub.id, l->id, 16);
    h5l_ub_encode(&ub, f->p);
}

/* Live: the HDF5 file (zeros after it up to `size`: an extent allocated
 * ahead) and the sidecar. */
static void ll_save_live(ll_t *l, uint64_t size)
{
    set_ub(l, &l->file, 0, 0, 0);
    put_file(l->path, l->file.p, l->file.len, size);
    put_file(l->jpath, l->jr.p, l->jr.len, 0);
}

/* Closed: CLOSE frame, journal embedded, no sidecar. */
static void ll_save_closed(ll_t *l)
{
    h5l_buf_t jr = {0}, f = {0};
    h5l_buf_put(&jr, l->jr.p, l->jr.len);
    uint8_t pl[16];
    h5l_put_le64(pl, l->ntick);
    h5l_put_le64(pl + 8, 7);
    h5l_frame_encode(&jr, H5L_REC_CLOSE, pl, sizeof pl, l->seed);
    h5l_buf_put(&f, l->file.p, l->file.len);
    h5l_buf_pad8(&f);
    uint64_t off = f.len;
    h5l_buf_put(&f, jr.p, jr.len);
    set_ub(l, &f, H5L_UB_CLOSED, off, jr.len);
    unlink(l->path);
    put_file(l->path, f.p, f.len, 0);
    unlink(l->jpath);
    h5l_buf_free(&jr);
    h5l_buf_free(&f);
}

/* Rows `i` of tick T read as the model says? Counts mismatches. */
static int check_row(h5l_reader_t *r, uint64_t T, uint64_t i)
{
    int32_t got[COLS];
    uint64_t st[2] = {i, 0}, ct[2] = {1, COLS};
    h5l_err_t e = {0};
    if (h5l_reader_read(r, T, 1, st, ct, got, &e) != H5L_OK) {
        fprintf(stderr, "  tick %llu row %llu: %s\n", (unsigned long long)T, (unsigned long long)i, e.msg);
        return 1;
    }
    int bad = 0;
    for (int c = 0; c < COLS; c++) bad += got[c] != model(T, i, c);
    if (bad)
        fprintf(stderr, "  tick %llu row %llu: %d, expected %d\n", (unsigned long long)T, (unsigned long long)i, got[0],
                model(T, i, 0));
    return bad != 0;
}

/* Sampled ticks (the first few, both sides of every rewrite of row 0 in a
 * stride, the last), each at its newest row, row 0 and a middle row; then
 * the whole variable as of `upto`. */
static void check_ticks(h5l_reader_t *r, uint64_t upto)
{
    int bad = 0;
    for (uint64_t T = 1; T <= upto; T += T < 8 ? 1 : 97) {
        bad += check_row(r, T, T - 1) + check_row(r, T, 0) + check_row(r, T, T / 2);
        if (T >= 100) bad += check_row(r, T / 100 * 100, 0) + check_row(r, T / 100 * 100 - 1, 0);
    }
    bad += check_row(r, upto, upto - 1) + check_row(r, upto, 0);
    CHECK_EQ(bad, 0);
    int32_t *all = malloc(upto * COLS * sizeof *all);
    uint64_t st[2] = {0, 0}, ct[2] = {upto, COLS};
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_read(r, upto, 1, st, ct, all, &e), H5L_OK);
    bad = 0;
    for (uint64_t i = 0; i < upto; i++)
        for (int c = 0; c < COLS; c++) bad += all[i * COLS + c] != model(upto, i, c);
    CHECK_EQ(bad, 0);
    free(all);
}

#define NLONG 30000

static void build(ll_t *l, uint64_t n)
{
    ll_init(l);
    while (l->ntick < n) ll_tick(l);
}

static h5l_reader_t *open_ok(const char *path)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    int rc = h5l_reader_open(path, &r, &e);
    if (rc) fprintf(stderr, "  open: %s\n", e.msg);
    CHECK_EQ(rc, H5L_OK);
    return r;
}

static void test_long_closed_every_tick(void)
{
    ll_t l;
    build(&l, NLONG);
    ll_save_closed(&l);
    h5l_reader_t *r = open_ok(l.path);
    if (r) {
        CHECK_EQ(h5l_reader_ntick(r), NLONG);
        CHECK_EQ(h5l_reader_damage(r, NULL, NULL), H5L_OK);
        CHECK_EQ(h5l_reader_closed(r), 1);
        CHECK_EQ(h5l_reader_nrecords(r), NLONG + NLONG / 100);
        check_ticks(r, NLONG);
        h5l_reader_close(r);
    }
    ll_free(&l);
}

/* Opening serves the ticks before `dtick`, names it, says `part`. */
static void expect_damaged(const char *path, uint64_t dtick, const char *part)
{
    h5l_reader_t *r = open_ok(path);
    if (!r) return;
    uint64_t t = 0;
    h5l_err_t d = {0};
    CHECK_EQ(h5l_reader_damage(r, &t, &d), H5L_ECORRUPT);
    CHECK_EQ(t, dtick);
    CHECK_EQ(h5l_reader_ntick(r), dtick - 1);
    if (!strstr(d.msg, part) || !strstr(d.msg, path)) {
        fprintf(stderr, "  damage message '%s' lacks '%s' or the path\n", d.msg, part);
        CHECK(0);
    }
    if (h5l_reader_ntick(r) == dtick - 1) check_ticks(r, dtick - 1);
    h5l_reader_close(r);
}

/* A flipped byte in a TICK frame in the middle (live and closed), and in
 * a record table in the middle: found on open, the ticks before served. */
static void test_long_damage_in_the_middle(void)
{
    ll_t l;
    build(&l, NLONG);
    uint64_t dt = NLONG / 2 + 3;
    size_t at = l.frame_at[dt] + H5L_FRAME_LEN + 20; /* inside the payload */
    l.jr.p[at] ^= 0x04;
    ll_save_live(&l, 0);
    expect_damaged(l.path, dt, "fails its checksum");
    ll_save_closed(&l);
    expect_damaged(l.path, dt, "fails its checksum");
    l.jr.p[at] ^= 0x04;
    /* a record table: its block checksum */
    uint64_t tt = NLONG / 3 + 1;
    l.file.p[l.table_at[tt] + H5L_BLOCK_LEN + 1] ^= 0x20;
    ll_save_closed(&l);
    expect_damaged(l.path, tt, "record block of rank 0 fails its checksum");
    ll_free(&l);
}

/* A live long log read while it grows: first inside an extent allocated
 * ahead (the window of record tables read at open saw zeros where the new
 * tables now are), then past the end of the file as it was. */
static void test_long_live_growth(void)
{
    ll_t l;
    build(&l, 5000);
    uint64_t ahead = l.file.len + (1u << 20);
    ll_save_live(&l, ahead);
    h5l_reader_t *r = open_ok(l.path);
    if (!r) {
        ll_free(&l);
        return;
    }
    CHECK_EQ(h5l_reader_ntick(r), 5000);
    while (l.ntick < 8000) ll_tick(&l);
    CHECK(l.file.len < ahead);
    ll_save_live(&l, ahead);
    int nnew = 0;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_refresh(r, &nnew, &e), H5L_OK);
    CHECK_EQ(nnew, 3000);
    CHECK_EQ(h5l_reader_damage(r, NULL, NULL), H5L_OK);
    /* and one tick at a time, each table right after the last one */
    int bad = 0;
    for (int i = 0; i < 50; i++) {
        ll_tick(&l);
        ll_save_live(&l, ahead);
        bad += h5l_reader_refresh(r, &nnew, &e) != H5L_OK || nnew != 1;
    }
    CHECK_EQ(bad, 0);
    while (l.file.len < ahead + 4096) ll_tick(&l); /* past the extent */
    ll_save_live(&l, 0);
    CHECK_EQ(h5l_reader_refresh(r, &nnew, &e), H5L_OK);
    CHECK_EQ(h5l_reader_ntick(r), l.ntick);
    CHECK_EQ(h5l_reader_damage(r, NULL, NULL), H5L_OK);
    check_ticks(r, l.ntick);
    h5l_reader_close(r);
    ll_free(&l);
}

TEST_MAIN(T(test_long_closed_every_tick), T(test_long_damage_in_the_middle), T(test_long_live_growth))
