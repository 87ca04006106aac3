"""Reads the text form of qd's IR back (`parse_kernel`); `qd/ir_text.py` writes it and documents it."""

from __future__ import annotations

import json
import re
import struct
from typing import Callable

from qd import ir
from qd.ops import Op
from qd.types.dtypes import DataType, by_name

_STR = r'"(?:[^"\\]|\\.)*"'
_TOKEN = re.compile(rf"""\s*(?:
    (?P<str>{_STR})
  | (?P<loc>@(?:{_STR}|[A-Za-z0-9_./<>\-]+):\d+:\d+(?::(?:{_STR}|[A-Za-z_][A-Za-z0-9_]*))?)
  | (?P<val>%\??[A-Za-z0-9_]+)
  | (?P<buf>@\d+)
  | (?P<chk>\#\d+)
  | (?P<num>[-+]?(?:inf\b|nan\(0x[0-9a-f]+\)|\d(?:[pP][-+]|[\w.])*))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>\.\.|[=,:()\[\]{{}}])
)""", re.VERBOSE)


class IRParseError(ValueError):
    pass


def _tokenize(line: str, lineno: int) -> list[tuple[str, str]]:
    toks, pos = [], 0
    line = line.rstrip()
    while pos < len(line):
        m = _TOKEN.match(line, pos)
        if m is None or m.end() == pos:
            raise IRParseError(f"line {lineno}: cannot read {line[pos:]!r}")
        toks.append((m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    return toks


def _parse_loc(text: str) -> ir.SrcLoc:
    m = re.fullmatch(rf"@({_STR}|[^:]+):(\d+):(\d+)(?::({_STR}|.+))?", text)
    f, line, col, func = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4) or ""
    f = json.loads(f) if f.startswith('"') else f
    func = json.loads(func) if func.startswith('"') else func
    return ir.SrcLoc(f, line, col, func)


def parse_const(dtype: DataType, text: str) -> int | float:
    if dtype.is_int:
        return int(text)
    if text.startswith("nan("):
        return struct.unpack("<d", struct.pack("<Q", int(text[4:-1], 16)))[0]
    return float.fromhex(text)


class _Line:
    """The tokens of one line, consumed left to right; a trailing location is split off."""

    def __init__(self, toks: list[tuple[str, str]], lineno: int) -> None:
        self.opens = bool(toks) and toks[-1] == ("punct", "{")
        if self.opens:
            toks = toks[:-1]
        self.loc = None
        if toks and toks[-1][0] == "loc":
            self.loc = _parse_loc(toks[-1][1])
            toks = toks[:-1]
        self.toks, self.i, self.lineno = toks, 0, lineno

    def fail(self, what: str) -> IRParseError:
        got = self.toks[self.i][1] if self.i < len(self.toks) else "end of line"
        return IRParseError(f"line {self.lineno}: expected {what}, got {got!r}")

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, kind: str | None = None, text: str | None = None) -> str:
        if self.i >= len(self.toks):
            raise self.fail(text or kind or "a token")
        k, t = self.toks[self.i]
        if (kind and k != kind) or (text and t != text):
            raise self.fail(text or kind)
        self.i += 1
        return t

    def accept(self, text: str) -> bool:
        if self.peek() == text:
            self.i += 1
            return True
        return False

    def name(self) -> str:
        k, t = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if k not in ("ident", "str"):
            raise self.fail("a name")
        self.i += 1
        return json.loads(t) if k == "str" else t

    def dtype(self) -> DataType:
        return by_name(self.take("ident"))

    def int(self) -> int:
        return int(self.take("num"))

    def ints(self) -> tuple[int, ...]:
        self.take(text="(")
        out = []
        while not self.accept(")"):
            out.append(self.int())
            self.accept(",")
        return tuple(out)

    def done(self) -> None:
        if self.i != len(self.toks):
            raise self.fail("end of line")


_OPS = {op.value: op for op in Op}


class _Parser:
    """Reads the text of `print_kernel` back; names resolve through one environment."""

    def __init__(self, text: str) -> None:
        self.lines = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines()) if ln.strip()]
        self.pos = 0
        self.env: dict[str, ir.Value] = {}

    def line(self) -> _Line:
        if self.pos >= len(self.lines):
            raise IRParseError("unexpected end of text")
        lineno, text = self.lines[self.pos]
        self.pos += 1
        return _Line(_tokenize(text, lineno), lineno)

    def peek_text(self) -> str:
        return self.lines[self.pos][1] if self.pos < len(self.lines) else ""

    def val(self, ln: _Line) -> ir.Value:
        name = ln.take("val")
        if name not in self.env:
            raise IRParseError(f"line {ln.lineno}: {name} is not defined")
        return self.env[name]

    def vals(self, ln: _Line, close: str | None = None) -> tuple[ir.Value, ...]:
        out = []
        while ln.peek() is not None and ln.peek() != close:
            out.append(self.val(ln))
            if not ln.accept(","):
                break
        return tuple(out)

    def block(self) -> tuple[ir.Block, str]:
        """Statements up to the closing `}` (or `} else {`), which is consumed and returned."""
        out: list[ir.Stmt] = []
        while True:
            t = self.peek_text()
            if t in ("}", "} else {"):
                self.pos += 1
                return ir.Block(tuple(out)), t
            out.append(self.stmt(self.line()))

    def closed_block(self) -> ir.Block:
        b, term = self.block()
        if term != "}":
            raise IRParseError(f"line {self.lines[self.pos - 1][0]}: unexpected else")
        return b

    def stmt(self, ln: _Line) -> ir.Stmt:
        if ln.peek() is not None and ln.toks[0][0] == "val" and len(ln.toks) > 1 \
                and ln.toks[1][1] == "=":
            name = ln.take("val")
            ln.take(text="=")
            s = self.value_stmt(ln)
            self.env[name] = s
        else:
            s = self.other_stmt(ln)
        ln.done()
        return s

    def value_stmt(self, ln: _Line) -> ir.Stmt:
        kw, loc = ln.take("ident"), ln.loc
        if kw in _OPS:
            dt = ln.dtype()
            return ir.OpStmt(op=_OPS[kw], dtype=dt, args=self.vals(ln), loc=loc)
        fn = _VALUE_PARSERS.get(kw)
        if fn is None:
            raise IRParseError(f"line {ln.lineno}: unknown statement {kw!r}")
        return fn(self, ln)

    def typed(self, ln: _Line) -> DataType:
        ln.take(text=":")
        return ln.dtype()

    def other_stmt(self, ln: _Line) -> ir.Stmt:
        head = ln.take("ident")
        if head == "parallel":
            ln.take(text="for")
            return self.range_for(ln, True)
        fn = _OTHER_PARSERS.get(head)
        if fn is None:
            raise IRParseError(f"line {ln.lineno}: unknown statement {head!r}")
        return fn(self, ln)

    def range_for(self, ln: _Line, parallel: bool) -> ir.RangeFor:
        vname = ln.take("val")
        dt = self.typed(ln)
        ln.take(text="in")
        begin = self.val(ln)
        ln.take(text="..")
        end = self.val(ln)
        name = ""
        if ln.accept("name"):
            ln.take(text="=")
            name = ln.name()
        from_range = not ln.accept("ndrange")
        block_dim = 0
        if ln.accept("block_dim"):
            ln.take(text="=")
            block_dim = ln.int()
        var = ir.LoopVar(dt, name)
        self.env[vname] = var
        return ir.RangeFor(var=var, begin=begin, end=end, body=self.closed_block(),
                           parallel=parallel, loc=ln.loc, from_range=from_range, block_dim=block_dim)

    def if_stmt(self, ln: _Line) -> ir.If:
        cond = self.val(ln)
        then, term = self.block()
        else_ = self.closed_block() if term == "} else {" else ir.Block()
        return ir.If(cond=cond, then=then, else_=else_, loc=ln.loc)

    def print_stmt(self, ln: _Line) -> ir.Print:
        items: list = []
        fmts: list[str] = []
        while ln.peek() is not None:
            if ln.toks[ln.i][0] == "str":
                items.append(json.loads(ln.take("str")))
            else:
                items.append(self.val(ln))
                fmts.append(json.loads(ln.take("str")) if ln.accept(":") else "")
            ln.accept(",")
        fmts_t = tuple(fmts) if any(fmts) else ()
        return ir.Print(items=tuple(items), fmts=fmts_t, loc=ln.loc)

    def check_stmt(self, ln: _Line) -> ir.Check:
        cond = self.val(ln)
        ln.take(text=",")
        idx = int(ln.take("chk")[1:])
        ln.take(text="(")
        args = self.vals(ln, ")")
        ln.take(text=")")
        return ir.Check(cond=cond, check=idx, args=args, loc=ln.loc)


def _p_const(p: _Parser, ln: _Line) -> ir.Const:
    dt = ln.dtype()
    return ir.Const(dtype=dt, value=parse_const(dt, ln.take("num")), loc=ln.loc)


def _p_global_ptr(p: _Parser, ln: _Line) -> ir.GlobalPtr:
    buf = int(ln.take("buf")[1:])
    ln.take(text="[")
    idx = p.vals(ln, "]")
    ln.take(text="]")
    return ir.GlobalPtr(buffer=buf, indices=idx, dtype=p.typed(ln), loc=ln.loc)


def _p_atomic(p: _Parser, ln: _Line) -> ir.AtomicRMW:
    op = _OPS[ln.take("ident")]
    ptr = p.val(ln)
    ln.take(text=",")
    v = p.val(ln)
    return ir.AtomicRMW(op=op, ptr=ptr, value=v, dtype=p.typed(ln), loc=ln.loc)


def _p_atomic_swap(p: _Parser, ln: _Line) -> ir.AtomicSwap:
    ptr = p.val(ln)
    ln.take(text=",")
    v = p.val(ln)
    return ir.AtomicSwap(ptr=ptr, value=v, dtype=p.typed(ln), loc=ln.loc)


def _p_atomic_cas(p: _Parser, ln: _Line) -> ir.AtomicSwap:
    ptr = p.val(ln)
    ln.take(text=",")
    expected = p.val(ln)
    ln.take(text=",")
    v = p.val(ln)
    return ir.AtomicSwap(ptr=ptr, expected=expected, value=v, dtype=p.typed(ln), loc=ln.loc)


def _p_local_atomic(p: _Parser, ln: _Line) -> ir.LocalAtomic:
    op = _OPS[ln.take("ident")]
    var = p.val(ln)
    ln.take(text=",")
    v = p.val(ln)
    return ir.LocalAtomic(op=op, var=var, value=v, dtype=p.typed(ln), loc=ln.loc)


def _p_external_shape(p: _Parser, ln: _Line) -> ir.ExternalShape:
    buf = int(ln.take("buf")[1:])
    ln.take(text=",")
    axis = ln.int()
    return ir.ExternalShape(buffer=buf, axis=axis, dtype=p.typed(ln), loc=ln.loc)


def _p_store(cls: type, field: str) -> Callable[[_Parser, _Line], ir.Stmt]:
    def parse(p: _Parser, ln: _Line) -> ir.Stmt:
        target = p.val(ln)
        ln.take(text=",")
        return cls(**{field: target, "value": p.val(ln)}, loc=ln.loc)
    return parse


def _p_simt(p: _Parser, ln: _Line) -> ir.Simt:
    op = ln.name()
    ln.take(text="(")
    args = p.vals(ln, close=")")
    ln.take(text=")")
    return ir.Simt(op=op, args=tuple(args), dtype=p.typed(ln), loc=ln.loc)


def _p_push(p: _Parser, ln: _Line) -> ir.AdStackPush:
    k = ln.int()
    ln.take(text=",")
    return ir.AdStackPush(stack=k, value=p.val(ln), loc=ln.loc)


_VALUE_PARSERS = {
    "const": _p_const,
    "arg_load": lambda p, ln: ir.ArgLoad(index=ln.int(), dtype=p.typed(ln), loc=ln.loc),
    "alloca": lambda p, ln: ir.Alloca(dtype=ln.dtype(), loc=ln.loc),
    "local_load": lambda p, ln: ir.LocalLoad(var=p.val(ln), dtype=p.typed(ln), loc=ln.loc),
    "global_ptr": _p_global_ptr,
    "global_load": lambda p, ln: ir.GlobalLoad(volatile=ln.accept("volatile"), ptr=p.val(ln), dtype=p.typed(ln),
                                               loc=ln.loc),
    "atomic": _p_atomic,
    "local_atomic": _p_local_atomic,
    "atomic_swap": _p_atomic_swap,
    "atomic_cas": _p_atomic_cas,
    "external_shape": _p_external_shape,
    "random": lambda p, ln: ir.RandomValue(dtype=ln.dtype(), loc=ln.loc),
    "thread_slot": lambda p, ln: ir.ThreadSlot(dtype=p.typed(ln), loc=ln.loc),
    "simt": _p_simt,
    "adstack_load_top": lambda p, ln: ir.AdStackLoadTop(stack=ln.int(), dtype=p.typed(ln), loc=ln.loc),
}

_OTHER_PARSERS = {
    "for": lambda p, ln: p.range_for(ln, False),
    "if": _Parser.if_stmt,
    "while": lambda p, ln: ir.While(body=p.closed_block(), loc=ln.loc),
    "graph_do_while": lambda p, ln: ir.GraphDoWhile(cond=int(ln.take("buf")[1:]), body=p.closed_block(), loc=ln.loc),
    "break": lambda p, ln: ir.Break(loc=ln.loc),
    "continue": lambda p, ln: ir.Continue(loc=ln.loc),
    "return": lambda p, ln: ir.Return(values=p.vals(ln), loc=ln.loc),
    "print": _Parser.print_stmt,
    "check": _Parser.check_stmt,
    "adstack_alloc": lambda p, ln: ir.AdStackAlloc(stack=ln.int(), loc=ln.loc),
    "adstack_push": _p_push,
    "adstack_pop": lambda p, ln: ir.AdStackPop(stack=ln.int(), loc=ln.loc),
    "local_store": _p_store(ir.LocalStore, "var"),
    "global_store": _p_store(ir.GlobalStore, "ptr"),
}


# ------------------------------------------------------------------ kernel header and tasks


def _parse_header(p: _Parser) -> dict:
    ln = p.line()
    ln.take(text="kernel")
    hdr = {"name": ln.name(), "loc": ln.loc, "args": [], "buffers": [], "rets": [], "checks": [], "stacks": [], "graph": False}
    ln.done()
    while p.peek_text() != "body {":
        ln = p.line()
        kw = ln.take("ident")
        if kw not in _HEADER:
            raise IRParseError(f"line {ln.lineno}: unknown header entry {kw!r}")
        _HEADER[kw](ln, hdr)
        ln.done()
    p.pos += 1
    return hdr


def _h_arg(ln: _Line, hdr: dict) -> None:
    name = ln.name()
    ln.take(text=":")
    kind, dt, buf = ln.name(), ln.dtype(), -1
    if ln.accept("buffer"):
        ln.take(text="=")
        buf = int(ln.take("buf")[1:])
    hdr["args"].append(ir.ArgDecl(name, kind, dt, buf))


def _h_buffer(ln: _Line, hdr: dict) -> None:
    idx = int(ln.take("buf")[1:])
    if idx != len(hdr["buffers"]):
        raise IRParseError(f"line {ln.lineno}: buffer @{idx} out of order")
    ln.take(text="=")
    kw: dict = {"kind": ln.name(), "dtype": ln.dtype()}
    while ln.peek() is not None:
        key = ln.take("ident")
        ln.take(text="=")
        if key in ("shape", "elem"):
            kw["shape" if key == "shape" else "elem_shape"] = ln.ints()
        elif key in ("ndim", "arg", "large"):
            kw[key] = ln.int()
        elif key == "name":
            kw["name"] = ln.name()
        else:
            raise ln.fail("a buffer attribute")
    hdr["buffers"].append(ir.BufferDecl(**kw))


def _h_check(ln: _Line, hdr: dict) -> None:
    idx = int(ln.take("chk")[1:])
    if idx != len(hdr["checks"]):
        raise IRParseError(f"line {ln.lineno}: check #{idx} out of order")
    ln.take(text="=")
    kind = ln.name()
    hdr["checks"].append(ir.CheckDecl(kind, json.loads(ln.take("str")), ln.loc))


def _h_stack(ln: _Line, hdr: dict) -> None:
    idx = ln.int()
    if idx != len(hdr["stacks"]):
        raise IRParseError(f"line {ln.lineno}: stack {idx} out of order")
    ln.take(text="=")
    dt = ln.dtype()
    ln.take(text="size")
    ln.take(text="=")
    size = ln.ints()
    ln.take(text="name")
    ln.take(text="=")
    hdr["stacks"].append(ir.StackDecl(dt, size, ln.loc, ln.name()))


_HEADER = {
    "graph": lambda ln, hdr: hdr.__setitem__("graph", True),
    "arg": _h_arg,
    "buffer": _h_buffer,
    "ret": lambda ln, hdr: hdr["rets"].append(ln.dtype()),
    "check": _h_check,
    "stack": _h_stack,
}


def _expect(p: _Parser, text: str) -> None:
    lineno, got = p.lines[p.pos] if p.pos < len(p.lines) else (0, "end of text")
    if got != text:
        raise IRParseError(f"line {lineno}: expected {text!r}, got {got!r}")
    p.pos += 1


def _parse_task(p: _Parser) -> ir.Task:
    ln = p.line()
    ln.take(text="task")
    kind = ln.name()
    if kind != "range":
        ln.done()
        return ir.Task(kind=kind, body=p.closed_block(), loc=ln.loc)
    vname = ln.take("val")
    dt = p.typed(ln)
    ln.done()
    _expect(p, "prologue {")
    prologue = p.closed_block()
    b = p.line()
    b.take(text="bounds")
    begin = p.val(b)
    b.take(text="..")
    end = p.val(b)
    b.done()
    name = ""
    if p.peek_text().startswith("name "):
        nl = p.line()
        nl.take(text="name")
        name = nl.name()
    block_dim = 0
    if p.peek_text().startswith("block_dim "):
        bl = p.line()
        bl.take(text="block_dim")
        block_dim = bl.int()
    var = ir.LoopVar(dt, name)
    p.env[vname] = var
    _expect(p, "body {")
    body = p.closed_block()
    _expect(p, "}")
    return ir.Task(kind="range", body=body, var=var, prologue=prologue, begin=begin, end=end,
                   loc=ln.loc, block_dim=block_dim)


def parse_kernel(text: str) -> ir.KernelIR:
    """The `KernelIR` that `print_kernel` printed as `text`. Raises `IRParseError`."""
    p = _Parser(text)
    hdr = _parse_header(p)
    body = p.closed_block()
    tasks, loops = None, []
    if p.peek_text() == "tasks {":
        p.pos += 1
        tasks = []
        while p.peek_text() != "}" and not p.peek_text().startswith("task_loop "):
            tasks.append(_parse_task(p))
        while p.peek_text().startswith("task_loop "):
            ln = p.line()
            ln.take(text="task_loop")
            loops.append(ir.TaskLoop(ln.int(), ln.int(), int(ln.take("buf")[1:])))
        p.pos += 1
        tasks = tuple(tasks)
    if p.pos != len(p.lines):
        raise IRParseError(f"line {p.lines[p.pos][0]}: unexpected text after the kernel")
    return ir.KernelIR(name=hdr["name"], args=tuple(hdr["args"]), buffers=tuple(hdr["buffers"]),
                       rets=tuple(hdr["rets"]), checks=tuple(hdr["checks"]), body=body,
                       tasks=tasks, loc=hdr["loc"], stacks=tuple(hdr["stacks"]), task_loops=tuple(loops),
                       graph=hdr["graph"])
