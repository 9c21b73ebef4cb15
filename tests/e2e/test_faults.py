"""Write faults at 1, 2 and 4 ranks: a full file system and injected ones.

tests/mpi/test_faults.c does the writing and checks every call's result and
what libh5log's reader sees at each step. This file runs it
  a) on an 8 MiB tmpfs mounted for the test (always unmounted): ticks until
     the disk is full, a retry after space is freed, then a second file
     whose close fails because the disk stays full;
  b) under the LD_PRELOAD shim tests/fault/fault_shim.c: data, record block
     and journal writes and every step of close made to fail, and the reads
     that move data written early (EIO, a short read);
  c) with the library's allocations failing one at a time (tests/unit/oom.h)
     in puts, flushes (on rank 0, the last rank) and closes;
and asserts that the program's MPI_Finalize returned (exit status 0, no
signal: libhdf5 once crashed there after a failed close). Then every
snapshot the program left (the file, and its sidecar while it has one, at
the moments named in SNAPDIR/expect.txt) is checked by the other readers:
h5logdump --check, h5logreplay (values against the closed form, computed
here with numpy) and the daemon (h5py through the mount).
"""
import os
import subprocess

import h5py
import numpy as np
import pytest

from h5ltest import BIN, BUILD, ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)

FAULTS = os.path.join(BUILD, "tests", "test_faults")
SHIM = os.path.join(BUILD, "tests", "fault_shim.so")
DUMP = os.path.join(BIN, "h5logdump")
REPLAY = os.path.join(BIN, "h5logreplay")
RANKS = [1, 2, 4]


def need(path):
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built (make)")


@pytest.fixture
def small_fs(tmp_path):
    """An 8 MiB tmpfs at tmp_path/small, unmounted whatever happens."""
    d = tmp_path / "small"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8M", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("cannot mount a tmpfs (the test needs root): " + r.stderr)
    try:
        yield d
    finally:
        if subprocess.run(["umount", str(d)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(d)], capture_output=True)


def run_faults(mode, np_, d, snap, extra_env=None):
    need(FAULTS)
    env = dict(ENV, **(extra_env or {}))
    cmd = ["mpirun", "--oversubscribe", "-np", str(np_)]
    for k in sorted(extra_env or {}):
        cmd += ["-x", k]
    p = subprocess.run(cmd + [FAULTS, mode, str(d), str(snap)], env=env, capture_output=True, text=True,
                       timeout=120)
    out = p.stdout + p.stderr
    # MPI_Finalize returned on every rank: no rank died of a signal
    assert "signal" not in out.lower() and "segmentation" not in out.lower(), out[-4000:]
    assert p.returncode == 0, out[-4000:]
    assert f"passed, 0 failed" in p.stdout, out[-4000:]
    return out


def expected(snap):
    """SNAPDIR/expect.txt: (tag, file, ticks, closed, x, w) per snapshot."""
    rows = []
    with open(os.path.join(snap, "expect.txt")) as f:
        for line in f:
            tag, name, ticks, closed, x, w = line.split()
            rows.append((tag, name, int(ticks), int(closed), int(x), int(w)))
    assert rows, f"{snap}: no snapshots"
    return rows


def check_values(f, where, ticks, x, w):
    """A canonical file (h5py handle) as of tick `ticks`: the closed form."""
    v = f["v"][()]
    assert v.shape == (ticks, x), f"{where}: /v shape {v.shape}"
    want = np.arange(1, ticks + 1, dtype=float)[:, None] * 1e6 + np.arange(x, dtype=float)[None, :]
    bad = int(np.sum(v != want))
    assert bad == 0, f"{where}: {bad} values of /v differ"
    got_w = f["w"][()]
    bad = int(np.sum(got_w != ticks * 1e5 + np.arange(w, dtype=float)))
    assert bad == 0, f"{where}: {bad} values of /w differ"
    assert int(np.asarray(f.attrs["tick"]).reshape(-1)[0]) == ticks, f"{where}: attribute tick"


def check_snapshots(snap, tmp_path, h5logfs):
    rows = expected(snap)
    for tag, name, ticks, closed, x, w in rows:
        p = os.path.join(snap, tag, name)
        r = subprocess.run([DUMP, "--check", p], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"h5logdump --check {tag}/{name}:\n{r.stdout[-2000:]}{r.stderr}"
        assert f"OK: {ticks} ticks" in r.stdout, f"{tag}/{name}: {r.stdout[-500:]}"
        if closed >= 0:
            state = "closed by its writer" if closed else "open (being written or writer died)"
            assert f"state: {state}" in r.stdout, f"{tag}/{name}: {r.stdout[:400]}"
        out = tmp_path / f"{tag}.replay.h5"
        r = subprocess.run([REPLAY, p, str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"h5logreplay {tag}/{name}: {r.stderr}"
        with h5py.File(out, "r") as f:
            check_values(f, f"h5logreplay {tag}/{name}", ticks, x, w)
    m = h5logfs(snap)
    for tag, name, ticks, closed, x, w in rows:
        with h5py.File(m.path(tag, name), "r") as f:
            check_values(f, f"daemon {tag}/{name}", ticks, x, w)
    m.assert_alive()


@pytest.mark.parametrize("np_", RANKS)
def test_disk_full(np_, small_fs, tmp_path, h5logfs):
    need(DUMP)
    need(REPLAY)
    snap = tmp_path / "snap"
    snap.mkdir()
    out = run_faults("full", np_, small_fs, snap)
    assert "no space left on device" in out.lower()
    check_snapshots(str(snap), tmp_path, h5logfs)


@pytest.mark.parametrize("np_", RANKS)
def test_injected_faults(np_, tmp_path, h5logfs):
    need(SHIM)
    need(DUMP)
    need(REPLAY)
    d, snap = tmp_path / "files", tmp_path / "snap"
    d.mkdir()
    snap.mkdir()
    # the shim loads before a sanitizer runtime under make asan
    env = {"LD_PRELOAD": SHIM, "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    run_faults("shim", np_, d, snap, env)
    check_snapshots(str(snap), tmp_path, h5logfs)


@pytest.mark.parametrize("np_", RANKS)
def test_out_of_memory(np_, tmp_path, h5logfs):
    """Allocation failures in the writer (test_faults oom): puts, flushes on
    rank 0 and on the last rank, closes; then the flushed file, live and
    closed, through h5logdump --check (its index checkpoints recomputed),
    h5logreplay and the daemon."""
    need(DUMP)
    need(REPLAY)
    d, snap = tmp_path / "files", tmp_path / "snap"
    d.mkdir()
    snap.mkdir()
    out = run_faults("oom", np_, d, snap)
    assert "oom: flushes to tick" in out
    check_snapshots(str(snap), tmp_path, h5logfs)
