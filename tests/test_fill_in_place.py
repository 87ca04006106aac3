"""`elem.fill(v)` on a field/ndarray element fills the element in place (Quadrants' `fill` takes its matrix as a
template and assigns into it), however the field is reached. Genesis' mass matrix drifted on qd (issue 29): its
`func_COM_root_sum` zeroes an accumulator with `dyn_state.links.root_COM_bw[i_l_root, i_b].fill(0.0)`, a member of a
dataclass argument, which qd filled in a copy and dropped, so every step added to the last step's sum and the center
of mass ran away (the box's inertia about it lost float32 digits). Each form below accumulates after the fill, on every
tier, against numpy."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import qd

V3 = qd.types.vector(3, qd.f32)
STEP = np.array([1.0, 2.0, 3.0], np.float32)


@dataclasses.dataclass
class _Links:
    acc: qd.types.ndarray(V3, 2)


@dataclasses.dataclass
class _State:
    links: _Links


def test_fill_of_a_dataclass_member_element(arch: Any) -> None:
    """Genesis' shape: a nested dataclass argument's ndarray member, element `[i, b]`, filled then accumulated."""

    @qd.kernel
    def step(s: _State, add: qd.types.ndarray(qd.f32, 1)):
        for i, b in qd.ndrange(s.links.acc.shape[0], s.links.acc.shape[1]):
            s.links.acc[i, b].fill(0.0)
            for k in range(add.shape[0]):
                s.links.acc[i, b] = s.links.acc[i, b] + add[k] * qd.Vector([1.0, 2.0, 3.0])

    acc = qd.ndarray(V3, shape=(3, 2))
    add = np.array([0.5, 1.5], np.float32)
    s = _State(_Links(acc))
    for _ in range(3):
        step(s, add)
    np.testing.assert_array_equal(acc.to_numpy(), np.broadcast_to(2.0 * STEP, (3, 2, 3)))


def test_fill_of_a_member_reached_through_a_template_and_self(arch: Any) -> None:
    """Fields reached as attributes: a `qd.template()` struct of fields, and `self.x` of a data-oriented class."""

    @qd.data_oriented
    class Sim:
        def __init__(self) -> None:
            self.v = qd.Vector.field(3, qd.f32, shape=4)
            self.m = qd.Matrix.field(2, 2, qd.f32, shape=4)

        @qd.kernel
        def step(self):
            for i in range(4):
                self.v[i].fill(0.0)
                self.v[i] += qd.Vector([1.0, 2.0, 3.0])
                self.m[i].fill(float(i))
                self.m[i][0, 1] += 1.0

    class Holder:
        def __init__(self, sim: Sim) -> None:
            self.inner = sim

    @qd.kernel
    def step_t(h: qd.template()):
        for i in range(4):
            h.inner.v[i].fill(-1.0)
            h.inner.v[i][2] += 0.5

    sim = Sim()
    for _ in range(3):
        sim.step()
    np.testing.assert_array_equal(sim.v.to_numpy(), np.broadcast_to(STEP, (4, 3)))
    want_m = np.arange(4, dtype=np.float32)[:, None, None] * np.ones((4, 2, 2), np.float32)
    want_m[:, 0, 1] += 1.0
    np.testing.assert_array_equal(sim.m.to_numpy(), want_m)
    for _ in range(2):
        step_t(Holder(sim))
    np.testing.assert_array_equal(sim.v.to_numpy(), np.broadcast_to([-1.0, -1.0, -0.5], (4, 3)))


def test_fill_of_a_func_parameter_element(arch: Any) -> None:
    """A @qd.func's template (field) and ndarray parameters: `f[i].fill(v)` fills the caller's element."""
    v = qd.Vector.field(3, qd.f32, shape=2)

    @qd.func
    def zero(f: qd.template(), nd: qd.types.ndarray(), i: int):
        f[i].fill(0.0)
        nd[i].fill(0.0)

    @qd.kernel
    def k(nd: qd.types.ndarray(V3, 1)):
        for i in range(2):
            zero(v, nd, i)
            v[i] += qd.Vector([1.0, 2.0, 3.0])
            nd[i] += qd.Vector([1.0, 2.0, 3.0])

    nd = np.zeros((2, 3), np.float32)
    for _ in range(3):
        k(nd)
    np.testing.assert_array_equal(v.to_numpy(), np.broadcast_to(STEP, (2, 3)))
    np.testing.assert_array_equal(nd, np.broadcast_to(STEP, (2, 3)))


def test_fill_of_a_local_row_stays_a_value(arch: Any) -> None:
    """A local matrix's `m[i]` (a row value, qd's reading) is not an assignable element: `fill` on it changes nothing,
    as before; a local vector's `fill` fills it."""

    @qd.kernel
    def k(o: qd.types.ndarray(qd.f32, 1)):
        for _ in range(1):
            v = qd.Vector([1.0, 2.0, 3.0])
            v.fill(4.0)
            o[0] = v[0] + v[1] + v[2]

    o = np.zeros(1, np.float32)
    k(o)
    assert o[0] == 12.0
