/* wint.h — the writer's insides shared by its files (not an interface:
 * write/writer.c, wopen.c, wdefine.c, wput.c, wflush.c and wclose.c only).
 *
 * writer.c makes a file (h5l_create), answers lookups and holds the
 * collectives every step uses; wopen.c continues an existing file
 * (h5l_open); wdefine.c the definitions; wput.c the puts and the records
 * they grow; wflush.c the flush's fixed sequence of steps (agree, grow,
 * place, write, commit, publish) and early writes; wclose.c the close and
 * its finalize. They share struct h5l_file and the functions below
 * (h5l_w_). */
#ifndef H5L_WINT_H
#define H5L_WINT_H

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
    h5l_ckpt_w_t *ck; /* index checkpoints (ckbuild.c); NULL: none */
    char *lockpath;   /* the writer's lock file (wlock.c), removed by free_file */
    /* A file continued by h5l_open: jpre journal bytes (those before the
     * reopen) are in the sidecar but not in jcopy, read back at close;
     * anc_lazy: the anchors of ticks <= it are still to be made
     * (h5l_anchor_rebuild), 0 when made. */
    int reopened;
    uint64_t jpre, anc_lazy;
};

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

/* What each rank tells every other one at the start of a flush, in one
 * MPI_Allgather (flush_agree): its data bytes, record block bytes, records,
 * the hash of its encoded definitions, a local failure flag, its number
 * of dimensions, whether it has early writes off and (rank 0) the offset of the
 * extent it made ahead, then the extent it wants along every dimension committed
 * before the flush. */
enum { AGG_N = 8 };

/* write/writer.c (each function's contract is its comment there) */
/* the message of a create or open that failed, or of a close, after the
 * handle is gone (h5l_errmsg(NULL)) */
extern _Thread_local char h5l_w_create_err[512];
int h5l_w_fail(h5l_file_t *f, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int h5l_w_gath_room(h5l_file_t *f, size_t ndims);
uint64_t h5l_w_now_ns(void);
void h5l_w_free_file(h5l_file_t *f);
int h5l_w_coll_wait(MPI_Request *rq);
int h5l_w_bcast_bytes(h5l_file_t *f, void *p, int n, int root);
int h5l_w_bcast_status(h5l_file_t *f, bstat_t *st);
int h5l_w_reduce_status(h5l_file_t *f, int code, int *worst, int *who);
int h5l_w_agree(h5l_file_t *f, int code);
int h5l_w_file_new(const char *path, MPI_Comm comm, const h5l_opts_t *opts, const char *fn, h5l_file_t **out);
int h5l_w_file_ready(h5l_file_t *f, int rc, h5l_file_t **out);

/* write/wdefine.c (each function's contract is its comment there) */
int h5l_w_check_open(h5l_file_t *f);
const h5l_obj_t *h5l_w_get_var(h5l_file_t *f, int varid);

/* write/wput.c (each function's contract is its comment there) */
size_t h5l_w_openrec_max(const openrec_t *r);
void h5l_w_write_early(h5l_file_t *f);
void h5l_w_openrec_close(h5l_file_t *f);

/* write/wflush.c (each function's contract is its comment there) */
int h5l_w_journal_append(h5l_file_t *f, uint16_t type, const void *payload, size_t len);
int h5l_w_ensure_anchors(h5l_file_t *f);

#endif
