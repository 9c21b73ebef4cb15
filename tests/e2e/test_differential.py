"""Model-based differential test of the whole system (difftest.py).

For a fixed list of seeds: a random schema and write script, written by
tests/mpi/spec_writer.c on 1, 2 or 4 ranks, must equal an independent numpy
model at every tick (h5logreplay --tick N, read with h5py) and at the newest
tick through the h5logfs mount (h5py and netCDF4-python); a second list of
seeds is written slowly while a reader polls the mount, and every
snapshot it sees must equal the model at its tick (the live path): values with dtype
and byte order, shapes, fill values and netCDF masking, chunking, attributes
with their values, dimensions with their lengths, and the order in which the
writer defined variables, groups, dimensions and attributes. A failure names
the seed; `python3 tests/e2e/soak.py --seed S` reruns it and keeps the files.
`make soak SECONDS=N` runs random seeds.

The model follows the documented semantics, not the code: see difftest.py.
Run with /usr/bin/python3 -m pytest (Debian's h5py, numpy, netCDF4).
"""
import os
import re
import subprocess
import time

import numpy as np
import pytest

import difftest
from h5ltest import BIN
from h5ltest import h5logfs  # noqa: F401 (a fixture)

# (seed, ranks): 16 scripts for each job size; about two minutes in all on
# two cores. test_seeds_cover_the_features proves what they exercise.
SEEDS = [(s, (1, 2, 4)[i % 3]) for i, s in enumerate(range(1, 49))]


@pytest.mark.parametrize("seed,nranks", SEEDS, ids=[f"seed{s}-np{n}" for s, n in SEEDS])
def test_script_equals_model(tmp_path, h5logfs, seed, nranks):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    src = tmp_path / "src"
    h5, prob = difftest.write(spec, nranks, str(src))
    if prob:
        pytest.fail(difftest.report(seed, nranks, [prob]) + f"\n  spec: {src}/spec.txt", pytrace=False)
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    m = h5logfs(src)
    path = m.path(os.path.basename(h5))
    diffs += difftest.check_mount(path, states[-1])
    m.assert_alive()
    if diffs:
        pytest.fail(difftest.report(seed, nranks, diffs)
                    + f"\n  rerun: /usr/bin/python3 tests/e2e/soak.py --seed {seed} --ranks {nranks}",
                    pytrace=False)


# (seed, ranks) written slowly (a pause after each flush) while a reader
# polls the mount: the live path (skeletons kept open and patched tick
# after tick, then the closed file's build) against the same model.
LIVE_SEEDS = [(s, (1, 2, 4)[i % 3]) for i, s in enumerate(range(101, 113))]
LIVE_PATCHES = {}  # seed -> skeletons the daemon patched in place for it


@pytest.mark.parametrize("seed,nranks", LIVE_SEEDS, ids=[f"seed{s}-np{n}" for s, n in LIVE_SEEDS])
def test_live_snapshots_equal_model(tmp_path, h5logfs, seed, nranks):
    """Every snapshot a reader sees while the file is written equals the
    model at that snapshot's tick (user.h5logfs.tick): a check counts when
    the tick is the same before and after it (ticks only grow, so both
    h5py's and netCDF4's opens saw that tick); the closed file too."""
    spec, nranks = difftest.generate(seed, nranks, data_ticks=difftest.LIVE_DATA_TICKS)
    states = difftest.run_model(spec, nranks)
    src = tmp_path / "src"
    src.mkdir()
    m = h5logfs(src, opts="tick=0.05")
    proc, h5 = difftest.start_write(spec, nranks, str(src), difftest.LIVE_PAUSE_MS)
    path = m.path(os.path.basename(h5))
    checked, diffs = difftest.check_live(path, states, proc)
    with open(m.path(".h5logfs-stats")) as fh:
        LIVE_PATCHES[seed] = int(re.search(r"patched in place (\d+)", fh.read()).group(1))
    prob = difftest.finish_write(proc)
    print(f"seed {seed}: ticks seen {sorted(checked)} of {len(states)}")
    assert prob is None, prob
    assert len(states) in checked, f"the closed file's tick {len(states)} never showed (saw {sorted(checked)})"
    # a check takes well under the pause: most ticks are seen while newest
    assert len(checked) >= (len(states) + 1) // 2, f"saw only ticks {sorted(checked)} of {len(states)}"
    if diffs:
        pytest.fail(difftest.report(seed, nranks, diffs)
                    + f"\n  rerun: /usr/bin/python3 tests/e2e/soak.py --seed {seed} --ranks {nranks}",
                    pytrace=False)


# A live sparse variable (2^17 chunks of one element): tick 2's wide box
# falls in coarse index cells tick 1 filled but brings chunks 61..63; the
# daemon kept tick 1's skeleton for it and served them as fill.
WIDE_SPEC = """create
dim x 131072
var /v i4 1 1 0
put 0 /v 11 0 61
flush
put 0 /v 22 10 54
flush
put 0 /v 33 100 1
flush
close
"""


def test_live_wide_box_in_old_cells(tmp_path, h5logfs):
    """Rows 50..110 of /v at every tick seen while the file is written
    equal the model's (the whole variable, 2^17 one-element chunks, takes
    seconds to read through h5py, longer than a tick here)."""
    import h5py
    states = difftest.run_model(WIDE_SPEC, 1)
    src = tmp_path / "src"
    src.mkdir()
    m = h5logfs(src, opts="tick=0.05")
    proc, h5 = difftest.start_write(WIDE_SPEC, 1, str(src), 1000)
    path, seen, bad = m.path(os.path.basename(h5)), set(), []
    deadline = time.monotonic() + 60
    while len(seen) < len(states) and time.monotonic() < deadline:
        try:
            t0 = difftest.snapshot_tick(path)
            if t0 == 0 or t0 in seen:
                time.sleep(0.02)
                continue
            with h5py.File(path, "r") as f:
                got = f["v"][50:110]
        except OSError:
            if seen:
                raise
            time.sleep(0.02)
            continue
        if difftest.snapshot_tick(path) != t0:
            continue
        seen.add(t0)
        want = states[t0 - 1].vars["/v"]["data"][50:110]
        if not np.array_equal(got, want):
            bad.append((t0, np.nonzero(got != want)[0][:8] + 50))
    prob = difftest.finish_write(proc)
    assert prob is None, prob
    assert 2 in seen, sorted(seen)
    assert not bad, bad


def test_live_seeds_patch_skeletons():
    """The live seeds above (run before this test) made the daemon patch
    live skeletons in place, the path they are there for, not only build
    them anew."""
    if len(LIVE_PATCHES) < len(LIVE_SEEDS):
        pytest.skip("the live seeds did not all run")
    assert sum(LIVE_PATCHES.values()) >= len(LIVE_SEEDS), LIVE_PATCHES


def test_seeds_cover_the_features():
    """The fixed seeds exercise every feature of the generator, so a change
    of the generator cannot silently drop, say, big-endian types or
    overlapping writes from the suite."""
    seen = set()
    for seed, nranks in SEEDS:
        seen |= difftest.features(*difftest.generate(seed, nranks))
    missing = difftest.ALL_FEATURES - seen
    assert not missing, f"no fixed seed exercises {sorted(missing)}"


def test_model_semantics():
    """The model itself, on a hand-written script whose outcome is worked
    out here by hand: the oracle must not share a mistake with the code."""
    spec = "\n".join([
        "create",
        "dim t U", "dim x 4",
        "var /a i2 - 2 0 1",                 # default fill: -32767
        "var /b >f8 2 1 1", "fill /b " + np.array([-1e30], ">f8").tobytes().hex(),
        "text / title 6f6e65",               # "one"
        "att / n u1 1 07",
        "put 1 /a 11 0 2 1 2",               # rank 1 writes x 2..3: wins over rank 0
        "put 0 /a 22 0 0 1 4",               # rank 0 writes x 0..3 ...
        "put 0 /a 33 0 1 1 2",               # ... then x 1..2: the later call wins
        "flush",
        "att / title i4 1 05000000",         # replaced: keeps its place before "n"
        "put 0 /a 44 0 3 1 1",               # a later tick wins over rank 1
        "put 0 /b 55 2 1",
        "close",                             # publishes tick 2
    ]) + "\n"
    t1, t2 = difftest.run_model(spec, 2)
    g = {s: difftest.gen_values("i2", s, 4) for s in (11, 22, 33, 44)}
    assert t1.dims == [("t", 1, True), ("x", 4, False)]
    assert t1.vars["/a"]["shape"] == (1, 4)
    assert list(t1.vars["/a"]["data"][0]) == [g[22][0], g[33][0], g[11][0], g[11][1]]
    assert list(t2.vars["/a"]["data"][0]) == [g[22][0], g[33][0], g[11][0], g[44][0]]
    assert list(t1.vars["/b"]["data"]) == [-1e30] * 4 and t1.vars["/b"]["dtype"] == np.dtype(">f8")
    assert t2.vars["/b"]["data"][2] == difftest.gen_values(">f8", 55, 1)[0]
    assert not t2.vars["/b"]["written"][0] and t2.vars["/b"]["written"][2]
    assert [n for n, _ in t1.attrs["/"]] == ["title", "n"] and t1.attrs["/"][0][1] == "one"
    assert [n for n, _ in t2.attrs["/"]] == ["title", "n"] and t2.attrs["/"][0][1].dtype == np.dtype("<i4")
    assert difftest._expected_attrs(t1, "/b")[0][0] == "_FillValue"
    assert t1.vars["/a"]["fill"] == -32767 and t1.vars["/a"]["data"].dtype == np.dtype("<i2")
    # the generated values never take the fill values netCDF masks
    for t in difftest.BASE_TYPES:
        v = difftest.gen_values(t, 12345, 100000)
        assert not (v == np.array(difftest.NC_FILL[t], dtype=v.dtype)).any()


# calls the semantics refuse; each must return an error, and the file must
# still hold what the accepted calls wrote
REFUSED = [
    "fail var /big i4 5 1 0",                      # chunk larger than the fixed dimension x (4)
    "fail var /zero i4 1 1 1",                     # chunked over a 0-length dimension
] + [f"fail text {obj} {name} 41" for obj, name in [
    ("/v", "_FillValue"), ("/v", "DIMENSION_LIST"), ("/v", "REFERENCE_LIST"), ("/v", "CLASS"),
    ("/v", "NAME"), ("/v", "_Netcdf4Dimid"), ("/v", "_Netcdf4Coordinates"), ("/", "_NCProperties"),
    ("/", "_nc3_strict"), ("/", "_IsNetcdf4"), ("/", "_SuperblockVersion"), ("/", "_Format"),
    ("/g", "CLASS")]] + [
    "fail att /v _FillValue i2 1 0700",            # _FillValue of another type than the variable's
    "fail att /v _FillValue i4 2 0700000008000000",  # or of more than one element
]


def _refused_spec(lines):
    return "\n".join(["create", "dim x 4", "dim z 0", "grp /g", "var /v i4 - 1 0"] + lines +
                     ["put 0 /v 9 0 4", "flush", "text /v units 4b", "close"]) + "\n"


def _write_and_compare(tmp_path, spec):
    states = difftest.run_model(spec, 1)
    h5, prob = difftest.write(spec, 1, str(tmp_path / "src"))
    if prob:
        pytest.fail(prob, pytrace=False)
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    if diffs:
        pytest.fail("\n".join(diffs), pytrace=False)


def test_refused_calls(tmp_path):
    _write_and_compare(tmp_path, _refused_spec(REFUSED))


def test_fillvalue_attribute_is_the_fill(tmp_path):
    """h5l_put_att(v, "_FillValue", the variable's type, 1 element) is
    h5l_def_var_fill: both scripts give the same canonical file."""
    body = ["create", "dim x 6", "var /v i4 - 1 0", None, "put 0 /v 9 1 2", "flush", "close"]
    outs = []
    for i, line in enumerate(["att /v _FillValue i4 1 07000000", "fill /v 07000000"]):
        spec = "\n".join(line if l is None else l for l in body) + "\n"
        h5, prob = difftest.write(spec, 1, str(tmp_path / f"src{i}"))
        if prob:
            pytest.fail(prob, pytrace=False)
        out = tmp_path / f"out{i}.h5"
        subprocess.run([os.path.join(BIN, "h5logreplay"), h5, str(out)], check=True, timeout=60)
        outs.append(out)
    import h5py
    with h5py.File(outs[0], "r") as a, h5py.File(outs[1], "r") as b:
        assert a["v"].fillvalue == b["v"].fillvalue == 7
        assert list(a["v"].attrs) == list(b["v"].attrs) == ["_FillValue", "DIMENSION_LIST"]
        assert a["v"].attrs["_FillValue"] == 7 and a["v"].attrs["_FillValue"].dtype == np.dtype("<i4")
        assert np.array_equal(a["v"][()], b["v"][()]) and a["v"][0] == 7


def test_refused_late_fill_and_nofill(tmp_path):
    """Fill settings belong before the flush that publishes the variable."""
    spec = ("create\ndim x 4\nvar /v i4 - 1 0\nflush\n"
            "fail fill /v 07000000\nfail nofill /v\nput 0 /v 9 0 4\nclose\n")
    _write_and_compare(tmp_path, spec)


def test_large_tick_after_the_first(tmp_path):
    """A tick whose record is longer than 240 bytes (many definitions), read
    after another record: the journal checksum is computed with a streaming
    XXH3 state, which must be initialised whatever the stack held before
    (found by the random scripts as a 'fails its checksum' on a valid file)."""
    lines = ["create", "dim row U", "var /m i2 - 0", "put 0 /m 5", "flush", "dim lev 8"]
    lines += [f"var /v{i} u2 2,2 2 0 1" for i in range(4)]
    lines += [f"att /v{i} institution f8 1 549f52a3bd0a8a40" for i in range(4)]
    lines += ["put 0 /v3 6 0 0 2 8", "flush", "text / title 41", "close"]
    h5, prob = difftest.write("\n".join(lines) + "\n", 1, str(tmp_path / "src"))
    if prob:
        pytest.fail(prob, pytrace=False)
    # only the journal here: the content is the random scripts' business
    p = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", h5], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "OK: 3 ticks" in p.stdout, p.stdout + p.stderr


def _sparse_spec(seed):
    """Variables whose shapes hold more than 2^16 chunks, so the daemon
    indexes the chunks holding data with chunk B-trees of its own
    (fused/btidx.c), over three ticks: a 1-D int16 one with chunks of 2
    and 5000 chunks written (2-D keys, the case libhdf5's key comparison
    treats apart; three levels of nodes: more than 64^2 chunks), then a
    [t, 3] int32 one with a chunk per row and 4500 rows written at random
    (more bytes of chunk coordinates than the 1-D one's, in fewer chunks),
    and a 3-D one with a default chunk shape and a fill value."""
    rng = np.random.default_rng(seed)
    T = 200_000
    rows = rng.choice(T - 1, size=4500, replace=False)
    rows[-1] = T - 1  # the last chunk of the grid, the tree's right key at its edge
    lines = ["create", "dim t U", "dim x 3", "dim y 2", "var /r i2 2 1 0", "var /s i4 1,3 2 0 1",
             "var /c f8 - 3 0 1 2", "fill /c 000000000000f03f"]
    seeds = iter(range(1, 10**6))
    rchunks = np.array_split(rng.choice(T // 2, size=5000, replace=False), 3)
    for part, rpart in zip(np.array_split(rows, 3), rchunks):
        for r in part:
            lines.append(f"put 0 /s {next(seeds)} {r} 0 1 3")
        for c in rpart:
            lines.append(f"put 0 /r {next(seeds)} {2 * c + c % 2} 1")
        for r in rng.choice(T - 4, size=20, replace=False):
            lines.append(f"put 0 /c {next(seeds)} {r} 1 0 3 2 2")
        lines.append("flush")
    lines.append("close")
    return "\n".join(lines) + "\n"


def _sparse_mount_equals_model(tmp_path, h5logfs, spec):
    """Write spec on one rank, mount it, and check every element through
    the mount against the numpy model: (the mount, the file)."""
    states = difftest.run_model(spec, 1)
    h5, prob = difftest.write(spec, 1, str(tmp_path / "src"))
    if prob:
        pytest.fail(prob, pytrace=False)
    m = h5logfs(tmp_path / "src")
    diffs = difftest.check_mount(m.path(os.path.basename(h5)), states[-1])
    m.assert_alive()
    assert not diffs, "\n".join(diffs[:20])
    return m, h5


def test_sparse_variables_equal_model(tmp_path, h5logfs):
    """Sparse variables through the mount (h5py and netCDF4, every element)
    equal the numpy model: the daemon's own chunk indexes point every
    chunk with data at its bytes, and every other chunk reads as fill."""
    spec = _sparse_spec(7)
    m, h5 = _sparse_mount_equals_model(tmp_path, h5logfs, spec)
    # every variable is sparse and indexed by the daemon: the chunks the
    # puts touch (from the spec and h5py's chunk shapes), once per build
    import h5py
    want = 0
    with h5py.File(m.path(os.path.basename(h5)), "r") as f:
        chunks = {p: f[p].chunks for p in ("s", "r", "c")}
        for p in chunks:
            assert np.prod([-(-n // c) for n, c in zip(f[p].shape, chunks[p])]) > 2**16, (p, chunks[p])
    for p, c in chunks.items():
        seen = set()
        for line in spec.splitlines():
            t = line.split()
            if t[0] == "put" and t[2] == "/" + p:
                nd = len(c)
                st, ct = [int(x) for x in t[4:4 + nd]], [int(x) for x in t[4 + nd:4 + 2 * nd]]
                seen |= {tuple(r // c[0] for r in [row]) + tuple(s // cc for s, cc in zip(st[1:], c[1:]))
                         for row in range(st[0], st[0] + ct[0])}
        want += len(seen)
    stats = open(m.path(".h5logfs-stats")).read()
    own = re.search(r"chunk indexes written by the daemon (\d+) \((\d+) chunks\)", stats)
    builds = int(own.group(1)) // 3 if own else 0
    assert own and builds and int(own.group(1)) == 3 * builds and int(own.group(2)) == want * builds, (want, stats)


@pytest.mark.parametrize("guard", ["root", "layout", "own"])
def test_failed_guard_builds_with_libhdf5_indexes(tmp_path, h5logfs, monkeypatch, guard):
    """When a guard of the daemon's chunk indexes fails (the root libhdf5
    wrote, or an object header the daemon would point at its own root), or
    an own root finds no room in the image (forced by the test daemon's
    hook, as a libhdf5 writing otherwise or a reservation failing would make
    them), the snapshot is built again with libhdf5's own indexes:
    the daemon reports none of its own, logs the guard's reason once, and
    every element still equals the numpy model."""
    import h5ltest
    monkeypatch.setattr(h5ltest, "DAEMON", os.path.join(h5ltest.BUILD, "tests", "h5logfs_hooks"))
    monkeypatch.setenv("H5LOGFS_TEST_BAD_GUARD", guard)
    m, _ = _sparse_mount_equals_model(tmp_path, h5logfs, _sparse_spec(11))
    stats = open(m.path(".h5logfs-stats")).read()
    assert "chunk indexes written by the daemon 0 (0 chunks)" in stats, stats
    assert re.search(r"skeletons: built [1-9]\d* \(failed 0,", stats), stats
    # the guard's reason reaches the log, once per file, and the count
    reason = {"root": "the chunk index libhdf5 began is not the one the daemon writes",
              "layout": "a dataset's layout message is not the one the daemon can point at its index",
              "own": "no room could be reserved for the daemon's own chunk index"}[guard]
    said = [ln for ln in m.stderr().splitlines() if "built with libhdf5's chunk indexes instead" in ln]
    assert len(said) == 1 and reason in said[0], m.stderr()[-3000:]
    assert re.search(r"given up for libhdf5's [1-9]", stats), stats
