#!/usr/bin/python3
"""soak.py — the differential test (difftest.py) on random seeds until time
runs out; `make soak SECONDS=N` runs it.

Usage: soak.py SECONDS [--live] [--keep DIR]
       soak.py --seed S [--ranks P] [--no-nofill] [--live] [--keep DIR]

Each seed: generate a spec, write it with spec_writer under mpirun, check
every tick through h5logreplay + h5py, mount the directory with h5logfs and
check the newest tick with h5py and netCDF4-python. With --live the
directory is mounted first and the spec written with a pause after each
flush, and every snapshot a poller sees is checked at its tick. Prints one line per seed
and, for a failing one, the differences and the command that reruns it.
--seed reruns one seed (the files stay in --keep DIR, or a temporary
directory that is printed). Exit status 1 if any seed failed.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import difftest  # noqa: E402
from h5ltest import Mount  # noqa: E402


def run_live(spec, nranks, states, workdir):
    """The live checks of a spec (difftest.check_live); differences."""
    src = os.path.join(workdir, "src")
    os.makedirs(src, exist_ok=True)
    m = Mount(src, os.path.join(workdir, "mnt"), workdir)
    diffs = []
    try:
        m.start("tick=0.05")
        proc, h5 = difftest.start_write(spec, nranks, src, difftest.LIVE_PAUSE_MS)
        checked, diffs = difftest.check_live(m.path(os.path.basename(h5)), states, proc)
        prob = difftest.finish_write(proc)
        if prob:
            diffs.append(prob)
        elif len(states) not in checked:
            diffs.append(f"live: the closed file's tick {len(states)} never showed (saw {sorted(checked)})")
    except BaseException as e:  # pytest.fail raises a BaseException
        diffs.append(f"mount: {e}")
    finally:
        diffs += [f"mount: {p}" for p in m.stop()]
    return diffs


def run_seed(seed, workdir, nranks=None, nofill=True, mount=True, live=False):
    """All checks of one seed in workdir; returns (nranks, differences)."""
    spec, nranks = difftest.generate(seed, nranks=nranks, nofill=nofill,
                                     data_ticks=difftest.LIVE_DATA_TICKS if live else 0)
    states = difftest.run_model(spec, nranks)
    if live:
        return nranks, run_live(spec, nranks, states, workdir)
    src = os.path.join(workdir, "src")
    h5, prob = difftest.write(spec, nranks, src)
    if prob:
        return nranks, [prob]
    diffs = difftest.check_replay(h5, states, workdir)
    if mount:
        m = Mount(src, os.path.join(workdir, "mnt"), workdir)
        try:
            m.start()
            path = m.path(os.path.basename(h5))
            diffs += difftest.check_mount(path, states[-1])
        except BaseException as e:  # pytest.fail raises a BaseException
            diffs.append(f"mount: {e}")
        finally:
            diffs += [f"mount: {p}" for p in m.stop()]
    return nranks, diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("seconds", nargs="?", type=float)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--ranks", type=int, choices=[1, 2, 4])
    ap.add_argument("--no-nofill", action="store_true", help="generate no h5l_def_var_nofill calls")
    ap.add_argument("--live", action="store_true", help="check the snapshots seen while the file is written")
    ap.add_argument("--keep", help="directory for the files (kept)")
    a = ap.parse_args()
    if (a.seconds is None) == (a.seed is None):
        ap.error("give SECONDS or --seed")
    if a.seed is not None:
        d = a.keep or tempfile.mkdtemp(prefix="difftest.")
        os.makedirs(d, exist_ok=True)
        n, diffs = run_seed(a.seed, d, a.ranks, not a.no_nofill, live=a.live)
        print(difftest.report(a.seed, n, diffs, limit=200) if diffs else f"seed {a.seed} ({n} ranks): ok")
        print(f"files in {d} (spec: {d}/src/spec.txt)")
        return 1 if diffs else 0
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    t_end = time.monotonic() + a.seconds
    seeds = int.from_bytes(os.urandom(4), "little")
    failed, n_run = [], 0
    while time.monotonic() < t_end:
        seed = seeds + n_run
        d = tempfile.mkdtemp(prefix="difftest.", dir=a.keep)
        n, diffs = run_seed(seed, d, a.ranks, not a.no_nofill, live=a.live)
        n_run += 1
        if diffs:
            failed.append(seed)
            print(difftest.report(seed, n, diffs), flush=True)
            print(f"  rerun: /usr/bin/python3 tests/e2e/soak.py --seed {seed}" + (" --live" if a.live else ""),
                  flush=True)
        else:
            print(f"seed {seed} ({n} ranks): ok", flush=True)
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)
    print(f"soak: {n_run} seeds in {a.seconds:g} s, {len(failed)} failed"
          + (": " + " ".join(map(str, failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
