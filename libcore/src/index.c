/* index.c — chunk-bucketed record index (see index.h).
 *
 * Per variable: an open-addressing hash table (linear probing, load <= 1/2)
 * from chunk coordinates to a bucket, a growable array of record pointers in
 * insertion (= sequence) order. Records and their boxes live in a bump arena
 * of 1 MiB blocks, so a record costs its bytes and no malloc of its own.
 * Cost of an insert: one bucket append per chunk touched. Cost of a lookup:
 * one hash probe sequence plus a binary search on tick. */
#include "index.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "h5log_common.h"

#define ARENA_BLOCK (1u << 20)

typedef struct bucket {
    h5l_rec_t **recs;
    uint32_t n, cap;
    uint64_t coord[]; /* ndims */
} bucket_t;

typedef struct varidx {
    uint32_t ndims;
    uint64_t chunk[H5L_MAX_DIMS];
    bucket_t **slots;
    size_t nslots, nused;
} varidx_t;

typedef struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} arena_blk_t;

struct h5l_index {
    varidx_t **vars; /* by objid; NULL if not a variable */
    uint64_t *births; /* distinct ticks at which a chunk got its first record, ascending */
    size_t nbirths, capbirths;
    size_t nvars;
    arena_blk_t *arena;
    uint64_t nrec;
    size_t mem;
};

h5l_index_t *h5l_index_new(void) { return calloc(1, sizeof(h5l_index_t)); }

void h5l_index_free(h5l_index_t *x)
{
    if (!x) return;
    for (size_t i = 0; i < x->nvars; i++) {
        varidx_t *v = x->vars[i];
        if (!v) continue;
        for (size_t s = 0; s < v->nslots; s++) {
            if (v->slots[s]) {
                free(v->slots[s]->recs);
                free(v->slots[s]);
            }
        }
        free(v->slots);
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

int h5l_index_add_var(h5l_index_t *x, uint32_t objid, uint32_t ndims,
                      const uint64_t *chunk)
{
    if (ndims > H5L_MAX_DIMS) return H5L_EINVAL;
    for (uint32_t i = 0; i < ndims; i++)
        if (!chunk[i]) return H5L_EINVAL;
    if (objid >= x->nvars) {
        size_t n = x->nvars ? x->nvars : 16;
        while (n <= objid) n *= 2;
        varidx_t **v = realloc(x->vars, n * sizeof *v);
        if (!v) return H5L_ENOMEM;
        memset(v + x->nvars, 0, (n - x->nvars) * sizeof *v);
        x->vars = v;
        x->nvars = n;
    }
    if (x->vars[objid]) return H5L_EINVAL;
    varidx_t *v = calloc(1, sizeof *v);
    if (!v) return H5L_ENOMEM;
    v->ndims = ndims;
    memcpy(v->chunk, chunk, ndims * sizeof *chunk);
    x->vars[objid] = v;
    x->mem += sizeof *v;
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

static uint64_t coord_hash(const uint64_t *c, uint32_t nd)
{
    return XXH3_64bits(c, nd * sizeof *c);
}

/* Slot of coord in v: the bucket's slot, or the empty slot where it goes. */
static size_t find_slot(const varidx_t *v, const uint64_t *coord)
{
    size_t mask = v->nslots - 1;
    size_t i = (size_t)coord_hash(coord, v->ndims) & mask;
    while (v->slots[i] && memcmp(v->slots[i]->coord, coord, v->ndims * sizeof *coord) != 0)
        i = (i + 1) & mask;
    return i;
}

static int rehash(h5l_index_t *x, varidx_t *v)
{
    size_t n = v->nslots ? v->nslots * 2 : 64;
    bucket_t **old = v->slots;
    size_t oldn = v->nslots;
    v->slots = calloc(n, sizeof *v->slots);
    if (!v->slots) {
        v->slots = old;
        return H5L_ENOMEM;
    }
    v->nslots = n;
    for (size_t i = 0; i < oldn; i++)
        if (old[i]) v->slots[find_slot(v, old[i]->coord)] = old[i];
    free(old);
    x->mem += (n - oldn) * sizeof *v->slots;
    return H5L_OK;
}

static int bucket_add(h5l_index_t *x, varidx_t *v, const uint64_t *coord, h5l_rec_t *rec)
{
    if ((v->nused + 1) * 2 > v->nslots && rehash(x, v)) return H5L_ENOMEM;
    size_t i = find_slot(v, coord);
    bucket_t *b = v->slots[i];
    if (!b) {
        b = calloc(1, sizeof *b + v->ndims * sizeof *coord);
        if (!b) return H5L_ENOMEM;
        memcpy(b->coord, coord, v->ndims * sizeof *coord);
        if (!x->nbirths || x->births[x->nbirths - 1] != rec->tick) { /* inserts come in tick order */
            if (x->nbirths == x->capbirths) {
                size_t cap = x->capbirths ? x->capbirths * 2 : 64;
                uint64_t *t = realloc(x->births, cap * sizeof *t);
                if (!t) {
                    free(b);
                    return H5L_ENOMEM;
                }
                x->mem += (cap - x->capbirths) * sizeof *t;
                x->births = t;
                x->capbirths = cap;
            }
            x->births[x->nbirths++] = rec->tick;
        }
        v->slots[i] = b;
        v->nused++;
        x->mem += sizeof *b + v->ndims * sizeof *coord;
    }
    if (b->n && b->recs[b->n - 1] == rec) return H5L_OK; /* two boxes, one chunk */
    if (b->n == b->cap) {
        uint32_t cap = b->cap ? b->cap * 2 : 2;
        h5l_rec_t **r = realloc(b->recs, cap * sizeof *r);
        if (!r) return H5L_ENOMEM;
        x->mem += (cap - b->cap) * sizeof *r;
        b->recs = r;
        b->cap = cap;
    }
    b->recs[b->n++] = rec;
    return H5L_OK;
}

int h5l_index_insert(h5l_index_t *x, h5l_rec_t *rec)
{
    if (rec->objid >= x->nvars || !x->vars[rec->objid]) return H5L_EBADID;
    varidx_t *v = x->vars[rec->objid];
    uint32_t nd = v->ndims;
    if (rec->ndims != nd) return H5L_EBADID;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * nd, *c = s + nd;
        uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], cur[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) {
            lo[d] = s[d] / v->chunk[d];
            hi[d] = (s[d] + c[d] - 1) / v->chunk[d];
            cur[d] = lo[d];
        }
        for (;;) { /* odometer over the chunk coordinates the box touches */
            int rc = bucket_add(x, v, cur, rec);
            if (rc) return rc;
            int d = (int)nd - 1;
            for (; d >= 0; d--) {
                if (++cur[d] <= hi[d]) break;
                cur[d] = lo[d];
            }
            if (d < 0) break;
        }
    }
    x->nrec++;
    return H5L_OK;
}

size_t h5l_index_chunk(const h5l_index_t *x, uint32_t objid,
                       const uint64_t *coord, uint64_t tick,
                       h5l_rec_t *const **list)
{
    *list = NULL;
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    if (!v->nslots) return 0;
    const bucket_t *b = v->slots[find_slot(v, coord)];
    if (!b) return 0;
    /* recs are in tick order: binary search the prefix with tick <= tick */
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b->recs[mid]->tick <= tick) lo = mid + 1;
        else hi = mid;
    }
    *list = b->recs;
    return lo;
}

int h5l_index_chunks(const h5l_index_t *x, uint32_t objid, uint64_t tick,
                     h5l_index_chunk_fn fn, void *ctx)
{
    if (objid >= x->nvars || !x->vars[objid]) return 0;
    const varidx_t *v = x->vars[objid];
    for (size_t i = 0; i < v->nslots; i++) {
        const bucket_t *b = v->slots[i];
        /* recs are in tick order: the first is the oldest */
        if (!b || !b->n || b->recs[0]->tick > tick) continue;
        int rc = fn(ctx, b->coord);
        if (rc) return rc;
    }
    return 0;
}

uint64_t h5l_index_chunks_version(const h5l_index_t *x, uint64_t tick)
{
    size_t lo = 0, hi = x->nbirths;
    while (lo < hi) { /* first birth after tick */
        size_t mid = (lo + hi) / 2;
        if (x->births[mid] <= tick) lo = mid + 1;
        else hi = mid;
    }
    return lo ? x->births[lo - 1] : 0;
}

uint64_t h5l_index_nrecords(const h5l_index_t *x) { return x->nrec; }
size_t h5l_index_memory(const h5l_index_t *x) { return x->mem; }
