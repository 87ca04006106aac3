"""Compares a pytest-benchmark run with a baseline, with a margin sized from each benchmark's own noise.

    python bench/compare.py BASELINE RUN [--k 2] [--floor 10] [--storage bench/baselines]

BASELINE and RUN are pytest-benchmark JSON files (`--benchmark-json=run.json`, or saved runs under a
`--benchmark-storage` folder); a bare run number such as `0005` names the saved run `*/0005_*.json` under
`--storage` (default `bench/baselines`). Exit status 1 when a benchmark regressed.

Why not a fixed margin: on a shared machine a loaded run's median can be several times the baseline's
(a fixed 15% called such a run +243%), while a quiet benchmark's 15% is a real change. So each benchmark
gets its own margin, in percent of the baseline:

    spread  = IQR / median of its rounds (stddev / median under 4 rounds), for the baseline and the run
    margin  = max(floor, k * max(spread_baseline, spread_run) * 100)

and it is a REGRESSION only when both its min and its median are more than `margin` above the baseline's
(load inflates the median and the spread; the min, the least disturbed round, must agree). Numbers a
benchmark measures itself and keeps in `extra_info` under a key of `EXTRA` (W4's `first_call_ms`) are
compared as `NAME :: KEY`, with the margin of the benchmark they belong to. Every line shows the numbers
it decided on. Benchmarks present on one side only are listed and ignored.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from dataclasses import dataclass

EXTRA = ("first_call_ms",)  # extra_info numbers in ms, lower is better
K = 2.0  # margin = K spreads ...
FLOOR = 10.0  # ... but never under FLOOR percent


@dataclass(frozen=True)
class Stat:
    """One benchmark's numbers on one side: seconds, and its relative spread over its rounds."""

    min: float
    median: float
    spread: float  # IQR / median (stddev / median under 4 rounds), a fraction
    rounds: int


@dataclass(frozen=True)
class Verdict:
    """The decision on one benchmark, with the numbers it was made on (changes and margin in percent)."""

    name: str
    min_change: float
    median_change: float
    margin: float
    status: str  # "REGRESSION", "faster" or "ok"


def spread_of(stats: dict) -> float:
    """Relative spread of a pytest-benchmark `stats` dict: IQR over median, stddev when rounds < 4."""
    median = stats["median"]
    if median <= 0:
        return 0.0
    width = stats.get("iqr", 0.0) if stats.get("rounds", 0) >= 4 else stats.get("stddev", 0.0)
    return float(width) / median


def stats_of(data: dict) -> dict[str, Stat]:
    """Every benchmark (and EXTRA number) of one run, by fullname."""
    out = {}
    for b in data["benchmarks"]:
        s = b["stats"]
        stat = Stat(s["min"], s["median"], spread_of(s), int(s.get("rounds", 0)))
        out[b["fullname"]] = stat
        for key in EXTRA:
            value = b.get("extra_info", {}).get(key)
            if isinstance(value, (int, float)):
                out[f"{b['fullname']} :: {key}"] = Stat(value / 1e3, value / 1e3, stat.spread, stat.rounds)
    return out


def margin_pct(base: Stat, new: Stat, k: float = K, floor: float = FLOOR) -> float:
    """The allowed slowdown in percent: k times the larger of the two spreads, at least `floor`."""
    return max(floor, k * max(base.spread, new.spread) * 100.0)


def decide(name: str, base: Stat, new: Stat, k: float = K, floor: float = FLOOR) -> Verdict:
    """REGRESSION when both min and median rose by more than the margin; faster when both fell by more."""
    margin = margin_pct(base, new, k, floor)
    dmin = (new.min / base.min - 1.0) * 100.0
    dmed = (new.median / base.median - 1.0) * 100.0
    if dmin > margin and dmed > margin:
        status = "REGRESSION"
    elif dmin < -margin and dmed < -margin:
        status = "faster"
    else:
        status = "ok"
    return Verdict(name, dmin, dmed, margin, status)


def compare(base: dict[str, Stat], run: dict[str, Stat], k: float = K, floor: float = FLOOR):
    """(verdicts of the benchmarks on both sides, names on one side only), sorted by name."""
    both = sorted(base.keys() & run.keys())
    only = sorted(base.keys() ^ run.keys())
    return [decide(n, base[n], run[n], k, floor) for n in both], only


def resolve(arg: str, storage: str) -> str:
    """A JSON path as given, or the saved run numbered `arg` (e.g. 0005) in any machine folder of storage."""
    if os.path.exists(arg):
        return arg
    hits = sorted(glob.glob(os.path.join(storage, "*", f"{arg}_*.json")))
    if len(hits) != 1:
        raise SystemExit(f"compare.py: {arg!r} is not a file, and names {len(hits)} saved runs under {storage}")
    return hits[0]


def load(path: str) -> dict[str, Stat]:
    with open(path) as f:
        return stats_of(json.load(f))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline")
    ap.add_argument("run")
    ap.add_argument("--k", type=float, default=K, help=f"margin in spreads (default {K:g})")
    ap.add_argument("--floor", type=float, default=FLOOR, help=f"smallest margin in percent (default {FLOOR:g})")
    ap.add_argument("--storage", default="bench/baselines", help="where run numbers are looked up")
    args = ap.parse_args(argv)
    base_path, run_path = resolve(args.baseline, args.storage), resolve(args.run, args.storage)
    base, run = load(base_path), load(run_path)
    verdicts, only = compare(base, run, args.k, args.floor)
    print(f"baseline {base_path}\nrun      {run_path}\n"
          f"margin = max({args.floor:g}%, {args.k:g} x max(spread baseline, spread run)); spread = IQR/median")
    print(f"{'':>10}  {'min':>8}  {'median':>8}  {'margin':>7}  {'spread b/r':>11}  {'run median':>13}  name")
    for v in verdicts:
        b, r = base[v.name], run[v.name]
        print(f"{v.status:>10}  {v.min_change:+7.1f}%  {v.median_change:+7.1f}%  {v.margin:6.1f}%  "
              f"{b.spread * 100:4.0f}%/{r.spread * 100:4.0f}%  {r.median * 1e3:10.3f} ms  {v.name}")
    for name in only:
        print(f"  only in {'run' if name in run else 'baseline'}: {name}")
    return 1 if any(v.status == "REGRESSION" for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
