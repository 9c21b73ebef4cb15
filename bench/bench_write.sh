#!/usr/bin/env bash
# bench_write.sh BUILD — the writer benchmark (make bench-write): every
# pattern of BUILD/bench/bench_write (S, C, M at two row lengths) with every
# implementation (h5l_put, h5l_iput, raw MPI-IO, native HDF5, PnetCDF), in
# interleaved rounds (round 1 runs every case once, then round 2, ...), then
# bench_flushes (100,000 one-row flushes) and bench_copy (what h5l_put's
# copy costs), and prints one JSON document: per case the median MiB/s and
# the range, per ratio the ratio of the medians and the range of the
# ratios within each round, and the targets with whether they are met.
# Every ratio compares runs of this one invocation on this one machine.
#
# Progress goes to stderr, the JSON document to stdout. Environment:
#   BENCH_FULL    1: the full sizes (S and C 1 GiB, M large 100 steps);
#                 default: quick sizes (S and C 256 MiB, M large 20 steps)
#   BENCH_PLANES  planes Z of the [Z,N,N] variable of S and C (256 full, 64 quick)
#   BENCH_N       plane edge N (1024)
#   BENCH_EVERY   planes per flush (8)
#   BENCH_NVARS   variables of M (1000)
#   BENCH_STEPS   flushes of M small (100)
#   BENCH_ROWLEN_LARGE  row length of M large (8704 floats: 250 rows of
#                 34 KiB, 8.5 MiB per rank and flush at 4 ranks)
#   BENCH_STEPS_LARGE   flushes of M large (100 full, 10 quick)
#   BENCH_NP      MPI ranks (4)
#   BENCH_M_HDF5  1: native HDF5 on M small too (default: only with BENCH_FULL=1)
#   BENCH_EARLY   0: leave out h5l_put_early and h5l_iput_early (S and M
#                 large with h5l_opts_t.early_writes; default: run them)
#   BENCH_ROUNDS  interleaved rounds (5); the slow peers (C: native HDF5,
#                 PnetCDF, MPI-IO; M small: native HDF5) run in the first
#                 BENCH_SLOW_ROUNDS (2) only
#   BENCH_CASES   patterns to run (default "S C Ms Ml")
#   BENCH_FLUSHES one-row flushes of bench_flushes (100000; 0 skips it)
#   BENCH_FLUSH_NP ranks of bench_flushes (2)
#   BENCH_DIR     where the files go (default /dev/shm: tmpfs)
#   BENCH_VERIFY  1: every run reads its file back and checks it (untimed)
#   BENCH_WARM    0: skip bench_write's untimed warm-up (--cold); see
#                 warm_memory in bench_write.c for why it exists
#   BENCH_FINALIZE 1 (default): libh5log finalizes at close, h5l_close's
#                 default (docs/api.md), so a run times what a user's job
#                 pays from create to close; 0: the write path alone
#                 (bench_write and bench_flushes --no-finalize)
#   BENCH_SMALL_PAGES  1: the benchmark's data buffers on 4 KiB pages
#                 (--small-pages; default: transparent huge pages, like
#                 h5l_put's arena: see alloc_data in bench_write.c)
#   BENCH_MPIRUN_ARGS  extra mpirun arguments
set -euo pipefail

# The ranks are oversubscribed (4 on 2 cores): a rank spinning in a
# collective steals the core of the rank it waits for. Yielding when idle is
# what OpenMPI recommends for oversubscription; it applies to every
# implementation alike.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

build=${1:-build}
bin=$build/bench/bench_write
py=${PY:-/usr/bin/python3}
full=${BENCH_FULL:-0}
# native HDF5 on M small makes 200,000 collective calls: 20 s on an idle
# machine, 400 s on a loaded one; the quick default leaves it out
if [ "$full" = 1 ]; then dz=256; dsl=100; dmh=1; else dz=64; dsl=10; dmh=0; fi
if [ "${BENCH_M_HDF5:-$dmh}" = 1 ]; then ms_hdf5=hdf5; else ms_hdf5=; fi
# h5l_opts_t.early_writes (opt-in) side by side on S and M large
if [ "${BENCH_EARLY:-1}" = 1 ]; then early="h5l_put_early h5l_iput_early"; else early=; fi
z=${BENCH_PLANES:-$dz}
n=${BENCH_N:-1024}
every=${BENCH_EVERY:-8}
nvars=${BENCH_NVARS:-1000}
steps=${BENCH_STEPS:-100}
rowlen_l=${BENCH_ROWLEN_LARGE:-8704}
steps_l=${BENCH_STEPS_LARGE:-$dsl}
np=${BENCH_NP:-4}
rounds=${BENCH_ROUNDS:-5}
slow_rounds=${BENCH_SLOW_ROUNDS:-2}
cases=${BENCH_CASES:-S C Ms Ml}
nflushes=${BENCH_FLUSHES:-100000}
flush_np=${BENCH_FLUSH_NP:-2}
dir=${BENCH_DIR:-/dev/shm}

for b in "$bin" "$build/bench/bench_flushes" "$build/bench/bench_copy"; do
    if [ ! -x "$b" ]; then
        echo "bench_write.sh: $b is not built (make $b)" >&2
        exit 1
    fi
done

work=$(mktemp -d "$dir/h5log-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
runs=$work/runs.jsonl
: >"$runs"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# case name -> bench_write arguments and implementations
case_args() {
    case $1 in
    S) echo "--pattern S --planes $z --size $n --every $every" ;;
    C) echo "--pattern C --planes $z --size $n --every $every" ;;
    Ms) echo "--pattern M --nvars $nvars --steps $steps --rowlen 256" ;;
    Ml) echo "--pattern M --nvars $nvars --steps $steps_l --rowlen $rowlen_l" ;;
    *) echo "bench_write.sh: unknown case $1" >&2; exit 1 ;;
    esac
}
case_impls() {
    case $1 in
    S) echo "mpiio h5l_put h5l_iput hdf5 pnetcdf $early" ;;
    C) echo "mpiio h5l_put h5l_iput hdf5 pnetcdf" ;;
    Ms) echo "mpiio h5l_put h5l_iput pnetcdf $ms_hdf5" ;;
    Ml) echo "mpiio h5l_put h5l_iput pnetcdf $early" ;;
    esac
}

# the peers that take seconds per run where h5log takes a fraction of one
# (collective two-phase I/O of 1 KiB pieces; a collective H5Dwrite per
# variable and step): their medians come from the first BENCH_SLOW_ROUNDS
# rounds, still side by side with the others
slow() {
    case $1/$2 in
    C/hdf5 | C/pnetcdf | C/mpiio | Ms/hdf5) return 0 ;;
    *) return 1 ;;
    esac
}

for round in $(seq 1 "$rounds"); do
    for c in $cases; do
        for impl in $(case_impls "$c"); do
            if [ "$round" -gt "$slow_rounds" ] && slow "$c" "$impl"; then continue; fi
            read -r -a args <<<"$(case_args "$c")"
            case $impl in
            *_early) args+=(--impl "${impl%_early}" --early --dir "$work") ;;
            *) args+=(--impl "$impl" --dir "$work") ;;
            esac
            if [ "${BENCH_VERIFY:-0}" = 1 ]; then args+=(--verify); fi
            if [ "${BENCH_WARM:-1}" = 0 ]; then args+=(--cold); fi
            if [ "${BENCH_SMALL_PAGES:-0}" = 1 ]; then args+=(--small-pages); fi
            if [ "${BENCH_FINALIZE:-1}" = 1 ]; then args+=(--finalize); fi
            echo "bench_write.sh: round $round/$rounds case $c impl $impl" >&2
            # shellcheck disable=SC2086
            if ! out=$(mpirun --oversubscribe -np "$np" ${BENCH_MPIRUN_ARGS:-} "$bin" "${args[@]}"); then
                echo "bench_write.sh: $bin ${args[*]} failed" >&2
                exit 1
            fi
            line=$(printf '%s\n' "$out" | grep '^{' | tail -n 1 || true)
            if [ -z "$line" ]; then
                echo "bench_write.sh: no result from $bin ${args[*]}:" >&2
                printf '%s\n' "$out" >&2
                exit 1
            fi
            echo "  $line" >&2
            printf '{"round":%d,"case":"%s","load":"%s","run":%s}\n' "$round" "$c" \
                "$(cut -d' ' -f1 /proc/loadavg)" "$line" >>"$runs"
        done
    done
done

flushes=null
if [ "$nflushes" -gt 0 ]; then
    echo "bench_write.sh: bench_flushes, $nflushes flushes on $flush_np ranks" >&2
    # shellcheck disable=SC2086
    if [ "${BENCH_FINALIZE:-1}" = 1 ]; then fin=; else fin=--no-finalize; fi
    # shellcheck disable=SC2086
    flushes=$(mpirun --oversubscribe -np "$flush_np" ${BENCH_MPIRUN_ARGS:-} \
        "$build/bench/bench_flushes" "$work/flushes.h5" "$nflushes" $fin | grep '^{' | tail -n 1)
    echo "  $flushes" >&2
    rm -f "$work/flushes.h5"
fi
echo "bench_write.sh: bench_copy" >&2
copy=$("$build/bench/bench_copy" "$((every * n * n * 4 >> 20))" "$((n * n * 4 >> 10))")
copy_row=$("$build/bench/bench_copy" "$((every * n * n * 4 >> 20))" "$((n / np * 4 >> 10 > 0 ? n / np * 4 >> 10 : 1))")
echo "  $copy" >&2
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

"$py" - "$runs" "$np" "$rounds" "$load_before" "$load_after" "$dir" "$flushes" "$copy" "$copy_row" <<'EOF'
import json, os, statistics, sys

path, np_, rounds, load_before, load_after, where, flushes, copy, copy_row = sys.argv[1:10]
runs = [json.loads(line) for line in open(path) if line.strip()]

by = {}  # (case, impl) -> [run...]
for r in runs:
    by.setdefault((r["case"], r["run"]["impl"]), []).append(r)

def med(xs):
    return round(statistics.median(xs), 3) if xs else None

def rng(xs):
    return [round(min(xs), 3), round(max(xs), 3)] if xs else None

def ratio(c, num, den):
    """ratio of the medians, and the range of per-round ratios (each round
    ran both side by side)"""
    a, b = by.get((c, num)), by.get((c, den))
    if not a or not b:
        return None
    ma = statistics.median(x["run"]["MiB_per_s"] for x in a)
    mb = statistics.median(x["run"]["MiB_per_s"] for x in b)
    rb = {x["round"]: x["run"]["MiB_per_s"] for x in b}
    per = [x["run"]["MiB_per_s"] / rb[x["round"]] for x in a if x["round"] in rb and rb[x["round"]] > 0]
    return {"median": round(ma / mb, 3) if mb > 0 else None, "per_round": rng(per), "rounds": len(per)}

TARGETS = {
    "S": [("h5l_put", "mpiio", 0.9), ("h5l_iput", "mpiio", 0.95)],
    "C": [("h5l_put", "hdf5", 3.0), ("h5l_put", "pnetcdf", 2.0)],
    "Ml": [("h5l_put", "mpiio", 0.9)],
}
INFO = {
    "S": [("h5l_put", "h5l_iput"), ("h5l_put", "hdf5"), ("h5l_put", "pnetcdf"),
          ("h5l_put_early", "h5l_put"), ("h5l_iput_early", "h5l_iput"), ("h5l_put_early", "mpiio"),
          ("h5l_iput_early", "mpiio")],
    "C": [("h5l_iput", "hdf5"), ("h5l_iput", "pnetcdf"), ("h5l_put", "mpiio")],
    "Ms": [("h5l_put", "mpiio"), ("h5l_put", "hdf5"), ("h5l_put", "pnetcdf")],
    "Ml": [("h5l_put", "pnetcdf"), ("h5l_iput", "mpiio"), ("h5l_put_early", "h5l_put"),
           ("h5l_iput_early", "h5l_iput"), ("h5l_put_early", "mpiio"), ("h5l_iput_early", "mpiio")],
}
doc = {
    "benchmark": "bench_write",
    "nranks": int(np_),
    "rounds": int(rounds),
    "statistic": "median over interleaved rounds; ranges are min..max",
    "dir": where,
    "h5log_finalize": os.environ.get("BENCH_FINALIZE", "1") == "1",
    "loadavg_before": load_before,
    "loadavg_after": load_after,
    "cases": {},
}
all_met = True
for c in ["S", "C", "Ms", "Ml"]:
    impls = [i for (cc, i) in by if cc == c]
    if not impls:
        continue
    any_run = by[(c, impls[0])][0]["run"]
    shape = {k: any_run[k] for k in ("z", "n", "every", "nvars", "nsteps", "rowlen") if k in any_run}
    e = {"shape": shape, "bytes": any_run["bytes"], "flushes": any_run["flushes"]}
    e["MiB_per_s_median"] = {i: med([x["run"]["MiB_per_s"] for x in by[(c, i)]]) for i in impls}
    e["MiB_per_s_range"] = {i: rng([x["run"]["MiB_per_s"] for x in by[(c, i)]]) for i in impls}
    e["MiB_per_s_every_run"] = {i: [x["run"]["MiB_per_s"] for x in by[(c, i)]] for i in impls}
    e["phases_median_s"] = {
        i: {p: med([x["run"]["phases"].get(p, 0.0) for x in by[(c, i)]])
            for p in sorted({p for x in by[(c, i)] for p in x["run"]["phases"]})}
        for i in impls}
    recs = {i: sorted({x["run"]["records"] for x in by[(c, i)]}) for i in impls if "records" in by[(c, i)][0]["run"]}
    if recs:
        e["records"] = recs
        e["ticks"] = {i: sorted({x["run"]["ticks"] for x in by[(c, i)]}) for i in recs}
    e["ratios"] = {}
    met = {}
    for num, den, lo in TARGETS.get(c, []):
        r = ratio(c, num, den)
        e["ratios"][num + "/" + den] = r
        ok = r is not None and r["median"] is not None and r["median"] >= lo
        met["%s/%s >= %g" % (num, den, lo)] = ok
        all_met = all_met and ok
    for num, den in INFO.get(c, []):
        e["ratios"][num + "/" + den] = ratio(c, num, den)
    if c == "C" and recs:
        # adjacent puts merge: one record per rank, flush and variable
        want = int(np_) * any_run["flushes"]
        ok = all(v == [want] for v in recs.values())
        met["records == ranks x flushes (%d)" % want] = ok
        all_met = all_met and ok
    e["targets_met"] = met
    doc["cases"][c] = e

if flushes != "null":
    f = json.loads(flushes)
    met = {"ratio_last_first <= 1.2": f["ratio_last_first"] <= 1.2,
           "disk_overhead_bytes_per_tick <= 200": f["disk_overhead_bytes_per_tick"] <= 200}
    f["targets_met"] = met
    all_met = all_met and all(met.values())
    doc["flushes"] = f
doc["copy"] = {"plane_puts": json.loads(copy), "row_puts": json.loads(copy_row)}
doc["all_targets_met"] = all_met
print(json.dumps(doc, indent=2))
EOF
