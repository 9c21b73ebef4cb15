/* xfer.h — the transposition engine: one box of one variable assembled
 * from the log records that touch it, planned first, then moved.
 *
 * Why: the log holds each rank's boxes in the order they were put, each
 * box row-major, while readers want boxes cut another way (a chunk that is
 * a z-plane of x-slabs gathers one 4-byte piece per 1 KiB of the log).
 * Reading piece by piece verified a whole 32 KiB segment per piece and,
 * once a chunk's pieces spanned more segments than a small cache held,
 * read every segment once per piece: closing a 256^3 variable took 50 s.
 * Here every log byte a box needs is read and verified once:
 *
 *   plan  each record box meets the wanted box in a *piece*; per (tick,
 *         rank) the checksum segments the pieces' elements lie in are
 *         marked in a bitmap (strides wider than a segment are walked,
 *         narrower ones taken as one span);
 *   read  runs of marked segments, merged across gaps of at most
 *         XFER_GAP_SEGS unmarked ones, are read in windows of at most
 *         `window` bytes, one read callback each (which verifies them);
 *   move  each piece's part inside the window is copied out of it.
 *
 * Order: (tick, rank) groups in sequence order, windows in log order in a
 * group, pieces in record then box order in a window. Records of a group
 * lie in the log in sequence order and boxes of a record in box order, so
 * an element written twice is written last by the greater sequence, as
 * docs/format.md 5 says. An element belongs to the window holding its last
 * byte; the last bytes of the window before are kept in front of the next
 * (an element of 8 bytes may straddle a segment boundary).
 *
 * Cost: the marked segments, read and hashed once; one copy per run of a
 * piece (the runs of a z-plane chunk are one element each: memory speed,
 * not a syscall each); memory: the window, one bit per segment of each
 * group's span and 96 bytes per piece. No I/O of its own: the caller's
 * callbacks reach the log. Thread-safe for distinct calls. */
#ifndef H5L_XFER_H
#define H5L_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "h5log/error.h"
#include "index.h"

/* Default window: the size of this machine kind's L2 cache, so a window's
 * bytes are still cached when the pieces are copied out of it. */
#define H5L_XFER_WINDOW ((size_t)4 << 20)
/* Unmarked segments between two runs read through rather than skipped
 * (a read of two segments costs less than two reads). */
#define XFER_GAP_SEGS 2

/* Where the log bytes come from. */
typedef struct h5l_xsrc {
    /* Read log bytes [off, off + n) of the data of (tick, rank) into dst,
     * verified; H5L_OK or an error code with err set. */
    int (*read)(void *ctx, uint64_t tick, uint32_t rank, uint64_t off, size_t n, uint8_t *dst, h5l_err_t *err);
    /* The data of (tick, rank): absolute [*start, *end). Segment j of it
     * is [start + j 2^seglog, min(start + (j+1) 2^seglog, end)). H5L_OK,
     * or an error code with err set (a tick that cannot be described). */
    int (*range)(void *ctx, uint64_t tick, uint32_t rank, uint64_t *start, uint64_t *end, h5l_err_t *err);
    void *ctx;
    uint32_t seglog;
    size_t window; /* bytes read at once; 0: H5L_XFER_WINDOW */
} h5l_xsrc_t;

/* What a call did (statistics, and what tests check). */
typedef struct h5l_xstats {
    uint64_t pieces;  /* record boxes meeting the box */
    uint64_t windows; /* read callbacks */
    uint64_t bytes;   /* bytes read */
} h5l_xstats_t;

/* Assemble box (start, count) of a variable of nd dimensions and elements
 * of es bytes into dst (row-major, shape count, packed): fill first (fill:
 * es bytes; skipped when one record box covers the whole box), then the
 * records recs[0..nrec) (in sequence order, each once; records that do not
 * meet the box are allowed and cost nothing). A record's data starts at
 * rec->offset; its boxes follow each other there, row-major.
 * st may be NULL. H5L_OK, H5L_ENOMEM, or what the callbacks return (dst
 * then holds a part of the box). */
int h5l_xfer_read(const h5l_xsrc_t *src, uint32_t nd, size_t es, const void *fill, h5l_rec_t *const *recs, size_t nrec,
                  const uint64_t *start, const uint64_t *count, void *dst, h5l_xstats_t *st, h5l_err_t *err);

/* The bytes h5l_xfer_read would read for the same box (the plan alone, no
 * read): *bytes. H5L_OK or H5L_ENOMEM (or a range callback's error). */
int h5l_xfer_cost(const h5l_xsrc_t *src, uint32_t nd, size_t es, h5l_rec_t *const *recs, size_t nrec,
                  const uint64_t *start, const uint64_t *count, uint64_t *bytes, h5l_err_t *err);

#endif
