/* memvfd.c — in-memory capture driver for canonical HDF5 skeletons.
 * Contracts are in memvfd.h; this file explains how 1.10.8 is driven.
 *
 * Allocation tracking: the `alloc` callback, helped by `free` and `set_eoa`.
 *   In 1.10.8 H5FD__alloc_real calls cls->alloc(file, type, dxpl, size) for
 *   every allocation that reaches the driver, with the real H5FD_mem_t type
 *   and the requested size (plus alignment padding, which we recompute from
 *   H5FD_t.alignment/threshold: the library adds the same padding to the
 *   address we return). That gives one clean event per allocation. Tracking
 *   through set_eoa alone would not: H5FD__extend (used when there is no
 *   alloc callback) cannot be told apart from H5FD_try_extend (in-place
 *   growth of the block at EOA, e.g. an object header chunk) or from the
 *   library's own H5F__set_eoa calls. So:
 *     alloc   — hands out the current EOA and records {addr, size, type};
 *     set_eoa — only growth without alloc (try_extend: the record ending at
 *               the old EOA grows) and shrinking (records past the new EOA
 *               were freed, and are removed);
 *     free    — called by H5FD_free instead of its default "shrink the EOA
 *               if the block ends there": we do that shrink ourselves and
 *               mark blocks freed elsewhere. In practice 1.10.8 hardly
 *               ever calls it: with the default file-space strategy H5MF
 *               keeps freed blocks in its own in-memory free-space
 *               managers and hands them out again WITHOUT calling alloc
 *               (observed: delete a dataset, create another of the same
 *               size: it lands on the old address and the driver sees no
 *               allocation). Skeletons never delete; see memvfd.h.
 *   Every allocation is handed out at the EOA, and shrinking removes the
 *   records beyond the new EOA, so the record array stays sorted by address
 *   in allocation order (binary searches work on it).
 *   To make every allocation reach the driver the query callback reports no
 *   H5FD_FEAT_AGGREGATE_METADATA / _SMALLDATA (with them, H5MF carves small
 *   blocks out of 2 KiB aggregator blocks the driver never hears about) and
 *   no metadata accumulator (whose merged writes carry H5FD_MEM_DEFAULT).
 *   fl_map is H5FD_FLMAP_DEFAULT: one free-space list per memory type, so
 *   freed metadata is never handed to a raw-data request behind our back.
 *
 * Raw data: writes of type H5FD_MEM_DRAW to dataset regions are dropped
 *   (counted). But 1.10.8 also allocates and writes some of its own
 *   structures as H5FD_MEM_DRAW, and those bytes must be kept:
 *   - global heap collections (variable-length attribute data, the
 *     DIMENSION_LIST of dimension scales): H5MF__aggr_vfd_alloc allocates
 *     GHEAP as DRAW and H5F_block_write maps GHEAP writes to DRAW. A DRAW
 *     write that begins a DRAW allocation with a "GCOL" version-1 header
 *     whose collection size equals the write size is recognised as one;
 *     its record is reclassified and its bytes kept (both modes).
 *   - fractal heap "huge" objects (H5FD_MEM_FHEAP_HUGE_OBJ is DRAW), e.g.
 *     any attribute over about 4 KiB in dense attribute storage (latest
 *     format, more than 8 attributes on an object). Nothing in the bytes
 *     tells them from dataset data, so they are only kept in windowed mode
 *     (hfs_memvfd_use_windows): there dataset regions are exactly the DRAW
 *     allocations made inside hfs_memvfd_raw_begin/end, and DRAW
 *     allocations outside windows are libhdf5's own (flag META, kept).
 *
 * Storage: a sorted array of disjoint written pieces. A write inside one
 *   piece is a memcpy; a write overlapping several merges them (the gaps
 *   between them lie inside the write, so the merged piece holds written
 *   bytes only); a write touching none is inserted. Adjacent pieces are not
 *   merged while the file is open (that would make descending writes
 *   quadratic); they are coalesced once, when the image is built at close.
 */
#include "memvfd.h"
#include "h5log/grow.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MEMVFD_NAME "hfs_memvfd"
#define MEMVFD_MAXADDR ((haddr_t)INT64_MAX)

typedef struct piece {
    uint64_t addr, len;
    unsigned char *buf;
} piece_t;

struct hfs_memvfd {
    unsigned refs; /* the open file holds one, each hfs_memvfd_get one */
    int state;     /* ST_OPEN, ST_CLOSED (image ready or dropped), ST_TAKEN */
    bool trace;
    bool failed;    /* an allocation failed while capturing */
    bool windowed;  /* hfs_memvfd_use_windows: regions only inside windows */
    bool raw_begun; /* a dataset region was allocated (cb_alloc: raw_gap) */
    uint64_t raw_gap; /* hfs_memvfd_raw_gap */
    unsigned depth; /* open raw windows */
    uint64_t eoa, eof;
    piece_t *pc;
    size_t npc, cappc;
    uint64_t meta_bytes;
    hfs_memvfd_alloc_t *al; /* every record, address == allocation order */
    size_t nal, capal;
    size_t *raw; /* indices into al of the DRAW records */
    size_t nraw, capraw;
    uint64_t dropped_writes, dropped_bytes, raw_freed;
    hfs_memvfd_image_t *img;
};

enum { ST_OPEN, ST_CLOSED, ST_TAKEN };

typedef struct memfile {
    H5FD_t pub; /* must be first: libhdf5 owns and fills these fields */
    hfs_memvfd_t *s;
} memfile_t;

static hid_t g_driver = H5I_INVALID_HID;

/* ------------------------------------------------------------------ */
/* sparse piece store                                                   */

/* First piece whose end is past lo (pieces are sorted and disjoint, so
 * their ends increase too). */
static size_t pc_first_after(const piece_t *pc, size_t n, uint64_t lo)
{
    size_t a = 0, b = n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (pc[m].addr + pc[m].len > lo)
            b = m;
        else
            a = m + 1;
    }
    return a;
}

static void pc_read(const piece_t *pc, size_t n, uint64_t lo, size_t len, unsigned char *out)
{
    uint64_t hi = lo + len;
    memset(out, 0, len);
    for (size_t i = pc_first_after(pc, n, lo); i < n && pc[i].addr < hi; i++) {
        uint64_t a = pc[i].addr > lo ? pc[i].addr : lo;
        uint64_t e = pc[i].addr + pc[i].len;
        uint64_t b = e < hi ? e : hi;
        memcpy(out + (a - lo), pc[i].buf + (a - pc[i].addr), (size_t)(b - a));
    }
}

static int pc_write(hfs_memvfd_t *s, uint64_t lo, size_t len, const void *data)
{
    uint64_t hi = lo + len;
    size_t i = pc_first_after(s->pc, s->npc, lo);
    if (i < s->npc && s->pc[i].addr <= lo && s->pc[i].addr + s->pc[i].len >= hi) {
        memcpy(s->pc[i].buf + (lo - s->pc[i].addr), data, len);
        return 0;
    }
    size_t j = i;
    while (j < s->npc && s->pc[j].addr < hi) j++;
    /* pieces [i, j) overlap [lo, hi) */
    uint64_t nlo = lo, nhi = hi;
    if (j > i) {
        if (s->pc[i].addr < nlo) nlo = s->pc[i].addr;
        if (s->pc[j - 1].addr + s->pc[j - 1].len > nhi) nhi = s->pc[j - 1].addr + s->pc[j - 1].len;
    }
    unsigned char *buf = malloc((size_t)(nhi - nlo));
    if (!buf) return -1;
    uint64_t old = 0;
    for (size_t k = i; k < j; k++) {
        memcpy(buf + (s->pc[k].addr - nlo), s->pc[k].buf, (size_t)s->pc[k].len);
        old += s->pc[k].len;
        free(s->pc[k].buf);
    }
    memcpy(buf + (lo - nlo), data, len);
    if (j == i) {
        if (h5l_grow((void **)&s->pc, &s->cappc, s->npc + 1, sizeof *s->pc)) {
            free(buf);
            return -1;
        }
        memmove(s->pc + i + 1, s->pc + i, (s->npc - i) * sizeof *s->pc);
        s->npc++;
    } else if (j > i + 1) {
        memmove(s->pc + i + 1, s->pc + j, (s->npc - j) * sizeof *s->pc);
        s->npc -= j - i - 1;
    }
    s->pc[i] = (piece_t){nlo, nhi - nlo, buf};
    s->meta_bytes += (nhi - nlo) - old;
    return 0;
}

/* ------------------------------------------------------------------ */
/* allocation records                                                   */

/* Index of the record starting exactly at addr, or SIZE_MAX. */
static size_t al_find(const hfs_memvfd_t *s, uint64_t addr)
{
    size_t a = 0, b = s->nal;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (s->al[m].addr < addr)
            a = m + 1;
        else
            b = m;
    }
    return (a < s->nal && s->al[a].addr == addr) ? a : SIZE_MAX;
}

/* The EOA moved down to eoa: records at or past it were freed. */
static void al_shrink(hfs_memvfd_t *s, uint64_t eoa)
{
    while (s->nal > 0 && s->al[s->nal - 1].addr >= eoa) {
        size_t k = s->nal - 1;
        if (s->nraw > 0 && s->raw[s->nraw - 1] == k) {
            s->nraw--;
            s->raw_freed++;
        }
        s->nal--;
    }
    if (s->nal > 0) {
        hfs_memvfd_alloc_t *r = &s->al[s->nal - 1];
        if (r->addr + r->size > eoa) r->size = eoa - r->addr;
    }
}

/* ------------------------------------------------------------------ */
/* session lifetime                                                     */

static void session_free_capture(hfs_memvfd_t *s)
{
    for (size_t i = 0; i < s->npc; i++) free(s->pc[i].buf);
    free(s->pc);
    free(s->al);
    free(s->raw);
    s->pc = NULL;
    s->al = NULL;
    s->raw = NULL;
    s->npc = s->cappc = s->nal = s->capal = s->nraw = s->capraw = 0;
}

static void session_unref(hfs_memvfd_t *s)
{
    if (--s->refs > 0) return;
    session_free_capture(s);
    hfs_memvfd_image_free(s->img);
    free(s);
}

/* The capture as an image (coalescing the pieces): moved out of the
 * session at close (move = 1), copied from a file still open otherwise;
 * with its allocation records only if records (a snapshot's would be
 * copied per tick and dropped: hfs_memvfd_snapshot). */
static hfs_memvfd_image_t *build_image(hfs_memvfd_t *s, int move, int records)
{
    hfs_memvfd_image_t *img = calloc(1, sizeof *img);
    if (!img) return NULL;
    size_t nrun = 0;
    for (size_t i = 0; i < s->npc; i++)
        if (i == 0 || s->pc[i - 1].addr + s->pc[i - 1].len != s->pc[i].addr) nrun++;
    img->extents = calloc(nrun ? nrun : 1, sizeof *img->extents);
    if (records) {
        img->allocs = malloc((s->nal ? s->nal : 1) * sizeof *img->allocs);
        img->raw = malloc((s->nraw ? s->nraw : 1) * sizeof *img->raw);
    }
    if (!img->extents || (records && (!img->allocs || !img->raw))) goto fail;
    for (size_t i = 0; i < s->npc;) {
        size_t j = i + 1;
        uint64_t len = s->pc[i].len;
        while (j < s->npc && s->pc[j - 1].addr + s->pc[j - 1].len == s->pc[j].addr) len += s->pc[j++].len;
        hfs_memvfd_extent_t *e = &img->extents[img->n_extents];
        e->addr = s->pc[i].addr;
        e->len = len;
        if (move && j == i + 1) {
            e->bytes = s->pc[i].buf;
            s->pc[i].buf = NULL;
        } else {
            e->bytes = malloc((size_t)len);
            if (!e->bytes) goto fail;
            for (size_t k = i; k < j; k++) {
                memcpy(e->bytes + (s->pc[k].addr - e->addr), s->pc[k].buf, (size_t)s->pc[k].len);
                if (move) {
                    free(s->pc[k].buf);
                    s->pc[k].buf = NULL;
                }
            }
        }
        img->n_extents++;
        img->meta_bytes += len;
        i = j;
    }
    for (size_t i = 0; i < s->nraw; i++) {
        const hfs_memvfd_alloc_t *a = &s->al[s->raw[i]];
        if (!(a->flags & (HFS_MEMVFD_ALLOC_GHEAP | HFS_MEMVFD_ALLOC_META))) img->raw_bytes += a->size;
    }
    if (records) {
        memcpy(img->allocs, s->al, s->nal * sizeof *s->al);
        img->n_allocs = s->nal;
        for (size_t i = 0; i < s->nraw; i++) img->raw[i] = s->al[s->raw[i]];
        img->n_raw = s->nraw;
    }
    img->eoa = s->eoa;
    img->eof = s->eoa;
    if (img->n_extents) {
        const hfs_memvfd_extent_t *l = &img->extents[img->n_extents - 1];
        if (l->addr + l->len > img->eof) img->eof = l->addr + l->len;
    }
    img->dropped_writes = s->dropped_writes;
    img->dropped_bytes = s->dropped_bytes;
    img->raw_freed = s->raw_freed;
    return img;
fail:
    hfs_memvfd_image_free(img);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* driver callbacks                                                     */

static H5FD_t *cb_open(const char *name, unsigned flags, hid_t fapl, haddr_t maxaddr)
{
    (void)fapl;
    (void)maxaddr;
    /* Memory only: nothing exists to be opened, so only creation works
     * (H5Fcreate calls this once, with RDWR|CREAT|TRUNC or |EXCL; H5Fopen
     * fails here). */
    if (!(flags & H5F_ACC_CREAT) || !(flags & H5F_ACC_RDWR)) return NULL;
    memfile_t *f = calloc(1, sizeof *f);
    hfs_memvfd_t *s = calloc(1, sizeof *s);
    if (!f || !s) {
        free(f);
        free(s);
        return NULL;
    }
    const char *t = getenv("HFS_MEMVFD_TRACE");
    s->trace = t && *t && *t != '0';
    s->refs = 1;
    s->state = ST_OPEN;
    f->s = s;
    if (s->trace) fprintf(stderr, "memvfd %p open %s flags %#x\n", (void *)s, name ? name : "", flags);
    return (H5FD_t *)f; /* pub is the first member */
}

static herr_t cb_close(H5FD_t *file)
{
    memfile_t *f = (memfile_t *)file;
    hfs_memvfd_t *s = f->s;
    if (s->trace)
        fprintf(stderr, "memvfd %p close eoa %llu eof %llu pieces %zu meta %llu allocs %zu raw %zu dropped %llu\n",
                (void *)s, (unsigned long long)s->eoa, (unsigned long long)s->eof, s->npc,
                (unsigned long long)s->meta_bytes, s->nal, s->nraw, (unsigned long long)s->dropped_bytes);
    s->state = ST_CLOSED;
    /* the capture incomplete, or no memory for its image: no image
     * (hfs_memvfd_take gives NULL), but the close succeeds (cb_write) */
    if (!s->failed && s->refs > 1) { /* someone holds the session */
        s->img = build_image(s, 1, 1);
        if (!s->img) s->failed = true;
    }
    session_free_capture(s);
    free(f);
    session_unref(s);
    return 0;
}

static herr_t cb_query(const H5FD_t *file, unsigned long *flags)
{
    (void)file;
    /* Deliberately none: see the top comment. */
    *flags = 0;
    return 0;
}

static haddr_t cb_alloc(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, hsize_t size)
{
    (void)dxpl;
    memfile_t *f = (memfile_t *)file;
    hfs_memvfd_t *s = f->s;
    uint64_t eoa = s->eoa;
    /* the first dataset region starts raw_gap past what lies before it
     * (hfs_memvfd_raw_gap) */
    if (type == H5FD_MEM_DRAW && s->windowed && s->depth > 0 && !s->raw_begun) {
        s->raw_begun = true;
        if (s->raw_gap && eoa <= MEMVFD_MAXADDR - s->raw_gap - 4096)
            eoa = (eoa + s->raw_gap + 4095) & ~(uint64_t)4095;
    }
    /* Mirror H5FD__alloc_real: size includes `extra` alignment padding,
     * and the library returns eoa + extra to its caller. (The padding
     * [eoa, eoa + extra) goes to H5MF as a free fragment.) */
    uint64_t extra = 0;
    if (!file->paged_aggr && file->alignment > 1 && eoa % file->alignment) {
        uint64_t e = file->alignment - eoa % file->alignment;
        if (size > e && size - e >= file->threshold) extra = e;
    }
    if (size == 0 || size > MEMVFD_MAXADDR - eoa) return HADDR_UNDEF;
    if (h5l_grow((void **)&s->al, &s->capal, s->nal + 1, sizeof *s->al) ||
        (type == H5FD_MEM_DRAW && h5l_grow((void **)&s->raw, &s->capraw, s->nraw + 1, sizeof *s->raw))) {
        s->failed = true;
        return HADDR_UNDEF;
    }
    unsigned fl = 0;
    if (type == H5FD_MEM_DRAW && s->windowed && s->depth == 0)
        fl = HFS_MEMVFD_ALLOC_META; /* libhdf5's own raw-typed object */
    s->al[s->nal] = (hfs_memvfd_alloc_t){eoa + extra, size - extra, (int)type, fl};
    if (type == H5FD_MEM_DRAW) s->raw[s->nraw++] = s->nal;
    s->nal++;
    s->eoa = eoa + size;
    if (s->trace)
        fprintf(stderr, "memvfd %p alloc type %d addr %llu size %llu (extra %llu)\n", (void *)s, (int)type,
                (unsigned long long)(eoa + extra), (unsigned long long)(size - extra), (unsigned long long)extra);
    return eoa;
}

static herr_t cb_free(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, hsize_t size)
{
    (void)dxpl;
    memfile_t *f = (memfile_t *)file;
    hfs_memvfd_t *s = f->s;
    if (s->trace)
        fprintf(stderr, "memvfd %p free type %d addr %llu size %llu eoa %llu\n", (void *)s, (int)type,
                (unsigned long long)addr, (unsigned long long)size, (unsigned long long)s->eoa);
    if (addr + size == s->eoa) {
        /* What H5FD_free does without a free callback. */
        s->eoa = addr;
        al_shrink(s, addr);
        return 0;
    }
    size_t k = al_find(s, addr);
    if (k != SIZE_MAX && !(s->al[k].flags & HFS_MEMVFD_ALLOC_FREED)) {
        s->al[k].flags |= HFS_MEMVFD_ALLOC_FREED;
        if (s->al[k].type == H5FD_MEM_DRAW) s->raw_freed++;
    }
    return 0;
}

static haddr_t cb_get_eoa(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const memfile_t *)file)->s->eoa;
}

static herr_t cb_set_eoa(H5FD_t *file, H5FD_mem_t type, haddr_t addr)
{
    memfile_t *f = (memfile_t *)file;
    hfs_memvfd_t *s = f->s;
    if (addr > MEMVFD_MAXADDR) return -1;
    if (s->trace)
        fprintf(stderr, "memvfd %p set_eoa type %d %llu -> %llu\n", (void *)s, (int)type, (unsigned long long)s->eoa,
                (unsigned long long)addr);
    if (addr > s->eoa && s->nal > 0) {
        /* H5FD_try_extend: the block ending at the EOA grows in place. */
        hfs_memvfd_alloc_t *r = &s->al[s->nal - 1];
        if (r->addr + r->size == s->eoa && !(r->flags & (HFS_MEMVFD_ALLOC_FREED | HFS_MEMVFD_ALLOC_RESERVED))) {
            r->size += addr - s->eoa;
            r->flags |= HFS_MEMVFD_ALLOC_EXTENDED;
        }
    } else if (addr < s->eoa) {
        al_shrink(s, addr);
    }
    s->eoa = addr;
    return 0;
}

static haddr_t cb_get_eof(const H5FD_t *file, H5FD_mem_t type)
{
    (void)type;
    return ((const memfile_t *)file)->s->eof;
}

static herr_t cb_get_handle(H5FD_t *file, hid_t fapl, void **handle)
{
    (void)fapl;
    if (!handle) return -1;
    *handle = file;
    return 0;
}

static herr_t cb_read(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, void *buf)
{
    (void)type;
    (void)dxpl;
    hfs_memvfd_t *s = ((memfile_t *)file)->s;
    if (addr == HADDR_UNDEF || addr > MEMVFD_MAXADDR || size > MEMVFD_MAXADDR - addr) return -1;
    pc_read(s->pc, s->npc, addr, size, buf);
    return 0;
}

/* Should this DRAW write be kept? Yes if it lies in a record that holds
 * libhdf5's own bytes: type GHEAP (as allocated, or as recognised before),
 * or flagged META (windowed mode, allocated outside windows). A dataset
 * region that this write begins with a "GCOL" version 1 header whose
 * collection size (8- or 4-byte length) equals the write size is a global
 * heap collection: it is reclassified and kept. Everything else is raw. */
static bool keep_draw_write(hfs_memvfd_t *s, haddr_t addr, size_t size, const unsigned char *b)
{
    size_t a = 0, e = s->nal; /* last record starting at or before addr */
    while (a < e) {
        size_t m = a + (e - a) / 2;
        if (s->al[m].addr <= addr)
            a = m + 1;
        else
            e = m;
    }
    if (a == 0) return false;
    hfs_memvfd_alloc_t *r = &s->al[a - 1];
    if (addr + size > r->addr + r->size) return false;
    if (r->type == H5FD_MEM_GHEAP) return true;
    if (r->type == H5FD_MEM_DRAW && r->addr == addr && size >= 16 && memcmp(b, "GCOL", 4) == 0 && b[4] == 1) {
        uint64_t v8 = 0, v4 = 0;
        for (int i = 7; i >= 0; i--) v8 = (v8 << 8) | b[8 + i];
        for (int i = 3; i >= 0; i--) v4 = (v4 << 8) | b[8 + i];
        if (v8 == size || v4 == size) {
            r->flags |= HFS_MEMVFD_ALLOC_GHEAP;
            r->type = H5FD_MEM_GHEAP;
            return true;
        }
    }
    return (r->flags & HFS_MEMVFD_ALLOC_META) != 0;
}

static herr_t cb_write(H5FD_t *file, H5FD_mem_t type, hid_t dxpl, haddr_t addr, size_t size, const void *buf)
{
    (void)dxpl;
    hfs_memvfd_t *s = ((memfile_t *)file)->s;
    if (addr == HADDR_UNDEF || addr > MEMVFD_MAXADDR || size > MEMVFD_MAXADDR - addr) return -1;
    if (s->trace)
        fprintf(stderr, "memvfd %p write type %d addr %llu size %zu\n", (void *)s, (int)type, (unsigned long long)addr,
                size);
    if (addr + size > s->eof) s->eof = addr + size;
    if (size == 0) return 0;
    if (type == H5FD_MEM_DRAW && !keep_draw_write(s, addr, size, buf)) {
        s->dropped_writes++;
        s->dropped_bytes += size;
        return 0;
    }
    if (pc_write(s, addr, size, buf) < 0)
        s->failed = true; /* no image then (hfs_memvfd_take), but no error to libhdf5: a write that
                           * fails while H5Fclose flushes makes the close fail, and libhdf5 1.10
                           * keeps such a file open and crashes at exit closing it */
    return 0;
}

static herr_t cb_truncate(H5FD_t *file, hid_t dxpl, hbool_t closing)
{
    (void)dxpl;
    (void)closing;
    hfs_memvfd_t *s = ((memfile_t *)file)->s;
    if (s->trace)
        fprintf(stderr, "memvfd %p truncate eof %llu -> eoa %llu closing %d\n", (void *)s, (unsigned long long)s->eof,
                (unsigned long long)s->eoa, (int)closing);
    s->eof = s->eoa;
    return 0;
}

static herr_t cb_terminate(void)
{
    g_driver = H5I_INVALID_HID;
    return 0;
}

static const H5FD_class_t memvfd_class = {
    .name = MEMVFD_NAME,
    .maxaddr = MEMVFD_MAXADDR,
    .fc_degree = H5F_CLOSE_WEAK,
    .terminate = cb_terminate,
    .sb_size = NULL, /* no driver info block: the file reads with sec2 */
    .sb_encode = NULL,
    .sb_decode = NULL,
    .fapl_size = 0,
    .fapl_get = NULL,
    .fapl_copy = NULL,
    .fapl_free = NULL,
    .dxpl_size = 0,
    .dxpl_copy = NULL,
    .dxpl_free = NULL,
    .open = cb_open,
    .close = cb_close,
    .cmp = NULL, /* pointer comparison: every open is a distinct file */
    .query = cb_query,
    .get_type_map = NULL,
    .alloc = cb_alloc,
    .free = cb_free,
    .get_eoa = cb_get_eoa,
    .set_eoa = cb_set_eoa,
    .get_eof = cb_get_eof,
    .get_handle = cb_get_handle,
    .read = cb_read,
    .write = cb_write,
    .flush = NULL,
    .truncate = cb_truncate,
    .lock = NULL,
    .unlock = NULL,
    .fl_map = H5FD_FLMAP_DEFAULT,
};

/* ------------------------------------------------------------------ */
/* public API                                                           */

hid_t hfs_memvfd_driver_id(void)
{
    /* H5close unregisters every driver; 1.10.8's H5FD__free_cls calls our
     * terminate callback then, which forgets the id, so a stale id (whose
     * number a re-initialised library may give to another driver) is never
     * used. (H5Iobject_verify cannot check the class: it refuses H5I_VFL,
     * a library type.) */
    if (g_driver >= 0 && H5Iis_valid(g_driver) > 0 && H5Iget_type(g_driver) == H5I_VFL) return g_driver;
    g_driver = H5FDregister(&memvfd_class);
    return g_driver;
}

hid_t hfs_memvfd_fapl(void)
{
    hid_t id = hfs_memvfd_driver_id();
    if (id < 0) return H5I_INVALID_HID;
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return H5I_INVALID_HID;
    if (H5Pset_driver(fapl, id, NULL) < 0) {
        H5Pclose(fapl);
        return H5I_INVALID_HID;
    }
    return fapl;
}

hfs_memvfd_t *hfs_memvfd_get(hid_t file)
{
    hid_t fapl = H5Fget_access_plist(file);
    if (fapl < 0) return NULL;
    hid_t drv = H5Pget_driver(fapl);
    H5Pclose(fapl);
    if (drv < 0 || drv != hfs_memvfd_driver_id()) return NULL;
    void *h = NULL;
    if (H5Fget_vfd_handle(file, H5P_DEFAULT, &h) < 0 || !h) return NULL;
    hfs_memvfd_t *s = ((memfile_t *)h)->s;
    s->refs++;
    return s;
}

hfs_memvfd_t *hfs_memvfd_get_vfd(H5FD_t *fd)
{
    if (!fd || !fd->cls || fd->cls->open != cb_open) return NULL;
    hfs_memvfd_t *s = ((memfile_t *)fd)->s;
    s->refs++;
    return s;
}

void hfs_memvfd_raw_gap(hfs_memvfd_t *s, uint64_t bytes)
{
    if (s) s->raw_gap = bytes;
}

void hfs_memvfd_use_windows(hfs_memvfd_t *s)
{
    if (s) s->windowed = true;
}

size_t hfs_memvfd_raw_begin(hfs_memvfd_t *s)
{
    if (!s) return 0;
    if (s->state == ST_OPEN) s->depth++;
    return hfs_memvfd_raw_count(s);
}

size_t hfs_memvfd_raw_end(hfs_memvfd_t *s)
{
    if (!s) return 0;
    if (s->state == ST_OPEN && s->depth > 0) s->depth--;
    return hfs_memvfd_raw_count(s);
}

size_t hfs_memvfd_raw_count(const hfs_memvfd_t *s)
{
    if (!s) return 0;
    if (s->state == ST_OPEN) return s->nraw;
    return s->img ? s->img->n_raw : 0;
}

int hfs_memvfd_raw_get(const hfs_memvfd_t *s, size_t i, hfs_memvfd_alloc_t *out)
{
    if (!s) return -1;
    if (s->state == ST_OPEN) {
        if (i >= s->nraw) return -1;
        *out = s->al[s->raw[i]];
        return 0;
    }
    if (!s->img || i >= s->img->n_raw) return -1;
    *out = s->img->raw[i];
    return 0;
}

size_t hfs_memvfd_alloc_count(const hfs_memvfd_t *s)
{
    return s && s->state == ST_OPEN ? s->nal : 0;
}

int hfs_memvfd_alloc_get(const hfs_memvfd_t *s, size_t i, hfs_memvfd_alloc_t *out)
{
    if (!s || s->state != ST_OPEN || i >= s->nal) return -1;
    *out = s->al[i];
    return 0;
}

int hfs_memvfd_reserve(hfs_memvfd_t *s, uint64_t size, uint64_t *addr)
{
    if (!s || s->state != ST_OPEN || size == 0) return -1;
    uint64_t pad = (8 - s->eoa % 8) % 8;
    if (size > MEMVFD_MAXADDR - s->eoa - pad) return -1;
    if (h5l_grow((void **)&s->al, &s->capal, s->nal + 1, sizeof *s->al)) {
        s->failed = true;
        return -1;
    }
    s->al[s->nal++] = (hfs_memvfd_alloc_t){s->eoa + pad, size, (int)H5FD_MEM_DRAW, HFS_MEMVFD_ALLOC_RESERVED};
    *addr = s->eoa + pad;
    s->eoa += pad + size;
    if (s->trace)
        fprintf(stderr, "memvfd %p reserve addr %llu size %llu\n", (void *)s, (unsigned long long)*addr,
                (unsigned long long)size);
    return 0;
}

uint64_t hfs_memvfd_meta_bytes(const hfs_memvfd_t *s)
{
    if (!s) return 0;
    if (s->state == ST_OPEN) return s->meta_bytes;
    return s->img ? s->img->meta_bytes : 0;
}

int hfs_memvfd_failed(const hfs_memvfd_t *s) { return s && s->failed; }

hfs_memvfd_image_t *hfs_memvfd_take(hfs_memvfd_t *s)
{
    if (!s) return NULL;
    hfs_memvfd_image_t *img = NULL;
    if (s->state == ST_CLOSED && s->img) {
        img = s->img;
        s->img = NULL;
        s->state = ST_TAKEN;
    }
    session_unref(s);
    return img;
}

hfs_memvfd_image_t *hfs_memvfd_snapshot(hfs_memvfd_t *s)
{
    if (!s || s->state != ST_OPEN || s->failed) return NULL;
    return build_image(s, 0, 0);
}

void hfs_memvfd_put(hfs_memvfd_t *s)
{
    if (s) session_unref(s);
}

void hfs_memvfd_image_read(const hfs_memvfd_image_t *img, uint64_t off, size_t len, void *buf)
{
    unsigned char *out = buf;
    memset(out, 0, len);
    if (!img || len == 0) return;
    uint64_t hi = off + len < off ? UINT64_MAX : off + len;
    const hfs_memvfd_extent_t *e = img->extents;
    size_t a = 0, b = img->n_extents;
    while (a < b) { /* first extent ending past off */
        size_t m = a + (b - a) / 2;
        if (e[m].addr + e[m].len > off)
            b = m;
        else
            a = m + 1;
    }
    for (size_t i = a; i < img->n_extents && e[i].addr < hi; i++) {
        uint64_t x = e[i].addr > off ? e[i].addr : off;
        uint64_t end = e[i].addr + e[i].len;
        uint64_t y = end < hi ? end : hi;
        memcpy(out + (x - off), e[i].bytes + (x - e[i].addr), (size_t)(y - x));
    }
}

unsigned char *hfs_memvfd_image_bytes(hfs_memvfd_image_t *img, uint64_t off, size_t len)
{
    if (!img) return NULL;
    for (size_t i = 0; i < img->n_extents && img->extents[i].addr <= off; i++) {
        const hfs_memvfd_extent_t *e = &img->extents[i];
        if (off - e->addr <= e->len && len <= e->len - (off - e->addr)) return e->bytes + (off - e->addr);
    }
    return NULL;
}

void hfs_memvfd_image_trim(hfs_memvfd_image_t *img)
{
    if (!img) return;
    free(img->allocs);
    free(img->raw);
    img->allocs = img->raw = NULL;
    img->n_allocs = img->n_raw = 0;
}

void hfs_memvfd_image_free(hfs_memvfd_image_t *img)
{
    if (!img) return;
    if (img->extents)
        for (size_t i = 0; i < img->n_extents; i++) free(img->extents[i].bytes);
    free(img->extents);
    free(img->allocs);
    free(img->raw);
    free(img);
}
