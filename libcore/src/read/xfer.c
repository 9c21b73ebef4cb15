/* xfer.c — the transposition engine (see xfer.h): plan the pieces, mark
 * the segments they need, read each once in windows, copy the pieces out.
 *
 * A piece is one record box (bs, bc) met by the read box (rs, rc): the
 * intersection (xs, xc). Its elements lie in the record's data, row-major
 * in the record box, from boff on; in dst, row-major in the read box. Both
 * are walked as *runs*: the trailing dimensions the piece covers whole in
 * the record box and in the read box are contiguous in both, so a run is
 * one copy; the dimensions before it are counted through with their
 * strides. */
#include "xfer.h"

#include <stdlib.h>
#include <string.h>

#include "h5log/box.h"
#include "h5log/grow.h"

#define CARRY 8 /* bytes of the window before kept in front of the next: an element is at most 8 bytes */

typedef struct piece {
    const h5l_rec_t *rec;
    const uint64_t *bs, *bc; /* the record box */
    uint64_t *x;             /* xs[nd], xc[nd]: the piece (in the pool) */
    uint64_t boff;           /* absolute offset of the record box's first element */
    uint64_t lo, hi;         /* absolute bytes [lo, hi): its first element's first byte to its last's end */
    uint64_t nelem;
} piece_t;

typedef struct plan {
    uint32_t nd;
    size_t es;
    const uint64_t *rs, *rc; /* the read box */
    piece_t *p;
    size_t np, cap;
    uint64_t *pool; /* 2 nd per piece */
    size_t pool_cap;
    uint64_t covered; /* elements the pieces cover, if they are disjoint; else 0 */
} plan_t;

static void plan_free(plan_t *pl)
{
    free(pl->p);
    free(pl->pool);
}

/* Every record box meeting the read box becomes a piece, in record then
 * box order. */
static int plan_pieces(plan_t *pl, h5l_rec_t *const *recs, size_t nrec, h5l_err_t *err)
{
    uint32_t nd = pl->nd, xd = nd ? nd : 1;
    size_t es = pl->es;
    for (size_t i = 0; i < nrec; i++) {
        const h5l_rec_t *rec = recs[i];
        uint64_t boff = rec->offset;
        for (uint32_t k = 0; k < rec->nboxes; k++) {
            const uint64_t *bs = rec->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint64_t n = h5l_box_nelem(nd, bc);
            if (h5l_grow_raw((void **)&pl->pool, &pl->pool_cap, (pl->np + 1) * 2 * xd, sizeof *pl->pool))
                return h5l_err_set(err, H5L_ENOMEM, "out of memory planning a read of %zu records", nrec);
            uint64_t *xs = pl->pool + pl->np * 2 * xd, *xc = xs + xd;
            if (nd == 0 || h5l_box_intersect(nd, bs, bc, pl->rs, pl->rc, xs, xc)) {
                if (h5l_grow_raw((void **)&pl->p, &pl->cap, pl->np + 1, sizeof *pl->p))
                    return h5l_err_set(err, H5L_ENOMEM, "out of memory planning a read of %zu records", nrec);
                piece_t *p = &pl->p[pl->np++];
                p->rec = rec;
                p->bs = bs;
                p->bc = bc;
                p->boff = boff;
                p->nelem = nd ? h5l_box_nelem(nd, xc) : 1;
                uint64_t last[H5L_MAX_DIMS];
                for (uint32_t d = 0; d < nd; d++) last[d] = xs[d] + xc[d] - 1;
                p->lo = boff + (nd ? h5l_box_offset(nd, bs, bc, xs) : 0) * es;
                p->hi = boff + ((nd ? h5l_box_offset(nd, bs, bc, last) : 0) + 1) * es;
            }
            boff += n * es;
        }
    }
    for (size_t i = 0; i < pl->np; i++) pl->p[i].x = pl->pool + i * 2 * xd; /* (the pool has stopped moving) */
    return H5L_OK;
}

/* Does the box need its fill value first? Not when one record box holds
 * it whole, nor when pieces that do not overlap add up to it (ranks'
 * bands of one slab; checked pairwise for a few pieces only). */
static int needs_fill(const plan_t *pl)
{
    uint32_t nd = pl->nd;
    uint64_t want = nd ? h5l_box_nelem(nd, pl->rc) : 1, sum = 0;
    for (size_t i = 0; i < pl->np; i++) {
        if (pl->p[i].nelem == want) return 0;
        sum += pl->p[i].nelem;
    }
    if (sum != want || pl->np > 64) return 1;
    for (size_t i = 0; i < pl->np; i++)
        for (size_t j = i + 1; j < pl->np; j++) {
            uint64_t os[H5L_MAX_DIMS], oc[H5L_MAX_DIMS];
            const uint64_t *a = pl->p[i].x, *b = pl->p[j].x;
            if (h5l_box_intersect(nd, a, a + nd, b, b + nd, os, oc)) return 1;
        }
    return 0;
}

static void fill_all(uint8_t *dst, uint64_t n, size_t es, const uint8_t *fill)
{
    size_t total = (size_t)(n * es), done = es;
    int zero = 1;
    for (size_t i = 0; i < es; i++) zero &= fill[i] == 0;
    if (zero || !total) {
        memset(dst, 0, total);
        return;
    }
    memcpy(dst, fill, es);
    while (done < total) { /* doubling copies, not one small copy per element */
        size_t k = done < total - done ? done : total - done;
        memcpy(dst + done, dst, k);
        done += k;
    }
}

/* ------------------------------------------------------------------ */
/* runs of a piece                                                     */

typedef struct runs {
    uint32_t k;                  /* dims 0..k-1 are counted; a run covers dims k.. */
    uint64_t L;                  /* elements of a run */
    uint64_t sa[H5L_MAX_DIMS];   /* strides of the record box, elements */
    uint64_t sd[H5L_MAX_DIMS];   /* strides of the read box */
    uint64_t s0, d0;             /* offsets of the first run */
    const uint64_t *xs, *xc, *bs, *bc;
} runs_t;

static void runs_init(runs_t *w, uint32_t nd, const piece_t *p, const uint64_t *rs, const uint64_t *rc)
{
    w->xs = p->x;
    w->xc = p->x + nd;
    w->bs = p->bs;
    w->bc = p->bc;
    uint32_t k = nd - 1;
    uint64_t L = w->xc[k];
    while (k > 0 && w->xc[k] == p->bc[k] && w->xc[k] == rc[k]) {
        k--;
        L *= w->xc[k];
    }
    w->k = k;
    w->L = L;
    uint64_t ta = 1, tb = 1;
    for (uint32_t d = nd; d-- > 0;) {
        w->sa[d] = ta;
        w->sd[d] = tb;
        ta *= p->bc[d];
        tb *= rc[d];
    }
    w->s0 = w->d0 = 0;
    for (uint32_t d = 0; d < nd; d++) {
        w->s0 += (w->xs[d] - p->bs[d]) * w->sa[d];
        w->d0 += (w->xs[d] - rs[d]) * w->sd[d];
    }
}

/* Step the run counter j (dims 0..k-1) by one; 0 past the last run. */
static int runs_next(const runs_t *w, uint64_t *j)
{
    for (int d = (int)w->k - 1; d >= 0; d--) {
        if (++j[d] < w->xc[d]) return 1;
        j[d] = 0;
    }
    return 0;
}

/* The first run whose elements reach past element ea of the record box
 * (row-major index inside it): its counter in j. 0 if none. */
static int runs_seek(const runs_t *w, uint64_t ea, uint64_t *j)
{
    uint32_t k = w->k;
    for (uint32_t d = 0; d < k; d++) j[d] = 0;
    for (uint32_t d = 0; d < k; d++) {
        uint64_t c = (ea / w->sa[d]) % w->bc[d], base = w->xs[d] - w->bs[d];
        if (c < base) return 1; /* ea lies before this run: it starts after ea */
        if (c - base >= w->xc[d]) { /* past the piece along d: the next run of the dims before */
            for (uint32_t e = d; e < k; e++) j[e] = 0;
            if (d == 0) return 0;
            for (int e = (int)d - 1; e >= 0; e--) {
                if (++j[e] < w->xc[e]) return 1;
                j[e] = 0;
            }
            return 0;
        }
        j[d] = c - base;
    }
    uint64_t s = w->s0;
    for (uint32_t d = 0; d < k; d++) s += j[d] * w->sa[d];
    if (s + w->L <= ea) return runs_next(w, j);
    return 1;
}

static inline void copy_bytes(uint8_t *d, const uint8_t *s, size_t n)
{
    switch (n) { /* a run of one element: a move, not a call */
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    case 8: memcpy(d, s, 8); break;
    case 16: memcpy(d, s, 16); break;
    default: memcpy(d, s, n);
    }
}

/* Copy piece p's elements [ea, eb) (row-major indices in the record box)
 * from buf, which holds the log from absolute offset base on, into dst. */
static void apply_piece(const plan_t *pl, const piece_t *p, uint64_t ea, uint64_t eb, const uint8_t *buf,
                        uint64_t base, uint8_t *dst)
{
    uint32_t nd = pl->nd;
    size_t es = pl->es;
    /* element e of the record box lies at buf + rel + e es (rel may wrap
     * below zero: only offsets of elements inside the window are formed) */
    uint64_t rel = p->boff - base;
    if (nd == 0) {
        if (ea == 0 && eb >= 1) copy_bytes(dst, buf + rel, es);
        return;
    }
    runs_t w;
    runs_init(&w, nd, p, pl->rs, pl->rc);
    uint64_t j[H5L_MAX_DIMS];
    if (!runs_seek(&w, ea, j)) return;
    uint32_t k = w.k;
    uint64_t s = w.s0, d = w.d0;
    for (uint32_t i = 0; i < k; i++) {
        s += j[i] * w.sa[i];
        d += j[i] * w.sd[i];
    }
    for (;;) {
        if (s >= eb) return;
        if (k == 0 || s < ea || s + w.L > eb) { /* a run cut by the window (or the only run) */
            uint64_t a = s > ea ? s : ea, b = s + w.L < eb ? s + w.L : eb;
            if (b > a) memcpy(dst + (d + (a - s)) * es, buf + (rel + a * es), (size_t)((b - a) * es));
            if (k == 0 || !runs_next(&w, j)) return;
        } else {
            /* whole runs along dim k-1: constant strides, the tight loop */
            uint64_t sa = w.sa[k - 1], sd = w.sd[k - 1], n = w.xc[k - 1] - j[k - 1];
            size_t rb = (size_t)(w.L * es);
            uint64_t lim = (eb - s - w.L) / sa + 1; /* runs starting at s + i sa that end by eb */
            if (n > lim) n = lim;
            uint64_t so = rel + s * es, dof = d * es, sb = sa * es, db = sd * es;
            for (uint64_t i = 0; i < n; i++, so += sb, dof += db) copy_bytes(dst + dof, buf + so, rb);
            j[k - 1] += n - 1;
            if (!runs_next(&w, j)) return;
        }
        s = w.s0;
        d = w.d0;
        for (uint32_t i = 0; i < k; i++) {
            s += j[i] * w.sa[i];
            d += j[i] * w.sd[i];
        }
    }
}

/* ------------------------------------------------------------------ */
/* segments of a group                                                 */

typedef struct group {
    uint64_t rs, re;   /* the (tick, rank)'s data */
    uint64_t s0, nseg; /* the bitmap covers segments s0 .. s0 + nseg - 1 */
    uint64_t *bits;
    size_t cap;
} group_t;

static void mark(group_t *g, uint32_t seglog, uint64_t a, uint64_t b) /* bytes [a, b) */
{
    uint64_t s = ((a - g->rs) >> seglog) - g->s0, e = ((b - 1 - g->rs) >> seglog) - g->s0;
    for (uint64_t i = s; i <= e; i++) g->bits[i >> 6] |= (uint64_t)1 << (i & 63);
}

static int marked(const group_t *g, uint64_t i) { return (int)(g->bits[i >> 6] >> (i & 63)) & 1; }

/* Mark the segments piece p's elements lie in. Dimensions whose step is
 * at most a segment are taken as one span (the segments between their
 * elements are needed anyway, or are one segment of gap); the dimensions
 * before them are walked, span by span. */
static void mark_piece(group_t *g, uint32_t seglog, uint32_t nd, size_t es, const piece_t *p)
{
    if (nd == 0) {
        mark(g, seglog, p->lo, p->hi);
        return;
    }
    const uint64_t *xs = p->x, *xc = p->x + nd;
    uint64_t sa[H5L_MAX_DIMS], t = 1;
    for (uint32_t d = nd; d-- > 0;) {
        sa[d] = t;
        t *= p->bc[d];
    }
    uint64_t seg = (uint64_t)1 << seglog;
    uint32_t split = nd; /* dims split.. form one span */
    while (split > 0 && (xc[split - 1] == 1 || sa[split - 1] * es <= seg)) split--;
    uint64_t base = 0, tail = 0;
    for (uint32_t d = 0; d < nd; d++) base += (xs[d] - p->bs[d]) * sa[d];
    for (uint32_t d = split; d < nd; d++) tail += (xc[d] - 1) * sa[d];
    uint64_t j[H5L_MAX_DIMS] = {0};
    for (;;) {
        uint64_t off = base;
        for (uint32_t d = 0; d < split; d++) off += j[d] * sa[d];
        mark(g, seglog, p->boff + off * es, p->boff + (off + tail + 1) * es);
        int d = (int)split - 1;
        for (; d >= 0; d--) {
            if (++j[d] < xc[d]) break;
            j[d] = 0;
        }
        if (d < 0) return;
    }
}

/* Set up group g for pieces [a, b) (one tick and rank) and mark them. */
static int group_plan(const h5l_xsrc_t *src, const plan_t *pl, size_t a, size_t b, group_t *g, h5l_err_t *err)
{
    const h5l_rec_t *r0 = pl->p[a].rec;
    int rc = src->range(src->ctx, r0->tick, r0->rank, &g->rs, &g->re, err);
    if (rc) return rc;
    uint64_t lo = pl->p[a].lo, hi = pl->p[b - 1].hi; /* pieces are in log order */
    if (lo < g->rs || hi > g->re || hi <= lo)
        return h5l_err_set(err, H5L_ECORRUPT, "tick %llu, rank %u: records outside their data",
                           (unsigned long long)r0->tick, r0->rank);
    g->s0 = (lo - g->rs) >> src->seglog;
    g->nseg = ((hi - 1 - g->rs) >> src->seglog) - g->s0 + 1;
    size_t words = (size_t)((g->nseg + 63) / 64);
    if (h5l_grow_raw((void **)&g->bits, &g->cap, words, sizeof *g->bits))
        return h5l_err_set(err, H5L_ENOMEM, "out of memory planning a read");
    memset(g->bits, 0, words * sizeof *g->bits);
    for (size_t i = a; i < b; i++) mark_piece(g, src->seglog, pl->nd, pl->es, &pl->p[i]);
    return H5L_OK;
}

/* The next run of marked segments at or after *at, gaps of at most
 * XFER_GAP_SEGS read through: [*s, *e). 0 if none. */
static int next_run(const group_t *g, uint64_t *at, uint64_t *s, uint64_t *e)
{
    uint64_t i = *at;
    while (i < g->nseg && !marked(g, i)) i++;
    if (i >= g->nseg) return 0;
    *s = i;
    uint64_t last = i;
    for (uint64_t q = i + 1; q < g->nseg && q <= last + 1 + XFER_GAP_SEGS; q++)
        if (marked(g, q)) last = q;
    *e = last + 1;
    *at = last + 1;
    return 1;
}

static size_t window_of(const h5l_xsrc_t *src)
{
    size_t w = src->window ? src->window : H5L_XFER_WINDOW, seg = (size_t)1 << src->seglog;
    return w < seg ? seg : w / seg * seg;
}

static int same_group(const h5l_rec_t *a, const h5l_rec_t *b) { return a->tick == b->tick && a->rank == b->rank; }

/* A window whose bytes are all one piece's and land in one run of dst
 * (a band read whole, a contiguous slab): read straight into dst, no
 * window copy. 1 if the window is not such a one (nothing done), else
 * H5L_OK or the read's error. */
static int direct(const h5l_xsrc_t *src, const plan_t *pl, size_t a, size_t b, size_t first, uint64_t wlo, uint64_t whi,
                  uint8_t *dst, h5l_xstats_t *st, h5l_err_t *err)
{
    if (first >= b || (first + 1 < b && pl->p[first + 1].lo < whi)) return 1; /* none, or two pieces */
    const piece_t *p = &pl->p[first];
    size_t es = pl->es;
    uint64_t u0 = p->lo > wlo ? p->lo : wlo, u1 = p->hi < whi ? p->hi : whi;
    if ((u0 - p->boff) % es || (u1 - p->boff) % es) return 1; /* an element across the window's edge */
    uint64_t ea = (u0 - p->boff) / es, dpos;
    if (pl->nd == 0) {
        dpos = 0;
    } else {
        runs_t w;
        runs_init(&w, pl->nd, p, pl->rs, pl->rc);
        if (w.k != 0) return 1; /* several runs: the window path */
        dpos = w.d0 + (ea - w.s0);
    }
    const h5l_rec_t *r0 = pl->p[a].rec;
    int rc = src->read(src->ctx, r0->tick, r0->rank, u0, (size_t)(u1 - u0), dst + dpos * es, err);
    if (!rc && st) {
        st->windows++;
        st->bytes += u1 - u0;
    }
    return rc;
}

/* Read and apply the pieces [a, b) of one group. */
static int group_move(const h5l_xsrc_t *src, const plan_t *pl, size_t a, size_t b, group_t *g, uint8_t **buf,
                      size_t *bcap, uint8_t *dst, h5l_xstats_t *st, h5l_err_t *err)
{
    uint32_t seglog = src->seglog;
    uint64_t W = window_of(src), at = 0, rs, re;
    size_t first = a; /* first piece that may reach the window */
    while (next_run(g, &at, &rs, &re)) {
        for (uint64_t ws = rs; ws < re;) {
            uint64_t nseg = re - ws;
            if ((nseg << seglog) > W) nseg = W >> seglog;
            uint64_t wlo = g->rs + ((g->s0 + ws) << seglog), whi = g->rs + ((g->s0 + ws + nseg) << seglog);
            if (whi > g->re) whi = g->re;
            ws += nseg;
            /* the bytes the pieces need inside the window */
            while (first < b && pl->p[first].hi <= wlo) first++;
            uint64_t u0 = UINT64_MAX, u1 = 0;
            for (size_t i = first; i < b && pl->p[i].lo < whi; i++) {
                uint64_t l = pl->p[i].lo > wlo ? pl->p[i].lo : wlo, h = pl->p[i].hi < whi ? pl->p[i].hi : whi;
                if (l < u0) u0 = l;
                if (h > u1) u1 = h;
            }
            if (u0 >= u1) continue;
            const h5l_rec_t *r0 = pl->p[a].rec;
            int rc = direct(src, pl, a, b, first, wlo, whi, dst, st, err);
            if (rc != 1) {
                if (rc) return rc;
                continue;
            }
            size_t need = CARRY + (size_t)(whi - wlo);
            if (*bcap < need) {
                uint8_t *nb = realloc(*buf, need);
                if (!nb) return h5l_err_set(err, H5L_ENOMEM, "out of memory (a read window of %zu bytes)", need);
                *buf = nb;
                *bcap = need;
            }
            uint8_t *wb = *buf;
            rc = src->read(src->ctx, r0->tick, r0->rank, u0, (size_t)(u1 - u0), wb + CARRY + (u0 - wlo), err);
            if (rc) return rc;
            if (st) {
                st->windows++;
                st->bytes += u1 - u0;
            }
            uint64_t base = wlo - CARRY;
            for (size_t i = first; i < b && pl->p[i].lo < whi; i++) {
                const piece_t *p = &pl->p[i];
                /* elements whose last byte lies in (wlo, whi] */
                uint64_t ea = wlo > p->boff ? (wlo - p->boff) / pl->es : 0, eb = (whi - p->boff) / pl->es;
                apply_piece(pl, p, ea, eb, wb, base, dst);
            }
            if (whi - wlo >= CARRY) memcpy(wb, wb + CARRY + (whi - wlo) - CARRY, CARRY);
        }
    }
    return H5L_OK;
}

static int plan_start(plan_t *pl, uint32_t nd, size_t es, const uint64_t *start, const uint64_t *count,
                      h5l_rec_t *const *recs, size_t nrec, h5l_err_t *err)
{
    memset(pl, 0, sizeof *pl);
    pl->nd = nd;
    pl->es = es;
    pl->rs = start;
    pl->rc = count;
    if (nd > H5L_MAX_DIMS || es == 0 || es > CARRY)
        return h5l_err_set(err, H5L_EINVAL, "a read of %u dimensions, elements of %zu bytes", nd, es);
    return plan_pieces(pl, recs, nrec, err);
}

int h5l_xfer_read(const h5l_xsrc_t *src, uint32_t nd, size_t es, const void *fill, h5l_rec_t *const *recs, size_t nrec,
                  const uint64_t *start, const uint64_t *count, void *dst, h5l_xstats_t *st, h5l_err_t *err)
{
    plan_t pl;
    uint64_t n = nd ? h5l_box_nelem(nd, count) : 1;
    if (n == 0) return H5L_OK;
    int rc = plan_start(&pl, nd, es, start, count, recs, nrec, err);
    if (!rc && needs_fill(&pl)) fill_all(dst, n, es, fill);
    if (st) st->pieces += pl.np;
    group_t g = {0};
    uint8_t *buf = NULL;
    size_t bcap = 0;
    for (size_t a = 0, b; !rc && a < pl.np; a = b) {
        for (b = a + 1; b < pl.np && same_group(pl.p[a].rec, pl.p[b].rec); b++) {}
        rc = group_plan(src, &pl, a, b, &g, err);
        if (!rc) rc = group_move(src, &pl, a, b, &g, &buf, &bcap, dst, st, err);
    }
    free(buf);
    free(g.bits);
    plan_free(&pl);
    return rc;
}

int h5l_xfer_cost(const h5l_xsrc_t *src, uint32_t nd, size_t es, h5l_rec_t *const *recs, size_t nrec,
                  const uint64_t *start, const uint64_t *count, uint64_t *bytes, h5l_err_t *err)
{
    plan_t pl;
    *bytes = 0;
    if (nd && h5l_box_nelem(nd, count) == 0) return H5L_OK;
    int rc = plan_start(&pl, nd, es, start, count, recs, nrec, err);
    group_t g = {0};
    for (size_t a = 0, b; !rc && a < pl.np; a = b) {
        for (b = a + 1; b < pl.np && same_group(pl.p[a].rec, pl.p[b].rec); b++) {}
        rc = group_plan(src, &pl, a, b, &g, err);
        uint64_t at = 0, s, e;
        while (!rc && next_run(&g, &at, &s, &e)) {
            uint64_t lo = g.rs + ((g.s0 + s) << src->seglog), hi = g.rs + ((g.s0 + e) << src->seglog);
            *bytes += (hi < g.re ? hi : g.re) - lo;
        }
    }
    free(g.bits);
    plan_free(&pl);
    return rc;
}
