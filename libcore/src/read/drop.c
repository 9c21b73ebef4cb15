/* drop.c — drop-behind accounting (see drop.h).
 *
 * Why a table of segments rather than a stream pointer: the daemon's readers
 * take a file's log in an order that is rarely the log's own (a chunk
 * gathers rows from several records; readahead requests are served out of
 * order by several threads), so "everything behind the head" would drop
 * bytes not read yet. Counting bytes per segment is exact for any order.
 * The table is small because a reader keeps few segments open at once. */
#include "drop.h"

#include <pthread.h>
#include <stdlib.h>

#define NSLOT 128

typedef struct slot {
    uint64_t seg;  /* segment number + 1; 0: free */
    uint64_t used; /* bytes of it counted */
} slot_t;

struct h5l_drop {
    pthread_mutex_t mu;
    slot_t slot[NSLOT];
    unsigned hand; /* next slot a full table reuses */
};

h5l_drop_t *h5l_drop_new(void)
{
    h5l_drop_t *d = calloc(1, sizeof *d);
    if (d) pthread_mutex_init(&d->mu, NULL);
    return d;
}

void h5l_drop_free(h5l_drop_t *d)
{
    if (!d) return;
    pthread_mutex_destroy(&d->mu);
    free(d);
}

/* Count n bytes (within one segment) of segment seg; 1 if it is complete. */
static int count_locked(h5l_drop_t *d, uint64_t seg, uint64_t n)
{
    slot_t *free_slot = NULL;
    for (unsigned i = 0; i < NSLOT; i++) {
        slot_t *s = &d->slot[i];
        if (s->seg == seg + 1) {
            s->used += n;
            if (s->used < H5L_DROP_SEG) return 0;
            s->seg = 0;
            return 1;
        }
        if (!s->seg && !free_slot) free_slot = s;
    }
    if (n >= H5L_DROP_SEG) return 1;
    if (!free_slot) { /* forget the oldest guess: that segment just stays cached */
        free_slot = &d->slot[d->hand];
        d->hand = (d->hand + 1) % NSLOT;
    }
    free_slot->seg = seg + 1;
    free_slot->used = n;
    return 0;
}

void h5l_drop_count(h5l_drop_t *d, uint64_t off, uint64_t n, h5l_drop_fn fn, void *ctx)
{
    uint64_t done[8];
    while (n) {
        int nd = 0;
        pthread_mutex_lock(&d->mu);
        while (n && nd < 8) {
            uint64_t seg = off / H5L_DROP_SEG, end = (seg + 1) * H5L_DROP_SEG;
            uint64_t k = end - off < n ? end - off : n;
            if (count_locked(d, seg, k)) done[nd++] = seg;
            off += k;
            n -= k;
        }
        pthread_mutex_unlock(&d->mu);
        for (int i = 0; i < nd; i++) fn(ctx, done[i] * H5L_DROP_SEG, H5L_DROP_SEG);
    }
}
