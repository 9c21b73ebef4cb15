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
#include "final.h"
#include "h5log/format.h"
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

/* Remove /_h5log/NAME, an extent no tick points at (made ahead of need):
 * libhdf5 gives its space back, so a closed file does not end with an
 * extent of nothing. A failure only leaves the extent (best effort). */
void h5l_anchor_drop(h5l_anchor_t *a, const char *name);

/* Close: with *final, the anchors are replaced by the finalized objects
 * of tick (docs/format.md 1.1: the canonical objects of canon.c, their
 * chunks in place in the log or copied, read and verified through a
 * reader of path's own journal, which must already hold every tick and
 * may end with the CLOSE frame); without, the anchors only get their
 * final extents (and stay unreadable by libhdf5: no storage, no fill
 * value). p: NULL, and this process plans, builds and copies alone; or a
 * plan already built (h5l_anchor_final_build) whose copies every process
 * has written. Then the index nodes, the journal's dataset, the HDF5 file
 * closed, the layouts pointed and checked, the journal bytes written and
 * the user block rewritten as closed (and finalized, with *final); with
 * sync, each step is fsynced before the next. Each step only after the
 * one before succeeded: on failure the user block says live (put back if
 * writing it failed part way) and the message names the step, the errno
 * and where. libhdf5 has let go of the file in every case. Frees a (also
 * on failure; p stays the caller's).
 * *final: in, whether to finalize; out, whether the file was finalized.
 * If finalizing fails (a full disk, a layout libhdf5 reads otherwise), it
 * is undone (anchors back) and the close goes on unfinalized: H5L_OK with
 * *final 0 and err saying why. */
int h5l_anchor_finish(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, const void *journal, size_t jlen, int sync,
                      h5l_final_t *p, int *final, h5l_err_t *err);

/* Finalizing with many processes (writer.c), the first process's part
 * before the copies: the anchors replaced by plan p's objects (built from
 * reader r's schema), their storage allocated. On failure undone (anchors
 * back from s at tick): the close then goes on without finalizing. */
int h5l_anchor_final_build(h5l_anchor_t *a, h5l_final_t *p, h5l_reader_t *r, const h5l_schema_t *s, uint64_t tick,
                           h5l_err_t *err);
/* ... and when a process's copies failed: undone the same way. */
int h5l_anchor_final_undo(h5l_anchor_t *a, const h5l_final_t *p, const h5l_schema_t *s, uint64_t tick);

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

/* For a writer continuing a file made with h5l_anchor_recreate: the
 * anchors of every object of s defined at or before tick. */
int h5l_anchor_rebuild(h5l_anchor_t *a, const h5l_schema_t *s, uint64_t tick, h5l_err_t *err);

/* Error-path close: close the HDF5 file (its I/O errors ignored), leave the
 * user block live (the sidecar journal stays the truth). Frees a. Accepts
 * NULL. */
void h5l_anchor_abort(h5l_anchor_t *a);

#endif
