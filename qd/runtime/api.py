"""Public names of the runtime layer (program lifetime, archs, config, fields, ndarrays, SNodes).

`qd/__init__.py` re-exports everything in `__all__`.
"""

from __future__ import annotations

from typing import Any

# `qd.gpu` is both a pseudo-arch (Quadrants' name) and the package `qd/gpu/` (fixed by DESIGN §2).
# Importing a submodule for the first time rebinds the parent's attribute to the module, so the package
# is loaded here, before `qd/__init__.py` binds `qd.gpu` to the arch; later imports of `qd.gpu.<sub>`
# then leave the attribute alone.
import qd.gpu  # noqa: F401,E402
from qd._logging import is_logging_effective
from qd.base import config as _config
from qd.base.arch import (Arch, amdgpu, arm64, cpu, cuda, get_host_arch_list, gpu, interp,
                             is_arch_supported, metal, opencl, vulkan, x64, x86_64)
from qd.base.config import CRITICAL, DEBUG, ERROR, INFO, TRACE, WARN
from qd.runtime.fields import Field, MatrixField, ScalarField, field
from qd.runtime.ndarray import MatrixNdarray, Ndarray, ScalarNdarray, VectorNdarray, ndarray
from qd.runtime.program import init, reset, set_logging_level, sync
from qd.runtime.snode import (SNode, axes, i, ij, ijk, ijkl, ijl, ik, ikl, il, j, jk, jkl, jl, k, kl, l, root)


class _CfgProxy:
    """`qd.cfg`: forwards attribute reads and writes to the live config, which `qd.init` replaces."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_config.current(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(_config.current(), name, value)

    def __dir__(self) -> list[str]:
        return sorted(set(_config.OPTIONS) | {"arch", "default_fp", "default_ip", "default_up"})

    def __repr__(self) -> str:
        return repr(_config.current())


cfg = _CfgProxy()

__all__ = [
    "init", "reset", "sync", "cfg", "set_logging_level", "is_logging_effective",
    "Arch", "cpu", "x64", "x86_64", "arm64", "interp", "gpu", "cuda", "vulkan", "opencl", "metal", "amdgpu",
    "get_host_arch_list", "is_arch_supported",
    "field", "ndarray", "root", "axes", "SNode",
    "i", "j", "k", "l", "ij", "ik", "il", "jk", "jl", "kl", "ijk", "ijl", "ikl", "jkl", "ijkl",
    "WARN", "INFO", "DEBUG", "ERROR", "TRACE", "CRITICAL",
    "Field", "ScalarField", "MatrixField", "Ndarray", "ScalarNdarray", "VectorNdarray", "MatrixNdarray",
]
