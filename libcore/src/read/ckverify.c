/* ckverify.c — index checkpoints checked against the journal and the record
 * tables (see ckverify.h, docs/format.md 3.5).
 *
 * One pass over the journal notes where each TICK frame is; at each
 * CHECKPOINT frame, its segment is recomputed the way the writer's builder
 * should have made it: each tick's entry must be its TICK payload (read
 * again from the frame the reader verified), and the (variable, chunk,
 * tick) triples must be exactly those the segment's record tables touch
 * (h5l_ckpt_table_chunks, fed from the file, not from the checkpoint),
 * except for eager ticks. A tick the tables make eager (a box over more
 * than H5L_CKPT_WIDE chunks) must be listed eager; the writer may also list
 * a tick eager when it could not read its table back, which costs readers
 * time, never an answer, so that is allowed. Both triple lists are sorted
 * and compared; the first difference is reported. */
#include "ckverify.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "h5log/fdio.h"
#include "h5log/format.h"
#include "h5log/grow.h"
#include "journal.h"

/* Triples, flat: [objid, nd, coord[nd], tick], and where each begins. */
typedef struct trip {
    uint64_t *v;
    size_t n, cap;
    size_t *at;
    size_t nat, capat;
    uint64_t tick; /* of the table being read */
} trip_t;

static int trip_add(trip_t *t, uint32_t objid, uint32_t nd, const uint64_t *coord, uint64_t tick)
{
    if (h5l_grow((void **)&t->v, &t->cap, t->n + nd + 3, sizeof *t->v) ||
        h5l_grow((void **)&t->at, &t->capat, t->nat + 1, sizeof *t->at))
        return H5L_ENOMEM;
    uint64_t *e = t->v + t->n;
    e[0] = objid;
    e[1] = nd;
    if (nd) memcpy(e + 2, coord, nd * sizeof *coord); /* a scalar's coord may be NULL */
    e[2 + nd] = tick;
    t->at[t->nat++] = t->n;
    t->n += nd + 3;
    return 0;
}

static int table_fn(void *ctx, uint32_t objid, uint32_t nd, const uint64_t *coord)
{
    trip_t *t = ctx;
    return trip_add(t, objid, nd, coord, t->tick);
}

static int ent_cmp(const uint64_t *x, const uint64_t *y)
{
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
    for (size_t i = 2; i < 3 + x[1]; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

static int trip_cmp(const void *a, const void *b, void *base)
{
    const uint64_t *v = base;
    return ent_cmp(v + *(const size_t *)a, v + *(const size_t *)b);
}

/* Sort and drop repeats (a chunk touched twice by one tick). */
static void trip_sort(trip_t *t)
{
    if (!t->nat) return; /* t->at may be NULL */
    qsort_r(t->at, t->nat, sizeof *t->at, trip_cmp, t->v);
    size_t k = 0;
    for (size_t i = 0; i < t->nat; i++)
        if (k == 0 || trip_cmp(&t->at[k - 1], &t->at[i], t->v)) t->at[k++] = t->at[i];
    t->nat = k;
}

static void trip_free(trip_t *t)
{
    free(t->v);
    free(t->at);
    memset(t, 0, sizeof *t);
}

/* "'path' chunk [c0, c1, ...] tick T" into b. */
static void trip_name(char *b, size_t n, const h5l_schema_t *s, const uint64_t *e)
{
    int k = snprintf(b, n, "'%s' chunk [", e[0] < s->nobjs ? s->objs[e[0]].path : "?");
    for (uint64_t d = 0; d < e[1] && k > 0 && (size_t)k < n; d++)
        k += snprintf(b + k, n - (size_t)k, "%s%llu", d ? ", " : "", (unsigned long long)e[2 + d]);
    if (k > 0 && (size_t)k < n) snprintf(b + k, n - (size_t)k, "] tick %llu", (unsigned long long)e[2 + e[1]]);
}

typedef struct vstate {
    const h5l_ckv_in_t *in;
    void (*report)(void *, const char *);
    void *ctx;
    h5l_ckv_out_t *out;
    h5l_jscan_t sc2; /* re-reads TICK frames */
    uint64_t *tickpos;
    size_t ntick, cap_tick;
    uint64_t fsize; /* of fd */
    uint8_t *tab;   /* a record table */
    size_t tabcap;
    trip_t want, have;
} vstate_t;

/* One problem with the checkpoint c (at journal offset pos): report it. */
static void bad(vstate_t *v, uint64_t pos, const h5l_ckpt_t *c, const char *fmt, ...)
{
    char d[sizeof((h5l_err_t *)0)->msg], m[sizeof d + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    if (c)
        snprintf(m, sizeof m, "%s: index checkpoint at journal offset %llu (ticks %llu..%llu): %s", v->in->what,
                 (unsigned long long)pos, (unsigned long long)c->first, (unsigned long long)c->last, d);
    else
        snprintf(m, sizeof m, "%s: index checkpoint at journal offset %llu: %s", v->in->what, (unsigned long long)pos,
                 d);
    v->out->bad++;
    if (v->report) v->report(v->ctx, m);
}

static int same_info(const h5l_tick_info_t *a, const h5l_tick_info_t *b)
{
    return a->tick == b->tick && a->time_ns == b->time_ns && a->nranks == b->nranks && a->data_off == b->data_off &&
           a->data_size == b->data_size && a->table_off == b->table_off && a->table_size == b->table_size &&
           a->nrecords == b->nrecords;
}

/* Tick t of c's segment (entry e) against its TICK frame and its table:
 * 1 if it matches, 0 if reported, or an error code. */
static int check_tick(vstate_t *v, uint64_t pos, const h5l_ckpt_t *c, const h5l_ckpt_tick_t *e, h5l_err_t *err)
{
    const h5l_ckv_in_t *in = v->in;
    uint64_t t = e->info.tick;
    h5l_frame_t fr;
    int k = h5l_jscan_next(&v->sc2, v->tickpos[t - 1], in->jend, &fr, err);
    if (k < 0) return k == H5L_ECORRUPT ? (bad(v, pos, c, "tick %llu: its TICK frame no longer reads: %s",
                                               (unsigned long long)t, err->msg), 0)
                                        : k;
    h5l_cur_t cur = h5l_cur(fr.payload, k == 1 ? fr.len : 0);
    h5l_tick_info_t ti;
    uint32_t nops;
    if (k != 1 || fr.type != H5L_REC_TICK || h5l_tick_decode(&cur, &ti, &nops))
        return bad(v, pos, c, "tick %llu: no TICK frame at journal offset %llu", (unsigned long long)t,
                   (unsigned long long)v->tickpos[t - 1]),
               0;
    if (!same_info(&ti, &e->info) || nops != e->nops || cur.len - cur.pos != e->opslen ||
        (e->opslen && memcmp(cur.p + cur.pos, e->ops, e->opslen)))
        return bad(v, pos, c, "tick %llu: its entry differs from its TICK frame", (unsigned long long)t), 0;
    /* the chunks its records touch, from its table */
    if (ti.table_off > v->fsize || ti.table_size > v->fsize - ti.table_off) /* a crafted size: read nothing */
        return bad(v, pos, c, "tick %llu: its record table [%llu, +%llu) ends past the end of the file",
                   (unsigned long long)t, (unsigned long long)ti.table_off, (unsigned long long)ti.table_size),
               0;
    if (ti.table_size > v->tabcap) {
        uint8_t *b = realloc(v->tab, (size_t)ti.table_size);
        if (!b) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", in->what);
        v->tab = b;
        v->tabcap = (size_t)ti.table_size;
    }
    if (h5l_fd_read_all(in->fd, v->tab, (size_t)ti.table_size, ti.table_off, in->what, err)) return H5L_EIO;
    size_t mark = v->want.nat, vmark = v->want.n;
    v->want.tick = t;
    int rc = h5l_ckpt_table_chunks(v->tab, &ti, in->seed, in->s, table_fn, &v->want);
    int listed = 0;
    for (size_t i = 0; i < c->neager && !listed; i++) listed = c->eager[i] == t;
    if (rc == 1 || listed) { /* eager: no triples expected */
        v->want.nat = mark;
        v->want.n = vmark;
    }
    if (rc == 1 && !listed)
        return bad(v, pos, c, "tick %llu: a box over more than %d chunks, but the tick is not listed eager",
                   (unsigned long long)t, H5L_CKPT_WIDE),
               0;
    if (rc == H5L_ENOMEM) return h5l_err_set(err, rc, "%s: out of memory", in->what);
    if (rc && rc != 1)
        return bad(v, pos, c, "tick %llu: its record table does not check (%s)", (unsigned long long)t,
                   h5l_strerror(rc)),
               0;
    return 1;
}

/* The checkpoint c at journal offset pos, decoded, against the journal. */
static int check_one(vstate_t *v, uint64_t pos, const h5l_ckpt_t *c, h5l_err_t *err)
{
    if (c->tickpos != v->tickpos[c->first - 1]) {
        bad(v, pos, c, "says tick %llu's frame is at journal offset %llu; it is at %llu", (unsigned long long)c->first,
            (unsigned long long)c->tickpos, (unsigned long long)v->tickpos[c->first - 1]);
        return 0;
    }
    v->want.n = v->want.nat = v->have.n = v->have.nat = 0;
    for (uint64_t j = 0; j <= c->last - c->first; j++) {
        int k = check_tick(v, pos, c, &c->ticks[j], err);
        if (k <= 0) return k;
    }
    for (size_t i = 0; i < c->nchunks; i++) {
        const h5l_ckpt_chunk_t *ch = &c->chunks[i];
        for (size_t j = 0; j < ch->nt; j++)
            if (trip_add(&v->have, ch->objid, ch->nd, ch->coord, ch->ticks[j]))
                return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", v->in->what);
    }
    trip_sort(&v->want);
    trip_sort(&v->have);
    size_t a = 0, b = 0;
    while (a < v->want.nat || b < v->have.nat) {
        int d = a == v->want.nat   ? 1
                : b == v->have.nat ? -1
                                   : ent_cmp(v->want.v + v->want.at[a], v->have.v + v->have.at[b]);
        if (d == 0) {
            a++;
            b++;
            continue;
        }
        char nm[256];
        if (d < 0) {
            trip_name(nm, sizeof nm, v->in->s, v->want.v + v->want.at[a]);
            bad(v, pos, c, "%s: the tick's records touch the chunk, the checkpoint does not list it", nm);
        } else {
            trip_name(nm, sizeof nm, v->in->s, v->have.v + v->have.at[b]);
            bad(v, pos, c, "%s: listed, but no record of the tick touches the chunk", nm);
        }
        return 0;
    }
    return 1;
}

int h5l_ckv_check(const h5l_ckv_in_t *in, void (*report)(void *ctx, const char *msg), void *ctx, h5l_ckv_out_t *out,
                  h5l_err_t *err)
{
    memset(out, 0, sizeof *out);
    vstate_t v = {.in = in, .report = report, .ctx = ctx, .out = out};
    struct stat st;
    if (fstat(in->fd, &st)) return h5l_err_set(err, H5L_EIO, "%s: %s", in->what, strerror(errno));
    v.fsize = (uint64_t)st.st_size;
    h5l_jscan_t sc;
    h5l_jscan_init(&sc, in->jfd, NULL, in->jbase, in->live, in->seed, in->what);
    h5l_jscan_init(&v.sc2, in->jfd, NULL, in->jbase, in->live, in->seed, in->what);
    uint64_t at = H5L_JHDR_LEN, prev = 0, prev_last = 0; /* the previous checkpoint: where, its last tick (0: unknown) */
    int rc = H5L_OK;
    uint8_t *fb = NULL;
    size_t fcap = 0;
    for (;;) {
        h5l_frame_t fr;
        h5l_err_t e = {0};
        int k = h5l_jscan_next(&sc, at, in->jend, &fr, &e);
        if (k == H5L_ENOMEM || k == H5L_EIO) rc = h5l_err_set(err, k, "%s", e.msg);
        if (k != 1) break; /* the end, or damage the reader reports */
        at = fr.next;
        if (fr.type == H5L_REC_TICK) {
            if (h5l_grow((void **)&v.tickpos, &v.cap_tick, v.ntick + 1, sizeof *v.tickpos)) {
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", in->what);
                break;
            }
            v.tickpos[v.ntick++] = fr.pos;
            continue;
        }
        if (fr.type != H5L_REC_CKPT) continue;
        out->found++;
        uint64_t pos = fr.pos, was = prev;
        prev = pos;
        if (fr.damaged) {
            bad(&v, pos, NULL, "its payload fails its checksum (readers skip it and read the ticks from the journal)");
            prev_last = 0;
            continue;
        }
        size_t n = (size_t)h5l_frame_size(fr.len);
        if (n > fcap) {
            uint8_t *b = realloc(fb, n);
            if (!b) {
                rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", in->what);
                break;
            }
            fb = b;
            fcap = n;
        }
        if ((rc = h5l_fd_read_all(in->jfd, fb, n, in->jbase + pos, in->what, err))) break;
        h5l_ckpt_t c = {0};
        h5l_err_t de = {0};
        int dk = h5l_ckpt_decode(fb, n, in->seed, pos, &c, in->what, &de);
        if (dk == H5L_ENOMEM) {
            rc = h5l_err_set(err, dk, "%s: out of memory", in->what);
            break;
        }
        uint64_t expect_first = was == 0 ? 1 : prev_last ? prev_last + 1 : 0;
        prev_last = dk ? 0 : c.last;
        if (dk)
            bad(&v, pos, NULL, "%s", de.msg);
        else if (c.prevpos != was)
            bad(&v, pos, &c, "links to a checkpoint at journal offset %llu; the one before it is at %llu",
                (unsigned long long)c.prevpos, (unsigned long long)was);
        else if (expect_first && c.first != expect_first)
            bad(&v, pos, &c, "the segment should start at tick %llu", (unsigned long long)expect_first);
        else if (c.last > v.ntick)
            bad(&v, pos, &c, "covers ticks whose TICK frames come after it");
        else if (c.last <= in->nticks) {
            int k2 = check_one(&v, pos, &c, err);
            if (k2 < 0) rc = k2;
            if (k2 >= 0) out->checked++;
        }
        h5l_ckpt_clear(&c);
        if (rc) break;
    }
    free(fb);
    free(v.tickpos);
    free(v.tab);
    trip_free(&v.want);
    trip_free(&v.have);
    h5l_jscan_free(&sc);
    h5l_jscan_free(&v.sc2);
    return rc;
}
