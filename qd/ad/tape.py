"""The host side of autodiff: `qd.ad.FwdMode` (forward mode) and `clear_all_gradients`.

Inside `with qd.ad.FwdMode(loss, param, seed):` every kernel launch runs its forward-mode instance
(`qd/ad/forward.py`, compiled by `qd/frontend/kernel.py` when `active_fwd()` is set): `param.dual`
holds the seed, and fields with duals receive the directional derivatives, so `loss.dual` ends as
the Jacobian-vector product J @ seed. Quadrants' argument checks and messages are kept.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from qd.runtime.fields import Field, all_fields
from qd.types.enums import SNodeGradType

_active_fwd: "FwdMode | None" = None
# The `qd.ad.Tape` whose block is running (read by `Kernel._run` on every primal launch) and whether a
# `grad_replaced` / `no_grad` function is running (its inner launches are then not recorded).
_active_tape: Any = None  # a qd.ad.custom.Tape, or None
_grad_replaced: bool = False

_SEED_MESSAGE = (
    "`seed` is not set for non 0-D field, please specify. `seed` is a list to specify which parameters the "
    "computed derivatives respect to. The length of the `seed` should be same to that of the `parameters` "
    "E.g. Given a loss `loss = qd.field(float, shape=3)`, parameter `x = qd.field(float, shape=3)`      "
    "seed = [0, 0, 1] indicates compute derivative respect to the third element of `x`.      "
    "seed = [1, 1, 1] indicates compute the sum of derivatives respect to all three element of `x`, i.e., "
    "Jacobian-vector product(Jvp) for each element in `loss`")


def active_fwd() -> "FwdMode | None":
    """The forward-mode manager whose block is running, if any (kernels then launch their dual)."""
    return _active_fwd


def clear_all_gradients(gradient_type: SNodeGradType = SNodeGradType.ADJOINT) -> None:
    """Sets every placed gradient field of `gradient_type` (`.grad` by default, or `.dual`) to zero."""
    for f in all_fields():
        if f._role is gradient_type and f._placed:
            f.fill(0)


def _is_scalar_field(x: Any) -> bool:
    return isinstance(x, Field) and x.elem_shape == ()


class FwdMode:
    """`with qd.ad.FwdMode(loss, param, seed=None, clear_gradients=True):` forward-mode autodiff.

    `param` is one scalar field; `seed` (a list, one entry per element of `param`; [1.0] by default
    for a one-element field) is written to `param.dual` on entry and cleared on exit. `loss` (a scalar
    field or a list of them) gets `loss.dual`. With `clear_gradients`, every dual is zeroed on entry.
    """

    def __init__(self, loss: Any, param: Any, seed: Sequence[float] | None = None,
                 clear_gradients: bool = True) -> None:
        self.loss = loss
        self.param = param
        self.seed = seed
        self.clear_gradients = clear_gradients
        self.entered = False

    def __enter__(self) -> "FwdMode":
        global _active_fwd
        assert not self.entered, "Forward mode manager can be entered only once."
        self.entered = True
        if not isinstance(self.loss, list):
            self.loss = [self.loss]
        for ls in self.loss:
            assert _is_scalar_field(ls)
        assert _is_scalar_field(self.param)
        n = math.prod(self.param.shape) if self.param.shape else 1
        if not self.seed:
            if n != 1:
                raise RuntimeError(_SEED_MESSAGE)
            self.seed = [1.0]
        else:
            assert n == len(self.seed)
        if self.clear_gradients:
            clear_all_gradients(SNodeGradType.DUAL)
        self._write_seed(list(self.seed))
        _active_fwd = self
        return self

    def __exit__(self, *exc: Any) -> None:
        global _active_fwd
        _active_fwd = None
        self._write_seed([0.0] * len(self.seed))

    def _write_seed(self, seed: list[float]) -> None:
        dual = self.param.dual
        if len(seed) == 1:
            dual[None if not self.param.shape else (0,) * len(self.param.shape)] = 1.0 * seed[0]
        else:
            dual.from_numpy(np.asarray(seed, dtype=dual.dtype.np_dtype).reshape(self.param.shape))


__all__ = ["FwdMode", "clear_all_gradients", "active_fwd"]
