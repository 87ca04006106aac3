"""The IR builder: a stack of statement lists that the transformer appends frozen `qd.ir` statements to.

One `Builder` exists per kernel instance being compiled; `current()` returns the calling thread's (None
outside a kernel compile), which is how `Expr` operators and `qd.frontend.builtins` know they are in kernel
scope. The stack of builders is per thread: a kernel compiled in one thread is not kernel scope in another
(which may launch or compile kernels meanwhile); `COMPILING` lists the builders of every thread, so that
the launch plans stand aside while any kernel is being compiled.
Every emitted statement gets the builder's current `SrcLoc` (set by the transformer per AST node).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Iterator

import numpy as np

from qd import ir
from qd.ops import Op
from qd.types import dtypes
from qd.types import hooks as _hooks
from qd.types.dtypes import DataType
from qd.base import config as _config



class _Scope(threading.local):
    """The calling thread's stack of builders (kernels being compiled, innermost last)."""

    def __init__(self) -> None:
        self.stack: list[Builder] = []


_SCOPE = _Scope()
COMPILING: list[Builder] = []  # the active builders of all threads (a launch plan needs it empty)


def current() -> Builder | None:
    """The builder of the kernel this thread is compiling, or None in Python scope."""
    stack = _SCOPE.stack
    return stack[-1] if stack else None


def cfg() -> Any:
    """The live `qd.base.config` Config."""
    return _config.current()


def normalize_const(dtype: DataType, value: Any) -> int | float:
    """`value` converted to what a Const of `dtype` holds (ints wrapped to the width, floats rounded)."""
    if dtype.is_float:
        return float(np.array(float(value), dtype=np.float64).astype(dtype.np_dtype))
    if dtype is dtypes.u1:
        return int(bool(value))
    v = int(value)
    bits = dtype.bits
    v &= (1 << bits) - 1
    if dtype.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return v


class BuildRecord(set):
    """What a pure kernel's build read beside its parameters, for the fastcache: the set of source files its code
    came from, `captures` (`purity.capture_text` records) and `unstable` (why it cannot be stored, or None)."""

    def __init__(self) -> None:
        super().__init__()
        self.captures: list[tuple] = []
        self.unstable: str | None = None


class Builder:
    """Collects statements and the kernel's tables (args, buffers, checks, return dtypes)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stack: list[list[ir.Stmt]] = [[]]
        # per open block: buffers whose gradient `qd.stop_grad(tensor)` stopped in it (and its nested blocks)
        self.stopped: list[set[int]] = [set()]
        self.loc: ir.SrcLoc | None = None
        self.args: list[ir.ArgDecl] = []
        self.buffers: list[ir.BufferDecl] = []
        self.buffer_keys: dict[Any, int] = {}
        self.bound_objects: list[Any] = []  # per buffer: the Field object (None for others)
        self.checks: list[ir.CheckDecl] = []
        self.rets: tuple[DataType, ...] = ()
        self.depth = 0  # runtime control-flow nesting (If / loops); 0 = kernel top level
        self.loops: list[str] = []  # enclosing runtime loops: 'parallel' or 'serial'
        self.loop_allocas: set[ir.Alloca] = set()  # locals declared inside a parallel loop (private to an iteration)
        self.next_loop_serial = False  # set by qd.loop_config(serialize=True)
        self.next_block_dim = 0  # set by qd.loop_config(block_dim=n): threads per GPU block of the next parallel loop
        self.loop_block_dim = 0  # the block_dim of the parallel loop whose body is being built (0: the tier's)
        self.func_depth = 0  # nesting of inlined qd.func calls
        self.graph = False  # a `@qd.kernel(graph=True)`: `qd.graph.do_while` loops are allowed (`frontend/graph.py`)
        self.graph_parallel: str | None = None  # inside a qd.graph.parallel_context region: "context" / "section"
        self.checkpoints = False  # `@qd.kernel(checkpoints=True)` (qd has no checkpoints; its regions are refused)
        self.call_stack: tuple[ir.SrcLoc, ...] = ()  # call sites of the inlined funcs (debugger: SrcLoc.stack)
        # ArgDecls after the user's args, in ArgDecl order (`Kernel._run` launches them): `x.grad` read in the
        # kernel for an ndarray argument x is (launch arg index of x, "grad"); a lifted primitive member
        # (`lifted_arg`) is ("lifted", argument index, path, dtype, name).
        self.hidden_args: list[tuple] = []
        # primitives of `LiftedObject`s: ("lifted", arg index, path) -> (ArgDecl index, dtype); their loads
        # (qd.static refuses them: they are runtime values)
        self.lifted: dict[tuple, tuple] = {}
        self.clamped: set[int] = set()  # buffers of `qd.types.ndarray(boundary="clamp")` parameters
        self.lifted_loads: set = set()
        # a `@qd.kernel(fastcache=True)`: reads of captured state are refused (`qd/frontend/purity.py`); `sources`
        # collects the files of the funcs and Python functions the build ran (the fastcache re-hashes them)
        self.pure = False
        self.sources: set[str] = set()
        # what the pure kernel's code read from outside (`purity.capture_text`), and why it cannot be stored if so
        self.captures: dict[tuple, str] = {}  # where a capture is read again -> the text of its value
        self.unstable: str | None = None
        self.static_depth = 0  # nesting of `qd.static(...)` arguments being evaluated (purity: warn only)

    # -------------------------------------------------------------- scope management
    @contextlib.contextmanager
    def active(self) -> Iterator["Builder"]:
        stack = _SCOPE.stack
        stack.append(self)
        COMPILING.append(self)
        try:
            yield self
        finally:
            COMPILING.remove(self)
            stack.pop()

    def push(self) -> None:
        self.stack.append([])
        self.stopped.append(set())

    def pop(self) -> ir.Block:
        self.stopped.pop()
        return ir.Block(tuple(self.stack.pop()))

    # -------------------------------------------------------------- qd.stop_grad(tensor)
    def stop_grad(self, buffer: int) -> None:
        """`qd.stop_grad(x)` as a statement (Quadrants' block-scoped form): every float load of buffer
        `buffer` in the current block and the blocks nested in it, before the statement or after it, is a
        constant to both AD modes. Loads already emitted are wrapped now; later ones by `global_load`."""
        if self.grad_stopped(buffer):
            return
        self.stopped[-1].add(buffer)
        mapping: dict = {}
        self.stack[-1][:] = _stop_loads(self.stack[-1], buffer, mapping)

    def grad_stopped(self, buffer: int) -> bool:
        return any(buffer in s for s in self.stopped)

    def global_load(self, ptr: ir.GlobalPtr) -> ir.Value:
        """A load of `*ptr`, through `Op.STOP_GRAD` where `qd.stop_grad` stopped its buffer's gradient."""
        v = self.emit(ir.GlobalLoad, ptr=ptr, dtype=ptr.dtype)
        if ptr.dtype.is_float and self.grad_stopped(ptr.buffer):
            v = self.op(Op.STOP_GRAD, (v,), ptr.dtype)
        return v

    @contextlib.contextmanager
    def at(self, loc: ir.SrcLoc | None) -> Iterator[None]:
        old, self.loc = self.loc, loc if loc is not None else self.loc
        try:
            yield
        finally:
            self.loc = old

    # -------------------------------------------------------------- emission
    def emit(self, cls: type, **kw: Any) -> Any:
        loc = self.loc
        if self.call_stack and loc is not None and loc.stack is not self.call_stack:
            loc = self.loc = dataclasses.replace(loc, stack=self.call_stack)
        s = cls(loc=loc, **kw)
        self.stack[-1].append(s)
        return s

    def const(self, dtype: DataType, value: Any) -> ir.Const:
        return self.emit(ir.Const, dtype=dtype, value=normalize_const(dtype, value))

    def op(self, op: Op, args: tuple, dtype: DataType) -> ir.OpStmt:
        return self.emit(ir.OpStmt, op=op, args=tuple(args), dtype=dtype)

    def cast(self, v: ir.Value, dtype: DataType) -> ir.Value:
        if v.dtype is dtype:
            return v
        if isinstance(v, ir.Const):
            return self.const(dtype, v.value)
        return self.op(Op.CAST, (v,), dtype)

    def alloca(self, dtype: DataType, name: str = "") -> ir.Alloca:
        """A local; `name` (its source name, for the debugger) goes on its location as `SrcLoc.var`."""
        if name and self.loc is not None:
            with self.at(dataclasses.replace(self.loc, var=name)):
                a = self.emit(ir.Alloca, dtype=dtype)
        else:
            a = self.emit(ir.Alloca, dtype=dtype)
        if "parallel" in self.loops:
            self.loop_allocas.add(a)
        return a

    def shared_local(self, var: ir.Alloca) -> bool:
        """Whether `var` is a kernel-scope local seen from inside a parallel loop: every iteration updates
        the same variable, so an augmented assignment to it must be atomic (Quadrants' rule)."""
        return "parallel" in self.loops and var not in self.loop_allocas

    def local_atomic(self, op: Op, var: ir.Alloca, value: ir.Value) -> ir.LocalAtomic:
        """`var = op(var, value)` atomically on a shared local (`value` is cast to the local's dtype)."""
        return self.emit(ir.LocalAtomic, op=op, var=var, value=self.cast(value, var.dtype), dtype=var.dtype)

    def load(self, var: ir.Alloca) -> ir.LocalLoad:
        return self.emit(ir.LocalLoad, var=var, dtype=var.dtype)

    def store(self, var: ir.Alloca, value: ir.Value) -> None:
        self.emit(ir.LocalStore, var=var, value=self.cast(value, var.dtype))

    # -------------------------------------------------------------- tables
    def add_buffer(self, key: Any, decl: ir.BufferDecl, obj: Any = None) -> int:
        if key in self.buffer_keys:
            return self.buffer_keys[key]
        self.buffers.append(decl)
        self.bound_objects.append(obj)
        self.buffer_keys[key] = len(self.buffers) - 1
        return len(self.buffers) - 1

    def add_arg(self, decl: ir.ArgDecl) -> int:
        self.args.append(decl)
        return len(self.args) - 1

    def hidden_arg(self, src: ir.BufferDecl, attr: str) -> int:
        """The buffer of the hidden ndarray argument `<name>.<attr>` (e.g. `x.grad`) of ndarray argument
        `src`: declared once per (argument, attr), with `src`'s dtype, ndim and element shape."""
        key = ("hidden", src.arg, attr)
        if key in self.buffer_keys:
            return self.buffer_keys[key]
        ai = len(self.args)
        name = f"{src.name}.{attr}"
        self.add_arg(ir.ArgDecl(name=name, kind="ndarray", dtype=src.dtype, buffer=len(self.buffers)))
        decl = ir.BufferDecl(kind="ndarray", dtype=src.dtype, ndim=src.ndim, elem_shape=src.elem_shape, arg=ai,
                             name=name, large=src.large)
        self.hidden_args.append((src.arg, attr))
        return self.add_buffer(key, decl, None)

    def lifted_arg(self, value_index: int, path: tuple, value: Any, name: str) -> ir.ArgLoad:
        """A load of the hidden scalar argument holding the primitive at `path` of argument `value_index`
        (a member of a `LiftedObject`): declared once per path, with the dtype `value` has now (bool and
        int: `default_ip`, float: `default_fp`); `Kernel._run` passes the member's value at each launch."""
        key = ("lifted", value_index, path)
        if key not in self.lifted:
            c = cfg()
            dt = c.default_fp if isinstance(value, float) else c.default_ip
            self.lifted[key] = (self.add_arg(ir.ArgDecl(name=name, kind="scalar", dtype=dt)), dt)
            self.hidden_args.append(("lifted", value_index, path, dt, name))
        index, dt = self.lifted[key]
        load = self.emit(ir.ArgLoad, index=index, dtype=dt)
        self.lifted_loads.add(load)
        return load

    def add_check(self, decl: ir.CheckDecl) -> int:
        self.checks.append(decl)
        return len(self.checks) - 1

    def finish(self, loc: ir.SrcLoc | None) -> ir.KernelIR:
        assert len(self.stack) == 1, "unbalanced builder scopes"
        return ir.KernelIR(name=self.name, args=tuple(self.args), buffers=tuple(self.buffers),
                           rets=tuple(self.rets), checks=tuple(self.checks),
                           body=ir.Block(tuple(self.stack[0])), loc=loc, graph=self.graph)


def _stop_loads(stmts: list[ir.Stmt], buffer: int, mapping: dict) -> list[ir.Stmt]:
    """`stmts` with each float `GlobalLoad` of `buffer` (nested blocks included) followed by a
    `STOP_GRAD` of it that every later use reads instead (`mapping` renames old values to new ones)."""
    out: list[ir.Stmt] = []
    for s in stmts:
        ns = ir.remap_operands(s, mapping)
        kids = {f.name: ir.Block(tuple(_stop_loads(list(getattr(ns, f.name).stmts), buffer, mapping)))
                for f in dataclasses.fields(ns) if isinstance(getattr(ns, f.name), ir.Block)}
        if kids:
            ns = dataclasses.replace(ns, **kids)
        if ns is not s:
            mapping[s] = ns
        out.append(ns)
        if isinstance(ns, ir.GlobalLoad) and ns.ptr.buffer == buffer and ns.dtype.is_float:
            sg = ir.OpStmt(op=Op.STOP_GRAD, args=(ns,), dtype=ns.dtype, loc=ns.loc)
            out.append(sg)
            mapping[s] = mapping[ns] = sg
    return out


_hooks.register(in_kernel=lambda: current() is not None)
