/* ckpt.h — index checkpoints (docs/format.md 3.5): encoding and decoding of
 * the CHECKPOINT frame and its summary. (The writer's builder is
 * write/ckbuild.h, the reader's chain and chunk map read/ckchain.h and
 * read/ckmap.h.)
 *
 * Why a module of its own: a checkpoint summarises a segment of ticks (their
 * TICK payloads, re-encoded compactly, and which index chunks each tick's
 * records touch) so readers can open a long log without decoding every
 * frame and record table. Both the writer (rank 0, at the commit step) and
 * readers meet only through these bytes, so encoder and decoder live side by
 * side; the writer and reader keep a hook each, nothing more. */
#ifndef H5L_CKPT_H
#define H5L_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include "h5log/codec.h"
#include "h5log/error.h"
#include "h5log/format.h"
#include "h5log_reader.h"

#define H5L_REC_CKPT 0x8003u                 /* frame type: optional (bit 15), kind 3 */
#define H5L_CKPT_HDR 48                      /* fixed part of the payload */
#define H5L_CKPT_WIDE 8                      /* a box touching more index chunks makes its tick eager */
#define H5L_CKPT_EVERY_DEFAULT 1024          /* writer's default N (docs/performance.md); H5L_CKPT_TICKS overrides */
#define H5L_CKPT_TABLES ((uint64_t)16 << 20) /* ... or sooner, at this many bytes of record tables */
#define H5L_CKPT_ENV "H5L_CKPT_TICKS"

/* One tick of a segment: its TICK payload without the 64-byte header
 * (ops point into the decoded frame's bytes, or the encoder's input). */
typedef struct h5l_ckpt_tick {
    h5l_tick_info_t info;
    uint32_t nops;
    const uint8_t *ops;
    size_t opslen;
} h5l_ckpt_tick_t;

/* One index chunk and the ticks of the segment that touch it. */
typedef struct h5l_ckpt_chunk {
    uint32_t objid, nd;
    const uint64_t *coord; /* nd */
    size_t nt;
    const uint64_t *ticks; /* nt, increasing */
} h5l_ckpt_chunk_t;

/* A checkpoint, decoded (or to encode). */
typedef struct h5l_ckpt {
    uint64_t first, last;   /* the segment: ticks first..last */
    uint64_t tickpos;       /* journal offset of the TICK frame of first */
    uint64_t selfpos;       /* journal offset of this frame */
    uint64_t prevpos;       /* journal offset of the previous checkpoint, 0: none */
    h5l_ckpt_tick_t *ticks; /* last - first + 1 */
    uint64_t *eager;        /* neager increasing ticks */
    size_t neager;
    h5l_ckpt_chunk_t *chunks; /* nchunks, strictly increasing (objid, coord) */
    size_t nchunks;
    uint64_t *u64s; /* decoded: owns eager, coords and tick lists */
} h5l_ckpt_t;

/* Append the whole frame (header, payload, padding) of c to b (b->oom on
 * allocation failure), with its summary. c must be valid (as
 * h5l_ckpt_decode would accept). h5l_ckpt_encode_nosum: without one (the
 * layout of earlier writers, which readers still take). */
void h5l_ckpt_encode(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed);
void h5l_ckpt_encode_nosum(h5l_buf_t *b, const h5l_ckpt_t *c, uint64_t seed);

/* A segment's summary (format.md 3.5), decoded. */
typedef struct h5l_ckdim_run {
    uint32_t dimid;
    uint64_t tick, len, n, dt, dl;
} h5l_ckdim_run_t;
typedef struct h5l_ckchunk_run {
    uint32_t objid, nd;
    uint64_t coord[H5L_MAX_DIMS];
    uint64_t cnt, k, t0, dt;
} h5l_ckchunk_run_t;
typedef struct h5l_cksum {
    int simple;
    int attrs; /* flags bit 1: at[] holds the segment's last attribute values */
    uint64_t nrec;
    h5l_ckdim_run_t *dr;
    size_t ndr;
    h5l_ckchunk_run_t *cr;
    size_t ncr;
    h5l_op_t *at; /* nat ATTR ops, decoded (owned) */
    size_t nat;
} h5l_cksum_t;

/* The summary bytes of segment c (format.md 3.5), appended to out. */
void h5l_cksum_of(const h5l_ckpt_t *c, h5l_buf_t *out);
/* Decode n summary bytes of the segment first..last into *s (every field
 * in its bounds, the chunk runs in the entries' order, and no more ticks
 * and chunks than avail bytes of entries can list). 0, H5L_ECORRUPT or
 * H5L_ENOMEM; h5l_cksum_free either way. */
int h5l_cksum_decode(const uint8_t *p, size_t n, uint64_t first, uint64_t last, uint64_t avail, h5l_cksum_t *s);
void h5l_cksum_free(h5l_cksum_t *s);

/* Decode the frame of n bytes at frame (header included), found at journal
 * offset pos: both checksums, type, version, every field and bound of
 * format.md 3.5. 0, or H5L_ECORRUPT (or H5L_ENOMEM) with the reason naming
 * `what` and pos. Tick ops point into frame: keep it while c is used.
 * h5l_ckpt_clear frees what c owns. */
int h5l_ckpt_decode(const uint8_t *frame, size_t n, uint64_t seed, uint64_t pos, h5l_ckpt_t *c, const char *what,
                    h5l_err_t *err);
void h5l_ckpt_clear(h5l_ckpt_t *c);

/* The index chunks the records of one record table touch: tab holds the
 * table of tick t (t->table_size bytes); every block is checked against its
 * checksum. fn(ctx, objid, nd, coord) is called per (box, chunk), possibly
 * repeating a chunk. Returns 0; 1 when a box touches more than
 * H5L_CKPT_WIDE chunks (the tick is eager: fn calls made so far are to be
 * dropped); H5L_ECORRUPT when the table does not check; H5L_ENOMEM or the
 * first non-zero fn result otherwise. */
typedef int (*h5l_ckpt_chunk_fn)(void *ctx, uint32_t objid, uint32_t nd, const uint64_t *coord);
int h5l_ckpt_table_chunks(const uint8_t *tab, const h5l_tick_info_t *t, uint64_t seed, const h5l_schema_t *s,
                          h5l_ckpt_chunk_fn fn, void *ctx);

#endif
