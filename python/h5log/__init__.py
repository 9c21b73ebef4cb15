"""h5log — write log-layout HDF5 files from MPI jobs in Python, over libh5log.

The API follows h5netcdf's, so it reads like writing a netCDF-4 file:

    from mpi4py import MPI
    import h5log
    with h5log.File("run.h5", "w", comm=MPI.COMM_WORLD) as f:
        f.dimensions = {"time": None, "x": 64}      # None: unlimited
        f.attrs["title"] = "run 7"
        v = f.create_variable("/grp/temp", ("time", "x"), "f4", fillvalue=-999.0)
        v.attrs["units"] = "K"
        v[t, lo:hi] = block                          # independent
        f.flush()                                    # collective: one tick

What is collective (every rank, same order, same arguments): File(),
defining dimensions, groups, variables and attributes, flush(), close().
What is independent: assigning to a variable (v[...] = x, v.put()).

Errors raise h5log.Error (a subclass per library error code, some also
deriving from the matching Python exception) carrying the library's
message. Writing only: read the file through the h5logfs mount, or the
canonical copy h5logreplay makes, with h5py, netCDF4 or xarray.
docs/python.md is the reference.
"""
import collections.abc
import ctypes
import operator
import os

import numpy as np

from . import _lib

__all__ = ["File", "Group", "Variable", "Dimension", "Attributes", "Error", "UNLIMITED"]
__version__ = "0.1.0"

UNLIMITED = None  # a dimension size of None is unlimited


# --------------------------------------------------------------------------
# errors


class Error(Exception):
    """A libh5log call failed. .code is the H5L_E* code (negative int),
    .codename its name, str() the library's message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.codename = code, _lib.ERRORS.get(code, str(code))


class InvalidError(Error, ValueError):      # H5L_EINVAL, H5L_EEXIST, H5L_EBADID
    pass


class RangeError(Error, IndexError):        # H5L_ERANGE
    pass


class TypeMismatchError(Error, TypeError):  # H5L_ETYPE
    pass


class BufferFullError(Error):               # H5L_ENOBUFS: flush, then put again
    pass


class IOFailure(Error):                     # H5L_EIO (the flush may be retried)
    pass


class StateError(Error):                    # H5L_ESTATE
    pass


class MismatchError(Error):                 # H5L_EMISMATCH: ranks defined different things
    pass


class BusyError(Error, OSError):            # H5L_EBUSY: another writer has the file open
    pass


_ERROR_CLASS = {-17: BusyError, -1: InvalidError, -2: InvalidError, -15: InvalidError, -3: RangeError,
                -4: TypeMismatchError, -5: BufferFullError, -6: IOFailure, -12: StateError,
                -13: MismatchError}
__all__ += [c.__name__ for c in set(_ERROR_CLASS.values())]


def _raise(code, msg_bytes, what=""):
    msg = (msg_bytes or b"").decode("utf-8", "replace")
    if not msg:
        msg = _lib.strerror(code).decode("utf-8", "replace") + (f" ({what})" if what else "")
    raise _ERROR_CLASS.get(code, Error)(code, msg)


# --------------------------------------------------------------------------
# types


def _h5type(dtype):
    """The HDF5 type id of a numpy dtype (native or explicit byte order)."""
    dt = np.dtype(dtype)
    if dt.kind not in "iuf" or (dt.kind, dt.itemsize, False) not in _lib.H5T:
        raise TypeError(f"h5log: unsupported dtype {dt} (integers of 1, 2, 4, 8 bytes and "
                        "float32/float64 in either byte order)")
    be = dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False)
    return _lib.H5T[(dt.kind, dt.itemsize, be)]


def _u64(values):
    arr = (ctypes.c_uint64 * max(1, len(values)))(*values)
    return arr


# --------------------------------------------------------------------------
# attributes


class Attributes(collections.abc.MutableMapping):
    """The attributes of a variable, a group or the file. Setting one is
    collective. Reading gives back what this process set (the writer does
    not read the file); deleting is not supported by the format."""

    def __init__(self, file, objid, where):
        self._file, self._id, self._where = file, objid, where
        self._values = {}

    def __setitem__(self, name, value):
        f = self._file
        f._check_open()
        if not isinstance(name, str):
            raise TypeError("h5log: attribute names are str")
        bname = name.encode("utf-8")
        if isinstance(value, (str, bytes, np.str_, np.bytes_)):
            text = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            if b"\0" in text:
                raise ValueError(f"h5log: text attribute {name!r} contains a NUL byte")
            rc = _lib.put_att_text(f._h, self._id, bname, text)
            stored = value if isinstance(value, str) else bytes(value)
        else:
            arr = np.asarray(value)
            if arr.ndim > 1:
                raise ValueError(f"h5log: attribute {name!r} must be a scalar or 1-D, not {arr.ndim}-D")
            if arr.dtype.kind in "US":
                raise TypeError(f"h5log: attribute {name!r}: only one string per attribute")
            arr = np.ascontiguousarray(arr.reshape(-1))
            tid = _h5type(arr.dtype)
            rc = _lib.put_att(f._h, self._id, bname, tid, arr.size, arr.ctypes.data_as(ctypes.c_void_p))
            stored = arr.copy()
        if rc:
            f._fail(rc, f"attribute {name!r} of {self._where}")
        self._values[name] = stored

    def __getitem__(self, name):
        return self._values[name]

    def __delitem__(self, name):
        raise NotImplementedError("h5log: attributes cannot be deleted (replace the value instead)")

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"<h5log.Attributes of {self._where}: {list(self._values)}>"


# --------------------------------------------------------------------------
# dimensions


class Dimension:
    """A dimension of the file. size: its length; for an unlimited one the
    length readers see after the last flush, or more if this rank has
    written further since (the length grows at the next flush)."""

    def __init__(self, file, name, dimid, size):
        self._file, self.name, self._id = file, name, dimid
        self._fixed = size  # None: unlimited
        self._published = 0  # unlimited: length as of the last flush (all ranks)
        self._local = 0      # unlimited: extent of this rank's puts

    def isunlimited(self):
        return self._fixed is None

    @property
    def size(self):
        if self._fixed is not None:
            return self._fixed
        return max(self._published, self._local)

    def __len__(self):
        return self.size

    def __repr__(self):
        u = " (unlimited)" if self.isunlimited() else ""
        return f"<h5log.Dimension {self.name!r}: size {self.size}{u}>"


class Dimensions(collections.abc.Mapping):
    """name -> Dimension of the file, in definition order. d[name] = size
    (None: unlimited) defines one (collective)."""

    def __init__(self, file):
        self._file = file
        self._dims = {}

    def __setitem__(self, name, size):
        f = self._file
        f._check_open()
        if name in self._dims:
            old = self._dims[name]._fixed
            if old == size:  # the same definition again: nothing to do
                return
            raise ValueError(f"h5log: dimension {name!r} is already defined with size "
                             f"{'unlimited' if old is None else old}")
        if size is None:
            length = _lib.UNLIMITED
        else:
            length = operator.index(size)
            if length < 0:
                raise ValueError(f"h5log: dimension {name!r}: negative size {length}")
        dimid = ctypes.c_int()
        rc = _lib.def_dim(f._h, name.encode("utf-8"), length, ctypes.byref(dimid))
        if rc:
            f._fail(rc, f"dimension {name!r}")
        self._dims[name] = Dimension(f, name, dimid.value, None if size is None else length)

    def __getitem__(self, name):
        return self._dims[name]

    def __iter__(self):
        return iter(self._dims)

    def __len__(self):
        return len(self._dims)

    def __repr__(self):
        return "<h5log.Dimensions: " + ", ".join(
            f"{n}={'unlimited' if d.isunlimited() else d.size}" for n, d in self._dims.items()) + ">"


# --------------------------------------------------------------------------
# selections: a basic numpy index -> boxes (start, count) and the value's
# part for each box


def _dim_runs(key, length, unlimited, data_len):
    """One dimension's index: (list of (start, count, value slice), kept).
    kept: whether the dimension stays in the selection's shape (a slice)
    or is dropped (an integer). data_len: the value's length along this
    dimension when known (an open slice of an unlimited dimension takes it)."""
    if isinstance(key, slice):
        step = 1 if key.step is None else operator.index(key.step)
        if step == 0:
            raise ValueError("h5log: slice step cannot be zero")
        a = None if key.start is None else operator.index(key.start)
        b = None if key.stop is None else operator.index(key.stop)
        if a is not None and a < 0:
            a += length
        if b is not None and b < 0:
            b += length
        if step > 0:
            a = 0 if a is None else a
            if b is None:
                if unlimited and data_len is not None:
                    b = a + data_len * step - (step - 1)
                else:
                    b = length
            if a < 0 or b < 0:
                raise IndexError(f"h5log: slice {key} is outside the dimension (length {length})")
            n = max(0, -(-(b - a) // step))
        else:
            a = length - 1 if a is None else a
            b = -1 if b is None else b
            if a < 0:
                raise IndexError(f"h5log: slice {key} is outside the dimension (length {length})")
            n = max(0, -(-(a - b) // -step))
        if n == 0:
            return [], True
        if step == 1:
            return [(a, n, slice(None))], True
        if step == -1:  # one box, the value reversed
            return [(a - n + 1, n, slice(None, None, -1))], True
        return [(a + i * step, 1, slice(i, i + 1)) for i in range(n)], True
    i = operator.index(key)
    if i < 0:
        i += length
        if i < 0:
            raise IndexError(f"h5log: index {key} is outside the dimension (length {length})")
    return [(i, 1, None)], False


def _expand_key(key, ndim):
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is None for k in key):
        raise IndexError("h5log: np.newaxis is not supported in a write")
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("h5log: an index can only have a single ellipsis")
    if n_ell:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (ndim - len(key) + 1) + key[i + 1:]
    if len(key) > ndim:
        raise IndexError(f"h5log: too many indices ({len(key)}) for a {ndim}-D variable")
    for k in key:
        if isinstance(k, (bool, np.bool_)):
            raise IndexError("h5log: a boolean index is a mask (fancy indexing), not a write selection")
        if not isinstance(k, slice):
            try:
                operator.index(k)
            except TypeError:
                raise IndexError(f"h5log: only integers and slices (basic indexing) can select a write, "
                                 f"not {type(k).__name__}") from None
    return key + (slice(None),) * (ndim - len(key))


# --------------------------------------------------------------------------
# variables and groups


class Variable:
    """A variable. v[key] = value writes a box (independent, buffered until
    the next flush): key is a basic numpy index (integers, slices of any
    step, an ellipsis); value is broadcast to the selection's shape and
    converted to the variable's dtype as numpy assignment does."""

    def __init__(self, file, name, varid, dims, dtype, chunks, fillvalue):
        self._file, self.name, self._id = file, name, varid
        self._dims = dims  # [Dimension]
        self.dtype = dtype
        self.chunks = chunks
        self.fillvalue = fillvalue  # None: netCDF's default; False: nofill
        self.attrs = Attributes(file, varid, f"variable {name!r}")

    @property
    def dimensions(self):
        return tuple(d.name for d in self._dims)

    @property
    def ndim(self):
        return len(self._dims)

    @property
    def shape(self):
        return tuple(d.size for d in self._dims)

    def __repr__(self):
        return f"<h5log.Variable {self.name!r}: {self.dimensions} {self.dtype}>"

    def __setitem__(self, key, value):
        self._file._check_open()
        value = np.asarray(value)
        key = _expand_key(key, self.ndim)
        # align the value's trailing dimensions with the kept dimensions
        kept = [d for d, k in enumerate(key) if isinstance(k, slice)]
        vshape = dict(zip(kept[len(kept) - value.ndim:] if value.ndim <= len(kept) else kept,
                          value.shape[max(0, value.ndim - len(kept)):]))
        per_dim = []
        for d, (k, dim) in enumerate(zip(key, self._dims)):
            dl = vshape.get(d) if dim.isunlimited() else None
            per_dim.append(_dim_runs(k, dim.size, dim.isunlimited(), dl))
        sel_shape = tuple(sum(c for _, c, _ in runs) for runs, keptd in per_dim if keptd)
        try:
            data = value if value.shape == sel_shape else np.broadcast_to(value, sel_shape)
        except ValueError:
            raise ValueError(f"h5log: {self.name}: cannot write a value of shape {value.shape} into a "
                             f"selection of shape {sel_shape}") from None
        if 0 in sel_shape or any(not runs for runs, _ in per_dim):
            return
        data = data.astype(self.dtype, copy=False)
        # one box per combination of runs (one combination unless a step is
        # not +-1)
        boxes = [((), (), ())]
        pos = 0
        for runs, keptd in per_dim:
            nxt = []
            for st, ct, vs in boxes:
                for (s, c, sl) in runs:
                    nxt.append((st + (s,), ct + (c,), vs + ((sl,) if keptd else ())))
            boxes = nxt
            pos += keptd
        for start, count, vsl in boxes:
            block = data[vsl] if vsl else data
            self._put(start, count, block.reshape(count))

    def put(self, start, count, data):
        """Write data (its size is prod(count)) to the box start/count:
        h5l_put itself. Independent."""
        self._file._check_open()
        start, count = tuple(operator.index(s) for s in start), tuple(operator.index(c) for c in count)
        if len(start) != self.ndim or len(count) != self.ndim:
            raise ValueError(f"h5log: {self.name}: start and count need {self.ndim} entries")
        arr = np.asarray(data).astype(self.dtype, copy=False)
        if arr.size != int(np.prod(count, dtype=np.int64)):
            raise ValueError(f"h5log: {self.name}: {arr.size} values for a box of {count}")
        self._put(start, count, arr)

    def _put(self, start, count, arr):
        f = self._file
        if any(s < 0 for s in start) or any(c < 0 for c in count):
            raise IndexError(f"h5log: {self.name}: negative start or count")
        arr = np.ascontiguousarray(arr)  # a copy only when not contiguous already
        rc = _lib.put(f._h, self._id, _u64(start), _u64(count), arr.ctypes.data)
        if rc:
            f._fail(rc, f"write to {self.name!r}")
        if 0 not in count:
            for dim, s, c in zip(self._dims, start, count):
                if dim.isunlimited() and s + c > dim._local:
                    dim._local = s + c


class Group:
    """A group. Variables and subgroups are created relative to it (or at
    an absolute path). Dimensions belong to the file (as netCDF root
    dimensions do) and are shared by every group."""

    def __init__(self, file, name, grpid):
        self._file, self.name, self._id = file, name, grpid
        self.attrs = Attributes(file, grpid, f"group {name!r}")

    def _abspath(self, name):
        if not name or name.endswith("/") or "//" in name:
            raise ValueError(f"h5log: bad object name {name!r}")
        if name.startswith("/"):
            return name
        return ("" if self.name == "/" else self.name) + "/" + name

    @property
    def dimensions(self):
        return self._file._dimensions

    @dimensions.setter
    def dimensions(self, value):
        for name, size in value.items():
            self._file._dimensions[name] = size

    @property
    def groups(self):
        pre = "" if self.name == "/" else self.name
        return {p[len(pre) + 1:]: g for p, g in self._file._groups.items()
                if p != self.name and p.rpartition("/")[0] == pre}

    @property
    def variables(self):
        pre = "" if self.name == "/" else self.name
        return {p[len(pre) + 1:]: v for p, v in self._file._vars.items() if p.rpartition("/")[0] == pre}

    def __getitem__(self, name):
        path = self._abspath(name)
        if path in self._file._vars:
            return self._file._vars[path]
        if path in self._file._groups:
            return self._file._groups[path]
        raise KeyError(name)

    def __contains__(self, name):
        try:
            self[name]
            return True
        except (KeyError, ValueError):
            return False

    def create_group(self, name):
        """Define a group (and its parents); collective. Defining an
        existing group returns it."""
        return self._file._def_group(self._abspath(name))

    def create_variable(self, name, dimensions=(), dtype=None, data=None, fillvalue=None, chunks=None):
        """Define a variable (collective) over named file dimensions; groups
        on the path are created. dtype: a numpy dtype (integers of 1-8
        bytes, float32/64, native or explicit byte order; default: data's,
        else float64). fillvalue: None (netCDF's default fill), a value, or
        False (no fill: unwritten elements read 0, nothing masked). chunks:
        None or True (contiguous; an unlimited dimension gets netCDF's
        default chunking) or a tuple. data: written by rank 0 at [...],
        published by the next flush."""
        f = self._file
        f._check_open()
        path = self._abspath(name)
        if isinstance(dimensions, str):
            dimensions = (dimensions,)
        dims = []
        for dn in dimensions:
            if dn not in f._dimensions:
                raise ValueError(f"h5log: variable {path!r}: no dimension {dn!r} (define it in f.dimensions)")
            dims.append(f._dimensions[dn])
        if dtype is None:
            dtype = np.asarray(data).dtype if data is not None else np.float64
        dtype = np.dtype(dtype)
        tid = _h5type(dtype)
        if chunks is True:
            chunks = None
        ch = None
        if chunks is not None:
            chunks = tuple(operator.index(c) for c in chunks)
            if len(chunks) != len(dims):
                raise ValueError(f"h5log: variable {path!r}: {len(chunks)} chunk sizes for {len(dims)} dimensions")
            ch = _u64(chunks)
        fv = None
        if fillvalue is not None and fillvalue is not False:  # checked before anything is defined
            given = np.asarray(fillvalue)
            if given.size != 1 or given.dtype.kind not in "iuf":
                raise ValueError(f"h5log: variable {path!r}: the fill value must be one number, not {fillvalue!r}")
            with np.errstate(invalid="ignore", over="ignore"):
                fv = given.astype(dtype).reshape(())
            if dtype.kind in "iu" and not (given.reshape(()) == fv):  # 300 in a uint8, 1.5 in an int
                raise ValueError(f"h5log: variable {path!r}: fill value {fillvalue!r} is not a {dtype}")
        parent = path.rpartition("/")[0] or "/"
        if parent != "/":
            f._def_group(parent)
        ids = (ctypes.c_int * max(1, len(dims)))(*[d._id for d in dims])
        varid = ctypes.c_int()
        rc = _lib.def_var(f._h, path.encode("utf-8"), tid, len(dims), ids, ch, ctypes.byref(varid))
        if rc:
            f._fail(rc, f"variable {path!r}")
        v = Variable(f, path, varid.value, dims, dtype, chunks, None)
        f._vars[path] = v
        if fillvalue is False:
            rc = _lib.def_var_nofill(f._h, v._id)
            if rc:
                f._fail(rc, f"nofill of {path!r}")
            v.fillvalue = False
        elif fillvalue is not None:
            buf = np.ascontiguousarray(fv.reshape(1))
            rc = _lib.def_var_fill(f._h, v._id, buf.ctypes.data_as(ctypes.c_void_p))
            if rc:
                f._fail(rc, f"fill value of {path!r}")
            v.fillvalue = fv[()]
        if data is not None and f.comm.Get_rank() == 0:
            v[...] = data
        return v


class File(Group):
    """A log-layout HDF5 file being written by every rank of comm.

    File(path, "w", comm=MPI.COMM_WORLD, buffer_limit=None, sync=False,
    check_collective=True, finalize=True, early_writes=False) creates
    (truncates) path and its journal path.h5lj; collective. Mode "r+" goes
    on writing an existing log-layout file (h5l_open: a restart, on any
    number of ranks; its dimensions, groups and variables are in
    f.dimensions, f.groups and f.variables, with the lengths of its
    newest tick); "a" does the same, or creates the file if it does not
    exist. A file another job has open for writing raises BusyError. buffer_limit:
    bytes a rank may buffer between flushes (default 1 GiB). sync=True
    makes every tick durable against a node crash (two syncs per flush).
    check_collective: each flush checks that the ranks made the same
    definitions. finalize=False: a cheaper close whose file plain libhdf5
    readers cannot read (docs/api.md). early_writes=True: puts write into a
    place the flush before reserved, when tick sizes repeat (docs/api.md;
    every rank must pass the same)."""

    def __init__(self, path, mode="w", comm=None, buffer_limit=None, sync=False, check_collective=True,
                 finalize=True, early_writes=False):
        self._h = None
        if mode not in ("w", "x", "a", "r+"):
            raise ValueError(f"h5log: mode {mode!r}: libh5log writes files (modes 'w', 'x', 'a', 'r+'); read "
                             "them through the h5logfs mount or h5logreplay's copy")
        from mpi4py import MPI
        if comm is None:
            comm = MPI.COMM_WORLD
        handle = _lib.comm_handle(comm)
        self.comm = comm
        self.filename = str(path)
        opts = _lib.Opts()
        _lib.opts_init(ctypes.byref(opts))
        if buffer_limit is not None:
            opts.buffer_limit = operator.index(buffer_limit)
        opts.sync = 1 if sync else 0
        opts.check_collective = 1 if check_collective else 0
        opts.no_finalize = 0 if finalize else 1
        opts.early_writes = 1 if early_writes else 0
        h = ctypes.c_void_p()
        # "a": open when the file exists (every rank must decide alike: rank 0 looks)
        reopen = mode == "r+" or (mode == "a" and comm.bcast(os.path.exists(self.filename) if comm.Get_rank() == 0
                                                             else None, root=0))
        call = _lib.open_ if reopen else _lib.create
        rc = call(os.fsencode(self.filename), handle, ctypes.byref(opts), ctypes.byref(h))
        if rc:
            _raise(rc, _lib.errmsg(None), self.filename)
        self._h = h
        self._file = self
        self._dimensions = Dimensions(self)
        self._groups = {}
        self._vars = {}
        Group.__init__(self, self, "/", 0)  # H5L_GLOBAL
        self._groups["/"] = self
        if reopen:
            self._load()

    def _load(self):
        """What the reopened file holds: its dimensions, groups and
        variables, from libh5log's lookups (attributes already in the file
        are not read back: f.attrs shows those set since the open)."""
        nd, no = ctypes.c_int(), ctypes.c_int()
        _lib.inq_counts(self._h, ctypes.byref(nd), ctypes.byref(no))
        buf = ctypes.create_string_buffer(4096)
        byid = []
        for d in range(nd.value):
            ln, unl = ctypes.c_uint64(), ctypes.c_int()
            _lib.inq_dimname(self._h, d, buf, len(buf))
            _lib.inq_dimlen(self._h, d, ctypes.byref(ln))
            _lib.inq_unlimited(self._h, d, ctypes.byref(unl))
            name = buf.value.decode("utf-8")
            dim = Dimension(self, name, d, None if unl.value else int(ln.value))
            dim._published = int(ln.value) if unl.value else 0
            self._dimensions._dims[name] = dim
            byid.append(dim)
        rev = {v: k for k, v in _lib.H5T.items()}
        for i in range(1, no.value):
            kind = ctypes.c_int()
            if _lib.inq_obj(self._h, i, ctypes.byref(kind), buf, len(buf)):
                continue
            path = buf.value.decode("utf-8")
            if kind.value == 1:
                self._groups[path] = Group(self, path, i)
                continue
            ndims = ctypes.c_int()
            _lib.inq_varndims(self._h, i, ctypes.byref(ndims))
            ids = (ctypes.c_int * max(1, ndims.value))()
            _lib.inq_vardimid(self._h, i, ids)
            tid, chunked, mode = _lib.hid_t(), ctypes.c_int(), ctypes.c_int()
            chunk = (ctypes.c_uint64 * max(1, ndims.value))()
            fill = ctypes.create_string_buffer(8)
            _lib.inq_var(self._h, i, ctypes.byref(tid), ctypes.byref(chunked), chunk, fill, ctypes.byref(mode))
            k, size, be = rev[tid.value]
            dtype = np.dtype(f"{'>' if be else '<'}{k}{size}")
            fv = (None if mode.value == 0 else False if mode.value == 2
                  else np.frombuffer(fill.raw[:size], dtype=dtype)[0])
            chunks = tuple(int(chunk[j]) for j in range(ndims.value)) if chunked.value else None
            self._vars[path] = Variable(self, path, i, [byid[ids[j]] for j in range(ndims.value)], dtype, chunks, fv)

    def _check_open(self):
        if self._h is None:
            raise ValueError("h5log: the file is closed")

    def _fail(self, rc, what):
        _raise(rc, _lib.errmsg(self._h), what)

    def _def_group(self, path):
        self._check_open()
        if path in self._groups:
            return self._groups[path]
        parent = path.rpartition("/")[0] or "/"
        if parent != "/":
            self._def_group(parent)
        gid = ctypes.c_int()
        rc = _lib.def_grp(self._h, path.encode("utf-8"), ctypes.byref(gid))
        if rc:
            self._fail(rc, f"group {path!r}")
        g = Group(self, path, gid.value)
        self._groups[path] = g
        return g

    @property
    def parent(self):
        return None

    def flush(self):
        """Collective: write what every rank buffered and publish one tick.
        On failure (raised on every rank) nothing is committed and the
        writes stay buffered: flush() may be called again."""
        self._check_open()
        rc = _lib.flush(self._h)
        if rc:
            self._fail(rc, "flush")
        self._sync_lengths()

    def _sync_lengths(self):
        """The unlimited dimensions' lengths as of the flush: the largest
        extent any rank wrote (one small allreduce)."""
        unl = [d for d in self._dimensions.values() if d.isunlimited()]
        if not unl:
            return
        from mpi4py import MPI
        mine = np.array([d.size for d in unl], dtype=np.uint64)
        allmax = np.empty_like(mine)
        self.comm.Allreduce(mine, allmax, op=MPI.MAX)
        for d, n in zip(unl, allmax):
            d._published = int(n)

    def close(self):
        """Collective: publish what is pending, embed the journal, close.
        Closing a closed file does nothing."""
        if self._h is None:
            return
        h, self._h = self._h, None
        rc = _lib.close(h)
        if rc:
            _raise(rc, _lib.errmsg(None), "close")

    @property
    def closed(self):
        return self._h is None

    @property
    def ntick(self):
        """Ticks published so far."""
        self._check_open()
        return int(_lib.ntick(self._h))

    @property
    def buffered(self):
        """Bytes this rank has buffered since the last flush."""
        self._check_open()
        return int(_lib.buffered(self._h))

    def __enter__(self):
        return self

    def __exit__(self, etype, evalue, tb):
        # Closing is collective. When an exception leaves the block on a
        # job of several ranks, the others may be anywhere (computing, in
        # a flush): a close here could wait for them forever. The file is
        # then left as a killed job leaves it (every committed tick
        # readable, h5logreplay makes a closed copy) and the exception goes
        # on; under `python3 -m mpi4py` it aborts the job.
        if etype is None or self.comm.Get_size() == 1:
            self.close()

    def __repr__(self):
        state = "closed" if self._h is None else f"{self.ntick} ticks"
        return f"<h5log.File {self.filename!r} ({state})>"
