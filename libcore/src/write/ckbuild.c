/* ckbuild.c — the writer's checkpoint builder (ckbuild.h).
 *
 * The builder keeps the segment's tick entries (a few dozen bytes per
 * tick) and, when a checkpoint is due, reads the segment's record tables
 * back from the file (rank 0 does not see other ranks' records otherwise;
 * they were written and ordered before the commit), checks their block
 * checksums, and lists each (variable, index chunk, tick) once. A table
 * that cannot be read back or does not check makes its tick eager: the
 * checkpoint stays correct, readers just decode that tick's table at
 * open. */
#include "ckbuild.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/grow.h"

struct h5l_ckpt_w {
    char *path;
    int fd;
    uint64_t every, seed;
    uint64_t prevpos; /* the last checkpoint appended, 0: none */
    uint64_t first;   /* first tick of the pending segment */
    uint64_t tickpos; /* journal offset of its TICK frame */
    h5l_tick_info_t *ti;
    size_t nti, cap_ti;
    uint64_t tbytes;  /* record table bytes of the pending ticks */
    uint64_t *opsoff; /* per pending tick: [offset into ops, nops] */
    size_t cap_opsoff;
    h5l_buf_t ops;
    /* a pending build: entries [objid, nd, coord[nd], tick], flat */
    uint64_t *ent;
    size_t nent, cap_ent;
    size_t tick_mark; /* nent when the current table began */
    uint64_t cur_tick;
    int broken; /* a previous failure that makes a chain impossible: stop */
    int fails;  /* builds failed in a row (each tried again at the next tick) */
};

/* Builds that may fail in a row before the file gets no more checkpoints:
 * a failure that lasts (a segment too large to frame, memory that stays
 * short) would otherwise be retried at every tick, reading the segment's
 * tables back each time while the pending ops and ticks grow. */
#define CKPT_TRIES 4

uint64_t h5l_ckpt_every(void)
{
    const char *e = getenv(H5L_CKPT_ENV);
    if (!e || !*e) return H5L_CKPT_EVERY_DEFAULT;
    char *end;
    unsigned long long v = strtoull(e, &end, 10);
    return *end ? H5L_CKPT_EVERY_DEFAULT : (uint64_t)v;
}

h5l_ckpt_w_t *h5l_ckpt_w_new(const char *path, uint64_t every, uint64_t seed)
{
    if (!every) return NULL;
    h5l_ckpt_w_t *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return NULL;
    }
    w->fd = -1;
    w->every = every;
    w->seed = seed;
    w->first = 1;
    return w;
}

void h5l_ckpt_w_free(h5l_ckpt_w_t *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    free(w->ti);
    free(w->opsoff);
    free(w->ent);
    h5l_buf_free(&w->ops);
    free(w);
}

static int add_ent(void *ctx, uint32_t objid, uint32_t nd, const uint64_t *coord)
{
    h5l_ckpt_w_t *w = ctx;
    if (h5l_grow((void **)&w->ent, &w->cap_ent, w->nent + nd + 3, sizeof *w->ent)) return H5L_ENOMEM;
    uint64_t *e = w->ent + w->nent;
    e[0] = objid;
    e[1] = nd;
    memcpy(e + 2, coord, nd * sizeof *coord);
    e[2 + nd] = w->cur_tick;
    w->nent += nd + 3;
    return 0;
}

static const uint64_t *sort_base;
static int ent_cmp(const void *a, const void *b)
{
    const uint64_t *x = sort_base + *(const size_t *)a, *y = sort_base + *(const size_t *)b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    size_t n = x[1] + 1; /* coords then tick (same variable: same nd) */
    for (size_t i = 2; i < 2 + n; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Read the table of ti into buf (grown); 0 or -1. */
/* Room to read a segment's tables back: small tables (a long log of small
 * ticks has them a few hundred bytes apart) come through a window of the
 * file, one pread for hundreds of ticks; a larger one is read alone. */
#define RWIN ((size_t)256 << 10)
typedef struct rback {
    uint8_t *win, *own;
    uint64_t woff;
    size_t wlen, owncap;
} rback_t;

/* The table of ti, read back: a pointer into rb, or NULL. */
static const uint8_t *read_table(h5l_ckpt_w_t *w, const h5l_tick_info_t *ti, rback_t *rb)
{
    uint64_t off = ti->table_off, n = ti->table_size;
    size_t got;
    if (n > ((uint64_t)1 << 30)) return NULL;
    if (rb->win && off >= rb->woff && n <= rb->wlen && off - rb->woff <= rb->wlen - n)
        return rb->win + (off - rb->woff);
    if (n <= RWIN / 4) {
        if (!rb->win && !(rb->win = malloc(RWIN))) return NULL;
        rb->wlen = 0;
        if (h5l_fd_read(w->fd, rb->win, RWIN, off, &got, w->path, NULL) || got < n) return NULL;
        rb->woff = off;
        rb->wlen = got;
        return rb->win;
    }
    if (rb->owncap < n) {
        uint8_t *b = realloc(rb->own, (size_t)n);
        if (!b) return NULL;
        rb->own = b;
        rb->owncap = (size_t)n;
    }
    if (h5l_fd_read(w->fd, rb->own, (size_t)n, off, &got, w->path, NULL) || got != n) return NULL;
    return rb->own;
}

/* Build and append the checkpoint of the pending segment, ending at the
 * tick whose frame is at `pos` (its payload ops: the last pending entry). */
static int build(h5l_ckpt_w_t *w, uint64_t pos, const h5l_schema_t *s, h5l_buf_t *out)
{
    if (w->fd < 0 && (w->fd = open(w->path, O_RDONLY | O_CLOEXEC)) < 0) {
        w->broken = 1; /* no checkpoints for this file */
        return -1;
    }
    uint64_t *eager = malloc(w->nti * sizeof *eager);
    rback_t rb = {0};
    size_t neager = 0;
    int rc = eager ? 0 : -1;
    w->nent = 0;
    for (size_t i = 0; i < w->nti && !rc; i++) {
        const h5l_tick_info_t *ti = &w->ti[i];
        w->tick_mark = w->nent;
        w->cur_tick = ti->tick;
        const uint8_t *tab = read_table(w, ti, &rb);
        int k = !tab ? 1 : h5l_ckpt_table_chunks(tab, ti, w->seed, s, add_ent, w);
        if (k == H5L_ENOMEM) rc = -1;
        if (k) { /* eager: drop what it listed */
            w->nent = w->tick_mark;
            eager[neager++] = ti->tick;
        }
    }
    free(rb.win);
    free(rb.own);
    size_t *ix = NULL, nix = 0;
    for (size_t p = 0; !rc && p < w->nent; p += w->ent[p + 1] + 3) nix++;
    if (!rc && !(ix = malloc((nix ? nix : 1) * sizeof *ix))) rc = -1;
    h5l_ckpt_chunk_t *ch = NULL;
    uint64_t *lists = NULL;
    size_t nch = 0;
    if (!rc) {
        size_t j = 0;
        for (size_t p = 0; p < w->nent; p += w->ent[p + 1] + 3) ix[j++] = p;
        sort_base = w->ent;
        qsort(ix, nix, sizeof *ix, ent_cmp);
        ch = malloc((nix ? nix : 1) * sizeof *ch);
        lists = malloc((nix ? nix : 1) * sizeof *lists);
        if (!ch || !lists) rc = -1;
    }
    for (size_t i = 0, nl = 0; !rc && i < nix; i++) {
        const uint64_t *e = w->ent + ix[i];
        uint32_t nd = (uint32_t)e[1];
        uint64_t tick = e[2 + nd];
        h5l_ckpt_chunk_t *last = nch ? &ch[nch - 1] : NULL;
        if (last && last->objid == e[0] && !memcmp(last->coord, e + 2, nd * sizeof *e)) {
            if (last->ticks[last->nt - 1] != tick) { /* a repeat of (chunk, tick) is listed once */
                lists[nl++] = tick;
                last->nt++;
            }
            continue;
        }
        ch[nch].objid = (uint32_t)e[0];
        ch[nch].nd = nd;
        ch[nch].coord = e + 2;
        ch[nch].ticks = lists + nl;
        ch[nch].nt = 1;
        lists[nl++] = tick;
        nch++;
    }
    if (!rc) {
        h5l_ckpt_tick_t *tk = malloc(w->nti * sizeof *tk);
        if (!tk) rc = -1;
        for (size_t i = 0; !rc && i < w->nti; i++) {
            tk[i].info = w->ti[i];
            tk[i].ops = w->ops.p + w->opsoff[2 * i];
            tk[i].nops = (uint32_t)w->opsoff[2 * i + 1];
            tk[i].opslen = (i + 1 < w->nti ? w->opsoff[2 * i + 2] : w->ops.len) - w->opsoff[2 * i];
        }
        if (!rc) {
            uint64_t fsize = h5l_frame_size(H5L_TICK_LEN + tk[w->nti - 1].opslen);
            h5l_ckpt_t c = {
                w->first, w->ti[w->nti - 1].tick, w->tickpos, pos + fsize, w->prevpos, tk, eager, neager, ch, nch,
                NULL};
            size_t before = out->len;
            h5l_ckpt_encode(out, &c, w->seed);
            if (out->oom) {
                out->len = before;
                out->oom = 0; /* the TICK frame before it is intact */
                rc = -1;
            } else {
                w->prevpos = c.selfpos;
            }
        }
        free(tk);
    }
    free(ix);
    free(ch);
    free(lists);
    free(eager);
    return rc;
}

void h5l_ckpt_w_tick(h5l_ckpt_w_t *w, const h5l_tick_info_t *ti, uint32_t nops, const uint8_t *ops, size_t opslen,
                     uint64_t pos, const h5l_schema_t *s, h5l_buf_t *out)
{
    if (!w || w->broken) return;
    if (ti->tick != w->first + w->nti) { /* a gap: the chain cannot go on */
        w->broken = 1;
        return;
    }
    if (h5l_grow((void **)&w->ti, &w->cap_ti, w->nti + 1, sizeof *w->ti) ||
        h5l_grow((void **)&w->opsoff, &w->cap_opsoff, 2 * (w->nti + 1), sizeof *w->opsoff)) {
        w->broken = 1;
        return;
    }
    if (!w->nti) w->tickpos = pos;
    w->opsoff[2 * w->nti] = w->ops.len;
    w->opsoff[2 * w->nti + 1] = nops;
    h5l_buf_put(&w->ops, ops, opslen);
    if (w->ops.oom) {
        w->broken = 1;
        return;
    }
    w->ti[w->nti++] = *ti;
    w->tbytes += ti->table_size;
    /* due every N ticks, or sooner when their tables (read back to build
     * it) and ops (copied into it) add up to H5L_CKPT_TABLES: one flush
     * never reads back much, and a segment stays far below a frame's
     * largest payload (H5L_FRAME_MAX) however large its attributes */
    if (w->nti < w->every && w->tbytes + w->ops.len < H5L_CKPT_TABLES) return;
    if (build(w, pos, s, out)) { /* tried again at the next tick, a few times */
        if (++w->fails >= CKPT_TRIES) w->broken = 1;
        return;
    }
    w->fails = 0;
    w->first = ti->tick + 1;
    w->nti = 0;
    w->tbytes = 0;
    w->ops.len = 0;
}

void h5l_ckpt_w_resume(h5l_ckpt_w_t *w, uint64_t first, uint64_t prevpos)
{
    if (!w) return;
    w->first = first;
    w->prevpos = prevpos;
    w->nti = 0;
    w->tbytes = 0;
    w->ops.len = 0;
}
