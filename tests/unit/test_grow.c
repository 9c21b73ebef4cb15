/* test_grow.c — h5l_grow (grow.h): room, zeroed new elements, contents
 * kept, and a size that would overflow refused with the array untouched. */
#include <stdint.h>
#include "h5log/grow.h"
#include "tharness.h"

static void test_room_and_zero(void)
{
    uint64_t *a = NULL;
    size_t cap = 0;
    for (size_t n = 1; n <= 1000; n++) {
        CHECK_EQ(h5l_grow((void **)&a, &cap, n, sizeof *a), 0);
        CHECK(cap >= n);
        CHECK_EQ(a[n - 1], 0); /* a new slot reads as zero */
        a[n - 1] = n;
    }
    int kept = 1;
    for (size_t i = 0; i < 1000; i++) kept &= a[i] == i + 1;
    CHECK(kept);
    size_t before = cap;
    CHECK_EQ(h5l_grow((void **)&a, &cap, 10, sizeof *a), 0); /* no shrink, no move */
    CHECK_EQ(cap, before);
    free(a);
}

static void test_overflow_refused(void)
{
    uint64_t *a = NULL;
    size_t cap = 0;
    CHECK_EQ(h5l_grow((void **)&a, &cap, 4, sizeof *a), 0);
    uint64_t *old = a;
    size_t oldcap = cap;
    CHECK_EQ(h5l_grow((void **)&a, &cap, SIZE_MAX / 4, sizeof *a), -1); /* bytes overflow */
    CHECK_EQ(h5l_grow((void **)&a, &cap, SIZE_MAX, 1), -1);             /* count overflow */
    CHECK(a == old);
    CHECK_EQ(cap, oldcap);
    free(a);
}

TEST_MAIN(T(test_room_and_zero), T(test_overflow_refused))
