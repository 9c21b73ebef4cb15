/* canon.c — canonical HDF5 objects from a schema (see canon.h).
 *
 * netCDF-4 compatibility (checked with ncdump, see docs/format.md and the
 * design notes): every dimension becomes a dimension scale at the root.
 * A 1-D root variable named like its dimension is that dimension's
 * coordinate variable and is the scale itself; any other dimension gets a
 * data-less float dataset whose NAME attribute is netCDF's "This is a netCDF
 * dimension but not a netCDF variable" marker, so ncdump shows the
 * dimension and no extra variable. netCDF fails on a variable with scales on
 * only some dimensions, so a variable gets scales on all or none.
 *
 * Order: netCDF-4 files track and index the creation order of links and
 * attributes, and netCDF readers list variables and attributes in it
 * (alphabetically when it is not tracked). So every group, dataset and the
 * root track it, and objects are created in the writer's order, the way
 * netCDF-C interleaves dimension scales with variables (make_objects);
 * every scale carries _Netcdf4Dimid, by which netCDF numbers dimensions,
 * so dimensions list in definition order too. A variable's _FillValue is
 * its first attribute, then its attributes in the order each name was
 * FIRST defined (a replaced attribute keeps its place, as in netCDF).
 *
 * Fill: a variable's HDF5 fill value is its fill (netCDF's default for the
 * type unless set); a fill set by the writer is also the _FillValue
 * attribute netCDF readers mask by; a NOFILL variable has neither, which is
 * how netCDF-C recognises NOFILL in an HDF5 file. */
#include "h5log/canon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hdf5_hl.h>

#include "h5log/h5type.h"
#include "schema.h"

#define NC_DIM_MARK "This is a netCDF dimension but not a netCDF variable."
#define CRT_ORDER (H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED)

/* Objects carry no modification times (as netCDF-C writes them): a
 * canonical file built in full is then a function of its tick alone, so two
 * builds of one tick (the daemon after a restart, the ticks tree,
 * h5logreplay) give the same bytes. (A live file's skeleton patched in
 * place, fused/skel.c, has the same content in another layout.) */
hid_t h5l_canon_fcpl(void)
{
    hid_t p = H5Pcreate(H5P_FILE_CREATE);
    if (p >= 0 && (H5Pset_link_creation_order(p, CRT_ORDER) < 0 || H5Pset_attr_creation_order(p, CRT_ORDER) < 0 ||
                   H5Pset_obj_track_times(p, 0) < 0)) {
        H5Pclose(p);
        return -1;
    }
    return p;
}

static hid_t group_cpl(void)
{
    hid_t p = H5Pcreate(H5P_GROUP_CREATE);
    if (p >= 0 && (H5Pset_link_creation_order(p, CRT_ORDER) < 0 || H5Pset_attr_creation_order(p, CRT_ORDER) < 0 ||
                   H5Pset_obj_track_times(p, 0) < 0)) {
        H5Pclose(p);
        return -1;
    }
    return p;
}

int h5l_canon_group(hid_t file, const char *path, h5l_err_t *err)
{
    hid_t gcpl = group_cpl();
    hid_t g = gcpl < 0 ? -1 : H5Gcreate2(file, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (gcpl >= 0) H5Pclose(gcpl);
    if (g < 0) return h5l_err_set(err, H5L_EHDF5, "cannot create group '%s'", path);
    H5Gclose(g);
    return H5L_OK;
}

int h5l_canon_attr(hid_t obj, const h5l_attr_t *a, h5l_err_t *err)
{
    int rc = H5L_OK;
    hid_t t = h5l_type_to_hid(a->type, a->type.cls == H5L_CLASS_STRING ? a->n : 0);
    hid_t sp = -1, at = -1;
    if (t < 0) return h5l_err_set(err, H5L_ETYPE, "attribute '%s': unsupported type", a->name);
    if (a->type.cls == H5L_CLASS_STRING) {
        sp = H5Screate(H5S_SCALAR);
    } else {
        hsize_t n = a->n;
        sp = H5Screate_simple(1, &n, NULL);
    }
    if (H5Aexists(obj, a->name) > 0) H5Adelete(obj, a->name);
    at = sp < 0 ? -1 : H5Acreate2(obj, a->name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char *empty = "";
    const void *val = a->type.cls == H5L_CLASS_STRING && a->n == 0 ? (const void *)empty : a->value;
    if (at < 0 || H5Awrite(at, t, val) < 0) rc = h5l_err_set(err, H5L_EHDF5, "cannot write attribute '%s'", a->name);
    if (at >= 0) H5Aclose(at);
    if (sp >= 0) H5Sclose(sp);
    H5Tclose(t);
    return rc;
}

int h5l_canon_attr_rewrite(hid_t obj, const h5l_attr_t *a, h5l_err_t *err)
{
    if (H5Aexists(obj, a->name) <= 0) return h5l_err_set(err, H5L_ESTATE, "attribute '%s' is new", a->name);
    hid_t t = h5l_type_to_hid(a->type, a->type.cls == H5L_CLASS_STRING ? a->n : 0);
    if (t < 0) return h5l_err_set(err, H5L_ETYPE, "attribute '%s': unsupported type", a->name);
    hid_t at = H5Aopen(obj, a->name, H5P_DEFAULT);
    hid_t at_t = at < 0 ? -1 : H5Aget_type(at), at_s = at < 0 ? -1 : H5Aget_space(at);
    int rc = H5L_OK;
    if (at < 0 || at_t < 0 || at_s < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "cannot open attribute '%s'", a->name);
    } else {
        hsize_t n = 0;
        int scalar = H5Sget_simple_extent_type(at_s) == H5S_SCALAR;
        int rank = H5Sget_simple_extent_ndims(at_s);
        if (rank == 1) H5Sget_simple_extent_dims(at_s, &n, NULL);
        int same_space = a->type.cls == H5L_CLASS_STRING ? scalar : (rank == 1 && n == a->n);
        if (H5Tequal(at_t, t) <= 0 || !same_space) {
            rc = h5l_err_set(err, H5L_ESTATE, "attribute '%s' changed type or shape", a->name);
        } else {
            const char *empty = "";
            const void *val = a->type.cls == H5L_CLASS_STRING && a->n == 0 ? (const void *)empty : a->value;
            if (H5Awrite(at, t, val) < 0) rc = h5l_err_set(err, H5L_EHDF5, "cannot write attribute '%s'", a->name);
        }
    }
    if (at_s >= 0) H5Sclose(at_s);
    if (at_t >= 0) H5Tclose(at_t);
    if (at >= 0) H5Aclose(at);
    H5Tclose(t);
    return rc;
}

/* Chunks of the shape past which a skeleton allocates only the chunks that
 * hold data. Below it every chunk is allocated early, the path libhdf5
 * 1.10.8 is known to handle: with incremental allocation and chunks
 * written one by one into several datasets, H5Fclose failed on some files
 * ("can't remove tag info from list" in its metadata cache, then a corrupt
 * heap), not yet understood. */
#define SPARSE_CHUNKS ((uint64_t)1 << 16)

static int sparse_shape(uint32_t ndims, const hsize_t *dims, const hsize_t *chunk)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < ndims; d++) {
        uint64_t c = (dims[d] + chunk[d] - 1) / chunk[d];
        if (c > SPARSE_CHUNKS || (n *= c) > SPARSE_CHUNKS) return 1;
    }
    return 0;
}

/* The property lists, type and dataspace of the last dataset created,
 * kept for the next one: a model's variables mostly share them, and a
 * dataset creation property list made, filled (chunk, fill value, times)
 * and closed per variable cost a third of libhdf5's time per variable on
 * top of the creation itself (bench/h5floor's variants). The key is every
 * input the lists depend on. Owned by one build; hids closed by
 * props_free. */
#define PKEY_MAX (8 + 8 * H5L_MAX_DIMS + 256)
typedef struct props {
    hid_t dcpl, type, space;
    uint8_t key[PKEY_MAX]; /* dcpl and type */
    size_t keylen;
    hsize_t sdims[2 * H5L_MAX_DIMS]; /* space: dims, then max dims */
    uint32_t sndims;
    int have_space;
} props_t;

#define PROPS_INIT {-1, -1, -1, {0}, 0, {0}, 0, 0}

static void props_free(props_t *p)
{
    if (p->dcpl >= 0) H5Pclose(p->dcpl);
    if (p->type >= 0) H5Tclose(p->type);
    if (p->space >= 0) H5Sclose(p->space);
    *p = (props_t)PROPS_INIT;
}

/* How the dataset's storage is allocated (alloc resolved for its shape). */
enum { ST_NONE_INCR, ST_NONE_LATE, ST_EARLY_SPARSE, ST_EARLY_ALL, ST_OTHER };

/* chunk: the dataset's chunk shape (o->ndims long), or NULL: contiguous. */
static int make_props(props_t *p, const h5l_obj_t *o, const uint64_t *chunk, int st, h5l_err_t *err)
{
    uint8_t key[PKEY_MAX];
    size_t k = 0;
    key[k++] = o->type.cls;
    key[k++] = o->type.size;
    key[k++] = o->type.sign;
    key[k++] = o->type.order;
    key[k++] = (uint8_t)(chunk != NULL);
    key[k++] = (uint8_t)o->ndims;
    key[k++] = (uint8_t)st;
    key[k++] = (uint8_t)o->fill_mode;
    for (uint32_t d = 0; chunk && d < o->ndims; d++, k += 8) memcpy(key + k, &chunk[d], 8);
    if (o->fill && o->fill_mode != H5L_FILL_NONE) {
        memcpy(key + k, o->fill, o->type.size);
        k += o->type.size;
    }
    if (p->dcpl >= 0 && k == p->keylen && memcmp(key, p->key, k) == 0) return H5L_OK;
    if (p->dcpl >= 0) H5Pclose(p->dcpl);
    if (p->type >= 0) H5Tclose(p->type);
    p->dcpl = p->type = -1;
    p->keylen = 0;
    hid_t t = h5l_type_to_hid(o->type, 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = H5L_OK;
    if (t < 0 || dcpl < 0 || H5Pset_obj_track_times(dcpl, 0) < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "'%s': cannot make dataspace or type", o->path);
        goto out;
    }
    if (chunk && o->ndims) {
        hsize_t hch[H5L_MAX_DIMS];
        for (uint32_t d = 0; d < o->ndims; d++) hch[d] = chunk[d]; /* never larger than a fixed dimension */
        if (H5Pset_chunk(dcpl, (int)o->ndims, hch) < 0) {
            rc = h5l_err_set(err, H5L_EHDF5, "'%s': bad chunk shape", o->path);
            goto out;
        }
    }
    H5Pset_attr_creation_order(dcpl, CRT_ORDER);
    /* An anchor (H5L_ALLOC_NONE) has no storage and an undefined fill
     * value: libhdf5 then refuses to read it ("dataset doesn't exist, no
     * data can be read") instead of returning fill values as if they were
     * the data (docs/format.md 1). Finalizing replaces it. */
    int none = st == ST_NONE_INCR || st == ST_NONE_LATE;
    if (none && H5Pset_fill_value(dcpl, t, NULL) < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "'%s': cannot leave the fill value undefined", o->path);
        goto out;
    }
    if (!none && o->fill_mode != H5L_FILL_NONE && H5Pset_fill_value(dcpl, t, o->fill) < 0) {
        rc = h5l_err_set(err, H5L_EHDF5, "'%s': cannot set the fill value", o->path);
        goto out;
    }
    /* chunked with more than SPARSE_CHUNKS chunks: none allocated here;
     * the caller allocates exactly the chunks that hold data (an axis may
     * be sparse: one row at t = 2^40 must not allocate 2^36 chunks), the
     * others read as the fill value. So the fill time stays "if set"
     * (netCDF's): with "never" libhdf5 leaves the reader's buffer untouched
     * for a missing chunk. */
    if (st == ST_EARLY_SPARSE || st == ST_NONE_INCR) {
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_INCR);
    } else if (st == ST_EARLY_ALL) {
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    } else if (st == ST_NONE_LATE) {
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_LATE);
    }
    memcpy(p->key, key, k);
    p->keylen = k;
    p->dcpl = dcpl;
    p->type = t;
    return H5L_OK;
out:
    if (dcpl >= 0) H5Pclose(dcpl);
    if (t >= 0) H5Tclose(t);
    return rc;
}

static int make_space(props_t *p, const h5l_obj_t *o, const hsize_t *dims, const hsize_t *maxd)
{
    if (p->have_space && p->sndims == o->ndims && !memcmp(p->sdims, dims, o->ndims * sizeof *dims) &&
        !memcmp(p->sdims + H5L_MAX_DIMS, maxd, o->ndims * sizeof *maxd))
        return H5L_OK;
    if (p->space >= 0) H5Sclose(p->space);
    p->have_space = 0;
    p->space = o->ndims ? H5Screate_simple((int)o->ndims, dims, maxd) : H5Screate(H5S_SCALAR);
    if (p->space < 0) return H5L_EHDF5;
    memcpy(p->sdims, dims, o->ndims * sizeof *dims);
    memcpy(p->sdims + H5L_MAX_DIMS, maxd, o->ndims * sizeof *maxd);
    p->sndims = o->ndims;
    p->have_space = 1;
    return H5L_OK;
}

/* h5l_canon_dataset, with the property lists of p (kept there for the
 * next variable). */
static int canon_dataset(hid_t file, const h5l_schema_t *s, uint32_t objid, uint64_t tick, int alloc,
                         const uint64_t *rechunk, hid_t *dset, props_t *p, h5l_err_t *err)
{
    const h5l_obj_t *o = &s->objs[objid];
    /* the chunk shape: the variable's, or for a contiguous one the
     * finalizer's (rechunk: stored chunked in place, format.md 1.1) */
    const uint64_t *cshape = o->chunked && o->ndims ? o->chunk : rechunk && o->ndims ? rechunk : NULL;
    hsize_t dims[H5L_MAX_DIMS], maxd[H5L_MAX_DIMS], chunk[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < o->ndims; d++) {
        dims[d] = h5l_schema_dimlen(s, o->dimids[d], tick);
        maxd[d] = s->dims[o->dimids[d]].unlimited ? H5S_UNLIMITED : dims[d];
        chunk[d] = o->chunk[d];
    }
    /* libhdf5 counts a dataset's elements and bytes in 64 bits, signed in
     * places (H5Sget_select_npoints), and the daemon numbers chunks in
     * row-major order in 64 bits: a variable of 2^63 bytes or more (an
     * unlimited axis grown to 2^40 over another of 2^24) has no canonical
     * dataset, so the build says so instead of wrapping (wrong chunks).
     * An anchor (H5L_ALLOC_NONE) holds nothing and is never read: such a
     * file can still be closed, unfinalized. */
    uint64_t bytes = o->type.size;
    int zero = alloc == H5L_ALLOC_NONE;
    for (uint32_t d = 0; d < o->ndims; d++) zero |= dims[d] == 0;
    for (uint32_t d = 0; !zero && d < o->ndims; d++) {
        if (bytes > (uint64_t)INT64_MAX / dims[d])
            return h5l_err_set(err, H5L_ERANGE,
                               "'%s' holds 2^63 bytes or more at tick %llu (dimension %u is %llu long): "
                               "no HDF5 dataset can",
                               o->path, (unsigned long long)tick, d, (unsigned long long)dims[d]);
        bytes *= dims[d];
    }
    int st = ST_OTHER;
    if (alloc == H5L_ALLOC_EARLY)
        st = o->chunked && sparse_shape(o->ndims, dims, chunk) ? ST_EARLY_SPARSE : ST_EARLY_ALL;
    else if (alloc == H5L_ALLOC_CHUNKS)
        st = cshape ? ST_EARLY_SPARSE : ST_EARLY_ALL;
    else if (alloc == H5L_ALLOC_LIVE) {
        int later_unlim = 0; /* an unlimited dimension after the first */
        for (uint32_t d = 1; d < o->ndims; d++) later_unlim |= s->dims[o->dimids[d]].unlimited;
        st = o->chunked && (!later_unlim || sparse_shape(o->ndims, dims, chunk)) ? ST_EARLY_SPARSE : ST_EARLY_ALL;
    } else if (alloc == H5L_ALLOC_NONE)
        st = o->chunked ? ST_NONE_INCR : ST_NONE_LATE;
    int rc = make_props(p, o, cshape, st, err);
    if (rc) return rc;
    if (make_space(p, o, dims, maxd)) return h5l_err_set(err, H5L_EHDF5, "'%s': cannot make dataspace or type", o->path);
    *dset = H5Dcreate2(file, o->path, p->type, p->space, H5P_DEFAULT, p->dcpl, H5P_DEFAULT);
    if (*dset < 0) return h5l_err_set(err, H5L_EHDF5, "cannot create dataset '%s'", o->path);
    if (o->fill_mode == H5L_FILL_USER) { /* first attribute, as netCDF-4 writes it */
        h5l_attr_t fv = {objid, "_FillValue", o->type, 1, o->fill, o->tick};
        rc = h5l_canon_attr(*dset, &fv, err);
        if (rc) {
            H5Dclose(*dset);
            *dset = -1;
        }
    }
    return rc;
}

int h5l_canon_dataset(hid_t file, const h5l_schema_t *s, uint32_t objid, uint64_t tick, int alloc, hid_t *dset,
                      h5l_err_t *err)
{
    props_t p = PROPS_INIT;
    int rc = canon_dataset(file, s, objid, tick, alloc, NULL, dset, &p, err);
    props_free(&p);
    return rc;
}

/* One build: the schema at a tick and what is known so far. */
typedef struct cbuild {
    hid_t file;
    const h5l_schema_t *s;
    uint64_t tick;
    int alloc;
    const uint64_t *const *rechunk; /* per object: a contiguous variable's chunk shape, or NULL */
    h5l_canon_var_fn fn;
    void *ctx;
    h5l_err_t *err;
    long *coord;           /* per dimension: its coordinate variable, or -1 */
    char *scalable;        /* per dimension: has a scale (placeholder or coordinate variable) */
    char *have;            /* per dimension: its scale exists (scale_ref is set) */
    hobj_ref_t *scale_ref; /* per dimension: object reference of its scale */
    hobj_ref_t *refs;      /* per object: object reference of a variable */
    char *listed;          /* per object: its DIMENSION_LIST is written */
    hid_t vlt;             /* vlen of object references (DIMENSION_LIST) */
    props_t props;         /* the last variable's property lists */
} cbuild_t;

/* The coordinate variable of dimension d (a 1-D root variable "/name" over
 * d), or -1. */
static long coord_var(const h5l_schema_t *s, uint32_t d, uint64_t tick)
{
    char path[1024];
    snprintf(path, sizeof path, "/%s", s->dims[d].name);
    long id = h5l_schema_find(s, path);
    if (id < 0 || s->objs[id].tick > tick || s->objs[id].kind != H5L_OBJ_VAR) return -1;
    const h5l_obj_t *o = &s->objs[id];
    return o->ndims == 1 && o->dimids[0] == d ? id : -1;
}

/* The data-less scale of dimension d (no coordinate variable): a dataset
 * named like the dimension whose NAME is netCDF's marker. */
static int make_placeholder(hid_t file, const h5l_schema_t *s, uint64_t tick, size_t d, const char *path,
                            h5l_err_t *err)
{
    hsize_t len = h5l_schema_dimlen(s, (uint32_t)d, tick);
    hsize_t maxd = s->dims[d].unlimited ? H5S_UNLIMITED : len;
    hsize_t ch = 1024;
    hid_t sp = H5Screate_simple(1, &len, &maxd);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_obj_track_times(dcpl, 0);
    if (s->dims[d].unlimited) H5Pset_chunk(dcpl, 1, &ch);
    H5Pset_attr_creation_order(dcpl, CRT_ORDER);
    H5Pset_alloc_time(dcpl, s->dims[d].unlimited ? H5D_ALLOC_TIME_INCR : H5D_ALLOC_TIME_LATE);
    hid_t ds = H5Dcreate2(file, path, H5T_IEEE_F32BE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    char mark[128];
    snprintf(mark, sizeof mark, NC_DIM_MARK "%10llu", (unsigned long long)len);
    int bad = ds < 0 || H5DSset_scale(ds, mark) < 0;
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
    return bad ? h5l_err_set(err, H5L_EHDF5, "cannot create dimension scale '%s'", path) : H5L_OK;
}

/* The dimension-scale attributes HDF5's H5DS module writes, written
 * directly, each once. H5DSattach_scale re-reads and rewrites the scale's
 * whole REFERENCE_LIST (and the variable's DIMENSION_LIST) on every call,
 * so attaching n variables to one dimension costs O(n^2) bytes: a file
 * with 20,000 variables over "time" took many seconds per skeleton. The
 * layout is the one of H5DS in HDF5 1.10 (hl/src/H5DS.c):
 *   DIMENSION_LIST on a variable: 1-D, one element per dimension, each a
 *     vlen of object references (here always one: its dimension's scale);
 *   REFERENCE_LIST on a scale: 1-D, one element per attached (variable,
 *     dimension), compound {"dataset": object reference, "dimension":
 *     native int} of the size of H5DS's C struct, in attach order
 *     (variables in object order, dimensions ascending); no attribute when
 *     nothing is attached (1.10's H5DSset_scale creates none).
 * A variable's DIMENSION_LIST is written while the variable is still open
 * when its scales exist already (the usual case), else by attach_scales;
 * either way right after _FillValue and before its other attributes, where
 * H5DSattach_scale put it. tests/fused/test_canon.c checks the equivalence
 * with H5DSattach_scale. */
typedef struct ds_ref {
    hobj_ref_t ref;
    int dim_idx;
} ds_ref_t;

static int write_attr_raw(hid_t obj, const char *name, hid_t type, hsize_t n, const void *buf)
{
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t at = sp < 0 ? -1 : H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int bad = at < 0 || H5Awrite(at, type, buf) < 0;
    if (at >= 0) H5Aclose(at);
    if (sp >= 0) H5Sclose(sp);
    return bad ? -1 : 0;
}

/* Does variable i get dimension scales (on all its dimensions: netCDF
 * fails on a variable with scales on only some)? Coordinate variables are
 * scales themselves and get none. Final once every dimension of i is
 * processed. */
static int gets_scales(const cbuild_t *b, size_t i)
{
    const h5l_obj_t *o = &b->s->objs[i];
    if (o->kind != H5L_OBJ_VAR || o->tick > b->tick || o->ndims == 0) return 0;
    for (uint32_t k = 0; k < o->ndims; k++)
        if (!b->scalable[o->dimids[k]]) return 0;
    return !(o->ndims == 1 && b->coord[o->dimids[0]] == (long)i);
}

static int write_dimlist(cbuild_t *b, size_t i, hid_t ds)
{
    const h5l_obj_t *o = &b->s->objs[i];
    hvl_t dl[H5L_MAX_DIMS];
    for (uint32_t k = 0; k < o->ndims; k++) {
        dl[k].len = 1;
        dl[k].p = (void *)&b->scale_ref[o->dimids[k]];
    }
    if (write_attr_raw(ds, "DIMENSION_LIST", b->vlt, o->ndims, dl) < 0)
        return h5l_err_set(b->err, H5L_EHDF5, "cannot attach dimension scales to '%s'", o->path);
    b->listed[i] = 1;
    return H5L_OK;
}

/* The caller's callback for variable i; its failure names the variable
 * and keeps the reason the callback gave, if it gave one. */
static int var_fn(cbuild_t *b, size_t i, hid_t ds)
{
    if (b->err) b->err->msg[0] = 0;
    int rc = b->fn(b->ctx, (uint32_t)i, ds);
    if (rc) h5l_err_set(b->err, rc, "'%s': %s", b->s->objs[i].path,
                        b->err && b->err->msg[0] ? b->err->msg : h5l_strerror(rc));
    return rc;
}

/* Create variable i (with the callbacks around its H5Dcreate); its
 * DIMENSION_LIST too if its scales exist. */
static int make_var(cbuild_t *b, size_t i)
{
    const h5l_obj_t *o = &b->s->objs[i];
    int rc;
    if (b->fn && (rc = var_fn(b, i, -1))) return rc;
    hid_t ds;
    rc = canon_dataset(b->file, b->s, (uint32_t)i, b->tick, b->alloc, b->rechunk ? b->rechunk[i] : NULL, &ds,
                       &b->props, b->err);
    if (rc) return rc;
    if (b->fn) rc = var_fn(b, i, ds);
    if (!rc && H5Rcreate(&b->refs[i], ds, ".", H5R_OBJECT, -1) < 0)
        rc = h5l_err_set(b->err, H5L_EHDF5, "'%s': cannot make a reference to it", o->path);
    if (!rc && o->ndims == 1 && b->coord[o->dimids[0]] == (long)i) {
        b->scale_ref[o->dimids[0]] = b->refs[i];
        b->have[o->dimids[0]] = 1;
    }
    int ready = !rc && o->ndims > 0;
    for (uint32_t k = 0; ready && k < o->ndims; k++) ready = b->have[o->dimids[k]];
    if (ready && gets_scales(b, i)) rc = write_dimlist(b, i, ds);
    H5Dclose(ds);
    return rc;
}

/* netCDF-4's record of a dimension scale's dimension id: readers number
 * dimensions by it, so the order of dimensions does not depend on where the
 * scale datasets stand in the group (netCDF-C writes it on every scale). */
static int set_dimid(hid_t ds, size_t d)
{
    int v = (int)d;
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t at = sp < 0 ? -1 : H5Acreate2(ds, "_Netcdf4Dimid", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT);
    int bad = at < 0 || H5Awrite(at, H5T_NATIVE_INT, &v) < 0;
    if (at >= 0) H5Aclose(at);
    if (sp >= 0) H5Sclose(sp);
    return bad ? -1 : 0;
}

/* The placeholder scale of dimension d unless its name is taken by another
 * object (then no variable over d gets scales). */
static int make_dim(cbuild_t *b, size_t d)
{
    char path[1024];
    snprintf(path, sizeof path, "/%s", b->s->dims[d].name);
    long other = h5l_schema_find(b->s, path);
    if (other >= 0 && b->s->objs[other].tick <= b->tick) return H5L_OK; /* name taken: no scale */
    int rc = make_placeholder(b->file, b->s, b->tick, d, path, b->err);
    if (rc) return rc;
    hid_t ds = H5Dopen2(b->file, path, H5P_DEFAULT);
    int bad = ds < 0 || set_dimid(ds, d) < 0 || H5Rcreate(&b->scale_ref[d], ds, ".", H5R_OBJECT, -1) < 0;
    if (ds >= 0) H5Dclose(ds);
    if (bad) return h5l_err_set(b->err, H5L_EHDF5, "cannot number dimension scale '%s'", path);
    b->scalable[d] = 1;
    b->have[d] = 1;
    return H5L_OK;
}

/* Groups, variables and dimension scales in the order netCDF-C writes a
 * group (nc4_rec_write_metadata): dimensions without a coordinate variable
 * in dimension order up to the first one that has one, then objects in
 * definition order up to and including that coordinate variable, and so on.
 * Variables thus keep their definition order, and a dimension's scale comes
 * no later than the first variable that could use it. */
static int make_objects(cbuild_t *b)
{
    const h5l_schema_t *s = b->s;
    size_t d = 0, i = 1;
    int rc = H5L_OK;
    while (!rc && (d < s->ndims || i < s->nobjs)) {
        long coord = -1;
        for (; !rc && d < s->ndims && coord < 0; d++) {
            if (s->dims[d].tick > b->tick) continue;
            if (b->coord[d] >= 0) {
                b->scalable[d] = 1;
                coord = b->coord[d];
            } else {
                rc = make_dim(b, d);
            }
        }
        for (int wrote = 0; !rc && i < s->nobjs && !wrote; i++) {
            const h5l_obj_t *o = &s->objs[i];
            wrote = (long)i == coord;
            if (!o->kind || o->tick > b->tick) continue;
            if (o->kind == H5L_OBJ_GROUP)
                rc = h5l_canon_group(b->file, o->path, b->err);
            else
                rc = make_var(b, i);
        }
    }
    return rc;
}

/* After every object exists: coordinate variables become scales, the
 * DIMENSION_LISTs make_var could not write yet, every REFERENCE_LIST. */
static int attach_scales(cbuild_t *b)
{
    const h5l_schema_t *s = b->s;
    int rc = H5L_OK;
    size_t *nref = calloc(s->ndims + 1, sizeof *nref);
    ds_ref_t **lists = calloc(s->ndims + 1, sizeof *lists);
    hid_t cmp = H5Tcreate(H5T_COMPOUND, sizeof(ds_ref_t));
    if (!nref || !lists)
        rc = h5l_err_set(b->err, H5L_ENOMEM, "out of memory");
    else if (cmp < 0 || H5Tinsert(cmp, "dataset", HOFFSET(ds_ref_t, ref), H5T_STD_REF_OBJ) < 0 ||
             H5Tinsert(cmp, "dimension", HOFFSET(ds_ref_t, dim_idx), H5T_NATIVE_INT) < 0)
        rc = h5l_err_set(b->err, H5L_EHDF5, "cannot make the dimension scale types");
    for (size_t d = 0; !rc && d < s->ndims; d++) {
        long cv = b->scalable[d] ? b->coord[d] : -1;
        if (cv < 0) continue;
        hid_t ds = H5Dopen2(b->file, s->objs[cv].path, H5P_DEFAULT);
        int bad = ds < 0 || H5DSset_scale(ds, s->dims[d].name) < 0 || set_dimid(ds, d) < 0;
        if (ds >= 0) H5Dclose(ds);
        if (bad) rc = h5l_err_set(b->err, H5L_EHDF5, "cannot make '%s' a dimension scale", s->objs[cv].path);
    }
    for (size_t i = 1; !rc && i < s->nobjs; i++) {
        if (!gets_scales(b, i)) continue;
        const h5l_obj_t *o = &s->objs[i];
        for (uint32_t k = 0; k < o->ndims; k++) nref[o->dimids[k]]++;
        if (b->listed[i]) continue;
        hid_t ds = H5Dopen2(b->file, o->path, H5P_DEFAULT);
        rc = ds < 0 ? h5l_err_set(b->err, H5L_EHDF5, "cannot open '%s'", o->path) : write_dimlist(b, i, ds);
        if (ds >= 0) H5Dclose(ds);
    }
    for (size_t d = 0; !rc && d < s->ndims; d++) {
        if (nref[d] && !(lists[d] = malloc(nref[d] * sizeof **lists)))
            rc = h5l_err_set(b->err, H5L_ENOMEM, "out of memory");
        nref[d] = 0;
    }
    for (size_t i = 1; !rc && i < s->nobjs; i++) {
        if (!gets_scales(b, i)) continue;
        const h5l_obj_t *o = &s->objs[i];
        for (uint32_t k = 0; k < o->ndims; k++)
            lists[o->dimids[k]][nref[o->dimids[k]]++] = (ds_ref_t){b->refs[i], (int)k};
    }
    for (size_t d = 0; !rc && d < s->ndims; d++) {
        if (!nref[d]) continue;
        char path[1024];
        snprintf(path, sizeof path, "/%s", s->dims[d].name);
        hid_t sc = H5Dopen2(b->file, path, H5P_DEFAULT);
        int bad = sc < 0 || write_attr_raw(sc, "REFERENCE_LIST", cmp, nref[d], lists[d]) < 0;
        if (sc >= 0) H5Dclose(sc);
        if (bad) rc = h5l_err_set(b->err, H5L_EHDF5, "cannot write the references of dimension scale '%s'", path);
    }
    for (size_t d = 0; lists && d < s->ndims; d++) free(lists[d]);
    free(lists);
    free(nref);
    if (cmp >= 0) H5Tclose(cmp);
    return rc;
}

/* (object, name) -> slot in the attribute list being built */
typedef struct aslot {
    uint32_t objid;
    const char *name;
    size_t cur; /* index into s->attrs of the value current at the tick */
} aslot_t;

static size_t akey(uint32_t objid, const char *name, size_t mask)
{
    uint64_t h = 1469598103934665603ull ^ objid;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29)) & mask;
}

/* Every attribute current at tick, each object's in the order its names
 * were first defined, with the newest value (<= tick). One pass over the
 * history with a hash of (object, name): O(history), not O(history^2). */
static int write_attrs(hid_t file, const h5l_schema_t *s, uint64_t tick, h5l_err_t *err)
{
    size_t nslots = 16;
    while (nslots < 2 * s->nattrs + 2) nslots *= 2;
    aslot_t *tab = calloc(nslots, sizeof *tab);              /* open addressing */
    size_t *order = malloc((s->nattrs + 1) * sizeof *order); /* slots, first definition first */
    size_t norder = 0;
    int rc = H5L_OK;
    if (!tab || !order) rc = h5l_err_set(err, H5L_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < s->nattrs; i++) {
        const h5l_attr_t *a = &s->attrs[i];
        if (a->tick > tick) continue;
        size_t k = akey(a->objid, a->name, nslots - 1);
        while (tab[k].name && (tab[k].objid != a->objid || strcmp(tab[k].name, a->name) != 0))
            k = (k + 1) & (nslots - 1);
        if (!tab[k].name) {
            tab[k] = (aslot_t){a->objid, a->name, i};
            order[norder++] = k;
        } else if (s->attrs[tab[k].cur].tick <= a->tick) {
            tab[k].cur = i; /* history is in tick order: the later one is newer */
        }
    }
    for (size_t n = 0; !rc && n < norder; n++) {
        const h5l_attr_t *a = &s->attrs[tab[order[n]].cur];
        hid_t obj = H5Oopen(file, s->objs[a->objid].path, H5P_DEFAULT);
        if (obj < 0) {
            rc = h5l_err_set(err, H5L_EHDF5, "cannot open '%s'", s->objs[a->objid].path);
            break;
        }
        rc = h5l_canon_attr(obj, a, err);
        H5Oclose(obj);
    }
    free(tab);
    free(order);
    return rc;
}

int h5l_canon_build(hid_t file, const h5l_schema_t *s, uint64_t tick, int alloc, h5l_canon_var_fn fn, void *ctx,
                    h5l_err_t *err)
{
    return h5l_canon_build_final(file, s, tick, alloc, NULL, fn, ctx, err);
}

int h5l_canon_build_final(hid_t file, const h5l_schema_t *s, uint64_t tick, int alloc, const uint64_t *const *rechunk,
                          h5l_canon_var_fn fn, void *ctx, h5l_err_t *err)
{
    int rc = H5L_OK;
    size_t nd = s->ndims + 1, no = s->nobjs + 1;
    cbuild_t b = {file,
                  s,
                  tick,
                  alloc,
                  rechunk,
                  fn,
                  ctx,
                  err,
                  malloc(nd * sizeof(long)),
                  calloc(nd, 1),
                  calloc(nd, 1),
                  calloc(nd, sizeof(hobj_ref_t)),
                  calloc(no, sizeof(hobj_ref_t)),
                  calloc(no, 1),
                  H5Tvlen_create(H5T_STD_REF_OBJ),
                  PROPS_INIT};
    if (!b.coord || !b.scalable || !b.have || !b.scale_ref || !b.refs || !b.listed)
        rc = h5l_err_set(err, H5L_ENOMEM, "out of memory");
    else if (b.vlt < 0)
        rc = h5l_err_set(err, H5L_EHDF5, "cannot make the dimension scale types");
    for (size_t d = 0; !rc && d < s->ndims; d++) b.coord[d] = coord_var(s, (uint32_t)d, tick);
    if (!rc) rc = make_objects(&b);
    if (!rc) rc = attach_scales(&b);
    if (!rc) rc = write_attrs(file, s, tick, err);
    if (b.vlt >= 0) H5Tclose(b.vlt);
    props_free(&b.props);
    free(b.coord);
    free(b.scalable);
    free(b.have);
    free(b.scale_ref);
    free(b.refs);
    free(b.listed);
    return rc;
}

int h5l_canon_sparse(const h5l_schema_t *s, uint32_t objid, uint64_t tick)
{
    const h5l_obj_t *o = &s->objs[objid];
    if (!o->chunked || !o->ndims) return 0;
    hsize_t dims[H5L_MAX_DIMS], chunk[H5L_MAX_DIMS];
    for (uint32_t d = 0; d < o->ndims; d++) {
        dims[d] = h5l_schema_dimlen(s, o->dimids[d], tick);
        chunk[d] = o->chunk[d];
    }
    return sparse_shape(o->ndims, dims, chunk);
}

/* The placeholder's NAME is netCDF's marker followed by the length in ten
 * columns (make_placeholder); a longer length would change the attribute's
 * size, which an in-place patch does not do (H5L_ESTATE). */
int h5l_canon_grow_dim(hid_t file, const h5l_schema_t *s, uint32_t d, uint64_t tick, h5l_err_t *err)
{
    char path[1024];
    snprintf(path, sizeof path, "/%s", s->dims[d].name);
    long other = h5l_schema_find(s, path);
    if (other >= 0 && s->objs[other].tick <= tick) return H5L_OK; /* a variable: grown as one */
    hsize_t len = h5l_schema_dimlen(s, d, tick);
    char mark[128];
    int n = snprintf(mark, sizeof mark, NC_DIM_MARK "%10llu", (unsigned long long)len);
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    if (ds < 0) return h5l_err_set(err, H5L_EHDF5, "cannot open dimension scale '%s'", path);
    int rc = H5L_OK;
    hid_t at = H5Aopen(ds, "NAME", H5P_DEFAULT);
    hid_t t = at < 0 ? -1 : H5Aget_type(at);
    if (t < 0 || H5Tget_size(t) != (size_t)n + 1)
        rc = h5l_err_set(err, H5L_ESTATE, "dimension scale '%s': its NAME changes size", path);
    else if (H5Dset_extent(ds, &len) < 0 || H5Awrite(at, t, mark) < 0)
        rc = h5l_err_set(err, H5L_EHDF5, "cannot extend dimension scale '%s'", path);
    if (t >= 0) H5Tclose(t);
    if (at >= 0) H5Aclose(at);
    H5Dclose(ds);
    return rc;
}
