"""Text form of qd's IR: `print_kernel` / `print_block` render it, `parse_kernel` reads it back.

The form round-trips: `print_kernel(parse_kernel(print_kernel(k))) == print_kernel(k)`, and the
parsed IR is structurally equal to `k` (same statement classes, fields, dtypes, bit-exact
constants). Values are named `%0, %1, ...` in order of definition, loop variables `%i0, ...`,
buffers `@0`, checks `#0`. Each statement takes one line, with an optional source location suffix
`@file:line:col` (or `@file:line:col:func`; names that are not plain are JSON-quoted).

    kernel add_one @k.py:3:0
      arg n : scalar i32
      arg x : ndarray f32 buffer=@0
      buffer @0 = ndarray f32 ndim=1 arg=1 name="x"
      check #0 = assert "x is negative"
    body {
      %0 = arg_load 0 : i32
      %1 = const i32 0
      parallel for %i0 : i32 in %1 .. %0 {
        %2 = global_ptr @0 [%i0] : f32
        %3 = global_load %2 : f32
        %4 = const f32 0x1.0000000000000p+0
        %5 = add f32 %3, %4
        global_store %2, %5 @k.py:5:8
      }
    }

Offloaded kernels add a `tasks { task serial { ... } task range %i0 : i32 { prologue {...}
bounds %a .. %b body {...} } }` section after the body.
"""

from __future__ import annotations

import json
import math
import re
import struct

import numpy as np

from qd import ir
from qd.types.dtypes import DataType

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN_FILE = re.compile(r"[A-Za-z0-9_./<>\-]*[A-Za-z_./<>\-][A-Za-z0-9_./<>\-]*\Z")


# ================================================================== printing


def _quote(s: str) -> str:
    return json.dumps(s)


def _ident(s: str) -> str:
    return s if _PLAIN.match(s) else _quote(s)


def format_loc(loc: ir.SrcLoc | None) -> str:
    """` @file:line:col[:func]` (with a leading space), or '' for no location."""
    if loc is None:
        return ""
    f = loc.file if _PLAIN_FILE.match(loc.file) else _quote(loc.file)
    tail = f":{_ident(loc.func)}" if loc.func else ""
    return f" @{f}:{loc.line}:{loc.col}{tail}"


def format_const(dtype: DataType, value: int | float) -> str:
    """An int in decimal; a float (rounded to its dtype) as `float.hex`, NaN with its f64 bits."""
    if dtype.is_int:
        return str(int(value))
    with np.errstate(all="ignore"):
        v = float(np.array(value, dtype=np.float64).astype(dtype.np_dtype))
    if math.isnan(v):
        return "nan(0x%016x)" % struct.unpack("<Q", struct.pack("<d", v))[0]
    return float.hex(v)


def _shape(t: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(x) for x in t) + ("," if len(t) == 1 else "") + ")"


class Namer:
    """Names values as they are defined (`%N`, loop variables `%iN`); unknown values get `%?N`."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.n_val = 0
        self.n_var = 0
        self.n_undef = 0

    def define(self, v: ir.Value) -> str:
        if isinstance(v, ir.LoopVar):
            name = f"%i{self.n_var}"
            self.n_var += 1
        else:
            name = f"%{self.n_val}"
            self.n_val += 1
        self.names[id(v)] = name
        return name

    def ref(self, v: object) -> str:
        if not isinstance(v, ir.Value):
            return f"<not a value: {type(v).__name__}>"
        if id(v) not in self.names:
            self.names[id(v)] = f"%?{self.n_undef}"
            self.n_undef += 1
        return self.names[id(v)]

    def refs(self, vs: tuple) -> str:
        return ", ".join(self.ref(v) for v in vs)

    def stmt_line(self, s: ir.Stmt) -> str:
        """The one-line form of `s` (defining its name); block openers end in `{`."""
        return format_stmt(s, self)


def format_stmt(s: ir.Stmt, n: Namer) -> str:
    """One line for `s`: operands are referenced before the result (or loop var) is defined."""
    body = _format_body(s, n)
    if isinstance(s, ir.Value):
        body = f"{n.define(s)} = {body}"
    line = body + format_loc(s.loc)
    return line + " {" if s.blocks() else line


def _format_body(s: ir.Stmt, n: Namer) -> str:
    fn = _FORMATTERS.get(type(s))
    if fn is None:
        return f"<unknown statement {type(s).__name__}>"
    return fn(s, n)


def _fmt_for(s: ir.RangeFor, n: Namer) -> str:
    b, e = n.ref(s.begin), n.ref(s.end)
    head = "parallel for" if s.parallel else "for"
    name = f" name={_quote(s.var.name)}" if s.var.name else ""
    nd = "" if s.from_range else " ndrange"
    bd = f" block_dim={s.block_dim}" if s.block_dim else ""
    return f"{head} {n.define(s.var)} : {s.var.dtype} in {b} .. {e}{name}{nd}{bd}"


def _fmt_print(s: ir.Print, n: Namer) -> str:
    items, k = [], 0
    for x in s.items:
        if isinstance(x, str):
            items.append(_quote(x))
            continue
        spec = s.fmts[k] if k < len(s.fmts) else ""
        k += 1
        items.append(n.ref(x) + (f" : {_quote(spec)}" if spec else ""))
    return "print " + ", ".join(items) if items else "print"


def _fmt_check(s: ir.Check, n: Namer) -> str:
    return f"check {n.ref(s.cond)}, #{s.check} ({n.refs(s.args)})"


_FORMATTERS = {
    ir.Const: lambda s, n: f"const {s.dtype} {format_const(s.dtype, s.value)}",
    ir.ArgLoad: lambda s, n: f"arg_load {s.index} : {s.dtype}",
    ir.OpStmt: lambda s, n: f"{s.op.value} {s.dtype} {n.refs(s.args)}".rstrip(),
    ir.Alloca: lambda s, n: f"alloca {s.dtype}",
    ir.LocalLoad: lambda s, n: f"local_load {n.ref(s.var)} : {s.dtype}",
    ir.LocalStore: lambda s, n: f"local_store {n.ref(s.var)}, {n.ref(s.value)}",
    ir.GlobalPtr: lambda s, n: f"global_ptr @{s.buffer} [{n.refs(s.indices)}] : {s.dtype}",
    ir.GlobalLoad: lambda s, n: f"global_load {'volatile ' if s.volatile else ''}{n.ref(s.ptr)} : {s.dtype}",
    ir.GlobalStore: lambda s, n: f"global_store {n.ref(s.ptr)}, {n.ref(s.value)}",
    ir.AtomicRMW: lambda s, n: f"atomic {s.op.value} {n.ref(s.ptr)}, {n.ref(s.value)} : {s.dtype}",
    ir.AtomicSwap: lambda s, n: (f"atomic_swap {n.ref(s.ptr)}, {n.ref(s.value)} : {s.dtype}" if s.expected is None
                                 else f"atomic_cas {n.ref(s.ptr)}, {n.ref(s.expected)}, {n.ref(s.value)} : {s.dtype}"),
    ir.LocalAtomic: lambda s, n: f"local_atomic {s.op.value} {n.ref(s.var)}, {n.ref(s.value)} : {s.dtype}",
    ir.ExternalShape: lambda s, n: f"external_shape @{s.buffer}, {s.axis} : {s.dtype}",
    ir.RandomValue: lambda s, n: f"random {s.dtype}",
    ir.RangeFor: _fmt_for,
    ir.If: lambda s, n: f"if {n.ref(s.cond)}",
    ir.While: lambda s, n: "while",
    ir.GraphDoWhile: lambda s, n: f"graph_do_while @{s.cond}",
    ir.Break: lambda s, n: "break",
    ir.Continue: lambda s, n: "continue",
    ir.Return: lambda s, n: f"return {n.refs(s.values)}".rstrip(),
    ir.Print: _fmt_print,
    ir.Check: _fmt_check,
    ir.ThreadSlot: lambda s, n: f"thread_slot : {s.dtype}",
    ir.Simt: lambda s, n: f"simt {s.op} ({n.refs(s.args)}) : {s.dtype}",
    ir.AdStackAlloc: lambda s, n: f"adstack_alloc {s.stack}",
    ir.AdStackPush: lambda s, n: f"adstack_push {s.stack}, {n.ref(s.value)}",
    ir.AdStackPop: lambda s, n: f"adstack_pop {s.stack}",
    ir.AdStackLoadTop: lambda s, n: f"adstack_load_top {s.stack} : {s.dtype}",
}


def _print_stmts(block: ir.Block, n: Namer, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    for s in block.stmts:
        out.append(pad + format_stmt(s, n))
        if isinstance(s, ir.If):
            _print_stmts(s.then, n, indent + 1, out)
            if s.else_.stmts:
                out.append(pad + "} else {")
                _print_stmts(s.else_, n, indent + 1, out)
            out.append(pad + "}")
        elif s.blocks():
            for b in s.blocks():
                _print_stmts(b, n, indent + 1, out)
            out.append(pad + "}")


def print_block(block: ir.Block, indent: int = 0, namer: Namer | None = None) -> str:
    """The statements of `block`, one per line (values defined outside it print as `%?N`)."""
    out: list[str] = []
    _print_stmts(block, namer or Namer(), indent, out)
    return "\n".join(out)


def _header_lines(k: ir.KernelIR) -> list[str]:
    out = [f"kernel {_ident(k.name)}{format_loc(k.loc)}"]
    if k.graph:
        out.append("  graph")
    for a in k.args:
        buf = f" buffer=@{a.buffer}" if a.buffer != -1 else ""
        out.append(f"  arg {_ident(a.name)} : {_ident(a.kind)} {a.dtype}{buf}")
    for i, b in enumerate(k.buffers):
        out.append(f"  buffer @{i} = {_buffer_text(b)}")
    for t in k.rets:
        out.append(f"  ret {t}")
    for i, c in enumerate(k.checks):
        out.append(f"  check #{i} = {_ident(c.kind)} {_quote(c.message)}{format_loc(c.loc)}")
    for i, st in enumerate(k.stacks):
        out.append(f"  stack {i} = {st.dtype} size={_shape(st.size)} name={_quote(st.name)}{format_loc(st.loc)}")
    return out


def _buffer_text(b: ir.BufferDecl) -> str:
    parts = [_ident(b.kind), str(b.dtype)]
    if b.shape:
        parts.append(f"shape={_shape(b.shape)}")
    if b.ndim:
        parts.append(f"ndim={b.ndim}")
    if b.elem_shape:
        parts.append(f"elem={_shape(b.elem_shape)}")
    if b.arg != -1:
        parts.append(f"arg={b.arg}")
    if b.name:
        parts.append(f"name={_quote(b.name)}")
    if b.large:
        parts.append(f"large={b.large}")
    return " ".join(parts)


def _task_lines(t: ir.Task, n: Namer, out: list[str]) -> None:
    if t.kind != "range":
        out.append(f"  task {_ident(t.kind)}{format_loc(t.loc)} {{")
        _print_stmts(t.body, n, 2, out)
        out.append("  }")
        return
    var = n.define(t.var) if t.var is not None else "%?"
    out.append(f"  task range {var} : {t.var.dtype if t.var else 'i32'}{format_loc(t.loc)} {{")
    out.append("    prologue {")
    _print_stmts(t.prologue, n, 3, out)
    out.append("    }")
    out.append(f"    bounds {n.ref(t.begin)} .. {n.ref(t.end)}")
    if t.var is not None and t.var.name:
        out.append(f"    name {_quote(t.var.name)}")
    if t.block_dim:
        out.append(f"    block_dim {t.block_dim}")
    out.append("    body {")
    _print_stmts(t.body, n, 3, out)
    out.append("    }")
    out.append("  }")


def print_kernel(k: ir.KernelIR) -> str:
    """The whole kernel: header (args, buffers, rets, checks), body, and tasks when offloaded."""
    n = Namer()
    out = _header_lines(k)
    out.append("body {")
    _print_stmts(k.body, n, 1, out)
    out.append("}")
    if k.tasks is not None:
        out.append("tasks {")
        for t in k.tasks:
            _task_lines(t, n, out)
        out.extend(f"  task_loop {lp.first} {lp.end} @{lp.cond}" for lp in k.task_loops)
        out.append("}")
    return "\n".join(out) + "\n"


# ================================================================== parsing




# The parser lives in its own module; importing it last keeps `qd.ir_text.parse_kernel` working.
from qd.ir_parse import IRParseError, parse_const, parse_kernel  # noqa: E402,F401
