"""Integer index values in affine form, to tell the cells of two accesses apart (`qd.ad.stale_reads`).

An index is `const + Σ coef · atom`. An atom is a scalar kernel argument (`("arg", i)`: equal wherever it is
loaded), a loop variable, or any other integer value (a load of `start[r]`, `i // n`), by identity except that
values equal by construction share one atom (pure ops of equal operands, loads at equal indices of a buffer the
kernel never writes: the copies an unrolled loop makes). Integer casts are seen through (the index arithmetic is
taken not to wrap).

Which cells an iteration of a loop owns (`Forms.owned`, for the stale-read and cross-iteration checks): a dimension
`m · var + rest` whose rest spans fewer than |m| cells in one iteration, or one adding a base read from data
computed from the variable (`start[r] + k`), taken as the iteration's own segment.

A local assigned once stands for the value it was assigned, at the loads its store dominates (structured code: the
store comes earlier in a block that holds the load): a `qd.func` parameter (the frontend inlines a call, storing
each argument into a local the body reads), a copy of a loop variable (`s = k`), a computed base
(`s = start[r] + k`). Any other local is an atom of its own at each load (two loads are never taken equal).

An atom is *invariant in a loop* when it holds one value for the whole run of the loop: arguments, variables of the
loops around it, values computed before it, and inside it pure arithmetic of invariants or loads of buffers the
kernel never writes at invariant indices.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from qd import ir
from qd.ops import Op


@dataclass(frozen=True)
class Affine:
    """`const + Σ coef · atom` over `terms`, a frozenset of (atom, nonzero coef)."""

    terms: frozenset
    const: int

    def coef(self, atom: Any) -> int:
        return next((c for a, c in self.terms if a == atom), 0)

    def atoms(self) -> Iterator[Any]:
        return (a for a, _ in self.terms)


def _combine(a: Affine, b: Affine, sign: int) -> Affine:
    terms = dict(a.terms)
    for atom, c in b.terms:
        terms[atom] = terms.get(atom, 0) + sign * c
    return Affine(frozenset((k, c) for k, c in terms.items() if c), a.const + sign * b.const)


def _scale(a: Affine, k: int) -> Affine:
    return Affine(frozenset((atom, c * k) for atom, c in a.terms if c * k), a.const * k)


def _atom(v: Any) -> Affine:
    return Affine(frozenset(((v, 1),)), 0)


def _places(body: ir.Block) -> tuple[dict, dict, dict]:
    """(path, loops, loop of var): every statement's place ((id of block, index in it), ...) from `body` down, the
    loops around it (RangeFor and While, outermost first), and the RangeFor of every loop variable."""
    paths: dict = {}
    loops: dict = {}
    loop_of: dict = {}

    def block(b: ir.Block, path: tuple, around: tuple) -> None:
        for n, s in enumerate(b.stmts):
            here = path + ((id(b), n),)
            paths[s], loops[s] = here, around
            if isinstance(s, ir.RangeFor):
                loop_of[s.var] = s
            inner = around + (s,) if isinstance(s, (ir.RangeFor, ir.While)) else around
            for kid in s.blocks():
                block(kid, here, inner)
    block(body, (), ())
    return paths, loops, loop_of


def _dominates(store: tuple, load: tuple) -> bool:
    """Whether the statement at path `store` runs before the one at `load` whenever `load` runs, in the same run
    of the block around the store (it comes earlier in that block, which holds the load)."""
    d = len(store) - 1
    return len(load) > d and load[:d] == store[:d] and load[d][0] == store[d][0] and load[d][1] > store[d][1]


def single_definitions(body: ir.Block, paths: dict) -> dict:
    """LocalLoad -> the value it reads, for loads of a local stored exactly once (and never updated atomically)
    where that store dominates the load (`paths`: `_places`')."""
    stores: dict = {}
    for s in ir.walk(body):
        if isinstance(s, (ir.LocalStore, ir.LocalAtomic)):
            stores.setdefault(s.var, []).append(s)
    out: dict = {}
    for s in ir.walk(body):
        if isinstance(s, ir.LocalLoad):
            st = stores.get(s.var, ())
            if len(st) == 1 and isinstance(st[0], ir.LocalStore) and _dominates(paths[st[0]], paths[s]):
                out[s] = st[0].value
    return out


class Forms:
    """The affine forms of one kernel body's index values, with the facts about loops they are judged by."""

    def __init__(self, body: ir.Block) -> None:
        paths, self.loops, self.loop_of = _places(body)
        self.defs = single_definitions(body, paths)
        self.written = {s.ptr.buffer for s in ir.walk(body)
                        if isinstance(s, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap))}
        self._forms: dict = {}
        self._canon: dict = {}  # `_key` -> the first value of that key
        self._deps: dict = {}
        self._inside: dict = {}  # loop -> the statements of its body (nested ones included)
        self._invariant: dict = {}

    def resolve(self, v: ir.Value) -> ir.Value:
        """`v`, or the value a load of a local assigned once reads."""
        while isinstance(v, ir.LocalLoad) and v in self.defs:
            v = self.defs[v]
        return v

    def form(self, v: ir.Value) -> Affine | None:
        """The affine form of integer value `v`; None for a non-integer."""
        if v not in self._forms:
            self._forms[v] = self._form(v)
        return self._forms[v]

    def _form(self, v: ir.Value) -> Affine | None:
        v = self.resolve(v)
        if not v.dtype.is_int:
            return None
        if isinstance(v, ir.Const):
            return Affine(frozenset(), int(v.value))
        if isinstance(v, ir.ArgLoad):
            return _atom(("arg", v.index))
        if isinstance(v, ir.OpStmt):
            if v.op is Op.CAST and v.args[0].dtype.is_int:
                return self.form(v.args[0])
            if v.op is Op.NEG:
                f = self.form(v.args[0])
                return None if f is None else _scale(f, -1)
            if v.op in (Op.ADD, Op.SUB):
                a, b = self.form(v.args[0]), self.form(v.args[1])
                if a is not None and b is not None:
                    return _combine(a, b, 1 if v.op is Op.ADD else -1)
            if v.op is Op.MUL:
                a, b = self.form(v.args[0]), self.form(v.args[1])
                if a is not None and b is not None and (not a.terms or not b.terms):
                    return _scale(b, a.const) if not a.terms else _scale(a, b.const)
        return _atom(self._canonical(v))

    def _canonical(self, v: ir.Value) -> ir.Value:
        """The first of the values equal to `v` by construction: pure ops of equal operands, and loads of a buffer
        the kernel never writes at equal indices (copies an unrolled loop makes of `start[r]`, `i // n`)."""
        key = self._key(v)
        return v if key is None else self._canon.setdefault(key, v)

    def _key(self, v: ir.Value) -> tuple | None:
        if isinstance(v, ir.OpStmt):
            return "op", v.op, v.dtype, tuple(self._operand(a) for a in v.args)
        if isinstance(v, ir.GlobalLoad) and not v.volatile and v.ptr.buffer not in self.written:
            return "load", v.ptr.buffer, tuple(self._operand(i) for i in v.ptr.indices)
        return None

    def _operand(self, v: ir.Value) -> Any:
        v = self.resolve(v)
        f = self.form(v) if v.dtype.is_int else None
        if f is not None:
            return f
        if isinstance(v, ir.Const):
            return "const", v.dtype, v.value
        if isinstance(v, ir.ArgLoad):
            return "arg", v.index
        return self._canonical(v)

    def launch_form(self, v: ir.Value) -> Affine | None:
        """The form of `v` when it is fixed for the whole launch by constants and scalar arguments, else None."""
        f = self.form(v)
        return f if f is not None and all(isinstance(a, tuple) for a in f.atoms()) else None

    def same(self, a: ir.Value, b: ir.Value) -> bool:
        """Whether index values `a` and `b` are equal wherever both are computed in one iteration."""
        fa = self.form(a)
        return fa is not None and fa == self.form(b)

    def apart(self, a: ir.Value, b: ir.Value, var: ir.LoopVar) -> bool:
        """Whether index values `a` and `b` differ by a nonzero constant and neither follows loop variable `var`:
        the two accesses never meet, in one iteration or across two (`p[t, ...]` and `p[t - 1, ...]`)."""
        fa, fb = self.form(a), self.form(b)
        if fa is None or fb is None or self.depends(a, var) or self.depends(b, var):
            return False
        d = _combine(fa, fb, -1)
        return not d.terms and d.const != 0

    def depends(self, v: Any, var: ir.LoopVar) -> bool:
        """Whether value or atom `v` is computed from loop variable `var` (through locals assigned once)."""
        if isinstance(v, tuple):
            return False  # a scalar argument
        key = (v, var)
        if key not in self._deps:
            self._deps[key] = False  # no cycles in SSA values; a guard all the same
            r = self.resolve(v)
            self._deps[key] = r is var or (isinstance(r, ir.Stmt) and not isinstance(r, ir.LocalLoad)
                                           and any(self.depends(a, var) for a in r.operands()))
        return self._deps[key]

    def invariant(self, atom: Any, loop: ir.Stmt) -> bool:
        """Whether `atom` holds one value for the whole run of `loop`."""
        if isinstance(atom, tuple):
            return True  # a scalar argument
        if loop not in self._inside:
            self._inside[loop] = {s for b in loop.blocks() for s in ir.walk(b)}
        return self._invariant_value(atom, loop)

    def _outside(self, var: ir.LoopVar, loop: ir.Stmt) -> bool:
        """Whether `var` is the variable of a loop around `loop`."""
        return any(o is self.loop_of.get(var) for o in self.loops.get(loop, ()))

    def _invariant_value(self, v: ir.Value, loop: ir.Stmt) -> bool:
        key = (v, loop)
        if key in self._invariant:
            return self._invariant[key]
        self._invariant[key] = False
        r = self.resolve(v)
        if isinstance(r, ir.LoopVar):
            out = self._outside(r, loop)
        elif r not in self._inside[loop]:
            out = isinstance(r, ir.Stmt)  # computed before the loop ran (a value is defined before its uses)
        elif isinstance(r, (ir.Const, ir.ArgLoad, ir.ExternalShape)):
            out = True
        elif isinstance(r, ir.OpStmt):
            out = all(self._invariant_value(a, loop) for a in r.args)
        elif isinstance(r, ir.GlobalLoad):
            out = not r.volatile and r.ptr.buffer not in self.written and \
                all(self._invariant_value(i, loop) for i in r.ptr.indices)
        else:
            out = False
        self._invariant[key] = out
        return out

    def _per_iteration(self, atom: Any, loop: ir.RangeFor) -> bool:
        """Whether `atom` holds one value for each iteration of `loop` (computed in its body, outside any loop
        nested in it, or invariant in the outermost such loop)."""
        if isinstance(atom, tuple):
            return True
        if isinstance(atom, ir.LoopVar):
            return self._outside(atom, loop)
        around = self.loops.get(atom, ())
        inner = next((n for n, o in enumerate(around) if o is loop), None)
        if inner is None or inner + 1 == len(around):
            return True
        return self.invariant(atom, around[inner + 1])

    def _span(self, terms: dict, const: int) -> tuple | None:
        """(lowest, highest) value of `const + Σ coef · var` over `terms`, loop variables of constant ranges."""
        lo = hi = const
        for atom, c in terms.items():
            loop = self.loop_of.get(atom) if isinstance(atom, ir.LoopVar) else None
            if loop is None or not isinstance(loop.begin, ir.Const) or not isinstance(loop.end, ir.Const) \
                    or int(loop.end.value) <= int(loop.begin.value):
                return None
            ends = (c * int(loop.begin.value), c * (int(loop.end.value) - 1))
            lo, hi = lo + min(ends), hi + max(ends)
        return lo, hi

    def owned(self, a: ir.Value, b: ir.Value, loop: ir.RangeFor) -> bool:
        """Whether index values `a` and `b` (one dimension of two accesses) reach, in each iteration of `loop`, only
        cells no other iteration of it reaches: `m · var + rest` in both, where the cells the rests reach in one
        iteration span fewer than |m| (`i`, `r * (K + 1) + k` with k in range(K)); or both add the same base read
        from data computed from the variable (`start[r] + k`, `i // 2`), which qd takes as the iteration's own
        cells (a forward pass whose parallel iterations do not race on them needs it)."""
        fa, fb = self.form(a), self.form(b)
        if fa is None or fb is None or fa.coef(loop.var) != fb.coef(loop.var):
            return False
        m = fa.coef(loop.var)
        ta = {x: c for x, c in fa.terms if x is not loop.var}
        tb = {x: c for x, c in fb.terms if x is not loop.var}
        shared = [x for x, c in ta.items() if tb.get(x) == c and self._per_iteration(x, loop)]
        if any(self.depends(x, loop.var) for x in shared):
            return True
        if not m:
            return False
        sa = self._span({x: c for x, c in ta.items() if x not in shared}, fa.const)
        sb = self._span({x: c for x, c in tb.items() if x not in shared}, fb.const)
        return sa is not None and sb is not None and abs(m) > max(sa[1], sb[1]) - min(sa[0], sb[0])


__all__ = ["Affine", "Forms", "single_definitions"]
