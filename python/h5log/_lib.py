"""_lib.py — loading libh5log with ctypes: the C prototypes, the HDF5 type
ids the library takes, and the MPI_Comm handle of an mpi4py communicator.

Why ctypes: the package then needs nothing compiled and no headers, and
calls the installed libh5log.so.0 (or the build tree's) directly.

Which library: $H5LOG_LIBRARY (a path to the .so), else
$H5LOG_BUILD/libh5log.so (a build tree, as the tests use), else the path
`make install` wrote into _config.py, else the dynamic loader's search for
libh5log.so.0 (ldconfig, LD_LIBRARY_PATH).

HDF5 type ids: H5T_STD_I32LE etc. are macros over global variables of
libhdf5 (H5T_STD_I32LE_g), valid after H5open(). They are read from the
libhdf5 that libh5log itself is linked with (dlsym through libh5log's
handle searches its dependencies), so the ids belong to the same library
instance; h5py's ids belong to another and must not be passed here.

MPI: libh5log is built against Open MPI, whose MPI_Comm is a pointer;
mpi4py gives it as MPI._handleof(comm). check_mpi() refuses to go on when
mpi4py and libh5log loaded two different libmpi files (two MPI
libraries in one process cannot share a communicator).
"""
import ctypes
import os

from . import _config

ERRORS = {
    -1: "H5L_EINVAL", -2: "H5L_EBADID", -3: "H5L_ERANGE", -4: "H5L_ETYPE", -5: "H5L_ENOBUFS",
    -6: "H5L_EIO", -7: "H5L_ENOMEM", -8: "H5L_EHDF5", -9: "H5L_EMPI", -10: "H5L_ECORRUPT",
    -11: "H5L_EFORMAT", -12: "H5L_ESTATE", -13: "H5L_EMISMATCH", -14: "H5L_ENOTFOUND",
    -15: "H5L_EEXIST", -16: "H5L_ETORN", -17: "H5L_EBUSY",
}
UNLIMITED = (1 << 64) - 1  # H5L_UNLIMITED
SONAME = "libh5log.so.0"

hid_t = ctypes.c_int64
u64p = ctypes.POINTER(ctypes.c_uint64)


class Opts(ctypes.Structure):
    """h5l_opts_t (h5log.h), field for field: h5l_opts_init writes all of it
    (tests/e2e/test_python.py compares the size with the C compiler's)."""
    _fields_ = [("buffer_limit", ctypes.c_size_t), ("sync", ctypes.c_int),
                ("check_collective", ctypes.c_int), ("no_finalize", ctypes.c_int),
                ("early_writes", ctypes.c_int), ("pad_", ctypes.c_int),
                ("reserved_", ctypes.c_uint64 * 7)]


def _candidates():
    if os.environ.get("H5LOG_LIBRARY"):
        return [os.environ["H5LOG_LIBRARY"]]
    out = []
    if os.environ.get("H5LOG_BUILD"):
        out.append(os.path.join(os.environ["H5LOG_BUILD"], "libh5log.so"))
    if _config.LIBRARY:
        out.append(_config.LIBRARY)
    out.append(SONAME)
    return out


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("h5log: cannot load libh5log (set H5LOG_LIBRARY to the path of libh5log.so.0, "
                      "or H5LOG_BUILD to a build tree); tried:\n  " + "\n  ".join(tried))


lib, path = _load()


def _proto(name, res, *args):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = res, list(args)
    return fn


c_int, c_char_p, c_void_p, c_size_t = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t
intp = ctypes.POINTER(ctypes.c_int)
opts_init = _proto("h5l_opts_init", None, ctypes.POINTER(Opts))
create = _proto("h5l_create", c_int, c_char_p, c_void_p, ctypes.POINTER(Opts), ctypes.POINTER(c_void_p))
def_dim = _proto("h5l_def_dim", c_int, c_void_p, c_char_p, ctypes.c_uint64, intp)
def_grp = _proto("h5l_def_grp", c_int, c_void_p, c_char_p, intp)
def_var = _proto("h5l_def_var", c_int, c_void_p, c_char_p, hid_t, c_int, intp, u64p, intp)
def_var_fill = _proto("h5l_def_var_fill", c_int, c_void_p, c_int, c_void_p)
def_var_nofill = _proto("h5l_def_var_nofill", c_int, c_void_p, c_int)
put_att = _proto("h5l_put_att", c_int, c_void_p, c_int, c_char_p, hid_t, c_size_t, c_void_p)
put_att_text = _proto("h5l_put_att_text", c_int, c_void_p, c_int, c_char_p, c_char_p)
put = _proto("h5l_put", c_int, c_void_p, c_int, u64p, u64p, c_void_p)
flush = _proto("h5l_flush", c_int, c_void_p)
close = _proto("h5l_close", c_int, c_void_p)
ntick = _proto("h5l_ntick", ctypes.c_uint64, c_void_p)
open_ = _proto("h5l_open", c_int, c_char_p, c_void_p, ctypes.POINTER(Opts), ctypes.POINTER(c_void_p))
inq_counts = _proto("h5l_inq_counts", c_int, c_void_p, intp, intp)
inq_dimname = _proto("h5l_inq_dimname", c_int, c_void_p, c_int, c_char_p, c_size_t)
inq_dimlen = _proto("h5l_inq_dimlen", c_int, c_void_p, c_int, u64p)
inq_unlimited = _proto("h5l_inq_unlimited", c_int, c_void_p, c_int, intp)
inq_obj = _proto("h5l_inq_obj", c_int, c_void_p, c_int, intp, c_char_p, c_size_t)
inq_var = _proto("h5l_inq_var", c_int, c_void_p, c_int, ctypes.POINTER(hid_t), intp, u64p, c_void_p, intp)
inq_varndims = _proto("h5l_inq_varndims", c_int, c_void_p, c_int, intp)
inq_vardimid = _proto("h5l_inq_vardimid", c_int, c_void_p, c_int, intp)
buffered = _proto("h5l_buffered", c_size_t, c_void_p)
errmsg = _proto("h5l_errmsg", c_char_p, c_void_p)
strerror = _proto("h5l_strerror", c_char_p, c_int)

# the HDF5 types a variable or attribute may have: (numpy kind, size, big
# endian) -> the libhdf5 global holding its id
_H5T_GLOBALS = {}
for _kind, _pre in (("i", "H5T_STD_I"), ("u", "H5T_STD_U")):
    for _size in (1, 2, 4, 8):
        for _be in (False, True):
            _H5T_GLOBALS[(_kind, _size, _be)] = f"{_pre}{_size * 8}{'BE' if _be else 'LE'}_g"
for _size in (4, 8):
    for _be in (False, True):
        _H5T_GLOBALS[("f", _size, _be)] = f"H5T_IEEE_F{_size * 8}{'BE' if _be else 'LE'}_g"

_h5open = _proto("H5open", c_int)
if _h5open() < 0:
    raise ImportError("h5log: H5open() failed in the libhdf5 libh5log is linked with")
H5T = {k: hid_t.in_dll(lib, name).value for k, name in _H5T_GLOBALS.items()}


def mapped_libmpi():
    """The distinct libmpi files mapped into this process."""
    found = set()
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and os.path.basename(parts[5]).startswith("libmpi.so"):
                    found.add(os.path.realpath(parts[5]))
    except OSError:
        pass
    return found


_mpi_checked = False


def check_mpi(MPI):
    """Refuse an mpi4py built on another MPI than libh5log's (Open MPI)."""
    global _mpi_checked
    if _mpi_checked:
        return
    libs = mapped_libmpi()
    if len(libs) > 1:
        raise ImportError("h5log: mpi4py and libh5log use different MPI libraries: " + ", ".join(sorted(libs)))
    vendor = MPI.get_vendor()[0]
    if vendor != "Open MPI":
        raise ImportError(f"h5log: libh5log is built with Open MPI; mpi4py uses {vendor}")
    _mpi_checked = True


def comm_handle(comm):
    """The C MPI_Comm (a pointer under Open MPI) of an mpi4py communicator."""
    from mpi4py import MPI
    check_mpi(MPI)
    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"h5log: comm must be an mpi4py communicator, not {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("h5log: comm is MPI.COMM_NULL")
    return c_void_p(MPI._handleof(comm))
