/* test_schema.c — applying schema ops (schema.h) and answering "as of tick T".
 *
 * Why: the writer validates its own definitions with h5l_schema_apply and
 * readers replay the journal through it, so it must accept exactly the valid
 * op sequences of docs/format.md 3.3 and refuse the rest without changing
 * anything. Covered: every op kind; the errors (duplicate path, missing
 * parent, unknown dimension, unlimited dimension without chunking, DIMLEN of
 * a fixed dimension, shrinking DIMLEN, ids out of sequence, bad paths/types);
 * dimension length history by tick; which attribute value is current at each
 * tick when replaced across and within ticks (checked against a brute-force
 * scan); the index slab shape of contiguous variables (<= 1 MiB, at least
 * half of it when the variable is larger, one contiguous byte range); and
 * the bounds on a VAR's index chunk (a contiguous VAR must carry exactly that
 * slab, a chunked one a chunk under 4 GiB): the chunk sizes the blocks
 * readers assemble, so a file may not choose it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log/format.h"
#include "schema.h"
#include "tharness.h"

static const h5l_type_t I32 = {H5L_CLASS_INT, 4, 1, 0};
static const h5l_type_t F64 = {H5L_CLASS_FLOAT, 8, 0, 0};
static const h5l_type_t STR = {H5L_CLASS_STRING, 1, 0, 0};

static h5l_op_t group(uint32_t id, const char *path)
{
    h5l_op_t op = {.kind = H5L_OP_GROUP, .id = id, .name = (char *)path};
    return op;
}
static h5l_op_t dim(uint32_t id, const char *name, uint64_t len, int unlim)
{
    h5l_op_t op = {.kind = H5L_OP_DIM, .id = id, .name = (char *)name, .len = len, .flags = (uint32_t)unlim};
    return op;
}
static h5l_op_t dimlen(uint32_t id, uint64_t len)
{
    h5l_op_t op = {.kind = H5L_OP_DIMLEN, .id = id, .len = len};
    return op;
}
static h5l_op_t var(uint32_t id, const char *path, h5l_type_t t, int chunked, uint32_t nd, uint32_t *dimids,
                    uint64_t *chunk, void *fill)
{
    h5l_op_t op = {.kind = H5L_OP_VAR,
                   .id = id,
                   .name = (char *)path,
                   .type = t,
                   .flags = (uint32_t)chunked,
                   .ndims = nd,
                   .dimids = dimids,
                   .chunk = chunk,
                   .data = fill,
                   .data_len = t.size};
    return op;
}
static h5l_op_t attr(uint32_t obj, const char *name, h5l_type_t t, uint64_t n, const void *v)
{
    h5l_op_t op = {.kind = H5L_OP_ATTR,
                   .id = obj,
                   .name = (char *)name,
                   .type = t,
                   .len = n,
                   .data = (void *)v,
                   .data_len = (size_t)n * t.size};
    return op;
}

/* Entries of every dimension's length history. */
static uint64_t hist_entries(const h5l_schema_t *s)
{
    uint64_t n = 0;
    for (size_t i = 0; i < s->ndims; i++)
        for (size_t j = 0; j < s->dims[i].nruns; j++) n += s->dims[i].runs[j].n;
    return n;
}

/* Apply and expect code; on an error, nothing may have changed. */
static int apply_expect(h5l_schema_t *s, uint64_t tick, h5l_op_t op, int code, int line)
{
    size_t no = s->nobjs, nd = s->ndims, na = s->nattrs;
    uint64_t nl = hist_entries(s);
    h5l_err_t e = {0};
    int rc = h5l_schema_apply(s, tick, &op, &e);
    int ok = rc == code;
    if (rc != H5L_OK) {
        if (s->nobjs != no || s->ndims != nd || s->nattrs != na || hist_entries(s) != nl) ok = 0;
        if (e.code != rc || !e.msg[0]) ok = 0;
    }
    if (!ok) fprintf(stderr, "  line %d: apply kind %u gave %d (%s), want %d\n", line, op.kind, rc, e.msg, code);
    return ok;
}
#define APPLY(s, t, op, code) CHECK(apply_expect(s, t, op, code, __LINE__))

static void test_every_kind(void)
{
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    CHECK_EQ(s.nobjs, 1);
    CHECK(s.objs[0].kind == H5L_OBJ_GROUP && strcmp(s.objs[0].path, "/") == 0 && s.objs[0].tick == 0);
    CHECK_EQ(h5l_schema_find(&s, "/"), 0);

    APPLY(&s, 1, group(1, "/atm"), H5L_OK);
    APPLY(&s, 1, group(2, "/atm/upper"), H5L_OK);
    APPLY(&s, 1, dim(0, "time", 0, 1), H5L_OK);
    APPLY(&s, 1, dim(1, "lat", 180, 0), H5L_OK);
    uint32_t d2[2] = {0, 1};
    uint64_t c2[2] = {1, 90};
    double fill = -1e30;
    APPLY(&s, 1, var(3, "/atm/t", F64, 1, 2, d2, c2, &fill), H5L_OK);
    uint32_t d1[1] = {1};
    uint64_t c1[1] = {180};
    APPLY(&s, 2, var(4, "/lat", I32, 0, 1, d1, c1, NULL), H5L_OK); /* no fill: zeros */
    int32_t vr[2] = {-90, 90};
    APPLY(&s, 2, attr(4, "valid_range", I32, 2, vr), H5L_OK);
    APPLY(&s, 2, attr(0, "title", STR, 5, "hello"), H5L_OK);
    APPLY(&s, 3, dimlen(0, 12), H5L_OK);
    uint32_t d0[1] = {0};
    uint64_t c0[1] = {0};
    int32_t sf = 5;
    APPLY(&s, 3, var(5, "/atm/upper/scalar", I32, 0, 0, d0, c0, &sf), H5L_OK);

    CHECK_EQ(s.nobjs, 6);
    CHECK_EQ(s.ndims, 2);
    CHECK_EQ(s.nattrs, 2);
    CHECK_EQ(h5l_schema_find(&s, "/atm/upper"), 2);
    CHECK_EQ(h5l_schema_find(&s, "/atm/t"), 3);
    CHECK_EQ(h5l_schema_find(&s, "/atm/x"), -1);
    CHECK_EQ(h5l_schema_find_dim(&s, "lat"), 1);
    CHECK_EQ(h5l_schema_find_dim(&s, "lon"), -1);
    const h5l_obj_t *t = &s.objs[3];
    CHECK(t->kind == H5L_OBJ_VAR && t->tick == 1 && t->chunked == 1 && t->ndims == 2);
    CHECK(t->dimids[0] == 0 && t->dimids[1] == 1 && t->chunk[0] == 1 && t->chunk[1] == 90);
    CHECK(memcmp(t->fill, &fill, 8) == 0);
    CHECK(t->type.cls == H5L_CLASS_FLOAT && t->type.size == 8);
    CHECK(s.objs[4].chunked == 0 && s.objs[4].tick == 2);
    CHECK(memcmp(s.objs[4].fill, "\0\0\0\0", 4) == 0);
    CHECK(s.objs[5].ndims == 0 && memcmp(s.objs[5].fill, &sf, 4) == 0);
    CHECK(s.objs[1].kind == H5L_OBJ_GROUP && s.objs[1].tick == 1);
    CHECK(s.dims[0].unlimited && !s.dims[1].unlimited && s.dims[0].tick == 1);
    CHECK(strcmp(s.dims[0].name, "time") == 0);
    const h5l_attr_t *a = &s.attrs[0];
    CHECK(a->objid == 4 && strcmp(a->name, "valid_range") == 0 && a->n == 2 && a->tick == 2);
    CHECK(memcmp(a->value, vr, 8) == 0);
    a = &s.attrs[1];
    CHECK(a->objid == 0 && a->n == 5 && memcmp(a->value, "hello", 5) == 0);
    CHECK(((char *)a->value)[5] == 0); /* strings come NUL-terminated */

    uint64_t shape[2];
    CHECK_EQ(h5l_schema_shape(&s, 3, 1, shape), H5L_OK);
    CHECK(shape[0] == 0 && shape[1] == 180);
    CHECK_EQ(h5l_schema_shape(&s, 3, 3, shape), H5L_OK);
    CHECK(shape[0] == 12 && shape[1] == 180);
    CHECK_EQ(h5l_schema_shape(&s, 1, 3, shape), H5L_EBADID); /* a group */
    CHECK_EQ(h5l_schema_shape(&s, 99, 3, shape), H5L_EBADID);
    h5l_schema_free(&s);
    h5l_schema_free(&s); /* freeing twice is harmless (zeroed) */
}

static void test_errors(void)
{
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    APPLY(&s, 1, group(1, "/g"), H5L_OK);
    APPLY(&s, 1, dim(0, "x", 10, 0), H5L_OK);
    APPLY(&s, 1, dim(1, "t", 0, 1), H5L_OK);
    uint32_t dx[1] = {0}, dt[2] = {1, 0}, dbad[1] = {2};
    uint64_t c1[1] = {10}, c2[2] = {4, 10}, cz[1] = {0}, cbig[1] = {1ull << 33};

    /* duplicate path (group or var), also across kinds */
    APPLY(&s, 1, group(2, "/g"), H5L_EEXIST);
    APPLY(&s, 1, var(2, "/g", I32, 0, 1, dx, c1, NULL), H5L_EEXIST);
    /* missing parent; parent that is a variable */
    APPLY(&s, 1, group(2, "/nope/sub"), H5L_EBADID);
    APPLY(&s, 1, var(2, "/g/h/v", I32, 0, 1, dx, c1, NULL), H5L_EBADID);
    APPLY(&s, 1, var(2, "/g/v", I32, 0, 1, dx, c1, NULL), H5L_OK);
    APPLY(&s, 1, group(3, "/g/v/w"), H5L_EBADID);
    /* bad paths */
    const char *bad[] = {"", "/", "rel", "/g/", "//g2", "/g//x", "/g/./x", "/g/..", "/.", "/g/../x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) APPLY(&s, 1, group(3, bad[i]), H5L_EINVAL);
    APPLY(&s, 1, group(3, NULL), H5L_EINVAL);
    APPLY(&s, 1, group(3, "/g/.hidden"), H5L_OK); /* a dot-name is a name */
    /* ids out of sequence */
    APPLY(&s, 1, group(9, "/h"), H5L_ECORRUPT);
    APPLY(&s, 1, group(3, "/h"), H5L_ECORRUPT);
    APPLY(&s, 1, dim(5, "y", 3, 0), H5L_ECORRUPT);
    /* unknown dimension */
    APPLY(&s, 1, var(4, "/v2", I32, 0, 1, dbad, c1, NULL), H5L_EBADID);
    /* unlimited dimension without the chunk flag, then with it */
    APPLY(&s, 1, var(4, "/v2", I32, 0, 2, dt, c2, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(4, "/v2", I32, 1, 2, dt, c2, NULL), H5L_OK);
    /* zero chunk; chunked chunk beyond u32; a contiguous slab other than
     * the shape's (format.md 3.3: here the whole 10 elements) */
    APPLY(&s, 1, var(5, "/v3", I32, 0, 1, dx, cz, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(5, "/v3", I32, 1, 1, dx, cbig, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(5, "/v3", I32, 0, 1, dx, cbig, NULL), H5L_EINVAL);
    uint64_t c9[1] = {9};
    APPLY(&s, 1, var(5, "/v3", I32, 0, 1, dx, c9, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(5, "/v3", I32, 0, 1, dx, c1, NULL), H5L_OK);
    /* a chunk never larger than a fixed dimension; unlimited ones may grow into it */
    uint64_t c11[1] = {11}, c1000[2] = {1000, 10};
    APPLY(&s, 1, var(6, "/v5", I32, 1, 1, dx, c11, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(6, "/v5", I32, 1, 2, dt, c1000, NULL), H5L_OK);
    /* types: strings and invalid types are not variable types */
    APPLY(&s, 1, var(7, "/v4", STR, 0, 1, dx, c1, NULL), H5L_ETYPE);
    h5l_type_t i3 = {H5L_CLASS_INT, 3, 0, 0};
    APPLY(&s, 1, var(7, "/v4", i3, 0, 1, dx, c1, NULL), H5L_ETYPE);
    uint32_t many[H5L_MAX_DIMS + 1] = {0};
    uint64_t manyc[H5L_MAX_DIMS + 1];
    for (int i = 0; i <= H5L_MAX_DIMS; i++) manyc[i] = 1;
    APPLY(&s, 1, var(7, "/v4", I32, 0, H5L_MAX_DIMS + 1, many, manyc, NULL), H5L_EINVAL);
    /* dimensions: duplicate name, bad names */
    APPLY(&s, 1, dim(2, "x", 3, 0), H5L_EEXIST);
    APPLY(&s, 1, dim(2, "", 3, 0), H5L_EINVAL);
    APPLY(&s, 1, dim(2, "a/b", 3, 0), H5L_EINVAL);
    APPLY(&s, 1, dim(2, NULL, 3, 0), H5L_EINVAL);
    /* DIMLEN: fixed dimension, unknown dimension, shrinking */
    APPLY(&s, 2, dimlen(0, 11), H5L_ECORRUPT);
    APPLY(&s, 2, dimlen(7, 11), H5L_EBADID);
    APPLY(&s, 2, dimlen(1, 5), H5L_OK);
    APPLY(&s, 3, dimlen(1, 4), H5L_ECORRUPT);
    APPLY(&s, 3, dimlen(1, 5), H5L_OK); /* equal is not shrinking */
    CHECK_EQ(h5l_schema_dimlen(&s, 1, 3), 5);
    /* attributes: unknown object, empty name, bad type */
    APPLY(&s, 2, attr(77, "a", I32, 0, NULL), H5L_EBADID);
    APPLY(&s, 2, attr(0, "", I32, 0, NULL), H5L_EINVAL);
    APPLY(&s, 2, attr(0, NULL, I32, 0, NULL), H5L_EINVAL);
    APPLY(&s, 2, attr(0, "a", i3, 0, NULL), H5L_ETYPE);
    APPLY(&s, 2, attr(0, "a", I32, 0, NULL), H5L_OK); /* empty value */
    /* unknown kind */
    h5l_op_t u = {.kind = 9};
    APPLY(&s, 2, u, H5L_ECORRUPT);
    h5l_schema_free(&s);
}

static void test_dimlen_history(void)
{
    h5l_schema_t s;
    h5l_schema_init(&s);
    APPLY(&s, 2, dim(0, "t", 0, 1), H5L_OK);
    APPLY(&s, 2, dim(1, "x", 7, 0), H5L_OK);
    APPLY(&s, 4, dimlen(0, 5), H5L_OK);
    APPLY(&s, 4, dimlen(0, 7), H5L_OK); /* same tick: the last one stands */
    APPLY(&s, 5, dimlen(0, 7), H5L_OK);
    APPLY(&s, 8, dimlen(0, 1000000000000ull), H5L_OK);
    APPLY(&s, 9, dim(2, "late", 3, 1), H5L_OK);
    APPLY(&s, 9, dimlen(2, 4), H5L_OK); /* same tick as its DIM */
    /* brute-force reference: length of dim at tick T */
    const uint64_t want0[11] = {0, 0, 0, 0, 7, 7, 7, 7, 1000000000000ull, 1000000000000ull, 1000000000000ull};
    for (uint64_t T = 0; T <= 10; T++) {
        CHECK(h5l_schema_dimlen(&s, 0, T) == want0[T]);
        CHECK_EQ(h5l_schema_dimlen(&s, 1, T), T >= 2 ? 7 : 0);
        CHECK_EQ(h5l_schema_dimlen(&s, 2, T), T >= 9 ? 4 : 0);
    }
    CHECK(h5l_schema_dimlen(&s, 0, UINT64_MAX) == 1000000000000ull);
    CHECK_EQ(h5l_schema_dimlen(&s, 3, 10), 0);
    CHECK(h5l_schema_dimlen_now(&s, 0) == 1000000000000ull);
    CHECK_EQ(h5l_schema_dimlen_now(&s, 2), 4);
    CHECK_EQ(h5l_schema_dimlen_now(&s, 9), 0);
    /* the history holds one entry per tick that set it: 2, 4, 5, 8 */
    const uint64_t set0[11] = {0, 0, 2, 2, 4, 5, 5, 5, 8, 8, 8};
    for (uint64_t T = 0; T <= 10; T++) CHECK_EQ(h5l_schema_dimlen_tick(&s, 0, T), set0[T]);
    for (size_t i = 1; i < s.dims[0].nruns; i++) CHECK(s.dims[0].runs[i].tick > s.dims[0].runs[i - 1].tick);

    uint32_t d[2] = {0, 1};
    uint64_t c[2] = {1, 7};
    APPLY(&s, 3, group(1, "/g"), H5L_OK);
    APPLY(&s, 3, var(2, "/g/v", I32, 1, 2, d, c, NULL), H5L_OK);
    uint64_t shape[2];
    for (uint64_t T = 0; T <= 10; T++) {
        CHECK_EQ(h5l_schema_shape(&s, 2, T, shape), H5L_OK);
        CHECK(shape[0] == want0[T] && shape[1] == (T >= 2 ? 7u : 0u));
    }
    h5l_schema_free(&s);
}

/* The length history kept as runs against a plain model: every tick that
 * set the length, with its length (the last of a tick standing), the
 * answer at T the newest entry <= T. Random histories mixing steady growth
 * (one run), pauses, changed steps, repeated lengths, several sets in one
 * tick and rollbacks (a tick that failed to load), checked at every tick
 * after each op. Steady growth must stay one run. */
#define DL_MAXT 400
static uint64_t rnd_u(uint64_t *x)
{
    *x = *x * 6364136223846793005ull + 1442695040888963407ull;
    return *x >> 33;
}

static void test_dimlen_runs(void)
{
    uint64_t seed = 0x5eed;
    for (int round = 0; round < 200; round++) {
        h5l_schema_t s;
        h5l_schema_init(&s);
        static uint64_t mlen[DL_MAXT + 2];
        static int mset[DL_MAXT + 2]; /* model: tick set the length */
        memset(mset, 0, sizeof mset);
        uint64_t t0 = 1 + (uint64_t)(round % 3), len0 = (uint64_t)(round % 5);
        APPLY(&s, t0, dim(0, "t", len0, 1), H5L_OK);
        mset[t0] = 1;
        mlen[t0] = len0;
        uint64_t tick = t0, len = len0, step = 1 + (uint64_t)(round % 4), gap = 1;
        int bad = 0;
        while (tick < DL_MAXT && !bad) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            unsigned r = (unsigned)(seed >> 33) % 100;
            if (r < 4) step = (seed >> 20) % 5; /* a new step, maybe 0 (the same length again) */
            if (r >= 4 && r < 7) gap = 1 + (seed >> 24) % 3;
            uint64_t nt = tick + gap;
            if (r >= 7 && r < 10) nt = tick; /* set again in the same tick */
            if (nt > DL_MAXT) break;
            if (r >= 10 && r < 13 && tick > t0 + 1) { /* roll back to a tick after the definition */
                uint64_t back = t0 + 1 + (seed >> 28) % (tick - t0);
                h5l_schema_rollback(&s, back);
                for (uint64_t T = back; T <= DL_MAXT; T++) mset[T] = 0;
                tick = back - 1;
                while (!mset[tick]) tick--;
                len = mlen[tick];
                continue;
            }
            len += step;
            APPLY(&s, nt, dimlen(0, len), H5L_OK);
            if (r >= 13 && r < 15) APPLY(&s, nt, dimlen(0, len - 1 + (len == 0)), len ? H5L_ECORRUPT : H5L_OK);
            tick = nt;
            mset[tick] = 1;
            mlen[tick] = len;
            uint64_t want = 0, wtick = 0;
            for (uint64_t T = 0; T <= DL_MAXT + 1 && !bad; T++) {
                if (mset[T]) want = mlen[T], wtick = T;
                if (h5l_schema_dimlen(&s, 0, T) != want || h5l_schema_dimlen_tick(&s, 0, T) != wtick) {
                    fprintf(stderr, "  round %d, after tick %llu: at %llu %llu (set %llu), want %llu (set %llu)\n",
                            round, (unsigned long long)tick, (unsigned long long)T,
                            (unsigned long long)h5l_schema_dimlen(&s, 0, T),
                            (unsigned long long)h5l_schema_dimlen_tick(&s, 0, T), (unsigned long long)want,
                            (unsigned long long)wtick);
                    bad = 1;
                }
            }
            CHECK_EQ(h5l_schema_dimlen_now(&s, 0), len);
        }
        CHECK(!bad);
        h5l_schema_free(&s);
    }
    /* n ops at once (h5l_schema_dimlen_run, a checkpoint summary's run)
     * against the same ops one by one, after random histories */
    for (int round = 0; round < 300; round++) {
        h5l_schema_t a, b;
        h5l_schema_init(&a);
        h5l_schema_init(&b);
        APPLY(&a, 1, dim(0, "t", 0, 1), H5L_OK);
        APPLY(&b, 1, dim(0, "t", 0, 1), H5L_OK);
        uint64_t t = 1, len = 0;
        for (int i = (int)(rnd_u(&seed) % 5); i > 0; i--) { /* a history before */
            t += 1 + rnd_u(&seed) % 3;
            len += rnd_u(&seed) % 4;
            APPLY(&a, t, dimlen(0, len), H5L_OK);
            APPLY(&b, t, dimlen(0, len), H5L_OK);
        }
        uint64_t t0 = t + 1 + rnd_u(&seed) % 3, l0 = len + rnd_u(&seed) % 4, n = 1 + rnd_u(&seed) % 9,
                 dt = n > 1 ? 1 + rnd_u(&seed) % 3 : 0, dl = n > 1 ? rnd_u(&seed) % 4 : 0;
        if (rnd_u(&seed) % 8 == 0 && l0) l0--; /* maybe a shrink: the same error both ways */
        h5l_err_t e = {0};
        int ra = h5l_schema_dimlen_run(&a, 0, t0, l0, n, dt, dl, &e), rb = H5L_OK;
        for (uint64_t i = 0; i < n && !rb; i++) {
            h5l_op_t op = dimlen(0, l0 + i * dl);
            rb = h5l_schema_apply(&b, t0 + i * dt, &op, NULL);
        }
        CHECK_EQ(ra, rb);
        for (uint64_t T = 0; T <= t0 + n * dt + 2; T++) {
            CHECK_EQ(h5l_schema_dimlen(&a, 0, T), h5l_schema_dimlen(&b, 0, T));
            CHECK_EQ(h5l_schema_dimlen_tick(&a, 0, T), h5l_schema_dimlen_tick(&b, 0, T));
        }
        h5l_schema_free(&a);
        h5l_schema_free(&b);
    }
    /* a time axis: 10^6 ticks of 3 more rows each, one run */
    h5l_schema_t s;
    h5l_schema_init(&s);
    APPLY(&s, 1, dim(0, "time", 0, 1), H5L_OK);
    for (uint64_t t = 1; t <= 1000000; t++) {
        h5l_op_t op = dimlen(0, 3 * t);
        CHECK_EQ(h5l_schema_apply(&s, t, &op, NULL), H5L_OK);
    }
    CHECK_EQ(s.dims[0].nruns, 1);
    CHECK_EQ(h5l_schema_dimlen(&s, 0, 123457), 3 * 123457);
    h5l_schema_free(&s);
}

/* Attribute history: "units" of obj 1 set at ticks 1, 3 (twice), 6;
 * "units" of obj 2 at 2; "scale" of obj 1 at 1 and 3; "title" of root at 4.
 * Checked for every tick against a scan: the current value of (obj, name)
 * at T is the last definition with tick <= T. */
static void test_attr_current(void)
{
    h5l_schema_t s;
    h5l_schema_init(&s);
    APPLY(&s, 1, group(1, "/a"), H5L_OK);
    APPLY(&s, 1, group(2, "/b"), H5L_OK);
    struct {
        uint64_t tick;
        uint32_t obj;
        const char *name, *val;
    } defs[] = {
        {1, 1, "units", "m"}, {1, 1, "scale", "1"},  {2, 2, "units", "s"}, {3, 1, "units", "km"},
        {3, 1, "scale", "2"}, {3, 1, "units", "cm"}, {4, 0, "title", "T"}, {6, 1, "units", "mm"},
    };
    const size_t ndefs = sizeof defs / sizeof defs[0];
    for (size_t i = 0; i < ndefs; i++)
        APPLY(&s, defs[i].tick, attr(defs[i].obj, defs[i].name, STR, strlen(defs[i].val), defs[i].val), H5L_OK);
    /* the same-tick replacement of units@3 ("km" -> "cm") overwrote in place */
    CHECK_EQ(s.nattrs, ndefs - 1);
    /* the versions set at or before T are a prefix of the history, found
     * by h5l_schema_attrs_after (ticks 5 and 7 set nothing) */
    for (uint64_t T = 0; T <= 7; T++) {
        size_t n = 0;
        for (size_t k = 0; k < s.nattrs; k++) n += s.attrs[k].tick <= T;
        CHECK_EQ(h5l_schema_attrs_after(&s, T), n);
    }
    for (uint64_t T = 0; T <= 7; T++) {
        for (size_t i = 0; i < ndefs; i++) {
            /* reference: the last def of this (obj, name) with tick <= T */
            const char *want = NULL;
            for (size_t j = 0; j < ndefs; j++)
                if (defs[j].obj == defs[i].obj && strcmp(defs[j].name, defs[i].name) == 0 && defs[j].tick <= T)
                    want = defs[j].val;
            int ncur = 0;
            const char *got = NULL;
            for (size_t k = 0; k < s.nattrs; k++) {
                if (s.attrs[k].objid != defs[i].obj || strcmp(s.attrs[k].name, defs[i].name) != 0) continue;
                if (h5l_schema_attr_current(&s, k, T)) {
                    ncur++;
                    got = s.attrs[k].value;
                }
            }
            if (want == NULL) {
                CHECK_EQ(ncur, 0);
            } else {
                CHECK_EQ(ncur, 1);
                CHECK(got && strcmp(got, want) == 0);
            }
        }
    }
    /* the in-place replacement kept its tick stamp */
    for (size_t k = 0; k < s.nattrs; k++)
        if (s.attrs[k].objid == 1 && strcmp(s.attrs[k].name, "units") == 0 && s.attrs[k].tick == 3)
            CHECK(strcmp(s.attrs[k].value, "cm") == 0 && s.attrs[k].n == 2);
    h5l_schema_free(&s);
}

/* A view as of tick 2 (h5l_schema_view) given the attribute ops of ticks
 * 3..6 answers like the schema that applied them all (value and currency
 * of each name at each tick), takes ATTR ops only, rolls back only its
 * own versions, and frees only what it owns (ASan: no double free of the
 * shared names and values, no leak); the schema is unchanged by it. */
static void test_attr_view(void)
{
    h5l_schema_t s, full;
    h5l_schema_init(&s);
    h5l_schema_init(&full);
    const char *late[][3] = {{"3", "units", "km"}, {"3", "title", "T3"}, {"4", "units", "cm"}, {"6", "title", "T6"}};
    for (int pass = 0; pass < 2; pass++) {
        h5l_schema_t *x = pass ? &full : &s;
        APPLY(x, 1, group(1, "/a"), H5L_OK);
        APPLY(x, 1, attr(1, "units", STR, 1, "m"), H5L_OK);
        APPLY(x, 2, attr(1, "scale", STR, 1, "1"), H5L_OK);
        APPLY(x, 2, attr(0, "title", STR, 2, "T2"), H5L_OK);
    }
    APPLY(&s, 6, attr(1, "units", STR, 5, "stale"), H5L_OK); /* after the view's tick: not in it */
    for (size_t i = 0; i < 4; i++)
        APPLY(&full, strtoull(late[i][0], NULL, 10), attr(late[i][1][0] == 'u' ? 1 : 0, late[i][1], STR, strlen(late[i][2]), late[i][2]), H5L_OK);
    size_t before = s.nattrs;
    h5l_schema_t v;
    CHECK_EQ(h5l_schema_view(&v, &s, 2), H5L_OK);
    CHECK_EQ(v.nattrs, 3);
    for (size_t i = 0; i < 4; i++)
        APPLY(&v, strtoull(late[i][0], NULL, 10), attr(late[i][1][0] == 'u' ? 1 : 0, late[i][1], STR, strlen(late[i][2]), late[i][2]), H5L_OK);
    APPLY(&v, 6, group(2, "/b"), H5L_EINVAL);
    CHECK_EQ(v.nobjs, s.nobjs);
    for (uint64_t T = 0; T <= 6; T++) {
        const char *names[] = {"units", "scale", "title"};
        for (int n = 0; n < 3; n++) {
            uint32_t o = n == 2 ? 0 : 1;
            const char *want = NULL, *got = NULL;
            int ncur = 0;
            for (size_t k = 0; k < full.nattrs; k++)
                if (full.attrs[k].objid == o && !strcmp(full.attrs[k].name, names[n]) && h5l_schema_attr_current(&full, k, T))
                    want = full.attrs[k].value;
            for (size_t k = 0; k < v.nattrs; k++)
                if (v.attrs[k].objid == o && !strcmp(v.attrs[k].name, names[n]) && h5l_schema_attr_current(&v, k, T)) {
                    ncur++;
                    got = v.attrs[k].value;
                }
            CHECK_EQ(ncur, want ? 1 : 0);
            CHECK(!want || (got && !strcmp(got, want)));
        }
    }
    h5l_schema_rollback(&v, 4); /* units@4 and title@6 go; the borrowed versions stay */
    CHECK_EQ(v.nattrs, 5);
    CHECK_EQ(v.nobjs, s.nobjs);
    /* an op at the tick of a borrowed version is a version of the view's
     * own, later in its history: the base's value stays (ASan: no double
     * free when both are freed) */
    APPLY(&v, 2, attr(1, "scale", STR, 1, "9"), H5L_OK);
    CHECK_EQ(v.nattrs, 6);
    for (size_t k = 0; k < v.nattrs; k++)
        if (v.attrs[k].objid == 1 && !strcmp(v.attrs[k].name, "scale"))
            CHECK_EQ(h5l_schema_attr_current(&v, k, 2), k == 5);
    CHECK(!strcmp(s.attrs[1].name, "scale") && !strcmp(s.attrs[1].value, "1"));
    h5l_schema_free(&v);
    CHECK_EQ(s.nattrs, before);
    CHECK(!strcmp(s.attrs[0].name, "units") && !strcmp(s.attrs[0].value, "m") && s.objs[1].path && !strcmp(s.objs[1].path, "/a"));
    CHECK_EQ(h5l_schema_find(&s, "/a"), 1);
    h5l_schema_free(&s);
    h5l_schema_free(&full);
}

/* A random history of groups, dimensions and attributes (few names, many
 * versions) with ticks rolled back now and then, against a model: every
 * path and dimension name found (and absent ones not), every attribute's
 * currency at every tick as a scan of the model says. */
static void test_names_history_rollback(void)
{
    srand(77);
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    enum { MAXD = 400 };
    struct {
        uint64_t tick;
        uint32_t obj;
        char name[8], val[8];
    } defs[MAXD];
    size_t nd = 0, ngroups = 0, ndims = 0;
    uint64_t gtick[64] = {0}, dtick[64] = {0};
    int bad = 0;
    uint64_t t = 0;
    for (int step = 0; step < 60 && !bad; step++) {
        t++;
        int nops = rand() % 8;
        for (int i = 0; i < nops && nd < MAXD; i++) {
            int k = rand() % 4;
            char nm[16];
            if (k == 0 && ngroups < 60) {
                snprintf(nm, sizeof nm, "/g%zu", ngroups);
                APPLY(&s, t, group((uint32_t)(1 + ngroups), nm), H5L_OK);
                gtick[ngroups++] = t;
            } else if (k == 1 && ndims < 60) {
                snprintf(nm, sizeof nm, "d%zu", ndims);
                APPLY(&s, t, dim((uint32_t)ndims, nm, 5, 0), H5L_OK);
                APPLY(&s, t, dim((uint32_t)ndims + 1, nm, 5, 0), H5L_EEXIST);
                dtick[ndims++] = t;
            } else {
                uint32_t obj = (uint32_t)(rand() % (ngroups + 1));
                snprintf(defs[nd].name, sizeof defs[nd].name, "a%d", rand() % 3);
                snprintf(defs[nd].val, sizeof defs[nd].val, "v%zu", nd);
                defs[nd].tick = t;
                defs[nd].obj = obj;
                APPLY(&s, t, attr(obj, defs[nd].name, STR, strlen(defs[nd].val), defs[nd].val), H5L_OK);
                nd++;
            }
        }
        if (step % 7 == 6 && t > 4) { /* tick t - k fails to load: it and everything after go */
            uint64_t from = t - (uint64_t)(rand() % 4);
            h5l_schema_rollback(&s, from);
            while (nd && defs[nd - 1].tick >= from) nd--;
            while (ngroups && gtick[ngroups - 1] >= from) ngroups--;
            while (ndims && dtick[ndims - 1] >= from) ndims--;
            t = from - 1;
        }
        /* the model against the schema */
        CHECK_EQ(s.nobjs, ngroups + 1);
        CHECK_EQ(s.ndims, ndims);
        char nm[16];
        for (size_t g = 0; g <= ngroups + 1; g++) {
            snprintf(nm, sizeof nm, "/g%zu", g);
            if (h5l_schema_find(&s, nm) != (g < ngroups ? (long)g + 1 : -1)) bad++;
        }
        for (size_t d = 0; d <= ndims + 1; d++) {
            snprintf(nm, sizeof nm, "d%zu", d);
            if (h5l_schema_find_dim(&s, nm) != (d < ndims ? (long)d : -1)) bad++;
        }
        for (uint64_t T = 0; T <= t + 1; T++)
            for (size_t k = 0; k < s.nattrs; k++) {
                const h5l_attr_t *a = &s.attrs[k];
                const char *want = NULL; /* the model's value of (obj, name) at T */
                for (size_t j = 0; j < nd; j++)
                    if (defs[j].obj == a->objid && strcmp(defs[j].name, a->name) == 0 && defs[j].tick <= T)
                        want = defs[j].val;
                int cur = want && strcmp(want, a->value) == 0 && a->tick <= T;
                if (h5l_schema_attr_current(&s, k, T) != cur) bad++;
            }
    }
    if (bad) fprintf(stderr, "  %d answers differ from the model\n", bad);
    CHECK_EQ(bad, 0);
    h5l_schema_free(&s);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 10^5 dimensions, 10^5 attributes of one object in one tick and 10^5
 * versions of one attribute (a frame of a few MB holds that many ops): no
 * op may scan what came before it (that took minutes), nor may asking
 * which of 2 x 10^5 attribute values are current. */
static void test_many_names(void)
{
    enum { N = 100000 };
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    double t0 = now_s();
    char nm[32];
    int bad = 0;
    for (uint32_t i = 0; i < N; i++) {
        snprintf(nm, sizeof nm, "dim%u", i);
        h5l_op_t op = dim(i, nm, i, 0);
        bad += h5l_schema_apply(&s, 1, &op, NULL) != H5L_OK;
        snprintf(nm, sizeof nm, "att%u", i);
        op = attr(0, nm, I32, 1, &i);
        bad += h5l_schema_apply(&s, 1, &op, NULL) != H5L_OK;
        op = attr(0, "version", I32, 1, &i);
        bad += h5l_schema_apply(&s, 2 + i, &op, NULL) != H5L_OK;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(s.ndims, N);
    CHECK_EQ(s.nattrs, 2 * N);
    size_t ncur = 0;
    for (size_t k = 0; k < s.nattrs; k++) ncur += h5l_schema_attr_current(&s, k, N / 2);
    CHECK_EQ(ncur, N + 1); /* every att%u, and one version */
    for (uint32_t i = 0; i < N; i += 997) {
        snprintf(nm, sizeof nm, "dim%u", i);
        CHECK_EQ(h5l_schema_find_dim(&s, nm), i);
    }
    double dt = now_s() - t0;
    if (dt > 5) {
        fprintf(stderr, "  3 x 10^5 ops and the currency of 2 x 10^5 attributes took %.1f s\n", dt);
        CHECK(0);
    }
    h5l_schema_free(&s);
}

/* Slab shape of a contiguous variable: 1 on leading dims, full on trailing
 * dims, a count on one dim between; product * size <= 1 MiB, and >= 512 KiB
 * when the variable is bigger than that. Because of the 1/partial/full
 * pattern, the elements of a slab are one contiguous byte range. */
static int slab_ok(h5l_type_t t, uint32_t nd, const uint64_t *dims, const uint64_t *slab)
{
    const uint64_t M = 1u << 20;
    const unsigned __int128 CAP = (unsigned __int128)1 << 100; /* saturate, never wrap */
    int ok = 1;
    unsigned __int128 prod = t.size, total = t.size;
    for (uint32_t i = 0; i < nd; i++) {
        uint64_t full = dims[i] ? dims[i] : 1; /* a 0-length dim counts as 1 */
        if (slab[i] < 1 || slab[i] > full) ok = 0;
        prod = prod > CAP ? CAP : prod * slab[i];
        total = total > CAP ? CAP : total * full;
    }
    /* leading 1s, then at most one partial count, then full lengths */
    uint32_t d = 0;
    while (d < nd && slab[d] == 1) d++;
    if (d < nd && slab[d] != (dims[d] ? dims[d] : 1)) d++;
    for (; d < nd; d++)
        if (slab[d] != (dims[d] ? dims[d] : 1)) ok = 0;
    if (prod > M) ok = 0;
    if (total >= M / 2 && prod < M / 2) ok = 0;
    if (total < M / 2 && prod != total) ok = 0;
    return ok;
}

static void test_slab_shape(void)
{
    srand(2024);
    const h5l_type_t types[] = {{H5L_CLASS_INT, 1, 0, 0}, {H5L_CLASS_INT, 2, 1, 0}, I32, F64};
    for (int it = 0; it < 5000; it++) {
        h5l_type_t t = types[rand() % 4];
        uint32_t nd = 1 + (uint32_t)(rand() % 5);
        uint64_t dims[5], slab[5];
        for (uint32_t i = 0; i < nd; i++) {
            int k = rand() % 10;
            dims[i] = k == 0  ? 0
                      : k < 4 ? 1 + (uint64_t)(rand() % 8)
                      : k < 8 ? 1 + (uint64_t)(rand() % 2000)
                              : 1 + (uint64_t)rand() * 64;
            slab[i] = 0xDEAD;
        }
        h5l_schema_slab_shape(t, nd, dims, slab);
        if (!slab_ok(t, nd, dims, slab)) {
            fprintf(stderr, "  size %u dims", t.size);
            for (uint32_t i = 0; i < nd; i++) fprintf(stderr, " %llu", (unsigned long long)dims[i]);
            fprintf(stderr, " -> slab");
            for (uint32_t i = 0; i < nd; i++) fprintf(stderr, " %llu", (unsigned long long)slab[i]);
            fprintf(stderr, "\n");
            CHECK(0);
            break;
        }
    }
    /* worked examples from format.md: rows of a 2-D double array */
    uint64_t d2[2] = {300, 600}, s2[2];
    h5l_schema_slab_shape(F64, 2, d2, s2);
    CHECK(s2[0] == (1u << 20) / (600 * 8) && s2[1] == 600);
    /* one row bigger than 1 MiB: split the last dimension */
    uint64_t d3[3] = {5, 4, 1u << 20}, s3[3];
    h5l_schema_slab_shape(I32, 3, d3, s3);
    CHECK(s3[0] == 1 && s3[1] == 1 && s3[2] == (1u << 18));
    /* small variable: a single slab */
    uint64_t d4[3] = {2, 3, 4}, s4[3];
    h5l_schema_slab_shape(I32, 3, d4, s4);
    CHECK(s4[0] == 2 && s4[1] == 3 && s4[2] == 4);
}

/* Dimensions so long that size * length overflows 64 bits must still give a
 * slab of at most 1 MiB (the product must not wrap to a small number). */
static void test_slab_shape_overflow(void)
{
    /* dimensions so long that size * length overflows 64 bits */
    uint64_t d5[2] = {3, 1ull << 61}, s5[2];
    h5l_schema_slab_shape(F64, 2, d5, s5);
    CHECK(slab_ok(F64, 2, d5, s5));
    uint64_t d6[2] = {1ull << 62, 1ull << 62}, s6[2];
    h5l_schema_slab_shape(I32, 2, d6, s6);
    CHECK(slab_ok(I32, 2, d6, s6));
}

/* The index chunk of a VAR sizes the blocks readers assemble: a file may
 * not choose a contiguous variable's slab (32 dimensions of 2 with a slab
 * of the whole 4 GiB variable), nor a chunk of 4 GiB or more. */
static void test_chunk_bounds(void)
{
    h5l_schema_t s;
    CHECK_EQ(h5l_schema_init(&s), H5L_OK);
    const h5l_type_t I8 = {H5L_CLASS_INT, 1, 1, 0};
    APPLY(&s, 1, dim(0, "two", 2, 0), H5L_OK);
    APPLY(&s, 1, dim(1, "u", 0, 1), H5L_OK);
    APPLY(&s, 1, dim(2, "zero", 0, 0), H5L_OK);
    APPLY(&s, 1, dim(3, "big", 1ull << 40, 0), H5L_OK);
    uint32_t d32[32] = {0};
    uint64_t all2[32], dims[32], slab[32];
    for (int i = 0; i < 32; i++) all2[i] = dims[i] = 2;
    APPLY(&s, 1, var(1, "/v", I8, 0, 32, d32, all2, NULL), H5L_EINVAL);
    h5l_schema_slab_shape(I8, 32, dims, slab); /* 20 trailing dimensions whole: 1 MiB */
    for (int i = 0; i < 32; i++) CHECK_EQ(slab[i], i < 12 ? 1 : 2);
    APPLY(&s, 1, var(1, "/v", I8, 0, 32, d32, slab, NULL), H5L_OK);
    /* a dimension of length 0 counts as 1 */
    uint32_t dz[2] = {2, 0};
    uint64_t cz[2] = {1, 2}, cz0[2] = {0, 2};
    APPLY(&s, 1, var(2, "/z", I8, 0, 2, dz, cz0, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(2, "/z", I8, 0, 2, dz, cz, NULL), H5L_OK);
    /* 2^40 one-byte elements: 1 MiB slabs, nothing else */
    uint32_t db[1] = {3};
    uint64_t whole[1] = {1ull << 40}, mib[1] = {1u << 20};
    APPLY(&s, 1, var(3, "/b", I8, 0, 1, db, whole, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(3, "/b", I8, 0, 1, db, mib, NULL), H5L_OK);
    /* chunked: 4 GiB - 64 KiB is a chunk; 4 GiB, or an overflowing product, is not */
    uint32_t du[3] = {1, 1, 1};
    uint64_t c4g[3] = {65536, 65536, 1}, under[3] = {65536, 65535, 1}, wrap[3] = {1ull << 32, 1ull << 32, 1ull << 32};
    APPLY(&s, 1, var(4, "/c", I8, 1, 3, du, c4g, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(4, "/c", I8, 1, 3, du, wrap, NULL), H5L_EINVAL);
    uint64_t f2[3] = {32768, 65536, 1}; /* 2 GiB of 2-byte elements: 4 GiB */
    const h5l_type_t I16 = {H5L_CLASS_INT, 2, 1, 0};
    APPLY(&s, 1, var(4, "/c", I16, 1, 3, du, f2, NULL), H5L_EINVAL);
    APPLY(&s, 1, var(4, "/c", I8, 1, 3, du, under, NULL), H5L_OK);
    h5l_schema_free(&s);
}

/* Fill modes from the VAR flags; NOFILL reads as zero whatever the bytes
 * say; both fill bits, or unknown bits, are invalid. */
static void test_fill_modes(void)
{
    h5l_schema_t s;
    h5l_schema_init(&s);
    uint32_t dd[1] = {0};
    uint64_t ch[1] = {8}; /* the slab of the contiguous ones, a whole chunk of the chunked one */
    int32_t f7 = 7;
    APPLY(&s, 1, dim(0, "x", 8, 0), H5L_OK);
    APPLY(&s, 1, var(1, "/d", I32, 0, 1, dd, ch, &f7), H5L_OK);
    APPLY(&s, 1, var(2, "/u", I32, 1 | 2, 1, dd, ch, &f7), H5L_OK);
    APPLY(&s, 1, var(3, "/n", I32, 4, 1, dd, ch, &f7), H5L_OK);
    APPLY(&s, 1, var(4, "/bad", I32, 2 | 4, 1, dd, ch, &f7), H5L_EINVAL);
    APPLY(&s, 1, var(4, "/bad", I32, 8, 1, dd, ch, &f7), H5L_EINVAL);
    CHECK_EQ(s.objs[1].fill_mode, H5L_FILL_DEFAULT);
    CHECK_EQ(s.objs[2].fill_mode, H5L_FILL_USER);
    CHECK_EQ(s.objs[3].fill_mode, H5L_FILL_NONE);
    int32_t got;
    memcpy(&got, s.objs[2].fill, 4);
    CHECK_EQ(got, 7);
    memcpy(&got, s.objs[3].fill, 4);
    CHECK_EQ(got, 0);
    h5l_schema_free(&s);
}

/* netCDF's NC_FILL_* values, written out here from netcdf.h, in both byte
 * orders. */
static void test_default_fill(void)
{
    static const struct {
        h5l_type_t t;
        uint8_t le[8];
    } want[] = {
        {{H5L_CLASS_INT, 1, 1, 0}, {0x81}},                                             /* -127 */
        {{H5L_CLASS_INT, 1, 0, 0}, {0xff}},                                             /* 255 */
        {{H5L_CLASS_INT, 2, 1, 0}, {0x01, 0x80}},                                       /* -32767 */
        {{H5L_CLASS_INT, 2, 0, 0}, {0xff, 0xff}},                                       /* 65535 */
        {{H5L_CLASS_INT, 4, 1, 0}, {0x01, 0, 0, 0x80}},                                 /* -2147483647 */
        {{H5L_CLASS_INT, 4, 0, 0}, {0xff, 0xff, 0xff, 0xff}},                           /* 4294967295 */
        {{H5L_CLASS_INT, 8, 1, 0}, {0x02, 0, 0, 0, 0, 0, 0, 0x80}},                     /* -9223372036854775806 */
        {{H5L_CLASS_INT, 8, 0, 0}, {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},   /* 2^64-2 */
        {{H5L_CLASS_FLOAT, 4, 0, 0}, {0x00, 0x00, 0xf0, 0x7c}},                         /* 9.96921e36f */
        {{H5L_CLASS_FLOAT, 8, 0, 0}, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x9e, 0x47}}, /* 9.969209968386869e36 */
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        uint8_t got[8] = {0}, be[8] = {0};
        h5l_type_t t = want[i].t;
        h5l_schema_default_fill(t, got);
        CHECK(memcmp(got, want[i].le, t.size) == 0);
        t.order = 1;
        h5l_schema_default_fill(t, be);
        for (size_t k = 0; k < t.size; k++) CHECK_EQ(be[k], want[i].le[t.size - 1 - k]);
    }
    float f;
    h5l_schema_default_fill((h5l_type_t){H5L_CLASS_FLOAT, 4, 0, 0}, &f);
    CHECK(f == 9.9692099683868690e+36f);
}

/* Attribute names dimension scales and netCDF-4 reserve are invalid in the
 * journal too (a crafted file), with a message naming the attribute. */
static void test_reserved_attr_names(void)
{
    h5l_schema_t s;
    h5l_schema_init(&s);
    int32_t v = 1;
    const char *bad[] = {"DIMENSION_LIST",      "REFERENCE_LIST", "CLASS",       "NAME",      "_Netcdf4Dimid",
                         "_Netcdf4Coordinates", "_NCProperties",  "_nc3_strict", "_FillValue"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        APPLY(&s, 1, attr(0, bad[i], I32, 1, &v), H5L_EINVAL);
        h5l_err_t e = {0};
        h5l_schema_attr_name_ok(bad[i], &e);
        CHECK(strstr(e.msg, bad[i]) != NULL);
    }
    APPLY(&s, 1, attr(0, "NAMES", I32, 1, &v), H5L_OK);
    APPLY(&s, 1, attr(0, "_Other", I32, 1, &v), H5L_OK);
    h5l_schema_free(&s);
}

TEST_MAIN(T(test_every_kind), T(test_chunk_bounds), T(test_fill_modes), T(test_default_fill),
          T(test_reserved_attr_names), T(test_errors), T(test_dimlen_history), T(test_dimlen_runs), T(test_attr_current), T(test_attr_view),
          T(test_names_history_rollback), T(test_many_names), T(test_slab_shape), T(test_slab_shape_overflow))
