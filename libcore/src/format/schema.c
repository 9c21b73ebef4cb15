/* schema.c — the definitions of a file as of any tick (see schema.h).
 * Nothing is ever removed: every object, dimension length and attribute
 * value carries the tick that made it, so one structure answers "as of tick
 * T" for every T without copies. Objects, dimensions and attributes are
 * found by name through chained hash indexes (defining N of them is O(N),
 * not O(N^2), and so is asking which attribute values are current). */
#include "h5log/grow.h"
#include "schema.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define SLAB_TARGET (1u << 20) /* bytes of an index slab of a contiguous var */

#define PNONE UINT32_MAX
#define IX_HDR 3

/* Name indexes, so that no op costs a scan of everything defined before it
 * (a frame of a few megabytes holds 10^5 DIM or ATTR ops; a scan each made
 * loading it take minutes). One block at s->index (its w[]), chain heads
 * per table a power of two, at least twice the count: nb for objects and
 * dimensions, nba for attributes (sized apart: a model that sets an
 * attribute at every tick has a million versions and a few objects):
 *   [0], [1], [2] the dims, attrs and objs capacities it was built for
 *   obj[nb]       objects by path (links: onext)
 *   dim[nb]       dimensions by name (links: dnext)
 *   attr[nba]     attributes by (object, name) (links: anext)
 *   dnext[dcap], anext[acap]
 *   later[acap]   the next version of attribute i (same object and name), or PNONE
 *   earlier[acap] the previous one
 * Chains hold the newest first, so the newest version of a name is found
 * first and the newest definition (the one rollback removes) heads its
 * chain. */
struct h5l_schema_ix { /* opaque in h5log_reader.h */
    size_t nb, nba;
    uint32_t w[];
};

typedef struct ix {
    uint32_t *obj, *dim, *attr, *dnext, *anext, *later, *earlier, *onext;
} ix_t;

static ix_t ix_of(const h5l_schema_t *s)
{
    uint32_t *b = s->index->w;
    size_t nb = s->index->nb;
    ix_t x;
    x.obj = b + IX_HDR;
    x.dim = x.obj + nb;
    x.attr = x.dim + nb;
    x.dnext = x.attr + s->index->nba;
    x.anext = x.dnext + b[0];
    x.later = x.anext + b[1];
    x.earlier = x.later + b[1];
    x.onext = x.earlier + b[1];
    return x;
}

static size_t nbuckets(const h5l_schema_t *s) { return s->index ? s->index->nb : 0; }

static size_t pslot(const h5l_schema_t *s, const char *path)
{
    return (size_t)XXH3_64bits(path, strlen(path)) & (nbuckets(s) - 1);
}

static size_t dslot(const h5l_schema_t *s, const char *name)
{
    return (size_t)XXH3_64bits_withSeed(name, strlen(name), 1) & (nbuckets(s) - 1);
}

static size_t aslot(const h5l_schema_t *s, uint32_t objid, const char *name)
{
    return (size_t)XXH3_64bits_withSeed(name, strlen(name), 2 + (uint64_t)objid) & (s->index->nba - 1);
}

/* The newest attribute of (objid, name), or PNONE. */
static uint32_t attr_latest(const h5l_schema_t *s, const ix_t *x, uint32_t objid, const char *name)
{
    for (uint32_t i = x->attr[aslot(s, objid, name)]; i != PNONE; i = x->anext[i])
        if (s->attrs[i].objid == objid && strcmp(s->attrs[i].name, name) == 0) return i;
    return PNONE;
}

/* Version i of an attribute owns its name if it is the first of its
 * (object, name): the later ones point at the same string. */
static int attr_owns_name(const h5l_schema_t *s, size_t i)
{
    return ix_of(s).earlier[i] == PNONE && i >= s->nborrow;
}

static void ix_add_obj(h5l_schema_t *s, const ix_t *x, size_t id)
{
    size_t k = pslot(s, s->objs[id].path);
    x->onext[id] = x->obj[k];
    x->obj[k] = (uint32_t)id;
}

static void ix_add_dim(h5l_schema_t *s, const ix_t *x, size_t id)
{
    size_t k = dslot(s, s->dims[id].name);
    x->dnext[id] = x->dim[k];
    x->dim[k] = (uint32_t)id;
}

static void ix_add_attr(h5l_schema_t *s, const ix_t *x, size_t id)
{
    const h5l_attr_t *a = &s->attrs[id];
    uint32_t prev = attr_latest(s, x, a->objid, a->name);
    x->earlier[id] = prev;
    x->later[id] = PNONE;
    if (prev != PNONE) x->later[prev] = (uint32_t)id;
    size_t k = aslot(s, a->objid, a->name);
    x->anext[id] = x->attr[k];
    x->attr[k] = (uint32_t)id;
}

/* Make the indexes fit one more object, dimension and attribute than there
 * are (and the arrays' current capacities), rebuilding them when they do
 * not. 0, or -1 when out of memory (the old indexes then stay). */
static int ix_fit(h5l_schema_t *s)
{
    size_t most = s->nobjs > s->ndims ? s->nobjs : s->ndims;
    const struct h5l_schema_ix *old = s->index;
    if (old && 2 * (most + 1) <= old->nb && 2 * (s->nattrs + 1) <= old->nba && old->w[0] == s->cap_dims &&
        old->w[1] == s->cap_attrs && old->w[2] == s->cap_objs)
        return 0;
    if (most >= PNONE / 4 || s->nattrs >= PNONE / 4 || s->cap_dims >= PNONE / 4 || s->cap_attrs >= PNONE / 4 ||
        s->cap_objs >= PNONE / 4)
        return -1;
    size_t nb = old ? old->nb : 64, nba = old ? old->nba : 64;
    while (nb < 2 * (most + 1)) nb *= 2;
    while (nba < 2 * (s->nattrs + 1)) nba *= 2;
    size_t n = IX_HDR + 2 * nb + nba + s->cap_dims + 3 * s->cap_attrs + s->cap_objs;
    struct h5l_schema_ix *ix = malloc(sizeof *ix + n * sizeof(uint32_t));
    if (!ix) return -1;
    uint32_t *b = ix->w;
    for (size_t i = 0; i < n; i++) b[i] = PNONE;
    b[0] = (uint32_t)s->cap_dims;
    b[1] = (uint32_t)s->cap_attrs;
    b[2] = (uint32_t)s->cap_objs;
    ix->nb = nb;
    ix->nba = nba;
    free(s->index);
    s->index = ix;
    ix_t x = ix_of(s);
    for (size_t i = 0; i < s->nobjs; i++) /* oldest first: chains end newest first */
        if (s->objs[i].kind) ix_add_obj(s, &x, i);
    for (size_t i = 0; i < s->ndims; i++) ix_add_dim(s, &x, i);
    for (size_t i = 0; i < s->nattrs; i++) ix_add_attr(s, &x, i);
    return 0;
}

/* Append o (owned) as the next object; on failure frees nothing of o. */
static int obj_push(h5l_schema_t *s, const h5l_obj_t *o)
{
    if (ix_fit(s)) return -1;
    s->objs[s->nobjs] = *o;
    ix_t x = ix_of(s);
    ix_add_obj(s, &x, s->nobjs);
    s->nobjs++;
    return 0;
}

int h5l_schema_init(h5l_schema_t *s)
{
    memset(s, 0, sizeof *s);
    if (h5l_grow((void **)&s->objs, &s->cap_objs, 1, sizeof *s->objs)) return H5L_ENOMEM;
    h5l_obj_t root = {.kind = H5L_OBJ_GROUP, .path = strdup("/")};
    if (!root.path || obj_push(s, &root)) {
        free(root.path);
        return H5L_ENOMEM;
    }
    return H5L_OK;
}

int h5l_schema_view(h5l_schema_t *v, const h5l_schema_t *s, uint64_t before)
{
    memset(v, 0, sizeof *v);
    size_t n = h5l_schema_attrs_after(s, before);
    v->objs = s->objs;
    v->nobjs = s->nobjs;
    v->cap_objs = s->cap_objs;
    v->dims = s->dims;
    v->ndims = s->ndims;
    v->cap_dims = s->cap_dims;
    v->base = s;
    v->nborrow = n;
    if (h5l_grow_raw((void **)&v->attrs, &v->cap_attrs, n ? n : 1, sizeof *v->attrs)) return H5L_ENOMEM;
    if (n) memcpy(v->attrs, s->attrs, n * sizeof *v->attrs);
    v->nattrs = n;
    if (ix_fit(v)) { /* (the index of a view is its own: its attribute versions differ) */
        free(v->attrs);
        memset(v, 0, sizeof *v);
        return H5L_ENOMEM;
    }
    return H5L_OK;
}

void h5l_schema_free(h5l_schema_t *s)
{
    if (!s) return;
    if (s->base) { /* a view: its own attribute versions, arrays and index */
        for (size_t i = s->nborrow; i < s->nattrs; i++) {
            if (attr_owns_name(s, i)) free(s->attrs[i].name);
            free(s->attrs[i].value);
        }
        free(s->attrs);
        free(s->index);
        memset(s, 0, sizeof *s);
        return;
    }
    for (size_t i = 0; i < s->nobjs; i++) {
        free(s->objs[i].path);
        free(s->objs[i].dimids);
        free(s->objs[i].chunk);
        free(s->objs[i].fill);
    }
    for (size_t i = 0; i < s->ndims; i++) {
        free(s->dims[i].name);
        free(s->dims[i].runs);
    }
    for (size_t i = 0; i < s->nattrs; i++) {
        if (attr_owns_name(s, i)) free(s->attrs[i].name);
        free(s->attrs[i].value);
    }
    free(s->objs);
    free(s->dims);
    free(s->attrs);
    free(s->index);
    memset(s, 0, sizeof *s);
}

long h5l_schema_find(const h5l_schema_t *s, const char *path)
{
    if (!s->index) return -1;
    ix_t x = ix_of(s);
    for (uint32_t i = x.obj[pslot(s, path)]; i != PNONE; i = x.onext[i])
        if (s->objs[i].kind && strcmp(s->objs[i].path, path) == 0) return (long)i;
    return -1;
}

long h5l_schema_find_dim(const h5l_schema_t *s, const char *name)
{
    if (!s->index) return -1;
    ix_t x = ix_of(s);
    for (uint32_t i = x.dim[dslot(s, name)]; i != PNONE; i = x.dnext[i])
        if (strcmp(s->dims[i].name, name) == 0) return (long)i;
    return -1;
}

/* The run of d's history holding the newest entry <= tick, or NULL. */
static const h5l_dimlen_t *run_at(const h5l_dim_t *d, uint64_t tick)
{
    size_t lo = 0, hi = d->nruns; /* runs by increasing first tick */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->runs[mid].tick <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &d->runs[lo - 1] : NULL;
}

/* Index in run r of its newest entry <= tick (r->tick <= tick). */
static uint64_t run_index(const h5l_dimlen_t *r, uint64_t tick)
{
    if (r->n == 1) return 0;
    uint64_t i = (tick - r->tick) / r->dt;
    return i < r->n - 1 ? i : r->n - 1;
}

uint64_t h5l_schema_dimlen(const h5l_schema_t *s, uint32_t dimid, uint64_t tick)
{
    if (dimid >= s->ndims) return 0;
    const h5l_dimlen_t *r = run_at(&s->dims[dimid], tick);
    return r ? r->len + run_index(r, tick) * r->dl : 0;
}

uint64_t h5l_schema_dimlen_tick(const h5l_schema_t *s, uint32_t dimid, uint64_t tick)
{
    if (dimid >= s->ndims) return 0;
    const h5l_dimlen_t *r = run_at(&s->dims[dimid], tick);
    return r ? r->tick + run_index(r, tick) * r->dt : 0;
}

uint64_t h5l_schema_dimlen_now(const h5l_schema_t *s, uint32_t dimid)
{
    if (dimid >= s->ndims || !s->dims[dimid].nruns) return 0;
    const h5l_dimlen_t *r = &s->dims[dimid].runs[s->dims[dimid].nruns - 1];
    return r->len + (r->n - 1) * r->dl;
}

int h5l_schema_shape(const h5l_schema_t *s, uint32_t objid, uint64_t tick, uint64_t *shape)
{
    if (objid >= s->nobjs || s->objs[objid].kind != H5L_OBJ_VAR) return H5L_EBADID;
    const h5l_obj_t *o = &s->objs[objid];
    for (uint32_t i = 0; i < o->ndims; i++) shape[i] = h5l_schema_dimlen(s, o->dimids[i], tick);
    return H5L_OK;
}

size_t h5l_schema_attrs_after(const h5l_schema_t *s, uint64_t tick)
{
    size_t lo = 0, hi = s->nattrs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->attrs[mid].tick <= tick)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int h5l_schema_attr_current(const h5l_schema_t *s, size_t i, uint64_t tick)
{
    const h5l_attr_t *a = &s->attrs[i];
    if (a->tick > tick) return 0;
    /* versions are in tick order: if the next one is later than tick, all are */
    uint32_t next = ix_of(s).later[i];
    return next == PNONE || s->attrs[next].tick > tick;
}

void h5l_schema_slab_shape(h5l_type_t t, uint32_t ndims, const uint64_t *dims, uint64_t *slab)
{
    /* Trailing dimensions whole while they fit the target, then as many
     * rows of the next one as fit, then 1: each slab is one contiguous byte
     * range of the row-major canonical dataset. */
    uint64_t bytes = t.size ? t.size : 1;
    int d = (int)ndims - 1;
    for (; d >= 0; d--) {
        uint64_t n = dims[d] ? dims[d] : 1;
        if (n > SLAB_TARGET / bytes) break; /* bytes * n > target, without overflow */
        slab[d] = n;
        bytes *= n;
    }
    if (d >= 0) {
        uint64_t rows = SLAB_TARGET / bytes;
        slab[d] = rows ? rows : 1;
        for (int i = d - 1; i >= 0; i--) slab[i] = 1;
    }
}

void h5l_schema_default_fill(h5l_type_t t, void *out)
{
    /* netCDF-C's NC_FILL_* (netcdf.h): the values every netCDF reader masks
     * when a variable has no _FillValue attribute */
    uint64_t v = 0;
    if (t.cls == H5L_CLASS_FLOAT && t.size == 4) {
        float x = 9.9692099683868690e+36f;
        uint32_t u;
        memcpy(&u, &x, 4);
        v = u;
    } else if (t.cls == H5L_CLASS_FLOAT) {
        double x = 9.9692099683868690e+36;
        memcpy(&v, &x, 8);
    } else if (t.cls == H5L_CLASS_INT && t.sign) {
        int64_t s = t.size == 1 ? -127 : t.size == 2 ? -32767 : t.size == 4 ? -2147483647 : -9223372036854775806LL;
        v = (uint64_t)s;
    } else if (t.cls == H5L_CLASS_INT) {
        v = t.size == 1 ? 255u : t.size == 2 ? 65535u : t.size == 4 ? 4294967295u : 18446744073709551614ull;
    }
    uint8_t *p = out;
    for (size_t i = 0; i < t.size; i++) {
        uint8_t byte = (uint8_t)(v >> (8 * i)); /* little-endian byte i */
        p[t.order ? t.size - 1 - i : i] = byte;
    }
}

/* Attribute names HDF5's dimension scales and netCDF-4 use for their own
 * bookkeeping: a user attribute of one of these names crashes ncdump and
 * netCDF4-python (DIMENSION_LIST) or breaks them (_Netcdf4Coordinates). */
static const char *const reserved_attrs[] = {
    "DIMENSION_LIST",
    "REFERENCE_LIST",
    "CLASS",
    "NAME",
    "DIMENSION_LABELS",
    "_Netcdf4Dimid",
    "_Netcdf4Coordinates",
    "_NCProperties",
    "_nc3_strict",
    "_IsNetcdf4",
    "_SuperblockVersion",
    "_Format",
    "_NoFill",
    "_Storage",
    "_ChunkSizes",
    "_Endianness",
    "_Filter",
    "_Codecs",
    "_DeflateLevel",
    "_Shuffle",
    "_Fletcher32",
    "_FillValue",
    "_QuantizeBitGroomNumberOfSignificantDigits",
    "_QuantizeGranularBitRoundNumberOfSignificantDigits",
    "_QuantizeBitRoundNumberOfSignificantBits",
};

int h5l_schema_attr_name_ok(const char *name, h5l_err_t *err)
{
    if (!name || !name[0]) return h5l_err_set(err, H5L_EINVAL, "attribute with an empty name");
    for (size_t i = 0; i < sizeof reserved_attrs / sizeof reserved_attrs[0]; i++)
        if (strcmp(name, reserved_attrs[i]) == 0)
            return h5l_err_set(err, H5L_EINVAL, "attribute name '%s' is reserved by HDF5 dimension scales or netCDF-4",
                               name);
    return H5L_OK;
}

/* The parent path of p ("/a/b" -> "/a", "/a" -> "/"), freshly allocated. */
static char *parent_of(const char *p)
{
    const char *slash = strrchr(p, '/');
    size_t n = (size_t)(slash - p);
    if (n == 0) return strdup("/");
    char *q = malloc(n + 1);
    if (q) {
        memcpy(q, p, n);
        q[n] = 0;
    }
    return q;
}

/* A valid absolute path for a new object: starts with '/', no empty or
 * dot components, no trailing '/'. */
static int path_ok(const char *p)
{
    if (!p || p[0] != '/' || p[1] == 0) return 0;
    for (const char *c = p; *c; c++) {
        if (*c == '/' && (c[1] == '/' || c[1] == 0)) return 0;
        if (*c == '/' && c[1] == '.' && (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0))))
            return 0;
    }
    return 1;
}

static int check_new_obj(h5l_schema_t *s, const h5l_op_t *op, h5l_err_t *err)
{
    if (op->id != s->nobjs)
        return h5l_err_set(err, H5L_ECORRUPT, "object id %u out of sequence (expected %zu)", op->id, s->nobjs);
    if (!path_ok(op->name)) return h5l_err_set(err, H5L_EINVAL, "invalid object path '%s'", op->name ? op->name : "");
    if (h5l_schema_find(s, op->name) >= 0) return h5l_err_set(err, H5L_EEXIST, "object '%s' already defined", op->name);
    char *par = parent_of(op->name);
    if (!par) return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    long pid = h5l_schema_find(s, par);
    int bad = pid < 0 || s->objs[pid].kind != H5L_OBJ_GROUP;
    if (bad) h5l_err_set(err, H5L_EBADID, "parent group '%s' of '%s' does not exist", par, op->name);
    free(par);
    if (bad) return H5L_EBADID;
    if (h5l_grow((void **)&s->objs, &s->cap_objs, s->nobjs + 1, sizeof *s->objs))
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    return H5L_OK;
}

/* The index chunk of a VAR op sizes every block a reader assembles (the
 * daemon allocates whole chunks and slabs), so it is bounded here rather
 * than trusted: a chunked variable's chunk must be under 4 GiB, as HDF5
 * requires; a contiguous variable's slab must be exactly the one
 * h5l_schema_slab_shape computes from its dimensions (format.md 3.3), at
 * most 1 MiB — a file may not choose it. */
static int chunk_ok(const h5l_schema_t *s, const h5l_op_t *op, h5l_err_t *err)
{
    if (op->flags & H5L_VAR_CHUNKED) {
        uint64_t bytes = op->type.size;
        for (uint32_t i = 0; i < op->ndims; i++)
            bytes = bytes > UINT32_MAX ? bytes : bytes * op->chunk[i]; /* chunk[i] <= 2^32: no wrap */
        if (bytes > UINT32_MAX)
            return h5l_err_set(err, H5L_EINVAL, "variable '%s': chunk of 4 GiB or more (HDF5 chunks are smaller)",
                               op->name);
        return H5L_OK;
    }
    uint64_t dims[H5L_MAX_DIMS] = {0}, slab[H5L_MAX_DIMS] = {0};
    for (uint32_t i = 0; i < op->ndims && i < H5L_MAX_DIMS; i++) dims[i] = h5l_schema_dimlen_now(s, op->dimids[i]);
    h5l_schema_slab_shape(op->type, op->ndims, dims, slab);
    for (uint32_t i = 0; i < op->ndims; i++)
        if (op->chunk[i] != slab[i])
            return h5l_err_set(
                err, H5L_EINVAL,
                "variable '%s': contiguous, but its index slab is %llu in dimension %u where its shape gives %llu",
                op->name, (unsigned long long)op->chunk[i], i, (unsigned long long)slab[i]);
    return H5L_OK;
}

static int apply_var(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    int rc = check_new_obj(s, op, err);
    if (rc) return rc;
    if (!h5l_type_valid(op->type) || op->type.cls == H5L_CLASS_STRING)
        return h5l_err_set(err, H5L_ETYPE, "variable '%s': unsupported type", op->name);
    if (op->ndims > H5L_MAX_DIMS) return h5l_err_set(err, H5L_EINVAL, "variable '%s': too many dimensions", op->name);
    int has_unlim = 0;
    for (uint32_t i = 0; i < op->ndims; i++) {
        if (op->dimids[i] >= s->ndims)
            return h5l_err_set(err, H5L_EBADID, "variable '%s': unknown dimension id %u", op->name, op->dimids[i]);
        if (s->dims[op->dimids[i]].unlimited) has_unlim = 1;
        if (op->chunk[i] == 0)
            return h5l_err_set(err, H5L_EINVAL, "variable '%s': chunk dimension %u is zero", op->name, i);
        if ((op->flags & 1) && (op->chunk[i] > UINT32_MAX || (!s->dims[op->dimids[i]].unlimited &&
                                                              op->chunk[i] > h5l_schema_dimlen_now(s, op->dimids[i]))))
            return h5l_err_set(err, H5L_EINVAL, "variable '%s': chunk dimension %u larger than its dimension", op->name,
                               i);
    }
    if ((op->flags & ~(uint32_t)7) || ((op->flags & H5L_VAR_FILL_USER) && (op->flags & H5L_VAR_NOFILL)))
        return h5l_err_set(err, H5L_EINVAL, "variable '%s': unknown flags 0x%x", op->name, op->flags);
    if (has_unlim && !(op->flags & 1))
        return h5l_err_set(err, H5L_EINVAL, "variable '%s': unlimited dimension needs chunking", op->name);
    rc = chunk_ok(s, op, err);
    if (rc) return rc;
    h5l_obj_t o = {0};
    o.kind = H5L_OBJ_VAR;
    o.tick = tick;
    o.type = op->type;
    o.chunked = op->flags & H5L_VAR_CHUNKED;
    o.fill_mode = (op->flags & H5L_VAR_NOFILL)      ? H5L_FILL_NONE
                  : (op->flags & H5L_VAR_FILL_USER) ? H5L_FILL_USER
                                                    : H5L_FILL_DEFAULT;
    o.ndims = op->ndims;
    o.path = strdup(op->name);
    o.dimids = malloc((op->ndims + 1) * sizeof *o.dimids);
    o.chunk = malloc((op->ndims + 1) * sizeof *o.chunk);
    o.fill = malloc(op->type.size);
    if (!o.path || !o.dimids || !o.chunk || !o.fill) {
        free(o.path);
        free(o.dimids);
        free(o.chunk);
        free(o.fill);
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    }
    memcpy(o.dimids, op->dimids, op->ndims * sizeof *o.dimids);
    memcpy(o.chunk, op->chunk, op->ndims * sizeof *o.chunk);
    if (op->data && o.fill_mode != H5L_FILL_NONE)
        memcpy(o.fill, op->data, op->type.size);
    else
        memset(o.fill, 0, op->type.size); /* no fill: zero bytes, as HDF5's own default */
    if (obj_push(s, &o)) {
        free(o.path);
        free(o.dimids);
        free(o.chunk);
        free(o.fill);
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    }
    return H5L_OK;
}

static int apply_dim(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    if (op->id != s->ndims) return h5l_err_set(err, H5L_ECORRUPT, "dimension id %u out of sequence", op->id);
    if (!op->name || !op->name[0] || strchr(op->name, '/'))
        return h5l_err_set(err, H5L_EINVAL, "invalid dimension name '%s'", op->name ? op->name : "");
    if (h5l_schema_find_dim(s, op->name) >= 0)
        return h5l_err_set(err, H5L_EEXIST, "dimension '%s' already defined", op->name);
    if (h5l_grow((void **)&s->dims, &s->cap_dims, s->ndims + 1, sizeof *s->dims) || ix_fit(s))
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    h5l_dim_t d = {0};
    d.name = strdup(op->name);
    d.runs = malloc(sizeof *d.runs);
    if (!d.name || !d.runs) {
        free(d.name);
        free(d.runs);
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    }
    d.unlimited = op->flags & 1;
    d.tick = tick;
    d.runs[0] = (h5l_dimlen_t){tick, op->len, 1, 0, 0};
    d.nruns = 1;
    s->dims[s->ndims] = d;
    ix_t x = ix_of(s);
    ix_add_dim(s, &x, s->ndims);
    s->ndims++;
    return H5L_OK;
}

static int apply_dimlen(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    if (op->id >= s->ndims) return h5l_err_set(err, H5L_EBADID, "unknown dimension id %u", op->id);
    h5l_dim_t *d = &s->dims[op->id];
    if (!d->unlimited) return h5l_err_set(err, H5L_ECORRUPT, "dimension '%s' is fixed but grows", d->name);
    h5l_dimlen_t *last = &d->runs[d->nruns - 1];
    uint64_t lt = last->tick + (last->n - 1) * last->dt, ll = last->len + (last->n - 1) * last->dl;
    if (op->len < ll) return h5l_err_set(err, H5L_ECORRUPT, "dimension '%s' shrinks", d->name);
    if (lt == tick && last->n == 1) { /* set again in the same tick: the last one stands */
        last->len = op->len;
        return H5L_OK;
    }
    if (lt == tick) { /* the run's last entry changes: it leaves the run */
        if (op->len == ll) return H5L_OK;
        last->n--;
    } else if (tick > lt && last->n == 1) { /* a second entry sets the run's steps */
        last->dt = tick - lt;
        last->dl = op->len - ll;
        last->n = 2;
        return H5L_OK;
    } else if (tick > lt && tick - lt == last->dt && op->len - ll == last->dl) {
        last->n++;
        return H5L_OK;
    }
    if ((d->nruns & (d->nruns - 1)) == 0) { /* room for the next power of two: no copy per run */
        h5l_dimlen_t *l = realloc(d->runs, 2 * d->nruns * sizeof *l);
        if (!l) {
            if (lt == tick) last->n++; /* as it was */
            return h5l_err_set(err, H5L_ENOMEM, "out of memory");
        }
        d->runs = l;
    }
    d->runs[d->nruns++] = (h5l_dimlen_t){tick, op->len, 1, 0, 0};
    return H5L_OK;
}

int h5l_schema_dimlen_run(h5l_schema_t *s, uint32_t dimid, uint64_t tick, uint64_t len, uint64_t n, uint64_t dt,
                          uint64_t dl, h5l_err_t *err)
{
    h5l_op_t op = {.kind = H5L_OP_DIMLEN, .id = dimid, .len = len};
    int rc = apply_dimlen(s, tick, &op, err);
    if (rc || n == 1) return rc;
    op.len = len + dl;
    if ((rc = apply_dimlen(s, tick + dt, &op, err)) || n == 2) return rc;
    /* the second entry joined or started a run of this step: the others
     * would each join it (apply_dimlen), so they join at once */
    h5l_dimlen_t *l = &s->dims[dimid].runs[s->dims[dimid].nruns - 1];
    if (l->n >= 2 && l->dt == dt && l->dl == dl && l->tick + (l->n - 1) * dt == tick + dt) {
        l->n += n - 2;
        return H5L_OK;
    }
    for (uint64_t i = 2; i < n && !rc; i++) {
        op.len = len + i * dl;
        rc = apply_dimlen(s, tick + i * dt, &op, err);
    }
    return rc;
}

static int apply_attr(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    if (op->id >= s->nobjs || !s->objs[op->id].kind)
        return h5l_err_set(err, H5L_EBADID, "attribute '%s': unknown object id %u", op->name ? op->name : "", op->id);
    int nrc = h5l_schema_attr_name_ok(op->name, err);
    if (nrc) return nrc;
    if (!h5l_type_valid(op->type)) return h5l_err_set(err, H5L_ETYPE, "attribute '%s': unsupported type", op->name);
    /* (appended whole: the array grows without clearing) */
    if (h5l_grow_raw((void **)&s->attrs, &s->cap_attrs, s->nattrs + 1, sizeof *s->attrs) || ix_fit(s))
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    ix_t x = ix_of(s);
    uint32_t prev = attr_latest(s, &x, op->id, op->name);
    h5l_attr_t a = {0};
    a.objid = op->id;
    a.type = op->type;
    a.n = op->len;
    a.tick = tick;
    /* a key's versions share its first version's name (attr_owns_name): a
     * model that sets an attribute at every tick keeps one copy of it */
    a.name = prev != PNONE ? s->attrs[prev].name : strdup(op->name);
    a.value = malloc(op->data_len + 1);
    if (!a.name || !a.value) {
        if (prev == PNONE) free(a.name);
        free(a.value);
        return h5l_err_set(err, H5L_ENOMEM, "out of memory");
    }
    if (op->data_len) memcpy(a.value, op->data, op->data_len);
    ((char *)a.value)[op->data_len] = 0;
    /* A replacement made in the same tick overwrites in place, so the
     * history keeps one value per (object, name, tick); not a version a
     * view borrowed (its base owns it): that one gets a later version. */
    if (prev != PNONE && s->attrs[prev].tick == tick && prev >= s->nborrow) {
        h5l_attr_t *b = &s->attrs[prev];
        free(b->value);
        a.name = b->name; /* (the same, owned or shared as before) */
        *b = a;
        return H5L_OK;
    }
    s->attrs[s->nattrs] = a;
    ix_add_attr(s, &x, s->nattrs);
    s->nattrs++;
    return H5L_OK;
}

void h5l_schema_rollback(h5l_schema_t *s, uint64_t tick)
{
    /* Everything is appended in tick order and stamped: drop the tail. */
    ix_t x = ix_of(s);
    while (!s->base && s->nobjs > 1 && s->objs[s->nobjs - 1].tick >= tick) {
        size_t k = pslot(s, s->objs[s->nobjs - 1].path); /* the newest heads its chain */
        if (x.obj[k] == s->nobjs - 1) x.obj[k] = x.onext[s->nobjs - 1];
        h5l_obj_t *o = &s->objs[--s->nobjs];
        free(o->path);
        free(o->dimids);
        free(o->chunk);
        free(o->fill);
        memset(o, 0, sizeof *o);
    }
    while (!s->base && s->ndims > 0 && s->dims[s->ndims - 1].tick >= tick) {
        size_t k = dslot(s, s->dims[s->ndims - 1].name);
        if (x.dim[k] == s->ndims - 1) x.dim[k] = x.dnext[s->ndims - 1];
        h5l_dim_t *d = &s->dims[--s->ndims];
        free(d->name);
        free(d->runs);
        memset(d, 0, sizeof *d);
    }
    for (size_t i = 0; !s->base && i < s->ndims; i++) { /* entries from tick on go (the first, its definition, is older) */
        h5l_dim_t *d = &s->dims[i];
        while (d->nruns > 1 && d->runs[d->nruns - 1].tick >= tick) d->nruns--;
        h5l_dimlen_t *r = &d->runs[d->nruns - 1];
        if (r->n > 1 && r->tick < tick && r->tick + (r->n - 1) * r->dt >= tick) r->n = (tick - 1 - r->tick) / r->dt + 1;
    }
    while (s->nattrs > s->nborrow && s->attrs[s->nattrs - 1].tick >= tick) {
        size_t i = s->nattrs - 1, k = aslot(s, s->attrs[i].objid, s->attrs[i].name);
        if (x.attr[k] == i) x.attr[k] = x.anext[i];
        if (x.earlier[i] != PNONE) x.later[x.earlier[i]] = PNONE;
        int owns = x.earlier[i] == PNONE && i >= s->nborrow; /* (its later versions went first) */
        h5l_attr_t *a = &s->attrs[--s->nattrs];
        if (owns) free(a->name);
        free(a->value);
        memset(a, 0, sizeof *a);
    }
}

int h5l_schema_apply(h5l_schema_t *s, uint64_t tick, const h5l_op_t *op, h5l_err_t *err)
{
    if (s->base && op->kind != H5L_OP_ATTR) /* its objects and dimensions are another schema's */
        return h5l_err_set(err, H5L_EINVAL, "a schema view takes attribute ops only");
    switch (op->kind) {
    case H5L_OP_GROUP: {
        int rc = check_new_obj(s, op, err);
        if (rc) return rc;
        h5l_obj_t o = {0};
        o.kind = H5L_OBJ_GROUP;
        o.tick = tick;
        o.path = strdup(op->name);
        if (!o.path || obj_push(s, &o)) {
            free(o.path);
            return h5l_err_set(err, H5L_ENOMEM, "out of memory");
        }
        return H5L_OK;
    }
    case H5L_OP_DIM:
        return apply_dim(s, tick, op, err);
    case H5L_OP_VAR:
        return apply_var(s, tick, op, err);
    case H5L_OP_ATTR:
        return apply_attr(s, tick, op, err);
    case H5L_OP_DIMLEN:
        return apply_dimlen(s, tick, op, err);
    default:
        return h5l_err_set(err, H5L_ECORRUPT, "unknown schema op kind %u", op->kind);
    }
}
