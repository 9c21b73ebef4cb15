/* box.c — N-d box arithmetic (see box.h). */
#include "h5log/box.h"

#include <string.h>

int h5l_box_intersect(uint32_t nd, const uint64_t *as, const uint64_t *ac, const uint64_t *bs, const uint64_t *bc,
                      uint64_t *os, uint64_t *oc)
{
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t lo = as[i] > bs[i] ? as[i] : bs[i];
        uint64_t ae = as[i] + ac[i], be = bs[i] + bc[i];
        uint64_t hi = ae < be ? ae : be;
        if (hi <= lo) return 0;
        os[i] = lo;
        oc[i] = hi - lo;
    }
    return 1;
}

uint64_t h5l_box_offset(uint32_t nd, const uint64_t *s, const uint64_t *c, const uint64_t *p)
{
    uint64_t off = 0;
    for (uint32_t i = 0; i < nd; i++) off = off * c[i] + (p[i] - s[i]);
    return off;
}

uint64_t h5l_box_nelem(uint32_t nd, const uint64_t *c)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < nd; i++) {
        if (c[i] && n > UINT64_MAX / c[i]) return UINT64_MAX;
        n *= c[i];
    }
    return n;
}

int h5l_box_runs(uint32_t nd, const uint64_t *xs, const uint64_t *xc, const uint64_t *as, const uint64_t *ac,
                 const uint64_t *bs, const uint64_t *bc, h5l_run_fn fn, void *ctx)
{
    if (nd == 0) return fn(ctx, 0, 0, 1);
    /* Merge trailing dims: dims k..nd-1 form one run when for every d > k X
     * spans the whole of A and of B along d. */
    uint32_t k = nd - 1;
    uint64_t run = xc[k];
    while (k > 0 && xc[k] == ac[k] && xc[k] == bc[k]) {
        k--;
        run *= xc[k];
    }
    /* Strides (in elements) of A and B for dims 0..k. */
    uint64_t sa[32], sb[32], idx[32];
    uint64_t ta = 1, tb = 1;
    for (uint32_t d = nd; d-- > 0;) {
        sa[d] = ta;
        sb[d] = tb;
        ta *= ac[d];
        tb *= bc[d];
    }
    uint64_t pa = 0, pb = 0;
    for (uint32_t d = 0; d < nd; d++) {
        pa += (xs[d] - as[d]) * sa[d];
        pb += (xs[d] - bs[d]) * sb[d];
        idx[d] = 0;
    }
    /* Iterate over dims 0..k-1 (the run covers dim k and those after). */
    for (;;) {
        int rc = fn(ctx, pa, pb, run);
        if (rc) return rc;
        int d = (int)k - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            pa += sa[d];
            pb += sb[d];
            if (idx[d] < xc[d]) break;
            pa -= sa[d] * xc[d];
            pb -= sb[d] * xc[d];
            idx[d] = 0;
        }
        if (d < 0) return 0;
    }
}

int h5l_box_linear(uint32_t nd, const uint64_t *sh, uint64_t e0, uint64_t e1, h5l_lin_fn fn, void *ctx)
{
    uint64_t unit[32], rs[32] = {0}, rc[32] = {0}; /* unit: elements per step along a dimension */
    if (nd == 0) return e0 < e1 ? fn(ctx, rs, rc, 0) : 0;
    unit[nd - 1] = 1;
    for (uint32_t d = nd - 1; d-- > 0;) unit[d] = unit[d + 1] * sh[d + 1];
    for (uint64_t pos = e0; pos < e1;) {
        uint64_t rem = pos;
        for (uint32_t d = 0; d < nd; d++) {
            rs[d] = rem / unit[d];
            rem %= unit[d];
            rc[d] = 1;
        }
        /* the outermost dimension the run can step along whole: pos sits on
         * a boundary of it (so rs is 0 inside it) and one step fits */
        uint32_t d = 0;
        while (d < nd - 1 && (pos % unit[d] != 0 || e1 - pos < unit[d])) d++;
        uint64_t n = (e1 - pos) / unit[d];
        if (n > sh[d] - rs[d]) n = sh[d] - rs[d];
        rc[d] = n;
        for (uint32_t i = d + 1; i < nd; i++) rc[i] = sh[i];
        int r = fn(ctx, rs, rc, pos - e0);
        if (r) return r;
        pos += n * unit[d];
    }
    return 0;
}

void h5l_box_scatter(uint32_t nd, size_t es, const uint64_t *ts, const uint64_t *tc, const uint8_t *src,
                     const uint64_t *ch, const h5l_box_dst_t *cells)
{
    uint32_t L = nd - 1;
    uint64_t g0[32], gstr[32], cstr[32], q[32];
    uint64_t gn_next = 1;
    cstr[L] = 1;
    for (uint32_t d = nd; d-- > 0;) {
        g0[d] = ts[d] / ch[d];
        gstr[d] = gn_next; /* stride of the cell grid */
        gn_next *= (ts[d] + tc[d] - 1) / ch[d] - g0[d] + 1;
        if (d < L) cstr[d] = cstr[d + 1] * ch[d + 1]; /* stride inside a chunk */
        q[d] = ts[d];
    }
    uint64_t zs = ts[L], ze = zs + tc[L], chL = ch[L];
    for (;;) {
        uint64_t gb = 0, rowoff = 0; /* the row's cells (less the last dimension) and place in a chunk */
        for (uint32_t d = 0; d < L; d++) {
            gb += (q[d] / ch[d] - g0[d]) * gstr[d];
            rowoff += (q[d] % ch[d]) * cstr[d];
        }
        if (chL == 1) { /* one element per chunk: the transposing case, tight */
            const h5l_box_dst_t *cell = cells + gb;
            for (uint64_t z = zs; z < ze; z++, src += es) {
                const h5l_box_dst_t *c = cell + (z - g0[L]);
                if (!c->base) continue;
                uint8_t *dp = c->base + (rowoff - c->shift) * es;
                if (es == 4)
                    memcpy(dp, src, 4);
                else if (es == 8)
                    memcpy(dp, src, 8);
                else
                    memcpy(dp, src, es);
            }
        } else {
            for (uint64_t z = zs; z < ze;) {
                uint64_t cl = z / chL, z1 = (cl + 1) * chL < ze ? (cl + 1) * chL : ze;
                const h5l_box_dst_t *c = cells + gb + (cl - g0[L]);
                if (c->base) memcpy(c->base + (rowoff + (z - cl * chL) - c->shift) * es, src, (size_t)((z1 - z) * es));
                src += (z1 - z) * es;
                z = z1;
            }
        }
        int d = (int)L - 1;
        for (; d >= 0; d--) {
            if (++q[d] < ts[d] + tc[d]) break;
            q[d] = ts[d];
        }
        if (d < 0) return;
    }
}

void h5l_box_split(uint32_t nd, size_t es, const uint64_t *ts, const uint64_t *tc, const uint8_t *src,
                   const uint64_t *ch, uint8_t *const *cells)
{
    uint32_t L = nd - 1;
    uint64_t g0[32], gstr[32], q[32], o[32], e[32];
    uint64_t gn_next = 1;
    for (uint32_t d = nd; d-- > 0;) {
        g0[d] = ts[d] / ch[d];
        gstr[d] = gn_next;
        gn_next *= (ts[d] + tc[d] - 1) / ch[d] - g0[d] + 1;
        q[d] = ts[d];
    }
    uint64_t zs = ts[L], ze = zs + tc[L], chL = ch[L];
    for (;;) {
        /* the row's cells share their part's origin and extent in the
         * dimensions before the last: its row index inside the part */
        uint64_t gb = 0, row = 0;
        for (uint32_t d = 0; d < L; d++) {
            uint64_t cd = q[d] / ch[d], cs = cd * ch[d], ce = cs + ch[d], te = ts[d] + tc[d];
            o[d] = ts[d] > cs ? ts[d] : cs;
            e[d] = (te < ce ? te : ce) - o[d];
            gb += (cd - g0[d]) * gstr[d];
            row = row * e[d] + (q[d] - o[d]);
        }
        if (chL == 1) { /* one element per chunk and row: the transposing case, tight */
            uint8_t *const *cell = cells + gb;
            uint64_t off = row * es;
            for (uint64_t z = zs; z < ze; z++, src += es) {
                uint8_t *c = cell[z - g0[L]];
                if (!c) continue;
                if (es == 4)
                    memcpy(c + off, src, 4);
                else if (es == 8)
                    memcpy(c + off, src, 8);
                else
                    memcpy(c + off, src, es);
            }
        } else {
            for (uint64_t z = zs; z < ze;) {
                uint64_t cl = z / chL, z1 = (cl + 1) * chL < ze ? (cl + 1) * chL : ze;
                uint8_t *c = cells[gb + (cl - g0[L])];
                uint64_t oL = cl * chL > zs ? cl * chL : zs, eL = ((cl + 1) * chL < ze ? (cl + 1) * chL : ze) - oL;
                if (c) memcpy(c + (row * eL + (z - oL)) * es, src, (size_t)((z1 - z) * es));
                src += (z1 - z) * es;
                z = z1;
            }
        }
        int d = (int)L - 1;
        for (; d >= 0; d--) {
            if (++q[d] < ts[d] + tc[d]) break;
            q[d] = ts[d];
        }
        if (d < 0) return;
    }
}

uint64_t h5l_box_tile(uint32_t nd, const uint64_t *nblk, uint64_t chunk_bytes, const uint64_t *c, uint64_t budget,
                      uint64_t *g0, uint64_t *gn)
{
    uint32_t t = 0;
    uint64_t row = chunk_bytes;
    for (; t < nd; t++) { /* the first t at which a row of chunks fits */
        row = chunk_bytes;
        for (uint32_t d = t + 1; d < nd && row <= budget; d++) row *= nblk[d];
        if (row <= budget) break;
    }
    uint64_t m = 1, n = 1;
    if (t < nd) {
        m = budget / row;
        if (m > nblk[t] - c[t]) m = nblk[t] - c[t];
    }
    for (uint32_t d = 0; d < nd; d++) {
        g0[d] = t >= nd || d <= t ? c[d] : 0;
        gn[d] = t >= nd || d < t ? 1 : d == t ? m : nblk[d];
        n *= gn[d];
    }
    return n;
}

typedef struct copy_ctx {
    uint8_t *dst;
    const uint8_t *src;
    size_t es;
} copy_ctx_t;

static int copy_one(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    copy_ctx_t *c = ctx;
    memcpy(c->dst + dst * c->es, c->src + src * c->es, (size_t)(n * c->es));
    return 0;
}

void h5l_box_copy(uint32_t nd, size_t es, const uint64_t *xs, const uint64_t *xc, const uint64_t *as,
                  const uint64_t *ac, const uint8_t *src, const uint64_t *bs, const uint64_t *bc, uint8_t *dst)
{
    copy_ctx_t c = {dst, src, es};
    h5l_box_runs(nd, xs, xc, as, ac, bs, bc, copy_one, &c);
}
