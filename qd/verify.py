"""IR invariants: def-before-use and scoping, types per the op table, structured control flow.

`verify_kernel(k)` raises `IRVerifyError` naming the offending statement (in its `qd/ir_text`
form, with its source location). Checked:

- every operand is defined earlier in the same or an enclosing block (or is the variable of an
  enclosing `RangeFor`); no value is used outside its block; no statement appears twice;
- types: op-table rules of `qd/ops.py` (`same`, `cmp`, `float`, `int`, `cast`, `select`), loads and
  stores agree with their `Alloca` / `GlobalPtr`, `GlobalPtr` indices are integers, one per axis
  (`ndim + len(elem_shape)`), and its dtype is the buffer's; loop bounds have the var's dtype;
  `If`/`Check` conditions are integers (any width; the frontend uses u1);
- `Break` only inside a serial loop, `Continue` inside any loop (or a range task's body),
  a parallel `RangeFor` only at the top level of the kernel body, `Return` not inside loops
  (nor in range tasks) and matching `KernelIR.rets`;
- `ArgLoad`, `Check`, `ExternalShape` indices are valid;
- adstacks: each declared stack has one `AdStackAlloc` before its other ops, push and pop sites
  (paired), matching dtypes; none is left after `lower_adstacks`; `ThreadSlot` is i64;
- offloaded kernels: each task is verified on its own (a task sees only its own values; a range
  task's begin/end are defined at the top level of its prologue; its body sees the prologue's
  values and the task variable).
"""

from __future__ import annotations

import numpy as np

from qd import ir
from qd.ir_text import Namer
from qd.ops import ATOMIC, INFO, Op
from qd.types.dtypes import ALL, u1


class IRVerifyError(Exception):
    """The IR breaks an invariant; the message names the statement."""


class _Ctx:
    """Where a block sits: inside a serial loop? a parallel body? the kernel's top level?"""

    def __init__(self, top: bool = False, loop: bool = False, par: bool = False) -> None:
        self.top, self.loop, self.par = top, loop, par

    def inner(self, loop: bool | None = None, par: bool | None = None) -> "_Ctx":
        return _Ctx(False, self.loop if loop is None else loop, self.par if par is None else par)


class _Verifier:
    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.in_tasks = False  # verifying the offloaded tasks (not the structured body)
        self.namer = Namer()
        self.scope: set[ir.Value] = set()
        self.seen: set[int] = set()
        self.line = ""
        self.stmt: ir.Stmt | None = None
        self.stack_ops: dict[int, dict[type, int]] = {}  # stack id -> statement class -> count

    # -------------------------------------------------------------- messages

    def fail(self, msg: str) -> IRVerifyError:
        loc = f" ({self.stmt.loc})" if isinstance(self.stmt, ir.Stmt) and self.stmt.loc else ""
        return IRVerifyError(f"kernel {self.k.name}: `{self.line}`{loc}: {msg}")

    def need(self, ok: bool, msg: str) -> None:
        if not ok:
            raise self.fail(msg)

    def use(self, v: object) -> None:
        # Messages are built only on failure: formatting IR is costly on large kernels.
        if not isinstance(v, ir.Value):
            raise self.fail(f"operand {type(v).__name__} is not a value")
        if v not in self.scope:
            raise self.fail(f"{self.namer.ref(v)} is used but not defined in an enclosing block")

    # -------------------------------------------------------------- blocks

    def block(self, block: ir.Block, ctx: _Ctx) -> list[ir.Value]:
        """Verify `block`; its values go out of scope at its end (returned for the caller)."""
        defined: list[ir.Value] = []
        try:
            for s in block.stmts:
                self.visit(s, ctx)
                if isinstance(s, ir.Value):
                    self.scope.add(s)
                    defined.append(s)
        finally:
            for v in defined:
                self.scope.discard(v)
        return defined

    def visit(self, s: ir.Stmt, ctx: _Ctx) -> None:
        # The line also names the statement's value, which later messages refer to.
        self.stmt, self.line = s, self.namer.stmt_line(s) if isinstance(s, ir.Stmt) else type(s).__name__
        self.need(isinstance(s, ir.Stmt), "not a statement")
        self.need(id(s) not in self.seen, "statement appears twice")
        self.seen.add(id(s))
        for v in s.operands():
            if not (isinstance(s, ir.RangeFor) and v is s.var):
                self.use(v)
        rule = _RULES.get(type(s))
        self.need(rule is not None, f"unknown statement class {type(s).__name__}")
        rule(self, s, ctx)

    def nested(self, block: ir.Block, ctx: _Ctx, extra: tuple = ()) -> None:
        for v in extra:
            self.scope.add(v)
        try:
            self.block(block, ctx)
        finally:
            for v in extra:
                self.scope.discard(v)


# ------------------------------------------------------------------ per-statement rules


def _v_const(vf: _Verifier, s: ir.Const, ctx: _Ctx) -> None:
    vf.need(s.dtype in ALL, f"bad dtype {s.dtype!r}")
    if s.dtype.is_float:
        vf.need(isinstance(s.value, (int, float, np.number)) and not isinstance(s.value, bool),
                "float constant needs a number")
        return
    vf.need(isinstance(s.value, (int, np.integer)), "integer constant needs an int")
    lo, hi = _int_range(s.dtype)
    vf.need(lo <= int(s.value) <= hi, f"{s.value} is out of range for {s.dtype}")


def _int_range(dt) -> tuple[int, int]:
    if dt is u1:
        return 0, 1
    if dt.is_signed:
        return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1
    return 0, (1 << dt.bits) - 1


def outer_ndim(b: ir.BufferDecl) -> int:
    """Outer (non-element) axes of `b`: `ndim`, or `len(shape)` for fields/temps that leave ndim 0."""
    return b.ndim if b.ndim or b.kind == "ndarray" else len(b.shape)


def _v_arg(vf: _Verifier, s: ir.ArgLoad, ctx: _Ctx) -> None:
    vf.need(0 <= s.index < len(vf.k.args), f"argument index {s.index} out of range")
    a = vf.k.args[s.index]
    vf.need(a.kind == "scalar", f"argument {a.name!r} is not a scalar")
    vf.need(a.dtype is s.dtype, f"argument {a.name!r} is {a.dtype}, loaded as {s.dtype}")


def _v_op(vf: _Verifier, s: ir.OpStmt, ctx: _Ctx) -> None:
    info = INFO.get(s.op)
    vf.need(info is not None, f"unknown op {s.op!r}")
    vf.need(len(s.args) == info.arity, f"{s.op.value} takes {info.arity} operands, got {len(s.args)}")
    dts = [a.dtype for a in s.args]
    r = info.rule
    if r in ("same", "float", "int"):
        vf.need(all(d is s.dtype for d in dts), f"operand dtypes {dts} must equal the result {s.dtype}")
        vf.need(r != "float" or s.dtype.is_float, f"{s.op.value} needs floats, got {s.dtype}")
        vf.need(r != "int" or s.dtype.is_int, f"{s.op.value} needs integers, got {s.dtype}")
    elif r == "cmp":
        vf.need(s.dtype is u1, f"comparison result must be u1, got {s.dtype}")
        vf.need(all(d is dts[0] for d in dts), f"comparison operands differ: {dts}")
    elif r == "select":
        vf.need(dts[0] is u1, f"select condition must be u1, got {dts[0]}")
        vf.need(dts[1] is s.dtype and dts[2] is s.dtype, f"select operands {dts[1:]} must be {s.dtype}")
    elif r == "cast" and s.op is Op.BIT_CAST:
        vf.need(dts[0].bits == s.dtype.bits, f"bit_cast between widths {dts[0]} -> {s.dtype}")


def _v_local_load(vf: _Verifier, s: ir.LocalLoad, ctx: _Ctx) -> None:
    vf.need(isinstance(s.var, ir.Alloca), "local_load of a non-alloca")
    vf.need(s.dtype is s.var.dtype, f"loads {s.dtype} from a {s.var.dtype} alloca")


def _v_local_store(vf: _Verifier, s: ir.LocalStore, ctx: _Ctx) -> None:
    vf.need(isinstance(s.var, ir.Alloca), "local_store to a non-alloca")
    vf.need(s.value.dtype is s.var.dtype, f"stores {s.value.dtype} into a {s.var.dtype} alloca")


def _v_local_atomic(vf: _Verifier, s: ir.LocalAtomic, ctx: _Ctx) -> None:
    vf.need(not vf.in_tasks, "local_atomic in a task (offload lowers every one)")
    vf.need(ctx.par, "local_atomic outside a parallel loop")
    vf.need(isinstance(s.var, ir.Alloca), "local_atomic on a non-alloca")
    vf.need(s.op in ATOMIC, f"{s.op.value} is not an atomic op")
    vf.need(s.dtype is s.var.dtype and s.value.dtype is s.dtype,
            f"local_atomic {s.dtype} with a {s.value.dtype} value on a {s.var.dtype} alloca")


def _v_global_ptr(vf: _Verifier, s: ir.GlobalPtr, ctx: _Ctx) -> None:
    vf.need(0 <= s.buffer < len(vf.k.buffers), f"buffer index @{s.buffer} out of range")
    b = vf.k.buffers[s.buffer]
    n = outer_ndim(b) + len(b.elem_shape)
    vf.need(len(s.indices) == n, f"{len(s.indices)} indices for buffer @{s.buffer} of {n} axes")
    vf.need(s.dtype is b.dtype, f"pointer dtype {s.dtype} but buffer @{s.buffer} is {b.dtype}")
    for i in s.indices:
        vf.need(i.dtype.is_int, f"index {vf.namer.ref(i)} is {i.dtype}, not an integer")


def _v_ptr_user(vf: _Verifier, s: ir.Stmt, ctx: _Ctx) -> None:
    vf.need(isinstance(s.ptr, ir.GlobalPtr), "operand is not a global_ptr")
    if isinstance(s, ir.GlobalStore):
        vf.need(s.value.dtype is s.ptr.dtype, f"stores {s.value.dtype} through a {s.ptr.dtype} pointer")
        return
    vf.need(s.dtype is s.ptr.dtype, f"dtype {s.dtype} but pointer is {s.ptr.dtype}")
    if isinstance(s, ir.AtomicRMW):
        vf.need(s.op in ATOMIC, f"{s.op.value} is not an atomic op")
        vf.need(s.value.dtype is s.dtype, f"atomic value is {s.value.dtype}, pointer {s.dtype}")
    if isinstance(s, ir.AtomicSwap):
        vf.need(s.value.dtype is s.dtype, f"atomic_swap value is {s.value.dtype}, pointer {s.dtype}")
        vf.need(s.dtype.bits in (32, 64), f"atomic_swap on {s.dtype}: 32- and 64-bit dtypes only")
        vf.need(s.expected is None or (s.expected.dtype is s.dtype and s.dtype.is_int),
                f"atomic_cas expects {s.expected.dtype if s.expected is not None else None} on a {s.dtype} pointer")


def _v_external_shape(vf: _Verifier, s: ir.ExternalShape, ctx: _Ctx) -> None:
    vf.need(0 <= s.buffer < len(vf.k.buffers), f"buffer index @{s.buffer} out of range")
    b = vf.k.buffers[s.buffer]
    vf.need(b.kind == "ndarray", f"external_shape of a {b.kind} buffer")
    vf.need(0 <= s.axis < b.ndim, f"axis {s.axis} out of range for {b.ndim} dims")
    vf.need(s.dtype.is_int, "external_shape must be an integer")
    vf.need(b.kind != "ndarray" or not 0 <= s.axis < b.ndim or s.dtype is b.axis_dtype(s.axis),
            f"external_shape is {s.dtype} but axis {s.axis} of buffer @{s.buffer} is {b.axis_dtype(s.axis)}")


def _v_range_for(vf: _Verifier, s: ir.RangeFor, ctx: _Ctx) -> None:
    vf.need(isinstance(s.var, ir.LoopVar), "loop variable is not a LoopVar")
    vf.need(s.var.dtype.is_int, "loop variable must be an integer")
    vf.need(s.begin.dtype is s.var.dtype and s.end.dtype is s.var.dtype,
            f"bounds {s.begin.dtype}..{s.end.dtype} differ from the variable's {s.var.dtype}")
    vf.need(id(s.var) not in vf.seen, "loop variable reused")
    vf.seen.add(id(s.var))
    if s.parallel:
        vf.need(ctx.top, "parallel for is only allowed at the top level of the kernel body")
        vf.nested(s.body, _Ctx(loop=False, par=True), (s.var,))
    else:
        vf.nested(s.body, ctx.inner(loop=True), (s.var,))


def _v_if(vf: _Verifier, s: ir.If, ctx: _Ctx) -> None:
    vf.need(s.cond.dtype.is_int, f"if condition must be an integer, got {s.cond.dtype}")
    vf.nested(s.then, ctx.inner())
    vf.nested(s.else_, ctx.inner())


def _v_graph_do_while(vf: _Verifier, s: ir.GraphDoWhile, ctx: _Ctx) -> None:
    vf.need(ctx.top and not vf.in_tasks, "graph_do_while is only allowed at the top level of the kernel body")
    vf.need(0 <= s.cond < len(vf.k.buffers), f"graph_do_while condition @{s.cond} is not a buffer")
    decl = vf.k.buffers[s.cond]
    vf.need(decl.kind in ("ndarray", "field") and decl.ndim == 0 and decl.dtype.is_int,
            f"graph_do_while condition @{s.cond} must be a 0-d integer buffer, got {decl.kind} {decl.dtype}")
    vf.nested(s.body, _Ctx(top=True))


def _v_break(vf: _Verifier, s: ir.Stmt, ctx: _Ctx) -> None:
    if isinstance(s, ir.Break):
        vf.need(ctx.loop, "break outside a serial loop")
    else:
        vf.need(ctx.loop or ctx.par, "continue outside a loop")


def _v_return(vf: _Verifier, s: ir.Return, ctx: _Ctx) -> None:
    vf.need(not ctx.loop and not ctx.par, "return inside a loop")
    vf.need(len(s.values) == len(vf.k.rets), f"returns {len(s.values)} values, kernel has {len(vf.k.rets)}")
    for v, t in zip(s.values, vf.k.rets):
        vf.need(v.dtype is t, f"returns {v.dtype} where the kernel returns {t}")


def _v_print(vf: _Verifier, s: ir.Print, ctx: _Ctx) -> None:
    for x in s.items:
        vf.need(isinstance(x, (str, ir.Value)), f"print item {x!r} is neither a string nor a value")


def _v_check(vf: _Verifier, s: ir.Check, ctx: _Ctx) -> None:
    vf.need(0 <= s.check < len(vf.k.checks), f"check index #{s.check} out of range")
    vf.need(s.cond.dtype.is_int, f"check condition must be an integer, got {s.cond.dtype}")


def _v_nothing(vf: _Verifier, s: ir.Stmt, ctx: _Ctx) -> None:
    pass


def _v_adstack(vf: _Verifier, s: ir.Stmt, ctx: _Ctx) -> None:
    """Stack ops name a declared stack, after its (single) `AdStackAlloc`, with its dtype."""
    vf.need(0 <= s.stack < len(vf.k.stacks), f"adstack #{s.stack} is not declared")
    ops = vf.stack_ops.setdefault(s.stack, {})
    if isinstance(s, ir.AdStackAlloc):
        vf.need(not ops, f"adstack #{s.stack} is allocated twice or used before its alloc")
    else:
        vf.need(ir.AdStackAlloc in ops, f"adstack #{s.stack} is used before its adstack_alloc")
    ops[type(s)] = ops.get(type(s), 0) + 1
    dt = vf.k.stacks[s.stack].dtype
    if isinstance(s, ir.AdStackPush):
        vf.need(s.value.dtype is dt, f"pushes {s.value.dtype} on a {dt} adstack")
    elif isinstance(s, ir.AdStackLoadTop):
        vf.need(s.dtype is dt, f"loads {s.dtype} from a {dt} adstack")


def _v_thread_slot(vf: _Verifier, s: ir.ThreadSlot, ctx: _Ctx) -> None:
    vf.need(s.dtype.name == "i64", f"thread_slot must be i64, got {s.dtype}")


def _v_simt(vf: _Verifier, s: ir.Simt, ctx: _Ctx) -> None:
    arity = ir.SIMT_OPS.get(s.op)
    vf.need(arity is not None, f"unknown simt op {s.op!r}")
    vf.need(arity is None or len(s.args) == arity, f"simt {s.op} takes {arity} operands, got {len(s.args)}")


_RULES = {
    ir.Const: _v_const,
    ir.ArgLoad: _v_arg,
    ir.OpStmt: _v_op,
    ir.Alloca: _v_nothing,
    ir.LocalLoad: _v_local_load,
    ir.LocalStore: _v_local_store,
    ir.LocalAtomic: _v_local_atomic,
    ir.GlobalPtr: _v_global_ptr,
    ir.GlobalLoad: _v_ptr_user,
    ir.GlobalStore: _v_ptr_user,
    ir.AtomicRMW: _v_ptr_user,
    ir.AtomicSwap: _v_ptr_user,
    ir.ExternalShape: _v_external_shape,
    ir.RandomValue: _v_nothing,
    ir.RangeFor: _v_range_for,
    ir.If: _v_if,
    ir.While: lambda vf, s, ctx: vf.nested(s.body, ctx.inner(loop=True)),
    ir.GraphDoWhile: _v_graph_do_while,
    ir.Break: _v_break,
    ir.Continue: _v_break,
    ir.Return: _v_return,
    ir.Print: _v_print,
    ir.Check: _v_check,
    ir.ThreadSlot: _v_thread_slot,
    ir.Simt: _v_simt,
    ir.AdStackAlloc: _v_adstack,
    ir.AdStackPush: _v_adstack,
    ir.AdStackPop: _v_adstack,
    ir.AdStackLoadTop: _v_adstack,
}


# ------------------------------------------------------------------ tasks and entry point


def _verify_task(vf: _Verifier, i: int, t: ir.Task) -> None:
    vf.stmt, vf.line = None, f"task {i} ({t.kind})"
    if t.kind == "serial":
        vf.need(t.var is None and not t.prologue.stmts, "serial task with a variable or prologue")
        vf.block(t.body, _Ctx())
        return
    vf.need(t.kind == "range", f"unknown task kind {t.kind!r}")
    vf.need(isinstance(t.var, ir.LoopVar) and t.var.dtype.is_int, "range task needs an integer LoopVar")
    defined: list[ir.Value] = []
    for s in t.prologue.stmts:
        vf.visit(s, _Ctx())
        if isinstance(s, ir.Value):
            vf.scope.add(s)
            defined.append(s)
    vf.stmt, vf.line = None, f"task {i} (range)"
    for v in (t.begin, t.end):
        vf.need(isinstance(v, ir.Value) and v in vf.scope, "begin/end must be defined in the prologue")
        vf.need(v.dtype is t.var.dtype, f"bounds {v.dtype} differ from the variable's {t.var.dtype}")
    vf.namer.define(t.var)
    vf.nested(t.body, _Ctx(par=True), (t.var,))
    for v in defined:
        vf.scope.discard(v)


def _verify_header(vf: _Verifier) -> None:
    """ndarray arguments name an ndarray buffer (and it names them back)."""
    for i, a in enumerate(vf.k.args):
        vf.line = f"arg {a.name}"
        if a.kind == "ndarray":
            ok = 0 <= a.buffer < len(vf.k.buffers) and vf.k.buffers[a.buffer].kind == "ndarray"
            vf.need(ok, f"buffer @{a.buffer} is not an ndarray buffer")
            vf.need(vf.k.buffers[a.buffer].arg == i, f"buffer @{a.buffer} belongs to another argument")


def _verify_adstacks(vf: _Verifier) -> None:
    """Pairing: every declared stack has one alloc, pushes and pops (a stack pushed in a loop is
    popped in the reverse loop, with the same trip count by construction in `qd/ad/reverse.py`);
    none survives `lower_adstacks` (which appends the `adstack_meta` buffer)."""
    lowered = any(b.kind == "adstack_meta" for b in vf.k.buffers)
    vf.stmt, vf.line = None, "adstacks"
    for k in range(len(vf.k.stacks)):
        ops = vf.stack_ops.get(k, {})
        if lowered:
            vf.need(not ops, f"adstack #{k} has statements left after lower_adstacks")
            continue
        vf.need(ops.get(ir.AdStackAlloc, 0) == 1, f"adstack #{k} needs exactly one adstack_alloc")
        vf.need(ops.get(ir.AdStackPush, 0) >= 1 and ops.get(ir.AdStackPop, 0) >= 1,
                f"adstack #{k} needs paired pushes and pops (got {ops.get(ir.AdStackPush, 0)} push, "
                f"{ops.get(ir.AdStackPop, 0)} pop sites)")


def verify_kernel(k: ir.KernelIR) -> None:
    """Raise `IRVerifyError` if `k` (its body, and its tasks when offloaded) breaks an invariant."""
    vf = _Verifier(k)
    _verify_header(vf)
    vf.block(k.body, _Ctx(top=True))
    if k.tasks is not None:
        vf.in_tasks = True
        for i, t in enumerate(k.tasks):
            vf.scope.clear()
            vf.seen.clear()
            _verify_task(vf, i, t)
        _verify_task_loops(vf)
    _verify_adstacks(vf)


def _verify_task_loops(vf: _Verifier) -> None:
    """`TaskLoop`s cover task ranges that nest or are disjoint, outer first."""
    vf.stmt, vf.line = None, "task loops"
    seen: list[ir.TaskLoop] = []
    for lp in vf.k.task_loops:
        vf.need(0 <= lp.first <= lp.end <= len(vf.k.tasks), f"task loop {lp} is out of the task range")
        for o in seen:
            vf.need(lp.end <= o.first or o.end <= lp.first or o.first <= lp.first <= lp.end <= o.end,
                    f"task loop {lp} overlaps {o} without nesting in it")
