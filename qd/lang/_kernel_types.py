"""`qd.lang._kernel_types`: Quadrants' enum of launch-argument kinds (`quadrants.lang._kernel_types`), which
its tests import. qd keeps no per-kind launch statistics; the enum exists for code that names it."""

from enum import IntEnum


class KernelBatchedArgType(IntEnum):
    FLOAT = 0
    INT = 1
    UINT = 2
    QD_ARRAY = 3
    QD_ARRAY_WITH_GRAD = 4


__all__ = ["KernelBatchedArgType"]
