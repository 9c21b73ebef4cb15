"""One writer of the seed benchmark, run as its own process (under mpirun
for the MPI writers): writes FORM to PATH ITERATIONS times, each iteration
timed from create to close (time.monotonic), and prints one JSON line per
iteration on rank 0: {"iteration", "seconds", "bytes"}. Every rank writes
its band of dimension 0 of every variable (pattern.band), the content of
pattern.rows.

usage: writer.py WRITER FORM_JSON PATH ITERATIONS
  WRITER: h5log       the project's Python package (mpi4py, any ranks)
          h5py-mpio   h5py with driver="mpio", collective writes
          h5py        serial h5py (1 process, no MPI)
          netCDF4     serial netCDF4-python (1 process, no MPI)
"""
import json
import os
import sys
import time

import numpy as np

import pattern

writer, form_json, path, iterations = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
form = {k: (tuple(v[0]), tuple(v[1])) for k, v in json.loads(form_json).items()}
nbytes = sum(4 * int(np.prod(s, dtype=np.int64)) for s, _ in form.values())

if writer in ("h5log", "h5py-mpio"):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, nranks = comm.rank, comm.size
else:
    comm, rank, nranks = None, 0, 1

# the data of this rank, made before the clock starts
data = {}
for name, (shape, _) in form.items():
    lo, hi = pattern.band(shape[0], rank, nranks)
    data[name] = (lo, hi, pattern.rows(name, shape, lo, hi))


def dimnames(name, shape):
    return tuple("%s_%d" % (name, i) for i in range(len(shape)))


def write_h5log():
    import h5log
    with h5log.File(path, "w", comm=comm) as f:
        for name, (shape, _) in form.items():
            for d, n in zip(dimnames(name, shape), shape):
                f.dimensions[d] = n
        for name, (shape, chunks) in form.items():
            v = f.create_variable(name, dimnames(name, shape), "f4", chunks=tuple(chunks) or None)
            lo, hi, block = data[name]
            if hi > lo:
                v[lo:hi] = block


def write_h5py_mpio():
    import h5py
    with h5py.File(path, "w", driver="mpio", comm=comm) as f:
        for name, (shape, chunks) in form.items():
            ds = f.create_dataset(name, shape, dtype="f4", chunks=tuple(chunks) or None)
            lo, hi, block = data[name]
            with ds.collective:
                if hi > lo:
                    ds[lo:hi] = block
                else:   # a collective write needs every rank: an empty selection
                    ds.write_direct(np.empty((0,) + shape[1:], "f4"),
                                    dest_sel=np.s_[0:0])


def write_h5py():
    import h5py
    with h5py.File(path, "w") as f:
        for name, (shape, chunks) in form.items():
            f.create_dataset(name, shape, dtype="f4", chunks=tuple(chunks) or None)[...] = data[name][2]


def write_netcdf4():
    import netCDF4
    with netCDF4.Dataset(path, "w") as f:
        for name, (shape, _) in form.items():
            for d, n in zip(dimnames(name, shape), shape):
                f.createDimension(d, n)
        for name, (shape, chunks) in form.items():
            kw = {"chunksizes": list(chunks)} if chunks else {}
            v = f.createVariable(name, "f4", dimnames(name, shape), **kw)
            v[...] = data[name][2]


fn = {"h5log": write_h5log, "h5py-mpio": write_h5py_mpio, "h5py": write_h5py,
      "netCDF4": write_netcdf4}[writer]
# import the writer's library before the clock runs (the first iteration
# would otherwise time the import)
__import__({"h5log": "h5log", "netCDF4": "netCDF4"}.get(writer, "h5py"))
if writer == "h5py-mpio":
    import h5py
    if not h5py.get_config().mpi:
        sys.exit("writer.py: this h5py has no MPI driver (install python3-h5py-mpi, run under mpirun)")
for it in range(iterations):
    for p in (path, path + ".h5lj"):
        if rank == 0 and os.path.exists(p):
            os.unlink(p)
    if comm is not None:
        comm.Barrier()
    t0 = time.monotonic()
    fn()
    dt = time.monotonic() - t0
    if comm is not None:
        dt = comm.allreduce(dt, op=MPI.MAX)
    if rank == 0:
        print(json.dumps({"iteration": it, "seconds": dt, "bytes": nbytes}), flush=True)
