"""Dead code elimination (the `dce` pass).

Removes, until nothing changes (another sweep only after a read of a local went: `_Sweep`): pure
statements (`not ir.has_side_effect`) whose values are unused; `Alloca`s that are never read (no `LocalLoad`)
together with their `LocalStore`s; `LocalStore`s whose value no load can see before the local is stored again or
goes out of use (a backward liveness over the structured IR: loops iterate to a fixpoint, a `break`/`continue`
keeps everything live), before offloading; `If`s with two empty branches; serial `RangeFor`s with an empty body.
Side effects (stores, atomics, prints, checks, random draws, returns, loops that may not end) are kept. Offloaded
kernels are cleaned task by task (a range task's `begin`/`end` count as uses).

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
from dataclasses import replace

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
    """Backward liveness of locals: which `LocalStore`s no `LocalLoad` can observe.

    Live sets are ints (one bit per `Alloca`). Each block has a summary (gen, kill): live before it is
    `gen | (live after it & ~kill)`, computed once, bottom-up, so a loop is not iterated to a fixpoint (its
    body's live-in is `gen | (after & ~kill)` at once, and live before the loop `after | gen`: it may run zero
    times) and nested loops cost no more than straight code: linear in the kernel's size. `mark(stmts, after)`
    then walks each statement once with the actual live set and records the dead stores."""

    def __init__(self, blocks: list[ir.Block]) -> None:
        every = [s for b in blocks for s in ir.walk(b) if isinstance(s, ir.Alloca)]
        self.bit = {a: 1 << n for n, a in enumerate(every)}
        self.every = (1 << len(every)) - 1
        self.dead: set = set()
        self._summaries: dict = {}  # id(stmts) -> (gen, kill, stmts), the tuple kept alive with its id

    def summary(self, stmts: tuple) -> tuple[int, int]:
        """(gen, kill) of a statement sequence."""
        hit = self._summaries.get(id(stmts))
        if hit is not None and hit[2] is stmts:
            return hit[0], hit[1]
        gen = kill = 0
        for s in reversed(stmts):
            g, k = self._stmt(s)
            gen, kill = g | (gen & ~k), kill | k
        self._summaries[id(stmts)] = (gen, kill, stmts)
        return gen, kill

    def _stmt(self, s: ir.Stmt) -> tuple[int, int]:
        if isinstance(s, ir.LocalStore):
            return 0, self.bit[s.var]
        if isinstance(s, ir.Alloca):  # zero-initialised here: a definition
            return 0, self.bit[s]
        if isinstance(s, (ir.LocalLoad, ir.LocalAtomic)):  # an atomic update reads the local first
            return self.bit[s.var], 0
        if isinstance(s, (ir.Break, ir.Continue)):  # conservative: everything is live where it jumps to
            return self.every, self.every
        if isinstance(s, ir.If):
            g1, k1 = self.summary(s.then.stmts)
            g2, k2 = self.summary(s.else_.stmts)
            return g1 | g2, k1 & k2
        if isinstance(s, (ir.RangeFor, ir.While)):
            return self.summary(s.body.stmts)[0], 0
        return 0, 0

    def mark(self, stmts: tuple, live: int) -> int:
        """Live before `stmts` given `live` after them; records the stores in them that no load observes."""
        for s in reversed(stmts):
            if isinstance(s, ir.LocalStore):
                b = self.bit[s.var]
                if not live & b:
                    self.dead.add(s)
                live &= ~b
            elif isinstance(s, ir.If):
                live = self.mark(s.then.stmts, live) | self.mark(s.else_.stmts, live)
            elif isinstance(s, (ir.RangeFor, ir.While)):
                gen = self.summary(s.body.stmts)[0]
                self.mark(s.body.stmts, live | gen)  # its end flows out and to the next iteration: after | live-in
                live |= gen
            else:
                g, k = self._stmt(s)
                live = g | (live & ~k)
        return live


class _Sweep:
    """One backward sweep. A dropped statement's operands are defined before it, so they are visited after it and
    see its uses gone: chains of dead values go in one sweep. Only a dropped read of a local can leave work for
    another sweep (a store of that local visited before it, or dead only by the new liveness): `reads_dropped`."""

    def __init__(self, uses: Counter, reads: Counter, dead_stores: set | None = None) -> None:
        self.uses, self.reads, self.reads_dropped = uses, reads, False
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
        for v in s.operands():
            self.uses[v] -= 1
            if isinstance(v, ir.Alloca) and not (isinstance(s, ir.LocalStore) and v is s.var):
                self.reads[v] -= 1
                self.reads_dropped = True

    def block(self, block: ir.Block) -> ir.Block:
        """Sweep `block` backwards, so chains of dead values go in one sweep."""
        out: list[ir.Stmt] = []
        for s in reversed(block.stmts):
            names = ir.block_fields(type(s))
            if names:
                kids = {n: self.block(getattr(s, n)) for n in names}
                if any(kids[n] is not getattr(s, n) for n in names):
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
                lv.mark(b.stmts, 0)
            dead = lv.dead
        sweep = _Sweep(*_count_uses(blocks, roots), dead)
        blocks = [sweep.block(b) for b in reversed(blocks)][::-1]
        if not sweep.reads_dropped:
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
