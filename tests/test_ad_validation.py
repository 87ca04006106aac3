"""The global data access rule checker (`qd/ad/validation.py`): inside `qd.ad.Tape(validation=True)` with
`qd.init(debug=True)`, a launch that writes a field element (with a grad) it has read raises
`QuadrantsAssertionError` with Quadrants' message; without debug the tape only warns."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd import ir
from qd.ad.validation import validate_global_access
from qd.frontend.kernel import build_kernel_ir
from qd.passes.offload import offload
from tests.conftest import init_arch

N = 16
RULE = r"\(kernel=broke_rule\) Breaks the global data access rule\. Snode b is overwritten unexpectedly\."


def _debug(arch: object, debug: bool = True) -> None:
    qd.reset()
    init_arch(arch, debug=debug)


def _fields():
    x = qd.field(dtype=qd.f32, shape=N, needs_grad=True)
    loss = qd.field(dtype=qd.f32, shape=(), needs_grad=True)
    b = qd.field(dtype=qd.f32, shape=(), needs_grad=True)
    x.from_numpy(np.arange(N, dtype=np.float32))
    b[None] = 10
    return x, loss, b


def test_read_then_write_raises(arch: object) -> None:
    _debug(arch)
    x, loss, b = _fields()

    @qd.kernel
    def broke_rule():
        loss[None] = x[1] * b[None]
        b[None] += 100

    with pytest.raises(qd.QuadrantsAssertionError, match=RULE):
        with qd.ad.Tape(loss=loss, validation=True):
            broke_rule()
    # Outside a validating tape the same kernel runs its primal instance.
    broke_rule()
    assert b[None] == 110


def test_in_place_update_in_parallel_loop_raises(arch: object) -> None:
    _debug(arch)
    x, loss, _ = _fields()

    @qd.kernel
    def double():
        for i in x:
            x[i] = x[i] * 2.0

    with pytest.raises(qd.QuadrantsAssertionError, match="Snode x is overwritten unexpectedly"):
        with qd.ad.Tape(loss=loss, validation=True):
            double()


def test_writes_to_other_fields_pass(arch: object) -> None:
    _debug(arch)
    x, loss, b = _fields()
    y = qd.field(dtype=qd.f32, shape=N, needs_grad=True)
    scratch = qd.field(dtype=qd.f32, shape=())  # no grad: not checked

    @qd.kernel
    def square():
        for i in x:
            y[i] = x[i] * x[i] * b[None]
        scratch[None] = scratch[None] + 1.0

    @qd.kernel
    def reduce():
        for i in y:
            loss[None] += y[i]

    with qd.ad.Tape(loss=loss, validation=True) as t:
        square()
        reduce()
        square()  # checkbits start from zero on every launch
    assert len(t.calls) == 3
    xs = np.arange(N, dtype=np.float32)
    assert loss[None] == pytest.approx(float(np.sum(xs * xs * 10)))
    np.testing.assert_allclose(x.grad.to_numpy(), 2 * xs * 10, rtol=1e-6)
    assert b.grad[None] == pytest.approx(float(np.sum(xs * xs)))


def test_grad_replaced_launches_are_not_validated(arch: object) -> None:
    _debug(arch)
    x, loss, b = _fields()

    @qd.kernel
    def broke_rule():
        loss[None] = x[1] * b[None]
        b[None] += 100

    @qd.ad.grad_replaced
    def wrapped():
        broke_rule()

    @qd.ad.grad_for(wrapped)
    def wrapped_grad():
        pass

    with qd.ad.Tape(loss=loss, validation=True):
        wrapped()
    assert b[None] == 110


def test_without_debug_warns_and_the_tape_replays_the_read_value(arch: object) -> None:
    """Without debug mode the validating instance does not run (Quadrants warns); Quadrants then gives x.grad from
    the overwritten b (110). qd's Tape saves b before the launch that reads and then overwrites it and replays the
    gradient with the value read (`qd.runtime.ad_snapshots`): x.grad[1] = 10; b ends as the forward pass left it."""
    _debug(arch, debug=False)
    x, loss, b = _fields()

    @qd.kernel
    def broke_rule():
        loss[None] = x[1] * b[None]
        b[None] += 100

    with pytest.warns(Warning, match="Debug mode is disabled, autodiff valid check will not work"), \
            qd.ad.Tape(loss=loss, validation=True):
        broke_rule()
    assert b[None] == 110
    assert x.grad[1] == 10.0 and b.grad[None] == 1.0


def test_without_a_tape_the_gradient_replays_the_saved_read_once(arch: object) -> None:
    """`kernel.grad` alone after the forward launch: the launch copied b (its gradient reads b as it was before it)
    and the gradient replays that copy (x.grad[1] = 10, not Quadrants' 110); b keeps what the launch left. A second
    `kernel.grad` of the same launch would replay b = 110: refused (`qd.ad.stale_reads`), naming the line."""
    _debug(arch, debug=False)
    x, loss, b = _fields()

    @qd.kernel
    def broke_rule():
        loss[None] = x[1] * b[None]
        b[None] += 100

    broke_rule()
    loss.grad[None] = 1.0
    broke_rule.grad()
    assert x.grad[1] == 10.0 and b.grad[None] == 1.0
    assert b[None] == 110
    with pytest.raises(qd.QuadrantsCompilationError, match=r"`b` is read here.*loss\[None\] = x\[1\] \* b"):
        broke_rule.grad()


def test_pass_appends_checkbit_buffers(qd_program: object) -> None:
    x = qd.field(dtype=qd.f32, shape=(4, 3), needs_grad=True)
    y = qd.field(dtype=qd.f32, shape=(4, 3))

    @qd.kernel
    def k():
        for i, j in x:
            y[i, j] = x[i, j]
            x[i, j] += 1.0

    k_ir, bindings = build_kernel_ir(k, [])
    checked = [b for b, d in enumerate(k_ir.buffers) if bindings[b] is x]
    v = validate_global_access(k_ir, checked)
    extra = v.buffers[len(k_ir.buffers):]
    assert [(d.dtype, d.shape, d.name) for d in extra] == [(qd.u8, (4, 3), k_ir.buffers[checked[0]].name
                                                             + ".checkbit")]
    checks = [s for s in ir.walk(v.body) if isinstance(s, ir.Check)]
    assert len(checks) == 1 and "Breaks the global data access rule" in v.checks[checks[0].check].message
    with pytest.raises(ValueError):
        validate_global_access(offload(k_ir), checked)


def test_adjoint_checkbit_follows_debug_and_placed_grad(arch: object) -> None:
    # As in Quadrants, in debug mode every float field with a placed `.grad` has checkbits (needs_grad,
    # lazy_grad or an explicit place of `.grad`); a field without a placed grad has none.
    _debug(arch)
    a = qd.field(qd.f32, shape=(), needs_grad=True)
    b = qd.field(qd.f32)
    c = qd.field(qd.f32)
    qd.root.place(b, b.grad, c)
    d = qd.field(qd.i32, shape=3)
    assert a.snode.ptr.has_adjoint_checkbit() and b.snode.ptr.has_adjoint_checkbit()
    assert not c.snode.ptr.has_adjoint_checkbit() and not d.snode.ptr.has_adjoint_checkbit()
    qd.root.lazy_grad()
    assert c.snode.ptr.has_adjoint_checkbit() and not d.snode.ptr.has_adjoint_checkbit()
    _debug(arch, debug=False)
    e = qd.field(qd.f32, shape=(), needs_grad=True)
    assert e.snode.ptr.has_adjoint() and not e.snode.ptr.has_adjoint_checkbit()


def test_validating_tape_marks_and_restores_autodiff_mode(arch: object) -> None:
    from qd.types.enums import AutodiffMode

    _debug(arch)
    x, loss, b = _fields()

    @qd.kernel
    def mul():
        loss[None] = x[1] * b[None]

    @qd.ad.no_grad
    def side():
        mul()

    assert mul.autodiff_mode is AutodiffMode.NONE and mul.grad.autodiff_mode is AutodiffMode.REVERSE
    with qd.ad.Tape(loss=loss, validation=True) as t:
        for _ in range(3):
            mul()
        side()
        assert [f for f, _ in t.calls] == [mul, mul, mul, side]
        # Each entry is the mode the function had when recorded (the first launch switched `mul`).
        assert t.modes == [AutodiffMode.NONE, AutodiffMode.VALIDATION, AutodiffMode.VALIDATION, AutodiffMode.NONE]
        assert mul.autodiff_mode is AutodiffMode.VALIDATION and side.autodiff_mode is AutodiffMode.VALIDATION
    # On exit every function gets back the mode it had before the tape, repeated launches included.
    assert mul.autodiff_mode is AutodiffMode.NONE and side.autodiff_mode is AutodiffMode.NONE
    assert loss[None] == 10.0
    with qd.ad.Tape(loss=loss) as t2:
        mul()
        assert t2.modes == [AutodiffMode.NONE] and mul.autodiff_mode is AutodiffMode.NONE
