#!/usr/bin/env bash
# demo/run_demo.sh BUILD — what `make demo` shows: an MPI job writes a
# log-layout file for a few seconds; meanwhile the directory is mounted with
# h5logfs and read with unmodified tools while the file grows.
set -euo pipefail
BUILD=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d /tmp/h5logfs-demo.XXXXXX)
src=$dir/run mnt=$dir/view
mkdir -p "$src" "$mnt"
daemon="" writer=""
cleanup() {
    fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
    [ -n "$daemon" ] && kill "$daemon" 2>/dev/null || true
    [ -n "$writer" ] && kill "$writer" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. an MPI job (2 ranks) starts writing $src/climate.h5, one tick per step"
mpirun --oversubscribe -np 2 "$BUILD/demo/demo_writer" "$src/climate.h5" --steps 16 --interval 0.5 \
    > "$dir/writer.log" 2>&1 &
writer=$!
say "2. mount the run directory read-only: h5logfs $src $mnt -o tick=0.1"
"$BUILD/bin/h5logfs" "$src" "$mnt" -f -o tick=0.1 2> "$dir/daemon.log" &
daemon=$!
for i in $(seq 100); do
    grep -q " $mnt " /proc/mounts && [ -e "$mnt/climate.h5" ] && grep -q "step 2 " "$dir/writer.log" && break
    sleep 0.1
done
ls -l "$src" "$mnt"
say "3. h5ls -r on the mounted file, while the job writes"
h5ls -r "$mnt/climate.h5"
say "4. ncdump -h: real dimension names, the unlimited time axis, attributes"
ncdump -h "$mnt/climate.h5"
say "5. h5py, a fresh open every second: the file grows tick by tick"
/usr/bin/python3 - "$mnt/climate.h5" <<'PY'
import sys, time, h5py
for i in range(5):
    with h5py.File(sys.argv[1], "r") as f:
        t, m = f["atm/temperature"], f["diag/global_mean"]
        print(f"  open {i}: temperature {t.shape}, newest step mean {t[-1].mean():.3f} K, "
              f"global_mean[-1] = {m[-1]:.3f} K, {t.attrs['long_name'].decode()} in {t.attrs['units'].decode()}")
    time.sleep(1)
PY
say "6. the writer finishes; its file is closed and self-contained"
wait "$writer"; writer=""
tail -1 "$dir/writer.log"
sleep 0.5
/usr/bin/python3 -c "import h5py,sys; f=h5py.File(sys.argv[1]); print('  final shape', f['atm/temperature'].shape)" "$mnt/climate.h5"
say "7. daemon statistics"
cat "$mnt/.h5logfs-stats"
say "8. unmount"
fusermount3 -u "$mnt"
wait "$daemon" || true; daemon=""
echo "done: the demo's files were in $dir (removed)"
