/* test_journal.c — journal frames and the torn-tail rules of docs/format.md
 * 3.2, through the scanner (h5l_jscan_next, over bytes in memory and over a
 * file) and through h5l_journal_create/h5l_journal_append on a real file.
 *
 * Why: a live reader polls a journal a writer is appending to. It must tell
 * "not written yet" (any prefix of a valid journal, a zero-filled tail, a
 * damaged payload of the LAST frame) from damage (a bad header anywhere, a
 * bad frame with anything after it — in particular one flipped bit in a
 * frame's length, which used to make every later tick look torn), must say
 * how long the journal must grow before a retry can help, and must never
 * crash on any input. Frames are also built here by an independent encoder,
 * so the library's encoder is checked byte for byte. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#include "h5log/codec.h"
#include "h5log/format.h"
#include "h5log/fdio.h"
#include "journal.h"
#include "tharness.h"

static const uint8_t ID[16] = {0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE,
                               0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};

static uint64_t seed_of(const uint8_t id[16])
{
    uint64_t a = 0, b = 0;
    for (int i = 7; i >= 0; i--) {
        a = a << 8 | id[i];
        b = b << 8 | id[8 + i];
    }
    return a ^ b;
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Independent frame encoder (format.md 3.2), any type, version and length
 * field: 24-byte header (length, type, version, payload checksum, header
 * checksum), payload, zero padding to 8. */
static void my_frame(h5l_buf_t *b, uint16_t type, uint16_t ver, const uint8_t *pl, uint32_t len, uint64_t seed)
{
    uint8_t h[24];
    put_le(h, len, 4);
    put_le(h + 4, type, 2);
    put_le(h + 6, ver, 2);
    put_le(h + 8, XXH3_64bits_withSeed(pl, len, seed), 8);
    put_le(h + 16, XXH3_64bits_withSeed(h, 16, seed), 8);
    h5l_buf_put(b, h, 24);
    h5l_buf_put(b, pl, len);
    static const uint8_t z[8];
    if ((24 + len) % 8) h5l_buf_put(b, z, 8 - (24 + len) % 8);
}

#define NFR 6
/* A journal: header, then TICK frames of assorted payload lengths (0, odd,
 * multiple of 8, larger) and a CLOSE. starts[i] is where frame i begins. */
typedef struct {
    h5l_buf_t b;
    size_t starts[NFR + 1]; /* starts[NFR] = end */
    uint8_t payload[NFR][200];
    uint32_t plen[NFR];
    uint16_t type[NFR];
} jr_t;

static void build(jr_t *j, uint64_t seed)
{
    memset(j, 0, sizeof *j);
    h5l_jhdr_t h = {.version = 2, .ctime_ns = 5, .seglog = 15};
    memcpy(h.id, ID, 16);
    uint8_t hdr[H5L_JHDR_LEN];
    h5l_jhdr_encode(&h, hdr);
    h5l_buf_put(&j->b, hdr, sizeof hdr);
    static const uint32_t lens[NFR] = {64, 0, 13, 72, 199, 16};
    for (int i = 0; i < NFR; i++) {
        j->plen[i] = lens[i];
        j->type[i] = i == NFR - 1 ? H5L_REC_CLOSE : H5L_REC_TICK;
        for (uint32_t k = 0; k < lens[i]; k++) j->payload[i][k] = (uint8_t)(i * 31 + k * 3 + 1);
        j->starts[i] = j->b.len;
        h5l_frame_encode(&j->b, j->type[i], j->payload[i], lens[i], seed);
    }
    j->starts[NFR] = j->b.len;
}

/* Scan data[0..len) from the header on (live or embedded). Returns the
 * number of frames found, *rc the final return (0 or an error), *need what
 * the scanner says a retry needs. */
static int walk(const uint8_t *data, size_t len, uint64_t seed, uint64_t base, int live, int *rc, uint64_t *need,
                h5l_err_t *err, jr_t *check)
{
    h5l_jscan_t s;
    h5l_jscan_init(&s, -1, data, base, live, seed, "J");
    uint64_t pos = H5L_JHDR_LEN;
    int n = 0;
    for (;;) {
        h5l_frame_t fr;
        int k = h5l_jscan_next(&s, pos, len, &fr, err);
        if (k != 1) {
            *rc = k;
            if (need) *need = s.need;
            h5l_jscan_free(&s);
            return n;
        }
        if (check && n < NFR) {
            CHECK_EQ(fr.type, check->type[n]);
            CHECK_EQ(fr.len, check->plen[n]);
            CHECK(fr.payload == data + check->starts[n] + 24);
            CHECK(fr.len == 0 || memcmp(fr.payload, check->payload[n], fr.len) == 0);
            CHECK_EQ(fr.next, check->starts[n + 1]);
            CHECK_EQ(fr.pos, check->starts[n]);
        }
        if (fr.next <= pos) { /* no progress would loop forever */
            CHECK(0);
            *rc = -999;
            h5l_jscan_free(&s);
            return n;
        }
        pos = fr.next;
        n++;
    }
}

static void test_encoder_matches_spec(void)
{
    uint64_t seed = seed_of(ID);
    CHECK(seed == h5l_seed(ID));
    jr_t j;
    build(&j, seed);
    h5l_buf_t mine = {0};
    h5l_buf_put(&mine, j.b.p, H5L_JHDR_LEN);
    for (int i = 0; i < NFR; i++) my_frame(&mine, j.type[i], 2, j.payload[i], j.plen[i], seed);
    CHECK_EQ(mine.len, j.b.len);
    CHECK(mine.len == j.b.len && memcmp(mine.p, j.b.p, mine.len) == 0);
    for (int i = 0; i <= NFR; i++) CHECK_EQ(j.starts[i] % 8, 0);
    for (int i = 0; i < NFR; i++) CHECK_EQ(j.starts[i + 1] - j.starts[i], h5l_frame_size(j.plen[i]));
    h5l_buf_free(&mine);
    h5l_buf_free(&j.b);
}

static void test_walk_all_frames(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    uint8_t *d = malloc(j.b.len);
    memcpy(d, j.b.p, j.b.len);
    for (int live = 0; live < 2; live++) {
        int rc = -1;
        h5l_err_t e = {0};
        CHECK_EQ(walk(d, j.b.len, seed, 0, live, &rc, NULL, &e, &j), NFR);
        CHECK_EQ(rc, 0);
    }
    free(d);
    h5l_buf_free(&j.b);
}

/* Every prefix of a live journal is a clean scan: exactly the frames that
 * lie wholly (padding included) inside the prefix, then 0, never an error,
 * and `need` is where the cut frame's header, or the whole frame, ends.
 * The same prefixes of an embedded journal are corruption unless they end
 * at a frame boundary. Exact-size heap copies: an over-read trips ASan. */
static void test_every_prefix(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    for (size_t len = H5L_JHDR_LEN; len <= j.b.len; len++) {
        uint8_t *d = malloc(len);
        memcpy(d, j.b.p, len);
        int want = 0;
        while (want < NFR && j.starts[want + 1] <= len) want++;
        uint64_t want_need = 0;
        if (want < NFR && len > j.starts[want]) {
            uint64_t s = j.starts[want];
            want_need = len - s < 24 ? s + 24 : j.starts[want + 1];
        }
        int rc = -1;
        uint64_t need = 7;
        h5l_err_t e = {0};
        int got = walk(d, len, seed, 0, 1, &rc, &need, &e, &j);
        if (got != want || rc != 0 || need != want_need) {
            fprintf(stderr, "  live prefix %zu: %d frames rc %d need %llu, want %d frames rc 0 need %llu (%s)\n", len,
                    got, rc, (unsigned long long)need, want, (unsigned long long)want_need, e.msg);
            CHECK(0);
        }
        got = walk(d, len, seed, 0, 0, &rc, NULL, &e, &j);
        int boundary = len == j.starts[want];
        if (got != want || rc != (boundary ? 0 : H5L_ECORRUPT)) {
            fprintf(stderr, "  embedded prefix %zu: %d frames rc %d (%s)\n", len, got, rc, e.msg);
            CHECK(0);
        }
        free(d);
    }
    h5l_buf_free(&j.b);
}

/* The last frame: a flipped payload byte reads as a torn tail (a crash may
 * leave the last frame's later pages unwritten); a flipped header byte is
 * corruption (a torn write never leaves a bad header with data after it). */
static void test_flip_in_last_frame(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    size_t s = j.starts[NFR - 1];
    size_t pend = s + 24 + j.plen[NFR - 1];
    uint8_t *d = malloc(j.b.len);
    for (size_t i = s; i < pend; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(d, j.b.p, j.b.len);
            d[i] ^= (uint8_t)(1u << bit);
            int rc = -1;
            h5l_err_t e = {0};
            int got = walk(d, j.b.len, seed, 0, 1, &rc, NULL, &e, NULL);
            int want_rc = i < s + 24 ? H5L_ECORRUPT : 0;
            if (got != NFR - 1 || rc != want_rc) {
                fprintf(stderr, "  flip at %zu (frame at %zu): %d frames rc %d (%s)\n", i, s, got, rc, e.msg);
                CHECK(0);
            }
            /* embedded: any damage is corruption */
            got = walk(d, j.b.len, seed, 0, 0, &rc, NULL, &e, NULL);
            CHECK(got == NFR - 1 && rc == H5L_ECORRUPT);
        }
    }
    free(d);
    h5l_buf_free(&j.b);
}

/* A flipped byte in any earlier frame — header, length field included, or
 * payload — is corruption: H5L_ECORRUPT, a message naming the journal and
 * the offset base + frame start, and every frame before it delivered. */
static void test_flip_in_middle_frame_is_corrupt(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    uint8_t *d = malloc(j.b.len);
    const uint64_t base = 1000003;
    for (int f = 0; f < NFR - 1; f++) {
        size_t s = j.starts[f];
        for (size_t i = s; i < s + 24 + j.plen[f]; i++) {
            for (int bit = 0; bit < 8; bit += 3) {
                memcpy(d, j.b.p, j.b.len);
                d[i] ^= (uint8_t)(1u << bit);
                int rc = 0;
                h5l_err_t e = {0};
                int got = walk(d, j.b.len, seed, base, 1, &rc, NULL, &e, NULL);
                char want[64];
                snprintf(want, sizeof want, "offset %llu", (unsigned long long)(base + s));
                if (got != f || rc != H5L_ECORRUPT || e.code != H5L_ECORRUPT || !strstr(e.msg, want) ||
                    !strstr(e.msg, "J")) {
                    fprintf(stderr, "  flip at %zu in frame %d: %d frames rc %d msg '%s' (want '%s')\n", i, f, got, rc,
                            e.msg, want);
                    CHECK(0);
                }
            }
        }
    }
    free(d);
    h5l_buf_free(&j.b);
}

/* The reported failure: 20 ticks, one flipped bit in the length of frame 5
 * of a live sidecar. It used to read as "4 ticks" and a torn tail. */
static void test_flipped_length_bit_of_frame_5(void)
{
    uint64_t seed = seed_of(ID);
    h5l_buf_t b = {0};
    uint8_t hdr[H5L_JHDR_LEN] = {0};
    h5l_buf_put(&b, hdr, sizeof hdr);
    size_t starts[20];
    uint8_t pl[100];
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < 100; k++) pl[k] = (uint8_t)(i + k);
        starts[i] = b.len;
        h5l_frame_encode(&b, H5L_REC_TICK, pl, 64 + (uint32_t)i, seed);
    }
    for (int bit = 0; bit < 32; bit++) {
        b.p[starts[4] + bit / 8] ^= (uint8_t)(1u << (bit % 8));
        int rc = 0;
        h5l_err_t e = {0};
        int got = walk(b.p, b.len, seed, 0, 1, &rc, NULL, &e, NULL);
        if (got != 4 || rc != H5L_ECORRUPT) {
            fprintf(stderr, "  length bit %d of frame 5: %d frames rc %d (%s)\n", bit, got, rc, e.msg);
            CHECK(0);
        }
        b.p[starts[4] + bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    h5l_buf_free(&b);
}

/* A crash may leave zeros where the tail was: zeros after the last frame,
 * or a last frame whose payload reads as zeros, are a torn tail. Zeros
 * followed by anything non-zero are corruption. The scanner remembers how
 * far it found zeros. */
static void test_zero_filled_tail(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    for (size_t zeros = 1; zeros < 300; zeros += 37) {
        h5l_buf_t b = {0};
        h5l_buf_put(&b, j.b.p, j.starts[NFR - 1]);
        uint8_t z[300] = {0};
        h5l_buf_put(&b, z, zeros);
        int rc = 1;
        uint64_t need = 0;
        h5l_err_t e = {0};
        CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, &need, &e, NULL), NFR - 1);
        CHECK_EQ(rc, 0);
        CHECK_EQ(need, zeros < 24 ? j.starts[NFR - 1] + 24 : b.len + 1);
        /* one non-zero byte at the very end: corruption */
        if (zeros >= 24) {
            b.p[b.len - 1] = 1;
            CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, NULL, &e, NULL), NFR - 1);
            CHECK_EQ(rc, H5L_ECORRUPT);
        }
        h5l_buf_free(&b);
    }
    /* the last frame's header written, its payload pages zero */
    h5l_buf_t b = {0};
    h5l_buf_put(&b, j.b.p, j.b.len);
    size_t s = j.starts[NFR - 2];
    memset(b.p + s + 24, 0, j.plen[NFR - 2]);
    h5l_buf_put(&b, "\0\0\0\0\0\0\0\0", 8);
    b.len = j.starts[NFR - 1] + 8;
    memset(b.p + j.starts[NFR - 1], 0, 8);
    int rc = 1;
    CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, NULL, NULL, NULL), NFR - 2);
    CHECK_EQ(rc, 0);
    /* the scanner does not re-check zeros it has seen */
    h5l_jscan_t sc;
    h5l_jscan_init(&sc, -1, b.p, 0, 1, seed, "J");
    h5l_frame_t fr;
    CHECK_EQ(h5l_jscan_next(&sc, j.starts[NFR - 2], b.len, &fr, NULL), 0);
    CHECK_EQ(sc.zhi, b.len);
    CHECK_EQ(sc.need, b.len + 1);
    h5l_jscan_free(&sc);
    h5l_buf_free(&b);
    h5l_buf_free(&j.b);
}

/* A frame checksummed with another identity's seed (a frame copied from
 * another journal) never verifies. */
static void test_wrong_seed(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    int rc = 1;
    h5l_err_t e = {0};
    CHECK_EQ(walk(j.b.p, j.b.len, seed ^ 1, 0, 1, &rc, NULL, &e, NULL), 0);
    CHECK_EQ(rc, H5L_ECORRUPT);
    CHECK(strstr(e.msg, "offset 64") != NULL);
    /* a foreign frame spliced in between two good ones */
    h5l_buf_t b = {0};
    h5l_buf_put(&b, j.b.p, j.starts[1]);
    uint8_t pl[24] = {1, 2, 3};
    h5l_frame_encode(&b, H5L_REC_TICK, pl, sizeof pl, seed + 1);
    h5l_frame_encode(&b, H5L_REC_TICK, pl, sizeof pl, seed);
    CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, NULL, &e, NULL), 1);
    CHECK_EQ(rc, H5L_ECORRUPT);
    h5l_buf_free(&b);
    h5l_buf_free(&j.b);
}

/* A verified header with an unknown version, or a length over the frame
 * limit, is corruption even as the last frame. Types are the reader's
 * business: any type scans. */
static void test_bad_version_or_length(void)
{
    uint64_t seed = seed_of(ID);
    uint8_t pl[16] = {9, 9, 9};
    const uint16_t vers[] = {0, 1, 3, 0xFFFF};
    for (int last = 0; last < 2; last++) {
        for (size_t t = 0; t < 4; t++) {
            h5l_buf_t b = {0};
            uint8_t hdr[H5L_JHDR_LEN] = {0};
            h5l_buf_put(&b, hdr, sizeof hdr);
            my_frame(&b, H5L_REC_TICK, 2, pl, 16, seed);
            size_t bad_at = b.len;
            my_frame(&b, H5L_REC_TICK, vers[t], pl, 16, seed);
            if (!last) my_frame(&b, H5L_REC_TICK, 2, pl, 16, seed);
            int rc = 1;
            h5l_err_t e = {0};
            CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, NULL, &e, NULL), 1);
            CHECK_EQ(rc, H5L_ECORRUPT);
            char want[32];
            snprintf(want, sizeof want, "offset %zu", bad_at);
            CHECK(strstr(e.msg, want) != NULL);
            h5l_buf_free(&b);
        }
    }
    /* a verified header claiming more than 256 MiB: corruption, no read of
     * the payload; one claiming 1 MiB that is not there yet: torn, need */
    const uint32_t lens[] = {0xFFFFFFFFu, H5L_FRAME_MAX + 1, 1u << 20};
    for (size_t i = 0; i < 3; i++) {
        uint8_t d[H5L_JHDR_LEN + 64] = {0};
        uint8_t *h = d + H5L_JHDR_LEN;
        put_le(h, lens[i], 4);
        put_le(h + 4, H5L_REC_TICK, 2);
        put_le(h + 6, 2, 2);
        put_le(h + 16, XXH3_64bits_withSeed(h, 16, seed), 8);
        int rc = 1;
        uint64_t need = 0;
        CHECK_EQ(walk(d, sizeof d, seed, 0, 1, &rc, &need, NULL, NULL), 0);
        CHECK_EQ(rc, i < 2 ? H5L_ECORRUPT : 0);
        if (i == 2) CHECK_EQ(need, H5L_JHDR_LEN + h5l_frame_size(lens[i]));
    }
    /* optional and unknown types scan like any other */
    h5l_buf_t b = {0};
    uint8_t hdr[H5L_JHDR_LEN] = {0};
    h5l_buf_put(&b, hdr, sizeof hdr);
    my_frame(&b, H5L_REC_OPTIONAL | 7, 2, pl, 16, seed);
    my_frame(&b, 99, 2, pl, 16, seed);
    int rc = 1;
    CHECK_EQ(walk(b.p, b.len, seed, 0, 1, &rc, NULL, NULL, NULL), 2);
    CHECK_EQ(rc, 0);
    h5l_buf_free(&b);
}

/* create + append on a real file, read back through a scanner on the
 * descriptor (windowed reads), including frames larger than the window. */
static void test_create_append_file(void)
{
    char dir[] = "/tmp/h5ljXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/run.h5.h5lj", dir);
    uint64_t seed = seed_of(ID);
    int fd = -1;
    h5l_err_t e = {0};
    h5l_buf_t copy = {0}; /* the writer's in-memory copy of every journal byte */
    CHECK_EQ(h5l_journal_create(path, ID, 123456789, 15, &fd, &copy, &e), H5L_OK);
    CHECK(fd >= 0);
    CHECK_EQ(copy.len, H5L_JHDR_LEN);
    uint64_t off = H5L_JHDR_LEN;
    enum { N = 40 };
    static uint8_t big[3 << 20];
    for (size_t k = 0; k < sizeof big; k++) big[k] = (uint8_t)(k * 7 + 1);
    uint32_t lens[N];
    h5l_buf_t want = {0};
    for (int i = 0; i < N; i++) {
        lens[i] = i == 7 ? (uint32_t)sizeof big - 64 : i == 30 ? (1u << 20) + 3 : (uint32_t)(i * 97 % 5000);
        uint64_t before = off;
        uint16_t type = i == N - 1 ? H5L_REC_CLOSE : H5L_REC_TICK;
        CHECK_EQ(h5l_journal_append(fd, &off, type, big + i, lens[i], seed, i == 1, "J", i ? &copy : NULL, &e), H5L_OK);
        if (i == 0) my_frame(&copy, type, 2, big + i, lens[i], seed); /* NULL copy: kept by hand */
        CHECK_EQ(off - before, h5l_frame_size(lens[i]));
        my_frame(&want, type, 2, big + i, lens[i], seed);
    }
    close(fd);

    int rfd = open(path, O_RDONLY);
    CHECK(rfd >= 0);
    struct stat st;
    CHECK(fstat(rfd, &st) == 0);
    CHECK_EQ((uint64_t)st.st_size, off);
    uint8_t *d = malloc((size_t)st.st_size);
    size_t got = 0;
    CHECK_EQ(h5l_fd_read(rfd, d, (size_t)st.st_size, 0, &got, path, &e), H5L_OK);
    CHECK_EQ(got, (size_t)st.st_size);
    uint8_t tmp[16];
    CHECK_EQ(h5l_fd_read(rfd, tmp, sizeof tmp, (uint64_t)st.st_size - 4, &got, path, &e), H5L_OK);
    CHECK_EQ(got, 4);
    CHECK_EQ(h5l_fd_read(rfd, tmp, sizeof tmp, (uint64_t)st.st_size + 100, &got, path, &e), H5L_OK);
    CHECK_EQ(got, 0);
    /* one error space: H5L_EIO, the reason in the message, errno kept */
    e.code = 0;
    CHECK_EQ(h5l_fd_read_all(rfd, tmp, sizeof tmp, (uint64_t)st.st_size - 4, path, &e), H5L_EIO);
    CHECK(e.code == H5L_EIO && strstr(e.msg, path) && strstr(e.msg, "ends after 4"));
    CHECK_EQ(h5l_fd_write(rfd, tmp, 4, 0, path, &e), H5L_EIO); /* opened read-only */
    CHECK_EQ(errno, EBADF);
    CHECK(strstr(e.msg, path) && strstr(e.msg, strerror(EBADF)) && strstr(e.msg, "writing 4 bytes at 0"));
    CHECK_EQ(h5l_fd_read(-1, tmp, 4, 0, &got, "nofile", &e), H5L_EIO);
    CHECK_EQ(errno, EBADF);
    CHECK(strstr(e.msg, "nofile: reading 4 bytes at 0"));
    h5l_jhdr_t h;
    CHECK_EQ(h5l_jhdr_decode(d, &h, path, &e), H5L_OK);
    CHECK(memcmp(h.id, ID, 16) == 0);
    CHECK_EQ(h.ctime_ns, 123456789);
    CHECK_EQ(h.seglog, 15);
    CHECK(want.len == (size_t)st.st_size - H5L_JHDR_LEN && memcmp(d + H5L_JHDR_LEN, want.p, want.len) == 0);
    CHECK(copy.len == (size_t)st.st_size && memcmp(copy.p, d, copy.len) == 0);
    /* the scanner over the descriptor sees every frame, payloads intact */
    h5l_jscan_t sc;
    h5l_jscan_init(&sc, rfd, NULL, 0, 0, seed, path);
    uint64_t pos = H5L_JHDR_LEN;
    int n = 0, bad = 0;
    h5l_frame_t fr;
    int k;
    while ((k = h5l_jscan_next(&sc, pos, (uint64_t)st.st_size, &fr, &e)) == 1) {
        bad += fr.len != lens[n] || memcmp(fr.payload, big + n, fr.len) != 0;
        pos = fr.next;
        n++;
    }
    CHECK_EQ(k, 0);
    CHECK_EQ(n, N);
    CHECK_EQ(bad, 0);
    h5l_jscan_free(&sc);
    close(rfd);
    free(d);
    h5l_buf_free(&want);

    /* create truncates an existing sidecar */
    CHECK_EQ(h5l_journal_create(path, ID, 1, 15, &fd, NULL, &e), H5L_OK);
    close(fd);
    CHECK(stat(path, &st) == 0 && st.st_size == H5L_JHDR_LEN);
    /* writing to a read-only descriptor is an I/O error with a message */
    rfd = open(path, O_RDONLY);
    off = H5L_JHDR_LEN;
    e.code = 0;
    size_t copy_len = copy.len;
    CHECK_EQ(h5l_journal_append(rfd, &off, H5L_REC_TICK, big, 8, seed, 0, "JJ", &copy, &e), H5L_EIO);
    CHECK_EQ(copy.len, copy_len); /* a failed append leaves the copy as it was */
    h5l_buf_free(&copy);
    CHECK_EQ(e.code, H5L_EIO);
    CHECK(strstr(e.msg, "JJ") != NULL);
    CHECK_EQ(off, H5L_JHDR_LEN);
    /* a frame over the limit is refused before anything is written */
    CHECK_EQ(h5l_journal_append(rfd, &off, H5L_REC_TICK, big, H5L_FRAME_MAX + 1, seed, 0, "JJ", NULL, &e), H5L_EINVAL);
    close(rfd);
    /* creating in a missing directory fails cleanly */
    char badp[96];
    snprintf(badp, sizeof badp, "%s/nodir/x.h5lj", dir);
    fd = -7;
    CHECK_EQ(h5l_journal_create(badp, ID, 1, 15, &fd, NULL, &e), H5L_EIO);
    CHECK_EQ(fd, -7);
    unlink(path);
    rmdir(dir);
}

/* h5l_fd_writev: pieces land back to back; a write the kernel cuts short
 * (a file size limit: the first pwritev writes up to it) goes on from
 * where it stopped in the middle of a piece, and the next fails with the
 * errno in the message. */
static void test_writev(void)
{
    char path[] = "/tmp/h5lwvXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    static uint8_t a[5000], b[3], c[70000];
    for (size_t i = 0; i < sizeof c; i++) c[i] = (uint8_t)(i * 13 + 5);
    memset(a, 1, sizeof a);
    memset(b, 2, sizeof b);
    struct iovec iov[4] = {{a, sizeof a}, {b, 0}, {b, sizeof b}, {c, sizeof c}};
    h5l_err_t e = {0};
    CHECK_EQ(h5l_fd_writev(fd, iov, 4, 100, path, &e), H5L_OK);
    uint8_t *d = malloc(100 + sizeof a + sizeof b + sizeof c);
    size_t got = 0;
    CHECK_EQ(h5l_fd_read(fd, d, 100 + sizeof a + sizeof b + sizeof c + 10, 0, &got, path, &e), H5L_OK);
    CHECK_EQ(got, 100 + sizeof a + sizeof b + sizeof c);
    CHECK(memcmp(d + 100, a, sizeof a) == 0 && memcmp(d + 100 + sizeof a, b, sizeof b) == 0 &&
          memcmp(d + 100 + sizeof a + sizeof b, c, sizeof c) == 0);
    /* a limit of 8 KiB: 8192 - 100 bytes go out, then EFBIG */
    struct rlimit old, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = (struct rlimit){8192, old.rlim_max}; /* the soft limit only: it can be raised again */
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    struct iovec iov2[2] = {{a, sizeof a}, {c, sizeof c}};
    CHECK_EQ(h5l_fd_writev(fd, iov2, 2, 100, path, &e), H5L_EIO);
    CHECK_EQ(errno, EFBIG);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, was);
    CHECK(strstr(e.msg, path) && strstr(e.msg, "writing 75000 bytes at 100") && strstr(e.msg, strerror(EFBIG)));
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8192);
    CHECK_EQ(h5l_fd_read(fd, d, 8192, 0, &got, path, &e), H5L_OK);
    CHECK(memcmp(d + 100, a, sizeof a) == 0 && memcmp(d + 100 + sizeof a, c, 8192 - 100 - sizeof a) == 0);
    free(d);
    close(fd);
    unlink(path);

    /* a short write followed by a good one (the fault shim cuts the first
     * pwritev at 5001 bytes, one into the second piece): this program
     * again, under the shim, writes and checks (writev_child) */
    const char *bd = getenv("H5LOG_BUILD");
    char shim[512];
    snprintf(shim, sizeof shim, "%s/tests/fault_shim.so", bd ? bd : "build");
    CHECK(access(shim, R_OK) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LD_PRELOAD", shim, 1);
        setenv("H5L_FAULT_PATH", ".wvchild", 1);
        setenv("H5L_FAULT_KIND", "short:5001", 1);
        setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
        execl("/proc/self/exe", "test_journal", "--writev-child", (char *)NULL);
        _exit(127);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The child of test_writev, under the fault shim: 0 when the bytes are
 * right after the shim cut the first pwritev short (it must have fired). */
static int writev_child(void)
{
    char path[] = "/tmp/h5lwvXXXXXX.wvchild";
    int fd = mkstemps(path, 8);
    if (fd < 0) return 2;
    static uint8_t a[5000], c[70000], d[75000];
    memset(a, 1, sizeof a);
    for (size_t i = 0; i < sizeof c; i++) c[i] = (uint8_t)(i * 13 + 5);
    struct iovec iov[2] = {{a, sizeof a}, {c, sizeof c}};
    h5l_err_t e = {0};
    int rc = h5l_fd_writev(fd, iov, 2, 0, path, &e);
    size_t got = 0;
    long (*fired)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "h5l_fault_fired");
    int bad = rc || h5l_fd_read(fd, d, sizeof d, 0, &got, path, &e) || got != sizeof d ||
              memcmp(d, a, sizeof a) || memcmp(d + sizeof a, c, sizeof c) || !fired || fired() != 1;
    if (bad) fprintf(stderr, "writev under the shim: rc %d, %zu bytes read back, %s\n", rc, got, e.msg);
    close(fd);
    unlink(path);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--writev-child")) return writev_child();
    static const th_test_t th_tests[] = {T(test_encoder_matches_spec), T(test_walk_all_frames), T(test_every_prefix), T(test_flip_in_last_frame),
          T(test_flip_in_middle_frame_is_corrupt), T(test_flipped_length_bit_of_frame_5), T(test_zero_filled_tail),
          T(test_wrong_seed), T(test_bad_version_or_length), T(test_create_append_file), T(test_writev)};
    return th_run(th_tests, (int)(sizeof th_tests / sizeof th_tests[0]));
}
