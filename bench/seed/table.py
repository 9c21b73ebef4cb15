"""Markdown tables of a seed benchmark run, as docs/performance.md shows
them: median write times per run and writer; median read times of
bench_variable, bench_complete and header per run, engine, source and
cache, with the ratio mount/local.

usage: table.py RECORDS.json
"""
import json
import statistics
import sys


def med(rs):
    return statistics.median(r["seconds"] for r in rs) if rs else None


def fmt(x):
    return "—" if x is None else ("%.3f" % x if x < 10 else "%.1f" % x)


def main(path):
    with open(path) as f:
        recs = json.load(f)
    runs = list(dict.fromkeys(r["run"] for r in recs))

    def label(run):
        r = next(x for x in recs if x["run"] == run)
        n = next(iter(r["chunks"]))
        c = r["chunks"][n]
        return "%s %s %s" % (n, "×".join(map(str, r["shape"][n])), "chunks " + "×".join(map(str, c)) if c else "default")

    w = [r for r in recs if r["kind"] == "write"]
    ws = list(dict.fromkeys((r["writer"], r["ranks"]) for r in w))
    print("Write (create + write + close), median seconds:\n")
    print("| run | " + " | ".join("%s np%d" % k for k in ws) + " |")
    print("|---|" + "---:|" * len(ws))
    for run in runs:
        print("| %s | " % label(run) + " | ".join(
            fmt(med([r for r in w if r["run"] == run and (r["writer"], r["ranks"]) == k])) for k in ws) + " |")
    rd = [r for r in recs if r["kind"] == "read"]
    for pat in ("bench_variable", "bench_complete", "header"):
        print("\n`%s`, median seconds (cold / warm); mount/local: the ratio of the times:\n" % pat)
        engines = list(dict.fromkeys(r["engine"] for r in rd))
        print("| run | engine | mount | local | h5py's file | mount/local cold | mount/local warm |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for run in runs:
            for e in engines:
                def m(src, cache):
                    return med([r for r in rd if r["run"] == run and r["engine"] == e and r["pattern"] == pat
                                and r["source"] == src and r["cache"] == cache])
                cells = ["%s / %s" % (fmt(m(s, "cold")), fmt(m(s, "warm"))) for s in ("mount", "local", "h5py")]
                rat = []
                for c in ("cold", "warm"):
                    a, b = m("mount", c), m("local", c)
                    rat.append("%.2f" % (a / b) if a and b else "—")
                print("| %s | %s | %s | %s |" % (label(run), e, " | ".join(cells), " | ".join(rat)))


if __name__ == "__main__":
    main(sys.argv[1])
