"""The CUDA tier's launch in C (`qd._launch.CudaRunner`, issue 13): a planned call of a kernel over fields and
qd ndarrays launches without Python, and gives what the Python path gives. Runs where a CUDA device is
present (a visible skip elsewhere; the lent GPU machines run it)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import qd
from tests.test_graph_do_while import nested_two

pytestmark = pytest.mark.archs("cuda")


def _runner(kernel):
    plan = kernel._last_ck.plan
    return plan.runner if plan else None


def _run_launches(kernel) -> int:
    r = _runner(kernel)
    return r.launches if r is not None else 0


def test_repeated_launches_go_through_the_runner(arch):
    @qd.kernel
    def add(x: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            x[i] += a

    x = qd.ndarray(qd.f32, (1000,))
    for _ in range(50):
        add(x, 1.0)
    np.testing.assert_array_equal(x.to_numpy(), np.full(1000, 50, np.float32))
    assert _run_launches(add) >= 45
    assert add.stats["launches"]["cuda"] == 50


def test_changing_arrays_scalars_and_sizes(arch):
    """More changes of the context words than the ring has slots, and grids that follow the arrays' sizes."""

    @qd.kernel
    def axpy(x: qd.types.ndarray(qd.i32, 1), y: qd.types.ndarray(qd.i32, 1), a: qd.i32):
        for i in range(x.shape[0]):
            y[i] += a * x[i]

    sizes = [3, 100_000, 1, 4097, 257, 70_000]
    rng = np.random.default_rng(1)
    xs = [rng.integers(-50, 50, n).astype(np.int32) for n in sizes]
    xd = [qd.ndarray(qd.i32, (n,)) for n in sizes]
    yd = [qd.ndarray(qd.i32, (n,)) for n in sizes]
    want = [np.zeros(n, np.int32) for n in sizes]
    for d, h in zip(xd, xs):
        d.from_numpy(h)
    for step in range(60):
        k = (step * 5) % len(sizes)
        a = step - 30
        axpy(xd[k], yd[k], a)
        want[k] += np.int32(a) * xs[k]
    for d, w in zip(yd, want):
        np.testing.assert_array_equal(d.to_numpy(), w)
    assert _run_launches(axpy) >= 50


def test_host_writes_between_launches_are_uploaded(arch):
    @qd.kernel
    def double(x: qd.types.ndarray(qd.f64, 1)):
        for i in range(x.shape[0]):
            x[i] *= 2.0

    x = qd.ndarray(qd.f64, (64,))
    x.from_numpy(np.arange(64, dtype=np.float64))
    double(x)
    double(x)
    x[5] = 100.0  # the host copy is newer: this launch takes the Python path, which uploads it
    double(x)
    want = np.arange(64, dtype=np.float64) * 8
    want[5] = 200.0
    np.testing.assert_array_equal(x.to_numpy(), want)
    x.from_numpy(np.ones(64))
    double(x)
    double(x)
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 4.0))


def test_fields_temporaries_and_generations(arch):
    f = qd.field(qd.f32, shape=(512,))
    g = qd.field(qd.i32, shape=())

    @qd.kernel
    def fill(s: qd.f32):
        base = g[None] * 2  # a serial part whose value the parallel loop reads: an offload temporary
        for i in range(512):
            f[i] = s * i + base
        g[None] += 1

    gen = f.generation
    for r in range(10):
        fill(float(r))
    assert f.generation == gen + 10
    np.testing.assert_allclose(f.to_numpy(), 9.0 * np.arange(512) + 2 * 9)
    assert g[None] == 10
    assert _run_launches(fill) >= 5


def test_numpy_arguments_take_the_python_path(arch):
    @qd.kernel
    def inc(x: qd.types.ndarray(qd.i64, 1)):
        for i in range(x.shape[0]):
            x[i] += 1

    a = np.zeros(300, np.int64)
    d = qd.ndarray(qd.i64, (300,))
    for _ in range(5):
        inc(a)
        inc(d)
    np.testing.assert_array_equal(a, np.full(300, 5))
    np.testing.assert_array_equal(d.to_numpy(), np.full(300, 5))


def test_random_numbers_equal_the_interpreters():
    @qd.kernel
    def draw(out: qd.types.ndarray(qd.f32, 1)):
        for i in range(out.shape[0]):
            out[i] = qd.random()

    def draws(a) -> list:
        qd.init(arch=a, log_level="warn", offline_cache=False, random_seed=11)
        out = []
        x = qd.ndarray(qd.f32, (128,))
        for _ in range(5):
            draw(x)
            out.append(x.to_numpy())
        return out

    from conftest import arch_skip_reason

    if arch_skip_reason("cuda"):
        pytest.skip(arch_skip_reason("cuda"))
    try:
        device, interpreted = draws(qd.cuda), draws(qd.interp)
    finally:
        qd.reset()
    for p, q in zip(device, interpreted):
        np.testing.assert_array_equal(p, q)
    assert not np.array_equal(device[0], device[1])


def test_launches_from_threads_and_freed_arrays(arch):
    @qd.kernel
    def add(x: qd.types.ndarray(qd.i32, 1), k: qd.i32):
        for i in range(x.shape[0]):
            x[i] += k

    arrays = [qd.ndarray(qd.i32, (5000,)) for _ in range(4)]
    for a in arrays:
        add(a, 0)

    def work(t: int) -> None:
        for _ in range(200):
            add(arrays[t], t + 1)
            tmp = qd.ndarray(qd.i32, (1000,))  # freed while launches may be in flight
            add(tmp, 1)
            del tmp

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t, a in enumerate(arrays):
        np.testing.assert_array_equal(a.to_numpy(), np.full(5000, 200 * (t + 1)))
    assert _run_launches(add) > 0


def test_compilers_are_warmed_only_where_kernels_will_be_compiled(tmp_path, monkeypatch):
    """The background warm-up (LLVM's load holds the interpreter lock) runs for a program without a disk cache or
    with an empty one, not where the cache holds compiled kernels; QD_CUDA_WARM_UP decides instead."""
    from types import SimpleNamespace

    from qd.gpu.cuda_tier import _warm_up_wanted

    monkeypatch.delenv("QD_CUDA_WARM_UP", raising=False)
    cfg = SimpleNamespace(offline_cache=True, offline_cache_file_path=str(tmp_path))
    assert _warm_up_wanted(cfg)  # no cache folder yet
    (tmp_path / "cuda").mkdir()
    assert _warm_up_wanted(cfg)  # an empty one
    (tmp_path / "cuda" / "entry.o").write_bytes(b"x")
    assert not _warm_up_wanted(cfg)
    assert _warm_up_wanted(SimpleNamespace(offline_cache=False, offline_cache_file_path=str(tmp_path)))
    monkeypatch.setenv("QD_CUDA_WARM_UP", "1")
    assert _warm_up_wanted(cfg)
    monkeypatch.setenv("QD_CUDA_WARM_UP", "0")
    assert not _warm_up_wanted(SimpleNamespace(offline_cache=False, offline_cache_file_path=str(tmp_path)))


def test_do_while_loops_go_through_the_runner(arch):
    """`qd.graph.do_while` kernels (Genesis' constraint solve) launch from the runner, which reads each loop's
    counter between runs of its tasks: nested loops (Quadrants' two-level kernel), a loop over a field, and counts
    that change between launches, all against the closed form."""

    nested = nested_two()

    x = qd.ndarray(qd.i32, (300,))
    outer, inner = qd.ndarray(qd.i32, ()), qd.ndarray(qd.i32, ())
    total = 0
    for n_outer, n_inner in ((2, 3), (1, 1), (4, 5), (3, 2), (1, 7)):
        outer.from_numpy(np.array(n_outer, np.int32))
        nested(x, outer, inner, n_inner)
        total += n_outer * n_inner
        np.testing.assert_array_equal(x.to_numpy(), np.full(300, total, np.int32))
        assert outer.to_numpy() == 0 and inner.to_numpy() == 0
    assert _run_launches(nested) >= 3

    acc = qd.field(qd.f32, shape=8)

    @qd.kernel(graph=True)
    def halve(counter: qd.types.ndarray(qd.i32, 0), v: qd.f32):
        while qd.graph.do_while(counter):
            for i in range(8):
                acc[i] = acc[i] * 0.5 + v
            for _ in range(1):
                counter[()] = counter[()] - 1

    counter = qd.ndarray(qd.i32, ())
    want = np.zeros(8, np.float32)
    for n in (3, 1, 6, 2):
        counter[()] = n
        halve(counter, 1.0)
        for _ in range(n):
            want = want * np.float32(0.5) + np.float32(1.0)
        np.testing.assert_allclose(acc.to_numpy(), want, rtol=1e-6)
    assert _run_launches(halve) >= 2


def _graph_loop_runs() -> dict:
    """A one-level loop's results over launches whose counts and extents change, and the nested kernel's, with the
    runners' launch and graph launch counts."""
    @qd.kernel(graph=True)
    def decay(counter: qd.types.ndarray(qd.i32, 0), x: qd.types.ndarray(qd.f32, 1), v: qd.f32):
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] = x[i] * 0.5 + v
            for _ in range(1):
                counter[()] = counter[()] - 1

    out: dict = {"decay": []}
    counter = qd.ndarray(qd.i32, ())
    for size in (100, 5000):
        x = qd.ndarray(qd.f32, (size,))
        want = np.zeros(size, np.float32)
        for n in (3, 1, 6, 2):
            counter[()] = n
            decay(counter, x, 1.0)
            for _ in range(n):
                want = want * np.float32(0.5) + np.float32(1.0)
            np.testing.assert_allclose(x.to_numpy(), want, rtol=1e-6)
            assert counter.to_numpy() == 0
            out["decay"].append(x.to_numpy())
    nested = nested_two()
    x, outer, inner = qd.ndarray(qd.i32, (64,)), qd.ndarray(qd.i32, ()), qd.ndarray(qd.i32, ())
    for _ in range(3):
        outer[()] = 2
        nested(x, outer, inner, 3)
    np.testing.assert_array_equal(x.to_numpy(), np.full(64, 18, np.int32))
    out["graphs"] = (_runner(decay).graph_launches, _runner(nested).graph_launches)
    out["launches"] = (_run_launches(decay), _run_launches(nested))
    return out


def test_a_do_while_loop_is_one_cuda_graph_launch(arch, monkeypatch):
    """A loop no other loop nests in or around runs as a CUDA graph with a conditional WHILE node
    (`qd/gpu/cuda_graphs.py`): the host does not wait for the device between iterations. The results equal the
    closed form and those of the loop run task by task (`QD_CUDA_GRAPH_LOOPS=0`), across counts and extents that
    change between launches (the graph is made again for new grids); nested loops stay task by task."""
    from qd.gpu import cuda_graphs
    from qd.runtime import device

    why = cuda_graphs.unavailable(device.current().backend.drv)
    if why is not None:
        pytest.skip(f"CUDA graphs for loops unavailable here: {why}")
    graphs = _graph_loop_runs()
    assert graphs["graphs"][0] == graphs["launches"][0] >= 2 and graphs["graphs"][1] == 0 < graphs["launches"][1]
    monkeypatch.setenv("QD_CUDA_GRAPH_LOOPS", "0")
    qd.init(arch=qd.cuda, enable_fallback=False, log_level="warn")
    plain = _graph_loop_runs()
    assert plain["graphs"] == (0, 0) and plain["launches"][0] >= 2
    for a, b in zip(graphs["decay"], plain["decay"]):
        np.testing.assert_array_equal(a, b)


def _whole_graph_runs() -> dict:
    """`@qd.kernel(graph=True)` kernels (Genesis' step kernels): tasks before, inside and after a do_while loop over
    extents and counts that change between launches; tasks only; one whose extent changes at every launch (more
    graphs than `MAX_REMAKES` would be); one drawing `qd.random`. Results checked against numpy; with the runners'
    launch and graph launch counts."""

    @qd.kernel(graph=True)
    def step(counter: qd.types.ndarray(qd.i32, 0), x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1),
             v: qd.f32):
        for i in range(x.shape[0]):
            x[i] = x[i] + v
        while qd.graph.do_while(counter):
            for i in range(x.shape[0]):
                x[i] = x[i] * 0.5
            for _ in range(1):
                counter[()] = counter[()] - 1
        for i in range(y.shape[0]):
            y[i] = y[i] + 2.0 * x[i % x.shape[0]]
        for _ in range(1):
            y[0] = y[0] - 1.0

    @qd.kernel(graph=True)
    def three(x: qd.types.ndarray(qd.f32, 1), a: qd.f32):
        for i in range(x.shape[0]):
            x[i] += a
        for i in range(x.shape[0]):
            x[i] *= 2.0
        for _ in range(1):
            x[0] = -x[0]

    @qd.kernel(graph=True)
    def noise(x: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            x[i] = qd.random()
        for i in range(x.shape[0]):
            x[i] += 1.0

    out: dict = {"step": [], "three": [], "noise": []}
    prog = qd.lang.impl.get_runtime().prog
    counter = qd.ndarray(qd.i32, ())
    for size in (100, 5000):
        x, y = qd.ndarray(qd.f32, (size,)), qd.ndarray(qd.f32, (2 * size + 1,))
        xw, yw = np.zeros(size, np.float32), np.zeros(2 * size + 1, np.float32)
        for n, v in ((3, 1.0), (1, 2.0), (4, 0.5), (2, 1.0)):
            counter[()] = n
            step(counter, x, y, v)
            xw = xw + np.float32(v)
            for _ in range(n):
                xw = xw * np.float32(0.5)
            yw = yw + np.float32(2.0) * xw[np.arange(yw.size) % size]
            yw[0] -= np.float32(1.0)
            np.testing.assert_array_equal(x.to_numpy(), xw)
            np.testing.assert_array_equal(y.to_numpy(), yw)
            assert counter.to_numpy() == 0
        out["step"].append(y.to_numpy())
    counter[()] = 1
    step(counter, x, y, 0.0)  # (one more call, the last: its values are not checked again)
    out["queries"] = (prog.get_graph_cache_used_on_last_call(), prog.get_graph_num_nodes_on_last_call(),
                      prog.get_num_offloaded_tasks_on_last_call(), prog.get_graph_cache_size(),
                      prog.get_graph_total_builds())
    for size in range(1, 41):  # a new grid at every size: graphs made up to MAX_REMAKES times, then task by task
        x = qd.ndarray(qd.f32, (size * 300,))  # (more than a 256-wide block more at each size)
        three(x, 1.5)
        three(x, 1.5)
        want = np.full(size * 300, 9.0, np.float32)  # ((0 + 1.5) * 2 + 1.5) * 2, and x[0]: -((-3 + 1.5) * 2)
        want[0] = 3.0
        np.testing.assert_array_equal(x.to_numpy(), want)
        out["three"].append(x.to_numpy())
    x = qd.ndarray(qd.f32, (1000,))
    draws = []
    for _ in range(2):
        noise(x)
        draws.append(x.to_numpy())
    assert np.all((draws[0] >= 1) & (draws[0] < 2)) and not np.array_equal(draws[0], draws[1])
    out["noise"] = draws
    out["graphs"] = {k.__name__: _runner(k).graph_launches for k in (step, three, noise)}
    out["launches"] = {k.__name__: _run_launches(k) for k in (step, three, noise)}
    return out


def test_a_graph_kernel_is_one_cuda_graph_launch(arch, monkeypatch):
    """A `@qd.kernel(graph=True)` kernel launches as one CUDA graph, its loops conditional nodes in it
    (`qd/gpu/cuda_graphs.py`), with the results of numpy and of the kernel launched task by task
    (`QD_CUDA_GRAPH_LOOPS=0`); a kernel whose grids change at every launch stops making graphs after
    `MAX_REMAKES` (16); one drawing `qd.random` never is a graph (a graph would replay its random key)."""
    from qd.gpu import cuda_graphs
    from qd.runtime import device

    why = cuda_graphs.unavailable(device.current().backend.drv)
    if why is not None:
        pytest.skip(f"CUDA graphs unavailable here: {why}")
    graphs = _whole_graph_runs()
    assert graphs["graphs"]["step"] == graphs["launches"]["step"] >= 4
    # Quadrants' queries (its test_graph.py): the last call of `step` was one graph of one node per task
    assert graphs["queries"][0] is True and graphs["queries"][1] == graphs["queries"][2] >= 4
    assert graphs["queries"][3] >= 1 and graphs["queries"][4] >= graphs["queries"][3]
    assert graphs["graphs"]["three"] == 16 and graphs["launches"]["three"] >= 40
    assert graphs["graphs"]["noise"] == 0 < graphs["launches"]["noise"]
    monkeypatch.setenv("QD_CUDA_GRAPH_LOOPS", "0")
    qd.init(arch=qd.cuda, enable_fallback=False, log_level="warn")
    plain = _whole_graph_runs()
    assert set(plain["graphs"].values()) == {0}
    assert plain["queries"][0] is False and plain["queries"][1] == 0 and plain["queries"][3] == 0
    for key in ("step", "three"):
        for a, b in zip(graphs[key], plain[key]):
            np.testing.assert_array_equal(a, b)
