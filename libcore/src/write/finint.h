/* finint.h — finalizing's insides shared by its files (not an interface:
 * write/final.c plans and builds, write/fcopy.c copies the chunks that are
 * not in place, write/findex.c writes the chunk indexes and points the
 * layouts at them; final.h is the interface). */
#ifndef H5L_FININT_H
#define H5L_FININT_H

#include "final.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include "h5log/box.h"
#include "h5log/btree.h"
#include "h5log/canon.h"
#include "h5log/fdio.h"
#include "h5log/grow.h"

#define TWO_K 64             /* children of a chunk B-tree node: libhdf5's default istore_k 32 */
#define PART_GAP 64          /* bytes between the parts of a cut tile (cut_tile) */
#define WRITE_IOV 256        /* the most parts one write of a cut tile takes */
#define CHUNK_MAX ((uint64_t)1 << 32) /* a chunk must be smaller (libhdf5 keeps its size in 32 bits) */

enum { FV_NONE, FV_CHUNKED, FV_CONTIG };

typedef struct fvar {
    uint32_t objid, nd;
    size_t es;
    char *path;
    int kind;      /* FV_NONE: no element (a dimension of length 0); FV_CHUNKED; FV_CONTIG */
    int rechunked; /* a contiguous variable stored chunked in place */
    uint64_t shape[H5L_MAX_DIMS], chunk[H5L_MAX_DIMS], nblk[H5L_MAX_DIMS];
    uint64_t S;              /* bytes of a full chunk */
    uint64_t *blks, n, bcap; /* chunks holding data: row-major chunk numbers, increasing */
    uint64_t *addr;          /* n: in place, the log offset; copied, its place once the plan is placed */
    uint8_t *copy;           /* n: 1 = copied */
    uint64_t ncopy, copy_off;       /* copies at fin + copy_off, S bytes apart, in chunk order */
    uint64_t node_off, node_bytes;  /* its root, then the nodes below it, at fin + node_off */
    uint64_t contig_addr;           /* FV_CONTIG: where libhdf5 put its storage */
    uint64_t oh;                    /* its object header (the building process) */
    h5l_bt_t bt;
    int has_bt;
    int pointed;                 /* its layout points at the root (h5l_final_point) */
    uint64_t lay_at, ck_at;      /* ... where the address and the checksum lie */
    uint32_t ck_old;             /* ... and the checksum before */
} fvar_t;

struct h5l_final {
    uint64_t tick;
    fvar_t *v;
    size_t nv;
    uint64_t fin_bytes, fin_base; /* fin.K: size, absolute offset once built */
    uint64_t base; /* libhdf5's base address (the user block's size): its addresses count from there */
    size_t window;
    uint64_t *addrs; /* fin_base, then each variable's contig_addr */
    h5l_final_stats_t st;
    char fin_name[32];
    char *path; /* the file's, for messages (its own copy: the reader may be closed first) */
};


/* ---- tiles (final.c) ---- */

typedef struct tile {
    uint32_t t;                                     /* dims < t: one index; t: a range; after: whole */
    uint64_t start[H5L_MAX_DIMS], count[H5L_MAX_DIMS]; /* the box */
} tile_t;

typedef int (*tile_fn)(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes);

/* (each function's contract is its comment where it is defined) */
void h5l_fin_blk_coord(const fvar_t *v, uint64_t blk, uint64_t *c);
uint64_t h5l_fin_coord_blk(const fvar_t *v, const uint64_t *c);
int h5l_fin_all_tiles(h5l_final_t *p, tile_fn fn, void *ctx);
int h5l_fin_count_tile(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes);
int h5l_fin_grow_buf(uint8_t **b, size_t *cap, size_t need, h5l_err_t *err, const char *path);

#endif
