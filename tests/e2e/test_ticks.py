"""Time travel through the mount: MNT/.h5logfs-ticks/REL/NAME/N.h5 is tick N.

Every committed tick of a log-layout file is a canonical file under the
hidden ticks tree. What each tick must hold comes from difftest's numpy
model of a random script (not from our reader), read back with unmodified
h5py and netCDF4. Also pinned: the tree mirrors only directories and
log-layout files, lists 1.h5 .. N.h5 in order, is hidden from the root's
listing, refuses ticks not committed and names that are not a tick's, gives
each tick its commit time (mtime and xattr), sees new ticks of a live file,
and keeps an open old tick readable while the file grows; a tick's bytes
are the same whenever they are built (read while newest, read again with
its snapshot rebuilt).
"""
import errno
import os
import re
import subprocess
import time

import h5py
import numpy as np
import pytest

import difftest
from h5ltest import ENV, LIVE_WRITER, wait_for
from h5ltest import h5logfs  # noqa: F401 (a fixture)

TICKS = ".h5logfs-ticks"


def ticks_dir(m, *rel):
    return m.path(TICKS, *rel)


def live_writer(out, ticks, interval, rows):
    """tests/mpi/live_writer on 2 ranks writing out, running (stderr piped)."""
    return subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(out), "--ticks", str(ticks),
                             "--interval", str(interval), "--rows-per-tick", str(rows)],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def write_live(out, ticks, rows):
    """A whole live_writer run without pauses, which must succeed."""
    w = live_writer(out, ticks, 0, rows)
    _, err = w.communicate(timeout=120)
    assert w.returncode == 0, err


@pytest.mark.parametrize("seed,nranks", [(3, 1), (8, 2), (21, 4)])
def test_every_tick_equals_model(tmp_path, h5logfs, seed, nranks):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    src = tmp_path / "src"
    sub = src / "run" / "out"
    h5, prob = difftest.write(spec, nranks, str(sub))
    assert prob is None, prob
    (src / "notes.txt").write_text("not a log file\n")
    m = h5logfs(src)
    name = os.path.basename(h5)
    d = ticks_dir(m, "run", "out", name)
    assert os.path.isdir(d)
    listed = os.listdir(d)
    assert listed == [f"{t}.h5" for t in range(1, len(states) + 1)], listed[:10]
    diffs = []
    for st in states:
        path = os.path.join(d, f"{st.tick}.h5")
        big = difftest.too_big(path, st.tick, "ticks")
        diffs += big or (difftest.check_h5py(path, st, f"ticks/{st.tick}")
                         + difftest.check_netcdf(path, st, f"ticks/{st.tick}"))
    m.assert_alive()
    assert not diffs, difftest.report(seed, nranks, diffs)
    # the tree holds directories and log files only; sidecars and plain files are not in it
    assert sorted(os.listdir(ticks_dir(m))) == ["run"]
    assert sorted(os.listdir(ticks_dir(m, "run", "out"))) == [name]
    assert not os.path.exists(ticks_dir(m, "notes.txt"))
    # hidden at the root, like the statistics file
    assert TICKS not in os.listdir(m.path())
    # not committed, and names that are not a tick's
    n = len(states)
    for bad in (f"{n + 1}.h5", "0.h5", "01.h5", f"{n}.H5", f"{n}", "x.h5", f"{n}.h5.bak", "-1.h5",
                "99999999999999999999999.h5"):
        assert not os.path.exists(os.path.join(d, bad)), bad
    # the newest tick through the tree equals the file itself
    with open(os.path.join(d, f"{n}.h5"), "rb") as a, open(m.path("run", "out", name), "rb") as b:
        assert a.read() == b.read()


def test_times_and_xattrs(tmp_path, h5logfs):
    spec, nranks = difftest.generate(5, 1)
    states = difftest.run_model(spec, nranks)
    src = tmp_path / "src"
    t0 = time.time()
    h5, prob = difftest.write(spec, nranks, str(src))
    t1 = time.time()
    assert prob is None, prob
    m = h5logfs(src)
    d = ticks_dir(m, os.path.basename(h5))
    last = 0
    for st in states:
        p = os.path.join(d, f"{st.tick}.h5")
        assert int(os.getxattr(p, "user.h5logfs.tick")) == st.tick
        s = os.stat(p)
        # the commit time: within the writer's run, ticks in order
        assert t0 - 1 <= s.st_mtime <= t1 + 1
        assert s.st_mtime_ns >= last
        last = s.st_mtime_ns
        sec, _, ns = os.getxattr(p, "user.h5logfs.time").decode().partition(".")
        assert int(sec) * 10**9 + int(ns) == s.st_mtime_ns
        assert s.st_mode & 0o222 == 0
    closed = [int(os.getxattr(os.path.join(d, f"{t.tick}.h5"), "user.h5logfs.closed")) for t in states]
    assert closed == [0] * (len(states) - 1) + [1]


def test_live_file_grows_and_old_tick_stays(tmp_path, h5logfs):
    """A running writer: new ticks appear in the listing; a descriptor open
    on an early tick keeps reading it unchanged while the file grows."""
    src = tmp_path / "src"
    src.mkdir()
    out = src / "live.h5"
    m = h5logfs(src)
    w = live_writer(out, 40, 0.05, 3)
    try:
        d = ticks_dir(m, "live.h5")
        assert wait_for(lambda: os.path.exists(os.path.join(d, "2.h5")), 60), w.stderr.read() if w.poll() else ""
        first = open(os.path.join(d, "1.h5"), "rb")
        img1 = first.read()
        first.seek(0)
        assert wait_for(lambda: len(os.listdir(d)) >= 10, 60)
        assert first.read() == img1
        first.close()
    finally:
        w.wait(timeout=120)
    assert w.returncode == 0, w.stderr.read()
    # every tick, after the writer closed: what live_writer promises of tick k
    d = ticks_dir(m, "live.h5")
    assert wait_for(lambda: len(os.listdir(d)) == 40, 10), len(os.listdir(d))
    for k in range(1, 41):
        with h5py.File(os.path.join(d, f"{k}.h5"), "r") as f:
            assert f["stamp"][0] == k
            assert (f["w"][...] == k).all()
            v = f["v"][...]
            assert v.shape == (3 * k, 64)
            assert (v == (np.arange(3 * k) // 3 + 1)[:, None]).all()


def test_h5logtail_tick_numbers(tmp_path, h5logfs):
    """h5logtail --tick N on the log file and h5logtail on the mount's N.h5
    print the same records: tick N as live_writer defines it."""
    src = tmp_path / "src"
    src.mkdir()
    out = src / "live.h5"
    write_live(out, 9, 2)
    m = h5logfs(src)
    tail = os.path.join(os.path.dirname(LIVE_WRITER), "..", "bin", "h5logtail")

    def rows(*args):
        r = subprocess.run([tail, "--from", "0", "--format", "csv", "-L", *args], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        return [tuple(line.split(",")) for line in r.stdout.splitlines()]

    for k in (1, 4, 9):
        direct = rows("--tick", str(k), str(out), "/v")
        want = [("/v", str(i), str(j), str(i // 2 + 1)) for i in range(2 * k) for j in range(64)]
        assert [(a, b, c, str(int(float(d)))) for a, b, c, d in direct] == want
        mounted = rows(os.path.join(ticks_dir(m, "live.h5"), f"{k}.h5") + "/v")
        assert mounted == direct
    r = subprocess.run([tail, "--tick", "10", str(out), "/v"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "tick 10 is not committed" in r.stderr, r.stderr
    r = subprocess.run([tail, "--tick", "2", m.path("live.h5") + "/v"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and ".h5logfs-ticks" in r.stderr, r.stderr


def test_same_tick_same_bytes(tmp_path, h5logfs):
    """A canonical file is a function of its tick: built twice, a second
    apart (objects carry no modification times), the bytes are the same —
    through h5logreplay, and through the ticks tree before and after the
    file's own name made the newest skeleton."""
    spec, nranks = difftest.generate(11, 1)
    states = difftest.run_model(spec, nranks)
    src = tmp_path / "src"
    h5, prob = difftest.write(spec, nranks, str(src))
    assert prob is None, prob
    replay = os.path.join(os.path.dirname(LIVE_WRITER), "..", "bin", "h5logreplay")
    n = len(states)
    imgs = []
    for i in range(2):
        out = tmp_path / f"r{i}.h5"
        subprocess.run([replay, "--tick", str(n), h5, str(out)], check=True, capture_output=True, timeout=60)
        imgs.append(out.read_bytes())
        time.sleep(1.1)
    assert imgs[0] == imgs[1]
    m = h5logfs(src)
    name = os.path.basename(h5)
    with open(ticks_dir(m, name, f"{n}.h5"), "rb") as f:  # built for the tree (no newest yet)
        a = f.read()
    time.sleep(1.1)
    with open(m.path(name), "rb") as f:                    # built again as the newest
        b = f.read()
    assert a == b


def test_newest_tick_of_a_live_file_same_bytes(tmp_path, h5logfs):
    """The newest tick of a live file, read through the ticks tree while it
    is the newest, has the bytes a fresh daemon serves for that tick once
    the file is closed: not those of the daemon's live skeleton, which is
    patched in place (same objects and values, other bytes). So a tick
    file's bytes are the same whenever they are built, also where each read
    takes its snapshot anew (the kernel skipping opens, fused/fs.c)."""
    src = tmp_path / "src"
    src.mkdir()
    out = src / "live.h5"
    m = h5logfs(src)
    w = live_writer(out, 30, 0.3, 3)
    caught = {}
    try:
        live = m.path("live.h5")

        def tick_now():
            try:
                return int(os.getxattr(live, "user.h5logfs.tick"))
            except OSError:
                return 0

        assert wait_for(lambda: tick_now() >= 3, 60), w.stderr.read() if w.poll() is not None else ""
        while w.poll() is None and len(caught) < 4:
            k = tick_now()
            with h5py.File(live, "r") as f:  # the newest skeleton: the daemon's live one
                assert f["v"].shape == (3 * k, 64) or tick_now() != k
            with open(ticks_dir(m, "live.h5", f"{k}.h5"), "rb") as f:
                data = f.read()
            if tick_now() == k:  # read while k was the newest
                caught[k] = data
            time.sleep(0.05)
    finally:
        w.wait(timeout=120)
    assert w.returncode == 0, w.stderr.read()
    assert len(caught) >= 2, f"only ticks {sorted(caught)} were read while newest"
    fresh = h5logfs(src, name="mnt2")
    for k, data in caught.items():
        with open(ticks_dir(fresh, "live.h5", f"{k}.h5"), "rb") as f:
            assert data == f.read(), f"tick {k}: read while newest, its bytes differ from a fresh build's"


def test_tick_files_read_together(tmp_path, h5logfs):
    """Twelve tick files open at once, read in turns with their pages
    dropped before every read: where the kernel skips opens each read takes
    its tick's snapshot anew, and with more files than the daemon keeps
    snapshots (8) most are built again. Every read gives the bytes the
    first gave, and each file holds its tick as live_writer defines it."""
    src = tmp_path / "src"
    src.mkdir()
    write_live(src / "live.h5", 14, 2)
    m = h5logfs(src)
    ticks = range(2, 14)
    fds = {k: os.open(ticks_dir(m, "live.h5", f"{k}.h5"), os.O_RDONLY) for k in ticks}
    try:
        first = {}
        for rnd in range(3):
            for k in (ticks if rnd % 2 == 0 else reversed(ticks)):
                fd = fds[k]
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                size = os.fstat(fd).st_size
                data = os.pread(fd, size + 1, 0)
                assert len(data) == size
                assert first.setdefault(k, data) == data, f"tick {k}: round {rnd} read other bytes"
    finally:
        for fd in fds.values():
            os.close(fd)
    # the reads did take snapshots anew: far more skeletons than ticks
    stats = open(m.path(".h5logfs-stats")).read()
    built = int(re.search(r"live\.h5: .*?skeletons (\d+)", stats).group(1))
    assert built >= 2 * len(ticks), stats
    for k in ticks:
        with h5py.File(ticks_dir(m, "live.h5", f"{k}.h5"), "r") as f:
            assert f["stamp"][0] == k
            v = f["v"][...]
            assert v.shape == (2 * k, 64) and (v == (np.arange(2 * k) // 2 + 1)[:, None]).all()
    m.assert_alive()


def test_tick_file_of_a_replaced_source(tmp_path, h5logfs):
    """A descriptor open on a tick file whose source is then replaced (a
    new file renamed over it), its pages dropped before each read: while
    the daemon still keeps that tick's snapshot (its last 8) the read gives
    the same bytes; once other ticks pushed it out the source is no longer
    there to build it from, and the read fails with ESTALE, not with other
    bytes and not with a crash, and other files stay readable. (Where the
    kernel sends opens, the descriptor's handle holds its snapshot and every
    read succeeds.)"""
    src = tmp_path / "src"
    src.mkdir()
    write_live(src / "live.h5", 6, 2)
    write_live(src / "other.h5", 12, 1)
    write_live(tmp_path / "new.h5", 4, 3)
    m = h5logfs(src)
    fd = os.open(ticks_dir(m, "live.h5", "3.h5"), os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size

        def read_again():
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return os.pread(fd, size + 1, 0)

        first = read_again()
        assert len(first) == size
        os.replace(tmp_path / "new.h5", src / "live.h5")
        assert read_again() == first  # still in the slots
        for k in range(1, 10):  # nine other ticks push it out
            with open(ticks_dir(m, "other.h5", f"{k}.h5"), "rb") as f:
                assert f.read(8) == b"\x89HDF\r\n\x1a\n"
        opens = open(m.path(".h5logfs-stats")).read()
        if "the kernel skips them" in opens:
            with pytest.raises(OSError) as e:
                read_again()
            assert e.value.errno == errno.ESTALE, e.value
        else:
            assert read_again() == first
    finally:
        os.close(fd)
    with h5py.File(ticks_dir(m, "other.h5", "12.h5"), "r") as f:
        assert f["stamp"][0] == 12
    with h5py.File(m.path("live.h5"), "r") as f:  # the new file, under the old name
        assert f["stamp"][0] == 4
    m.assert_alive()
