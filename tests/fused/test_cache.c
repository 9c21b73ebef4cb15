/* test_cache.c — the daemon's shared chunk cache (fused/cache.[ch]).
 *
 * Why: every byte a reader gets through the cache was assembled once and
 * then served to many readers, so a wrong entry, a lost pin or a broken
 * memory limit shows up as silently wrong data or an OOM-killed daemon.
 * The references are computed here, independently of cache.c: chunk bytes
 * are a deterministic function of (dataset salt, key, length) made with
 * splitmix64 (not the cache's xxhash); residency, eviction order and the
 * stats are checked against a model kept by the test (single-threaded
 * tests) or against counts kept by the callbacks (threaded tests). Fixed
 * seeds, so a failure reproduces. Threaded tests are meant to run clean
 * under -fsanitize=thread, and every test under -fsanitize=address. */
#include "cache.h"
#include "tharness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* ---- deterministic chunk bytes ------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    uint64_t s = h ^ (v * 0xff51afd7ed558ccdULL);
    return splitmix(&s);
}

static uint64_t key_seed(const hfs_ckey_t *k, size_t len, int salt)
{
    uint64_t h = mix(0x1234567ULL, (uint64_t)salt);
    h = mix(h, k->ndims);
    for (uint32_t i = 0; i < k->ndims; i++) h = mix(h, k->coord[i]);
    for (int i = 0; i < 3; i++) h = mix(h, k->ver[i]);
    h = mix(h, k->extent);
    return mix(h, (uint64_t)len);
}

static void fill_ref(void *buf, const hfs_ckey_t *k, size_t len, int salt)
{
    uint64_t s = key_seed(k, len, salt);
    unsigned char *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x = splitmix(&s);
        memcpy(p + i, &x, 8);
    }
    if (i < len) {
        uint64_t x = splitmix(&s);
        memcpy(p + i, &x, len - i);
    }
}

/* 1 when p holds exactly the bytes fill_ref makes for (k, len, salt). */
static int data_ok(const void *p, const hfs_ckey_t *k, size_t len, int salt)
{
    uint64_t s = key_seed(k, len, salt);
    const unsigned char *q = p;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x = splitmix(&s), y;
        memcpy(&y, q + i, 8);
        if (x != y) return 0;
    }
    if (i < len) {
        uint64_t x = splitmix(&s);
        if (memcmp(&x, q + i, len - i) != 0) return 0;
    }
    return 1;
}

static hfs_ckey_t mkkey(uint32_t nd, uint64_t c0, uint64_t c1, uint64_t ver, uint64_t extent)
{
    hfs_ckey_t k;
    memset(&k, 0, sizeof k);
    k.ndims = nd;
    k.coord[0] = c0;
    if (nd > 1) k.coord[1] = c1;
    k.ver[0] = ver;
    k.extent = extent;
    return k;
}

/* ---- time and waiting ----------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait (polling) until *v >= val; 0 on timeout (a test that cannot set up its
 * interleaving must fail, never hang). */
static int wait_ge(atomic_int *v, int val, int timeout_ms)
{
    double end = now_s() + timeout_ms / 1000.0;
    while (atomic_load(v) < val) {
        if (now_s() > end) return 0;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* ---- layout callbacks ------------------------------------------------------ */

/* The assemble context (ctx argument of hfs_cache_get). */
typedef struct actx {
    int salt; /* which dataset's bytes to make */
    atomic_int calls;
    _Atomic uint64_t bytes;
    int fail_rc; /* when set, fail keys with coord[0] == fail_coord (-1: all) */
    long fail_coord;
    atomic_int *arrived; /* gate: wait until *arrived >= expect ... */
    int expect;
    int sleep_ms;       /* ... then sleep this long */
    atomic_int started; /* hold: set on entry, then wait for *go */
    atomic_int *go;
} actx_t;

static int t_assemble(void *ctx, const hfs_ckey_t *key, void *buf, size_t len)
{
    actx_t *a = ctx;
    atomic_fetch_add(&a->calls, 1);
    atomic_fetch_add(&a->bytes, (uint64_t)len);
    atomic_fetch_add(&a->started, 1);
    if (a->arrived) wait_ge(a->arrived, a->expect, 3000);
    if (a->go) wait_ge(a->go, 1, 3000);
    if (a->sleep_ms) sleep_ms(a->sleep_ms);
    if (a->fail_rc && (a->fail_coord < 0 || key->coord[0] == (uint64_t)a->fail_coord)) {
        memset(buf, 0xEE, len); /* garbage that must never be served */
        return a->fail_rc;
    }
    fill_ref(buf, key, len, a->salt);
    return 0;
}

#define LOGN 4096
/* The owner of a dataset (owner argument of hfs_cds_new). */
typedef struct owner {
    atomic_int nevict;
    _Atomic uint64_t evict_bytes;
    atomic_int bad;                       /* callback saw a wrong length / a non-resident key */
    size_t (*lenof)(const hfs_ckey_t *k); /* expected length per key, if set */
    unsigned char *resident;              /* model residency by coord[0], if set */
    size_t nresident;
    pthread_mutex_t mu;
    long log[LOGN]; /* coord[0] of evicted keys, in order */
    int nlog;
    /* race hook (test_evict_pin_window) */
    int hook;
    atomic_int phase;
    atomic_long first_coord;
    atomic_long second_ndims, second_coord;
} owner_t;

static void owner_init(owner_t *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->mu, NULL);
}

static void owner_fini(owner_t *o) { pthread_mutex_destroy(&o->mu); }

static void t_evicted(void *owner, const hfs_ckey_t *key, size_t len)
{
    owner_t *o = owner;
    if (o->hook) {
        /* First call: record the key, then wait until the test pinned the
         * other victim. Second call: wait until the test released it, then
         * read the key we were handed. */
        int ph = atomic_load(&o->phase);
        if (ph == 0) {
            atomic_store(&o->first_coord, (long)key->coord[0]);
            atomic_store(&o->phase, 1);
            wait_ge(&o->phase, 2, 3000);
        } else if (ph == 2) {
            atomic_store(&o->phase, 3);
            wait_ge(&o->phase, 4, 3000);
            atomic_store(&o->second_ndims, (long)key->ndims);
            atomic_store(&o->second_coord, (long)key->coord[0]);
        }
    }
    atomic_fetch_add(&o->nevict, 1);
    atomic_fetch_add(&o->evict_bytes, (uint64_t)len);
    if (o->lenof && o->lenof(key) != len) atomic_fetch_add(&o->bad, 1);
    pthread_mutex_lock(&o->mu);
    if (o->resident) {
        if (key->coord[0] >= o->nresident || !o->resident[key->coord[0]])
            atomic_fetch_add(&o->bad, 1);
        else
            o->resident[key->coord[0]] = 0;
    }
    if (o->nlog < LOGN) o->log[o->nlog++] = (long)key->coord[0];
    pthread_mutex_unlock(&o->mu);
}

static const hfs_layout_t layout = {t_assemble, t_evicted};

static hfs_cache_stats_t stats(hfs_cache_t *c)
{
    hfs_cache_stats_t s;
    memset(&s, 0xAB, sizeof s);
    hfs_cache_get_stats(c, &s);
    return s;
}

/* ---- 1. the limit is never exceeded, data always right -------------------- */

#define L1_LIMIT 32768u
static size_t l1_len(const hfs_ckey_t *k)
{
    uint64_t s = mix(k->coord[0] * 7 + k->ver[0], 99);
    uint64_t h = splitmix(&s);
    switch (h % 20) {
    case 0:
        return L1_LIMIT; /* exactly the limit */
    case 1:
        return L1_LIMIT + 1 + (size_t)(h >> 40) % L1_LIMIT; /* larger */
    case 2:
        return 3 * (size_t)L1_LIMIT;
    case 3:
        return 0; /* empty chunk */
    default:
        return 1 + (size_t)(h >> 32) % 8192;
    }
}

static void test_limit_never_exceeded(void)
{
    hfs_cache_t *c = hfs_cache_new(L1_LIMIT);
    CHECK(c != NULL);
    enum { ND = 3, NHOLD = 3, NOPS = 6000 };
    owner_t own[ND];
    actx_t ax[ND];
    hfs_cds_t *d[ND];
    for (int i = 0; i < ND; i++) {
        owner_init(&own[i]);
        own[i].lenof = l1_len;
        memset(&ax[i], 0, sizeof ax[i]);
        ax[i].salt = i + 1;
        d[i] = hfs_cds_new(c, &layout, &own[i]);
        CHECK(d[i] != NULL);
    }
    hfs_centry_t *held[NHOLD] = {0};
    hfs_ckey_t hkey[NHOLD];
    size_t hlen[NHOLD] = {0};
    int hsalt[NHOLD] = {0};
    int nheld = 0, hpos = 0;
    uint64_t rng = 42, cached_n = 0, cached_bytes = 0;
    int bad_mem = 0, bad_peak = 0, bad_data = 0, bad_null = 0, bad_big = 0, bad_held = 0;
    for (int op = 0; op < NOPS; op++) {
        uint64_t r = splitmix(&rng);
        int di = (int)(r % ND);
        hfs_ckey_t k = mkkey(2, (r >> 8) % 40, di, (r >> 16) % 2, 5);
        size_t len = l1_len(&k);
        int rc = 99, hit = 99;
        hfs_centry_t *e = hfs_cache_get(d[di], &k, len, &ax[di], &rc, &hit);
        if (len > L1_LIMIT && (e || rc != 0)) bad_big++;
        if (e) {
            if (!data_ok(hfs_centry_data(e), &k, len, di + 1)) bad_data++;
            if (!hit) {
                cached_n++;
                cached_bytes += len;
            }
        } else if (rc != 0 || (len <= L1_LIMIT && nheld == 0)) {
            bad_null++; /* nothing pinned: every chunk <= the limit must be cacheable */
        }
        hfs_cache_stats_t s = stats(c);
        if (s.mem > L1_LIMIT) bad_mem++;
        if (s.peak > L1_LIMIT) bad_peak++;
        if (e && (r >> 40) % 10 < 3) { /* hold it a while */
            if (held[hpos]) {
                if (!data_ok(hfs_centry_data(held[hpos]), &hkey[hpos], hlen[hpos], hsalt[hpos])) bad_held++;
                hfs_cache_release(held[hpos]);
                nheld--;
            }
            held[hpos] = e;
            hkey[hpos] = k;
            hlen[hpos] = len;
            hsalt[hpos] = di + 1;
            nheld++;
            hpos = (hpos + 1) % NHOLD;
        } else if (e) {
            hfs_cache_release(e);
        }
    }
    CHECK_EQ(bad_mem, 0);
    CHECK_EQ(bad_peak, 0);
    CHECK_EQ(bad_data, 0);
    CHECK_EQ(bad_null, 0);
    CHECK_EQ(bad_big, 0);
    hfs_cache_stats_t s = stats(c);
    CHECK(s.evictions > 0); /* the workload really was larger than the limit */
    CHECK(s.uncached > 0);  /* and had chunks larger than it */
    CHECK(s.peak == L1_LIMIT || s.peak > L1_LIMIT / 2);
    for (int i = 0; i < NHOLD; i++) {
        if (!held[i]) continue;
        if (!data_ok(hfs_centry_data(held[i]), &hkey[i], hlen[i], hsalt[i])) bad_held++;
        hfs_cache_release(held[i]);
    }
    CHECK_EQ(bad_held, 0);
    for (int i = 0; i < ND; i++) hfs_cds_close(d[i]);
    s = stats(c);
    CHECK_EQ(s.mem, 0);
    CHECK_EQ(s.entries, 0);
    /* every cached entry was dropped exactly once, with its own length */
    uint64_t ne = 0, nb = 0;
    for (int i = 0; i < ND; i++) {
        ne += (uint64_t)atomic_load(&own[i].nevict);
        nb += atomic_load(&own[i].evict_bytes);
        CHECK_EQ(atomic_load(&own[i].bad), 0);
        owner_fini(&own[i]);
    }
    CHECK_EQ(ne, cached_n);
    CHECK_EQ(nb, cached_bytes);
    hfs_cache_free(c);
}

/* ---- 2. eviction order and scan resistance -------------------------------- */

static void test_scan_resistance(void)
{
    const size_t limit = 64 * 1024, sz = 1024;
    hfs_cache_t *c = hfs_cache_new(limit);
    owner_t oa, ob;
    owner_init(&oa);
    owner_init(&ob);
    actx_t hot, scan;
    memset(&hot, 0, sizeof hot);
    memset(&scan, 0, sizeof scan);
    hot.salt = 1;
    scan.salt = 2;
    hfs_cds_t *da = hfs_cds_new(c, &layout, &oa), *db = hfs_cds_new(c, &layout, &ob);
    enum { NHOT = 8, NSCAN = 4000 };
    int rc, hit, bad = 0;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < NHOT; i++) {
            hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
            hfs_centry_t *e = hfs_cache_get(da, &k, sz, &hot, &rc, &hit);
            if (!e || hit != (round > 0) || !data_ok(hfs_centry_data(e), &k, sz, 1)) bad++;
            if (e) hfs_cache_release(e);
        }
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(atomic_load(&hot.calls), NHOT);
    /* a scan of 4000 one-time chunks: 62x the limit */
    for (int i = 0; i < NSCAN; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(db, &k, sz, &scan, &rc, &hit);
        if (!e || hit || !data_ok(hfs_centry_data(e), &k, sz, 2)) bad++;
        if (e) hfs_cache_release(e);
        if (stats(c).mem > limit) bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(atomic_load(&scan.calls), NSCAN);
    CHECK(stats(c).evictions >= NSCAN - limit / sz);
    CHECK_EQ(atomic_load(&oa.nevict), 0); /* not one hot chunk went */
    for (int i = 0; i < NHOT; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(da, &k, sz, &hot, &rc, &hit);
        CHECK(e != NULL);
        CHECK_EQ(hit, 1);
        if (e) {
            CHECK(data_ok(hfs_centry_data(e), &k, sz, 1));
            hfs_cache_release(e);
        }
    }
    CHECK_EQ(atomic_load(&hot.calls), NHOT); /* the hot set was never re-assembled */
    {                                        /* while the scan's head is long gone */
        hfs_ckey_t k = mkkey(1, 0, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(db, &k, sz, &scan, &rc, &hit);
        CHECK(e != NULL);
        CHECK_EQ(hit, 0);
        if (e) hfs_cache_release(e);
    }
    hfs_cds_close(da);
    hfs_cds_close(db);
    hfs_cache_free(c);
    owner_fini(&oa);
    owner_fini(&ob);

    /* plain single-pass fill: probation is a FIFO, the oldest go first */
    c = hfs_cache_new(16 * sz);
    owner_t o;
    owner_init(&o);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 3;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    for (int i = 0; i < 32; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 0, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
        if (i == 15) CHECK_EQ(o.nlog, 0); /* exactly full: nothing evicted yet */
    }
    CHECK_EQ(o.nlog, 16);
    for (int i = 0; i < o.nlog && i < 16; i++) CHECK_EQ(o.log[i], i);
    CHECK_EQ(stats(c).evictions, 16);
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);

    /* CLOCK bit: a probation entry hit once gets a second chance */
    c = hfs_cache_new(16 * sz);
    owner_init(&o);
    d = hfs_cds_new(c, &layout, &o);
    for (int i = 0; i < 16; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 0, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        if (e) hfs_cache_release(e);
    }
    for (int i = 0; i <= 5; i += 5) { /* hit 0 and 5 */
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 0, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK_EQ(hit, 1);
        if (e) hfs_cache_release(e);
    }
    for (int i = 16; i < 21; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 0, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        if (e) hfs_cache_release(e);
    }
    static const long want[] = {1, 2, 3, 4, 6};
    CHECK_EQ(o.nlog, 5);
    for (int i = 0; i < o.nlog && i < 5; i++) CHECK_EQ(o.log[i], want[i]);
    for (int i = 0; i <= 5; i += 5) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 0, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK_EQ(hit, 1);
        if (e) hfs_cache_release(e);
    }
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 3. version keys -------------------------------------------------------- */

static void test_version_keys(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o1, o2;
    owner_init(&o1);
    owner_init(&o2);
    actx_t a1, a2;
    memset(&a1, 0, sizeof a1);
    memset(&a2, 0, sizeof a2);
    a1.salt = 1;
    a2.salt = 2;
    hfs_cds_t *d1 = hfs_cds_new(c, &layout, &o1), *d2 = hfs_cds_new(c, &layout, &o2);
    enum { NK = 8 };
    hfs_ckey_t k[NK];
    k[0] = mkkey(2, 1, 2, 5, 7);
    k[1] = k[0], k[1].ver[0] = 6; /* newer tick */
    k[2] = k[0], k[2].ver[1] = 1; /* other rank */
    k[3] = k[0], k[3].ver[2] = 1; /* other order */
    k[4] = k[0], k[4].extent = 8; /* clipped differently */
    k[5] = mkkey(2, 2, 1, 5, 7);  /* coordinates swapped */
    k[6] = mkkey(3, 1, 2, 5, 7);  /* one more dimension (coord[2] == 0) */
    k[7] = mkkey(1, 1, 0, 5, 7);  /* one dimension fewer */
    const size_t len = 3000;
    int rc, hit;
    /* newest version first: caching an older version of a chunk does not
     * drop a newer one (test_superseded covers the other order) */
    static const int order[NK] = {1, 2, 3, 0, 4, 5, 6, 7};
    for (int j = 0; j < NK; j++) {
        int i = order[j];
        hfs_centry_t *e = hfs_cache_get(d1, &k[i], len, &a1, &rc, &hit);
        CHECK(e != NULL);
        CHECK_EQ(hit, 0);
        CHECK_EQ(atomic_load(&a1.calls), j + 1);
        if (e) {
            CHECK(data_ok(hfs_centry_data(e), &k[i], len, 1));
            hfs_cache_release(e);
        }
    }
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NK; i++) {
            hfs_ckey_t q = k[i]; /* an equal key in another buffer */
            hfs_centry_t *e = hfs_cache_get(d1, &q, len, &a1, &rc, &hit);
            CHECK(e != NULL);
            CHECK_EQ(hit, 1);
            if (e) {
                CHECK(data_ok(hfs_centry_data(e), &k[i], len, 1));
                hfs_cache_release(e);
            }
        }
    }
    CHECK_EQ(atomic_load(&a1.calls), NK);
    /* the same key in another dataset is another chunk */
    hfs_centry_t *e = hfs_cache_get(d2, &k[0], len, &a2, &rc, &hit);
    CHECK(e != NULL);
    CHECK_EQ(hit, 0);
    CHECK_EQ(atomic_load(&a2.calls), 1);
    if (e) {
        CHECK(data_ok(hfs_centry_data(e), &k[0], len, 2));
        hfs_cache_release(e);
    }
    e = hfs_cache_get(d1, &k[0], len, &a1, &rc, &hit);
    CHECK(e && hit == 1 && data_ok(hfs_centry_data(e), &k[0], len, 1));
    if (e) hfs_cache_release(e);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.entries, NK + 1);
    CHECK_EQ(s.mem, (NK + 1) * len);
    CHECK_EQ(s.misses, NK + 1);
    CHECK_EQ(s.hits, 2 * NK + 1);
    hfs_cds_close(d1);
    hfs_cds_close(d2);
    CHECK_EQ(stats(c).mem, 0);
    hfs_cache_free(c);
    owner_fini(&o1);
    owner_fini(&o2);
}

/* ---- 4. pinned entries are not evicted -------------------------------------- */

static void test_pinned_not_evicted(void)
{
    const size_t sz = 4096, limit = 4 * 4096;
    hfs_cache_t *c = hfs_cache_new(limit);
    owner_t o;
    owner_init(&o);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 4;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    int rc, hit;
    hfs_centry_t *h[4];
    hfs_ckey_t hk[4];
    for (int i = 0; i < 4; i++) {
        hk[i] = mkkey(1, (uint64_t)i, 0, 1, 0);
        h[i] = hfs_cache_get(d, &hk[i], sz, &ax, &rc, &hit);
        CHECK(h[i] != NULL);
    }
    CHECK_EQ(stats(c).mem, limit);
    uint64_t unc0 = stats(c).uncached;
    int bad = 0;
    for (int i = 10; i < 20; i++) { /* everything pinned: nothing fits */
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        rc = 99;
        hfs_centry_t *e = hfs_cache_get(d, &k, i == 19 ? 1 : sz, &ax, &rc, &hit);
        if (e || rc != 0 || hit) bad++;
        if (e) hfs_cache_release(e);
        if (stats(c).mem > limit || stats(c).peak > limit) bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(stats(c).uncached - unc0, 10);
    CHECK_EQ(atomic_load(&ax.calls), 4); /* "not cached": the caller assembles */
    CHECK_EQ(atomic_load(&o.nevict), 0);
    for (int i = 0; i < 4; i++)
        if (h[i]) CHECK(data_ok(hfs_centry_data(h[i]), &hk[i], sz, 4));
    /* a held entry is still a hit (and a second pin) */
    hfs_centry_t *e2 = hfs_cache_get(d, &hk[2], sz, &ax, &rc, &hit);
    CHECK(e2 == h[2]);
    CHECK_EQ(hit, 1);
    if (e2) hfs_cache_release(e2);
    /* release one: exactly that one makes room */
    if (h[3]) hfs_cache_release(h[3]);
    {
        hfs_ckey_t k = mkkey(1, 20, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
        CHECK_EQ(o.nlog, 1);
        if (o.nlog >= 1) CHECK_EQ(o.log[0], 3);
    }
    for (int i = 0; i < 3; i++) {
        if (!h[i]) continue;
        CHECK(data_ok(hfs_centry_data(h[i]), &hk[i], sz, 4));
        hfs_cache_release(h[i]);
    }
    /* after release, eviction proceeds: new chunks are cached again */
    for (int i = 21; i < 24; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
        CHECK(stats(c).mem <= limit);
    }
    CHECK_EQ(o.nlog, 4);
    { /* a chunk as large as the limit pushes every unpinned entry out */
        hfs_ckey_t k = mkkey(1, 30, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, limit, &ax, &rc, &hit);
        CHECK(e != NULL);
        if (e) {
            CHECK(data_ok(hfs_centry_data(e), &k, limit, 4));
            hfs_cache_release(e);
        }
        hfs_cache_stats_t s = stats(c);
        CHECK_EQ(s.mem, limit);
        CHECK_EQ(s.entries, 1);
        int seen[3] = {0};
        for (int i = 0; i < o.nlog; i++)
            if (o.log[i] >= 0 && o.log[i] < 3) seen[o.log[i]]++;
        CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1); /* the once-pinned went too */
    }
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 5. concurrent misses on one chunk ---------------------------------------- */

typedef struct cm_arg {
    hfs_cds_t *d;
    const hfs_ckey_t *key;
    size_t len;
    actx_t *ax;
    atomic_int *arrived;
    pthread_barrier_t *bar;
    hfs_centry_t *e;
    int rc, hit;
} cm_arg_t;

static void *cm_thread(void *p)
{
    cm_arg_t *a = p;
    pthread_barrier_wait(a->bar);
    atomic_fetch_add(a->arrived, 1);
    a->e = hfs_cache_get(a->d, a->key, a->len, a->ax, &a->rc, &a->hit);
    return NULL;
}

static void test_concurrent_miss(void)
{
    enum { NT = 8 };
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o;
    owner_init(&o);
    atomic_int arrived = 0;
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 5;
    ax.arrived = &arrived; /* the loader waits until all 8 called get ... */
    ax.expect = NT;
    ax.sleep_ms = 20; /* ... and then 20 ms more */
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    hfs_ckey_t k = mkkey(3, 4, 5, 6, 7);
    const size_t len = 50000;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    cm_arg_t a[NT];
    pthread_t t[NT];
    for (int i = 0; i < NT; i++) {
        a[i] = (cm_arg_t){d, &k, len, &ax, &arrived, &bar, NULL, 99, 99};
        pthread_create(&t[i], NULL, cm_thread, &a[i]);
    }
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    CHECK_EQ(atomic_load(&ax.calls), 1);
    int nhit = 0;
    for (int i = 0; i < NT; i++) {
        CHECK(a[i].e != NULL);
        CHECK_EQ(a[i].rc, 0);
        nhit += a[i].hit;
        if (!a[i].e) continue;
        CHECK(a[i].e == a[0].e); /* one entry, shared */
        CHECK(data_ok(hfs_centry_data(a[i].e), &k, len, 5));
    }
    CHECK_EQ(nhit, NT - 1);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.misses, 1);
    CHECK_EQ(s.hits + s.waits, NT - 1);
    CHECK(s.waits >= 1);
    if (s.waits != NT - 1)
        fprintf(stderr, "  note: %llu of %d lookups waited (timing)\n", (unsigned long long)s.waits, NT - 1);
    CHECK_EQ(s.bytes_assembled, len);
    CHECK_EQ(s.mem, len);
    for (int i = 0; i < NT; i++)
        if (a[i].e) hfs_cache_release(a[i].e);
    hfs_cds_close(d);
    CHECK_EQ(stats(c).mem, 0);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 6. stress: 8 threads, 2 datasets, a small limit ---------------------------- */

#define ST_LIMIT (32u * 1024u)
static size_t st_len(const hfs_ckey_t *k)
{
    uint64_t s = mix(k->coord[0], k->ver[0] + 1000);
    uint64_t h = splitmix(&s);
    if (h % 64 == 0) return ST_LIMIT;
    if (h % 64 == 1) return ST_LIMIT + 100;
    return 256 + (size_t)(h >> 20) % 4096;
}

typedef struct st_arg {
    hfs_cache_t *c;
    hfs_cds_t *d[2];
    actx_t *ax[2];
    double end;
    uint64_t seed;
    uint64_t gets, cached_miss, bad_data, bad_rc, bad_mem;
} st_arg_t;

static void *st_thread(void *p)
{
    st_arg_t *a = p;
    uint64_t rng = a->seed;
    hfs_centry_t *held = NULL;
    hfs_ckey_t hk;
    size_t hl = 0;
    int hs = 0;
    while (now_s() < a->end) {
        for (int burst = 0; burst < 64; burst++) {
            uint64_t r = splitmix(&rng);
            int di = (int)(r & 1);
            hfs_ckey_t k = mkkey(1, (r >> 8) % 96, 0, (r >> 16) % 2, di);
            size_t len = st_len(&k);
            int rc = 99, hit = 99;
            hfs_centry_t *e = hfs_cache_get(a->d[di], &k, len, a->ax[di], &rc, &hit);
            a->gets++;
            if (e) {
                if (!data_ok(hfs_centry_data(e), &k, len, di + 1)) a->bad_data++;
                if (!hit) a->cached_miss++;
            } else if (rc != 0) {
                a->bad_rc++;
            }
            if ((r >> 32) % 16 == 0) {
                hfs_cache_stats_t s;
                hfs_cache_get_stats(a->c, &s);
                if (s.mem > ST_LIMIT || s.peak > ST_LIMIT) a->bad_mem++;
            }
            if (e && (r >> 40) % 4 == 0) { /* keep one pinned across the next gets */
                if (held) {
                    if (!data_ok(hfs_centry_data(held), &hk, hl, hs)) a->bad_data++;
                    hfs_cache_release(held);
                }
                held = e, hk = k, hl = len, hs = di + 1;
            } else if (e) {
                hfs_cache_release(e);
            }
        }
    }
    if (held) {
        if (!data_ok(hfs_centry_data(held), &hk, hl, hs)) a->bad_data++;
        hfs_cache_release(held);
    }
    return NULL;
}

static void test_stress_threads(void)
{
    enum { NT = 8 };
    hfs_cache_t *c = hfs_cache_new(ST_LIMIT);
    owner_t o[2];
    actx_t ax[2];
    hfs_cds_t *d[2];
    for (int i = 0; i < 2; i++) {
        owner_init(&o[i]);
        o[i].lenof = st_len;
        memset(&ax[i], 0, sizeof ax[i]);
        ax[i].salt = i + 1;
        d[i] = hfs_cds_new(c, &layout, &o[i]);
    }
    st_arg_t a[NT];
    pthread_t t[NT];
    double end = now_s() + 1.0;
    for (int i = 0; i < NT; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].c = c;
        a[i].d[0] = d[0], a[i].d[1] = d[1];
        a[i].ax[0] = &ax[0], a[i].ax[1] = &ax[1];
        a[i].end = end;
        a[i].seed = 1000 + (uint64_t)i;
        pthread_create(&t[i], NULL, st_thread, &a[i]);
    }
    uint64_t gets = 0, cached = 0, bdata = 0, brc = 0, bmem = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(t[i], NULL);
        gets += a[i].gets, cached += a[i].cached_miss;
        bdata += a[i].bad_data, brc += a[i].bad_rc, bmem += a[i].bad_mem;
    }
    CHECK(gets > 1000);
    CHECK_EQ(bdata, 0);
    CHECK_EQ(brc, 0);
    CHECK_EQ(bmem, 0);
    hfs_cache_stats_t s = stats(c);
    CHECK(s.mem <= ST_LIMIT);
    CHECK(s.peak <= ST_LIMIT);
    CHECK(s.evictions > 0);
    CHECK_EQ(s.hits + s.waits + s.misses, gets);
    CHECK_EQ(s.bytes_assembled, atomic_load(&ax[0].bytes) + atomic_load(&ax[1].bytes));
    hfs_cds_close(d[0]);
    hfs_cds_close(d[1]);
    s = stats(c);
    CHECK_EQ(s.mem, 0);
    CHECK_EQ(s.entries, 0);
    uint64_t ne = (uint64_t)atomic_load(&o[0].nevict) + (uint64_t)atomic_load(&o[1].nevict);
    CHECK_EQ(ne, cached);                     /* every cached entry dropped exactly once */
    CHECK_EQ(s.evictions + s.superseded, ne); /* superseded versions are dropped too */
    CHECK_EQ(atomic_load(&o[0].bad) + atomic_load(&o[1].bad), 0);
    hfs_cache_free(c);
    owner_fini(&o[0]);
    owner_fini(&o[1]);
}

/* ---- 7. assembly failure ---------------------------------------------------------- */

static void test_assembly_failure(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o;
    owner_init(&o);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 7;
    ax.fail_rc = H5L_EIO;
    ax.fail_coord = -1;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    hfs_ckey_t k = mkkey(1, 9, 0, 1, 0);
    const size_t len = 5000;
    int rc = 99, hit = 99;
    hfs_centry_t *e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
    CHECK(e == NULL);
    CHECK_EQ(rc, H5L_EIO);
    CHECK_EQ(hit, 0);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.mem, 0); /* the failed entry is gone, and uncharged */
    CHECK_EQ(s.entries, 0);
    CHECK_EQ(atomic_load(&o.nevict), 0);
    /* a later get retries */
    e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
    CHECK(e == NULL);
    CHECK_EQ(rc, H5L_EIO);
    CHECK_EQ(atomic_load(&ax.calls), 2);
    ax.fail_rc = 0;
    e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
    CHECK(e != NULL);
    CHECK_EQ(rc, 0);
    CHECK_EQ(hit, 0);
    CHECK_EQ(atomic_load(&ax.calls), 3);
    if (e) {
        CHECK(data_ok(hfs_centry_data(e), &k, len, 7));
        hfs_cache_release(e);
    }
    e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
    CHECK(e && hit == 1);
    if (e) hfs_cache_release(e);
    s = stats(c);
    CHECK_EQ(s.hits + s.waits + s.misses, 4);

    /* concurrent waiters on a failing key all get the error */
    enum { NT = 8 };
    atomic_int arrived = 0;
    actx_t fx;
    memset(&fx, 0, sizeof fx);
    fx.salt = 7;
    fx.fail_rc = H5L_EIO;
    fx.fail_coord = -1;
    fx.arrived = &arrived;
    fx.expect = NT;
    fx.sleep_ms = 20;
    hfs_ckey_t k2 = mkkey(1, 10, 0, 1, 0);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NT);
    cm_arg_t a[NT];
    pthread_t t[NT];
    uint64_t gets0 = s.hits + s.waits + s.misses;
    for (int i = 0; i < NT; i++) {
        a[i] = (cm_arg_t){d, &k2, len, &fx, &arrived, &bar, NULL, 99, 99};
        pthread_create(&t[i], NULL, cm_thread, &a[i]);
    }
    for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    CHECK_EQ(atomic_load(&fx.calls), 1); /* the waiters shared the failure */
    for (int i = 0; i < NT; i++) {
        CHECK(a[i].e == NULL);
        CHECK_EQ(a[i].rc, H5L_EIO);
        if (a[i].e) hfs_cache_release(a[i].e);
    }
    s = stats(c);
    CHECK_EQ(s.hits + s.waits + s.misses - gets0, NT); /* every lookup counted once */
    CHECK_EQ(s.mem, len);                              /* only k is cached */
    CHECK_EQ(s.entries, 1);
    /* and the next get retries and succeeds */
    fx.fail_rc = 0;
    fx.arrived = NULL;
    fx.sleep_ms = 0;
    e = hfs_cache_get(d, &k2, len, &fx, &rc, &hit);
    CHECK(e != NULL);
    CHECK_EQ(rc, 0);
    CHECK_EQ(hit, 0);
    CHECK_EQ(atomic_load(&fx.calls), 2);
    if (e) {
        CHECK(data_ok(hfs_centry_data(e), &k2, len, 7));
        hfs_cache_release(e);
    }
    hfs_cds_close(d);
    CHECK_EQ(stats(c).mem, 0);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 8. hfs_cds_close with entries still pinned ------------------------------------ */

typedef struct ld_arg {
    hfs_cds_t *d;
    hfs_ckey_t key;
    size_t len;
    actx_t *ax;
    hfs_centry_t *e;
    int rc, hit, ok;
} ld_arg_t;

static void *ld_thread(void *p)
{
    ld_arg_t *a = p;
    a->e = hfs_cache_get(a->d, &a->key, a->len, a->ax, &a->rc, &a->hit);
    a->ok = a->e && data_ok(hfs_centry_data(a->e), &a->key, a->len, a->ax->salt);
    return NULL;
}

static void test_close_pinned(void)
{
    const size_t limit = 64 * 1024, sz = 8192;
    hfs_cache_t *c = hfs_cache_new(limit);
    owner_t o1, o2;
    owner_init(&o1);
    owner_init(&o2);
    actx_t a1, a2;
    memset(&a1, 0, sizeof a1);
    memset(&a2, 0, sizeof a2);
    a1.salt = 1;
    a2.salt = 2;
    hfs_cds_t *d1 = hfs_cds_new(c, &layout, &o1), *d2 = hfs_cds_new(c, &layout, &o2);
    int rc, hit;
    /* d1: two READY entries, one held; d2: one entry */
    hfs_ckey_t ka = mkkey(1, 0, 0, 1, 0), kb = mkkey(1, 1, 0, 1, 0), kc = mkkey(1, 2, 0, 1, 0);
    hfs_centry_t *ea = hfs_cache_get(d1, &ka, sz, &a1, &rc, &hit);
    hfs_centry_t *eb = hfs_cache_get(d1, &kb, sz, &a1, &rc, &hit);
    hfs_centry_t *ec = hfs_cache_get(d2, &kc, sz, &a2, &rc, &hit);
    CHECK(ea && eb && ec);
    if (eb) hfs_cache_release(eb);
    if (ec) hfs_cache_release(ec);
    CHECK_EQ(stats(c).mem, 3 * sz);
    hfs_cds_close(d1); /* ea still pinned */
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.mem, 2 * sz); /* kb freed; ka held, still charged */
    CHECK_EQ(s.entries, 2);
    if (ea) {
        CHECK(data_ok(hfs_centry_data(ea), &ka, sz, 1));
        hfs_cache_release(ea); /* frees ka, and d1 with it */
    }
    s = stats(c);
    CHECK_EQ(s.mem, sz);
    CHECK_EQ(s.entries, 1);
    CHECK_EQ(atomic_load(&o1.nevict), 2);
    int ev_closed = atomic_load(&o1.nevict);
    /* d2 still works */
    hfs_centry_t *e = hfs_cache_get(d2, &kc, sz, &a2, &rc, &hit);
    CHECK(e && hit == 1 && data_ok(hfs_centry_data(e), &kc, sz, 2));
    if (e) hfs_cache_release(e);

    /* close while an entry of the dataset is LOADING (pinned by its loader) */
    owner_t o3;
    owner_init(&o3);
    atomic_int go = 0;
    actx_t a3;
    memset(&a3, 0, sizeof a3);
    a3.salt = 3;
    a3.go = &go;
    hfs_cds_t *d3 = hfs_cds_new(c, &layout, &o3);
    ld_arg_t la = {d3, mkkey(1, 7, 0, 1, 0), sz, &a3, NULL, 99, 99, 0};
    pthread_t t;
    pthread_create(&t, NULL, ld_thread, &la);
    CHECK(wait_ge(&a3.started, 1, 3000));
    hfs_cds_close(d3); /* the owner is done while its chunk is being assembled */
    int ev3 = atomic_load(&o3.nevict);
    atomic_store(&go, 1);
    pthread_join(t, NULL);
    CHECK(la.e != NULL); /* the loader still gets its data ... */
    CHECK(la.ok);
    if (la.e) hfs_cache_release(la.e);
    s = stats(c);
    CHECK_EQ(s.mem, sz); /* ... but nothing of d3 stays cached: only kc */
    CHECK_EQ(s.entries, 1);
    /* churn the cache: no callback may reach the closed owners any more */
    for (int i = 100; i < 120; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        e = hfs_cache_get(d2, &k, sz, &a2, &rc, &hit);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
    }
    CHECK_EQ(atomic_load(&o1.nevict), ev_closed);
    CHECK_EQ(atomic_load(&o3.nevict), ev3);
    hfs_cds_close(d2);
    s = stats(c);
    CHECK_EQ(s.mem, 0);
    CHECK_EQ(s.entries, 0);
    CHECK_EQ(s.evictions,
             (uint64_t)atomic_load(&o1.nevict) + (uint64_t)atomic_load(&o2.nevict) + (uint64_t)atomic_load(&o3.nevict));
    hfs_cache_free(c); /* under ASan: nothing of d1/d3 may leak */
    owner_fini(&o1);
    owner_fini(&o2);
    owner_fini(&o3);
}

/* ---- 9. stats arithmetic against a model -------------------------------------------- */

#define SM_LIMIT 8192u
#define SM_NK 24
static size_t sm_len(const hfs_ckey_t *k)
{
    if (k->coord[0] == 20) return SM_LIMIT;
    if (k->coord[0] == 21) return SM_LIMIT + 808;
    return 512 * (1 + (size_t)(k->coord[0] % 4)) + (size_t)k->coord[0];
}

static void test_stats_arithmetic(void)
{
    hfs_cache_t *c = hfs_cache_new(SM_LIMIT);
    owner_t o;
    owner_init(&o);
    unsigned char resident[SM_NK] = {0};
    o.lenof = sm_len;
    o.resident = resident;
    o.nresident = SM_NK;
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 9;
    ax.fail_rc = H5L_EIO;
    ax.fail_coord = 22; /* key 22 never assembles */
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    uint64_t gets = 0, hits = 0, misses = 0, uncached = 0, asm_bytes = 0, hit_bytes = 0, cached = 0, skipped = 0;
    uint64_t rng = 7;
    int bad_model = 0, bad_stats = 0, bad_data = 0;
    for (int op = 0; op < 3000; op++) {
        uint64_t r = splitmix(&rng);
        hfs_ckey_t k = mkkey(1, r % SM_NK, 0, 0, 0);
        size_t len = sm_len(&k);
        int was_res = resident[k.coord[0]];
        int rc = 99, hit = 99;
        hfs_centry_t *e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
        gets++;
        if (len > SM_LIMIT) {
            misses++, uncached++;
            if (e || rc != 0 || hit) bad_model++;
        } else if (k.coord[0] == 22) {
            misses++, asm_bytes += len;
            if (e || rc != H5L_EIO || hit) bad_model++;
        } else if (was_res) {
            /* the caller counts what it served of the chunk: here half */
            hits++, hit_bytes += len / 2;
            hfs_cache_count_hit(c, len / 2);
            if (!e || !hit) bad_model++;
        } else {
            misses++, asm_bytes += len, cached++;
            if (!e || hit) bad_model++;
            resident[k.coord[0]] = 1;
        }
        if (e) {
            if (!data_ok(hfs_centry_data(e), &k, len, 9)) bad_data++;
            hfs_cache_release(e);
        }
        if (r % 97 == 0) {
            hfs_cache_count_skip(c, 123);
            skipped += 123;
        }
        uint64_t mem = 0, ent = 0;
        for (int i = 0; i < SM_NK; i++)
            if (resident[i]) {
                hfs_ckey_t q = mkkey(1, (uint64_t)i, 0, 0, 0);
                mem += sm_len(&q), ent++;
            }
        hfs_cache_stats_t s = stats(c);
        if (s.hits != hits || s.misses != misses || s.waits != 0 || s.uncached != uncached ||
            s.bytes_assembled != asm_bytes || s.bytes_hit != hit_bytes || s.bytes_skipped != skipped ||
            s.evictions != (uint64_t)atomic_load(&o.nevict) || s.mem != mem || s.entries != ent ||
            s.limit != SM_LIMIT || s.peak > SM_LIMIT || s.hits + s.waits + s.misses != gets)
            bad_stats++;
    }
    CHECK_EQ(bad_model, 0);
    CHECK_EQ(bad_stats, 0);
    CHECK_EQ(bad_data, 0);
    CHECK_EQ(atomic_load(&o.bad), 0); /* evicted: resident keys only, right lengths */
    CHECK(atomic_load(&o.nevict) > 100);
    CHECK_EQ(atomic_load(&ax.bytes), asm_bytes);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.peak, SM_LIMIT); /* key 20 filled it exactly */
    hfs_cds_close(d);
    for (int i = 0; i < SM_NK; i++) CHECK_EQ(resident[i], 0); /* close dropped each once */
    CHECK_EQ(atomic_load(&o.nevict), cached);
    CHECK_EQ(atomic_load(&o.bad), 0);
    s = stats(c);
    CHECK_EQ(s.evictions, cached);
    CHECK_EQ(s.mem, 0);
    CHECK_EQ(s.entries, 0);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 10. a victim pinned between selection and unlinking ------------------------------ */

typedef struct big_arg {
    hfs_cds_t *d;
    actx_t *ax;
    size_t len;
    hfs_centry_t *e;
    int rc, hit;
} big_arg_t;

static void *big_thread(void *p)
{
    big_arg_t *a = p;
    hfs_ckey_t k = mkkey(1, 2, 0, 1, 0);
    a->e = hfs_cache_get(a->d, &k, a->len, a->ax, &a->rc, &a->hit);
    return NULL;
}

/* Two victims, chosen together: while the evicted callback of the first
 * runs, a reader pins the second (still in the index); the reader releases
 * it while the evictor is handing it to the second callback. The callback
 * must be given a key that is still valid (not the freed entry's). */
static void test_evict_pin_window(void)
{
    fflush(stdout); /* a sanitizer abort below must not lose earlier results */
    const size_t sz = 4096;
    hfs_cache_t *c = hfs_cache_new(2 * sz);
    owner_t o;
    owner_init(&o);
    o.hook = 1;
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 10;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    int rc, hit;
    for (int i = 0; i < 2; i++) {
        hfs_ckey_t k = mkkey(1, (uint64_t)i, 0, 1, 0);
        hfs_centry_t *e = hfs_cache_get(d, &k, sz, &ax, &rc, &hit);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
    }
    atomic_store(&o.second_ndims, -1);
    atomic_store(&o.second_coord, -1);
    big_arg_t ba = {d, &ax, 2 * sz, NULL, 99, 99}; /* as large as the limit: both must go */
    pthread_t t;
    pthread_create(&t, NULL, big_thread, &ba);
    CHECK(wait_ge(&o.phase, 1, 3000)); /* first victim's callback is running */
    long other = 1 - atomic_load(&o.first_coord);
    hfs_ckey_t ko = mkkey(1, (uint64_t)other, 0, 1, 0);
    hfs_centry_t *p = hfs_cache_get(d, &ko, sz, &ax, &rc, &hit);
    CHECK(p != NULL);
    if (p) CHECK(data_ok(hfs_centry_data(p), &ko, sz, 10));
    atomic_store(&o.phase, 2);
    int second = wait_ge(&o.phase, 3, 1000); /* its callback is running */
    if (p) hfs_cache_release(p);
    atomic_store(&o.phase, 4);
    pthread_join(t, NULL);
    if (second) {
        CHECK_EQ(atomic_load(&o.second_ndims), 1);
        CHECK_EQ(atomic_load(&o.second_coord), other);
    }
    CHECK(ba.e != NULL);
    if (ba.e) {
        hfs_ckey_t kb = mkkey(1, 2, 0, 1, 0);
        CHECK(data_ok(hfs_centry_data(ba.e), &kb, 2 * sz, 10));
        hfs_cache_release(ba.e);
    }
    CHECK_EQ(atomic_load(&o.nevict), 2);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.mem, 2 * sz);
    CHECK_EQ(s.entries, 1);
    hfs_cds_close(d);
    CHECK_EQ(stats(c).mem, 0);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- 9. peek: a hit if cached and ready, else nothing at all ------------- */

static void test_peek(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o;
    owner_init(&o);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 4;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    hfs_ckey_t k = mkkey(2, 3, 5, 1, 0), other = mkkey(2, 3, 5, 2, 0); /* same chunk, newer version */
    /* absent: NULL, nothing assembled, inserted or counted */
    CHECK(hfs_cache_peek(d, &k) == NULL);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.hits + s.misses + s.waits + s.entries, 0);
    CHECK_EQ(atomic_load(&ax.calls), 0);
    int rc = 1, hit = 1;
    hfs_centry_t *e = hfs_cache_get(d, &k, 1000, &ax, &rc, &hit);
    CHECK(e != NULL && rc == 0 && !hit);
    if (e) hfs_cache_release(e);
    /* present: the same bytes, pinned, counted as a hit */
    e = hfs_cache_peek(d, &k);
    CHECK(e != NULL);
    if (e) {
        CHECK(data_ok(hfs_centry_data(e), &k, 1000, 4));
        hfs_cache_release(e);
    }
    s = stats(c);
    CHECK_EQ(s.hits, 1);
    CHECK_EQ(s.misses, 1);
    /* another version of the chunk is another key */
    CHECK(hfs_cache_peek(d, &other) == NULL);
    CHECK_EQ(stats(c).hits, 1);
    CHECK_EQ(atomic_load(&ax.calls), 1);
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* hfs_cache_put (siblings assembled in one pass, lfile.c): caches a key
 * that is absent, and never waits for an entry another thread is
 * assembling (two threads filling overlapping siblings would otherwise
 * wait for each other): with a LOADING entry held by a thread blocked on
 * a gate, a put of that key returns 0 at once and assembles nothing; a
 * put of a cached key returns 0; a failing assembly returns its code and
 * caches nothing. */
static atomic_int put_go;
static void *put_holder(void *arg)
{
    void **a = arg;
    int rc = 0, hit = 0;
    hfs_centry_t *e = hfs_cache_get(a[0], a[1], 1000, a[2], &rc, &hit);
    if (e) hfs_cache_release(e);
    return NULL;
}

static void test_put(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o;
    owner_init(&o);
    actx_t ax, hold;
    memset(&ax, 0, sizeof ax);
    memset(&hold, 0, sizeof hold);
    ax.salt = hold.salt = 6;
    hold.go = &put_go;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    hfs_ckey_t k = mkkey(1, 2, 3, 1, 0), busy = mkkey(1, 9, 3, 1, 0), bad = mkkey(1, 4, 3, 1, 0);
    CHECK_EQ(hfs_cache_put(d, &k, 1000, &ax), 1);
    CHECK_EQ(hfs_cache_put(d, &k, 1000, &ax), 0); /* cached already */
    CHECK_EQ(atomic_load(&ax.calls), 1);
    hfs_centry_t *e = hfs_cache_peek(d, &k);
    CHECK(e != NULL);
    if (e) {
        CHECK(data_ok(hfs_centry_data(e), &k, 1000, 6));
        hfs_cache_release(e);
    }
    /* a key another thread is assembling: no wait, nothing done */
    pthread_t th;
    void *args[3] = {d, &busy, &hold};
    pthread_create(&th, NULL, put_holder, args);
    while (atomic_load(&hold.started) == 0) sleep_ms(1);
    CHECK_EQ(hfs_cache_put(d, &busy, 1000, &ax), 0);
    CHECK_EQ(atomic_load(&ax.calls), 1);
    atomic_store(&put_go, 1);
    pthread_join(th, NULL);
    /* a failing assembly: its code, nothing cached */
    ax.fail_rc = H5L_EIO;
    ax.fail_coord = 4;
    CHECK_EQ(hfs_cache_put(d, &bad, 1000, &ax), H5L_EIO);
    CHECK(hfs_cache_peek(d, &bad) == NULL);
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- reserve and publish (siblings filled in one pass) ------------------------- */

static atomic_int rp_waiting;
static void *rp_getter(void *arg)
{
    void **a = arg;
    int rc = 0, hit = 0;
    atomic_fetch_add(&rp_waiting, 1);
    hfs_centry_t *e = hfs_cache_get(a[0], a[1], 1000, a[2], &rc, &hit);
    long *out = a[3];
    out[0] = rc;
    out[1] = hit;
    out[2] = e ? data_ok(hfs_centry_data(e), a[1], 1000, 7) : -1;
    if (e) hfs_cache_release(e);
    return NULL;
}

/* A reserved chunk is in the index from the reservation on: a reader of it
 * waits for its publication and then gets the filler's bytes (never
 * assembles it itself), a second reservation or put of the key is refused
 * at once, a failed publication hands its code to the waiter and caches
 * nothing, and the memory is charged while reserved. */
static void test_reserve_publish(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o;
    owner_init(&o);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 8; /* what the cache would assemble: never the filler's salt 7 */
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o);
    hfs_ckey_t k = mkkey(1, 5, 1, 1, 0), k2 = mkkey(1, 6, 1, 1, 0);
    hfs_centry_t *e = hfs_cache_reserve(d, &k, 1000);
    CHECK(e != NULL);
    CHECK(hfs_cache_reserve(d, &k, 1000) == NULL);
    CHECK_EQ(hfs_cache_put(d, &k, 1000, &ax), 0);
    CHECK(hfs_cache_peek(d, &k) == NULL); /* not ready */
    CHECK_EQ(stats(c).mem, 1000);
    long got[3] = {99, 99, 99};
    void *args[4] = {d, &k, &ax, got};
    pthread_t th;
    pthread_create(&th, NULL, rp_getter, args);
    while (atomic_load(&rp_waiting) == 0) sleep_ms(1);
    sleep_ms(20); /* the getter is now waiting on the reservation */
    if (e) {
        fill_ref(hfs_centry_buf(e), &k, 1000, 7);
        CHECK_EQ(hfs_cache_publish(e, 0), 1);
    }
    pthread_join(th, NULL);
    CHECK_EQ(got[0], 0);
    CHECK_EQ(got[1], 1);
    CHECK_EQ(got[2], 1);
    CHECK_EQ(atomic_load(&ax.calls), 0);
    /* a failed fill: the waiter gets its code, nothing stays */
    atomic_store(&rp_waiting, 0);
    hfs_centry_t *e2 = hfs_cache_reserve(d, &k2, 1000);
    CHECK(e2 != NULL);
    long got2[3] = {99, 99, 99};
    void *args2[4] = {d, &k2, &ax, got2};
    pthread_create(&th, NULL, rp_getter, args2);
    while (atomic_load(&rp_waiting) == 0) sleep_ms(1);
    sleep_ms(20);
    if (e2) CHECK_EQ(hfs_cache_publish(e2, H5L_EIO), H5L_EIO);
    pthread_join(th, NULL);
    CHECK_EQ(got2[0], H5L_EIO);
    CHECK_EQ(got2[2], -1);
    CHECK(hfs_cache_peek(d, &k2) == NULL);
    CHECK_EQ(stats(c).mem, 1000);
    hfs_cds_close(d);
    hfs_cache_free(c);
    owner_fini(&o);
}

/* ---- superseded versions ------------------------------------------------------ */

/* A live file's chunk gets a new content version every tick; without this
 * every version stayed cached until the memory limit (643 MB after 100
 * ticks of 100 variables). Caching version N of a chunk must drop the
 * cached versions older than N of that chunk (any clipped extent: an edge
 * chunk grows), pinned ones at their release, and nothing else: other
 * chunks, other datasets, and newer versions when an old snapshot caches
 * its older version late. */
static void test_superseded(void)
{
    hfs_cache_t *c = hfs_cache_new(1 << 20);
    owner_t o, o2;
    owner_init(&o);
    owner_init(&o2);
    actx_t ax;
    memset(&ax, 0, sizeof ax);
    ax.salt = 5;
    hfs_cds_t *d = hfs_cds_new(c, &layout, &o), *d2 = hfs_cds_new(c, &layout, &o2);
    const size_t len = 1000;
    int rc, hit;
    hfs_ckey_t other = mkkey(2, 4, 0, 1, 0); /* another chunk, same dataset */
    hfs_ckey_t same2 = mkkey(2, 3, 0, 1, 0); /* the chunk in another dataset */
    hfs_centry_t *e = hfs_cache_get(d, &other, len, &ax, &rc, &hit);
    CHECK(e != NULL);
    if (e) hfs_cache_release(e);
    e = hfs_cache_get(d2, &same2, len, &ax, &rc, &hit);
    CHECK(e != NULL);
    if (e) hfs_cache_release(e);
    /* 100 ticks of chunk (3, 0): one entry of it at a time */
    hfs_centry_t *pinned = NULL;
    for (uint64_t t = 1; t <= 100; t++) {
        hfs_ckey_t k = mkkey(2, 3, 0, t, t); /* the extent changes too */
        if (t == 50) k.ver[1] = 1;           /* another rank's record */
        e = hfs_cache_get(d, &k, len, &ax, &rc, &hit);
        CHECK(e != NULL && !hit);
        if (!e) continue;
        CHECK(data_ok(hfs_centry_data(e), &k, len, 5));
        if (t == 60)
            pinned = e; /* a reader still copying version 60 */
        else
            hfs_cache_release(e);
        hfs_cache_stats_t s = stats(c);
        CHECK_EQ(s.entries, 3 + (t > 60));
        CHECK_EQ(s.superseded, t - 1);
    }
    /* the pinned old version is out of the index (a get assembles it again,
     * and caching it does not drop version 100) and freed at its release */
    CHECK(pinned != NULL);
    if (pinned) {
        hfs_ckey_t k60 = mkkey(2, 3, 0, 60, 60);
        CHECK(data_ok(hfs_centry_data(pinned), &k60, len, 5));
        CHECK(hfs_cache_peek(d, &k60) == NULL);
        hfs_cache_release(pinned);
        CHECK_EQ(stats(c).entries, 3);
        int calls = atomic_load(&ax.calls);
        e = hfs_cache_get(d, &k60, len, &ax, &rc, &hit);
        CHECK(e != NULL && !hit && atomic_load(&ax.calls) == calls + 1);
        if (e) hfs_cache_release(e);
        CHECK_EQ(stats(c).entries, 4);
        hfs_ckey_t k100 = mkkey(2, 3, 0, 100, 100);
        e = hfs_cache_peek(d, &k100);
        CHECK(e != NULL);
        if (e) hfs_cache_release(e);
    }
    /* the other chunk and the other dataset's chunk were never dropped */
    e = hfs_cache_peek(d, &other);
    CHECK(e != NULL);
    if (e) hfs_cache_release(e);
    e = hfs_cache_peek(d2, &same2);
    CHECK(e != NULL);
    if (e) hfs_cache_release(e);
    /* the owner was told of each drop, with the right length */
    CHECK_EQ(atomic_load(&o.nevict), 99);
    CHECK_EQ(atomic_load(&o.evict_bytes), 99 * len);
    CHECK_EQ(atomic_load(&o2.nevict), 0);
    hfs_cache_stats_t s = stats(c);
    CHECK_EQ(s.evictions, 0);
    CHECK_EQ(s.mem, 4 * len);
    hfs_cds_close(d);
    hfs_cds_close(d2);
    CHECK_EQ(stats(c).mem, 0);
    hfs_cache_free(c);
    owner_fini(&o);
    owner_fini(&o2);
}

TEST_MAIN(T(test_put), T(test_reserve_publish), T(test_limit_never_exceeded), T(test_scan_resistance), T(test_version_keys), T(test_pinned_not_evicted),
          T(test_concurrent_miss), T(test_stress_threads), T(test_assembly_failure), T(test_close_pinned),
          T(test_stats_arithmetic), T(test_peek), T(test_evict_pin_window), T(test_superseded))
