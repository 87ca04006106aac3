"""Shared helpers of the benchmark suites (imported by bench/conftest.py and the test modules)."""

from __future__ import annotations

import os

import pytest

import qd

_results: dict[str, dict[str, float]] = {}
_order: list[str] = []


def record(workload: str, impl: str, ms: float) -> None:
    if workload not in _results:
        _results[workload] = {}
        _order.append(workload)
    _results[workload][impl] = ms


def ensure_native(kernel, benchmark=None) -> str:
    """The tier of `kernel`'s last launch; skips when it is not the native one (and QD_JIT is unset)."""
    tier = kernel.stats["last_tier"]
    if benchmark is not None:
        benchmark.extra_info["tier"] = tier
        if kernel.stats.get("compile_ms") is not None:
            benchmark.extra_info["compile_ms"] = kernel.stats["compile_ms"]
    if tier != "cpu" and not os.environ.get("QD_JIT"):
        pytest.skip(f"the native CPU tier did not run this kernel (last tier: {tier}); "
                    "set QD_JIT=interp to time the interpreter under these names on purpose")
    return tier


def saxpy_kernel():
    """W1, defined afresh on each call (the compile benchmark times its whole path)."""
    @qd.kernel
    def saxpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    return saxpy
