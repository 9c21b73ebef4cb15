/* climate_writer.c — a climate/particle-style MPI writer for the real-client
 * tests (tests/e2e/test_clients.py).
 *
 * Usage: mpirun -np P climate_writer DIR [--ticks N]
 *
 * Real clients (ncdump, cdo, nco, xarray, ...) found bugs that reading our
 * own test files never showed: a missing _FillValue dragged averages, a
 * reserved attribute name crashed ncdump, objects came out alphabetically,
 * default chunks bloated small files. So this writer produces what a model
 * writes: an unlimited time dimension with coordinate variables (time, lat,
 * lon, lev), a particle dimension without one, a group and a nested group,
 * several types including a big-endian one, units/long_name/numeric
 * attributes, a global history updated every tick, a variable defined after
 * the first flush, a fill-valued variable written only in part (its time
 * mean must skip the fill), a never-written variable, overlapping writes and
 * ranks writing disjoint bands.
 *
 * Every value is a closed-form function of (time index, indices) — and, for
 * the overlapping writes, of the writing rank and the call order — so that
 * tests/e2e/clients_ref.py computes the same content independently with
 * numpy and writes it with netCDF4-python as the canonical reference.
 * THE TWO FILES MUST DESCRIBE THE SAME CONTENT: change both together.
 *
 * DIR/climate.h5 is the file under test. DIR/reserved.h5 is a small
 * negative case: h5l_put_att with names that belong to HDF5 dimension scales
 * or to netCDF-4's own bookkeeping must be refused with H5L_EINVAL (such an
 * attribute makes netCDF clients misread or fail on the file). Rank 0
 * prints one line per name, "reserved NAME on OBJ: refused: MESSAGE" (or
 * ACCEPTED, or the wrong error), for the tests to check. The exit status is
 * 0 unless the writer itself failed (then 1, with the reason on stderr). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h5log.h"

enum { NLAT = 8, NLON = 12, NLEV = 3, NPART = 16, MAXTICKS = 64 };

static int g_rank, g_size;

/* Abort the whole job with a message naming the call and the reason. */
#define CHECK(call, f)                                                                                                 \
    do {                                                                                                               \
        int rc_ = (call);                                                                                              \
        if (rc_ != H5L_OK) {                                                                                           \
            fprintf(stderr, "climate_writer rank %d: %s:%d: %s failed: %s (%s)\n", g_rank, __FILE__, __LINE__, #call,  \
                    h5l_errmsg(f), h5l_strerror(rc_));                                                                 \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                              \
        }                                                                                                              \
    } while (0)

/* ---- the content (mirrored by tests/e2e/clients_ref.py) ---------------- */

static double v_time(int t) { return 6.0 * t; }
static double v_lat(int j) { return -87.5 + 25.0 * j; }
static double v_lon(int i) { return 30.0 * i; }
static const double LEV[NLEV] = {1000.0, 850.0, 500.0};
static double v_temp(int t, int k, int j, int i) { return 200.0 + t + 10.0 * k + 0.5 * j + 0.25 * i; }
static int is_land(int j, int i) { return (3 * i + 5 * j) % 7 < 3; }
/* precip is written where this is true; cell (0,0) never, so its mean is fill */
static int precip_written(int t, int j, int i) { return !(j == 0 && i == 0) && (i + j + t) % 3 != 0; }
static double v_precip(int t, int j, int i) { return 1.0 + t + 0.5 * j + 0.25 * i; }
static int32_t v_counts(int t, int p) { return 100 * t + p; }
static int64_t v_overlap(int tick, int rank, int j, int i)
{
    return (int64_t)tick * 1000000 + rank * 10000 + j * 100 + i;
}
static double v_sst(int t, int j, int i) { return 270.0 + 0.5 * t + 0.25 * j - 0.125 * i; } /* ocean cells only */
static int16_t v_flux(int t, int j, int i) { return (int16_t)(100 * t + 12 * j + i - 500); }
static double v_wind(int t, int j, int i) { return 0.5 * t + 0.125 * (i - j); } /* from time index 1 on */
static const double PRECIP_FILL = -999.0;

/* Latitude band [*j0, *j1) of a rank: the ranks' bands are disjoint. */
static void band(int rank, int *j0, int *j1)
{
    *j0 = rank * NLAT / g_size;
    *j1 = (rank + 1) * NLAT / g_size;
}

static void swap4(void *p)
{
    uint8_t *b = p, x;
    x = b[0];
    b[0] = b[3];
    b[3] = x;
    x = b[1];
    b[1] = b[2];
    b[2] = x;
}

typedef struct {
    int time, lat, lon, lev, temp, precip, counts, mask, overlap, unused, p0, sst, flux, wind;
    int ocean, surface;
    int dtime, dlat, dlon, dlev, dpart; /* dimension ids */
} ids_t;

/* Definitions before the first flush, in the order the reference defines
 * them (netCDF keeps definition order; so must the canonical file). */
static void define(h5l_file_t *f, ids_t *id)
{
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &id->dtime), f);
    CHECK(h5l_def_dim(f, "lat", NLAT, &id->dlat), f);
    CHECK(h5l_def_dim(f, "lon", NLON, &id->dlon), f);
    CHECK(h5l_def_dim(f, "lev", NLEV, &id->dlev), f);
    CHECK(h5l_def_dim(f, "particle", NPART, &id->dpart), f);
    int dtime = id->dtime, dlat = id->dlat, dlon = id->dlon, dlev = id->dlev, dpart = id->dpart;

    CHECK(h5l_put_att_text(f, H5L_GLOBAL, "title", "h5logfs client test: climate and particles"), f);
    CHECK(h5l_put_att_text(f, H5L_GLOBAL, "history", "created"), f);
    CHECK(h5l_put_att_text(f, H5L_GLOBAL, "Conventions", "CF-1.8"), f);
    int32_t version[3] = {1, 2, 3};
    CHECK(h5l_put_att(f, H5L_GLOBAL, "version", H5T_NATIVE_INT32, 3, version), f);

    /* coordinate variables: 1-D root variables named like their dimension */
    CHECK(h5l_def_var(f, "/time", H5T_NATIVE_DOUBLE, 1, &dtime, NULL, &id->time), f);
    CHECK(h5l_put_att_text(f, id->time, "standard_name", "time"), f);
    CHECK(h5l_put_att_text(f, id->time, "units", "hours since 2000-01-01 00:00:00"), f);
    CHECK(h5l_put_att_text(f, id->time, "calendar", "standard"), f);
    CHECK(h5l_put_att_text(f, id->time, "axis", "T"), f);
    CHECK(h5l_def_var(f, "/lat", H5T_NATIVE_FLOAT, 1, &dlat, NULL, &id->lat), f);
    CHECK(h5l_put_att_text(f, id->lat, "units", "degrees_north"), f);
    CHECK(h5l_put_att_text(f, id->lat, "long_name", "latitude"), f);
    CHECK(h5l_def_var(f, "/lon", H5T_NATIVE_FLOAT, 1, &dlon, NULL, &id->lon), f);
    CHECK(h5l_put_att_text(f, id->lon, "units", "degrees_east"), f);
    CHECK(h5l_put_att_text(f, id->lon, "long_name", "longitude"), f);
    CHECK(h5l_def_var(f, "/lev", H5T_NATIVE_DOUBLE, 1, &dlev, NULL, &id->lev), f);
    CHECK(h5l_put_att_text(f, id->lev, "units", "hPa"), f);
    CHECK(h5l_put_att_text(f, id->lev, "positive", "down"), f);

    /* data variables, deliberately not in alphabetical order */
    uint64_t tchunk[4] = {1, NLEV, NLAT / 2, NLON};
    CHECK(h5l_def_var(f, "/temp", H5T_NATIVE_FLOAT, 4, (int[]){dtime, dlev, dlat, dlon}, tchunk, &id->temp), f);
    CHECK(h5l_put_att_text(f, id->temp, "long_name", "air temperature"), f);
    CHECK(h5l_put_att_text(f, id->temp, "units", "K"), f);
    int32_t code = 130;
    CHECK(h5l_put_att(f, id->temp, "code", H5T_NATIVE_INT32, 1, &code), f);
    double weights[2] = {0.25, 0.75};
    CHECK(h5l_put_att(f, id->temp, "weights", H5T_NATIVE_DOUBLE, 2, weights), f);

    CHECK(h5l_def_var(f, "/precip", H5T_NATIVE_DOUBLE, 3, (int[]){dtime, dlat, dlon}, NULL, &id->precip), f);
    CHECK(h5l_def_var_fill(f, id->precip, &PRECIP_FILL), f);
    CHECK(h5l_put_att_text(f, id->precip, "long_name", "precipitation"), f);
    CHECK(h5l_put_att_text(f, id->precip, "units", "mm/day"), f);

    CHECK(h5l_def_var(f, "/counts", H5T_NATIVE_INT32, 2, (int[]){dtime, dpart}, NULL, &id->counts), f);
    CHECK(h5l_put_att_text(f, id->counts, "long_name", "particles per bin"), f);

    CHECK(h5l_def_var(f, "/mask", H5T_NATIVE_UINT8, 2, (int[]){dlat, dlon}, NULL, &id->mask), f);
    CHECK(h5l_put_att_text(f, id->mask, "long_name", "land mask"), f);
    CHECK(h5l_def_var(f, "/overlap", H5T_NATIVE_INT64, 2, (int[]){dlat, dlon}, NULL, &id->overlap), f);
    CHECK(h5l_def_var(f, "/unused", H5T_NATIVE_FLOAT, 2, (int[]){dlat, dlon}, NULL, &id->unused), f);
    CHECK(h5l_put_att_text(f, id->unused, "long_name", "never written"), f);
    CHECK(h5l_def_var(f, "/p0", H5T_NATIVE_DOUBLE, 0, NULL, NULL, &id->p0), f);
    CHECK(h5l_put_att_text(f, id->p0, "units", "Pa"), f);

    /* a group and a nested group */
    CHECK(h5l_def_grp(f, "/ocean", &id->ocean), f);
    CHECK(h5l_put_att_text(f, id->ocean, "description", "ocean component"), f);
    CHECK(h5l_def_var(f, "/ocean/sst", H5T_IEEE_F32BE, 3, (int[]){dtime, dlat, dlon}, NULL, &id->sst), f);
    CHECK(h5l_put_att_text(f, id->sst, "units", "K"), f);
    CHECK(h5l_put_att_text(f, id->sst, "long_name", "sea surface temperature"), f);
    CHECK(h5l_def_grp(f, "/ocean/surface", &id->surface), f);
    int32_t level = 0;
    CHECK(h5l_put_att(f, id->surface, "level", H5T_NATIVE_INT32, 1, &level), f);
    uint64_t fchunk[3] = {2, 4, 6};
    CHECK(h5l_def_var(f, "/ocean/surface/flux", H5T_NATIVE_INT16, 3, (int[]){dtime, dlat, dlon}, fchunk, &id->flux), f);
    CHECK(h5l_put_att_text(f, id->flux, "units", "W m-2"), f);
    int16_t frange[2] = {-500, 1500};
    CHECK(h5l_put_att(f, id->flux, "valid_range", H5T_NATIVE_INT16, 2, frange), f);
    id->wind = -1; /* defined after the first flush */
}

/* Row j of a (time, lat, lon) variable at time index t, run by run: only
 * the cells where keep() holds, as doubles converted by libhdf5. */
static void put_row_runs(h5l_file_t *f, int var, int t, int j, int (*keep)(int, int, int), double (*val)(int, int, int),
                         hid_t memtype)
{
    int i = 0;
    while (i < NLON) {
        if (!keep(t, j, i)) {
            i++;
            continue;
        }
        int i0 = i;
        double run[NLON];
        while (i < NLON && keep(t, j, i)) {
            run[i - i0] = val(t, j, i);
            i++;
        }
        uint64_t st[3] = {(uint64_t)t, (uint64_t)j, (uint64_t)i0}, ct[3] = {1, 1, (uint64_t)(i - i0)};
        CHECK(h5l_put_conv(f, var, memtype, st, ct, run), f);
    }
}

static int is_ocean(int t, int j, int i)
{
    (void)t;
    return !is_land(j, i);
}

/* The puts of one rank for time index t (published by tick t+1). */
static void write_tick(h5l_file_t *f, const ids_t *id, int t, int32_t *counts_keep)
{
    int j0, j1;
    band(g_rank, &j0, &j1);
    int nj = j1 - j0;
    uint64_t tt = (uint64_t)t;

    if (g_rank == 0) {
        double v = v_time(t);
        uint64_t st = tt, ct = 1;
        CHECK(h5l_put(f, id->time, &st, &ct, &v), f);
    }
    if (t == 0) {
        if (g_rank == 1 % g_size) {
            float lat[NLAT];
            for (int j = 0; j < NLAT; j++) lat[j] = (float)v_lat(j);
            uint64_t st = 0, ct = NLAT;
            CHECK(h5l_put(f, id->lat, &st, &ct, lat), f);
        }
        if (g_rank == g_size - 1) {
            double lon[NLON];
            for (int i = 0; i < NLON; i++) lon[i] = v_lon(i);
            uint64_t st = 0, ct = NLON;
            CHECK(h5l_put_conv(f, id->lon, H5T_NATIVE_DOUBLE, &st, &ct, lon), f);
        }
        if (g_rank == 0) {
            uint64_t st = 0, ct = NLEV;
            CHECK(h5l_put(f, id->lev, &st, &ct, LEV), f);
            uint8_t m[NLAT][NLON];
            for (int j = 0; j < NLAT; j++)
                for (int i = 0; i < NLON; i++) m[j][i] = (uint8_t)is_land(j, i);
            uint64_t s1[2] = {0, 0}, c1[2] = {NLAT / 2, NLON}, s2[2] = {NLAT / 2, 0}, c2[2] = {NLAT - NLAT / 2, NLON};
            CHECK(h5l_put(f, id->mask, s1, c1, m[0]), f);
            CHECK(h5l_put(f, id->mask, s2, c2, m[NLAT / 2]), f);
            double p0 = 101325.0;
            uint64_t none[1] = {0};
            CHECK(h5l_put(f, id->p0, none, none, &p0), f);
        }
    }
    if (nj > 0) {
        /* temp: this rank's latitude band, all levels; even ranks put floats,
         * odd ranks let libhdf5 convert from double */
        size_t n = (size_t)NLEV * nj * NLON;
        float *tf = malloc(n * sizeof *tf);
        double *td = malloc(n * sizeof *td);
        for (int k = 0, e = 0; k < NLEV; k++)
            for (int j = j0; j < j1; j++)
                for (int i = 0; i < NLON; i++, e++) td[e] = v_temp(t, k, j, i), tf[e] = (float)td[e];
        uint64_t st[4] = {tt, 0, (uint64_t)j0, 0}, ct[4] = {1, NLEV, (uint64_t)nj, NLON};
        if (g_rank % 2 == 0)
            CHECK(h5l_put(f, id->temp, st, ct, tf), f);
        else
            CHECK(h5l_put_conv(f, id->temp, H5T_NATIVE_DOUBLE, st, ct, td), f);
        free(tf);
        free(td);

        /* precip: only some cells, run by run; the rest stays fill */
        for (int j = j0; j < j1; j++) put_row_runs(f, id->precip, t, j, precip_written, v_precip, H5T_NATIVE_DOUBLE);

        /* sst (big-endian): ocean cells only; rank 0 byte-swaps itself, the
         * others let libhdf5 convert from native float */
        for (int j = j0; j < j1; j++) {
            if (g_rank != 0) {
                put_row_runs(f, id->sst, t, j, is_ocean, v_sst, H5T_NATIVE_DOUBLE);
                continue;
            }
            for (int i = 0; i < NLON; i++) {
                if (is_land(j, i)) continue;
                float v = (float)v_sst(t, j, i);
                swap4(&v);
                uint64_t s[3] = {tt, (uint64_t)j, (uint64_t)i}, c[3] = {1, 1, 1};
                CHECK(h5l_put(f, id->sst, s, c, &v), f);
            }
        }

        /* flux: the band in one put */
        int16_t *fl = malloc((size_t)nj * NLON * sizeof *fl);
        for (int j = j0, e = 0; j < j1; j++)
            for (int i = 0; i < NLON; i++, e++) fl[e] = v_flux(t, j, i);
        uint64_t fs[3] = {tt, (uint64_t)j0, 0}, fc[3] = {1, (uint64_t)nj, NLON};
        CHECK(h5l_put(f, id->flux, fs, fc, fl), f);
        free(fl);

        /* wind: defined after the first flush, written from time index 1 */
        if (id->wind >= 0 && t >= 1) {
            float *w = malloc((size_t)nj * NLON * sizeof *w);
            for (int j = j0, e = 0; j < j1; j++)
                for (int i = 0; i < NLON; i++, e++) w[e] = (float)v_wind(t, j, i);
            CHECK(h5l_put(f, id->wind, fs, fc, w), f);
            free(w);
        }
    }

    /* counts: disjoint particle ranges, without a copy (h5l_iput: the
     * buffer stays untouched until the flush) */
    int p0 = g_rank * NPART / g_size, p1 = (g_rank + 1) * NPART / g_size;
    if (p1 > p0) {
        for (int p = p0; p < p1; p++) counts_keep[p - p0] = v_counts(t, p);
        uint64_t st[2] = {tt, (uint64_t)p0}, ct[2] = {1, (uint64_t)(p1 - p0)};
        CHECK(h5l_iput(f, id->counts, st, ct, counts_keep), f);
    }

    /* overlap: every rank writes its band widened by one row on each side
     * (so neighbours overlap; the higher rank wins), then rewrites its first
     * row negated (the later call wins). Every tick rewrites everything. */
    if (nj > 0) {
        int a = j0 > 0 ? j0 - 1 : 0, b = j1 < NLAT ? j1 + 1 : NLAT;
        int64_t *o = malloc((size_t)(b - a) * NLON * sizeof *o);
        for (int j = a, e = 0; j < b; j++)
            for (int i = 0; i < NLON; i++, e++) o[e] = v_overlap(t + 1, g_rank, j, i);
        uint64_t st[2] = {(uint64_t)a, 0}, ct[2] = {(uint64_t)(b - a), NLON};
        CHECK(h5l_put(f, id->overlap, st, ct, o), f);
        for (int i = 0; i < NLON; i++) o[i] = -v_overlap(t + 1, g_rank, j0, i);
        uint64_t s1[2] = {(uint64_t)j0, 0}, c1[2] = {1, NLON};
        CHECK(h5l_put(f, id->overlap, s1, c1, o), f);
        free(o);
    }
}

/* The negative case: reserved attribute names are refused with H5L_EINVAL,
 * nothing is defined by the refused call, and the file stays usable. */
static void reserved_names(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/reserved.h5", dir);
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f) != H5L_OK) {
        fprintf(stderr, "climate_writer: create %s: %s\n", path, h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int dx, v, g;
    CHECK(h5l_def_dim(f, "x", 4, &dx), f);
    CHECK(h5l_def_var(f, "/v", H5T_NATIVE_INT32, 1, &dx, NULL, &v), f);
    CHECK(h5l_def_grp(f, "/g", &g), f);
    static const struct {
        const char *name;
        int text, on; /* on: 0 the variable, 1 the root group, 2 the group */
    } R[] = {
        {"DIMENSION_LIST", 0, 0}, {"REFERENCE_LIST", 0, 0}, {"CLASS", 1, 0},
        {"NAME", 1, 0},           {"_Netcdf4Dimid", 0, 0},  {"_Netcdf4Coordinates", 0, 0},
        {"_NCProperties", 1, 1},  {"_nc3_strict", 0, 1},    {"CLASS", 1, 2},
    };
    for (size_t k = 0; k < sizeof R / sizeof R[0]; k++) {
        int obj = R[k].on == 0 ? v : R[k].on == 1 ? H5L_GLOBAL : g;
        int32_t one = 1;
        int rc = R[k].text ? h5l_put_att_text(f, obj, R[k].name, "DIMENSION_SCALE")
                           : h5l_put_att(f, obj, R[k].name, H5T_NATIVE_INT32, 1, &one);
        if (g_rank == 0) {
            const char *on = R[k].on == 0 ? "/v" : R[k].on == 1 ? "/" : "/g";
            if (rc == H5L_EINVAL)
                printf("reserved %s on %s: refused: %s\n", R[k].name, on, h5l_errmsg(f));
            else if (rc == H5L_OK)
                printf("reserved %s on %s: ACCEPTED\n", R[k].name, on);
            else
                printf("reserved %s on %s: failed with %d (%s), not H5L_EINVAL: %s\n", R[k].name, on, rc,
                       h5l_strerror(rc), h5l_errmsg(f));
        }
    }
    CHECK(h5l_put_att_text(f, v, "units", "1"), f); /* an ordinary name still works */
    int32_t x[4] = {1, 2, 3, 4};
    uint64_t st = 0, ct = 4;
    CHECK(h5l_put(f, v, &st, &ct, x), f);
    if (h5l_close(f) != H5L_OK) {
        fprintf(stderr, "climate_writer: close %s: %s\n", path, h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int ticks = 6;
    if (argc < 2 || (argc > 2 && (argc != 4 || strcmp(argv[2], "--ticks")))) {
        if (!g_rank) fprintf(stderr, "usage: climate_writer DIR [--ticks N]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (argc == 4) ticks = atoi(argv[3]);
    if (ticks < 2 || ticks > MAXTICKS || g_size > NLAT) {
        if (!g_rank) fprintf(stderr, "climate_writer: need 2..%d ticks and at most %d ranks\n", MAXTICKS, NLAT);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *dir = argv[1];
    char path[4096];
    snprintf(path, sizeof path, "%s/climate.h5", dir);
    h5l_file_t *f;
    if (h5l_create(path, MPI_COMM_WORLD, NULL, &f) != H5L_OK) {
        fprintf(stderr, "climate_writer: create %s: %s\n", path, h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    ids_t id;
    define(f, &id);
    int32_t counts_keep[NPART];
    for (int t = 0; t < ticks; t++) {
        if (t == 1) {
            /* a variable defined late: after the first flush */
            int dims[3] = {id.dtime, id.dlat, id.dlon};
            CHECK(h5l_def_var(f, "/wind", H5T_NATIVE_FLOAT, 3, dims, NULL, &id.wind), f);
            CHECK(h5l_put_att_text(f, id.wind, "units", "m s-1"), f);
            CHECK(h5l_put_att_text(f, id.wind, "long_name", "wind speed"), f);
        }
        if (t == 2) /* an attribute added to a published variable */
            CHECK(h5l_put_att_text(f, id.temp, "comment", "added after two ticks"), f);
        write_tick(f, &id, t, counts_keep);
        /* the global history changes every tick; it keeps its place */
        char hist[128];
        snprintf(hist, sizeof hist, "climate_writer: tick %d of %d", t + 1, ticks);
        CHECK(h5l_put_att_text(f, H5L_GLOBAL, "history", hist), f);
        CHECK(h5l_flush(f), f);
    }
    if (h5l_close(f) != H5L_OK) {
        fprintf(stderr, "climate_writer: close %s: %s\n", path, h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    reserved_names(dir);
    if (g_rank == 0) printf("climate_writer: %d ranks, %d ticks, done\n", g_size, ticks);
    MPI_Finalize();
    return 0;
}
