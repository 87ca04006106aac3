"""`reverse`: the reverse-mode (adjoint) version of a kernel (Quadrants' model, DESIGN §5).

Runs on the structured, pre-offload IR. Serial inner loops of at most `STACK_UNROLL_LIMIT` constant
iterations are unrolled first; other serial loops stay loops and get adstacks (with
`ad_stack_experimental_enabled=False` they raise "Cannot use non static range in Backwards mode", as
in Quadrants; `while` and `break`/`continue` raise too). Then every region (the kernel body, each
parallel loop body, each branch of an `if`, each loop iteration) becomes: a *replay* of its statements
(primal values recomputed; global stores and atomics dropped, so outputs are never read back), then a
*backward sweep* over them in reverse order, accumulating adjoints:

  - SSA values: adjoints are built symbolically (`rules.cotangents`); a value used inside a nested
    `if` gets an adjoint `Alloca` around that `if`;
  - float locals get an adjoint `Alloca` (a load adds to it, a store moves it to the stored value);
  - a buffer listed in `grad_of` gets a grad buffer (a `BufferDecl` `<name>.grad` appended to
    `buffers`): a load of it does `atomic add grad[idx], adj`; a store or atomic add into it seeds the
    stored value's adjoint from `grad[idx]`, and a store then clears `grad[idx]` (as Quadrants does);
  - an `if` is re-entered in the sweep: the locals its branches write are snapshotted before it in the
    replay and restored before the sweep's `if`, whose branches replay and sweep themselves. The
    untaken branch contributes exactly 0.
  - a serial loop with a dynamic trip count: its recorded replay pushes, at the start of every
    iteration, each local it carries on an adstack; its sweep runs the iterations in reverse, each
    popping its locals and then replaying and sweeping its body as a region (`replay_loop`,
    `sweep_loop`). Stacks are sized by `qd/ad/sizing.py` and lowered by `qd/ad/adstack.py`.
  - top-level parallel loops are swept in reverse order, each as its own loop (no tape between tasks).

Before (`y[i] = sin(x[i])`; buffers 0 = x, 1 = y, both with grads):

    for %i in range(0, 8) parallel:
      %p = ptr b0[%i];  %v = f32 load %p;  %s = f32 sin %v;  %q = ptr b1[%i];  store %q, %s

After (buffers 2 = x.grad, 3 = y.grad):

    for %j in range(0, 8) parallel:
      %p = ptr b0[%j];  %v = f32 load %p;  %s = f32 sin %v;  %q = ptr b1[%j]      # replay
      %gq = ptr b3[%j];  %a = f32 load %gq                                       # seed of %s
      %c = f32 cos %v;  %d = f32 mul %c, %a;  %gp = ptr b2[%j];  atomic add %gp, %d
"""

from __future__ import annotations

import linecache
from collections import ChainMap
from collections.abc import MutableMapping, Sequence
from dataclasses import fields, replace
from typing import Any

from qd import ir
from qd.ad import rules, sizing
from qd.ad.counting import counting_kernel
from qd.ad.index_forms import Forms
from qd.ad.rules import ZERO
from qd.errors import QuadrantsCompilationError
from qd.ops import Op
from qd.types.dtypes import i32

STACK_UNROLL_LIMIT = 16  # constant serial loops up to this trip count are unrolled; longer ones get adstacks

_NON_STATIC = "Cannot use non static range in Backwards mode"


def split_while(s: ir.While) -> tuple[list[ir.Stmt], ir.If, list[ir.Stmt]]:
    """A `while cond: body` loop as the frontend builds it: (the statements computing the condition,
    the `if not cond: break`, the body). Other shapes (a `break` or `continue` elsewhere at this
    loop's level, stores before the check) raise: their iteration count is not one condition's."""
    stmts = list(s.body.stmts)
    for k, st in enumerate(stmts):
        if (isinstance(st, ir.If) and len(st.then.stmts) == 1 and isinstance(st.then.stmts[0], ir.Break)
                and not st.else_.stmts):
            head, rest = stmts[:k], stmts[k + 1:]
            if all(not ir.has_side_effect(h) for h in head) and not _jumps(rest):
                return head, st, rest
            break
    raise _non_static(s, "only `while <condition>:` loops without break/continue in their body can be "
                         "differentiated")


def _jumps(stmts: Sequence[ir.Stmt]) -> bool:
    """Whether a `break`/`continue` of the enclosing loop occurs in `stmts` (not inside nested loops)."""
    for st in stmts:
        if isinstance(st, (ir.Break, ir.Continue)):
            return True
        if isinstance(st, ir.If) and (_jumps(st.then.stmts) or _jumps(st.else_.stmts)):
            return True
    return False


def _where(loc: ir.SrcLoc | None) -> str:
    if loc is None:
        return ""
    text = linecache.getline(loc.file, loc.line).strip()
    return f" (at {loc.file}:{loc.line}: {text})"


def _non_static(s: ir.Stmt, why: str) -> QuadrantsCompilationError:
    return QuadrantsCompilationError(f"{_NON_STATIC}: {why}{_where(s.loc)}")


# ------------------------------------------------------------------ unrolling


def _clone(s: ir.Stmt, sub: dict, blocks: dict[str, ir.Block]) -> ir.Stmt:
    """`s` with its operands substituted through `sub` and its blocks replaced by `blocks`."""
    changes: dict[str, Any] = dict(blocks)
    for f in fields(s):
        v = getattr(s, f.name)
        if isinstance(v, ir.Value) and (not isinstance(v, ir.LoopVar) or v in sub):
            changes[f.name] = sub.get(v, v)
        elif isinstance(v, tuple) and any(isinstance(x, ir.Value) for x in v):
            changes[f.name] = tuple(sub.get(x, x) if isinstance(x, ir.Value) else x for x in v)
    return replace(s, **changes)


class _Unroller:
    """A fresh copy of a block with every serial `RangeFor` of at most `limit` constant iterations
    unrolled. Other serial loops stay loops (they get adstacks) when `adstack` is on, else raise."""

    def __init__(self, adstack: bool) -> None:
        self.adstack = adstack
        self.limit = STACK_UNROLL_LIMIT

    def block(self, b: ir.Block, sub: dict) -> ir.Block:
        out: list[ir.Stmt] = []
        for s in b.stmts:
            if isinstance(s, ir.RangeFor) and not s.parallel:
                self.loop(s, sub, out)
            elif isinstance(s, ir.While):
                self.while_loop(s, sub, out)
            elif isinstance(s, (ir.Break, ir.Continue)):
                raise _non_static(s, "break/continue in a for loop cannot be differentiated (its trip count would "
                                     "be unknown); use a while loop with the condition")
            elif isinstance(s, ir.Return):
                raise QuadrantsCompilationError(f"kernel.grad does not support return values{_where(s.loc)}")
            else:
                kids = {n: self.block(getattr(s, n), dict(sub)) for n in ir.block_fields(type(s))}
                new = _clone(s, sub, kids)
                sub[s] = new
                out.append(new)
        return ir.Block(tuple(out))

    def loop(self, s: ir.RangeFor, sub: dict, out: list[ir.Stmt]) -> None:
        begin, end = sub.get(s.begin, s.begin), sub.get(s.end, s.end)
        const = isinstance(begin, ir.Const) and isinstance(end, ir.Const)
        if not self.adstack and (s.from_range or not const or int(end.value) - int(begin.value) > self.limit):
            # Quadrants' rule: a nested range() needs the adstack; qd also refuses a nested qd.ndrange or
            # struct-for that it cannot unroll (Quadrants would reverse it without saving carried values)
            raise _non_static(s, "with ad_stack_experimental_enabled=False a loop nested in a kernel's loop "
                                 "must be a qd.static range" + ("" if s.from_range else
                                 f" or a qd.ndrange of at most {self.limit} constant iterations"))
        if const and int(end.value) - int(begin.value) <= self.limit:
            for k in range(int(begin.value), int(end.value)):
                c = ir.Const(dtype=s.var.dtype, value=k, loc=s.loc)
                out.append(c)
                out.extend(self.block(s.body, {**sub, s.var: c}).stmts)
            return
        var = ir.LoopVar(dtype=s.var.dtype, name=s.var.name)
        body = self.block(s.body, {**sub, s.var: var})
        out.append(ir.RangeFor(var=var, begin=begin, end=end, body=body, parallel=False, loc=s.loc))

    def while_loop(self, s: ir.While, sub: dict, out: list[ir.Stmt]) -> None:
        if not self.adstack:
            raise _non_static(s, "a while loop needs adstacks (ad_stack_experimental_enabled=True)")
        head, check, rest = split_while(s)
        inner = dict(sub)
        h = self.block(ir.Block(tuple(head)), inner).stmts
        brk = ir.If(cond=inner.get(check.cond, check.cond), then=ir.Block((ir.Break(loc=check.loc),)), loc=check.loc)
        t = self.block(ir.Block(tuple(rest)), inner).stmts
        out.append(ir.While(body=ir.Block(h + (brk,) + t), loc=s.loc))


# ------------------------------------------------------------------ replay and sweep


def _subtree(stmts: Sequence[ir.Stmt]) -> tuple[set, set]:
    """(statements defined, values read) anywhere in `stmts`, nested blocks included."""
    defined: set = set()
    used: set = set()
    for s in stmts:
        defined.add(s)
        used.update(s.operands())
        for blk in s.blocks():
            d, u = _subtree(blk.stmts)
            defined |= d
            used |= u
    return defined, used


def _outer_locals(stmts: Sequence[ir.Stmt], kinds: tuple) -> list[ir.Alloca]:
    """Locals defined outside `stmts` that a statement of class `kinds` in them touches, in order."""
    body = ir.Block(tuple(stmts))
    inside = {s for s in ir.walk(body) if isinstance(s, ir.Alloca)}
    seen: dict = {}
    for s in ir.walk(body):
        if isinstance(s, kinds) and s.var not in inside:
            seen[s.var] = None
    return list(seen)


def _stored_locals(stmts: Sequence[ir.Stmt]) -> list[ir.Alloca]:
    return _outer_locals(stmts, (ir.LocalStore,))


def _read_only_locals(s: ir.Stmt) -> list[ir.Alloca]:
    """Locals defined before loop `s` that its body reads but never writes: constant during the loop,
    but possibly rewritten after it, so its sweep restores them from a snapshot."""
    stored = set(_stored_locals(s.body.stmts))
    return [v for v in _outer_locals(s.body.stmts, (ir.LocalLoad,)) if v not in stored]


class _Region:
    """One region being rewritten: its value map, its adjoints, and where its statements go."""

    def __init__(self, vmap: MutableMapping, ext: dict, out: list[ir.Stmt]) -> None:
        self.vmap = vmap
        self.ext = ext  # value defined outside -> adjoint Alloca (absent: the contribution is dropped)
        self.out = out
        self.defined: set = set()
        self.adj: dict = {}
        self.snaps: dict = {}
        self.pending: dict = {}  # (grad buffer, index key) -> [pointer, summed adjoint]: one atomic per address


class _Reverse:
    """The state of one rewrite: grad buffers, adjoint allocas of float locals, the adstacks made so
    far and the loops enclosing the code being rewritten (for sizing)."""

    def __init__(self, k: ir.KernelIR, body: ir.Block, grad_of: dict[int, int]) -> None:
        self.grad_of = grad_of
        self.forms = Forms(body)  # index values through locals assigned once (`_check_cross_iteration`)
        self.adj_var: dict[ir.Alloca, ir.Alloca] = {}
        self.stacks: list[ir.StackDecl] = []
        self.loop_stacks: dict[ir.Stmt, list[tuple[ir.Alloca, int]]] = {}
        self.loops: list[ir.RangeFor] = []
        self.context: list = []  # enclosing loops and (if condition, branch taken), outermost first (sizing)
        self.whiles: list[ir.While] = []  # while loops with stacks, sized by the counting kernel (`counting.py`)
        self.while_count: dict[ir.While, ir.Alloca] = {}
        self.exclusive: set[int] = set()  # buffers whose cells the current parallel iteration owns alone
        # every write of a local: stores, and the atomic updates of kernel-scope locals in parallel loops
        self.stores: dict[ir.Alloca, list[ir.LocalStore | ir.LocalAtomic]] = {}
        for st in ir.walk(body):
            if isinstance(st, (ir.LocalStore, ir.LocalAtomic)):
                self.stores.setdefault(st.var, []).append(st)
        self.deriver = sizing.Deriver(k.buffers, self.stores, lambda v: any(lp.var is v for lp in self.loops))
        self.active = _Activity(self.stores, set(grad_of))

    def region(self, stmts: Sequence[ir.Stmt], vmap: MutableMapping, ext: dict) -> list[ir.Stmt]:
        r = _Region(ChainMap({}, vmap), ext, [])
        r.defined = set(stmts)
        self.replay(stmts, r, record=True)
        for s in reversed(stmts):
            self.sweep(s, r)
        self.flush(r)
        return r.out

    def flush(self, r: _Region, buffer: int | None = None) -> None:
        """Emits the pending grad accumulations (of `buffer`, or all): loads of one address in a region
        add their adjoints up first and reach the grad buffer with one atomic add."""
        for key in [k for k in r.pending if buffer is None or k[0] == buffer]:
            ptr, value = r.pending.pop(key)
            if key[0] in self.exclusive:  # only this iteration touches this cell: no atomic needed
                old = _emit(r.out, ir.GlobalLoad(ptr=ptr, dtype=ptr.dtype, loc=ptr.loc))
                new = _emit(r.out, ir.OpStmt(op=Op.ADD, args=(old, value), dtype=ptr.dtype, loc=ptr.loc))
                r.out.append(ir.GlobalStore(ptr=ptr, value=new, loc=ptr.loc))
            else:
                r.out.append(ir.AtomicRMW(op=Op.ADD, ptr=ptr, value=value, dtype=ptr.dtype, loc=ptr.loc))

    # ---------------------------------------------------------------- replay

    def replay(self, stmts: Sequence[ir.Stmt], r: _Region, record: bool) -> None:
        """Recomputes `stmts`. With `record` (a region's own statements, swept next) an `if` snapshots
        the locals it reads or writes, and a loop the locals it only reads and pushes its carried ones
        on adstacks."""
        for s in stmts:
            self.replay_one(s, r, record)

    def replay_one(self, s: ir.Stmt, r: _Region, record: bool) -> None:
        em = r.out.append
        if isinstance(s, (ir.GlobalStore, ir.AtomicSwap, ir.Print, ir.Check)) or (isinstance(s, ir.RangeFor)
                                                                                  and s.parallel):
            return  # (a swap's old value is unused in a differentiated kernel: `check_reverse_supported`)
        if isinstance(s, ir.AtomicRMW):
            r.vmap[s] = _emit(r.out, ir.GlobalLoad(ptr=r.vmap[s.ptr], dtype=s.dtype, loc=s.loc))
            return
        if isinstance(s, ir.If):
            self.replay_if(s, r, record)
            return
        if isinstance(s, ir.RangeFor):
            self.replay_loop(s, r, record)
            return
        if isinstance(s, ir.While):
            self.replay_while(s, r, record)
            return
        new = _clone(s, r.vmap, {})
        r.vmap[s] = new
        em(new)
        if record and isinstance(s, ir.Alloca) and s.dtype.is_float:
            a = self.adj_var[s] = _emit(r.out, ir.Alloca(dtype=s.dtype, loc=s.loc))
            em(ir.LocalStore(var=a, value=_emit(r.out, ir.Const(dtype=s.dtype, value=0.0, loc=s.loc)), loc=s.loc))

    def replay_if(self, s: ir.If, r: _Region, record: bool) -> None:
        if record:  # the branches' replay in the sweep needs every local they touch as it is here
            self.snapshot(s, _outer_locals(s.then.stmts + s.else_.stmts, (ir.LocalStore, ir.LocalLoad)), r)
        kids = {}
        for name, blk in (("then", s.then), ("else_", s.else_)):
            sub = _Region(ChainMap({}, r.vmap), {}, [])
            self.replay(blk.stmts, sub, False)
            kids[name] = ir.Block(tuple(sub.out))
        r.out.append(replace(s, cond=r.vmap[s.cond], **kids))

    def snapshot(self, s: ir.Stmt, local_vars: Sequence[ir.Alloca], r: _Region) -> None:
        """Saves `local_vars` before `s` in the replay; `restore` puts them back before its sweep."""
        snaps = []
        for var in local_vars:
            snap = _emit(r.out, ir.Alloca(dtype=var.dtype, loc=s.loc))
            val = _emit(r.out, ir.LocalLoad(var=r.vmap[var], dtype=var.dtype, loc=s.loc))
            r.out.append(ir.LocalStore(var=snap, value=val, loc=s.loc))
            snaps.append((var, snap))
        r.snaps[s] = snaps

    def restore(self, s: ir.Stmt, r: _Region) -> None:
        for var, snap in r.snaps.get(s, ()):
            val = _emit(r.out, ir.LocalLoad(var=snap, dtype=var.dtype, loc=s.loc))
            r.out.append(ir.LocalStore(var=r.vmap[var], value=val, loc=s.loc))

    def replay_loop(self, s: ir.RangeFor, r: _Region, record: bool) -> None:
        """A serial loop with a dynamic trip count. Recorded: each iteration first pushes the locals
        it carries (written in the body, defined before it, read in it) on one adstack per local."""
        var = ir.LoopVar(dtype=s.var.dtype, name=s.var.name)
        sub = _Region(ChainMap({s.var: var}, r.vmap), {}, [])
        if record:
            self.snapshot(s, _read_only_locals(s), r)
            ids = self.loop_stacks[s] = [(v, self.new_stack(v, s)) for v in _carried_locals(s)]
            for v, k in ids:
                r.out.append(ir.AdStackAlloc(stack=k, loc=s.loc))
                val = _emit(sub.out, ir.LocalLoad(var=r.vmap[v], dtype=v.dtype, loc=s.loc))
                sub.out.append(ir.AdStackPush(stack=k, value=val, loc=s.loc))
        self.replay(s.body.stmts, sub, False)
        r.out.append(ir.RangeFor(var=var, begin=r.vmap[s.begin], end=r.vmap[s.end], body=ir.Block(tuple(sub.out)),
                                 parallel=False, loc=s.loc))

    def replay_while(self, s: ir.While, r: _Region, record: bool) -> None:
        """A `while` loop. Recorded: an iteration that passes the condition pushes its carried locals,
        and a counter counts the iterations for the sweep."""
        head, check, rest = split_while(s)
        sub = _Region(ChainMap({}, r.vmap), {}, [])
        ids: list[tuple[ir.Alloca, int]] = []
        if record:
            self.snapshot(s, _read_only_locals(s), r)
            ids = self.loop_stacks[s] = [(v, self.new_stack(v, s)) for v in _carried_locals(s)]
            cnt = self.while_count[s] = _emit(r.out, ir.Alloca(dtype=i32, loc=s.loc))
            r.out.append(ir.LocalStore(var=cnt, value=_emit(r.out, ir.Const(dtype=i32, value=0, loc=s.loc)), loc=s.loc))
            for _, k in ids:
                r.out.append(ir.AdStackAlloc(stack=k, loc=s.loc))
        self.replay(head, sub, False)
        sub.out.append(ir.If(cond=sub.vmap[check.cond], then=ir.Block((ir.Break(loc=check.loc),)), loc=check.loc))
        for v, k in ids:
            val = _emit(sub.out, ir.LocalLoad(var=r.vmap[v], dtype=v.dtype, loc=s.loc))
            sub.out.append(ir.AdStackPush(stack=k, value=val, loc=s.loc))
        self.replay(rest, sub, False)
        if record:
            em = rules.BlockEmitter(sub.out, s.loc)
            old = _emit(sub.out, ir.LocalLoad(var=cnt, dtype=i32, loc=s.loc))
            sub.out.append(ir.LocalStore(var=cnt, value=em.op(Op.ADD, (old, em.const(1, i32)), i32), loc=s.loc))
        r.out.append(ir.While(body=ir.Block(tuple(sub.out)), loc=s.loc))

    def new_stack(self, var: ir.Alloca, loop: ir.Stmt) -> int:
        if isinstance(loop, ir.While):
            if loop not in self.whiles:
                self.whiles.append(loop)
            return self.declare_stack(var, loop, sizing.SizeExpr("Counted", value=self.whiles.index(loop)))
        try:
            size = sizing.size_of_loop(loop, self.context, self.deriver)
        except sizing.SizeError as e:
            where = getattr(e.value, "loc", None) or loop.loc
            raise QuadrantsCompilationError(
                f"Cannot size the adstack of this loop for reverse mode: its trip count depends on {e.what}"
                f"{_where(where)}. Loop bounds in a differentiated kernel may use constants, kernel "
                f"arguments, ndarray shapes, integer field/ndarray reads, indices of enclosing loops and "
                f"locals assigned once from those; or set qd.init(ad_stack_size=N) to give every adstack "
                f"N slots{_where(loop.loc)}") from None
        return self.declare_stack(var, loop, size)

    def declare_stack(self, var: ir.Alloca, loop: ir.Stmt, size: sizing.SizeExpr) -> int:
        line = loop.loc.line if loop.loc else "?"
        self.stacks.append(ir.StackDecl(dtype=var.dtype, size=sizing.serialise(size), loc=loop.loc,
                                        name=f"{var.dtype} carried by the loop at line {line}"))
        return len(self.stacks) - 1

    # ---------------------------------------------------------------- sweep

    def acc(self, v: ir.Value, c: Any, r: _Region, loc: ir.SrcLoc | None) -> None:
        """Adds the contribution `c` (a Value or ZERO) to the adjoint of the original value `v`."""
        if c is ZERO or not v.dtype.is_float:
            return
        em = rules.BlockEmitter(r.out, loc)
        if c.dtype is not v.dtype:
            c = em.op(Op.CAST, (c,), v.dtype)
        if v in r.defined:
            r.adj[v] = rules.add(r.adj.get(v, ZERO), c, v.dtype, em)
        elif v in r.ext:
            a = r.ext[v]
            old = _emit(r.out, ir.LocalLoad(var=a, dtype=v.dtype, loc=loc))
            r.out.append(ir.LocalStore(var=a, value=em.op(Op.ADD, (old, c), v.dtype), loc=loc))

    def grad_ptr(self, p: ir.GlobalPtr, r: _Region) -> ir.GlobalPtr:
        idx = tuple(r.vmap.get(i, i) for i in p.indices)
        return _emit(r.out, ir.GlobalPtr(buffer=self.grad_of[p.buffer], indices=idx, dtype=p.dtype, loc=p.loc))

    def sweep(self, s: ir.Stmt, r: _Region) -> None:
        em = rules.BlockEmitter(r.out, s.loc)
        ct = r.adj.get(s, ZERO)
        if isinstance(s, ir.OpStmt) and ct is not ZERO:
            for a, c in zip(s.args, rules.cotangents(r.vmap[s], ct, em)):
                self.acc(a, c, r, s.loc)
        elif isinstance(s, ir.LocalLoad) and s.var in self.adj_var and ct is not ZERO:
            a = self.adj_var[s.var]
            old = _emit(r.out, ir.LocalLoad(var=a, dtype=s.dtype, loc=s.loc))
            r.out.append(ir.LocalStore(var=a, value=em.op(Op.ADD, (old, ct), s.dtype), loc=s.loc))
        elif isinstance(s, ir.LocalStore) and s.var in self.adj_var:
            a = self.adj_var[s.var]
            self.acc(s.value, _emit(r.out, ir.LocalLoad(var=a, dtype=s.var.dtype, loc=s.loc)), r, s.loc)
            r.out.append(ir.LocalStore(var=a, value=em.const(0.0, s.var.dtype), loc=s.loc))
        elif isinstance(s, ir.GlobalLoad) and s.ptr.buffer in self.grad_of and ct is not ZERO:
            key = (s.ptr.buffer, tuple(ir.index_key(r.vmap.get(i, i)) for i in s.ptr.indices))
            if key in r.pending:
                r.pending[key][1] = rules.add(r.pending[key][1], ct, s.dtype, em)
            else:
                r.pending[key] = [self.grad_ptr(s.ptr, r), ct]
        elif (isinstance(s, ir.GlobalStore) or (isinstance(s, ir.AtomicSwap) and s.expected is None)) \
                and s.ptr.buffer in self.grad_of and s.value.dtype.is_float:  # (an exchange is a store here)
            # loads of this very address after the store: their adjoint goes straight to the stored value
            same = r.pending.pop((s.ptr.buffer, tuple(ir.index_key(r.vmap.get(i, i)) for i in s.ptr.indices)), None)
            self.flush(r, s.ptr.buffer)
            gp = self.grad_ptr(s.ptr, r)
            g = _emit(r.out, ir.GlobalLoad(ptr=gp, dtype=s.ptr.dtype, loc=s.loc))
            self.acc(s.value, g if same is None else rules.add(g, same[1], g.dtype, em), r, s.loc)
            # the overwritten value does not reach the outputs: its adjoint is cleared (as Quadrants does)
            r.out.append(ir.GlobalStore(ptr=gp, value=em.const(0.0, s.ptr.dtype), loc=s.loc))
        elif (isinstance(s, ir.AtomicRMW) and s.ptr.buffer in self.grad_of and s.op in (Op.ADD, Op.SUB)
              and s.value.dtype.is_float):
            self.flush(r, s.ptr.buffer)
            g = _emit(r.out, ir.GlobalLoad(ptr=self.grad_ptr(s.ptr, r), dtype=s.ptr.dtype, loc=s.loc))
            self.acc(s.value, g if s.op is Op.ADD else em.op(Op.NEG, (g,), g.dtype), r, s.loc)
        elif isinstance(s, (ir.If, ir.RangeFor, ir.While)):
            self.flush(r)  # nested regions may read these grads
            self.sweep_nested(s, r)

    def sweep_nested(self, s: ir.Stmt, r: _Region) -> None:
        if isinstance(s, ir.If):
            self.sweep_if(s, r)
        elif isinstance(s, ir.RangeFor) and s.parallel:
            self.sweep_parallel(s, r)
        elif isinstance(s, ir.RangeFor):
            self.sweep_loop(s, r)
        elif isinstance(s, ir.While):
            self.sweep_while(s, r)

    def ext_allocas(self, stmts: Sequence[ir.Stmt], r: _Region, loc: ir.SrcLoc | None) -> dict:
        """Adjoint allocas (zeroed) for the float values of `r` that `stmts` read: a nested block
        accumulates into them; `flush_ext` adds them to `r` afterwards."""
        defined, used = _subtree(stmts)
        ext = {}
        for v in used - defined:
            if (isinstance(v, ir.Stmt) and not isinstance(v, ir.Alloca) and v.dtype.is_float
                    and (v in r.defined or v in r.ext)):
                a = ext[v] = _emit(r.out, ir.Alloca(dtype=v.dtype, loc=loc))
                r.out.append(ir.LocalStore(var=a, value=_emit(r.out, ir.Const(dtype=v.dtype, value=0.0)), loc=loc))
        return ext

    def flush_ext(self, ext: dict, r: _Region, loc: ir.SrcLoc | None) -> None:
        for v, a in ext.items():
            self.acc(v, _emit(r.out, ir.LocalLoad(var=a, dtype=v.dtype, loc=loc)), r, loc)

    def enter(self, loop: ir.RangeFor) -> None:
        self.loops.append(loop)
        self.context.append(loop)

    def leave(self) -> None:
        self.loops.pop()
        self.context.pop()

    def sweep_if(self, s: ir.If, r: _Region) -> None:
        """Restores the locals the branches write, then each branch replays and sweeps itself; values
        of this region used inside get an adjoint alloca around the `if`."""
        ext = self.ext_allocas(s.then.stmts + s.else_.stmts, r, s.loc)
        self.restore(s, r)
        self.context.append((s.cond, True))
        then = self.region(s.then.stmts, r.vmap, ext)
        self.context[-1] = (s.cond, False)
        else_ = self.region(s.else_.stmts, r.vmap, ext)
        self.context.pop()
        r.out.append(ir.If(cond=r.vmap[s.cond], then=ir.Block(tuple(then)), else_=ir.Block(tuple(else_)), loc=s.loc))
        self.flush_ext(ext, r, s.loc)

    def sweep_loop(self, s: ir.RangeFor, r: _Region) -> None:
        """Iterations in reverse: each pops the locals it started with, then replays and sweeps
        its body (the body's own loops record and drain their stacks inside)."""
        ext = self.ext_allocas(s.body.stmts, r, s.loc)
        self.restore(s, r)
        begin, end = r.vmap[s.begin], r.vmap[s.end]
        t = ir.LoopVar(dtype=s.var.dtype, name=s.var.name)
        out: list[ir.Stmt] = []
        em = rules.BlockEmitter(out, s.loc)
        dt = s.var.dtype
        last = em.op(Op.SUB, (em.op(Op.ADD, (begin, end), dt), em.const(1, dt)), dt)
        j = em.op(Op.SUB, (last, t), dt)  # begin + end - 1 - t
        for var, k in reversed(self.loop_stacks[s]):
            top = _emit(out, ir.AdStackLoadTop(stack=k, dtype=var.dtype, loc=s.loc))
            out.append(ir.AdStackPop(stack=k, loc=s.loc))
            out.append(ir.LocalStore(var=r.vmap[var], value=top, loc=s.loc))
        self.enter(s)
        out += self.region(s.body.stmts, ChainMap({s.var: j}, r.vmap), ext)
        self.leave()
        r.out.append(ir.RangeFor(var=t, begin=begin, end=end, body=ir.Block(tuple(out)), parallel=False, loc=s.loc))
        self.flush_ext(ext, r, s.loc)

    def sweep_while(self, s: ir.While, r: _Region) -> None:
        """The recorded number of iterations, in reverse: pop the carried locals, replay and sweep
        the body (the condition is not differentiable; every swept iteration passed it)."""
        head, _, rest = split_while(s)
        stmts = head + rest
        ext = self.ext_allocas(stmts, r, s.loc)
        self.restore(s, r)
        n = _emit(r.out, ir.LocalLoad(var=self.while_count[s], dtype=i32, loc=s.loc))
        zero = _emit(r.out, ir.Const(dtype=i32, value=0, loc=s.loc))
        out: list[ir.Stmt] = []
        for var, k in reversed(self.loop_stacks[s]):
            top = _emit(out, ir.AdStackLoadTop(stack=k, dtype=var.dtype, loc=s.loc))
            out.append(ir.AdStackPop(stack=k, loc=s.loc))
            out.append(ir.LocalStore(var=r.vmap[var], value=top, loc=s.loc))
        out += self.region(stmts, r.vmap, ext)
        r.out.append(ir.RangeFor(var=ir.LoopVar(dtype=i32, name="while"), begin=zero, end=n, body=ir.Block(tuple(out)),
                                 parallel=False, loc=s.loc))
        self.flush_ext(ext, r, s.loc)

    def sweep_parallel(self, s: ir.RangeFor, r: _Region) -> None:
        self.check_crossing(s, r)
        _check_cross_iteration(s, self.grad_of, self.forms)
        var = ir.LoopVar(dtype=s.var.dtype, name=s.var.name)
        self.enter(s)
        self.exclusive = _owned_buffers(s, self.grad_of)
        body = self.region(s.body.stmts, ChainMap({s.var: var}, r.vmap), {})
        self.exclusive = set()
        self.leave()
        r.out.append(ir.RangeFor(var=var, begin=r.vmap[s.begin], end=r.vmap[s.end], body=ir.Block(tuple(body)),
                                 parallel=True, loc=s.loc))

    def check_crossing(self, s: ir.RangeFor, r: _Region) -> None:
        """A float computed from differentiable data outside a parallel loop and read inside would
        need its adjoint summed across the loop's threads and tasks: refused, never dropped."""
        defined, used = _subtree(s.body.stmts)
        for v in used - defined:
            if isinstance(v, ir.Alloca):  # a local of the serial code: active if a store into it is
                hot = v.dtype.is_float and any(self.active(st.value) for st in self.stores.get(v, ()))
            else:
                hot = isinstance(v, ir.Stmt) and v.dtype.is_float and self.active(v)
            if hot and v in r.defined and any(isinstance(st, ir.LocalAtomic) for st in self.stores.get(v, ())):
                raise QuadrantsCompilationError(
                    f"kernel.grad: the local{_where(v.loc)} is reduced by the parallel loop{_where(s.loc)} from "
                    f"data with a gradient; qd cannot carry the gradient of a kernel-scope local across the loop's "
                    f"threads. Accumulate into a field or ndarray with a gradient instead (loss[None] += ...).")
            if hot and v in r.defined:
                raise QuadrantsCompilationError(
                    f"kernel.grad: a value computed outside the parallel loop{_where(v.loc)} is read inside "
                    f"it{_where(s.loc)} and depends on data with a gradient; qd cannot carry its gradient "
                    f"across the loop's threads. Compute it inside the loop.")


class _Activity:
    """Whether a value depends on a buffer with a grad (through operands and locals).

    A value is active when a load of a buffer with a grad reaches it through operands and through the stores of
    the locals it loads (loops make those edges cyclic). `__call__` explores the values `v` depends on that no
    earlier call settled, with an explicit stack (a kernel of thousands of chained statements, as Genesis'
    collision kernel, overflowed Python's recursion), then marks active what an active load reaches within them:
    the least fixpoint, exact whatever the order of the calls (a depth-first walk that took a value still being
    explored to be inactive settled it wrongly for good)."""

    def __init__(self, stores: dict, grad_buffers: set[int]) -> None:
        self.stores = stores
        self.grads = grad_buffers
        self.memo: dict = {}

    def _deps(self, v: ir.Value) -> list:
        if isinstance(v, ir.LocalLoad):
            return [st.value for st in self.stores.get(v.var, ())]
        if isinstance(v, ir.Stmt) and not isinstance(v, ir.GlobalLoad):
            return [a for a in v.operands() if a.dtype.is_float]
        return []

    def __call__(self, v: ir.Value) -> bool:
        hit = self.memo.get(v)
        if hit is not None:
            return hit
        users: dict = {}  # value -> the unsettled values that depend on it
        seen, stack, active = {v}, [v], []
        while stack:
            u = stack.pop()
            if isinstance(u, ir.GlobalLoad) and u.ptr.buffer in self.grads:
                active.append(u)
            for d in self._deps(u):
                known = self.memo.get(d)
                if known is None:
                    users.setdefault(d, []).append(u)
                    if d not in seen:
                        seen.add(d)
                        stack.append(d)
                elif known:
                    active.append(u)
        on = set(active)
        while active:  # what an active value reaches among the unsettled ones
            for u in users.get(active.pop(), ()):
                if u not in on:
                    on.add(u)
                    active.append(u)
        for u in seen:
            self.memo[u] = u in on
        return self.memo[v]


def _owned_buffers(s: ir.RangeFor, grad_of: dict) -> set[int]:
    """Buffers with a grad that parallel loop `s` reaches only at one index tuple containing its own
    variable (`x[i]`, `x[i, 2]`): iteration i alone touches those cells, so their grads accumulate
    without atomics."""
    seen: dict[int, tuple] = {}
    mixed: set[int] = set()
    for st in ir.walk(s.body):
        if isinstance(st, (ir.GlobalLoad, ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)) and st.ptr.buffer in grad_of:
            key = tuple(ir.index_key(i) for i in st.ptr.indices)
            if s.var not in key or seen.setdefault(st.ptr.buffer, key) != key:
                mixed.add(st.ptr.buffer)
    return set(seen) - mixed


def _check_cross_iteration(s: ir.RangeFor, grad_of: dict, forms: Forms) -> None:
    """A parallel loop whose iterations read a differentiable global at an index other than the one
    they write, both following the loop index (`out[i] = out[i - 1] + ...`), depends on the order of
    its iterations: no reverse sweep of the parallel loop is right, so it is refused (Quadrants'
    "Cross-iteration read-after-write"). An axis whose cells each iteration owns (`Forms.owned`: `i`,
    `r * (K + 1) + k` with k in range(K), `start[r] + k`) keeps the two apart; indices are seen through locals
    assigned once (`s = i`)."""
    stores, loads = [], []
    for st in ir.walk(s.body):
        if isinstance(st, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)) and st.ptr.buffer in grad_of:
            stores.append(st)
        elif isinstance(st, ir.GlobalLoad) and st.ptr.buffer in grad_of:
            loads.append(st)

    def crosses(a: tuple, b: tuple) -> bool:
        pairs = list(zip(a, b))
        if any(forms.owned(x, y, s) or forms.apart(x, y, s.var) for x, y in pairs):
            return False  # an axis pins both accesses to cells of the same iteration, or keeps them apart
        return any(not forms.same(x, y) and forms.depends(x, s.var) and forms.depends(y, s.var) for x, y in pairs)

    used = {a for st in ir.walk(s.body) for a in st.operands()}
    for ld in loads:
        if ld not in used:  # a value nothing reads (e.g. the old value of a vector atomic): no dependence
            continue
        for stt in stores:
            if ld.ptr.buffer == stt.ptr.buffer and crosses(ld.ptr.indices, stt.ptr.indices):
                raise QuadrantsCompilationError(
                    f"kernel.grad: Cross-iteration read-after-write on a global with a gradient: the parallel "
                    f"loop{_where(s.loc)} writes it{_where(stt.loc)} and reads it at another iteration's "
                    f"index{_where(ld.loc)}; its iterations run in any order, so the gradient is undefined. Nest "
                    f"the loop in an outer loop (it then runs serially with adstacks) or split it into kernels.")


def _carried_locals(s: ir.RangeFor) -> list[ir.Alloca]:
    """Locals defined before loop `s` that its body both writes and reads."""
    defined, _ = _subtree(s.body.stmts)
    read = {x.var for x in defined if isinstance(x, ir.LocalLoad)}
    return [v for v in _stored_locals(s.body.stmts) if v in read]


def _emit(out: list[ir.Stmt], s: ir.Stmt) -> Any:
    out.append(s)
    return s


def reverse(k: ir.KernelIR, grad_buffers: Sequence[int], adstack: bool = True,
            grad_args: Sequence[int] = ()) -> ir.KernelIR:
    """The reverse-mode version of the pre-offload kernel `k`. Buffer `grad_buffers[j]` gets its grad
    as buffer `len(k.buffers) + j` (a decl named `<name>.grad`), to be bound to `field.grad`. `grad_args`: the
    ndarray arguments whose gradients are launched as arguments, in that order after the kernel's own: the grad
    buffer of such an argument's buffer is bound to a new ndarray `ArgDecl` `<name>.grad` there."""
    if k.tasks is not None:
        raise ValueError("reverse() runs before the offload pass")
    grad_of = {b: len(k.buffers) + j for j, b in enumerate(grad_buffers)}
    decls = tuple(replace(k.buffers[b], name=k.buffers[b].name + ".grad") for b in grad_buffers)
    body = _Unroller(adstack).block(k.body, {})
    rev = _Reverse(k, body, grad_of)
    stmts = rev.region(body.stmts, {}, {})
    counter = counting_kernel(k, body, rev.whiles) if rev.whiles else None
    args, decls = _grad_arg_decls(k, grad_buffers, decls, grad_args)
    return replace(k, args=args, buffers=k.buffers + decls, body=ir.Block(tuple(stmts)), stacks=tuple(rev.stacks),
                   counter=counter)


def _grad_arg_decls(k: ir.KernelIR, grad_buffers: Sequence[int], decls: tuple,
                    grad_args: Sequence[int]) -> tuple[tuple, tuple]:
    """(the kernel's args with the `<name>.grad` ArgDecls of `grad_args` after them, the grad buffer decls bound
    to those): an argument of `grad_args` the kernel reads no buffer of keeps its place (None) only where a later
    one follows."""
    args: list = list(k.args)
    out = list(decls)
    nb, na = len(k.buffers), len(k.args)
    for j, b in enumerate(grad_buffers):
        if k.buffers[b].kind != "ndarray":
            continue
        src = k.args[k.buffers[b].arg]
        ai = na + list(grad_args).index(k.buffers[b].arg)
        while len(args) <= ai:
            args.append(None)
        args[ai] = ir.ArgDecl(name=f"{src.name}.grad", kind="ndarray", dtype=src.dtype, buffer=nb + j)
        out[j] = replace(out[j], arg=ai)
    return tuple(args), tuple(out)


__all__ = ["STACK_UNROLL_LIMIT", "reverse"]
