"""`qd.simt` on NVIDIA GPUs: `ir.Simt` statements as NVVM intrinsics, block-shared arrays as `addrspace(3)`
globals (DESIGN §10).

A block is a CUDA thread block of the task's `block_dim` threads; a subgroup is a warp (32 lanes). Barriers are
`barrier0` (`__syncthreads`), `bar.warp.sync`; fences `membar.cta` / `membar.gl`; shuffles `shfl.sync` over the full
warp (64-bit values as two 32-bit halves); votes and ballots `vote.sync`; `match.sync` for the warp matches.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir as L

from qd import ir
from qd.errors import QuadrantsCompilationError

I1, I32, I64 = L.IntType(1), L.IntType(32), L.IntType(64)
F32, F64 = L.FloatType(), L.DoubleType()
FULL = L.Constant(I32, -1)
SHARED_ADDRSPACE = 3
# static shared memory a CUDA block may have; beyond it a kernel's shared arrays go to dynamic shared memory, up to
# the device's opt-in maximum (`cuFuncSetAttribute`)
STATIC_SHARED_BYTES = 48 * 1024


def _fn(module: L.Module, name: str, ret: L.Type, params: list[L.Type]) -> L.Function:
    f = module.globals.get(name)
    return f if f is not None else L.Function(module, L.FunctionType(ret, params), name)


def _call(b: L.IRBuilder, name: str, ret: L.Type, args: list[L.Value]) -> L.Value:
    return b.call(_fn(b.module, name, ret, [a.type for a in args]), args)


def _sreg(b: L.IRBuilder, name: str) -> L.Value:
    return _call(b, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])


def _bytes(d: ir.BufferDecl) -> int:
    n = d.dtype.itemsize
    for x in d.shape + d.elem_shape:
        n *= x
    return n


def _used(k: ir.KernelIR, t: ir.Task) -> set[int]:
    return {s.buffer for s in ir.walk(t.body) if isinstance(s, ir.GlobalPtr) and k.buffers[s.buffer].kind == "shared"}


def layout(k: ir.KernelIR) -> dict[int, int] | None:
    """Where each shared buffer starts in the block's *dynamic* shared memory (16-byte aligned, buffer order), or
    None where every task's arrays fit the 48 KiB of static shared memory (each array its own global). Kept on the
    kernel object (found once per kernel, not per pointer)."""
    if "_qd_shared_layout" in k.__dict__:
        return k.__dict__["_qd_shared_layout"]
    found = _layout(k)
    object.__setattr__(k, "_qd_shared_layout", found)  # (a frozen dataclass; not a field: never compared)
    return found


def _layout(k: ir.KernelIR) -> dict[int, int] | None:
    tasks = k.tasks or ()
    if all(sum(_bytes(k.buffers[b]) for b in _used(k, t)) <= STATIC_SHARED_BYTES for t in tasks):
        return None
    out, at = {}, 0
    for b, d in enumerate(k.buffers):
        if d.kind == "shared":
            out[b] = at
            at = (at + _bytes(d) + 15) & ~15
    return out


def dynamic_bytes(k: ir.KernelIR) -> list[int]:
    """Per task, the dynamic shared memory its launch asks for (0: static arrays only)."""
    lay = layout(k)
    if lay is None:
        return [0] * len(k.tasks or ())
    return [max((lay[b] + _bytes(k.buffers[b]) for b in _used(k, t)), default=0) for t in k.tasks]


def shared_base(module: L.Module, k: ir.KernelIR, buf: int, elem: L.Type) -> L.Value:
    """The block-shared array of buffer `buf`: an `addrspace(3)` global of the module (each block its own), or its
    place in the block's dynamic shared memory (`layout`) when a task's arrays pass 48 KiB."""
    decl = k.buffers[buf]
    lay = layout(k)
    ptr = L.PointerType(elem, addrspace=SHARED_ADDRSPACE)
    if lay is not None:
        g = module.globals.get("qd_dynamic_shared")
        if g is None:
            g = L.GlobalVariable(module, L.ArrayType(L.IntType(8), 0), "qd_dynamic_shared", addrspace=SHARED_ADDRSPACE)
            g.linkage, g.align = "external", 16
        return g.gep([L.Constant(I32, 0), L.Constant(I32, lay[buf])]).bitcast(ptr)
    name = f"qd_shared{buf}"
    g = module.globals.get(name)
    if g is None:
        arr = L.ArrayType(elem, _bytes(decl) // decl.dtype.itemsize)
        g = L.GlobalVariable(module, arr, name, addrspace=SHARED_ADDRSPACE)
        g.linkage, g.initializer, g.align = "internal", L.Constant(arr, L.Undefined), 16
    zero = L.Constant(I32, 0)
    return g.gep([zero, zero])  # its first element: GEPs from it step by elements, as from a buffer's base


def check_shared_bytes(k: ir.KernelIR, limit: int = STATIC_SHARED_BYTES) -> None:
    """Every task's shared arrays fit `limit` bytes (the device's opt-in maximum per block), else a
    QuadrantsCompilationError."""
    for t in k.tasks or ():
        nbytes = sum(_bytes(k.buffers[b]) for b in _used(k, t))
        if nbytes > limit:
            raise QuadrantsCompilationError(
                f"kernel {k.name}: its qd.simt.block.SharedArray's take {nbytes} bytes in one task, more than the "
                f"{limit} bytes of shared memory a block of this CUDA device may have; use smaller arrays")


def _shfl(b: L.IRBuilder, mode: str, mask: L.Value, v: L.Value, lane: L.Value) -> L.Value:
    """`shfl.sync.<mode>` of any 32- or 64-bit int or float `v` (64 bits as two halves)."""
    clamp = L.Constant(I32, 0 if mode == "up" else 0x1F)
    name = f"llvm.nvvm.shfl.sync.{mode}.i32"
    ty = v.type
    if ty in (I32, F32):
        x = b.bitcast(v, I32) if ty == F32 else v
        r = _call(b, name, I32, [mask, x, lane, clamp])
        return b.bitcast(r, F32) if ty == F32 else r
    x = b.bitcast(v, I64) if ty == F64 else v
    lo = _call(b, name, I32, [mask, b.trunc(x, I32), lane, clamp])
    hi = _call(b, name, I32, [mask, b.trunc(b.lshr(x, L.Constant(I64, 32)), I32), lane, clamp])
    r = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), L.Constant(I64, 32)))
    return b.bitcast(r, F64) if ty == F64 else r


def _vote(b: L.IRBuilder, kind: str, mask: L.Value, pred: L.Value) -> L.Value:
    p = b.icmp_signed("!=", pred, L.Constant(pred.type, 0))
    if kind == "ballot":
        return _call(b, "llvm.nvvm.vote.ballot.sync", I32, [mask, p])
    return b.zext(_call(b, f"llvm.nvvm.vote.{kind}.sync", I1, [mask, p]), I32)


_SHFL = {"shuffle": "idx", "broadcast": "idx", "shuffle_up": "up", "shuffle_down": "down"}
_WARP_SHFL = {"warp_shfl": "idx", "warp_shfl_up": "up", "warp_shfl_down": "down", "warp_shfl_xor": "bfly"}
_VOTE = {"warp_all": "all", "warp_any": "any", "warp_uni": "uni", "warp_ballot": "ballot"}


def lower(b: L.IRBuilder, s: ir.Simt, args: list[L.Value]) -> L.Value | None:
    """The value of `s` (None for a barrier or fence), emitted at `b`."""
    op = s.op
    if op in _SHFL:
        return _shfl(b, _SHFL[op], FULL, args[0], args[1])
    if op in _WARP_SHFL:
        return _shfl(b, _WARP_SHFL[op], args[0], args[1], args[2])
    if op in _VOTE:
        return _vote(b, _VOTE[op], args[0], args[1])
    fn = _OTHER.get(op)
    if fn is None:
        raise QuadrantsCompilationError(f"qd.simt operation {op!r} has no CUDA lowering")
    return fn(b, args)


def _barrier(name: str, *consts: int) -> Any:
    def emit(b: L.IRBuilder, args: list) -> None:
        _call(b, name, L.VoidType(), [L.Constant(I32, c) for c in consts] + list(args))
    return emit


def _match_all(b: L.IRBuilder, args: list) -> L.Value:
    pair = _call(b, "llvm.nvvm.match.all.sync.i32p", L.LiteralStructType([I32, I1]), args)
    return b.extract_value(pair, 0)


def _active_mask(b: L.IRBuilder, args: list) -> L.Value:
    return b.asm(L.FunctionType(I32, []), "activemask.b32 $0;", "=r", [], True)


_OTHER = {
    "block_sync": _barrier("llvm.nvvm.barrier0"),
    "block_fence": _barrier("llvm.nvvm.membar.cta"),
    "subgroup_fence": _barrier("llvm.nvvm.membar.cta"),
    "grid_fence": _barrier("llvm.nvvm.membar.gl"),
    "subgroup_sync": _barrier("llvm.nvvm.bar.warp.sync", -1),
    "warp_sync": _barrier("llvm.nvvm.bar.warp.sync"),
    "thread_idx": lambda b, a: _sreg(b, "tid.x"),
    "lane": lambda b, a: _sreg(b, "laneid"),
    "global_thread_idx": lambda b, a: b.add(b.mul(_sreg(b, "ctaid.x"), _sreg(b, "ntid.x")), _sreg(b, "tid.x")),
    "ballot": lambda b, a: b.zext(_vote(b, "ballot", FULL, a[0]), I64),
    "warp_match_any": lambda b, a: _call(b, "llvm.nvvm.match.any.sync.i32", I32, a),
    "warp_match_all": _match_all,
    "warp_active_mask": _active_mask,
}
