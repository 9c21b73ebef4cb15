/* h5log_common.h — what the writer and the readers share: limits and error
 * codes. Includes neither HDF5 nor MPI, so reader-only code stays free of both. */
#ifndef H5LOG_COMMON_H
#define H5LOG_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define H5L_VERSION_STRING "0.1.0"

/* Marks the library's API: libh5log.so is built with -fvisibility=hidden,
 * so it exports these and nothing of its insides. */
#if defined(__GNUC__)
#define H5L_API __attribute__((visibility("default")))
#else
#define H5L_API
#endif
#define H5L_FORMAT_VERSION 2
#define H5L_UNLIMITED UINT64_MAX /* length of a growing dimension */
#define H5L_GLOBAL 0             /* object id of the root group */
#define H5L_MAX_DIMS 32

enum h5l_error {
    H5L_OK = 0,
    H5L_EINVAL = -1,     /* bad argument */
    H5L_EBADID = -2,     /* unknown variable, group or dimension id */
    H5L_ERANGE = -3,     /* selection outside a fixed dimension */
    H5L_ETYPE = -4,      /* unsupported or mismatched datatype */
    H5L_ENOBUFS = -5,    /* write buffer limit reached: flush first */
    H5L_EIO = -6,        /* an operating-system I/O call failed */
    H5L_ENOMEM = -7,     /* out of memory */
    H5L_EHDF5 = -8,      /* libhdf5 failed */
    H5L_EMPI = -9,       /* an MPI call failed */
    H5L_ECORRUPT = -10,  /* on-file data fails its checksum or is inconsistent */
    H5L_EFORMAT = -11,   /* not a log-layout file, or unsupported version */
    H5L_ESTATE = -12,    /* call not allowed now (e.g. after close) */
    H5L_EMISMATCH = -13, /* ranks passed different arguments to a collective */
    H5L_ENOTFOUND = -14, /* no such tick, object or attribute */
    H5L_EEXIST = -15,    /* name already defined */
    H5L_ETORN = -16,     /* (reader) data not complete yet: try again */
    H5L_EBUSY = -17      /* the file is open for writing by another writer (its lock) */
};

/* A fixed description of an error code. Cannot fail. */
H5L_API const char *h5l_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
