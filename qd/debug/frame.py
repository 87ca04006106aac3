"""What a stopped thread shows: its location, call stack, locals, globals and expressions over them."""

from __future__ import annotations

import linecache
import os
import sys
from typing import Any

import numpy as np

from qd import ir
from qd.debug.walker import Thread
from qd.runtime.status import decode


class Frame:
    """A walked thread stopped at statement `stmt`; `level` selects a frame of its call stack
    (0 = the innermost: the kernel or the `@qd.func` the statement belongs to)."""

    def __init__(self, thread: Thread, stmt: ir.Stmt, level: int = 0) -> None:
        self.thread, self.stmt, self.level = thread, stmt, level

    # -------------------------------------------------------------- location
    @property
    def loc(self) -> ir.SrcLoc:
        return self.stmt.loc

    @property
    def tid(self) -> int:
        return self.thread.tid

    @property
    def kernel(self) -> str:
        return self.thread.env.kernel.name

    def stack(self) -> list[ir.SrcLoc]:
        """Outermost (the kernel) first, the current statement last."""
        loc = self.loc
        return list(loc.stack) + [loc]

    def here(self) -> ir.SrcLoc:
        """The location of the selected frame."""
        st = self.stack()
        return st[len(st) - 1 - self.level]

    def where(self) -> str:
        loc = self.here()
        return f"{loc.file}:{loc.line} in {loc.func or self.kernel} (thread {self.tid}, task {self.thread.task_id})"

    def backtrace(self) -> list[str]:
        st = self.stack()
        out = []
        for depth, loc in enumerate(st):
            mark = ">" if depth == len(st) - 1 - self.level else " "
            out.append(f"{mark} {loc.file}:{loc.line} in {loc.func or self.kernel}")
            src = linecache.getline(loc.file, loc.line).strip()
            if src:
                out.append(f"    {src}")
        return out

    def source(self, context: int = 5) -> list[str]:
        """The source lines around the selected frame's line, the current one marked `->`."""
        loc = self.here()
        lo = max(1, loc.line - context)
        out = []
        for n in range(lo, loc.line + context + 1):
            text = linecache.getline(loc.file, n)
            if not text:
                break
            mark = "->" if n == loc.line else "  "
            out.append(f"{n:4d} {mark} {text.rstrip()}")
        return out

    # -------------------------------------------------------------- values
    def locals(self) -> dict[str, Any]:
        """Named locals of the selected frame (vectors and matrices as numpy arrays), loop indices,
        and the kernel's scalar arguments in the kernel frame."""
        stack = _strip(tuple(self.stack()[:len(self.stack()) - 1 - self.level]))
        out: dict[str, Any] = {}
        if not stack:
            out.update(self._scalar_args())
        out.update(self._loop_indices(stack))
        out.update(self._named_values(stack))
        comps: dict[str, dict[tuple, Any]] = {}
        for a, bits in self.thread.allocas.items():
            loc = a.loc
            if loc is None or not loc.var or _strip(loc.stack) != stack:
                continue
            value = a.dtype.np_dtype.type(decode(a.dtype, bits))
            var = loc.var
            if a in self.thread.env.derivative_of:
                head, sep, tail = var.partition("[")
                var = f"{head}.{self.thread.env.derivative_label}{sep}{tail}"
            if "[" in var:
                base, idx = var[:-1].split("[", 1)
                comps.setdefault(base, {})[tuple(int(x) for x in idx.split(","))] = value
                out.pop(base, None)
                out[base] = None
            else:
                out[var] = value
        for base, parts in comps.items():
            out.pop(base)
            arr = _assemble(parts)
            if arr.size == len(parts):
                out[base] = arr
            else:  # components the compiler removed (never read) are not shown
                out.update({f"{base}[{', '.join(map(str, k))}]": v for k, v in parts.items()})
        return out

    def _named_values(self, stack: tuple) -> dict[str, Any]:
        """Named values that are no locals (the indices of an ndrange or struct-for), latest last."""
        out = {}
        for v, bits in self.thread.vals.items():
            loc = getattr(v, "loc", None)
            if loc is not None and loc.var and not isinstance(v, ir.Alloca) and _strip(loc.stack) == stack \
                    and isinstance(bits, int):
                out[loc.var] = v.dtype.np_dtype.type(decode(v.dtype, bits))
        return out

    def _scalar_args(self) -> dict[str, Any]:
        k = self.thread.env.kernel
        return {a.name: self.thread.env.args[i] for i, a in enumerate(k.args) if a.kind == "scalar"}

    def _loop_indices(self, stack: tuple) -> dict[str, Any]:
        out = {}
        task = self.thread.task
        if task.var is not None and task.var.name and not stack:
            out[task.var.name] = self.tid
        for var, loop in self.thread.loops:
            if var.name and loop.loc is not None and _strip(loop.loc.stack) == stack:
                out[var.name] = decode(var.dtype, self.thread.vals[var])
        return out

    def adstack_depths(self) -> dict[str, int]:
        """Current depth of each adstack of a reverse-mode kernel, by stack (its lowered counter)."""
        env = self.thread.env
        return {label: decode(a.dtype, self.thread.allocas[a]) for a, label in env.stack_counters.items()
                if a in self.thread.allocas}

    def globals(self) -> dict[str, np.ndarray]:
        """Every named buffer of the kernel (fields and ndarray arguments), live; `x.grad` / `x.dual`
        are attributes of `x`."""
        env = self.thread.env
        named = {decl.name: env.arrays[b] for b, decl in enumerate(env.kernel.buffers)
                 if decl.kind in ("field", "ndarray") and decl.name and env.arrays[b] is not None}
        out: dict[str, np.ndarray] = {}
        for name, arr in named.items():
            if "." not in name:
                out[name] = view = arr.view(_Buffer)
                for attr in ("grad", "dual"):
                    if f"{name}.{attr}" in named:
                        setattr(view, attr, named[f"{name}.{attr}"])
        return out

    def namespace(self) -> dict[str, Any]:
        """The module globals of the frame's source file, then `np`, the kernel's buffers, locals, `tid`."""
        ns: dict[str, Any] = dict(_module_globals(self.here().file))
        ns["np"] = np
        ns.update(self.globals())
        ns.update(self.locals())
        ns["tid"] = self.tid
        ns["adstack"] = self.adstack_depths()
        return ns

    def eval(self, expr: str) -> Any:
        """`expr` evaluated over the frame's namespace (locals, loop indices, `tid`, globals `x[i]`)."""
        return eval(expr, {"__builtins__": __builtins__}, self.namespace())


def _module_globals(file: str) -> dict[str, Any]:
    path = os.path.abspath(file)
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if f and os.path.abspath(f) == path:
            return vars(mod)
    main = sys.modules.get("__main__")
    return vars(main) if main is not None and os.path.basename(file) == os.path.basename(
        getattr(main, "__file__", "") or "") else {}


class _Buffer(np.ndarray):
    """A kernel buffer seen from the debugger: a numpy view that can carry `.grad` / `.dual`."""


def _strip(stack: tuple) -> tuple:
    return tuple((s.file, s.line, s.col, s.func) for s in stack)


def _assemble(parts: dict[tuple, Any]) -> np.ndarray:
    shape = tuple(max(k[d] for k in parts) + 1 for d in range(len(next(iter(parts)))))
    arr = np.zeros(shape, dtype=np.asarray(next(iter(parts.values()))).dtype)
    for k, v in parts.items():
        arr[k] = v
    return arr


def short(path: str) -> str:
    return os.path.basename(path)
