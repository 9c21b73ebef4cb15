"""The canonical view at scale (issue "The canonical view at scale").

- 20,000 variables sharing two dimensions (tests/mpi/scale_writer.c, 1
  rank): the file opens through the mount and through h5logreplay, and
  h5py's dimension scales and netCDF4 see every variable with its
  dimensions and values. Before, the scale's REFERENCE_LIST was rebuilt per
  variable (quadratic) and such files took many seconds per skeleton.
- One row at t = 2^40 of a [time, 64] variable: the skeleton allocates the
  chunks that hold data only (it used to allocate ~2^36 chunks: minutes and
  gigabytes, then failure). Above 2^16 chunks of shape only (canon.c). the mount serves the right values, the fill
  value elsewhere, and the daemon stays small. The same axis in a NOFILL
  variable: the writer's close finalizes it (it wrote every chunk of a
  NOFILL variable and refused, short of room), and missing chunks read as
  zeros in the file, through the mount and in h5logreplay's copy.
- A live file of small rows polled by a reader (bench/live_many.c, 1 MiB
  edge chunks): the daemon must not assemble and cache a chunk version per
  variable and tick (it did: 643 MB after 100 ticks of 100 variables).
  Checked through the daemon's statistics (cache in use), not timings.
- Skeleton builds run off the request path (one builder thread): while a
  build of one file is in progress (made slow by a test hook compiled only
  into build/tests/h5logfs_hooks), another live file stays readable, and a
  build that fails says why in the log, gives EIO and is not retried while
  the file's skeleton would be the same.
- 10^6 ticks of one row each (bench/bench_flushes), index checkpoints as
  the writer makes them: served at the last tick with every sampled row
  right, an old tick through the ticks tree, h5logdump --check clean.
"""
import threading
import os
import re
import subprocess
import time

import h5py
import netCDF4
import numpy as np
import pytest

from h5ltest import BIN, BUILD, ENV, LIVE_WRITER, SAN_ENV, Mount, h5logfs  # noqa: F401 (fixture)

# The daemon's memory bound: 64 MB, the figure; under `make asan`
# ASan's shadow memory and quarantine come on top, so the bound only says
# "bounded, not growing with the file" there.
RSS_BOUND_KB = 64 * 1024 * (4 if SAN_ENV else 1)

SCALE_WRITER = os.path.join(BUILD, "tests", "scale_writer")
LIVE_MANY = os.path.join(BUILD, "bench", "live_many")
HOOKS_DAEMON = os.path.join(BUILD, "tests", "h5logfs_hooks")
NVARS = 20000
FAR = 1 << 40


def write(mode, arg, path):
    subprocess.run(["mpirun", "--oversubscribe", "-np", "1", SCALE_WRITER, mode, str(arg), str(path)],
                   env=ENV, check=True, timeout=300)


def check_many(path):
    """Names, dimensions (netCDF4 and h5py's dimension scales) and values."""
    with netCDF4.Dataset(path) as nc:
        assert list(nc.dimensions) == ["time", "x"]
        assert len(nc.dimensions["time"]) == 2 and len(nc.dimensions["x"]) == 4
        names = [v for v in nc.variables if v != "time"]
        assert len(names) == NVARS
        assert names[0] == "v00000" and names[-1] == "v%05d" % (NVARS - 1)
        for i in (0, 1, 4097, NVARS - 1):
            v = nc.variables["v%05d" % i]
            assert v.dimensions == ("time", "x")
            want = np.array([[i * 100 + t * 10 + j for j in range(4)] for t in range(2)], dtype=np.float32)
            assert np.array_equal(v[:], want)
        assert np.array_equal(nc.variables["time"][:], [0.5, 1.5])
    with h5py.File(path, "r") as f:
        for i in (0, 2, NVARS - 1):
            d = f["v%05d" % i]
            assert [[s.name for s in dim.values()] for dim in d.dims] == [["/time"], ["/x"]]
            assert d[1, 3] == i * 100 + 13
        refs = f["time"].attrs["REFERENCE_LIST"]
        assert len(refs) == NVARS
        assert f[refs[NVARS - 1]["dataset"]].name == "/v%05d" % (NVARS - 1)
        assert all(int(r["dimension"]) == 0 for r in refs[:100])
        assert all(int(r["dimension"]) == 1 for r in f["x"].attrs["REFERENCE_LIST"][:100])


def test_many_variables(tmp_path, h5logfs):
    src = tmp_path / "src"
    src.mkdir()
    write("many", NVARS, src / "many.h5")
    m = h5logfs(src)
    check_many(m.path("many.h5"))
    m.assert_alive()
    out = tmp_path / "replay.h5"
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(src / "many.h5"), str(out)], check=True, timeout=300)
    check_many(str(out))


def vm_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def test_sparse_axis(tmp_path, h5logfs):
    src = tmp_path / "src"
    src.mkdir()
    write("sparse", FAR, src / "sparse.h5")
    m = h5logfs(src)
    path = m.path("sparse.h5")
    assert os.stat(path).st_size < (1 << 20)  # 2 chunks of data, not 2^36
    want = lambda t: np.array([t % 1000 * 100 + j for j in range(64)], dtype=np.int32)
    with h5py.File(path, "r") as f:
        s = f["s"]
        assert s.shape == (FAR + 1, 64)
        assert np.array_equal(s[3], want(3))
        assert np.array_equal(s[FAR], want(FAR))
        assert (s[FAR - 5:FAR] == -1).all()        # same chunk, not written
        assert (s[4:20] == -1).all()                # chunk 0 after row 3, chunk 1
        assert (s[1 << 30:(1 << 30) + 8] == -1).all()  # a chunk not in the file
    with netCDF4.Dataset(path) as nc:
        v = nc.variables["s"]
        assert v.dimensions == ("time", "x")
        assert len(nc.dimensions["time"]) == FAR + 1
        assert np.array_equal(v[FAR], want(FAR))
        assert v[12345:12350].mask.all()            # _FillValue -1 is masked
    m.assert_alive()
    hwm = vm_kb(m.proc.pid, "VmHWM")
    print("daemon peak RSS %d kB" % hwm)
    assert hwm < RSS_BOUND_KB, "daemon peak RSS %d kB" % hwm
    # h5logreplay writes only the chunks that hold data too (it looped over
    # all 2^36 and filled the disk) and gives the same values
    out = tmp_path / "replay.h5"
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(src / "sparse.h5"), str(out)], check=True, timeout=60)
    assert os.path.getsize(out) < (1 << 20)
    with h5py.File(out, "r") as f:
        s = f["s"]
        assert s.shape == (FAR + 1, 64)
        assert np.array_equal(s[3], want(3)) and np.array_equal(s[FAR], want(FAR))
        assert (s[FAR - 5:FAR] == -1).all() and (s[4:20] == -1).all() and (s[1 << 30:(1 << 30) + 8] == -1).all()


def read_direct_a5(ds, sel, shape):
    """ds[sel] read into a buffer of 0xA5 bytes (h5py's own reads start
    from zeros): an element libhdf5 leaves untouched shows."""
    out = np.empty(shape, dtype=ds.dtype)
    out.view(np.uint8)[...] = 0xA5
    ds.read_direct(out, sel)
    return out


def check_sparse_nofill(path):
    """scale_writer sparse-nofill's file: rows 3 and FAR, zeros elsewhere
    (netCDF's NOFILL as h5l_def_var_nofill promises it), nothing masked."""
    want = lambda t: np.array([t % 1000 * 100 + j for j in range(64)], dtype=np.int32)
    with h5py.File(path, "r") as f:
        s = f["s"]
        assert s.shape == (FAR + 1, 64)
        assert "_FillValue" not in s.attrs
        assert np.array_equal(read_direct_a5(s, np.s_[3, :], (64,)), want(3))
        assert np.array_equal(read_direct_a5(s, np.s_[FAR, :], (64,)), want(FAR))
        for lo in (4, 16, FAR - 20, 1 << 30):  # same chunk as a row, the next, before the last, far away
            assert not read_direct_a5(s, np.s_[lo:lo + 8, :], (8, 64)).any(), lo
    with netCDF4.Dataset(path) as nc:
        v = nc.variables["s"]
        assert "_FillValue" not in v.ncattrs()
        assert np.array_equal(v[FAR], want(FAR))
        got = v[FAR - 3:FAR + 1]
        assert not np.ma.is_masked(got) and not got[:3].any()


def test_sparse_axis_nofill(tmp_path, h5logfs):
    """The sparse axis of test_sparse_axis in a NOFILL variable. Finalizing
    wrote every chunk of a NOFILL variable (2^36 here): its room check
    refused and the close failed. Now only chunks with data are written,
    and missing chunks read as zeros: in the finalized file, through the
    mount, and in h5logreplay's copy."""
    src = tmp_path / "src"
    src.mkdir()
    write("sparse-nofill", FAR, src / "s.h5")
    assert os.path.getsize(src / "s.h5") < (4 << 20)
    check_sparse_nofill(str(src / "s.h5"))  # plain libhdf5 reads it: finalized (an anchor refuses reads)
    m = h5logfs(src)
    check_sparse_nofill(m.path("s.h5"))
    m.assert_alive()
    replay = tmp_path / "replay.h5"
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(src / "s.h5"), str(replay)], check=True, timeout=60)
    assert os.path.getsize(replay) < (1 << 20)
    check_sparse_nofill(str(replay))


def cache_in_use(m):
    with open(m.path(".h5logfs-stats")) as f:
        text = f.read()
    return int(re.search(r"in use (\d+)", text).group(1)), text


def test_live_small_rows(tmp_path, h5logfs):
    """20 variables of 64-byte rows in 1 MiB chunks, a row per tick, polled
    by a reader that checks the newest row of each (values from
    live_many.c's formula) for 60 ticks. Each tick's edge chunk is a new
    version; the cache must not keep one per variable and tick (it kept
    them all: 20 MiB after 1 tick here, 1.8 GB after 90)."""
    nvars, ticks = 20, 90  # more than 64 records per chunk: disjointness undecided
    src = tmp_path / "src"
    src.mkdir()
    m = h5logfs(src)
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "1", LIVE_MANY, str(src / "l.h5"), "--vars",
                          str(nvars), "--ticks", str(ticks), "--interval", "0.1"],
                         env=ENV, stdout=subprocess.DEVNULL)
    path = m.path("l.h5")
    polls, newest, peak = 0, 0, 0
    try:
        while w.poll() is None:
            try:
                f = h5py.File(path, "r")
            except OSError:  # not created yet, or no tick yet
                time.sleep(0.05)
                continue
            with f:
                if "stamp" not in f:  # tick 0 (its first tick's skeleton not built yet)
                    continue
                n = f["stamp"].shape[0]
                if n:
                    assert int(f["stamp"][n - 1]) == n
                    for i in range(nvars):
                        want = np.float32(i * 1000 + n) + np.arange(16, dtype=np.float32) / np.float32(100)
                        assert np.array_equal(f["v%05d" % i][n - 1, :], want), (i, n)
                    polls += 1
                    newest = max(newest, n)
            used, text = cache_in_use(m)
            peak = max(peak, used)
            # a row's chunk changes every tick: nothing of it stays cached
            # (allow a few chunks, e.g. /stamp's)
            assert used <= 4 << 20, text
    finally:
        w.wait(timeout=60)
    assert w.returncode == 0
    assert polls >= 10 and newest >= ticks // 2, (polls, newest)
    m.assert_alive()
    hwm = vm_kb(m.proc.pid, "VmHWM")
    print("polls %d, newest tick seen %d, cache peak %d B, daemon peak RSS %d kB" % (polls, newest, peak, hwm))
    assert hwm < RSS_BOUND_KB, "daemon peak RSS %d kB" % hwm


@pytest.fixture
def hooks_mount(tmp_path, monkeypatch):
    """Factory: mount src with the test-hook daemon, env set for its hooks."""
    import h5ltest
    mounts = []

    def start(src, **env):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.setattr(h5ltest, "DAEMON", HOOKS_DAEMON)
        m = Mount(src, tmp_path / ("mnt%d" % len(mounts)), tmp_path)
        mounts.append(m)
        return m.start()

    yield start
    problems = []
    for m in mounts:
        problems += m.stop()
    assert not problems, problems


def live_many(path, nvars, ticks, interval):
    return subprocess.Popen(["mpirun", "--oversubscribe", "-np", "1", LIVE_MANY, str(path), "--vars", str(nvars),
                             "--ticks", str(ticks), "--interval", str(interval)],
                            env=ENV, stdout=subprocess.DEVNULL)


def newest_row_ok(path, nvars):
    """Open path, check the newest row of every variable; the tick seen."""
    with h5py.File(path, "r") as f:
        n = f["stamp"].shape[0]
        assert n > 0 and int(f["stamp"][n - 1]) == n
        for i in range(nvars):
            want = np.float32(i * 1000 + n) + np.arange(16, dtype=np.float32) / np.float32(100)
            assert np.array_equal(f["v%05d" % i][n - 1, :], want), (i, n)
        return n


def test_other_file_readable_during_slow_build(tmp_path, hooks_mount):
    """Two live files; every build of slow.h5 takes 4 s (holding the
    libhdf5 lock, as a huge schema would). While the first open of slow.h5
    waits for its build, b.h5 (already built once) must keep answering
    lookups and reads with its newest built tick. Before, a lookup of b.h5
    whose new tick needed a skeleton waited for the libhdf5 lock, and the
    ticker, stuck refreshing slow.h5 under the registry lock, held up every
    file's lookup."""
    src = tmp_path / "src"
    src.mkdir()
    m = hooks_mount(src, H5LOGFS_TEST_SLOW_BUILD="/SLOWFILE", H5LOGFS_TEST_SLOW_SECONDS="8")
    # in two directories: the kernel serialises a lookup of a name it has
    # not cached behind one in progress in the same directory (a limit the
    # daemon cannot lift, docs/architecture.md), and b.h5's entry expires
    # after one tick
    (src / "b").mkdir()
    (src / "s").mkdir()
    wb = live_many(src / "b" / "b.h5", 3, 100, 0.1)
    ws = live_many(src / "s" / "SLOWFILE.h5", 3, 100, 0.1)
    try:
        b = m.path("b", "b.h5")
        assert wait_ok(lambda: newest_row_ok(b, 3))
        assert wait_for_tick(src / "s" / "SLOWFILE.h5")
        # the slow open in another process: h5py keeps the GIL while
        # libhdf5 waits in read(), so a thread would stall this one
        t0 = time.time()
        slow = subprocess.Popen(["/usr/bin/python3", "-c", "import h5py, sys; h5py.File(sys.argv[1], 'r')['stamp'][0]",
                                 m.path("s", "SLOWFILE.h5")])
        time.sleep(0.5)  # SLOWFILE.h5's first build has started
        reads, lat = 0, []
        while slow.poll() is None and reads < 3:
            t1 = time.time()
            newest_row_ok(b, 3)  # lookup (entry timeout 0.1 s) and reads
            lat.append(round(time.time() - t1, 3))
            reads += 1
            time.sleep(0.15)
        pending = slow.poll() is None
        assert slow.wait(timeout=30) == 0
        took = time.time() - t0
        print("b.h5 read in %s s during a build of %.1f s" % (lat, took))
        assert pending, "b.h5 was read %d times only while the 8 s build ran (%.1f s): %s" % (reads, took, lat)
        assert took >= 7, took  # the slow build did run meanwhile
        m.assert_alive()
    finally:
        for w in (wb, ws):
            w.kill()
            w.wait()


def wait_ok(fn, timeout=20.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            fn()
            return True
        except (OSError, KeyError, AssertionError):
            time.sleep(0.1)
    return False


def test_failing_build(tmp_path, hooks_mount):
    """A file whose skeleton build fails: open gives EIO, the log names the
    file and the reason, and lookups do not rebuild it while its skeleton
    would be the same (live_writer with data-only ticks: the source changes
    every tick, the schema and extents do not). Before, every lookup of a
    changed source ran the build again."""
    src = tmp_path / "src"
    src.mkdir()
    count = tmp_path / "builds.txt"
    m = hooks_mount(src, H5LOGFS_TEST_FAIL_BUILD="/BADFILE", H5LOGFS_TEST_BUILD_COUNT=str(count))
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "BADFILE.h5"), "--ticks", "60",
                          "--interval", "0.1", "--rows-per-tick", "0"], env=ENV, stdout=subprocess.DEVNULL)
    try:
        path = m.path("BADFILE.h5")
        assert wait_for_tick(src / "BADFILE.h5")
        tries = 0
        t0 = time.time()
        while time.time() - t0 < 3.0:
            with pytest.raises(OSError) as ei:
                open(path, "rb").read(8)
            assert ei.value.errno == 5, ei.value  # EIO
            tries += 1
            time.sleep(0.05)
        assert tries >= 20
        with open(count) as f:
            builds = [line for line in f if "BADFILE.h5" in line]
        assert 1 <= len(builds) <= 2, "%d builds for %d opens" % (len(builds), tries)
        assert "BADFILE.h5: test hook: this build fails" in m.stderr()
        m.assert_alive()
    finally:
        w.kill()
        w.wait()


def wait_for_tick(src_file, timeout=20.0):
    """Until the writer committed a tick (the source has grown past its
    header); a few ticks in, so lookups see a changing source."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if os.path.exists(src_file) and os.path.getsize(src_file) > 0:
            time.sleep(0.5)
            return True
        time.sleep(0.05)
    return False


BENCH_FLUSHES = os.path.join(BUILD, "bench", "bench_flushes")
# under `make asan` every flush and the daemon's build of a chunk per tick
# are several times slower: a fifth of the ticks there
MILLION = 10**6 if not SAN_ENV else 2 * 10**5


def test_million_ticks(tmp_path, h5logfs):
    """10^6 ticks of one [time, 64] row each (bench/bench_flushes: row i
    holds i + 0.001 k in column k; the netCDF default chunk [1, 64], so a
    million chunks too), with the writer's index checkpoints: the file
    opens through the mount at its last tick, rows anywhere hold what the
    writer wrote (computed here with numpy), an old tick opens through the
    ticks tree at its own length, and h5logdump --check verifies every tick
    and checkpoint. Pins the behaviour at a size far past the tests' others,
    not its speed (make bench-longlog)."""
    src = tmp_path / "src"
    src.mkdir()
    path = src / "long.h5"
    subprocess.run(["mpirun", "--oversubscribe", "-np", "1", BENCH_FLUSHES, str(path), str(MILLION),
                    "--no-finalize"], env=ENV, check=True, timeout=600, stdout=subprocess.DEVNULL)
    k = np.arange(64, dtype=np.float32) * np.float32(1e-3)

    def want(rows):
        return rows.astype(np.float32)[:, None] + k[None, :]

    rng = np.random.default_rng(6)
    rows = np.unique(np.concatenate([[0, 1, 1023, 1024, 1025, MILLION // 2 - 1, MILLION - 2, MILLION - 1],
                                     rng.integers(0, MILLION, 200)]))
    m = h5logfs(src)
    with h5py.File(m.path("long.h5"), "r") as f:
        v = f["v"]
        assert v.shape == (MILLION, 64) and v.chunks == (1, 64)
        got = np.stack([v[int(r)] for r in rows])
        assert np.array_equal(got, want(rows))
        assert np.array_equal(v[MILLION - 300:], want(np.arange(MILLION - 300, MILLION)))
    assert os.getxattr(m.path("long.h5"), "user.h5logfs.tick") == str(MILLION).encode()
    half = MILLION // 2
    with h5py.File(m.path(".h5logfs-ticks", "long.h5", f"{half}.h5"), "r") as f:
        assert f["v"].shape == (half, 64)
        assert np.array_equal(f["v"][half - 2:], want(np.arange(half - 2, half)))
    m.assert_alive()
    # every segment but the first (which defines the variable) opens from
    # its checkpoint's summary alone (docs/format.md 3.5): the listing's
    # head says so (the rest, a line a tick, is not read)
    p = subprocess.Popen([os.path.join(BIN, "h5logdump"), str(path)], stdout=subprocess.PIPE, text=True)
    head = next((ln for ln in p.stdout if ln.startswith("from index checkpoints")), "")
    p.kill()
    p.wait()
    seg = re.search(r"\((\d+) segments, (\d+) opened from their summaries\)", head)
    assert seg and int(seg.group(1)) >= MILLION // 1024 - 1 and int(seg.group(2)) == int(seg.group(1)) - 1, head
    r = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", str(path)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"\b%d ticks\b" % MILLION, r.stdout), r.stdout[-500:]


def test_whole_long_log_read_within_table_budget(tmp_path, h5logfs, monkeypatch):
    """Reading every row of a long log keeps the reader's decoded record
    tables within H5L_LAZY_MAX (here 300 kB for 20,000 checkpointed ticks
    of about 300 B each): the least recently used are dropped and decoded
    again when read again. Every row read whole, then again from two
    threads at random, equals what the writer wrote (numpy)."""
    src = tmp_path / "src"
    src.mkdir()
    n = 20000
    subprocess.run(["mpirun", "--oversubscribe", "-np", "1", BENCH_FLUSHES, str(src / "l.h5"), str(n),
                    "--no-finalize"], env=ENV, check=True, timeout=600, stdout=subprocess.DEVNULL)
    k = np.arange(64, dtype=np.float32) * np.float32(1e-3)

    def want(rows):
        return rows.astype(np.float32)[:, None] + k[None, :]

    budget = 300_000
    monkeypatch.setenv("H5L_LAZY_MAX", str(budget))
    m = h5logfs(src)
    bad = []
    with h5py.File(m.path("l.h5"), "r") as f:
        assert np.array_equal(f["v"][...], want(np.arange(n)))

    def reader(seed):
        rng = np.random.default_rng(seed)
        with h5py.File(m.path("l.h5"), "r") as f:
            for r in rng.integers(0, n, 300):
                if not np.array_equal(f["v"][int(r)], want(np.array([r]))[0]):
                    bad.append(int(r))

    threads = [threading.Thread(target=reader, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad[:10]
    with h5py.File(m.path("l.h5"), "r") as f:  # one read alone: its end trims (the threads' may not have)
        assert np.array_equal(f["v"][n // 3], want(np.array([n // 3]))[0])
    m.assert_alive()
    stats = open(m.path(".h5logfs-stats")).read()
    t = re.search(r"tables decoded (\d+) \(held (\d+) B, evicted (\d+)\)", stats)
    assert t, stats
    decoded, held, evicted = map(int, t.groups())
    assert held <= budget and evicted > 0 and decoded > n - 1024, stats


def test_live_sparse_time_axis(tmp_path, h5logfs):
    """A live file whose [t, 64] variable (a chunk per row) passes 2^16
    chunks while a reader polls it: from then on the daemon writes its
    chunk index itself and patches it in place tick after tick (new rows
    join the index after its last chunk). Every snapshot the reader sees
    is whole (stamp S: S * R rows, row i holding i // R + 1, the live
    writer's rule), and so is the closed file."""
    src = tmp_path / "src"
    src.mkdir()
    rows, ticks = 1000, 90  # 65,536 rows pass at tick 66
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "live.h5"), "--ticks",
                          str(ticks), "--interval", "0.05", "--rows-per-tick", str(rows)],
                         env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    m = h5logfs(src, opts="tick=0.05")
    rng = np.random.default_rng(3)
    seen, bad = set(), []
    done_at = None  # when the writer was seen finished: the reader goes on until it sees the last tick
    while True:
        if done_at is None and w.poll() is not None:
            done_at = time.monotonic()
        # a loaded machine may finish the writer while the snapshot after
        # the variable turned sparse is still being built (CI once saw 66
        # last): poll on, for at most 60 s, until the last tick shows
        if done_at is not None and ((len(seen) >= 3 and max(seen) >= ticks) or time.monotonic() - done_at > 60):
            break
        try:
            with h5py.File(m.path("live.h5"), "r") as f:
                s = int(f["stamp"][0])
                v = f["v"]
                if s < 1:
                    continue
                if v.shape != (s * rows, 64):
                    bad.append((s, v.shape))
                    continue
                pick = np.unique(np.concatenate([[0, s * rows - 1], rng.integers(0, s * rows, 20)]))
                got = np.stack([v[int(i)] for i in pick])
                if not np.array_equal(got, np.repeat((pick // rows + 1)[:, None], 64, 1).astype(got.dtype)):
                    bad.append((s, "values"))
                seen.add(s)
        except (OSError, KeyError) as e:
            if seen:  # not there yet (tick 0 has no variables); once a snapshot was read, none may fail
                bad.append((max(seen), repr(e)))
    assert w.wait(timeout=120) == 0, w.stderr.read()
    assert not bad, bad[:5]
    assert max(seen) > 66, sorted(seen)  # snapshots after the variable turned sparse
    stats = open(m.path(".h5logfs-stats")).read()
    assert re.search(r"patched in place [1-9]", stats), stats
    assert int(re.search(r"chunk indexes written by the daemon (\d+)", stats).group(1)) > 0, stats
    assert int(re.search(r"grown in place (\d+)", stats).group(1)) > 0, stats
    with h5py.File(m.path("live.h5"), "r") as f:
        v = f["v"][...]
        assert v.shape == (ticks * rows, 64)
        assert np.array_equal(v, np.repeat((np.arange(ticks * rows) // rows + 1)[:, None], 64, 1).astype(v.dtype))
    m.assert_alive()


def test_chunk_overwritten_every_tick_reads_its_newest(tmp_path, h5logfs):
    """/stamp and /w are overwritten by every one of 20,000 ticks (the live
    writer's rule: after tick k both hold k; /w in two ranks' halves). A
    read of them at the newest tick needs the records of that tick only,
    which cover the chunk: the daemon decodes a few record tables (and the
    rows of /v the kernel reads ahead), not one per tick (it decoded 2 per tick of the log before, and a
    million-tick file took 4 s to open). The values are the rule's."""
    src = tmp_path / "src"
    src.mkdir()
    n = 20000
    w = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(src / "s.h5"), "--ticks", str(n),
                        "--interval", "0", "--rows-per-tick", "1"], env=ENV, capture_output=True, text=True,
                       timeout=600)
    assert w.returncode == 0, w.stderr
    m = h5logfs(src)
    with h5py.File(m.path("s.h5"), "r") as f:
        assert int(f["stamp"][0]) == n
        assert np.array_equal(f["w"][...], np.full(1024, n, dtype=f["w"].dtype))
        assert np.array_equal(f["v"][n - 3:], np.repeat(np.arange(n - 2, n + 1)[:, None], 64, 1))
    with h5py.File(m.path(".h5logfs-ticks", "s.h5", "12345.h5"), "r") as f:  # an old tick: its own newest
        assert int(f["stamp"][0]) == 12345
        assert np.array_equal(f["w"][...], np.full(1024, 12345, dtype=f["w"].dtype))
    stats = open(m.path(".h5logfs-stats")).read()
    t = re.search(r"file \S+s.h5: .*tables decoded (\d+)", stats)
    # (a few hundred: the kernel's readahead reads /v's rows of tick 12345 too)
    assert t and int(t.group(1)) < n // 20, stats
    m.assert_alive()
