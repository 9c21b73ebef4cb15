/* expect.h — the counting check of the MPI test programs: EXPECT records a
 * pass or a failure (with rank, file and line) and carries on; each
 * program prints g_pass and g_fail as "N passed, N failed" at the end,
 * which tests/run_all.sh adds up. Set g_rank after MPI_Init. */
#ifndef MPI_EXPECT_H
#define MPI_EXPECT_H

#include <stdio.h>

static int g_pass, g_fail, g_rank;

#define EXPECT(c, ...)                                                                                                 \
    do {                                                                                                               \
        if (c)                                                                                                         \
            g_pass++;                                                                                                  \
        else {                                                                                                         \
            g_fail++;                                                                                                  \
            fprintf(stderr, "rank %d FAIL %s:%d: ", g_rank, __FILE__, __LINE__);                                       \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
        }                                                                                                              \
    } while (0)

#endif
