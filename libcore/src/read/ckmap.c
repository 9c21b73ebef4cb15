/* ckmap.c — the reader's chunk map of checkpointed ticks (ckmap.h). */
#include "ckmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/grow.h"

/* Per variable: its chunks as records [coord[nd], ref, rn] in one array.
 * ref with its top bit set is a chunk's only tick, else the offset in the
 * map's pool of its first run of ticks, a run being [next run, k,
 * ticks[k]] (one per segment listing the chunk; 0 ends the list). rn packs
 * a count and a step: the record stands for cnt chunks, coord[0] + i for
 * i < cnt with the other coordinates the same, chunk i's only tick being
 * ref's + i * dt. A log of rows — a chunk a tick along the first
 * dimension, netCDF's default for a time series — keeps one record per
 * variable for its whole history (a record a chunk was 24 bytes, written
 * into fresh pages: a third of opening a log of a million such ticks). A
 * chunk of a run listed again by a later segment splits the variable's
 * runs for good (flat: a record a chunk, as a log that rewrites old rows
 * needs anyway).
 *
 * A log that appends (each segment's new chunks after all earlier ones,
 * as a growing time dimension makes them) keeps the array sorted and
 * looks chunks up by binary search: loading is appending, with no hash
 * table to build and no memory for one. The first chunk that arrives out
 * of order turns the variable flat and hashed (an open-addressing table
 * of record numbers, load <= 1/2). */
#define ONE ((uint64_t)1 << 63)
#define RN(cnt, dt) (((uint64_t)(cnt) << 32) | (uint64_t)(dt))
#define RN_CNT(x) ((x) >> 32)
#define RN_DT(x) ((x) & 0xFFFFFFFFu)
typedef struct cmvar {
    uint32_t nd;
    int hashed;     /* looked up by hash (implies flat) */
    int flat;       /* every record one chunk */
    uint64_t *ents; /* n records of nd + 2 u64s */
    size_t n, cap;  /* cap in u64s */
    size_t *slots;  /* hashed: record number + 1, 0: empty */
    size_t nslots;
} cmvar_t;

/* Births as runs: ticks t0 + i * dt for i < n (a log of rows has one a
 * tick, evenly spaced: one run). */
typedef struct brun {
    uint32_t t0, n, dt;
} brun_t;

struct h5l_ckmap {
    cmvar_t *vars; /* by objid; n 0: none yet */
    size_t nvars;
    uint64_t *pool; /* runs; pool[0] unused: offset 0 means none */
    size_t npool, cap_pool;
    brun_t *births; /* increasing ticks at which some chunk got its first tick (32 bits: a map of
                     * later ticks is refused, and the reader reads the whole journal) */
    size_t nbirths, cap_births;
    uint32_t *sb; /* scratch: one segment's births */
    size_t cap_sb;
    struct prog *pg; /* one segment's births so far, as progressions */
    size_t npg, cap_pg;
};

/* Ticks t0 + i * dt, i < cnt. */
typedef struct prog {
    uint64_t t0, cnt, dt;
} prog_t;

h5l_ckmap_t *h5l_ckmap_new(void) { return calloc(1, sizeof(h5l_ckmap_t)); }

void h5l_ckmap_free(h5l_ckmap_t *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->nvars; i++) {
        free(m->vars[i].ents);
        free(m->vars[i].slots);
    }
    free(m->vars);
    free(m->pool);
    free(m->births);
    free(m->sb);
    free(m->pg);
    free(m);
}

static uint64_t coord_hash(const uint64_t *c, uint32_t nd)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t d = 0; d < nd; d++) {
        h = (h ^ c[d]) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return h * 0x94D049BB133111EBull ^ (h >> 32);
}

static int coord_cmp(const uint64_t *a, const uint64_t *b, uint32_t nd)
{
    for (uint32_t d = 0; d < nd; d++)
        if (a[d] != b[d]) return a[d] < b[d] ? -1 : 1;
    return 0;
}

/* Hashed: the slot of coord, or the empty slot where it goes. */
static size_t cm_slot(const cmvar_t *v, const uint64_t *coord)
{
    size_t mask = v->nslots - 1, i = (size_t)coord_hash(coord, v->nd) & mask;
    while (v->slots[i] && coord_cmp(v->ents + (v->slots[i] - 1) * (v->nd + 2), coord, v->nd)) i = (i + 1) & mask;
    return i;
}

static int cm_rehash(cmvar_t *v, size_t n)
{
    size_t *s = calloc(n, sizeof *s);
    if (!s) return H5L_ENOMEM;
    free(v->slots);
    v->slots = s;
    v->nslots = n;
    for (size_t i = 0; i < v->n; i++) v->slots[cm_slot(v, v->ents + i * (v->nd + 2))] = i + 1;
    return 0;
}

/* Is coord after every chunk of the (sorted) variable's last record? */
static int after_last(const cmvar_t *v, const uint64_t *coord)
{
    const uint64_t *e = v->ents + (v->n - 1) * (v->nd + 2);
    if (!v->nd) return 0; /* a scalar has one chunk */
    uint64_t last0 = e[0] + RN_CNT(e[v->nd + 1]) - 1;
    if (coord[0] != last0) return coord[0] > last0;
    return coord_cmp(e + 1, coord + 1, v->nd - 1) < 0;
}

/* The record holding coord, and *idx its place in the record's run; or
 * NULL. */
static uint64_t *cm_find(const cmvar_t *v, const uint64_t *coord, uint64_t *idx)
{
    size_t st = v->nd + 2;
    *idx = 0;
    if (v->hashed) {
        size_t s = cm_slot(v, coord);
        return v->slots[s] ? v->ents + (v->slots[s] - 1) * st : NULL;
    }
    size_t lo = 0, hi = v->n; /* the last record whose first chunk is <= coord */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (coord_cmp(v->ents + mid * st, coord, v->nd) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return NULL;
    uint64_t *e = v->ents + (lo - 1) * st;
    uint64_t cnt = RN_CNT(e[v->nd + 1]);
    if (cnt == 1) return coord_cmp(e, coord, v->nd) ? NULL : e;
    if (coord_cmp(e + 1, coord + 1, v->nd - 1) || coord[0] - e[0] >= cnt) return NULL; /* (coord >= e) */
    *idx = coord[0] - e[0];
    return e;
}

/* Every record one chunk from now on. 0 or H5L_ENOMEM (nothing changed). */
static int cm_flatten(cmvar_t *v)
{
    size_t st = v->nd + 2, total = 0;
    for (size_t i = 0; i < v->n; i++) total += RN_CNT(v->ents[i * st + v->nd + 1]);
    if (total != v->n) {
        if (total > SIZE_MAX / st / sizeof(uint64_t)) return H5L_ENOMEM;
        uint64_t *ne = malloc(total * st * sizeof *ne), *o = ne;
        if (!ne) return H5L_ENOMEM;
        for (size_t i = 0; i < v->n; i++) {
            const uint64_t *e = v->ents + i * st;
            uint64_t cnt = RN_CNT(e[v->nd + 1]), dt = RN_DT(e[v->nd + 1]);
            for (uint64_t j = 0; j < cnt; j++, o += st) {
                memcpy(o, e, v->nd * sizeof *o);
                o[0] += j;
                o[v->nd] = cnt > 1 ? e[v->nd] + j * dt : e[v->nd]; /* a run's chunks have one tick each */
                o[v->nd + 1] = RN(1, 0);
            }
        }
        free(v->ents);
        v->ents = ne;
        v->n = total;
        v->cap = total * st;
    }
    v->flat = 1;
    return 0;
}

/* A new record [coord, ref] for cnt chunks along the first dimension (the
 * ticks of chunk i: ref's + i dt; cnt > 1 only for a run that comes after
 * every chunk of a sorted variable), or as many more on the last record's
 * run when they continue it. */
static int cm_append(cmvar_t *v, const uint64_t *coord, uint64_t ref, uint64_t cnt, uint64_t dt)
{
    size_t st = v->nd + 2;
    if (!v->hashed && v->n && !after_last(v, coord)) {
        size_t n = 64; /* out of order: flat and hashed from now on */
        if (cm_flatten(v)) return H5L_ENOMEM;
        while (n < 2 * (v->n + 1)) n *= 2;
        if (cm_rehash(v, n)) return H5L_ENOMEM;
        v->hashed = 1;
    }
    if (!v->flat && v->nd && v->n && (ref & ONE)) { /* the next chunks of the last run, at the next ticks of its step? */
        uint64_t *l = v->ents + (v->n - 1) * st, lc = RN_CNT(l[v->nd + 1]), lt0 = l[v->nd] & ~ONE, t0 = ref & ~ONE;
        uint64_t step = lc == 1 ? t0 - lt0 : RN_DT(l[v->nd + 1]); /* a record of one chunk takes the new step */
        if ((l[v->nd] & ONE) && coord[0] == l[0] + lc && !coord_cmp(l + 1, coord + 1, v->nd - 1) &&
            lc + cnt < UINT32_MAX && (lc > 1 || t0 > lt0) && step <= UINT32_MAX && t0 == lt0 + lc * step &&
            (cnt == 1 || dt == step)) {
            l[v->nd + 1] = RN(lc + cnt, step);
            return 0;
        }
    }
    if (v->hashed && 2 * (v->n + 1) > v->nslots && cm_rehash(v, 2 * v->nslots)) return H5L_ENOMEM;
    size_t cap0 = v->cap;
    if (h5l_grow_raw((void **)&v->ents, &v->cap, (v->n + 1) * st, sizeof *v->ents)) return H5L_ENOMEM;
    if (v->cap != cap0) /* filled from start to end: h5l_ckmap_trim gives back what is not */
        h5l_prefault(v->ents + cap0, (v->cap - cap0) * sizeof *v->ents);
    uint64_t *e = v->ents + v->n * st;
    for (uint32_t d = 0; d < v->nd; d++) e[d] = coord[d]; /* (a memcpy call of 16 bytes a chunk was 7%) */
    e[v->nd] = ref;
    e[v->nd + 1] = RN(cnt, cnt > 1 ? dt : 0);
    v->n++;
    if (v->hashed) v->slots[cm_slot(v, coord)] = v->n;
    return 0;
}

/* A run of k ticks in the pool; its offset, or 0 when out of memory. With
 * ARITH in its count the run is [next, k | ARITH, t0, dt]: the ticks t0 +
 * j dt, j < k (a segment's summary lists a chunk a time axis fills over
 * many ticks that way: 32 bytes, not 8 a tick). */
#define ARITH ((uint64_t)1 << 63)
static uint64_t cm_run_arith(h5l_ckmap_t *m, uint64_t t0, uint64_t k, uint64_t dt)
{
    if (!m->npool) m->npool = 1;
    if (h5l_grow_raw((void **)&m->pool, &m->cap_pool, m->npool + 4, sizeof *m->pool)) return 0;
    uint64_t run = m->npool;
    m->pool[run] = 0;
    m->pool[run + 1] = k | ARITH;
    m->pool[run + 2] = t0;
    m->pool[run + 3] = dt;
    m->npool += 4;
    return run;
}

static uint64_t cm_run(h5l_ckmap_t *m, const uint64_t *t, size_t k)
{
    if (!m->npool) m->npool = 1;
    if (h5l_grow_raw((void **)&m->pool, &m->cap_pool, m->npool + 2 + k, sizeof *m->pool)) return 0;
    uint64_t run = m->npool;
    m->pool[run] = 0;
    m->pool[run + 1] = k;
    memcpy(m->pool + run + 2, t, k * sizeof *t);
    m->npool += 2 + k;
    return run;
}

/* Birth tick b, after every earlier one. */
static int birth_push(h5l_ckmap_t *m, uint32_t b)
{
    brun_t *l = m->nbirths ? &m->births[m->nbirths - 1] : NULL;
    if (l && l->n == 1 && b > l->t0) {
        l->dt = b - l->t0;
        l->n = 2;
        return 0;
    }
    if (l && l->n > 1 && l->n < UINT32_MAX && (uint64_t)b == (uint64_t)l->t0 + (uint64_t)l->n * l->dt) {
        l->n++;
        return 0;
    }
    if (h5l_grow_raw((void **)&m->births, &m->cap_births, m->nbirths + 1, sizeof *m->births)) return H5L_ENOMEM;
    m->births[m->nbirths++] = (brun_t){b, 1, 0};
    return 0;
}

/* Births t0 + i * dt, i < cnt (after every earlier one, increasing). */
static int births_push(h5l_ckmap_t *m, uint64_t t0, uint64_t cnt, uint64_t dt)
{
    uint64_t i = 0;
    for (; i < cnt && i < 2; i++)
        if (birth_push(m, (uint32_t)(t0 + i * dt))) return H5L_ENOMEM;
    brun_t *l = &m->births[m->nbirths - 1];
    if (cnt > 2 && l->n >= 2 && l->dt == dt && (uint64_t)l->t0 + (uint64_t)(l->n - 1) * dt == t0 + dt &&
        (uint64_t)l->n + (cnt - 2) < UINT32_MAX) { /* the rest continue the run they joined */
        l->n += (uint32_t)(cnt - 2);
        return 0;
    }
    for (; i < cnt; i++)
        if (birth_push(m, (uint32_t)(t0 + i * dt))) return H5L_ENOMEM;
    return 0;
}

/* A segment's new chunks got their first ticks t0 + i * dt, i < cnt. */
static int prog_add(h5l_ckmap_t *m, uint64_t t0, uint64_t cnt, uint64_t dt)
{
    if (t0 + (cnt - 1) * dt > UINT32_MAX) return H5L_ENOMEM; /* (the map keeps births in 32 bits) */
    if (h5l_grow_raw((void **)&m->pg, &m->cap_pg, m->npg + 1, sizeof *m->pg)) return H5L_ENOMEM;
    m->pg[m->npg++] = (prog_t){t0, cnt, dt};
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The segment's births, sorted, each once, onto the map's (all after
 * earlier segments'). Every variable written at every tick gives the same
 * progression many times: pushed once. */
static int births_flush(h5l_ckmap_t *m)
{
    size_t n = m->npg, total = 0, same = 1;
    m->npg = 0;
    if (!n) return 0;
    for (size_t i = 0; i < n; i++) {
        const prog_t *p = &m->pg[i];
        same &= p->t0 == m->pg[0].t0 && p->cnt == m->pg[0].cnt && p->dt == m->pg[0].dt;
        total += p->cnt;
    }
    if (same) return births_push(m, m->pg[0].t0, m->pg[0].cnt, m->pg[0].dt);
    if (h5l_grow_raw((void **)&m->sb, &m->cap_sb, total, sizeof *m->sb)) return H5L_ENOMEM;
    size_t k = 0;
    int sorted = 1;
    for (size_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < m->pg[i].cnt; j++) {
            uint32_t t = (uint32_t)(m->pg[i].t0 + j * m->pg[i].dt);
            if (k && t < m->sb[k - 1]) sorted = 0;
            m->sb[k++] = t;
        }
    /* (variables one after another: their ticks restart, an insertion sort was quadratic) */
    if (!sorted) qsort(m->sb, k, sizeof *m->sb, u32_cmp);
    for (size_t i = 0; i < k; i++)
        if ((!i || m->sb[i - 1] != m->sb[i]) && birth_push(m, m->sb[i])) return H5L_ENOMEM;
    return 0;
}

/* Chunk coord of objid (rank nd) listed with ticks t[0..nt) by the segment
 * being added. */
static int add_entry(h5l_ckmap_t *m, uint32_t objid, uint32_t nd, const uint64_t *coord, const uint64_t *t, size_t nt,
                     const prog_t *ar)
{
    if (h5l_grow((void **)&m->vars, &m->nvars, (size_t)objid + 1, sizeof *m->vars)) return H5L_ENOMEM;
    cmvar_t *v = &m->vars[objid];
    if (!v->n) v->nd = nd;
    if (v->nd != nd) return H5L_ECORRUPT;
    /* appending (sorted, after the last chunk): new, no search */
    int after = !v->n || (!v->hashed && after_last(v, coord));
    uint64_t idx;
    uint64_t *e = after ? NULL : cm_find(v, coord, &idx);
    if (e && RN_CNT(e[v->nd + 1]) > 1) { /* in a run: a record a chunk from now on */
        if (cm_flatten(v)) return H5L_ENOMEM;
        e = cm_find(v, coord, &idx);
    }
    /* ar: the ticks ar->t0 + j ar->dt, j < ar->cnt, instead of t[0..nt) */
    uint64_t first = ar ? ar->t0 : t[0];
    int one = ar ? ar->cnt == 1 : nt == 1;
    if (e) { /* listed by an earlier segment: a run more at the end */
        if (e[v->nd] & ONE) {
            uint64_t t0 = e[v->nd] & ~ONE, r0 = cm_run(m, &t0, 1);
            if (!r0) return H5L_ENOMEM;
            e[v->nd] = r0;
        }
        uint64_t run = ar ? cm_run_arith(m, ar->t0, ar->cnt, ar->dt) : cm_run(m, t, nt), at = e[v->nd];
        if (!run) return H5L_ENOMEM;
        while (m->pool[at]) at = m->pool[at];
        m->pool[at] = run;
        return 0;
    }
    uint64_t ref = one ? first | ONE : ar ? cm_run_arith(m, ar->t0, ar->cnt, ar->dt) : cm_run(m, t, nt);
    if (!ref || cm_append(v, coord, ref, 1, 0)) return H5L_ENOMEM;
    return prog_add(m, first, 1, 0);
}

int h5l_ckmap_add(h5l_ckmap_t *m, const h5l_ckpt_t *c)
{
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        int rc = add_entry(m, k->objid, k->nd, k->coord, k->ticks, k->nt, NULL);
        if (rc) return rc;
    }
    return births_flush(m);
}

/* cnt chunks coord + i e0 along the first dimension, each new, after the
 * variable's last, with the one tick t0 + i dt: as one record, or one
 * more stretch of the last record's run. 1 if done so, 0 if the run must
 * go chunk by chunk (the variable is flat, or ticks past 32 bits). */
static int add_row_run(h5l_ckmap_t *m, const h5l_ckchunk_run_t *r)
{
    if (h5l_grow((void **)&m->vars, &m->nvars, (size_t)r->objid + 1, sizeof *m->vars)) return H5L_ENOMEM;
    cmvar_t *v = &m->vars[r->objid];
    if (v->n && (v->nd != r->nd || v->flat || v->hashed || !after_last(v, r->coord))) return 0;
    if (r->dt > UINT32_MAX || r->t0 + (r->cnt - 1) * r->dt > UINT32_MAX) return 0;
    if (!v->n) v->nd = r->nd;
    int rc = cm_append(v, r->coord, r->t0 | ONE, r->cnt, r->dt);
    if (!rc) rc = prog_add(m, r->t0, r->cnt, r->dt);
    return rc ? rc : 1;
}

int h5l_ckmap_add_runs(h5l_ckmap_t *m, const h5l_cksum_t *s)
{
    for (size_t i = 0; i < s->ncr; i++) {
        const h5l_ckchunk_run_t *r = &s->cr[i];
        if (r->cnt > 1) {
            int k = add_row_run(m, r);
            if (k < 0) return k;
            if (k == 1) continue;
        }
        if (r->cnt == 1) { /* one chunk, its k ticks evenly spaced */
            prog_t ar = {r->t0, r->k, r->dt};
            int rc = add_entry(m, r->objid, r->nd, r->coord, NULL, 0, &ar);
            if (rc) return rc;
            continue;
        }
        uint64_t co[H5L_MAX_DIMS], tk; /* chunk by chunk, a tick each */
        memcpy(co, r->coord, r->nd * sizeof *co);
        for (uint64_t j = 0; j < r->cnt; j++) {
            co[0] = r->coord[0] + j;
            tk = r->t0 + j * r->dt;
            int rc = add_entry(m, r->objid, r->nd, co, &tk, 1, NULL);
            if (rc) return rc;
        }
    }
    return births_flush(m);
}

/* Shrink *p (capacity *cap elements) to n. */
static void shrink(void **p, size_t *cap, size_t n, size_t elem)
{
    void *q = n ? realloc(*p, n * elem) : NULL;
    if (q) {
        *p = q;
        *cap = n;
    }
}

void h5l_ckmap_trim(h5l_ckmap_t *m)
{
    shrink((void **)&m->pool, &m->cap_pool, m->npool, sizeof *m->pool);
    shrink((void **)&m->births, &m->cap_births, m->nbirths, sizeof *m->births);
    free(m->sb);
    m->sb = NULL;
    m->cap_sb = 0;
    free(m->pg);
    m->pg = NULL;
    m->cap_pg = 0;
    for (size_t i = 0; i < m->nvars; i++) {
        cmvar_t *v = &m->vars[i];
        shrink((void **)&v->ents, &v->cap, v->n * (v->nd + 2), sizeof *v->ents);
    }
}

int h5l_ckmap_ticks(const h5l_ckmap_t *m, uint32_t objid, const uint64_t *coord, uint64_t tick, uint64_t **buf,
                    size_t *cap, size_t *n)
{
    *n = 0;
    if (objid >= m->nvars || !m->vars[objid].n) return 0;
    const cmvar_t *v = &m->vars[objid];
    uint64_t idx;
    const uint64_t *e = cm_find(v, coord, &idx);
    if (!e) return 0;
    uint64_t ref = e[v->nd];
    if (ref & ONE) {
        uint64_t t = (ref & ~ONE) + idx * RN_DT(e[v->nd + 1]);
        if (t > tick) return 0;
        if (h5l_grow((void **)buf, cap, 1, sizeof **buf)) return H5L_ENOMEM;
        (*buf)[(*n)++] = t;
        return 0;
    }
    for (uint64_t run = ref; run; run = m->pool[run]) {
        uint64_t k = m->pool[run + 1] & ~ARITH;
        int ar = (m->pool[run + 1] & ARITH) != 0;
        const uint64_t *t = m->pool + run + 2;
        for (uint64_t i = 0; i < k; i++) {
            uint64_t ti = ar ? t[0] + i * t[1] : t[i];
            if (ti > tick) return 0;
            if (h5l_grow((void **)buf, cap, *n + 1, sizeof **buf)) return H5L_ENOMEM;
            (*buf)[(*n)++] = ti;
        }
    }
    return 0;
}

int h5l_ckmap_chunk_runs(const h5l_ckmap_t *m, uint32_t objid, uint64_t tick,
                         int (*fn)(void *, const uint64_t *, uint64_t), void *ctx)
{
    if (objid >= m->nvars) return 0;
    const cmvar_t *v = &m->vars[objid];
    for (size_t i = 0; i < v->n; i++) {
        const uint64_t *e = v->ents + i * (v->nd + 2);
        uint64_t ref = e[v->nd], cnt = RN_CNT(e[v->nd + 1]), dt = RN_DT(e[v->nd + 1]);
        uint64_t first = ref & ONE ? ref & ~ONE : m->pool[ref + 2];
        if (first > tick) continue;
        uint64_t n = cnt > 1 ? (tick - first) / dt + 1 : 1; /* a run's ticks increase */
        int rc = fn(ctx, e, n < cnt ? n : cnt);
        if (rc) return rc;
    }
    return 0;
}

uint64_t h5l_ckmap_version(const h5l_ckmap_t *m, uint64_t tick)
{
    size_t lo = 0, hi = m->nbirths;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->births[mid].t0 <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return 0;
    const brun_t *b = &m->births[lo - 1];
    uint64_t i = b->n == 1 ? 0 : (tick - b->t0) / b->dt;
    if (i > b->n - 1) i = b->n - 1;
    return b->t0 + i * b->dt;
}

size_t h5l_ckmap_memory(const h5l_ckmap_t *m)
{
    size_t b = sizeof *m + m->cap_pool * 8 + m->cap_births * sizeof *m->births + m->cap_sb * 4 +
               m->cap_pg * sizeof *m->pg + m->nvars * sizeof *m->vars;
    for (size_t i = 0; i < m->nvars; i++) b += m->vars[i].cap * 8 + m->vars[i].nslots * sizeof(size_t);
    return b;
}
