"""`qd.lang.util`: the few `quadrants.lang.util` helpers that user code and tests reach (re-exports only)."""

from __future__ import annotations

import importlib.util

from qd.frontend import builder as _builder


def has_pytorch() -> bool:
    """Whether torch can be imported here."""
    return importlib.util.find_spec("torch") is not None


def in_quadrants_scope() -> bool:
    """True while a kernel or func body is being compiled."""
    return _builder.current() is not None


def in_python_scope() -> bool:
    return not in_quadrants_scope()


def to_numpy_type(dt: object) -> type:
    """The numpy scalar type of qd dtype `dt` (`qd.f32` -> `np.float32`)."""
    from qd.types import dtypes

    return dtypes.to_dtype(dt).np_dtype.type


__all__ = ["has_pytorch", "in_quadrants_scope", "in_python_scope", "to_numpy_type"]
