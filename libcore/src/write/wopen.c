/* wopen.c — h5l_open: going on writing an existing file (docs/format.md
 * 6.2) at its newest committed tick, from any number of ranks: the schema
 * as a snapshot of ops, the journal copied on, checkpoints resumed. */
#include "wint.h"

/* ------------------------------------------------------------------ */
/* h5l_open: going on writing an existing file (docs/format.md 6.2)     */

/* The definitions of schema s as of tick, as ops that rebuild it: every
 * dimension at its current length (a DIM, then a DIMLEN for a grown
 * unlimited one), every group and variable in id order, and each
 * attribute's current value, attributes in the order their names were
 * first set (the canonical file's attribute order). Appended to b; *nops
 * counts them. The writer starts from these instead of the history: its
 * checks need only what is, and a snapshot costs the schema's size, not
 * the log's. */
typedef struct atpair {
    size_t first, last;
} atpair_t;
static const h5l_schema_t *at_sort_s;
static int at_cmp(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const h5l_attr_t *x = &at_sort_s->attrs[i], *y = &at_sort_s->attrs[j];
    if (x->objid != y->objid) return x->objid < y->objid ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return i < j ? -1 : i > j;
}
static int pair_cmp(const void *a, const void *b)
{
    const atpair_t *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int snapshot_ops(const h5l_schema_t *s, uint64_t tick, h5l_buf_t *b, uint32_t *nops, h5l_err_t *e)
{
    *nops = 0;
    for (size_t d = 0; d < s->ndims; d++) {
        const h5l_dim_t *dm = &s->dims[d];
        uint64_t len = h5l_schema_dimlen(s, (uint32_t)d, tick);
        h5l_op_t op = {.kind = H5L_OP_DIM, .id = (uint32_t)d, .name = dm->name};
        op.flags = dm->unlimited ? 1u : 0u;
        op.len = dm->unlimited ? 0 : len;
        h5l_op_encode(b, &op);
        ++*nops;
        if (dm->unlimited && len) {
            h5l_op_t g = {.kind = H5L_OP_DIMLEN, .id = (uint32_t)d, .len = len};
            h5l_op_encode(b, &g);
            ++*nops;
        }
    }
    for (size_t i = 1; i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        h5l_op_t op = {.id = (uint32_t)i, .name = o->path};
        if (o->kind == H5L_OBJ_GROUP) {
            op.kind = H5L_OP_GROUP;
        } else if (o->kind == H5L_OBJ_VAR) {
            op.kind = H5L_OP_VAR;
            op.type = o->type;
            op.flags = (o->chunked ? H5L_VAR_CHUNKED : 0) |
                       (o->fill_mode == H5L_FILL_USER ? H5L_VAR_FILL_USER
                        : o->fill_mode == H5L_FILL_NONE ? H5L_VAR_NOFILL
                                                        : 0);
            op.ndims = o->ndims;
            op.dimids = o->dimids;
            op.chunk = o->chunk;
            op.data = o->fill;
            op.data_len = h5l_type_size(o->type);
        } else {
            return h5l_err_set(e, H5L_ECORRUPT, "object %zu of the schema is undefined", i);
        }
        h5l_op_encode(b, &op);
        ++*nops;
    }
    size_t n = s->nattrs, *ix = malloc((n ? n : 1) * sizeof *ix);
    atpair_t *pr = malloc((n ? n : 1) * sizeof *pr);
    if (!ix || !pr) {
        free(ix);
        free(pr);
        return h5l_err_set(e, H5L_ENOMEM, "out of memory");
    }
    size_t np = 0;
    for (size_t i = 0; i < n; i++) ix[i] = i;
    at_sort_s = s;
    qsort(ix, n, sizeof *ix, at_cmp);
    for (size_t i = 0; i < n; i++) {
        const h5l_attr_t *a = &s->attrs[ix[i]];
        if (i && s->attrs[ix[i - 1]].objid == a->objid && !strcmp(s->attrs[ix[i - 1]].name, a->name)) {
            if (a->tick <= tick) pr[np - 1].last = ix[i]; /* a later version */
            continue;
        }
        pr[np++] = (atpair_t){ix[i], ix[i]};
    }
    qsort(pr, np, sizeof *pr, pair_cmp);
    for (size_t k = 0; k < np; k++) {
        const h5l_attr_t *a = &s->attrs[pr[k].last];
        if (a->tick > tick) continue;
        h5l_op_t op = {.kind = H5L_OP_ATTR, .id = a->objid, .name = a->name, .type = a->type, .len = a->n};
        op.data = a->value;
        op.data_len = (size_t)a->n * h5l_type_size(a->type);
        h5l_op_encode(b, &op);
        ++*nops;
    }
    free(ix);
    free(pr);
    return b->oom ? h5l_err_set(e, H5L_ENOMEM, "out of memory") : H5L_OK;
}

/* Copy n bytes at offset from of fd `in` to offset 0 of fd `out`: the
 * embedded journal into a new sidecar. copy_file_range lets the file
 * system do it without passing the bytes through us (server-side on NFS
 * 4.2, a reflink where supported); read/write where it cannot. */
static int copy_range(int in, uint64_t from, int out, uint64_t n, const char *what, h5l_err_t *e)
{
    loff_t io = (loff_t)from, oo = 0;
    uint64_t done = 0;
    while (done < n) {
        ssize_t k = copy_file_range(in, &io, out, &oo, (size_t)(n - done), 0);
        if (k > 0) {
            done += (uint64_t)k;
            continue;
        }
        if (k == 0) break;
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
            return h5l_err_set(e, H5L_EIO, "%s: copying the journal: %s", what, strerror(errno));
        break;
    }
    if (done == n) return H5L_OK;
    size_t cap = (size_t)1 << 20;
    uint8_t *b = malloc(cap);
    if (!b) return h5l_err_set(e, H5L_ENOMEM, "%s: out of memory", what);
    int rc = H5L_OK;
    while (!rc && done < n) {
        size_t k = n - done < cap ? (size_t)(n - done) : cap;
        rc = h5l_fd_read_all(in, b, k, from + done, what, e);
        if (!rc) rc = h5l_fd_write(out, b, k, done, what, e);
        done += k;
    }
    free(b);
    return rc;
}

/* Rank 0: the checkpoint chain goes on where the file's stops (ckbuild.c):
 * the newest checkpoint, found from the end of the journal, and the TICK
 * frames after it (fewer than a segment) given to the builder again. No
 * chain and more ticks than a segment (checkpoints were off or broken):
 * none are made for the new ticks either. */
static void resume_ckpt(h5l_file_t *f, uint64_t ntick)
{
    f->ck = h5l_ckpt_w_new(f->path, h5l_ckpt_every(), f->seed);
    if (!f->ck) return;
    h5l_ckpt_chain_t ch;
    uint64_t from = H5L_JHDR_LEN, first = 1, prev = 0;
    int k = h5l_ckpt_chain_read(f->jfd, 0, f->joff, f->seed, f->jpath, &ch);
    if (k == 1) {
        from = ch.next;
        first = ch.last + 1;
        prev = ch.pos[ch.n - 1];
        h5l_ckpt_chain_free(&ch);
    } else if (ntick >= h5l_ckpt_every()) {
        h5l_ckpt_w_free(f->ck);
        f->ck = NULL;
        return;
    }
    h5l_ckpt_w_resume(f->ck, first, prev);
    h5l_jscan_t sc;
    h5l_jscan_init(&sc, f->jfd, NULL, 0, 0, f->seed, f->jpath);
    h5l_buf_t out = {0};
    int ok = 1;
    for (uint64_t pos = from; ok && pos < f->joff;) {
        h5l_frame_t fr;
        h5l_err_t e = {0};
        if (h5l_jscan_next(&sc, pos, f->joff, &fr, &e) != 1) {
            ok = 0;
            break;
        }
        if (fr.type == H5L_REC_TICK) {
            h5l_cur_t c = h5l_cur(fr.payload, fr.len);
            h5l_tick_info_t ti;
            uint32_t nops;
            ok = h5l_tick_decode(&c, &ti, &nops) == H5L_OK && fr.len >= H5L_TICK_LEN;
            if (ok)
                h5l_ckpt_w_tick(f->ck, &ti, nops, fr.payload + H5L_TICK_LEN, fr.len - H5L_TICK_LEN, fr.pos,
                                &f->schema, &out);
            ok = ok && out.len == 0; /* a checkpoint due here would have been written then */
        }
        pos = fr.next;
    }
    h5l_jscan_free(&sc);
    h5l_buf_free(&out);
    if (!ok) {
        h5l_ckpt_w_free(f->ck);
        f->ck = NULL;
    }
}

/* Rank 0's part of h5l_open, in the order that keeps the file readable
 * at every step (format.md 6.2): lock; read and check the journal (the
 * file is not touched if anything is wrong with it); the snapshot of the
 * schema into *ops; the sidecar made (a closed file: its embedded journal
 * copied, without the CLOSE frame) or cut after its last complete frame
 * (a killed writer's); the user block marked live; a new HDF5 file
 * written over the old one's metadata (h5l_anchor_recreate: the log stays
 * where it is). *info: the tick, the journal's SEGLOG, and the ops count. */
static int open_rank0(h5l_file_t *f, h5l_buf_t *ops, uint64_t info[3], h5l_err_t *e)
{
    int c = h5l_wlock_take(f->path, &f->lockpath, e);
    if (c) return c;
    f->reopened = 1; /* from here on a failure never removes the file's sidecar (h5l_w_file_ready) */
    int live_now = 0;
    h5l_reader_t *r = NULL;
    if ((c = h5l_reader_open_flags(f->path, H5L_READER_NO_CHUNK_MAP, &r, e))) return c;
    uint64_t bad = 0;
    h5l_err_t de = {0};
    if (h5l_reader_damage(r, &bad, &de)) {
        c = h5l_err_set(e, H5L_ECORRUPT,
                        "%s: not opened, its journal is damaged at tick %llu (the file is left as it was; "
                        "h5logreplay --tick %llu copies the newest intact tick): %s",
                        f->path, (unsigned long long)bad, (unsigned long long)(bad ? bad - 1 : 0), de.msg);
        h5l_reader_close(r);
        return c;
    }
    uint64_t n = h5l_reader_ntick(r), jpos = h5l_reader_journal_pos(r);
    int live = h5l_reader_live(r), closed = h5l_reader_closed(r);
    memcpy(f->id, h5l_reader_id(r), 16);
    f->seed = h5l_seed(f->id);
    /* the lowest log byte: tick 1's (extents only follow it, format.md 1);
     * a killed writer's file is looked at tick by tick, as h5logrecover does */
    uint64_t from = UINT64_MAX;
    for (uint64_t t = 1; t <= n && (t == 1 || live); t++) {
        h5l_tick_info_t ti;
        if (h5l_reader_tick_info(r, t, &ti)) continue;
        if (ti.data_size && ti.data_off < from) from = ti.data_off;
        if (ti.table_size && ti.table_off < from) from = ti.table_off;
    }
    h5l_reader_rdlock(r);
    uint32_t nops = 0;
    c = snapshot_ops(h5l_reader_schema(r), n, ops, &nops, e);
    h5l_reader_unlock(r);
    h5l_reader_close(r);
    if (c) return h5l_err_set(e, c, "%s: not opened: %s", f->path, e->msg);
    /* the user block and where the journal is */
    int fd = open(f->path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return h5l_err_set(e, H5L_EIO, "%s: %s", f->path, strerror(errno));
    uint8_t ub8[H5L_UB_LEN], jh[H5L_JHDR_LEN], fh[H5L_FRAME_LEN];
    h5l_ub_t ub;
    struct stat sb;
    c = h5l_fd_read_all(fd, ub8, sizeof ub8, 0, f->path, e);
    if (!c) c = h5l_ub_decode(ub8, &ub, f->path, e);
    if (!c && fstat(fd, &sb) != 0) c = h5l_err_set(e, H5L_EIO, "%s: %s", f->path, strerror(errno));
    int embedded = !c && (ub.flags & H5L_UB_CLOSED);
    int src = -1;
    if (!c && embedded) {
        src = fd;
    } else if (!c) {
        src = open(f->jpath, O_RDWR | O_CLOEXEC);
        if (src < 0) c = h5l_err_set(e, H5L_EIO, "%s: its journal %s: %s", f->path, f->jpath, strerror(errno));
    }
    uint64_t base = embedded ? ub.jr_off : 0;
    h5l_jhdr_t hd;
    if (!c) c = h5l_fd_read_all(src, jh, sizeof jh, base, f->path, e);
    if (!c) c = h5l_jhdr_decode(jh, &hd, f->path, e);
    /* the journal goes on after its last complete frame; a CLOSE frame
     * (the last one, format.md 3.4) is left out: the file is open again */
    uint64_t p = jpos;
    if (!c && closed) {
        h5l_frame_hdr_t h;
        p = jpos - h5l_frame_size(16);
        if (jpos < H5L_JHDR_LEN + h5l_frame_size(16) || h5l_fd_read_all(src, fh, sizeof fh, base + p, f->path, e) ||
            h5l_frame_hdr_decode(fh, f->seed, &h) != H5L_FRAME_OK || h.type != H5L_REC_CLOSE)
            c = h5l_err_set(e, H5L_ECORRUPT, "%s: not opened: its journal does not end with its CLOSE frame", f->path);
    }
    if (!c && !embedded) { /* a killed writer's sidecar: cut a torn tail off */
        if (ftruncate(src, (off_t)p) != 0)
            c = h5l_err_set(e, H5L_EIO, "%s: cutting its journal at %llu: %s", f->jpath, (unsigned long long)p,
                            strerror(errno));
        f->jfd = src;
        src = -1;
    } else if (!c) { /* a closed file: its journal back into a sidecar */
        f->jfd = open(f->jpath, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (f->jfd < 0)
            c = h5l_err_set(e, H5L_EIO, "%s: cannot create journal: %s", f->jpath, strerror(errno));
        if (!c) c = copy_range(fd, base, f->jfd, p, f->jpath, e);
        if (!c && f->opts.sync == H5L_SYNC_TICK && fsync(f->jfd) != 0)
            c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->jpath, strerror(errno));
        src = -1;
        if (!c) { /* live again: readers now take the sidecar */
            uint8_t was[H5L_UB_LEN];
            memcpy(was, ub8, sizeof was);
            ub.jr_off = ub.jr_len = 0;
            ub.flags = 0;
            h5l_ub_encode(&ub, ub8);
            c = h5l_fd_write(fd, ub8 + 32, 32, 32, f->path, e);
            if (c) /* put the closed bytes back: the embedded journal stays the truth */
                (void)h5l_fd_write(fd, was + 32, 32, 32, NULL, NULL);
            else if (f->opts.sync == H5L_SYNC_TICK && fsync(fd) != 0)
                c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->path, strerror(errno));
            live_now = !c;
        }
        if (c && !live_now) unlink(f->jpath); /* a closed file: the sidecar was ours */
    }
    if (src >= 0 && src != fd) close(src);
    close(fd);
    if (c) return c;
    f->joff = f->jpre = p;
    f->seglog = hd.seglog;
    /* the HDF5 file made anew over the old metadata; the log's bytes stay
     * the storage of /_h5log/log */
    c = h5l_anchor_recreate(f->path, f->id, from == UINT64_MAX ? 0 : from, from == UINT64_MAX ? 0 : (uint64_t)sb.st_size,
                            &f->anc, e);
    if (c)
        return h5l_err_set(e, c,
                           "%s; the file is left live with ticks 1..%llu in its journal %s (h5l_open or "
                           "h5logrecover again)",
                           e->msg, (unsigned long long)n, f->jpath);
    info[0] = n;
    info[1] = hd.seglog;
    info[2] = nops;
    return H5L_OK;
}

int h5l_open(const char *path, MPI_Comm comm, const h5l_opts_t *opts, h5l_file_t **out)
{
    h5l_file_t *f;
    if (out) *out = NULL;
    int rc = h5l_w_file_new(path, comm, opts, "h5l_open", out ? &f : NULL);
    if (rc) return rc;
    bstat_t st = {0};
    h5l_buf_t ops = {0};
    uint64_t info[4] = {0};
    if (f->rank == 0) {
        h5l_err_t e = {0};
        st.code = open_rank0(f, &ops, info, &e);
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        memcpy(st.v, f->id, 16);
        info[3] = ops.len;
    }
    rc = h5l_w_bcast_status(f, &st);
    if (!rc) {
        memcpy(f->id, st.v, 16);
        f->seed = h5l_seed(f->id);
        if (h5l_w_bcast_bytes(f, info, (int)sizeof info, 0) != MPI_SUCCESS)
            rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", path);
    }
    /* every rank starts from rank 0's snapshot of the schema */
    if (!rc) {
        int mem = f->rank && h5l_buf_reserve(&ops, (size_t)info[3] + 1);
        rc = h5l_w_agree(f, mem ? h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory", path) : H5L_OK);
    }
    for (uint64_t at = 0; !rc && at < info[3]; at += (uint64_t)1 << 30) {
        int k = (int)(info[3] - at < ((uint64_t)1 << 30) ? info[3] - at : (uint64_t)1 << 30);
        if (h5l_w_bcast_bytes(f, ops.p + at, k, 0) != MPI_SUCCESS) rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", path);
    }
    int lrc = H5L_OK;
    if (!rc) {
        uint64_t tick = info[0];
        h5l_cur_t c = h5l_cur(ops.p, (size_t)info[3]);
        for (uint64_t i = 0; i < info[2] && !lrc; i++) {
            h5l_op_t op;
            h5l_err_t e = {0};
            if (h5l_op_decode(&c, &op) != H5L_OK) {
                lrc = h5l_w_fail(f, H5L_ECORRUPT, "%s: not opened: its schema does not decode", path);
                break;
            }
            if (h5l_schema_apply(&f->schema, tick, &op, &e)) lrc = h5l_w_fail(f, H5L_ECORRUPT, "%s: not opened: %s", path, e.msg);
            h5l_op_clear(&op);
        }
        f->tick = tick;
        f->seglog = (uint32_t)info[1];
        f->ndims_committed = f->schema.ndims;
        f->anc_lazy = f->schema.nobjs > 1 ? tick : 0;
        if (!lrc && (h5l_grow((void **)&f->want, &f->cap_want, f->schema.ndims + 1, sizeof *f->want) ||
                     h5l_w_gath_room(f, f->schema.ndims)))
            lrc = h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory", path);
        if (f->want) memset(f->want, 0, f->cap_want * sizeof *f->want);
        if (!lrc && f->rank == 0) resume_ckpt(f, tick);
        rc = h5l_w_agree(f, lrc);
    }
    h5l_buf_free(&ops);
    return h5l_w_file_ready(f, rc, out);
}
