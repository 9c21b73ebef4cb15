/* format.h — encoding and decoding of every on-file structure of
 * docs/format.md: user block, journal header and frames, TICK/CLOSE payloads,
 * schema ops, record-table blocks and records. Pure functions over bytes; no
 * I/O. Decoders never trust their input: every length is checked. */
#ifndef H5L_FORMAT_H
#define H5L_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "codec.h"
#include "h5log_reader.h"

#define H5L_USERBLOCK_SIZE 4096
#define H5L_UB_LEN 64
#define H5L_JHDR_LEN 64
#define H5L_FRAME_LEN 16
#define H5L_TICK_LEN 64
#define H5L_BLOCK_LEN 48
#define H5L_REC_LEN 32
#define H5L_SIDECAR_SUFFIX ".h5lj"

extern const uint8_t h5l_ub_magic[8];
extern const uint8_t h5l_jhdr_magic[8];
extern const uint8_t h5l_block_magic[8];

enum { H5L_UB_CLOSED = 1 };
enum { H5L_REC_TICK = 1, H5L_REC_CLOSE = 2 };
enum { H5L_OP_GROUP = 1, H5L_OP_DIM = 2, H5L_OP_VAR = 3, H5L_OP_ATTR = 4,
       H5L_OP_DIMLEN = 5 };

typedef struct h5l_ub {
    uint32_t version;
    uint8_t id[16];
    uint64_t jr_off, jr_len, flags;
} h5l_ub_t;

typedef struct h5l_jhdr {
    uint32_t version;
    uint8_t id[16];
    uint64_t ctime_ns;
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
int h5l_ub_decode(const uint8_t in[H5L_UB_LEN], h5l_ub_t *ub, const char *what,
                  h5l_err_t *err);
void h5l_jhdr_encode(const h5l_jhdr_t *h, uint8_t out[H5L_JHDR_LEN]);
int h5l_jhdr_decode(const uint8_t in[H5L_JHDR_LEN], h5l_jhdr_t *h,
                    const char *what, h5l_err_t *err);

/* Append a whole frame (header, payload, padding) to b. */
void h5l_frame_encode(h5l_buf_t *b, uint16_t type, const void *payload,
                      uint32_t len, uint64_t seed);

/* A schema op (docs/format.md 3.3). Decoded ops own their pointers. */
typedef struct h5l_op {
    uint16_t kind;
    uint32_t id;       /* objid or dimid */
    char *name;        /* path (GROUP, VAR), name (DIM, ATTR) */
    h5l_type_t type;   /* VAR, ATTR */
    uint32_t flags;    /* DIM: unlimited; VAR: chunked */
    uint64_t len;      /* DIM length, DIMLEN new length, ATTR n */
    uint32_t ndims;    /* VAR */
    uint32_t *dimids;  /* VAR */
    uint64_t *chunk;   /* VAR */
    void *data;        /* VAR fill, ATTR value */
    size_t data_len;
} h5l_op_t;

void h5l_op_encode(h5l_buf_t *b, const h5l_op_t *op);
/* Decode one op; on failure returns H5L_ECORRUPT and frees what it took. */
int h5l_op_decode(h5l_cur_t *c, h5l_op_t *op);
void h5l_op_clear(h5l_op_t *op);

/* TICK payload header (without ops); nops separately. */
void h5l_tick_encode(h5l_buf_t *b, const h5l_tick_info_t *t, uint32_t nops);
int h5l_tick_decode(h5l_cur_t *c, h5l_tick_info_t *t, uint32_t *nops);

typedef struct h5l_block {
    uint32_t version, rank;
    uint64_t tick, nrec, payload, checksum;
} h5l_block_t;

void h5l_block_encode(const h5l_block_t *blk, uint8_t out[H5L_BLOCK_LEN]);
int h5l_block_decode(const uint8_t in[H5L_BLOCK_LEN], h5l_block_t *blk);

/* One record's fixed part; boxes follow (start[nd], count[nd] per box). */
typedef struct h5l_recfix {
    uint32_t objid, nboxes;
    uint64_t order, offset, size;
} h5l_recfix_t;

void h5l_rec_encode(h5l_buf_t *b, const h5l_recfix_t *r, uint32_t ndims,
                    const uint64_t *start, const uint64_t *count);
/* Decode the fixed part only (the caller knows ndims from objid). */
int h5l_recfix_decode(h5l_cur_t *c, h5l_recfix_t *r);

/* Type descriptor: 4 bytes. Valid: int 1/2/4/8, float 4/8, string 1. */
void h5l_type_encode(h5l_buf_t *b, h5l_type_t t);
h5l_type_t h5l_type_decode(h5l_cur_t *c);
int h5l_type_valid(h5l_type_t t);

#endif
