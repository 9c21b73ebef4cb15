"""End-to-end tests of h5logreplay's command line and of how it writes OUT.

The input is written by tests/mpi/live_writer.c (closed, TICKS ticks of ROWS
rows): as of tick k, /stamp is [k], /w is all k and /v has k * ROWS rows, row
i all i // ROWS + 1 — so which tick a replay wrote is checked from the
writer's rule, never from the tool. Covered:
  a) OUT naming IN (the same name, a hard link, a symbolic link either way,
     IN's journal sidecar) is refused with a message naming the file, and IN
     is unchanged byte for byte;
  b) OUT is replaced atomically: a failed replay (a tick that does not exist,
     a write error once the output is under way, SIGTERM mid-way) leaves a
     pre-existing OUT as it was and no temporary behind, and while a replay
     runs OUT still holds the old file;
  c) options anywhere (IN OUT --tick N, --tick N IN OUT, --tick=N, --), and
     every malformed tick a usage error (exit 2) that names the value.
Run with /usr/bin/python3 -m pytest.
"""
import hashlib
import os
import resource
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from h5ltest import BIN, ENV, LIVE_WRITER, TEST_WRITER

REPLAY = os.path.join(BIN, "h5logreplay")
TICKS, ROWS, NCOLS = 4, 3, 64


def need(path):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (make)")


def write_log(path, ticks=TICKS, rows=ROWS):
    need(LIVE_WRITER)
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(path), "--ticks", str(ticks),
                        "--interval", "0", "--rows-per-tick", str(rows)], env=ENV, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not os.path.exists(str(path) + ".h5lj"), "live_writer left its sidecar: file not closed"


def replay(*args, **kw):
    need(REPLAY)
    return subprocess.run([REPLAY] + [str(a) for a in args], capture_output=True, text=True, timeout=120, **kw)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def leftovers(d):
    return sorted(n for n in os.listdir(d) if ".tmp" in n)


def check_tick(out, k, rows=ROWS):
    """OUT is live_writer's canonical file as of tick k (values from its rule)."""
    with h5py.File(out, "r") as f:
        assert f["stamp"][()].tolist() == [k]
        assert (f["w"][()] == k).all()
        v = f["v"][()]
    assert v.shape == (k * rows, NCOLS)
    want = (np.arange(k * rows) // rows + 1).astype(float)
    assert (v == want[:, None]).all()


@pytest.fixture(scope="module")
def logfile(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    f = d / "run.h5"
    write_log(f)
    return f


@pytest.fixture
def work(tmp_path, logfile):
    """A private copy of the log-layout file: (dir, IN, sha256 of IN)."""
    src = tmp_path / "run.h5"
    with open(logfile, "rb") as a, open(src, "wb") as b:
        b.write(a.read())
    return tmp_path, src, sha(src)


# --------------------------------------------------------------------------
# a) OUT must not be IN


def test_same_file_refused(work):
    d, src, h = work
    os.link(src, d / "hard.h5")
    os.symlink("run.h5", d / "sym.h5")
    cases = [(src, src), (src, d / "hard.h5"), (d / "hard.h5", src), (src, d / "sym.h5"), (d / "sym.h5", src),
             (src, d / "." / "run.h5")]
    for i, o in cases:
        p = replay(i, o)
        assert p.returncode == 1, (i, o, p.returncode, p.stderr)
        assert "same file" in p.stderr and str(o) in p.stderr, p.stderr
        assert sha(src) == h, f"h5logreplay {i} {o} changed its input"
        assert os.path.islink(d / "sym.h5") and leftovers(d) == []
    # and with the options after the names, the order the docs show
    p = replay(src, src, "--tick", 2)
    assert p.returncode == 1 and "same file" in p.stderr, p.stderr
    assert sha(src) == h


def test_journal_of_a_live_file_refused(tmp_path):
    """IN's sidecar journal is part of the input while the file is open."""
    need(TEST_WRITER)
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", TEST_WRITER, str(tmp_path), "--ticks", "4",
                        "--kill-at", "2"], env=ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, "test_writer --kill-at should die"
    src, side = tmp_path / "t.h5", tmp_path / "t.h5.h5lj"
    assert side.exists(), "the killed writer left no sidecar"
    hs, hj = sha(src), sha(side)
    p = replay(src, side)
    assert p.returncode == 1 and str(side) in p.stderr and "journal" in p.stderr, p.stderr
    assert sha(src) == hs and sha(side) == hj
    # the input is still whole: its replay works
    p = replay(src, tmp_path / "ok.h5")
    assert p.returncode == 0, p.stderr


# --------------------------------------------------------------------------
# b) OUT replaced atomically


def test_failed_replay_keeps_existing_out(work):
    d, src, h = work
    out = d / "out.h5"
    out.write_bytes(b"the previous output\n")
    p = replay(src, out, "--tick", TICKS + 1)
    assert p.returncode == 1, p.stderr
    assert f"tick {TICKS + 1} does not exist (newest is {TICKS})" in p.stderr and str(src) in p.stderr
    assert out.read_bytes() == b"the previous output\n" and leftovers(d) == []
    assert sha(src) == h

    # a write error once the output is under way (the file size limit: a
    # quarter of what the whole output takes, measured first)
    p = replay(src, d / "size.h5")
    assert p.returncode == 0, p.stderr
    limit = os.path.getsize(d / "size.h5") // 4
    os.unlink(d / "size.h5")
    assert limit > 4096

    def small_fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    p = replay(src, out, preexec_fn=small_fsize)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert f"{out}: cannot" in p.stderr, p.stderr[-2000:]
    assert out.read_bytes() == b"the previous output\n", "a failed replay damaged the existing OUT"
    assert leftovers(d) == [], "a failed replay left its temporary behind"

    # success replaces it, with the mode it had
    os.chmod(out, 0o640)
    p = replay(src, out)
    assert p.returncode == 0, p.stderr
    check_tick(out, TICKS)
    assert os.stat(out).st_mode & 0o777 == 0o640
    assert leftovers(d) == [] and sha(src) == h
    # a new OUT gets 0666 less the umask, as any created file
    p = replay(src, d / "new.h5", preexec_fn=lambda: os.umask(0o027))
    assert p.returncode == 0 and os.stat(d / "new.h5").st_mode & 0o777 == 0o640


def test_out_unchanged_while_replaying_and_after_sigterm(tmp_path):
    """Stopped mid-replay, OUT still holds the old file; SIGTERM then removes
    the temporary and leaves OUT alone."""
    src = tmp_path / "big.h5"
    write_log(src, ticks=4, rows=16000)  # 32 MiB of /v: a replay takes a while
    out = tmp_path / "out.h5"
    out.write_bytes(b"old\n")
    need(REPLAY)
    p = subprocess.Popen([REPLAY, src, out], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        tmp = []
        deadline = time.monotonic() + 30
        while not tmp and p.poll() is None and time.monotonic() < deadline:
            tmp = leftovers(tmp_path)
        if tmp:
            os.kill(p.pid, signal.SIGSTOP)
        assert tmp, f"never saw the temporary next to OUT (replay exited {p.poll()})"
        assert tmp[0].startswith("out.h5.tmp"), tmp
        assert out.read_bytes() == b"old\n", "OUT changed before the replay finished"
        os.kill(p.pid, signal.SIGTERM)
        os.kill(p.pid, signal.SIGCONT)
        rc = p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == -signal.SIGTERM, (rc, p.stderr.read())
    assert out.read_bytes() == b"old\n" and leftovers(tmp_path) == []


# --------------------------------------------------------------------------
# c) options


def test_options_anywhere(work):
    d, src, h = work
    orders = [
        ([src, d / "a.h5", "--tick", 2], 2),
        (["--tick", 2, src, d / "a.h5"], 2),
        ([src, "--tick", 3, d / "a.h5"], 3),
        ([src, d / "a.h5", "--tick=1"], 1),
        (["--tick=3", src, d / "a.h5"], 3),
        ([src, d / "a.h5"], TICKS),
        (["--tick", 2, "--", src, d / "a.h5"], 2),
    ]
    for args, k in orders:
        p = replay(*args)
        assert p.returncode == 0, (args, p.stderr)
        check_tick(d / "a.h5", k)
    assert sha(src) == h and leftovers(d) == []
    # POSIXLY_CORRECT must not turn "--tick" after the names into a file name
    p = replay(src, d / "b.h5", "--tick", 1, env=dict(os.environ, POSIXLY_CORRECT="1"))
    assert p.returncode == 0, p.stderr
    check_tick(d / "b.h5", 1)
    p = replay("--help")
    assert p.returncode == 0 and "--tick" in p.stdout


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "", "99999999999999999999", "18446744073709551616", "2x",
                                 " 2", "+2", "0x2", "1.5"])
def test_bad_tick_is_a_usage_error(work, bad):
    d, src, h = work
    out = d / "out.h5"
    out.write_bytes(b"keep\n")
    for args in ([src, out, "--tick", bad], ["--tick", bad, src, out], [src, out, f"--tick={bad}"]):
        p = replay(*args)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert f"invalid tick '{bad}'" in p.stderr, p.stderr
        assert "18446744073709551615" not in p.stderr and "newest" not in p.stderr.split("usage")[0]
        assert out.read_bytes() == b"keep\n" and leftovers(d) == []
    assert sha(src) == h


def test_other_usage_errors(work):
    d, src, _ = work
    for args, what in (([src], "got 1"), ([src, d / "o.h5", d / "p.h5"], "got 3"), ([src, d / "o.h5", "--tick"],
                       "--tick needs a value"), (["--bogus", src, d / "o.h5"], "--bogus")):
        p = replay(*args)
        assert p.returncode == 2 and what in p.stderr, (args, p.returncode, p.stderr)
    assert leftovers(d) == [] and not (d / "o.h5").exists()


# A replay of chunks thinly spread over the log: z-plane chunks [128, 128, 1]
# of a [128, 128, 128] float variable written as x-bands by 2 ranks (each
# chunk needs a 4-byte piece of every 512 bytes of both bands), read with
# its siblings in tiles (h5logreplay TILE_BUDGET); tick 2 overwrites a box
# across the bands, tick 3 a few planes only (the tile holds chunks
# written before and after). Every tick equals the numpy model.
TILED_SPEC = "\n".join([
    "create", "dim x 128", "dim y 128", "dim z 128",
    "var /X f4 128,128,1 3 0 1 2",
    "put 0 /X 5 0 0 0 64 128 128", "put 1 /X 6 64 0 0 64 128 128", "flush",
    "put 1 /X 7 40 10 3 50 100 120", "flush",
    "put 0 /X 8 0 0 60 128 128 4", "flush",
    "close", ""])


def test_replay_of_transposed_chunks_in_tiles(tmp_path):
    import difftest
    states = difftest.run_model(TILED_SPEC, 2)
    h5, prob = difftest.write(TILED_SPEC, 2, str(tmp_path / "src"))
    assert prob is None, prob
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    assert not diffs, diffs[:10]
