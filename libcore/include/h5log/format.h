/* format.h — encoding and decoding of every on-file structure of
 * docs/format.md: user block, journal header and frames, TICK/CLOSE payloads,
 * schema ops, record-table blocks and records. Pure functions over bytes; no
 * I/O. Decoders never trust their input: every length is checked. */
#ifndef H5L_FORMAT_H
#define H5L_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "h5log/codec.h"
#include "h5log_reader.h"
#include "h5log/error.h"

#define H5L_USERBLOCK_SIZE 4096
#define H5L_UB_LEN 64
#define H5L_JHDR_LEN 64
#define H5L_FRAME_LEN 24
#define H5L_FRAME_MAX ((uint32_t)256 << 20) /* largest frame payload */
#define H5L_TICK_LEN 64
#define H5L_BLOCK_LEN 24
#define H5L_REC_MIN 3        /* smallest encoded record (scalar variable) */
#define H5L_REC_MAXBOXES 256 /* boxes the writer puts in one record */
#define H5L_SEGLOG_MIN 12
#define H5L_SEGLOG_MAX 20
#define H5L_SEGLOG_DEFAULT 15 /* 32 KiB data checksum segments */
#define H5L_SIDECAR_SUFFIX ".h5lj"
/* h5l_reader_open_flags, inside the library only: the schema, ticks and
 * journal position, not the map of which checkpointed ticks touch which
 * chunk (a writer continuing a file, h5l_open, reads no data: building
 * that map was 70% of opening a log of 10^5 ticks over 1,000 variables).
 * Reads of data through such a reader may miss records of checkpointed
 * ticks: it must not be used for them. */
#define H5L_READER_NO_CHUNK_MAP 0x40000000u

extern const uint8_t h5l_ub_magic[8];
extern const uint8_t h5l_jhdr_magic[8];
extern const uint8_t h5l_block_magic[8];

enum { H5L_UB_CLOSED = 1, H5L_UB_FINALIZED = 2 }; /* format.md 2 */
enum { H5L_REC_TICK = 1, H5L_REC_CLOSE = 2, H5L_REC_OPTIONAL = 0x8000 };
enum { H5L_OP_GROUP = 1, H5L_OP_DIM = 2, H5L_OP_VAR = 3, H5L_OP_ATTR = 4, H5L_OP_DIMLEN = 5 };

typedef struct h5l_ub {
    uint32_t version;
    uint8_t id[16];
    uint64_t jr_off, jr_len, flags;
} h5l_ub_t;

typedef struct h5l_jhdr {
    uint32_t version;
    uint8_t id[16];
    uint64_t ctime_ns;
    uint32_t seglog; /* data checksum segments are 2^seglog bytes */
} h5l_jhdr_t;

/* The checksum seed of a file identity. */
uint64_t h5l_seed(const uint8_t id[16]);
uint64_t h5l_hash(const void *p, size_t n, uint64_t seed);
/* The hash of the concatenation a || b, without copying: equals h5l_hash
 * of the joined bytes. */
uint64_t h5l_hash2(const void *a, size_t na, const void *b, size_t nb, uint64_t seed);

void h5l_ub_encode(const h5l_ub_t *ub, uint8_t out[H5L_UB_LEN]);
/* H5L_EFORMAT if the magic is absent or the version unknown, H5L_ECORRUPT on a
 * bad checksum; `what` names the file in the message. */
int h5l_ub_decode(const uint8_t in[H5L_UB_LEN], h5l_ub_t *ub, const char *what, h5l_err_t *err);
void h5l_jhdr_encode(const h5l_jhdr_t *h, uint8_t out[H5L_JHDR_LEN]);
int h5l_jhdr_decode(const uint8_t in[H5L_JHDR_LEN], h5l_jhdr_t *h, const char *what, h5l_err_t *err);

/* Append a whole frame (header, payload, padding) to b. */
void h5l_frame_encode(h5l_buf_t *b, uint16_t type, const void *payload, uint32_t len, uint64_t seed);
/* A frame header, decoded (docs/format.md 3.2). */
typedef struct h5l_frame_hdr {
    uint32_t len; /* payload bytes */
    uint16_t type;
    uint16_t version;
    uint64_t sum; /* the payload's checksum */
} h5l_frame_hdr_t;

/* Decode the H5L_FRAME_LEN header bytes at h, next to the encoder so the
 * two cannot drift: H5L_FRAME_OK; H5L_FRAME_BADSUM if the header fails its
 * own checksum (torn or damaged: the scanner decides which); or
 * H5L_FRAME_BADVER for another format version or a length over
 * H5L_FRAME_MAX (*out is filled in every case but the first failure). */
enum { H5L_FRAME_OK = 0, H5L_FRAME_BADSUM = 1, H5L_FRAME_BADVER = 2 };
int h5l_frame_hdr_decode(const uint8_t h[H5L_FRAME_LEN], uint64_t seed, h5l_frame_hdr_t *out);

/* Bytes a frame of payload length len takes (header and padding). */
static inline uint64_t h5l_frame_size(uint64_t len) { return (H5L_FRAME_LEN + len + 7) & ~(uint64_t)7; }

/* A schema op (docs/format.md 3.3). Decoded ops own their pointers. */
typedef struct h5l_op {
    uint16_t kind;
    uint32_t id;      /* objid or dimid */
    char *name;       /* path (GROUP, VAR), name (DIM, ATTR) */
    h5l_type_t type;  /* VAR, ATTR */
    uint32_t flags;   /* DIM: unlimited; VAR: chunked */
    uint64_t len;     /* DIM length, DIMLEN new length, ATTR n */
    uint32_t ndims;   /* VAR */
    uint32_t *dimids; /* VAR */
    uint64_t *chunk;  /* VAR */
    void *data;       /* VAR fill, ATTR value */
    size_t data_len;
} h5l_op_t;

void h5l_op_encode(h5l_buf_t *b, const h5l_op_t *op);
/* Decode one op; on failure returns H5L_ECORRUPT and frees what it took. */
int h5l_op_decode(h5l_cur_t *c, h5l_op_t *op);
void h5l_op_clear(h5l_op_t *op);

/* TICK payload header (without ops); nops separately. */
void h5l_tick_encode(h5l_buf_t *b, const h5l_tick_info_t *t, uint32_t nops);
int h5l_tick_decode(h5l_cur_t *c, h5l_tick_info_t *t, uint32_t *nops);

/* A record-table block header (docs/format.md 4). */
typedef struct h5l_block {
    uint64_t checksum;
    uint32_t payload, nrec;
    uint64_t size; /* the rank's data bytes in the tick */
} h5l_block_t;

void h5l_block_encode(const h5l_block_t *blk, uint8_t out[H5L_BLOCK_LEN]);
void h5l_block_decode(const uint8_t in[H5L_BLOCK_LEN], h5l_block_t *blk);
/* The checksum seed of the block of (tick, rank). */
uint64_t h5l_block_seed(uint64_t seed, uint64_t tick, uint32_t rank);
/* Checksum of a whole encoded block (header bytes 8..24 and payload). */
uint64_t h5l_block_sum(const uint8_t *block, uint64_t seed, uint64_t tick, uint32_t rank);
/* The checksum seed of data segment j of (tick, rank). */
static inline uint64_t h5l_seg_seed(uint64_t seed, uint64_t tick, uint32_t rank, uint64_t j)
{
    return h5l_block_seed(seed, tick, rank) ^ ((j + 1) * 0xD6E8FEB86659FD93ull);
}

/* A streaming XXH3 hash (initialised properly: see h5l_hash2). */
typedef struct h5l_hstream h5l_hstream_t;
h5l_hstream_t *h5l_hstream_new(void); /* NULL: out of memory */
void h5l_hstream_free(h5l_hstream_t *h);
void h5l_hstream_reset(h5l_hstream_t *h, uint64_t seed);
void h5l_hstream_update(h5l_hstream_t *h, const void *p, size_t n);
uint64_t h5l_hstream_digest(const h5l_hstream_t *h); /* does not end the stream */

/* A record (docs/format.md 4): objid, nboxes, then nboxes boxes of
 * start[ndims], count[ndims], as varints. */
void h5l_rec_encode(h5l_buf_t *b, uint32_t objid, uint32_t nboxes, uint32_t ndims, const uint64_t *start,
                    const uint64_t *count);
/* Decode a record's objid and number of boxes (the caller knows ndims from
 * objid and reads the boxes with h5l_cur_varint). H5L_ECORRUPT if they run
 * past the end or do not fit 32 bits. */
int h5l_rec_head_decode(h5l_cur_t *c, uint32_t *objid, uint32_t *nboxes);

/* Type descriptor: 4 bytes. Valid: int 1/2/4/8, float 4/8, string 1. */
void h5l_type_encode(h5l_buf_t *b, h5l_type_t t);
h5l_type_t h5l_type_decode(h5l_cur_t *c);
int h5l_type_valid(h5l_type_t t);

#endif
