/* ckverify.h — checking index checkpoints against what they summarise
 * (h5logdump --check).
 *
 * Why a module of its own: readers trust a checkpoint whose checksums
 * verify (docs/format.md 3.5), so a checkpoint that is well formed but
 * wrong — which only a writer bug could produce — would change answers
 * without any reader noticing. This module recomputes every checkpoint from
 * the journal's TICK frames and the record tables, independently of the
 * reader that starts from checkpoints, and says where they differ. It also
 * names the checkpoints that readers skip as damaged, which they do
 * silently. Owns nothing beyond one call. */
#ifndef H5L_CKVERIFY_H
#define H5L_CKVERIFY_H

#include <stdint.h>
#include "h5log/error.h"
#include "h5log_reader.h"

typedef struct h5l_ckv_in {
    int jfd;             /* the journal's bytes are at jfd offsets jbase .. jbase + jend */
    uint64_t jbase, jend;
    int live;            /* the journal may still grow (sidecar) */
    int fd;              /* the HDF5 file: record tables */
    uint64_t seed;       /* the file's checksum seed */
    const char *what;    /* names the file in messages */
    const h5l_schema_t *s; /* the schema of every intact tick (chunk shapes) */
    uint64_t nticks;     /* ticks 1..nticks are intact (the caller verified them) */
} h5l_ckv_in_t;

typedef struct h5l_ckv_out {
    uint64_t found;   /* CHECKPOINT frames met */
    uint64_t checked; /* ... whose whole segment lies in 1..nticks and was compared */
    uint64_t bad;     /* ... damaged, or not what the journal and tables say */
} h5l_ckv_out_t;

/* Check every CHECKPOINT frame of the journal, in journal order: payload
 * checksum, links (previous checkpoint, first tick, TICK frame position),
 * each tick's entry byte for byte against its TICK frame, the eager ticks
 * and the (variable, chunk, tick) lists against the record tables. For
 * each problem, report(ctx, message) (one message per checkpoint, naming
 * the file, the frame's journal offset and its ticks). Stops at the end of
 * the journal or its first damaged frame (the reader reports that one).
 * 0, or H5L_ENOMEM / H5L_EIO (err says why). */
int h5l_ckv_check(const h5l_ckv_in_t *in, void (*report)(void *ctx, const char *msg), void *ctx, h5l_ckv_out_t *out,
                  h5l_err_t *err);

#endif
