"""Struct types (`qd.types.struct`, `@qd.dataclass`, `qd.Struct`): struct locals, funcs, kernel arguments
and returns, struct fields on the host and in kernels, a gradient through a struct field member; checked
against numpy and closed forms."""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsRuntimeTypeError, QuadrantsSyntaxError, QuadrantsTypeError

vec3 = qd.types.vector(3, qd.f32)
Line = qd.types.struct(dir=vec3, length=qd.f32)
Item = qd.types.struct(line=Line, idx=qd.i32)


def test_struct_locals(arch):
    @qd.kernel
    def k() -> qd.f32:
        p = Line(dir=qd.Vector([1.0, 2.0, 3.0]), length=2.0)
        q = Line()  # zero-initialised
        q = p  # a copy
        q.length += 1.0
        q.dir[0] = 10.0
        r = Item(p, 7)  # positional
        r.line.length *= 3.0
        return p.length + p.dir[0] + q.length * 100 + q.dir[0] * 1000 + r.line.length * 1e4 + r.idx * 1e5

    assert k() == pytest.approx(2 + 1 + 300 + 10000 + 60000 + 700000)


def test_struct_positional_and_cast(arch):
    S = qd.types.struct(a=qd.i32, b=qd.types.vector(2, qd.i32))

    @qd.kernel
    def k() -> qd.i32:
        s = S(2.5, (2.5, 3.5))
        t = S(4)  # positional: a = 4, b = 0
        return s.a + s.b[0] + s.b[1] + t.a * 10 + t.b[1] * 100

    assert k() == 2 + 2 + 3 + 40


def test_dataclass_methods_and_funcs(arch):
    @qd.dataclass
    class Sphere:
        center: vec3
        radius: qd.f32

        @qd.func
        def area(self):
            return 4.0 * np.pi * self.radius * self.radius

        @qd.func
        def grow(self, d):
            self.radius += d

        def volume(self):
            return 4.0 / 3.0 * np.pi * self.radius ** 3

    @qd.func
    def shifted(s: Sphere, d: qd.f32) -> Sphere:
        s.center += d  # s is a copy
        return s

    @qd.kernel
    def k() -> qd.types.vector(3, qd.f32):
        s = Sphere(center=qd.Vector([1.0, 0.0, 0.0]), radius=2.0)
        t = shifted(s, 5.0)
        s.grow(1.0)
        return qd.Vector([s.area(), t.center[0] + s.center[0], t.radius])

    got = k().to_numpy()
    np.testing.assert_allclose(got, [4 * np.pi * 9, 7.0, 2.0], rtol=1e-6)
    assert Sphere(radius=3.0).volume() == pytest.approx(4 / 3 * np.pi * 27)
    assert Sphere(radius=3.0).center.to_numpy().tolist() == [0, 0, 0]


def test_struct_args_and_returns(arch):
    mat = qd.types.matrix(2, 2, qd.f32)
    Inner = qd.types.struct(m=mat, w=qd.f32)
    Outer = qd.types.struct(n=qd.i32, inner=Inner)

    @qd.kernel
    def k(s: Outer, x: qd.f32) -> Outer:
        return Outer(n=s.n + 1, inner=Inner(m=s.inner.m @ s.inner.m, w=s.inner.w * x))

    m = np.array([[1.0, 2.0], [3.0, 4.0]])
    r = k(Outer(n=3, inner=Inner(m=mat(1, 2, 3, 4), w=1.5)), 2.0)
    assert r.n == 4 and r.inner.w == pytest.approx(3.0)
    np.testing.assert_allclose(r.inner.m.to_numpy(), m @ m)
    r2 = k({"n": 1, "inner": {"m": m, "w": 2.0}}, 3.0)  # a dict argument
    assert r2.n == 2 and r2.inner.w == pytest.approx(6.0)
    Other = qd.types.struct(n=qd.i32, inner=qd.types.struct(m=qd.types.vector(2, qd.f32), w=qd.f32))
    with pytest.raises(QuadrantsRuntimeTypeError):
        k(Other(n=1), 1.0)


def test_struct_field_host(arch):
    f = qd.Struct.field({"a": qd.f32, "b": vec3, "c": qd.i32}, shape=(4, 3))
    assert f.shape == (4, 3)
    f[1, 2].a = 1.5
    f[1, 2].b = [1, 2, 3]
    f[0, 0] = {"a": 2.0, "b": [4, 5, 6], "c": 7}
    d = f.to_numpy()
    assert d["a"][1, 2] == 1.5 and d["a"][0, 0] == 2.0 and d["c"][0, 0] == 7
    np.testing.assert_allclose(d["b"][1, 2], [1, 2, 3])
    assert d["b"].shape == (4, 3, 3)
    f.fill(3)
    assert (f.to_numpy()["b"] == 3).all() and (f.a.to_numpy() == 3).all()
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    f.from_numpy({"a": a, "b": np.ones((4, 3, 3), np.float32), "c": np.zeros((4, 3), np.int32)})
    assert f[2, 1].a == 7.0 and f[2, 1].c == 0
    with pytest.raises(AttributeError):
        f[0, 0].nope = 1


def test_struct_field_kernel(arch):
    x = Item.field(shape=(8,))
    y = Line.field()
    qd.root.dense(qd.i, 8).place(y)

    @qd.kernel
    def init():
        for i in y:
            y[i] = Line(dir=qd.Vector([1.0, 2.0, i]), length=i + 0.5)

    @qd.kernel
    def run():
        for i in x:
            x[i].idx = i
            x[i].line = y[i]
            x[i].line.length += 1.0
            x[i].line.dir[2] *= 2.0
            e = x[i]  # a copy of the element
            e.idx = 100

    init()
    run()
    d = x.to_numpy()
    np.testing.assert_array_equal(d["idx"], np.arange(8))
    np.testing.assert_allclose(d["line"]["length"], np.arange(8) + 1.5)
    np.testing.assert_allclose(d["line"]["dir"][:, 2], 2.0 * np.arange(8))
    assert x[3].line.length == pytest.approx(4.5)


def test_struct_errors(arch):
    with pytest.raises(QuadrantsTypeError):
        qd.types.struct(a="f32")
    with pytest.raises(QuadrantsSyntaxError, match="Default value"):
        @qd.dataclass
        class Foo:
            a: int
            b: float = 3.14

    @qd.kernel
    def bad() -> qd.f32:
        s = Line(width=1.0)
        return s.length

    with pytest.raises(QuadrantsSyntaxError, match="no member 'width'"):
        bad()

    @qd.kernel
    def bad_read() -> qd.f32:
        s = Line()
        return s.width

    with pytest.raises(QuadrantsSyntaxError, match="no member 'width'"):
        bad_read()


def test_struct_field_gradient(arch):
    n = 6
    f = qd.types.struct(a=qd.f32, v=vec3, k=qd.i32).field(shape=(n,), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def compute():
        for i in f:
            loss[None] += f[i].a ** 2 * f[i].v[1] + f[i].k

    a = np.linspace(0.5, 2.0, n).astype(np.float32)
    v = np.stack([np.ones(n), np.arange(n) + 1.0, np.zeros(n)], 1).astype(np.float32)
    f.from_numpy({"a": a, "v": v, "k": np.arange(n, dtype=np.int32)})
    with qd.ad.Tape(loss=loss):
        compute()
    assert loss[None] == pytest.approx(float((a ** 2 * v[:, 1]).sum() + np.arange(n).sum()), rel=1e-5)
    np.testing.assert_allclose(f.a.grad.to_numpy(), 2 * a * v[:, 1], rtol=1e-5)
    np.testing.assert_allclose(f.v.grad.to_numpy()[:, 1], a ** 2, rtol=1e-5)


def test_struct_local_in_control_flow(arch):
    S = qd.types.struct(a=qd.i32, v=qd.types.vector(2, qd.f32))
    out = qd.field(qd.f32, shape=(5,))

    @qd.kernel
    def k():
        for i in range(5):
            s = S(a=0, v=qd.Vector([1.0, 0.0]))
            for j in range(i):
                s = S(a=s.a + j, v=s.v * 2.0)  # a store into the loop-carried local
            if s.a > 2:
                s.v[1] = -1.0
            out[i] = s.a + s.v[0] * 100 + s.v[1] * 1000

    k()
    want = [sum(range(i)) + 2 ** i * 100 + (-1000 if sum(range(i)) > 2 else 0) for i in range(5)]
    np.testing.assert_allclose(out.to_numpy(), want)


def test_unpacked_vector_member(arch):
    @qd.dataclass
    class Tile:
        r: qd.types.vector(3, qd.f32, unpacked=True)
        w: qd.f32

    assert list(Tile.members) == ["_r0", "_r1", "_r2", "w"]
    f = Tile.field(shape=(2,))

    @qd.kernel
    def k() -> qd.f32:
        t = Tile(w=2.0)
        for i in qd.static(range(3)):
            t.r[i] = i + 1.0
            f[1].r[i] = t.r[i] * t.w
        return t.r[0] + t.r[2] * 10

    assert k() == pytest.approx(31.0)
    np.testing.assert_allclose([f[1]._r0, f[1]._r1, f[1]._r2], [2, 4, 6])

    @qd.kernel
    def bad(j: qd.i32) -> qd.f32:
        t = Tile()
        return t.r[j]

    with pytest.raises(QuadrantsSyntaxError, match="python-int"):
        bad(0)
    with pytest.raises(QuadrantsSyntaxError, match="unpacked=True"):
        qd.types.vector(3, qd.f32, unpacked=True)(1, 2, 3)
