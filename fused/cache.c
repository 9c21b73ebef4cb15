/* cache.c — shared chunk cache (see cache.h for the policy and contracts).
 *
 * Locks, always taken in this order: a dataset's mutex (its hash index,
 * entry states, pins) then the cache's replacement mutex (segments, memory).
 * The hit path takes only the dataset's mutex. An entry is in exactly one of:
 * LOADING (in the index, not in a segment, charged), READY (in the index and
 * in a segment), or DEAD (out of both, freed at its last unpin).
 * Eviction unlinks from the segment under the replacement lock, then from
 * the index under the dataset lock; to respect lock order it collects
 * victims and finishes them after dropping the replacement lock. */
#include "cache.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { E_LOADING = 1, E_READY = 2, E_DEAD = 3 };
enum { SEG_NONE = 0, SEG_PROB = 1, SEG_PROT = 2 };

struct hfs_centry {
    hfs_ckey_t key;
    uint64_t hash;
    size_t len;
    int state;
    int seg;
    int rc;          /* assembly result for waiters */
    int charged;     /* counted in c->mem */
    atomic_int hit;  /* CLOCK bit, set on every hit */
    atomic_int pins; /* changed under d->mu; read racily by the evictor */
    hfs_cds_t *d;
    hfs_centry_t *hnext;       /* index chain */
    hfs_centry_t *prev, *next; /* segment list */
    unsigned char *data;
};

struct hfs_cds {
    hfs_cache_t *c;
    const hfs_layout_t *layout;
    void *owner;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* LOADING -> READY */
    hfs_centry_t **tab;
    size_t nslots, n;
    int closed;
    int refs; /* owner (1) + entries + evictions in flight; guarded by mu */
    int busy; /* evicted callbacks running; close waits for 0 */
};

typedef struct seg {
    hfs_centry_t *head, *tail; /* evict from head, insert at tail */
    size_t bytes;
} seg_t;

struct hfs_cache {
    size_t limit;
    pthread_mutex_t mu; /* segments, mem */
    seg_t prob, prot;
    size_t mem; /* charged bytes: READY + LOADING entries */
    size_t peak;
    uint64_t entries;
    _Atomic uint64_t hits, misses, waits, uncached, evictions, superseded;
    _Atomic uint64_t bytes_assembled, bytes_skipped, bytes_hit;
};

hfs_cache_t *hfs_cache_new(size_t limit)
{
    hfs_cache_t *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->limit = limit;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void hfs_cache_free(hfs_cache_t *c)
{
    if (!c) return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The chain of a key is chosen by its chunk coordinates alone, so every
 * cached version of a chunk is on one chain: publishing a version finds the
 * older ones it supersedes without a second index. Chains stay short (a
 * chunk has one or two versions cached once superseded ones go). */
static uint64_t key_hash(const hfs_ckey_t *k) { return XXH3_64bits(k->coord, k->ndims * sizeof k->coord[0]); }

/* -1, 0, 1 as content version a is older, equal, newer than b: versions
 * are record sequences (tick, rank, call order), compared in that order. */
static int ver_cmp(const uint64_t *a, const uint64_t *b)
{
    for (int i = 0; i < 3; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static int key_eq(const hfs_ckey_t *a, const hfs_ckey_t *b)
{
    return a->ndims == b->ndims && a->extent == b->extent && memcmp(a->ver, b->ver, sizeof a->ver) == 0 &&
           memcmp(a->coord, b->coord, a->ndims * sizeof a->coord[0]) == 0;
}

hfs_cds_t *hfs_cds_new(hfs_cache_t *c, const hfs_layout_t *layout, void *owner)
{
    hfs_cds_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->c = c;
    d->layout = layout;
    d->owner = owner;
    d->refs = 1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    return d;
}

static void cds_free(hfs_cds_t *d)
{
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->tab);
    free(d);
}

static void cds_unref(hfs_cds_t *d)
{
    pthread_mutex_lock(&d->mu);
    int last = --d->refs == 0;
    pthread_mutex_unlock(&d->mu);
    if (last) cds_free(d);
}

/* Index operations, under d->mu. */
static hfs_centry_t *idx_find(hfs_cds_t *d, const hfs_ckey_t *k, uint64_t h)
{
    if (!d->nslots) return NULL;
    for (hfs_centry_t *e = d->tab[h & (d->nslots - 1)]; e; e = e->hnext)
        if (e->hash == h && key_eq(&e->key, k)) return e;
    return NULL;
}

static int idx_add(hfs_cds_t *d, hfs_centry_t *e)
{
    if ((d->n + 1) > d->nslots) {
        size_t n = d->nslots ? d->nslots * 2 : 64;
        hfs_centry_t **t = calloc(n, sizeof *t);
        if (!t) return -1;
        for (size_t i = 0; i < d->nslots; i++) {
            for (hfs_centry_t *x = d->tab[i], *nx; x; x = nx) {
                nx = x->hnext;
                x->hnext = t[x->hash & (n - 1)];
                t[x->hash & (n - 1)] = x;
            }
        }
        free(d->tab);
        d->tab = t;
        d->nslots = n;
    }
    size_t s = e->hash & (d->nslots - 1);
    e->hnext = d->tab[s];
    d->tab[s] = e;
    d->n++;
    return 0;
}

static void idx_del(hfs_cds_t *d, hfs_centry_t *e)
{
    hfs_centry_t **pp = &d->tab[e->hash & (d->nslots - 1)];
    while (*pp && *pp != e) pp = &(*pp)->hnext;
    if (*pp) {
        *pp = e->hnext;
        d->n--;
    }
}

/* Segment operations, under c->mu. */
static void seg_push(seg_t *s, hfs_centry_t *e, int which)
{
    e->seg = which;
    e->next = NULL;
    e->prev = s->tail;
    if (s->tail)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    s->bytes += e->len;
}

static void seg_unlink(seg_t *s, hfs_centry_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        s->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    e->prev = e->next = NULL;
    s->bytes -= e->len;
    e->seg = SEG_NONE;
}

/* Free an entry nobody can reach any more: uncharge it and drop its
 * dataset reference. Memory is uncharged only here, when it is really
 * freed, so the charged total never understates what is held. */
static void entry_free(hfs_centry_t *e)
{
    hfs_cds_t *d = e->d;
    hfs_cache_t *c = d->c;
    if (e->charged) {
        pthread_mutex_lock(&c->mu);
        c->mem -= e->len;
        c->entries--;
        pthread_mutex_unlock(&c->mu);
    }
    free(e->data);
    free(e);
    cds_unref(d);
}

/* Choose victims to make room for `need` bytes, under c->mu: unpinned
 * entries from probation first (a probation entry that was hit is promoted
 * instead), keeping the protected segment within 3/4 of the limit. Victims
 * are unlinked from their segment and returned through ->next; the caller
 * removes them from their index after dropping c->mu (lock order). The
 * walk is bounded by twice the number of entries, so pinned entries cannot
 * make it spin. */
static void make_room(hfs_cache_t *c, size_t need, hfs_centry_t **victims)
{
    size_t prot_cap = c->limit / 4 * 3, freed = 0;
    size_t budget = 2 * (size_t)c->entries + 4;
    while (c->prot.bytes > prot_cap && c->prot.head && budget--) {
        hfs_centry_t *e = c->prot.head; /* demote, giving hit entries a lap */
        seg_unlink(&c->prot, e);
        if (atomic_exchange(&e->hit, 0))
            seg_push(&c->prot, e, SEG_PROT);
        else
            seg_push(&c->prob, e, SEG_PROB);
    }
    budget = 2 * (size_t)c->entries + 4;
    while (c->mem - freed + need > c->limit && budget--) {
        seg_t *s = c->prob.head ? &c->prob : &c->prot;
        hfs_centry_t *e = s->head;
        if (!e) break;
        seg_unlink(s, e);
        if (atomic_exchange(&e->hit, 0) || atomic_load(&e->pins) > 0) {
            seg_push(&c->prot, e, SEG_PROT); /* hit or in use: keep, protected */
            continue;
        }
        freed += e->len;
        e->next = *victims;
        *victims = e;
    }
}

/* Finish victims outside c->mu: out of their index, freed unless pinned
 * (then freed at the last release). A victim pinned in the window can be
 * freed by its reader as soon as d->mu is dropped, so the callback gets a
 * copy of its key, and d (owner, layout) is held by a reference of our own.
 * The owner is told only while it is open (or by its own close, `closing`);
 * close waits for callbacks already running (d->busy). */
static void finish_victims(hfs_cache_t *c, hfs_centry_t *v, hfs_cds_t *closing, int superseded)
{
    while (v) {
        hfs_centry_t *e = v;
        v = v->next;
        hfs_cds_t *d = e->d;
        pthread_mutex_lock(&d->mu);
        idx_del(d, e);
        e->state = E_DEAD;
        int pinned = atomic_load(&e->pins) > 0; /* pinned in the window: freed at release */
        int notify = d->layout->evicted && (!d->closed || d == closing);
        hfs_ckey_t key = e->key;
        size_t len = e->len;
        d->refs++;
        d->busy += notify;
        pthread_mutex_unlock(&d->mu);
        atomic_fetch_add(superseded ? &c->superseded : &c->evictions, 1);
        if (notify) d->layout->evicted(d->owner, &key, len);
        if (!pinned) entry_free(e);
        pthread_mutex_lock(&d->mu);
        if (notify && --d->busy == 0) pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        cds_unref(d);
    }
}

hfs_centry_t *hfs_cache_peek(hfs_cds_t *d, const hfs_ckey_t *key)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&d->mu);
    hfs_centry_t *e = idx_find(d, key, h);
    if (e && e->state == E_READY)
        atomic_fetch_add(&e->pins, 1);
    else
        e = NULL;
    pthread_mutex_unlock(&d->mu);
    if (e) {
        atomic_store(&e->hit, 1);
        atomic_fetch_add(&d->c->hits, 1);
    }
    return e;
}

/* Hit or wait: e is in d's index (d->mu held, released here). Waits while
 * another thread assembles it. Returns e pinned, or NULL (and *rc) when
 * that thread failed or could not cache it. */
static hfs_centry_t *get_found(hfs_cds_t *d, hfs_centry_t *e, int *rc, int *hit)
{
    hfs_cache_t *c = d->c;
    atomic_fetch_add(&e->pins, 1);
    int waited = 0;
    while (e->state == E_LOADING) {
        waited = 1;
        pthread_cond_wait(&d->cv, &d->mu);
    }
    int failed = e->state != E_READY;
    pthread_mutex_unlock(&d->mu);
    if (failed) { /* the loader failed (its error is ours) or could not cache */
        *rc = e->rc;
        atomic_fetch_add(&c->misses, 1); /* every lookup is a hit, a wait or a miss */
        if (!*rc) atomic_fetch_add(&c->uncached, 1);
        hfs_cache_release(e);
        return NULL;
    }
    atomic_store(&e->hit, 1);
    atomic_fetch_add(waited ? &c->waits : &c->hits, 1);
    *hit = 1;
    return e;
}

/* Miss: a new LOADING entry for key in d's index (d->mu held, released
 * here), with memory reserved and charged against the limit first, so the
 * limit holds for entries being assembled too. NULL when it cannot be
 * cached (too large, out of memory, everything else pinned). */
static hfs_centry_t *get_reserve(hfs_cds_t *d, const hfs_ckey_t *key, uint64_t h, size_t len)
{
    hfs_cache_t *c = d->c;
    atomic_fetch_add(&c->misses, 1);
    hfs_centry_t *e = NULL;
    unsigned char *data = NULL;
    if (len <= c->limit && !d->closed && (e = calloc(1, sizeof *e)) && !(data = malloc(len ? len : 1))) {
        free(e);
        e = NULL;
    }
    if (e) {
        e->key = *key;
        e->hash = h;
        e->len = len;
        e->data = data;
        e->state = E_LOADING;
        atomic_init(&e->pins, 1);
        atomic_init(&e->hit, 0);
        e->d = d;
        if (idx_add(d, e)) {
            free(data);
            free(e);
            e = NULL;
        } else {
            d->refs++;
        }
    }
    pthread_mutex_unlock(&d->mu);
    if (!e) {
        atomic_fetch_add(&c->uncached, 1);
        return NULL;
    }
    hfs_centry_t *victims = NULL;
    pthread_mutex_lock(&c->mu);
    make_room(c, len, &victims);
    pthread_mutex_unlock(&c->mu);
    finish_victims(c, victims, NULL, 0);
    pthread_mutex_lock(&c->mu);
    int room = c->mem + len <= c->limit; /* charge only what fits */
    if (room) {
        c->mem += len;
        c->entries++;
        e->charged = 1;
        if (c->mem > c->peak) c->peak = c->mem;
    }
    pthread_mutex_unlock(&c->mu);
    if (!room) { /* the rest is pinned: serve this one uncached */
        pthread_mutex_lock(&d->mu);
        idx_del(d, e);
        e->state = E_DEAD;
        e->rc = 0;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        hfs_cache_release(e);
        atomic_fetch_add(&c->uncached, 1);
        return NULL;
    }
    return e;
}

/* The entries e supersedes, under d->mu: READY versions of the same chunk
 * (coordinates and rank) older than e's. A live file's edge chunk gets a
 * new version every tick; the old one is read only by snapshots opened
 * before, whose bytes the mount's page cache mostly holds, so keeping it
 * would let superseded versions crowd out everything else (100 live
 * variables made 1 MiB per variable and tick). Unlinked from their segment
 * here (lock order: d->mu, then c->mu); the caller finishes them with
 * finish_victims after dropping d->mu (a pinned one is freed at its last
 * release). An older snapshot that asks again re-assembles its version,
 * which then stays until evicted: only a newer version drops it. */
static hfs_centry_t *superseded_locked(hfs_cds_t *d, hfs_centry_t *e)
{
    hfs_cache_t *c = d->c;
    hfs_centry_t *out = NULL;
    pthread_mutex_lock(&c->mu);
    for (hfs_centry_t *x = d->tab[e->hash & (d->nslots - 1)]; x; x = x->hnext) {
        if (x == e || x->state != E_READY || x->seg == SEG_NONE || x->hash != e->hash || x->key.ndims != e->key.ndims ||
            memcmp(x->key.coord, e->key.coord, e->key.ndims * sizeof e->key.coord[0]) != 0 ||
            ver_cmp(x->key.ver, e->key.ver) >= 0)
            continue;
        seg_unlink(x->seg == SEG_PROB ? &c->prob : &c->prot, x);
        x->next = out;
        out = x;
    }
    pthread_mutex_unlock(&c->mu);
    return out;
}

/* Publish a reserved entry whose assembly returned arc: READY, on
 * probation, or on failure (or a closed owner) out of the index; waiters
 * wake either way. The entry stays pinned for the caller when returned;
 * NULL (*rc = arc) when it failed. */
static hfs_centry_t *get_publish(hfs_cds_t *d, hfs_centry_t *e, int arc, int *rc)
{
    hfs_cache_t *c = d->c;
    atomic_fetch_add(&c->bytes_assembled, e->len);
    pthread_mutex_lock(&d->mu);
    assert(e->state == E_LOADING);
    if (arc || d->closed) { /* failed, or the owner closed meanwhile: not cached */
        idx_del(d, e);
        e->state = E_DEAD; /* ours alone now: freed (and uncharged) at release */
        e->rc = arc;
    } else {
        e->state = E_READY;
        pthread_mutex_lock(&c->mu); /* in a segment before close can look for it */
        seg_push(&c->prob, e, SEG_PROB);
        pthread_mutex_unlock(&c->mu);
    }
    hfs_centry_t *old = arc ? NULL : superseded_locked(d, e);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    finish_victims(c, old, NULL, 1);
    if (arc) {
        *rc = arc;
        hfs_cache_release(e);
        return NULL;
    }
    return e;
}

/* Assemble a reserved entry and publish it. */
static hfs_centry_t *get_assemble(hfs_cds_t *d, hfs_centry_t *e, void *ctx, int *rc)
{
    return get_publish(d, e, d->layout->assemble(ctx, &e->key, e->data, e->len), rc);
}

hfs_centry_t *hfs_cache_get(hfs_cds_t *d, const hfs_ckey_t *key, size_t len, void *ctx, int *rc, int *hit)
{
    uint64_t h = key_hash(key);
    *rc = 0;
    *hit = 0;
    pthread_mutex_lock(&d->mu);
    hfs_centry_t *e = idx_find(d, key, h);
    if (e) return get_found(d, e, rc, hit); /* releases d->mu */
    e = get_reserve(d, key, h, len);        /* releases d->mu */
    return e ? get_assemble(d, e, ctx, rc) : NULL;
}

int hfs_cache_put(hfs_cds_t *d, const hfs_ckey_t *key, size_t len, void *ctx)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&d->mu);
    if (idx_find(d, key, h)) {
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    hfs_centry_t *e = get_reserve(d, key, h, len); /* releases d->mu */
    if (!e) return 0;
    int rc = 0;
    e = get_assemble(d, e, ctx, &rc);
    if (!e) return rc;
    hfs_cache_release(e);
    return 1;
}

hfs_centry_t *hfs_cache_reserve(hfs_cds_t *d, const hfs_ckey_t *key, size_t len)
{
    uint64_t h = key_hash(key);
    pthread_mutex_lock(&d->mu);
    if (idx_find(d, key, h)) {
        pthread_mutex_unlock(&d->mu);
        return NULL;
    }
    return get_reserve(d, key, h, len); /* releases d->mu */
}

void *hfs_centry_buf(hfs_centry_t *e) { return e->data; }

int hfs_cache_publish(hfs_centry_t *e, int arc)
{
    int rc = 0;
    e = get_publish(e->d, e, arc, &rc);
    if (!e) return rc;
    hfs_cache_release(e);
    return 1;
}

const void *hfs_centry_data(const hfs_centry_t *e) { return e->data; }

void hfs_cache_release(hfs_centry_t *e)
{
    hfs_cds_t *d = e->d;
    pthread_mutex_lock(&d->mu);
    int dead = atomic_fetch_sub(&e->pins, 1) == 1 && e->state == E_DEAD;
    pthread_mutex_unlock(&d->mu);
    if (dead) entry_free(e);
}

void hfs_cds_close(hfs_cds_t *d)
{
    hfs_cache_t *c = d->c;
    /* pull every READY entry of d out of the segments, then the index */
    hfs_centry_t *victims = NULL;
    pthread_mutex_lock(&d->mu);
    d->closed = 1;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_lock(&c->mu);
    seg_t *segs[2] = {&c->prob, &c->prot};
    for (int i = 0; i < 2; i++) {
        for (hfs_centry_t *e = segs[i]->head, *nx; e; e = nx) {
            nx = e->next;
            if (e->d != d) continue;
            seg_unlink(segs[i], e);
            e->next = victims;
            victims = e;
        }
    }
    pthread_mutex_unlock(&c->mu);
    finish_victims(c, victims, d, 0);
    pthread_mutex_lock(&d->mu);
    while (d->busy) pthread_cond_wait(&d->cv, &d->mu); /* other threads' callbacks to the owner */
    int last = --d->refs == 0;
    pthread_mutex_unlock(&d->mu);
    if (last) cds_free(d);
}

void hfs_cache_count_skip(hfs_cache_t *c, uint64_t bytes) { atomic_fetch_add(&c->bytes_skipped, bytes); }
void hfs_cache_count_hit(hfs_cache_t *c, uint64_t bytes) { atomic_fetch_add(&c->bytes_hit, bytes); }

void hfs_cache_get_stats(hfs_cache_t *c, hfs_cache_stats_t *o)
{
    o->hits = atomic_load(&c->hits);
    o->misses = atomic_load(&c->misses);
    o->waits = atomic_load(&c->waits);
    o->uncached = atomic_load(&c->uncached);
    o->evictions = atomic_load(&c->evictions);
    o->superseded = atomic_load(&c->superseded);
    o->bytes_assembled = atomic_load(&c->bytes_assembled);
    o->bytes_skipped = atomic_load(&c->bytes_skipped);
    o->bytes_hit = atomic_load(&c->bytes_hit);
    pthread_mutex_lock(&c->mu);
    o->mem = c->mem;
    o->peak = c->peak;
    o->limit = c->limit;
    o->entries = c->entries;
    pthread_mutex_unlock(&c->mu);
}
