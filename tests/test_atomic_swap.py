"""`qd.atomic_exchange` and `qd.atomic_cas` (Quadrants' API) on every tier: the old value comes back, contention
loses or duplicates nothing, a compare-and-swap has exactly one winner, a thread's own local is demoted, bad input
is a clear error, a swap next to a reduction keeps it from being accumulated, and autodiff either differentiates
an exchange as the store it is or refuses what it cannot replay."""

import numpy as np
import pytest

import qd

INTS = [(qd.i32, np.int32), (qd.u32, np.uint32), (qd.i64, np.int64), (qd.u64, np.uint64)]
N = 256


@pytest.fixture(autouse=True)
def _qd(arch):
    yield


@pytest.mark.parametrize("dt,npdt", INTS, ids=lambda x: getattr(x, "name", ""))
def test_cas_has_exactly_one_winner_and_exchange_loses_nothing(dt, npdt):
    @qd.kernel
    def cas(slot: qd.types.ndarray(dt, 1), olds: qd.types.ndarray(dt, 1)):
        for i in range(N):
            olds[i] = qd.atomic_cas(slot[0], 0, i + 1)

    @qd.kernel
    def xchg(slot: qd.types.ndarray(dt, 1), olds: qd.types.ndarray(dt, 1)):
        for i in range(N):
            olds[i] = qd.atomic_exchange(slot[0], i + 1)

    slot, olds = np.zeros(1, npdt), np.full(N, 7, npdt)
    cas(slot, olds)
    winners = np.flatnonzero(olds == 0)
    assert len(winners) == 1 and slot[0] == winners[0] + 1
    assert np.all(olds[olds != 0] == slot[0])  # every loser saw the winner's id
    slot, olds = np.full(1, 1_000_000, npdt), np.zeros(N, npdt)
    xchg(slot, olds)
    seen = sorted(olds.tolist() + [int(slot[0])])
    assert seen == sorted(list(range(1, N + 1)) + [1_000_000])  # no value lost or duplicated


@pytest.mark.parametrize("dt,npdt", INTS, ids=lambda x: getattr(x, "name", ""))
def test_cas_returns_the_old_value_on_success_and_failure(dt, npdt):
    f = qd.field(dt, shape=())
    out = qd.field(dt, shape=3)
    f[None] = 7

    @qd.kernel
    def k():
        out[0] = qd.atomic_cas(f[None], 7, 42)  # fires
        out[1] = qd.atomic_cas(f[None], 99, 123)  # does not
        v = 0
        v = qd.atomic_cas(f[None], 42, 50)  # into a local (the interpreter keeps the CAS's own register)
        out[2] = v

    k()
    assert [int(x) for x in out.to_numpy()] == [7, 42, 42] and int(f[None]) == 50


@pytest.mark.parametrize("dt,npdt", [(qd.u32, np.uint32), (qd.u64, np.uint64)], ids=["u32", "u64"])
def test_cas_with_a_negative_literal_on_an_unsigned_target_is_the_all_ones_sentinel(dt, npdt):
    a = np.full(1, np.iinfo(npdt).max, npdt)

    @qd.kernel
    def k(a: qd.types.ndarray(dt, 1)) -> dt:
        return qd.atomic_cas(a[0], -1, 0)

    assert k(a) == np.iinfo(npdt).max and a[0] == 0


def test_cas_literals_widen_to_a_64_bit_target():
    a = np.array([7], np.int64)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i64, 1)) -> qd.i64:
        return qd.atomic_cas(a[0], 7, 1 << 40)

    assert k(a) == 7 and a[0] == 1 << 40


@pytest.mark.parametrize("dt,npdt", [(qd.f32, np.float32), (qd.f64, np.float64)], ids=["f32", "f64"])
def test_exchange_of_floats_returns_the_old_values(dt, npdt):
    @qd.kernel
    def k(a: qd.types.ndarray(dt, 1), b: qd.types.ndarray(dt, 1)):
        for i in range(a.shape[0]):
            b[i] = qd.atomic_exchange(a[i], b[i] * 2.0 + 0.5)

    a = np.linspace(-3, 3, 1000).astype(npdt)
    b = np.linspace(1, 2, 1000).astype(npdt)
    a0, b0 = a.copy(), b.copy()
    k(a, b)
    np.testing.assert_array_equal(a, b0 * npdt(2) + npdt(0.5))
    np.testing.assert_array_equal(b, a0)


def test_exchange_fans_out_over_vector_components():
    v = qd.Vector.field(3, qd.f32, shape=())

    @qd.kernel
    def k():
        for _ in range(64):
            qd.atomic_exchange(v[None], qd.Vector([1.5, 2.5, 3.5]))

    k()
    np.testing.assert_array_equal(v[None].to_numpy(), [1.5, 2.5, 3.5])


def test_cas_on_a_vector_component():
    v = qd.Vector.field(3, qd.i32, shape=())
    out = qd.field(qd.i32, shape=3)
    v[None] = qd.Vector([10, 20, 30])

    @qd.kernel
    def k():
        for c in qd.static(range(3)):
            out[c] = qd.atomic_cas(v[None][c], 10 * (c + 1), 100 * (c + 1))

    k()
    assert out.to_numpy().tolist() == [10, 20, 30] and v[None].to_numpy().tolist() == [100, 200, 300]


def test_a_threads_own_local_is_swapped_without_atomics():
    out = np.zeros((2, 16), np.int32)

    @qd.kernel
    def k(out: qd.types.ndarray(qd.i32, 2)):
        for i in range(16):
            s = i
            out[0, i] = qd.atomic_cas(s, i, 100 + i)  # fires: s becomes 100 + i
            out[1, i] = qd.atomic_exchange(s, -1) + qd.atomic_cas(s, 5, 999) * 0  # s was 100 + i

    k(out)
    assert out[0].tolist() == list(range(16)) and out[1].tolist() == [100 + i for i in range(16)]


def test_a_cas_loop_builds_an_atomic_increment():
    counter = np.zeros(1, np.int32)

    @qd.kernel
    def k(c: qd.types.ndarray(qd.i32, 1)):
        for _ in range(N):
            done = 0
            while done == 0:
                cur = c[0]
                if qd.atomic_cas(c[0], cur, cur + 1) == cur:
                    done = 1

    k(counter)
    assert counter[0] == N


def test_an_exchange_into_a_reduced_cell_keeps_the_reduction_exact():
    """A cell both summed into and exchanged is no reduction: accumulating the adds past the exchange would lose
    them (every add after the last exchange must land)."""
    x = np.ones(4096, np.float32)
    s = np.zeros(1, np.float32)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            s[0] += x[i]
            if i == 0:
                qd.atomic_exchange(s[0], 0.0)

    k(x, s)
    # iteration 0's own add comes before its exchange, so it is always lost (adds accumulated past the
    # exchange would give 4096); other threads' adds may land before it too
    assert 0 <= s[0] <= 4095 and s[0] == int(s[0])


def test_bad_targets_and_dtypes_are_clear_errors():
    f = qd.field(qd.i32, shape=())
    g = qd.field(qd.f32, shape=())
    h = qd.field(qd.i16, shape=())
    v = qd.Vector.field(2, qd.i32, shape=())

    @qd.kernel
    def raw_field():
        qd.atomic_cas(f, 0, 1)

    @qd.kernel
    def float_cas():
        qd.atomic_cas(g[None], 0.0, 1.0)

    @qd.kernel
    def narrow():
        qd.atomic_exchange(h[None], 1)

    @qd.kernel
    def vector_cas():
        qd.atomic_cas(v[None], qd.Vector([0, 0]), qd.Vector([1, 1]))

    @qd.kernel
    def constant():
        qd.atomic_exchange(1, 2)

    for kern, cls, words in [(raw_field, qd.QuadrantsSyntaxError, "index it first"),
                             (float_cas, qd.QuadrantsTypeError, "integer dtypes only"),
                             (narrow, qd.QuadrantsTypeError, "32- and 64-bit"),
                             (vector_cas, qd.QuadrantsTypeError, "one component at a time"),
                             (constant, qd.QuadrantsSyntaxError, "non-writable target")]:
        with pytest.raises(cls, match=words):
            kern()


def test_a_swap_on_a_shared_kernel_scope_local_is_refused():
    @qd.kernel
    def k() -> qd.i32:
        s = 0
        for i in range(8):
            qd.atomic_exchange(s, i)
        return s

    with pytest.raises(qd.QuadrantsSyntaxError, match="kernel-scope local"):
        k()


@pytest.mark.archs("interp", "cpu")
def test_reverse_mode_differentiates_an_unused_exchange_as_a_store():
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    y = qd.field(qd.f32, shape=8, needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(8):
            qd.atomic_exchange(y[i], x[i] * x[i])
        for i in range(8):
            loss[None] += 3.0 * y[i]

    x.from_numpy(np.arange(8, dtype=np.float32))
    with qd.ad.Tape(loss):
        k()
    np.testing.assert_allclose(x.grad.to_numpy(), 6.0 * np.arange(8, dtype=np.float32))


@pytest.mark.archs("interp", "cpu")
def test_reverse_mode_refuses_a_swap_whose_old_value_is_used():
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    owner = qd.field(qd.i32, shape=())
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(8):
            if qd.atomic_cas(owner[None], -1, i) == -1:
                loss[None] += x[i]

    with pytest.raises(qd.QuadrantsCompilationError, match="cannot be replayed"):
        k.grad()


@pytest.mark.archs("interp", "cpu")
def test_forward_mode_exchanges_the_tangent():
    x = qd.field(qd.f32, shape=4, needs_dual=True)
    y = qd.field(qd.f32, shape=4, needs_dual=True)
    old = qd.field(qd.f32, shape=4, needs_dual=True)

    @qd.kernel
    def k():
        for i in range(4):
            old[i] = qd.atomic_exchange(y[i], x[i] * x[i])

    x.from_numpy(np.arange(4, dtype=np.float32))
    y.from_numpy(np.full(4, 5.0, np.float32))
    with qd.ad.FwdMode(loss=y, param=x, seed=[1.0, 1.0, 1.0, 1.0]):
        k()
    np.testing.assert_array_equal(y.dual.to_numpy(), 2.0 * np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(old.to_numpy(), np.full(4, 5.0, np.float32))
