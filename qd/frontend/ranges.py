"""Loop iterables and compile-time helpers: `qd.ndrange`, `qd.grouped`, `qd.static`, `qd.static_assert`,
`qd.static_print`, `qd.loop_config`.

`ndrange` and `grouped` are markers the transformer recognises in `for` statements; both are also
plain Python iterables (for `qd.static(qd.ndrange(...))` and Python scope).
"""

from __future__ import annotations

import itertools
from typing import Any, Iterator

from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError
from qd.frontend import expr as _e


class ndrange:  # noqa: N801  (Quadrants' name)
    """`qd.ndrange(n, (a, b), ...)`: the product of ranges; each argument is an extent or a (begin, end) pair."""

    def __init__(self, *args: Any, axes: Any = None) -> None:
        self.bounds: list[tuple[Any, Any]] = []
        for a in args:
            if isinstance(a, (list, tuple)):
                if len(a) != 2:
                    raise QuadrantsSyntaxError(f"Every argument of ndrange should be a scalar or a tuple/list "
                                               f"like (begin, end), got {a!r}")
                self.bounds.append((a[0], a[1]))
            elif _e.is_matrix(a):
                raise QuadrantsTypeError("ndrange arguments must be scalars or (begin, end) pairs, not matrices")
            else:
                self.bounds.append((0, a))
        for b, e in self.bounds:
            for v in (b, e):
                if isinstance(v, float) or (isinstance(v, _e.Expr) and not v.dtype.is_int):
                    raise QuadrantsTypeError("Every argument of ndrange should be an integer scalar or a tuple/list of "
                                             "(int, int)")
        self.dimensions = [_e.binary("sub", e, b) for b, e in self.bounds]
        n = len(self.bounds)
        if axes is not None:
            axes = tuple(axes)
            if not all(type(a) is int for a in axes):
                raise QuadrantsTypeError(f"qd.ndrange(axes={axes!r}): its entries must be Python ints (axis indices)")
            if len(axes) != n:
                raise QuadrantsSyntaxError(f"qd.ndrange(axes={axes!r}) has {len(axes)} entries but ndrange has {n} "
                                           f"dimensions")
            if sorted(axes) != list(range(n)):
                raise QuadrantsSyntaxError(f"qd.ndrange(axes={axes!r}) is not a permutation of range({n}) (the axis "
                                           f"iterated at each nesting level, outermost first)")
        # iteration order: `axes[p]` is the axis at nesting level p, outermost first; loop variables and
        # yielded tuples stay in the arguments' (canonical) order
        self.axes: tuple[int, ...] | None = None if axes is None or axes == tuple(range(n)) else axes

    def __iter__(self) -> Iterator[tuple]:
        for b, e in self.bounds:
            if isinstance(b, _e.Expr) or isinstance(e, _e.Expr):
                raise QuadrantsSyntaxError("a static ndrange needs compile-time bounds")
        if self.axes is None:
            yield from itertools.product(*(range(int(b), int(e)) for b, e in self.bounds))
            return
        for nested in itertools.product(*(range(int(self.bounds[a][0]), int(self.bounds[a][1])) for a in self.axes)):
            out = [0] * len(nested)
            for level, a in enumerate(self.axes):
                out[a] = nested[level]
            yield tuple(out)

    def grouped(self) -> "grouped":
        return grouped(self)


class grouped:  # noqa: N801
    """`qd.grouped(x)`: iterate `x` (a field, an ndarray or an ndrange) with one vector index."""

    def __init__(self, target: Any) -> None:
        self.target = target

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self.target, ndrange):
            from qd.frontend.values import make_matrix

            for idx in self.target:
                yield make_matrix(list(idx), (len(idx),))
            return
        raise QuadrantsSyntaxError("qd.grouped(...) outside qd.static is only valid as a kernel for-loop iterable")


def static(x: Any, *xs: Any) -> Any:
    """`qd.static(x)` (or `qd.static(x, y, ...)`): use `x` as a compile-time value inside a kernel or func.

    Returns `x` unchanged (a tuple for several arguments) and tells the compiler to evaluate the construct
    around it in Python while the kernel compiles:

    - `if qd.static(cond):` keeps only the taken branch (the other is not compiled at all);
    - `for i in qd.static(range(3)):` unrolls the loop, with `i` a Python int in each copy; it also
      iterates Python lists, tuples and `qd.grouped(qd.ndrange(...))`;
    - `qd.static(obj)` for a field, ndarray, Python number or other object passes it through as-is.

    The argument must be known at compile time: Python values, template arguments, fields and global values
    reached by name. A runtime value (a kernel's scalar argument, a value computed in the kernel) raises
    `qd.QuadrantsSyntaxError`, as does a primitive member of a
    `@qd.data_oriented(template_primitives=False)` object (a runtime argument there). Outside a kernel it simply
    returns its argument(s).

    Example: `for d in qd.static(range(3)): x[i][d] += v[d]`.
    """
    vals = (x,) + xs
    for v in vals:
        b = _e.bld() if isinstance(v, _e.Expr) else None
        if b is not None and v.value in b.lifted_loads:
            raise QuadrantsSyntaxError("qd.static() got a primitive member of a "
                                       "@qd.data_oriented(template_primitives=False) object: it is a runtime kernel "
                                       "argument, not a compile-time constant (use the default "
                                       "template_primitives=True to bake it, or drop qd.static)")
        if isinstance(v, _e.Expr):
            raise QuadrantsSyntaxError("Input to qd.static must be compile-time constants or global pointers, "
                                       "but got a runtime value")
    return vals[0] if not xs else vals


def static_assert(cond: Any, msg: str | None = None) -> None:
    """`qd.static_assert(cond, msg=None)`: check `cond` while the kernel compiles, not when it runs.

    `cond` must be a compile-time value (Python values, template arguments, shapes of fields,
    `qd.static` expressions); if it is false, compilation fails with `qd.QuadrantsCompilationError`
    ("Static assertion failed: <msg>"). A runtime condition raises `qd.QuadrantsSyntaxError` (use `assert`
    for a check at run time). In Python scope it checks `cond` at once, with the same error.

    Example: `qd.static_assert(x.shape[0] % 4 == 0, "x must have a multiple of 4 rows")` (`x` a template arg).
    """
    if isinstance(cond, _e.Expr):
        raise QuadrantsSyntaxError("qd.static_assert() needs a compile-time condition")
    if not cond:
        from qd.errors import QuadrantsCompilationError

        raise QuadrantsCompilationError(f"Static assertion failed: {msg}" if msg else "Static assertion failed")


def static_print(*args: Any, **kwargs: Any) -> None:
    """`qd.static_print(*args, **kwargs)`: Python's `print`, run while the kernel compiles.

    It prints once per compiled kernel instance (each new set of template arguments compiles, and prints,
    again; a launch that reuses a compiled kernel prints nothing), and takes `print`'s keyword arguments
    (`sep`, `end`, `file`, `flush`). Python values print as themselves; a runtime value prints as its symbolic
    compile-time expression (`<qd Expr i32>`), not as a number: use `print` in the kernel for run-time values.

    Example: `qd.static_print("block size", qd.static(bs))`.
    """
    print(*args, **kwargs)


def loop_config(*args: Any, serialize: bool = False, block_dim: Any = None, **kwargs: Any) -> None:
    """`qd.loop_config(serialize=True)` makes the next top-level loop run serially (in order, one thread);
    `block_dim=n` sets the threads per GPU block (workgroup) of the next parallel loop: what `qd.simt`'s block
    operations and shared arrays work over (the CPU tiers have no blocks and ignore it). Every other option
    (parallelize, name, ...) is accepted and ignored."""
    from qd.frontend import builder as _b

    b = _b.current()
    if b is not None and serialize:
        b.next_loop_serial = True
    if b is not None and block_dim is not None:
        if type(block_dim) is not int or not 1 <= block_dim <= 1024:
            raise QuadrantsSyntaxError(f"qd.loop_config(block_dim={block_dim!r}): a Python int in [1, 1024] (the "
                                       f"threads of one GPU block)")
        b.next_block_dim = block_dim


def block_local(*fields: Any) -> None:
    """Quadrants' hint to cache `fields` in GPU block-local storage for the next loop: a performance hint
    only, with no effect on results; the CPU tiers have nothing to cache it in, so it is accepted and
    ignored (the GPU tiers may use it later)."""
    from qd.frontend.values import GlobalTensor
    from qd.types.hooks import impl

    for f in fields:
        if not isinstance(f, (impl.Field, GlobalTensor)):
            raise TypeError(f"qd.block_local takes fields, got {type(f).__name__}")
