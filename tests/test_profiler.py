"""`qd.profiler`'s kernel profiler (`qd.init(kernel_profiler=True)`): every launch recorded under its kernel's
name, whichever path the call takes (the compiled launch plan stands aside while it is on); Quadrants'
print / query / clear / total functions; nothing recorded while it is off."""

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsOptionError, QuadrantsRuntimeTypeError
from qd.profiler import kernel_profiler as kp
from qd.profiler import scoped_profiler as kp_scoped
from qd.runtime.profiler import LaunchRecord


@pytest.fixture
def prof(arch):
    """The fixture's program with the kernel profiler on."""
    qd.cfg.kernel_profiler = True
    return arch


def _kernels():
    x = qd.field(qd.f32, shape=64)

    @qd.kernel
    def fill_x():
        for i in x:
            x[i] = i

    @qd.kernel
    def bump(a: qd.types.ndarray(), s: qd.f32):
        for i in a:
            a[i] += s

    return x, fill_x, bump


def test_counts_every_launch_under_its_name(prof):
    x, fill_x, bump = _kernels()
    a = qd.ndarray(qd.f32, shape=8)
    for _ in range(5):
        fill_x()
    for _ in range(7):  # repeated calls of one shape: the plan's path when the profiler is off
        bump(a, 1.0)
    bump(a, s=2.0)  # keywords: `_call`'s path
    assert np.allclose(a.to_numpy(), 9.0) and x[3] == 3.0
    q = qd.profiler.query_kernel_profiler_info("fill_x")
    assert q.counter == 5
    assert qd.profiler.query_kernel_profiler_info("bump").counter == 8
    assert bump._plan is None  # no plan was armed while profiling


def test_statistics_are_consistent(prof):
    _, fill_x, bump = _kernels()
    a = np.zeros(16, np.float32)
    for _ in range(4):
        fill_x()
        bump(a, 0.5)
    total_ms = 0.0
    for name in ("fill_x", "bump"):
        q = qd.profiler.query_kernel_profiler_info(name)
        assert q.counter == 4
        assert 0.0 <= q.min <= q.avg <= q.max and q.max > 0.0
        total_ms += q.avg * q.counter
    assert qd.profiler.get_kernel_profiler_total_time() == pytest.approx(total_ms / 1e3)  # seconds


def test_unknown_name_queries_as_zero(prof):
    _, fill_x, _ = _kernels()
    fill_x()
    q = qd.profiler.query_kernel_profiler_info("never_launched")
    assert (q.counter, q.min, q.max, q.avg) == (0, 0.0, 0.0, 0.0)
    assert qd.profiler.query_kernel_profiler_info("fill").counter == 0  # exact names, not prefixes


def test_clear_resets(prof):
    _, fill_x, _ = _kernels()
    for _ in range(3):
        fill_x()
    qd.profiler.clear_kernel_profiler_info()
    assert qd.profiler.query_kernel_profiler_info("fill_x").counter == 0
    assert qd.profiler.get_kernel_profiler_total_time() == 0.0
    fill_x()
    assert qd.profiler.query_kernel_profiler_info("fill_x").counter == 1


def test_print_count_and_trace(prof, capsys):
    _, fill_x, bump = _kernels()
    a = np.zeros(4, np.float32)
    for _ in range(3):
        fill_x()
    bump(a, 1.0)
    fill_x()
    capsys.readouterr()
    qd.profiler.print_kernel_profiler_info()
    out = capsys.readouterr().out
    assert "Kernel Profiler(count" in out and "number of results: 2" in out
    rows = {line.rsplit("] ", 1)[1]: line for line in out.splitlines() if line.endswith(("] fill_x", "] bump"))}
    assert " 4x |" in rows["fill_x"] and " 1x |" in rows["bump"]
    qd.profiler.print_kernel_profiler_info("trace")
    out = capsys.readouterr().out
    names = [line.rsplit("] ", 1)[1] for line in out.splitlines() if line.startswith("[") and " ms ] " in line]
    assert names == ["fill_x"] * 3 + ["bump", "fill_x"]
    assert "Number of records:  5" in out


def test_bad_print_mode(prof):
    with pytest.raises(QuadrantsOptionError, match="'count' or 'trace'") as e:
        qd.profiler.print_kernel_profiler_info("counts")
    assert isinstance(e.value, ValueError)  # Quadrants raises a ValueError


def test_grad_counts_under_its_own_name(prof):
    x = qd.field(qd.f32, shape=8, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def loss():
        for i in x:
            y[None] += x[i] * x[i]

    x.from_numpy(np.arange(8, dtype=np.float32))
    qd.profiler.clear_kernel_profiler_info()
    loss()
    y.grad[None] = 1.0
    loss.grad()
    loss.grad()
    assert qd.profiler.query_kernel_profiler_info("loss").counter == 1
    assert qd.profiler.query_kernel_profiler_info("loss_reverse_grad").counter == 2
    assert x.grad[3] == pytest.approx(12.0)


def test_off_records_nothing(arch, capfd):
    _, fill_x, bump = _kernels()
    a = np.zeros(4, np.float32)
    fill_x()
    bump(a, 1.0)
    capfd.readouterr()
    assert qd.profiler.query_kernel_profiler_info("fill_x") is None
    assert qd.profiler.get_kernel_profiler_total_time() == 0.0
    qd.profiler.print_kernel_profiler_info()
    out, err = capfd.readouterr()
    assert out == "" and err.count("kernel_profiler = True") == 3
    qd.cfg.kernel_profiler = True  # the launches made while it was off were not recorded
    assert qd.profiler.query_kernel_profiler_info("fill_x").counter == 0


def test_turned_on_and_off_in_a_program(arch):
    _, _, bump = _kernels()
    a = qd.ndarray(qd.f32, shape=4)
    for _ in range(3):  # the plan is armed
        bump(a, 1.0)
    qd.cfg.kernel_profiler = True
    for _ in range(4):
        bump(a, 1.0)
    qd.profiler.get_default_kernel_profiler().set_kernel_profiler_mode(False)
    for _ in range(2):
        bump(a, 1.0)
    qd.cfg.kernel_profiler = True
    assert qd.profiler.query_kernel_profiler_info("bump").counter == 4
    assert np.allclose(a.to_numpy(), 9.0)
    with pytest.raises(QuadrantsRuntimeTypeError, match="bool"):
        qd.profiler.get_default_kernel_profiler().set_kernel_profiler_mode("on")


def test_init_drops_records(prof):
    _, fill_x, _ = _kernels()
    fill_x()
    qd.init(arch=prof, kernel_profiler=True, log_level="warn", enable_fallback=False)
    assert qd.profiler.query_kernel_profiler_info("fill_x").counter == 0


def test_toolkit(prof):
    assert qd.profiler.set_kernel_profiler_toolkit("default") is True
    assert qd.profiler.set_kernel_profiler_toolkit("cupti") is False


def test_count_table_is_sorted_by_total_time():
    records = [LaunchRecord("a", 0.0, 1.0), LaunchRecord("b", 0.1, 5.0), LaunchRecord("a", 0.2, 3.0),
               LaunchRecord("c", 0.3, 0.5)]
    stats = kp.statistics(records)
    assert list(stats) == ["b", "a", "c"]
    assert (stats["a"].counter, stats["a"].min_time, stats["a"].max_time, stats["a"].avg_time) == (2, 1.0, 3.0, 2.0)
    rows = [line for line in kp.count_table(records).splitlines() if line.startswith("[") and "ms] " in line]
    assert [r.rsplit("] ", 1)[1] for r in rows] == ["b", "a", "c"]
    assert rows[0].startswith("[ 52.63%") and " 2x |" in rows[1]
    assert "number of results: 3" in kp.count_table(records)


def test_scoped_profiler_lists_each_compiled_kernel(arch, capsys):
    qd.profiler.clear_scoped_profiler_info()
    x = qd.field(qd.f32, shape=4, needs_grad=True)
    y = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def scoped_loss():
        for i in x:
            y[None] += x[i] * x[i]

    scoped_loss()
    scoped_loss.grad()
    qd.profiler.print_scoped_profiler_info()
    out = capsys.readouterr().out
    block = out.split("scoped_loss", 1)[1].split("====", 1)[0]
    assert "frontend" in block and "autodiff" in block and "[2 x" in block  # primal and reverse instances
    assert ("codegen cpu" in block) == (arch is qd.cpu)
    qd.profiler.clear_scoped_profiler_info()
    qd.profiler.print_scoped_profiler_info()
    assert "scoped_loss" not in capsys.readouterr().out


def test_scoped_table_shares():
    text = kp_scoped.scoped_table({("k", "frontend"): (1, 0.001), ("k", "passes"): (2, 0.003)})
    assert "  25.00%  [1 x 1.000 ms]" in text and "  75.00%  [2 x 1.500 ms]" in text
    assert "total (1 kernels)" in text
