"""What objects of the low layers do that only higher layers know how to do, registered by those layers when
they are imported (DESIGN §1: dependencies point down; a call up goes through here).

`qd.f32(x)` casts (`qd.frontend.builtins`), `qd.types.vector(3, qd.f32)(...)` builds a `qd.Vector` and its
`.field`/`.ndarray` make containers (`qd.lang.matrix`), a struct type's call builds a kernel struct value
(`qd.frontend.structs`) or a host `qd.Struct` (`qd.lang.struct`). The frontend and the runtime name the
classes of the API layer (`Matrix`, `Struct`, `BufferView`, `Tensor`, `Field`) through `impl` too, so they
never import that layer. `import qd` registers every name of `NAMES` (tests/test_layers.py checks it).
"""

from __future__ import annotations

from typing import Any

NAMES: frozenset[str] = frozenset({
    "cast",             # qd.frontend.builtins: a dtype called on a value, in a kernel or on the host
    "in_kernel",        # qd.frontend.builder: whether a kernel is being compiled on this thread
    "struct_kernel",    # qd.frontend.structs: a struct type called in a kernel
    "device_array",     # qd.runtime.device_array: another library's device array used in place, or None
    "Matrix", "Vector",  # qd.lang.matrix
    "Struct", "StructField", "struct_host",  # qd.lang.struct: host struct values and struct fields
    "BufferView", "ndarray_slice",  # qd.lang.buffer_view: the class, and `nd[a:b]` of a 1-D ndarray
    "Tensor", "TENSOR_TYPES",  # qd.lang.tensor: the qd.Tensor wrappers
    "Field",            # qd.runtime.fields
})


class _Impl:
    """The registered implementations, read as attributes (`impl.Matrix`)."""

    def __getattr__(self, name: str) -> Any:
        if name in NAMES:
            raise RuntimeError(f"qd.types.hooks: {name!r} is registered when the module providing it is imported; "
                               "`import qd` imports them all (this is a bug in qd if it happens after `import qd`)")
        raise AttributeError(name)


impl = _Impl()


def register(**impls: Any) -> None:
    """Register implementations by name (each one of `NAMES`)."""
    for name, value in impls.items():
        if name not in NAMES:
            raise KeyError(f"qd.types.hooks: unknown hook {name!r}")
        setattr(impl, name, value)


def missing() -> list[str]:
    """The names of `NAMES` not registered yet."""
    return sorted(n for n in NAMES if n not in vars(impl))
