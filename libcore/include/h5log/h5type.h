/* h5type.h — mapping between HDF5 type ids and the on-file type descriptor
 * (docs/format.md 3.3). Needs libhdf5, not MPI. */
#ifndef H5L_H5TYPE_H
#define H5L_H5TYPE_H

#include <hdf5.h>
#include "h5log_reader.h"

/* Descriptor of an HDF5 integer or IEEE float type. H5L_ETYPE otherwise. */
int h5l_type_from_hid(hid_t t, h5l_type_t *out);
/* A new HDF5 type for a descriptor (caller H5Tclose-s it); strings become a
 * fixed-length string of `n` characters (at least 1). Negative on failure. */
hid_t h5l_type_to_hid(h5l_type_t t, size_t n);

#endif
