#!/usr/bin/env bash
# tests/run_all.sh — run every suite and add up their counts.
#
# Each suite prints its own "N passed, N failed" line (C harness, MPI test)
# or pytest's summary; this script sums them and ends with one line
# "N passed, N failed" over everything. A suite that crashes or prints no
# count is counted as one failure, so a run that tested nothing cannot pass.
set -u
BUILD=${BUILD:-build}
PY=${PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export H5LOG_BUILD=$(cd "$BUILD" && pwd)
# Under `make asan`: OpenMPI's own never-freed allocations are suppressed by
# library name (tests/lsan.supp); full unwinding so the names are visible.
export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan.supp:fast_unwind_on_malloc=0:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
total_pass=0 total_fail=0
log=$(mktemp -d /tmp/h5log-check.XXXXXX)
trap 'rm -rf "$log"' EXIT

# add_counts NAME FILE RC: read the suite's counts from its output
add_counts() {
    local name=$1 out=$2 rc=$3 p f
    p=$(grep -Eo '[0-9]+ passed' "$out" | tail -1 | grep -Eo '[0-9]+')
    f=$(grep -Eo '[0-9]+ failed' "$out" | tail -1 | grep -Eo '[0-9]+')
    e=$(grep -Eo '[0-9]+ errors?' "$out" | tail -1 | grep -Eo '[0-9]+')
    p=${p:-0}; f=$(( ${f:-0} + ${e:-0} ))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi   # crashed or failed without saying so
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi    # ran nothing
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    if [ "$f" -ne 0 ]; then
        echo "== $name: $p passed, $f failed"; tail -n 40 "$out" | sed 's/^/   | /'
    else
        echo "== $name: $p passed"
    fi
}

run() { # run NAME CMD...
    local name=$1; shift
    local out="$log/$(echo "$name" | tr ' /' '__').out"
    "$@" >"$out" 2>&1
    add_counts "$name" "$out" $?
}

# the daemon and tools use libcore through libcore/include only
run "boundary" bash tests/check_boundary.sh
for t in tests/unit/test_*.c; do
    b="$BUILD/tests/$(basename "$t" .c)"
    run "unit $(basename "$b")" timeout 300 "$b"
done
for t in tests/fused/test_*.c; do
    [ -e "$t" ] || continue
    b="$BUILD/tests/$(basename "$t" .c)"
    # a test that writes its file with libh5log is an MPI program: run it
    # under mpirun (as an MPI singleton, LeakSanitizer's exit check crashes on
    # the dynamic TLS of OpenMPI's plugins under make asan)
    if grep -q '#include <mpi.h>' "$t"; then
        run "unit $(basename "$b")" timeout 300 mpirun --oversubscribe -np 1 "$b"
    else
        run "unit $(basename "$b")" timeout 300 "$b"
    fi
done
run "unit test_lfile_gather" timeout 300 mpirun --oversubscribe -np 1 "$BUILD/tests/test_lfile_gather"
for np in 1 2 4; do
    d=$(mktemp -d "$log/mpi.XXXX")
    run "mpi test_writer -np $np" timeout 600 mpirun --oversubscribe -np $np "$BUILD/tests/test_writer" "$d" --ticks 8 --seed $np
    d=$(mktemp -d "$log/mpi.XXXX")
    run "mpi test_early -np $np" timeout 600 mpirun --oversubscribe -np $np "$BUILD/tests/test_early" "$d"
done
d=$(mktemp -d "$log/mpi.XXXX")
run "mpi test_frames -np 2" timeout 300 mpirun --oversubscribe -np 2 "$BUILD/tests/test_frames" "$d"
run "pytest tests/e2e" timeout 1800 "$PY" -m pytest -q -p no:cacheprovider tests/e2e
# the libFuzzer harnesses: their corpus (seeds, past crashes) and a short
# deterministic run each
run "fuzz (short)" timeout 900 bash tests/fuzz/run_fuzz.sh short "${FUZZ_BUILD:-build-fuzz}"

echo
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
