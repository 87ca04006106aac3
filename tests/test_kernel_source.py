"""A kernel's source is found without `inspect.getsourcelines` (`qd/frontend/context.py: _quick_source`, whose
tokenizer costs a new process ~8 ms at its first kernel): the same lines as inspect's, or inspect itself where
the quick cut is not one definition."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsNameError
from qd.frontend.context import _quick_source


def _decorated(
    x: qd.types.ndarray(qd.f32, 1),
    k: qd.f32,
) -> None:  # a signature closed at the def's indentation
    for i in range(x.shape[0]):
        x[i] += k
        # a comment at the end


def _ends_in_text_at_column_zero() -> str:
    return """first
second at column zero"""


def test_quick_source_equals_inspect() -> None:
    for fn in (_decorated, test_quick_source_equals_inspect, _quick_source):
        lines, start, _ = _quick_source(fn)
        assert (lines, start) == tuple(inspect.getsourcelines(fn))


def test_falls_back_where_the_cut_is_not_one_definition() -> None:
    assert _quick_source(_ends_in_text_at_column_zero) is None
    assert _quick_source(lambda x: x) is None


def test_kernel_with_such_a_signature_runs_and_errors_point_at_its_lines(qd_program) -> None:
    kernel = qd.kernel(_decorated)
    x = np.zeros(4, np.float32)
    kernel(x, 2.0)
    np.testing.assert_array_equal(x, np.full(4, 2.0, np.float32))

    @qd.kernel
    def bad(
        x: qd.types.ndarray(qd.f32, 1),
    ):
        for i in range(x.shape[0]):
            x[i] = undefined_name  # noqa: F821

    with open(__file__) as f:
        where = next(n for n, text in enumerate(f, 1) if "= undefined_name" in text)
    with pytest.raises(QuadrantsNameError, match="undefined_name") as info:
        bad(x)
    assert f"{__file__}:{where}:" in str(info.value)
