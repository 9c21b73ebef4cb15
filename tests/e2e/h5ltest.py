"""Shared helpers of the end-to-end tests: where the build is, the MPI
environment, the daemon as a fixture that always unmounts, and the
reference arrays tests/mpi/test_writer.c leaves in DIR/ref/.

pytest puts this directory on sys.path, so test files import it directly.
"""
import os
import subprocess
import threading
import time

import h5py
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(os.environ.get("H5LOG_BUILD", os.path.join(HERE, "..", "..", "build")))
BIN = os.path.join(BUILD, "bin")
DAEMON = os.path.join(BIN, "h5logfs")
TEST_WRITER = os.path.join(BUILD, "tests", "test_writer")
LIVE_WRITER = os.path.join(BUILD, "tests", "live_writer")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")



def sanitizer_env(lib):
    """Under `make asan` libh5log.so needs the ASan/UBSan runtimes, which
    must be loaded before anything else: a Python process preloads them,
    and LeakSanitizer is off (the interpreter keeps its memory at exit).
    {} for a build without sanitizers."""
    try:
        needed = subprocess.run(["objdump", "-p", lib], capture_output=True, text=True).stdout
    except OSError:
        return {}
    rts = [subprocess.run(["gcc", f"-print-file-name={r}.so"], capture_output=True, text=True).stdout.strip()
           for r in ("libasan", "libubsan") if r in needed]
    if not rts:
        return {}
    return {"LD_PRELOAD": " ".join(rts),
            "ASAN_OPTIONS": "detect_leaks=0:verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", "")}


# what a Python process that loads libh5log.so (ctypes) needs in its environment
SAN_ENV = sanitizer_env(os.path.join(BUILD, "libh5log.so"))

TICK = 0.1            # the daemon's -o tick=
MOUNT_TIMEOUT = 10.0  # seconds until the mount must be up
WATCHDOG = 150.0      # seconds a single test may keep a daemon mounted


def mounted(mnt):
    """Is mnt listed in /proc/mounts (a dead mount is listed too)?"""
    with open("/proc/mounts") as f:
        return any(line.split()[1] == str(mnt) for line in f)


def wait_for(pred, timeout=10.0):
    """Poll pred until it is true (True) or timeout seconds pass (False)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return True
        time.sleep(0.05)
    return False


class Mount:
    """One h5logfs process serving SRC at MNT; stderr goes to a file."""

    def __init__(self, src, mnt, logdir):
        self.src, self.mnt = str(src), str(mnt)
        self.err_path = os.path.join(str(logdir), "h5logfs.%d.stderr" % id(self))
        self.out_path = os.path.join(str(logdir), "h5logfs.%d.stdout" % id(self))
        self.proc = None
        self.watchdog_fired = False
        self._timer = None

    def start(self, opts="tick=%g" % TICK):
        if not os.access(DAEMON, os.X_OK):
            pytest.fail(f"{DAEMON} is not built (make)")
        os.makedirs(self.mnt, exist_ok=True)
        self._err = open(self.err_path, "wb")
        self._out = open(self.out_path, "wb")
        self.proc = subprocess.Popen([DAEMON, self.src, self.mnt, "-f", "-o", opts],
                                     stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL)
        self._timer = threading.Timer(WATCHDOG, self._watchdog)
        self._timer.daemon = True
        self._timer.start()
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                pytest.fail(f"h5logfs exited with status {self.proc.returncode} before mounting:\n"
                            + self.stderr())
            if time.monotonic() > deadline:
                pytest.fail(f"{self.mnt} not mounted after {MOUNT_TIMEOUT} s:\n" + self.stderr())
            time.sleep(0.02)
        return self

    def _watchdog(self):
        if self.proc is not None and self.proc.poll() is None:
            self.watchdog_fired = True
            self.proc.kill()  # blocked syscalls on the mount now fail with ENOTCONN

    def path(self, *parts):
        return os.path.join(self.mnt, *parts)

    def stderr(self):
        try:
            with open(self.err_path, "rb") as fh:
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def assert_alive(self):
        assert self.proc.poll() is None, (f"h5logfs died (status {self.proc.returncode}):\n" + self.stderr()[-4000:])
        assert os.path.ismount(self.mnt), f"{self.mnt} is no longer mounted"

    def stop(self):
        """Unmount and reap the daemon. Returns a list of problems found."""
        problems = []
        if self.proc is None:
            return problems
        if self._timer:
            self._timer.cancel()
        died_before = self.proc.poll()
        if died_before is not None and died_before < 0 and not self.watchdog_fired:
            problems.append(f"h5logfs was killed by signal {-died_before} during the test")
        try:
            r = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True, timeout=20)
            ok = r.returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        if not ok:
            try:
                subprocess.run(["fusermount3", "-uz", self.mnt], capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                problems.append("fusermount3 -uz timed out")
        try:
            rc = self.proc.wait(timeout=5)
            if rc < 0 and died_before is None:
                problems.append(f"h5logfs was killed by signal {-rc} at unmount")
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            problems.append("h5logfs did not exit after unmount")
        if self.watchdog_fired:
            problems.append(f"watchdog: h5logfs still mounted after {WATCHDOG} s (hung?), killed")
        self._err.close()
        self._out.close()
        self.proc = None
        return problems


@pytest.fixture
def h5logfs(tmp_path):
    """Factory: h5logfs(src) mounts src at a fresh directory and returns the
    Mount. Every mount is undone at teardown, whatever happened."""
    mounts = []

    def start(src, name="mnt", opts="tick=%g" % TICK):
        m = Mount(src, tmp_path / name, tmp_path)
        mounts.append(m)
        return m.start(opts)

    yield start
    problems = []
    for m in mounts:
        problems += m.stop()
    if problems:
        pytest.fail("; ".join(problems) + "\n" + "\n".join(m.stderr()[-2000:] for m in mounts))


def load_ref(d):
    """test_writer's reference arrays: {path: ndarray} from d/ref/ (the six
    variables of tests/mpi/test_writer.c), computed without the library."""
    ref = {}
    with open(os.path.join(d, "ref", "manifest.txt")) as m:
        for line in m:
            parts = line.split()
            idx, path, dt, dims = parts[0], parts[1], parts[2], [int(x) for x in parts[3:]]
            a = np.fromfile(os.path.join(d, "ref", idx + ".bin"), dtype=np.dtype(dt))
            ref[path] = a.reshape(dims) if dims else a.reshape(())
    assert len(ref) == 6, f"reference in {d} is incomplete"
    return ref


def compare_with_ref(h5path, ref):
    """Every variable of ref read from h5path with h5py equals the reference,
    element by element, and so does a sub-box of /a."""
    with h5py.File(h5path, "r") as f:
        for path, want in ref.items():
            got = f[path][()]
            assert got.shape == want.shape, f"{h5path}{path}: shape {got.shape} != {want.shape}"
            assert got.dtype == want.dtype, f"{h5path}{path}: dtype {got.dtype} != {want.dtype}"
            nbad = int(np.sum(got != want))
            assert nbad == 0, f"{h5path}{path}: {nbad} of {want.size} elements differ from the reference"
        # a partial read too (hyperslab through a different code path)
        a = f["a"][3:11, 2:9, 1:8]
        assert np.array_equal(a, ref["/a"][3:11, 2:9, 1:8]), f"{h5path}/a: sub-box differs"
