"""Benchmark fixtures: every benchmark runs on a fresh qd program of the tier under test.

`cpu_program` is `qd.cpu` with `jit="eager"` and an empty offline cache of its own, so the first launch
of a benchmark compiles for real and later launches time machine code only. `ensure_native(kernel)`
skips a benchmark whose last launch did not run on the native tier (with the reason), unless `QD_JIT`
asks for another tier on purpose (then the benchmark runs and `extra_info["tier"]` says which ran).

Each benchmark may call `record(workload, impl, ms)`; the run ends with one table of those numbers,
qd and its peers side by side (pytest-benchmark's own table groups them too, by `benchmark.group`).
"""

from __future__ import annotations

import os

import pytest

import qd

from _bench import _order, _results, ensure_native, record  # noqa: F401  (re-exported)


@pytest.fixture
def interp_program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()


@pytest.fixture
def cpu_program(tmp_path):
    reason = qd.cpu.unavailable_reason()
    if reason:
        pytest.skip(f"qd.cpu: {reason}")
    jit = {} if os.environ.get("QD_JIT") else {"jit": "eager"}  # QD_JIT picks the tier on purpose
    qd.init(arch=qd.cpu, offline_cache_file_path=str(tmp_path / "qd-cache"), log_level="warn", **jit)
    yield
    qd.reset()


def pytest_terminal_summary(terminalreporter):
    if not _results:
        return
    impls: list[str] = []
    for w in _order:
        for i in _results[w]:
            if i not in impls:
                impls.append(i)
    tr = terminalreporter
    tr.write_sep("-", "qd and peers (median ms; launch overhead in us)")
    width = max(len(w) for w in _order)
    tr.write_line(f"{'workload':<{width}}  " + "  ".join(f"{i:>14}" for i in impls))
    for w in _order:
        unit = 1e3 if "launch" in w else 1.0
        cells = [f"{_results[w][i] * unit:14.3f}" if i in _results[w] else f"{'-':>14}" for i in impls]
        tr.write_line(f"{w:<{width}}  " + "  ".join(cells))
