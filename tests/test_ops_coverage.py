"""Every op of the op table has an implementation in every execution table (DESIGN §3).

Later tiers add their tables here (LLVM, SPIR-V, OpenCL) and `ad/rules.py` its derivative rules.
"""

from __future__ import annotations

import pytest

from qd.bytecode import gen_ops
from qd.bytecode.opcodes import OPC
from qd.ops import INFO, Op
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


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_llvm_implements_op(op: Op) -> None:
    """The LLVM generator's op table (`qd/jit/llvm_ops.py`): one lowering per op and value kind;
    CAST and BIT_CAST are composed per (source, destination) pair."""
    llvm_ops = pytest.importorskip("qd.jit.llvm_ops")
    if op in llvm_ops.COMPOSED:
        assert callable(getattr(llvm_ops, llvm_ops.COMPOSED[op]))
        return
    missing = [kind for kind in _llvm_kinds(op) if (op, kind) not in llvm_ops.TABLE]
    assert not missing, f"{op} has no LLVM lowering for {missing}"


@pytest.mark.parametrize("op", list(Op), ids=lambda o: o.value)
def test_spirv_implements_op(op: Op) -> None:
    """The SPIR-V emitter's op table (`qd/gpu/spirv_ops.py`): one lowering per op and value kind (u1 operands
    too: SPIR-V has a bool type); CAST and BIT_CAST are composed per (source, destination) pair."""
    from qd.gpu import spirv_ops

    if op in spirv_ops.COMPOSED:
        assert callable(getattr(spirv_ops, spirv_ops.COMPOSED[op]))
        return
    missing = [kind for kind in _llvm_kinds(op) if (op, kind) not in spirv_ops.TABLE]
    assert not missing, f"{op} has no SPIR-V lowering for {missing}"
