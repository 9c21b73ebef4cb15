/* test_frames.c — journal frames of every size, tick after tick.
 *
 * Usage: mpirun -np P test_frames DIR
 *
 * Why: a tick whose journal frame passed 240 bytes once read as corrupt
 * (an uninitialised XXH3 streaming state), while files of small frames read
 * fine. Here one variable is flushed, then every tick only adds attributes
 * — five integers, and a text whose length grows by 97 bytes per tick, so
 * frames of a few hundred bytes to ~40 KiB are written — while the reader
 * follows the live sidecar and then opens the closed file. Every tick must
 * load and every attribute must read back as written.
 * Prints "N passed, N failed" on rank 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "h5log.h"
#include "h5log_reader.h"

enum { NTICKS = 400 };


/* The text attribute of tick t: 97*t bytes of a pattern. */
static char *text_of(uint64_t t)
{
    size_t n = 97 * (size_t)t;
    char *s = malloc(n + 1);
    for (size_t i = 0; i < n; i++) s[i] = (char)('a' + (i * 7 + t) % 26);
    s[n] = 0;
    return s;
}

/* Every tick 1..n loads, and the attributes current at the newest tick
 * hold what tick n wrote. */
static void check_reader(const char *path, uint64_t n)
{
    h5l_reader_t *r;
    h5l_err_t e = {0};
    int rc = h5l_reader_open(path, &r, &e);
    EXPECT(rc == 0, "open %s: %s", path, e.msg);
    if (rc) return;
    EXPECT(h5l_reader_ntick(r) == n, "%s: %llu ticks, want %llu", path, (unsigned long long)h5l_reader_ntick(r),
           (unsigned long long)n);
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    int seen_text = 0, seen_ints = 0;
    for (size_t i = 0; i < s->nattrs; i++) {
        if (!h5l_schema_attr_current(s, i, n)) continue;
        const h5l_attr_t *a = &s->attrs[i];
        if (strcmp(a->name, "history") == 0) {
            char *want = text_of(n > 1 ? n - 1 : 1);
            seen_text = a->n == strlen(want) && memcmp(a->value, want, a->n) == 0;
            free(want);
        } else if (strncmp(a->name, "count", 5) == 0) {
            int32_t v[3];
            memcpy(v, a->value, sizeof v);
            seen_ints += a->n == 3 && v[0] == (int32_t)n - 1 && v[2] == a->name[5] - '0';
        }
    }
    h5l_reader_unlock(r);
    EXPECT(n < 2 || seen_text, "%s: text attribute of tick %llu differs", path, (unsigned long long)n);
    EXPECT(n < 2 || seen_ints == 5, "%s: %d of 5 integer attributes right", path, seen_ints);
    h5l_reader_close(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    g_rank = rank;
    if (argc < 2) {
        if (!rank) fprintf(stderr, "usage: test_frames DIR\n");
        MPI_Finalize();
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/frames.h5", argv[1]);
    h5l_file_t *f;
    int rc = h5l_create(path, MPI_COMM_WORLD, NULL, &f);
    EXPECT(rc == 0, "create: %s", h5l_errmsg(NULL));
    if (rc) goto done;
    int x, v;
    h5l_def_dim(f, "x", 64, &x);
    rc = h5l_def_var(f, "/v", H5T_NATIVE_INT32, 1, &x, NULL, &v);
    int32_t data[16];
    for (int i = 0; i < 16; i++) data[i] = rank * 16 + i;
    uint64_t start = (uint64_t)rank * 16 % 64, count = 16;
    h5l_put(f, v, &start, &count, data);
    EXPECT(h5l_flush(f) == 0, "flush 1: %s", h5l_errmsg(f));
    for (uint64_t t = 2; t <= NTICKS; t++) {
        for (int k = 0; k < 5; k++) {
            char name[32];
            snprintf(name, sizeof name, "count%d", k);
            int32_t val[3] = {(int32_t)t - 1, -(int32_t)t, k};
            h5l_put_att(f, H5L_GLOBAL, name, H5T_NATIVE_INT32, 3, val);
        }
        char *txt = text_of(t - 1);
        h5l_put_att_text(f, H5L_GLOBAL, "history", txt);
        free(txt);
        rc = h5l_flush(f);
        EXPECT(rc == 0, "flush %llu: %s", (unsigned long long)t, h5l_errmsg(f));
        if (rank == 0 && (t % 50 == 0 || t < 8)) check_reader(path, t); /* live, from the sidecar */
    }
    EXPECT(h5l_close(f) == 0, "close: %s", h5l_errmsg(NULL));
    if (rank == 0) check_reader(path, NTICKS); /* closed: the embedded journal */
done:
    if (rank == 0) printf("%d passed, %d failed\n", g_pass, g_fail);
    MPI_Finalize();
    return g_fail ? 1 : 0;
}
