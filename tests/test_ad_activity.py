"""The activity analysis of reverse mode (`qd.ad.reverse._Activity`: which values depend on a buffer with a grad).
It walked operands recursively and took a value still being explored to be inactive, for good: the answer depended
on the order of the questions, and a kernel of thousands of chained statements (Genesis' collision kernel) overflowed
Python's recursion at its first launch. Now: the least fixpoint, whatever the order, without recursion."""

from __future__ import annotations

import random

import qd
from qd import ir
from qd.ad.reverse import _Activity
from qd.ad.stale_reads import _locals
from qd.frontend.kernel import build_kernel_ir


def _reference(values: list, stores: dict, grads: set) -> dict:
    """Active = reachable from a load of a grad buffer along operand and store->load edges (plain fixpoint)."""
    active: set = set()
    changed = True
    while changed:
        changed = False
        for v in values:
            if v in active:
                continue
            if isinstance(v, ir.GlobalLoad):
                on = v.ptr.buffer in grads
            elif isinstance(v, ir.LocalLoad):
                on = any(st.value in active for st in stores.get(v.var, ()))
            else:
                on = any(a in active for a in v.operands() if a.dtype.is_float)
            if on:
                active.add(v)
                changed = True
    return {v: v in active for v in values}


def test_activity_is_the_fixpoint_in_any_order() -> None:
    qd.init(arch=qd.interp, log_level="warn")
    try:
        x = qd.field(qd.f32, shape=3, needs_grad=True)
        w = qd.field(qd.f32, shape=3)
        y = qd.field(qd.f32, shape=3, needs_grad=True)

        @qd.kernel
        def k():
            for i in range(3):
                a = 0.0
                b = w[i]
                for j in range(3):
                    c = a * 2.0  # active only through the loop-carried `a`
                    a = c + x[i]
                    b = b * w[j]  # never active
                y[i] = a + b

        k_ir = build_kernel_ir(k, [])[0]
        grads = {n for n, d in enumerate(k_ir.buffers) if d.name in ("x", "y")}
        _, stores = _locals(k_ir)
        values = [s for s in ir.walk(k_ir.body) if getattr(s, "dtype", None) is not None and s.dtype.is_float]
        want = _reference(values, stores, grads)
        assert any(want.values()) and not all(want.values())
        for seed in range(20):
            order = list(values)
            random.Random(seed).shuffle(order)
            act = _Activity(stores, grads)
            assert {v: act(v) for v in order} == want, seed
    finally:
        qd.reset()


def test_a_long_chain_needs_no_recursion() -> None:
    """20,000 chained values: one question settles them all, without recursion."""
    from qd.ops import Op
    from qd.types.dtypes import f32

    ptr = ir.GlobalPtr(buffer=0, indices=(), dtype=f32)
    v = ir.GlobalLoad(ptr=ptr, dtype=f32)
    chain = []
    for _ in range(20000):
        v = ir.OpStmt(op=Op.NEG, args=(v,), dtype=f32)
        chain.append(v)
    act = _Activity({}, {0})
    assert act(v) is True
    assert all(act(u) for u in chain[::1000])
    assert _Activity({}, {1})(v) is False
