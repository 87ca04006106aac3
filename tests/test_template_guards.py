"""Members reached through a template argument (`self.x` of a `@qd.data_oriented` object, a list item)
and reassigned after the kernel compiled: the next launch uses the new object, never the old one (which
would be a silent wrong result), and swapping back reuses the first instance."""

from __future__ import annotations

import numpy as np
import pytest

import qd

N = 5


@qd.data_oriented
class Holder:
    def __init__(self, x, inner=None):
        self.x = x
        self.inner = inner
        self.scale = 3

    @qd.kernel
    def fill(self):
        for i in range(N):
            self.x[i] = (i + 1) * self.scale


class Inner:
    def __init__(self, y):
        self.items = [y]


def test_reassigned_ndarray_member_same_and_other_dtype(arch: object) -> None:
    a, b = qd.ndarray(qd.i32, N), qd.ndarray(qd.i32, N)
    h = Holder(a)
    h.fill()
    h.x = b
    h.fill()
    want = np.arange(1, N + 1) * 3
    np.testing.assert_array_equal(a.to_numpy(), want)
    np.testing.assert_array_equal(b.to_numpy(), want)
    c = qd.ndarray(qd.f32, N)
    h.x = c
    h.fill()
    np.testing.assert_array_equal(c.to_numpy(), want.astype(np.float32))
    a.fill(0)
    h.x = a  # back to the first array: its instance again
    h.fill()
    np.testing.assert_array_equal(a.to_numpy(), want)
    assert len(Holder.fill._instances) == 3


def test_reassigned_field_and_nested_list_item(arch: object) -> None:
    f, g = qd.field(qd.f32, N), qd.field(qd.f32, N)
    y1, y2 = qd.ndarray(qd.f32, N), qd.ndarray(qd.f32, N)
    h = Holder(f, Inner(y1))

    @qd.kernel
    def copy(o: qd.template()):
        for i in range(N):
            o.inner.items[0][i] = o.x[i] * 2.0

    f.from_numpy(np.arange(N, dtype=np.float32))
    g.from_numpy(np.arange(N, dtype=np.float32) + 10)
    copy(h)
    np.testing.assert_array_equal(y1.to_numpy(), np.arange(N) * 2.0)
    h.x = g
    h.inner.items[0] = y2
    copy(h)
    np.testing.assert_array_equal(y2.to_numpy(), (np.arange(N) + 10) * 2.0)
    np.testing.assert_array_equal(y1.to_numpy(), np.arange(N) * 2.0)


@qd.data_oriented(template_primitives=False)
class Lifted:
    def __init__(self):
        self.n = 3
        self.gain = 2.0
        self.on = True
        self.params = Inner(None)
        self.params.offset = 1
        self.x = qd.field(qd.f64, N, needs_grad=True)
        self.loss = qd.field(qd.f64, (), needs_grad=True)

    @qd.func
    def term(self, i):
        return self.x[i] * self.gain + self.params.offset

    @qd.kernel
    def run(self):
        for i in range(self.n):
            if self.on:
                self.loss[None] += self.term(i) ** 2


def test_lifted_primitives_are_read_at_every_launch_and_differentiate(arch: object) -> None:
    """`template_primitives=False`: members read through the object (nested ones, in funcs) are runtime
    args: changing them takes effect without a new instance, also in the reverse-mode instance."""
    s = Lifted()
    xs = np.linspace(0.5, 2.5, N)
    s.x.from_numpy(xs)

    def expect(n, gain, off, on=True):
        t = xs[:n] * gain + off
        return (np.sum(t ** 2) if on else 0.0), np.concatenate([2 * t * gain, np.zeros(N - n)]) * on

    for n, gain, off, on in ((3, 2.0, 1, True), (5, -1.5, 4, True), (2, 0.5, 0, False)):
        s.n, s.gain, s.params.offset, s.on = n, gain, off, on
        s.loss[None] = 0.0
        s.x.grad.fill(0.0)
        s.run()
        s.loss.grad[None] = 1.0
        s.run.grad()
        want_loss, want_grad = expect(n, gain, off, on)
        np.testing.assert_allclose(s.loss[None], want_loss, rtol=1e-12)
        np.testing.assert_allclose(s.x.grad.to_numpy(), want_grad, rtol=1e-12)
    assert len(Lifted.run._instances) == 2  # primal and reverse, each compiled once


def test_lifted_primitive_errors(arch: object) -> None:
    s = Lifted()
    s.run()
    s.n = 2.5  # an int argument now given a float
    with pytest.raises(TypeError, match="would truncate"):
        s.run()

    @qd.kernel
    def static_use(o: qd.template()):
        for i in range(qd.static(o.n)):
            o.x[i] = 1.0

    s.n = 2
    with pytest.raises(qd.QuadrantsCompilationError, match="runtime kernel argument"):
        static_use(s)
