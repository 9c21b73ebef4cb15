"""Plots of the seed benchmark's records (PNG, matplotlib's Agg backend):
seed_write.png — median write time per run (chunking) per writer and ranks;
seed_read.png — median read time per run per source and cache, one panel
per pattern (rows) and engine (columns).

usage: plot.py RECORDS.json OUTDIR   (seedbench.py calls plot() itself)
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def run_label(r):
    name = next(iter(r["chunks"]))
    c = r["chunks"][name]
    return "%s\n%s %s" % (r["run"], name, "x".join(map(str, c)) if c else "default")


def medians(records, keyf):
    g = {}
    for r in records:
        g.setdefault(keyf(r), []).append(r["seconds"])
    return {k: statistics.median(v) for k, v in g.items()}


def bars(ax, runs, series, values, title):
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        ys = [values.get((run, s), 0) for run in runs]
        ax.bar([x + (i - (len(series) - 1) / 2) * width for x in range(len(runs))], ys, width, label=s)
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([labels[r] for r in runs], fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (median)", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)


labels = {}


def plot(records, outdir):
    os.makedirs(outdir, exist_ok=True)
    out = []
    runs = []
    for r in records:
        if r["run"] not in runs:
            runs.append(r["run"])
            labels[r["run"]] = run_label(r)
    setup = records[0]["setup"] if records else "?"

    w = [r for r in records if r["kind"] == "write"]
    if w:
        vals = medians(w, lambda r: (r["run"], "%s np%d" % (r["writer"], r["ranks"])))
        series = sorted({k[1] for k in vals})
        fig, ax = plt.subplots(figsize=(8, 4))
        bars(ax, runs, series, vals, "write (create + write + close), setup %s" % setup)
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = os.path.join(outdir, "seed_write.png")
        fig.savefig(p, dpi=100)
        plt.close(fig)
        out.append(os.path.abspath(p))

    rd = [r for r in records if r["kind"] == "read"]
    if rd:
        pats = [p for p in ("header", "variable", "bench_variable", "bench_complete")
                if any(r["pattern"] == p for r in rd)]
        engines = [e for e in ("h5py", "netCDF4", "xarray") if any(r["engine"] == e for r in rd)]
        names = {"mount": "mount", "local": "local canonical file", "h5py": "h5py-mpio's file"}
        vals = medians(rd, lambda r: (r["pattern"], r["engine"], r["run"],
                                      "%s, %s" % (names[r["source"]], r["cache"])))
        series = ["%s, %s" % (names[s], c) for s in ("mount", "local", "h5py") for c in ("cold", "warm")
                  if any(k[3] == "%s, %s" % (names[s], c) for k in vals)]
        fig, axes = plt.subplots(len(pats), len(engines), figsize=(4.5 * len(engines), 2.8 * len(pats)),
                                 squeeze=False)
        for i, pat in enumerate(pats):
            for j, eng in enumerate(engines):
                v = {(k[2], k[3]): t for k, t in vals.items() if k[0] == pat and k[1] == eng}
                bars(axes[i][j], runs, series, v, "%s, %s" % (pat, eng))
        h, lab = axes[0][0].get_legend_handles_labels()
        fig.legend(h, lab, loc="lower center", ncol=len(series), fontsize=8)
        fig.suptitle("reads (open + read + close), setup %s: the h5log file through the mount, "
                     "its canonical copy on local disk, the file h5py-mpio wrote" % setup, fontsize=10)
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        p = os.path.join(outdir, "seed_read.png")
        fig.savefig(p, dpi=100)
        plt.close(fig)
        out.append(os.path.abspath(p))
    return out


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        print("\n".join(plot(json.load(f), sys.argv[2])))
