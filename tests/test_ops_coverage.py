"""Every op of the op table has an implementation in every execution table (DESIGN §3): the interpreter's opcodes,
the LLVM, SPIR-V and OpenCL op tables, and `ad/rules.py`'s derivative rules. A tier may leave an op out only with
a reason (its `LACKS`); "decompose" there says the op reaches it as its expansion in `qd/codegen/decompose.py`,
built from ops the tier has.
"""

from __future__ import annotations

import pytest

from qd.bytecode import gen_ops
from qd.bytecode.opcodes import OPC
from qd.codegen import decompose
from qd.ops import INFO, KINDS, LIBM, Op, c_name
from qd.types import dtypes as T

# Ops lowered by composition rather than one opcode per class (see qd/bytecode/ops_lowering.py).
_COMPOSED = {Op.CAST: "CAST_", Op.BIT_CAST: "BITCAST_", Op.SELECT: "SELECT", Op.STOP_GRAD: "MOV"}


def _classes(op: Op) -> list[str]:
    rule = INFO[op].rule
    if rule == "float":
        return ["F32", "F64"]
    if rule == "int":
        return ["I32", "I64", "U32", "U64"]
    return ["I32", "I64", "U32", "U64", "F32", "F64"]


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_interpreter_implements_op(op: Op) -> None:
    if op in _COMPOSED:
        assert any(name.startswith(_COMPOSED[op]) for name in OPC)
        return
    missing = [c for c in _classes(op) if f"{op.name}_{c}" not in OPC]
    assert not missing, f"{op} has no interpreter opcode for {missing}"


def test_every_cast_pair_has_an_opcode() -> None:
    for src in ("I", "U", "F32", "F64"):
        for dt in T.ALL:
            assert f"CAST_{src}_{dt.name.upper()}" in OPC


def test_atomics_cover_every_storage_dtype() -> None:
    for dt in T.ALL:
        if dt is T.u1:
            continue
        for op in ("ADD", "SUB", "MIN", "MAX"):
            assert f"AT_{op}_{dt.name.upper()}" in OPC


def test_generated_dispatch_is_current() -> None:
    assert gen_ops.OUT.read_text() == gen_ops.render(), "run `python -m qd.bytecode.gen_ops` and rebuild"
    assert gen_ops.EXTERNS.read_text() == gen_ops.render_externs()


def _llvm_kinds(op: Op) -> list[str]:
    rule = INFO[op].rule
    return {"float": ["float"], "int": ["int"]}.get(rule, ["int", "float"])


def _tier_table(module: str) -> object:
    return pytest.importorskip(module)


def _check_tier(tier: object, op: Op, kinds: list[str], name: str) -> None:
    """`op` in the tier's TABLE for every value kind, composed (CAST, BIT_CAST per pair of dtypes), or left out
    with a reason; a "decompose" reason needs an expansion whose ops the tier has."""
    if op in tier.LACKS:
        reason = tier.LACKS[op]
        assert reason.strip(), f"{name} leaves {op} out without a reason"
        if reason == decompose.DECOMPOSE:
            assert op in decompose.EXPANSIONS, f"{name} decomposes {op}, which has no expansion"
        return
    if op in tier.COMPOSED:
        assert callable(getattr(tier, tier.COMPOSED[op]))
        return
    missing = [kind for kind in kinds if (op, kind) not in tier.TABLE]
    assert not missing, f"{op} has no {name} lowering for {missing} (nor a LACKS entry saying why)"


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_llvm_implements_op(op: Op) -> None:
    """The LLVM generator's op table (`qd/jit/llvm_ops.py`): one lowering per op and value kind."""
    _check_tier(_tier_table("qd.jit.llvm_ops"), op, _llvm_kinds(op), "LLVM")


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_spirv_implements_op(op: Op) -> None:
    """The SPIR-V emitter's op table (`qd/gpu/spirv_ops.py`): one lowering per op and value kind (u1 operands
    too: SPIR-V has a bool type)."""
    _check_tier(_tier_table("qd.gpu.spirv_ops"), op, _llvm_kinds(op), "SPIR-V")


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_opencl_implements_op(op: Op) -> None:
    """The OpenCL C emitter's op table (`qd/gpu/opencl_ops.py`): one renderer per op and value kind (u1 is an
    int there)."""
    _check_tier(_tier_table("qd.gpu.opencl_ops"), op, _llvm_kinds(op), "OpenCL")


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_ad_rule_covers_op(op: Op) -> None:
    """`qd/ad/rules.py` has a derivative rule for every op the op table does not mark `nondiff` (the reason
    gradients stop there), and none for those it marks."""
    from qd.ad.rules import RULES

    assert (op in RULES) != INFO[op].nondiff, f"{op}: a rule iff the op is differentiable"


def test_op_classes_and_math_names() -> None:
    """Every op has a class; every C math function the op table names is one libm, libmvec and OpenCL C know
    (the interpreter declares each, f32 and f64)."""
    from qd.bytecode import gen_ops

    assert all(INFO[op].kind in KINDS for op in Op)
    externs = gen_ops.render_externs()
    for op in LIBM:
        for bits, t in ((32, "float"), (64, "double")):
            assert f"{t} {c_name(op, bits)}({t}" in externs, op
