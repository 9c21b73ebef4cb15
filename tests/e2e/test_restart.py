"""Restarts (issue 31): h5l_open goes on writing a file, on any number of
ranks, after its writer closed it or was killed.

* Restart scripts (difftest.generate_restarts): jobs of 1, 2 and 4 ranks one
  after another on one file, each reopening it (spec_writer `open N`) after
  the one before closed it or died right after a flush (`crash`), each
  defining and writing more. Every tick of the final file through
  h5logreplay equals the numpy model of the whole script, the closed file
  read plainly (finalized) too, and the mount, started before the first
  job and never remounted, shows the model's newest tick after every job
  and lists every run's ticks in .h5logfs-ticks.
* One writer at a time: two jobs creating one file at once (one wins, the
  other is refused naming the file), an open while another job writes,
  another host's lock (refused, then broken with H5L_LOCK_BREAK=1).
* A damaged journal is refused and the file left byte for byte as it was.

Each of these was seen failing with the code broken on purpose (the commit
message says how). Run with /usr/bin/python3 -m pytest.
"""
import hashlib
import os
import socket
import subprocess
import time

import pytest

import difftest
from h5ltest import BIN, ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)

SPEC_WRITER = difftest.SPEC_WRITER

# (seed, ranks of each job): every job size, growing and shrinking
RESTARTS = [(201, (1, 2, 4)), (202, (4, 2, 1)), (203, (2, 4)), (204, (4, 1, 1, 2)), (205, (2, 2, 4)),
            (206, (1, 4, 2, 1)), (207, (4, 4)), (208, (2, 1, 4))]


def prefix_states(spec, njobs):
    """The model's ticks after the first njobs jobs of a restart script."""
    jobs = difftest.split_jobs(spec)
    text = "".join(t for (_, t, _) in jobs[:njobs])
    return difftest.run_model(text, 4)


@pytest.mark.parametrize("seed,ranks", RESTARTS, ids=[f"seed{s}-np{'-'.join(map(str, r))}" for s, r in RESTARTS])
def test_restart_script_equals_model(tmp_path, h5logfs, seed, ranks):
    spec, ranks = difftest.generate_restarts(seed, ranks)
    states = difftest.run_model(spec, 4)
    src = tmp_path / "src"
    src.mkdir()
    (src / "spec.txt").write_text(spec)
    m = h5logfs(src)
    diffs = []

    def after_job(i, h5):
        # the mount follows the reopened file without a remount
        st = prefix_states(spec, i + 1)
        diffs.extend(d + f" (after job {i})" for d in difftest.check_mount(m.path(os.path.basename(h5)), st[-1]))

    h5, prob = difftest.write_restarts(spec, ranks, str(src), after_job=after_job)
    if prob:
        pytest.fail(difftest.report(seed, ranks[0], [prob]) + f"\n  spec: {src}/spec.txt", pytrace=False)
    assert not os.path.exists(h5 + ".h5lj"), "the closed file's sidecar is still there"
    assert not os.path.exists(h5 + ".h5lock"), "the lock file outlived the last close"
    diffs += difftest.check_replay(h5, states, str(tmp_path))
    diffs += difftest.check_h5py(h5, states[-1], "plain file", finalized=True)
    names = sorted(int(n[:-3]) for n in os.listdir(m.path(".h5logfs-ticks", os.path.basename(h5))))
    if names != list(range(1, len(states) + 1)):
        diffs.append(f"mount: .h5logfs-ticks lists ticks {names}, expected 1..{len(states)}")
    m.assert_alive()
    if diffs:
        pytest.fail(difftest.report(seed, ranks[0], diffs) + f"\n  spec: {src}/spec.txt", pytrace=False)


@pytest.mark.parametrize("seed,ranks", RESTARTS[:4], ids=[f"seed{s}" for s, _ in RESTARTS[:4]])
def test_restart_checkpoint_chain_goes_on(tmp_path, seed, ranks):
    """With a checkpoint every 2 ticks (H5L_CKPT_TICKS=2), the chain goes on
    across every restart (after a close and after a kill): the closed file
    has one checkpoint per two ticks, every one verified by h5logdump
    --check, and still equals the model at every tick."""
    spec, ranks = difftest.generate_restarts(seed, ranks)
    states = difftest.run_model(spec, 4)
    h5, prob = difftest.write_restarts(spec, ranks, str(tmp_path / "src"), env={"H5L_CKPT_TICKS": "2"})
    assert prob is None, prob
    out = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", h5], capture_output=True, text=True)
    want = f"OK: {len(states)} ticks"
    assert out.returncode == 0 and want in out.stdout, out.stdout[-2000:] + out.stderr
    assert f", {len(states) // 2} index checkpoints;" in out.stdout, out.stdout
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    assert not diffs, difftest.report(seed, ranks[0], diffs)


def test_restart_seeds_cover_jobs():
    """The fixed list restarts after a close and after a crash, and runs
    jobs of 1, 2 and 4 ranks after a restart."""
    crash = close = 0
    sizes = set()
    for seed, ranks in RESTARTS:
        spec, ranks = difftest.generate_restarts(seed, ranks)
        jobs = difftest.split_jobs(spec)
        crash += sum(c for (_, _, c) in jobs[:-1])
        close += sum(not c for (_, _, c) in jobs[:-1])
        sizes |= {nr for (nr, _, _) in jobs[1:]}
    assert crash >= 2 and close >= 2 and sizes == {1, 2, 4}, (crash, close, sizes)


# --------------------------------------------------------------------------
# one writer at a time

SLOW = """create
dim t U
var /v i4 - 1 0
put 0 /v 1 0 1
flush
put 0 /v 2 1 1
flush
put 0 /v 3 2 1
flush
close
"""


def spec_job(tmp_path, name, text, np_=1, env=None, wait=True):
    sp = tmp_path / name
    sp.write_text(text)
    cmd = ["mpirun", "--oversubscribe", "-np", str(np_), SPEC_WRITER, str(sp), str(tmp_path / "d.h5")]
    p = subprocess.Popen(cmd, env=dict(ENV, **(env or {})), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    if not wait:
        return p
    out, err = p.communicate(timeout=120)
    return p.returncode, out + err


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_two_creates_race_one_wins(tmp_path):
    """Two jobs create the same file at the same moment: exactly one writes
    it, the other is refused with H5L_EBUSY naming the file."""
    env = {"SPEC_WRITER_FLUSH_PAUSE_MS": "300"}
    a = spec_job(tmp_path, "a.txt", SLOW, env=env, wait=False)
    b = spec_job(tmp_path, "b.txt", SLOW, np_=2, env=env, wait=False)
    ra, rb = a.communicate(timeout=120), b.communicate(timeout=120)
    codes = sorted([a.returncode, b.returncode])
    assert codes[0] == 0 and codes[1] != 0, (a.returncode, ra, b.returncode, rb)
    err = (ra if a.returncode else rb)[1]
    assert "error -17" in err and "d.h5: the file is open for writing by another writer" in err, err
    out = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", str(tmp_path / "d.h5")], capture_output=True,
                         text=True)
    assert out.returncode == 0 and "ticks: 3" in out.stdout, out.stdout + out.stderr
    assert not os.path.exists(tmp_path / "d.h5.h5lock")


def test_open_while_writing_is_refused(tmp_path):
    """h5l_open and h5l_create of a file another job is writing are refused
    and change nothing of it; once that job closed, h5l_open works."""
    a = spec_job(tmp_path, "a.txt", SLOW, env={"SPEC_WRITER_FLUSH_PAUSE_MS": "1500"}, wait=False)
    deadline = time.monotonic() + 30
    while not os.path.exists(tmp_path / "d.h5.h5lock") and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    rc, out = spec_job(tmp_path, "b.txt", "open\nflush\nclose\n", np_=2)
    assert rc != 0 and "d.h5: the file is open for writing by another writer" in out, out
    rc, out = spec_job(tmp_path, "c.txt", "create\nclose\n")
    assert rc != 0 and "open for writing by another writer" in out, out
    _, err = a.communicate(timeout=120)
    assert a.returncode == 0, err
    rc, out = spec_job(tmp_path, "d.txt", "open 2\nput 1 /v 9 3 1\nflush\nclose\n", np_=2)
    assert rc == 0, out
    dump = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", str(tmp_path / "d.h5")], capture_output=True,
                          text=True)
    assert dump.returncode == 0 and "ticks: 4" in dump.stdout, dump.stdout + dump.stderr


def test_other_hosts_lock(tmp_path):
    """A lock of another host cannot be checked from here: refused, naming
    the host and pid; H5L_LOCK_BREAK=1 takes it."""
    rc, out = spec_job(tmp_path, "a.txt", SLOW)
    assert rc == 0, out
    lock = tmp_path / "d.h5.h5lock"
    lock.write_text(f"h5log writer lock\nhost=not-{socket.gethostname()}\npid=1\nstart=1\ntime=1\n")
    before = sha(tmp_path / "d.h5")
    rc, out = spec_job(tmp_path, "b.txt", "open\nclose\n")
    assert rc != 0 and f"process 1 on host not-{socket.gethostname()}" in out and "H5L_LOCK_BREAK" in out, out
    assert sha(tmp_path / "d.h5") == before and lock.exists()
    rc, out = spec_job(tmp_path, "c.txt", "open\nput 0 /v 5 3 1\nflush\nclose\n", env={"H5L_LOCK_BREAK": "1"})
    assert rc == 0, out
    assert not lock.exists()


# --------------------------------------------------------------------------
# a damaged journal


def _damage(path, off):
    with open(path, "r+b") as fh:
        fh.seek(off)
        b = fh.read(1)
        fh.seek(off)
        fh.write(bytes([b[0] ^ 0x40]))


def _frames(path):
    """(offset in the file, type) of each journal frame, from h5logdump."""
    out = subprocess.run([os.path.join(BIN, "h5logdump"), "--records", path], capture_output=True, text=True)
    return out.stdout


@pytest.mark.parametrize("state", ["closed", "killed"])
def test_damaged_journal_refused_untouched(tmp_path, state):
    """A journal damaged in the middle (a payload byte of tick 2's frame,
    with frames after it) makes h5l_open fail with H5L_ECORRUPT, naming the
    file; the file (and the sidecar of a killed writer's file) are byte for
    byte as they were, and no lock file is left."""
    end = "close\n" if state == "closed" else "crash\n"
    rc, out = spec_job(tmp_path, "a.txt", SLOW.replace("close\n", end))
    assert (rc == 0) == (state == "closed"), out
    h5 = str(tmp_path / "d.h5")
    side = h5 + ".h5lj"
    # tick 2's TICK frame: the second frame after the journal's header
    # (tick 1's frame is 24 + 64 + ops bytes; find it by scanning headers)
    import struct
    if state == "closed":
        with open(h5, "rb") as fh:
            ub = fh.read(64)
        joff = struct.unpack_from("<Q", ub, 32)[0]
        jpath, base = h5, joff
    else:
        jpath, base = side, 0
    with open(jpath, "rb") as fh:
        fh.seek(base + 64)
        l1 = struct.unpack("<I", fh.read(4))[0]
    second = base + 64 + ((24 + l1 + 7) & ~7)
    _damage(jpath, second + 24 + 20)  # a payload byte of tick 2's frame
    before = {p: sha(p) for p in (h5, side) if os.path.exists(p)}
    rc, out = spec_job(tmp_path, "b.txt", "open\nput 0 /v 7 3 1\nflush\nclose\n", np_=2)
    assert rc != 0 and "error -10" in out and "d.h5: not opened, its journal is damaged at tick 2" in out, out
    after = {p: sha(p) for p in (h5, side) if os.path.exists(p)}
    assert after == before
    assert not os.path.exists(h5 + ".h5lock")
    if state == "closed":
        assert not os.path.exists(side)


# --------------------------------------------------------------------------
# h5logtail --follow keeps following the file across restarts


def test_h5logtail_follows_restarts(tmp_path):
    """h5logtail --follow on the file prints every row of /v once, in order,
    while the file is closed and reopened, killed and reopened (the same
    file: same identity, same inode). It stopped at the first close before
    (the reader saw CLOSE and waited for a new file under the name)."""
    seeds = [11, 12, 13, 14, 15, 16, 17]
    job0 = "create\ndim t U\nvar /v i4 - 1 0\n" + "".join(f"put 0 /v {s} {i} 1\nflush\n" for i, s in enumerate(seeds[:3])) + "close\n"
    rc, out = spec_job(tmp_path, "j0.txt", job0)
    assert rc == 0, out
    log = open(tmp_path / "tail.out", "w")
    tail = subprocess.Popen([os.path.join(BIN, "h5logtail"), "--follow", "-i", "0.05", "--from", "0", "--no-labels",
                             str(tmp_path / "d.h5"), "/v"], stdout=log, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        rc, out = spec_job(tmp_path, "j1.txt", "open 2\nput 1 /v 14 3 1\nflush\nput 0 /v 15 4 1\nflush\nclose\n", np_=2)
        assert rc == 0, out
        time.sleep(0.5)
        rc, out = spec_job(tmp_path, "j2.txt", "open\nput 0 /v 16 5 1\nflush\ncrash\n")
        assert rc != 0
        time.sleep(0.5)
        rc, out = spec_job(tmp_path, "j3.txt", "open 4\nput 3 /v 17 6 1\nflush\nclose\n", np_=4)
        assert rc == 0, out
        deadline = time.monotonic() + 20
        want = [str(int(difftest.gen_values("i4", s, 1)[0])) for s in seeds]
        while time.monotonic() < deadline:
            got = (tmp_path / "tail.out").read_text().split()
            if len(got) >= len(want):
                break
            time.sleep(0.1)
        assert tail.poll() is None, tail.stderr.read()
    finally:
        tail.send_signal(2)
        _, err = tail.communicate(timeout=20)
        log.close()
    got = (tmp_path / "tail.out").read_text().split()
    assert got == want, f"{got} != {want}\n{err}"
