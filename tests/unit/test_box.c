/* test_box.c — N-d box arithmetic (box.h): intersection, row-major offsets
 * and the run decomposition used to copy a box between two layouts.
 *
 * Why: every element the reader returns is placed by these three functions;
 * an off-by-one here silently puts data in the wrong place. Each is compared
 * against a brute-force element-by-element reference on random boxes in 1..5
 * dimensions (fixed seed, so a failure reproduces), and the run walker must
 * also merge maximally: a fully contiguous copy is exactly one run. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h5log/box.h"
#include "tharness.h"

#define MAXD 5

static uint64_t rnd(uint64_t n) { return n ? (uint64_t)rand() % n : 0; }

/* Advance the row-major odometer p over box (s, c). 0 when done. */
static int next_point(uint32_t nd, const uint64_t *s, const uint64_t *c, uint64_t *p)
{
    for (int d = (int)nd - 1; d >= 0; d--) {
        if (++p[d] < s[d] + c[d]) return 1;
        p[d] = s[d];
    }
    return 0;
}

static int inside(uint32_t nd, const uint64_t *s, const uint64_t *c, const uint64_t *p)
{
    for (uint32_t d = 0; d < nd; d++)
        if (p[d] < s[d] || p[d] - s[d] >= c[d]) return 0;
    return 1;
}

/* Offset of p in box (s, c) by counting, the slow way. */
static uint64_t count_offset(uint32_t nd, const uint64_t *s, const uint64_t *c, const uint64_t *p)
{
    uint64_t q[MAXD], n = 0;
    memcpy(q, s, nd * sizeof *q);
    do {
        if (memcmp(q, p, nd * sizeof *q) == 0) return n;
        n++;
    } while (next_point(nd, s, c, q));
    return UINT64_MAX;
}

static uint64_t nelem(uint32_t nd, const uint64_t *c)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; d++) n *= c[d];
    return n;
}

static void test_intersect_bruteforce(void)
{
    srand(12345);
    const uint64_t G = 14; /* the grid every box lies in */
    for (int it = 0; it < 3000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(4);
        uint64_t as[MAXD], ac[MAXD], bs[MAXD], bc[MAXD], os[MAXD], oc[MAXD], gs[MAXD], gc[MAXD];
        for (uint32_t d = 0; d < nd; d++) {
            as[d] = rnd(9);
            ac[d] = 1 + rnd(5);
            bs[d] = rnd(9);
            bc[d] = 1 + rnd(5);
            gs[d] = 0;
            gc[d] = G;
            os[d] = oc[d] = 0xAAAA;
        }
        int r = h5l_box_intersect(nd, as, ac, bs, bc, os, oc);
        uint64_t p[MAXD] = {0};
        memset(p, 0, sizeof p);
        int bad = 0, any = 0;
        do {
            int both = inside(nd, as, ac, p) && inside(nd, bs, bc, p);
            any |= both;
            if (r && both != inside(nd, os, oc, p)) bad = 1;
        } while (next_point(nd, gs, gc, p));
        if (bad || r != any) {
            fprintf(stderr, "  iteration %d nd %u: result %d, brute force %d%s\n", it, nd, r, any,
                    bad ? " (wrong box)" : "");
            CHECK(0);
            return;
        }
    }
    /* symmetric, and the intersection with itself is itself */
    uint64_t s[2] = {3, 4}, c[2] = {2, 7}, os[2], oc[2];
    CHECK_EQ(h5l_box_intersect(2, s, c, s, c, os, oc), 1);
    CHECK(os[0] == 3 && os[1] == 4 && oc[0] == 2 && oc[1] == 7);
    /* touching but not overlapping boxes are disjoint */
    uint64_t t[2] = {5, 4};
    CHECK_EQ(h5l_box_intersect(2, s, c, t, c, os, oc), 0);
    /* huge coordinates near the top of the u64 range (ends <= UINT64_MAX) */
    uint64_t hs[1] = {UINT64_MAX - 10}, hc[1] = {5}, ks[1] = {UINT64_MAX - 8}, kc[1] = {8};
    CHECK_EQ(h5l_box_intersect(1, hs, hc, ks, kc, os, oc), 1);
    CHECK(os[0] == UINT64_MAX - 8 && oc[0] == 3);
    /* zero dimensions: the single point always intersects */
    CHECK_EQ(h5l_box_intersect(0, s, c, t, c, os, oc), 1);
}

static void test_offset_and_nelem(void)
{
    srand(777);
    for (int it = 0; it < 400; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(MAXD);
        uint64_t s[MAXD], c[MAXD], p[MAXD];
        for (uint32_t d = 0; d < nd; d++) {
            s[d] = rnd(1000000);
            c[d] = 1 + rnd(4);
        }
        memcpy(p, s, sizeof p);
        uint64_t n = 0;
        int bad = 0;
        do {
            if (h5l_box_offset(nd, s, c, p) != n) bad = 1;
            n++;
        } while (next_point(nd, s, c, p));
        CHECK(!bad);
        CHECK_EQ(n, nelem(nd, c));
        CHECK_EQ(h5l_box_nelem(nd, c), n);
    }
    uint64_t c0[3] = {4, 0, 9};
    CHECK_EQ(h5l_box_nelem(3, c0), 0);
    CHECK_EQ(h5l_box_nelem(0, c0), 1);
    uint64_t big[3] = {1ull << 40, 1ull << 30, 3};
    CHECK(h5l_box_nelem(3, big) == UINT64_MAX); /* saturates, no wrap */
    uint64_t fit[2] = {1ull << 32, (1ull << 32) - 1};
    CHECK(h5l_box_nelem(2, fit) == (1ull << 32) * ((1ull << 32) - 1));
    /* an offset at large absolute coordinates */
    uint64_t s[2] = {1ull << 62, 5}, c[2] = {3, 10}, p[2] = {(1ull << 62) + 2, 9};
    CHECK_EQ(h5l_box_offset(2, s, c, p), 24);
    CHECK_EQ(count_offset(2, s, c, p), 24);
}

typedef struct {
    uint64_t src[4096], dst[4096], n[4096];
    size_t nruns;
    int stop_at; /* return 7 on this call (1-based), 0: never */
} runs_t;

static int collect(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    runs_t *r = ctx;
    if (r->nruns < 4096) {
        r->src[r->nruns] = src;
        r->dst[r->nruns] = dst;
        r->n[r->nruns] = n;
    }
    r->nruns++;
    return r->stop_at && (int)r->nruns == r->stop_at ? 7 : 0;
}

/* Copy X from layout A to layout B by the runs; compare against copying
 * element by element. Also: runs ascend in the source, never overlap, and
 * are maximal (no two consecutive runs are adjacent in both layouts). */
static int check_runs(uint32_t nd, const uint64_t *xs, const uint64_t *xc, const uint64_t *as, const uint64_t *ac,
                      const uint64_t *bs, const uint64_t *bc, size_t *nruns)
{
    static runs_t R;
    memset(&R, 0, sizeof R);
    uint64_t na = nelem(nd, ac), nb = nelem(nd, bc);
    uint64_t *src = malloc(na * sizeof *src), *dst = calloc(nb, sizeof *dst), *ref = calloc(nb, sizeof *ref);
    for (uint64_t i = 0; i < na; i++) src[i] = i + 1;
    int ok = 1;
    if (h5l_box_runs(nd, xs, xc, as, ac, bs, bc, collect, &R) != 0) ok = 0;
    uint64_t total = 0;
    for (size_t k = 0; ok && k < R.nruns && k < 4096; k++) {
        if (R.n[k] == 0 || R.src[k] + R.n[k] > na || R.dst[k] + R.n[k] > nb) {
            ok = 0;
            break;
        }
        if (k > 0 && R.src[k] < R.src[k - 1] + R.n[k - 1]) ok = 0;
        if (k > 0 && R.src[k] == R.src[k - 1] + R.n[k - 1] && R.dst[k] == R.dst[k - 1] + R.n[k - 1])
            ok = 0; /* could have been one run */
        for (uint64_t i = 0; i < R.n[k]; i++) dst[R.dst[k] + i] = src[R.src[k] + i];
        total += R.n[k];
    }
    if (total != nelem(nd, xc)) ok = 0;
    uint64_t p[MAXD];
    memcpy(p, xs, nd * sizeof *p);
    do {
        ref[count_offset(nd, bs, bc, p)] = src[count_offset(nd, as, ac, p)];
    } while (next_point(nd, xs, xc, p));
    if (memcmp(ref, dst, nb * sizeof *dst) != 0) ok = 0;
    free(src);
    free(dst);
    free(ref);
    *nruns = R.nruns;
    return ok;
}

static void test_runs_bruteforce(void)
{
    srand(4242);
    for (int it = 0; it < 3000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(4);
        uint64_t as[MAXD], ac[MAXD], bs[MAXD], bc[MAXD], is[MAXD], ic[MAXD], xs[MAXD], xc[MAXD];
        int ok;
        do { /* A and B must overlap */
            for (uint32_t d = 0; d < nd; d++) {
                as[d] = rnd(6);
                ac[d] = 1 + rnd(5);
                bs[d] = rnd(6);
                bc[d] = 1 + rnd(5);
                /* often share a trailing extent, so merging gets exercised */
                if (rnd(2)) {
                    bs[d] = as[d];
                    bc[d] = ac[d];
                }
            }
            ok = 1;
            for (uint32_t d = 0; d < nd; d++) {
                uint64_t lo = as[d] > bs[d] ? as[d] : bs[d];
                uint64_t hi = as[d] + ac[d] < bs[d] + bc[d] ? as[d] + ac[d] : bs[d] + bc[d];
                if (hi <= lo)
                    ok = 0;
                else {
                    is[d] = lo;
                    ic[d] = hi - lo;
                }
            }
        } while (!ok);
        for (uint32_t d = 0; d < nd; d++) { /* X: a sub-box of A ∩ B, often all of it */
            if (rnd(2)) {
                xs[d] = is[d];
                xc[d] = ic[d];
            } else {
                xs[d] = is[d] + rnd(ic[d]);
                xc[d] = 1 + rnd(is[d] + ic[d] - xs[d]);
            }
        }
        size_t nr;
        if (!check_runs(nd, xs, xc, as, ac, bs, bc, &nr)) {
            fprintf(stderr, "  iteration %d (nd %u) copies wrongly\n", it, nd);
            CHECK(0);
            return;
        }
    }
}

static void test_runs_contiguous_is_one_run(void)
{
    size_t nr = 0;
    /* X == A == B */
    uint64_t s[4] = {2, 3, 4, 5}, c[4] = {3, 4, 5, 6};
    for (uint32_t nd = 1; nd <= 4; nd++) {
        CHECK(check_runs(nd, s, c, s, c, s, c, &nr));
        CHECK_EQ(nr, 1);
    }
    /* X takes some rows of A and B, whole along every trailing dimension */
    uint64_t as[3] = {0, 0, 0}, ac[3] = {10, 4, 5}, bs[3] = {2, 0, 0}, bc[3] = {3, 4, 5};
    uint64_t xs[3] = {3, 0, 0}, xc[3] = {2, 4, 5};
    CHECK(check_runs(3, xs, xc, as, ac, bs, bc, &nr));
    CHECK_EQ(nr, 1);
    /* narrower than B in the last dimension: one run per row */
    uint64_t bc2[3] = {3, 4, 6};
    CHECK(check_runs(3, xs, xc, as, ac, bs, bc2, &nr));
    CHECK_EQ(nr, 2 * 4);
    /* partial in the middle dimension only: one run per leading index */
    uint64_t xs3[3] = {3, 1, 0}, xc3[3] = {2, 2, 5};
    CHECK(check_runs(3, xs3, xc3, as, ac, bs, bc, &nr));
    CHECK_EQ(nr, 2);
    /* zero dimensions: one element */
    runs_t *R = calloc(1, sizeof *R);
    CHECK_EQ(h5l_box_runs(0, s, c, s, c, s, c, collect, R), 0);
    CHECK(R->nruns == 1 && R->src[0] == 0 && R->dst[0] == 0 && R->n[0] == 1);
    free(R);
}

static void test_runs_stop_early(void)
{
    runs_t *R = calloc(1, sizeof *R);
    uint64_t s[2] = {0, 0}, ac[2] = {6, 8}, xc[2] = {5, 3};
    R->stop_at = 3;
    CHECK_EQ(h5l_box_runs(2, s, xc, s, ac, s, ac, collect, R), 7);
    CHECK_EQ(R->nruns, 3);
    free(R);
}

/* h5l_box_linear: the boxes, walked in row-major order one after the
 * other, must visit exactly the linear positions e0..e1-1 of the shape, in
 * order, and be at most 2*nd of them. Reference: each box element's own
 * linear position, computed independently, against a running counter. */
typedef struct lin {
    uint32_t nd;
    const uint64_t *sh;
    uint64_t e0, next; /* next expected linear position */
    int nboxes, bad;
} lin_t;

static int lin_check(void *ctx, const uint64_t *rs, const uint64_t *rc, uint64_t first)
{
    lin_t *L = ctx;
    L->nboxes++;
    if (L->e0 + first != L->next) L->bad++;
    uint64_t p[MAXD];
    for (uint32_t d = 0; d < L->nd; d++) {
        if (rc[d] == 0 || rs[d] + rc[d] > L->sh[d]) L->bad++;
        p[d] = rs[d];
    }
    do {
        uint64_t lin = 0;
        for (uint32_t d = 0; d < L->nd; d++) lin = lin * L->sh[d] + p[d];
        if (lin != L->next++) L->bad++;
    } while (next_point(L->nd, rs, rc, p));
    return 0;
}

static void test_linear_bruteforce(void)
{
    srand(11);
    for (int it = 0; it < 3000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(MAXD);
        uint64_t sh[MAXD], n = 1;
        for (uint32_t d = 0; d < nd; d++) n *= (sh[d] = 1 + rnd(5));
        uint64_t e0 = rnd(n + 1), e1 = e0 + rnd(n - e0 + 1);
        lin_t L = {nd, sh, e0, e0, 0, 0};
        CHECK_EQ(h5l_box_linear(nd, sh, e0, e1, lin_check, &L), 0);
        CHECK_EQ(L.bad, 0);
        CHECK_EQ(L.next, e1);
        CHECK(L.nboxes <= (int)(2 * nd));
    }
    /* a whole box is one box; zero dimensions: one element */
    uint64_t sh[3] = {4, 5, 6};
    lin_t L = {3, sh, 0, 0, 0, 0};
    h5l_box_linear(3, sh, 0, 120, lin_check, &L);
    CHECK_EQ(L.nboxes, 1);
    L = (lin_t){0, sh, 0, 0, 0, 0};
    h5l_box_linear(0, sh, 0, 1, lin_check, &L);
    CHECK_EQ(L.nboxes, 1);
}

/* h5l_box_scatter against element-by-element placement: random boxes T
 * in a grid of random chunk shapes (one element wide included), random
 * cells skipped, destinations whole chunks (shift 0) or parts of them
 * (shift > 0: a base that stands for the chunk from element shift on);
 * bytes outside T's elements must stay untouched. */
static void test_scatter_bruteforce(void)
{
    srand(777);
    for (int it = 0; it < 3000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(MAXD - 1);
        size_t es = (size_t)1 << rnd(4);
        uint64_t ch[MAXD], ts[MAXD], tc[MAXD], g0[MAXD], gn[MAXD], ng = 1, chn = 1;
        for (uint32_t d = 0; d < nd; d++) {
            ch[d] = 1 + rnd(4);
            ts[d] = rnd(9);
            tc[d] = 1 + rnd(8);
            g0[d] = ts[d] / ch[d];
            gn[d] = (ts[d] + tc[d] - 1) / ch[d] - g0[d] + 1;
            ng *= gn[d];
            chn *= ch[d];
        }
        uint64_t n = nelem(nd, tc);
        uint8_t *src = malloc(n * es);
        for (uint64_t i = 0; i < n * es; i++) src[i] = (uint8_t)rnd(256);
        uint8_t *got = malloc(ng * chn * es), *want = malloc(ng * chn * es);
        memset(got, 0xEE, ng * chn * es);
        memset(want, 0xEE, ng * chn * es);
        h5l_box_dst_t *cells = malloc(ng * sizeof *cells);
        uint64_t *shift = malloc(ng * sizeof *shift);
        for (uint64_t g = 0; g < ng; g++) {
            shift[g] = rnd(2) ? 0 : rnd(chn); /* part of the chunk from element shift on */
            cells[g].base = rnd(5) ? got + g * chn * es : NULL;
            cells[g].shift = shift[g];
        }
        /* the model: each element of T to its chunk's cell */
        uint64_t p[MAXD];
        memcpy(p, ts, nd * sizeof *p);
        uint64_t k = 0;
        int bad = 0;
        do {
            uint64_t g = 0, e = 0;
            for (uint32_t d = 0; d < nd; d++) {
                g = g * gn[d] + (p[d] / ch[d] - g0[d]);
                e = e * ch[d] + p[d] % ch[d];
            }
            if (cells[g].base) {
                if (e < shift[g] || e - shift[g] >= chn) bad = 1; /* (parts: the test keeps elements inside) */
                else memcpy(want + g * chn * es + (e - shift[g]) * es, src + k * es, es);
            }
            k++;
        } while (next_point(nd, ts, tc, p));
        if (bad) { /* a shift past some element: skip the case (it would write outside its cell) */
            free(src), free(got), free(want), free(cells), free(shift);
            continue;
        }
        h5l_box_scatter(nd, es, ts, tc, src, ch, cells);
        CHECK(memcmp(got, want, ng * chn * es) == 0);
        free(src), free(got), free(want), free(cells), free(shift);
    }
}

/* h5l_box_split against element-by-element placement: each chunk's part
 * of T packed row-major in its own buffer (random T, chunk shapes, skipped
 * cells); bytes past a part stay untouched. */
static void test_split_bruteforce(void)
{
    srand(4711);
    for (int it = 0; it < 3000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(MAXD - 1);
        size_t es = (size_t)1 << rnd(4);
        uint64_t ch[MAXD], ts[MAXD], tc[MAXD], g0[MAXD], gn[MAXD], ng = 1;
        for (uint32_t d = 0; d < nd; d++) {
            ch[d] = 1 + rnd(5);
            ts[d] = rnd(9);
            tc[d] = 1 + rnd(8);
            g0[d] = ts[d] / ch[d];
            gn[d] = (ts[d] + tc[d] - 1) / ch[d] - g0[d] + 1;
            ng *= gn[d];
        }
        uint64_t n = nelem(nd, tc), cellcap = 1;
        for (uint32_t d = 0; d < nd; d++) cellcap *= ch[d];
        uint8_t *src = malloc(n * es);
        for (uint64_t i = 0; i < n * es; i++) src[i] = (uint8_t)rnd(256);
        uint8_t *got = malloc(ng * cellcap * es), *want = malloc(ng * cellcap * es);
        memset(got, 0xEE, ng * cellcap * es);
        memset(want, 0xEE, ng * cellcap * es);
        uint8_t **cells = malloc(ng * sizeof *cells);
        for (uint64_t g = 0; g < ng; g++) cells[g] = rnd(5) ? got + g * cellcap * es : NULL;
        uint64_t p[MAXD], k = 0;
        memcpy(p, ts, nd * sizeof *p);
        do { /* the model: the element's index in its cell's part, counted */
            uint64_t g = 0, idx = 0;
            for (uint32_t d = 0; d < nd; d++) {
                uint64_t cd = p[d] / ch[d], lo = ts[d] > cd * ch[d] ? ts[d] : cd * ch[d];
                uint64_t hi = ts[d] + tc[d] < (cd + 1) * ch[d] ? ts[d] + tc[d] : (cd + 1) * ch[d];
                g = g * gn[d] + (cd - g0[d]);
                idx = idx * (hi - lo) + (p[d] - lo);
            }
            if (cells[g]) memcpy(want + g * cellcap * es + idx * es, src + k * es, es);
            k++;
        } while (next_point(nd, ts, tc, p));
        h5l_box_split(nd, es, ts, tc, src, ch, cells);
        CHECK(memcmp(got, want, ng * cellcap * es) == 0);
        free(src), free(got), free(want), free(cells);
    }
}

/* h5l_box_copy against a copy element by element: every element of X
 * lands at its place in B (elements of 3 bytes, so a run's length in
 * bytes is checked too), and nothing outside X in B changes. */
static void test_copy_bruteforce(void)
{
    srand(777);
    for (int it = 0; it < 2000; it++) {
        uint32_t nd = 1 + (uint32_t)rnd(3);
        uint64_t as[MAXD], ac[MAXD], bs[MAXD], bc[MAXD], xs[MAXD], xc[MAXD];
        for (uint32_t d = 0; d < nd; d++) { /* X inside both A and B */
            xs[d] = rnd(4);
            xc[d] = 1 + rnd(4);
            as[d] = xs[d] - rnd(xs[d] + 1);
            ac[d] = xs[d] + xc[d] - as[d] + rnd(3);
            bs[d] = xs[d] - rnd(xs[d] + 1);
            bc[d] = xs[d] + xc[d] - bs[d] + rnd(3);
        }
        const size_t es = 3;
        size_t na = (size_t)nelem(nd, ac) * es, nb = (size_t)nelem(nd, bc) * es;
        uint8_t *src = malloc(na), *dst = malloc(nb), *want = malloc(nb);
        for (size_t i = 0; i < na; i++) src[i] = (uint8_t)rand();
        for (size_t i = 0; i < nb; i++) dst[i] = want[i] = (uint8_t)rand();
        uint64_t p[MAXD];
        memcpy(p, xs, nd * sizeof *p);
        do
            memcpy(want + count_offset(nd, bs, bc, p) * es, src + count_offset(nd, as, ac, p) * es, es);
        while (next_point(nd, xs, xc, p));
        h5l_box_copy(nd, es, xs, xc, as, ac, src, bs, bc, dst);
        int same = memcmp(dst, want, nb) == 0;
        free(src);
        free(dst);
        free(want);
        if (!same) {
            fprintf(stderr, "  iteration %d (nd %u) copies wrongly\n", it, nd);
            CHECK(0);
            return;
        }
    }
}

TEST_MAIN(T(test_intersect_bruteforce), T(test_copy_bruteforce), T(test_scatter_bruteforce), T(test_split_bruteforce), T(test_offset_and_nelem), T(test_runs_bruteforce),
          T(test_runs_contiguous_is_one_run), T(test_runs_stop_early), T(test_linear_bruteforce))
