"""Integer min/max of negated values, on every tier. Found by issue 27's fuzz campaign on an H200 (seeds 1600014,
800086, 400082, 1600162): ptxas folds a `neg` into a three-way integer min/max (SASS `VIMNMX3`) and drops the
negation, so `atomic_max(acc, max(a[i], -a[i]))` stored max(acc, a, a) (0 for negative a) on CUDA and, through
NVIDIA's own compiler, on its OpenCL; `min(b, min(abs(a), -a))` gave min(b, a). The CUDA tier writes integer
negations as not/add in its PTX and the OpenCL C as `qd_neg_*` (a PTX not/add on NVIDIA)."""

from typing import Any

import numpy as np
import pytest

import qd
from qd.jit import nvptx

INTS = [(qd.i8, np.int8), (qd.i16, np.int16), (qd.i32, np.int32), (qd.i64, np.int64)]


def _values(npdt: Any, n: int = 77) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    lim = min(1000, np.iinfo(npdt).max)
    return rng.integers(-lim, lim, n).astype(npdt), rng.integers(-lim, lim, n).astype(npdt)


@pytest.mark.parametrize("dtype, npdt", INTS)
def test_elementwise_min_max_of_negations(arch: Any, dtype: Any, npdt: Any) -> None:
    A = qd.types.ndarray(dtype, 1)

    @qd.kernel
    def k(a: A, b: A, o: qd.types.ndarray(dtype, 2)):
        for i in range(a.shape[0]):
            o[i, 0] = qd.min(b[i], qd.min(qd.abs(a[i]), -a[i]))
            o[i, 1] = qd.min(-qd.min(b[i], b[i]), qd.min(-a[i], qd.abs(b[i])))
            o[i, 2] = qd.max(qd.max(a[i], -a[i]), b[i])
            o[i, 3] = qd.max(b[i], qd.max(-a[i], -b[i]))

    a, b = _values(npdt)
    o = np.zeros((a.size, 4), npdt)
    k(a, b, o)
    with np.errstate(over="ignore"):
        want = np.stack([np.minimum(b, np.minimum(np.abs(a), -a)), np.minimum(-b, np.minimum(-a, np.abs(b))),
                         np.maximum(np.abs(a), b), np.maximum(b, np.maximum(-a, -b))], axis=1)
    np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize("dtype, npdt", [(qd.i32, np.int32), (qd.i64, np.int64)])
def test_atomic_max_of_max_with_negation(arch: Any, dtype: Any, npdt: Any) -> None:
    """The shrunk fuzz kernel: a reduction whose identity (the type's minimum) meets max(a, -a)."""
    A = qd.types.ndarray(dtype, 1)

    @qd.kernel
    def k(a: A, acc: A):
        for i in range(a.shape[0]):
            qd.atomic_max(acc[0], qd.max(a[i], -a[i]))
            qd.atomic_min(acc[1], qd.min(-a[i], a[i]))

    @qd.kernel
    def data_dependent(a: A, j: A, acc: A):
        for i, _one in qd.ndrange(a.shape[0], 1):
            qd.atomic_max(acc[0], qd.max(a[i], -a[j[i]]))

    for n in (1, 5, 100):
        a = -np.arange(1, n + 1, dtype=npdt) * 7
        acc = np.zeros(2, npdt)
        k(a, acc)
        assert acc.tolist() == [7 * n, -7 * n]
        j = np.roll(np.arange(n, dtype=npdt), 1)
        acc = np.zeros(2, npdt)
        data_dependent(a, j, acc)
        assert acc[0] == np.maximum(a, -a[j]).max()


@pytest.mark.parametrize("dtype, npdt", [(qd.i16, np.int16), (qd.i32, np.int32), (qd.i64, np.int64)])
def test_max_of_negation_stays_signed(arch: Any, dtype: Any, npdt: Any) -> None:
    """max(a, -a) wraps at the minimum (the op table's) and stays a signed value: LLVM makes it PTX's `abs`, which
    ptxas takes to be non-negative, so the remainder of the minimum was unsigned (test_int_abs's class)."""
    A = qd.types.ndarray(dtype, 1)

    @qd.kernel
    def k(a: A, o: A, m: dtype):
        for i in range(a.shape[0]):
            o[i] = qd.max(a[i], -a[i]) % m

    lo = np.iinfo(npdt).min
    a = np.array([lo, lo + 1, -7, 0, 9], npdt)
    o = np.zeros_like(a)
    k(a, o, 5)
    with np.errstate(over="ignore"):
        assert o.tolist() == [int(v) % 5 for v in np.maximum(a, -a)]


@pytest.mark.skipif(nvptx.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed: the PTX is not "
                    "assembled")
def test_ptx_has_no_integer_neg():
    """The CUDA tier's PTX writes integer negations as not/add (what ptxas does not fold into VIMNMX3) and still
    assembles; a float negation stays `neg.f32`."""
    qd.init(arch=qd.interp, log_level="warn")
    try:
        @qd.kernel
        def k(a: qd.types.ndarray(qd.i32, 1), b: qd.types.ndarray(qd.i64, 1), c: qd.types.ndarray(qd.i16, 1),
              f: qd.types.ndarray(qd.f32, 1)):
            for i in range(a.shape[0]):
                a[i] = qd.max(a[i], -a[i])
                b[i] = qd.min(b[i], -b[i])
                c[i] = qd.max(c[i], -c[i])
                f[i] = -f[i]

        k(*(np.ones(2, t) for t in (np.int32, np.int64, np.int16, np.float32)))
        (ck, _), = k._instances.values()
        ptx = nvptx.compile_ptx(ck.ir, False).ptx
    finally:
        qd.reset()
    assert "neg.s" not in ptx and "abs.s" not in ptx  # LLVM's abs of max(a, -a) is a compare and select too
    assert "not.b32" in ptx and "not.b64" in ptx and "not.b16" in ptx
    assert "neg.f32" in ptx
    nvptx.ptxas(ptx)
