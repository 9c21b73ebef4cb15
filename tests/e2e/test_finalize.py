"""Finalizing at close (docs/format.md 1.1 and 6, "At close"), path by path.

h5l_close finalizes in parallel: a chunk whose bytes are one contiguous run
of the log stays in place (its index entry points into /_h5log/log.K),
other chunks are assembled into /_h5log/fin.K, and a contiguous variable
whose records tile it as runs of the log is stored chunked in place; the
finalizer writes the chunk B-trees itself and patches the layout messages
after libhdf5 closed the file. A wrong address there shows as wrong values
only in plain readers, so every check here reads the file as plain h5py
and netCDF4 see it, against the independent numpy model of difftest.py:

a) hand-written specs at 1, 2 and 4 ranks, with variables big enough
   (chunks of at least 64 KiB, H5L_FINAL_INPLACE_MIN) for in-place and
   rechunked storage, one per path: z-plane chunks of x bands (copied),
   chunks equal to each rank's band (in place), contiguous variables
   written as bands of rows or as column boxes (stored chunked in place),
   a row per tick split across ranks (in place: the parts lie side by side
   in one tick), overlapping writes across ticks (copied, the newest
   wins), a sparse variable, NOFILL and user fill variables partly written,
   edge chunks. Each finalized file equals the model in h5py and netCDF4,
   in h5logreplay at every tick and through the mount; and the path the
   spec is built for must really have been taken: each chunk's address
   (h5py's get_chunk_info, relative to the HDF5 base, so plus the user
   block) is classified by the address ranges of the log extents and of
   fin.K, independently of the finalizer's own bookkeeping;
b) h5repack and h5copy of a finalized file keep every value (they read
   through the finalizer's indexes); h5logdump --check of the copies fails
   cleanly (the repacked copy keeps the user block but not the journal at
   its offset, the h5copy copy has no user block);
c) read errors and short reads while finalizing (the LD_PRELOAD fault
   shim on reads of d.h5): a short read is retried and the file is right;
   an error makes the close fail saying "not finalized", never crash, the
   variables then fail loudly in plain readers, and h5logrecover finalizes
   the file to the model's values. Also on rank 1 of 2, and at a sample of
   every read the close makes (the log, object headers, libhdf5's check);
d) 20 random scripts of difftest's generator (seeds 200-219): the
   finalized file equals the model in h5py and netCDF4 (test_standalone
   has seeds 1-12), and its storage is as format.md 1.1 says (every chunk
   holding data in the log or in fin.K, exactly the written chunks
   indexed, contiguous variables chunked only in place).

The model follows the documented semantics, not the code.
Run with /usr/bin/python3 -m pytest (h5py and netCDF4 of Debian).
"""
import os
import re
import subprocess

import h5py
import numpy as np
import pytest

import difftest
from h5ltest import BIN, BUILD, ENV
from h5ltest import h5logfs  # noqa: F401 (a fixture)
from test_standalone import assert_fails_loudly, dump_state, netcdf_diffs, recover

DUMP = os.path.join(BIN, "h5logdump")
SHIM = os.path.join(BUILD, "tests", "fault_shim.so")
INPLACE_MIN = 64 << 10  # docs/format.md 1.1: a contiguous variable is rechunked only into chunks this big


# --------------------------------------------------------------------------
# the specs (format: tests/mpi/spec_writer.c), each with what the finalizer
# must do with each variable: (chunk shape, placement)
#   chunk shape: a tuple (exact), None (contiguous), "rows" (stored chunked
#     in bands of whole rows: chunks[1:] == shape[1:]), "grid" (stored
#     chunked, any shape dividing the variable's);
#   placement: "log" (every chunk holding data in a log extent), "fin"
#     (every one in fin.K), a {chunk coordinates: "log" | "fin"} dict, or
#     None (contiguous: libhdf5's storage, neither log nor fin.K).
# Chunks holding data are exactly those the model says were written.


def put(rank, path, seed, start, count):
    return f"put {rank} {path} {seed} " + " ".join(str(x) for x in list(start) + list(count))


def bands(n, length):
    """[(start, count)] of n near-equal bands of 0..length."""
    return [(int(b[0]), len(b)) for b in np.array_split(np.arange(length), n)]


def fill_hex(dtype, value):
    return np.array([value], dtype=dtype).tobytes().hex()


def spec_zplanes(n):
    """x bands of a [128, 128, 32] f4 with z-plane chunks (64 KiB): on one
    rank the put is laid out chunk by chunk (format.md 6) and every chunk
    is one run (in place); on more ranks each chunk has one part of every
    rank, far apart in the log (copied)."""
    L = ["create", "dim x 128", "dim y 128", "dim z 32", "var /t f4 128,128,1 3 0 1 2"]
    L += [put(r, "/t", 100 + r, (s, 0, 0), (c, 128, 32)) for r, (s, c) in enumerate(bands(n, 128))]
    return L + ["flush", "close"], {"/t": ((128, 128, 1), "log" if n == 1 else "fin")}


def spec_chunkbands(n):
    """Chunks equal to each rank's x band: every chunk in place."""
    L = ["create", "dim x 128", "dim y 128", "dim z 32", f"var /b f4 {128 // n},128,32 3 0 1 2"]
    L += [put(r, "/b", 200 + r, (s, 0, 0), (c, 128, 32)) for r, (s, c) in enumerate(bands(n, 128))]
    return L + ["flush", "close"], {"/b": ((128 // n, 128, 32), "log")}


def spec_contig_bands(n):
    """Contiguous variables written as bands of rows, all ranks in one tick
    (/c1) and one tick per band (/c2): stored chunked in place."""
    L = ["create", "dim r 256", "dim k 256", "dim q 128", "var /c1 f4 - 2 0 1", "var /c2 f8 - 2 0 2"]
    L += [put(r, "/c1", 300 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 256))]
    L.append("flush")
    for r, (s, c) in enumerate(bands(n, 256)):
        L += [put(r, "/c2", 310 + r, (s, 0), (c, 128)), "flush"]
    return L + ["close"], {"/c1": ("rows", "log"), "/c2": ("rows", "log")}


def spec_contig_rewritten(n):
    """A contiguous variable written as bands, the last band written again
    whole at a later tick: the older record under it is hidden, so every
    band is still one run (stored chunked in place; it was copied when the
    hidden record counted)."""
    L = ["create", "dim r 256", "dim k 256", "var /w f4 - 2 0 1"]
    L += [put(r, "/w", 350 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 256))]
    s, c = bands(n, 256)[-1]
    L += ["flush", put(n - 1, "/w", 360, (s, 0), (c, 256)), "flush"]
    return L + ["close"], {"/w": ("rows", "log")}


def spec_contig_columns(n):
    """A contiguous [4, 128, 512] f4 cut across ranks by columns: each
    rank's box one run of the log, but no band of rows is: stored chunked
    with the writers' boxes as chunks."""
    L = ["create", "dim a 4", "dim b 128", "dim k 512", "var /d f4 - 3 0 1 2"]
    L += [put(r, "/d", 400 + r, (0, 0, s), (4, 128, c)) for r, (s, c) in enumerate(bands(n, 512))]
    return L + ["flush", "close"], {"/d": ((4, 128, 512 // n), "log")}


def spec_row_per_tick(n):
    """A row per tick of a [time, 16384] f4 (default chunks [1, 16384],
    64 KiB), each row split across the ranks: the parts lie side by side
    in the tick's data, so each row is one run (in place)."""
    L = ["create", "dim time U", "dim L 16384", "var /r f4 - 2 0 1"]
    for t in range(3):
        L += [put(r, "/r", 500 + 10 * t + r, (t, s), (1, c)) for r, (s, c) in enumerate(bands(n, 16384))]
        L.append("flush")
    return L + ["close"], {"/r": ((1, 16384), "log")}


def spec_overlap(n):
    """Bands written at tick 1, overwritten at ticks 2 and 3 (across ranks,
    the same tick too): chunks 0 and 1 have parts of several ticks (copied,
    the newest wins); chunk 3 is rewritten whole by one record of tick 2,
    chunk 2 only ever by one record of tick 1 (both in place)."""
    L = ["create", "dim r 256", "dim k 256", "var /o f4 64,256 2 0 1"]
    L += [put(r, "/o", 600 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 256))]
    L += ["flush", put(n - 1, "/o", 610, (32, 0), (64, 256)), put(0, "/o", 611, (192, 0), (64, 256)), "flush"]
    L += [put(0, "/o", 620, (100, 0), (10, 256)), put(n - 1, "/o", 621, (105, 3), (10, 250)), "flush", "close"]
    return L, {"/o": ((64, 256), {(0, 0): "fin", (1, 0): "fin", (2, 0): "log", (3, 0): "log"})}


def spec_sparse(n):
    """3 of 64 chunks of a [1024, 1024] f4 written: two whole (in place),
    one in part (copied); the other 61 are not indexed (read as fill)."""
    L = ["create", "dim r 1024", "dim k 1024", "var /s f4 128,128 2 0 1",
         put(0, "/s", 700, (0, 0), (128, 128)), put(n - 1, "/s", 701, (384, 640), (128, 128)),
         put(n // 2, "/s", 702, (900, 950), (10, 50)), "flush", "close"]
    return L, {"/s": ((128, 128), {(0, 0): "log", (3, 5): "log", (7, 7): "fin"})}


def spec_fills(n):
    """NOFILL and user fill values: a NOFILL chunked variable partly
    written (a whole chunk in place, a part copied, the rest zeros); a
    user-fill contiguous variable partly written (contiguous, copied with
    its fill); a user-fill and a NOFILL contiguous variable written whole
    in bands (stored chunked in place, keeping their fill values)."""
    L = ["create", "dim r 256", "dim k 512", "dim h 128", "dim w 256",
         "var /nf i4 128,128 2 0 1", "nofill /nf",
         "var /uf f8 - 2 2 3", "fill /uf " + fill_hex("<f8", -1e30),
         "var /ufw >f8 - 2 2 1", "fill /ufw " + fill_hex(">f8", 2.5e12),
         "var /nfc i4 - 2 0 3", "nofill /nfc",
         put(0, "/nf", 800, (0, 0), (128, 128)), put(n - 1, "/nf", 801, (130, 300), (10, 10))]
    L += [put(r, "/uf", 810 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 100))]
    L += [put(r, "/ufw", 820 + r, (s, 0), (c, 512)) for r, (s, c) in enumerate(bands(n, 128))]
    L += [put(r, "/nfc", 830 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 256))]
    return L + ["flush", "close"], {"/nf": ((128, 128), {(0, 0): "log", (1, 2): "fin"}), "/uf": (None, None),
                                     "/ufw": ("rows", "log"), "/nfc": ("rows", "log")}


def spec_edge(n):
    """Edge chunks: a [100, 300] f4 with [64, 256] chunks written whole by
    one put (laid out chunk by chunk): the one full chunk in place, the
    three edge chunks copied (their padding is not in the log); and a
    contiguous [250, 256] f4 in bands that do not divide it evenly."""
    L = ["create", "dim r 100", "dim k 300", "dim q 250", "dim w 256", "var /ec f4 - 2 2 3",
         "var /e f4 64,256 2 0 1"]
    L += [put(r, "/ec", 900 + r, (s, 0), (c, 256)) for r, (s, c) in enumerate(bands(n, 250))]
    L += [put(n - 1, "/e", 910, (0, 0), (100, 300)), "flush", "close"]
    return L, {"/e": ((64, 256), {(0, 0): "log", (0, 1): "fin", (1, 0): "fin", (1, 1): "fin"}),
               "/ec": ("rows", "log")}


SPECS = {f.__name__[5:]: f for f in (spec_zplanes, spec_chunkbands, spec_contig_bands, spec_contig_rewritten,
                                     spec_contig_columns,
                                     spec_row_per_tick, spec_overlap, spec_sparse, spec_fills, spec_edge)}
CASES = [(name, n) for name in SPECS for n in (1, 2, 4)]


# --------------------------------------------------------------------------
# helpers


def write_spec(wd, spec, nranks, env_extra=None):
    """spec_writer on nranks in directory wd: (path of d.h5, process)."""
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "spec.txt").write_text(spec)
    h5 = wd / "d.h5"
    env_extra = env_extra or {}
    cmd = ["mpirun", "--oversubscribe", "-np", str(nranks)] + sum((["-x", k] for k in sorted(env_extra)), [])
    p = subprocess.run(cmd + [difftest.SPEC_WRITER, str(wd / "spec.txt"), str(h5)], env=dict(ENV, **env_extra),
                       capture_output=True, text=True, errors="replace", timeout=120)
    return h5, p


def spec_text(name, nranks):
    lines, expect = SPECS[name](nranks)
    return "\n".join([f"# test_finalize spec {name}, {nranks} ranks"] + lines) + "\n", expect


def report(what, nranks, diffs):
    """difftest.report for something other than a seed ("spec NAME")."""
    return difftest.report(what, nranks, diffs).replace("seed ", "", 1)


def fail_report(name, nranks, diffs, wd):
    return report(f"spec {name}", nranks, diffs) + f"\n  spec: {wd / 'spec.txt'}"


def extents(f):
    """[(kind, first byte, end)] of the log extents ("log") and fin.K
    ("fin") of an open h5py file: absolute file offsets."""
    out = []
    for name, ds in f["_h5log"].items():
        kind = name.split(".")[0]
        if kind in ("log", "fin") and not name.endswith(".index") and isinstance(ds, h5py.Dataset):
            off = ds.id.get_offset()
            if off is not None:
                out.append((kind, off, off + ds.shape[0] * ds.dtype.itemsize))
    return out


def where(ext, off, size):
    """Which extent holds bytes [off, off + size): "log", "fin" or "other"."""
    for kind, lo, hi in ext:
        if lo <= off and off + size <= hi:
            return kind
    return "other"


def written_chunks(v, chunks):
    """Chunk coordinates holding at least one written element (model)."""
    w = v["written"]
    grid = [-(-n // c) for n, c in zip(w.shape, chunks)]
    return {ix for ix in np.ndindex(*grid)
            if w[tuple(slice(i * c, (i + 1) * c) for i, c in zip(ix, chunks))].any()}


def storage_diffs(path, st, expect, label):
    """Where a finalized file's variables keep their data, from the
    addresses libhdf5 reports, against docs/format.md 1.1 (every variable)
    and against expect (the variables it names; see SPECS):
    * a chunk holding data lies in a log extent (in place) or in fin.K
      (copied), is a full chunk's bytes, and the chunks holding data (the
      indexed ones) are exactly those with an element the model says was
      written: the others read as the fill value;
    * a variable defined contiguous and stored chunked (in place) has all
      its chunks in the log, of at least INPLACE_MIN bytes, dividing its
      shape (an edge chunk would be copied);
    * contiguous data lies in storage of its own, neither log nor fin.K."""
    diffs = []
    with h5py.File(path, "r") as f:
        ub = f.userblock_size
        ext = extents(f)
        if not any(k == "log" for k, _, _ in ext):
            return [f"{label}: extents: no /_h5log/log.K dataset found"]
        for p, v in st.vars.items():
            w = f"{label} {p}"
            ds = f.get(p)
            if not isinstance(ds, h5py.Dataset):
                continue  # (check_h5py says so)
            cwant, pwant = expect.get(p, ("any", "any"))
            if ds.chunks is None:
                if cwant not in (None, "any"):
                    diffs.append(f"{w}: storage: contiguous, expected chunked {cwant}")
                off = ds.id.get_offset() if ds.shape and ds.size else None
                kind = "other" if off is None else where(ext, off, ds.id.get_storage_size())
                if kind != "other":
                    diffs.append(f"{w}: storage: contiguous data in {kind}, expected storage of its own")
                continue
            if cwant is None:
                diffs.append(f"{w}: storage: chunked {ds.chunks}, expected contiguous")
                continue
            rechunked = v["chunk"] is None and not any(v["unlimited"])
            ok = {"rows": ds.chunks[1:] == ds.shape[1:] and ds.shape[0] % ds.chunks[0] == 0,
                  "grid": all(n % c == 0 for n, c in zip(ds.shape, ds.chunks)),
                  "any": True}.get(cwant, ds.chunks == cwant)
            if not ok:
                diffs.append(f"{w}: storage: chunks {ds.chunks}, expected {cwant}")
            nbytes = int(np.prod(ds.chunks)) * ds.dtype.itemsize
            if rechunked and (nbytes < INPLACE_MIN or any(n % c for n, c in zip(ds.shape, ds.chunks))):
                diffs.append(f"{w}: storage: stored chunked {ds.chunks} ({nbytes} bytes a chunk), expected chunks "
                             f"of at least {INPLACE_MIN} bytes dividing its shape {ds.shape}")
            got = {}
            for i in range(ds.id.get_num_chunks()):
                ci = ds.id.get_chunk_info(i)
                ix = tuple(o // c for o, c in zip(ci.chunk_offset, ds.chunks))
                if ci.size != nbytes:
                    diffs.append(f"{w}: storage: chunk {ix} has {ci.size} bytes, expected {nbytes}")
                got[ix] = where(ext, ci.byte_offset + ub, ci.size)  # (relative to the HDF5 base)
            want_set = written_chunks(v, ds.chunks)
            if set(got) != want_set:
                diffs.append(f"{w}: storage: indexed chunks {sorted(got)[:8]}, expected the written ones "
                             f"{sorted(want_set)[:8]} ({len(got)} and {len(want_set)})")
            if pwant == "any":
                want = {ix: "log" if rechunked else got.get(ix) if got.get(ix) in ("log", "fin") else "log or fin"
                        for ix in want_set}
            else:
                want = pwant if isinstance(pwant, dict) else {ix: pwant for ix in want_set}
            bad = [ix for ix in sorted(want) if got.get(ix) != want[ix]]
            if bad:
                diffs.append(f"{w}: placement: {len(bad)} of {len(want)} chunks elsewhere; first {bad[0]} is in "
                             f"{got.get(bad[0], 'no index entry')}, expected {want[bad[0]]}")
    return diffs


def plain_diffs(h5, st, label):
    """The finalized file as plain h5py and netCDF4 read it, against st."""
    return (difftest.check_h5py(str(h5), st, label, finalized=True)
            + netcdf_diffs(str(h5), st, label, finalized=True))


# --------------------------------------------------------------------------
# a) each path


@pytest.mark.parametrize("name,nranks", CASES, ids=[f"{s}-np{n}" for s, n in CASES])
def test_finalize_path(tmp_path, h5logfs, name, nranks):
    spec, expect = spec_text(name, nranks)
    states = difftest.run_model(spec, nranks)
    wd = tmp_path / "src"
    h5, p = write_spec(wd, spec, nranks)
    assert p.returncode == 0, f"spec {name} ({nranks} ranks): {p.stderr[-2000:]}"
    assert "journal embedded, finalized" in dump_state(h5), f"spec {name} ({nranks} ranks)"
    diffs = plain_diffs(h5, states[-1], "plain file")
    diffs += storage_diffs(str(h5), states[-1], expect, f"tick {states[-1].tick} (plain file, storage)")
    diffs += difftest.check_replay(str(h5), states, str(tmp_path))
    m = h5logfs(wd)
    diffs += difftest.check_mount(m.path(h5.name), states[-1])
    m.assert_alive()
    if diffs:
        pytest.fail(fail_report(name, nranks, diffs, wd), pytrace=False)


# --------------------------------------------------------------------------
# b) copies made with the HDF5 tools


@pytest.mark.parametrize("name,nranks", [("fills", 2), ("overlap", 4), ("edge", 4)])
def test_repack_and_copy_keep_values(tmp_path, name, nranks):
    spec, _ = spec_text(name, nranks)
    st = difftest.run_model(spec, nranks)[-1]
    wd = tmp_path / "src"
    h5, p = write_spec(wd, spec, nranks)
    assert p.returncode == 0, p.stderr[-2000:]
    rp = tmp_path / "repacked.h5"
    r = subprocess.run(["h5repack", str(h5), str(rp)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    diffs = difftest.check_h5py(str(rp), st, "h5repack copy", finalized=True)
    cp = tmp_path / "copied.h5"
    for v in st.vars:
        r = subprocess.run(["h5copy", "-p", "-i", str(h5), "-o", str(cp), "-s", v, "-d", "/copy" + v],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"h5copy {v}: {r.stdout}{r.stderr}"
    with h5py.File(cp, "r") as f:
        for v, want in st.vars.items():
            got = f["/copy" + v]
            if got.dtype != want["dtype"] or got.shape != want["shape"]:
                diffs.append(f"h5copy {v}: {got.dtype.str} {got.shape}, expected {want['dtype'].str} "
                             f"{want['shape']}")
            elif not np.array_equal(got[()], want["data"]):
                diffs.append(f"h5copy {v}: values differ from the model")
    if diffs:
        pytest.fail(fail_report(name, nranks, diffs, wd), pytrace=False)
    # h5logdump --check: the repacked copy keeps the user block (h5repack
    # copies it) but not the journal at the offset it names; the copy has
    # no user block. Both are refused cleanly (status 1, no signal); the
    # original still checks.
    for path, says in ((rp, "journal header magic missing"), (cp, "not a log-layout file")):
        d = subprocess.run([DUMP, "--check", str(path)], capture_output=True, text=True, timeout=60)
        assert d.returncode == 1 and says in d.stdout + d.stderr, (path, d.returncode, d.stdout, d.stderr)
    d = subprocess.run([DUMP, "--check", str(h5)], capture_output=True, text=True, timeout=120)
    assert d.returncode == 0, d.stdout + d.stderr


# --------------------------------------------------------------------------
# c) read faults while finalizing


FAULT_SPEC = "fills"  # copied chunks, chunks in place, rechunked and copied contiguous variables


def fault_env(call, kind, rank=None, times=None):
    env = {"LD_PRELOAD": SHIM, "H5L_FAULT_PATH": "/d.h5", "H5L_FAULT_OP": "read", "H5L_FAULT_CALL": str(call),
           "H5L_FAULT_KIND": kind,
           # the shim loads before a sanitizer runtime under make asan
           "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"}
    if rank is not None:
        env["H5L_FAULT_RANK"] = str(rank)
    if times is not None:
        env["H5L_FAULT_TIMES"] = str(times)
    return env


def no_crash(p):
    out = p.stdout + p.stderr
    assert "on signal" not in out and "Segmentation" not in out and "Aborted" not in out.replace(
        "MPI_ABORT", ""), out[-3000:]
    assert p.returncode in (0, 1), f"status {p.returncode}: {out[-3000:]}"


def close_message(p):
    """What the ranks said about the failed close: their lines of stderr
    from the first "'close': " on (libhdf5's error stacks left out)."""
    err = p.stderr[p.stderr.find("'close': "):] if "'close': " in p.stderr else ""
    return "\n".join(l for l in err.splitlines() if not l.lstrip().startswith(("#", "major:", "minor:", "HDF5-DIAG")))


def check_outcome(tmp_path, h5, p, states, label):
    """A close under a read fault either finalized the file right, or
    failed saying it is not finalized and left a file plain readers refuse
    and h5logrecover finalizes. Returns the close's message ("" if it
    succeeded)."""
    no_crash(p)
    st = states[-1]
    assert not os.path.exists(str(h5) + ".h5lj"), f"{label}: the close left its sidecar"
    nranks = int(re.search(r"-np (\d+)", " ".join(p.args)).group(1))
    if p.returncode == 0:
        assert "journal embedded, finalized" in dump_state(h5), label
        diffs = plain_diffs(h5, st, "plain file")
        assert not diffs, report(label, nranks, diffs)
        return ""
    msg = close_message(p)
    assert "not finalized" in msg and "the file was closed with ticks 1..1" in msg, f"{label}: {p.stderr[-3000:]}"
    assert "journal embedded, not finalized" in dump_state(h5), label
    assert_fails_loudly(str(h5), st)
    r = recover(h5)
    assert r.returncode == 0 and "finalized at tick 1" in r.stdout, f"{label}: {r.stdout}{r.stderr}"
    diffs = plain_diffs(h5, st, "recovered")
    diffs += difftest.check_replay(str(h5), states, str(tmp_path))
    assert not diffs, report(label, nranks, diffs)
    return msg


_first_log_read = {}


def first_log_read(tmp_path, name, nranks, rank, extra):
    """The number of the first read of d.h5 (on rank `rank`) that is one of
    the finalizer's reads of log data: the first call whose EIO makes the
    close say so. Found by trying 1, 2, ... (cached)."""
    key = (name, nranks, rank)
    if key not in _first_log_read:
        spec, _ = spec_text(name, nranks)
        for call in range(1, 25):
            env = dict(fault_env(call, "eio", rank), **extra)
            h5, p = write_spec(tmp_path / f"find{nranks}-{call}", spec, nranks, env)
            no_crash(p)
            if "reading log data" in close_message(p):
                _first_log_read[key] = call
                break
        else:
            pytest.fail(f"spec {name} ({nranks} ranks): no read of the first 24 (on rank {rank or 0}) is a read of "
                        f"log data by the finalizer: the fault never landed there")
    return _first_log_read[key]


@pytest.mark.parametrize("kind", ["eio", "short:1", "short-then-eio"])
def test_read_fault_in_the_finalizer(tmp_path, kind):
    """The first read of the log by the finalizer fails (EIO), comes back
    short (1 byte: retried, the file is right), or comes back short and
    its retry fails."""
    nranks = 1
    call = first_log_read(tmp_path, FAULT_SPEC, nranks, None, {})
    spec, _ = spec_text(FAULT_SPEC, nranks)
    states = difftest.run_model(spec, nranks)
    env = (fault_env(call, "short:1", times=2) if kind == "short-then-eio" else fault_env(call, kind))
    h5, p = write_spec(tmp_path / "src", spec, nranks, env)
    label = f"spec {FAULT_SPEC}, read {call} of d.h5 {kind}"
    msg = check_outcome(tmp_path, h5, p, states, label)
    if kind == "short:1":
        assert p.returncode == 0, f"{label}: a short read is not an error: {msg}"
    else:
        assert p.returncode == 1 and "reading log data" in msg and "Input/output error" in msg, f"{label}: {msg}"


# z-plane chunks of x bands on 2 ranks: 2 MiB of copies, in tiles of 1 MiB
# (H5L_FINALIZE_WINDOW), so rank 1 reads and writes half of them
OTHER_RANK = ("zplanes", {"H5L_FINALIZE_WINDOW": str(1 << 20)})


@pytest.mark.parametrize("what", ["open", "log"])
def test_read_fault_on_another_rank(tmp_path, what):
    """Rank 1 of 2 cannot read: its first read (opening its reader of the
    journal: it cannot plan, rank 0 finalizes alone, the file is right), or
    its first read of its share of the log (every rank learns it, rank 0
    reports rank 1's reason, the file closes unfinalized)."""
    nranks, (name, extra) = 2, OTHER_RANK
    call = 1 if what == "open" else first_log_read(tmp_path, name, nranks, 1, extra)
    spec, _ = spec_text(name, nranks)
    states = difftest.run_model(spec, nranks)
    h5, p = write_spec(tmp_path / "src", spec, nranks, dict(fault_env(call, "eio", rank=1), **extra))
    msg = check_outcome(tmp_path, h5, p, states, f"spec {name}, read {call} of d.h5 on rank 1 eio")
    if what == "open":
        assert p.returncode == 0, msg
    else:
        assert p.returncode == 1 and "reading log data" in msg and "Input/output error" in msg, msg


def test_failed_check_names_the_file(tmp_path):
    """libhdf5 cannot read the finalized file back (h5l_final_point's check
    of the layouts): the close's reason names the file, as every other one
    does."""
    nranks = 1
    spec, _ = spec_text(FAULT_SPEC, nranks)
    states = difftest.run_model(spec, nranks)
    for call in range(15, 45):  # (the reads before are the log's and the object headers')
        h5, p = write_spec(tmp_path / f"c{call}", spec, nranks, fault_env(call, "eio"))
        if ("libhdf5 cannot open '" in p.stderr or "libhdf5 finds chunk" in p.stderr
                or "libhdf5 cannot read the chunk index" in p.stderr):
            break
    else:
        pytest.fail("no read fault landed in libhdf5's check of the finalized file")
    check_outcome(tmp_path, h5, p, states, f"spec {FAULT_SPEC}, read {call} of d.h5 eio")
    m = re.search(r"'close': error -?\d+: (.*?): finalizing: libhdf5 ", p.stderr, re.S)
    assert m and m.group(1) == str(h5), close_message(p)[:1000]


# every third read the close of FAULT_SPEC makes on one rank: the reader's
# open, the log, the object headers read to point the layouts, libhdf5's
# check of the result (the close makes about 35)
SWEEP = list(range(1, 40, 3))


@pytest.mark.parametrize("call", SWEEP)
def test_read_fault_sweep(tmp_path, call):
    """Whichever read fails, the close never crashes, and either the file
    is finalized right or the close says it is not and it recovers."""
    nranks = 1
    spec, _ = spec_text(FAULT_SPEC, nranks)
    states = difftest.run_model(spec, nranks)
    h5, p = write_spec(tmp_path / "src", spec, nranks, fault_env(call, "eio"))
    check_outcome(tmp_path, h5, p, states, f"spec {FAULT_SPEC}, read {call} of d.h5 eio")


# --------------------------------------------------------------------------
# d) random scripts

RANDOM = [(s, (1, 2, 4)[i % 3]) for i, s in enumerate(range(200, 220))]


@pytest.mark.parametrize("seed,nranks", RANDOM, ids=[f"seed{s}-np{n}" for s, n in RANDOM])
def test_random_scripts_finalized(tmp_path, seed, nranks):
    spec, nranks = difftest.generate(seed, nranks)
    states = difftest.run_model(spec, nranks)
    h5, p = write_spec(tmp_path / "src", spec, nranks)
    assert p.returncode == 0, f"seed {seed} ({nranks} ranks): {p.stderr[-2000:]}"
    diffs = plain_diffs(h5, states[-1], "plain file")
    diffs += storage_diffs(str(h5), states[-1], {}, f"tick {states[-1].tick} (plain file, storage)")
    if diffs:
        pytest.fail(difftest.report(seed, nranks, diffs)
                    + f"\n  rerun: /usr/bin/python3 tests/e2e/soak.py --seed {seed}", pytrace=False)

