"""Plots one benchmark's history over the runs saved in a pytest-benchmark storage folder.

    python bench/plot.py NAME [--storage bench/baselines] [-o history.png]

NAME is matched against each benchmark's fullname (`bench/test_cpu.py::test_w1_saxpy_numba`): an exact
fullname, else every benchmark whose fullname contains NAME (each gets its own line). Runs are the files
`<storage>/<machine_id>/NNNN_*.json` (`--benchmark-save=NAME` / `--benchmark-autosave` write them), in
the order of their number; each point is a run's median with its min and its q1..q3 band, so a noisy run
looks noisy instead of slow. matplotlib is optional: `pip install "qd-lang[plot]"`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys

PLOT_HINT = 'plotting needs matplotlib: pip install "qd-lang[plot]" (or pip install "matplotlib>=3.5")'


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, or an ImportError that says how to install it."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(PLOT_HINT) from e
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def saved_runs(storage: str) -> list[tuple[str, dict]]:
    """(file name, data) of every saved run under storage, ordered by run number then machine folder."""
    paths = glob.glob(os.path.join(storage, "*", "[0-9][0-9][0-9][0-9]_*.json"))
    paths.sort(key=lambda p: (os.path.basename(p), p))
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append((os.path.basename(p)[:-5], json.load(f)))
    return runs


def history(runs: list[tuple[str, dict]], name: str) -> dict[str, list[tuple[str, dict]]]:
    """Per matching fullname, its (run label, stats) in run order: an exact fullname wins over substrings."""
    names = {b["fullname"] for _, d in runs for b in d["benchmarks"]}
    wanted = {name} if name in names else {n for n in names if name in n}
    out: dict[str, list[tuple[str, dict]]] = {n: [] for n in sorted(wanted)}
    for label, d in runs:
        for b in d["benchmarks"]:
            if b["fullname"] in out:
                out[b["fullname"]].append((label, b["stats"]))
    return out


def plot_history(hist: dict[str, list[tuple[str, dict]]], out: str, title: str = "") -> str:
    """Writes the history as a PNG: medians joined, mins dotted, q1..q3 shaded, in ms. Returns `out`."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels: list[str] = []
    for fullname, points in hist.items():
        for label, _ in points:
            if label not in labels:
                labels.append(label)
    for fullname, points in hist.items():
        xs = [labels.index(label) for label, _ in points]
        med = [s["median"] * 1e3 for _, s in points]
        line, = ax.plot(xs, med, "o-", label=fullname.split("::")[-1])
        ax.plot(xs, [s["min"] * 1e3 for _, s in points], ":", color=line.get_color())
        ax.fill_between(xs, [s["q1"] * 1e3 for _, s in points], [s["q3"] * 1e3 for _, s in points],
                        color=line.get_color(), alpha=0.2)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("ms (median o-, min :, q1..q3 band)")
    ax.set_title(title or "benchmark history")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", help="a benchmark's fullname, or a part of it")
    ap.add_argument("--storage", default="bench/baselines", help="a --benchmark-storage folder (default bench/baselines)")
    ap.add_argument("-o", "--output", default="bench-history.png")
    args = ap.parse_args(argv)
    storage = args.storage.removeprefix("file://")
    hist = history(saved_runs(storage), args.name)
    if not any(hist.values()):
        print(f"plot.py: no saved run under {storage} has a benchmark matching {args.name!r}", file=sys.stderr)
        return 2
    try:
        path = plot_history(hist, args.output, title=args.name)
    except ImportError as e:
        print(f"plot.py: {e}", file=sys.stderr)
        return 3
    print(f"wrote {path} ({sum(len(p) for p in hist.values())} points, {len(hist)} benchmark(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
