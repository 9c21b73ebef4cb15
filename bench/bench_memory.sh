#!/usr/bin/env bash
# bench/bench_memory.sh BUILD — daemon memory per million records (JSON).
#
# Writes a file of N one-row records (bench/mkrecords.c), mounts it, and
# reads the daemon's VmRSS before the file is opened and after its index is
# loaded and the whole variable read once (cache included), then with the
# cache limited to 16 MiB to separate index from cache. BENCH_RECORDS sets N.
set -euo pipefail
BUILD=${1:-build}
N=${BENCH_RECORDS:-1000000}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d ${BENCH_DIR:-/tmp}/h5log-mem.XXXXXX)
pid=""
cleanup() { fusermount3 -u "$dir/mnt" 2>/dev/null || fusermount3 -uz "$dir/mnt" 2>/dev/null || true
            [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
mkdir -p "$dir/src" "$dir/mnt"
mpirun --oversubscribe -np 2 "$BUILD/bench/mkrecords" "$dir/src/r.h5" --records "$N" --flushes 10 >/dev/null
rss() { awk '/VmRSS/ {print $2 * 1024}' /proc/$1/status; }
measure() { # cache_size -> "rss_before rss_after"
    "$BUILD/bin/h5logfs" "$dir/src" "$dir/mnt" -f -o cache_size=$1 2>/dev/null &
    pid=$!
    for i in $(seq 100); do ls "$dir/mnt" >/dev/null 2>&1 && grep -q " $dir/mnt " /proc/mounts && break; sleep 0.1; done
    local before=$(rss $pid)
    /usr/bin/python3 -c "import h5py,sys; f=h5py.File(sys.argv[1],'r'); x=f['r'][()]; assert x.shape[0]==$N and (x[:,0]==range($N)).all()" "$dir/mnt/r.h5"
    local after=$(rss $pid)
    fusermount3 -u "$dir/mnt"; wait $pid || true; pid=""
    echo "$before $after"
}
read b1 a1 < <(measure 1G)
read b2 a2 < <(measure 16M)
/usr/bin/python3 - "$N" "$b1" "$a1" "$b2" "$a2" <<'PY'
import json, sys
n, b1, a1, b2, a2 = (int(x) for x in sys.argv[1:])
print(json.dumps({
    "records": n,
    "data_bytes": n * 16,
    "rss_idle_bytes": b1,
    "rss_after_load_and_full_read_cache_1G": a1,
    "rss_after_load_and_full_read_cache_16M": a2,
    "rss_growth_bytes_per_record_cache_16M": round((a2 - b2) / n, 1),
    "rss_MiB_per_million_records_cache_16M": round((a2 - b2) / n * 1e6 / 2**20, 1),
    "rss_MiB_per_million_records_cache_1G": round((a1 - b1) / n * 1e6 / 2**20, 1),
}, indent=1))
PY
