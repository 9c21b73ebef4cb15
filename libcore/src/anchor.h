/* anchor.h — rank 0's libhdf5 side of the writer: the HDF5 file itself (a
 * POSIX driver of our own that never lets H5Fclose fail, see anchor.c;
 * 4096-byte user block), the anchor objects that make the physical
 * file explain itself, the per-tick /_h5log datasets whose storage the ranks
 * fill with MPI-IO, and the close sequence that embeds the journal. Only
 * rank 0 calls these; other ranks never touch libhdf5 for a log file.
 * Needs libhdf5, not MPI. */
#ifndef H5L_ANCHOR_H
#define H5L_ANCHOR_H

#include <stddef.h>
#include <stdint.h>
#include "format.h"
#include "h5log_reader.h"

typedef struct h5l_anchor h5l_anchor_t;

/* Create (truncate) path with a live user block for id. */
int h5l_anchor_create(const char *path, const uint8_t id[16], h5l_anchor_t **out, h5l_err_t *err);

/* Mirror an op (already applied to s at tick) into the file. Idempotent, so
 * a retried flush may apply it again. */
int h5l_anchor_op(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err);

/* An early-allocated, never-filled 1-D byte dataset /_h5log/NAME of size
 * bytes; *off gets its absolute offset. One of that name and size made
 * before (by a flush that then failed) is reused; another is replaced. */
int h5l_anchor_alloc(h5l_anchor_t *a, const char *name, uint64_t size, uint64_t *off, h5l_err_t *err);

/* Close: with final, the anchors are replaced by the canonical objects
 * of tick (groups, datasets with fill values and dimension scales,
 * attributes: canon.c) holding the data of that tick, read and verified
 * through a reader of path's own journal (which must already hold every
 * tick, and may end with the CLOSE frame); without, the anchors only get
 * their final extents (and stay unreadable by libhdf5: no storage, no
 * fill value). Then the journal bytes go into /_h5log/journal, the HDF5
 * file is closed, and the user block is rewritten as closed (and
 * finalized, with final); with sync, each step is fsynced before the
 * next. Each step only after the one before succeeded: on failure the
 * user block says live (put back if writing it failed part way) and the
 * message names the step, the errno and where. libhdf5 has let go of the
 * file in every case. Frees a (also on failure).
 * *final: in, whether to finalize; out, whether the file was finalized.
 * If finalizing fails (a full disk), anchors are put back and the close
 * goes on unfinalized: H5L_OK with *final 0 and err saying why. */
int h5l_anchor_finish(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const void *journal, size_t jlen, int sync,
                      int *final, h5l_err_t *err);

/* For h5logrecover: a new HDF5 file written over path's existing bytes,
 * whose libhdf5 metadata (a crashed writer's, never trusted) it replaces;
 * the user block is left as it is. The log's bytes [keep_from, keep_to)
 * stay in place as the storage of the byte dataset /_h5log/log, so every
 * offset the journal states stays valid (docs/format.md 1). H5L_EFORMAT
 * if libhdf5 places that dataset after keep_from. */
int h5l_anchor_recreate(const char *path, const uint8_t id[16], uint64_t keep_from, uint64_t keep_to,
                        h5l_anchor_t **out, h5l_err_t *err);

/* For h5logrecover on a closed file that was not finalized: open it
 * (libhdf5 metadata written by a completed close, so trusted), then
 * finalize it as h5l_anchor_finish would have (tick: its last tick) and
 * mark it finalized, the embedded journal (joff, jlen) staying where it
 * is. A failure leaves the user block saying closed, not finalized (the
 * file stays readable by the project's readers; some anchors may then be
 * canonical datasets already). Frees a. */
int h5l_anchor_open(const char *path, const uint8_t id[16], h5l_anchor_t **out, h5l_err_t *err);
int h5l_anchor_finalize_closed(h5l_anchor_t *a, uint64_t tick, uint64_t joff, uint64_t jlen, int sync, h5l_err_t *err);

/* Error-path close: close the HDF5 file (its I/O errors ignored), leave the
 * user block live (the sidecar journal stays the truth). Frees a. Accepts
 * NULL. */
void h5l_anchor_abort(h5l_anchor_t *a);

#endif
