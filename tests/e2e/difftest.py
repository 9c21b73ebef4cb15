"""difftest.py — model-based differential testing of the whole system.

Three independent parts meet only in the spec text (format: the header of
tests/mpi/spec_writer.c):

* generate(seed) draws a random schema and write script (dimensions, some
  unlimited; nested groups; 0-4-D variables of every integer and float
  type, either byte order; explicit, default and contiguous chunking;
  default, explicit and no fill; attributes added and replaced at later
  ticks; definitions after the first flush; overlapping writes on 1, 2 or
  4 ranks) and prints it as a spec;
* run_model(spec) interprets the spec with numpy alone and says what every
  tick must contain: dimension names and lengths, variables with their
  shape, dtype and every element, attributes with values, all in
  definition order;
* spec_writer (C, MPI) performs the spec with libh5log, and the file is
  read back through h5logreplay at every tick and through the h5logfs
  mount at the newest tick, with h5py and with netCDF4-python.

check_* functions return lists of differences (strings), never raise on a
difference, so one run reports everything that differed. The model follows
the documented semantics (docs/format.md section 5 and the netCDF
conventions the canonical file promises), not the current code.

Not collected by pytest (no test_ prefix): tests/e2e/test_differential.py
runs a fixed list of seeds; tests/e2e/soak.py runs random ones.
"""
import collections
import copy
import ctypes
import ctypes.util
import math
import os
import resource
import subprocess
import time

import numpy as np

from h5ltest import BIN, BUILD, ENV

SPEC_WRITER = os.path.join(BUILD, "tests", "spec_writer")
REPLAY = os.path.join(BIN, "h5logreplay")

BASE_TYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f4", "f8"]
# netCDF's default fill values (netcdf.h NC_FILL_*), written out here so the
# model does not borrow them from the library under test
NC_FILL = {"i1": -127, "u1": 255, "i2": -32767, "u2": 65535, "i4": -2147483647, "u4": 4294967295,
           "i8": -9223372036854775806, "u8": 18446744073709551614,
           "f4": 9.9692099683868690e+36, "f8": 9.9692099683868690e+36}
# never generated as attribute names: netCDF/HDF5 reserved names, and names
# netCDF4-python interprets (masking, scaling) which would blur the checks
RESERVED = {"DIMENSION_LIST", "REFERENCE_LIST", "CLASS", "NAME", "_Netcdf4Dimid",
            "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict", "_IsNetcdf4",
            "_SuperblockVersion", "_Format", "_FillValue"}
INTERPRETED = {"missing_value", "valid_min", "valid_max", "valid_range", "scale_factor",
               "add_offset", "_Unsigned"}
DIM_NAMES = ["time", "lat", "lon", "lev", "x", "y", "z", "nv", "depth", "ens", "bnds", "col",
             "row", "sta", "freq", "k"]
ATT_NAMES = ["units", "long_name", "title", "history", "comment", "source", "institution",
             "level", "flag", "kind", "note", "version", "positive", "axis", "zeta", "alpha",
             "beta", "gamma", "standard_name", "cell_methods", "b", "Z_last", "m2"]
FLOAT_FILLS = [-1e30, 1e30, -1.5e10, 2.5e12, 9.969209968386869e36, -3.0e9]


def np_dtype(t):
    """numpy dtype of a spec TYPE token ('i4' little-endian, '>i4' big)."""
    be = t.startswith(">")
    base = t.lstrip("<>")
    if base[1:] == "1":
        return np.dtype(base)
    return np.dtype((">" if be else "<") + base)


def base_of(t):
    return t.lstrip("<>")


def gen_values(t, seed, n):
    """The n generated elements of a put with SEED in type t (the formula of
    spec_writer.c's header), as an array of np_dtype(t)."""
    base = base_of(t)
    kind, w = base[0], int(base[1:]) * 8
    with np.errstate(over="ignore"):
        i = np.arange(n, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = z ^ (z >> np.uint64(31))
        if kind == "f":
            if w == 32:
                v = ((x % np.uint64(1 << 20)).astype(np.int64) - (1 << 19)) / 8.0
            else:
                v = ((x % np.uint64(1 << 40)).astype(np.int64) - (1 << 39)) / 1024.0
        elif kind == "u":
            v = x % np.uint64((1 << w) - 16)
        else:
            r = x % np.uint64((1 << w) - 16)
            v = (r - np.uint64((1 << (w - 1)) - 8)).view(np.int64)
    return v.astype(np_dtype(t))


def hexof(arr):
    b = np.ascontiguousarray(arr).tobytes()
    return b.hex() if b else "-"


# --------------------------------------------------------------------------
# the model: a numpy interpreter of the spec


def default_chunk(type_, lengths, unlimited):
    """The chunk shape a variable defined with no chunk shape and at least
    one unlimited dimension gets (docs/format.md 3.3, "Default chunk
    shape": netCDF-C's rule), from its type and its dimensions' lengths at
    definition; None when the rule is undefined (a fixed dimension of
    length 0)."""
    size, nd = np_dtype(type_).itemsize, len(lengths)
    fixed = [n for n, u in zip(lengths, unlimited) if not u]
    if 0 in fixed:
        return None
    if nd == 1 and unlimited[0]:
        return (4096 // size,)
    if not fixed:
        c = int(math.floor(math.pow(4194304.0 / size, 1.0 / nd)))
        return tuple([max(c, 1)] * nd)
    prod = float(np.prod(fixed, dtype=np.float64))
    out = []
    for n, u in zip(lengths, unlimited):
        if u:
            out.append(1)
            continue
        sug = math.pow(4194304.0 / (size * prod), 1.0 / len(fixed)) * n - 0.5
        c = n if sug >= n else (1 if sug < 1 else int(math.floor(sug)))
        nchunks = -(-n // c)
        out.append(c - (nchunks * c - n) // nchunks)  # less overhang in the last chunk
    return tuple(out)


class Var:
    def __init__(self, path, type_, dimidx, chunk, default=None):
        self.path, self.type, self.dimidx, self.chunk = path, type_, dimidx, chunk
        self.default_chunk = default  # chunk None with an unlimited dimension: the default shape
        self.fill_kind, self.fill = "default", None  # "default" | "explicit" | "nofill"
        self.puts = []  # (tick, rank, order, start, count, seed)

    def fill_value(self):
        dt = np_dtype(self.type)
        if self.fill_kind == "explicit":
            return np.array(self.fill, dtype=dt)[()]
        if self.fill_kind == "nofill":
            return dt.type(0)
        return np.array(NC_FILL[base_of(self.type)], dtype=dt)[()]


class TickState:
    """What tick N must show. dims: [(name, length, unlimited)] in dimid
    order; groups: group paths in definition order ("/" first); members:
    group path -> [(name, "grp"|"var")] in definition order; vars: path ->
    dict(type, dtype, dims, shape, data, written, fill_kind, fill, chunk, default_chunk);
    attrs: object path -> [(name, value)] in order of first definition, a
    value being a str (text) or a 1-D numpy array (its dtype is the
    attribute's type)."""

    def __init__(self, tick):
        self.tick = tick
        self.dims, self.groups, self.members, self.vars, self.attrs = [], [], {}, {}, {}


def split_path(p):
    parent, _, name = p.rpartition("/")
    return parent or "/", name


def run_model(spec, nranks):
    """Interpret spec text; return [TickState of tick 1, 2, ...]."""
    dims = []        # [name, unlimited, length]
    objs = collections.OrderedDict()  # path -> "grp" | Var
    attrs = {"/": collections.OrderedDict()}
    tick, pending = 1, False
    order = collections.Counter()     # call order per rank within the tick
    states = []

    def add_group(path):
        if path == "/" or path in objs:
            return
        add_group(split_path(path)[0])  # implicit parents, as the writer makes them
        objs[path] = "grp"
        attrs[path] = collections.OrderedDict()

    def publish():
        nonlocal tick, pending
        for v in objs.values():
            if isinstance(v, Var):
                for (t, _, _, start, count, _) in v.puts:
                    if t != tick:
                        continue
                    for d, k in enumerate(v.dimidx):
                        if dims[k][1]:
                            dims[k][2] = max(dims[k][2], start[d] + count[d])
        states.append(snapshot(tick))
        tick += 1
        pending = False
        order.clear()

    def snapshot(t):
        st = TickState(t)
        st.dims = [(n, ln, u) for (n, u, ln) in dims]
        st.groups = ["/"] + [p for p, o in objs.items() if o == "grp"]
        st.members = {g: [] for g in st.groups}
        for p, o in objs.items():
            parent, name = split_path(p)
            st.members[parent].append((name, "grp" if o == "grp" else "var"))
            if o == "grp":
                continue
            shape = tuple(dims[k][2] for k in o.dimidx)
            dt = np_dtype(o.type)
            data = np.full(shape, o.fill_value(), dtype=dt)
            written = np.zeros(shape, dtype=bool)
            # overwrite order: (tick, rank, call order), later wins
            for (pt, rank, k, start, count, seed) in sorted(o.puts, key=lambda r: r[:3]):
                if pt > t:
                    continue
                box = tuple(slice(s, s + c) for s, c in zip(start, count))
                data[box] = gen_values(o.type, seed, int(np.prod(count, dtype=np.int64))).reshape(count)
                written[box] = True
            st.vars[p] = dict(type=o.type, dtype=dt, dims=[dims[k][0] for k in o.dimidx],
                              unlimited=[dims[k][1] for k in o.dimidx], shape=shape, data=data,
                              written=written, fill_kind=o.fill_kind, fill=o.fill_value(), chunk=o.chunk,
                              default_chunk=o.default_chunk)
        st.attrs = {p: [(n, copy.deepcopy(v)) for n, v in a.items()] for p, a in attrs.items()}
        return st

    for raw in spec.splitlines():
        tok = raw.split()
        if not tok or tok[0].startswith("#"):
            continue
        if tok[0] == "fail":
            continue  # a refused call changes nothing
        cmd = tok[0]
        if cmd == "create":
            continue
        if cmd == "open":  # a restart: the ticks go on, on the job's ranks
            nranks = int(tok[1]) if len(tok) > 1 else nranks
            continue
        if cmd == "crash":  # killed: what was not flushed is lost (the generator crashes right after a flush)
            assert not pending, "model: a crash with calls pending"
            continue
        if cmd == "close":
            if pending:
                publish()  # close flushes what is pending
            continue
        if cmd == "flush":
            publish()
            continue
        if cmd in ("put", "iput"):
            rank, path, seed = int(tok[1]), tok[2], int(tok[3])
            v = objs[path]
            nd = len(v.dimidx)
            start, count = [int(x) for x in tok[4:4 + nd]], [int(x) for x in tok[4 + nd:4 + 2 * nd]]
            assert rank < nranks
            v.puts.append((tick, rank, order[rank], start, count, seed))
            order[rank] += 1
            pending = True
            continue
        pending = True
        if cmd == "dim":
            unl = tok[2] == "U"
            dims.append([tok[1], unl, 0 if unl else int(tok[2])])
        elif cmd == "grp":
            add_group(tok[1])
        elif cmd == "var":
            add_group(split_path(tok[1])[0])
            nd = int(tok[4])
            chunk = None if tok[3] == "-" else tuple(int(c) for c in tok[3].split(","))
            dimidx = [int(x) for x in tok[5:5 + nd]]
            unl = [dims[k][1] for k in dimidx]
            dflt = default_chunk(tok[2], [dims[k][2] for k in dimidx], unl) if chunk is None and any(unl) else None
            objs[tok[1]] = Var(tok[1], tok[2], dimidx, chunk, dflt)
            attrs[tok[1]] = collections.OrderedDict()
        elif cmd == "fill":
            v = objs[tok[1]]
            v.fill_kind = "explicit"
            v.fill = np.frombuffer(bytes.fromhex(tok[2]), dtype=np_dtype(v.type))[0]
        elif cmd == "nofill":
            objs[tok[1]].fill_kind = "nofill"
        elif cmd == "att":
            dt = np_dtype(tok[3])
            val = np.frombuffer(bytes.fromhex("" if tok[5] == "-" else tok[5]), dtype=dt).copy()
            attrs[tok[1]][tok[2]] = val  # a replaced attribute keeps its place
        elif cmd == "text":
            attrs[tok[1]][tok[2]] = bytes.fromhex("" if tok[3] == "-" else tok[3]).decode("utf-8")
        else:
            raise ValueError(f"model: unknown call {raw!r}")
    return states


# --------------------------------------------------------------------------
# the generator


def _name(rng, taken, lo=1, hi=6):
    letters = "abcdefghijklmnopqrstuvwxyz"
    while True:
        n = "".join(rng.choice(list(letters), size=int(rng.integers(lo, hi + 1))))
        if n not in taken and n not in DIM_NAMES:
            return n


def _type(rng):
    b = BASE_TYPES[int(rng.integers(len(BASE_TYPES)))]
    if b[1:] != "1" and rng.random() < 0.3:
        return ">" + b
    return b


def _att_value(rng):
    """(line tail, kind) of a random attribute value: numeric of a random
    type and length, or text (rarely empty)."""
    if rng.random() < 0.35:
        n = int(rng.integers(0, 24)) if rng.random() < 0.95 else 0
        s = "".join(chr(int(c)) for c in rng.integers(32, 127, size=n))
        return "text", s.encode().hex() or "-"
    t = _type(rng)
    dt = np_dtype(t)
    n = int(rng.integers(1, 5))
    if dt.kind == "f":
        vals = rng.normal(size=n) * 10.0 ** rng.integers(-6, 7, size=n)
        if rng.random() < 0.2:
            vals[0] = 0.0
    else:
        info = np.iinfo(dt)
        vals = rng.integers(int(info.min), int(info.max), size=n, dtype=np.dtype(dt.name), endpoint=True)
    return "att", f"{t} {n} {hexof(np.asarray(vals).astype(dt))}"


def _explicit_fill(rng, t):
    dt = np_dtype(t)
    if dt.kind == "f":
        v = FLOAT_FILLS[int(rng.integers(len(FLOAT_FILLS)))]
    else:
        w = dt.itemsize * 8
        k = int(rng.integers(16))
        if dt.kind == "u":
            v = (1 << w) - 16 + k
        else:
            v = -(1 << (w - 1)) + k if k < 8 else (1 << (w - 1)) - 16 + k
    return hexof(np.array([v], dtype=dt))


class Gen:
    """State of one generation run: what is defined so far and the current
    lengths, so that every generated call is valid."""

    def __init__(self, seed, nranks=None):
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.nranks = nranks or int(self.rng.choice([1, 2, 4]))
        self.lines = []
        self.dims = []       # [name, unlimited, length(current incl. this tick's puts)]
        self.groups = ["/"]
        self.vars = {}       # path -> (type, dimidx)
        self.names = {"/": set()}
        self.attrs = {"/": []}
        self.coords = set()  # dims with a coordinate variable
        self.all_boxes = {}  # path -> [(start, count)]

    def emit(self, s):
        self.lines.append(s)

    def def_dim(self):
        taken = {d[0] for d in self.dims}
        name = [n for n in DIM_NAMES if n not in taken][int(self.rng.integers(len(DIM_NAMES) - len(taken)))]
        r = self.rng.random()
        if r < 0.35:
            self.dims.append([name, True, 0])
            self.emit(f"dim {name} U")
        else:
            ln = int(self.rng.integers(1, 13)) if r < 0.97 else 0
            self.dims.append([name, False, ln])
            self.emit(f"dim {name} {ln}")

    def def_grp(self):
        parent = self.groups[int(self.rng.integers(len(self.groups)))]
        if parent.count("/") >= 3:
            parent = "/"
        name = _name(self.rng, self.names[parent])
        path = (parent.rstrip("/") + "/" + name)
        self.names[parent].add(name)
        self.names[path] = set()
        self.groups.append(path)
        self.attrs[path] = []
        self.emit(f"grp {path}")

    def def_var(self):
        rng = self.rng
        t = _type(rng)
        while True:  # keep variables small: at most 4096 elements over the fixed dims
            nd = int(rng.choice([0, 1, 1, 2, 2, 3, 4])) if self.dims else 0
            if nd <= len(self.dims) and rng.random() < 0.85:
                dimidx = [int(k) for k in rng.permutation(len(self.dims))[:nd]]
            else:  # a dimension may come twice, var(x, x)
                dimidx = [int(rng.integers(len(self.dims))) for _ in range(nd)]
            fixed = [self.dims[k][2] for k in dimidx if not self.dims[k][1]]
            unlim = any(self.dims[k][1] for k in dimidx)
            # a variable with an unlimited dimension is chunked, and a chunked
            # one cannot have a 0-length dimension: not a valid definition
            if int(np.prod(fixed)) <= 4096 and not (0 in fixed and unlim):
                break
        # a coordinate variable: root, 1-D, named like its dimension
        if nd == 1 and dimidx[0] not in self.coords and rng.random() < 0.35:
            path, parent, name = "/" + self.dims[dimidx[0]][0], "/", self.dims[dimidx[0]][0]
            self.coords.add(dimidx[0])
        else:
            parent = self.groups[int(rng.integers(len(self.groups)))]
            name = _name(rng, self.names[parent])
            path = parent.rstrip("/") + "/" + name
        self.names[parent].add(name)
        chunk = "-"
        if nd and 0 not in fixed and rng.random() < 0.5:
            chunk = ",".join(str(int(rng.integers(1, 7))) if self.dims[k][1]
                             else str(int(rng.integers(1, self.dims[k][2] + 1))) for k in dimidx)
        self.vars[path] = (t, dimidx)
        self.all_boxes[path] = []
        self.attrs[path] = []
        self.emit(f"var {path} {t} {chunk} {nd}" + "".join(f" {k}" for k in dimidx))
        r = rng.random()
        if r < 0.25:
            self.emit(f"fill {path} {_explicit_fill(rng, t)}")
        elif r < 0.4 and self.nofill:
            self.emit(f"nofill {path}")

    def put_att(self, replace_only=False):
        rng = self.rng
        objs = list(self.attrs)
        obj = objs[int(rng.integers(len(objs)))]
        have = self.attrs[obj]
        if have and (replace_only or rng.random() < 0.4):
            name = have[int(rng.integers(len(have)))]
        else:
            pool = [n for n in ATT_NAMES if n not in have]
            name = pool[int(rng.integers(len(pool)))] if pool and rng.random() < 0.8 else _name(rng, set(have), 2, 8)
            have.append(name)
        assert name not in RESERVED | INTERPRETED and not name.startswith("_")
        kind, tail = _att_value(rng)
        self.emit(f"{kind} {obj} {name} {tail}")

    def put(self, rank):
        rng = self.rng
        paths = [p for p, (t, dd) in self.vars.items()
                 if all(self.dims[k][1] or self.dims[k][2] > 0 for k in dd)]
        if not paths:
            return
        path = paths[int(rng.integers(len(paths)))]
        t, dimidx = self.vars[path]
        old = self.all_boxes[path]
        start, count = [], []
        if old and rng.random() < 0.35:  # overlap an earlier box of this or an earlier tick
            s0, c0 = old[int(rng.integers(len(old)))]
            for d, k in enumerate(dimidx):
                s = max(0, s0[d] + int(rng.integers(-1, 2)))
                c = max(1, c0[d] + int(rng.integers(-1, 2)))
                if not self.dims[k][1]:
                    ln = self.dims[k][2]
                    s = min(s, ln - 1)
                    c = min(c, ln - s)
                start.append(s)
                count.append(c)
        else:
            whole = rng.random() < 0.15
            for k in dimidx:
                name, unl, ln = self.dims[k]
                if unl:
                    s = int(rng.integers(0, ln + 3))
                    c = int(rng.integers(1, 4))
                elif whole:
                    s, c = 0, ln
                else:
                    s = int(rng.integers(0, ln))
                    c = int(rng.integers(1, ln - s + 1))
                start.append(s)
                count.append(c)
        for d, k in enumerate(dimidx):
            if self.dims[k][1]:
                self.dims[k][2] = max(self.dims[k][2], start[d] + count[d])
        old.append((start, count))
        mode = "iput" if rng.random() < 0.25 else "put"
        seed = int(rng.integers(1, 1 << 62))
        args = " ".join(str(x) for x in start + count)
        self.emit(f"{mode} {rank} {path} {seed}" + (" " + args if args else ""))

    def puts(self, n):
        for _ in range(n):
            self.put(int(self.rng.integers(self.nranks)))

    def script(self, nofill=True, data_ticks=0):
        rng = self.rng
        self.nofill = nofill
        self.emit(f"# difftest seed {self.seed}, {self.nranks} ranks")
        self.emit("create")
        ndims_total = int(rng.integers(1, 6))
        first = max(1, ndims_total - int(rng.integers(0, 2)))
        for _ in range(first):
            self.def_dim()
        for _ in range(int(rng.integers(0, 4))):
            self.def_grp()
        for _ in range(int(rng.integers(1, 6))):
            self.def_var()
        for _ in range(int(rng.integers(0, 6))):
            self.put_att()
        nticks = int(rng.integers(2, 6))
        for tick in range(1, nticks + 1):
            if tick > 1:  # late definitions
                if len(self.dims) < ndims_total and rng.random() < 0.5:
                    self.def_dim()
                if rng.random() < 0.25:
                    self.def_grp()
                for _ in range(int(rng.integers(0, 3))):
                    self.def_var()
                for _ in range(int(rng.integers(0, 3))):
                    self.put_att()
            self.puts(int(rng.integers(0, 4 * self.nranks + 1)))
            for _ in range(int(rng.integers(0, 3))):  # attributes between puts, replaced ones too
                self.put_att(replace_only=rng.random() < 0.5)
            self.puts(int(rng.integers(0, 3 * self.nranks + 1)))
            self.emit("flush")
        # ticks of writes alone (a live skeleton is patched for them, not
        # built again); drawn from a generator of their own, so the script
        # before them is the seed's script without them
        drng, self.rng = self.rng, np.random.default_rng([self.seed, 1])
        for _ in range(data_ticks):
            self.puts(int(self.rng.integers(1, 3 * self.nranks + 1)))
            self.emit("flush")
        self.rng = rng = drng
        end = rng.random()
        if end < 0.3:  # pending definitions and writes: close publishes them
            self.def_var()
            self.put_att()
            self.puts(int(rng.integers(0, 4)))
        elif end < 0.45:
            self.emit("flush")  # an empty tick
        self.emit("close")
        return "\n".join(self.lines) + "\n"


    def script_restarts(self, ranks_seq):
        """A script written by len(ranks_seq) jobs one after another, the
        first on ranks_seq[0] ranks (create), each later one reopening the
        file on its own number of ranks (open N) after the one before
        closed it or was killed right after a flush (crash); every job
        defines and writes more."""
        rng = self.rng
        self.nofill = True
        self.nranks = ranks_seq[0]
        self.emit(f"# difftest restart seed {self.seed}, ranks {'/'.join(map(str, ranks_seq))}")
        self.emit("create")
        for _ in range(int(rng.integers(1, 4))):
            self.def_dim()
        for _ in range(int(rng.integers(0, 3))):
            self.def_grp()
        for _ in range(int(rng.integers(1, 4))):
            self.def_var()
        for _ in range(int(rng.integers(0, 4))):
            self.put_att()
        for job, nr in enumerate(ranks_seq):
            if job:
                self.nranks = nr
                self.emit(f"open {nr}")
                # what a restarted job defines: more of everything, and
                # attributes of objects the earlier jobs made replaced
                if len(self.dims) < 6 and rng.random() < 0.5:
                    self.def_dim()
                if rng.random() < 0.3:
                    self.def_grp()
                for _ in range(int(rng.integers(0, 3))):
                    self.def_var()
                for _ in range(int(rng.integers(0, 3))):
                    self.put_att(replace_only=rng.random() < 0.5)
            for _ in range(int(rng.integers(1, 4))):
                self.puts(int(rng.integers(1, 3 * self.nranks + 1)))
                if rng.random() < 0.3:
                    self.put_att()
                self.emit("flush")
            last = job == len(ranks_seq) - 1
            if not last and rng.random() < 0.4:
                self.emit("crash")
            else:
                if rng.random() < 0.3:  # pending writes: close publishes them
                    self.puts(int(rng.integers(1, 3)))
                self.emit("close")
        return "\n".join(self.lines) + "\n"


def generate_restarts(seed, ranks_seq):
    """(spec text, ranks of each job) of a restart script (Gen.script_restarts)."""
    g = Gen(seed)
    return g.script_restarts(list(ranks_seq)), list(ranks_seq)


def split_jobs(spec):
    """The restart script's jobs: [(nranks, spec text of the job, crashes)]."""
    jobs, cur, nr = [], [], None
    for line in spec.splitlines():
        tok = line.split()
        if tok and tok[0] == "open" and cur:
            jobs.append(cur)
            cur = []
        cur.append(line)
    jobs.append(cur)
    out = []
    for lines in jobs:
        first = [l.split() for l in lines if l.split() and not l.startswith("#")][0]
        nr = int(first[1]) if first[0] == "open" else None
        crashes = any(l.split() == ["crash"] for l in lines)
        out.append((nr, "\n".join(lines) + "\n", crashes))
    return out


def write_restarts(spec, ranks_seq, workdir, timeout=120, after_job=None, env=None):
    """Run each job of a restart script in turn on its ranks, on one file.
    A job that crashes must die (a non-zero status from mpirun) with every
    call before the crash done; the others must succeed. after_job(i, h5),
    if given, runs after job i (checks between jobs). Returns (h5 path,
    problem or None)."""
    os.makedirs(workdir, exist_ok=True)
    out = os.path.join(workdir, "d.h5")
    for i, ((nr, text, crashes), np_) in enumerate(zip(split_jobs(spec), ranks_seq)):
        sp = os.path.join(workdir, f"job{i}.txt")
        with open(sp, "w") as fh:
            fh.write(text)
        cmd = ["mpirun", "--oversubscribe", "-np", str(np_)] + [a for k in (env or {}) for a in ("-x", k)]
        p = subprocess.run(cmd + [SPEC_WRITER, sp, out], env=dict(ENV, **(env or {})), capture_output=True,
                           text=True, timeout=timeout)
        if crashes:
            bad = [l for l in p.stderr.splitlines() if "spec_writer rank" in l]
            if p.returncode == 0 or bad:
                return out, f"spec_writer: job {i} (crash): status {p.returncode}: {' '.join(bad)[-1500:]}"
        else:
            prob = _writer_problem(p.returncode, p.stderr)
            if prob:
                return out, f"job {i} ({np_} ranks): {prob}"
        if after_job:
            after_job(i, out)
    return out, None


def generate(seed, nranks=None, nofill=True, data_ticks=0):
    """(spec text, number of ranks) for seed. nofill=False leaves out
    h5l_def_var_nofill (to look at the other checks on a library without it);
    data_ticks adds that many ticks of writes alone before the end."""
    g = Gen(seed, nranks)
    return g.script(nofill=nofill, data_ticks=data_ticks), g.nranks


# --------------------------------------------------------------------------
# running the writer and the tools


def _writer_cmd(spec, nranks, workdir, env_keys=()):
    """(command, output path) of spec_writer for spec in workdir."""
    os.makedirs(workdir, exist_ok=True)
    sp = os.path.join(workdir, "spec.txt")
    out = os.path.join(workdir, "d.h5")
    with open(sp, "w") as fh:
        fh.write(spec)
    cmd = ["mpirun", "--oversubscribe", "-np", str(nranks)]
    for k in env_keys:
        cmd += ["-x", k]
    return cmd + [SPEC_WRITER, sp, out], out


def _writer_problem(returncode, stderr):
    if returncode == 0:
        return None
    err = "\n".join(l for l in stderr.splitlines() if "spec_writer" in l) or stderr[-2000:]
    return f"spec_writer: failed: status {returncode}:\n{err}"


def write(spec, nranks, workdir, timeout=120):
    """Run spec_writer on nranks; returns (h5 path, problem or None)."""
    cmd, out = _writer_cmd(spec, nranks, workdir)
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    return out, _writer_problem(p.returncode, p.stderr)


# start_write's pause after each flush for live checks: longer than a
# check of the mount (h5py and netCDF4), so most ticks are seen as newest
LIVE_PAUSE_MS = 500
# ticks of writes alone that live checks add to a seed's script
LIVE_DATA_TICKS = 4


def start_write(spec, nranks, workdir, pause_ms):
    """Start spec_writer on nranks, pausing pause_ms after each flush;
    returns (process, h5 path). finish_write waits for it."""
    env = dict(ENV, SPEC_WRITER_FLUSH_PAUSE_MS=str(pause_ms))
    cmd, out = _writer_cmd(spec, nranks, workdir, ["SPEC_WRITER_FLUSH_PAUSE_MS"])
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True), out


def finish_write(proc, timeout=120):
    """Wait for start_write's process; returns a problem or None."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return f"spec_writer: no result after {timeout} s"
    return _writer_problem(proc.returncode, err)


# A canonical file of a generated script holds well under a megabyte of data
# (plus default chunks of about 1 MiB each); past this size something is
# wrong, and reading it through h5py would take minutes: report, don't read.
SIZE_LIMIT = 256 << 20


def _limit_fsize():
    resource.setrlimit(resource.RLIMIT_FSIZE, (SIZE_LIMIT, SIZE_LIMIT))


def replay(src, tick, out):
    """h5logreplay --tick (its output limited to SIZE_LIMIT bytes, a minute);
    returns a problem or None."""
    try:
        p = subprocess.run([REPLAY, "--tick", str(tick), src, out], capture_output=True, text=True,
                           timeout=60, preexec_fn=_limit_fsize)
    except subprocess.TimeoutExpired:
        return f"h5logreplay --tick {tick}: failed: no result after 60 s"
    if p.returncode != 0:
        big = os.path.exists(out) and os.path.getsize(out) >= SIZE_LIMIT
        return (f"h5logreplay --tick {tick}: failed: status {p.returncode}"
                + (f" (output reached the {SIZE_LIMIT >> 20} MiB limit)" if big else "")
                + f": {p.stderr.strip()[-500:]}")
    return None


def too_big(path, tick, label):
    """A difference if the canonical file at path exceeds SIZE_LIMIT."""
    size = os.stat(path).st_size
    if size > SIZE_LIMIT:
        return [f"tick {tick} ({label}) {os.path.basename(path)}: size: {size >> 20} MiB, more than the "
                f"{SIZE_LIMIT >> 20} MiB a canonical file of this script can need; not read"]
    return []


# --------------------------------------------------------------------------
# comparing a file with the model


def _fmt(x):
    return repr(x.item()) if hasattr(x, "item") else repr(x)


def _cmp_data(where, got, st_var, diffs):
    """got equals the model's data (values; shape checked by the caller)."""
    want, written = st_var["data"], st_var["written"]
    if got.shape != want.shape:
        diffs.append(f"{where}: shape: {got.shape}, expected {want.shape}")
        return
    bad = got != want
    if bad.any():
        idx = tuple(int(i[0]) for i in np.nonzero(bad)) if bad.ndim else ()
        what = "written" if written[idx] else ("unwritten: fill" if st_var["fill_kind"] != "nofill" else
                                               "unwritten, nofill: 0")
        diffs.append(f"{where}: values: {int(bad.sum())} of {bad.size} elements differ; first at {idx}, got "
                     f"{_fmt(got[idx])}, expected {_fmt(want[idx])} ({what}, fill {st_var['fill_kind']})")


def _expected_attrs(st, path):
    """[(name, value)] an object must carry: _FillValue first for a
    variable with an explicit fill, then its attributes."""
    out = []
    v = st.vars.get(path)
    if v is not None and v["fill_kind"] == "explicit":
        out.append(("_FillValue", np.array([v["fill"]], dtype=v["dtype"])))
    return out + st.attrs.get(path, [])


def _cmp_attr(where, name, got, want, diffs, exact_dtype):
    if isinstance(want, str):
        if isinstance(got, (bytes, np.bytes_)):
            got = bytes(got).decode("utf-8", "replace")
        elif isinstance(got, np.ndarray) and got.dtype.kind in "SU" and got.size == 1:
            got = got.reshape(()).item()
            got = got.decode("utf-8", "replace") if isinstance(got, bytes) else got
        if not isinstance(got, str) or got != want:
            diffs.append(f"{where}: attribute value: {name} is {got!r}, expected text {want!r}")
        return
    g = np.atleast_1d(np.asarray(got))
    ok_type = (g.dtype == want.dtype) if exact_dtype else (g.dtype.kind == want.dtype.kind and
                                                           g.dtype.itemsize == want.dtype.itemsize)
    if not ok_type or g.shape != want.shape or not np.array_equal(g, want):
        diffs.append(f"{where}: attribute value: {name} is {g!r} ({g.dtype.str}), expected {want!r} "
                     f"({want.dtype.str})")


def check_mount(path, st):
    """The newest tick through the mount, read with h5py and netCDF4 and
    compared with the model (or why the file is too big to compare)."""
    big = too_big(path, st.tick, "mount")
    if big:
        return big
    return check_h5py(path, st, "mount") + check_netcdf(path, st, "mount")


def snapshot_tick(path):
    """The tick of the snapshot a new open of path gets now (0: none yet)."""
    return int(os.getxattr(path, "user.h5logfs.tick"))


def check_live(path, states, proc, linger=30):
    """Poll path through the mount while proc (start_write) writes it:
    every snapshot seen is compared with the model at its tick
    (user.h5logfs.tick). A check counts when the tick is the same before
    and after it (ticks only grow, so h5py's and netCDF4's opens both saw
    that tick). Ends when the last tick was checked, or linger seconds
    after proc ended. Returns (ticks checked, differences)."""
    checked, diffs, done_at = set(), [], None
    while True:
        if done_at is None and proc.poll() is not None:
            done_at = time.monotonic()
        if done_at is not None and time.monotonic() - done_at > linger:
            return checked, diffs
        try:
            t0 = snapshot_tick(path)
        except OSError as e:
            if checked:  # once a snapshot was read, the file may not vanish
                return checked, diffs + [f"live: {path}: {e} after tick {max(checked)}"]
            time.sleep(0.02)
            continue
        if t0 == 0 or t0 in checked:
            if done_at is not None and t0 == len(states):
                return checked, diffs
            time.sleep(0.02)
            continue
        d = check_mount(path, states[t0 - 1])
        if snapshot_tick(path) != t0:
            continue  # a newer tick came during the check: it does not count
        checked.add(t0)
        diffs += [f"live, tick {t0} of {len(states)}: {x}" for x in d]


def chunk_diff(v, chunks, finalized):
    """What is wrong with a variable's storage as a reader reports it
    (chunks: a tuple, or None for contiguous), or None. An explicit chunk
    shape is kept; a variable with no chunk shape given and an unlimited
    dimension has the default one (docs/format.md 3.3); one with no
    unlimited dimension is contiguous, except in a finalized file, where
    it may be stored chunked in place with any chunk shape (docs/format.md
    1.1, "A contiguous variable in place")."""
    if v["chunk"] is not None:
        if chunks != v["chunk"]:
            return f"{chunks}, expected {v['chunk']} (explicit)"
    elif any(v["unlimited"]):
        if chunks is None:
            return "contiguous, expected a default chunk shape (unlimited dimension)"
        if v["default_chunk"] is not None and chunks != v["default_chunk"]:
            return f"{chunks}, expected {v['default_chunk']} (the default chunk shape)"
    elif chunks is not None and not (finalized and v["shape"]):
        return f"{chunks}, expected contiguous"
    return None


def check_h5py(path, st, label, finalized=False):
    """Compare the canonical file at path (h5py) with TickState st.
    finalized: path is a finalized log-layout file read as it is, whose
    contiguous variables may be stored chunked (chunk_diff)."""
    import h5py
    diffs = []
    where0 = f"tick {st.tick} ({label}, h5py)"
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        return [f"{where0}: open: cannot open {path}: {e}"]
    with f:
        dimnames = {d[0] for d in st.dims}
        coord = {p.lstrip("/") for p in st.vars if p.count("/") == 1 and p.lstrip("/") in dimnames}
        for g in st.groups:
            obj = f[g] if g in f else None
            if not isinstance(obj, h5py.Group):
                diffs.append(f"{where0} {g}: missing: no such group")
                continue
            want = {n for n, _ in st.members[g]}
            extra = set(obj.keys()) - want
            if g == "/":
                extra -= {"_h5log"} | (dimnames - coord)  # dimension scales of netCDF dimensions
            if extra:
                diffs.append(f"{where0} {g}: unexpected members: {sorted(extra)}")
        for p, v in st.vars.items():
            w = f"{where0} {p}"
            ds = f.get(p)
            if not isinstance(ds, h5py.Dataset):
                diffs.append(f"{w}: missing: no such dataset")
                continue
            if ds.dtype != v["dtype"]:
                diffs.append(f"{w}: dtype: {ds.dtype.str}, expected {v['dtype'].str}")
            if ds.shape != v["shape"]:
                diffs.append(f"{w}: shape: {ds.shape}, expected {v['shape']}")
                continue
            maxshape = tuple(None if u else n for u, n in zip(v["unlimited"], v["shape"]))
            if ds.maxshape != maxshape:
                diffs.append(f"{w}: maxshape: {ds.maxshape}, expected {maxshape}")
            fv = ds.fillvalue
            if not np.array_equal(np.asarray(fv, dtype=v["dtype"]), np.asarray(v["fill"], dtype=v["dtype"])):
                diffs.append(f"{w}: HDF5 fill value: {_fmt(fv)}, expected {_fmt(v['fill'])} ({v['fill_kind']})")
            cd = chunk_diff(v, ds.chunks, finalized)
            if cd:
                diffs.append(f"{w}: chunks: {cd}")
            got = _read_h5py(ds)
            # (a 0-D read is a numpy scalar, always in native order)
            if ds.dtype == v["dtype"] and v["shape"] and got.dtype != v["dtype"]:
                diffs.append(f"{w}: dtype: read as {got.dtype.str}, expected {v['dtype'].str}")
            _cmp_data(w, np.asarray(got), v, diffs)
        for p in st.attrs:
            _check_attrs_h5py(f, p, st, where0, diffs, h5py)
    return diffs


def _read_h5py(ds):
    """The whole dataset, read into a buffer of 0xA5 bytes, not h5py's
    zeros: an element libhdf5 leaves untouched (a missing chunk whose fill
    time is "never") then shows as garbage instead of passing for a NOFILL
    variable's zero."""
    if not ds.shape or ds.size == 0 or ds.dtype.kind not in "biuf":
        return ds[()]
    got = np.empty(ds.shape, dtype=ds.dtype)
    got.view(np.uint8)[...] = 0xA5
    ds.read_direct(got)
    return got


def _check_attrs_h5py(f, p, st, where0, diffs, h5py):
    w = f"{where0} {p}"
    obj = f[p] if p in f else None
    if obj is None:
        return  # reported above
    want = _expected_attrs(st, p)
    # the attributes HDF5 dimension scales and netCDF add are not the writer's
    names = [n for n in obj.attrs.keys() if n == "_FillValue" or (n not in RESERVED and not n.startswith("_"))]
    if names != [n for n, _ in want]:
        if sorted(names) == sorted(n for n, _ in want):
            diffs.append(f"{w}: attribute order: {names}, expected {[n for n, _ in want]}")
        else:
            diffs.append(f"{w}: attribute names: {names}, expected {[n for n, _ in want]}")
    for n, val in want:
        if n in obj.attrs:
            _cmp_attr(w, n, obj.attrs[n], val, diffs, exact_dtype=True)


_libnc = None


def _nc_inq_var_fill(var):
    """(no_fill, fill bytes) of a netCDF4 variable, from libnetcdf itself
    (netCDF4-python 1.6 does not expose nc_inq_var_fill). The library is the
    one netCDF4-python has loaded (same soname), so its ids are valid."""
    global _libnc
    if _libnc is None:
        _libnc = ctypes.CDLL(ctypes.util.find_library("netcdf") or "libnetcdf.so.19")
    lib = _libnc
    no_fill = ctypes.c_int(-1)
    buf = ctypes.create_string_buffer(16)
    rc = lib.nc_inq_var_fill(ctypes.c_int(var._grpid), ctypes.c_int(var._varid), ctypes.byref(no_fill), buf)
    if rc != 0:
        return None, None
    return no_fill.value, buf.raw[:var.dtype.itemsize]


def check_netcdf(path, st, label, finalized=False):
    """Compare the file at path, opened with netCDF4-python, with st.
    finalized: as for check_h5py."""
    import netCDF4
    diffs = []
    where0 = f"tick {st.tick} ({label}, netCDF4)"
    try:
        ds = netCDF4.Dataset(path, "r")
    except Exception as e:  # netCDF4 raises OSError or RuntimeError
        return [f"{where0}: open: cannot open {path}: {e}"]
    try:
        want_dims = [d[0] for d in st.dims]
        got_dims = list(ds.dimensions)
        if got_dims != want_dims:
            how = "order" if sorted(got_dims) == sorted(want_dims) else "names"
            diffs.append(f"{where0}: dimension {how}: {got_dims}, expected {want_dims}")
        for name, ln, unl in st.dims:
            d = ds.dimensions.get(name)
            if d is None:
                continue
            # netCDF has no fixed dimension of length 0 (NC_UNLIMITED is 0):
            # it shows one as unlimited, which is all it can do
            if len(d) != ln or (d.isunlimited() != unl and ln > 0):
                diffs.append(f"{where0}: dimension length: {name} has {len(d)} unlimited {d.isunlimited()}, "
                             f"expected {ln} unlimited {unl}")
        for g in st.groups:
            grp = ds
            for part in [x for x in g.split("/") if x]:
                grp = grp.groups.get(part) if grp is not None else None
            if grp is None:
                diffs.append(f"{where0} {g}: missing: no such group")
                continue
            w = f"{where0} {g}"
            wv = [n for n, k in st.members[g] if k == "var"]
            wg = [n for n, k in st.members[g] if k == "grp"]
            for kind, got, want in (("variables", list(grp.variables), wv), ("groups", list(grp.groups), wg)):
                if got != want:
                    how = "order" if sorted(got) == sorted(want) else "names"
                    diffs.append(f"{w}: {kind} {how}: {got}, expected {want}")
            if g != "/" and list(grp.dimensions):
                diffs.append(f"{w}: group dimensions: {list(grp.dimensions)}, expected none (all are in /)")
            _check_attrs_nc(w, grp, grp.ncattrs(), _expected_attrs(st, g), diffs)
            for n in wv:
                p = g.rstrip("/") + "/" + n
                if n in grp.variables:
                    _check_var_nc(f"{where0} {p}", grp.variables[n], st.vars[p], _expected_attrs(st, p), diffs,
                                  finalized)
    finally:
        ds.close()
    return diffs


def _check_attrs_nc(w, obj, names, want, diffs):
    names = list(names)
    if names != [n for n, _ in want]:
        how = "order" if sorted(names) == sorted(n for n, _ in want) else "names"
        diffs.append(f"{w}: attribute {how}: {names}, expected {[n for n, _ in want]}")
    for n, val in want:
        if n in names:
            _cmp_attr(w, n, obj.getncattr(n), val, diffs, exact_dtype=False)


def _check_var_nc(w, var, v, want_attrs, diffs, finalized):
    if tuple(var.dimensions) != tuple(v["dims"]):
        diffs.append(f"{w}: variable dimensions: {var.dimensions}, expected {tuple(v['dims'])}")
    if tuple(var.shape) != v["shape"]:
        diffs.append(f"{w}: shape: {var.shape}, expected {v['shape']}")
        return
    dt = v["dtype"]
    if var.dtype.kind != dt.kind or var.dtype.itemsize != dt.itemsize:
        diffs.append(f"{w}: dtype: {var.dtype.str}, expected {dt.str}")
    if dt.itemsize > 1:
        want_end = "big" if dt.byteorder == ">" else "little"
        if var.endian() != want_end:
            diffs.append(f"{w}: endian: {var.endian()}, expected {want_end}")
    ch = var.chunking()
    cd = chunk_diff(v, None if ch == "contiguous" else tuple(ch), finalized) if v["shape"] else None
    if cd:
        diffs.append(f"{w}: chunks: {cd}")
    no_fill, fbytes = _nc_inq_var_fill(var)
    want_nofill = 1 if v["fill_kind"] == "nofill" else 0
    if no_fill != want_nofill:
        diffs.append(f"{w}: netCDF no_fill: {no_fill}, expected {want_nofill} ({v['fill_kind']})")
    elif not want_nofill:
        got = np.frombuffer(fbytes, dtype=dt.newbyteorder("="))[0]
        if got != v["fill"]:
            diffs.append(f"{w}: netCDF fill value: {_fmt(got)}, expected {_fmt(v['fill'])} ({v['fill_kind']})")
    _check_attrs_nc(w, var, var.ncattrs(), want_attrs, diffs)
    # the values unmasked (a masked scalar reads as np.ma.masked, whose data
    # is 0, not the element's value), then the mask netCDF puts on them
    var.set_auto_mask(False)
    data = var[...]
    var.set_auto_mask(True)
    a = var[...]
    mask = np.ma.getmaskarray(a)
    _cmp_data(w, np.asarray(data), v, diffs)
    want_mask = ~v["written"] if v["fill_kind"] != "nofill" else np.zeros(v["shape"], dtype=bool)
    if mask.shape == want_mask.shape and not np.array_equal(mask, want_mask):
        bad = mask != want_mask
        idx = tuple(int(i[0]) for i in np.nonzero(bad)) if bad.ndim else ()
        diffs.append(f"{w}: mask: differs at {int(bad.sum())} of {bad.size} elements; first at {idx}, "
                     f"masked {bool(mask[idx])}, expected {bool(want_mask[idx])} ({v['fill_kind']} fill)")


def check_replay(src, states, workdir):
    """Every tick of src through h5logreplay + h5py; and no tick past the
    last. Returns the differences."""
    diffs = []
    for st in states:
        out = os.path.join(workdir, f"tick{st.tick}.h5")
        prob = replay(src, st.tick, out)
        big = [] if prob else too_big(out, st.tick, "h5logreplay")
        if prob or big:
            diffs += [prob] if prob else big
        else:
            diffs += check_h5py(out, st, "h5logreplay")
        if os.path.exists(out):
            os.unlink(out)
    out = os.path.join(workdir, "past.h5")
    p = subprocess.run([REPLAY, "--tick", str(len(states) + 1), src, out], capture_output=True, text=True,
                       timeout=60, preexec_fn=_limit_fsize)
    if p.returncode == 0:
        diffs.append(f"h5logreplay: tick count: --tick {len(states) + 1} succeeded, the file has more than the "
                     f"{len(states)} ticks of the model")
    return diffs


def kind(diff):
    """The class of a difference: the reader (label in parentheses) and the
    fixed words between the first and second ': ' of its message."""
    where, _, rest = diff.partition(": ")
    lab = where[where.find("(") + 1:where.find(")")] if "(" in where else where.split()[0]
    return f"{lab}: {rest.partition(': ')[0]}"


def report(seed, nranks, diffs, limit=25):
    """The seed, a count and first example per kind of difference, then the
    first `limit` differences in full."""
    lines = [f"seed {seed} ({nranks} ranks): {len(diffs)} differences"]
    first = collections.OrderedDict()
    for d in diffs:
        first.setdefault(kind(d), []).append(d)
    for k, ds in first.items():
        lines.append(f"  {len(ds):4d} x {k}    e.g. {ds[0].splitlines()[0][:300]}")
    lines.append("  in full:")
    lines += ["    " + d for d in diffs[:limit]]
    if len(diffs) > limit:
        lines.append(f"    ... and {len(diffs) - limit} more")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# what a list of scripts exercises (so a fixed list of seeds can be shown to
# cover every feature of the generator)


def _overlap(a, b):
    (s1, c1), (s2, c2) = a, b
    return all(x < y + m and y < x + n for x, n, y, m in zip(s1, c1, s2, c2))


def features(spec, nranks):
    """The set of feature names one script exercises."""
    f = {f"ranks {nranks}"}
    seen_flush, last_cmd = False, None
    attr_first, attr_type = {}, {}
    groups, dims = set(), []
    puts = collections.defaultdict(list)  # var -> [(tick, rank, start, count)]
    vars_ = {}
    tick = 1
    for raw in spec.splitlines():
        tok = raw.split()
        if not tok or tok[0].startswith("#"):
            continue
        cmd = tok[0]
        if cmd == "flush":
            if last_cmd == "flush":
                f.add("empty tick")
            tick += 1
            seen_flush = True
        elif cmd == "close":
            if last_cmd != "flush":
                f.add("close publishes a tick")
        elif cmd == "dim":
            dims.append(tok[1])
            f.add("unlimited dim" if tok[2] == "U" else ("zero-length dim" if tok[2] == "0" else "fixed dim"))
            if seen_flush:
                f.add("late dim")
        elif cmd == "grp":
            groups.add(tok[1])
            if tok[1].count("/") >= 2:
                f.add("nested group")
            if seen_flush:
                f.add("late group")
        elif cmd == "var":
            t, nd = tok[2], int(tok[4])
            vars_[tok[1]] = nd
            f.add(f"var type {base_of(t)}")
            if t.startswith(">"):
                f.add("big-endian var")
            f.add(f"{nd}-D var")
            f.add("explicit chunks" if tok[3] != "-" else "no chunks given")
            if tok[1].count("/") == 1 and nd == 1 and tok[1][1:] == dims[int(tok[5])]:
                f.add("coordinate variable")
            if len(set(tok[5:])) < nd:
                f.add("dimension used twice")
            if seen_flush:
                f.add("late var")
        elif cmd in ("fill", "nofill"):
            f.add("explicit fill" if cmd == "fill" else "nofill")
        elif cmd in ("att", "text"):
            key = (tok[1], tok[2])
            typ = tok[3] if cmd == "att" else "text"
            f.add("text attribute" if cmd == "text" else "numeric attribute")
            if cmd == "att" and tok[3].startswith(">"):
                f.add("big-endian attribute")
            f.add("global attribute" if tok[1] == "/" else
                  ("group attribute" if tok[1] in groups else "variable attribute"))
            if key in attr_first:
                f.add("attribute replaced in its tick" if attr_first[key] == tick else "attribute replaced later")
                if attr_type[key] != typ:
                    f.add("attribute replaced by another type")
            else:
                attr_first[key] = tick
                if seen_flush:
                    f.add("late attribute")
            attr_type[key] = typ
        elif cmd in ("put", "iput"):
            if cmd == "iput":
                f.add("iput")
            nd = vars_[tok[2]]
            start, count = [int(x) for x in tok[4:4 + nd]], [int(x) for x in tok[4 + nd:]]
            for (t2, r2, s2, c2) in puts[tok[2]]:
                if _overlap((start, count), (s2, c2)):
                    f.add("overlap, same tick, same rank" if t2 == tick and r2 == int(tok[1]) else
                          "overlap, same tick, other rank" if t2 == tick else "overlap, earlier tick")
            puts[tok[2]].append((tick, int(tok[1]), start, count))
        last_cmd = cmd
    states = run_model(spec, nranks)
    last = states[-1]
    for p, v in last.vars.items():
        if not v["written"].any():
            f.add("never-written var")
        elif not v["written"].all():
            f.add("partly written var")
    for (n, ln, unl), (n0, ln0, unl0) in zip(last.dims, states[0].dims):
        if unl and ln > ln0:
            f.add("unlimited dim grows")
    return f


ALL_FEATURES = ({f"var type {t}" for t in BASE_TYPES} | {f"{n}-D var" for n in range(5)} | {
    "ranks 1", "ranks 2", "ranks 4", "empty tick", "close publishes a tick", "unlimited dim", "fixed dim",
    "zero-length dim", "late dim", "nested group", "late group", "big-endian var", "explicit chunks",
    "no chunks given", "coordinate variable", "late var", "explicit fill", "nofill", "text attribute",
    "numeric attribute", "big-endian attribute", "global attribute", "group attribute", "variable attribute",
    "attribute replaced in its tick", "attribute replaced later", "attribute replaced by another type",
    "late attribute", "iput", "overlap, same tick, same rank", "overlap, same tick, other rank",
    "overlap, earlier tick", "never-written var", "partly written var", "unlimited dim grows"})
