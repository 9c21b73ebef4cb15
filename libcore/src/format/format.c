/* format.c — encoders and decoders for docs/format.md. Each decoder checks
 * every length against the bytes it was given, so a corrupt or hostile file
 * yields an error, never an out-of-bounds read. */
#include "h5log/format.h"

#include <stdlib.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

const uint8_t h5l_ub_magic[8] = {0x89, 'H', '5', 'L', 'O', 'G', '\r', '\n'};
const uint8_t h5l_jhdr_magic[8] = {0x89, 'H', '5', 'L', 'J', 'N', 'L', '\n'};
const uint8_t h5l_block_magic[8] = {'H', '5', 'L', 'R', 'E', 'C', 'S', 0};

uint64_t h5l_hash(const void *p, size_t n, uint64_t seed) { return XXH3_64bits_withSeed(p, n, seed); }

/* Streaming over two pieces. The state must be initialised before the
 * reset: xxhash 0.8.1's XXH3_64bits_reset_withSeed skips rebuilding its
 * secret when the (uninitialised) state already holds the same seed, and a
 * stale stack then hashes any input over 240 bytes wrong. */
uint64_t h5l_hash2(const void *a, size_t na, const void *b, size_t nb, uint64_t seed)
{
    XXH3_state_t st;
    XXH3_INITSTATE(&st);
    XXH3_64bits_reset_withSeed(&st, seed);
    XXH3_64bits_update(&st, a, na);
    XXH3_64bits_update(&st, b, nb);
    return XXH3_64bits_digest(&st);
}

uint64_t h5l_seed(const uint8_t id[16]) { return h5l_get_le64(id) ^ h5l_get_le64(id + 8); }

struct h5l_hstream {
    XXH3_state_t st;
};

h5l_hstream_t *h5l_hstream_new(void)
{
    h5l_hstream_t *h = aligned_alloc(64, sizeof *h);
    if (h) {
        memset(h, 0, sizeof *h);
        XXH3_INITSTATE(&h->st);
    }
    return h;
}

void h5l_hstream_free(h5l_hstream_t *h) { free(h); }
void h5l_hstream_reset(h5l_hstream_t *h, uint64_t seed) { XXH3_64bits_reset_withSeed(&h->st, seed); }
void h5l_hstream_update(h5l_hstream_t *h, const void *p, size_t n) { XXH3_64bits_update(&h->st, p, n); }
uint64_t h5l_hstream_digest(const h5l_hstream_t *h) { return XXH3_64bits_digest(&h->st); }

void h5l_ub_encode(const h5l_ub_t *ub, uint8_t out[H5L_UB_LEN])
{
    memset(out, 0, H5L_UB_LEN);
    memcpy(out, h5l_ub_magic, 8);
    h5l_put_le32(out + 8, ub->version);
    h5l_put_le32(out + 12, H5L_UB_LEN);
    memcpy(out + 16, ub->id, 16);
    h5l_put_le64(out + 32, ub->jr_off);
    h5l_put_le64(out + 40, ub->jr_len);
    h5l_put_le64(out + 48, ub->flags);
    h5l_put_le64(out + 56, h5l_hash(out, 56, 0));
}

int h5l_ub_decode(const uint8_t in[H5L_UB_LEN], h5l_ub_t *ub, const char *what, h5l_err_t *err)
{
    if (memcmp(in, h5l_ub_magic, 8) != 0)
        return h5l_err_set(err, H5L_EFORMAT, "%s: not a log-layout file (no h5log user block)", what);
    ub->version = h5l_get_le32(in + 8);
    if (ub->version != H5L_FORMAT_VERSION)
        return h5l_err_set(
            err, H5L_EFORMAT, "%s: unsupported format version %u (%s): this h5logfs reads format %u only", what,
            ub->version,
            ub->version < H5L_FORMAT_VERSION ? "written by an older h5logfs" : "written by a newer h5logfs",
            H5L_FORMAT_VERSION);
    if (h5l_get_le32(in + 12) != H5L_UB_LEN || h5l_get_le64(in + 56) != h5l_hash(in, 56, 0))
        return h5l_err_set(err, H5L_ECORRUPT, "%s: user block checksum mismatch", what);
    memcpy(ub->id, in + 16, 16);
    ub->jr_off = h5l_get_le64(in + 32);
    ub->jr_len = h5l_get_le64(in + 40);
    ub->flags = h5l_get_le64(in + 48);
    return H5L_OK;
}

void h5l_jhdr_encode(const h5l_jhdr_t *h, uint8_t out[H5L_JHDR_LEN])
{
    memset(out, 0, H5L_JHDR_LEN);
    memcpy(out, h5l_jhdr_magic, 8);
    h5l_put_le32(out + 8, h->version);
    h5l_put_le32(out + 12, H5L_JHDR_LEN);
    memcpy(out + 16, h->id, 16);
    h5l_put_le64(out + 32, h->ctime_ns);
    h5l_put_le32(out + 40, h->seglog);
    h5l_put_le64(out + 56, h5l_hash(out, 56, 0));
}

int h5l_jhdr_decode(const uint8_t in[H5L_JHDR_LEN], h5l_jhdr_t *h, const char *what, h5l_err_t *err)
{
    if (memcmp(in, h5l_jhdr_magic, 8) != 0)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal header magic missing", what);
    h->version = h5l_get_le32(in + 8);
    if (h->version != H5L_FORMAT_VERSION)
        return h5l_err_set(err, H5L_EFORMAT, "%s: unsupported journal version %u: this h5logfs reads format %u only",
                           what, h->version, H5L_FORMAT_VERSION);
    if (h5l_get_le32(in + 12) != H5L_JHDR_LEN || h5l_get_le64(in + 56) != h5l_hash(in, 56, 0))
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal header checksum mismatch", what);
    memcpy(h->id, in + 16, 16);
    h->ctime_ns = h5l_get_le64(in + 32);
    h->seglog = h5l_get_le32(in + 40);
    if (h->seglog < H5L_SEGLOG_MIN || h->seglog > H5L_SEGLOG_MAX)
        return h5l_err_set(err, H5L_ECORRUPT, "%s: journal header: data segment size 2^%u out of range", what,
                           h->seglog);
    return H5L_OK;
}

void h5l_frame_encode(h5l_buf_t *b, uint16_t type, const void *payload, uint32_t len, uint64_t seed)
{
    uint8_t h[H5L_FRAME_LEN];
    h5l_put_le32(h, len);
    h[4] = (uint8_t)type;
    h[5] = (uint8_t)(type >> 8);
    h[6] = H5L_FORMAT_VERSION;
    h[7] = 0;
    h5l_put_le64(h + 8, h5l_hash(payload, len, seed));
    h5l_put_le64(h + 16, h5l_hash(h, 16, seed));
    h5l_buf_put(b, h, sizeof h);
    h5l_buf_put(b, payload, len);
    h5l_buf_pad8(b);
}

int h5l_frame_hdr_decode(const uint8_t h[H5L_FRAME_LEN], uint64_t seed, h5l_frame_hdr_t *out)
{
    if (h5l_get_le64(h + 16) != h5l_hash(h, 16, seed)) return H5L_FRAME_BADSUM;
    out->len = h5l_get_le32(h);
    out->type = (uint16_t)(h[4] | (h[5] << 8));
    out->version = (uint16_t)(h[6] | (h[7] << 8));
    out->sum = h5l_get_le64(h + 8);
    if (out->version != H5L_FORMAT_VERSION || out->len > H5L_FRAME_MAX) return H5L_FRAME_BADVER;
    return H5L_FRAME_OK;
}

int h5l_type_valid(h5l_type_t t)
{
    if (t.order > 1) return 0;
    switch (t.cls) {
    case H5L_CLASS_INT:
        return (t.size == 1 || t.size == 2 || t.size == 4 || t.size == 8) && t.sign <= 1;
    case H5L_CLASS_FLOAT:
        return (t.size == 4 || t.size == 8) && t.sign == 0;
    case H5L_CLASS_STRING:
        return t.size == 1 && t.sign == 0;
    default:
        return 0;
    }
}

size_t h5l_type_size(h5l_type_t t) { return t.size; }

void h5l_type_encode(h5l_buf_t *b, h5l_type_t t)
{
    uint8_t v[4] = {t.cls, t.size, t.sign, t.order};
    h5l_buf_put(b, v, 4);
}

h5l_type_t h5l_type_decode(h5l_cur_t *c)
{
    h5l_type_t t = {0, 0, 0, 0};
    const uint8_t *p = h5l_cur_take(c, 4);
    if (p) {
        t.cls = p[0];
        t.size = p[1];
        t.sign = p[2];
        t.order = p[3];
    }
    return t;
}

void h5l_op_encode(h5l_buf_t *b, const h5l_op_t *op)
{
    h5l_buf_t body = {0};
    switch (op->kind) {
    case H5L_OP_GROUP:
        h5l_buf_u32(&body, op->id);
        h5l_buf_str(&body, op->name);
        break;
    case H5L_OP_DIM:
        h5l_buf_u32(&body, op->id);
        h5l_buf_u32(&body, op->flags);
        h5l_buf_u64(&body, op->len);
        h5l_buf_str(&body, op->name);
        break;
    case H5L_OP_VAR:
        h5l_buf_u32(&body, op->id);
        h5l_type_encode(&body, op->type);
        h5l_buf_u32(&body, op->flags);
        h5l_buf_u32(&body, op->ndims);
        for (uint32_t i = 0; i < op->ndims; i++) h5l_buf_u32(&body, op->dimids[i]);
        for (uint32_t i = 0; i < op->ndims; i++) h5l_buf_u64(&body, op->chunk[i]);
        h5l_buf_put(&body, op->data, op->type.size);
        h5l_buf_str(&body, op->name);
        break;
    case H5L_OP_ATTR:
        h5l_buf_u32(&body, op->id);
        h5l_type_encode(&body, op->type);
        h5l_buf_u64(&body, op->len);
        h5l_buf_put(&body, op->data, op->data_len);
        h5l_buf_str(&body, op->name);
        break;
    case H5L_OP_DIMLEN:
        h5l_buf_u32(&body, op->id);
        h5l_buf_u64(&body, op->len);
        break;
    }
    if (body.oom) b->oom = 1;
    h5l_buf_u16(b, op->kind);
    h5l_buf_u16(b, 0);
    h5l_buf_u32(b, (uint32_t)body.len);
    h5l_buf_put(b, body.p, body.len);
    h5l_buf_pad8(b);
    h5l_buf_free(&body);
}

void h5l_op_clear(h5l_op_t *op)
{
    free(op->name);
    free(op->dimids);
    free(op->chunk);
    free(op->data);
    memset(op, 0, sizeof *op);
}

/* Decode the body of one op from c (exactly B bytes). */
static int op_body(h5l_cur_t *c, h5l_op_t *op)
{
    op->id = h5l_cur_u32(c);
    switch (op->kind) {
    case H5L_OP_GROUP:
        op->name = h5l_cur_str(c);
        break;
    case H5L_OP_DIM:
        op->flags = h5l_cur_u32(c);
        op->len = h5l_cur_u64(c);
        op->name = h5l_cur_str(c);
        break;
    case H5L_OP_VAR: {
        op->type = h5l_type_decode(c);
        op->flags = h5l_cur_u32(c);
        op->ndims = h5l_cur_u32(c);
        if (c->bad || op->ndims > H5L_MAX_DIMS || !h5l_type_valid(op->type) || op->type.cls == H5L_CLASS_STRING)
            return H5L_ECORRUPT;
        op->dimids = calloc(op->ndims + 1, sizeof *op->dimids);
        op->chunk = calloc(op->ndims + 1, sizeof *op->chunk);
        op->data = malloc(op->type.size);
        if (!op->dimids || !op->chunk || !op->data) return H5L_ENOMEM;
        for (uint32_t i = 0; i < op->ndims; i++) op->dimids[i] = h5l_cur_u32(c);
        for (uint32_t i = 0; i < op->ndims; i++) op->chunk[i] = h5l_cur_u64(c);
        const uint8_t *f = h5l_cur_take(c, op->type.size);
        if (f) memcpy(op->data, f, op->type.size);
        op->data_len = op->type.size;
        op->name = h5l_cur_str(c);
        break;
    }
    case H5L_OP_ATTR: {
        op->type = h5l_type_decode(c);
        op->len = h5l_cur_u64(c);
        if (c->bad || !h5l_type_valid(op->type) || op->len > (c->len - c->pos) / op->type.size) return H5L_ECORRUPT;
        op->data_len = (size_t)op->len * op->type.size;
        op->data = malloc(op->data_len + 1);
        if (!op->data) return H5L_ENOMEM;
        const uint8_t *v = h5l_cur_take(c, op->data_len);
        if (v) memcpy(op->data, v, op->data_len);
        op->name = h5l_cur_str(c);
        break;
    }
    case H5L_OP_DIMLEN:
        op->len = h5l_cur_u64(c);
        break;
    default:
        return H5L_ECORRUPT;
    }
    return c->oom ? H5L_ENOMEM : c->bad ? H5L_ECORRUPT : H5L_OK;
}

int h5l_op_decode(h5l_cur_t *c, h5l_op_t *op)
{
    memset(op, 0, sizeof *op);
    op->kind = h5l_cur_u16(c);
    (void)h5l_cur_u16(c);
    uint32_t blen = h5l_cur_u32(c);
    const uint8_t *body = h5l_cur_take(c, blen);
    size_t pad = (8 - (8 + (size_t)blen) % 8) % 8;
    if (!body || !h5l_cur_take(c, pad)) return H5L_ECORRUPT;
    h5l_cur_t bc = h5l_cur(body, blen);
    int rc = op_body(&bc, op);
    if (rc == H5L_OK && bc.pos != bc.len) rc = H5L_ECORRUPT;
    if (rc) h5l_op_clear(op);
    return rc;
}

void h5l_tick_encode(h5l_buf_t *b, const h5l_tick_info_t *t, uint32_t nops)
{
    h5l_buf_u64(b, t->tick);
    h5l_buf_u64(b, t->time_ns);
    h5l_buf_u32(b, t->nranks);
    h5l_buf_u32(b, nops);
    h5l_buf_u64(b, t->data_off);
    h5l_buf_u64(b, t->data_size);
    h5l_buf_u64(b, t->table_off);
    h5l_buf_u64(b, t->table_size);
    h5l_buf_u64(b, t->nrecords);
}

int h5l_tick_decode(h5l_cur_t *c, h5l_tick_info_t *t, uint32_t *nops)
{
    t->tick = h5l_cur_u64(c);
    t->time_ns = h5l_cur_u64(c);
    t->nranks = h5l_cur_u32(c);
    *nops = h5l_cur_u32(c);
    t->data_off = h5l_cur_u64(c);
    t->data_size = h5l_cur_u64(c);
    t->table_off = h5l_cur_u64(c);
    t->table_size = h5l_cur_u64(c);
    t->nrecords = h5l_cur_u64(c);
    return c->bad ? H5L_ECORRUPT : H5L_OK;
}

void h5l_block_encode(const h5l_block_t *blk, uint8_t out[H5L_BLOCK_LEN])
{
    h5l_put_le64(out, blk->checksum);
    h5l_put_le32(out + 8, blk->payload);
    h5l_put_le32(out + 12, blk->nrec);
    h5l_put_le64(out + 16, blk->size);
}

void h5l_block_decode(const uint8_t in[H5L_BLOCK_LEN], h5l_block_t *blk)
{
    blk->checksum = h5l_get_le64(in);
    blk->payload = h5l_get_le32(in + 8);
    blk->nrec = h5l_get_le32(in + 12);
    blk->size = h5l_get_le64(in + 16);
}

uint64_t h5l_block_seed(uint64_t seed, uint64_t tick, uint32_t rank)
{
    return seed ^ (tick * 0x9E3779B97F4A7C15ull) ^ (((uint64_t)rank + 1) * 0xC2B2AE3D27D4EB4Full);
}

uint64_t h5l_block_sum(const uint8_t *block, uint64_t seed, uint64_t tick, uint32_t rank)
{
    uint32_t p = h5l_get_le32(block + 8);
    return h5l_hash(block + 8, 16 + (size_t)p, h5l_block_seed(seed, tick, rank));
}

void h5l_rec_encode(h5l_buf_t *b, uint32_t objid, uint32_t nboxes, uint32_t ndims, const uint64_t *start,
                    const uint64_t *count)
{
    h5l_buf_varint(b, objid);
    h5l_buf_varint(b, nboxes);
    for (uint32_t k = 0; k < nboxes; k++) {
        for (uint32_t i = 0; i < ndims; i++) h5l_buf_varint(b, start[(size_t)k * ndims + i]);
        for (uint32_t i = 0; i < ndims; i++) h5l_buf_varint(b, count[(size_t)k * ndims + i]);
    }
}

int h5l_rec_head_decode(h5l_cur_t *c, uint32_t *objid, uint32_t *nboxes)
{
    uint64_t o = h5l_cur_varint(c), n = h5l_cur_varint(c);
    if (c->bad || o > UINT32_MAX || n > UINT32_MAX) return H5L_ECORRUPT;
    *objid = (uint32_t)o;
    *nboxes = (uint32_t)n;
    return H5L_OK;
}
