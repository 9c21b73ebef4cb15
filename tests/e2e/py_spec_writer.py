"""py_spec_writer.py — performs a difftest spec (the format of
tests/mpi/spec_writer.c's header) through the Python package h5log, so the
differential test's numpy model (difftest.run_model) can check files the
Python writer made.

Usage: mpirun -np P python3 -m mpi4py py_spec_writer.py SPEC OUT.h5
(PYTHONPATH holding python/, H5LOG_BUILD the build tree). Exit status 0
when every line did what it says; 1 when a `fail` line was accepted or a
call failed (the line and the error on stderr).

How each call maps to the package (so the spec exercises its paths):
  var + the fill/nofill line right after it   create_variable(..., fillvalue=x | False)
  fill elsewhere                              v.attrs["_FillValue"] = x
  att / text                                  obj.attrs[name] = numpy array / str
  put                                         v[slices] = data, an integer index where the
                                              count is 1 on odd seeds (the value then has
                                              fewer dimensions)
  iput                                        v[slices] = a non-contiguous view of the data
  0-D put                                     v[...] = data
  open [N]                                    File(OUT, "r+"): a restart; dimension
                                              indices and variables are the reopened
                                              file's (f.dimensions, f[path])
  crash                                       every rank kills itself (SIGKILL)
The data is difftest.gen_values (the generator shared with the model; what
is under test is h5log and libh5log).
"""
import os
import signal
import sys

import numpy as np

import h5log
import difftest


def main(spec_path, out):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    lines = [l.split() for l in open(spec_path).read().splitlines()]
    lines = [t for t in lines if t and not t[0].startswith("#")]
    f = None
    dimnames = []
    vtype = {}  # variable path -> its spec TYPE token
    bad = 0

    def obj(path):
        return f if path == "/" else f[path]

    def do(tok, i):
        """Perform one call; returns how many extra lines it consumed."""
        nonlocal f
        cmd = tok[0]
        if cmd == "create":
            limit = int(tok[1]) if len(tok) > 1 else None
            f = h5log.File(out, "w", comm=comm, buffer_limit=limit)
        elif cmd == "open":
            f = h5log.File(out, "r+", comm=comm)
            dimnames.extend(f.dimensions)  # in definition order: the spec's indices

            def walk(g):
                for v in g.variables.values():
                    dt = v.dtype
                    vtype[v.name] = ("" if dt.itemsize == 1 or dt.byteorder != ">" else ">") + dt.kind + str(dt.itemsize)
                for sub in g.groups.values():
                    walk(sub)
            walk(f)
        elif cmd == "crash":
            comm.Barrier()
            sys.stdout.flush()
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        elif cmd == "dim":
            f.dimensions[tok[1]] = None if tok[2] == "U" else int(tok[2])
            dimnames.append(tok[1])
        elif cmd == "grp":
            f.create_group(tok[1])
        elif cmd == "var":
            nd = int(tok[4])
            dims = tuple(dimnames[int(k)] for k in tok[5:5 + nd])
            chunks = None if tok[3] == "-" else tuple(int(c) for c in tok[3].split(","))
            dt = difftest.np_dtype(tok[2])
            fill, used = None, 0
            nxt = lines[i + 1] if i + 1 < len(lines) else []
            if nxt[:2] == ["fill", tok[1]]:
                fill, used = np.frombuffer(bytes.fromhex(nxt[2]), dtype=dt)[0], 1
            elif nxt[:2] == ["nofill", tok[1]]:
                fill, used = False, 1
            f.create_variable(tok[1], dims, dt, fillvalue=fill, chunks=chunks)
            vtype[tok[1]] = tok[2]
            return used
        elif cmd == "fill":
            v = f[tok[1]]
            v.attrs["_FillValue"] = np.frombuffer(bytes.fromhex(tok[2]), dtype=v.dtype)
        elif cmd == "nofill":
            raise NotImplementedError("nofill is create_variable(fillvalue=False), right after the var line")
        elif cmd == "att":
            dt = difftest.np_dtype(tok[3])
            obj(tok[1]).attrs[tok[2]] = np.frombuffer(bytes.fromhex("" if tok[5] == "-" else tok[5]), dtype=dt)
        elif cmd == "text":
            obj(tok[1]).attrs[tok[2]] = bytes.fromhex("" if tok[3] == "-" else tok[3]).decode("utf-8")
        elif cmd in ("put", "iput"):
            if int(tok[1]) != rank:
                return 0
            v = f[tok[2]]
            seed, nd = int(tok[3]), v.ndim
            start, count = [int(x) for x in tok[4:4 + nd]], [int(x) for x in tok[4 + nd:4 + 2 * nd]]
            data = difftest.gen_values(vtype[tok[2]], seed, int(np.prod(count, dtype=np.int64)))
            data = data.reshape(count)
            if nd == 0:
                v[...] = data
                return 0
            key = []
            for d, (s, c) in enumerate(zip(start, count)):
                if c == 1 and seed % 2:
                    key.append(s)
                else:
                    key.append(slice(s, s + c))
            data = data.reshape([c for k, c in zip(key, count) if isinstance(k, slice)])
            if cmd == "iput" and data.ndim:
                wide = np.zeros(data.shape[:-1] + (2 * data.shape[-1],), dtype=data.dtype)
                wide[..., ::2] = data
                data = wide[..., ::2]  # not contiguous: h5log copies it
                assert not data.flags.c_contiguous or data.size <= 1
            v[tuple(key)] = data
        elif cmd == "flush":
            f.flush()
        elif cmd == "close":
            f.close()
        else:
            raise ValueError(f"unknown call {cmd}")
        return 0

    i = 0
    while i < len(lines):
        tok = lines[i]
        if tok[0] == "fail":
            try:
                do(tok[1:], i)
            except (h5log.Error, ValueError, TypeError) as e:
                if rank == 0:
                    print(f"py_spec_writer: refused as expected: {' '.join(tok[1:])}: {e}", file=sys.stderr)
            else:
                print(f"py_spec_writer: rank {rank}: line {' '.join(tok)!r} succeeded, expected an error",
                      file=sys.stderr)
                bad = 1
            i += 1
            continue
        try:
            i += 1 + do(tok, i)
        except Exception as e:
            print(f"py_spec_writer: rank {rank}: line {' '.join(tok)!r} failed: {type(e).__name__}: {e}",
                  file=sys.stderr)
            raise
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
