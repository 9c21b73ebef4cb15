#!/usr/bin/env bash
# bench_read.sh BUILD — read benchmark of h5logfs: reading a big variable
# through the daemon's mount against reading the canonical file that
# h5logreplay writes (the baseline) on the local disk, with h5py and with
# plain serial libhdf5 (BUILD/bench/readvar), in one run on one machine.
#
# Steps, in a temporary directory (under $BENCH_DIR, default /tmp):
#   1. mpirun -np 4 BUILD/bench/mkbig src/big.h5 --gib $BENCH_GIB: one float32
#      variable /x [N,1024,512] (N = 512 per GiB) in log layout;
#      BUILD/bin/h5logreplay src/big.h5 base/big.h5: the baseline.
#   2. Sequential reads of the whole variable in 64 MiB slabs along dim 0,
#      for each reader (h5py: x[i0:i1]; readvar: H5Dread):
#        baseline_cold  page cache dropped (sync; echo 3 > drop_caches)
#        baseline_warm  the same again (second read: page cache warm)
#        mount_cold     the daemon remounted (its chunk cache empty), page
#                       cache dropped, read through MNT/big.h5
#        mount_warm     the same again (kernel page cache of the snapshot
#                       inode warm: keep_cache)
#        *_warm2        a third read of each (reported as information: the
#                       steady state of a page cache, see ratios_info)
#   3. Strided h5py reads, cold (remount + drop) then warm (repeated at once):
#      x[i,:,:] for a few i (single 2 MiB rows, first: they are latency) and
#      x[:,:,k] for a few k (libhdf5 sieves the whole variable in 64 KiB
#      reads for each; the first one is the cold one).
#   (Before 2: one untimed cold read of each file, so that no timed run is
#   the first read of a file just written; see "Settling pass" below.)
#   4. References: cold 1 MiB read() of the log file and of the baseline file
#      (the disk ceiling of the skip path and of the baseline).
#   5. Untimed checks: every sequential read's checksum (sum of 64-bit
#      words) agrees across readers and files, and sample rows through the
#      mount equal the formula x[i,j,k] = float32(i*0.5 + j + k*1e-3).
# The daemon runs as `h5logfs SRC MNT -f -o tick=0.1,stats[,cache_size=S]`
# (0.3 s after mounting, so its ticker has raised the mount's readahead).
# Per timed run the JSON keeps: the daemon's CPU time (utime+stime of
# /proc/PID/stat) and its statistics (MNT/.h5logfs-stats: cache lookups,
# bytes skipped past the cache or assembled, FUSE reads), as a difference
# when the run shares a mount with the previous one; the reader process's
# CPU time (untimed parts such as imports and checksums included); and the
# busy fraction of all CPUs (/proc/stat), which shows other load.
#
# Output: progress on stderr, one JSON document on stdout: every time
# (CLOCK_MONOTONIC), MB/s (1e6 bytes/s), daemon CPU and cache statistics,
# and the ratios mount/baseline (throughput, so higher is better) against
# their targets: cold >= 0.8, warm >= 0.9, strided (cold set) >= 0.5; each
# ratio is of the fastest runs, with the ratio of the median runs beside it.
# Exit status 1 if any check of the data fails; unmet targets are only
# reported.
#
# Validity (the machine may be shared, and its page cache is not ours): a
# run during which the kernel's drop_pagecache count (/proc/vmstat) grows
# was disturbed by another process's drop_caches; a warm run whose file is
# not >= 99% resident (fincore) before and after it was not warm. Such runs
# are marked "valid": false with the reason, every ratio says whether both
# of its runs were valid, and BENCH_REPS > 1 keeps the fastest valid run.
#
# Environment:
#   BENCH_GIB         size of /x in GiB (default 2; 0.25 for a quick run)
#   BENCH_NP          writer ranks (default 4)
#   BENCH_CHUNKED     1: write /x chunked [16,256,512] (mkbig --chunked)
#   BENCH_CACHE_SIZE  the daemon's cache_size= (default: the daemon's own)
#   BENCH_KS          k values of x[:,:,k] (default "0 257 511")
#   BENCH_REPS        repetitions of steps 2 and 3 (default 1); per phase the
#                     fastest valid run is reported, with every run's time
#   BENCH_DIR         parent of the temporary directory (default /tmp)
#   BENCH_KEEP        1: keep the temporary directory (its path on stderr)
#   PY                python with h5py and numpy (default /usr/bin/python3)
set -euo pipefail

build=${1:-build}
py=${PY:-/usr/bin/python3}
gib=${BENCH_GIB:-2}
np_=${BENCH_NP:-4}
chunked=${BENCH_CHUNKED:-0}
cache_size=${BENCH_CACHE_SIZE:-}
ks=${BENCH_KS:-0 257 511}
reps=${BENCH_REPS:-1}
rep=1
mkbig=$build/bench/mkbig
readvar=$build/bench/readvar
replay=$build/bin/h5logreplay
daemon=$build/bin/h5logfs
tck=$(getconf CLK_TCK)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for b in "$mkbig" "$readvar" "$replay" "$daemon"; do
    if [ ! -x "$b" ]; then
        echo "bench_read.sh: $b is not built (make all $build/bench/mkbig $build/bench/readvar)" >&2
        exit 1
    fi
done
if [ "$(id -u)" != 0 ] || ! { sync; echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    echo "bench_read.sh: cannot drop the page cache (needs root): cold runs would be warm" >&2
    exit 1
fi

work=$(mktemp -d "${BENCH_DIR:-/tmp}/h5log-rbench.XXXXXX")
src=$work/src
base=$work/base
mnt=$work/mnt
mkdir "$src" "$base" "$mnt" "$work/stats"
results=$work/results.jsonl
: >"$results"
dpid=
last_drops=

log() { echo "bench_read.sh: $*" >&2; }

# Unmount and reap the daemon (only the one this script started).
stop_daemon() {
    if mountpoint -q "$mnt"; then
        fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
    fi
    if [ -n "$dpid" ]; then
        for _ in $(seq 100); do
            kill -0 "$dpid" 2>/dev/null || break
            sleep 0.05
        done
        if kill -0 "$dpid" 2>/dev/null; then
            log "daemon $dpid did not exit after unmount: killing it"
            kill "$dpid" 2>/dev/null || true
        fi
        wait "$dpid" 2>/dev/null || true
        dpid=
    fi
}
cleanup() {
    set +e
    stop_daemon
    if [ "${BENCH_KEEP:-0}" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

drop_caches() {
    sync
    echo 3 >/proc/sys/vm/drop_caches
    last_drops=$(drops)
}

# utime+stime of a process, in clock ticks (fields 14 and 15 of stat).
cpu_ticks() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    echo $((${12} + ${13}))
}

session=0
start_daemon() {
    session=$((session + 1))
    local opts="tick=0.1,stats"
    if [ -n "$cache_size" ]; then opts+=",cache_size=$cache_size"; fi
    "$daemon" "$src" "$mnt" -f -o "$opts" >"$work/daemon.$session.out" 2>"$work/daemon.$session.err" &
    dpid=$!
    for _ in $(seq 200); do
        if mountpoint -q "$mnt"; then
            # the ticker raises the mount's read_ahead_kb at its first tick:
            # let it, as it has for any reader that comes later than 0.1 s
            sleep 0.3
            return 0
        fi
        if ! kill -0 "$dpid" 2>/dev/null; then break; fi
        sleep 0.05
    done
    log "the daemon did not mount $mnt:"
    cat "$work/daemon.$session.err" >&2
    exit 1
}
remount() {
    stop_daemon
    start_daemon
}

# Page-cache bytes of a file (fincore), and the kernel's count of
# drop_caches writes: one that grows during a timed run means another
# process dropped the page cache under it (this machine may be shared).
resident() { fincore -nb "$1" 2>/dev/null | awk 'NR == 1 {print $1}' | grep . || echo null; }
drops() { awk '$1 == "drop_pagecache" {print $2}' /proc/vmstat; }
# busy and total jiffies of all CPUs (busy = all but idle and iowait)
cpustat() { awk '$1 == "cpu" {t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit}' /proc/stat; }

# measure NAME WHERE(mount|base) KIND(cold|warm|-) FILE CMD...: run CMD and
# keep its last JSON line, with: the daemon's CPU ticks meanwhile and (mount)
# its statistics after; the page-cache residency of FILE before (warm runs:
# a cold run must not open the mount early) and after; external drops.
measure() {
    local name=$1 where=$2 kind=$3 file=$4 c0=0 c1=0 out line ra=null rb=null d0 d1
    shift 4
    if [ "$kind" = warm ]; then rb=$(resident "$file"); fi
    if [ "$where" = mount ]; then
        c0=$(cpu_ticks "$dpid")
        ra=$(cat "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb" 2>/dev/null || echo null)
    fi
    d0=$(drops)
    if [ -z "$last_drops" ]; then last_drops=$d0; fi
    local s0 s1
    s0=$(cpustat)
    # the subshell's cutime+cstime (stat fields 16, 17) once CMD is reaped:
    # the reader's CPU time, in clock ticks
    if ! out=$(p=$BASHPID && "$@" && printf '@@CPU %s\n' "$(cut -d' ' -f16,17 "/proc/$p/stat")"); then
        log "$name: $* failed"
        exit 1
    fi
    s1=$(cpustat)
    d1=$(drops)
    local ucpu busy
    ucpu=$(printf '%s\n' "$out" | awk -v t="$tck" '$1 == "@@CPU" {printf "%.2f", ($2 + $3) / t; f = 1} END {if (!f) print "null"}')
    # shellcheck disable=SC2086
    busy=$(echo $s0 $s1 | awk '{d = $4 - $2; printf "%.3f", (d > 0 ? ($3 - $1) / d : 0)}')
    local before=$((d0 - last_drops))
    last_drops=$d1
    if [ "$where" = mount ]; then
        c1=$(cpu_ticks "$dpid")
        cat "$mnt/.h5logfs-stats" >"$work/stats/$name.r$rep.txt"
    fi
    line=$(printf '%s\n' "$out" | grep '^{' | tail -n 1 || true)
    if [ -z "$line" ]; then
        log "$name: no result from $*"
        exit 1
    fi
    log "  $name (rep $rep): $line"
    printf '{"name":"%s","rep":%d,"where":"%s","kind":"%s","session":%d,"daemon_cpu_ticks":%d,"read_ahead_kb":%s,"ext_drops":%d,"ext_drops_before":%d,"reader_cpu_seconds":%s,"machine_busy":%s,"resident_before":%s,"resident_after":%s,"file_bytes":%s,"result":%s}\n' \
        "$name" "$rep" "$where" "$kind" "$session" $((c1 - c0)) "$ra" $((d1 - d0)) "$before" "$ucpu" "$busy" "$rb" \
        "$(resident "$file")" "$(stat -c %s "$file")" "$line" >>"$results"
}

# The Python side: h5py readers, raw reads, checks and the report.
cat >"$work/rb.py" <<'PYEOF'
import json, os, re, sys, time
import numpy as np

MASK = (1 << 64) - 1


def wordsum(a):
    b = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    n = b.size // 8 * 8
    return int(b[:n].view(np.uint64).sum(dtype=np.uint64))


def formula(i, j, k):
    """x[i,j,k] as mkbig computes it: double, left to right, one rounding."""
    return (np.asarray(i, dtype=np.float64) * 0.5 + j + np.asarray(k, dtype=np.float64) * 1e-3).astype(np.float32)


def seq(path, var, slab_mib):
    import h5py
    t0 = time.monotonic()
    f = h5py.File(path, "r")
    x = f[var]
    shape = x.shape
    rowbytes = x.dtype.itemsize * int(np.prod(shape[1:]))
    rows = max(1, int(float(slab_mib) * 2**20) // rowbytes)
    t_open = time.monotonic() - t0
    t_read, s, nbytes, nslab = 0.0, 0, 0, 0
    for i0 in range(0, shape[0], rows):
        r0 = time.monotonic()
        a = x[i0:i0 + rows]
        t_read += time.monotonic() - r0
        s = (s + wordsum(a)) & MASK   # untimed
        nbytes += a.nbytes
        nslab += 1
        del a
    c0 = time.monotonic()
    f.close()
    t_close = time.monotonic() - c0
    secs = t_open + t_read + t_close
    print(json.dumps({"file": path, "var": var, "bytes": nbytes, "slabs": nslab,
                      "slab_bytes": rows * rowbytes, "open_seconds": round(t_open, 6),
                      "read_seconds": round(t_read, 6), "seconds": round(secs, 6),
                      "MB_per_s": round(nbytes / secs / 1e6, 1), "checksum": "%016x" % s}))


def strided(path, var, ks, iis):
    import h5py
    t0 = time.monotonic()
    f = h5py.File(path, "r")
    x = f[var]
    t_open = time.monotonic() - t0
    n, nj, nk = x.shape
    j = np.arange(nj, dtype=np.float64)
    k = np.arange(nk, dtype=np.float64)
    out = {"file": path, "open_seconds": round(t_open, 6), "row": [], "column": [], "bad": 0}
    # rows first: single contiguous 2 MiB reads, timed while still cold
    for i in iis:
        r0 = time.monotonic()
        a = x[i, :, :]
        dt = time.monotonic() - r0
        ok = np.array_equal(a, formula(i, j[:, None], k[None, :]))
        out["bad"] += 0 if ok else 1
        out["row"].append({"i": i, "seconds": round(dt, 6), "bytes": a.nbytes})
    for kk in ks:
        r0 = time.monotonic()
        a = x[:, :, kk]
        dt = time.monotonic() - r0
        ok = np.array_equal(a, formula(np.arange(n)[:, None], j[None, :], kk))
        out["bad"] += 0 if ok else 1
        out["column"].append({"k": kk, "seconds": round(dt, 6), "bytes": a.nbytes})
    f.close()
    out["row_seconds"] = round(sum(r["seconds"] for r in out["row"]), 6)
    out["column_seconds"] = round(sum(r["seconds"] for r in out["column"]), 6)
    out["seconds"] = round(t_open + out["row_seconds"] + out["column_seconds"], 6)
    print(json.dumps(out))


def raw(path):
    fd = os.open(path, os.O_RDONLY)
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    t0 = time.monotonic()
    n = 0
    while True:
        got = os.readv(fd, [mv])
        if got <= 0:
            break
        n += got
    secs = time.monotonic() - t0
    os.close(fd)
    print(json.dumps({"file": path, "bytes": n, "seconds": round(secs, 6),
                      "MB_per_s": round(n / secs / 1e6, 1)}))


def verify(path, var):
    """Sample rows and columns of the file against the formula."""
    import h5py
    with h5py.File(path, "r") as f:
        x = f[var]
        n, nj, nk = x.shape
        j = np.arange(nj, dtype=np.float64)
        k = np.arange(nk, dtype=np.float64)
        rng = np.random.default_rng(7)
        iis = sorted({0, 1, n // 2, n - 1, *map(int, rng.integers(0, n, 6))})
        bad = [i for i in iis if not np.array_equal(x[i], formula(i, j[:, None], k[None, :]))]
        jj = int(rng.integers(0, nj))
        col = x[:, jj, :]
        ok_col = np.array_equal(col, formula(np.arange(n)[:, None], jj, k[None, :]))
    print(json.dumps({"file": path, "rows_checked": iis, "bad_rows": bad,
                      "plane_j": jj, "plane_ok": bool(ok_col), "ok": not bad and bool(ok_col)}))


STATS_RE = {
    "cache": re.compile(r"limit (\d+) bytes, in use (\d+) \(peak (\d+)\), (\d+) chunks"),
    "lookups": re.compile(r"hits (\d+), waits (\d+), misses (\d+) \(hit ratio ([\d.]+)\), "
                          r"not cached (\d+), evictions (\d+)"),
    "bytes": re.compile(r"bytes assembled (\d+), served from cache (\d+), skipped past the cache (\d+)"),
}
# per-file line "file PATH: ticks N, snapshots N, ..., reads N, ...": by name,
# so that fields the daemon adds do not break the parse
FILE_FIELDS = {"ticks": "ticks", "snapshots": "snapshots", "skeletons": "skeletons",
               "records": "records", "reads": "fuse_reads"}


def parse_stats(text):
    d = {}
    m = STATS_RE["cache"].search(text)
    if m:
        d.update(limit=int(m[1]), in_use=int(m[2]), peak=int(m[3]), chunks=int(m[4]))
    m = STATS_RE["lookups"].search(text)
    if m:
        d.update(hits=int(m[1]), waits=int(m[2]), misses=int(m[3]), not_cached=int(m[5]),
                 evictions=int(m[6]))
    m = STATS_RE["bytes"].search(text)
    if m:
        d.update(bytes_assembled=int(m[1]), bytes_hit=int(m[2]), bytes_skipped=int(m[3]))
    for line in text.splitlines():
        if line.startswith("file "):
            for name, key in FILE_FIELDS.items():
                m = re.search(r"[:,] %s (\d+)" % name, line)
                if m:
                    d[key] = d.get(key, 0) + int(m[1])
    return d


def delta(after, before):
    return {k: v - before.get(k, 0) if k not in ("limit", "in_use", "peak", "chunks", "ticks", "records",
                                                 "snapshots", "skeletons")
            else v for k, v in after.items()}


def cache_view(st, bytes_read):
    """The daemon's counters over one run, with ratios. bytes_hit is the
    daemon's own count (it adds a whole block per hit, not the bytes served),
    so fractions use only bytes read past the cache or assembled."""
    lookups = st.get("hits", 0) + st.get("waits", 0) + st.get("misses", 0)
    log = st.get("bytes_assembled", 0) + st.get("bytes_skipped", 0)
    v = dict(st)
    v["hit_ratio"] = round((st.get("hits", 0) + st.get("waits", 0)) / lookups, 4) if lookups else None
    v["skipped_fraction"] = round(st.get("bytes_skipped", 0) / log, 4) if log else None
    if st.get("fuse_reads") and lookups == 0:   # skip path only: bytes per request are known
        v["avg_fuse_read_KiB"] = round(st.get("bytes_skipped", 0) / st["fuse_reads"] / 1024, 1)
    return v


def validity(r):
    """Why a run does not measure what its name says (None: it does)."""
    why = []
    if r.get("ext_drops"):
        why.append("the page cache was dropped by another process during the run")
    if r["kind"] == "warm" and r.get("ext_drops_before"):
        why.append("the page cache was dropped by another process since the previous run")
    size = r.get("file_bytes") or 0
    if r["kind"] == "warm" and size:
        rb, ra = r.get("resident_before"), r.get("resident_after")
        if rb is not None and rb < 0.99 * size:
            why.append("not warm: %.1f%% of the file resident before" % (100.0 * rb / size))
        if ra is not None and ra < 0.99 * size:
            why.append("pages evicted during the run: %.1f%% resident after" % (100.0 * ra / size))
    return "; ".join(why) or None


def report(work, meta_path):
    meta = json.load(open(meta_path))
    runs = [json.loads(l) for l in open(os.path.join(work, "results.jsonl")) if l.strip()]
    by = {(r["name"], r["rep"]): r for r in runs}
    tck = meta["clk_tck"]
    nbytes = meta["write"]["bytes"]

    def stats_of(name, rep):
        p = os.path.join(work, "stats", "%s.r%d.txt" % (name, rep))
        return parse_stats(open(p).read()) if os.path.exists(p) else None

    def one(name, rep, prev=None):
        """One run as reported: its result, daemon figures, validity."""
        r = by[(name, rep)]
        res = dict(r["result"])
        res.pop("file", None)
        res["rep"] = rep
        res["reader_cpu_seconds"] = r.get("reader_cpu_seconds")
        res["machine_cpu_busy_fraction"] = r.get("machine_busy")
        size = r.get("file_bytes") or 0
        for k in ("resident_before", "resident_after"):
            if r.get(k) is not None and size:
                res[k.replace("resident", "resident_fraction")] = round(r[k] / size, 4)
        why = validity(r)
        res["valid"] = why is None
        if why:
            res["invalid_because"] = why
        if r["where"] == "mount":
            cpu = r["daemon_cpu_ticks"] / tck
            res["daemon_cpu_seconds"] = round(cpu, 3)
            res["daemon_cpu_per_wall"] = round(cpu / res["seconds"], 3) if res.get("seconds") else None
            res["mount_read_ahead_kb"] = r.get("read_ahead_kb")
            st = stats_of(name, rep)
            if st is not None:
                if prev and (prev, rep) in by and by[(prev, rep)]["session"] == r["session"]:
                    st = delta(st, stats_of(prev, rep))
                res["daemon"] = cache_view(st, res.get("bytes", 0))
        return res

    def best(name, prev=None):
        """The fastest valid run of a phase (the fastest of all if none is
        valid), with every run's time."""
        reps = sorted(rep for (n, rep) in by if n == name)
        all_ = [one(name, rep, prev) for rep in reps]
        pool = [x for x in all_ if x["valid"]] or all_
        b = dict(min(pool, key=lambda x: x["seconds"]))
        b["every_run_seconds"] = [x["seconds"] for x in all_]
        b["valid_runs"] = sum(x["valid"] for x in all_)
        return b

    doc = {
        "benchmark": "bench_read",
        "commit": meta["commit"],
        "gib": meta["gib"],
        "layout": meta["write"]["layout"],
        "chunk": meta["write"]["chunk"],
        "shape": meta["write"]["shape"],
        "bytes": nbytes,
        "reps": meta["reps"],
        "machine": meta["machine"],
        "page_cache_dropped": True,
        "daemon_options": meta["daemon_options"],
        "mount_read_ahead_kb": meta["read_ahead_kb"],
        "clock": "CLOCK_MONOTONIC",
        "write": meta["write"],
        "replay_seconds": meta["replay_seconds"],
        "files": meta["files"],
        "sequential": {},
        "strided": {},
        "reference": {},
        "ratios": {},
    }
    phases = (("baseline_cold", None), ("baseline_warm", None),
              ("mount_cold", None), ("mount_warm", "mount_cold"))
    seq_phases = phases + (("baseline_warm2", None), ("mount_warm2", "mount_warm"))
    for rd in ("h5py", "readvar"):
        doc["sequential"][rd] = {ph: best("%s.%s" % (rd, ph), prev and "%s.%s" % (rd, prev))
                                 for ph, prev in seq_phases}
    for ph, prev in phases:
        doc["strided"][ph] = best("strided." + ph, prev and "strided." + prev)
    doc["strided"]["k"] = meta["ks"]
    doc["strided"]["i"] = meta["is"]
    doc["reference"] = {"log_file_raw_cold": best("raw.log_cold"),
                        "baseline_file_raw_cold": best("raw.baseline_cold")}

    seqruns = [r for r in runs if r["name"].split(".")[0] in ("h5py", "readvar")]
    sums = {r["result"]["checksum"] for r in seqruns}
    v = by[("verify.mount", 1)]["result"]
    strided_ok = all(r["result"]["bad"] == 0 for r in runs if r["name"].startswith("strided."))
    invalid = ["%s rep %d: %s" % (r["name"], r["rep"], validity(r)) for r in runs if validity(r)]
    doc["checks"] = {
        "checksum": sorted(sums)[0] if len(sums) == 1 else sorted(sums),
        "checksums_agree": len(sums) == 1,
        "bytes_agree": {r["result"]["bytes"] for r in seqruns} == {nbytes},
        "formula_through_mount": v,
        "strided_values_ok": strided_ok,
        "invalid_runs": invalid,
    }
    doc["checks"]["all_ok"] = (doc["checks"]["checksums_agree"] and doc["checks"]["bytes_agree"]
                               and v["ok"] and strided_ok)

    def median(xs):
        xs = sorted(xs)
        return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2 if xs else None

    def ratio(key, m, b, target):
        """Throughput mount/baseline = time(baseline) / time(mount), of the
        fastest runs; the ratio of the median runs goes alongside (the
        machine's cold reads vary by up to 5x between reps)."""
        val = round(b["seconds"] / m["seconds"], 3) if m["seconds"] > 0 else None
        mm, mb = median(m["every_run_seconds"]), median(b["every_run_seconds"])
        doc["ratios"][key] = {"value": val, "target": target, "met": val is not None and val >= target,
                              "valid": m["valid"] and b["valid"],
                              "median_runs_value": round(mb / mm, 3) if mm else None}

    for rd in ("h5py", "readvar"):
        s = doc["sequential"][rd]
        ratio(rd + " mount_cold/baseline_cold", s["mount_cold"], s["baseline_cold"], 0.8)
        ratio(rd + " mount_warm/baseline_warm", s["mount_warm"], s["baseline_warm"], 0.9)
    st = doc["strided"]
    ratio("strided mount_cold/baseline_cold", st["mount_cold"], st["baseline_cold"], 0.5)
    info = {}
    for ph in ("cold", "warm"):
        m, b = st["mount_" + ph], st["baseline_" + ph]
        for part, key in (("x[i,:,:]", "row_seconds"), ("x[:,:,k]", "column_seconds"), ("all", "seconds")):
            info["strided_%s %s" % (ph, part)] = round(b[key] / m[key], 3) if m[key] else None
    for rd in ("h5py", "readvar"):
        s = doc["sequential"][rd]
        # the second re-read: the kernel's page cache of a FUSE file is in
        # 4 KiB folios (Linux 6.18), so the first re-read pays an LRU
        # activation per page that the baseline's large folios pay rarely
        info[rd + " mount_warm2/baseline_warm2"] = round(s["baseline_warm2"]["seconds"]
                                                        / s["mount_warm2"]["seconds"], 3)
    ref = doc["reference"]
    info["raw cold log/baseline"] = round(ref["baseline_file_raw_cold"]["seconds"]
                                          / ref["log_file_raw_cold"]["seconds"], 3)
    for rd in ("h5py", "readvar"):
        s = doc["sequential"][rd]
        info[rd + " mount_cold/raw_cold_log"] = round(s["mount_cold"]["MB_per_s"]
                                                      / ref["log_file_raw_cold"]["MB_per_s"], 3)
    doc["ratios_info"] = info
    doc["all_targets_met"] = all(r["met"] for r in doc["ratios"].values())
    doc["all_ratios_valid"] = all(r["valid"] for r in doc["ratios"].values())
    print(json.dumps(doc, indent=1))
    return 0 if doc["checks"]["all_ok"] else 1


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "seq":
        seq(args[0], args[1], args[2])
    elif cmd == "strided":
        ks = [int(a) for a in args[2].split()]
        iis = [int(a) for a in args[3].split()]
        strided(args[0], args[1], ks, iis)
    elif cmd == "raw":
        raw(args[0])
    elif cmd == "verify":
        verify(args[0], args[1])
    elif cmd == "report":
        sys.exit(report(args[0], args[1]))
    else:
        sys.exit("rb.py: unknown command " + cmd)
PYEOF
rb() { "$py" "$work/rb.py" "$@"; }

# ---------------------------------------------------------------- 1. files
log "work directory $work"
mkargs=(--gib "$gib")
if [ "$chunked" = 1 ]; then mkargs+=(--chunked); fi
log "writing $gib GiB with $np_ ranks"
wout=$(mpirun --oversubscribe -np "$np_" "$mkbig" "$src/big.h5" "${mkargs[@]}")
wline=$(printf '%s\n' "$wout" | grep '^{' | tail -n 1)
log "  $wline"
r0=$("$py" -c 'import time; print(time.monotonic())')
"$replay" "$src/big.h5" "$base/big.h5" >&2
r1=$("$py" -c 'import time; print(time.monotonic())')
replay_s=$("$py" -c "print(round($r1 - $r0, 3))")
log "  baseline by h5logreplay in $replay_s s"
nrows=$(printf '%s\n' "$wline" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["shape"][0])')
is="0 $((nrows / 2)) $((nrows - 1))"
for k in $ks; do
    if [ "$k" -ge 512 ]; then log "BENCH_KS: $k is not in 0..511"; exit 1; fi
done

start_daemon
ra=$(cat "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb" 2>/dev/null || echo null)

# ---------------------------------------------------------------- 2, 3: timed
seq_cmd() { # reader file
    if [ "$1" = h5py ]; then rb seq "$2" /x 64; else "$readvar" "$2" /x --slab-mib 64; fi
}
# Settling pass (untimed): the first cold read of a file right after it was
# written is served partly by the host's cache on a VM (measured: h5py's cold
# read of the baseline in the first repetition took 1.4-1.7 s in three
# benchmark runs, every later one 4-5 s, the disk reference 2.4 s). One read
# of each file here, so no timed run is the first read after a write.
log "settling: one untimed cold read of each file"
drop_caches
cat "$base/big.h5" >/dev/null
drop_caches
cat "$src/big.h5" >/dev/null
for rep in $(seq 1 "$reps"); do
    for rd in h5py readvar; do
        log "rep $rep/$reps: sequential reads with $rd"
        drop_caches
        measure "$rd.baseline_cold" base cold "$base/big.h5" seq_cmd "$rd" "$base/big.h5"
        measure "$rd.baseline_warm" base warm "$base/big.h5" seq_cmd "$rd" "$base/big.h5"
        measure "$rd.baseline_warm2" base warm "$base/big.h5" seq_cmd "$rd" "$base/big.h5"
        remount
        drop_caches
        measure "$rd.mount_cold" mount cold "$mnt/big.h5" seq_cmd "$rd" "$mnt/big.h5"
        measure "$rd.mount_warm" mount warm "$mnt/big.h5" seq_cmd "$rd" "$mnt/big.h5"
        measure "$rd.mount_warm2" mount warm "$mnt/big.h5" seq_cmd "$rd" "$mnt/big.h5"
    done
    log "rep $rep/$reps: strided reads: x[i,:,:] for i in ($is), x[:,:,k] for k in ($ks)"
    drop_caches
    measure strided.baseline_cold base cold "$base/big.h5" rb strided "$base/big.h5" /x "$ks" "$is"
    measure strided.baseline_warm base warm "$base/big.h5" rb strided "$base/big.h5" /x "$ks" "$is"
    remount
    drop_caches
    measure strided.mount_cold mount cold "$mnt/big.h5" rb strided "$mnt/big.h5" /x "$ks" "$is"
    measure strided.mount_warm mount warm "$mnt/big.h5" rb strided "$mnt/big.h5" /x "$ks" "$is"
done

# ---------------------------------------------------------------- 4. references
rep=1
log "reference: cold 1 MiB reads of the files themselves"
drop_caches
measure raw.log_cold base cold "$src/big.h5" rb raw "$src/big.h5"
drop_caches
measure raw.baseline_cold base cold "$base/big.h5" rb raw "$base/big.h5"

# ---------------------------------------------------------------- 5. checks
measure verify.mount mount - "$mnt/big.h5" rb verify "$mnt/big.h5" /x
stop_daemon

opts="tick=0.1,stats"
if [ -n "$cache_size" ]; then opts+=",cache_size=$cache_size"; fi
# extents on disk (filefrag, if present): a fragmented log file reads slower cold
extents() { filefrag "$1" 2>/dev/null | sed -n 's/.*: \([0-9]*\) extents\{0,1\} found.*/\1/p' | grep . || echo null; }
"$py" - "$work/meta.json" "$wline" "$gib" "$replay_s" "$ra" "$opts" "$ks" "$is" \
    "$(getconf CLK_TCK)" "$(stat -c %s "$src/big.h5")" "$(stat -c %s "$base/big.h5")" \
    "$(extents "$src/big.h5")" "$(extents "$base/big.h5")" \
    "$(git -C "$(dirname "$0")" describe --always --dirty 2>/dev/null || echo unknown)" <<'EOF'
import json, os, platform, sys
out, wline, gib, replay_s, ra, opts, ks, iis, tck, lsz, bsz, lext, bext, commit = sys.argv[1:15]
meta = {
    "write": json.loads(wline), "gib": float(gib), "replay_seconds": float(replay_s),
    "read_ahead_kb": None if ra == "null" else int(ra), "daemon_options": opts,
    "reps": int(os.environ.get("BENCH_REPS", "1")), "commit": commit,
    "ks": [int(k) for k in ks.split()], "is": [int(i) for i in iis.split()], "clk_tck": int(tck),
    "files": {"log_bytes": int(lsz), "baseline_bytes": int(bsz),
              "log_extents": None if lext == "null" else int(lext),
              "baseline_extents": None if bext == "null" else int(bext)},
    "machine": {"nproc": os.cpu_count(), "kernel": platform.release(),
                "mem_gib": round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)},
}
json.dump(meta, open(out, "w"))
EOF
rb report "$work" "$work/meta.json"
