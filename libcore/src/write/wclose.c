/* wclose.c — h5l_close: the CLOSE frame, the finalize (docs/format.md 1:
 * the canonical objects of the last tick, their chunks in place or
 * copied), the journal embedded, the user block marked; what failed is
 * said in one message. */
#include "wint.h"

/* Append to a message, cutting what does not fit. */
static void msg_append(char *msg, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void msg_append(char *msg, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(msg);
    if (n + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, cap - n, fmt, ap);
    va_end(ap);
}

/* Rank 0's first step of close (format.md 6): the CLOSE frame. With a
 * sealed tick nothing is appended: a CLOSE frame over the sealed frame's
 * torn prefix would change bytes live readers may hold. */
static int close_append(h5l_file_t *f, h5l_err_t *e)
{
    if (f->sealed) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return h5l_err_set(e, H5L_EIO, "%s: not closed, tick %llu could not be committed", f->path,
                           (unsigned long long)f->tick);
    }
    uint8_t pl[16];
    h5l_put_le64(pl, f->tick);
    h5l_put_le64(pl + 8, h5l_w_now_ns());
    int c = h5l_w_journal_append(f, H5L_REC_CLOSE, pl, sizeof pl);
    if (c) h5l_err_set(e, c, "%s", f->errmsg);
    if (!c && f->opts.sync == H5L_SYNC_TICK && fsync(f->jfd) != 0)
        c = h5l_err_set(e, H5L_EIO, "%s: fsync: %s", f->jpath, strerror(errno));
    if (c) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return c;
    }
    /* the extent made ahead of a tick that never came: without it the
     * file's size is its data's, not up to three times that (its space,
     * the end of the file, goes back to libhdf5 before finalizing
     * allocates) */
    if (f->ahead_off) {
        char name[64];
        snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
        h5l_anchor_drop(f->anc, name);
        f->ahead_off = f->ahead_size = 0;
    }
    return c;
}

/* Finalizing with every rank (format.md 1.1, 6), after the CLOSE frame:
 * each rank plans from its own reader of the journal; when the plans
 * h5l_w_agree, rank 0 builds the objects and allocates their storage, every
 * rank writes its share of the copies, and rank 0 learns whether all
 * did. *pp (rank 0): the plan to finish with, or NULL: finalize alone
 * (a rank could not plan, or planned otherwise: a file system that does
 * not show rank 0's journal to the others yet). *h5l_w_fail (rank 0): a reason
 * finalizing was given up (in e), 0 if not. MPI failures are returned. */
static int close_finalize(h5l_file_t *f, h5l_final_t **pp, int *given_up, h5l_err_t *e)
{
    *pp = NULL;
    *given_up = 0;
    h5l_reader_t *r = NULL;
    h5l_final_t *p = NULL;
    h5l_err_t le = {0};
    int lrc = h5l_reader_open(f->path, &r, &le);
    if (!lrc && h5l_reader_ntick(r) != f->tick) lrc = H5L_ECORRUPT;
    if (!lrc) lrc = h5l_final_plan(r, f->tick, &p, &le);
    uint64_t d = p ? h5l_final_digest(p) : 0, mm[2] = {d, ~d};
    int mrc = MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_UINT64_T, MPI_MIN, f->comm);
    int bad = lrc != 0;
    if (mrc == MPI_SUCCESS) mrc = MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, f->comm);
    int rc = mrc == MPI_SUCCESS ? H5L_OK : h5l_w_fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    int agreed = !rc && !bad && mm[0] == ~mm[1];
    bstat_t st = {0};
    if (agreed && f->rank == 0) {
        st.code = h5l_anchor_final_build(f->anc, p, r, &f->schema, f->tick, e);
        if (st.code) *given_up = 1;
    }
    size_t nw = 0;
    const uint64_t *w = p ? h5l_final_addrs(p, &nw) : NULL;
    uint64_t *wc = NULL;
    if (agreed) {
        st.v[0] = nw;
        if (!rc && h5l_w_bcast_bytes(f, &st, (int)sizeof st, 0) != MPI_SUCCESS)
            rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
        nw = (size_t)st.v[0];
        if (!rc && !st.code && !(wc = malloc((nw ? nw : 1) * sizeof *wc)))
            lrc = h5l_err_set(&le, H5L_ENOMEM, "%s: finalizing: out of memory", f->path);
        /* rank 0's addresses, in pieces through a buffer of our own: a rank
         * short of memory still takes part (a collective left out hangs
         * every other rank) */
        for (size_t at = 0; !rc && !st.code && at < nw; at += 512) {
            uint64_t piece[512];
            size_t k = nw - at < 512 ? nw - at : 512;
            if (f->rank == 0) memcpy(piece, w + at, k * sizeof *piece);
            if (h5l_w_bcast_bytes(f, piece, (int)(k * sizeof *piece), 0) != MPI_SUCCESS)
                rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
            if (wc) memcpy(wc + at, piece, k * sizeof *piece);
        }
        /* every rank's share of the copies, then whether all of them made it */
        if (!rc && !st.code) {
            if (!lrc && f->rank) lrc = h5l_final_set_addrs(p, wc, nw, &le);
            int fd = lrc ? -1 : open(f->path, O_WRONLY | O_CLOEXEC);
            if (!lrc && fd < 0) lrc = h5l_err_set(&le, H5L_EIO, "%s: finalizing: %s", f->path, strerror(errno));
            if (!lrc) lrc = h5l_final_copy(p, r, fd, f->rank, f->size, &le);
            if (!lrc && f->opts.sync == H5L_SYNC_TICK && fsync(fd) != 0)
                lrc = h5l_err_set(&le, H5L_EIO, "%s: finalizing: fsync: %s", f->path, strerror(errno));
            if (fd >= 0) close(fd);
            if (lrc) snprintf(f->errmsg, sizeof f->errmsg, "%s", le.msg);
            int worst = 0, who = 0;
            rc = h5l_w_reduce_status(f, lrc, &worst, &who);
            char msg[sizeof e->msg];
            int wm[2] = {worst, who};
            if (!rc && MPI_Bcast(wm, 2, MPI_INT, 0, f->comm) != MPI_SUCCESS)
                rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
            if (!rc && wm[0]) { /* the failing rank's reason, to rank 0 */
                snprintf(msg, sizeof msg, "%s", f->errmsg);
                if (h5l_w_bcast_bytes(f, msg, (int)sizeof msg, wm[1]) != MPI_SUCCESS)
                    rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
                msg[sizeof msg - 1] = 0;
                if (!rc && f->rank == 0) {
                    h5l_err_set(e, wm[0], "%s", msg);
                    h5l_anchor_final_undo(f->anc, p, &f->schema, f->tick);
                    *given_up = 1;
                }
            }
        }
    }
    free(wc);
    h5l_reader_close(r);
    if (f->rank == 0 && agreed && !*given_up && !rc)
        *pp = p;
    else
        h5l_final_free(p);
    return rc;
}

/* Rank 0, closing a continued file: the journal's bytes from before the
 * reopen (f->jpre, in the sidecar only) put in front of jcopy, so the
 * embedded journal is the whole of it. Read at close, not at open: an
 * open must not cost the log's length. */
static int journal_whole(h5l_file_t *f, h5l_err_t *e)
{
    h5l_buf_t all = {0};
    if (h5l_buf_reserve(&all, (size_t)f->jpre + f->jcopy.len))
        return h5l_err_set(e, H5L_ENOMEM, "%s: out of memory for its %llu-byte journal", f->path,
                           (unsigned long long)(f->jpre + f->jcopy.len));
    int rc = h5l_fd_read_all(f->jfd, all.p, (size_t)f->jpre, 0, f->jpath, e);
    if (rc) {
        h5l_buf_free(&all);
        return rc;
    }
    memcpy(all.p + f->jpre, f->jcopy.p, f->jcopy.len);
    all.len = (size_t)f->jpre + f->jcopy.len;
    h5l_buf_free(&f->jcopy);
    f->jcopy = all;
    f->jpre = 0;
    return H5L_OK;
}

/* Rank 0's last steps of close (format.md 6): the HDF5 file closed with
 * the journal embedded (finalizing first, with plan p, or alone when p is
 * NULL; given_up: finalizing was tried and undone, e says why), the user
 * block marked closed, the sidecar removed — each step only after the one
 * before succeeded, so a failure leaves a live file whose sidecar holds
 * every committed tick (h5l_anchor_finish never lets libhdf5 h5l_w_fail inside
 * H5Fclose, see anchor.c, so the process can still reach MPI_Finalize).
 * *closed: the user block says closed. */
static int close_finish(h5l_file_t *f, h5l_final_t *p, int given_up, h5l_err_t *e, int *closed)
{
    int sync = f->opts.sync == H5L_SYNC_TICK;
    int final = !f->opts.no_finalize && !given_up, c;
    h5l_err_t why = *e;
    if (f->anc_lazy && !final && h5l_w_ensure_anchors(f)) { /* the anchors are what a file closed unfinalized has */
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return h5l_err_set(e, H5L_EHDF5, "%s", f->errmsg);
    }
    if (f->jpre && (c = journal_whole(f, e))) {
        h5l_anchor_abort(f->anc);
        f->anc = NULL;
        return c;
    }
    c = h5l_anchor_finish(f->anc, &f->schema, f->tick, f->jcopy.p, f->jcopy.len, sync, p, &final, e);
    f->anc = NULL;
    *closed = !c;
    if (!c && given_up) *e = why;
    if (!c && final == f->opts.no_finalize) {
        /* closed, but finalizing failed and was undone: say so (the
         * caller asked for a file plain readers can read) */
        char m[sizeof e->msg];
        snprintf(m, sizeof m, "%s", e->msg);
        c = h5l_err_set(e, H5L_EIO,
                        "%s; not finalized: plain HDF5 readers refuse its variables (h5logrecover %s "
                        "finalizes it later)",
                        m, f->path);
    }
    if (*closed && unlink(f->jpath) != 0)
        c = h5l_err_set(e, H5L_EIO, "%s: the file is closed, but its journal sidecar cannot be removed: %s", f->jpath,
                        strerror(errno));
    return c;
}

int h5l_close(h5l_file_t *f)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    /* flush only if some rank has something pending (or a tick is sealed):
     * close adds no empty tick (an explicit h5l_flush always publishes one) */
    uint64_t pending = f->nops + f->nputs + (uint64_t)f->sealed;
    if (MPI_Allreduce(MPI_IN_PLACE, &pending, 1, MPI_UINT64_T, MPI_MAX, f->comm) != MPI_SUCCESS)
        rc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    else if (pending)
        rc = h5l_flush(f); /* on failure the committed ticks still stand */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", rc ? f->errmsg : "");
    int lc = H5L_OK;
    if (f->fh_open) {
        f->fh_open = 0;
        if (MPI_File_close(&f->fh) != MPI_SUCCESS) lc = h5l_w_fail(f, H5L_EIO, "%s: MPI_File_close failed", f->path);
    }
    int worst = 0, who = 0, closed = 0;
    int crc = rc == H5L_EMPI ? rc : h5l_w_reduce_status(f, lc, &worst, &who);
    bstat_t st = {0};
    h5l_err_t e = {0};
    /* rank 0 appends the CLOSE frame and says whether the close goes on */
    int appended = 0;
    if (!crc) {
        if (f->rank == 0) {
            st.code = close_append(f, &e);
            if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        }
        if (h5l_w_bcast_bytes(f, &st, (int)sizeof st, 0) != MPI_SUCCESS)
            crc = h5l_w_fail(f, H5L_EMPI, "%s: MPI_Bcast failed", f->path);
        appended = !crc && !st.code;
    }
    h5l_final_t *plan = NULL;
    int given_up = 0;
    if (appended && !f->opts.no_finalize) crc = close_finalize(f, &plan, &given_up, &e);
    if (!crc && f->rank == 0) {
        int c = st.code;
        if (appended) c = close_finish(f, plan, given_up, &e, &closed);
        st.code = c ? c : worst;
        st.from = c ? 0 : who;
        st.v[0] = (uint64_t)closed;
        if (c)
            snprintf(st.msg, sizeof st.msg, "%s", e.msg);
        else if (worst && who == 0)
            snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    }
    h5l_final_free(plan);
    if (!crc) {
        crc = h5l_w_bcast_status(f, &st);
        closed = (int)st.v[0];
    }
    /* the message: the first failure, then what the close did about it */
    if (!rc) {
        rc = crc;
        snprintf(msg, sizeof msg, "%s", crc ? f->errmsg : "");
    } else if (crc && crc != H5L_EMPI && !f->sealed) {
        msg_append(msg, sizeof msg, "; then closing failed: %s", f->errmsg);
    }
    if (rc && rc != H5L_EMPI) {
        uint64_t last = f->tick - (uint64_t)f->sealed;
        if (closed)
            msg_append(msg, sizeof msg, "; the file was closed with ticks 1..%llu", (unsigned long long)last);
        else
            msg_append(msg, sizeof msg, "; the file was not closed: ticks 1..%llu stay readable from its journal %s",
                       (unsigned long long)last, f->jpath);
    }
    snprintf(f->errmsg, sizeof f->errmsg, "%s", msg);
    if (rc) snprintf(h5l_w_create_err, sizeof h5l_w_create_err, "%s", f->errmsg);
    f->state = ST_CLOSED;
    h5l_w_free_file(f);
    return rc;
}
