"""The shared kernel corpus (`tests/corpus/`) on every tier: against numpy, and against the interpreter.

The interpreter is the executable definition of every op, so each other tier must reproduce its
outputs (exactly, or within the case's tolerance where the result depends on the op table's ulps or the
order atomics arrive in). The interpreter's outputs are computed once per case and cached.
"""

from __future__ import annotations

from typing import Any

import pytest

import corpus
import qd
from conftest import selected_archs
from qd.base.arch import Arch

NAMES = sorted(corpus.CASES)
_interp_outputs: dict[str, dict[str, Any]] = {}


def _outputs(case: corpus.Case, arch: Arch) -> dict[str, Any]:
    return corpus.build(case, arch).run()


def _on_interp(case: corpus.Case) -> dict[str, Any]:
    if case.name not in _interp_outputs:
        try:
            _interp_outputs[case.name] = _outputs(case, qd.interp)
        finally:
            qd.reset()
    return _interp_outputs[case.name]


def test_corpus_is_complete() -> None:
    assert len(NAMES) >= 20
    for case in corpus.CASES.values():
        assert case.build.__doc__, f"corpus case {case.name} needs a docstring saying what it covers"


@pytest.mark.parametrize("name", NAMES)
def test_corpus_matches_numpy(name: str, arch: Arch) -> None:
    case = corpus.CASES[name]
    built = corpus.build(case, arch)
    got = built.run()
    corpus.compare(case, got, built.reference(), "numpy")


@pytest.mark.parametrize("arch", [a for a in selected_archs() if a != "interp"], indirect=True)
@pytest.mark.parametrize("name", NAMES)
def test_corpus_matches_interp(name: str, arch: Arch) -> None:
    case = corpus.CASES[name]
    want = _on_interp(case)
    got = _outputs(case, arch)
    corpus.compare(case, got, want, "the interp tier")
