/* error.c — error codes to text, and the error record readers fill in. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "h5log/error.h"

const char *h5l_strerror(int code)
{
    switch (code) {
    case H5L_OK:
        return "success";
    case H5L_EINVAL:
        return "invalid argument";
    case H5L_EBADID:
        return "unknown id";
    case H5L_ERANGE:
        return "selection out of range";
    case H5L_ETYPE:
        return "unsupported or mismatched datatype";
    case H5L_ENOBUFS:
        return "write buffer limit reached";
    case H5L_EIO:
        return "I/O error";
    case H5L_ENOMEM:
        return "out of memory";
    case H5L_EHDF5:
        return "HDF5 library error";
    case H5L_EMPI:
        return "MPI error";
    case H5L_ECORRUPT:
        return "corrupt data";
    case H5L_EFORMAT:
        return "not a log-layout file or unsupported version";
    case H5L_ESTATE:
        return "operation not allowed in this state";
    case H5L_EMISMATCH:
        return "ranks disagree on a collective call";
    case H5L_ENOTFOUND:
        return "not found";
    case H5L_EEXIST:
        return "already exists";
    case H5L_ETORN:
        return "incomplete data";
    case H5L_EBUSY:
        return "open for writing by another writer";
    default:
        return "unknown error";
    }
}

int h5l_err_set(h5l_err_t *e, int code, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        /* through a copy: callers prefix a reason already in e->msg
         * ("%s: ...", e->msg), and vsnprintf's source may not overlap
         * its destination (it garbled such messages to a few letters) */
        char m[sizeof e->msg];
        vsnprintf(m, sizeof m, fmt, ap);
        va_end(ap);
        e->code = code;
        memcpy(e->msg, m, sizeof m);
    }
    return code;
}
