"""`qd.BufferView` inside kernels: a view is a `GlobalTensor` (its 1-D ndarray) plus an offset and a size.

A view parameter of a kernel is three launch arguments: the ndarray and two i32 scalars, offset and size
(`qd.frontend.args`), so the instance key never holds them and the IR needs nothing new: `v[i]` is
`arr[offset + i]`, `v.size` an `ArgLoad`. Views made in the kernel (`BufferView(arr, o, s)`,
`v.subview(o, s)`, `v[a:b]`) carry runtime `Expr`s; views reached as compile-time values (templates,
captured globals) carry Python ints. With `debug=True` each subscript, subview and construction emits
a `Check` whose message has Quadrants' wording, and subscripts and subviews add the inlined call
chain (`Callstack:`, kernel first, from `Builder.call_stack`). With `debug=False` nothing is checked.
"""

from __future__ import annotations

from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import builder as _bm
from qd.frontend import expr as _e
from qd.frontend import values as _v
from qd.frontend.expr import Expr

_OOB = ("BufferView Out Of Range: kernel[{{kernel}}] tid={{tid}}, got index {{0}} (offset={{1}}, size={{2}})."
        "\nCallstack:\n{stack}")
_SUBVIEW_OOB = ("BufferView subview Out Of Range: kernel[{{kernel}}] tid={{tid}}, subview offset={{0}}, "
                "subview size={{1}}, parent size={{2}}.\nCallstack:\n{stack}")
_CONSTRUCT_OOB = "BufferView construction out of range: offset={0}, size={1}, ndarray length={2}."


class ViewValue:
    """A BufferView in a kernel being compiled. `offset` and `size` are ints, `Expr`s or `ParamRef`s (a
    `ParamRef` is read afresh at each use: an `ArgLoad`, pure, so it may sit in any task)."""

    def __init__(self, tensor: _v.GlobalTensor, offset: Any, size: Any) -> None:
        self.tensor = tensor
        self._offset = offset
        self._size = size
        # `offset + i` already emitted, per index value: (block list, index value, sum), reused while that
        # block is the one being built (a later statement of the same block: the sum dominates it)
        self._shifted: dict[Any, tuple] = {}

    @property
    def offset(self) -> Any:
        return _v.read(self._offset)

    @property
    def size(self) -> Any:
        return _v.read(self._size)

    @property
    def shape(self) -> tuple:
        return (self.size,)

    @property
    def arr(self) -> _v.GlobalTensor:
        return self.tensor

    @property
    def dtype(self) -> Any:
        return self.tensor.dtype

    @property
    def elem_shape(self) -> tuple:
        return tuple(self.tensor.elem_shape)

    def __repr__(self) -> str:
        return f"<BufferView of {self.tensor!r}>"

    def subview(self, offset: Any, size: Any) -> "ViewValue":
        """The view `[offset, offset + size)` of this one (debug: checked against this view's size)."""
        if _debug():
            parent = self.size
            ok = _all_true(_ge0(offset), _ge0(size), _e.binary("le", _e.binary("add", offset, size), parent))
            _emit_check(ok, _SUBVIEW_OOB.format(stack=_esc(callstack())), [offset, size, parent])
        return ViewValue(self.tensor, _e.binary("add", self.offset, offset), size)

    def slice(self, start: Any, stop: Any) -> "ViewValue":
        """`v[start:stop]` (None: 0 / size), a subview."""
        start = 0 if start is None else start
        stop = self.size if stop is None else stop
        return self.subview(start, _e.binary("sub", stop, start))

    def indices(self, idx: list) -> list:
        """The ndarray indices of subscript `idx` of the view: the first shifted by the offset (debug:
        checked against `[0, size)`), element indices passed through."""
        flat: list = []
        for i in idx:
            flat.extend(i.entries if _e.is_matrix(i) else i if isinstance(i, (tuple, list)) else [i])
        if not flat:
            raise QuadrantsSyntaxError("a BufferView needs an index")
        first = flat[0]
        if isinstance(first, (float, slice)) or (isinstance(first, Expr) and not first.dtype.is_int):
            raise QuadrantsTypeError(f"a BufferView index must be an integer, got {_kind_of(first)}")
        if _debug():
            offset, size = self.offset, self.size
            ok = _all_true(_ge0(first), _e.binary("lt", first, size))
            _emit_check(ok, _OOB.format(stack=_esc(callstack())), [first, offset, size])
        return [self._shift(first), *flat[1:]]

    def _shift(self, i: Any) -> Any:
        """`offset + i`, emitted once per index value and block (the interpreter pays per statement)."""
        block = _e.bld().stack[-1]
        iv = i.value if isinstance(i, Expr) else i
        key = id(iv) if isinstance(i, Expr) else ("const", i)
        hit = self._shifted.get(key)
        if hit is not None and hit[0] is block and hit[1] is iv:
            return hit[2]
        out = _e.binary("add", self.offset, i)
        self._shifted[key] = (block, iv, out)
        return out

    def load(self, idx: list) -> Any:
        return self.tensor.load(self.indices(idx))

    def ptrs(self, idx: list) -> list:
        return self.tensor.ptrs(self.indices(idx))


def _kind_of(x: Any) -> str:
    return str(x.dtype) if isinstance(x, Expr) else type(x).__name__


def _debug() -> bool:
    return bool(_bm.cfg().debug)


def _ge0(x: Any) -> Any:
    return _e.binary("ge", x, 0)


def _all_true(*conds: Any) -> Expr:
    out: Any = None
    for c in conds:
        c = _e.as_expr(bool(c)) if not isinstance(c, Expr) else c
        out = c if out is None else _e.binary("and", out, c)
    return out


def _esc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _emit_check(ok: Expr, message: str, args: list) -> None:
    b = _e.bld()
    check = b.add_check(ir.CheckDecl(kind="bounds", message=message, loc=b.loc))
    b.emit(ir.Check, cond=ok.value, check=check, args=tuple(_e.as_expr(a).value for a in args))


def callstack() -> str:
    """The inlined call chain at the statement being built: one `name (file:line)` line per frame,
    kernel first, each frame indented two more spaces (Quadrants' layout)."""
    b = _e.bld()
    frames = [f for f in (*getattr(b, "call_stack", ()), b.loc) if f is not None]
    return "\n".join("  " * d + f"{f.func} ({f.file}:{f.line})" for d, f in enumerate(frames))


def construct(arr: Any, offset: Any, size: Any) -> ViewValue:
    """`BufferView(arr, offset, size)` inside a kernel (debug: checked against the ndarray's length)."""
    if isinstance(arr, ViewValue) or type(arr).__name__ == "BufferView":
        raise QuadrantsTypeError("Cannot nest BufferView(view, ...); use view.subview(offset, size) instead")
    if not isinstance(arr, _v.GlobalTensor):
        raise QuadrantsTypeError(f"BufferView needs an ndarray, got {type(arr).__name__}")
    if arr.ndim != 1:
        raise QuadrantsTypeError(f"BufferView requires a 1D ndarray, got a {arr.ndim}D one")
    for name, x in (("offset", offset), ("size", size)):
        if not (isinstance(x, Expr) and x.dtype.is_int) and not (_e.is_number(x) and not isinstance(x, float)):
            raise QuadrantsTypeError(f"BufferView {name} must be an integer, got {_kind_of(x)}")
    if _debug():
        length = arr.shape[0]
        ok = _all_true(_ge0(offset), _ge0(size), _e.binary("le", _e.binary("add", offset, size), length))
        _emit_check(ok, _CONSTRUCT_OOB, [offset, size, length])
    return ViewValue(arr, offset, size)


def from_host(view: Any, tensor: _v.GlobalTensor) -> ViewValue:
    """A Python-scope BufferView reached as a compile-time value (a template argument, a captured global):
    its offset and size are constants of this instance (`args._template_key` keys them by value)."""
    return ViewValue(tensor, int(view.offset), int(view.size))


def bind_param(tensor: _v.GlobalTensor, offset_arg: int, size_arg: int) -> ViewValue:
    """The view of a kernel parameter: offset and size are the i32 launch args `offset_arg`, `size_arg`."""
    from qd.types.dtypes import i32

    return ViewValue(tensor, _v.ParamRef(offset_arg, i32), _v.ParamRef(size_arg, i32))


__all__ = ["ViewValue", "construct", "from_host", "bind_param", "callstack"]
