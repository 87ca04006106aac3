"""`@qd.kernel`: the launching Kernel object, its instances and the launch of each call.

A kernel call maps its arguments to the signature, checks them (`QuadrantsRuntimeTypeError` naming
the parameter), computes the instantiation key (template values, ndarray dtype/ndim/element shape,
and the config options that change code: default_fp, default_ip, debug, arch), builds the instance on a
miss (`qd.frontend.instance.instantiate`: frontend, AD, passes) and makes the runtime's object of it
(`qd.runtime.launch.compile_kernel`), then launches it on the live config's tier (`qd.runtime.tiers`). The
compiled launch plan of the last call's shape (`qd/runtime/launch_plan.py`) serves later calls of that shape.
This lives in the runtime, above the frontend: a kernel is compiled by the frontend and launched by the runtime.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

from qd import _launch as _clib
from qd import _logging, ir
from qd.base import config as _config
from qd.base import gcpause
from qd.errors import QuadrantsCompilationError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError
from qd.frontend import args as _args
from qd.frontend import builder as _bm
from qd.frontend import fastcache as _fastcache
from qd.frontend import guards as _guards
from qd.frontend.builder import BuildRecord
from qd.frontend.context import TOO_DEEP, file_stamp
from qd.frontend.instance import Checkbits as _Checkbits
from qd.frontend.instance import KernelInstance, instantiate
from qd.runtime import ad_tape as _tape
from qd.runtime import launch as _launch
from qd.runtime import profiler as _profiler
from qd.runtime import program as _program
from qd.runtime import pyquadrants as _pyq
from qd.runtime import tiers as _tiers
from qd.types.enums import AutodiffMode

_KERNELS: weakref.WeakSet[Kernel] = weakref.WeakSet()
_MISS = _clib.MISS


def _positional(sig: Any, args: tuple, kwargs: dict) -> tuple | None:
    """A call with keywords as the positional arguments a launch plan takes (None where the call does not fit the
    signature: the Python path raises the error)."""
    try:
        return tuple(sig.positional(args, kwargs))
    except QuadrantsSyntaxError:
        return None


def _clear_caches() -> None:
    for k in list(_KERNELS):
        k._instances.clear()
        k._hidden.clear()
        k._plan = k._grad_plan = None


_program.on_reset(_clear_caches)


def _without_stream(kwargs: dict, kernel: Kernel, mode: str) -> dict:
    """A call's keywords without `qd_stream=` (`qd/lang/stream.py`: qd runs every launch in order, which any stream
    allows), after Quadrants' refusals: a launch on a stream inside a Tape, of `kernel.grad`, or of a graph kernel."""
    stream = kwargs["qd_stream"]
    if stream is not None:
        where = ("autodiff (kernel.grad)" if mode == "grad" else
                 "autograd Tape" if _tape.state().tape is not None else
                 "graph=True kernels" if getattr(kernel, "options", {}).get("graph") else None)
        if where is not None:
            raise QuadrantsRuntimeError(f"{kernel.fn.__name__}(..., qd_stream=...): a launch on a stream is not "
                                        f"compatible with {where}; launch it without qd_stream")
    return {k: v for k, v in kwargs.items() if k != "qd_stream"}


def live_instances() -> list:
    """The compiled instances (`CompiledKernel`) of every live kernel."""
    return [ck for k in list(_KERNELS) for ck, _ in list(k._instances.values())]


def _drop_instance(kernel_ref: weakref.ref, key: tuple) -> None:
    """A template argument of instance `key` died: the kernel forgets the instance (and what it kept for it)."""
    kernel = kernel_ref()
    if kernel is None:
        return
    for table in (kernel._instances, kernel._guards, kernel._hidden):
        table.pop(key, None)


def _shown_from_the_call(run: Callable) -> Callable:
    """`run` (a kernel call) with the compile errors and argument type errors it raises shown from the call: their
    traceback cut here, without the frontend's dozens of frames (the message names the kernel's file:line and each
    inlined `qd.func`'s), unless `qd.init(print_full_traceback=True)` asks for qd's own frames. A cause they carry
    (a user's Python function that raised at compile time) keeps its traceback."""

    @functools.wraps(run)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return run(*args, **kwargs)
        except (QuadrantsCompilationError, QuadrantsRuntimeTypeError) as e:
            if _config.current().print_full_traceback:
                raise
            e.__suppress_context__ = True
            raise e.with_traceback(None)  # (a cause `e` carries is kept)

    return call

class Kernel(_clib.KernelEntry):
    """A `@qd.kernel`: compiled per instantiation key, launched on call (`__call__` is `KernelEntry`'s, in C: the
    compiled launch plan first, then `_call`)."""

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
        # what the fastcache did at the last compile (`fastcache=True` kernels: `qd/frontend/fastcache.py`)
        self.src_ll_cache_observations = _fastcache.Observations()
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

    def _call(self, args: tuple, kwargs: dict) -> Any:
        """A call `KernelEntry.__call__` did not launch through the plan: one with keyword arguments (the plan, with
        them made positional), or one the plan missed (the Python path)."""
        if "qd_stream" in kwargs:  # (Quadrants' stream of the launch: qd's launches all keep their order)
            kwargs = _without_stream(kwargs, self, "")
        plan = self._plan
        if plan is not None and kwargs:  # a call shaped like the last one: the compiled launch
            full = _positional(self._sig, args, kwargs)
            r = plan.launch(full) if full is not None else _MISS
            if r is not _MISS:
                return r
        return self._run(args, kwargs, "fwd" if _tape.active_fwd() is not None else "")

    @_shown_from_the_call
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
            # before the launch: the Tape saves what it overwrites (`qd.runtime.ad_snapshots`)
            if hasattr(tape, "launching"):
                tape.launching(taped)
        current = copies.put_back() if copies is not None else None
        try:
            tier = _tiers.tier_for(cfg.arch)  # (the config's: a launch never changes it)
            if cfg.kernel_profiler:  # every launch timed and recorded (`qd/runtime/profiler.py`)
                result = _profiler.timed_launch(_profiler.launch_name(self.fn.__name__, mode), tier, ck,
                                                lambda: tier.launch(ck, bindings, launch_args))
            else:
                result = tier.launch(ck, bindings, launch_args)
            _clib.note_launched(ck)
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
            # (none while the profiler is on: a plan's launch would bypass `timed_launch`)
            plan = None if tape is not None or nd_grads or ck.stale is not None or _copies_before(ck) \
                or _args.unchecked(key) or cfg.kernel_profiler else \
                tier.plan(ck, sig, values, bindings, self._guards.get(key, ())) if key not in self._hidden else None
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
                    self._drop_with(key, values)
                return inst
        finally:
            with self._compiling_lock:
                if self._compiling.get(key) is gate:
                    del self._compiling[key]

    def _drop_with(self, key: tuple, values: list) -> None:
        """The instance of `key` goes when a template argument that keys it by identity dies (a
        `@qd.data_oriented` object made per use): its bindings would keep that object's fields alive, and its id
        may later be another object's (Quadrants' `test_memory::test_oop_memory_leak`)."""
        for v in _args.identity_keyed(self.signature, values):
            try:
                weakref.finalize(v, _drop_instance, weakref.ref(self), key)
            except TypeError:  # (not weakly referenceable: kept, as before)
                pass

    def _compile(self, values: list, mode: str = "", nd_grads: tuple = (), key: tuple | None = None) -> tuple:
        """(compiled kernel, bindings per buffer) of one instance. Its hidden args, the (launch arg index
        of x, "grad") entries of the `x.grad` arrays the kernel reads, go to `_hidden[key]`; `_run`
        launches them after the user's args."""
        _pyq.materialize()  # before every compile, as Quadrants (`qd/runtime/pyquadrants.py`)
        _logging.trace(f"Materializing kernel {self.fn.__name__} in {mode or 'primal'} mode...")
        try:
            with gcpause.paused():  # (full collections of a large program's heap, triggered by the build's objects)
                return self._build(values, mode, nd_grads, key)
        except RecursionError:  # in a pass or a code generator (the frontend positions its own)
            raise self._too_deep() from None

    def _too_deep(self) -> QuadrantsCompilationError:
        code = getattr(self.fn, "__code__", None)
        where = f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""
        return QuadrantsCompilationError(f"{where}kernel {self.fn.__name__}: {TOO_DEEP}")

    def _build(self, values: list, mode: str, nd_grads: tuple, key: tuple | None) -> tuple:
        inst = self._from_fastcache(values, mode, nd_grads, key)
        self._last_ir = inst.source_ir
        ck = _launch.compile_kernel(inst)
        if inst.hidden:
            self._hidden[key] = inst.hidden
        if inst.guards:
            self._guards[key] = inst.guards
        return ck, list(inst.bindings)


    @property
    def _primal(self) -> Kernel:
        """Quadrants' primal of a kernel (`kernel._primal.src_ll_cache_observations`): the kernel itself."""
        return self

    def _from_fastcache(self, values: list, mode: str, nd_grads: tuple, key: tuple | None) -> KernelInstance:
        """The instance: from the fastcache where the kernel is marked for it and its entry is there
        (`qd/frontend/fastcache.py`), otherwise built (frontend, AD, passes) and, for a marked kernel, stored."""
        cfg = _bm.cfg()
        if not _fastcache.wanted(self):
            if cfg.print_non_pure:
                print(f"[FASTCACHE] kernel {self.fn.__name__} is not marked fastcache=True")
            return instantiate(self, values, mode, nd_grads)
        obs = self.src_ll_cache_observations = _fastcache.Observations()
        fc_key = _fastcache.make_key(self, values, key or (), mode, nd_grads, cfg) \
            if _fastcache.active(cfg) and not cfg.print_ir else None
        obs.cache_key_generated = fc_key is not None
        if fc_key is not None:
            inst = _fastcache.load(cfg, fc_key, values, obs, self.fn)
            if inst is not None:
                obs.cache_loaded = True
                return inst
        sources = BuildRecord()
        inst = instantiate(self, values, mode, nd_grads, sources)
        if fc_key is not None:
            obs.cache_stored = _fastcache.store(cfg, fc_key, self, inst, values, sources)
        return inst


_USED_COPIES = (" (kernel.grad of {name} outside a qd.ad.Tape replays its last launch with the values that launch "
                "saved, once: differentiate several launches of {name} inside a qd.ad.Tape)")


def _accesses(ck: Any, bindings: list, launch_args: list) -> tuple:
    """(reads its gradient needs, writes, buffers its gradient reads as they were before it) of a primal instance
    (`qd.ad.stale_reads`; kept on `ck`), the reads without those buffers' (a copy from before the launch serves
    them)."""
    from qd.ad.stale_reads import accesses, before_launch_buffers, group_reads

    if ck.tape_accesses is None:
        grads = _grad_buffers(ck, bindings, launch_args)
        reads, writes = accesses(ck.ir, grads)
        before = before_launch_buffers(ck.ir, grads) if _writes_a_gradient(ck, grads) else frozenset()
        ck.tape_accesses = ([r for r in reads if r.buffer not in before], writes, before)
        ck.tape_reads_of = group_reads(ck.tape_accesses[0])
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
    from qd.ad.stale_reads import before_launch_buffers
    from qd.runtime.ad_snapshots import LaunchCopies, storage

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
    reads_of = ck.tape_reads_of
    if not replayed:
        reads, before, reads_of = [], frozenset(), {}
    owners = _launch._owners(ck, bindings, launch_args)
    return Launch(kernel.fn.__name__, reads, writes, owners, list(launch_args), ck.buffer_names, {}, before,
                  reads_of=reads_of)


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
        if "qd_stream" in kwargs:
            kwargs = _without_stream(kwargs, self._kernel, "grad")
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


def kernel(fn: Callable | None = None, **options: Any) -> Any:
    """Make a function a kernel: `@qd.kernel`, or with options `@qd.kernel(fastcache=True)`.

    A kernel is compiled at its first call for the types of its arguments (and the values of its
    `qd.template()` arguments), then launched on the arch `qd.init` chose. Its parameters are annotated:
    scalars (`qd.f32`, `qd.i32`, ...), `qd.types.ndarray(dtype, ndim)` (numpy arrays, torch tensors and
    `qd.ndarray`s, passed in place), `qd.types.vector/matrix` types, `qd.BufferView[dtype]` and
    `qd.template()`. Fields are read and written as globals. The loop at the top level of the body runs in
    parallel; a kernel may return a scalar, vector or matrix (annotated `-> qd.f32` etc.).

    Options:

    fastcache
        `True`: the kernel reads only its parameters (captured globals are refused or checked), so a new
        process loads its compiled instance from the disk cache without running the frontend or the passes.
    pure
        The same as `fastcache` (Quadrants' older spelling; `@qd.pure` above `@qd.kernel` too).
    graph
        `True`: the kernel's top-level loops run in order as one graph; `while qd.graph.do_while(c):` loops
        may appear in it (on `qd.cuda` they run on the device as CUDA graphs).

    Other options Quadrants accepts (`checkpoints`, ...) are accepted and have no effect.

    The returned `Kernel` is called like the function. `kernel.grad(*args)` runs its reverse-mode
    version (gradients accumulate into the `.grad` of the fields it read); `kernel.stats` says which tier
    ran the last launch and how long compiling took.

    Errors: a construct qd cannot compile raises `qd.QuadrantsSyntaxError` / `qd.QuadrantsCompilationError`
    at the first call, naming the line; an argument of the wrong type raises `qd.QuadrantsRuntimeTypeError`.
    With `qd.init(debug=True)` a failed bounds check or `assert` raises `qd.QuadrantsAssertionError`.
    """
    if fn is None:
        return lambda f: Kernel(f, **options)
    return Kernel(fn, **options)


def pure(k: Any) -> Any:
    """`@qd.pure` above `@qd.kernel`: as `@qd.kernel(fastcache=True)` (deprecated in Quadrants for that spelling)."""
    if isinstance(k, Kernel):
        k.options = {**k.options, "pure": True}
    else:
        k.is_pure = True
    return k


__all__ = ["Kernel", "kernel", "pure"]
