"""`qd.profiler`: Quadrants' profiler functions: `kernel_profiler.py` (per-launch kernel times, on with
`qd.init(kernel_profiler=True)`) and `scoped_profiler.py` (host time of kernel compiles by phase, always on)."""

from qd.profiler.kernel_profiler import *
from qd.profiler.kernel_profiler import __all__ as _kernel_all
from qd.profiler.scoped_profiler import *
from qd.profiler.scoped_profiler import __all__ as _scoped_all

__all__ = list(_kernel_all) + list(_scoped_all)
