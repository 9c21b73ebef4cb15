/* test_writer.c — MPI test of libh5log against an independent reference.
 *
 * Usage: mpirun -np P test_writer DIR [--ticks N] [--seed S] [--kill-at T]
 *
 * Every rank draws its random puts from a generator seeded by (seed, rank,
 * tick), so every rank can replay the puts of all ranks in sequence order
 * (tick, rank, call order) into plain arrays: the reference, computed without
 * the library. After each flush rank 0 reads every variable at every tick so
 * far through the reader (live, from the sidecar) and compares; after close
 * it does it again on the closed file and writes the final reference to
 * DIR/ref/ for the end-to-end tests (h5logreplay + h5py).
 * --kill-at T: rank 0 SIGKILLs the whole job right after tick T's commit,
 * leaving a half-written file for the crash test.
 * Prints "N passed, N failed" (one count per check group) on rank 0. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "expect.h"
#include "h5log.h"
#include "h5log_reader.h"

enum { NX = 17, NY = 13, NZ = 9, MAXT = 64, NVARS = 6 };
typedef enum { F64, I32, F32, U8, I16 } vtype_t;

typedef struct {
    const char *path;
    vtype_t type;
    int ndims;
    int dims[3];       /* dimension index: 0 x, 1 y, 2 z, 3 t (unlimited) */
    uint64_t chunk[3]; /* 0 = contiguous / default */
    double fill;
} vspec_t;

static const vspec_t VARS[NVARS] = {
    {"/a", F64, 3, {0, 1, 2}, {4, 5, 3}, -1.0}, {"/grp/b", I32, 2, {0, 1}, {0}, 7}, {"/c", F32, 2, {3, 1}, {0}, 0},
    {"/grp/sub/d", U8, 1, {3}, {2}, 0},         {"/s", I16, 0, {0}, {0}, 0},        {"/x", F32, 1, {0}, {0}, 0},
};
static const int DIMLEN[3] = {NX, NY, NZ};


static size_t tsize(vtype_t t) { return t == F64 ? 8 : t == I32 || t == F32 ? 4 : t == U8 ? 1 : 2; }
static hid_t thid(vtype_t t)
{
    return t == F64   ? H5T_NATIVE_DOUBLE
           : t == I32 ? H5T_NATIVE_INT32
           : t == F32 ? H5T_NATIVE_FLOAT
           : t == U8  ? H5T_NATIVE_UINT8
                      : H5T_NATIVE_INT16;
}
static void store(vtype_t t, void *p, double v)
{
    switch (t) {
    case F64:
        *(double *)p = v;
        break;
    case I32:
        *(int32_t *)p = (int32_t)v;
        break;
    case F32:
        *(float *)p = (float)v;
        break;
    case U8:
        *(uint8_t *)p = (uint8_t)((int64_t)v & 0xff);
        break;
    case I16:
        *(int16_t *)p = (int16_t)((int64_t)v % 30000);
        break;
    }
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* One put as drawn by the generator. */
typedef struct {
    int var, ndims;
    uint64_t start[3], count[3];
    int mode; /* 0 put, 1 iput, 2 put_conv from double */
} put_t;

static int g_ticks = 5;
static uint64_t g_seed = 1;

/* Reference state: per var a byte array sized for the max extent. */
typedef struct {
    uint8_t *data[NVARS];
    uint64_t tlen; /* unlimited dimension length */
} ref_t;

static uint64_t cap_len(int dim) { return dim == 3 ? MAXT : (uint64_t)DIMLEN[dim]; }
static uint64_t var_cap(int v)
{
    uint64_t n = 1;
    for (int d = 0; d < VARS[v].ndims; d++) n *= cap_len(VARS[v].dims[d]);
    return n;
}

/* netCDF's default fill of each type (netcdf.h NC_FILL_*), written here
 * from the netCDF documentation, not taken from the library: what a
 * variable without h5l_def_var_fill reads as where nothing was written. */
static void store_nc_default(vtype_t t, void *p)
{
    switch (t) {
    case F64:
        *(double *)p = 9.9692099683868690e+36;
        break;
    case I32:
        *(int32_t *)p = -2147483647;
        break;
    case F32:
        *(float *)p = 9.9692099683868690e+36f;
        break;
    case U8:
        *(uint8_t *)p = 255;
        break;
    case I16:
        *(int16_t *)p = -32767;
        break;
    }
}

static void ref_init(ref_t *r)
{
    r->tlen = 0;
    for (int v = 0; v < NVARS; v++) {
        uint64_t n = var_cap(v);
        size_t es = tsize(VARS[v].type);
        r->data[v] = malloc(n * es);
        for (uint64_t i = 0; i < n; i++) {
            if (VARS[v].fill != 0)
                store(VARS[v].type, r->data[v] + i * es, VARS[v].fill);
            else
                store_nc_default(VARS[v].type, r->data[v] + i * es);
        }
    }
}

static double value_of(int tick, int rank, int k, uint64_t elem)
{
    return (double)tick * 10000 + rank * 1000 + k * 37 + (double)(elem % 997);
}

/* Draw the puts of (rank, tick); the current unlimited length bounds t. */
static int draw(int rank, int tick, uint64_t tlen, put_t *out, int max)
{
    uint64_t s = g_seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)rank << 32) ^ (uint64_t)tick * 7919 ^ 0x1234567;
    if (!s) s = 1;
    for (int i = 0; i < 4; i++) rng_next(&s);
    int n = 3 + (int)(rng_next(&s) % 6);
    if (n > max) n = max;
    for (int k = 0; k < n; k++) {
        put_t *p = &out[k];
        p->var = (int)(rng_next(&s) % NVARS);
        p->ndims = VARS[p->var].ndims;
        p->mode = (int)(rng_next(&s) % 3);
        for (int d = 0; d < p->ndims; d++) {
            int dim = VARS[p->var].dims[d];
            uint64_t len = dim == 3 ? (tlen + 3 < MAXT ? tlen + 3 : MAXT) : (uint64_t)DIMLEN[dim];
            p->start[d] = rng_next(&s) % len;
            p->count[d] = 1 + rng_next(&s) % (len - p->start[d]);
        }
    }
    return n;
}

static uint64_t nelem(const put_t *p)
{
    uint64_t n = 1;
    for (int d = 0; d < p->ndims; d++) n *= p->count[d];
    return n;
}

/* Apply one put to the reference (row-major over the capacity shape). */
static void ref_apply(ref_t *r, const put_t *p, int tick, int rank, int k)
{
    const vspec_t *vs = &VARS[p->var];
    size_t es = tsize(vs->type);
    uint64_t n = nelem(p), idx[3] = {0, 0, 0};
    for (uint64_t e = 0; e < n; e++) {
        uint64_t off = 0;
        for (int d = 0; d < p->ndims; d++) off = off * cap_len(vs->dims[d]) + p->start[d] + idx[d];
        store(vs->type, r->data[p->var] + off * es, value_of(tick, rank, k, e));
        for (int d = p->ndims - 1; d >= 0; d--) {
            if (++idx[d] < p->count[d]) break;
            idx[d] = 0;
        }
    }
    for (int d = 0; d < p->ndims; d++)
        if (vs->dims[d] == 3 && p->start[d] + p->count[d] > r->tlen) r->tlen = p->start[d] + p->count[d];
}

static void ref_tick(ref_t *r, int nranks, int tick)
{
    put_t puts[16];
    uint64_t tlen0 = r->tlen;
    for (int rank = 0; rank < nranks; rank++) {
        int n = draw(rank, tick, tlen0, puts, 16);
        for (int k = 0; k < n; k++) ref_apply(r, &puts[k], tick, rank, k);
    }
}

/* Compare variable v read through the reader at tick with the reference,
 * over the full shape and over a random sub-box. */
static void check_var(h5l_reader_t *rd, int tick, int v, uint32_t objid, const ref_t *ref)
{
    const vspec_t *vs = &VARS[v];
    size_t es = tsize(vs->type);
    uint64_t shape[3], start[3] = {0, 0, 0}, n = 1;
    for (int d = 0; d < vs->ndims; d++) {
        shape[d] = vs->dims[d] == 3 ? ref->tlen : (uint64_t)DIMLEN[vs->dims[d]];
        n *= shape[d];
    }
    uint8_t *buf = malloc(n * es + 1);
    h5l_err_t e = {0};
    int rc = h5l_reader_read(rd, (uint64_t)tick, objid, start, shape, buf, &e);
    EXPECT(rc == 0, "read %s tick %d: %s", vs->path, tick, e.msg);
    if (rc == 0) {
        uint64_t bad = 0, idx[3] = {0, 0, 0};
        for (uint64_t i = 0; i < n; i++) {
            uint64_t off = 0;
            for (int d = 0; d < vs->ndims; d++) off = off * cap_len(vs->dims[d]) + idx[d];
            if (memcmp(buf + i * es, ref->data[v] + off * es, es) != 0) bad++;
            for (int d = vs->ndims - 1; d >= 0; d--) {
                if (++idx[d] < shape[d]) break;
                idx[d] = 0;
            }
        }
        EXPECT(bad == 0, "%s at tick %d: %llu of %llu elements differ", vs->path, tick, (unsigned long long)bad,
               (unsigned long long)n);
    }
    /* a sub-box: the inner half in every dimension */
    uint64_t ss[3], sc[3], sn = 1;
    for (int d = 0; d < vs->ndims; d++) {
        ss[d] = shape[d] / 4;
        sc[d] = shape[d] - ss[d] - shape[d] / 4;
        sn *= sc[d];
    }
    if (sn && rc == 0) {
        uint8_t *sub = malloc(sn * es);
        rc = h5l_reader_read(rd, (uint64_t)tick, objid, ss, sc, sub, &e);
        EXPECT(rc == 0, "sub-read %s: %s", vs->path, e.msg);
        uint64_t bad = 0, idx[3] = {0, 0, 0};
        for (uint64_t i = 0; rc == 0 && i < sn; i++) {
            uint64_t off = 0, boff = 0;
            for (int d = 0; d < vs->ndims; d++) {
                off = off * cap_len(vs->dims[d]) + ss[d] + idx[d];
                boff = boff * shape[d] + ss[d] + idx[d];
            }
            (void)boff;
            if (memcmp(sub + i * es, ref->data[v] + off * es, es) != 0) bad++;
            for (int d = vs->ndims - 1; d >= 0; d--) {
                if (++idx[d] < sc[d]) break;
                idx[d] = 0;
            }
        }
        EXPECT(bad == 0, "%s sub-box at tick %d: %llu elements differ", vs->path, tick, (unsigned long long)bad);
        free(sub);
    }
    free(buf);
}

/* Read every var at every tick 1..upto; refs[t] is the reference after t. */
static void check_all(const char *path, int upto, ref_t *refs, const uint32_t *objids, int expect_closed)
{
    h5l_reader_t *rd;
    h5l_err_t e = {0};
    int rc = h5l_reader_open(path, &rd, &e);
    EXPECT(rc == 0, "open %s: %s", path, e.msg);
    if (rc) return;
    EXPECT(h5l_reader_ntick(rd) == (uint64_t)upto, "%s: %llu ticks, expected %d", path,
           (unsigned long long)h5l_reader_ntick(rd), upto);
    EXPECT(h5l_reader_closed(rd) == expect_closed, "closed flag %d", h5l_reader_closed(rd));
    for (int t = 1; t <= upto && (uint64_t)t <= h5l_reader_ntick(rd); t++) {
        uint64_t tl = 0;
        h5l_reader_rdlock(rd);
        const h5l_schema_t *s = h5l_reader_schema(rd);
        tl = s->ndims > 3 ? h5l_schema_dimlen(s, 3, (uint64_t)t) : 0;
        h5l_reader_unlock(rd);
        EXPECT(tl == refs[t].tlen, "tick %d: t length %llu, expected %llu", t, (unsigned long long)tl,
               (unsigned long long)refs[t].tlen);
        for (int v = 0; v < NVARS; v++) check_var(rd, t, v, objids[v], &refs[t]);
    }
    h5l_reader_close(rd);
}

static void ref_copy(ref_t *dst, const ref_t *src)
{
    ref_init(dst);
    dst->tlen = src->tlen;
    for (int v = 0; v < NVARS; v++) memcpy(dst->data[v], src->data[v], var_cap(v) * tsize(VARS[v].type));
}

/* Final reference for the end-to-end tests: DIR/ref/<n>.bin (canonical
 * shape, native order) and DIR/ref/manifest.txt "path dtype dims...". */
static void write_ref(const char *dir, const ref_t *r)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/ref", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ref/manifest.txt", dir);
    FILE *m = fopen(p, "w");
    static const char *dt[] = {"f8", "i4", "f4", "u1", "i2"};
    for (int v = 0; v < NVARS; v++) {
        const vspec_t *vs = &VARS[v];
        size_t es = tsize(vs->type);
        snprintf(p, sizeof p, "%s/ref/%d.bin", dir, v);
        FILE *b = fopen(p, "wb");
        uint64_t shape[3], n = 1, idx[3] = {0, 0, 0};
        for (int d = 0; d < vs->ndims; d++) {
            shape[d] = vs->dims[d] == 3 ? r->tlen : (uint64_t)DIMLEN[vs->dims[d]];
            n *= shape[d];
        }
        for (uint64_t i = 0; i < n; i++) {
            uint64_t off = 0;
            for (int d = 0; d < vs->ndims; d++) off = off * cap_len(vs->dims[d]) + idx[d];
            fwrite(r->data[v] + off * es, es, 1, b);
            for (int d = vs->ndims - 1; d >= 0; d--) {
                if (++idx[d] < shape[d]) break;
                idx[d] = 0;
            }
        }
        fclose(b);
        fprintf(m, "%d %s %s", v, vs->path, dt[vs->type]);
        for (int d = 0; d < vs->ndims; d++) fprintf(m, " %llu", (unsigned long long)shape[d]);
        fprintf(m, "\n");
    }
    fclose(m);
}

/* API error paths: each fails clearly and loses nothing buffered. */
static void check_errors(h5l_file_t *f, int varb)
{
    uint64_t st[2] = {0, 0}, ct[2] = {NX + 1, 1};
    int rc = h5l_put(f, varb, st, ct, NULL);
    EXPECT(rc == H5L_ERANGE, "out-of-range put gave %d", rc);
    EXPECT(strstr(h5l_errmsg(f), "exceeds length") != NULL, "message: %s", h5l_errmsg(f));
    int32_t v = 1;
    uint64_t c1[2] = {1, 1};
    rc = h5l_put(f, 999, st, c1, &v);
    EXPECT(rc == H5L_EBADID, "bad varid gave %d", rc);
    int id;
    rc = h5l_def_var(f, "/grp/b", H5T_NATIVE_INT, 0, NULL, NULL, &id);
    EXPECT(rc == H5L_EEXIST, "duplicate def_var gave %d", rc);
    rc = h5l_def_var(f, "/str", H5T_C_S1, 0, NULL, NULL, &id);
    EXPECT(rc == H5L_ETYPE, "string var gave %d", rc);
    rc = h5l_def_var_fill(f, varb, &v);
    EXPECT(rc == H5L_ESTATE, "late fill gave %d", rc);
    rc = h5l_put_att(f, varb, "_FillValue", H5T_NATIVE_INT32, 1, &v);
    EXPECT(rc == H5L_ESTATE, "late _FillValue gave %d", rc);
    /* names dimension scales and netCDF-4 keep for themselves: refused,
     * with a message naming the attribute (DIMENSION_LIST crashed ncdump) */
    static const char *const reserved[] = {"DIMENSION_LIST", "REFERENCE_LIST",      "CLASS",         "NAME",
                                           "_Netcdf4Dimid",  "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"};
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        rc = h5l_put_att(f, varb, reserved[i], H5T_NATIVE_INT32, 1, &v);
        EXPECT(rc == H5L_EINVAL && strstr(h5l_errmsg(f), reserved[i]), "attribute %s gave %d: %s", reserved[i], rc,
               h5l_errmsg(f));
        rc = h5l_put_att_text(f, H5L_GLOBAL, reserved[i], "x");
        EXPECT(rc == H5L_EINVAL, "global attribute %s gave %d", reserved[i], rc);
    }
    /* a start past a fixed length is refused even when another count is 0 */
    uint64_t s0[2] = {NX + 5, 0}, c0[2] = {1, 0};
    rc = h5l_put(f, varb, s0, c0, &v);
    EXPECT(rc == H5L_ERANGE, "count-0 put with a start out of range gave %d", rc);
    uint64_t s1[2] = {NX, 0}, c1b[2] = {0, 1};
    rc = h5l_put(f, varb, s1, c1b, &v);
    EXPECT(rc == 0, "empty put at the end gave %d: %s", rc, h5l_errmsg(f));
    /* a chunk larger than a fixed dimension is refused, as netCDF does */
    int dx;
    h5l_def_dim(f, "e_small", 4, &dx);
    uint64_t big = 5;
    rc = h5l_def_var(f, "/e_big_chunk", H5T_NATIVE_INT32, 1, &dx, &big, &id);
    EXPECT(rc == H5L_EINVAL && strstr(h5l_errmsg(f), "larger than dimension"), "chunk > dim gave %d: %s", rc,
           h5l_errmsg(f));
}

/* H5L_SYNC_TICK, and a collective misuse: rank 0 defines something the
 * others do not. Every rank gets H5L_EMISMATCH, nothing of that flush is
 * committed, and close still leaves the committed tick readable. */
static void check_mismatch(const char *dir, int rank, int size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/m.h5", dir);
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.sync = H5L_SYNC_TICK;
    h5l_file_t *m;
    int rc = h5l_create(path, MPI_COMM_WORLD, &o, &m);
    EXPECT(rc == 0, "create %s: %s", path, h5l_errmsg(NULL));
    if (rc) return;
    int d, v, one = 7;
    uint64_t st = 0, ct = 1;
    h5l_def_dim(m, "a", 4, &d);
    h5l_def_var(m, "/v", H5T_NATIVE_INT, 1, &d, NULL, &v);
    h5l_put(m, v, &st, &ct, &one);
    rc = h5l_flush(m);
    EXPECT(rc == 0, "synced flush: %s", h5l_errmsg(m));
    if (size > 1) {
        int extra;
        if (rank == 0) h5l_def_dim(m, "extra", 2, &extra);
        rc = h5l_flush(m);
        EXPECT(rc == H5L_EMISMATCH, "rank-dependent definitions gave %d", rc);
        EXPECT(strstr(h5l_errmsg(m), "different definitions") != NULL, "message: %s", h5l_errmsg(m));
    }
    rc = h5l_close(m);
    EXPECT(size > 1 ? rc == H5L_EMISMATCH : rc == 0, "close gave %d: %s", rc, h5l_errmsg(NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    h5l_reader_t *r;
    h5l_err_t e = {0};
    rc = h5l_reader_open(path, &r, &e);
    EXPECT(rc == 0, "open %s: %s", path, e.msg);
    if (rc) return;
    EXPECT(h5l_reader_ntick(r) == 1 && h5l_reader_closed(r), "ticks %llu closed %d",
           (unsigned long long)h5l_reader_ntick(r), h5l_reader_closed(r));
    int got = 0;
    rc = h5l_reader_read(r, 1, (uint32_t)v, &st, &ct, &got, &e);
    EXPECT(rc == 0 && got == 7, "v[0] = %d (%s)", got, e.msg);
    h5l_reader_close(r);
}

/* A put that would make a variable 2^63 bytes or more ([t, y] of int32,
 * y = 2^24, t grown to 2^37) is refused with a reason naming the variable,
 * and buffers nothing; the row before that limit is taken. */
static void check_huge(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/huge.h5", dir);
    h5l_file_t *f;
    int rc = h5l_create(path, MPI_COMM_WORLD, NULL, &f);
    EXPECT(rc == 0, "create %s: %s", path, h5l_errmsg(NULL));
    if (rc) return;
    int d[2], v, w;
    uint64_t one[2] = {1, 1};
    h5l_def_dim(f, "t", H5L_UNLIMITED, &d[0]);
    h5l_def_dim(f, "y", (uint64_t)1 << 24, &d[1]);
    rc = h5l_def_var(f, "/huge", H5T_NATIVE_INT32, 2, d, one, &v);
    rc |= h5l_def_var(f, "/small", H5T_NATIVE_INT8, 1, d, one, &w);
    EXPECT(rc == 0, "def_var: %s", h5l_errmsg(f));
    int32_t x = 5;
    uint64_t st[2] = {(uint64_t)1 << 37, 0}, ct[2] = {1, 1};
    /* through the 1-D variable: the dimension it grows is /huge's too */
    uint64_t st1 = (uint64_t)1 << 37, ct1 = 1;
    int8_t b = 1;
    rc = h5l_put(f, w, &st1, &ct1, &b);
    EXPECT(rc == H5L_ERANGE && strstr(h5l_errmsg(f), "'/huge'") && strstr(h5l_errmsg(f), "2^63"),
           "put growing t to 2^37 + 1 gave %d: %s", rc, h5l_errmsg(f));
    st[0] -= 1;
    rc = h5l_put(f, v, st, ct, &x);
    EXPECT(rc == H5L_ERANGE && strstr(h5l_errmsg(f), "'/huge'"), "put at row 2^37 - 1 gave %d: %s", rc, h5l_errmsg(f));
    EXPECT(h5l_buffered(f) == 0, "%zu bytes buffered after refused puts", h5l_buffered(f));
    st[0] = ((uint64_t)1 << 37) - 2; /* 2^63 - 2^26 bytes: taken */
    st1 = 3;
    rc = h5l_put(f, v, st, ct, &x) | h5l_put(f, w, &st1, &ct1, &b);
    EXPECT(rc == 0, "put at row 2^37 - 2: %s", h5l_errmsg(f));
    rc = h5l_close(f);
    EXPECT(rc == 0, "close %s: %s", path, h5l_errmsg(NULL));
}

/* Collective: close f, then open a reader on path on every rank; NULL,
 * counted as a failure, if that fails. */
static h5l_reader_t *close_and_open(h5l_file_t *f, const char *path)
{
    EXPECT(h5l_close(f) == 0, "close: %s", h5l_errmsg(NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    int rc = h5l_reader_open(path, &r, &e);
    EXPECT(rc == 0, "open %s: %s", path, e.msg);
    return rc ? NULL : r;
}

/* A full write buffer: H5L_ENOBUFS names the remedy, keeps what was
 * buffered (it is published by the next flush), and h5l_iput does not count
 * against the limit. Each rank writes its own 3000-byte band. */
static void check_buffer_full(const char *dir, int rank, int size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/b.h5", dir);
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.buffer_limit = 4096;
    h5l_file_t *f;
    int rc = h5l_create(path, MPI_COMM_WORLD, &o, &f);
    EXPECT(rc == 0, "create %s: %s", path, h5l_errmsg(NULL));
    if (rc) return;
    int d, v;
    enum { BAND = 8000 };
    h5l_def_dim(f, "x", (uint64_t)BAND * (uint64_t)size, &d);
    h5l_def_var(f, "/u", H5T_NATIVE_UINT8, 1, &d, NULL, &v);
    uint8_t a[BAND];
    for (int i = 0; i < BAND; i++) a[i] = (uint8_t)(i * 7 + rank);
    uint64_t base = (uint64_t)rank * BAND;
    uint64_t s1 = base, c1 = 3000, s2 = base + 3000, c2 = 2000, s3 = base + 5000, c3 = 3000;
    EXPECT(h5l_put(f, v, &s1, &c1, a) == 0, "first put: %s", h5l_errmsg(f));
    rc = h5l_put(f, v, &s2, &c2, a + 3000);
    EXPECT(rc == H5L_ENOBUFS, "put past the buffer limit gave %d", rc);
    EXPECT(strstr(h5l_errmsg(f), "h5l_flush") != NULL, "message: %s", h5l_errmsg(f));
    EXPECT(h5l_buffered(f) == 3000, "buffered %zu after the refused put", h5l_buffered(f));
    EXPECT(h5l_iput(f, v, &s3, &c3, a + 5000) == 0, "iput beyond the limit: %s", h5l_errmsg(f));
    EXPECT(h5l_flush(f) == 0, "flush 1: %s", h5l_errmsg(f));
    EXPECT(h5l_put(f, v, &s2, &c2, a + 3000) == 0, "put after flush: %s", h5l_errmsg(f));
    h5l_reader_t *r = close_and_open(f, path);
    if (!r) return;
    h5l_err_t e = {0};
    uint8_t got[BAND];
    uint64_t st = base, ct = BAND;
    for (uint64_t t = 1; t <= 2; t++) {
        rc = h5l_reader_read(r, t, (uint32_t)v, &st, &ct, got, &e);
        int bad = rc != 0;
        for (int i = 0; !bad && i < BAND; i++) {
            int written = i < 3000 || i >= 5000 || t == 2;
            bad = got[i] != (written ? a[i] : 255); /* NC_FILL_UBYTE: no fill was set */
        }
        EXPECT(!bad, "rank %d band at tick %llu differs (%s)", rank, (unsigned long long)t, e.msg);
    }
    h5l_reader_close(r);
}

/* A tick of several write blocks (the writer hashes and writes its data
 * block by block; the test build's blocks are 64 KiB, the segments 32 KiB):
 * each rank's band of a double variable is written in pieces of odd sizes,
 * h5l_put and h5l_iput alternating, so pieces, segments and blocks end at
 * different places and a segment spans pieces. Two ticks (the second
 * rewrites the band with other values and a different cut); every element
 * of both is read back through the reader, which checks every segment's
 * checksum, against its closed form. */
static double band_val(uint64_t tick, uint64_t g) { return (double)tick * 1e7 + (double)g; }

/* Collective: create DIR/name with default options (path gets its name);
 * NULL, counted as a failure, if that fails. */
static h5l_file_t *create_in(const char *dir, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    h5l_file_t *f = NULL;
    int rc = h5l_create(path, MPI_COMM_WORLD, NULL, &f);
    EXPECT(rc == 0, "create %s: %s", path, h5l_errmsg(NULL));
    return rc ? NULL : f;
}

static void check_blocks(const char *dir, int rank, int size)
{
    char path[4096];
    h5l_file_t *f = create_in(dir, "blocks.h5", path, sizeof path);
    if (!f) return;
    int rc;
    enum { BAND = 41111 }; /* 328,888 bytes per rank: 5 blocks and a part */
    int d, v;
    h5l_def_dim(f, "x", (uint64_t)BAND * (uint64_t)size, &d);
    h5l_def_var(f, "/band", H5T_NATIVE_DOUBLE, 1, &d, NULL, &v);
    uint64_t base = (uint64_t)rank * BAND;
    double *keep[2] = {malloc(BAND * sizeof(double)), malloc(BAND * sizeof(double))}; /* h5l_iput's */
    double *tmp = malloc(BAND * sizeof(double));
    static const uint64_t cuts[2][4] = {{1000, 4097, 777, 12345}, {8191, 3, 20000, 5121}};
    for (uint64_t t = 1; t <= 2 && keep[0] && keep[1] && tmp; t++) {
        double *k = keep[t - 1];
        for (uint64_t i = 0; i < BAND; i++) k[i] = tmp[i] = band_val(t, base + i);
        uint64_t at = 0;
        for (int n = 0; at < BAND; n++) {
            uint64_t c = cuts[t - 1][n % 4];
            if (c > BAND - at) c = BAND - at;
            uint64_t s = base + at;
            rc = n % 2 ? h5l_iput(f, v, &s, &c, k + at) : h5l_put(f, v, &s, &c, tmp + at);
            EXPECT(rc == 0, "put %d of tick %llu: %s", n, (unsigned long long)t, h5l_errmsg(f));
            at += c;
        }
        memset(tmp, 0, BAND * sizeof(double)); /* h5l_put copied */
        EXPECT(h5l_flush(f) == 0, "flush %llu: %s", (unsigned long long)t, h5l_errmsg(f));
    }
    h5l_reader_t *r = close_and_open(f, path);
    h5l_err_t e = {0};
    if (r && tmp) {
        uint64_t st = base, ct = BAND;
        for (uint64_t t = 1; t <= 2; t++) {
            rc = h5l_reader_read(r, t, (uint32_t)v, &st, &ct, tmp, &e);
            int bad = rc != 0;
            for (uint64_t i = 0; !bad && i < BAND; i++) bad = tmp[i] != band_val(t, base + i);
            EXPECT(!bad, "rank %d: band at tick %llu differs (%s)", rank, (unsigned long long)t, rc ? e.msg : "");
        }
    }
    if (r) h5l_reader_close(r);
    free(keep[0]);
    free(keep[1]);
    free(tmp);
}

/* Puts laid out chunk by chunk (format.md 6, write/wput.c split_cells): a
 * [128 P, 96] double variable in [64, 64] chunks (32 KiB). Each rank puts
 * its band of 128 rows (rank 0 all of them: two whole chunks and two edge
 * chunks, so laid out by chunks; the others from row 3 on: mostly parts
 * of chunks, so not), then at tick 2 a box across the bands' edges; the
 * values read back equal a plain reference, and chunk (0, 0), which rank
 * 0 held whole at tick 1, is one contiguous run of the log
 * (h5l_chunk_info_t.run), which only a layout by chunks gives. At 1, 2
 * and 4 ranks (the MPI suite). */
static double split_val(int tick, uint64_t i, uint64_t j) { return tick * 100000.0 + (double)i * 97 + (double)j; }

static void check_split_puts(const char *dir, int rank, int size)
{
    char path[4096];
    h5l_file_t *f = create_in(dir, "split.h5", path, sizeof path);
    if (!f) return;
    enum { R = 128, C = 96 };
    uint64_t chunk[2] = {64, 64};
    int dx, dy, v;
    uint64_t rows = (uint64_t)R * (uint64_t)size;
    h5l_def_dim(f, "x", rows, &dx);
    h5l_def_dim(f, "y", C, &dy);
    EXPECT(h5l_def_var(f, "/s", H5T_NATIVE_DOUBLE, 2, (int[]){dx, dy}, chunk, &v) == 0, "def_var: %s",
           h5l_errmsg(f));
    double *ref = malloc(rows * C * sizeof *ref), *buf = malloc(rows * C * sizeof *buf);
    for (uint64_t i = 0; ref && i < rows * C; i++) ref[i] = 0; /* (rows never written are taken from the read) */
    for (int t = 1; t <= 2 && ref && buf; t++) {
        for (int q = 0; q < size; q++) { /* every rank's put, in rank order (the reference) */
            uint64_t s[2], c[2];
            if (t == 1) {
                s[0] = (uint64_t)q * R + (q ? 3 : 0), s[1] = 0, c[0] = q == size - 1 ? rows - s[0] : R, c[1] = C;
            } else {
                s[0] = (uint64_t)q * R + 20, s[1] = 10, c[0] = q == size - 1 ? rows - s[0] : R, c[1] = 70;
            }
            if (q == rank) {
                for (uint64_t i = 0; i < c[0]; i++)
                    for (uint64_t j = 0; j < c[1]; j++) buf[i * c[1] + j] = split_val(t, s[0] + i, s[1] + j);
                EXPECT(h5l_put(f, v, s, c, buf) == 0, "put of tick %d: %s", t, h5l_errmsg(f));
                memset(buf, 0, c[0] * c[1] * sizeof *buf); /* h5l_put copied */
            }
            for (uint64_t i = 0; i < c[0]; i++)
                for (uint64_t j = 0; j < c[1]; j++) ref[(s[0] + i) * C + s[1] + j] = split_val(t, s[0] + i, s[1] + j);
        }
        EXPECT(h5l_flush(f) == 0, "flush %d: %s", t, h5l_errmsg(f));
    }
    h5l_reader_t *r = close_and_open(f, path);
    h5l_err_t e = {0};
    if (r && rank == 0 && buf) {
        /* rows 0..2 of rank 1's band were never written at tick 1 (fill):
         * compared only where the reference wrote */
        uint64_t st[2] = {0, 0}, ct[2] = {rows, C};
        int rc = h5l_reader_read(r, 2, (uint32_t)v, st, ct, buf, &e);
        int bad = rc != 0;
        for (int q = 1; !bad && q < size; q++)
            for (uint64_t i = 0; i < 3; i++)
                for (uint64_t j = 0; j < C; j++) ref[((uint64_t)q * R + i) * C + j] = buf[((uint64_t)q * R + i) * C + j];
        for (uint64_t i = 0; !bad && i < rows * C; i++) bad = buf[i] != ref[i];
        EXPECT(!bad, "the split variable differs from the reference (%s)", rc ? e.msg : "");
        uint64_t c0[2] = {0, 0}, s0[2] = {0, 0}, n0[2] = {64, 64};
        h5l_chunk_info_t ci;
        EXPECT(h5l_reader_chunk_info(r, 1, (uint32_t)v, c0, s0, n0, &ci, &e) == 0 && ci.run,
               "chunk (0, 0) at tick 1 is not one run of the log: the put was not laid out by chunks");
    }
    if (r) h5l_reader_close(r);
    free(ref);
    free(buf);
}

/* Default chunk shapes follow netCDF-C's rule (docs/format.md 3.3); the
 * expected shapes were worked out by hand from that rule. */
static void check_default_chunks(const char *dir, int rank)
{
    char path[4096];
    h5l_file_t *f = create_in(dir, "c.h5", path, sizeof path);
    if (!f) return;
    int rc;
    int t, t2, x64, k1, k3, v[6];
    h5l_def_dim(f, "time", H5L_UNLIMITED, &t);
    h5l_def_dim(f, "time2", H5L_UNLIMITED, &t2);
    h5l_def_dim(f, "x", 64, &x64);
    h5l_def_dim(f, "k1", 1000, &k1);
    h5l_def_dim(f, "k3", 3000, &k3);
    static const struct {
        const char *path;
        int nd, dims[3];
        hid_t type;
        uint64_t want[3];
    } cases[6] = {
        {"/d1", 1, {0}, 0, {512}}, /* 4096 bytes of doubles */
        {"/u1", 1, {0}, 0, {4096}},
        {"/row", 2, {0, 2}, 0, {1, 64}}, /* a short row: one row */
        {"/big", 3, {0, 3, 3}, 0, {1, 1000, 1000}},
        {"/huge", 3, {0, 4, 4}, 0, {1, 1000, 1000}}, /* 1023 shrunk: no overhang */
        {"/all", 2, {0, 1}, 0, {1024, 1024}},        /* every dimension unlimited */
    };
    hid_t types[6] = {H5T_NATIVE_DOUBLE, H5T_NATIVE_UINT8, H5T_NATIVE_FLOAT,
                      H5T_NATIVE_FLOAT,  H5T_NATIVE_FLOAT, H5T_NATIVE_FLOAT};
    int ids[5] = {t, t2, x64, k1, k3};
    for (int i = 0; i < 6; i++) {
        int dd[3];
        for (int d = 0; d < cases[i].nd; d++) dd[d] = ids[cases[i].dims[d]];
        rc = h5l_def_var(f, cases[i].path, types[i], cases[i].nd, dd, NULL, &v[i]);
        EXPECT(rc == 0, "def_var %s: %s", cases[i].path, h5l_errmsg(f));
    }
    EXPECT(h5l_close(f) == 0, "close: %s", h5l_errmsg(NULL));
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank != 0) return;
    h5l_reader_t *r;
    h5l_err_t e = {0};
    if (h5l_reader_open(path, &r, &e)) {
        EXPECT(0, "open %s: %s", path, e.msg);
        return;
    }
    h5l_reader_rdlock(r);
    const h5l_schema_t *sc = h5l_reader_schema(r);
    for (int i = 0; i < 6; i++) {
        const h5l_obj_t *o = &sc->objs[v[i]];
        int same = o->chunked && o->ndims == (uint32_t)cases[i].nd;
        for (int d = 0; same && d < cases[i].nd; d++) same = o->chunk[d] == cases[i].want[d];
        EXPECT(same, "%s: default chunk [%llu, %llu, %llu], want [%llu, %llu, %llu]", cases[i].path,
               (unsigned long long)o->chunk[0], (unsigned long long)(o->ndims > 1 ? o->chunk[1] : 0),
               (unsigned long long)(o->ndims > 2 ? o->chunk[2] : 0), (unsigned long long)cases[i].want[0],
               (unsigned long long)cases[i].want[1], (unsigned long long)cases[i].want[2]);
    }
    h5l_reader_unlock(r);
    h5l_reader_close(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    g_rank = rank;
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: test_writer DIR [--ticks N] [--seed S] [--kill-at T]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *dir = argv[1];
    int kill_at = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--ticks"))
            g_ticks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            g_seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--kill-at"))
            kill_at = atoi(argv[i + 1]);
    }
    if (g_ticks > 40) g_ticks = 40;
    char path[4096];
    snprintf(path, sizeof path, "%s/t.h5", dir);

    h5l_opts_t o;
    h5l_opts_init(&o);
    o.buffer_limit = 1 << 20;
    h5l_file_t *f;
    int rc = h5l_create(path, MPI_COMM_WORLD, &o, &f);
    EXPECT(rc == 0, "create: %s", h5l_errmsg(NULL));
    if (rc) MPI_Abort(MPI_COMM_WORLD, 1);

    int dims[4], ids[NVARS];
    h5l_def_dim(f, "x", NX, &dims[0]);
    h5l_def_dim(f, "y", NY, &dims[1]);
    h5l_def_dim(f, "z", NZ, &dims[2]);
    h5l_def_dim(f, "t", H5L_UNLIMITED, &dims[3]);
    for (int v = 0; v < NVARS; v++) {
        int dd[3];
        for (int d = 0; d < VARS[v].ndims; d++) dd[d] = dims[VARS[v].dims[d]];
        rc = h5l_def_var(f, VARS[v].path, thid(VARS[v].type), VARS[v].ndims, dd,
                         VARS[v].chunk[0] ? VARS[v].chunk : NULL, &ids[v]);
        EXPECT(rc == 0, "def_var %s: %s", VARS[v].path, h5l_errmsg(f));
        if (VARS[v].fill != 0) {
            uint8_t fb[8];
            store(VARS[v].type, fb, VARS[v].fill);
            rc = h5l_def_var_fill(f, ids[v], fb);
            EXPECT(rc == 0, "fill %s: %s", VARS[v].path, h5l_errmsg(f));
        }
    }
    h5l_put_att_text(f, H5L_GLOBAL, "title", "h5log MPI test");
    h5l_put_att_text(f, ids[0], "units", "K");
    double vr[2] = {-5, 5};
    h5l_put_att(f, ids[0], "valid_range", H5T_NATIVE_DOUBLE, 2, vr);
    int gid;
    h5l_def_grp(f, "/grp/sub", &gid);
    int32_t level = 3;
    h5l_put_att(f, gid, "level", H5T_NATIVE_INT32, 1, &level);

    ref_t refs[41];
    ref_init(&refs[0]);
    uint32_t objids[NVARS];
    for (int v = 0; v < NVARS; v++) objids[v] = (uint32_t)ids[v];

    for (int t = 1; t <= g_ticks; t++) {
        put_t puts[16];
        int n = draw(rank, t, refs[t - 1].tlen, puts, 16);
        void *keep[16] = {0};
        for (int k = 0; k < n; k++) {
            const put_t *p = &puts[k];
            const vspec_t *vs = &VARS[p->var];
            uint64_t ne = nelem(p);
            size_t es = tsize(vs->type);
            uint8_t *b = malloc(ne * es);
            double *db = malloc(ne * sizeof *db);
            for (uint64_t e = 0; e < ne; e++) {
                store(vs->type, b + e * es, value_of(t, rank, k, e));
                db[e] = value_of(t, rank, k, e);
            }
            if (p->mode == 2 && (vs->type == F32 || vs->type == F64))
                rc = h5l_put_conv(f, ids[p->var], H5T_NATIVE_DOUBLE, p->start, p->count, db);
            else if (p->mode == 1)
                rc = h5l_iput(f, ids[p->var], p->start, p->count, b);
            else
                rc = h5l_put(f, ids[p->var], p->start, p->count, b);
            EXPECT(rc == 0, "put %s: %s", vs->path, h5l_errmsg(f));
            if (p->mode == 1)
                keep[k] = b; /* iput: valid until the flush */
            else {
                memset(b, 0xAB, ne * es); /* put copied: scribbling must not matter */
                free(b);
            }
            free(db);
        }
        if (t == 2) check_errors(f, ids[1]);
        rc = h5l_flush(f);
        EXPECT(rc == 0, "flush %d: %s", t, h5l_errmsg(f));
        EXPECT(h5l_ntick(f) == (uint64_t)t, "ntick %llu", (unsigned long long)h5l_ntick(f));
        for (int k = 0; k < n; k++) free(keep[k]);
        ref_copy(&refs[t], &refs[t - 1]);
        ref_tick(&refs[t], size, t);
        if (kill_at == t) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                write_ref(dir, &refs[t]);
                fflush(NULL);
                kill(getppid() == 1 ? getpid() : getpid(), SIGKILL);
            }
            pause();
        }
        if (rank == 0) check_all(path, t, refs, objids, 0);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    rc = h5l_close(f);
    EXPECT(rc == 0, "close: %s", h5l_errmsg(NULL));
    if (rank == 0) {
        char side[4200];
        snprintf(side, sizeof side, "%s.h5lj", path);
        EXPECT(access(side, F_OK) != 0, "sidecar %s still exists after close", side);
        check_all(path, g_ticks, refs, objids, 1);
        write_ref(dir, &refs[g_ticks]);
    }
    check_mismatch(dir, rank, size);
    check_huge(dir);
    check_buffer_full(dir, rank, size);
    check_blocks(dir, rank, size);
    check_split_puts(dir, rank, size);
    check_default_chunks(dir, rank);
    int fails = g_fail, all = 0;
    MPI_Reduce(&fails, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    int passes = g_pass, allp = 0;
    MPI_Reduce(&passes, &allp, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("%d passed, %d failed\n", allp, all);
    for (int t = 0; t <= g_ticks; t++)
        for (int v = 0; v < NVARS; v++) free(refs[t].data[v]);
    MPI_Finalize();
    return all ? 1 : 0;
}
