/* final.c — finalizing: plan, build, copy, index, point (see final.h and
 * docs/format.md 1.1). This file plans, deals the tiles and builds; the
 * copies are fcopy.c's, the indexes and their pointing findex.c's.
 *
 * Plan. Per variable of the tick: a chunked variable's chunks holding data
 * (the reader's chunk list), each *in place* when the reader says the
 * newest record alone holds it as one contiguous run of the log
 * (h5l_reader_chunk_info's direct), else copied. A contiguous variable is
 * asked slab by slab: when every slab is such a run, the runs that follow
 * each other in the log make *bands* of rows, and chunks of h rows (h the
 * gcd of the bands' rows) are all in place: the variable is stored chunked
 * with no byte copied. Otherwise it is a contiguous dataset, copied whole.
 *
 * Copy. The copies are cut into *tiles*: boxes of the variable whose
 * dimensions before some t are one index, dimension t a range, the
 * dimensions after it whole. Such a box meets any record box in one run of
 * the record's data per index of the dimensions before t, and any chunk
 * in one contiguous part of the chunk (its rows of dimension t, whole in
 * the dimensions after): so a tile is read from the log in few large
 * pieces (the engine, xfer.h) and written to each chunk in one piece,
 * whatever the chunking and whatever the ranks wrote. t is the first
 * dimension at which a tile of at least one index fits the window; along
 * dimension t tiles hold whole chunks when a chunk's rows fit. Tiles are
 * numbered in variable then row-major order and dealt out to the
 * processes in contiguous shares of equal bytes, so each process reads
 * about its share of the log once (a band written by rank r is finalized
 * by about rank r), and every byte is read and written once: the cost is
 * linear in the bytes at any size, and memory is two windows.
 *
 * Cutting a tile into chunks walks the tile row by row (its last
 * dimension) and hands each row's piece of each chunk to that chunk's
 * part of the output, in order: the source is read once, sequentially,
 * and each chunk's part is written sequentially (a z-plane chunk of an
 * x-slab gets one element per row, 256 parts filled side by side). */
#include "finint.h"

static uint64_t align8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

void h5l_fin_blk_coord(const fvar_t *v, uint64_t blk, uint64_t *c)
{
    for (int d = (int)v->nd - 1; d >= 0; d--) {
        c[d] = blk % v->nblk[d];
        blk /= v->nblk[d];
    }
}

uint64_t h5l_fin_coord_blk(const fvar_t *v, const uint64_t *c)
{
    uint64_t b = 0;
    for (uint32_t d = 0; d < v->nd; d++) b = b * v->nblk[d] + c[d];
    return b;
}

static int add_blk(void *ctx, const uint64_t *coord)
{
    fvar_t *v = ctx;
    if (h5l_grow_raw((void **)&v->blks, (size_t *)&v->bcap, (size_t)v->n + 1, sizeof *v->blks)) return H5L_ENOMEM;
    v->blks[v->n++] = h5l_fin_coord_blk(v, coord);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The chunks of v holding data, sorted, each once; each in place or not. */
static int plan_chunks(h5l_final_t *p, h5l_reader_t *r, fvar_t *v, h5l_err_t *err)
{
    if (v->n > 1) qsort(v->blks, v->n, sizeof *v->blks, cmp_u64);
    uint64_t m = 0;
    for (uint64_t i = 0; i < v->n; i++)
        if (!m || v->blks[i] != v->blks[m - 1]) v->blks[m++] = v->blks[i];
    v->n = m;
    v->addr = malloc((m ? m : 1) * sizeof *v->addr);
    v->copy = malloc(m ? m : 1);
    if (!v->addr || !v->copy) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory planning '%s'", p->path, v->path);
    for (uint64_t i = 0; i < m; i++) {
        uint64_t c[H5L_MAX_DIMS], st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
        h5l_fin_blk_coord(v, v->blks[i], c);
        int full = 1;
        for (uint32_t d = 0; d < v->nd; d++) {
            st[d] = c[d] * v->chunk[d];
            ct[d] = v->shape[d] - st[d] < v->chunk[d] ? v->shape[d] - st[d] : v->chunk[d];
            full &= ct[d] == v->chunk[d];
        }
        v->copy[i] = 1;
        if (full) { /* an edge chunk's padding is not in the log: always copied */
            h5l_chunk_info_t ci;
            int rc = h5l_reader_chunk_info(r, p->tick, v->objid, c, st, ct, &ci, err);
            if (rc) return rc;
            if (ci.run) { /* one record's run, or the parts of several side by side */
                v->copy[i] = 0;
                v->addr[i] = ci.run_off;
            }
        }
        if (v->copy[i]) v->addr[i] = v->ncopy++;
    }
    return H5L_OK;
}

/* The chunks [i C, (i+1) C) of v (C: shape, dividing v's) all in place?
 * Then v becomes chunked with shape C. *ok 0: no (not an error). */
static int plan_grid(h5l_final_t *p, h5l_reader_t *r, fvar_t *v, const uint64_t *C, int *ok, h5l_err_t *err)
{
    *ok = 0;
    uint32_t nd = v->nd;
    uint64_t n = 1, S = v->es, g[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++) {
        if (!C[d] || v->shape[d] % C[d]) return H5L_OK;
        g[d] = v->shape[d] / C[d];
        n *= g[d];
        S *= C[d];
    }
    if (S < H5L_FINAL_INPLACE_MIN || S >= CHUNK_MAX || n > ((uint64_t)1 << 24)) return H5L_OK;
    uint64_t *addr = malloc(n * sizeof *addr), *blks = malloc(n * sizeof *blks);
    uint8_t *copy = calloc(n, 1);
    int rc = addr && blks && copy ? H5L_OK : h5l_err_set(err, H5L_ENOMEM, "%s: out of memory planning '%s'", p->path, v->path);
    uint64_t i = 0;
    for (; !rc && i < n; i++) {
        uint64_t st[H5L_MAX_DIMS], rem = i;
        for (int d = (int)nd - 1; d >= 0; d--) {
            st[d] = rem % g[d] * C[d];
            rem /= g[d];
        }
        int run = h5l_reader_box_run(r, p->tick, v->objid, st, C, &addr[i], err);
        if (run < 0) rc = run;
        if (run != 1) break;
        blks[i] = i;
    }
    if (rc || i < n) {
        free(addr);
        free(blks);
        free(copy);
        return rc;
    }
    v->blks = blks;
    v->addr = addr;
    v->copy = copy;
    v->n = n;
    memcpy(v->chunk, C, nd * sizeof *C);
    v->rechunked = 1;
    *ok = 1;
    return H5L_OK;
}

/* A contiguous variable in place with the chunks its writers wrote: the
 * box of the record that wrote its first element last, when those boxes
 * tile it and each is one run of the log (ranks owning column bands of a
 * block of planes: [8, 1024, 256] boxes, the canonical rows cut across
 * every rank's part). */
static int plan_boxes(h5l_final_t *p, h5l_reader_t *r, fvar_t *v, int *ok, h5l_err_t *err)
{
    *ok = 0;
    uint64_t zero[H5L_MAX_DIMS] = {0}, bs[H5L_MAX_DIMS], bc[H5L_MAX_DIMS];
    int f = h5l_reader_newest_box(r, p->tick, v->objid, zero, bs, bc, err);
    if (f < 0) return f;
    for (uint32_t d = 0; f && d < v->nd; d++)
        if (bc[d] > v->shape[d]) bc[d] = v->shape[d]; /* (a box never passes the shape; guarded all the same) */
    return f ? plan_grid(p, r, v, bc, ok, err) : H5L_OK;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct band {
    uint64_t voff, len, addr; /* bytes [voff, voff + len) of the variable at log offset addr */
} band_t;

/* A contiguous variable in place (format.md 1.1): every index slab one
 * contiguous run of the newest record, the runs making bands of whole
 * rows. On success v becomes chunked [h, shape...] with every chunk in
 * place; 0 means "copy it" (no error). */
static int plan_rechunk(h5l_final_t *p, h5l_reader_t *r, fvar_t *v, const uint64_t *slab, int *ok, h5l_err_t *err)
{
    *ok = 0;
    uint32_t nd = v->nd;
    uint64_t ns[H5L_MAX_DIMS], total = 1, row = v->es;
    for (uint32_t d = 0; d < nd; d++) {
        ns[d] = (v->shape[d] + slab[d] - 1) / slab[d];
        total *= ns[d];
        if (d) row *= v->shape[d];
    }
    band_t *b = NULL;
    size_t nb = 0, cap = 0;
    int rc = H5L_OK, direct = 1;
    for (uint64_t j = 0; j < total && direct && !rc; j++) {
        uint64_t c[H5L_MAX_DIMS], st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS], rem = j;
        for (int d = (int)nd - 1; d >= 0; d--) {
            c[d] = rem % ns[d];
            rem /= ns[d];
        }
        for (uint32_t d = 0; d < nd; d++) {
            st[d] = c[d] * slab[d];
            ct[d] = v->shape[d] - st[d] < slab[d] ? v->shape[d] - st[d] : slab[d];
        }
        h5l_chunk_info_t ci;
        if ((rc = h5l_reader_chunk_info(r, p->tick, v->objid, c, st, ct, &ci, err))) break;
        if (!ci.run) {
            direct = 0;
            break;
        }
        ci.direct_off = ci.run_off;
        /* slabs in row-major order are consecutive ranges of the variable */
        uint64_t voff = h5l_box_offset(nd, (uint64_t[H5L_MAX_DIMS]){0}, v->shape, st) * v->es;
        uint64_t len = h5l_box_nelem(nd, ct) * v->es;
        if (nb && b[nb - 1].addr + b[nb - 1].len == ci.direct_off && b[nb - 1].voff + b[nb - 1].len == voff) {
            b[nb - 1].len += len;
        } else {
            if (h5l_grow_raw((void **)&b, &cap, nb + 1, sizeof *b)) {
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory planning '%s'", p->path, v->path);
                break;
            }
            b[nb++] = (band_t){voff, len, ci.direct_off};
        }
    }
    uint64_t h = 0;
    for (size_t i = 0; !rc && direct && i < nb; i++) {
        if (b[i].voff % row || b[i].len % row) {
            direct = 0; /* a band boundary inside a row */
            break;
        }
        h = gcd(h, b[i].len / row);
    }
    if (rc || !direct || !h) {
        free(b);
        return rc;
    }
    while (h > 1 && h * row >= CHUNK_MAX) { /* the largest divisor of h that makes chunks libhdf5 takes */
        uint64_t q = 2;
        while (h % q) q++;
        h /= q;
    }
    if (h * row >= CHUNK_MAX || h * row < H5L_FINAL_INPLACE_MIN) {
        free(b);
        return H5L_OK;
    }
    uint64_t n = v->shape[0] / h;
    v->blks = malloc(n * sizeof *v->blks);
    v->addr = malloc(n * sizeof *v->addr);
    v->copy = calloc(n, 1);
    if (!v->blks || !v->addr || !v->copy) {
        free(b);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory planning '%s'", p->path, v->path);
    }
    size_t k = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t voff = i * h * row;
        while (b[k].voff + b[k].len <= voff) k++;
        v->blks[i] = i;
        v->addr[i] = b[k].addr + (voff - b[k].voff);
    }
    v->n = n;
    v->chunk[0] = h;
    for (uint32_t d = 1; d < nd; d++) v->chunk[d] = v->shape[d];
    v->rechunked = 1;
    *ok = 1;
    free(b);
    return H5L_OK;
}

static size_t window_env(void)
{
    const char *e = getenv("H5L_FINALIZE_WINDOW");
    if (e && *e) {
        char *end;
        unsigned long long w = strtoull(e, &end, 10);
        if (*end == 0 && w >= ((unsigned long long)1 << 20)) return (size_t)w;
    }
    return H5L_FINAL_WINDOW;
}

/* ------------------------------------------------------------------ */
/* tiles                                                               */


/* Tiles of v's rows [r0, r1) of dimension 0, in order. */
static int tiles_rows(fvar_t *v, size_t window, uint64_t r0, uint64_t r1, tile_fn fn, void *ctx)
{
    uint32_t nd = v->nd;
    tile_t tl;
    uint64_t unit[H5L_MAX_DIMS + 1];
    unit[nd] = v->es;
    for (int d = (int)nd - 1; d >= 0; d--) unit[d] = unit[d + 1] * (d + 1 < (int)nd ? v->shape[d + 1] : 1);
    /* unit[d]: bytes of one index of dimension d with the dimensions after whole */
    uint32_t t = 0;
    while (t + 1 < nd && unit[t] > window) t++;
    uint64_t m = unit[t] > window ? 1 : window / unit[t];
    uint64_t ch = v->kind == FV_CHUNKED ? v->chunk[t] : 1;
    if (m >= ch) m = m / ch * ch; /* whole chunks along t */
    /* the dimensions before t are walked index by index */
    uint64_t idx[H5L_MAX_DIMS] = {0};
    idx[0] = r0;
    for (;;) {
        uint64_t lo = t == 0 ? r0 : 0, hi = t == 0 ? r1 : v->shape[t];
        for (uint32_t d = 0; d < nd; d++) {
            tl.start[d] = d < t ? idx[d] : 0;
            tl.count[d] = d < t ? 1 : v->shape[d];
        }
        tl.t = t;
        for (uint64_t a = lo; a < hi;) {
            /* along t, tiles start at multiples of m (chunk-aligned when m is) */
            uint64_t b = (a / m + 1) * m;
            if (b > hi) b = hi;
            tl.start[t] = a;
            tl.count[t] = b - a;
            int rc = fn(ctx, v, &tl, (b - a) * unit[t]);
            if (rc) return rc;
            a = b;
        }
        if (t == 0) return 0;
        int d = (int)t - 1;
        for (; d >= 0; d--) {
            uint64_t end = d == 0 ? r1 : v->shape[d], beg = d == 0 ? r0 : 0;
            if (++idx[d] < end) break;
            idx[d] = beg;
        }
        if (d < 0) return 0;
    }
}

/* Every tile of v's copies, in order. A contiguous variable: its rows.
 * A chunked one: when its copied chunks fill at least half of the chunk
 * rows they lie in, those rows (runs of chunk rows); else each copied
 * chunk alone (a sparse variable: tiles over its rows would read and fill
 * what nobody wrote). */
static int var_tiles(fvar_t *v, size_t window, tile_fn fn, void *ctx)
{
    if (v->kind == FV_CONTIG) {
        if (v->nd == 0) {
            tile_t tl = {0};
            return fn(ctx, v, &tl, v->es);
        }
        return tiles_rows(v, window, 0, v->shape[0], fn, ctx);
    }
    if (v->kind != FV_CHUNKED || !v->ncopy) return 0;
    uint64_t per_row = v->n ? v->nblk[0] ? v->S : 0 : 0, rows = 0, last = UINT64_MAX;
    for (uint32_t d = 1; d < v->nd; d++) per_row *= v->nblk[d];
    for (uint64_t i = 0; i < v->n; i++) {
        if (!v->copy[i]) continue;
        uint64_t cr = v->blks[i];
        for (uint32_t d = 1; d < v->nd; d++) cr /= v->nblk[d];
        if (cr != last) rows++;
        last = cr;
    }
    int dense = 2 * v->ncopy * v->S >= rows * per_row;
    if (dense) {
        uint64_t run0 = UINT64_MAX, prev = UINT64_MAX;
        for (uint64_t i = 0; i <= v->n; i++) {
            uint64_t cr = UINT64_MAX;
            if (i < v->n) {
                if (!v->copy[i]) continue;
                cr = v->blks[i];
                for (uint32_t d = 1; d < v->nd; d++) cr /= v->nblk[d];
                if (cr == prev) continue;
                if (run0 != UINT64_MAX && cr == prev + 1) {
                    prev = cr;
                    continue;
                }
            }
            if (run0 != UINT64_MAX) {
                uint64_t r0 = run0 * v->chunk[0], r1 = (prev + 1) * v->chunk[0];
                if (r1 > v->shape[0]) r1 = v->shape[0];
                int rc = tiles_rows(v, window, r0, r1, fn, ctx);
                if (rc) return rc;
            }
            run0 = prev = cr;
        }
        return 0;
    }
    for (uint64_t i = 0; i < v->n; i++) {
        if (!v->copy[i]) continue;
        tile_t tl;
        uint64_t c[H5L_MAX_DIMS];
        h5l_fin_blk_coord(v, v->blks[i], c);
        tl.t = v->nd - 1;
        for (uint32_t d = 0; d < v->nd; d++) {
            tl.start[d] = c[d] * v->chunk[d];
            tl.count[d] = v->shape[d] - tl.start[d] < v->chunk[d] ? v->shape[d] - tl.start[d] : v->chunk[d];
        }
        tl.t = UINT32_MAX; /* one chunk: written whole, padded */
        int rc = fn(ctx, v, &tl, h5l_box_nelem(v->nd, tl.count) * v->es);
        if (rc) return rc;
    }
    return 0;
}

int h5l_fin_all_tiles(h5l_final_t *p, tile_fn fn, void *ctx)
{
    for (size_t i = 0; i < p->nv; i++) {
        int rc = var_tiles(&p->v[i], p->window, fn, ctx);
        if (rc) return rc;
    }
    return 0;
}

int h5l_fin_count_tile(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes)
{
    (void)v;
    (void)tl;
    uint64_t *c = ctx;
    c[0]++;
    c[1] += bytes;
    return 0;
}

/* ------------------------------------------------------------------ */
/* planning                                                            */

int h5l_final_plan(h5l_reader_t *r, uint64_t tick, h5l_final_t **out, h5l_err_t *err)
{
    *out = NULL;
    h5l_final_t *p = calloc(1, sizeof *p);
    if (!p) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    p->tick = tick;
    p->window = window_env();
    if (!(p->path = strdup(h5l_reader_path(r)))) {
        free(p);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", h5l_reader_path(r));
    }
    int rc = H5L_OK;
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    size_t nv = 0;
    for (size_t i = 1; i < s->nobjs; i++) nv += s->objs[i].kind == H5L_OBJ_VAR && s->objs[i].tick <= tick;
    p->v = calloc(nv ? nv : 1, sizeof *p->v);
    if (!p->v) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    uint64_t *slabs = rc ? NULL : calloc((nv ? nv : 1) * H5L_MAX_DIMS, sizeof *slabs);
    if (!rc && !slabs) rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    for (size_t i = 1; !rc && i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        if (o->kind != H5L_OBJ_VAR || o->tick > tick) continue;
        fvar_t *v = &p->v[p->nv++];
        v->objid = (uint32_t)i;
        v->nd = o->ndims;
        v->es = o->type.size;
        if (!(v->path = strdup(o->path))) {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
            break;
        }
        h5l_schema_shape(s, (uint32_t)i, tick, v->shape);
        int empty = 0;
        for (uint32_t d = 0; d < v->nd; d++) empty |= v->shape[d] == 0;
        memcpy(v->chunk, o->chunk, v->nd * sizeof *o->chunk);
        memcpy(slabs + (p->nv - 1) * H5L_MAX_DIMS, o->chunk, v->nd * sizeof *o->chunk);
        v->kind = empty ? FV_NONE : o->chunked && v->nd ? FV_CHUNKED : FV_CONTIG;
        for (uint32_t d = 0; d < v->nd; d++) v->nblk[d] = (v->shape[d] + v->chunk[d] - 1) / v->chunk[d];
        if (v->kind == FV_CHUNKED && h5l_reader_chunks(r, tick, v->objid, add_blk, v))
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    }
    h5l_reader_unlock(r);
    /* (the reader's lock is not held across chunk_info: it takes it) */
    for (size_t i = 0; !rc && i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (v->kind == FV_CONTIG && v->nd) {
            int ok = 0;
            rc = plan_boxes(p, r, v, &ok, err);
            if (!rc && !ok) rc = plan_rechunk(p, r, v, slabs + i * H5L_MAX_DIMS, &ok, err);
            if (!rc && ok) v->kind = FV_CHUNKED;
        } else if (v->kind == FV_CHUNKED) {
            rc = plan_chunks(p, r, v, err);
        }
        if (rc) break;
        uint64_t S = v->es;
        for (uint32_t d = 0; d < v->nd; d++) {
            v->nblk[d] = (v->shape[d] + v->chunk[d] - 1) / v->chunk[d];
            S *= v->chunk[d];
        }
        v->S = v->kind == FV_CHUNKED ? S : 0;
    }
    free(slabs);
    /* fin.K: the copies of each variable, then the index nodes of each */
    uint64_t at = 0;
    for (size_t i = 0; !rc && i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        p->st.vars++;
        if (v->kind == FV_CONTIG) {
            p->st.contig_copied++;
            p->st.bytes_copied += (v->nd ? h5l_box_nelem(v->nd, v->shape) : 1) * v->es;
        }
        if (v->kind != FV_CHUNKED) continue;
        p->st.rechunked += v->rechunked;
        at = align8(at);
        v->copy_off = at;
        at += v->ncopy * v->S;
        p->st.chunks_copied += v->ncopy;
        p->st.chunks_inplace += v->n - v->ncopy;
        p->st.bytes_copied += v->ncopy * v->S;
        p->st.bytes_inplace += (v->n - v->ncopy) * v->S;
    }
    for (size_t i = 0; !rc && i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (v->kind != FV_CHUNKED || !v->n) continue;
        int b = h5l_bt_init(&v->bt, v->nd, v->nblk, v->chunk, v->es, TWO_K, v->blks, v->n);
        if (b) {
            rc = h5l_err_set(err, b, "%s: cannot index the %llu chunks of '%s'", p->path, (unsigned long long)v->n,
                             v->path);
            break;
        }
        v->has_bt = 1;
        at = align8(at);
        v->node_off = at;
        v->node_bytes = v->bt.node_size + v->bt.nodes_len;
        at += v->node_bytes;
    }
    p->fin_bytes = at;
    p->st.fin_bytes = at;
    uint64_t c[2] = {0, 0};
    if (!rc) h5l_fin_all_tiles(p, h5l_fin_count_tile, c);
    p->st.tiles = c[0];
    if (!rc && !(p->addrs = calloc(1 + p->nv, sizeof *p->addrs)))
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    if (rc) {
        h5l_final_free(p);
        return rc;
    }
    *out = p;
    return H5L_OK;
}

uint64_t h5l_final_digest(const h5l_final_t *p)
{
    XXH3_state_t *x = XXH3_createState();
    if (!x) return 0;
    XXH3_64bits_reset(x);
    XXH3_64bits_update(x, &p->tick, sizeof p->tick);
    XXH3_64bits_update(x, &p->fin_bytes, sizeof p->fin_bytes);
    XXH3_64bits_update(x, &p->window, sizeof p->window);
    for (size_t i = 0; i < p->nv; i++) {
        const fvar_t *v = &p->v[i];
        uint64_t h[6] = {v->objid, (uint64_t)v->kind, v->n, v->ncopy, v->copy_off, v->node_off};
        XXH3_64bits_update(x, h, sizeof h);
        XXH3_64bits_update(x, v->chunk, v->nd * sizeof *v->chunk);
        if (v->n) {
            XXH3_64bits_update(x, v->blks, v->n * sizeof *v->blks);
            XXH3_64bits_update(x, v->addr, v->n * sizeof *v->addr);
        }
    }
    uint64_t d = XXH3_64bits_digest(x);
    XXH3_freeState(x);
    return d;
}

uint64_t h5l_final_room(const h5l_final_t *p)
{
    uint64_t n = p->fin_bytes;
    for (size_t i = 0; i < p->nv; i++)
        if (p->v[i].kind == FV_CONTIG)
            n += (p->v[i].nd ? h5l_box_nelem(p->v[i].nd, p->v[i].shape) : 1) * p->v[i].es;
    return n;
}

void h5l_final_stats(const h5l_final_t *p, h5l_final_stats_t *st) { *st = p->st; }

const char *h5l_final_name(const h5l_final_t *p) { return p->fin_name; }

void h5l_final_free(h5l_final_t *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        free(v->path);
        free(v->blks);
        free(v->addr);
        free(v->copy);
        if (v->has_bt) h5l_bt_free(&v->bt);
    }
    free(p->v);
    free(p->addrs);
    free(p->path);
    free(p);
}

/* ------------------------------------------------------------------ */
/* building (the first process)                                        */

typedef struct bctx {
    h5l_final_t *p;
    fvar_t **of; /* per object id: its variable, or NULL */
    h5l_err_t *err;
} bctx_t;

static int on_var(void *ctx, uint32_t objid, hid_t ds)
{
    bctx_t *b = ctx;
    fvar_t *v = b->of[objid];
    if (ds < 0 || !v) return 0;
    H5O_info_t oi;
    if (H5Oget_info2(ds, &oi, H5O_INFO_BASIC) < 0) return h5l_err_set(b->err, H5L_EHDF5, "cannot look at it");
    v->oh = oi.addr;
    if (v->kind == FV_CONTIG) {
        haddr_t a = H5Dget_offset(ds);
        if (a == HADDR_UNDEF) return h5l_err_set(b->err, H5L_EHDF5, "no storage was allocated for it");
        v->contig_addr = a;
    }
    return 0;
}

/* The copied chunks' places, once fin.K is placed. */
static void place(h5l_final_t *p)
{
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        for (uint64_t k = 0; v->kind == FV_CHUNKED && k < v->n; k++)
            if (v->copy[k]) v->addr[k] = p->fin_base + v->copy_off + v->addr[k] * v->S;
    }
}

int h5l_final_build(h5l_final_t *p, hid_t file, h5l_reader_t *r, h5l_final_alloc_fn alloc, void *actx,
                    h5l_err_t *err)
{
    hid_t fcpl = H5Fget_create_plist(file);
    unsigned ik = 0;
    int ok = fcpl >= 0 && H5Pget_istore_k(fcpl, &ik) >= 0;
    if (fcpl >= 0) H5Pclose(fcpl);
    if (!ok || 2 * ik != TWO_K)
        return h5l_err_set(err, H5L_EHDF5, "%s: its chunk B-trees hold %u children a node, not %u", p->path, 2 * ik,
                           TWO_K);
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    size_t no = s->nobjs;
    bctx_t b = {p, calloc(no ? no : 1, sizeof *b.of), err};
    const uint64_t **rechunk = calloc(no ? no : 1, sizeof *rechunk);
    int rc = b.of && rechunk ? H5L_OK : h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    for (size_t i = 0; !rc && i < p->nv; i++) {
        b.of[p->v[i].objid] = &p->v[i];
        if (p->v[i].rechunked) rechunk[p->v[i].objid] = p->v[i].chunk;
    }
    if (!rc) rc = h5l_canon_build_final(file, s, p->tick, H5L_ALLOC_CHUNKS, rechunk, on_var, &b, err);
    h5l_reader_unlock(r);
    free(b.of);
    free(rechunk);
    if (rc) return rc;
    if (p->fin_bytes) {
        for (int k = 1;; k++) {
            snprintf(p->fin_name, sizeof p->fin_name, "fin.%d", k);
            char path[64];
            snprintf(path, sizeof path, "/_h5log/%s", p->fin_name);
            if (H5Lexists(file, path, H5P_DEFAULT) <= 0) break;
        }
        rc = alloc(actx, p->fin_name, p->fin_bytes, &p->fin_base, err);
        if (rc) return rc;
    }
    p->addrs[0] = p->fin_base;
    for (size_t i = 0; i < p->nv; i++) p->addrs[1 + i] = p->v[i].contig_addr;
    place(p);
    return H5L_OK;
}

const uint64_t *h5l_final_addrs(const h5l_final_t *p, size_t *n)
{
    *n = 1 + p->nv;
    return p->addrs;
}

int h5l_final_set_addrs(h5l_final_t *p, const uint64_t *w, size_t n, h5l_err_t *err)
{
    if (n != 1 + p->nv) return h5l_err_set(err, H5L_EINVAL, "%s: finalizing: plans differ", p->path);
    memcpy(p->addrs, w, n * sizeof *w);
    p->fin_base = w[0];
    for (size_t i = 0; i < p->nv; i++) p->v[i].contig_addr = w[1 + i];
    place(p);
    return H5L_OK;
}
