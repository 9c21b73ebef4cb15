/* fcopy.c — finalizing's copies (h5l_final_copy): the tiles dealt to this
 * process read from the log once through the transposition engine and
 * written to their chunks, whole chunks in one write, cut tiles' parts a
 * cache line apart in one pwritev (see final.c for the tiles). */
#include "finint.h"

/* ------------------------------------------------------------------ */
/* copying (every process)                                             */

typedef struct cctx {
    h5l_final_t *p;
    h5l_reader_t *r;
    int fd;
    uint64_t lo, hi, at; /* this process's share of the bytes; where the walk is */
    uint8_t *tile, *out;
    size_t tcap, ocap;
    /* the chunks a tile meets (grid g0 + [0, gn) per dimension): each
     * copied one's part in out, or NULL */
    uint8_t **part;
    size_t pcap;
    h5l_err_t *err;
    struct iovec iov[WRITE_IOV]; /* one write's pieces */
} cctx_t;

int h5l_fin_grow_buf(uint8_t **b, size_t *cap, size_t need, h5l_err_t *err, const char *path)
{
    if (*cap >= need) return H5L_OK;
    uint8_t *n = realloc(*b, need);
    if (!n) return h5l_err_set(err, H5L_ENOMEM, "%s: finalizing: out of memory (%zu bytes)", path, need);
    *b = n;
    *cap = need;
    return H5L_OK;
}

/* The ordinal of chunk blk of v, or UINT64_MAX if it holds no data. */
static uint64_t ord_of(const fvar_t *v, uint64_t blk)
{
    uint64_t lo = 0, hi = v->n;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        if (v->blks[mid] < blk)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n && v->blks[lo] == blk ? lo : UINT64_MAX;
}

static int pwrite_at(cctx_t *c, const uint8_t *buf, uint64_t n, uint64_t off)
{
    return h5l_fd_write(c->fd, buf, (size_t)n, off, c->p->path, c->err);
}

/* One chunk alone (a sparse variable), assembled in c->tile: written
 * whole, an edge chunk padded with zeros. */
static int copy_chunk(cctx_t *c, const fvar_t *v, const tile_t *tl)
{
    uint64_t c0[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < v->nd; d++) c0[d] = tl->start[d] / v->chunk[d];
    uint64_t o = ord_of(v, h5l_fin_coord_blk(v, c0));
    if (o == UINT64_MAX || !v->copy[o]) return H5L_OK;
    const uint8_t *src = c->tile;
    if (memcmp(tl->count, v->chunk, v->nd * sizeof *v->chunk) != 0) {
        int rc = h5l_fin_grow_buf(&c->out, &c->ocap, (size_t)v->S, c->err, c->p->path);
        if (rc) return rc;
        memset(c->out, 0, (size_t)v->S);
        h5l_box_copy(v->nd, v->es, tl->start, tl->count, tl->start, tl->count, c->tile, tl->start, v->chunk, c->out);
        src = c->out;
    }
    return pwrite_at(c, src, v->S, v->addr[o]);
}

/* The part of chunk c (coordinates) a tile meets: its origin o and
 * extent P (the tile's range in dimensions up to t, the whole chunk
 * after, padding included). */
static void part_of(const fvar_t *v, const tile_t *tl, const uint64_t *c, uint64_t *o, uint64_t *P)
{
    for (uint32_t d = 0; d < v->nd; d++) {
        uint64_t cs = c[d] * v->chunk[d];
        if (d <= tl->t) {
            uint64_t te = tl->start[d] + tl->count[d], ce = cs + v->chunk[d];
            o[d] = tl->start[d] > cs ? tl->start[d] : cs;
            P[d] = (te < ce ? te : ce) - o[d];
        } else {
            o[d] = cs;
            P[d] = v->chunk[d];
        }
    }
}

/* A tile of rows, assembled in c->tile: cut into the parts of the chunks
 * it meets (row by row of its last dimension, each row's piece of each
 * chunk to that chunk's part, in order) and each copied chunk's part
 * written where it lies in the chunk: one contiguous piece (format.md
 * 1.1, tiles). */
static int cut_tile(cctx_t *c, const fvar_t *v, const tile_t *tl)
{
    uint32_t nd = v->nd;
    size_t es = v->es;
    uint64_t g0[H5L_MAX_DIMS], gn[H5L_MAX_DIMS], ng = 1;
    for (uint32_t d = 0; d < nd; d++) {
        g0[d] = tl->start[d] / v->chunk[d];
        gn[d] = (tl->start[d] + tl->count[d] - 1) / v->chunk[d] - g0[d] + 1;
        ng *= gn[d];
    }
    /* the tile's rows are the chunks' parts already, back to back: each
     * chunk spans the tile exactly after dimension t, and only t has more
     * than one */
    int direct = 1;
    for (uint32_t d = tl->t + 1; d < nd; d++) direct &= gn[d] == 1 && v->chunk[d] == tl->count[d];
    for (uint32_t d = 0; d < tl->t; d++) direct &= gn[d] == 1;
    if (h5l_grow_raw((void **)&c->part, &c->pcap, (size_t)ng, sizeof *c->part))
        return h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
    /* each copied chunk's part: its place in out (or in the tile) */
    uint64_t total = 0, gi[H5L_MAX_DIMS] = {0};
    uint64_t *ords = NULL;
    int rc = H5L_OK;
    if (!(ords = malloc((size_t)ng * sizeof *ords)))
        return h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
    for (uint64_t g = 0; g < ng; g++) {
        uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
        uint64_t ord = ord_of(v, h5l_fin_coord_blk(v, cc));
        ords[g] = ord != UINT64_MAX && v->copy[ord] ? ord : UINT64_MAX;
        part_of(v, tl, cc, o, P);
        uint64_t bytes = h5l_box_nelem(nd, P) * es;
        c->part[g] = (uint8_t *)(uintptr_t)total; /* an offset until out is sized */
        /* parts one cache line apart beyond their bytes: parts of a power
         * of two bytes back to back put every row's pieces in one cache
         * set, and the scatter below, writing a piece to each part in
         * turn, misses on every one of them (z-plane chunks of 1 MiB:
         * 2.3 ms a MiB, 1.0 with the gap) */
        if (ords[g] != UINT64_MAX || direct) total += bytes + (direct ? 0 : PART_GAP);
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
    }
    uint8_t *base = c->tile;
    if (!direct) {
        if ((rc = h5l_fin_grow_buf(&c->out, &c->ocap, (size_t)total, c->err, c->p->path))) goto out;
        base = c->out;
    }
    for (uint64_t g = 0; g < ng; g++) c->part[g] = base + (uintptr_t)c->part[g];
    if (!direct) {
        /* padding (an edge chunk after dimension t) reads as zeros */
        memset(gi, 0, sizeof gi);
        for (uint64_t g = 0; g < ng; g++) {
            int pad = 0;
            for (uint32_t d = tl->t + 1; d < nd; d++) pad |= (g0[d] + gi[d] + 1) * v->chunk[d] > v->shape[d];
            if (pad && ords[g] != UINT64_MAX) {
                uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
                for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
                part_of(v, tl, cc, o, P);
                memset(c->part[g], 0, (size_t)(h5l_box_nelem(nd, P) * es));
            }
            for (int d = (int)nd - 1; d >= 0; d--) {
                if (++gi[d] < gn[d]) break;
                gi[d] = 0;
            }
        }
        /* the rows of the tile to the parts (box.h): a part is its chunk
         * from the part's origin on */
        h5l_box_dst_t *cells = malloc((size_t)ng * sizeof *cells);
        if (!cells) {
            rc = h5l_err_set(c->err, H5L_ENOMEM, "%s: finalizing: out of memory", c->p->path);
            goto out;
        }
        memset(gi, 0, sizeof gi);
        for (uint64_t g = 0; g < ng; g++) {
            uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS], in = 0;
            for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
            part_of(v, tl, cc, o, P);
            for (uint32_t d = 0; d < nd; d++) in = in * v->chunk[d] + (o[d] - cc[d] * v->chunk[d]);
            cells[g].base = ords[g] == UINT64_MAX ? NULL : c->part[g];
            cells[g].shift = in;
            for (int d = (int)nd - 1; d >= 0; d--) {
                if (++gi[d] < gn[d]) break;
                gi[d] = 0;
            }
        }
        h5l_box_scatter(nd, es, tl->start, tl->count, c->tile, v->chunk, cells);
        free(cells);
    }
    /* write each copied chunk's part where it lies, neighbours in the
     * file in one write */
    memset(gi, 0, sizeof gi);
    uint64_t wo = 0, wn = 0; /* a pending write: file offset, bytes (in iov) */
    int niov = 0;
    for (uint64_t g = 0; g < ng && !rc; g++) {
        uint64_t cc[H5L_MAX_DIMS], o[H5L_MAX_DIMS], P[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) cc[d] = g0[d] + gi[d];
        for (int d = (int)nd - 1; d >= 0; d--) {
            if (++gi[d] < gn[d]) break;
            gi[d] = 0;
        }
        if (ords[g] == UINT64_MAX) continue;
        part_of(v, tl, cc, o, P);
        uint64_t in = 0;
        for (uint32_t d = 0; d < nd; d++) in = in * v->chunk[d] + (o[d] - cc[d] * v->chunk[d]);
        uint64_t off = v->addr[ords[g]] + in * es, n = h5l_box_nelem(nd, P) * es;
        if (wn && wo + wn == off && niov < WRITE_IOV) {
            c->iov[niov++] = (struct iovec){c->part[g], (size_t)n};
            wn += n;
            continue;
        }
        if (wn) rc = h5l_fd_writev(c->fd, c->iov, niov, wo, c->p->path, c->err);
        wo = off;
        wn = n;
        niov = 0;
        c->iov[niov++] = (struct iovec){c->part[g], (size_t)n};
    }
    if (!rc && wn) rc = h5l_fd_writev(c->fd, c->iov, niov, wo, c->p->path, c->err);
out:
    free(ords);
    return rc;
}

/* One tile of the walk: this process's if it starts inside its share. */
static int copy_tile(void *ctx, fvar_t *v, const tile_t *tl, uint64_t bytes)
{
    cctx_t *c = ctx;
    uint64_t at = c->at;
    c->at += bytes;
    if (at < c->lo || at >= c->hi) return 0;
    int rc = h5l_fin_grow_buf(&c->tile, &c->tcap, (size_t)(bytes ? bytes : 1), c->err, c->p->path);
    if (!rc) rc = h5l_reader_read(c->r, c->p->tick, v->objid, tl->start, tl->count, c->tile, c->err);
    if (!rc && v->kind == FV_CONTIG) { /* the tile is the dataset's bytes there */
        uint64_t zero[H5L_MAX_DIMS] = {0}, off = v->nd ? h5l_box_offset(v->nd, zero, v->shape, tl->start) : 0;
        rc = pwrite_at(c, c->tile, bytes, v->contig_addr + off * v->es);
    } else if (!rc) {
        rc = tl->t == UINT32_MAX ? copy_chunk(c, v, tl) : cut_tile(c, v, tl);
    }
    if (rc && c->err) { /* which file and variable */
        char m[sizeof c->err->msg];
        size_t pl = strlen(c->p->path);
        const char *why = c->err->msg;
        if (!strncmp(why, c->p->path, pl) && why[pl] == ':' && why[pl + 1] == ' ') why += pl + 2;
        snprintf(m, sizeof m, "%s", why);
        h5l_err_set(c->err, rc, "%s: finalizing '%s': %s", c->p->path, v->path, m);
    }
    return rc;
}

int h5l_final_copy(h5l_final_t *p, h5l_reader_t *r, int fd, int me, int nproc, h5l_err_t *err)
{
    uint64_t tot[2] = {0, 0};
    h5l_fin_all_tiles(p, h5l_fin_count_tile, tot);
    unsigned __int128 T = tot[1];
    cctx_t c = {.p = p,
                .r = r,
                .fd = fd,
                .lo = (uint64_t)(T * (unsigned)me / (unsigned)nproc),
                .hi = (uint64_t)(T * (unsigned)(me + 1) / (unsigned)nproc),
                .err = err};
    int rc = c.lo < c.hi ? h5l_fin_all_tiles(p, copy_tile, &c) : H5L_OK;
    free(c.tile);
    free(c.out);
    free(c.part);
    return rc;
}
