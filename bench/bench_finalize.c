/* bench_finalize.c — what finalizing costs at h5l_close, for one cube and
 * one chunking (make bench-finalize; bench/bench_finalize.py runs it at
 * every size and chunking and checks that the cost grows linearly).
 *
 *   mpirun -np P bench_finalize --dir DIR --n N [--chunk A,B,C|default]
 *          [--modes nofin,fin] [--keep] [--cold] [--sync] [--verify]
 *
 * One float32 variable /x [N,N,N] (dimensions z, y, x), chunked [A,B,C]
 * or, with --chunk default (the default), contiguous (chunk NULL: the
 * format's default for a variable without unlimited dimensions). Rank r
 * writes its band of dimension 0, rows [N r/P, N (r+1)/P) (as
 * bench/seed/pattern.py band()), with one h5l_put and one h5l_flush, then
 * h5l_close. That is done once per mode of --modes, in that order, each in
 * its own file DIR/fin_N_MODE.h5 from the same data (generated once,
 * before any clock):
 *   fin    h5l_close's default: finalizing (docs/format.md 1.1)
 *   nofin  h5l_opts_t.no_finalize
 * so close(fin) - close(nofin) is the finalizing cost.
 *
 * Timing: after the flush (and with --sync a syncfs of DIR's file system,
 * so that no writeback of the log runs during the close), each rank warms
 * the memory the close will
 * take (see warm_memory: this VM hands freed memory back to its host and
 * the first touch of such a page costs a host fault; --cold skips it),
 * then a barrier, then each rank times its h5l_close; close_s is the
 * maximum over ranks; per rank also the close's wall time, its CPU time
 * (user + system, getrusage) and its context switches (voluntary: it
 * blocked; involuntary: preempted), to tell computing from waiting, and
 * the machine's CPU seconds meanwhile (rank 0's /proc/stat: user, system,
 * idle, iowait, steal; in 1/100 s ticks), to tell other processes and the
 * host from the ranks.
 * write_flush_s (the put and the flush, max over ranks) is reported for
 * information. Nothing is synced, the page cache is not dropped.
 *
 * After each close rank 0 stats the file (file_bytes; allocated_bytes
 * from st_blocks) and opens it with libhdf5: the layout and chunk shape
 * /x has (a finalized contiguous variable may be stored chunked, in
 * place) and fin_bytes, the bytes of the /_h5log/fin.K datasets (the
 * copied chunks and chunk index nodes; 0 when every chunk stayed in
 * place). --verify: rank 0 also reads the finalized /x back with plain
 * libhdf5, plane by plane, and checks every element. The file is removed
 * unless --keep.
 *
 * Output: one JSON object on one line from rank 0. BENCH_PERF_CTL (set by
 * bench/perf_ranks.sh): perf's control fifo, enabled around the timed
 * h5l_close of the modes in BENCH_PERF_MODES (default "fin"). On any
 * failure the reason goes to stderr and the job is aborted. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "h5log.h"

enum { MODE_NOFIN, MODE_FIN, NMODE };
static const char *const mode_name[NMODE] = {"nofin", "fin"};

static int g_rank = -1;

static void die_at(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Print the reason and abort the whole job: one rank failing inside a
 * collective would leave the others waiting forever. */
static void die_at(int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "bench_finalize[rank %d] line %d: ", g_rank, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}
#define DIE(...) die_at(__LINE__, __VA_ARGS__)

#define H5L_CHECK(call, f)                                                                                             \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != H5L_OK) DIE("%s: %s [%s]", #call, h5l_errmsg(f), h5l_strerror(rc_));                                \
    } while (0)

/* CPU seconds of this process (user + system) and its context switches */
static double cpu_now(long *vcsw, long *ivcsw)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *vcsw = ru.ru_nvcsw;
    *ivcsw = ru.ru_nivcsw;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* The machine's CPU seconds so far (/proc/stat, all CPUs): user (with
 * nice), system (with irq and softirq), idle, iowait, steal (taken by the
 * host: a VM's vCPU waiting for its host). Zeros if unreadable. */
enum { ST_USER, ST_SYSTEM, ST_IDLE, ST_IOWAIT, ST_STEAL, NST };
static const char *const st_name[NST] = {"user", "system", "idle", "iowait", "steal"};
static void machine_cpu(double *out)
{
    unsigned long long v[8] = {0};
    memset(out, 0, NST * sizeof *out);
    FILE *fp = fopen("/proc/stat", "r");
    if (!fp) return;
    int n = fscanf(fp, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]);
    fclose(fp);
    if (n != 8) return;
    double hz = (double)sysconf(_SC_CLK_TCK);
    out[ST_USER] = (double)(v[0] + v[1]) / hz;
    out[ST_SYSTEM] = (double)(v[2] + v[5] + v[6]) / hz;
    out[ST_IDLE] = (double)v[3] / hz;
    out[ST_IOWAIT] = (double)v[4] / hz;
    out[ST_STEAL] = (double)v[7] / hz;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* perf's control fifo (BENCH_PERF_CTL, bench/perf_ranks.sh): only the
 * timed closes of the modes in BENCH_PERF_MODES are profiled. */
static void perf_ctl(int mode, const char *cmd)
{
    const char *path = getenv("BENCH_PERF_CTL");
    if (!path || !path[0]) return;
    const char *modes = getenv("BENCH_PERF_MODES");
    if (!modes || !modes[0]) modes = "fin";
    char want[64];
    snprintf(want, sizeof want, ",%s,", mode_name[mode]);
    char have[256];
    snprintf(have, sizeof have, ",%s,", modes);
    if (!strstr(have, want)) return;
    int fd = open(path, O_WRONLY);
    if (fd < 0) return;
    if (write(fd, cmd, strlen(cmd)) < 0) {
        /* profiling is best effort */
    }
    close(fd);
}

/* The value of the element with global linear index g: exact in float32
 * and never 0 (the fill value). */
static inline float val(uint64_t g) { return (float)(g % 16777199u + 1u); }

/* Write `bytes` to a scratch file in dir and delete it, so that the memory
 * the timed close takes (page cache for the copies above all) is memory
 * the guest has just used: this VM (Firecracker, free page reporting)
 * hands freed guest memory back to the host about two seconds after it is
 * freed, and the first touch of such a page costs a host fault (`dd` of
 * 512 MiB into the page cache: about 400 MB/s instead of about 4 GB/s).
 * Same as bench_write.c's warm_memory. */
static void warm_memory(const char *dir, size_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/.bench_warm.%d", dir, g_rank);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) DIE("warm-up %s: open: %s", path, strerror(errno));
    unlink(path); /* pages stay until close */
    const size_t blk = (size_t)4 << 20;
    char *zero = calloc(1, blk);
    if (!zero) DIE("out of memory");
    for (size_t done = 0; done < bytes; done += blk)
        if (pwrite(fd, zero, blk, (off_t)done) != (ssize_t)blk) DIE("warm-up %s: write: %s", path, strerror(errno));
    close(fd);
    free(zero);
}

#define MAXR 64 /* ranks reported one by one */

typedef struct result {
    double write_flush_s, close_s;
    double close_rank_s[MAXR]; /* each rank's close: wall, CPU (user + system) */
    double close_cpu_s[MAXR];
    long close_csw[MAXR][2];   /* context switches in it: voluntary (blocked), involuntary */
    double machine[NST];       /* the machine's CPU seconds during the close (rank 0's view) */
    long long file_bytes, allocated_bytes;
    uint64_t fin_bytes;
    int fin_datasets;
    char layout[16];
    uint64_t chunk[3];
    int verified; /* -1: not checked */
} result_t;

/* The sizes of the /_h5log/fin.K datasets, and /x's layout (rank 0,
 * after the close). */
static void inspect(const char *path, int mode, result_t *res)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) DIE("%s: libhdf5 cannot open it", path);
    hid_t ds = H5Dopen2(f, "/x", H5P_DEFAULT);
    if (ds < 0) DIE("%s: no /x", path);
    hid_t dcpl = H5Dget_create_plist(ds);
    H5D_layout_t lay = H5Pget_layout(dcpl);
    snprintf(res->layout, sizeof res->layout, "%s",
             lay == H5D_CHUNKED ? "chunked" : lay == H5D_CONTIGUOUS ? "contiguous" : "other");
    if (lay == H5D_CHUNKED) {
        hsize_t c[3] = {0, 0, 0};
        if (H5Pget_chunk(dcpl, 3, c) != 3) DIE("%s: /x: H5Pget_chunk failed", path);
        for (int d = 0; d < 3; d++) res->chunk[d] = c[d];
    }
    H5Pclose(dcpl);
    H5Dclose(ds);
    res->fin_bytes = 0;
    res->fin_datasets = 0;
    for (int k = 1; mode == MODE_FIN; k++) {
        char name[64];
        snprintf(name, sizeof name, "/_h5log/fin.%d", k);
        if (H5Lexists(f, name, H5P_DEFAULT) <= 0) break;
        hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
        hid_t sp = d < 0 ? -1 : H5Dget_space(d);
        hsize_t n = 0;
        if (sp < 0 || H5Sget_simple_extent_dims(sp, &n, NULL) != 1) DIE("%s: %s is not 1-D", path, name);
        res->fin_bytes += n;
        res->fin_datasets++;
        H5Sclose(sp);
        H5Dclose(d);
    }
    H5Fclose(f);
}

/* Rank 0: read the finalized /x back with plain libhdf5, plane by plane. */
static int verify(const char *path, uint64_t n)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return 0;
    hid_t ds = H5Dopen2(f, "/x", H5P_DEFAULT);
    hid_t fs = ds < 0 ? -1 : H5Dget_space(ds);
    hsize_t cnt[3] = {1, n, n}, mdim[1] = {n * n};
    hid_t ms = H5Screate_simple(1, mdim, NULL);
    float *p = malloc((size_t)(n * n) * sizeof *p);
    int ok = ds >= 0 && fs >= 0 && ms >= 0 && p;
    for (uint64_t i = 0; ok && i < n; i++) {
        hsize_t st[3] = {i, 0, 0};
        ok = H5Sselect_hyperslab(fs, H5S_SELECT_SET, st, NULL, cnt, NULL) >= 0 &&
             H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, p) >= 0;
        for (uint64_t l = 0; ok && l < n * n; l++)
            if (p[l] != val(i * n * n + l)) {
                fprintf(stderr, "bench_finalize: %s: /x[%" PRIu64 "][%" PRIu64 "][%" PRIu64 "] = %g, not %g\n", path,
                        i, l / n, l % n, (double)p[l], (double)val(i * n * n + l));
                ok = 0;
            }
    }
    free(p);
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    H5Fclose(f);
    return ok;
}

static void usage(void)
{
    DIE("usage: bench_finalize --dir DIR --n N [--chunk A,B,C|default] [--modes nofin,fin] [--keep] [--cold] "
        "[--sync] [--verify]");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int np;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    const char *dir = NULL, *chunk_arg = "default", *modes_arg = "nofin,fin";
    uint64_t n = 0;
    int keep = 0, cold = 0, check = 0, sync_first = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--n") && i + 1 < argc)
            n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            chunk_arg = argv[++i];
        else if (!strcmp(argv[i], "--modes") && i + 1 < argc)
            modes_arg = argv[++i];
        else if (!strcmp(argv[i], "--keep"))
            keep = 1;
        else if (!strcmp(argv[i], "--cold"))
            cold = 1;
        else if (!strcmp(argv[i], "--verify"))
            check = 1;
        else if (!strcmp(argv[i], "--sync"))
            sync_first = 1;
        else
            usage();
    }
    if (!dir || !n) usage();
    if (np > MAXR) DIE("at most %d ranks", MAXR);
    uint64_t chunk[3] = {0, 0, 0};
    int chunked = strcmp(chunk_arg, "default") != 0;
    if (chunked) {
        unsigned long long a, b, c;
        char tail;
        if (sscanf(chunk_arg, "%llu,%llu,%llu%c", &a, &b, &c, &tail) != 3 || !a || !b || !c || a > n || b > n || c > n)
            DIE("--chunk %s: three lengths from 1 to N (%" PRIu64 ") or 'default'", chunk_arg, n);
        chunk[0] = a, chunk[1] = b, chunk[2] = c;
    }
    int modes[NMODE], nmodes = 0;
    {
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s", modes_arg);
        for (char *s = strtok(tmp, ","); s; s = strtok(NULL, ",")) {
            int m = !strcmp(s, "fin") ? MODE_FIN : !strcmp(s, "nofin") ? MODE_NOFIN : -1;
            if (m < 0 || nmodes == NMODE) DIE("--modes %s: a list of fin and nofin", modes_arg);
            modes[nmodes++] = m;
        }
        if (!nmodes) usage();
    }

    /* this rank's band of dimension 0, generated before any clock */
    uint64_t P = (uint64_t)np, r = (uint64_t)g_rank, lo = n * r / P, hi = n * (r + 1) / P;
    size_t nbuf = (size_t)((hi - lo) * n * n), band_bytes = nbuf * sizeof(float);
    size_t map = (band_bytes ? band_bytes : 1) + 4095;
    map -= map % 4096;
    float *buf = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) DIE("out of memory (%zu bytes)", map);
    (void)madvise(buf, map, MADV_HUGEPAGE); /* like h5l_put's arena (bench_write.c alloc_data) */
    for (size_t l = 0; l < nbuf; l++) buf[l] = val(lo * n * n + l);
    uint64_t data_bytes = n * n * n * sizeof(float);

    result_t res[NMODE];
    memset(res, 0, sizeof res);
    for (int mi = 0; mi < nmodes; mi++) {
        int mode = modes[mi];
        result_t *rs = &res[mode];
        char path[4096];
        snprintf(path, sizeof path, "%s/fin_%" PRIu64 "_%s.h5", dir, n, mode_name[mode]);
        h5l_opts_t o;
        h5l_opts_init(&o);
        o.no_finalize = mode == MODE_NOFIN;
        if (o.buffer_limit < band_bytes + ((size_t)16 << 20)) o.buffer_limit = band_bytes + ((size_t)16 << 20);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        h5l_file_t *f = NULL;
        H5L_CHECK(h5l_create(path, MPI_COMM_WORLD, &o, &f), f);
        static const char *const dn[3] = {"z", "y", "x"};
        int d[3], var;
        for (int i = 0; i < 3; i++) H5L_CHECK(h5l_def_dim(f, dn[i], n, &d[i]), f);
        H5L_CHECK(h5l_def_var(f, "/x", H5T_IEEE_F32LE, 3, d, chunked ? chunk : NULL, &var), f);
        uint64_t start[3] = {lo, 0, 0}, count[3] = {hi - lo, n, n};
        if (hi > lo) H5L_CHECK(h5l_put(f, var, start, count, buf), f);
        H5L_CHECK(h5l_flush(f), f);
        double wf = now() - t0;
        if (sync_first && g_rank == 0) { /* the log's dirty pages written back before the clock */
            int dfd = open(dir, O_RDONLY | O_DIRECTORY);
            if (dfd < 0 || syncfs(dfd) != 0) DIE("%s: syncfs: %s", dir, strerror(errno));
            close(dfd);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        /* the close copies about this rank's band (and reads it through
         * windows of 32 MiB) */
        if (!cold) warm_memory(dir, band_bytes + ((size_t)64 << 20));
        MPI_Barrier(MPI_COMM_WORLD);
        perf_ctl(mode, "enable");
        long v0, i0, v1, i1;
        double m0[NST], m1[NST];
        machine_cpu(m0);
        double u0 = cpu_now(&v0, &i0), t1 = now();
        int rc = h5l_close(f);
        double c = now() - t1, u = cpu_now(&v1, &i1) - u0;
        machine_cpu(m1);
        for (int k = 0; k < NST; k++) rs->machine[k] = m1[k] - m0[k];
        perf_ctl(mode, "disable");
        if (rc != H5L_OK) DIE("h5l_close: %s [%s]", h5l_errmsg(NULL), h5l_strerror(rc));
        double cmax = c, mine[4] = {c, u, (double)(v1 - v0), (double)(i1 - i0)}, all[4 * MAXR];
        MPI_Reduce(g_rank ? &wf : MPI_IN_PLACE, &wf, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(g_rank ? &cmax : MPI_IN_PLACE, &cmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Gather(mine, 4, MPI_DOUBLE, all, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        rs->write_flush_s = wf;
        rs->close_s = cmax;
        for (int q = 0; g_rank == 0 && q < np && q < MAXR; q++) {
            rs->close_rank_s[q] = all[4 * q];
            rs->close_cpu_s[q] = all[4 * q + 1];
            rs->close_csw[q][0] = (long)all[4 * q + 2];
            rs->close_csw[q][1] = (long)all[4 * q + 3];
        }
        rs->verified = -1;
        if (g_rank == 0) {
            struct stat st;
            if (stat(path, &st)) DIE("%s: stat: %s", path, strerror(errno));
            rs->file_bytes = (long long)st.st_size;
            rs->allocated_bytes = (long long)st.st_blocks * 512;
            inspect(path, mode, rs);
            if (check && mode == MODE_FIN) rs->verified = verify(path, n);
            if (!keep && unlink(path) != 0) DIE("%s: unlink: %s", path, strerror(errno));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    munmap(buf, map);

    if (g_rank == 0) {
        printf("{\"n\": %" PRIu64 ", \"ranks\": %d, \"chunk\": ", n, np);
        if (chunked)
            printf("[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", chunk[0], chunk[1], chunk[2]);
        else
            printf("null");
        printf(", \"data_bytes\": %" PRIu64 ", \"warm\": %s, \"modes\": {", data_bytes, cold ? "false" : "true");
        for (int mi = 0; mi < nmodes; mi++) {
            const result_t *rs = &res[modes[mi]];
            printf("%s\"%s\": {\"order\": %d, \"write_flush_s\": %.6f, \"close_s\": %.6f", mi ? ", " : "",
                   mode_name[modes[mi]], mi, rs->write_flush_s, rs->close_s);
            const char *key[3] = {"close_rank_s", "close_cpu_rank_s", "close_csw_rank"};
            for (int k = 0; k < 3; k++) {
                printf(", \"%s\": [", key[k]);
                for (int q = 0; q < np; q++) {
                    if (k < 2)
                        printf("%s%.6f", q ? ", " : "", k ? rs->close_cpu_s[q] : rs->close_rank_s[q]);
                    else
                        printf("%s[%ld, %ld]", q ? ", " : "", rs->close_csw[q][0], rs->close_csw[q][1]);
                }
                printf("]");
            }
            printf(", \"close_machine_cpu_s\": {");
            for (int k = 0; k < NST; k++) printf("%s\"%s\": %.2f", k ? ", " : "", st_name[k], rs->machine[k]);
            printf("}");
            printf(", \"file_bytes\": %lld, \"allocated_bytes\": %lld, \"layout\": \"%s\", \"chunk\": ",
                   rs->file_bytes, rs->allocated_bytes, rs->layout);
            if (!strcmp(rs->layout, "chunked"))
                printf("[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", rs->chunk[0], rs->chunk[1], rs->chunk[2]);
            else
                printf("null");
            printf(", \"fin_bytes\": %" PRIu64 ", \"fin_datasets\": %d, \"verified\": %s}", rs->fin_bytes,
                   rs->fin_datasets, rs->verified < 0 ? "null" : rs->verified ? "true" : "false");
        }
        printf("}");
        if (nmodes == NMODE)
            printf(", \"finalize_s\": %.6f", res[MODE_FIN].close_s - res[MODE_NOFIN].close_s);
        printf("}\n");
        fflush(stdout);
        int bad = check && res[MODE_FIN].verified == 0;
        if (bad) DIE("the finalized file read back wrong");
    }
    MPI_Finalize();
    return 0;
}
