"""Public names of the frontend (`qd.func`, `qd.static`, `qd.ndrange`, atomics, math builtins...).

Re-exported by `qd/__init__.py`. `qd.raw_div` / `qd.raw_mod` are C-style (truncating) division and
remainder; `qd.loop_config(serialize=True)` makes the next top-level loop serial, other options are
ignored.
"""

from qd.frontend.builtins import (acos, asin, assume_in_range, atan2, atomic_add, atomic_and, atomic_cas,
                                  atomic_exchange, atomic_max, atomic_min, atomic_mul, atomic_or, atomic_sub,
                                  atomic_xor, bit_cast, bit_shr, cache_read_only, cast, clz, cos, exp, is_expr, log,
                                  one, popcnt, random, randn, raw_div, raw_mod, rsqrt, select, sin, sqrt, stop_grad,
                                  tan, tanh, volatile_load, zero)
from qd.frontend.builtins import abs_ as abs  # noqa: A001
from qd.frontend.builtins import ceil_ as ceil
from qd.frontend.builtins import floor_ as floor
from qd.frontend.builtins import max_ as max  # noqa: A001
from qd.frontend.builtins import min_ as min  # noqa: A001
from qd.frontend.builtins import pow_ as pow  # noqa: A001
from qd.frontend.builtins import round_ as round  # noqa: A001
from qd.frontend.kernel import Func, data_oriented, func, is_data_oriented, pyfunc, real_func
from qd.frontend.ranges import block_local, grouped, loop_config, ndrange, static, static_assert, static_print
from qd.types.annotations import template

__all__ = [
    "data_oriented", "func", "real_func", "pyfunc", "Func", "template", "static", "static_assert",
    "static_print", "ndrange", "grouped", "loop_config", "block_local", "atomic_add", "atomic_sub", "atomic_mul",
    "atomic_min", "atomic_max", "atomic_and", "atomic_or", "atomic_xor", "atomic_exchange", "atomic_cas",
    "volatile_load", "random", "randn", "assume_in_range", "cache_read_only", "select", "cast", "bit_cast",
    "stop_grad", "sqrt", "rsqrt", "sin", "cos", "tan",
    "asin", "acos", "atan2", "exp", "log", "tanh", "floor", "ceil", "round", "abs", "min", "max", "pow", "zero", "one",
    "popcnt", "clz", "bit_shr", "raw_div", "raw_mod", "is_expr",
]
