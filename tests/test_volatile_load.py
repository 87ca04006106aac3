"""`qd.volatile_load` (Quadrants' API): the value on every tier, the flag surviving the pass pipeline and the text
form, a load LLVM's optimiser keeps in its loop on the CPU tier, and clear errors for what cannot be volatile."""

import numpy as np
import pytest

import qd
from qd.ir_parse import parse_kernel
from qd.ir_text import print_kernel


@pytest.fixture(autouse=True)
def _qd(arch):
    yield


def test_volatile_loads_read_the_values_and_keep_their_flag():
    flags = qd.field(qd.i32, shape=8)
    vec = qd.Vector.field(3, qd.f32, shape=())

    @qd.kernel
    def k(out: qd.types.ndarray(qd.f32, 1)):
        for i in range(8):
            v = qd.volatile_load(vec[None])
            out[i] = qd.volatile_load(flags[i]) + qd.volatile_load(flags[0]) + v[0] + v[1] * v[2]

    flags.from_numpy(np.arange(8, dtype=np.int32) * 7 + 3)
    vec[None] = qd.Vector([0.5, 2.0, 4.0])
    out = np.zeros(8, np.float32)
    k(out)
    np.testing.assert_array_equal(out, np.arange(8) * 7 + 3 + 3 + 0.5 + 8.0)
    text = print_kernel(k._last_ck.ir)
    assert text.split("\ntasks {")[1].count("global_load volatile") == 5  # (in the offloaded tasks)
    assert print_kernel(parse_kernel(text)) == text


@pytest.mark.archs("cpu")
def test_the_cpu_tier_keeps_a_volatile_load_in_its_loop():
    """A plain load of a loop-invariant cell is hoisted by LLVM's O3 and the inner loop folded into a multiply;
    a volatile one stays a load in every iteration (a relaxed atomic load), and nothing is folded."""
    import llvmlite.binding as llvm

    from qd.jit.cpu import _machine, _optimise
    from qd.jit.llvm import build_module

    def optimised(volatile: bool) -> str:
        @qd.kernel
        def k(c: qd.types.ndarray(qd.i32, 1), out: qd.types.ndarray(qd.i32, 1), n: qd.i32):
            for i in range(out.shape[0]):
                acc = 0
                for _ in range(n):
                    acc += qd.volatile_load(c[0]) if qd.static(volatile) else c[0]
                out[i] = acc

        out = np.zeros(4, np.int32)
        k(np.array([3], np.int32), out, 5)
        assert out.tolist() == [15] * 4
        tm, target = _machine()
        mod = llvm.parse_assembly(str(build_module(k._last_ck.ir, target, True).module))
        _optimise(mod, tm)
        return next(f for f in str(mod).split("define") if "_body" in f.split("(")[0])  # the range body

    volatile, plain = optimised(True), optimised(False)
    assert "load atomic" in volatile and " mul " not in volatile
    assert "load atomic" not in plain and " mul " in plain


def test_what_cannot_be_volatile_is_a_clear_error():
    flags = qd.field(qd.i32, shape=4)

    @qd.kernel
    def bare_field():
        qd.volatile_load(flags)

    @qd.kernel
    def expression():
        x = 1
        qd.volatile_load(x + 1)

    @qd.kernel
    def local_array():
        v = qd.Vector([0, 0, 0, 0])
        qd.volatile_load(v)

    @qd.kernel
    def local_scalar():
        x = 1
        qd.volatile_load(x)

    for kern, cls, words in [(bare_field, qd.QuadrantsSyntaxError, "Field directly"),
                             (expression, qd.QuadrantsSyntaxError, "lvalue"),
                             (local_array, qd.QuadrantsTypeError, "local array"),
                             (local_scalar, qd.QuadrantsTypeError, "local")]:
        with pytest.raises(cls, match=words):
            kern()


def test_volatile_loads_of_narrow_and_half_elements():
    h = qd.field(qd.f16, shape=4)
    b = qd.field(qd.u1, shape=4)
    c = qd.field(qd.u8, shape=4)
    h.from_numpy(np.array([0.5, 1.5, -2, 3], np.float16))
    b.from_numpy(np.array([1, 0, 1, 0], np.uint8))
    c.from_numpy(np.arange(4, dtype=np.uint8))

    @qd.kernel
    def k(out: qd.types.ndarray(qd.f32, 1)):
        for i in range(4):
            out[i] = (qd.volatile_load(h[i]) + qd.cast(qd.volatile_load(b[i]), qd.f32) * 10
                      + qd.cast(qd.volatile_load(c[i]), qd.f32) * 100)

    out = np.zeros(4, np.float32)
    k(out)
    assert out.tolist() == [10.5, 101.5, 208.0, 303.0]
