"""The test machinery of conftest.py: tier selection, skip reasons from `qd.base.arch`, the markers."""

from __future__ import annotations

import pytest

import qd
from conftest import ARCHS, arch_skip_reason, selected_archs
from qd.base import arch as _arch


def test_selected_archs_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QD_TEST_ARCHS", raising=False)
    assert selected_archs() == list(ARCHS)
    monkeypatch.setenv("QD_TEST_ARCHS", " CPU, interp ,")
    assert selected_archs() == ["interp", "cpu"]
    monkeypatch.setenv("QD_TEST_ARCHS", "interp,tpu")
    with pytest.raises(pytest.UsageError, match="unknown tier.*tpu"):
        selected_archs()


def test_skip_reasons_come_from_the_arch_registry() -> None:
    assert arch_skip_reason("interp") is None and arch_skip_reason("cpu") is None
    for name in ("cuda", "vulkan", "opencl"):
        a = _arch.from_name(name)
        if not a.built:
            assert arch_skip_reason(name) == f"tier {name!r}: the {name} tier is not built yet"


def test_unavailable_reason_of_a_built_tier() -> None:
    a = _arch.Arch("fake_gpu", is_gpu=True, built=False)
    assert a.unavailable_reason() == "the fake_gpu tier is not built yet"
    _arch.set_available(a, lambda: False, "no CUDA driver (libcuda.so.1 not found)")
    assert not a.available() and a.unavailable_reason() == "no CUDA driver (libcuda.so.1 not found)"
    _arch.set_available(a, False)
    assert a.unavailable_reason() == "arch fake_gpu is not available on this machine"
    _arch.set_available(a, lambda: 1 / 0, lambda: "unused")
    assert a.unavailable_reason() == "probing arch fake_gpu failed (ZeroDivisionError: division by zero)"
    _arch.set_available(a, True)
    assert a.available() and a.unavailable_reason() is None


def test_the_fixture_initialises_the_tier(arch: _arch.Arch) -> None:
    assert qd.cfg.arch is arch and qd.cfg.enable_fallback is False
    assert arch.name in ARCHS or arch is qd.cpu


@pytest.mark.archs("interp")
def test_archs_marker_restricts_the_tiers(arch: _arch.Arch) -> None:
    assert arch is qd.interp


def test_qd_program_is_the_interpreter(qd_program: _arch.Arch) -> None:
    assert qd_program is qd.interp and qd.cfg.arch is qd.interp
