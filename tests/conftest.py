"""Shared fixtures: the `arch` fixture over every tier, and `qd_program` for arch-agnostic tests.

`arch` is parametrised over `ARCHS` (interp, cpu, cuda, vulkan, opencl). `QD_TEST_ARCHS=interp,cpu`
selects a subset (default: all). A selected tier that is not built, or whose driver or device is missing
here, is a visible skip whose reason comes from `qd.base.arch` ("the vulkan tier is not built yet",
"no CUDA driver", ...), never a silent pass: when a tier gets built and registers itself with
`qd.base.arch.set_available`, its tests start running with no change here.

A test restricted to some tiers says so with `@pytest.mark.archs("interp", ...)`; on the other tiers
it is skipped, again with the reason shown (`pytest -rs`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

import qd
from qd.base import arch as _arch

ARCHS: tuple[str, ...] = ("interp", "cpu", "cuda", "vulkan", "opencl")

# The verifier runs after every pass in tests (DESIGN §3); `QD_VERIFY=0` turns it off.
os.environ.setdefault("QD_VERIFY", "1")
# every SPIR-V module the tests make goes through spirv-val before the driver (installed by dev.sh)
os.environ.setdefault("QD_SPIRV_VALIDATE", "1" if __import__("shutil").which("spirv-val") else "0")


def selected_archs() -> list[str]:
    """The tiers named by `QD_TEST_ARCHS` (comma-separated), in `ARCHS` order; all when unset."""
    text = os.environ.get("QD_TEST_ARCHS", "").strip()
    if not text:
        return list(ARCHS)
    wanted = [t.strip().lower() for t in text.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in ARCHS]
    if unknown:
        raise pytest.UsageError(f"QD_TEST_ARCHS names unknown tier(s) {', '.join(unknown)}; "
                                f"known: {', '.join(ARCHS)}")
    return [a for a in ARCHS if a in wanted]


_SELECTED = selected_archs()
_reasons: dict[str, str | None] = {}


def arch_skip_reason(name: str) -> str | None:
    """None when tier `name` can run here, else the reason to skip it (probed once per session)."""
    if name not in _reasons:
        why = _arch.from_name(name).unavailable_reason()
        _reasons[name] = None if why is None else f"tier {name!r}: {why}"
    return _reasons[name]


def init_arch(a: _arch.Arch, **kwargs: object) -> None:
    """`qd.init` as every tier test does it: no fallback to another arch, quiet; kwargs add options."""
    kwargs.setdefault("log_level", "warn")
    if a is _arch.cpu:  # tests exercise native code from the first launch (tiering has its own tests)
        kwargs.setdefault("jit", "eager")
    qd.init(arch=a, enable_fallback=False, **kwargs)


@pytest.fixture(params=_SELECTED)
def arch(request: pytest.FixtureRequest) -> Iterator[_arch.Arch]:
    """A program initialised on one tier (`qd.init(arch=..., enable_fallback=False)`); yields the Arch."""
    name: str = request.param
    marker = request.node.get_closest_marker("archs")
    if marker is not None and name not in marker.args:
        pytest.skip(f"test runs only on archs {', '.join(marker.args)}")
    why = arch_skip_reason(name)
    if why is not None:
        pytest.skip(why)
    a = _arch.from_name(name)
    init_arch(a)
    yield a
    qd.reset()


@pytest.fixture
def qd_program() -> Iterator[_arch.Arch]:
    """A program on the interpreter, for tests that do not depend on the tier."""
    init_arch(_arch.interp)
    yield _arch.interp
    qd.reset()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per skip reason with its count, so a missing tier or package is never silent (and the
    list stays short: `-rs` would print one line per test per tier)."""
    counts: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = rep.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        counts[reason] = counts.get(reason, 0) + 1
    if counts:
        terminalreporter.write_sep("-", "skipped tests, by reason")
        for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{n:6d}  {reason}")


def tier_key(a: _arch.Arch) -> str:
    """The op table's key for the tier of arch `a` (`OpInfo.ulps`): its name, but "cpu" for `qd.cpu` (named after
    the host, "x64")."""
    return "cpu" if a is _arch.cpu else a.name
