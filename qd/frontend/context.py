"""Per-function state of the transformer: parsed source (cached), scopes, name resolution, error positions."""

from __future__ import annotations

import ast
import builtins
import inspect
import os
import textwrap
import threading
from typing import Any, Callable

from qd import ir
from qd.errors import (QuadrantsCompilationError, QuadrantsNameError, QuadrantsRuntimeError,
                       QuadrantsSyntaxError)


class FuncSource:
    """A Python function's parsed AST with line numbers of the real file (built once per function)."""

    def __init__(self, fn: Callable, stamp: tuple | None = None) -> None:
        """`stamp`: `file_stamp(fn)` when `fn` was decorated; a file changed since then is checked against `fn`'s
        code (`_check_fresh`)."""
        self.fn = fn
        found = _quick_source(fn)
        if found is None:
            try:
                lines, start = inspect.getsourcelines(fn)
            except (OSError, TypeError) as e:
                raise QuadrantsSyntaxError(f"cannot get the source of {getattr(fn, '__name__', fn)!r}: {e}") from None
            tree = _parse(lines)
        else:
            lines, start, tree = found
        self.file = inspect.getsourcefile(fn) or "<unknown>"
        self.lines = [ln.rstrip("\n") for ln in lines]
        self.start = start
        first = lines[0]
        self.indent = len(first) - len(first.lstrip())
        ast.increment_lineno(tree, start - 1)
        node = tree.body[0]
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise QuadrantsSyntaxError(f"{self.file}:{start}: expected a function definition")
        self.node: ast.FunctionDef = node  # type: ignore[assignment]
        self.name = fn.__name__
        _check_fresh(fn, node, self.file, stamp)
        self.assigned = _assigned_names(node)

    def line(self, lineno: int) -> str:
        i = lineno - self.start
        return self.lines[i] if 0 <= i < len(self.lines) else ""

    def loc(self, node: ast.AST) -> ir.SrcLoc:
        return ir.SrcLoc(self.file, getattr(node, "lineno", self.start), getattr(node, "col_offset", 0) + self.indent,
                         self.name)

    def pos_message(self, node: ast.AST, msg: str) -> str:
        """`file:line:col: in func:`, then Quadrants' frame (`File "f", line N, in func:`, the source line,
        carets), then `msg`."""
        lineno = getattr(node, "lineno", self.start)
        col = getattr(node, "col_offset", 0) + self.indent
        return f"{self.file}:{lineno}:{col}: in {self.name}:\n{self.frame(node)}{msg}"

    def frame(self, node: ast.AST) -> str:
        """One frame as Quadrants prints it: tabs expanded (stops of 4), long lines wrapped at 80 columns."""
        lineno = getattr(node, "lineno", self.start)
        raw = self.line(lineno)
        col = getattr(node, "col_offset", 0) + self.indent
        end = (getattr(node, "end_col_offset", None) or col - self.indent) + self.indent
        if getattr(node, "end_lineno", lineno) != lineno:
            end = len(raw.rstrip())
        text = raw.expandtabs(4)
        col, end = len(raw[:col].expandtabs(4)), len(raw[:end].expandtabs(4))
        carets = " " * col + "^" * max(1, end - col)
        out = [f'File "{self.file}", line {lineno}, in {self.name}:']
        n = max(len(text), len(carets), 1)
        for i in range(0, min(n, _WRAP * _MAX_ROWS), _WRAP):
            out.append(text[i:i + _WRAP])
            if carets[i:i + _WRAP].strip():
                out.append(carets[i:i + _WRAP])
        if n > _WRAP * _MAX_ROWS:
            out.append(f"... ({n - _WRAP * _MAX_ROWS} more characters of this line)")
        return "\n".join(out) + "\n"


_WRAP = 80
_MAX_ROWS = 8  # rows of a wrapped line shown in a frame (a 900-term expression is one line)


# CPython 3.11's ast.parse keeps its recursion depth per interpreter, not per thread: two threads parsing at once
# can raise "SystemError: AST constructor recursion depth mismatch" (seen in test_threads' concurrent first calls)
PARSE_LOCK = threading.Lock()


def _parse(lines: list[str]) -> ast.Module:
    text = textwrap.dedent("".join(lines))
    with PARSE_LOCK:
        return ast.parse(text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _quick_source(fn: Callable) -> tuple[list[str], int, ast.Module] | None:
    """(lines, first line number, parsed module) of `fn`'s definition, found without `inspect.getsourcelines`
    (whose tokenizer costs about 8 ms the first time in a process, a large part of a new kernel's first call):
    from its first line (a decorator's, if any) to the last line holding its code (`co_lines`), then every
    following line that is blank or indented deeper than the first. None where that is not exactly one
    definition of `fn` (a lambda, a body ending in a string at column 0, ...): the caller asks `inspect`."""
    import linecache

    code = getattr(fn, "__code__", None)
    file = inspect.getsourcefile(fn) if code is not None else None
    if not file:
        return None
    linecache.checkcache(file)  # the file edited since linecache read it (a reload): read it again
    all_lines = linecache.getlines(file, fn.__globals__)
    start = code.co_firstlineno
    last = max((ln for _, _, ln in code.co_lines() if ln), default=start)
    if not 0 < start <= last <= len(all_lines):
        return None
    base = _indent(all_lines[start - 1])
    end = last
    while end < len(all_lines) and (not all_lines[end].strip() or _indent(all_lines[end]) > base):
        end += 1
    while end > last and not all_lines[end - 1].strip():
        end -= 1
    lines = all_lines[start - 1:end]
    try:
        tree = _parse(lines)
    except SyntaxError:
        return None
    node = tree.body[0] if len(tree.body) == 1 else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != fn.__name__:
        return None
    return lines, start, tree


def file_stamp(fn: Callable) -> tuple[int, int] | None:
    """(mtime in ns, size) of the file defining `fn` now; None where there is no such file."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    try:
        st = os.stat(code.co_filename)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns, st.st_size


def _check_fresh(fn: Callable, node: ast.FunctionDef, file: str, stamp: tuple | None) -> None:
    """Refuses source lines that are not `fn`'s: a def of another name there, or (when its file changed since `fn`
    was decorated: edited without a reload) code lines of `fn` that hold no statement or expression of this def."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    stale = node.name != code.co_name
    if not stale and stamp is not None and file_stamp(fn) != stamp:
        starts = {n.lineno for n in ast.walk(node) if hasattr(n, "lineno")}
        starts.add(code.co_firstlineno)
        params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
        stale = any(ln not in starts for _, _, ln in code.co_lines() if ln) or \
            params != list(code.co_varnames[:len(params)])
    if stale:
        raise QuadrantsCompilationError(
            f"{file}:{code.co_firstlineno}: the source of {code.co_name} is not there any more: its file changed "
            f"after the function was defined (edited without reloading its module). Reload the module "
            f"(importlib.reload) or re-run the cell that defines it")


def _assigned_names(node: ast.FunctionDef) -> set[str]:
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


# id of a code object (or of a callable without one) -> (that object, its FuncSource). Keyed by identity: code
# objects compare equal across files (`co_filename` is not compared) and across edits that keep the bytecode (an
# annotation inside the body, which qd reads and Python drops), so an equality key served one kernel's source for
# another. The entry holds the object, so its id is not reused while the entry lives.
_SOURCES: dict[int, tuple[Any, FuncSource]] = {}


def source_of(fn: Callable, stamp: tuple | None = None) -> FuncSource:
    """`fn`'s parsed source, once per code object: every closure made by one `def` shares it; a new code object
    (a reloaded module, a re-run notebook cell) reads its file again. `stamp`: see `FuncSource`."""
    key = getattr(fn, "__code__", fn)
    entry = _SOURCES.get(id(key))
    if entry is None or entry[0] is not key:
        entry = _SOURCES[id(key)] = (key, FuncSource(fn, stamp))
    return entry[1]


class FuncContext:
    """Scopes and name resolution of one function being transformed (kernel or inlined func)."""

    def __init__(self, src: FuncSource, is_kernel: bool, entry_depth: int, fn: Callable | None = None) -> None:
        self.src = src
        self.is_kernel = is_kernel
        self.scopes: list[dict[str, Any]] = [{}]
        self.entry_depth = entry_depth
        self.loops: list[dict] = []  # enclosing loops: {"kind": static|serial|parallel, "depth", "status"}
        self.returned = False
        self.return_value: Any = None
        self.return_type: Any = None
        # Sources are cached per code object, which every closure made from one `def` shares: names must
        # resolve through the function being compiled, never the one that first filled the cache.
        fn = fn if fn is not None else src.fn
        self.globals: dict[str, Any] = fn.__globals__
        self.closure: dict[str, Any] = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def push_scope(self) -> None:
        self.scopes.append({})

    def pop_scope(self) -> None:
        self.scopes.pop()

    def find_local(self, name: str) -> tuple[bool, Any]:
        for s in reversed(self.scopes):
            if name in s:
                return True, s[name]
        return False, None

    def bind(self, name: str, value: Any) -> None:
        self.scopes[-1][name] = value

    def lookup(self, name: str) -> Any:
        found, v = self.find_local(name)
        if found:
            return v
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise QuadrantsNameError(f'Name "{name}" is not defined')


TOO_DEEP = ("this nests too deeply to compile (Python's recursion limit): split the expression into several "
            "statements, keeping partial results in local variables")


def position_error(src: FuncSource, node: ast.AST, e: BaseException) -> BaseException:
    """`e` re-created with the node's position and source line in its message. An error already positioned
    in another function (an inlined `qd.func`) gets this call site's frame added, outermost first."""
    if getattr(e, "_qd_positioned", False):
        if getattr(e, "_qd_src", src) is not src and e.args and isinstance(e.args[0], str):
            head, _, rest = e.args[0].partition("\n")
            e.args = (f"{head}\n{src.frame(node)}{rest}", *e.args[1:])
            if isinstance(e, SyntaxError):  # (its str() is `msg`, set once from args[0] when it was made)
                e.msg = e.args[0]
            e._qd_src = src  # type: ignore[attr-defined]
        return e
    text = str(e) if str(e) else type(e).__name__
    if isinstance(e, RecursionError):
        new = QuadrantsCompilationError(src.pos_message(node, TOO_DEEP))
    elif isinstance(e, (QuadrantsCompilationError, QuadrantsRuntimeError)):
        try:
            new = type(e)(src.pos_message(node, text))
        except TypeError:
            new = QuadrantsCompilationError(src.pos_message(node, text))
    else:
        new = QuadrantsCompilationError(src.pos_message(node, f"{type(e).__name__}: {text}"))
    new._qd_positioned = True  # type: ignore[attr-defined]
    new._qd_src = src  # type: ignore[attr-defined]
    return new
