"""Offloading (the `offload` pass): split a kernel's top-level block into `Task`s.

Each top-level `RangeFor(parallel=True)` becomes a range task whose prologue computes begin/end;
the other top-level statements between them form serial tasks (empty ones are skipped). The body
is kept; `KernelIR.tasks` is set.

Values that cross tasks:
- cheap pure values (`Const`, `ArgLoad`, `ExternalShape`, `OpStmt` trees over those) are not
  placed in any task: each task that uses one gets its own clone (range tasks: in the prologue);
- a top-level `Alloca` used by one task only moves into that task (range tasks: body start);
  used by several it becomes a temp slot: zero-initialised where it was declared, and every
  `LocalLoad`/`LocalStore` turns into `GlobalLoad`/`GlobalStore` through the slot;
- any other value used by another task is stored to a temp slot right after its definition and
  loaded once at the start of each using task (range tasks: in the prologue);
- a `GraphDoWhile`'s body statements are top-level statements too (its start and end close a segment); the
  loop becomes a `TaskLoop` over the tasks made of its body (`KernelIR.task_loops`), which the launchers repeat;
- a `LocalAtomic` (a kernel-scope local's `+=` & co. in a parallel loop) becomes an `AtomicRMW` on the
  local's slot; a kernel-scope local that a parallel loop reads and then stores without an atomic gets
  a race warning (DESIGN §4).

Temp layout: one `BufferDecl(kind='temp', dtype=D, shape=(n,), ndim=1, name='offload_temp_D')` per dtype D
that needs slots (so every slot keeps its exact dtype and no casts are needed), appended to
`KernelIR.buffers`; a slot is `GlobalPtr(temp, (Const(i32, slot),))`. The runtime allocates each
temp buffer per launch.

Before:                                  After (tasks):
    %0 = arg_load 0 : i32                    task serial {
    %1 = alloca f32                            %a = const i32 0
    %2 = global_ptr @0 [] : f32                %b = global_ptr @1 [%a] : f32
    %3 = global_load %2 : f32                  %c = const f32 0x0.0p+0
    local_store %1, %3                         global_store %b, %c          (zero-init %1)
    %4 = const i32 0                           %2 = global_ptr @0 [] : f32
    parallel for %i0 in %4 .. %0 {             %3 = global_load %2 : f32
      %5 = local_load %1 : f32                 %d = const i32 0
      ...                                      %e = global_ptr @1 [%d] : f32
    }                                          global_store %e, %3
    parallel for %i1 in %4 .. %0 {           }
      local_store %1, ...                    task range %i0 { prologue { %4' = const i32 0
    }                                          %0' = arg_load 0 : i32 } bounds %4' .. %0'
                                               body { %f = const i32 0
                                                 %g = global_ptr @1 [%f] : f32
                                                 %5 = global_load %g : f32 ... } }
                                             task range %i1 { ... global_store ... }
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace

from qd import ir
from qd.ir import remap_operands
from qd.errors import QuadrantsWarning
from qd.types.dtypes import DataType, i32


@dataclass
class _Seg:
    kind: str  # 'serial' or 'range'
    stmts: list = field(default_factory=list)
    loop: ir.RangeFor | None = None


def _cheap(top: tuple[ir.Stmt, ...]) -> set:
    out: set = set()
    for s in top:
        if isinstance(s, (ir.Const, ir.ArgLoad, ir.ExternalShape)):
            out.add(s)
        elif isinstance(s, ir.OpStmt) and all(a in out for a in s.args):
            out.add(s)
    return out


def _flatten(stmts: tuple[ir.Stmt, ...], out: list) -> list:
    """The top-level statements in order, those of `GraphDoWhile` bodies included (the loops themselves left out)."""
    for s in stmts:
        if isinstance(s, ir.GraphDoWhile):
            _flatten(s.body.stmts, out)
        else:
            out.append(s)
    return out


def _segments(top: tuple[ir.Stmt, ...], cheap: set) -> tuple[list[_Seg], dict, list]:
    """Segments in order, the segment index of every top-level non-cheap statement, and each `GraphDoWhile` as
    (first segment, end segment, condition buffer), outer loops first. A loop's body starts and ends segments."""
    segs, seg_of, loops = [_Seg("serial")], {}, []

    def run(stmts: tuple[ir.Stmt, ...]) -> None:
        for s in stmts:
            if isinstance(s, ir.GraphDoWhile):
                segs.append(_Seg("serial"))
                at = len(loops)
                loops.append([len(segs) - 1, 0, s.cond])
                run(s.body.stmts)
                segs.append(_Seg("serial"))
                loops[at][1] = len(segs) - 1
            elif isinstance(s, ir.RangeFor) and s.parallel:
                segs.append(_Seg("range", [s], s))
                seg_of[s] = len(segs) - 1
                segs.append(_Seg("serial"))
            elif s not in cheap:
                segs[-1].stmts.append(s)
                seg_of[s] = len(segs) - 1

    run(top)
    return segs, seg_of, loops


def _users(segs: list[_Seg]) -> dict:
    """For every value, the set of segment indices whose statements use it."""
    users: dict = {}
    for j, seg in enumerate(segs):
        for s in seg.stmts:
            for t in ir.walk(ir.Block((s,))):
                for v in t.operands():
                    users.setdefault(v, set()).add(j)
    return users


class _Slots:
    """Temp slots: one temp buffer per dtype, appended after the kernel's buffers."""

    def __init__(self, n_buffers: int) -> None:
        self.base = n_buffers
        self.by_dtype: dict[DataType, list] = {}
        self.slot: dict = {}

    def add(self, v: ir.Value) -> None:
        lst = self.by_dtype.setdefault(v.dtype, [])
        self.slot[v] = (self.base + list(self.by_dtype).index(v.dtype), len(lst))
        lst.append(v)

    def ptr(self, v: ir.Value, loc: ir.SrcLoc | None) -> list[ir.Stmt]:
        buf, i = self.slot[v]
        c = ir.Const(dtype=i32, value=i, loc=loc)
        return [c, ir.GlobalPtr(buffer=buf, indices=(c,), dtype=v.dtype, loc=loc)]

    def buffers(self) -> tuple[ir.BufferDecl, ...]:
        return tuple(ir.BufferDecl("temp", dt, shape=(len(vs),), ndim=1, name=f"offload_temp_{dt.name}")
                     for dt, vs in self.by_dtype.items())


class _Offloader:
    def __init__(self, k: ir.KernelIR) -> None:
        top = tuple(_flatten(k.body.stmts, []))
        self.top = top
        self.cheap = _cheap(top)
        self.segs, self.seg_of, self.loops = _segments(k.body.stmts, self.cheap)
        self.users = _users(self.segs)
        self.slots = _Slots(len(k.buffers))
        self.shared: set = set()
        self.home: dict = {}  # non-shared Alloca -> the one segment that uses it
        self.exported: set = set()
        self._classify()

    def _classify(self) -> None:
        for s in self.top:
            if s in self.cheap or not isinstance(s, ir.Value):
                continue
            used = self.users.get(s, set())
            if isinstance(s, ir.Alloca):
                if len(used) > 1:
                    self.shared.add(s)
                    self.slots.add(s)
                elif used:
                    self.home[s] = next(iter(used))
            elif used - {self.seg_of[s]}:
                self.exported.add(s)
                self.slots.add(s)

    # -------------------------------------------------------------- per task

    def _imports(self, j: int, mapping: dict) -> list[ir.Stmt]:
        """Clones of cheap values and loads of exported values that segment `j` uses."""
        pre: list[ir.Stmt] = []
        for s in self.top:
            if j not in self.users.get(s, ()):
                continue
            if s in self.cheap:
                self._clone(s, mapping, pre)
            elif s in self.exported and self.seg_of[s] != j:
                ptr = self.slots.ptr(s, s.loc)
                load = ir.GlobalLoad(ptr=ptr[-1], dtype=s.dtype, loc=s.loc)
                pre += ptr + [load]
                mapping[s] = load
        return pre

    def _clone(self, s: ir.Stmt, mapping: dict, pre: list) -> None:
        if s in mapping:
            return
        for a in s.operands():
            self._clone(a, mapping, pre)
        c = replace(remap_operands(s, mapping))
        mapping[s] = c
        pre.append(c)

    def _locals(self, j: int) -> list[ir.Stmt]:
        return [s for s in self.top if self.home.get(s) == j]

    def rewrite(self, block: ir.Block, mapping: dict) -> ir.Block:
        """`block` renamed through `mapping`, shared allocas turned into temp-slot accesses."""
        out: list[ir.Stmt] = []
        for s in block.stmts:
            if isinstance(s, ir.LocalAtomic):
                out += self._local_atomic(s, mapping)
                continue
            if isinstance(s, (ir.LocalLoad, ir.LocalStore)) and s.var in self.shared:
                ptr = self.slots.ptr(s.var, s.loc)
                if isinstance(s, ir.LocalLoad):
                    ns = ir.GlobalLoad(ptr=ptr[-1], dtype=s.dtype, loc=s.loc)
                    mapping[s] = ns
                else:
                    ns = ir.GlobalStore(ptr=ptr[-1], value=mapping.get(s.value, s.value), loc=s.loc)
                out += ptr + [ns]
                continue
            kids = {n: self.rewrite(getattr(s, n), mapping) for n in ir.block_fields(type(s))}
            ns = remap_operands(replace(s, **kids) if kids else s, mapping)
            if ns is not s:
                mapping[s] = ns
            out.append(ns)
        return ir.Block(tuple(out))

    def _local_atomic(self, s: ir.LocalAtomic, mapping: dict) -> list[ir.Stmt]:
        """A shared local's atomic update is an `AtomicRMW` on its temp slot (a reduction the backends
        recognise); a local that moved into this task alone is updated by load, op, store."""
        value = mapping.get(s.value, s.value)
        if s.var in self.shared:
            ptr = self.slots.ptr(s.var, s.loc)
            ns = ir.AtomicRMW(op=s.op, ptr=ptr[-1], value=value, dtype=s.dtype, loc=s.loc)
            mapping[s] = ns
            return ptr + [ns]
        old = ir.LocalLoad(var=s.var, dtype=s.dtype, loc=s.loc)
        new = ir.OpStmt(op=s.op, args=(old, value), dtype=s.dtype, loc=s.loc)
        mapping[s] = old
        return [old, new, ir.LocalStore(var=s.var, value=new, loc=s.loc)]

    def warn_races(self, loop: ir.RangeFor) -> None:
        """A kernel-scope local that a parallel loop both reads and stores without an atomic (`s = s + x`,
        `if x > m: m = x`) is a data race, as in Quadrants: qd compiles it the same way and says so."""
        loads = {s.var for s in ir.walk(loop.body) if isinstance(s, ir.LocalLoad) and s.var in self.shared}
        for st in ir.walk(loop.body):
            if isinstance(st, ir.LocalStore) and st.var in loads:
                loads.discard(st.var)
                _warn_race(st, loop)

    def _serial_stmt(self, s: ir.Stmt, mapping: dict) -> list[ir.Stmt]:
        if isinstance(s, ir.Alloca):
            if s not in self.shared:
                return []
            ptr = self.slots.ptr(s, s.loc)
            zero = ir.Const(dtype=s.dtype, value=0.0 if s.dtype.is_float else 0, loc=s.loc)
            return ptr + [zero, ir.GlobalStore(ptr=ptr[-1], value=zero, loc=s.loc)]
        out = list(self.rewrite(ir.Block((s,)), mapping).stmts)
        if s in self.exported:
            ptr = self.slots.ptr(s, s.loc)
            out += ptr + [ir.GlobalStore(ptr=ptr[-1], value=mapping.get(s, s), loc=s.loc)]
        return out

    def serial_task(self, j: int) -> ir.Task | None:
        seg = self.segs[j]
        if all(isinstance(s, ir.Alloca) and s not in self.shared for s in seg.stmts):
            return None
        mapping: dict = {}
        body = self._imports(j, mapping) + self._locals(j)
        for s in seg.stmts:
            body += self._serial_stmt(s, mapping)
        loc = next((s.loc for s in seg.stmts if s.loc is not None), None)
        return ir.Task(kind="serial", body=ir.Block(tuple(body)), loc=loc)

    def range_task(self, j: int) -> ir.Task:
        loop = self.segs[j].loop
        self.warn_races(loop)
        mapping: dict = {}
        prologue = self._imports(j, mapping)
        body = self._locals(j) + list(self.rewrite(loop.body, mapping).stmts)
        return ir.Task(kind="range", body=ir.Block(tuple(body)), var=loop.var,
                       prologue=ir.Block(tuple(prologue)), begin=mapping.get(loop.begin, loop.begin),
                       end=mapping.get(loop.end, loop.end), loc=loop.loc, block_dim=loop.block_dim)

    def tasks(self) -> tuple[tuple[ir.Task, ...], tuple[ir.TaskLoop, ...]]:
        """The tasks, and the `GraphDoWhile` loops over them (segment ranges become task ranges)."""
        out, first_task = [], []
        for j, seg in enumerate(self.segs):
            first_task.append(len(out))
            t = self.serial_task(j) if seg.kind == "serial" else self.range_task(j)
            if t is not None:
                out.append(t)
        first_task.append(len(out))
        loops = tuple(ir.TaskLoop(first_task[a], first_task[e], cond) for a, e, cond in self.loops)
        return tuple(out), loops


_RACE_WARNINGS: dict = {}  # warnings' registry: one warning per source line, however often it is compiled


def _warn_race(store: ir.LocalStore, loop: ir.RangeFor) -> None:
    name = (store.var.loc.var if store.var.loc is not None else "") or "a local"
    at = store.loc if store.loc is not None else loop.loc
    file, line = (at.file, at.line) if at is not None else ("<kernel>", 0)
    loop_line = f" (line {loop.loc.line})" if loop.loc is not None else ""
    warnings.warn_explicit(
        f"kernel-scope local '{name}' is read and then stored by every iteration of the parallel loop{loop_line} "
        f"without an atomic: the iterations race and the result depends on their timing. Use an augmented "
        f"assignment ('{name} += ...', atomic in a parallel loop), qd.atomic_min/atomic_max, or a local "
        f"declared inside the loop.", QuadrantsWarning, file, line, registry=_RACE_WARNINGS)


def offload(k: ir.KernelIR) -> ir.KernelIR:
    """`k` with `tasks` set (see the module docstring); an offloaded kernel is returned as is."""
    if k.tasks is not None:
        return k
    off = _Offloader(k)
    tasks, loops = off.tasks()
    return replace(k, tasks=tasks, buffers=k.buffers + off.slots.buffers(), task_loops=loops)
