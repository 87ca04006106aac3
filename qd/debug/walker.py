"""The debugger's IR walker: runs one thread of an offloaded task, statement by statement.

It executes the same offloaded IR the interpreter's bytecode was lowered from, against the same
numpy buffers, status, print and return buffers of the launch, holding every value as its register
bits; ops go through `qd.debug.opeval` (the interpreter itself), so the walked thread computes
exactly what the interpreter would. Before each statement that starts a new source line (file,
line, inline call chain) and at every loop test it calls `tracer.line(thread, stmt)`; a failing
`Check` calls `tracer.failed(thread, stmt)` before the failure is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from qd import ir
from qd.ad.adstack import OVERFLOW_KIND
from qd.base import abi
from qd.base.abi import register_bits, rng_key
from qd.debug.opeval import Rng, canonical, evaluate
from qd.runtime.status import decode
from qd.types import dtypes as T
from qd.types.dtypes import DataType

BREAK, CONTINUE, RETURNED, FAILED = 1, 2, 3, 4


class DebugError(RuntimeError):
    """Something the walker cannot do the interpreter's way (e.g. an out-of-bounds access without
    `debug=True`, which is undefined behaviour)."""


class Tracer(Protocol):
    def line(self, thread: "Thread", stmt: ir.Stmt) -> None: ...

    def failed(self, thread: "Thread", stmt: ir.Check) -> None: ...


@dataclass
class LaunchEnv:
    """What the walked threads of one launch share with the interpreter's threads."""

    kernel: ir.KernelIR
    arrays: list  # numpy array per buffer (shape + element shape)
    args: list  # launch arguments
    status: np.ndarray
    printbuf: np.ndarray
    printlen: np.ndarray
    rets: np.ndarray
    seed: int
    launch_id: int
    print_ids: dict = field(default_factory=dict)
    stack_counters: dict = field(default_factory=dict)  # counter Alloca -> "adstack k (name)"
    derivative_of: dict = field(default_factory=dict)  # adjoint (or tangent) Alloca -> its primal Alloca
    derivative_label: str = "adj"

    @classmethod
    def make(cls, kernel: ir.KernelIR, **kw: Any) -> "LaunchEnv":
        env = cls(kernel, **kw)
        prints = [s for s in ir.walk_kernel(kernel) if isinstance(s, ir.Print)]
        env.print_ids = {s: i for i, s in enumerate(prints)}
        for s in ir.walk_kernel(kernel):
            if isinstance(s, ir.Check) and kernel.checks[s.check].kind == OVERFLOW_KIND and s.args \
                    and isinstance(s.args[0], ir.LocalLoad):
                env.stack_counters[s.args[0].var] = kernel.checks[s.check].message
        env.derivative_of = _derivative_allocas(kernel)
        if any(b.name.endswith(".dual") for b in kernel.buffers):
            env.derivative_label = "dual"
        return env


def _derivative_allocas(kernel: ir.KernelIR) -> dict:
    """The AD passes declare a float local's adjoint (reverse) or tangent (forward) right after the
    local, at the same location: such a pair of Allocas names the second `<name>.adj` / `.dual`."""
    out = {}
    blocks = [b for t in kernel.tasks for b in (t.prologue, t.body)]
    blocks += [b for blk in list(blocks) for s in ir.walk(blk) for b in s.blocks()]
    for blk in blocks:
        for a, b in zip(blk.stmts, blk.stmts[1:]):
            if isinstance(a, ir.Alloca) and isinstance(b, ir.Alloca) and a.loc is not None and b.loc is a.loc \
                    and a.loc.var:
                out[b] = a
    return out


def _strides(shape: tuple[int, ...]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


class Thread:
    """One walked thread (index `tid`) of task `task_id`."""

    def __init__(self, env: LaunchEnv, task_id: int, tid: int, tracer: Tracer | None) -> None:
        self.env, self.task_id, self.tid, self.tracer = env, task_id, tid, tracer
        self.task: ir.Task = env.kernel.tasks[task_id]
        self.vals: dict = {}
        self.allocas: dict = {}  # Alloca -> bits, in order of first execution
        self.loops: list[tuple[ir.LoopVar, ir.RangeFor]] = []
        self.rng = Rng(rng_key(env.seed, env.launch_id, task_id, 0), tid)
        self.last_key: tuple | None = None
        self.last_depth = 0
        self.frame_keys: dict[int, tuple] = {}  # the last line event of each frame of the call stack
        self.resumed = False
        self.quiet = False  # no line events (the prologue)
        self.current: ir.Stmt | None = None
        self.finished = False

    # -------------------------------------------------------------- running
    def run_prologue(self) -> int:
        """The range task's prologue (its values are read by the body), without line events (a failing
        check still stops). Returns 1 when a check failed, else 0."""
        saved = self.rng
        self.rng, self.quiet = Rng(saved.base, 0), True
        try:
            sig = self.block(self.task.prologue)
        finally:
            self.rng, self.quiet = Rng(saved.base, self.tid), False
        if self.task.var is not None:
            self.vals[self.task.var] = canonical(self.task.var.dtype, self.tid)
        return 1 if sig == FAILED else 0

    def run(self) -> int:
        """Runs the task body for this thread: 0, or 1 (a check failed), or 2 (the kernel returned)."""
        sig = self.block(self.task.body)
        self.finished = True
        return {FAILED: 1, RETURNED: 2}.get(sig, 0)

    def block(self, block: ir.Block) -> int:
        for s in block.stmts:
            if self.tracer is not None and s.loc is not None and not self.quiet:
                self.mark(s)
            sig = _EXEC[type(s)](self, s)
            if sig:
                return sig
        return 0

    def mark(self, s: ir.Stmt, force: bool = False) -> None:
        loc = s.loc
        key = (loc.file, loc.line, loc.stack)
        if key != self.last_key or force:
            depth = len(loc.stack)
            if depth > self.last_depth:  # a new call: the callee's locals of earlier calls are gone
                self.allocas = {a: v for a, v in self.allocas.items() if a.loc is None or a.loc.stack != loc.stack}
            # back on the line of a call after the callee returned (pdb shows no new line event)
            self.resumed = not force and self.frame_keys.get(depth) == key and self.last_depth > depth
            self.frame_keys = {d: k for d, k in self.frame_keys.items() if d < depth}
            self.frame_keys[depth] = key
            self.last_key, self.last_depth, self.current = key, depth, s
            self.tracer.line(self, s)

    # -------------------------------------------------------------- values
    def bits(self, v: ir.Value) -> int:
        return self.vals[v]

    def value(self, v: ir.Value) -> Any:
        return decode(v.dtype, self.vals[v])

    def ptr(self, p: ir.GlobalPtr) -> tuple[np.ndarray, int]:
        arr = self.env.arrays[p.buffer]
        idx = [int(decode(i.dtype, self.vals[i])) for i in p.indices]
        off = sum(i * s for i, s in zip(idx, _strides(arr.shape)))
        if not 0 <= off < arr.size:
            decl = self.env.kernel.buffers[p.buffer]
            raise DebugError(f"{p.loc}: index {tuple(idx)} is out of bounds of {decl.name or decl.kind} "
                             f"(shape {arr.shape}); run with debug=True to check bounds")
        return arr.reshape(-1), off


# ------------------------------------------------------------------ memory


def load_bits(flat: np.ndarray, off: int, dtype: DataType) -> int:
    if dtype.is_float and dtype.bits in (32, 64):
        return int(flat.view(np.uint32 if dtype.bits == 32 else np.uint64)[off])
    if dtype.is_float:
        return int(np.array(np.float32(flat[off])).view(np.uint32))
    return canonical(dtype, int(flat[off]))


def store_bits(flat: np.ndarray, off: int, dtype: DataType, bits: int) -> None:
    if dtype.is_float and dtype.bits in (32, 64):
        flat.view(np.uint32 if dtype.bits == 32 else np.uint64)[off] = bits
    elif dtype.is_float:
        flat[off] = np.float16(np.array(bits, np.uint32).view(np.float32))
    else:
        flat[off] = decode(dtype, bits) if dtype is not T.u1 else bool(bits)


# ------------------------------------------------------------------ statements


def _const(t: Thread, s: ir.Const) -> int:
    t.vals[s] = canonical(s.dtype, register_bits(s.dtype, s.value))
    return 0


def _arg(t: Thread, s: ir.ArgLoad) -> int:
    t.vals[s] = canonical(s.dtype, register_bits(s.dtype, t.env.args[s.index]))
    return 0


def _op(t: Thread, s: ir.OpStmt) -> int:
    t.vals[s] = evaluate(s.op, tuple(a.dtype for a in s.args), s.dtype, tuple(t.vals[a] for a in s.args))
    return 0


def _alloca(t: Thread, s: ir.Alloca) -> int:
    t.allocas.pop(s, None)  # re-declared: moves to the end (the newest binding of its name)
    t.allocas[s] = 0
    return 0


def _local_load(t: Thread, s: ir.LocalLoad) -> int:
    t.vals[s] = t.allocas[s.var]
    return 0


def _local_store(t: Thread, s: ir.LocalStore) -> int:
    t.allocas[s.var] = canonical(s.var.dtype, t.vals[s.value])
    return 0


def _global_ptr(t: Thread, s: ir.GlobalPtr) -> int:
    t.vals[s] = s  # resolved at the access (the same bounds behaviour as the interpreter's address)
    return 0


def _global_load(t: Thread, s: ir.GlobalLoad) -> int:
    flat, off = t.ptr(s.ptr)
    t.vals[s] = load_bits(flat, off, s.dtype)
    return 0


def _global_store(t: Thread, s: ir.GlobalStore) -> int:
    flat, off = t.ptr(s.ptr)
    store_bits(flat, off, s.ptr.dtype, canonical(s.ptr.dtype, t.vals[s.value]))
    return 0


def _atomic(t: Thread, s: ir.AtomicRMW) -> int:
    flat, off = t.ptr(s.ptr)
    old = load_bits(flat, off, s.dtype)
    new = evaluate(s.op, (s.dtype, s.dtype), s.dtype, (old, t.vals[s.value]))
    store_bits(flat, off, s.dtype, new)
    t.vals[s] = old
    return 0


def _swap(t: Thread, s: ir.AtomicSwap) -> int:
    flat, off = t.ptr(s.ptr)
    old = load_bits(flat, off, s.dtype)
    if s.expected is None or old == t.vals[s.expected]:
        store_bits(flat, off, s.dtype, canonical(s.dtype, t.vals[s.value]))
    t.vals[s] = old
    return 0


def _ext_shape(t: Thread, s: ir.ExternalShape) -> int:
    t.vals[s] = canonical(s.dtype, t.env.arrays[s.buffer].shape[s.axis])
    return 0


def _random(t: Thread, s: ir.RandomValue) -> int:
    t.vals[s] = t.rng.draw(s.dtype)
    return 0


def _slot(t: Thread, s: ir.ThreadSlot) -> int:
    t.vals[s] = 0  # walked threads run alone: heap row 0, as the one-thread interpreter windows use
    return 0


def _range_for(t: Thread, s: ir.RangeFor) -> int:
    i, end = int(t.value(s.begin)), int(t.value(s.end))
    first = i
    t.loops.append((s.var, s))
    try:
        while True:
            t.vals[s.var] = canonical(s.var.dtype, i)
            if t.tracer is not None and s.loc is not None and not t.quiet:
                t.mark(s, force=i != first)  # the loop line again at every later iteration's test
            if i >= end:
                return 0
            sig = t.block(s.body)
            if sig == BREAK:
                return 0
            if sig and sig != CONTINUE:
                return sig
            i += 1
    finally:
        t.loops.pop()


def _while(t: Thread, s: ir.While) -> int:
    while True:
        sig = t.block(s.body)
        if sig == BREAK:
            return 0
        if sig and sig != CONTINUE:
            return sig


def _if(t: Thread, s: ir.If) -> int:
    return t.block(s.then if t.value(s.cond) != 0 else s.else_)


def _break(t: Thread, s: ir.Break) -> int:
    return BREAK


def _continue(t: Thread, s: ir.Continue) -> int:
    return CONTINUE


def _return(t: Thread, s: ir.Return) -> int:
    for slot, v in enumerate(s.values):
        t.env.rets[slot] = t.vals[v]
    return RETURNED


def _signed(bits: int) -> int:
    return bits - (1 << 64) if bits >> 63 else bits


def _print(t: Thread, s: ir.Print) -> int:
    env = t.env
    vals = [_signed(t.vals[x]) for x in s.items if isinstance(x, ir.Value)]
    pos = int(env.printlen[0])
    n = abi.PRINT_HEAD + len(vals)
    if pos + n > len(env.printbuf):
        env.status[abi.STATUS_DROPPED] += 1
        return 0
    env.printbuf[pos:pos + n] = [env.print_ids[s], t.tid, len(vals)] + vals
    env.printlen[0] = pos + n
    return 0


def _check(t: Thread, s: ir.Check) -> int:
    if t.value(s.cond) != 0:
        return 0
    if t.tracer is not None:
        t.tracer.failed(t, s)
    st = t.env.status
    if st[abi.STATUS_FLAG] == 0:
        args = [_signed(t.vals[a]) for a in s.args][:abi.MAX_CHECK_ARGS]
        st[abi.STATUS_CHECK], st[abi.STATUS_TID], st[abi.STATUS_NARGS] = s.check, t.tid, len(args)
        st[abi.STATUS_FLAG] = 1
        st[abi.STATUS_ARGS:abi.STATUS_ARGS + len(args)] = args
    return FAILED


def _adstack(t: Thread, s: ir.Stmt) -> int:
    raise DebugError("adstack statements must be lowered before a kernel is debugged")


_EXEC: dict[type, Callable[[Thread, Any], int]] = {
    ir.Const: _const, ir.ArgLoad: _arg, ir.OpStmt: _op, ir.Alloca: _alloca, ir.LocalLoad: _local_load,
    ir.LocalStore: _local_store, ir.GlobalPtr: _global_ptr, ir.GlobalLoad: _global_load,
    ir.GlobalStore: _global_store, ir.AtomicRMW: _atomic, ir.AtomicSwap: _swap, ir.ExternalShape: _ext_shape,
    ir.RandomValue: _random, ir.ThreadSlot: _slot, ir.RangeFor: _range_for, ir.While: _while, ir.If: _if,
    ir.Break: _break, ir.Continue: _continue, ir.Return: _return, ir.Print: _print, ir.Check: _check,
    **{c: _adstack for c in ir.ADSTACK_STMTS},
}
