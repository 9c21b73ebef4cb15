"""End-to-end tests of h5logtail (build/bin/h5logtail), the tail-style monitor.

The writer is tests/mpi/live_writer.c under mpirun: /v float64 [t, 64], and
the rows written by tick k (R per tick) all equal k, so row i must read
i // R + 1. Expected values are computed here from that rule, never taken
from the tool. Covered:
  a) directly on a live log-layout file (libcore backend): every record
     appears exactly once, in order, with the right values, streamed while
     the writer runs, and h5logtail exits 0 by itself when the writer closes;
  b) -n / --from / labels / width / several variables on a closed file;
  c) through an h5logfs mount (libhdf5 backend, a fresh open per poll): the
     same sequence property, ended by --idle; without --idle it follows until
     SIGINT and then exits 0;
  d) bad input: exit 1 with a message naming the file or the variable;
  e) the libhdf5 backend on a plain HDF5 file that is replaced as it grows,
     and how it prints integer, float and string types.
Every mount is undone at teardown (fusermount3 -u, then -uz, then kill).
Run with /usr/bin/python3 -m pytest.
"""
import csv
import io
import os
import signal
import subprocess
import threading
import time

import h5py
import numpy as np
import pytest

from h5ltest import BIN, ENV, LIVE_WRITER
from h5ltest import h5logfs  # noqa: F401 (a fixture)

TAIL = os.path.join(BIN, "h5logtail")
NCOLS = 64
TICKS, ROWS = 20, 2  # live_writer --ticks, --rows-per-tick: 40 records of /v


def need(path):
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (make)")


def expected_row(i, rows=ROWS):
    return float(i // rows + 1)


class Proc:
    """A subprocess whose stdout lines are collected with their arrival time."""

    def __init__(self, args, env=None):
        self.args = [str(a) for a in args]
        self.lines = []  # (monotonic time, line without newline)
        self.proc = subprocess.Popen(self.args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self._err = []
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()
        self._te = threading.Thread(target=lambda: self._err.append(self.proc.stderr.read()), daemon=True)
        self._te.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout):
        """Return code, or None if still running after timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._t.join(timeout=5)
        self._te.join(timeout=5)
        return rc

    def stdout(self):
        return "\n".join(line for _, line in self.lines)

    def stderr(self):
        return "".join(self._err)

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


@pytest.fixture
def procs():
    """Factory for Proc; every process still running at teardown is killed."""
    started = []

    def start(args, env=None):
        p = Proc(args, env=env)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


def live_writer(start, path, ticks=TICKS, interval=0.1, rows=ROWS):
    need(LIVE_WRITER)
    return start(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, path, "--ticks", ticks,
                  "--interval", interval, "--rows-per-tick", rows], env=ENV)


def tail(*args, timeout=30):
    need(TAIL)
    return subprocess.run([TAIL] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def parse_csv(text, ncols=NCOLS):
    """h5logtail --format csv output -> [(var, index, values)]; checks the header."""
    rows = list(csv.reader(io.StringIO(text)))
    assert rows, "no output at all (not even the CSV header)"
    assert rows[0] == ["var", "index"] + [f"v{i}" for i in range(ncols)], f"bad CSV header: {rows[0][:6]}..."
    out = []
    for r in rows[1:]:
        assert len(r) == 2 + ncols, f"CSV row with {len(r)} fields: {r[:6]}..."
        out.append((r[0], int(r[1]), [float(x) for x in r[2:]]))
    return out


def sequence_problems(records, n, var="/v", rows=ROWS):
    """[] if records are exactly var rows 0..n-1, once each, in order, with the
    values live_writer wrote; else what is wrong."""
    probs = []
    idx = [i for _, i, _ in records]
    if idx != list(range(n)):
        dup = sorted({i for i in idx if idx.count(i) > 1})
        missing = sorted(set(range(n)) - set(idx))
        probs.append(f"indices not 0..{n - 1} in order: {len(idx)} records, duplicates {dup[:10]}, "
                     f"missing {missing[:10]}, first {idx[:8]}")
    for v, i, vals in records:
        if v != var:
            probs.append(f"record {i}: variable {v!r}, expected {var!r}")
        elif any(x != expected_row(i, rows) for x in vals):
            probs.append(f"record {i}: values {sorted(set(vals))[:4]}, expected all {expected_row(i, rows)}")
        if len(probs) > 5:
            break
    return probs


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


# --------------------------------------------------------------------------
# a) directly on a live log-layout file (libcore backend)


def test_live_log_layout_file(tmp_path, procs):
    f = tmp_path / "run.h5"
    w = live_writer(procs, f)
    # started as soon as the file exists, perhaps before its user block is
    # written: h5logtail must wait for the writer to finish creating it
    wait_for(lambda: f.exists() or not w.running(), 60, f"{f} to be created")
    assert w.running(), f"live_writer ended before the file could be watched:\n{w.stdout()}{w.stderr()}"
    sidecar_at_start = os.path.exists(str(f) + ".h5lj")
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.1", f, "/v"])
    wrc = w.wait(60)
    w_end = time.monotonic()
    assert wrc == 0, f"live_writer failed ({wrc}):\n{w.stdout()}{w.stderr()}"
    # the writer closed the file: h5logtail must notice and exit 0 by itself
    rc = t.wait(15)
    assert rc is not None, f"h5logtail still running 15 s after the writer closed the file:\n{t.stderr()}"
    assert rc == 0, f"h5logtail exited {rc}:\n{t.stderr()}"
    assert t.stderr() == "", f"unexpected messages: {t.stderr()}"
    recs = parse_csv(t.stdout())
    assert sequence_problems(recs, TICKS * ROWS) == []
    # it streamed: records arrived while the writer was still writing
    first_data = t.lines[1][0]
    assert sidecar_at_start, "the file was already closed when h5logtail started"
    assert first_data < w_end, "no record was printed before the writer finished (output not streamed?)"


# --------------------------------------------------------------------------
# b) options on a closed file


@pytest.fixture(scope="module")
def closed_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("closed")
    f = d / "run.h5"
    need(LIVE_WRITER)
    p = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, str(f), "--ticks", str(TICKS),
                        "--interval", "0", "--rows-per-tick", str(ROWS)], env=ENV, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not os.path.exists(str(f) + ".h5lj"), "writer left its sidecar: file not closed"
    return f


def text_records(out):
    """'VAR[I]: v v v' lines -> [(var, index, values)]."""
    recs = []
    for line in out.splitlines():
        label, _, vals = line.partition(": ")
        var, _, idx = label.partition("[")
        assert idx.endswith("]"), f"unlabelled line {line[:40]!r}"
        recs.append((var, int(idx[:-1]), [float(x) for x in vals.split()]))
    return recs


def test_last_n_and_from(closed_file):
    n = TICKS * ROWS
    p = tail("--format", "csv", "-n", 5, closed_file, "/v")
    assert p.returncode == 0, p.stderr
    recs = parse_csv(p.stdout)
    assert [i for _, i, _ in recs] == list(range(n - 5, n))
    assert all(all(x == expected_row(i) for x in v) for _, i, v in recs)

    for args in (["--from", 10], ["-n", "+10"]):
        p = tail("--format", "csv", *args, closed_file, "v")
        assert p.returncode == 0, p.stderr
        recs = parse_csv(p.stdout)
        assert [i for _, i, _ in recs] == list(range(10, n)), args
        assert all(all(x == expected_row(i) for x in v) for _, i, v in recs), args

    # default: the last 10, like tail
    p = tail("--format", "csv", closed_file, "/v")
    assert [i for _, i, _ in parse_csv(p.stdout)] == list(range(n - 10, n))
    # --from past the end of a closed file: nothing, and done
    p = tail("--format", "csv", "--from", n + 5, closed_file, "/v")
    assert p.returncode == 0 and parse_csv(p.stdout) == []


def test_text_labels_width_and_several_vars(closed_file):
    n = TICKS * ROWS
    # FILE/VAR form, text, labels on (default)
    p = tail("-n", 3, f"{closed_file}/v")
    assert p.returncode == 0, p.stderr
    recs = text_records(p.stdout)
    assert [(v, i) for v, i, _ in recs] == [("/v", i) for i in range(n - 3, n)]
    assert all(vals == [expected_row(i)] * NCOLS for _, i, vals in recs)

    # no labels: bare values
    p = tail("-L", "-n", 2, closed_file, "/v")
    lines = p.stdout.splitlines()
    assert len(lines) == 2 and all(line.split() == ["20"] * NCOLS for line in lines), lines

    # width: lines wrapped at 40 columns, no value lost or split
    p = tail("-w", 40, "-n", 2, closed_file, "/v")
    lines = p.stdout.splitlines()
    assert lines and max(len(x) for x in lines) <= 40, max(len(x) for x in lines)
    starts = [x for x in lines if x.startswith("/v[")]
    assert len(starts) == 2
    assert p.stdout.replace("/v[38]:", "").replace("/v[39]:", "").split() == ["20"] * (2 * NCOLS)

    # several variables: each line labelled with its variable; /stamp follows
    # dim 0; -n and --from apply to each variable
    p = tail("-n", 1, closed_file, "/v", "/stamp")
    assert p.returncode == 0, p.stderr
    recs = text_records(p.stdout)
    assert [(v, i) for v, i, _ in recs] == [("/v", n - 1), ("/stamp", 0)]
    assert recs[1][2] == [TICKS]
    p = tail("--from", n - 1, closed_file, "/v", "/stamp")
    assert [(v, i) for v, i, _ in text_records(p.stdout)] == [("/v", n - 1)]
    p = tail("--format", "csv", "-n", 1, closed_file, "/stamp", "/v")
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert rows[0][:3] == ["var", "index", "v0"] and len(rows[0]) == 2 + NCOLS
    assert rows[1] == ["/stamp", "0", str(TICKS)] and rows[2][:3] == ["/v", str(n - 1), "20"]
    # CSV without labels: no header, values only
    p = tail("--format", "csv", "-L", "-n", 1, closed_file, "/v")
    assert p.stdout.splitlines() == [",".join(["20"] * NCOLS)]
    # --dim 1: records are the columns of /v
    p = tail("--format", "csv", "-d", 1, "-n", 1, closed_file, "/v")
    rows = list(csv.reader(io.StringIO(p.stdout)))
    assert len(rows) == 2 and len(rows[0]) == 2 + n
    assert rows[1][:2] == ["/v", str(NCOLS - 1)]
    assert [float(x) for x in rows[1][2:]] == [expected_row(i) for i in range(n)]


# --------------------------------------------------------------------------
# c) through an h5logfs mount (libhdf5 backend)


@pytest.fixture
def mount(tmp_path, h5logfs):  # noqa: F811
    """mount() -> (src, mnt): src mounted at mnt; always unmounted at teardown."""

    def start():
        src = tmp_path / "src"
        src.mkdir(exist_ok=True)
        return src, h5logfs(src).mnt

    return start


def mounted_rows(path):
    try:
        with h5py.File(path, "r") as f:
            return f["v"].shape[0]
    except (OSError, KeyError):
        return 0


def test_through_mount(mount, procs):
    src, mnt = mount()
    w = live_writer(procs, src / "run.h5")
    mpath = os.path.join(mnt, "run.h5")
    wait_for(lambda: mounted_rows(mpath) > 0 or not w.running(), 60, f"{mpath}/v")
    assert w.running(), f"live_writer ended before the file could be watched:\n{w.stdout()}{w.stderr()}"
    # through a mount the file's user.h5logfs.closed attribute ends it
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.1", mpath + "/v"])
    wrc = w.wait(60)
    w_end = time.monotonic()
    assert wrc == 0, f"live_writer failed ({wrc}):\n{w.stdout()}{w.stderr()}"
    rc = t.wait(20)
    assert rc is not None, f"h5logtail still running 20 s after the writer closed:\n{t.stderr()}"
    assert rc == 0, f"h5logtail exited {rc}:\n{t.stderr()}"
    recs = parse_csv(t.stdout())
    assert sequence_problems(recs, TICKS * ROWS) == [], t.stderr()
    assert t.lines[1][0] < w_end, "no record was printed before the writer finished (output not streamed?)"

    # --idle also ends it (a plain HDF5 file gives no close signal)
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.1", "--idle", "1", mpath + "/v"])
    assert t.wait(20) == 0, t.stderr()
    assert sequence_problems(parse_csv(t.stdout()), TICKS * ROWS) == [], t.stderr()

    # with --follow it follows the mounted file until interrupted, then exits 0
    t = procs([TAIL, "-n", 3, "-i", "0.1", "--follow", mpath + "/v"])
    wait_for(lambda: len(t.lines) >= 3 or not t.running(), 20, "3 lines from h5logtail -n 3")
    time.sleep(0.5)
    assert t.running(), f"h5logtail --follow exited ({t.proc.returncode}) on a closed mounted file:\n{t.stderr()}"
    t.proc.send_signal(signal.SIGINT)
    rc = t.wait(10)
    assert rc == 0, f"h5logtail after SIGINT: {rc}\n{t.stderr()}"
    recs = text_records(t.stdout())
    assert [i for _, i, _ in recs] == [37, 38, 39]


# --------------------------------------------------------------------------
# d) bad input


def test_bad_input(tmp_path, closed_file):
    missing = tmp_path / "nope" / "run.h5"
    for args in ([f"{missing}/v"], [missing, "/v"]):
        p = tail(*args)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert str(missing) in p.stderr and "No such file" in p.stderr, p.stderr
        assert p.stdout == ""
    for args in ([closed_file, "/nosuch"], [f"{closed_file}/nosuch/var"], [closed_file, "/v", "/nosuch"]):
        p = tail(*args)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert str(closed_file) in p.stderr and "/nosuch" in p.stderr, p.stderr
    p = tail(closed_file, "/")
    assert p.returncode == 1 and "not a variable" in p.stderr, p.stderr
    p = tail("-d", 2, closed_file, "/v")
    assert p.returncode == 1 and "/v" in p.stderr and "--dim" in p.stderr, p.stderr
    p = tail(closed_file)
    assert p.returncode == 1 and "no variable given" in p.stderr, p.stderr
    p = tail(tmp_path)
    assert p.returncode == 1 and str(tmp_path) in p.stderr, p.stderr
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not hdf5 at all\n" * 100)
    p = tail(junk, "/v")
    assert p.returncode == 1 and str(junk) in p.stderr and "HDF5" in p.stderr, p.stderr
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f.create_group("g")
        f["scalar"] = 5
    for var, why in (("/g", "group"), ("/scalar", "scalar"), ("/x", "no variable /x")):
        p = tail("--idle", 0, plain, var)
        assert p.returncode == 1 and str(plain) in p.stderr and why in p.stderr, (var, p.stderr)
    p = tail("--bogus", closed_file, "/v")
    assert p.returncode == 2 and "--bogus" in p.stderr
    p = tail("--format", "xml", closed_file, "/v")
    assert p.returncode == 2 and "xml" in p.stderr


# --------------------------------------------------------------------------
# e) libhdf5 backend on a plain file, and number formatting


def test_plain_hdf5_file_replaced_as_it_grows(tmp_path, procs):
    path = tmp_path / "grow.h5"
    nsteps, per = 12, 3

    def publish(k):  # a complete new file with k * per rows, row i = [i, -i, 2i]
        tmp = tmp_path / "grow.tmp"
        i = np.arange(k * per, dtype=np.int32)
        with h5py.File(tmp, "w") as f:
            f.create_dataset("a", data=np.stack([i, -i, 2 * i], axis=1), maxshape=(None, 3), chunks=(4, 3))
        os.replace(tmp, path)

    publish(1)
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.05", "--idle", "1.5", path, "a"])
    for k in range(2, nsteps + 1):
        time.sleep(0.15)
        publish(k)
    rc = t.wait(20)
    assert rc == 0, f"h5logtail exited {rc}:\n{t.stderr()}"
    rows = list(csv.reader(io.StringIO(t.stdout())))
    assert rows[0] == ["var", "index", "v0", "v1", "v2"]
    want = [["/a", str(i), str(i), str(-i), str(2 * i)] for i in range(nsteps * per)]
    assert rows[1:] == want


def test_value_formatting(tmp_path):
    path = tmp_path / "types.h5"
    with h5py.File(path, "w") as f:
        f["f8"] = np.array([[0.1, 20.0, 1e20, -0.0, 123456789.5, 1e-7, np.nan, -np.inf]])
        f["f4"] = np.array([[0.1, 20, 1.5e-7]], dtype=np.float32)
        f["i1"] = np.array([-128, 127], dtype=np.int8)
        f["u8"] = np.array([2 ** 64 - 1], dtype=np.uint64)
        f["i2be"] = np.array([-300], dtype=">i2")
        f["s"] = np.array([b"ab,c", b'q"x'], dtype="S5")
        f.create_dataset("vs", data=["hello"], dtype=h5py.string_dtype())
    p = tail("--idle", 0, "--from", 0, path, "f8", "f4", "i1", "u8", "i2be", "s", "vs")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "/f8[0]: 0.1 20 1e+20 -0 123456789.5 1e-07 nan -inf",
        "/f4[0]: 0.1 20 1.5e-07",
        "/i1[0]: -128",
        "/i1[1]: 127",
        "/u8[0]: 18446744073709551615",
        "/i2be[0]: -300",
        '/s[0]: "ab,c"',
        '/s[1]: "q\\"x"',
        '/vs[0]: "hello"',
    ]
    p = tail("--idle", 0, "--from", 0, "--format", "csv", "-p", 3, path, "f8", "s")
    assert p.stdout.splitlines()[1:] == [
        "/f8,0,0.1,20,1e+20,-0,1.23e+08,1e-07,nan,-inf",
        '/s,0,"ab,c"',
        '/s,1,"q""x"',
    ]
