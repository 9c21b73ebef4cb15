"""bench_scale.py BUILD — driver of bench/bench_scale.sh (see there).

Every measurement mounts a fresh daemon on a fresh source directory and
always unmounts. Numbers: medians and ranges over BENCH_ROUNDS rounds; with
BASELINE_BUILD set, the baseline daemon runs each round right after ours
(interleaved) on the same kind of file and the ratios are ours/baseline."""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
BASE = os.environ.get("BASELINE_BUILD")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1"))
TICKS = int(os.environ.get("BENCH_TICKS", "1000"))
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
CLK = os.sysconf("SC_CLK_TCK")


def mpirun(*args, **kw):
    return ["mpirun", "--oversubscribe", "-np", "1"] + [str(a) for a in args]


class Daemon:
    def __init__(self, build, src, mnt, opts="tick=0.1"):
        self.mnt = mnt
        self.log = open(os.path.join(os.path.dirname(mnt), "daemon.log"), "ab")
        self.p = subprocess.Popen([os.path.join(build, "bin", "h5logfs"), src, mnt, "-f", "-o", opts],
                                  stdout=self.log, stderr=self.log)
        t0 = time.time()
        while not os.path.ismount(mnt):
            if self.p.poll() is not None or time.time() - t0 > 10:
                raise RuntimeError("h5logfs did not mount")
            time.sleep(0.02)

    def status(self, key):
        with open("/proc/%d/status" % self.p.pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_s(self):
        with open("/proc/%d/stat" % self.p.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def stats(self):
        with open(os.path.join(self.mnt, ".h5logfs-stats")) as f:
            return f.read()

    def stop(self):
        if subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True).returncode:
            subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def fresh():
    d = tempfile.mkdtemp(prefix="h5log-scale.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    os.mkdir(os.path.join(d, "src"))
    os.mkdir(os.path.join(d, "mnt"))
    return d, os.path.join(d, "src"), os.path.join(d, "mnt")


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def summary(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4), "max": round(max(xs), 4),
            "n": len(xs)}


def writer_ticks(path):
    """tick -> wall time of its flush, from live_many's stdout."""
    out = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[0] == "tick":
                out[int(p[1])] = float(p[2])
    return out


def live_run(build, nvars, ticks, interval, chunk_rows, poll_rows, extra=()):
    """A live_many writer and a poller through the mount. Returns the
    poller's record, the writer's flush times, daemon CPU and RSS."""
    d, src, mnt = fresh()
    dm = Daemon(build, src, mnt)
    try:
        wout = os.path.join(d, "writer.out")
        with open(wout, "w") as wo:
            w = subprocess.Popen(mpirun(os.path.join(BUILD, "bench", "live_many"), os.path.join(src, "l.h5"),
                                        "--vars", nvars, "--ticks", ticks, "--interval", interval,
                                        "--chunk-rows", chunk_rows, *extra), env=ENV, stdout=wo)
        cpu0, t0 = dm.cpu_s(), time.time()
        seconds = ticks * interval
        poll = subprocess.run([PY, os.path.join(HERE, "poll_live.py"), os.path.join(mnt, "l.h5"), str(seconds),
                               str(poll_rows)], capture_output=True, text=True, timeout=seconds + 120)
        cpu1, t1 = dm.cpu_s(), time.time()
        rss, hwm = dm.status("VmRSS"), dm.status("VmHWM")
        stats = dm.stats()
        w.wait(timeout=120)
        rec = json.loads(poll.stdout) if poll.returncode == 0 else {"error": poll.stderr[-500:]}
        return {"poll": rec, "flush": writer_ticks(wout), "cpu_frac": (cpu1 - cpu0) / (t1 - t0), "rss": rss,
                "hwm": hwm, "stats": stats}
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)


def bench_live_1000(build, extra=()):
    r = live_run(build, 1000, 150, 0.2, 16384, 0, extra)
    seen, flush = r["poll"].get("seen", {}), r["flush"]
    delays = [(seen[k] - flush[int(k)]) / 0.1 for k in seen if int(k) in flush]
    return {"delay_ticks_p50": pct(delays, 50), "delay_ticks_p99": pct(delays, 99), "ticks_seen": len(delays),
            "ticks_written": len(flush), "polls": r["poll"].get("polls"), "bad_rows": r["poll"].get("bad_rows"),
            "daemon_cpu_frac": round(r["cpu_frac"], 4), "daemon_rss_bytes": r["rss"],
            "builds": re.search(r"skeletons: .*", r["stats"]).group(0) if "skeletons:" in r["stats"] else None}


def bench_live_1000_attr(build):
    return bench_live_1000(build, ("--step-attr", 1))


def bench_poll_100(build):
    r = live_run(build, 100, TICKS, 0.1, 16384, 1)
    cache = re.search(r"in use (\d+) \(peak (\d+)\)", r["stats"])
    return {"ticks": TICKS, "polls": r["poll"].get("polls"), "bad_rows": r["poll"].get("bad_rows"),
            "ticks_seen": len(r["poll"].get("seen", {})), "daemon_rss_bytes": r["rss"], "daemon_peak_rss_bytes": r["hwm"],
            "cache_in_use_bytes": int(cache.group(1)), "cache_peak_bytes": int(cache.group(2)),
            "daemon_cpu_frac": round(r["cpu_frac"], 4)}


def scale_writer(mode, arg, path):
    subprocess.run(mpirun(os.path.join(BUILD, "tests", "scale_writer"), mode, arg, path), env=ENV, check=True,
                   stdout=subprocess.DEVNULL, timeout=600)


MANY = None


def many_file():
    """One 20,000-variable file, written once, copied per round."""
    global MANY
    if MANY is None:
        MANY = tempfile.mkdtemp(prefix="h5log-many.", dir=os.environ.get("BENCH_DIR", "/tmp"))
        scale_writer("many", 20000, os.path.join(MANY, "many.h5"))
    return os.path.join(MANY, "many.h5")


def bench_many_20000(build):
    d, src, mnt = fresh()
    shutil.copy(many_file(), os.path.join(src, "many.h5"))
    dm = Daemon(build, src, mnt)
    try:
        t0 = time.time()
        os.stat(os.path.join(mnt, "many.h5"))  # the first lookup builds the skeleton
        t1 = time.time()
        st = dm.stats()
        m = re.search(r"skeletons: built \d+ \(failed \d+[^)]*\), ([\d.]+) s building", st)
        res = {"first_lookup_s": round(t1 - t0, 3), "build_s": float(m.group(1)) if m else None,
               "daemon_peak_rss_bytes": dm.status("VmHWM")}
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)
    # libhdf5 alone creating the same 20,000 datasets, in the same round:
    # the floor under any skeleton built with it
    p = subprocess.run([os.path.join(BUILD, "bench", "h5floor"), "20000"], capture_output=True, text=True,
                       timeout=600, check=True)
    res["libhdf5_floor_s"] = json.loads(p.stdout)["floor_s"]
    if res["build_s"]:
        res["build_over_floor"] = round(res["build_s"] / res["libhdf5_floor_s"], 2)
    return res


def bench_sparse(build):
    d, src, mnt = fresh()
    far = 1 << 40
    scale_writer("sparse", far, os.path.join(src, "s.h5"))
    dm = Daemon(build, src, mnt)
    try:
        code = ("import h5py, sys, time; t0 = time.time(); f = h5py.File(sys.argv[1], 'r'); "
                "r = f['s'][%d]; assert int(r[5]) == %d; print(time.time() - t0)" % (far, far % 1000 * 100 + 5))
        p = subprocess.run([PY, "-c", code, os.path.join(mnt, "s.h5")], capture_output=True, text=True, timeout=300)
        served = float(p.stdout.strip()) if p.returncode == 0 else None
        return {"serve_s": served, "error": p.stderr[-300:] if p.returncode else None,
                "daemon_peak_rss_bytes": dm.status("VmHWM")}
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)


LOOKUPS = r"""
import os, sys, time, json
import h5py
path, seconds = sys.argv[1], float(sys.argv[2])
lat = []
end = time.time() + seconds
while time.time() < end:
    time.sleep(0.12)  # past the entry timeout (one tick): the kernel asks the daemon
    t0 = time.time()
    with h5py.File(path, "r") as f:
        n = f["stamp"].shape[0]
        f["v00000"][n - 1, :]
    lat.append(time.time() - t0)
print(json.dumps(lat))
"""


def bench_lookup_during_build(build):
    """A live 3-variable file read (lookup, open, newest row) every 0.12 s
    while the 20,000-variable skeleton (in a subdirectory) is built (first
    lookup of it)."""
    d, src, mnt = fresh()
    dm = Daemon(build, src, mnt)
    try:
        w = subprocess.Popen(mpirun(os.path.join(BUILD, "bench", "live_many"), os.path.join(src, "l.h5"), "--vars", 3,
                                    "--ticks", 200, "--interval", 0.1), env=ENV, stdout=subprocess.DEVNULL)
        t0 = time.time()
        while time.time() - t0 < 20:  # until the live file is served
            try:
                subprocess.run([PY, "-c", LOOKUPS, os.path.join(mnt, "l.h5"), "0.01"], check=True,
                               capture_output=True, timeout=30)
                break
            except subprocess.CalledProcessError:
                time.sleep(0.1)
        idle = subprocess.run([PY, "-c", LOOKUPS, os.path.join(mnt, "l.h5"), "2"], capture_output=True, text=True)
        # in another directory: the kernel serialises lookups of names it
        # has not cached within one directory (docs/architecture.md)
        os.mkdir(os.path.join(src, "sub"))
        shutil.copy(many_file(), os.path.join(src, "sub", "many.h5"))
        poll = subprocess.Popen([PY, "-c", LOOKUPS, os.path.join(mnt, "l.h5"), "4"], stdout=subprocess.PIPE, text=True)
        time.sleep(0.3)
        tb = time.time()
        os.stat(os.path.join(mnt, "sub", "many.h5"))
        build_s = time.time() - tb
        during = json.loads(poll.communicate(timeout=60)[0])
        w.kill()
        w.wait()
        idle_lat = json.loads(idle.stdout) if idle.returncode == 0 else []
        return {"build_s": round(build_s, 3), "lookup_read_ms_during_build_p50": round(1000 * pct(during, 50), 1),
                "lookup_read_ms_during_build_max": round(1000 * max(during), 1), "n_during": len(during),
                "lookup_read_ms_idle_p50": round(1000 * pct(idle_lat, 50), 1) if idle_lat else None}
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)


BENCHES = [("many_20000", bench_many_20000), ("sparse_2e40", bench_sparse),
           ("lookup_during_build", bench_lookup_during_build), ("live_1000", bench_live_1000),
           ("live_1000_attr", bench_live_1000_attr),
           ("poll_100", bench_poll_100)]


def main():
    out = {"rounds": ROUNDS, "baseline": BASE}
    for name, fn in BENCHES:
        if ONLY and name not in ONLY:
            continue
        ours, base = [], []
        for _ in range(ROUNDS):
            ours.append(fn(BUILD))
            if BASE:
                base.append(fn(BASE))
        res = {"runs": ours}
        if BASE:
            res["baseline_runs"] = base
        for k in ours[0]:
            if isinstance(ours[0][k], (int, float)) and not isinstance(ours[0][k], bool):
                res[k] = summary([r[k] for r in ours])
                if BASE and isinstance(base[0].get(k), (int, float)):
                    res[k + "_baseline"] = summary([r[k] for r in base])
        out[name] = res
        print(json.dumps({name: res}), file=sys.stderr)
    if MANY:
        shutil.rmtree(MANY, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
