"""The compiled launch plans of CPU kernel instances (`qd/_launch.pyx`, DESIGN §7): a repeated call
launches through the plan, with the results, errors, counters and side effects of the Python path, and
every call the plan cannot take falls back to that path (which raises what it always raised)."""


import dataclasses
import threading

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsAssertionError, QuadrantsRuntimeTypeError


@pytest.fixture(autouse=True)
def _program(request):
    """`qd.cpu` with native code from the first launch and exact floats; the GPU tests use the arch fixture."""
    if "arch" not in request.fixturenames:
        qd.init(arch=qd.cpu, jit="eager", log_level="warn", offline_cache=False, fast_math=False)
    yield
    qd.reset()


def _planned(k) -> int:
    """Launches the plan of `k`'s last instance ran (0 without one)."""
    plan = k._plan
    return plan.launches if plan is not None else 0


def _inc():
    @qd.kernel
    def inc(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            x[i] += 1

    return inc


def test_repeated_calls_launch_through_the_plan_and_match_numpy():
    @qd.kernel
    def axpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]

    x = np.arange(1000, dtype=np.float32)
    y = np.ones(1000, np.float32)
    want = y.copy()
    for r in range(5):
        a = 0.25 * r + 0.1
        axpy(x, y, a)
        want = np.float32(a) * x + want
    np.testing.assert_array_equal(y, want)
    assert _planned(axpy) == 4  # the first call took the Python path and armed the plan
    assert axpy.stats["launches"] == {"interp": 0, "cpu": 5}
    assert axpy.stats["last_tier"] == "cpu"


def test_qd_ndarrays_fields_and_generation_counters():
    f = qd.field(qd.i32, shape=(8,))
    a = qd.ndarray(qd.i32, (8,))

    @qd.kernel
    def bump(x: qd.types.ndarray(qd.i32, 1), k: qd.i32):
        for i in range(8):
            x[i] += k
            f[i] += 2 * k

    g_a, g_f = a.generation, f.generation
    for _ in range(4):
        bump(a, 3)
    assert _planned(bump) == 3
    np.testing.assert_array_equal(a.to_numpy(), np.full(8, 12))
    np.testing.assert_array_equal(f.to_numpy(), np.full(8, 24))
    assert a.generation == g_a + 4 and f.generation == g_f + 4  # every launch bumps what it writes


def test_wrong_arguments_after_the_plan_raise_the_python_paths_errors():
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), n: qd.i32):
        x[0] = n

    x = np.zeros(4, np.float32)
    k(x, 1)
    k(x, 2)
    assert _planned(k) == 1
    with pytest.raises(QuadrantsRuntimeTypeError, match="'x'"):
        k(np.zeros(4, np.float64), 3)  # another dtype
    with pytest.raises(QuadrantsRuntimeTypeError, match="ndim"):
        k(np.zeros((2, 2), np.float32), 3)
    with pytest.raises(QuadrantsRuntimeTypeError, match="'n'"):
        k(x, 1.5)  # a float for an int parameter
    k(x, np.int64(7))  # a numpy scalar: the Python path converts it
    assert x[0] == 7
    k(x, True)
    assert x[0] == 1


def test_scalar_arguments_convert_as_the_python_path_does():
    @qd.kernel
    def k(out: qd.types.ndarray(qd.f64, 1), a: qd.i8, b: qd.u16, c: qd.f32, d: qd.i64, e: qd.u1, f: qd.f64):
        out[0] = a
        out[1] = b
        out[2] = c
        out[3] = d
        out[4] = e
        out[5] = f

    out = np.zeros(6)
    # i8 300 wraps to 44, -129 to 127, 200 to -56; u16 70000 to 4464, 2**64 - 1 to 65535 (Quadrants' C casts)
    cases = [(300, 2 ** 64 - 1, 0.1, -(2 ** 40), 5, 1e300), (-129, 70000, 1e40, 2 ** 62, 0, -0.0),
             (200, 6, 7, 8, 1, 9)]
    for _ in range(2):
        for a, b, c, d, e, f in cases:
            k(out, a, b, c, d, e, f)
            with np.errstate(over="ignore"):  # 1e40 rounds to inf in f32
                want = [np.array(a).astype(np.int8), np.array(b).astype(np.uint16), np.float32(c), d, int(bool(e)), f]
            np.testing.assert_array_equal(out, np.array(want, dtype=np.float64))
            assert np.signbit(out[5]) == np.signbit(f)
    assert _planned(k) == 5
    # outside the 64-bit range of the parameter's signedness (Quadrants' too): refused, by the plan and the Python path
    for bad in [(1, 2, 3.0, 2 ** 64 + 5, 1, 1.0), (1, -1, 3.0, 4, 1, 1.0), (1, 2, 3.0, 2 ** 63, 1, 1.0),
                (-(2 ** 63) - 1, 2, 3.0, 4, 1, 1.0), (1, 2, 3.0, 4, -1, 1.0), (1, 2, 10 ** 400, 4, 1, 1.0)]:
        before = out.copy()
        with pytest.raises(QuadrantsRuntimeTypeError, match="Argument '[a-f]'"):
            k(out, *bad)
        np.testing.assert_array_equal(out, before)


@pytest.mark.parametrize("dt", [qd.i32, qd.u32, qd.i64, qd.u64, qd.f32, qd.f64, qd.u1])
def test_return_values_decode_like_the_python_path(dt):
    @qd.kernel
    def k(v: dt) -> dt:
        return v

    values = {qd.u1: [0, 1], qd.f32: [1.5, -0.0, 3e38], qd.f64: [1e300, -2.5]}.get(
        dt, [0, 1, 2 ** (dt.bits - 1) - 1] + ([-5] if dt.is_signed else [2 ** dt.bits - 1]))
    for _ in range(2):
        for v in values:
            got = k(v)
            want = float(np.float32(v)) if dt is qd.f32 else v
            assert type(got) is type(want) and got == want and np.signbit(got) == np.signbit(want)
    assert _planned(k) > 0


def test_compound_returns_and_templates():
    @qd.kernel
    def k(s: qd.template(), x: qd.i32) -> qd.types.vector(2, qd.i32):
        return qd.Vector([x * s, x + s])

    for _ in range(2):
        for s in (2, 3):
            v = k(s, 5)
            assert list(v) == [5 * s, 5 + s]
    assert k(2, 6)[0] == 12


def test_prints_and_failed_checks_from_planned_launches(capfd):
    qd.init(arch=qd.cpu, jit="eager", log_level="warn", offline_cache=False, debug=True)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1), i: qd.i32):
        print("value", x[i])

    x = np.arange(4, dtype=np.int32)
    for i in range(4):
        k(x, i)
    assert _planned(k) == 3
    assert capfd.readouterr().out.split() == ["value", "0", "value", "1", "value", "2", "value", "3"]
    with pytest.raises(QuadrantsAssertionError, match="(?i)out of bound|index"):
        k(x, 9)
    k(x, 1)  # the plan stays usable after a failed launch
    assert capfd.readouterr().out.split() == ["value", "1"]


def test_config_changes_and_tapes_take_the_python_path():
    x = qd.field(qd.f32, shape=(4,), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def square():
        for i in range(4):
            loss[None] += x[i] * x[i]

    x.from_numpy(np.arange(4, dtype=np.float32))
    square()
    square()
    assert _planned(square) == 1
    loss[None] = 0
    with qd.ad.Tape(loss=loss):  # the tape must record the launch to run its gradient
        square()
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * np.arange(4))
    qd.cfg.debug = True  # another instance (bound checks): not the plan armed before

    @qd.kernel
    def oob(a: qd.types.ndarray(qd.f32, 1), i: qd.i32):
        a[i] = 1

    qd.cfg.debug = False
    a = np.zeros(2, np.float32)
    oob(a, 0)
    oob(a, 1)
    qd.cfg.debug = True
    with pytest.raises(QuadrantsAssertionError):
        oob(a, 5)


def test_random_numbers_equal_the_interpreters():
    @qd.kernel
    def draw(out: qd.types.ndarray(qd.f32, 1)):
        for i in range(out.shape[0]):
            out[i] = qd.random()

    def draws(jit: str) -> list:
        qd.init(arch=qd.cpu, jit=jit, log_level="warn", offline_cache=False, random_seed=7)
        out = []
        for _ in range(4):
            a = np.zeros(64, np.float32)
            draw(a)
            out.append(a)
        return out

    planned, interpreted = draws("eager"), draws("interp")
    assert _planned(draw) == 0 and draw.stats["launches"]["interp"] == 4
    for p, q in zip(planned, interpreted):
        np.testing.assert_array_equal(p, q)
    assert not np.array_equal(planned[0], planned[1])


def test_concurrent_launches_of_one_instance():
    @qd.kernel
    def add(x: qd.types.ndarray(qd.i64, 1), k: qd.i64):
        for i in range(x.shape[0]):
            x[i] += k

    arrays = [np.zeros(20000, np.int64) for _ in range(4)]
    add(arrays[0], 0)

    def work(a: np.ndarray) -> None:
        for _ in range(200):
            add(a, 1)

    threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a in arrays:
        np.testing.assert_array_equal(a, np.full(20000, 200))


def test_non_contiguous_and_alternating_arguments():
    inc = _inc()
    base = np.zeros(10, np.float32)
    q = qd.ndarray(qd.f32, (5,))
    for _ in range(3):
        inc(base)
        inc(base[::2])  # a strided view: the Python path copies it and writes it back
        inc(q)
    np.testing.assert_array_equal(base, np.array([6, 3] * 5, np.float32))
    np.testing.assert_array_equal(q.to_numpy(), np.full(5, 3, np.float32))


def test_a_debugger_attached_after_the_plan_sees_the_launch():
    from qd.debug import Debugger

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)):
        x[0] += 1

    x = np.zeros(1, np.int32)
    k(x)
    k(x)
    assert _planned(k) == 1
    seen = []
    with Debugger(on_stop=lambda d, frame, reason: seen.append(reason) or "continue", stop_at_start=True):
        k(x)
    assert x[0] == 3 and seen


def _w3(n: int):
    """W3's reverse kernel over fields, and its gradient in closed form for trip counts `a`."""
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, 1), c: qd.f32):
        for i in x:
            v = x[i]
            for _ in range(a[i]):
                v = c * v + 0.1
            loss[None] += v

    return k, x, loss


def _grad_once(k, x, loss, a, c) -> np.ndarray:
    x.grad.fill(0)
    loss.grad[None] = 1
    k.grad(a, c)
    return x.grad.to_numpy()


def test_reverse_mode_with_adstacks_launches_through_the_plan():
    n = 257
    k, x, loss = _w3(n)
    x.from_numpy(np.linspace(-1, 1, n).astype(np.float32))
    a = qd.ndarray(qd.i32, (n,))
    a.from_numpy(np.arange(n, dtype=np.int32) % 7)
    k(a, 0.5)
    for _ in range(3):
        np.testing.assert_allclose(_grad_once(k, x, loss, a, 0.5), 0.5 ** (np.arange(n) % 7), rtol=1e-6)
    grad_plan = k._grad_plan
    assert grad_plan is not None and grad_plan.launches == 2
    ad = next(ck.adstack for key, (ck, _) in k._instances.items() if "grad" in key)
    runs = ad.sizing_runs
    _grad_once(k, x, loss, a, 0.5)
    assert ad.sizing_runs == runs  # unchanged inputs: no sizing at all
    a.from_numpy(np.arange(n, dtype=np.int32) % 13)  # a host write: the sizes are computed again, larger
    np.testing.assert_allclose(_grad_once(k, x, loss, a, 0.5), 0.5 ** (np.arange(n) % 13), rtol=1e-6)
    assert ad.sizing_runs == runs + 1 and ad.sizes == [12]
    raw = (np.arange(n) % 5).astype(np.int32)  # a numpy array has no generation: sized at every launch
    for _ in range(2):
        np.testing.assert_allclose(_grad_once(k, x, loss, raw, 0.25), 0.25 ** (np.arange(n) % 5), rtol=1e-6)
    assert ad.sizing_runs == runs + 3 and grad_plan.launches == 6
    qd.cfg.cpu_max_num_threads = 1  # the heaps are laid out again for the new thread count
    np.testing.assert_allclose(_grad_once(k, x, loss, raw, 0.25), 0.25 ** (np.arange(n) % 5), rtol=1e-6)
    qd.cfg.cpu_max_num_threads = 2
    np.testing.assert_allclose(_grad_once(k, x, loss, a, 0.5), 0.5 ** (np.arange(n) % 13), rtol=1e-6)


def test_adstack_overflow_from_a_planned_launch():
    qd.init(arch=qd.cpu, jit="eager", log_level="warn", offline_cache=False, ad_stack_size=4)
    n = 16
    k, x, loss = _w3(n)
    a = np.full(n, 3, np.int32)
    _grad_once(k, x, loss, a, 0.5)
    _grad_once(k, x, loss, a, 0.5)
    assert k._grad_plan.launches == 1
    a[5] = 9
    with pytest.raises(QuadrantsAssertionError, match=r"^Adstack overflow: kernel k.*4 slots.* is 9"):
        _grad_once(k, x, loss, a, 0.5)


def test_a_first_call_with_a_strided_array_does_not_rule_out_the_plan():
    inc = _inc()
    base = np.zeros(8, np.float32)
    inc(base[::2])  # the Python path (a copy and a copy back); the instance gets no plan from this call
    plain = np.zeros(4, np.float32)
    for _ in range(3):
        inc(plain)
    assert _planned(inc) == 2
    np.testing.assert_array_equal(base, np.array([1, 0] * 4, np.float32))
    np.testing.assert_array_equal(plain, np.full(4, 3, np.float32))


def test_data_oriented_members_are_checked_at_every_planned_call():
    """A kernel method of a `@qd.data_oriented` object reaches fields through `self` (template guards): the plan
    runs it, and a reassigned member takes the Python path, which launches the instance of the new field."""

    @qd.data_oriented
    class Sim:
        def __init__(self) -> None:
            self.x = qd.field(qd.f32, shape=4)

        @qd.kernel
        def step(self, dt: qd.f32):
            for i in self.x:
                self.x[i] += dt

    sim = Sim()
    for _ in range(3):
        sim.step(0.5)
    assert _planned(Sim.step) == 2
    np.testing.assert_array_equal(sim.x.to_numpy(), np.full(4, 1.5, np.float32))
    old, sim.x = sim.x, qd.field(qd.f32, shape=4)  # a reassigned member: never the old field again
    sim.step(1.0)
    sim.step(1.0)
    np.testing.assert_array_equal(sim.x.to_numpy(), np.full(4, 2.0, np.float32))
    np.testing.assert_array_equal(old.to_numpy(), np.full(4, 1.5, np.float32))
    assert _planned(Sim.step) == 1  # the new instance's plan


# ------------------------------------------------------------------ GPU archs: the plan checks, the tier launches


@pytest.mark.archs("vulkan", "cuda", "opencl")
def test_gpu_arch_launches_through_the_plan(arch):
    @qd.kernel
    def scale(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32) -> qd.f32:
        for i in range(x.shape[0]):
            y[i] = a * x[i]
        return a + 1

    x = qd.ndarray(qd.f32, (300,))
    x.from_numpy(np.arange(300, dtype=np.float32))
    y = qd.ndarray(qd.f32, (300,))
    yn = np.zeros(300, np.float32)
    for r in range(4):
        assert scale(x, y, r) == r + 1
        scale(x, yn, 0.5 * r)  # a numpy array: uploaded and copied back by the tier
        np.testing.assert_array_equal(y.to_numpy(), np.float32(r) * np.arange(300, dtype=np.float32))
        np.testing.assert_array_equal(yn, np.float32(0.5 * r) * np.arange(300, dtype=np.float32))
    assert _planned(scale) >= 3
    with pytest.raises(QuadrantsRuntimeTypeError, match="'y'"):
        scale(x, np.zeros(300, np.float64), 1.0)


# ------------------------------------------------------------------ dataclass arguments (Genesis passes ~450 leaves)


@dataclasses.dataclass
class _Inner:
    v: qd.types.NDArray[qd.f32, 1]
    k: qd.i32


@dataclasses.dataclass
class _Outer:
    x: qd.types.NDArray[qd.f32, 1]
    y: qd.types.NDArray[qd.f32, 1]
    a: qd.f32
    inner: _Inner


@qd.kernel
def _struct_axpy(s: _Outer, z: qd.types.NDArray[qd.f32, 1], c: qd.f32):
    for i in range(s.x.shape[0]):
        s.y[i] = s.a * s.x[i] + s.inner.v[i] * s.inner.k + z[i] * c


def _want(s: _Outer, z: np.ndarray, c: float) -> np.ndarray:
    f = np.float32
    return f(s.a) * s.x + s.inner.v * f(s.inner.k) + z * f(c)


def test_dataclass_arguments_launch_through_the_plan():
    n = 257
    rng = np.random.default_rng(3)
    s = _Outer(rng.random(n, np.float32), np.zeros(n, np.float32), 0.5, _Inner(rng.random(n, np.float32), 3))
    z = rng.random(n, np.float32)
    for r in range(4):
        s.a, s.inner.k = 0.5 + r, 3 - r  # scalar members are read at every call
        _struct_axpy(s, z, 0.25 * r)
        np.testing.assert_array_equal(s.y, _want(s, z, 0.25 * r))
    assert _planned(_struct_axpy) == 3


def test_dataclass_members_reassigned_or_of_another_type_take_the_right_path():
    n = 64
    mk = lambda: np.arange(n, dtype=np.float32)
    s = _Outer(mk(), np.zeros(n, np.float32), 2.0, _Inner(mk(), 1))
    z = np.ones(n, np.float32)
    _struct_axpy(s, z, 1.0)
    _struct_axpy(s, z, 1.0)
    assert _planned(_struct_axpy) == 1
    s.y = np.zeros(n, np.float32)  # another array of the same spec: the plan binds it
    s.inner.v = mk() * 2
    _struct_axpy(s, z, 1.0)
    np.testing.assert_array_equal(s.y, _want(s, z, 1.0))
    assert _planned(_struct_axpy) == 2
    s.inner.v = np.arange(n, dtype=np.float64)  # another dtype: the Python path refuses it, as it always did
    with pytest.raises(QuadrantsRuntimeTypeError):
        _struct_axpy(s, z, 1.0)
    s.inner.v = mk()
    del s.inner.k  # a missing member: the plan misses, the Python path says what is missing
    with pytest.raises(AttributeError):
        _struct_axpy(s, z, 1.0)


def test_dataclass_subclass_and_qd_ndarray_members():
    @dataclasses.dataclass
    class Sub(_Outer):
        extra: int = 0

    n = 32
    x, y, v = (qd.ndarray(qd.f32, (n,)) for _ in range(3))
    x.from_numpy(np.arange(n, dtype=np.float32))
    v.from_numpy(np.full(n, 2, np.float32))
    z = np.zeros(n, np.float32)
    s = _Outer(x, y, 1.5, _Inner(v, 2))
    for _ in range(3):
        _struct_axpy(s, z, 0.0)
    assert _planned(_struct_axpy) == 2
    gx, gy = x.generation, y.generation
    _struct_axpy(s, z, 0.0)  # a planned launch bumps what the kernel writes, and only that
    assert (x.generation, y.generation) == (gx, gy + 1)
    want = np.float32(1.5) * np.arange(n, dtype=np.float32) + np.float32(4)
    np.testing.assert_array_equal(y.to_numpy(), want)
    sub = Sub(x, y, 0.5, _Inner(v, 1))  # not exactly the annotated class: the Python path (isinstance) takes it
    before = _planned(_struct_axpy)
    _struct_axpy(sub, z, 0.0)
    np.testing.assert_array_equal(y.to_numpy(), np.float32(0.5) * np.arange(n, dtype=np.float32) + 2)
    assert _planned(_struct_axpy) == before


@pytest.mark.archs("vulkan", "cuda", "opencl")
def test_gpu_arch_dataclass_arguments_launch_through_the_plan(arch):
    n = 100
    x, y, v = (qd.ndarray(qd.f32, (n,)) for _ in range(3))
    x.from_numpy(np.arange(n, dtype=np.float32))
    v.from_numpy(np.ones(n, np.float32))
    z = qd.ndarray(qd.f32, (n,))
    s = _Outer(x, y, 1.0, _Inner(v, 1))
    for r in range(4):
        s.a = float(r)
        _struct_axpy(s, z, 0.0)
        np.testing.assert_array_equal(y.to_numpy(), np.float32(r) * np.arange(n, dtype=np.float32) + 1)
    assert _planned(_struct_axpy) >= 3


def test_keyword_arguments_and_defaults_launch_through_the_plan():
    @qd.kernel
    def scaled(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32 = 2.0):
        for i in range(x.shape[0]):
            y[i] = a * x[i]

    x, y = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    scaled(x, y)
    scaled(x, y=y)
    np.testing.assert_array_equal(y, 2 * x)
    scaled(a=3.0, y=y, x=x)
    np.testing.assert_array_equal(y, 3 * x)
    assert _planned(scaled) == 2
    with pytest.raises(qd.QuadrantsSyntaxError, match="Unexpected argument 'b'"):
        scaled(x, y, b=1.0)
    with pytest.raises(qd.QuadrantsSyntaxError, match="Multiple values for argument 'x'"):
        scaled(x, x=x)


def test_qd_tensor_wrappers_launch_through_the_plan():
    x = qd.tensor(qd.f32, (8,))
    y = qd.tensor(qd.f32, (8,))
    x.from_numpy(np.arange(8, dtype=np.float32))

    @qd.kernel
    def copy2(a: qd.Tensor, b: qd.Tensor):
        for i in range(a.shape[0]):
            b[i] = 2 * a[i]

    for _ in range(3):
        copy2(x, y)
    np.testing.assert_array_equal(y.to_numpy(), 2 * np.arange(8, dtype=np.float32))
    assert _planned(copy2) == 2


@dataclasses.dataclass(frozen=True)
class _FrozenInner:
    v: qd.types.NDArray[qd.f32, 1]


@dataclasses.dataclass(frozen=True)
class _Frozen:
    x: qd.types.NDArray[qd.f32, 1]
    inner: _FrozenInner
    a: qd.f32


@qd.kernel
def _frozen_add(s: _Frozen):
    for i in range(s.x.shape[0]):
        s.x[i] += s.inner.v[i] * s.a


def test_frozen_dataclass_arguments_seen_before_skip_the_member_walk():
    """A frozen dataclass argument passed again is the same members (the plan keeps its leaves); another object,
    even an equal one, is walked again; a member's storage is still checked at every launch."""
    n = 16
    x, v = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.f32, (n,))
    v.from_numpy(np.ones(n, np.float32))
    s = _Frozen(x, _FrozenInner(v), 2.0)
    for _ in range(4):
        _frozen_add(s)
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 8, np.float32))
    assert _planned(_frozen_add) == 3
    x2 = qd.ndarray(qd.f32, (n,))
    s2 = _Frozen(x2, _FrozenInner(v), 0.5)
    _frozen_add(s2)  # a new object: its own members (a new qd ndarray's first launch takes the Python path)
    _frozen_add(s2)
    np.testing.assert_array_equal(x2.to_numpy(), np.full(n, 1.0, np.float32))
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 8, np.float32))
    _frozen_add(s)
    np.testing.assert_array_equal(x.to_numpy(), np.full(n, 10, np.float32))
    assert _planned(_frozen_add) == 5
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.x = x2  # what makes keeping the leaves sound


def test_a_layout_tagged_after_the_plan_is_not_taken_on_its_storage():
    """A qd ndarray's layout can change in place (`_qd_layout`): the plan's shortcut for an ndarray seen before
    checks the layout too, so the call takes the instance of the new layout."""
    @qd.kernel
    def rowsum(x: qd.types.ndarray(qd.f32, 2), out: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            acc = 0.0
            for j in range(x.shape[1]):
                acc += x[i, j] * (j + 1)
            out[i] = acc

    x, out = qd.ndarray(qd.f32, (3, 3)), qd.ndarray(qd.f32, (3,))
    x.from_numpy(np.arange(9, dtype=np.float32).reshape(3, 3))
    for _ in range(3):
        rowsum(x, out)
    assert _planned(rowsum) == 2
    x._qd_layout = (1, 0)  # the same storage, now holding the transpose's axes
    rowsum(x, out)
    w = np.arange(1, 4, dtype=np.float32)
    np.testing.assert_array_equal(out.to_numpy(), x.to_numpy() @ w)


def test_none_for_a_dataclass_parameter_takes_the_python_path():
    n = 4
    s = _Outer(np.zeros(n, np.float32), np.zeros(n, np.float32), 1.0, _Inner(np.zeros(n, np.float32), 1))
    z = np.zeros(n, np.float32)
    _struct_axpy(s, z, 0.0)
    _struct_axpy(s, z, 0.0)
    assert _planned(_struct_axpy) == 1
    with pytest.raises(QuadrantsRuntimeTypeError, match="cannot be converted"):
        _struct_axpy(None, z, 0.0)


@dataclasses.dataclass(frozen=True)
class _Mixed:
    f: qd.Tensor
    a: qd.Tensor


@pytest.mark.archs("cpu", "vulkan", "cuda", "opencl")
def test_field_and_ndarray_backed_tensor_leaves_bind_their_own_buffers(arch):
    """A field-backed `qd.Tensor` leaf is a template (no launch argument), an ndarray-backed one an argument: the
    plan (and a GPU tier's C launcher) maps each launch argument to its own leaf."""
    n = 8
    f = qd.field(qd.f32, shape=(n,))
    f.from_numpy(np.arange(n, dtype=np.float32))
    a = qd.ndarray(qd.f32, (n,))

    @qd.kernel
    def twice(s: _Mixed, out: qd.types.ndarray(qd.f32, 1)):
        for i in range(n):
            s.a[i] = 2 * s.f[i]
            out[i] = s.a[i] + 1

    out = qd.ndarray(qd.f32, (n,))
    m = _Mixed(qd.Tensor(f), qd.Tensor(a))
    for _ in range(3):
        twice(m, out)
    np.testing.assert_array_equal(a.to_numpy(), 2 * np.arange(n, dtype=np.float32))
    np.testing.assert_array_equal(out.to_numpy(), 2 * np.arange(n, dtype=np.float32) + 1)
    assert _planned(twice) >= 1


def test_a_replaced_storage_is_bound_again_after_the_plan_trusted_its_binding():
    """The plan binds a dataclass's ndarrays once and trusts the binding while no storage or layout changed
    anywhere (`qd._launch.storage_changed`, told by `HostData._arr` / `_layout`): a storage replaced in place and a
    leaf swapped in a mutable dataclass are both seen."""
    n = 8
    a, b, out = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.f32, (n,))
    a.from_numpy(np.arange(n, dtype=np.float32))
    b.from_numpy(np.full(n, 10, np.float32))

    @dataclasses.dataclass
    class Pair:
        src: qd.types.ndarray(qd.f32, 1)
        dst: qd.types.ndarray(qd.f32, 1)

    @qd.kernel
    def copy2(p: Pair):
        for i in range(p.src.shape[0]):
            p.dst[i] = 2 * p.src[i]

    p = Pair(a, out)
    for _ in range(3):
        copy2(p)
    assert _planned(copy2) == 2
    np.testing.assert_array_equal(out.to_numpy(), 2 * np.arange(n, dtype=np.float32))
    a._arr = np.full(n, 5, np.float32)  # the storage replaced (as a relayout or a reset does)
    copy2(p)
    np.testing.assert_array_equal(out.to_numpy(), np.full(n, 10, np.float32))
    p.src = b  # a leaf swapped
    copy2(p)
    np.testing.assert_array_equal(out.to_numpy(), np.full(n, 20, np.float32))
    assert _planned(copy2) >= 3


def test_a_replaced_field_storage_is_bound_again():
    """The field buffers a plan binds are trusted as its ndarrays are, and bound again once a storage changed."""
    f = qd.field(qd.f32, shape=4)
    f.fill(1.0)
    out = qd.ndarray(qd.f32, (4,))

    @qd.kernel
    def read(out: qd.types.ndarray(qd.f32, 1)):
        for i in range(4):
            out[i] = f[i] * 3

    for _ in range(3):
        read(out)
    assert _planned(read) == 2
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 3, np.float32))
    f._arr = np.full(4, 2, np.float32)  # the storage replaced
    read(out)
    np.testing.assert_array_equal(out.to_numpy(), np.full(4, 6, np.float32))
