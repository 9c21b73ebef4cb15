"""Index checkpoints (docs/format.md 3.5) against the numpy model of difftest.py.

Files written with a checkpoint after every tick or every second tick
(H5L_CKPT_TICKS) must read, at every tick, exactly as the model says
(h5logreplay --tick N, read with h5py), and must really hold the checkpoint
frames (counted here by walking the journal, not by the library). Faults:
a checkpoint whose payload is damaged is skipped and loses nothing; one
whose header is damaged stops the journal there (ticks before it still
equal the model, none after it is served); a writer killed after a
checkpoint, its sidecar then cut inside the checkpoint frame (a torn
tail), still serves every committed tick.

Run with /usr/bin/python3 -m pytest.
"""
import os
import re
import shutil
import struct
import subprocess

import pytest

import difftest
from h5ltest import BIN, ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)

SEEDS = [(5, 4, 1), (3, 4, 2), (8, 4, 1), (12, 1, 1), (17, 2, 2), (21, 1, 2), (26, 2, 1), (30, 4, 2)]
CKPT = 0x8003


def write(spec, nranks, workdir, every, **extra):
    old = dict(ENV)
    ENV["H5L_CKPT_TICKS"] = str(every)
    ENV.update(extra)
    try:
        return difftest.write(spec, nranks, workdir)
    finally:
        ENV.clear()
        ENV.update(old)


def journal(h5):
    """(file holding the journal, its start, its length) from the user block."""
    with open(h5, "rb") as f:
        ub = f.read(64)
    off, length, flags = struct.unpack_from("<QQQ", ub, 32)
    if flags & 1:
        return h5, off, length
    side = h5 + ".h5lj"
    return side, 0, os.path.getsize(side)


def frames(h5):
    """[(type, journal offset, payload length)] of every complete frame."""
    path, base, length = journal(h5)
    with open(path, "rb") as f:
        f.seek(base)
        j = f.read(length)
    out, pos = [], 64
    while pos + 24 <= len(j):
        n, typ = struct.unpack_from("<IH", j, pos)
        size = (24 + n + 7) & ~7
        if pos + size > len(j):
            break
        out.append((typ, pos, n))
        pos += size
    return out


def from_ckpt(h5):
    """The newest tick the reader took from checkpoints (h5logdump says), 0: none."""
    p = subprocess.run([os.path.join(BIN, "h5logdump"), h5], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        m = re.match(r"from index checkpoints: ticks 1\.\.(\d+)", line)
        if m:
            return int(m.group(1))
    return 0


def replay(src, tick, out):
    """h5logreplay --checkpoints: the reader as the daemon opens files (from
    the checkpoints, tables decoded when needed). A problem, or None."""
    p = subprocess.run([difftest.REPLAY, "--checkpoints", "--tick", str(tick), src, out], capture_output=True,
                       text=True, timeout=120)
    return None if p.returncode == 0 else f"h5logreplay --checkpoints --tick {tick}: {p.stderr.strip()}"


def check_ticks(h5, states, workdir, upto=None):
    """Differences of ticks 1..upto (all) against the model, read from the
    checkpoints."""
    st = states if upto is None else states[:upto]
    diffs = []
    for s in st:
        out = os.path.join(workdir, f"tick{s.tick}.h5")
        prob = replay(h5, s.tick, out)
        diffs += [prob] if prob else difftest.check_h5py(out, s, "h5logreplay")
        if os.path.exists(out):
            os.unlink(out)
    return diffs


@pytest.mark.parametrize("seed,nranks,every", SEEDS, ids=[f"seed{s}-np{n}-every{e}" for s, n, e in SEEDS])
def test_checkpointed_file_equals_model(tmp_path, h5logfs, seed, nranks, every):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    h5, prob = write(spec, nranks, str(tmp_path / "src"), every)
    assert prob is None, prob
    kinds = [t for t, _, _ in frames(h5)]
    ticks = kinds.count(1)
    assert ticks == len(states)
    assert kinds.count(CKPT) == ticks // every, kinds
    assert from_ckpt(h5) == ticks // every * every  # the reader starts from them
    diffs = difftest.check_replay(h5, states, str(tmp_path))  # the whole journal
    diffs += check_ticks(h5, states, str(tmp_path))  # from the checkpoints, every tick
    m = h5logfs(tmp_path / "src")
    diffs += difftest.check_mount(m.path(os.path.basename(h5)), states[-1])
    m.assert_alive()
    assert not diffs, difftest.report(seed, nranks, diffs)
    p = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "--quiet", h5], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    # every checkpoint compared with the frames and tables it summarises
    assert "%d index checkpoints" % (ticks // every) in p.stdout, p.stdout


def _flip(path, at):
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x5A]))


def _seeded(tmp_path, seed=5, nranks=4, every=1):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    h5, prob = write(spec, nranks, str(tmp_path / "src"), every)
    assert prob is None, prob
    return h5, states


@pytest.mark.parametrize("which", ["all", "oldest", "newest"])
def test_damaged_checkpoint_payload_loses_nothing(tmp_path, which):
    """Damaged checkpoints are not used (all, or the oldest: the chain is
    broken, the whole journal is read; the newest: the one before it is
    the start) and every tick still equals the model."""
    h5, states = _seeded(tmp_path)
    assert len(states) >= 3
    path, base, _ = journal(h5)
    ck = [(pos, n) for t, pos, n in frames(h5) if t == CKPT]
    assert from_ckpt(h5) == len(ck)
    pick = {"all": ck, "oldest": ck[:1], "newest": ck[-1:]}[which]
    for pos, n in pick:  # in the middle of the payload
        _flip(path, base + pos + 24 + n // 2)
    assert from_ckpt(h5) == (len(ck) - 1 if which == "newest" else 0)
    # readers skip them silently; h5logdump --check names each one
    p = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "--quiet", h5], capture_output=True, text=True)
    assert p.returncode == 1, p.stdout + p.stderr
    named = [ln for ln in p.stdout.splitlines() if ln.startswith("CORRUPT:") and "fails its checksum" in ln]
    assert [int(ln.split("journal offset ")[1].split(":")[0]) for ln in named] == [pos for pos, _ in pick], p.stdout
    diffs = check_ticks(h5, states, str(tmp_path))
    assert not diffs, diffs


def test_damaged_checkpoint_header_stops_there(tmp_path):
    h5, states = _seeded(tmp_path)
    path, base, _ = journal(h5)
    fr = frames(h5)
    k = [i for i, (t, _, _) in enumerate(fr) if t == CKPT][0]
    served = sum(1 for t, _, _ in fr[:k] if t == 1)
    _flip(path, base + fr[k][1] + 2)  # its length
    assert not check_ticks(h5, states, str(tmp_path), upto=served)
    out = str(tmp_path / "after.h5")
    assert replay(h5, served + 1, out) is not None  # never a wrong answer: refused


def test_torn_checkpoint_after_killed_writer(tmp_path):
    """Rank 0 dies before committing tick 4 (test build hook): the sidecar
    ends with tick 3 and its checkpoint; cut inside that checkpoint, the
    journal has a torn tail and ticks 1..3 still equal the model."""
    spec, nranks = difftest.generate(5, 4)
    states = difftest.run_model(spec, nranks)
    assert len(states) >= 4
    h5, prob = write(spec, nranks, str(tmp_path / "src"), 1, H5L_TEST_KILL_BEFORE_COMMIT="4")
    assert prob is not None  # the writer was killed
    side = h5 + ".h5lj"
    fr = frames(h5)
    assert fr[-1][0] == CKPT and [t for t, _, _ in fr].count(1) == 3, fr
    pos, n = fr[-1][1], fr[-1][2]
    for cut in (pos + 10, pos + 24 + n // 2):
        tdir = tmp_path / f"cut{cut}"
        tdir.mkdir()
        shutil.copy(h5, tdir / "d.h5")
        shutil.copy(side, tdir / "d.h5.h5lj")
        os.truncate(tdir / "d.h5.h5lj", cut)
        assert from_ckpt(str(tdir / "d.h5")) == 2  # the torn one is not used
        diffs = check_ticks(str(tdir / "d.h5"), states, str(tdir), upto=3)
        assert not diffs, diffs
        assert replay(str(tdir / "d.h5"), 4, str(tdir / "t4.h5")) is not None


def test_damaged_table_of_checkpointed_tick(tmp_path):
    """A record table of a checkpointed tick is checked when a read needs
    it: tick 2's table damaged, reads of tick 1 from the checkpoints still
    equal the model, reads at tick 2 and later fail (never a wrong answer),
    and h5logdump --check (the whole journal, every table) names tick 2."""
    h5, states = _seeded(tmp_path)
    assert len(states) >= 3
    p = subprocess.run([os.path.join(BIN, "h5logdump"), h5], capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("tick 2:")][0]
    size, off = int(line.split("table ")[1].split()[0]), int(line.split(" bytes at ")[2].split(",")[0])
    _flip(h5, off + size // 2)
    assert from_ckpt(h5) == len(states)
    assert not check_ticks(h5, states, str(tmp_path), upto=1)
    for t in range(2, len(states) + 1):
        prob = replay(h5, t, str(tmp_path / f"t{t}.h5"))
        assert prob is not None and "tick 2" in prob, prob
    chk = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "--quiet", h5], capture_output=True, text=True)
    assert chk.returncode == 1 and "CORRUPT: tick 2:" in chk.stdout, chk.stdout


def test_check_of_a_file_being_written_reports_nothing(tmp_path):
    """h5logdump --check run again and again while a writer appends ticks
    and a checkpoint after every second one (a checkpoint frame may be half
    written when it reads the journal, the tick it ends may be past what it
    loaded): a healthy file is never reported corrupt, and once the writer
    has closed it every checkpoint is compared."""
    from h5ltest import BUILD
    h5 = str(tmp_path / "live.h5")
    env = dict(ENV, H5L_CKPT_TICKS="2")
    w = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "1", os.path.join(BUILD, "bench", "live_many"), h5,
                          "--vars", "12", "--ticks", "240", "--interval", "0.01"], env=env, stdout=subprocess.DEVNULL)
    checks, live_checks = 0, 0
    try:
        while w.poll() is None:
            # the writer creates the sidecar, then the HDF5 file, then its
            # user block: until the magic is there it is not a log file yet
            if not os.path.exists(h5 + ".h5lj") or not os.path.exists(h5):
                continue
            with open(h5, "rb") as f:
                if f.read(8) != b"\x89H5LOG\r\n":
                    continue
            p = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "--quiet", h5], capture_output=True,
                               text=True)
            checks += 1
            live_checks += os.path.exists(h5 + ".h5lj")
            assert p.returncode == 0 and "CORRUPT" not in p.stdout, p.stdout + p.stderr
    finally:
        w.wait(timeout=120)
    assert w.returncode == 0
    assert live_checks >= 5, checks
    p = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "--quiet", h5], capture_output=True, text=True)
    assert p.returncode == 0 and "240 ticks" in p.stdout and "120 index checkpoints" in p.stdout, p.stdout


def _attr_log_spec(nticks):
    """A [time, x] variable that grows a row a tick; every tick also stamps
    the root's "step" (as models do), and now and then other attributes
    are set: /v's "units" every fifth tick, its "note" twice in tick 13,
    "alpha" at 14 and "note" again at 15 (so "note" stays first), the
    root's "zeta" at 22 and "beta" with "zeta" again at 23. Ticks 17..20
    write nothing: only their attributes tell them apart (their skeletons
    must not be shared)."""
    def text(path, name, s):
        return f"text {path} {name} {s.encode().hex()}"
    lines = ["create", "dim time U", "dim x 4", "var /v f8 - 2 0 1"]
    for k in range(1, nticks + 1):
        if not 17 <= k <= 20:
            lines.append(f"put 0 /v {k} {k - 1} 0 1 4")
        lines.append("att / step f8 1 " + struct.pack("<d", float(k)).hex())
        if k % 5 == 2:
            lines.append(text("/v", "units", f"K/{k}"))
        lines += {13: [text("/v", "note", "first"), text("/v", "note", "second, same tick")],
                  14: [text("/v", "alpha", "a")], 15: [text("/v", "note", "third")],
                  22: [text("/", "zeta", "z1")], 23: [text("/", "beta", "b"), text("/", "zeta", "z2")]}.get(k, [])
        lines.append("flush")
    lines.append("close")
    return "\n".join(lines) + "\n"


def _summary_flags(h5):
    """The flags varint of each checkpoint's summary (format.md 3.5), read
    from the journal bytes here, not by the library."""
    path, base, _ = journal(h5)
    out = []
    with open(path, "rb") as f:
        for t, pos, _ in frames(h5):
            if t != CKPT:
                continue
            f.seek(base + pos + 24 + 40)
            slen = struct.unpack("<I", f.read(4))[0]
            f.seek(base + pos + 24 + 56)
            out.append(f.read(1)[0] if slen else None)
    return out


def test_attribute_segments_through_the_ticks_tree(tmp_path, h5logfs):
    """A log setting attributes at every tick, checkpointed every 8 ticks:
    its segments after the first are simple with an attribute list (flags
    3), which the daemon opens from their last values alone; every tick
    through the ticks tree (old ticks inside those segments read their ATTR
    ops again) equals the numpy model, attributes and their order
    included, as does the whole-journal replay."""
    spec = _attr_log_spec(37)
    states = difftest.run_model(spec, 1)
    h5, prob = write(spec, 1, str(tmp_path / "src"), 8)
    assert prob is None, prob
    assert _summary_flags(h5) == [0, 3, 3, 3]  # 1..8 defines /v: not simple
    diffs = difftest.check_replay(h5, states, str(tmp_path))
    m = h5logfs(tmp_path / "src")
    d = m.path(".h5logfs-ticks", os.path.basename(h5))
    for st in reversed(states):  # the newest first, then back into the segments
        diffs += difftest.check_h5py(os.path.join(d, f"{st.tick}.h5"), st, f"ticks/{st.tick}")
    diffs += difftest.check_mount(m.path(os.path.basename(h5)), states[-1])
    m.assert_alive()
    assert not diffs, diffs[:20]
