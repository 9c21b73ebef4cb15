/* writer.c — libh5log's MPI writer (h5log.h).
 *
 * Between flushes a rank only appends: h5l_put copies data into an arena
 * (h5l_iput remembers the caller's pointer) and grows the open record:
 * puts of one variable made one after another share a record, and a put
 * that extends the last box along one dimension grows that box
 * (docs/format.md 6). Records need no
 * offsets (they are laid in data order). Definitions are applied to a local
 * schema (the same checks readers make) and kept as pending ops.
 *
 * A flush is a fixed sequence of collectives (docs/format.md 6): one
 * Allgather agrees on sizes, ops (hash) and grown dimensions (MAX); every
 * rank places the tick in the newest log extent from the same totals (rank
 * 0 allocates the next extent with libhdf5 only when it does not fit, and
 * broadcasts where); each rank writes its data, checksumming each block of
 * it right before writing it (the hash brings the bytes into the cache the
 * write then copies them from: one pass over memory), and its record
 * block with independent MPI-IO writes and checks the transferred byte
 * counts (MPI-IO reports a full disk as a short count); a Reduce of the
 * statuses lets rank 0 append the TICK frame only once every write
 * succeeded: the commit point. Any failure before the commit commits nothing and leaves the
 * buffered writes in place, so the caller may flush again (the tick goes to
 * the same place).
 *
 * The arena is reserved address space (MAP_NORESERVE) of the buffer limit:
 * it costs memory only where written, never moves, and keeps its pages
 * between flushes so steady-state puts do not fault. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "h5log.h"
#include "anchor.h"
#include "h5log/box.h"
#include "ckbuild.h"
#include "ckchain.h"
#include "final.h"
#include "h5log/codec.h"
#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/h5type.h"
#include "journal.h"
#include "h5log/grow.h"
#include "schema.h"
#include "wlock.h"

#define DEFAULT_BUFFER_LIMIT ((size_t)1 << 30)
#define MPI_BLOCK_MAX ((size_t)1 << 30) /* bytes per hindexed block (int counts) */
/* data hashed, then written, per step (a multiple of the segment); the
 * test build (H5L_TEST_HOOKS) uses 64 KiB so the MPI tests' small ticks
 * take several blocks */
#ifdef H5L_TEST_HOOKS
#define WRITE_BLOCK ((uint64_t)1 << 16)
#else
#define WRITE_BLOCK ((uint64_t)1 << 25)
#endif
#define EXTENT_FIRST ((uint64_t)1 << 20) /* the first log extent */
/* pending bytes at which puts write early (h5l_opts_t.early_writes), and
 * the tick size from which the next extent is made ahead (make_ahead); the
 * test build uses 64 KiB for both so the MPI tests' small ticks do them */
#ifdef H5L_TEST_HOOKS
#define EARLY_STEP ((uint64_t)1 << 16)
#define AHEAD_MIN ((uint64_t)1 << 16)
#else
#define EARLY_STEP ((uint64_t)4 << 20)
#define AHEAD_MIN ((uint64_t)8 << 20)
#endif
#define EXTENT_SLACK                                                                                                   \
    ((uint64_t)32 << 20)         /* an extent is at most this much (or its first tick's size) larger
                                           * than its first tick needs: bounds the unused (sparse) tail */
#define NC_CHUNK_BYTES 4194304.0 /* netCDF-C's default chunk size (4 MiB) */
#define NC_CHUNK_1D_UNLIM 4096   /* netCDF-C's default for 1-D unlimited variables */

typedef struct piece {
    const uint8_t *p;
    size_t len;
} piece_t;

/* The record being built: puts of one variable made one after another
 * (format.md 6). Its boxes stay open to merging until another variable's
 * put, the box limit or the flush encodes it. */
typedef struct openrec {
    int varid; /* -1: none open */
    uint32_t ndims, nboxes;
    uint64_t *boxes; /* nboxes x (start[ndims], count[ndims]) */
    size_t cap;      /* uint64s */
} openrec_t;

enum { ST_OPEN = 0, ST_CLOSED = 1 };

struct h5l_file {
    MPI_Comm comm;
    int rank, size, state;
    char *path, *jpath;
    h5l_opts_t opts;
    char errmsg[512];
    h5l_schema_t schema;
    h5l_op_t *ops;
    size_t nops, cap_ops;
    piece_t *pieces;
    size_t npieces, cap_pieces;
    uint8_t **cells; /* a put laid out chunk by chunk (put_split): each chunk's part */
    size_t cap_cells;
    h5l_buf_t recs; /* H5L_BLOCK_LEN header placeholder, then records */
    openrec_t cur;  /* the record still open to merging */
    uint64_t nrec, data_bytes, nputs;
    /* checksums of this rank's data segments: computed by flush_write,
     * block by block just before each block is written */
    uint32_t seglog;
    h5l_hstream_t *hs; /* a segment that spans pieces */
    uint8_t *arena;
    size_t arena_used, arena_cap;
    uint64_t *want; /* per dimension: extent this rank's pending puts need */
    size_t cap_want;
    uint64_t tick; /* the last tick placed: committed, or sealed (below) */
    int sealed;    /* every rank: tick `tick` is written and its frame built,
                     * but appending the frame failed: it is not committed */
    uint8_t id[16];
    uint64_t seed;
    MPI_File fh;
    int fh_open;
    size_t ndims_committed; /* dimensions of the last published tick */
    uint64_t *gath;         /* flush_agree's gather: size x (AGG_N + dimensions) */
    size_t cap_gath;
    /* every rank: the newest log extent (format.md 1), from the same
     * agreed sizes on every rank; only rank 0 creates extents */
    uint64_t ext_off, ext_size, ext_used, ext_count;
    uint64_t ext_total; /* bytes of every extent so far */
    /* the next extent, made ahead by rank 0 after a flush (make_ahead):
     * its size, decided by every rank alike at publish (0: none wanted),
     * and its offset, rank 0's until the next flush_agree tells every
     * rank (0: none) */
    uint64_t ahead_size, ahead_off;
    /* Early writes (format.md 6): every rank, from the same agreed sizes.
     * sz_last: every rank's data bytes in the last tick that had data
     * (sz_known: there was one); sz_now: this flush's, kept at publish.
     * res_off: where the last flush reserved this tick's data (0: it
     * reserved nothing), for the sizes of sz_last; this rank's place there:
     * res_pre (bytes of the ranks before it) and res_len (its bytes). */
    uint64_t *sz_last, *sz_now;
    int sz_known;
    uint64_t res_off, res_pre, res_len;
    /* This rank: early is 1 while puts may write at the reserved place;
     * wt: bytes of this tick's data written there (whole segments), whose
     * checksums are wsums; f->pieces hold the data from wt on. */
    int early;
    uint64_t wt;
    uint64_t tail; /* == data_bytes: the bytes from wt on are written too
                    * (write_tail), their checksum at wsums[wt >> seglog] */
    uint8_t *wsums;
    size_t cap_wsums;
    /* rank 0 only */
    h5l_anchor_t *anc;
    int jfd;
    uint64_t joff;
    h5l_buf_t jcopy;  /* every journal byte, embedded at close */
    h5l_buf_t pend;   /* the sealed tick's frame, to be written again unchanged */
    h5l_ckpt_w_t *ck; /* index checkpoints (ckpt.c); NULL: none */
    char *lockpath;   /* the writer's lock file (wlock.c), removed by free_file */
    /* A file continued by h5l_open: jpre journal bytes (those before the
     * reopen) are in the sidecar but not in jcopy, read back at close;
     * anc_lazy: the anchors of ticks <= it are still to be made
     * (h5l_anchor_rebuild), 0 when made. */
    int reopened;
    uint64_t jpre, anc_lazy;
};

static _Thread_local char create_err[512];

static int fail(h5l_file_t *f, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(h5l_file_t *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f ? f->errmsg : create_err, sizeof create_err, fmt, ap);
    va_end(ap);
    return code;
}

/* What each rank tells every other one at the start of a flush, in one
 * MPI_Allgather (flush_agree): its data bytes, record block bytes, records,
 * the hash of its encoded definitions, a local failure flag, its number
 * of dimensions, whether it has early writes off and (rank 0) the offset of the
 * extent it made ahead, then the extent it wants along every dimension committed
 * before the flush. */
enum { AGG_N = 8 };

/* Room in f->gath for a flush with ndims committed dimensions. 0 or -1. */
static int gath_room(h5l_file_t *f, size_t ndims)
{
    return h5l_grow((void **)&f->gath, &f->cap_gath, (size_t)f->size * (AGG_N + ndims), sizeof *f->gath);
}

void h5l_opts_init(h5l_opts_t *o)
{
    o->buffer_limit = DEFAULT_BUFFER_LIMIT;
    o->sync = H5L_SYNC_NONE;
    o->check_collective = 1;
    o->no_finalize = 0;
    o->early_writes = 0;
    o->pad_ = 0;
    memset(o->reserved_, 0, sizeof o->reserved_);
}

const char *h5l_errmsg(const h5l_file_t *f) { return f ? f->errmsg : create_err; }
uint64_t h5l_ntick(const h5l_file_t *f) { return f ? f->tick - (uint64_t)f->sealed : 0; }
size_t h5l_buffered(const h5l_file_t *f) { return f ? f->arena_used : 0; }

/* ---- lookups (h5log.h): the writer's schema, committed and pending ---- */

static int copy_name(const char *s, char *buf, size_t cap)
{
    if (!buf || strlen(s) + 1 > cap) return H5L_ERANGE;
    memcpy(buf, s, strlen(s) + 1);
    return H5L_OK;
}

static const h5l_obj_t *inq_obj(const h5l_file_t *f, int id, int kind)
{
    if (!f || id < 0 || (size_t)id >= f->schema.nobjs) return NULL;
    const h5l_obj_t *o = &f->schema.objs[id];
    return (kind ? o->kind == kind : o->kind != 0) ? o : NULL;
}

int h5l_inq_dimid(const h5l_file_t *f, const char *name, int *dimid)
{
    if (!f || !name || !dimid) return H5L_EINVAL;
    long d = h5l_schema_find_dim(&f->schema, name);
    if (d < 0) return H5L_ENOTFOUND;
    *dimid = (int)d;
    return H5L_OK;
}

static int inq_path(const h5l_file_t *f, const char *path, int kind, int *id)
{
    if (!f || !path || !id) return H5L_EINVAL;
    long o = h5l_schema_find(&f->schema, path);
    if (o < 0 || f->schema.objs[o].kind != kind) return H5L_ENOTFOUND;
    *id = (int)o;
    return H5L_OK;
}

int h5l_inq_varid(const h5l_file_t *f, const char *path, int *varid) { return inq_path(f, path, H5L_OBJ_VAR, varid); }
int h5l_inq_grpid(const h5l_file_t *f, const char *path, int *grpid)
{
    if (path && !strcmp(path, "/") && grpid) {
        *grpid = H5L_GLOBAL;
        return f ? H5L_OK : H5L_EINVAL;
    }
    return inq_path(f, path, H5L_OBJ_GROUP, grpid);
}

int h5l_inq_dimlen(const h5l_file_t *f, int dimid, uint64_t *len)
{
    if (!f || !len) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    *len = h5l_schema_dimlen_now(&f->schema, (uint32_t)dimid);
    return H5L_OK;
}

int h5l_inq_unlimited(const h5l_file_t *f, int dimid, int *unlimited)
{
    if (!f || !unlimited) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    *unlimited = f->schema.dims[dimid].unlimited;
    return H5L_OK;
}

int h5l_inq_varndims(const h5l_file_t *f, int varid, int *ndims)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!ndims) return H5L_EINVAL;
    if (!o) return H5L_EBADID;
    *ndims = (int)o->ndims;
    return H5L_OK;
}

int h5l_inq_vardimid(const h5l_file_t *f, int varid, int *dimids)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!dimids) return H5L_EINVAL;
    if (!o) return H5L_EBADID;
    for (uint32_t d = 0; d < o->ndims; d++) dimids[d] = (int)o->dimids[d];
    return H5L_OK;
}

int h5l_inq_counts(const h5l_file_t *f, int *ndims, int *nobjs)
{
    if (!f) return H5L_EINVAL;
    if (ndims) *ndims = (int)f->schema.ndims;
    if (nobjs) *nobjs = (int)f->schema.nobjs;
    return H5L_OK;
}

int h5l_inq_dimname(const h5l_file_t *f, int dimid, char *buf, size_t cap)
{
    if (!f) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    return copy_name(f->schema.dims[dimid].name, buf, cap);
}

int h5l_inq_obj(const h5l_file_t *f, int objid, int *kind, char *buf, size_t cap)
{
    const h5l_obj_t *o = inq_obj(f, objid, 0);
    if (!o) return f ? H5L_EBADID : H5L_EINVAL;
    if (kind) *kind = o->kind;
    return buf ? copy_name(o->path, buf, cap) : H5L_OK;
}

int h5l_inq_var(const h5l_file_t *f, int varid, hid_t *type, int *chunked, uint64_t *chunk, void *fill,
                int *fill_mode)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!o) return f ? H5L_EBADID : H5L_EINVAL;
    if (type) {
        hid_t t = h5l_type_to_hid(o->type, 1);
        if (t < 0) return H5L_ETYPE;
        /* the predefined type of the same class, size, sign and order */
        hid_t p = H5I_INVALID_HID;
        hid_t cand[] = {H5T_STD_I8LE,  H5T_STD_I8BE,  H5T_STD_U8LE,  H5T_STD_U8BE,  H5T_STD_I16LE, H5T_STD_I16BE,
                        H5T_STD_U16LE, H5T_STD_U16BE, H5T_STD_I32LE, H5T_STD_I32BE, H5T_STD_U32LE, H5T_STD_U32BE,
                        H5T_STD_I64LE, H5T_STD_I64BE, H5T_STD_U64LE, H5T_STD_U64BE, H5T_IEEE_F32LE, H5T_IEEE_F32BE,
                        H5T_IEEE_F64LE, H5T_IEEE_F64BE};
        for (size_t i = 0; i < sizeof cand / sizeof *cand && p < 0; i++)
            if (H5Tequal(t, cand[i]) > 0) p = cand[i];
        H5Tclose(t);
        if (p < 0) return H5L_ETYPE;
        *type = p;
    }
    if (chunked) *chunked = o->chunked;
    if (chunk) memcpy(chunk, o->chunk, o->ndims * sizeof *chunk);
    if (fill) memcpy(fill, o->fill, o->type.size);
    if (fill_mode) *fill_mode = o->fill_mode;
    return H5L_OK;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void new_identity(uint8_t id[16])
{
    if (getrandom(id, 16, 0) == 16) return;
    uint64_t a = now_ns(), b = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
    h5l_put_le64(id, a);
    h5l_put_le64(id + 8, b ^ (uint64_t)(uintptr_t)id);
}

static void free_file(h5l_file_t *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nops; i++) h5l_op_clear(&f->ops[i]);
    free(f->ops);
    free(f->pieces);
    free(f->cur.boxes);
    h5l_hstream_free(f->hs);
    free(f->want);
    h5l_buf_free(&f->recs);
    h5l_buf_free(&f->jcopy);
    free(f->cells);
    h5l_buf_free(&f->pend);
    h5l_ckpt_w_free(f->ck);
    h5l_schema_free(&f->schema);
    if (f->arena) munmap(f->arena, f->arena_cap);
    if (f->jfd >= 0) close(f->jfd);
    h5l_anchor_abort(f->anc);
    free(f->gath);
    free(f->sz_last);
    free(f->sz_now);
    free(f->wsums);
    if (f->comm != MPI_COMM_NULL) MPI_Comm_free(&f->comm);
    h5l_wlock_drop(f->lockpath);
    free(f->path);
    free(f->jpath);
    free(f);
}

/* Rank 0's verdict, broadcast so every rank fails alike: the code, and the
 * message of the rank `from` that failed (rank 0's is in msg; another
 * rank's follows in a second broadcast from that rank, which every rank
 * knows to expect from the first — so a full disk seen by rank 3 reads
 * the same on every rank, reason included). */
typedef struct bstat {
    int64_t code;
    int64_t from;
    uint64_t v[2];
    char msg[512];
} bstat_t;

/* Wait for a non-blocking collective without holding a core: MPI_Test
 * for up to WAIT_SPIN_NS (ranks that arrive together finish here), then
 * sleep between tests, 50 us at first, doubling up to WAIT_SLEEP_MAX_NS.
 * A rank waiting in a blocking collective polls (OpenMPI yields the core
 * between polls only when it knows the node is oversubscribed, and a
 * yielding rank is still runnable): with ranks sharing cores with each
 * other or with other work, the waiting ranks took CPU from the rank they
 * were waiting for (4 ranks on 2 cores, pattern S: h5l_iput's CPU per run
 * doubled and its speed halved without yielding; docs/performance.md). The
 * price: up to WAIT_SLEEP_MAX_NS more latency for a wait that lasts past
 * the spin. An MPI error code. */
#define WAIT_SPIN_NS 50000L
#define WAIT_SLEEP_MAX_NS 400000L
static int coll_wait(MPI_Request *rq)
{
    int done = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > WAIT_SPIN_NS) break;
    }
    for (long ns = 50000L;; ns = ns * 2 > WAIT_SLEEP_MAX_NS ? WAIT_SLEEP_MAX_NS : ns * 2) {
        struct timespec d = {0, ns};
        nanosleep(&d, NULL);
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
    }
}

static int bcast_bytes(h5l_file_t *f, void *p, int n, int root)
{
    MPI_Request rq;
    int rc = MPI_Ibcast(p, n, MPI_BYTE, root, f->comm, &rq);
    return rc == MPI_SUCCESS ? coll_wait(&rq) : rc;
}

static int bcast_status(h5l_file_t *f, bstat_t *st)
{
    if (bcast_bytes(f, st, (int)sizeof *st, 0) != MPI_SUCCESS)
        return fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
    if (!st->code) return H5L_OK;
    if (st->from > 0 && st->from < f->size) {
        if (f->rank == st->from) snprintf(st->msg, sizeof st->msg, "%s", f->errmsg);
        if (bcast_bytes(f, st->msg, (int)sizeof st->msg, (int)st->from) != MPI_SUCCESS)
            return fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
    }
    st->msg[sizeof st->msg - 1] = 0;
    return fail(f, (int)st->code, "%s", st->msg);
}

/* Every rank's code to rank 0: on rank 0, *worst gets the most severe
 * (lowest) and *who the lowest rank that had it. Rank 0 then decides and
 * broadcasts (bcast_status with from = *who). Returns an MPI failure. */
static int reduce_status(h5l_file_t *f, int code, int *worst, int *who)
{
    int in[2] = {code, f->rank}, out[2] = {code, f->rank};
    MPI_Request rq;
    int mrc = MPI_Ireduce(in, out, 1, MPI_2INT, MPI_MINLOC, 0, f->comm, &rq);
    if (mrc == MPI_SUCCESS) mrc = coll_wait(&rq);
    if (mrc != MPI_SUCCESS) return fail(f, H5L_EMPI, "%s: MPI_Reduce failed", f->path);
    *worst = out[0];
    *who = out[1];
    return H5L_OK;
}

/* Every rank's local code; the most severe (lowest) wins everywhere. */
static int agree(h5l_file_t *f, int code)
{
    int all = code;
    if (MPI_Allreduce(&code, &all, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS)
        return fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    if (all && !code) fail(f, all, "%s: another rank failed: %s", f->path, h5l_strerror(all));
    return all;
}

/* What h5l_create and h5l_open share before the file is touched: f with
 * its communicator, buffers and write arena. Every rank agrees on the
 * outcome; on failure f is freed and create_err says why. */
static int file_new(const char *path, MPI_Comm comm, const h5l_opts_t *opts, const char *fn, h5l_file_t **out)
{
    if (!out) return fail(NULL, H5L_EINVAL, "%s: NULL output pointer", fn);
    *out = NULL;
    if (!path || !path[0]) return fail(NULL, H5L_EINVAL, "%s: empty path", fn);
    h5l_file_t *f = calloc(1, sizeof *f);
    /* every rank learns of a rank without f (no communicator of its own
     * yet: on the caller's), so none waits in a collective alone */
    int ok = f != NULL, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    if (!all) {
        free(f);
        return fail(NULL, H5L_ENOMEM, "%s: out of memory%s", path, ok ? " on another rank" : "");
    }
    f->jfd = -1;
    f->comm = MPI_COMM_NULL;
    if (opts)
        f->opts = *opts;
    else
        h5l_opts_init(&f->opts);
    int rc = H5L_OK;
    if (MPI_Comm_dup(comm, &f->comm) != MPI_SUCCESS) {
        free_file(f);
        return fail(NULL, H5L_EMPI, "%s: MPI_Comm_dup failed", path);
    }
    MPI_Comm_rank(f->comm, &f->rank);
    MPI_Comm_size(f->comm, &f->size);
    f->path = strdup(path);
    if (f->path && asprintf(&f->jpath, "%s%s", path, H5L_SIDECAR_SUFFIX) < 0) f->jpath = NULL;
    f->cur.varid = -1;
    f->seglog = H5L_SEGLOG_DEFAULT;
    f->hs = h5l_hstream_new();
    f->sz_last = calloc((size_t)f->size, sizeof *f->sz_last);
    f->sz_now = calloc((size_t)f->size, sizeof *f->sz_now);
    if (!f->path || !f->jpath || !f->hs || !f->sz_last || !f->sz_now || gath_room(f, 0) ||
        h5l_schema_init(&f->schema) || h5l_buf_reserve(&f->recs, H5L_BLOCK_LEN))
        rc = fail(f, H5L_ENOMEM, "%s: out of memory", path);
    f->recs.len = H5L_BLOCK_LEN;
    if (!rc && f->opts.buffer_limit) {
        f->arena = mmap(NULL, f->opts.buffer_limit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
        if (f->arena == MAP_FAILED) {
            f->arena = NULL;
            rc = fail(f, H5L_ENOMEM, "%s: cannot reserve a %zu-byte write buffer", path, f->opts.buffer_limit);
        } else {
            f->arena_cap = f->opts.buffer_limit;
            /* Transparent huge pages where the system allows them on
             * request (THP "madvise", Debian's default): the first touch
             * of a fresh 4 KiB page costs ~18 us on the VMs measured
             * (0.2 GB/s into fresh pages against 8 GB/s with 2 MiB pages,
             * bench_copy), which made h5l_put's copy of a flush's first
             * 32 MiB the slowest step of the writer. Advisory: ignored
             * where THP is off. The cost: memory is committed in 2 MiB
             * steps as the arena fills. */
            (void)madvise(f->arena, f->arena_cap, MADV_HUGEPAGE);
        }
    }
    rc = agree(f, rc);
    if (rc) {
        snprintf(create_err, sizeof create_err, "%s", f->errmsg);
        free_file(f);
        return rc;
    }
    *out = f;
    return H5L_OK;
}

/* The end of h5l_create and h5l_open: every rank opens the file with
 * MPI-IO; on failure (rc, or that) everything is undone and freed. */
static int file_ready(h5l_file_t *f, int rc, h5l_file_t **out)
{
    if (!rc) {
        f->seed = h5l_seed(f->id);
        /* read-write: a flush may move bytes written early (move_early) */
        int mrc = MPI_File_open(f->comm, f->path, MPI_MODE_RDWR, MPI_INFO_NULL, &f->fh);
        f->fh_open = mrc == MPI_SUCCESS;
        rc = agree(f, f->fh_open ? H5L_OK : fail(f, H5L_EMPI, "%s: MPI_File_open failed", f->path));
    }
    if (rc) {
        snprintf(create_err, sizeof create_err, "%s", f->errmsg);
        if (f->fh_open) MPI_File_close(&f->fh);
        if (f->rank == 0 && f->jfd >= 0 && !f->reopened) unlink(f->jpath);
        free_file(f);
        return rc;
    }
    *out = f;
    return H5L_OK;
}

int h5l_create(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **out)
{
    h5l_file_t *f;
    if (out) *out = NULL;
    int rc = file_new(path, comm, opts, "h5l_create", out ? &f : NULL);
    if (rc) return rc;
    bstat_t st = {0};
    if (f->rank == 0) {
        h5l_err_t e = {0};
        new_identity(f->id);
        /* one writer at a time (wlock.c), before anything is touched */
        int c = h5l_wlock_take(path, &f->lockpath, &e);
        /* sidecar first: a reader that sees the new user block finds it */
        if (!c) c = h5l_journal_create(f->jpath, f->id, now_ns(), f->seglog, &f->jfd, &f->jcopy, &e);
        f->joff = H5L_JHDR_LEN;
        if (!c) c = h5l_anchor_create(path, f->id, &f->anc, &e);
        if (!c) f->ck = h5l_ckpt_w_new(path, h5l_ckpt_every(), h5l_seed(f->id)); /* NULL: none */
        st.code = c;
        if (c) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        memcpy(st.v, f->id, 16);
    }
    rc = bcast_status(f, &st);
    if (!rc) memcpy(f->id, st.v, 16);
    return file_ready(f, rc, out);
}

/* ------------------------------------------------------------------ */
/* h5l_open: going on writing an existing file (docs/format.md 6.2)     */

/* The definitions of schema s as of tick, as ops that rebuild it: every
 * dimension at its current length (a DIM, then a DIMLEN for a grown
 * unlimited one), every group and variable in id order, and each
 * attribute's current value, attributes in the order their names were
 * first set (the canonical file's attribute order). Appended to b; *nops
 * counts them. The writer starts from these instead of the history: its
 * checks need only what is, and a snapshot costs the schema's size, not
 * the log's. */
typedef struct atpair {
    size_t first, last;
} atpair_t;
static const h5l_schema_t *at_sort_s;
static int at_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const h5l_attr_t *x = &at_sort_s->attrs[i], *y = &at_sort_s->attrs[j];
    if (x->objid != y->objid) return x->objid < y->objid ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return i < j ? -1 : i > j;
}
static int pair_cmp(const void *a, const void *b)
{
    const atpair_t *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int snapshot_ops(const h5l_schema_t *s, uint64_t tick, h5l_buf_t *b, uint32_t *nops, h5l_err_t *e)
{
    *nops = 0;
    for (size_t d = 0; d < s->ndims; d++) {
        const h5l_dim_t *dm = &s->dims[d];
        uint64_t len = h5l_schema_dimlen(s, (uint32_t)d, tick);
        h5l_op_t op = {.kind = H5L_OP_DIM, .id = (uint32_t)d, .name = dm->name};
        op.flags = dm->unlimited ? 1u : 0u;
        op.len = dm->unlimited ? 0 : len;
        h5l_op_encode(b, &op);
        ++*nops;
        if (dm->unlimited && len) {
            h5l_op_t g = {.kind = H5L_OP_DIMLEN, .id = (uint32_t)d, .len = len};
            h5l_op_encode(b, &g);
            ++*nops;
        }
    }
    for (size_t i = 1; i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        h5l_op_t op = {.id = (uint32_t)i, .name = o->path};
        if (o->kind == H5L_OBJ_GROUP) {
            op.kind = H5L_OP_GROUP;
        } else if (o->kind == H5L_OBJ_VAR) {
            op.kind = H5L_OP_VAR;
            op.type = o->type;
            op.flags = (o->chunked ? H5L_VAR_CHUNKED : 0) |
                       (o->fill_mode == H5L_FILL_USER ? H5L_VAR_FILL_USER
                        : o->fill_mode == H5L_FILL_NONE ? H5L_VAR_NOFILL
                                                        : 0);
            op.ndims = o->ndims;
            op.dimids = o->dimids;
            op.chunk = o->chunk;
            op.data = o->fill;
            op.data_len = h5l_type_size(o->type);
        } else {
            return h5l_err_set(e, H5L_ECORRUPT, "object %zu of the schema is undefined", i);
        }
        h5l_op_encode(b, &op);
        ++*nops;
    }
    size_t n = s->nattrs, *ix = malloc((n ? n : 1) * sizeof *ix);
    atpair_t *pr = malloc((n ? n : 1) * sizeof *pr);
    if (!ix || !pr) {
        free(ix);
        free(pr);
        return h5l_err_set(e, H5L_ENOMEM, "out of memory");
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++) ix[i] = i;
    at_sort_s = s;
    qsort(ix, n, sizeof *ix, at_cmp);
    for (size_t i = 0; i < n; i++) {
        const h5l_attr_t *a = &s->attrs[ix[i]];
        if (i && s->attrs[ix[i - 1]].objid == a->objid && !strcmp(s->attrs[ix[i - 1]].name, a->name)) {
            if (a->tick <= tick) pr[np - 1].last = ix[i]; /* a later version */
            continue;
        }
        pr[np++] = (atpair_t){ix[i], ix[i]};
    }
    qsort(pr, np, sizeof *pr, pair_cmp);
    for (size_t k = 0; k < np; k++) {
        const h5l_attr_t *a = &s->attrs[pr[k].last];
        if (a->tick > tick) continue;
        h5l_op_t op = {.kind = H5L_OP_ATTR, .id = a->objid, .name = a->name, .type = a->type, .len = a->n};
        op.data = a->value;
        op.data_len = (size_t)a->n * h5l_type_size(a->type);
        h5l_op_encode(b, &op);
        ++*nops;
    }
    free(ix);
    free(pr);
    return b->oom ? h5l_err_set(e, H5L_ENOMEM, "out of memory") : H5L_OK;
}

/* Copy n bytes at offset from of fd `in` to offset 0 of fd `out`: the
 * embedded journal into a new sidecar. copy_file_range lets the file
 * system do it without passing the bytes through us (server-side on NFS
 * 4.2, a reflink where supported); read/write where it cannot. */
static int copy_range(int in, uint64_t from, int out, uint64_t n, const char *what, h5l_err_t *e)
{
    loff_t io = (loff_t)from, oo = 0;
    uint64_t done = 0;
    while (done < n) {
        ssize_t k = copy_file_range(in, &io, out, &oo, (size_t)(n - done), 0);
        if (k > 0) {
            done += (uint64_t)k;
            continue;
        }
        if (k == 0) break;
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
            return h5l_err_set(e, H5L_EIO, "%s: copying the journal: %s", what, strerror(errno));
        break;
    }
    if (done == n) return H5L_OK;
    size_t cap = (size_t)1 << 20;
    uint8_t *b = malloc(cap);
    if (!b) return h5l_err_set(e, H5L_ENOMEM, "%s: out of memory", what);
    int rc = H5L_OK;
    while (!rc && done < n) {
        size_t k = n - done < cap ? (size_t)(n - done) : cap;
        rc = h5l_fd_read_all(in, b, k, from + done, what, e);
        if (!rc) rc = h5l_fd_write(out, b, k, done, what, e);
        done += k;
    }
    free(b);
    return rc;
}

/* Rank 0: the checkpoint chain goes on where the file's stops (ckpt.c):
 * the newest checkpoint, found from the end of the journal, and the TICK
 * frames after it (fewer than a segment) given to the builder again. No
 * chain and more ticks than a segment (checkpoints were off or broken):
 * none are made for the new ticks either. */
static void resume_ckpt(h5l_file_t *f, uint64_t ntick)
{
    f->ck = h5l_ckpt_w_new(f->path, h5l_ckpt_every(), f->seed);
    if (!f->ck) return;
    h5l_ckpt_chain_t ch;
    uint64_t from = H5L_JHDR_LEN, first = 1, prev = 0;
    int k = h5l_ckpt_chain_read(f->jfd, 0, f->joff, f->seed, f->jpath, &ch);
    if (k == 1) {
        from = ch.next;
        first = ch.last + 1;
        prev = ch.pos[ch.n - 1];
        h5l_ckpt_chain_free(&ch);
    } else if (ntick >= h5l_ckpt_every()) {
        h5l_ckpt_w_free(f->ck);
        f->ck = NULL;
        return;
    }
    h5l_ckpt_w_resume(f->ck, first, prev);
    h5l_jscan_t sc;
    h5l_jscan_init(&sc, f->jfd, NULL, 0, 0, f->seed, f->jpath);
    h5l_buf_t out = {0};
    int ok = 1;
    for (uint64_t pos = from; ok && pos < f->joff;) {
        h5l_frame_t fr;
        h5l_err_t e = {0};
        if (h5l_jscan_next(&sc, pos, f->joff, &fr, &e) != 1) {
            ok = 0;
            break;
        }
        if (fr.type == H5L_REC_TICK) {
            h5l_cur_t c = h5l_cur(fr.payload, fr.len);
            h5l_tick_info_t ti;
            uint32_t nops;
            ok = h5l_tick_decode(&c, &ti, &nops) == H5L_OK && fr.len >= H5L_TICK_LEN;
            if (ok)
                h5l_ckpt_w_tick(f->ck, &ti, nops, fr.payload + H5L_TICK_LEN, fr.len - H5L_TICK_LEN, fr.pos,
                                &f->schema, &out);
            ok = ok && out.len == 0; /* a checkpoint due here would have been written then */
        }
        pos = fr.next;
    }
    h5l_jscan_free(&sc);
    h5l_buf_free(&out);
    if (!ok) {
        h5l_ckpt_w_free(f->ck);
        f->ck = NULL;
    }
}

/* Rank 0's part of h5l_open, in the order that keeps the file readable
 * at every step (format.md 6.2): lock; read and check the journal (the
 * file is not touched if anything is wrong with it); the snapshot of the
 * schema into *ops; the sidecar made (a closed file: its embedded journal
 * copied, without the CLOSE frame) or cut after its last complete frame
 * (a killed writer's); the user block marked live; a new HDF5 file
 * written over the old one's metadata (h5l_anchor_recreate: the log stays
 * where it is). *info: the tick, the journal's SEGLOG, and the ops count. */
static int open_rank0(h5l_file_t *f, h5l_buf_t *ops, uint64_t info[3], h5l_err_t *e)
{
    int c = h5l_wlock_take(f->path, &f->lockpath, e);
    if (c) return c;
    f->reopened = 1; /* from here on a failure never removes the file's sidecar (file_ready) */
    int live_now = 0;
    h5l_reader_t *r = NULL;
    if ((c = h5l_reader_open_flags(f->path, H5L_READER_NO_CHUNK_MAP, &r, e))) return c;
    uint64_t bad = 0;
    h5l_err_t de = {0};
    if (h5l_reader_damage(r, &bad, &de)) {
        c = h5l_err_set(e, H5L_ECORRUPT,
                        "%s: not opened, its journal is damaged at tick %llu (the file is left as it was; "
                        "h5logreplay --tick %llu copies the newest intact tick): %s",
                        f->path, (unsigned long long)bad, (unsigned long long)(bad ? bad - 1 : 0), de.msg);
        h5l_reader_close(r);
        return c;
    }
    uint64_t n = h5l_reader_ntick(r), jpos = h5l_reader_journal_pos(r);
    int live = h5l_reader_live(r), closed = h5l_reader_closed(r);
    memcpy(f->id, h5l_reader_id(r), 16);
    f->seed = h5l_seed(f->id);
    /* the lowest log byte: tick 1's (extents only follow it, format.md 1);
     * a killed writer's file is looked at tick by tick, as h5logrecover does */
    uint64_t from = UINT64_MAX;
    for (uint64_t t = 1; t <= n && (t == 1 || live); t++) {
        h5l_tick_info_t ti;
        if (h5l_reader_tick_info(r, t, &ti)) continue;
        if (ti.data_size && ti.data_off < from) from = ti.data_off;
        if (ti.table_size && ti.table_off < from) from = ti.table_off;
    }
    h5l_reader_rdlock(r);
    uint32_t nops = 0;
    c = snapshot_ops(h5l_reader_schema(r), n, ops, &nops, e);
    h5l_reader_unlock(r);
    h5l_reader_close(r);
    if (c) return h5l_err_set(e, c, "%s: not opened: %s", f->path, e->msg);
    /* the user block and where the journal is */
    int fd = open(f->path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(e, H5L_EIO, "%s: %s", f->path, strerror(errno));
    uint8_t ub8[H5L_UB_LEN], jh[H5L_JHDR_LEN], fh[H5L_FRAME_LEN];
    h5l_ub_t ub;
    struct stat sb;
    c = h5l_fd_read_all(fd, ub8, sizeof ub8, 0, f->path, e);
    if (!c) c = h5l_ub_decode(ub8, &ub, f->path, e);
    if (!c && fstat(fd, &sb) != 0) c = h5l_err_set(e, H5L_EIO, "%s: %s", f->path, strerror(errno));
    int embedded = !c && (ub.flags & H5L_UB_CLOSED);
    int src = -1;
    if (!c && embedded) {
        src = fd;
    } else if (!c) {
        src = open(f->jpath, O_RDWR | O_CLOEXEC);
        if (src < 0) c = h5l_err_set(e, H5L_EIO, "%s: its journal %s: %s", f->path, f->jpath, strerror(errno));
    }
    uint64_t base = embedded ? ub.jr_off : 0;
    h5l_jhdr_t hd;
    if (!c) c = h5l_fd_read_all(src, jh, sizeof jh, base, f->path, e);
    if (!c) c = h5l_jhdr_decode(jh, &hd, f->path, e);
    /* the journal goes on after its last complete frame; a CLOSE frame
     * (the last one, format.md 3.4) is left out: the file is open again */
    uint64_t p = jpos;
    if (!c && closed) {
        h5l_frame_hdr_t h;
        p = jpos - h5l_frame_size(16);
        if (jpos < H5L_JHDR_LEN + h5l_frame_size(16) || h5l_fd_read_all(src, fh, sizeof fh, base + p, f->path, e) ||
            h5l_frame_hdr_decode(fh, f->seed, &h) != H5L_FRAME_OK || h.type != H5L_REC_CLOSE)
            c = h5l_err_set(e, H5L_ECORRUPT, "%s: not opened: its journal does not end with its CLOSE frame", f->path);
    }
    if (!c && !embedded) { /* a killed writer's sidecar: cut a torn tail off */
        if (ftruncate(src, (off_t)p) != 0)
            c = h5l_err_set(e, H5L_EIO, "%s: cutting its journal at %llu: %s", f->jpath, (unsigned long long)p,
                            strerror(errno));
        f->jfd = src;
        src = -1;
    } else if (!c) { /* a closed file: its journal back into a sidecar */
        f->jfd = open(f->jpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (f->jfd < 0)
            c = h5l_err_set(e, H5L_EIO, "%s: cannot create journal: %s", f->jpath, strerror(errno));
        if (!c) c = copy_range(fd, base, f->jfd, p, f->jpath, e);
        if (!c && f->opts.sync == H5L_SYNC_TICK && fsync(f->jfd) != 0)
            c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->jpath, strerror(errno));
        src = -1;
        if (!c) { /* live again: readers now take the sidecar */
            uint8_t was[H5L_UB_LEN];
            memcpy(was, ub8, sizeof was);
            ub.jr_off = ub.jr_len = 0;
            ub.flags = 0;
            h5l_ub_encode(&ub, ub8);
            c = h5l_fd_write(fd, ub8 + 32, 32, 32, f->path, e);
            if (c) /* put the closed bytes back: the embedded journal stays the truth */
                (void)h5l_fd_write(fd, was + 32, 32, 32, NULL, NULL);
            else if (f->opts.sync == H5L_SYNC_TICK && fsync(fd) != 0)
                c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->path, strerror(errno));
            live_now = !c;
        }
        if (c && !live_now) unlink(f->jpath); /* a closed file: the sidecar was ours */
    }
    if (src >= 0 && src != fd) close(src);
    close(fd);
    if (c) return c;
    f->joff = f->jpre = p;
    f->seglog = hd.seglog;
    /* the HDF5 file made anew over the old metadata; the log's bytes stay
     * the storage of /_h5log/log */
    c = h5l_anchor_recreate(f->path, f->id, from == UINT64_MAX ? 0 : from, from == UINT64_MAX ? 0 : (uint64_t)sb.st_size,
                            &f->anc, e);
    if (c)
        return h5l_err_set(e, c,
                           "%s; the file is left live with ticks 1..%llu in its journal %s (h5l_open or "
                           "h5logrecover again)",
                           e->msg, (unsigned long long)n, f->jpath);
    info[0] = n;
    info[1] = hd.seglog;
    info[2] = nops;
    return H5L_OK;
}

int h5l_open(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **out)
{
    h5l_file_t *f;
    if (out) *out = NULL;
    int rc = file_new(path, comm, opts, "h5l_open", out ? &f : NULL);
    if (rc) return rc;
    bstat_t st = {0};
    h5l_buf_t ops = {0};
    uint64_t info[4] = {0};
    if (f->rank == 0) {
        h5l_err_t e = {0};
        st.code = open_rank0(f, &ops, info, &e);
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        memcpy(st.v, f->id, 16);
        info[3] = ops.len;
    }
    rc = bcast_status(f, &st);
    if (!rc) {
        memcpy(f->id, st.v, 16);
        f->seed = h5l_seed(f->id);
        if (bcast_bytes(f, info, (int)sizeof info, 0) != MPI_SUCCESS)
            rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", path);
    }
    /* every rank starts from rank 0's snapshot of the schema */
    if (!rc) {
        int mem = f->rank && h5l_buf_reserve(&ops, (size_t)info[3] + 1);
        rc = agree(f, mem ? fail(f, H5L_ENOMEM, "%s: out of memory", path) : H5L_OK);
    }
    for (uint64_t at = 0; !rc && at < info[3]; at += (uint64_t)1 << 30) {
        int k = (int)(info[3] - at < ((uint64_t)1 << 30) ? info[3] - at : (uint64_t)1 << 30);
        if (bcast_bytes(f, ops.p + at, k, 0) != MPI_SUCCESS) rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", path);
    }
    int lrc = H5L_OK;
    if (!rc) {
        uint64_t tick = info[0];
        h5l_cur_t c = h5l_cur(ops.p, (size_t)info[3]);
        for (uint64_t i = 0; i < info[2] && !lrc; i++) {
            h5l_op_t op;
            h5l_err_t e = {0};
            if (h5l_op_decode(&c, &op) != H5L_OK) {
                lrc = fail(f, H5L_ECORRUPT, "%s: not opened: its schema does not decode", path);
                break;
            }
            if (h5l_schema_apply(&f->schema, tick, &op, &e)) lrc = fail(f, H5L_ECORRUPT, "%s: not opened: %s", path, e.msg);
            h5l_op_clear(&op);
        }
        f->tick = tick;
        f->seglog = (uint32_t)info[1];
        f->ndims_committed = f->schema.ndims;
        f->anc_lazy = f->schema.nobjs > 1 ? tick : 0;
        if (!lrc && (h5l_grow((void **)&f->want, &f->cap_want, f->schema.ndims + 1, sizeof *f->want) ||
                     gath_room(f, f->schema.ndims)))
            lrc = fail(f, H5L_ENOMEM, "%s: out of memory", path);
        if (f->want) memset(f->want, 0, f->cap_want * sizeof *f->want);
        if (!lrc && f->rank == 0) resume_ckpt(f, tick);
        rc = agree(f, lrc);
    }
    h5l_buf_free(&ops);
    return file_ready(f, rc, out);
}

static int check_open(h5l_file_t *f)
{
    if (!f) return H5L_EINVAL;
    if (f->state != ST_OPEN) return fail(f, H5L_ESTATE, "%s: file is closed", f->path);
    return H5L_OK;
}

/* Apply op to the local schema as of the next tick and keep it pending.
 * Takes ownership of op's pointers on success and on failure. */
static int push_op(h5l_file_t *f, h5l_op_t *op)
{
    h5l_err_t e = {0};
    int rc = h5l_schema_apply(&f->schema, f->tick + 1, op, &e);
    if (!rc && h5l_grow((void **)&f->ops, &f->cap_ops, f->nops + 1, sizeof *f->ops))
        rc = h5l_err_set(&e, H5L_ENOMEM, "out of memory");
    if (rc) {
        h5l_op_clear(op);
        return fail(f, rc, "%s: %s", f->path, e.msg);
    }
    f->ops[f->nops++] = *op;
    return H5L_OK;
}

int h5l_def_dim(h5l_file_t *f, const char *name, uint64_t len, int *dimid)
{
    int rc = check_open(f);
    if (rc) return rc;
    if (!name || !dimid) return fail(f, H5L_EINVAL, "%s: h5l_def_dim: NULL argument", f->path);
    h5l_op_t op = {.kind = H5L_OP_DIM, .id = (uint32_t)f->schema.ndims};
    op.flags = len == H5L_UNLIMITED;
    op.len = len == H5L_UNLIMITED ? 0 : len;
    op.name = strdup(name);
    if (!op.name) return fail(f, H5L_ENOMEM, "out of memory");
    uint32_t id = op.id;
    /* room first: a flush must be able to gather every dimension */
    if (h5l_grow((void **)&f->want, &f->cap_want, f->schema.ndims + 1, sizeof *f->want) ||
        gath_room(f, f->schema.ndims + 1)) {
        h5l_op_clear(&op);
        return fail(f, H5L_ENOMEM, "out of memory");
    }
    if ((rc = push_op(f, &op))) return rc;
    *dimid = (int)id;
    return H5L_OK;
}

/* Define the missing groups on the way to path (not path itself). */
static int make_parents(h5l_file_t *f, const char *path)
{
    size_t n = strlen(path);
    char *p = strdup(path);
    if (!p) return fail(f, H5L_ENOMEM, "out of memory");
    int rc = H5L_OK;
    for (size_t i = 1; i < n && !rc; i++) {
        if (p[i] != '/') continue;
        p[i] = 0;
        long id = h5l_schema_find(&f->schema, p);
        if (id < 0) {
            h5l_op_t op = {.kind = H5L_OP_GROUP, .id = (uint32_t)f->schema.nobjs, .name = strdup(p)};
            rc = op.name ? push_op(f, &op) : fail(f, H5L_ENOMEM, "out of memory");
        } else if (f->schema.objs[id].kind != H5L_OBJ_GROUP) {
            rc = fail(f, H5L_EEXIST, "%s: '%s' is a variable, not a group", f->path, p);
        }
        p[i] = '/';
    }
    free(p);
    return rc;
}

int h5l_def_grp(h5l_file_t *f, const char *path, int *grpid)
{
    int rc = check_open(f);
    if (rc) return rc;
    if (!path || !grpid) return fail(f, H5L_EINVAL, "%s: h5l_def_grp: NULL argument", f->path);
    long id = h5l_schema_find(&f->schema, path);
    if (id >= 0) {
        if (f->schema.objs[id].kind != H5L_OBJ_GROUP)
            return fail(f, H5L_EEXIST, "%s: '%s' is a variable, not a group", f->path, path);
        *grpid = (int)id;
        return H5L_OK;
    }
    if (path[0] != '/') return fail(f, H5L_EINVAL, "%s: group path '%s' is not absolute", f->path, path);
    if ((rc = make_parents(f, path))) return rc;
    h5l_op_t op = {.kind = H5L_OP_GROUP, .id = (uint32_t)f->schema.nobjs, .name = strdup(path)};
    if (!op.name) return fail(f, H5L_ENOMEM, "out of memory");
    uint32_t gid = op.id;
    if ((rc = push_op(f, &op))) return rc;
    *grpid = (int)gid;
    return H5L_OK;
}

/* Default chunk of a variable with an unlimited dimension, chosen the way
 * netCDF-C chooses it (nc4_find_default_chunksizes2), so files look like
 * netCDF-4 files and small variables stay small: unlimited dimensions get
 * 1 (a 1-D unlimited variable about 4 KiB of elements); fixed dimensions
 * share a ~4 MiB budget in proportion to their lengths, capped at the
 * length; then chunks are shrunk so the last one along each dimension is
 * not mostly empty. A [time, 64] float variable gets [1, 64]; a 1-D
 * double [time] gets [512]. */
static void default_chunk(const h5l_schema_t *s, h5l_type_t t, int nd, const int *dimids, uint64_t *chunk)
{
    double nvals = 1;
    int nunlim = 0;
    uint64_t len[H5L_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        const h5l_dim_t *dim = &s->dims[dimids[d]];
        len[d] = h5l_schema_dimlen_now(s, (uint32_t)dimids[d]);
        chunk[d] = 0;
        if (dim->unlimited) {
            nunlim++;
            chunk[d] = 1;
        } else {
            nvals *= (double)len[d];
        }
    }
    if (nd == 1 && nunlim == 1) {
        chunk[0] = NC_CHUNK_1D_UNLIM / t.size;
        return;
    }
    if (nd > 1 && nunlim == nd) {
        uint64_t c = (uint64_t)pow(NC_CHUNK_BYTES / t.size, 1.0 / nd);
        for (int d = 0; d < nd; d++) chunk[d] = c ? c : 1;
        return;
    }
    for (int d = 0; d < nd; d++) {
        if (chunk[d]) continue;
        double sug = pow(NC_CHUNK_BYTES / (nvals * t.size), 1.0 / (nd - nunlim)) * (double)len[d] - 0.5;
        uint64_t c = sug >= (double)len[d] ? len[d] : sug < 1 ? 1 : (uint64_t)sug;
        chunk[d] = c ? c : 1;
    }
    for (int d = 0; d < nd; d++) { /* less overhang in the last chunk */
        if (s->dims[dimids[d]].unlimited || !len[d]) continue;
        uint64_t n = (len[d] + chunk[d] - 1) / chunk[d];
        chunk[d] -= (n * chunk[d] - len[d]) / n;
    }
}

int h5l_def_var(h5l_file_t *f, const char *path, hid_t type, int ndims, const int *dimids, const uint64_t *chunk,
                int *varid)
{
    int rc = check_open(f);
    if (rc) return rc;
    if (!path || !varid || ndims < 0 || ndims > H5L_MAX_DIMS || (ndims && !dimids))
        return fail(f, H5L_EINVAL, "%s: h5l_def_var: bad argument for '%s'", f->path, path ? path : "(null)");
    h5l_type_t t;
    if (h5l_type_from_hid(type, &t))
        return fail(f, H5L_ETYPE, "%s: variable '%s': only 1/2/4/8-byte integers and IEEE floats are supported",
                    f->path, path);
    if (path[0] != '/') return fail(f, H5L_EINVAL, "%s: variable path '%s' is not absolute", f->path, path);
    if (h5l_schema_find(&f->schema, path) >= 0)
        return fail(f, H5L_EEXIST, "%s: '%s' is already defined", f->path, path);
    int unlim = 0;
    uint64_t dims[H5L_MAX_DIMS], ch[H5L_MAX_DIMS];
    for (int d = 0; d < ndims; d++) {
        if (dimids[d] < 0 || (size_t)dimids[d] >= f->schema.ndims)
            return fail(f, H5L_EBADID, "%s: variable '%s': unknown dimension id %d", f->path, path, dimids[d]);
        unlim |= f->schema.dims[dimids[d]].unlimited;
        dims[d] = h5l_schema_dimlen_now(&f->schema, (uint32_t)dimids[d]);
    }
    uint64_t cbytes = t.size;
    if (chunk) {
        for (int d = 0; d < ndims; d++) {
            if (chunk[d] == 0 || chunk[d] > UINT32_MAX)
                return fail(f, H5L_EINVAL, "%s: variable '%s': chunk dimension %d is %llu", f->path, path, d,
                            (unsigned long long)chunk[d]);
            ch[d] = chunk[d];
            /* libhdf5 wants chunks no larger than a fixed dimension; like
             * netCDF (NC_EBADCHUNK), refuse rather than change what the
             * caller asked for */
            if (!f->schema.dims[dimids[d]].unlimited) {
                if (dims[d] == 0)
                    return fail(f, H5L_EINVAL,
                                "%s: variable '%s': a chunked variable cannot have a fixed dimension of length 0",
                                f->path, path);
                if (ch[d] > dims[d])
                    return fail(f, H5L_EINVAL,
                                "%s: variable '%s': chunk dimension %d (%llu) is larger than dimension '%s' (%llu)",
                                f->path, path, d, (unsigned long long)ch[d], f->schema.dims[dimids[d]].name,
                                (unsigned long long)dims[d]);
            }
            cbytes = cbytes > UINT32_MAX ? cbytes : cbytes * ch[d];
        }
        if (cbytes >= UINT32_MAX)
            return fail(f, H5L_EINVAL, "%s: variable '%s': a chunk must be smaller than 4 GiB", f->path, path);
    } else if (unlim) {
        for (int d = 0; d < ndims; d++)
            if (!f->schema.dims[dimids[d]].unlimited && dims[d] == 0)
                return fail(f, H5L_EINVAL,
                            "%s: variable '%s': a chunked variable cannot have a fixed dimension of length 0", f->path,
                            path);
        default_chunk(&f->schema, t, ndims, dimids, ch);
    } else {
        h5l_schema_slab_shape(t, (uint32_t)ndims, dims, ch);
    }
    if ((rc = make_parents(f, path))) return rc;
    h5l_op_t op = {.kind = H5L_OP_VAR, .id = (uint32_t)f->schema.nobjs, .type = t};
    op.flags = (chunk || unlim) ? H5L_VAR_CHUNKED : 0;
    op.ndims = (uint32_t)ndims;
    op.name = strdup(path);
    op.dimids = malloc((size_t)(ndims + 1) * sizeof *op.dimids);
    op.chunk = malloc((size_t)(ndims + 1) * sizeof *op.chunk);
    op.data = calloc(1, t.size);
    op.data_len = t.size;
    if (op.data) h5l_schema_default_fill(t, op.data);
    if (!op.name || !op.dimids || !op.chunk || !op.data) {
        h5l_op_clear(&op);
        return fail(f, H5L_ENOMEM, "out of memory");
    }
    for (int d = 0; d < ndims; d++) {
        op.dimids[d] = (uint32_t)dimids[d];
        op.chunk[d] = ch[d];
    }
    uint32_t id = op.id;
    if ((rc = push_op(f, &op))) return rc;
    *varid = (int)id;
    return H5L_OK;
}

static const h5l_obj_t *get_var(h5l_file_t *f, int varid)
{
    if (varid < 0 || (size_t)varid >= f->schema.nobjs || f->schema.objs[varid].kind != H5L_OBJ_VAR) return NULL;
    return &f->schema.objs[varid];
}

/* Set how variable varid is filled (mode H5L_FILL_*; fill: one element, or
 * NULL), in its pending definition: only before the flush that publishes
 * it, as netCDF allows only before enddef. */
static int set_fill(h5l_file_t *f, int varid, int mode, const void *fill, const char *fn)
{
    int rc = check_open(f);
    if (rc) return rc;
    h5l_obj_t *o = (h5l_obj_t *)get_var(f, varid);
    if (!o) return fail(f, H5L_EBADID, "%s: %s: no variable with id %d", f->path, fn, varid);
    if (mode == H5L_FILL_USER && !fill) return fail(f, H5L_EINVAL, "%s: %s: NULL fill", f->path, fn);
    if (o->tick != f->tick + 1)
        return fail(f, H5L_ESTATE, "%s: fill value of '%s' must be set before the flush that publishes it", f->path,
                    o->path);
    for (size_t i = 0; i < f->nops; i++) {
        h5l_op_t *op = &f->ops[i];
        if (op->kind != H5L_OP_VAR || op->id != (uint32_t)varid) continue;
        op->flags &= ~(uint32_t)(H5L_VAR_FILL_USER | H5L_VAR_NOFILL);
        op->flags |= mode == H5L_FILL_USER ? H5L_VAR_FILL_USER : H5L_VAR_NOFILL;
        if (mode == H5L_FILL_USER)
            memcpy(op->data, fill, o->type.size);
        else
            memset(op->data, 0, o->type.size);
        memcpy(o->fill, op->data, o->type.size);
        o->fill_mode = mode;
        return H5L_OK;
    }
    return fail(f, H5L_ESTATE, "%s: pending definition of '%s' not found", f->path, o->path);
}

int h5l_def_var_fill(h5l_file_t *f, int varid, const void *fill)
{
    return set_fill(f, varid, H5L_FILL_USER, fill, "h5l_def_var_fill");
}

int h5l_def_var_nofill(h5l_file_t *f, int varid)
{
    return set_fill(f, varid, H5L_FILL_NONE, NULL, "h5l_def_var_nofill");
}

static int same_type(h5l_type_t a, h5l_type_t b)
{
    return a.cls == b.cls && a.size == b.size && a.sign == b.sign && a.order == b.order;
}

static int put_att_common(h5l_file_t *f, int objid, const char *name, h5l_type_t t, size_t n, const void *value)
{
    int rc = check_open(f);
    if (rc) return rc;
    if (objid < 0 || (size_t)objid >= f->schema.nobjs || !f->schema.objs[objid].kind)
        return fail(f, H5L_EBADID, "%s: attribute '%s': no object with id %d", f->path, name ? name : "", objid);
    if (!name || !name[0] || (n && !value))
        return fail(f, H5L_EINVAL, "%s: attribute: empty name or NULL value", f->path);
    if (t.cls != H5L_CLASS_STRING && n == 0)
        return fail(f, H5L_EINVAL, "%s: attribute '%s' has no elements", f->path, name);
    if (strcmp(name, "_FillValue") == 0) {
        /* netCDF's way of setting a fill value: the fill definition */
        const h5l_obj_t *o = get_var(f, objid);
        if (!o) return fail(f, H5L_EINVAL, "%s: _FillValue is a variable attribute", f->path);
        if (n != 1 || !same_type(t, o->type))
            return fail(f, H5L_EINVAL, "%s: _FillValue of '%s' must be one element of the variable's type", f->path,
                        o->path);
        return h5l_def_var_fill(f, objid, value);
    }
    h5l_err_t ne = {0};
    if (h5l_schema_attr_name_ok(name, &ne)) return fail(f, H5L_EINVAL, "%s: %s", f->path, ne.msg);
    h5l_op_t op = {.kind = H5L_OP_ATTR, .id = (uint32_t)objid, .type = t, .len = n};
    op.name = strdup(name);
    op.data_len = n * t.size;
    op.data = malloc(op.data_len + 1);
    if (!op.name || !op.data) {
        h5l_op_clear(&op);
        return fail(f, H5L_ENOMEM, "out of memory");
    }
    if (op.data_len) memcpy(op.data, value, op.data_len);
    return push_op(f, &op);
}

int h5l_put_att(h5l_file_t *f, int objid, const char *name, hid_t type, size_t n, const void *value)
{
    if (!f) return H5L_EINVAL;
    h5l_type_t t;
    if (h5l_type_from_hid(type, &t))
        return fail(f, H5L_ETYPE,
                    "%s: attribute '%s': use h5l_put_att_text for text; other types must be integers or IEEE floats",
                    f->path, name ? name : "");
    return put_att_common(f, objid, name, t, n, value);
}

int h5l_put_att_text(h5l_file_t *f, int objid, const char *name, const char *text)
{
    if (!f) return H5L_EINVAL;
    h5l_type_t t = {H5L_CLASS_STRING, 1, 0, 0};
    if (!text) return fail(f, H5L_EINVAL, "%s: attribute '%s': NULL text", f->path, name ? name : "");
    return put_att_common(f, objid, name, t, strlen(text), text);
}

/* Bytes the open record may take once encoded (every varint at most 10). */
static size_t openrec_max(const openrec_t *r) { return r->varid < 0 ? 0 : 20 + (size_t)r->nboxes * 2 * r->ndims * 10; }

/* Encode the open record into f->recs (room reserved by the caller). */
static void openrec_close(h5l_file_t *f)
{
    openrec_t *r = &f->cur;
    if (r->varid < 0) return;
    h5l_buf_varint(&f->recs, (uint64_t)r->varid);
    h5l_buf_varint(&f->recs, r->nboxes);
    for (size_t i = 0; i < (size_t)r->nboxes * 2 * r->ndims; i++) h5l_buf_varint(&f->recs, r->boxes[i]);
    f->nrec++;
    r->varid = -1;
    r->nboxes = 0;
}

/* Can box (s, c) follow the last box of the open record as one box? Yes
 * when it extends that box along one dimension k: dimensions before k have
 * count 1 in both and the same start, dimensions after k are equal, and it
 * starts where the last box ends along k — then the two boxes' elements in
 * row-major order are the two puts' bytes one after the other. Returns k,
 * or -1. */
static int merge_dim(const openrec_t *r, const uint64_t *s, const uint64_t *c)
{
    uint32_t nd = r->ndims;
    if (nd == 0 || r->nboxes == 0) return -1;
    const uint64_t *ls = r->boxes + (size_t)(r->nboxes - 1) * 2 * nd, *lc = ls + nd;
    for (uint32_t k = 0; k < nd; k++) {
        if (s[k] == ls[k] + lc[k] && lc[k] <= UINT64_MAX - c[k]) {
            uint32_t d = k + 1;
            while (d < nd && s[d] == ls[d] && c[d] == lc[d]) d++;
            if (d == nd) return (int)k;
        }
        if (lc[k] != 1 || c[k] != 1 || s[k] != ls[k]) return -1;
    }
    return -1;
}

static void write_early(h5l_file_t *f);

/* After an early write that took the caller's buffer of h5l_put directly:
 * what of it is still pending (less than a segment, or all of it if the
 * write failed) is copied into the arena, since the caller may reuse its
 * buffer once h5l_put returns. Only the last piece can be from it (a
 * direct put never merges with the piece before it). The room was
 * checked before the put. */
static void keep_rest(h5l_file_t *f, const uint8_t *buf, size_t bytes)
{
    if (!f->npieces) return;
    piece_t *p = &f->pieces[f->npieces - 1];
    if ((uintptr_t)p->p < (uintptr_t)buf || (uintptr_t)p->p >= (uintptr_t)buf + bytes) return;
    memcpy(f->arena + f->arena_used, p->p, p->len);
    p->p = f->arena + f->arena_used;
    f->arena_used += p->len;
}

/* A put that grows an unlimited dimension may not make a variable over it
 * 2^63 bytes or more: no HDF5 dataset can hold that, and readers refuse
 * such a variable (canon.c). Refused here, where the caller can still do
 * something about it; what other ranks grow is only known at the flush,
 * and readers' own check catches that. Walks the variables only when the
 * put grows a dimension past what this tick already grew it to. */
static int check_growth(h5l_file_t *f, const h5l_obj_t *o, const uint64_t *start, const uint64_t *count)
{
    const h5l_schema_t *s = &f->schema;
    uint64_t grow[H5L_MAX_DIMS];
    int any = 0;
    for (uint32_t d = 0; d < o->ndims; d++) {
        uint32_t id = o->dimids[d];
        uint64_t now = h5l_schema_dimlen_now(s, id), want = f->want[id] > now ? f->want[id] : now;
        grow[d] = s->dims[id].unlimited && start[d] + count[d] > want ? start[d] + count[d] : 0;
        any |= grow[d] != 0;
    }
    if (!any) return H5L_OK;
    for (size_t i = 1; i < s->nobjs; i++) {
        const h5l_obj_t *v = &s->objs[i];
        if (v->kind != H5L_OBJ_VAR) continue;
        uint64_t len[H5L_MAX_DIMS], bytes = v->type.size;
        int zero = 0;
        for (uint32_t d = 0; d < v->ndims; d++) {
            uint32_t id = v->dimids[d];
            uint64_t now = h5l_schema_dimlen_now(s, id);
            len[d] = f->want[id] > now ? f->want[id] : now;
            for (uint32_t e = 0; e < o->ndims; e++)
                if (o->dimids[e] == id && grow[e] > len[d]) len[d] = grow[e];
            zero |= len[d] == 0;
        }
        for (uint32_t d = 0; !zero && d < v->ndims; d++) {
            if (bytes > (uint64_t)INT64_MAX / len[d])
                return fail(f, H5L_ERANGE,
                            "%s: h5l_put '%s': dimension '%s' would be %llu long, making '%s' 2^63 bytes or more "
                            "(no HDF5 dataset holds that)",
                            f->path, o->path, s->dims[v->dimids[d]].name, (unsigned long long)len[d], v->path);
            bytes *= len[d];
        }
    }
    return H5L_OK;
}

/* Puts of a chunked variable that hold whole chunks are laid out chunk
 * by chunk: one box per chunk (the put's part of it), each box's bytes
 * row-major in itself, copied by one walk of the caller's buffer
 * (h5l_box_split). A chunk a rank wrote whole is then one contiguous run
 * of the log, which the finalizer keeps in place and the daemon serves
 * straight from the log (a [256,256,256] float variable in [64,64,64]
 * chunks written as bands by 2 ranks: the close copied 64 MiB, 60 ms; now
 * nothing). Only when whole chunks (inside the variable's shape) are at
 * least half of the put's bytes, at most SPLIT_CELLS chunks, at least
 * SPLIT_MIN bytes each on average: parts of chunks gain nothing from it
 * (a z-plane chunk of x-slabs is copied at close either way, and cutting
 * a band into planes of one element per row cost the put more than the
 * finalizer's tiles), and small ones cost an index entry each. */
#define SPLIT_MIN ((uint64_t)16 << 10)
#define SPLIT_CELLS 4096

static uint64_t split_cells(const h5l_file_t *f, const h5l_obj_t *o, const uint64_t *start, const uint64_t *count,
                            size_t bytes)
{
    if (!o->chunked || o->ndims == 0) return 0;
    uint64_t n = 1, whole = o->type.size;
    for (uint32_t d = 0; d < o->ndims; d++) {
        uint64_t ch = o->chunk[d], e = start[d] + count[d], len = h5l_schema_dimlen_now(&f->schema, o->dimids[d]);
        if (f->schema.dims[o->dimids[d]].unlimited && f->want[o->dimids[d]] > len) len = f->want[o->dimids[d]];
        if (e > len) len = e; /* (a put growing an unlimited dimension) */
        n *= (e - 1) / ch - start[d] / ch + 1;
        if (n > SPLIT_CELLS) return 0;
        /* chunks the put holds whole, and inside the shape (an edge chunk is
         * never in place: its padding is not in the log) */
        uint64_t lo = (start[d] + ch - 1) / ch, hi = e / ch, in = len / ch;
        if (hi > in) hi = in;
        whole *= hi > lo ? (hi - lo) * ch : 0;
    }
    return n >= 2 && bytes / n >= SPLIT_MIN && 2 * whole >= bytes ? n : 0;
}

/* Add box (s, c) of varid to the open record: grown into its last box,
 * or a new box (a new record when the open one is another variable's or
 * full). Room for it and for closing records is reserved by the caller. */
static void rec_add_box(h5l_file_t *f, int varid, uint32_t nd, const uint64_t *s, const uint64_t *c)
{
    openrec_t *r = &f->cur;
    int k = r->varid == varid ? merge_dim(r, s, c) : -1;
    if (k >= 0) {
        r->boxes[(size_t)(r->nboxes - 1) * 2 * nd + nd + (size_t)k] += c[k];
        return;
    }
    if (r->varid != varid || r->nboxes >= H5L_REC_MAXBOXES || nd == 0) { /* a scalar's record has one box */
        openrec_close(f);
        r->varid = varid;
        r->ndims = nd;
    }
    uint64_t *b = r->boxes + (size_t)r->nboxes * 2 * nd;
    for (uint32_t d = 0; d < nd; d++) {
        b[d] = s[d];
        b[nd + d] = c[d];
    }
    r->nboxes++;
}

/* The put's chunks in row-major order: cell i's box in (s, c). */
static void split_box(const h5l_obj_t *o, const uint64_t *start, const uint64_t *count, uint64_t i, uint64_t *s,
                      uint64_t *c)
{
    for (int d = (int)o->ndims - 1; d >= 0; d--) {
        uint64_t g0 = start[d] / o->chunk[d], gn = (start[d] + count[d] - 1) / o->chunk[d] - g0 + 1;
        uint64_t cd = g0 + i % gn, lo = cd * o->chunk[d], hi = lo + o->chunk[d], e = start[d] + count[d];
        i /= gn;
        s[d] = start[d] > lo ? start[d] : lo;
        c[d] = (e < hi ? e : hi) - s[d];
    }
}

static int put_common(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf, int copy)
{
    int rc = check_open(f);
    if (rc) return rc;
    const h5l_obj_t *o = get_var(f, varid);
    if (!o) return fail(f, H5L_EBADID, "%s: h5l_put: no variable with id %d", f->path, varid);
    uint32_t nd = o->ndims;
    if (nd && (!start || !count)) return fail(f, H5L_EINVAL, "%s: h5l_put '%s': NULL start or count", f->path, o->path);
    uint64_t nelem = 1;
    int empty = 0;
    /* every dimension is checked, even when another's count is 0: like
     * netCDF, a start past a fixed length is an error whatever the count */
    for (uint32_t d = 0; d < nd; d++) {
        const h5l_dim_t *dim = &f->schema.dims[o->dimids[d]];
        uint64_t len = h5l_schema_dimlen_now(&f->schema, o->dimids[d]);
        if (count[d] > UINT64_MAX - start[d] || (!dim->unlimited && start[d] + count[d] > len))
            return fail(f, H5L_ERANGE,
                        "%s: h5l_put '%s': dimension %u ('%s'): start %llu + count %llu exceeds length %llu", f->path,
                        o->path, d, dim->name, (unsigned long long)start[d], (unsigned long long)count[d],
                        (unsigned long long)len);
        if (count[d] == 0)
            empty = 1;
        else if (nelem > UINT64_MAX / count[d])
            return fail(f, H5L_ERANGE, "%s: h5l_put '%s': box too large", f->path, o->path);
        else
            nelem *= count[d];
    }
    if (empty) return H5L_OK; /* nothing to write */
    if (nelem > SIZE_MAX / o->type.size)
        return fail(f, H5L_ERANGE, "%s: h5l_put '%s': box too large", f->path, o->path);
    if ((rc = check_growth(f, o, start, count))) return rc;
    size_t bytes = (size_t)nelem * o->type.size;
    if (!buf) return fail(f, H5L_EINVAL, "%s: h5l_put '%s': NULL buffer", f->path, o->path);
    if (copy && bytes > f->arena_cap - f->arena_used)
        return fail(f, H5L_ENOBUFS,
                    "%s: h5l_put '%s': %zu bytes do not fit the write buffer (%zu of %zu used): call h5l_flush",
                    f->path, o->path, bytes, f->arena_used, f->arena_cap);
    /* a put that brings EARLY_STEP bytes pending while this tick writes
     * early goes out now from the caller's buffer, uncopied (keep_rest) */
    int direct = copy && f->early && f->data_bytes + bytes <= f->res_len && f->data_bytes + bytes - f->wt >= EARLY_STEP;
    uint64_t ncell = copy && !direct ? split_cells(f, o, start, count, bytes) : 0;
    /* reserve everything first: after this point nothing can fail (a
     * split put may close a record per H5L_REC_MAXBOXES boxes) */
    size_t newbox = ncell ? (size_t)ncell : 1, recmax = 20 + (size_t)H5L_REC_MAXBOXES * 2 * nd * 10;
    size_t bdims = nd > f->cur.ndims ? nd : f->cur.ndims;
    if (h5l_buf_reserve(&f->recs, openrec_max(&f->cur) + (ncell ? (newbox / H5L_REC_MAXBOXES + 1) * recmax : 0)) ||
        h5l_grow((void **)&f->pieces, &f->cap_pieces, f->npieces + 1, sizeof *f->pieces) ||
        h5l_grow((void **)&f->cur.boxes, &f->cur.cap,
                 ((size_t)f->cur.nboxes + newbox) * 2 * bdims + 2 + (ncell ? (size_t)H5L_REC_MAXBOXES * 2 * nd : 0),
                 sizeof *f->cur.boxes) ||
        (ncell && h5l_grow((void **)&f->cells, &f->cap_cells, (size_t)ncell, sizeof *f->cells))) {
        f->recs.oom = 0;
        return fail(f, H5L_ENOMEM, "%s: out of memory buffering a write", f->path);
    }
    const uint8_t *src = buf;
    if (ncell) { /* chunk by chunk: each chunk's part packed, in chunk order */
        uint8_t *at = f->arena + f->arena_used;
        for (uint64_t i = 0; i < ncell; i++) {
            uint64_t s[H5L_MAX_DIMS], c[H5L_MAX_DIMS];
            split_box(o, start, count, i, s, c);
            f->cells[i] = at;
            at += h5l_box_nelem(nd, c) * o->type.size;
        }
        h5l_box_split(nd, o->type.size, start, count, buf, o->chunk, f->cells);
        src = f->arena + f->arena_used;
        f->arena_used += bytes;
    } else if (copy && !direct) {
        memcpy(f->arena + f->arena_used, buf, bytes);
        src = f->arena + f->arena_used;
        f->arena_used += bytes;
    }
    piece_t *last = f->npieces ? &f->pieces[f->npieces - 1] : NULL;
    if (!direct && last && last->p + last->len == src && last->len + bytes >= last->len)
        last->len += bytes;
    else
        f->pieces[f->npieces++] = (piece_t){src, bytes};
    /* the record: grow the open one's last box, add a box to it, or start
     * a new one (format.md 6) — a box per chunk for a split put */
    if (ncell) {
        for (uint64_t i = 0; i < ncell; i++) {
            uint64_t s[H5L_MAX_DIMS], c[H5L_MAX_DIMS];
            split_box(o, start, count, i, s, c);
            rec_add_box(f, varid, nd, s, c);
        }
    } else {
        rec_add_box(f, varid, nd, start, count);
    }
    f->nputs++;
    for (uint32_t d = 0; d < nd; d++) {
        uint32_t id = o->dimids[d];
        if (f->schema.dims[id].unlimited && start[d] + count[d] > f->want[id]) f->want[id] = start[d] + count[d];
    }
    f->data_bytes += bytes;
    if (f->early) {
        if (f->data_bytes > f->res_len)
            f->early = 0; /* more than its place holds: the tick goes elsewhere (flush_place) */
        else if (f->data_bytes - f->wt >= EARLY_STEP)
            write_early(f);
    }
    if (direct) keep_rest(f, buf, bytes);
    return H5L_OK;
}

int h5l_put(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf)
{
    return put_common(f, varid, start, count, buf, 1);
}

int h5l_iput(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf)
{
    return put_common(f, varid, start, count, buf, 0);
}

int h5l_put_conv(h5l_file_t *f, int varid, hid_t memtype, const uint64_t *start, const uint64_t *count, const void *buf)
{
    int rc = check_open(f);
    if (rc) return rc;
    const h5l_obj_t *o = get_var(f, varid);
    if (!o) return fail(f, H5L_EBADID, "%s: h5l_put_conv: no variable with id %d", f->path, varid);
    uint64_t n = o->ndims && count ? h5l_box_nelem(o->ndims, count) : 1;
    size_t ms = H5Tget_size(memtype);
    H5T_class_t mc = H5Tget_class(memtype);
    if (ms == 0 || (mc != H5T_INTEGER && mc != H5T_FLOAT))
        return fail(f, H5L_ETYPE, "%s: h5l_put_conv '%s': memory type is not numeric", f->path, o->path);
    size_t es = ms > o->type.size ? ms : o->type.size;
    if (n == 0) return H5L_OK;
    if (n > SIZE_MAX / es) return fail(f, H5L_ERANGE, "%s: h5l_put_conv '%s': box too large", f->path, o->path);
    uint8_t *tmp = malloc((size_t)n * es);
    hid_t ft = h5l_type_to_hid(o->type, 0);
    if (!tmp || ft < 0) {
        free(tmp);
        if (ft >= 0) H5Tclose(ft);
        return fail(f, H5L_ENOMEM, "out of memory");
    }
    memcpy(tmp, buf, (size_t)n * ms);
    if (H5Tconvert(memtype, ft, (size_t)n, tmp, NULL, H5P_DEFAULT) < 0)
        rc = fail(f, H5L_ETYPE, "%s: h5l_put_conv '%s': libhdf5 cannot convert to the variable's type", f->path,
                  o->path);
    else
        rc = h5l_put(f, varid, start, count, tmp);
    H5Tclose(ft);
    free(tmp);
    return rc;
}

/* The reason a write did not transfer every byte. OpenMPI's ompio turns a
 * failed pwrite into MPI_SUCCESS with a short (often zero) count and keeps
 * the errno, so an I/O errno left by the call is the reason; failing that,
 * a file system with no space left; else just "short write". */
static const char *short_reason(h5l_file_t *f, int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EFBIG:
    case EROFS:
    case ESTALE:
    case EREMOTEIO:
        return strerror(err);
    default:
        break;
    }
    struct statvfs sv;
    if (statvfs(f->path, &sv) == 0 && sv.f_bavail == 0) return strerror(ENOSPC);
    return "short write";
}

/* A place in a rank's pieces: piece i, byte skip of it. */
typedef struct ppos {
    size_t i;
    size_t skip;
} ppos_t;

/* Move pos k bytes on (the pieces hold at least that many more). */
static void ppos_advance(const piece_t *pc, ppos_t *pos, uint64_t k)
{
    while (k) {
        size_t left = pc[pos->i].len - pos->skip;
        if (k < left) {
            pos->skip += (size_t)k;
            return;
        }
        k -= left;
        pos->i++;
        pos->skip = 0;
    }
}

/* One MPI-IO write of len bytes of the pieces from pos on, at off (several
 * pieces: an hindexed memory type; blocks under 1 GiB for int counts). *st
 * gets the status. An MPI error code, or H5L_ENOMEM. */
static int write_from(h5l_file_t *f, MPI_Offset off, const piece_t *pc, ppos_t pos, uint64_t len, MPI_Status *st)
{
    if (len == 0) return MPI_SUCCESS;
    if (pc[pos.i].len - pos.skip >= len && len <= MPI_BLOCK_MAX)
        return MPI_File_write_at(f->fh, off, (void *)(pc[pos.i].p + pos.skip), (int)len, MPI_BYTE, st);
    size_t nb = 0;
    for (size_t k = pos.i, o = pos.skip, left = len; left; k++, o = 0) {
        size_t l = pc[k].len - o < left ? pc[k].len - o : left;
        nb += (l + MPI_BLOCK_MAX - 1) / MPI_BLOCK_MAX;
        left -= l;
    }
    int *lens = malloc(nb * sizeof *lens);
    MPI_Aint *disp = malloc(nb * sizeof *disp);
    if (!lens || !disp) {
        free(lens);
        free(disp);
        return H5L_ENOMEM;
    }
    size_t b = 0;
    for (size_t k = pos.i, o0 = pos.skip, left = len; left; k++, o0 = 0) {
        size_t end = pc[k].len - o0 < left ? pc[k].len : o0 + left;
        for (size_t o = o0; o < end; o += MPI_BLOCK_MAX) {
            size_t l = end - o < MPI_BLOCK_MAX ? end - o : MPI_BLOCK_MAX;
            lens[b] = (int)l;
            MPI_Get_address(pc[k].p + o, &disp[b]);
            b++;
        }
        left -= end - o0;
    }
    MPI_Datatype t;
    int mrc = MPI_Type_create_hindexed((int)nb, lens, disp, MPI_BYTE, &t);
    if (mrc == MPI_SUCCESS) {
        mrc = MPI_Type_commit(&t);
        if (mrc == MPI_SUCCESS) mrc = MPI_File_write_at(f->fh, off, MPI_BOTTOM, 1, t, st);
        MPI_Type_free(&t);
    }
    free(lens);
    free(disp);
    return mrc;
}

/* total bytes of the pieces from pos on, at off, every byte checked to
 * have been transferred. A short count is followed by a write of the rest
 * (POSIX allows a short write that a second call completes); a call that
 * transfers nothing ends it with an error naming the file, what was
 * written, where, and the reason (short_reason). */
static int write_pieces(h5l_file_t *f, const char *what, MPI_Offset off, const piece_t *pc, ppos_t pos, uint64_t total)
{
    uint64_t done = 0;
    int err = 0;
    while (done < total) {
        MPI_Status st;
        MPI_Count got = 0;
        errno = 0;
        int mrc = write_from(f, off + (MPI_Offset)done, pc, pos, total - done, &st);
        err = errno;
        if (mrc == H5L_ENOMEM) return fail(f, H5L_ENOMEM, "%s: out of memory describing the write", f->path);
        if (mrc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int l = 0;
            MPI_Error_string(mrc, s, &l);
            return fail(f, H5L_EIO, "%s: writing %s (%llu bytes at %lld) failed: %s (%s)", f->path, what,
                        (unsigned long long)total, (long long)off, s, short_reason(f, err));
        }
        if (MPI_Get_elements_x(&st, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED || got <= 0 ||
            (uint64_t)got > total - done)
            break;
        done += (uint64_t)got;
        ppos_advance(pc, &pos, (uint64_t)got);
    }
    if (done != total)
        return fail(f, H5L_EIO, "%s: writing %s (%llu bytes at %lld) failed: %s (%llu bytes written)", f->path, what,
                    (unsigned long long)total, (long long)off, short_reason(f, err), (unsigned long long)done);
    return H5L_OK;
}

/* The checksums of data segments [j0, j1) of this rank in tick `tick`
 * (format.md 4) into sums[0..j1-j0), the bytes read from pos on (pos
 * moves past them). A segment inside one piece is hashed in one call; one
 * that spans pieces (h5l_iput of small pieces) through the stream. */
static void hash_segments(h5l_file_t *f, uint64_t tick, const piece_t *pc, ppos_t *pos, uint64_t j0, uint64_t j1,
                          uint8_t *sums)
{
    uint64_t seg = (uint64_t)1 << f->seglog;
    for (uint64_t j = j0; j < j1; j++) {
        uint64_t len = f->data_bytes - j * seg < seg ? f->data_bytes - j * seg : seg;
        uint64_t sd = h5l_seg_seed(f->seed, tick, (uint32_t)f->rank, j), h;
        if (pc[pos->i].len - pos->skip >= len) {
            h = h5l_hash(pc[pos->i].p + pos->skip, (size_t)len, sd);
            ppos_advance(pc, pos, len);
        } else {
            h5l_hstream_reset(f->hs, sd);
            for (uint64_t left = len; left;) {
                size_t k = pc[pos->i].len - pos->skip < left ? pc[pos->i].len - pos->skip : (size_t)left;
                h5l_hstream_update(f->hs, pc[pos->i].p + pos->skip, k);
                ppos_advance(pc, pos, k);
                left -= k;
            }
            h = h5l_hstream_digest(f->hs);
        }
        h5l_put_le64(sums + (j - j0) * 8, h);
    }
}

/* The pieces from stream byte wt + len on stay; the arena's pending bytes
 * (always its last ones: puts fill it in data order) move to its start,
 * so a tick that writes early keeps reusing the same warm pages. */
static void drop_written(h5l_file_t *f, uint64_t len)
{
    ppos_t pos = {0, 0};
    ppos_advance(f->pieces, &pos, len);
    size_t m = 0;
    uintptr_t a0 = (uintptr_t)f->arena, a1 = a0 + f->arena_used, lo = a1;
    for (size_t i = pos.i; i < f->npieces; i++) {
        piece_t p = f->pieces[i];
        if (i == pos.i) {
            p.p += pos.skip;
            p.len -= pos.skip;
        }
        if (!p.len) continue;
        if (f->arena && (uintptr_t)p.p >= a0 && (uintptr_t)p.p < a1 && (uintptr_t)p.p < lo) lo = (uintptr_t)p.p;
        f->pieces[m++] = p;
    }
    f->npieces = m;
    if (!f->arena) return;
    size_t keep = (size_t)(a1 - lo), shift = (size_t)(lo - a0);
    if (keep && shift) {
        memmove(f->arena, f->arena + shift, keep);
        for (size_t i = 0; i < m; i++)
            if ((uintptr_t)f->pieces[i].p >= lo && (uintptr_t)f->pieces[i].p < a1) f->pieces[i].p -= shift;
    }
    f->arena_used = keep;
}

/* Bytes [wt, end) of this tick's data, from the pieces, to its reserved
 * place (format.md 6), in WRITE_BLOCK steps, each step's segments hashed
 * (into wsums) right before it is written, as the flush does; end is a
 * segment boundary or the end of the data. Returns the bytes written (whole
 * steps); a failed write ends early writing for the tick and loses
 * nothing: the pieces stay, and the flush writes them and reports. */
static uint64_t early_out(h5l_file_t *f, uint64_t end)
{
    uint64_t seg = (uint64_t)1 << f->seglog, len = end - f->wt, tick = f->tick + 1, done = 0;
    if (!len) return 0;
    if (h5l_grow((void **)&f->wsums, &f->cap_wsums, (size_t)((end + seg - 1) >> f->seglog) * 8, 1)) {
        f->early = 0;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)tick);
    ppos_t hpos = {0, 0}, wpos = {0, 0};
    while (done < len) {
        uint64_t l = len - done < WRITE_BLOCK ? len - done : WRITE_BLOCK, j = (f->wt + done) >> f->seglog;
        hash_segments(f, tick, f->pieces, &hpos, j, j + ((l + seg - 1) >> f->seglog), f->wsums + j * 8);
        if (write_pieces(f, what, (MPI_Offset)(f->res_off + f->res_pre + f->wt + done), f->pieces, wpos, l)) {
            f->early = 0;
            break;
        }
        ppos_advance(f->pieces, &wpos, l);
        done += l;
    }
    return done;
}

/* Early write: the whole segments pending go to the reserved place, and
 * their pieces are dropped. The flush writes the rest (or, if the tick's
 * sizes turn out different, moves these bytes: move_early). */
static void write_early(h5l_file_t *f)
{
    uint64_t done = early_out(f, f->data_bytes >> f->seglog << f->seglog);
    if (done) drop_written(f, done);
    f->wt += done;
}

/* At the flush, before it waits for the other ranks: this rank's data
 * fills its reserved place exactly, so its last bytes (the segments
 * pending and the last, partial one) go there now, while other ranks may
 * still be putting. The partial segment's pieces stay (f->tail marks it
 * written): a put after a failed flush extends that segment, and then it
 * is hashed and written again as usual. */
static void write_tail(h5l_file_t *f)
{
    write_early(f);
    if (f->early && f->data_bytes > f->wt && early_out(f, f->data_bytes) == f->data_bytes - f->wt)
        f->tail = f->data_bytes;
}

/* At the flush, when the tick's sizes differ from those its place was
 * reserved for: the len bytes written early at `from` go to the tick's
 * place `to`, read back through a bounce buffer (their checksums do not
 * depend on where they lie). */
static int move_early(h5l_file_t *f, uint64_t tick, uint64_t from, uint64_t to, uint64_t len)
{
    size_t cap = len < WRITE_BLOCK ? (size_t)len : (size_t)WRITE_BLOCK;
    uint8_t *b = malloc(cap);
    if (!b)
        return fail(f, H5L_ENOMEM, "%s: out of memory moving the data of tick %llu", f->path, (unsigned long long)tick);
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)tick);
    int rc = H5L_OK;
    for (uint64_t o = 0; o < len && !rc; o += cap) {
        size_t l = len - o < cap ? (size_t)(len - o) : cap;
        MPI_Status st;
        MPI_Count got = 0;
        if (MPI_File_read_at(f->fh, (MPI_Offset)(from + o), b, (int)l, MPI_BYTE, &st) != MPI_SUCCESS ||
            MPI_Get_elements_x(&st, MPI_BYTE, &got) != MPI_SUCCESS || got != (MPI_Count)l)
            rc = fail(f, H5L_EIO, "%s: reading back %zu bytes of tick %llu at %llu failed", f->path, l,
                      (unsigned long long)tick, (unsigned long long)(from + o));
        else
            rc = write_pieces(f, what, (MPI_Offset)(to + o), &(piece_t){b, l}, (ppos_t){0, 0}, l);
    }
    free(b);
    return rc;
}

/* Rank 0: append one frame to the sidecar and to the in-memory copy (the
 * CLOSE frame; TICK frames go through seal_frame and put_sealed). */
static int journal_append(h5l_file_t *f, uint16_t type, const void *payload, size_t len)
{
    h5l_err_t e = {0};
    if (len > H5L_FRAME_MAX)
        return fail(f, H5L_EINVAL, "%s: the definitions of one flush take %zu bytes (at most %u): flush more often",
                    f->path, len, H5L_FRAME_MAX);
    int rc = h5l_journal_append(f->jfd, &f->joff, type, payload, (uint32_t)len, f->seed, f->opts.sync == H5L_SYNC_TICK,
                                f->jpath, &f->jcopy, &e);
    return rc ? fail(f, rc, "%s", e.msg) : H5L_OK;
}

/* Rank 0: encode the TICK frame of payload into f->pend. From here on the
 * tick's frame is fixed: a failed append may leave a prefix of it in the
 * sidecar, which live readers may have read and keep (a torn tail is
 * waited for, not re-read), so every later attempt must write exactly
 * these bytes again — a frame built anew would differ at least in its
 * commit time. */
static int seal_frame(h5l_file_t *f, const void *payload, size_t len)
{
    if (len > H5L_FRAME_MAX)
        return fail(f, H5L_EINVAL, "%s: the definitions of one flush take %zu bytes (at most %u): flush more often",
                    f->path, len, H5L_FRAME_MAX);
    f->pend.len = 0;
    h5l_frame_encode(&f->pend, H5L_REC_TICK, payload, (uint32_t)len, f->seed);
    if (f->pend.oom) {
        h5l_buf_free(&f->pend);
        return fail(f, H5L_ENOMEM, "%s: out of memory building a journal frame", f->path);
    }
    return H5L_OK;
}

/* Rank 0: append the sealed frame at the journal's end: the commit. */
static int put_sealed(h5l_file_t *f, uint64_t tick)
{
    h5l_err_t e = {0};
    int rc = h5l_journal_write(f->jfd, &f->joff, f->pend.p, f->pend.len, f->opts.sync == H5L_SYNC_TICK, f->jpath,
                               &f->jcopy, &e);
    if (rc) return fail(f, rc, "%s (committing tick %llu)", e.msg, (unsigned long long)tick);
    h5l_buf_free(&f->pend);
    return H5L_OK;
}

/* Collective: commit the sealed tick (its bytes were written by the flush
 * that failed to commit it; nothing has written there since). */
static int commit_sealed(h5l_file_t *f)
{
    bstat_t st = {0};
    if (f->rank == 0) {
        st.code = put_sealed(f, f->tick);
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    }
    int rc = bcast_status(f, &st);
    if (!rc) f->sealed = 0;
    return rc;
}

/* Size of the next log extent for a tick of `need` bytes: twice the last
 * (1 MiB first), never less than the tick needs nor more than the slack
 * beyond it (format.md 1): the tick's size when that is over 32 MiB, else
 * an eighth of the extents so far, between 1 and 32 MiB. With 32 MiB
 * alone, every tick over 32 MiB got an extent of its own: a libhdf5
 * allocation on rank 0 and a broadcast every rank waits for, per flush;
 * now such ticks share an extent by two once the extents have grown. The
 * eighth bounds the last extent's unused tail of a small file (a run of
 * 50,000 one-row ticks carried 15 MB of it, 300 bytes a tick of a
 * 500-byte tick) at a few dozen more extents in a file's life. */
static uint64_t next_extent(const h5l_file_t *f, uint64_t need)
{
    uint64_t sz = f->ext_count ? 2 * f->ext_size : EXTENT_FIRST;
    uint64_t eighth = f->ext_total / 8;
    uint64_t slack = need > EXTENT_SLACK    ? need
                     : eighth > EXTENT_SLACK ? EXTENT_SLACK
                     : eighth < EXTENT_FIRST ? EXTENT_FIRST
                                             : eighth;
    if (sz > need + slack) sz = need + slack;
    return sz < need ? need : sz;
}

/* Before a flush's step 1: the open record is encoded and this rank's record
 * block laid out (header placeholder, records, room for the segment
 * checksums, which flush_write fills in as it writes the data, then the
 * header); its padded length is returned in *blen. f->recs.len before the
 * checksums is kept in *rlen so a failed flush can take them off again. */
static int finish_block(h5l_file_t *f, uint64_t tick, uint64_t *blen, size_t *rlen)
{
    if (h5l_buf_reserve(&f->recs, openrec_max(&f->cur))) {
        f->recs.oom = 0;
        return fail(f, H5L_ENOMEM, "%s: out of memory preparing flush %llu", f->path, (unsigned long long)tick);
    }
    openrec_close(f);
    *rlen = f->recs.len;
    uint64_t nseg = (f->data_bytes + ((uint64_t)1 << f->seglog) - 1) >> f->seglog;
    /* the payload: records and checksums; the padding is not part of it */
    uint64_t payload = (uint64_t)(*rlen - H5L_BLOCK_LEN) + 8 * nseg;
    if (payload > H5L_FRAME_MAX)
        return fail(f, H5L_EINVAL,
                    "%s: flush %llu: the record block of rank %d takes %llu bytes (at most %u): flush more often",
                    f->path, (unsigned long long)tick, f->rank, (unsigned long long)payload, H5L_FRAME_MAX);
    if (h5l_buf_reserve(&f->recs, (size_t)nseg * 8 + 8)) {
        f->recs.oom = 0;
        return fail(f, H5L_ENOMEM, "%s: out of memory preparing flush %llu", f->path, (unsigned long long)tick);
    }
    memset(f->recs.p + f->recs.len, 0, (size_t)nseg * 8);
    f->recs.len += (size_t)nseg * 8;
    h5l_buf_pad8(&f->recs);
    h5l_block_t blk = {0, (uint32_t)payload, (uint32_t)f->nrec, f->data_bytes};
    h5l_block_encode(&blk, f->recs.p);
    *blen = f->recs.len;
    return H5L_OK;
}

/* The state of one flush, passed between its steps (h5l_flush). Owned by
 * h5l_flush: flush_free releases it whatever step failed. */
typedef struct flush {
    uint64_t tick;
    size_t nd;       /* dimensions defined when the flush began */
    h5l_buf_t opsb;  /* the tick's definitions, encoded (TICK payload) */
    h5l_op_t *grown; /* DIMLEN ops of the extents this tick grew */
    size_t ngrown;
    uint64_t *want;      /* agreed extent per dimension */
    uint64_t blen;       /* this rank's record block, padded */
    uint64_t pre[2];     /* this rank's place: data bytes, block bytes before it */
    uint64_t tot[3];     /* totals: data bytes, block bytes, records */
    uint64_t need;       /* the tick's bytes in its extent */
    uint64_t doff, moff; /* where the tick's data and record blocks start */
    size_t rlen;         /* where the segment checksums start in f->recs */
    int sealed;          /* built, but the frame append failed */
    int match;           /* every rank's data has the sizes its reserved place was made for */
    int reserve;         /* reserve the next tick's place for this tick's sizes */
    uint64_t res_next;   /* where (0: nowhere) */
} flush_t;

static void flush_free(flush_t *fl)
{
    h5l_buf_free(&fl->opsb);
    free(fl->grown);
    free(fl->want);
}

/* Step 1: agree. One MPI_Allgather of every rank's sizes, definitions
 * hash, failure flag and wanted extents (AGG_N): from it each rank computes
 * its place (the bytes of the ranks before it), the totals, whether every
 * rank made the same definitions and had no local error, and the extents
 * along the dimensions that existed before this flush. One collective, not
 * an MPI_Exscan and an MPI_Allreduce: each is a point where every rank
 * waits for the last one, which costs a scheduler time slice when ranks
 * share cores. It moves size x (AGG_N + dimensions) x 8 bytes to every
 * rank. A local failure (lrc) still takes part, so no rank hangs. */
static int flush_agree(h5l_file_t *f, flush_t *fl, int lrc)
{
    size_t nd = fl->nd;
    for (size_t i = 0; i < f->nops; i++) h5l_op_encode(&fl->opsb, &f->ops[i]);
    fl->want = calloc(nd + 1, sizeof *fl->want);
    fl->grown = calloc(nd + 1, sizeof *fl->grown);
    size_t nold = f->ndims_committed, n = AGG_N + nold;
    uint64_t h = f->opts.check_collective ? h5l_hash(fl->opsb.p, fl->opsb.len, 0) : 0;
    uint64_t *all = f->gath, *me = all + (size_t)f->rank * n; /* room: gath_room */
    me[0] = f->data_bytes;
    me[1] = fl->blen;
    me[2] = f->nrec;
    me[3] = h;
    int mine = fl->opsb.oom || !fl->want || !fl->grown; /* this rank ran out of memory here */
    me[4] = (mine || lrc) ? 1u : 0u;
    me[5] = nd;
    me[6] = f->opts.early_writes ? 0u : 1u;
    me[7] = f->rank == 0 ? f->ahead_off : 0;
    memcpy(me + AGG_N, f->want, nold * sizeof *me);
    MPI_Request rq;
    int mrc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)n, MPI_UINT64_T, f->comm, &rq);
    if (mrc == MPI_SUCCESS) mrc = coll_wait(&rq);
    if (mrc != MPI_SUCCESS)
        return lrc ? lrc
                   : fail(f, H5L_EMPI, "%s: flush %llu: MPI_Allgather failed", f->path, (unsigned long long)fl->tick);
    int oom = 0, mismatch = 0, same = 1, early_off = 0;
    memset(fl->pre, 0, sizeof fl->pre);
    memset(fl->tot, 0, sizeof fl->tot);
    for (int q = 0; q < f->size; q++) {
        const uint64_t *a = all + (size_t)q * n;
        for (int i = 0; i < 3; i++) fl->tot[i] += a[i];
        f->sz_now[q] = a[0];
        same &= a[0] == f->sz_last[q];
        early_off |= a[6] != 0;
        if (q < f->rank) {
            fl->pre[0] += a[0];
            fl->pre[1] += a[1];
        }
        mismatch |= a[3] != all[3] || a[5] != nd;
        oom |= a[4] != 0;
        if (fl->want)
            for (size_t d = 0; d < nold; d++) fl->want[d] = a[AGG_N + d] > fl->want[d] ? a[AGG_N + d] : fl->want[d];
    }
    if (oom && lrc) return lrc;
    if (oom && mine)
        return fail(f, H5L_ENOMEM, "%s: out of memory starting flush %llu", f->path, (unsigned long long)fl->tick);
    if (oom)
        return fail(f, H5L_ENOMEM, "%s: flush %llu failed on another rank (out of memory or too many records)",
                    f->path, (unsigned long long)fl->tick);
    if (mismatch)
        return fail(f, H5L_EMISMATCH,
                    "%s: ranks made different definitions (def_dim/def_var/put_att) before flush %llu", f->path,
                    (unsigned long long)fl->tick);
    /* Early writes: the reserved place fits when every rank's size is the
     * one it was reserved for; the next tick gets a place when this one's
     * sizes repeat the last data tick's (or this is the first), so a
     * writer whose sizes vary stops reserving after one miss. */
    f->ahead_off = all[7]; /* rank 0's */
    same &= f->sz_known;
    fl->match = f->res_off && same;
    fl->reserve = fl->tot[0] && !early_off && (!f->sz_known || same);
    return H5L_OK;
}

/* Step 2: grow. Dimensions defined in this flush get their extents in a
 * second, rare MPI_Allreduce (the ranks agree on nd now, so the counts
 * match); every unlimited dimension that grew becomes a DIMLEN op of the
 * tick. */
static int flush_grow(h5l_file_t *f, flush_t *fl)
{
    size_t nd = fl->nd, nold = f->ndims_committed;
    int new_unlim = 0;
    for (size_t d = nold; d < nd; d++) new_unlim |= f->schema.dims[d].unlimited;
    if (new_unlim) {
        memcpy(fl->want + nold, f->want + nold, (nd - nold) * sizeof *fl->want);
        if (MPI_Allreduce(MPI_IN_PLACE, fl->want + nold, (int)(nd - nold), MPI_UINT64_T, MPI_MAX, f->comm) !=
            MPI_SUCCESS)
            return fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    }
    for (size_t d = 0; d < nd; d++) {
        if (f->schema.dims[d].unlimited && fl->want[d] > h5l_schema_dimlen_now(&f->schema, (uint32_t)d)) {
            fl->grown[fl->ngrown++] = (h5l_op_t){.kind = H5L_OP_DIMLEN, .id = (uint32_t)d, .len = fl->want[d]};
            h5l_op_encode(&fl->opsb, &fl->grown[fl->ngrown - 1]);
        }
    }
    return H5L_OK;
}

/* Step 3: place the tick in the newest log extent. Every rank decides the
 * same from the same totals, and only when it does not fit does rank 0
 * allocate the next extent (libhdf5) and broadcast where it is. */
static int flush_place(h5l_file_t *f, flush_t *fl)
{
    uint64_t dspace = (fl->tot[0] + 7) & ~(uint64_t)7, dneed = fl->match ? 0 : dspace;
    /* the tick's data (unless it lies in its reserved place already), its
     * record blocks, and the next tick's reserved place */
    fl->need = dneed + fl->tot[1] + (fl->reserve ? dspace : 0);
    if (!f->ext_count || f->ext_size - f->ext_used < fl->need) {
        bstat_t st = {0};
        uint64_t size = f->ahead_size;
        st.v[0] = f->ahead_off; /* made ahead (make_ahead): no libhdf5 call, no broadcast */
        if (!f->ext_count || !f->ahead_off || f->ahead_size < fl->need) {
            size = next_extent(f, fl->need); /* a too small one's name is reused */
            if (f->rank == 0) {
                h5l_err_t e = {0};
                char name[64];
                snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
                st.code = h5l_anchor_alloc(f->anc, name, size, &st.v[0], &e);
                if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
            }
            f->ahead_off = f->ahead_size = 0;
            int rc = bcast_status(f, &st);
            if (rc) return rc;
        }
        f->ahead_off = f->ahead_size = 0;
        f->ext_off = st.v[0];
        f->ext_size = size;
        f->ext_used = 0;
        f->ext_count++;
        f->ext_total += size;
    }
    uint64_t at = f->ext_off + f->ext_used;
    fl->doff = !fl->tot[0] ? 0 : fl->match ? f->res_off : at;
    fl->moff = at + dneed;
    fl->res_next = fl->reserve ? fl->moff + fl->tot[1] : 0;
    return H5L_OK;
}

/* Rank 0, a file continued by h5l_open: the anchors of the objects it
 * had (h5l_anchor_rebuild), made once, when first needed. */
static int ensure_anchors(h5l_file_t *f)
{
    if (!f->anc_lazy || !f->anc) return H5L_OK;
    h5l_err_t e = {0};
    int rc = h5l_anchor_rebuild(f->anc, &f->schema, f->anc_lazy, &e);
    if (rc) return fail(f, rc, "%s: making the anchors of its objects: %s", f->path, e.msg);
    f->anc_lazy = 0;
    return H5L_OK;
}

/* Step 4: write. Rank 0 mirrors the tick's definitions into the HDF5 file
 * (its failure stops the commit); every rank writes its data and then its
 * record block, independently, every byte checked. The data goes in
 * blocks of WRITE_BLOCK bytes, each hashed (its segment checksums, into
 * the record block) right before it is written: the write then copies
 * bytes still in the last-level cache, and a rank hashes while another
 * one's write holds the file (local file systems serialise the writes to
 * one file). Blocks are large because every write takes that lock: with
 * 512 KiB blocks, ranks waiting for it spun on it (rwsem_spin_on_owner)
 * for 35% of the flush's CPU time with 4 ranks on 2 cores, against none
 * with 32 MiB. Returns this rank's code (not yet agreed: flush_commit
 * gathers them). */
_Static_assert(WRITE_BLOCK % ((uint64_t)1 << H5L_SEGLOG_DEFAULT) == 0, "a write block is whole segments");
static int flush_write(h5l_file_t *f, flush_t *fl)
{
    int wrc = H5L_OK;
    if (f->rank == 0 && f->nops && f->anc_lazy) /* a continued file's anchors: at its first definition */
        wrc = ensure_anchors(f);
    if (f->rank == 0)
        for (size_t i = 0; i < f->nops && !wrc; i++) {
            h5l_err_t e = {0};
            wrc = h5l_anchor_op(f->anc, &f->schema, fl->tick, &f->ops[i], &e);
            if (wrc) fail(f, wrc, "%s", e.msg);
        }
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)fl->tick);
    uint8_t *sums = f->recs.p + fl->rlen;
    uint64_t dst = fl->doff + fl->pre[0];
    /* bytes written early (write_early) are in place unless the sizes
     * changed; the pieces hold the rest, from f->wt on */
    if (f->wt) {
        memcpy(sums, f->wsums, (size_t)(f->wt >> f->seglog) * 8);
        if (!wrc && dst != f->res_off + f->res_pre) wrc = move_early(f, fl->tick, f->res_off + f->res_pre, dst, f->wt);
    }
    uint64_t todo = f->data_bytes;
    if (f->tail == f->data_bytes && f->tail > f->wt && dst == f->res_off + f->res_pre) {
        todo = f->wt; /* the last segment is in place too (write_tail) */
        memcpy(sums + (f->wt >> f->seglog) * 8, f->wsums + (f->wt >> f->seglog) * 8, 8);
    }
    ppos_t hpos = {0, 0}, wpos = {0, 0};
    for (uint64_t o = f->wt; o < todo && !wrc; o += WRITE_BLOCK) {
        uint64_t len = f->data_bytes - o < WRITE_BLOCK ? f->data_bytes - o : WRITE_BLOCK;
        uint64_t j0 = o >> f->seglog, j1 = (o + len + ((uint64_t)1 << f->seglog) - 1) >> f->seglog;
        hash_segments(f, fl->tick, f->pieces, &hpos, j0, j1, sums + j0 * 8);
        wrc = write_pieces(f, what, (MPI_Offset)(dst + o), f->pieces, wpos, len);
        ppos_advance(f->pieces, &wpos, len);
    }
    if (!wrc) {
        h5l_block_t blk;
        h5l_block_decode(f->recs.p, &blk);
        blk.checksum = h5l_block_sum(f->recs.p, f->seed, fl->tick, (uint32_t)f->rank);
        h5l_block_encode(&blk, f->recs.p);
        piece_t b = {f->recs.p, (size_t)fl->blen};
        snprintf(what, sizeof what, "the record block of tick %llu", (unsigned long long)fl->tick);
        wrc = write_pieces(f, what, (MPI_Offset)(fl->moff + fl->pre[1]), &b, (ppos_t){0, 0}, fl->blen);
    }
    if (!wrc && f->opts.sync == H5L_SYNC_TICK && MPI_File_sync(f->fh) != MPI_SUCCESS)
        wrc = fail(f, H5L_EIO, "%s: MPI_File_sync after tick %llu failed", f->path, (unsigned long long)fl->tick);
    return wrc;
}

/* Step 5: commit. Every rank's write has returned once rank 0 has all the
 * statuses: only then may rank 0 seal the TICK frame and append it; the
 * broadcast carries the verdict, with the message of the rank that failed.
 * If the append fails the tick stays sealed (seal_frame): its bytes are
 * all written, so every rank moves on as if it were published and the next
 * flush or the close appends the same frame again (fl->sealed). */
static int flush_commit(h5l_file_t *f, flush_t *fl, int wrc)
{
    int worst = 0, who = 0;
    int rc = reduce_status(f, wrc, &worst, &who);
    if (rc) return rc;
    bstat_t st = {0};
    if (f->rank == 0 && worst) {
        st.code = worst;
        st.from = who;
        if (who == 0) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    } else if (f->rank == 0) {
#ifdef H5L_TEST_HOOKS
        /* test hook, in the test build only (libh5log_test.a): die with
         * every byte of this tick written but not committed, to prove
         * readers never see it */
        const char *k = getenv("H5L_TEST_KILL_BEFORE_COMMIT");
        if (k && strtoull(k, NULL, 10) == fl->tick) raise(SIGKILL);
#endif
        h5l_tick_info_t ti = {fl->tick,   now_ns(), (uint32_t)f->size, fl->doff,
                              fl->tot[0], fl->moff, fl->tot[1],        fl->tot[2]};
        h5l_buf_t pl = {0};
        h5l_tick_encode(&pl, &ti, (uint32_t)(f->nops + fl->ngrown));
        h5l_buf_put(&pl, fl->opsb.p, fl->opsb.len);
        if (pl.oom || fl->opsb.oom)
            st.code =
                fail(f, H5L_ENOMEM, "%s: out of memory building tick %llu", f->path, (unsigned long long)fl->tick);
        else
            st.code = seal_frame(f, pl.p, pl.len);
        if (!st.code) /* a checkpoint due at this tick follows its frame, in the same write */
            h5l_ckpt_w_tick(f->ck, &ti, (uint32_t)(f->nops + fl->ngrown), pl.p + H5L_TICK_LEN, pl.len - H5L_TICK_LEN,
                            f->joff, &f->schema, &f->pend);
        if (!st.code) {
            st.v[1] = 1; /* sealed: from now on this tick is this frame */
            st.code = put_sealed(f, fl->tick);
        }
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
        h5l_buf_free(&pl);
    }
    rc = bcast_status(f, &st);
    fl->sealed = st.v[1] && st.code;
    return rc;
}

/* Step 6: publish. The tick is committed (or sealed): the pending state
 * becomes history and the buffers start empty for the next tick. */
static void flush_publish(h5l_file_t *f, flush_t *fl)
{
    for (size_t i = 0; i < fl->ngrown; i++) h5l_schema_apply(&f->schema, fl->tick, &fl->grown[i], NULL);
    for (size_t i = 0; i < f->nops; i++) h5l_op_clear(&f->ops[i]);
    f->nops = 0;
    f->npieces = 0;
    f->recs.len = H5L_BLOCK_LEN;
    f->res_off = fl->res_next;
    f->res_pre = fl->pre[0];
    f->res_len = f->data_bytes;
    f->early = f->res_off && f->res_len;
    f->wt = f->tail = 0;
    if (fl->tot[0]) { /* the sizes the next tick is compared with */
        uint64_t *t = f->sz_last;
        f->sz_last = f->sz_now;
        f->sz_now = t;
        f->sz_known = 1;
    }
    f->nrec = f->data_bytes = f->nputs = 0;
    f->arena_used = 0;
    f->ext_used += fl->need;
    /* a next tick like this one would not fit: make the next extent
     * ahead (make_ahead), for ticks large enough to allocate often */
    if (!f->ahead_size && fl->need >= AHEAD_MIN && f->ext_size - f->ext_used < fl->need)
        f->ahead_size = next_extent(f, fl->need);
    if (fl->nd) memset(f->want, 0, fl->nd * sizeof *f->want);
    f->ndims_committed = fl->nd;
    f->tick = fl->tick;
    f->sealed = fl->sealed;
}

/* Rank 0, after a flush: make the extent publish asked for. Every rank
 * waits for an extent made in a flush's place step (libhdf5 on rank 0:
 * 4-6 ms with 1000 variables in the file, and a broadcast), with the file
 * idle; made here, rank 0 does it while the other ranks go on with their
 * puts and early writes. The next flush_agree carries the offset to every
 * rank; a failure only leaves the extent to be made when needed. */
static void make_ahead(h5l_file_t *f)
{
    if (f->rank != 0 || !f->ahead_size || f->ahead_off) return;
    h5l_err_t e = {0};
    char name[64];
    snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
    if (h5l_anchor_alloc(f->anc, name, f->ahead_size, &f->ahead_off, &e)) f->ahead_off = 0;
}

/* One flush is one tick, in the six steps above; each is collective where
 * it says so, and a failure in any leaves the buffered puts and records as
 * they were, so the caller may retry the flush to the same place. */
int h5l_flush(h5l_file_t *f)
{
    int rc = check_open(f);
    if (rc) return rc;
    if (f->sealed) {
        /* a tick whose commit failed goes first, exactly as it was built;
         * then this flush publishes what was put since, if anything was */
        if ((rc = commit_sealed(f))) return rc;
        uint64_t more = f->nops + f->nputs;
        if (MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_UINT64_T, MPI_MAX, f->comm) != MPI_SUCCESS)
            return fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
        if (!more) return H5L_OK;
    }
    /* this rank's data fills its reserved place exactly: its last bytes go
     * there before the flush waits for the other ranks (if their sizes
     * changed, flush_write moves them with the rest) */
    if (f->early && f->data_bytes == f->res_len && f->tail != f->data_bytes) write_tail(f);
    flush_t fl = {.tick = f->tick + 1, .nd = f->schema.ndims};
    size_t rlen = f->recs.len;
    int lrc = finish_block(f, fl.tick, &fl.blen, &rlen); /* a local failure still takes part in step 1 */
    fl.rlen = rlen;
    if (!(rc = flush_agree(f, &fl, lrc)) && !(rc = flush_grow(f, &fl)) && !(rc = flush_place(f, &fl)))
        rc = flush_commit(f, &fl, flush_write(f, &fl));
    if (!rc || fl.sealed) { /* sealed: published, and the append's error returned */
        flush_publish(f, &fl);
        rlen = f->recs.len;
        make_ahead(f);
    }
    f->recs.len = rlen; /* a failed flush leaves the records as they were, for a retry */
    flush_free(&fl);
    return rc;
}

/* Append to a message, cutting what does not fit. */
static void msg_append(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msg_append(char *msg, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(msg);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, cap - n, fmt, ap);
    va_end(ap);
}

/* Rank 0's first step of close (format.md 6): the CLOSE frame. With a
 * sealed tick nothing is appended: a CLOSE frame over the sealed frame's
 * torn prefix would change bytes live readers may hold. */
static int close_append(h5l_file_t *f, h5l_err_t *e)
{
    if (f->sealed) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return h5l_err_set(e, H5L_EIO, "%s: not closed, tick %llu could not be committed", f->path,
                           (unsigned long long)f->tick);
    }
    uint8_t pl[16];
    h5l_put_le64(pl, f->tick);
    h5l_put_le64(pl + 8, now_ns());
    int c = journal_append(f, H5L_REC_CLOSE, pl, sizeof pl);
    if (c) h5l_err_set(e, c, "%s", f->errmsg);
    if (!c && f->opts.sync == H5L_SYNC_TICK && fsync(f->jfd) != 0)
        c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->jpath, strerror(errno));
    if (c) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return c;
    }
    /* the extent made ahead of a tick that never came: without it the
     * file's size is its data's, not up to three times that (its space,
     * the end of the file, goes back to libhdf5 before finalizing
     * allocates) */
    if (f->ahead_off) {
        char name[64];
        snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
        h5l_anchor_drop(f->anc, name);
        f->ahead_off = f->ahead_size = 0;
    }
    return c;
}

/* Finalizing with every rank (format.md 1.1, 6), after the CLOSE frame:
 * each rank plans from its own reader of the journal; when the plans
 * agree, rank 0 builds the objects and allocates their storage, every
 * rank writes its share of the copies, and rank 0 learns whether all
 * did. *pp (rank 0): the plan to finish with, or NULL: finalize alone
 * (a rank could not plan, or planned otherwise: a file system that does
 * not show rank 0's journal to the others yet). *fail (rank 0): a reason
 * finalizing was given up (in e), 0 if not. MPI failures are returned. */
static int close_finalize(h5l_file_t *f, h5l_final_t **pp, int *given_up, h5l_err_t *e)
{
    *pp = NULL;
    *given_up = 0;
    h5l_reader_t *r = NULL;
    h5l_final_t *p = NULL;
    h5l_err_t le = {0};
    int lrc = h5l_reader_open(f->path, &r, &le);
    if (!lrc && h5l_reader_ntick(r) != f->tick) lrc = H5L_ECORRUPT;
    if (!lrc) lrc = h5l_final_plan(r, f->tick, &p, &le);
    uint64_t d = p ? h5l_final_digest(p) : 0, mm[2] = {d, ~d};
    int mrc = MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_UINT64_T, MPI_MIN, f->comm);
    int bad = lrc != 0;
    if (mrc == MPI_SUCCESS) mrc = MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, f->comm);
    int rc = mrc == MPI_SUCCESS ? H5L_OK : fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    int agreed = !rc && !bad && mm[0] == ~mm[1];
    bstat_t st = {0};
    if (agreed && f->rank == 0) {
        st.code = h5l_anchor_final_build(f->anc, p, r, &f->schema, f->tick, e);
        if (st.code) *given_up = 1;
    }
    size_t nw = 0;
    const uint64_t *w = p ? h5l_final_addrs(p, &nw) : NULL;
    uint64_t *wc = NULL;
    if (agreed) {
        st.v[0] = nw;
        if (!rc && bcast_bytes(f, &st, (int)sizeof st, 0) != MPI_SUCCESS)
            rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
        nw = (size_t)st.v[0];
        if (!rc && !st.code && !(wc = malloc((nw ? nw : 1) * sizeof *wc)))
            lrc = h5l_err_set(&le, H5L_ENOMEM, "%s: finalizing: out of memory", f->path);
        /* rank 0's addresses, in pieces through a buffer of our own: a rank
         * short of memory still takes part (a collective left out hangs
         * every other rank) */
        for (size_t at = 0; !rc && !st.code && at < nw; at += 512) {
            uint64_t piece[512];
            size_t k = nw - at < 512 ? nw - at : 512;
            if (f->rank == 0) memcpy(piece, w + at, k * sizeof *piece);
            if (bcast_bytes(f, piece, (int)(k * sizeof *piece), 0) != MPI_SUCCESS)
                rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
            if (wc) memcpy(wc + at, piece, k * sizeof *piece);
        }
        /* every rank's share of the copies, then whether all of them made it */
        if (!rc && !st.code) {
            if (!lrc && f->rank) lrc = h5l_final_set_addrs(p, wc, nw, &le);
            int fd = lrc ? -1 : open(f->path, O_WRONLY | O_CLOEXEC);
            if (!lrc && fd < 0) lrc = h5l_err_set(&le, H5L_EIO, "%s: finalizing: %s", f->path, strerror(errno));
            if (!lrc) lrc = h5l_final_copy(p, r, fd, f->rank, f->size, &le);
            if (!lrc && f->opts.sync == H5L_SYNC_TICK && fsync(fd) != 0)
                lrc = h5l_err_set(&le, H5L_EIO, "%s: finalizing: fsync: %s", f->path, strerror(errno));
            if (fd >= 0) close(fd);
            if (lrc) snprintf(f->errmsg, sizeof f->errmsg, "%s", le.msg);
            int worst = 0, who = 0;
            rc = reduce_status(f, lrc, &worst, &who);
            char msg[sizeof e->msg];
            int wm[2] = {worst, who};
            if (!rc && MPI_Bcast(wm, 2, MPI_INT, 0, f->comm) != MPI_SUCCESS)
                rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
            if (!rc && wm[0]) { /* the failing rank's reason, to rank 0 */
                snprintf(msg, sizeof msg, "%s", f->errmsg);
                if (bcast_bytes(f, msg, (int)sizeof msg, wm[1]) != MPI_SUCCESS)
                    rc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
                msg[sizeof msg - 1] = 0;
                if (!rc && f->rank == 0) {
                    h5l_err_set(e, wm[0], "%s", msg);
                    h5l_anchor_final_undo(f->anc, p, &f->schema, f->tick);
                    *given_up = 1;
                }
            }
        }
    }
    free(wc);
    h5l_reader_close(r);
    if (f->rank == 0 && agreed && !*given_up && !rc)
        *pp = p;
    else
        h5l_final_free(p);
    return rc;
}

/* Rank 0, closing a continued file: the journal's bytes from before the
 * reopen (f->jpre, in the sidecar only) put in front of jcopy, so the
 * embedded journal is the whole of it. Read at close, not at open: an
 * open must not cost the log's length. */
static int journal_whole(h5l_file_t *f, h5l_err_t *e)
{
    h5l_buf_t all = {0};
    if (h5l_buf_reserve(&all, (size_t)f->jpre + f->jcopy.len))
        return h5l_err_set(e, H5L_ENOMEM, "%s: out of memory for its %llu-byte journal", f->path,
                           (unsigned long long)(f->jpre + f->jcopy.len));
    int rc = h5l_fd_read_all(f->jfd, all.p, (size_t)f->jpre, 0, f->jpath, e);
    if (rc) {
        h5l_buf_free(&all);
        return rc;
    }
    memcpy(all.p + f->jpre, f->jcopy.p, f->jcopy.len);
    all.len = (size_t)f->jpre + f->jcopy.len;
    h5l_buf_free(&f->jcopy);
    f->jcopy = all;
    f->jpre = 0;
    return H5L_OK;
}

/* Rank 0's last steps of close (format.md 6): the HDF5 file closed with
 * the journal embedded (finalizing first, with plan p, or alone when p is
 * NULL; given_up: finalizing was tried and undone, e says why), the user
 * block marked closed, the sidecar removed — each step only after the one
 * before succeeded, so a failure leaves a live file whose sidecar holds
 * every committed tick (h5l_anchor_finish never lets libhdf5 fail inside
 * H5Fclose, see anchor.c, so the process can still reach MPI_Finalize).
 * *closed: the user block says closed. */
static int close_finish(h5l_file_t *f, h5l_final_t *p, int given_up, h5l_err_t *e, int *closed)
{
    int sync = f->opts.sync == H5L_SYNC_TICK;
    int final = !f->opts.no_finalize && !given_up, c;
    h5l_err_t why = *e;
    if (f->anc_lazy && !final && ensure_anchors(f)) { /* the anchors are what a file closed unfinalized has */
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return h5l_err_set(e, H5L_EHDF5, "%s", f->errmsg);
    }
    if (f->jpre && (c = journal_whole(f, e))) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return c;
    }
    c = h5l_anchor_finish(f->anc, &f->schema, f->tick, f->jcopy.p, f->jcopy.len, sync, p, &final, e);
    f->anc = NULL;
    *closed = !c;
    if (!c && given_up) *e = why;
    if (!c && final == f->opts.no_finalize) {
        /* closed, but finalizing failed and was undone: say so (the
         * caller asked for a file plain readers can read) */
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "%s", e->msg);
        c = h5l_err_set(e, H5L_EIO,
                        "%s; not finalized: plain HDF5 readers refuse its variables (h5logrecover %s "
                        "finalizes it later)",
                        m, f->path);
    }
    if (*closed && unlink(f->jpath) != 0)
        c = h5l_err_set(e, H5L_EIO, "%s: the file is closed, but its journal sidecar cannot be removed: %s", f->jpath,
                        strerror(errno));
    return c;
}

int h5l_close(h5l_file_t *f)
{
    int rc = check_open(f);
    if (rc) return rc;
    /* flush only if some rank has something pending (or a tick is sealed):
     * close adds no empty tick (an explicit h5l_flush always publishes one) */
    uint64_t pending = f->nops + f->nputs + (uint64_t)f->sealed;
    if (MPI_Allreduce(MPI_IN_PLACE, &pending, 1, MPI_UINT64_T, MPI_MAX, f->comm) != MPI_SUCCESS)
        rc = fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    else if (pending)
        rc = h5l_flush(f); /* on failure the committed ticks still stand */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", rc ? f->errmsg : "");
    int lc = H5L_OK;
    if (f->fh_open) {
        f->fh_open = 0;
        if (MPI_File_close(&f->fh) != MPI_SUCCESS) lc = fail(f, H5L_EIO, "%s: MPI_File_close failed", f->path);
    }
    int worst = 0, who = 0, closed = 0;
    int crc = rc == H5L_EMPI ? rc : reduce_status(f, lc, &worst, &who);
    bstat_t st = {0};
    h5l_err_t e = {0};
    /* rank 0 appends the CLOSE frame and says whether the close goes on */
    int appended = 0;
    if (!crc) {
        if (f->rank == 0) {
            st.code = close_append(f, &e);
            if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        }
        if (bcast_bytes(f, &st, (int)sizeof st, 0) != MPI_SUCCESS)
            crc = fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
        appended = !crc && !st.code;
    }
    h5l_final_t *plan = NULL;
    int given_up = 0;
    if (appended && !f->opts.no_finalize) crc = close_finalize(f, &plan, &given_up, &e);
    if (!crc && f->rank == 0) {
        int c = st.code;
        if (appended) c = close_finish(f, plan, given_up, &e, &closed);
        st.code = c ? c : worst;
        st.from = c ? 0 : who;
        st.v[0] = (uint64_t)closed;
        if (c)
            snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        else if (worst && who == 0)
            snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    }
    h5l_final_free(plan);
    if (!crc) {
        crc = bcast_status(f, &st);
        closed = (int)st.v[0];
    }
    /* the message: the first failure, then what the close did about it */
    if (!rc) {
        rc = crc;
        snprintf(msg, sizeof msg, "%s", crc ? f->errmsg : "");
    } else if (crc && crc != H5L_EMPI && !f->sealed) {
        msg_append(msg, sizeof msg, "; then closing failed: %s", f->errmsg);
    }
    if (rc && rc != H5L_EMPI) {
        uint64_t last = f->tick - (uint64_t)f->sealed;
        if (closed)
            msg_append(msg, sizeof msg, "; the file was closed with ticks 1..%llu", (unsigned long long)last);
        else
            msg_append(msg, sizeof msg, "; the file was not closed: ticks 1..%llu stay readable from its journal %s",
                       (unsigned long long)last, f->jpath);
    }
    snprintf(f->errmsg, sizeof f->errmsg, "%s", msg);
    if (rc) snprintf(create_err, sizeof create_err, "%s", f->errmsg);
    f->state = ST_CLOSED;
    free_file(f);
    return rc;
}
