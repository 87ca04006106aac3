"""A qd ndarray's argument conversion is kept on it per parameter (`args._leaf`: Genesis passes ~450 ndarrays in
dataclass arguments to every launch, and converting them was most of a step). What was kept must never stand in for
a check or a key it does not hold: another parameter's annotation, arg checks switched on again, a freed array."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pytest

import qd


def test_the_kept_conversion_answers_only_its_own_parameter(arch: Any) -> None:
    @qd.kernel
    def f32_1d(a: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            a[i] += 1.0

    @qd.kernel
    def i32_1d(a: qd.types.ndarray(qd.i32, 1)):
        for i in range(a.shape[0]):
            a[i] += 1

    a = qd.ndarray(qd.f32, shape=4)
    for _ in range(3):
        f32_1d(a)
        with pytest.raises(qd.QuadrantsRuntimeTypeError, match="dtype"):
            i32_1d(a)  # refused every time: another parameter, another annotation
    np.testing.assert_array_equal(a.to_numpy(), np.full(4, 3.0, np.float32))


def test_switching_arg_checks_back_on_checks_again(arch: Any) -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.f32, 1)):
        for i in range(a.shape[0]):
            a[i] += 1.0

    a = qd.ndarray(qd.f64, shape=4)
    saved = builtins.__dict__.get("__debug__", True)
    try:
        builtins.__dict__["__debug__"] = False  # Genesis' switch (`qd.lang._template_mapper`): taken as it is
        k(a)
        k(a)
        builtins.__dict__["__debug__"] = True
        with pytest.raises(qd.QuadrantsRuntimeTypeError, match="dtype"):
            k(a)
    finally:
        builtins.__dict__["__debug__"] = saved
    np.testing.assert_array_equal(a.to_numpy(), np.full(4, 2.0))
