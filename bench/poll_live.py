"""poll_live.py MNTFILE SECONDS [ROWS] — a reader polling a live file through the mount.

Used by bench/bench_scale.sh and tests/e2e/test_scale.py. Until SECONDS have
passed (or the file's /stamp stops growing for 5 s after the writer ended),
open the file with h5py, read the newest row of every variable (ROWS 0:
only /stamp, the cheap poll of a monitor), check it against live_many.c's
formula, close. Prints one JSON object: the polls made
and, for each tick seen first, the wall time it was seen (so the caller can
compare with the writer's flush times)."""
import json
import sys
import time

import h5py
import numpy as np

path, seconds = sys.argv[1], float(sys.argv[2])
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 1
end = time.time() + seconds
seen = {}
polls = 0
bad = 0
while time.time() < end:
    try:
        with h5py.File(path, "r") as f:
            n = f["stamp"].shape[0]
            if n == 0:
                continue
            names = [k for k in f if k.startswith("v")] if rows else []
            k = int(f["stamp"][n - 1])
            for name in names:
                row = f[name][n - 1, :]
                i = int(name[1:])
                want = np.float32(i * 1000 + n) + np.arange(16, dtype=np.float32) / np.float32(100)
                if row.shape[0] != 16 or not np.array_equal(row, want):
                    bad += 1
        polls += 1
        if k not in seen:
            seen[k] = time.time()
    except (OSError, KeyError):  # not there yet, or tick 0 (no variables yet)
        time.sleep(0.01)
print(json.dumps({"polls": polls, "bad_rows": bad, "seen": seen}))
