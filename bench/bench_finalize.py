"""bench_finalize.py BUILD — does finalizing at close cost time linear in the
bytes? (make bench-finalize; the target: "4x the bytes, <= 4.4x the time,
for every chunking in bench-seed from 64 MiB to 2 GiB").

A float32 cube [N,N,N] written by BENCH_NP ranks (default 2) as bands of
dimension 0 (bench/seed/pattern.py band()), one h5l_put and one h5l_flush
each, then h5l_close: BUILD/bench/bench_finalize (bench/bench_finalize.c)
closes one file with finalizing (the default) and one with
h5l_opts_t.no_finalize, the same data; the finalizing cost is the
difference of the two h5l_close times (each the maximum over ranks).
Every chunking of bench-seed's x256 and x512 setups (bench/seed/setups.py)
at every size, in BENCH_ROUNDS interleaved rounds (round 1 runs every case
once, then round 2, ...), medians. Files go to BENCH_DIR (default /tmp: a
finalized 2 GiB file holds its data twice; /dev/shm would hold 8 GiB at
the largest size) and are removed after each run. The page cache is not
dropped and nothing is synced: the finalizer reads the log from the page
cache and its writes stay in it, as in a close right after the last
flush; before each timed close the ranks warm the memory it will take
(bench_finalize.c warm_memory; BENCH_WARM=0: not).

Ratios: for each pair of sizes 4x apart in bytes (within 3.5x..4.5x; for
each size the smaller one closest to 4x), time(larger) / time(smaller) of
the finalizing cost's medians; the target is met when it is at most 1.1x
the bytes ratio (4.4 for exactly 4x), or when the larger size's cost is
below BENCH_FLOOR_S (default 0.05 s: a finalize that keeps every chunk in
place costs an index entry per chunk, and the difference of two closes of
a few milliseconds is noise, not a ratio); a smaller size's cost not
above 0 gives no ratio, and the target is then not met unless the larger
one is below the floor too (note says which). Each ratio also gives the
ratio of the bytes finalizing copied (fin_bytes: the /_h5log/fin.K
datasets), of the whole close with finalizing and of finalize_cpu_s
(cpu_ratio: near the bytes ratio when the time ratio is not, the time went
to waiting for a core or for I/O, not to work), for information.

Per chunking and size: finalize_s (median) and its MB/s; finalize_cpu_s,
the same difference in CPU seconds, the largest of the ranks' (the wall
time less what a rank spent off its core, preempted by other processes or
blocked; a rank waiting for another in MPI spins, and that counts); the
close with finalizing (close_fin_s; per rank its wall and CPU seconds: a
rank whose CPU is far below its wall time waited, for a core or for I/O;
and the machine's CPU seconds meanwhile, close_fin_machine_cpu_s: user,
system, idle, iowait, steal from /proc/stat, all CPUs: user + system well
above the ranks' CPU is other processes, idle + iowait the ranks blocked);
the close without; write_flush_s; what finalizing made (fin_layout,
fin_chunk: /x as libhdf5 sees it; fin_bytes, copied_fraction: the bytes
of fin.K over the data's) and the file sizes.

Output: one JSON document on stdout, progress on stderr. Environment:
  BENCH_SIZES      cube edges N (default "256 406 512 645 812": 64 MiB,
                   256 MiB, 512 MiB, 1 GiB, 2 GiB of float32)
  BENCH_CHUNKINGS  chunk shapes separated by spaces or ';', N standing for
                   the cube's edge, each length at most N (a larger one is
                   cut to N), or "default" (contiguous). Default
                   "N,N,1 N,N,8 N,N,64 64,64,64 default"
  BENCH_ROUNDS     interleaved rounds (3)
  BENCH_NP         MPI ranks (2)
  BENCH_DIR        where the files go (/tmp)
  BENCH_WARM       0: --cold (no warm-up before the timed closes)
  BENCH_VERIFY     1: each finalized file read back with plain libhdf5 and
                   checked (untimed; slow at the large sizes)
  BENCH_SYNC       1: the file system synced (syncfs) after the flush,
                   before the warm-up and the timed close: no writeback of
                   the log's dirty pages during the close
  BENCH_FLOOR_S    the noise floor above (0.05)
  BENCH_MPIRUN_ARGS  extra mpirun arguments
"""
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
BIN = os.path.join(BUILD, "bench", "bench_finalize")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           # 2 ranks on 2 cores, and more with BENCH_NP: yield when idle (bench_write.sh)
           OMPI_MCA_mpi_yield_when_idle=os.environ.get("OMPI_MCA_mpi_yield_when_idle", "1"))
SIZES = [int(x) for x in re.split(r"[\s,]+", os.environ.get("BENCH_SIZES", "256 406 512 645 812").strip()) if x]
CHUNKINGS = [x for x in re.split(r"[\s;]+", os.environ.get(
    "BENCH_CHUNKINGS", "N,N,1 N,N,8 N,N,64 64,64,64 default").strip()) if x]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
NP = int(os.environ.get("BENCH_NP", "2"))
DIR = os.environ.get("BENCH_DIR", "/tmp")
WARM = os.environ.get("BENCH_WARM", "1") != "0"
VERIFY = os.environ.get("BENCH_VERIFY", "0") == "1"
SYNC = os.environ.get("BENCH_SYNC", "0") == "1"
FLOOR = float(os.environ.get("BENCH_FLOOR_S", "0.05"))
MPIRUN_ARGS = shlex.split(os.environ.get("BENCH_MPIRUN_ARGS", ""))
SLACK = 1.1  # time ratio <= 1.1 x bytes ratio: 4.4 for 4x the bytes
PAIR_RANGE = (3.5, 4.5)  # "4x apart"


def log(*a):
    print("bench_finalize.py:", *a, file=sys.stderr, flush=True)


def chunk_of(spec, n):
    """The chunk shape of spec at edge n: a list, or None (contiguous)."""
    if spec == "default":
        return None
    parts = spec.split(",")
    if len(parts) != 3:
        raise SystemExit(f"bench_finalize.py: chunking {spec!r}: three lengths (N for the edge) or 'default'")
    out = []
    for p in parts:
        v = n if p.strip().upper() == "N" else int(p)
        if v < 1:
            raise SystemExit(f"bench_finalize.py: chunking {spec!r}: lengths are at least 1")
        out.append(min(v, n))
    return out


def label(nbytes):
    """64MiB, 1GiB, ...: the nearest power of two when within 1% of one."""
    p2 = 2 ** round(math.log2(nbytes)) if nbytes > 0 else 1
    v = p2 if abs(nbytes / p2 - 1) < 0.01 else nbytes
    for unit, sh in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 1 << sh:
            return "%g%s" % (round(v / (1 << sh), 1), unit)
    return f"{v}B"


def run_one(n, spec, rnd):
    d = tempfile.mkdtemp(prefix="h5log-bench-finalize.", dir=DIR)
    try:
        c = chunk_of(spec, n)
        cmd = ["mpirun", "--oversubscribe", "-np", str(NP), *MPIRUN_ARGS, BIN, "--dir", d, "--n", str(n),
               "--chunk", "default" if c is None else ",".join(map(str, c))]
        # alternate which file is closed first: the second process-local
        # run starts from memory the first one used
        cmd += ["--modes", "nofin,fin" if rnd % 2 == 0 else "fin,nofin"]
        if not WARM:
            cmd.append("--cold")
        if VERIFY:
            cmd.append("--verify")
        if SYNC:
            cmd.append("--sync")
        p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=1800)
        lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
        if p.returncode != 0 or not lines:
            log(f"{' '.join(cmd)} failed (status {p.returncode}):\n{p.stdout}{p.stderr}")
            raise SystemExit(1)
        return json.loads(lines[-1])
    finally:
        shutil.rmtree(d, ignore_errors=True)


def med(xs):
    return statistics.median(xs) if xs else None


def rnd6(x):
    return None if x is None else round(x, 6)


def main():
    if not os.access(BIN, os.X_OK):
        log(f"{BIN} is not built (make {os.path.relpath(BIN)})")
        return 1
    if not SIZES or not CHUNKINGS or ROUNDS < 1:
        log("nothing to run (BENCH_SIZES, BENCH_CHUNKINGS, BENCH_ROUNDS)")
        return 1
    sizes = sorted(set(SIZES))
    with open("/proc/loadavg") as f:
        load_before = " ".join(f.read().split()[:3])
    t_start = time.monotonic()
    runs = {}  # (spec, n) -> [run...]
    for r in range(ROUNDS):
        for spec in CHUNKINGS:
            for n in sizes:
                res = run_one(n, spec, r)
                res["round"] = r + 1
                runs.setdefault((spec, n), []).append(res)
                log(f"round {r + 1}/{ROUNDS} chunking {spec} N={n}: close fin {res['modes']['fin']['close_s']:.4f} s, "
                    f"nofin {res['modes']['nofin']['close_s']:.4f} s, finalize {res['finalize_s']:.4f} s")
    with open("/proc/loadavg") as f:
        load_after = " ".join(f.read().split()[:3])

    labels = {}
    for n in sizes:
        lab = label(4 * n ** 3)
        labels[n] = lab if lab not in labels.values() else f"N{n}"
    # pairs 4x apart: for each size the smaller one closest to 4x
    pairs = []
    for j, b in enumerate(sizes):
        best = None
        for a in sizes[:j]:
            q = b ** 3 / a ** 3
            if PAIR_RANGE[0] <= q <= PAIR_RANGE[1] and (best is None or abs(q - 4) < abs(b ** 3 / best ** 3 - 4)):
                best = a
        if best is not None:
            pairs.append((best, b))

    doc = {
        "benchmark": "bench_finalize",
        "target": "finalize cost grows linearly: 4x the bytes, <= 4.4x the time, for every chunking in bench-seed "
                  "from 64 MiB to 2 GiB (here: time ratio <= %.1f x bytes ratio, or the larger size's cost below "
                  "floor_s)" % SLACK,
        "what": "float32 [N,N,N] written by each rank as a band of dimension 0 (one h5l_put, one h5l_flush); "
                "finalize_s = h5l_close with finalizing - h5l_close with no_finalize (each the max over ranks, "
                "separate files, same data)",
        "nranks": NP,
        "rounds": ROUNDS,
        "statistic": "median over interleaved rounds (finalize_s: median of the per-round differences); "
                     "ranges are min..max",
        "dir": DIR,
        "page_cache": "not dropped (the log is read from the page cache); %s; files removed after each run"
                      % ("synced (syncfs) before each timed close" if SYNC else "nothing synced"),
        "warm": WARM,
        "floor_s": FLOOR,
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "seconds_total": round(time.monotonic() - t_start, 1),
        "sizes": {labels[n]: {"n": n, "bytes": 4 * n ** 3} for n in sizes},
        "pairs": ["%s->%s" % (labels[a], labels[b]) for a, b in pairs],
        "chunkings": {},
    }
    all_met = True
    checked = 0
    for spec in CHUNKINGS:
        e = {"by_size": {}, "ratios": {}, "targets_met": {}}
        for n in sizes:
            rs = runs[(spec, n)]
            fin = [x["modes"]["fin"] for x in rs]
            nof = [x["modes"]["nofin"] for x in rs]
            fz = [x["finalize_s"] for x in rs]
            # CPU: max over ranks of (close with - close without finalizing)
            fc = [max(a - b for a, b in zip(x["modes"]["fin"]["close_cpu_rank_s"], x["modes"]["nofin"]["close_cpu_rank_s"]))
                  for x in rs]
            nbytes = rs[0]["data_bytes"]
            mf = med(fz)
            mc = med([x["close_s"] for x in fin])
            e["by_size"][labels[n]] = {
                "n": n,
                "chunk": rs[0]["chunk"],
                "bytes": nbytes,
                "finalize_s": rnd6(mf),
                "finalize_s_every_round": [rnd6(x) for x in fz],
                "finalize_MBps": round(nbytes / mf / 1e6, 1) if mf and mf > 0 else None,
                "finalize_cpu_s": rnd6(med(fc)),
                "close_fin_s": rnd6(mc),
                "close_fin_s_range": [rnd6(min(x["close_s"] for x in fin)), rnd6(max(x["close_s"] for x in fin))],
                "close_fin_MBps": round(nbytes / mc / 1e6, 1) if mc and mc > 0 else None,
                "close_fin_rank_s": [rnd6(med([x["close_rank_s"][q] for x in fin])) for q in range(NP)],
                "close_fin_cpu_rank_s": [rnd6(med([x["close_cpu_rank_s"][q] for x in fin])) for q in range(NP)],
                "close_fin_machine_cpu_s": {k: round(med([x["close_machine_cpu_s"][k] for x in fin]), 2)
                                            for k in fin[0]["close_machine_cpu_s"]},
                "close_nofin_s": rnd6(med([x["close_s"] for x in nof])),
                "write_flush_s": rnd6(med([x["write_flush_s"] for x in fin + nof])),
                "fin_layout": fin[0]["layout"],
                "fin_chunk": fin[0]["chunk"],
                "fin_bytes": fin[0]["fin_bytes"],
                "copied_fraction": round(fin[0]["fin_bytes"] / nbytes, 4),
                "file_bytes_fin": fin[0]["file_bytes"],
                "file_bytes_nofin": nof[0]["file_bytes"],
                "allocated_bytes_fin": fin[0]["allocated_bytes"],
                "allocated_bytes_nofin": nof[0]["allocated_bytes"],
                "verified": None if not VERIFY else all(x["verified"] is True for x in fin),
            }
        for a, b in pairs:
            sa, sb = e["by_size"][labels[a]], e["by_size"][labels[b]]
            bq = sb["bytes"] / sa["bytes"]
            limit = SLACK * bq
            ta, tb = sa["finalize_s"], sb["finalize_s"]
            tq = tb / ta if ta and ta > 0 else None
            below = tb is not None and tb < FLOOR
            ok = below or (tq is not None and tq <= limit)
            per = [y["finalize_s"] / x["finalize_s"] for x, y in zip(runs[(spec, a)], runs[(spec, b)])
                   if x["finalize_s"] > 0]
            cq = sb["close_fin_s"] / sa["close_fin_s"] if sa["close_fin_s"] else None
            ua, ub = sa["finalize_cpu_s"], sb["finalize_cpu_s"]
            uq = ub / ua if ua and ua > 0 else None
            fq = sb["fin_bytes"] / sa["fin_bytes"] if sa["fin_bytes"] else None
            key = "%s->%s" % (labels[a], labels[b])
            if below:
                note = "the larger size's cost is below floor_s: no growth to measure"
            elif tq is None:
                note = "the smaller size's cost is not above 0 (every chunk in place: the two closes differ by " \
                       "noise): no ratio, growth from nothing to %.3f s" % tb
            else:
                note = None
            e["ratios"][key] = {
                "n": [a, b],
                "bytes_ratio": round(bq, 4),
                "time_ratio": round(tq, 3) if tq is not None else None,
                "time_ratio_per_round": [round(min(per), 3), round(max(per), 3)] if per else None,
                "limit": round(limit, 3),
                "below_floor": below,
                "met": ok,
                "note": note,
                "close_fin_time_ratio": round(cq, 3) if cq else None,
                "cpu_ratio": round(uq, 3) if uq is not None else None,
                "fin_bytes_ratio": round(fq, 3) if fq else None,
            }
            e["targets_met"]["%s: time ratio <= %.2f" % (key, limit)] = ok
            all_met = all_met and ok
            checked += 1
        doc["chunkings"][spec] = e
    doc["ratios_checked"] = checked
    doc["all_targets_met"] = all_met if checked else None
    if VERIFY:
        doc["verified"] = all(s["verified"] for e in doc["chunkings"].values() for s in e["by_size"].values())
    print(json.dumps(doc, indent=2))
    # a table on stderr
    for spec, e in doc["chunkings"].items():
        log("%-10s " % spec + "  ".join("%s %.3fs" % (k, v["finalize_s"]) for k, v in e["by_size"].items()))
        for k, v in e["ratios"].items():
            log("%-10s   %s: %s (limit %.2f)%s" % ("", k, v["time_ratio"], v["limit"],
                                                   " met" if v["met"] else " NOT MET"))
    return 0 if not VERIFY or doc["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
