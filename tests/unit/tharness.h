/* tharness.h — the smallest test harness that can fail: CHECK records a
 * failure with file and line and carries on; TEST_MAIN runs the listed
 * tests and prints "N passed, N failed" (one count per test function),
 * which tests/run_all.sh adds up over every suite. */
#ifndef THARNESS_H
#define THARNESS_H

#include <stdio.h>
#include <stdlib.h>

static int th_fail_cur;
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);                                    \
            th_fail_cur++;                                                                                             \
        }                                                                                                              \
    } while (0)
#define CHECK_EQ(a, b)                                                                                                 \
    do {                                                                                                               \
        long long th_a = (long long)(a), th_b = (long long)(b);                                                        \
        if (th_a != th_b) {                                                                                            \
            fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, th_a, #b, th_b);     \
            th_fail_cur++;                                                                                             \
        }                                                                                                              \
    } while (0)

typedef struct {
    const char *name;
    void (*fn)(void);
} th_test_t;

static int th_run(const th_test_t *t, int n)
{
    int pass = 0, fail = 0;
    for (int i = 0; i < n; i++) {
        th_fail_cur = 0;
        t[i].fn();
        if (th_fail_cur) {
            printf("FAIL %s\n", t[i].name);
            fail++;
        } else {
            printf("ok   %s\n", t[i].name);
            pass++;
        }
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}
#define T(f)                                                                                                           \
    {                                                                                                                  \
#f, f                                                                                                          \
    }
#define TEST_MAIN(...)                                                                                                 \
    int main(void)                                                                                                     \
    {                                                                                                                  \
        static const th_test_t th_tests[] = {__VA_ARGS__};                                                             \
        return th_run(th_tests, (int)(sizeof th_tests / sizeof th_tests[0]));                                          \
    }

#endif
