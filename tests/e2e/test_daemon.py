"""Daemon lifecycle: command line, signals, stale mounts, statistics.

The daemon is started in the foreground (-f) in the background of the test
and always unmounted in teardown, even when a test fails.
"""
import os
import shutil
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

from h5ltest import BIN, BUILD, ENV, LIVE_WRITER, TEST_WRITER, mounted, wait_for

DAEMON = os.path.join(BIN, "h5logfs")


def answers(mnt):
    try:
        os.listdir(mnt)
        return True
    except OSError:
        return False


def start(src, mnt, *opts, log=None, daemon=DAEMON, env=None):
    """Start the daemon; ready when the mount is listed and answers (a dead
    mount left by a crash is listed too)."""
    p = subprocess.Popen([daemon, str(src), str(mnt), "-f"] + list(opts), env=env,
                         stdout=subprocess.DEVNULL, stderr=log or open(os.environ.get("H5LOG_DAEMON_LOG", os.devnull), "a"))
    assert wait_for(lambda: (mounted(mnt) and answers(mnt)) or p.poll() is not None), "daemon did not mount"
    assert p.poll() is None, "daemon exited"
    return p


def cleanup(p, mnt):
    if mounted(mnt):
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
    for _ in range(4):  # mounts stacked by a failed test too
        if not mounted(mnt):
            break
        subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
    if p and p.poll() is None:
        p.kill()
        p.wait()


@pytest.fixture
def dirs(tmp_path):
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    subprocess.run(["mpirun", "--oversubscribe", "-np", "2", TEST_WRITER,
                    str(src), "--ticks", "3"], env=ENV, check=True, capture_output=True, timeout=300)
    return src, mnt


def test_version_and_help():
    v = subprocess.run([DAEMON, "--version"], capture_output=True, text=True)
    assert v.returncode == 0 and "h5logfs version" in v.stdout
    h = subprocess.run([DAEMON, "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "tick=SECONDS" in h.stdout


RANGE = "must be more than 0 and at most 3600 seconds"
NAN = "not a number of seconds (must be more than 0 and at most 3600)"


@pytest.mark.parametrize("opt,msg", [
    ("tick=0", "tick=0: " + RANGE), ("tick=-1", "tick=-1: " + RANGE), ("tick=3600.5", "tick=3600.5: " + RANGE),
    ("tick=inf", "tick=inf: " + RANGE), ("tick=abc", "tick=abc: " + NAN), ("tick=1abc", "tick=1abc: " + NAN),
    ("tick=nan", "tick=nan: " + NAN), ("tick=", "tick=: " + NAN), ("cache_size=lots", "cache_size=lots: not a size")])
def test_bad_options_refused(dirs, opt, msg):
    """Each refusal says what is allowed; garbage is refused, not read as 0
    or as its leading number."""
    src, mnt = dirs
    try:
        p = subprocess.run([DAEMON, str(src), str(mnt), "-f", "-o", opt], capture_output=True, text=True, timeout=10)
        assert p.returncode == 1 and "h5logfs: " + msg in p.stderr, p.stderr
        assert not mounted(mnt)
    finally:
        cleanup(None, mnt)  # what a wrongly accepted option mounted


def test_tick_limits_accepted_and_long_tick_stops_at_once(dirs):
    """tick=3600 is allowed, and the daemon still ends at once on SIGTERM
    (the ticker does not sleep out its hour); the last tick= given counts."""
    src, mnt = dirs
    p = start(src, mnt, "-o", "tick=0,tick=3600")
    try:
        with h5py.File(mnt / "t.h5", "r") as f:
            assert f["a"].shape == (17, 13, 9)
        t0 = time.time()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0
        assert time.time() - t0 < 5
        assert not mounted(mnt)
    finally:
        cleanup(p, mnt)


def mountinfo_count(mnt):
    with open("/proc/self/mountinfo") as f:
        return sum(1 for line in f if line.split()[4] == str(mnt))


HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "mount_helpers", "mount.h5logfs")


def test_second_mount_on_a_live_mount_refused(dirs, tmp_path):
    """A second h5logfs on a live h5logfs mount is refused, naming the first
    one's source (directly and through mount.h5logfs); the first mount keeps
    serving. A dead mount is still cleared, through the helper too."""
    src, mnt = dirs
    p = start(src, mnt)
    try:
        other = tmp_path / "other"
        other.mkdir()
        want = f"h5logfs: {mnt} is already an h5logfs mount (of {src}); unmount it first"
        for cmd, cwd in [([DAEMON, str(other), str(mnt), "-f"], None),
                         ([DAEMON, "other", "mnt/", "-f", "-o", "tick=0.5"], tmp_path)]:  # relative, trailing /
            q = subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=cwd)
            assert q.returncode == 1 and want in q.stderr, q.stderr
        q = subprocess.run(["sh", HELPER, str(other), str(mnt), "-o", "ro"], capture_output=True, text=True,
                           timeout=10, env=dict(os.environ, H5LOGFS_BIN=DAEMON))
        assert q.returncode == 1 and want in q.stderr, q.stderr
        assert mountinfo_count(mnt) == 1
        assert p.poll() is None
        with h5py.File(mnt / "t.h5", "r") as f:  # the first mount still serves
            assert f["a"].shape == (17, 13, 9)
        assert (mnt / "ref").is_dir()
        # a dead one: the helper (which checks MNT is a directory) lets the
        # daemon clear it and mount
        p.kill()
        p.wait()
        with pytest.raises(OSError):
            os.listdir(mnt)
        time.sleep(1.5)  # the root's cached attributes (1 s) expire: stat fails too
        q = subprocess.run(["sh", HELPER, str(src), str(mnt), "-o", "ro"], capture_output=True, text=True,
                           timeout=20, env=dict(os.environ, H5LOGFS_BIN=DAEMON))
        assert q.returncode == 0, q.stderr
        assert mountinfo_count(mnt) == 1
        with h5py.File(mnt / "t.h5", "r") as f:
            assert f["a"].shape == (17, 13, 9)
    finally:
        cleanup(p, mnt)


def test_missing_source_refused(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.run([DAEMON, str(tmp_path / "nope"), str(mnt), "-f"], capture_output=True, text=True, timeout=10)
    assert p.returncode != 0 and "nope" in p.stderr
    assert not mounted(mnt)


def test_sigterm_unmounts_cleanly(dirs):
    src, mnt = dirs
    p = start(src, mnt)
    try:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 0
        assert not mounted(mnt)
    finally:
        cleanup(p, mnt)


def test_restart_after_crash_clears_stale_mount(dirs, tmp_path):
    src, mnt = dirs
    p = start(src, mnt)
    p2 = None
    try:
        p.kill()
        p.wait()
        with pytest.raises(OSError):  # the dead mount: ENOTCONN
            os.listdir(mnt)
        log = open(tmp_path / "log", "w")
        p2 = start(src, mnt, log=log)
        with h5py.File(mnt / "t.h5", "r") as f:
            assert f["a"].shape == (17, 13, 9)
        assert "stale mount" in (tmp_path / "log").read_text()
    finally:
        cleanup(p2, mnt)
        cleanup(p, mnt)


def test_stats_file_and_sigusr1(dirs, tmp_path):
    src, mnt = dirs
    logpath = tmp_path / "log"
    log = open(logpath, "w")
    p = start(src, mnt, "-o", "stats,cache_size=64M", log=log)
    try:
        assert ".h5logfs-stats" not in os.listdir(mnt)  # not listed ...
        with h5py.File(mnt / "t.h5", "r") as f:
            a = f["a"][()]
        with h5py.File(src / "t.h5", "r") as f:  # anchors give the shape only
            assert a.shape == f["a"].shape
        text = (mnt / ".h5logfs-stats").read_text()  # ... but readable
        assert "limit 67108864 bytes" in text
        assert str(src / "t.h5") in text
        misses = int(text.split("misses ")[1].split(" ")[0])
        assert misses > 0
        p.send_signal(signal.SIGUSR1)
        assert wait_for(lambda: "statistics" in logpath.read_text(), 5)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        p.wait(timeout=10)
        cleanup(p, mnt)
    assert "cache: hits" in logpath.read_text()  # -o stats at unmount


def test_data_with_tiny_cache_equals_large_cache(dirs, tmp_path):
    """The cache never changes bytes: a 64 KiB cache (most chunks uncached or
    evicted at once) and a 1 GiB cache give the reference's values."""
    src, mnt = dirs
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(src / "t.h5"), str(tmp_path / "ref.h5")], check=True)
    with h5py.File(tmp_path / "ref.h5", "r") as f:
        ref = {k: f[k][()] for k in ["a", "c", "grp/b", "grp/sub/d", "s", "x"]}
    for size in ["64K", "1G"]:
        p = start(src, mnt, "-o", f"cache_size={size}")
        try:
            for _ in range(2):  # second pass: hits (large) or re-assembly (tiny)
                with h5py.File(mnt / "t.h5", "r") as f:
                    for k, want in ref.items():
                        assert np.array_equal(f[k][()], want), (size, k)
                subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], capture_output=True)
        finally:
            cleanup(p, mnt)
            p.wait(timeout=10)


READER = r"""
import sys, h5py, numpy as np
path, ref = sys.argv[1], sys.argv[2]
with h5py.File(ref, "r") as r:
    want = {k: r[k][()] for k in ["a", "c", "grp/b", "grp/sub/d", "s", "x"]}
for rep in range(int(sys.argv[3])):
    try:  # make every round reach the daemon, not the kernel page cache
        open("/proc/sys/vm/drop_caches", "w").write("3")
    except OSError:
        pass
    with h5py.File(path, "r") as f:
        for k, w in want.items():
            if not np.array_equal(f[k][()], w):
                print("MISMATCH", k); sys.exit(1)
print("OK")
"""


def test_concurrent_readers_tiny_cache(dirs, tmp_path):
    """Four processes read every variable at once, repeatedly, through a
    4 KiB cache (constant eviction, concurrent misses on the same chunks;
    edge chunks that are mostly padding are gathered, not cached):
    every read equals the reference. A closed file's skeleton allocates
    only chunks with data, which this file's records cover whole (served
    from the log, not assembled): the test daemon allocates them all, as
    a live file's skeleton does, so chunks of fill are assembled."""
    src, mnt = dirs
    ref = tmp_path / "ref.h5"
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(src / "t.h5"), str(ref)], check=True)
    p = start(src, mnt, "-o", "cache_size=4K", daemon=os.path.join(BUILD, "tests", "h5logfs_hooks"),
              env=dict(os.environ, H5LOGFS_TEST_NO_OWN_ROOTS="1"))
    try:
        procs = [subprocess.Popen(["/usr/bin/python3", "-c", READER, str(mnt / "t.h5"), str(ref), "5"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(4)]
        outs = [q.communicate(timeout=300)[0] for q in procs]
        assert all(q.returncode == 0 for q in procs), outs
        assert all("OK" in o for o in outs), outs
        stats = (mnt / ".h5logfs-stats").read_text()
        assert "evictions 0," not in stats.splitlines()[1]  # the tiny cache really evicted
    finally:
        cleanup(p, mnt)


def test_xattrs_tell_tick_and_close(tmp_path):
    """Through the mount a monitor learns the tick of what it opened and
    whether the writer has closed the file (user.h5logfs.* attributes)."""
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    p = start(src, mnt)
    w = None
    try:
        w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER,
                              str(src / "live.h5"), "--ticks", "12", "--interval", "0.1"],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = mnt / "live.h5"

        def tick_at_least_1():
            try:
                return int(os.getxattr(path, "user.h5logfs.tick")) >= 1
            except OSError:  # not there yet, or still an empty plain file (the writer is creating it)
                return False

        assert wait_for(tick_at_least_1, 30)
        ticks = []
        while w.poll() is None:
            ticks.append(int(os.getxattr(path, "user.h5logfs.tick")))
            assert os.getxattr(path, "user.h5logfs.closed") in (b"0", b"1")
            time.sleep(0.05)
        assert w.returncode == 0
        assert ticks == sorted(ticks), "ticks went backwards"
        assert wait_for(lambda: os.getxattr(path, "user.h5logfs.closed") == b"1", 3)
        assert os.getxattr(path, "user.h5logfs.tick") == b"12"
        assert os.getxattr(path, "user.h5logfs.source") == str(src / "live.h5").encode()
        assert "user.h5logfs.closed" in os.listxattr(path)
        with h5py.File(path, "r") as f:
            assert int(f["stamp"][0]) == 12
    finally:
        if w and w.poll() is None:
            w.kill()
        cleanup(p, mnt)


def mount_options(mnt):
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            if parts[1] == str(mnt):
                return parts[0], parts[2], parts[3].split(",")
    return None


def test_mount_options_fsname_and_permissions(dirs):
    """allow_other always brings default_permissions (the daemon checks no
    permissions itself); a given fsname is kept, else it is SRC."""
    src, mnt = dirs
    p = start(src, mnt, "-o", "allow_other")
    try:
        fsname, fstype, opts = mount_options(mnt)
        assert fstype == "fuse.h5logfs" and fsname == str(src)
        assert "ro" in opts and "default_permissions" in opts and "allow_other" in opts
    finally:
        cleanup(p, mnt)
    p = start(src, mnt, "-o", "fsname=myruns")
    try:
        fsname, _, opts = mount_options(mnt)
        assert fsname == "myruns" and "default_permissions" not in opts
    finally:
        cleanup(p, mnt)


def test_data_only_ticks_reuse_the_skeleton(tmp_path):
    """Ticks that change no definition and no extent reuse the skeleton
    (libhdf5 runs once); each is still its own snapshot with its own data."""
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    p = start(src, mnt)
    w = None
    try:
        w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER,
                              str(src / "live.h5"), "--ticks", "15", "--interval", "0.15", "--rows-per-tick", "0"],
                             env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        path = mnt / "live.h5"
        stamps = set()
        while w.poll() is None:
            try:
                with h5py.File(path, "r") as f:
                    s = int(f["stamp"][0])
                    assert (f["w"][()] == s).all()  # each snapshot has its own data
                    assert f["v"].shape == (0, 64)
                    stamps.add(s)
            except (OSError, KeyError) as e:
                # not created yet, or still at tick 0 (no variables); once a
                # snapshot was read, none may fail
                assert not stamps, f"open after stamps {sorted(stamps)[-3:]} failed: {e!r}"
            time.sleep(0.05)
        assert w.returncode == 0
        with h5py.File(path, "r") as f:
            stamps.add(int(f["stamp"][0]))
        line = [l for l in (mnt / ".h5logfs-stats").read_text().splitlines() if "live.h5" in l][0]
        snaps = int(line.split("snapshots ")[1].split(",")[0])
        skels = int(line.split("skeletons ")[1].split(",")[0])
        assert len(stamps) >= 5 and snaps >= len(stamps)
        assert skels <= 2, line  # tick 1 (definitions); maybe tick 0 seen before it
    finally:
        if w and w.poll() is None:
            w.kill()
        cleanup(p, mnt)


def test_closed_file_keeps_its_inode_and_page_cache(dirs):
    """A file closed before it was first seen is never invalidated: the
    same inode for every open, and a second read served by the kernel's
    page cache (no new daemon reads)."""
    src, mnt = dirs
    p = start(src, mnt, "-o", "tick=0.05")
    try:
        path = mnt / "t.h5"
        ino = os.stat(path).st_ino
        data = path.read_bytes()

        def stat_line():
            return [l for l in (mnt / ".h5logfs-stats").read_text().splitlines() if "t.h5" in l][0]
        reads = int(stat_line().split("reads ")[1].split(",")[0])
        time.sleep(0.6)  # a dozen ticks
        assert os.stat(path).st_ino == ino
        # An invalidation empties the inode's page cache. This machine's
        # kernel also runs DAMON reclaim, which may evict a few single
        # pages within the sleep (measured: 3 scattered 4 KiB re-reads in
        # about 1 run of 20, with or without h5logfs changes), so the test
        # asks for the page cache to be mostly there and for the re-read to
        # need fewer daemon reads than the first read (a full re-read after
        # an invalidation needs as many).
        res = subprocess.run(["fincore", "--bytes", "--noheadings", "-o", "RES", str(path)],
                             capture_output=True, text=True, check=True)
        assert int(res.stdout.split()[0]) >= len(data) // 2, res.stdout
        assert path.read_bytes() == data
        line = stat_line()
        assert int(line.split("snapshots ")[1].split(",")[0]) == 1, line
        assert int(line.split("reads ")[1].split(",")[0]) - reads < reads, line
    finally:
        cleanup(p, mnt)


def test_bad_file_logged_once_while_unchanged(dirs, tmp_path):
    """A damaged log file fails every open with EIO, but its reason is
    logged once, not once per lookup; changing the file tries it again."""
    import errno
    import shutil
    src, mnt = dirs
    bad = src / "half.h5"
    shutil.copy(src / "t.h5", bad)
    os.truncate(bad, os.path.getsize(bad) // 2)
    logpath = tmp_path / "log"
    p = start(src, mnt, "-o", "tick=0.05", log=open(logpath, "w"))
    try:
        for _ in range(3):
            with pytest.raises(OSError) as ei:
                open(mnt / "half.h5", "rb").read()
            assert ei.value.errno == errno.EIO
            time.sleep(0.1)  # entry timeouts expire: new lookups
        assert logpath.read_text().count("half.h5:") == 1, logpath.read_text()
        os.truncate(bad, os.path.getsize(bad) - 1)  # changed: looked at again
        with pytest.raises(OSError):
            open(mnt / "half.h5", "rb").read()
        assert wait_for(lambda: logpath.read_text().count("half.h5:") == 2, 3), logpath.read_text()[-6000:]
        with h5py.File(mnt / "t.h5", "r") as f:  # the good file still reads
            assert f["a"].shape == (17, 13, 9)
    finally:
        cleanup(p, mnt)


def test_file_at_tick_0_shows_the_source_times(tmp_path):
    """A log-layout file whose writer has not flushed yet (tick 0: nothing
    committed, no commit time) shows the source file's times, not 1970."""
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    src.mkdir()
    mnt.mkdir()
    p = start(src, mnt)
    out = tmp_path / "writer.out"
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "live.h5"),
                          "--ticks", "1", "--interval", "0", "--hold", "120"],
                         env=ENV, stdout=open(out, "w"), stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: "created" in out.read_text(), 60), "the writer did not create its file"
        path = mnt / "live.h5"
        m, s = os.stat(path), os.stat(src / "live.h5")
        assert os.getxattr(path, "user.h5logfs.tick") == b"0"
        assert m.st_mtime_ns == s.st_mtime_ns and m.st_ctime_ns == s.st_ctime_ns, (m, s)
        # the atime is the source's when looked up (reading the source may
        # have moved the source's since)
        assert 0 < s.st_mtime_ns - 3600 * 10**9 < m.st_atime_ns <= s.st_atime_ns, (m, s)
    finally:
        w.terminate()  # mpirun passes it on to the ranks
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()
            w.wait()
        cleanup(p, mnt)


def log_lines(logpath, name):
    return [l for l in logpath.read_text().splitlines() if name in l]


def test_bad_file_logged_exactly_once_whatever_meets_it(tmp_path):
    """Lookups, stats, opens, reads, directory listings, forgotten inodes
    and the ticker all meet a bad file; each bad file is logged once:
    closed files bad from the start (garbage after the magic, cut in half:
    nothing can be read), a broken journal (its first tick is damaged: the
    file is served at tick 0 and says so), a closed file cut after it was
    loaded (reads fail), and a live file whose journal goes bad while its
    writer keeps writing (served at its last intact tick; the source
    changes after it went bad)."""
    import errno
    src, mnt = tmp_path / "src", tmp_path / "mnt"
    (src / "good").mkdir(parents=True)
    mnt.mkdir()
    subprocess.run(["mpirun", "--oversubscribe", "-np", "2", TEST_WRITER, str(src / "good"), "--ticks", "3"],
                   env=ENV, check=True, capture_output=True, timeout=300)
    data = (src / "good" / "t.h5").read_bytes()
    (src / "garbage.h5").write_bytes(data[:8] + np.random.default_rng(3).integers(0, 256, 5000, np.uint8).tobytes())
    joff = int.from_bytes(data[32:40], "little")
    broken = bytearray(data)
    broken[joff + 64 + 24 + 3] ^= 0x40  # the first journal frame's payload: its checksum fails
    (src / "broken.h5").write_bytes(bytes(broken))
    (src / "half.h5").write_bytes(data[:len(data) // 2])
    # the cut file: big enough (several MiB of data) that what the daemon
    # verified and keeps of it cannot hold what is cut away
    subprocess.run(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "cut.h5"), "--ticks", "3",
                    "--interval", "0", "--rows-per-tick", "3000"], env=ENV, check=True, capture_output=True,
                   timeout=300)
    cutlen = os.path.getsize(src / "cut.h5")
    logpath = tmp_path / "log"
    p = start(src, mnt, "-o", "tick=0.05", log=open(logpath, "w"))
    out = tmp_path / "writer.out"
    w = None
    names = ["garbage.h5", "broken.h5", "half.h5", "cut.h5", "live.h5"]

    def meet(name):
        """Every way to meet the file through the mount; errors expected."""
        path = mnt / name
        for fn in (os.stat, os.listdir, lambda q: open(q, "rb").read(), lambda q: os.getxattr(q, "user.h5logfs.tick")):
            try:
                fn(path if fn is not os.listdir else mnt)
            except OSError:
                pass
    try:
        # the cut file: loaded whole, then cut; its descriptor stays open and
        # reads what is gone, again and again
        assert (mnt / "cut.h5").read_bytes()
        fd = os.open(mnt / "cut.h5", os.O_RDONLY)
        os.truncate(src / "cut.h5", cutlen // 3)
        w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "live.h5"),
                              "--ticks", "6", "--interval", "1"], env=ENV, stdout=open(out, "w"),
                             stderr=subprocess.DEVNULL)
        assert wait_for(lambda: "tick 2" in out.read_text(), 60)
        assert os.getxattr(mnt / "live.h5", "user.h5logfs.tick") in (b"2", b"3")
        # two frames after the last: the first fails its checksum and is not
        # the last, so it is damage, not a torn write (the writer overwrites
        # them with its next tick; the daemon has read them by then)
        with open(src / "live.h5.h5lj", "ab") as f:
            f.write((b"\0\0\0\0\x01\0\x01\0" + b"\x55" * 8) * 2)
        eio = 0
        rounds = 0
        while w.poll() is None or rounds < 20:
            for name in names:
                meet(name)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            for off in range(0, cutlen, 1 << 20):
                try:
                    os.pread(fd, 1 << 20, off)
                except OSError as e:
                    assert e.errno == errno.EIO
                    eio += 1
            rounds += 1
            if rounds in (5, 15):  # the kernel forgets the inodes: lookups from scratch
                subprocess.run(["sh", "-c", "echo 2 > /proc/sys/vm/drop_caches"], capture_output=True)
            time.sleep(0.05)
        os.close(fd)
        assert w.wait() == 0
        assert eio > 1, "the cut file's reads did not fail"
        for name in ["garbage.h5", "half.h5"]:
            with pytest.raises(OSError) as ei:
                open(mnt / name, "rb").read()
            assert ei.value.errno == errno.EIO, name
        for name, tick in (("broken.h5", 0), ("live.h5", None)):  # served at the last intact tick
            assert open(mnt / name, "rb").read()
            dmg = os.getxattr(mnt / name, "user.h5logfs.damaged").decode()
            served = int(os.getxattr(mnt / name, "user.h5logfs.tick"))
            assert dmg.startswith(f"tick {served + 1}:"), (name, dmg, served)
            assert tick is None or served == tick, (name, served)
        time.sleep(0.5)  # the ticker's lines too
        counts = {name: len(log_lines(logpath, name)) for name in names}
        assert counts == {name: 1 for name in names}, logpath.read_text()[-3000:]
        with h5py.File(mnt / "good" / "t.h5", "r") as f:
            assert f["a"].shape == (17, 13, 9)
    finally:
        if w and w.poll() is None:
            w.terminate()
            w.wait()
        cleanup(p, mnt)


def test_permissions_follow_the_source_within_a_tick(tmp_path):
    """With allow_other (the kernel checks permissions from the attributes
    we report), a chmod of the source closes a snapshot, a bad file and a
    plain file to another user within one tick, and reopens them. The
    snapshot attributes once were cached for a day: `nobody` kept reading
    a file chmod 600 40 s later."""
    import tempfile
    base = tempfile.mkdtemp(prefix="h5lperm.", dir="/tmp")
    os.chmod(base, 0o755)  # nobody must reach the mount point
    src, mnt = os.path.join(base, "src"), os.path.join(base, "mnt")
    os.mkdir(src)
    os.mkdir(mnt)
    p = None
    try:
        subprocess.run(["mpirun", "--oversubscribe", "-np", "1", TEST_WRITER, src, "--ticks", "2"],
                       env=ENV, check=True, capture_output=True, timeout=300)
        with open(os.path.join(src, "plain.txt"), "w") as f:
            f.write("plain\n")
        with open(os.path.join(src, "bad.h5"), "wb") as f:
            f.write(b"\x89H5LOG\r\n" + b"\x07" * 5000)
        for name in ("t.h5", "plain.txt", "bad.h5"):
            os.chmod(os.path.join(src, name), 0o644)
        p = start(src, mnt, "-o", "tick=0.2,allow_other")

        def nobody_reads(name):
            r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "head", "-c", "8",
                                os.path.join(mnt, name)], capture_output=True)
            return r.returncode == 0, r.stderr.decode()

        for name in ("t.h5", "plain.txt"):
            ok, err = nobody_reads(name)
            assert ok, (name, err)
        for name in ("t.h5", "plain.txt", "bad.h5"):
            os.chmod(os.path.join(src, name), 0o600)
        time.sleep(0.2 * 2 + 0.1)  # one tick of attribute cache, with margin
        for name in ("t.h5", "plain.txt", "bad.h5"):
            ok, err = nobody_reads(name)
            assert not ok and "Permission denied" in err, (name, err)
            assert os.stat(os.path.join(mnt, name)).st_mode & 0o777 == 0o400, name  # read-only view of 600
        # root (the daemon's user) still reads; then the file opens again
        with h5py.File(os.path.join(mnt, "t.h5"), "r") as f:
            assert f["a"].shape == (17, 13, 9)
        os.chown(os.path.join(src, "t.h5"), 65534, 65534)  # nobody owns it now: readable by its owner
        time.sleep(0.5)
        ok, err = nobody_reads("t.h5")
        assert ok, err
        st = os.stat(os.path.join(mnt, "t.h5"))
        assert (st.st_uid, st.st_gid) == (65534, 65534)
    finally:
        cleanup(p, mnt)
        shutil.rmtree(base, ignore_errors=True)
