"""pytest plugin for running Quadrants' tests against qd (loaded by run.sh with `-p qd_compat_plugin`).

- `req_arch` / `req_options`: parameters added by `tests.test_utils.test`; tests without that decorator
  get `(None, None)`. The autouse fixture `_qd_program` calls `qd.init(req_arch, enable_fallback=False,
  print_full_traceback=True, log_level="warn", **req_options)` before such a test and `qd.reset()` after.
- At the end prints pass / fail / error / skip / xfail counts per test file; with `QD_COMPAT_JSON=path`
  also writes them (and every failing node id) as JSON.
"""

from __future__ import annotations

import gc
import json
import os
import signal
from collections import defaultdict
from typing import Any, Iterator

import pytest

import qd

_counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
_failed: dict[str, list[str]] = defaultdict(list)


def pytest_configure(config: pytest.Config) -> None:
    for mark in ("run_in_serial", "needs_torch", "sm70", "skip_in_ci"):
        config.addinivalue_line("markers", f"{mark}: a Quadrants test marker (no effect under qd)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not getattr(metafunc.function, "__qd_test__", False):
        metafunc.parametrize("req_arch,req_options", [(None, None)], ids=["none"])


@pytest.fixture(autouse=True)
def _qd_program(req_arch: Any, req_options: Any) -> Iterator[None]:
    if req_arch is not None:
        opts = {"print_full_traceback": True, "log_level": "warn", **(req_options or {})}
        qd.init(arch=req_arch, enable_fallback=False, **opts)
    yield
    if req_arch is not None:
        qd.reset()
    gc.collect()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A per-test time limit (`QD_COMPAT_TIMEOUT` seconds, default 120) so one hang cannot stall a run."""
    limit = int(os.environ.get("QD_COMPAT_TIMEOUT", "120"))

    def _alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"qd compat: test exceeded {limit}s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _file_of(nodeid: str) -> str:
    return os.path.basename(nodeid.split("::", 1)[0])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    f = _file_of(report.nodeid)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            outcome = "xfail" if report.skipped else "xpass"
        elif report.when == "setup" and report.failed:
            outcome = "error"
        else:
            outcome = report.outcome
        _counts[f][outcome] += 1
        if outcome in ("failed", "error"):
            _failed[f].append(report.nodeid)
    elif report.when == "teardown" and report.failed:
        _counts[f]["error"] += 1
        _failed[f].append(report.nodeid + " (teardown)")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        f = _file_of(report.nodeid)
        _counts[f]["collect_error"] += 1
        _failed[f].append(report.nodeid + " (collection)")


_COLS = ("passed", "failed", "error", "skipped", "xfail", "collect_error")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    tr = terminalreporter
    tr.section("qd compat: per-file counts")
    tr.write_line(f"{'file':40s} " + " ".join(f"{c[:7]:>7s}" for c in _COLS) + "   rate")
    total: dict[str, int] = defaultdict(int)
    for f in sorted(_counts):
        c = _counts[f]
        for k in _COLS:
            total[k] += c.get(k, 0)
        tr.write_line(f"{f:40s} " + " ".join(f"{c.get(k, 0):7d}" for k in _COLS) + f"  {_rate(c)}")
    tr.write_line(f"{'TOTAL':40s} " + " ".join(f"{total.get(k, 0):7d}" for k in _COLS) + f"  {_rate(total)}")
    out = os.environ.get("QD_COMPAT_JSON")
    if out:
        with open(out, "w") as fh:
            json.dump({"counts": {f: dict(c) for f, c in _counts.items()}, "failed": _failed}, fh, indent=1)


def _rate(c: dict[str, int]) -> str:
    ran = sum(c.get(k, 0) for k in ("passed", "failed", "error", "collect_error"))
    return f"{100.0 * c.get('passed', 0) / ran:5.1f}%" if ran else "   n/a"
