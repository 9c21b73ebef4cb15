"""py_cases.py — writers for tests/e2e/test_python.py, one per case, run
under mpirun: python3 -m mpi4py py_cases.py CASE OUTDIR [ARGS.json].

Each case writes OUTDIR/CASE.h5 with the package h5log and, on every rank,
OUTDIR/CASE.rankR.json with what the test cannot see in the file (lengths
the package reports, the exceptions raised). The test computes what the
file must hold with numpy, independently of this script.
"""
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import h5log

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def example(out, args):
    """The documented example: each rank writes its band of x per step;
    at step 1 the last column of each band stays unwritten (fill)."""
    rec = {"sizes": []}
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions = {"time": None, "x": 64}
        f.attrs["title"] = "run 7"
        v = f.create_variable("/grp/temp", ("time", "x"), "f4", fillvalue=-999.0, chunks=None)
        v.attrs["units"] = "K"
        f.create_variable("x", ("x",), "f8", data=np.arange(64) * 0.5)  # written by rank 0
        rec["tree"] = [sorted(f.groups), sorted(f.variables), sorted(f["grp"].variables),
                       f["grp/temp"].name, f["/grp"].name, "temp" in f["grp"], "nope" in f]
        from h5log import _lib
        rec["libmpi"] = len(_lib.mapped_libmpi())
        lo, hi = rank * 64 // nranks, (rank + 1) * 64 // nranks
        for t in range(3):
            block = (1000.0 * t + np.arange(lo, hi)).astype("f4")
            if t == 1:
                v[t, lo:hi - 1] = block[:-1]
            else:
                v[t, lo:hi] = block
            f.flush()
            rec["sizes"].append([len(f.dimensions["time"]), f.ntick, list(v.shape)])
    rec["closed"] = f.closed
    return rec


TYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]


def dtypes(out, args):
    """A variable, a 0-d variable, a fill value and attributes of every
    type in native, little- and big-endian byte order."""
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions["x"] = 4
        g = f.create_group("types")
        for t in TYPES:
            for bo in ("=", "<", ">"):
                dt = np.dtype(bo + t)
                name = f"{t}_{ {'=': 'n', '<': 'le', '>': 'be'}[bo]}"
                v = g.create_variable(name, ("x",), dt, fillvalue=99)
                s = f.create_variable(f"/scalars/{name}", (), dt)
                g.attrs[name] = np.arange(1, 4).astype(dt)
                g.attrs[name + "_s"] = np.array(5, dtype=dt)  # 0-d: numpy scalars are native-order
                v.attrs["kind"] = f"{t} {bo}"
                if rank == nranks - 1:
                    v[1:] = np.arange(3) * 3 + 1       # python ints, converted
                    s[...] = 42
        f.attrs["pyint"] = 3
        f.attrs["pyfloat"] = [1.5, 2.5]
        f.attrs["empty"] = ""
        f.attrs["utf8"] = "Grad Celsius: °C"
    return {}


def slicing(out, args):
    """The assignments of ARGS.json, each by its rank at its tick: keys
    are Python index expressions, values lists with a memory layout."""
    ops = args["ops"]
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions = {"y": 6, "x": 8, "t": None}
        c = f.create_variable("c", ("y", "x"), "<i4", fillvalue=-1)
        b = f.create_variable("/g/b", ("t", "y", "x"), ">f8", fillvalue=-1.0, chunks=(2, 3, 4))
        var = {"c": c, "b": b}
        for tick in range(args["nticks"]):
            for op in ops:
                if op["tick"] != tick or op["rank"] != rank:
                    continue
                key = eval("np.s_" + op["key"], {"np": np})
                val = np.array(op["value"], dtype=op.get("dtype", "f8"))
                if op["layout"] == "F":
                    val = np.asfortranarray(val)
                elif op["layout"] == "T":  # the value is given transposed
                    val = np.ascontiguousarray(val).T
                elif op["layout"] == "rev":  # the value is given reversed along its first axis
                    val = np.ascontiguousarray(val)[::-1]
                var[op["var"]][key] = val
            f.flush()
    return {}


def unlimited(out, args):
    """Unlimited lengths as every rank sees them after flushes; negative
    indices and open slices of an unlimited dimension."""
    rec = {}
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions["t"] = None
        f.dimensions["k"] = 2
        u = f.create_variable("u", ("t",), "i4", fillvalue=-5)
        w = f.create_variable("w", ("t", "k"), "i2")
        rec["before"] = len(f.dimensions["t"])
        u[rank * 3:(rank + 1) * 3] = np.arange(rank * 3, (rank + 1) * 3)
        rec["local"] = len(f.dimensions["t"])       # this rank's extent only
        f.flush()
        rec["after1"] = len(f.dimensions["t"])      # every rank's
        if rank == 0:
            u[-1] = 100                              # the last element as of the flush
            u[u.shape[0] + 1:] = [200, 201]           # open stop: the value's length
            w[2:] = 9                                # a scalar: up to the current length
        f.flush()
        rec["after2"] = len(f.dimensions["t"])
        rec["shape_w"] = list(w.shape)
    return rec


def errors(out, args):
    """Each error case: (exception class, code name, message) per rank."""
    got = {}

    def attempt(name, fn):
        try:
            fn()
            got[name] = None
        except Exception as e:
            got[name] = [type(e).__name__, getattr(e, "codename", None), str(e),
                         isinstance(e, h5log.Error)]

    d = os.path.dirname(out)
    attempt("create_missing_dir", lambda: h5log.File(os.path.join(d, "no", "such", "dir.h5"), "w", comm=comm))
    attempt("mode_r", lambda: h5log.File(out, "r", comm=comm))
    f = h5log.File(out, "w", comm=comm, buffer_limit=4096)
    f.dimensions = {"t": None, "x": 64}
    v = f.create_variable("/v", ("t", "x"), "f4")
    attempt("put_outside_fixed", lambda: v.__setitem__((0, 70), 1.0))
    attempt("slice_outside_fixed", lambda: v.__setitem__((0, slice(60, 70)), np.zeros(10)))
    attempt("reserved_attr", lambda: v.attrs.__setitem__("DIMENSION_LIST", "x"))
    attempt("bool_dtype", lambda: f.create_variable("/b", ("x",), bool))
    attempt("unknown_dim", lambda: f.create_variable("/c", ("nope",), "i4"))
    attempt("shape_mismatch", lambda: v.__setitem__((0, slice(0, 4)), np.zeros(5)))
    attempt("buffer_full", lambda: v.__setitem__((slice(0, 20), slice(None)), 1.0))
    attempt("fancy_index", lambda: v.__setitem__((0, [1, 2]), 1.0))
    attempt("bool_index", lambda: v.__setitem__((0, True), 1.0))
    attempt("fill_out_of_range", lambda: f.create_variable("/u8", ("x",), "u1", fillvalue=300))
    attempt("fill_fraction", lambda: f.create_variable("/i4", ("x",), "i4", fillvalue=1.5))
    v[0, :] = np.arange(64)
    f.flush()
    attempt("late_fill", lambda: v.attrs.__setitem__("_FillValue", np.float32(1)))
    # ranks define different things: the flush refuses on every rank
    if nranks > 1:
        f.dimensions["r"] = 4 + rank
        attempt("mismatch_flush", f.flush)
    attempt("close", f.close)
    attempt("put_after_close", lambda: v.__setitem__((1, 0), 1.0))
    attempt("close_again", f.close)
    return got


def early(out, args):
    """early_writes=True with args["rows"][t][r] rows of v put by rank r at
    tick t+1 (rows 4t.., each rank its band of 16 columns), h5l_put for
    even ticks and a non-contiguous view (iput) for odd ones."""
    with h5log.File(out, "w", comm=comm, early_writes=True, finalize=False) as f:
        f.dimensions = {"time": None, "x": 16 * nranks}
        v = f.create_variable("v", ("time", "x"), "f8", chunks=(1, 16))
        lo = 16 * rank
        for t, per in enumerate(args["rows"]):
            for i in range(per[rank]):
                row = 4 * t + i
                data = 1000.0 * row + np.arange(lo, lo + 16)
                v[row, lo:lo + 16] = data if t % 2 == 0 else np.repeat(data, 2)[::2]
            f.flush()
    return {}


def crash(out, args):
    """An exception inside the with block on the last rank only, after
    one tick: with one rank the file is closed; with more the job aborts
    (python3 -m mpi4py) instead of waiting in a collective close."""
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions["x"] = 4
        v = f.create_variable("v", ("x",), "i4")
        v[:] = [1, 2, 3, 4]
        f.flush()
        v[0] = 9  # pending, never published
        if rank == nranks - 1:
            raise RuntimeError("simulated failure on the last rank")
        f.flush()
        comm.Barrier()  # the other ranks wait here until the abort
    return {}


def reopen(out, args):
    """A file written, closed, and opened again with mode "a": what the
    package shows of it; "a" of a missing file creates it, "r+" of a
    missing file fails; an open while another writer holds the file (a
    second File("r+") in this process) raises BusyError."""
    with h5log.File(out, "w", comm=comm) as f:
        f.dimensions = {"time": None, "x": 4}
        v = f.create_variable("/g/temp", ("time", "x"), "f4", fillvalue=-1.0, chunks=(1, 4))
        f.create_variable("/w", ("x",), "i2")
        v[0:2, :] = 1
        f.flush()
        v[2, :] = 2
        f.flush()
    rec = {}
    with h5log.File(out, "a", comm=comm) as f:
        rec["dims"] = [[n, d.size, d.isunlimited()] for n, d in f.dimensions.items()]
        rec["groups"] = list(f.groups)
        vs = {"/g/temp": f["g/temp"], "/w": f["w"]}
        rec["vars"] = {p: [v.dtype.str, list(v.chunks) if v.chunks else None,
                           None if v.fillvalue is None else float(v.fillvalue), list(v.dimensions)]
                       for p, v in vs.items()}
        f["g/temp"][3, :] = 3
        f.flush()
        rec["ntick"] = f.ntick
        try:
            h5log.File(out, "r+", comm=comm)
            rec["busy"] = "opened"
        except h5log.Error as e:
            rec["busy"] = type(e).__name__
    try:
        h5log.File(out + ".missing", "r+", comm=comm)
        rec["r+missing"] = "opened"
    except h5log.Error as e:
        rec["r+missing"] = "Error"
    with h5log.File(out + ".new", "a", comm=comm) as f:
        f.dimensions["y"] = 2
    return rec


if __name__ == "__main__":
    case, outdir = sys.argv[1], sys.argv[2]
    args = json.load(open(sys.argv[3])) if len(sys.argv) > 3 else {}
    rec = globals()[case](os.path.join(outdir, case + ".h5"), args)
    with open(os.path.join(outdir, f"{case}.rank{rank}.json"), "w") as fh:
        json.dump(rec, fh)
