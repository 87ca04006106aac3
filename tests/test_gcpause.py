"""The garbage collector paused while a kernel instance is built (`qd/base/gcpause.py`): off during the build,
back on after it (also after a failed build), nested and concurrent builds, and a collector the program disabled."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import qd
from qd.base import gcpause


@pytest.fixture(autouse=True)
def _program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()
    gc.enable()


def test_the_collector_is_off_while_a_kernel_builds_and_on_after():
    seen = []

    def probe() -> int:
        seen.append(gc.isenabled())
        return 3

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            x[i] = i * 0 + qd.static(probe())

    x = np.zeros(4, np.int32)
    assert gc.isenabled()
    k(x)
    assert seen == [False] and gc.isenabled()
    np.testing.assert_array_equal(x, np.full(4, 3, np.int32))

    @qd.kernel
    def bad(x: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            x[i] = qd.static(probe()) + undefined_name  # noqa: F821

    with pytest.raises(Exception, match="undefined_name"):
        bad(x)
    assert gc.isenabled()


def test_nested_and_concurrent_pauses_end_with_the_last_and_keep_a_disabled_collector():
    with gcpause.paused():
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()

    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with gcpause.paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(10)
    with gcpause.paused():
        pass
    assert not gc.isenabled()  # the other thread's build is still going
    release.set()
    t.join()
    assert gc.isenabled()

    gc.disable()
    with gcpause.paused():
        pass
    assert not gc.isenabled()


def test_the_collector_is_off_while_native_code_is_compiled(monkeypatch):
    from qd.jit import cpu, tiering
    from qd.ir_parse import parse_kernel

    seen = []
    real = cpu.compile_native

    def recording(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(cpu, "compile_native", recording)
    native = tiering._compile(parse_kernel(cpu._WARM_UP_KERNEL), quick=True, options=(False, False, None))
    assert seen == [False] and gc.isenabled() and native.tasks
