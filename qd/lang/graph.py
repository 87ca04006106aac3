"""`qd.graph`: Quadrants' namespace of graph-structuring kernel constructs; qd has `do_while`.

`while qd.graph.do_while(counter):` is recognised by its spelling when a `@qd.kernel(graph=True)` compiles
(`qd/frontend/graph.py`) and never called there; called from Python it only tests its argument, as in Quadrants.
"""

from __future__ import annotations

from typing import Any


def do_while(condition: Any) -> bool:
    """In a `graph=True` kernel, `while qd.graph.do_while(counter):` repeats its body (at least once) while the 0-d
    integer ndarray `counter` is nonzero; see `qd/frontend/graph.py`. Outside a kernel: `bool(condition)`."""
    return bool(condition)


__all__ = ["do_while"]


def __getattr__(name: str) -> Any:
    """A Quadrants `qd.graph` name qd lacks (`parallel`, ...) raises an error naming its feature."""
    from qd._unsupported import missing

    raise missing("qd.graph", name)
