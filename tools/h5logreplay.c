/* h5logreplay — write a canonical HDF5 file from a log-layout file.
 *
 * Usage: h5logreplay [--tick N] [--checkpoints] IN OUT   (options may also follow IN OUT)
 *
 * The output has real datasets with the variables' shapes, chunking, fill
 * values and attributes, and named dimensions as dimension scales — the same
 * skeleton the daemon serves (libcore canon.c), filled through the reader.
 * It is the oracle the daemon's tests compare against.
 *
 * OUT is written as a temporary file next to it (OUT.tmpXXXXXX) and renamed
 * over OUT only when complete: a failed or interrupted replay leaves an
 * existing OUT as it was, and a reader of OUT never sees a half-written file.
 * OUT naming IN itself (or IN's journal), through any link, is refused: it
 * used to truncate the input before reading it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <hdf5.h>

#include "h5log_reader.h"
#include "h5log/canon.h"
#include "h5log/format.h"
#include "h5log/h5type.h"
#include "h5log/box.h"

typedef struct varjob {
    uint32_t objid, ndims;
    int chunked;
    int sparse; /* written chunk by chunk only where it holds data (h5l_canon_sparse) */
    char *path;
    h5l_type_t type;
    uint64_t shape[H5L_MAX_DIMS], block[H5L_MAX_DIMS];
} varjob_t;

static void usage(FILE *o)
{
    fprintf(o, "usage: h5logreplay [--tick N] [--checkpoints] IN OUT\n"
               "Write the canonical HDF5 file of log-layout file IN (newest tick, or tick N) to OUT.\n"
               "Options may come before or after IN and OUT.\n"
               "  --tick N       replay tick N (1 is the first; default: the newest)\n"
               "  --checkpoints  open from IN's index checkpoints, as the daemon does (fast for an\n"
               "                 early tick of a long log); a damaged record table then fails the\n"
               "                 replay instead of the tick before it being replayed\n"
               "  -h, --help     this text\n"
               "OUT is replaced only once it is complete; OUT may not be IN.\n"
               "Exit status: 0 done, 1 error, 2 usage.\n");
}

/* Chunks of a variable that hold data, as row-major block numbers. */
typedef struct blist {
    uint64_t *b;
    size_t n, cap;
    const uint64_t *nb; /* blocks per dimension */
    uint32_t ndims;
} blist_t;

static int add_block(void *ctx, const uint64_t *coord)
{
    blist_t *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        uint64_t *b = realloc(l->b, cap * sizeof *b);
        if (!b) return -1;
        l->b = b;
        l->cap = cap;
    }
    uint64_t blk = 0;
    for (uint32_t d = 0; d < l->ndims; d++) blk = blk * l->nb[d] + coord[d];
    l->b[l->n++] = blk;
    return 0;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* A chunk whose pieces lie thinly across the log (a z-plane chunk of
 * x-slabs reads the whole slab's segments) is read with its siblings: a
 * tile of whole chunks (h5l_box_tile) of at most TILE_BUDGET bytes, read
 * once and cut into its chunks, as the daemon does; alone, each chunk
 * read the log again (a 512^3 variable of z-plane chunks: 512 passes). */
#define TILE_BUDGET ((uint64_t)128 << 20)
#define TILE_FACTOR 4
#define TILE_MIN ((uint64_t)1 << 20)

/* Write box (start, count) of v from buf into ds. */
static int write_box(hid_t ds, hid_t mt, hid_t fs, const char *out, const varjob_t *v, const uint64_t *start,
                     const uint64_t *count, const void *buf)
{
    hsize_t hs[H5L_MAX_DIMS], hc[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndims; d++) {
        hs[d] = start[d];
        hc[d] = count[d];
    }
    hid_t ms = v->ndims ? H5Screate_simple((int)v->ndims, hc, NULL) : H5Screate(H5S_SCALAR);
    if (v->ndims) H5Sselect_hyperslab(fs, H5S_SELECT_SET, hs, NULL, hc, NULL);
    int bad = H5Dwrite(ds, mt, ms, fs, H5P_DEFAULT, buf) < 0;
    H5Sclose(ms);
    if (bad) fprintf(stderr, "h5logreplay: %s: cannot write '%s'\n", out, v->path);
    return bad ? -1 : 0;
}

/* The tile of chunk b (coordinates c) if it pays (see TILE_BUDGET): its
 * chunks from b on that the replay writes (all, or those of the sparse
 * list l from *j on), read once. 1 with *last the last chunk number it
 * covers; 0: no tile (write b alone); -1 on failure (said). */
static int copy_tile(h5l_reader_t *r, hid_t ds, hid_t mt, hid_t fs, const char *out, uint64_t tick, const varjob_t *v,
                     const uint64_t *nb, uint64_t b, const uint64_t *c, const blist_t *l, size_t *j, uint64_t *last)
{
    uint32_t nd = v->ndims;
    uint64_t S = v->type.size, st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS], g0[H5L_MAX_DIMS], gn[H5L_MAX_DIMS], cost = 0;
    for (uint32_t d = 0; d < nd; d++) {
        S *= v->block[d];
        st[d] = c[d] * v->block[d];
        ct[d] = v->shape[d] - st[d] < v->block[d] ? v->shape[d] - st[d] : v->block[d];
    }
    h5l_err_t e;
    if (h5l_reader_read_cost(r, tick, v->objid, st, ct, &cost, &e) || cost <= TILE_FACTOR * S || cost <= TILE_MIN)
        return 0;
    uint64_t ng = h5l_box_tile(nd, nb, S, c, TILE_BUDGET, g0, gn);
    if (ng <= 1) return 0;
    for (uint32_t d = 0; d < nd; d++) {
        st[d] = g0[d] * v->block[d];
        uint64_t end = (g0[d] + gn[d]) * v->block[d];
        ct[d] = (end < v->shape[d] ? end : v->shape[d]) - st[d];
    }
    size_t bytes = (size_t)(h5l_box_nelem(nd, ct) * v->type.size);
    uint8_t *tile = malloc(bytes), *parts = malloc(bytes);
    uint8_t **cells = malloc((size_t)ng * sizeof *cells);
    int rc = -1;
    if (!tile || !parts || !cells) {
        fprintf(stderr, "h5logreplay: out of memory (a tile of %zu bytes of '%s')\n", bytes, v->path);
        goto out;
    }
    if (h5l_reader_read(r, tick, v->objid, st, ct, tile, &e)) {
        fprintf(stderr, "h5logreplay: %s\n", e.msg);
        goto out;
    }
    /* each chunk's part of the tile, packed, in the tile's chunk order */
    uint64_t gi[H5L_MAX_DIMS] = {0}, at = 0;
    for (uint64_t g = 0; g < ng; g++) {
        uint64_t n = v->type.size;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t cs = (g0[d] + gi[d]) * v->block[d];
            n *= v->shape[d] - cs < v->block[d] ? v->shape[d] - cs : v->block[d];
        }
        cells[g] = parts + at;
        at += n;
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
    }
    h5l_box_split(nd, v->type.size, st, ct, tile, v->block, cells);
    memset(gi, 0, sizeof gi);
    rc = 1;
    for (uint64_t g = 0; g < ng && rc == 1; g++) {
        uint64_t cc[H5L_MAX_DIMS], cs[H5L_MAX_DIMS], cn[H5L_MAX_DIMS], blk = 0;
        for (uint32_t d = 0; d < nd; d++) {
            cc[d] = g0[d] + gi[d];
            blk = blk * nb[d] + cc[d];
            cs[d] = cc[d] * v->block[d];
            cn[d] = v->shape[d] - cs[d] < v->block[d] ? v->shape[d] - cs[d] : v->block[d];
        }
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
        *last = blk;
        if (blk < b) continue; /* written before */
        if (l) { /* sparse: only the chunks that hold data */
            while (*j < l->n && l->b[*j] < blk) (*j)++;
            if (*j >= l->n || l->b[*j] != blk) continue;
        }
        if (write_box(ds, mt, fs, out, v, cs, cn, cells[g])) rc = -1;
    }
out:
    free(tile);
    free(parts);
    free(cells);
    return rc;
}

/* Write one variable block by block (its chunks, or its index slabs) into
 * file (named out in messages). Returns 0, or -1 with a message printed. */
static int copy_var(h5l_reader_t *r, hid_t file, const char *out, uint64_t tick, const varjob_t *v)
{
    hid_t ds = H5Dopen2(file, v->path, H5P_DEFAULT);
    hid_t mt = h5l_type_to_hid(v->type, 0);
    if (ds < 0 || mt < 0) {
        fprintf(stderr, "h5logreplay: %s: cannot open '%s'\n", out, v->path);
        if (mt >= 0) H5Tclose(mt);
        if (ds >= 0) H5Dclose(ds);
        return -1;
    }
    uint64_t nblk = 1, bytes = v->type.size, nb[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < v->ndims; d++) {
        if (v->shape[d] == 0) nblk = 0;
        nb[d] = v->shape[d] ? (v->shape[d] + v->block[d] - 1) / v->block[d] : 0;
        nblk *= nb[d];
        bytes *= v->block[d] < v->shape[d] ? v->block[d] : v->shape[d];
    }
    void *buf = malloc(bytes ? bytes : 1);
    int rc = buf ? 0 : -1;
    if (!buf) fprintf(stderr, "h5logreplay: out of memory (%llu bytes for '%s')\n", (unsigned long long)bytes, v->path);
    blist_t l = {.nb = nb, .ndims = v->ndims};
    int sparse = v->sparse;
    if (!rc && sparse) {
        h5l_reader_rdlock(r);
        rc = h5l_reader_chunks(r, tick, v->objid, add_block, &l) ? -1 : 0;
        h5l_reader_unlock(r);
        if (rc) fprintf(stderr, "h5logreplay: out of memory (the chunks of '%s')\n", v->path);
        if (l.n) qsort(l.b, l.n, sizeof *l.b, cmp_u64);
    }
    hid_t fs = H5Dget_space(ds);
    uint64_t done = 0; /* blocks below it are written (tiles) */
    size_t j = 0;
    for (uint64_t i = 0; i < (sparse ? l.n : nblk) && !rc; i++) {
        uint64_t b = sparse ? l.b[i] : i;
        if (b < done) continue;
        uint64_t start[H5L_MAX_DIMS], count[H5L_MAX_DIMS], c[H5L_MAX_DIMS], rem = b;
        for (int d = (int)v->ndims - 1; d >= 0; d--) {
            c[d] = rem % nb[d];
            rem /= nb[d];
            start[d] = c[d] * v->block[d];
            count[d] = v->shape[d] - start[d] < v->block[d] ? v->shape[d] - start[d] : v->block[d];
        }
        if (v->chunked) {
            uint64_t last = 0;
            int t = copy_tile(r, ds, mt, fs, out, tick, v, nb, b, c, sparse ? &l : NULL, &j, &last);
            if (t < 0) {
                rc = -1;
                break;
            }
            if (t) {
                done = last + 1;
                continue;
            }
        }
        h5l_err_t e;
        if (h5l_reader_read(r, tick, v->objid, start, count, buf, &e)) {
            fprintf(stderr, "h5logreplay: %s\n", e.msg);
            rc = -1;
            break;
        }
        rc = write_box(ds, mt, fs, out, v, start, count, buf);
    }
    H5Sclose(fs);
    free(buf);
    free(l.b);
    H5Tclose(mt);
    H5Dclose(ds);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* arguments */

/* --tick's value: a tick number, 1 or more, digits only. strtoull alone
 * would take "-1" as 18446744073709551615, "" or "abc" as 0 (which used to
 * mean "newest"), and saturate an overflow: every one of those is refused. */
static int parse_tick(const char *s, uint64_t *tick)
{
    if (s[0] < '0' || s[0] > '9') return -1; /* empty, sign, blank */
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0) return -1;
    *tick = v;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* the output: a temporary next to OUT, renamed over it at the very end */

static char g_tmp[PATH_MAX + 16]; /* the temporary, while it exists */
/* libhdf5 1.10 crashes in its exit handler after a failed H5Fclose (e.g. a
 * write error while flushing): its atexit cleanup is off, and H5close is
 * called only when every close succeeded */
static int g_hdf5_broken;

/* A signal during the replay: remove the temporary, then die of the signal. */
static void on_fatal_signal(int sig)
{
    if (g_tmp[0]) unlink(g_tmp);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void remove_tmp(void)
{
    if (g_tmp[0]) unlink(g_tmp);
    g_tmp[0] = 0;
}

/* Refuse an OUT that is IN itself (same inode: the same name, a hard link,
 * a symbolic link to it, or IN a link to OUT) or IN's journal sidecar:
 * replacing either would destroy the input. Returns 0 or 1 (message
 * printed). */
static int check_out(const char *in, const char *out)
{
    struct stat si, so;
    if (stat(out, &so) != 0) return 0; /* OUT does not exist (yet): nothing to destroy */
    if (stat(in, &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        fprintf(stderr, "h5logreplay: %s and %s are the same file: refusing to overwrite the input\n", out, in);
        return 1;
    }
    char side[PATH_MAX + 16];
    if (snprintf(side, sizeof side, "%s" H5L_SIDECAR_SUFFIX, in) < (int)sizeof side && stat(side, &si) == 0 &&
        si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
        fprintf(stderr, "h5logreplay: %s is the journal of %s: refusing to overwrite the input\n", out, in);
        return 1;
    }
    if (S_ISDIR(so.st_mode)) {
        fprintf(stderr, "h5logreplay: %s: is a directory\n", out);
        return 1;
    }
    return 0;
}

/* Create the temporary OUT.tmpXXXXXX (same directory, so the final rename
 * is atomic) with the mode OUT would get: an existing OUT's, else 0666 less
 * the umask. Returns 0 or 1 (message printed). */
static int make_tmp(const char *out)
{
    char t[sizeof g_tmp];
    if (snprintf(t, sizeof t, "%s.tmpXXXXXX", out) >= (int)sizeof t) {
        fprintf(stderr, "h5logreplay: %s: name too long\n", out);
        return 1;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* the signal handler knows the name as soon as it exists */
    int fd = mkstemp(t);
    int er = errno;
    if (fd >= 0) memcpy(g_tmp, t, sizeof t);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        fprintf(stderr, "h5logreplay: %s: cannot create a temporary file next to it: %s\n", out, strerror(er));
        return 1;
    }
    struct stat so;
    mode_t mode;
    if (stat(out, &so) == 0) {
        mode = so.st_mode & 07777;
    } else {
        mode_t um = umask(0);
        umask(um);
        mode = 0666 & ~um;
    }
    (void)fchmod(fd, mode); /* on failure the file keeps mkstemp's 0600: still correct, only more private */
    close(fd);
    return 0;
}

/* Flush the finished temporary to disk and rename it over OUT. */
static int commit_tmp(const char *out)
{
    int fd = open(g_tmp, O_RDONLY | O_CLOEXEC);
    int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;
    int er = errno;
    if (fd >= 0) close(fd);
    if (rc) {
        fprintf(stderr, "h5logreplay: %s: cannot sync: %s\n", g_tmp, strerror(er));
        return 1;
    }
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* renamed and forgotten together */
    rc = rename(g_tmp, out);
    er = errno;
    if (!rc) g_tmp[0] = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "h5logreplay: %s: cannot rename %s to it: %s\n", out, g_tmp, strerror(er));
        return 1;
    }
    return 0;
}

/* Replay tick `tick` (0: newest) of IN into OUT. Returns the exit status. */
static int replay(const char *in, const char *out, uint64_t tick, int ckpt)
{
    if (check_out(in, out)) return 1;
    h5l_err_t e = {0};
    h5l_reader_t *r;
    /* the whole journal and every record table at open, checkpoints or
     * not: a damaged tick is found before anything is written, and the
     * last intact one is replayed (it reads most tables anyway) */
    if (h5l_reader_open_flags(in, ckpt ? 0 : H5L_READER_FULL, &r, &e)) {
        fprintf(stderr, "h5logreplay: %s\n", e.msg);
        return 1;
    }
    uint64_t newest = h5l_reader_ntick(r), damaged = 0;
    h5l_err_t de = {0};
    if (h5l_reader_damage(r, &damaged, &de)) /* the ticks before the damage are intact */
        fprintf(stderr, "h5logreplay: warning: %s (ticks 1..%llu are intact)\n", de.msg, (unsigned long long)newest);
    if (tick == 0) tick = newest;
    if (tick == 0 || tick > newest) {
        if (newest == 0)
            fprintf(stderr, "h5logreplay: %s: the file has no tick yet\n", in);
        else
            fprintf(stderr, "h5logreplay: %s: tick %llu does not exist (newest is %llu)\n", in,
                    (unsigned long long)tick, (unsigned long long)newest);
        h5l_reader_close(r);
        return 1;
    }
    if (make_tmp(out)) {
        h5l_reader_close(r);
        return 1;
    }
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    hid_t fcpl = h5l_canon_fcpl();
    hid_t file = H5Fcreate(g_tmp, H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fcpl);
    H5Pclose(fapl);
    if (file < 0) {
        fprintf(stderr, "h5logreplay: %s: cannot create\n", g_tmp);
        remove_tmp();
        h5l_reader_close(r);
        return 1;
    }
    /* the skeleton and the job list under the schema lock; data after it */
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    int rc = h5l_canon_build(file, s, tick, H5L_ALLOC_WRITE, NULL, NULL, &e);
    varjob_t *jobs = calloc(s->nobjs, sizeof *jobs);
    size_t njobs = 0;
    if (!rc && !jobs) rc = h5l_err_set(&e, H5L_ENOMEM, "out of memory");
    for (size_t i = 1; jobs && !rc && i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        if (o->kind != H5L_OBJ_VAR || o->tick > tick) continue;
        varjob_t *v = &jobs[njobs++];
        v->objid = (uint32_t)i;
        v->ndims = o->ndims;
        v->type = o->type;
        v->path = strdup(o->path);
        if (!v->path) rc = h5l_err_set(&e, H5L_ENOMEM, "out of memory");
        h5l_schema_shape(s, (uint32_t)i, tick, v->shape);
        memcpy(v->block, o->chunk, o->ndims * sizeof *o->chunk);
        /* past 2^16 chunks only the chunks that hold data, as in the
         * daemon's files (the others read as the fill value): one row at
         * t = 2^40 is not 2^36 chunks of fill (a replay once wrote 71 GB
         * of them before the disk was full) */
        v->sparse = h5l_canon_sparse(s, (uint32_t)i, tick);
        v->chunked = o->chunked && o->ndims;
    }
    h5l_reader_unlock(r);
    if (rc) fprintf(stderr, "h5logreplay: %s: %s\n", out, e.msg);
    for (size_t i = 0; !rc && i < njobs; i++) rc = copy_var(r, file, out, tick, &jobs[i]);
    for (size_t i = 0; i < njobs; i++) free(jobs[i].path);
    free(jobs);
    if (H5Fclose(file) < 0) {
        if (!rc) fprintf(stderr, "h5logreplay: %s: cannot finish writing %s\n", out, g_tmp);
        rc = -1;
        g_hdf5_broken = 1;
    }
    h5l_reader_close(r);
    if (!rc && commit_tmp(out)) rc = -1;
    if (rc) remove_tmp(); /* an existing OUT stays as it was */
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"tick", required_argument, NULL, 't'},
        {"checkpoints", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    /* "-": operands come back in order as option 1, so options may stand
     * anywhere (IN OUT --tick N) even under POSIXLY_CORRECT; ":": a missing
     * value is ':', not '?' */
    H5dont_atexit(); /* see g_hdf5_broken */
    const char *pos[2];
    int npos = 0;
    uint64_t tick = 0;
    int ckpt = 0;
    opterr = 0;
    for (int c; (c = getopt_long(argc, argv, "-:h", longopts, NULL)) != -1;) {
        switch (c) {
        case 1:
            if (npos < 2) pos[npos] = optarg;
            npos++;
            break;
        case 't':
            if (parse_tick(optarg, &tick)) {
                fprintf(stderr, "h5logreplay: --tick: invalid tick '%s' (a whole number from 1, the first tick)\n",
                        optarg);
                return 2;
            }
            break;
        case 'c':
            ckpt = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "h5logreplay: option %s needs a value\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        default:
            fprintf(stderr, "h5logreplay: unknown option %s\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    /* after "--" getopt stops: the rest are operands */
    for (; optind < argc; optind++) {
        if (npos < 2) pos[npos] = argv[optind];
        npos++;
    }
    if (npos != 2) {
        fprintf(stderr, "h5logreplay: expected 2 file names (IN OUT), got %d\n", npos);
        usage(stderr);
        return 2;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* an output past the file size limit (ulimit -f) is then an ordinary
     * write error (EFBIG), cleaned up like any other, not a silent death
     * that would leave the temporary behind */
    signal(SIGXFSZ, SIG_IGN);
    int rc = replay(pos[0], pos[1], tick, ckpt);
    if (!g_hdf5_broken) H5close();
    return rc;
}
