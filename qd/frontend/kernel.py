"""`@qd.kernel` / `@qd.func`: the Kernel and Func objects, the instantiation cache and argument conversion.

A kernel call maps its arguments to the signature, checks them (`QuadrantsRuntimeTypeError` naming
the parameter), computes the instantiation key (template values, ndarray dtype/ndim/element shape,
and the config options that change code: default_fp, default_ip, debug, arch), builds the IR on a
miss (`qd.frontend.transformer`) and compiles it with `qd.runtime.launch.compile_kernel`, then runs
`launch(ck, bindings, args)`. Funcs are inlined at every call site inside a kernel being compiled.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from qd import _launch as _clib
from qd import _logging, ir
from qd.runtime import ad_tape as _tape
from qd.ad.forward import forward as _forward
from qd.ad.reverse import reverse as _reverse
from qd.ad.validation import check_reverse_supported as _check_reverse
from qd.ad.validation import stale_read_errors as _stale_read_errors
from qd.ad.validation import validate_global_access as _validate
from qd.errors import QuadrantsCompilationError, QuadrantsRuntimeError, QuadrantsSyntaxError
from qd.frontend import args as _args
from qd.frontend import builder as _bm
from qd.frontend import guards as _guards
from qd.frontend.builder import Builder
from qd.frontend.context import TOO_DEEP, FuncContext, file_stamp, source_of
from qd.frontend.transformer import Transformer, fence
from qd.base import config as _config
from qd.runtime import launch as _launch
from qd.runtime import launch_plan as _launch_plan
from qd.runtime import pyquadrants as _pyq
from qd.types.enums import AutodiffMode

_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()
_MISS = _clib.MISS


def _clear_caches() -> None:
    for k in list(_KERNELS):
        k._instances.clear()
        k._hidden.clear()
        k._plan = k._grad_plan = None


try:
    from qd.runtime import program as _program

    _program.on_reset(_clear_caches)
except (ImportError, AttributeError):  # pragma: no cover
    pass


class Kernel:
    """A `@qd.kernel`: compiled per instantiation key, launched on call."""

    _is_qd_kernel = True
    # Quadrants' mode of a primal kernel: NONE, or VALIDATION while a validating `qd.ad.Tape` holds it.
    autodiff_mode = AutodiffMode.NONE

    def __init__(self, fn: Callable, **options: Any) -> None:
        if getattr(fn, "_qd_dispatch_impl", False):  # `@qd.kernel` above `@dispatcher.register` (`qd.perf_dispatch`)
            raise QuadrantsSyntaxError(
                f"[KERNEL_ANNOTATION_ORDER] @qd.kernel is applied to '{fn.__name__}', an implementation already "
                "registered with a qd.perf_dispatch dispatcher: put @dispatcher.register above @qd.kernel")
        self.fn = fn
        self.options = options
        self._instances: dict[tuple, tuple] = {}  # key -> (compiled kernel, bindings per buffer)
        # key -> the hidden args of that instance, when it has some (`Builder.hidden_args`: `x.grad` reads)
        self._hidden: dict[tuple, tuple] = {}
        # key -> the paths from template arguments to the fields/ndarrays that instance bound (`guards`)
        self._guards: dict[tuple, tuple] = {}
        self._sig: _args.Signature | None = None
        self._last_ir: ir.KernelIR | None = None
        # the compiled launch plans of the instances launched last (`qd/runtime/launch_plan.py`), or None
        self._plan: Any = None
        self._grad_plan: Any = None  # `kernel.grad`'s
        self._primal_launched = False  # a `kernel.grad` after it replays memory the primal wrote (`ck.stale`)
        # per thread: `copies`, what the last primal launch outside a Tape overwrote that its gradient reads
        # (`qd.runtime.ad_snapshots.LaunchCopies`, for one `kernel.grad`), and `used`, set once a kernel.grad took them
        self._before = threading.local()
        # key -> the lock of the thread compiling that instance (others wait for it: `_instance`)
        self._compiling: dict[tuple, threading.Lock] = {}
        self._compiling_lock = threading.Lock()
        self._stamp = file_stamp(fn)  # its file as it was defined (`qd.frontend.context.FuncSource`)
        functools.update_wrapper(self, fn)
        _KERNELS.add(self)

    @property
    def grad(self) -> _GradKernel:
        """`kernel.grad(*same_args)`: runs the reverse-mode instance, accumulating into `.grad`."""
        return _GradKernel(self)

    @property
    def signature(self) -> _args.Signature:
        if self._sig is None:
            self._sig = _args.Signature(self.fn, is_kernel=True)
        return self._sig

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        return _BoundKernel(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        plan = self._plan
        if plan is not None and not kwargs:  # a call shaped like the last one: the compiled launch
            r = plan.launch(args)
            if r is not _MISS:
                return r
        return self._run(args, kwargs, "fwd" if _tape.active_fwd() is not None else "")

    def _run(self, args: tuple, kwargs: dict, mode: str) -> Any:
        """Launches the instance of `mode` ("" primal, "fwd" forward mode, "grad" reverse mode); a primal
        launch inside a `qd.ad.Tape(validation=True)` with debug on runs the "validate" instance."""
        if _bm.current() is not None:
            raise QuadrantsSyntaxError("Kernels cannot call other kernels; decorate the callee with @qd.func")
        if _pyq.pending:  # a field declared since the last materialization (`qd/runtime/pyquadrants.py`)
            _pyq.materialize()
        ad_state = _tape.state()  # this thread's Tape, FwdMode, grad_replaced
        tape = ad_state.tape
        cfg = _bm.cfg()
        if tape is not None and not mode and not ad_state.grad_replaced:
            tape.record(self, args, kwargs)
            if getattr(tape, "validation", False) and cfg.debug:
                mode = "validate"
        sig = self.signature
        values = sig.bind(args, kwargs)
        key, launch_args, post = _args.convert(sig, values)
        key = key + (cfg.default_fp, cfg.default_ip, bool(cfg.debug), getattr(cfg, "arch", None))
        if mode:
            key = key + (mode,)
        nd_grads: tuple = ()
        grad_arrays: list = []
        if mode == "grad":  # ndarray arguments with a gradient: their grads are launched as extra args
            grads = _args.grad_args(sig, values)
            if grads:
                nd_grads = tuple(i for i, _ in grads)
                key = key + (nd_grads,)
                grad_arrays = [g for _, g in grads]
        inst = self._instances.get(key)
        if inst is not None and key in self._guards and _guards.stale(self._guards[key], values):
            # a member reached through a template argument was reassigned: the instance of the new objects
            key = key + ("guards",) + _guards.current(self._guards[key], values)
            inst = self._instances.get(key)
        if inst is None:
            inst = self._instance(key, values, mode, nd_grads)
        ck, bindings = inst
        if mode == "fwd":  # the duals (gradients) this launch uses are this thread's (`qd.runtime.ad_tape.adopt`)
            ad_state.fwd.own(bindings)
        elif tape is not None and mode in ("", "validate") and hasattr(tape, "own"):
            tape.own(bindings)
        if self._hidden and key in self._hidden:  # `x.grad` reads, lifted primitives: after the user's args
            launch_args = list(launch_args) + _args.hidden_args(sig, values, self._hidden[key])
        if grad_arrays:  # the reverse pass appends the grads' ArgDecls after all others
            launch_args = list(launch_args) + grad_arrays
        self._last_ck = ck
        copies = None
        if mode == "grad" and ck.stale is not None and self._primal_launched:
            # the forward kernel ran: its replay would read what it wrote, unless a Tape put those buffers back or
            # the forward launch saved them (`LaunchCopies`)
            before = ad_state.before
            if not before:
                copies, self._before.copies = getattr(self._before, "copies", None), None
                before = copies.ids() if copies is not None else frozenset()
            err = _stale_unserved(ck, bindings, launch_args, before)
            if err is not None:
                raise type(err)(str(err) + (_USED_COPIES.format(name=self.fn.__name__)
                                            if getattr(self._before, "used", False) else ""))
            self._before.used = copies is not None
        if mode in ("", "validate"):
            self._primal_launched = True
            if tape is None or ad_state.grad_replaced:  # a `kernel.grad` may follow: keep what its replay reads
                self._before.copies = _launch_copies(ck, bindings, launch_args)
        if mode == "validate":  # fresh zeroed checkbits for every validated launch
            bindings = [b.zeros() if isinstance(b, _Checkbits) else b for b in bindings]

        taped = None
        if tape is not None and mode in ("", "validate") and hasattr(tape, "launched"):
            # a launch inside a `grad_replaced` function: the Tape never replays its gradient (the function's
            # `grad_for` does), so only its writes matter (to the recorded launches before it)
            taped = _tape_launch(self, ck, bindings, launch_args, not ad_state.grad_replaced)
            if hasattr(tape, "launching"):  # before the launch: the Tape saves what it overwrites (`qd.runtime.ad_snapshots`)
                tape.launching(taped)
        current = copies.put_back() if copies is not None else None
        try:
            result = _launch.launch(ck, bindings, launch_args)
        except RecursionError:  # compiling for a tier at its first launch (GPU code, native code)
            raise self._too_deep() from None
        finally:
            for fn in post:
                fn()
            if current is not None:
                copies.restore(current)
        if taped is not None:
            taped.generations = {r.buffer: getattr(taped.owners[r.buffer], "generation", None) for r in taped.reads}
            tape.launched(taped)
        if mode in ("", "grad"):  # the plan later calls of this shape launch through (primal, or kernel.grad)
            plan = None if tape is not None or nd_grads or ck.stale is not None or _copies_before(ck) \
                or _args.unchecked(key) else \
                _launch_plan.armed(ck, sig, values, bindings, key not in self._hidden, self._guards.get(key, ()))
            if mode:
                self._grad_plan = plan
            else:
                self._plan = plan
        return sig.restructure_return(result)

    @property
    def stats(self) -> dict:
        """Tiering facts of the instance launched last: launches per tier (`interp`, `cpu`), the tier
        of the last launch, compile time in ms and whether native code came from the disk cache; on a GPU
        arch also `device_ms`, the device time of the last launch whose completion was read (timestamps)."""
        ck = getattr(self, "_last_ck", None)
        if ck is not None and getattr(ck, "tier_stats", None) is not None:  # a GPU arch: its launches, device ms
            return ck.tier_stats()
        if ck is None or ck.tier is None:
            return {"launches": {"interp": 0, "cpu": 0}, "last_tier": None, "compile_ms": None,
                    "from_cache": None}
        return ck.tier.stats

    def _instance(self, key: tuple, values: list, mode: str, nd_grads: tuple) -> tuple:
        """The instance of `key`, compiled by the first thread that asks for it while the others wait for it
        (an instance is in `_instances` only once it is complete)."""
        with self._compiling_lock:
            gate = self._compiling.setdefault(key, threading.Lock())
        try:
            with gate:
                inst = self._instances.get(key)
                if inst is None:
                    inst = self._instances[key] = self._compile(values, mode, nd_grads, key)
                return inst
        finally:
            with self._compiling_lock:
                if self._compiling.get(key) is gate:
                    del self._compiling[key]

    def _compile(self, values: list, mode: str = "", nd_grads: tuple = (), key: tuple | None = None) -> tuple:
        """(compiled kernel, bindings per buffer) of one instance. Its hidden args, the (launch arg index
        of x, "grad") entries of the `x.grad` arrays the kernel reads, go to `_hidden[key]`; `_run`
        launches them after the user's args."""
        _pyq.materialize()  # before every compile, as Quadrants (`qd/runtime/pyquadrants.py`)
        _logging.trace(f"Materializing kernel {self.fn.__name__} in {mode or 'primal'} mode...")
        try:
            return self._build(values, mode, nd_grads, key)
        except RecursionError:  # in a pass or a code generator (the frontend positions its own)
            raise self._too_deep() from None

    def _too_deep(self) -> QuadrantsCompilationError:
        code = getattr(self.fn, "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
        return QuadrantsCompilationError(f"{where}kernel {self.fn.__name__}: {TOO_DEEP}")

    def _build(self, values: list, mode: str, nd_grads: tuple, key: tuple | None) -> tuple:
        hidden: list[tuple[int, str]] = []
        k_ir, bindings = build_kernel_ir(self, values, hidden)
        if mode == "grad" and any(h[0] != "lifted" for h in hidden):
            raise QuadrantsRuntimeError(_GRAD_OF_GRAD)
        if mode == "fwd":
            k_ir, bindings = _forward_instance(k_ir, bindings)
        elif mode == "grad":
            k_ir, bindings, stale = _reverse_instance(k_ir, bindings, nd_grads)
        elif mode == "validate":
            k_ir, bindings = _validation_instance(k_ir, bindings)
        self._last_ir = k_ir

        ck = _launch.compile_kernel(k_ir)
        if mode == "grad":
            ck.stale, ck.stale_by_buffer = next(iter(stale.values()), None), stale
        if hidden:
            self._hidden[key] = tuple(hidden)
        sig = self.signature
        guards = _guards.find([(i, v) for i, (p, v) in enumerate(zip(sig.params, values)) if p.kind == "template"],
                              bindings)
        if guards:
            self._guards[key] = guards
        return ck, bindings


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
    `<name>.grad`, appended after the kernel's own args (the frontend appends the grads' launch args). Third:
    the errors of the reads its replay would see stale, by buffer (raised by a launch after the primal ran)."""
    if any(decl.kind != "field" and getattr(b, "grad", None) is not None for decl, b in zip(k_ir.buffers, bindings)):
        raise NotImplementedError("kernel.grad: gradients of ndarrays bound as globals are not supported yet "
                                  "(only fields with needs_grad=True and ndarray arguments)")
    grads = [b for b, decl in enumerate(k_ir.buffers)
             if decl.kind == "field" and getattr(bindings[b], "has_grad", lambda: False)()]
    grads += [b for b, decl in enumerate(k_ir.buffers) if decl.kind == "ndarray" and decl.arg in nd_grads]
    _check_reverse(k_ir, grads)
    stale = _stale_read_errors(k_ir, grads)
    from qd.passes.runner import run_passes

    def rev(k: ir.KernelIR) -> ir.KernelIR:
        nb, na = len(k.buffers), len(k.args)
        out = _reverse(k, grads, adstack=bool(_config.current().ad_stack_experimental_enabled))
        buffers, args = list(out.buffers), list(out.args)
        for j, b in enumerate(grads):
            if k.buffers[b].kind != "ndarray":
                continue
            src = k.args[k.buffers[b].arg]
            ai = na + nd_grads.index(k.buffers[b].arg)
            while len(args) <= ai:
                args.append(None)
            args[ai] = ir.ArgDecl(name=f"{src.name}.grad", kind="ndarray", dtype=src.dtype, buffer=nb + j)
            buffers[nb + j] = dataclasses.replace(buffers[nb + j], arg=ai)
        return dataclasses.replace(out, args=tuple(args), buffers=tuple(buffers))

    k_ir = run_passes(k_ir, [("reverse", rev)])
    return k_ir, bindings + [bindings[b].grad if k_ir.buffers[b].kind == "field" else None for b in grads], stale


_USED_COPIES = (" (kernel.grad of {name} outside a qd.ad.Tape replays its last launch with the values that launch "
                "saved, once: differentiate several launches of {name} inside a qd.ad.Tape)")


def _accesses(ck: Any, bindings: list, launch_args: list) -> tuple:
    """(reads its gradient needs, writes, buffers its gradient reads as they were before it) of a primal instance
    (`qd.ad.stale_reads`; kept on `ck`), the reads without those buffers' (a copy from before the launch serves
    them)."""
    from qd.ad.stale_reads import accesses, before_launch_buffers

    if ck.tape_accesses is None:
        grads = _grad_buffers(ck, bindings, launch_args)
        reads, writes = accesses(ck.ir, grads)
        before = before_launch_buffers(ck.ir, grads) if _writes_a_gradient(ck, grads) else frozenset()
        ck.tape_accesses = ([r for r in reads if r.buffer not in before], writes, before)
    return ck.tape_accesses


def _grad_buffers(ck: Any, bindings: list, launch_args: list) -> list[int]:
    """The buffers of an instance that have a gradient: fields with needs_grad, ndarray arguments with `.grad`."""
    return [b for b, decl in enumerate(ck.ir.buffers)
            if (decl.kind == "field" and getattr(bindings[b], "has_grad", lambda: False)())
            or (decl.kind == "ndarray" and getattr(launch_args[decl.arg], "grad", None) is not None)]


def _writes_a_gradient(ck: Any, grads: list[int]) -> bool:
    """Whether the kernel writes a buffer with a gradient: where it writes none its reverse pass has no adjoint to
    carry and reads nothing stale (Genesis' kernels read fields with gradients and write none: the stale-read
    analysis of their ~10^5 statements cost a third of a warm build)."""
    gs = set(grads)
    return bool(gs) and any(isinstance(s, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)) and s.ptr.buffer in gs
                            for s in ir.walk(ck.ir.body))


def _copies_before(ck: Any) -> bool:
    """Whether primal launches of `ck` save copies for a `kernel.grad` (`_launch_copies`: not through a plan)."""
    return bool(ck.copies_before)


def _launch_copies(ck: Any, bindings: list, launch_args: list) -> Any:
    """The copies a primal launch outside a Tape makes of what it overwrites that its gradient reads as it was
    before it (`qd.runtime.ad_snapshots.LaunchCopies`), or None where there is none or the kernel has no gradient. Which
    buffers is found once per instance (`ck.copies_before`), where it has a buffer with a gradient."""
    if ck.copies_before is not None and not ck.copies_before:  # the common case, on every Python-path launch
        return None
    from qd.runtime.ad_snapshots import LaunchCopies, storage
    from qd.ad.stale_reads import before_launch_buffers

    if ck.copies_before is None:
        grads = _grad_buffers(ck, bindings, launch_args)
        try:
            ck.copies_before = before_launch_buffers(ck.ir, grads) if _writes_a_gradient(ck, grads) else frozenset()
        except RecursionError:  # an analysis too deep for this kernel: no copies, kernel.grad keeps its refusal
            ck.copies_before = frozenset()
    before = ck.copies_before
    if not before:
        return None
    owners = _launch._owners(ck, bindings, launch_args)
    objs = {id(o): o for o in (storage(owners[b]) for b in sorted(before)) if o is not None}
    return LaunchCopies(list(objs.values())) if objs else None


def _tape_launch(kernel: Kernel, ck: Any, bindings: list, launch_args: list, replayed: bool) -> Any:
    """What a Tape keeps of a launch to find reads a later launch overwrites (`qd.ad.stale_reads`): its writes, and
    where the Tape replays its gradient (`replayed`: the launch was recorded) the reads that gradient needs and the
    buffers it needs as they were before the launch (`before_launch_buffers`: their reads are served by the copy
    the Tape saves before the launch, so they are not kept as reads). Its `generations` are set after the launch."""
    from qd.ad.stale_reads import Launch

    reads, writes, before = _accesses(ck, bindings, launch_args)
    if not replayed:
        reads, before = [], frozenset()
    owners = _launch._owners(ck, bindings, launch_args)
    return Launch(kernel.fn.__name__, reads, writes, owners, list(launch_args), [decl.name for decl in ck.ir.buffers],
                  {}, before)


def _stale_unserved(ck: Any, bindings: list, launch_args: list, before: frozenset) -> Exception | None:
    """The error of the first stale read of a `kernel.grad` launch (`ck.stale_by_buffer`) whose object a Tape did
    not put back as it was before the forward launch (`before`: their ids), or None."""
    from qd.runtime.ad_snapshots import storage

    owners = _launch._owners(ck, bindings, launch_args) if before else ()
    for b, err in ck.stale_by_buffer.items():
        obj = storage(owners[b]) if before else None
        if obj is None or id(obj) not in before:
            return err
    return None


class _Checkbits:
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
    extra = [_Checkbits(tuple(k_ir.buffers[b].shape) + tuple(k_ir.buffers[b].elem_shape)) for b in checked]
    return k_ir, bindings + extra


class _GradKernel:
    """`kernel.grad`: called with the kernel's own arguments, launches its reverse-mode instance."""

    autodiff_mode = AutodiffMode.REVERSE

    def __init__(self, kernel: Kernel) -> None:
        self._kernel = kernel

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        plan = self._kernel._grad_plan
        if plan is not None and not kwargs:
            r = plan.launch(args)
            if r is not _MISS:
                return r
        return self._kernel._run(args, kwargs, "grad")


class _BoundKernel:
    """A kernel method bound to an instance (`self` is a template argument)."""

    def __init__(self, kernel: Kernel, obj: Any) -> None:
        self._kernel = kernel
        self._obj = obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._kernel(self._obj, *args, **kwargs)

    @property
    def grad(self) -> Any:
        return lambda *args, **kwargs: self._kernel._run((self._obj,) + args, kwargs, "grad")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)


def build_kernel_ir(kernel: Kernel, values: list, hidden: list | None = None) -> tuple[ir.KernelIR, list]:
    """Build the KernelIR of one instantiation; returns it with the per-buffer field bindings. `hidden`,
    when given, receives the builder's hidden args (`Builder.hidden_args`: `x.grad` of ndarray args)."""
    src = source_of(kernel.fn, kernel._stamp)
    fence(src, is_kernel=True)
    sig = kernel.signature
    b = Builder(kernel.fn.__name__)
    with b.active():
        ctx = FuncContext(src, is_kernel=True, entry_depth=0, fn=kernel.fn)
        ctx.return_type = sig.return_type
        t = Transformer(b, ctx)
        b.loc = src.loc(src.node)
        _args.bind_kernel_params(t, sig, values, src.assigned)
        if sig.return_type is not None:
            from qd.frontend.calls import ret_dtypes

            b.rets = ret_dtypes(sig.return_type)
        t.visit_body(src.node.body)
        k_ir = b.finish(src.loc(src.node))
    if hidden is not None:
        hidden.extend(b.hidden_args)
    return k_ir, list(b.bound_objects)


class Func:
    """A `@qd.func`: inlined into the calling kernel at every call."""

    _is_qd_func = True

    def __init__(self, fn: Callable, is_real_function: bool = False, requires_top_level: bool = False) -> None:
        self.fn = fn
        self.is_real_function = is_real_function
        # Quadrants' `qd.func(requires_top_level=True)`: its loops must stay top-level (parallel) loops
        self.requires_top_level = requires_top_level
        self._sig: _args.Signature | None = None
        self._stamp = file_stamp(fn)  # its file as it was defined (`qd.frontend.context.FuncSource`)
        functools.update_wrapper(self, fn)

    @property
    def signature(self) -> _args.Signature:
        if self._sig is None:
            self._sig = _args.Signature(self.fn, is_kernel=False)
        return self._sig

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        b = _bm.current()
        if b is None:
            raise QuadrantsSyntaxError("Quadrants functions cannot be called from Python-scope; call them from "
                                       "a @qd.kernel (or make this one a kernel)")
        if self.requires_top_level and b.depth > 0:
            raise QuadrantsSyntaxError(
                f"qd.func {self.fn.__name__} is marked requires_top_level=True but is called inside a runtime "
                f"for/if/while (directly or through other funcs): its top-level loops would become serial inner "
                f"loops. Call it at the kernel's top level (qd.static loops are fine)")
        return inline_func(self, b, args, kwargs)


def inline_func(func: Func, b: Builder, args: tuple, kwargs: dict) -> Any:
    src = source_of(func.fn, func._stamp)
    fence(src)
    if b.func_depth > 64:
        raise QuadrantsSyntaxError(f"qd.func {func.fn.__name__} recursed more than 64 levels; recursion must end "
                                   "at compile time through qd.static conditions")
    sig = func.signature
    values = sig.bind(args, kwargs)
    ctx = FuncContext(src, is_kernel=False, entry_depth=b.depth, fn=func.fn)
    ctx.return_type = sig.return_type
    t = Transformer(b, ctx)
    old_loc, old_stack = b.loc, b.call_stack
    b.func_depth += 1
    if old_loc is not None:
        b.call_stack = old_stack + (dataclasses.replace(old_loc, stack=()),)
    try:
        b.loc = src.loc(src.node)
        _args.bind_func_params(t, sig, values)
        t.visit_body(src.node.body)
    finally:
        b.func_depth -= 1
        b.loc, b.call_stack = old_loc, old_stack
    return ctx.return_value


def kernel(fn: Callable | None = None, **options: Any) -> Any:
    """`@qd.kernel` or `@qd.kernel(fastcache=..., pure=..., graph=..., checkpoints=...)` (options accepted)."""
    if fn is None:
        return lambda f: Kernel(f, **options)
    return Kernel(fn, **options)


def func(fn: Callable | None = None, is_real_function: bool = False, requires_top_level: bool = False,
         **options: Any) -> Any:
    """`@qd.func` (also `qd.func(is_real_function=..., requires_top_level=...)`; always inlined)."""
    if fn is None:
        return lambda f: Func(f, is_real_function, requires_top_level)
    return Func(fn, is_real_function, requires_top_level)


def real_func(fn: Callable) -> Func:
    """`@qd.real_func`: inlined like `qd.func` in qd."""
    return Func(fn, True)


def pyfunc(fn: Callable) -> Callable:
    """`@qd.pyfunc`: callable from Python and from kernels (inlined there)."""
    f = Func(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _bm.current() is not None:
            return f(*args, **kwargs)
        return fn(*args, **kwargs)
    return wrapper


def data_oriented(cls: type | None = None, *, template_primitives: bool = True) -> Any:
    """`@qd.data_oriented` (or `@qd.data_oriented(template_primitives=...)`): a class whose methods may be
    `@qd.kernel`s and `@qd.func`s. `self` is a template argument of its kernels, keyed by identity: its
    Python int/float/bool members are compile-time constants baked into the instance (as in Quadrants,
    changing one later does not recompile), while the fields and ndarrays reached through it are re-checked
    at every launch (`qd.frontend.guards`: a reassigned member is never served stale). With
    `template_primitives=False` the primitives a kernel reads through the object (nested objects included)
    are runtime scalar arguments instead, read at every launch (`values.LiftedObject`). qd's kernels and
    funcs bind as methods of any class; the decorator marks the class for the code that checks."""
    def decorate(c: type) -> type:
        c._data_oriented = True
        c._qd_template_primitives = template_primitives
        return c

    return decorate if cls is None else decorate(cls)


def is_data_oriented(obj: Any) -> bool:
    return bool(getattr(obj, "_data_oriented", False))


__all__ = ["Func", "Kernel", "data_oriented", "func", "is_data_oriented", "kernel", "pyfunc", "real_func"]
