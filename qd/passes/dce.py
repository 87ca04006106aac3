"""Dead code elimination (the `dce` pass).

Removes, until nothing changes: pure statements (`not ir.has_side_effect`) whose values are unused;
`Alloca`s that are never read (no `LocalLoad`) together with their `LocalStore`s; `LocalStore`s whose
value no load can see before the local is stored again or goes out of use (a backward liveness over
the structured IR: loops iterate to a fixpoint, a `break`/`continue` keeps everything live), before
offloading; `If`s with two empty branches; serial `RangeFor`s with an empty body. Side effects (stores, atomics, prints,
checks, random draws, returns, loops that may not end) are kept. Offloaded kernels are cleaned task
by task (a range task's `begin`/`end` count as uses).

Before:                                  After:
    %0 = arg_load 0 : i32                    %0 = arg_load 0 : i32
    %1 = alloca i32                          %3 = global_ptr @0 [%0] : i32
    local_store %1, %0                       global_store %3, %0
    %2 = mul i32 %0, %0
    %3 = global_ptr @0 [%0] : i32
    global_store %3, %0
"""

from __future__ import annotations

from collections import Counter
from dataclasses import fields, replace

from qd import ir


def _count_uses(blocks: list[ir.Block], roots: tuple) -> tuple[Counter, Counter]:
    """(uses of every value, reads of every alloca: uses other than as a `LocalStore` target)."""
    uses: Counter = Counter(v for v in roots if v is not None)
    reads: Counter = Counter()
    for b in blocks:
        for s in ir.walk(b):
            for v in s.operands():
                uses[v] += 1
                if isinstance(v, ir.Alloca) and not (isinstance(s, ir.LocalStore) and v is s.var):
                    reads[v] += 1
    return uses, reads


class _Liveness:
    """Backward liveness of locals: which `LocalStore`s no `LocalLoad` can observe."""

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
            live.discard(s)  # zero-initialised here: a definition
        elif isinstance(s, (ir.LocalLoad, ir.LocalAtomic)):  # an atomic update reads the local first
            live.add(s.var)
        elif isinstance(s, (ir.Break, ir.Continue)):
            return set(self.every)
        elif isinstance(s, ir.If):
            return self.block(s.then.stmts, live) | self.block(s.else_.stmts, live)
        elif isinstance(s, (ir.RangeFor, ir.While)):
            return live | self.loop(s.body.stmts, live)
        return live

    def loop(self, body: tuple, after: set) -> set:
        """Live-in of a loop body whose end flows to the next iteration or out of the loop."""
        record, self.record = self.record, False
        entry: set = set()
        while True:
            new = self.block(body, after | entry)
            if new == entry:
                break
            entry = new
        self.record = record
        if record:
            self.block(body, after | entry)
        return entry


class _Sweep:
    def __init__(self, uses: Counter, reads: Counter, dead_stores: set | None = None) -> None:
        self.uses, self.reads, self.changed = uses, reads, False
        self.dead_stores = dead_stores or set()

    def dead(self, s: ir.Stmt) -> bool:
        if isinstance(s, ir.LocalStore):
            return self.reads[s.var] == 0 or s in self.dead_stores
        if isinstance(s, ir.If):
            return not s.then.stmts and not s.else_.stmts
        if isinstance(s, ir.RangeFor):
            return not s.parallel and not s.body.stmts
        return not ir.has_side_effect(s) and self.uses[s] == 0

    def drop(self, s: ir.Stmt) -> None:
        self.changed = True
        for v in s.operands():
            self.uses[v] -= 1
            if isinstance(v, ir.Alloca) and not (isinstance(s, ir.LocalStore) and v is s.var):
                self.reads[v] -= 1

    def block(self, block: ir.Block) -> ir.Block:
        """Sweep `block` backwards, so chains of dead values go in one sweep."""
        out: list[ir.Stmt] = []
        for s in reversed(block.stmts):
            kids = {f.name: self.block(getattr(s, f.name)) for f in fields(s)
                    if isinstance(getattr(s, f.name), ir.Block)}
            if kids and any(kids[n] is not getattr(s, n) for n in kids):
                s = replace(s, **kids)
            if self.dead(s):
                self.drop(s)
            else:
                out.append(s)
        if len(out) == len(block.stmts) and all(a is b for a, b in zip(reversed(out), block.stmts)):
            return block
        return ir.Block(tuple(reversed(out)))


def _dce_blocks(blocks: list[ir.Block], roots: tuple, stores: bool = False) -> list[ir.Block]:
    while True:
        dead = None
        if stores:
            lv = _Liveness(blocks)
            for b in blocks:
                lv.block(b.stmts, set())
            dead = lv.dead
        sweep = _Sweep(*_count_uses(blocks, roots), dead)
        blocks = [sweep.block(b) for b in reversed(blocks)][::-1]
        if not sweep.changed:
            return blocks


def dce_block(block: ir.Block, stores: bool = False) -> ir.Block:
    """`block` without its dead code (values it defines are used only inside it); with `stores`, the
    whole kernel body: its dead local stores go too."""
    return _dce_blocks([block], (), stores)[0]


def _dce_task(t: ir.Task) -> ir.Task:
    prologue, body = _dce_blocks([t.prologue, t.body], (t.begin, t.end))
    return replace(t, prologue=prologue, body=body)


def dce(k: ir.KernelIR) -> ir.KernelIR:
    """Remove dead code from `k`'s body, or from each task once offloaded."""
    if k.tasks is None:
        return k.with_body(dce_block(k.body, stores=True))
    return replace(k, tasks=tuple(_dce_task(t) for t in k.tasks))
