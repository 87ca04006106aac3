"""Disk-cache entries whose digest matches but whose contents are bad for the loader (issue 27 item 13): the next
run compiles afresh and gives the right result, never a crash loop.

An entry is rewritten through `qd.codegen.cache.store` (which records the digest of what it is given), then a child
process runs the kernel: the structural checks (`qd.jit.objcheck` for LLVM's object loader, `spirv_cache.problem`)
or the driver's refusal make it a miss that deletes the entry; a load that crashes the child (PoCL's binary loader
on a truncated binary, code that traps) leaves a marker naming the dead process, and the run after deletes the
entry. Children, because a crash must not take the test run with it.
"""

from __future__ import annotations

import glob
import os
import pickle
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import qd
from qd.codegen import cache
from qd.jit import objcheck

_CHILD = """
import sys
import numpy as np
import qd

qd.init(arch=getattr(qd, sys.argv[1]), log_level="warn", offline_cache=True, offline_cache_file_path=sys.argv[2],
        jit="eager")

@qd.kernel
def k(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:
    s = 0.0
    for i in x:
        x[i] = x[i] * 2.0 + 1.0
        s += x[i]
    return s

x = np.arange(1000, dtype=np.float32)
print("RESULT", k(x), x[999], k.stats["from_cache"], flush=True)
"""
_RIGHT = (1000000.0, 1999.0)


def _run(arch: str, root: Path) -> tuple[int, str, bool | None]:
    """(exit status, output, whether the code came from the cache) of one child run."""
    script = root / "child.py"
    script.write_text(textwrap.dedent(_CHILD))
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               POCL_CACHE_DIR=str(root / "pocl"))
    r = subprocess.run([sys.executable, str(script), arch, str(root / "cache")], check=False, capture_output=True,
                       text=True, cwd=repo, env=env, timeout=300)
    out = r.stdout + r.stderr
    for line in r.stdout.splitlines():
        if line.startswith("RESULT"):
            _, total, last, hit = line.split()
            assert (float(total), float(last)) == _RIGHT, out
            return r.returncode, out, hit == "True"
    return r.returncode, out, None


def _entries(root: Path, sub: str) -> list[tuple[str, str, bytes, Any]]:
    """(directory, key, object bytes, meta) of the entries a child left in the `sub` cache (the CUDA tier: its
    PTX and its cubin)."""
    out = []
    for m in sorted(glob.glob(str(root / "cache" / sub / "*.meta"))):
        d, key = os.path.dirname(m), os.path.basename(m)[:-5]
        with open(m, "rb") as f:
            meta = pickle.load(f)[3]
        out.append((d, key, cache.load(d, key)[0], meta))
    assert out
    return out


def _check_recovery(arch: str, root: Path, sub: str, corrupt: Callable[[bytes], bytes], may_crash: bool) -> None:
    assert _run(arch, root)[2] is False  # compiled, and stored
    assert _run(arch, root)[2] is True  # from the cache
    for d, key, obj, meta in _entries(root, sub):
        cache.store(d, key, corrupt(obj), meta)  # a bad object whose digest matches
        assert cache.load(d, key) is not None
    rc, out, hit = _run(arch, root)
    if hit is None:  # the loader crashed the child: the next run must not load the entry again
        assert may_crash and rc != 0, out
        rc, out, hit = _run(arch, root)
    assert rc == 0 and hit is False, out  # compiled afresh, right (checked in `_run`)
    assert _run(arch, root)[2] is True  # and stored again, sound


# ------------------------------------------------------------ the CPU tier: ELF objects for LLVM's loader

def _sections(obj: bytes) -> list[tuple[int, int, int, int, int]]:
    """(header offset, type, file offset, size, entry size) of every section of an ELF64 object."""
    shoff, = struct.unpack_from("<Q", obj, 40)
    shnum, = struct.unpack_from("<H", obj, 60)
    out = []
    for i in range(shnum):
        h = shoff + 64 * i
        _, typ, _, _, off, size, _, _, _, entsize = struct.unpack_from("<IIQQQQIIQQ", obj, h)
        out.append((h, typ, off, size, entsize))
    return out


def _garbage(obj: bytes) -> bytes:
    return bytes(np.random.default_rng(1).integers(0, 256, len(obj), dtype=np.uint8))


def _truncated(obj: bytes) -> bytes:
    return obj[:len(obj) * 2 // 3]


def _section_table_outside(obj: bytes) -> bytes:
    b = bytearray(obj)
    struct.pack_into("<Q", b, 40, len(obj) + 4096)
    return bytes(b)


def _section_outside(obj: bytes) -> bytes:
    b = bytearray(obj)
    h = next(h for h, typ, _, size, _ in _sections(obj) if typ == 1 and size)  # the first PROGBITS with bytes
    struct.pack_into("<Q", b, h + 24, 1 << 40)
    return bytes(b)


def _symbol_common(obj: bytes) -> bytes:
    """A defined function symbol turned into a common one (LLVM asserted on its alignment)."""
    b = bytearray(obj)
    _, _, off, size, _ = next(s for s in _sections(obj) if s[1] == 2)
    for k in range(size // 24):
        if b[off + 24 * k + 4] & 0xF == 2:  # STT_FUNC
            b[off + 24 * k + 4] = (b[off + 24 * k + 4] & 0xF0) | 5
            return bytes(b)
    raise AssertionError("no function symbol")


def _relocation_file_symbol(obj: bytes) -> bytes:
    """A relocation naming the file symbol (LLVM: UNREACHABLE "Unresolved symbol type")."""
    b = bytearray(obj)
    _, _, symoff, symsize, _ = next(s for s in _sections(obj) if s[1] == 2)
    files = [k for k in range(symsize // 24) if b[symoff + 24 * k + 4] & 0xF == 4]
    _, _, off, _, _ = next(s for s in _sections(obj) if s[1] == 4 and s[3])
    info, = struct.unpack_from("<Q", b, off + 8)
    struct.pack_into("<Q", b, off + 8, (files[0] << 32) | (info & 0xFFFFFFFF))
    return bytes(b)


def _code_traps(obj: bytes) -> bytes:
    """Every executable byte an `int3`: well-formed, loads, and kills the process at its first run."""
    b = bytearray(obj)
    shoff, = struct.unpack_from("<Q", obj, 40)
    shnum, = struct.unpack_from("<H", obj, 60)
    for i in range(shnum):
        _, typ, flags, _, off, size, _, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i)
        if typ == 1 and flags & 4 and size:  # PROGBITS, SHF_EXECINSTR
            b[off:off + size] = b"\xcc" * size
    return bytes(b)


_ELF_DAMAGE = [_garbage, _truncated, _section_table_outside, _section_outside, _symbol_common,
               _relocation_file_symbol]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU tier's objects are ELF on Linux only")
@pytest.mark.parametrize("damage", _ELF_DAMAGE + [_code_traps], ids=lambda f: f.__name__.strip("_"))
def test_cpu_entry_with_a_bad_object(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    _check_recovery("cpu", tmp_path, "cpu", damage, may_crash=damage is _code_traps)


def test_objcheck_passes_what_llvm_emits_and_names_each_damage(tmp_path: Path) -> None:
    """Without loading anything: the real object has no problem, each damage above has one."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the CPU tier's objects are ELF on Linux only")
    qd.init(arch=qd.cpu, log_level="warn", offline_cache=True, offline_cache_file_path=str(tmp_path / "cache"),
            jit="eager")
    try:
        @qd.kernel
        def k(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:
            s = 0.0
            for i in x:
                s += qd.sin(x[i])
            return s

        k(np.ones(100, np.float32))
    finally:
        qd.reset()
    (_, _, obj, meta), = _entries(tmp_path, "cpu")
    names = [n for s in meta[0] for n in (s.fn, s.prologue) if n]
    assert objcheck.problem(obj, names) is None
    assert "not defined" in objcheck.problem(obj, names + ["qd_no_such_task"])
    for damage in _ELF_DAMAGE:
        assert objcheck.problem(damage(obj), names) is not None, damage.__name__


# ------------------------------------------------------------ the GPU tiers' caches

@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
@pytest.mark.archs("opencl")
def test_opencl_entry_with_a_bad_binary(arch: Any, tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    """A binary PoCL refuses is deleted at once; a truncated one made PoCL's loader assert (the run after
    deletes it)."""
    _check_recovery("opencl", tmp_path, "opencl", damage, may_crash=True)


def _spirv_stream_broken(words: bytes) -> bytes:
    b = bytearray(words)
    struct.pack_into("<I", b, 20, 0)  # the first instruction: 0 words
    return bytes(b)


def _spirv_constant_refused(words: bytes) -> bytes:
    """Well-formed words the driver refuses: an id far above the module's bound in every instruction's first
    operand."""
    w = np.frombuffer(words, np.uint32).copy()
    pos = 5
    while pos < len(w):
        n = int(w[pos]) >> 16
        if n > 1:
            w[pos + 1] = 0xFFFFFF
        pos += n
    return w.tobytes()


@pytest.mark.parametrize("damage", [_garbage, _truncated, _spirv_stream_broken, _spirv_constant_refused],
                         ids=["garbage", "truncated", "stream", "refused"])
@pytest.mark.archs("vulkan")
def test_vulkan_entry_with_bad_spirv(arch: Any, tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    _check_recovery("vulkan", tmp_path, "vulkan", damage, may_crash=True)


@pytest.mark.parametrize("damage", [_garbage, _truncated], ids=["garbage", "truncated"])
@pytest.mark.archs("cuda")
def test_cuda_entries_with_bad_ptx_and_cubin(arch: Any, tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    """Both of the CUDA tier's entries damaged: the PTX is refused (no text, or no entry point) or the driver
    refuses it, and the cubin the driver refuses is made again."""
    _check_recovery("cuda", tmp_path, "cuda", damage, may_crash=True)


def test_ptx_entry_that_is_no_ptx(tmp_path: Path) -> None:
    """The PTX cache (no GPU needed): bytes that are no UTF-8, or PTX without the task's entry point, are a miss
    that deletes the entry; the next compile stores it again."""
    from qd.jit import nvptx

    qd.init(arch=qd.interp, log_level="warn")
    try:
        @qd.kernel
        def k(x: qd.types.ndarray(qd.f32, 1)):
            for i in range(x.shape[0]):
                x[i] = x[i] * 2 + 1

        k(np.ones(4, np.float32))
        (ck, _), = k._instances.values()
        first = nvptx.compile_ptx(ck.ir, False, "sm_90", str(tmp_path))
        for bad in (b"\xff\xfe not utf-8", first.ptx.replace(".entry", ".func").encode()):
            cache.store(str(tmp_path), first.cache_key, bad, (first.tasks, first.prints, first.check_args))
            again = nvptx.compile_ptx(ck.ir, False, "sm_90", str(tmp_path))
            assert not again.from_cache and again.ptx == first.ptx
            assert nvptx.compile_ptx(ck.ir, False, "sm_90", str(tmp_path)).from_cache
    finally:
        qd.reset()


# ------------------------------------------------------------ the guard itself

def test_load_with_deletes_what_the_loader_refuses_and_what_crashed_a_process(tmp_path: Path) -> None:
    d = str(tmp_path)
    cache.store(d, "a", b"object", "meta")
    assert cache.load_with(d, "a", lambda obj, meta: (obj, meta)) == (b"object", "meta")
    assert not os.path.exists(os.path.join(d, "a.loading"))  # the marker is gone after the load

    def refuse(obj: bytes, meta: Any) -> None:
        raise ValueError("bad")

    assert cache.load_with(d, "a", refuse) is None and cache.load(d, "a") is None  # refused: deleted

    cache.store(d, "b", b"object", None)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True,
                          text=True).stdout.strip()
    with open(os.path.join(d, "b.loading"), "w") as f:  # a process that died while it loaded "b"
        f.write(dead)
    assert cache.load_with(d, "b", lambda obj, meta: obj) is None and cache.load(d, "b") is None

    cache.store(d, "c", b"object", None)
    with open(os.path.join(d, "c.loading"), "w") as f:  # one loading it now: left alone
        f.write(str(os.getppid()))
    assert cache.load_with(d, "c", lambda obj, meta: obj) == b"object"

    cache.store(d, "e", b"object", None)
    assert cache.load_with(d, "e", lambda obj, meta: obj, until_confirmed=True) == b"object"
    assert os.path.exists(os.path.join(d, "e.loading"))  # on probation until the code ran
    cache.confirm(d, "e")
    assert not os.path.exists(os.path.join(d, "e.loading")) and cache.load(d, "e") is not None


def test_a_cut_cubin_is_refused_before_the_driver_sees_it() -> None:
    """The CUDA tier checks a cached cubin is a whole ELF file (the driver loaded one cut to 2/3 on an H100 and ran
    it); no GPU needed: any 64-bit ELF file stands for a cubin."""
    from qd.gpu.cuda_tier import _sound_cubin

    elf = Path(os.path.realpath(sys.executable)).read_bytes()
    assert _sound_cubin(elf) is elf
    for bad in (_truncated(elf), elf[:63], b"\x7fELF" + bytes(100), _section_table_outside(elf)):
        with pytest.raises(ValueError):
            _sound_cubin(bad)
