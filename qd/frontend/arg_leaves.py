"""What a kernel launch keeps of its ndarray arguments between calls, and how it marks an argument taken unchecked.

Genesis passes ~450 qd ndarrays in dataclass arguments to every launch; converting each (`args.ndarray_spec`, its
size class and layout, the check against its annotation) was most of a step on the CPU. A qd ndarray's dtype, shape
and layout are its own for good, so the conversion is kept on the array per parameter annotation (`keep` /
`kept`), valid while the arg-checks switch (`qd.lang._template_mapper`) and the layout are as they were and the
array still has storage. An argument taken unchecked against its annotation puts `UNCHECKED` in the instance key:
such an instance launches through the Python path, which checks.
"""

from __future__ import annotations

import builtins
from typing import Any

from qd.types.dtypes import DataType, MatrixType


class _Unchecked:
    def __repr__(self) -> str:
        return "UNCHECKED"


# in a key: an ndarray argument taken unchecked that does not match its annotation (`unchecked(key)`)
UNCHECKED = _Unchecked()


def arg_checks() -> bool:
    """Whether launches check Quadrants ndarray arguments against their annotations: the builtins' `__debug__`,
    which Genesis switches off through `qd.lang._template_mapper.__builtins__` (see that module)."""
    return bool(builtins.__dict__.get("__debug__", True))


def unchecked(key: tuple) -> bool:
    """Whether an instantiation key holds an ndarray argument taken unchecked against its annotation."""
    return any(e is UNCHECKED for e in key)


def matches_annotation(ann: Any, dt: DataType, ndim: int, es: tuple) -> bool:
    """Whether an ndarray of scalar dtype `dt`, `ndim` outer axes and element shape `es` is what `ann` (an
    NdarrayType) declares (`ndarray_spec`'s checks, which builtins' `__debug__` switches off for qd ndarrays)."""
    want_es = ann.dtype.shape if isinstance(ann.dtype, MatrixType) else None
    want_dt = ann.dtype.dtype if isinstance(ann.dtype, MatrixType) else ann.dtype
    return ((want_es is None or tuple(es) == tuple(want_es)) and (want_dt is None or dt is want_dt)
            and (ann.ndim is None or ndim == ann.ndim))


def keep(ann: Any, v: Any, checks: bool, layout: Any, out: tuple) -> None:
    """Keeps `out`, the conversion of qd ndarray `v` for a parameter annotated `ann`, on `v`."""
    v.__dict__.setdefault("_qd_leaves", {})[id(ann)] = (ann, checks, layout, out)


def kept(ann: Any, v: Any, checks: bool) -> tuple | None:
    """What `keep` kept of `v` for `ann`, where still valid, else None."""
    cache = getattr(v, "__dict__", {}).get("_qd_leaves")
    if cache is None or getattr(v, "_arr", None) is None:  # (one whose storage went: `ndarray_spec` raises)
        return None
    hit = cache.get(id(ann))
    if hit is None or hit[0] is not ann or hit[1] != checks or getattr(v, "_layout", None) is not hit[2]:
        return None
    return hit[3]


__all__ = ["UNCHECKED", "keep", "kept", "matches_annotation", "unchecked"]
