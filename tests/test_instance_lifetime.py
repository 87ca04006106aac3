"""Kernel instances keyed by a template argument's identity live no longer than that object (issue 33: each
`@qd.data_oriented` object whose kernel ran stayed alive, ~45 MB each in Quadrants' `test_memory::
test_oop_memory_leak`), and identical instances share their machine code on the CPU tier."""

from __future__ import annotations

import gc
import weakref

import numpy as np

import qd


def _holder():
    @qd.data_oriented
    class Holder:
        def __init__(self, n: int) -> None:
            self.big = [0] * 100_000
            self.x = qd.field(qd.f32, shape=n)

        @qd.kernel
        def run(self):
            for i in self.x:
                self.x[i] = i * 2.0

    return Holder


def test_instances_of_a_dead_data_oriented_object_are_dropped(arch):
    Holder = _holder()
    refs = []
    for n in (4, 4, 8, 4, 16):
        h = Holder(n)
        h.run()
        np.testing.assert_array_equal(h.x.to_numpy(), np.arange(n, dtype=np.float32) * 2)
        refs.append(weakref.ref(h))
        del h
    gc.collect()
    assert all(r() is None for r in refs)
    assert not Holder.run._instances
    keep = Holder(4)  # a live object keeps its instance
    keep.run()
    gc.collect()
    assert len(Holder.run._instances) == 1


def test_identical_instances_share_their_machine_code():
    """Two objects' instances with the same IR load their code once (`qd.jit.cpu._LOADED`)."""
    from qd.jit import cpu

    qd.init(arch=qd.cpu, jit="eager", log_level="warn")
    Holder = _holder()
    first = Holder(4)
    first.run()
    loaded = len(cpu._LOADED)
    others = [Holder(4) for _ in range(4)]
    for h in others:
        h.run()
        np.testing.assert_array_equal(h.x.to_numpy(), np.arange(4, dtype=np.float32) * 2)
    assert len(cpu._LOADED) == loaded
    codes = {id(ck.tier.native._keep[0]) for ck, _ in Holder.run._instances.values()}
    assert len(codes) == 1 and len(Holder.run._instances) == 5


def test_dropped_machine_code_is_freed_under_the_compile_lock():
    """The last instance using some machine code may die in any thread (the collector runs where it runs); its
    engine is freed later under `qd.jit.cpu._lock`, not while another thread is in LLVM (that crashed a process
    running Quadrants' test_py_dataclass.py beside a background compile)."""
    import weakref as _weakref

    from qd.jit import cpu

    class Engine:  # (stands in for llvmlite's ExecutionEngine: freeing it is what must wait)
        pass

    engine = Engine()
    freed = _weakref.ref(engine)
    loaded = cpu._Loaded(engine, [], [], [], False)
    del engine, loaded
    gc.collect()
    assert freed() is not None, "the engine was freed by the collector, outside the lock"
    with cpu._lock:
        cpu._bury()
    assert freed() is None
