"""`qd.types.primitive_types`: Quadrants' module path for the sets of scalar dtypes (re-exports only).

As in Quadrants, the sets include Python's `float` / `int` / `bool` (which mean the default types), and
`type_ids` holds the `id` of each member, for identity-based dtype recognition.
"""

from __future__ import annotations

from qd.types.dtypes import f16, f32, f64, i8, i16, i32, i64, u1, u8, u16, u32, u64

# Ordered set-likes (`dict` keys: `in`, `|`, `&`, `-`, `len`, iteration): Python's `float`/`int`/`bool` hash
# by address, so a real `set` would iterate in another order in every process (tests parametrized over these
# sets would collect differently in each pytest-xdist worker).
real_types = dict.fromkeys((f16, f32, f64, float)).keys()
real_type_ids: set[int] = {id(t) for t in real_types}
integer_types = dict.fromkeys((i8, i16, i32, i64, u1, u8, u16, u32, u64, int, bool)).keys()
integer_type_ids: set[int] = {id(t) for t in integer_types}
all_types = dict.fromkeys((*real_types, *integer_types)).keys()
type_ids: set[int] = {id(t) for t in all_types}

__all__ = ["real_types", "real_type_ids", "integer_types", "integer_type_ids", "all_types", "type_ids"]
