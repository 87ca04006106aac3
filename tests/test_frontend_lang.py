"""End-to-end tests of the frontend: operators, control flow, loops, locals, globals, funcs, returns."""

import numpy as np
import pytest

import qd


@pytest.fixture(autouse=True)
def _qd(arch):
    """Every test runs on every tier (the `arch` fixture of conftest.py inits and resets)."""
    yield


def test_scalar_arith_matches_numpy():
    out = qd.field(qd.f32, shape=8)

    @qd.kernel
    def k(a: qd.f32, b: qd.f32):
        out[0] = a + b
        out[1] = a - b
        out[2] = a * b
        out[3] = a / b
        out[4] = a // b
        out[5] = a % b
        out[6] = a ** 2
        out[7] = -a

    k(7.5, -2.0)
    a, b = np.float32(7.5), np.float32(-2.0)
    np.testing.assert_allclose(out.to_numpy(), [a + b, a - b, a * b, a / b, a // b, a % b, a ** 2, -a])


def test_int_arith_python_semantics():
    out = qd.field(qd.i32, shape=10)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        out[0] = a // b
        out[1] = a % b
        out[2] = a & b
        out[3] = a | b
        out[4] = a ^ b
        out[5] = a << 2
        out[6] = a >> 1
        out[7] = ~a
        out[8] = a ** 3
        out[9] = abs(a)

    for a, b in [(7, 3), (-7, 3), (7, -3), (-7, -3)]:
        k(a, b)
        exp = [a // b, a % b, a & b, a | b, a ^ b, a << 2, a >> 1, ~a, a ** 3, abs(a)]
        assert out.to_numpy().tolist() == exp


def test_int_true_division_gives_float():
    out = qd.field(qd.f32, shape=1)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        out[0] = a / b

    k(7, 2)
    assert out[0] == 3.5


def test_comparisons_and_boolops():
    out = qd.field(qd.i32, shape=8)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        out[0] = a < b
        out[1] = a <= b
        out[2] = a == b
        out[3] = a != b
        out[4] = 0 < a < b
        out[5] = a > 0 and b > 0
        out[6] = a > 0 or b > 0
        out[7] = not a

    k(1, 2)
    assert out.to_numpy().tolist() == [1, 1, 0, 1, 1, 1, 1, 0]
    k(-1, 0)
    assert out.to_numpy().tolist() == [1, 1, 0, 1, 0, 0, 0, 0]


def test_ternary_and_select():
    out = qd.field(qd.f32, shape=(4,))
    arr = qd.field(qd.f32, shape=(4,))

    @qd.kernel
    def k():
        for i in range(4):
            out[i] = arr[i - 1] if i > 0 else 100.0
            arr[i] = qd.select(i % 2 == 0, 1.0, -1.0) + 0 * out[i]

    arr.from_numpy(np.array([1, 2, 3, 4], np.float32))
    k()
    assert out.to_numpy()[0] == 100.0


def test_locals_type_fixed_by_first_assignment():
    out = qd.field(qd.f32, shape=2)

    @qd.kernel
    def k():
        x = 0
        x = 2.7  # cast to i32
        y: qd.f32 = 1
        y += 0.5
        out[0] = x
        out[1] = y

    k()
    assert out.to_numpy().tolist() == [2.0, 1.5]


def test_if_elif_else_and_while_break_continue():
    out = qd.field(qd.i32, shape=3)

    @qd.kernel
    def k(n: qd.i32):
        s = 0
        i = 0
        while i < n:
            i += 1
            if i % 2 == 0:
                continue
            elif i > 7:
                break
            else:
                s += i
        out[0] = s
        t = 0
        if n > 0:  # not top level: a serial loop
            for j in range(100):
                if j >= n:
                    break
                t += j
        out[1] = t
        c = 0
        while True:
            c += 1
            if c == 5:
                break
        out[2] = c

    k(10)
    assert out.to_numpy().tolist() == [1 + 3 + 5 + 7, sum(range(10)), 5]


def test_range_forms_and_step():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32):
        s = 0
        for i in range(a, b):
            s += i
        out[0] = s
        s = 0
        for i in range(a, b, 3):
            s += i
        out[1] = s
        s = 0
        for i in range(b, a, -2):
            s += i
        out[2] = s
        s = 0
        for i in qd.static(range(4)):
            s += i * 10
        out[3] = s

    k(2, 11)
    assert out.to_numpy().tolist() == [sum(range(2, 11)), sum(range(2, 11, 3)), sum(range(11, 2, -2)), 60]


def test_parallel_top_level_loop_and_atomics():
    out = qd.field(qd.i32, shape=())

    @qd.kernel
    def k(n: qd.i32):
        for i in range(n):
            out[None] += i

    k(100)
    assert out[None] == 4950


def test_ndrange_struct_for_grouped():
    x = qd.field(qd.i32, shape=(3, 4))
    y = qd.field(qd.i32, shape=(3, 4))
    z = qd.field(qd.i32, shape=(3, 4))

    @qd.kernel
    def k():
        for i, j in qd.ndrange(3, (1, 4)):
            x[i, j] = i * 10 + j
        for i, j in y:
            y[i, j] = i - j
        for I in qd.grouped(z):
            z[I] = I[0] * I[1]

    k()
    ex = np.zeros((3, 4), np.int32)
    for i in range(3):
        for j in range(1, 4):
            ex[i, j] = i * 10 + j
    assert (x.to_numpy() == ex).all()
    ii, jj = np.meshgrid(range(3), range(4), indexing="ij")
    assert (y.to_numpy() == ii - jj).all()
    assert (z.to_numpy() == ii * jj).all()


def test_ndarray_args_numpy_and_shape():
    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, 2), b: qd.types.ndarray()):
        for i, j in a:
            a[i, j] = a[i, j] * 2 + b[i] + a.shape[1]

    a = np.ones((3, 5), np.float32)
    b = np.arange(3, dtype=np.float32)
    k(a, b)
    np.testing.assert_allclose(a, np.broadcast_to(2 + b[:, None] + 5, (3, 5)))


def test_non_contiguous_numpy_writes_back():
    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1)):
        for i in a:
            a[i] = i

    base = np.zeros(10, np.int32)
    view = base[::2]
    k(view)
    assert base[::2].tolist() == [0, 1, 2, 3, 4]


def test_funcs_inline_and_return():
    out = qd.field(qd.f32, shape=3)

    @qd.func
    def sq(x):
        return x * x

    @qd.func
    def two(x: qd.f32) -> qd.f32:
        y = x
        y += 1
        return y * 2

    @qd.func
    def pair(a, b):
        return a + b, a - b

    @qd.kernel
    def k(v: qd.f32):
        out[0] = sq(v)
        out[1] = two(v)
        s, d = pair(v, 1.0)
        out[2] = s * d

    k(3.0)
    assert out.to_numpy().tolist() == [9.0, 8.0, 8.0]


def test_template_args_and_instantiation():
    a = qd.field(qd.i32, shape=4)
    b = qd.field(qd.i32, shape=4)

    @qd.kernel
    def fill(x: qd.template(), v: qd.template()):
        for i in x:
            x[i] = v

    fill(a, 3)
    fill(b, 5)
    fill(a, 7)
    assert a.to_numpy().tolist() == [7] * 4 and b.to_numpy().tolist() == [5] * 4
    assert len(fill._instances) == 3


def test_kernel_return_scalar_and_tuple():
    @qd.kernel
    def k(a: qd.i32) -> qd.f32:
        return a * 1.5

    @qd.kernel
    def t(a: qd.i32) -> tuple[qd.i32, qd.f32]:
        return a + 1, a / 2

    assert k(2) == 3.0
    assert t(3) == (4, 1.5)


def test_static_if_and_globals_captured():
    out = qd.field(qd.i32, shape=1)
    FLAG = True
    N = 5

    @qd.kernel
    def k():
        if qd.static(FLAG):
            out[0] = N
        else:
            out[0] = undefined_name  # noqa: F821 - never compiled

    k()
    assert out[0] == 5


def test_math_builtins():
    out = qd.field(qd.f32, shape=8)

    @qd.kernel
    def k(x: qd.f32):
        out[0] = qd.sqrt(x)
        out[1] = qd.sin(x)
        out[2] = qd.exp(x)
        out[3] = qd.log(x)
        out[4] = qd.max(x, 1.0, 3.0)
        out[5] = qd.min(x, 1.0)
        out[6] = qd.floor(x)
        out[7] = qd.atan2(x, 1.0)

    k(2.5)
    x = np.float32(2.5)
    np.testing.assert_allclose(out.to_numpy(), [np.sqrt(x), np.sin(x), np.exp(x), np.log(x), 3.0, 1.0, 2.0,
                                                 np.arctan2(x, 1)], rtol=1e-6)


def test_casts():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(x: qd.f32):
        out[0] = int(x)
        out[1] = qd.cast(x, qd.i32)
        out[2] = qd.i32(x * 2)
        out[3] = qd.bit_cast(qd.bit_cast(7, qd.f32), qd.i32)

    k(-2.7)
    assert out.to_numpy().tolist() == [-2, -2, -5, 7]


def test_atomic_returns_old():
    out = qd.field(qd.i32, shape=2)

    @qd.kernel
    def k():
        out[0] = 5
        old = qd.atomic_add(out[0], 3)
        out[1] = old

    k()
    assert out.to_numpy().tolist() == [8, 5]


def test_f16_atomics_contend_correctly():
    """f16 atomics are compare-and-swap loops on their 32-bit word on the GPU tiers: neighbours in the same word
    must not disturb each other, and every contribution lands (sums small enough to stay exact in f16)."""
    acc = np.zeros(4, np.float16)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.f16, 1)):
        for i in range(256):
            qd.atomic_add(a[i % 2], 1.0)
            qd.atomic_max(a[2], qd.cast(i, qd.f32) * 0.5)
            qd.atomic_min(a[3], -qd.cast(i % 7, qd.f32))

    k(acc)
    assert acc.tolist() == [128.0, 128.0, 127.5, -6.0]


def test_augassign_global_ops():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k():
        out[0] = 6
        out[0] *= 7
        out[1] = 12
        out[1] //= 5
        out[2] = 12
        out[2] |= 1
        out[3] = 10
        out[3] -= 3

    k()
    assert out.to_numpy().tolist() == [42, 2, 13, 7]


def test_python_int_float_annotations_and_kwargs():
    @qd.kernel
    def k(a: int, b: float, c: qd.template() = 2) -> float:
        return a * b + c

    assert k(2, 1.25) == 4.5
    assert k(b=0.5, a=4, c=1) == 3.0


def test_static_comprehension_namedexpr_and_len():
    xs = [qd.field(qd.i32, shape=2) for _ in range(3)]

    @qd.kernel
    def k() -> qd.i32:
        vals = [i * i for i in qd.static(range(4))]
        for j in qd.static(range(len(xs))):
            xs[j][0] = vals[j + 1]
        s = 0
        if (n := len(xs)) == 3:
            s = n
        return s

    assert k() == 3
    assert [f[0] for f in xs] == [1, 4, 9]


def test_func_recursion_through_static():
    @qd.func
    def fact(n: qd.template()) -> qd.i32:
        r = 1
        if qd.static(n > 1):
            r = n * fact(n - 1)
        return r

    @qd.kernel
    def k() -> qd.i32:
        return fact(5)

    assert k() == 120


def test_kernel_methods_with_self_template():
    class Sim:
        def __init__(self):
            self.x = qd.field(qd.f32, shape=3)
            self.k = 2.0

        @qd.kernel
        def step(self, v: qd.f32):
            for i in self.x:
                self.x[i] = v * self.k + i

        @qd.func
        def get(self, i):
            return self.x[i]

        @qd.kernel
        def total(self) -> qd.f32:
            s = 0.0
            for i in qd.static(range(3)):
                s += self.get(i)
            return s

    s = Sim()
    s.step(1.5)
    assert s.x.to_numpy().tolist() == [3.0, 4.0, 5.0]
    assert s.total() == 12.0


def test_random_values_in_range():
    out = qd.field(qd.f32, shape=64)

    @qd.kernel
    def k():
        for i in out:
            out[i] = qd.random()

    k()
    a = out.to_numpy()
    assert (a >= 0).all() and (a < 1).all() and len(set(a.tolist())) > 32


def test_raw_div_mod_and_float_mod():
    out = qd.field(qd.f32, shape=5)

    @qd.kernel
    def k(a: qd.i32, b: qd.i32, x: qd.f32):
        out[0] = qd.raw_div(a, b)
        out[1] = qd.raw_mod(a, b)
        out[2] = x % 3.0
        out[3] = qd.raw_mod(x, 3.0)
        out[4] = x // 2.0

    k(-7, 2, -5.5)
    np.testing.assert_allclose(out.to_numpy(), [-3, -1, -5.5 % 3.0, np.fmod(-5.5, 3.0), -5.5 // 2.0])


def test_integer_dtypes_wrap_and_promote():
    out8 = qd.field(qd.i8, shape=1)
    outu = qd.field(qd.u32, shape=2)
    out64 = qd.field(qd.i64, shape=1)

    @qd.kernel
    def k(a: qd.i8, u: qd.u32, big: qd.i64):
        out8[0] = a + a  # i8 + i8 wraps in i8
        outu[0] = u - 1  # promote(u32, i32) = u32
        outu[1] = qd.bit_shr(u, 1)
        out64[0] = big * 3

    k(100, 0, 2 ** 40)
    assert out8[0] == np.int8(-56)
    assert outu.to_numpy().tolist() == [2 ** 32 - 1, 0]
    assert out64[0] == 3 * 2 ** 40


def test_nested_funcs_and_loops_in_func_at_top_level_are_parallel():
    x = qd.field(qd.i32, shape=8)

    @qd.func
    def fill(v):
        for i in x:
            x[i] = v + i

    @qd.kernel
    def k():
        fill(10)

    k()
    assert x.to_numpy().tolist() == [10 + i for i in range(8)]
    assert any(s.parallel for s in k._last_ir.body.stmts if hasattr(s, "parallel"))


def test_ndarray_qd_ndarray_and_torch_like():
    a = qd.ndarray(qd.i32, shape=(4,))

    @qd.kernel
    def k(x: qd.types.ndarray()):
        for i in x:
            x[i] = i * 2

    k(a)
    assert a.to_numpy().tolist() == [0, 2, 4, 6]
    try:
        import torch
    except ImportError:
        return
    t = torch.zeros(4, dtype=torch.int32)
    k(t)
    assert t.tolist() == [0, 2, 4, 6]


def test_param_reassign_is_refused_and_list_store():
    """A scalar kernel parameter is immutable, as in Quadrants and Taichi (`n = n * 2` is refused, not a silent
    copy); a new name holds the new value."""
    x = qd.field(qd.i32, shape=6)
    v = qd.Vector.field(3, qd.i32, shape=2)

    @qd.kernel
    def reassign(n: qd.i32):
        n = n * 2
        for i in x:
            x[i] = n + i

    with pytest.raises(qd.QuadrantsSyntaxError, match='Kernel argument "n" is immutable in the kernel'):
        reassign(4)

    @qd.kernel
    def k(n: qd.i32):
        m = n * 2
        for i in x:
            x[i] = m + i
        v[1] = [1, 2, 3]

    k(4)
    assert x.to_numpy().tolist() == [8 + i for i in range(6)]
    assert v.to_numpy()[1].tolist() == [1, 2, 3]


def test_continue_in_parallel_loop():
    x = qd.field(qd.i32, shape=6)

    @qd.kernel
    def k():
        for i in x:
            if i % 2 == 1:
                continue
            x[i] = 8

    k()
    assert x.to_numpy().tolist() == [8, 0, 8, 0, 8, 0]


def test_default_fp_f64_changes_literals(arch):
    qd.init(arch=arch, default_fp=qd.f64, log_level="warn", enable_fallback=False)
    out = qd.field(qd.f64, shape=1)

    @qd.kernel
    def k():
        a = 0.1
        out[0] = a * 3

    k()
    assert out[0] == 0.1 * 3
    assert k._last_ir.body.stmts[0].dtype is qd.f64


def test_zero_dim_field_and_shape_len():
    s = qd.field(qd.i32, shape=())
    f = qd.field(qd.i32, shape=(5, 7))

    @qd.kernel
    def k():
        s[None] = f.shape[0] * 100 + f.shape[1] + len(f)

    k()
    assert s[None] == 512


def test_builtins_in_python_scope():
    assert qd.sqrt(4.0) == 2.0
    assert qd.max(1, 5, 3) == 5 and qd.min(2, -1) == -1
    v = qd.f32(1.1)
    assert isinstance(v, np.float32) and v == np.float32(1.1)
    assert qd.i8(300) == 44
    assert qd.select(True, 1, 2) == 1
    assert qd.cast(2.7, qd.i32) == 2


def test_matrix_template_keyed_by_value():
    @qd.kernel
    def k(m: qd.template()) -> qd.f32:
        return m[0] + m[1]

    assert k(qd.Vector([1.0, 2.0])) == 3.0
    assert k(qd.Vector([1.0, 2.0])) == 3.0
    assert len(k._instances) == 1


def test_ndrange_axes_changes_iteration_order_not_indices(arch: object) -> None:
    """`qd.ndrange(..., axes=(1, 0))`: the loop variables stay canonical; only the nesting order (the
    order a serial loop visits the points in) changes, as in Python-scope iteration."""
    order = qd.field(qd.i32, shape=(3, 4))
    cnt = qd.field(qd.i32, shape=())

    @qd.kernel
    def visit():
        qd.loop_config(serialize=True)
        for i, j in qd.ndrange((1, 4), 4, axes=(1, 0)):
            order[i - 1, j] = qd.atomic_add(cnt[None], 1)

    visit()
    want = np.zeros((3, 4), np.int32)
    for k, (i, j) in enumerate(qd.ndrange((1, 4), 4, axes=(1, 0))):
        want[i - 1, j] = k
    np.testing.assert_array_equal(order.to_numpy(), want)
    assert want[0, 1] == 3  # column-major visiting: (1, 0), (2, 0), (3, 0), then (1, 1)
    with pytest.raises(qd.QuadrantsSyntaxError, match="is not a permutation"):
        qd.ndrange(2, 3, axes=(0, 0))


@pytest.mark.parametrize("dt,a,b,op,word", [
    (qd.i32, 2 ** 30, 2 ** 30, "add", "Addition"), (qd.u8, 200, 100, "add", "Addition"),
    (qd.i16, -30000, 10000, "sub", "Subtraction"), (qd.u32, 1, 2, "sub", "Subtraction"),
    (qd.i64, 2 ** 40, 2 ** 30, "mul", "Multiplication"), (qd.i32, -1, -2 ** 31, "mul", "Multiplication"),
    (qd.i8, 2, 6, "shl", "Shift left")])
def test_debug_integer_overflow_warns_and_wraps(arch: object, capfd: object, dt: object, a: int, b: int,
                                                op: str, word: str) -> None:
    """debug=True: an int + - * << that wraps prints Quadrants' warning with the source line; the wrapped
    value is kept; the same values one step inside the range print nothing; debug=False prints nothing."""
    import operator

    fn = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "shl": operator.lshift}[op]
    for debug in (True, False):
        qd.init(arch=arch, debug=debug)

        @qd.kernel
        def k(x: dt, y: dt) -> dt:
            return fn(x, y)  # the checked line

        got = k(a, b)
        qd.sync()
        out = capfd.readouterr().out
        want = np.array(fn(np.array(a, dt.np_dtype), np.array(b, dt.np_dtype)), dt.np_dtype) if op != "shl" \
            else np.array(a << b, np.int64).astype(dt.np_dtype)
        assert got == want
        assert (f"{word} overflow detected" in out) == debug and ("# the checked line" in out) == debug
    qd.init(arch=arch, debug=True)

    @qd.kernel
    def fine(x: dt, y: dt) -> dt:
        return x + y - y

    fine(1, 1)
    qd.sync()
    assert "overflow" not in capfd.readouterr().out


def test_func_requires_top_level(arch: object) -> None:
    """`qd.func(requires_top_level=True)`: allowed at the kernel top level and in qd.static loops, refused
    inside runtime control flow, also through another func (its loops would silently become serial)."""

    @qd.func(requires_top_level=True)
    def bump(x: qd.template(), n: qd.i32):
        for i in range(n):
            x[i] += 1

    @qd.func
    def via(x: qd.template(), n: qd.i32):
        bump(x, n)

    x = qd.field(qd.i32, shape=4)

    @qd.kernel
    def ok(n: qd.i32):
        for _ in qd.static(range(2)):
            bump(x, n)

    @qd.kernel
    def nested(n: qd.i32):
        if n > 0:
            via(x, n)

    ok(4)
    assert x.to_numpy().tolist() == [2, 2, 2, 2]
    with pytest.raises(qd.QuadrantsCompilationError, match="requires_top_level"):
        nested(4)


def test_dtype_call_refuses_out_of_range_ints_and_extra_args(arch: object) -> None:
    """In a kernel `qd.u16(-1)` would silently wrap: it is refused (Quadrants' rule), as are extra args;
    an in-range value and a runtime value (a cast) work."""

    @qd.kernel
    def ok(v: qd.i32) -> qd.u32:
        return qd.u32(4294967295) + qd.u32(v)

    assert ok(1) == 0

    @qd.kernel
    def wraps():
        b = qd.u16(-1)  # noqa: F841

    with pytest.raises(qd.QuadrantsCompilationError, match="exceeded the range of specified dtype"):
        wraps()

    @qd.kernel
    def two():
        a = qd.i64(1, 2)  # noqa: F841

    with pytest.raises(qd.QuadrantsCompilationError, match="can only decorate a single expression"):
        two()


def test_ndarray_boundary_clamp(arch: object) -> None:
    """`qd.types.ndarray(boundary="clamp")`: every axis index is clamped into [0, n - 1] (reads and writes),
    and a runtime index into an element's vector/matrix clamps its flat offset (Quadrants'); "unsafe" is the
    default and another value is refused."""

    @qd.kernel
    def get(x: qd.types.ndarray(boundary="clamp"), i: qd.i32, j: qd.i32) -> qd.f32:
        return x[i, j]

    @qd.kernel
    def put(x: qd.types.ndarray(boundary="clamp"), i: qd.i32):
        x[i, 0] = 9.0

    @qd.kernel
    def elem(x: qd.types.ndarray(boundary="clamp"), i: qd.i32, k: qd.i32) -> qd.f32:
        return x[i][k]

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    for i, j in [(-1, 0), (5, 7), (1, -3), (0, 2)]:
        assert get(a, i, j) == a[min(max(i, 0), 1), min(max(j, 0), 2)]
    put(a, 10)
    assert a[1, 0] == 9.0
    v = qd.ndarray(qd.math.vec3, shape=2)
    v.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert [elem(v, 1, k) for k in (-2, 1, 9)] == [3.0, 4.0, 5.0]
    with pytest.raises(ValueError, match="Invalid boundary"):
        qd.types.ndarray(boundary="wrap")


def test_randn_is_standard_normal_and_the_hints_change_nothing():
    """`qd.randn` (Box-Muller of two `qd.random` draws) over 2^16 samples: mean 0 and variance 1 within a few
    standard errors, in f32 and f64; `qd.assume_in_range` returns its value and `qd.cache_read_only` does nothing."""
    n = 1 << 16
    out32 = qd.field(qd.f32, shape=n)
    out64 = qd.field(qd.f64, shape=n)

    @qd.kernel
    def k(base: qd.i32) -> qd.i32:
        qd.cache_read_only(out32)
        for i in range(n):
            out32[i] = qd.randn()
            out64[i] = qd.randn(qd.f64)
        return qd.assume_in_range(base + 3, base, 0, 8)

    assert k(5) == 8
    for a in (out32.to_numpy().astype(np.float64), out64.to_numpy()):
        assert np.all(np.isfinite(a))
        assert abs(a.mean()) < 0.02 and abs(a.var() - 1.0) < 0.03
        assert 0.30 < np.mean(np.abs(a) < 0.4) < 0.33  # P(|z| < 0.4) = 0.311: the shape, not just two moments
    assert isinstance(qd.randn(), np.float32)
