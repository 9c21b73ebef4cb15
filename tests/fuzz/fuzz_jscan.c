/* fuzz_jscan.c — libFuzzer harness: the journal scanner (h5l_jscan_next)
 * over arbitrary bytes, live and embedded, and the decoders of what it
 * returns (TICK header, schema ops applied to a schema, CLOSE, records).
 *
 * Input: u8 flags, 16 bytes of file identity (the checksum seed), then the
 * journal's frames (the 64-byte header is implied). flags: bit 0 live
 * (torn tails allowed), bit 1 recompute every frame's checksums first (so
 * mutations reach what lies behind them), bit 2 also scan through a file
 * descriptor (the reader's windowed path) and require the same answer as
 * the in-memory scan; bits 3..7 pick a prefix of the journal to scan as
 * well, whose answer must agree with the whole journal's (a prefix of its
 * frames; damage only where the whole journal is damaged too). */
#include <sys/mman.h>

#include "fuzz_common.h"
#include "schema.h"

#define MAXFR 4096

typedef struct {
    int k;    /* the last h5l_jscan_next result */
    size_t n; /* frames before it */
    uint64_t pos[MAXFR], next[MAXFR];
    uint16_t type[MAXFR];
    uint64_t stop; /* position of the call that ended the scan */
} scan_t;

/* Decode a frame's payload as the reader does and apply TICK ops to a
 * schema (errors are answers, not failures). */
static void decode(const h5l_frame_t *fr, h5l_schema_t *sch)
{
    h5l_cur_t c = h5l_cur(fr->payload, fr->len);
    if (fr->type == H5L_REC_TICK) {
        h5l_tick_info_t t;
        uint32_t nops;
        if (h5l_tick_decode(&c, &t, &nops)) return;
        for (uint32_t i = 0; i < nops; i++) {
            h5l_op_t op;
            if (h5l_op_decode(&c, &op)) break;
            h5l_err_t e;
            (void)h5l_schema_apply(sch, t.tick, &op, &e);
            h5l_op_clear(&op);
        }
    } else {
        /* anything else, as a stream of records of 1..3 dimensions */
        uint32_t nd = fr->len ? fr->payload[0] % 4 : 0;
        while (!c.bad && c.pos < c.len) {
            uint32_t objid, nb;
            if (h5l_rec_head_decode(&c, &objid, &nb)) break;
            for (uint64_t j = 0; j < (uint64_t)nb * 2 * nd && !c.bad; j++) (void)h5l_cur_varint(&c);
        }
    }
}

static void scan(int fd, const uint8_t *j, uint64_t end, int live, uint64_t seed, scan_t *out, h5l_schema_t *sch)
{
    h5l_jscan_t s;
    h5l_jscan_init(&s, fd, fd < 0 ? j : NULL, 0, live, seed, "fuzz");
    uint64_t pos = H5L_JHDR_LEN;
    h5l_err_t e;
    out->n = 0;
    for (;;) {
        h5l_frame_t fr;
        out->stop = pos;
        out->k = h5l_jscan_next(&s, pos, end, &fr, &e);
        if (out->k != 1) break;
        if (fr.pos != pos || fr.next <= pos || fr.next > end || fr.len > end - pos) abort();
        if (fr.damaged) { /* an optional frame skipped whole: no payload, its header's length */
            if (fr.payload || fr.len || !(fr.type & H5L_REC_OPTIONAL) || (fr.next - pos) % 8 ||
                fr.next - pos < h5l_frame_size(0))
                abort();
        } else if (fr.next - pos != h5l_frame_size(fr.len)) {
            abort();
        }
        if (out->n < MAXFR) {
            out->pos[out->n] = fr.pos;
            out->next[out->n] = fr.next;
            out->type[out->n] = fr.type;
        }
        out->n++;
        if (sch) decode(&fr, sch);
        pos = fr.next;
    }
    if (out->k == 0 && !live && pos < end) abort();                 /* an embedded journal has no torn tail */
    if (out->k == 0 && pos < end && live && s.need <= end) abort(); /* a retry needs more bytes */
    h5l_jscan_free(&s);
}

static int same(const scan_t *a, const scan_t *b)
{
    if (a->k != b->k || a->n != b->n || a->stop != b->stop) return 0;
    for (size_t i = 0; i < a->n && i < MAXFR; i++)
        if (a->pos[i] != b->pos[i] || a->next[i] != b->next[i] || a->type[i] != b->type[i]) return 0;
    return 1;
}

static scan_t full, part, viafd;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 17) return 0;
    uint8_t flags = data[0];
    uint64_t seed = h5l_seed(data + 1);
    size_t n = H5L_JHDR_LEN + size - 17;
    uint8_t *j = malloc(n);
    if (!j) abort();
    memset(j, 0, H5L_JHDR_LEN);
    memcpy(j + H5L_JHDR_LEN, data + 17, size - 17);
    if (flags & 2) fz_fix_journal(j, n, seed, H5L_SEGLOG_DEFAULT, 1, NULL, 0, 0);
    int live = flags & 1;
    h5l_schema_t sch;
    if (h5l_schema_init(&sch)) abort();
    scan(-1, j, n, live, seed, &full, &sch);
    h5l_schema_free(&sch);

    /* a prefix: its frames are the whole journal's first ones; it is
     * damaged only where the whole journal is */
    uint64_t cut = H5L_JHDR_LEN + (n - H5L_JHDR_LEN) * (flags >> 3) / 32;
    scan(-1, j, cut, live, seed, &part, NULL);
    if (part.n > full.n) abort();
    for (size_t i = 0; i < part.n && i < MAXFR; i++)
        if (part.pos[i] != full.pos[i] || part.next[i] != full.next[i]) abort();
    if (live && part.k == H5L_ECORRUPT && !(full.k == H5L_ECORRUPT && full.stop == part.stop)) abort();

    if (flags & 4) { /* the same bytes through a file: the windowed reads */
        int fd = memfd_create("jscan", MFD_CLOEXEC);
        if (fd < 0) abort();
        fz_put(fd, j, n, 0);
        scan(fd, NULL, n, live, seed, &viafd, NULL);
        close(fd);
        if (!same(&full, &viafd)) abort();
    }
    free(j);
    return 0;
}
