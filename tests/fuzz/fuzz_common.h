/* fuzz_common.h — what the libFuzzer harnesses of tests/fuzz share: a file
 * made of the input's bytes with holes between them (a sparse file claiming
 * gigabytes costs nothing), checksum fix-ups (mutated bytes would otherwise
 * stop at the first checksum, and the decoders behind it would never be
 * reached), writing the files under /dev/shm, and exercising a reader on
 * them: every tick, every variable, a few boxes each, chunk info, data
 * verification.
 *
 * Why fix checksums: XXH3 cannot be guessed by mutation. Each harness takes a
 * flags byte saying which checksums to recompute, so both the "checksum
 * fails" paths and everything behind a good checksum get fuzzed. Static
 * functions only: each harness is one translation unit with libcore's
 * sources. */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5log/codec.h"
#include "h5log/format.h"
#include "h5log_reader.h"
#include "h5log/fdio.h"
#include "journal.h"

#define FZ_UNUSED __attribute__((unused)) /* each harness uses some */
#define FZ_HOLES 8
#define FZ_MAX_SIZE (1ull << 40) /* a sparse file up to 1 TiB */

/* A file: content bytes laid in order around holes. Hole i starts at output
 * offset at[i] (increasing) and is len[i] bytes of nothing; holes past the
 * content extend the file (size). */
typedef struct fz_file {
    uint8_t *b;
    size_t nb;
    uint64_t at[FZ_HOLES], len[FZ_HOLES];
    int nh;
    uint64_t size;
} fz_file_t;

/* Holes from nh (at, len) pairs of the input (16 bytes each), for content
 * f->b[0..nb) already set: made valid (increasing, the file under
 * FZ_MAX_SIZE) rather than refused, so every input means some file. */
static FZ_UNUSED void fz_holes(fz_file_t *f, const uint8_t *p, int n)
{
    uint64_t o = 0, i = 0; /* output offset, content index */
    f->nh = 0;
    for (int h = 0; h < n && h < FZ_HOLES; h++) {
        uint64_t at = h5l_get_le64(p + 16 * h) % (FZ_MAX_SIZE / 2);
        uint64_t len = h5l_get_le64(p + 16 * h + 8) % (FZ_MAX_SIZE / 2 / FZ_HOLES);
        if (len == 0) continue;
        if (at < o) at = o;
        uint64_t k = at - o < f->nb - i ? at - o : f->nb - i; /* content before the hole */
        i += k;
        o += k;
        f->at[f->nh] = o;
        f->len[f->nh] = len;
        f->nh++;
        o += len;
    }
    f->size = o + (f->nb - i);
}

/* Output offset of content byte i. */
static FZ_UNUSED uint64_t fz_off(const fz_file_t *f, uint64_t i)
{
    uint64_t o = i;
    for (int h = 0; h < f->nh && f->at[h] <= o; h++) o += f->len[h];
    return o;
}

/* The n content bytes at output offset o, if they lie in one piece of
 * content; else NULL (a hole, or past the end). */
static FZ_UNUSED uint8_t *fz_at(const fz_file_t *f, uint64_t o, uint64_t n)
{
    uint64_t ps = 0, i = 0; /* start of the current piece, its content index */
    for (int h = 0; h <= f->nh; h++) {
        uint64_t pe = h < f->nh ? f->at[h] : f->size; /* the piece ends where hole h starts */
        if (o >= ps && o <= pe && n <= pe - o) return f->b + i + (o - ps);
        i += pe - ps;
        if (h < f->nh) ps = f->at[h] + f->len[h];
    }
    return NULL;
}

static char fz_dir[64];

static FZ_UNUSED void fz_cleanup(void)
{
    char p[128];
    snprintf(p, sizeof p, "%s/run.h5", fz_dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/run.h5.h5lj", fz_dir);
    unlink(p);
    rmdir(fz_dir);
}

/* The directory of this process's files (under /dev/shm: no disk I/O). */
static FZ_UNUSED const char *fz_path(int sidecar)
{
    static char p[2][128];
    if (!fz_dir[0]) {
        snprintf(fz_dir, sizeof fz_dir, "/dev/shm/h5lfuzz.%d", (int)getpid());
        if (mkdir(fz_dir, 0700) != 0 && errno != EEXIST) abort();
        atexit(fz_cleanup);
        snprintf(p[0], sizeof p[0], "%s/run.h5", fz_dir);
        snprintf(p[1], sizeof p[1], "%s/run.h5.h5lj", fz_dir);
    }
    return p[sidecar];
}

static FZ_UNUSED void fz_put(int fd, const void *p, size_t n, uint64_t off)
{
    if (n && h5l_fd_write(fd, p, n, off, NULL, NULL) != H5L_OK) abort();
}

/* Write f to path: its content around its holes. */
static FZ_UNUSED void fz_write(const fz_file_t *f, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    uint64_t ps = 0, i = 0;
    for (int h = 0; h <= f->nh; h++) {
        uint64_t pe = h < f->nh ? f->at[h] : f->size;
        fz_put(fd, f->b + i, (size_t)(pe - ps), ps);
        i += pe - ps;
        if (h < f->nh) ps = f->at[h] + f->len[h];
    }
    if (ftruncate(fd, (off_t)f->size) != 0) abort();
    close(fd);
}

static FZ_UNUSED void fz_write_bytes(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) abort();
    fz_put(fd, p, n, 0);
    close(fd);
}

/* Recompute the record block checksums of the tick whose TICK payload is p
 * (and, with data, the data segment checksums at the end of each block's
 * payload first), wherever the table and data are content of f. */
static FZ_UNUSED void fz_fix_tick(fz_file_t *f, const uint8_t *p, size_t len, uint64_t seed, unsigned seglog, int data)
{
    h5l_cur_t c = h5l_cur(p, len);
    h5l_tick_info_t t;
    uint32_t nops;
    if (h5l_tick_decode(&c, &t, &nops)) return;
    uint64_t pos = 0, dstart = t.data_off, seg = (uint64_t)1 << seglog;
    for (uint32_t rank = 0; rank < t.nranks && rank < 4096; rank++) {
        pos = (pos + 7) & ~(uint64_t)7;
        if (pos > t.table_size || t.table_size - pos < H5L_BLOCK_LEN) return;
        uint8_t *b = fz_at(f, t.table_off + pos, H5L_BLOCK_LEN);
        if (!b) return;
        h5l_block_t blk;
        h5l_block_decode(b, &blk);
        if (blk.payload > t.table_size - pos - H5L_BLOCK_LEN) return;
        b = fz_at(f, t.table_off + pos, H5L_BLOCK_LEN + (uint64_t)blk.payload);
        if (!b) return;
        uint64_t nseg = (blk.size + seg - 1) / seg;
        if (data && nseg <= blk.payload / 8 && nseg <= 4096) {
            uint8_t *sums = b + H5L_BLOCK_LEN + blk.payload - 8 * nseg;
            for (uint64_t j = 0; j < nseg; j++) {
                uint64_t so = dstart + j * seg, sl = blk.size - j * seg < seg ? blk.size - j * seg : seg;
                const uint8_t *d = fz_at(f, so, sl);
                if (d) h5l_put_le64(sums + 8 * j, h5l_hash(d, (size_t)sl, h5l_seg_seed(seed, t.tick, rank, j)));
            }
        }
        h5l_put_le64(b, h5l_block_sum(b, seed, t.tick, rank));
        pos += H5L_BLOCK_LEN + blk.payload;
        dstart += blk.size;
    }
}

/* Walk the frames of journal bytes j[0..n) (header first), recomputing
 * frame checksums (fix_frames) and, for TICK frames, the tick's tables in f
 * (tables, data: see fz_fix_tick). A frame running past n is left alone. */
static FZ_UNUSED void fz_fix_journal(uint8_t *j, size_t n, uint64_t seed, unsigned seglog, int fix_frames, fz_file_t *f,
                                     int tables, int data)
{
    size_t pos = H5L_JHDR_LEN;
    while (pos + H5L_FRAME_LEN <= n) {
        uint8_t *h = j + pos;
        uint32_t len = h5l_get_le32(h);
        if (len > n - pos - H5L_FRAME_LEN) return;
        uint16_t type = (uint16_t)(h[4] | (h[5] << 8));
        if (f && tables && type == H5L_REC_TICK) fz_fix_tick(f, h + H5L_FRAME_LEN, len, seed, seglog, data);
        if (fix_frames) {
            h5l_put_le64(h + 8, h5l_hash(h + H5L_FRAME_LEN, len, seed));
            h5l_put_le64(h + 16, h5l_hash(h, 16, seed));
        }
        pos += (size_t)h5l_frame_size(len);
    }
}

/* Use a reader on path as the daemon and the tools do, within bounds that
 * keep one input fast: every tick (or the first and last few), every
 * variable, a few boxes of at most 4096 elements, chunk info, verification
 * of ticks with little data, a refresh. Results are not checked (there is
 * no reference); the sanitizers and libFuzzer's limits are the oracle. */
static FZ_UNUSED void fz_exercise(const char *path)
{
    h5l_reader_t *r = NULL;
    h5l_err_t e;
    if (h5l_reader_open(path, &r, &e) != H5L_OK) {
        if (getenv("H5L_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: open: %s\n", e.msg);
        return;
    }
    uint64_t dt = 0;
    int drc = h5l_reader_damage(r, &dt, &e);
    uint64_t nt = h5l_reader_ntick(r);
    if (getenv("H5L_FUZZ_VERBOSE")) /* what an input made: for writing seeds and reading crashes */
        fprintf(stderr, "fuzz: %llu ticks, %llu records%s%s\n", (unsigned long long)nt,
                (unsigned long long)h5l_reader_nrecords(r), drc ? "; damage: " : "", drc ? e.msg : "");
    uint64_t nck = 0, badck = 0;
    (void)h5l_reader_check_checkpoints(r, NULL, NULL, &nck, &badck, &e); /* h5logdump --check's */
    uint8_t *buf = malloc(4096 * 8);
    if (!buf) abort();
    for (uint64_t T = 1; T <= nt; T++) {
        if (nt > 12 && T > 4 && T + 4 <= nt) continue;
        h5l_tick_info_t ti;
        /* loaded ticks have info; a tick of a segment opened from its
         * summary is checked when first needed, and may then be found
         * damaged (format.md 3.5: that fails the calls needing it) */
        int irc = h5l_reader_tick_info(r, T, &ti);
        if (irc == H5L_ECORRUPT && T <= h5l_reader_ckpt_last(r)) continue;
        if (irc != H5L_OK) abort();
        if (ti.data_size <= (4u << 20)) {
            uint64_t bad;
            (void)h5l_reader_verify(r, T, &bad, &e);
        }
        h5l_reader_rdlock(r);
        const h5l_schema_t *s = h5l_reader_schema(r);
        size_t nobjs = s->nobjs < 64 ? s->nobjs : 64;
        h5l_reader_unlock(r);
        for (uint32_t o = 1; o < nobjs; o++) {
            uint64_t shape[H5L_MAX_DIMS], ch[H5L_MAX_DIMS];
            uint32_t nd;
            int chunked;
            h5l_reader_rdlock(r);
            s = h5l_reader_schema(r);
            const h5l_obj_t *ob = &s->objs[o];
            int ok = ob->kind == H5L_OBJ_VAR && ob->tick <= T && h5l_schema_shape(s, o, T, shape) == H5L_OK;
            nd = ok ? ob->ndims : 0;
            chunked = ok && ob->chunked;
            if (ok) memcpy(ch, ob->chunk, nd * sizeof *ch);
            h5l_reader_unlock(r);
            (void)chunked;
            uint64_t st[H5L_MAX_DIMS], cn[H5L_MAX_DIMS];
            if (!ok) {
                memset(st, 0, sizeof st);
                for (int d = 0; d < H5L_MAX_DIMS; d++) cn[d] = 1;
                (void)h5l_reader_read(r, T, o, st, cn, buf, &e); /* must say "no such variable" */
                continue;
            }
            for (int k = 0; k < 5; k++) {
                /* 0: from the origin; 1: the last elements; 2: the middle;
                 * 3: across the first chunk border; 4: out of range */
                uint64_t budget = 4096;
                for (int d = (int)nd - 1; d >= 0; d--) {
                    uint64_t n = shape[d];
                    uint64_t want = k == 1 || k == 3 ? 2 : n;
                    uint64_t c = want < budget ? want : budget;
                    if (c > n) c = n;
                    cn[d] = c;
                    budget = c ? budget / c : budget;
                    st[d] = k == 0           ? 0
                            : k == 1         ? n - c
                            : k == 2         ? (n - c) / 2
                            : ch[d] <= n - c ? ch[d] - (ch[d] > 0)
                                             : n - c;
                    if (k == 4 && d == 0) st[d] = n; /* one past the end, count >= 1 */
                    if (k == 4 && d == 0 && cn[d] == 0) cn[d] = 1;
                }
                if (k == 4 && nd == 0) continue;
                int rc = h5l_reader_read(r, T, o, st, cn, buf, &e);
                if (k == 4 && rc == H5L_OK) abort(); /* a read outside the shape must fail */
                if (k == 0) {
                    h5l_chunk_info_t ci;
                    uint64_t co[H5L_MAX_DIMS] = {0};
                    (void)h5l_reader_chunk_info(r, T, o, co, st, cn, &ci, &e);
                    if (ci.direct) {
                        uint8_t b2[64];
                        (void)h5l_reader_pread(r, ci.direct_tick, ci.direct_rank, b2, sizeof b2, ci.direct_off, &e);
                    }
                }
            }
        }
    }
    free(buf);
    int nnew;
    (void)h5l_reader_refresh(r, &nnew, &e);
    h5l_reader_close(r);
    /* as the daemon opens it: segments setting attributes from their
     * summaries' last values, each tick's attributes through
     * h5l_reader_schema_at (a view read from the segment's frame) */
    if (h5l_reader_open_flags(path, H5L_READER_LAZY_ATTRS, &r, &e) != H5L_OK) return;
    nt = h5l_reader_ntick(r);
    uint64_t sum = 0;
    for (uint64_t T = 1; T <= nt; T++) {
        if (nt > 12 && T > 4 && T + 4 <= nt && T % 97) continue;
        h5l_reader_rdlock(r);
        const h5l_schema_t *s = NULL;
        if (h5l_reader_schema_at(r, T, &s, &e) == H5L_OK) {
            for (size_t i = 0; i < s->nattrs; i++)
                if (h5l_schema_attr_current(s, i, T)) sum += s->attrs[i].n + (uint8_t)s->attrs[i].name[0];
            h5l_reader_schema_release(r, s);
        } else if (s != h5l_reader_schema(r)) {
            abort(); /* a failed view leaves the reader's own */
        }
        h5l_reader_unlock(r);
    }
    if (getenv("H5L_FUZZ_VERBOSE")) fprintf(stderr, "fuzz: lazy attributes %llu\n", (unsigned long long)sum);
    h5l_reader_close(r);
}

#endif
