"""Real clients on the canonical file against a canonical netCDF-4 reference.

Our own tests read what they expect to find; real clients found bugs they
missed: a missing _FillValue dragged averages (cdo, ncra), a reserved
attribute name crashed ncdump, objects came out alphabetically instead of
in definition order, 1 MiB default chunks bloated a 134 KB file to 17.9 MB.
So each test here runs one unmodified client on the file under test and on
a reference, and requires the same output.

- The file under test: tests/mpi/climate_writer.c (mpirun -np 2 and -np 4)
  writes DIR/climate.h5 through libh5log; it is read through an h5logfs
  mount of DIR (after the writer closed it: user.h5logfs.closed == "1") and
  as h5logreplay's output.
- The reference: tests/e2e/clients_ref.py computes the same content with
  numpy, independently of the library, and writes it with netCDF4-python
  (netCDF-C) as an ordinary netCDF-4 file. It is what a netCDF user expects:
  definition order, netCDF default fill values, _FillValue attributes,
  netCDF-C's default chunk shapes.

Where the clients' outputs of the two files legitimately differ (names of
the files, addresses, netCDF-C's own bookkeeping attributes, allocation
policy), the normalising filter says why next to the code. Everything else
must be equal, byte for byte after the filter.

Run: H5LOG_BUILD=$PWD/build /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/e2e/test_clients.py
"""
import collections
import difflib
import os
import re
import shutil
import subprocess

import h5py
import numpy as np
import pytest

import clients_ref
from h5ltest import BIN, BUILD, ENV, wait_for
from h5ltest import h5logfs  # noqa: F401 (a fixture)

CLIMATE_WRITER = os.path.join(BUILD, "tests", "climate_writer")
REPLAY = os.path.join(BIN, "h5logreplay")
NPS = (2, 4)
TICKS = 6
# every variable of the file, by netCDF path (group/name)
VARS = ("time", "lat", "lon", "lev", "temp", "precip", "counts", "mask", "overlap", "unused", "p0",
        "ocean/sst", "ocean/surface/flux", "wind")
GROUPS = (None, "ocean", "ocean/surface")
# Attributes netCDF-C writes for its own bookkeeping and hides from netCDF
# users: _NCProperties names the library that wrote the file (the canonical
# file was not written by netCDF-C, so it must not claim to be);
# _Netcdf4Dimid and _Netcdf4Coordinates record dimension ids that netCDF-C
# otherwise derives from the dimension scales (which both files have).
NC_PRIVATE_ATTRS = ("_NCProperties", "_Netcdf4Dimid", "_Netcdf4Coordinates")
# The attributes of HDF5 dimension scales (H5DS)
H5DS_ATTRS = ("CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST")


# --------------------------------------------------------------------------
# helpers


def run(*args, ok=True, timeout=60, env=None):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout, env=env)
    if ok:
        assert p.returncode == 0, f"{' '.join(map(str, args))}: exit {p.returncode}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    return p


def need(cmd):
    if shutil.which(cmd) is None:
        pytest.skip(f"{cmd} is not installed (Debian: see DEB_PKGS in the Makefile)")


def same_text(got, want, what):
    """got == want, or fail with a unified diff (file under test vs reference)."""
    if got == want:
        return
    d = list(difflib.unified_diff(want.splitlines(), got.splitlines(), "reference", "under test", lineterm="", n=2))
    more = f"\n... {len(d) - 120} more diff lines" if len(d) > 120 else ""
    pytest.fail(f"{what} differs (- reference, + file under test):\n" + "\n".join(d[:120]) + more)


def rename_first_line(text, pattern, repl):
    """The first line names the file (ncdump: 'netcdf NAME {', h5dump:
    'HDF5 "PATH" {'); the two files have different names, nothing else."""
    lines = text.split("\n", 1)
    lines[0] = re.sub(pattern, repl, lines[0])
    return "\n".join(lines)


def ncdump(*args):
    p = run("ncdump", *args)
    return rename_first_line(p.stdout, r"^netcdf \S+ \{", "netcdf FILE {")


Run = collections.namedtuple("Run", "np dir out ref content replay replay_err")
Target = collections.namedtuple("Target", "path ref content np source tmp")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Per rank count: the writer's directory (climate.h5, reserved.h5),
    the reference netCDF file and h5logreplay's output. Made once."""
    if not os.access(CLIMATE_WRITER, os.X_OK):
        pytest.fail(f"{CLIMATE_WRITER} is not built (make)")
    base = tmp_path_factory.mktemp("clients")
    out = {}
    for n in NPS:
        d = base / f"run{n}"
        d.mkdir()
        p = run("mpirun", "--oversubscribe", "-np", n, CLIMATE_WRITER, d, "--ticks", TICKS, ok=False, timeout=120,
                env=ENV)
        assert p.returncode == 0, f"climate_writer -np {n}: exit {p.returncode}\n{p.stdout}{p.stderr}"
        assert not os.path.exists(d / "climate.h5.h5lj"), "the writer left its journal sidecar"
        ref = base / f"ref{n}" / "climate_ref.nc"
        ref.parent.mkdir()
        content = clients_ref.write(str(ref), n, TICKS)
        rep = base / f"replay{n}" / "climate.h5"
        rep.parent.mkdir()
        r = run(REPLAY, d / "climate.h5", rep, ok=False)
        out[n] = Run(n, d, p.stdout, ref, content, rep, None if r.returncode == 0 else r.stdout + r.stderr)
    return out


@pytest.fixture(params=[(n, s) for n in NPS for s in ("mount", "replay")], ids=lambda p: f"np{p[0]}-{p[1]}")
def target(request, runs, h5logfs, tmp_path):  # noqa: F811
    """The file under test: climate.h5 through a fresh h5logfs mount of the
    writer's directory, or h5logreplay's output of it."""
    n, source = request.param
    r = runs[n]
    if source == "mount":
        m = h5logfs(r.dir)
        path = m.path("climate.h5")

        def closed():
            try:
                return os.getxattr(path, "user.h5logfs.closed") == b"1"
            except OSError as e:  # not a served log-layout file: no use waiting
                pytest.fail(f"{path}: getxattr user.h5logfs.closed: {e}\n" + m.stderr()[-3000:])
        # the writer closed the file before the mount: closed at once
        assert wait_for(closed, 5), f"{path}: user.h5logfs.closed is not 1\n" + m.stderr()[-3000:]
    else:
        assert r.replay_err is None, f"h5logreplay {r.dir}/climate.h5: {r.replay_err}"
        path = str(r.replay)
    return Target(path, str(r.ref), r.content, n, source, tmp_path)


def masked_time_mean(a):
    """Mean over time of the written values only (independent of any client)."""
    return np.ma.masked_array(a).mean(axis=0)


def check_mean(got, content, what):
    """got (a client's time mean of precip, masked where the client found
    no value) is the mean of the written values: the fill value neither
    counted nor averaged in; the never-written cell (0, 0) has no mean."""
    expect = masked_time_mean(content["precip"])
    got = np.ma.masked_array(got)
    gm, em = np.ma.getmaskarray(got), np.ma.getmaskarray(expect)
    bad = gm != em
    bad[~gm & ~em] = ~np.isclose(np.ma.getdata(got)[~gm & ~em], np.ma.getdata(expect)[~gm & ~em], rtol=1e-12, atol=0)
    if bad.any():
        where = np.argwhere(bad & ~em)  # an example with a mean, if any
        j, i = where[0] if len(where) else np.argwhere(bad)[0]
        pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} cells are not the mean of the written values; "
                    f"e.g. [{j},{i}] = {got[j, i]}, expected {expect[j, i]} (written at times "
                    f"{np.flatnonzero(~np.ma.getmaskarray(content['precip'])[:, j, i]).tolist()})")


# --------------------------------------------------------------------------
# netCDF-C command-line tools


def test_ncdump(target):
    """Full ncdump (header and every value; '_' marks fill values, so fill
    handling shows) and ncdump -h; definition order, types, attributes."""
    need("ncdump")
    same_text(ncdump(target.path), ncdump(target.ref), "ncdump")
    same_text(ncdump("-h", target.path), ncdump("-h", target.ref), "ncdump -h")
    # -s adds netCDF's virtual attributes: per variable _Storage,
    # _ChunkSizes, _Endianness, _NoFill (storage must match the reference);
    # at the root only _NCProperties (provenance, see NC_PRIVATE_ATTRS),
    # _SuperblockVersion (the HDF5 superblock format, not content) and
    # _IsNetcdf4 (derived from the provenance) may differ.
    root_only = re.compile(r"^\t\t:(_NCProperties|_SuperblockVersion|_IsNetcdf4) = .*\n", re.M)
    same_text(root_only.sub("", ncdump("-s", "-h", target.path)), root_only.sub("", ncdump("-s", "-h", target.ref)),
              "ncdump -s -h")


def test_nccopy(target):
    """nccopy reads every object through netCDF-C and writes a new file;
    the two copies must dump alike."""
    need("nccopy")
    a, b = target.tmp / "copy_target.nc", target.tmp / "copy_ref.nc"
    run("nccopy", target.path, a)
    run("nccopy", target.ref, b)
    same_text(ncdump(a), ncdump(b), "ncdump of the nccopy copies")
    same_text(ncdump("-s", "-h", a), ncdump("-s", "-h", b), "ncdump -s -h of the nccopy copies")


# --------------------------------------------------------------------------
# HDF5 command-line tools


def h5dump_meta(path):
    """h5dump -p -A (every object's type, shape, storage properties and
    attributes with their values; no data), normalised. Objects come sorted
    by name, so order is not compared here (ncdump does)."""
    out = run("h5dump", "-p", "-A", path).stdout
    out = rename_first_line(out, r'^HDF5 ".*" \{', 'HDF5 "FILE" {')
    lines, res, i = out.split("\n"), [], 0

    def block_end(i):
        """Index after the block that opens on line i (braces balance)."""
        depth = 0
        while True:
            depth += lines[i].count("{") - lines[i].count("}")
            i += 1
            if depth == 0:
                return i
    while i < len(lines):
        line = lines[i]
        m = re.match(r'^(\s*)ATTRIBUTE "([^"]+)" \{$', line)
        if m:
            j = block_end(i)
            block = lines[i:j]
            if m.group(2) in NC_PRIVATE_ATTRS:
                i = j
                continue  # netCDF-C's bookkeeping, see NC_PRIVATE_ATTRS
            if m.group(2) == "REFERENCE_LIST":
                # A dimension scale's back-references to the variables that
                # use it: a set, stored in attachment order (netCDF-C
                # attaches group by group, libh5log in definition order).
                # Keep type and shape, compare the entries as a sorted set.
                text = " ".join(block)
                k = next(n for n, b in enumerate(block) if b.strip() == "DATA {")
                entries = sorted(re.findall(r'DATASET \d+ "([^"]+)",\s*(\d+)', text))
                block = block[:k] + [f"{m.group(1)}      REFERENCE_LIST {entries}", f"{m.group(1)}}}"]
            res += block
            i = j
            continue
        if re.match(r"^\s*(OFFSET|SIZE) \d+", line):
            i += 1  # where and how much storage is allocated: netCDF-C allocates a chunk when it is
            continue  # first written and nothing for never-written data; the mount allocates all
        if re.match(r"^\s*FILL_TIME ", line):
            i += 1  # when libhdf5 writes fill values into new storage: a storage policy; the value
            continue  # itself (FILLVALUE VALUE) is compared
        if re.match(r"^\s*ALLOCATION_TIME \{", line):
            i = block_end(i)  # when storage is allocated: as SIZE above
            continue
        res.append(line)
        i += 1
    # object addresses in references (DIMENSION_LIST) differ between files;
    # the referenced paths are compared
    return re.sub(r"DATASET \d+ ", "DATASET ", "\n".join(res))


def test_h5dump(target):
    """h5dump of every variable's data (with type and shape), and of every
    object's metadata: types, shapes, chunk shapes, fill values, attributes
    and their values, dimension scales."""
    need("h5dump")
    sel = [x for v in VARS for x in ("-d", "/" + v)]
    got = run("h5dump", "-A", "0", *sel, target.path).stdout
    want = run("h5dump", "-A", "0", *sel, target.ref).stdout
    assert want.count("DATASET ") == len(VARS), f"h5dump of the reference:\n{want[:2000]}"
    same_text(rename_first_line(got, r'^HDF5 ".*"', "HDF5 FILE"),
              rename_first_line(want, r'^HDF5 ".*"', "HDF5 FILE"), "h5dump -A 0 -d VAR... (every variable's data)")
    same_text(h5dump_meta(target.path), h5dump_meta(target.ref), "h5dump -p -A (normalised)")


def h5ls_rv(path):
    """h5ls -rv: every object, its type, shape, chunks, attribute names and
    types; normalised."""
    out = run("h5ls", "-rv", path).stdout
    res, skip = [], False
    for line in out.split("\n"):
        if line.startswith("Opened "):
            continue  # names the file
        m = re.match(r"^    Attribute: (\S+) ", line)
        if m:
            skip = m.group(1) in NC_PRIVATE_ATTRS  # netCDF-C's bookkeeping, with its Type line
        elif not line.startswith("        "):
            skip = False
        if skip:
            continue
        if re.match(r"^    (Location|Modified): ", line):
            continue  # object header address; modification time (netCDF-C does not track times)
        # allocated bytes and utilisation depend on the allocation policy
        # (see h5dump_meta); the logical size is compared
        line = re.sub(r"^(    Storage:   \d+ logical bytes).*", r"\1", line)
        res.append(line)
    return "\n".join(res)


def test_h5ls(target):
    """h5ls -rv: the same objects with the same types, shapes, chunk shapes
    and attributes."""
    need("h5ls")
    same_text(h5ls_rv(target.path), h5ls_rv(target.ref), "h5ls -rv (normalised)")


def h5stat_sections(path):
    """h5stat's sections that describe the content: object counts, group
    sizes, dataset ranks, 1-D sizes, layouts, filters, datatypes. Left out:
    file-space figures (addresses, heap and B-tree sizes, allocated raw
    bytes: the allocation policy, see h5dump_meta) and attribute counts
    (netCDF-C adds its bookkeeping attributes, NC_PRIVATE_ATTRS)."""
    p = run("h5stat", path)
    keep, sec, res = ("File information", "Small groups", "Group bins", "Dataset dimension information",
                      "1-D Dataset information", "Dataset layout information", "Dataset filters information",
                      "Dataset datatype information"), None, []
    for line in p.stdout.split("\n"):
        if line and not line[0].isspace():
            sec = next((k for k in keep if line.startswith(k)), None)
        if sec:
            res.append(line)
    assert res, f"h5stat {path}: no sections found:\n{p.stdout}"
    return "\n".join(res)


def test_h5stat(target):
    """h5stat must succeed on the file and count the same objects."""
    need("h5stat")
    same_text(h5stat_sections(target.path), h5stat_sections(target.ref), "h5stat (content sections)")


def test_h5diff(target):
    """h5diff -v of the file against the reference: every object on both
    sides, every dataset and attribute equal, except for differences listed
    here with their reason."""
    need("h5diff")
    p = run("h5diff", "-v", target.path, target.ref, ok=False)
    assert p.returncode in (0, 1), f"h5diff failed (exit {p.returncode}):\n{p.stdout[-3000:]}{p.stderr[-3000:]}"
    objs = re.findall(r"^\s+(x?)\s+(x?)\s+(/\S*)\s*$", p.stdout, re.M)
    assert objs, f"h5diff listed no objects:\n{p.stdout[:3000]}"
    only = [o for a, b, o in objs if not (a and b)]
    assert not only, f"objects in only one file: {only}"
    # blocks: 'dataset: </x> and </x>' or 'attribute: <name of </x>> and ...'
    # up to 'N differences found'
    problems = []
    blocks = re.findall(r"^(dataset|attribute|group)\s*: <(.*?)> and <.*?>\n(.*?)^(\d+) differences found$",
                        p.stdout, re.M | re.S)
    assert blocks, f"h5diff -v printed no comparisons:\n{p.stdout[:3000]}"
    compared = set()
    for kind, name, body, ndiff in blocks:
        attr = re.match(r"(.*) of <(.*)>$", name)
        aname, obj = (attr.group(1), attr.group(2)) if kind == "attribute" else (None, name)
        notes = [l for l in body.split("\n") if l.startswith(("Not comparable", "Warning"))]
        if kind == "dataset":
            compared.add(obj)
        if aname == "REFERENCE_LIST":
            # h5diff dereferences each back-reference and compares the
            # referenced variables pairwise; the list is a set in
            # attachment order (see h5dump_meta), so a different order
            # shows as differences between two different variables.
            continue
        if notes and all("is an empty dataset" in l for l in notes):
            # A dataset with no storage (netCDF-C allocates none for a
            # never-written variable or a dimension without a variable) is
            # "empty" to h5diff and not compared; h5dump compares its values.
            # DIMENSION_LIST reaches such a dimension through its references.
            if obj in ("/unused", "/particle") or aname == "DIMENSION_LIST":
                continue
        if notes or int(ndiff) != 0:
            problems.append(f"{kind} {name}: {ndiff} differences " + "; ".join(notes))
    assert not problems, "h5diff -v found differences:\n" + "\n".join(problems) + "\n" + p.stdout[-4000:]
    missing = {"/" + v for v in VARS} - compared
    assert not missing, f"h5diff did not compare {sorted(missing)}"


def test_h5copy(target):
    """h5copy takes variables out of the file; the copies hold the
    reference's values, type (the big-endian one too) and fill value."""
    need("h5copy")
    out = target.tmp / "copied.h5"
    for v in ("ocean/sst", "precip", "counts"):
        run("h5copy", "-i", target.path, "-o", out, "-s", "/" + v, "-d", "/" + v.replace("/", "_"))
    with h5py.File(out, "r") as f, h5py.File(target.ref, "r") as r:
        for v in ("ocean/sst", "precip", "counts"):
            got, want = f[v.replace("/", "_")], r[v]
            assert got.dtype == want.dtype, f"{v}: dtype {got.dtype} != {want.dtype}"
            assert got.shape == want.shape, f"{v}: shape {got.shape} != {want.shape}"
            g, r2 = got[()], want[()]
            nbad = int(np.sum(g != r2))
            if nbad:
                k = tuple(np.argwhere(g != r2)[0])
                pytest.fail(f"{v}: {nbad} of {g.size} copied values differ from the reference, e.g. {k}: "
                            f"{g[k]} != {r2[k]}")
            assert np.array_equal(got.fillvalue, want.fillvalue), f"{v}: fill {got.fillvalue} != {want.fillvalue}"


# --------------------------------------------------------------------------
# CDO and NCO


def cdo(*args):
    need("cdo")
    return run("cdo", "-s", *args).stdout


def read_nc(path, name):
    import netCDF4
    with netCDF4.Dataset(path) as ds:
        return ds[name][...]


def test_cdo(target):
    """cdo sinfon/infon (every field's statistics: fill handling shows in
    Miss and Mean) and cdo timmean of the partly written variable: the mean
    of the written values only."""
    a, b = target.tmp / "timmean_target.nc", target.tmp / "timmean_ref.nc"
    cdo("timmean", "-selname,precip", target.path, a)
    cdo("timmean", "-selname,precip", target.ref, b)
    check_mean(read_nc(b, "precip")[0], target.content, "cdo timmean of the reference")
    check_mean(read_nc(a, "precip")[0], target.content, "cdo timmean of the file")
    for op in ("sinfon", "infon"):
        same_text(cdo(op, target.path), cdo(op, target.ref), f"cdo {op}")


def test_nco(target):
    """ncra (record average: must skip _FillValue) and ncks -H of every
    variable."""
    need("ncra")
    need("ncks")
    a, b = target.tmp / "ncra_target.nc", target.tmp / "ncra_ref.nc"
    run("ncra", "-O", "-v", "precip", target.path, a)
    run("ncra", "-O", "-v", "precip", target.ref, b)
    check_mean(read_nc(b, "precip")[0], target.content, "ncra of the reference")
    check_mean(read_nc(a, "precip")[0], target.content, "ncra of the file")
    sel = ",".join("/" + v for v in VARS)
    got = run("ncks", "-H", "-v", sel, target.path).stdout
    want = run("ncks", "-H", "-v", sel, target.ref).stdout
    norm = lambda s: rename_first_line(s, r"^netcdf \S+ \{", "netcdf FILE {")  # noqa: E731
    same_text(norm(got), norm(want), f"ncks -H -v {sel}")


# --------------------------------------------------------------------------
# Python clients


@pytest.mark.parametrize("engine", ["netcdf4", "h5netcdf"])
def test_xarray(target, engine):
    """xarray datasets (decoded: masking by _FillValue, CF time) of every
    group are identical, and so are the variables' encodings (dtype,
    _FillValue, chunk sizes, storage)."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("netCDF4" if engine == "netcdf4" else "h5netcdf")
    for g in GROUPS:
        with xr.open_dataset(target.path, engine=engine, group=g) as a, \
                xr.open_dataset(target.ref, engine=engine, group=g) as b:
            if g is None:
                m = a["precip"].mean("time").values
                check_mean(np.ma.masked_invalid(m), target.content, f"xarray ({engine}) mean of precip")
            try:
                xr.testing.assert_identical(a, b)
            except AssertionError as e:
                pytest.fail(f"xarray engine={engine} group={g}: datasets differ:\n{e}")
            assert list(a.variables) == list(b.variables), f"group {g}: variable order"
            for v in a.variables:
                ea = {k: x for k, x in a[v].encoding.items() if k != "source"}  # source: the file name
                eb = {k: x for k, x in b[v].encoding.items() if k != "source"}
                assert ea == eb, f"group {g} {v}: encoding {ea} != {eb}"


def nc_groups(ds):
    yield ds
    for g in ds.groups.values():
        yield from nc_groups(g)


def test_netcdf4_python(target):
    """netCDF4-python: dimensions, variables and groups in definition
    order, types and byte order, chunking, fill values, masked values,
    attributes in order with their values and types."""
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(target.path) as a, netCDF4.Dataset(target.ref) as b:
        ga, gb = list(nc_groups(a)), list(nc_groups(b))
        assert [g.path for g in ga] == [g.path for g in gb], "groups (order included)"
        for x, y in zip(ga, gb):
            w = f"group {y.path}"
            assert [(d.name, len(d), d.isunlimited()) for d in x.dimensions.values()] == \
                [(d.name, len(d), d.isunlimited()) for d in y.dimensions.values()], f"{w}: dimensions"
            assert list(x.variables) == list(y.variables), f"{w}: variables (order included)"
            assert x.ncattrs() == y.ncattrs(), f"{w}: attribute names (order included)"
            for k in y.ncattrs():
                assert_same_value(x.getncattr(k), y.getncattr(k), f"{w} :{k}")
            for name, vb in y.variables.items():
                va = x.variables[name]
                w = f"{y.path.rstrip('/')}/{name}"
                assert va.dtype == vb.dtype and va.endian() == vb.endian(), \
                    f"{w}: type {va.dtype}/{va.endian()} != {vb.dtype}/{vb.endian()}"
                assert va.dimensions == vb.dimensions, f"{w}: dimensions {va.dimensions} != {vb.dimensions}"
                assert va.chunking() == vb.chunking(), f"{w}: chunking {va.chunking()} != {vb.chunking()}"
                assert va.ncattrs() == vb.ncattrs(), f"{w}: attributes {va.ncattrs()} != {vb.ncattrs()}"
                for k in vb.ncattrs():
                    assert_same_value(va.getncattr(k), vb.getncattr(k), f"{w}:{k}")
                da, db = va[...], vb[...]
                ma, mb = np.ma.getmaskarray(da), np.ma.getmaskarray(db)
                assert np.array_equal(ma, mb), f"{w}: masks differ ({int((ma != mb).sum())} elements)"
                assert np.array_equal(np.ma.getdata(da)[~ma], np.ma.getdata(db)[~mb]), f"{w}: values differ"
                va.set_auto_mask(False)
                vb.set_auto_mask(False)
                assert np.array_equal(va[...], vb[...]), f"{w}: raw values (fill included) differ"


def assert_same_value(x, y, what):
    assert type(x) == type(y), f"{what}: {type(x).__name__} {x!r} != {type(y).__name__} {y!r}"
    if isinstance(x, np.ndarray) or isinstance(y, np.generic):
        assert np.asarray(x).dtype == np.asarray(y).dtype, f"{what}: {np.asarray(x).dtype} != {np.asarray(y).dtype}"
        assert np.array_equal(x, y), f"{what}: {x!r} != {y!r}"
    else:
        assert x == y, f"{what}: {x!r} != {y!r}"


def h5_objects(f):
    names = []
    f.visit(names.append)
    return names


def test_h5py(target):
    """h5py: every object, its type, shape, max shape, chunks, fill value
    and values; attributes in order (netCDF-C's bookkeeping attributes
    aside, NC_PRIVATE_ATTRS) with their types and values; dimension scales
    attached to the same scales, and the same back-references."""
    with h5py.File(target.path, "r") as a, h5py.File(target.ref, "r") as b:
        assert sorted(h5_objects(a)) == sorted(h5_objects(b)), "objects"
        for name in [""] + h5_objects(b):
            oa, ob = (a, b) if not name else (a[name], b[name])
            w = "/" + name
            assert type(oa) == type(ob), f"{w}: {type(oa).__name__} != {type(ob).__name__}"
            # user attributes in order; the dimension-scale attributes as a
            # set: H5DS writes them when scales are attached (netCDF-C after
            # the user attributes, and it rewrites REFERENCE_LIST at every
            # attachment), and H5DS and netCDF find them by name
            ka = [k for k in oa.attrs if k not in NC_PRIVATE_ATTRS + H5DS_ATTRS]
            kb = [k for k in ob.attrs if k not in NC_PRIVATE_ATTRS + H5DS_ATTRS]
            assert ka == kb, f"{w}: attributes {ka} != {kb} (order included)"
            da = sorted(k for k in oa.attrs if k in H5DS_ATTRS)
            db = sorted(k for k in ob.attrs if k in H5DS_ATTRS)
            assert da == db, f"{w}: dimension-scale attributes {da} != {db}"
            # values; DIMENSION_LIST and REFERENCE_LIST hold object references:
            # compared by what they point at, below
            for k in kb + [k for k in db if k in ("CLASS", "NAME")]:
                x, y = oa.attrs.get_id(k), ob.attrs.get_id(k)
                assert x.dtype == y.dtype and x.shape == y.shape, \
                    f"{w}:{k}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
                assert np.array_equal(oa.attrs[k], ob.attrs[k]), f"{w}:{k}: {oa.attrs[k]!r} != {ob.attrs[k]!r}"
            if not isinstance(ob, h5py.Dataset):
                continue
            assert (oa.dtype, oa.shape, oa.maxshape, oa.chunks) == (ob.dtype, ob.shape, ob.maxshape, ob.chunks), \
                (f"{w}: dtype/shape/maxshape/chunks {(oa.dtype, oa.shape, oa.maxshape, oa.chunks)} != "
                 f"{(ob.dtype, ob.shape, ob.maxshape, ob.chunks)}")
            assert np.array_equal(oa.fillvalue, ob.fillvalue), f"{w}: fill value {oa.fillvalue} != {ob.fillvalue}"
            assert np.array_equal(oa[()], ob[()]), f"{w}: values differ"
            sa = [[s.name for s in oa.dims[i].values()] for i in range(oa.ndim)]
            sb = [[s.name for s in ob.dims[i].values()] for i in range(ob.ndim)]
            assert sa == sb, f"{w}: dimension scales {sa} != {sb}"
            if "REFERENCE_LIST" in ob.attrs:
                ra = sorted((a[r[0]].name, int(r[1])) for r in oa.attrs["REFERENCE_LIST"])
                rb = sorted((b[r[0]].name, int(r[1])) for r in ob.attrs["REFERENCE_LIST"])
                assert ra == rb, f"{w}: REFERENCE_LIST {ra} != {rb}"


# --------------------------------------------------------------------------
# size, and the writer's negative case


def test_small_file_stays_small(target):
    """The canonical file of a small file must stay small: at most twice the
    size of netCDF-C's file with the same content (which holds the data and
    the metadata) — oversized default chunks break this."""
    got, ref = os.stat(target.path).st_size, os.stat(target.ref).st_size
    assert got <= 2 * ref, f"{target.path}: {got} bytes, the reference has {ref} (more than twice)"


RESERVED = ("DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid", "_Netcdf4Coordinates",
            "_NCProperties", "_nc3_strict")


def test_reserved_attribute_names_refused(runs, h5logfs):  # noqa: F811
    """h5l_put_att refuses names that belong to HDF5 dimension scales or to
    netCDF-4 (H5L_EINVAL, naming the attribute); the file stays readable
    and carries none of them."""
    r = runs[NPS[0]]
    lines = [l for l in r.out.splitlines() if l.startswith("reserved ")]
    assert len(lines) == 9, f"the writer reported {len(lines)} reserved-name cases:\n{r.out}"
    bad = [l for l in lines if ": refused: " not in l]
    assert not bad, "reserved attribute names accepted by h5l_put_att:\n" + "\n".join(bad)
    for l in lines:
        name = l.split()[1]
        assert name in l.split(": refused: ", 1)[1], f"the message does not name the attribute: {l}"
    assert {l.split()[1] for l in lines} == set(RESERVED)
    m = h5logfs(r.dir)
    path = m.path("reserved.h5")
    need("ncdump")
    run("ncdump", path)
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path) as ds:
        assert ds.ncattrs() == [], f"root attributes {ds.ncattrs()}"
        assert ds["v"].ncattrs() == ["units"], f"/v attributes {ds['v'].ncattrs()}"
        assert ds.groups["g"].ncattrs() == [], f"/g attributes {ds.groups['g'].ncattrs()}"
        assert list(ds["v"][:]) == [1, 2, 3, 4]
    with h5py.File(path, "r") as f:
        assert "CLASS" not in f["g"].attrs and "_NCProperties" not in f.attrs and "_nc3_strict" not in f.attrs
        assert "NAME" not in f["v"].attrs and "_Netcdf4Dimid" not in f["v"].attrs
