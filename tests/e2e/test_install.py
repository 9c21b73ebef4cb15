"""End-to-end tests of `make install` (mk/install.mk) and of what it installs.

One `make install PREFIX=/usr/local DESTDIR=<tmp>` serves the module. Against
that staged tree only:
  - an MPI writer is compiled from the installed headers and linked with the
    installed h5log.pc (shared and static libh5log), run on 2 ranks, and its
    file is read by h5py through the INSTALLED daemon;
  - the installed systemd units pass `systemd-analyze verify` (with the
    installed man pages on MANPATH), and the service's own ExecStart and
    ExecStop command lines mount and unmount, with READY=1 sent to a
    NOTIFY_SOCKET once the mount is up;
  - the installed mount helper mounts (returning only once mounted), drops
    the fstab-only options before the daemon sees them, forces
    default_permissions with allow_other (checked as user nobody), and
    refuses rw and unknown options;
  - `mount -t fuse.h5logfs` is run for real inside a private mount namespace
    (unshare -m): once with an overlay that puts mount.fuse.h5logfs into
    /sbin, once through Debian's mount.fuse3 with the staged bin/ overlaid on
    /usr/local/bin (mount(8) resets PATH, so PATH tricks cannot work). The
    host's /sbin and /usr/local are never touched;
  - `make uninstall` removes every file.
Every mount is undone at teardown, also when a test fails.
Build tree: $H5LOG_BUILD (default ../../build). Run with /usr/bin/python3 -m pytest.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.environ.get("H5LOG_BUILD", os.path.join(REPO, "build")))
PREFIX = "/usr/local"
PY = sys.executable
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
NRANKS, NX, NSTEPS = 2, 8, 3      # the writer: /data/v is (NSTEPS, NRANKS*NX)
MOUNT_TIMEOUT = 15.0
FSTAB_ONLY = ("nofail", "_netdev", "x-systemd.automount", "auto", "defaults", "noatime", "relatime")

WRITER_C = r"""
/* A small MPI writer built only from the installed h5log.h and h5log.pc. */
#include <stdio.h>
#include <stdlib.h>
#include <h5log.h>
#include <h5log_reader.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ != H5L_OK) { \
    fprintf(stderr, "%s: %s (%s)\n", #call, h5l_strerror(rc_), h5l_errmsg(f)); \
    MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    const int nx = NX, nsteps = NSTEPS;
    h5l_file_t *f = NULL;
    if (h5l_create(argv[1], MPI_COMM_WORLD, NULL, &f) != H5L_OK) {
        fprintf(stderr, "h5l_create: %s\n", h5l_errmsg(NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int t, x, v;
    CHECK(h5l_def_dim(f, "time", H5L_UNLIMITED, &t));
    CHECK(h5l_def_dim(f, "x", (uint64_t)(nx * nranks), &x));
    CHECK(h5l_def_var(f, "/data/v", H5T_NATIVE_FLOAT, 2, (int[]){t, x}, NULL, &v));
    CHECK(h5l_put_att_text(f, v, "units", "K"));
    float buf[NX];
    for (int s = 0; s < nsteps; s++) {
        for (int i = 0; i < nx; i++) buf[i] = (float)(s * 1000 + rank * nx + i);
        uint64_t start[2] = {(uint64_t)s, (uint64_t)(rank * nx)}, count[2] = {1, (uint64_t)nx};
        CHECK(h5l_put(f, v, start, count, buf));
        CHECK(h5l_flush(f));
    }
    CHECK(h5l_close(f));
    if (rank == 0) { /* the reader API from the same library */
        h5l_reader_t *r;
        h5l_err_t e;
        if (h5l_reader_open(argv[1], &r, &e) != H5L_OK) {
            fprintf(stderr, "reader: %s\n", e.msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        printf("ticks %llu closed %d\n", (unsigned long long)h5l_reader_ntick(r), h5l_reader_closed(r));
        h5l_reader_close(r);
    }
    MPI_Finalize();
    return 0;
}
"""


def expected_v():
    s = np.arange(NSTEPS).reshape(-1, 1)
    g = np.arange(NRANKS * NX).reshape(1, -1)
    return (s * 1000 + g).astype(np.float32)


def run(cmd, timeout=300, check=True, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    if check:
        assert p.returncode == 0, f"{' '.join(map(str, cmd))} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    return p


def make_cmd(target, destdir):
    """`make install` once the Makefile includes mk/install.mk, else the same
    through `make -f Makefile -f mk/install.mk`."""
    with open(os.path.join(REPO, "Makefile")) as fh:
        included = any(line.split()[:2] == ["include", "mk/install.mk"] for line in fh)
    files = [] if included else ["-f", "Makefile", "-f", "mk/install.mk"]
    return ["make", "--no-print-directory", "-C", REPO] + files + [target, f"PREFIX={PREFIX}",
                                                                   f"DESTDIR={destdir}", f"BUILD={BUILD}"]


class Tree:
    """Paths in the staged install."""

    def __init__(self, destdir):
        self.destdir = str(destdir)
        self.root = self.destdir + PREFIX

    def p(self, *parts):
        return os.path.join(self.root, *parts)

    @property
    def daemon(self):
        return self.p("bin", "h5logfs")

    @property
    def helper(self):
        return self.p("sbin", "mount.h5logfs")

    @property
    def libdir(self):
        return self.p("lib")

    @property
    def pcdir(self):
        return self.p("lib", "pkgconfig")

    @property
    def unitdir(self):
        return self.p("lib", "systemd", "system")

    @property
    def mandir(self):
        return self.p("share", "man")

    @property
    def docdir(self):
        return self.p("share", "doc", "h5logfs")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    destdir = tmp_path_factory.mktemp("destdir")
    p = run(make_cmd("install", destdir), timeout=900, check=False)
    assert p.returncode == 0, f"make install failed:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return Tree(destdir)


# --------------------------------------------------------------------------
# mounts: every one is undone at teardown


def daemon_pids(mnt):
    """PIDs of the processes whose argv names mnt (our daemons for it)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:
            continue
        if os.fsencode(str(mnt)) in argv and int(d) != os.getpid():
            pids.append(int(d))
    return pids


def proc_argv(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\0")[:-1]]


def mount_line(mnt):
    with open("/proc/mounts") as fh:
        for line in fh:
            f = line.split()
            if f[1] == str(mnt):
                return f
    return None


def wait_mounted(mnt, proc=None, errfile=None):
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while not os.path.ismount(mnt):
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"daemon exited with {proc.returncode} before mounting:\n{read(errfile)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{mnt} not mounted after {MOUNT_TIMEOUT} s\n{read(errfile)}")
        time.sleep(0.02)


def read(path):
    try:
        with open(path, "r", errors="replace") as fh:
            return fh.read()
    except (OSError, TypeError):
        return ""


def unmount(mnt):
    """Unmount mnt and make sure no daemon for it is left. Returns problems."""
    problems = []
    if os.path.ismount(mnt) or mount_line(mnt):
        r = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True, timeout=30)
        if r.returncode != 0:
            problems.append(f"fusermount3 -u {mnt}: {r.stderr.decode().strip()}")
            subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True, timeout=30)
    deadline = time.monotonic() + 10
    while daemon_pids(mnt) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in daemon_pids(mnt):
        problems.append(f"daemon {pid} for {mnt} still running after unmount: killed")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return problems


@pytest.fixture
def mounts():
    """Daemons started in the foreground: reaped at teardown (after the mnt
    fixture has unmounted)."""
    procs = []

    class M:
        def proc(self, p):
            procs.append(p)
            return p

    yield M()
    problems = []
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            problems.append(f"process {p.args} did not exit after unmount")
    if problems:
        pytest.fail("teardown: " + "; ".join(problems))


def h5read(path, dataset="/data/v", user=None, timeout=60):
    """Read a dataset in a separate python (a hung mount then fails the test
    instead of hanging it). Returns (returncode, array or error text)."""
    code = textwrap.dedent(f"""
        import json, sys, h5py
        try:
            open({str(path)!r}, "rb").close()  # EACCES shows here as PermissionError
            with h5py.File({str(path)!r}, "r") as f:
                d = f[{dataset!r}]
                u = d.attrs.get("units", b"")
                u = u.decode() if isinstance(u, bytes) else str(u)
                print(json.dumps({{"data": d[()].tolist(), "units": u}}))
        except PermissionError as e:
            print(json.dumps({{"error": "EACCES", "msg": str(e)}})); sys.exit(3)
        except OSError as e:
            print(json.dumps({{"error": "OSError", "msg": str(e)}})); sys.exit(4)
    """)
    cmd = [PY, "-c", code]
    if user:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = {"error": "no output", "msg": p.stdout + p.stderr}
    return p.returncode, out


# --------------------------------------------------------------------------
# the writer built against the installed tree, and its output


def pc(tree, *args, libdir=None):
    """pkg-config on a copy of the installed h5log.pc whose prefix (and, if
    given, libdir) is moved into DESTDIR. Not --define-prefix nor
    --define-variable=prefix: pkgconf applies those to every package, which
    moves ompi.pc's include and lib paths too."""
    pcdir = tempfile.mkdtemp(prefix="h5log-pc.")
    try:
        lines = []
        for ln in read(os.path.join(tree.pcdir, "h5log.pc")).splitlines():
            if ln.startswith("prefix="):
                assert ln == "prefix=" + PREFIX, ln
                ln = "prefix=" + tree.root
            elif libdir and ln.startswith("libdir="):
                ln = "libdir=" + libdir
            lines.append(ln)
        with open(os.path.join(pcdir, "h5log.pc"), "w") as fh:
            fh.write("\n".join(lines) + "\n")
        p = run(["pkg-config"] + list(args), env=dict(os.environ, PKG_CONFIG_PATH=pcdir))
    finally:
        shutil.rmtree(pcdir, ignore_errors=True)
    return p.stdout.split()


def sanitizer_flags(tree):
    """-fsanitize flags matching the runtime the installed library needs
    (`make asan` builds it with ASan/UBSan): the program must load it first."""
    real = os.path.realpath(os.path.join(tree.libdir, "libh5log.so"))
    needed = run(["objdump", "-p", real]).stdout
    kinds = [k for lib, k in (("libasan", "address"), ("libubsan", "undefined"), ("libtsan", "thread"))
             if lib in needed]
    return ["-fsanitize=" + ",".join(kinds)] if kinds else []


def build_writer(tree, workdir, static=False):
    """Compile the writer with plain gcc and the installed h5log.pc only."""
    src = os.path.join(workdir, "writer.c")
    with open(src, "w") as fh:
        fh.write(f"#define NX {NX}\n#define NSTEPS {NSTEPS}\n" + WRITER_C)
    exe = os.path.join(workdir, "writer_static" if static else "writer")
    cflags = pc(tree, "--cflags", "h5log")
    if static:  # a libdir holding only libh5log.a: the link must take the archive
        sdir = os.path.join(workdir, "staticlib")
        os.makedirs(sdir, exist_ok=True)
        if not os.path.exists(os.path.join(sdir, "libh5log.a")):
            os.symlink(os.path.join(tree.libdir, "libh5log.a"), os.path.join(sdir, "libh5log.a"))
        libs = pc(tree, "--static", "--libs", "h5log", libdir=sdir)
    else:
        libs = pc(tree, "--libs", "h5log")
    p = run(["gcc", "-std=c11", "-Wall", "-Werror"] + sanitizer_flags(tree) + [src, "-o", exe] + cflags + libs,
            check=False)
    assert p.returncode == 0, (f"writer does not build with the installed h5log.pc\n"
                               f"cflags {cflags}\nlibs {libs}\n{p.stderr}")
    return exe, cflags, libs


def run_writer(exe, out, tree, ld_path=True):
    env = dict(MPI_ENV)
    if ld_path:
        env["LD_LIBRARY_PATH"] = tree.libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    else:
        env.pop("LD_LIBRARY_PATH", None)
    p = run(["mpirun", "--oversubscribe", "-np", NRANKS, exe, out], env=env, check=False)
    assert p.returncode == 0, f"writer failed:\n{p.stdout}\n{p.stderr}"
    assert f"ticks {NSTEPS} closed 1" in p.stdout, p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def writer(tree, tmp_path_factory):
    work = str(tmp_path_factory.mktemp("writer"))
    exe, cflags, libs = build_writer(tree, work)
    return exe, cflags, libs


@pytest.fixture(scope="module")
def srcdir(tree, writer):
    """A world-readable source directory with the writer's file run.h5 (0644),
    a copy secret.h5 (0600, root's) and a plain text file."""
    d = tempfile.mkdtemp(prefix="h5log-install-src.")
    os.chmod(d, 0o755)
    run_writer(writer[0], os.path.join(d, "run.h5"), tree)
    shutil.copy(os.path.join(d, "run.h5"), os.path.join(d, "secret.h5"))
    os.chmod(os.path.join(d, "run.h5"), 0o644)
    os.chmod(os.path.join(d, "secret.h5"), 0o600)
    with open(os.path.join(d, "notes.txt"), "w") as fh:
        fh.write("plain file\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def mnt(mounts):
    """A fresh mount point that user nobody can reach; unmounted at teardown
    whatever happened, and no daemon for it may be left."""
    d = tempfile.mkdtemp(prefix="h5log-install-mnt.")
    os.chmod(d, 0o755)
    m = os.path.join(d, "mnt")
    os.mkdir(m)
    yield m
    problems = unmount(m)
    if not os.path.ismount(m):
        shutil.rmtree(d, ignore_errors=True)
    if problems:
        pytest.fail("teardown: " + "; ".join(problems))


# --------------------------------------------------------------------------
# the installed tree


def test_install_layout(tree):
    for rel in ["bin/h5logfs", "bin/h5logreplay", "bin/h5logdump", "sbin/mount.h5logfs"]:
        path = tree.p(rel)
        assert os.path.isfile(path), f"{rel} not installed"
        assert os.stat(path).st_mode & 0o777 == 0o755, f"{rel}: mode {oct(os.stat(path).st_mode)}"
    if os.path.exists(os.path.join(BUILD, "bin", "h5logtail")):
        assert os.access(tree.p("bin", "h5logtail"), os.X_OK), "h5logtail is built but not installed"
        assert os.path.isfile(tree.p("share", "man", "man1", "h5logtail.1"))
    for rel in ["include/h5log.h", "include/h5log_common.h", "include/h5log_reader.h",
                "lib/libh5log.a", "lib/libh5log.so", "lib/pkgconfig/h5log.pc",
                "lib/systemd/system/h5logfs@.service",
                "share/man/man8/h5logfs.8", "share/man/man8/mount.h5logfs.8",
                "share/man/man1/h5logreplay.1", "share/man/man1/h5logdump.1", "share/man/man3/h5log.3",
                "share/doc/h5logfs/operations.md", "share/doc/h5logfs/examples/data-h5logfs.mount",
                "share/doc/h5logfs/examples/data-h5logfs.automount"]:
        assert os.path.exists(tree.p(rel)), f"{rel} not installed"
    # the mount(8) helper link points at the installed (not staged) helper
    link = os.path.join(tree.destdir, "sbin", "mount.fuse.h5logfs")
    assert os.path.islink(link) and os.readlink(link) == PREFIX + "/sbin/mount.h5logfs"
    # placeholders filled in with the install paths
    for f in [tree.helper, tree.p("lib/systemd/system/h5logfs@.service")]:
        text = read(f)
        assert "@BINDIR@" not in text and "@SYSCONFDIR@" not in text and "@FUSERMOUNT3@" not in text, f
    assert PREFIX + "/bin/h5logfs" in read(tree.helper)
    unit = read(tree.p("lib/systemd/system/h5logfs@.service"))
    assert f"ExecStart={PREFIX}/bin/h5logfs ${{SOURCE}} %f -f -o ${{OPTIONS}}" in unit
    assert "EnvironmentFile=/etc/h5logfs/%i.conf" in unit
    # the daemon and the tools run
    for tool in ["h5logfs", "h5logreplay", "h5logdump"]:
        p = run([tree.p("bin", tool), "--help"], check=False)
        assert p.returncode == 0 and "usage" in (p.stdout + p.stderr).lower(), f"{tool} --help: {p.stderr}"


def test_shared_library_soname(tree):
    real = os.path.realpath(os.path.join(tree.libdir, "libh5log.so"))
    p = run(["objdump", "-p", real])
    soname = [ln.split()[1] for ln in p.stdout.splitlines() if ln.strip().startswith("SONAME")]
    assert soname == ["libh5log.so.0"], (
        f"libh5log.so has SONAME {soname}: link it with -Wl,-soname,libh5log.so.0 (Makefile)")
    assert os.readlink(os.path.join(tree.libdir, "libh5log.so")) == "libh5log.so.0"
    assert os.path.basename(real).startswith("libh5log.so.0.")
    assert os.path.realpath(os.path.join(tree.libdir, "libh5log.so.0")) == real


def test_pkgconfig_file(tree):
    env = dict(os.environ, PKG_CONFIG_PATH=tree.pcdir)
    p = run(["pkg-config", "--variable=pcfiledir", "h5log"], env=env)
    assert p.stdout.strip() == tree.pcdir, "another h5log.pc shadows the installed one"
    assert run(["pkg-config", "--modversion", "h5log"], env=env).stdout.strip() == "0.1.0"
    # as installed, the flags name PREFIX; pc() moves them to the staged tree
    assert f"-I{PREFIX}/include" in run(["pkg-config", "--cflags", "h5log"], env=env).stdout.split()
    cflags, libs = pc(tree, "--cflags", "h5log"), pc(tree, "--libs", "h5log")
    assert f"-I{tree.root}/include" in cflags
    assert f"-L{tree.libdir}" in libs and "-lh5log" in libs
    hdf5 = run(["pkg-config", "--cflags", "hdf5"]).stdout.split()
    assert set(hdf5) <= set(cflags), f"hdf5's flags missing from h5log's: {hdf5} vs {cflags}"
    static = pc(tree, "--static", "--libs", "h5log")
    for lib in ["-lhdf5_hl", "-lxxhash"]:
        assert lib in static, f"{lib} missing from pkg-config --static --libs h5log: {static}"


# --------------------------------------------------------------------------
# a writer built against the installed tree, read through the installed daemon


def test_writer_shared_and_installed_daemon(tree, writer, srcdir, mnt, mounts, tmp_path):
    exe, cflags, libs = writer
    assert not any(REPO in f for f in cflags + libs), "flags point into the source tree"
    env = dict(os.environ, LD_LIBRARY_PATH=tree.libdir)
    ldd = run(["ldd", exe], env=env).stdout
    h5log_lines = [ln for ln in ldd.splitlines() if "libh5log" in ln]
    assert h5log_lines and all(tree.libdir in ln for ln in h5log_lines), ldd
    # the installed tools read it
    p = run([tree.p("bin", "h5logdump"), "--check", "-q", os.path.join(srcdir, "run.h5")])
    assert f"OK: {NSTEPS} ticks" in p.stdout
    canon = str(tmp_path / "canon.h5")
    run([tree.p("bin", "h5logreplay"), os.path.join(srcdir, "run.h5"), canon])
    rc, out = h5read(canon)
    assert rc == 0, out
    np.testing.assert_array_equal(np.array(out["data"], dtype=np.float32), expected_v())
    # the installed daemon serves it
    err = str(tmp_path / "daemon.stderr")
    with open(err, "wb") as ef:
        proc = mounts.proc(subprocess.Popen([tree.daemon, srcdir, mnt, "-f", "-o", "tick=0.2"],
                                            stdout=subprocess.DEVNULL, stderr=ef, stdin=subprocess.DEVNULL))
    wait_mounted(mnt, proc, err)
    assert sorted(os.listdir(mnt)) == ["notes.txt", "run.h5", "secret.h5"]
    rc, out = h5read(os.path.join(mnt, "run.h5"))
    assert rc == 0, out
    np.testing.assert_array_equal(np.array(out["data"], dtype=np.float32), expected_v())
    assert out["units"] == "K"
    assert run(["fusermount3", "-u", mnt]).returncode == 0
    assert proc.wait(timeout=10) == 0, read(err)


def test_writer_static_libh5log(tree, tmp_path):
    exe, _, libs = build_writer(tree, str(tmp_path), static=True)
    ldd = run(["ldd", exe]).stdout
    assert "libh5log" not in ldd, f"static link still needs libh5log.so:\n{ldd}"
    run_writer(exe, str(tmp_path / "static.h5"), tree, ld_path=False)
    p = run([os.path.join(BUILD, "bin", "h5logdump"), "--check", "-q", str(tmp_path / "static.h5")])
    assert f"OK: {NSTEPS} ticks" in p.stdout


# --------------------------------------------------------------------------
# systemd


def staged_units(tree, dest):
    """Copies of the installed units whose PREFIX paths point into DESTDIR
    (systemd-analyze verify checks that ExecStart's binary exists)."""
    os.makedirs(dest, exist_ok=True)
    out = []
    for src in [os.path.join(tree.unitdir, "h5logfs@.service"),
                os.path.join(tree.docdir, "examples", "data-h5logfs.mount"),
                os.path.join(tree.docdir, "examples", "data-h5logfs.automount")]:
        text = read(src).replace("=" + PREFIX + "/", "=" + tree.root + "/")
        path = os.path.join(dest, os.path.basename(src))
        with open(path, "w") as fh:
            fh.write(text)
        out.append(path)
    return out


def analyze_verify(units, tree):
    cmd = ["systemd-analyze", "verify"]
    env = dict(os.environ)
    if shutil.which("man"):
        env["MANPATH"] = tree.mandir  # Documentation=man:... must resolve to the installed pages
    else:
        cmd.append("--man=no")
    return subprocess.run(cmd + units, capture_output=True, text=True, timeout=120, env=env)


def test_systemd_units_verify(tree, tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    units = staged_units(tree, str(tmp_path / "units"))
    p = analyze_verify(units, tree)
    ours = [ln for ln in (p.stdout + p.stderr).splitlines()
            if "h5logfs" in ln or str(tmp_path) in ln]
    assert p.returncode == 0 and not ours, f"systemd-analyze verify:\n{p.stdout}{p.stderr}"
    # the check has teeth: a unit whose daemon is missing fails
    bad = str(tmp_path / "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "h5logfs@.service"), "w") as fh:
        fh.write(read(units[0]).replace(tree.daemon, tree.daemon + ".missing"))
    p = analyze_verify([os.path.join(bad, "h5logfs@.service")], tree)
    assert p.returncode != 0 and "missing" in p.stdout + p.stderr, p.stdout + p.stderr


def unit_command(unit_text, key, env):
    """The command line of `key` (ExecStart, ExecStop) as systemd expands it:
    %f, %i and ${VAR} as one argument each."""
    line = next(ln for ln in unit_text.splitlines() if ln.startswith(key + "="))
    words = line.split("=", 1)[1].split()
    out = []
    for w in words:
        for k, v in env.items():
            w = w.replace("${%s}" % k, v)
        out.append(w.replace("%f", env["%f"]).replace("%i", env["%i"]))
    return out


def test_service_command_lines_and_notify(tree, srcdir, mnt, mounts, tmp_path):
    """Run the service's ExecStart as systemd would (NOTIFY_SOCKET set, the
    instance configuration of the installed example), expect READY=1 once
    mounted, read through it, then ExecStop unmounts and the daemon exits 0."""
    unit = read(os.path.join(tree.unitdir, "h5logfs@.service")).replace("=" + PREFIX + "/", "=" + tree.root + "/")
    conf = {}
    for ln in read(os.path.join(tree.docdir, "examples", "h5logfs-instance.conf")).splitlines():
        if "=" in ln and not ln.lstrip().startswith("#"):
            k, v = ln.split("=", 1)
            conf[k.strip()] = v.strip()
    assert {"SOURCE", "OPTIONS"} <= set(conf), conf
    env = {"SOURCE": srcdir, "OPTIONS": conf["OPTIONS"], "%f": mnt, "%i": mnt.strip("/").replace("/", "-")}
    start, stop = unit_command(unit, "ExecStart", env), unit_command(unit, "ExecStop", env)
    assert start[0] == tree.daemon and "-f" in start, start
    sock_path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(sock_path)
    sock.settimeout(MOUNT_TIMEOUT)
    err = str(tmp_path / "service.stderr")
    try:
        with open(err, "wb") as ef:
            proc = mounts.proc(subprocess.Popen(start, env=dict(os.environ, NOTIFY_SOCKET=sock_path),
                                                stdout=subprocess.DEVNULL, stderr=ef, stdin=subprocess.DEVNULL))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            pytest.fail(f"no sd_notify message within {MOUNT_TIMEOUT} s:\n{read(err)}")
        assert "READY=1" in msg.split("\n"), msg
        assert os.path.ismount(mnt), "READY=1 sent before the mount was up"
        line = mount_line(mnt)
        assert line[2] == "fuse.h5logfs" and "ro" in line[3].split(","), line
        assert {"allow_other", "default_permissions"} <= set(line[3].split(",")), line
        rc, out = h5read(os.path.join(mnt, "run.h5"))
        assert rc == 0, out
        np.testing.assert_array_equal(np.array(out["data"], dtype=np.float32), expected_v())
        p = run(stop, check=False)
        assert p.returncode == 0, f"ExecStop {stop}: {p.stderr}"
        assert proc.wait(timeout=10) == 0, read(err)
        assert not os.path.ismount(mnt)
    finally:
        sock.close()


# --------------------------------------------------------------------------
# mount.h5logfs called as mount(8) calls it


def helper(tree, *args, env=None):
    e = dict(os.environ)
    e.pop("H5LOGFS_BIN", None)
    e.update(env or {})
    return subprocess.run([tree.helper] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=60, env=e, stdin=subprocess.DEVNULL)


def daemon_of(mnt):
    pids = daemon_pids(mnt)
    assert len(pids) == 1, f"expected one daemon for {mnt}, found {pids}"
    return pids[0], proc_argv(pids[0])


def test_helper_mounts_and_strips_fstab_options(tree, srcdir, mnt):
    opts = "ro,tick=0.5,nofail,_netdev,x-systemd.automount,auto,defaults,noatime,relatime,nosuid"
    p = helper(tree, srcdir, mnt, "-o", opts)
    assert p.returncode == 0, p.stderr
    assert os.path.ismount(mnt), "helper returned before the file system was mounted"
    pid, argv = daemon_of(mnt)
    assert os.path.realpath(f"/proc/{pid}/exe") == os.path.realpath(tree.daemon), "not the installed daemon"
    assert "-f" not in argv, f"daemon not in background mode: {argv}"
    o = argv[argv.index("-o") + 1].split(",")
    assert o == ["ro", "tick=0.5", "nosuid"], f"daemon options {o}"
    assert not set(o) & set(FSTAB_ONLY)
    line = mount_line(mnt)
    assert line[0] == os.path.realpath(srcdir) and line[2] == "fuse.h5logfs", line
    assert {"ro", "nosuid", "nodev"} <= set(line[3].split(",")), line
    rc, out = h5read(os.path.join(mnt, "run.h5"))
    assert rc == 0, out
    np.testing.assert_array_equal(np.array(out["data"], dtype=np.float32), expected_v())
    with open(os.path.join(mnt, ".h5logfs-stats")) as fh:
        assert "cache:" in fh.read()


def test_helper_allow_other_forces_default_permissions(tree, srcdir, mnt):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to read as another user")
    p = helper(tree, srcdir, mnt, "-o", "ro,allow_other,tick=0.5")
    assert p.returncode == 0, p.stderr
    _, argv = daemon_of(mnt)
    assert "default_permissions" in argv[argv.index("-o") + 1].split(","), argv
    assert {"allow_other", "default_permissions"} <= set(mount_line(mnt)[3].split(","))
    # user nobody reads what the source lets it read, and nothing more
    rc, out = h5read(os.path.join(mnt, "run.h5"), user=65534)
    assert rc == 0, out
    np.testing.assert_array_equal(np.array(out["data"], dtype=np.float32), expected_v())
    rc, out = h5read(os.path.join(mnt, "secret.h5"), user=65534)
    assert rc == 3 and out.get("error") == "EACCES", f"nobody could open a 0600 file: {out}"
    rc, out = h5read(os.path.join(mnt, "secret.h5"))  # root still can
    assert rc == 0, out


@pytest.mark.parametrize("opts, words", [
    ("ro,bogus=1", ["unknown option", "bogus=1"]),
    ("rw", ["rw", "read-only"]),
    ("ro,tick", ["tick", "needs a value"]),
    ("ro,allow_other,allow_root", ["allow_other", "allow_root"]),
    ("ro,suid", ["unknown option", "suid"]),
])
def test_helper_refuses(tree, srcdir, mnt, opts, words):
    p = helper(tree, srcdir, mnt, "-o", opts)
    assert p.returncode != 0, f"-o {opts} accepted"
    assert all(w in p.stderr for w in words), f"-o {opts}: unclear message {p.stderr!r}"
    assert p.stderr.startswith("mount.h5logfs: ")
    assert not os.path.ismount(mnt) and not daemon_pids(mnt)


def test_helper_fake_sloppy_and_daemon_lookup(tree, srcdir, mnt, tmp_path):
    # -f (fake): print the command, mount nothing
    p = helper(tree, srcdir, mnt, "-f", "-o", "ro,_netdev,cache_size=64M")
    assert p.returncode == 0, p.stderr
    assert f"{os.path.realpath(tree.daemon)} {os.path.realpath(srcdir)} {mnt} -o ro,cache_size=64M" in p.stderr, p.stderr
    # -s (sloppy): unknown options dropped with a warning
    p = helper(tree, srcdir, mnt, "-sf", "-o", "ro,bogus=1")
    assert p.returncode == 0 and "bogus=1" in p.stderr and " -o ro\n" in p.stderr, p.stderr
    # H5LOGFS_BIN overrides; a wrong one is an error, not a silent fallback
    p = helper(tree, srcdir, mnt, "-f", "-o", "ro", env={"H5LOGFS_BIN": "/bin/true"})
    assert p.returncode == 0 and "/bin/true " in p.stderr, p.stderr
    p = helper(tree, srcdir, mnt, "-f", "-o", "ro", env={"H5LOGFS_BIN": str(tmp_path / "none")})
    assert p.returncode != 0 and "H5LOGFS_BIN" in p.stderr
    # through a symlink (as /sbin/mount.fuse.h5logfs), the daemon is still found
    link = str(tmp_path / "mount.fuse.h5logfs")
    os.symlink(tree.helper, link)
    e = dict(os.environ, PATH="/usr/bin:/bin")
    e.pop("H5LOGFS_BIN", None)
    p = subprocess.run([link, srcdir, mnt, "-f", "-o", "ro"], capture_output=True, text=True, env=e, timeout=60)
    assert p.returncode == 0 and os.path.realpath(tree.daemon) in p.stderr, p.stderr
    assert not os.path.ismount(mnt)


# --------------------------------------------------------------------------
# `mount -t fuse.h5logfs` for real, in a private mount namespace

NS_SCRIPT = r"""
import json, os, subprocess, sys, time
overlays, src, mnt, opts, py = json.loads(sys.argv[1]), *sys.argv[2:6]
res = {}
def pids():
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:  # a process may end between the listing and these reads
                argv = open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")
                if mnt.encode() in argv:
                    exe = os.path.realpath(f"/proc/{d}/exe", strict=True)
                    out.append((int(d), [a.decode() for a in argv[:-1]], exe))
            except OSError:
                continue
    return out
try:
    for upper, target in overlays:  # put upper's files over target, in this namespace only
        target = os.path.realpath(target)
        r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={upper}:{target}", target],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(json.dumps({"skip": "overlay mount failed: " + r.stderr.strip()}))
            sys.exit(0)
    cmd = ["mount", "-t", "fuse.h5logfs", src, mnt] + (["-o", opts] if opts != "-" else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    res.update(rc=r.returncode, stderr=r.stderr, mounted=os.path.ismount(mnt))
    res["line"] = next((l.split() for l in open("/proc/mounts") if l.split()[1] == mnt), None)
    res["daemons"] = pids()
    if res["mounted"]:
        r = subprocess.run([py, "-c", "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); "
                            "print(f['/data/v'][()].sum())", os.path.join(mnt, "run.h5")],
                           capture_output=True, text=True, timeout=60)
        res["read"] = (r.returncode, r.stdout.strip(), r.stderr[-2000:])
finally:
    if os.path.ismount(mnt):
        r = subprocess.run(["umount", mnt], capture_output=True, text=True)
        res["umount"] = (r.returncode, r.stderr)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", mnt])
    deadline = time.time() + 10
    while pids() and time.time() < deadline:
        time.sleep(0.05)
    res["left"] = [p for p, _, _ in pids()]
    for p in res["left"]:
        os.kill(p, 9)
    print(json.dumps(res))
"""


def in_namespace(tmp_path, overlays, src, mnt, opts):
    """Run NS_SCRIPT in a private mount namespace: overlays [(dir, target)]
    put dir's files over target there only; then mount -t fuse.h5logfs."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a private mount namespace")
    script = str(tmp_path / "ns.py")
    with open(script, "w") as fh:
        fh.write(NS_SCRIPT)
    env = dict(os.environ)
    env.pop("H5LOGFS_BIN", None)
    p = subprocess.run(["unshare", "-m", "--propagation", "private", PY, script, json.dumps(overlays),
                        src, mnt, opts, PY],
                       capture_output=True, text=True, timeout=180, env=env)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        pytest.fail(f"namespace script failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    if "skip" in res:
        pytest.skip(res["skip"])
    assert not res["left"], f"daemons left after umount: {res}"
    return res


def expected_sum():
    return float(expected_v().sum())


def test_mount_t_through_helper(tree, srcdir, mnt, tmp_path):
    """mount(8) finds /sbin/mount.fuse.h5logfs (an overlay in a private
    namespace), which drops the fstab-only options and starts the installed
    daemon; mount returns once mounted."""
    helpers = str(tmp_path / "sbin-overlay")
    os.makedirs(helpers)
    os.symlink(tree.helper, os.path.join(helpers, "mount.fuse.h5logfs"))
    res = in_namespace(tmp_path, [(helpers, "/sbin")], srcdir, mnt,
                       "ro,tick=0.5,nofail,_netdev,X-mount.mkdir,allow_other")
    assert res["rc"] == 0 and res["mounted"], res
    assert res["line"][2] == "fuse.h5logfs" and "default_permissions" in res["line"][3].split(","), res
    (pid, argv, exe), = res["daemons"]
    assert exe == os.path.realpath(tree.daemon), res
    o = argv[argv.index("-o") + 1].split(",")
    assert not set(o) & {"nofail", "_netdev", "X-mount.mkdir", "rw"}, argv
    assert {"ro", "tick=0.5", "allow_other", "default_permissions"} <= set(o), argv
    assert res["read"][0] == 0 and float(res["read"][1]) == expected_sum(), res
    assert res["umount"][0] == 0, res


def test_mount_t_without_ro_is_refused(tree, srcdir, mnt, tmp_path):
    """mount(8) passes rw when ro is missing; the helper refuses it clearly."""
    helpers = str(tmp_path / "sbin-overlay")
    os.makedirs(helpers)
    os.symlink(tree.helper, os.path.join(helpers, "mount.fuse.h5logfs"))
    res = in_namespace(tmp_path, [(helpers, "/sbin")], srcdir, mnt, "tick=0.5")
    assert res["rc"] != 0 and not res["mounted"], res
    assert "read-only" in res["stderr"] and "ro" in res["stderr"], res


def test_mount_t_fallback_mount_fuse3(tree, srcdir, mnt, tmp_path):
    """Without /sbin/mount.fuse.h5logfs, mount(8) uses Debian's mount.fuse3,
    which runs h5logfs from PATH. mount(8) resets PATH to
    /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin, so a PATH
    set by the caller is no use: the staged bin/ is overlaid on /usr/local/bin
    (in the namespace only), where PREFIX=/usr/local puts it."""
    if os.path.exists("/sbin/mount.fuse.h5logfs"):
        pytest.skip("/sbin/mount.fuse.h5logfs is installed on this host: mount(8) would use it")
    if not os.path.exists("/sbin/mount.fuse3") and not os.path.exists("/sbin/mount.fuse"):
        pytest.skip("no /sbin/mount.fuse3 (Debian package fuse3)")
    res = in_namespace(tmp_path, [(tree.p("bin"), PREFIX + "/bin")], srcdir, mnt, "ro,tick=0.5")
    assert res["rc"] == 0 and res["mounted"], res
    (pid, argv, exe), = res["daemons"]
    assert exe == PREFIX + "/bin/h5logfs", res
    assert argv[0] == "h5logfs", res
    assert res["read"][0] == 0 and float(res["read"][1]) == expected_sum(), res


# --------------------------------------------------------------------------
# man pages and uninstall


def test_man_pages(tree):
    pages = ["man8/h5logfs.8", "man8/mount.h5logfs.8", "man1/h5logreplay.1", "man1/h5logdump.1", "man3/h5log.3"]
    if os.path.exists(tree.p("share", "man", "man1", "h5logtail.1")):
        pages.append("man1/h5logtail.1")
    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    for page in pages:
        path = os.path.join(tree.mandir, page)
        p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True)
        assert p.returncode == 0 and not p.stderr.strip(), f"{page}: {p.stderr}"
    if shutil.which("man"):
        p = run(["man", "-w", "mount.h5logfs"], env=dict(os.environ, MANPATH=tree.mandir))
        assert p.stdout.strip() == os.path.join(tree.mandir, "man8", "mount.h5logfs.8")


def test_uninstall_removes_everything(tmp_path):
    destdir = tmp_path / "stage"
    run(make_cmd("install", destdir), timeout=900)
    files = [os.path.join(r, f) for r, _, fs in os.walk(destdir) for f in fs]
    assert len(files) >= 20, files
    run(make_cmd("uninstall", destdir), timeout=300)
    left = [os.path.join(r, f) for r, _, fs in os.walk(destdir) for f in fs]
    left += [os.path.join(r, d) for r, ds, _ in os.walk(destdir) for d in ds
             if os.path.islink(os.path.join(r, d))]
    assert not left, f"make uninstall left: {left}"
