/* test_tbuf.c — per-thread buffers (tbuf.h).
 *
 * Why: the read path writes replies and scratch data into these buffers; two
 * slots or two threads sharing one would mix replies, and a buffer not
 * freed when libfuse ends a worker thread is a leak per thread (make asan
 * runs this test under LeakSanitizer: threads here allocate and exit). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tbuf.h"
#include "tharness.h"

static void test_reuse_and_growth(void)
{
    char *a = hfs_tbuf(HFS_TBUF_REPLY, 100);
    CHECK(a != NULL);
    memset(a, 1, 100);
    CHECK(hfs_tbuf(HFS_TBUF_REPLY, 4096) == a); /* fits: the same buffer */
    char *s = hfs_tbuf(HFS_TBUF_SCRATCH, 100);
    CHECK(s != NULL && s != a); /* another slot, another buffer */
    size_t big = (size_t)3 << 20;
    char *b = hfs_tbuf(HFS_TBUF_REPLY, big);
    CHECK(b != NULL);
    if (b) {
        memset(b, 2, big); /* all of it is ours (ASan would say otherwise) */
        CHECK(hfs_tbuf(HFS_TBUF_REPLY, 10) == b);
    }
    CHECK(hfs_tbuf(HFS_TBUF_SCRATCH, 10) == s);
}

static void *worker(void *arg)
{
    void **out = arg;
    char *p = hfs_tbuf(HFS_TBUF_REPLY, 1000);
    if (p) memset(p, 3, 1000);
    *out = p;
    hfs_tbuf(HFS_TBUF_SCRATCH, (size_t)2 << 20);
    return NULL;
}

static void test_per_thread(void)
{
    void *mine = hfs_tbuf(HFS_TBUF_REPLY, 1);
    void *theirs[4] = {0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, &theirs[i]);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    /* each thread had its own buffer, distinct from this thread's while it
     * lived; ended threads' buffers are freed (LeakSanitizer under make asan) */
    for (int i = 0; i < 4; i++) CHECK(theirs[i] != NULL && theirs[i] != mine);
    void *u[2] = {0};
    pthread_create(&t[0], NULL, worker, &u[0]);
    pthread_create(&t[1], NULL, worker, &u[1]);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    CHECK(u[0] != NULL && u[1] != NULL);
}

TEST_MAIN(T(test_reuse_and_growth), T(test_per_thread))
