"""Central finite differences for the autodiff tests."""

from collections.abc import Callable

import numpy as np


def central(f: Callable[[np.ndarray], float], x0: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences of scalar `f` at `x0`, one entry at a time."""
    out = np.zeros_like(x0)
    for k in range(x0.size):
        d = np.zeros_like(x0)
        d.flat[k] = eps
        out.flat[k] = (f(x0 + d) - f(x0 - d)) / (2 * eps)
    return out
