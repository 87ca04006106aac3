"""The visitor skeleton the three code generators share: `qd/jit/llvm_fn.py` (LLVM IR through llvmlite, its range
bodies and prologues assembled by `qd/jit/llvm.py`), `qd/gpu/spirv.py` (SPIR-V words) and `qd/gpu/opencl_c.py`
(OpenCL C text). Not to be confused with `qd/ir_emit.py`'s `Emitter`, which builds IR.

What the three really share, and so what lives here:
- **dispatch**: a statement reaches the handler `s_<its IR class>` of the generator's class (looked up once per
  class and statement class); a statement a generator has no handler for is a `QuadrantsCompilationError` naming
  the statement, the tier and the statement's source location.
- **walking a block**: its statements in order (`block`). What follows a terminator differs: LLVM goes on in a
  block nothing jumps to, SPIR-V stops emitting the block (it overrides `block`), C needs nothing.
- **the value map** `vals` (IR value -> emitted value: an llvmlite value, a SPIR-V id, a C expression) and `wide`
  (a loop variable -> its 64-bit index). `Const`, `ArgLoad` and `ExternalShape` emit nothing where they stand:
  `v` makes them at each use through the tier's `const_value`, `arg_value`, `shape_value` (the GPU tiers and LLVM
  keep launch-invariant values at function entry). `index64` (an index as 64 bits) and `stride` (a buffer axis'
  stride: a number for a field, the tier's product of extents for an ndarray) go the same way.
- **structured control flow**: the loop stack `loops` of (continue target, break target); `break` and `continue`
  are a `jump` to the innermost loop's target (a block, a SPIR-V label, C's own `continue;`/`break;`), and
  `loop_body` walks a loop's body with its targets pushed. The constructs themselves (`If`, `RangeFor`, `While`:
  blocks and phis, selection and loop constructs with merges, C's `if` and `for`) stay in the tiers.
- **the op path**: an `OpStmt` not emitted already (hoisted before a loop) is the tier's op-table lowering
  (`lower_op`) of its operands (`operands`; SPIR-V hides constant zeros there).
- **reductions**: a recognized reduction's cell pointer is computed before the range loop (`hoist_cell`:
  the prologue-invariant values of its indices, then the pointer); accumulators and flushes stay in the tiers.
- **per-kernel tables** (`KernelCodegen`): the kernel with the ops a tier `LACKS` expanded (`prepare`,
  `qd/codegen/decompose.py`), print ids (`qd/codegen/tables.py`), the GPU tiers' context-word layout in the launch
  slot, and whether a range task may end a thread early (`stops_early`: then its accumulators cannot meet).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from qd import ir
from qd.base.abi import HEADER_WORDS
from qd.codegen import decompose
from qd.codegen.reduce import Reduction, invariant_values
from qd.codegen.tables import print_ids
from qd.errors import QuadrantsCompilationError

Handler = Callable[[Any, ir.Stmt], None]


def prepare(k: ir.KernelIR, lacks: Mapping) -> ir.KernelIR:
    """Kernel `k` as a tier whose op table leaves out `lacks` emits it: the decomposed ops expanded."""
    return decompose.expand(k, decompose.lowered_here(lacks))


def stops_early(t: ir.Task) -> bool:
    """A thread of range task `t` may stop before the end of its indices (a failed check or a return)."""
    return any(isinstance(s, (ir.Check, ir.Return)) for s in ir.walk(t.body)) or \
        any(isinstance(s, ir.Check) for s in ir.walk(t.prologue))


class KernelCodegen:
    """Kernel-wide state of a code generator: the kernel, fast math, print ids and (GPU tiers) the context words."""

    def __init__(self, k: ir.KernelIR, fast_math: bool, who: str) -> None:
        assert k.tasks is not None, f"{who} needs an offloaded kernel (run the pass pipeline)"
        self.k, self.fast_math = k, fast_math
        self.print_ids = print_ids(k)
        self.ctx: dict[tuple, int] = {}

    def ctx_index(self, key: tuple) -> int:
        """The index of context entry `key` (a shape, an argument, ...) among the words the kernel reads."""
        if key not in self.ctx:
            self.ctx[key] = len(self.ctx)
        return self.ctx[key]

    def ctx_word(self, key: tuple) -> int:
        """The launch slot word of context entry `key`: after the header and the return words."""
        return HEADER_WORDS + len(self.k.rets) + self.ctx_index(key)

    def ctx_keys(self) -> list[tuple]:
        return sorted(self.ctx, key=self.ctx.__getitem__)


class CodegenBase:
    """One function being generated: statement dispatch, blocks, the value map, loops, the op path."""

    TIER: ClassVar[str] = "this tier"
    _handlers: ClassVar[dict[type, Handler]] = {}
    k: ir.KernelIR
    vals: dict
    wide: dict
    loops: list

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        cls._handlers = {}

    # ------------------------------------------------------------ dispatch
    @classmethod
    def handler(cls, s: ir.Stmt) -> Handler:
        """The handler of statement `s`'s class (`s_<class name>`), cached per class."""
        h = cls._handlers.get(type(s))
        if h is None:
            h = getattr(cls, "s_" + type(s).__name__, None)
            if h is None:
                loc = s.loc
                where = f"{loc.file}:{loc.line}: " if loc is not None else ""
                raise QuadrantsCompilationError(f"{where}{cls.TIER} has no code for statement {type(s).__name__}")
            cls._handlers[type(s)] = h
        return h

    def stmt(self, s: ir.Stmt) -> None:
        self.handler(s)(self, s)

    def block(self, blk: ir.Block) -> None:
        handlers, find = self._handlers, self.handler
        for s in blk.stmts:
            (handlers.get(type(s)) or find(s))(self, s)

    def s_Const(self, s: ir.Stmt) -> None:
        pass  # made at each use (`v`)

    s_ArgLoad = s_ExternalShape = s_Const

    # ------------------------------------------------------------ values
    def v(self, x: ir.Value) -> Any:
        if x in self.vals:
            return self.vals[x]
        if isinstance(x, ir.Const):
            return self.const_value(x)
        if isinstance(x, ir.ArgLoad):
            return self.arg_value(x)
        if isinstance(x, ir.ExternalShape):
            return self.shape_value(x)
        raise KeyError(f"value {x!r} used before its definition")

    def index64(self, x: ir.Value) -> Any:
        """Index `x` as a 64-bit integer (a loop variable's own 64-bit counter where it has one)."""
        if x in self.wide:
            return self.wide[x]
        return self.widen(x)

    def stride(self, buf: int, axis: int) -> Any:
        """Elements between neighbours along `axis` of buffer `buf`: a number unless the buffer is an ndarray."""
        decl = self.k.buffers[buf]
        if decl.kind == "ndarray":
            return self.ndarray_stride(buf, axis)
        acc = 1
        for d in (list(decl.shape) + list(decl.elem_shape))[axis + 1:]:
            acc *= d
        return self.index_const(acc)

    def const_value(self, x: ir.Const) -> Any:
        raise NotImplementedError

    def arg_value(self, x: ir.ArgLoad) -> Any:
        raise NotImplementedError

    def shape_value(self, x: ir.ExternalShape) -> Any:
        raise NotImplementedError

    def widen(self, x: ir.Value) -> Any:
        raise NotImplementedError

    def ndarray_stride(self, buf: int, axis: int) -> Any:
        raise NotImplementedError

    def index_const(self, n: int) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------ ops
    def s_OpStmt(self, s: ir.OpStmt) -> None:
        if s in self.vals:  # hoisted before the loop (a reduction's pointer)
            return
        self.vals[s] = self.lower_op(s, self.operands(s))

    def operands(self, s: ir.OpStmt) -> list:
        return [self.v(a) for a in s.args]

    def lower_op(self, s: ir.OpStmt, args: list) -> Any:
        raise NotImplementedError

    # ------------------------------------------------------------ structured control flow
    def loop_body(self, blk: ir.Block, cont: Any, brk: Any) -> None:
        """The body of a loop whose `continue` goes to `cont` and `break` to `brk`."""
        self.loops.append((cont, brk))
        self.block(blk)
        self.loops.pop()

    def s_Break(self, s: ir.Break) -> None:
        self.jump(self.loops[-1][1])

    def s_Continue(self, s: ir.Continue) -> None:
        self.jump(self.loops[-1][0])

    def jump(self, target: Any) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------ reductions
    def hoist_cell(self, red: Reduction, prologue: set) -> Any:
        """Reduction `red`'s cell pointer, emitted before the range loop (its indices are prologue-invariant)."""
        for idx in red.ptr.indices:
            for x in invariant_values(idx, prologue):
                self.s_OpStmt(x)
        self.s_GlobalPtr(red.ptr)
        return self.vals[red.ptr]

    def s_GlobalPtr(self, s: ir.GlobalPtr) -> None:
        raise NotImplementedError


__all__ = ["CodegenBase", "KernelCodegen", "prepare", "stops_early"]
