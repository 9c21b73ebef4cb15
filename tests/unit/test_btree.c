/* test_btree.c — chunk B-trees the project writes itself (libcore/src/hdf5/btree.c).
 *
 * Why: a wrong key or child in a node gives a valid-looking file whose
 * chunks read as fill or as another chunk's bytes. The nodes are checked
 * here by a decoder written from the HDF5 file format's description of
 * version 1 B-trees (not from btree.c), searching the way libhdf5 1.10
 * does (H5B_find: binary search over a node's keys with the chunk
 * comparison; at a leaf, the chunk is found only if the key is exactly
 * it). For chunk sets of 1 .. 5000 chunks in 1, 2 and 3 dimensions (one to
 * three levels below the root, dense runs and scattered chunks):
 *   1. every chunk of the grid is found exactly when it is in the set, at
 *      the address the tree places it;
 *   2. every node has its level, its sibling links and keys that increase;
 *   3. reads of any byte range give the bytes of a whole-area read;
 *   4. bad lists (empty, unsorted) are refused;
 *   5. the same for trees grown by appends (a live file's new chunks),
 *      placed where the chunks end or elsewhere, and their copies.
 *   6. own roots: a layout message pointed at a tree of ours, read back by
 *      libhdf5 itself (chunks, values, the header's checksum), and the
 *      headers the guard refuses; lookup3 against its published values;
 *   7. out of memory at each allocation in turn (tests/unit/oom.h) of
 *      init, place, append, copy and reads: H5L_ENOMEM, the tree as it
 *      was, and the same tree once memory is back.
 * Its use in a real canonical file, read by libhdf5 itself, is checked
 * by tests/fused/test_canon.c and tests/e2e (test_differential.py). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>

#include "h5log/btree.h"
#include "oom.h"
#include "tharness.h"

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* The file: the root and the node area read through h5l_bt_read. */
typedef struct file {
    const h5l_bt_t *bt;
    uint64_t nd1;   /* key dimensions: rank + 1 */
    size_t ksize;   /* key bytes */
    size_t nsize;   /* node bytes */
} file_t;

/* A node's bytes at addr (nsize of them); 0 if it is not a node. */
static int read_node(const file_t *f, uint64_t addr, uint8_t *buf)
{
    memset(buf, 0xAA, f->nsize);
    if (h5l_bt_read(f->bt, addr, f->nsize, buf)) return 0;
    return memcmp(buf, "TREE", 4) == 0 && buf[4] == 1;
}

/* key i of a node, scaled by the chunk dims, into s[nd1] */
static void key_scaled(const file_t *f, const uint8_t *node, unsigned i, uint64_t *s)
{
    const uint8_t *k = node + 24 + (size_t)i * (f->ksize + 8);
    for (uint64_t d = 0; d < f->nd1; d++) s[d] = get64(k + 8 + 8 * d) / f->bt->dim[d];
}

static uint64_t child(const file_t *f, const uint8_t *node, unsigned i)
{
    return get64(node + 24 + (size_t)i * (f->ksize + 8) + f->ksize);
}

/* lexicographic compare of nd1-vectors */
static int vcmp(uint64_t n, const uint64_t *a, const uint64_t *b)
{
    for (uint64_t d = 0; d < n; d++)
        if (a[d] != b[d]) return a[d] < b[d] ? -1 : 1;
    return 0;
}

/* libhdf5's chunk comparison (H5D__btree_cmp3) of chunk want against the
 * key pair (lt, rt): -1 left of lt, 1 at or right of rt, 0 between; rank 1
 * has its own rule in libhdf5 (it compares the two components apart). */
static int cmp3(uint64_t nd1, const uint64_t *lt, const uint64_t *want, const uint64_t *rt)
{
    if (nd1 == 2) {
        if (want[0] > rt[0] || (want[0] == rt[0] && want[1] >= rt[1])) return 1;
        if (want[0] < lt[0]) return -1;
        return 0;
    }
    if (vcmp(nd1, want, rt) >= 0) return 1;
    if (vcmp(nd1, want, lt) < 0) return -1;
    return 0;
}

/* Search the tree for chunk coordinates c (rank), like H5B_find. 1 and
 * *addr if found, 0 if not, -1 if the tree is malformed. */
static int find(const file_t *f, const uint64_t *c, uint64_t *addr)
{
    uint8_t *node = malloc(f->nsize);
    uint64_t want[H5L_MAX_DIMS + 1] = {0}, lt[H5L_MAX_DIMS + 1], rt[H5L_MAX_DIMS + 1];
    for (uint64_t d = 0; d + 1 < f->nd1; d++) want[d] = c[d];
    uint64_t at = f->bt->root;
    int level = -1, rc = -1;
    for (;;) {
        if (!read_node(f, at, node)) break;
        if (level >= 0 && node[5] != level - 1) break; /* a child one level down */
        level = node[5];
        unsigned n = (unsigned)node[6] | (unsigned)node[7] << 8, lo = 0, hi = n, idx = 0;
        int cmp = 1;
        while (lo < hi && cmp) {
            idx = (lo + hi) / 2;
            key_scaled(f, node, idx, lt);
            key_scaled(f, node, idx + 1, rt);
            cmp = cmp3(f->nd1, lt, want, rt);
            if (cmp < 0)
                hi = idx;
            else
                lo = idx + 1;
        }
        if (cmp) {
            rc = 0;
            break;
        }
        if (level > 0) {
            at = child(f, node, idx);
            continue;
        }
        key_scaled(f, node, idx, lt); /* H5D__btree_found: exactly this chunk */
        rc = 1;
        for (uint64_t d = 0; d < f->nd1; d++)
            if (want[d] >= lt[d] + 1) rc = 0;
        if (rc && get32(node + 24 + (size_t)idx * (f->ksize + 8)) != f->bt->chunk_bytes) rc = -1;
        *addr = child(f, node, idx);
        break;
    }
    free(node);
    return rc;
}

/* 2. every node of every level: level, siblings, increasing keys */
static void check_nodes(const file_t *f)
{
    const h5l_bt_t *bt = f->bt;
    uint8_t *node = malloc(f->nsize);
    for (uint32_t l = 0; l <= bt->root_level; l++) {
        for (uint64_t j = 0; j < bt->count[l]; j++) {
            uint64_t a = l == bt->root_level ? bt->root : bt->nodes + (bt->first[l] + j) * bt->node_size;
            CHECK(read_node(f, a, node));
            CHECK_EQ(node[5], l);
            uint64_t left = get64(node + 8), right = get64(node + 16);
            CHECK_EQ(left, j ? a - bt->node_size : UINT64_MAX);
            CHECK_EQ(right, j + 1 < bt->count[l] ? a + bt->node_size : UINT64_MAX);
            unsigned n = (unsigned)node[6] | (unsigned)node[7] << 8;
            CHECK(n >= 1 && n <= bt->two_k);
            uint64_t prev[H5L_MAX_DIMS + 1], cur[H5L_MAX_DIMS + 1];
            key_scaled(f, node, 0, prev);
            for (unsigned i = 1; i <= n; i++) {
                key_scaled(f, node, i, cur);
                CHECK(vcmp(f->nd1, prev, cur) < 0);
                memcpy(prev, cur, sizeof cur);
            }
        }
    }
    free(node);
}

static uint64_t tree_sum(const h5l_bt_t *bt);

/* A tree over the chunks of a grid nblk whose row-major index passes keep. */
static void check_set(uint32_t nd, const uint64_t *nblk, const uint64_t *block, size_t esize, uint32_t two_k,
                      int (*keep)(uint64_t blk, uint64_t arg), uint64_t arg, int appends)
{
    uint64_t total = 1;
    for (uint32_t d = 0; d < nd; d++) total *= nblk[d];
    uint64_t *blks = malloc(total * sizeof *blks), n = 0;
    for (uint64_t b = 0; b < total; b++)
        if (keep(b, arg)) blks[n++] = b;
    uint64_t cb = esize;
    for (uint32_t d = 0; d < nd; d++) cb *= block[d];
    /* with appends: the first half, then the rest in three steps, the
     * second where the chunks end (same placement), the others elsewhere;
     * the node area moved to fit at the end */
    uint64_t n0 = appends ? (n + 1) / 2 : n;
    h5l_bt_t bt;
    CHECK_EQ(h5l_bt_init(&bt, nd, nblk, block, esize, two_k, blks, n0), 0);
    CHECK_EQ(bt.chunk_bytes, cb);
    /* root somewhere, the node area after it, chunk 0 before, the others after */
    uint64_t root = 4096, nodes = root + bt.node_size + 8;
    CHECK_EQ(h5l_bt_place(&bt, root, nodes, 1024, nodes + bt.nodes_len), 0);
    uint64_t *want_addr = malloc((n + 1) * sizeof *want_addr);
    for (uint64_t o = 0; o < n0; o++) want_addr[o] = o ? nodes + bt.nodes_len + (o - 1) * cb : 1024;
    uint64_t far = 1u << 30;
    for (uint64_t at = n0, step = 0; at < n; step++) {
        uint64_t k = step < 2 ? (n - at + 2) / 3 : n - at;
        if (k == 0) k = 1;
        uint64_t addr = step == 1 ? h5l_bt_chunks_end(&bt) : far;
        size_t npl = bt.npl;
        /* as a live skeleton's patch: a copy grows (past the room the
         * copy has for runs and levels, with many chunks), the tree
         * copied stays as it was */
        h5l_bt_t old = bt;
        uint64_t sum = tree_sum(&old);
        CHECK_EQ(h5l_bt_copy(&bt, &old), 0);
        CHECK_EQ(h5l_bt_append(&bt, blks + at, k, addr), 0);
        CHECK_EQ(bt.npl, npl + (step != 1));
        CHECK_EQ(tree_sum(&old), sum);
        h5l_bt_free(&old);
        for (uint64_t o = 0; o < k; o++) want_addr[at + o] = addr + o * cb;
        far += (k + 7) * cb;
        at += k;
    }
    if (appends && n > 1) { /* an append must come after the last chunk */
        uint64_t again = blks[n - 1];
        CHECK_EQ(h5l_bt_append(&bt, &again, 1, far), H5L_EINVAL);
        h5l_bt_t copy;
        CHECK_EQ(h5l_bt_copy(&copy, &bt), 0); /* the copy is what is checked below */
        h5l_bt_free(&bt);
        bt = copy;
    }
    if (bt.nodes_len > bt.nodes_cap) {
        h5l_bt_set_nodes(&bt, far, bt.nodes_len);
        nodes = far;
    }
    CHECK_EQ(bt.n, n);
    file_t f = {&bt, nd + 1, 8 + 8 * ((size_t)nd + 1), (size_t)bt.node_size};
    CHECK_EQ(bt.node_size, 24 + (uint64_t)two_k * 8 + ((uint64_t)two_k + 1) * f.ksize);
    /* 1. every chunk of the grid */
    long bad = 0;
    uint64_t ord = 0;
    for (uint64_t b = 0; b < total; b++) {
        uint64_t c[H5L_MAX_DIMS], x = b, addr = 0;
        for (int d = (int)nd - 1; d >= 0; d--) {
            c[d] = x % nblk[d];
            x /= nblk[d];
        }
        int in = ord < n && blks[ord] == b;
        int got = find(&f, c, &addr);
        if (in) {
            uint64_t want = want_addr[ord];
            bad += got != 1 || addr != want || h5l_bt_blk(&bt, ord) != b || h5l_bt_chunk_addr(&bt, ord) != want;
            ord++;
        } else {
            bad += got != 0;
        }
    }
    if (bad) fprintf(stderr, "  nd %u n %llu: %ld chunks wrong\n", nd, (unsigned long long)n, bad);
    CHECK_EQ(bad, 0);
    check_nodes(&f);
    /* 3. pieces of a read equal the whole read */
    uint64_t lo = nodes, hi = nodes + bt.nodes_len; /* the node area; the root alone if none */
    if (hi == lo) {
        lo = root;
        hi = root + bt.node_size;
    }
    uint8_t *all = malloc(hi - lo), *part = malloc(hi - lo);
    memset(all, 0x11, hi - lo);
    CHECK_EQ(h5l_bt_read(&bt, lo, (size_t)(hi - lo), all), 0);
    uint64_t seed = n * 2654435761u + 1;
    for (int i = 0; i < 200; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        uint64_t a = lo + (seed >> 20) % (hi - lo), len = 1 + (seed >> 7) % (2 * bt.node_size);
        if (a + len > hi) len = hi - a;
        memset(part, 0x11, len);
        CHECK_EQ(h5l_bt_read(&bt, a, (size_t)len, part), 0);
        if (memcmp(part, all + (a - lo), len)) {
            fprintf(stderr, "  read at %llu + %llu differs\n", (unsigned long long)a, (unsigned long long)len);
            CHECK(0);
            break;
        }
    }
    /* bytes outside the root and the node area are left alone */
    uint8_t gap[8];
    memset(gap, 0x5A, sizeof gap);
    CHECK_EQ(h5l_bt_read(&bt, root + bt.node_size, sizeof gap, gap), 0);
    CHECK(gap[0] == 0x5A && gap[7] == 0x5A);
    free(all);
    free(part);
    free(want_addr);
    h5l_bt_free(&bt);
    free(blks);
}

static int keep_all(uint64_t b, uint64_t n) { return b < n; }
static int keep_scatter(uint64_t b, uint64_t m) { return (b * 2654435761u >> 7) % m == 0 || b % 97 < 3; }

static void test_geometry(void)
{
    uint64_t nblk[1] = {1u << 20}, block[1] = {4}, blks[5000];
    for (uint64_t i = 0; i < 5000; i++) blks[i] = i;
    struct {
        uint64_t n;
        uint32_t root_level;
        uint64_t c0, c1;
    } want[] = {{1, 0, 1, 0}, {64, 0, 1, 0}, {65, 1, 2, 1}, {4096, 1, 64, 1}, {4097, 2, 65, 2}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        h5l_bt_t bt;
        CHECK_EQ(h5l_bt_init(&bt, 1, nblk, block, 4, 64, blks, want[i].n), 0);
        CHECK_EQ(bt.root_level, want[i].root_level);
        CHECK_EQ(bt.count[0], want[i].c0);
        if (bt.root_level >= 1) CHECK_EQ(bt.count[1], want[i].c1);
        uint64_t below = 0;
        for (uint32_t l = 0; l < bt.root_level; l++) below += bt.count[l];
        CHECK_EQ(bt.nodes_len, below * bt.node_size);
        CHECK_EQ(bt.nruns, 1);
        h5l_bt_free(&bt);
    }
    /* runs */
    uint64_t b2[6] = {0, 1, 2, 5, 6, 9};
    h5l_bt_t bt;
    CHECK_EQ(h5l_bt_init(&bt, 1, nblk, block, 4, 64, b2, 6), 0);
    CHECK_EQ(bt.nruns, 3);
    for (uint64_t o = 0; o < 6; o++) CHECK_EQ(h5l_bt_blk(&bt, o), b2[o]);
    h5l_bt_free(&bt);
    /* 4. refused */
    uint64_t unsorted[3] = {1, 3, 3};
    CHECK_EQ(h5l_bt_init(&bt, 1, nblk, block, 4, 64, unsorted, 3), H5L_EINVAL);
    CHECK_EQ(h5l_bt_init(&bt, 1, nblk, block, 4, 64, b2, 0), H5L_EINVAL);
}

static void test_trees(void)
{
    for (int appends = 0; appends < 2; appends++) {
        uint64_t g1[1] = {9000}, b1[1] = {2};
        check_set(1, g1, b1, 2, 64, keep_all, 1, appends); /* rank 1, one chunk: the root is the leaf */
        check_set(1, g1, b1, 2, 64, keep_all, 2, appends);
        check_set(1, g1, b1, 2, 64, keep_all, 4097, appends); /* two levels below the root */
        check_set(1, g1, b1, 2, 64, keep_scatter, 7, appends);
        uint64_t g2[2] = {3000, 3}, b2[2] = {1, 8};
        check_set(2, g2, b2, 4, 64, keep_all, 64, appends);
        check_set(2, g2, b2, 4, 64, keep_all, 65, appends);
        check_set(2, g2, b2, 4, 64, keep_scatter, 3, appends);
        uint64_t g3[3] = {40, 9, 5}, b3[3] = {1, 2, 3};
        check_set(3, g3, b3, 8, 64, keep_scatter, 2, appends);
        check_set(3, g3, b3, 8, 8, keep_scatter, 5, appends); /* small nodes: more levels */
        check_set(3, g3, b3, 8, 8, keep_all, 1800, appends);
    }
}

/* lookup3 as published (the driver of Jenkins' lookup3.c prints these). */
static void test_lookup3(void)
{
    CHECK_EQ(h5l_bt_lookup3((const uint8_t *)"", 0), 0xdeadbeefu);
    CHECK_EQ(h5l_bt_lookup3((const uint8_t *)"Four score and seven years ago", 30), 0x17770551u);
}

typedef struct mem {
    uint8_t *p;
    size_t n;
} mem_t;

static void mem_read(const void *ctx, uint64_t off, size_t n, void *buf)
{
    const mem_t *m = ctx;
    memset(buf, 0, n);
    if (off < m->n) memcpy(buf, m->p + off, off + n <= m->n ? n : m->n - off);
}

/* An in-memory HDF5 file made as skeletons are (creation order tracked:
 * version 2 object headers) with /v, float [10, 8] (unlimited first
 * dimension), chunks [2, 4], allocation alloc, and /pad, bytes allocated
 * early whose storage the own root goes to. Its image, /v's object header
 * and /pad's data address. */
static mem_t make_file(H5D_alloc_time_t alloc, uint64_t *oh, uint64_t *pad)
{
    mem_t m = {0};
    unsigned crt = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    H5Pset_link_creation_order(fcpl, crt);
    H5Pset_attr_creation_order(fcpl, crt);
    hid_t f = H5Fcreate("own-root", H5F_ACC_TRUNC, fcpl, fapl);
    hsize_t dims[2] = {10, 8}, maxd[2] = {H5S_UNLIMITED, 8}, ch[2] = {2, 4}, pn = 1 << 16;
    hid_t sp = H5Screate_simple(2, dims, maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, ch);
    H5Pset_attr_creation_order(dcpl, crt);
    H5Pset_obj_track_times(dcpl, 0);
    H5Pset_alloc_time(dcpl, alloc);
    float fill = -1;
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill);
    hid_t d = H5Dcreate2(f, "/v", H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5O_info_t info;
    CHECK(d >= 0 && H5Oget_info2(d, &info, H5O_INFO_BASIC) >= 0);
    *oh = info.addr;
    hid_t psp = H5Screate_simple(1, &pn, NULL), pcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_alloc_time(pcpl, H5D_ALLOC_TIME_EARLY);
    hid_t pd = H5Dcreate2(f, "/pad", H5T_STD_U8LE, psp, H5P_DEFAULT, pcpl, H5P_DEFAULT);
    *pad = H5Dget_offset(pd);
    CHECK(pd >= 0 && *pad != HADDR_UNDEF);
    H5Dclose(pd);
    H5Dclose(d);
    CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0);
    ssize_t n = H5Fget_file_image(f, NULL, 0);
    CHECK(n > 0);
    m.p = calloc(1, (size_t)n);
    m.n = (size_t)n;
    CHECK_EQ(H5Fget_file_image(f, m.p, m.n), n);
    H5Fclose(f);
    H5Sclose(sp);
    H5Sclose(psp);
    H5Pclose(dcpl);
    H5Pclose(pcpl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    return m;
}

/* An own root (skel.c's own_root): libhdf5 made no index for /v; the tree
 * goes to space of its own and the layout message is pointed at it. The
 * bytes h5l_bt_read gives, written to a file, are read by libhdf5 itself:
 * it finds every chunk of the set where the tree put it (and none other),
 * reads their values and the fill value elsewhere, and accepts the object
 * header's checksum. Then what the guard refuses: a header whose checksum
 * fails, a layout that has an index already, another chunk shape, no
 * header at all. */
static void test_own_root(void)
{
    uint64_t oh = 0, pad = 0;
    mem_t m = make_file(H5D_ALLOC_TIME_INCR, &oh, &pad);
    uint64_t nblk[2] = {5, 2}, block[2] = {2, 4}, blks[4] = {0, 3, 4, 9}, cb = 2 * 4 * 4;
    h5l_bt_t bt;
    memset(&bt, 0, sizeof bt);
    CHECK_EQ(h5l_bt_init(&bt, 2, nblk, block, 4, 64, blks, 4), 0);
    uint64_t c0 = pad + bt.node_size + bt.nodes_len;
    CHECK(c0 + 4 * cb <= pad + (1 << 16));
    CHECK_EQ(h5l_bt_place(&bt, pad, pad + bt.node_size, c0, c0 + cb), 0);
    bt.oh = oh;
    CHECK_EQ(h5l_bt_point_layout(&bt, mem_read, &m), 0);
    CHECK(bt.lay_at > oh && bt.ck_at > bt.lay_at);
    for (uint64_t i = 0; i < 4; i++) /* chunk i: 8 floats, 100 * blk + element */
        for (int e = 0; e < 8; e++) {
            float x = (float)(100 * blks[i] + (uint64_t)e);
            memcpy(m.p + c0 + i * cb + 4 * (uint64_t)e, &x, 4);
        }
    CHECK_EQ(h5l_bt_read(&bt, 0, m.n, m.p), 0);
    char path[] = "/tmp/h5l-test-ownroot.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, m.p, m.n) == (ssize_t)m.n);
    if (fd >= 0) close(fd);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = f < 0 ? -1 : H5Dopen2(f, "/v", H5P_DEFAULT);
    CHECK(d >= 0);
    float v[10][8];
    CHECK(d >= 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    for (uint64_t b = 0, i = 0; d >= 0 && b < 10; b++) {
        int in = i < 4 && blks[i] == b;
        hsize_t off[2] = {b / 2 * 2, b % 2 * 4}, size = 0;
        haddr_t addr = 0;
        unsigned mask = 0;
        CHECK(H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) >= 0);
        CHECK_EQ(addr, in ? c0 + i * cb : HADDR_UNDEF);
        for (int e = 0; e < 8; e++)
            CHECK_EQ(v[off[0] + (hsize_t)e / 4][off[1] + (hsize_t)e % 4], in ? (float)(100 * b + (uint64_t)e) : -1.0f);
        i += in;
    }
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    unlink(path);
    free(m.p);

    /* what the guard refuses */
    for (int bad = 0; bad < 4; bad++) {
        m = make_file(bad == 1 ? H5D_ALLOC_TIME_EARLY : H5D_ALLOC_TIME_INCR, &oh, &pad);
        h5l_bt_t b2 = bt;
        b2.oh = bad == 3 ? pad : oh;
        b2.lay_at = b2.ck_at = 0;
        if (bad == 0) m.p[oh + 8] ^= 1; /* the first message's bytes: the checksum fails */
        if (bad == 2) b2.dim[1] = 8;  /* another chunk shape */
        CHECK_EQ(h5l_bt_point_layout(&b2, mem_read, &m), H5L_ECORRUPT);
        CHECK_EQ(b2.lay_at, 0);
        if (bad == 2) b2.dim[1] = 4; /* (bt's array: b2 is a shallow copy) */
        free(m.p);
    }
    h5l_bt_free(&bt);
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A layout message in a continuation chunk (libhdf5 puts it in the first
 * chunk of a new dataset's header, so this header is made by hand from the
 * format's description): the walk follows the continuation message, points
 * the address inside the OCHK chunk and makes that chunk's checksum
 * again; the first chunk is left alone. */
static void test_layout_in_continuation(void)
{
    uint8_t f[512] = {0};
    const uint64_t oh = 64, x = 256, root = 400;
    /* first chunk: OHDR, version 2, flags 0x04 (creation order tracked, a
     * 1-byte size), size, one continuation message (6-byte header), a gap */
    uint8_t *h = f + oh;
    memcpy(h, "OHDR", 4);
    h[4] = 2;
    h[5] = 0x04;
    uint8_t size0 = 6 + 16 + 3; /* the message, then a 3-byte gap */
    h[6] = size0;
    uint8_t *m = h + 7;
    m[0] = 0x10;
    put_le(m + 1, 16, 2);
    put_le(m + 6, x, 8);
    uint64_t clen = 4 + 6 + 11 + 4 * 3 + 4; /* OCHK, the layout message, the checksum */
    put_le(m + 14, clen, 8);
    put_le(h + 7 + size0, h5l_bt_lookup3(h, 7 + (size_t)size0), 4);
    /* continuation chunk: OCHK, the layout message (rank 2: 3 sizes), checksum */
    uint8_t *c = f + x;
    memcpy(c, "OCHK", 4);
    uint8_t *l = c + 4;
    l[0] = 0x08;
    put_le(l + 1, 11 + 4 * 3, 2);
    uint8_t *body = l + 6;
    body[0] = 3;
    body[1] = 2;
    body[2] = 3;
    memset(body + 3, 0xff, 8);
    put_le(body + 11, 2, 4);
    put_le(body + 15, 4, 4);
    put_le(body + 19, 4, 4);
    put_le(c + clen - 4, h5l_bt_lookup3(c, (size_t)clen - 4), 4);
    mem_t mm = {f, sizeof f};
    uint64_t nblk[2] = {5, 2}, block[2] = {2, 4}, blks[2] = {1, 2};
    h5l_bt_t bt;
    CHECK_EQ(h5l_bt_init(&bt, 2, nblk, block, 4, 64, blks, 2), 0);
    CHECK_EQ(h5l_bt_place(&bt, root, root + bt.node_size, 1000, 1000 + 32), 0);
    bt.oh = oh;
    CHECK_EQ(h5l_bt_point_layout(&bt, mem_read, &mm), 0);
    CHECK_EQ(bt.lay_at, x + 4 + 6 + 3);
    CHECK_EQ(bt.ck_at, x + clen - 4);
    uint8_t g[sizeof f];
    memcpy(g, f, sizeof f);
    CHECK_EQ(h5l_bt_read(&bt, oh, (size_t)(x + clen - oh), g + oh), 0); /* the header's bytes as served */
    CHECK_EQ(get64(g + bt.lay_at), root);
    CHECK_EQ(get32(g + bt.ck_at), h5l_bt_lookup3(g + x, (size_t)clen - 4));
    CHECK(memcmp(g + oh, f + oh, (size_t)(x - oh)) == 0); /* the first chunk unchanged */
    /* a continuation chunk whose checksum fails is refused */
    f[x + 5] ^= 1;
    bt.lay_at = bt.ck_at = 0;
    CHECK_EQ(h5l_bt_point_layout(&bt, mem_read, &mm), H5L_ECORRUPT);
    h5l_bt_free(&bt);
}

/* The bytes a tree serves over its root and node area, and each chunk's
 * ordinal, address and index: equal for equal trees. */
static uint64_t tree_sum(const h5l_bt_t *bt)
{
    uint64_t lo = bt->root < bt->nodes ? bt->root : bt->nodes;
    uint64_t hi = bt->nodes + bt->nodes_len > bt->root + bt->node_size ? bt->nodes + bt->nodes_len
                                                                       : bt->root + bt->node_size;
    uint8_t *b = calloc(1, (size_t)(hi - lo));
    uint64_t h = 1469598103934665603ull;
    if (!b || h5l_bt_read(bt, lo, (size_t)(hi - lo), b)) {
        free(b);
        return 0;
    }
    for (uint64_t i = 0; i < hi - lo; i++) h = (h ^ b[i]) * 1099511628211ull;
    for (uint64_t o = 0; o < bt->n; o++)
        h = (h ^ h5l_bt_blk(bt, o) ^ (h5l_bt_chunk_addr(bt, o) << 20)) * 1099511628211ull;
    free(b);
    return h;
}

/* 7. Each allocation of each step fails in turn: the step returns
 * H5L_ENOMEM and leaves the tree as it was (same bytes; make asan finds
 * leaks), and then succeeds. */
static void test_out_of_memory(void)
{
    enum { N = 300, M = 100 };
    uint64_t nblk[2] = {5000, 3}, block[2] = {1, 8}, blks[N + M];
    for (uint64_t i = 0; i < N + M; i++) blks[i] = 3 * i + (i % 7 == 0); /* runs of one, scattered */
    h5l_bt_t ref, bt;
    CHECK_EQ(h5l_bt_init(&ref, 2, nblk, block, 4, 64, blks, N), 0);
    CHECK_EQ(h5l_bt_place(&ref, 1000, 10000, 2000, 3000000), 0);
    uint64_t placed = tree_sum(&ref);
    CHECK_EQ(h5l_bt_append(&ref, blks + N, M, 9000000), 0); /* a placement of its own */
    uint64_t grown = tree_sum(&ref);
    int steps = 0, bad = 0;
    for (int step = 0; step < 4; step++) {
        int fired = 1;
        for (long n = 1; fired && n < 1000; n++, steps++) {
            h5l_bt_t cp;
            memset(&bt, 0, sizeof bt);
            int rc = 0;
            uint64_t want = 0;
            if (step == 0) {
                oom_arm(n);
                rc = h5l_bt_init(&bt, 2, nblk, block, 4, 64, blks, N);
                fired = oom_off();
                if (!rc) rc = h5l_bt_place(&bt, 1000, 10000, 2000, 3000000);
                want = placed;
            } else {
                CHECK_EQ(h5l_bt_init(&bt, 2, nblk, block, 4, 64, blks, N), 0);
                if (step == 1) {
                    h5l_bt_t before = bt;
                    oom_arm(n);
                    rc = h5l_bt_place(&bt, 1000, 10000, 2000, 3000000);
                    fired = oom_off();
                    if (rc) { /* unchanged, and placed once memory is back */
                        bad += rc != H5L_ENOMEM || !fired || memcmp(&before, &bt, sizeof bt) != 0;
                        rc = h5l_bt_place(&bt, 1000, 10000, 2000, 3000000);
                    }
                    want = placed;
                } else {
                    CHECK_EQ(h5l_bt_place(&bt, 1000, 10000, 2000, 3000000), 0);
                    oom_arm(n);
                    rc = step == 2 ? h5l_bt_append(&bt, blks + N, M, 9000000) : h5l_bt_copy(&cp, &bt);
                    fired = oom_off();
                    if (rc) {
                        bad += rc != H5L_ENOMEM || !fired || tree_sum(&bt) != placed;
                        rc = step == 2 ? h5l_bt_append(&bt, blks + N, M, 9000000) : h5l_bt_copy(&cp, &bt);
                    }
                    if (step == 3 && !rc) { /* the copy is the tree, and stands alone */
                        bad += tree_sum(&cp) != placed;
                        h5l_bt_free(&cp);
                    }
                    want = step == 2 ? grown : placed;
                }
            }
            if (step == 0 && rc) {
                bad += rc != H5L_ENOMEM || !fired;
                h5l_bt_free(&bt); /* harmless after a failed init */
                continue;
            }
            if (rc || tree_sum(&bt) != want) {
                fprintf(stderr, "  step %d, allocation %ld failing: rc %d\n", step, n, rc);
                bad++;
            }
            h5l_bt_free(&bt);
        }
        CHECK(!fired);
    }
    /* reads allocate a node's buffer: out of memory there is H5L_ENOMEM */
    uint8_t *b = malloc(4096);
    oom_arm(1);
    int rc = h5l_bt_read(&ref, ref.nodes, 4096, b);
    int fired = oom_off();
    CHECK(fired ? rc == H5L_ENOMEM : rc == 0);
    free(b);
    CHECK(steps > 8);
    CHECK_EQ(bad, 0);
    h5l_bt_free(&ref);
}

int main(void)
{
    static const th_test_t tests[] = {{"test_geometry", test_geometry},
                                      {"test_trees", test_trees},
                                      {"test_lookup3", test_lookup3},
                                      {"test_own_root", test_own_root},
                                      {"test_layout_in_continuation", test_layout_in_continuation},
                                      {"test_out_of_memory", test_out_of_memory}};
    return th_run(tests, sizeof tests / sizeof *tests);
}
