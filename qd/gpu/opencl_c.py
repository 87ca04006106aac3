"""Offloaded `KernelIR` -> OpenCL C source: the code generator of the OpenCL tier (issue 14, GPU.md).

One `__kernel` per task, all in one program:

    __kernel void qd_task<n>(__global ulong* slot, ulong rng_base, __global long* printbuf,
                             __global uchar* b0, __global uchar* b1, ...)

OpenCL 1.2 (PoCL) has no buffer device addresses, so every buffer is a kernel argument (`CLKernel.ctx` lists
no "buf" words); the launch *slot* is the device runtime's (`qd/runtime/device_launch.py`): status words,
print length and return words, then the context words this kernel reads (`("shape", b, axis)` extents and
`("arg", i)` scalar argument bits). A serial task runs on global id 0; a range task is a grid-stride loop over
[begin, end) whose prologue each work item computes itself, or, on a CPU device, each work item a contiguous
block of it (`blocked`); `ThreadSlot` is the global id. Recognized reductions accumulate per work item and end
with one atomic each, or, on a GPU (`group_reduce`) in a task where every work item reaches the end, with a
local-memory tree over the group (the kernel's only barriers, after all of its control flow) and one atomic per
group. A CPU device gets no barrier at all: PoCL 3.1 miscompiles a barrier that follows a data-dependent loop
holding a compare-and-swap loop (issue 27 item 10: it read a wild address), and a CPU's work group runs on one
core, where the tree gains nothing.

Statement semantics are the interpreter's word for word, as the LLVM lowering's (`qd/jit/llvm_fn.py`,
`qd/jit/llvm_ops.py`): ints wrap (arithmetic through the unsigned type), Python `//` and `%` with `x // 0 == 0`,
masked shift counts, f16 computed in f32 and rounded after every op, numpy's fmin/fmax, C casts; OpenCL C's own
`/`, `%` and shifts differ and are never used bare. Division and sqrt are IEEE (the program
is built with `-cl-fp32-correctly-rounded-divide-sqrt`); with `fast_math=False` contraction is off
(`FP_CONTRACT OFF`), and float `%` never contracts. OpenCL's `-cl-fast-relaxed-math` is never used: its
finite-math assumption would break NaN semantics the op table promises. Atomics: OpenCL's
32-bit ones, 64-bit ones through `cl_khr_int64_base_atomics` / `_extended_atomics` (on a device without them a
64-bit atomic is a clear error, the status and print words take 32-bit atomics and the adstack's max-reducer its
u32 variant), compare-and-swap loops for floats and multiplication.

`qd.simt` (`qd/gpu/opencl_simt.py`): a range task's group is `Task.block_dim` work items (else `local_size`); a
shared array is a kernel-scope `__local` array, not a kernel argument (`CLKernel.bound` lists the buffers that are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qd import ir
from qd.base import abi
from qd.base.abi import HEADER_WORDS, MAX_CHECK_ARGS
from qd.codegen.emitter import CodegenBase, KernelCodegen, prepare, stops_early
from qd.codegen.reduce import find_reductions
from qd.codegen.tables import check_arg_table, print_table
from qd.gpu import opencl_simt
from qd.gpu.opencl_ops import LACKS, MEM, const, from_bits, op_expr, reg, to_bits
from qd.gpu.opencl_prelude import LOCAL_ATOMICS, PRELUDE
from qd.ops import Op
from qd.types import dtypes as T

# the names of the atomic ops in OpenCL's builtins and the prelude's helpers (`qd_atomic_<name>_<type>`)
_ATOMIC_NAMES = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.MIN: "min", Op.MAX: "max", Op.BIT_AND: "and",
                 Op.BIT_OR: "or", Op.BIT_XOR: "xor"}


@dataclass
class CLTask:
    kind: str
    name: str
    local_size: int
    task: ir.Task
    reduces: bool = False  # has recognized reductions: accumulated per work item (a bounded grid pays off)
    local_bytes: int = 0  # the `__local` memory of one group: shared arrays, subgroup scratch, reduction tree


@dataclass
class CLKernel:
    """What the device runtime needs of a compiled kernel (the fields `SpirvKernel` has), and the source."""

    source: str
    tasks: list[CLTask]
    ctx: list[tuple]  # context word keys after the header and the return words
    prints: list
    check_args: list
    nrets: int
    uses_fp64: bool = False
    bound: list[int] = field(default_factory=list)  # the buffers passed as kernel arguments (shared ones are not)

    @property
    def slot_words(self) -> int:
        return HEADER_WORDS + self.nrets + len(self.ctx)


class _Gen(KernelCodegen):
    """Kernel-wide state: the context layout, print numbering and the source lines."""

    def __init__(self, k: ir.KernelIR, fast_math: bool, print_words: int, local_size: int, blocked: bool,
                 int64_atomics: bool, group_reduce: bool) -> None:
        super().__init__(k, fast_math, "the OpenCL renderer")
        self.print_words, self.local_size = print_words, local_size
        self.blocked, self.int64_atomics, self.group_reduce = blocked, int64_atomics, group_reduce
        self.uses_fp64 = any(getattr(s, "dtype", None) is T.f64 for s in ir.walk_kernel(k)) or any(
            d.dtype is T.f64 for d in k.buffers)
        self.local_atomics = False  # some atomic on a shared array needs the prelude's `__local` helpers

    def word(self, key: tuple) -> str:
        """The slot word of context entry `key`, as a C expression (a ulong)."""
        return f"slot[{self.ctx_word(key)}]"


class _Fn(CodegenBase):
    """One kernel function being rendered: statements in order, values as C locals (the shared skeleton:
    `qd/codegen/emitter.py`)."""

    TIER = "the OpenCL C code generator"

    def __init__(self, g: _Gen, task: ir.Task, local_size: int) -> None:
        self.g, self.k, self.task = g, g.k, task
        self.local_size = local_size  # the work items of a group
        self.groups = opencl_simt.uses_groups(g.k, task)  # qd.simt: grid-stride, ids and barriers per group
        self.space: dict = {}  # pointer -> its address space (`__local` into a shared array, else `__global`)
        self.safe: dict = {}  # index -> its bound-checked copy, for the next GlobalPtr (`s_Check` in a group task)
        self.local_bytes = 0
        self.lines: list[str] = []
        self.depth = 1
        self.vals: dict = {}  # IR value -> its C expression (a local's name, mostly)
        self.wide: dict = {}  # loop variables -> their long counter
        self.loops: list = []  # (continue, break) statements of the loops around
        self.n = 0
        self.uses_random = any(isinstance(s, ir.RandomValue) for s in ir.walk(task.body))
        self.reductions: dict = {}  # AtomicRMW -> (Reduction, accumulator name)
        self.accs: list = []  # (Reduction, accumulator, pointer name)

    # ------------------------------------------------------------ output
    def emit(self, line: str) -> None:
        self.lines.append("  " * self.depth + line)

    def fresh(self, prefix: str = "v") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def define(self, x: ir.Value, ctype: str, expr: str) -> str:
        name = self.fresh()
        self.emit(f"{ctype} {name} = {expr};")
        self.vals[x] = name
        return name

    # ------------------------------------------------------------ values
    def const_value(self, x: ir.Const) -> str:
        return const(x.dtype, x.value)

    def arg_value(self, x: ir.ArgLoad) -> str:
        return from_bits(x.dtype, self.g.word(("arg", x.index)))

    def shape_value(self, x: ir.ExternalShape) -> str:
        return f"(({reg(x.dtype)})(long){self.shape(x.buffer, x.axis)})"

    def widen(self, x: ir.Value) -> str:
        return f"((long)({self.v(x)}))"

    def shape(self, buf: int, axis: int) -> str:
        return f"((long){self.g.word(('shape', buf, axis))})"

    def index_const(self, n: int) -> str:
        return str(n)

    def ndarray_stride(self, buf: int, axis: int) -> str:
        decl = self.k.buffers[buf]
        parts = [f"max({self.shape(buf, a)}, 1L)" for a in range(axis + 1, decl.total_ndim)]
        return " * ".join(parts) if parts else "1L"

    # ------------------------------------------------------------ statements
    def lower_op(self, s: ir.OpStmt, args: list[str]) -> str:
        return self.define(s, reg(s.dtype), op_expr(s.op, [a.dtype for a in s.args], s.dtype, args))

    def s_Alloca(self, s: ir.Alloca) -> None:
        if s not in self.vals:
            name = self.fresh("a")
            self.lines.insert(self.locals_at, f"  {reg(s.dtype)} {name};")
            self.vals[s] = name
        self.emit(f"{self.vals[s]} = {const(s.dtype, 0)};")

    def s_LocalLoad(self, s: ir.LocalLoad) -> None:
        self.define(s, reg(s.dtype), self.vals[s.var])

    def s_LocalStore(self, s: ir.LocalStore) -> None:
        self.emit(f"{self.vals[s.var]} = {self.v(s.value)};")

    def s_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        ix = [self.safe.get(x) or self.index64(x) for x in s.indices]  # (`s_Check`: the checked indices)
        self.safe.clear()
        lin = ix[-1] if ix else "0L"
        for axis in range(len(ix) - 2, -1, -1):
            lin = f"({ix[axis]} * ({self.stride(s.buffer, axis)}) + {lin})"
        mt = MEM[s.dtype]
        if self.k.buffers[s.buffer].kind == "shared":  # the group's `__local` array (`opencl_simt.local_decls`)
            self.space[s] = "__local"
            self.define(s, f"__local {mt}*", f"((__local {mt}*)sh{s.buffer}) + {lin}")
            return
        self.define(s, f"__global {mt}*", f"((__global {mt}*)b{s.buffer}) + {lin}")

    def sp(self, ptr: ir.Value) -> str:
        """The address space of pointer `ptr` (`__global` unless it points into a shared array)."""
        return self.space.get(ptr, "__global")

    def s_GlobalLoad(self, s: ir.GlobalLoad) -> None:
        p, sp = self.vals[s.ptr], self.sp(s.ptr)
        dt = s.dtype
        if s.volatile and dt is T.f16:  # the bits through a volatile pointer (vload_half takes no volatile one)
            bits = self.fresh("hb")
            self.emit(f"ushort {bits} = *((volatile {sp} ushort*){p});")
            self.define(s, reg(dt), f"qd_h2f({bits})")
            return
        if s.volatile:  # read through a volatile pointer: never cached or hoisted
            p = f"((volatile {sp} {MEM[dt]}*){p})"
        expr = f"qd_h2f(*(({sp} ushort*){p}))" if dt is T.f16 else f"((int)(*{p} != 0))" if dt is T.u1 else f"*{p}"
        self.define(s, reg(dt), expr)

    def s_GlobalStore(self, s: ir.GlobalStore) -> None:
        p, dt, v = self.vals[s.ptr], s.ptr.dtype, self.v(s.value)
        if dt is T.f16:
            self.emit(f"*(({self.sp(s.ptr)} ushort*){p}) = qd_f2hb({v});")
        elif dt is T.u1:
            self.emit(f"*{p} = (uchar)(({v}) != 0);")
        else:
            self.emit(f"*{p} = {v};")

    def s_AtomicRMW(self, s: ir.AtomicRMW) -> None:
        if s in self.reductions:  # a recognized reduction: into the work item's accumulator
            red, acc = self.reductions[s]
            dt, op = s.dtype, red.op
            if not (dt.is_float and op is Op.SUB):
                op = Op.ADD if op is Op.SUB else op
            self.emit(f"{acc} = {op_expr(op, [dt, dt], dt, [acc, self.v(s.value)])};")
            return
        self.define(s, reg(s.dtype), self.atomic(s.op, s.dtype, self.vals[s.ptr], self.v(s.value), self.sp(s.ptr)))

    def start_reductions(self) -> None:
        """Accumulators (identity-initialised) and their hoisted pointers, before the grid-stride loop
        (`qd/jit/llvm.py: ModuleGen.start_reductions`): one atomic per work item instead of one per update,
        and partial sums as accurate as the other tiers' (one f32 cell summed from 2^24 atomics is not)."""
        prologue = set(self.task.prologue.stmts)
        for red in _reductions(self.k, self.task):
            ptr = self.hoist_cell(red, prologue)
            acc = self.fresh("acc")
            self.emit(f"{reg(red.dtype)} {acc} = {const(red.dtype, red.identity())};")
            for a in red.atomics:
                self.reductions[a] = (red, acc)
                self.vals.setdefault(a.ptr, ptr)
            self.accs.append((red, acc, ptr))

    def flush_reductions(self, converged: bool = False) -> None:
        """Each accumulator into its cell. `converged` (every work item of the group gets here: no check or
        return can stop one early, after all of the body's control flow; and the device combines in groups,
        `build(group_reduce=True)`): the group's accumulators are first combined in local memory (a tree
        over the power-of-two group size), then one atomic per group; else one atomic per work item."""
        for red, acc, ptr in self.accs:
            op = Op.ADD if red.op is Op.SUB and red.dtype.is_float else red.op
            if not converged:
                self.emit(f"{self.atomic(op, red.dtype, ptr, acc)};")
                continue
            dt, shared = red.dtype, self.fresh("lred")
            self.lines.insert(self.locals_at, f"  __local {reg(dt)} {shared}[{self.local_size}];")
            self.local_bytes += 8 * self.local_size
            comb = Op.ADD if op is Op.SUB else op
            self.emit(f"{shared}[lid] = {acc};")
            self.emit("barrier(CLK_LOCAL_MEM_FENCE);")
            self.emit(f"for (int s = {self.local_size // 2}; s > 0; s >>= 1) {{")
            self.emit(f"  if (lid < s) {shared}[lid] = "
                      f"{op_expr(comb, [dt, dt], dt, [f'{shared}[lid]', f'{shared}[lid + s]'])};")
            self.emit("  barrier(CLK_LOCAL_MEM_FENCE);")
            self.emit("}")
            self.emit(f"if (lid == 0) {self.atomic(op, dt, ptr, f'{shared}[0]')};")

    def need_64bit_atomics(self, dt: T.DataType, what: str) -> None:
        """A 64-bit atomic on a device without them is an error naming the kernel (`build(int64_atomics=False)`)."""
        if dt.bits == 64 and not self.g.int64_atomics:
            from qd.errors import QuadrantsTypeError

            raise QuadrantsTypeError(f"kernel {self.k.name}: {what} on {dt} needs 64-bit atomics, which this OpenCL "
                                     f"device lacks (no cl_khr_int64_base_atomics/extended_atomics); use a 32-bit "
                                     f"type")

    def atomic(self, op: Op, dt: T.DataType, p: str, v: str, sp: str = "__global") -> str:
        """`*p = op(*p, v)` atomically: the builtins for 32/64-bit ints (add, sub, bit ops, min, max), the prelude's
        compare-and-swap helpers for the rest (floats, mul, 8/16-bit, f16 through its word); `sp`: the pointer's
        address space (the builtins take both; the helpers have `_local` twins for `__local` pointers)."""
        from qd.errors import QuadrantsTypeError

        if dt is T.u1 or (dt.is_float and op in (Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR)):
            raise QuadrantsTypeError(f"atomic {op.value} is not supported on {dt}")
        name = _ATOMIC_NAMES[op]
        suffix = "_local" if sp == "__local" else ""
        if dt is T.f16 or dt.bits < 32 or dt.is_float or op is Op.MUL:
            self.g.local_atomics |= sp == "__local"
        if dt is T.f16:
            return f"qd_atomic_{name}_half{suffix}((volatile {sp} half*){p}, {v})"
        self.need_64bit_atomics(dt, f"atomic {op.value}")
        t = reg(dt)
        vp = f"(volatile {sp} {t}*){p}"
        if dt.bits < 32 or dt.is_float or op is Op.MUL:
            return f"qd_atomic_{name}_{t}{suffix}({vp}, {v})"
        return f"{'atom' if dt.bits == 64 else 'atomic'}_{name}({vp}, {v})"

    def s_AtomicSwap(self, s: ir.AtomicSwap) -> None:
        """`atomic_xchg`/`atomic_cmpxchg` (`atom_*` at 64 bits; a double exchanges its bits as a long)."""
        dt, p, v, sp = s.dtype, self.vals[s.ptr], self.v(s.value), self.sp(s.ptr)
        self.need_64bit_atomics(dt, f"qd.atomic_{'cas' if s.expected is not None else 'exchange'}")
        fn = "atom" if dt.bits == 64 else "atomic"
        if s.expected is not None:
            expr = f"{fn}_cmpxchg((volatile {sp} {reg(dt)}*){p}, {self.v(s.expected)}, {v})"
        elif dt is T.f64:
            expr = f"as_double({fn}_xchg((volatile {sp} long*){p}, as_long({v})))"
        else:
            expr = f"{fn}_xchg((volatile {sp} {reg(dt)}*){p}, {v})"
        self.define(s, reg(dt), expr)

    def s_ThreadSlot(self, s: ir.ThreadSlot) -> None:
        self.vals[s] = "gid"

    def s_Simt(self, s: ir.Simt) -> None:
        opencl_simt.lower(self, s)

    def rng_reset(self) -> None:
        if self.uses_random:
            self.emit("rng_ctr = 0;")
            self.emit(f"rng_key = qd_mix64(rng_base ^ ((ulong)tid * {abi.RNG_TID_MIX:#x}UL));")

    def s_RandomValue(self, s: ir.RandomValue) -> None:
        dt = s.dtype
        self.emit("rng_ctr += 1;")
        x = self.fresh("r")
        self.emit(f"ulong {x} = qd_mix64(rng_key + rng_ctr * {abi.RNG_GOLDEN:#x}UL);")
        if dt.is_float and dt.bits == 64:
            expr = f"((double)({x} >> {abi.RAND_F64_SHIFT}) * {abi.RAND_F64_SCALE:.17g})"
        elif dt.is_float:
            expr = f"((float)({x} >> {abi.RAND_F32_SHIFT}) * {abi.RAND_F32_SCALE:.17g}f)"
            if dt is T.f16:
                expr = f"qd_rh({expr})"
        elif dt is T.u1:
            expr = f"(int)({x} != 0)"
        else:
            expr = f"(({reg(dt)}){x})"
        self.define(s, reg(dt), expr)

    def s_RangeFor(self, s: ir.RangeFor) -> None:
        i = self.fresh("i")
        self.emit(f"for (long {i} = {self.index64(s.begin)}; {i} < {self.index64(s.end)}; {i}++) {{")
        self.depth += 1
        self.vals[s.var], self.wide[s.var] = f"(({reg(s.var.dtype)}){i})", i
        self.loop_body(s.body, "continue", "break")
        self.depth -= 1
        self.emit("}")

    def s_While(self, s: ir.While) -> None:
        self.emit("for (;;) {")
        self.depth += 1
        self.loop_body(s.body, "continue", "break")
        self.depth -= 1
        self.emit("}")

    def jump(self, target: str) -> None:
        """`break` / `continue`: C's own statement."""
        self.emit(f"{target};")

    def s_If(self, s: ir.If) -> None:
        self.emit(f"if (({self.v(s.cond)}) != 0) {{")
        self.depth += 1
        self.block(s.then)
        self.depth -= 1
        self.emit("} else {")
        self.depth += 1
        self.block(s.else_)
        self.depth -= 1
        self.emit("}")

    def s_Return(self, s: ir.Return) -> None:
        for k, x in enumerate(s.values):
            self.emit(f"slot[{HEADER_WORDS + k}] = (ulong){to_bits(x.dtype, self.v(x))};")
        self.flush_reductions()
        self.emit("return;")

    def s_Print(self, s: ir.Print) -> None:
        values = [x for x in s.items if isinstance(x, ir.Value)]
        words = [to_bits(x.dtype, self.v(x)) for x in values]
        n = len(words)
        pos = self.fresh("pos")
        need, dropped = n + abi.PRINT_HEAD, abi.STATUS_DROPPED
        self.emit(f"long {pos} = QD_SLOT_ADD(&slot[{abi.PRINTLEN_WORD}], {need});")
        self.emit(f"if ({pos} + {need} > {self.g.print_words}L) {{ QD_SLOT_ADD(&slot[{dropped}], 1); }} else {{")
        self.depth += 1
        for k, w in enumerate([f"{self.g.print_ids[s]}L", "(long)tid", f"{n}L"] + words):
            self.emit(f"printbuf[{pos} + {k}] = {w};")
        self.depth -= 1
        self.emit("}")

    def s_Check(self, s: ir.Check) -> None:
        """A failed check records itself (the first one of the launch wins) and ends the work item, except in a task
        with work-group barriers (`qd.simt`): there a work item leaving early would leave the others waiting at a
        barrier (undefined; PoCL dropped the failure path), so it goes on, its failed bound-checked index replaced
        by 0 for the access that follows (`safe`), and the launch still reports the failure."""
        safe = None
        if self.groups and s.args and self.k.checks[s.check].kind == "bounds":
            idx = s.args[0]
            safe = self.fresh("safe")
            self.emit(f"long {safe} = {self.safe.get(idx) or self.index64(idx)};")
        self.emit(f"if (({self.v(s.cond)}) == 0) {{")
        self.depth += 1
        words = [to_bits(x.dtype, self.v(x)) for x in s.args]
        n = min(len(words), MAX_CHECK_ARGS)
        self.emit(f"if (QD_STATUS_CAS(&slot[{abi.STATUS_FLAG}]) == 0L) {{")
        self.depth += 1
        for k, w in enumerate([f"{s.check}L", "(long)tid", f"{n}L"] + words[:n]):
            self.emit(f"slot[{abi.STATUS_CHECK + k}] = (ulong)({w});")
        self.depth -= 1
        self.emit("}")
        if safe is not None:
            self.emit(f"{safe} = 0;")
            self.safe[s.args[0]] = safe
        elif not self.groups:
            self.emit("return;")
        self.depth -= 1
        self.emit("}")

    # ------------------------------------------------------------ the kernel
    def render(self, n: int) -> str:
        k, t = self.k, self.task
        params = ["__global ulong* slot", "ulong rng_base", "__global long* printbuf"]
        params += [f"__global uchar* b{b}" for b in bound_buffers(k)]
        decls, self.local_bytes = opencl_simt.local_decls(k, t, self.local_size)
        for line in decls:
            self.emit(line)
        self.emit("long gid = get_global_id(0);")
        self.emit("int lid = (int)get_local_id(0);")
        self.emit("long tid = 0;")
        self.locals_at = len(self.lines)
        if self.uses_random:
            self.emit("ulong rng_key = 0, rng_ctr = 0;")
        if t.kind == "serial":
            self.emit("if (gid != 0) return;")
            self.rng_reset()
            self.block(t.body)
        else:
            self.block(t.prologue)
            self.start_reductions()
            i = "i"
            lo, hi = self.index64(t.begin), self.index64(t.end)
            if self.g.blocked and not self.groups:  # each work item a contiguous block of indices (a CPU device: cache lines)
                self.emit(f"long chunk = ({hi} - {lo} + (long)get_global_size(0) - 1) / (long)get_global_size(0);")
                self.emit(f"long lo = {lo} + gid * chunk, hi = min(lo + chunk, {hi});")
                self.emit(f"for (long {i} = lo; {i} < hi; {i}++) {{")
            else:  # grid-stride: neighbouring work items on neighbouring indices (coalesced on a GPU)
                self.emit(f"for (long {i} = {lo} + gid; {i} < {hi}; {i} += (long)get_global_size(0)) {{")
            self.depth += 1
            self.emit(f"tid = {i};")
            self.vals[t.var], self.wide[t.var] = f"(({reg(t.var.dtype)}){i})", i
            self.rng_reset()
            self.loop_body(t.body, "continue", "break")
            self.depth -= 1
            self.emit("}")
            pow2 = self.local_size & (self.local_size - 1) == 0  # (the tree halves the group)
            self.flush_reductions(converged=self.g.group_reduce and pow2 and not stops_early(t))
        # a group size the code relies on is the kernel's (`qd.simt`): the compiler may specialise for it
        attr = f"__attribute__((reqd_work_group_size({self.local_size}, 1, 1))) " if self.groups or t.block_dim else ""
        head = f"__kernel {attr}void qd_task{n}({', '.join(params)}) {{"
        return "\n".join([head] + self.lines + ["}"])


def build(k: ir.KernelIR, fast_math: bool, print_words: int, local_size: int, blocked: bool = False,
          int64_atomics: bool = True, group_reduce: bool = True) -> CLKernel:
    """The OpenCL C program of offloaded kernel `k` (see the module docstring); `blocked`: each work item runs a
    contiguous block of a range task's indices (for CPU devices) instead of the grid-stride loop. `group_reduce`:
    a reducing task combines its work group's accumulators in local memory (barriers) before one atomic per
    group; off (a CPU device), one atomic per work item and no barrier in any kernel. Without
    `int64_atomics` (a device without `cl_khr_int64_base/extended_atomics`) a 64-bit atomic is a clear error
    and the status and print words take 32-bit atomics; the source then also undefines the extensions' macros,
    so a device that has them compiles what one without them would."""
    k = prepare(k, LACKS)
    g = _Gen(k, fast_math, print_words, local_size, blocked, int64_atomics, group_reduce)
    bodies, tasks = [], []
    for n, t in enumerate(k.tasks):
        size = 1 if t.kind == "serial" else t.block_dim or local_size
        fn = _Fn(g, t, size)
        bodies.append(fn.render(n))
        tasks.append(CLTask(t.kind, f"qd_task{n}", size, t, reduces=t.kind == "range" and bool(_reductions(k, t)),
                            local_bytes=fn.local_bytes))
    # fast_math: contraction allowed (as the LLVM tiers' `contract`); never OpenCL's relaxed math, whose
    # finite-math assumption would break NaN handling (fmin/fmax, isnan)
    head = PRELUDE if fast_math else "#pragma OPENCL FP_CONTRACT OFF\n" + PRELUDE
    if g.local_atomics:
        head += LOCAL_ATOMICS
    if not int64_atomics:
        head = "#undef cl_khr_int64_base_atomics\n#undef cl_khr_int64_extended_atomics\n" + head
    source = head + "\n\n".join(bodies) + "\n"
    keys = g.ctx_keys()
    return CLKernel(source, tasks, keys, print_table(k), check_arg_table(k), len(k.rets), g.uses_fp64,
                    bound_buffers(k))


def bound_buffers(k: ir.KernelIR) -> list[int]:
    """The buffers a kernel function takes as arguments, in order: all but the shared ones (each group's own
    `__local` array, never bound at launch)."""
    return [b for b, d in enumerate(k.buffers) if d.kind != "shared"]


def _reductions(k: ir.KernelIR, t: ir.Task) -> list:
    """The recognized reductions of task `t` into global buffers (a shared array's atomics stay atomics)."""
    return [r for r in find_reductions(t) if k.buffers[r.ptr.buffer].kind != "shared"]


__all__ = ["CLKernel", "CLTask", "build"]
