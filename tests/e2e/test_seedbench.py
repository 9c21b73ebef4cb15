"""The seed benchmark's harness (bench/seed/seedbench.py) on a minimal
setup, so that it does not rot: it must run, write one JSON record per
iteration with the documented fields, verify what it reads against the
pattern it wrote (and say so when the reads differ: a run with a wrong
expectation must fail every read), and draw its plots.

Run: H5LOG_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/e2e/test_seedbench.py
"""
import json
import os
import subprocess

import pytest

from h5ltest import BUILD, ENV, HERE, SAN_ENV

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
FIELDS = {"setup", "run", "kind", "writer", "ranks", "source", "engine", "pattern", "variable",
          "iteration", "cache", "seconds", "bytes", "chunks", "shape", "verified"}


def seedbench(tmp_path, *extra):
    cmd = [PY, os.path.join(REPO, "bench", "seed", "seedbench.py"), "--build", BUILD,
           "--setup", "tiny", "--runs", "run01", "--iterations", "2", "--ranks", "1",
           "--writers", "h5log,h5py", "--engines", "h5py,netCDF4", "--sources", "mount,local",
           "--out", str(tmp_path / "out"), "--workdir", str(tmp_path), *extra]
    p = subprocess.run(cmd, env=dict(ENV, **SAN_ENV), capture_output=True, text=True, timeout=300)
    assert not [d for d in os.listdir(tmp_path) if d.startswith("h5log-seedbench.")], \
        "the temporary directory was left behind"
    return p


def load(tmp_path):
    with open(tmp_path / "out" / "records.json") as f:
        return json.load(f)


def test_records_and_verification(tmp_path):
    p = seedbench(tmp_path)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    assert summary["verified"] is True and summary["errors"] == []
    recs = load(tmp_path)
    assert summary["records"] == len(recs)
    for r in recs:
        assert set(r) == FIELDS, r
        assert r["seconds"] > 0 and r["verified"] is True
        assert r["shape"] == {"X": [16, 8, 8], "Y": [10, 10]}
        assert r["chunks"] == {"X": [16, 8, 1], "Y": [2, 2]}
    writes = [r for r in recs if r["kind"] == "write"]
    # 2 writers x 2 iterations, each of all the data
    assert sorted((r["writer"], r["iteration"]) for r in writes) == \
        [("h5log", 0), ("h5log", 1), ("h5py", 0), ("h5py", 1)]
    assert all(r["bytes"] == 4 * (16 * 8 * 8 + 100) for r in writes)
    reads = [r for r in recs if r["kind"] == "read"]
    per = {}
    for r in reads:
        per.setdefault((r["source"], r["engine"], r["pattern"]), []).append((r["iteration"], r["cache"]))
    # 2 sources x 2 engines x 4 patterns; iterations and cold/warm as documented
    cold = "cold" if summary["machine"]["cold_dropped"] else "warm"
    assert len(per) == 16
    for (src, eng, pat), its in per.items():
        expect = {"header": [(0, cold), (1, "warm")], "variable": [(0, cold)]}.get(
            pat, [(0, cold), (1, "warm")])
        assert its == expect, (src, eng, pat, its)
    for r in reads:
        want = {"header": 0, "variable": 4 * 16 * 8 * 8, "bench_variable": 4 * 16 * 8 * 8,
                "bench_complete": 4 * (16 * 8 * 8 + 100)}[r["pattern"]]
        assert r["bytes"] == want, r
    assert set(summary["ratio_mount_local"]["run01"]) == \
        {k.split("/", 1)[1] for k in summary["read"]["run01"] if k.startswith("mount/")}
    for png in summary["plots"]:
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_wrong_reads_are_caught(tmp_path):
    p = seedbench(tmp_path, "--selftest-wrong-expectation", "--no-plots")
    assert p.returncode == 1
    summary = json.loads(p.stdout)
    assert summary["verified"] is False
    loads = [r for r in load(tmp_path) if r["kind"] == "read" and r["pattern"] != "header"]
    assert loads and not any(r["verified"] for r in loads)
    assert any("differs from what was written" in e for e in summary["errors"])
