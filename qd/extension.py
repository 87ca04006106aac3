"""`qd.extension`: Quadrants' extension names, and which arch supports which (`is_extension_supported`).

Use as `qd.extension.adstack`; each member is a string-valued enum, so it prints as its name.
"""

from __future__ import annotations

from enum import Enum


class Extension(str, Enum):
    sparse = "sparse"
    quant = "quant"
    quant_basic = "quant_basic"
    data64 = "data64"
    adstack = "adstack"
    bls = "bls"
    assertion = "assertion"
    extfunc = "extfunc"
    dynamic_index = "dynamic_index"
    mesh = "mesh"

    def __str__(self) -> str:
        return self.value


sparse = Extension.sparse
quant = Extension.quant
quant_basic = Extension.quant_basic
data64 = Extension.data64
adstack = Extension.adstack
bls = Extension.bls
assertion = Extension.assertion
extfunc = Extension.extfunc
dynamic_index = Extension.dynamic_index
mesh = Extension.mesh

# Extensions each arch supports. qd has dense SNodes only, so sparse/quant/bls/mesh are absent
# everywhere; a GPU tier adds its own row when it is built.
_SUPPORT: dict[str, frozenset[Extension]] = {
    "cpu": frozenset({adstack, data64, assertion, dynamic_index}),
    "interp": frozenset({adstack, data64, assertion, dynamic_index}),
}


def set_supported(arch_name: str, exts: set[Extension]) -> None:
    """Called by a tier when it is built, to declare the extensions it supports."""
    _SUPPORT[arch_name] = frozenset(exts)


def is_extension_supported(arch, ext: "Extension | str") -> bool:
    """Whether `ext` is supported on `arch` (an Arch or its name)."""
    from qd.base import arch as _arch

    a = _arch.to_arch(arch)
    key = "cpu" if a is _arch.cpu else a.name
    return Extension(ext) in _SUPPORT.get(key, frozenset())


__all__ = ["Extension", "is_extension_supported", "sparse", "quant", "quant_basic", "data64", "adstack",
           "bls", "assertion", "extfunc", "dynamic_index", "mesh"]
