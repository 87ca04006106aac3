"""`qd._sizer`: the host-side pieces of adstack sizing built so far (the parallel max reduction)."""

from __future__ import annotations

import numpy as np
import pytest

from qd import _sizer


@pytest.mark.parametrize("threads", [0, 1, 2])
def test_reduce_max_matches_numpy(threads: int) -> None:
    rng = np.random.default_rng(5)
    values = rng.integers(-(1 << 62), 1 << 62, 100_003, dtype=np.int64)
    assert _sizer.reduce_max_i64(values, np.iinfo(np.int64).min, threads) == values.max()


def test_reduce_max_of_nothing_is_the_initial_value() -> None:
    assert _sizer.reduce_max_i64(np.zeros(0, np.int64), 7) == 7
    assert _sizer.reduce_max_i64(np.array([3, -2], np.int64), 7) == 7


# ------------------------------------------------------------------ the guards bound whole walks

def _var(name: str):
    from qd.ad import sizing

    return sizing.SizeExpr("BoundVariable", var=name)


def _triangle(n: int) -> np.ndarray:
    """max over i < n, then over j < a[i], of a[j]: a nest whose inner bound follows the outer index."""
    from qd.ad import sizing

    inner = sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.SizeExpr("ExternalTensorRead", (_var("i"),)),
                                             sizing.SizeExpr("ExternalTensorRead", (_var("j"),))), var="j")
    e = sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.const(n), inner), var="i")
    return np.array(sizing.serialise(e), dtype=np.int64)


def test_the_serial_guard_counts_every_range_of_the_walk() -> None:
    a = np.arange(100, dtype=np.int32)
    code, args = _triangle(100), np.zeros(1, np.int64)
    walk = 100 + int(a.sum())  # the outer range, then a[i] iterations per i
    assert _sizer.eval_size(code, [a], args, walk) == 98
    with pytest.raises(RuntimeError, match=f"exceeds the {walk - 1} guard"):
        _sizer.eval_size(code, [a], args, walk - 1)
    # each range is below 2^24, the whole walk (2 * 10^8) is not: refused once the guard is spent
    with pytest.raises(RuntimeError, match="exceeds the 16777216 guard"):
        _sizer.eval_size(_triangle(20000), [np.arange(20000, dtype=np.int32)], args)


def _nested_spec(n: int, m: int, follows_i: bool) -> np.ndarray:
    """max over i < n of (a[i] + max over j < m of b[j] (+ i when `follows_i`)): a spec whose body holds
    a range with closed bounds."""
    from qd.ad import sizing

    body = sizing.SizeExpr("ExternalTensorRead", (_var("j"),), value=1)
    if follows_i:
        body = sizing.SizeExpr("Add", (body, _var("i")))
    inner = sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.const(m), body), var="j")
    outer = sizing.SizeExpr("Add", (sizing.SizeExpr("ExternalTensorRead", (_var("i"),)), inner))
    return np.array(sizing.serialise(sizing.SizeExpr("MaxOverRange", (sizing.const(0), sizing.const(n), outer),
                                                     var="i")), dtype=np.int64)


def test_parallel_spec_bounds_the_ranges_nested_in_its_body() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 50, 300).astype(np.int64), rng.integers(0, 50, 40).astype(np.int64)
    args = np.zeros(1, np.int64)
    code = _nested_spec(300, 40, True)
    want = int(np.max(a[:, None] + b[None, :] + np.arange(300)[:, None]))
    assert _sizer.eval_max_parallel(code, [a, b], args, 2) == want == _sizer.eval_size(code, [a, b], args)
    _sizer.check_spec_walk(code, [a, b], args)
    # 2^15 indices times a nested range of 2^14: 2^29 iterations, refused before any is walked
    big_a, big_b = np.zeros(1 << 15, np.int64), np.zeros(1 << 14, np.int64)
    big = _nested_spec(1 << 15, 1 << 14, True)
    for run in (lambda: _sizer.eval_max_parallel(big, [big_a, big_b], args, 2),
                lambda: _sizer.check_spec_walk(big, [big_a, big_b], args)):
        with pytest.raises(RuntimeError, match=f"exceeds the {_sizer.NESTED_GUARD} guard of nested walks"):
            run()


def test_recognizer_evaluates_a_self_contained_nested_range_first() -> None:
    from qd.ad import maxreducer

    a, b = np.arange(1 << 15, dtype=np.int64) % 97, np.arange(1 << 14, dtype=np.int64) % 89
    args = np.zeros(1, np.int64)
    words = list(_nested_spec(1 << 15, 1 << 14, False))
    first = maxreducer.recognize(words)
    assert len(first) == 1 and first[0].node != len(words) // 5 - 1  # the inner range, alone
    rounds = 0
    specs = first
    while specs:
        for sp in specs:
            value = _sizer.eval_max_parallel(np.array(sp.code, np.int64), [a, b], args, 2)
            maxreducer.substitute(words, sp.node, value)
        specs = maxreducer.recognize(words)
        rounds += 1
    assert rounds == 2 and _sizer.eval_size(np.array(words, np.int64), [a, b], args) == 96 + 88
