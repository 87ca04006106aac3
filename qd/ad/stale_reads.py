"""Reads whose replay would be stale: what reverse mode refuses instead of a silently wrong gradient.

The reverse pass replays a kernel's forward computation after the forward launch ran, reading globals as that
launch (and every later launch of a Tape) left them. A load of a buffer written since may then read another value
than the forward pass did (`y[i] = y[i] * x[i]`: the replay reads the product, not the old `y[i]`). Where the
sweep needs that value, the gradient would be wrong.

A load is *needed* when its value reaches, through linear ops (add, sub, neg, casts, select's arms, a product or
quotient with a constant), ops not differentiated (no operand depends on a buffer with a gradient), locals and
piecewise-constant ops, anything other than a stored or printed value: a differentiated non-linear op, a branch,
an index, a loop bound.

Within one kernel (`stale_read`, raised by `kernel.grad` once the primal kernel ran: `validation.stale_read_error`)
a needed load is stale when the kernel writes its buffer later in program order, or earlier inside a loop around
both, except: a store of the very cell earlier in the same iteration, in cells each loop around both gives its
iteration alone (`y[i] = f(x[i]); z[i] = y[i] * w[i]`); writes that run ahead of the reads along one serial loop
(`x[t + 1, i] = f(x[t, i])`, `T[s + 1] = f(T[s])` with `s = start[r] + t`), in cells each parallel loop around both
gives its iteration alone; cells an index dimension fixes apart for the launch (the same sum of scalar arguments
plus different constants); loops of one constant iteration. Indices are compared in affine form
(`qd.ad.index_forms`), through locals assigned once (a `qd.func` parameter, `s = k`).

Across the launches of one Tape (`tape_stale_read`, run by `Tape.grad`): a needed read of an object that a later
launch may write, unless an index dimension fixes the two apart with the launches' argument values (time-indexed
fields: step t reads `x[t, i]` and writes `x[t + 1, i]`, in the kernel or in a `qd.func` given t). A launch inside a
`grad_replaced` function is kept for its writes only: the Tape never replays its gradient. The Tape saves a copy
before such an overwrite (`qd.runtime.ad_snapshots`, matching writes against pending reads with `overlap`), and before a
launch whose own stale reads a copy from before it serves (`before_launch_buffers`); what is left is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd import ir
from qd.ad.index_forms import Forms
from qd.ad.reverse import _Activity
from qd.ops import INFO, Op

_WRITES = (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)


@dataclass
class _Pos:
    order: int
    loops: tuple  # enclosing (loop, parallel) pairs, outermost first


def _positions(k: ir.KernelIR) -> dict:
    out: dict = {}

    def block(b: ir.Block, loops: tuple) -> None:
        for s in b.stmts:
            out[s] = _Pos(len(out), loops)
            inner = loops + ((s, bool(getattr(s, "parallel", False))),) if isinstance(s, (ir.RangeFor, ir.While)) \
                else loops
            for kid in s.blocks():
                block(kid, inner)
    block(k.body, ())
    return out


def _locals(k: ir.KernelIR) -> tuple[dict, dict]:
    """(loads, stores) of every local of `k`, by Alloca."""
    loads: dict = {}
    stores: dict = {}
    for s in ir.walk(k.body):
        if isinstance(s, ir.LocalLoad):
            loads.setdefault(s.var, []).append(s)
        elif isinstance(s, ir.LocalStore):
            stores.setdefault(s.var, []).append(s)
    return loads, stores


def _users(k: ir.KernelIR) -> dict:
    users: dict = {}
    for s in ir.walk(k.body):
        for v in s.operands():
            users.setdefault(v, []).append(s)
    return users


def _flows_linearly(u: ir.OpStmt, v: ir.Value) -> bool:
    """Whether the adjoint of `u` needs no value of operand `v` (it may need the others')."""
    info = INFO[u.op]
    if info.nondiff:
        return True  # piecewise constant: no adjoint; where its result goes still matters
    if u.op is Op.SELECT:
        return u.args[0] is not v
    if info.linear:
        return True
    if u.op is Op.MUL:
        return all(isinstance(a, ir.Const) for a in u.args if a is not v)
    if u.op is Op.DIV:
        return u.args[0] is v and isinstance(u.args[1], ir.Const)
    return False


def _needed(load: ir.GlobalLoad, users: dict, local_loads: dict, active: Any) -> bool:
    work, seen = [load], {load}
    while work:
        v = work.pop()
        for u in users.get(v, ()):
            if isinstance(u, ir.OpStmt) and (_flows_linearly(u, v) or not active(u)):
                nxt = [u]  # no adjoint of `u` needs `v` (linear in it, or not differentiated): follow its result
            elif isinstance(u, ir.LocalStore) and u.value is v:
                nxt = local_loads.get(u.var, [])
            elif isinstance(u, _WRITES) and u.value is v and v not in u.ptr.indices:
                continue  # a stored value: its adjoint comes from the cell's, not from its value
            elif isinstance(u, (ir.Print, ir.Check)):
                continue  # dropped by the replay
            else:
                return True
            for n in nxt:
                if n not in seen:
                    seen.add(n)
                    work.append(n)
    return False


def _once(loop: ir.Stmt) -> bool:
    """A loop of constant trip count 1 at most: nothing in it runs again, and no other iteration runs beside."""
    return (isinstance(loop, ir.RangeFor) and isinstance(loop.begin, ir.Const)
            and isinstance(loop.end, ir.Const) and int(loop.end.value) - int(loop.begin.value) <= 1)


def _ahead(load: ir.GlobalLoad, write: ir.Stmt, loop: ir.RangeFor, f: Forms) -> bool:
    """Along serial `loop`, the write's cell runs ahead of the read's in some dimension: both index it by
    `base + c·var + k` with the same base, invariant in the loop, and the same c, the write's k past the read's in
    c's direction (`x[t + 1] = f(x[t])`, `T[s + 1] = f(T[s])` with `s = start[r] + t`). Each such cell is written in
    an earlier iteration than the one that reads it, and never after."""
    for a, b in zip(write.ptr.indices, load.ptr.indices):
        fa, fb = f.form(a), f.form(b)
        if fa is None or fb is None or fa.terms != fb.terms:
            continue
        c, k = fa.coef(loop.var), fa.const - fb.const
        if c and k and (k > 0) == (c > 0) and all(f.invariant(x, loop) for x in fa.atoms() if x is not loop.var):
            return True
    return False


def _owned(load: ir.GlobalLoad, write: ir.Stmt, loop: ir.RangeFor, f: Forms) -> bool:
    """Some index dimension gives each iteration of `loop` cells no other iteration reaches (`Forms.owned`)."""
    return any(f.owned(a, b, loop) for a, b in zip(write.ptr.indices, load.ptr.indices))


def _apart(load: ir.GlobalLoad, write: ir.Stmt, f: Forms) -> bool:
    """Some index dimension fixes the two to different cells for the whole launch: the same sum of scalar
    arguments plus different constants (`x[t, i]` read, `x[t + 1, i]` written; `t` maybe a `qd.func` parameter)."""
    for a, b in zip(write.ptr.indices, load.ptr.indices):
        fa, fb = f.launch_form(a), f.launch_form(b)
        if fa is not None and fb is not None and fa.terms == fb.terms and fa.const != fb.const:
            return True
    return False


def _stale(load: ir.GlobalLoad, write: ir.Stmt, pos: dict, f: Forms) -> bool:
    if _apart(load, write, f):
        return False
    lp, wp = pos[load], pos[write]
    shared = [(loop, par) for loop, par in lp.loops if any(loop is w for w, _ in wp.loops) and not _once(loop)]
    serial = [loop for loop, par in shared if not par]
    parallel = [loop for loop, par in shared if par]
    if len(serial) == 1 and isinstance(serial[0], ir.RangeFor) and _ahead(load, write, serial[0], f) \
            and all(isinstance(p, ir.RangeFor) and _owned(load, write, p, f) for p in parallel):
        return False  # the writes run ahead of the reads along the serial loop (time steps)
    if wp.order > lp.order:
        return True  # written after it was read
    if not shared:
        return False  # an earlier loop or statement wrote it: the replay reads what the forward pass read
    # earlier in the same iteration: right only for the very cell it reads, a cell no other iteration of the
    # loops around both writes
    return not (isinstance(write, ir.GlobalStore) and len(write.ptr.indices) == len(load.ptr.indices)
                and all(f.same(a, b) for a, b in zip(write.ptr.indices, load.ptr.indices))
                and all(isinstance(loop, ir.RangeFor) and _owned(load, write, loop, f) for loop, _ in shared))


def _before_launch_serves(load: ir.GlobalLoad, write: ir.Stmt, pos: dict, f: Forms) -> bool:
    """Whether the forward pass read, at `load`, the cell as it was before the launch whatever `write` does: the
    two are fixed apart, or the write comes after the read in program order and no loop around both runs it before
    the read (shared loops are parallel ones giving each iteration its own cells)."""
    if _apart(load, write, f):
        return True
    lp, wp = pos[load], pos[write]
    if wp.order <= lp.order:
        return False
    shared = [(loop, par) for loop, par in lp.loops if any(loop is w for w, _ in wp.loops) and not _once(loop)]
    return all(par and isinstance(loop, ir.RangeFor) and _owned(load, write, loop, f) for loop, par in shared)


def _needed_stale(k: ir.KernelIR, grads: Sequence[int]) -> tuple[list, list, dict]:
    """(needed loads of buffers `k` writes, those of them whose replay is stale, the writes by buffer)."""
    writes: dict = {}
    for s in ir.walk(k.body):
        if isinstance(s, _WRITES):
            writes.setdefault(s.ptr.buffer, []).append(s)
    loads = [s for s in ir.walk(k.body) if isinstance(s, ir.GlobalLoad) and s.ptr.buffer in writes]
    if not loads:
        return [], [], writes
    pos, users, forms = _positions(k), _users(k), Forms(k.body)
    local_loads, stores = _locals(k)
    active = _Activity(stores, set(grads))
    needed = [s for s in loads if _needed(s, users, local_loads, active)]
    stale = [s for s in needed if any(_stale(s, w, pos, forms) for w in writes[s.ptr.buffer])]
    return needed, stale, writes


def stale_loads(k: ir.KernelIR, grads: Sequence[int]) -> list[ir.GlobalLoad]:
    """The loads of `k` (pre-offload) whose replay in reverse mode would read another value than the forward pass
    did, where the gradient needs that value (`grads`: the buffers with a gradient, which make values active)."""
    return _needed_stale(k, grads)[1]


def stale_read(k: ir.KernelIR, grads: Sequence[int]) -> ir.GlobalLoad | None:
    """The first of `stale_loads`, or None when there is none."""
    loads = stale_loads(k, grads)
    return loads[0] if loads else None


def before_launch_buffers(k: ir.KernelIR, grads: Sequence[int]) -> frozenset:
    """The buffers of `k` with a stale needed load whose every needed load reads the buffer as it was before the
    launch (`_before_launch_serves` for each of its writes): a replay given the buffer's values from before the
    launch (the Tape's saved copy, `qd.runtime.ad_snapshots`) reads what the forward pass read (`y[i] = y[i] * x[i]`)."""
    needed, stale, writes = _needed_stale(k, grads)
    if not stale:
        return frozenset()
    pos, forms = _positions(k), Forms(k.body)
    out = set()
    for b in {s.ptr.buffer for s in stale}:
        if all(_before_launch_serves(s, w, pos, forms) for s in needed if s.ptr.buffer == b for w in writes[b]):
            out.add(b)
    return frozenset(out)


# ---------------------------------------------------------------- across the kernels of one Tape

@dataclass(frozen=True)
class Access:
    """A read the gradient needs, or a write, of buffer `buffer`; per index dimension `(terms, c)`: constant c plus
    the sum of coef times scalar argument i over `terms` ((i, coef), ...), or None (decided at run time)."""

    buffer: int
    dims: tuple
    loc: Any

    def __post_init__(self) -> None:  # (`_values`' plan: the fixed dimensions, and those arguments decide)
        template = tuple(d[1] if d is not None and not d[0] else None for d in self.dims)
        varying = tuple((p, d[0], d[1]) for p, d in enumerate(self.dims) if d is not None and d[0])
        object.__setattr__(self, "_template", template)
        object.__setattr__(self, "_varying", varying)


def _dim(v: ir.Value, f: Forms) -> tuple | None:
    a = f.launch_form(v)
    return None if a is None else (tuple(sorted((atom[1], c) for atom, c in a.terms)), a.const)


def accesses(k: ir.KernelIR, grads: Sequence[int]) -> tuple[list[Access], list[Access]]:
    """(reads the gradient needs, writes) of kernel `k` (pre-offload body), for `tape_stale_read`."""
    users, forms = _users(k), Forms(k.body)
    local_loads, stores = _locals(k)
    active = _Activity(stores, set(grads))
    reads, writes = [], []
    for s in ir.walk(k.body):
        if isinstance(s, ir.GlobalLoad) and _needed(s, users, local_loads, active):
            reads.append(Access(s.ptr.buffer, tuple(_dim(i, forms) for i in s.ptr.indices), s.loc))
        elif isinstance(s, _WRITES):
            writes.append(Access(s.ptr.buffer, tuple(_dim(i, forms) for i in s.ptr.indices), s.loc))
    return reads, writes


@dataclass
class Launch:
    """One kernel launch of a Tape: its name, accesses, the object behind each buffer (and its name in the kernel)
    and its launch args."""

    name: str
    reads: list
    writes: list
    owners: list
    args: list
    buffer_names: list
    generations: dict  # buffer -> its owner's generation counter after the launch, for the buffers it reads
    before: frozenset = frozenset()  # buffers its gradient reads as they were before it (`before_launch_buffers`)
    # buffers whose reads its replay gets from a copy the Tape saved (`qd.runtime.ad_snapshots`), not from the live object
    saved: set = field(default_factory=set)
    call: int = -1  # its index in the Tape's calls (a replayed launch), else -1
    reads_of: dict | None = None  # buffer -> its reads (`group_reads(reads)`; made here when not given)

    def __post_init__(self) -> None:
        if self.reads_of is None:
            self.reads_of = group_reads(self.reads)


def group_reads(reads: Sequence[Access]) -> dict:
    """{buffer: [its reads]} in first-read order: a kernel's reads, grouped once per kernel instance and shared by
    its launches."""
    out: dict = {}
    for r in reads:
        out.setdefault(r.buffer, []).append(r)
    return out


def _values(a: Access, args: list) -> tuple:
    """Per index dimension of `a`, the value it fixes at this launch (an int), or None (left open, or decided by an
    argument that is no integer)."""
    if not a._varying:
        return a._template
    out = list(a._template)
    n = len(args)
    for p, terms, value in a._varying:
        for i, c in terms:
            v = args[i] if i < n else None
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                value = None
                break
            value += c * int(v)
        out[p] = value
    return tuple(out)


def tape_outside_write(launches: Sequence[Launch]) -> tuple | None:
    """(launch, its read) for a read of an object written after the launch by something other than the Tape's
    later kernel launches (a host write such as `from_numpy`, `fill` or `x[i] = v`, or a kernel the Tape did not
    record): its generation counter moved more than those launches move it. None when there is none."""
    after: dict = {}  # id(owner) -> generation bumps of the launches after the current one (each bumps once a buffer)
    for launch in reversed(launches):
        for b, rs in launch.reads_of.items():
            if b in launch.saved:
                continue  # its replay reads a saved copy
            owner, gen = launch.owners[b], launch.generations.get(b)
            if gen is not None and getattr(owner, "generation", None) is not None \
                    and owner.generation - gen > after.get(id(owner), 0):
                return launch, rs[0]
        for b in {w.buffer for w in launch.writes}:
            if launch.owners[b] is not None:
                after[id(launch.owners[b])] = after.get(id(launch.owners[b]), 0) + 1
    return None


def tape_stale_read(launches: Sequence[Launch]) -> tuple | None:
    """The first of `tape_stale_reads`, or None."""
    return next(tape_stale_reads(launches), None)


def tape_stale_reads(launches: Sequence[Launch], skip: Callable[[Any], bool] | None = None) -> Iterator[tuple]:
    """(reading launch, its read, writing launch, its write) for every read of a Tape's launch that a later launch
    of the same Tape may overwrite (one write each, latest reads first). The gradient of the reading kernel replays
    its reads after every forward launch: a cell written since holds another value. Cells are told apart by the
    index dimensions both fix to constants or scalar arguments (`x[t, i]` read by step t, `x[t + 1, i]` written).
    `skip(owner)`: reads of that object are not looked at (a Tape's tracked objects, whose overwrites it saved)."""
    def wanted(owner: Any) -> bool:
        return owner is not None and (skip is None or not skip(owner))

    # id(owner) -> {positions a write fixes: {those values: (launch, write)}}: one lookup per read and kind of write
    later: dict = {}
    # only writes after some read of the same object can hit: the others are not indexed (a Tape whose 1000 steps keep
    # writes only, being inside a `grad_replaced` function, and whose last kernels read)
    read_owners = {id(lc.owners[b]) for lc in launches for b in lc.reads_of if wanted(lc.owners[b])}
    if not read_owners:
        return
    first_reader = next((n for n, lc in enumerate(launches) if lc.reads), len(launches))
    for n in range(len(launches) - 1, -1, -1):
        launch = launches[n]
        for r in launch.reads:
            owner = launch.owners[r.buffer]
            if owner is None or id(owner) not in read_owners:
                continue
            rv = _values(r, launch.args)
            for fixed, cells in later.get(id(owner), {}).items():
                if all(rv[p] is not None for p in fixed):
                    hit = cells.get(tuple(rv[p] for p in fixed))
                else:  # the read leaves some of them open: any write that agrees where both are fixed
                    hit = next((lw for vals, lw in cells.items() if all(
                        rv[p] is None or rv[p] == v for p, v in zip(fixed, vals))), None)
                if hit is not None:
                    yield (launch, r) + hit
                    break
        if n <= first_reader:
            continue
        for w in launch.writes:
            owner = launch.owners[w.buffer]
            if owner is not None and id(owner) in read_owners:
                wv = _values(w, launch.args)
                fixed = tuple(p for p, v in enumerate(wv) if v is not None)
                later.setdefault(id(owner), {}).setdefault(fixed, {}).setdefault(
                    tuple(wv[p] for p in fixed), (launch, w))


def overlap(read: tuple, write: tuple) -> bool:
    """Whether a read and a write of one object (their `access_values`) may reach the same cell: they agree in
    every dimension both fix (dimensions of different counts: may)."""
    if len(read) != len(write):
        return True
    return all(r is None or w is None or r == w for r, w in zip(read, write))


access_values = _values


__all__ = ["Access", "Launch", "access_values", "accesses", "before_launch_buffers", "overlap", "stale_loads",
           "stale_read", "tape_outside_write", "tape_stale_read", "tape_stale_reads"]
