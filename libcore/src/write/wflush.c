/* wflush.c — h5l_flush: a fixed sequence of collectives (docs/format.md
 * 6): agree, grow, place, write, commit, publish, each its own function;
 * the data written block by block, each block hashed right before it is
 * written; the TICK frame appended by rank 0 once every write succeeded
 * (the commit point). A failure before it commits nothing and keeps the
 * buffered writes for a retry. */
#include "wint.h"

/* The reason a write did not transfer every byte. OpenMPI's ompio turns a
 * failed pwrite into MPI_SUCCESS with a short (often zero) count and keeps
 * the errno, so an I/O errno left by the call is the reason; failing that,
 * a file system with no space left; else just "short write". */
static const char *short_reason(h5l_file_t *f, int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EIO:
    case EFBIG:
    case EROFS:
    case ESTALE:
    case EREMOTEIO:
        return strerror(err);
    default:
        break;
    }
    struct statvfs sv;
    if (statvfs(f->path, &sv) == 0 && sv.f_bavail == 0) return strerror(ENOSPC);
    return "short write";
}

/* A place in a rank's pieces: piece i, byte skip of it. */
typedef struct ppos {
    size_t i;
    size_t skip;
} ppos_t;

/* Move pos k bytes on (the pieces hold at least that many more). */
static void ppos_advance(const piece_t *pc, ppos_t *pos, uint64_t k)
{
    while (k) {
        size_t left = pc[pos->i].len - pos->skip;
        if (k < left) {
            pos->skip += (size_t)k;
            return;
        }
        k -= left;
        pos->i++;
        pos->skip = 0;
    }
}

/* One MPI-IO write of len bytes of the pieces from pos on, at off (several
 * pieces: an hindexed memory type; blocks under 1 GiB for int counts). *st
 * gets the status. An MPI error code, or H5L_ENOMEM. */
static int write_from(h5l_file_t *f, MPI_Offset off, const piece_t *pc, ppos_t pos, uint64_t len, MPI_Status *st)
{
    if (len == 0) return MPI_SUCCESS;
    if (pc[pos.i].len - pos.skip >= len && len <= MPI_BLOCK_MAX)
        return MPI_File_write_at(f->fh, off, (void *)(pc[pos.i].p + pos.skip), (int)len, MPI_BYTE, st);
    size_t nb = 0;
    for (size_t k = pos.i, o = pos.skip, left = len; left; k++, o = 0) {
        size_t l = pc[k].len - o < left ? pc[k].len - o : left;
        nb += (l + MPI_BLOCK_MAX - 1) / MPI_BLOCK_MAX;
        left -= l;
    }
    int *lens = malloc(nb * sizeof *lens);
    MPI_Aint *disp = malloc(nb * sizeof *disp);
    if (!lens || !disp) {
        free(lens);
        free(disp);
        return H5L_ENOMEM;
    }
    size_t b = 0;
    for (size_t k = pos.i, o0 = pos.skip, left = len; left; k++, o0 = 0) {
        size_t end = pc[k].len - o0 < left ? pc[k].len : o0 + left;
        for (size_t o = o0; o < end; o += MPI_BLOCK_MAX) {
            size_t l = end - o < MPI_BLOCK_MAX ? end - o : MPI_BLOCK_MAX;
            lens[b] = (int)l;
            MPI_Get_address(pc[k].p + o, &disp[b]);
            b++;
        }
        left -= end - o0;
    }
    MPI_Datatype t;
    int mrc = MPI_Type_create_hindexed((int)nb, lens, disp, MPI_BYTE, &t);
    if (mrc == MPI_SUCCESS) {
        mrc = MPI_Type_commit(&t);
        if (mrc == MPI_SUCCESS) mrc = MPI_File_write_at(f->fh, off, MPI_BOTTOM, 1, t, st);
        MPI_Type_free(&t);
    }
    free(lens);
    free(disp);
    return mrc;
}

/* total bytes of the pieces from pos on, at off, every byte checked to
 * have been transferred. A short count is followed by a write of the rest
 * (POSIX allows a short write that a second call completes); a call that
 * transfers nothing ends it with an error naming the file, what was
 * written, where, and the reason (short_reason). */
static int write_pieces(h5l_file_t *f, const char *what, MPI_Offset off, const piece_t *pc, ppos_t pos, uint64_t total)
{
    uint64_t done = 0;
    int err = 0;
    while (done < total) {
        MPI_Status st;
        MPI_Count got = 0;
        errno = 0;
        int mrc = write_from(f, off + (MPI_Offset)done, pc, pos, total - done, &st);
        err = errno;
        if (mrc == H5L_ENOMEM) return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory describing the write", f->path);
        if (mrc != MPI_SUCCESS) {
            char s[MPI_MAX_ERROR_STRING];
            int l = 0;
            MPI_Error_string(mrc, s, &l);
            return h5l_w_fail(f, H5L_EIO, "%s: writing %s (%llu bytes at %lld) failed: %s (%s)", f->path, what,
                        (unsigned long long)total, (long long)off, s, short_reason(f, err));
        }
        if (MPI_Get_elements_x(&st, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED || got <= 0 ||
            (uint64_t)got > total - done)
            break;
        done += (uint64_t)got;
        ppos_advance(pc, &pos, (uint64_t)got);
    }
    if (done != total)
        return h5l_w_fail(f, H5L_EIO, "%s: writing %s (%llu bytes at %lld) failed: %s (%llu bytes written)", f->path, what,
                    (unsigned long long)total, (long long)off, short_reason(f, err), (unsigned long long)done);
    return H5L_OK;
}

/* The checksums of data segments [j0, j1) of this rank in tick `tick`
 * (format.md 4) into sums[0..j1-j0), the bytes read from pos on (pos
 * moves past them). A segment inside one piece is hashed in one call; one
 * that spans pieces (h5l_iput of small pieces) through the stream. */
static void hash_segments(h5l_file_t *f, uint64_t tick, const piece_t *pc, ppos_t *pos, uint64_t j0, uint64_t j1,
                          uint8_t *sums)
{
    uint64_t seg = (uint64_t)1 << f->seglog;
    for (uint64_t j = j0; j < j1; j++) {
        uint64_t len = f->data_bytes - j * seg < seg ? f->data_bytes - j * seg : seg;
        uint64_t sd = h5l_seg_seed(f->seed, tick, (uint32_t)f->rank, j), h;
        if (pc[pos->i].len - pos->skip >= len) {
            h = h5l_hash(pc[pos->i].p + pos->skip, (size_t)len, sd);
            ppos_advance(pc, pos, len);
        } else {
            h5l_hstream_reset(f->hs, sd);
            for (uint64_t left = len; left;) {
                size_t k = pc[pos->i].len - pos->skip < left ? pc[pos->i].len - pos->skip : (size_t)left;
                h5l_hstream_update(f->hs, pc[pos->i].p + pos->skip, k);
                ppos_advance(pc, pos, k);
                left -= k;
            }
            h = h5l_hstream_digest(f->hs);
        }
        h5l_put_le64(sums + (j - j0) * 8, h);
    }
}

/* The pieces from stream byte wt + len on stay; the arena's pending bytes
 * (always its last ones: puts fill it in data order) move to its start,
 * so a tick that writes early keeps reusing the same warm pages. */
static void drop_written(h5l_file_t *f, uint64_t len)
{
    ppos_t pos = {0, 0};
    ppos_advance(f->pieces, &pos, len);
    size_t m = 0;
    uintptr_t a0 = (uintptr_t)f->arena, a1 = a0 + f->arena_used, lo = a1;
    for (size_t i = pos.i; i < f->npieces; i++) {
        piece_t p = f->pieces[i];
        if (i == pos.i) {
            p.p += pos.skip;
            p.len -= pos.skip;
        }
        if (!p.len) continue;
        if (f->arena && (uintptr_t)p.p >= a0 && (uintptr_t)p.p < a1 && (uintptr_t)p.p < lo) lo = (uintptr_t)p.p;
        f->pieces[m++] = p;
    }
    f->npieces = m;
    if (!f->arena) return;
    size_t keep = (size_t)(a1 - lo), shift = (size_t)(lo - a0);
    if (keep && shift) {
        memmove(f->arena, f->arena + shift, keep);
        for (size_t i = 0; i < m; i++)
            if ((uintptr_t)f->pieces[i].p >= lo && (uintptr_t)f->pieces[i].p < a1) f->pieces[i].p -= shift;
    }
    f->arena_used = keep;
}

/* Bytes [wt, end) of this tick's data, from the pieces, to its reserved
 * place (format.md 6), in WRITE_BLOCK steps, each step's segments hashed
 * (into wsums) right before it is written, as the flush does; end is a
 * segment boundary or the end of the data. Returns the bytes written (whole
 * steps); a failed write ends early writing for the tick and loses
 * nothing: the pieces stay, and the flush writes them and reports. */
static uint64_t early_out(h5l_file_t *f, uint64_t end)
{
    uint64_t seg = (uint64_t)1 << f->seglog, len = end - f->wt, tick = f->tick + 1, done = 0;
    if (!len) return 0;
    if (h5l_grow((void **)&f->wsums, &f->cap_wsums, (size_t)((end + seg - 1) >> f->seglog) * 8, 1)) {
        f->early = 0;
        return 0;
    }
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)tick);
    ppos_t hpos = {0, 0}, wpos = {0, 0};
    while (done < len) {
        uint64_t l = len - done < WRITE_BLOCK ? len - done : WRITE_BLOCK, j = (f->wt + done) >> f->seglog;
        hash_segments(f, tick, f->pieces, &hpos, j, j + ((l + seg - 1) >> f->seglog), f->wsums + j * 8);
        if (write_pieces(f, what, (MPI_Offset)(f->res_off + f->res_pre + f->wt + done), f->pieces, wpos, l)) {
            f->early = 0;
            break;
        }
        ppos_advance(f->pieces, &wpos, l);
        done += l;
    }
    return done;
}

/* Early write: the whole segments pending go to the reserved place, and
 * their pieces are dropped. The flush writes the rest (or, if the tick's
 * sizes turn out different, moves these bytes: move_early). */
void h5l_w_write_early(h5l_file_t *f)
{
    uint64_t done = early_out(f, f->data_bytes >> f->seglog << f->seglog);
    if (done) drop_written(f, done);
    f->wt += done;
}

/* At the flush, before it waits for the other ranks: this rank's data
 * fills its reserved place exactly, so its last bytes (the segments
 * pending and the last, partial one) go there now, while other ranks may
 * still be putting. The partial segment's pieces stay (f->tail marks it
 * written): a put after a failed flush extends that segment, and then it
 * is hashed and written again as usual. */
static void write_tail(h5l_file_t *f)
{
    h5l_w_write_early(f);
    if (f->early && f->data_bytes > f->wt && early_out(f, f->data_bytes) == f->data_bytes - f->wt)
        f->tail = f->data_bytes;
}

/* At the flush, when the tick's sizes differ from those its place was
 * reserved for: the len bytes written early at `from` go to the tick's
 * place `to`, read back through a bounce buffer (their checksums do not
 * depend on where they lie). */
static int move_early(h5l_file_t *f, uint64_t tick, uint64_t from, uint64_t to, uint64_t len)
{
    size_t cap = len < WRITE_BLOCK ? (size_t)len : (size_t)WRITE_BLOCK;
    uint8_t *b = malloc(cap);
    if (!b)
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory moving the data of tick %llu", f->path, (unsigned long long)tick);
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)tick);
    int rc = H5L_OK;
    for (uint64_t o = 0; o < len && !rc; o += cap) {
        size_t l = len - o < cap ? (size_t)(len - o) : cap;
        MPI_Status st;
        MPI_Count got = 0;
        if (MPI_File_read_at(f->fh, (MPI_Offset)(from + o), b, (int)l, MPI_BYTE, &st) != MPI_SUCCESS ||
            MPI_Get_elements_x(&st, MPI_BYTE, &got) != MPI_SUCCESS || got != (MPI_Count)l)
            rc = h5l_w_fail(f, H5L_EIO, "%s: reading back %zu bytes of tick %llu at %llu failed", f->path, l,
                      (unsigned long long)tick, (unsigned long long)(from + o));
        else
            rc = write_pieces(f, what, (MPI_Offset)(to + o), &(piece_t){b, l}, (ppos_t){0, 0}, l);
    }
    free(b);
    return rc;
}

/* Rank 0: append one frame to the sidecar and to the in-memory copy (the
 * CLOSE frame; TICK frames go through seal_frame and put_sealed). */
int h5l_w_journal_append(h5l_file_t *f, uint16_t type, const void *payload, size_t len)
{
    h5l_err_t e = {0};
    if (len > H5L_FRAME_MAX)
        return h5l_w_fail(f, H5L_EINVAL, "%s: the definitions of one flush take %zu bytes (at most %u): flush more often",
                    f->path, len, H5L_FRAME_MAX);
    int rc = h5l_journal_append(f->jfd, &f->joff, type, payload, (uint32_t)len, f->seed, f->opts.sync == H5L_SYNC_TICK,
                                f->jpath, &f->jcopy, &e);
    return rc ? h5l_w_fail(f, rc, "%s", e.msg) : H5L_OK;
}

/* Rank 0: encode the TICK frame of payload into f->pend. From here on the
 * tick's frame is fixed: a failed append may leave a prefix of it in the
 * sidecar, which live readers may have read and keep (a torn tail is
 * waited for, not re-read), so every later attempt must write exactly
 * these bytes again — a frame built anew would differ at least in its
 * commit time. */
static int seal_frame(h5l_file_t *f, const void *payload, size_t len)
{
    if (len > H5L_FRAME_MAX)
        return h5l_w_fail(f, H5L_EINVAL, "%s: the definitions of one flush take %zu bytes (at most %u): flush more often",
                    f->path, len, H5L_FRAME_MAX);
    f->pend.len = 0;
    h5l_frame_encode(&f->pend, H5L_REC_TICK, payload, (uint32_t)len, f->seed);
    if (f->pend.oom) {
        h5l_buf_free(&f->pend);
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory building a journal frame", f->path);
    }
    return H5L_OK;
}

/* Rank 0: append the sealed frame at the journal's end: the commit. */
static int put_sealed(h5l_file_t *f, uint64_t tick)
{
    h5l_err_t e = {0};
    int rc = h5l_journal_write(f->jfd, &f->joff, f->pend.p, f->pend.len, f->opts.sync == H5L_SYNC_TICK, f->jpath,
                               &f->jcopy, &e);
    if (rc) return h5l_w_fail(f, rc, "%s (committing tick %llu)", e.msg, (unsigned long long)tick);
    h5l_buf_free(&f->pend);
    return H5L_OK;
}

/* Collective: commit the sealed tick (its bytes were written by the flush
 * that failed to commit it; nothing has written there since). */
static int commit_sealed(h5l_file_t *f)
{
    bstat_t st = {0};
    if (f->rank == 0) {
        st.code = put_sealed(f, f->tick);
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    }
    int rc = h5l_w_bcast_status(f, &st);
    if (!rc) f->sealed = 0;
    return rc;
}

/* Size of the next log extent for a tick of `need` bytes: twice the last
 * (1 MiB first), never less than the tick needs nor more than the slack
 * beyond it (format.md 1): the tick's size when that is over 32 MiB, else
 * an eighth of the extents so far, between 1 and 32 MiB. With 32 MiB
 * alone, every tick over 32 MiB got an extent of its own: a libhdf5
 * allocation on rank 0 and a broadcast every rank waits for, per flush;
 * now such ticks share an extent by two once the extents have grown. The
 * eighth bounds the last extent's unused tail of a small file (a run of
 * 50,000 one-row ticks carried 15 MB of it, 300 bytes a tick of a
 * 500-byte tick) at a few dozen more extents in a file's life. */
static uint64_t next_extent(const h5l_file_t *f, uint64_t need)
{
    uint64_t sz = f->ext_count ? 2 * f->ext_size : EXTENT_FIRST;
    uint64_t eighth = f->ext_total / 8;
    uint64_t slack = need > EXTENT_SLACK    ? need
                     : eighth > EXTENT_SLACK ? EXTENT_SLACK
                     : eighth < EXTENT_FIRST ? EXTENT_FIRST
                                             : eighth;
    if (sz > need + slack) sz = need + slack;
    return sz < need ? need : sz;
}

/* Before a flush's step 1: the open record is encoded and this rank's record
 * block laid out (header placeholder, records, room for the segment
 * checksums, which flush_write fills in as it writes the data, then the
 * header); its padded length is returned in *blen. f->recs.len before the
 * checksums is kept in *rlen so a failed flush can take them off again. */
static int finish_block(h5l_file_t *f, uint64_t tick, uint64_t *blen, size_t *rlen)
{
    if (h5l_buf_reserve(&f->recs, h5l_w_openrec_max(&f->cur))) {
        f->recs.oom = 0;
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory preparing flush %llu", f->path, (unsigned long long)tick);
    }
    h5l_w_openrec_close(f);
    *rlen = f->recs.len;
    uint64_t nseg = (f->data_bytes + ((uint64_t)1 << f->seglog) - 1) >> f->seglog;
    /* the payload: records and checksums; the padding is not part of it */
    uint64_t payload = (uint64_t)(*rlen - H5L_BLOCK_LEN) + 8 * nseg;
    if (payload > H5L_FRAME_MAX)
        return h5l_w_fail(f, H5L_EINVAL,
                    "%s: flush %llu: the record block of rank %d takes %llu bytes (at most %u): flush more often",
                    f->path, (unsigned long long)tick, f->rank, (unsigned long long)payload, H5L_FRAME_MAX);
    if (h5l_buf_reserve(&f->recs, (size_t)nseg * 8 + 8)) {
        f->recs.oom = 0;
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory preparing flush %llu", f->path, (unsigned long long)tick);
    }
    memset(f->recs.p + f->recs.len, 0, (size_t)nseg * 8);
    f->recs.len += (size_t)nseg * 8;
    h5l_buf_pad8(&f->recs);
    h5l_block_t blk = {0, (uint32_t)payload, (uint32_t)f->nrec, f->data_bytes};
    h5l_block_encode(&blk, f->recs.p);
    *blen = f->recs.len;
    return H5L_OK;
}

/* The state of one flush, passed between its steps (h5l_flush). Owned by
 * h5l_flush: flush_free releases it whatever step failed. */
typedef struct flush {
    uint64_t tick;
    size_t nd;       /* dimensions defined when the flush began */
    h5l_buf_t opsb;  /* the tick's definitions, encoded (TICK payload) */
    h5l_op_t *grown; /* DIMLEN ops of the extents this tick grew */
    size_t ngrown;
    uint64_t *want;      /* agreed extent per dimension */
    uint64_t blen;       /* this rank's record block, padded */
    uint64_t pre[2];     /* this rank's place: data bytes, block bytes before it */
    uint64_t tot[3];     /* totals: data bytes, block bytes, records */
    uint64_t need;       /* the tick's bytes in its extent */
    uint64_t doff, moff; /* where the tick's data and record blocks start */
    size_t rlen;         /* where the segment checksums start in f->recs */
    int sealed;          /* built, but the frame append failed */
    int match;           /* every rank's data has the sizes its reserved place was made for */
    int reserve;         /* reserve the next tick's place for this tick's sizes */
    uint64_t res_next;   /* where (0: nowhere) */
} flush_t;

static void flush_free(flush_t *fl)
{
    h5l_buf_free(&fl->opsb);
    free(fl->grown);
    free(fl->want);
}

/* Step 1: h5l_w_agree. One MPI_Allgather of every rank's sizes, definitions
 * hash, failure flag and wanted extents (AGG_N): from it each rank computes
 * its place (the bytes of the ranks before it), the totals, whether every
 * rank made the same definitions and had no local error, and the extents
 * along the dimensions that existed before this flush. One collective, not
 * an MPI_Exscan and an MPI_Allreduce: each is a point where every rank
 * waits for the last one, which costs a scheduler time slice when ranks
 * share cores. It moves size x (AGG_N + dimensions) x 8 bytes to every
 * rank. A local failure (lrc) still takes part, so no rank hangs. */
static int flush_agree(h5l_file_t *f, flush_t *fl, int lrc)
{
    size_t nd = fl->nd;
    for (size_t i = 0; i < f->nops; i++) h5l_op_encode(&fl->opsb, &f->ops[i]);
    fl->want = calloc(nd + 1, sizeof *fl->want);
    fl->grown = calloc(nd + 1, sizeof *fl->grown);
    size_t nold = f->ndims_committed, n = AGG_N + nold;
    uint64_t h = f->opts.check_collective ? h5l_hash(fl->opsb.p, fl->opsb.len, 0) : 0;
    uint64_t *all = f->gath, *me = all + (size_t)f->rank * n; /* room: h5l_w_gath_room */
    me[0] = f->data_bytes;
    me[1] = fl->blen;
    me[2] = f->nrec;
    me[3] = h;
    int mine = fl->opsb.oom || !fl->want || !fl->grown; /* this rank ran out of memory here */
    me[4] = (mine || lrc) ? 1u : 0u;
    me[5] = nd;
    me[6] = f->opts.early_writes ? 0u : 1u;
    me[7] = f->rank == 0 ? f->ahead_off : 0;
    memcpy(me + AGG_N, f->want, nold * sizeof *me);
    MPI_Request rq;
    int mrc = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, (int)n, MPI_UINT64_T, f->comm, &rq);
    if (mrc == MPI_SUCCESS) mrc = h5l_w_coll_wait(&rq);
    if (mrc != MPI_SUCCESS)
        return lrc ? lrc
                   : h5l_w_fail(f, H5L_EMPI, "%s: flush %llu: MPI_Allgather failed", f->path, (unsigned long long)fl->tick);
    int oom = 0, mismatch = 0, same = 1, early_off = 0;
    memset(fl->pre, 0, sizeof fl->pre);
    memset(fl->tot, 0, sizeof fl->tot);
    for (int q = 0; q < f->size; q++) {
        const uint64_t *a = all + (size_t)q * n;
        for (int i = 0; i < 3; i++) fl->tot[i] += a[i];
        f->sz_now[q] = a[0];
        same &= a[0] == f->sz_last[q];
        early_off |= a[6] != 0;
        if (q < f->rank) {
            fl->pre[0] += a[0];
            fl->pre[1] += a[1];
        }
        mismatch |= a[3] != all[3] || a[5] != nd;
        oom |= a[4] != 0;
        if (fl->want)
            for (size_t d = 0; d < nold; d++) fl->want[d] = a[AGG_N + d] > fl->want[d] ? a[AGG_N + d] : fl->want[d];
    }
    if (oom && lrc) return lrc;
    if (oom && mine)
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory starting flush %llu", f->path, (unsigned long long)fl->tick);
    if (oom)
        return h5l_w_fail(f, H5L_ENOMEM, "%s: flush %llu failed on another rank (out of memory or too many records)",
                    f->path, (unsigned long long)fl->tick);
    if (mismatch)
        return h5l_w_fail(f, H5L_EMISMATCH,
                    "%s: ranks made different definitions (def_dim/def_var/put_att) before flush %llu", f->path,
                    (unsigned long long)fl->tick);
    /* Early writes: the reserved place fits when every rank's size is the
     * one it was reserved for; the next tick gets a place when this one's
     * sizes repeat the last data tick's (or this is the first), so a
     * writer whose sizes vary stops reserving after one miss. */
    f->ahead_off = all[7]; /* rank 0's */
    same &= f->sz_known;
    fl->match = f->res_off && same;
    fl->reserve = fl->tot[0] && !early_off && (!f->sz_known || same);
    return H5L_OK;
}

/* Step 2: grow. Dimensions defined in this flush get their extents in a
 * second, rare MPI_Allreduce (the ranks h5l_w_agree on nd now, so the counts
 * match); every unlimited dimension that grew becomes a DIMLEN op of the
 * tick. */
static int flush_grow(h5l_file_t *f, flush_t *fl)
{
    size_t nd = fl->nd, nold = f->ndims_committed;
    int new_unlim = 0;
    for (size_t d = nold; d < nd; d++) new_unlim |= f->schema.dims[d].unlimited;
    if (new_unlim) {
        memcpy(fl->want + nold, f->want + nold, (nd - nold) * sizeof *fl->want);
        if (MPI_Allreduce(MPI_IN_PLACE, fl->want + nold, (int)(nd - nold), MPI_UINT64_T, MPI_MAX, f->comm) !=
            MPI_SUCCESS)
            return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
    }
    for (size_t d = 0; d < nd; d++) {
        if (f->schema.dims[d].unlimited && fl->want[d] > h5l_schema_dimlen_now(&f->schema, (uint32_t)d)) {
            fl->grown[fl->ngrown++] = (h5l_op_t){.kind = H5L_OP_DIMLEN, .id = (uint32_t)d, .len = fl->want[d]};
            h5l_op_encode(&fl->opsb, &fl->grown[fl->ngrown - 1]);
        }
    }
    return H5L_OK;
}

/* Step 3: place the tick in the newest log extent. Every rank decides the
 * same from the same totals, and only when it does not fit does rank 0
 * allocate the next extent (libhdf5) and broadcast where it is. */
static int flush_place(h5l_file_t *f, flush_t *fl)
{
    uint64_t dspace = (fl->tot[0] + 7) & ~(uint64_t)7, dneed = fl->match ? 0 : dspace;
    /* the tick's data (unless it lies in its reserved place already), its
     * record blocks, and the next tick's reserved place */
    fl->need = dneed + fl->tot[1] + (fl->reserve ? dspace : 0);
    if (!f->ext_count || f->ext_size - f->ext_used < fl->need) {
        bstat_t st = {0};
        uint64_t size = f->ahead_size;
        st.v[0] = f->ahead_off; /* made ahead (make_ahead): no libhdf5 call, no broadcast */
        if (!f->ext_count || !f->ahead_off || f->ahead_size < fl->need) {
            size = next_extent(f, fl->need); /* a too small one's name is reused */
            if (f->rank == 0) {
                h5l_err_t e = {0};
                char name[64];
                snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
                st.code = h5l_anchor_alloc(f->anc, name, size, &st.v[0], &e);
                if (st.code) snprintf(st.msg, sizeof st.msg, "%s", e.msg);
            }
            f->ahead_off = f->ahead_size = 0;
            int rc = h5l_w_bcast_status(f, &st);
            if (rc) return rc;
        }
        f->ahead_off = f->ahead_size = 0;
        f->ext_off = st.v[0];
        f->ext_size = size;
        f->ext_used = 0;
        f->ext_count++;
        f->ext_total += size;
    }
    uint64_t at = f->ext_off + f->ext_used;
    fl->doff = !fl->tot[0] ? 0 : fl->match ? f->res_off : at;
    fl->moff = at + dneed;
    fl->res_next = fl->reserve ? fl->moff + fl->tot[1] : 0;
    return H5L_OK;
}

/* Rank 0, a file continued by h5l_open: the anchors of the objects it
 * had (h5l_anchor_rebuild), made once, when first needed. */
int h5l_w_ensure_anchors(h5l_file_t *f)
{
    if (!f->anc_lazy || !f->anc) return H5L_OK;
    h5l_err_t e = {0};
    int rc = h5l_anchor_rebuild(f->anc, &f->schema, f->anc_lazy, &e);
    if (rc) return h5l_w_fail(f, rc, "%s: making the anchors of its objects: %s", f->path, e.msg);
    f->anc_lazy = 0;
    return H5L_OK;
}

/* Step 4: write. Rank 0 mirrors the tick's definitions into the HDF5 file
 * (its failure stops the commit); every rank writes its data and then its
 * record block, independently, every byte checked. The data goes in
 * blocks of WRITE_BLOCK bytes, each hashed (its segment checksums, into
 * the record block) right before it is written: the write then copies
 * bytes still in the last-level cache, and a rank hashes while another
 * one's write holds the file (local file systems serialise the writes to
 * one file). Blocks are large because every write takes that lock: with
 * 512 KiB blocks, ranks waiting for it spun on it (rwsem_spin_on_owner)
 * for 35% of the flush's CPU time with 4 ranks on 2 cores, against none
 * with 32 MiB. Returns this rank's code (not yet agreed: flush_commit
 * gathers them). */
_Static_assert(WRITE_BLOCK % ((uint64_t)1 << H5L_SEGLOG_DEFAULT) == 0, "a write block is whole segments");
static int flush_write(h5l_file_t *f, flush_t *fl)
{
    int wrc = H5L_OK;
    if (f->rank == 0 && f->nops && f->anc_lazy) /* a continued file's anchors: at its first definition */
        wrc = h5l_w_ensure_anchors(f);
    if (f->rank == 0)
        for (size_t i = 0; i < f->nops && !wrc; i++) {
            h5l_err_t e = {0};
            wrc = h5l_anchor_op(f->anc, &f->schema, fl->tick, &f->ops[i], &e);
            if (wrc) h5l_w_fail(f, wrc, "%s", e.msg);
        }
    char what[64];
    snprintf(what, sizeof what, "the data of tick %llu", (unsigned long long)fl->tick);
    uint8_t *sums = f->recs.p + fl->rlen;
    uint64_t dst = fl->doff + fl->pre[0];
    /* bytes written early (h5l_w_write_early) are in place unless the sizes
     * changed; the pieces hold the rest, from f->wt on */
    if (f->wt) {
        memcpy(sums, f->wsums, (size_t)(f->wt >> f->seglog) * 8);
        if (!wrc && dst != f->res_off + f->res_pre) wrc = move_early(f, fl->tick, f->res_off + f->res_pre, dst, f->wt);
    }
    uint64_t todo = f->data_bytes;
    if (f->tail == f->data_bytes && f->tail > f->wt && dst == f->res_off + f->res_pre) {
        todo = f->wt; /* the last segment is in place too (write_tail) */
        memcpy(sums + (f->wt >> f->seglog) * 8, f->wsums + (f->wt >> f->seglog) * 8, 8);
    }
    ppos_t hpos = {0, 0}, wpos = {0, 0};
    for (uint64_t o = f->wt; o < todo && !wrc; o += WRITE_BLOCK) {
        uint64_t len = f->data_bytes - o < WRITE_BLOCK ? f->data_bytes - o : WRITE_BLOCK;
        uint64_t j0 = o >> f->seglog, j1 = (o + len + ((uint64_t)1 << f->seglog) - 1) >> f->seglog;
        hash_segments(f, fl->tick, f->pieces, &hpos, j0, j1, sums + j0 * 8);
        wrc = write_pieces(f, what, (MPI_Offset)(dst + o), f->pieces, wpos, len);
        ppos_advance(f->pieces, &wpos, len);
    }
    if (!wrc) {
        h5l_block_t blk;
        h5l_block_decode(f->recs.p, &blk);
        blk.checksum = h5l_block_sum(f->recs.p, f->seed, fl->tick, (uint32_t)f->rank);
        h5l_block_encode(&blk, f->recs.p);
        piece_t b = {f->recs.p, (size_t)fl->blen};
        snprintf(what, sizeof what, "the record block of tick %llu", (unsigned long long)fl->tick);
        wrc = write_pieces(f, what, (MPI_Offset)(fl->moff + fl->pre[1]), &b, (ppos_t){0, 0}, fl->blen);
    }
    if (!wrc && f->opts.sync == H5L_SYNC_TICK && MPI_File_sync(f->fh) != MPI_SUCCESS)
        wrc = h5l_w_fail(f, H5L_EIO, "%s: MPI_File_sync after tick %llu failed", f->path, (unsigned long long)fl->tick);
    return wrc;
}

/* Step 5: commit. Every rank's write has returned once rank 0 has all the
 * statuses: only then may rank 0 seal the TICK frame and append it; the
 * broadcast carries the verdict, with the message of the rank that failed.
 * If the append fails the tick stays sealed (seal_frame): its bytes are
 * all written, so every rank moves on as if it were published and the next
 * flush or the close appends the same frame again (fl->sealed). */
static int flush_commit(h5l_file_t *f, flush_t *fl, int wrc)
{
    int worst = 0, who = 0;
    int rc = h5l_w_reduce_status(f, wrc, &worst, &who);
    if (rc) return rc;
    bstat_t st = {0};
    if (f->rank == 0 && worst) {
        st.code = worst;
        st.from = who;
        if (who == 0) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
    } else if (f->rank == 0) {
#ifdef H5L_TEST_HOOKS
        /* test hook, in the test build only (libh5log_test.a): die with
         * every byte of this tick written but not committed, to prove
         * readers never see it */
        const char *k = getenv("H5L_TEST_KILL_BEFORE_COMMIT");
        if (k && strtoull(k, NULL, 10) == fl->tick) raise(SIGKILL);
#endif
        h5l_tick_info_t ti = {fl->tick,   h5l_w_now_ns(), (uint32_t)f->size, fl->doff,
                              fl->tot[0], fl->moff, fl->tot[1],        fl->tot[2]};
        h5l_buf_t pl = {0};
        h5l_tick_encode(&pl, &ti, (uint32_t)(f->nops + fl->ngrown));
        h5l_buf_put(&pl, fl->opsb.p, fl->opsb.len);
        if (pl.oom || fl->opsb.oom)
            st.code =
                h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory building tick %llu", f->path, (unsigned long long)fl->tick);
        else
            st.code = seal_frame(f, pl.p, pl.len);
        if (!st.code) /* a checkpoint due at this tick follows its frame, in the same write */
            h5l_ckpt_w_tick(f->ck, &ti, (uint32_t)(f->nops + fl->ngrown), pl.p + H5L_TICK_LEN, pl.len - H5L_TICK_LEN,
                            f->joff, &f->schema, &f->pend);
        if (!st.code) {
            st.v[1] = 1; /* sealed: from now on this tick is this frame */
            st.code = put_sealed(f, fl->tick);
        }
        if (st.code) snprintf(st.msg, sizeof st.msg, "%s", f->errmsg);
        h5l_buf_free(&pl);
    }
    rc = h5l_w_bcast_status(f, &st);
    fl->sealed = st.v[1] && st.code;
    return rc;
}

/* Step 6: publish. The tick is committed (or sealed): the pending state
 * becomes history and the buffers start empty for the next tick. */
static void flush_publish(h5l_file_t *f, flush_t *fl)
{
    for (size_t i = 0; i < fl->ngrown; i++) h5l_schema_apply(&f->schema, fl->tick, &fl->grown[i], NULL);
    for (size_t i = 0; i < f->nops; i++) h5l_op_clear(&f->ops[i]);
    f->nops = 0;
    f->npieces = 0;
    f->recs.len = H5L_BLOCK_LEN;
    f->res_off = fl->res_next;
    f->res_pre = fl->pre[0];
    f->res_len = f->data_bytes;
    f->early = f->res_off && f->res_len;
    f->wt = f->tail = 0;
    if (fl->tot[0]) { /* the sizes the next tick is compared with */
        uint64_t *t = f->sz_last;
        f->sz_last = f->sz_now;
        f->sz_now = t;
        f->sz_known = 1;
    }
    f->nrec = f->data_bytes = f->nputs = 0;
    f->arena_used = 0;
    f->ext_used += fl->need;
    /* a next tick like this one would not fit: make the next extent
     * ahead (make_ahead), for ticks large enough to allocate often */
    if (!f->ahead_size && fl->need >= AHEAD_MIN && f->ext_size - f->ext_used < fl->need)
        f->ahead_size = next_extent(f, fl->need);
    if (fl->nd) memset(f->want, 0, fl->nd * sizeof *f->want);
    f->ndims_committed = fl->nd;
    f->tick = fl->tick;
    f->sealed = fl->sealed;
}

/* Rank 0, after a flush: make the extent publish asked for. Every rank
 * waits for an extent made in a flush's place step (libhdf5 on rank 0:
 * 4-6 ms with 1000 variables in the file, and a broadcast), with the file
 * idle; made here, rank 0 does it while the other ranks go on with their
 * puts and early writes. The next flush_agree carries the offset to every
 * rank; a failure only leaves the extent to be made when needed. */
static void make_ahead(h5l_file_t *f)
{
    if (f->rank != 0 || !f->ahead_size || f->ahead_off) return;
    h5l_err_t e = {0};
    char name[64];
    snprintf(name, sizeof name, "log.%llu", (unsigned long long)(f->ext_count + 1));
    if (h5l_anchor_alloc(f->anc, name, f->ahead_size, &f->ahead_off, &e)) f->ahead_off = 0;
}

/* One flush is one tick, in the six steps above; each is collective where
 * it says so, and a failure in any leaves the buffered puts and records as
 * they were, so the caller may retry the flush to the same place. */
int h5l_flush(h5l_file_t *f)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    if (f->sealed) {
        /* a tick whose commit failed goes first, exactly as it was built;
         * then this flush publishes what was put since, if anything was */
        if ((rc = commit_sealed(f))) return rc;
        uint64_t more = f->nops + f->nputs;
        if (MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_UINT64_T, MPI_MAX, f->comm) != MPI_SUCCESS)
            return h5l_w_fail(f, H5L_EMPI, "%s: MPI_Allreduce failed", f->path);
        if (!more) return H5L_OK;
    }
    /* this rank's data fills its reserved place exactly: its last bytes go
     * there before the flush waits for the other ranks (if their sizes
     * changed, flush_write moves them with the rest) */
    if (f->early && f->data_bytes == f->res_len && f->tail != f->data_bytes) write_tail(f);
    flush_t fl = {.tick = f->tick + 1, .nd = f->schema.ndims};
    size_t rlen = f->recs.len;
    int lrc = finish_block(f, fl.tick, &fl.blen, &rlen); /* a local failure still takes part in step 1 */
    fl.rlen = rlen;
    if (!(rc = flush_agree(f, &fl, lrc)) && !(rc = flush_grow(f, &fl)) && !(rc = flush_place(f, &fl)))
        rc = flush_commit(f, &fl, flush_write(f, &fl));
    if (!rc || fl.sealed) { /* sealed: published, and the append's error returned */
        flush_publish(f, &fl);
        rlen = f->recs.len;
        make_ahead(f);
    }
    f->recs.len = rlen; /* a failed flush leaves the records as they were, for a retry */
    flush_free(&fl);
    return rc;
}
