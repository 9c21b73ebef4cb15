/* memvfd.h — an in-memory HDF5 virtual file driver that captures the
 * metadata of a canonical file skeleton (docs/architecture.md: the canonical
 * metadata is made by libhdf5 itself, not by hand-written encoders).
 *
 * The daemon builds each snapshot's canonical HDF5 file with the real
 * library on this driver: groups, attributes, dimension scales, contiguous
 * datasets created with H5D_ALLOC_TIME_EARLY + H5D_FILL_TIME_NEVER (libhdf5
 * allocates their raw data but never writes it) and chunked ones with
 * incremental allocation, whose chunks holding data are then allocated one
 * by one with H5Dwrite_chunk inside raw windows (the written bytes are
 * dropped, see below). The driver
 *   - keeps every metadata write in a sparse in-memory image (exact written
 *     byte ranges, nothing else) and serves libhdf5's read-backs from it;
 *   - never stores raw data: writes of type H5FD_MEM_DRAW to dataset
 *     regions are dropped and counted (libhdf5's own DRAW-typed objects
 *     are kept, see "Raw-typed metadata" below);
 *   - records every allocation that reaches it (absolute file offset, size,
 *     memory type), so the caller learns every raw region's address without
 *     H5Dget_chunk_info (which is quadratic over all chunks in 1.10.8).
 * After H5Fclose the caller takes an owned, immutable image: EOF, metadata
 * extents (sorted, coalesced) and the allocation records.
 *
 * Typical use (all calls under the caller's one libhdf5 lock):
 *
 *     hid_t fapl = hfs_memvfd_fapl();          // reusable, one per process
 *     hid_t f = H5Fcreate("snap", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
 *     hfs_memvfd_t *s = hfs_memvfd_get(f);     // this file's capture session
 *     hfs_memvfd_use_windows(s);               // recommended, see below
 *     size_t r0 = hfs_memvfd_raw_begin(s);
 *     hid_t d = H5Dcreate2(f, ...);            // early alloc, fill never
 *     size_t r1 = hfs_memvfd_raw_end(s);       // raw[r0..r1) are d's regions
 *     ... close every object ...; H5Fclose(f);
 *     hfs_memvfd_image_t *img = hfs_memvfd_take(s);   // consumes s
 *     ... serve hfs_memvfd_image_read(img, off, len, buf) ...
 *     hfs_memvfd_image_free(img);
 *
 * Raw regions of one dataset: H5Dcreate with early allocation allocates all
 * of the dataset's raw space inside the H5Dcreate call (H5Dset_extent: the
 * new chunks, inside that call), so the raw records appended during the
 * call belong to it, in row-major chunk order at increasing addresses
 * (1.10.8). Their shape depends on the layout the library picks:
 *   - contiguous: one record; its addr equals H5Dget_offset;
 *   - chunked, v1 B-tree (earliest format), fixed or extensible array
 *     (latest format; extensible array when a dimension is unlimited):
 *     one record per chunk, chunk k (row-major) is record r0 + k;
 *   - chunked, latest format, fixed dims, early allocation, no filter:
 *     1.10's implicit index (also "single chunk" when one chunk covers
 *     the dataset): ONE record of nchunks * chunk_bytes; chunk k is at
 *     addr + k * chunk_bytes and the index holds no per-chunk metadata.
 * Guard the mapping with a few H5Dget_chunk_info_by_coord spot checks.
 *
 * Raw-typed metadata: 1.10.8 allocates and writes two of its own
 * structures as H5FD_MEM_DRAW: global heap collections (variable-length
 * data: vlen string attributes, the DIMENSION_LIST of dimension scales) and
 * fractal-heap "huge" objects (an attribute over about 4 KiB in dense
 * attribute storage: latest format and more than 8 attributes on one
 * object). Both appear in raw[] (indices stay stable) with a flag, and their
 * bytes are kept. Global heap collections are recognised by their bytes in
 * any mode (flag GHEAP). Huge objects cannot be told from dataset data by
 * their bytes: in the default mode they are treated as dataset regions
 * (dropped, counted in dropped_writes; libhdf5 may then fail reading them
 * back); in windowed mode (hfs_memvfd_use_windows) only DRAW allocations made
 * between hfs_memvfd_raw_begin and hfs_memvfd_raw_end are dataset regions,
 * and the others are kept (flag META). Windowed mode is the one to use:
 * open a window around every H5Dcreate / H5Dset_extent / H5Dwrite.
 *
 * Frees: 1.10.8 keeps freed file space in its own free-space managers and
 * reuses it without calling the driver, so a skeleton must not delete or
 * shrink objects: a dataset created after a deletion may get the freed
 * space and no record (its window comes back empty; check r1 > r0 and,
 * for contiguous data, raw[r0].addr == H5Dget_offset). An fcpl with
 * H5Pset_file_space_strategy(fcpl, H5F_FSPACE_STRATEGY_NONE, 0, 1) makes
 * every allocation reach the driver, at the price of a version 2
 * superblock with a 1.10 file-space-info message.
 *
 * Not supported: opening existing files (only H5F_ACC_TRUNC/EXCL creation;
 * H5Fopen fails), paged file-space strategy (H5F_FSPACE_STRATEGY_PAGE),
 * userblocks, SWMR, MPI. The driver uses no metadata/small-data
 * aggregation and no metadata accumulator, so each libhdf5 allocation
 * reaches it individually.
 *
 * Alignment: H5Pset_alignment(fapl, 1, 4096) is honoured and reflected in
 * the records (every region page aligned; padding excluded from sizes).
 * Use threshold 1: H5MF keeps each alignment pad as free space, and a
 * later request below the threshold (unaligned) is placed in a pad without
 * reaching the driver (observed: small datasets after a big aligned one
 * got no record).
 *
 * Threads: none of this is thread-safe, as libhdf5 1.10.8 itself is not.
 * Every function except the image functions (hfs_memvfd_image_read,
 * hfs_memvfd_image_free, plain field reads of an image) must be called
 * under the caller's libhdf5 lock. A taken image is immutable and owns all
 * its memory: any number of threads may read it concurrently without the
 * lock, and any number of images may exist at once.
 */
#ifndef HFS_MEMVFD_H
#define HFS_MEMVFD_H

#include <stddef.h>
#include <stdint.h>
#include <hdf5.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One run of metadata bytes in the image: [addr, addr + len). */
typedef struct hfs_memvfd_extent {
    uint64_t addr;
    uint64_t len;
    unsigned char *bytes; /* len bytes, owned by the image */
} hfs_memvfd_extent_t;

/* hfs_memvfd_alloc_t.flags */
#define HFS_MEMVFD_ALLOC_EXTENDED 0x1u /* grown in place at EOA (H5MF try_extend) */
#define HFS_MEMVFD_ALLOC_FREED 0x2u    /* released to the driver (not at EOA) */
#define HFS_MEMVFD_ALLOC_GHEAP                                                                                         \
    0x4u /* H5FD_MEM_DRAW allocation found to hold
                                        * a global heap collection (type says
                                        * H5FD_MEM_GHEAP); its bytes are kept */
#define HFS_MEMVFD_ALLOC_META                                                                                          \
    0x8u /* windowed mode: DRAW allocation made
                                        * outside every window: libhdf5's own
                                        * object (e.g. a huge attribute); kept */
#define HFS_MEMVFD_ALLOC_RESERVED 0x10u /* taken by hfs_memvfd_reserve */

/* One allocation that reached the driver. addr is the absolute file offset
 * (equal to the HDF5 address: no userblock). size is the size libhdf5
 * asked for (alignment padding excluded). */
typedef struct hfs_memvfd_alloc {
    uint64_t addr;
    uint64_t size;
    int type;       /* H5FD_mem_t given to the alloc callback */
    unsigned flags; /* HFS_MEMVFD_ALLOC_* */
} hfs_memvfd_alloc_t;

/* The captured file, owned by the caller once taken. Read-only. */
typedef struct hfs_memvfd_image {
    uint64_t eoa; /* end of allocated space at close (what the superblock says) */
    uint64_t eof; /* file size to report (st_size): the EOA at close, which
                   * the superblock records; never less than any extent end */
    size_t n_extents;
    hfs_memvfd_extent_t *extents; /* metadata, sorted by addr, disjoint and
                                   * coalesced (no two touch) */
    uint64_t meta_bytes;          /* sum of extents[].len */
    size_t n_allocs;
    hfs_memvfd_alloc_t *allocs; /* every allocation that reached the
                                   * driver and was not given back at the
                                   * EOA, in allocation order, which is also
                                   * address order */
    size_t n_raw;
    hfs_memvfd_alloc_t *raw; /* the H5FD_MEM_DRAW allocations, in
                                   * allocation order; index i is the same i
                                   * hfs_memvfd_raw_get saw while open.
                                   * Entries flagged HFS_MEMVFD_ALLOC_GHEAP
                                   * or _META are metadata (their bytes are
                                   * in extents), not dataset regions. */
    uint64_t raw_bytes;      /* sum of raw[].size of dataset regions
                                   * (GHEAP and META excluded) */
    uint64_t dropped_writes; /* H5FD_MEM_DRAW writes not stored ... */
    uint64_t dropped_bytes;  /* ... and their bytes: those of the
                                   * skeleton's H5Dwrite_chunk calls (one
                                   * chunk each); beyond them, the image
                                   * lacks bytes libhdf5 wrote: fill values,
                                   * H5Dwrite data, or (default mode) a huge
                                   * dense-storage attribute. */
    uint64_t raw_freed;      /* raw records the driver saw freed or
                                   * removed (EOA shrink) while the file was
                                   * open: 0 in a proper skeleton; nonzero
                                   * means indices may have shifted. Most
                                   * frees never reach the driver (see
                                   * "Frees" above). */
} hfs_memvfd_image_t;

/* The capture session of one file created on the driver. */
typedef struct hfs_memvfd hfs_memvfd_t;

/* The driver's id, registering it on first use (and again after H5close).
 * Returns a negative id on failure. */
hid_t hfs_memvfd_driver_id(void);

/* A new file access property list using the driver (caller H5Pcloses it).
 * Each H5Fcreate with it makes a new, independent in-memory file; the name
 * is only a label. Other fapl settings (libver bounds, alignment, metadata
 * cache) may be added by the caller. Negative on failure. */
hid_t hfs_memvfd_fapl(void);

/* The capture session of `file`, an open file created on the driver; a new
 * reference the caller must give back with hfs_memvfd_take or
 * hfs_memvfd_put. NULL if `file` is not on this driver. May be called more
 * than once (each call is one reference). */
hfs_memvfd_t *hfs_memvfd_get(hid_t file);

/* The same for a file opened directly with H5FDopen on a fapl from
 * hfs_memvfd_fapl (tests, tools). NULL if `fd` is not on this driver. */
hfs_memvfd_t *hfs_memvfd_get_vfd(H5FD_t *fd);

/* Switch the session to windowed mode (see "Raw-typed metadata"): from now
 * on, DRAW allocations made outside raw windows are libhdf5's own objects,
 * kept as metadata (flag META). Call it right after H5Fcreate/get (H5Fcreate
 * itself allocates no raw-typed space). Cannot be undone. */
void hfs_memvfd_use_windows(hfs_memvfd_t *s);

/* Windowed mode: the first dataset region (the first DRAW allocation in
 * a raw window) starts at least `bytes` past the end of what was allocated
 * before it, rounded up to 4 KiB: a hole. Call before the first H5Dcreate.
 * Why: the skeleton's metadata comes first, and a reader opening the file
 * reads it; the kernel's readahead would otherwise run on into the first
 * chunk, whose assembly may cost a pass over the log (skel.c). */
void hfs_memvfd_raw_gap(hfs_memvfd_t *s, uint64_t bytes);

/* Open / close a raw window (they nest). Both return hfs_memvfd_raw_count,
 * so `r0 = begin; H5Dcreate2(...); r1 = end;` gives the dataset's records
 * raw[r0..r1) and nothing else. Without windows, counting from one
 * H5Dcreate to the next also counts global heap collections (vlen
 * attributes, DIMENSION_LIST) allocated in between: these are flagged
 * GHEAP only when written, often at H5Fclose, so while the file is open
 * they look like dataset regions. Harmless in the default mode (they only
 * count there). */
size_t hfs_memvfd_raw_begin(hfs_memvfd_t *s);
size_t hfs_memvfd_raw_end(hfs_memvfd_t *s);

/* While the file is open: how many H5FD_MEM_DRAW allocations are recorded,
 * and record i (0 <= i < count) of them. After close these are the image's
 * raw[] entries with the same indices. raw_get returns 0, or -1 if i is out
 * of range. */
size_t hfs_memvfd_raw_count(const hfs_memvfd_t *s);
int hfs_memvfd_raw_get(const hfs_memvfd_t *s, size_t i, hfs_memvfd_alloc_t *out);

/* While the file is open: every allocation recorded so far (raw or not),
 * in allocation order, and record i of them (0, or -1 if out of range).
 * A skeleton finds the B-tree node libhdf5 allocated inside a call this
 * way (skel.c: the root of a chunk index it completes itself). */
size_t hfs_memvfd_alloc_count(const hfs_memvfd_t *s);
int hfs_memvfd_alloc_get(const hfs_memvfd_t *s, size_t i, hfs_memvfd_alloc_t *out);

/* While the file is open: take size bytes at the EOA for the caller, who
 * serves them itself (skel.c writes a chunk index and places chunks
 * there). libhdf5 asks the driver for the EOA at every allocation and
 * when it writes the superblock, so what it allocates later comes after
 * this space and the file's end of address covers it. Recorded as an
 * allocation of type H5FD_MEM_DRAW flagged HFS_MEMVFD_ALLOC_RESERVED (not
 * among the raw records: no window sees it); nothing is stored for it and
 * reads of it give zeros. *addr gets its address, aligned to 8 bytes (the
 * padding is part of no record). 0, or -1 if the file is not open, size
 * is 0 or the address space or memory runs out. */
int hfs_memvfd_reserve(hfs_memvfd_t *s, uint64_t size, uint64_t *addr);

/* Current metadata bytes held (live view, for diagnostics). */
uint64_t hfs_memvfd_meta_bytes(const hfs_memvfd_t *s);

/* After the file is really closed (H5Fclose with no object of it left
 * open; the driver's close degree is H5F_CLOSE_WEAK, so open objects keep
 * the file open): move the image out of the session. Consumes the
 * reference `s` in every case. Returns NULL if the file is still open (at
 * its close the image is built only if a reference is still held), if the
 * image was already taken through another reference, or on allocation
 * failure while capturing. */
hfs_memvfd_image_t *hfs_memvfd_take(hfs_memvfd_t *s);
/* 1 when the driver ran out of memory (a write, a reservation or the
 * image at close): the file has no image. */
int hfs_memvfd_failed(const hfs_memvfd_t *s);

/* While the file is open, after H5Fflush (every dirty metadata entry and
 * the superblock with the current EOA written): a new image of the file as
 * it is now, owned by the caller; the session keeps capturing. This is how
 * a skeleton kept open and patched tick after tick (skel.c) publishes each
 * version. It has no allocation records (n_allocs and n_raw 0: the
 * session's own stay; a skeleton keeps its regions apart), so a patch does
 * not copy 48 bytes per chunk of the file only to drop them. NULL if the
 * file is not open, the capture failed, or out of memory. */
hfs_memvfd_image_t *hfs_memvfd_snapshot(hfs_memvfd_t *s);

/* Give back a reference without taking the image. NULL is ignored. */
void hfs_memvfd_put(hfs_memvfd_t *s);

/* Fill buf[0..len) with the image's bytes at file offset off: metadata where
 * present, zeros elsewhere (raw regions, holes, past EOF). Never fails; a
 * pure function of the immutable image, safe from any thread. O(log n +
 * extents touched + len). */
void hfs_memvfd_image_read(const hfs_memvfd_image_t *img, uint64_t off, size_t len, void *buf);

/* The image's metadata bytes [off, off + len) when one extent holds them
 * all, else NULL: for the builder to amend an image before it publishes
 * it (the image is read-only from then on). */
unsigned char *hfs_memvfd_image_bytes(hfs_memvfd_image_t *img, uint64_t off, size_t len);

/* Free an image. NULL is ignored. */
void hfs_memvfd_image_free(hfs_memvfd_image_t *img);
/* Free what only the build that made img needs: its allocation records
 * (allocs, raw: n_allocs and n_raw become 0; raw_bytes stays). A skeleton
 * keeps its raw regions apart, and with a chunk per tick these records
 * were 48 bytes a chunk, a fifth of the daemon's memory for a long log. */
void hfs_memvfd_image_trim(hfs_memvfd_image_t *img);

#ifdef __cplusplus
}
#endif

#endif
