"""Frontend error reporting: exception types, file:line positions, source lines, argument checks."""

import numpy as np
import pytest

import qd
from qd.errors import (QuadrantsCompilationError, QuadrantsIndexError, QuadrantsNameError,
                       QuadrantsRuntimeTypeError, QuadrantsSyntaxError, QuadrantsTypeError)

HERE = __file__


@pytest.fixture(autouse=True)
def _qd():
    qd.init(arch=qd.interp)
    yield
    qd.reset()


def _check(excinfo, what: str, line_text: str) -> None:
    msg = str(excinfo.value)
    assert msg.startswith(HERE + ":"), msg
    assert line_text in msg, msg
    assert what in msg, msg


def test_with_is_syntax_error():
    @qd.kernel
    def k():
        with open("x"):
            pass

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "'with' statements are not supported", 'with open("x"):')


def test_try_in_kernel_is_syntax_error():
    @qd.kernel
    def k():
        try:
            pass
        except Exception:
            pass

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "'try' statements are not supported", "        try:")


def test_lambda_is_syntax_error():
    @qd.kernel
    def k():
        f = lambda: 1  # noqa: E731, F841

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "lambda", "f = lambda: 1")


def test_undefined_name():
    @qd.kernel
    def k():
        a = undefined_thing + 1  # noqa: F821, F841

    with pytest.raises(QuadrantsNameError) as e:
        k()
    _check(e, 'Name "undefined_thing" is not defined', "a = undefined_thing + 1")


def test_wrong_index_count():
    x = qd.field(qd.f32, shape=(2, 2))

    @qd.kernel
    def k():
        x[0] = 1.0

    with pytest.raises(QuadrantsIndexError) as e:
        k()
    _check(e, "Field with dim 2 accessed with indices of dim 1", "x[0] = 1.0")


def test_break_in_parallel_loop():
    @qd.kernel
    def k():
        for i in range(3):
            break

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "parallel", "break")


def test_return_inside_loop():
    @qd.kernel
    def k() -> qd.i32:
        for i in range(3):
            return i
        return 0

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "Return inside non-static if/for", "return i")


def test_return_without_annotation():
    @qd.kernel
    def k():
        return 1

    with pytest.raises(QuadrantsSyntaxError) as e:
        k()
    _check(e, "must be annotated with a return type", "return 1")


def test_float_bit_op_type_error():
    @qd.kernel
    def k(a: qd.f32):
        b = a & 1  # noqa: F841

    with pytest.raises(QuadrantsTypeError) as e:
        k(1.0)
    _check(e, "unsupported operand type(s) for '&'", "b = a & 1")


def test_runtime_value_as_python_bool():
    @qd.kernel
    def k(a: qd.i32):
        if qd.static(a > 0):
            pass

    with pytest.raises(QuadrantsSyntaxError) as e:
        k(1)
    _check(e, "qd.static", "qd.static(a > 0)")


def test_error_inside_func_points_at_func_line():
    @qd.func
    def bad(x):
        return x + nothing_here  # noqa: F821

    @qd.kernel
    def k():
        bad(1)

    with pytest.raises(QuadrantsNameError) as e:
        k()
    _check(e, "nothing_here", "return x + nothing_here")


def test_kernel_arg_type_errors():
    @qd.kernel
    def k(a: qd.i32, arr: qd.types.ndarray(dtype=qd.i32, ndim=1)):
        pass

    with pytest.raises(QuadrantsRuntimeTypeError, match="'a'"):
        k(np.zeros(3), np.zeros(3, np.int32))
    with pytest.raises(QuadrantsRuntimeTypeError, match="dtype i32"):
        k(1, np.zeros(3, np.float32))
    with pytest.raises(QuadrantsRuntimeTypeError, match="ndim 1"):
        k(1, np.zeros((3, 3), np.int32))
    with pytest.raises(QuadrantsRuntimeTypeError, match="'a'"):
        k(1.5, np.zeros(3, np.int32))


def test_func_called_from_python_scope():
    @qd.func
    def f():
        pass

    with pytest.raises(QuadrantsSyntaxError, match="Python-scope"):
        f()


def test_static_assert():
    @qd.kernel
    def k():
        qd.static_assert(1 + 1 == 3, "math is broken")

    with pytest.raises(QuadrantsCompilationError, match="math is broken"):
        k()


def test_assert_in_debug_mode():
    qd.init(arch=qd.interp, debug=True)

    @qd.kernel
    def k(a: qd.i32):
        assert a > 0, f"a must be positive, got {a}"

    k(1)
    with pytest.raises(qd.QuadrantsAssertionError, match="a must be positive, got -3"):
        k(-3)
        qd.sync()


def test_grad_of_an_empty_kernel_runs():
    @qd.kernel
    def k():
        pass

    k.grad()  # reverse mode is tests/test_ad_reverse.py
