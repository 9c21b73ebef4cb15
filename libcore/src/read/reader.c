/* reader.c — open a log-layout file, load its ticks, read boxes as of a tick.
 *
 * Loading a tick: the TICK frame's ops are applied to the schema, its record
 * table is read with one pread, every block is checked (checksum bound to
 * its tick and rank, records decoded, boxes inside the shape of that tick,
 * records accounting for the rank's data exactly), then records go into the
 * index in sequence order and the tick becomes visible by bumping `nticks`.
 * Anything wrong is damage: the reader keeps the ticks before it, serves
 * them, and reports the same error (naming the tick) from then on.
 *
 * Reading: the records of every index chunk the box touches (chunks
 * partition space; a record hidden under newer ones in every chunk it
 * touches is left out), each once, in sequence order, go to the
 * transposition engine (xfer.h): it marks the log segments their pieces
 * need, reads each once in windows and copies the pieces out in log
 * order, so the later sequence wins. Data comes from the log with pread at
 * absolute offsets — no mmap, so a file truncated under us yields EIO,
 * never SIGBUS — and every byte is verified against the checksum of its
 * data segment before it is used (log_read): a segment wholly inside a
 * read is hashed where it lands, a segment the read only touches is read
 * whole into a small per-thread cache of verified segments (consecutive
 * small reads of one segment then cost one pread and one hash). */
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

static void tickrec_set(tickrec_t *tr, const h5l_tick_info_t *t, uint32_t tx)
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

static h5l_tick_info_t tick_info_of(const tickrec_t *tr, uint64_t tick)
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

static int start_from_checkpoints(h5l_reader_t *r);
static void lazy_free_all(h5l_reader_t *r);

static _Atomic uint64_t reader_serial; /* tells readers apart in the segment caches */

static uint64_t file_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int read_ub(int fd, const char *path, h5l_ub_t *ub, h5l_err_t *err)
{
    uint8_t b[H5L_UB_LEN];
    size_t n;
    int rc = h5l_fd_read(fd, b, sizeof b, 0, &n, path, err);
    if (rc) return rc;
    if (n < sizeof b) return h5l_err_set(err, H5L_EFORMAT, "%s: not a log-layout file (too short)", path);
    return h5l_ub_decode(b, ub, path, err);
}

int h5l_probe(const char *path, h5l_err_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(err, errno == ENOENT ? H5L_ENOTFOUND : H5L_EIO, "%s: %s", path, strerror(errno));
    uint8_t m[8];
    size_t n;
    int rc = h5l_fd_read(fd, m, sizeof m, 0, &n, path, err);
    close(fd);
    if (rc) return rc;
    if (n < 8 || memcmp(m, h5l_ub_magic, 8) != 0)
        return h5l_err_set(err, H5L_EFORMAT, "%s: not a log-layout file", path);
    return H5L_OK;
}

/* Point the reader at its journal: the sidecar while the file is live, else
 * the embedded copy. Handles a writer closing between our two looks. */
static int attach_journal(h5l_reader_t *r, h5l_err_t *err)
{
    h5l_ub_t ub;
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = read_ub(r->fd, r->path, &ub, err);
        if (rc) return rc;
        memcpy(r->id, ub.id, 16);
        r->seed = h5l_seed(ub.id);
        if (ub.flags & H5L_UB_CLOSED) {
            uint64_t fsz = file_size(r->fd);
            if (ub.jr_len < H5L_JHDR_LEN || ub.jr_off < H5L_USERBLOCK_SIZE || ub.jr_len > fsz ||
                ub.jr_off > fsz - ub.jr_len)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal [%llu, +%llu) lies outside the file",
                                   r->path, (unsigned long long)ub.jr_off, (unsigned long long)ub.jr_len);
            r->jfd = r->fd;
            r->live = 0;
            r->jbase = ub.jr_off;
            r->jlimit = ub.jr_len;
            return H5L_OK;
        }
        r->jfd = open(r->jpath, O_RDONLY | O_CLOEXEC);
        if (r->jfd >= 0) {
            r->live = 1;
            r->jbase = 0;
            r->jlimit = 0;
            return H5L_OK;
        }
        if (errno != ENOENT) return h5l_err_set(err, H5L_EIO, "%s: %s", r->jpath, strerror(errno));
        /* sidecar gone: the writer may have closed meanwhile; look again */
    }
    return h5l_err_set(err, H5L_ECORRUPT, "%s: file is open for writing but its journal %s is missing", r->path,
                       r->jpath);
}

static int check_jhdr(h5l_reader_t *r, h5l_err_t *err)
{
    uint8_t b[H5L_JHDR_LEN];
    const char *what = r->live ? r->jpath : r->path;
    size_t n;
    int rc = h5l_fd_read(r->jfd, b, sizeof b, r->jbase, &n, what, err);
    if (rc) return rc;
    if (n < sizeof b) return h5l_err_set(err, H5L_ECORRUPT, "%s: journal shorter than its header", what);
    h5l_jhdr_t h;
    rc = h5l_jhdr_decode(b, &h, what, err);
    if (rc) return rc;
    if (memcmp(h.id, r->id, 16) != 0)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal belongs to another file (identity mismatch)", what);
    r->seglog = h.seglog;
    r->jpos = H5L_JHDR_LEN;
    h5l_jscan_init(&r->scan, r->jfd, NULL, r->jbase, r->live, r->seed, what);
    return H5L_OK;
}

int h5l_reader_open(const char *path, h5l_reader_t **out, h5l_err_t *err)
{
    return h5l_reader_open_flags(path, 0, out, err);
}

int h5l_reader_open_flags(const char *path, unsigned flags, h5l_reader_t **out, h5l_err_t *err)
{
    *out = NULL;
    h5l_reader_t *r = calloc(1, sizeof *r);
    if (!r) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
    r->fd = r->jfd = -1;
    r->serial = atomic_fetch_add(&reader_serial, 1) + 1;
    r->unshared = 1;
    r->lazy_attrs = (flags & H5L_READER_LAZY_ATTRS) != 0;
    r->no_map = (flags & H5L_READER_NO_CHUNK_MAP) != 0;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* writer preference: a stream of reads must not starve tick loading */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&r->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    pthread_mutex_init(&r->refresh_mu, NULL);
    pthread_mutex_init(&r->lazy_mu, NULL);
    pthread_mutex_init(&r->seg_mu, NULL);
    const char *lm = getenv("H5L_LAZY_MAX");
    r->lazy_max = lm && *lm ? strtoull(lm, NULL, 10) : LAZY_MAX_DEFAULT;
    int rc;
    r->path = strdup(path);
    if (r->path && asprintf(&r->jpath, "%s%s", path, H5L_SIDECAR_SUFFIX) < 0) r->jpath = NULL;
    r->index = h5l_index_new();
    if (!r->path || !r->jpath || !r->index || h5l_schema_init(&r->schema)) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        rc = h5l_err_set(err, errno == ENOENT ? H5L_ENOTFOUND : H5L_EIO, "%s: %s", path, strerror(errno));
        goto fail;
    }
    if ((rc = attach_journal(r, err)) || (rc = check_jhdr(r, err))) goto fail;
    if (!(flags & H5L_READER_FULL) && start_from_checkpoints(r)) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    /* damage found while loading is kept (h5l_reader_damage): the ticks
     * before it are served; only an error that lets nothing be read fails */
    rc = h5l_reader_refresh(r, NULL, err);
    if (rc == H5L_ENOMEM) goto fail;
    r->unshared = 0; /* published: from here on other threads may hold it */
    *out = r;
    return H5L_OK;
fail:
    h5l_reader_close(r);
    return rc;
}

void h5l_reader_close(h5l_reader_t *r)
{
    if (!r) return;
    if (r->jfd >= 0 && r->jfd != r->fd) close(r->jfd);
    if (r->fd >= 0) close(r->fd);
    h5l_jscan_free(&r->scan);
    lazy_free_all(r);
    pthread_mutex_destroy(&r->lazy_mu);
    pthread_mutex_destroy(&r->seg_mu);
    free(r->twin);
    free(r->pend);
    h5l_schema_free(&r->schema);
    h5l_index_free(r->index);
    h5l_drop_free(atomic_load(&r->drop));
    free(r->pool);
    free(r->ticks);
    free(r->path);
    free(r->jpath);
    pthread_rwlock_destroy(&r->lock);
    pthread_mutex_destroy(&r->refresh_mu);
    free(r);
}

/* Decode and check one record's boxes against the schema as of tick t;
 * rec->size gets the bytes its boxes need. */
static int check_rec(h5l_reader_t *r, const h5l_tick_info_t *t, h5l_rec_t *rec, h5l_err_t *err)
{
    const h5l_obj_t *o = &r->schema.objs[rec->objid];
    uint64_t nbytes = 0;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * o->ndims, *c = s + o->ndims;
        for (uint32_t d = 0; d < o->ndims; d++) {
            uint64_t len = h5l_schema_dimlen(&r->schema, o->dimids[d], t->tick);
            if (c[d] == 0 || s[d] > len || c[d] > len - s[d])
                return h5l_err_set(err, H5L_ECORRUPT,
                                   "%s: tick %llu: record of '%s' selects outside its shape (dim %u: start %llu count "
                                   "%llu length %llu)",
                                   r->path, (unsigned long long)t->tick, o->path, d, (unsigned long long)s[d],
                                   (unsigned long long)c[d], (unsigned long long)len);
        }
        uint64_t ne = h5l_box_nelem(o->ndims, c); /* saturates at UINT64_MAX */
        if (ne > (UINT64_MAX - nbytes) / o->type.size)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record of '%s' is larger than 2^64 bytes", r->path,
                               (unsigned long long)t->tick, o->path);
        nbytes += ne * o->type.size;
    }
    rec->size = nbytes;
    return H5L_OK;
}

/* Decode and check the record table of tick t into pend[] (not indexed
 * yet) and fill x (rank starts, checksums). Runs under the write lock. */
/* The view of loaded tick `tick`'s part of the pool. Under the lock. */
static int lazy_get(h5l_reader_t *r, uint64_t tick, const lztick_t **out, h5l_err_t *err);

static int tick_check(const h5l_reader_t *r, const h5l_tick_info_t *tp, uint64_t *fsize_seen, h5l_err_t *err);

/* Read segment sg's checkpoint frame again into *fb (the caller frees it)
 * and decode it into *c (h5l_ckpt_clear): it must verify and be the frame
 * the open used (its segment, and its summary as applied then). 0, or
 * H5L_ENOMEM, H5L_EIO, H5L_ECORRUPT with err set. */
static int seg_reread(h5l_reader_t *r, const ckseg_t *sg, uint8_t **fb, h5l_ckpt_t *c, h5l_err_t *err)
{
    h5l_err_t e = {0};
    int rc = H5L_OK;
    if (!(*fb = malloc(sg->len)))
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    else if (h5l_fd_read_all(r->jfd, *fb, sg->len, r->jbase + sg->pos, r->scan.what, &e))
        rc = h5l_err_set(err, H5L_EIO, "%s", e.msg);
    else if ((rc = h5l_ckpt_decode(*fb, sg->len, r->seed, sg->pos, c, r->scan.what, &e)))
        h5l_err_set(err, rc, "%s (it verified when the file was opened)", e.msg);
    else if (c->first != sg->first || c->last != sg->last ||
             (sg->summary && ((uint32_t)h5l_get_le64(*fb + H5L_FRAME_LEN + 40) != sg->slen ||
                              h5l_get_le64(*fb + H5L_FRAME_LEN + 48) != sg->ssum)))
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: checkpoint at journal offset %llu changed since it was read",
                         r->scan.what, (unsigned long long)sg->pos); /* (open applied its summary as it was) */
    return rc;
}

/* Write the records of segment sg's non-eager ticks (eager ones were
 * loaded at open) into r->ticks, from its checkpoint frame read and
 * decoded again, every entry checked as at open. Under the read lock (or
 * unshared); one at a time (seg_mu). 0, or H5L_ENOMEM, H5L_EIO,
 * H5L_ECORRUPT (the frame changed since open) with err set; the next call
 * needing the segment tries again. */
static int seg_fill(h5l_reader_t *r, ckseg_t *sg, h5l_err_t *err)
{
    pthread_mutex_lock(&r->seg_mu);
    int rc = H5L_OK;
    if (!atomic_load_explicit(&sg->filled, memory_order_acquire)) {
        uint8_t *fb = NULL;
        h5l_ckpt_t c = {0};
        rc = seg_reread(r, sg, &fb, &c, err);
        uint64_t fsize = 0; /* looked up at the first tick (r->fsize is the refreshing thread's) */
        for (uint64_t j = 0, ei = 0; !rc && j <= c.last - c.first; j++) {
            const h5l_tick_info_t *t = &c.ticks[j].info;
            if (ei < c.neager && c.eager[ei] == t->tick) {
                ei++;
                continue;
            }
            if (!(rc = tick_check(r, t, &fsize, err))) tickrec_set(&r->ticks[t->tick - 1], t, TX_LAZY);
        }
        if (!rc) atomic_store_explicit(&sg->filled, 1, memory_order_release);
        h5l_ckpt_clear(&c);
        free(fb);
    }
    pthread_mutex_unlock(&r->seg_mu);
    return rc;
}

/* The checkpointed segment holding tick t, or NULL (t after them). */
static ckseg_t *ckseg_of(const h5l_reader_t *r, uint64_t t)
{
    if (t > r->ck_last || !r->nsegs) return NULL;
    size_t lo = 0, hi = r->nsegs; /* the first whose last tick is >= t */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->segs[mid].last < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return &r->segs[lo < r->nsegs ? lo : r->nsegs - 1];
}

/* *out: tick t's record (1 <= t <= r->nticks), its segment filled first if
 * it is checkpointed. 0, or seg_fill's error. Under the read lock. */
static int tick_rec(h5l_reader_t *r, uint64_t t, const tickrec_t **out, h5l_err_t *err)
{
    *out = NULL;
    ckseg_t *sg = ckseg_of(r, t);
    if (sg) {
        if (!atomic_load_explicit(&sg->filled, memory_order_acquire)) {
            int rc = seg_fill(r, sg, err);
            if (rc) return rc;
        }
    }
    *out = &r->ticks[t - 1];
    return H5L_OK;
}

static tickx_t tx_of(const h5l_reader_t *r, uint64_t tick)
{
    tickx_t x;
    x.nranks = r->ticks[tick - 1].nranks;
    x.rstart = r->pool + r->ticks[tick - 1].tx;
    x.segbase = x.rstart + x.nranks + 1;
    x.sums = x.segbase + x.nranks + 1;
    return x;
}

typedef h5l_rec_t *(*newrec_fn)(void *ctx, uint32_t nboxes, uint32_t ndims);
static h5l_rec_t *index_rec(void *ctx, uint32_t nboxes, uint32_t ndims)
{
    return h5l_index_new_rec(ctx, nboxes, ndims);
}

/* The view of tick `tick`'s rank offsets and checksums, decoding its table
 * first if it is lazy. Under the read lock. */
static int tick_x(h5l_reader_t *r, uint64_t tick, tickx_t *x, h5l_err_t *err)
{
    const tickrec_t *tr;
    int trc = tick_rec(r, tick, &tr, err);
    if (trc) return trc;
    if (tr->tx != TX_LAZY) {
        *x = tx_of(r, tick);
        return H5L_OK;
    }
    const lztick_t *l;
    int rc = lazy_get(r, tick, &l, err);
    if (!rc) *x = l->x;
    return rc;
}

static int load_table(h5l_reader_t *r, const h5l_tick_info_t *t, const uint8_t *tab, tickx_t *x, uint64_t maxsums,
                      h5l_rec_t ***pend, size_t *cap_pend, size_t *npend, newrec_fn newrec, void *rctx, h5l_err_t *err)
{
    size_t pos = 0;
    uint64_t total = 0, seg = (uint64_t)1 << r->seglog, nsums = 0;
    x->rstart[0] = t->data_off;
    for (uint32_t rank = 0; rank < t->nranks; rank++) {
        h5l_block_t blk;
        pos = (pos + 7) & ~(size_t)7;
        if (pos > t->table_size || t->table_size - pos < H5L_BLOCK_LEN)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record table ends before the block of rank %u",
                               r->path, (unsigned long long)t->tick, rank);
        h5l_block_decode(tab + pos, &blk);
        if (blk.payload > t->table_size - pos - H5L_BLOCK_LEN)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record block of rank %u runs past its table", r->path,
                               (unsigned long long)t->tick, rank);
        if (h5l_block_sum(tab + pos, r->seed, t->tick, rank) != blk.checksum)
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record block of rank %u fails its checksum", r->path,
                               (unsigned long long)t->tick, rank);
        if (blk.size > t->data_off + t->data_size - x->rstart[rank])
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u claims more data than the tick has", r->path,
                               (unsigned long long)t->tick, rank);
        x->rstart[rank + 1] = x->rstart[rank] + blk.size;
        x->segbase[rank] = nsums;
        uint64_t nseg = (blk.size + seg - 1) / seg;
        const uint8_t *pl = tab + pos + H5L_BLOCK_LEN;
        h5l_cur_t c = h5l_cur(pl, blk.payload);
        uint64_t off = x->rstart[rank];
        for (uint64_t i = 0; i < blk.nrec; i++) {
            uint32_t objid, nboxes;
            if (h5l_rec_head_decode(&c, &objid, &nboxes) || objid >= r->schema.nobjs ||
                r->schema.objs[objid].kind != H5L_OBJ_VAR || r->schema.objs[objid].tick > t->tick || nboxes == 0)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu is malformed", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            uint32_t nd = r->schema.objs[objid].ndims;
            /* every varint takes a byte: bound the boxes by what is left */
            if (nd == 0 ? nboxes != 1 : nboxes > (c.len - c.pos) / (2 * (uint64_t)nd))
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu runs past its block", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            /* every read visits every box of every record it meets */
            if (nboxes > H5L_REC_MAXBOXES)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu has %u boxes (at most %u)",
                                   r->path, (unsigned long long)t->tick, rank, (unsigned long long)i, nboxes,
                                   H5L_REC_MAXBOXES);
            if (*npend == t->nrecords)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: more records than announced", r->path,
                                   (unsigned long long)t->tick);
            if (*npend == *cap_pend) { /* grown as records are met, not as announced */
                size_t cap = *cap_pend ? *cap_pend * 2 : 256;
                if (cap > t->nrecords) cap = (size_t)t->nrecords;
                h5l_rec_t **p = realloc(*pend, cap * sizeof *p);
                if (!p) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory loading records", r->path);
                *pend = p;
                *cap_pend = cap;
            }
            h5l_rec_t *rec = newrec(rctx, nboxes, nd);
            if (!rec) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory loading records", r->path);
            rec->tick = t->tick;
            rec->rank = rank;
            rec->order = i;
            rec->objid = objid;
            for (size_t j = 0; j < (size_t)nboxes * 2 * nd; j++) rec->boxes[j] = h5l_cur_varint(&c);
            if (c.bad)
                return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u record %llu runs past its block", r->path,
                                   (unsigned long long)t->tick, rank, (unsigned long long)i);
            int rc = check_rec(r, t, rec, err);
            if (rc) return rc;
            if (rec->size > x->rstart[rank + 1] - off)
                return h5l_err_set(err, H5L_ECORRUPT,
                                   "%s: tick %llu: rank %u records need more data than the rank wrote", r->path,
                                   (unsigned long long)t->tick, rank);
            rec->offset = off;
            off += rec->size;
            (*pend)[(*npend)++] = rec;
        }
        if (off != x->rstart[rank + 1])
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u records do not account for its data", r->path,
                               (unsigned long long)t->tick, rank);
        if (c.len - c.pos != nseg * 8 || nseg > maxsums - nsums) /* the second cannot be, but x ends there */
            return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: rank %u block has %zu bytes for %llu data checksums",
                               r->path, (unsigned long long)t->tick, rank, c.len - c.pos, (unsigned long long)nseg);
        for (uint64_t j = 0; j < nseg; j++) x->sums[nsums + j] = h5l_get_le64(c.p + c.pos + 8 * j);
        nsums += nseg;
        total += blk.nrec;
        pos += H5L_BLOCK_LEN + blk.payload;
    }
    x->segbase[t->nranks] = nsums;
    if (total != t->nrecords || ((pos + 7) & ~(size_t)7) != t->table_size ||
        x->rstart[t->nranks] != t->data_off + t->data_size)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: record table disagrees with its journal entry", r->path,
                           (unsigned long long)t->tick);
    return H5L_OK;
}

/* Does [off, off + len) of fd lie over a hole, by at least 64 bytes? 1
 * and *at = where, or 0 (also when the file system cannot tell: then the
 * bytes are read and checked as usual). Looks at a few holes at most. */
static int table_hole(int fd, uint64_t off, uint64_t len, uint64_t *at)
{
    uint64_t end = off + len, pos = off;
    for (int i = 0; i < 16 && pos < end; i++) {
        off_t h = lseek(fd, (off_t)pos, SEEK_HOLE);
        if (h < 0 || (uint64_t)h >= end) return 0;
        off_t d = lseek(fd, h, SEEK_DATA);
        uint64_t hend = d < 0 ? end : (uint64_t)d; /* ENXIO: a hole to the end of the file */
        if (hend > end) hend = end;
        if (hend - (uint64_t)h >= 64) {
            *at = (uint64_t)h;
            return 1;
        }
        pos = hend;
    }
    return 0;
}

/* The record table of tick t (inside the file, sizes checked): *p points
 * at it, in the table window or in *own (the caller frees it). A long log
 * of small ticks has its tables a few hundred bytes apart: one pread of the
 * window serves hundreds of ticks instead of one pread each. Called under
 * refresh_mu only (the window is the refresh's). */
static int table_bytes(h5l_reader_t *r, const h5l_tick_info_t *t, const uint8_t **p, uint8_t **own, h5l_err_t *err)
{
    uint64_t off = t->table_off, n = t->table_size;
    *own = NULL;
    if (off >= r->twin_off && n <= r->twin_len && off - r->twin_off <= r->twin_len - n) {
        *p = r->twin + (off - r->twin_off);
        return H5L_OK;
    }
    int win = t->data_size + n < TWIN_TICK;
    size_t want = win ? TWIN : (size_t)n;
    if (win && r->fsize - off < want) want = (size_t)(r->fsize - off); /* the file holds [off, off + n) */
    uint8_t *b;
    if (win) {
        if (!r->twin && !(r->twin = malloc(TWIN))) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        r->twin_len = 0;
        b = r->twin;
    } else if (!(b = *own = malloc(n ? (size_t)n : 1))) {
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    }
    size_t got;
    h5l_err_t e2 = {0};
    if (h5l_fd_read(r->fd, b, want, off, &got, r->path, &e2) || got < n) {
        free(*own);
        *own = NULL;
        return h5l_err_set(err, e2.code ? H5L_EIO : H5L_ECORRUPT, "%s: tick %llu: cannot read record table: %s",
                           r->path, (unsigned long long)t->tick, e2.code ? e2.msg : "the file ends inside it");
    }
    if (win) {
        r->twin_off = off;
        r->twin_len = got;
    }
    *p = b;
    return H5L_OK;
}

/* The checks of a tick's TICK payload fields against the file (the HDF5
 * file's size, as seen in *fsize, looked up again only when a tick points
 * past it: one fstat per tick was a third of opening a long log) and
 * against each other. */
static int tick_check(const h5l_reader_t *r, const h5l_tick_info_t *tp, uint64_t *fsize_seen, h5l_err_t *err)
{
    const h5l_tick_info_t t = *tp;
    if (t.data_off + t.data_size > *fsize_seen || t.table_off + t.table_size > *fsize_seen)
        *fsize_seen = file_size(r->fd);
    uint64_t fsize = *fsize_seen;
    if (t.data_off + t.data_size > fsize || t.data_off + t.data_size < t.data_off ||
        t.table_off + t.table_size > fsize || t.table_off + t.table_size < t.table_off)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu points past the end of the file (%llu bytes)", r->path,
                           (unsigned long long)t.tick, (unsigned long long)fsize);
    if (t.table_size > TABLE_MAX)
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: tick %llu: record table of %llu bytes (this reader loads at most %llu)", r->path,
                           (unsigned long long)t.tick, (unsigned long long)t.table_size, (unsigned long long)TABLE_MAX);
    /* every rank has a block header, every record at least a few bytes of
     * table and one byte of data */
    if (t.nranks > t.table_size / H5L_BLOCK_LEN || t.nrecords > t.table_size / H5L_REC_MIN || t.nrecords > t.data_size)
        return h5l_err_set(err, H5L_ECORRUPT,
                           "%s: tick %llu: %u ranks and %llu records cannot fit %llu table bytes and %llu data bytes",
                           r->path, (unsigned long long)t.tick, t.nranks, (unsigned long long)t.nrecords,
                           (unsigned long long)t.table_size, (unsigned long long)t.data_size);
    return H5L_OK;
}

/* Load tick *tp (its TICK payload header decoded, its nops schema ops at
 * the cursor): check its fields, apply its ops, and decode, check and index
 * its record table (lazy 0); or leave the table to be decoded when a read
 * first needs it (lazy 1, lazy_get); or also leave its record in r->ticks
 * to its segment's fill (lazy 2: a checkpointed tick at open, seg_fill).
 * The tick becomes visible: r->nticks. */
static int load_tick_body(h5l_reader_t *r, const h5l_tick_info_t *tp, h5l_cur_t *cp, uint32_t nops, int lazy,
                          h5l_err_t *err)
{
    h5l_tick_info_t t = *tp;
    h5l_cur_t c = *cp;
    if (t.tick != r->nticks + 1 || t.nranks == 0)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu follows tick %zu", r->path, (unsigned long long)t.tick,
                           r->nticks);
    int crc = tick_check(r, &t, &r->fsize, err);
    if (crc) return crc;
    /* A sparse file can claim any size for nothing: a table over a hole
     * (bytes never written, read as zeros; a real table never has 64 zero
     * bytes in a row) is refused before it is allocated and read. */
    uint64_t hole;
    /* (a lazy tick's table is looked for holes when it is decoded) */
    /* Only a table that would cost an allocation worth avoiding is looked
     * for holes: SEEK_HOLE may walk the file from the table to the next
     * hole (tmpfs: page by page to the end), once per tick made opening a
     * long log quadratic. A smaller table over a hole is read, and its
     * zeros fail the block checksum. */
    if (!lazy && t.table_size >= HOLE_CHECK_MIN && table_hole(r->fd, t.table_off, t.table_size, &hole))
        return h5l_err_set(
            err, H5L_ECORRUPT,
            "%s: tick %llu: record table [%llu, +%llu) lies over a hole of the file at %llu (never written)", r->path,
            (unsigned long long)t.tick, (unsigned long long)t.table_off, (unsigned long long)t.table_size,
            (unsigned long long)hole);
    /* segment checksums: one per started segment of each rank, and 8 table
     * bytes each besides the ranks' block headers (data_size alone may be a
     * hole of terabytes) */
    uint64_t seg = (uint64_t)1 << r->seglog;
    uint64_t maxsums = t.data_size / seg + t.nranks;
    uint64_t tabsums = (t.table_size - (uint64_t)t.nranks * H5L_BLOCK_LEN) / 8;
    if (maxsums > tabsums) maxsums = tabsums;
    size_t xneed = 2 * ((size_t)t.nranks + 1) + (size_t)maxsums; /* pool entries at most */
    uint8_t *tab = NULL;
    const uint8_t *tabp = NULL;
    int trc = lazy ? H5L_OK : table_bytes(r, &t, &tabp, &tab, err);
    if (trc) return trc;
    if (lazy) xneed = 0;
    int rc = H5L_OK;
    if (!r->unshared) pthread_rwlock_wrlock(&r->lock);
    if (!lazy && (uint64_t)r->pool_len + xneed >= TX_LAZY) /* tickrec keeps pool offsets in 32 bits */
        rc = h5l_err_set(err, H5L_ENOMEM,
                         "%s: tick %llu: the reader's pool of offsets and checksums is full (2^32 entries)", r->path,
                         (unsigned long long)t.tick);
    if (!rc &&
        r->pool_cap - r->pool_len < xneed) { /* moved only under the write lock: views are taken under a read lock */
        size_t cap = r->pool_cap ? 2 * r->pool_cap : 4096;
        if (cap < r->pool_len + xneed) cap = r->pool_len + xneed;
        uint64_t *p = realloc(r->pool, cap * sizeof *p);
        if (p) {
            r->pool = p;
            r->pool_cap = cap;
        } else {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        }
    }
    tickx_t xv = {0}, *x = &xv;
    if (!rc && !lazy) {
        x->nranks = t.nranks;
        x->rstart = r->pool + r->pool_len;
        x->segbase = x->rstart + t.nranks + 1;
        x->sums = x->segbase + t.nranks + 1;
    }
    for (uint32_t i = 0; i < nops && !rc; i++) {
        h5l_op_t op;
        /* out of memory is no damage: the tick is loaded again later */
        int drc = h5l_op_decode(&c, &op);
        if (drc) {
            rc = drc == H5L_ENOMEM ? h5l_err_set(err, drc, "%s: tick %llu: out of memory", r->path,
                                                 (unsigned long long)t.tick)
                                   : h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: schema op %u is malformed",
                                                 r->path, (unsigned long long)t.tick, i);
            break;
        }
        h5l_err_t e2;
        rc = h5l_schema_apply(&r->schema, t.tick, &op, &e2);
        if (rc) {
            rc = h5l_err_set(err, rc == H5L_ENOMEM ? rc : H5L_ECORRUPT, "%s: tick %llu: %s", r->path,
                             (unsigned long long)t.tick, e2.msg);
        } else if (op.kind == H5L_OP_VAR) {
            rc = h5l_index_add_var(r->index, op.id, op.ndims, op.chunk);
            if (rc)
                h5l_err_set(err, rc, "%s: cannot index variable '%s'%s", r->path, op.name,
                            rc == H5L_ENOMEM ? ": out of memory" : "");
        }
        h5l_op_clear(&op);
    }
    if (!rc && c.pos != c.len)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: trailing bytes after ops", r->path,
                         (unsigned long long)t.tick);
    /* Check every record before indexing any, and undo the tick's schema ops
     * on failure: a tick that fails leaves neither records nor definitions. */
    size_t npend = 0;
    if (!rc && !lazy)
        rc = load_table(r, &t, tabp, x, maxsums, &r->pend, &r->cap_pend, &npend, index_rec, r->index, err);
    for (size_t i = 0; !rc && i < npend; i++)
        if ((rc = h5l_index_insert(r->index, r->pend[i])))
            rc = h5l_err_set(err, rc, "%s: cannot index record: %s", r->path, h5l_strerror(rc));
    if (r->cap_pend > 4096) { /* a big tick's room is not kept for the reader's life */
        free(r->pend);
        r->pend = NULL;
        r->cap_pend = 0;
    }
    if (rc) h5l_schema_rollback(&r->schema, t.tick);
    if (!rc && r->nticks == r->cap_ticks) {
        size_t cap = r->cap_ticks ? r->cap_ticks * 2 : 64;
        tickrec_t *ti = realloc(r->ticks, cap * sizeof *ti);
        if (ti) r->ticks = ti;
        if (!ti)
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        else
            r->cap_ticks = cap;
    }
    if (!rc) { /* the tick becomes visible here (lazy: its table decoded when first needed) */
        if (lazy < 2) tickrec_set(&r->ticks[r->nticks], &t, lazy ? TX_LAZY : (uint32_t)r->pool_len);
        if (lazy)
            r->lazy_nrec += t.nrecords;
        else
            r->pool_len += 2 * ((size_t)t.nranks + 1) + (size_t)x->segbase[t.nranks]; /* the sums it has */
        r->nticks++;
    }
    if (!r->unshared) pthread_rwlock_unlock(&r->lock);
    free(tab);
    *cp = c;
    return rc;
}

static int load_tick(h5l_reader_t *r, const uint8_t *payload, uint32_t len, h5l_err_t *err)
{
    h5l_cur_t c = h5l_cur(payload, len);
    h5l_tick_info_t t;
    uint32_t nops;
    if (h5l_tick_decode(&c, &t, &nops)) return h5l_err_set(err, H5L_ECORRUPT, "%s: tick record too short", r->path);
    return load_tick_body(r, &t, &c, nops, 0, err);
}

/* ---- lazily decoded tables of checkpointed ticks ---- */

#define LZBLK ((size_t)1 << 20)

static h5l_rec_t *lz_rec(void *ctx, uint32_t nboxes, uint32_t ndims)
{
    lztick_t *l = ctx;
    size_t n = (sizeof(h5l_rec_t) + (size_t)nboxes * ndims * 2 * sizeof(uint64_t) + 15) & ~(size_t)15;
    if (!l->blk || l->blk->cap - l->blk->used < n) {
        size_t cap = n > LZBLK ? n : LZBLK;
        if (!l->blk && n * l->hint < LZBLK) /* a small tick's first block is its size (one box a record) */
            cap = n * (l->hint ? l->hint : 1);
        lzblk_t *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = l->blk;
        b->used = 0;
        b->cap = cap;
        l->blk = b;
        l->bytes += sizeof *b + cap;
    }
    h5l_rec_t *rec = (h5l_rec_t *)(l->blk->mem + l->blk->used);
    l->blk->used += n;
    memset(rec, 0, sizeof *rec);
    rec->nboxes = nboxes;
    rec->ndims = ndims;
    rec->boxes = (uint64_t *)(rec + 1);
    return rec;
}

static void lz_free(lztick_t *l)
{
    if (!l) return;
    while (l->blk) {
        lzblk_t *n = l->blk->next;
        free(l->blk);
        l->blk = n;
    }
    free(l);
}

/* Decode and check the record table of lazy tick `tick` (every check an
 * eager load makes: format.md 4 and 4.1). Under the read lock and lazy_mu. */
static int lazy_load(h5l_reader_t *r, uint64_t tick, lztick_t **out, h5l_err_t *err)
{
    const tickrec_t *tr;
    int trc = tick_rec(r, tick, &tr, err);
    if (trc) return trc;
    const h5l_tick_info_t tv = tick_info_of(tr, tick), *t = &tv;
    uint64_t hole;
    if (t->table_size >= HOLE_CHECK_MIN && table_hole(r->fd, t->table_off, t->table_size, &hole))
        return h5l_err_set(
            err, H5L_ECORRUPT,
            "%s: tick %llu: record table [%llu, +%llu) lies over a hole of the file at %llu (never written)", r->path,
            (unsigned long long)t->tick, (unsigned long long)t->table_off, (unsigned long long)t->table_size,
            (unsigned long long)hole);
    uint64_t seg = (uint64_t)1 << r->seglog;
    uint64_t maxsums = t->data_size / seg + t->nranks;
    uint64_t tabsums = (t->table_size - (uint64_t)t->nranks * H5L_BLOCK_LEN) / 8;
    if (maxsums > tabsums) maxsums = tabsums;
    size_t xneed = 2 * ((size_t)t->nranks + 1) + (size_t)maxsums;
    uint8_t *tab = malloc(t->table_size ? (size_t)t->table_size : 1);
    lztick_t *l = calloc(1, sizeof *l + xneed * sizeof(uint64_t));
    if (!tab || !l) {
        free(tab);
        free(l);
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    }
    h5l_err_t e2 = {0};
    if (h5l_fd_read_all(r->fd, tab, (size_t)t->table_size, t->table_off, r->path, &e2)) {
        free(tab);
        free(l);
        return h5l_err_set(err, H5L_EIO, "%s: tick %llu: cannot read record table: %s", r->path,
                           (unsigned long long)t->tick, e2.msg);
    }
    l->hint = t->nrecords;
    l->bytes = sizeof *l + xneed * sizeof(uint64_t);
    l->x.nranks = t->nranks;
    l->x.rstart = l->arr;
    l->x.segbase = l->x.rstart + t->nranks + 1;
    l->x.sums = l->x.segbase + t->nranks + 1;
    h5l_rec_t **recs = NULL;
    size_t cap = 0, n = 0;
    int rc = load_table(r, t, tab, &l->x, maxsums, &recs, &cap, &n, lz_rec, l, err);
    free(tab);
    if (rc) {
        free(recs);
        lz_free(l);
        return rc;
    }
    l->recs = recs;
    l->nrec = n;
    l->bytes += cap * sizeof *recs;
    if (n > LZ_INDEX_MIN) {
        l->bytes += n * 64; /* the tick's own index: about this a record */
        if (!(l->idx = h5l_index_new())) rc = H5L_ENOMEM;
        for (size_t i = 0; !rc && i < n; i++) {
            const h5l_rec_t *rec = recs[i];
            if (!h5l_index_chunk_shape(l->idx, rec->objid))
                rc = h5l_index_add_var(l->idx, rec->objid, rec->ndims, h5l_index_chunk_shape(r->index, rec->objid));
        }
        for (size_t i = 0; !rc && i < n; i++) rc = h5l_index_insert(l->idx, recs[i]);
        if (rc) {
            h5l_index_free(l->idx);
            free(recs);
            lz_free(l);
            return h5l_err_set(err, rc, "%s: tick %llu: cannot index its records: %s", r->path,
                               (unsigned long long)tick, h5l_strerror(rc));
        }
    }
    *out = l;
    return H5L_OK;
}

static int lazy_get(h5l_reader_t *r, uint64_t tick, const lztick_t **out, h5l_err_t *err)
{
    size_t pg = (size_t)((tick - 1) / LZPAGE), at = (size_t)((tick - 1) % LZPAGE);
    lzslot_t *page = atomic_load_explicit(&r->lzdir[pg], memory_order_acquire);
    lztick_t *l = page ? atomic_load_explicit(&page[at], memory_order_acquire) : NULL;
    int rc = H5L_OK;
    if (!l) {
        pthread_mutex_lock(&r->lazy_mu);
        page = atomic_load_explicit(&r->lzdir[pg], memory_order_acquire);
        if (!page) {
            if ((page = calloc(LZPAGE, sizeof *page)))
                atomic_store_explicit(&r->lzdir[pg], page, memory_order_release);
            else
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        }
        l = page ? atomic_load_explicit(&page[at], memory_order_acquire) : NULL;
        if (page && !l && !(rc = lazy_load(r, tick, &l, err))) {
            atomic_fetch_add_explicit(&r->lazy_bytes, l->bytes, memory_order_relaxed);
            atomic_fetch_add_explicit(&r->lazy_loads, 1, memory_order_relaxed);
            atomic_store_explicit(&page[at], l, memory_order_release);
        }
        pthread_mutex_unlock(&r->lazy_mu);
    }
    if (l) /* its use, for eviction order (relaxed: an approximate LRU is enough) */
        atomic_store_explicit(&l->used, atomic_fetch_add_explicit(&r->lazy_clock, 1, memory_order_relaxed),
                              memory_order_relaxed);
    *out = l;
    return rc;
}

static void lz_drop(lztick_t *l)
{
    if (!l) return;
    free(l->recs);
    h5l_index_free(l->idx);
    lz_free(l);
}

/* The lazy clock when this thread's current read call began, for the
 * reader with that serial: lazy_trim keeps what the call used. */
static _Thread_local struct {
    uint64_t serial, mark;
} tl_read;

/* Take the read lock for a read call (its tables are kept by the trim at
 * its end, rd_unlock). */
static void rd_lock(h5l_reader_t *r)
{
    tl_read.serial = r->serial;
    tl_read.mark = atomic_load_explicit(&r->lazy_clock, memory_order_relaxed);
    pthread_rwlock_rdlock(&r->lock);
}

/* Free the least recently used decoded tables until they hold at most
 * half of lazy_max (a pass frees many, so passes are rare), if they hold
 * more than lazy_max. Takes the write lock only if it is free at once
 * (trywrlock): no reader is then inside a table, and a caller that still
 * holds a read lock, or a busy file, just leaves it to a later call.
 * Oldest first by a histogram of last uses over 256 buckets: two passes
 * over the directory, no sort. */
static void lazy_trim(h5l_reader_t *r)
{
    if (atomic_load_explicit(&r->lazy_bytes, memory_order_relaxed) <= r->lazy_max) return;
    /* the tables this thread's read call used are kept whatever their
     * age: the next read (the next chunk of the same rows) needs them
     * again, and trimming them made a finalize that read one chunk at a
     * time decode every table once per chunk (hours, not seconds) */
    uint64_t keep = tl_read.serial == r->serial ? tl_read.mark : UINT64_MAX;
    if (pthread_rwlock_trywrlock(&r->lock)) return;
    size_t npg = (size_t)((r->ck_last + LZPAGE - 1) / LZPAGE);
    uint64_t lo = UINT64_MAX, hi = 0, held = atomic_load(&r->lazy_bytes);
    for (size_t pg = 0; r->lzdir && pg < npg; pg++) {
        lzslot_t *page = atomic_load(&r->lzdir[pg]);
        for (size_t i = 0; page && i < LZPAGE; i++) {
            lztick_t *l = atomic_load(&page[i]);
            if (!l) continue;
            uint64_t u = atomic_load_explicit(&l->used, memory_order_relaxed);
            if (u < lo) lo = u;
            if (u > hi) hi = u;
        }
    }
    uint64_t bucket[256] = {0}, span = hi >= lo ? (hi - lo) / 256 + 1 : 1;
    for (int pass = 0; pass < 2 && hi >= lo; pass++) {
        uint64_t cut = 0; /* pass 1: free tables whose bucket is below cut */
        if (pass) {
            uint64_t need = held - r->lazy_max / 2, sum = 0; /* (from the tables it may drop) */
            while (cut < 256 && sum < need) sum += bucket[cut++];
        }
        for (size_t pg = 0; pg < npg; pg++) {
            lzslot_t *page = atomic_load(&r->lzdir[pg]);
            size_t left = 0;
            for (size_t i = 0; page && i < LZPAGE; i++) {
                lztick_t *l = atomic_load(&page[i]);
                if (!l) continue;
                uint64_t u = atomic_load_explicit(&l->used, memory_order_relaxed), b = (u - lo) / span;
                if (!pass) {
                    if (u < keep) bucket[b] += l->bytes;
                } else if (b < cut && u < keep) {
                    atomic_store(&page[i], NULL);
                    atomic_fetch_sub(&r->lazy_bytes, l->bytes);
                    atomic_fetch_add(&r->lazy_evicted, 1);
                    lz_drop(l);
                } else {
                    left++;
                }
            }
            if (pass && page && !left) { /* a page of nothing */
                atomic_store(&r->lzdir[pg], NULL);
                free((void *)page);
            }
        }
    }
    pthread_rwlock_unlock(&r->lock);
}

/* Release a read lock taken by one of the read calls, and keep the
 * decoded tables within lazy_max. */
static void rd_unlock(h5l_reader_t *r)
{
    pthread_rwlock_unlock(&r->lock);
    lazy_trim(r);
}

static void lazy_free_all(h5l_reader_t *r)
{
    for (size_t pg = 0; r->lzdir && pg < (r->ck_last + LZPAGE - 1) / LZPAGE; pg++) {
        lzslot_t *page = atomic_load(&r->lzdir[pg]);
        for (size_t i = 0; page && i < LZPAGE; i++) lz_drop(atomic_load(&page[i]));
        free((void *)page);
    }
    free((void *)r->lzdir);
    r->lzdir = NULL;
    h5l_ckmap_free(r->ckmap);
    r->ckmap = NULL;
    r->ck_last = r->lazy_nrec = 0;
    atomic_store(&r->lazy_bytes, 0);
    free(r->segs);
    r->segs = NULL;
    r->nsegs = 0;
}

/* Forget everything loaded: back to a reader that has read only the
 * journal header. 0 or H5L_ENOMEM. */
static int reset_load(h5l_reader_t *r)
{
    lazy_free_all(r);
    h5l_schema_free(&r->schema);
    h5l_index_free(r->index);
    r->index = h5l_index_new();
    r->nticks = 0;
    r->pool_len = 0;
    r->jpos = H5L_JHDR_LEN;
    return !r->index || h5l_schema_init(&r->schema) ? H5L_ENOMEM : H5L_OK;
}

/* Start from the journal's index checkpoints (docs/format.md 3.5): the
 * schema and ticks of every checkpointed segment from their compact
 * entries, eager ticks' tables indexed now, every other table decoded when
 * first needed; then the frames after the newest checkpoint are read as
 * usual. Anything that does not line up — and anything a tick's own checks
 * refuse — and the reader starts over and reads the whole journal, so a
 * checkpoint never changes an answer. 0, or H5L_ENOMEM. */
/* Every chunk entry of checkpoint c names a variable defined by its last
 * tick, with that variable's rank, and a chunk inside the variable's
 * shape then (format.md 3.5): the chunk map and the skeletons index by
 * them. Checksums do not prove it (a crafted file, a writer bug): one that
 * does not fit makes the reader read the whole journal instead. Called
 * after the segment's ticks are applied to the schema. */
static int ck_chunks_fit(const h5l_reader_t *r, const h5l_ckpt_t *c)
{
    const h5l_schema_t *s = &r->schema;
    uint64_t nblk[H5L_MAX_DIMS];
    uint32_t cur = UINT32_MAX; /* entries come sorted by variable: its grid once */
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *k = &c->chunks[i];
        if (k->objid != cur) {
            if (k->objid >= s->nobjs) return 0;
            const h5l_obj_t *o = &s->objs[k->objid];
            if (o->kind != H5L_OBJ_VAR || o->tick > c->last || o->ndims != k->nd) return 0;
            for (uint32_t d = 0; d < o->ndims; d++) {
                uint64_t len = h5l_schema_dimlen(s, o->dimids[d], c->last);
                nblk[d] = len && o->chunk[d] ? (len - 1) / o->chunk[d] + 1 : 0;
            }
            cur = k->objid;
        }
        if (k->nd != s->objs[cur].ndims) return 0;
        for (uint32_t d = 0; d < k->nd; d++)
            if (k->coord[d] >= nblk[d]) return 0;
    }
    return 1;
}

/* The chunk runs of a simple segment's summary fit the schema as
 * ck_chunks_fit's entries must (every chunk of a run inside the variable's
 * grid at the segment's last tick). */
static int ck_runs_fit(const h5l_reader_t *r, const h5l_cksum_t *sm, uint64_t last)
{
    const h5l_schema_t *s = &r->schema;
    for (size_t i = 0; i < sm->ncr; i++) {
        const h5l_ckchunk_run_t *k = &sm->cr[i];
        if (k->objid >= s->nobjs) return 0;
        const h5l_obj_t *o = &s->objs[k->objid];
        if (o->kind != H5L_OBJ_VAR || o->tick > last || o->ndims != k->nd) return 0;
        for (uint32_t d = 0; d < o->ndims; d++) {
            uint64_t len = h5l_schema_dimlen(s, o->dimids[d], last);
            uint64_t nblk = len && o->chunk[d] ? (len - 1) / o->chunk[d] + 1 : 0;
            if (k->coord[d] >= nblk || (d == 0 && k->cnt - 1 >= nblk - k->coord[d])) return 0;
        }
    }
    return 1;
}

/* A simple segment (format.md 3.5) from its summary alone: its dimension
 * runs, its record count, its chunk runs; its frame is read and decoded
 * when a call first needs one of its ticks (seg_fill, whose decoding also
 * checks the summary against the entries). 1, or 0: the reader then reads
 * the whole journal. */
static int apply_summary(h5l_reader_t *r, const h5l_cksum_t *sm, uint64_t first, uint64_t last)
{
    if (first != r->nticks + 1 || last > r->cap_ticks) return 0;
    for (size_t i = 0; i < sm->ndr; i++) {
        const h5l_ckdim_run_t *d = &sm->dr[i];
        if (h5l_schema_dimlen_run(&r->schema, d->dimid, d->tick, d->len, d->n, d->dt, d->dl, NULL)) return 0;
    }
    /* the last values, as of the last tick: exact from it on; a tick inside
     * the segment gets its own (h5l_reader_schema_at) */
    for (size_t i = 0; i < sm->nat; i++)
        if (h5l_schema_apply(&r->schema, last, &sm->at[i], NULL)) return 0;
    r->nticks = (size_t)last;
    r->lazy_nrec += sm->nrec;
    return r->no_map || (ck_runs_fit(r, sm, last) && h5l_ckmap_add_runs(r->ckmap, sm) == H5L_OK);
}

static int start_from_checkpoints(h5l_reader_t *r)
{
    uint64_t end = r->live ? file_size(r->jfd) : r->jlimit;
    h5l_ckpt_chain_t ch;
    int k = h5l_ckpt_chain_read(r->jfd, r->jbase, end, r->seed, r->scan.what, &ch);
    if (k != 1) return k == H5L_ENOMEM ? k : H5L_OK;
    uint64_t last = ch.last;
    int ok = (r->ckmap = h5l_ckmap_new()) != NULL &&
             (r->lzdir = calloc((size_t)((last + LZPAGE - 1) / LZPAGE), sizeof *r->lzdir)) != NULL;
    if (ok) r->ck_last = last;
    if (ok) { /* room for every checkpointed tick at once (pages untouched until a segment is filled) */
        tickrec_t *ti = realloc(r->ticks, (size_t)last * sizeof *ti);
        if (ti) r->ticks = ti;
        ok = ti != NULL;
        if (ok) r->cap_ticks = (size_t)last;
    }
    if (ok && (ok = (r->segs = calloc(ch.n ? ch.n : 1, sizeof *r->segs)) != NULL)) r->nsegs = ch.n;
    r->fsize = file_size(r->fd);
    h5l_err_t e = {0};
    uint8_t *fb = NULL; /* one segment read and decoded at a time */
    size_t fcap = 0;
    for (size_t i = 0; ok && i < ch.n; i++) {
        h5l_ckpt_t c = {0};
        h5l_cksum_t sm = {0};
        uint64_t avail = ch.lens[i] - H5L_FRAME_LEN - H5L_CKPT_HDR - 8 - ch.slen[i]; /* (frames_fixed: it fits) */
        if (ch.sum[i] && h5l_cksum_decode(ch.sum[i], ch.slen[i], ch.firsts[i], ch.lasts[i], avail, &sm) == H5L_OK &&
            sm.simple && (!sm.attrs || r->lazy_attrs)) { /* its summary is all the open needs */
            ok = apply_summary(r, &sm, ch.firsts[i], ch.lasts[i]);
            int attrs = sm.attrs;
            h5l_cksum_free(&sm);
            if (ok)
                r->segs[i] = (ckseg_t){.first = ch.firsts[i],
                                       .last = ch.lasts[i],
                                       .pos = ch.pos[i],
                                       .len = ch.lens[i],
                                       .summary = 1,
                                       .attrs = attrs,
                                       .slen = (uint32_t)ch.slen[i],
                                       .ssum = h5l_hash(ch.sum[i], ch.slen[i], r->seed)};
            continue;
        }
        h5l_cksum_free(&sm);
        if (fcap < ch.lens[i]) {
            free(fb);
            fcap = ch.lens[i];
            if (!(fb = malloc(fcap))) fcap = 0;
        }
        ok = fb && !h5l_fd_read_all(r->jfd, fb, ch.lens[i], r->jbase + ch.pos[i], r->scan.what, NULL) &&
             h5l_ckpt_decode(fb, ch.lens[i], r->seed, ch.pos[i], &c, r->scan.what, &e) == H5L_OK &&
             c.first == r->nticks + 1;
        size_t ei = 0;
        for (uint64_t j = 0; ok && j <= c.last - c.first; j++) {
            const h5l_ckpt_tick_t *t = &c.ticks[j];
            int eager = ei < c.neager && c.eager[ei] == t->info.tick;
            ei += eager;
            h5l_cur_t cur = h5l_cur(t->ops, t->opslen);
            ok = load_tick_body(r, &t->info, &cur, t->nops, eager ? 0 : 2, &e) == H5L_OK && cur.pos == cur.len;
        }
        if (ok) r->segs[i] = (ckseg_t){.first = c.first, .last = c.last, .pos = ch.pos[i], .len = ch.lens[i]};
        ok = ok && (r->no_map || (ck_chunks_fit(r, &c) && h5l_ckmap_add(r->ckmap, &c) == H5L_OK));
        h5l_ckpt_clear(&c);
    }
    free(fb);
    if (ok) { /* the journal goes on with the next tick, its CLOSE or its end */
        h5l_frame_t fr;
        int n = h5l_jscan_next(&r->scan, ch.next, end, &fr, &e);
        ok = n == 0 || (n == 1 && (fr.type == H5L_REC_CLOSE || (fr.type & H5L_REC_OPTIONAL) ||
                                   (fr.type == H5L_REC_TICK && fr.len >= 8 && h5l_get_le64(fr.payload) == last + 1)));
    }
    if (ok) {
        r->jpos = ch.next;
        h5l_ckmap_trim(r->ckmap);
    }
    h5l_ckpt_chain_free(&ch);
    return ok ? H5L_OK : reset_load(r);
}

int h5l_reader_refresh(h5l_reader_t *r, int *nnew, h5l_err_t *err)
{
    if (nnew) *nnew = 0;
    pthread_mutex_lock(&r->refresh_mu);
    int rc = H5L_OK;
    if (r->failed) {
        if (err) *err = r->ferr;
        rc = r->ferr.code;
        goto out;
    }
    if (r->closed) goto out;
    uint64_t end = r->live ? file_size(r->jfd) : r->jlimit;
    /* Every frame this refresh can load lies below `end`, so it was
     * committed, its table written, before any read below: the table
     * window may serve them. A window kept from an earlier refresh may
     * hold bytes read before a later tick's table was written. */
    r->twin_len = 0;
    if (r->live && r->scan.need && end < r->scan.need) goto out; /* a torn tail not grown enough: read nothing */
    for (;;) {
        h5l_frame_t fr;
        int k = h5l_jscan_next(&r->scan, r->jpos, end, &fr, err);
        if (k < 0) {
            rc = k;
            if (rc == H5L_ECORRUPT) r->damaged_tick = r->nticks + 1;
            break;
        }
        if (k == 0) break;
        uint16_t type = fr.type;
        if (r->closed) {
            rc = h5l_err_set(err, H5L_ECORRUPT, "%s: journal continues after its CLOSE record (offset %llu)",
                             r->scan.what, (unsigned long long)fr.pos);
            break;
        }
        if (type == H5L_REC_TICK) {
            rc = load_tick(r, fr.payload, fr.len, err);
            if (rc) {
                if (rc != H5L_ENOMEM && rc != H5L_EIO) r->damaged_tick = r->nticks + 1; /* (those: tried again) */
                break;
            }
            if (nnew) (*nnew)++;
        } else if (type == H5L_REC_CLOSE) {
            r->closed = 1;
        } else if (!(type & H5L_REC_OPTIONAL)) {
            rc = h5l_err_set(err, H5L_ECORRUPT, "%s: journal frame at offset %llu has unknown type %u", r->scan.what,
                             (unsigned long long)fr.pos, type);
            break;
        }
        r->jpos = fr.next;
    }
    if (!rc && !r->live && r->jpos != end)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal ends in an incomplete record", r->path);
    if (!rc && !r->live && !r->closed)
        rc = h5l_err_set(err, H5L_ECORRUPT, "%s: embedded journal has no CLOSE record", r->path);
    if (rc && rc != H5L_EIO && rc != H5L_ENOMEM) {
        r->failed = 1;
        if (err)
            r->ferr = *err;
        else
            h5l_err_set(&r->ferr, rc, "%s: %s", r->path, h5l_strerror(rc));
    }
out:
    pthread_mutex_unlock(&r->refresh_mu);
    return rc;
}

int h5l_reader_damage(h5l_reader_t *r, uint64_t *tick, h5l_err_t *err)
{
    pthread_mutex_lock(&r->refresh_mu);
    int rc = r->failed ? r->ferr.code : H5L_OK;
    if (rc && err) *err = r->ferr;
    if (tick) *tick = r->failed ? r->damaged_tick : 0;
    pthread_mutex_unlock(&r->refresh_mu);
    return rc;
}

uint64_t h5l_reader_ntick(h5l_reader_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    uint64_t n = r->nticks;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int h5l_reader_closed(h5l_reader_t *r)
{
    pthread_mutex_lock(&r->refresh_mu);
    int c = r->closed;
    pthread_mutex_unlock(&r->refresh_mu);
    return c;
}

int h5l_reader_live(h5l_reader_t *r) { return r->live; }
uint64_t h5l_reader_ckpt_last(h5l_reader_t *r) { return r->ck_last; }
void h5l_reader_ckpt_segments(h5l_reader_t *r, uint64_t *nseg, uint64_t *nsummary)
{
    uint64_t k = 0;
    for (size_t i = 0; i < r->nsegs; i++) k += r->segs[i].summary;
    *nseg = r->nsegs;
    *nsummary = k;
}

int h5l_reader_check_checkpoints(h5l_reader_t *r, void (*report)(void *ctx, const char *msg), void *ctx,
                                 uint64_t *found, uint64_t *bad, h5l_err_t *err)
{
    pthread_mutex_lock(&r->refresh_mu); /* the schema and tick count stay as they are */
    /* The journal up to where this reader read, not to the end of a live
     * file: a checkpoint the writer appended since covers ticks whose
     * schema and tables were never loaded, so it cannot be compared, and
     * counting it would pass it as verified. */
    h5l_ckv_in_t in = {r->jfd, r->jbase, r->jpos, r->live, r->fd, r->seed, r->scan.what, &r->schema, r->nticks};
    h5l_ckv_out_t out;
    int rc = h5l_ckv_check(&in, report, ctx, &out, err);
    pthread_mutex_unlock(&r->refresh_mu);
    if (found) *found = out.found;
    if (bad) *bad = out.bad;
    return rc;
}
const uint8_t *h5l_reader_id(h5l_reader_t *r) { return r->id; }
const char *h5l_reader_path(h5l_reader_t *r) { return r->path; }

uint64_t h5l_reader_journal_pos(h5l_reader_t *r)
{
    pthread_mutex_lock(&r->refresh_mu);
    uint64_t p = r->jpos;
    pthread_mutex_unlock(&r->refresh_mu);
    return p;
}

uint64_t h5l_reader_nrecords(h5l_reader_t *r)
{
    pthread_rwlock_rdlock(&r->lock);
    uint64_t n = h5l_index_nrecords(r->index) + r->lazy_nrec;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

int h5l_reader_tick_info(h5l_reader_t *r, uint64_t t, h5l_tick_info_t *out)
{
    pthread_rwlock_rdlock(&r->lock);
    int rc = H5L_ENOTFOUND;
    if (t >= 1 && t <= r->nticks) {
        const tickrec_t *tr;
        rc = tick_rec(r, t, &tr, NULL);
        if (!rc) *out = tick_info_of(tr, t);
    }
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

void h5l_reader_rdlock(h5l_reader_t *r) { rd_lock(r); }
void h5l_reader_unlock(h5l_reader_t *r) { rd_unlock(r); }
const h5l_schema_t *h5l_reader_schema(h5l_reader_t *r) { return &r->schema; }

/* The lazy attribute segment holding tick t strictly inside, or NULL. */
static const ckseg_t *attr_seg_of(const h5l_reader_t *r, uint64_t t)
{
    const ckseg_t *sg = ckseg_of(r, t);
    return sg && sg->attrs && t >= sg->first && t < sg->last ? sg : NULL;
}

int h5l_reader_attrs_exact(h5l_reader_t *r, uint64_t tick) { return attr_seg_of(r, tick) == NULL; }

/* A view (h5l_schema_view) of the schema as of tick, inside the lazy
 * attribute segment sg: the versions set before it, then its ATTR ops of
 * ticks first..tick, read from its checkpoint frame (read, verified and
 * decoded again: it must be the frame whose summary the open applied). */
static int attrs_view(h5l_reader_t *r, const ckseg_t *sg, uint64_t tick, h5l_schema_t *v, h5l_err_t *err)
{
    uint8_t *fb = NULL;
    h5l_ckpt_t c = {0};
    h5l_err_t e = {0};
    int rc = seg_reread(r, sg, &fb, &c, err);
    if (!rc && h5l_schema_view(v, &r->schema, sg->first - 1))
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    for (uint64_t j = 0; !rc && j <= tick - sg->first; j++) {
        const h5l_ckpt_tick_t *t = &c.ticks[j];
        h5l_cur_t cur = h5l_cur(t->ops, t->opslen);
        for (uint32_t k = 0; !rc && k < t->nops; k++) {
            h5l_op_t op;
            int drc = h5l_op_decode(&cur, &op), arc = H5L_OK; /* (a failed decode freed what it took) */
            if (!drc && op.kind == H5L_OP_ATTR) arc = h5l_schema_apply(v, t->info.tick, &op, &e);
            if (!drc) h5l_op_clear(&op);
            if (drc == H5L_ENOMEM || arc == H5L_ENOMEM)
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            else if (drc || arc) /* (the open applied the same ops' last values: a writer bug or damage) */
                rc = h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu: %s", r->scan.what,
                                 (unsigned long long)t->info.tick, drc ? "malformed schema op" : e.msg);
        }
    }
    if (rc && v->base) h5l_schema_free(v);
    h5l_ckpt_clear(&c);
    free(fb);
    return rc;
}

int h5l_reader_schema_at(h5l_reader_t *r, uint64_t tick, const h5l_schema_t **out, h5l_err_t *err)
{
    *out = &r->schema;
    const ckseg_t *sg = attr_seg_of(r, tick);
    if (!sg) return H5L_OK;
    h5l_schema_t *v = malloc(sizeof *v);
    if (!v) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    memset(v, 0, sizeof *v);
    int rc = attrs_view(r, sg, tick, v, err);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return H5L_OK;
}

void h5l_reader_schema_release(h5l_reader_t *r, const h5l_schema_t *s)
{
    if (!s || s == &r->schema) return;
    h5l_schema_t *v = (h5l_schema_t *)s; /* (made by h5l_reader_schema_at, owned by its caller) */
    h5l_schema_free(v);
    free(v);
}

void h5l_reader_stats(h5l_reader_t *r, uint64_t *bytes, uint64_t *records)
{
    if (bytes) *bytes = atomic_load(&r->stat_bytes);
    if (records) *records = atomic_load(&r->stat_records);
}

static void drop_seg(void *ctx, uint64_t off, uint64_t len)
{
    h5l_reader_t *r = ctx;
    if (posix_fadvise(r->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED) == 0) atomic_fetch_add(&r->stat_dropped, len);
}

uint64_t h5l_reader_dropped(h5l_reader_t *r) { return atomic_load(&r->stat_dropped); }

void h5l_reader_tables(h5l_reader_t *r, uint64_t *held, uint64_t *loads, uint64_t *evicted)
{
    if (held) *held = atomic_load(&r->lazy_bytes);
    if (loads) *loads = atomic_load(&r->lazy_loads);
    if (evicted) *evicted = atomic_load(&r->lazy_evicted);
}

/* Log bytes delivered to a caller (not metadata), for drop-behind: only
 * what the caller got counts, not the whole checksum segment read to
 * verify it. Counting the segment made a reader of a few bytes per segment
 * (chunks across a rank's row-major data) complete drop segments at its
 * first pass and drop pages the next chunk needed: 2.1 GB re-read from
 * disk to serve 16 MiB. */
static void count_delivered(h5l_reader_t *r, uint64_t off, uint64_t n)
{
    h5l_drop_t *d = atomic_load(&r->drop);
    if (d) h5l_drop_count(d, off, n, drop_seg, r);
}

/* Log bytes read for a caller and delivered whole: statistics and
 * drop-behind. */
static void count_read(h5l_reader_t *r, uint64_t off, uint64_t n)
{
    atomic_fetch_add(&r->stat_bytes, n);
    count_delivered(r, off, n);
}

void h5l_reader_dropbehind(h5l_reader_t *r)
{
    if (atomic_load(&r->drop)) return;
    h5l_drop_t *d = h5l_drop_new(), *none = NULL;
    if (d && !atomic_compare_exchange_strong(&r->drop, &none, d)) h5l_drop_free(d);
}

/* ---- verified reads of log data ------------------------------------- */

/* A few verified segments per thread, so consecutive small reads of one
 * segment (a column, a reply cut mid-segment) read and hash it once. Keyed
 * by the reader's serial number (never reused) and the segment's offset:
 * log bytes never change once committed. Freed when the thread ends. */
#define SEGC_N 4
typedef struct segent {
    uint64_t serial, off;
    size_t len, cap;
    uint8_t *data;
} segent_t;
typedef struct segcache {
    segent_t e[SEGC_N];
    unsigned next;
} segcache_t;

static pthread_key_t segc_key;
static pthread_once_t segc_once = PTHREAD_ONCE_INIT;

static void segc_free(void *p)
{
    segcache_t *c = p;
    for (int i = 0; i < SEGC_N; i++) free(c->e[i].data);
    free(c);
}
static void segc_init(void) { pthread_key_create(&segc_key, segc_free); }

static segcache_t *segc_get(void)
{
    pthread_once(&segc_once, segc_init);
    segcache_t *c = pthread_getspecific(segc_key);
    if (!c && (c = calloc(1, sizeof *c)) && pthread_setspecific(segc_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

static int seg_mismatch(h5l_reader_t *r, uint64_t tick, uint32_t rank, uint64_t off, uint64_t len, h5l_err_t *err)
{
    return h5l_err_set(err, H5L_ECORRUPT, "%s: tick %llu, rank %u: log data [%llu, %llu) fails its checksum", r->path,
                       (unsigned long long)tick, rank, (unsigned long long)off, (unsigned long long)(off + len));
}

/* Read exactly n log bytes at off: H5L_OK or H5L_EIO (a read error, or a
 * file truncated under us). */
static int seg_pread(h5l_reader_t *r, void *buf, size_t n, uint64_t off, h5l_err_t *err)
{
    size_t got;
    h5l_err_t e2;
    if (h5l_fd_read(r->fd, buf, n, off, &got, r->path, &e2))
        return h5l_err_set(err, H5L_EIO, "%s: reading log data at %llu: %s", r->path, (unsigned long long)off,
                           strerror(errno));
    if (got != n)
        return h5l_err_set(err, H5L_EIO, "%s: reading log data at %llu: file truncated", r->path,
                           (unsigned long long)off);
    return H5L_OK;
}

/* Segment j of (tick, rank) — absolute offset *off, length *len — and its
 * checksum. */
static uint64_t seg_of(const h5l_reader_t *r, const tickx_t *x, uint32_t rank, uint64_t j, uint64_t *off, uint64_t *len)
{
    uint64_t seg = (uint64_t)1 << r->seglog, rs = x->rstart[rank], re = x->rstart[rank + 1];
    *off = rs + j * seg;
    *len = re - *off < seg ? re - *off : seg;
    return x->sums[x->segbase[rank] + j];
}

/* Read n log bytes at absolute offset off, inside the data of (tick,
 * rank), into dst, verified by whole segments. Call with the read lock. */
static int log_read(h5l_reader_t *r, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err)
{
    if (n == 0) return H5L_OK;
    if (tick < 1 || tick > r->nticks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    tickx_t xv;
    const tickx_t *x = &xv;
    int xrc = tick_x(r, tick, &xv, err); /* (its segment's records filled first, if need be) */
    if (xrc) return xrc;
    if (rank >= x->nranks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    uint64_t rs = x->rstart[rank], re = x->rstart[rank + 1];
    if (off < rs || n > re - off)
        return h5l_err_set(err, H5L_EINVAL, "%s: read [%llu, +%zu) outside the data of tick %llu rank %u", r->path,
                           (unsigned long long)off, n, (unsigned long long)tick, rank);
    uint64_t seglog = r->seglog, end = off + n;
    uint64_t j = (off - rs) >> seglog, jlast = (end - 1 - rs) >> seglog;
    for (; j <= jlast; j++) {
        uint64_t so, sl;
        uint64_t sum = seg_of(r, x, rank, j, &so, &sl);
        if (so >= off && so + sl <= end) {
            /* whole segments inside the read: into place with one pread,
             * then hashed there */
            uint64_t k = j;
            uint64_t run = sl;
            while (k < jlast) {
                uint64_t o2, l2;
                seg_of(r, x, rank, k + 1, &o2, &l2);
                if (o2 + l2 > end) break;
                run += l2;
                k++;
            }
            int e = seg_pread(r, dst + (so - off), (size_t)run, so, err);
            if (e) return e;
            count_read(r, so, run);
            for (uint64_t q = j; q <= k; q++) {
                uint64_t o2, l2;
                uint64_t s2 = seg_of(r, x, rank, q, &o2, &l2);
                if (h5l_hash(dst + (o2 - off), (size_t)l2, h5l_seg_seed(r->seed, tick, rank, q)) != s2)
                    return seg_mismatch(r, tick, rank, o2, l2, err);
            }
            j = k;
            continue;
        }
        /* a segment the read only touches: through the cache */
        segcache_t *c = segc_get();
        segent_t *e = NULL;
        for (int i = 0; c && i < SEGC_N; i++)
            if (c->e[i].serial == r->serial && c->e[i].off == so && c->e[i].len == sl) e = &c->e[i];
        uint8_t *tmp = NULL;
        const uint8_t *src;
        if (e) {
            src = e->data;
        } else {
            uint8_t *buf;
            if (c) {
                e = &c->e[c->next++ % SEGC_N];
                if (e->cap < sl) {
                    uint8_t *d = realloc(e->data, (size_t)sl);
                    if (!d) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
                    e->data = d;
                    e->cap = (size_t)sl;
                }
                e->serial = 0; /* invalid until verified */
                buf = e->data;
            } else if (!(buf = tmp = malloc((size_t)sl))) {
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            }
            int ioe = seg_pread(r, buf, (size_t)sl, so, err);
            if (ioe) {
                free(tmp);
                return ioe;
            }
            atomic_fetch_add(&r->stat_bytes, sl);
            if (h5l_hash(buf, (size_t)sl, h5l_seg_seed(r->seed, tick, rank, j)) != sum) {
                free(tmp);
                return seg_mismatch(r, tick, rank, so, sl, err);
            }
            if (e) {
                e->serial = r->serial;
                e->off = so;
                e->len = (size_t)sl;
            }
            src = buf;
        }
        uint64_t a = so > off ? so : off, b = so + sl < end ? so + sl : end;
        memcpy(dst + (a - off), src + (a - so), (size_t)(b - a));
        count_delivered(r, a, b - a);
        free(tmp);
    }
    return H5L_OK;
}

int h5l_reader_pread(h5l_reader_t *r, uint64_t tick, uint32_t rank, void *buf, size_t n, uint64_t off, h5l_err_t *err)
{
    rd_lock(r);
    int rc = log_read(r, tick, rank, off, n, buf, err);
    rd_unlock(r);
    return rc;
}

int h5l_reader_verify(h5l_reader_t *r, uint64_t tick, uint64_t *bad, h5l_err_t *err)
{
    rd_lock(r);
    int rc = H5L_OK;
    *bad = 0;
    if (tick < 1 || tick > r->nticks) {
        rc = h5l_err_set(err, H5L_ENOTFOUND, "%s: tick %llu not loaded", r->path, (unsigned long long)tick);
        goto out;
    }
    tickx_t xv;
    const tickx_t *x = &xv;
    if ((rc = tick_x(r, tick, &xv, err))) goto out;
    size_t cap = (size_t)1 << r->seglog;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        goto out;
    }
    h5l_err_t first = {0};
    for (uint32_t rank = 0; rank < x->nranks && rc != H5L_EIO; rank++) {
        uint64_t nseg = x->segbase[rank + 1] - x->segbase[rank];
        for (uint64_t j = 0; j < nseg; j++) {
            uint64_t so, sl;
            uint64_t sum = seg_of(r, x, rank, j, &so, &sl);
            if ((rc = seg_pread(r, buf, (size_t)sl, so, err))) break;
            if (h5l_hash(buf, (size_t)sl, h5l_seg_seed(r->seed, tick, rank, j)) != sum) {
                if (!(*bad)++) seg_mismatch(r, tick, rank, so, sl, &first);
            }
        }
    }
    free(buf);
    if (!rc && *bad) {
        if (err) *err = first;
        rc = H5L_ECORRUPT;
    }
out:
    rd_unlock(r);
    return rc;
}

/* Room for chunk_list's answer when checkpointed ticks take part: the
 * caller's, one per call. */
typedef struct lzscr {
    uint64_t *ticks;
    size_t tcap;
    h5l_rec_t **p;
    size_t cap;
    h5l_index_scratch_t iscr; /* lookups in a lazy tick's own index */
} lzscr_t;

static void lzscr_free(lzscr_t *s)
{
    free(s->ticks);
    free(s->p);
    h5l_index_scratch_free(&s->iscr);
}

/* Does a box of rec touch index chunk coord (chunk shape ch)? */
static int rec_touches(const h5l_rec_t *rec, const uint64_t *coord, const uint64_t *ch)
{
    uint32_t nd = rec->ndims;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *s = rec->boxes + (size_t)k * 2 * nd, *c = s + nd;
        uint32_t d = 0;
        while (d < nd && s[d] / ch[d] <= coord[d] && (s[d] + c[d] - 1) / ch[d] >= coord[d]) d++;
        if (d == nd) return 1;
    }
    return 0;
}

static int seq_before(const h5l_rec_t *a, const h5l_rec_t *b)
{
    if (a->tick != b->tick) return a->tick < b->tick;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->order < b->order;
}

/* What the newest records of one chunk cover, met newest first: once
 * they cover the chunk's box (clipped to the shape at the tick read), the
 * records before them are hidden and a lookup stops there. One record box
 * over the whole box, or pieces that are pairwise disjoint and add up to
 * it (ranks writing their parts of a slab); overlapping or too many pieces
 * end the conclusions, except a later whole cover. */
#define COV_PIECES 8
typedef struct cov {
    uint32_t nd;
    uint64_t cs[H5L_MAX_DIMS], cc[H5L_MAX_DIMS]; /* the chunk's box at the tick */
    uint64_t need, got;                          /* its elements; the pieces' */
    size_t np;
    uint64_t ps[COV_PIECES][H5L_MAX_DIMS], pc[COV_PIECES][H5L_MAX_DIMS];
    int dead; /* pieces overlapped or were too many */
} cov_t;

/* The box of chunk coord (shape ch) of objid at tick. 0: nothing to cover
 * (an empty box, or no shape): the lookup then keeps every record. */
static int cov_init(cov_t *c, const h5l_reader_t *r, uint32_t objid, const uint64_t *coord, const uint64_t *ch,
                    uint64_t tick)
{
    uint64_t shape[H5L_MAX_DIMS];
    const h5l_obj_t *o = &r->schema.objs[objid];
    c->nd = o->ndims;
    c->np = 0;
    c->got = 0;
    c->dead = 0;
    if (!ch || h5l_schema_shape(&r->schema, objid, tick, shape)) return 0;
    for (uint32_t d = 0; d < c->nd; d++) {
        c->cs[d] = coord[d] * ch[d];
        if (c->cs[d] >= shape[d]) return 0;
        c->cc[d] = shape[d] - c->cs[d] < ch[d] ? shape[d] - c->cs[d] : ch[d];
    }
    c->need = h5l_box_nelem(c->nd, c->cc);
    return c->need > 0;
}

/* Add rec (older than every record added before); 1 if the chunk's box is
 * covered now. */
static int cov_add(cov_t *c, const h5l_rec_t *rec)
{
    if (rec->ndims != c->nd) return 0;
    for (uint32_t k = 0; k < rec->nboxes; k++) {
        const uint64_t *bs = rec->boxes + (size_t)k * 2 * c->nd, *bc = bs + c->nd;
        uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS], ys[H5L_MAX_DIMS], yc[H5L_MAX_DIMS];
        if (!h5l_box_intersect(c->nd, bs, bc, c->cs, c->cc, xs, xc)) continue;
        uint64_t e = h5l_box_nelem(c->nd, xc);
        if (e == c->need) return 1;
        if (c->dead) continue;
        for (size_t p = 0; p < c->np && !c->dead; p++)
            c->dead = h5l_box_intersect(c->nd, xs, xc, c->ps[p], c->pc[p], ys, yc);
        if (c->dead || c->np == COV_PIECES) {
            c->dead = 1;
            continue;
        }
        memcpy(c->ps[c->np], xs, c->nd * sizeof *xs);
        memcpy(c->pc[c->np++], xc, c->nd * sizeof *xc);
        c->got += e;
    }
    return !c->dead && c->got == c->need;
}

/* The records of ticks <= tick touching chunk coord of objid that can
 * still show, in sequence order: those of the index (ticks read at open:
 * after the checkpoints, and the checkpointed ticks that are eager) merged
 * with those of the checkpointed ticks the chunk map lists for it (their
 * tables decoded now if they were not yet), walking back from the newest
 * tick of either and stopping at the newest records that cover the chunk
 * (cov_t): a chunk every tick overwrites (a time stamp, a state slab) costs
 * its newest tick, not one record and one decoded table per tick of the
 * log. Under the read lock. */
static int chunk_list(h5l_reader_t *r, uint32_t objid, const uint64_t *coord, uint64_t tick, h5l_index_scratch_t *iscr,
                      lzscr_t *ls, h5l_rec_t *const **list, size_t *n, h5l_err_t *err)
{
    if (h5l_index_chunk(r->index, objid, coord, tick, iscr, list, n))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    const uint64_t *ch = h5l_index_chunk_shape(r->index, objid);
    cov_t cv;
    int cover = cov_init(&cv, r, objid, coord, ch, tick), done = 0;
    size_t nt = 0, e = *n; /* the index's records list[e..] are kept */
    if (r->ckmap && h5l_ckmap_ticks(r->ckmap, objid, coord, tick, &ls->ticks, &ls->tcap, &nt))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    size_t m = 0; /* lazy records kept, newest first in ls->p */
    for (size_t i = nt; !done && (i > 0 || e > 0);) {
        if (e > 0 && (i == 0 || (*list)[e - 1]->tick > ls->ticks[i - 1])) { /* the index's record is newer */
            e--;
            done = cover && cov_add(&cv, (*list)[e]);
            continue;
        }
        const lztick_t *l;
        int rc = lazy_get(r, ls->ticks[--i], &l, err);
        if (rc) return rc;
        h5l_rec_t *const *cand = l->recs;
        size_t nc = l->nrec;
        if (l->idx && h5l_index_chunk(l->idx, objid, coord, UINT64_MAX, &ls->iscr, &cand, &nc))
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        for (size_t j = nc; !done && j-- > 0;) {
            h5l_rec_t *rec = cand[j];
            if (rec->objid != objid || !rec_touches(rec, coord, ch)) continue;
            if (h5l_grow((void **)&ls->p, &ls->cap, m + 1, sizeof *ls->p))
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
            ls->p[m++] = rec;
            done = cover && cov_add(&cv, rec);
        }
    }
    if (done && e) { /* covered: the index's records before e are hidden (not covered: all show) */
        *list += e;
        *n -= e;
    }
    for (size_t i = 0; i < m / 2; i++) { /* into sequence order */
        h5l_rec_t *t = ls->p[i];
        ls->p[i] = ls->p[m - 1 - i];
        ls->p[m - 1 - i] = t;
    }
    if (!m) return H5L_OK; /* no lazy record touches the chunk: the list stays (and ls->p may be NULL) */
    size_t n0 = *n;
    if (h5l_grow((void **)&ls->p, &ls->cap, 2 * m + n0, sizeof *ls->p))
        return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
    h5l_rec_t *const *a = *list;
    h5l_rec_t **out = ls->p + m;
    size_t i = 0, j = 0, k = 0;
    while (i < m || j < n0) out[k++] = j == n0 || (i < m && seq_before(ls->p[i], a[j])) ? ls->p[i++] : a[j++];
    *list = out;
    *n = k;
    return H5L_OK;
}

/* Sequence order (tick, rank, order): the index's serials and a lazy
 * tick's records (which have none of the reader's serials) alike. */
static int cmp_rec_seq(const void *x, const void *y)
{
    const h5l_rec_t *a = *(h5l_rec_t *const *)x, *b = *(h5l_rec_t *const *)y;
    return seq_before(a, b) ? -1 : seq_before(b, a);
}

/* Sort records by sequence and drop repeats; the new count. */
static size_t uniq_recs(h5l_rec_t **all, size_t n)
{
    if (n < 2) return n;
    qsort(all, n, sizeof *all, cmp_rec_seq);
    size_t m = 1;
    for (size_t i = 1; i < n; i++)
        if (all[i] != all[m - 1]) all[m++] = all[i];
    return m;
}

/* The records of ticks <= tick that touch the index chunks [lo, hi] of
 * objid and can still show there (chunk_list), each once, in sequence
 * order, into *all (the caller's, grown here). Read lock held. */
static int box_records(h5l_reader_t *r, uint32_t objid, uint64_t tick, uint32_t nd, const uint64_t *lo,
                       const uint64_t *hi, h5l_index_scratch_t *iscr, lzscr_t *ls, h5l_rec_t ***all, size_t *cap,
                       size_t *nout, h5l_err_t *err)
{
    uint64_t cur[H5L_MAX_DIMS];
    memcpy(cur, lo, nd * sizeof *cur);
    size_t n = 0, kept = 0, chunks = 0;
    for (;;) {
        h5l_rec_t *const *list;
        size_t k;
        int rc = chunk_list(r, objid, cur, tick, iscr, ls, &list, &k, err);
        if (rc) return rc;
        chunks++;
        if (h5l_grow_raw((void **)all, cap, n + k + 1, sizeof **all))
            return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", r->path);
        if (k) memcpy(*all + n, list, k * sizeof *list);
        n += k;
        if (n > 4096 && n > 2 * kept) { /* the same records again and again: keep the list small */
            n = uniq_recs(*all, n);
            kept = n;
        }
        int d = (int)nd - 1;
        for (; d >= 0; d--) {
            if (++cur[d] <= hi[d]) break;
            cur[d] = lo[d];
        }
        if (d < 0) break;
    }
    *nout = chunks > 1 ? uniq_recs(*all, n) : n; /* one chunk's list is in order, each record once */
    return H5L_OK;
}

/* The transposition engine's view of the log (xfer.h): verified reads
 * (log_read) and each (tick, rank)'s data. Read lock held. */
static int xs_read(void *ctx, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err)
{
    return log_read(ctx, tick, rank, off, n, dst, err);
}

static int xs_range(void *ctx, uint64_t tick, uint32_t rank, uint64_t *s, uint64_t *e, h5l_err_t *err)
{
    h5l_reader_t *r = ctx;
    tickx_t x;
    int rc = tick_x(r, tick, &x, err);
    if (rc) return rc;
    if (rank >= x.nranks)
        return h5l_err_set(err, H5L_EBADID, "%s: no data of tick %llu rank %u", r->path, (unsigned long long)tick,
                           rank);
    *s = x.rstart[rank];
    *e = x.rstart[rank + 1];
    return H5L_OK;
}

/* Check a read of box (start, count) of objid at tick and find its index
 * chunks [lo, hi]. Read lock held. H5L_OK, or the error with err set;
 * *o NULL when the box is empty (nothing to do). */
static int read_check(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                      const h5l_obj_t **o, uint64_t *lo, uint64_t *hi, h5l_err_t *err)
{
    *o = NULL;
    if (tick > r->nticks)
        return h5l_err_set(err, H5L_ENOTFOUND, "%s: tick %llu not loaded (newest %zu)", r->path,
                           (unsigned long long)tick, r->nticks);
    if (objid >= r->schema.nobjs || r->schema.objs[objid].kind != H5L_OBJ_VAR || r->schema.objs[objid].tick > tick)
        return h5l_err_set(err, H5L_EBADID, "%s: no variable with id %u at tick %llu", r->path, objid,
                           (unsigned long long)tick);
    const h5l_obj_t *v = &r->schema.objs[objid];
    uint32_t nd = v->ndims;
    uint64_t shape[H5L_MAX_DIMS];
    h5l_schema_shape(&r->schema, objid, tick, shape);
    for (uint32_t d = 0; d < nd; d++)
        if (start[d] > shape[d] || count[d] > shape[d] - start[d])
            return h5l_err_set(err, H5L_ERANGE, "%s: read of '%s' outside its shape in dimension %u", r->path, v->path,
                               d);
    if (h5l_box_nelem(nd, count) == 0) return H5L_OK;
    const uint64_t *ch = h5l_index_chunk_shape(r->index, objid);
    for (uint32_t d = 0; d < nd; d++) {
        lo[d] = start[d] / ch[d];
        hi[d] = (start[d] + count[d] - 1) / ch[d];
    }
    *o = v;
    return H5L_OK;
}

/* Read (buf), or only plan the read (*bytes, with buf NULL): the records
 * of every index chunk the box touches, each once, in sequence order,
 * handed to the transposition engine (xfer.h), which reads each log
 * segment they need once and copies their pieces out. */
static int read_box(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                    void *buf, uint64_t *bytes, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    h5l_rec_t **all = NULL;
    size_t cap = 0, n = 0;
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS];
    rd_lock(r);
    int rc = read_check(r, tick, objid, start, count, &o, lo, hi, err);
    if (!rc && o) rc = box_records(r, objid, tick, o->ndims, lo, hi, &iscr, &ls, &all, &cap, &n, err);
    if (!rc && o) {
        h5l_xsrc_t src = {xs_read, xs_range, r, r->seglog, 0};
        h5l_xstats_t st = {0};
        if (buf)
            rc = h5l_xfer_read(&src, o->ndims, o->type.size, o->fill, all, n, start, count, buf, &st, err);
        else
            rc = h5l_xfer_cost(&src, o->ndims, o->type.size, all, n, start, count, bytes, err);
        atomic_fetch_add(&r->stat_records, st.pieces);
        size_t pl = strlen(r->path);
        if (rc && err && strncmp(err->msg, r->path, pl) != 0) { /* the engine's own reasons name no file */
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err->msg);
            h5l_err_set(err, rc, "%s: %s", r->path, m);
        }
    }
    rd_unlock(r);
    free(all);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc;
}

int h5l_reader_read(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                    void *buf, h5l_err_t *err)
{
    uint8_t dummy;
    return read_box(r, tick, objid, start, count, buf ? buf : &dummy, NULL, err);
}

int h5l_reader_read_cost(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                         uint64_t *bytes, h5l_err_t *err)
{
    *bytes = 0;
    return read_box(r, tick, objid, start, count, NULL, bytes, err);
}

/* One piece of a box for chunk_run: where it starts in the box (row-major
 * element), where in the log, and its elements. */
typedef struct rpiece {
    uint64_t bs, la, len;
} rpiece_t;

static int cmp_rpiece(const void *x, const void *y)
{
    const rpiece_t *a = x, *b = y;
    return (a->bs > b->bs) - (a->bs < b->bs);
}

typedef struct onerun {
    uint64_t n, src, dst;
} onerun_t;

static int one_run(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    onerun_t *c = ctx;
    if (c->n++ == 0) {
        c->src = src;
        c->dst = dst;
    }
    (void)n;
    return c->n > 1; /* a second run: not one */
}

/* Are the box's bytes one contiguous run of the log? Records are taken
 * newest first until their parts of the box add up to it (older ones are
 * then hidden: a band rewritten whole at a later tick); each record box's
 * part must be one run in the record and in the box, and the parts, in
 * the box's order, must follow each other in the log and fill the box
 * exactly (so no two overlap). The finalizer keeps such a chunk in place
 * (format.md 1.1): ranks writing the parts of one row in one tick lay them
 * side by side. */
#define RUN_PIECES 64
static void chunk_run(const h5l_obj_t *o, h5l_rec_t *const *list, size_t n, const uint64_t *start,
                      const uint64_t *count, h5l_chunk_info_t *out)
{
    uint32_t nd = o->ndims;
    size_t es = o->type.size, np = 0;
    uint64_t want = nd ? h5l_box_nelem(nd, count) : 1, got = 0;
    rpiece_t p[RUN_PIECES];
    for (size_t i = n; i-- > 0 && got < want;) { /* newest first */
        uint64_t boff = list[i]->offset;
        for (uint32_t k = 0; k < list[i]->nboxes; k++) {
            const uint64_t *bs = list[i]->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
            if (nd == 0 || h5l_box_intersect(nd, bs, bc, start, count, xs, xc)) {
                if (np == RUN_PIECES) return;
                onerun_t c = {0, 0, 0};
                if (nd && h5l_box_runs(nd, xs, xc, bs, bc, start, count, one_run, &c)) return;
                p[np++] = (rpiece_t){c.dst, boff + c.src * es, nd ? h5l_box_nelem(nd, xc) : 1};
                got += p[np - 1].len;
            }
            boff += h5l_box_nelem(nd, bc) * es;
        }
    }
    if (!np || got != want) return; /* (more: parts overlap; less: unwritten elements) */
    qsort(p, np, sizeof *p, cmp_rpiece);
    uint64_t at = 0;
    for (size_t i = 0; i < np; i++) {
        if (p[i].bs != at || (i && p[i].la != p[i - 1].la + p[i - 1].len * es)) return;
        at += p[i].len;
    }
    if (at != (nd ? h5l_box_nelem(nd, count) : 1)) return;
    out->run = 1;
    out->run_off = p[0].la;
}

int h5l_reader_box_run(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start, const uint64_t *count,
                       uint64_t *off, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    h5l_rec_t **all = NULL;
    size_t cap = 0, n = 0;
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS];
    rd_lock(r);
    int rc = read_check(r, tick, objid, start, count, &o, lo, hi, err), run = 0;
    if (!rc && o) rc = box_records(r, objid, tick, o->ndims, lo, hi, &iscr, &ls, &all, &cap, &n, err);
    if (!rc && o && n <= H5L_CHUNK_INFO_SCAN) {
        h5l_chunk_info_t ci = {0};
        chunk_run(o, all, n, start, count, &ci);
        run = ci.run;
        *off = ci.run_off;
    }
    rd_unlock(r);
    free(all);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc ? rc : run;
}

int h5l_reader_newest_box(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *point, uint64_t *start,
                          uint64_t *count, h5l_err_t *err)
{
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    const h5l_obj_t *o;
    uint64_t lo[H5L_MAX_DIMS], hi[H5L_MAX_DIMS], one[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < H5L_MAX_DIMS; d++) one[d] = 1;
    rd_lock(r);
    int rc = read_check(r, tick, objid, point, one, &o, lo, hi, err), found = 0;
    h5l_rec_t *const *list = NULL;
    size_t n = 0;
    if (!rc && o) rc = chunk_list(r, objid, lo, tick, &iscr, &ls, &list, &n, err);
    for (size_t i = n; !rc && !found && i-- > 0;) { /* the newest record, its last box, that holds the point */
        uint32_t nd = o->ndims;
        for (uint32_t k = list[i]->nboxes; !found && k-- > 0;) {
            const uint64_t *bs = list[i]->boxes + (size_t)k * 2 * nd, *bc = bs + nd;
            uint32_t d = 0;
            while (d < nd && bs[d] <= point[d] && point[d] - bs[d] < bc[d]) d++;
            if (d == nd) {
                memcpy(start, bs, nd * sizeof *start);
                memcpy(count, bc, nd * sizeof *count);
                found = 1;
            }
        }
    }
    rd_unlock(r);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc ? rc : found;
}

/* Count runs of a copy: 1 means the box is one contiguous run of the record. */
static int count_run(void *ctx, uint64_t src, uint64_t dst, uint64_t n)
{
    (void)dst;
    (void)n;
    uint64_t *c = ctx;
    if (c[0]++ == 0) c[1] = src;
    return c[0] > 1; /* stop at the second run */
}

/* Index chunks not listed by the chunk map (those it lists come from it). */
typedef struct unlisted {
    h5l_reader_t *r;
    uint32_t objid;
    uint64_t tick;
    h5l_chunk_fn fn;
    void *ctx;
    uint64_t *buf;
    size_t cap;
} unlisted_t;

static int unlisted_fn(void *vctx, const uint64_t *coord)
{
    unlisted_t *u = vctx;
    size_t n;
    if (h5l_ckmap_ticks(u->r->ckmap, u->objid, coord, u->tick, &u->buf, &u->cap, &n)) return H5L_ENOMEM;
    return n ? 0 : u->fn(u->ctx, coord);
}

typedef struct one_run {
    h5l_chunk_run_fn fn;
    void *ctx;
} one_run_t;

static int one_run_fn(void *vctx, const uint64_t *coord)
{
    one_run_t *o = vctx;
    return o->fn(o->ctx, coord, 1);
}

int h5l_reader_chunk_runs(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_run_fn fn, void *ctx)
{
    one_run_t o = {fn, ctx};
    if (!r->ckmap) return h5l_index_chunks(r->index, objid, tick, one_run_fn, &o);
    int rc = h5l_ckmap_chunk_runs(r->ckmap, objid, tick, fn, ctx);
    if (rc) return rc;
    unlisted_t u = {r, objid, tick, one_run_fn, &o, NULL, 0};
    rc = h5l_index_chunks(r->index, objid, tick, unlisted_fn, &u);
    free(u.buf);
    return rc;
}

/* h5l_reader_chunks is h5l_reader_chunk_runs with each run's chunks
 * handed over one by one (nd: the variable's rank, for the copy). */
typedef struct each_chunk {
    h5l_chunk_fn fn;
    void *ctx;
    uint32_t nd;
} each_chunk_t;

static int each_chunk_fn(void *vctx, const uint64_t *coord, uint64_t n)
{
    each_chunk_t *x = vctx;
    if (n == 1 || !x->nd) return x->fn(x->ctx, coord);
    uint64_t c[H5L_MAX_DIMS];
    memcpy(c, coord, x->nd * sizeof *c);
    for (uint64_t i = 0; i < n; i++) {
        c[0] = coord[0] + i;
        int rc = x->fn(x->ctx, c);
        if (rc) return rc;
    }
    return 0;
}

int h5l_reader_chunks(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_fn fn, void *ctx)
{
    each_chunk_t x = {fn, ctx, objid < r->schema.nobjs ? r->schema.objs[objid].ndims : 0};
    return h5l_reader_chunk_runs(r, tick, objid, each_chunk_fn, &x);
}

int h5l_reader_chunk_count(h5l_reader_t *r, uint64_t tick, uint32_t objid, uint64_t *n)
{
    if (r->ckmap || tick != r->nticks) return H5L_ESTATE;
    int64_t c = h5l_index_nchunks(r->index, objid);
    if (c < 0) return H5L_ESTATE;
    *n = (uint64_t)c;
    return H5L_OK;
}

int h5l_reader_has_chunk(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord)
{
    return h5l_index_has_chunk(r->index, objid, coord, tick);
}

uint64_t h5l_reader_chunks_version(h5l_reader_t *r, uint64_t tick)
{
    uint64_t a = h5l_index_chunks_version(r->index, tick), b = r->ckmap ? h5l_ckmap_version(r->ckmap, tick) : 0;
    return a > b ? a : b;
}

int h5l_reader_chunk_info(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord, const uint64_t *start,
                          const uint64_t *count, h5l_chunk_info_t *out, h5l_err_t *err)
{
    memset(out, 0, sizeof *out);
    int rc = H5L_OK;
    h5l_index_scratch_t iscr = {0};
    lzscr_t ls = {0};
    rd_lock(r);
    if (tick > r->nticks || objid >= r->schema.nobjs || r->schema.objs[objid].kind != H5L_OBJ_VAR) {
        rc = h5l_err_set(err, H5L_EBADID, "%s: no variable %u at tick %llu", r->path, objid, (unsigned long long)tick);
        goto out;
    }
    const h5l_obj_t *o = &r->schema.objs[objid];
    h5l_rec_t *const *list;
    size_t n;
    if ((rc = chunk_list(r, objid, coord, tick, &iscr, &ls, &list, &n, err))) goto out;
    out->nrec = n;
    if (n == 0) goto out;
    const h5l_rec_t *last = list[n - 1];
    out->ver[0] = last->tick;
    out->ver[1] = last->rank;
    out->ver[2] = last->order;
    if (n <= H5L_CHUNK_INFO_SCAN) { /* disjoint iff the pieces add up to no more than the box */
        uint64_t sum = 0, xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
        for (size_t i = 0; i < n; i++)
            for (uint32_t k = 0; k < list[i]->nboxes; k++) {
                const uint64_t *b = list[i]->boxes + (size_t)k * 2 * o->ndims;
                if (h5l_box_intersect(o->ndims, b, b + o->ndims, start, count, xs, xc))
                    sum += h5l_box_nelem(o->ndims, xc);
            }
        out->disjoint = sum <= h5l_box_nelem(o->ndims, count);
    }
    if (n <= H5L_CHUNK_INFO_SCAN) chunk_run(o, list, n, start, count, out);
    if (last->nboxes != 1) goto out;
    const uint64_t *bs = last->boxes, *bc = bs + o->ndims;
    uint64_t xs[H5L_MAX_DIMS], xc[H5L_MAX_DIMS];
    if (!h5l_box_intersect(o->ndims, bs, bc, start, count, xs, xc)) goto out;
    for (uint32_t d = 0; d < o->ndims; d++)
        if (xs[d] != start[d] || xc[d] != count[d]) goto out; /* not covered */
    uint64_t runs[2] = {0, 0};
    h5l_box_runs(o->ndims, start, count, bs, bc, start, count, count_run, runs);
    if (runs[0] == 1) {
        out->direct = 1;
        out->direct_off = last->offset + runs[1] * o->type.size;
        out->direct_tick = last->tick;
        out->direct_rank = last->rank;
    }
out:
    rd_unlock(r);
    h5l_index_scratch_free(&iscr);
    lzscr_free(&ls);
    return rc;
}
