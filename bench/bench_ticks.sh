#!/usr/bin/env bash
# bench/bench_ticks.sh BUILD — the ticks tree's costs (JSON).
#
# Writes a file of N one-row ticks (bench/bench_flushes.c), mounts it, and
# times, over ROUNDS rounds each: listing MNT/.h5logfs-ticks/FILE (all N
# names; the issue's target is under a second at 10^5), a first open and
# read of an old tick's variable with h5py, and the same read of the newest
# tick through the file's own name — the baseline, side by side. Also the
# daemon's RSS after every round (old snapshots are freed when unused: it
# must not grow with the ticks opened). BENCH_TICKS sets N (default 100000).
set -euo pipefail
BUILD=${1:-build}
N=${BENCH_TICKS:-100000}
ROUNDS=${BENCH_ROUNDS:-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d ${BENCH_DIR:-/tmp}/h5log-ticks.XXXXXX)
pid=""
cleanup() { fusermount3 -u "$dir/mnt" 2>/dev/null || fusermount3 -uz "$dir/mnt" 2>/dev/null || true
            [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/src" "$dir/mnt"
mpirun --oversubscribe -np 2 "$BUILD/bench/bench_flushes" "$dir/src/f.h5" "$N" >/dev/null
"$BUILD/bin/h5logfs" "$dir/src" "$dir/mnt" -f -o tick=0.1 2>"$dir/err" &
pid=$!
for i in $(seq 100); do grep -q " $dir/mnt " /proc/mounts && break; sleep 0.1; done
/usr/bin/python3 - "$dir/mnt" "$N" "$ROUNDS" "$pid" <<'PY'
import json, os, statistics, sys, time
import h5py, numpy as np
mnt, n, rounds, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
d = os.path.join(mnt, ".h5logfs-ticks", "f.h5")
def rss():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS"))
def read(path):
    t = time.monotonic()
    with h5py.File(path, "r") as f:
        v = f["v"][...]
    return time.monotonic() - t, v.shape[0]
os.listdir(d)  # loads the file once: the rounds measure the listing, not the first load
lst, old, new, mem = [], [], [], []
for r in range(rounds):
    t = time.monotonic(); names = os.listdir(d); lst.append(time.monotonic() - t)
    assert len(names) == n, len(names)
    k = (r + 1) * n // (rounds + 2)          # a different old tick each round
    dt, rows = read(os.path.join(d, f"{k}.h5")); old.append(dt)
    assert rows == k, (rows, k)
    dt, rows = read(os.path.join(mnt, "f.h5")); new.append(dt)
    assert rows == n
    mem.append(rss())
med = statistics.median
print(json.dumps({
    "ticks": n, "rounds": rounds,
    "list_s": {"median": med(lst), "min": min(lst), "max": max(lst)},
    "old_tick_open_read_s": {"median": med(old), "min": min(old), "max": max(old)},
    "newest_open_read_s": {"median": med(new), "min": min(new), "max": max(new)},
    "old_over_newest": med(old) / med(new),
    "daemon_rss_bytes_per_round": mem,
}, indent=1))
PY
