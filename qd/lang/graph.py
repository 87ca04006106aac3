"""`qd.graph`: Quadrants' namespace of graph-structuring kernel constructs: `do_while`, `parallel_context`, `parallel`.

`while qd.graph.do_while(counter):` is recognised by its spelling when a `@qd.kernel(graph=True)` compiles
(`qd/frontend/graph.py`) and never called there; called from Python it only tests its argument, as in Quadrants.
"""

from __future__ import annotations

from typing import Any


def do_while(condition: Any) -> bool:
    """In a `graph=True` kernel, `while qd.graph.do_while(counter):` repeats its body (at least once) while the 0-d
    integer ndarray `counter` is nonzero; see `qd/frontend/graph.py`. Outside a kernel: `bool(condition)`."""
    return bool(condition)


class _NoOp:
    """A context manager that does nothing (`parallel_context()` and `parallel()` outside a kernel)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def parallel_context() -> _NoOp:
    """In a `graph=True` kernel, `with qd.graph.parallel_context():` opens a region of independent
    `with qd.graph.parallel():` sections (`qd/frontend/graph.py`; qd runs them in order). Outside a kernel: a
    context manager that does nothing, so helpers shared by Python and kernels run in both."""
    return _NoOp()


def parallel() -> _NoOp:
    """A section of a `qd.graph.parallel_context()` region (see there). Outside a kernel: does nothing."""
    return _NoOp()


__all__ = ["do_while", "parallel", "parallel_context"]


def __getattr__(name: str) -> Any:
    """A Quadrants `qd.graph` name qd lacks (`parallel`, ...) raises an error naming its feature."""
    from qd._unsupported import missing

    raise missing("qd.graph", name)
