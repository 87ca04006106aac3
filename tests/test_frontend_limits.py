"""The frontend's limits end in a Quadrants error naming file:line, never in a hang or a bare RecursionError:

- a long `a + b + c + ...` chain compiles (its left spine is walked in a loop, not by recursion), on every tier;
  what still nests too deeply (a 900-deep right-nested `**`) is a QuadrantsCompilationError at its line that says
  to split the expression;
- `unrolling_limit` (default 32, as in Quadrants): a `qd.static` loop past it warns (SyntaxWarning at the loop's
  line, Quadrants' behaviour), one past 256 times it is refused (it would compile for minutes), before unrolling
  where its length is known.
"""

import importlib.util
import warnings

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError, QuadrantsSyntaxError
from qd.runtime import launch as _launch

HERE = __file__


def _module(tmp_path, name: str, body: str):
    """A module holding `body` (one-line expressions longer than a test file should hold), imported."""
    path = tmp_path / f"{name}.py"
    path.write_text("import qd\n\n" + body)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


_TERMS = 1200


def _long_sum(tmp_path):
    expr = " + ".join(f"x[{i % 4}] * {1 + i % 3}.0" for i in range(_TERMS))
    mod, _ = _module(tmp_path, "qd_long_sum", "@qd.kernel\n"
                     "def total(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):\n"
                     "    for i in range(1):\n"
                     f"        y[0] = {expr}\n")
    return mod.total


def test_a_long_sum_compiles_and_is_exact(arch, tmp_path):
    total = _long_sum(tmp_path)
    x = np.array([1.0, 2.0, 4.0, 8.0], np.float32)
    y = np.zeros(1, np.float32)
    total(x, y)
    qd.sync()
    assert y[0] == sum(float(x[i % 4]) * (1 + i % 3) for i in range(_TERMS))


@pytest.mark.archs("interp", "cpu")
def test_a_long_sum_differentiates(arch, tmp_path):
    total = _long_sum(tmp_path)
    x = qd.ndarray(qd.f32, 4, needs_grad=True)
    y = qd.ndarray(qd.f32, 1, needs_grad=True)
    y.grad.from_numpy(np.ones(1, np.float32))
    total.grad(x, y)
    want = [sum(1 + i % 3 for i in range(_TERMS) if i % 4 == j) for j in range(4)]
    np.testing.assert_array_equal(x.grad.to_numpy(), np.array(want, np.float32))


def test_an_expression_nested_too_deeply_names_its_line(qd_program, tmp_path):
    expr = "x[0]" + " ** x[1]" * 900  # `**` nests to the right: 900 levels
    mod, path = _module(tmp_path, "qd_deep_pow", "@qd.kernel\n"
                        "def deep(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:\n"
                        f"    return {expr}\n")
    with pytest.raises(QuadrantsCompilationError) as info:
        mod.deep(np.ones(2, np.float32))
    msg = str(info.value)
    assert msg.startswith(f"{path}:5:"), msg[:200]
    assert "split the expression into several statements" in msg
    assert len(msg) < 2000  # the 7000-character line is cut in the frame
    assert "RecursionError" not in msg


def test_recursion_past_the_frontend_names_the_kernel(qd_program, monkeypatch):
    """A pass or code generator that recurses too deeply: the error names the kernel's file:line, as the
    frontend's does."""
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            x[i] = 1.0

    def too_deep(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(_launch, "compile_kernel", too_deep)
    with pytest.raises(QuadrantsCompilationError, match="split the expression") as info:
        k(np.zeros(2, np.float32))
    assert str(info.value).startswith(f"{HERE}:{k.fn.__code__.co_firstlineno}: kernel k:")


# ------------------------------------------------------------------ unrolling_limit

def _unrolled(n):
    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)):
        for i in range(x.shape[0]):
            for j in qd.static(n):  # the static loop of _unrolled
                x[i] += j

    return k


def _loop_line() -> int:
    with open(HERE) as f:
        return next(n for n, line in enumerate(f, 1) if "the static loop of _unrolled" in line)


def _run(n, **options) -> tuple[np.ndarray, list]:
    qd.init(arch=qd.interp, log_level="warn", **options)
    try:
        x = np.zeros(2, np.int32)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _unrolled(n)(x)
        return x, [w for w in caught if issubclass(w.category, SyntaxWarning)]
    finally:
        qd.reset()


def test_unrolling_past_the_limit_warns_at_the_loop():
    x, caught = _run(range(32))
    assert x[0] == sum(range(32)) and caught == []
    x, caught = _run(range(33))
    assert x[0] == sum(range(33))
    assert len(caught) == 1
    assert (caught[0].filename, caught[0].lineno) == (HERE, _loop_line())
    assert "more than 32 iterations" in str(caught[0].message)
    x, caught = _run(range(40), unrolling_limit=0)  # 0: no limit, no warning (Quadrants')
    assert x[0] == sum(range(40)) and caught == []
    x, caught = _run(iter(range(500)), unrolling_limit=2)  # length unknown before unrolling; 500 <= 256 * 2
    assert x[0] == sum(range(500)) and len(caught) == 1


@pytest.mark.parametrize("n, options", [(range(100000), {}), (range(10 ** 20), {}),
                                        (qd.ndrange(1000, 1000), {}), (qd.grouped(qd.ndrange(10 ** 5, 10 ** 5)), {}),
                                        (iter(range(600)), {"unrolling_limit": 2})],
                         ids=["range", "huge-range", "ndrange", "grouped", "iterator"])
def test_unrolling_far_past_the_limit_is_refused(n, options):
    with pytest.raises(QuadrantsSyntaxError, match=r"unrolls .* iterations, more than 256 x unrolling_limit") as info:
        _run(n, **options)
    assert str(info.value).startswith(f"{HERE}:{_loop_line()}:")
    assert "unrolling_limit" in str(info.value) and "runtime loop" in str(info.value)
