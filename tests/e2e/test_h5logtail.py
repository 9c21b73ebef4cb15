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
     and how it prints integer, float and string types;
  f) CSV is one rectangular table (header variable,index,element,value, one
     row per value) whatever the variables' shapes, read with the csv module
     and checked against the writer's rule;
  g) like tail -F, h5logtail started before the file or the variable exists
     waits (one note on stderr), then shows the data; --wait-timeout bounds
     the wait (exit 1 naming the file and the variable), 0 does not wait;
  h) options anywhere among the operands.
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
        self._err = []  # stderr lines as they arrive
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()
        self._te = threading.Thread(target=self._pump_err, daemon=True)
        self._te.start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def _pump_err(self):
        for line in self.proc.stderr:
            self._err.append(line)

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


def live_writer(start, path, ticks=TICKS, interval=0.1, rows=ROWS, first_delay=0):
    """first_delay: seconds between creating the file (and defining its
    variables) and the first flush: the file exists without any variable."""
    need(LIVE_WRITER)
    return start(["mpirun", "--oversubscribe", "-np", "2", LIVE_WRITER, path, "--ticks", ticks,
                  "--interval", interval, "--rows-per-tick", rows, "--first-delay", first_delay], env=ENV)


def tail(*args, timeout=30):
    need(TAIL)
    return subprocess.run([TAIL] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


CSV_HEADER = ["variable", "index", "element", "value"]


def csv_rows(text, header=True):
    """The data rows of h5logtail --format csv output, checked to form one
    rectangular table: the header (unless -L), then rows of its width."""
    rows = list(csv.reader(io.StringIO(text)))
    if header:
        assert rows, "no output at all (not even the CSV header)"
        assert rows[0] == CSV_HEADER, f"bad CSV header: {rows[0]}"
        rows = rows[1:]
    for r in rows:
        assert len(r) == len(CSV_HEADER), f"CSV row with {len(r)} fields, the header has {len(CSV_HEADER)}: {r}"
    return rows


def parse_csv(text, ncols=NCOLS, header=True):
    """h5logtail --format csv output -> [(var, index, values)]: the rows of
    one record are consecutive, elements 0, 1, ... (ncols of them if given)."""
    out = []
    for var, idx, el, val in csv_rows(text, header):
        idx, el = int(idx), int(el)
        if el == 0:
            out.append((var, idx, []))
        else:
            assert out and out[-1][:2] == (var, idx) and len(out[-1][2]) == el, \
                f"row {var},{idx},{el} does not continue the record before it"
        out[-1][2].append(float(val))
    for var, idx, vals in out:
        assert ncols is None or len(vals) == ncols, f"{var}[{idx}] has {len(vals)} values, expected {ncols}"
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
    # the writer may not have flushed its first tick yet: then one note
    assert t.stderr() in ("", f"h5logtail: waiting for /v to appear in {f}\n"), f"unexpected messages: {t.stderr()}"
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
    rows = csv_rows(p.stdout)
    assert rows == [["/stamp", "0", "0", str(TICKS)]] + [["/v", str(n - 1), str(j), "20"] for j in range(NCOLS)]
    # CSV without labels: the same rows without the header line
    p = tail("--format", "csv", "-L", "-n", 1, closed_file, "/v")
    assert csv_rows(p.stdout, header=False) == [["/v", str(n - 1), str(j), "20"] for j in range(NCOLS)]
    # --dim 1: records are the columns of /v
    p = tail("--format", "csv", "-d", 1, "-n", 1, closed_file, "/v")
    recs = parse_csv(p.stdout, ncols=n)
    assert [(v, i) for v, i, _ in recs] == [("/v", NCOLS - 1)]
    assert recs[0][2] == [expected_row(i) for i in range(n)]


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
        p = tail("--wait-timeout", 0, *args)  # else it waits for the file to appear (g)
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
    # a closed log-layout file cannot gain a variable: no waiting
    p = tail(closed_file, "/nosuch")
    assert p.returncode == 1 and "waiting" not in p.stderr, p.stderr
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
    want = [["/a", str(i), str(j), str(x)] for i in range(nsteps * per) for j, x in enumerate((i, -i, 2 * i))]
    assert csv_rows(t.stdout()) == want


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
    f8 = ["0.1", "20", "1e+20", "-0", "1.23e+08", "1e-07", "nan", "-inf"]
    assert p.stdout.splitlines()[1:] == [f"/f8,0,{j},{x}" for j, x in enumerate(f8)] + [
        '/s,0,0,"ab,c"',
        '/s,1,0,"q""x"',
    ]
    assert csv_rows(p.stdout) == [["/f8", "0", str(j), x] for j, x in enumerate(f8)] + [
        ["/s", "0", "0", "ab,c"], ["/s", "1", "0", 'q"x']]


# --------------------------------------------------------------------------
# f) CSV: one rectangular table


def test_csv_is_one_table_for_variables_of_any_shape(closed_file):
    """/v (64 values a record), /stamp (1) and /w (1024 records of 1) in one
    table a spreadsheet reads: every row the header's width, every value
    the one live_writer wrote."""
    n = TICKS * ROWS
    p = tail("--format", "csv", "--from", 0, closed_file, "/v", "/stamp", "/w")
    assert p.returncode == 0, p.stderr
    rows = csv_rows(p.stdout)
    with_header = list(csv.DictReader(io.StringIO(p.stdout)))
    assert len(with_header) == len(rows) and all(None not in r and None not in r.values() for r in with_header)
    cells = {}
    for var, idx, el, val in rows:
        key = (var, int(idx), int(el))
        assert key not in cells, f"{key} printed twice"
        cells[key] = float(val)
    want = {("/v", i, j): expected_row(i) for i in range(n) for j in range(NCOLS)}
    want[("/stamp", 0, 0)] = TICKS
    want.update({("/w", i, 0): TICKS for i in range(1024)})
    assert cells.keys() == want.keys(), (sorted(cells.keys() - want.keys())[:5], sorted(want.keys() - cells.keys())[:5])
    bad = [(k, cells[k], want[k]) for k in want if cells[k] != want[k]]
    assert bad == [], bad[:5]
    # -L: the same table without its header line (to append to an earlier one)
    p = tail("--format", "csv", "-L", "--from", 0, closed_file, "/v", "/stamp", "/w")
    assert p.returncode == 0 and csv_rows(p.stdout, header=False) == rows


# --------------------------------------------------------------------------
# g) waiting for the file and the variable, like tail -F


def notes(p):
    return [line for line in p.stderr().splitlines() if "waiting for" in line]


def test_waits_for_the_file_and_its_first_tick(tmp_path, procs):
    """Started before the job: no file, then a file without any tick (the
    writer's --first-delay), then the data. One note, every record."""
    f = tmp_path / "run.h5"
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.1", f, "/v"])
    wait_for(lambda: notes(t) or not t.running(), 20, "h5logtail's note that it waits")
    assert t.running(), f"h5logtail exited {t.proc.returncode} on a file that does not exist yet:\n{t.stderr()}"
    assert notes(t) == [f"h5logtail: waiting for /v to appear in {f}"]
    w = live_writer(procs, f, first_delay=1.5)
    wait_for(lambda: f.exists() or not w.running(), 60, f"{f} to be created")
    time.sleep(0.5)  # the file exists, its first tick is a second away
    assert t.running() and t.lines == [], (t.lines[:3], t.stderr())
    assert w.wait(60) == 0, f"live_writer failed:\n{w.stdout()}{w.stderr()}"
    rc = t.wait(15)
    assert rc == 0, f"h5logtail: {rc}\n{t.stderr()}"
    assert t.stderr().splitlines() == [f"h5logtail: waiting for /v to appear in {f}"], "the note is said once"
    assert sequence_problems(parse_csv(t.stdout()), TICKS * ROWS) == []


def test_waits_through_a_mount(mount, procs):
    """The same through h5logfs: the mounted file appears empty of variables
    until the first tick."""
    src, mnt = mount()
    mpath = os.path.join(mnt, "run.h5")
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.1", mpath + "/v"])
    wait_for(lambda: notes(t) or not t.running(), 20, "h5logtail's note that it waits")
    assert t.running(), f"h5logtail exited {t.proc.returncode}:\n{t.stderr()}"
    w = live_writer(procs, src / "run.h5", first_delay=1.5)
    wait_for(lambda: os.path.exists(mpath) or not w.running(), 60, f"{mpath} to appear")
    time.sleep(0.5)
    assert t.running() and t.lines == [], (t.lines[:3], t.stderr())
    assert w.wait(60) == 0, f"live_writer failed:\n{w.stdout()}{w.stderr()}"
    rc = t.wait(20)
    assert rc == 0, f"h5logtail: {rc}\n{t.stderr()}"
    assert notes(t) == [f"h5logtail: waiting for {mpath}/v to appear"], t.stderr()
    assert "no variable" not in t.stderr()
    assert sequence_problems(parse_csv(t.stdout()), TICKS * ROWS) == [], t.stderr()


def test_waits_for_a_variable_of_a_plain_file(tmp_path, procs):
    path = tmp_path / "plain.h5"

    def publish(with_a):
        tmp = tmp_path / "plain.tmp"
        with h5py.File(tmp, "w") as f:
            f["other"] = np.arange(3)
            if with_a:
                f.create_dataset("a", data=np.arange(10, dtype=np.int32).reshape(5, 2), maxshape=(None, 2))
        os.replace(tmp, path)

    publish(False)
    t = procs([TAIL, "--format", "csv", "--from", "0", "-i", "0.05", "--idle", "3", path, "a"])
    wait_for(lambda: notes(t) or not t.running(), 20, "h5logtail's note that it waits")
    time.sleep(0.3)
    assert t.running() and notes(t) == [f"h5logtail: waiting for /a to appear in {path}"], t.stderr()
    publish(True)
    assert t.wait(20) == 0, t.stderr()
    assert csv_rows(t.stdout()) == [["/a", str(i), str(j), str(2 * i + j)] for i in range(5) for j in range(2)]
    assert len(notes(t)) == 1


def test_wait_timeout(tmp_path, procs):
    f = tmp_path / "run.h5"
    # no file: FILE VAR and FILE/VAR forms
    for args, what in (([f, "/v"], f"/v to appear in {f}"), ([f"{f}/v"], f"{f}/v to appear")):
        t0 = time.monotonic()
        p = tail("--wait-timeout", 1, "-i", 0.1, *args)
        took = time.monotonic() - t0
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        assert 0.9 < took < 10, took
        lines = p.stderr.splitlines()
        assert lines[0] == f"h5logtail: waiting for {what}" and len(lines) == 2, p.stderr
        assert "timed out after 1 s" in lines[1] and what in lines[1], p.stderr
        assert p.stdout == ""
    # 0: no waiting, the error at once
    p = tail("--wait-timeout", 0, f, "/v")
    assert p.returncode == 1 and p.stderr == f"h5logtail: {f}: No such file or directory\n", p.stderr

    # a file without any tick yet: the variable is not there
    w = live_writer(procs, f, ticks=3, first_delay=8)
    wait_for(lambda: f.exists() or not w.running(), 60, f"{f} to be created")
    time.sleep(0.3)
    p = tail("--wait-timeout", 0, f, "/v")
    assert p.returncode == 1 and p.stderr == f"h5logtail: {f}: no variable /v\n", p.stderr
    p = tail("--wait-timeout", 1, "-i", 0.1, f, "/v")
    assert p.returncode == 1, p.stderr
    assert "timed out after 1 s" in p.stderr and f"/v to appear in {f}" in p.stderr.splitlines()[-1], p.stderr
    assert w.running(), "the writer finished: the test did not see the file before its first tick"
    w.kill()

    # a live file whose ticks never define the variable
    g = tmp_path / "run2.h5"
    w = live_writer(procs, g, ticks=100, interval=0.1)
    wait_for(lambda: os.path.exists(str(g) + ".h5lj") or not w.running(), 60, f"{g} to be created")
    p = tail("--wait-timeout", 1.5, "-i", 0.1, g, "/v", "/nosuch")
    assert p.returncode == 1, p.stderr
    assert "timed out after 1.5 s" in p.stderr and f"/nosuch to appear in {g}" in p.stderr, p.stderr
    assert w.running(), "the writer finished before the wait timed out"
    # meanwhile the variable that exists was printed
    assert text_records(p.stdout) and all(v == "/v" for v, _, _ in text_records(p.stdout))


# --------------------------------------------------------------------------
# h) options anywhere


def test_options_anywhere(closed_file):
    n = TICKS * ROWS
    want = tail("--format", "csv", "-n", 2, closed_file, "/v")
    assert want.returncode == 0 and [i for _, i, _ in parse_csv(want.stdout)] == [n - 2, n - 1]
    for args in ([closed_file, "/v", "--format", "csv", "-n", 2],
                 [closed_file, "--format=csv", "/v", "--lines=2"],
                 ["-n2", closed_file, "/v", "--format", "csv"],
                 ["--format", "csv", "-n", 2, "--", closed_file, "/v"]):
        p = tail(*args)
        assert p.returncode == 0 and p.stdout == want.stdout, (args, p.stderr)
    p = subprocess.run([TAIL, str(closed_file), "/v", "--format", "csv", "-n", "2"], capture_output=True, text=True,
                       timeout=30, env=dict(os.environ, POSIXLY_CORRECT="1"))
    assert p.returncode == 0 and p.stdout == want.stdout, p.stderr
    for args, what in ((["--wait-timeout", "-1", closed_file, "/v"], "--wait-timeout"),
                       ([closed_file, "/v", "-n"], "-n needs a value"), (["-n", "x", closed_file, "/v"], "'x'")):
        p = tail(*args)
        assert p.returncode == 2 and what in p.stderr, (args, p.returncode, p.stderr)
