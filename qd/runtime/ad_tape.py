"""The host side of autodiff: `qd.ad.FwdMode` (forward mode) and `clear_all_gradients`.

Inside `with qd.ad.FwdMode(loss, param, seed):` every kernel launch runs its forward-mode instance
(`qd/ad/forward.py`, compiled by `qd/frontend/kernel.py` when `active_fwd()` is set): `param.dual`
holds the seed, and fields with duals receive the directional derivatives, so `loss.dual` ends as
the Jacobian-vector product J @ seed. Quadrants' argument checks and messages are kept.

The active `qd.ad.Tape` / `FwdMode` is per thread (`state()`): a Tape records the launches of its own
thread only, and a FwdMode changes only its own thread's launches. Entering one clears the gradients
(duals) of every field except those another live thread's Tapes or FwdModes have claimed (the fields
their launches bound: `claim`); those are cleared when a launch of this one binds them (`adopt`). So
threads that differentiate their own fields do not zero each other's results, a field handed from one
thread to another is cleared as ever, and in a program with one thread every field is cleared on entry,
as in Quadrants.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from qd.runtime import _hostdata
from qd.runtime.fields import Field, all_fields
from qd.types.enums import SNodeGradType


class _Token:
    """A thread's identity for its claims on gradient fields (a weak reference dies with the thread)."""


class _ThreadState(threading.local):
    """The autodiff context of the calling thread (read by `Kernel._run` on every launch)."""

    def __init__(self) -> None:
        self.tape: Any = None  # the qd.ad.custom.Tape whose block is running in this thread, or None
        self.fwd: "FwdMode | None" = None  # the FwdMode whose block is running in this thread, or None
        self.grad_replaced = False  # a `grad_replaced` / `no_grad` function is running: its launches are not recorded
        # while a Tape replays a launch's gradient: ids of the objects it put back as they were before that launch
        self.before: frozenset = frozenset()
        self.token = _Token()
        self.claim = weakref.ref(self.token)


_STATE = _ThreadState()
_ACTIVE: list = []  # the Tapes and FwdModes whose blocks are running, in every thread
_any_active: Any = None  # None while `_ACTIVE` is empty (the launch plans' guard: they stand aside otherwise)
_lock = threading.Lock()


def state() -> _ThreadState:
    """The calling thread's autodiff context."""
    return _STATE


def active_tape() -> Any:
    """The `qd.ad.Tape` whose block is running in this thread, if any."""
    return _STATE.tape


def _before_host_write(obj: Any) -> None:
    """Every running Tape (of any thread) saves what an earlier launch of it needs of `obj` before a host write."""
    for m in _ACTIVE.copy():  # another thread may enter or leave one meanwhile
        hook = getattr(m, "host_write", None)
        if hook is not None:
            hook(obj)


def activate(manager: Any) -> None:
    """A Tape or FwdMode entered its block (in this thread)."""
    global _any_active
    with _lock:
        _ACTIVE.append(manager)
        _any_active = True
        if hasattr(manager, "host_write"):
            _hostdata.BEFORE_HOST_WRITE = _before_host_write


def deactivate(manager: Any) -> None:
    global _any_active
    with _lock:
        if any(m is manager for m in _ACTIVE):
            _ACTIVE.remove(manager)
        _any_active = True if _ACTIVE else None
        if not any(hasattr(m, "host_write") for m in _ACTIVE):
            _hostdata.BEFORE_HOST_WRITE = None


def claim(fields: Iterable[Any]) -> None:
    """The gradient or dual fields `fields` belong to this thread's Tapes and FwdModes: another thread's do
    not clear them on entry (until a launch of theirs uses them: `adopt`; or this thread ends)."""
    ref = _STATE.claim
    for f in fields:
        if isinstance(f, Field):
            f.__dict__["_qd_claim"] = ref


def clear_unclaimed_gradients(gradient_type: SNodeGradType) -> list:
    """What entering a Tape (gradients) or FwdMode (duals) clears: every placed field of `gradient_type` but
    those another live thread claimed (`claim`), which are returned (`adopt` clears them when this thread's
    launches use them)."""
    me = _STATE.token
    skipped = []
    for f in all_fields():
        if f._role is gradient_type and f._placed:
            ref = f.__dict__.get("_qd_claim")
            owner = ref() if ref is not None else None
            if owner is None or owner is me:
                f.fill(0)
            else:
                skipped.append(f)
    return skipped


def adopt(skipped: list, fields: Iterable[Any]) -> None:
    """Before a launch under a Tape or FwdMode: the gradient (dual) fields `fields` it uses are this thread's;
    those its entry left alone (`skipped`: another thread had claimed them) are cleared now."""
    fields = [f for f in fields if isinstance(f, Field)]
    for f in fields:
        for k, g in enumerate(skipped):
            if g is f:
                del skipped[k]
                f.fill(0)
                break
    claim(fields)


_SEED_MESSAGE = (
    "`seed` is not set for non 0-D field, please specify. `seed` is a list to specify which parameters the "
    "computed derivatives respect to. The length of the `seed` should be same to that of the `parameters` "
    "E.g. Given a loss `loss = qd.field(float, shape=3)`, parameter `x = qd.field(float, shape=3)`      "
    "seed = [0, 0, 1] indicates compute derivative respect to the third element of `x`.      "
    "seed = [1, 1, 1] indicates compute the sum of derivatives respect to all three element of `x`, i.e., "
    "Jacobian-vector product(Jvp) for each element in `loss`")


def active_fwd() -> "FwdMode | None":
    """The forward-mode manager whose block is running in this thread, if any (kernels then launch their dual)."""
    return _STATE.fwd


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
        self.skipped: list = []  # duals another thread had claimed when this one was entered (`adopt`)

    def __enter__(self) -> "FwdMode":
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
        claim([self.param.dual] + [ls.dual for ls in self.loss])
        self.skipped = clear_unclaimed_gradients(SNodeGradType.DUAL) if self.clear_gradients else []
        self._write_seed(list(self.seed))
        _STATE.fwd = self
        activate(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        if _STATE.fwd is self:
            _STATE.fwd = None
        deactivate(self)
        self._write_seed([0.0] * len(self.seed))

    def own(self, bindings: Sequence[Any]) -> None:
        """A launch of this thread in the block binds `bindings`: their duals are this FwdMode's (`adopt`)."""
        adopt(self.skipped, [b.dual for b in bindings if isinstance(b, Field)])

    def _write_seed(self, seed: list[float]) -> None:
        dual = self.param.dual
        if len(seed) == 1:
            dual[None if not self.param.shape else (0,) * len(self.param.shape)] = 1.0 * seed[0]
        else:
            dual.from_numpy(np.asarray(seed, dtype=dual.dtype.np_dtype).reshape(self.param.shape))


__all__ = ["FwdMode", "active_fwd", "active_tape", "activate", "adopt", "claim", "clear_all_gradients",
           "clear_unclaimed_gradients", "deactivate", "state"]
