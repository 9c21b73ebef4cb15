/* grow.h — the growable-array step shared by libcore and the daemon.
 *
 * Owns nothing: h5l_grow only resizes an array its caller owns. One copy
 * instead of one per module, so the doubling, the overflow check and the
 * zeroing of new elements are the same everywhere (several structures
 * rely on new slots reading as zero). */
#ifndef H5L_GROW_H
#define H5L_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Make room for `need` elements of `elem` bytes in *p (capacity *cap,
 * doubled from 16). New elements are zeroed. Returns 0, or -1 (size
 * overflow or out of memory) with *p and *cap untouched. */
static inline int h5l_grow_as(void **p, size_t *cap, size_t need, size_t elem, int zero)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2) return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return -1;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    if (zero) memset((char *)q + *cap * elem, 0, (c - *cap) * elem);
    *p = q;
    *cap = c;
    return 0;
}

static inline int h5l_grow(void **p, size_t *cap, size_t need, size_t elem)
{
    return h5l_grow_as(p, cap, need, elem, 1);
}

/* The same without zeroing, for arrays whose elements are all set before
 * they are read: clearing megabytes that are written right after cost a
 * tenth of opening a long log (the chunk map), half of it page faults. */
static inline int h5l_grow_raw(void **p, size_t *cap, size_t need, size_t elem)
{
    return h5l_grow_as(p, cap, need, elem, 0);
}

/* Map the pages of [p, p + n) now, in one call, instead of one page fault
 * per page on first write: on a virtual machine a fault costs
 * microseconds, and the arrays a long log's open fills (tens of MB,
 * written once from start to end) spent a fifth of the open in them.
 * Only for memory about to be written: it counts in the RSS at once.
 * Advisory: nothing happens where the kernel does not know the call. */
static inline void h5l_prefault(void *p, size_t n)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
    if (n >= ((size_t)1 << 20) && e > a) (void)madvise((void *)a, e - a, MADV_POPULATE_WRITE);
#else
    (void)p;
    (void)n;
#endif
}

#endif
