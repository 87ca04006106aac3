"""The unified tensor API: `qd.Backend`, `qd.tensor` (with `qd.Vector.tensor` / `qd.Matrix.tensor`), and
`qd.Tensor`, the wrapper those return, which is also the kernel annotation accepting either backend.

A `Tensor` holds one bare impl (a `qd.field` or a `qd.ndarray`) and forwards a fixed surface to it.
`layout=` is a property of the impl (`HostData.layout`, `qd/runtime/_hostdata.py`): its storage is
physically permuted while its shape, host indexing and numpy/torch copies stay canonical, and kernels
permute subscripts (`frontend/values.GlobalTensor`). Kernel arguments are unwrapped in
`frontend/args.py`, so a kernel only ever sees the impl.
"""

from __future__ import annotations

from enum import IntEnum
from functools import cached_property
from typing import Any

import numpy as np

from qd.runtime.fields import Field, field
from qd.runtime.ndarray import Ndarray, ndarray
from qd.types import hooks
from qd.types.dtypes import MatrixType

__all__ = ["Backend", "Tensor", "VectorTensor", "MatrixTensor", "tensor", "wrap"]


class Backend(IntEnum):
    """Storage of a `qd.tensor`: FIELD (`qd.field`: specialised per shape at compile time) or NDARRAY
    (`qd.ndarray`: a runtime argument; a new shape does not recompile)."""

    FIELD = 0
    NDARRAY = 1


def _backend(value: Any) -> Backend:
    try:
        return Backend(value)
    except (ValueError, TypeError):
        names = ", ".join(f"qd.Backend.{b.name}" for b in Backend)
        raise ValueError(f"backend={value!r} is not a valid qd.Backend; expected one of {names}") from None


_PASSED_ON = frozenset({"needs_grad"})  # given to qd.field / qd.ndarray; every other keyword is refused


def _check_kwargs(kwargs: dict, factory: str, takes_layout: bool) -> None:
    if "order" in kwargs:
        hint = "pass layout=(...) instead" if takes_layout else \
            "use qd.Vector.field / qd.Matrix.field directly for another storage order"
        raise TypeError(f"{factory}(...) does not accept order= (the unified tensor API takes layout=); {hint}")
    unknown = sorted(set(kwargs) - _PASSED_ON)
    if unknown:
        names = {"dtype", "shape", "backend", "needs_grad"} | ({"layout"} if takes_layout else set())
        allowed = ", ".join(sorted(names))
        hint = "" if takes_layout or "layout" not in unknown else " (vector/matrix tensors have no layout=)"
        raise TypeError(f"{factory}() got unexpected keyword argument(s) {unknown!r}; accepted: {allowed}{hint}")


def _check_layout(layout: Any, ndim: int) -> tuple[int, ...] | None:
    """`layout` as a tuple (None for the identity), or ValueError when it is no permutation of the axes."""
    try:
        lay = tuple(int(a) for a in layout)
    except TypeError:
        raise TypeError(f"layout must be a tuple of ints, got {layout!r}") from None
    if len(lay) != ndim:
        raise ValueError(f"layout has {len(lay)} entries but shape has {ndim} dimensions; they must match")
    if sorted(lay) != list(range(ndim)):
        raise ValueError(f"layout={lay!r} is not a permutation of range({ndim})")
    return None if lay == tuple(range(ndim)) else lay


def tensor(dtype: Any, shape: Any, *, backend: Any = Backend.NDARRAY, layout: Any = None, **kwargs: Any) -> Tensor:
    """A new zero-filled tensor of `dtype` (scalar, or a vector/matrix type) and canonical `shape`, stored
    as a field or an ndarray (`backend`), its axes nested in `layout` order (outermost first)."""
    if isinstance(dtype, (Field, Ndarray, Tensor)):
        raise TypeError(f"qd.tensor() allocates a new tensor; to wrap an existing {type(dtype).__name__}, use "
                        "qd.wrap(impl)")
    if layout is not None and isinstance(dtype, MatrixType):
        raise TypeError("layout= is not supported with compound dtypes (vector/matrix): use qd.Vector.tensor / "
                        "qd.Matrix.tensor without layout=")
    _check_kwargs(kwargs, "qd.tensor", takes_layout=True)
    backend = _backend(backend)
    ndim = 1 if isinstance(shape, (int, np.integer)) else len(tuple(shape))
    lay = _check_layout(layout, ndim) if layout is not None else None
    impl = field(dtype, shape, **kwargs) if backend is Backend.FIELD else ndarray(dtype, shape, **kwargs)
    if lay is not None:
        impl._relayout(lay)
    return wrap(impl)


def _tensor_of(mtype: MatrixType, shape: Any, backend: Any, kwargs: dict, factory: str) -> Tensor:
    _check_kwargs(kwargs, factory, takes_layout=False)
    backend = _backend(backend)
    impl = field(mtype, shape, **kwargs) if backend is Backend.FIELD else ndarray(mtype, shape, **kwargs)
    return wrap(impl)


def vector_tensor(n: int, dtype: Any, shape: Any, *, backend: Any = Backend.NDARRAY, **kwargs: Any) -> Tensor:
    """`qd.Vector.tensor`: a tensor of n-vectors."""
    from qd.types.dtypes import vector

    return _tensor_of(vector(n, dtype), shape, backend, kwargs, "qd.Vector.tensor")


def matrix_tensor(n: int, m: int, dtype: Any, shape: Any, *, backend: Any = Backend.NDARRAY,
                  **kwargs: Any) -> Tensor:
    """`qd.Matrix.tensor`: a tensor of n x m matrices."""
    from qd.types.dtypes import matrix

    return _tensor_of(matrix(n, m, dtype), shape, backend, kwargs, "qd.Matrix.tensor")


# ---------------------------------------------------------------- the wrapper


class Tensor:
    """A field or an ndarray behind one surface; as a kernel annotation (`x: qd.Tensor`), a parameter
    taking either backend (a field is compiled in like a template, an ndarray is a runtime argument)."""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, (Field, Ndarray)):
            raise TypeError(f"Tensor(impl) requires an Ndarray or Field; got {type(impl).__name__}"
                            + (" (use qd.wrap, which never double-wraps)" if isinstance(impl, Tensor) else ""))
        self._impl = impl

    def _unwrap(self) -> Any:
        """The bare field or ndarray."""
        return self._impl

    @property
    def backend(self) -> Backend:
        return Backend.NDARRAY if isinstance(self._impl, Ndarray) else Backend.FIELD

    def __repr__(self) -> str:
        lay = "" if self.layout is None else f", layout={self.layout!r}"
        return f"{type(self).__name__}(shape={self.shape!r}, dtype={self.dtype!r}, backend={self.backend.name}{lay})"

    # ---- introspection
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._impl.shape)

    @property
    def dtype(self) -> Any:
        return self._impl.dtype

    @property
    def layout(self) -> tuple[int, ...] | None:
        return self._impl.layout

    @property
    def ndim(self) -> int:
        return len(self._impl.shape)

    # ---- host data (the impl's methods are canonical under any layout)
    def __getitem__(self, key: Any) -> Any:
        return self._impl[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._impl[key] = value

    def to_numpy(self, dtype: Any = None, *, copy: bool | None = True) -> np.ndarray:
        """A copy (`copy=True`), or with `copy=False` a canonical view sharing the storage (CPU tiers only; `None`:
        shared where it can be, else a copy)."""
        return self._impl.to_numpy(dtype=dtype, copy=copy)

    def from_numpy(self, arr: Any) -> None:
        self._impl.from_numpy(arr)

    def to_torch(self, device: Any = None, *, copy: bool | None = True) -> Any:
        """A copy (`copy=True`), or a tensor sharing the data (`False`; `None`: shared where it can be)."""
        return self._impl.to_torch(device=device, copy=copy)

    def from_torch(self, t: Any) -> None:
        self._impl.from_torch(t)

    def to_dlpack(self, versioned: bool = False) -> Any:
        """A DLPack capsule of the canonical view (zero-copy; permuted strides under a layout)."""
        import torch.utils.dlpack

        return torch.utils.dlpack.to_dlpack(self._impl.to_torch(copy=False))

    def fill(self, value: Any) -> None:
        self._impl.fill(value)

    def copy_from(self, other: Any) -> None:
        src = other._impl if isinstance(other, Tensor) else other
        if isinstance(src, (Field, Ndarray)) and isinstance(src, Field) != isinstance(self._impl, Field):
            raise TypeError("Tensor.copy_from: cross-backend copy (field <-> ndarray) is unsupported; route it "
                            "through torch: dst.from_torch(src.to_torch())")
        self._impl.copy_from(src)

    # ---- gradients
    @cached_property
    def grad(self) -> Tensor | None:
        g = getattr(self._impl, "grad", None)
        return None if g is None else wrap(g)

    @cached_property
    def dual(self) -> Tensor | None:
        d = getattr(self._impl, "dual", None)
        return None if d is None else wrap(d)

    def has_grad(self) -> bool:
        return self._impl.has_grad()

    def has_dual(self) -> bool:
        return self._impl.has_dual()

    # ---- pickle: rebuilt through the factory from the canonical data (works for fields too)
    def __reduce__(self) -> tuple:
        es = tuple(self._impl.elem_shape)
        return (_rebuild, (int(self.backend), self.dtype, self.shape, es, self.layout, self._impl.to_numpy()))


class _ElementTensor(Tensor):
    """A tensor whose elements are vectors (rank 1) or matrices (rank 2)."""

    _rank = 0
    _what = ""

    def __init__(self, impl: Any) -> None:
        if not isinstance(impl, (Field, Ndarray)) or len(impl.elem_shape) != self._rank:
            raise TypeError(f"{type(self).__name__} requires a {self._what}-element impl; got {type(impl).__name__}")
        super().__init__(impl)

    @property
    def element_shape(self) -> tuple[int, ...]:
        return tuple(self._impl.elem_shape)

    @property
    def n(self) -> int:
        return self._impl.elem_shape[0]


class VectorTensor(_ElementTensor):
    """`qd.VectorTensor`: a tensor whose elements are vectors, as made by `qd.Vector.tensor(n, dtype, shape,
    backend=...)` (or `qd.wrap` of a vector field or ndarray).

    Besides `qd.Tensor`'s interface (`shape`, `dtype`, `backend`, `to_numpy`, `from_numpy`, `fill`, indexing,
    ...), it has `n` (the vector length) and `element_shape` (`(n,)`). Constructed directly around a field or
    ndarray whose elements are not vectors, it raises `TypeError`.
    """

    _rank, _what = 1, "vector"


class MatrixTensor(_ElementTensor):
    """`qd.MatrixTensor`: a tensor whose elements are `n x m` matrices, as made by `qd.Matrix.tensor(n, m, dtype,
    shape, backend=...)` (or `qd.wrap` of a matrix field or ndarray).

    Besides `qd.Tensor`'s interface it has `n` (rows), `m` (columns) and `element_shape` (`(n, m)`).
    Constructed directly around a field or ndarray whose elements are not matrices, it raises `TypeError`.
    """

    _rank, _what = 2, "matrix"

    @property
    def m(self) -> int:
        return self._impl.elem_shape[1]


TENSOR_TYPES = (Tensor, VectorTensor, MatrixTensor)


def wrap(impl: Any) -> Tensor:
    """`qd.wrap(x)`: the field or ndarray `x` wrapped in the most specific tensor class: a `qd.VectorTensor` for
    vector elements, a `qd.MatrixTensor` for matrix elements, a `qd.Tensor` for scalars.

    The wrapper shares `x`'s data (nothing is copied) and can be passed to kernels like `x` itself.
    Anything other than a field or ndarray raises `TypeError`. Example: `t = qd.wrap(qd.Vector.field(3, qd.f32,
    8))` gives a VectorTensor with `t.n == 3`.
    """
    es = getattr(impl, "elem_shape", ())
    cls = {1: VectorTensor, 2: MatrixTensor}.get(len(es), Tensor) if isinstance(impl, (Field, Ndarray)) else Tensor
    return cls(impl)


def unwrap(v: Any) -> Any:
    """A kernel argument with any Tensor wrapper taken off."""
    return v._impl if type(v) in TENSOR_TYPES else v


def _rebuild(backend: int, dtype: Any, shape: tuple, elem_shape: tuple, layout: Any, data: np.ndarray) -> Tensor:
    if len(elem_shape) == 1:
        t = vector_tensor(elem_shape[0], dtype, shape, backend=backend)
    elif len(elem_shape) == 2:
        t = matrix_tensor(elem_shape[0], elem_shape[1], dtype, shape, backend=backend)
    else:
        t = tensor(dtype, shape, backend=backend, layout=layout)
    t.from_numpy(data)
    return t


def _with_layout(arr: Any, layout: Any) -> Any:
    """Quadrants' private helper: declare that ndarray `arr`, allocated at the *physical* shape, stores
    canonical axes in `layout` order (its shape becomes the canonical one; no data moves)."""
    nd = unwrap(arr)
    nd._tag_layout(layout)
    return nd


hooks.register(Tensor=Tensor, TENSOR_TYPES=TENSOR_TYPES)
