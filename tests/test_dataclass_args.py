"""Kernel parameters annotated with a dataclass type (Quadrants' typed-dataclass arguments): members that
are ndarrays, scalars, vectors and nested dataclasses; passed on to funcs; gradients of ndarray members;
one instance for every argument of the same member types; clear errors for a wrong argument."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import qd

N = 6


@dataclasses.dataclass(frozen=True)
class Coef:
    w: qd.f32
    v: qd.types.vector(2, qd.f32)


@dataclasses.dataclass
class State:
    a: qd.types.NDArray[qd.f32, 1]
    b: qd.types.ndarray(dtype=qd.f32, ndim=1)
    out: qd.types.NDArray[qd.f32, 1]
    coef: Coef


@qd.func
def _term(s: State, i: qd.i32) -> qd.f32:
    return s.a[i] * s.b[i] * s.coef.w + s.coef.v[1]


@qd.kernel
def _compute(s: State, shift: qd.f32):
    for i in range(s.a.shape[0]):
        s.out[i] = _term(s, i) + shift


def _state(w: float, needs_grad: bool = False) -> State:
    a = qd.ndarray(qd.f32, N, needs_grad=needs_grad)
    b = qd.ndarray(qd.f32, N)
    out = qd.ndarray(qd.f32, N, needs_grad=needs_grad)
    a.from_numpy(np.linspace(0.5, 3.0, N).astype(np.float32))
    b.from_numpy(np.arange(1, N + 1, dtype=np.float32))
    return State(a, b, out, Coef(w, qd.Vector([0.0, 0.25])))


def test_members_nested_dataclass_and_func(arch: object) -> None:
    s = _state(2.0)
    _compute(s, 1.0)
    a, b = s.a.to_numpy(), s.b.to_numpy()
    np.testing.assert_allclose(s.out.to_numpy(), a * b * 2.0 + 0.25 + 1.0, rtol=1e-6)
    s2 = _state(-1.0)  # other ndarrays and scalars: the same instance
    _compute(s2, 0.0)
    np.testing.assert_allclose(s2.out.to_numpy(), -a * b + 0.25, rtol=1e-6)
    assert len(_compute._instances) == 1


def test_gradients_reach_ndarray_members(arch: object) -> None:
    s = _state(3.0, needs_grad=True)
    _compute(s, 0.0)
    s.out.grad.fill(1.0)
    _compute.grad(s, 0.0)
    np.testing.assert_allclose(s.a.grad.to_numpy(), s.b.to_numpy() * 3.0, rtol=1e-6)


def test_wrong_argument_and_unknown_member_are_clear_errors(arch: object) -> None:
    with pytest.raises(qd.QuadrantsRuntimeTypeError, match=r"Argument 's' .*required type State"):
        _compute(np.zeros(N, np.float32), 0.0)

    @qd.kernel
    def bad(s: State):
        for i in range(N):
            s.out[i] = s.missing[i]

    with pytest.raises(qd.QuadrantsCompilationError, match="dataclass State has no member 'missing'"):
        bad(_state(1.0))
