/* h5logdump — print the journal, ticks, schema and records of a log-layout
 * file; with --check, verify every checksum and report the first corruption.
 *
 * Usage: h5logdump [--check] [--records] [--quiet] FILE
 * Exit status: 0 fine, 1 damaged or unreadable, 2 usage. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5log_reader.h"
#include "codec.h"
#include "format.h"
#include "journal.h"

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
            if (a->type.size == 4) { uint32_t w = (uint32_t)u; float fl; memcpy(&fl, &w, 4); d = fl; }
            else memcpy(&d, &u, 8);
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
               (unsigned long long)dim->lens[dim->nlens - 1].len, dim->unlimited ? " UNLIMITED" : "",
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

static void print_records(h5l_reader_t *r, const h5l_tick_info_t *t)
{
    int fd = open(h5l_reader_path(r), O_RDONLY);
    uint8_t *tab = malloc(t->table_size ? t->table_size : 1);
    if (fd < 0 || !tab || h5l_pread_full(fd, tab, t->table_size, t->table_off) != (ssize_t)t->table_size) {
        printf("    (cannot read record table)\n");
        goto out;
    }
    h5l_reader_rdlock(r);
    const h5l_schema_t *s = h5l_reader_schema(r);
    size_t pos = 0;
    for (uint32_t k = 0; k < t->nranks; k++) {
        h5l_block_t b;
        if (h5l_block_decode(tab + pos, &b)) break;
        h5l_cur_t c = h5l_cur(tab + pos + H5L_BLOCK_LEN, b.payload);
        for (uint64_t i = 0; i < b.nrec; i++) {
            h5l_recfix_t f;
            h5l_recfix_decode(&c, &f);
            uint32_t nd = s->objs[f.objid].ndims;
            printf("    seq (%llu,%u,%llu) %s off %llu size %llu", (unsigned long long)t->tick, b.rank,
                   (unsigned long long)f.order, s->objs[f.objid].path, (unsigned long long)f.offset,
                   (unsigned long long)f.size);
            for (uint32_t bx = 0; bx < f.nboxes; bx++) {
                uint64_t st[H5L_MAX_DIMS], ct[H5L_MAX_DIMS];
                for (uint32_t d = 0; d < nd; d++) st[d] = h5l_cur_u64(&c);
                for (uint32_t d = 0; d < nd; d++) ct[d] = h5l_cur_u64(&c);
                printf(" start [");
                for (uint32_t d = 0; d < nd; d++) printf("%s%llu", d ? "," : "", (unsigned long long)st[d]);
                printf("] count [");
                for (uint32_t d = 0; d < nd; d++) printf("%s%llu", d ? "," : "", (unsigned long long)ct[d]);
                printf("]");
            }
            printf("\n");
        }
        pos += H5L_BLOCK_LEN + b.payload;
    }
    h5l_reader_unlock(r);
out:
    if (fd >= 0) close(fd);
    free(tab);
}

int main(int argc, char **argv)
{
    int check = 0, records = 0, quiet = 0, a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--check")) check = 1;
        else if (!strcmp(argv[a], "--records")) records = 1;
        else if (!strcmp(argv[a], "--quiet") || !strcmp(argv[a], "-q")) quiet = 1;
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
    if (h5l_reader_open(argv[a], &r, &e)) {
        /* open loads every tick: a damaged journal or table fails here */
        fprintf(stderr, "h5logdump: %s\n", e.msg);
        if (check) printf("CORRUPT: %s\n", e.msg);
        return 1;
    }
    uint64_t n = h5l_reader_ntick(r);
    if (!quiet) {
        const uint8_t *id = h5l_reader_id(r);
        printf("file: %s\nstate: %s, journal %s\nidentity: ", argv[a],
               h5l_reader_closed(r) ? "closed by its writer" : "open (being written or writer died)",
               h5l_reader_live(r) ? "in sidecar" : "embedded");
        for (int i = 0; i < 16; i++) printf("%02x", id[i]);
        printf("\nticks: %llu, records: %llu, journal bytes read: %llu\n", (unsigned long long)n,
               (unsigned long long)h5l_reader_nrecords(r), (unsigned long long)h5l_reader_journal_pos(r));
        print_schema(r);
        for (uint64_t t = 1; t <= n; t++) {
            h5l_tick_info_t ti;
            h5l_reader_tick_info(r, t, &ti);
            printf("tick %llu: ranks %u, data %llu bytes at %llu, table %llu bytes at %llu, %llu records\n",
                   (unsigned long long)t, ti.nranks, (unsigned long long)ti.data_size,
                   (unsigned long long)ti.data_off, (unsigned long long)ti.table_size,
                   (unsigned long long)ti.table_off, (unsigned long long)ti.nrecords);
            if (records) print_records(r, &ti);
        }
    }
    if (check)
        printf("OK: %llu ticks, %llu records; every journal record and record table verified\n",
               (unsigned long long)n, (unsigned long long)h5l_reader_nrecords(r));
    h5l_reader_close(r);
    return 0;
}
