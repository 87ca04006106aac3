"""Local matrices indexed at run time live in arrays on the LLVM tiers (`qd/codegen/local_arrays.py`): the same
values as the interpreter's select and If chains, bit for bit (fast_math off), in range and out of range, through
reads, writes, augmented writes, rows, columns and both indices at run time, forward and reverse; a chain the plan
cannot prove equivalent stays a chain. The shape is Genesis' contact clipping (`narrowphase.py`: 16x3 and 17x2
matrices indexed in loops), whose select chains were an eighth of its CUDA task's PTX."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd import ir
from qd.base import arch as _arch
from qd.codegen import local_arrays
from qd.jit import llvm_fn
from qd.ops import Op
from qd.types import dtypes as T
from tests.conftest import arch_skip_reason, init_arch, selected_archs

N = 16


def _clip_kernel():
    x = qd.field(qd.f32, shape=(32, 3))
    y = qd.field(qd.f32, shape=32)

    @qd.kernel
    def clip(m: qd.i32, j0: qd.i32):
        for t in range(32):
            poly = qd.Matrix.zero(qd.f32, N, 3)
            hist = qd.Vector.zero(qd.f32, 12)
            for i in range(m):
                r = (i * 5) % N
                poly[r, :] = qd.Vector([x[t, 0] + i, x[t, 1] * i, x[t, 2] - i])  # a row
                poly[(i + 3) % N, 1] += 0.5  # one column, read-modify-write
                poly[i % N, i % 3] = poly[r, 2] * 0.25  # both indices at run time
                hist[i % 12] = hist[(i + 1) % 12] + poly[r, 2]
            s = 0.0
            for i in range(m):
                row = poly[(i * 7) % N, :]
                s += row[0] * 0.5 + row[1] - row[2] * poly[i % N, 1] + hist[i % 12]
            hist[j0] = 7.0  # out of range: the interpreter's chains write nothing ...
            s += poly[j0, 0] + hist[j0]  # ... and read the last entry
            y[t] = s

    return x, y, clip


def _run(arch: _arch.Arch) -> np.ndarray:
    init_arch(arch, fast_math=False, offline_cache=False)  # (compiled here: the plan is what is tested)
    try:
        x, y, clip = _clip_kernel()
        x.from_numpy(np.random.default_rng(3).standard_normal((32, 3)).astype(np.float32))
        out = []
        for m, j0 in ((0, 0), (3, 5), (17, -1), (40, 12), (40, 16), (9, 100)):
            clip(m, j0)
            out.append(y.to_numpy())
        return np.array(out)
    finally:
        qd.reset()


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list:
    """The plans the LLVM code generator makes in this test."""
    seen: list = []
    real = llvm_fn.FnLowering.plan_local_arrays

    def spy(self: llvm_fn.FnLowering, *blocks: ir.Block) -> None:
        real(self, *blocks)
        seen.append(self.arrays)
    monkeypatch.setattr(llvm_fn.FnLowering, "plan_local_arrays", spy)
    return seen


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_indexed_matrices_match_the_interpreter(name: str, plans: list) -> None:
    if name not in selected_archs():
        pytest.skip(f"tier {name!r} not selected (QD_TEST_ARCHS)")
    why = arch_skip_reason(name) or arch_skip_reason("interp")
    if why is not None:
        pytest.skip(why)
    want = _run(_arch.interp)
    got = _run(_arch.from_name(name))
    np.testing.assert_array_equal(got, want)
    planned = [p for p in plans if p.arrays]
    assert planned, "no local matrix was planned as an array"
    sizes = sorted(n for p in planned for _, n in p.arrays)
    assert sizes == [12, 3 * N]  # the 12-vector; the whole matrix (indexed by row, by column and by both)
    assert sum(len(p.reads) for p in planned) >= 4 and sum(len(p.writes) for p in planned) >= 3


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_gradients_through_indexed_matrices_match_the_interpreter(name: str) -> None:
    if name not in selected_archs():
        pytest.skip(f"tier {name!r} not selected (QD_TEST_ARCHS)")
    why = arch_skip_reason(name) or arch_skip_reason("interp")
    if why is not None:
        pytest.skip(why)

    def grads(a: _arch.Arch) -> np.ndarray:
        init_arch(a, fast_math=False)
        try:
            x = qd.field(qd.f32, shape=(8, N), needs_grad=True)
            loss = qd.field(qd.f32, shape=(), needs_grad=True)

            @qd.kernel
            def f(m: qd.i32):
                for t in range(8):
                    v = qd.Vector.zero(qd.f32, N)
                    for i in qd.static(range(N)):
                        v[i] = x[t, i]
                    acc = 0.0
                    for i in range(m):
                        acc += v[(i * 3) % N] * v[i % N]
                    loss[None] += acc

            x.from_numpy(np.random.default_rng(5).standard_normal((8, N)).astype(np.float32))
            with qd.ad.Tape(loss=loss):
                f(23)
            return x.grad.to_numpy()
        finally:
            qd.reset()

    np.testing.assert_array_equal(grads(_arch.from_name(name)), grads(_arch.interp))


# ---------------------------------------------------------------- the plan on hand-made IR


def _entries(n: int) -> list:
    return [ir.Alloca(dtype=T.f32) for _ in range(n)]


def _chain(index: ir.Value, loads: list) -> tuple[list, ir.OpStmt]:
    """`qd.lang.matrix._choose`'s select chain over `loads`: (its statements, its root)."""
    stmts, rest = [], loads[-1]
    for k in range(len(loads) - 2, -1, -1):
        c = ir.OpStmt(op=Op.CMP_EQ, args=(index, ir.Const(dtype=T.i32, value=k)), dtype=T.u1)
        rest = ir.OpStmt(op=Op.SELECT, args=(c, loads[k], rest), dtype=T.f32)
        stmts += [c, rest]
    return stmts, rest


def test_a_read_after_a_write_to_its_matrix_stays_a_chain() -> None:
    idx = ir.ArgLoad(index=0, dtype=T.i32)
    a = _entries(N)
    loads = [ir.LocalLoad(var=e, dtype=T.f32) for e in a]
    chain, root = _chain(idx, loads)
    store = ir.LocalStore(var=a[3], value=ir.Const(dtype=T.f32, value=1.0))
    ok = local_arrays.plan(ir.Block(tuple(a + loads + chain)))
    assert root in ok.reads and ok.reads[root].n == N and len(ok.arrays) == 1
    assert len(ok.skip) == N - 2  # the chain's inner selects, used by nothing else
    # the loads read a[3] before the store; the array holds the stored value at the chain: not the same
    late = local_arrays.plan(ir.Block(tuple(a + loads + [store] + chain)))
    assert root not in late.reads


def test_a_short_vector_stays_in_registers() -> None:
    idx = ir.ArgLoad(index=0, dtype=T.i32)
    a = _entries(local_arrays.MIN_ENTRIES - 1)
    loads = [ir.LocalLoad(var=e, dtype=T.f32) for e in a]
    chain, _ = _chain(idx, loads)
    p = local_arrays.plan(ir.Block(tuple(a + loads + chain)))
    assert not p.arrays and not p.reads


def _write_run(values: list) -> tuple[ir.Block, ir.If]:
    """`m[i] = values[i]` as `AssignMixin._dyn_each` writes it: one If per entry; (the block, its first If)."""
    idx = ir.ArgLoad(index=0, dtype=T.i32)
    a = _entries(len(values))
    stmts: list = list(a)
    for k, (e, v) in enumerate(zip(a, values)):
        c = ir.OpStmt(op=Op.CMP_EQ, args=(idx, ir.Const(dtype=T.i32, value=k)), dtype=T.u1)
        stmts += [c, ir.If(cond=c, then=ir.Block((ir.LocalStore(var=e, value=v),)))]
    return ir.Block(tuple(stmts)), stmts[len(a) + 1]


def test_a_write_run_whose_blocks_differ_stays_ifs() -> None:
    one, two = ir.Const(dtype=T.f32, value=1.0), ir.Const(dtype=T.f32, value=2.0)
    blk, first = _write_run([one] * N)
    p = local_arrays.plan(blk)
    assert first in p.writes and p.writes[first].n == N and len(p.skip) == N - 1
    blk, first = _write_run([one] * 5 + [two] + [one] * (N - 6))  # entry 5 gets another value
    assert not local_arrays.plan(blk).writes
