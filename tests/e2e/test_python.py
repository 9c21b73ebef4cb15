"""Tests of the Python package h5log (python/h5log, docs/python.md).

Every writing test runs the package under mpirun on 1 and 2 ranks
(helper scripts in this directory, run with `python3 -m mpi4py` so an
exception on one rank aborts the job instead of hanging it) and checks the
file through h5logreplay's canonical copy, read with h5py and netCDF4
against expectations computed here with numpy:

* the differential test's random scripts (difftest.py), performed by
  py_spec_writer.py through h5log, against difftest's numpy model at every
  tick — the same model the C writer is checked against;
* py_cases.py: the documented example, every dtype and byte order,
  attributes, basic slicing (expected: the same assignments applied to a
  numpy array), unlimited lengths, and errors carrying the library's message;
* `make install` puts the package where /usr/bin/python3 finds it for the
  default PREFIX, under PREFIX otherwise, and the installed package finds
  the installed library.

Run: H5LOG_BUILD=$PWD/build /usr/bin/python3 -m pytest -q tests/e2e/test_python.py
"""
import json
import os
import re
import subprocess

import numpy as np
import pytest

import difftest
from h5ltest import BIN, BUILD, ENV, HERE, SAN_ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYDIR = os.path.join(REPO, "python")
PY = "/usr/bin/python3"


PYENV = dict(ENV, PYTHONPATH=os.pathsep.join([PYDIR, HERE]), H5LOG_BUILD=BUILD, **SAN_ENV)


def mpirun(nranks, script, *args, env=PYENV, timeout=120):
    cmd = ["mpirun", "--oversubscribe", "-np", str(nranks), PY, "-m", "mpi4py",
           os.path.join(HERE, script)] + [str(a) for a in args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def replay(src, out, tick=None):
    cmd = [os.path.join(BIN, "h5logreplay")] + (["--tick", str(tick)] if tick else []) + [str(src), str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return str(out)


# --------------------------------------------------------------------------
# the differential test's scripts through the Python writer

# (seed, ranks): the first seeds of test_differential at 1 and 2 ranks
PY_SEEDS = [(s, 1 + (i % 2)) for i, s in enumerate(range(1, 25))]


def write_py(spec, nranks, workdir):
    os.makedirs(workdir, exist_ok=True)
    sp, out = os.path.join(workdir, "spec.txt"), os.path.join(workdir, "d.h5")
    with open(sp, "w") as fh:
        fh.write(spec)
    p = mpirun(nranks, "py_spec_writer.py", sp, out)
    if p.returncode != 0:
        return out, f"py_spec_writer: status {p.returncode}:\n{p.stderr[-3000:]}"
    return out, None


@pytest.mark.parametrize("seed,nranks", PY_SEEDS, ids=[f"seed{s}-np{n}" for s, n in PY_SEEDS])
def test_python_script_equals_model(tmp_path, seed, nranks):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    h5, prob = write_py(spec, nranks, str(tmp_path / "src"))
    if prob:
        pytest.fail(f"seed {seed}: {prob}\n  spec: {tmp_path}/src/spec.txt", pytrace=False)
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    last = replay(h5, tmp_path / "last.h5")
    diffs += difftest.check_netcdf(last, states[-1], "h5logreplay")
    if diffs:
        pytest.fail(difftest.report(seed, nranks, diffs) + f"\n  (Python writer; spec {tmp_path}/src/spec.txt)",
                    pytrace=False)


# restart scripts (difftest.generate_restarts) through File(path, "r+"):
# jobs of 1 and 2 ranks in turn, each after the one before closed or was
# killed
PY_RESTARTS = [(201, (1, 2, 1)), (202, (2, 1, 2)), (205, (2, 2, 1)), (208, (1, 1, 2))]


@pytest.mark.parametrize("seed,ranks", PY_RESTARTS, ids=[f"seed{s}-np{'-'.join(map(str, r))}" for s, r in PY_RESTARTS])
def test_python_restarts_equal_model(tmp_path, seed, ranks):
    spec, ranks = difftest.generate_restarts(seed, ranks)
    states = difftest.run_model(spec, 4)
    src = tmp_path / "src"
    src.mkdir()
    out = src / "d.h5"
    for i, ((_, text, crashes), np_) in enumerate(zip(difftest.split_jobs(spec), ranks)):
        sp = src / f"job{i}.txt"
        sp.write_text(text)
        p = mpirun(np_, "py_spec_writer.py", sp, out)
        assert (p.returncode != 0) == crashes, f"job {i}: status {p.returncode}\n{p.stderr[-3000:]}"
        if crashes:
            assert "failed" not in p.stderr, p.stderr[-3000:]
    diffs = difftest.check_replay(str(out), states, str(tmp_path))
    diffs += difftest.check_h5py(str(out), states[-1], "plain file", finalized=True)
    if diffs:
        pytest.fail(difftest.report(seed, ranks[0], diffs) + f"\n  jobs: {src}", pytrace=False)


def test_python_reopen_shows_the_file(tmp_path):
    """File("a") of an existing file: its dimensions (lengths of the newest
    tick), groups and variables (dtype, chunks, fill) are there; "a" of a
    missing file creates it; "r+" of a missing one fails; a file another
    job writes raises BusyError."""
    r = mpirun(1, "py_cases.py", "reopen", tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(tmp_path / "reopen.rank0.json") as fh:
        got = json.load(fh)
    assert got == {"dims": [["time", 3, True], ["x", 4, False]], "groups": ["g"],
                   "vars": {"/g/temp": ["<f4", [1, 4], -1.0, ["time", "x"]], "/w": ["<i2", None, None, ["x"]]},
                   "ntick": 3, "r+missing": "Error", "busy": "BusyError"}, got
    assert os.path.exists(tmp_path / "reopen.h5.new")
    import h5py
    with h5py.File(tmp_path / "reopen.h5", "r") as h:
        assert h["g/temp"][...].tolist() == [[1] * 4, [1] * 4, [2] * 4, [3] * 4]


@pytest.mark.parametrize("nranks", [1, 2])
def test_early_writes_steady_and_changing_ticks(tmp_path, nranks):
    """early_writes=True (docs/api.md) with tick sizes that repeat, grow on
    the last rank and shrink on rank 0: h5logdump shows the ticks that
    repeat the tick before in the place it reserved (right after its record
    table) and those whose sizes changed moved past it, and h5logreplay of
    every tick equals numpy."""
    import h5py
    last = nranks - 1
    rows = [[2] * nranks for _ in range(9)]
    rows[4][last] = rows[5][last] = 3  # tick 5 overflows its place; 6 has none
    rows[6][0] = 1                     # tick 7 (placed by 6, which repeated 5) shrinks
    h5, _ = run_case(tmp_path, "early", nranks, {"rows": rows})
    p = subprocess.run([os.path.join(BIN, "h5logdump"), h5], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    ticks = [tuple(int(x) for x in m) for m in re.findall(
        r"tick (\d+): ranks \d+, data (\d+) bytes at (\d+), table (\d+) bytes at (\d+)", p.stdout)]
    assert len(ticks) == 9, p.stdout
    placed = {t: d_off == ticks[t - 2][4] + ticks[t - 2][3] for (t, d_size, d_off, t_size, t_off) in ticks[1:]}
    # in their reserved place: 2, 3, 4; moved past it: 5 (grew) and 7
    # (shrank); no place reserved for 6, 8 and 9 (their tick before did not
    # repeat the one before it)
    assert all(placed[t] for t in (2, 3, 4)), (placed, p.stdout)
    assert not placed[5] and not placed[7], (placed, p.stdout)
    want = np.full((4 * 9, 16 * nranks), 9.9692099683868690e+36)
    for t in range(9):
        for r in range(nranks):
            for i in range(rows[t][r]):
                row = 4 * t + i
                want[row, 16 * r:16 * r + 16] = 1000.0 * row + np.arange(16 * r, 16 * r + 16)
        nrow = max(4 * u + rows[u][r] for u in range(t + 1) for r in range(nranks))
        with h5py.File(replay(h5, tmp_path / f"t{t + 1}.h5", tick=t + 1), "r") as f:
            got = f["v"][()]
        assert got.shape == (nrow, 16 * nranks), (t + 1, got.shape)
        assert np.array_equal(got, want[:nrow]), f"tick {t + 1}"


def test_python_seeds_cover_the_features():
    """The seeds above exercise the generator's features (all but 4 ranks)."""
    seen = set()
    for seed, nranks in PY_SEEDS:
        seen |= difftest.features(*difftest.generate(seed, nranks))
    missing = difftest.ALL_FEATURES - seen - {"ranks 4"}
    assert not missing, f"no seed of the Python writer exercises {sorted(missing)}"


def test_python_refused_calls(tmp_path):
    """The calls the C writer must refuse are refused through h5log too
    (as exceptions), and the file holds what the accepted calls wrote."""
    from test_differential import REFUSED, _refused_spec
    spec = _refused_spec(REFUSED)
    states = difftest.run_model(spec, 1)
    h5, prob = write_py(spec, 1, str(tmp_path / "src"))
    assert prob is None, prob
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    assert not diffs, "\n".join(diffs)


# --------------------------------------------------------------------------
# py_cases.py: hand-made cases with numpy expectations


def run_case(tmp_path, case, nranks, args=None):
    extra = []
    if args is not None:
        p = tmp_path / f"{case}.args.json"
        p.write_text(json.dumps(args))
        extra = [p]
    r = mpirun(nranks, "py_cases.py", case, tmp_path, *extra)
    assert r.returncode == 0, f"py_cases.py {case} on {nranks} ranks: status {r.returncode}\n{r.stderr[-3000:]}"
    recs = [json.loads((tmp_path / f"{case}.rank{k}.json").read_text()) for k in range(nranks)]
    return str(tmp_path / f"{case}.h5"), recs


def band(rank, nranks):
    return rank * 64 // nranks, (rank + 1) * 64 // nranks


@pytest.mark.parametrize("nranks", [1, 2])
def test_example(tmp_path, nranks):
    """docs/python.md's example: values, fill and masking, attributes, the
    unlimited dimension, one tick per flush."""
    import h5py
    import netCDF4
    h5, recs = run_case(tmp_path, "example", nranks)
    want = np.array([1000.0 * t + np.arange(64) for t in range(3)], dtype="f4")
    for r in range(nranks):
        want[1, band(r, nranks)[1] - 1] = -999.0  # each band's last column at step 1
        assert recs[r] == {"sizes": [[1, 1, [1, 64]], [2, 2, [2, 64]], [3, 3, [3, 64]]], "closed": True,
                           "tree": [["grp"], ["x"], ["temp"], "/grp/temp", "/grp", True, False],
                           "libmpi": 1}
    out = replay(h5, tmp_path / "canon.h5")
    with h5py.File(out, "r") as f:
        t = f["grp/temp"]
        assert t.dtype == np.dtype("<f4") and t.shape == (3, 64) and t.maxshape == (None, 64)
        assert np.array_equal(t[()], want)
        assert t.fillvalue == -999.0 and t.attrs["units"] == b"K"
        assert f.attrs["title"] == b"run 7"
        assert np.array_equal(f["x"][()], np.arange(64) * 0.5) and f["x"].dtype == np.dtype("<f8")
    with netCDF4.Dataset(out) as ds:
        assert ds.dimensions["time"].isunlimited() and len(ds.dimensions["time"]) == 3
        assert ds.title == "run 7"
        v = ds["grp/temp"]
        assert v.units == "K" and v.dimensions == ("time", "x")
        assert np.array_equal(ds["x"][:], np.arange(64) * 0.5)  # the coordinate variable of x
        got = v[:]
        assert np.array_equal(np.ma.getmaskarray(got), want == -999.0)
        assert np.array_equal(got.filled(-999.0), want)
    # an older tick: h5logreplay --tick 1 holds step 0 only
    with h5py.File(replay(h5, tmp_path / "t1.h5", tick=1), "r") as f:
        assert np.array_equal(f["grp/temp"][()], want[:1])


TYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]


@pytest.mark.parametrize("nranks", [1, 2])
def test_dtypes_and_attributes(tmp_path, nranks):
    """Every integer and float type, native and explicit byte order, as
    variables, 0-d variables, fill values and scalar/1-D attributes."""
    import h5py
    import netCDF4
    h5, _ = run_case(tmp_path, "dtypes", nranks)
    out = replay(h5, tmp_path / "canon.h5")
    with h5py.File(out, "r") as f:
        g = f["types"]
        for t in TYPES:
            for bo, tag in (("=", "n"), ("<", "le"), (">", "be")):
                dt = np.dtype(bo + t).newbyteorder("=") if bo == "=" else np.dtype(bo + t)
                dt = np.dtype(dt.str)  # '=' resolved to this machine's order
                name = f"{t}_{tag}"
                v = g[name]
                assert v.dtype == dt, (name, v.dtype, dt)
                assert np.array_equal(v[()], np.array([99, 1, 4, 7], dtype=dt)), name
                assert v.attrs["_FillValue"].dtype == dt and v.attrs["_FillValue"][0] == 99
                assert v.attrs["kind"] == f"{t} {bo}".encode()
                s = f["scalars"][name]
                assert s.shape == () and s.dtype == dt and s[()] == 42
                a = g.attrs[name]
                assert a.dtype == dt and np.array_equal(a, np.array([1, 2, 3], dtype=dt))
                a = g.attrs[name + "_s"]
                assert a.dtype == dt and a.shape == (1,) and a[0] == 5
        assert f.attrs["pyint"].dtype == np.dtype("<i8") and list(f.attrs["pyint"]) == [3]
        assert f.attrs["pyfloat"].dtype == np.dtype("<f8") and list(f.attrs["pyfloat"]) == [1.5, 2.5]
    with netCDF4.Dataset(out) as ds:
        assert ds.utf8 == "Grad Celsius: °C" and ds.empty == ""
        got = ds["types/f4_be"][:]
        assert list(np.ma.getmaskarray(got)) == [True, False, False, False]


def slicing_ops(nranks):
    """(tick, rank, var, key, value, layout, value dtype): each key a basic
    index, each value something numpy broadcasts into it."""
    a = lambda *shape: (np.arange(int(np.prod(shape))) + 1).reshape(shape)  # noqa: E731
    ops = [
        (0, 0, "c", "[0]", np.arange(8), "C", "i8"),
        (0, 1, "c", "[0, 0:4]", [90, 91, 92, 93], "C", "i8"),       # a later rank wins
        (0, 0, "c", "[1, ::2]", [10, 11, 12, 13], "C", "i8"),
        (0, 1, "c", "[2:4, 1:7:3]", a(2, 2) + 100, "F", "i8"),
        (0, 0, "c", "[-1, -3:]", [20, 21, 22], "C", "i8"),
        (0, 0, "c", "[3, ::-1]", np.arange(8) + 30, "C", "i8"),
        (0, 0, "c", "[2, 0]", 3.7, "C", "f8"),                       # truncated, as numpy does
        (0, 0, "c", "[3, 5:5]", [], "C", "i8"),                       # empty: nothing
        (1, 0, "c", "[..., 7]", np.arange(6) + 40, "C", "i8"),
        (1, 1, "c", "[4:, :3]", a(2, 3) + 200, "T", "i8"),            # given transposed
        (1, 0, "c", "[5, 6:1:-2]", [50, 51, 52], "C", "i8"),
        (1, 1, "c", "[1:3, 5]", 77, "C", "i8"),
        (1, 0, "c", "[0:2, 2:5]", [60, 61, 62], "C", "i8"),           # a row broadcast
        (1, 1, "c", "[::-1, 0]", np.arange(6) + 80, "rev", "i8"),
        (1, 0, "c", "[1:5:2, -2::-3]", a(2, 3) + 300, "C", "i4"),
        (0, 0, "b", "[0, 1:4, ::3]", a(3, 3) * 0.25, "C", "f8"),
        (0, 1, "b", "[1]", 2.5, "C", "f8"),
        (1, 0, "b", "[2, -1, ...]", np.arange(8) * 0.5, "C", "f4"),
        (1, 1, "b", "[3, ::2, 1::2]", a(3, 4) * -1.5, "F", "f8"),
        (2, 0, "b", "[0:2, 5, 7]", [1e300, -1e-300], "C", "f8"),
        (2, 1, "b", "[1:3, 0:2, 0:3]", a(2, 2, 3) * 1.0, "T", "f8"),
    ]
    out = []
    for tick, rank, var, key, value, layout, dt in ops:
        v = np.array(value, dtype=dt)
        if layout == "T":
            v = v.T  # the writer transposes it back
        elif layout == "rev":
            v = v[::-1]
        out.append(dict(tick=tick, rank=rank % nranks, var=var, key=key, value=v.tolist(), layout=layout,
                        dtype=dt, logical=np.array(value, dtype=dt)))
    return out


def first_extent(key):
    """1 + the largest index a key selects along its first dimension."""
    k = eval("np.s_" + key, {"np": np})
    k0 = k[0] if isinstance(k, tuple) else k
    return int(np.atleast_1d(np.arange(100)[k0]).max()) + 1


@pytest.mark.parametrize("nranks", [1, 2])
def test_basic_slicing(tmp_path, nranks):
    """Basic slices (negative, strided, reversed, ellipsis, integers,
    broadcast values, non-contiguous input) give exactly what numpy's
    own assignment gives on an array of the same shape, tick by tick."""
    import h5py
    ops = slicing_ops(nranks)
    nticks = 3
    args = {"nticks": nticks, "ops": [{k: v for k, v in op.items() if k != "logical"} for op in ops]}
    h5, _ = run_case(tmp_path, "slicing", nranks, args)
    want = {"c": np.full((6, 8), -1, dtype="<i4"), "b": np.full((4, 6, 8), -1.0, dtype=">f8")}
    for tick in range(nticks):
        for op in sorted((o for o in ops if o["tick"] == tick), key=lambda o: o["rank"]):  # stable
            want[op["var"]][eval("np.s_" + op["key"], {"np": np})] = op["logical"]
        with h5py.File(replay(h5, tmp_path / f"t{tick}.h5", tick=tick + 1), "r") as f:
            assert np.array_equal(f["c"][()], want["c"]), f"tick {tick + 1}:\n{f['c'][()]}\n{want['c']}"
            nt = max(first_extent(o["key"]) for o in ops if o["var"] == "b" and o["tick"] <= tick)
            b = f["g/b"]
            assert b.dtype == np.dtype(">f8") and b.shape == (nt, 6, 8) and b.chunks == (2, 3, 4)
            assert np.array_equal(b[()], want["b"][:nt]), f"tick {tick + 1}"


@pytest.mark.parametrize("nranks", [1, 2])
def test_unlimited_lengths(tmp_path, nranks):
    """An unlimited dimension grows to the largest extent any rank wrote;
    after a flush every rank knows that length; negative indices and
    open slices refer to it."""
    import h5py
    h5, recs = run_case(tmp_path, "unlimited", nranks)
    n = 3 * nranks
    for r, rec in enumerate(recs):
        assert rec == {"before": 0, "local": 3 * (r + 1), "after1": n, "after2": n + 3, "shape_w": [n + 3, 2]}
    u = np.full(n + 3, -5, dtype="<i4")
    u[:n] = np.arange(n)
    u[n - 1], u[n + 1:] = 100, [200, 201]
    w = np.full((n + 3, 2), -32767, dtype="<i2")  # netCDF's default fill for short
    w[2:] = 9
    with h5py.File(replay(h5, tmp_path / "c.h5"), "r") as f:
        assert np.array_equal(f["u"][()], u) and np.array_equal(f["w"][()], w)


@pytest.mark.parametrize("nranks", [1, 2])
def test_errors_carry_the_library_message(tmp_path, nranks):
    """Errors raise on every rank: the library's refusals as h5log.Error
    subclasses with its message (file, object, reason), the package's own
    as ValueError/TypeError/IndexError."""
    h5, recs = run_case(tmp_path, "errors", nranks)
    path = str(tmp_path / "errors.h5")
    for rec in recs:
        def check(name, cls, code, *words):
            got = rec[name]
            assert got is not None, f"{name}: no exception"
            assert got[0] == cls and got[1] == code and got[3] == (code is not None), (name, got)
            for w in words:
                assert w in got[2], (name, w, got[2])
        check("create_missing_dir", "IOFailure", "H5L_EIO", str(tmp_path / "no" / "such" / "dir.h5"),
              "No such file or directory")
        check("mode_r", "ValueError", None, "mode 'r'")
        check("put_outside_fixed", "RangeError", "H5L_ERANGE", path, "'/v'", "start 70 + count 1 exceeds length 64")
        check("slice_outside_fixed", "RangeError", "H5L_ERANGE", path, "start 60 + count 10 exceeds length 64")
        check("reserved_attr", "InvalidError", "H5L_EINVAL", path, "DIMENSION_LIST", "reserved")
        check("bool_dtype", "TypeError", None, "bool")
        check("unknown_dim", "ValueError", None, "'nope'")
        check("shape_mismatch", "ValueError", None, "(5,)", "(4,)")
        check("buffer_full", "BufferFullError", "H5L_ENOBUFS", path, "flush")
        check("fancy_index", "IndexError", None, "basic indexing")
        check("bool_index", "IndexError", None, "boolean")
        check("fill_out_of_range", "ValueError", None, "300", "uint8")
        check("fill_fraction", "ValueError", None, "1.5", "int32")
        check("late_fill", "StateError", "H5L_ESTATE", path, "before the flush")
        check("put_after_close", "ValueError", None, "closed")
        assert rec["close_again"] is None
        if nranks > 1:
            check("mismatch_flush", "MismatchError", "H5L_EMISMATCH", path, "different definitions")
            check("close", "MismatchError", "H5L_EMISMATCH", "closed with ticks 1..1")
        else:
            assert rec["close"] is None
    # what was accepted is in the file: tick 1 holds v[0, :]
    import h5py
    with h5py.File(replay(h5, tmp_path / "c.h5"), "r") as f:
        assert np.array_equal(f["v"][0], np.arange(64, dtype="f4")) and f["v"].shape == (1, 64)
        assert "u8" not in f and "i4" not in f and "b" not in f  # refused before anything was defined


@pytest.mark.parametrize("nranks", [1, 2])
def test_exception_in_with_block(tmp_path, nranks):
    """One rank raises inside `with h5log.File(...)`: one rank closes the
    file; several abort (no hang in a collective close) and leave every
    committed tick readable."""
    import h5py
    r = mpirun(nranks, "py_cases.py", "crash", tmp_path, timeout=60)
    assert r.returncode != 0 and "simulated failure on the last rank" in r.stderr
    h5 = tmp_path / "crash.h5"
    assert os.path.exists(str(h5) + ".h5lj") == (nranks > 1)  # live: the journal sidecar is kept
    with h5py.File(replay(h5, tmp_path / "c.h5"), "r") as f:  # one rank: the close published the pending put
        assert list(f["v"][()]) == ([9] if nranks == 1 else [1]) + [2, 3, 4]


def test_docs_example(tmp_path):
    """docs/python.md's example runs as written, on 2 ranks."""
    import h5py
    import re
    with open(os.path.join(REPO, "docs", "python.md")) as fh:
        code = re.search(r"## Example\n\n```python\n(.*?)```", fh.read(), re.S).group(1)
    (tmp_path / "write.py").write_text(code)
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", PY, "-m", "mpi4py", "write.py"], cwd=tmp_path,
                       env=PYENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    with h5py.File(replay(tmp_path / "out.h5", tmp_path / "c.h5"), "r") as f:
        want = np.repeat(280.0 + np.arange(10, dtype="f4").reshape(-1, 1), 64, axis=1)
        assert np.array_equal(f["grp/temp"][()], want) and f["grp/temp"].attrs["units"] == b"K"


def test_error_classes():
    """The exception classes derive from the matching Python ones (in a
    separate process: the library is not loaded into pytest's)."""
    code = ("import h5log\n"
            "assert issubclass(h5log.RangeError, IndexError) and issubclass(h5log.RangeError, h5log.Error)\n"
            "assert issubclass(h5log.InvalidError, ValueError) and issubclass(h5log.TypeMismatchError, TypeError)\n"
            "assert issubclass(h5log.MismatchError, h5log.Error) and issubclass(h5log.IOFailure, h5log.Error)\n")
    p = subprocess.run([PY, "-c", code], env=PYENV, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


# --------------------------------------------------------------------------
# make install


def _install(destdir, *args):
    cmd = ["make", "--no-print-directory", "-C", REPO, "install", f"DESTDIR={destdir}", f"BUILD={BUILD}"] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"make install failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def _sys_path():
    p = subprocess.run([PY, "-c", "import json, sys; print(json.dumps(sys.path))"], capture_output=True,
                       text=True, env={"PATH": os.environ["PATH"]}, timeout=60)
    return json.loads(p.stdout)


@pytest.mark.parametrize("prefix", ["/usr/local", "/opt/h5logtest"])
def test_make_install(tmp_path, prefix):
    """The package lands in PREFIX/lib/pythonX.Y/dist-packages — a
    directory /usr/bin/python3 searches when PREFIX is the default — and
    names the installed library; from there it writes a file."""
    import h5py
    stage = tmp_path / "stage"
    _install(stage, f"PREFIX={prefix}")
    ver = "%d.%d" % tuple(json.loads(subprocess.run(
        [PY, "-c", "import json, sys; print(json.dumps(sys.version_info[:2]))"],
        capture_output=True, text=True).stdout))
    pydir = f"{prefix}/lib/python{ver}/dist-packages"
    assert os.path.isfile(f"{stage}{pydir}/h5log/__init__.py")
    if prefix == "/usr/local":
        assert pydir in _sys_path()
    else:
        assert pydir not in _sys_path()  # documented: PYTHONPATH for another PREFIX
    cfg = (stage / pydir.lstrip("/") / "h5log" / "_config.py").read_text()
    assert f'LIBRARY = "{prefix}/lib/libh5log.so.0"' in cfg
    assert os.path.exists(f"{stage}{prefix}/lib/libh5log.so.0")
    # the staged package and library, nothing of the build tree
    env = {k: v for k, v in ENV.items() if k not in ("H5LOG_BUILD", "H5LOG_LIBRARY", "PYTHONPATH")}
    env.update(PYTHONPATH=f"{stage}{pydir}", LD_LIBRARY_PATH=f"{stage}{prefix}/lib", PYTHONDONTWRITEBYTECODE="1",
               **SAN_ENV)
    script = tmp_path / "w.py"
    script.write_text("import h5log, numpy as np\n"
                      "from mpi4py import MPI\n"
                      "import h5log._lib as L\n"
                      f"assert L.path == 'libh5log.so.0' or L.path.startswith('{stage}'), L.path\n"
                      f"with h5log.File('{tmp_path}/i.h5', 'w') as f:\n"
                      "    f.dimensions['x'] = 3\n"
                      "    f.create_variable('v', ('x',), 'u2')[:] = [4, 5, 6]\n"
                      "print(h5log.__file__)\n")
    p = subprocess.run(["mpirun", "-np", "1", PY, str(script)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"{stage}{pydir}/h5log/__init__.py"
    with h5py.File(replay(tmp_path / "i.h5", tmp_path / "c.h5"), "r") as f:
        assert list(f["v"][()]) == [4, 5, 6] and f["v"].dtype == np.dtype("<u2")
    p = subprocess.run(["make", "--no-print-directory", "-C", REPO, "uninstall", f"DESTDIR={stage}",
                        f"PREFIX={prefix}", f"BUILD={BUILD}"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and not os.path.exists(f"{stage}{pydir}/h5log")


def test_opts_struct_matches_the_header(tmp_path):
    """The package's h5l_opts_t has the C compiler's size and offsets:
    h5l_opts_init writes the whole struct, so a shorter ctypes mirror is a
    write past its end (it was: a segfault once the header grew)."""
    src = tmp_path / "sz.c"
    src.write_text("#include <stddef.h>\n#include <stdio.h>\n#include \"h5log.h\"\n"
                   "int main(void) { printf(\"%zu %zu %zu\\n\", sizeof(h5l_opts_t), "
                   "offsetof(h5l_opts_t, no_finalize), offsetof(h5l_opts_t, reserved_)); "
                   "printf(\"%zu\\n\", offsetof(h5l_opts_t, early_writes)); return 0; }\n")
    cflags = subprocess.run(["pkg-config", "--cflags", "hdf5"], capture_output=True, text=True).stdout.split()
    exe = tmp_path / "sz"
    subprocess.run(["cc", "-I", os.path.join(REPO, "libcore", "include"), *cflags, str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    want = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    code = ("import ctypes, sys; sys.path.insert(0, sys.argv[1]); from h5log import _lib as L; "
            "print(ctypes.sizeof(L.Opts), L.Opts.no_finalize.offset, L.Opts.reserved_.offset); "
            "print(L.Opts.early_writes.offset)")
    got = subprocess.run([PY, "-c", code, PYDIR], capture_output=True, text=True, env=PYENV)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == want


def write_closed(tmp_path, body):
    """Run BODY (Python with np, h5log, sys and c, the world communicator;
    it writes the file sys.argv[1]) at 2 ranks into src/x.h5; the source
    directory and the writer's completed process."""
    src = tmp_path / "src"
    src.mkdir()
    script = tmp_path / "w.py"
    script.write_text("import sys, numpy as np, h5log\nfrom mpi4py import MPI\nc = MPI.COMM_WORLD\n" + body)
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", PY, "-m", "mpi4py", str(script), str(src / "x.h5")],
                       env=PYENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return src, p


def stats_line(m, name):
    """The daemon's statistics line of file NAME (.h5logfs-stats)."""
    with open(m.path(".h5logfs-stats")) as fh:
        return next(l for l in fh if name in l)


def test_header_look_assembles_nothing(tmp_path, h5logfs):
    """A closed 64 MiB file whose z-plane chunks cut across the x-slabs the
    ranks wrote: its first chunk is assembled with its siblings in a pass
    over the whole log. A fresh daemon serving a first look at the metadata
    (h5py opens the file and asks shape, chunks and attributes, as xarray
    and netCDF do) must not pay that pass: the kernel's readahead past the
    metadata must not reach the first chunk (skel.c: raw_gap). Then the
    whole variable reads right, its chunks assembled in tiles."""
    src, _ = write_closed(
        tmp_path,
        "with h5log.File(sys.argv[1], 'w', comm=c) as f:\n"
        "    f.dimensions = {'x': 256, 'y': 256, 'z': 256}\n"
        "    v = f.create_variable('/X', ('x', 'y', 'z'), 'f4', chunks=(256, 256, 1))\n"
        "    v.attrs['units'] = 'K'\n"
        "    lo = c.rank * 128\n"
        "    v[lo:lo + 128] = np.arange(128 * 256 * 256, dtype='f4').reshape(128, 256, 256) + lo * 256 * 256\n")
    m = h5logfs(src)
    import h5py

    def stats():
        line = stats_line(m, "x.h5")
        return (int(line.split("assembled ")[1].split()[0]), int(line.split("sibling tiles ")[1].split(",")[0]))

    with h5py.File(m.path("x.h5"), "r") as f:
        d = f["X"]
        assert d.shape == (256, 256, 256) and d.chunks == (256, 256, 1) and d.attrs["units"] in (b"K", "K")
    assert stats() == (0, 0)
    with h5py.File(m.path("x.h5"), "r") as f:
        x = f["X"][...]
    assert (x.ravel() == np.arange(256 ** 3, dtype="f4")).all()
    assembled, tiles = stats()
    assert tiles >= 1 and assembled >= 256 ** 3 * 4


def test_transposed_read_drops_each_log_byte_once(tmp_path, h5logfs):
    """A closed file whose chunks cut across what each rank wrote (ranks
    wrote x-slabs, chunks are z-planes): reading it through the mount, every
    chunk takes a few bytes of every checksum segment. The daemon's
    drop-behind must count what it delivered, not the segments it verified:
    counting those dropped the log's pages after the first chunk and read
    the log again from disk for every chunk (1 GB for 8 MiB)."""
    src, p = write_closed(
        tmp_path,
        "def rchar():\n"
        "    return int([l for l in open('/proc/self/io') if l.startswith('rchar')][0].split()[1])\n"
        "with h5log.File(sys.argv[1], 'w', comm=c) as f:\n"
        "    f.dimensions = {'x': 128, 'y': 128, 'z': 128}\n"
        "    v = f.create_variable('/X', ('x', 'y', 'z'), 'f4', chunks=(128, 128, 1))\n"
        "    lo = c.rank * 64\n"
        "    v[lo:lo + 64] = np.arange(64 * 128 * 128, dtype='f4').reshape(64, 128, 128) + lo * 128 * 128\n"
        "    f.flush()\n"
        "    r0 = rchar()\n"
        "if c.rank == 0:\n"
        "    print('close read', rchar() - r0)\n")
    # finalizing at close (rank 0) reads the log's 8 MiB about once, not once
    # per chunk: each z-plane chunk touches every record (1 GiB, 13 s, before
    # rows of chunks were read at once)
    closed_read = int(p.stdout.split("close read ")[1].split()[0])
    assert closed_read < 4 * (8 << 20), p.stdout
    m = h5logfs(src)
    import h5py
    with h5py.File(m.path("x.h5"), "r") as f:
        x = f["X"][...]
    assert (x.ravel() == np.arange(128 ** 3, dtype="f4")).all()
    line = stats_line(m, "x.h5")
    dropped = int(line.split("log dropped ")[1].split()[0])
    assert 0 < dropped <= (8 << 20) + (2 << 20), line  # the log's 8 MiB once (plus a partial segment)
