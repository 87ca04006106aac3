"""qd's typed IR: frozen dataclasses, structured control flow, SSA values inside blocks.

Values are statements referenced by identity (`eq=False`); mutable locals are `Alloca` +
`LocalLoad`/`LocalStore`. Vectors and matrices never appear: the frontend unrolls them.
Globals are reached through `GlobalPtr(buffer, indices)`, where `buffer` indexes the kernel's
`buffers` table (fields, ndarray arguments, the per-launch temp buffer), so the IR holds no
Python objects and its text form (`qd/ir_text.py`) round-trips.

A kernel's body is one `Block`. The offload pass (`qd/passes/offload.py`) splits it into `Task`s:
each top-level `RangeFor` becomes a parallel range task, the statements between them serial tasks.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Iterator

from qd.ops import Op
from qd.types.dtypes import DataType, i32, i64

# ------------------------------------------------------------------ source locations


@dataclass(frozen=True)
class SrcLoc:
    """A source position. `stack` (the call sites of the inlined `@qd.func`s it lies in, outermost
    first) and `var` (the source name of the local an `Alloca` holds, `v[1]` for a vector component)
    are debugger metadata (`qd/debug/`): never compared, not part of the IR text."""

    file: str
    line: int
    col: int = 0
    func: str = ""
    stack: tuple["SrcLoc", ...] = field(default=(), compare=False)
    var: str = field(default="", compare=False)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


# ------------------------------------------------------------------ base classes

_ids = itertools.count()
_SPECIALISED = False  # this module's statement classes have their own `blocks` (set at the end of the module)


@dataclass(frozen=True, eq=False, kw_only=True)
class Stmt:
    """Base of every statement. `loc` is for messages and line tables; never compared."""

    loc: SrcLoc | None = field(default=None, compare=False, repr=False)

    def operands(self) -> tuple["Value", ...]:
        """The values this statement reads (not including nested blocks)."""
        out: list[Value] = []
        for name in operand_fields(type(self)):
            v = getattr(self, name)
            if isinstance(v, Value):
                out.append(v)
            elif isinstance(v, tuple):
                out.extend(x for x in v if isinstance(x, Value))
        return tuple(out)

    def blocks(self) -> tuple["Block", ...]:
        """The nested blocks (this module's classes get a faster one of their own: `_blocks_getter`)."""
        names = block_fields(type(self))
        return tuple(getattr(self, n) for n in names) if names else ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if _SPECIALISED:  # a statement class made outside this module: the generic `blocks`, never its base's
            cls.blocks = Stmt.blocks


# a statement class's field names: `dataclasses.fields` per call was a third of Genesis' warm build (`walk`)
_FIELD_NAMES: dict = {}
_BLOCK_FIELDS: dict = {}  # a statement class's fields declared `Block` (`If.then`, `RangeFor.body`, ...)


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


# field types that never hold an operand: a statement's other fields are searched for Values
_NOT_OPERANDS = frozenset({"Block", "DataType", "Op", "SrcLoc | None", "bool", "int", "int | float", "str",
                           "tuple[str, ...]"})
_OPERAND_FIELDS: dict = {}


def operand_fields(cls: type) -> tuple[str, ...]:
    """The names of a statement class's fields that may hold an operand (a Value, or a tuple holding some):
    `operands` and `remap_operands` read only those (every field's type checked per call was a tenth of a
    Genesis build's frontend)."""
    names = _OPERAND_FIELDS.get(cls)
    if names is None:
        names = _OPERAND_FIELDS[cls] = tuple(f.name for f in fields(cls) if str(f.type) not in _NOT_OPERANDS)
    return names


def block_fields(cls: type) -> tuple[str, ...]:
    """The names of a statement class's fields that hold a nested `Block`."""
    names = _BLOCK_FIELDS.get(cls)
    if names is None:
        names = _BLOCK_FIELDS[cls] = tuple(f.name for f in fields(cls) if f.type in ("Block", Block))
    return names


class Value:
    """Mixin: a statement (or loop variable) that produces a value of `self.dtype`."""

    dtype: DataType


# ------------------------------------------------------------------ values


@dataclass(frozen=True, eq=False, kw_only=True)
class Const(Stmt, Value):
    dtype: DataType
    value: int | float


@dataclass(frozen=True, eq=False, kw_only=True)
class ArgLoad(Stmt, Value):
    """Scalar kernel argument number `index` (into `KernelIR.args`)."""

    index: int
    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class OpStmt(Stmt, Value):
    """An op of `qd/ops.py` applied to `args` (arity from the op table); `dtype` is the result."""

    op: Op
    args: tuple[Value, ...]
    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class Alloca(Stmt, Value):
    """A mutable scalar local, zero-initialised."""

    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class LocalLoad(Stmt, Value):
    var: Alloca
    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class LocalStore(Stmt):
    var: Alloca
    value: Value


@dataclass(frozen=True, eq=False, kw_only=True)
class GlobalPtr(Stmt, Value):
    """Address of element `indices` (C order over shape + element shape) of buffer `buffer`."""

    buffer: int
    indices: tuple[Value, ...]
    dtype: DataType  # element dtype of the buffer


@dataclass(frozen=True, eq=False, kw_only=True)
class GlobalLoad(Stmt, Value):
    """`*ptr`. `volatile` (`qd.volatile_load`): read from memory every time it runs, never cached, hoisted out
    of a loop or merged with another read (a relaxed atomic load on LLVM tiers, a `Volatile` access on SPIR-V,
    a `volatile` pointer in OpenCL C): a spin-wait sees the writes of other threads."""

    ptr: GlobalPtr
    dtype: DataType
    volatile: bool = False


@dataclass(frozen=True, eq=False, kw_only=True)
class GlobalStore(Stmt):
    ptr: GlobalPtr
    value: Value


@dataclass(frozen=True, eq=False, kw_only=True)
class AtomicRMW(Stmt, Value):
    """Atomically `*ptr = op(*ptr, value)`; yields the old value. `op` is one of `ops.ATOMIC`."""

    op: Op
    ptr: GlobalPtr
    value: Value
    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class AtomicSwap(Stmt, Value):
    """Atomically writes `value` into `*ptr` (`qd.atomic_exchange`), or, with `expected` set, only where `*ptr`
    equals it (`qd.atomic_cas`, integers only); yields the old value either way. 32- and 64-bit dtypes."""

    ptr: GlobalPtr
    value: Value
    dtype: DataType
    expected: Value | None = None


@dataclass(frozen=True, eq=False, kw_only=True)
class LocalAtomic(Stmt, Value):
    """Atomically `var = op(var, value)` on a kernel-scope local, inside a parallel loop; yields the old value.

    The frontend emits it for an augmented assignment (`s += v`, `-= *= &= |= ^=`) or a `qd.atomic_*` call
    on a local defined outside the parallel loop it runs in: Quadrants makes those atomic, so `s` is a
    reduction, not a race. It exists only before offloading: `offload` turns it into an `AtomicRMW` on the
    local's temp slot (the local is shared between tasks) or into load/op/store (the local moved into one
    task). `op` is one of `ops.ATOMIC`."""

    op: Op
    var: Alloca
    value: Value
    dtype: DataType


@dataclass(frozen=True, eq=False, kw_only=True)
class ExternalShape(Stmt, Value):
    """Extent of axis `axis` of an ndarray buffer, read at launch time."""

    buffer: int
    axis: int
    dtype: DataType = i32


@dataclass(frozen=True, eq=False, kw_only=True)
class RandomValue(Stmt, Value):
    """A counter-based random number: floats uniform in [0, 1), ints uniform over the dtype."""

    dtype: DataType


@dataclass(frozen=True, eq=False)
class LoopVar(Value):
    """The index of a `RangeFor` (a block argument; not a statement of any block)."""

    dtype: DataType = i32
    name: str = ""
    uid: int = field(default_factory=lambda: next(_ids), compare=False, repr=False)


@dataclass(frozen=True, eq=False, kw_only=True)
class ThreadSlot(Stmt, Value):
    """The index of the worker running this code, in [0, launch threads): the OpenMP thread on the
    CPU tiers. Introduced by `lower_adstacks` to find a thread's slice of the adstack heap. Always i64."""

    dtype: DataType = i64


# ------------------------------------------------------------------ thread groups (`qd.simt`, DESIGN §7)

# name -> number of operands. Barriers and fences return nothing (their dtype is i32 and unused); the rest give a
# value. `lane` / `thread_idx` / `global_thread_idx`: this thread's index in its subgroup, its block (workgroup),
# the whole launch. Shuffles take (value, lane or offset) and give the value's dtype; `ballot` gives the u64 mask
# of the subgroup's lanes whose predicate is nonzero. `warp_*` are CUDA's masked warp operations (mask first).
SIMT_OPS: dict[str, int] = {
    "block_sync": 0, "block_fence": 0, "grid_fence": 0, "subgroup_sync": 0, "subgroup_fence": 0, "warp_sync": 1,
    "thread_idx": 0, "global_thread_idx": 0, "lane": 0,
    "shuffle": 2, "shuffle_up": 2, "shuffle_down": 2, "broadcast": 2, "ballot": 1,
    "warp_shfl": 3, "warp_shfl_up": 3, "warp_shfl_down": 3, "warp_shfl_xor": 3,
    "warp_all": 2, "warp_any": 2, "warp_uni": 2, "warp_ballot": 2, "warp_match_any": 2, "warp_match_all": 2,
    "warp_active_mask": 0,
}
# the operations every thread of a group must reach together (in uniform control flow)
SIMT_BARRIERS = frozenset({"block_sync", "subgroup_sync", "warp_sync"})


@dataclass(frozen=True, eq=False, kw_only=True)
class Simt(Stmt, Value):
    """A thread-group operation of `qd.simt` (`SIMT_OPS`): only the GPU tiers have them (the frontend refuses them
    elsewhere). Never moved, merged or removed by a pass (`has_side_effect`): a barrier orders memory."""

    op: str
    args: tuple[Value, ...] = ()
    dtype: DataType = i32


# ------------------------------------------------------------------ adstacks (DESIGN §5)


@dataclass(frozen=True, eq=False, kw_only=True)
class AdStackAlloc(Stmt):
    """Starts stack `stack` (an index into `KernelIR.stacks`) empty, in this thread."""

    stack: int


@dataclass(frozen=True, eq=False, kw_only=True)
class AdStackPush(Stmt):
    stack: int
    value: Value


@dataclass(frozen=True, eq=False, kw_only=True)
class AdStackPop(Stmt):
    stack: int


@dataclass(frozen=True, eq=False, kw_only=True)
class AdStackLoadTop(Stmt, Value):
    """The value on top of stack `stack` (the last pushed and not yet popped)."""

    stack: int
    dtype: DataType


ADSTACK_STMTS = (AdStackAlloc, AdStackPush, AdStackPop, AdStackLoadTop)


# ------------------------------------------------------------------ control flow


@dataclass(frozen=True, eq=False)
class Block:
    stmts: tuple[Stmt, ...] = ()

    def __iter__(self) -> Iterator[Stmt]:
        return iter(self.stmts)

    def __len__(self) -> int:
        return len(self.stmts)


@dataclass(frozen=True, eq=False, kw_only=True)
class RangeFor(Stmt):
    """`for var in range(begin, end)`: serial inside a thread unless `parallel` (top level only).

    `from_range`: written as `range(...)` (not `qd.ndrange` / a struct-for). Quadrants' reverse mode without
    the adstack refuses a nested `range()` loop but lets the others through; `qd.ad.reverse` follows it."""

    var: LoopVar
    begin: Value
    end: Value
    body: Block
    parallel: bool = False
    from_range: bool = True
    block_dim: int = 0  # `qd.loop_config(block_dim=n)` before a parallel loop: threads per GPU block (0: the tier's)


@dataclass(frozen=True, eq=False, kw_only=True)
class If(Stmt):
    cond: Value
    then: Block
    else_: Block = field(default_factory=Block)


@dataclass(frozen=True, eq=False, kw_only=True)
class While(Stmt):
    """`while True: body`; the frontend puts `if not cond: break` at the top of `body`."""

    body: Block


@dataclass(frozen=True, eq=False, kw_only=True)
class GraphDoWhile(While):
    """`while qd.graph.do_while(c):` of a `graph=True` kernel, at the top level (or directly in another one): `body`
    runs, then again while the 0-d integer buffer `cond` holds a nonzero value (a do-while). Its statements are top
    level statements: `offload` makes tasks of them and a `TaskLoop` of the loop; it never reaches a task. A `While`,
    so liveness and every pass that treats loops alike see it as one."""

    cond: int


@dataclass(frozen=True, eq=False, kw_only=True)
class Break(Stmt):
    pass


@dataclass(frozen=True, eq=False, kw_only=True)
class Continue(Stmt):
    pass


@dataclass(frozen=True, eq=False, kw_only=True)
class Return(Stmt):
    """Kernel return: writes `values` to the return slots and ends the kernel (serial code only)."""

    values: tuple[Value, ...]


@dataclass(frozen=True, eq=False, kw_only=True)
class Print(Stmt):
    """Collected during the launch and shown at its end. `items` are strings or values; `fmts` holds
    one Python format spec per value item ('' = Quadrants' default: `%f` for floats)."""

    items: tuple[str | Value, ...]
    fmts: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False, kw_only=True)
class Check(Stmt):
    """A runtime check: when `cond` is 0 the thread records failure `check` (an index into
    `KernelIR.checks`) with `args` in the status buffer and stops. Asserts and bound checks."""

    cond: Value
    check: int
    args: tuple[Value, ...] = ()


# ------------------------------------------------------------------ kernels


@dataclass(frozen=True)
class ArgDecl:
    """A kernel parameter. kind: 'scalar' (dtype) or 'ndarray' (buffer index in `buffers`)."""

    name: str
    kind: str
    dtype: DataType
    buffer: int = -1


@dataclass(frozen=True)
class BufferDecl:
    """A global buffer a kernel reaches.

    kind 'field': shape known at compile time; 'ndarray': the argument `arg`, shape read at
    launch (ndim axes); 'temp': the per-launch scratch buffer of the offload pass (shape (n,)); 'shared': a
    `qd.simt.block.SharedArray` (shape known at compile time), one per GPU block of each task using it, never bound
    at launch.
    `elem_shape` are the trailing vector/matrix axes (constant). `large` (ndarrays; part of the
    instantiation key, DESIGN §3) is the `size_class` of the arguments the instance runs on."""

    kind: str
    dtype: DataType
    shape: tuple[int, ...] = ()
    ndim: int = 0
    elem_shape: tuple[int, ...] = ()
    arg: int = -1
    name: str = ""
    large: int = 0

    @property
    def total_ndim(self) -> int:
        return self.ndim + len(self.elem_shape)

    def axis_dtype(self, axis: int) -> DataType:
        """The integer type of outer axis `axis`'s extent (`ExternalShape`) and of the indices into it: i32,
        or i64 for an axis that may hold 2^31 elements or more."""
        if self.kind == "ndarray":
            return i64 if self.large == LARGE_AXIS and axis < self.ndim else i32
        return i64 if axis < len(self.shape) and self.shape[axis] > I32_MAX else i32


I32_MAX = 2**31 - 1
# `size_class` of an ndarray's outer axes: fewer than 2^31 cells; 2^31 cells or more, every axis below 2^31;
# an axis of 2^31 elements or more
SMALL, LARGE_CELLS, LARGE_AXIS = 0, 1, 2


def size_class(shape: tuple[int, ...]) -> int:
    """`SMALL`, `LARGE_CELLS` or `LARGE_AXIS` for outer axes `shape` (`qd/_launch.pyx` has a C twin). Cells are
    counted with an empty axis as 1: SMALL promises that the product of any of the axes fits in i32."""
    if any(n > I32_MAX for n in shape):
        return LARGE_AXIS
    cells = 1
    for n in shape:
        cells *= max(n, 1)
    return LARGE_CELLS if cells > I32_MAX else SMALL


@dataclass(frozen=True)
class CheckDecl:
    """Message of a runtime check. kind: 'assert' or 'bounds'; `message` is formatted with the
    recorded args (`{0}`, `{1}`...)."""

    kind: str
    message: str
    loc: SrcLoc | None = None


@dataclass(frozen=True)
class StackDecl:
    """An adstack: element dtype, the slots a thread needs as serialised `SizeExpr` bytecode
    (`qd/ad/sizing.py`, evaluated at every launch), the loop it serves, and what it holds."""

    dtype: DataType
    size: tuple[int, ...]
    loc: SrcLoc | None = None
    name: str = ""


@dataclass(frozen=True)
class Task:
    """An offloaded task. kind 'serial': `body` runs once. kind 'range': `prologue` runs once and
    defines `begin`/`end`; `body` runs for every `var` in [begin, end), in parallel."""

    kind: str
    body: Block
    var: LoopVar | None = None
    prologue: Block = field(default_factory=Block)
    begin: Value | None = None
    end: Value | None = None
    loc: SrcLoc | None = None
    block_dim: int = 0  # threads per GPU block (the loop's `qd.loop_config(block_dim=...)`; 0: the tier's choice)


@dataclass(frozen=True)
class TaskLoop:
    """Tasks [first, end) of an offloaded kernel repeat, as a do-while, while buffer `cond`'s element is nonzero
    (a `GraphDoWhile`). Loops nest or are disjoint, outer loops first."""

    first: int
    end: int
    cond: int


def task_order(ntasks: int, loops: tuple[TaskLoop, ...], cond: Callable[[int], int]) -> Iterator[int]:
    """The task indices a launch runs, in order: each once, but a `TaskLoop`'s range again while `cond(buffer)`
    (called once the range's last task has run, reading that buffer's element) is nonzero."""
    ends: dict[int, list[TaskLoop]] = {}
    for lp in reversed(loops):  # at a shared last task the innermost loop (listed after its outer one) tests first
        if lp.end > lp.first:
            ends.setdefault(lp.end - 1, []).append(lp)
    i = 0
    while i < ntasks:
        yield i
        for lp in ends.get(i, ()):
            if cond(lp.cond):
                i = lp.first
                break
        else:
            i += 1


@dataclass(frozen=True)
class KernelIR:
    name: str
    args: tuple[ArgDecl, ...]
    buffers: tuple[BufferDecl, ...]
    rets: tuple[DataType, ...]
    checks: tuple[CheckDecl, ...]
    body: Block
    tasks: tuple[Task, ...] | None = None  # set by the offload pass
    loc: SrcLoc | None = None
    stacks: tuple[StackDecl, ...] = ()  # adstacks of a reverse-mode kernel (`qd/ad/reverse.py`)
    counter: KernelIR | None = None  # the counting kernel sizing its while-loop stacks (`qd/ad/counting.py`)
    task_loops: tuple[TaskLoop, ...] = ()  # the `GraphDoWhile` loops over `tasks` (set by the offload pass)
    graph: bool = False  # `@qd.kernel(graph=True)`: on CUDA its tasks run as one graph launch (`qd/gpu/cuda_graphs.py`)

    def with_body(self, body: Block) -> "KernelIR":
        return replace(self, body=body)


# ------------------------------------------------------------------ traversal


def walk(block: Block) -> Iterator[Stmt]:
    """Every statement of `block`, pre-order, descending into nested blocks (an explicit stack: a statement
    nested d deep costs one step, not d generator frames)."""
    stack = [iter(block.stmts)]
    while stack:
        for s in stack[-1]:
            yield s
            kids = s.blocks()
            if kids:
                stack.extend(iter(b.stmts) for b in reversed(kids))
                break
        else:
            stack.pop()


def walk_kernel(k: KernelIR) -> Iterator[Stmt]:
    if k.tasks is None:
        yield from walk(k.body)
        return
    for t in k.tasks:
        yield from walk(t.prologue)
        yield from walk(t.body)


def index_key(v: Value) -> object:
    """Equal for two index values that are the same address component: the same value, equal constants, or loads of
    the same scalar argument (a launch's arguments do not change: diffmpm's `v.grad[f, p]` loads `f` at each use)."""
    if isinstance(v, Const):
        return ("const", v.dtype.name, v.value)
    if isinstance(v, ArgLoad):
        return ("arg", v.index, v.dtype.name)
    return v


def has_side_effect(s: Stmt) -> bool:
    return not isinstance(s, (Const, ArgLoad, OpStmt, LocalLoad, GlobalPtr, GlobalLoad, ExternalShape,
                              Alloca, ThreadSlot, AdStackLoadTop))


def map_block(block: Block, fn) -> Block:
    """Rebuild `block` bottom-up: `fn(stmt)` returns a list of statements replacing `stmt`
    (nested blocks are rebuilt first). Operand remapping is the caller's business."""
    out: list[Stmt] = []
    for s in block.stmts:
        kids = {f.name: map_block(getattr(s, f.name), fn) for f in fields(s)
                if isinstance(getattr(s, f.name), Block)}
        if kids:
            s = replace(s, **kids)
        out.extend(fn(s))
    return Block(tuple(out))


def substitute(block: Block, mapping: dict, fresh: bool = False) -> Block:
    """A copy of `block` whose operands are renamed through `mapping` (old value -> new value).

    Every rebuilt statement is recorded in `mapping`, so later uses follow. With `fresh=True`
    every statement and loop variable is duplicated (for cloning a block into a second place)."""
    out: list[Stmt] = []
    for s in block.stmts:
        ns = _subst_stmt(s, mapping, fresh)
        if ns is not s:
            mapping[s] = ns
        out.append(ns)
    return Block(tuple(out))


def remap_operands(s: Stmt, mapping: dict) -> Stmt:
    """`s` with its operand fields (not its nested blocks) renamed through `mapping`."""
    changes = {}
    for name in operand_fields(type(s)):
        v = getattr(s, name)
        if isinstance(v, Value):
            nv = mapping.get(v, v)
        elif isinstance(v, tuple):
            nv = tuple(mapping.get(x, x) if isinstance(x, Value) else x for x in v)
            if all(a is b for a, b in zip(nv, v)):
                nv = v
        else:
            continue
        if nv is not v:
            changes[name] = nv
    return replace(s, **changes) if changes else s


def _subst_stmt(s: Stmt, mapping: dict, fresh: bool) -> Stmt:
    if fresh:
        for name in operand_fields(type(s)):
            v = getattr(s, name)
            if isinstance(v, LoopVar) and v not in mapping:
                mapping[v] = LoopVar(v.dtype, v.name)
    ns = remap_operands(s, mapping)
    kids = {n: substitute(getattr(ns, n), mapping, fresh) for n in block_fields(type(ns))}
    if kids or (fresh and ns is s):
        return replace(ns, **kids)
    return ns


def _short_repr(self: Stmt) -> str:
    """Statements print shallowly: the generated dataclass repr recurses through every operand,
    which is exponential in the depth of an expression DAG. `qd.ir_text` prints whole kernels."""
    dt = getattr(self, "dtype", None)
    op = getattr(self, "op", None)
    parts = [type(self).__name__] + ([op.value] if op is not None else []) + ([str(dt)] if dt else [])
    return f"<{' '.join(parts)} at {id(self):#x}>"


def _no_blocks(self: Stmt) -> tuple:
    return ()


def _blocks_getter(names: tuple[str, ...]) -> Any:
    """`Stmt.blocks` for a class whose nested blocks are the fields `names` (called millions of times a build)."""
    if len(names) == 1:
        name = names[0]
        return lambda self: (getattr(self, name),)
    get = operator.attrgetter(*names)
    return lambda self: get(self)


for _cls in list(globals().values()):
    if isinstance(_cls, type) and issubclass(_cls, Stmt):
        _cls.__repr__ = _short_repr
        if _cls is not Stmt:
            _cls.blocks = _blocks_getter(block_fields(_cls)) if block_fields(_cls) else _no_blocks
_SPECIALISED = True
