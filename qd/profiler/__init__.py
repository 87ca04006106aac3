"""`qd.profiler`: Quadrants' profiler functions (`qd/profiler/kernel_profiler.py`: per-launch kernel times,
on with `qd.init(kernel_profiler=True)`)."""

from qd.profiler.kernel_profiler import *
from qd.profiler.kernel_profiler import __all__ as _kernel_all

__all__ = list(_kernel_all)
