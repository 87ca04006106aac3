"""`qd.simt` in OpenCL C (`opencl_c.py` calls it): block-shared arrays as `__local` arrays, barriers, fences, thread
ids and subgroup operations.

- A task using `qd.simt` or a shared array (`uses_groups`) runs as a grid-stride loop (never `blocked`) with the
  local size `Task.block_dim` (else the tier's default): thread `t` is work item `t % L` of group `t // L`.
- Each shared buffer (`BufferDecl.kind == 'shared'`) a task reaches is one `__local ulong sh<b>[...]` array declared
  at kernel-function scope (OpenCL C allows `__local` variables nowhere else), 8-byte aligned; its pointers are
  `__local` ones (`opencl_c._Fn.space`), its atomics the `__local` overloads of the builtins and the prelude's
  `_local` helpers.
- Subgroups are *emulated* on every device: a subgroup is `SUBGROUP` (32) consecutive work items of a group (the
  last one of a group whose size is no multiple of 32 has fewer lanes, as a partial CUDA warp), and a shuffle,
  broadcast or ballot goes through a `__local` word per work item between two work-group barriers. That is exact
  when every work item of the *group* reaches the operation together (uniform control flow over the block, as
  `block.sync` needs), a stronger contract than a native subgroup's. PoCL 3.1 (no `cl_khr_subgroups`) and NVIDIA's
  OpenCL (no subgroup extensions) have no native ones; native `sub_group_*` builtins are not used yet.
  Out-of-range lanes read the reading lane's own value (CUDA's `shfl` for `up`/`down`; a lane index is taken modulo
  32, and a lane past the group's end reads its own).
"""

from __future__ import annotations

from typing import Any

from qd import ir
from qd.gpu.opencl_ops import from_bits, reg, to_bits

_Fn = Any  # `opencl_c._Fn`, the kernel function being rendered (its `emit`, `define`, `fresh`, `v`)

SUBGROUP = 32  # the lanes of an emulated subgroup (`OpenCLBackend.subgroup_size`)
_BARRIER = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
_FENCE = "mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
_MOVES = frozenset({"shuffle", "shuffle_up", "shuffle_down", "broadcast"})
SCRATCH = "qd_sg"  # the per-work-item words the emulated subgroup operations exchange values through


def _stmts(t: ir.Task) -> list[ir.Stmt]:
    return list(ir.walk(t.prologue)) + list(ir.walk(t.body))


def shared_buffers(k: ir.KernelIR, t: ir.Task) -> list[int]:
    """The shared buffers task `t` reaches, in buffer order."""
    used = {s.buffer for s in _stmts(t) if isinstance(s, ir.GlobalPtr) and k.buffers[s.buffer].kind == "shared"}
    return sorted(used)


def uses_groups(k: ir.KernelIR, t: ir.Task) -> bool:
    """Task `t` needs work groups as `qd.simt` defines them (a simt operation or a shared array)."""
    return any(isinstance(s, ir.Simt) for s in _stmts(t)) or bool(shared_buffers(k, t))


def uses_scratch(t: ir.Task) -> bool:
    return any(isinstance(s, ir.Simt) and (s.op in _MOVES or s.op == "ballot") for s in _stmts(t))


def shared_bytes(decl: ir.BufferDecl) -> int:
    """The bytes of one group's copy of shared buffer `decl`, rounded up to 8."""
    n = decl.dtype.itemsize
    for d in tuple(decl.shape) + tuple(decl.elem_shape):
        n *= int(d)
    return (n + 7) & ~7


def local_decls(k: ir.KernelIR, t: ir.Task, local_size: int) -> tuple[list[str], int]:
    """The kernel-scope `__local` declarations task `t` needs (its shared arrays, the subgroup scratch) and their
    bytes."""
    lines, nbytes = [], 0
    for b in shared_buffers(k, t):
        n = shared_bytes(k.buffers[b])
        lines.append(f"__local ulong sh{b}[{n // 8}];  /* {k.buffers[b].name} */")
        nbytes += n
    if uses_scratch(t):
        lines.append(f"__local long {SCRATCH}[{local_size}];")
        nbytes += 8 * local_size
    return lines, nbytes


def lower(fn: _Fn, s: ir.Simt) -> None:
    """Statement `s` in the function being rendered."""
    op = s.op
    if op == "block_sync" or op == "subgroup_sync":  # (an emulated subgroup's barrier is its group's)
        fn.emit(_BARRIER)
    elif op in ("block_fence", "subgroup_fence"):
        fn.emit(_FENCE)
    elif op == "grid_fence":
        fn.emit("QD_GRID_FENCE();")
    elif op == "thread_idx":
        fn.define(s, "int", "lid")
    elif op == "global_thread_idx":
        fn.define(s, "int", "(int)gid")
    elif op == "lane":
        fn.define(s, "int", f"(lid & {SUBGROUP - 1})")
    elif op in _MOVES:
        _move(fn, s)
    elif op == "ballot":
        _ballot(fn, s)
    else:  # warp_* (the frontend refuses them off CUDA)
        from qd.errors import QuadrantsCompilationError

        where = f"{s.loc.file}:{s.loc.line}: " if s.loc is not None else ""
        raise QuadrantsCompilationError(f"{where}qd.simt operation {op} is not supported on arch opencl (CUDA only)")


def _publish(fn: _Fn, bits: str) -> None:
    """This work item's word into the scratch, between barriers (the first: earlier readers are done)."""
    fn.emit("barrier(CLK_LOCAL_MEM_FENCE);")
    fn.emit(f"{SCRATCH}[lid] = {bits};")
    fn.emit("barrier(CLK_LOCAL_MEM_FENCE);")


def _move(fn: _Fn, s: ir.Simt) -> None:
    """shuffle / shuffle_up / shuffle_down / broadcast: another lane's value of the same subgroup."""
    value, other = s.args
    m = SUBGROUP - 1
    _publish(fn, to_bits(value.dtype, fn.v(value)))
    src, arg = fn.fresh("src"), fn.v(other)
    if s.op == "shuffle_up":
        fn.emit(f"int {src} = (lid & {m}) - ({arg});")
        fn.emit(f"{src} = ({src} < 0 || {src} > {m}) ? lid : (lid & ~{m}) + {src};")
    elif s.op == "shuffle_down":
        fn.emit(f"int {src} = (lid & {m}) + ({arg});")
        fn.emit(f"{src} = ({src} < 0 || {src} > {m}) ? lid : (lid & ~{m}) + {src};")
    else:
        fn.emit(f"int {src} = (lid & ~{m}) + (({arg}) & {m});")
    fn.emit(f"if ({src} >= (int)get_local_size(0)) {src} = lid;")
    fn.define(s, reg(s.dtype), from_bits(value.dtype, f"{SCRATCH}[{src}]"))


def _ballot(fn: _Fn, s: ir.Simt) -> None:
    """The u64 mask of the subgroup's lanes with a nonzero predicate (bit i: lane i)."""
    _publish(fn, f"(long)(({fn.v(s.args[0])}) != 0)")
    base, mask, j = fn.fresh("base"), fn.fresh("mask"), fn.fresh("j")
    fn.emit(f"int {base} = lid & ~{SUBGROUP - 1};")
    fn.emit(f"ulong {mask} = 0;")
    fn.emit(f"for (int {j} = 0; {j} < {SUBGROUP} && {base} + {j} < (int)get_local_size(0); {j}++) "
            f"{mask} |= ({SCRATCH}[{base} + {j}] != 0 ? 1UL : 0UL) << {j};")
    fn.define(s, "ulong", mask)


__all__ = ["SCRATCH", "SUBGROUP", "local_decls", "lower", "shared_buffers", "shared_bytes", "uses_groups",
           "uses_scratch"]
