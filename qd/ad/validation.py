"""`validate_global_access`: the global data access rule checker of `qd.ad.Tape(validation=True)`.

Reverse mode assumes that a launch never overwrites a global element it has read (the backward pass
would need the overwritten value). With `qd.init(debug=True)`, kernels launched inside a validating tape
run a validation instance (`Kernel._run`, instance key + "validate") built by this pass on the
structured, pre-offload IR: every buffer listed in `fields` (fields with a `.grad`) gets a u8
"checkbit" buffer of the same shape (a new `BufferDecl` appended to `buffers`, bound by the caller to
fresh zeros for every launch). A load of x[I] sets checkbit[I] = 1 after it; a store or atomic to
x[I] first checks `checkbit[I] == 0` with an `ir.Check` whose message is Quadrants' text, so the
launch raises `QuadrantsAssertionError`. `check_reverse_supported` (called by `kernel.grad` before the
`reverse` pass) refuses what reverse mode cannot differentiate: `qd.random()` and atomic min/max into a
buffer with a grad.

Before (`b[None] += x[1] * b[None]`-like; buffer 0 = b):    After (buffer 1 = b's checkbits):

    %p = ptr b0[]; %v = f32 load %p                          %p = ptr b0[]; %v = f32 load %p
    ...                                                      %cp = ptr b1[]; %one = u8 const 1
    store %p, %w                                             store %cp, %one
                                                             ...
                                                             %cq = ptr b1[]; %c = u8 load %cq
                                                             %z = u8 const 0; %ok = u1 cmp_eq %c, %z
                                                             check %ok, #k
                                                             store %p, %w
"""

from __future__ import annotations

import linecache
from dataclasses import replace
from typing import Sequence

from qd import ir
from qd.ad.stale_reads import stale_loads
from qd.errors import QuadrantsCompilationError, QuadrantsRuntimeError
from qd.ops import Op
from qd.types.dtypes import u1, u8


def violation_message(buffer_name: str) -> str:
    """Quadrants' text for a write after a read of the same element (`{kernel}` is the kernel name)."""
    name = (buffer_name or "field").replace("{", "{{").replace("}", "}}")
    return ("(kernel={kernel}) Breaks the global data access rule. Snode " + name
            + " is overwritten unexpectedly.")


class _Validator:
    def __init__(self, k: ir.KernelIR, bit_of: dict[int, int]) -> None:
        self.k = k
        self.bit_of = bit_of
        self.checks = list(k.checks)

    def _bit_ptr(self, ptr: ir.GlobalPtr) -> ir.GlobalPtr:
        return ir.GlobalPtr(buffer=self.bit_of[ptr.buffer], indices=ptr.indices, dtype=u8, loc=ptr.loc)

    def block(self, b: ir.Block) -> ir.Block:
        out: list[ir.Stmt] = []
        for s in b.stmts:
            kids = {n: self.block(getattr(s, n)) for n in ir.block_fields(type(s))}
            if kids:
                s = replace(s, **kids)
            self.stmt(s, out)
        return ir.Block(tuple(out))

    def stmt(self, s: ir.Stmt, out: list[ir.Stmt]) -> None:
        if isinstance(s, ir.GlobalLoad) and s.ptr.buffer in self.bit_of:
            out.append(s)
            cp = self._bit_ptr(s.ptr)
            one = ir.Const(dtype=u8, value=1, loc=s.loc)
            out += [cp, one, ir.GlobalStore(ptr=cp, value=one, loc=s.loc)]
            return
        if isinstance(s, (ir.GlobalStore, ir.AtomicRMW, ir.AtomicSwap)) and s.ptr.buffer in self.bit_of:
            loc = s.loc
            cp = self._bit_ptr(s.ptr)
            bit = ir.GlobalLoad(ptr=cp, dtype=u8, loc=loc)
            zero = ir.Const(dtype=u8, value=0, loc=loc)
            ok = ir.OpStmt(op=Op.CMP_EQ, args=(bit, zero), dtype=u1, loc=loc)
            name = self.k.buffers[s.ptr.buffer].name
            self.checks.append(ir.CheckDecl("assert", violation_message(name), loc))
            out += [cp, bit, zero, ok, ir.Check(cond=ok, check=len(self.checks) - 1, loc=loc)]
        out.append(s)


def validate_global_access(k: ir.KernelIR, fields: Sequence[int]) -> ir.KernelIR:
    """The validation version of the pre-offload kernel `k`. Buffer `fields[j]` gets its checkbits as
    buffer `len(k.buffers) + j` (a u8 'field' decl named `<name>.checkbit`), to be bound to zeros."""
    if k.tasks is not None:
        raise ValueError("validate_global_access() runs before the offload pass")
    bit_of = {b: len(k.buffers) + j for j, b in enumerate(fields)}
    decls = tuple(replace(k.buffers[b], dtype=u8, name=k.buffers[b].name + ".checkbit") for b in fields)
    v = _Validator(k, bit_of)
    body = v.block(k.body)
    return replace(k, buffers=k.buffers + decls, body=body, checks=tuple(v.checks))


# Quadrants' text (users match on it): a random number cannot be replayed by the reverse pass.
RAND_MESSAGE = "RandStmt not supported in AutoDiff for now."


def _where(loc: ir.SrcLoc | None) -> str:
    if loc is None:
        return ""
    return f" (at {loc.file}:{loc.line}: {linecache.getline(loc.file, loc.line).strip()})"


def _only_recorded(v: ir.Value, users: dict, grad_set: set) -> bool:
    """Whether `v` (an atomic's old value) reaches nothing but the stored value of stores into buffers without a
    gradient, through arithmetic: the reverse pass drops those stores, so it never needs `v`."""
    for u in users.get(v, ()):
        if isinstance(u, ir.GlobalStore) and u.value is v and v not in u.ptr.indices:
            if u.ptr.buffer in grad_set:
                return False
        elif not (isinstance(u, ir.OpStmt) and _only_recorded(u, users, grad_set)):
            return False
    return True


def check_reverse_supported(k: ir.KernelIR, grads: Sequence[int]) -> None:
    """Rejects what reverse mode cannot differentiate, before the `reverse` pass runs on `k`:
    `qd.random()` anywhere (Quadrants' RuntimeError text), atomic min/max into a buffer with a
    gradient (listed in `grads`): Quadrants accumulates their adjoint as if they were atomic adds,
    which is wrong unless every operand wins; qd refuses them instead of giving such a gradient (and atomic
    mul, whose adjoint the sweep has no rule for: it gave a zero gradient). And an
    atomic whose old value is used (`slot = qd.atomic_add(n[None], 1)`): the replay cannot see it. (An unused
    exchange is a store, differentiated as one.) A read whose replay would be stale is `stale_read_error`'s."""
    grad_set = set(grads)
    users: dict = {}
    for s in ir.walk(k.body):
        for v in s.operands():
            users.setdefault(v, []).append(s)
    for s in ir.walk(k.body):
        if isinstance(s, ir.RandomValue):
            raise QuadrantsRuntimeError(RAND_MESSAGE)
        if isinstance(s, ir.Simt):
            raise QuadrantsCompilationError(
                f"kernel.grad: qd.simt operations (here {s.op}) cannot be differentiated: the reverse pass replays "
                f"each thread alone; move the thread-group code into a kernel that is not differentiated, or give it "
                f"a custom gradient with qd.ad.grad_replaced and qd.ad.grad_for{_where(s.loc)}")
        if isinstance(s, (ir.AtomicRMW, ir.AtomicSwap)) and not _only_recorded(s, users, grad_set):
            name = ("atomic_cas" if s.expected is not None else "atomic_exchange") if isinstance(s, ir.AtomicSwap) \
                else f"atomic_{s.op.name.lower()}"
            raise QuadrantsCompilationError(
                f"kernel.grad: the old value qd.{name} returns cannot be replayed by the reverse pass (its replay "
                f"sees memory as the forward pass left it: a slot it claimed, or a branch on it, would come out "
                f"otherwise); move the {name} into a kernel that is not differentiated, or give this step a "
                f"custom gradient with qd.ad.grad_replaced and qd.ad.grad_for{_where(s.loc)}")
        if (isinstance(s, ir.AtomicRMW) and s.op in (Op.MIN, Op.MAX, Op.MUL) and s.ptr.buffer in grad_set
                and s.value.dtype.is_float):
            name = k.buffers[s.ptr.buffer].name or "field"
            raise QuadrantsCompilationError(
                f"kernel.grad: atomic_{s.op.name.lower()} into `{name}`, which has a gradient, cannot be "
                f"differentiated in reverse mode; give this step a custom gradient with qd.ad.grad_replaced "
                f"and qd.ad.grad_for{_where(s.loc)}")


def stale_read_error(k: ir.KernelIR, grads: Sequence[int]) -> QuadrantsCompilationError | None:
    """The error for a read of `k` whose replay would be stale once the forward kernel ran (`qd.ad.stale_reads`),
    or None. `Kernel._run` raises it at a `kernel.grad` launch that follows a launch of the primal kernel (under
    a Tape, unless the Tape put back the buffer as it was before the launch): a gradient taken without running the
    forward kernel replays memory as the forward saw it."""
    errors = stale_read_errors(k, grads)
    return next(iter(errors.values()), None)


def stale_read_errors(k: ir.KernelIR, grads: Sequence[int]) -> dict:
    """`stale_read_error` for the first stale read of each buffer, by buffer index (in program order)."""
    out: dict = {}
    for stale in stale_loads(k, grads):
        if stale.ptr.buffer in out:
            continue
        name = k.buffers[stale.ptr.buffer].name or "this buffer"
        out[stale.ptr.buffer] = QuadrantsCompilationError(
            f"kernel.grad: `{name}` is read here and written by the same kernel after it (or again in a loop around "
            f"it): the reverse pass replays the read after the forward pass wrote it, so the gradient would use the "
            f"new value. Write the result to another field (a time-indexed one, as differentiable simulations do) or "
            f"split the kernel (qd copies the buffer before such a launch, for a qd.ad.Tape or for one kernel.grad of "
            f"the last launch, only where every read of it comes before its writes and no loop runs a write before "
            f"a read){_where(stale.loc)}")
    return out


__all__ = ["RAND_MESSAGE", "check_reverse_supported", "stale_read_error", "stale_read_errors",
           "validate_global_access",
           "violation_message"]
