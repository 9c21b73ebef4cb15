/* test_xfer.c — the transposition engine (xfer.h) against a brute-force
 * model.
 *
 * Why: every byte a reader, the finalizer or the daemon returns is placed
 * by h5l_xfer_read. The model here shares nothing with it: it applies
 * every record box element by element, in sequence order, over the fill
 * value. Random variables of 0..4 dimensions and elements of 1, 2, 4 or 8
 * bytes; records of several ticks and ranks with 1..3 boxes that overlap
 * each other and the read box anywhere; other bytes between records, so
 * elements straddle segment and window boundaries; segments of 16..256
 * bytes and windows of one to a few segments, so every boundary case comes
 * up often. Also checked: no log byte is read twice by one call (the cost
 * is linear in the bytes), reads stay inside their (tick, rank)'s data,
 * the plan's cost equals what a read reads at most, and a failing read
 * callback fails the call. Fixed seeds: a failure reproduces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5log/box.h"
#include "xfer.h"
#include "tharness.h"

#define MAXD 4
#define MAXREC 24
#define LOGMAX (1 << 22)

static uint64_t rnd(uint64_t n) { return n ? (uint64_t)rand() % n : 0; }

typedef struct fake {
    uint8_t log[LOGMAX];
    uint8_t reads[LOGMAX]; /* how often each byte was read by the call */
    struct {
        uint64_t tick, s, e;
        uint32_t rank;
    } grp[MAXREC];
    int ngrp;
    int fail_after; /* fail the read callback after this many calls (-1: never) */
    int calls;
    int bad; /* a read outside its group's data */
    uint64_t used; /* log bytes the script laid out */
} fake_t;

static int fk_range(void *ctx, uint64_t tick, uint32_t rank, uint64_t *s, uint64_t *e, h5l_err_t *err)
{
    fake_t *f = ctx;
    for (int i = 0; i < f->ngrp; i++)
        if (f->grp[i].tick == tick && f->grp[i].rank == rank) {
            *s = f->grp[i].s;
            *e = f->grp[i].e;
            return H5L_OK;
        }
    return h5l_err_set(err, H5L_EBADID, "no group %llu/%u", (unsigned long long)tick, rank);
}

static int fk_read(void *ctx, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err)
{
    fake_t *f = ctx;
    if (f->fail_after >= 0 && f->calls++ >= f->fail_after) return h5l_err_set(err, H5L_EIO, "injected");
    uint64_t s = 0, e = 0;
    if (fk_range(ctx, tick, rank, &s, &e, err) || off < s || off + n > e) {
        f->bad++;
        return h5l_err_set(err, H5L_EINVAL, "read outside the data");
    }
    memcpy(dst, f->log + off, n);
    for (size_t i = 0; i < n; i++) f->reads[off + i]++;
    return H5L_OK;
}

typedef struct script {
    uint32_t nd;
    size_t es;
    uint64_t shape[MAXD];
    h5l_rec_t rec[MAXREC];
    uint64_t boxes[MAXREC][3 * 2 * MAXD];
    h5l_rec_t *recp[MAXREC];
    int nrec;
    uint8_t fill[8];
} script_t;

/* A random box inside shape; sometimes the whole shape, sometimes one element. */
static void rand_box(uint32_t nd, const uint64_t *shape, uint64_t *s, uint64_t *c)
{
    int kind = (int)rnd(6);
    for (uint32_t d = 0; d < nd; d++) {
        if (kind == 0) {
            s[d] = 0;
            c[d] = shape[d];
        } else if (kind == 1) {
            s[d] = rnd(shape[d]);
            c[d] = 1;
        } else {
            s[d] = rnd(shape[d]);
            c[d] = 1 + rnd(shape[d] - s[d]);
        }
    }
}

/* Lay out a random script in f's log: groups (tick, rank) in sequence
 * order, records of each group back to back after a random gap (other
 * variables' bytes), boxes of a record back to back. */
static void make_script(script_t *sc, fake_t *f)
{
    memset(f->reads, 0, f->used);
    memset(f->grp, 0, sizeof f->grp);
    f->ngrp = f->calls = f->bad = 0;
    f->fail_after = -1;
    static const size_t sizes[] = {1, 2, 4, 8};
    sc->nd = (uint32_t)rnd(MAXD + 1);
    sc->es = sizes[rnd(4)];
    for (uint32_t d = 0; d < sc->nd; d++) sc->shape[d] = 1 + rnd(d == 0 ? 9 : 7);
    for (size_t i = 0; i < sc->es; i++) sc->fill[i] = (uint8_t)(0xA0 + i);
    uint64_t at = rnd(50);
    sc->nrec = 1 + (int)rnd(MAXREC - 1);
    uint64_t tick = 1;
    uint32_t rank = 0;
    int g = -1;
    for (int i = 0; i < sc->nrec; i++) {
        if (g < 0 || rnd(3) == 0) { /* a new group: next rank, or next tick */
            if (g >= 0) {
                f->grp[g].e = at + rnd(40);
                at = f->grp[g].e + rnd(30);
                if (rnd(2)) {
                    tick++;
                    rank = (uint32_t)rnd(3);
                } else {
                    rank++;
                }
            }
            g = f->ngrp++;
            f->grp[g].tick = tick;
            f->grp[g].rank = rank;
            f->grp[g].s = at;
            at += rnd(20);
        }
        h5l_rec_t *r = &sc->rec[i];
        memset(r, 0, sizeof *r);
        r->tick = tick;
        r->rank = rank;
        r->order = (uint64_t)i;
        r->ndims = sc->nd;
        r->nboxes = sc->nd ? 1 + (uint32_t)rnd(3) : 1;
        r->boxes = sc->boxes[i];
        at += rnd(sc->es == 1 ? 5 : 3 * sc->es + 1); /* other variables' bytes: misalign */
        r->offset = at;
        for (uint32_t k = 0; k < r->nboxes; k++) {
            uint64_t *s = r->boxes + (size_t)k * 2 * sc->nd;
            rand_box(sc->nd, sc->shape, s, s + sc->nd);
            at += (sc->nd ? h5l_box_nelem(sc->nd, s + sc->nd) : 1) * sc->es;
        }
        r->size = at - r->offset;
        sc->recp[i] = r;
    }
    f->grp[g].e = at + rnd(40);
    f->used = f->grp[g].e + 1;
    uint64_t x = (uint64_t)rand() * 2654435761u + 1; /* the log's bytes: xorshift, fast */
    for (uint64_t i = 0; i < f->used; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f->log[i] = (uint8_t)x;
    }
}

/* The model: fill, then every record's boxes element by element, in order. */
static void model(const script_t *sc, const fake_t *f, const uint64_t *rs, const uint64_t *rc, uint8_t *out)
{
    uint32_t nd = sc->nd;
    uint64_t n = nd ? h5l_box_nelem(nd, rc) : 1;
    for (uint64_t i = 0; i < n; i++) memcpy(out + i * sc->es, sc->fill, sc->es);
    for (int i = 0; i < sc->nrec; i++) {
        const h5l_rec_t *r = &sc->rec[i];
        uint64_t off = r->offset;
        for (uint32_t k = 0; k < r->nboxes; k++) {
            const uint64_t *bs = r->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint64_t m = nd ? h5l_box_nelem(nd, bc) : 1;
            for (uint64_t e = 0; e < m; e++) {
                uint64_t p[MAXD], rem = e, in = 1;
                for (int d = (int)nd - 1; d >= 0; d--) {
                    p[d] = bs[d] + rem % bc[d];
                    rem /= bc[d];
                    in &= p[d] >= rs[d] && p[d] < rs[d] + rc[d];
                }
                if (!in) continue;
                uint64_t o = nd ? h5l_box_offset(nd, rs, rc, p) : 0;
                memcpy(out + o * sc->es, f->log + off + e * sc->es, sc->es);
            }
            off += m * sc->es;
        }
    }
}

/* A random script and a random read box of it: the box's elements. */
static uint64_t random_case(script_t *sc, fake_t *f, uint64_t *rs, uint64_t *rc)
{
    make_script(sc, f);
    rand_box(sc->nd, sc->shape, rs, rc);
    return sc->nd ? h5l_box_nelem(sc->nd, rc) : 1;
}

static void one_case(int it, int *checked)
{
    static script_t sc;
    static fake_t f;
    uint64_t rs[MAXD], rc[MAXD];
    uint64_t n = random_case(&sc, &f, rs, rc);
    uint8_t *want = malloc(n * sc.es), *got = malloc(n * sc.es);
    model(&sc, &f, rs, rc, want);
    memset(got, 0x5A, n * sc.es);
    h5l_xsrc_t src = {fk_read, fk_range, &f, (uint32_t)(4 + rnd(5)), 0};
    src.window = ((size_t)1 << src.seglog) * (1 + rnd(4));
    h5l_xstats_t st = {0};
    h5l_err_t err = {0};
    int rc0 = h5l_xfer_read(&src, sc.nd, sc.es, sc.fill, sc.recp, (size_t)sc.nrec, rs, rc, got, &st, &err);
    CHECK_EQ(rc0, H5L_OK);
    if (rc0) fprintf(stderr, "  case %d: %s\n", it, err.msg);
    if (memcmp(got, want, n * sc.es) != 0) {
        fprintf(stderr, "  case %d: nd %u es %zu nrec %d seglog %u window %zu: data differs\n", it, sc.nd, sc.es,
                sc.nrec, src.seglog, src.window);
        CHECK(0);
    }
    int twice = 0;
    for (uint64_t i = 0; i < f.used; i++) twice += f.reads[i] > 1;
    CHECK_EQ(twice, 0);
    CHECK_EQ(f.bad, 0);
    uint64_t cost = 0;
    CHECK_EQ(h5l_xfer_cost(&src, sc.nd, sc.es, sc.recp, (size_t)sc.nrec, rs, rc, &cost, &err), H5L_OK);
    CHECK(cost >= st.bytes);
    (*checked)++;
    free(want);
    free(got);
}

static void test_random_scripts_equal_model(void)
{
    srand(4242);
    int checked = 0;
    for (int it = 0; it < 20000; it++) one_case(it, &checked);
    CHECK_EQ(checked, 20000);
}

/* A z-plane of x-slabs: the case the engine exists for. Two ranks each
 * wrote an x-band [32,32,16] of a [64,32,16] variable of 1-byte elements;
 * a read of one z-plane and of the whole variable must each read every
 * log byte they need once, in few windows. */
static void test_transposed_planes_read_once(void)
{
    static fake_t f;
    f.fail_after = -1;
    f.used = 2 * 32 * 32 * 16;
    for (uint64_t i = 0; i < 2 * 32 * 32 * 16; i++) f.log[i] = (uint8_t)(i * 7 + i / 251);
    uint64_t bx[2][6] = {{0, 0, 0, 32, 32, 16}, {32, 0, 0, 32, 32, 16}};
    h5l_rec_t r[2];
    h5l_rec_t *rp[2] = {&r[0], &r[1]};
    for (int k = 0; k < 2; k++) {
        memset(&r[k], 0, sizeof r[k]);
        r[k].tick = 1;
        r[k].rank = (uint32_t)k;
        r[k].ndims = 3;
        r[k].nboxes = 1;
        r[k].boxes = bx[k];
        r[k].offset = (uint64_t)k * 32 * 32 * 16;
        r[k].size = 32 * 32 * 16;
        f.grp[k].tick = 1;
        f.grp[k].rank = (uint32_t)k;
        f.grp[k].s = r[k].offset;
        f.grp[k].e = r[k].offset + r[k].size;
    }
    f.ngrp = 2;
    uint8_t fill = 0;
    h5l_xsrc_t src = {fk_read, fk_range, &f, 10, 4096}; /* 1 KiB segments, 4 KiB windows */
    uint64_t s[3] = {0, 0, 5}, c[3] = {64, 32, 1};
    uint8_t plane[64 * 32];
    h5l_xstats_t st = {0};
    h5l_err_t err;
    CHECK_EQ(h5l_xfer_read(&src, 3, 1, &fill, rp, 2, s, c, plane, &st, &err), H5L_OK);
    int ok = 1;
    for (uint64_t x = 0; x < 64; x++)
        for (uint64_t y = 0; y < 32; y++) ok &= plane[x * 32 + y] == f.log[((x * 32 + y) * 16 + 5)];
    CHECK(ok);
    /* the whole log once (a plane needs a byte of every 16), less the bytes
     * before the first and after the last needed one of each rank */
    CHECK(st.bytes <= 2 * 32 * 32 * 16 && st.bytes > 2 * 32 * 32 * 16 - 32);
    CHECK(st.windows <= 2 * (32 * 32 * 16) / 4096);
    int twice = 0;
    for (uint64_t i = 0; i < f.used; i++) twice += f.reads[i] > 1;
    CHECK_EQ(twice, 0);
    /* one column x = 7, y = 3: 16 bytes of one segment */
    memset(f.reads, 0, f.used);
    st = (h5l_xstats_t){0};
    uint64_t s2[3] = {7, 3, 0}, c2[3] = {1, 1, 16};
    uint8_t col[16];
    CHECK_EQ(h5l_xfer_read(&src, 3, 1, &fill, rp, 2, s2, c2, col, &st, &err), H5L_OK);
    CHECK_EQ(st.bytes, 16);
    CHECK_EQ(memcmp(col, f.log + (7 * 32 + 3) * 16, 16), 0);
}

/* A read callback that fails: the call fails with its code, whichever
 * window it was. */
static void test_read_failure_is_returned(void)
{
    srand(77);
    int failed = 0, tried = 0;
    for (int it = 0; it < 2000; it++) {
        static script_t sc;
        static fake_t f;
        uint64_t rs[MAXD], rc[MAXD];
        uint64_t n = random_case(&sc, &f, rs, rc);
        uint8_t *got = malloc(n * sc.es);
        h5l_xsrc_t src = {fk_read, fk_range, &f, 4, 32};
        h5l_xstats_t st = {0};
        h5l_err_t err = {0};
        if (h5l_xfer_read(&src, sc.nd, sc.es, sc.fill, sc.recp, (size_t)sc.nrec, rs, rc, got, &st, &err) == H5L_OK &&
            st.windows > 1) {
            f.calls = 0;
            f.fail_after = (int)rnd(st.windows);
            tried++;
            int rc1 = h5l_xfer_read(&src, sc.nd, sc.es, sc.fill, sc.recp, (size_t)sc.nrec, rs, rc, got, NULL, &err);
            failed += rc1 == H5L_EIO && strcmp(err.msg, "injected") == 0;
        }
        free(got);
    }
    CHECK(tried > 100);
    CHECK_EQ(failed, tried);
}

TEST_MAIN(T(test_random_scripts_equal_model), T(test_transposed_planes_read_once), T(test_read_failure_is_returned))
