"""`qd.outer(a, b)`: Quadrants' deferred rank-1 update (`quadrants/lang/simt/_tile.py`, `outer` and
`_OuterProduct`), consumed by the augmented assignment of a struct whose type defines `_augassign(other, op)`
(Quadrants' register tiles do; Genesis writes `L_kk -= qd.outer(v, v)`). Anything else is an error, as in
Quadrants (1.3.3 refuses `matrix -= qd.outer(u, v)` and indexing the marker), with a message saying what to write.
"""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.lang.outer import OuterProduct


@qd.dataclass
class Rank1:
    """A stand-in for a register tile: a 3x3 matrix that takes `-=` / `+=` of `qd.outer(a, b)`."""

    m: qd.types.matrix(3, 3, qd.f32)

    @qd.func
    def _ger(self, a, b, sign: qd.template()):
        self.m += sign * a.outer_product(b)

    def _augassign(self, other, op):  # plain Python: runs at compile time, as a tile's does
        if not isinstance(other, OuterProduct) or op not in ("Sub", "Add"):
            raise TypeError(f"Rank1 takes only += / -= of qd.outer(a, b), got {op} with {type(other).__name__}")
        self._ger(other.a, other.b, -1.0 if op == "Sub" else 1.0)


@qd.func
def _update_in_func(t: qd.template(), v, w):
    t -= qd.outer(v, w)


@qd.kernel
def _rank1_updates(o: qd.types.ndarray(qd.f32, 3), u: qd.types.ndarray(qd.f32, 2), w: qd.types.ndarray(qd.f32, 2)):
    for n in range(o.shape[0]):
        t = Rank1(m=qd.Matrix.identity(qd.f32, 3))
        a = qd.Vector([u[n, 0], u[n, 1], u[n, 2]])
        b = qd.Vector([w[n, 0], w[n, 1], w[n, 2]])
        t -= qd.outer(a, b)
        t -= qd.outer(a, a)       # the symmetric form Genesis uses
        t += qd.outer(b, b)
        for i, j in qd.static(qd.ndrange(3, 3)):
            o[n, i, j] = t.m[i, j]


def _reference(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.stack([np.eye(3) - np.outer(a, b) - np.outer(a, a) + np.outer(b, b) for a, b in zip(u, w)])


def test_outer_updates_a_struct_that_takes_it(arch: qd.base.arch.Arch) -> None:
    rng = np.random.default_rng(3)
    u = rng.standard_normal((37, 3)).astype(np.float32)
    w = rng.standard_normal((37, 3)).astype(np.float32)
    o = np.zeros((37, 3, 3), np.float32)
    _rank1_updates(o, u, w)
    np.testing.assert_allclose(o, _reference(u, w), rtol=1e-5, atol=1e-5)


def test_outer_inside_a_func(arch: qd.base.arch.Arch) -> None:
    @qd.kernel
    def k(o: qd.types.ndarray(qd.f32, 2)):
        t = Rank1(m=qd.Matrix.zero(qd.f32, 3, 3))
        _update_in_func(t, qd.Vector([1.0, 2.0, 3.0]), qd.Vector([-1.0, 0.5, 4.0]))
        for i, j in qd.static(qd.ndrange(3, 3)):
            o[i, j] = t.m[i, j]

    o = np.zeros((3, 3), np.float32)
    k(o)
    np.testing.assert_array_equal(o, -np.outer([1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]).astype(np.float32))


def test_outer_keeps_its_operands() -> None:
    v = qd.Vector([1.0, 2.0])
    p = qd.outer(v, v)
    assert isinstance(p, OuterProduct) and p.a is v and p.b is v
    with pytest.raises(qd.QuadrantsTypeError, match="not a value"):
        p + p
    with pytest.raises(qd.QuadrantsTypeError, match="outer_product"):
        p[0, 0]


def test_outer_on_a_matrix_is_refused() -> None:
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(o: qd.types.ndarray(qd.f32, 2)):
        m = qd.Matrix.zero(qd.f32, 3, 3)
        m -= qd.outer(qd.Vector([1.0, 2.0, 3.0]), qd.Vector([1.0, 2.0, 3.0]))
        o[0, 0] = m[0, 0]

    with pytest.raises(qd.QuadrantsTypeError, match=r"test_outer\.py:\d+.*\n(.*\n)*.*3x3 matrix.*outer_product"):
        k(np.zeros((3, 3), np.float32))
    qd.reset()


def test_outer_as_a_value_is_refused() -> None:
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(o: qd.types.ndarray(qd.f32, 2)):
        m = qd.outer(qd.Vector([1.0, 2.0]), qd.Vector([3.0, 4.0]))
        o[0, 0] = m[0, 0]

    with pytest.raises(qd.QuadrantsTypeError, match="not a value"):
        k(np.zeros((2, 2), np.float32))
    qd.reset()


def test_a_struct_refusing_the_operator_says_so() -> None:
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(o: qd.types.ndarray(qd.f32, 2)):
        t = Rank1(m=qd.Matrix.zero(qd.f32, 3, 3))
        t *= qd.outer(qd.Vector([1.0, 2.0, 3.0]), qd.Vector([1.0, 2.0, 3.0]))
        o[0, 0] = t.m[0, 0]

    with pytest.raises(qd.QuadrantsCompilationError, match="Rank1 takes only"):
        k(np.zeros((3, 3), np.float32))
    qd.reset()
