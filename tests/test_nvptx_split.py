"""A large kernel's PTX is several modules, optimised side by side (`qd.jit.nvptx.task_groups`, the compile workers):
each task's entry point lies in the module `module_of` names, each module is whole PTX (assembled by `ptxas` where
the toolkit is installed), a compile worker answers the PTX this process makes, and the disk cache gives the modules
back as they were."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.jit import compile_worker, nvptx

N = 64


def _big_kernel_ir():
    """An offloaded kernel of five tasks: two large (unrolled work on an 8-vector), three small."""
    qd.init(arch=qd.interp, log_level="warn")
    try:
        x = qd.field(qd.f32, shape=N)
        y = qd.field(qd.f32, shape=N)

        @qd.kernel
        def big(m: qd.i32):
            for i in range(N):
                y[i] = x[i] * 2.0
            for i in range(N):
                v = qd.Vector.zero(qd.f32, 8)
                for j in qd.static(range(8)):
                    for r in qd.static(range(4)):
                        v[j] += x[(i + j + r) % N] * (r + 1)
                y[i] += v.sum()
            for i in range(N):
                y[i] -= 1.0
            for i in range(N):
                w = qd.Vector.zero(qd.f32, 8)
                for j in qd.static(range(8)):
                    for r in qd.static(range(4)):
                        w[j] += y[(i + j * r) % N] / (r + 2)
                x[i] = w.norm() + m
            for i in range(N):
                x[i] *= 0.5

        x.from_numpy(np.linspace(0, 1, N, dtype=np.float32))
        big(3)
        (ck, _), = big._instances.values()
        return ck.ir
    finally:
        qd.reset()


@pytest.fixture
def big_ir(monkeypatch: pytest.MonkeyPatch):
    """The kernel, with the split thresholds scaled to its size (a Genesis kernel is 100x larger)."""
    monkeypatch.setattr(nvptx, "SPLIT_STATEMENTS", 400)
    monkeypatch.setattr(nvptx, "ALONE_STATEMENTS", 100)
    return _big_kernel_ir()


def test_a_large_kernel_is_several_modules(big_ir) -> None:
    groups = nvptx.task_groups(big_ir)
    assert sorted(n for g in groups for n in g) == list(range(len(big_ir.tasks))) == list(range(5))
    assert len(groups) == 3 and [1] in groups and [3] in groups  # the two large tasks alone, the rest together
    pk = nvptx.compile_ptx(big_ir, True)
    assert len(pk.modules) == 3 and len(pk.module_of) == 5
    for (kind, sym), m in zip(pk.tasks, pk.module_of):
        assert kind == "range"
        assert f".entry {sym}(" in pk.modules[m]
        assert all(f".entry {sym}(" not in text for j, text in enumerate(pk.modules) if j != m)
    if nvptx.ptxas_path() is not None:
        nvptx.ptxas(pk.ptx)  # each module on its own


def test_a_small_kernel_stays_one_module() -> None:
    qd.init(arch=qd.interp, log_level="warn")
    try:
        x = qd.field(qd.f32, shape=8)

        @qd.kernel
        def small():
            for i in range(8):
                x[i] = i
            for i in range(8):
                x[i] += 1.0

        small()
        (ck, _), = small._instances.values()
    finally:
        qd.reset()
    pk = nvptx.compile_ptx(ck.ir, True)
    assert len(pk.modules) == 1 and nvptx.MODULE_MARK not in pk.ptx and pk.module_of == [0, 0]


def test_a_compile_worker_answers_the_same_ptx(big_ir) -> None:
    from qd.jit.llvm import build_modules

    built = build_modules(big_ir, nvptx.target(), True, [[1]])[0]
    text = str(built.module)
    kernels = [f.name for f in built.module.functions if f.calling_convention == "ptx_kernel"]
    w = compile_worker.Worker()
    try:
        assert compile_worker._recv(w.proc.stdout) == ("ready",)
        there = w.compile_ptx(text, kernels, "sm_90")
    finally:
        w.close()
    assert there == nvptx._optimise_here(text, kernels, "sm_90")
    assert ".entry " + kernels[0] + "(" in there


def test_the_disk_cache_gives_the_modules_back(big_ir, tmp_path) -> None:
    first = nvptx.compile_ptx(big_ir, True, "sm_90", str(tmp_path))
    again = nvptx.compile_ptx(big_ir, True, "sm_90", str(tmp_path))
    assert not first.from_cache and again.from_cache
    assert again.modules == first.modules and again.module_of == first.module_of and again.tasks == first.tasks


def test_the_largest_module_comes_first(big_ir) -> None:
    sizes = nvptx._sizes(big_ir)
    weights = [sum(sizes[n] for n in g) for g in nvptx.task_groups(big_ir)]
    assert weights == sorted(weights, reverse=True)


def test_each_module_goes_on_as_it_is_made(big_ir) -> None:
    """`each` sees every module's PTX once (the CUDA tier's driver module), `made` keeps its answers in module
    order; a cache hit applies nothing."""
    seen: list[str] = []
    pk = nvptx.compile_ptx(big_ir, True, "sm_90", each=lambda ptx: (seen.append(ptx), len(ptx))[1])
    assert sorted(seen) == sorted(pk.modules)
    assert pk.made == [len(text) for text in pk.modules]
    assert nvptx.compile_ptx(big_ir, True, "sm_90").made is None


def test_a_failing_module_releases_the_others(big_ir) -> None:
    """Where `each` fails for one module, what it gave for the others is released (`undo`) and the error raised."""
    given, undone = [], []

    def each(ptx: str) -> int:
        if "_kernel1(" in ptx:  # task 1's module
            raise RuntimeError("the driver refused a module")
        given.append(len(ptx))
        return len(ptx)

    with pytest.raises(RuntimeError, match="refused"):
        nvptx.compile_ptx(big_ir, True, "sm_90", each=each, undo=undone.append)
    assert len(given) == 2 and sorted(undone) == sorted(given)


def test_llvm_refusing_a_module_in_a_worker_raises_as_in_process(monkeypatch) -> None:
    """A module LLVM refuses in a compile worker (its `ParseError`) raises what the in-process path raises: the
    module is made again here, so the caller sees LLVM's RuntimeError whichever process optimised it."""
    w = compile_worker.Worker()
    assert compile_worker._recv(w.proc.stdout) == ("ready",)
    monkeypatch.setattr(compile_worker, "take", lambda: w)
    monkeypatch.setattr(compile_worker, "give_back", lambda _: None)
    try:
        with pytest.raises(compile_worker.ParseError):  # (the worker's own answer)
            w.compile_ptx("this is not LLVM IR", [], "sm_90")
        with pytest.raises(RuntimeError) as here:
            nvptx._optimise_here("this is not LLVM IR", [], "sm_90")
        with pytest.raises(RuntimeError) as anywhere:
            nvptx._optimise_anywhere("this is not LLVM IR", [], "sm_90")
    finally:
        w.close()
    assert str(anywhere.value) == str(here.value)
