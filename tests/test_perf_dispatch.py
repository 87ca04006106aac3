"""`qd.perf_dispatch`: Quadrants' autotuning dispatcher. The choice among arms is checked under a controlled clock
(each arm advances it by a set amount), so no assertion depends on real timings; kernel arms run on every tier."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import qd
from qd.lang import _perf_dispatch as pd


class _Clock:
    """Stands in for the `time` module of `qd.lang._perf_dispatch`: `perf_counter` moves only when an arm runs."""

    def __init__(self) -> None:
        self.now = 0.0
        self.wall = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return self.wall


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(pd, "time", c)
    return c


def _arms(d: Any, clock: _Clock, costs: dict[str, Any], calls: list[str],
          compatible: dict[str, Any] | None = None) -> None:
    """Register one arm per name: it records its call, advances the clock by its cost (a number, or a function of
    `n`) and returns `n * 10`."""
    def make(name: str, cost: Any) -> Any:
        def arm(a: Any, n: int) -> int:
            calls.append(name)
            clock.now += cost(n) if callable(cost) else cost
            return n * 10

        arm.__name__ = name
        return arm

    for name, cost in costs.items():
        d.register(make(name, cost), is_compatible=(compatible or {}).get(name))


def test_times_each_arm_then_keeps_the_fastest(qd_program: object, clock: _Clock,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    syncs: list[int] = []
    monkeypatch.setattr(qd.lang.impl.PyQuadrants, "sync", lambda rt: syncs.append(1))

    @qd.perf_dispatch(get_geometry_hash=lambda a, n: a, first_warmup=2, warmup=1, active=3, repeat_after_count=5,
                      repeat_after_seconds=0)
    def f(a: Any, n: int) -> int: ...

    calls: list[str] = []
    _arms(f, clock, {"slow": 3.0, "fast": 1.0, "mid": 2.0}, calls)
    out = [f("g", i) for i in range(15)]  # 3 arms x (2 untimed + 3 timed), one arm per call, fewest trials first
    assert out == [i * 10 for i in range(15)]
    assert calls == ["slow", "fast", "mid"] * 5
    assert len(syncs) == 2 * 9  # a sync before and after every timed call
    assert f._fastest_dispatch_impl_by_geometry_hash["g"].__name__ == "fast"
    calls.clear()
    for _ in range(4):
        f("g", 1)
    assert calls == ["fast"] * 4
    f("g", 1)  # the 5th call after the choice starts a new round: warm-up 1 (not 2) + 3 timed per arm
    assert calls[-1] == "slow"
    calls.clear()
    _ = [f("g", 1) for _ in range(11)]
    assert sorted(calls) == sorted(["slow"] * 3 + ["fast"] * 4 + ["mid"] * 4)
    assert f._fastest_dispatch_impl_by_geometry_hash["g"].__name__ == "fast"


def test_geometry_keys_are_tuned_apart(qd_program: object, clock: _Clock) -> None:
    @qd.perf_dispatch(get_geometry_hash=lambda a, n: (a, n > 5), repeat_after_count=0)
    def f(a: Any, n: int) -> int: ...

    calls: list[str] = []
    _arms(f, clock, {"a": lambda n: 1.0 if n <= 5 else 5.0, "b": 2.0}, calls)
    for _ in range(4):
        f("x", 1)
    for _ in range(4):
        f("x", 9)
    chosen = {k: v.__name__ for k, v in f._fastest_dispatch_impl_by_geometry_hash.items()}
    assert chosen == {("x", False): "a", ("x", True): "b"}


def test_repeat_after_seconds(qd_program: object, clock: _Clock) -> None:
    @qd.perf_dispatch(get_geometry_hash=lambda a, n: 0, first_warmup=0, repeat_after_seconds=10.0)
    def f(a: Any, n: int) -> int: ...

    calls: list[str] = []
    _arms(f, clock, {"a": 1.0, "b": 2.0}, calls)
    f(0, 0)
    f(0, 0)
    assert f.repeat_after_count is None and 0 in f._fastest_dispatch_impl_by_geometry_hash
    calls.clear()
    clock.wall += 9.0
    f(0, 0)
    assert calls == ["a"]
    clock.wall += 1.0
    f(0, 0)
    f(0, 0)
    assert calls[1:] == ["a", "b"]  # 10 s after the choice: a new round


def test_compatibility_single_and_none(qd_program: object, clock: _Clock) -> None:
    @qd.perf_dispatch(get_geometry_hash=lambda a, n: n)
    def f(a: Any, n: int) -> int: ...

    assert f.repeat_after_count == pd.DEFAULT_REPEAT_AFTER_COUNT and f.repeat_after_seconds is None
    calls: list[str] = []
    _arms(f, clock, {"small": 1.0, "big": 1.0}, calls,
          {"small": lambda a, n: 0 <= n < 3, "big": lambda a, n: n >= 3})
    assert [f(None, n) for n in (1, 1, 7, 7)] == [10, 10, 70, 70]
    assert calls == ["small", "small", "big", "big"]  # one compatible arm: chosen at once, no warm-up
    assert f._times_by_dispatch_impl_by_geometry_hash == {}
    with pytest.raises(qd.QuadrantsRuntimeError, match=r"perf_dispatch 'f': none of its 2 registered "
                                                       r"implementations \('small', 'big'\) is compatible"):
        f(None, -1)


def test_registration_errors(qd_program: object) -> None:
    @qd.perf_dispatch(get_geometry_hash=lambda a, c: 0)
    def f(a: qd.types.NDArray[qd.i32, 1], c: qd.types.NDArray[qd.i32, 1]) -> None: ...

    @f.register
    def by_other_order(c: qd.types.NDArray[qd.i32, 1], a: qd.types.NDArray[qd.i32, 1]) -> None: ...

    for bad in (lambda a, b: None, lambda a: None, lambda a, c, d: None):
        with pytest.raises(qd.QuadrantsSyntaxError, match="PERFDISPATCH_ANNOTATION_SEQUENCE_MISMATCH"):
            f.register(bad)
    with pytest.raises(qd.QuadrantsSyntaxError, match=r"KERNEL_ANNOTATION_ORDER.*put @dispatcher.register above"):
        @qd.kernel
        @f.register
        def wrong_order(a: qd.types.NDArray[qd.i32, 1], c: qd.types.NDArray[qd.i32, 1]) -> None: ...
    with pytest.raises(qd.QuadrantsSyntaxError, match="active=0"):
        qd.perf_dispatch(get_geometry_hash=lambda a: 0, active=0)(lambda a: None)


def test_force_map(qd_program: object, monkeypatch: pytest.MonkeyPatch, clock: _Clock,
                   capsys: pytest.CaptureFixture) -> None:
    assert pd._parse_force_map(" f : b , g:c,,") == {"f": "b", "g": "c"}
    with pytest.raises(ValueError, match="Malformed QD_PERFDISPATCH_FORCE entry 'nocolon'"):
        pd._parse_force_map("nocolon")
    monkeypatch.setattr(pd, "_FORCE_MAP", {"f": "b"})
    monkeypatch.setattr(pd, "_ANY_FORCE_ACTIVE", True)

    @qd.perf_dispatch(get_geometry_hash=lambda a, n: 0)
    def f(a: Any, n: int) -> int: ...

    calls: list[str] = []
    _arms(f, clock, {"a": 1.0, "b": 9.0}, calls)
    for _ in range(5):
        f(None, 0)
    assert calls == ["b"] * 5
    assert "forced to 'b' via QD_PERFDISPATCH_FORCE" in capsys.readouterr().out


def test_kernel_arms(arch: object) -> None:
    """Two kernels computing the same thing by different loops; every call is right, during tuning and after, and
    each arm ran its warm-up and timed calls before one was kept."""

    @qd.perf_dispatch(get_geometry_hash=lambda x, out: x.shape, first_warmup=1, active=2, repeat_after_count=0)
    def prefix(x: qd.types.ndarray(qd.i32, 1), out: qd.types.ndarray(qd.i32, 1)) -> None: ...

    @prefix.register
    @qd.kernel
    def per_element(x: qd.types.ndarray(qd.i32, 1), out: qd.types.ndarray(qd.i32, 1)) -> None:
        for i in x:
            s = 0
            for j in range(i + 1):
                s += x[j]
            out[i] = s

    @prefix.register(is_compatible=lambda x, out: x.shape[0] < 1000)
    @qd.kernel
    def serial(x: qd.types.ndarray(qd.i32, 1), out: qd.types.ndarray(qd.i32, 1)) -> None:
        for _ in range(1):
            s = 0
            for i in range(x.shape[0]):
                s += x[i]
                out[i] = s

    rng = np.random.default_rng(3)
    for step in range(8):
        x = rng.integers(-50, 50, 64).astype(np.int32)
        xs, out = qd.ndarray(qd.i32, 64), qd.ndarray(qd.i32, 64)
        xs.from_numpy(x)
        prefix(xs, out)
        np.testing.assert_array_equal(out.to_numpy(), np.cumsum(x), err_msg=f"call {step}")
    counts = prefix._trial_count_by_dispatch_impl_by_geometry_hash[(64,)]
    assert sorted(d.__name__ for d in counts) == ["per_element", "serial"] and set(counts.values()) == {3}
    assert prefix._fastest_dispatch_impl_by_geometry_hash[(64,)].__name__ in ("per_element", "serial")
    big = qd.ndarray(qd.i32, 1000)
    big.fill(1)
    out = qd.ndarray(qd.i32, 1000)
    prefix(big, out)  # only per_element is compatible
    assert out[999] == 1000
