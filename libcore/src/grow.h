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

/* Make room for `need` elements of `elem` bytes in *p (capacity *cap,
 * doubled from 16). New elements are zeroed. Returns 0, or -1 (size
 * overflow or out of memory) with *p and *cap untouched. */
static inline int h5l_grow(void **p, size_t *cap, size_t need, size_t elem)
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
    memset((char *)q + *cap * elem, 0, (c - *cap) * elem);
    *p = q;
    *cap = c;
    return 0;
}

#endif
