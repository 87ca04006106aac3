"""Reads whose replay would be stale: refused before reverse mode differentiates a kernel.

The reverse pass replays a kernel's forward computation after the forward launch ran, reading globals as that
launch left them. A load of a buffer the kernel also writes may then read another value than the forward pass did
(`y[i] = y[i] * x[i]`: the replay reads the product, not the old `y[i]`). Where the sweep needs that value (an
operand of a non-linear op, a branch, an index) the gradient would be silently wrong, so `stale_read` finds the
first such load and `check_reverse_supported` refuses the kernel, naming its line.

A load is needed when its value reaches, through linear ops (add, sub, neg, casts, select's arms, a product or
quotient with a constant), locals and piecewise-constant ops, anything other than a stored or printed value.
It is stale when the kernel writes its buffer (store, atomic or swap) later in program order, or earlier inside a
loop around both, except a store of the very cell earlier in the same iteration whose index follows every such
loop's variable (`y[i] = f(x[i]); z[i] = y[i] * w[i]` is allowed: no other iteration writes `y[i]`).
"""

from __future__ import annotations

from dataclasses import dataclass

from qd import ir
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


def _needed(load: ir.GlobalLoad, users: dict, local_loads: dict) -> bool:
    work, seen = [load], {load}
    while work:
        v = work.pop()
        for u in users.get(v, ()):
            if isinstance(u, ir.OpStmt) and _flows_linearly(u, v):
                nxt = [u]
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


def _same_cell(a: ir.GlobalPtr, b: ir.GlobalPtr) -> bool:
    return len(a.indices) == len(b.indices) and all(
        x is y or (isinstance(x, ir.Const) and isinstance(y, ir.Const) and x.value == y.value)
        for x, y in zip(a.indices, b.indices))


def _depends_on(v: ir.Value, var: ir.Value, memo: dict) -> bool:
    if v is var:
        return True
    if v not in memo:
        memo[v] = False  # (no cycles in SSA; guards the recursion)
        memo[v] = isinstance(v, ir.Stmt) and any(_depends_on(a, var, memo) for a in v.operands())
    return memo[v]


def _once(loop: ir.Stmt) -> bool:
    """A loop of constant trip count 1 at most: nothing in it runs again, and no other iteration runs beside."""
    return (isinstance(loop, ir.RangeFor) and isinstance(loop.begin, ir.Const)
            and isinstance(loop.end, ir.Const) and int(loop.end.value) - int(loop.begin.value) <= 1)


def _stale(load: ir.GlobalLoad, write: ir.Stmt, pos: dict, memo: dict) -> bool:
    lp, wp = pos[load], pos[write]
    if wp.order > lp.order:
        return True  # written after it was read
    shared = [loop for loop, _ in lp.loops if any(loop is w for w, _ in wp.loops) and not _once(loop)]
    if not shared:
        return False  # an earlier loop or statement wrote it: the replay reads what the forward pass read
    # earlier in the same iteration: right only for the very cell it reads, a cell no other iteration of the
    # loops around both writes (its index follows each loop's variable)
    return not (isinstance(write, ir.GlobalStore) and _same_cell(write.ptr, load.ptr) and all(
        isinstance(loop, ir.RangeFor) and any(_depends_on(i, loop.var, memo) for i in load.ptr.indices)
        for loop in shared))


def stale_read(k: ir.KernelIR) -> ir.GlobalLoad | None:
    """The first load of `k` (pre-offload) whose replay in reverse mode would read another value than the
    forward pass did, where the gradient needs that value; None when there is none."""
    writes: dict = {}
    local_loads: dict = {}
    loads = []
    for s in ir.walk(k.body):
        if isinstance(s, _WRITES):
            writes.setdefault(s.ptr.buffer, []).append(s)
        elif isinstance(s, ir.LocalLoad):
            local_loads.setdefault(s.var, []).append(s)
        elif isinstance(s, ir.GlobalLoad):
            loads.append(s)
    loads = [s for s in loads if s.ptr.buffer in writes]
    if not loads:
        return None
    pos, users, memo = _positions(k), _users(k), {}
    for load in loads:
        if any(_stale(load, w, pos, memo) for w in writes[load.ptr.buffer]) and _needed(load, users, local_loads):
            return load
    return None


__all__ = ["stale_read"]
