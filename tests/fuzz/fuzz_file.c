/* fuzz_file.c — libFuzzer harness: open and read a whole closed
 * log-layout file (user block, data, record tables, embedded journal) given
 * as the input, optionally with holes, so sizes the file claims can be
 * backed by a sparse file of up to a terabyte.
 *
 * Input:
 *   u8 flags     bit 0 fix the user block's and journal header's checksums,
 *                bit 1 the frames', bit 2 the record blocks', bit 3 the data
 *                segments' (so mutations get past each checksum)
 *   u8 nholes    holes (at most 8), then nholes x (u64 output offset,
 *                u64 length): the file is the remaining bytes with these
 *                holes inserted (holes past the end extend it)
 *   the file's bytes
 * Then the reader opens the file and reads every variable at every tick
 * (fz_exercise). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint8_t flags = data[0];
    int nh = data[1] % (FZ_HOLES + 1);
    size_t p = 2 + 16 * (size_t)nh;
    if (p > size) return 0;
    fz_file_t f = {0};
    f.nb = size - p;
    f.b = malloc(f.nb ? f.nb : 1);
    if (!f.b) abort();
    memcpy(f.b, data + p, f.nb);
    fz_holes(&f, data + 2, nh);
    uint8_t *u = fz_at(&f, 0, H5L_UB_LEN);
    if (u) {
        uint64_t joff = h5l_get_le64(u + 32), jlen = h5l_get_le64(u + 40);
        uint8_t *j = jlen >= H5L_JHDR_LEN && jlen <= f.nb ? fz_at(&f, joff, jlen) : NULL;
        if (j) {
            uint32_t seglog = h5l_get_le32(j + 40);
            if (seglog < H5L_SEGLOG_MIN || seglog > H5L_SEGLOG_MAX) seglog = H5L_SEGLOG_DEFAULT;
            uint64_t seed = h5l_seed(u + 16);
            if (flags & 1) h5l_put_le64(j + 56, h5l_hash(j, 56, 0));
            fz_fix_journal(j, (size_t)jlen, seed, seglog, flags & 2, &f, flags & 12, flags & 8);
        }
        if (flags & 1) h5l_put_le64(u + 56, h5l_hash(u, 56, 0));
    }
    fz_write(&f, fz_path(0));
    unlink(fz_path(1));
    fz_exercise(fz_path(0));
    free(f.b);
    return 0;
}
