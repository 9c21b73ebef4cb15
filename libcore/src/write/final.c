/* final.c — finalizing: plan, build, copy, index, point (see final.h and
 * docs/format.md 1.1).
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
#include "final.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "h5log/box.h"
#include "h5log/btree.h"
#include "h5log/canon.h"
#include "h5log/fdio.h"
#include "h5log/grow.h"

#define TWO_K 64             /* children of a chunk B-tree node: libhdf5's default istore_k 32 */
#define PART_GAP 64          /* bytes between the parts of a cut tile (cut_tile) */
#define WRITE_IOV 256        /* the most parts one write of a cut tile takes */
#define CHUNK_MAX ((uint64_t)1 << 32) /* a chunk must be smaller (libhdf5 keeps its size in 32 bits) */

enum { FV_NONE, FV_CHUNKED, FV_CONTIG };

typedef struct fvar {
    uint32_t objid, nd;
    size_t es;
    char *path;
    int kind;      /* FV_NONE: no element (a dimension of length 0); FV_CHUNKED; FV_CONTIG */
    int rechunked; /* a contiguous variable stored chunked in place */
    uint64_t shape[H5L_MAX_DIMS], chunk[H5L_MAX_DIMS], nblk[H5L_MAX_DIMS];
    uint64_t S;              /* bytes of a full chunk */
    uint64_t *blks, n, bcap; /* chunks holding data: row-major chunk numbers, increasing */
    uint64_t *addr;          /* n: in place, the log offset; copied, its place once the plan is placed */
    uint8_t *copy;           /* n: 1 = copied */
    uint64_t ncopy, copy_off;       /* copies at fin + copy_off, S bytes apart, in chunk order */
    uint64_t node_off, node_bytes;  /* its root, then the nodes below it, at fin + node_off */
    uint64_t contig_addr;           /* FV_CONTIG: where libhdf5 put its storage */
    uint64_t oh;                    /* its object header (the building process) */
    h5l_bt_t bt;
    int has_bt;
    int pointed;                 /* its layout points at the root (h5l_final_point) */
    uint64_t lay_at, ck_at;      /* ... where the address and the checksum lie */
    uint32_t ck_old;             /* ... and the checksum before */
} fvar_t;

struct h5l_final {
    uint64_t tick;
    fvar_t *v;
    size_t nv;
    uint64_t fin_bytes, fin_base; /* fin.K: size, absolute offset once built */
    uint64_t base; /* libhdf5's base address (the user block's size): its addresses count from there */
    size_t window;
    uint64_t *addrs; /* fin_base, then each variable's contig_addr */
    h5l_final_stats_t st;
    char fin_name[32];
    char *path; /* the file's, for messages (its own copy: the reader may be closed first) */
};

static uint64_t align8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

static void blk_coord(const fvar_t *v, uint64_t blk, uint64_t *c)
{
    for (int d = (int)v->nd - 1; d >= 0; d--) {
        c[d] = blk % v->nblk[d];
        blk /= v->nblk[d];
    }
}

static uint64_t coord_blk(const fvar_t *v, const uint64_t *c)
{
    uint64_t b = 0;
    for (uint32_t d = 0; d < v->nd; d++) b = b * v->nblk[d] + c[d];
    return b;
}

static int add_blk(void *ctx, const uint64_t *coord)
{
    fvar_t *v = ctx;
    if (h5l_grow_raw((void **)&v->blks, (size_t *)&v->bcap, (size_t)v->n + 1, sizeof *v->blks)) return H5L_ENOMEM;
    v->blks[v->n++] = coord_blk(v, coord);
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
        blk_coord(v, v->blks[i], c);
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

typedef struct tile {
    uint32_t t;                                     /* dims < t: one index; t: a range; after: whole */
    uint64_t start[H5L_MAX_DIMS], count[H5L_MAX_DIMS]; /* the box */
} tile_t;

typedef int (*tile_fn)(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes);

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
        blk_coord(v, v->blks[i], c);
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

static int all_tiles(h5l_final_t *p, tile_fn fn, void *ctx)
{
    for (size_t i = 0; i < p->nv; i++) {
        int rc = var_tiles(&p->v[i], p->window, fn, ctx);
        if (rc) return rc;
    }
    return 0;
}

static int count_tile(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes)
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
    if (!rc) all_tiles(p, count_tile, c);
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

/* ------------------------------------------------------------------ */
/* copying (every process)                                             */

typedef struct cctx {
    h5l_final_t *p;
    h5l_reader_t *r;
    int fd;
    uint64_t lo, hi, at; /* this process's share of the bytes; where the walk is */
    uint8_t *tile, *out;
    size_t tcap, ocap;
    /* the chunks a tile meets (grid g0 + [0, gn) per dimension): each
     * copied one's part in out, or NULL */
    uint8_t **part;
    size_t pcap;
    h5l_err_t *err;
    struct iovec iov[WRITE_IOV]; /* one write's pieces */
} cctx_t;

static int grow_buf(uint8_t **b, size_t *cap, size_t need, h5l_err_t *err, const char *path)
{
    if (*cap >= need) return H5L_OK;
    uint8_t *n = realloc(*b, need);
    if (!n) return h5l_err_set(err, H5L_ENOMEM, "%s: finalizing: out of memory (%zu bytes)", path, need);
    *b = n;
    *cap = need;
    return H5L_OK;
}

/* The ordinal of chunk blk of v, or UINT64_MAX if it holds no data. */
static uint64_t ord_of(const fvar_t *v, uint64_t blk)
{
    uint64_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (v->blks[mid] < blk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->blks[lo] == blk ? lo : UINT64_MAX;
}

static int pwrite_at(cctx_t *c, const uint8_t *buf, uint64_t n, uint64_t off)
{
    return h5l_fd_write(c->fd, buf, (size_t)n, off, c->p->path, c->err);
}

typedef struct runcp {
    uint8_t *dst;
    const uint8_t *src;
    size_t es;
} runcp_t;

static int runcp_fn(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    runcp_t *c = ctx;
    memcpy(c->dst + dst * c->es, c->src + src * c->es, (size_t)(n * c->es));
    return 0;
}

/* One chunk alone (a sparse variable), assembled in c->tile: written
 * whole, an edge chunk padded with zeros. */
static int copy_chunk(cctx_t *c, const fvar_t *v, const tile_t *tl)
{
    uint64_t c0[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < v->nd; d++) c0[d] = tl->start[d] / v->chunk[d];
    uint64_t o = ord_of(v, coord_blk(v, c0));
    if (o == UINT64_MAX || !v->copy[o]) return H5L_OK;
    const uint8_t *src = c->tile;
    if (memcmp(tl->count, v->chunk, v->nd * sizeof *v->chunk) != 0) {
        int rc = grow_buf(&c->out, &c->ocap, (size_t)v->S, c->err, c->p->path);
        if (rc) return rc;
        memset(c->out, 0, (size_t)v->S);
        runcp_t rc2 = {c->out, c->tile, v->es};
        h5l_box_runs(v->nd, tl->start, tl->count, tl->start, tl->count, tl->start, v->chunk, runcp_fn, &rc2);
        src = c->out;
    }
    return pwrite_at(c, src, v->S, v->addr[o]);
}

/* The part of chunk c (coordinates) a tile meets: its origin o and
 * extent P (the tile's range in dimensions up to t, the whole chunk
 * after, padding included). */
static void part_of(const fvar_t *v, const tile_t *tl, const uint64_t *c, uint64_t *o, uint64_t *P)
{
    for (uint32_t d = 0; d < v->nd; d++) {
        uint64_t cs = c[d] * v->chunk[d];
        if (d <= tl->t) {
            uint64_t te = tl->start[d] + tl->count[d], ce = cs + v->chunk[d];
            o[d] = tl->start[d] > cs ? tl->start[d] : cs;
            P[d] = (te < ce ? te : ce) - o[d];
        } else {
            o[d] = cs;
            P[d] = v->chunk[d];
        }
    }
}

/* A tile of rows, assembled in c->tile: cut into the parts of the chunks
 * it meets (row by row of its last dimension, each row's piece of each
 * chunk to that chunk's part, in order) and each copied chunk's part
 * written where it lies in the chunk: one contiguous piece (format.md
 * 1.1, tiles). */
static int cut_tile(cctx_t *c, const fvar_t *v, const tile_t *tl)
{
    uint32_t nd = v->nd;
    size_t es = v->es;
    uint64_t g0[H5L_MAX_DIMS], gn[H5L_MAX_DIMS], ng = 1;
    for (uint32_t d = 0; d < nd; d++) {
        g0[d] = tl->start[d] / v->chunk[d];
        gn[d] = (tl->start[d] + tl->count[d] - 1) / v->chunk[d] - g0[d] + 1;
        ng *= gn[d];
    }
    /* the tile's rows are the chunks' parts already, back to back: each
     * chunk spans the tile exactly after dimension t, and only t has more
     * than one */
    int direct = 1;
    for (uint32_t d = tl->t + 1; d < nd; d++) direct &= gn[d] == 1 && v->chunk[d] == tl->count[d];
    for (uint32_t d = 0; d < tl->t; d++) direct &= gn[d] == 1;
    if (h5l_grow_raw((void **)&c->part, &c->pcap, (size_t)ng, sizeof *c->part))
        return h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
    /* each copied chunk's part: its place in out (or in the tile) */
    uint64_t total = 0, gi[H5L_MAX_DIMS] = {0};
    uint64_t *ords = NULL;
    int rc = H5L_OK;
    if (!(ords = malloc((size_t)ng * sizeof *ords)))
        return h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
    for (uint64_t g = 0; g < ng; g++) {
        uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
        uint64_t ord = ord_of(v, coord_blk(v, cc));
        ords[g] = ord != UINT64_MAX && v->copy[ord] ? ord : UINT64_MAX;
        part_of(v, tl, cc, o, P);
        uint64_t bytes = h5l_box_nelem(nd, P) * es;
        c->part[g] = (uint8_t *)(uintptr_t)total; /* an offset until out is sized */
        /* parts one cache line apart beyond their bytes: parts of a power
         * of two bytes back to back put every row's pieces in one cache
         * set, and the scatter below, writing a piece to each part in
         * turn, misses on every one of them (z-plane chunks of 1 MiB:
         * 2.3 ms a MiB, 1.0 with the gap) */
        if (ords[g] != UINT64_MAX || direct) total += bytes + (direct ? 0 : PART_GAP);
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
    }
    uint8_t *base = c->tile;
    if (!direct) {
        if ((rc = grow_buf(&c->out, &c->ocap, (size_t)total, c->err, c->p->path))) goto out;
        base = c->out;
    }
    for (uint64_t g = 0; g < ng; g++) c->part[g] = base + (uintptr_t)c->part[g];
    if (!direct) {
        /* padding (an edge chunk after dimension t) reads as zeros */
        memset(gi, 0, sizeof gi);
        for (uint64_t g = 0; g < ng; g++) {
            int pad = 0;
            for (uint32_t d = tl->t + 1; d < nd; d++) pad |= (g0[d] + gi[d] + 1) * v->chunk[d] > v->shape[d];
            if (pad && ords[g] != UINT64_MAX) {
                uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
                for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
                part_of(v, tl, cc, o, P);
                memset(c->part[g], 0, (size_t)(h5l_box_nelem(nd, P) * es));
            }
            for (int d = (int)nd - 1; d >= 0; d--) {
                if (++gi[d] < gn[d]) break;
                gi[d] = 0;
            }
        }
        /* the rows of the tile to the parts (box.h): a part is its chunk
         * from the part's origin on */
        h5l_box_dst_t *cells = malloc((size_t)ng * sizeof *cells);
        if (!cells) {
            rc = h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
            goto out;
        }
        memset(gi, 0, sizeof gi);
        for (uint64_t g = 0; g < ng; g++) {
            uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS], in = 0;
            for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
            part_of(v, tl, cc, o, P);
            for (uint32_t d = 0; d < nd; d++) in = in * v->chunk[d] + (o[d] - cc[d] * v->chunk[d]);
            cells[g].base = ords[g] == UINT64_MAX ? NULL : c->part[g];
            cells[g].shift = in;
            for (int d = (int)nd - 1; d >= 0; d--) {
                if (++gi[d] < gn[d]) break;
                gi[d] = 0;
            }
        }
        h5l_box_scatter(nd, es, tl->start, tl->count, c->tile, v->chunk, cells);
        free(cells);
    }
    /* write each copied chunk's part where it lies, neighbours in the
     * file in one write */
    memset(gi, 0, sizeof gi);
    uint64_t wo = 0, wn = 0; /* a pending write: file offset, bytes (in iov) */
    int niov = 0;
    for (uint64_t g = 0; g < ng && !rc; g++) {
        uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
        if (ords[g] == UINT64_MAX) continue;
        part_of(v, tl, cc, o, P);
        uint64_t in = 0;
        for (uint32_t d = 0; d < nd; d++) in = in * v->chunk[d] + (o[d] - cc[d] * v->chunk[d]);
        uint64_t off = v->addr[ords[g]] + in * es, n = h5l_box_nelem(nd, P) * es;
        if (wn && wo + wn == off && niov < WRITE_IOV) {
            c->iov[niov++] = (struct iovec){c->part[g], (size_t)n};
            wn += n;
            continue;
        }
        if (wn) rc = h5l_fd_writev(c->fd, c->iov, niov, wo, c->p->path, c->err);
        wo = off;
        wn = n;
        niov = 0;
        c->iov[niov++] = (struct iovec){c->part[g], (size_t)n};
    }
    if (!rc && wn) rc = h5l_fd_writev(c->fd, c->iov, niov, wo, c->p->path, c->err);
out:
    free(ords);
    return rc;
}

/* One tile of the walk: this process's if it starts inside its share. */
static int copy_tile(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes)
{
    cctx_t *c = ctx;
    uint64_t at = c->at;
    c->at += bytes;
    if (at < c->lo || at >= c->hi) return 0;
    int rc = grow_buf(&c->tile, &c->tcap, (size_t)(bytes ? bytes : 1), c->err, c->p->path);
    if (!rc) rc = h5l_reader_read(c->r, c->p->tick, v->objid, tl->start, tl->count, c->tile, c->err);
    if (!rc && v->kind == FV_CONTIG) { /* the tile is the dataset's bytes there */
        uint64_t zero[H5L_MAX_DIMS] = {0}, off = v->nd ? h5l_box_offset(v->nd, zero, v->shape, tl->start) : 0;
        rc = pwrite_at(c, c->tile, bytes, v->contig_addr + off * v->es);
    } else if (!rc) {
        rc = tl->t == UINT32_MAX ? copy_chunk(c, v, tl) : cut_tile(c, v, tl);
    }
    if (rc && c->err) { /* which file and variable */
        char m[sizeof c->err->msg];
        size_t pl = strlen(c->p->path);
        const char *why = c->err->msg;
        if (!strncmp(why, c->p->path, pl) && why[pl] == ':' && why[pl + 1] == ' ') why += pl + 2;
        snprintf(m, sizeof m, "%s", why);
        h5l_err_set(c->err, rc, "%s: finalizing '%s': %s", c->p->path, v->path, m);
    }
    return rc;
}

int h5l_final_copy(h5l_final_t *p, h5l_reader_t *r, int fd, int me, int nproc, h5l_err_t *err)
{
    uint64_t tot[2] = {0, 0};
    all_tiles(p, count_tile, tot);
    unsigned __int128 T = tot[1];
    cctx_t c = {.p = p,
                .r = r,
                .fd = fd,
                .lo = (uint64_t)(T * (unsigned)me / (unsigned)nproc),
                .hi = (uint64_t)(T * (unsigned)(me + 1) / (unsigned)nproc),
                .err = err};
    int rc = c.lo < c.hi ? all_tiles(p, copy_tile, &c) : H5L_OK;
    free(c.tile);
    free(c.out);
    free(c.part);
    return rc;
}

/* ------------------------------------------------------------------ */
/* indexes and pointing (the first process)                            */

int h5l_final_index(h5l_final_t *p, hid_t file, int fd, h5l_err_t *err)
{
    /* addresses inside the HDF5 format count from its base (after the
     * user block); the plan's are file offsets */
    hid_t fcpl = H5Fget_create_plist(file);
    hsize_t ub = 0;
    int ok = fcpl >= 0 && H5Pget_userblock(fcpl, &ub) >= 0;
    if (fcpl >= 0) H5Pclose(fcpl);
    if (!ok) return h5l_err_set(err, H5L_EHDF5, "%s: cannot read its user block's size", p->path);
    p->base = ub;
    size_t m = 0, cap = 0, rcap = 0;
    uint8_t *buf = NULL;
    uint64_t *rel = NULL;
    int rc = H5L_OK;
    for (size_t i = 0; i < p->nv && !rc; i++) {
        fvar_t *v = &p->v[i];
        if (!v->has_bt) continue;
        m++;
        h5l_bt_t *bt = &v->bt;
        if ((rc = grow_buf(&buf, &cap, (size_t)v->node_bytes, err, p->path))) break;
        if (h5l_grow_raw((void **)&rel, &rcap, (size_t)v->n, sizeof *rel)) {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
            break;
        }
        for (uint64_t k = 0; k < v->n; k++) rel[k] = v->addr[k] - ub;
        uint64_t root = p->fin_base + v->node_off - ub;
        if (h5l_bt_place(bt, root, root + bt->node_size, 0, 0)) {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
            break;
        }
        h5l_bt_set_addrs(bt, rel);
        h5l_bt_node(bt, bt->root_level, 0, buf);
        for (uint32_t l = 0; l < bt->root_level; l++)
            for (uint64_t j = 0; j < bt->count[l]; j++)
                h5l_bt_node(bt, l, j, buf + bt->node_size * (1 + bt->first[l] + j));
        h5l_bt_set_addrs(bt, NULL);
        rc = h5l_fd_write(fd, buf, (size_t)v->node_bytes, p->fin_base + v->node_off, p->path, err);
        if (rc) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err ? err->msg + (strncmp(err->msg, p->path, strlen(p->path)) ? 0 : strlen(p->path) + 2) : "");
            h5l_err_set(err, rc, "%s: finalizing: writing the chunk index of '%s': %s", p->path, v->path, m);
        }
    }
    free(buf);
    free(rel);
    if (rc || !m) return rc;
    /* /_h5log/fin.K.index: (object header, root) of each */
    uint64_t *w = malloc(2 * m * sizeof *w);
    if (!w) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    size_t k = 0;
    for (size_t i = 0; i < p->nv; i++)
        if (p->v[i].has_bt) {
            w[2 * k] = p->v[i].oh + p->base; /* (file offsets) */
            w[2 * k + 1] = p->v[i].bt.root + p->base;
            k++;
        }
    char path[64];
    snprintf(path, sizeof path, "/_h5log/%s.index", p->fin_name);
    hsize_t dims[2] = {m, 2};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = sp < 0 ? -1 : H5Dcreate2(file, path, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = ds < 0 || H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) < 0;
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    free(w);
    return bad ? h5l_err_set(err, H5L_EHDF5, "%s: cannot write %s", p->path, path) : H5L_OK;
}

typedef struct rdctx {
    int fd;
    uint64_t base; /* libhdf5's addresses are off + base in the file */
    int bad;
} rdctx_t;

static void read_file(const void *ctx, uint64_t off, size_t n, void *buf)
{
    rdctx_t *c = (rdctx_t *)ctx;
    size_t got = 0;
    if (h5l_fd_read(c->fd, buf, n, off + c->base, &got, "", NULL) || got != n) {
        memset((uint8_t *)buf + got, 0, n - got);
        c->bad = 1;
    }
}

/* Does libhdf5 find v's first and last chunks where the plan put them? */
static int check_var(const h5l_final_t *p, hid_t f, const fvar_t *v, h5l_err_t *err)
{
    hid_t ds = H5Dopen2(f, v->path, H5P_DEFAULT);
    if (ds < 0) return h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot open '%s' again", p->path, v->path);
    int rc = H5L_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        uint64_t o = k ? v->n - 1 : 0, c[H5L_MAX_DIMS];
        hsize_t off[H5L_MAX_DIMS];
        blk_coord(v, v->blks[o], c);
        for (uint32_t d = 0; d < v->nd; d++) off[d] = c[d] * v->chunk[d];
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot read the chunk index of '%s' again",
                             p->path, v->path);
        else if (addr + p->base != v->addr[o] || size != v->S)
            rc = h5l_err_set(err, H5L_EHDF5,
                             "%s: finalizing: libhdf5 finds chunk %llu of '%s' at %llu (%llu bytes), not at %llu: "
                             "its layout is not the one this version writes",
                             p->path, (unsigned long long)o, v->path, (unsigned long long)(addr + p->base),
                             (unsigned long long)size, (unsigned long long)v->addr[o]);
    }
    H5Dclose(ds);
    return rc;
}

#define CHECK_VARS 16

int h5l_final_point(h5l_final_t *p, const char *path, int fd, h5l_err_t *err)
{
    rdctx_t rc0 = {fd, p->base, 0};
    size_t m = 0;
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (!v->has_bt) continue;
        m++;
        v->bt.oh = v->oh;
        v->bt.lay_at = 0;
        int rc = h5l_bt_point_layout(&v->bt, read_file, &rc0);
        if (rc || rc0.bad)
            return h5l_err_set(err, rc0.bad ? H5L_EIO : rc,
                               "%s: finalizing: the object header of '%s' is not what this version expects%s",
                               path, v->path, rc0.bad ? " (cannot read it)" : "");
        uint8_t old[4], f[8];
        read_file(&rc0, v->bt.ck_at, 4, old); /* (relative: read_file adds the base) */
        if (rc0.bad) return h5l_err_set(err, H5L_EIO, "%s: finalizing: cannot read '%s''s header", path, v->path);
        v->ck_old = (uint32_t)old[0] | (uint32_t)old[1] << 8 | (uint32_t)old[2] << 16 | (uint32_t)old[3] << 24;
        v->lay_at = v->bt.lay_at + p->base;
        v->ck_at = v->bt.ck_at + p->base;
        for (int i2 = 0; i2 < 8; i2++) f[i2] = (uint8_t)(v->bt.root >> (8 * i2));
        uint8_t ck[4];
        for (int i2 = 0; i2 < 4; i2++) ck[i2] = (uint8_t)(v->bt.ck >> (8 * i2));
        v->pointed = 1; /* (from here on, unpoint writes it back even if half of it was written) */
        if ((rc = h5l_fd_write(fd, f, 8, v->lay_at, path, err)) || (rc = h5l_fd_write(fd, ck, 4, v->ck_at, path, err))) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err ? err->msg + (strncmp(err->msg, path, strlen(path)) ? 0 : strlen(path) + 2) : "");
            return h5l_err_set(err, rc, "%s: finalizing: pointing the layout of '%s' at its index: %s", path, v->path, m);
        }
    }
    if (!m) return H5L_OK;
    /* libhdf5 reads the file as the plan says: a sample of the datasets */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot open it again", path);
    int rc = H5L_OK;
    size_t k = 0, step = m > CHECK_VARS ? m / CHECK_VARS : 1;
    for (size_t i = 0; i < p->nv && !rc; i++) {
        if (!p->v[i].has_bt) continue;
        if (k++ % step == 0 || k == m) rc = check_var(p, f, &p->v[i], err);
    }
    if (H5Fclose(f) < 0 && !rc) rc = h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot close it", path);
    return rc;
}

int h5l_final_unpoint(h5l_final_t *p, int fd, h5l_err_t *err)
{
    int rc = H5L_OK;
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (!v->pointed) continue;
        uint8_t f[8], ck[4];
        memset(f, 0xff, 8);
        for (int i2 = 0; i2 < 4; i2++) ck[i2] = (uint8_t)(v->ck_old >> (8 * i2));
        int r1 = h5l_fd_write(fd, f, 8, v->lay_at, p->path, err);
        int r2 = r1 ? r1 : h5l_fd_write(fd, ck, 4, v->ck_at, p->path, err);
        if (r2 && !rc) rc = r2;
        if (!r2) v->pointed = 0;
    }
    return rc;
}
