/* tbuf.c — per-thread buffers (see tbuf.h). */
#include "tbuf.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct tbufs {
    void *p[HFS_TBUF_NSLOTS];
    size_t cap[HFS_TBUF_NSLOTS];
} tbufs_t;

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void tbufs_free(void *v)
{
    tbufs_t *t = v;
    for (int i = 0; i < HFS_TBUF_NSLOTS; i++) free(t->p[i]);
    free(t);
}

static void key_init(void) { pthread_key_create(&key, tbufs_free); }

void *hfs_tbuf(int slot, size_t n)
{
    pthread_once(&once, key_init);
    tbufs_t *t = pthread_getspecific(key);
    if (!t) {
        if (!(t = calloc(1, sizeof *t))) return NULL;
        if (pthread_setspecific(key, t) != 0) {
            free(t);
            return NULL;
        }
    }
    if (t->cap[slot] >= n && t->p[slot]) return t->p[slot];
    size_t cap = n < ((size_t)1 << 20) ? (size_t)1 << 20 : n; /* a FUSE reply at least */
    void *p = malloc(cap);                                    /* not realloc: the old contents are not needed */
    if (!p) return NULL;
    free(t->p[slot]);
    t->p[slot] = p;
    t->cap[slot] = cap;
    return p;
}
