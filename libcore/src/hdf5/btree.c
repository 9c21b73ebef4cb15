/* btree.c — chunk B-trees made from a chunk list (see btree.h).
 *
 * The bytes follow the HDF5 file format's version 1 B-tree, node type 1
 * (raw data chunks), with 8-byte addresses and little-endian fields, as
 * libhdf5 1.10 writes them (docs/format.md gives every byte). skel.c
 * checks, on every build, that the root libhdf5 wrote for the first chunk
 * has the size and the bytes this module gives a tree of that one chunk. */
#include "h5log/btree.h"

#include <stdlib.h>
#include <string.h>

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* h5l_bt_t.sep: arrays in an allocation of their own (else in nblk's) */
#define BT_SEP_RUNS 1u
#define BT_SEP_PL 2u
#define BT_SEP_COUNT 4u

/* Lay out the levels for bt->n chunks: counts, first indices, node area
 * length. H5L_EINVAL if too deep, H5L_ENOMEM (bt unchanged either way). */
static int layout(h5l_bt_t *bt)
{
    uint64_t c = (bt->n + bt->two_k - 1) / bt->two_k, at = 0;
    uint64_t count[H5L_BT_MAX_LEVELS], first[H5L_BT_MAX_LEVELS];
    uint32_t l = 0;
    while (c > 1) {
        if (l + 1 >= H5L_BT_MAX_LEVELS) return H5L_EINVAL; /* bt unchanged */
        count[l] = c;
        first[l] = at;
        at += c;
        c = (c + bt->two_k - 1) / bt->two_k;
        l++;
    }
    count[l] = 1;
    first[l] = 0;
    if (!bt->count || l + 1 > bt->cap_lv) {
        uint64_t *lv = malloc(2 * ((size_t)l + 1) * sizeof *lv);
        if (!lv) return H5L_ENOMEM;
        if (bt->sep & BT_SEP_COUNT) free(bt->count);
        bt->count = lv;
        bt->first = lv + l + 1;
        bt->cap_lv = l + 1;
        bt->sep |= BT_SEP_COUNT;
    }
    memcpy(bt->count, count, (l + 1) * sizeof *count);
    memcpy(bt->first, first, (l + 1) * sizeof *first);
    bt->root_level = l;
    bt->nodes_len = at * bt->node_size;
    return H5L_OK;
}

int h5l_bt_init(h5l_bt_t *bt, uint32_t ndims, const uint64_t *nblk, const uint64_t *block, size_t esize,
                uint32_t two_k, const uint64_t *blks, uint64_t n)
{
    memset(bt, 0, sizeof *bt);
    if (!n || !ndims || ndims > H5L_MAX_DIMS || two_k < 2 || two_k > 0xffff) return H5L_EINVAL;
    if (!(bt->nblk = malloc((2 * (size_t)ndims + 1) * sizeof *bt->nblk))) return H5L_ENOMEM;
    bt->dim = bt->nblk + ndims;
    bt->ndims = ndims;
    bt->chunk_bytes = esize;
    for (uint32_t d = 0; d < ndims; d++) {
        bt->nblk[d] = nblk[d];
        bt->dim[d] = block[d];
        bt->chunk_bytes *= block[d];
    }
    bt->dim[ndims] = esize;
    bt->n = n;
    bt->two_k = two_k;
    size_t nruns = 1;
    for (uint64_t i = 1; i < n; i++) {
        if (blks[i] <= blks[i - 1]) {
            h5l_bt_free(bt);
            return H5L_EINVAL;
        }
        nruns += blks[i] != blks[i - 1] + 1;
    }
    bt->runs = malloc(nruns * sizeof *bt->runs);
    if (!bt->runs) {
        h5l_bt_free(bt);
        return H5L_ENOMEM;
    }
    bt->cap_runs = nruns;
    bt->sep |= BT_SEP_RUNS;
    bt->runs[0] = (h5l_bt_run_t){0, blks[0]};
    bt->nruns = 1;
    for (uint64_t i = 1; i < n; i++)
        if (blks[i] != blks[i - 1] + 1) bt->runs[bt->nruns++] = (h5l_bt_run_t){i, blks[i]};
    bt->key_size = 4 + 4 + 8 * ((uint64_t)ndims + 1);
    bt->node_size = 8 + 2 * 8 + (uint64_t)two_k * 8 + ((uint64_t)two_k + 1) * bt->key_size;
    int rc = layout(bt);
    if (rc) h5l_bt_free(bt);
    return rc;
}

int h5l_bt_place(h5l_bt_t *bt, uint64_t root, uint64_t nodes, uint64_t chunk0, uint64_t chunks)
{
    h5l_bt_place_t *pl = malloc(2 * sizeof *pl);
    if (!pl) return H5L_ENOMEM; /* bt as it was */
    bt->root = root;
    bt->nodes = nodes;
    bt->nodes_cap = bt->nodes_len;
    if (bt->sep & BT_SEP_PL) free(bt->pl);
    bt->pl = pl;
    bt->cap_pl = 2;
    bt->sep |= BT_SEP_PL;
    bt->pl[0] = (h5l_bt_place_t){0, chunk0};
    bt->pl[1] = (h5l_bt_place_t){1, chunks};
    bt->npl = bt->n > 1 ? 2 : 1;
    bt->room = h5l_bt_chunks_end(bt);
    return H5L_OK;
}

uint64_t h5l_bt_chunks_end(const h5l_bt_t *bt)
{
    const h5l_bt_place_t *p = &bt->pl[bt->npl - 1];
    return p->addr + (bt->n - p->ord) * bt->chunk_bytes;
}

/* Room for want entries of size bytes in *a (cap of them, used in use):
 * kept when there is; else doubled into an allocation of its own (the old
 * one freed if it was its own: bit of *sep). 0 or H5L_ENOMEM (*a
 * unchanged). */
static int bt_room(void **a, size_t *cap, size_t used, size_t want, size_t size, uint32_t *sep, uint32_t bit)
{
    if (want <= *cap) return H5L_OK;
    size_t n = 2 * want;
    void *p = (*sep & bit) ? realloc(*a, n * size) : malloc(n * size);
    if (!p) return H5L_ENOMEM;
    if (!(*sep & bit)) memcpy(p, *a, used * size);
    *a = p;
    *cap = n;
    *sep |= bit;
    return H5L_OK;
}

int h5l_bt_append(h5l_bt_t *bt, const uint64_t *blks, uint64_t k, uint64_t addr)
{
    if (!k) return H5L_OK;
    uint64_t last = h5l_bt_blk(bt, bt->n - 1);
    size_t nruns = 0;
    for (uint64_t i = 0; i < k; i++) {
        if (blks[i] <= (i ? blks[i - 1] : last)) return H5L_EINVAL;
        nruns += blks[i] != (i ? blks[i - 1] : last) + 1;
    }
    int newpl = addr != h5l_bt_chunks_end(bt);
    if (bt_room((void **)&bt->runs, &bt->cap_runs, bt->nruns, bt->nruns + nruns + 1, sizeof *bt->runs, &bt->sep,
                BT_SEP_RUNS) ||
        bt_room((void **)&bt->pl, &bt->cap_pl, bt->npl, bt->npl + 1, sizeof *bt->pl, &bt->sep, BT_SEP_PL))
        return H5L_ENOMEM;
    uint64_t n0 = bt->n;
    size_t nruns0 = bt->nruns, npl0 = bt->npl;
    for (uint64_t i = 0; i < k; i++)
        if (blks[i] != (i ? blks[i - 1] : last) + 1) bt->runs[bt->nruns++] = (h5l_bt_run_t){n0 + i, blks[i]};
    if (newpl) bt->pl[bt->npl++] = (h5l_bt_place_t){n0, addr};
    bt->n = n0 + k;
    int rc = layout(bt); /* too deep: more than (2K)^(H5L_BT_MAX_LEVELS - 1) chunks */
    if (rc) { /* bt as it was (its arrays only grew) */
        bt->n = n0;
        bt->nruns = nruns0;
        bt->npl = npl0;
    }
    return rc;
}

void h5l_bt_set_nodes(h5l_bt_t *bt, uint64_t nodes, uint64_t cap)
{
    bt->nodes = nodes;
    bt->nodes_cap = cap;
}

int h5l_bt_copy(h5l_bt_t *dst, const h5l_bt_t *src)
{
    *dst = *src;
    /* one allocation of 8-byte words: nblk and dim, count and first with a
     * level to spare, the runs and placements with a few to spare (a
     * patch appends a run or a placement now and then) */
    size_t nd = 2 * (size_t)src->ndims + 1, lv = (size_t)src->root_level + 2;
    size_t cr = src->nruns + 4, cp = src->npl + 4;
    uint64_t *w = malloc((nd + 2 * lv + 2 * cr + 2 * cp) * sizeof *w);
    dst->sep = 0;
    dst->nblk = w;
    dst->runs = NULL;
    dst->pl = NULL;
    dst->count = dst->first = NULL;
    if (!w) {
        h5l_bt_free(dst);
        return H5L_ENOMEM;
    }
    memcpy(w, src->nblk, nd * sizeof *w);
    dst->dim = w + src->ndims;
    dst->count = w + nd;
    dst->first = dst->count + lv;
    dst->cap_lv = (uint32_t)lv;
    if (src->count) {
        memcpy(dst->count, src->count, (src->root_level + 1) * sizeof *w);
        memcpy(dst->first, src->first, (src->root_level + 1) * sizeof *w);
    }
    dst->runs = (h5l_bt_run_t *)(w + nd + 2 * lv);
    dst->cap_runs = cr;
    dst->pl = (h5l_bt_place_t *)(w + nd + 2 * lv + 2 * cr);
    dst->cap_pl = cp;
    memcpy(dst->runs, src->runs, src->nruns * sizeof *dst->runs);
    memcpy(dst->pl, src->pl, src->npl * sizeof *dst->pl);
    return H5L_OK;
}

/* Index of the last of n entries (stride bytes each, each starting with
 * its first ordinal, increasing) that starts at or before ord: runs and
 * placements alike. */
static size_t starting_at(const void *a, size_t n, size_t stride, uint64_t ord)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (*(const uint64_t *)((const char *)a + mid * stride) <= ord)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

uint64_t h5l_bt_blk(const h5l_bt_t *bt, uint64_t ord)
{
    const h5l_bt_run_t *r = &bt->runs[starting_at(bt->runs, bt->nruns, sizeof *bt->runs, ord)];
    return r->blk + (ord - r->ord);
}

void h5l_bt_set_addrs(h5l_bt_t *bt, const uint64_t *addr) { bt->addr = addr; }

uint64_t h5l_bt_chunk_addr(const h5l_bt_t *bt, uint64_t ord)
{
    if (bt->addr) return bt->addr[ord];
    const h5l_bt_place_t *p = &bt->pl[starting_at(bt->pl, bt->npl, sizeof *bt->pl, ord)];
    return p->addr + (ord - p->ord) * bt->chunk_bytes;
}

/* Address of node j of level l (the root at the top). */
static uint64_t node_addr(const h5l_bt_t *bt, uint32_t l, uint64_t j)
{
    return l == bt->root_level ? bt->root : bt->nodes + (bt->first[l] + j) * bt->node_size;
}

/* The key of chunk ordinal ord; ord == n gives the right key of the tree:
 * the last chunk plus one in every dimension, element dimension included,
 * size and filter mask 0. Offsets are in elements (scaled * chunk dim). */
static void put_key(const h5l_bt_t *bt, uint64_t ord, uint8_t *p)
{
    int right = ord >= bt->n;
    uint64_t blk = h5l_bt_blk(bt, right ? bt->n - 1 : ord), c[H5L_MAX_DIMS];
    for (int d = (int)bt->ndims - 1; d >= 0; d--) {
        c[d] = blk % bt->nblk[d];
        blk /= bt->nblk[d];
    }
    put32(p, right ? 0 : (uint32_t)bt->chunk_bytes);
    put32(p + 4, 0);
    for (uint32_t d = 0; d < bt->ndims; d++) put64(p + 8 + 8 * d, (c[d] + right) * bt->dim[d]);
    put64(p + 8 + 8 * bt->ndims, (uint64_t)right * bt->dim[bt->ndims]);
}

void h5l_bt_node(const h5l_bt_t *bt, uint32_t level, uint64_t j, uint8_t *buf)
{
    uint64_t span = 1; /* chunks under one child of a node of this level */
    for (uint32_t l = 0; l < level; l++) span *= bt->two_k;
    uint64_t below = level ? bt->count[level - 1] : bt->n; /* children of the whole level */
    uint64_t c0 = j * bt->two_k, nch = below - c0 < bt->two_k ? below - c0 : bt->two_k;
    memset(buf, 0, bt->node_size);
    memcpy(buf, "TREE", 4);
    buf[4] = 1; /* raw data chunks */
    buf[5] = (uint8_t)level;
    buf[6] = (uint8_t)nch;
    buf[7] = (uint8_t)(nch >> 8);
    put64(buf + 8, j ? node_addr(bt, level, j - 1) : UINT64_MAX);
    put64(buf + 16, j + 1 < bt->count[level] ? node_addr(bt, level, j + 1) : UINT64_MAX);
    uint8_t *p = buf + 24;
    for (uint64_t i = 0; i < nch; i++) {
        uint64_t ord = (c0 + i) * span;
        put_key(bt, ord, p);
        p += bt->key_size;
        put64(p, level ? node_addr(bt, level - 1, c0 + i) : h5l_bt_chunk_addr(bt, ord));
        p += 8;
    }
    uint64_t end = (c0 + nch) * span;
    put_key(bt, end < bt->n ? end : bt->n, p);
}

/* Copy the part of node (l, j) at address a that meets [off, off + len). */
static void overlay(const h5l_bt_t *bt, uint32_t l, uint64_t j, uint64_t a, uint8_t *node, uint64_t off, size_t len,
                    uint8_t *buf)
{
    uint64_t lo = a > off ? a : off, hi = a + bt->node_size < off + len ? a + bt->node_size : off + len;
    if (lo >= hi) return;
    h5l_bt_node(bt, l, j, node);
    memcpy(buf + (lo - off), node + (lo - a), hi - lo);
}

int h5l_bt_read(const h5l_bt_t *bt, uint64_t off, size_t len, uint8_t *buf)
{
    int meets_root = bt->root < off + len && off < bt->root + bt->node_size;
    int meets_nodes = bt->nodes_len && bt->nodes < off + len && off < bt->nodes + bt->nodes_len;
    if (bt->lay_at) { /* an own root: the layout points at it, its chunk's checksum follows */
        uint8_t f[12];
        put64(f, bt->root);
        put32(f + 8, bt->ck);
        uint64_t at[2] = {bt->lay_at, bt->ck_at}, sz[2] = {8, 4};
        for (int i = 0; i < 2; i++) {
            uint64_t lo = at[i] > off ? at[i] : off, hi = at[i] + sz[i] < off + len ? at[i] + sz[i] : off + len;
            if (lo < hi) memcpy(buf + (lo - off), f + (i ? 8 : 0) + (lo - at[i]), hi - lo);
        }
    }
    if (!meets_root && !meets_nodes) return H5L_OK;
    uint8_t *node = malloc(bt->node_size);
    if (!node) return H5L_ENOMEM;
    if (meets_root) overlay(bt, bt->root_level, 0, bt->root, node, off, len, buf);
    if (meets_nodes) {
        uint64_t lo = off > bt->nodes ? off - bt->nodes : 0, hi = off + len - bt->nodes;
        if (hi > bt->nodes_len) hi = bt->nodes_len;
        for (uint64_t k = lo / bt->node_size; k * bt->node_size < hi; k++) {
            uint32_t l = 0;
            while (l + 1 < bt->root_level && k >= bt->first[l + 1]) l++;
            overlay(bt, l, k - bt->first[l], bt->nodes + k * bt->node_size, node, off, len, buf);
        }
    }
    free(node);
    return H5L_OK;
}

/* lookup3's mix and final steps (public domain, Bob Jenkins 2006). */
static uint32_t rot(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t h5l_bt_lookup3(const uint8_t *p, size_t n)
{
    uint32_t w[3];
    w[0] = w[1] = w[2] = 0xdeadbeefu + (uint32_t)n;
    uint32_t a, b, c;
    while (n > 12) { /* (a word at a time: a byte at a time was 5 % of a 20,000-variable build) */
        a = w[0] + le32(p), b = w[1] + le32(p + 4), c = w[2] + le32(p + 8);
        a -= c, a ^= rot(c, 4), c += b;
        b -= a, b ^= rot(a, 6), a += c;
        c -= b, c ^= rot(b, 8), b += a;
        a -= c, a ^= rot(c, 16), c += b;
        b -= a, b ^= rot(a, 19), a += c;
        c -= b, c ^= rot(b, 4), b += a;
        w[0] = a, w[1] = b, w[2] = c;
        n -= 12;
        p += 12;
    }
    if (n == 0) return w[2];
    for (size_t i = 0; i < n; i++) w[i / 4] += (uint32_t)p[i] << (8 * (i % 4));
    a = w[0], b = w[1], c = w[2];
    c ^= b, c -= rot(b, 14);
    a ^= c, a -= rot(c, 11);
    b ^= a, b -= rot(a, 25);
    c ^= b, c -= rot(b, 16);
    a ^= c, a -= rot(c, 4);
    b ^= a, b -= rot(a, 14);
    c ^= b, c -= rot(b, 24);
    return c;
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Largest object header chunk read, and chunks walked at most: far above
 * what libhdf5 makes for a dataset, and a bound on a walk over bad bytes. */
#define OH_CHUNK_MAX ((uint64_t)1 << 20)
#define OH_CHUNKS_MAX 64

int h5l_bt_point_layout(h5l_bt_t *bt, h5l_bt_read_fn read, const void *ctx)
{
    uint8_t pre[6 + 16 + 4 + 8]; /* the longest prefix: times, phase change values, an 8-byte size */
    read(ctx, bt->oh, sizeof pre, pre);
    if (memcmp(pre, "OHDR", 4) || pre[4] != 2) return H5L_ECORRUPT;
    uint8_t flags = pre[5];
    size_t at = 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    int szb = 1 << (flags & 3);
    uint64_t size0 = get_le(pre + at, szb);
    size_t mhdr = (flags & 0x04) ? 6 : 4; /* type, size, flags, creation order if tracked */
    /* chunks to walk: (address, length without the checksum, where its messages start) */
    uint64_t ch[OH_CHUNKS_MAX][3] = {{bt->oh, at + (uint64_t)szb + size0, at + (uint64_t)szb}};
    size_t nch = 1;
    for (size_t c = 0; c < nch; c++) {
        uint64_t addr = ch[c][0], len = ch[c][1];
        if (len > OH_CHUNK_MAX || len < ch[c][2]) return H5L_ECORRUPT;
        uint8_t stack[1024]; /* a dataset's header fits: no malloc per tree at every patch */
        uint8_t *img = len + 4 <= sizeof stack ? stack : malloc((size_t)len + 4);
        if (!img) return H5L_ENOMEM;
        read(ctx, addr, (size_t)len + 4, img);
        int rc = H5L_OK, found = 0;
        if ((c && memcmp(img, "OCHK", 4)) || h5l_bt_lookup3(img, (size_t)len) != (uint32_t)get_le(img + len, 4))
            rc = H5L_ECORRUPT;
        for (uint64_t p = ch[c][2]; !rc && !found && p + mhdr <= len;) {
            uint8_t type = img[p];
            uint64_t msz = get_le(img + p + 1, 2), d = p + mhdr;
            if (d + msz > len) {
                rc = H5L_ECORRUPT;
                break;
            }
            const uint8_t *m = img + d;
            if (type == 0x10) { /* continuation: address, length (signature to checksum) */
                if (msz < 16 || nch == OH_CHUNKS_MAX || get_le(m + 8, 8) < 8) {
                    rc = H5L_ECORRUPT;
                    break;
                }
                ch[nch][0] = get_le(m, 8);
                ch[nch][1] = get_le(m + 8, 8) - 4;
                ch[nch][2] = 4;
                nch++;
            } else if (type == 0x08) { /* layout */
                uint32_t nd = bt->ndims + 1;
                if (msz < 11 + 4 * (uint64_t)nd || m[0] != 3 || m[1] != 2 || m[2] != nd) {
                    rc = H5L_ECORRUPT;
                    break;
                }
                for (int i = 0; i < 8; i++)
                    if (m[3 + i] != 0xff) rc = H5L_ECORRUPT; /* libhdf5 made an index after all */
                for (uint32_t i = 0; i < nd; i++)
                    if (get_le(m + 11 + 4 * i, 4) != bt->dim[i]) rc = H5L_ECORRUPT;
                if (rc) break;
                put64(img + d + 3, bt->root);
                bt->lay_at = addr + d + 3;
                bt->ck_at = addr + len;
                bt->ck = h5l_bt_lookup3(img, (size_t)len);
                found = 1;
            }
            p = d + msz;
        }
        if (img != stack) free(img);
        if (rc) return rc;
        if (found) return H5L_OK;
    }
    return H5L_ECORRUPT; /* no layout message */
}

void h5l_bt_free(h5l_bt_t *bt)
{
    if (!bt) return;
    if (bt->sep & BT_SEP_RUNS) free(bt->runs);
    if (bt->sep & BT_SEP_PL) free(bt->pl);
    if (bt->sep & BT_SEP_COUNT) free(bt->count);
    free(bt->nblk);
    bt->runs = NULL;
    bt->pl = NULL;
    bt->nblk = bt->dim = NULL;
    bt->count = bt->first = NULL;
    bt->nruns = bt->npl = 0;
    bt->cap_runs = bt->cap_pl = 0;
    bt->cap_lv = bt->sep = 0;
}
