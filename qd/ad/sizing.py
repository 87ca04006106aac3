"""Adstack sizing: the number of slots a thread needs, as a `SizeExpr` over live data (DESIGN §5).

The reverse pass (`qd/ad/reverse.py`) gives every dynamic serial loop of a reverse-mode kernel one
stack per loop-carried local, pushed once per iteration. A stack is drained before its loop runs
again, so a thread needs as many slots as the loop's largest trip count, over every value of the
enclosing loops' indices:

    for i in range(n):                 # parallel
        for j in range(a[i]):          # size: MaxOverRange(i, 0, n, Sub(ExternalTensorRead(a, [i]), 0))
            for k in range(j):         # size: MaxOverRange(i, 0, n, MaxOverRange(j, 0, a[i], Sub(j, 0)))

`size_of_loop` derives that tree from the IR (the loop's bounds, through single-assignment locals, down
to constants, kernel arguments, shapes, integer field/ndarray reads and enclosing loop indices); what
it cannot express is a `SizeError` that the reverse pass turns into a compile error naming the line.
`serialise` flattens a tree into int64 words, 5 per node `[kind, a, b, c, d]`, nodes in post-order
(root last; operands are node numbers). `qd/_sizer.pyx` evaluates the words before every launch.

`Sub` clamps at 0 (as Quadrants' SizeExpr does): a trip count is never negative. `Div`/`Mod` are
floor division and Python modulo (for the indices `qd.ndrange` and struct-fors recover).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Sequence

from qd import ir
from qd.base import abi
from qd.ops import Op

# The serialised form's node kinds (`abi.K_*`), words per node, comparison codes and walk guard (`abi.SIZE_GUARD`:
# iterations a serial MaxOverRange walk may take before it raises) are the launch ABI's, shared with qd/_sizer.pyx.
CMP_CODES = {getattr(Op, f"CMP_{c}"): i for i, c in enumerate(abi.SIZE_CMPS)}
WORDS = abi.SIZE_WORDS


class SizeError(Exception):
    """A loop bound that no `SizeExpr` expresses; `value` is the IR value at fault."""

    def __init__(self, what: str, value: object) -> None:
        super().__init__(what)
        self.what = what
        self.value = value


@dataclass(frozen=True, eq=False)
class SizeExpr:
    """A node: `kind` is one of Const, Arg, FieldLoad, ExternalTensorRead, ExternalTensorShape,
    BoundVariable, Add, Sub, Mul, Max, Min, Div, Mod, MaxOverRange, Counted (the iterations of
    `while` loop `value` counted by the counting kernel, `qd/ad/counting.py`), and for gates:
    Gate(cond, body) (body where cond is nonzero, if `value` is 1; where it is zero, if 0), Cmp /
    FCmp (`value`: a `CMP_CODES` code) over ints / floats, FloatLoad (a float read, `value` the
    buffer) and FloatConst (`value` the float)."""

    kind: str
    args: tuple = ()  # child SizeExprs (for MaxOverRange: begin, end, body)
    value: int = 0  # Const: the value; Arg: the argument; loads/shapes: the buffer
    axis: int = 0  # ExternalTensorShape: the axis
    var: object = None  # BoundVariable / MaxOverRange: the LoopVar

    def __str__(self) -> str:
        if self.kind == "Const":
            return str(self.value)
        if self.kind == "Counted":
            return f"count(while {self.value})"
        if self.kind == "FloatConst":
            return repr(self.value)
        if self.kind == "Gate":
            return f"({self.args[1]} if {'' if self.value else 'not '}{self.args[0]} else 0)"
        if self.kind == "Arg":
            return f"arg{self.value}"
        if self.kind == "BoundVariable":
            return self.var.name or "var"
        if self.kind in ("FieldLoad", "ExternalTensorRead"):
            return f"@{self.value}[{', '.join(map(str, self.args))}]"
        if self.kind == "ExternalTensorShape":
            return f"@{self.value}.shape[{self.axis}]"
        if self.kind == "MaxOverRange":
            b, e, body = self.args
            return f"max({body} for {self.var.name or 'var'} in [{b}, {e}))"
        return f"{self.kind}({', '.join(map(str, self.args))})"


def const(v: int) -> SizeExpr:
    return SizeExpr("Const", value=int(v))


_BINARY = {Op.ADD: "Add", Op.SUB: "Sub", Op.MUL: "Mul", Op.MAX: "Max", Op.MIN: "Min", Op.FLOORDIV: "Div",
           Op.MOD: "Mod"}


class Deriver:
    """Turns IR integer values into `SizeExpr`s. `buffers` are the kernel's; `stores[alloca]` lists
    the `LocalStore`s into each local; `bound` are the loop variables in scope."""

    def __init__(self, buffers: Sequence[ir.BufferDecl], stores: dict, bound: Callable[[ir.LoopVar], bool]) -> None:
        self.buffers = buffers
        self.stores = stores
        self.bound = bound

    def expr(self, v: ir.Value) -> SizeExpr:
        if not v.dtype.is_int and v.dtype.name != "u1":
            raise SizeError("a float value", v)
        if isinstance(v, ir.Const):
            return const(v.value)
        if isinstance(v, ir.ArgLoad):
            return SizeExpr("Arg", value=v.index)
        if isinstance(v, ir.ExternalShape):
            return SizeExpr("ExternalTensorShape", value=v.buffer, axis=v.axis)
        if isinstance(v, ir.LoopVar):
            if not self.bound(v):
                raise SizeError(f"the index {v.name!r} of a loop that does not enclose this one", v)
            return SizeExpr("BoundVariable", var=v)
        if isinstance(v, ir.GlobalLoad):
            kind = "FieldLoad" if self.buffers[v.ptr.buffer].kind == "field" else "ExternalTensorRead"
            return SizeExpr(kind, tuple(self.expr(i) for i in v.ptr.indices), value=v.ptr.buffer)
        if isinstance(v, ir.LocalLoad):
            return self.local(v)
        if isinstance(v, ir.OpStmt):
            return self.op(v)
        raise SizeError(f"a value computed by {type(v).__name__}", v)

    def cond(self, v: ir.Value) -> SizeExpr:
        """A branch condition as a 0/1 SizeExpr (int or float comparisons, `not`, and `and`/`or` of
        those); raises SizeError for anything else."""
        if isinstance(v, ir.LocalLoad):
            stores = self.stores.get(v.var, [])
            if len(stores) != 1:
                raise SizeError("a local variable assigned more than once", v)
            return self.cond(stores[0].value)
        if isinstance(v, ir.OpStmt) and v.op in CMP_CODES:
            a, b = v.args
            if a.dtype.is_float and b.dtype.is_float:
                return SizeExpr("FCmp", (self.fexpr(a), self.fexpr(b)), value=CMP_CODES[v.op])
            return SizeExpr("Cmp", (self.expr(a), self.expr(b)), value=CMP_CODES[v.op])
        if isinstance(v, ir.OpStmt) and v.op is Op.LOGICAL_NOT:
            return SizeExpr("Cmp", (self.cond(v.args[0]), const(0)), value=CMP_CODES[Op.CMP_EQ])
        if isinstance(v, ir.OpStmt) and v.op in (Op.BIT_AND, Op.BIT_OR) and v.dtype.name == "u1":
            a, b = self.cond(v.args[0]), self.cond(v.args[1])
            return SizeExpr("Mul" if v.op is Op.BIT_AND else "Max", (a, b))
        raise SizeError("a condition qd cannot evaluate before the launch", v)

    def fexpr(self, v: ir.Value) -> SizeExpr:
        if isinstance(v, ir.Const):
            return SizeExpr("FloatConst", value=float(v.value))
        if isinstance(v, ir.GlobalLoad) and v.dtype.name in ("f32", "f64"):
            return SizeExpr("FloatLoad", tuple(self.expr(i) for i in v.ptr.indices), value=v.ptr.buffer)
        if isinstance(v, ir.LocalLoad):
            stores = self.stores.get(v.var, [])
            if len(stores) == 1:
                return self.fexpr(stores[0].value)
        raise SizeError("a float value other than a field/ndarray read or a constant", v)

    def local(self, v: ir.LocalLoad) -> SizeExpr:
        stores = self.stores.get(v.var, [])
        if len(stores) != 1:
            raise SizeError("a local variable assigned more than once", v)
        return self.expr(stores[0].value)

    def op(self, v: ir.OpStmt) -> SizeExpr:
        if v.op is Op.CAST and (v.args[0].dtype.is_int or v.args[0].dtype.name == "u1"):
            return self.expr(v.args[0])
        if v.op in _BINARY:
            return SizeExpr(_BINARY[v.op], (self.expr(v.args[0]), self.expr(v.args[1])))
        raise SizeError(f"the operation {v.op.value!r}", v)


def free_vars(e: SizeExpr) -> set:
    if e.kind == "BoundVariable":
        return {e.var}
    out: set = set()
    for a in e.args:
        out |= free_vars(a)
    if e.kind == "MaxOverRange":
        out = (free_vars(e.args[0]) | free_vars(e.args[1]) | (free_vars(e.args[2]) - {e.var}))
    return out


def size_of_loop(loop: ir.RangeFor, enclosing: Sequence, d: Deriver) -> SizeExpr:
    """The largest trip count of `loop` over every iteration of the `enclosing` loops and branches
    (outermost first: `RangeFor`s, and `(condition, taken)` pairs of the `if`s it sits in): the slots
    one thread needs for a stack pushed once per iteration of `loop`. A branch condition qd can
    evaluate before the launch gates the count (iterations that skip the loop need no slots); one it
    cannot is left out, which only makes the size larger."""
    e = SizeExpr("Sub", (d.expr(loop.end), d.expr(loop.begin)))
    for outer in reversed(enclosing):
        if isinstance(outer, tuple):
            try:
                e = SizeExpr("Gate", (d.cond(outer[0]), e), value=int(outer[1]))
            except SizeError:
                pass
        elif outer.var in free_vars(e):
            e = SizeExpr("MaxOverRange", (d.expr(outer.begin), d.expr(outer.end), e), var=outer.var)
    return e


# ------------------------------------------------------------------ the serialised form


_KIND = {"Cmp": abi.K_CMP, "FCmp": abi.K_FCMP, "Const": abi.K_CONST, "Arg": abi.K_ARG,
         "ExternalTensorShape": abi.K_SHAPE, "BoundVariable": abi.K_VAR, "Add": abi.K_ADD, "Sub": abi.K_SUB,
         "Mul": abi.K_MUL, "Max": abi.K_MAX, "Min": abi.K_MIN, "Div": abi.K_DIV, "Mod": abi.K_MOD,
         "MaxOverRange": abi.K_MOR}


class _Writer:
    def __init__(self) -> None:
        self.words: list[int] = []
        self.slots: dict = {}  # LoopVar -> bound-variable slot

    def node(self, kind: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
        self.words += [kind, a, b, c, d]
        return len(self.words) // WORDS - 1

    def slot(self, var: object) -> int:
        return self.slots.setdefault(var, len(self.slots))

    def write(self, e: SizeExpr) -> int:
        k = e.kind
        if k == "Const":
            return self.node(abi.K_CONST, e.value)
        if k == "Counted":
            return self.node(abi.K_COUNT, e.value)
        if k == "FloatConst":
            return self.node(abi.K_FCONST, struct.unpack("<q", struct.pack("<d", e.value))[0])
        if k in ("Gate", "Cmp", "FCmp"):
            a, b = (self.write(x) for x in e.args)
            return self.node(abi.K_GATE, a, b, e.value) if k == "Gate" else self.node(_KIND[k], e.value, a, b)
        if k in ("Arg", "ExternalTensorShape"):
            return self.node(_KIND[k], e.value, e.axis)
        if k == "BoundVariable":
            return self.node(abi.K_VAR, self.slot(e.var))
        if k in ("FieldLoad", "ExternalTensorRead", "FloatLoad"):
            lin = -1  # K_INDEX chains: linear = prev * extent(axis) + index, bounds-checked
            for axis, idx in enumerate(e.args):
                lin = self.node(abi.K_INDEX, e.value, axis, self.write(idx), lin)
            return self.node(abi.K_FLOAD if k == "FloatLoad" else abi.K_LOAD, e.value, lin)
        if k == "MaxOverRange":
            b, end, body = (self.write(x) for x in e.args)
            return self.node(abi.K_MOR, self.slot(e.var), b, end, body)
        a, b = (self.write(x) for x in e.args)
        return self.node(_KIND[k], a, b)


def serialise(e: SizeExpr) -> tuple[int, ...]:
    """Flat int64 words: 5 per node, post-order, root last (see the module docstring)."""
    w = _Writer()
    w.write(e)
    return tuple(w.words)


def buffers_read(code: Sequence[int]) -> set[int]:
    """Buffers whose data or shape the serialised size `code` reads."""
    out = set()
    for n in range(len(code) // WORDS):
        if code[n * WORDS] in (abi.K_LOAD, abi.K_FLOAD, abi.K_SHAPE):
            out.add(code[n * WORDS + 1])
    return out


def counted_ids(code: Sequence[int]) -> set[int]:
    """The `while` loops (counting-kernel slots) whose counts the size reads."""
    return {code[n * WORDS + 1] for n in range(len(code) // WORDS) if code[n * WORDS] == abi.K_COUNT}


def reads_data(code: Sequence[int]) -> bool:
    """Whether the size depends on anything but constants (then the sizer runs at every launch)."""
    return any(code[n * WORDS] != abi.K_CONST for n in range(len(code) // WORDS))


__all__ = ["SizeError", "SizeExpr", "Deriver", "size_of_loop", "serialise", "buffers_read", "free_vars",
           "reads_data", "counted_ids"]
