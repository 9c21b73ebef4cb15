/* test_drop.c — drop-behind accounting (drop.h).
 *
 * Why: the daemon advises the kernel to drop log pages the segment table
 * says were read. Dropping too early only costs a re-read, but a table that
 * never reports (or reports a segment twice, or the wrong offset) silently
 * loses the memory and CPU the module exists to save. Checked: a segment is
 * reported exactly once, when its last byte is counted, in any order of
 * pieces; pieces crossing segment borders; a read covering whole segments;
 * partial segments never; a full table keeps working. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "drop.h"
#include "tharness.h"

#define SEG H5L_DROP_SEG

typedef struct seen {
    int n;
    uint64_t off[4096], len[4096];
} seen_t;

static void note(void *ctx, uint64_t off, uint64_t len)
{
    seen_t *s = ctx;
    if (s->n < 4096) {
        s->off[s->n] = off;
        s->len[s->n] = len;
    }
    s->n++;
}

static void test_pieces_any_order(void)
{
    h5l_drop_t *d = h5l_drop_new();
    seen_t *s = calloc(1, sizeof *s);
    /* segment 3 in 8 pieces, shuffled; nothing until the last one */
    uint64_t piece = SEG / 8;
    int order[8] = {5, 0, 7, 2, 1, 6, 4, 3};
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(s->n, 0);
        h5l_drop_count(d, 3 * SEG + (uint64_t)order[i] * piece, piece, note, s);
    }
    CHECK_EQ(s->n, 1);
    CHECK_EQ(s->off[0], 3 * SEG);
    CHECK_EQ(s->len[0], SEG);
    /* counting the same segment again starts it anew: no second report yet */
    h5l_drop_count(d, 3 * SEG, piece, note, s);
    CHECK_EQ(s->n, 1);
    h5l_drop_free(d);
    free(s);
}

static void test_borders_and_whole_segments(void)
{
    h5l_drop_t *d = h5l_drop_new();
    seen_t *s = calloc(1, sizeof *s);
    /* an unaligned 1 MiB stream: 1000 bytes in, 9 MiB long */
    uint64_t off = 1000, mib = (uint64_t)1 << 20;
    for (int i = 0; i < 9; i++) h5l_drop_count(d, off + (uint64_t)i * mib, mib, note, s);
    /* [1000, 1000 + 9 MiB): segment 0 lacks its first 1000 bytes, segment
     * 4 is not finished; 1, 2, 3 are complete */
    CHECK_EQ(s->n, 3);
    for (int i = 0; i < 3 && i < s->n; i++) CHECK_EQ(s->off[i], (uint64_t)(i + 1) * SEG);
    /* one read covering 5 whole segments and two partial ones */
    s->n = 0;
    h5l_drop_count(d, 100 * SEG + 5, 6 * SEG, note, s);
    CHECK_EQ(s->n, 5);
    for (int i = 0; i < 5 && i < s->n; i++) CHECK_EQ(s->off[i], (uint64_t)(101 + i) * SEG);
    h5l_drop_free(d);
    free(s);
}

static void test_full_table(void)
{
    h5l_drop_t *d = h5l_drop_new();
    seen_t *s = calloc(1, sizeof *s);
    /* half of 1000 segments: the table forgets most, reports none */
    for (uint64_t g = 0; g < 1000; g++) h5l_drop_count(d, g * SEG, SEG / 2, note, s);
    CHECK_EQ(s->n, 0);
    /* the most recent ones are still tracked: finishing them reports them */
    for (uint64_t g = 990; g < 1000; g++) h5l_drop_count(d, g * SEG + SEG / 2, SEG / 2, note, s);
    CHECK_EQ(s->n, 10);
    /* a fresh segment read whole still works */
    s->n = 0;
    h5l_drop_count(d, 5000 * SEG, SEG, note, s);
    CHECK_EQ(s->n, 1);
    CHECK_EQ(s->off[0], 5000 * SEG);
    h5l_drop_free(d);
    free(s);
}

TEST_MAIN(T(test_pieces_any_order), T(test_borders_and_whole_segments), T(test_full_table))
