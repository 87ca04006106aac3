"""The SPIR-V module builder (`qd/gpu/spirv_module.py`) and its generated definitions: encoding against the
specification's rules, deduplication, and whole compute modules checked by `spirv-val` (skipped, with the
reason, where spirv-tools is not installed)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from qd.gpu import spirv_gen
from qd.gpu.spirv_defs import (GLSL, AddressingModel, BuiltIn, Capability, Decoration, ExecutionMode,
                               ExecutionModel, MemoryModel, Op, StorageClass)
from qd.gpu.spirv_module import Module, Wide, encode

SPIRV_VAL = shutil.which("spirv-val")
needs_val = pytest.mark.skipif(SPIRV_VAL is None, reason="spirv-val not found (Debian package spirv-tools)")


def _validate(m: Module, tmp_path, env: str = "vulkan1.1") -> None:
    path = tmp_path / "m.spv"
    path.write_bytes(m.to_bytes())
    r = subprocess.run([SPIRV_VAL, "--target-env", env, str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _doubling_shader(dtype_width: int = 32) -> Module:
    """out[i] = f(in[i]) * 2 + i for i = gl_GlobalInvocationID.x, over StorageBuffer runtime arrays; f is
    GLSL.std.450 Sin for f32 and FAbs for f64 (Sin has no f64 form: spirv-val refuses it, so the SPIR-V
    emitter needs its own f64 transcendentals). Under SPIR-V 1.3 the entry point's interface lists only
    Input/Output variables."""
    m = Module((1, 3))
    m.capability(Capability.Shader)
    if dtype_width == 64:
        m.capability(Capability.Float64)
    m.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    glsl = m.import_ext("GLSL.std.450")
    u32, f = m.int(32, False), m.float(dtype_width)
    arr = m.runtime_array(f)
    m.decorate(arr, Decoration.ArrayStride, dtype_width // 8)
    block = m.struct(arr, unique=True)
    m.decorate(block, Decoration.Block)
    m.member_decorate(block, 0, Decoration.Offset, 0)
    pblock = m.pointer(StorageClass.StorageBuffer, block)
    bufs = []
    for binding in (0, 1):
        v = m.variable(pblock, StorageClass.StorageBuffer)
        m.decorate(v, Decoration.DescriptorSet, 0)
        m.decorate(v, Decoration.Binding, binding)
        bufs.append(v)
    v3 = m.vector(u32, 3)
    gid = m.variable(m.pointer(StorageClass.Input, v3), StorageClass.Input)
    m.decorate(gid, Decoration.BuiltIn, BuiltIn.GlobalInvocationId)
    void = m.void()
    fn = m.function(void, m.function_type(void))
    m.entry_point(ExecutionModel.GLCompute, fn.id, "main", (gid,))
    m.execution_mode(fn.id, ExecutionMode.LocalSize, 64, 1, 1)
    m.name(fn.id, "main")
    fn.label()
    g = fn.op(Op.Load, gid, type_id=v3)
    i = fn.op(Op.CompositeExtract, g, 0, type_id=u32)
    pf = m.pointer(StorageClass.StorageBuffer, f)
    zero = m.constant(u32, 0)
    src = fn.op(Op.AccessChain, bufs[0], zero, i, type_id=pf)
    x = fn.op(Op.Load, src, type_id=f)
    s = fn.op(Op.ExtInst, glsl, GLSL.Sin if dtype_width == 32 else GLSL.FAbs, x, type_id=f)
    y = fn.op(Op.FMul, s, m.constant(f, 2.0), type_id=f)
    fi = fn.op(Op.ConvertUToF, i, type_id=f)
    z = fn.op(Op.FAdd, y, fi, type_id=f)
    dst = fn.op(Op.AccessChain, bufs[1], zero, i, type_id=pf)
    fn.op(Op.Store, dst, z)
    fn.op(Op.Return)
    fn.end()
    return m


def test_encoding_rules() -> None:
    # word 0: word count << 16 | opcode; a string is nul-terminated and padded to whole words
    assert encode(Op.Name, (7, "abc")) == [(3 << 16) | Op.Name, 7, int.from_bytes(b"abc\0", "little")]
    assert encode(Op.Name, (7, "abcd"))[2:] == [int.from_bytes(b"abcd", "little"), 0]
    assert encode(Op.Constant, (1, 2, Wide(0x1_0000_0002, 2)))[3:] == [2, 1]
    assert encode(Op.Constant, (1, 2, -1))[3] == 0xFFFFFFFF
    with pytest.raises(ValueError, match="does not fit a word"):
        encode(Op.Constant, (1, 2, 1 << 40))


def test_header_dedup_and_section_order() -> None:
    m = Module((1, 3))
    m.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    f32 = m.float(32)
    assert m.float(32) == f32 and m.int(32, True) != m.int(32, False)
    assert m.constant(f32, 1.5) == m.constant(f32, 1.5) != m.constant(f32, -1.5)
    assert m.struct(f32, unique=True) != m.struct(f32, unique=True)
    m.capability(Capability.Shader)  # declared after types: still written first
    m.capability(Capability.Shader)
    w = m.words()
    assert w[:5] == [0x07230203, 0x00010300, 0, m.bound, 0]
    ops, k = [], 5
    while k < len(w):
        ops.append(w[k] & 0xFFFF)
        k += w[k] >> 16
    assert ops[0] == Op.Capability and ops.count(Op.Capability) == 1 and ops[1] == Op.MemoryModel
    i64 = m.int(64, True)
    c = m.constant(i64, -2)
    assert m.sec["globals"][-1] == [(5 << 16) | Op.Constant, i64, c, 0xFFFFFFFE, 0xFFFFFFFF]  # two words, low first
    with pytest.raises(ValueError, match="OpMemoryModel"):
        Module().words()


def test_function_rules() -> None:
    m = Module()
    void = m.void()
    fn = m.function(void, m.function_type(void))
    with pytest.raises(ValueError, match="before the function's first OpLabel"):
        fn.op(Op.Return)
    fn.label()
    with pytest.raises(ValueError, match="needs result type"):
        fn.op(Op.Load, 1)
    with pytest.raises(ValueError, match="takes no result type"):
        fn.op(Op.Store, 1, 2, type_id=void)


@needs_val
@pytest.mark.parametrize("width", [32, 64])
def test_compute_module_validates(tmp_path, width: int) -> None:
    _validate(_doubling_shader(width), tmp_path)


@needs_val
def test_spirv_val_rejects_a_broken_module(tmp_path) -> None:
    """The validation above can fail: the same module without its Block decoration is refused."""
    m = _doubling_shader()
    m.sec["annotations"] = [ins for ins in m.sec["annotations"] if ins[2:3] != [Decoration.Block]]
    path = tmp_path / "bad.spv"
    path.write_bytes(m.to_bytes())
    r = subprocess.run([SPIRV_VAL, "--target-env", "vulkan1.1", str(path)], capture_output=True, text=True)
    assert r.returncode != 0


@pytest.mark.skipif(not os.path.exists(os.path.join(spirv_gen.DEFAULT_DIR, "spirv.core.grammar.json")),
                    reason="the Khronos grammar JSON is not installed (Debian package spirv-headers)")
def test_checked_in_definitions_are_the_generator_output() -> None:
    with open(spirv_gen.OUT) as f:
        assert f.read() == spirv_gen.render(), "run `python -m qd.gpu.spirv_gen` and commit qd/gpu/spirv_defs.py"


def test_constants_encode_ieee_bits() -> None:
    m = Module()
    m.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    f64 = m.float(64)
    c = m.constant(f64, 0.1)
    ins = next(i for i in m.sec["globals"] if i[0] & 0xFFFF == Op.Constant and i[2] == c)
    assert ins[3] | (ins[4] << 32) == struct.unpack("<Q", struct.pack("<d", 0.1))[0]
