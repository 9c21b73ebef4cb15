/* test_badlog.c — the set of bad file versions already reported (badlog.h).
 *
 * Why: the daemon logs a bad file's reason only when hfs_badlog_first says
 * it is new. A set that forgets (as the ring of 256 it replaced did) logs a
 * file again once enough other bad files were seen; one that confuses
 * versions hides a changed file's new problem; one that races logs twice
 * when two threads meet the file at once. */
#include <pthread.h>
#include <string.h>

#include "badlog.h"
#include "tharness.h"

static struct stat version(dev_t dev, ino_t ino, off_t size, time_t sec, long nsec)
{
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_dev = dev;
    st.st_ino = ino;
    st.st_size = size;
    st.st_mtim.tv_sec = sec;
    st.st_mtim.tv_nsec = nsec;
    st.st_atim.tv_sec = 12345; /* not part of a version */
    return st;
}

static void test_once_per_version(void)
{
    hfs_badlog_clear();
    struct stat a = version(1, 10, 100, 1000, 5);
    CHECK_EQ(hfs_badlog_first(&a), 1);
    CHECK_EQ(hfs_badlog_first(&a), 0);
    a.st_atim.tv_sec = 99; /* read again: the same version */
    a.st_ctim.tv_sec = 98;
    CHECK_EQ(hfs_badlog_first(&a), 0);
    /* each field makes another version */
    struct stat b[5] = {version(2, 10, 100, 1000, 5), version(1, 11, 100, 1000, 5), version(1, 10, 101, 1000, 5),
                        version(1, 10, 100, 1001, 5), version(1, 10, 100, 1000, 6)};
    for (int i = 0; i < 5; i++) CHECK_EQ(hfs_badlog_first(&b[i]), 1);
    for (int i = 0; i < 5; i++) CHECK_EQ(hfs_badlog_first(&b[i]), 0);
    hfs_badlog_clear();
    CHECK_EQ(hfs_badlog_first(&a), 1);
}

static void test_never_forgets(void)
{
    /* far more versions than a ring would hold, and past several growths:
     * the first is still known, every one is new exactly once */
    hfs_badlog_clear();
    enum { N = 100000 };
    int news = 0;
    for (int i = 0; i < N; i++) {
        struct stat s = version(7, (ino_t)(i % 1000), i / 1000, 1700000000, 0);
        news += hfs_badlog_first(&s);
    }
    CHECK_EQ(news, N);
    int again = 0;
    for (int i = N - 1; i >= 0; i--) {
        struct stat s = version(7, (ino_t)(i % 1000), i / 1000, 1700000000, 0);
        again += hfs_badlog_first(&s);
    }
    CHECK_EQ(again, 0);
    hfs_badlog_clear();
}

static int news_total;
static pthread_mutex_t news_mu = PTHREAD_MUTEX_INITIALIZER;

static void *racer(void *arg)
{
    (void)arg;
    int n = 0;
    for (int i = 0; i < 2000; i++) {
        struct stat s = version(3, (ino_t)i, 1, 2, 3);
        n += hfs_badlog_first(&s);
    }
    pthread_mutex_lock(&news_mu);
    news_total += n;
    pthread_mutex_unlock(&news_mu);
    return NULL;
}

static void test_threads_agree(void)
{
    /* four threads meet the same 2000 versions at once: 2000 first times */
    hfs_badlog_clear();
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, racer, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK_EQ(news_total, 2000);
    hfs_badlog_clear();
}

TEST_MAIN(T(test_once_per_version), T(test_never_forgets), T(test_threads_agree))
