"""Compares a pytest-benchmark JSON run with a committed baseline; exits 1 on a regression.

    python bench/compare.py bench/baselines/interp-2core.json run.json [--margin 15]

A benchmark regresses when its median is more than `margin` percent above the baseline's median.
Numbers a benchmark measures itself and stores in `extra_info` under a key of `EXTRA` (W4's
`first_call_ms`, measured inside a fresh process) are compared the same way, as `NAME :: KEY`.
Benchmarks present on one side only are listed and ignored.
"""

from __future__ import annotations

import argparse
import json
import sys


EXTRA = ("first_call_ms",)  # extra_info numbers in ms, lower is better


def _medians(path: str) -> dict[str, float]:
    with open(path) as f:
        data = json.load(f)
    out = {}
    for b in data["benchmarks"]:
        out[b["fullname"]] = b["stats"]["median"]
        for key in EXTRA:
            if isinstance(b.get("extra_info", {}).get(key), (int, float)):
                out[f"{b['fullname']} :: {key}"] = b["extra_info"][key] / 1e3
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("baseline")
    ap.add_argument("run")
    ap.add_argument("--margin", type=float, default=15.0, help="allowed slowdown in percent (default 15)")
    args = ap.parse_args(argv)
    base, run = _medians(args.baseline), _medians(args.run)
    failed = False
    for name in sorted(base.keys() | run.keys()):
        if name not in base or name not in run:
            print(f"  only in {'run' if name in run else 'baseline'}: {name}")
            continue
        change = (run[name] / base[name] - 1.0) * 100.0
        bad = change > args.margin
        failed |= bad
        print(f"{'REGRESSION' if bad else 'ok':>10}  {change:+7.1f}%  {run[name] * 1e3:10.3f} ms  {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
