"""Per-item comparison of Quadrants' tests run on real Quadrants (yardstick.sh) and on qd (run.sh).

    python tools/quadrants_compat/compare.py QUADRANTS.xml cpu=QD_CPU.xml interp=QD_INTERP.xml [--json OUT]

Each argument is a pytest JUnit XML file (`-- --junitxml=PATH` to either script). Items are matched by
file, test name and parameters with the arch parameter removed (`[arch=x64]` there, `[arch=cpu]` here).
Prints, per file: the items that pass on Quadrants, and per qd tier how many of those pass on qd; then
the items that pass on qd but not on Quadrants, and a headline ratio per tier. `--fails` lists the
Quadrants-passing items that do not pass on qd.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict

_ARCH = re.compile(r"arch=[A-Za-z0-9_]+(-\d+)?")


def _key(case: ET.Element) -> tuple[str, str]:
    cls = case.get("classname", "")
    parts = cls.split(".")
    k = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    file = parts[k] + ".py"
    name = ".".join(parts[k + 1:] + [case.get("name", "")])
    name = _ARCH.sub("", name).replace("[-", "[").replace("-]", "]").replace("--", "-")
    return file, name.replace("[]", "").replace("[none]", "")


def _outcome(case: ET.Element) -> str:
    for child in case:
        if child.tag in ("failure", "error"):
            return "failed"
        if child.tag == "skipped":
            return "xfail" if "xfail" in (child.get("type", "") + child.get("message", "")) else "skipped"
    return "passed"


def load(path: str) -> dict[tuple[str, str], str]:
    """(file, normalized name) -> outcome; duplicates of one key get '#2', '#3' suffixes in run order."""
    out: dict[tuple[str, str], str] = {}
    seen: Counter = Counter()
    for case in ET.parse(path).getroot().iter("testcase"):
        k = _key(case)
        seen[k] += 1
        if seen[k] > 1:
            k = (k[0], f"{k[1]}#{seen[k]}")
        o = _outcome(case)
        if k in out and out[k] == "failed":  # a teardown error adds a second testcase element
            continue
        out[k] = o
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("quadrants")
    ap.add_argument("tiers", nargs="+", help="NAME=PATH of a qd run")
    ap.add_argument("--json")
    ap.add_argument("--fails", action="store_true")
    a = ap.parse_args(argv)
    q = load(a.quadrants)
    tiers = {t.split("=", 1)[0]: load(t.split("=", 1)[1]) for t in a.tiers}
    files = sorted({f for f, _ in q} | {f for r in tiers.values() for f, _ in r})
    per: dict[str, dict] = {}
    tot: dict[str, Counter] = defaultdict(Counter)
    head = f"{'file':44s} {'Q pass':>6s} " + " ".join(f"{t + ' of Q':>10s} {t + ' +':>7s}" for t in tiers)
    print(head)
    for f in files:
        qp = {k for k, o in q.items() if k[0] == f and o == "passed"}
        row = {"quadrants_passed": len(qp)}
        cells = []
        for t, r in tiers.items():
            ok = sum(1 for k in qp if r.get(k) == "passed")
            extra = sum(1 for k, o in r.items() if k[0] == f and o == "passed" and q.get(k) != "passed")
            row[t] = {"passed_of_quadrants": ok, "passed_beyond": extra}
            tot[t]["ok"] += ok
            tot[t]["extra"] += extra
            cells.append(f"{ok:10d} {extra:7d}")
        tot["Q"]["passed"] += len(qp)
        per[f] = row
        print(f"{f:44s} {len(qp):6d} " + " ".join(cells))
    n = tot["Q"]["passed"]
    print(f"{'TOTAL':44s} {n:6d} " + " ".join(f"{tot[t]['ok']:10d} {tot[t]['extra']:7d}" for t in tiers))
    for t in tiers:
        print(f"{t}: {tot[t]['ok']} of the {n} items that pass on Quadrants pass on qd "
              f"({100.0 * tot[t]['ok'] / max(n, 1):.1f}%), and {tot[t]['extra']} more pass on qd only")
    if a.fails:
        for t, r in tiers.items():
            for k in sorted(k for k, o in q.items() if o == "passed" and r.get(k) != "passed"):
                print(f"  {t}: {k[0]}::{k[1]} -> {r.get(k, 'absent')}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"files": per, "totals": {t: dict(c) for t, c in tot.items()}}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
