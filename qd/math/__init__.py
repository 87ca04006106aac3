"""`qd.math`: GLSL-style vectors, matrices and functions (Quadrants' `quadrants.math`)."""

from qd.math import _complex, mathimpl
from qd.math._complex import *
from qd.math.mathimpl import *

__all__ = mathimpl.__all__ + _complex.__all__

del _complex, mathimpl


def __getattr__(name: str) -> object:
    """A Quadrants `qd.math` name qd lacks raises an error naming its feature (qd/_unsupported.py)."""
    from qd._unsupported import missing

    raise missing("qd.math", name)
