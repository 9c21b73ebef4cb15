"""A log-layout file read without the project: plain h5py, netCDF4-python
and ncdump on the file itself (no mount, no h5logreplay).

* Closed by h5l_close (finalized, the default): every variable, attribute,
  dimension and fill value equals the independent numpy model of
  difftest.py at the newest tick, through unmodified h5py and
  netCDF4-python; the project's own readers (h5logreplay at every tick, the
  mount) still read the same file.
* Closed with no_finalize: reading any variable with data fails loudly in
  h5py, netCDF4-python and ncdump — never fill values shown as data; the
  project's tools read it; h5logrecover finalizes it.
* A writer killed before committing tick K: plain clients fail (its HDF5
  metadata was never written out); h5logrecover FILE makes it a closed,
  finalized file equal to the model at tick K-1; a second run has nothing
  to do; a damaged journal or a file whose lock is held is refused and left
  byte for byte as it was.

The model follows the documented semantics (difftest.py), not the code.
Run with /usr/bin/python3 -m pytest.
"""
import fcntl
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import difftest
from h5ltest import BIN, ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)

RECOVER = os.path.join(BIN, "h5logrecover")
DUMP = os.path.join(BIN, "h5logdump")

# 1, 2 and 4 ranks; together they cover every type, byte order, chunking,
# fill kind and overlapping writes (test_differential's
# test_seeds_cover_the_features proves it for its 48; these are 12 of them)
SEEDS = [(s, (1, 2, 4)[i % 3]) for i, s in enumerate(range(1, 13))]


def netcdf_diffs(path, st, label, finalized=False):
    """check_netcdf, less the one expected difference: netCDF shows the
    internal group /_h5log (h5py's check already allows it). finalized:
    path is a finalized file (check_netcdf's)."""
    out = []
    for d in difftest.check_netcdf(path, st, label, finalized=finalized):
        if ": groups names: " in d and "'_h5log'" in d:
            got = d.split(": groups names: ")[1].split(", expected ")
            if got[0].replace("'_h5log', ", "").replace("'_h5log'", "") == got[1]:
                continue
        out.append(d)
    return out


def write(tmp_path, seed, nranks, env_extra=None):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    wd = tmp_path / "src"
    wd.mkdir(exist_ok=True)
    (wd / "spec.txt").write_text(spec)
    h5 = wd / "d.h5"
    env = dict(ENV, **(env_extra or {}))
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", str(nranks), difftest.SPEC_WRITER,
                        str(wd / "spec.txt"), str(h5)], env=env, capture_output=True, text=True, timeout=120)
    return h5, states, p


def recover(path):
    return subprocess.run([RECOVER, str(path)], capture_output=True, text=True, timeout=120)


def fail_report(seed, nranks, diffs):
    return difftest.report(seed, nranks, diffs) + f"\n  rerun: /usr/bin/python3 tests/e2e/soak.py --seed {seed}"


@pytest.mark.parametrize("seed,nranks", SEEDS, ids=[f"seed{s}-np{n}" for s, n in SEEDS])
def test_closed_file_equals_model_in_plain_clients(tmp_path, seed, nranks):
    h5, states, p = write(tmp_path, seed, nranks)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not os.path.exists(str(h5) + ".h5lj")
    diffs = difftest.check_h5py(str(h5), states[-1], "plain file", finalized=True)
    diffs += netcdf_diffs(str(h5), states[-1], "plain file", finalized=True)
    # the project's readers see the same file as before, at every tick
    diffs += difftest.check_replay(str(h5), states, str(tmp_path))
    if diffs:
        pytest.fail(fail_report(seed, nranks, diffs), pytrace=False)


def test_finalized_file_through_the_mount(tmp_path, h5logfs):
    """The mount shows a finalized file as it shows any closed file."""
    seed, nranks = 5, 4
    h5, states, p = write(tmp_path, seed, nranks)
    assert p.returncode == 0, p.stderr[-2000:]
    m = h5logfs(h5.parent)
    path = m.path(h5.name)
    diffs = difftest.check_h5py(path, states[-1], "mount") + difftest.check_netcdf(path, states[-1], "mount")
    m.assert_alive()
    assert not diffs, fail_report(seed, nranks, diffs)


def readable_vars(st):
    """Variables that hold at least one element (an empty one has nothing
    to misread)."""
    return [p for p, v in st.vars.items() if all(n > 0 for n in v["shape"])]


def assert_fails_loudly(h5, st):
    import h5py
    import netCDF4
    paths = readable_vars(st)
    assert paths
    with h5py.File(h5, "r") as f:
        for p in paths:
            with pytest.raises(OSError, match="no data can be read"):
                f[p][()]
    with netCDF4.Dataset(h5, "r") as d:
        for p in paths:
            with pytest.raises(RuntimeError, match="HDF error"):
                d[p][...]
    q = subprocess.run(["ncdump", str(h5)], capture_output=True, text=True, timeout=60)
    assert q.returncode != 0 and "HDF error" in q.stderr, q.stdout[-500:] + q.stderr


@pytest.mark.parametrize("seed,nranks", [(2, 4), (7, 1), (9, 2)])
def test_opted_out_file_fails_loudly_then_recovers(tmp_path, seed, nranks):
    h5, states, p = write(tmp_path, seed, nranks, {"SPEC_WRITER_NO_FINALIZE": "1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert_fails_loudly(str(h5), states[-1])
    assert "closed by its writer, journal embedded, not finalized" in dump_state(h5)
    # the project's tools read it
    diffs = difftest.check_replay(str(h5), states, str(tmp_path))
    assert not diffs, fail_report(seed, nranks, diffs)
    r = recover(h5)
    assert r.returncode == 0 and "finalized at tick" in r.stdout, r.stdout + r.stderr
    assert "closed by its writer, journal embedded, finalized" in dump_state(h5)
    diffs = difftest.check_h5py(str(h5), states[-1], "finalized later", finalized=True)
    diffs += netcdf_diffs(str(h5), states[-1], "finalized later", finalized=True)
    diffs += difftest.check_replay(str(h5), states, str(tmp_path))
    assert not diffs, fail_report(seed, nranks, diffs)
    r = recover(h5)
    assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr


def dump_state(h5):
    """h5logdump's state line of h5."""
    out = subprocess.run([DUMP, str(h5)], capture_output=True, text=True, timeout=60, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("state: ")][0]


def killed(tmp_path, seed, nranks, kill):
    h5, states, p = write(tmp_path, seed, nranks, {"H5L_TEST_KILL_BEFORE_COMMIT": str(kill)})
    assert p.returncode != 0, "the writer was to be killed"
    assert os.path.exists(str(h5) + ".h5lj")
    return h5, states


@pytest.mark.parametrize("seed,nranks,kill", [(3, 4, 3), (8, 1, 2), (11, 2, 3), (12, 4, 2), (4, 2, 1)])
def test_recover_killed_writer(tmp_path, seed, nranks, kill):
    h5, states = killed(tmp_path, seed, nranks, kill)
    assert len(states) >= kill
    r = recover(h5)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"closed and finalized at tick {kill - 1}" in r.stdout
    assert not os.path.exists(str(h5) + ".h5lj")
    dump = subprocess.run([DUMP, "--check", str(h5)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0 and "closed by its writer" in dump.stdout, dump.stdout + dump.stderr
    if kill == 1:  # nothing was committed: a closed file with no tick
        assert f"ticks: 0" in dump.stdout
        return
    want = states[kill - 2]
    diffs = difftest.check_h5py(str(h5), want, "recovered", finalized=True)
    diffs += netcdf_diffs(str(h5), want, "recovered", finalized=True)
    diffs += difftest.check_replay(str(h5), states[:kill - 1], str(tmp_path))
    assert not diffs, fail_report(seed, nranks, diffs)
    r = recover(h5)
    assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("finalize", [True, False], ids=["finalized", "no_finalize"])
def test_closed_file_is_the_size_of_its_data(tmp_path, finalize):
    """A flush of 16 MiB makes the next extent ahead of need (format.md 2);
    close removes it, so the closed file is about its data's size, not up
    to three times that (ls, du --apparent-size and archive tools see the
    hole). The values still read back (finalized: plain h5py)."""
    cmd = ["mpirun", "-np", "2", os.path.join(BIN, "..", "bench", "bench_close"), "--dir", str(tmp_path),
           "--pattern", "a", "--mib", "16"] + ([] if finalize else ["--no-finalize"])
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    path = tmp_path / "close_a.h5"
    assert doc["data_bytes"] == 16 << 20
    assert os.path.getsize(path) <= doc["data_bytes"] + (1 << 20), doc
    d = subprocess.run([DUMP, "--check", str(path)], capture_output=True, text=True, timeout=60)
    assert d.returncode == 0 and "OK: 1 ticks" in d.stdout, d.stdout + d.stderr
    if finalize:
        import h5py
        with h5py.File(path, "r") as f:
            x = f["x"][...]
        # bench_close's values: element i (row-major) is i / 2
        assert np.array_equal(x.ravel(), np.arange(x.size, dtype=np.float64).astype(np.float32) / 2)


def snapshot(d):
    return {n: (d / n).read_bytes() for n in sorted(os.listdir(d))}


def test_recover_refuses_a_damaged_journal(tmp_path):
    seed, nranks = 3, 4
    h5, states = killed(tmp_path, seed, nranks, 3)
    side = str(h5) + ".h5lj"
    # flip a byte inside the first frame's payload (header 64 bytes, frame
    # header 24): tick 1 is damaged with tick 2 after it, not a torn tail
    with open(side, "r+b") as f:
        f.seek(64 + 24 + 20)
        b = f.read(1)
        f.seek(64 + 24 + 20)
        f.write(bytes([b[0] ^ 0x40]))
    before = snapshot(h5.parent)
    r = recover(h5)
    assert r.returncode == 1 and "damaged at tick 1" in r.stderr and "not recovered" in r.stderr, r.stderr
    assert snapshot(h5.parent) == before


def test_recover_refuses_a_locked_file(tmp_path):
    """A writer still running holds the file's lock (libhdf5's flock)."""
    h5, states = killed(tmp_path, 3, 4, 3)
    before = snapshot(h5.parent)
    with open(h5, "rb") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        r = recover(h5)
    assert r.returncode == 1 and "holds its lock" in r.stderr, r.stderr
    assert snapshot(h5.parent) == before
    r = recover(h5)
    assert r.returncode == 0, r.stderr


def test_recover_usage_and_bad_input(tmp_path):
    assert recover("").returncode == 1
    p = subprocess.run([RECOVER], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr
    plain = tmp_path / "plain.h5"
    import h5py
    with h5py.File(plain, "w") as f:
        f["x"] = np.arange(3)
    before = plain.read_bytes()
    r = recover(plain)
    assert r.returncode == 1 and "not a log-layout file" in r.stderr, r.stderr
    assert plain.read_bytes() == before


# Where finalizing fails (docs/format.md 6), through the fault shim: the
# write of a chunk copied into fin.K (4000 bytes: the one chunk of 1000
# elements two records share), of the chunk index's root node (2096
# bytes: 64 children of 1-D keys), and of a layout message's pointed
# address (8 bytes, after libhdf5 closed the file: the undo reopens it).
FINAL_FAULTS = [("copy", "4000", "finalizing '/a'"), ("index", "2096", "writing the chunk index of '/a'"),
                ("point", "8", "pointing the layout of")]


@pytest.mark.parametrize("where,size,says", FINAL_FAULTS, ids=[f[0] for f in FINAL_FAULTS])
def test_close_that_cannot_finalize(tmp_path, where, size, says):
    """An I/O error half way through finalizing: the close fails saying
    the file is closed but not finalized; the anchors are back, so plain
    readers fail loudly rather than show chunks never written as fill (or
    read the log through a half-made index); h5logrecover then finalizes
    it to the model's values."""
    shim = os.path.join(os.path.dirname(BIN), "tests", "fault_shim.so")
    # (/b between the two puts of /a: two records, so the chunk they
    # share is copied, the others are in place)
    spec = "\n".join(["create", "dim x 5000", "var /a i4 1000 1 0", "var /b i4 1000 1 0", "put 0 /a 7 0 1500",
                      "put 0 /b 9 0 10", "put 0 /a 8 1500 3500", "flush", "close", ""])
    states = difftest.run_model(spec, 1)
    (tmp_path / "spec.txt").write_text(spec)
    h5 = tmp_path / "d.h5"
    # the shim loads before a sanitizer runtime under make asan
    fault = {"LD_PRELOAD": shim, "H5L_FAULT_PATH": "/d.h5", "H5L_FAULT_SIZE": size, "H5L_FAULT_CALL": "1",
             "H5L_FAULT_KIND": "eio",
             "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    env = dict(ENV, **fault)
    cmd = ["mpirun", "-np", "1"] + sum((["-x", k] for k in fault), []) + [
        difftest.SPEC_WRITER, str(tmp_path / "spec.txt"), str(h5)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, errors="replace", timeout=120)
    assert p.returncode != 0
    assert says in p.stderr and "Input/output error" in p.stderr, p.stderr[-3000:]
    assert "not finalized" in p.stderr and "the file was closed with ticks 1..1" in p.stderr, p.stderr[-3000:]
    assert not os.path.exists(str(h5) + ".h5lj")
    assert_fails_loudly(str(h5), states[-1])
    r = recover(h5)
    assert r.returncode == 0 and "finalized at tick 1" in r.stdout, r.stdout + r.stderr
    diffs = difftest.check_h5py(str(h5), states[-1], "finalized later", finalized=True)
    diffs += netcdf_diffs(str(h5), states[-1], "finalized later", finalized=True)
    assert not diffs, diffs


