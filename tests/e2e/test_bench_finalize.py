"""The finalize benchmark's driver (bench/bench_finalize.py, make
bench-finalize) at tiny sizes, so that it does not rot: one round at N=32
and N=51 (4x the bytes: one ratio per chunking), every chunking, each
finalized file read back with plain libhdf5 (BENCH_VERIFY=1). Its JSON must
parse and hold every documented field; check_doc must reject a document
with any one field missing (test_check_doc_fails_on_a_missing_field).

Run: H5LOG_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/e2e/test_bench_finalize.py
"""
import copy
import json
import os
import subprocess

import pytest

from h5ltest import BUILD, ENV, HERE

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PY = "/usr/bin/python3"
SIZES = [32, 51]
CHUNKINGS = ["N,N,1", "N,N,8", "N,N,64", "64,64,64", "default"]

TOP = {"benchmark", "target", "what", "nranks", "rounds", "statistic", "dir", "page_cache", "warm", "floor_s",
       "loadavg_before", "loadavg_after", "seconds_total", "sizes", "pairs", "chunkings", "ratios_checked",
       "all_targets_met", "verified"}
CHUNKING = {"by_size", "ratios", "targets_met"}
SIZE = {"n", "chunk", "bytes", "finalize_s", "finalize_s_every_round", "finalize_MBps", "finalize_cpu_s", "close_fin_s",
        "close_fin_s_range", "close_fin_MBps", "close_fin_rank_s", "close_fin_cpu_rank_s", "close_fin_machine_cpu_s", "close_nofin_s", "write_flush_s", "fin_layout", "fin_chunk",
        "fin_bytes", "copied_fraction", "file_bytes_fin", "file_bytes_nofin", "allocated_bytes_fin",
        "allocated_bytes_nofin", "verified"}
RATIO = {"n", "bytes_ratio", "time_ratio", "time_ratio_per_round", "limit", "below_floor", "met", "note",
         "close_fin_time_ratio", "cpu_ratio", "fin_bytes_ratio"}


def check_doc(doc):
    """Every field, with values that fit the run (raises AssertionError)."""
    assert set(doc) == TOP, set(doc) ^ TOP
    assert doc["benchmark"] == "bench_finalize" and doc["rounds"] == 1 and doc["nranks"] == 2
    assert doc["verified"] is True
    assert sorted(s["n"] for s in doc["sizes"].values()) == SIZES
    assert all(s["bytes"] == 4 * s["n"] ** 3 for s in doc["sizes"].values())
    assert len(doc["pairs"]) == 1 and doc["ratios_checked"] == len(CHUNKINGS)
    assert isinstance(doc["all_targets_met"], bool)
    assert list(doc["chunkings"]) == CHUNKINGS
    met = True
    for spec, e in doc["chunkings"].items():
        assert set(e) == CHUNKING, (spec, set(e) ^ CHUNKING)
        assert set(e["by_size"]) == set(doc["sizes"]), spec
        for lab, s in e["by_size"].items():
            assert set(s) == SIZE, (spec, lab, set(s) ^ SIZE)
            n = s["n"]
            want = None if spec == "default" else [n if x == "N" else min(int(x), n) for x in spec.split(",")]
            assert s["chunk"] == want, (spec, s["chunk"])
            assert s["bytes"] == 4 * n ** 3 and s["verified"] is True
            assert len(s["finalize_s_every_round"]) == 1 and s["close_fin_s"] > 0 and s["close_nofin_s"] > 0
            assert len(s["close_fin_rank_s"]) == 2 and max(s["close_fin_rank_s"]) == s["close_fin_s"]
            assert len(s["close_fin_cpu_rank_s"]) == 2
            assert set(s["close_fin_machine_cpu_s"]) == {"user", "system", "idle", "iowait", "steal"}
            assert s["fin_layout"] in ("chunked", "contiguous")
            # a finalized file holds at least its data once, and chunks
            # [N,N,c] with c < N (parts of each in every band, not one run
            # of the log) are all copied
            assert s["file_bytes_fin"] >= s["bytes"] and s["file_bytes_nofin"] >= s["bytes"]
            if spec.startswith("N,N,") and s["chunk"][2] < n:
                assert s["fin_bytes"] >= s["bytes"], (spec, s)
        assert set(e["ratios"]) == set(doc["pairs"]), spec
        for k, r in e["ratios"].items():
            assert set(r) == RATIO, (spec, k, set(r) ^ RATIO)
            assert r["n"] == SIZES and abs(r["bytes_ratio"] - (51 / 32) ** 3) < 1e-3
            assert r["limit"] == round(1.1 * r["bytes_ratio"], 3)
            assert e["targets_met"]["%s: time ratio <= %.2f" % (k, r["limit"])] is r["met"]
            met = met and r["met"]
    assert doc["all_targets_met"] is met


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench_finalize")
    env = dict(ENV, BENCH_SIZES=",".join(map(str, SIZES)), BENCH_ROUNDS="1", BENCH_NP="2", BENCH_DIR=str(d),
               BENCH_VERIFY="1", BENCH_CHUNKINGS=" ".join(CHUNKINGS))
    p = subprocess.run([PY, os.path.join(REPO, "bench", "bench_finalize.py"), BUILD], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert os.listdir(d) == [], "files were left behind"
    return p


def test_json_has_every_field(run):
    doc = json.loads(run.stdout)
    check_doc(doc)


def _paths(doc, at=()):
    """Every key path in doc's dicts."""
    for k, v in doc.items():
        yield at + (k,)
        if isinstance(v, dict):
            yield from _paths(v, at + (k,))


def test_check_doc_fails_on_a_missing_field(run):
    doc = json.loads(run.stdout)
    paths = list(_paths(doc))
    assert len(paths) > 100
    for path in paths:
        bad = copy.deepcopy(doc)
        d = bad
        for k in path[:-1]:
            d = d[k]
        del d[path[-1]]
        with pytest.raises((AssertionError, KeyError)):
            check_doc(bad)
