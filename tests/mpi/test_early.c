/* test_early.c — MPI test of early writes (h5l_opts_t.early_writes,
 * docs/format.md 6): a tick whose sizes repeat the last one's gets its
 * place reserved by the flush before it, and puts write their data there
 * as they come.
 *
 * Usage: mpirun -np P test_early DIR
 *
 * Each scenario writes a file with a schedule of how many 125 KiB rows of
 * /big each rank puts at each tick (plus one small row of /small, in 16
 * puts of 64 bytes, so every tick also has arena data and merged records),
 * then rank 0 reads every tick of the closed file back through the reader
 * and compares each element with its closed form (row * 1e6 + column; the
 * netCDF fill where no tick up to then wrote). What tells early writing
 * happened, and where:
 *   - h5l_buffered() just before a flush: with a reserved place, h5l_put's
 *     large rows went to the file at once (the arena keeps less than a
 *     row); without, it holds every byte put;
 *   - where each tick's data lies: a tick that fit its reserved place
 *     starts right after the record table of the tick before (where the
 *     reservation was made); a tick whose sizes changed was moved after
 *     the reserved place, leaving a gap; and every tick's bytes lie in
 *     the log extents libhdf5 allocated (ticks here are big enough for
 *     the writer to make extents ahead).
 * Callers' buffers are scribbled over once h5l_put returns (it must have
 * copied or written what it still needs). Prints "N passed, N failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "h5log.h"
#include "h5log_reader.h"

enum { KB = 16000, SMALL = 128, MAXT = 16, MAXROWS = 4 };
static int g_size;
static const double FILLD = 9.9692099683868690e+36;

typedef struct sched {
    const char *name;
    int ticks;
    int iput;     /* h5l_iput instead of h5l_put for /big */
    int early;    /* h5l_opts_t.early_writes; -1: only rank 0 sets it */
    /* rows of /big rank r puts at tick t: rows(t, r) */
    int (*rows)(int t, int r);
    /* what the placement of each tick must show: 'm' fit its reserved
     * place, 'v' moved away from it, '.' either (unchecked) */
    const char *place;
} sched_t;

static double bigval(uint64_t row, uint64_t col) { return (double)row * 1e6 + (double)col; }
static float smallval(uint64_t row, uint64_t col) { return (float)(row * 1000 + col); }

static int rows_steady(int t, int r)
{
    (void)t;
    (void)r;
    return 2;
}

/* sizes change: rank P-1 grows at 4 and 5 (4 overflows its place, 5 had
 * none), rank 0 shrinks at 6 (which had a place: 6's sizes repeat 5's); 9
 * puts nothing (an attribute only) though 8 reserved for it; 11 fits
 * again (10's sizes repeat 8's, the last tick with data) */
static int rows_vary(int t, int r)
{
    if (t == 9) return 0;
    if ((t == 4 || t == 5) && r == g_size - 1) return 3;
    if (t == 6 && r == 0) return 1;
    return 2;
}

static const sched_t SCHED[] = {
    {"steady_put.h5", 5, 0, 1, rows_steady, ".mmmm"},
    {"steady_iput.h5", 5, 1, 1, rows_steady, ".mmmm"},
    {"no_early.h5", 4, 0, 0, rows_steady, "...."},
    {"early_rank0.h5", 4, 0, -1, rows_steady, "...."},
    {"vary.h5", 11, 0, 1, rows_vary, ".mmv.v..v.m"},
};

/* the first row of /big tick t writes */
static uint64_t row0(int t) { return (uint64_t)(t - 1) * MAXROWS; }

static void write_file(const char *dir, const sched_t *s, uint64_t *bytes_put, uint64_t *buffered)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, s->name);
    h5l_opts_t o;
    h5l_opts_init(&o);
    o.early_writes = s->early == 1 || (s->early == -1 && g_rank == 0);
    o.no_finalize = 1;
    h5l_file_t *f = NULL;
    int rc = h5l_create(path, MPI_COMM_WORLD, &o, &f);
    EXPECT(rc == 0, "%s: create: %s", s->name, h5l_errmsg(NULL));
    if (rc) MPI_Abort(MPI_COMM_WORLD, 1);
    int db, ds, dcb, dcs, big, small;
    rc = h5l_def_dim(f, "tb", H5L_UNLIMITED, &db) | h5l_def_dim(f, "ts", H5L_UNLIMITED, &ds) |
         h5l_def_dim(f, "xb", (uint64_t)KB * (uint64_t)g_size, &dcb) |
         h5l_def_dim(f, "xs", (uint64_t)SMALL * (uint64_t)g_size, &dcs);
    int d2[2] = {db, dcb}, s2[2] = {ds, dcs};
    rc |= h5l_def_var(f, "/big", H5T_NATIVE_DOUBLE, 2, d2, NULL, &big);
    rc |= h5l_def_var(f, "/small", H5T_NATIVE_FLOAT, 2, s2, NULL, &small);
    EXPECT(rc == 0, "%s: definitions: %s", s->name, h5l_errmsg(f));
    double *keep[MAXT * MAXROWS] = {0};
    int nkeep = 0;
    for (int t = 1; t <= s->ticks; t++) {
        uint64_t put = 0;
        int n = s->rows(t, g_rank);
        for (int i = 0; i < n; i++) {
            double *b = malloc(KB * sizeof *b);
            uint64_t row = row0(t) + (uint64_t)i, c0 = (uint64_t)g_rank * KB;
            for (uint64_t j = 0; j < KB; j++) b[j] = bigval(row, c0 + j);
            uint64_t st[2] = {row, c0}, ct[2] = {1, KB};
            rc = s->iput ? h5l_iput(f, big, st, ct, b) : h5l_put(f, big, st, ct, b);
            EXPECT(rc == 0, "%s: put of tick %d: %s", s->name, t, h5l_errmsg(f));
            put += KB * sizeof *b;
            if (s->iput) {
                keep[nkeep++] = b; /* until the flush */
            } else {
                memset(b, 0x5A, KB * sizeof *b);
                free(b);
            }
        }
        if (n) /* a tick that puts nothing large puts nothing at all */
            for (int k = 0; k < 16; k++) {
                float v[SMALL / 16];
                uint64_t c0 = (uint64_t)g_rank * SMALL + (uint64_t)k * (SMALL / 16);
                for (int j = 0; j < SMALL / 16; j++) v[j] = smallval((uint64_t)t - 1, c0 + (uint64_t)j);
                uint64_t st[2] = {(uint64_t)t - 1, c0}, ct[2] = {1, SMALL / 16};
                rc = h5l_put(f, small, st, ct, v);
                EXPECT(rc == 0, "%s: small put of tick %d: %s", s->name, t, h5l_errmsg(f));
                put += sizeof v;
            }
        else
            h5l_put_att_text(f, H5L_GLOBAL, "note", "a tick without data");
        bytes_put[t] = put;
        buffered[t] = h5l_buffered(f);
        rc = h5l_flush(f);
        EXPECT(rc == 0, "%s: flush of tick %d: %s", s->name, t, h5l_errmsg(f));
        for (int i = 0; i < nkeep; i++) free(keep[i]);
        nkeep = 0;
    }
    rc = h5l_close(f);
    EXPECT(rc == 0, "%s: close: %s", s->name, h5l_errmsg(NULL));
}

/* Rank 0: the log extents of the closed file (/_h5log/log.K, read with
 * libhdf5): every tick's data and record table lie inside one of them, and
 * no two overlap (format.md 1) — where extents made ahead (make_ahead) or
 * reserved places could go wrong without the values showing it. */
static void check_extents(const char *path, const char *name, h5l_reader_t *r, int ticks)
{
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    EXPECT(fid >= 0, "%s: libhdf5 cannot open it", name);
    if (fid < 0) return;
    uint64_t ext[64][2];
    int n = 0;
    for (; n < 64; n++) {
        char ds[64];
        snprintf(ds, sizeof ds, "/_h5log/log.%d", n + 1);
        if (H5Lexists(fid, ds, H5P_DEFAULT) <= 0) break;
        hid_t d = H5Dopen2(fid, ds, H5P_DEFAULT), sp = H5Dget_space(d);
        hsize_t len = 0;
        H5Sget_simple_extent_dims(sp, &len, NULL);
        ext[n][0] = H5Dget_offset(d);
        ext[n][1] = ext[n][0] + len;
        H5Sclose(sp);
        H5Dclose(d);
    }
    H5Fclose(fid);
    EXPECT(n > 0, "%s: no log extent", name);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            EXPECT(ext[i][1] <= ext[j][0] || ext[j][1] <= ext[i][0], "%s: extents %d and %d overlap", name, i + 1,
                   j + 1);
    for (int t = 1; t <= ticks; t++) {
        h5l_tick_info_t ti;
        h5l_reader_tick_info(r, (uint64_t)t, &ti);
        uint64_t a[2][2] = {{ti.data_off, ti.data_off + ti.data_size}, {ti.table_off, ti.table_off + ti.table_size}};
        for (int k = ti.data_size ? 0 : 1; k < 2; k++) {
            int in = 0;
            for (int i = 0; i < n; i++) in |= a[k][0] >= ext[i][0] && a[k][1] <= ext[i][1];
            EXPECT(in, "%s: tick %d's %s [%llu, %llu) lies in no log extent", name, t, k ? "record table" : "data",
                   (unsigned long long)a[k][0], (unsigned long long)a[k][1]);
        }
    }
}

/* Rank 0: every tick of the closed file against the closed form. */
static void check_file(const char *dir, const sched_t *s)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, s->name);
    h5l_reader_t *r = NULL;
    h5l_err_t e = {0};
    if (h5l_reader_open(path, &r, &e)) {
        EXPECT(0, "%s: open: %s", s->name, e.msg);
        return;
    }
    EXPECT(h5l_reader_ntick(r) == (uint64_t)s->ticks, "%s: %llu ticks", s->name,
           (unsigned long long)h5l_reader_ntick(r));
    check_extents(path, s->name, r, s->ticks);
    uint64_t nb = (uint64_t)KB * (uint64_t)g_size, ns = (uint64_t)SMALL * (uint64_t)g_size;
    for (int t = 1; t <= s->ticks; t++) {
        h5l_tick_info_t ti, tp;
        h5l_reader_tick_info(r, (uint64_t)t, &ti);
        if (t > 1) {
            h5l_reader_tick_info(r, (uint64_t)t - 1, &tp);
            uint64_t after = tp.table_off + tp.table_size;
            char want = s->place[t - 1];
            if (want == 'm')
                EXPECT(ti.data_off == after, "%s: tick %d's data at %llu, not in its reserved place %llu", s->name, t,
                       (unsigned long long)ti.data_off, (unsigned long long)after);
            if (want == 'v')
                EXPECT(ti.data_size == 0 || ti.data_off > after,
                       "%s: tick %d's data at %llu: not moved past its reserved place %llu", s->name, t,
                       (unsigned long long)ti.data_off, (unsigned long long)after);
        }
        /* /big as of tick t: every row any tick up to t may have written */
        uint64_t rows = 0;
        for (int u = 1; u <= t; u++)
            for (int q = 0; q < g_size; q++) {
                uint64_t n = (uint64_t)s->rows(u, q);
                if (n && row0(u) + n > rows) rows = row0(u) + n;
            }
        const h5l_schema_t *sc = h5l_reader_schema(r);
        uint64_t shape[2];
        h5l_reader_rdlock(r);
        h5l_schema_shape(sc, 1, (uint64_t)t, shape);
        h5l_reader_unlock(r);
        EXPECT(shape[0] == rows, "%s: tick %d: /big has %llu rows, want %llu", s->name, t,
               (unsigned long long)shape[0], (unsigned long long)rows);
        if (shape[0] != rows) continue;
        double *b = malloc(rows * nb * sizeof *b);
        uint64_t st[2] = {0, 0}, ct[2] = {rows, nb};
        int rc = h5l_reader_read(r, (uint64_t)t, 1, st, ct, b, &e);
        EXPECT(rc == 0, "%s: read /big at tick %d: %s", s->name, t, e.msg);
        uint64_t bad = 0, first = 0;
        for (uint64_t row = 0; rc == 0 && row < rows; row++)
            for (uint64_t c = 0; c < nb; c++) {
                int u = (int)(row / MAXROWS) + 1, q = (int)(c / KB);
                int written = u <= t && row - row0(u) < (uint64_t)s->rows(u, q);
                double want = written ? bigval(row, c) : FILLD;
                if (b[row * nb + c] != want && !bad++) first = row * nb + c;
            }
        EXPECT(bad == 0, "%s: tick %d: %llu wrong elements of /big, the first at %llu", s->name, t,
               (unsigned long long)bad, (unsigned long long)first);
        free(b);
        /* /small: row u-1 is rank q's at tick u when it put anything then */
        uint64_t srows = 0;
        for (int u = 1; u <= t; u++)
            for (int q = 0; q < g_size; q++)
                if (s->rows(u, q)) srows = (uint64_t)u;
        float *sb = malloc((srows ? srows : 1) * ns * sizeof *sb);
        uint64_t sc2[2] = {srows, ns};
        rc = srows ? h5l_reader_read(r, (uint64_t)t, 2, st, sc2, sb, &e) : 0;
        EXPECT(rc == 0, "%s: read /small at tick %d: %s", s->name, t, e.msg);
        bad = 0;
        for (uint64_t row = 0; rc == 0 && row < srows; row++)
            for (uint64_t c = 0; c < ns; c++) {
                float want = s->rows((int)row + 1, (int)(c / SMALL)) ? smallval(row, c) : (float)FILLD;
                if (sb[row * ns + c] != want) bad++;
            }
        EXPECT(bad == 0, "%s: tick %d: %llu wrong elements of /small", s->name, t, (unsigned long long)bad);
        free(sb);
    }
    h5l_reader_close(r);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (argc < 2) {
        if (!g_rank) fprintf(stderr, "usage: test_early DIR\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (size_t i = 0; i < sizeof SCHED / sizeof SCHED[0]; i++) {
        const sched_t *s = &SCHED[i];
        uint64_t put[MAXT + 1] = {0}, buf[MAXT + 1] = {0};
        write_file(argv[1], s, put, buf);
        int early_on = s->early == 1 || (s->early == -1 && g_size == 1); /* every rank sets it */
        for (int t = 1; t <= s->ticks; t++) {
            if (s->iput || !put[t]) continue;
            /* tick 1 has no place; a tick with a place keeps less than a
             * row (the small row and a segment's tail); an overflowing
             * rank stops writing early at its extra row */
            int place = early_on && t > 1 && s->place[t - 1] == 'm';
            if (place)
                EXPECT(buf[t] < KB * sizeof(double), "%s: tick %d: %llu of %llu bytes still buffered at the flush",
                       s->name, t, (unsigned long long)buf[t], (unsigned long long)put[t]);
            if (!early_on || t == 1)
                EXPECT(buf[t] == put[t], "%s: tick %d: %llu of %llu bytes buffered, want all", s->name, t,
                       (unsigned long long)buf[t], (unsigned long long)put[t]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 0) check_file(argv[1], s);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    int fails = g_fail, passes = g_pass;
    MPI_Allreduce(MPI_IN_PLACE, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &passes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (g_rank == 0) printf("%d passed, %d failed\n", passes, fails);
    return fails ? 1 : 0;
}
