/* h5logdump — print the journal, ticks, schema and records of a log-layout
 * file; with --check, verify every checksum and report the first corruption.
 *
 * Usage: h5logdump [--check] [--records] [--quiet] FILE
 * A damaged tick is reported (CORRUPT: tick N ...) after the intact ticks
 * before it; --check also reads every data byte against its checksum, and
 * always reads the whole journal and every record table (never starting
 * from index checkpoints).
 * Exit status: 0 fine, 1 damaged or unreadable, 2 usage. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log_reader.h"
#include "h5log/codec.h"
#include "h5log/format.h"
#include "h5log/fdio.h"

static const char *type_name(h5l_type_t t)
{
    static char b[32];
    const char *c = t.cls == H5L_CLASS_INT ? (t.sign ? "int" : "uint") : t.cls == H5L_CLASS_FLOAT ? "float" : "char";
    snprintf(b, sizeof b, "%s%d%s", c, t.cls == H5L_CLASS_STRING ? 8 : t.size * 8, t.order ? "be" : "");
    return b;
}

static void print_attr_value(const h5l_attr_t *a)
{
    if (a->type.cls == H5L_CLASS_STRING) {
        printf("\"%.*s\"", (int)a->n, (const char *)a->value);
        return;
    }
    for (uint64_t i = 0; i < a->n && i < 8; i++) {
        const uint8_t *p = (const uint8_t *)a->value + i * a->type.size;
        uint64_t u = 0;
        for (int k = 0; k < a->type.size; k++) u |= (uint64_t)p[a->type.order ? a->type.size - 1 - k : k] << (8 * k);
        if (a->type.cls == H5L_CLASS_FLOAT) {
            double d;
            if (a->type.size == 4) {
                uint32_t w = (uint32_t)u;
                float fl;
                memcpy(&fl, &w, 4);
                d = fl;
            } else
                memcpy(&d, &u, 8);
            printf("%s%g", i ? ", " : "", d);
        } else if (a->type.sign) {
            int64_t v = (int64_t)(u << (64 - 8 * a->type.size)) >> (64 - 8 * a->type.size);
            printf("%s%lld", i ? ", " : "", (long long)v);
        } else {
            printf("%s%llu", i ? ", " : "", (unsigned long long)u);
        }
    }
    if (a->n > 8) printf(", ... (%llu values)", (unsigned long long)a->n);
}

static void print_schema(h5l_reader_t *r)
{
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    printf("dimensions:\n");
    for (size_t d = 0; d < s->ndims; d++) {
        const h5l_dim_t *dim = &s->dims[d];
        printf("  [%zu] %s = %llu%s (defined at tick %llu)\n", d, dim->name,
               (unsigned long long)h5l_schema_dimlen(s, (uint32_t)d, UINT64_MAX), dim->unlimited ? " UNLIMITED" : "",
               (unsigned long long)dim->tick);
    }
    printf("objects:\n");
    for (size_t i = 0; i < s->nobjs; i++) {
        const h5l_obj_t *o = &s->objs[i];
        if (o->kind == H5L_OBJ_GROUP) {
            printf("  [%zu] group %s\n", i, o->path);
            continue;
        }
        printf("  [%zu] %s %s(", i, type_name(o->type), o->path);
        for (uint32_t d = 0; d < o->ndims; d++) printf("%s%s", d ? ", " : "", s->dims[o->dimids[d]].name);
        printf(") %s [", o->chunked ? "chunks" : "contiguous, slabs");
        for (uint32_t d = 0; d < o->ndims; d++) printf("%s%llu", d ? ", " : "", (unsigned long long)o->chunk[d]);
        printf("] tick %llu\n", (unsigned long long)o->tick);
    }
    printf("attributes:\n");
    for (size_t i = 0; i < s->nattrs; i++) {
        const h5l_attr_t *a = &s->attrs[i];
        printf("  %s:%s %s = ", s->objs[a->objid].path, a->name, type_name(a->type));
        print_attr_value(a);
        printf(" (tick %llu)\n", (unsigned long long)a->tick);
    }
    h5l_reader_unlock(r);
}

/* The records of tick t as the record table has them (decoded again here:
 * the reader indexes records by chunk, not by tick). */
/* One problem with an index checkpoint (h5l_reader_check_checkpoints). */
static void report_ckpt(void *ctx, const char *msg)
{
    (void)ctx;
    printf("CORRUPT: %s\n", msg);
}

static void print_records(h5l_reader_t *r, const h5l_tick_info_t *t)
{
    int fd = open(h5l_reader_path(r), O_RDONLY);
    uint8_t *tab = malloc(t->table_size ? t->table_size : 1);
    if (fd < 0 || !tab || h5l_fd_read_all(fd, tab, t->table_size, t->table_off, NULL, NULL)) {
        printf("    (cannot read record table)\n");
        goto out;
    }
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    size_t pos = 0;
    uint64_t off = t->data_off;
    for (uint32_t k = 0; k < t->nranks; k++) {
        pos = (pos + 7) & ~(size_t)7;
        if (pos + H5L_BLOCK_LEN > t->table_size) break;
        h5l_block_t b;
        h5l_block_decode(tab + pos, &b);
        if (b.payload > t->table_size - pos - H5L_BLOCK_LEN) break;
        h5l_cur_t c = h5l_cur(tab + pos + H5L_BLOCK_LEN, b.payload);
        printf("    rank %u: %u records, %llu data bytes at %llu\n", k, b.nrec, (unsigned long long)b.size,
               (unsigned long long)off);
        for (uint64_t i = 0; i < b.nrec && !c.bad; i++) {
            uint32_t objid, nb;
            if (h5l_rec_head_decode(&c, &objid, &nb) || objid >= s->nobjs || s->objs[objid].kind != H5L_OBJ_VAR) break;
            const h5l_obj_t *o = &s->objs[objid];
            uint32_t nd = o->ndims;
            uint64_t bytes = 0;
            printf("    seq (%llu,%u,%llu) %s off %llu", (unsigned long long)t->tick, k, (unsigned long long)i, o->path,
                   (unsigned long long)off);
            for (uint32_t bx = 0; bx < nb && !c.bad; bx++) {
                uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS], n = 1;
                for (uint32_t d = 0; d < nd; d++) st[d] = h5l_cur_varint(&c);
                for (uint32_t d = 0; d < nd; d++) ct[d] = h5l_cur_varint(&c);
                printf(" start [");
                for (uint32_t d = 0; d < nd; d++) printf("%s%llu", d ? "," : "", (unsigned long long)st[d]);
                printf("] count [");
                for (uint32_t d = 0; d < nd; d++) {
                    printf("%s%llu", d ? "," : "", (unsigned long long)ct[d]);
                    n *= ct[d];
                }
                printf("]");
                bytes += n * o->type.size;
            }
            printf(" size %llu\n", (unsigned long long)bytes);
            off += bytes;
        }
        pos += H5L_BLOCK_LEN + b.payload;
    }
    h5l_reader_unlock(r);
out:
    if (fd >= 0) close(fd);
    free(tab);
}

/* What the state line adds for a closed file: whether plain HDF5 readers
 * can read it (the user block's finalized flag, docs/format.md 2). */
static const char *finalized_note(const char *path, int closed)
{
    if (!closed) return "";
    uint8_t b[H5L_UB_LEN];
    size_t n = 0;
    h5l_ub_t ub;
    h5l_err_t e = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int ok = fd >= 0 && !h5l_fd_read(fd, b, sizeof b, 0, &n, path, &e) && n == sizeof b &&
             !h5l_ub_decode(b, &ub, path, &e);
    if (fd >= 0) close(fd);
    if (!ok) return "";
    return ub.flags & H5L_UB_FINALIZED ? ", finalized (plain HDF5 readers read it)"
                                       : ", not finalized (plain HDF5 readers refuse its variables; h5logrecover "
                                         "finalizes it)";
}

int main(int argc, char **argv)
{
    int check = 0, records = 0, quiet = 0, a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--check"))
            check = 1;
        else if (!strcmp(argv[a], "--records"))
            records = 1;
        else if (!strcmp(argv[a], "--quiet") || !strcmp(argv[a], "-q"))
            quiet = 1;
        else if (!strcmp(argv[a], "-h") || !strcmp(argv[a], "--help")) {
            printf("usage: h5logdump [--check] [--records] [--quiet] FILE\n");
            return 0;
        } else {
            fprintf(stderr, "usage: h5logdump [--check] [--records] [--quiet] FILE\n");
            return 2;
        }
    }
    if (argc - a != 1) {
        fprintf(stderr, "usage: h5logdump [--check] [--records] [--quiet] FILE\n");
        return 2;
    }
    h5l_err_t e = {0};
    h5l_reader_t *r;
    /* --check (and --records, which prints tables) reads the whole journal
     * and verifies every record table at open, whatever index checkpoints
     * the file has (they let a reader skip them: docs/format.md 3.5) */
    if (h5l_reader_open_flags(argv[a], check || records ? H5L_READER_FULL : 0, &r, &e)) {
        /* nothing can be read: no user block, journal header, ... */
        fprintf(stderr, "h5logdump: %s\n", e.msg);
        /* no log-layout magic is not damage we can name: a plain HDF5
         * file, or one whose writer has not written its user block yet */
        if (check) printf("%s: %s\n", e.code == H5L_EFORMAT ? "NOT LOG-LAYOUT" : "CORRUPT", e.msg);
        return 1;
    }
    uint64_t n = h5l_reader_ntick(r), damaged = 0;
    h5l_err_t de = {0};
    int dmg = h5l_reader_damage(r, &damaged, &de);
    if (!quiet) {
        const uint8_t *id = h5l_reader_id(r);
        printf("file: %s\nstate: %s, journal %s%s\nidentity: ", argv[a],
               h5l_reader_closed(r) ? "closed by its writer" : "open (being written or writer died)",
               h5l_reader_live(r) ? "in sidecar" : "embedded", finalized_note(argv[a], h5l_reader_closed(r)));
        for (int i = 0; i < 16; i++) printf("%02x", id[i]);
        printf("\nticks: %llu, records: %llu, journal bytes read: %llu\n", (unsigned long long)n,
               (unsigned long long)h5l_reader_nrecords(r), (unsigned long long)h5l_reader_journal_pos(r));
        uint64_t ck = h5l_reader_ckpt_last(r);
        if (ck) {
            uint64_t nseg, nsum;
            h5l_reader_ckpt_segments(r, &nseg, &nsum);
            printf("from index checkpoints: ticks 1..%llu (%llu segments, %llu opened from their summaries)\n",
                   (unsigned long long)ck, (unsigned long long)nseg, (unsigned long long)nsum);
        }
        print_schema(r);
        for (uint64_t t = 1; t <= n; t++) {
            h5l_tick_info_t ti;
            int trc = h5l_reader_tick_info(r, t, &ti);
            if (trc) { /* a checkpoint read again for its ticks' records, and failing now */
                printf("tick %llu: cannot be read: %s\n", (unsigned long long)t, h5l_strerror(trc));
                continue;
            }
            printf("tick %llu: ranks %u, data %llu bytes at %llu, table %llu bytes at %llu, %llu records\n",
                   (unsigned long long)t, ti.nranks, (unsigned long long)ti.data_size, (unsigned long long)ti.data_off,
                   (unsigned long long)ti.table_size, (unsigned long long)ti.table_off,
                   (unsigned long long)ti.nrecords);
            if (records) print_records(r, &ti);
        }
    }
    int bad = 0;
    if (dmg) {
        fprintf(stderr, "h5logdump: %s\n", de.msg);
        if (damaged)
            printf("CORRUPT: tick %llu: %s (ticks 1..%llu are intact)\n", (unsigned long long)damaged, de.msg,
                   (unsigned long long)n);
        else
            printf("CORRUPT: %s\n", de.msg);
        bad = 1;
    }
    if (check) {
        /* every data byte of every tick against its segment checksum */
        uint64_t badsegs = 0, badticks = 0;
        for (uint64_t t = 1; t <= n; t++) {
            uint64_t nb = 0;
            h5l_err_t ve = {0};
            int rc = h5l_reader_verify(r, t, &nb, &ve);
            if (rc) {
                printf("CORRUPT: tick %llu: %s%s\n", (unsigned long long)t, ve.msg,
                       nb > 1 ? " (and more segments of this tick)" : "");
                badsegs += nb;
                badticks++;
                bad = 1;
            }
        }
        /* the index checkpoints against the frames and tables just verified:
         * readers skip a damaged one silently, and would trust a wrong one */
        uint64_t nck = 0, badck = 0;
        h5l_err_t ce = {0};
        if (h5l_reader_check_checkpoints(r, report_ckpt, NULL, &nck, &badck, &ce)) {
            printf("CORRUPT: %s\n", ce.msg);
            bad = 1;
        }
        if (badck) bad = 1;
        if (!bad)
            printf("OK: %llu ticks, %llu records, %llu index checkpoints; every journal frame, record table, "
                   "checkpoint and data byte verified\n",
                   (unsigned long long)n, (unsigned long long)h5l_reader_nrecords(r), (unsigned long long)nck);
        else if (badticks)
            printf("CORRUPT: %llu data segments of %llu ticks fail their checksums\n", (unsigned long long)badsegs,
                   (unsigned long long)badticks);
    }
    h5l_reader_close(r);
    return bad ? 1 : 0;
}
