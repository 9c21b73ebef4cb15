/* writer.c — libh5log's MPI writer (h5log.h).
 *
 * Between flushes a rank only appends: h5l_put copies data into an arena
 * (h5l_iput remembers the caller's pointer) and grows the open record:
 * puts of one variable made one after another share a record, and a put
 * that extends the last box along one dimension grows that box
 * (docs/format.md 6). Records need no
 * offsets (they are laid in data order). Definitions are applied to a local
 * schema (the same checks readers make) and kept as pending ops.
 *
 * A flush is a fixed sequence of collectives (docs/format.md 6): one
 * Allgather agrees on sizes, ops (hash) and grown dimensions (MAX); every
 * rank places the tick in the newest log extent from the same totals (rank
 * 0 allocates the next extent with libhdf5 only when it does not fit, and
 * broadcasts where); each rank writes its data, checksumming each block of
 * it right before writing it (the hash brings the bytes into the cache the
 * write then copies them from: one pass over memory), and its record
 * block with independent MPI-IO writes and checks the transferred byte
 * counts (MPI-IO reports a full disk as a short count); a Reduce of the
 * statuses lets rank 0 append the TICK frame only once every write
 * succeeded: the commit point. Any failure before the commit commits nothing and leaves the
 * buffered writes in place, so the caller may flush again (the tick goes to
 * the same place).
 *
 * The arena is reserved address space (MAP_NORESERVE) of the buffer limit:
 * it costs memory only where written, never moves, and keeps its pages
 * between flushes so steady-state puts do not fault. */
#include "wint.h"

_Thread_local char h5l_w_create_err[512];

int h5l_w_fail(h5l_file_t *f, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f ? f->errmsg : h5l_w_create_err, sizeof h5l_w_create_err, fmt, ap);
    va_end(ap);
    return code;
}


/* Room in f->gath for a flush with ndims committed dimensions. 0 or -1. */
int h5l_w_gath_room(h5l_file_t *f, size_t ndims)
{
    return h5l_grow((void **)&f->gath, &f->cap_gath, (size_t)f->size * (AGG_N + ndims), sizeof *f->gath);
}

void h5l_opts_init(h5l_opts_t *o)
{
    o->buffer_limit = DEFAULT_BUFFER_LIMIT;
    o->sync = H5L_SYNC_NONE;
    o->check_collective = 1;
    o->no_finalize = 0;
    o->early_writes = 0;
    o->pad_ = 0;
    memset(o->reserved_, 0, sizeof o->reserved_);
}

const char *h5l_errmsg(const h5l_file_t *f) { return f ? f->errmsg : h5l_w_create_err; }
uint64_t h5l_ntick(const h5l_file_t *f) { return f ? f->tick - (uint64_t)f->sealed : 0; }
size_t h5l_buffered(const h5l_file_t *f) { return f ? f->arena_used : 0; }

/* ---- lookups (h5log.h): the writer's schema, committed and pending ---- */

static int copy_name(const char *s, char *buf, size_t cap)
{
    if (!buf || strlen(s) + 1 > cap) return H5L_ERANGE;
    memcpy(buf, s, strlen(s) + 1);
    return H5L_OK;
}

static const h5l_obj_t *inq_obj(const h5l_file_t *f, int id, int kind)
{
    if (!f || id < 0 || (size_t)id >= f->schema.nobjs) return NULL;
    const h5l_obj_t *o = &f->schema.objs[id];
    return (kind ? o->kind == kind : o->kind != 0) ? o : NULL;
}

int h5l_inq_dimid(const h5l_file_t *f, const char *name, int *dimid)
{
    if (!f || !name || !dimid) return H5L_EINVAL;
    long d = h5l_schema_find_dim(&f->schema, name);
    if (d < 0) return H5L_ENOTFOUND;
    *dimid = (int)d;
    return H5L_OK;
}

static int inq_path(const h5l_file_t *f, const char *path, int kind, int *id)
{
    if (!f || !path || !id) return H5L_EINVAL;
    long o = h5l_schema_find(&f->schema, path);
    if (o < 0 || f->schema.objs[o].kind != kind) return H5L_ENOTFOUND;
    *id = (int)o;
    return H5L_OK;
}

int h5l_inq_varid(const h5l_file_t *f, const char *path, int *varid) { return inq_path(f, path, H5L_OBJ_VAR, varid); }
int h5l_inq_grpid(const h5l_file_t *f, const char *path, int *grpid)
{
    if (path && !strcmp(path, "/") && grpid) {
        *grpid = H5L_GLOBAL;
        return f ? H5L_OK : H5L_EINVAL;
    }
    return inq_path(f, path, H5L_OBJ_GROUP, grpid);
}

int h5l_inq_dimlen(const h5l_file_t *f, int dimid, uint64_t *len)
{
    if (!f || !len) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    *len = h5l_schema_dimlen_now(&f->schema, (uint32_t)dimid);
    return H5L_OK;
}

int h5l_inq_unlimited(const h5l_file_t *f, int dimid, int *unlimited)
{
    if (!f || !unlimited) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    *unlimited = f->schema.dims[dimid].unlimited;
    return H5L_OK;
}

int h5l_inq_varndims(const h5l_file_t *f, int varid, int *ndims)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!ndims) return H5L_EINVAL;
    if (!o) return H5L_EBADID;
    *ndims = (int)o->ndims;
    return H5L_OK;
}

int h5l_inq_vardimid(const h5l_file_t *f, int varid, int *dimids)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!dimids) return H5L_EINVAL;
    if (!o) return H5L_EBADID;
    for (uint32_t d = 0; d < o->ndims; d++) dimids[d] = (int)o->dimids[d];
    return H5L_OK;
}

int h5l_inq_counts(const h5l_file_t *f, int *ndims, int *nobjs)
{
    if (!f) return H5L_EINVAL;
    if (ndims) *ndims = (int)f->schema.ndims;
    if (nobjs) *nobjs = (int)f->schema.nobjs;
    return H5L_OK;
}

int h5l_inq_dimname(const h5l_file_t *f, int dimid, char *buf, size_t cap)
{
    if (!f) return H5L_EINVAL;
    if (dimid < 0 || (size_t)dimid >= f->schema.ndims) return H5L_EBADID;
    return copy_name(f->schema.dims[dimid].name, buf, cap);
}

int h5l_inq_obj(const h5l_file_t *f, int objid, int *kind, char *buf, size_t cap)
{
    const h5l_obj_t *o = inq_obj(f, objid, 0);
    if (!o) return f ? H5L_EBADID : H5L_EINVAL;
    if (kind) *kind = o->kind;
    return buf ? copy_name(o->path, buf, cap) : H5L_OK;
}

int h5l_inq_var(const h5l_file_t *f, int varid, hid_t *type, int *chunked, uint64_t *chunk, void *fill,
                int *fill_mode)
{
    const h5l_obj_t *o = inq_obj(f, varid, H5L_OBJ_VAR);
    if (!o) return f ? H5L_EBADID : H5L_EINVAL;
    if (type) {
        hid_t t = h5l_type_to_hid(o->type, 1);
        if (t < 0) return H5L_ETYPE;
        /* the predefined type of the same class, size, sign and order */
        hid_t p = H5I_INVALID_HID;
        hid_t cand[] = {H5T_STD_I8LE,  H5T_STD_I8BE,  H5T_STD_U8LE,  H5T_STD_U8BE,  H5T_STD_I16LE, H5T_STD_I16BE,
                        H5T_STD_U16LE, H5T_STD_U16BE, H5T_STD_I32LE, H5T_STD_I32BE, H5T_STD_U32LE, H5T_STD_U32BE,
                        H5T_STD_I64LE, H5T_STD_I64BE, H5T_STD_U64LE, H5T_STD_U64BE, H5T_IEEE_F32LE, H5T_IEEE_F32BE,
                        H5T_IEEE_F64LE, H5T_IEEE_F64BE};
        for (size_t i = 0; i < sizeof cand / sizeof *cand && p < 0; i++)
            if (H5Tequal(t, cand[i]) > 0) p = cand[i];
        H5Tclose(t);
        if (p < 0) return H5L_ETYPE;
        *type = p;
    }
    if (chunked) *chunked = o->chunked;
    if (chunk) memcpy(chunk, o->chunk, o->ndims * sizeof *chunk);
    if (fill) memcpy(fill, o->fill, o->type.size);
    if (fill_mode) *fill_mode = o->fill_mode;
    return H5L_OK;
}

uint64_t h5l_w_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void new_identity(uint8_t id[16])
{
    if (getrandom(id, 16, 0) == 16) return;
    uint64_t a = h5l_w_now_ns(), b = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull;
    h5l_put_le64(id, a);
    h5l_put_le64(id + 8, b ^ (uint64_t)(uintptr_t)id);
}

void h5l_w_free_file(h5l_file_t *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->nops; i++) h5l_op_clear(&f->ops[i]);
    free(f->ops);
    free(f->pieces);
    free(f->cur.boxes);
    h5l_hstream_free(f->hs);
    free(f->want);
    h5l_buf_free(&f->recs);
    h5l_buf_free(&f->jcopy);
    free(f->cells);
    h5l_buf_free(&f->pend);
    h5l_ckpt_w_free(f->ck);
    h5l_schema_free(&f->schema);
    if (f->arena) munmap(f->arena, f->arena_cap);
    if (f->jfd >= 0) close(f->jfd);
    h5l_anchor_abort(f->anc);
    free(f->gath);
    free(f->sz_last);
    free(f->sz_now);
    free(f->wsums);
    if (f->comm != MPI_COMM_NULL) MPI_Comm_free(&f->comm);
    h5l_wlock_drop(f->lockpath);
    free(f->path);
    free(f->jpath);
    free(f);
}


/* Wait for a non-blocking collective without holding a core: MPI_Test
 * for up to WAIT_SPIN_NS (ranks that arrive together finish here), then
 * sleep between tests, 50 us at first, doubling up to WAIT_SLEEP_MAX_NS.
 * A rank waiting in a blocking collective polls (OpenMPI yields the core
 * between polls only when it knows the node is oversubscribed, and a
 * yielding rank is still runnable): with ranks sharing cores with each
 * other or with other work, the waiting ranks took CPU from the rank they
 * were waiting for (4 ranks on 2 cores, pattern S: h5l_iput's CPU per run
 * doubled and its speed halved without yielding; docs/performance.md). The
 * price: up to WAIT_SLEEP_MAX_NS more latency for a wait that lasts past
 * the spin. An MPI error code. */
#define WAIT_SPIN_NS 50000L
#define WAIT_SLEEP_MAX_NS 400000L
int h5l_w_coll_wait(MPI_Request *rq)
{
    int done = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > WAIT_SPIN_NS) break;
    }
    for (long ns = 50000L;; ns = ns * 2 > WAIT_SLEEP_MAX_NS ? WAIT_SLEEP_MAX_NS : ns * 2) {
        struct timespec d = {0, ns};
        nanosleep(&d, NULL);
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
    }
}

int h5l_w_bcast_bytes(h5l_file_t *f, void *p, int n, int root)
{
    MPI_Request rq;
    int rc = MPI_Ibcast(p, n, MPI_BYTE, root, f->comm, &rq);
    return rc == MPI_SUCCESS ? h5l_w_coll_wait(&rq) : rc;
}

int h5l_w_bcast_status(h5l_file_t *f, bstat_t *st)
{
    if (h5l_w_bcast_bytes(f, st, (int)sizeof *st, 0) != MPI_SUCCESS)
        return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
    if (!st->code) return H5L_OK;
    if (st->from > 0 && st->from < f->size) {
        if (f->rank == st->from) snprintf(st->msg, sizeof st->msg, "%s", f->errmsg);
        if (h5l_w_bcast_bytes(f, st->msg, (int)sizeof st->msg, (int)st->from) != MPI_SUCCESS)
            return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
    }
    st->msg[sizeof st->msg - 1] = 0;
    return h5l_w_fail(f, (int)st->code, "%s", st->msg);
}

/* Every rank's code to rank 0: on rank 0, *worst gets the most severe
 * (lowest) and *who the lowest rank that had it. Rank 0 then decides and
 * broadcasts (h5l_w_bcast_status with from = *who). Returns an MPI failure. */
int h5l_w_reduce_status(h5l_file_t *f, int code, int *worst, int *who)
{
    int in[2] = {code, f->rank}, out[2] = {code, f->rank};
    MPI_Request rq;
    int mrc = MPI_Ireduce(in, out, 1, MPI_2INT, MPI_MINLOC, 0, f->comm, &rq);
    if (mrc == MPI_SUCCESS) mrc = h5l_w_coll_wait(&rq);
    if (mrc != MPI_SUCCESS) return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Reduce failed", f->path);
    *worst = out[0];
    *who = out[1];
    return H5L_OK;
}

/* Every rank's local code; the most severe (lowest) wins everywhere. */
int h5l_w_agree(h5l_file_t *f, int code)
{
    int all = code;
    if (MPI_Allreduce(&code, &all, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS)
        return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    if (all && !code) h5l_w_fail(f, all, "%s: another rank failed: %s", f->path, h5l_strerror(all));
    return all;
}

/* What h5l_create and h5l_open share before the file is touched: f with
 * its communicator, buffers and write arena. Every rank agrees on the
 * outcome; on failure f is freed and h5l_w_create_err says why. */
int h5l_w_file_new(const char *path, MPI_Comm comm, const h5l_opts_t *opts, const char *fn, h5l_file_t **out)
{
    if (!out) return h5l_w_fail(NULL, H5L_EINVAL, "%s: NULL output pointer", fn);
    *out = NULL;
    if (!path || !path[0]) return h5l_w_fail(NULL, H5L_EINVAL, "%s: empty path", fn);
    h5l_file_t *f = calloc(1, sizeof *f);
    /* every rank learns of a rank without f (no communicator of its own
     * yet: on the caller's), so none waits in a collective alone */
    int ok = f != NULL, all = 0;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS) all = 0;
    if (!all) {
        free(f);
        return h5l_w_fail(NULL, H5L_ENOMEM, "%s: out of memory%s", path, ok ? " on another rank" : "");
    }
    f->jfd = -1;
    f->comm = MPI_COMM_NULL;
    if (opts)
        f->opts = *opts;
    else
        h5l_opts_init(&f->opts);
    int rc = H5L_OK;
    if (MPI_Comm_dup(comm, &f->comm) != MPI_SUCCESS) {
        h5l_w_free_file(f);
        return h5l_w_fail(NULL, H5L_EMPI, "%s: MPI_Comm_dup failed", path);
    }
    MPI_Comm_rank(f->comm, &f->rank);
    MPI_Comm_size(f->comm, &f->size);
    f->path = strdup(path);
    if (f->path && asprintf(&f->jpath, "%s%s", path, H5L_SIDECAR_SUFFIX) < 0) f->jpath = NULL;
    f->cur.varid = -1;
    f->seglog = H5L_SEGLOG_DEFAULT;
    f->hs = h5l_hstream_new();
    f->sz_last = calloc((size_t)f->size, sizeof *f->sz_last);
    f->sz_now = calloc((size_t)f->size, sizeof *f->sz_now);
    if (!f->path || !f->jpath || !f->hs || !f->sz_last || !f->sz_now || h5l_w_gath_room(f, 0) ||
        h5l_schema_init(&f->schema) || h5l_buf_reserve(&f->recs, H5L_BLOCK_LEN))
        rc = h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory", path);
    f->recs.len = H5L_BLOCK_LEN;
    if (!rc && f->opts.buffer_limit) {
        f->arena = mmap(NULL, f->opts.buffer_limit, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
        if (f->arena == MAP_FAILED) {
            f->arena = NULL;
            rc = h5l_w_fail(f, H5L_ENOMEM, "%s: cannot reserve a %zu-byte write buffer", path, f->opts.buffer_limit);
        } else {
            f->arena_cap = f->opts.buffer_limit;
            /* Transparent huge pages where the system allows them on
             * request (THP "madvise", Debian's default): the first touch
             * of a fresh 4 KiB page costs ~18 us on the VMs measured
             * (0.2 GB/s into fresh pages against 8 GB/s with 2 MiB pages,
             * bench_copy), which made h5l_put's copy of a flush's first
             * 32 MiB the slowest step of the writer. Advisory: ignored
             * where THP is off. The cost: memory is committed in 2 MiB
             * steps as the arena fills. */
            (void)madvise(f->arena, f->arena_cap, MADV_HUGEPAGE);
        }
    }
    rc = h5l_w_agree(f, rc);
    if (rc) {
        snprintf(h5l_w_create_err, sizeof h5l_w_create_err, "%s", f->errmsg);
        h5l_w_free_file(f);
        return rc;
    }
    *out = f;
    return H5L_OK;
}

/* The end of h5l_create and h5l_open: every rank opens the file with
 * MPI-IO; on failure (rc, or that) everything is undone and freed. */
int h5l_w_file_ready(h5l_file_t *f, int rc, h5l_file_t **out)
{
    if (!rc) {
        f->seed = h5l_seed(f->id);
        /* read-write: a flush may move bytes written early (move_early) */
        int mrc = MPI_File_open(f->comm, f->path, MPI_MODE_RDWR, MPI_INFO_NULL, &f->fh);
        f->fh_open = mrc == MPI_SUCCESS;
        rc = h5l_w_agree(f, f->fh_open ? H5L_OK : h5l_w_fail(f, H5L_EMPI, "%s: MPI_File_open failed", f->path));
    }
    if (rc) {
        snprintf(h5l_w_create_err, sizeof h5l_w_create_err, "%s", f->errmsg);
        if (f->fh_open) MPI_File_close(&f->fh);
        if (f->rank == 0 && f->jfd >= 0 && !f->reopened) unlink(f->jpath);
        h5l_w_free_file(f);
        return rc;
    }
    *out = f;
    return H5L_OK;
}

int h5l_create(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **out)
{
    h5l_file_t *f;
    if (out) *out = NULL;
    int rc = h5l_w_file_new(path, comm, opts, "h5l_create", out ? &f : NULL);
    if (rc) return rc;
    bstat_t st = {0};
    if (f->rank == 0) {
        h5l_err_t e = {0};
        new_identity(f->id);
        /* one writer at a time (wlock.c), before anything is touched */
        int c = h5l_wlock_take(path, &f->lockpath, &e);
        /* sidecar first: a reader that sees the new user block finds it */
        if (!c) c = h5l_journal_create(f->jpath, f->id, h5l_w_now_ns(), f->seglog, &f->jfd, &f->jcopy, &e);
        f->joff = H5L_JHDR_LEN;
        if (!c) c = h5l_anchor_create(path, f->id, &f->anc, &e);
        if (!c) f->ck = h5l_ckpt_w_new(path, h5l_ckpt_every(), h5l_seed(f->id)); /* NULL: none */
        st.code = c;
        if (c) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        memcpy(st.v, f->id, 16);
    }
    rc = h5l_w_bcast_status(f, &st);
    if (!rc) memcpy(f->id, st.v, 16);
    return h5l_w_file_ready(f, rc, out);
}
