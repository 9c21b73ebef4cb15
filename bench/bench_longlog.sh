#!/usr/bin/env bash
# bench/bench_longlog.sh BUILD — first open of long logs (JSON).
#
# Writes logs of BENCH_TICKS ticks (default 10^4 10^5 10^6) with
# bench_flushes (one rank, one 64-float row per tick, ~180 B of log per
# tick; index checkpoints at the writer's default, or every BENCH_CKPT
# ticks), then opens each BENCH_ROUNDS times (default 5) with bench_longlog
# built against this tree's reader ("new", starting from the checkpoints),
# the same reader ignoring them ("full", H5L_READER_FULL: what main's
# reader does) and, interleaved, against the reader of BENCH_BASE (a git
# revision, default the commit before the long-log work; "none" skips it),
# and reports medians: open wall and CPU time, RSS per tick, and their
# ratios new/base and new/full. The machine is shared, so CPU time is the
# steadier number. With BENCH_DAEMON=1 (default) it also mounts each log's
# directory with h5logfs and times the first lookup plus a read of one value
# (h5py, under the mount), and the daemon's RSS growth per tick. With
# BENCH_STEP_ATTR=1 every tick also sets a global attribute (bench_flushes
# --step-attr, as models stamp their step); "lazy" is this tree's reader
# opened as the daemon opens it (H5L_READER_LAZY_ATTRS: such segments from
# their summaries' last values), "new" reads them at open.
# Files go to BENCH_DIR (default /tmp: the base reader looks for holes once
# per tick, which on tmpfs is quadratic).
set -euo pipefail
BUILD=${1:-build}
TICKS=${BENCH_TICKS:-"10000 100000 1000000"}
ROUNDS=${BENCH_ROUNDS:-5}
BASE=${BENCH_BASE:-3bc6f65}
DAEMON=${BENCH_DAEMON:-1}
STEP_ATTR=$([ "${BENCH_STEP_ATTR:-0}" = 1 ] && echo 1 || true)
PY=${PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d ${BENCH_DIR:-/tmp}/h5log-longlog.XXXXXX)
pid=""
cleanup() { [ -d "$dir/mnt" ] && { fusermount3 -u "$dir/mnt" 2>/dev/null || fusermount3 -uz "$dir/mnt" 2>/dev/null || true; }
            [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
CC=${CC:-cc}
cflags="-O2 -g -std=c11 -D_GNU_SOURCE"
$CC $cflags -DBENCH_CKPT -Ilibcore/include bench/bench_longlog.c "$BUILD/libh5lcore.a" -lxxhash -lpthread -lm -o "$dir/new"
$CC $cflags -DBENCH_CKPT -DBENCH_FULL -Ilibcore/include bench/bench_longlog.c "$BUILD/libh5lcore.a" -lxxhash -lpthread -lm \
    -o "$dir/full"
$CC $cflags -DBENCH_CKPT -DBENCH_LAZY -Ilibcore/include bench/bench_longlog.c "$BUILD/libh5lcore.a" -lxxhash -lpthread -lm \
    -o "$dir/lazy"
if [ "$BASE" != none ]; then
    mkdir -p "$dir/base"
    git archive "$BASE" libcore | tar -x -C "$dir/base"
    # the reader side of the base: its flat libcore/src, or (since libcore
    # was grouped into folders) its base/, format/ and read/ folders
    b="$dir/base/libcore/src"
    if [ -d "$b/read" ]; then
        srcs=$(ls "$b"/base/*.c "$b"/format/*.c "$b"/read/*.c)
        incs=$(for d in "$b"/*/; do printf -- '-I%s ' "${d%/}"; done)
    else
        srcs=$(ls "$b"/*.c | grep -Ev '/(writer|anchor|canon|h5type)\.c$')
        incs="-I$b"
    fi
    $CC $cflags -I"$dir/base/libcore/include" $incs bench/bench_longlog.c $srcs \
        -lxxhash -lpthread -lm -o "$dir/base/bl"
fi
for n in $TICKS; do
    mkdir -p "$dir/src$n"
    ${BENCH_CKPT:+env H5L_CKPT_TICKS=$BENCH_CKPT} mpirun --oversubscribe -np 1 "$BUILD/bench/bench_flushes" \
        "$dir/src$n/t.h5" "$n" ${STEP_ATTR:+--step-attr} >/dev/null
done
out="$dir/runs.jsonl"
: > "$out"
rss() { awk '/VmRSS/ {print $2 * 1024}' /proc/$1/status; }
daemon_round() { # n -> {"ticks", "lookup_read_ms", "daemon_rss_delta_bytes"}
    local n=$1
    mkdir -p "$dir/mnt"
    "$BUILD/bin/h5logfs" "$dir/src$n" "$dir/mnt" -f 2>/dev/null &
    pid=$!
    for i in $(seq 200); do grep -q " $dir/mnt " /proc/mounts && break; sleep 0.05; done
    local before=$(rss $pid)
    local ms=$($PY -c "
import time, h5py, sys
t0 = time.monotonic()
f = h5py.File(sys.argv[1], 'r')
x = f['v'][$n - 1, 1]
t1 = time.monotonic()
assert abs(x - ($n - 1 + 1e-3)) < 1e-2 * max(1, $n / 1e5), x
print('%.3f' % ((t1 - t0) * 1e3))" "$dir/mnt/t.h5")
    local after=$(rss $pid)
    fusermount3 -u "$dir/mnt"; wait $pid || true; pid=""
    echo "{\"daemon\": 1, \"ticks\": $n, \"lookup_read_ms\": $ms, \"daemon_rss_delta_bytes\": $((after - before))}"
}
for r in $(seq "$ROUNDS"); do
    for n in $TICKS; do
        # drop nothing from the page cache: every round measures a warm open
        echo "{\"which\": \"new\", $(tail -c +2 <<< "$("$dir/new" "$dir/src$n/t.h5")")" >> "$out"
        echo "{\"which\": \"full\", $(tail -c +2 <<< "$("$dir/full" "$dir/src$n/t.h5")")" >> "$out"
        echo "{\"which\": \"lazy\", $(tail -c +2 <<< "$("$dir/lazy" "$dir/src$n/t.h5")")" >> "$out"
        if [ "$BASE" != none ]; then
            echo "{\"which\": \"base\", $(tail -c +2 <<< "$("$dir/base/bl" "$dir/src$n/t.h5")")" >> "$out"
        fi
        if [ "$DAEMON" = 1 ]; then daemon_round "$n" >> "$out"; fi
    done
done
$PY - "$out" "$BASE" "$ROUNDS" "${STEP_ATTR:-0}" <<'PY'
import json, sys, statistics as st
rows = [json.loads(l) for l in open(sys.argv[1])]
base, rounds = sys.argv[2], int(sys.argv[3])
res = {"benchmark": "longlog", "rounds": rounds, "base": base, "step_attr": sys.argv[4] == "1", "sizes": []}
for n in sorted({r["ticks"] for r in rows}):
    e = {"ticks": n}
    for which in ("new", "lazy", "full", "base"):
        rs = [r for r in rows if r.get("which") == which and r["ticks"] == n]
        if not rs:
            continue
        assert all(r["ok"] for r in rs), rs
        e[which] = {k: round(st.median(r[k] for r in rs), 3)
                    for k in ("open_ms", "open_cpu_ms", "first_read_ms", "bytes_per_tick", "ckpt_last")
                    if k in rs[0]}
    e["ratio_new_full"] = {k: round(e["new"][k] / e["full"][k], 3) if e["full"][k] else None
                           for k in ("open_ms", "open_cpu_ms", "bytes_per_tick")}
    e["ratio_lazy_new"] = {k: round(e["lazy"][k] / e["new"][k], 3) if e["new"][k] else None
                           for k in ("open_ms", "open_cpu_ms", "bytes_per_tick")}
    if "base" in e:
        e["ratio_new_base"] = {k: round(e["new"][k] / e["base"][k], 3) if e["base"][k] else None
                               for k in ("open_ms", "open_cpu_ms", "bytes_per_tick")}
    ds = [r for r in rows if r.get("daemon") and r["ticks"] == n]
    if ds:
        e["daemon"] = {"lookup_read_ms": round(st.median(r["lookup_read_ms"] for r in ds), 3),
                       "rss_bytes_per_tick": round(st.median(r["daemon_rss_delta_bytes"] for r in ds) / n, 1)}
    res["sizes"].append(e)
print(json.dumps(res, indent=1))
PY
