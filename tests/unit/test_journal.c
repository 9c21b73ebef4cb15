/* test_journal.c — journal framing and the torn-tail rules of docs/format.md
 * 3.2, through h5l_journal_next (a pure walk over bytes) and through
 * h5l_journal_create/h5l_journal_append on a real file.
 *
 * Why: a live reader polls a journal a writer is appending to. It must tell
 * "not written yet" (any prefix of a valid journal, a damaged LAST frame) from
 * damage (a bad frame with bytes after it, an unknown type with a valid
 * checksum, a frame from another file's journal), and must never crash on any
 * prefix. Frames are also built here by an independent encoder, so the
 * library's encoder is checked byte for byte. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#include "codec.h"
#include "format.h"
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

/* Independent frame encoder (format.md 3.2), any type and version. */
static void my_frame(h5l_buf_t *b, uint16_t type, uint16_t ver, const uint8_t *pl, uint32_t len,
                     uint64_t seed)
{
    uint8_t *cat = malloc(4 + (size_t)len);
    cat[0] = (uint8_t)type;
    cat[1] = (uint8_t)(type >> 8);
    cat[2] = (uint8_t)ver;
    cat[3] = (uint8_t)(ver >> 8);
    if (len) memcpy(cat + 4, pl, len);
    uint64_t sum = XXH3_64bits_withSeed(cat, 4 + (size_t)len, seed);
    uint8_t h[16];
    for (int i = 0; i < 4; i++) h[i] = (uint8_t)(len >> (8 * i));
    memcpy(h + 4, cat, 4);
    for (int i = 0; i < 8; i++) h[8 + i] = (uint8_t)(sum >> (8 * i));
    h5l_buf_put(b, h, 16);
    h5l_buf_put(b, pl, len);
    static const uint8_t z[8];
    if ((16 + len) % 8) h5l_buf_put(b, z, 8 - (16 + len) % 8);
    free(cat);
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
    h5l_jhdr_t h = {.version = 1, .ctime_ns = 5};
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

/* Walk data[0..len) from the header on. Returns the number of frames found,
 * *rc the final return of h5l_journal_next (0 or an error). */
static int walk(const uint8_t *data, size_t len, uint64_t seed, uint64_t base, int *rc,
                h5l_err_t *err, jr_t *check)
{
    size_t pos = H5L_JHDR_LEN;
    int n = 0;
    for (;;) {
        h5l_frame_t fr;
        int k = h5l_journal_next(data, len, pos, seed, "J", base, &fr, err);
        if (k != 1) {
            *rc = k;
            return n;
        }
        if (check && n < NFR) {
            CHECK_EQ(fr.type, check->type[n]);
            CHECK_EQ(fr.len, check->plen[n]);
            CHECK(fr.payload == data + check->starts[n] + 16);
            CHECK(fr.len == 0 || memcmp(fr.payload, check->payload[n], fr.len) == 0);
            CHECK_EQ(fr.next, check->starts[n + 1]);
        }
        if (fr.next <= pos) { /* no progress would loop forever */
            CHECK(0);
            *rc = -999;
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
    for (int i = 0; i < NFR; i++) my_frame(&mine, j.type[i], 1, j.payload[i], j.plen[i], seed);
    CHECK_EQ(mine.len, j.b.len);
    CHECK(mine.len == j.b.len && memcmp(mine.p, j.b.p, mine.len) == 0);
    for (int i = 0; i <= NFR; i++) CHECK_EQ(j.starts[i] % 8, 0);
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
    int rc = -1;
    h5l_err_t e = {0};
    CHECK_EQ(walk(d, j.b.len, seed, 0, &rc, &e, &j), NFR);
    CHECK_EQ(rc, 0);
    /* pos at or past the end: clean end */
    h5l_frame_t fr;
    CHECK_EQ(h5l_journal_next(d, j.b.len, j.b.len, seed, "J", 0, &fr, &e), 0);
    CHECK_EQ(h5l_journal_next(d, j.b.len, j.b.len + 100, seed, "J", 0, &fr, &e), 0);
    free(d);
    h5l_buf_free(&j.b);
}

/* Every prefix of the journal is a clean walk: exactly the frames that lie
 * wholly (padding included) inside the prefix, then 0, never an error. The
 * prefix is an exact-size heap copy, so an over-read shows under ASan. */
static void test_every_prefix_is_clean(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    for (size_t len = H5L_JHDR_LEN; len <= j.b.len; len++) {
        uint8_t *d = malloc(len);
        memcpy(d, j.b.p, len);
        int want = 0;
        while (want < NFR && j.starts[want + 1] <= len) want++;
        int rc = -1;
        h5l_err_t e = {0};
        int got = walk(d, len, seed, 0, &rc, &e, &j);
        if (got != want || rc != 0) {
            fprintf(stderr, "  prefix %zu: %d frames rc %d, want %d frames rc 0 (%s)\n", len, got, rc, want,
                    e.msg);
            CHECK(0);
        }
        free(d);
    }
    h5l_buf_free(&j.b);
}

/* A flipped byte inside the last frame (its header after the length field,
 * its payload) reads as a torn tail: all earlier frames, then 0. A flipped
 * length field may make it "run past the data" (torn) or end early with a bad
 * checksum and bytes after it (corrupt), but never verifies. */
static void test_flip_in_last_frame_is_torn(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    size_t s = j.starts[NFR - 1];
    size_t pend = s + 16 + j.plen[NFR - 1];
    uint8_t *d = malloc(j.b.len);
    for (size_t i = s; i < pend; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            memcpy(d, j.b.p, j.b.len);
            d[i] ^= (uint8_t)(1u << bit);
            int rc = -1;
            h5l_err_t e = {0};
            int got = walk(d, j.b.len, seed, 0, &rc, &e, NULL);
            if (i >= s + 4) {
                if (got != NFR - 1 || rc != 0) {
                    fprintf(stderr, "  flip at %zu (frame at %zu): %d frames rc %d (%s)\n", i, s, got, rc, e.msg);
                    CHECK(0);
                }
            } else {
                CHECK_EQ(got, NFR - 1);
                CHECK(rc == 0 || rc == H5L_ECORRUPT);
            }
        }
    }
    free(d);
    h5l_buf_free(&j.b);
}

/* A flipped byte in any earlier frame (header after the length, payload) is
 * corruption: H5L_ECORRUPT, a message naming the journal and the absolute
 * offset base + frame start, and every frame before it delivered. */
static void test_flip_in_middle_frame_is_corrupt(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    uint8_t *d = malloc(j.b.len);
    const uint64_t base = 1000003;
    for (int f = 0; f < NFR - 1; f++) {
        size_t s = j.starts[f];
        for (size_t i = s + 4; i < s + 16 + j.plen[f]; i++) {
            memcpy(d, j.b.p, j.b.len);
            d[i] ^= 0x04;
            int rc = 0;
            h5l_err_t e = {0};
            int got = walk(d, j.b.len, seed, base, &rc, &e, NULL);
            char want[64];
            snprintf(want, sizeof want, "offset %llu", (unsigned long long)(base + s));
            if (got != f || rc != H5L_ECORRUPT || e.code != H5L_ECORRUPT || !strstr(e.msg, want) ||
                !strstr(e.msg, "J")) {
                fprintf(stderr, "  flip at %zu in frame %d: %d frames rc %d msg '%s' (want '%s')\n", i, f, got,
                        rc, e.msg, want);
                CHECK(0);
            }
        }
        /* a flipped length never verifies: the walk stops at frame f */
        for (size_t i = s; i < s + 4; i++) {
            memcpy(d, j.b.p, j.b.len);
            d[i] ^= 0x01;
            int rc = 1;
            int got = walk(d, j.b.len, seed, base, &rc, NULL, NULL);
            CHECK_EQ(got, f);
            CHECK(rc == 0 || rc == H5L_ECORRUPT);
        }
    }
    free(d);
    h5l_buf_free(&j.b);
}

/* A frame checksummed with another identity's seed (a record copied from
 * another journal) never verifies: corrupt in the middle, torn at the end. */
static void test_wrong_seed(void)
{
    uint64_t seed = seed_of(ID);
    jr_t j;
    build(&j, seed);
    int rc = 1;
    h5l_err_t e = {0};
    CHECK_EQ(walk(j.b.p, j.b.len, seed ^ 1, 0, &rc, &e, NULL), 0);
    CHECK_EQ(rc, H5L_ECORRUPT);
    CHECK(strstr(e.msg, "offset 64") != NULL);
    /* a journal whose only frame has the wrong seed: torn (retry later) */
    CHECK_EQ(walk(j.b.p, j.starts[1], seed ^ 1, 0, &rc, &e, NULL), 0);
    CHECK_EQ(rc, 0);

    /* a foreign frame spliced in between two good ones */
    h5l_buf_t b = {0};
    h5l_buf_put(&b, j.b.p, j.starts[1]);
    uint8_t pl[24] = {1, 2, 3};
    h5l_frame_encode(&b, H5L_REC_TICK, pl, sizeof pl, seed + 1);
    h5l_frame_encode(&b, H5L_REC_TICK, pl, sizeof pl, seed);
    CHECK_EQ(walk(b.p, b.len, seed, 0, &rc, &e, NULL), 1);
    CHECK_EQ(rc, H5L_ECORRUPT);
    h5l_buf_free(&b);
    h5l_buf_free(&j.b);
}

/* Unknown type or record version with a valid checksum is corruption, even
 * as the last frame (a torn write cannot produce a verifying frame). */
static void test_unknown_type_or_version(void)
{
    uint64_t seed = seed_of(ID);
    const uint16_t types[] = {0, 3, 0x100, 0xFFFF};
    uint8_t pl[16] = {9, 9, 9};
    for (int last = 0; last < 2; last++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0] + 2; t++) {
            h5l_buf_t b = {0};
            uint8_t hdr[H5L_JHDR_LEN] = {0};
            h5l_buf_put(&b, hdr, sizeof hdr);
            my_frame(&b, H5L_REC_TICK, 1, pl, 16, seed);
            size_t bad_at = b.len;
            if (t < 4) my_frame(&b, types[t], 1, pl, 16, seed);
            else my_frame(&b, t == 4 ? H5L_REC_TICK : H5L_REC_CLOSE, t == 4 ? 2 : 0, pl, 16, seed);
            if (!last) my_frame(&b, H5L_REC_TICK, 1, pl, 16, seed);
            int rc = 1;
            h5l_err_t e = {0};
            CHECK_EQ(walk(b.p, b.len, seed, 0, &rc, &e, NULL), 1);
            CHECK_EQ(rc, H5L_ECORRUPT);
            char want[32];
            snprintf(want, sizeof want, "offset %zu", bad_at);
            CHECK(strstr(e.msg, want) != NULL);
            h5l_buf_free(&b);
        }
    }
}

/* Frames whose length field claims far more than there is (up to 4 GiB) are
 * "not there yet", and must not overflow the bounds arithmetic. */
static void test_huge_length_is_torn(void)
{
    uint64_t seed = seed_of(ID);
    const uint32_t lens[] = {0xFFFFFFFFu, 0xFFFFFFF9u, 0x80000000u, 1u << 20};
    for (size_t i = 0; i < 4; i++) {
        uint8_t d[H5L_JHDR_LEN + 32] = {0};
        for (int k = 0; k < 4; k++) d[H5L_JHDR_LEN + k] = (uint8_t)(lens[i] >> (8 * k));
        d[H5L_JHDR_LEN + 4] = 1;
        d[H5L_JHDR_LEN + 6] = 1;
        int rc = 1;
        CHECK_EQ(walk(d, sizeof d, seed, 0, &rc, NULL, NULL), 0);
        CHECK_EQ(rc, 0);
    }
}

/* create + append on a real file, read back through the walker. */
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
    CHECK_EQ(h5l_journal_create(path, ID, 123456789, &fd, &copy, &e), H5L_OK);
    CHECK(fd >= 0);
    CHECK_EQ(copy.len, H5L_JHDR_LEN);
    uint64_t off = H5L_JHDR_LEN;
    uint8_t pl[3][40];
    const uint32_t lens[3] = {40, 5, 0};
    h5l_buf_t want = {0};
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 40; k++) pl[i][k] = (uint8_t)(i + k);
        uint64_t before = off;
        uint16_t type = i == 2 ? H5L_REC_CLOSE : H5L_REC_TICK;
        CHECK_EQ(h5l_journal_append(fd, &off, type, pl[i], lens[i], seed, i == 1, "J", i ? &copy : NULL, &e), H5L_OK);
        if (i == 0) my_frame(&copy, type, 1, pl[i], lens[i], seed); /* NULL copy: kept by hand */
        CHECK_EQ(off - before, (16 + lens[i] + 7) / 8 * 8);
        my_frame(&want, type, 1, pl[i], lens[i], seed);
    }
    close(fd);

    int rfd = open(path, O_RDONLY);
    CHECK(rfd >= 0);
    struct stat st;
    CHECK(fstat(rfd, &st) == 0);
    CHECK_EQ((uint64_t)st.st_size, off);
    uint8_t *d = malloc((size_t)st.st_size);
    CHECK_EQ(h5l_pread_full(rfd, d, (size_t)st.st_size, 0), st.st_size);
    /* pread past the end: short count, not an error */
    uint8_t tmp[16];
    CHECK_EQ(h5l_pread_full(rfd, tmp, sizeof tmp, (uint64_t)st.st_size - 4), 4);
    CHECK_EQ(h5l_pread_full(rfd, tmp, sizeof tmp, (uint64_t)st.st_size + 100), 0);
    close(rfd);

    h5l_jhdr_t h;
    CHECK_EQ(h5l_jhdr_decode(d, &h, path, &e), H5L_OK);
    CHECK(memcmp(h.id, ID, 16) == 0);
    CHECK_EQ(h.ctime_ns, 123456789);
    CHECK(want.len == (size_t)st.st_size - H5L_JHDR_LEN &&
          memcmp(d + H5L_JHDR_LEN, want.p, want.len) == 0);
    /* the copy holds exactly the file's bytes */
    CHECK(copy.len == (size_t)st.st_size && memcmp(copy.p, d, copy.len) == 0);
    int rc = 1;
    CHECK_EQ(walk(d, (size_t)st.st_size, seed, 0, &rc, &e, NULL), 3);
    CHECK_EQ(rc, 0);
    free(d);
    h5l_buf_free(&want);

    /* create truncates an existing sidecar */
    CHECK_EQ(h5l_journal_create(path, ID, 1, &fd, NULL, &e), H5L_OK);
    close(fd);
    CHECK(stat(path, &st) == 0 && st.st_size == H5L_JHDR_LEN);
    /* writing to a read-only descriptor is an I/O error with a message */
    rfd = open(path, O_RDONLY);
    off = H5L_JHDR_LEN;
    e.code = 0;
    size_t copy_len = copy.len;
    CHECK_EQ(h5l_journal_append(rfd, &off, H5L_REC_TICK, pl[0], 8, seed, 0, "JJ", &copy, &e), H5L_EIO);
    CHECK_EQ(copy.len, copy_len); /* a failed append leaves the copy as it was */
    h5l_buf_free(&copy);
    CHECK_EQ(e.code, H5L_EIO);
    CHECK(strstr(e.msg, "JJ") != NULL);
    CHECK_EQ(off, H5L_JHDR_LEN);
    close(rfd);
    /* creating in a missing directory fails cleanly */
    char bad[96];
    snprintf(bad, sizeof bad, "%s/nodir/x.h5lj", dir);
    fd = -7;
    CHECK_EQ(h5l_journal_create(bad, ID, 1, &fd, NULL, &e), H5L_EIO);
    CHECK_EQ(fd, -7);
    unlink(path);
    rmdir(dir);
}

TEST_MAIN(T(test_encoder_matches_spec), T(test_walk_all_frames), T(test_every_prefix_is_clean),
          T(test_flip_in_last_frame_is_torn), T(test_flip_in_middle_frame_is_corrupt), T(test_wrong_seed),
          T(test_unknown_type_or_version), T(test_huge_length_is_torn), T(test_create_append_file))
