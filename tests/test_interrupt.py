"""Ctrl-C during a long kernel on the CPU tiers (`qd/_interp.pyx`: the chunked range driver polls Python's
signal handlers): SIGINT stops the launch within about a chunk with KeyboardInterrupt, the process stays
usable (the next launch is exact), and a SIGINT handler that does not raise leaves the kernel running to
its end. Each case runs in a child process, which the test signals."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import arch_skip_reason, selected_archs

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to a child process")

CHILD = textwrap.dedent("""
    import signal, sys, time
    import numpy as np
    import qd

    tier, threads, path, phase = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    qd.init(arch=getattr(qd, tier), log_level="warn", cpu_max_num_threads=threads, fast_math=False,
            **({"jit": "eager"} if tier == "cpu" else {}))

    @qd.kernel
    def spin(x: qd.types.ndarray(qd.f32, 1), m: qd.i32):
        for i in range(x.shape[0]):
            s = x[i]
            for j in range(m):
                s = s * 0.999 + 0.001
            x[i] = s

    def launch(x, m):  # "plan": the compiled launch plan (a call shaped like the last); "python": the Python path
        return spin(x, m) if path == "plan" else spin(x, m=m)

    ref = np.zeros(8, np.float32)
    spin(ref, 1000)
    launch(ref, 1000)  # warm: compiled, plan armed
    ref = np.zeros(8, np.float32)
    launch(ref, 1000)
    m = 10**5 if tier == "cpu" else 10**4

    def sized(seconds):  # an array whose launch takes about `seconds` (timed on 2^11 indices)
        probe = np.zeros(1 << 11, np.float32)
        t = time.perf_counter()
        launch(probe, m)
        per_index = (time.perf_counter() - t) / probe.size
        return np.zeros(int(min(1 << 24, max(1 << 12, seconds / per_index))), np.float32)

    if phase == "handler":  # a handler that does not raise: the kernel runs to its end
        hits = []
        signal.signal(signal.SIGINT, lambda *a: hits.append(time.perf_counter()))
        x = sized(3.0)
        print("started", flush=True)
        launch(x, m)
        end = time.perf_counter()
        small = np.zeros(8, np.float32)
        launch(small, m)
        print("handler", len(hits), bool(hits and hits[0] < end), bool(np.all(x == small[0])), flush=True)
        sys.exit(0)
    x = sized(60.0)
    print("started", flush=True)
    t = time.perf_counter()
    try:
        launch(x, m)
        print("finished", flush=True)
    except KeyboardInterrupt:
        print("interrupted", time.perf_counter() - t, flush=True)
    y = np.zeros(8, np.float32)
    launch(y, 1000)
    print("next", bool(np.array_equal(y, ref)), flush=True)
""")


def _child(tmp_path: pathlib.Path, tier: str, threads: int, path: str, phase: str) -> subprocess.Popen:
    why = arch_skip_reason(tier) if tier in selected_archs() else f"tier {tier!r} not selected by QD_TEST_ARCHS"
    if why is not None:
        pytest.skip(why)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = tmp_path / "child.py"  # a file: kernels need their source
    script.write_text(CHILD)
    return subprocess.Popen([sys.executable, str(script), tier, str(threads), path, phase], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=root)


def _line(p: subprocess.Popen) -> str:
    line = p.stdout.readline()
    if not line:
        p.wait(timeout=30)
        raise AssertionError(f"child ended (rc {p.returncode}): {p.stderr.read()[-3000:]}")
    return line.split()


@pytest.mark.parametrize("tier, threads, path", [("interp", 2, "python"), ("cpu", 1, "plan"), ("cpu", 2, "plan"),
                                                 ("cpu", 2, "python")])
def test_sigint_stops_a_long_kernel_and_the_next_launch_works(tmp_path: pathlib.Path, tier: str, threads: int,
                                                              path: str) -> None:
    p = _child(tmp_path, tier, threads, path, "interrupt")
    try:
        assert _line(p) == ["started"]
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        sent = time.perf_counter()
        words = _line(p)
        waited = time.perf_counter() - sent
        assert words[0] == "interrupted", words
        assert waited < 5.0, f"KeyboardInterrupt came {waited:.1f} s after SIGINT (the kernel takes minutes)"
        assert _line(p) == ["next", "True"]
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()


def test_a_sigint_handler_that_does_not_raise_leaves_the_kernel_running(tmp_path: pathlib.Path) -> None:
    p = _child(tmp_path, "cpu", 2, "plan", "handler")
    try:
        assert _line(p) == ["started"]
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        # the handler ran once, during the launch (not after it), and every index was computed
        assert _line(p) == ["handler", "1", "True", "True"]
        assert p.wait(timeout=30) == 0
    finally:
        p.kill()
        p.wait()
