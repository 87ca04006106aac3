"""The differential fuzzer (`tests/fuzz`) in CI: a fixed, bounded set of seeds on `interp` and `cpu`
against the serial reference, a longer run behind the `slow` marker, and checks that the comparison
and the shrinker do catch a planted wrong result (a fuzzer that cannot fail proves nothing).

Run it by hand for longer: `python -m tests.fuzz --seconds 600 --seed 100000`.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.fuzz import runner
from tests.fuzz.generator import GenOptions, generate

CI_SEEDS = int(os.environ.get("QD_FUZZ_CI_SEEDS", "160"))


@pytest.fixture(autouse=True)
def _release_qd():
    yield
    runner.release()


def _fail_report(failures) -> str:
    return "\n\n".join(v.report() if v.ref_error is None else f"reference raised {v.ref_error}"
                       for v in failures)


def test_fuzz_fixed_seeds():
    count, failures = runner.fuzz(seconds=1e9, seed=0, max_cases=CI_SEEDS, do_shrink=True,
                                  shrink_budget_s=30.0, log=lambda m: None)
    assert count == CI_SEEDS
    assert not failures, _fail_report(failures)


def test_fuzz_threaded_launches(monkeypatch):
    """Every program launched twice from 4 Python threads at once (its first call, so its compile, races too):
    each launch must give the serial reference's result (concurrent first calls failed and concurrent
    reverse launches shared adstack rows before; `QD_FUZZ_THREADS` / `--threads` for longer runs)."""
    monkeypatch.setattr(runner, "THREADS", 4)
    count, failures = runner.fuzz(seconds=1e9, seed=20_000, max_cases=40, repeat=2, do_shrink=True,
                                  shrink_budget_s=30.0, log=lambda m: None)
    assert count == 40
    assert not failures, _fail_report(failures)


GPU_SEEDS = int(os.environ.get("QD_FUZZ_GPU_SEEDS", "80"))


@pytest.mark.parametrize("tier", ["vulkan", "cuda", "opencl"])
def test_fuzz_fixed_seeds_on_gpu_tiers(tier):
    """The same programs on each GPU tier that opens here (lavapipe in CI): it found two miscompilations of
    llvmpipe and inexact trig for huge arguments before they shipped."""
    import qd

    why = getattr(qd, tier).unavailable_reason()
    if why is not None:
        pytest.skip(f"tier {tier!r}: {why}")
    count, failures = runner.fuzz(seconds=1e9, seed=0, max_cases=GPU_SEEDS, do_shrink=True, shrink_budget_s=30.0,
                                  log=lambda m: None, tiers=(tier,))
    assert count == GPU_SEEDS
    assert not failures, _fail_report(failures)


SPECIAL_SEEDS = int(os.environ.get("QD_FUZZ_SPECIAL_SEEDS", "40"))
SPECIALS = GenOptions(specials=True, deep_ifs=88)


@pytest.mark.parametrize("tier", ["interp", "cpu", "vulkan", "cuda", "opencl"])
def test_fuzz_specials_and_deep_ifs(tier):
    """IEEE specials next to constant zeros and chains of up to 88 nested ifs (issue 27 items 3 and 4: lavapipe
    folded `x * 0.0` to 0 and dropped ifs nested past 80; the old emitter fails 5 of these 40 seeds on lavapipe)."""
    import qd

    why = getattr(qd, tier).unavailable_reason()
    if why is not None:
        pytest.skip(f"tier {tier!r}: {why}")
    count, failures = runner.fuzz(seconds=1e9, seed=1000, options=SPECIALS, max_cases=SPECIAL_SEEDS, do_shrink=True,
                                  shrink_budget_s=30.0, log=lambda m: None, tiers=(tier,))
    assert count == SPECIAL_SEEDS
    assert not failures, _fail_report(failures)


def test_specials_compare_signed_zeros_and_any_nan():
    want = np.array([-0.0, np.nan, 1.0], np.float32)
    got = np.array([0.0, np.float32(np.nan) * -1, 1.0], np.float32)
    exact = np.zeros(3, bool)
    assert runner._float_diff(want, got, exact).tolist() == []
    assert runner._float_diff(want, got, exact, signed_zeros=True).tolist() == [0]


@pytest.mark.slow
def test_fuzz_long():
    seconds = float(os.environ.get("QD_FUZZ_SECONDS", "900"))
    tiers = runner.TIERS + tuple(t for t in ("vulkan",) if getattr(__import__("qd"), t).unavailable_reason() is None)
    count, failures = runner.fuzz(seconds=seconds, seed=100_000, repeat=2, log=lambda m: None, tiers=tiers)
    assert count > 0
    assert not failures, _fail_report(failures)


def _first_program_with_output(seed0: int = 0, needs_plain_store: bool = False):
    """A generated program whose reference writes some `oa` element (to plant a bug in); with
    `needs_plain_store`, one whose kernel also stores `oa[i] = ...` plainly."""
    for s in range(seed0, seed0 + 200):
        p = generate(s, GenOptions())
        if needs_plain_store and "oa[i] = " not in p.qd_source():
            continue
        arrays, _, _ = runner.run_reference(p.ref_source(), p.inputs())
        if np.any(arrays["oa"] != p.inputs()["oa"]):
            return p
    raise AssertionError("no generated program writes oa in 200 seeds")


def test_compare_catches_one_wrong_element():
    p = _first_program_with_output()
    arrays, ret, _ = runner.run_reference(p.ref_source(), p.inputs())
    ref = runner.Outcome(arrays, ret)
    assert runner.compare(p, ref, runner.Outcome({k: v.copy() for k, v in arrays.items()}, ret)) == []
    bad = {k: v.copy() for k, v in arrays.items()}
    k = int(np.nonzero(arrays["oa"] != p.inputs()["oa"])[0][0])
    bad["oa"][k] ^= 1
    diffs = runner.compare(p, ref, runner.Outcome(bad, ret))
    assert len(diffs) == 1 and diffs[0].startswith(f"oa[[{k}]]")
    exact_f = np.nonzero(~p.fuzzy["oy"])[0]
    if len(exact_f):
        bad = {k: v.copy() for k, v in arrays.items()}
        bad["oy"][exact_f[0]] = np.nextafter(bad["oy"][exact_f[0]], np.inf)
        assert runner.compare(p, ref, runner.Outcome(bad, ret)), "an exact f64 one ulp off must differ"


def test_planted_bug_is_found_and_shrunk(monkeypatch):
    """Plant a wrong result in the `cpu` tier (every plain `oa[i] = e` store becomes `1 + e`): `check`
    flags `cpu` alone, and `shrink` keeps that signature while making the program smaller."""
    p = _first_program_with_output(needs_plain_store=True)
    real_run_tier = runner.run_tier

    def run_tier(tier, src, arrays, repeat=1):
        if tier == "cpu":
            src = src.replace("oa[i] = ", "oa[i] = 1 + ")
        return real_run_tier(tier, src, arrays, repeat)

    monkeypatch.setattr(runner, "run_tier", run_tier)
    v = runner.check(p)
    assert not v.ok and set(v.diffs) == {"cpu"}, v.diffs
    small = runner.shrink(v, repeat=1, budget_s=60.0)
    assert small.signature == v.signature
    assert len(small.program.qd_source()) < len(p.qd_source())


def test_fuzzy_tolerance_follows_the_largest_reduction_operand():
    """Large summands that cancel leave another order's rounding far above the reduced value: fuzzy values
    are compared relative to the largest operand a float reduction saw (seed 5047's `accf` went 0 -> 58)."""
    src = "def ref(x):\n    s = F32(0)\n    for v in x:\n        s = facc(s, v, '+')\n    return s\n"
    x = np.array([2.0**40, 3.0, -(2.0**40)], np.float32)
    _, ret, magnitude = runner.run_reference(src, {"x": x})
    assert magnitude == 2.0**40 and float(ret) == 0.0  # the serial order rounds 3 away
    want, got = np.array([0.0], np.float32), np.array([58.0], np.float32)
    assert len(runner._float_diff(want, got, np.array([True]))) == 1
    assert len(runner._float_diff(want, got, np.array([True]), magnitude)) == 0
    assert len(runner._float_diff(want, got, np.array([False]), magnitude)) == 1  # exact values stay exact


def test_fuzzy_tolerance_beyond_1e20():
    """A reduction over values near 1e19 rounds by thousands in another order, and `sin(c - s)` of it is any value
    in [-1, 1] (campaign seed 1600162 on 16 cores: oy = 0.578 where the serial order gave -0.021)."""
    want, got = np.array([-0.021], np.float64), np.array([0.578], np.float64)
    assert len(runner._float_diff(want, got, np.array([True]), 3e21)) == 0
    assert len(runner._float_diff(want, got, np.array([False]), 3e21)) == 1
