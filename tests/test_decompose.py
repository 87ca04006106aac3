"""Ops a tier lacks, lowered from other ops once for every tier (`qd/codegen/decompose.py`).

No tier lacks an op today, so the tier tests here make one lack SGN and LOGICAL_NOT (its `LACKS` says
"decompose") and check that its kernels then take the expansion and still give the op's results bit for bit.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from conftest import init_arch, tier_key
from test_ops_semantics import _inputs, _reference, _run_op

import qd
from qd import ir
from qd.base.arch import Arch
from qd.codegen import decompose
from qd.ops import Op
from qd.types import dtypes as T

_EXPANDED = (Op.SGN, Op.LOGICAL_NOT)
_TABLES = {"cpu": "qd.jit.llvm_ops", "vulkan": "qd.gpu.spirv_ops", "opencl": "qd.gpu.opencl_ops"}


def _kernel(op: Op, dt: T.DataType) -> ir.KernelIR:
    """`out[0] = op(x)` in a serial body, `x` a constant, with a use of the result after it (a store)."""
    x = ir.Const(dtype=dt, value=-2.5 if dt.is_float else -3)
    out_dt = T.u1 if op is Op.LOGICAL_NOT else dt
    r = ir.OpStmt(op=op, args=(x,), dtype=out_dt)
    p = ir.GlobalPtr(buffer=0, indices=(ir.Const(dtype=T.i32, value=0),), dtype=out_dt)
    body = ir.Block((x, r, p.indices[0], p, ir.GlobalStore(ptr=p, value=r)))
    buf = ir.BufferDecl("ndarray", out_dt, ndim=1, arg=0, name="out")
    return ir.KernelIR("k", (ir.ArgDecl("out", "ndarray", out_dt, 0),), (buf,), (), (), body)


def test_nothing_to_expand_is_the_kernel_itself() -> None:
    k = _kernel(Op.SGN, T.f32)
    assert decompose.expand(k, frozenset()) is k
    assert decompose.expand(k, frozenset({Op.LOGICAL_NOT})) is k


@pytest.mark.parametrize("op", _EXPANDED, ids=lambda o: o.value)
def test_expansion_replaces_the_op_and_renames_its_uses(op: Op) -> None:
    k = decompose.expand(_kernel(op, T.f32), frozenset({op}))
    stmts = list(ir.walk_kernel(k))
    assert not any(isinstance(s, ir.OpStmt) and s.op is op for s in stmts)
    store = next(s for s in stmts if isinstance(s, ir.GlobalStore))
    assert store.value in stmts and store.value.dtype is (T.u1 if op is Op.LOGICAL_NOT else T.f32)


def test_an_op_without_expansion_is_refused() -> None:
    x = ir.Const(dtype=T.f32, value=1.0)
    k = _kernel(Op.SGN, T.f32).with_body(ir.Block((x, ir.OpStmt(op=Op.SIN, args=(x,), dtype=T.f32))))
    with pytest.raises(KeyError, match="no expansion"):
        decompose.expand(k, frozenset({Op.SIN}))


def test_lowered_here_reads_the_reasons() -> None:
    lacks = {Op.SGN: decompose.DECOMPOSE, Op.CLZ: "no such instruction"}
    assert decompose.lowered_here(lacks) == frozenset({Op.SGN})


_CASES = [(op, dt) for op in _EXPANDED for dt in (T.f16, T.f32, T.f64, T.i8, T.i32, T.u32, T.i64, T.u64)]


@pytest.mark.archs("cpu", "vulkan", "opencl")
@pytest.mark.parametrize("op,dt", _CASES, ids=[f"{o.value}-{d.name}" for o, d in _CASES])
def test_a_tier_that_lacks_the_op_takes_its_expansion(op: Op, dt: T.DataType, arch: Arch,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    qd.reset()
    init_arch(arch, offline_cache=False)  # (code built so is never stored under the kernel's usual key)
    table = importlib.import_module(_TABLES[tier_key(arch)])
    monkeypatch.setitem(table.LACKS, op, decompose.DECOMPOSE)
    calls = []
    expansion = decompose.EXPANSIONS[op]
    monkeypatch.setitem(decompose.EXPANSIONS, op, lambda em, args, out: calls.append(1) or expansion(em, args, out))
    xs = [_inputs(op, dt, 0)]
    out_dt = T.u1 if op is Op.LOGICAL_NOT else dt
    got = _run_op(op, dt, out_dt, xs)
    assert calls, "the tier emitted the op itself"
    np.testing.assert_array_equal(got, np.asarray(_reference(op, dt, xs)).astype(out_dt.np_dtype))
