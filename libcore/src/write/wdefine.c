/* wdefine.c — definitions (h5log.h): dimensions, groups, variables, fill
 * values and attributes, applied to the rank's own schema with the checks
 * a reader makes, and kept as pending ops for the next flush. */
#include "wint.h"

int h5l_w_check_open(h5l_file_t *f)
{
    if (!f) return H5L_EINVAL;
    if (f->state != ST_OPEN) return h5l_w_fail(f, H5L_ESTATE, "%s: file is closed", f->path);
    return H5L_OK;
}

/* Apply op to the local schema as of the next tick and keep it pending.
 * Takes ownership of op's pointers on success and on failure. */
static int push_op(h5l_file_t *f, h5l_op_t *op)
{
    h5l_err_t e = {0};
    int rc = h5l_schema_apply(&f->schema, f->tick + 1, op, &e);
    if (!rc && h5l_grow((void **)&f->ops, &f->cap_ops, f->nops + 1, sizeof *f->ops))
        rc = h5l_err_set(&e, H5L_ENOMEM, "out of memory");
    if (rc) {
        h5l_op_clear(op);
        return h5l_w_fail(f, rc, "%s: %s", f->path, e.msg);
    }
    f->ops[f->nops++] = *op;
    return H5L_OK;
}

int h5l_def_dim(h5l_file_t *f, const char *name, uint64_t len, int *dimid)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    if (!name || !dimid) return h5l_w_fail(f, H5L_EINVAL, "%s: h5l_def_dim: NULL argument", f->path);
    h5l_op_t op = {.kind = H5L_OP_DIM, .id = (uint32_t)f->schema.ndims};
    op.flags = len == H5L_UNLIMITED;
    op.len = len == H5L_UNLIMITED ? 0 : len;
    op.name = strdup(name);
    if (!op.name) return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    uint32_t id = op.id;
    /* room first: a flush must be able to gather every dimension */
    if (h5l_grow((void **)&f->want, &f->cap_want, f->schema.ndims + 1, sizeof *f->want) ||
        h5l_w_gath_room(f, f->schema.ndims + 1)) {
        h5l_op_clear(&op);
        return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    }
    if ((rc = push_op(f, &op))) return rc;
    *dimid = (int)id;
    return H5L_OK;
}

/* Define the missing groups on the way to path (not path itself). */
static int make_parents(h5l_file_t *f, const char *path)
{
    size_t n = strlen(path);
    char *p = strdup(path);
    if (!p) return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    int rc = H5L_OK;
    for (size_t i = 1; i < n && !rc; i++) {
        if (p[i] != '/') continue;
        p[i] = 0;
        long id = h5l_schema_find(&f->schema, p);
        if (id < 0) {
            h5l_op_t op = {.kind = H5L_OP_GROUP, .id = (uint32_t)f->schema.nobjs, .name = strdup(p)};
            rc = op.name ? push_op(f, &op) : h5l_w_fail(f, H5L_ENOMEM, "out of memory");
        } else if (f->schema.objs[id].kind != H5L_OBJ_GROUP) {
            rc = h5l_w_fail(f, H5L_EEXIST, "%s: '%s' is a variable, not a group", f->path, p);
        }
        p[i] = '/';
    }
    free(p);
    return rc;
}

int h5l_def_grp(h5l_file_t *f, const char *path, int *grpid)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    if (!path || !grpid) return h5l_w_fail(f, H5L_EINVAL, "%s: h5l_def_grp: NULL argument", f->path);
    long id = h5l_schema_find(&f->schema, path);
    if (id >= 0) {
        if (f->schema.objs[id].kind != H5L_OBJ_GROUP)
            return h5l_w_fail(f, H5L_EEXIST, "%s: '%s' is a variable, not a group", f->path, path);
        *grpid = (int)id;
        return H5L_OK;
    }
    if (path[0] != '/') return h5l_w_fail(f, H5L_EINVAL, "%s: group path '%s' is not absolute", f->path, path);
    if ((rc = make_parents(f, path))) return rc;
    h5l_op_t op = {.kind = H5L_OP_GROUP, .id = (uint32_t)f->schema.nobjs, .name = strdup(path)};
    if (!op.name) return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    uint32_t gid = op.id;
    if ((rc = push_op(f, &op))) return rc;
    *grpid = (int)gid;
    return H5L_OK;
}

/* Default chunk of a variable with an unlimited dimension, chosen the way
 * netCDF-C chooses it (nc4_find_default_chunksizes2), so files look like
 * netCDF-4 files and small variables stay small: unlimited dimensions get
 * 1 (a 1-D unlimited variable about 4 KiB of elements); fixed dimensions
 * share a ~4 MiB budget in proportion to their lengths, capped at the
 * length; then chunks are shrunk so the last one along each dimension is
 * not mostly empty. A [time, 64] float variable gets [1, 64]; a 1-D
 * double [time] gets [512]. */
static void default_chunk(const h5l_schema_t *s, h5l_type_t t, int nd, const int *dimids, uint64_t *chunk)
{
    double nvals = 1;
    int nunlim = 0;
    uint64_t len[H5L_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        const h5l_dim_t *dim = &s->dims[dimids[d]];
        len[d] = h5l_schema_dimlen_now(s, (uint32_t)dimids[d]);
        chunk[d] = 0;
        if (dim->unlimited) {
            nunlim++;
            chunk[d] = 1;
        } else {
            nvals *= (double)len[d];
        }
    }
    if (nd == 1 && nunlim == 1) {
        chunk[0] = NC_CHUNK_1D_UNLIM / t.size;
        return;
    }
    if (nd > 1 && nunlim == nd) {
        uint64_t c = (uint64_t)pow(NC_CHUNK_BYTES / t.size, 1.0 / nd);
        for (int d = 0; d < nd; d++) chunk[d] = c ? c : 1;
        return;
    }
    for (int d = 0; d < nd; d++) {
        if (chunk[d]) continue;
        double sug = pow(NC_CHUNK_BYTES / (nvals * t.size), 1.0 / (nd - nunlim)) * (double)len[d] - 0.5;
        uint64_t c = sug >= (double)len[d] ? len[d] : sug < 1 ? 1 : (uint64_t)sug;
        chunk[d] = c ? c : 1;
    }
    for (int d = 0; d < nd; d++) { /* less overhang in the last chunk */
        if (s->dims[dimids[d]].unlimited || !len[d]) continue;
        uint64_t n = (len[d] + chunk[d] - 1) / chunk[d];
        chunk[d] -= (n * chunk[d] - len[d]) / n;
    }
}

int h5l_def_var(h5l_file_t *f, const char *path, hid_t type, int ndims, const int *dimids, const uint64_t *chunk,
                int *varid)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    if (!path || !varid || ndims < 0 || ndims > H5L_MAX_DIMS || (ndims && !dimids))
        return h5l_w_fail(f, H5L_EINVAL, "%s: h5l_def_var: bad argument for '%s'", f->path, path ? path : "(null)");
    h5l_type_t t;
    if (h5l_type_from_hid(type, &t))
        return h5l_w_fail(f, H5L_ETYPE, "%s: variable '%s': only 1/2/4/8-byte integers and IEEE floats are supported",
                    f->path, path);
    if (path[0] != '/') return h5l_w_fail(f, H5L_EINVAL, "%s: variable path '%s' is not absolute", f->path, path);
    if (h5l_schema_find(&f->schema, path) >= 0)
        return h5l_w_fail(f, H5L_EEXIST, "%s: '%s' is already defined", f->path, path);
    int unlim = 0;
    uint64_t dims[H5L_MAX_DIMS], ch[H5L_MAX_DIMS];
    for (int d = 0; d < ndims; d++) {
        if (dimids[d] < 0 || (size_t)dimids[d] >= f->schema.ndims)
            return h5l_w_fail(f, H5L_EBADID, "%s: variable '%s': unknown dimension id %d", f->path, path, dimids[d]);
        unlim |= f->schema.dims[dimids[d]].unlimited;
        dims[d] = h5l_schema_dimlen_now(&f->schema, (uint32_t)dimids[d]);
    }
    uint64_t cbytes = t.size;
    if (chunk) {
        for (int d = 0; d < ndims; d++) {
            if (chunk[d] == 0 || chunk[d] > UINT32_MAX)
                return h5l_w_fail(f, H5L_EINVAL, "%s: variable '%s': chunk dimension %d is %llu", f->path, path, d,
                            (unsigned long long)chunk[d]);
            ch[d] = chunk[d];
            /* libhdf5 wants chunks no larger than a fixed dimension; like
             * netCDF (NC_EBADCHUNK), refuse rather than change what the
             * caller asked for */
            if (!f->schema.dims[dimids[d]].unlimited) {
                if (dims[d] == 0)
                    return h5l_w_fail(f, H5L_EINVAL,
                                "%s: variable '%s': a chunked variable cannot have a fixed dimension of length 0",
                                f->path, path);
                if (ch[d] > dims[d])
                    return h5l_w_fail(f, H5L_EINVAL,
                                "%s: variable '%s': chunk dimension %d (%llu) is larger than dimension '%s' (%llu)",
                                f->path, path, d, (unsigned long long)ch[d], f->schema.dims[dimids[d]].name,
                                (unsigned long long)dims[d]);
            }
            cbytes = cbytes > UINT32_MAX ? cbytes : cbytes * ch[d];
        }
        if (cbytes >= UINT32_MAX)
            return h5l_w_fail(f, H5L_EINVAL, "%s: variable '%s': a chunk must be smaller than 4 GiB", f->path, path);
    } else if (unlim) {
        for (int d = 0; d < ndims; d++)
            if (!f->schema.dims[dimids[d]].unlimited && dims[d] == 0)
                return h5l_w_fail(f, H5L_EINVAL,
                            "%s: variable '%s': a chunked variable cannot have a fixed dimension of length 0", f->path,
                            path);
        default_chunk(&f->schema, t, ndims, dimids, ch);
    } else {
        h5l_schema_slab_shape(t, (uint32_t)ndims, dims, ch);
    }
    if ((rc = make_parents(f, path))) return rc;
    h5l_op_t op = {.kind = H5L_OP_VAR, .id = (uint32_t)f->schema.nobjs, .type = t};
    op.flags = (chunk || unlim) ? H5L_VAR_CHUNKED : 0;
    op.ndims = (uint32_t)ndims;
    op.name = strdup(path);
    op.dimids = malloc((size_t)(ndims + 1) * sizeof *op.dimids);
    op.chunk = malloc((size_t)(ndims + 1) * sizeof *op.chunk);
    op.data = calloc(1, t.size);
    op.data_len = t.size;
    if (op.data) h5l_schema_default_fill(t, op.data);
    if (!op.name || !op.dimids || !op.chunk || !op.data) {
        h5l_op_clear(&op);
        return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    }
    for (int d = 0; d < ndims; d++) {
        op.dimids[d] = (uint32_t)dimids[d];
        op.chunk[d] = ch[d];
    }
    uint32_t id = op.id;
    if ((rc = push_op(f, &op))) return rc;
    *varid = (int)id;
    return H5L_OK;
}

const h5l_obj_t *h5l_w_get_var(h5l_file_t *f, int varid)
{
    if (varid < 0 || (size_t)varid >= f->schema.nobjs || f->schema.objs[varid].kind != H5L_OBJ_VAR) return NULL;
    return &f->schema.objs[varid];
}

/* Set how variable varid is filled (mode H5L_FILL_*; fill: one element, or
 * NULL), in its pending definition: only before the flush that publishes
 * it, as netCDF allows only before enddef. */
static int set_fill(h5l_file_t *f, int varid, int mode, const void *fill, const char *fn)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    h5l_obj_t *o = (h5l_obj_t *)h5l_w_get_var(f, varid);
    if (!o) return h5l_w_fail(f, H5L_EBADID, "%s: %s: no variable with id %d", f->path, fn, varid);
    if (mode == H5L_FILL_USER && !fill) return h5l_w_fail(f, H5L_EINVAL, "%s: %s: NULL fill", f->path, fn);
    if (o->tick != f->tick + 1)
        return h5l_w_fail(f, H5L_ESTATE, "%s: fill value of '%s' must be set before the flush that publishes it", f->path,
                    o->path);
    for (size_t i = 0; i < f->nops; i++) {
        h5l_op_t *op = &f->ops[i];
        if (op->kind != H5L_OP_VAR || op->id != (uint32_t)varid) continue;
        op->flags &= ~(uint32_t)(H5L_VAR_FILL_USER | H5L_VAR_NOFILL);
        op->flags |= mode == H5L_FILL_USER ? H5L_VAR_FILL_USER : H5L_VAR_NOFILL;
        if (mode == H5L_FILL_USER)
            memcpy(op->data, fill, o->type.size);
        else
            memset(op->data, 0, o->type.size);
        memcpy(o->fill, op->data, o->type.size);
        o->fill_mode = mode;
        return H5L_OK;
    }
    return h5l_w_fail(f, H5L_ESTATE, "%s: pending definition of '%s' not found", f->path, o->path);
}

int h5l_def_var_fill(h5l_file_t *f, int varid, const void *fill)
{
    return set_fill(f, varid, H5L_FILL_USER, fill, "h5l_def_var_fill");
}

int h5l_def_var_nofill(h5l_file_t *f, int varid)
{
    return set_fill(f, varid, H5L_FILL_NONE, NULL, "h5l_def_var_nofill");
}

static int same_type(h5l_type_t a, h5l_type_t b)
{
    return a.cls == b.cls && a.size == b.size && a.sign == b.sign && a.order == b.order;
}

static int put_att_common(h5l_file_t *f, int objid, const char *name, h5l_type_t t, size_t n, const void *value)
{
    int rc = h5l_w_check_open(f);
    if (rc) return rc;
    if (objid < 0 || (size_t)objid >= f->schema.nobjs || !f->schema.objs[objid].kind)
        return h5l_w_fail(f, H5L_EBADID, "%s: attribute '%s': no object with id %d", f->path, name ? name : "", objid);
    if (!name || !name[0] || (n && !value))
        return h5l_w_fail(f, H5L_EINVAL, "%s: attribute: empty name or NULL value", f->path);
    if (t.cls != H5L_CLASS_STRING && n == 0)
        return h5l_w_fail(f, H5L_EINVAL, "%s: attribute '%s' has no elements", f->path, name);
    if (strcmp(name, "_FillValue") == 0) {
        /* netCDF's way of setting a fill value: the fill definition */
        const h5l_obj_t *o = h5l_w_get_var(f, objid);
        if (!o) return h5l_w_fail(f, H5L_EINVAL, "%s: _FillValue is a variable attribute", f->path);
        if (n != 1 || !same_type(t, o->type))
            return h5l_w_fail(f, H5L_EINVAL, "%s: _FillValue of '%s' must be one element of the variable's type", f->path,
                        o->path);
        return h5l_def_var_fill(f, objid, value);
    }
    h5l_err_t ne = {0};
    if (h5l_schema_attr_name_ok(name, &ne)) return h5l_w_fail(f, H5L_EINVAL, "%s: %s", f->path, ne.msg);
    h5l_op_t op = {.kind = H5L_OP_ATTR, .id = (uint32_t)objid, .type = t, .len = n};
    op.name = strdup(name);
    op.data_len = n * t.size;
    op.data = malloc(op.data_len + 1);
    if (!op.name || !op.data) {
        h5l_op_clear(&op);
        return h5l_w_fail(f, H5L_ENOMEM, "out of memory");
    }
    if (op.data_len) memcpy(op.data, value, op.data_len);
    return push_op(f, &op);
}

int h5l_put_att(h5l_file_t *f, int objid, const char *name, hid_t type, size_t n, const void *value)
{
    if (!f) return H5L_EINVAL;
    h5l_type_t t;
    if (h5l_type_from_hid(type, &t))
        return h5l_w_fail(f, H5L_ETYPE,
                    "%s: attribute '%s': use h5l_put_att_text for text; other types must be integers or IEEE floats",
                    f->path, name ? name : "");
    return put_att_common(f, objid, name, t, n, value);
}

int h5l_put_att_text(h5l_file_t *f, int objid, const char *name, const char *text)
{
    if (!f) return H5L_EINVAL;
    h5l_type_t t = {H5L_CLASS_STRING, 1, 0, 0};
    if (!text) return h5l_w_fail(f, H5L_EINVAL, "%s: attribute '%s': NULL text", f->path, name ? name : "");
    return put_att_common(f, objid, name, t, strlen(text), text);
}
