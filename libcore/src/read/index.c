/* index.c — chunk-bucketed record index (see index.h).
 *
 * Per variable: a hash table (open addressing, linear probing, load <= 1/2)
 * from index-chunk coordinates to a bucket, a growable array of the records
 * touching that chunk in insertion (= sequence) order. A box touching at
 * most NARROW_MAX chunks is listed in each of them (the common case: a
 * lookup is one probe and its answer is the bucket itself).
 *
 * A wider box is not: a record of a few bytes whose box covers millions of
 * chunks (legal: chunk size 1, data in a large or sparse file) would cost a
 * bucket entry per chunk — gigabytes, and minutes to insert. Such a box goes
 * to a coarse grid instead: cells of 2^shift[d] chunks in dimension d, the
 * shifts chosen (doubling the dimension the box spans most cells of) until
 * the box touches at most CELLS_MAX cells; a thin box is coarsened only
 * along its long dimensions, so its cells hold few others. Each variable has
 * at most GRIDS_MAX coarse grids, one per shift vector met; when they are
 * all taken a box goes to the finest existing grid at least as coarse as it
 * needs, at worst the catch-all grid of one cell. Every box thus costs at
 * most max(NARROW_MAX, CELLS_MAX) entries, whatever it claims.
 *
 * A lookup takes the chunk's bucket and, from each coarse grid, the cell
 * holding the chunk, keeps the entries whose box really touches the chunk,
 * and merges everything by insertion serial (records in sequence order, each
 * once) into the caller's scratch. Records and their boxes live in a bump
 * arena of 1 MiB blocks, so a record costs its bytes and no malloc of its
 * own.
 *
 * The column: chunks whose coordinates past the first are all 0 (a time
 * series; netCDF's one-row chunks of a [time, ...] variable whose other
 * dimensions fit in one chunk) are kept, while they come densely, in an
 * array by their first coordinate instead of the hash: a slot holds the
 * chunk's only record, or (low bit set) its bucket once a second record
 * comes. A live file's row a tick then costs its record and 8 bytes, not
 * also a bucket (48) and hash slots (16-32): about 110 bytes a record
 * instead of 160, the most of a daemon's memory when it follows 10,000
 * variables. A chunk that comes too far past the column's end (more than
 * twice its chunks plus 64) goes to the hash; each chunk is in exactly one
 * of the two, and a lookup looks in the column first. */
#include "index.h"
#include "h5log/grow.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "h5log_common.h"

#define ARENA_BLOCK (1u << 20)
#define NARROW_MAX 8 /* a box touching at most this many chunks is listed in each */
#define CELLS_LOG 3
#define CELLS_MAX (1u << CELLS_LOG) /* a wider box touches at most this many cells of its grid */
#define GRIDS_MAX 16                /* coarse grids per variable, the catch-all included */

/* An entry of a coarse grid: a record and which of its boxes. */
typedef struct went {
    h5l_rec_t *rec;
    uint32_t box;
} went_t;

/* Buckets live in the arena; their first entries (two records, or one
 * coarse entry) inline: most chunks of a long log of rows are touched by
 * one record, and a calloc for the bucket and another for its list cost a
 * chunk 96 bytes and two mallocs. */
typedef struct bucket {
    void *ents; /* h5l_rec_t * (the fine grid) or went_t (coarse grids): inl, or malloc'd */
    uint32_t n, cap;
    union {
        h5l_rec_t *rec[2];
        went_t went;
    } inl;
    uint64_t coord[]; /* ndims */
} bucket_t;

typedef struct grid {
    uint8_t shift[H5L_MAX_DIMS]; /* cell = chunk coordinate >> shift; 64: the whole dimension */
    size_t esize;
    bucket_t **slots;
    size_t nslots, nused;
} grid_t;

typedef struct varidx {
    uint32_t ndims;
    grid_t fine;
    h5l_rec_t **col; /* the column (above): ccol slots, ncol chunks in them */
    size_t ccol, ncol;
    uint64_t colend; /* 1 + the largest first coordinate in the column (ncol == colend: a prefix) */
    grid_t *coarse[GRIDS_MAX];
    uint32_t ncoarse;
    uint64_t chunk[]; /* ndims (a file of 20,000 variables: 256 bytes each were 5 MB) */
} varidx_t;

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk_t;

struct h5l_index {
    varidx_t **vars;  /* by objid; NULL if not a variable */
    uint64_t *births; /* distinct ticks at which a chunk got its first record, ascending */
    size_t nbirths, capbirths;
    size_t nvars;
    arena_blk_t *arena;
    uint64_t nrec;
    size_t mem;
};

h5l_index_t *h5l_index_new(void) { return calloc(1, sizeof(h5l_index_t)); }

static void grid_free(grid_t *g)
{
    for (size_t s = 0; s < g->nslots; s++) {
        if (g->slots[s] && g->slots[s]->ents != &g->slots[s]->inl) free(g->slots[s]->ents);
    } /* the buckets themselves are the arena's */
    free(g->slots);
}

void h5l_index_free(h5l_index_t *x)
{
    if (!x) return;
    for (size_t i = 0; i < x->nvars; i++) {
        varidx_t *v = x->vars[i];
        if (!v) continue;
        grid_free(&v->fine);
        for (size_t c = 0; c < v->ccol; c++) {
            uintptr_t t = (uintptr_t)v->col[c];
            bucket_t *b = (t & 1) ? (bucket_t *)(t - 1) : NULL;
            if (b && b->ents != &b->inl) free(b->ents);
        }
        free(v->col);
        for (uint32_t k = 0; k < v->ncoarse; k++) {
            grid_free(v->coarse[k]);
            free(v->coarse[k]);
        }
        free(v);
    }
    free(x->vars);
    free(x->births);
    while (x->arena) {
        arena_blk_t *n = x->arena->next;
        free(x->arena);
        x->arena = n;
    }
    free(x);
}

void h5l_index_scratch_free(h5l_index_scratch_t *s)
{
    if (!s) return;
    free(s->p);
    s->p = NULL;
    s->cap = 0;
}

static void *arena_alloc(h5l_index_t *x, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!x->arena || x->arena->cap - x->arena->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        arena_blk_t *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = x->arena;
        b->used = 0;
        b->cap = cap;
        x->arena = b;
        x->mem += sizeof *b + cap;
    }
    void *p = x->arena->data + x->arena->used;
    x->arena->used += n;
    return p;
}

int h5l_index_add_var(h5l_index_t *x, uint32_t objid, uint32_t ndims, const uint64_t *chunk)
{
    if (ndims > H5L_MAX_DIMS) return H5L_EINVAL;
    for (uint32_t i = 0; i < ndims; i++)
        if (!chunk[i]) return H5L_EINVAL;
    if (h5l_grow((void **)&x->vars, &x->nvars, (size_t)objid + 1, sizeof *x->vars)) return H5L_ENOMEM;
    if (x->vars[objid]) /* the same again: a tick that failed (out of memory) after adding it, loaded again */
        return x->vars[objid]->ndims == ndims && !memcmp(x->vars[objid]->chunk, chunk, ndims * sizeof *chunk)
                   ? H5L_OK
                   : H5L_EINVAL;
    varidx_t *v = calloc(1, sizeof *v + ndims * sizeof *chunk);
    if (!v) return H5L_ENOMEM;
    v->ndims = ndims;
    memcpy(v->chunk, chunk, ndims * sizeof *chunk);
    v->fine.esize = sizeof(h5l_rec_t *);
    x->vars[objid] = v;
    x->mem += sizeof *v + ndims * sizeof *chunk;
    return H5L_OK;
}

const uint64_t *h5l_index_chunk_shape(const h5l_index_t *x, uint32_t objid)
{
    return objid < x->nvars && x->vars[objid] ? x->vars[objid]->chunk : NULL;
}

h5l_rec_t *h5l_index_new_rec(h5l_index_t *x, uint32_t nboxes, uint32_t ndims)
{
    size_t nb = (size_t)nboxes * ndims * 2 * sizeof(uint64_t);
    h5l_rec_t *r = arena_alloc(x, sizeof *r + nb);
    if (!r) return NULL;
    memset(r, 0, sizeof *r);
    r->nboxes = nboxes;
    r->ndims = ndims;
    r->boxes = (uint64_t *)(r + 1);
    return r;
}

static uint64_t coord_hash(const uint64_t *c, uint32_t nd) { return XXH3_64bits(c, nd * sizeof *c); }

/* Slot of coord in g: the bucket's slot, or the empty slot where it goes. */
static size_t find_slot(const grid_t *g, uint32_t nd, const uint64_t *coord)
{
    size_t mask = g->nslots - 1;
    size_t i = (size_t)coord_hash(coord, nd) & mask;
    while (g->slots[i] && memcmp(g->slots[i]->coord, coord, nd * sizeof *coord) != 0) i = (i + 1) & mask;
    return i;
}

static const bucket_t *find_bucket(const grid_t *g, uint32_t nd, const uint64_t *coord)
{
    return g->nslots ? g->slots[find_slot(g, nd, coord)] : NULL;
}

/* Slots in use past which g's table doubles: between a half and three
 * quarters of them, the same for a grid all its life but spread over grids
 * (by its address). Variables written alike (a row each per tick) fill
 * their tables alike: at one half each, 10,000 of them doubled in the same
 * tick, every power of two, and loading that tick took 150 ms at 256
 * chunks, half a second at 1024 (fresh pages for every table at once) —
 * the newest tick shown that much later. Spread, a few hundred a tick. */
static size_t grow_at(const grid_t *g)
{
    size_t spread = (size_t)(((uint64_t)(uintptr_t)g * 0x9E3779B97F4A7C15ull) >> 56); /* 0..255 */
    return g->nslots / 2 + (g->nslots / 4) * spread / 256;
}

static int rehash(h5l_index_t *x, grid_t *g, uint32_t nd)
{
    /* from 4: most variables of a file of thousands hold a chunk or two
     * (64 slots a variable were 10 MB of fresh pages at 20,000) */
    size_t n = g->nslots ? g->nslots * 2 : 4;
    bucket_t **old = g->slots;
    size_t oldn = g->nslots;
    g->slots = calloc(n, sizeof *g->slots);
    if (!g->slots) {
        g->slots = old;
        return H5L_ENOMEM;
    }
    g->nslots = n;
    for (size_t i = 0; i < oldn; i++)
        if (old[i]) g->slots[find_slot(g, nd, old[i]->coord)] = old[i];
    free(old);
    x->mem += (n - oldn) * sizeof *g->slots;
    return H5L_OK;
}

/* The set of chunks with data may have grown at tick (inserts come in
 * tick order): h5l_index_chunks_version answers it from then on. */
static int note_birth(h5l_index_t *x, uint64_t tick)
{
    if (x->nbirths && x->births[x->nbirths - 1] == tick) return H5L_OK;
    if (x->nbirths == x->capbirths) {
        size_t cap = x->capbirths ? x->capbirths * 2 : 64;
        uint64_t *t = realloc(x->births, cap * sizeof *t);
        if (!t) return H5L_ENOMEM;
        x->mem += (cap - x->capbirths) * sizeof *t;
        x->births = t;
        x->capbirths = cap;
    }
    x->births[x->nbirths++] = tick;
    return H5L_OK;
}

/* Append entry e (esize bytes) to bucket b; a fine grid's record already
 * last in it (another of its boxes) is not listed twice. */
static int bucket_push(h5l_index_t *x, bucket_t *b, size_t esize, const void *e)
{
    if (esize == sizeof(h5l_rec_t *) && b->n && ((h5l_rec_t **)b->ents)[b->n - 1] == *(h5l_rec_t *const *)e)
        return H5L_OK;
    if (b->n == b->cap) {
        uint32_t cap = b->cap * 2;
        int inl = b->ents == &b->inl;
        void *r = realloc(inl ? NULL : b->ents, cap * esize);
        if (!r) return H5L_ENOMEM;
        if (inl) memcpy(r, &b->inl, b->n * esize);
        x->mem += (inl ? cap : cap - b->cap) * esize;
        b->ents = r;
        b->cap = cap;
    }
    memcpy((char *)b->ents + (size_t)b->n * esize, e, esize);
    b->n++;
    return H5L_OK;
}

/* Append the entry e (g->esize bytes) to the bucket of coord. For the fine
 * grid, a record already last in the bucket (another of its boxes) is not
 * listed twice. */
static int bucket_add(h5l_index_t *x, grid_t *g, uint32_t nd, const uint64_t *coord, const void *e)
{
    if (g->nused + 1 > grow_at(g) && rehash(x, g, nd)) return H5L_ENOMEM;
    size_t i = find_slot(g, nd, coord);
    bucket_t *b = g->slots[i];
    if (!b) {
        b = arena_alloc(x, sizeof *b + nd * sizeof *coord);
        if (!b) return H5L_ENOMEM;
        b->ents = &b->inl;
        b->n = 0;
        b->cap = (uint32_t)(sizeof b->inl / g->esize);
        memcpy(b->coord, coord, nd * sizeof *coord);
        /* a chunk met for the first time has data from this record's
         * tick on (went_t starts with its record too) */
        if (note_birth(x, (*(h5l_rec_t *const *)e)->tick)) return H5L_ENOMEM; /* b stays in the arena, unlisted */
        g->slots[i] = b;
        g->nused++;
    } else if (g->esize != sizeof(h5l_rec_t *) && note_birth(x, (*(h5l_rec_t *const *)e)->tick)) {
        /* a wide box in a coarse cell met before may still touch chunks no
         * record touched: the set may have grown too (its version was
         * left as it was, and a live skeleton kept without the chunks) */
        return H5L_ENOMEM;
    }
    return bucket_push(x, b, g->esize, e);
}

/* Chunk coordinates [lo, hi] a box touches in one dimension. */
static void chunk_range(uint64_t s, uint64_t c, uint64_t ch, uint64_t *lo, uint64_t *hi)
{
    uint64_t last = c - 1 > UINT64_MAX - s ? UINT64_MAX : s + (c - 1);
    *lo = s / ch;
    *hi = last / ch;
}

/* Cells of 2^sh chunks the chunk range [lo, hi] touches. */
static uint64_t cell_span(uint64_t lo, uint64_t hi, unsigned sh) { return sh >= 64 ? 1 : (hi >> sh) - (lo >> sh) + 1; }

static uint64_t cell_of(uint64_t c, unsigned sh) { return sh >= 64 ? 0 : c >> sh; }

static uint64_t span_product(uint32_t nd, const uint64_t *lo, const uint64_t *hi, const uint8_t *sh, uint64_t cap)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t k = cell_span(lo[d], hi[d], sh[d]);
        n = k > cap / n ? cap + 1 : n * k;
        if (n > cap) return cap + 1;
    }
    return n;
}

static size_t tick_prefix(const bucket_t *b, size_t esize, uint64_t tick);

/* Is coord a column chunk's (every coordinate past the first 0)? */
static int col_coord(uint32_t nd, const uint64_t *coord)
{
    if (!nd) return 0;
    for (uint32_t d = 1; d < nd; d++)
        if (coord[d]) return 0;
    return 1;
}

/* The column's slot of coord, or NULL: not in the column. */
static h5l_rec_t *const *col_slot(const varidx_t *v, const uint64_t *coord)
{
    if (!v->ncol || !col_coord(v->ndims, coord) || coord[0] >= v->ccol || !v->col[coord[0]]) return NULL;
    return &v->col[coord[0]];
}

/* A slot's bucket (low bit set), or NULL: the slot is a record. */
static bucket_t *slot_bucket(h5l_rec_t *s)
{
    uintptr_t t = (uintptr_t)s;
    return (t & 1) ? (bucket_t *)(t - 1) : NULL;
}

/* The fine grid's records of chunk coord with tick <= tick, in insertion
 * order: *n of them at *list (into the index: valid until the next
 * insert). */
static void fine_list(const varidx_t *v, const uint64_t *coord, uint64_t tick, h5l_rec_t *const **list, size_t *n)
{
    *list = NULL;
    *n = 0;
    h5l_rec_t *const *s = col_slot(v, coord);
    if (s) {
        const bucket_t *b = slot_bucket(*s);
        if (b) {
            *list = (h5l_rec_t *const *)b->ents;
            *n = tick_prefix(b, sizeof(h5l_rec_t *), tick);
        } else {
            *list = s;
            *n = (*s)->tick <= tick;
        }
        return;
    }
    const bucket_t *b = find_bucket(&v->fine, v->ndims, coord);
    if (b) {
        *list = (h5l_rec_t *const *)b->ents;
        *n = tick_prefix(b, v->fine.esize, tick);
    }
}

/* The first coordinate from which the column doubles: between a half and
 * three quarters of its slots, by the variable's address (as grow_at
 * spreads the hash tables' doublings). Variables written alike reach a
 * power of two at the same tick: 10,000 columns of 8,192 slots doubled
 * at once were 1.3 GB of fresh pages in one tick, 1.6 s late (pass 8,193
 * of bench-swmr). Spread, a few a tick. */
static size_t col_grow_at(const varidx_t *v)
{
    size_t spread = (size_t)(((uint64_t)(uintptr_t)v * 0x9E3779B97F4A7C15ull) >> 56); /* 0..255 */
    return v->ccol / 2 + (v->ccol / 4) * spread / 256;
}

/* List rec in the fine grid's chunk coord: in the column when the chunk
 * is there or comes densely (a new chunk), else in the hash. */
static int fine_add(h5l_index_t *x, varidx_t *v, const uint64_t *coord, h5l_rec_t *rec)
{
    uint32_t nd = v->ndims;
    if (col_coord(nd, coord)) {
        uint64_t c0 = coord[0];
        h5l_rec_t **s = c0 < v->ccol && v->col[c0] ? &v->col[c0] : NULL;
        if (s) {
            bucket_t *b = slot_bucket(*s);
            if (b) return bucket_push(x, b, sizeof rec, &rec);
            if (*s == rec) return H5L_OK; /* another box of the same record */
            b = arena_alloc(x, sizeof *b + nd * sizeof *coord); /* a second record: a bucket */
            if (!b) return H5L_ENOMEM;
            b->ents = &b->inl;
            b->n = 2;
            b->cap = 2;
            b->inl.rec[0] = *s;
            b->inl.rec[1] = rec;
            memcpy(b->coord, coord, nd * sizeof *coord);
            *s = (h5l_rec_t *)((uintptr_t)b | 1);
            return H5L_OK;
        }
        int dense = c0 < v->ccol || c0 < 2 * (uint64_t)v->ncol + 64;
        if (dense && (!v->fine.nused || !find_bucket(&v->fine, nd, coord))) { /* a new chunk, in the column */
            if (c0 >= col_grow_at(v)) {
                size_t cap = v->ccol;
                if (h5l_grow((void **)&v->col, &cap, (size_t)(c0 + 1 > cap ? c0 + 1 : cap + 1), sizeof *v->col))
                    return H5L_ENOMEM;
                x->mem += (cap - v->ccol) * sizeof *v->col;
                v->ccol = cap;
            }
            if (note_birth(x, rec->tick)) return H5L_ENOMEM;
            v->col[c0] = rec;
            v->ncol++;
            if (c0 >= v->colend) v->colend = c0 + 1;
            return H5L_OK;
        }
    }
    return bucket_add(x, &v->fine, nd, coord, &rec);
}

/* Odometer over the cells [clo, chi] of g, adding entry e to each. */
static int add_cells(h5l_index_t *x, varidx_t *v, grid_t *g, uint32_t nd, const uint64_t *clo, const uint64_t *chi,
                     const void *e)
{
    uint64_t cur[H5L_MAX_DIMS];
    memcpy(cur, clo, nd * sizeof *cur);
    for (;;) {
        int rc = g == &v->fine ? fine_add(x, v, cur, *(h5l_rec_t *const *)e) : bucket_add(x, g, nd, cur, e);
        if (rc) return rc;
        int d = (int)nd - 1;
        for (; d >= 0; d--) {
            if (cur[d] < chi[d]) {
                cur[d]++;
                break;
            }
            cur[d] = clo[d];
        }
        if (d < 0) return H5L_OK;
    }
}

static grid_t *new_grid(h5l_index_t *x, varidx_t *v, const uint8_t *shift)
{
    grid_t *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    memcpy(g->shift, shift, v->ndims);
    g->esize = sizeof(went_t);
    v->coarse[v->ncoarse++] = g;
    x->mem += sizeof *g;
    return g;
}

/* The coarse grid for a box touching chunks [lo, hi] (more than NARROW_MAX). */
static grid_t *pick_grid(h5l_index_t *x, varidx_t *v, const uint64_t *lo, const uint64_t *hi)
{
    uint32_t nd = v->ndims;
    uint8_t need[H5L_MAX_DIMS] = {0};
    /* each dimension alone down to at most CELLS_MAX cells, then the
     * dimension with the most cells doubled until the product fits */
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t n = hi[d] - lo[d];
        unsigned bits = n ? 64 - (unsigned)__builtin_clzll(n) : 0;
        need[d] = (uint8_t)(bits > CELLS_LOG ? bits - CELLS_LOG : 0);
        while (cell_span(lo[d], hi[d], need[d]) > CELLS_MAX) need[d]++;
    }
    while (span_product(nd, lo, hi, need, CELLS_MAX) > CELLS_MAX) {
        uint32_t best = 0;
        uint64_t most = 0;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t k = cell_span(lo[d], hi[d], need[d]);
            if (k > most) {
                most = k;
                best = d;
            }
        }
        need[best]++; /* most >= 2 here, so need[best] < 64 */
    }
    for (uint32_t i = 0; i < v->ncoarse; i++)
        if (memcmp(v->coarse[i]->shift, need, nd) == 0) return v->coarse[i];
    if (v->ncoarse < GRIDS_MAX - 1) return new_grid(x, v, need);
    /* every grid taken: the one at least as coarse as needed where the box
     * touches fewest cells; the catch-all always qualifies */
    grid_t *best = NULL;
    uint64_t bestn = UINT64_MAX;
    for (uint32_t i = 0; i < v->ncoarse; i++) {
        const grid_t *g = v->coarse[i];
        uint32_t d = 0;
        while (d < nd && g->shift[d] >= need[d]) d++;
        if (d < nd) continue;
        uint64_t n = span_product(nd, lo, hi, g->shift, CELLS_MAX);
        if (n < bestn) {
            bestn = n;
            best = v->coarse[i];
        }
    }
    if (best) return best;
    uint8_t all[H5L_MAX_DIMS];
    memset(all, 64, sizeof all);
    return new_grid(x, v, all); /* the GRIDS_MAX-th: never a second one, it qualifies from now on */
}

int h5l_index_insert(h5l_index_t *x, h5l_rec_t *rec)
{
    if (rec->objid >= x->nvars || !x->vars[rec->objid]) return H5L_EBADID;
    varidx_t *v = x->vars[rec->objid];
    uint32_t nd = v->ndims;
    if (rec->ndims != nd) return H5L_EBADID;
    rec->seq = x->nrec;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * nd, *c = s + nd;
        uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], n = 1;
        uint32_t d = 0;
        for (; d < nd && c[d]; d++) {
            chunk_range(s[d], c[d], v->chunk[d], &lo[d], &hi[d]);
            uint64_t span = hi[d] - lo[d] + 1; /* 0 only if it is 2^64 */
            n = span == 0 || span > NARROW_MAX || n * span > NARROW_MAX ? NARROW_MAX + 1 : n * span;
        }
        if (d < nd) continue; /* an empty box touches nothing */
        int rc;
        if (n <= NARROW_MAX) {
            rc = add_cells(x, v, &v->fine, nd, lo, hi, &rec);
        } else {
            grid_t *g = pick_grid(x, v, lo, hi);
            if (!g) return H5L_ENOMEM;
            uint64_t clo[H5L_MAX_DIMS], chi[H5L_MAX_DIMS];
            for (d = 0; d < nd; d++) {
                clo[d] = cell_of(lo[d], g->shift[d]);
                chi[d] = cell_of(hi[d], g->shift[d]);
            }
            went_t e = {rec, k};
            rc = add_cells(x, v, g, nd, clo, chi, &e);
        }
        if (rc) return rc;
    }
    x->nrec++;
    return H5L_OK;
}

/* Entries of a bucket whose record's tick is <= tick: they come first. */
static size_t tick_prefix(const bucket_t *b, size_t esize, uint64_t tick)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const h5l_rec_t *r = *(h5l_rec_t *const *)((const char *)b->ents + mid * esize);
        if (r->tick <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int grow_scratch(h5l_index_scratch_t *s, size_t need)
{
    return h5l_grow((void **)&s->p, &s->cap, need, sizeof *s->p);
}

static int seq_cmp(const void *a, const void *b)
{
    const h5l_rec_t *x = *(h5l_rec_t *const *)a, *y = *(h5l_rec_t *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int h5l_index_chunk(const h5l_index_t *x, uint32_t objid, const uint64_t *coord, uint64_t tick,
                    h5l_index_scratch_t *scratch, h5l_rec_t *const **list, size_t *n)
{
    *list = NULL;
    *n = 0;
    if (objid >= x->nvars || !x->vars[objid]) return H5L_OK;
    const varidx_t *v = x->vars[objid];
    uint32_t nd = v->ndims;
    h5l_rec_t *const *fine;
    size_t n0;
    fine_list(v, coord, tick, &fine, &n0);
    /* the coarse grids' entries whose box touches the chunk, into scratch */
    size_t m = 0;
    for (uint32_t i = 0; i < v->ncoarse; i++) {
        const grid_t *g = v->coarse[i];
        uint64_t cell[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) cell[d] = cell_of(coord[d], g->shift[d]);
        const bucket_t *b = find_bucket(g, nd, cell);
        if (!b) continue;
        size_t k = tick_prefix(b, g->esize, tick);
        if (grow_scratch(scratch, m + k)) return H5L_ENOMEM;
        const went_t *e = b->ents;
        for (size_t j = 0; j < k; j++) {
            const h5l_rec_t *r = e[j].rec;
            const uint64_t *s = r->boxes + (size_t)e[j].box * 2 * nd, *c = s + nd;
            uint32_t d = 0;
            for (; d < nd; d++) {
                uint64_t lo, hi;
                chunk_range(s[d], c[d], v->chunk[d], &lo, &hi);
                if (coord[d] < lo || coord[d] > hi) break;
            }
            if (d == nd && !(m && scratch->p[m - 1] == r)) scratch->p[m++] = e[j].rec;
        }
    }
    if (m == 0) { /* the common case: the bucket itself */
        *list = fine;
        *n = n0;
        return H5L_OK;
    }
    /* merge by insertion serial, each record once */
    if (m > 1) qsort(scratch->p, m, sizeof *scratch->p, seq_cmp);
    if (grow_scratch(scratch, m + m + n0)) return H5L_ENOMEM;
    h5l_rec_t **out = scratch->p + m;
    size_t i = 0, j = 0, k = 0;
    while (i < m || j < n0) {
        h5l_rec_t *r;
        if (j == n0 || (i < m && scratch->p[i]->seq <= fine[j]->seq))
            r = scratch->p[i++];
        else
            r = fine[j++];
        if (!k || out[k - 1] != r) out[k++] = r;
    }
    *list = out;
    *n = k;
    return H5L_OK;
}

/* Every chunk of a box of record r: fn per chunk, within *budget. */
static int box_chunks(const varidx_t *v, const uint64_t *bs, const uint64_t *bc, uint64_t *budget,
                      h5l_index_chunk_fn fn, void *ctx)
{
    uint32_t nd = v->ndims;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], cur[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < nd; d++) {
        chunk_range(bs[d], bc[d], v->chunk[d], &lo[d], &hi[d]);
        cur[d] = lo[d];
    }
    for (;;) {
        if (!(*budget)--) return H5L_ERANGE;
        int rc = fn(ctx, cur);
        if (rc) return rc;
        int d = (int)nd - 1;
        for (; d >= 0; d--) {
            if (++cur[d] <= hi[d]) break;
            cur[d] = lo[d];
        }
        if (d < 0) return 0;
    }
}

int h5l_index_chunks(const h5l_index_t *x, uint32_t objid, uint64_t tick, h5l_index_chunk_fn fn, void *ctx)
{
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    uint64_t budget = H5L_INDEX_CHUNKS_MAX;
    uint64_t cc[H5L_MAX_DIMS] = {0};
    for (size_t c = 0; c < v->ccol && v->ncol; c++) { /* the column's chunks */
        h5l_rec_t *sl = v->col[c];
        if (!sl) continue;
        const bucket_t *b = slot_bucket(sl);
        if ((b ? ((h5l_rec_t *const *)b->ents)[0] : sl)->tick > tick) continue;
        if (!budget--) return H5L_ERANGE;
        cc[0] = c;
        int rc = fn(ctx, cc);
        if (rc) return rc;
    }
    const grid_t *g = &v->fine;
    for (size_t i = 0; i < g->nslots; i++) {
        const bucket_t *b = g->slots[i];
        /* entries are in tick order: the first is the oldest */
        if (!b || !b->n || ((h5l_rec_t *const *)b->ents)[0]->tick > tick) continue;
        if (!budget--) return H5L_ERANGE;
        int rc = fn(ctx, b->coord);
        if (rc) return rc;
    }
    /* boxes kept in coarse cells cover many chunks: each of their chunks
     * (a box listed in several cells comes more than once: callers that
     * need each chunk once sort and drop repeats) */
    for (uint32_t k = 0; k < v->ncoarse; k++) {
        const grid_t *c = v->coarse[k];
        for (size_t i = 0; i < c->nslots; i++) {
            const bucket_t *b = c->slots[i];
            if (!b) continue;
            const went_t *e = b->ents;
            for (uint32_t j = 0; j < b->n && e[j].rec->tick <= tick; j++) {
                const uint64_t *bs = e[j].rec->boxes + (size_t)e[j].box * 2 * v->ndims;
                int rc = box_chunks(v, bs, bs + v->ndims, &budget, fn, ctx);
                if (rc) return rc;
            }
        }
    }
    return 0;
}

int64_t h5l_index_nchunks(const h5l_index_t *x, uint32_t objid)
{
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    return v->ncoarse ? -1 : (int64_t)(v->fine.nused + v->ncol);
}

int64_t h5l_index_col_prefix(const h5l_index_t *x, uint32_t objid)
{
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    return v->ncoarse || v->fine.nused || v->ncol != v->colend ? -1 : (int64_t)v->ncol;
}

int h5l_index_has_chunk(const h5l_index_t *x, uint32_t objid, const uint64_t *coord, uint64_t tick)
{
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    h5l_rec_t *const *list;
    size_t n;
    fine_list(v, coord, tick, &list, &n);
    return n > 0;
}

uint64_t h5l_index_chunks_version(const h5l_index_t *x, uint64_t tick)
{
    size_t lo = 0, hi = x->nbirths;
    while (lo < hi) { /* first birth after tick */
        size_t mid = (lo + hi) / 2;
        if (x->births[mid] <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? x->births[lo - 1] : 0;
}

uint64_t h5l_index_nrecords(const h5l_index_t *x) { return x->nrec; }
size_t h5l_index_memory(const h5l_index_t *x) { return x->mem; }
