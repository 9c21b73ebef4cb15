/* h5logtail — tail-style live monitoring of growing HDF5 variables: prints
 * the new records along a growing dimension as ticks arrive (the role h5watch
 * has for classic HDF5 SWMR files).
 *
 * Usage: h5logtail [options] FILE.h5/path/to/var [FILE.h5/other/var ...]
 *        h5logtail [options] FILE VAR [VAR ...]
 *
 * In the first form each argument is split at its first component that is a
 * regular file (so MNT/run.h5/atm/temp means file MNT/run.h5, variable
 * /atm/temp). All variables must be in one file.
 *
 * Two backends, chosen by the file's first bytes:
 *   - a log-layout file (magic "\x89H5LOG\r\n" at byte 0) is followed with
 *     the libcore reader: the journal is refreshed every interval and the new
 *     records are read as of the newest tick. When the writer closes the file
 *     (CLOSE record) the remaining records are printed and h5logtail exits 0;
 *     with --follow it keeps watching the name and starts over when a new
 *     log-layout file replaces it (like tail -F), and goes on with the new
 *     ticks when a restarted job opens the same file again (h5l_open).
 *   - any other HDF5 file (for instance a log-layout file seen through an
 *     h5logfs mount) is reopened read-only with libhdf5 at every poll, so a
 *     mounted file shows its newest snapshot, and the slice [old, new) along
 *     the growing dimension is printed. Through an h5logfs mount the file
 *     tells when its writer closed it (extended attribute
 *     user.h5logfs.closed): h5logtail then prints the rest and exits 0. Any
 *     other HDF5 file does not say when its writer is done: h5logtail
 *     follows it until interrupted, or exits 0 after --idle SECONDS without
 *     growth.
 * --idle applies to both backends (a log-layout file whose writer died is
 * never closed); --follow disables both ways of exiting.
 *
 * Like tail -F, a file or a variable that does not exist yet is waited for
 * (a job's output before its first flush has no variables yet; through a
 * mount the same); --wait-timeout bounds the wait, 0 restores the immediate
 * error. A closed file cannot gain a variable: that is an error at once.
 *
 * Output: text has one line per record (one index along the followed
 * dimension), the record's values flattened in row-major order:
 * "VAR[INDEX]: v v v" (labels on, the default) or "v v v". CSV is one
 * rectangular table a spreadsheet reads whatever the variables' shapes: the
 * header "variable,index,element,value", then one row per value,
 * "VAR,INDEX,ELEMENT,VALUE" (ELEMENT: the row-major position in the record);
 * --no-labels drops the header line only, so runs can be appended.
 *
 * Exit status: 0 done (writer closed, idle, or SIGINT/SIGTERM), 1 error
 * (message names the file and the reason), 2 usage. */
#include <errno.h>
#include <sys/xattr.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "h5log_reader.h"

#define PROG "h5logtail"
#define BATCH_BYTES ((size_t)4 << 20) /* records read per call: about this much */
#define DEFAULT_LAST 10

static const char LOG_MAGIC[8] = {'\x89', 'H', '5', 'L', 'O', 'G', '\r', '\n'};

/* ------------------------------------------------------------------------ */
/* options, state */

typedef struct opts {
    double interval; /* seconds between polls */
    int dim;         /* -1: first unlimited dimension, else 0 */
    int64_t from;    /* >= 0: first record to print */
    int64_t last;    /* >= 0: print the last N existing records first */
    int width;       /* 0: no wrapping */
    int labels;      /* 1: VAR[INDEX]: (text) / the header line (csv) */
    int csv;
    int follow;
    double idle;   /* < 0: never */
    int precision; /* <= 0: shortest round-trip */
    double wait;   /* seconds to wait for a missing file or variable; < 0: forever */
    uint64_t tick; /* > 0: print the records as of this tick and exit */
} opts_t;

enum { E_INT = 1, E_FLOAT = 2, E_STR = 3, E_VSTR = 4 };

/* How one element of a read buffer looks. */
typedef struct etype {
    int cls;     /* E_INT, E_FLOAT, E_STR (fixed-length), E_VSTR (char *) */
    size_t size; /* bytes */
    int sign;    /* integers */
    int big;     /* byte order of the buffer */
} etype_t;

typedef struct tvar {
    char *name; /* absolute path, normalized */
    int resolved;
    int ndims, dim;
    uint64_t shape[H5L_MAX_DIMS];
    etype_t et;
    uint64_t next; /* next record to print */
    uint64_t seen; /* length at the previous poll (libhdf5: a shrink means a new file) */
    int started;   /* next has been set from --from / -n */
    /* libcore */
    uint32_t objid;
    /* libhdf5 */
    hid_t memtype;
} tvar_t;

static opts_t O = {.interval = 0.5, .dim = -1, .from = -1, .last = -1, .labels = 1, .idle = -1, .wait = -1};
static volatile sig_atomic_t g_stop;
static int g_header_done;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *o)
{
    fprintf(o, "usage: " PROG " [options] FILE.h5/path/to/var [FILE.h5/var ...]\n"
               "       " PROG " [options] FILE VAR [VAR ...]\n"
               "Print the new records of growing variables as they arrive, until the writer\n"
               "closes the file (log-layout files) or until interrupted.\n\n"
               "options:\n"
               "  -i, --interval SECONDS  polling interval (default 0.5)\n"
               "  -d, --dim N             dimension to follow (default: the first unlimited one, else 0)\n"
               "  -n, --lines N           start with the last N existing records (default 10);\n"
               "                          -n +N is --from N\n"
               "      --from N            start at record N (0: everything)\n"
               "  -w, --width COLS        wrap text lines at COLS columns (default 0: never)\n"
               "  -l, --labels            label lines VAR[INDEX]: / print the CSV header (default)\n"
               "  -L, --no-labels         text: values only; CSV: no header line\n"
               "      --format FMT        text (default) or csv: one row per value,\n"
               "                          variable,index,element,value\n"
               "  -p, --precision N       significant digits of floats (default: shortest exact)\n"
               "      --idle SECONDS      exit 0 after SECONDS without new records\n"
               "      --tick N            the records as of committed tick N (log-layout file: the\n"
               "                          same numbers as h5logreplay --tick and the mount's\n"
               "                          .h5logfs-ticks/PATH/N.h5), then exit; waits for tick N\n"
               "      --wait-timeout SECONDS  give up (exit 1) when the file or a variable has not\n"
               "                          appeared after SECONDS (default: wait forever;\n"
               "                          0: do not wait)\n"
               "  -f, -F, --follow        never exit by itself: after the writer closes, keep\n"
               "                          watching the name for a new file\n"
               "  -h, --help              this text\n"
               "  -V, --version           version\n\n"
               "A log-layout file is read through libcore and " PROG " exits 0 once its writer has\n"
               "closed it and every record is printed. Any other HDF5 file (e.g. one seen through\n"
               "an h5logfs mount) is reopened at every poll. Through a mount, " PROG " also exits\n"
               "once the writer closed the file (the file's user.h5logfs.closed attribute); a\n"
               "plain HDF5 file is followed until interrupted or until --idle expires.\n"
               "A file or variable that does not exist yet is waited for, like tail -F.\n"
               "Exit status: 0 done or interrupted, 1 error, 2 usage.\n");
}

/* One message line on stderr, after whatever output is pending. */
static void vnote(const char *fmt, va_list ap)
{
    fflush(stdout);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vnote(fmt, ap);
    va_end(ap);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleep s seconds or until a signal asks us to stop. */
static void nap(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    while (!g_stop && nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ------------------------------------------------------------------------ */
/* waiting for what the user named to appear, like tail -F: a job's output
 * file exists before its first flush has defined any variable, and a user
 * starts h5logtail together with the job */

static double g_wait_since = -1; /* start of the current wait; < 0: not waiting */
static int g_wait_noted;

/* VAR in FILE (or FILE itself) is not there; var NULL: the path FILE, not
 * split yet, is not there. Returns, after saying once
 * that we wait, so the caller polls again after its interval; exits 1 with
 * `why` (the error of old: no waiting) when it cannot appear any more
 * (`final`: its writer closed the file), --wait-timeout is 0, or --idle
 * has passed; with a timeout message when --wait-timeout has passed. */
static void await(const char *file, const char *var, int final, const char *why)
{
    double t = now_s();
    if (g_wait_since < 0) g_wait_since = t;
    double waited = t - g_wait_since;
    if (final || O.wait == 0 || (!O.follow && O.idle >= 0 && waited >= O.idle)) die("%s", why);
    if (O.wait > 0 && waited >= O.wait)
        die("timed out after %g s (--wait-timeout) waiting for %s to appear%s%s (%s)", O.wait, var ? var : file,
            var ? " in " : "", var ? file : "", why);
    if (!g_wait_noted) {
        g_wait_noted = 1;
        if (var)
            note("waiting for %s to appear in %s", var, file);
        else
            note("waiting for %s to appear", file);
    }
}

/* Everything named is there: a later wait (a replaced file) starts afresh. */
static void await_over(void)
{
    g_wait_since = -1;
    g_wait_noted = 0;
}

/* --idle ends the run: a variable that never appeared is still an error. */
static void idle_end(const char *file, const tvar_t *vars, int nvars)
{
    for (int i = 0; i < nvars; i++)
        if (!vars[i].resolved) die("%s: no variable %s", file, vars[i].name);
}

/* ------------------------------------------------------------------------ */
/* text buffer and value formatting */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf_t;

static void sb_need(sbuf_t *b, size_t more)
{
    if (b->n + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) die("out of memory");
    b->p = p;
    b->cap = cap;
}

static void sb_putn(sbuf_t *b, const char *s, size_t n)
{
    sb_need(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_puts(sbuf_t *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    char t[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t, sizeof t, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof t) {
        sb_putn(b, t, (size_t)n);
        return;
    }
    sb_need(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

/* A CSV field: quoted when it holds a separator, a quote or a line break. */
static void sb_csv_field(sbuf_t *b, const char *s, size_t n)
{
    if (strcspn(s, ",\"\r\n") >= n && (n == 0 || (s[0] != ' ' && s[n - 1] != ' '))) {
        sb_putn(b, s, n);
        return;
    }
    sb_putn(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') sb_putn(b, "\"", 1);
        sb_putn(b, s + i, 1);
    }
    sb_putn(b, "\"", 1);
}

static uint64_t load_uint(const uint8_t *p, size_t size, int big)
{
    uint64_t u = 0;
    for (size_t k = 0; k < size; k++) u |= (uint64_t)p[big ? size - 1 - k : k] << (8 * k);
    return u;
}

static void fmt_float(sbuf_t *b, double d, int single)
{
    if (isnan(d)) {
        sb_puts(b, "nan");
        return;
    }
    if (isinf(d)) {
        sb_puts(b, d < 0 ? "-inf" : "inf");
        return;
    }
    char t[64];
    if (O.precision > 0) {
        snprintf(t, sizeof t, "%.*g", O.precision, d);
    } else {
        /* the shortest %g that reads back as the same value */
        int maxp = single ? 9 : 17, p = 1;
        for (; p <= maxp; p++) {
            snprintf(t, sizeof t, "%.*g", p, d);
            if (single ? strtof(t, NULL) == (float)d : strtod(t, NULL) == d) break;
        }
        /* 20 rather than 2e+01: whole digits below 1e15 are not exponents */
        int x = d != 0 ? (int)floor(log10(fabs(d))) : 0;
        if (p <= maxp && x >= p && x < 15) snprintf(t, sizeof t, "%.*g", x + 1, d);
    }
    sb_puts(b, t);
}

/* The characters of a string element. */
static void elem_str(const uint8_t *p, const etype_t *t, const char **s, size_t *n)
{
    if (t->cls == E_VSTR) {
        memcpy(s, p, sizeof *s);
        if (!*s) *s = "";
        *n = strlen(*s);
    } else {
        *s = (const char *)p;
        *n = strnlen(*s, t->size);
    }
}

/* Format one element into b (b is reset first). */
static void fmt_elem(sbuf_t *b, const uint8_t *p, const etype_t *t)
{
    b->n = 0;
    if (b->p) b->p[0] = 0;
    if (t->cls == E_INT) {
        uint64_t u = load_uint(p, t->size, t->big);
        if (t->sign) {
            unsigned sh = (unsigned)(64 - 8 * t->size);
            int64_t v = sh ? (int64_t)(u << sh) >> sh : (int64_t)u;
            sb_printf(b, "%lld", (long long)v);
        } else {
            sb_printf(b, "%llu", (unsigned long long)u);
        }
    } else if (t->cls == E_FLOAT) {
        uint64_t u = load_uint(p, t->size, t->big);
        if (t->size == 4) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, 4);
            fmt_float(b, f, 1);
        } else {
            double d;
            memcpy(&d, &u, 8);
            fmt_float(b, d, 0);
        }
    } else { /* a string: up to the first NUL, C-style escapes, quoted */
        const char *str = (const char *)p;
        size_t n;
        elem_str(p, t, &str, &n);
        p = (const uint8_t *)str;
        sb_putn(b, "\"", 1);
        for (size_t i = 0; i < n; i++) {
            unsigned char c = p[i];
            if (c == '"' || c == '\\')
                sb_printf(b, "\\%c", c);
            else if (c == '\n')
                sb_puts(b, "\\n");
            else if (c == '\t')
                sb_puts(b, "\\t");
            else if (c < 0x20 || c == 0x7f)
                sb_printf(b, "\\x%02x", c);
            else
                sb_putn(b, (const char *)&c, 1);
        }
        sb_putn(b, "\"", 1);
    }
}

/* ------------------------------------------------------------------------ */
/* output of records */

static size_t rec_elems(const tvar_t *v)
{
    size_t n = 1;
    for (int d = 0; d < v->ndims; d++)
        if (d != v->dim) n *= (size_t)v->shape[d];
    return n;
}

/* The CSV header, once, before the first record: the columns are the same
 * for every variable, whatever its shape (a long, "tidy" table). */
static void print_header(void)
{
    if (g_header_done) return;
    g_header_done = 1;
    if (O.csv && O.labels) printf("variable,index,element,value\n");
}

/* Print record `index` of v, whose n elements start at p (row-major). */
static void print_record(const tvar_t *v, uint64_t index, const uint8_t *p, size_t n)
{
    static sbuf_t line, val;
    line.n = 0;
    if (O.csv) { /* one row per value: variables of any shapes share one table */
        for (size_t i = 0; i < n; i++) {
            sb_csv_field(&line, v->name, strlen(v->name));
            sb_printf(&line, ",%llu,%zu,", (unsigned long long)index, i);
            if (v->et.cls == E_STR || v->et.cls == E_VSTR) { /* CSV quoting instead of C quoting */
                const char *str;
                size_t m;
                elem_str(p + i * v->et.size, &v->et, &str, &m);
                sb_csv_field(&line, str, m);
            } else {
                fmt_elem(&val, p + i * v->et.size, &v->et);
                sb_putn(&line, val.p, val.n);
            }
            sb_putn(&line, "\n", 1);
        }
    } else {
        size_t indent = 4, col = 0;
        if (O.labels) {
            sb_printf(&line, "%s[%llu]:", v->name, (unsigned long long)index);
            indent = line.n + 1;
            col = line.n;
        }
        for (size_t i = 0; i < n; i++) {
            fmt_elem(&val, p + i * v->et.size, &v->et);
            size_t sep = (i || O.labels) ? 1 : 0;
            if (O.width > 0 && col > indent && col + sep + val.n > (size_t)O.width) {
                sb_putn(&line, "\n", 1);
                for (size_t k = 0; k < indent; k++) sb_putn(&line, " ", 1);
                col = indent;
                sep = 0;
            }
            if (sep) sb_putn(&line, " ", 1);
            sb_putn(&line, val.p, val.n);
            col += sep + val.n;
        }
        sb_putn(&line, "\n", 1);
    }
    if (line.n && fwrite(line.p, 1, line.n, stdout) != line.n) die("writing standard output: %s", strerror(errno));
}

static void flush_out(void)
{
    if (fflush(stdout) != 0 || ferror(stdout)) die("writing standard output: %s", strerror(errno));
}

/* Where to start a variable whose followed dimension has len records now. */
static void start_at(tvar_t *v, uint64_t len)
{
    if (v->started) return;
    v->started = 1;
    if (O.from >= 0)
        v->next = (uint64_t)O.from;
    else {
        uint64_t last = O.last >= 0 ? (uint64_t)O.last : DEFAULT_LAST;
        v->next = len > last ? len - last : 0;
    }
}

/* A read of records [a, a + n) of v into buf. Returns 0 or -1 with e set. */
typedef int (*read_fn)(void *ctx, tvar_t *v, uint64_t a, uint64_t n, void *buf, char *e, size_t elen);

/* Print v's records [v->next, len) through rd. Returns 0, or -1 (message in
 * e) when a read failed; stops early (returning 0) on a stop signal. */
static int print_range(tvar_t *v, uint64_t len, read_fn rd, void *ctx, char *e, size_t elen)
{
    static uint8_t *buf;
    static size_t cap;
    size_t relems = rec_elems(v), rbytes = relems * v->et.size;
    /* batches are contiguous only when the dimensions before `dim` are 1 */
    uint64_t outer = 1;
    for (int d = 0; d < v->dim; d++) outer *= v->shape[d];
    uint64_t per = outer == 1 ? (rbytes ? BATCH_BYTES / rbytes : 1 << 16) : 1;
    if (per < 1) per = 1;
    while (v->next < len && !g_stop) {
        uint64_t n = len - v->next < per ? len - v->next : per;
        size_t need = (size_t)n * rbytes;
        if (need > cap) {
            uint8_t *nb = realloc(buf, need);
            if (!nb) die("out of memory (%zu bytes for %s)", need, v->name);
            buf = nb;
            cap = need;
        }
        if (rbytes && rd(ctx, v, v->next, n, buf, e, elen)) return -1; /* else: empty records */
        for (uint64_t i = 0; i < n && !g_stop; i++) {
            print_record(v, v->next, buf + (size_t)i * rbytes, relems);
            v->next++;
        }
        if (v->et.cls == E_VSTR) /* libhdf5 allocated every string */
            for (size_t i = 0; i < (size_t)n * relems; i++) {
                char *str;
                memcpy(&str, buf + i * sizeof str, sizeof str);
                if (str) H5free_memory(str);
            }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* arguments: FILE/VAR splitting */

static char *norm_var(const char *s)
{
    size_t n = strlen(s);
    char *o = malloc(n + 2);
    if (!o) die("out of memory");
    size_t k = 0;
    o[k++] = '/';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '/' && o[k - 1] == '/') continue;
        o[k++] = s[i];
    }
    while (k > 1 && o[k - 1] == '/') k--;
    o[k] = 0;
    return o;
}

/* Split arg at its first component that is a regular file: returns 0 with
 * *file and *var (NULL when arg is the file itself). Returns 1 when a
 * component does not exist (yet): *file is arg up to that component and
 * *var the rest (NULL if none), the split once it appears unless it appears
 * as a directory. Any other problem is fatal. */
static int split_path(const char *arg, char **file, char **var)
{
    size_t n = strlen(arg);
    char *b = strdup(arg);
    if (!b) die("out of memory");
    for (size_t i = 1; i <= n; i++) {
        if (i < n && b[i] != '/') continue;
        if (b[i - 1] == '/') continue;
        char save = b[i];
        b[i] = 0;
        struct stat st;
        int missing = stat(b, &st) != 0;
        if (missing && errno != ENOENT) die("%s: %s", arg, strerror(errno));
        if (missing || S_ISREG(st.st_mode)) {
            const char *rest = arg + i;
            while (*rest == '/') rest++;
            *var = *rest ? norm_var(rest) : NULL;
            *file = b;
            return missing;
        }
        if (!S_ISDIR(st.st_mode)) die("%s: %s is neither a directory nor a regular file", arg, b);
        b[i] = save;
    }
    die("%s: no HDF5 file in this path (it is a directory)", arg);
}

/* ------------------------------------------------------------------------ */
/* backend 1: libcore reader on a log-layout file */

typedef struct core {
    h5l_reader_t *r;
    uint64_t tick;
    const char *file;
} core_t;

static int core_read(void *ctx, tvar_t *v, uint64_t a, uint64_t n, void *buf, char *e, size_t elen)
{
    core_t *c = ctx;
    uint64_t start[H5L_MAX_DIMS] = {0}, count[H5L_MAX_DIMS];
    for (int d = 0; d < v->ndims; d++) count[d] = v->shape[d];
    start[v->dim] = a;
    count[v->dim] = n;
    h5l_err_t err = {0};
    if (h5l_reader_read(c->r, c->tick, v->objid, start, count, buf, &err)) {
        snprintf(e, elen, "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Find every variable in the schema (reader locked by the caller). Returns
 * the index of the first one not defined as of c->tick (to be waited for),
 * or -1; a variable that cannot be followed is fatal. */
static int core_resolve(core_t *c, tvar_t *vars, int nvars)
{
    int missing = -1;
    const h5l_schema_t *s = h5l_reader_schema(c->r);
    for (int i = 0; i < nvars; i++) {
        tvar_t *v = &vars[i];
        if (v->resolved) continue;
        const h5l_obj_t *o = NULL;
        size_t id = 0;
        for (size_t k = 0; k < s->nobjs; k++)
            if (s->objs[k].kind && s->objs[k].path && !strcmp(s->objs[k].path, v->name)) {
                o = &s->objs[k];
                id = k;
            }
        if (!o || o->tick > c->tick) {
            if (missing < 0) missing = i;
            continue;
        }
        if (o->kind != H5L_OBJ_VAR) {
            h5l_reader_unlock(c->r);
            die("%s: %s is a group, not a variable", c->file, v->name);
        }
        if ((o->type.cls != H5L_CLASS_INT && o->type.cls != H5L_CLASS_FLOAT) ||
            (o->type.cls == H5L_CLASS_INT && o->type.size != 1 && o->type.size != 2 && o->type.size != 4 &&
             o->type.size != 8) ||
            (o->type.cls == H5L_CLASS_FLOAT && o->type.size != 4 && o->type.size != 8)) {
            h5l_reader_unlock(c->r);
            die("%s: %s: unsupported datatype (class %u, %u bytes)", c->file, v->name, o->type.cls, o->type.size);
        }
        v->objid = (uint32_t)id;
        v->ndims = (int)o->ndims;
        v->et = (etype_t){o->type.cls == H5L_CLASS_INT ? E_INT : E_FLOAT, o->type.size, o->type.sign, o->type.order};
        if (v->ndims == 0) {
            h5l_reader_unlock(c->r);
            die("%s: %s is a scalar: it has no dimension to follow", c->file, v->name);
        }
        if (O.dim >= 0) {
            if (O.dim >= v->ndims) {
                h5l_reader_unlock(c->r);
                die("%s: %s has %d dimension%s; --dim %d is out of range", c->file, v->name, v->ndims,
                    v->ndims == 1 ? "" : "s", O.dim);
            }
            v->dim = O.dim;
        } else {
            v->dim = 0;
            for (int d = 0; d < v->ndims; d++)
                if (s->dims[o->dimids[d]].unlimited) {
                    v->dim = d;
                    break;
                }
        }
        v->resolved = 1;
    }
    return missing;
}

/* The 16-byte identity in the user block of path, or -1 if it is not (yet)
 * a log-layout file. */
static int log_identity(const char *path, uint8_t id[16])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    uint8_t b[32];
    ssize_t n = pread(fd, b, sizeof b, 0);
    close(fd);
    if (n != (ssize_t)sizeof b || memcmp(b, LOG_MAGIC, 8) != 0) return -1;
    memcpy(id, b + 16, 16);
    return 0;
}

/* 1 if path now holds a different log-layout file than r's. */
static int replaced(const char *path, h5l_reader_t *r)
{
    uint8_t id[16];
    return log_identity(path, id) == 0 && memcmp(id, h5l_reader_id(r), 16) != 0;
}

/* 1 if the closed file r read was opened again by a writer (h5l_open, a
 * restart: same identity, same inode) and has gone on: its user block is
 * live again, or closed again with a longer journal. */
static int continued(const char *path, h5l_reader_t *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint8_t b[64];
    ssize_t n = pread(fd, b, sizeof b, 0);
    close(fd);
    if (n != (ssize_t)sizeof b || memcmp(b, LOG_MAGIC, 8) != 0 || memcmp(b + 16, h5l_reader_id(r), 16) != 0) return 0;
    uint64_t jlen = 0, flags = 0;
    for (int i = 7; i >= 0; i--) {
        jlen = jlen << 8 | b[40 + i];
        flags = flags << 8 | b[48 + i];
    }
    return !(flags & 1) || jlen != h5l_reader_journal_pos(r);
}

static int run_core(const char *file, tvar_t *vars, int nvars)
{
    core_t c = {.file = file};
    h5l_err_t err = {0};
    if (h5l_reader_open(file, &c.r, &err)) die("%s", err.msg);
    double last_growth = now_s();
    uint64_t seen_tick = h5l_reader_ntick(c.r);
    int warned = 0, damaged = 0;
    char e[600];
    while (!g_stop) {
        int rc = h5l_reader_refresh(c.r, NULL, &err);
        if (rc == H5L_EIO) { /* may pass (e.g. NFS hiccup): retry at the next poll */
            if (!warned++) note("%s (retrying)", err.msg);
        } else if (rc && O.follow && replaced(file, c.r)) {
            /* the old journal was overwritten by a new run: reopen below */
        } else if (rc == H5L_ECORRUPT) {
            /* a damaged tick: what came before it is shown, then we stop
             * (no later tick can be read), saying so once */
            if (!damaged++) note("%s: showing the ticks before it", err.msg);
        } else if (rc) {
            die("%s", err.msg);
        } else {
            warned = 0;
        }
        int closed = h5l_reader_closed(c.r); /* before ntick: a CLOSE follows every tick */
        c.tick = h5l_reader_ntick(c.r);
        if (O.tick) { /* as of one tick: wait for it, print, done */
            if (c.tick < O.tick && (closed || damaged))
                die("%s: tick %llu is not committed (the file has %llu)", file, (unsigned long long)O.tick,
                    (unsigned long long)c.tick);
            if (c.tick >= O.tick) {
                c.tick = O.tick;
                closed = 1;
            } else {
                c.tick = 0; /* not there yet: waited for like a missing variable */
            }
        }
        if (c.tick != seen_tick) {
            seen_tick = c.tick;
            last_growth = now_s();
        }
        /* a variable not defined yet (no tick yet, or defined at a later
         * one) is waited for; the others are printed meanwhile */
        int missing = 0;
        if (c.tick > 0) {
            h5l_reader_rdlock(c.r);
            const h5l_schema_t *s = h5l_reader_schema(c.r);
            missing = core_resolve(&c, vars, nvars);
            for (int i = 0; i < nvars; i++)
                if (vars[i].resolved) h5l_schema_shape(s, vars[i].objid, c.tick, vars[i].shape);
            h5l_reader_unlock(c.r);
        }
        if (missing >= 0) {
            snprintf(e, sizeof e, "%s: %sno variable %s", file,
                     closed && c.tick == 0 ? "the writer closed the file without writing a tick: " : "",
                     vars[missing].name);
            await(file, vars[missing].name, closed && !O.follow, e);
        } else {
            await_over();
        }
        for (int i = 0; i < nvars && !g_stop; i++) {
            tvar_t *v = &vars[i];
            if (!v->resolved) continue;
            print_header();
            start_at(v, v->shape[v->dim]);
            if (print_range(v, v->shape[v->dim], core_read, &c, e, sizeof e)) die("%s", e);
        }
        flush_out();
        if (g_stop) break;
        if (damaged) {
            h5l_reader_close(c.r);
            exit(1);
        }
        if (closed && !O.follow) break;
        if (!O.follow && O.idle >= 0 && now_s() - last_growth >= O.idle) {
            idle_end(file, vars, nvars);
            break;
        }
        nap(O.interval);
        if (O.follow && !g_stop && closed && continued(file, c.r)) {
            /* the same file opened again by a restarted job: its ticks go
             * on where they stopped, and so does the output */
            h5l_reader_t *nr;
            if (h5l_reader_open(file, &nr, &err) == 0) {
                note("%s: opened again by a writer; following its new ticks", file);
                h5l_reader_close(c.r);
                c.r = nr;
            }
            continue;
        }
        if (O.follow && !g_stop && replaced(file, c.r)) {
            /* like tail -F: a new log-layout file under the same name (after
             * a close, or a rerun after a crash) starts over */
            h5l_reader_t *nr;
            if (h5l_reader_open(file, &nr, &err) == 0) { /* else: still being created, next poll */
                note("%s: replaced by a new file; following it from its start", file);
                h5l_reader_close(c.r);
                c.r = nr;
                seen_tick = 0;
                for (int i = 0; i < nvars; i++) {
                    vars[i].resolved = 0;
                    vars[i].started = 1;
                    vars[i].next = 0;
                }
            }
        }
    }
    flush_out();
    h5l_reader_close(c.r);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* backend 2: libhdf5, a fresh open per poll */

typedef struct h5ctx {
    hid_t ds, fspace;
} h5ctx_t;

static int h5_read(void *ctx, tvar_t *v, uint64_t a, uint64_t n, void *buf, char *e, size_t elen)
{
    h5ctx_t *c = ctx;
    hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
    for (int d = 0; d < v->ndims; d++) count[d] = v->shape[d];
    start[v->dim] = a;
    count[v->dim] = n;
    hid_t ms = H5Screate_simple(v->ndims, count, NULL);
    int rc = -1;
    if (ms >= 0 && H5Sselect_hyperslab(c->fspace, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
        H5Dread(c->ds, v->memtype, ms, c->fspace, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (ms >= 0) H5Sclose(ms);
    if (rc)
        snprintf(e, elen, "%s: cannot read records %llu..%llu", v->name, (unsigned long long)a,
                 (unsigned long long)(a + n - 1));
    return rc;
}

static int host_big(void)
{
    const uint16_t x = 1;
    return *(const uint8_t *)&x == 0;
}

/* What path names in f: -1 nothing, 0 group, 1 dataset, 2 something else. */
static int h5_kind(hid_t f, const char *path)
{
    char *b = strdup(path);
    if (!b) die("out of memory");
    for (char *p = b + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int ex = H5Lexists(f, b, H5P_DEFAULT);
        *p = '/';
        if (ex <= 0) {
            free(b);
            return -1;
        }
    }
    int kind = -1;
    if (strcmp(b, "/") == 0 || H5Lexists(f, b, H5P_DEFAULT) > 0) {
        hid_t o = H5Oopen(f, b, H5P_DEFAULT);
        if (o >= 0) {
            H5I_type_t t = H5Iget_type(o);
            kind = t == H5I_GROUP ? 0 : t == H5I_DATASET ? 1 : 2;
            H5Oclose(o);
        }
    }
    free(b);
    return kind;
}

/* Describe the dataset's type and choose the memory type to read with.
 * Returns NULL, or a reason. */
static const char *h5_settype(tvar_t *v, hid_t ds)
{
    hid_t ft = H5Dget_type(ds);
    if (ft < 0) return "cannot get its datatype";
    H5T_class_t cls = H5Tget_class(ft);
    size_t size = H5Tget_size(ft);
    const char *why = NULL;
    if (cls == H5T_INTEGER) {
        int sign = H5Tget_sign(ft) == H5T_SGN_2;
        hid_t m = size == 1   ? (sign ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8)
                  : size == 2 ? (sign ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16)
                  : size == 4 ? (sign ? H5T_NATIVE_INT32 : H5T_NATIVE_UINT32)
                  : size == 8 ? (sign ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64)
                              : -1;
        if (m < 0)
            why = "unsupported integer size";
        else {
            v->memtype = H5Tcopy(m);
            v->et = (etype_t){E_INT, size, sign, host_big()};
        }
    } else if (cls == H5T_FLOAT) {
        int single = size <= 4;
        v->memtype = H5Tcopy(single ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE);
        v->et = (etype_t){E_FLOAT, single ? 4 : 8, 0, host_big()};
    } else if (cls == H5T_STRING) {
        htri_t var = H5Tis_variable_str(ft);
        v->memtype = H5Tcopy(ft);
        if (var > 0) {
            v->et = (etype_t){E_VSTR, sizeof(char *), 0, 0};
        } else {
            H5Tset_strpad(v->memtype, H5T_STR_NULLPAD);
            v->et = (etype_t){E_STR, size, 0, 0};
        }
    } else {
        why = "unsupported datatype (h5logtail prints integers, floats and strings)";
    }
    H5Tclose(ft);
    return why;
}

static hid_t h5_open(const char *file, hid_t fapl)
{
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, fapl);
    /* a classic SWMR writer: its file opens only as a SWMR reader */
    if (f < 0) f = H5Fopen(file, H5F_ACC_RDONLY | H5F_ACC_SWMR_READ, fapl);
    return f;
}

/* Check, on first sight, that v names a dataset we can print, and choose
 * its type and dimension. Returns 0, or 1 if it does not exist (yet: to be
 * waited for); any other problem is fatal: the user named it. */
static int h5_resolve(const char *file, hid_t f, tvar_t *v)
{
    int k = h5_kind(f, v->name);
    if (k < 0) return 1;
    if (k == 0) die("%s: %s is a group, not a variable", file, v->name);
    if (k != 1) die("%s: %s is not a dataset", file, v->name);
    hid_t ds = H5Dopen2(f, v->name, H5P_DEFAULT);
    hid_t fs = ds >= 0 ? H5Dget_space(ds) : -1;
    int nd = fs >= 0 ? H5Sget_simple_extent_ndims(fs) : -1;
    hsize_t dims[H5S_MAX_RANK], maxd[H5S_MAX_RANK];
    if (nd < 0 || H5Sget_simple_extent_dims(fs, dims, maxd) < 0) die("%s: cannot open dataset %s", file, v->name);
    const char *why = h5_settype(v, ds);
    if (why) die("%s: %s: %s", file, v->name, why);
    if (nd == 0) die("%s: %s is a scalar: it has no dimension to follow", file, v->name);
    if (O.dim >= nd)
        die("%s: %s has %d dimension%s; --dim %d is out of range", file, v->name, nd, nd == 1 ? "" : "s", O.dim);
    v->ndims = nd;
    v->dim = 0;
    if (O.dim >= 0)
        v->dim = O.dim;
    else
        for (int d = 0; d < nd; d++)
            if (maxd[d] == H5S_UNLIMITED) {
                v->dim = d;
                break;
            }
    v->resolved = 1;
    H5Sclose(fs);
    H5Dclose(ds);
    return 0;
}

static int run_h5(const char *file, tvar_t *vars, int nvars)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG);
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
    H5Pset_file_locking(fapl, 0, 1); /* a tail must never get in a writer's way */
#endif
    h5ctx_t *cx = calloc((size_t)nvars, sizeof *cx);
    if (!cx) die("out of memory");
    int first = 1, warned = 0;
    double last_growth = now_s();
    char e[600], problem[700];
    while (!g_stop) {
        problem[0] = 0;
        int grew = 0;
        /* Through an h5logfs mount the file says whether its writer closed
         * it (user.h5logfs.closed). Asked before the open: if it says so,
         * this open is of the final snapshot. */
        char xc[4] = {0};
        int writer_closed = getxattr(file, "user.h5logfs.closed", xc, sizeof xc - 1) == 1 && xc[0] == '1';
        /* a tick file of MNT/.h5logfs-ticks never changes either */
        if (!writer_closed)
            writer_closed = getxattr(file, "user.h5logfs.final", xc, sizeof xc - 1) == 1 && xc[0] == '1';
        hid_t f = h5_open(file, fapl);
        if (f < 0) {
            if (first) die("%s: cannot open as an HDF5 file", file);
            snprintf(problem, sizeof problem, "%s: cannot open as an HDF5 file", file);
        }
        /* one open file: every variable from the same snapshot */
        int missing = -1;
        for (int i = 0; i < nvars; i++) cx[i].ds = cx[i].fspace = -1;
        for (int i = 0; f >= 0 && i < nvars && !problem[0]; i++) {
            tvar_t *v = &vars[i];
            if (!v->resolved && h5_resolve(file, f, v)) { /* not there yet: wait, print the others */
                if (missing < 0) missing = i;
                continue;
            }
            cx[i].ds = H5Dopen2(f, v->name, H5P_DEFAULT);
            cx[i].fspace = cx[i].ds >= 0 ? H5Dget_space(cx[i].ds) : -1;
            int nd = cx[i].fspace >= 0 ? H5Sget_simple_extent_ndims(cx[i].fspace) : -1;
            hsize_t dims[H5S_MAX_RANK];
            if (nd < 0 || H5Sget_simple_extent_dims(cx[i].fspace, dims, NULL) < 0)
                snprintf(problem, sizeof problem, "%s: cannot open dataset %s", file, v->name);
            else if (nd != v->ndims)
                snprintf(problem, sizeof problem, "%s: %s changed its rank from %d to %d", file, v->name, v->ndims, nd);
            else
                for (int d = 0; d < nd; d++) v->shape[d] = dims[d];
        }
        if (!problem[0] && f >= 0) {
            if (missing >= 0) {
                snprintf(e, sizeof e, "%s: no variable %s", file, vars[missing].name);
                await(file, vars[missing].name, writer_closed && !O.follow, e);
            } else {
                await_over();
            }
            for (int i = 0; i < nvars && !g_stop && !problem[0]; i++) {
                tvar_t *v = &vars[i];
                if (!v->resolved) continue;
                print_header();
                uint64_t len = v->shape[v->dim];
                start_at(v, len);
                if (len < v->seen) {
                    /* shrank: the file was replaced; start over, like tail on truncation */
                    note("%s: %s shrank from %llu to %llu records; following it from its start", file, v->name,
                         (unsigned long long)v->seen, (unsigned long long)len);
                    v->next = 0;
                }
                v->seen = len;
                if (len > v->next) grew = 1;
                if (print_range(v, len, h5_read, &cx[i], e, sizeof e))
                    snprintf(problem, sizeof problem, "%s: %s", file, e);
            }
        }
        for (int i = 0; i < nvars; i++) {
            if (cx[i].fspace >= 0) H5Sclose(cx[i].fspace);
            if (cx[i].ds >= 0) H5Dclose(cx[i].ds);
        }
        if (f >= 0) H5Fclose(f);
        flush_out();
        if (problem[0]) { /* a transient state of a file being rewritten: try again */
            if (!warned++) note("%s (retrying)", problem);
        } else {
            if (warned) note("%s: readable again", file);
            warned = 0;
        }
        first = 0;
        double t = now_s();
        if (grew) last_growth = t;
        if (g_stop) break;
        if (!O.follow && writer_closed && !problem[0]) break;
        if (!O.follow && O.idle >= 0 && t - last_growth >= O.idle) {
            idle_end(file, vars, nvars);
            break;
        }
        nap(O.interval);
    }
    for (int i = 0; i < nvars; i++)
        if (vars[i].resolved) H5Tclose(vars[i].memtype);
    free(cx);
    H5Pclose(fapl);
    flush_out();
    return 0;
}

/* ------------------------------------------------------------------------ */

static double parse_seconds(const char *opt, const char *s, int allow_zero)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || v < 0 || (!allow_zero && v <= 0)) {
        fprintf(stderr, PROG ": %s: invalid number of seconds '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

static int64_t parse_count(const char *opt, const char *s)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') goto bad; /* empty, sign, blank */
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < 0) goto bad;
    return v;
bad:
    fprintf(stderr, PROG ": %s: invalid number '%s'\n", opt, s);
    exit(2);
}

/* The option just parsed, as the user spelled it, for messages. */
static const char *opt_name(const struct option *lo, int idx, int c)
{
    static char b[64];
    if (idx >= 0)
        snprintf(b, sizeof b, "--%s", lo[idx].name);
    else
        snprintf(b, sizeof b, "-%c", c);
    return b;
}

/* Options anywhere among the operands (getopt_long's "-": operands come
 * back in order as 1, so the order holds even under POSIXLY_CORRECT).
 * Returns the operands, packed into argv. */
static int parse_args(int argc, char **argv, char ***posp)
{
    enum { O_FROM = 256, O_FORMAT, O_IDLE, O_WAIT, O_TICK };
    static const struct option lo[] = {
        {"interval", required_argument, NULL, 'i'},
        {"dim", required_argument, NULL, 'd'},
        {"lines", required_argument, NULL, 'n'},
        {"from", required_argument, NULL, O_FROM},
        {"width", required_argument, NULL, 'w'},
        {"labels", no_argument, NULL, 'l'},
        {"no-labels", no_argument, NULL, 'L'},
        {"format", required_argument, NULL, O_FORMAT},
        {"precision", required_argument, NULL, 'p'},
        {"idle", required_argument, NULL, O_IDLE},
        {"wait-timeout", required_argument, NULL, O_WAIT},
        {"tick", required_argument, NULL, O_TICK},
        {"follow", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    char **pos = argv + 1; /* operands are packed in place: never ahead of the scan */
    int npos = 0, c, idx = -1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "-:i:d:n:w:lLp:fFhV", lo, &idx)) != -1) {
        const char *name = opt_name(lo, idx, c);
        idx = -1;
        switch (c) {
        case 1:
            pos[npos++] = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf(PROG " (h5logfs) %s\n", H5L_VERSION_STRING);
            exit(0);
        case 'i':
            O.interval = parse_seconds(name, optarg, 0);
            break;
        case 'd': {
            int64_t d = parse_count(name, optarg);
            if (d >= H5L_MAX_DIMS) {
                fprintf(stderr, PROG ": %s: dimension %s out of range\n", name, optarg);
                exit(2);
            }
            O.dim = (int)d;
            break;
        }
        case 'n':
            if (optarg[0] == '+') {
                O.from = parse_count(name, optarg + 1);
                O.last = -1;
            } else {
                O.last = parse_count(name, optarg);
                O.from = -1;
            }
            break;
        case O_FROM:
            O.from = parse_count(name, optarg);
            O.last = -1;
            break;
        case O_TICK:
            if ((O.tick = (uint64_t)parse_count(name, optarg)) == 0) {
                fprintf(stderr, PROG ": %s: ticks are numbered from 1\n", name);
                exit(2);
            }
            break;
        case 'w': {
            int64_t w = parse_count(name, optarg);
            O.width = w > INT_MAX ? INT_MAX : (int)w;
            break;
        }
        case 'l':
            O.labels = 1;
            break;
        case 'L':
            O.labels = 0;
            break;
        case O_FORMAT:
            if (!strcmp(optarg, "csv"))
                O.csv = 1;
            else if (!strcmp(optarg, "text"))
                O.csv = 0;
            else {
                fprintf(stderr, PROG ": --format: unknown format '%s' (text or csv)\n", optarg);
                exit(2);
            }
            break;
        case 'p': {
            int64_t p = parse_count(name, optarg);
            O.precision = p > 40 ? 40 : (int)p;
            break;
        }
        case O_IDLE:
            O.idle = parse_seconds(name, optarg, 1);
            break;
        case O_WAIT:
            O.wait = parse_seconds(name, optarg, 1);
            break;
        case 'f':
        case 'F':
            O.follow = 1;
            break;
        case ':':
            fprintf(stderr, PROG ": option %s needs a value\n", argv[optind - 1]);
            usage(stderr);
            exit(2);
        default: /* '?': unknown, ambiguous, or a value given to a flag */
            if (optopt && strncmp(argv[optind - 1], "--", 2) != 0)
                fprintf(stderr, PROG ": unknown option -%c\n", optopt);
            else
                fprintf(stderr, PROG ": unknown option %s\n", argv[optind - 1]);
            usage(stderr);
            exit(2);
        }
    }
    while (optind < argc) pos[npos++] = argv[optind++]; /* after "--" */
    *posp = pos;
    return npos;
}

/* Which form the operands have: FILE VAR [VAR...] (1) or FILE/VAR
 * [FILE/VAR...] (0). Decided on the first operand when it exists; when it
 * does not exist yet, by its first missing component: if that is its last
 * one, or the others do not all continue that same path, it is FILE. */
static int file_var_form(char **pos, int npos)
{
    char *f, *v;
    int missing = split_path(pos[0], &f, &v);
    int form = !v;
    if (missing && v && npos >= 2) {
        size_t n = strlen(f);
        for (int i = 1; i < npos && !form; i++)
            if (strncmp(pos[i], f, n) != 0 || pos[i][n] != '/') form = 1;
    }
    free(f);
    free(v);
    return form;
}

/* The file and the variables from the operands, waiting (like tail -F) for
 * the file to exist. Returns 0, or 1 when interrupted while waiting. */
static int resolve_operands(char **pos, int npos, char **filep, tvar_t *vars, int *nvarsp)
{
    char why[PATH_MAX + 64];
    if (file_var_form(pos, npos)) {
        if (npos < 2) die("%s: no variable given (use FILE VAR or FILE/VAR)", pos[0]);
        char *file = strdup(pos[0]);
        if (!file) die("out of memory");
        for (int i = 1; i < npos; i++) vars[i - 1].name = norm_var(pos[i]);
        *filep = file;
        *nvarsp = npos - 1;
        for (;;) {
            struct stat st;
            if (stat(file, &st) == 0) {
                if (S_ISDIR(st.st_mode)) die("%s: is a directory, not an HDF5 file", file);
                return 0;
            }
            if (errno != ENOENT) die("%s: %s", file, strerror(errno));
            snprintf(why, sizeof why, "%s: %s", file, strerror(ENOENT));
            await(file, vars[0].name, 0, why);
            nap(O.interval);
            if (g_stop) return 1;
        }
    }
    for (;;) {
        char *file = NULL;
        struct stat fst = {0};
        int missing = -1;
        for (int i = 0; i < npos; i++) {
            char *f, *v;
            int miss = split_path(pos[i], &f, &v);
            if (!v) die("%s: no variable given (use FILE/VAR or FILE VAR)", pos[i]);
            if (miss) { /* where the file ends is not known yet */
                if (missing < 0) missing = i;
                free(f);
                free(v);
                continue;
            }
            struct stat st;
            if (stat(f, &st) != 0) die("%s: %s", f, strerror(errno));
            if (!file) {
                file = f;
                fst = st;
            } else {
                if (st.st_dev != fst.st_dev || st.st_ino != fst.st_ino)
                    die("%s and %s: all variables must be in one file", file, f);
                free(f);
            }
            free(vars[i].name);
            vars[i].name = v;
        }
        if (missing < 0) {
            *filep = file;
            *nvarsp = npos;
            return 0;
        }
        snprintf(why, sizeof why, "%s: %s", pos[missing], strerror(ENOENT));
        await(pos[missing], NULL, 0, why);
        free(file);
        nap(O.interval);
        if (g_stop) return 1;
    }
}

int main(int argc, char **argv)
{
    char **pos;
    int npos = parse_args(argc, argv, &pos);
    if (npos < 1) {
        usage(stderr);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* no SA_RESTART: a sleeping poll wakes up */
    sigaction(SIGTERM, &sa, NULL);

    /* FILE VAR [VAR...] or FILE/VAR [FILE/VAR...] */
    char *file = NULL;
    int nvars = 0;
    tvar_t *vars = calloc((size_t)npos, sizeof *vars);
    if (!vars) die("out of memory");
    if (resolve_operands(pos, npos, &file, vars, &nvars)) {
        for (int i = 0; i < npos; i++) free(vars[i].name);
        free(vars);
        free(file);
        return 0; /* interrupted while waiting */
    }
    for (int i = 0; i < nvars; i++)
        if (!strcmp(vars[i].name, "/")) die("%s: / is a group, not a variable", file);

    /* Which backend: the user block's magic. A sidecar without the magic yet
     * is a writer between creating its journal and its HDF5 file, and an
     * empty file one that has just been created: wait. */
    int is_log = 0;
    for (int tries = 0;;) {
        h5l_err_t pe = {0};
        int prc = h5l_probe(file, &pe);
        if (prc == H5L_OK) {
            is_log = 1;
            break;
        }
        if (prc != H5L_EFORMAT) die("%s", pe.msg);
        struct stat st;
        if (stat(file, &st) != 0) die("%s: %s", file, strerror(errno));
        char side[PATH_MAX + 8];
        snprintf(side, sizeof side, "%s.h5lj", file);
        int writer = access(side, F_OK) == 0;
        if (writer && tries++ < 50 && !g_stop) { /* a log-layout writer is creating it */
            nap(0.1);
            continue;
        }
        if (st.st_size != 0 || g_stop) break;
        /* empty, no journal: a file just created, by any writer */
        char why[PATH_MAX + 64];
        snprintf(why, sizeof why, "%s: cannot open as an HDF5 file (it is empty)", file);
        await(file, vars[0].name, 0, why);
        nap(O.interval);
        if (g_stop) break;
    }
    if (!g_stop && O.tick && !is_log)
        die("%s: --tick needs the log-layout file itself; through a mount, read MNT/.h5logfs-ticks/PATH/%llu.h5", file,
            (unsigned long long)O.tick);
    int rc = 0; /* interrupted while waiting: done */
    if (!g_stop) rc = is_log ? run_core(file, vars, nvars) : run_h5(file, vars, nvars);
    for (int i = 0; i < nvars; i++) free(vars[i].name);
    free(vars);
    free(file);
    return rc;
}
