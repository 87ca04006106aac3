"""`qd.math`: GLSL-style vectors, matrices and functions (Quadrants' `quadrants.math`)."""

from qd.math import _complex, mathimpl
from qd.math._complex import *
from qd.math.mathimpl import *

__all__ = mathimpl.__all__ + _complex.__all__

del _complex, mathimpl
