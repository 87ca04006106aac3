"""The dead-store liveness of `qd/passes/dce.py` (issue 29: it iterated every loop to a fixpoint, so nested loops cost
3^depth passes over their bodies and Genesis' collision kernel took ~10 minutes in it). The summary form must find
exactly the dead stores a plain fixpoint iteration finds (the reference below), and kernels with loop-carried locals,
breaks and deep nesting must keep their values on every tier."""

from __future__ import annotations

from typing import Any

import numpy as np

import qd
from qd import ir
from qd.frontend.kernel import build_kernel_ir
from qd.passes.dce import _Liveness


class _FixpointLiveness:
    """Reference: live sets as Python sets, every loop iterated until its live-in stops changing."""

    def __init__(self, blocks: list[ir.Block]) -> None:
        self.every = frozenset(s for b in blocks for s in ir.walk(b) if isinstance(s, ir.Alloca))
        self.dead: set = set()
        self.record = True

    def block(self, stmts: tuple, live: set) -> set:
        live = set(live)
        for s in reversed(stmts):
            live = self.stmt(s, live)
        return live

    def stmt(self, s: ir.Stmt, live: set) -> set:
        if isinstance(s, ir.LocalStore):
            if self.record and s.var not in live:
                self.dead.add(s)
            live.discard(s.var)
        elif isinstance(s, ir.Alloca):
            live.discard(s)
        elif isinstance(s, (ir.LocalLoad, ir.LocalAtomic)):
            live.add(s.var)
        elif isinstance(s, (ir.Break, ir.Continue)):
            return set(self.every)
        elif isinstance(s, ir.If):
            return self.block(s.then.stmts, live) | self.block(s.else_.stmts, live)
        elif isinstance(s, (ir.RangeFor, ir.While)):
            record, self.record = self.record, False
            entry: set = set()
            while True:
                new = self.block(s.body.stmts, live | entry)
                if new == entry:
                    break
                entry = new
            self.record = record
            if record:
                self.block(s.body.stmts, live | entry)
            return live | entry
        return live


A = qd.types.ndarray(qd.i32, 1)


def _loop_carried(a: A, o: A):
    for i in range(a.shape[0]):
        acc = 0
        prev = 0
        t = 5  # dead: stored again before any read on every path
        t = a[i]
        for j in range(a[i] % 7):
            if j % 3 == 2:
                prev = acc  # read by the next iteration only
                continue
            acc += prev + j + t
            if acc > 40:
                break
        dead = acc  # never read
        dead = 1  # noqa: F841 - a dead store is the point
        w = 0
        while w < 3:
            w += 1
            if w == 2:
                acc *= 2
        o[i] = acc + prev


def _nested(a: A, o: A):
    for i in range(a.shape[0]):
        s = 0
        for j1 in range(2):
            for j2 in range(2):
                for j3 in range(2):
                    for j4 in range(2):
                        for j5 in range(2):
                            for j6 in range(2):
                                for j7 in range(2):
                                    for j8 in range(2):
                                        for j9 in range(2):
                                            for j10 in range(2):
                                                s = s + (j1 ^ j10) + a[i]
        o[i] = s


def _reference(fn: Any, a: np.ndarray) -> np.ndarray:
    o = np.zeros_like(a)
    for i in range(a.size):
        if fn is _nested:
            o[i] = sum(((j1 ^ j10) + a[i]) * 256 for j1 in range(2) for j10 in range(2))
            continue
        acc = prev = 0
        t = a[i]
        for j in range(a[i] % 7):
            if j % 3 == 2:
                prev = acc
                continue
            acc += prev + j + t
            if acc > 40:
                break
        for w in (1, 2, 3):
            if w == 2:
                acc *= 2
        o[i] = acc + prev
    return o


def test_summary_liveness_finds_the_fixpoints_dead_stores() -> None:
    qd.init(arch=qd.interp, log_level="warn")
    try:
        for fn in (_loop_carried, _nested):
            k = qd.kernel(fn)
            a = np.zeros(4, np.int32)
            body = build_kernel_ir(k, [a, a])[0].body
            ref = _FixpointLiveness([body])
            ref.block(body.stmts, set())
            lv = _Liveness([body])
            lv.mark(body.stmts, 0)
            assert lv.dead == ref.dead, fn.__name__
            if fn is _loop_carried:
                assert len(ref.dead) >= 2  # `t = 5` and `dead = acc` at least
    finally:
        qd.reset()


def test_loop_carried_and_deeply_nested_locals_keep_their_values(arch: Any) -> None:
    a = np.arange(-3, 20, dtype=np.int32)
    for fn in (_loop_carried, _nested):
        k = qd.kernel(fn)
        o = np.zeros_like(a)
        k(a, o)
        np.testing.assert_array_equal(o, _reference(fn, a), err_msg=fn.__name__)


def _needs_a_second_sweep(a: A, o: A):
    for i in a:
        x = a[i]
        for j in range(a[i]):
            unused = x  # noqa: F841 (a dead read; once it goes, the store below it has no reader left)
            x = j
        o[i] = 1


def test_dce_reaches_its_fixpoint_in_the_sweeps_it_runs() -> None:
    """Another sweep runs only after a read of a local went (`_Sweep.reads_dropped`): what dce returns must have
    nothing left for dce, and the local that only a dropped read kept must be gone with all its stores."""
    from qd.ir_text import print_kernel
    from qd.passes.dce import dce

    qd.init(arch=qd.interp, log_level="warn")
    try:
        for fn in (_loop_carried, _nested, _needs_a_second_sweep):
            a = np.zeros(4, np.int32)
            kir = build_kernel_ir(qd.kernel(fn), [a, a])[0]
            once = dce(kir)
            assert print_kernel(dce(once)) == print_kernel(once), fn.__name__
            if fn is _needs_a_second_sweep:
                assert not [s for s in ir.walk(once.body) if isinstance(s, (ir.Alloca, ir.LocalStore))]
    finally:
        qd.reset()
