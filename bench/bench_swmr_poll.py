"""bench_swmr_poll.py MNTFILE vars|planes N SECONDS [--width W] [--interval S] [--full]
— a reader polling a bench_swmr_writer file through the mount
(bench/bench_swmr.py, tests/e2e/test_swmr.py).

Every S seconds (default 0.01: a reader that looks a hundred times a
second, not one that spins and takes a core from the daemon on a 2-core
machine), until SECONDS have passed or the writer is done (MNTFILE +
".done" exists, or the file stops growing for 5 s): open the file with
h5py (a new open sees the newest tick), read the length of the time axis
of one variable (a different one each poll, round-robin over the N
variables), check its newest row (vars: all W values; planes: row y of
the newest plane, y changing per poll) against bench_swmr_writer.c's
formula, close. --full: check every row of the variable (vars) or the
first and last row of every plane (planes): the test's mode, at small
sizes. W: the row length (vars, default 4) or the plane side (planes,
default 1000).

A pass K counts as seen at the end of the first poll that found K rows or
more (a poll that jumps from K-2 to K saw K-1 too: its rows are in the
file it opened). A poll that found fewer rows than an earlier one counts
as "back" (ticks must be monotone).

Prints one JSON object: polls, bad (values that differed from the
formula, with the first few), back, rows (the most seen), and
"seen": {K: wall time first seen}."""
import argparse
import json
import os
import time

import h5py
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("path")
ap.add_argument("mode", choices=("vars", "planes"))
ap.add_argument("n", type=int)
ap.add_argument("seconds", type=float)
ap.add_argument("--width", type=int)
ap.add_argument("--interval", type=float, default=0.01)
ap.add_argument("--full", action="store_true")
a = ap.parse_args()
path, mode, n = a.path, a.mode, a.n
width = a.width or (4 if mode == "vars" else 1000)
M32 = np.uint64(0xFFFFFFFF)


def want_rows(i, t0, t1):
    """rows t0..t1-1 of /vI: element j of row t is (t * N + I) * W + j."""
    t = np.arange(t0, t1, dtype=np.uint64)[:, None]
    j = np.arange(width, dtype=np.uint64)[None, :]
    return (((t * np.uint64(n) + np.uint64(i)) * np.uint64(width) + j) & M32).astype(np.uint32).view(np.int32)


def want_plane_row(i, t, y):
    """row y of plane t of /pI: element x is t * 1000003 + I * 7919 + y * S + x."""
    x = np.arange(width, dtype=np.uint64)
    v = np.uint64(t) * np.uint64(1000003) + np.uint64(i) * np.uint64(7919) + np.uint64(y) * np.uint64(width) + x
    return (v & M32).astype(np.uint32).view(np.int32)


end = time.time() + a.seconds
seen, bad, back, examples = {}, 0, 0, []
polls, top, last_new = 0, 0, time.time()
i = 0
done_flag = path + ".done"


def check(name, got, want, where):
    global bad
    if not np.array_equal(got, want):
        bad += 1
        if len(examples) < 5:
            examples.append({"var": name, "at": where, "got": np.asarray(got).ravel()[:8].tolist(),
                             "want": np.asarray(want).ravel()[:8].tolist()})


while time.time() < end:
    t_poll = time.time()
    rows = None
    try:
        with h5py.File(path, "r") as f:
            name = ("v%05d" % i) if mode == "vars" else ("p%d" % i)
            d = f[name]
            rows = d.shape[0]
            if rows:
                t = rows - 1
                if mode == "vars":
                    if a.full:
                        check(name, d[:, :], want_rows(i, 0, rows), "all rows")
                    else:
                        check(name, d[t:t + 1, :], want_rows(i, t, rows), t)
                elif a.full:
                    for p in range(rows):
                        for y in (0, width - 1):
                            check(name, d[p, y, :], want_plane_row(i, p, y), [p, y])
                else:
                    y = (polls * 37) % width
                    check(name, d[t, y, :], want_plane_row(i, t, y), [t, y])
    except (OSError, KeyError):  # not there yet, or no tick yet
        pass
    now = time.time()
    if rows is not None:
        polls += 1
        i = (i + 1) % n
        if rows > top:
            for k in range(top + 1, rows + 1):
                seen[k] = now
            top = rows
            last_new = now
        elif rows < top:
            back += 1
    if rows is not None and rows <= top and (now - last_new > 5 or (os.path.exists(done_flag) and now - last_new > 1)):
        break
    left = t_poll + a.interval - time.time()
    if left > 0:
        time.sleep(left)
print(json.dumps({"polls": polls, "bad": bad, "bad_examples": examples, "back": back, "rows": top, "seen": seen}))
