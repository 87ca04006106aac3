"""The launch path of the host tiers: the runtime's object of a kernel instance, and its launches on the
interpreter and native code (`InterpTier`, `NativeTier`, `TieredTier`: `qd/runtime/tiers.py`'s protocol).

Contract used by the launcher (`qd/runtime/kernel.py`):

    ck = compile_kernel(inst)                   # the runtime's object of a `KernelInstance` (or of a kernel IR)
    result = tiers.tier_for(arch).launch(ck, bindings, args)   # runs it, raises recorded errors, returns rets

- `inst` is a `qd.frontend.instance.KernelInstance` (a bare `KernelIR` is lowered into one first).
- `bindings[b]` for every buffer `b` of kind 'field' is the Field object bound to it (it has `.arr`,
  a C-contiguous numpy array of shape `shape + elem_shape`, and `._bump()` for the generation
  counter); entries for other buffer kinds are None.
- `args[i]` per `ir.args[i]`: kind 'scalar' a Python/numpy number; kind 'ndarray' a C-contiguous
  numpy array whose shape is (outer axes..., *elem_shape), or an object with `.arr` like that (a
  qd Ndarray: its generation counter is bumped when the kernel writes it).
- Returns None, one value, or a tuple, per `ir.rets`.

Launches may come from several Python threads at once, also of one instance: each launch takes a launch
state of its own (`_Scratch`: status, print and return buffers, argument words, registers, adstack heaps)
from the instance's pool and gives it back after, so concurrent launches share nothing they write but the
user's buffers. Stack sizes are computed under the instance's `AdStackPlan.lock` (the size cache and the
while-loop counts are shared).
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd import _interp, _launch, ir
from qd.ad.adstack import OVERFLOW_KIND
from qd.ad.counting import COUNTS_KIND
from qd.base import abi, config
from qd.base import arch as _arch
from qd.base.abi import RC_DONE, register_bits
from qd.bytecode.lower import KernelCode, lower_kernel
from qd.errors import QuadrantsRuntimeError, QuadrantsRuntimeTypeError
from qd.frontend.instance import KernelInstance, lowered
from qd.jit import tiering
from qd.runtime import program, tiers
from qd.runtime.adstack_heap import AdStackHeap, AdStackPlan
from qd.runtime.status import check_error, decode_returns, flush_prints

# Launch numbers (a key of `qd.random`) count from 0 in every program, so that a program started with the
# same `random_seed` draws the same numbers, as in Quadrants. The counter lives in `qd/_launch.pyx`, which
# takes numbers for the compiled launch plans too.
program.on_reset(_launch.reset_launch_ids)


def _forget_loaded_code() -> None:
    """A program shares machine code between identical instances only (`qd.jit.cpu.forget_loaded`; not imported
    here: `import qd` does not load LLVM)."""
    cpu = sys.modules.get("qd.jit.cpu")
    if cpu is not None:
        cpu.forget_loaded()


program.on_reset(_forget_loaded_code)


@dataclass
class CompiledKernel:
    """The runtime's object of one kernel instance (`qd.frontend.instance.KernelInstance`, immutable): the
    instance's facts the launch paths read (copied once, never written), and what the tiers attach to it: launch
    states, tier state and native code, device programs, the launch plan, the adstack plan, AD caches."""

    ir: ir.KernelIR  # the instance's offloaded IR
    written: frozenset  # buffer indices the kernel may write (generation counters)
    written_args: tuple = ()  # (launch arg, buffer) of every ndarray argument it may write (`check_writeable`)
    scratches: list = field(default_factory=list)  # idle launch states (`_Scratch`): one per concurrent launch
    tier: Any = None  # `qd.jit.tiering.TierState` (`tier_state`): native code, background compile, launch counts
    adstack: AdStackPlan | None = None  # sizes and heap of a reverse-mode kernel's adstacks
    counts: np.ndarray | None = None  # a counting kernel's output (`qd/ad/counting.py`)
    device: dict | None = None  # per GPU device: the compiled program and heaps (`qd/runtime/device_launch.py`)
    tier_stats: Any = None  # on a GPU arch: the callable behind `kernel.stats`
    plan: Any = None  # the compiled launch plan (`qd/runtime/launch_plan.py`); False: this instance has none
    stale: Exception | None = None  # the instance's (reverse mode): its first stale read
    stale_by_buffer: Any = field(default_factory=dict)  # the instance's: the first stale read's error by buffer
    # (reads, writes, buffers read as before the launch) a Tape compares across launches (`qd.ad.stale_reads`)
    tape_accesses: Any = None
    tape_reads_of: Any = None  # {buffer: its reads} of `tape_accesses`' reads (`stale_reads.group_reads`)
    copies_before: Any = None  # frozenset: the buffers a primal launch outside a Tape copies for kernel.grad
    inst: Any = None  # the `KernelInstance`
    _code: KernelCode | None = None
    _consts: np.ndarray | None = None

    @functools.cached_property
    def buffer_names(self) -> list:
        """The names of the instance's buffers (a Tape's messages), made once."""
        return [decl.name for decl in self.ir.buffers]

    @property
    def code(self) -> KernelCode:
        """The interpreter's bytecode, lowered at its first use: an instance that runs on a GPU arch (or natively
        from its first launch) may never need it, and its first call does not pay for it."""
        if self._code is None:
            with _LOWERING:  # once: every launch state's registers must come from the same bytecode
                if self._code is None:
                    self._code = lower_kernel(self.ir)
        return self._code

    @property
    def consts(self) -> np.ndarray:
        """(regs, bits) of the bytecode's constants, applied to every register template."""
        if self._consts is None:
            self._consts = np.array(self.code.consts, dtype=np.uint64).reshape(-1, 2)
        return self._consts


_LOWERING = threading.Lock()


def compile_kernel(k: ir.KernelIR | KernelInstance) -> CompiledKernel:
    """The runtime's object of a kernel instance (`qd.frontend.instance.instantiate`), or of a frontend kernel IR
    (lowered into an instance first: the pass pipeline, offload included)."""
    inst = k if isinstance(k, KernelInstance) else lowered(k)
    plan = AdStackPlan(inst.ir) if inst.ir.stacks else None
    if plan is not None and inst.counter is not None:
        plan.counter = compile_kernel(inst.counter)
        plan.counter.counts = plan.counts = np.zeros(max(plan.counted_loops) + 1, dtype=np.int64)
    return CompiledKernel(inst.ir, inst.written, inst.written_args, adstack=plan, stale=inst.stale,
                          stale_by_buffer=inst.stale_by_buffer, inst=inst)


def check_writeable(ck: CompiledKernel, args: Sequence[Any]) -> None:
    """Refuses a read-only numpy array (`flags.writeable` False: `bytes` memory, a read-only view) passed for an
    ndarray argument the kernel writes (stores, atomics; a reverse pass's gradients too): every tier would write
    into it. A read-only array the kernel only reads is fine."""
    for ai, b in ck.written_args:
        a = args[ai]
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            raise read_only_error(ck, b)


def read_only_error(ck: CompiledKernel, b: int) -> QuadrantsRuntimeTypeError:
    """The error for buffer `b` (an ndarray argument) of `ck` bound to a read-only array: its name, the kernel's
    first write into it (file:line), what to pass instead."""
    name = ck.ir.buffers[b].name or f"#{ck.ir.buffers[b].arg}"
    at = next((s.loc for s in ir.walk_kernel(ck.ir) if isinstance(s, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap))
               and s.ptr.buffer == b and s.loc is not None), None)
    where = f" at {at.file}:{at.line}" if at is not None else ""
    return QuadrantsRuntimeTypeError(
        f"Argument '{name}' of kernel {ck.ir.name} is a read-only numpy array (flags.writeable is False: memory of a "
        f"bytes object, a view made read-only), but the kernel writes it{where}. Pass a writeable array: "
        f"{name}.copy(), or np.require({name}, requirements='W') (which copies only when needed)")


def _array_of(obj: Any) -> np.ndarray:
    return obj.arr if hasattr(obj, "arr") else obj


class _NoCode:
    """What `_Scratch` reads of a kernel's bytecode, for launches that run none (native code, a GPU arch's)."""

    nregs = 0
    shape_regs: tuple = ()
    stride_regs: tuple = ()
    operands = np.zeros(0, np.int32)


_NO_CODE = _NoCode()


class _Scratch:
    """The launch state of one running launch of an instance: argument words, status, print and return buffers,
    the interpreter's registers and `Launch`, the adstack heaps. Launches take one from the instance's pool
    (`_take`), so a launch from another thread never shares one, and give it back after."""

    def __init__(self, ck: CompiledKernel, interp: bool = True, host_prints: bool = True) -> None:
        """`interp`: the interpreter runs launches with it (registers and operands from the bytecode; `use_interp`
        adds them later). Native code and GPU launches take the argument words and nothing of the bytecode,
        which a first launch that waits for native code then need not lower. The print buffer (512 KB) only where
        the kernel prints on the host (`host_prints`: not a GPU plan's, whose device has its own): one per
        instance in a process whose heap a compiler left fragmented was resident memory (OpenCL: 0.5 of 0.74 MB
        per kernel; issue 27)."""
        self.args = np.zeros(max(1, len(ck.ir.args)), dtype=np.uint64)
        self.scalars = [(i, a.dtype) for i, a in enumerate(ck.ir.args) if a.kind == "scalar"]
        self.status = np.zeros(abi.STATUS_WORDS, dtype=np.int64)
        prints = host_prints and any(isinstance(s, ir.Print) for s in ir.walk_kernel(ck.ir))
        self.printbuf = np.empty(abi.PRINT_WORDS if prints else 1, dtype=np.int64)  # (its size is the capacity)
        self.printlen = np.zeros(1, dtype=np.int64)
        self.rets = np.zeros(max(1, len(ck.ir.rets)), dtype=np.uint64)
        self.heap = AdStackHeap() if ck.adstack is not None else None
        self.interp = False
        self._registers(ck, ck.code if interp else _NO_CODE)
        self.interp = interp

    def _registers(self, ck: CompiledKernel, code: Any) -> None:
        self.base = np.zeros(max(1, code.nregs), dtype=np.uint64)
        if code is not _NO_CODE and len(ck.consts):
            self.base[ck.consts[:, 0].astype(np.int64)] = ck.consts[:, 1]
        self.tpl = self.base.copy()
        self.shape_regs = np.array([(r, b, a) for (b, a), r in code.shape_regs], np.int64).reshape(-1, 3)
        self.stride_regs = np.array([(r, b, a) for (b, a), r in code.stride_regs], np.int64).reshape(-1, 3)
        self.launch = _interp.Launch(len(ck.ir.buffers), code.operands, self.status, self.printbuf,
                                     self.printlen, self.rets, self.args)

    def use_interp(self, ck: CompiledKernel) -> None:
        """Makes this state fit interpreter launches (the bytecode's registers and operands)."""
        if not self.interp:
            self._registers(ck, ck.code)
            self.interp = True


def _take(ck: CompiledKernel) -> _Scratch:
    """An idle launch state of `ck`, or a new one when every one is in use (by launches in other threads)."""
    try:
        return ck.scratches.pop()  # (atomic: two threads never take the same one)
    except IndexError:
        return _Scratch(ck, interp=False)


def _owners(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> list:
    """The object behind every buffer (a Field, an Ndarray or a raw array; None for scratch)."""
    return [bindings[b] if d.kind == "field" else (args[d.arg] if d.kind == "ndarray" else None)
            for b, d in enumerate(ck.ir.buffers)]


def _arrays(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any], nthreads: int = 1,
            owners: Sequence[Any] | None = None, heap: Any = None) -> list:
    """The array behind every buffer of the kernel, by buffer index (adstack heaps for `nthreads`, in `heap`:
    the launch's `AdStackHeap`)."""
    if owners is None:
        owners = _owners(ck, bindings, args)
    out = []
    for decl, owner in zip(ck.ir.buffers, owners):
        if owner is not None:
            out.append(_array_of(owner))
        elif decl.kind == COUNTS_KIND:
            out.append(ck.counts)
        elif decl.kind.startswith("adstack"):
            # filled by the adstack plan below; a kernel generated from a reverse kernel (the max-reducer's)
            # keeps its buffers but has no stacks: a placeholder
            out.append(None if ck.adstack is not None else np.zeros(1, decl.dtype.np_dtype))
        else:
            out.append(np.zeros(decl.shape, dtype=decl.dtype.np_dtype))
    if ck.adstack is not None:
        ck.adstack.bind(out, owners, args, nthreads, int(config.current().ad_stack_size or 0), heap)
    return out


class HostTier:
    """The launches of the host tiers (interpreter and native code: same memory, same launch state). A host
    tier says which native code runs a launch (`native`; None: the interpreter), once its buffers are bound."""

    name = "interp"

    def compile(self, ck: CompiledKernel) -> Any:
        return ck.code

    def plan(self, ck: CompiledKernel, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
        return None

    def native(self, ck: CompiledKernel, arrays: Sequence[Any], args: Sequence[Any]) -> Any:
        tiering.interpreted(ck.tier or tier_state(ck))
        return None

    def launch(self, ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
        return _host_launch(ck, bindings, args, self.native)


class InterpTier(HostTier):
    """The interpreter: the `interp` arch's tier, and `cpu`'s before native code is there."""


class NativeTier(HostTier):
    """Native code (`qd.jit.cpu`), compiled at the first launch where it is not compiled yet."""

    name = "cpu"

    def compile(self, ck: CompiledKernel) -> Any:
        return tiering.eager(tier_state(ck), ck.ir)

    def plan(self, ck: CompiledKernel, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
        return _launch_plan.arm_host(ck, sig, values, bindings, guards)

    def native(self, ck: CompiledKernel, arrays: Sequence[Any], args: Sequence[Any]) -> Any:
        return tiering.eager(ck.tier or tier_state(ck), ck.ir, launch=True)


class TieredTier(HostTier):
    """The `cpu` arch's tier: the interpreter first, native code later, launch by launch as `qd.jit.tiering`
    decides (`jit="auto"`, `"eager"`, `"interp"`); plans and compiles are the native tier's."""

    name = "cpu"

    def __init__(self, first: HostTier, then: HostTier) -> None:
        self.first, self.then = first, then

    def compile(self, ck: CompiledKernel) -> Any:
        return self.then.compile(ck)

    def plan(self, ck: CompiledKernel, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
        return self.then.plan(ck, sig, values, bindings, guards)

    def native(self, ck: CompiledKernel, arrays: Sequence[Any], args: Sequence[Any]) -> Any:
        return tiering.native_for(ck.tier or tier_state(ck), ck.ir, arrays, args)


INTERP = InterpTier()
TIERED = TieredTier(INTERP, NativeTier())


def host_tier(arch: Any) -> HostTier:
    """The tier of a host arch (`qd.runtime.tiers` asks): `cpu` tiers, every other one interprets."""
    return TIERED if arch is _arch.cpu else INTERP


_STATES = threading.Lock()


def tier_state(ck: CompiledKernel) -> tiering.TierState:
    """The host tiers' state of `ck` (`qd.jit.tiering.TierState`: native code, launch counts), made once."""
    st = ck.tier
    if st is None:
        with _STATES:
            if ck.tier is None:
                ck.tier = tiering.TierState()
            st = ck.tier
    return st


def launch(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """Runs a compiled kernel instance on the tier of the live config's arch (`qd.runtime.tiers`); raises what
    its checks recorded."""
    return tiers.launch(ck, bindings, args)


def _host_launch(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any],
                 native_of: Callable[[CompiledKernel, Sequence[Any], Sequence[Any]], Any]) -> Any:
    """A launch on a host tier: the interpreter, or the native code `native_of` gives once the buffers are
    bound (same memory, same results)."""
    cfg = config.current()
    sc = _take(ck)
    try:
        nthreads, owners, arrays = prepare(ck, bindings, args, sc.heap)
        native = native_of(ck, arrays, args)
        if native is None:
            sc.use_interp(ck)
        st = sc.launch
        st.start(arrays, int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, _launch.next_launch_id(), nthreads)
        if native is not None:
            for i, dtype in sc.scalars:
                sc.args[i] = register_bits(dtype, args[i])
            rc = _run_native(native, st, task_order(ck.ir, len(native.tasks), arrays))
            prints, check_args = native.prints, native.check_args
        else:
            rc = _run_tasks(ck, st, _template(ck, sc, args), task_order(ck.ir, len(ck.code.tasks), arrays))
            prints, check_args = ck.code.prints, ck.code.check_args
        return finish(ck, sc, rc, owners, arrays, args, prints, check_args)
    finally:
        ck.scratches.append(sc)


def prepare(ck: CompiledKernel, bindings: Sequence[Any], args: Sequence[Any],
            heap: AdStackHeap | None = None) -> tuple[int, list, list]:
    """Before a launch runs (shared with the debugger's launch): (threads, buffer owners, buffer arrays),
    with the while-loop counts and the adstack heap (`heap`, the launch's own; a new one if None) in place."""
    cfg = config.current()
    if ck.written_args:
        check_writeable(ck, args)
    nthreads = int(cfg.cpu_max_num_threads or 1)
    owners = _owners(ck, bindings, args)
    ad = ck.adstack
    if ad is None:
        return nthreads, owners, _arrays(ck, bindings, args, nthreads, owners)
    with ad.lock:  # the counting kernel's output and the size cache are the instance's, shared by its launches
        if ad.counter is not None and not cfg.ad_stack_size:
            _count_while_loops(ad, bindings, args)
        return nthreads, owners, _arrays(ck, bindings, args, nthreads, owners, heap)


def finish(ck: CompiledKernel, sc: _Scratch, rc: int, owners: list, arrays: list, args: Sequence[Any],
           prints: list, check_args: list) -> Any:
    """After a launch ran (shared with the debugger's launch): generation bumps, prints, the error a
    check recorded, the return values."""
    _bump_written(ck, owners)
    if sc.printlen[0] or sc.status[abi.STATUS_DROPPED]:
        flush_prints(ck.ir, prints, sc.printbuf, int(sc.printlen[0]), int(sc.status[abi.STATUS_DROPPED]))
    if rc == abi.RC_FAILED or sc.status[abi.STATUS_FLAG]:
        raise _failure(ck, check_args, sc.status, arrays, args)
    if rc == abi.RC_INTERRUPTED:  # a signal handler raised during the launch (Ctrl-C): the kernel stopped early
        raise sc.launch.interruption()
    if rc < 0:
        raise QuadrantsRuntimeError(f"kernel {ck.ir.name}: interpreter hit an invalid opcode")
    return decode_returns(ck.ir.rets, sc.rets) if ck.ir.rets else None


def _count_while_loops(plan: AdStackPlan, bindings: Sequence[Any], args: Sequence[Any]) -> None:
    """Runs the counting kernel (the forward replay, stores dropped) that sizes `while` loop stacks."""
    counter = plan.counter
    plan.counts[:] = 0
    nb = len(counter.ir.buffers) - 1  # its buffers: the kernel's own, then the counts
    tiers.launch_inner(counter, list(bindings[:nb]) + [None], args[:len(counter.ir.args)])


def _failure(ck: CompiledKernel, check_args: list, status: np.ndarray, arrays: list, args: Sequence[Any]) -> Exception:
    decl = ck.ir.checks[int(status[abi.STATUS_CHECK])]
    if decl.kind == OVERFLOW_KIND and ck.adstack is not None:
        forced = int(config.current().ad_stack_size or 0)
        count, cap = int(status[abi.STATUS_ARGS]), int(status[abi.STATUS_ARGS + 1])
        return ck.adstack.overflow_error(decl, count, cap, int(status[abi.STATUS_TID]), forced, arrays, args)
    return check_error(ck.ir, check_args, status)


def _template(ck: CompiledKernel, sc: _Scratch, args: Sequence[Any]) -> np.ndarray:
    """The interpreter's register template: constants, scalar args, extents and strides."""
    tpl = sc.tpl
    np.copyto(tpl, sc.base)
    for reg, index, dtype in ck.code.arg_regs:
        tpl[reg] = register_bits(dtype, args[index])
    sc.launch.fill_template(tpl, sc.shape_regs, sc.stride_regs)
    return tpl


def task_order(k: ir.KernelIR, ntasks: int, arrays: Sequence[Any]) -> Iterable[int]:
    """The tasks a host launch runs, in order: each once, a `qd.graph.do_while` loop's again while its counter
    (read from the host array, after the loop's last task) is nonzero (`ir.task_order`)."""
    if not k.task_loops:
        return range(ntasks)
    return ir.task_order(ntasks, k.task_loops, lambda b: int(np.asarray(arrays[b]).flat[0]))


def _run_native(native: Any, st: Any, order: Iterable[int]) -> int:
    rc = RC_DONE
    for task_id in order:
        t = native.tasks[task_id]
        if t.kind == "serial":
            rc = st.run_native_serial(t.fn, task_id)
        else:
            rc = st.run_native_range(t.prologue, t.fn, task_id, t.min_parallel)
        if rc != RC_DONE:
            break
    if native.unconfirmed is not None:  # code from the disk cache ran: its entry is sound (`qd.codegen.cache`)
        native.ran()
    return rc


def _run_tasks(ck: CompiledKernel, st: Any, tpl: np.ndarray, order: Iterable[int]) -> int:
    rc = RC_DONE
    for task_id in order:
        t = ck.code.tasks[task_id]
        if t.kind == "serial":
            rc = st.run_serial(t.code, tpl, task_id)
        else:
            rc = st.run_range(t.prologue, t.code, tpl, t.var, t.begin, t.end, task_id, t.min_parallel)
        if rc != RC_DONE:
            break
    return rc


def _bump_written(ck: CompiledKernel, owners: Sequence[Any]) -> None:
    for b in ck.written:
        bump = getattr(owners[b], "_bump", None)
        if bump is not None:
            bump()


def sync() -> None:
    """Waits for the GPU devices and raises what their kernels recorded (CPU launches raised already)."""
    from qd.runtime import device

    device.sync_all()


# (last: `launch_plan` imports this module; the native tier's `plan` builds plans with it)
from qd.runtime import launch_plan as _launch_plan  # noqa: E402
