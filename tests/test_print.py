"""Kernel `print`: Quadrants' output format (floats `%f`, format specs, f-strings, str.format,
matrices), collected during the launch and written at its end."""

from __future__ import annotations

import pytest

import qd


@pytest.fixture(autouse=True)
def _program(arch):
    """Every test runs on every tier (the `arch` fixture of conftest.py inits and resets)."""
    yield


def _lines(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if ln.startswith("TEST_PRINT:")]


def test_scalar_formats_match_quadrants(capfd):
    a = qd.field(qd.f32, 4)

    @qd.kernel
    def func():
        a[0] = 1.0
        print("TEST_PRINT: a[0] =", a[0])
        print(f"TEST_PRINT: a[0] = {a[0]}")
        print(f"TEST_PRINT: a[0] = {a[0]:.1f}")
        print(f"TEST_PRINT: a[0] = {a[0]:.1}")
        print("TEST_PRINT: a[0] = {}".format(a[0]))
        print("TEST_PRINT: a[0] = {:.1f}".format(a[0]))
        print("TEST_PRINT: a[3] = {3:.3f}, a[2] = {2:.2f}, a[1] = {1:.1f}, a[0] = {0:.0f}".format(
            a[0], a[1], a[2], a[3]))
        print(f"TEST_PRINT: {a[0] = :.1f}")

    func()

    qd.sync()  # GPU archs flush kernel prints at sync
    assert _lines(capfd.readouterr().out) == [
        "TEST_PRINT: a[0] = 1.000000",
        "TEST_PRINT: a[0] = 1.000000",
        "TEST_PRINT: a[0] = 1.0",
        "TEST_PRINT: a[0] = 1.0",
        "TEST_PRINT: a[0] = 1.000000",
        "TEST_PRINT: a[0] = 1.0",
        "TEST_PRINT: a[3] = 0.000, a[2] = 0.00, a[1] = 0.0, a[0] = 1",
        "TEST_PRINT: a[0] = 1.0",
    ]


def test_matrix_formats_match_quadrants(capfd):
    @qd.kernel
    def func():
        m = qd.Matrix([[2e1, 3e2, 4e3], [5e4, 6e5, 7e6]], qd.f32)
        print("TEST_PRINT: m =", m)
        print(f"TEST_PRINT: m = {m:.1f}")
        print("TEST_PRINT: m = {:e}".format(m))
        print(f"TEST_PRINT: {m = :g}")

    func()

    qd.sync()  # GPU archs flush kernel prints at sync
    assert _lines(capfd.readouterr().out) == [
        "TEST_PRINT: m = [[20.000000, 300.000000, 4000.000000], [50000.000000, 600000.000000, 7000000.000000]]",
        "TEST_PRINT: m = [[20.0, 300.0, 4000.0], [50000.0, 600000.0, 7000000.0]]",
        "TEST_PRINT: m = [[2.000000e+01, 3.000000e+02, 4.000000e+03], [5.000000e+04, 6.000000e+05, 7.000000e+06]]",
        "TEST_PRINT: m = [[20, 300, 4000], [50000, 600000, 7e+06]]",
    ]


def test_parallel_prints_are_all_collected(capfd):
    @qd.kernel
    def func(n: qd.i32):
        for i in range(n):
            print("TEST_PRINT:", i, i * 2)

    func(100)

    qd.sync()  # GPU archs flush kernel prints at sync
    got = sorted(_lines(capfd.readouterr().out), key=lambda s: int(s.split()[1]))
    assert got == [f"TEST_PRINT: {i} {2 * i}" for i in range(100)]


def test_assert_message_formats_runtime_values(arch):
    qd.init(arch=arch, debug=True, log_level="warn", enable_fallback=False)

    @qd.kernel
    def func(v: qd.f32):
        for i in range(4):
            assert v < 1.0, f"v too large: {v:.2f} at {i}"

    with pytest.raises(qd.QuadrantsAssertionError, match=r"v too large: 1\.50 at 0"):
        func(1.5)
