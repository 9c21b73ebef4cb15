/* btree.h — chunk indexes written by the project itself: the version 1
 * B-tree of a chunked dataset, made from the sorted list of the chunks that
 * hold data. The daemon synthesizes its nodes on read (the canonical
 * image); the finalizer writes them into the log file (docs/format.md 1.1),
 * where chunks may lie anywhere (h5l_bt_set_addrs): in the log itself, or
 * copied.
 *
 * Why: libhdf5 1.10 builds a chunk index by inserting chunks one at a time
 * (H5Dwrite_chunk), about 2 us and ~90 bytes of daemon memory a chunk once
 * the region map is counted: a file of 10^6 one-row ticks spent 2 s and
 * 80 MB on it at its first open. The index is a pure function of the chunk
 * list, so this module keeps the list (as runs of consecutive chunks:
 * 16 bytes a run, one run for a dense axis) and encodes any node when its
 * bytes are read. Chunks are placed at fixed addresses: the first where
 * libhdf5 put it (skel.c lets libhdf5 write that one chunk, which creates
 * the root node and points the dataset's layout message at it), the others
 * back to back in space reserved after it (hfs_memvfd_reserve); chunks a
 * live file's later ticks add after the last one go to further space
 * (placements, one per reservation). An *own root* goes further: libhdf5
 * made no index (nothing written), root, nodes and chunks all lie in
 * reserved space, and reads of the dataset's object header give its
 * layout message pointing at our root (h5l_bt_point_layout).
 *
 * The tree (docs/format.md, "The canonical file's chunk indexes"): leaves
 * hold 2K chunks each in row-major order, the last one the rest; each level
 * above holds 2K nodes of the level below; the top is one node, the root,
 * written over libhdf5's root (same size: every node of a tree has the
 * size K and the rank give). Node j of a level covers chunk ordinals
 * [j (2K)^(level+1), (j+1) (2K)^(level+1)); its key i is the key of its
 * child i's first chunk and its last key the next node's first chunk, or
 * for the last node of a level the last chunk plus one in every dimension
 * (libhdf5's right key for a tree of one chunk). Non-root nodes follow
 * each other level by level from the leaves up in the node area.
 *
 * An h5l_bt_t is immutable once placed; reads are pure functions of it,
 * safe from any thread. */
#ifndef H5L_BTREE_H
#define H5L_BTREE_H

#include <stddef.h>
#include <stdint.h>
#include "h5log_reader.h"

/* Levels of a tree at most: 2^64 chunks need 11 with libhdf5's default
 * 64 children a node (istore_k 32, what skeletons use), 22 with 8; each
 * level costs 16 bytes in every h5l_bt_t, and a skeleton of 20,000
 * variables has as many. Deeper is refused (H5L_EINVAL). */
#define H5L_BT_MAX_LEVELS 24

typedef struct h5l_bt_run {
    uint64_t ord; /* first chunk ordinal of the run */
    uint64_t blk; /* its row-major chunk index; ord + i is blk + i */
} h5l_bt_run_t;

/* Where chunks lie: ordinals from ord on at addr, addr + chunk_bytes, ..
 * up to the next placement. */
typedef struct h5l_bt_place {
    uint64_t ord, addr;
} h5l_bt_place_t;

typedef struct hfs_bt {
    uint32_t ndims; /* dataset rank */
    uint64_t *nblk; /* ndims: chunks per dimension (one allocation with dim, owned: a
                     * skeleton of 20,000 variables has as many trees) */
    uint64_t *dim;  /* ndims + 1: chunk shape, then the element size */
    uint64_t chunk_bytes;
    uint64_t n; /* chunks indexed (at least 1) */
    h5l_bt_run_t *runs;
    size_t nruns;
    uint32_t two_k;                        /* children of a node at most */
    uint32_t root_level;                   /* levels below it: 0 .. root_level - 1 */
    uint64_t *count;                       /* root_level + 1: nodes of each level */
    uint64_t *first;                       /* root_level + 1: index in the node area of a level's first node
                                            * (one allocation with count, owned: arrays of the deepest tree
                                            * in each of 20,000 trees were 7 MB of a skeleton) */
    uint64_t node_size, key_size;          /* bytes */
    uint64_t nodes_len;                    /* bytes of the node area (every non-root node) */
    uint64_t root, nodes;                  /* addresses (h5l_bt_place) */
    uint64_t nodes_cap;                    /* bytes reserved at nodes (>= nodes_len) */
    uint64_t room;                         /* end of the space reserved for chunks (>= h5l_bt_chunks_end) */
    h5l_bt_place_t *pl;                    /* chunk placements, by ordinal */
    size_t npl;
    /* An own root (the root in space the daemon reserved, not libhdf5's,
     * which then made no index: h5l_bt_point_layout): */
    uint64_t oh;     /* 0, or the address of the dataset's object header */
    uint64_t lay_at; /* 0, or where its layout message's index address lies */
    uint64_t ck_at;  /* where the checksum of that object header chunk lies */
    uint32_t ck;     /* that checksum with the root's address in place */
    const uint64_t *addr; /* NULL, or n chunk addresses by ordinal (h5l_bt_set_addrs; borrowed) */
    /* Where the arrays live. nblk's allocation is always owned; a copy
     * (h5l_bt_copy) puts count, runs and pl in it too, with room to grow
     * (cap_*), and an array that outgrows its room moves to a malloc of
     * its own (bit 1 runs, 2 pl, 4 count in sep): a live skeleton copies
     * every tree at every patch, and four mallocs and two reallocs a tree
     * (10,000 trees, ten patches a second) were a quarter of the daemon's
     * time, most of it in malloc's bookkeeping. */
    size_t cap_runs, cap_pl; /* entries the arrays hold */
    uint32_t cap_lv;         /* levels count and first hold; first = count + cap_lv */
    uint32_t sep;
} h5l_bt_t;

/* Set up bt for the n chunks blks[0..n) (row-major chunk indices in a grid
 * of nblk chunks, strictly increasing) of a dataset of rank ndims, chunk
 * shape block and elements of esize bytes, in a file whose chunk B-trees
 * hold two_k children a node. The list is copied (as runs). 0, or
 * H5L_ENOMEM / H5L_EINVAL (n 0, unsorted, too deep). */
int h5l_bt_init(h5l_bt_t *bt, uint32_t ndims, const uint64_t *nblk, const uint64_t *block, size_t esize,
                uint32_t two_k, const uint64_t *blks, uint64_t n);

/* Addresses: the root node (libhdf5's, or an own root: see
 * h5l_bt_point_layout), the node area (nodes_len bytes), chunk ordinal 0
 * (libhdf5's, or the first of an own root's) and ordinal 1, the others
 * following it.
 * 0, or H5L_ENOMEM (bt unchanged then). */
int h5l_bt_place(h5l_bt_t *bt, uint64_t root, uint64_t nodes, uint64_t chunk0, uint64_t chunks);

/* A live skeleton's index grows (skel.c): chunks blks[0..k), strictly
 * increasing and after every chunk bt has, join it as ordinals n ..
 * n+k-1, placed from addr on (a placement of their own unless addr is
 * where the last placement's chunks end). The levels are laid out again;
 * the caller then checks nodes_len against nodes_cap and moves the node
 * area (h5l_bt_set_nodes) when it no longer fits. 0, H5L_EINVAL or
 * H5L_ENOMEM (bt unchanged then). */
int h5l_bt_append(h5l_bt_t *bt, const uint64_t *blks, uint64_t k, uint64_t addr);

/* The node area at nodes, cap bytes reserved there. */
void h5l_bt_set_nodes(h5l_bt_t *bt, uint64_t nodes, uint64_t cap);

/* A deep copy of src into dst (a new skeleton's own), in one allocation
 * with room for a few more runs, placements and a level. 0 or H5L_ENOMEM
 * (dst then holds nothing to free; h5l_bt_free(dst) is harmless). */
int h5l_bt_copy(h5l_bt_t *dst, const h5l_bt_t *src);

/* Chunk ordinal o lies at addr[o] (n of them, the caller's, kept alive
 * while bt is used): chunks anywhere, not back to back. Placements are
 * then ignored; h5l_bt_place still sets the root and node area. */
void h5l_bt_set_addrs(h5l_bt_t *bt, const uint64_t *addr);

/* The address just past the chunks of the last placement. */
uint64_t h5l_bt_chunks_end(const h5l_bt_t *bt);

/* Row-major chunk index of chunk ordinal ord (< n). */
uint64_t h5l_bt_blk(const h5l_bt_t *bt, uint64_t ord);

/* The file address of chunk ordinal ord (< n). */
uint64_t h5l_bt_chunk_addr(const h5l_bt_t *bt, uint64_t ord);

/* Encode node j of level (root_level for the root) into buf (node_size
 * bytes). */
void h5l_bt_node(const h5l_bt_t *bt, uint32_t level, uint64_t j, uint8_t *buf);

/* Write over buf[0..len), the file's bytes at off, the bytes of every node
 * of bt that [off, off + len) meets (the root and the node area), and with
 * an own root the layout's address and its chunk's checksum
 * (h5l_bt_point_layout). 0, or H5L_ENOMEM. */
int h5l_bt_read(const h5l_bt_t *bt, uint64_t off, size_t len, uint8_t *buf);

/* Reads n bytes of the file at off into buf (the skeleton's image). */
typedef void (*h5l_bt_read_fn)(const void *ctx, uint64_t off, size_t n, void *buf);

/* An own root: bt's tree was placed with its root in reserved space
 * (h5l_bt_place), and libhdf5 made no index for the dataset whose object
 * header is at bt->oh, so its layout message says "no index" (address
 * undefined). Find that message in the header (version 2: its first chunk
 * and continuation chunks) and set lay_at, ck_at and ck, so that reads
 * (h5l_bt_read) give the header pointing at the root, with its chunk's
 * checksum (Jenkins' lookup3, libhdf5's metadata checksum) made again.
 * Checks, so that a libhdf5 writing otherwise is found, not served: the
 * header's signatures and version, the chunk's stored checksum against
 * this module's lookup3, and the message (version 3, chunked, bt's rank,
 * chunk shape and element size, address undefined). 0, or H5L_ECORRUPT
 * (the caller builds again with libhdf5's indexes). */
int h5l_bt_point_layout(h5l_bt_t *bt, h5l_bt_read_fn read, const void *ctx);

/* Jenkins' lookup3 hash of p[0..n) with initial value 0: libhdf5's
 * checksum of metadata (object headers version 2, ...). */
uint32_t h5l_bt_lookup3(const uint8_t *p, size_t n);

void h5l_bt_free(h5l_bt_t *bt); /* its arrays, runs and placements; bt itself is the caller's */

#endif
