"""IEEE special values on the Vulkan tier under `fast_math=False` (DESIGN §4, §10): the float-controls execution
modes a module declares, and which operands the emitter hides from a driver that folds constant zeros.

Float controls (SPIR-V 1.4 core, Vulkan 1.2 `VkPhysicalDeviceFloatControlsProperties`): `SignedZeroInfNanPreserve`
forbids the driver to assume that no operand or result is +-0, inf or NaN (so `x * 0.0` stays an IEEE multiply);
`DenormPreserve` keeps subnormals; `RoundingModeRTE` fixes round-to-nearest-even. A module declares each for every
float width it uses where the device supports it, respecting the device's independence rule (widths that must be
set alike are set together or not at all).

Hidden zeros: llvmpipe (lavapipe) advertises `SignedZeroInfNanPreserve` but its LLVM builder (gallivm's
`lp_build_add/mul/div`) replaces an operation whose operand is the constant +0.0 before any float mode is looked
at: `x * 0.0 -> 0`, `x / 0.0 -> undef`, `0.0 / x -> 0`, `x + 0.0 -> x`. An operand the driver could see as a
constant is therefore passed through `bits | z`, where z is a slot word that is always 0 (`ZERO_WORD`, loaded from
memory: no compiler can know it): the value is unchanged, the driver sees no constant. `opaque` says which qd values
the driver cannot see as constants (then nothing is hidden), conservatively: NIR propagates constants through
locals, unrolled loops and integer identities (`i - i`), so a local, an inner loop index or an int op may be one.
"""

from __future__ import annotations

from dataclasses import dataclass

from qd import ir
from qd.gpu.spirv_defs import Capability, ExecutionMode
from qd.ops import COMPARISONS, Op

# VkShaderFloatControlsIndependence
INDEPENDENCE_32_BIT_ONLY, INDEPENDENCE_ALL, INDEPENDENCE_NONE = 0, 1, 2
_TIED = {INDEPENDENCE_32_BIT_ONLY: (frozenset({16, 64}),), INDEPENDENCE_ALL: (),
         INDEPENDENCE_NONE: (frozenset({16, 32, 64}),)}


@dataclass(frozen=True)
class FloatControls:
    """The float widths for which the device supports each execution mode, and its independence rules."""

    preserve: tuple[int, ...] = ()  # shaderSignedZeroInfNanPreserveFloat{16,32,64}
    denorm_preserve: tuple[int, ...] = ()  # shaderDenormPreserveFloat*
    rte: tuple[int, ...] = ()  # shaderRoundingModeRTEFloat*
    denorm_independence: int = INDEPENDENCE_NONE
    rounding_independence: int = INDEPENDENCE_NONE


NO_FLOAT_CONTROLS = FloatControls()


def execution_modes(fc: FloatControls, used: set[int]) -> list[tuple[Capability, ExecutionMode, int]]:
    """(capability, mode, width) for a module using float widths `used` under `fast_math=False`."""
    out = [(Capability.SignedZeroInfNanPreserve, ExecutionMode.SignedZeroInfNanPreserve, w)
           for w in sorted(used) if w in fc.preserve]
    for cap, mode, have, indep in ((Capability.DenormPreserve, ExecutionMode.DenormPreserve, fc.denorm_preserve,
                                    fc.denorm_independence),
                                   (Capability.RoundingModeRTE, ExecutionMode.RoundingModeRTE, fc.rte,
                                    fc.rounding_independence)):
        widths = {w for w in used if w in have}
        for group in _TIED.get(indep, _TIED[INDEPENDENCE_NONE]):
            if widths & group:  # widths set alike: all of them (each supported) or none
                widths = widths | group if group <= set(have) else widths - group
        out += [(cap, mode, w) for w in sorted(widths)]
    return out


# float ops whose operands are hidden when the driver could see them as constants: everything that computes
# (comparisons, selects, min/max, sign and casts only compare or move values, which the shortcuts leave alone)
_MOVES = frozenset(COMPARISONS) | {Op.SELECT, Op.STOP_GRAD, Op.CAST, Op.BIT_CAST, Op.MIN, Op.MAX, Op.NEG, Op.ABS,
                                   Op.SGN}


def hides_operands(op: Op) -> bool:
    return op not in _MOVES


_RUNTIME = (ir.GlobalLoad, ir.ArgLoad, ir.ExternalShape, ir.AtomicRMW, ir.AtomicSwap, ir.RandomValue)


def opaque(x: ir.Value, task_var: ir.Value | None, memo: dict) -> bool:
    """Whether no driver can see `x` as a constant: it comes from memory, an argument, an atomic, a random draw,
    the task's own index, or float arithmetic / a cast / a select of such values."""
    if x in memo:
        return memo[x]
    if isinstance(x, _RUNTIME) or (task_var is not None and x is task_var):
        r = True
    elif isinstance(x, ir.OpStmt) and x.op is Op.SELECT:
        r = opaque(x.args[1], task_var, memo) and opaque(x.args[2], task_var, memo)
    elif isinstance(x, ir.OpStmt) and x.dtype.is_float and x.op not in COMPARISONS:
        # float arithmetic keeps a runtime operand's opacity (the modes forbid `x * 0.0 -> 0`); an int op does not
        r = any(opaque(a, task_var, memo) for a in x.args)
    else:
        r = False
    memo[x] = r
    return r


__all__ = ["NO_FLOAT_CONTROLS", "FloatControls", "execution_modes", "hides_operands", "opaque"]
