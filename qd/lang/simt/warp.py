"""`qd.simt.warp`: CUDA's masked warp operations (`__shfl_sync`, `__all_sync`, ...): cuda only. `mask` names the
lanes taking part (all of them must reach the call); the portable operations are in `qd.simt.subgroup`."""

from __future__ import annotations

from typing import Any

from qd.frontend import simt as _s
from qd.types import dtypes


def _warp(op: str, name: str, args: tuple, dtype: dtypes.DataType = dtypes.i32) -> Any:
    what = f"qd.simt.warp.{name}"
    _s.cuda_only(what)
    return _s.emit(op, args, dtype, what)


def _mask(mask: Any) -> Any:
    return _s.as_u32(mask)


def all_nonzero(mask: Any, predicate: Any) -> Any:
    return _warp("warp_all", "all_nonzero", (_mask(mask), _s.as_i32(predicate)))


def any_nonzero(mask: Any, predicate: Any) -> Any:
    return _warp("warp_any", "any_nonzero", (_mask(mask), _s.as_i32(predicate)))


def unique(mask: Any, predicate: Any) -> Any:
    """1 where `predicate` is the same on every lane of `mask`."""
    return _warp("warp_uni", "unique", (_mask(mask), _s.as_i32(predicate)))


def ballot(predicate: Any) -> Any:
    """The u32 mask of the warp's lanes whose `predicate` is nonzero."""
    return _warp("warp_ballot", "ballot", (_mask(0xFFFFFFFF), _s.as_i32(predicate)), dtypes.u32)


def _shfl(op: str, name: str, dt: dtypes.DataType) -> Any:
    def fn(mask: Any, val: Any, offset: Any) -> Any:
        v = _s._e.cast_expr(_s._e.as_expr(val), dt)
        return _warp(op, name, (_mask(mask), v, _s.as_i32(offset)), dt)
    fn.__name__ = name
    fn.__doc__ = f"CUDA `{op}` of a {dt.name} over the lanes of `mask`."
    return fn


shfl_sync_i32 = _shfl("warp_shfl", "shfl_sync_i32", dtypes.i32)
shfl_sync_f32 = _shfl("warp_shfl", "shfl_sync_f32", dtypes.f32)
shfl_up_i32 = _shfl("warp_shfl_up", "shfl_up_i32", dtypes.i32)
shfl_up_f32 = _shfl("warp_shfl_up", "shfl_up_f32", dtypes.f32)
shfl_down_i32 = _shfl("warp_shfl_down", "shfl_down_i32", dtypes.i32)
shfl_down_f32 = _shfl("warp_shfl_down", "shfl_down_f32", dtypes.f32)
shfl_xor_i32 = _shfl("warp_shfl_xor", "shfl_xor_i32", dtypes.i32)


def match_any(mask: Any, value: Any) -> Any:
    """The u32 mask of the lanes of `mask` holding the same i32 `value` as this one."""
    return _warp("warp_match_any", "match_any", (_mask(mask), _s.as_i32(value)), dtypes.u32)


def match_all(mask: Any, value: Any) -> Any:
    """`mask` where every lane of `mask` holds the same i32 `value`, else 0."""
    return _warp("warp_match_all", "match_all", (_mask(mask), _s.as_i32(value)), dtypes.u32)


def active_mask() -> Any:
    return _warp("warp_active_mask", "active_mask", (), dtypes.u32)


def sync(mask: Any) -> None:
    """Waits for the lanes of `mask` (CUDA `__syncwarp`)."""
    _warp("warp_sync", "sync", (_mask(mask),))


__all__ = [
    "active_mask",
    "all_nonzero",
    "any_nonzero",
    "ballot",
    "match_all",
    "match_any",
    "shfl_down_f32",
    "shfl_down_i32",
    "shfl_sync_f32",
    "shfl_sync_i32",
    "shfl_up_f32",
    "shfl_up_i32",
    "shfl_xor_i32",
    "sync",
    "unique",
]
