/* final.h — finalizing a log-layout file: the canonical datasets of its
 * last tick holding that tick's data, kept in place in the log where the
 * log already holds a chunk's bytes in order, copied where they must be
 * assembled (docs/format.md 1.1).
 *
 * Owns a *plan*: per variable, its finalized layout, the chunks holding
 * data with their addresses (in the log, or an ordinal among the copies),
 * the place of its copies and index nodes in /_h5log/fin.K. Every process
 * taking part plans from its own reader of the same journal, so only a
 * few addresses travel (h5l_final_addrs); plans are compared by digest.
 * Then:
 *   1. one process, which owns the HDF5 file through libhdf5 (the
 *      writer's rank 0), builds the datasets and allocates fin.K
 *      (h5l_final_build);
 *   2. every process assembles and writes its share of the copies
 *      (h5l_final_copy): tiles of whole rows of about `window` bytes,
 *      shares balanced by bytes, so each reads a part of the log once and
 *      writes each of its chunks, or a contiguous part of each, once;
 *   3. the first process writes the chunk index nodes and fin.K.index
 *      (h5l_final_index), lets libhdf5 close the file, points the layout
 *      messages at the roots and checks them through libhdf5
 *      (h5l_final_point); h5l_final_unpoint undoes that.
 * MPI is the caller's (writer.c); this module needs libhdf5 and a reader.
 * A plan is used by one thread. */
#ifndef H5L_FINAL_H
#define H5L_FINAL_H

#include <hdf5.h>
#include <stdint.h>

#include "h5log/error.h"
#include "h5log_reader.h"

/* Bytes of one tile of rows: a process copying holds about twice this
 * (the tile assembled, then cut into chunks) plus the engine's window.
 * H5L_FINALIZE_WINDOW in the environment overrides it (at least 1 MiB). */
#define H5L_FINAL_WINDOW ((size_t)32 << 20)
/* A contiguous variable is stored chunked in place only with chunks of at
 * least this size (smaller ones would cost more index than copy). */
#define H5L_FINAL_INPLACE_MIN ((uint64_t)64 << 10)

typedef struct h5l_final h5l_final_t;

/* What a plan does (statistics; tests and benchmarks print them). */
typedef struct h5l_final_stats {
    uint64_t vars;           /* variables finalized */
    uint64_t chunks_inplace; /* chunks whose index entry points into the log */
    uint64_t chunks_copied;  /* chunks assembled into fin.K */
    uint64_t rechunked;      /* contiguous variables stored chunked in place */
    uint64_t contig_copied;  /* contiguous variables copied whole */
    uint64_t bytes_inplace, bytes_copied; /* data bytes in place / written */
    uint64_t fin_bytes;      /* size of fin.K (copies and index nodes) */
    uint64_t tiles;          /* tiles of the whole plan */
} h5l_final_stats_t;

/* Plan the finalize of tick (the reader's newest, normally) of reader r.
 * 0, or H5L_ENOMEM / what the reader returns (a damaged table, EIO), with
 * err set; *out NULL then. */
int h5l_final_plan(h5l_reader_t *r, uint64_t tick, h5l_final_t **out, h5l_err_t *err);

/* A digest of everything the plan decided: equal plans, equal digests. */
uint64_t h5l_final_digest(const h5l_final_t *p);

/* Bytes the finalize adds to the file (fin.K and contiguous data): what
 * the file system must have room for. */
uint64_t h5l_final_room(const h5l_final_t *p);

void h5l_final_stats(const h5l_final_t *p, h5l_final_stats_t *st);

/* Allocates an early, never-filled byte dataset /_h5log/NAME of size
 * bytes; *off its absolute offset. */
typedef int (*h5l_final_alloc_fn)(void *ctx, const char *name, uint64_t size, uint64_t *off, h5l_err_t *err);

/* The first process: build the finalized objects of the plan's tick into
 * file (anchors already removed) from r's schema, and allocate fin.K with
 * alloc. 0, or an error with err set (the caller undoes). */
int h5l_final_build(h5l_final_t *p, hid_t file, h5l_reader_t *r, h5l_final_alloc_fn alloc, void *actx,
                    h5l_err_t *err);

/* The addresses the build learned, for the other processes: *n words,
 * owned by p. h5l_final_set_addrs gives them to another process's plan:
 * 0, or H5L_EINVAL (another plan). */
const uint64_t *h5l_final_addrs(const h5l_final_t *p, size_t *n);
int h5l_final_set_addrs(h5l_final_t *p, const uint64_t *w, size_t n, h5l_err_t *err);

/* Assemble and write process me's share (of nproc) of the copies through
 * fd (the file, open for writing), reading through r. 0, or the error
 * (a damaged log byte: H5L_ECORRUPT naming it; EIO; ENOMEM). */
int h5l_final_copy(h5l_final_t *p, h5l_reader_t *r, int fd, int me, int nproc, h5l_err_t *err);

/* The first process, file still open in libhdf5: write every chunk index
 * (nodes through fd, into fin.K) and the dataset /_h5log/fin.K.index. */
int h5l_final_index(h5l_final_t *p, hid_t file, int fd, h5l_err_t *err);

/* After libhdf5 closed the file at path: point each indexed dataset's
 * layout message at its root (through fd), then open the file read-only
 * with libhdf5 and check that a sample of datasets finds its chunks where
 * the plan put them. 0, or an error (the caller then unpoints). */
int h5l_final_point(h5l_final_t *p, const char *path, int fd, h5l_err_t *err);

/* Give the layouts pointed so far their undefined address back. */
int h5l_final_unpoint(h5l_final_t *p, int fd, h5l_err_t *err);

/* The name of its fin.K dataset (in /_h5log), "" before the build or
 * without one. */
const char *h5l_final_name(const h5l_final_t *p);

void h5l_final_free(h5l_final_t *p);

#endif
