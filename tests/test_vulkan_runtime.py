"""The minimal Vulkan compute runtime (`qd/gpu/vulkan.py`): a module built by `spirv_module` runs on the
device (lavapipe on CPU machines) and matches numpy. Skipped, with the reason, without a Vulkan driver."""

from __future__ import annotations

import numpy as np
import pytest

from qd.gpu import vulkan as qvk
from tests.test_spirv_module import _doubling_shader


@pytest.fixture(scope="module")
def device():
    try:
        dev = qvk.Device()
    except qvk.VulkanUnavailable as e:
        pytest.skip(f"no Vulkan device: {e}")
    yield dev
    dev.close()


@pytest.mark.parametrize("width", [32, 64])
def test_dispatch_matches_numpy(device, width: int) -> None:
    n = 1000  # not a multiple of the workgroup size 64: the last group's extra invocations read past n
    dt = np.float32 if width == 32 else np.float64
    x = np.linspace(-3.0, 3.0, n).astype(dt)
    pad = 1024  # buffers hold a whole number of workgroups
    src, dst = device.buffer(pad * x.itemsize), device.buffer(pad * x.itemsize)
    src.write(np.concatenate([x, np.zeros(pad - n, dt)]))
    pipe = device.pipeline(_doubling_shader(width).words(), 2)
    try:
        device.dispatch(pipe, [src, dst], (pad // 64, 1, 1))
        got = dst.view(dt, n).copy()
    finally:
        pipe.destroy()
        src.destroy()
        dst.destroy()
    want = (np.sin(x) if width == 32 else np.abs(x)) * 2 + np.arange(n)
    np.testing.assert_allclose(got, want.astype(dt), rtol=1e-5 if width == 32 else 0, atol=1e-5 if width == 32 else 0)


def test_bad_device_name_is_a_clear_error(device, monkeypatch) -> None:
    monkeypatch.setenv("QD_VULKAN_DEVICE", "no-such-gpu")
    with pytest.raises(qvk.VulkanUnavailable, match="matches none of the Vulkan devices"):
        qvk.Device()


def _address_shader() -> "Module":
    """out[i] = in[i] * 3 + 1 (f32) through PhysicalStorageBuffer pointers: the two buffers' device
    addresses arrive as u64 push constants, `OpConvertUToPtr` turns `address + 4 i` into a pointer, and
    every access carries the Aligned operand that PhysicalStorageBuffer loads and stores need."""
    from qd.gpu.spirv_defs import (AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode, ExecutionModel,
                                   MemoryAccess, MemoryModel, Op, StorageClass)
    from qd.gpu.spirv_module import Module

    m = Module((1, 5))
    for cap in (Capability.Shader, Capability.Int64, Capability.PhysicalStorageBufferAddresses):
        m.capability(cap)
    m.memory_model(AddressingModel.PhysicalStorageBuffer64, MemoryModel.GLSL450)
    u32, u64, f32 = m.int(32, False), m.int(64, False), m.float(32)
    push = m.struct(u64, u64, unique=True)
    m.decorate(push, Decoration.Block)
    m.member_decorate(push, 0, Decoration.Offset, 0)
    m.member_decorate(push, 1, Decoration.Offset, 8)
    pc = m.variable(m.pointer(StorageClass.PushConstant, push), StorageClass.PushConstant)
    v3 = m.vector(u32, 3)
    gid = m.variable(m.pointer(StorageClass.Input, v3), StorageClass.Input)
    m.decorate(gid, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)
    void = m.void()
    fn = m.function(void, m.function_type(void))
    m.entry_point(ExecutionModel.GLCompute, fn.id, "main", (gid, pc))  # SPIR-V 1.4+: every global used
    m.execution_mode(fn.id, ExecutionMode.LocalSize, 64, 1, 1)
    fn.label()
    i = fn.op(Op.CompositeExtract, fn.op(Op.Load, gid, type_id=v3), 0, type_id=u32)
    off = fn.op(Op.IMul, fn.op(Op.UConvert, i, type_id=u64), m.constant(u64, 4), type_id=u64)
    ppc = m.pointer(StorageClass.PushConstant, u64)
    pf = m.pointer(StorageClass.PhysicalStorageBuffer, f32)

    def element(member: int) -> int:
        base = fn.op(Op.Load, fn.op(Op.AccessChain, pc, m.constant(u32, member), type_id=ppc), type_id=u64)
        return fn.op(Op.ConvertUToPtr, fn.op(Op.IAdd, base, off, type_id=u64), type_id=pf)

    x = fn.op(Op.Load, element(0), MemoryAccess.Aligned, 4, type_id=f32)
    prod = fn.op(Op.FMul, x, m.constant(f32, 3.0), type_id=f32)
    y = fn.op(Op.FAdd, prod, m.constant(f32, 1.0), type_id=f32)
    for rid in (prod, y):  # numpy rounds twice: no fused multiply-add (NVIDIA's compiler fuses otherwise)
        m.decorate(rid, Decoration.NoContraction)
    fn.op(Op.Store, element(1), y, MemoryAccess.Aligned, 4)
    fn.op(Op.Return)
    fn.end()
    return m


def test_physical_storage_buffer_addresses(device, tmp_path) -> None:
    """Buffers reached by device address (no per-binding size cap: 128 MiB on lavapipe), validated by
    spirv-val (SPIR-V 1.5, vulkan1.2) and run: the layout the SPIR-V emitter can use for every buffer."""
    import shutil
    import struct
    import subprocess

    if not device.features["device_address"]:
        pytest.skip(f"{device.name} has no bufferDeviceAddress")
    m = _address_shader()
    val = shutil.which("spirv-val")
    if val is not None:
        (tmp_path / "a.spv").write_bytes(m.to_bytes())
        r = subprocess.run([val, "--target-env", "vulkan1.2", str(tmp_path / "a.spv")], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    n = 256
    x = np.linspace(-1, 1, n).astype(np.float32)
    src, dst = device.buffer(x.nbytes), device.buffer(x.nbytes)
    src.write(x)
    pipe = device.pipeline(m.words(), 0, push_bytes=16)
    try:
        device.dispatch(pipe, [], (n // 64, 1, 1), push=struct.pack("<QQ", src.address, dst.address))
        got = dst.view(np.float32, n).copy()
    finally:
        pipe.destroy()
        src.destroy()
        dst.destroy()
    np.testing.assert_array_equal(got, x * np.float32(3) + np.float32(1))
