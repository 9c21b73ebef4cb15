"""bench_standalone.py BUILD — what finalizing at close costs and what it
buys (docs/performance.md, "Reading through the mount").

For each pattern of bench/bench_close.c (a: one M x 1024 x 256 float32
contiguous variable; c: 1000 [time, 256] variables of 1 KiB chunks),
BENCH_ROUNDS interleaved rounds (default 3) of: the writer with finalizing
(the default) and with no_finalize, on BENCH_NP ranks (default 2). Kept:
h5l_close's time (max over ranks), the file's size and allocated bytes.
Then the finalized file of the last round is read whole with plain h5py
(no mount) and through an h5logfs mount of the same file, each cold (page
cache dropped: sync; echo 3 > /proc/sys/vm/drop_caches; daemon remounted)
and warm (read again at once).

Output: one JSON document on stdout; ratios: close time finalized /
not finalized (median rounds), file bytes finalized / not, and plain-read
throughput / mount throughput (higher: plain h5py is faster).
Environment: BENCH_DIR (default /tmp), BENCH_MIB_A (default 1024: MiB of
pattern a), BENCH_STEPS_C (default 20), BENCH_ROUNDS, BENCH_NP.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import h5py

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
NP = int(os.environ.get("BENCH_NP", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
SIZES = {"a": int(os.environ.get("BENCH_MIB_A", "1024")), "c": int(os.environ.get("BENCH_STEPS_C", "20"))}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def run_close(d, pat, fin):
    cmd = ["mpirun", "--oversubscribe", "-np", str(NP), os.path.join(BUILD, "bench", "bench_close"),
           "--dir", d, "--pattern", pat, "--mib", str(SIZES[pat])] + ([] if fin else ["--no-finalize"])
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_all(path):
    t = time.monotonic()
    n = 0
    with h5py.File(path, "r") as f:
        for name, ds in f.items():
            if name == "_h5log" or not isinstance(ds, h5py.Dataset) or ds.dtype.kind != "f":
                continue
            if ds.ndim == 3:  # 64 MiB slabs
                step = max(1, (64 << 20) // (ds.shape[1] * ds.shape[2] * 4))
                for i in range(0, ds.shape[0], step):
                    n += ds[i:i + step].nbytes
            else:
                n += ds[()].nbytes
    dt = time.monotonic() - t
    return {"seconds": round(dt, 4), "bytes": n, "MBps": round(n / dt / 1e6, 1)}


class Mount:
    def __init__(self, src, mnt):
        self.src, self.mnt, self.p = src, mnt, None

    def __enter__(self):
        os.makedirs(self.mnt, exist_ok=True)
        self.p = subprocess.Popen([os.path.join(BUILD, "bin", "h5logfs"), self.src, self.mnt, "-f", "-o", "tick=0.1"],
                                  stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.ismount(self.mnt):
                break
            time.sleep(0.1)
        time.sleep(0.3)
        return self

    def __exit__(self, *a):
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        if self.p.poll() is None:
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True)
                self.p.kill()


def main():
    top = tempfile.mkdtemp(prefix="bench_standalone.", dir=os.environ.get("BENCH_DIR", "/tmp"))
    out = {"ranks": NP, "rounds": ROUNDS, "patterns": {}}
    try:
        for pat in ("a", "c"):
            runs = {True: [], False: []}
            keep = os.path.join(top, f"keep_{pat}")
            os.makedirs(keep)
            for r in range(ROUNDS):
                for fin in (True, False):  # interleaved
                    d = os.path.join(top, f"{pat}{r}{int(fin)}")
                    os.makedirs(d)
                    res = run_close(d, pat, fin)
                    log(pat, r, res)
                    runs[fin].append(res)
                    if r == ROUNDS - 1 and fin:
                        shutil.move(os.path.join(d, f"close_{pat}.h5"), os.path.join(keep, "f.h5"))
                    shutil.rmtree(d)
            med = {fin: statistics.median(x["close_s"] for x in runs[fin]) for fin in runs}
            res = {"data_bytes": runs[True][0]["data_bytes"],
                   "close_s_finalized": [x["close_s"] for x in runs[True]],
                   "close_s_not_finalized": [x["close_s"] for x in runs[False]],
                   "write_flush_s": [x["write_flush_s"] for x in runs[True] + runs[False]],
                   "file_bytes_finalized": runs[True][-1]["file_bytes"],
                   "file_bytes_not_finalized": runs[False][-1]["file_bytes"],
                   "allocated_bytes_finalized": runs[True][-1]["allocated_bytes"],
                   "allocated_bytes_not_finalized": runs[False][-1]["allocated_bytes"]}
            res["finalize_cost_s"] = round(med[True] - med[False], 4)
            res["finalize_MBps"] = round(res["data_bytes"] / max(1e-9, med[True] - med[False]) / 1e6, 1)
            res["ratio_close_time"] = round(med[True] / med[False], 2)
            res["ratio_allocated_bytes"] = round(res["allocated_bytes_finalized"] / res["allocated_bytes_not_finalized"], 3)
            f = os.path.join(keep, "f.h5")
            reads = {}
            drop_caches()
            reads["plain_cold"] = read_all(f)
            reads["plain_warm"] = read_all(f)
            mnt = os.path.join(top, "mnt")
            drop_caches()
            with Mount(keep, mnt):
                reads["mount_cold"] = read_all(os.path.join(mnt, "f.h5"))
                reads["mount_warm"] = read_all(os.path.join(mnt, "f.h5"))
            res["reads"] = reads
            res["ratio_plain_over_mount_cold"] = round(reads["plain_cold"]["MBps"] / reads["mount_cold"]["MBps"], 2)
            res["ratio_plain_over_mount_warm"] = round(reads["plain_warm"]["MBps"] / reads["mount_warm"]["MBps"], 2)
            out["patterns"][pat] = res
            shutil.rmtree(keep)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
