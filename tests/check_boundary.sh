#!/usr/bin/env bash
# tests/check_boundary.sh — libcore's boundary (docs/libcore.md, "The
# interface"): the daemon, the tools, the benchmarks and the demo use
# libcore only through libcore/include (the installed h5log*.h and the
# project interface h5log/*.h), never its private headers in libcore/src.
#
# Two checks, each counted:
#  1. every #include "..." of those programs resolves to their own folder
#     (or fused/ for the daemon's tests) or to libcore/include;
#  2. the Makefile's compile lines for them carry no libcore/src include
#     path (make -n -B: what a build would run), so a private header could
#     not be found even by a new include.
# Ends with "N passed, N failed" (tests/run_all.sh adds it up).
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

for f in fused/*.c fused/*.h tools/*.c bench/*.c demo/*.c; do
    [ -e "$f" ] || continue
    d=$(dirname "$f")
    while IFS= read -r h; do
        if [ -e "$d/$h" ] || [ -e "libcore/include/$h" ]; then
            ok
        elif [ -e "libcore/src/$h" ] || [ -n "$(find libcore/src -path "*/$h" -print -quit)" ]; then
            bad "$f includes \"$h\", a private header of libcore (libcore/src): use libcore/include"
        else
            bad "$f includes \"$h\", found in neither $d/ nor libcore/include/"
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done

# the compile commands make would run for the daemon, the tools, a
# benchmark and the demo, from scratch, into a build tree never used
tmp=$(mktemp -d /tmp/h5log-boundary.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
goals="$tmp/b/bin/h5logfs $tmp/b/bin/h5logdump $tmp/b/bin/h5logreplay $tmp/b/bin/h5logtail $tmp/b/bin/h5logrecover"
goals="$goals $tmp/b/bench/bench_open $tmp/b/demo/demo_writer"
if ! make -n -B --no-print-directory BUILD="$tmp/b" $goals >"$tmp/cmds" 2>"$tmp/err"; then
    bad "make -n of the daemon, tools, bench and demo failed: $(head -3 "$tmp/err")"
else
    n=0
    while IFS= read -r line; do
        case "$line" in
        *" -c fused/"* | *" tools/"*.c* | *" bench/"*.c* | *" demo/"*.c*)
            n=$((n + 1))
            if [[ "$line" == *libcore/src* ]]; then
                bad "a compile line of a libcore client has libcore/src on its include path: ${line:0:160}"
            else
                ok
            fi
            ;;
        esac
    done <"$tmp/cmds"
    # the daemon's 11 modules, 4 tools, a benchmark, the demo: a check
    # that saw fewer compile lines checked nothing
    if [ "$n" -lt 17 ]; then bad "only $n compile lines of libcore clients found in make -n (expected 17)"; else ok; fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
