"""Offloaded `KernelIR` -> one `llvmlite.ir.Module`, written once for every LLVM target.

Target differences go through a `qd.jit.targets.Target`. Each task becomes C-callable functions of
the driver's ABI (`Ctx` is qd/_interp.pyx's Ctx plus `uint64_t* args` at the end):

    int32_t <prefix>_task<N>(Ctx*)                       serial: 0, 1 (a check failed), 2 (returned)
    void    <prefix>_prologue<N>(Ctx*, int64_t* be)      range: writes begin, end (i64)
    int32_t <prefix>_body<N>(Ctx*, int64_t lo, int64_t hi)  range: indices [lo, hi) in order; 0 or 1
                      (Ctx*, lo, hi, int64_t step) on targets with `strided_bodies` (GPU grid-stride loops)

`<prefix>` is `qd_<kernel name>_<hash of the IR, target and fast_math>`: equal names mean equal code.
Register bits (args, rets, print and check values) are the interpreter's: ints sign- or
zero-extended to 64 bits, f32/f16 as f32 bits in the low word, f64 bits. A range body recomputes
its prologue's values, runs the indices in order (`tid` = the index), accumulates qualifying
atomics into locals (`qd/codegen/reduce.py`) and applies them once after the chunk.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from llvmlite import ir as L

from qd import ir
from qd.base import abi
from qd.codegen.emitter import KernelCodegen, prepare, stops_early
from qd.codegen.reduce import find_reductions
from qd.codegen.tables import check_arg_table, print_table
from qd.jit import lanes, llvm_spmd
from qd.jit.llvm_fn import PTR, FnLowering, i64c
from qd.jit.llvm_ops import LACKS, reg_type
from qd.jit.targets import I32, I64, Target
from qd.ops import Op


@dataclass
class TaskSymbols:
    """The symbols of one task. heavy: the body contains a loop (worth threads at any size)."""

    kind: str  # 'serial' | 'range'
    fn: str
    prologue: str | None
    heavy: bool
    lanes: int = 1  # SIMD lanes the body runs its indices in (`qd/jit/llvm_spmd.py`)


class BuiltModule(NamedTuple):
    module: L.Module
    tasks: list[TaskSymbols]
    prints: list  # per print id: (items: str or DataType, format specs) as KernelCode.prints
    check_args: list  # per check id: dtypes of the recorded args (None: no such Check)


def symbol_prefix(k: ir.KernelIR, target: Target, fast_math: bool) -> str:
    """`qd_<kernel>_<digest of its IR text, target and fast_math>`: the IR's digest is the one the caches key on
    (printed once per IR object: printing Genesis' collision kernel again here cost 2 s a compile)."""
    from qd.codegen.cache import ir_digest

    text = f"{ir_digest(k)}\n{target.name}\n{target.triple}\n{fast_math}"
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    return f"qd_{re.sub(r'[^A-Za-z0-9_]', '_', k.name)[:48]}_{digest}"


class ModuleGen(KernelCodegen):
    """Module-wide state: the kernel, target, fast-math switch and print numbering."""

    def __init__(self, k: ir.KernelIR, target: Target, fast_math: bool, spmd: bool = False) -> None:
        super().__init__(k, fast_math, "build_module")
        self.target = target
        self.spmd = spmd  # range bodies in SIMD lanes where `lanes.wanted` (the CPU target)
        self.module = L.Module(name=k.name)
        target.configure(self.module)
        self.prefix = symbol_prefix(k, target, fast_math)

    def function(self, name: str, ret: L.Type, params: list[L.Type]) -> L.Function:
        fn = L.Function(self.module, L.FunctionType(ret, params), name)
        fn.attributes.add("nounwind")
        return fn

    def task(self, n: int, t: ir.Task) -> TaskSymbols:
        heavy = any(isinstance(s, (ir.RangeFor, ir.While)) for s in ir.walk(t.body))
        if t.kind == "serial":
            return TaskSymbols("serial", self.serial(n, t), None, heavy)
        in_lanes = self.spmd and lanes.wanted(t, self.fast_math)
        return TaskSymbols("range", self.body(n, t, in_lanes), self.prologue(n, t), heavy,
                           lanes.LANES if in_lanes else 1)

    def serial(self, n: int, t: ir.Task) -> str:
        name = f"{self.prefix}_task{n}"
        f = FnLowering(self, self.function(name, I32, [PTR]), _uses_random(t))
        f.plan_local_arrays(t.body)
        f.rng_reset()
        f.block(t.body)
        f.b.ret(L.Constant(I32, abi.RC_DONE))
        f.finish_entry()
        return name

    def prologue(self, n: int, t: ir.Task) -> str:
        name = f"{self.prefix}_prologue{n}"
        f = FnLowering(self, self.function(name, L.VoidType(), [PTR, PTR]), False)
        f.block(t.prologue)
        out = f.fn.args[1]
        for k, v in enumerate((t.begin, t.end)):
            f.b.store(f.index64(v), f.b.gep(out, [i64c(k)], inbounds=True, source_etype=I64), align=8)
        f.b.ret_void()
        f.finish_entry()
        return name

    def body(self, n: int, t: ir.Task, in_lanes: bool = False) -> str:
        name = f"{self.prefix}_body{n}"
        if in_lanes:
            llvm_spmd.build_body(self, n, t, name)
            return name
        strided = self.target.strided_bodies
        fn = self.function(name, I32, [PTR, I64, I64] + ([I64] if strided else []))
        f = FnLowering(self, fn, _uses_random(t))
        f.plan_local_arrays(t.prologue, t.body)
        f.block(t.prologue)
        accs = self.start_reductions(f, t)
        b = f.b
        pre = b.block
        header, body, latch, exit_ = (fn.append_basic_block(x) for x in ("loop", "iter", "next", "done"))
        b.branch(header)
        b.position_at_end(header)
        i = b.phi(I64, name="i")
        b.cbranch(b.icmp_signed("<", i, fn.args[2]), body, exit_)
        b.position_at_end(body)
        f.tid = i
        f.wide[t.var] = i
        f.vals[t.var] = b.trunc(i, reg_type(t.var.dtype))
        f.rng_reset()
        # every thread reaches the flush at the loop's end (no check or return can stop one early): a GPU
        # target may combine a warp's accumulators before its atomic (`Target.reduce_atomic`)
        stops = stops_early(t)
        f.on_return = lambda: self.flush_reductions(f, accs, False)
        f.loops.append((latch, None))  # `continue` ends the iteration
        f.block(t.body)
        b.branch(latch)
        b.position_at_end(latch)
        nxt = b.add(i, fn.args[3] if strided else i64c(1))
        b.branch(header)
        i.add_incoming(fn.args[1], pre)
        i.add_incoming(nxt, latch)
        b.position_at_end(exit_)
        # (a block of a size no multiple of the warp's leaves a warp part-empty: no full-warp shuffles then)
        self.flush_reductions(f, accs, not stops and t.block_dim % 32 == 0)
        b.ret(L.Constant(I32, abi.RC_DONE))
        f.finish_entry()
        return name

    # ------------------------------------------------------------ reductions
    def start_reductions(self, f: FnLowering, t: ir.Task) -> list:
        """Accumulators (identity-initialised; per lane in `llvm_spmd`) and their hoisted pointers, before the
        loop."""
        prologue = set(t.prologue.stmts)
        accs = []
        for red in find_reductions(t):
            ptr = f.hoist_cell(red, prologue)
            acc = f.accumulator(red.dtype, red.identity())
            for a in red.atomics:
                f.reductions[a] = (red, acc)
                if a.ptr is not red.ptr:
                    f.vals[a.ptr] = ptr
            accs.append((red, acc, ptr))
        return accs

    def flush_reductions(self, f: FnLowering, accs: list, converged: bool) -> None:
        """Each accumulator into its cell with one atomic (`converged`: every thread of the launch gets here)."""
        for red, acc, ptr in accs:
            total = f.b.load(acc, typ=reg_type(red.dtype))
            op = Op.ADD if red.op is Op.SUB and red.dtype.is_float else red.op
            self.target.reduce_atomic(f, op, red.dtype, ptr, total, converged)


def _uses_random(t: ir.Task) -> bool:
    return any(isinstance(s, ir.RandomValue) for s in ir.walk(t.body))


def build_module(k: ir.KernelIR, target: Target, fast_math: bool, lanes_ok: bool = True) -> BuiltModule:
    """The LLVM module of offloaded kernel `k` (see the module docstring), with its task symbols,
    print table and check-arg dtypes (the launch decodes prints and failures with these). `lanes_ok=False`:
    no body in SIMD lanes (`qd/jit/cpu.py` asks again so when a module with lanes does not parse)."""
    k = prepare(k, LACKS)
    spmd = target.name == "cpu" and lanes_ok
    try:
        mg = ModuleGen(k, target, fast_math, spmd)
        tasks = [mg.task(n, t) for n, t in enumerate(k.tasks)]
    except Exception:  # lanes that do not lower (`lanes.Unsupported`, or a bug): scalar bodies,
        # whose own errors are the ones to raise
        if not spmd:
            raise
        mg = ModuleGen(k, target, fast_math, False)
        tasks = [mg.task(n, t) for n, t in enumerate(k.tasks)]
    target.add_entry_points(mg.module, tasks)
    return BuiltModule(mg.module, tasks, print_table(k), check_arg_table(k))


def module_groups(k: ir.KernelIR, target: Target, fast_math: bool, groups: list[list[int]]) -> Iterator[BuiltModule]:
    """`k` as several modules, one per group of its task numbers (each group's tasks, their entry points named as in
    `build_module`'s one module), made one at a time as they are asked for: a GPU target compiles each while the next
    is built (`qd.jit.nvptx`). No SIMD lanes."""
    k = prepare(k, LACKS)
    mg = ModuleGen(k, target, fast_math, False)
    prints, checks = print_table(k), check_arg_table(k)
    for numbers in groups:
        mg.module = L.Module(name=k.name)
        target.configure(mg.module)
        tasks = [mg.task(n, k.tasks[n]) for n in numbers]
        target.add_entry_points(mg.module, tasks, numbers)
        yield BuiltModule(mg.module, tasks, prints, checks)


def build_modules(k: ir.KernelIR, target: Target, fast_math: bool, groups: list[list[int]]) -> list[BuiltModule]:
    """`module_groups`, all made."""
    return list(module_groups(k, target, fast_math, groups))


__all__ = [
    "BuiltModule",
    "TaskSymbols",
    "build_module",
    "build_modules",
    "module_groups",
    "symbol_prefix",
]
