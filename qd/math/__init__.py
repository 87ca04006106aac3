"""`qd.math`: GLSL-style vectors, matrices and functions (Quadrants' `quadrants.math`)."""

from qd.math._complex import *  # noqa: F403
from qd.math.mathimpl import *  # noqa: F403
from qd.math import _complex, mathimpl

__all__ = [*mathimpl.__all__, *_complex.__all__]

del _complex, mathimpl
