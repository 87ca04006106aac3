"""A shared corpus of small, representative kernels that every tier runs (DESIGN §8).

A corpus case is a module-level function `case(arch) -> Run`, registered with `@corpus(...)`. It is
called once the program is initialised on `arch` (with the case's `options`, e.g. `fast_math=False`);
it declares its fields, builds its kernels and fixed inputs (seeded, so every tier sees the same data),
and returns a `Run`:

- `run()` launches the kernels and returns the named outputs as numpy arrays (or numpy scalars);
- `reference()` computes the same outputs with numpy. An output missing from the reference is compared
  only across tiers (e.g. the raw draws of `qd.random`, which have no numpy model).

Comparison (`compare`): outputs named in the case's `tol` are compared with `(rtol, atol)` (transcendentals,
float sums through atomics, matmul order); every other output must match exactly, dtype and shape
included, and floats bit for bit up to NaN payloads (the sign of zero counts).

`tests/test_corpus.py` runs every case on every tier against its reference, and against the
interpreter's outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

import qd
from qd.base.arch import Arch

Outputs = dict[str, Any]


@dataclass(frozen=True)
class Run:
    """A built case: `run()` gives the tier's outputs, `reference()` numpy's."""

    run: Callable[[], Outputs]
    reference: Callable[[], Outputs]


@dataclass(frozen=True)
class Case:
    """A registered corpus kernel: its builder, `qd.init` options and per-output tolerances."""

    name: str
    build: Callable[[Arch], Run]
    options: Mapping[str, Any] = field(default_factory=dict)
    tol: Mapping[str, tuple[float, float]] = field(default_factory=dict)


CASES: dict[str, Case] = {}


def corpus(options: Mapping[str, Any] | None = None,
           tol: Mapping[str, tuple[float, float]] | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated `case(arch) -> Run` under its function name."""

    def deco(fn: Callable[[Arch], Run]) -> Callable[[Arch], Run]:
        if fn.__name__ in CASES:
            raise ValueError(f"corpus case {fn.__name__!r} registered twice")
        CASES[fn.__name__] = Case(fn.__name__, fn, dict(options or {}), dict(tol or {}))
        return fn

    return deco


def init(arch: Arch, **options: Any) -> None:
    """`qd.init` as the corpus needs it: on exactly `arch` (no fallback), quiet."""
    options.setdefault("log_level", "warn")
    qd.init(arch=arch, enable_fallback=False, **options)


def build(case: Case, arch: Arch) -> Run:
    """Initialise the program on `arch` with the case's options and build the case."""
    init(arch, **case.options)
    return case.build(arch)


def compare(case: Case, got: Outputs, want: Outputs, what: str) -> None:
    """Assert that every output in `want` matches `got` (see the module docstring for the rules)."""
    missing = sorted(set(want) - set(got))
    assert not missing, f"{case.name}: outputs {missing} were not produced"
    for key, w in want.items():
        g, w = np.asarray(got[key]), np.asarray(w)
        msg = f"corpus case {case.name!r}, output {key!r}, against {what}"
        if key in case.tol:
            rtol, atol = case.tol[key]
            assert g.shape == w.shape, f"{msg}: shape {g.shape} != {w.shape}"
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=msg)
            continue
        np.testing.assert_array_equal(g, w, err_msg=msg, strict=True)
        if g.dtype.kind == "f":
            same_sign = np.isnan(w) | (np.signbit(g) == np.signbit(w))
            where = np.argwhere(~same_sign)[:5].tolist()
            assert same_sign.all(), f"{msg}: the sign of zero differs at {where}"


from . import data, locals, scalar  # noqa: E402,F401  (register the cases)
