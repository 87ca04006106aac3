"""`qd.types.primitive_types`: Quadrants' module path for the sets of scalar dtypes (re-exports only).

As in Quadrants, the sets include Python's `float` / `int` / `bool` (which mean the default types), and
`type_ids` holds the `id` of each member, for identity-based dtype recognition.
"""

from __future__ import annotations

from qd.types.dtypes import f16, f32, f64, i8, i16, i32, i64, u1, u8, u16, u32, u64

real_types: set = {f16, f32, f64, float}
real_type_ids: set[int] = {id(t) for t in real_types}
integer_types: set = {i8, i16, i32, i64, u1, u8, u16, u32, u64, int, bool}
integer_type_ids: set[int] = {id(t) for t in integer_types}
all_types: set = real_types | integer_types
type_ids: set[int] = {id(t) for t in all_types}

__all__ = ["real_types", "real_type_ids", "integer_types", "integer_type_ids", "all_types", "type_ids"]
