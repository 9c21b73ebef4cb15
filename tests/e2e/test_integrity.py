"""Integrity: nothing wrong is ever served, and damage in one tick does not
take the earlier ones with it.

Why: of 225 random mutations of closed files, 40 (bit flips, a zeroed 4 KiB
page in a tick's data) were once served through the mount as wrong values
with no error, and `h5logdump --check` said OK; a damaged tick made the
whole file EIO. Here a closed file written by tests/mpi/test_writer is
mutated at random many times (a bit flipped, or a 4 KiB page zeroed, at any
offset: journal, record tables, data, HDF5 metadata), and every reader must
either report the damage or return exactly what the original file holds at
the tick it serves: h5logdump --check, h5logreplay (compared with replays
of the intact file, tick by tick) and the daemon (h5py through the mount,
compared the same way; an unreadable variable must be EIO, and the daemon
must say so in its log). A damaged record table and a flipped data byte are
also checked by hand: the tick before the damage is what every tool serves,
and each says what is damaged.
"""
import contextlib
import errno
import os
import shutil
import subprocess
import time

import h5py
import numpy as np
import pytest

from h5ltest import BIN, ENV, TEST_WRITER

TICKS = 4
VARS = ["a", "grp/b", "c", "grp/sub/d", "s", "x"]


@contextlib.contextmanager
def daemon(srcdir, tmp_path):
    """h5logfs on srcdir at tmp_path/mnt (its log in tmp_path/daemon.log);
    always unmounted. Yields the mount point."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = open(tmp_path / "daemon.log", "w")
    p = subprocess.Popen([os.path.join(BIN, "h5logfs"), str(srcdir), str(mnt), "-f", "-o", "tick=0.1"],
                         stdout=subprocess.DEVNULL, stderr=log)
    try:
        for _ in range(200):
            if os.path.ismount(mnt):
                break
            time.sleep(0.05)
        assert os.path.ismount(mnt), "h5logfs did not mount"
        yield mnt
        assert p.poll() is None, "the daemon died"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
        p.wait(timeout=10)
        log.close()


def log_lines(tmp_path, name):
    """The daemon's log lines naming name (after its ticker's turn)."""
    time.sleep(0.3)
    return [l for l in open(tmp_path / "daemon.log").read().splitlines() if name in l]


def tool(name, *args, **kw):
    return subprocess.run([os.path.join(BIN, name)] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=120, **kw)


def read_vars(path):
    """Every variable of a canonical file (h5py): {name: array}; shapes differ
    between ticks."""
    with h5py.File(path, "r") as f:
        return {v: f[v][()] for v in VARS if v in f}


def same(a, b):
    return a.keys() == b.keys() and all(a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and
                                        np.array_equal(a[k], b[k], equal_nan=True) for k in a)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A closed file of TICKS ticks (2 ranks) and its replays at every tick."""
    d = tmp_path_factory.mktemp("orig")
    subprocess.run(["mpirun", "--oversubscribe", "-np", "2", TEST_WRITER, str(d), "--ticks", str(TICKS), "--seed", "5"],
                   env=ENV, check=True, capture_output=True, timeout=300)
    ref = {}
    for t in range(1, TICKS + 1):
        out = d / f"tick{t}.h5"
        p = tool("h5logreplay", d / "t.h5", out, "--tick", t)
        assert p.returncode == 0, p.stderr
        ref[t] = read_vars(out)
    return d / "t.h5", ref


def journal_span(data):
    joff = int.from_bytes(data[32:40], "little")
    jlen = int.from_bytes(data[40:48], "little")
    return joff, jlen


def mutate(data, rng, regions):
    """One random mutation: a flipped bit (2/3) or a zeroed 4 KiB page (1/3).
    A third of them aimed at the embedded journal, a third at the ticks'
    data and record tables (regions: [(offset, size)]), a third anywhere past
    the magic. Returns (bytes, description)."""
    b = bytearray(data)
    joff, jlen = journal_span(data)
    aim = rng.integers(0, 3)
    if aim == 0:
        lo, hi = joff, joff + jlen
    elif aim == 1:
        lo, n = regions[int(rng.integers(0, len(regions)))]
        hi = lo + max(n, 1)
    else:
        lo, hi = 8, len(b)
    at = int(rng.integers(lo, hi))
    if rng.random() < 1 / 3:
        page = max(at & ~4095, 4096)
        b[page:page + 4096] = bytes(len(b[page:page + 4096]))
        return bytes(b), f"zeroed page at {page}"
    bit = int(rng.integers(0, 8))
    b[at] ^= 1 << bit
    return bytes(b), f"bit {bit} of byte {at}"


def test_random_mutations_never_serve_wrong_values(original, tmp_path):
    src_file, ref = original
    data = src_file.read_bytes()
    regions = []
    for doff, dsize, toff in tick_table(src_file):
        regions += [(doff, dsize), (toff, 64)] if dsize else [(toff, 64)]
    rng = np.random.default_rng(2026)
    srcdir = tmp_path / "src"
    srcdir.mkdir()
    detected = silent_ok = 0
    problems = []
    mounted = []
    for i in range(160):
        m, what = mutate(data, rng, regions)
        path = srcdir / f"m{i}.h5"
        path.write_bytes(m)
        chk = tool("h5logdump", "--check", "-q", path)
        rep = tool("h5logreplay", path, tmp_path / "r.h5")
        if chk.returncode == 0:
            # every checksum verified: the replay must be the intact newest tick
            if rep.returncode != 0:
                problems.append(f"{what}: --check OK but replay failed: {rep.stderr.strip()}")
            elif not same(read_vars(tmp_path / "r.h5"), ref[TICKS]):
                problems.append(f"{what}: --check OK but replay differs from the intact file")
            else:
                silent_ok += 1
        else:
            detected += 1
            assert "CORRUPT" in chk.stdout or chk.stderr, (what, chk.stdout, chk.stderr)
            if rep.returncode == 0:
                # what replay wrote is an intact earlier tick (it warned), or the
                # newest tick when only data bytes nobody needed... never wrong
                got = read_vars(tmp_path / "r.h5")
                if not any(same(got, ref[t]) for t in ref):
                    # the damage may be in data: replay must then fail, not write wrong values
                    problems.append(f"{what}: replay wrote values of no intact tick ({chk.stdout.strip()[:200]})")
        if i % 4 == 0:
            mounted.append((path.name, what))
        else:
            path.unlink()
    assert not problems, "\n".join(problems[:20])
    # most mutations hit the journal, tables or data; the rest fell on HDF5
    # metadata of the anchors or unused bytes, and then every value was right
    assert detected >= 80, f"only {detected} of 160 mutations were detected"

    # through the mount: every variable of every mutated file reads as an
    # intact tick's values, or fails with EIO (and the daemon says why)
    with daemon(srcdir, tmp_path) as mnt:
        for name, what in mounted:
            path = mnt / name
            try:
                tick = int(os.getxattr(path, "user.h5logfs.tick"))
            except OSError:  # nothing of it can be read (a bad inode): opening it is EIO
                with pytest.raises(OSError) as ei:
                    open(path, "rb").read()
                assert ei.value.errno == errno.EIO, (name, what, ei.value)
                continue
            try:
                got = read_vars(path)
            except (OSError, RuntimeError, KeyError):  # h5py's ways of reporting EIO
                continue
            if tick == 0:  # the first tick is damaged: an empty file
                assert got == {}, (name, what, list(got))
                continue
            want = ref.get(tick)
            assert want is not None and same(got, want), f"{name} ({what}): tick {tick} served wrong values"


def tick_table(path):
    """(data offset, data size, table offset) of every tick, from h5logdump."""
    d = tool("h5logdump", path)
    out = []
    for line in d.stdout.splitlines():
        if line.startswith("tick ") and "data" in line:
            # tick N: ranks R, data SIZE bytes at OFF, table SIZE bytes at OFF, N records
            w = line.replace(",", "").split()
            out.append((int(w[8]), int(w[5]), int(w[13])))
    return out


def test_damaged_tick_serves_the_ones_before_it(original, tmp_path):
    """A record table of tick 3 fails its checksum: h5logdump --check names
    tick 3 and exits 1; h5logreplay warns once and writes tick 2; the daemon
    serves tick 2, logs one line and shows user.h5logfs.damaged."""
    src_file, ref = original
    srcdir = tmp_path / "src"
    srcdir.mkdir()
    bad = srcdir / "bad.h5"
    shutil.copy(src_file, bad)
    ticks = tick_table(bad)
    assert len(ticks) == TICKS, ticks
    _, _, table3 = ticks[2]
    with open(bad, "r+b") as f:
        f.seek(table3 + 10)
        c = f.read(1)
        f.seek(table3 + 10)
        f.write(bytes([c[0] ^ 0x20]))
    chk = tool("h5logdump", "--check", bad)
    assert chk.returncode == 1 and "CORRUPT: tick 3:" in chk.stdout and "ticks 1..2 are intact" in chk.stdout, chk.stdout
    rep = tool("h5logreplay", bad, tmp_path / "r.h5")
    assert rep.returncode == 0 and rep.stderr.count("warning") == 1 and "tick 3" in rep.stderr, rep.stderr
    assert same(read_vars(tmp_path / "r.h5"), ref[2])
    tail = tool("h5logtail", bad, "/x")
    assert tail.returncode == 1 and "tick 3" in tail.stderr and "showing the ticks before it" in tail.stderr, \
        (tail.returncode, tail.stderr)
    with daemon(srcdir, tmp_path) as mnt:
        for _ in range(3):
            assert same(read_vars(mnt / "bad.h5"), ref[2])
        assert os.getxattr(mnt / "bad.h5", "user.h5logfs.tick") == b"2"
        dmg = os.getxattr(mnt / "bad.h5", "user.h5logfs.damaged").decode()
        assert dmg.startswith("tick 3:") and "bad.h5" in dmg, dmg
        stats = open(mnt / ".h5logfs-stats").read()
        assert "DAMAGED" in stats, stats
        lines = log_lines(tmp_path, "bad.h5")
        assert len(lines) == 1 and "serving tick 2" in lines[0], lines


def test_flipped_data_byte_is_an_error_not_a_value(original, tmp_path):
    """One flipped bit in a tick's data: h5logdump --check finds it (naming
    the tick), h5logreplay fails instead of writing the wrong value, and
    through the mount the read is EIO with one log line. Other variables
    read right or fail too (the kernel reads pages, and in a file this small
    a page holds metadata and several variables' bytes): never a wrong
    value."""
    src_file, ref = original
    srcdir = tmp_path / "src"
    srcdir.mkdir()
    bad = srcdir / "bad.h5"
    shutil.copy(src_file, bad)
    doff, dsize, _ = tick_table(bad)[TICKS - 1]
    assert dsize > 0
    with open(bad, "r+b") as f:
        f.seek(doff + dsize // 2)
        c = f.read(1)
        f.seek(doff + dsize // 2)
        f.write(bytes([c[0] ^ 0x01]))
    chk = tool("h5logdump", "--check", bad)
    assert chk.returncode == 1 and f"CORRUPT: tick {TICKS}:" in chk.stdout and "fails its checksum" in chk.stdout, \
        chk.stdout
    rep = tool("h5logreplay", bad, tmp_path / "r.h5")
    assert rep.returncode == 1 and "fails its checksum" in rep.stderr, rep.stderr
    with daemon(srcdir, tmp_path) as mnt:
        failed = 0
        try:
            with h5py.File(mnt / "bad.h5", "r") as f:
                for v in VARS:
                    try:
                        got = f[v][()]
                    except (OSError, KeyError):  # h5py: EIO as OSError, or KeyError opening the object
                        failed += 1
                        continue
                    assert np.array_equal(got, ref[TICKS][v], equal_nan=True), f"{v}: wrong values served"
        except OSError:
            failed += 1
        assert failed >= 1, "the damaged data read without an error"
        lines = log_lines(tmp_path, "bad.h5")
        assert len(lines) == 1 and "fails its checksum" in lines[0], lines
