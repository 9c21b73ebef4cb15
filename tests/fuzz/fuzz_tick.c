/* fuzz_tick.c — libFuzzer harness: loading ticks (TICK payloads, schema
 * ops, record tables, data) and reading them, on a valid skeleton.
 *
 * The harness makes a log-layout file whose user block and journal header
 * are right and whose TICK frames verify; everything the frames say comes
 * from the input. Input:
 *   u8 flags      bit 0 fix the record blocks' checksums, bit 1 fix the
 *                 data segment checksums (before bit 0), bit 2 closed file
 *                 (journal embedded) instead of a live sidecar, bit 3 end
 *                 with a CLOSE frame, bit 4 a hole (below) in the file
 *   u8 seglog     data segment size, 12 + seglog % 9
 *   16 bytes      file identity
 *   16 bytes      the hole: u64 output offset, u64 length (sparse: a file
 *                 may claim terabytes of data for nothing)
 *   u32 n, n bytes  the region: laid right after the user block (offset
 *                 4096); TICK offsets are relative to it
 *   then TICK payloads, each u32 length and its bytes (offsets rebased by
 *   4096 here)
 * Then the reader opens the file and reads every variable at every tick
 * (fz_exercise). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 38) return 0;
    uint8_t flags = data[0];
    unsigned seglog = 12 + data[1] % 9;
    const uint8_t *id = data + 2;
    uint64_t seed = h5l_seed(id);
    const uint8_t *hole = data + 18;
    uint32_t rlen = h5l_get_le32(data + 34);
    size_t p = 38;
    if (rlen > size - p) rlen = (uint32_t)(size - p);
    /* the TICK payloads, rebased */
    h5l_buf_t pays = {0};
    size_t npay = 0, starts[256], lens[256];
    size_t q = p + rlen;
    while (q + 4 <= size && npay < 256) {
        uint32_t l = h5l_get_le32(data + q);
        q += 4;
        if (l > size - q) l = (uint32_t)(size - q);
        starts[npay] = pays.len;
        lens[npay] = l;
        h5l_buf_put(&pays, data + q, l);
        if (l >= H5L_TICK_LEN) {
            uint8_t *t = pays.p + starts[npay];
            h5l_put_le64(t + 24, h5l_get_le64(t + 24) + H5L_USERBLOCK_SIZE);
            h5l_put_le64(t + 40, h5l_get_le64(t + 40) + H5L_USERBLOCK_SIZE);
        }
        npay++;
        q += l;
    }
    /* the journal */
    h5l_buf_t jr = {0};
    uint8_t hdr[H5L_JHDR_LEN];
    h5l_jhdr_t jh = {.version = H5L_FORMAT_VERSION, .ctime_ns = 1, .seglog = seglog};
    memcpy(jh.id, id, 16);
    h5l_jhdr_encode(&jh, hdr);
    h5l_buf_put(&jr, hdr, sizeof hdr);
    static const uint8_t none[1];
    const uint8_t *pay0 = pays.p ? pays.p : none; /* every payload empty: nothing was put */
    for (size_t i = 0; i < npay; i++) h5l_frame_encode(&jr, H5L_REC_TICK, pay0 + starts[i], (uint32_t)lens[i], seed);
    if (flags & 8) {
        uint8_t cl[16] = {0};
        h5l_put_le64(cl, npay);
        h5l_frame_encode(&jr, H5L_REC_CLOSE, cl, sizeof cl, seed);
    }
    /* the file: user block, region, (closed) the journal */
    fz_file_t f = {0};
    f.nb = H5L_USERBLOCK_SIZE + rlen + ((flags & 4) ? 8 + jr.len : 0);
    f.b = calloc(1, f.nb);
    if (!f.b || pays.oom || jr.oom) abort();
    memcpy(f.b + H5L_USERBLOCK_SIZE, data + p, rlen);
    size_t jat = (H5L_USERBLOCK_SIZE + rlen + 7) & ~(size_t)7;
    if (flags & 4) memcpy(f.b + jat, jr.p, jr.len);
    if (flags & 16)
        fz_holes(&f, hole, 1);
    else
        fz_holes(&f, hole, 0);
    for (size_t i = 0; i < npay; i++)
        if (flags & 3) fz_fix_tick(&f, pay0 + starts[i], lens[i], seed, seglog, flags & 2);
    h5l_ub_t ub = {.version = H5L_FORMAT_VERSION};
    memcpy(ub.id, id, 16);
    if (flags & 4) {
        ub.jr_off = fz_off(&f, jat);
        ub.jr_len = jr.len;
        ub.flags = H5L_UB_CLOSED;
    }
    h5l_ub_encode(&ub, f.b);
    fz_write(&f, fz_path(0));
    if (flags & 4)
        unlink(fz_path(1));
    else
        fz_write_bytes(fz_path(1), jr.p, jr.len);
    fz_exercise(fz_path(0));
    free(f.b);
    h5l_buf_free(&jr);
    h5l_buf_free(&pays);
    return 0;
}
