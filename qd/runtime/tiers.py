"""The tier protocol and the tier table: which tier launches a kernel instance under the live config.

A `Tier` compiles an instance's code for itself, builds the compiled launch plan of an instance
(`qd/runtime/launch_plan.py`, or None where its launches keep the Python path) and launches it. The table
maps an arch to its tier: `interp` to the interpreter (`qd.runtime.launch.InterpTier`), `cpu` to the tier
that wraps the interpreter and native code (`TieredTier`: `qd.jit.tiering` decides which one runs a launch),
a GPU arch to its device tier (`qd.runtime.device_launch.DeviceTier`, over the arch's `DeviceBackend`).
`launch()` dispatches through it; launches made from inside a launch (while-loop counting kernels, the
max-reducer's task kernels) go through `launch_inner`, which skips the wrappers.

A *wrapper* (the debugger, `qd.debug.session`) is registered with `wrap(make)`: while registered, every arch's
tier is `make(tier)`; `unwrap(make)` restores it. Compiled launch plans stand aside while any wrapper is
registered (their guard on `WRAPPED`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from qd import _launch as _clib
from qd.base import config


class Tier(Protocol):
    """What runs kernel instances (`ck`: `qd.runtime.launch.CompiledKernel`) on one arch."""

    name: str

    def compile(self, ck: Any) -> Any:
        """The tier's code of `ck`, made now where it is not made yet."""
        ...

    def plan(self, ck: Any, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
        """The armed compiled launch plan of `ck` after a call with leaf values `values` ran, or None."""
        ...

    def launch(self, ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
        """Runs (or enqueues) one launch; returns the kernel's return values."""
        ...


_BASE: dict[Any, Tier] = {}  # arch -> its tier, as registered
_ACTIVE: dict[Any, Tier] = {}  # arch -> its tier with the wrappers applied (made on first use)
_WRAPPERS: list[Callable[[Tier], Tier]] = []
WRAPPED: tuple | None = None  # the registered wrappers; None while there is none (the plans' guard)


def register(arch: Any, tier: Tier) -> None:
    """`tier` launches the instances of `arch` from now on (plans armed before stand aside: `bump_epoch`)."""
    _BASE[arch] = tier
    _ACTIVE.clear()
    _clib.bump_epoch()


def base_tier(arch: Any) -> Tier:
    """The registered tier of `arch` (a GPU arch's device tier, or the interpreter for an arch with none)."""
    tier = _BASE.get(arch)
    if tier is None:
        if getattr(arch, "is_gpu", False):
            from qd.runtime import device_launch

            tier = device_launch.tier_of(arch)
        else:
            from qd.runtime import launch as _launch

            tier = _launch.host_tier(arch)
        _BASE[arch] = tier
    return tier


def tier_for(arch: Any) -> Tier:
    """The tier launches of `arch` go through: its registered one, wrapped by every registered wrapper."""
    tier = _ACTIVE.get(arch)
    if tier is None:
        tier = base_tier(arch)
        for make in _WRAPPERS:
            tier = make(tier)
        _ACTIVE[arch] = tier
    return tier


def launch(ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """Launches `ck` on the tier of the live config's arch."""
    arch = config.current().arch
    tier = _ACTIVE.get(arch) or tier_for(arch)
    return tier.launch(ck, bindings, args)


def launch_inner(ck: Any, bindings: Sequence[Any], args: Sequence[Any]) -> Any:
    """A launch made by a launch (a counting kernel, a max-reducer task): on the arch's own tier, unwrapped."""
    return base_tier(config.current().arch).launch(ck, bindings, args)


def plan(ck: Any, sig: Any, values: list, bindings: Sequence[Any], guards: tuple) -> Any:
    """The armed compiled launch plan of `ck` on the live config's tier, or None."""
    return tier_for(config.current().arch).plan(ck, sig, values, bindings, guards)


def wrap(make: Callable[[Tier], Tier]) -> None:
    """Registers a wrapper: every tier is `make(tier)` until `unwrap(make)`."""
    global WRAPPED
    if make not in _WRAPPERS:
        _WRAPPERS.append(make)
    WRAPPED = tuple(_WRAPPERS)
    _ACTIVE.clear()


def unwrap(make: Callable[[Tier], Tier]) -> None:
    global WRAPPED
    if make in _WRAPPERS:
        _WRAPPERS.remove(make)
    WRAPPED = tuple(_WRAPPERS) or None
    _ACTIVE.clear()


__all__ = ["Tier", "base_tier", "launch", "launch_inner", "plan", "register", "tier_for", "unwrap", "wrap"]
