#!/usr/bin/env bash
# tests/fuzz/run_fuzz.sh — run the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
#
#   run_fuzz.sh short FUZZ_BUILD [RUNS]     (make check)
#   run_fuzz.sh long FUZZ_BUILD [SECONDS]   (make fuzz)
#
# short: per harness, every input of its committed corpus (seeds and the
# regression inputs of crashes found before) once, then a deterministic
# run of RUNS mutations (-seed=1); two checks per harness, counted as
# "N passed, N failed". long: each harness fuzzes for SECONDS from its corpus;
# what it learns goes to FUZZ_BUILD/corpus/NAME (never into the committed
# corpus). Either way a crash, leak, timeout, or an allocation over
# -malloc_limit_mb fails the harness and its input is left in
# FUZZ_BUILD/crashes/ (printed: keep it under tests/fuzz/corpus/NAME/ as a
# regression once fixed).
set -u
mode=${1:?short or long} build=${2:?fuzz build directory}
here=$(cd "$(dirname "$0")" && pwd)
# 512 MiB for one allocation, 1 GiB in all, 20 s per input: a crafted file
# that makes the reader allocate what it claims, or stall, fails here
limits="-rss_limit_mb=1024 -malloc_limit_mb=512 -timeout=20"
pass=0 fail=0
for h in jscan tick file; do
    bin=$build/fuzz_$h corpus=$here/corpus/$h
    crashes=$build/crashes/$h
    mkdir -p "$crashes"
    before=$(ls "$crashes" | wc -l)
    log=$(mktemp)
    if [ "$mode" = short ]; then
        runs=${3:-3000}
        n=$(ls "$corpus" | wc -l)
        "$bin" $limits -runs=0 -artifact_prefix="$crashes/" "$corpus" >"$log" 2>&1
        if [ $? -eq 0 ]; then
            echo "== fuzz $h: replayed $n corpus inputs"; pass=$((pass + 1))
        else
            echo "== fuzz $h: replaying $n corpus inputs FAILED"; tail -n 30 "$log" | sed 's/^/   | /'; fail=$((fail + 1))
        fi
        work=$(mktemp -d)
        "$bin" $limits -seed=1 -runs="$runs" -artifact_prefix="$crashes/" "$work" "$corpus" >"$log" 2>&1
        rc=$?
        rm -rf "$work"
        stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -1 | tr -s ' \t' ' ')
        if [ $rc -eq 0 ]; then
            echo "== fuzz $h: $runs runs from seed 1: ${stats:-done}"; pass=$((pass + 1))
        else
            echo "== fuzz $h: $runs runs from seed 1 FAILED"; tail -n 30 "$log" | sed 's/^/   | /'; fail=$((fail + 1))
        fi
    else
        secs=${3:-60}
        work=$build/corpus/$h
        mkdir -p "$work"
        echo "== fuzz $h: $secs s, corpus $work + $corpus"
        "$bin" $limits -max_total_time="$secs" -print_final_stats=1 -artifact_prefix="$crashes/" \
            "$work" "$corpus" >"$log" 2>&1
        rc=$?
        grep -E '^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^stat::peak_rss_mb' "$log" | sed 's/^/   /'
        if [ $rc -eq 0 ]; then pass=$((pass + 1)); else
            grep -E 'ERROR|SUMMARY|Test unit written|==[0-9]+==' "$log" | head -n 20 | sed 's/^/   | /'
            fail=$((fail + 1))
        fi
    fi
    after=$(ls "$crashes" | wc -l)
    if [ "$after" -gt "$before" ]; then
        ls -t "$crashes" | head -n $((after - before)) | sed "s|^|   crash file: $crashes/|"
    fi
    rm -f "$log"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
