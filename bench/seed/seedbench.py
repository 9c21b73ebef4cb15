#!/usr/bin/python3
"""The seed benchmark: writers and readers of the same small-to-large
setups, per-iteration times as JSON records, plots.

A setup (setups.py) maps run names to forms {variable: (shape, chunks)}.
For each run:

1. Writes, each timed from create to close (time.monotonic; under MPI the
   slowest rank, after a barrier), ITERATIONS times: h5log (the project's
   Python package, under mpirun at each of RANKS), h5py with the MPI-IO
   driver and collective writes (python3-h5py-mpi, at each of RANKS), and
   serial h5py and netCDF4-python (what users do today without MPI). Every
   rank writes its band of dimension 0 of every variable; the content is
   pattern.py's, recomputable from name and shape. Every written file is
   read back once (untimed, h5py) and compared with the pattern.
2. Reads of three sources: `mount` — the h5log file (written at the largest
   of RANKS) through an h5logfs mount; `local` — the same content as the
   canonical file h5logreplay writes on local disk; `h5py` — the file
   h5py-mpio wrote (largest of RANKS). Each with three engines: h5py,
   netCDF4, xarray (engine="netcdf4"). Patterns, each after a cold start
   (page cache dropped; for the mount, the daemon restarted too):
     header          open, every variable's shape, dtype, chunking,
                     attributes, close: once cold, once warm
     variable        open, load the first variable of the form, close: once, cold
     bench_variable  the same ITERATIONS times: iteration 0 cold, the rest warm
     bench_complete  open, load every variable of the form, close,
                     ITERATIONS times: iteration 0 cold, the rest warm
   Every value loaded is compared with the pattern (untimed); a mismatch
   or an error makes the exit status 1.

Output: the records (one per iteration) as a JSON list in OUT/records.json
(its path on stderr); plots OUT/seed_write.png and OUT/seed_read.png; on
stdout one JSON summary: medians per writer/ranks and per
source/engine/pattern/cache, the ratios mount/local of the medians
(time: above 1 means the mount is slower), the machine's load.

Record fields: setup, run, kind ("write"|"read"), writer, ranks, source
(null for writes), engine (the library: h5log/h5py/netCDF4/xarray),
pattern ("write" for writes), variable ("*": every variable), iteration,
cache ("cold"|"warm"; null for writes), seconds, bytes (data bytes moved),
chunks ({variable: chunks} of the run's form), shape ({variable: shape}),
verified (reads and writes: the data equal the pattern).

Needs root for the cold starts (drop_caches); without it every read is
marked "warm". Run as `make bench-seed` (SETUP=, ITERATIONS=, RANKS=).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pattern  # noqa: E402
from setups import SETUPS  # noqa: E402

PY = "/usr/bin/python3"
ENGINES = ("h5py", "netCDF4", "xarray")
SOURCES = ("mount", "local", "h5py")


def log(*a):
    print("seedbench:", *a, file=sys.stderr, flush=True)


def cpu_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


class Bench:
    def __init__(self, args):
        self.a = args
        self.build = os.path.abspath(args.build)
        self.work = tempfile.mkdtemp(prefix="h5log-seedbench.", dir=args.workdir)
        self.mnt = os.path.join(self.work, "mnt")
        os.mkdir(self.mnt)
        self.daemon = None
        self.records = []
        self.errors = []
        self.timeouts = []  # writers that did not finish in --write-timeout (not errors: results)
        self.can_drop = self._try_drop()
        if not self.can_drop:
            log("cannot drop the page cache (needs root): every read is warm")
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                        PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(HERE)), "python")
                        + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
                        H5LOG_BUILD=self.build)

    # --- page cache and mount -------------------------------------------
    def _try_drop(self):
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return True
        except OSError:
            return False

    def mount(self, src):
        self.umount()
        self.daemon = subprocess.Popen([os.path.join(self.build, "bin", "h5logfs"), src, self.mnt,
                                        "-f", "-o", "tick=0.1"], stderr=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.ismount(self.mnt):
                break
            if self.daemon.poll() is not None:
                raise RuntimeError("h5logfs exited with %d" % self.daemon.returncode)
            time.sleep(0.05)
        else:
            raise RuntimeError("h5logfs did not mount %s in 10 s" % self.mnt)
        time.sleep(0.3)   # its ticker has set the mount's readahead
        self.mounted = src

    def umount(self):
        if os.path.ismount(self.mnt):
            if subprocess.run(["fusermount3", "-u", self.mnt], stderr=subprocess.DEVNULL).returncode:
                subprocess.run(["fusermount3", "-uz", self.mnt], stderr=subprocess.DEVNULL)
        if self.daemon is not None:
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log("daemon %d did not exit after unmount: killing it" % self.daemon.pid)
                self.daemon.kill()
                self.daemon.wait()
            self.daemon = None

    def cold(self, source):
        """A cold start: for the mount a fresh daemon, and no page cache."""
        if source == "mount":
            src = self.mounted
            self.umount()
        if self.can_drop:
            self._try_drop()
        if source == "mount":
            self.mount(src)
        return "cold" if self.can_drop else "warm"

    def cleanup(self):
        self.umount()
        if self.a.keep:
            log("kept", self.work)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    # --- writes -----------------------------------------------------------
    def writers(self):
        out = []
        for w in self.a.writers:
            if w in ("h5log", "h5py-mpio"):
                out += [(w, r) for r in self.a.ranks]
            else:
                out.append((w, 1))
        return out

    def write(self, run, form):
        fj = json.dumps(form)
        nbytes = sum(4 * int(np.prod(s, dtype=np.int64)) for s, _ in form.values())
        paths = {}
        for w, r in self.writers():
            d = os.path.join(self.work, "%s-np%d" % (w, r))
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, run + ".h5")
            cmd = [PY, os.path.join(HERE, "writer.py"), w, fj, path, str(self.a.iterations)]
            if w in ("h5log", "h5py-mpio"):
                cmd = ["mpirun", "--oversubscribe", "-np", str(r), PY, "-m", "mpi4py"] + cmd[1:]
            try:
                p = subprocess.run(cmd, env=self.env, capture_output=True, text=True,
                                   timeout=self.a.write_timeout)
            except subprocess.TimeoutExpired:
                # a peer that does not finish (h5py-mpio at 1 rank with
                # z-plane chunks of 512^3) is a result, not a crash
                self.timeouts.append("write %s %s np%d: did not finish %d iterations in %d s"
                                     % (run, w, r, self.a.iterations, self.a.write_timeout))
                log(self.timeouts[-1])
                continue
            if p.returncode:
                self.errors.append("write %s %s np%d: exit %d: %s" % (run, w, r, p.returncode,
                                                                      p.stderr.strip()[-2000:]))
                log(self.errors[-1])
                continue
            ok = self.verify_file(path, form, w)
            if not ok:
                self.errors.append("write %s %s np%d: the file does not hold the pattern" % (run, w, r))
            for line in p.stdout.splitlines():
                if not line.startswith("{"):
                    continue
                it = json.loads(line)
                self.records.append(self.rec(run, form, "write", w, r, None, w, "write", "*",
                                             it["iteration"], None, it["seconds"], it["bytes"], ok))
            paths[(w, r)] = path
            log("%s: wrote %s np%d (%.1f MB) x%d" % (run, w, r, nbytes / 1e6, self.a.iterations))
        return paths

    def verify_file(self, path, form, writer):
        """Whether the file at PATH holds the pattern (an h5log file: its
        canonical copy, the log layout keeps the data in its log)."""
        import h5py
        check = path
        try:
            if writer == "h5log":
                # the closed (finalized) file itself, with plain h5py: what a
                # user reads without the mount
                with h5py.File(path, "r") as f:
                    if not all(np.array_equal(f[n][...], self.expect[n]) for n in form):
                        return False
                check = path + ".verify.h5"
                subprocess.run([os.path.join(self.build, "bin", "h5logreplay"), path, check],
                               check=True, capture_output=True)
            with h5py.File(check, "r") as f:
                return all(np.array_equal(f[n][...], self.expect[n]) for n in form)
        except Exception as e:   # noqa: BLE001 — reported, not raised
            log("verify %s: %s" % (path, e))
            return False
        finally:
            if check != path and os.path.exists(check):
                os.unlink(check)

    def rec(self, run, form, kind, writer, ranks, source, engine, pat, var, it, cache, sec, nbytes, ok):
        return {"setup": self.a.setup, "run": run, "kind": kind, "writer": writer, "ranks": ranks,
                "source": source, "engine": engine, "pattern": pat, "variable": var,
                "iteration": it, "cache": cache, "seconds": sec, "bytes": nbytes,
                "chunks": {n: list(c) for n, (s, c) in form.items()},
                "shape": {n: list(s) for n, (s, c) in form.items()}, "verified": ok}

    # --- reads ------------------------------------------------------------
    @staticmethod
    def open_read(engine, path, names, load):
        """Open PATH with ENGINE, read the header of NAMES (load=False) or
        load NAMES' data; close. Returns {name: ndarray} (empty for a
        header) — the part that is timed."""
        out = {}
        if engine == "h5py":
            import h5py
            with h5py.File(path, "r") as f:
                for n in names:
                    ds = f[n]
                    if load:
                        out[n] = ds[...]
                    else:
                        _ = (ds.shape, ds.dtype, ds.chunks, dict(ds.attrs))
        elif engine == "netCDF4":
            import netCDF4
            with netCDF4.Dataset(path, "r") as f:
                for n in names:
                    v = f.variables[n]
                    if load:
                        out[n] = np.ma.getdata(v[...])
                    else:
                        _ = (v.shape, v.dtype, v.dimensions, v.chunking(),
                             {a: v.getncattr(a) for a in v.ncattrs()})
        elif engine == "xarray":
            import xarray as xr
            with xr.open_dataset(path, engine="netcdf4") as ds:
                for n in names:
                    v = ds[n]
                    if load:
                        out[n] = v.values
                    else:
                        _ = (v.shape, v.dtype, v.dims, v.encoding.get("chunksizes"), dict(v.attrs))
        return out

    def timed_read(self, run, form, source, path, engine, pat, names, it, cache, writer):
        load = pat != "header"
        t0 = time.monotonic()
        try:
            data = self.open_read(engine, path, names, load)
        except Exception as e:   # noqa: BLE001 — reported, the benchmark goes on
            self.errors.append("read %s %s %s %s: %s: %s" % (run, source, engine, pat,
                                                             type(e).__name__, e))
            log(self.errors[-1])
            return False
        dt = time.monotonic() - t0
        ok = True
        nbytes = 0
        if load:
            for n in names:
                nbytes += data[n].nbytes
                if not np.array_equal(np.asarray(data[n], dtype="f4"), self.expect[n]):
                    ok = False
                    self.errors.append("read %s %s %s %s iteration %d: %s differs from what was "
                                       "written" % (run, source, engine, pat, it, n))
                    log(self.errors[-1])
        var = names[0] if len(names) == 1 else "*"
        self.records.append(self.rec(run, form, "read", writer[0], writer[1], source, engine, pat,
                                     var, it, cache, dt, nbytes, ok))
        return ok

    def read(self, run, form, paths):
        top = max(self.a.ranks)
        local = os.path.join(self.work, "local")
        os.makedirs(local, exist_ok=True)
        srcs = {}
        if ("h5log", top) in paths:
            lpath = os.path.join(local, run + ".h5")
            p = subprocess.run([os.path.join(self.build, "bin", "h5logreplay"), paths[("h5log", top)],
                                lpath], capture_output=True, text=True)
            if p.returncode:
                self.errors.append("h5logreplay %s: %s" % (run, p.stderr.strip()))
            else:
                srcs["local"] = (lpath, ("h5log", top))
            self.mount(os.path.dirname(paths[("h5log", top)]))
            srcs["mount"] = (os.path.join(self.mnt, run + ".h5"), ("h5log", top))
        if ("h5py-mpio", top) in paths:
            srcs["h5py"] = (paths[("h5py-mpio", top)], ("h5py-mpio", top))
        names = list(form)
        first = names[:1]
        for source in self.a.sources:
            if source not in srcs:
                continue
            path, writer = srcs[source]
            for engine in self.a.engines:
                args = (run, form, source, path, engine)
                c = self.cold(source)
                self.timed_read(*args, "header", names, 0, c, writer)
                self.timed_read(*args, "header", names, 1, "warm", writer)
                c = self.cold(source)
                self.timed_read(*args, "variable", first, 0, c, writer)
                c = self.cold(source)
                for it in range(self.a.iterations):
                    self.timed_read(*args, "bench_variable", first, it, c if it == 0 else "warm", writer)
                c = self.cold(source)
                for it in range(self.a.iterations):
                    self.timed_read(*args, "bench_complete", names, it, c if it == 0 else "warm", writer)
                log("%s: read %s with %s" % (run, source, engine))
        self.umount()

    def run(self):
        setup = SETUPS[self.a.setup]
        for run, form in setup.items():
            if self.a.runs and run not in self.a.runs:
                continue
            form = {n: (tuple(s), tuple(c)) for n, (s, c) in form.items()}
            self.expect = {n: pattern.whole(n, s) for n, (s, c) in form.items()}
            paths = self.write(run, form)
            if self.a.selftest_wrong_expectation:
                for v in self.expect.values():
                    v.flat[-1] += 1
            self.read(run, form, paths)
            # the files of this run are not needed any more (the 512^3 series is big)
            for p in paths.values():
                if os.path.exists(p):
                    os.unlink(p)
            lp = os.path.join(self.work, "local", run + ".h5")
            if os.path.exists(lp):
                os.unlink(lp)


def summarize(records):
    """Medians per writer/ranks and per source/engine/pattern/cache, and the
    ratios mount/local of the medians, per run."""
    groups = {}
    for r in records:
        if r["kind"] == "write":
            key = (r["run"], "write", "%s/np%d" % (r["writer"], r["ranks"]))
        else:
            key = (r["run"], "read", "%s/%s/%s/%s" % (r["source"], r["engine"], r["pattern"], r["cache"]))
        groups.setdefault(key, []).append(r["seconds"])
    out = {"write": {}, "read": {}, "ratio_mount_local": {}}
    for (run, kind, k), v in sorted(groups.items()):
        out[kind].setdefault(run, {})[k] = round(statistics.median(v), 6)
    for run, d in out["read"].items():
        for k, v in d.items():
            if k.startswith("mount/"):
                base = d.get("local/" + k[len("mount/"):])
                if base:
                    out["ratio_mount_local"].setdefault(run, {})[k[len("mount/"):]] = round(v / base, 3)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--setup", default="quick", choices=sorted(SETUPS))
    ap.add_argument("--runs", nargs="*", help="only these runs of the setup")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--ranks", default="1,2", help="MPI ranks of the MPI writers (comma-separated)")
    ap.add_argument("--writers", default="h5log,h5py-mpio,h5py,netCDF4")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="build/bench-seed", help="directory of records.json and the plots")
    ap.add_argument("--workdir", default=os.environ.get("BENCH_DIR", "/tmp"))
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--write-timeout", type=int, default=int(os.environ.get("WRITE_TIMEOUT", "3600")),
                    help="seconds a writer may take for its iterations; past it the writer is recorded "
                         "as not finishing (summary 'timeouts') and the run goes on")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--selftest-wrong-expectation", action="store_true",
                    help="compare every read with a wrong expectation (the test that the checks can fail)")
    a = ap.parse_args()
    a.ranks = [int(x) for x in a.ranks.split(",")]
    a.writers = a.writers.split(",")
    a.engines = a.engines.split(",")
    a.sources = a.sources.split(",")
    for b in ("bin/h5logfs", "bin/h5logreplay", "libh5log.so"):
        if not os.path.exists(os.path.join(a.build, b)):
            sys.exit("seedbench: %s is not built (make all)" % os.path.join(a.build, b))
    os.makedirs(a.out, exist_ok=True)

    t0, l0, c0 = time.monotonic(), os.getloadavg(), cpu_busy()
    bench = Bench(a)
    try:
        bench.run()
    finally:
        bench.cleanup()
    c1 = cpu_busy()
    machine = {"ncpu": os.cpu_count(), "loadavg_start": [round(x, 2) for x in l0],
               "loadavg_end": [round(x, 2) for x in os.getloadavg()],
               "cpu_busy_fraction": round(1 - (c1[1] - c0[1]) / max(1, c1[0] - c0[0]), 3),
               "wall_seconds": round(time.monotonic() - t0, 1), "cold_dropped": bench.can_drop}
    rpath = os.path.abspath(os.path.join(a.out, "records.json"))
    with open(rpath, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r) for r in bench.records) + "\n]\n")
    log("records:", rpath)
    summary = {"setup": a.setup, "iterations": a.iterations, "ranks": a.ranks,
               "records_file": rpath, "records": len(bench.records), "machine": machine,
               "verified": not bench.errors and all(r["verified"] for r in bench.records),
               "errors": bench.errors, "timeouts": bench.timeouts, **summarize(bench.records)}
    if not a.no_plots:
        import plot
        summary["plots"] = plot.plot(bench.records, a.out)
    print(json.dumps(summary, indent=1))
    sys.exit(0 if summary["verified"] else 1)


if __name__ == "__main__":
    main()
