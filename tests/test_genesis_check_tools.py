"""The pure-Python parts of tools/genesis_check (compare.py, api_probe.py) on synthetic inputs: no Genesis needed.
The Genesis check itself (tools/genesis_check/run.sh) is a long run and is never part of the test suite."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "genesis_check"


def _load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"genesis_check_{name}", TOOL / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


compare = _load("compare")
api_probe = _load("api_probe")


def _recording(path: Path, **over: np.ndarray) -> Path:
    rng = np.random.default_rng(0)
    data = {
        "links_pos": rng.normal(size=(11, 2, 3)),
        "mass_mat": np.tile(np.diag([4.8, 4.8, 4.8, 0.032, 0.032, 0.032]), (11, 1, 1)),
        "dofs_vel": np.zeros((11, 6)),
        "time_build_wall": np.float64(2.0), "time_build_cpu": np.float64(1.0),
        "time_timed_wall": np.float64(0.5), "time_timed_cpu": np.float64(0.25),
        "meta_json": np.array(json.dumps({"scene": "box", "links": ["plane", "box"], "timed_steps": 100})),
    }
    data.update(over)
    np.savez(path, **data)
    return path


def _cells(text: str) -> list[list[str]]:
    """The rows of the markdown tables in text, as lists of stripped cells."""
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in text.splitlines() if ln.startswith("| ")]


def test_identical_recordings_have_no_step_past_tol(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    a = _recording(tmp_path / "a.npz")
    assert compare.main([str(a), str(a), "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "verdict: all 3 quantities identical" in out
    assert ["build wall", "2.000", "2.000", "1.00x"] in _cells(out)


def test_small_mass_matrix_entry_drift_is_found_at_its_first_step(tmp_path: Path) -> None:
    """A 2% drift of the 0.032 inertia entry is 6.4e-4 absolute, 1.3e-4 of the matrix's largest entry: the
    element-wise relative difference reports it as 2e-2, from the step where it starts."""
    mm = np.tile(np.diag([4.8, 4.8, 4.8, 0.032, 0.032, 0.032]), (11, 1, 1))
    drift = mm.copy()
    drift[4:, 3, 3] *= 1.02
    absd, rel, _ = compare.per_step(mm, drift)
    assert np.all(rel[:4] == 0)
    np.testing.assert_allclose(rel[4:], 0.02 / 1.02, rtol=1e-12)
    np.testing.assert_allclose(absd[4:], 0.032 * 0.02, rtol=1e-12)
    lines = compare.trajectories({"mass_mat": mm}, {"mass_mat": drift}, {}, 1e-4, 5, True)
    row = next(r for r in _cells("\n".join(lines)) if r[0] == "mass_mat")
    assert row[2:4] == ["4", "dof[3,3]"]
    assert lines[-1] == "verdict: 1 of 1 quantities past 0.0001: mass_mat (step 4)"


def test_noise_near_zero_is_judged_against_the_quantity_scale() -> None:
    """A velocity at rest (1e-9 noise) in a run that reached 4 m/s stays under 1e-4; a one-sided NaN does not."""
    v = np.zeros((5, 3))
    v[1, 2] = -4.0
    w = v.copy()
    w[3, 0] = 1e-9
    _, rel, _ = compare.per_step(v, w)
    assert rel.max() < 1e-4
    w[4, 1] = np.nan
    _, rel, _ = compare.per_step(v, w)
    assert rel[4] == np.inf and rel[3] < 1e-4


def test_timings_report_b_over_a_with_cold_builds() -> None:
    rows = compare.timings({"build_wall": 2.0, "timed_cpu": 0.5}, {"build_wall": 70.0, "timed_cpu": 10.0},
                           ({"build_wall": 100.0}, {"build_wall": 800.0}), {"timed_steps": 100})
    cells = _cells("\n".join(rows))
    assert ["build (warm) wall", "2.000", "70.000", "35.00x"] in cells
    assert ["100 steps (fastest) cpu", "0.500", "10.000", "20.00x"] in cells
    assert ["build (cold) wall", "100.000", "800.000", "8.00x"] in cells


def test_api_probe_finds_uses_and_the_first_missing_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("quadrants")
    fake.lang = types.ModuleType("quadrants.lang")
    fake.lang.impl = types.ModuleType("quadrants.lang.impl")
    fake.lang.impl.get_runtime = lambda: None
    fake.f32 = object()
    for name, mod in (("quadrants", fake), ("quadrants.lang", fake.lang), ("quadrants.lang.impl", fake.lang.impl)):
        monkeypatch.setitem(sys.modules, name, mod)
    src = tmp_path / "user.py"
    src.write_text("import quadrants as qd\nfrom quadrants.lang import impl\n"
                   "from quadrants.algorithms import sort\n"
                   "x = qd.f32\ny = impl.PyQuadrants.materialize\nz = qd.lang.impl.get_runtime()\n"
                   "w = qd.simt.block.sync()\n")
    uses = api_probe.uses(src)
    assert sorted(uses) == sorted([
        ("quadrants", 1), ("quadrants.lang.impl", 2), ("quadrants.algorithms.sort", 3), ("quadrants.f32", 4),
        ("quadrants.lang.impl.PyQuadrants.materialize", 5), ("quadrants.lang.impl.get_runtime", 6),
        ("quadrants.simt.block.sync", 7)])
    cache: dict = {}
    assert api_probe.resolve("quadrants.f32", cache) is None
    assert api_probe.resolve("quadrants.lang.impl.get_runtime", cache) is None
    assert api_probe.resolve("quadrants.lang.impl.PyQuadrants.materialize", cache) == "quadrants.lang.impl.PyQuadrants"
    assert api_probe.resolve("quadrants.simt.block.sync", cache) == "quadrants.simt"
    assert api_probe.resolve("quadrants.algorithms.sort", cache) == "quadrants.algorithms"
