"""Regression tests for compatibility bugs found by running Quadrants' own test suite against qd
(`tools/quadrants_compat/run.sh`). Each test is qd's own, checked against numpy or closed forms."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError


@pytest.fixture(autouse=True)
def _qd(arch):
    """Every test runs on every tier (the `arch` fixture of conftest.py inits and resets)."""
    yield


def _make_kernel(target):
    @qd.kernel
    def k(v: qd.i32):
        target[0] = v

    return k


def test_kernels_from_one_def_resolve_their_own_closure():
    # Every kernel made by one `def` shares a code object: each must still see its own captured field.
    a, b = qd.field(qd.i32, shape=1), qd.field(qd.i32, shape=1)
    ka, kb = _make_kernel(a), _make_kernel(b)
    ka(3)
    kb(5)
    assert (a[0], b[0]) == (3, 5)


def test_kernel_from_one_def_after_reinit(arch):
    from tests.conftest import init_arch

    for value in (7, 9):
        init_arch(arch)
        f = qd.field(qd.i32, shape=1)
        _make_kernel(f)(value)
        assert f[0] == value


def test_primitive_types_module_and_lang_util():
    from qd.types import primitive_types

    assert qd.f32 in primitive_types.real_types and qd.u1 in primitive_types.integer_types
    assert id(qd.i64) in primitive_types.type_ids and int in primitive_types.all_types
    assert qd.lang.util.has_pytorch() in (True, False)
    assert qd.lang.util.in_python_scope()


def test_vector_and_matrix_ndarray_classes():
    v = qd.Vector.ndarray(3, qd.f64, 5)
    m = qd.Matrix.ndarray(2, 4, qd.i32, (2, 3))
    s = qd.ndarray(qd.i32, 8)
    assert isinstance(v, qd.VectorNdarray) and isinstance(m, qd.MatrixNdarray)
    assert isinstance(qd.ndarray(qd.types.vector(2, qd.f32), 4), qd.VectorNdarray)
    assert (v.n, m.n, m.m) == (3, 2, 4) and not hasattr(s, "n")
    assert (v._get_element_size(), v._get_nelement()) == (24, 5)
    assert (m._get_element_size(), m._get_nelement()) == (32, 6)
    assert (s._get_element_size(), s._get_nelement()) == (4, 8)


def test_num_ndarrays_counts_live_ones():
    prog = qd.lang.impl.get_runtime().prog
    base = prog._get_num_ndarrays()
    nd = qd.ndarray(qd.f32, (10,))
    assert prog._get_num_ndarrays() == base + 1
    del nd
    import gc

    gc.collect()
    assert prog._get_num_ndarrays() == base


def test_dtype_predicates():
    assert qd.types.is_signed(qd.i8) and qd.types.is_signed(qd.f32) and not qd.types.is_signed(qd.u16)
    assert qd.types.is_integral(qd.u1) and not qd.types.is_integral(qd.f64)
    assert qd.types.is_real(qd.f16) and not qd.types.is_real(qd.i32)
    assert qd.types.is_tensor(qd.types.vector(3, qd.f32)) and not qd.types.is_tensor(qd.f32)


def test_is_extension_enabled_and_template_annotation():
    assert qd.is_extension_enabled(qd.extension.data64)
    assert not qd.is_extension_enabled(qd.extension.sparse)
    x = qd.field(qd.i32, shape=3)

    @qd.kernel
    def fill(t: qd.Template, v: qd.i32):
        for i in t:
            t[i] = v

    fill(x, 4)
    assert x.to_numpy().tolist() == [4, 4, 4]


def test_runtime_default_ip_setter_and_math_types_follow_defaults(arch):
    from tests.conftest import init_arch

    rt = qd.lang.impl.get_runtime()
    rt.default_ip = qd.i64
    assert qd.cfg.default_ip is qd.i64
    init_arch(arch, default_ip=qd.i64, default_fp=qd.f64)
    assert qd.field(qd.math.ivec2, ()).dtype is qd.i64
    assert qd.math.vec3.dtype is qd.f64 and qd.math.mat2.dtype is qd.f64
    init_arch(arch)
    assert qd.math.vec3 == qd.types.vector(3, qd.f32) and qd.math.ivec3.dtype is qd.i32


def test_error_messages_use_quadrants_wording():
    nd = qd.ndarray(qd.f32, (4, 4))
    with pytest.raises(QuadrantsIndexError, match=r"2d ndarray indexed with 1d indices"):
        nd[0]

    @qd.kernel
    def nonint():
        for i in qd.ndrange((1.1, 10.5)):
            pass

    with pytest.raises(QuadrantsTypeError, match=r"integer scalar or a tuple/list of \(int, int\)"):
        nonint()

    @qd.kernel
    def dims():
        for i in qd.ndrange(4, 4):
            pass

    with pytest.raises(QuadrantsSyntaxError, match="number of the loop variables not equal to the dimension"):
        dims()

    @qd.kernel
    def brk():
        for i in range(3):
            break

    with pytest.raises(QuadrantsSyntaxError, match="Cannot break in the outermost loop"):
        brk()


def test_fence_messages_name_the_node_and_scope():
    @qd.kernel
    def raises():
        raise Exception()

    with pytest.raises(QuadrantsSyntaxError, match='Unsupported node "Raise"'):
        raises()

    @qd.kernel
    def defines():
        def inner():
            pass

    with pytest.raises(QuadrantsSyntaxError, match="Function definition is not allowed in 'qd.kernel'"):
        defines()

    @qd.func
    def f():
        def inner():
            pass

    @qd.kernel
    def calls_f():
        f()

    with pytest.raises(QuadrantsSyntaxError, match="Function definition is not allowed in 'qd.func'"):
        calls_f()


def test_integral_only_unary_ops_reject_floats():
    @qd.kernel
    def bit_not(x: qd.f32) -> qd.i32:
        return ~x

    @qd.kernel
    def logical_not(x: qd.f32) -> qd.i32:
        return not x

    for k in (bit_not, logical_not):
        with pytest.raises(QuadrantsTypeError, match="takes integral inputs only"):
            k(1.0)


@pytest.mark.parametrize("short_circuit", [True, False])
def test_and_or_have_python_value_semantics(arch, short_circuit):
    from tests.conftest import init_arch

    init_arch(arch, short_circuit_operators=short_circuit)

    @qd.kernel
    def and_(x: qd.i32, y: qd.i32) -> qd.i32:
        return x and y

    @qd.kernel
    def or_(x: qd.i32, y: qd.i32) -> qd.i32:
        return x or y

    @qd.kernel
    def mixed(x: qd.i32, y: qd.f32) -> qd.f32:
        return x and y

    for x, y in [(1, 2), (2, 1), (0, 1), (1, 0), (0, 0), (-3, 7)]:
        assert and_(x, y) == (x and y)
        assert or_(x, y) == (x or y)
    assert mixed(1, 2.5) == 2.5 and mixed(0, 2.5) == 0.0


def test_error_frames_list_every_inlined_func_call_site():
    @qd.func
    def inner():
        undefined_fn()  # noqa: F821

    @qd.func
    def middle():
        inner()

    @qd.kernel
    def k():
        middle()

    with pytest.raises(qd.QuadrantsNameError) as e:
        k()
    msg = str(e.value)
    assert msg.startswith(__file__ + ":")
    frames = [line for line in msg.splitlines() if line.startswith('File "')]
    assert [f.rsplit(" in ", 1)[1] for f in frames] == ["k:", "middle:", "inner:"]
    assert "        middle()\n        ^^^^^^^^\n" in msg and "  # noqa: F821\n        ^^^^^^^^^^^^\n" in msg


def test_builtin_all_any_and_static_conditional_iterable():
    out = qd.field(qd.i32, shape=4)

    @qd.kernel
    def k(a: qd.f32, use_range: qd.template()):
        v = qd.Vector([a, 1.0, 2.0])
        out[0] = all(v > 0)
        out[1] = any(v < 0)
        s = 0
        for i in range(3) if qd.static(use_range) else qd.static(range(5)):
            s += i
        out[2] = s

    k(1.0, True)
    assert out.to_numpy()[:3].tolist() == [1, 0, 3]
    k(-1.0, False)
    assert out.to_numpy()[:3].tolist() == [0, 1, 10]


def test_print_specs_are_printf_conversions(capfd):
    @qd.kernel
    def k(i: qd.i32, f: qd.f32, u: qd.u32):
        print("P:", "{:.10d} {:.2} {:.3G} {:x} {:lli}".format(i, f, f, u, i))
        print(f"P: {i:.4d} {f:.1f} {True} {1.23} {2:.3}")
        print("P: {2} {1} {} {k}".format(3, 2, 1, k=i))

    k(5, 233.3, 255)
    qd.sync()
    out = [line for line in capfd.readouterr().out.splitlines() if line.startswith("P:")]
    assert out == ["P: 0000000005 233.30 233 ff 5", "P: 0005 233.3 True 1.23 002", "P: 1 2 3 5"]


def test_print_spec_and_format_argument_errors():
    @qd.kernel
    def wrong_conv(i: qd.i32):
        print("{:u}".format(i))

    @qd.kernel
    def too_many():
        print("{0} {1}".format(1, 2, 3))

    @qd.kernel
    def unused_kw(k: qd.f32):
        print("".format(k=k))

    @qd.kernel
    def missing_kw():
        print("{k}".format())

    with pytest.raises(QuadrantsTypeError, match="'u' doesn't match 'i32'"):
        wrong_conv(1)
    with pytest.raises(QuadrantsSyntaxError, match=r"Expected 2 positional argument\(s\), but received 3"):
        too_many()
    with pytest.raises(QuadrantsSyntaxError, match="Keyword 'k' not used"):
        unused_kw(1.0)
    with pytest.raises(QuadrantsSyntaxError, match="Keyword 'k' not found"):
        missing_kw()


def test_python_scope_element_writes_go_through():
    x = qd.Vector.ndarray(4, qd.i32, 5)
    a = qd.Matrix.ndarray(2, 2, qd.f32, 3)
    f = qd.Vector.field(3, qd.f32, shape=4, offset=(-1,))
    x[1][0] = 1
    x[2][3] = 2
    a[1][0, 1] = 1.5
    f[2][1] = 7.5
    assert x.to_numpy()[1].tolist() == [1, 0, 0, 0] and x.to_numpy()[2].tolist() == [0, 0, 0, 2]
    assert a.to_numpy()[1].tolist() == [[0.0, 1.5], [0.0, 0.0]]
    assert f.to_numpy()[3].tolist() == [0.0, 7.5, 0.0] and f[2][1] == 7.5


def test_matrix_fill_in_kernel_is_in_place():
    out = qd.Matrix.field(2, 3, qd.f32, shape=2)

    @qd.kernel
    def k(v: qd.f32):
        m = qd.Matrix([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
        m.fill(v)
        out[0] = m
        out[1].fill(v * 2)

    k(1.25)
    assert out.to_numpy().tolist() == [[[1.25] * 3] * 2, [[2.5] * 3] * 2]


def test_constant_false_assert_fails_at_run_time_in_debug(arch):
    qd.init(arch=arch, debug=True, log_level="warn")

    @qd.kernel
    def func():
        assert 0

    with pytest.raises(AssertionError, match="assert 0"):
        func()
    qd.init(arch=arch, debug=False, log_level="warn")

    @qd.kernel
    def quiet():
        assert False

    quiet()  # asserts are not checked without debug


def test_integer_pow_negative_exponent_is_a_runtime_error_in_debug(arch):
    qd.init(arch=arch, debug=True, log_level="warn")
    z = qd.field(qd.i32, shape=())

    @qd.kernel
    def foo(x: qd.i32, y: qd.template()):
        z[None] = x**y

    @qd.kernel
    def bar(x: qd.i32, y: qd.i32):
        z[None] = x**y

    with pytest.raises(qd.QuadrantsRuntimeError, match="Negative exponent"):
        foo(10, -10)
    bar(3, 4)
    assert z[None] == 81
    with pytest.raises(qd.QuadrantsRuntimeError, match="exponent is -1"):
        bar(3, -1)


def test_local_matrix_runtime_index_is_bound_checked(arch):
    qd.init(arch=arch, check_out_of_bound=True, log_level="warn")

    @qd.kernel
    def access_vec(i: qd.i32) -> qd.i32:
        x = qd.Vector([1, 0])
        x[i] = 42
        return x[i]

    @qd.kernel
    def access_mat(i: qd.i32, j: qd.i32) -> qd.i32:
        y = qd.Matrix([[1, 1, 1], [2, 2, 2], [3, 3, 3]])
        y[i, j] = 42
        return y[i, j] + y[0, 0]

    assert access_vec(1) == 42
    assert access_mat(2, 2) == 43
    for fn, args, what in ((access_vec, (2,), "index 2 is out of \\[0, 2\\)"),
                           (access_vec, (-1,), "index -1"),
                           (access_mat, (3, 0), "axis 0 of a local matrix"),
                           (access_mat, (0, -1), "axis 1 of a local matrix")):
        with pytest.raises(qd.QuadrantsAssertionError, match=f"Out of bound access.*{what}"):
            fn(*args)


def test_grad_field_indexed_inside_a_kernel(arch):
    x = qd.field(qd.f32, shape=4, needs_grad=True)

    @qd.kernel
    def seed():
        for i in range(4):
            x.grad[i] = i * 2.0
            x[i] = x.grad[i] + 1

    seed()
    assert x.grad.to_numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert x.to_numpy().tolist() == [1.0, 3.0, 5.0, 7.0]
