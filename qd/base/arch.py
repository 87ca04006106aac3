"""The arch registry: which archs exist, which tiers are built, and how `qd.init(arch=...)` picks one.

Built: `interp` (the reference interpreter), `cpu` (LLVM, tiered with the interpreter), `vulkan` and `cuda`
(`qd/runtime/device.py` registers them; usable where a device opens). This registry only says whether an
arch is usable; the launcher decides how a kernel runs. A tier that gets built registers itself with
`set_available(arch, probe, reason)`, where `probe()` says whether the machine can run it (a driver is
present, a device found) and `reason` why not.
"""

from __future__ import annotations

import platform
import warnings
from typing import Callable, Iterable

from qd.errors import QuadrantsWarning


class Arch:
    """One arch. Members are singletons compared by identity: `Arch.cpu`, `Arch.cuda`, ... ."""

    _members: dict[str, "Arch"] = {}

    def __init__(self, name: str, is_gpu: bool, built: bool) -> None:
        self.name = name
        self.is_gpu = is_gpu
        self.built = built
        self._probe: Callable[[], bool] = lambda: built
        self._reason: Callable[[], str] | str | None = None
        # the lanes of one subgroup (warp) of this arch's device, asked of the tier (`set_subgroup_size`); None: the
        # arch has no subgroups (`qd.simt` refuses it)
        self._subgroup: Callable[[], int | None] | None = None

    def subgroup_size(self) -> int | None:
        """The lanes of one subgroup of this arch's device, or None where the arch has none."""
        return self._subgroup() if self._subgroup is not None else None

    def available(self) -> bool:
        """True when the tier is built and this machine can run it."""
        if not self.built:
            return False
        try:
            return bool(self._probe())
        except Exception as e:  # a broken driver must not break qd.init; report and treat as absent
            warnings.warn(f"qd: probing arch {self.name} failed ({type(e).__name__}: {e})", QuadrantsWarning,
                          stacklevel=3)
            return False

    def unavailable_reason(self) -> str | None:
        """None when the arch can run here, else why not ("the vulkan tier is not built yet", or the
        tier's own reason such as "no CUDA driver"). Never warns: tests use it to word their skips."""
        if not self.built:
            return f"the {self.name} tier is not built yet"
        try:
            if self._probe():
                return None
        except Exception as e:
            return f"probing arch {self.name} failed ({type(e).__name__}: {e})"
        reason = self._reason() if callable(self._reason) else self._reason
        return reason or f"arch {self.name} is not available on this machine"

    def __repr__(self) -> str:
        return f"Arch.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple:
        return (from_name, (self.name,))

    @classmethod
    def members(cls) -> list["Arch"]:
        return list(dict.fromkeys(cls._members.values()))


def _host_cpu_name() -> str:
    machine = platform.machine().lower()
    return "arm64" if machine in ("arm64", "aarch64") else "x64"


def _define(name: str, is_gpu: bool = False, built: bool = False) -> Arch:
    a = Arch(name, is_gpu, built)
    Arch._members[name] = a
    setattr(Arch, name, a)
    return a


# The host CPU arch is named as Quadrants names it ("x64" or "arm64"); `cpu` is that member.
cpu = _define(_host_cpu_name(), built=True)
# The other CPU arch is a known name that this machine cannot run.
x64 = cpu if cpu.name == "x64" else _define("x64", built=True)
arm64 = cpu if cpu.name == "arm64" else _define("arm64", built=True)
(arm64 if cpu is x64 else x64)._probe = lambda: False
x86_64 = x64
interp = _define("interp", built=True)
cuda = _define("cuda", is_gpu=True)
vulkan = _define("vulkan", is_gpu=True)
opencl = _define("opencl", is_gpu=True)
metal = _define("metal", is_gpu=True)
amdgpu = _define("amdgpu", is_gpu=True)
# `gpu` is a pseudo-arch: "the first available GPU arch", resolved by `select`.
gpu = _define("gpu", is_gpu=True)
Arch.cpu = cpu
Arch._members.update({"cpu": cpu, "x86_64": x64})

GPU_ORDER: tuple[Arch, ...] = (cuda, vulkan, opencl, metal, amdgpu)


def from_name(name: str) -> Arch:
    try:
        return Arch._members[name.strip().lower()]
    except KeyError:
        known = ", ".join(sorted(Arch._members))
        raise ValueError(f"qd: unknown arch {name!r} (known: {known})") from None


def to_arch(a: "Arch | str") -> Arch:
    if isinstance(a, Arch):
        return a
    if isinstance(a, str):
        return from_name(a)
    raise TypeError(f"qd: {a!r} is not an arch")


def set_available(a: Arch, probe: Callable[[], bool] | bool = True,
                  reason: Callable[[], str] | str | None = None) -> None:
    """Called by a tier once it is built: mark `a` built and give the probe for this machine.

    `reason` (a string or a callable giving one) says why the probe failed, e.g. "no CUDA driver
    (libcuda.so.1 not found)"; `unavailable_reason()` and the errors of `select` report it.
    """
    a.built = True
    a._probe = probe if callable(probe) else (lambda: bool(probe))
    a._reason = reason


def is_arch_supported(a: "Arch | str") -> bool:
    """`qd.is_arch_supported(arch)`: whether kernels can run on `arch` on this machine.

    `arch` is an arch object (`qd.cpu`, `qd.cuda`, `qd.vulkan`, ...) or its name as a string ("cpu", "x64",
    "cuda", ...). True when qd's tier for that arch is built and its probe finds the hardware and driver here
    (`qd.cpu` is True wherever qd runs); for `qd.gpu`, True when any GPU arch is. It starts nothing and can be
    called before `qd.init`. An unknown name raises `ValueError` (listing the known names); a value that is not
    an arch or a string raises `TypeError`.

    Example: `qd.init(arch=qd.cuda if qd.is_arch_supported(qd.cuda) else qd.cpu)`.
    """
    a = to_arch(a)
    if a is gpu:
        return any(g.available() for g in GPU_ORDER)
    return a.available()


def get_host_arch_list() -> list[Arch]:
    """The archs of the host CPU, as Quadrants reports them: `[qd.cpu]`."""
    return [cpu]


def _expand(archs: Iterable[Arch]) -> list[Arch]:
    out: list[Arch] = []
    for a in archs:
        out.extend(GPU_ORDER if a is gpu else (a,))
    return out


def _why_not(a: Arch) -> str:
    if a is gpu:
        if not any(g.built for g in GPU_ORDER):
            return "the gpu tier is not built yet"  # no GPU arch (GPU_ORDER) is built
        why = "; ".join(f"{g.name}: {g.unavailable_reason() or 'not available'}" for g in GPU_ORDER if g.built)
        return f"no GPU arch is available on this machine ({why})"
    return a.unavailable_reason() or f"arch {a.name} is not available on this machine"


def select(requested: "Arch | str | Iterable | None", enable_fallback: bool) -> Arch:
    """Quadrants' adaptive arch selection: the first available of `requested`, else cpu (or an error)."""
    if requested is None:
        return cpu
    if isinstance(requested, (Arch, str)):
        requested = [requested]
    wanted = [to_arch(a) for a in requested]
    for a in _expand(wanted):
        if a.available():
            return a
    reason = "; ".join(dict.fromkeys(_why_not(a) for a in wanted))
    if not enable_fallback:
        raise RuntimeError(f"qd: {reason} (arch={', '.join(a.name for a in wanted)} requested, "
                           "enable_fallback=False)")
    warnings.warn(f"qd: {reason}; falling back to cpu", QuadrantsWarning, stacklevel=3)
    return cpu


def set_subgroup_size(arch: Arch, size: Callable[[], int | None]) -> None:
    """A GPU tier's answer to `Arch.subgroup_size` (asked when a kernel using `qd.simt` compiles)."""
    arch._subgroup = size
