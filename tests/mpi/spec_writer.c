/* spec_writer.c — performs the libh5log calls a plain-text spec lists, for
 * the model-based differential test (tests/e2e/difftest.py generates specs
 * and an independent numpy model of what every tick must contain).
 *
 * Why a spec interpreter and not another random writer in C: the expected
 * content is computed by a separate program (Python/numpy) from the same
 * spec, so the writer, the reader and the model share no code and no
 * assumptions beyond this file format.
 *
 * Usage: mpirun -np P spec_writer SPEC OUT.h5
 * Every rank reads SPEC. Exit status 0 when every line did what it says,
 * 1 otherwise (the line and h5l_errmsg on stderr), 2 on usage or spec
 * errors. A call that fails stops the run (MPI_Abort).
 *
 * Spec format: one call per line, tokens separated by blanks, '#' starts a
 * comment line, blank lines are ignored. PATH is an absolute object path,
 * "/" is the root group (H5L_GLOBAL). Objects are referred to by path, so
 * the spec does not depend on the ids the library hands out; dimensions are
 * referred to by their index in the order of the `dim` lines (0, 1, ...).
 * HEX is lower- or upper-case hex of raw bytes; "-" is zero bytes.
 *
 *   create [BUFFER_LIMIT]      h5l_create(OUT) (must be the first call)
 *   open [NRANKS]              h5l_open(OUT) instead (a restart: the run
 *                              goes on writing a file an earlier run made;
 *                              dimension indices and paths are those of
 *                              the file, dimension ids being their order);
 *                              NRANKS, if given, must be the job's size
 *   crash                      every rank kills itself (SIGKILL) without
 *                              closing: the run ends there (instead of close)
 *   dim NAME LEN               h5l_def_dim; LEN a number or U (unlimited)
 *   grp PATH                   h5l_def_grp
 *   var PATH TYPE CHUNK NDIMS D0 .. D(n-1)
 *                              h5l_def_var over dimension indices D*;
 *                              CHUNK "-" (NULL: contiguous, or the default
 *                              chunk shape when a dimension is unlimited)
 *                              or "c0,c1,..." (explicit chunk shape)
 *   fill PATH HEX              h5l_def_var_fill; HEX is one element in the
 *                              variable's type (its byte order)
 *   nofill PATH                h5l_def_var_nofill (needs H5L_HAVE_NOFILL)
 *   att PATH NAME TYPE N HEX   h5l_put_att of N elements of TYPE, HEX in
 *                              TYPE's byte order
 *   text PATH NAME HEX         h5l_put_att_text; HEX is the UTF-8 text
 *   put RANK PATH SEED S0 .. S(n-1) C0 .. C(n-1)
 *   iput RANK PATH SEED ...    h5l_put / h5l_iput of the box (start S,
 *                              count C; none for a 0-D variable), done by
 *                              rank RANK only; the data is generated (below)
 *   flush                      h5l_flush
 *   close                      h5l_close (must be the last call)
 *   fail LINE                  LINE (any call above except create/close)
 *                              must be refused (return an error); a call
 *                              that succeeds is reported and makes the exit
 *                              status 1, and the run goes on
 *
 * TYPE: i1 u1 i2 u2 i4 u4 i8 u8 f4 f8 (little-endian, H5T_STD_* /
 * H5T_IEEE_*LE); a '>' prefix means big-endian (">i4" is H5T_STD_I32BE).
 *
 * Generated data: element e (row-major index in the box) of a put with SEED
 * has x = mix(SEED, e) (splitmix64 of SEED + e * 0x9E3779B97F4A7C15) and
 *   signed w-bit:   (x mod (2^w - 16)) - (2^(w-1) - 8)
 *   unsigned w-bit:  x mod (2^w - 16)
 *   f4:  ((x mod 2^20) - 2^19) / 8      f8: ((x mod 2^40) - 2^39) / 1024
 * so integers never take the 8 lowest / 16 highest values of their type
 * (netCDF's default fills among them) and floats stay far below any fill
 * the generator picks: a written element can never look like a fill value.
 * The value is stored in the variable's byte order.
 *
 * SPEC_WRITER_FLUSH_PAUSE_MS=N in the environment: every rank sleeps N ms
 * after each flush that succeeded, so a reader of the mount sees each tick
 * as the newest for a while (tests/e2e/test_differential.py, live). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h5log.h"

enum { MAXTOK = 64, MAXOBJ = 4096, MAXDIM = 256, MAXKEEP = 4096 };

typedef struct {
    const char *name; /* without the byte-order prefix */
    hid_t le, be;
    int kind; /* 0 signed, 1 unsigned, 2 float */
    int size;
} tdesc_t;

static tdesc_t g_types[10];

static void init_types(void)
{
    tdesc_t t[10] = {
        {"i1", H5T_STD_I8LE, H5T_STD_I8BE, 0, 1},     {"u1", H5T_STD_U8LE, H5T_STD_U8BE, 1, 1},
        {"i2", H5T_STD_I16LE, H5T_STD_I16BE, 0, 2},   {"u2", H5T_STD_U16LE, H5T_STD_U16BE, 1, 2},
        {"i4", H5T_STD_I32LE, H5T_STD_I32BE, 0, 4},   {"u4", H5T_STD_U32LE, H5T_STD_U32BE, 1, 4},
        {"i8", H5T_STD_I64LE, H5T_STD_I64BE, 0, 8},   {"u8", H5T_STD_U64LE, H5T_STD_U64BE, 1, 8},
        {"f4", H5T_IEEE_F32LE, H5T_IEEE_F32BE, 2, 4}, {"f8", H5T_IEEE_F64LE, H5T_IEEE_F64BE, 2, 8},
    };
    memcpy(g_types, t, sizeof t);
}

/* A parsed TYPE token. */
typedef struct {
    const tdesc_t *d;
    int be;
} vtype_t;

typedef struct {
    char *path;
    int id, is_var, ndims;
    vtype_t type;
} obj_t;

static obj_t g_objs[MAXOBJ];
static int g_nobjs, g_dimids[MAXDIM], g_ndims, g_rank, g_size;
static void *g_keep[MAXKEEP]; /* iput buffers, freed after the next flush */
static int g_nkeep;
static const char *g_spec;

static int parse_type(const char *s, vtype_t *t)
{
    t->be = 0;
    if (*s == '>' || *s == '<') t->be = *s++ == '>';
    for (int i = 0; i < 10; i++)
        if (!strcmp(s, g_types[i].name)) {
            t->d = &g_types[i];
            return 0;
        }
    return -1;
}

static hid_t type_hid(vtype_t t) { return t.be ? t.d->be : t.d->le; }

static uint64_t mix(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + i * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Store the generated element e of SEED at p in type t (see the header). */
static void gen_elem(vtype_t t, uint64_t seed, uint64_t e, uint8_t *p)
{
    uint64_t x = mix(seed, e), bits = 0;
    int w = t.d->size * 8;
    if (t.d->kind == 2) {
        if (t.d->size == 4) {
            float v = (float)((double)((int64_t)(x % (1ull << 20)) - (1ll << 19)) / 8.0);
            uint32_t u;
            memcpy(&u, &v, 4);
            bits = u;
        } else {
            double v = (double)((int64_t)(x % (1ull << 40)) - (1ll << 39)) / 1024.0;
            memcpy(&bits, &v, 8);
        }
    } else {
        uint64_t m = w == 64 ? UINT64_MAX - 15 : (1ull << w) - 16;
        bits = x % m;
        if (t.d->kind == 0) bits -= (1ull << (w - 1)) - 8; /* two's complement, truncated below */
    }
    for (int b = 0; b < t.d->size; b++) { /* little-endian bytes, reversed for big-endian */
        uint8_t byte = (uint8_t)(bits >> (8 * b));
        p[t.be ? t.d->size - 1 - b : b] = byte;
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decode HEX into a new buffer (one spare NUL byte); *n = bytes. */
static uint8_t *unhex(const char *s, size_t *n)
{
    if (!strcmp(s, "-")) s = "";
    size_t len = strlen(s);
    if (len % 2) return NULL;
    uint8_t *b = malloc(len / 2 + 1);
    if (!b) return NULL;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return NULL;
        }
        b[i] = (uint8_t)(hi << 4 | lo);
    }
    b[len / 2] = 0;
    *n = len / 2;
    return b;
}

static obj_t *find_obj(const char *path)
{
    for (int i = 0; i < g_nobjs; i++)
        if (!strcmp(g_objs[i].path, path)) return &g_objs[i];
    return NULL;
}

static int add_obj(const char *path, int id, int is_var, int ndims, vtype_t t)
{
    if (g_nobjs == MAXOBJ) return -1;
    obj_t *o = &g_objs[g_nobjs++];
    o->path = strdup(path);
    o->id = id;
    o->is_var = is_var;
    o->ndims = ndims;
    o->type = t;
    return o->path ? 0 : -1;
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end) return -1;
    *v = x;
    return 0;
}

/* After open: the file's dimensions (index = id, their definition order)
 * and objects (paths, variable types), so later lines can name them. */
static int learn_file(h5l_file_t *f)
{
    int nd = 0, no = 0;
    if (h5l_inq_counts(f, &nd, &no) || nd > MAXDIM) return -1;
    for (int d = 0; d < nd; d++) g_dimids[d] = d;
    g_ndims = nd;
    for (int i = 1; i < no; i++) {
        char path[4096];
        int kind, ndims = 0;
        vtype_t vt = {0};
        if (h5l_inq_obj(f, i, &kind, path, sizeof path)) return -1;
        if (kind == 2) {
            hid_t t;
            if (h5l_inq_var(f, i, &t, NULL, NULL, NULL, NULL) || h5l_inq_varndims(f, i, &ndims)) return -1;
            for (int k = 0; k < 10 && !vt.d; k++) {
                if (H5Tequal(t, g_types[k].le) > 0) vt = (vtype_t){&g_types[k], 0};
                if (H5Tequal(t, g_types[k].be) > 0) vt = (vtype_t){&g_types[k], 1};
            }
            if (!vt.d) return -1;
        }
        if (add_obj(path, i, kind == 2, ndims, vt)) return -1;
    }
    return 0;
}

/* Outcome of one line: done (call succeeded or skipped on this rank),
 * refused by the library (rc), or a spec error (bad line). */
typedef struct {
    int rc;          /* the library's return code, H5L_OK if none was made */
    const char *why; /* a spec error, else NULL */
} res_t;

#define SPEC_ERR(msg)                                                                                                  \
    return (res_t) { 0, msg }

/* Perform one call (tokens tok[0..n)); f may be updated by create/close. */
static res_t do_call(h5l_file_t **f, char **tok, int n, const char *out)
{
    const char *cmd = tok[0];
    vtype_t vt = {0};
    if (!strcmp(cmd, "create")) {
        if (*f) SPEC_ERR("create twice");
        h5l_opts_t o;
        h5l_opts_init(&o);
        uint64_t limit;
        if (n > 2 || (n == 2 && parse_u64(tok[1], &limit))) SPEC_ERR("create [BUFFER_LIMIT]");
        if (n == 2) o.buffer_limit = (size_t)limit;
        /* tests/e2e/test_standalone.py: a file closed without finalizing */
        const char *nf = getenv("SPEC_WRITER_NO_FINALIZE");
        o.no_finalize = nf && nf[0] == '1';
        return (res_t){h5l_create(out, MPI_COMM_WORLD, &o, f), NULL};
    }
    if (!strcmp(cmd, "open")) {
        uint64_t np;
        if (*f) SPEC_ERR("open after create or open");
        if (n > 2 || (n == 2 && (parse_u64(tok[1], &np) || np != (uint64_t)g_size)))
            SPEC_ERR("open [NRANKS]: NRANKS must be the job's size");
        h5l_opts_t o;
        h5l_opts_init(&o);
        const char *nf = getenv("SPEC_WRITER_NO_FINALIZE");
        o.no_finalize = nf && nf[0] == '1';
        int rc = h5l_open(out, MPI_COMM_WORLD, &o, f);
        if (!rc && learn_file(*f)) SPEC_ERR("open: cannot list what the file holds");
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "crash")) { /* a job killed between two flushes */
        if (n != 1) SPEC_ERR("crash takes no arguments");
        MPI_Barrier(MPI_COMM_WORLD);
        fflush(NULL);
        raise(SIGKILL);
    }
    if (!*f) SPEC_ERR("no file: the first call must be create or open");
    if (!strcmp(cmd, "dim")) {
        uint64_t len;
        if (n != 3) SPEC_ERR("dim NAME LEN");
        if (!strcmp(tok[2], "U"))
            len = H5L_UNLIMITED;
        else if (parse_u64(tok[2], &len))
            SPEC_ERR("bad LEN");
        if (g_ndims == MAXDIM) SPEC_ERR("too many dimensions");
        int id, rc = h5l_def_dim(*f, tok[1], len, &id);
        if (!rc) g_dimids[g_ndims++] = id;
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "grp")) {
        if (n != 2) SPEC_ERR("grp PATH");
        int id, rc = h5l_def_grp(*f, tok[1], &id);
        if (!rc && !find_obj(tok[1]) && add_obj(tok[1], id, 0, 0, vt)) SPEC_ERR("out of memory");
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "var")) {
        uint64_t nd, chunk[H5L_MAX_DIMS];
        int dimids[H5L_MAX_DIMS];
        if (n < 5 || parse_type(tok[2], &vt) || parse_u64(tok[4], &nd) || nd > H5L_MAX_DIMS || n != 5 + (int)nd)
            SPEC_ERR("var PATH TYPE CHUNK NDIMS DIMS...");
        for (uint64_t d = 0; d < nd; d++) {
            uint64_t k;
            if (parse_u64(tok[5 + d], &k) || k >= (uint64_t)g_ndims) SPEC_ERR("unknown dimension index");
            dimids[d] = g_dimids[k];
        }
        const uint64_t *cp = NULL;
        if (strcmp(tok[3], "-")) {
            char *s = tok[3];
            for (uint64_t d = 0; d < nd; d++) {
                char *end;
                chunk[d] = strtoull(s, &end, 10);
                if (end == s || (d + 1 < nd ? *end != ',' : *end != 0)) SPEC_ERR("bad CHUNK");
                s = end + 1;
            }
            cp = chunk;
        }
        int id, rc = h5l_def_var(*f, tok[1], type_hid(vt), (int)nd, dimids, cp, &id);
        if (!rc && add_obj(tok[1], id, 1, (int)nd, vt)) SPEC_ERR("out of memory");
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "fill") || !strcmp(cmd, "nofill")) {
        if (n != (cmd[0] == 'f' ? 3 : 2)) SPEC_ERR("fill PATH HEX / nofill PATH");
        obj_t *o = find_obj(tok[1]);
        if (!o || !o->is_var) SPEC_ERR("fill: not a variable defined by this spec");
        if (cmd[0] == 'n') {
#ifdef H5L_HAVE_NOFILL
            return (res_t){h5l_def_var_nofill(*f, o->id), NULL};
#else
            SPEC_ERR("nofill: this libh5log has no h5l_def_var_nofill (H5L_HAVE_NOFILL undefined)");
#endif
        }
        size_t nb;
        uint8_t *b = unhex(tok[2], &nb);
        if (!b || nb != (size_t)o->type.d->size) {
            free(b);
            SPEC_ERR("fill: HEX is not one element of the variable's type");
        }
        int rc = h5l_def_var_fill(*f, o->id, b);
        free(b);
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "att") || !strcmp(cmd, "text")) {
        int text = cmd[0] == 't';
        uint64_t cnt = 0;
        if (text ? n != 4 : (n != 6 || parse_type(tok[3], &vt) || parse_u64(tok[4], &cnt)))
            SPEC_ERR("att PATH NAME TYPE N HEX / text PATH NAME HEX");
        int objid = H5L_GLOBAL;
        if (strcmp(tok[1], "/")) {
            obj_t *o = find_obj(tok[1]);
            if (!o) SPEC_ERR("att: no object with this path defined by this spec");
            objid = o->id;
        }
        size_t nb;
        uint8_t *b = unhex(tok[text ? 3 : 5], &nb);
        if (!b) SPEC_ERR("att/text: bad HEX");
        if (!text && nb != cnt * (uint64_t)vt.d->size) {
            free(b);
            SPEC_ERR("att: HEX is not N elements of TYPE");
        }
        if (text && memchr(b, 0, nb)) {
            free(b);
            SPEC_ERR("text: NUL in the text");
        }
        int rc = text ? h5l_put_att_text(*f, objid, tok[2], (const char *)b)
                      : h5l_put_att(*f, objid, tok[2], type_hid(vt), (size_t)cnt, b);
        free(b);
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "put") || !strcmp(cmd, "iput")) {
        uint64_t rank, seed, start[H5L_MAX_DIMS], count[H5L_MAX_DIMS], ne = 1;
        obj_t *o = n >= 4 ? find_obj(tok[2]) : NULL;
        if (!o || !o->is_var) SPEC_ERR("put: not a variable defined by this spec");
        if (parse_u64(tok[1], &rank) || parse_u64(tok[3], &seed) || n != 4 + 2 * o->ndims)
            SPEC_ERR("put RANK PATH SEED START... COUNT...");
        if (rank >= (uint64_t)g_size) SPEC_ERR("put: RANK is not a rank of this job");
        for (int d = 0; d < o->ndims; d++) {
            if (parse_u64(tok[4 + d], &start[d]) || parse_u64(tok[4 + o->ndims + d], &count[d]))
                SPEC_ERR("put: bad START or COUNT");
            ne *= count[d];
        }
        if (rank != (uint64_t)g_rank) return (res_t){H5L_OK, NULL};
        int es = o->type.d->size;
        if (ne > (1ull << 30) / (uint64_t)es) SPEC_ERR("put: box too large for this test program");
        uint8_t *b = malloc(ne * es + 1);
        if (!b) SPEC_ERR("out of memory");
        for (uint64_t e = 0; e < ne; e++) gen_elem(o->type, seed, e, b + e * es);
        int rc;
        if (cmd[0] == 'i') {
            if (g_nkeep == MAXKEEP) {
                free(b);
                SPEC_ERR("too many iput lines in one tick");
            }
            rc = h5l_iput(*f, o->id, start, count, b);
            g_keep[g_nkeep++] = b; /* must stay unchanged until the flush */
        } else {
            rc = h5l_put(*f, o->id, start, count, b);
            memset(b, 0xA5, ne * es); /* put copied: scribbling must not matter */
            free(b);
        }
        return (res_t){rc, NULL};
    }
    if (!strcmp(cmd, "flush") || !strcmp(cmd, "close")) {
        if (n != 1) SPEC_ERR("flush / close take no arguments");
        int rc;
        if (cmd[0] == 'f') {
            rc = h5l_flush(*f);
            const char *ms = getenv("SPEC_WRITER_FLUSH_PAUSE_MS");
            if (!rc && ms && atol(ms) > 0) {
                struct timespec ts = {atol(ms) / 1000, atol(ms) % 1000 * 1000000L};
                nanosleep(&ts, NULL);
            }
        } else {
            rc = h5l_close(*f);
            *f = NULL;
        }
        for (int i = 0; i < g_nkeep; i++) free(g_keep[i]);
        g_nkeep = 0;
        return (res_t){rc, NULL};
    }
    SPEC_ERR("unknown call");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    init_types();
    if (argc != 3) {
        if (!g_rank) fprintf(stderr, "usage: spec_writer SPEC OUT.h5\n");
        MPI_Finalize();
        return 2;
    }
    g_spec = argv[1];
    FILE *in = fopen(g_spec, "r");
    if (!in) {
        fprintf(stderr, "spec_writer rank %d: %s: %s\n", g_rank, g_spec, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    h5l_file_t *f = NULL;
    char *line = NULL;
    size_t cap = 0;
    int lineno = 0, closed = 0, status = 0, accepted = 0;
    ssize_t len;
    while (!status && (len = getline(&line, &cap, in)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        char *copy = strdup(line), *tok[MAXTOK], *save = NULL;
        int n = 0;
        for (char *t = strtok_r(line, " \t", &save); t && n < MAXTOK; t = strtok_r(NULL, " \t", &save)) tok[n++] = t;
        if (n == 0 || tok[0][0] == '#') {
            free(copy);
            continue;
        }
        int expect_fail = !strcmp(tok[0], "fail");
        char **call = tok + expect_fail;
        int ncall = n - expect_fail;
        res_t r = {0, NULL};
        if (closed)
            r.why = "a call after close";
        else if (ncall == 0)
            r.why = "fail: no call";
        else if (expect_fail && (!strcmp(call[0], "create") || !strcmp(call[0], "close") ||
                                 !strcmp(call[0], "open") || !strcmp(call[0], "crash")))
            r.why = "fail: create, open, crash and close cannot be expected to fail";
        else
            r = do_call(&f, call, ncall, argv[2]);
        if (r.why) {
            fprintf(stderr, "spec_writer rank %d: %s:%d: '%s': %s\n", g_rank, g_spec, lineno, copy, r.why);
            status = 2;
        } else if (expect_fail && r.rc == H5L_OK) {
            /* go on: the next fail lines are checked too (one run lists
             * every call that should have been refused) */
            fprintf(stderr, "spec_writer rank %d: %s:%d: '%s': succeeded, but must be refused\n", g_rank, g_spec,
                    lineno, copy);
            accepted = 1;
        } else if (!expect_fail && r.rc != H5L_OK) {
            fprintf(stderr, "spec_writer rank %d: %s:%d: '%s': error %d: %s\n", g_rank, g_spec, lineno, copy, r.rc,
                    h5l_errmsg(f));
            status = 1;
        }
        if (!strcmp(call[0], "close") && !expect_fail) closed = 1;
        free(copy);
    }
    free(line);
    fclose(in);
    if (!status && !closed) {
        fprintf(stderr, "spec_writer rank %d: %s: no close at the end\n", g_rank, g_spec);
        status = 2;
    }
    /* a failed collective call fails alike on every rank, a failed put on
     * one: abort so no rank waits in a collective the others never reach */
    if (status) MPI_Abort(MPI_COMM_WORLD, status);
    if (accepted) status = 1;
    for (int i = 0; i < g_nobjs; i++) free(g_objs[i].path);
    if (!g_rank)
        printf("spec_writer: %s: %d lines done on %d ranks%s\n", g_spec, lineno, g_size,
               accepted ? ", some calls were not refused" : "");
    MPI_Finalize();
    return status;
}
