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


def _helper_with_a_bad_attribute():
    @qd.func
    def helper(a):
        return a.nonexistent + 1

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = helper(x[i])

    return k


def test_a_syntax_error_in_a_func_names_every_frame_and_hides_qds():
    """An error in an inlined `qd.func` names the kernel's call site and the func's line (a SyntaxError's message
    is `msg`, which the outer frames once did not reach), and its traceback holds the call and the re-raise only,
    not the frontend's frames, unless `print_full_traceback`."""
    k = _helper_with_a_bad_attribute()
    with pytest.raises(QuadrantsSyntaxError) as e:
        k(np.zeros(3, np.float32))
    msg = str(e.value)
    assert "x[i] = helper(x[i])" in msg and "return a.nonexistent + 1" in msg, msg
    assert msg.index(", in k:\n") < msg.rindex(", in helper:\n"), msg  # (outermost first, as Python prints)
    files = [str(fr.path) for fr in e.traceback]
    assert not any("/qd/frontend/" in f for f in files), files
    assert sum("/qd/" in f for f in files) <= 3, files  # (the plan, `_call`, the re-raise)
    assert e.value.__cause__ is None and e.value.__suppress_context__

    qd.init(arch=qd.interp, print_full_traceback=True)
    k = _helper_with_a_bad_attribute()
    with pytest.raises(QuadrantsSyntaxError) as e:
        k(np.zeros(3, np.float32))
    assert any("/qd/frontend/" in str(fr.path) for fr in e.traceback)


def test_an_argument_type_error_is_shown_from_the_call():
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), n: qd.i32):
        for i in x:
            x[i] = n

    with pytest.raises(QuadrantsRuntimeTypeError, match="Argument 'n'") as e:
        k(np.zeros(3, np.float32), "a")
    assert not any("/qd/frontend/" in str(fr.path) for fr in e.traceback)


def test_an_error_from_user_code_at_compile_time_is_named():
    """A user's Python function that raises while the kernel compiles (here through `qd.static`): the compile error
    names its exception and message at the kernel's line."""
    def shape_of(n):
        raise ValueError(f"no shape for {n}")

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in qd.static(range(shape_of(3))):
            x[i] = 1.0

    with pytest.raises(QuadrantsCompilationError) as e:
        k(np.zeros(3, np.float32))
    assert "ValueError: no shape for 3" in str(e.value) and "qd.static(range(shape_of(3)))" in str(e.value)


def test_precision_loss_warns_at_the_line():
    """Quadrants' warning when a store may lose precision (the promoted type of the two is not the place's):
    `acc = 0; acc += 0.5 * i` truncates. At the statement's file:line, once per line; not for a widening store or
    an int literal the place holds."""
    x = qd.field(qd.u8, shape=4)

    @qd.kernel
    def k(n: qd.i32) -> qd.i32:
        acc = 0
        for i in range(n):
            acc += 0.5 * i
        b = 1
        b = 2.5
        c = 0.0
        c = 3
        for j in range(4):
            x[j] = 3
            x[j] += 1
        d: qd.f32 = qd.f64(1.5)
        return acc + b + qd.cast(c + d, qd.i32)

    with pytest.warns(qd.errors.QuadrantsTypeWarning) as record:
        assert k(4) == (0 + 0 + 1 + 1) + 2 + 4
    got = sorted((w.lineno, str(w.message).split(" (in")[0]) for w in record)
    first = k.fn.__code__.co_firstlineno
    assert got == [(first + 4, "Atomic add may lose precision: i32 <- f32"),
                   (first + 6, "Assign may lose precision: i32 <- f32"),
                   (first + 12, "Assign may lose precision: f32 <- f64")], got
    assert all(w.filename == HERE for w in record)
    np.testing.assert_array_equal(x.to_numpy(), np.full(4, 4, np.uint8))
