"""The README's writer example works as written: its C program, built with
its command line from the build tree (no install), runs under mpirun and
leaves a closed log-layout file holding what the program wrote.

Why: users copy the README first. A link line that built a program unable
to start (no libh5log.so.0 in build/) went unnoticed while every other test
passed, because no test ran the README's own text.
"""
import os
import re
import shlex
import subprocess

import h5py
import numpy as np

from h5ltest import BIN, BUILD, ENV

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def readme_section(title):
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    start = text.index("## " + title)
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def sanitizer_flags(lib):
    """`make asan` builds the library with ASan/UBSan: the program must then
    be built with the same runtime."""
    needed = subprocess.run(["objdump", "-p", lib], capture_output=True, text=True).stdout
    kinds = [k for l, k in (("libasan", "address"), ("libubsan", "undefined")) if l in needed]
    return ["-fsanitize=" + ",".join(kinds)] if kinds else []


def test_readme_writer_example(tmp_path):
    sec = readme_section("Writing a file")
    code = re.search(r"```c\n(.*?)```", sec, re.S).group(1)
    sh = re.search(r"```sh\n(.*?)```", sec, re.S).group(1)
    build_line = next(l for l in sh.splitlines() if l.startswith("cc "))
    run_line = next(l for l in sh.splitlines() if l.startswith("mpirun "))
    (tmp_path / "run.c").write_text(code)
    # the README's command, run from the repository root; the build tree of
    # this test run stands for build/ (make asan builds into build-asan/)
    cmd = build_line.split("#")[0].replace("$PWD/build", BUILD).replace("-Lbuild", "-L" + BUILD)
    cmd = cmd.replace("-o run run.c", "-o %s %s" % (tmp_path / "run", tmp_path / "run.c"))
    cmd = subprocess.run(["bash", "-c", "echo " + cmd], capture_output=True, text=True, cwd=ROOT).stdout.split()
    cmd += sanitizer_flags(os.path.join(BUILD, "libh5log.so"))
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, f"README build line failed: {' '.join(cmd)}\n{p.stderr}"
    # the program starts from the build tree alone: no LD_LIBRARY_PATH
    env = {k: v for k, v in ENV.items() if k != "LD_LIBRARY_PATH"}
    argv = shlex.split(run_line.split("#")[0])
    argv = argv[:1] + ["--oversubscribe"] + argv[1:-1] + [str(tmp_path / "run")]
    p = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, f"README program failed:\n{p.stdout}\n{p.stderr}"
    out = tmp_path / "run.h5"
    d = subprocess.run([os.path.join(BIN, "h5logdump"), "--check", "-q", str(out)], capture_output=True, text=True)
    assert d.returncode == 0 and "OK: 10 ticks" in d.stdout, d.stdout + d.stderr
    nranks = int(argv[argv.index("-np") + 1])
    canon = tmp_path / "canon.h5"
    subprocess.run([os.path.join(BIN, "h5logreplay"), str(out), str(canon)], check=True)
    with h5py.File(canon, "r") as f:
        v = f["atm/temp"]
        assert v.shape == (10, 256 * nranks)
        assert v.attrs["units"] == b"K"
        # the program's float arithmetic, step by step in float32
        f32 = np.float32
        want = np.array([[f32(273.15) + f32(s) + f32(x // 256) / f32(100) for x in range(256 * nranks)]
                         for s in range(10)], dtype=np.float32)
        assert np.array_equal(v[()], want)
