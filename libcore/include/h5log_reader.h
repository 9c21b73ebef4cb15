/* h5log_reader.h — reading log-layout files tick by tick (no MPI, no FUSE,
 * no libhdf5).
 *
 * A reader opens a log-layout HDF5 file, live (its journal in the sidecar
 * `FILE.h5lj`) or closed (journal embedded), loads its ticks, and reads any
 * box of any variable as of any loaded tick: fill value first, then every
 * record of ticks <= T that touches the box, in sequence order. New ticks of a
 * live file load incrementally with h5l_reader_refresh.
 *
 * Thread safety: h5l_reader_read and h5l_reader_refresh may run concurrently
 * from any threads (one internal rwlock). The schema returned by
 * h5l_reader_schema may only be looked at between h5l_reader_rdlock and
 * h5l_reader_unlock, because a refresh may grow its arrays. */
#ifndef H5LOG_READER_H
#define H5LOG_READER_H

#include <stddef.h>
#include <stdint.h>
#include "h5log_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An error: a code (enum h5l_error) and a message naming file and reason. */
typedef struct h5l_err {
    int code;
    char msg[512];
} h5l_err_t;

/* On-file datatype descriptor (docs/format.md 3.3). */
enum { H5L_CLASS_INT = 1, H5L_CLASS_FLOAT = 2, H5L_CLASS_STRING = 3 };
typedef struct h5l_type {
    uint8_t cls, size, sign, order; /* order: 0 little-endian, 1 big */
} h5l_type_t;

enum { H5L_OBJ_GROUP = 1, H5L_OBJ_VAR = 2 };

/* How a variable's fill value was chosen (docs/format.md 3.3, VAR flags).
 * DEFAULT: netCDF's default fill of the type, no _FillValue attribute;
 * USER: set by the writer, shown as a _FillValue attribute;
 * NONE: no fill (netCDF NOFILL), unwritten elements read as zero bytes. */
enum { H5L_FILL_DEFAULT = 0, H5L_FILL_USER = 1, H5L_FILL_NONE = 2 };

/* A group or variable. Index in h5l_schema_t.objs is its object id. */
typedef struct h5l_obj {
    int kind;      /* H5L_OBJ_GROUP or H5L_OBJ_VAR; 0 = unused slot */
    char *path;    /* absolute path, "/" for the root */
    uint64_t tick; /* tick that defined it (0 for the root) */
    /* variables only */
    h5l_type_t type;
    int chunked; /* 1: HDF5 chunk shape in chunk[]; 0: index slabs */
    uint32_t ndims;
    uint32_t *dimids; /* ndims */
    uint64_t *chunk;  /* ndims: chunk shape or index slab shape */
    void *fill;       /* type.size bytes: what unwritten elements read as */
    int fill_mode;    /* H5L_FILL_DEFAULT, H5L_FILL_USER or H5L_FILL_NONE */
} h5l_obj_t;

/* A run of a dimension's length history: at tick `tick + i * dt` its
 * length became `len + i * dl`, for i in [0, n) (n >= 1; dt >= 1 when
 * n > 1). A time axis that grows by the same rows every tick keeps one run
 * for its whole history (an entry per tick was 16 bytes per tick of a long
 * log); read it with h5l_schema_dimlen, not by hand. */
typedef struct h5l_dimlen {
    uint64_t tick, len, n, dt, dl;
} h5l_dimlen_t;

typedef struct h5l_dim {
    char *name;
    int unlimited;
    uint64_t tick;      /* tick that defined it */
    h5l_dimlen_t *runs; /* length history: runs of increasing ticks, one entry per tick that set it */
    size_t nruns;
} h5l_dim_t;

typedef struct h5l_attr {
    uint32_t objid;
    char *name;
    h5l_type_t type;
    uint64_t n;    /* elements (characters for strings) */
    void *value;   /* n * type.size bytes */
    uint64_t tick; /* tick that set it */
} h5l_attr_t;

/* The schema's name indexes: opaque, owned by the schema. */
struct h5l_schema_ix;

/* All definitions ever made, stamped with the tick that made them. */
typedef struct h5l_schema {
    h5l_obj_t *objs;
    size_t nobjs, cap_objs;
    h5l_dim_t *dims;
    size_t ndims, cap_dims;
    h5l_attr_t *attrs;
    size_t nattrs, cap_attrs;    /* definition order */
    struct h5l_schema_ix *index; /* names to ids (opaque) */
    /* A view (h5l_reader_schema_at): its objects and dimensions are
     * base's, and so are the names and values of attrs[0, nborrow). */
    const struct h5l_schema *base;
    size_t nborrow;
} h5l_schema_t;

/* Length of dimension dimid as of tick (0 if defined later). */
H5L_API uint64_t h5l_schema_dimlen(const h5l_schema_t *s, uint32_t dimid, uint64_t tick);
/* The newest tick <= tick at which dimension dimid's length was set (its
 * definition or a length change, even to the same length); 0 if none. */
H5L_API uint64_t h5l_schema_dimlen_tick(const h5l_schema_t *s, uint32_t dimid, uint64_t tick);
/* Shape of variable objid as of tick into shape[ndims]. Returns 0 or error. */
H5L_API int h5l_schema_shape(const h5l_schema_t *s, uint32_t objid, uint64_t tick, uint64_t *shape);
/* 1 if attrs[i] is the value of its (object, name) as of tick. */
H5L_API int h5l_schema_attr_current(const h5l_schema_t *s, size_t i, uint64_t tick);
/* Bytes of one element of type t. Cannot fail. */
H5L_API size_t h5l_type_size(h5l_type_t t);

typedef struct h5l_tick_info {
    uint64_t tick, time_ns;
    uint32_t nranks;
    uint64_t data_off, data_size, table_off, table_size, nrecords;
} h5l_tick_info_t;

typedef struct h5l_reader h5l_reader_t;

/* Is `path` a log-layout file (the h5log magic at byte 0)? H5L_OK if so,
 * H5L_EFORMAT if not, H5L_ENOTFOUND / H5L_EIO if it cannot be read. Reads 8
 * bytes; says nothing of the rest of the file. */
H5L_API int h5l_probe(const char *path, h5l_err_t *err);

/* Open `path` and load every complete tick present. Fails (with *out NULL)
 * when nothing can be read: H5L_EFORMAT if it is not a log-layout file or
 * of another format version, H5L_ECORRUPT for a damaged user block or
 * journal header, H5L_EIO, H5L_ENOMEM. Damage met while loading ticks does
 * not fail the open: the ticks before it are served and h5l_reader_damage
 * says which tick is damaged and why. */
H5L_API int h5l_reader_open(const char *path, h5l_reader_t **out, h5l_err_t *err);

/* h5l_reader_open with flags. A reader starts from the journal's index
 * checkpoints when it has them (docs/format.md 3.5): ticks they cover are
 * not read at open, and a record table is decoded and verified the first
 * time a read needs it, so damage in it is reported by that read.
 * H5L_READER_FULL: ignore checkpoints, read the whole journal and verify
 * every record table at open (h5logdump --check).
 * H5L_READER_LAZY_ATTRS: a checkpointed segment whose ticks set attributes
 * is opened from its summary too (format.md 3.5): h5l_reader_schema then
 * holds each such segment's last values as of its last tick, and the
 * attributes of a tick inside it are h5l_reader_schema_at's. Without the
 * flag, h5l_reader_schema is exact for every tick (such segments are read
 * at open: a log setting an attribute at every tick opens 50x slower). */
enum { H5L_READER_FULL = 1, H5L_READER_LAZY_ATTRS = 2 };
H5L_API int h5l_reader_open_flags(const char *path, unsigned flags, h5l_reader_t **out, h5l_err_t *err);
/* The newest tick the reader took from index checkpoints at open, 0 if it
 * read the whole journal (none, unusable ones, or H5L_READER_FULL). */
H5L_API uint64_t h5l_reader_ckpt_last(h5l_reader_t *r);
/* Of the checkpointed segments the reader opened from (*nseg), how many it
 * opened from their summaries alone (*nsummary: segments whose ticks only
 * grow dimensions, docs/format.md 3.5). */
H5L_API void h5l_reader_ckpt_segments(h5l_reader_t *r, uint64_t *nseg, uint64_t *nsummary);

/* Load ticks committed since the last call. *nnew (may be NULL) gets how many.
 * A torn tail is not an error (and costs no read until the journal grows
 * past it). After damage the reader keeps serving the ticks loaded before
 * it, and the same error is returned again. */
H5L_API int h5l_reader_refresh(h5l_reader_t *r, int *nnew, h5l_err_t *err);

/* The damage that stopped loading: 0 if none; else its code, *err its
 * message and *tick (may be NULL) the first tick that could not be loaded
 * (the reader serves the ticks before it). */
H5L_API int h5l_reader_damage(h5l_reader_t *r, uint64_t *tick, h5l_err_t *err);

/* Newest loaded tick (0: none yet). */
H5L_API uint64_t h5l_reader_ntick(h5l_reader_t *r);
/* 1 once the writer has closed the file (CLOSE record seen). */
H5L_API int h5l_reader_closed(h5l_reader_t *r);
/* 1 if the journal was read from the sidecar (file still being written). */
H5L_API int h5l_reader_live(h5l_reader_t *r);
/* Tick info of tick t (1..ntick): 0, H5L_ENOTFOUND (no such tick), or, for
 * a checkpointed tick whose segment's frame is read now for the first time
 * and fails (damaged since open, unreadable, out of memory), H5L_ECORRUPT,
 * H5L_EIO or H5L_ENOMEM. */
H5L_API int h5l_reader_tick_info(h5l_reader_t *r, uint64_t t, h5l_tick_info_t *out);
/* Bytes of journal consumed (header included). */
H5L_API uint64_t h5l_reader_journal_pos(h5l_reader_t *r);
/* Total records loaded. */
H5L_API uint64_t h5l_reader_nrecords(h5l_reader_t *r);
/* The file identity (16 bytes). */
H5L_API const uint8_t *h5l_reader_id(h5l_reader_t *r);
H5L_API const char *h5l_reader_path(h5l_reader_t *r);

/* Schema access: valid only while the read lock is held. */
H5L_API void h5l_reader_rdlock(h5l_reader_t *r);
H5L_API void h5l_reader_unlock(h5l_reader_t *r);
H5L_API const h5l_schema_t *h5l_reader_schema(h5l_reader_t *r);
/* 1 if h5l_reader_schema's attributes are those of tick (always, unless
 * the reader was opened with H5L_READER_LAZY_ATTRS and tick lies inside a
 * segment it opened from its attribute list, before the segment's last
 * tick). Under the read lock. */
H5L_API int h5l_reader_attrs_exact(h5l_reader_t *r, uint64_t tick);
/* *out: a schema exact as of tick: h5l_reader_schema's, or (when
 * h5l_reader_attrs_exact says no) a view sharing its objects and
 * dimensions with the attribute versions of tick read from the segment's
 * checkpoint (the frame read and decoded again). Under the read lock,
 * until h5l_reader_schema_release(r, *out). 0, or H5L_ENOMEM, H5L_EIO,
 * H5L_ECORRUPT with err naming the file and tick (*out is then
 * h5l_reader_schema's, which the caller must not use for tick). */
H5L_API int h5l_reader_schema_at(h5l_reader_t *r, uint64_t tick, const h5l_schema_t **out, h5l_err_t *err);
H5L_API void h5l_reader_schema_release(h5l_reader_t *r, const h5l_schema_t *s);

/* Read box (start, count) of variable objid as of tick into buf (row-major,
 * the variable's type). The box must lie inside the shape at that tick.
 * Every log byte used is verified (H5L_ECORRUPT if it fails). */
H5L_API int h5l_reader_read(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start,
                            const uint64_t *count, void *buf, h5l_err_t *err);

/* The log bytes h5l_reader_read of the same box would read (*bytes): the
 * checksum segments its records' pieces lie in, each once (docs/libcore.md,
 * "Read"). A box whose pieces are scattered thinly over the log (a z-plane
 * chunk of x-slabs) costs far more than its own bytes: a cache may then
 * assemble the chunks sharing those segments in one pass. H5L_OK, or as
 * h5l_reader_read. */
H5L_API int h5l_reader_read_cost(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start,
                                 const uint64_t *count, uint64_t *bytes, h5l_err_t *err);

/* What the records of one index chunk look like as of a tick, for a cache
 * of assembled chunks and its skip path. */
typedef struct h5l_chunk_info {
    uint64_t nrec;        /* records touching the chunk (ticks <= tick) that
                           * still show: the newest back to those covering
                           * the chunk, older ones hidden under them left out */
    uint64_t ver[3];      /* (tick, rank, order) of the newest; all 0 if none */
    int direct;           /* 1: the newest record alone covers the box, its
                           * bytes one contiguous run in the log */
    uint64_t direct_off;  /* then: absolute offset of the box's first element */
    uint64_t direct_tick; /* then: the record's tick and rank (h5l_reader_pread) */
    uint32_t direct_rank;
    int disjoint; /* 1: no element of the box is written by two of
                           * those records (so reading any part of it reads each
                           * log byte once); only decided for chunks of at
                           * most H5L_CHUNK_INFO_SCAN records, else 0 */
    int run;          /* 1: the box's bytes, in row-major order, are one
                       * contiguous run of the log (direct, or pieces of
                       * several records that follow each other there: the
                       * parts of a row every rank wrote in one tick); only
                       * decided for chunks of at most H5L_CHUNK_INFO_SCAN
                       * records, else 0 */
    uint64_t run_off; /* then: absolute offset of the box's first element */
} h5l_chunk_info_t;
#define H5L_CHUNK_INFO_SCAN 64

/* Describe chunk `coord` (chunk coordinates) of variable objid as of tick;
 * (start, count) is the chunk's box clipped to the variable's shape. The
 * content of the box is a function of the variable, the box and ver: equal
 * versions mean equal bytes. */
H5L_API int h5l_reader_chunk_info(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *coord,
                                  const uint64_t *start, const uint64_t *count, h5l_chunk_info_t *out, h5l_err_t *err);

/* Is box (start, count) of variable objid at tick one contiguous run of
 * the log, its elements in row-major order (as h5l_chunk_info_t.run says
 * of a chunk)? 1 with *off its first element's offset, 0 if not (or too
 * many records to tell), or a negative error. */
H5L_API int h5l_reader_box_run(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *start,
                               const uint64_t *count, uint64_t *off, h5l_err_t *err);
/* The box (start, count) of the record that wrote element `point` of
 * variable objid last as of tick: 1, 0 if no record wrote it, or a
 * negative error. */
H5L_API int h5l_reader_newest_box(h5l_reader_t *r, uint64_t tick, uint32_t objid, const uint64_t *point,
                                  uint64_t *start, uint64_t *count, h5l_err_t *err);

/* Call fn(ctx, coord) once for every index chunk of variable objid
 * (chunk coordinates) that holds a record of tick <= tick, in no
 * particular order: the chunks a canonical file must allocate (the others
 * read as the fill value). Stops at and returns the first non-zero result
 * of fn. Cost O(chunks that hold records), whatever the variable's shape.
 * Call with the read lock held (h5l_reader_rdlock). */
typedef int (*h5l_chunk_fn)(void *ctx, const uint64_t *coord);
H5L_API int h5l_reader_chunks(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_fn fn, void *ctx);
/* The same chunks in runs along the first dimension: fn(ctx, coord, n) for
 * the chunks coord + i e0, i < n (n >= 1; a scalar's one chunk: n = 1).
 * A log of rows gives one call for all its chunks of checkpointed ticks
 * (the skeleton of a million-row variable took a tenth of a second chunk
 * by chunk). */
typedef int (*h5l_chunk_run_fn)(void *ctx, const uint64_t *coord, uint64_t n);
H5L_API int h5l_reader_chunk_runs(h5l_reader_t *r, uint64_t tick, uint32_t objid, h5l_chunk_run_fn fn, void *ctx);
/* The newest tick <= tick at which a chunk of some variable got its first
 * record (0 if none): while it stays the same, so does every variable's
 * h5l_reader_chunks set. Call with the read lock held. */
H5L_API uint64_t h5l_reader_chunks_version(h5l_reader_t *r, uint64_t tick);

/* Read n log bytes at absolute offset off, which lie inside the data of
 * (tick, rank) — the skip path of a cache, with h5l_chunk_info_t's direct_*
 * fields — verifying every byte against its data segment's checksum.
 * H5L_OK; H5L_ECORRUPT when the data fails its checksum (the message names
 * the file, tick, rank and byte range); H5L_EIO; H5L_EINVAL if the range is
 * not inside that data. */
H5L_API int h5l_reader_pread(h5l_reader_t *r, uint64_t tick, uint32_t rank, void *buf, size_t n, uint64_t off,
                             h5l_err_t *err);

/* Check the journal's index checkpoints against its TICK frames and record
 * tables (h5logdump --check; docs/format.md 3.5): report(ctx, message) for
 * each damaged checkpoint (readers skip those) and each one whose content
 * differs from what it summarises (readers would trust it). Only the
 * journal the reader has read is looked at (h5l_reader_refresh reads on),
 * so checkpoints past its damage, or appended to a live file since, are
 * neither compared nor counted. *found gets the
 * checkpoints met, *bad the problems reported (either may be NULL). 0, or
 * H5L_ENOMEM / H5L_EIO. Best on a reader opened with H5L_READER_FULL (every
 * table verified first). */
H5L_API int h5l_reader_check_checkpoints(h5l_reader_t *r, void (*report)(void *ctx, const char *msg), void *ctx,
                                         uint64_t *found, uint64_t *bad, h5l_err_t *err);

/* Read and verify every data byte of tick t (h5logdump --check). *bad gets
 * the number of segments that fail their checksum; H5L_ECORRUPT (message:
 * the first) if any, H5L_EIO if reading fails. */
H5L_API int h5l_reader_verify(h5l_reader_t *r, uint64_t tick, uint64_t *bad, h5l_err_t *err);

/* From now on, log bytes read for the caller are dropped from the kernel's
 * page cache once every byte of their 2 MiB segment has been read (a server
 * whose clients cache what it served need not keep a second copy; see
 * libcore/src/read/drop.h). Advisory: costs at most re-reads from disk. */
H5L_API void h5l_reader_dropbehind(h5l_reader_t *r);
/* Bytes of the log the kernel was advised to drop so far (statistics). */
H5L_API uint64_t h5l_reader_dropped(h5l_reader_t *r);

/* Record tables of checkpointed ticks decoded when reads needed them
 * (statistics): *held bytes kept now, *loads decodes so far, *evicted
 * tables dropped so far. The reader keeps at most H5L_LAZY_MAX bytes of
 * them (environment at open; default 64 MiB): past it, read calls drop the
 * least recently used, which are decoded and verified again when needed.
 * Any pointer may be NULL. */
H5L_API void h5l_reader_tables(h5l_reader_t *r, uint64_t *held, uint64_t *loads, uint64_t *evicted);

/* Bytes read from the log and records applied since open (statistics). */
H5L_API void h5l_reader_stats(h5l_reader_t *r, uint64_t *bytes, uint64_t *records);

/* Free everything. Accepts NULL. */
H5L_API void h5l_reader_close(h5l_reader_t *r);

#ifdef __cplusplus
}
#endif
#endif
