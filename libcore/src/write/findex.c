/* findex.c — finalizing's last steps: the chunk indexes (version 1
 * B-trees, hdf5/btree.c) written for every variable, checked through
 * libhdf5, and the datasets' layout messages pointed at them (and back,
 * h5l_final_unpoint). */
#include "finint.h"

/* ------------------------------------------------------------------ */
/* indexes and pointing (the first process)                            */

int h5l_final_index(h5l_final_t *p, hid_t file, int fd, h5l_err_t *err)
{
    /* addresses inside the HDF5 format count from its base (after the
     * user block); the plan's are file offsets */
    hid_t fcpl = H5Fget_create_plist(file);
    hsize_t ub = 0;
    int ok = fcpl >= 0 && H5Pget_userblock(fcpl, &ub) >= 0;
    if (fcpl >= 0) H5Pclose(fcpl);
    if (!ok) return h5l_err_set(err, H5L_EHDF5, "%s: cannot read its user block's size", p->path);
    p->base = ub;
    size_t m = 0, cap = 0, rcap = 0;
    uint8_t *buf = NULL;
    uint64_t *rel = NULL;
    int rc = H5L_OK;
    for (size_t i = 0; i < p->nv && !rc; i++) {
        fvar_t *v = &p->v[i];
        if (!v->has_bt) continue;
        m++;
        h5l_bt_t *bt = &v->bt;
        if ((rc = h5l_fin_grow_buf(&buf, &cap, (size_t)v->node_bytes, err, p->path))) break;
        if (h5l_grow_raw((void **)&rel, &rcap, (size_t)v->n, sizeof *rel)) {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
            break;
        }
        for (uint64_t k = 0; k < v->n; k++) rel[k] = v->addr[k] - ub;
        uint64_t root = p->fin_base + v->node_off - ub;
        if (h5l_bt_place(bt, root, root + bt->node_size, 0, 0)) {
            rc = h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
            break;
        }
        h5l_bt_set_addrs(bt, rel);
        h5l_bt_node(bt, bt->root_level, 0, buf);
        for (uint32_t l = 0; l < bt->root_level; l++)
            for (uint64_t j = 0; j < bt->count[l]; j++)
                h5l_bt_node(bt, l, j, buf + bt->node_size * (1 + bt->first[l] + j));
        h5l_bt_set_addrs(bt, NULL);
        rc = h5l_fd_write(fd, buf, (size_t)v->node_bytes, p->fin_base + v->node_off, p->path, err);
        if (rc) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err ? err->msg + (strncmp(err->msg, p->path, strlen(p->path)) ? 0 : strlen(p->path) + 2) : "");
            h5l_err_set(err, rc, "%s: finalizing: writing the chunk index of '%s': %s", p->path, v->path, m);
        }
    }
    free(buf);
    free(rel);
    if (rc || !m) return rc;
    /* /_h5log/fin.K.index: (object header, root) of each */
    uint64_t *w = malloc(2 * m * sizeof *w);
    if (!w) return h5l_err_set(err, H5L_ENOMEM, "%s: out of memory", p->path);
    size_t k = 0;
    for (size_t i = 0; i < p->nv; i++)
        if (p->v[i].has_bt) {
            w[2 * k] = p->v[i].oh + p->base; /* (file offsets) */
            w[2 * k + 1] = p->v[i].bt.root + p->base;
            k++;
        }
    char path[64];
    snprintf(path, sizeof path, "/_h5log/%s.index", p->fin_name);
    hsize_t dims[2] = {m, 2};
    hid_t sp = H5Screate_simple(2, dims, NULL);
    hid_t ds = sp < 0 ? -1 : H5Dcreate2(file, path, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int bad = ds < 0 || H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, w) < 0;
    if (ds >= 0) H5Dclose(ds);
    if (sp >= 0) H5Sclose(sp);
    free(w);
    return bad ? h5l_err_set(err, H5L_EHDF5, "%s: cannot write %s", p->path, path) : H5L_OK;
}

typedef struct rdctx {
    int fd;
    uint64_t base; /* libhdf5's addresses are off + base in the file */
    int bad;
} rdctx_t;

static void read_file(const void *ctx, uint64_t off, size_t n, void *buf)
{
    rdctx_t *c = (rdctx_t *)ctx;
    size_t got = 0;
    if (h5l_fd_read(c->fd, buf, n, off + c->base, &got, "", NULL) || got != n) {
        memset((uint8_t *)buf + got, 0, n - got);
        c->bad = 1;
    }
}

/* Does libhdf5 find v's first and last chunks where the plan put them? */
static int check_var(const h5l_final_t *p, hid_t f, const fvar_t *v, h5l_err_t *err)
{
    hid_t ds = H5Dopen2(f, v->path, H5P_DEFAULT);
    if (ds < 0) return h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot open '%s' again", p->path, v->path);
    int rc = H5L_OK;
    for (int k = 0; k < 2 && !rc; k++) {
        uint64_t o = k ? v->n - 1 : 0, c[H5L_MAX_DIMS];
        hsize_t off[H5L_MAX_DIMS];
        h5l_fin_blk_coord(v, v->blks[o], c);
        for (uint32_t d = 0; d < v->nd; d++) off[d] = c[d] * v->chunk[d];
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info_by_coord(ds, off, &mask, &addr, &size) < 0)
            rc = h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot read the chunk index of '%s' again",
                             p->path, v->path);
        else if (addr + p->base != v->addr[o] || size != v->S)
            rc = h5l_err_set(err, H5L_EHDF5,
                             "%s: finalizing: libhdf5 finds chunk %llu of '%s' at %llu (%llu bytes), not at %llu: "
                             "its layout is not the one this version writes",
                             p->path, (unsigned long long)o, v->path, (unsigned long long)(addr + p->base),
                             (unsigned long long)size, (unsigned long long)v->addr[o]);
    }
    H5Dclose(ds);
    return rc;
}

#define CHECK_VARS 16

int h5l_final_point(h5l_final_t *p, const char *path, int fd, h5l_err_t *err)
{
    rdctx_t rc0 = {fd, p->base, 0};
    size_t m = 0;
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (!v->has_bt) continue;
        m++;
        v->bt.oh = v->oh;
        v->bt.lay_at = 0;
        int rc = h5l_bt_point_layout(&v->bt, read_file, &rc0);
        if (rc || rc0.bad)
            return h5l_err_set(err, rc0.bad ? H5L_EIO : rc,
                               "%s: finalizing: the object header of '%s' is not what this version expects%s",
                               path, v->path, rc0.bad ? " (cannot read it)" : "");
        uint8_t old[4], f[8];
        read_file(&rc0, v->bt.ck_at, 4, old); /* (relative: read_file adds the base) */
        if (rc0.bad) return h5l_err_set(err, H5L_EIO, "%s: finalizing: cannot read '%s''s header", path, v->path);
        v->ck_old = (uint32_t)old[0] | (uint32_t)old[1] << 8 | (uint32_t)old[2] << 16 | (uint32_t)old[3] << 24;
        v->lay_at = v->bt.lay_at + p->base;
        v->ck_at = v->bt.ck_at + p->base;
        for (int i2 = 0; i2 < 8; i2++) f[i2] = (uint8_t)(v->bt.root >> (8 * i2));
        uint8_t ck[4];
        for (int i2 = 0; i2 < 4; i2++) ck[i2] = (uint8_t)(v->bt.ck >> (8 * i2));
        v->pointed = 1; /* (from here on, unpoint writes it back even if half of it was written) */
        if ((rc = h5l_fd_write(fd, f, 8, v->lay_at, path, err)) || (rc = h5l_fd_write(fd, ck, 4, v->ck_at, path, err))) {
            char m[sizeof err->msg];
            snprintf(m, sizeof m, "%s", err ? err->msg + (strncmp(err->msg, path, strlen(path)) ? 0 : strlen(path) + 2) : "");
            return h5l_err_set(err, rc, "%s: finalizing: pointing the layout of '%s' at its index: %s", path, v->path, m);
        }
    }
    if (!m) return H5L_OK;
    /* libhdf5 reads the file as the plan says: a sample of the datasets */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot open it again", path);
    int rc = H5L_OK;
    size_t k = 0, step = m > CHECK_VARS ? m / CHECK_VARS : 1;
    for (size_t i = 0; i < p->nv && !rc; i++) {
        if (!p->v[i].has_bt) continue;
        if (k++ % step == 0 || k == m) rc = check_var(p, f, &p->v[i], err);
    }
    if (H5Fclose(f) < 0 && !rc) rc = h5l_err_set(err, H5L_EHDF5, "%s: finalizing: libhdf5 cannot close it", path);
    return rc;
}

int h5l_final_unpoint(h5l_final_t *p, int fd, h5l_err_t *err)
{
    int rc = H5L_OK;
    for (size_t i = 0; i < p->nv; i++) {
        fvar_t *v = &p->v[i];
        if (!v->pointed) continue;
        uint8_t f[8], ck[4];
        memset(f, 0xff, 8);
        for (int i2 = 0; i2 < 4; i2++) ck[i2] = (uint8_t)(v->ck_old >> (8 * i2));
        int r1 = h5l_fd_write(fd, f, 8, v->lay_at, p->path, err);
        int r2 = r1 ? r1 : h5l_fd_write(fd, ck, 4, v->ck_at, p->path, err);
        if (r2 && !rc) rc = r2;
        if (!r2) v->pointed = 0;
    }
    return rc;
}
