"""The NVPTX target (`qd/jit/nvptx.py`, issue 13): every corpus kernel's PTX is assembled by `ptxas -arch=sm_90`,
so a code generation regression fails CI on machines without a GPU; the entry kernels have the shape the CUDA
tier launches (one `ptx_kernel` per task, the grid-stride loop, libdevice math, relaxed atomics)."""

from __future__ import annotations

import pytest

import corpus
import qd
from qd.jit import nvptx
from qd.runtime import launch

NAMES = sorted(corpus.CASES)

pytestmark = pytest.mark.skipif(nvptx.ptxas_path() is None, reason="ptxas (CUDA toolkit) is not installed: the "
                                "NVPTX output is not assembled")


def _instances(case: corpus.Case, monkeypatch: pytest.MonkeyPatch) -> list:
    """The offloaded kernel instances a corpus case compiles (run once on the interpreter)."""
    found: list = []
    compile_kernel = launch.compile_kernel

    def recording(k):
        ck = compile_kernel(k)
        found.append((k.name, ck))
        return ck

    monkeypatch.setattr(launch, "compile_kernel", recording)
    try:
        corpus.build(case, qd.interp).run()
    finally:
        qd.reset()
        monkeypatch.undo()
    return found


@pytest.mark.parametrize("name", NAMES)
def test_corpus_ptx_assembles(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = corpus.CASES[name]
    found = _instances(case, monkeypatch)
    assert found, f"corpus case {name} compiled no kernel"
    for fast_math in (True, False):
        for kname, ck in found:
            if nvptx.libdevice_path() is None and "__nv_" in str(ck.ir):
                pytest.skip("libdevice is not installed")
            pk = nvptx.compile_ptx(ck.ir, fast_math)
            assert len(pk.tasks) == len(ck.ir.tasks)
            for kind, sym in pk.tasks:
                assert f".entry {sym}(" in pk.ptx
            nvptx.ptxas(pk.ptx)


def test_entry_kernels_grid_stride_and_math():
    qd.init(arch=qd.interp, log_level="warn")
    try:
        import numpy as np

        @qd.kernel
        def k(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 0)) -> qd.i32:
            for i in range(x.shape[0]):
                x[i] = qd.sin(x[i])
                s[None] += x[i]
            return 7

        assert k(np.ones(4, np.float32), np.zeros((), np.float32)) == 7
        (ck, _), = k._instances.values()
        pk = nvptx.compile_ptx(ck.ir, True)
    finally:
        qd.reset()
    assert [kind for kind, _ in pk.tasks] == ["range", "serial"]
    ptx = pk.ptx
    assert "%nctaid.x" in ptx and "%ctaid.x" in ptx  # the grid-stride loop
    assert "atom.add.f32" in ptx and "atom.acq_rel" not in ptx  # the chunk's sum, one relaxed atomic
    assert "__nv_sinf" not in ptx  # libdevice linked in and inlined
    nvptx.ptxas(ptx)


def test_ptx_disk_cache(tmp_path):
    """`compile_ptx(..., cache_dir)`: the second compile of the same instance comes from the disk, equal."""
    qd.init(arch=qd.interp, log_level="warn")
    try:
        import numpy as np

        @qd.kernel
        def k(x: qd.types.ndarray(qd.f32, 1)):
            for i in range(x.shape[0]):
                x[i] = x[i] * 2 + 1

        k(np.ones(4, np.float32))
        (ck, _), = k._instances.values()
        first = nvptx.compile_ptx(ck.ir, True, "sm_90", str(tmp_path))
        again = nvptx.compile_ptx(ck.ir, True, "sm_90", str(tmp_path))
        other = nvptx.compile_ptx(ck.ir, False, "sm_90", str(tmp_path))  # another key: compiled
    finally:
        qd.reset()
    assert not first.from_cache and again.from_cache and not other.from_cache
    assert again.ptx == first.ptx and again.tasks == first.tasks and again.check_args == first.check_args
