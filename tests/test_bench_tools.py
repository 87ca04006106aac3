"""The bench tooling on synthetic data: compare.py's noise-aware decision, plot.py's history plot, the committed
baselines' storage layout, and dev.sh bench's path detection. No timing is measured or asserted here."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def _load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


compare = _load("compare")
plot = _load("plot")


def _stats(median: float, spread: float, rounds: int = 20, low: float | None = None) -> dict:
    """pytest-benchmark-like stats (seconds) around `median` with IQR = spread * median."""
    low = median * (1 - spread) if low is None else low
    iqr = spread * median
    return {"min": low, "median": median, "iqr": iqr, "stddev": iqr / 1.35, "rounds": rounds,
            "q1": median - iqr / 2, "q3": median + iqr / 2, "mean": median, "max": median * (1 + 2 * spread)}


def _run(benchmarks: dict[str, dict], extra: dict[str, dict] | None = None) -> dict:
    return {"benchmarks": [{"fullname": n, "name": n.split("::")[-1], "stats": s, "extra_info": (extra or {}).get(n, {})}
                           for n, s in benchmarks.items()]}


# -- compare.py: the decision ------------------------------------------------------------------------------------


def test_load_noise_does_not_flag():
    # the case a fixed 15% margin called +243%: a loaded run's median 3.43x, its rounds spread wide, its min near
    base = compare.Stat(min=1.00e-3, median=1.05e-3, spread=0.05, rounds=200)
    loaded = compare.Stat(min=1.10e-3, median=3.60e-3, spread=0.90, rounds=40)
    v = compare.decide("w", base, loaded)
    assert v.median_change == pytest.approx(242.9, abs=0.1)
    assert v.margin == pytest.approx(180.0)  # 2 x 90%
    assert v.status == "ok"


def test_real_2x_slowdown_flags():
    base = compare.Stat(min=1.00e-3, median=1.05e-3, spread=0.05, rounds=200)
    slow = compare.Stat(min=2.00e-3, median=2.10e-3, spread=0.06, rounds=100)
    v = compare.decide("w", base, slow)
    assert v.margin == pytest.approx(12.0)
    assert (v.min_change, v.median_change) == (pytest.approx(100.0), pytest.approx(100.0))
    assert v.status == "REGRESSION"


def test_small_jitter_stays_under_the_floor_and_a_2x_speedup_is_faster():
    base = compare.Stat(1.0, 1.0, 0.01, 50)
    assert compare.decide("w", base, compare.Stat(1.08, 1.08, 0.01, 50)).status == "ok"  # floor 10% > 2 x 1%
    assert compare.decide("w", base, compare.Stat(1.15, 1.15, 0.01, 50)).status == "REGRESSION"
    assert compare.decide("w", base, compare.Stat(0.5, 0.5, 0.01, 50)).status == "faster"


def test_min_and_median_must_agree():
    base = compare.Stat(1.0, 1.0, 0.02, 50)
    assert compare.decide("w", base, compare.Stat(1.0, 2.0, 0.02, 50)).status == "ok"  # median only: load
    assert compare.decide("w", base, compare.Stat(2.0, 1.0, 0.02, 50)).status == "ok"


def test_spread_uses_iqr_from_4_rounds_and_stddev_below():
    assert compare.spread_of({"median": 2.0, "iqr": 0.2, "stddev": 1.0, "rounds": 4}) == pytest.approx(0.1)
    assert compare.spread_of({"median": 2.0, "iqr": 0.2, "stddev": 1.0, "rounds": 3}) == pytest.approx(0.5)


def test_stats_of_reads_extra_numbers_with_their_benchmarks_spread():
    data = _run({"b.py::w4": _stats(0.3, 0.1)}, extra={"b.py::w4": {"first_call_ms": 20.0}})
    got = compare.stats_of(data)
    assert set(got) == {"b.py::w4", "b.py::w4 :: first_call_ms"}
    assert got["b.py::w4 :: first_call_ms"].median == pytest.approx(0.02)
    assert got["b.py::w4 :: first_call_ms"].spread == pytest.approx(got["b.py::w4"].spread)


def test_main_exit_status_and_printed_numbers(tmp_path, capsys):
    storage = tmp_path / "store" / "Linux-CPython-3.11-64bit"
    storage.mkdir(parents=True)
    base = _run({"b.py::quiet": _stats(1e-3, 0.03), "b.py::noisy": _stats(1e-3, 0.03), "b.py::gone": _stats(1, 0.1)})
    (storage / "0001_base.json").write_text(json.dumps(base))
    noisy = _run({"b.py::quiet": _stats(1.02e-3, 0.03), "b.py::noisy": _stats(3.4e-3, 0.9, low=1.1e-3)})
    (tmp_path / "noisy.json").write_text(json.dumps(noisy))
    assert compare.main(["0001", str(tmp_path / "noisy.json"), "--storage", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out
    assert "only in baseline: b.py::gone" in out
    assert "+240.0%" in out and "180.0%" in out  # the median change and the margin that let it pass
    slow = _run({"b.py::quiet": _stats(2e-3, 0.03), "b.py::noisy": _stats(1e-3, 0.03)})
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    assert compare.main([str(storage / "0001_base.json"), str(tmp_path / "slow.json")]) == 1
    assert "REGRESSION" in capsys.readouterr().out


# -- the committed baselines -------------------------------------------------------------------------------------


def test_baselines_are_in_pytest_benchmark_storage_layout():
    runs = sorted((BENCH / "baselines").glob("*/[0-9][0-9][0-9][0-9]_*.json"))
    assert len(runs) >= 6
    for p in runs:
        data = json.loads(p.read_text())
        mi = data["machine_info"]
        bits = "64bit" if mi["cpu"]["bits"] == 64 else "32bit"
        py = ".".join(mi["python_version"].split(".")[:2])
        assert p.parent.name == f"{mi['system']}-{mi['python_implementation']}-{py}-{bits}"  # get_machine_id()
        assert data["benchmarks"] and all("median" in b["stats"] for b in data["benchmarks"])


# -- plot.py -----------------------------------------------------------------------------------------------------


def _saved(tmp_path: Path) -> Path:
    folder = tmp_path / "Linux-CPython-3.11-64bit"
    folder.mkdir()
    for i, med in enumerate([1.0e-3, 1.1e-3, 0.9e-3], 1):
        run = _run({"bench/t.py::test_a": _stats(med, 0.05), "bench/t.py::test_b": _stats(2 * med, 0.1)})
        (folder / f"{i:04d}_run{i}.json").write_text(json.dumps(run))
    return tmp_path


def test_history_orders_runs_and_matches_names(tmp_path):
    runs = plot.saved_runs(str(_saved(tmp_path)))
    assert [label for label, _ in runs] == ["0001_run1", "0002_run2", "0003_run3"]
    exact = plot.history(runs, "bench/t.py::test_a")
    assert list(exact) == ["bench/t.py::test_a"]
    assert [s["median"] for _, s in exact["bench/t.py::test_a"]] == [1.0e-3, 1.1e-3, 0.9e-3]
    assert list(plot.history(runs, "test_")) == ["bench/t.py::test_a", "bench/t.py::test_b"]


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason='matplotlib is not installed (pip install "qd-lang[plot]")')
    store = _saved(tmp_path)
    out = tmp_path / "h.png"
    assert plot.main(["test_", "--storage", f"file://{store}", "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 1000


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    store = _saved(tmp_path)
    assert plot.main(["test_a", "--storage", str(store), "-o", str(tmp_path / "h.png")]) == 3
    assert 'pip install "qd-lang[plot]"' in capsys.readouterr().err
    assert not (tmp_path / "h.png").exists()


# -- dev.sh bench ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args,has_path", [
    ([], False),
    (["bench/test_cpu.py"], True),
    (["bench/test_cpu.py::test_w1_saxpy_numba"], True),
    (["-k", "bench"], False),  # `bench` exists as a folder but is -k's expression
    (["--benchmark-json", "README.md"], False),  # an option's value, not a path to collect
    (["--benchmark-only", "bench/test_interp.py"], True),
])
def test_dev_sh_bench_path_detection(args, has_path):
    script = 'eval "$(sed -n "/^bench_has_path()/,/^}/p" dev.sh)"; bench_has_path "$@"'
    rc = subprocess.run(["bash", "-c", script, "sh", *args], cwd=ROOT, check=False).returncode
    assert (rc == 0) == has_path


# -- examples/demo.py's picture ----------------------------------------------------------------------------------


def _demo() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("qd_demo", ROOT / "examples" / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demo_plots_throws_or_says_how(tmp_path, monkeypatch):
    import numpy as np

    demo = _demo()
    before = np.full((3, 2), 3.0, np.float32)
    after = np.array([[2.0, 4.0], [3.0, 1.0], [4.0, 2.0]], np.float32)
    steps = np.array([100, 200, 300])
    target = np.stack([p[-1] for p in demo.trajectories(after, steps)])
    assert np.allclose(demo.trajectories(after[:1], steps[:1])[0][0], 0.0)  # thrown from the origin
    out = tmp_path / "throws.png"
    with monkeypatch.context() as m:  # import fails: no plot, no error (the real module is put back after)
        m.setitem(sys.modules, "matplotlib", None)
        assert demo.plot_throws(str(out), before, after, steps, target, balls=3) is None
    pytest.importorskip("matplotlib", reason='matplotlib is not installed (pip install "qd-lang[plot]")')
    assert demo.plot_throws(str(out), before, after, steps, target, balls=3) == str(out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
