"""`quadrants._tensor`: Quadrants' module path for the unified tensor API, kept so code importing from it runs
(re-exports of `qd/lang/tensor.py` only)."""

from qd.lang.tensor import Backend, Tensor, _with_layout, tensor  # noqa: F401

__all__ = ["Backend", "Tensor", "tensor"]
