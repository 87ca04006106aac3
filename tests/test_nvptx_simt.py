"""`qd.simt` on the NVPTX target (`qd/jit/nvptx_simt.py`): kernels using every thread-group operation compile to
PTX that `ptxas -arch=sm_90` assembles, with the instructions the CUDA tier promises (CI has no GPU: the CUDA runs
are in tests/test_simt.py on the device machine). The kernels are built on the interpreter with the frontend's
subgroup size patched to a warp's, as the cuda arch would give."""

from __future__ import annotations

import re

import numpy as np
import pytest

import qd
from qd.frontend import simt as _fs
from qd.jit import nvptx
from qd.runtime import launch

pytestmark = pytest.mark.skipif(nvptx.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed: the "
                                "NVPTX output is not assembled")


def _instance(kernel, args, monkeypatch: pytest.MonkeyPatch):
    """The offloaded instance `kernel(*args)` compiles to with a 32-lane subgroup (its interpreter run fails:
    the interpreter has no thread groups)."""
    found = []
    compile_kernel = launch.compile_kernel

    def recording(k):
        ck = compile_kernel(k)
        found.append(ck)
        return ck
    monkeypatch.setattr(launch, "compile_kernel", recording)
    monkeypatch.setattr(_fs, "subgroup_size", lambda what: 32)
    with pytest.raises(Exception) as err:  # (the interpreter lowers no simt statement)
        kernel(*args)
    assert found, f"the kernel compiled no instance: {err.value}"
    return found[0]


def test_simt_ops_assemble(monkeypatch: pytest.MonkeyPatch) -> None:
    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, ndim=1), y: qd.types.ndarray(qd.f64, ndim=1),
          m: qd.types.ndarray(qd.u64, ndim=1)):
        qd.loop_config(block_dim=64)
        for i in range(x.shape[0]):
            sh = qd.simt.block.SharedArray((64,), qd.f32)
            t = qd.simt.block.thread_idx()
            sh[t] = x[i]
            qd.simt.block.sync()
            v = sh[63 - t]
            v += qd.simt.subgroup.shuffle(v, 3) + qd.simt.subgroup.shuffle_down(v, 1) + \
                qd.simt.subgroup.shuffle_up(v, 2)
            y[i] = qd.simt.subgroup.broadcast(y[i], 0) + qd.simt.subgroup.shuffle_xor(y[i], 1)
            m[i] = qd.simt.subgroup.ballot(v > 0) + qd.simt.block.global_thread_idx() + \
                qd.simt.subgroup.invocation_id()
            c = qd.simt.block.sync_count_nonzero(v > 1)
            qd.simt.grid.mem_fence()
            qd.simt.block.mem_fence()
            qd.simt.subgroup.sync()
            x[i] = v + c

    try:
        ck = _instance(k, (np.zeros(128, np.float32), np.zeros(128), np.zeros(128, np.uint64)), monkeypatch)
    finally:
        qd.reset()
    assert ck.ir.tasks[0].block_dim == 64
    pk = nvptx.compile_ptx(ck.ir, False)
    ptx = pk.ptx
    for pattern in (r"\.shared \.align 16 \.b8 qd_shared\d+\[256\]", r"st\.shared\.b32", r"bar\.sync", r"%laneid",
                    r"shfl\.sync\.idx\.b32", r"shfl\.sync\.down\.b32", r"shfl\.sync\.up\.b32", r"vote\.sync\.ballot",
                    r"atom\.shared\.add", r"membar\.gl", r"membar\.cta", r"bar\.warp\.sync"):
        assert re.search(pattern, ptx), f"no {pattern} in the PTX"
    nvptx.ptxas(ptx)


def test_warp_ops_assemble(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's masked warp operations (the frontend allows them on cuda only: the arch check is patched too)."""
    qd.init(arch=qd.interp, log_level="warn")
    monkeypatch.setattr(_fs, "cuda_only", lambda what: None)

    @qd.kernel
    def k(a: qd.types.ndarray(qd.i32, ndim=1), f: qd.types.ndarray(qd.f32, ndim=1)):
        for i in range(a.shape[0]):
            v = a[i]
            s = qd.simt.warp.shfl_sync_i32(0xFFFFFFFF, v, 0) + qd.simt.warp.shfl_xor_i32(0xFFFFFFFF, v, 1)
            s += qd.simt.warp.shfl_up_i32(0xFFFFFFFF, v, 1) + qd.simt.warp.shfl_down_i32(0xFFFFFFFF, v, 1)
            f[i] = qd.simt.warp.shfl_sync_f32(0xFFFFFFFF, f[i], 2)
            s += qd.simt.warp.all_nonzero(0xFFFFFFFF, v) + qd.simt.warp.any_nonzero(0xFFFFFFFF, v)
            s += qd.simt.warp.unique(0xFFFFFFFF, v) + qd.cast(qd.simt.warp.ballot(v), qd.i32)
            s += qd.cast(qd.simt.warp.match_any(0xFFFFFFFF, v) + qd.simt.warp.match_all(0xFFFFFFFF, v), qd.i32)
            s += qd.cast(qd.simt.warp.active_mask(), qd.i32)
            qd.simt.warp.sync(0xFFFFFFFF)
            a[i] = s

    try:
        ck = _instance(k, (np.zeros(64, np.int32), np.zeros(64, np.float32)), monkeypatch)
    finally:
        qd.reset()
    ptx = nvptx.compile_ptx(ck.ir, False).ptx
    for pattern in (r"shfl\.sync\.bfly", r"vote\.sync\.all", r"vote\.sync\.any", r"vote\.sync\.uni", r"match\.any",
                    r"match\.all", r"activemask"):
        assert re.search(pattern, ptx), f"no {pattern} in the PTX"
    nvptx.ptxas(ptx)


def test_shared_memory_limit() -> None:
    """More static shared memory than a CUDA block has: a compile error naming the bytes, before PTX is made."""
    from qd import ir
    from qd.errors import QuadrantsCompilationError
    from qd.jit import nvptx_simt

    decl = ir.BufferDecl(kind="shared", dtype=qd.f32, shape=(13 * 1024,))
    ptr = ir.GlobalPtr(buffer=0, indices=(ir.Const(dtype=qd.i32, value=0),), dtype=qd.f32)
    task = ir.Task(kind="serial", body=ir.Block((ptr.indices[0], ptr)))
    k = ir.KernelIR(name="big", args=(), buffers=(decl,), rets=(), checks=(), body=ir.Block(), tasks=(task,))
    with pytest.raises(QuadrantsCompilationError, match="53248 bytes"):
        nvptx_simt.check_shared_bytes(k)


def test_large_shared_arrays_use_dynamic_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shared arrays past CUDA's 48 KiB of static shared memory (Genesis sizes its tiles by the device's opt-in
    maximum, `get_max_shared_memory_bytes`) go to the block's dynamic shared memory: one `.extern .shared` array,
    each SharedArray at its own 16-byte-aligned offset, the launch asking for the bytes its task uses."""
    from qd.jit import nvptx_simt

    qd.init(arch=qd.interp, log_level="warn")

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, ndim=1)):
        qd.loop_config(block_dim=128)
        for i in range(x.shape[0]):
            big = qd.simt.block.SharedArray((128, 130), qd.f32)  # 66560 bytes
            small = qd.simt.block.SharedArray((3,), qd.i32)
            t = qd.simt.block.thread_idx()
            big[t, t] = x[i]
            small[t % 3] = t
            qd.simt.block.sync()
            x[i] = big[127 - t, 127 - t] + small[0]

    try:
        ck = _instance(k, (np.zeros(256, np.float32),), monkeypatch)
    finally:
        qd.reset()
    lay = nvptx_simt.layout(ck.ir)
    assert lay is not None and sorted(lay.values()) == [0, 66560]
    assert nvptx_simt.dynamic_bytes(ck.ir) == [66560 + 12]
    ptx = nvptx.compile_ptx(ck.ir, False).ptx
    assert re.search(r"\.extern \.shared \.align 16 \.b8 qd_dynamic_shared\[\]", ptx)
    assert not re.search(r"\.shared \.align 16 \.b8 qd_shared\d+\[", ptx)
    nvptx.ptxas(ptx)
