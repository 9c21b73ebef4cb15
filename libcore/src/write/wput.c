/* wput.c — h5l_put, h5l_iput, h5l_put_conv: data into the rank's arena (or
 * the caller's pointer kept) and the open record grown (docs/format.md 6);
 * with early writes, whole segments written at the tick's reserved place
 * while the puts go on. */
#include "wint.h"

/* Bytes the open record may take once encoded (every varint at most 10). */
size_t h5l_w_openrec_max(const openrec_t *r) { return r->varid < 0 ? 0 : 20 + (size_t)r->nboxes * 2 * r->ndims * 10; }

/* Encode the open record into f->recs (room reserved by the caller). */
void h5l_w_openrec_close(h5l_file_t *f)
{
    openrec_t *r = &f->cur;
    if (r->varid < 0) return;
    h5l_buf_varint(&f->recs, (uint64_t)r->varid);
    h5l_buf_varint(&f->recs, r->nboxes);
    for (size_t i = 0; i < (size_t)r->nboxes * 2 * r->ndims; i++) h5l_buf_varint(&f->recs, r->boxes[i]);
    f->nrec++;
    r->varid = -1;
    r->nboxes = 0;
}

/* Can box (s, c) follow the last box of the open record as one box? Yes
 * when it extends that box along one dimension k: dimensions before k have
 * count 1 in both and the same start, dimensions after k are equal, and it
 * starts where the last box ends along k — then the two boxes' elements in
 * row-major order are the two puts' bytes one after the other. Returns k,
 * or -1. */
static int merge_dim(const openrec_t *r, const uint64_t *s, const uint64_t *c)
{
    uint32_t nd = r->ndims;
    if (nd == 0 || r->nboxes == 0) return -1;
    const uint64_t *ls = r->boxes + (size_t)(r->nboxes - 1) * 2 * nd, *lc = ls + nd;
    for (uint32_t k = 0; k < nd; k++) {
        if (s[k] == ls[k] + lc[k] && lc[k] <= UINT64_MAX - c[k]) {
            uint32_t d = k + 1;
            while (d < nd && s[d] == ls[d] && c[d] == lc[d]) d++;
            if (d == nd) return (int)k;
        }
        if (lc[k] != 1 || c[k] != 1 || s[k] != ls[k]) return -1;
    }
    return -1;
}


/* After an early write that took the caller's buffer of h5l_put directly:
 * what of it is still pending (less than a segment, or all of it if the
 * write failed) is copied into the arena, since the caller may reuse its
 * buffer once h5l_put returns. Only the last piece can be from it (a
 * direct put never merges with the piece before it). The room was
 * checked before the put. */
static void keep_rest(h5l_file_t *f, const uint8_t *buf, size_t bytes)
{
    if (!f->npieces) return;
    piece_t *p = &f->pieces[f->npieces - 1];
    if ((uintptr_t)p->p < (uintptr_t)buf || (uintptr_t)p->p >= (uintptr_t)buf + bytes) return;
    memcpy(f->arena + f->arena_used, p->p, p->len);
    p->p = f->arena + f->arena_used;
    f->arena_used += p->len;
}

/* A put that grows an unlimited dimension may not make a variable over it
 * 2^63 bytes or more: no HDF5 dataset can hold that, and readers refuse
 * such a variable (canon.c). Refused here, where the caller can still do
 * something about it; what other ranks grow is only known at the flush,
 * and readers' own check catches that. Walks the variables only when the
 * put grows a dimension past what this tick already grew it to. */
static int check_growth(h5l_file_t *f, const h5l_obj_t *o, const uint64_t *start, const uint64_t *count)
{
    const h5l_schema_t *s = &f->schema;
    uint64_t grow[H5L_MAX_DIMS];
    int any = 0;
    for (uint32_t d = 0; d < o->ndims; d++) {
        uint32_t id = o->dimids[d];
        uint64_t now = h5l_schema_dimlen_now(s, id), want = f->want[id] > now ? f->want[id] : now;
        grow[d] = s->dims[id].unlimited && start[d] + count[d] > want ? start[d] + count[d] : 0;
        any |= grow[d] != 0;
    }
    if (!any) return H5L_OK;
    for (size_t i = 1; i < s->nobjs; i++) {
        const h5l_obj_t *v = &s->objs[i];
        if (v->kind != H5L_OBJ_VAR) continue;
        uint64_t len[H5L_MAX_DIMS], bytes = v->type.size;
        int zero = 0;
        for (uint32_t d = 0; d < v->ndims; d++) {
            uint32_t id = v->dimids[d];
            uint64_t now = h5l_schema_dimlen_now(s, id);
            len[d] = f->want[id] > now ? f->want[id] : now;
            for (uint32_t e = 0; e < o->ndims; e++)
                if (o->dimids[e] == id && grow[e] > len[d]) len[d] = grow[e];
            zero |= len[d] == 0;
        }
        for (uint32_t d = 0; !zero && d < v->ndims; d++) {
            if (bytes > (uint64_t)INT64_MAX / len[d])
                return h5l_w_fail(f, H5L_ERANGE,
                            "%s: h5l_put '%s': dimension '%s' would be %llu long, making '%s' 2^63 bytes or more "
                            "(no HDF5 dataset holds that)",
                            f->path, o->path, s->dims[v->dimids[d]].name, (unsigned long long)len[d], v->path);
            bytes *= len[d];
        }
    }
    return H5L_OK;
}

/* Puts of a chunked variable that hold whole chunks are laid out chunk
 * by chunk: one box per chunk (the put's part of it), each box's bytes
 * row-major in itself, copied by one walk of the caller's buffer
 * (h5l_box_split). A chunk a rank wrote whole is then one contiguous run
 * of the log, which the finalizer keeps in place and the daemon serves
 * straight from the log (a [256,256,256] float variable in [64,64,64]
 * chunks written as bands by 2 ranks: the close copied 64 MiB, 60 ms; now
 * nothing). Only when whole chunks (inside the variable's shape) are at
 * least half of the put's bytes, at most SPLIT_CELLS chunks, at least
 * SPLIT_MIN bytes each on average: parts of chunks gain nothing from it
 * (a z-plane chunk of x-slabs is copied at close either way, and cutting
 * a band into planes of one element per row cost the put more than the
 * finalizer's tiles), and small ones cost an index entry each. */
#define SPLIT_MIN ((uint64_t)16 << 10)
#define SPLIT_CELLS 4096

static uint64_t split_cells(const h5l_file_t *f, const h5l_obj_t *o, const uint64_t *start, const uint64_t *count,
                            size_t bytes)
{
    if (!o->chunked || o->ndims == 0) return 0;
    uint64_t n = 1, whole = o->type.size;
    for (uint32_t d = 0; d < o->ndims; d++) {
        uint64_t ch = o->chunk[d], e = start[d] + count[d], len = h5l_schema_dimlen_now(&f->schema, o->dimids[d]);
        if (f->schema.dims[o->dimids[d]].unlimited && f->want[o->dimids[d]] > len) len = f->want[o->dimids[d]];
        if (e > len) len = e; /* (a put growing an unlimited dimension) */
        n *= (e - 1) / ch - start[d] / ch + 1;
        if (n > SPLIT_CELLS) return 0;
        /* chunks the put holds whole, and inside the shape (an edge chunk is
         * never in place: its padding is not in the log) */
        uint64_t lo = (start[d] + ch - 1) / ch, hi = e / ch, in = len / ch;
        if (hi > in) hi = in;
        whole *= hi > lo ? (hi - lo) * ch : 0;
    }
    return n >= 2 && bytes / n >= SPLIT_MIN && 2 * whole >= bytes ? n : 0;
}

/* Add box (s, c) of varid to the open record: grown into its last box,
 * or a new box (a new record when the open one is another variable's or
 * full). Room for it and for closing records is reserved by the caller. */
static void rec_add_box(h5l_file_t *f, int varid, uint32_t nd, const uint64_t *s, const uint64_t *c)
{
    openrec_t *r = &f->cur;
    int k = r->varid == varid ? merge_dim(r, s, c) : -1;
    if (k >= 0) {
        r->boxes[(size_t)(r->nboxes - 1) * 2 * nd + nd + (size_t)k] += c[k];
        return;
    }
    if (r->varid != varid || r->nboxes >= H5L_REC_MAXBOXES || nd == 0) { /* a scalar's record has one box */
        h5l_w_openrec_close(f);
        r->varid = varid;
        r->ndims = nd;
    }
    uint64_t *b = r->boxes + (size_t)r->nboxes * 2 * nd;
    for (uint32_t d = 0; d < nd; d++) {
        b[d] = s[d];
        b[nd + d] = c[d];
    }
    r->nboxes++;
}

/* The put's chunks in row-major order: cell i's box in (s, c). */
static void split_box(const h5l_obj_t *o, const uint64_t *start, const uint64_t *count, uint64_t i, uint64_t *s,
                      uint64_t *c)
{
    for (int d = (int)o->ndims - 1; d >= 0; d--) {
        uint64_t g0 = start[d] / o->chunk[d], gn = (start[d] + count[d] - 1) / o->chunk[d] - g0 + 1;
        uint64_t cd = g0 + i % gn, lo = cd * o->chunk[d], hi = lo + o->chunk[d], e = start[d] + count[d];
        i /= gn;
        s[d] = start[d] > lo ? start[d] : lo;
        c[d] = (e < hi ? e : hi) - s[d];
    }
}

static int put_common(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf, int copy)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    const h5l_obj_t *o = h5l_w_get_var(f, varid);
    if (!o) return h5l_w_fail(f, H5L_EBADID, "%s: h5l_put: no variable with id %d", f->path, varid);
    uint32_t nd = o->ndims;
    if (nd && (!start || !count)) return h5l_w_fail(f, H5L_EINVAL, "%s: h5l_put '%s': NULL start or count", f->path, o->path);
    uint64_t nelem = 1;
    int empty = 0;
    /* every dimension is checked, even when another's count is 0: like
     * netCDF, a start past a fixed length is an error whatever the count */
    for (uint32_t d = 0; d < nd; d++) {
        const h5l_dim_t *dim = &f->schema.dims[o->dimids[d]];
        uint64_t len = h5l_schema_dimlen_now(&f->schema, o->dimids[d]);
        if (count[d] > UINT64_MAX - start[d] || (!dim->unlimited && start[d] + count[d] > len))
            return h5l_w_fail(f, H5L_ERANGE,
                        "%s: h5l_put '%s': dimension %u ('%s'): start %llu + count %llu exceeds length %llu", f->path,
                        o->path, d, dim->name, (unsigned long long)start[d], (unsigned long long)count[d],
                        (unsigned long long)len);
        if (count[d] == 0)
            empty = 1;
        else if (nelem > UINT64_MAX / count[d])
            return h5l_w_fail(f, H5L_ERANGE, "%s: h5l_put '%s': box too large", f->path, o->path);
        else
            nelem *= count[d];
    }
    if (empty) return H5L_OK; /* nothing to write */
    if (nelem > SIZE_MAX / o->type.size)
        return h5l_w_fail(f, H5L_ERANGE, "%s: h5l_put '%s': box too large", f->path, o->path);
    if ((rc = check_growth(f, o, start, count))) return rc;
    size_t bytes = (size_t)nelem * o->type.size;
    if (!buf) return h5l_w_fail(f, H5L_EINVAL, "%s: h5l_put '%s': NULL buffer", f->path, o->path);
    if (copy && bytes > f->arena_cap - f->arena_used)
        return h5l_w_fail(f, H5L_ENOBUFS,
                    "%s: h5l_put '%s': %zu bytes do not fit the write buffer (%zu of %zu used): call h5l_flush",
                    f->path, o->path, bytes, f->arena_used, f->arena_cap);
    /* a put that brings EARLY_STEP bytes pending while this tick writes
     * early goes out now from the caller's buffer, uncopied (keep_rest) */
    int direct = copy && f->early && f->data_bytes + bytes <= f->res_len && f->data_bytes + bytes - f->wt >= EARLY_STEP;
    uint64_t ncell = copy && !direct ? split_cells(f, o, start, count, bytes) : 0;
    /* reserve everything first: after this point nothing can h5l_w_fail (a
     * split put may close a record per H5L_REC_MAXBOXES boxes) */
    size_t newbox = ncell ? (size_t)ncell : 1, recmax = 20 + (size_t)H5L_REC_MAXBOXES * 2 * nd * 10;
    size_t bdims = nd > f->cur.ndims ? nd : f->cur.ndims;
    if (h5l_buf_reserve(&f->recs, h5l_w_openrec_max(&f->cur) + (ncell ? (newbox / H5L_REC_MAXBOXES + 1) * recmax : 0)) ||
        h5l_grow((void **)&f->pieces, &f->cap_pieces, f->npieces + 1, sizeof *f->pieces) ||
        h5l_grow((void **)&f->cur.boxes, &f->cur.cap,
                 ((size_t)f->cur.nboxes + newbox) * 2 * bdims + 2 + (ncell ? (size_t)H5L_REC_MAXBOXES * 2 * nd : 0),
                 sizeof *f->cur.boxes) ||
        (ncell && h5l_grow((void **)&f->cells, &f->cap_cells, (size_t)ncell, sizeof *f->cells))) {
        f->recs.oom = 0;
        return h5l_w_fail(f, H5L_ENOMEM, "%s: out of memory buffering a write", f->path);
    }
    const uint8_t *src = buf;
    if (ncell) { /* chunk by chunk: each chunk's part packed, in chunk order */
        uint8_t *at = f->arena + f->arena_used;
        for (uint64_t i = 0; i < ncell; i++) {
            uint64_t s[H5L_MAX_DIMS], c[H5L_MAX_DIMS];
            split_box(o, start, count, i, s, c);
            f->cells[i] = at;
            at += h5l_box_nelem(nd, c) * o->type.size;
        }
        h5l_box_split(nd, o->type.size, start, count, buf, o->chunk, f->cells);
        src = f->arena + f->arena_used;
        f->arena_used += bytes;
    } else if (copy && !direct) {
        memcpy(f->arena + f->arena_used, buf, bytes);
        src = f->arena + f->arena_used;
        f->arena_used += bytes;
    }
    piece_t *last = f->npieces ? &f->pieces[f->npieces - 1] : NULL;
    if (!direct && last && last->p + last->len == src && last->len + bytes >= last->len)
        last->len += bytes;
    else
        f->pieces[f->npieces++] = (piece_t){src, bytes};
    /* the record: grow the open one's last box, add a box to it, or start
     * a new one (format.md 6) — a box per chunk for a split put */
    if (ncell) {
        for (uint64_t i = 0; i < ncell; i++) {
            uint64_t s[H5L_MAX_DIMS], c[H5L_MAX_DIMS];
            split_box(o, start, count, i, s, c);
            rec_add_box(f, varid, nd, s, c);
        }
    } else {
        rec_add_box(f, varid, nd, start, count);
    }
    f->nputs++;
    for (uint32_t d = 0; d < nd; d++) {
        uint32_t id = o->dimids[d];
        if (f->schema.dims[id].unlimited && start[d] + count[d] > f->want[id]) f->want[id] = start[d] + count[d];
    }
    f->data_bytes += bytes;
    if (f->early) {
        if (f->data_bytes > f->res_len)
            f->early = 0; /* more than its place holds: the tick goes elsewhere (flush_place) */
        else if (f->data_bytes - f->wt >= EARLY_STEP)
            h5l_w_write_early(f);
    }
    if (direct) keep_rest(f, buf, bytes);
    return H5L_OK;
}

int h5l_put(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf)
{
    return put_common(f, varid, start, count, buf, 1);
}

int h5l_iput(h5l_file_t *f, int varid, const uint64_t *start, const uint64_t *count, const void *buf)
{
    return put_common(f, varid, start, count, buf, 0);
}

int h5l_put_conv(h5l_file_t *f, int varid, hid_t memtype, const uint64_t *start, const uint64_t *count, const void *buf)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    const h5l_obj_t *o = h5l_w_get_var(f, varid);
    if (!o) return h5l_w_fail(f, H5L_EBADID, "%s: h5l_put_conv: no variable with id %d", f->path, varid);
    uint64_t n = o->ndims && count ? h5l_box_nelem(o->ndims, count) : 1;
    size_t ms = H5Tget_size(memtype);
    H5T_class_t mc = H5Tget_class(memtype);
    if (ms == 0 || (mc != H5T_INTEGER && mc != H5T_FLOAT))
        return h5l_w_fail(f, H5L_ETYPE, "%s: h5l_put_conv '%s': memory type is not numeric", f->path, o->path);
    size_t es = ms > o->type.size ? ms : o->type.size;
    if (n == 0) return H5L_OK;
    if (n > SIZE_MAX / es) return h5l_w_fail(f, H5L_ERANGE, "%s: h5l_put_conv '%s': box too large", f->path, o->path);
    uint8_t *tmp = malloc((size_t)n * es);
    hid_t ft = h5l_type_to_hid(o->type, 0);
    if (!tmp || ft < 0) {
        free(tmp);
        if (ft >= 0) H5Tclose(ft);
        return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    }
    memcpy(tmp, buf, (size_t)n * ms);
    if (H5Tconvert(memtype, ft, (size_t)n, tmp, NULL, H5P_DEFAULT) < 0)
        rc = h5l_w_fail(f, H5L_ETYPE, "%s: h5l_put_conv '%s': libhdf5 cannot convert to the variable's type", f->path,
                  o->path);
    else
        rc = h5l_put(f, varid, start, count, tmp);
    H5Tclose(ft);
    free(tmp);
    return rc;
}
