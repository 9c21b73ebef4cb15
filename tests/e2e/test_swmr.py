"""The live view of the VFD SWMR RFC's acceptance tests (section 5.3), small:
`make bench-swmr` runs them at the RFC's scale and measures how late each
write is seen; this checks only what a reader sees, never the time.

- Many variables extended round-robin (bench/bench_swmr_writer.c "vars",
  2 ranks, each writing its share of the variables' new row per pass, one
  tick per pass) polled through the mount while they are written: every
  value the reader sees is what the writer wrote (every row of the polled
  variable, from the writer's formula), the number of rows never goes
  back (ticks are monotone), every pass is seen, and at the end every
  variable holds every row.
- Planes of a [time, S, S] int32 variable grown a plane at a time, each
  rank a band of rows: the same checks on the first and last row of every
  plane.

The poller is bench/bench_swmr_poll.py in its --full mode."""
import json
import os
import re
import subprocess
import sys

import h5py
import numpy as np

from h5ltest import BUILD, ENV, h5logfs  # noqa: F401 (fixture)

HERE = os.path.dirname(os.path.abspath(__file__))
WRITER = os.path.join(BUILD, "bench", "bench_swmr_writer")
POLLER = os.path.join(HERE, "..", "..", "bench", "bench_swmr_poll.py")


def run(tmp_path, h5logfs, mode, n, passes, width):  # noqa: F811
    src = tmp_path / "src"
    src.mkdir()
    m = h5logfs(src)
    args = ["--vars", n, "--row", width] if mode == "vars" else ["--planes-vars", n, "--side", width]
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", WRITER, str(src / "s.h5"), mode, "--passes",
                          str(passes), "--flush", "0.2"] + [str(a) for a in args], env=ENV,
                         stdout=subprocess.PIPE, text=True)
    poll = subprocess.Popen([sys.executable, POLLER, m.path("s.h5"), mode, str(n), "120", "--width", str(width),
                             "--interval", "0.02", "--full"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        wout, _ = w.communicate(timeout=120)
    finally:
        (src / "s.h5.done").touch()  # the poller stops a second after the last new tick
        out, err = poll.communicate(timeout=60)
    assert w.returncode == 0, wout
    assert poll.returncode == 0, err
    rec = json.loads(out)
    commits = [int(line.split()[1]) for line in wout.splitlines() if line.startswith("tick ")]
    assert commits == list(range(1, passes + 1)), wout
    assert rec["bad"] == 0, rec["bad_examples"]
    assert rec["back"] == 0, rec
    assert rec["polls"] >= passes, rec
    assert rec["rows"] == passes and sorted(int(k) for k in rec["seen"]) == commits, rec
    m.assert_alive()
    return m


def test_variables_round_robin(tmp_path, h5logfs):  # noqa: F811
    n, passes, width = 300, 12, 4
    m = run(tmp_path, h5logfs, "vars", n, passes, width)
    # the statistics give the index's bytes: at least a record's 64 per record loaded
    with open(m.path(".h5logfs-stats")) as f:
        stats = f.read()
    st = re.search(r"file \S*s\.h5: .*records (\d+),.*index (\d+) B", stats)
    assert st and int(st.group(1)) == n * passes and int(st.group(2)) >= 64 * n * passes, stats
    # every variable, every row, as the writer wrote it
    t = np.arange(passes, dtype=np.uint64)[:, None]
    j = np.arange(width, dtype=np.uint64)[None, :]
    with h5py.File(m.path("s.h5"), "r") as f:
        for i in range(n):
            want = ((t * np.uint64(n) + np.uint64(i)) * np.uint64(width) + j).astype(np.uint32).view(np.int32)
            got = f["v%05d" % i][...]
            assert got.shape == (passes, width) and np.array_equal(got, want), i


def test_planes(tmp_path, h5logfs):  # noqa: F811
    n, passes, side = 3, 8, 64
    m = run(tmp_path, h5logfs, "planes", n, passes, side)
    y = np.arange(side, dtype=np.uint64)[:, None]
    x = np.arange(side, dtype=np.uint64)[None, :]
    with h5py.File(m.path("s.h5"), "r") as f:
        for i in range(n):
            got = f["p%d" % i][...]
            assert got.shape == (passes, side, side)
            for t in range(passes):
                want = (np.uint64(t * 1000003 + i * 7919) + y * np.uint64(side) + x).astype(np.uint32).view(np.int32)
                assert np.array_equal(got[t], want), (i, t)
