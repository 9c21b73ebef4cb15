/* bench_longlog.c — the first open of a long log by the reader: how long
 * it takes and what it keeps in memory per tick.
 *
 * Usage: bench_longlog FILE
 * FILE is what bench_flushes writes with one rank: tick i+1 holds row i of
 * a [time, 64] float variable /v, element k = i + k * 1e-3. Opens FILE with
 * h5l_reader_open (wall and CPU time), takes the process's RSS before and
 * after, then reads the newest row and a middle one and checks them
 * against what the writer wrote. Prints one JSON object. The make target
 * (bench/bench_longlog.sh) runs it on logs of 10^4..10^6 ticks, against
 * this tree's reader and a baseline commit's, interleaved. Built with
 * -DBENCH_CKPT it also says up to which tick the reader started from index
 * checkpoints ("ckpt_last"); with -DBENCH_FULL it opens with
 * H5L_READER_FULL (this tree's reader ignoring checkpoints). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log_reader.h"

static double clk(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char l[256];
    long v = 0;
    while (f && fgets(l, sizeof l, f))
        if (strncmp(l, "VmRSS:", 6) == 0) v = atol(l + 6) * 1024;
    if (f) fclose(f);
    return v;
}

/* Row i (tick i+1) as the writer wrote it? */
static int row_ok(h5l_reader_t *r, uint64_t tick, uint64_t i, double *ms, h5l_err_t *e)
{
    float row[64];
    uint64_t st[2] = {i, 0}, ct[2] = {1, 64};
    double t0 = clk(CLOCK_MONOTONIC);
    if (h5l_reader_read(r, tick, 1, st, ct, row, e)) return 0;
    if (ms) *ms = (clk(CLOCK_MONOTONIC) - t0) * 1e3;
    for (int k = 0; k < 64; k++)
        if (row[k] != (float)i + (float)k * 1e-3f) {
            snprintf(e->msg, sizeof e->msg, "row %llu element %d reads %g", (unsigned long long)i, k, row[k]);
            return 0;
        }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_longlog FILE\n");
        return 2;
    }
    h5l_err_t e = {0};
    h5l_reader_t *r;
    long rss0 = rss_bytes();
    double w0 = clk(CLOCK_MONOTONIC), c0 = clk(CLOCK_PROCESS_CPUTIME_ID);
#ifdef BENCH_FULL
    int orc = h5l_reader_open_flags(argv[1], H5L_READER_FULL, &r, &e);
#elif defined BENCH_LAZY
    int orc = h5l_reader_open_flags(argv[1], H5L_READER_LAZY_ATTRS, &r, &e); /* as the daemon opens */
#else
    int orc = h5l_reader_open(argv[1], &r, &e);
#endif
    if (orc) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double w1 = clk(CLOCK_MONOTONIC), c1 = clk(CLOCK_PROCESS_CPUTIME_ID);
    long rss1 = rss_bytes();
    uint64_t n = h5l_reader_ntick(r);
    double first_ms = 0;
    int ok = n > 0 && h5l_reader_damage(r, NULL, NULL) == 0 && row_ok(r, n, n - 1, &first_ms, &e) &&
             row_ok(r, n, n / 2, NULL, &e) && row_ok(r, n / 2 + 1, n / 2, NULL, &e);
    if (!ok) fprintf(stderr, "%s: %s\n", argv[1], e.msg[0] ? e.msg : "no ticks or damaged");
    unsigned long long ck = 0;
#ifdef BENCH_CKPT
    ck = (unsigned long long)h5l_reader_ckpt_last(r);
#endif
    printf("{\"ticks\": %llu, \"open_ms\": %.3f, \"open_cpu_ms\": %.3f, \"first_read_ms\": %.3f, "
           "\"rss_delta_bytes\": %ld, \"bytes_per_tick\": %.1f, \"ckpt_last\": %llu, \"ok\": %d}\n",
           (unsigned long long)n, (w1 - w0) * 1e3, (c1 - c0) * 1e3, first_ms, rss1 - rss0,
           n ? (double)(rss1 - rss0) / (double)n : 0.0, ck, ok);
    h5l_reader_close(r);
    return ok ? 0 : 1;
}
