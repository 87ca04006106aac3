"""Nested control flow on a driver that compiles only so many nested constructs right (`Caps.max_nesting`).

llvmpipe (lavapipe) keeps the execution masks of nested `if`s and loops on fixed stacks of 80 entries (gallivm's
`LP_MAX_TGSI_NESTING`) and silently drops what is deeper: 85 nested `if`s each doing `c += 1` gave 79. The
emitter counts the selection and loop constructs open around the code it emits (`depth`, both kinds together:
conservative). An `if` at `max_nesting - FLATTEN_BELOW` or deeper is emitted flat instead of nested: its
branches become blocks guarded by `guard && cond` / `guard && !cond`, one level below the current one, and the
`if`s inside them become further guards at that same level:

    if g:            # a run of statements other than `if`s: one selection on the guard
        a = ...
    g1 = g && c      # `if c: A else: B` inside the guarded block
    if g1: A ...
    if g && !c: B ...

Values a guarded run defines go through Function variables (initialised to 0: never undefined) to the runs and
guards after it, which its selection no longer dominates; `break`, `continue` and `return` keep their meaning
(control leaves the construct; the rest of the block is never reached). Loops cannot be flattened: a loop
deeper than `max_nesting - SPARE` is a compile-time error naming the line, never a wrong value.
"""

from __future__ import annotations

from qd import ir
from qd.errors import QuadrantsCompilationError
from qd.gpu import spirv_ops as so
from qd.gpu.spirv_defs import Op as S
from qd.gpu.spirv_defs import StorageClass

FLATTEN_BELOW = 16  # `if`s this close to the driver's limit are flattened
SPARE = 6  # levels the emitter's own constructs (a check's failure path, CAS loops, loop-limit ticks) may add


class Nesting:
    """The nesting count and flat `if`s; the emitter's state (`caps`, `vals`, `op`, `block`, ...) is `FnEmitter`'s."""

    def enter(self, s: ir.Stmt) -> None:
        """A selection or loop construct of statement `s` opens around the code emitted next."""
        self.depth += 1
        limit = self.caps.max_nesting
        if limit and self.depth > limit - SPARE:
            loc = s.loc
            where = f"{loc.file}:{loc.line}: " if loc is not None else ""
            raise QuadrantsCompilationError(
                f"{where}loops and ifs nested {self.depth} deep here; this Vulkan driver compiles at most "
                f"{limit - SPARE} nested levels correctly (qd flattens deep ifs, but not loops): nest fewer loops "
                f"here, e.g. by splitting the kernel")

    def leave(self) -> None:
        self.depth -= 1

    def flattens(self) -> bool:
        limit = self.caps.max_nesting
        return bool(limit) and self.depth >= limit - FLATTEN_BELOW

    def flat_if(self, s: ir.If) -> None:
        cond = so.truth(self, s.cond.dtype, self.v(s.cond))
        self.guarded(s.then, cond)
        self.guarded(s.else_, self.op(S.LogicalNot, cond, t=self.bool_t()))

    def guarded(self, blk: ir.Block, g: int) -> None:
        """Emits `blk` to run where bool `g` is true, without nesting deeper than one selection."""
        run: list[ir.Stmt] = []
        for st in (*blk.stmts, None):
            if st is not None and not isinstance(st, ir.If):
                run.append(st)
                continue
            if run and not self.guarded_run(run, g):
                return  # the run ends in a break, continue or return: the rest of the block never runs
            run = []
            if st is not None:
                c = so.truth(self, st.cond.dtype, self.v(st.cond))
                bt = self.bool_t()
                self.guarded(st.then, self.op(S.LogicalAnd, g, c, t=bt))
                self.guarded(st.else_, self.op(S.LogicalAnd, g, self.op(S.LogicalNot, c, t=bt), t=bt))

    def guarded_run(self, run: list[ir.Stmt], g: int) -> bool:
        """`if g: run` as one selection; the values the run defines reach what follows through variables.
        Returns False when the run ends in a terminator."""
        body, merge = self.m.id(), self.m.id()
        self.op(S.SelectionMerge, merge, 0)
        self.op(S.BranchConditional, g, body, merge)
        self.label(body)
        self.enter(run[0])
        self.block(ir.Block(tuple(run)))
        self.leave()
        ended = self.done
        spills = []
        if not ended:
            for st in run:
                if st in self.vals:
                    t = self.u64 if isinstance(st, ir.GlobalPtr) else self.ty(st.dtype)
                    zero = self.u64c(0) if isinstance(st, ir.GlobalPtr) else self.c(st.dtype, 0)
                    var = self.fn.local(self.m.pointer(StorageClass.Function, t), zero)
                    self.op(S.Store, var, self.vals[st])
                    spills.append((st, var, t))
        self.branch(merge)
        self.label(merge)
        for st, var, t in spills:
            self.vals[st] = self.op(S.Load, var, t=t)
        return not ended


__all__ = ["FLATTEN_BELOW", "SPARE", "Nesting"]
