"""`qd.lang._ndrange`: Quadrants' module path of the ndrange class (`_Ndrange`), which its tests import."""

from qd.frontend.ranges import ndrange as _Ndrange

__all__ = ["_Ndrange"]
