"""Quadrants' enums reached by user code and its tests (`qd.types.enums`)."""

from enum import Enum


class AutodiffMode(Enum):
    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3
    CHECK_AUTODIFF_VALID = 4


class SNodeGradType(Enum):
    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


class Layout(Enum):
    AOS = 0
    SOA = 1
