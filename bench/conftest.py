"""Benchmark fixtures: every benchmark runs on a fresh qd program of the tier under test."""

from __future__ import annotations

import pytest

import qd


@pytest.fixture
def interp_program():
    qd.init(arch=qd.interp, log_level="warn")
    yield
    qd.reset()
