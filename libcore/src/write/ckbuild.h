/* ckbuild.h — the writer's side of index checkpoints (format.md 3.5):
 * rank 0's builder that appends a CHECKPOINT frame every N ticks. The
 * frame's bytes are format/ckpt.h's; this module decides when one is due
 * and gathers what it lists (the segment's record tables, read back). */
#ifndef H5L_CKBUILD_H
#define H5L_CKBUILD_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt.h"

typedef struct h5l_ckpt_w h5l_ckpt_w_t;

/* A builder for the file at path (its record tables are read back from it
 * with a read-only descriptor opened when the first checkpoint is due);
 * every = N (0: never). NULL when out of memory or every is 0. */
h5l_ckpt_w_t *h5l_ckpt_w_new(const char *path, uint64_t every, uint64_t seed);
/* N for new files: H5L_CKPT_TICKS from the environment (a decimal number;
 * 0 turns checkpoints off), else H5L_CKPT_EVERY_DEFAULT. */
uint64_t h5l_ckpt_every(void);
void h5l_ckpt_w_free(h5l_ckpt_w_t *w);

/* A writer continuing a file (h5l_open): the chain goes on from the
 * checkpoint at journal offset prevpos (0: none yet) whose last tick is
 * first - 1; the ticks from `first` to the file's last one are then given
 * to h5l_ckpt_w_tick in order, as they were when written. */
void h5l_ckpt_w_resume(h5l_ckpt_w_t *w, uint64_t first, uint64_t prevpos);

/* The TICK frame of ti->tick (payload ops `ops`, opslen bytes, nops of them)
 * is about to be appended at journal offset pos, its record table written
 * and ordered before this call. When N ticks are pending, a CHECKPOINT
 * frame for them is appended to out, to follow the TICK frame in the same
 * write. Never fails the tick: when anything goes wrong (memory, reading
 * back a table) the tick is kept eager or the checkpoint left for a later
 * tick, and nothing is appended. ndims/chunk of each variable come from s. */
void h5l_ckpt_w_tick(h5l_ckpt_w_t *w, const h5l_tick_info_t *ti, uint32_t nops, const uint8_t *ops, size_t opslen,
                     uint64_t pos, const h5l_schema_t *s, h5l_buf_t *out);

#endif
