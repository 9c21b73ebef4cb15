/* error.h — filling an h5l_err_t: the one way every module of libcore (and
 * the daemon and tools, which link it statically) records a failure's code
 * and its message naming the file and the reason. Not part of the API:
 * callers of libh5log only read h5l_err_t. */
#ifndef H5L_ERROR_H
#define H5L_ERROR_H

#include "h5log_reader.h"

/* Record the error in e (may be NULL) and return code. Cannot fail. The
 * arguments may point into e->msg (a reason prefixed with its context). */
int h5l_err_set(h5l_err_t *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
