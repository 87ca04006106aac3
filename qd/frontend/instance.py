"""`instantiate`: one kernel instance, built once (frontend -> AD -> passes) and never written after.

A `KernelInstance` is what a kernel compiles to for one instantiation key and mode: the offloaded IR, the
object bound to every buffer, the hidden launch arguments and template guards the launcher needs, what the
kernel writes, and for a reverse-mode instance the reads its replay would see stale. The AD instances are built
here too: forward mode (`qd.ad.FwdMode`: dual buffers), reverse mode (`kernel.grad`: grad buffers, and grad
arguments the reverse pass declares) and validation (`qd.ad.Tape(validation=True)`: checkbit buffers). What a
tier attaches per launch (code, plans, launch states, caches) lives in the runtime's object of the instance
(`qd.runtime.launch.CompiledKernel`), never on it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from qd import ir
from qd.ad.forward import forward as _forward
from qd.ad.reverse import reverse as _reverse
from qd.ad.validation import check_reverse_supported as _check_reverse
from qd.ad.validation import stale_read_errors as _stale_read_errors
from qd.ad.validation import validate_global_access as _validate
from qd.base import config as _config
from qd.base import scoped_profiler as _scoped
from qd.errors import QuadrantsNotImplementedError, QuadrantsRuntimeError
from qd.frontend import guards as _guards
from qd.frontend import kernel as _fk


@dataclass(frozen=True, eq=False)
class KernelInstance:
    """One compiled instantiation of a kernel (immutable: `instantiate` makes it, nothing writes it after)."""

    ir: ir.KernelIR  # offloaded, after the pass pipeline
    source_ir: ir.KernelIR  # as the frontend and AD built it, before the passes
    bindings: tuple  # the object bound to every buffer (a field, a grad or dual field, checkbits; None: an arg's)
    written: frozenset  # buffer indices the kernel may write (generation counters)
    written_args: tuple  # (launch arg, buffer) of every ndarray argument it may write
    hidden: tuple = ()  # the hidden args (`Builder.hidden_args`): `x.grad` reads, ("lifted", ...) primitives
    guards: tuple = ()  # paths from template arguments to the fields/ndarrays it bound (`qd.frontend.guards`)
    stale: Exception | None = None  # a reverse instance's first stale read (`qd.ad.validation.stale_read_errors`)
    stale_by_buffer: Any = None  # the first stale read's error of each buffer (a dict nobody writes)
    counter: KernelInstance | None = None  # the counting kernel that sizes `while`-loop adstacks

    @property
    def name(self) -> str:
        return self.ir.name


_AD_MODES = {"fwd": "forward mode (qd.ad.FwdMode)", "grad": "reverse mode (kernel.grad / qd.ad.Tape)",
             "validate": "qd.ad.Tape(validation=True)"}


def instantiate(kernel: Any, values: list, mode: str = "", nd_grads: tuple = (),
                sources: set | None = None) -> KernelInstance:
    """The instance of `kernel` (a `@qd.kernel`: `fn`, `signature`) for leaf values `values` in `mode` ("" primal,
    "fwd", "grad", "validate"); `nd_grads`: the ndarray arguments whose gradients `kernel.grad` launches;
    `sources` receives the files a pure kernel's build read (`build_kernel_ir`)."""
    hidden: list[tuple[int, str]] = []
    with _scoped.phase(kernel.fn.__name__, "frontend"):
        k_ir, bindings = _fk.build_kernel_ir(kernel, values, hidden, sources)
    if mode == "grad" and any(h[0] != "lifted" for h in hidden):
        raise QuadrantsRuntimeError(_GRAD_OF_GRAD)
    stale: dict = {}
    if mode and any(isinstance(s, ir.GraphDoWhile) for s in k_ir.body.stmts):
        raise QuadrantsNotImplementedError(
            f"kernel {k_ir.name}: {_AD_MODES[mode]} cannot differentiate a kernel with qd.graph.do_while loops (how "
            "often they repeat is read from device memory at run time); differentiate a kernel holding one "
            "iteration's loops and repeat it from the host under the Tape instead")
    with _scoped.phase(k_ir.name, "autodiff") if mode else contextlib.nullcontext():
        if mode == "fwd":
            k_ir, bindings = _forward_instance(k_ir, bindings)
        elif mode == "grad":
            k_ir, bindings, stale = _reverse_instance(k_ir, bindings, nd_grads)
        elif mode == "validate":
            k_ir, bindings = _validation_instance(k_ir, bindings)
    sig = kernel.signature
    guards = _guards.find([(i, v) for i, (p, v) in enumerate(zip(sig.params, values)) if p.kind == "template"],
                          bindings)
    return lowered(k_ir, tuple(bindings), tuple(hidden), guards, next(iter(stale.values()), None), stale)


def lowered(k: ir.KernelIR, bindings: tuple = (), hidden: tuple = (), guards: tuple = (),
            stale: Exception | None = None, stale_by_buffer: dict | None = None) -> KernelInstance:
    """The instance of a frontend kernel IR `k` after the pass pipeline (offload included)."""
    from qd.passes.runner import default_pipeline, run_passes

    with _scoped.phase(k.name, "passes"):
        out = run_passes(k, default_pipeline(_config.current()))
    counter = lowered(out.counter) if out.stacks and out.counter is not None else None
    written = _written_buffers(out)
    written_args = tuple(sorted((out.buffers[b].arg, b) for b in written if out.buffers[b].kind == "ndarray"))
    return KernelInstance(out, k, bindings, written, written_args, hidden, guards, stale,
                          stale_by_buffer if stale_by_buffer is not None else {}, counter)


def _written_buffers(k: ir.KernelIR) -> frozenset:
    return frozenset(s.ptr.buffer for s in ir.walk_kernel(k)
                     if isinstance(s, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)))


_GRAD_OF_GRAD = ("Cannot automatically differentiate through a grad tensor, if you really want to do that, pass the "
                 "grad tensor into the kernel directly")


def _forward_instance(k_ir: ir.KernelIR, bindings: list) -> tuple[ir.KernelIR, list]:
    """The forward-mode (`qd.ad.FwdMode`) version of an instance: every field with a placed `.dual`
    gets a dual buffer, bound to that dual field."""
    duals = [b for b, decl in enumerate(k_ir.buffers)
             if decl.kind == "field" and getattr(bindings[b], "has_dual", lambda: False)()]
    from qd.passes.runner import run_passes

    k_ir = run_passes(k_ir, [("forward", lambda k: _forward(k, duals))])
    return k_ir, bindings + [bindings[b].dual for b in duals]


def _reverse_instance(k_ir: ir.KernelIR, bindings: list, nd_grads: tuple = ()) -> tuple[ir.KernelIR, list, Any]:
    """The reverse-mode (`kernel.grad`) version of an instance: every field with a placed `.grad`
    gets a grad buffer, bound to that grad field; every ndarray argument listed in `nd_grads` (indices
    of its ArgDecl, whose launch value has a `.grad`) gets a grad buffer behind a new ndarray ArgDecl
    `<name>.grad`, which the reverse pass declares after the kernel's own args (the launcher appends the grads'
    launch args). Third: the errors of the reads its replay would see stale, by buffer (raised by a launch after
    the primal ran)."""
    if any(decl.kind != "field" and getattr(b, "grad", None) is not None for decl, b in zip(k_ir.buffers, bindings)):
        raise NotImplementedError("kernel.grad: gradients of ndarrays bound as globals are not supported yet "
                                  "(only fields with needs_grad=True and ndarray arguments)")
    grads = [b for b, decl in enumerate(k_ir.buffers)
             if decl.kind == "field" and getattr(bindings[b], "has_grad", lambda: False)()]
    grads += [b for b, decl in enumerate(k_ir.buffers) if decl.kind == "ndarray" and decl.arg in nd_grads]
    _check_reverse(k_ir, grads)
    stale = _stale_read_errors(k_ir, grads)
    from qd.passes.runner import run_passes

    adstack = bool(_config.current().ad_stack_experimental_enabled)
    k_ir = run_passes(k_ir, [("reverse", lambda k: _reverse(k, grads, adstack=adstack, grad_args=nd_grads))])
    return k_ir, bindings + [bindings[b].grad if k_ir.buffers[b].kind == "field" else None for b in grads], stale


class Checkbits:
    """The binding of a checkbit buffer of a validation instance: zeros made fresh for each launch."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def zeros(self) -> np.ndarray:
        return np.zeros(self.shape, dtype=np.uint8)


def _validation_instance(k_ir: ir.KernelIR, bindings: list) -> tuple[ir.KernelIR, list]:
    """The validation (`qd.ad.Tape(validation=True)`, debug on) version of an instance: every field
    with a placed `.grad` gets a u8 checkbit buffer enforcing the global data access rule."""
    checked = [b for b, decl in enumerate(k_ir.buffers)
               if decl.kind == "field" and getattr(bindings[b], "has_grad", lambda: False)()]
    from qd.passes.runner import run_passes

    k_ir = run_passes(k_ir, [("validate_global_access", lambda k: _validate(k, checked))])
    extra = [Checkbits(tuple(k_ir.buffers[b].shape) + tuple(k_ir.buffers[b].elem_shape)) for b in checked]
    return k_ir, bindings + extra


__all__ = ["Checkbits", "KernelInstance", "instantiate", "lowered"]
