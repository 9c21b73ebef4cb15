#!/usr/bin/env bash
# perf_ranks.sh OUTDIR PROGRAM ARGS... — run one MPI rank of PROGRAM under
# `perf record -g`, its timed part only: use as
#   mpirun -np 4 bench/perf_ranks.sh /tmp/prof build/bench/bench_write --pattern S ...
# Each rank writes OUTDIR/perf.RANK.data (`perf report -i` it). perf starts
# with its events disabled; bench_write enables them through the control
# fifo named by BENCH_PERF_CTL when its clock starts and disables them when
# it stops. PERF_CALLGRAPH (default dwarf,16384) and PERF_FREQ (999) tune it.
set -euo pipefail
out=$1
shift
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}
mkdir -p "$out"
ctl=$out/ctl.$rank
rm -f "$ctl"
mkfifo "$ctl"
export BENCH_PERF_CTL=$ctl
exec perf record -q -D -1 --control "fifo:$ctl" -F "${PERF_FREQ:-999}" \
    --call-graph "${PERF_CALLGRAPH:-dwarf,16384}" -o "$out/perf.$rank.data" -- "$@"
