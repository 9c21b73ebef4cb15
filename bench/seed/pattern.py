"""The deterministic content every writer writes and every reader checks.

Element i (C order) of variable NAME holds float32((i % 65521) * 0.25 +
salt(NAME)), salt a small number from the name: recomputable by the reader
from the name and shape alone, different between variables, exact in
float32, and never a netCDF fill value (so no reader masks anything).
"""
import zlib

import numpy as np


def salt(name):
    return float(zlib.crc32(name.encode()) % 1000)


def rows(name, shape, lo, hi):
    """The values of rows lo:hi along dimension 0 (the whole variable for a
    0-d one)."""
    shape = tuple(shape)
    if not shape:
        return np.array(salt(name), dtype="f4")
    inner = int(np.prod(shape[1:], dtype=np.int64))
    i = np.arange(lo * inner, hi * inner, dtype=np.int64)
    v = ((i % 65521).astype(np.float32) * np.float32(0.25) + np.float32(salt(name)))
    return v.reshape((hi - lo,) + shape[1:])


def whole(name, shape):
    shape = tuple(shape)
    return rows(name, shape, 0, shape[0]) if shape else rows(name, shape, 0, 0)


def band(n, rank, nranks):
    """This rank's rows of a dimension of length n."""
    return n * rank // nranks, n * (rank + 1) // nranks
