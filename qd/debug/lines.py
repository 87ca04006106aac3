"""Where a breakpoint can stop: a file's kernel lines, and pdb's checks when a breakpoint is set.

The debugger stops only in kernel code, so `b` refuses what pdb refuses (a file it cannot find, a line
past the end of the file: "End of file", a blank or comment line: "Blank or comment") and, beyond pdb,
a line of host code, which a kernel launch never reaches: it names the nearest kernel line instead.
Kernel code is found in the file's source, before anything is compiled: the functions decorated with
`@qd.kernel`, `@qd.func` or `@qd.real_func` (any module alias, a method of a class, a closure), or
wrapped by such a call (`k = qd.kernel(f)`); a func's `def` line (where it binds its arguments) and
the lines of their statements (a compound statement's header, not its `else:`; no docstring). A line
inside such a function that no thread stops at (a decorator, a kernel's `def` and the headers of its
top-level loops, which the launcher runs, `else:`, a docstring) moves to the next kernel line, as gdb
does.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys

from qd.frontend.context import PARSE_LOCK

_KERNEL_DECORATORS = frozenset({"kernel", "func", "real_func", "pyfunc"})
_cache: dict[str, tuple[float, list[tuple[int, int]], frozenset[int]]] = {}


class BreakpointError(ValueError):
    """A breakpoint the debugger refuses (the message says why, as pdb's would)."""


def find_file(name: str, main_file: str | None = None) -> str | None:
    """The path of the source file `name` (a path, or a name relative to the current directory, the main
    script's directory, a `sys.path` entry, or the basename of a loaded module's file), or None."""
    if os.path.isfile(name):
        return os.path.abspath(name)
    dirs = [os.path.dirname(os.path.abspath(main_file))] if main_file else []
    for d in dirs + [p or os.curdir for p in sys.path]:
        path = os.path.join(d, name)
        if os.path.isfile(path):
            return os.path.abspath(path)
    if os.path.basename(name) == name:
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and os.path.basename(f) == name and os.path.isfile(f):
                return os.path.abspath(f)
    return None


def _decorator_name(d: ast.expr) -> str:
    if isinstance(d, ast.Call):
        d = d.func
    if isinstance(d, ast.Attribute):
        return d.attr
    return d.id if isinstance(d, ast.Name) else ""


def _wrapped_names(tree: ast.AST) -> dict[str, str]:
    """Functions passed to a kernel decorator called as a function (`qd.kernel(f)`): name -> decorator."""
    return {a.id: _decorator_name(n) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and _decorator_name(n) in _KERNEL_DECORATORS
            for a in n.args[:1] if isinstance(a, ast.Name)}


def _kind(fn: ast.FunctionDef | ast.AsyncFunctionDef, wrapped: dict[str, str]) -> str:
    """"kernel", "func" (a @qd.func or the like) or "" (host code)."""
    names = [_decorator_name(d) for d in fn.decorator_list] + [wrapped.get(fn.name, "")]
    if "kernel" in names:
        return "kernel"
    return "func" if any(n in _KERNEL_DECORATORS for n in names) else ""


def _stmt_lines(s: ast.stmt) -> range:
    body = getattr(s, "body", None)
    if isinstance(body, list) and body and not isinstance(s, ast.FunctionDef):
        return range(s.lineno, max(s.lineno, body[0].lineno - 1) + 1)  # a compound statement's header
    return range(s.lineno, (s.end_lineno or s.lineno) + 1)


def _is_docstring(s: ast.stmt) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def kernel_lines(path: str) -> tuple[list[tuple[int, int]], frozenset[int]]:
    """(the line spans of the file's kernels and funcs, decorators included; their code lines), from the
    file's source (cached while its modification time is unchanged)."""
    try:
        mtime = os.path.getmtime(path)
    except OSError:
        mtime = -1.0
    hit = _cache.get(path)
    if hit is not None and hit[0] == mtime:
        return hit[1], hit[2]
    linecache.checkcache(path)
    text = "".join(linecache.getlines(path))
    try:
        with PARSE_LOCK:  # (ast.parse is not thread-safe on 3.11: qd.frontend.context)
            tree = ast.parse(text)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    wrapped = _wrapped_names(tree)
    lines = text.splitlines()
    spans: list[tuple[int, int]] = []
    code: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        kind = _kind(fn, wrapped)
        if not kind:
            continue
        first = min([d.lineno for d in fn.decorator_list] + [fn.lineno])
        spans.append((first, fn.end_lineno or fn.lineno))
        # a func stops at its `def` (its arguments are bound there); a kernel's `def` and the headers of its
        # top-level loops run in the launcher, not in a thread: a breakpoint there moves to the next line
        launcher = {id(s) for s in fn.body if isinstance(s, (ast.For, ast.AsyncFor))} if kind == "kernel" else set()
        if kind != "kernel":
            code.add(fn.lineno)
        for s in ast.walk(fn):
            if isinstance(s, ast.stmt) and s is not fn and not _is_docstring(s) and id(s) not in launcher:
                code.update(n for n in _stmt_lines(s) if _has_code(lines, n))
    _cache[path] = (mtime, spans, frozenset(code))
    return spans, frozenset(code)


def _has_code(lines: list[str], n: int) -> bool:
    text = lines[n - 1].strip() if 0 < n <= len(lines) else ""
    return bool(text) and not text.startswith("#")


def find_function(path: str, name: str) -> tuple[int, str] | None:
    """(the first line of the function `name` defined in `path`, decorators included; its kind: "kernel",
    "func" or "" for host code), the first such definition in the file, or None if the file defines none."""
    linecache.checkcache(path)
    try:
        with PARSE_LOCK:
            tree = ast.parse("".join(linecache.getlines(path)))
    except SyntaxError:
        return None
    wrapped = _wrapped_names(tree)
    defs = [fn for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == name]
    if not defs:
        return None
    fn = min(defs, key=lambda f: f.lineno)
    return min([d.lineno for d in fn.decorator_list] + [fn.lineno]), _kind(fn, wrapped)


def function_start(name: str, namespace: dict, files: list[str]) -> tuple[str, int]:
    """(file, first line) of the `@qd.kernel` or `@qd.func` called `name`: an object of that name in `namespace`
    (a dotted name is evaluated there), else a definition of it in one of `files` (before the program has
    defined it, as pdb). Raises `BreakpointError` for a host function or a name found nowhere."""
    try:
        obj = eval(name, {"__builtins__": {}}, namespace)
    except Exception:  # noqa: BLE001  (not defined yet): look for its `def` in the files, as pdb does
        obj = None
    if obj is not None:
        fn = getattr(obj, "fn", None)
        code = getattr(fn, "__code__", None) or getattr(obj, "__code__", None)
        if code is None:
            raise BreakpointError(f"{name} is a {type(obj).__name__}, not a function: give a @qd.kernel or @qd.func")
        path, first = os.path.abspath(code.co_filename), code.co_firstlineno
        spans, _ = kernel_lines(path)
        if fn is None or not any(lo <= first <= hi for lo, hi in spans):
            raise BreakpointError(f"{name} is host code, not a @qd.kernel or @qd.func: the qd debugger stops only "
                                  f"in kernel code (use pdb for host code)")
        return path, first
    for path in files:
        found = find_function(path, name)
        if found is None:
            continue
        if not found[1]:
            raise BreakpointError(f"{name} ({path}:{found[0]}) is host code, not a @qd.kernel or @qd.func: the qd "
                                  f"debugger stops only in kernel code (use pdb for host code)")
        return path, found[0]
    raise BreakpointError(f"no function {name!r} is defined here or in {', '.join(files) or 'the script'}: give "
                          f"file:line, a line, or the name of a @qd.kernel or @qd.func")


def check(path: str, line: int) -> tuple[int, str]:
    """The line a breakpoint at `path:line` stops at and a note when it moved there ("" if not); raises
    `BreakpointError` as pdb does for a line past the end or a blank or comment line, and for a line of
    host code (naming the nearest kernel line)."""
    linecache.checkcache(path)
    n_lines = len(linecache.getlines(path))
    if not 0 < line <= n_lines:
        raise BreakpointError(f"End of file: {path} has {n_lines} lines, there is no line {line}")
    text = linecache.getline(path, line).strip()
    if not text or text.startswith("#"):
        raise BreakpointError(f"Blank or comment: {path}:{line}")
    spans, code = kernel_lines(path)
    if line in code:
        return line, ""
    span = next((s for s in spans if s[0] <= line <= s[1]), None)
    if span is not None:
        later = [n for n in code if line < n <= span[1]]
        if later:
            return min(later), f"no thread stops at line {line}: moved to the next kernel line"
    if not code:
        raise BreakpointError(f"{path} has no @qd.kernel or @qd.func: the qd debugger stops only in kernel code "
                              f"(use pdb for host code)")
    near = min(code, key=lambda n: (abs(n - line), n))
    raise BreakpointError(f"{path}:{line} is host code, outside every @qd.kernel and @qd.func: the qd debugger "
                          f"stops only in kernel code (use pdb for host code); the nearest kernel line is {near}")


__all__ = ["BreakpointError", "check", "find_file", "find_function", "function_start", "kernel_lines"]
