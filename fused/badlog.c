/* badlog.c — the set of bad file versions already reported (see badlog.h):
 * an open-addressing hash table, linear probing, grown at half full. */
#include "badlog.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct version {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtim;
    int used;
} version_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static version_t *slots;
static size_t nslots, count;

static int same(const version_t *a, const version_t *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
           a->mtim.tv_nsec == b->mtim.tv_nsec;
}

static size_t hash(const version_t *v)
{
    uint64_t k = (uint64_t)v->dev * 0x9E3779B97F4A7C15ull ^ (uint64_t)v->ino ^
                 (uint64_t)v->size * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)v->mtim.tv_sec * 0x165667B19E3779F9ull ^
                 (uint64_t)v->mtim.tv_nsec;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}

/* The slot of version v in table t of n slots (a power of 2, never full),
 * or the free slot where it belongs. */
static version_t *probe(version_t *t, size_t n, const version_t *v)
{
    for (size_t i = hash(v) & (n - 1);; i = (i + 1) & (n - 1))
        if (!t[i].used || same(&t[i], v)) return &t[i];
}

/* Under mu: room for one more, at most half full. -1 if out of memory. */
static int grow(void)
{
    if (2 * (count + 1) <= nslots) return 0;
    size_t n = nslots ? 2 * nslots : 64;
    version_t *t = calloc(n, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < nslots; i++)
        if (slots[i].used) *probe(t, n, &slots[i]) = slots[i];
    free(slots);
    slots = t;
    nslots = n;
    return 0;
}

int hfs_badlog_first(const struct stat *st)
{
    version_t key = {st->st_dev, st->st_ino, st->st_size, st->st_mtim, 1};
    pthread_mutex_lock(&mu);
    int first = 1;
    if (grow() == 0) {
        version_t *v = probe(slots, nslots, &key);
        if (v->used) {
            first = 0;
        } else {
            *v = key;
            count++;
        }
    } else if (nslots) { /* cannot grow, but the version may be known */
        first = !probe(slots, nslots, &key)->used;
    }
    pthread_mutex_unlock(&mu);
    return first;
}

void hfs_badlog_clear(void)
{
    pthread_mutex_lock(&mu);
    free(slots);
    slots = NULL;
    nslots = count = 0;
    pthread_mutex_unlock(&mu);
}
