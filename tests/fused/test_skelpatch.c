/* test_skelpatch.c — skeletons patched in place (fused/skel.c,
 * hfs_skel_build_live) against full builds of the same tick.
 *
 * Why: a live file's skeleton is patched tick after tick (extents grown,
 * new chunks allocated) instead of rebuilt; a wrong patch gives a valid
 * HDF5 file whose chunk map points at the wrong bytes, or a stale extent or
 * dimension marker. The truth here is libhdf5 itself and a full build:
 * for every tick of a file whose dimensions grow in every way (one
 * dimension, two at once, the leading one or not, a jump to 100,000 that
 * turns variables sparse, an attribute and a new variable in between, a
 * row written before the last chunk of an index the daemon grows, a
 * global and a variable attribute set again at most ticks with values of
 * the same type and shape, a text attribute once as long and once longer),
 *   1. ticks that only grew or set attributes again in place are patched,
 *      the others build in full;
 *   2. the patched skeleton has the full build's variables, shapes and
 *      set of allocated blocks (var, block, length);
 *   3. its image, opened by libhdf5, has the shapes, the chunk count of
 *      each variable, each region's chunk at the address the map says, the
 *      attributes of the full build (same values; object references
 *      counted), and the dimension's netCDF marker with its new length.
 * A second file grows only a variable whose chunk index is the daemon's,
 * so its patches allocate nothing through libhdf5 (a superblock left with
 * the old end of address space went unnoticed while other variables'
 * allocations rewrote it). The log files are written with libh5log on one
 * rank (MPI singleton). */
#include <mpi.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log.h"
#include "skel.h"
#include "tharness.h"
#include "oom.h"

static char g_path[512], g_img[600];
#define NTICK 13
#define JUMP_TICK 8 /* rows 100000.. from here: /b and /e turn sparse */
#define BACKFILL_TICK 13 /* /g/s also gets a row before its last chunk: its index cannot grow in place */
#define ATTR_TICK 5 /* an attribute changes: full build */
#define NEWVAR_TICK 11
#define JUMP 100000u

/* the row written at tick t (1-based) */
static uint64_t row_of(int t) { return t < JUMP_TICK ? (uint64_t)t - 1 : JUMP + (uint64_t)(t - JUMP_TICK); }
static uint64_t xlen_of(int t) { return 2u * (uint64_t)t + 1; }

static int write_file(void)
{
    h5l_file_t *f;
    int rc = h5l_create(g_path, MPI_COMM_WORLD, NULL, &f);
    if (rc) return rc;
    int dt, dx, dy, va, vb, vx, vs, vc, ve, vn;
    rc |= h5l_def_dim(f, "time", H5L_UNLIMITED, &dt); /* no coordinate variable: a placeholder scale */
    rc |= h5l_def_dim(f, "x", H5L_UNLIMITED, &dx);
    rc |= h5l_def_dim(f, "y", 6, &dy);
    int da[2] = {dt, dy}, db[2] = {dt, dx}, de[2] = {dx, dt};
    uint64_t cha[2] = {2, 6}, chb[2] = {3, 4}, chx = 4, chs[2] = {1, 6}, che[2] = {4, 2};
    rc |= h5l_def_var(f, "/a", H5T_IEEE_F32LE, 2, da, cha, &va);
    rc |= h5l_def_var(f, "/b", H5T_STD_I32LE, 2, db, chb, &vb);
    rc |= h5l_def_var(f, "/x", H5T_IEEE_F32LE, 1, &dx, &chx, &vx); /* x's coordinate variable */
    rc |= h5l_def_var(f, "/g/s", H5T_IEEE_F64LE, 2, da, chs, &vs);
    rc |= h5l_def_var(f, "/c", H5T_STD_I16LE, 1, &dy, NULL, &vc);
    rc |= h5l_def_var(f, "/e", H5T_STD_I8LE, 2, de, che, &ve);
    rc |= h5l_put_att_text(f, va, "units", "K");
    double step = 0;
    int32_t count[3] = {0, 0, 0};
    rc |= h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_DOUBLE, 1, &step);
    rc |= h5l_put_att(f, vb, "count", H5T_NATIVE_INT32, 3, count);
    float fa[6] = {0}, fx[64];
    int32_t ib[64];
    double ds[6] = {0};
    int16_t ic[6] = {1, 2, 3, 4, 5, 6};
    int8_t ie[64];
    for (int i = 0; i < 64; i++) {
        fx[i] = (float)i * 0.5f;
        ib[i] = i * 7;
        ie[i] = (int8_t)i;
    }
    for (int t = 1; t <= NTICK && !rc; t++) {
        uint64_t r = row_of(t), xl = xlen_of(t);
        uint64_t s2[2] = {r, 0}, c2[2] = {1, 6};
        fa[0] = (float)t;
        ds[0] = t;
        rc |= h5l_put(f, va, s2, c2, fa);
        if (t % 3 != 2) rc |= h5l_put(f, vs, s2, c2, ds); /* some ticks give /s no chunk */
        uint64_t sb[2] = {r, 0}, cb[2] = {1, xl};
        rc |= h5l_put(f, vb, sb, cb, ib);
        uint64_t sx = 0, cx = xl;
        rc |= h5l_put(f, vx, &sx, &cx, fx);
        uint64_t se[2] = {0, r}, ce[2] = {xl, 1};
        rc |= h5l_put(f, ve, se, ce, ie);
        if (t == 1) {
            uint64_t s1 = 0, c1 = 6;
            rc |= h5l_put(f, vc, &s1, &c1, ic);
        }
        if (t == BACKFILL_TICK) {
            uint64_t sf[2] = {JUMP - 5, 0};
            rc |= h5l_put(f, vs, sf, c2, ds);
        }
        /* attributes set again with values of the same type and shape:
         * patched (every tick, twice in one tick, at some ticks) */
        step = t;
        rc |= h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_DOUBLE, 1, &step);
        if (t % 4 == 1) {
            step = 1000 + t;
            rc |= h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_DOUBLE, 1, &step);
        }
        if (t % 2 == 0) {
            count[t % 3] = t;
            rc |= h5l_put_att(f, vb, "count", H5T_NATIVE_INT32, 3, count);
        }
        if (t == 3) rc |= h5l_put_att_text(f, va, "units", "J"); /* a string of the same length */
        if (t == ATTR_TICK) rc |= h5l_put_att_text(f, va, "units", "degK"); /* another length: full build */
        if (t == NEWVAR_TICK) rc |= h5l_def_var(f, "/n", H5T_STD_I16LE, 1, &dy, NULL, &vn);
        if (!rc) rc = h5l_flush(f);
    }
    if (rc) fprintf(stderr, "writer: %s\n", h5l_errmsg(f));
    int crc = h5l_close(f);
    return rc ? rc : crc;
}

/* The second file: one [time, 4] variable with a chunk per row that is
 * sparse from its first tick (GROW0 rows) and then only grows (GROWN rows
 * a tick), so a patch appends to the daemon's own index and libhdf5
 * allocates nothing: the room the index grows into (an eighth of its
 * chunks, less than a tick's rows here) is reserved anew every tick. */
static char g_path2[512];
#define GROW_TICKS 4
#define GROW0 70000u
#define GROWN 20000u

static int write_grow_file(void)
{
    h5l_file_t *f;
    int rc = h5l_create(g_path2, MPI_COMM_WORLD, NULL, &f);
    if (rc) return rc;
    int dt, dy, v;
    rc |= h5l_def_dim(f, "time", H5L_UNLIMITED, &dt);
    rc |= h5l_def_dim(f, "y", 4, &dy);
    int dv[2] = {dt, dy};
    uint64_t ch[2] = {1, 4};
    rc |= h5l_def_var(f, "/v", H5T_STD_I32LE, 2, dv, ch, &v);
    int32_t *rows = malloc((size_t)GROW0 * 4 * sizeof *rows);
    if (!rows) rc = 1;
    for (uint64_t t = 1, at = 0; t <= GROW_TICKS && !rc; t++) {
        uint64_t n = t == 1 ? GROW0 : GROWN;
        for (uint64_t i = 0; i < n * 4; i++) rows[i] = (int32_t)(at * 4 + i);
        uint64_t st[2] = {at, 0}, ct[2] = {n, 4};
        rc |= h5l_put(f, v, st, ct, rows);
        if (!rc) rc = h5l_flush(f);
        at += n;
    }
    free(rows);
    if (rc) fprintf(stderr, "writer: %s\n", h5l_errmsg(f));
    int crc = h5l_close(f);
    return rc ? rc : crc;
}

typedef struct vb_key {
    uint32_t objid;
    uint64_t blk, len;
} vb_key_t;

static int cmp_vb(const void *x, const void *y)
{
    const vb_key_t *a = x, *b = y;
    if (a->objid != b->objid) return a->objid < b->objid ? -1 : 1;
    if (a->blk != b->blk) return a->blk < b->blk ? -1 : 1;
    return (a->len > b->len) - (a->len < b->len);
}

/* Every block's region of k, runs of chunks (a chunk index the daemon
 * writes, btree.h) taken apart: *n of them, in address order. */
static hfs_region_t *each_block(const hfs_skel_t *k, size_t *n)
{
    size_t cap = k->nregions + 1;
    *n = 0;
    for (size_t i = 0; i < k->nregions; i++)
        if (k->regions[i].bt) cap += k->bts[k->regions[i].bt - 1].n;
    hfs_region_t *out = calloc(cap, sizeof *out);
    for (size_t i = 0; i < k->nregions; i++) {
        const hfs_region_t *g = &k->regions[i];
        for (uint64_t x = g->addr; x < g->addr + g->len;) {
            out[*n] = g->bt ? hfs_skel_run_block(k, g, x) : *g;
            x = out[*n].addr + out[*n].len;
            (*n)++;
        }
    }
    return out;
}

static vb_key_t *blocks_of(const hfs_skel_t *k, size_t *n)
{
    hfs_region_t *g = each_block(k, n);
    vb_key_t *v = calloc(*n + 1, sizeof *v); /* padding zeroed: compared with memcmp */
    for (size_t i = 0; i < *n; i++) {
        v[i].objid = k->vars[g[i].var].objid;
        v[i].blk = g[i].blk;
        v[i].len = g[i].len;
    }
    qsort(v, *n, sizeof *v, cmp_vb);
    free(g);
    return v;
}

/* Write a skeleton's image (metadata; raw bytes zero) to a file of its own
 * (slot: two images open at once must be two files, or libhdf5 hands the
 * second open the first one's file) and open it. */
static hid_t open_image(const hfs_skel_t *k, int slot)
{
    uint8_t *buf = malloc((size_t)k->eof);
    CHECK_EQ(hfs_skel_meta_read(k, 0, (size_t)k->eof, buf), 0);
    char path[640];
    snprintf(path, sizeof path, "%s.%d", g_img, slot);
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(buf, 1, (size_t)k->eof, fp) == (size_t)k->eof;
    if (fp) fclose(fp);
    free(buf);
    CHECK(ok);
    hid_t f = ok ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    CHECK(f >= 0);
    return f;
}

/* One attribute as text "name:type size:n:bytes-hash" (references counted only). */
typedef struct attr_list {
    char text[4096];
} attr_list_t;

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *op)
{
    (void)info;
    attr_list_t *l = op;
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    size_t sz = H5Tget_size(t);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    uint64_t h = 1469598103934665603ull;
    int refs = H5Tdetect_class(t, H5T_REFERENCE) > 0 || H5Tget_class(t) == H5T_VLEN;
    if (!refs && n > 0) {
        uint8_t *b = calloc((size_t)n, sz);
        H5Aread(a, t, b);
        for (size_t i = 0; i < (size_t)n * sz; i++) h = (h ^ b[i]) * 1099511628211ull;
        free(b);
    }
    size_t len = strlen(l->text);
    snprintf(l->text + len, sizeof l->text - len, "%s:%zu:%lld:%llx;", name, sz, (long long)n,
             (unsigned long long)(refs ? 0 : h));
    H5Sclose(sp);
    H5Tclose(t);
    H5Aclose(a);
    return 0;
}

static void attrs_of(hid_t f, const char *path, attr_list_t *l)
{
    l->text[0] = 0;
    hid_t o = H5Oopen(f, path, H5P_DEFAULT);
    CHECK(o >= 0);
    if (o < 0) return;
    hsize_t idx = 0;
    H5Aiterate2(o, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, attr_cb, l);
    H5Oclose(o);
}

static const char *paths[] = {"/", "/a", "/b", "/x", "/g/s", "/c", "/e", "/time", "/x", "/n"};

/* 3. the patched image through libhdf5, against the full build's image */
static void check_image(const hfs_skel_t *k, const hfs_skel_t *full, h5l_reader_t *r, uint64_t tick)
{
    hid_t f = open_image(k, 0);
    if (f < 0) return;
    /* the superblock's end of address space is the image's end: room the
     * daemon reserves (its own chunk indexes) is inside it, else libhdf5
     * refuses every read there ("addr overflow") */
    haddr_t eoa = 0;
    CHECK(H5Fget_eoa(f, &eoa) >= 0);
    if (eoa != k->eof)
        fprintf(stderr, "  tick %llu: superblock EOA %llu, image %llu\n", (unsigned long long)tick,
                (unsigned long long)eoa, (unsigned long long)k->eof);
    CHECK_EQ(eoa, k->eof);
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    for (size_t vi = 0; vi < k->nvars; vi++) {
        const hfs_svar_t *v = &k->vars[vi];
        hid_t ds = H5Dopen2(f, s->objs[v->objid].path, H5P_DEFAULT);
        CHECK(ds >= 0);
        if (ds < 0) continue;
        hid_t sp = H5Dget_space(ds);
        hsize_t dims[H5L_MAX_DIMS];
        CHECK_EQ(H5Sget_simple_extent_dims(sp, dims, NULL), (int)v->ndims);
        for (uint32_t d = 0; d < v->ndims; d++) CHECK_EQ(dims[d], v->shape[d]);
        size_t nreg = 0, nblocks = 0;
        hfs_region_t *blocks = each_block(k, &nblocks);
        for (size_t i = 0; i < nblocks; i++) nreg += blocks[i].var == vi;
        if (v->chunked) {
            hsize_t nch = 0;
            CHECK(H5Dget_num_chunks(ds, sp, &nch) >= 0);
            CHECK_EQ(nch, nreg);
            /* every region's chunk where the map says (each lookup walks
             * the chunk index in 1.10.8: all of them up to 300, else 40) */
            size_t seen = 0;
            for (size_t i = 0; i < nblocks; i++) {
                const hfs_region_t *g = &blocks[i];
                if (g->var != vi) continue;
                if (nreg > 300 && seen++ % (nreg / 40) != 0) continue;
                uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
                hsize_t off[H5L_MAX_DIMS], size = 0;
                haddr_t addr = HADDR_UNDEF;
                unsigned mask = 0;
                hfs_skel_block_box(v, g->blk, st, ct);
                for (uint32_t d = 0; d < v->ndims; d++) off[d] = st[d];
                CHECK(H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size) >= 0);
                if (addr != g->addr) {
                    fprintf(stderr, "  tick %llu %s block %llu: map %llu, libhdf5 %llu\n", (unsigned long long)tick,
                            s->objs[v->objid].path, (unsigned long long)g->blk, (unsigned long long)g->addr,
                            (unsigned long long)addr);
                    CHECK(0);
                    break;
                }
            }
        }
        free(blocks);
        H5Sclose(sp);
        H5Dclose(ds);
    }
    /* the netCDF marker of the placeholder "time" carries its length */
    {
        char want[128], got[128] = {0};
        snprintf(want, sizeof want, "This is a netCDF dimension but not a netCDF variable.%10llu",
                 (unsigned long long)h5l_schema_dimlen(s, 0, tick));
        hid_t ds = H5Dopen2(f, "/time", H5P_DEFAULT);
        hid_t a = ds < 0 ? -1 : H5Aopen(ds, "NAME", H5P_DEFAULT);
        hid_t t = a < 0 ? -1 : H5Aget_type(a);
        CHECK(t >= 0 && H5Tget_size(t) < sizeof got && H5Aread(a, t, got) >= 0);
        CHECK(strcmp(got, want) == 0);
        if (t >= 0) H5Tclose(t);
        if (a >= 0) H5Aclose(a);
        if (ds >= 0) {
            hid_t sp = H5Dget_space(ds);
            hsize_t len = 0;
            H5Sget_simple_extent_dims(sp, &len, NULL);
            CHECK_EQ(len, h5l_schema_dimlen(s, 0, tick));
            H5Sclose(sp);
            H5Dclose(ds);
        }
    }
    h5l_reader_unlock(r);
    /* attributes as the full build has them */
    hid_t g = open_image(full, 1);
    for (size_t i = 0; g >= 0 && i < sizeof paths / sizeof *paths; i++) {
        htri_t in_g = 1, in_f = 0;
        if (strcmp(paths[i], "/") != 0) { /* (the root is no link; a path under a group not made yet is an
                                           * error to libhdf5, which would print its stack at every tick) */
            H5E_BEGIN_TRY
            {
                in_g = H5Lexists(g, paths[i], H5P_DEFAULT);
                in_f = H5Lexists(f, paths[i], H5P_DEFAULT);
            }
            H5E_END_TRY;
        }
        if (in_g <= 0) {
            CHECK(in_f <= 0);
            continue;
        }
        attr_list_t *x = malloc(sizeof *x), *y = malloc(sizeof *y);
        attrs_of(f, paths[i], x);
        attrs_of(g, paths[i], y);
        if (strcmp(x->text, y->text) != 0) {
            fprintf(stderr, "  tick %llu %s attributes: patched %s\n    full %s\n", (unsigned long long)tick, paths[i],
                    x->text, y->text);
            CHECK(0);
        }
        free(x);
        free(y);
    }
    if (g >= 0) H5Fclose(g);
    H5Fclose(f);
}

/* k (a skeleton of tick t) has the same variables and allocated blocks
 * as a full build of t kept live (same allocation: early where the shape
 * is small), and the same image through libhdf5 as that build and as a
 * closed file's full build (hfs_skel_build: only chunks with data, chunk
 * indexes and roots of the daemon's). */
static int g_full_own; /* closed full builds with a chunk index of the daemon's */

static void check_same_as_full(const hfs_skel_t *k, h5l_reader_t *r, int t)
{
    hfs_skel_t *closed = NULL, *full = NULL;
    hfs_skel_live_t *fresh = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(hfs_skel_build(r, (uint64_t)t, &closed, &e), 0);
    if (closed) {
        g_full_own += closed->nbts > 0;
        check_image(k, closed, r, (uint64_t)t);
        check_image(closed, closed, r, (uint64_t)t);
        hfs_skel_unref(closed);
    }
    CHECK_EQ(hfs_skel_build_live(r, (uint64_t)t, &fresh, &full, &e), 0);
    hfs_skel_live_free(fresh);
    if (!full) return;
    CHECK_EQ(k->version, full->version);
    CHECK_EQ(k->nvars, full->nvars);
    for (size_t i = 0; i < k->nvars && i < full->nvars; i++) {
        const hfs_svar_t *a = &k->vars[i], *b = &full->vars[i];
        CHECK_EQ(a->objid, b->objid);
        CHECK_EQ(a->sparse, b->sparse);
        CHECK_EQ(a->nblocks, b->nblocks);
        CHECK(a->ndims == b->ndims && memcmp(a->shape, b->shape, a->ndims * sizeof *a->shape) == 0);
        CHECK(memcmp(a->nblk, b->nblk, a->ndims * sizeof *a->nblk) == 0);
        CHECK(memcmp(a->block, b->block, a->ndims * sizeof *a->block) == 0);
    }
    /* neither keeps the build's allocation records (memvfd.h), both count
     * the same raw bytes */
    CHECK(k->img->n_allocs == 0 && k->img->n_raw == 0 && !k->img->allocs && !k->img->raw);
    CHECK(full->img->n_allocs == 0 && full->img->n_raw == 0);
    if (!full->nbts) CHECK_EQ(k->img->raw_bytes, full->img->raw_bytes);
    size_t nx, ny;
    vb_key_t *x = blocks_of(k, &nx), *y = blocks_of(full, &ny);
    CHECK_EQ(nx, ny);
    CHECK(nx == ny && memcmp(x, y, nx * sizeof *x) == 0);
    free(x);
    free(y);
    /* 3. the image through libhdf5; the full build's too */
    check_image(k, full, r, (uint64_t)t);
    check_image(full, full, r, (uint64_t)t);
    hfs_skel_unref(full);
}

/* Tick t through hfs_skel_build_live (*live kept between calls): its
 * skeleton, *before the patch count before it; NULL if the build failed
 * (a CHECK fails, the reason is printed). */
static hfs_skel_t *live_tick(h5l_reader_t *r, int t, hfs_skel_live_t **live, uint64_t *before)
{
    h5l_err_t e = {0};
    hfs_skel_t *k = NULL;
    *before = hfs_skel_live_patches(*live);
    int rc = hfs_skel_build_live(r, (uint64_t)t, live, &k, &e);
    CHECK_EQ(rc, 0);
    if (rc) {
        fprintf(stderr, "  tick %d: %s\n", t, e.msg);
        return NULL;
    }
    CHECK(*live != NULL);
    return k;
}

static void test_patch_equals_full_build(void)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(g_path, &r, &e), 0);
    if (!r) return;
    CHECK_EQ(h5l_reader_ntick(r), NTICK);
    hfs_skel_live_t *live = NULL;
    int patched_ticks = 0, patched_own = 0;
    for (int t = 1; t <= NTICK; t++) {
        uint64_t before;
        int had = live != NULL;
        hfs_skel_t *k = live_tick(r, t, &live, &before);
        if (!k) break;
        /* 1. patched exactly when only extents and chunks changed */
        int patched = had && hfs_skel_live_patches(live) == before + 1;
        int expect = t != 1 && t != ATTR_TICK && t != JUMP_TICK && t != NEWVAR_TICK && t != BACKFILL_TICK;
        if (patched != expect) fprintf(stderr, "  tick %d: patched %d, expected %d\n", t, patched, expect);
        CHECK_EQ(patched, expect);
        patched_ticks += patched;
        /* /a, /x and /g/s grow in their first dimension only: in a live
         * skeleton their chunk indexes are the daemon's from the first
         * tick, patched by appends (libhdf5 extends only /b's and /e's) */
        int own = 0;
        for (size_t i = 0; i < k->nvars; i++) own += k->vars[i].own != 0;
        CHECK_EQ(own, 3);
        patched_own += patched && own;
        /* 2. same variables and allocated blocks as a full build; 3. the image through libhdf5 */
        check_same_as_full(k, r, t);
        hfs_skel_unref(k);
    }
    CHECK_EQ(patched_ticks, NTICK - 5);
    CHECK_EQ(patched_own, NTICK - 5); /* every patched tick */
    CHECK(g_full_own >= NTICK - JUMP_TICK); /* the sparse ticks' full builds */
    /* asking for an older tick never patches backwards */
    hfs_skel_t *k = NULL;
    uint64_t p = hfs_skel_live_patches(live);
    CHECK_EQ(hfs_skel_build_live(r, 3, &live, &k, &e), 0);
    CHECK(live && hfs_skel_live_patches(live) == 0 && p == 0); /* (tick 13 built in full; a patch would count 1) */
    if (k) CHECK_EQ(k->vars[0].shape[0], row_of(3) + 1);
    hfs_skel_unref(k);
    hfs_skel_live_free(live);
    h5l_reader_close(r);
}

/* Every tick after the first patched by appending to the daemon's own
 * index alone, each image equal to full builds (check_same_as_full), its
 * superblock's EOA over the room reserved in the patch. */
static void test_own_index_grows_alone(void)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(g_path2, &r, &e), 0);
    if (!r) return;
    hfs_skel_live_t *live = NULL;
    uint64_t appends = hfs_skel_own_appends();
    for (int t = 1; t <= GROW_TICKS; t++) {
        uint64_t before;
        int had = live != NULL;
        hfs_skel_t *k = live_tick(r, t, &live, &before);
        if (!k) break;
        CHECK_EQ(had && hfs_skel_live_patches(live) == before + 1, t > 1);
        CHECK(k->nvars >= 1 && k->vars[0].own != 0);
        check_same_as_full(k, r, t);
        hfs_skel_unref(k);
    }
    CHECK(hfs_skel_own_appends() >= appends + GROW_TICKS - 1);
    hfs_skel_live_free(live);
    h5l_reader_close(r);
}

/* A time series written row after row, followed live: the reader
 * refreshed after each flush and each tick patched at the reader's newest
 * tick, as the daemon does. /p gets rows 0-2 at tick 1 and then a row or
 * two a tick, one record a row: its chunks with data are a prefix of its
 * rows, and the patches of ticks 2-5 take its new chunks from that prefix
 * (h5l_reader_chunk_prefix) instead of probing. /big has one row, far
 * down, so that both are sparse (over 2^16 chunks) and get indexes of the
 * daemon's. At tick 6 /p gets a row past a gap: no prefix any more, the
 * chunks are probed. Every image equals full builds. */
#define PREFIX_TICKS 8
static void test_own_index_rows_prefix(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s.rows.h5", g_path);
    h5l_file_t *f;
    CHECK_EQ(h5l_create(path, MPI_COMM_WORLD, NULL, &f), 0);
    int dt, dy, vp, vb, rc = 0;
    rc |= h5l_def_dim(f, "time", H5L_UNLIMITED, &dt);
    rc |= h5l_def_dim(f, "y", 4, &dy);
    int dv[2] = {dt, dy};
    uint64_t ch[2] = {1, 4};
    rc |= h5l_def_var(f, "/p", H5T_STD_I32LE, 2, dv, ch, &vp);
    rc |= h5l_def_var(f, "/big", H5T_STD_I32LE, 2, dv, ch, &vb);
    CHECK_EQ(rc, 0);
    h5l_reader_t *r = NULL;
    hfs_skel_live_t *live = NULL;
    uint64_t prefixes = hfs_skel_own_prefixes(), at_gap = 0, next = 0;
    int patched = 0;
    for (int t = 1; t <= PREFIX_TICKS && !rc; t++) {
        int32_t row[4 * 3];
        uint64_t n = t == 1 ? 3 : t == 3 ? 2 : 1; /* rows this tick, one record each but tick 1's */
        if (t == 6) next += 3;                    /* the gap */
        for (uint64_t i = 0; i < 4 * n; i++) row[i] = (int32_t)(next * 4 + i);
        if (t == 1) {
            uint64_t st[2] = {0, 0}, ct[2] = {3, 4}, sb[2] = {69999, 0}, cb[2] = {1, 4};
            rc |= h5l_put(f, vp, st, ct, row) | h5l_put(f, vb, sb, cb, row);
        } else
            for (uint64_t i = 0; i < n; i++) {
                uint64_t st[2] = {next + i, 0}, ct[2] = {1, 4};
                rc |= h5l_put(f, vp, st, ct, row + 4 * i);
            }
        next += n;
        rc |= h5l_flush(f);
        CHECK_EQ(rc, 0);
        h5l_err_t e = {0};
        int nnew = 0;
        if (!r) {
            CHECK_EQ(h5l_reader_open(path, &r, &e), 0);
        } else {
            CHECK_EQ(h5l_reader_refresh(r, &nnew, &e), 0);
            CHECK_EQ(nnew, 1);
        }
        if (!r) break;
        CHECK_EQ(h5l_reader_ntick(r), (uint64_t)t);
        uint64_t before;
        int had = live != NULL;
        hfs_skel_t *k = live_tick(r, t, &live, &before);
        if (!k) break;
        patched += had && hfs_skel_live_patches(live) == before + 1;
        check_same_as_full(k, r, t);
        hfs_skel_unref(k);
        if (t == 5) at_gap = hfs_skel_own_prefixes();
    }
    CHECK_EQ(patched, PREFIX_TICKS - 1);
    CHECK_EQ(at_gap - prefixes, 4);                /* ticks 2-5, /p alone (/big's index has a gap) */
    CHECK_EQ(hfs_skel_own_prefixes(), at_gap);     /* after the gap: probed */
    hfs_skel_live_free(live);
    h5l_reader_close(r);
    CHECK_EQ(h5l_close(f), 0);
    unlink(path);
}

/* Out of memory at each of the daemon's allocations in turn while tick t
 * is patched onto a live skeleton of tick t - 1: the build still gives
 * tick t (the patch given up, the tick built in full: a single failure
 * does not reach both); what it gives has the variables and allocated blocks of a full build of t (the
 * image through libhdf5 checked every 16th time, check_same_as_full); no
 * HDF5 object is left open. Ticks 3 (extents grown) and 10 (the daemon's
 * own index grown; a sample of its allocations). */
static void test_patch_out_of_memory(void)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(g_path, &r, &e), 0);
    if (!r) return;
    int bad = 0, built = 0;
    for (int t = 3; t <= 10; t += 7) {
        hfs_skel_live_t *fl = NULL;
        hfs_skel_t *full = NULL;
        CHECK_EQ(hfs_skel_build_live(r, (uint64_t)t, &fl, &full, &e), 0);
        hfs_skel_live_free(fl);
        if (!full) break;
        size_t nw;
        vb_key_t *want = blocks_of(full, &nw);
        int fired = 1;
        long n;
        long tried = 0;
        /* tick 10's patch makes ~900 allocations and each try rebuilds
         * tick 9 (0.17 s): its first 40, then every 25th */
        for (n = 1; fired && n < 10000; n += t == 10 && n >= 40 ? 25 : 1, tried++) {
            hfs_skel_live_t *live = NULL;
            hfs_skel_t *k0 = NULL, *k = NULL;
            CHECK_EQ(hfs_skel_build_live(r, (uint64_t)t - 1, &live, &k0, &e), 0);
            hfs_skel_unref(k0);
            uint64_t before = hfs_skel_live_patches(live);
            oom_arm(n);
            int rc = hfs_skel_build_live(r, (uint64_t)t, &live, &k, &e);
            fired = oom_off();
            if (rc) {
                fprintf(stderr, "  tick %d, allocation %ld failing: rc %d (%s)\n", t, n, rc, e.msg);
                bad++;
            } else {
                built++;
                size_t ng;
                vb_key_t *got = blocks_of(k, &ng);
                if (k->nvars != full->nvars || ng != nw || memcmp(got, want, nw * sizeof *want)) {
                    fprintf(stderr, "  tick %d, allocation %ld failing: not the full build's blocks\n", t, n);
                    bad++;
                }
                free(got);
                if (!fired || tried % 16 == 0) check_same_as_full(k, r, t);
                if (!fired) CHECK_EQ(hfs_skel_live_patches(live), before + 1); /* (the run without a failure) */
            }
            hfs_skel_unref(k);
            hfs_skel_live_free(live);
            if (H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) != 0) {
                fprintf(stderr, "  tick %d, allocation %ld failing: HDF5 objects left open\n", t, n);
                bad++;
                break;
            }
        }
        fprintf(stderr, "  tick %d: %ld of its allocations failed in turn\n", t, tried - 1);
        CHECK(!fired && tried > 5);
        free(want);
        hfs_skel_unref(full);
    }
    CHECK(built > 0);
    CHECK_EQ(bad, 0);
    h5l_reader_close(r);
}

/* A patch that fails half way (its chunk-order guard, after H5Dset_extent
 * changed the live file: skel.c's test hook) gives a full build of the same
 * tick: a skeleton equal to a full build, the half-patched file dropped,
 * and the next tick patched again from the fresh one. */
static void test_failed_patch_builds_in_full(void)
{
    const int bad = 3; /* a tick that is patched (only extents grow) */
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open(g_path, &r, &e), 0);
    if (!r) return;
    hfs_skel_live_t *live = NULL;
    char v[16];
    snprintf(v, sizeof v, "%d", bad);
    setenv("H5LOGFS_TEST_PATCH_FAIL", v, 1);
    for (int t = 1; t <= bad + 1; t++) {
        uint64_t before;
        hfs_skel_t *k = live_tick(r, t, &live, &before);
        if (!k) break;
        uint64_t after = hfs_skel_live_patches(live);
        if (t == bad) CHECK_EQ(after, 0); /* built afresh */
        if (t != 1 && t != bad) CHECK_EQ(after, before + 1);
        check_same_as_full(k, r, t);
        hfs_skel_unref(k);
    }
    unsetenv("H5LOGFS_TEST_PATCH_FAIL");
    hfs_skel_live_free(live);
    h5l_reader_close(r);
}

/* The third file: checkpoints every 4 ticks (H5L_CKPT_TICKS); tick 1
 * defines /v and writes a row, ticks 2..10 only set the global "step" to
 * the tick. Segment 5..8 is then simple with an attribute list (format.md
 * 3.5), which a reader opened as the daemon opens it (lazy attributes)
 * takes as of tick 8 alone. */
static char g_path3[512];
#define LAZY_TICKS 10

static int write_attr_file(void)
{
    setenv("H5L_CKPT_TICKS", "4", 1);
    h5l_file_t *f;
    int rc = h5l_create(g_path3, MPI_COMM_WORLD, NULL, &f);
    unsetenv("H5L_CKPT_TICKS");
    if (rc) return rc;
    int dt, dx, v;
    rc |= h5l_def_dim(f, "time", H5L_UNLIMITED, &dt);
    rc |= h5l_def_dim(f, "x", 4, &dx);
    int dims[2] = {dt, dx};
    rc |= h5l_def_var(f, "/v", H5T_IEEE_F32LE, 2, dims, NULL, &v);
    float row[4] = {1, 2, 3, 4};
    uint64_t st[2] = {0, 0}, ct[2] = {1, 4};
    rc |= h5l_put(f, v, st, ct, row);
    for (int t = 1; t <= LAZY_TICKS && !rc; t++) {
        double step = t;
        rc |= h5l_put_att(f, H5L_GLOBAL, "step", H5T_NATIVE_DOUBLE, 1, &step);
        if (!rc) rc = h5l_flush(f);
    }
    if (rc) fprintf(stderr, "writer: %s\n", h5l_errmsg(f));
    int crc = h5l_close(f);
    return rc ? rc : crc;
}

/* The global "step" of skeleton k's image. */
static double step_of(const hfs_skel_t *k)
{
    hid_t f = open_image(k, 0);
    double v = -1;
    hid_t a = f >= 0 ? H5Aopen(f, "step", H5P_DEFAULT) : -1;
    CHECK(a >= 0 && H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0);
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
    return v;
}

/* Skeletons of ticks inside a segment opened from its last attribute
 * values: each has its own tick's attributes (built from the schema view)
 * and its own version, though nothing else told those ticks apart (a
 * shared version would let one tick's skeleton serve another's). */
static void test_lazy_attribute_ticks(void)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    CHECK_EQ(h5l_reader_open_flags(g_path3, H5L_READER_LAZY_ATTRS, &r, &e), H5L_OK);
    if (!r) return;
    uint64_t nseg = 0, nsum = 0;
    h5l_reader_ckpt_segments(r, &nseg, &nsum);
    CHECK(nseg == 2 && nsum == 1); /* 1..4 defines /v: read at open; 5..8 from its summary */
    uint64_t ver[LAZY_TICKS + 1];
    h5l_reader_rdlock(r);
    for (uint64_t t = 1; t <= LAZY_TICKS; t++) {
        ver[t] = hfs_skel_version(r, h5l_reader_schema(r), t);
        CHECK_EQ(h5l_reader_attrs_exact(r, t), !(t >= 5 && t < 8));
    }
    h5l_reader_unlock(r);
    for (uint64_t t = 2; t <= LAZY_TICKS; t++) CHECK(ver[t] > ver[t - 1]); /* a step each tick */
    for (uint64_t t = 4; t <= 9; t++) {
        hfs_skel_t *k = NULL;
        int rc = hfs_skel_build(r, t, &k, &e);
        CHECK_EQ(rc, H5L_OK);
        if (rc) {
            fprintf(stderr, "  tick %llu: %s\n", (unsigned long long)t, e.msg);
            continue;
        }
        CHECK_EQ(k->version, ver[t]);
        CHECK_EQ(step_of(k), (double)t);
        hfs_skel_unref(k);
    }
    h5l_reader_close(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    char dir[] = "/tmp/h5l-test-skelpatch.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(g_path, sizeof g_path, "%s/f.h5", dir);
    snprintf(g_img, sizeof g_img, "%s/img.h5", dir);
    snprintf(g_path2, sizeof g_path2, "%s/g.h5", dir);
    snprintf(g_path3, sizeof g_path3, "%s/a.h5", dir);
    int rc = write_file();
    if (!rc) rc = write_grow_file();
    if (!rc) rc = write_attr_file();
    if (rc) {
        fprintf(stderr, "cannot write %s\n0 passed, 1 failed\n", g_path);
        MPI_Finalize();
        return 1;
    }
    static const th_test_t tests[] = {{"test_patch_equals_full_build", test_patch_equals_full_build},
                                      {"test_failed_patch_builds_in_full", test_failed_patch_builds_in_full},
                                      {"test_own_index_grows_alone", test_own_index_grows_alone},
                                      {"test_patch_out_of_memory", test_patch_out_of_memory},
                                      {"test_lazy_attribute_ticks", test_lazy_attribute_ticks},
                                      {"test_own_index_rows_prefix", test_own_index_rows_prefix}};
    int failed = th_run(tests, 6);
    unlink(g_path);
    unlink(g_path2);
    unlink(g_path3);
    for (int i = 0; i < 2; i++) {
        char p[640];
        snprintf(p, sizeof p, "%s.%d", g_img, i);
        unlink(p);
    }
    rmdir(dir);
    MPI_Finalize();
    return failed ? 1 : 0;
}
