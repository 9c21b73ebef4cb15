"""bench_swmr.py BUILD — `make bench-swmr`: the live view at the VFD SWMR
design's own scale (its RFC, section 5.3), through the mount. JSON on
stdout.

  vars    VARS (10,000) int32 [time, 4] variables extended round-robin by
          RANKS (2) ranks: a pass writes one row of every variable and
          flushes (one tick), every FLUSH (0.5) seconds, PASSES (240) passes
  planes  PLANE_VARS (10) int32 [time, 1000, 1000] variables grown a plane
          at a time (each rank a band of rows), PLANE_PASSES (30) passes

The daemon runs with -o tick=TICK (0.1); a reader (bench_swmr_poll.py)
opens the file POLL (0.01) seconds apart, each time a new h5py open of the
newest tick, and checks the newest row of one variable (round-robin)
against the writer's formula. A pass's latency is the time from the
writer's commit (its flush returned) to the end of the first poll that saw
it, in ticks; the bound is 3 ticks. Reported per test: min, mean, p99 and
max latency in ticks, the passes over the bound, rows that differed from
what the writer wrote (must be 0), polls that saw fewer rows than an
earlier one (must be 0), the daemon's CPU (fraction of one core, over the
writer's run, and every CPU_EVERY (60) seconds of it) and RSS (at the end;
peak); the latency over each tenth of the passes.

  first_open  a closed file of FO_VARS (1,000) such variables (10 passes)
          opened by h5py, netCDF4 and xarray (each in a fresh interpreter,
          its import not timed) through a fresh daemon per round, against
          h5logreplay's copy on disk (FO_ROUNDS, 3): seconds, and the
          daemon's skeleton build of that first open; the daemon's start-up
          (spawn to mounted) is timed separately

The RFC's scale is 10,000 passes (83 minutes at a flush every 0.5 s):
PASSES=10000 runs it; the default is 240 (2 minutes). BENCH_ONLY=vars,
planes or first_open runs some. Every run mounts a fresh daemon on a fresh directory
(BENCH_DIR, default /tmp) and always unmounts."""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
CLK = os.sysconf("SC_CLK_TCK")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")


def env(name, default, conv=int):
    return conv(os.environ.get(name, default))


TICK = env("TICK", "0.1", float)
FLUSH = env("FLUSH", "0.5", float)
RANKS = env("RANKS", "2")
POLL = env("POLL", "0.01", float)
CPU_EVERY = env("CPU_EVERY", "60", float)
BOUND = 3.0
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))


class Daemon:
    def __init__(self, src, mnt, log):
        self.mnt = mnt
        self.log = open(log, "ab")
        self.p = subprocess.Popen([os.path.join(BUILD, "bin", "h5logfs"), src, mnt, "-f", "-o", "tick=%g" % TICK],
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
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else None


def run(mode, nvars, passes, width):
    d = tempfile.mkdtemp(prefix="h5log-swmr.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    src, mnt = os.path.join(d, "src"), os.path.join(d, "mnt")
    os.mkdir(src)
    os.mkdir(mnt)
    dm = Daemon(src, mnt, os.path.join(d, "daemon.log"))
    try:
        wargs = [os.path.join(BUILD, "bench", "bench_swmr_writer"), os.path.join(src, "s.h5"), mode,
                 "--passes", passes, "--flush", FLUSH]
        wargs += ["--vars", nvars, "--row", width] if mode == "vars" else ["--planes-vars", nvars, "--side", width]
        wout = os.path.join(d, "writer.out")
        cpu0, t0 = dm.cpu_s(), time.time()
        with open(wout, "w") as wo:
            w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", str(RANKS)] + [str(x) for x in wargs],
                                 env=ENV, stdout=wo)
        seconds = passes * FLUSH + 600
        poll = subprocess.Popen([PY, os.path.join(HERE, "bench_swmr_poll.py"), os.path.join(mnt, "s.h5"), mode,
                                 str(nvars), str(seconds), "--width", str(width), "--interval", str(POLL)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the daemon's CPU every CPU_EVERY seconds of the run: does it grow
        # with the passes? (the average alone hid a doubling)
        cpu_series, last_c, last_t, deadline = [], cpu0, t0, t0 + seconds
        while True:
            try:
                w.wait(timeout=max(0.1, min(CPU_EVERY, deadline - time.time())))
                break
            except subprocess.TimeoutExpired:
                if time.time() >= deadline:
                    raise
                c, t = dm.cpu_s(), time.time()
                cpu_series.append({"s": round(t - t0), "cpu_frac": round((c - last_c) / (t - last_t), 3)})
                last_c, last_t = c, t
        cpu1, t1 = dm.cpu_s(), time.time()
        rss, hwm = dm.status("VmRSS"), dm.status("VmHWM")
        stats = dm.stats()
        with open(os.path.join(src, "s.h5.done"), "w"):
            pass  # the poller stops a second after the last new tick
        out, err = poll.communicate(timeout=120)
        rec = json.loads(out) if poll.returncode == 0 else {"error": err[-800:]}
        commit = {}
        with open(wout) as f:
            for line in f:
                p = line.split()
                if len(p) == 3 and p[0] == "tick":
                    commit[int(p[1])] = float(p[2])
        seen = {int(k): v for k, v in rec.get("seen", {}).items()}
        lat = [(seen[k] - commit[k]) / TICK for k in sorted(seen) if k in commit]
        worst = sorted(((seen[k] - commit[k]) / TICK, k) for k in seen if k in commit)[-5:]
        keys = sorted(k for k in seen if k in commit)
        tenths = []  # latency over each tenth of the passes
        for i in range(10):
            part = keys[len(keys) * i // 10:len(keys) * (i + 1) // 10]
            if part:
                xs = [(seen[k] - commit[k]) / TICK for k in part]
                tenths.append({"passes": "%d-%d" % (part[0], part[-1]), "mean": round(statistics.mean(xs), 3),
                               "max": round(max(xs), 3), "over_bound": sum(1 for x in xs if x > BOUND)})
        return {
            "mode": mode, "variables": nvars, "width": width, "ranks": RANKS, "passes": passes, "flush_s": FLUSH,
            "tick_s": TICK, "poll_s": POLL, "writer_status": w.returncode,
            "passes_committed": len(commit), "passes_seen": len(lat),
            "latency_ticks": {"min": round(min(lat), 3), "mean": round(statistics.mean(lat), 3),
                              "p99": round(pct(lat, 99), 3), "max": round(max(lat), 3)} if lat else None,
            "bound_ticks": BOUND, "over_bound": sum(1 for x in lat if x > BOUND),
            "worst": [{"pass": k, "ticks": round(x, 2)} for x, k in reversed(worst)],
            "latency_by_tenth": tenths,
            "bad_values": rec.get("bad"), "bad_examples": rec.get("bad_examples"), "went_back": rec.get("back"),
            "polls": rec.get("polls"), "poller_error": rec.get("error"),
            "daemon_cpu_frac": round((cpu1 - cpu0) / (t1 - t0), 4), "daemon_rss_bytes": rss,
            "daemon_peak_rss_bytes": hwm, "daemon_cpu_series": cpu_series,
            "skeletons": next((line for line in stats.splitlines() if line.startswith("skeletons:")), None),
            "file": next((line for line in stats.splitlines() if line.startswith("file ")), None),
        }
    finally:
        dm.stop()
        shutil.rmtree(d, ignore_errors=True)


OPEN_SNIPPET = {
    "h5py": "import h5py\nt=time.perf_counter()\nf=h5py.File(P,'r'); n=len(list(f.keys())); f.close()",
    "netcdf4": "import netCDF4\nt=time.perf_counter()\nf=netCDF4.Dataset(P); n=len(f.variables); f.close()",
    "xarray": "import xarray\nt=time.perf_counter()\nf=xarray.open_dataset(P); n=len(f.variables); f.close()",
}


def open_time(client, path):
    code = "import sys, time\nP=sys.argv[1]\n" + OPEN_SNIPPET[client] + "\nprint(time.perf_counter()-t)"
    out = subprocess.run([PY, "-c", code, path], capture_output=True, text=True, timeout=600, check=True)
    return float(out.stdout.split()[-1])


def first_open(nvars, rounds):
    d = tempfile.mkdtemp(prefix="h5log-swmr.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    src, mnt = os.path.join(d, "src"), os.path.join(d, "mnt")
    os.mkdir(src)
    os.mkdir(mnt)
    try:
        f = os.path.join(src, "s.h5")
        subprocess.run(["mpirun", "--oversubscribe", "-np", str(RANKS), os.path.join(BUILD, "bench", "bench_swmr_writer"),
                        f, "vars", "--vars", str(nvars), "--passes", "10", "--flush", "0"], env=ENV, check=True,
                       stdout=subprocess.DEVNULL)
        local = os.path.join(d, "local.h5")
        subprocess.run([os.path.join(BUILD, "bin", "h5logreplay"), f, local], check=True, stdout=subprocess.DEVNULL)
        out = {"variables": nvars, "rounds": rounds, "daemon_start_s": []}
        for client in OPEN_SNIPPET:
            r = out[client] = {"mount_s": [], "local_s": [], "build_s": []}
            for _ in range(rounds):
                r["local_s"].append(round(open_time(client, local), 4))
                t0 = time.time()
                dm = Daemon(src, mnt, os.path.join(d, "daemon.log"))
                out["daemon_start_s"].append(round(time.time() - t0, 4))
                try:
                    r["mount_s"].append(round(open_time(client, os.path.join(mnt, "s.h5")), 4))
                    line = next((x for x in dm.stats().splitlines() if x.startswith("skeletons:")), "")
                    m = line.split("longest ")[-1].split(" s")[0] if "longest " in line else None
                    r["build_s"].append(float(m) if m else None)
                finally:
                    dm.stop()
        return out
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    out = {}
    if not ONLY or "vars" in ONLY:
        out["vars"] = run("vars", env("VARS", "10000"), env("PASSES", "240"), 4)
    if not ONLY or "planes" in ONLY:
        out["planes"] = run("planes", env("PLANE_VARS", "10"), env("PLANE_PASSES", "30"), env("SIDE", "1000"))
    runs = [r for r in out.values()]
    out["met"] = None if not runs else all(r["latency_ticks"] and r["latency_ticks"]["max"] <= BOUND and not r["bad_values"]
                     and not r["went_back"] and r["passes_seen"] == r["passes"] for r in runs)
    if not ONLY or "first_open" in ONLY:
        out["first_open"] = first_open(env("FO_VARS", "1000"), env("FO_ROUNDS", "3"))
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
