"""Local matrices indexed at run time, kept as arrays in memory: the plan a code generator follows (the LLVM one).

The frontend keeps a local matrix as one `Alloca` per entry. A runtime index reads through a select chain
(`select(i == 0, m0, select(i == 1, m1, ... m[n-1]))`: `qd.lang.matrix._choose`) and writes through one `If` per
entry (`if i == k: <the same statements on entry k>`: `AssignMixin._dyn_each`). Each entry then lives in a
register and each access touches all of them: with Genesis' contact clipping (16x3 and 17x2 matrices indexed in
loops) its CUDA task was 22,835 PTX instructions, 3,056 of them selects (Quadrants': 18,873 and 412; with this plan
18,534 and 674). Quadrants keeps such a matrix in local memory; with this plan the code generator does too, with
one address and one load or store per access.

`plan(blocks)` finds the chains of one generated function. Only an exact equivalent ever replaces an access; a
chain that does not match stays as the IR has it (a select or If chain, always correct):
- **a read**: a select chain over the loads of entries, the indices 0 .. n-2 compared in order and the last entry
  the default, whose loads sit in the chain's block with nothing between them and the chain that may write the
  group: `load a[i <u n-1 ? i : n-1]` (an index outside [0, n-1) picks the last entry, as the chain does);
- **a write**: a run of Ifs on `i == 0 .. n-1` in one block (no else, only ops between them) whose then-blocks are
  the same statements up to the entries they name (the entry k of each varying place in block k), and name no
  entry of a varying place unvaried: `if i <u n: <block 0, each varying place at a[base + i * stride]>`.
The entries the chains name are grouped (union-find). A group becomes an array when one chain names all its
entries, every other chain names an arithmetic progression of that order (a row or column of a matrix), its
entries share a dtype and there are at least `MIN_ENTRIES` of them (a short vector stays in registers, where its
chain costs a few selects).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from qd import ir
from qd.ops import Op
from qd.types.dtypes import DataType

MIN_ENTRIES = 8


@dataclass
class Place:
    """Where a chain's entries lie in their array: entry k at `base + k * stride`."""

    array: int
    base: int
    stride: int


@dataclass
class Read:
    index: ir.Value
    n: int
    place: Place


@dataclass
class Write:
    index: ir.Value
    n: int
    places: dict  # the block-0 entry of each varying place -> its Place


@dataclass
class Plan:
    arrays: list = field(default_factory=list)  # per array: (dtype, length)
    slots: dict = field(default_factory=dict)  # entry Alloca -> (array, position)
    reads: dict = field(default_factory=dict)  # chain root (OpStmt) -> Read
    writes: dict = field(default_factory=dict)  # first If of a run -> Write
    skip: set = field(default_factory=set)  # inner selects and later Ifs of planned chains


# ---------------------------------------------------------------- matching


def _compares(c: ir.Value) -> tuple[ir.Value, int] | None:
    """(i, k) when `c` is `i == k` for a runtime `i` and an integer constant `k`."""
    if not (isinstance(c, ir.OpStmt) and c.op is Op.CMP_EQ):
        return None
    a, b = c.args
    if isinstance(a, ir.Const):
        a, b = b, a
    if isinstance(a, ir.Const) or not isinstance(b, ir.Const) or type(b.value) is not int:
        return None
    return a, b.value


@dataclass
class _ReadChain:
    root: ir.OpStmt
    index: ir.Value
    loads: list
    inner: list


def _read_chain(root: ir.OpStmt) -> _ReadChain | None:
    m = _compares(root.args[0])
    if m is None or m[1] != 0:
        return None
    index, items, inner, s = m[0], [], [], root
    while True:
        items.append(s.args[1])
        nxt = s.args[2]
        m = _compares(nxt.args[0]) if isinstance(nxt, ir.OpStmt) and nxt.op is Op.SELECT else None
        if m is None or m[0] is not index or m[1] != len(items):
            items.append(nxt)
            break
        inner.append(nxt)
        s = nxt
    if not all(isinstance(x, ir.LocalLoad) and x.dtype == root.dtype for x in items):
        return None
    if len({id(x.var) for x in items}) != len(items):
        return None
    return _ReadChain(root, index, items, inner)


@dataclass
class _WriteRun:
    ifs: list
    index: ir.Value
    varying: dict  # block-0 entry -> [entry in block k for each k]


class _Mismatch(Exception):
    pass


class _Iso:
    """Compares then-block k with then-block 0 (`same`), collecting the varying places."""

    def __init__(self, varying: dict, k: int) -> None:
        self.varying, self.k = varying, k
        self.inner: dict = {}  # a value made in block k -> its twin in block 0
        self.fixed: set = set()  # Allocas named alike in both blocks

    def same(self, b0: ir.Block, bk: ir.Block) -> None:
        if len(b0.stmts) != len(bk.stmts):
            raise _Mismatch
        for s0, sk in zip(b0.stmts, bk.stmts):
            if type(s0) is not type(sk):
                raise _Mismatch
            for f in fields(s0):
                if f.name != "loc":
                    self.field(s0, f.name, getattr(s0, f.name), getattr(sk, f.name))
            if isinstance(s0, ir.Value):
                self.inner[sk] = s0

    def field(self, s0: ir.Stmt, name: str, v0: object, vk: object) -> None:
        if isinstance(v0, ir.Block):
            if not isinstance(vk, ir.Block):
                raise _Mismatch
            self.same(v0, vk)
        elif isinstance(v0, tuple):
            if not isinstance(vk, tuple) or len(v0) != len(vk):
                raise _Mismatch
            for a, b in zip(v0, vk):
                self.field(s0, name, a, b)
        elif isinstance(v0, ir.Alloca) and vk is not v0 and self.inner.get(vk) is not v0:
            if name != "var" or not isinstance(s0, (ir.LocalLoad, ir.LocalStore)) or not isinstance(vk, ir.Alloca):
                raise _Mismatch
            seen = self.varying.setdefault(v0, [v0])
            if len(seen) == self.k:
                seen.append(vk)
            elif len(seen) != self.k + 1 or seen[self.k] is not vk:
                raise _Mismatch
        elif isinstance(v0, ir.Value):
            if vk is not v0 and self.inner.get(vk) is not v0:
                raise _Mismatch
            if isinstance(v0, ir.Alloca):
                self.fixed.add(v0)
        elif v0 != vk:
            raise _Mismatch


def _write_run(stmts: list, start: int) -> tuple[_WriteRun | None, int]:
    """The run of Ifs starting at `stmts[start]` (an If on `i == 0`), and the position after its last If."""
    index = _compares(stmts[start].cond)[0]
    ifs, last, j = [stmts[start]], start, start + 1
    while j < len(stmts):
        t = stmts[j]
        if isinstance(t, ir.If):
            m = _compares(t.cond)
            if m is None or m[0] is not index or m[1] != len(ifs) or t.else_.stmts:
                break
            ifs.append(t)
            last = j
        elif not isinstance(t, (ir.Const, ir.OpStmt)):
            break
        j += 1
    if len(ifs) < 2:
        return None, last + 1
    varying: dict = {}
    fixed: set = set()
    try:
        for k, t in enumerate(ifs[1:], 1):
            iso = _Iso(varying, k)
            iso.same(ifs[0].then, t.then)
            fixed |= iso.fixed
    except _Mismatch:
        return None, last + 1
    n = len(ifs)
    if not varying or any(len(v) != n or len({id(a) for a in v}) != n for v in varying.values()) \
            or fixed & varying.keys():
        return None, last + 1
    return _WriteRun(ifs, index, varying), last + 1


# ---------------------------------------------------------------- the plan


class _Scan:
    """One pass over the function's statements: positions and chains (then, where there are chains, the uses of
    their inner selects: `count_uses`)."""

    def __init__(self) -> None:
        self.where: dict = {}  # statement -> (its block, its position)
        self.uses: dict = {}  # inner select -> how many operands name it
        self.reads: list[_ReadChain] = []
        self.writes: list[_WriteRun] = []

    def count_uses(self, blocks: tuple) -> None:
        inner = {s for c in self.reads for s in c.inner}
        if not inner:
            return
        for blk in blocks:
            for s in ir.walk(blk):
                for v in s.operands():
                    if v in inner:
                        self.uses[v] = self.uses.get(v, 0) + 1

    def block(self, blk: ir.Block) -> None:
        stmts = blk.stmts
        run_end = 0
        for pos, s in enumerate(stmts):
            self.where[s] = (blk, pos)
            if isinstance(s, ir.OpStmt) and s.op is Op.SELECT:
                chain = _read_chain(s)
                if chain is not None:
                    self.reads.append(chain)
            elif isinstance(s, ir.If) and pos >= run_end and not s.else_.stmts:
                m = _compares(s.cond)
                if m is not None and m[1] == 0:
                    run, run_end = _write_run(stmts, pos)
                    if run is not None:
                        self.writes.append(run)
            for kid in s.blocks():
                self.block(kid)


def _groups(lists: list[list]) -> dict:
    """Union-find over the entries the access lists name: entry -> its group's root entry."""
    parent: dict = {}

    def find(a: ir.Alloca) -> ir.Alloca:
        while parent.setdefault(a, a) is not a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for entries in lists:
        r = find(entries[0])
        for a in entries[1:]:
            ra = find(a)
            if ra is not r:
                parent[ra] = r
    return {a: find(a) for a in list(parent)}


def _layout(lists: list[list]) -> dict | None:
    """Entry -> position in the group's array: the order of a list naming every entry, when each list is an
    arithmetic progression of it; None otherwise."""
    members = {id(a) for entries in lists for a in entries}
    full = next((entries for entries in lists if len(entries) == len(members)), None)
    if full is None or len(full) < MIN_ENTRIES or len({a.dtype for a in full}) != 1:
        return None
    pos = {a: p for p, a in enumerate(full)}
    for entries in lists:
        p = [pos[a] for a in entries]
        stride = p[1] - p[0]
        if stride <= 0 or any(q != p[0] + k * stride for k, q in enumerate(p)):
            return None
    return pos


def _writes_to(s: ir.Stmt, group: set) -> bool:
    """Statement `s` (or one nested in it) may write an entry of `group`."""
    for x in ir.walk(ir.Block((s,))):
        if isinstance(x, (ir.LocalStore, ir.LocalAtomic)) and x.var in group:
            return True
    return False


def _read_is_current(chain: _ReadChain, scan: _Scan, group: set) -> bool:
    """Every load of `chain` sits in the chain's block, before it, with no write to `group` in between: then the
    array holds, at the chain, what the loads read."""
    blk, at = scan.where[chain.root]
    first = at
    for x in chain.loads:
        b, p = scan.where.get(x, (None, -1))
        if b is not blk or p >= at:
            return False
        first = min(first, p)
    return not any(_writes_to(s, group) for s in blk.stmts[first:at])


def plan(*blocks: ir.Block) -> Plan:
    """The arrays and the planned accesses of one generated function made of `blocks` (see the module docstring)."""
    scan = _Scan()
    for blk in blocks:
        scan.block(blk)
    out = Plan()
    if not scan.reads and not scan.writes:
        return out
    scan.count_uses(blocks)
    lists = [[x.var for x in c.loads] for c in scan.reads] + [v for w in scan.writes for v in w.varying.values()]
    root_of = _groups(lists)
    by_group: dict = {}
    for entries in lists:
        by_group.setdefault(root_of[entries[0]], []).append(entries)
    members: dict = {}  # group root -> the set of its entries, for planned groups
    for root, group_lists in by_group.items():
        pos = _layout(group_lists)
        if pos is None:
            continue
        array = len(out.arrays)
        dtype: DataType = next(iter(pos)).dtype
        out.arrays.append((dtype, len(pos)))
        for a, p in pos.items():
            out.slots[a] = (array, p)
        members[root] = set(pos)

    def place(entries: list) -> Place:
        array, base = out.slots[entries[0]]
        return Place(array, base, out.slots[entries[1]][1] - base)

    chains = {}
    for c in scan.reads:
        group = members.get(root_of[c.loads[0].var])
        if group is None or not _read_is_current(c, scan, group):
            continue
        out.reads[c.root] = Read(c.index, len(c.loads), place([x.var for x in c.loads]))
        chains[c.root] = c
        out.skip.update(s for s in c.inner if scan.uses.get(s, 0) == 1)
    runs = {}
    for w in scan.writes:
        if any(root_of[v[0]] not in members for v in w.varying.values()):
            continue
        out.writes[w.ifs[0]] = Write(w.index, len(w.ifs), {a0: place(v) for a0, v in w.varying.items()})
        runs[w.ifs[0]] = w
        out.skip.update(w.ifs[1:])
    for w in list(runs.values()):
        _unplan_inside(out, w, chains, runs)
    return out


def _unplan_inside(out: Plan, w: _WriteRun, chains: dict, runs: dict) -> None:
    """Drops the planned chains inside run `w`'s block 0 that name one of its varying places: block 0 stands for
    every block of the run there, and those chains' entries change with the run's index."""
    keys = w.varying.keys()
    for s in ir.walk(w.ifs[0].then):
        c = chains.get(s)
        if c is not None and s in out.reads and any(x.var in keys for x in c.loads):
            del out.reads[s]
            out.skip.difference_update(c.inner)
        inner = runs.get(s)
        if inner is not None and s in out.writes and any(a in keys for v in inner.varying.values() for a in v):
            del out.writes[s]
            out.skip.difference_update(inner.ifs[1:])

    return out


__all__ = ["MIN_ENTRIES", "Place", "Plan", "Read", "Write", "plan"]
