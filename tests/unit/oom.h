/* oom.h — allocation failures on demand, for tests linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (the Makefile's rule for
 * the test says so): every malloc, calloc and realloc of the objects in the
 * link (the library's and the test's own) goes through these wrappers.
 *
 * Why: out of memory is an error every function of libcore must return
 * (H5L_ENOMEM) and recover from, but nothing on a test machine runs out.
 * oom_arm(n) makes the n-th allocation from then on fail, once; a test arms
 * it around one library call, for n = 1, 2, .. until the call makes fewer
 * than n allocations, and checks each time that the call failed cleanly
 * (the right code, nothing half done, no crash, nothing leaked under make
 * asan) and that the object still works once memory is back. Allocations
 * inside other libraries (libc's own, strdup) are not counted. */
#ifndef OOM_H
#define OOM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <execinfo.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);

static _Atomic long oom_at;    /* 0: off; else allocations left until the one that fails */
static _Atomic long oom_fired; /* failures since oom_arm */

static int oom_fail(void)
{
    long a = atomic_load(&oom_at);
    while (a > 0) {
        if (atomic_compare_exchange_weak(&oom_at, &a, a - 1)) {
            if (a == 1) {
                atomic_fetch_add(&oom_fired, 1);
                if (getenv("OOM_TRACE")) { /* where it failed, for whoever debugs a failure */
                    void *bt[16];
                    backtrace_symbols_fd(bt, backtrace(bt, 16), 2);
                }
                return 1;
            }
            return 0;
        }
    }
    return 0;
}

void *__wrap_malloc(size_t n) { return oom_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return oom_fail() ? NULL : __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { return oom_fail() ? NULL : __real_realloc(p, n); }

/* The n-th allocation from now fails (n >= 1). */
static inline void oom_arm(long n)
{
    atomic_store(&oom_fired, 0);
    atomic_store(&oom_at, n);
}
/* Disarm; 1 when the armed failure happened. */
static inline int oom_off(void)
{
    atomic_store(&oom_at, 0);
    return atomic_load(&oom_fired) > 0;
}

#endif
