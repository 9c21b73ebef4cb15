/* schema.h — applying schema ops (docs/format.md 3.3) to an h5l_schema_t,
 * with every check an op must pass. The writer applies its own ops before
 * journaling them and readers apply decoded ones, so both sides validate the
 * same way. The schema owns all strings and arrays it holds. */
#ifndef H5L_SCHEMA_H
#define H5L_SCHEMA_H

#include "h5log/format.h"
#include "h5log_reader.h"
#include "h5log/query.h"

/* Initialise with the root group (object id 0). */
int h5l_schema_init(h5l_schema_t *s);
void h5l_schema_free(h5l_schema_t *s);

/* Apply op as made at `tick`. On error nothing changes. The op keeps its
 * pointers (the schema copies what it keeps). */
int h5l_schema_apply(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err);

/* A view of s as of tick `before` for attributes set later (the lazy
 * attribute segments of a checkpointed log, format.md 3.5): it shares s's
 * objects and dimensions and the attribute versions set at or before
 * `before`, and takes ATTR ops only (h5l_schema_apply refuses others).
 * s must not change while v is used; h5l_schema_free(v) frees only what v
 * owns. 0 or H5L_ENOMEM (v then needs no free). */
int h5l_schema_view(h5l_schema_t *v, const h5l_schema_t *s, uint64_t before);

/* Remove every definition stamped with a tick >= tick (a tick that failed
 * to load); of a view, only its own attribute versions. */
void h5l_schema_rollback(h5l_schema_t *s, uint64_t tick);
/* Object id with this path, or -1. */
long h5l_schema_find(const h5l_schema_t *s, const char *path);
/* Dimension id with this name, or -1. */
long h5l_schema_find_dim(const h5l_schema_t *s, const char *name);
/* n DIMLEN ops of dimension dimid at once: at ticks tick + i dt, lengths
 * len + i dl (i < n; n >= 1, dt >= 1 when n > 1), the history as if each
 * were applied in turn (a checkpoint's summary, format.md 3.5). 0, or the
 * first op's error (those before it stay: the caller rolls back). */
int h5l_schema_dimlen_run(h5l_schema_t *s, uint32_t dimid, uint64_t tick, uint64_t len, uint64_t n, uint64_t dt,
                          uint64_t dl, h5l_err_t *err);
/* Current (newest) length of a dimension. */
uint64_t h5l_schema_dimlen_now(const h5l_schema_t *s, uint32_t dimid);
/* netCDF's default fill value of type t (NC_FILL_BYTE, ..., NC_FILL_DOUBLE),
 * in t's byte order, into out (t.size bytes). Cannot fail. */
void h5l_schema_default_fill(h5l_type_t t, void *out);
/* 0 if name may be an attribute's name; else H5L_EINVAL with the reason
 * (names HDF5 dimension scales and netCDF-4 reserve for themselves). */
int h5l_schema_attr_name_ok(const char *name, h5l_err_t *err);
/* VAR op flags (docs/format.md 3.3) */
enum { H5L_VAR_CHUNKED = 1, H5L_VAR_FILL_USER = 2, H5L_VAR_NOFILL = 4 };

/* The index slab shape of a contiguous variable (format.md 3.3). */
void h5l_schema_slab_shape(h5l_type_t t, uint32_t ndims, const uint64_t *dims, uint64_t *slab);

#endif
