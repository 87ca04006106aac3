"""Tiering on `qd.cpu` (DESIGN §7): jit modes, the switch from the interpreter to native code, the
QD_JIT override, and the disk cache (hits, and corrupt entries that must be rebuilt)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import qd
from qd.jit import tiering


def _init(tmp_path, **kw):
    kw.setdefault("offline_cache_file_path", str(tmp_path / "cache"))
    qd.init(arch=qd.cpu, log_level="warn", **kw)


def _saxpy():
    @qd.kernel
    def saxpy(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), a: qd.f32) -> qd.f32:
        for i in range(x.shape[0]):
            y[i] = a * x[i] + y[i]
        return a

    return saxpy


@pytest.fixture(autouse=True)
def _reset():
    yield
    qd.reset()


def test_interp_mode_never_compiles(tmp_path):
    _init(tmp_path, jit="interp")
    k = _saxpy()
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    for _ in range(3):
        k(x, y, 2.0)
    assert k.stats["launches"] == {"interp": 3, "cpu": 0}
    assert k.stats["compile_ms"] is None
    np.testing.assert_array_equal(y, np.full(8, 6, np.float32))


def test_eager_mode_runs_native_code_from_the_first_launch(tmp_path):
    _init(tmp_path, jit="eager")
    k = _saxpy()
    x, y = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
    assert k(x, y, 0.5) == 0.5
    assert k.stats["last_tier"] == "cpu"
    assert k.stats["compile_ms"] > 0
    np.testing.assert_array_equal(y, np.float32(0.5) * np.arange(16, dtype=np.float32) + 1)


def test_auto_mode_switches_tiers_invisibly(tmp_path):
    _init(tmp_path, jit="auto", fast_math=False)
    k = _saxpy()
    rng = np.random.default_rng(0)
    x = rng.random(64, dtype=np.float32)
    y_auto, y_ref = np.zeros(64, np.float32), np.zeros(64, np.float32)
    k(x, y_auto, 1.5)
    assert k.stats["last_tier"] == "interp"  # small work: interpret while compiling
    k._last_ck.tier.future.result()  # wait for the background compiler
    for _ in range(3):
        k(x, y_auto, 1.5)
    assert k.stats["last_tier"] == "cpu"
    assert k.stats["launches"]["interp"] >= 1 and k.stats["launches"]["cpu"] >= 1
    for _ in range(4):
        y_ref = np.float32(1.5) * x + y_ref
    np.testing.assert_array_equal(y_auto, y_ref)  # bit-identical across the switch (fast_math=False)


def test_every_launch_after_the_first_runs_native_code_however_slow_the_compiler(tmp_path, monkeypatch):
    """Which tier runs a launch must not hang on the compiler's timing: the tiers may round differently (fast_math),
    and Genesis' box scene differed between two runs of one program on qd when a slow background compile left some
    launches on the interpreter. Launch 1 interprets; launch 2 waits for the native code, even a slow one."""
    import time

    compile_native = tiering._compile

    def slow(*a, **kw):
        time.sleep(0.5)
        return compile_native(*a, **kw)

    monkeypatch.setattr(tiering, "_compile", slow)
    _init(tmp_path, jit="auto", fast_math=True)
    k = _saxpy()
    x, y = np.ones(8, np.float32), np.zeros(8, np.float32)
    k(x, y, 1.0)
    assert k.stats["launches"] == {"interp": 1, "cpu": 0}
    k(x, y, 1.0)
    k(x, y, 1.0)
    assert k.stats["launches"] == {"interp": 1, "cpu": 2}
    np.testing.assert_array_equal(y, np.full(8, 3, np.float32))


def test_large_launch_waits_for_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 10)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 0)
    _init(tmp_path, jit="auto")
    k = _saxpy()
    x, y = np.ones(1000, np.float32), np.zeros(1000, np.float32)
    k(x, y, 1.0)
    assert k.stats["launches"] == {"interp": 0, "cpu": 1}


def test_a_long_loop_with_constant_bounds_waits_for_the_compiler(tmp_path, monkeypatch):
    """A constant `qd.ndrange` reads no array whose size would predict its work: its trip count does (one of 2^31
    cells ran 84 s in the interpreter)."""
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 1000)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 0)
    _init(tmp_path, jit="auto")
    out = qd.field(qd.i32, shape=())

    @qd.kernel
    def diagonal():
        for i, j in qd.ndrange(300, 300):
            if i == j:
                out[None] += 1

    diagonal()
    assert diagonal.stats["launches"] == {"interp": 0, "cpu": 1}
    assert out[None] == 300


def _first_launch_tier(kernel, *args) -> str:
    kernel(*args)
    launches = kernel.stats["launches"]
    assert sum(launches.values()) == 1
    return "interp" if launches["interp"] else "cpu"


def test_a_first_launch_predicts_its_work_from_its_loops_not_from_its_arrays(tmp_path):
    """A kernel bound to a large array whose loop runs a count read from memory (Genesis' serial solver kernels,
    each bound to a 1.2M-element array) interprets its first launch while it compiles (it waited ~26 s of a
    Franka build); a loop whose bound is known before the launch, from an extent or a scalar argument, counts
    its trips."""
    _init(tmp_path, jit="auto")
    big = 1 << 22
    x = np.ones(big, np.float32)
    n = qd.field(qd.i32, shape=())
    n[None] = 5

    @qd.kernel
    def by_count(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:
        s = 0.0
        qd.loop_config(serialize=True)
        for i in range(n[None]):
            s += x[i]
        return s

    @qd.kernel
    def by_extent(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:
        s = 0.0
        qd.loop_config(serialize=True)
        for i in range(x.shape[0]):
            s += x[i]
        return s

    @qd.kernel
    def by_argument(x: qd.types.ndarray(qd.f32, 1), m: qd.i32) -> qd.f32:
        s = 0.0
        qd.loop_config(serialize=True)
        for i in range(m // 2 + 1):
            s += x[i]
        return s

    assert _first_launch_tier(by_count, x) == "interp" and by_count(x) == 5
    assert _first_launch_tier(by_extent, x) == "cpu"
    assert _first_launch_tier(by_argument, x, big - 2) == "cpu"
    assert by_argument(x, 8) == 5


def test_a_large_kernel_interprets_more_work_than_a_small_one_before_it_waits(tmp_path, monkeypatch):
    """A kernel's compile time grows with its statements: its first launch waits only for work beyond
    `WAIT_FOR_COMPILER_WORK` plus `WAIT_PER_STATEMENT` per statement."""
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 0)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 1 << 20)
    _init(tmp_path, jit="auto")
    x = np.ones(1 << 10, np.float32)
    assert _first_launch_tier(_saxpy(), x, np.zeros_like(x), 1.0) == "interp"
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 64)
    assert _first_launch_tier(_saxpy(), x, np.zeros_like(x), 1.0) == "cpu"


def test_qd_jit_environment_variable_overrides_init(tmp_path, monkeypatch):
    monkeypatch.setenv("QD_JIT", "interp")
    _init(tmp_path, jit="eager")
    assert qd.cfg.jit == "interp"
    k = _saxpy()
    k(np.ones(4, np.float32), np.zeros(4, np.float32), 1.0)
    assert k.stats["last_tier"] == "interp"
    monkeypatch.setenv("QD_JIT", "sometimes")
    with pytest.raises(ValueError, match="jit mode 'sometimes'"):
        _init(tmp_path)


def _compile_once(tmp_path) -> dict:
    _init(tmp_path, jit="eager")
    k = _saxpy()
    x, y = np.ones(4, np.float32), np.zeros(4, np.float32)
    k(x, y, 3.0)
    np.testing.assert_array_equal(y, np.full(4, 3, np.float32))
    return dict(k.stats)


def test_disk_cache_hit_and_corrupt_entries(tmp_path):
    assert _compile_once(tmp_path)["from_cache"] is False
    assert _compile_once(tmp_path)["from_cache"] is True
    cache_dir = tmp_path / "cache" / "cpu"
    objects = [p for p in os.listdir(cache_dir) if p.endswith(".o")]
    assert objects
    for name in objects:
        (cache_dir / name).write_bytes(b"\x7fELF garbage")  # a corrupt object with an intact index
    assert _compile_once(tmp_path)["from_cache"] is False  # rebuilt, not crashed
    assert _compile_once(tmp_path)["from_cache"] is True
    for name in os.listdir(cache_dir):
        (cache_dir / name).write_bytes(b"\x00garbage")  # everything corrupt
    assert _compile_once(tmp_path)["from_cache"] is False
    assert _compile_once(tmp_path)["from_cache"] is True


def test_offline_cache_off_writes_nothing(tmp_path):
    _init(tmp_path, jit="eager", offline_cache=False)
    k = _saxpy()
    k(np.ones(4, np.float32), np.zeros(4, np.float32), 1.0)
    assert k.stats["from_cache"] is False
    assert not (tmp_path / "cache").exists()


def test_compiling_after_dropping_native_kernels(tmp_path):
    """Every MCJIT engine owns its own target machine: freeing one (with its kernel) must leave the
    machine used for later compiles intact (a shared one was freed once and crashed the next compile)."""
    import gc

    for round_ in range(3):
        _init(tmp_path, jit="eager", offline_cache=False)
        k = _saxpy()
        y = np.zeros(8, np.float32)
        k(np.ones(8, np.float32), y, float(round_ + 1))
        np.testing.assert_array_equal(y, np.full(8, round_ + 1, np.float32))
        del k
        qd.reset()
        gc.collect()


def test_a_waiting_first_launch_compiles_quickly_then_switches_to_optimised_code(tmp_path, monkeypatch):
    """A first launch that must wait for native code gets quick code (O1, machine code at O0), the background
    compiler the optimised code, and later launches switch to it; results are bit-identical throughout
    (fast_math=False), and a new program prefers the optimised code from the disk cache."""
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 10)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 0)
    _init(tmp_path, jit="auto", fast_math=False)
    k = _saxpy()
    x = np.random.default_rng(1).random(1000, dtype=np.float32)
    y, ref = np.zeros(1000, np.float32), np.zeros(1000, np.float32)
    k(x, y, 1.25)
    st = k._last_ck.tier
    assert k.stats["launches"] == {"interp": 0, "cpu": 1} and st.native.quick
    assert k._plan is None and st.future is None  # quick code is never planned; O3 starts at the next launch
    assert k._last_ck._code is None  # a launch that runs native code never lowers the interpreter's bytecode
    k(x, y, 1.25)
    st.future.result()
    for _ in range(3):
        k(x, y, 1.25)
    assert not st.native.quick and k.stats["launches"] == {"interp": 0, "cpu": 5}
    for _ in range(5):
        ref = np.float32(1.25) * x + ref
    np.testing.assert_array_equal(y, ref)
    qd.reset()
    _init(tmp_path, jit="auto", fast_math=False)  # a new program: the optimised code comes from the disk
    k = _saxpy()
    k(x, y, 1.25)
    assert k.stats["from_cache"] is True and not k._last_ck.tier.native.quick


def test_quick_code_is_cached_for_the_next_program_until_the_optimised_code_is(tmp_path, monkeypatch):
    """A program whose only launch ran quick code leaves it in the disk cache: the next program's first launch
    loads it (still quick: the optimised code is compiled from its next launch on, then cached and preferred)."""
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 10)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 0)
    x = np.random.default_rng(2).random(1000, dtype=np.float32)
    want = np.float32(0.5) * x
    results = []
    for _ in range(3):
        _init(tmp_path, jit="auto", fast_math=False)
        k = _saxpy()
        y = np.zeros(1000, np.float32)
        k(x, y, 0.5)
        np.testing.assert_array_equal(y, want)
        st = k._last_ck.tier
        results.append((k.stats["from_cache"], st.native.quick))
        if len(results) == 2:  # a second launch: the optimised code is compiled (and cached)
            k(x, y, 0.0)
            st.future.result()
        qd.reset()
    assert results == [(False, True), (True, True), (True, False)]


def test_a_very_large_first_launch_waits_for_optimised_code(tmp_path, monkeypatch):
    monkeypatch.setattr(tiering, "WAIT_FOR_COMPILER_WORK", 10)
    monkeypatch.setattr(tiering, "WAIT_PER_STATEMENT", 0)
    monkeypatch.setattr(tiering, "QUICK_WORK_LIMIT", 100)
    _init(tmp_path, jit="auto")
    k = _saxpy()
    k(np.ones(1000, np.float32), np.zeros(1000, np.float32), 1.0)
    assert k.stats["launches"] == {"interp": 0, "cpu": 1} and not k._last_ck.tier.native.quick


@pytest.mark.parametrize("fast_math", [False, True])
def test_the_warm_up_kernel_compiles(fast_math):
    """`qd.init` compiles this kernel in the background, where a failure would go unseen (the IR text must
    follow the IR's changes)."""
    from qd.jit import cpu

    native = cpu.warm_up(fast_math)
    assert native.quick and [t.kind for t in native.tasks] == ["range"] and native.tasks[0].fn


# ------------------------------------------------------------------ compile workers (`qd/jit/compile_worker.py`)


def _ready_worker(compile_worker):
    """A started worker (`take` starts one in the background and answers None until it is ready)."""
    import time

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        w = compile_worker.take()
        if w is not None:
            return w
        time.sleep(0.02)
    raise AssertionError("no compile worker started within 30 s")


@pytest.fixture
def _workers(monkeypatch):
    """Compile workers on, and the module's state put back after (a test may turn them off)."""
    from qd.jit import compile_worker

    monkeypatch.setenv("QD_COMPILE_WORKERS", "1")
    monkeypatch.setattr(compile_worker, "_off", False)
    monkeypatch.setattr(compile_worker, "START_AFTER", 0)
    yield compile_worker
    compile_worker._close_all()
    compile_worker._off = False


@pytest.mark.parametrize("fast_math", [False, True])
def test_a_compile_worker_makes_the_object_this_process_makes(_workers, fast_math):
    """The worker's object code for a module is byte for byte what this process makes of it (the same pipeline
    and target), so where a compile ran never changes what a kernel computes."""
    import llvmlite.binding as llvm

    from qd.ir_parse import parse_kernel
    from qd.jit import cpu
    from qd.jit.llvm import build_module

    k = parse_kernel(cpu._WARM_UP_KERNEL)
    _, target = cpu._machine()
    text = str(build_module(k, target, fast_math).module)
    here = cpu.object_code(llvm.parse_assembly(text), fast_math)
    w = _ready_worker(_workers)
    assert w.compile_object(text, fast_math) == here
    _workers.give_back(w)
    assert _workers.take() is w  # (idle again once given back)
    with pytest.raises(_workers.ParseError, match="expected"):
        w.compile_object("define void @f( {", fast_math)
    _workers.give_back(w)
    assert _workers.take() is w and w.compile_object(text, fast_math) == here  # (it goes on after a bad module)


def test_kernels_compiled_by_a_worker_and_a_dead_worker(tmp_path, _workers, capfd):
    """A compile through a worker gives the interpreter's results; a worker that dies turns the workers off with
    one warning, and compiles go on in this process."""
    _workers.give_back(_ready_worker(_workers))  # started, and idle for the compile below
    _init(tmp_path, jit="eager", fast_math=False)

    @qd.kernel
    def wave(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            y[i] = qd.sin(x[i]) * qd.exp(-x[i] * 0.1) + i

    x = np.linspace(-3, 3, 257).astype(np.float32)
    y = np.zeros_like(x)
    wave(x, y)
    assert len(_workers._all) == 1 and len(_workers._idle) == 1 and wave.stats["last_tier"] == "cpu"
    qd.init(arch=qd.interp, log_level="warn")
    want = np.zeros_like(x)
    wave(x, want)
    np.testing.assert_allclose(y, want, rtol=0, atol=4e-6)

    _workers._all[0].proc.kill()
    _workers._all[0].proc.wait()
    _init(tmp_path, jit="eager", fast_math=False, offline_cache=False)
    y2 = np.zeros_like(x)
    wave(x, y2)
    np.testing.assert_array_equal(y2, y)
    assert _workers._off and "compile worker stopped" in capfd.readouterr().err


def test_compile_workers_start_only_for_programs_of_many_kernels(_workers, monkeypatch):
    """The first compiles of a program run in-process without starting a worker (one of a few kernels never pays
    for its start-up); from the `START_AFTER`-th on, a worker starts in the background."""
    monkeypatch.setattr(_workers, "START_AFTER", 3)
    monkeypatch.setattr(_workers, "_asked", 0)
    assert _workers.take() is None and _workers.take() is None
    assert _workers._starting == 0 and not _workers._all
    assert _ready_worker(_workers) is not None


def test_compile_workers_setting_is_checked(monkeypatch):
    from qd.jit import compile_worker

    monkeypatch.setenv("QD_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match="QD_COMPILE_WORKERS='many'"):
        compile_worker.count()
    monkeypatch.setenv("QD_COMPILE_WORKERS", "0")
    assert compile_worker.count() == 0 and not compile_worker.enabled() and compile_worker.take() is None


def test_perf_map_names_the_jit_code(tmp_path, monkeypatch):
    """`QD_PERF_MAP=1`: each loaded function is listed in /tmp/perf-PID.map (where Linux perf reads JIT symbols)
    at the address the launch calls, with its size from the object's symbol table."""
    monkeypatch.setenv("QD_PERF_MAP", "1")
    path = f"/tmp/perf-{os.getpid()}.map"
    before = Path(path).read_text() if os.path.exists(path) else ""
    _init(tmp_path, jit="eager", offline_cache=False)

    @qd.kernel
    def perf_mapped(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] = x[i] * 2.0

    perf_mapped(np.ones(8, np.float32))
    lines = Path(path).read_text()[len(before):].splitlines()
    entries = {name: (int(a, 16), int(n, 16)) for a, n, name in (ln.split() for ln in lines)}
    task = perf_mapped._last_ck.tier.native.tasks[0]
    body = [v for name, v in entries.items() if name.startswith("qd_perf_mapped_") and name.endswith("_body0")]
    assert body and body[0][0] == task.fn and body[0][1] > 0


def test_a_failed_module_build_gives_the_worker_back(_workers, monkeypatch):
    """A code generator failure between taking a worker and using it raises as in-process, and the worker is
    idle again (else each such failure would lose one for the rest of the program)."""
    from qd.ir_parse import parse_kernel
    from qd.jit import cpu, llvm

    w = _ready_worker(_workers)
    _workers.give_back(w)

    def broken(*args, **kwargs):
        raise RuntimeError("a code generator bug")

    monkeypatch.setattr(llvm, "build_module", broken)
    _, target = cpu._machine()
    with pytest.raises(RuntimeError, match="code generator bug"):
        cpu._from_worker(parse_kernel(cpu._WARM_UP_KERNEL), target, False)
    assert _workers._idle == [w]
