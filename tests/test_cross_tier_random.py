"""Random expression kernels (hypothesis) must give the same results on the interpreter and on native
code: bit for bit for integer ops and for `+ - * /`, `sqrt`, min/max, floor and casts under
`fast_math=False` (DESIGN §4)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import tempfile

import numpy as np
import pytest

import qd
from qd.base import arch as _arch

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed")
st = hypothesis.strategies

N = 64
_counter = itertools.count()
_FLOAT_BIN = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} / {1})", "qd.min({0}, {1})",
              "qd.max({0}, {1})"]
_FLOAT_UN = ["qd.sqrt(abs({0}))", "(-{0})", "qd.floor({0})", "abs({0})",
             "qd.f32(qd.i32(qd.max(qd.min({0}, 1e6), -1e6) * 0.25))"]  # in range: casts are defined
_INT_BIN = ["({0} + {1})", "({0} - {1})", "({0} * {1})", "({0} // {1})", "({0} % {1})", "({0} & {1})",
            "({0} | {1})", "({0} ^ {1})", "({0} << ({1} & 7))", "({0} >> ({1} & 7))", "qd.min({0}, {1})",
            "qd.max({0}, {1})"]
_INT_UN = ["(-{0})", "(~{0})", "abs({0})", "qd.i32(qd.f32({0}) * 0.5)"]


def _expr(leaves: list[str], binary: list[str], unary: list[str]) -> st.SearchStrategy:
    leaf = st.sampled_from(leaves)
    return st.recursive(
        leaf,
        lambda sub: st.one_of(
            st.tuples(st.sampled_from(binary), sub, sub).map(lambda t: t[0].format(t[1], t[2])),
            st.tuples(st.sampled_from(unary), sub).map(lambda t: t[0].format(t[1]))),
        max_leaves=8)


def _load(expr: str, dtype: str) -> object:
    """A module holding `kernel(a, b, out)` computing `out[i] = <expr>` (the frontend needs a file)."""
    src = (f"import qd\n\n@qd.kernel\ndef kernel(a: qd.types.ndarray(qd.{dtype}, 1), "
           f"b: qd.types.ndarray(qd.{dtype}, 1), out: qd.types.ndarray(qd.{dtype}, 1)):\n"
           f"    for i in range(out.shape[0]):\n"
           f"        x = a[i]\n        y = b[i]\n        out[i] = {expr}\n")
    path = os.path.join(tempfile.mkdtemp(prefix="qd_xtier_"), f"k{next(_counter)}.py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(arch: object, expr: str, dtype: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    qd.init(arch=arch, jit="eager", fast_math=False, offline_cache=False, log_level="warn")
    try:
        out = np.zeros(N, a.dtype)
        _load(expr, dtype).kernel(a, b, out)
        return out
    finally:
        qd.reset()


def _compare(expr: str, dtype: str, a: np.ndarray, b: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        want = _run(_arch.interp, expr, dtype, a, b)
        got = _run(_arch.cpu, expr, dtype, a, b)
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"),
                                  err_msg=f"out = {expr}")


_SETTINGS = hypothesis.settings(max_examples=25, deadline=None, derandomize=True,
                                suppress_health_check=list(hypothesis.HealthCheck))


@_SETTINGS
@hypothesis.given(expr=_expr(["x", "y", "1.5", "0.1"], _FLOAT_BIN, _FLOAT_UN), seed=st.integers(0, 2**31))
def test_random_float_expressions_agree(expr: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(N) * 10).astype(np.float32)
    b = (rng.standard_normal(N) * 10).astype(np.float32)
    b[:4] = [0.0, -0.0, 1.0, -1.0]
    _compare(expr, "f32", a, b)


@_SETTINGS
@hypothesis.given(expr=_expr(["x", "y", "3", "-7"], _INT_BIN, _INT_UN), seed=st.integers(0, 2**31))
def test_random_int_expressions_agree(expr: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(np.int32)
    a = rng.integers(info.min, info.max, N, dtype=np.int32)
    b = rng.integers(-50, 50, N, dtype=np.int32)
    a[:3] = [info.min, info.max, 0]
    b[:3] = [-1, 0, 1]
    _compare(expr, "i32", a, b)
