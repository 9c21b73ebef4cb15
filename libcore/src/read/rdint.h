/* rdint.h — the reader's insides shared by its three files (not an
 * interface: read/reader.c, read/rlazy.c and read/rdata.c only).
 *
 * read/reader.c opens a file, loads its ticks (whole, or from index
 * checkpoints) and answers about them; read/rlazy.c keeps the record
 * tables of checkpointed ticks decoded on demand under a memory bound;
 * read/rdata.c reads boxes of data, verified, and answers chunk queries.
 * They share the reader's structure and these few functions (h5l_rd_). */
#ifndef H5L_RDINT_H
#define H5L_RDINT_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5log/box.h"
#include "ckpt.h"
#include "ckchain.h"
#include "ckmap.h"
#include "ckverify.h"
#include "h5log/codec.h"
#include "drop.h"
#include "h5log/fdio.h"
#include "h5log/grow.h"
#include "h5log/format.h"
#include "index.h"
#include "h5log/query.h"
#include "journal.h"
#include "schema.h"
#include "xfer.h"


#define TABLE_MAX ((uint64_t)1 << 30)       /* largest record table a reader loads */
#define HOLE_CHECK_MIN ((uint64_t)64 << 10) /* tables from this size are checked for holes first */
#define TWIN_TICK ((uint64_t)32 << 10)      /* ticks smaller than this read their tables through: */
#define TWIN ((size_t)256 << 10)            /* a window of the file, so one pread serves many */

/* Where each rank's data of a tick lies and its segment checksums: a view
 * of the tick's part of the reader's pool (tx_of). All ticks share one
 * growing array, not an allocation each: a long log of small ticks paid
 * a malloc and its overhead per tick. */
typedef struct tickx {
    uint32_t nranks;
    uint64_t *rstart;  /* nranks + 1: absolute start of each rank's data; [nranks] = end */
    uint64_t *segbase; /* nranks + 1: index of each rank's first checksum */
    uint64_t *sums;    /* every rank's segment checksums */
} tickx_t;

typedef struct lztick lztick_t; /* a lazy tick's decoded table (below) */

/* A checkpointed segment (docs/format.md 3.5). Its non-eager ticks'
 * records (tickrec below) are written when a call first needs a tick of
 * it (seg_fill), from its checkpoint frame read and checked again, not at
 * open: writing a million 48-byte records into fresh pages was a third
 * of opening a log of a million ticks, and most are never needed. The
 * open still reads every segment (its schema ops, its chunk entries) and
 * checks every tick entry. */
typedef struct ckseg {
    uint64_t first, last; /* its ticks */
    uint64_t pos;         /* journal offset of its CHECKPOINT frame */
    size_t len;           /* the frame's bytes */
    int summary;          /* opened from its summary alone (its entries read at the first need) */
    int attrs;            /* ... with its attribute list: the schema has its last values as of tick last
                           * and its ATTR ops are read again for a tick inside it (h5l_reader_schema_at) */
    uint32_t slen;        /* ... that summary's bytes and checksum: the frame read then must hold it */
    uint64_t ssum;
    _Atomic int filled;   /* its ticks' records are in r->ticks (release store, acquire load) */
} ckseg_t;
typedef _Atomic(lztick_t *) lzslot_t;

struct h5l_reader {
    int lazy_attrs; /* H5L_READER_LAZY_ATTRS */
    int no_map;     /* H5L_READER_NO_CHUNK_MAP (format.h) */
    int unshared; /* 1 while h5l_reader_open loads it: no other thread can reach it, so loading a tick
                   * takes no lock (10^6 lock pairs were a tenth of opening a long log) */
    char *path, *jpath;
    int fd;                 /* the HDF5 file */
    int jfd;                /* where the journal is read: sidecar, or fd when embedded */
    int live;               /* journal read from the sidecar */
    uint64_t jbase, jlimit; /* journal start in jfd; bytes (embedded only) */
    uint64_t jpos;          /* next frame, relative to jbase */
    h5l_jscan_t scan;
    uint8_t id[16];
    uint64_t seed, serial;
    uint32_t seglog;
    h5l_schema_t schema;
    h5l_index_t *index;
    struct tickrec *ticks; /* tick t at ticks[t - 1] */
    uint64_t *pool;        /* every tick's rstart, segbase and sums, back to back */
    size_t pool_len, pool_cap;
    size_t nticks, cap_ticks;
    h5l_rec_t **pend; /* a tick's records, checked, before they are indexed (kept: one */
    size_t cap_pend;  /* allocation for all ticks, not one per tick) */
    uint64_t fsize;   /* the HDF5 file's size as last seen (fstat again when a tick points past it) */
    uint8_t *twin;    /* the table window: file bytes [twin_off, twin_off + twin_len) */
    size_t twin_cap, twin_len;
    uint64_t twin_off;
    int closed;
    int failed;
    uint64_t damaged_tick; /* the tick that failed to load (0: none, or not a tick) */
    h5l_err_t ferr;
    pthread_rwlock_t lock;      /* schema, index, ticks */
    pthread_mutex_t refresh_mu; /* one refresh at a time */
    _Atomic uint64_t stat_bytes, stat_records, stat_dropped;
    h5l_drop_t *_Atomic drop; /* drop-behind of read log bytes; NULL: off */
    _Atomic uint64_t *_Atomic vseg; /* segments verified (rdata.c, log_read); NULL until the first */
    /* Ticks 1..ck_last came from index checkpoints (docs/format.md 3.5):
     * their tables are decoded when a read first needs them (tickrec
     * lazy), except eager ticks, indexed at open like any other. */
    uint64_t ck_last;
    _Atomic(lzslot_t *) *lzdir; /* ceil(ck_last / LZPAGE) pages */
    h5l_ckmap_t *ckmap;         /* which checkpointed ticks touch each chunk; NULL: none */
    ckseg_t *segs;              /* the segments of ticks 1..ck_last, in tick order */
    size_t nsegs;
    pthread_mutex_t seg_mu;     /* one segment filled at a time (under the read lock) */
    pthread_mutex_t lazy_mu;    /* one lazy decode at a time (under the read lock) */
    uint64_t lazy_nrec;         /* records of lazy ticks (h5l_reader_nrecords) */
    /* Decoded lazy tables are kept up to lazy_max bytes (H5L_LAZY_MAX):
     * past it the least recently used go (lazy_trim) and are decoded
     * again when needed, so reading a whole long log does not keep every
     * table (a million one-row ticks held 600 MB). */
    uint64_t lazy_max;
    _Atomic uint64_t lazy_bytes, lazy_clock, lazy_evicted, lazy_loads;
};

/* What the reader keeps of a tick: its TICK payload header without the
 * tick number (its place) in 48 bytes, not h5l_tick_info_t's 64 and an
 * array of pool offsets: a long log keeps one per tick. The sizes fit 32
 * bits because load_tick_body refuses larger ones (a table is at most
 * TABLE_MAX); a lazy tick's decoded table is found through lzdir. */
#define TX_LAZY UINT32_MAX
typedef struct tickrec {
    uint64_t time_ns, data_off, data_size, table_off;
    uint32_t table_size, nrecords, nranks;
    uint32_t tx; /* where its part of the pool starts; TX_LAZY: its table is decoded when first needed */
} tickrec_t;

static inline void tickrec_set(tickrec_t *tr, const h5l_tick_info_t *t, uint32_t tx)
{
    tr->time_ns = t->time_ns;
    tr->data_off = t->data_off;
    tr->data_size = t->data_size;
    tr->table_off = t->table_off;
    tr->table_size = (uint32_t)t->table_size;
    tr->nrecords = (uint32_t)t->nrecords;
    tr->nranks = t->nranks;
    tr->tx = tx;
}

/* Lazy ticks' decoded tables: pages of LZPAGE pointers, a page allocated
 * when a read first needs a tick of it, so the pointers cost memory only
 * where tables were decoded. Published with release stores, read with
 * acquire loads under the read lock; allocated under lazy_mu. */
#define LZPAGE 1024

static inline h5l_tick_info_t tick_info_of(const tickrec_t *tr, uint64_t tick)
{
    h5l_tick_info_t t = {tick,          tr->time_ns,   tr->nranks,     tr->data_off,
                         tr->data_size, tr->table_off, tr->table_size, tr->nrecords};
    return t;
}

/* A lazily decoded record table: the tick's rank offsets and checksums and
 * its records in sequence order, in one allocation; never changes once
 * published. */
typedef struct lzblk {
    struct lzblk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} lzblk_t;
struct lztick {
    tickx_t x;
    size_t nrec;
    h5l_rec_t **recs; /* nrec, in the allocation after x's arrays */
    lzblk_t *blk;     /* records and their boxes */
    h5l_index_t *idx; /* a tick of more than LZ_INDEX_MIN records: them by chunk, else NULL */
    uint32_t hint;    /* records of the tick: sizes the first record block */
    uint64_t bytes;   /* memory it holds (for lazy_max) */
    _Atomic uint64_t used; /* lazy_clock at its last use: eviction order */
    _Alignas(16) uint64_t arr[];
};

/* Default of lazy_max: 64 MiB of decoded tables per reader. */
#define LAZY_MAX_DEFAULT ((uint64_t)64 << 20)

/* A lazy tick with more records than this gets an index of its own, so a
 * chunk's lookup does not scan every record of a big tick. */
#define LZ_INDEX_MIN 32


typedef h5l_rec_t *(*newrec_fn)(void *ctx, uint32_t nboxes, uint32_t ndims);

/* Take the read lock for one read call (the lazy tables it uses are kept
 * by the trim at its end). */
void h5l_rd_lock(h5l_reader_t *r);

/* Release it, trimming the lazy tables past lazy_max. */
void h5l_rd_unlock(h5l_reader_t *r);

/* The kept entry of loaded tick t, filling its checkpointed segment first if
 * it is not yet (seg_fill). Under the read lock. */
int h5l_rd_tick_rec(h5l_reader_t *r, uint64_t t, const tickrec_t **out, h5l_err_t *err);

/* The view of tick `tick`'s rank offsets and checksums, decoding its table
 * first if it is lazy. Under the read lock. */
int h5l_rd_tick_x(h5l_reader_t *r, uint64_t tick, tickx_t *x, h5l_err_t *err);

/* Decode and check the record table of tick t (tab, t->table_size bytes)
 * into *pend (records made by newrec(rctx, ...), not indexed yet) and fill
 * x (rank starts, checksums; room for maxsums of them). */
int h5l_rd_load_table(h5l_reader_t *r, const h5l_tick_info_t *t, const uint8_t *tab, tickx_t *x, uint64_t maxsums,
                      h5l_rec_t ***pend, size_t *cap_pend, size_t *npend, newrec_fn newrec, void *rctx, h5l_err_t *err);

/* 1 and *at when [off, off + len) of fd lies over a hole (never written). */
int h5l_rd_table_hole(int fd, uint64_t off, uint64_t len, uint64_t *at);

/* The decoded table of lazy tick `tick`, decoding it now if it is not.
 * Under the read lock; lazy_mu taken inside. */
int h5l_rd_lazy_get(h5l_reader_t *r, uint64_t tick, const lztick_t **out, h5l_err_t *err);

/* Free every decoded lazy table, the chunk map and the segments (reset
 * or close). */
void h5l_rd_lazy_free_all(h5l_reader_t *r);

/* Account n log bytes at off read from the file (statistics). */
void h5l_rd_count_read(h5l_reader_t *r, uint64_t off, uint64_t n);
/* Segments in the reader's table of verified ones (rdata.c; tests). */
uint64_t h5l_rd_vseg_count(h5l_reader_t *r);

/* Account n log bytes at off handed to a caller (drop-behind). */
void h5l_rd_count_delivered(h5l_reader_t *r, uint64_t off, uint64_t n);

#endif
