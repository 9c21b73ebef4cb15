#!/usr/bin/env bash
# bench/bench_scale.sh BUILD — the canonical view at scale (JSON on stdout).
#
# Measures, through the mount (bench/bench_scale.py does the work):
#   live_1000      1000 live variables flushed every 200 ms, -o tick=0.1: how
#                  late the newest tick is seen (p50/p99, in daemon ticks) and
#                  the daemon's CPU (% of one core)
#   live_1000_attr the same, the writer also setting a global attribute
#                  ("step") at every tick
#   many_20000     the skeleton build of 20,000 variables (first lookup), and
#                  libhdf5 alone creating the same datasets (bench/h5floor)
#   sparse_2e40    one row at t = 2^40: time to serve it, daemon peak RSS
#   lookup_during_build  lookups and reads of a live file while the
#                  20,000-variable skeleton (another directory) is built
#   poll_100       100 live variables (1 MiB edge chunks) polled by a reader
#                  for BENCH_TICKS ticks (default 1000): daemon RSS
# BASELINE_BUILD=DIR (a build of another commit) runs each measurement with
# that daemon too, rounds interleaved (BENCH_ROUNDS, default 1 here; the
# polling run is long). BENCH_ONLY=name,name runs a subset.
set -euo pipefail
BUILD=${1:-build}
exec /usr/bin/python3 "$(dirname "$0")/bench_scale.py" "$BUILD"
