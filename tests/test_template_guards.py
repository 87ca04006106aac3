"""Members reached through a template argument (`self.x` of a `@qd.data_oriented` object, a list item)
and reassigned after the kernel compiled: the next launch uses the new object, never the old one (which
would be a silent wrong result), and swapping back reuses the first instance."""

from __future__ import annotations

import numpy as np

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
