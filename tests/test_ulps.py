"""Every tier's float functions stay within the op table's ulps for that tier (`qd/ops.py`, `OpInfo.ulps`,
measured by `bench/ulps.py` over 2^20 inputs; GPU.md §4). Here 4096 inputs per op and dtype, drawn the way
`bench/ulps.py` draws them (the full count: `python bench/ulps.py ARCH`)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import tier_key
from qd.ops import INFO, Op

_spec = importlib.util.spec_from_file_location(
    "qd_bench_ulps", os.path.join(os.path.dirname(__file__), os.pardir, "bench", "ulps.py"))
ulps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ulps)

OPS = {"sin": Op.SIN, "cos": Op.COS, "tan": Op.TAN, "asin": Op.ASIN, "acos": Op.ACOS, "tanh": Op.TANH,
       "exp": Op.EXP, "log": Op.LOG, "sqrt": Op.SQRT, "rsqrt": Op.RSQRT, "div": Op.DIV, "pow": Op.POW,
       "atan2": Op.ATAN2}
N = 4096


def test_every_measured_op_has_a_bound_per_tier() -> None:
    assert set(OPS) == set(ulps.CASES)
    for op in OPS.values():
        assert set(INFO[op].ulps) == {"interp", "cpu", "vulkan", "cuda", "opencl"}, op


@pytest.mark.parametrize("fast_math", [False, True])
@pytest.mark.parametrize("name", sorted(OPS))
def test_within_the_op_tables_ulps(arch, name: str, fast_math: bool) -> None:
    import qd

    qd.cfg.fast_math = fast_math
    tier = tier_key(arch)
    bound = INFO[OPS[name]].ulps[tier]
    for dt in ulps.DTYPES:
        worst = ulps.measure(name, dt, N)
        # 0 in the table: correctly rounded (at most half an ulp from the exact value)
        assert worst <= max(bound, 0.5), f"{name} {dt} on {arch.name}: {worst} ulps, the op table says {bound}"
