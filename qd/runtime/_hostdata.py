"""The host-side data API shared by fields and ndarrays: indexing, fill, numpy/torch copies, generations.

A `HostData` owns `arr`, a C-contiguous numpy array of shape `shape + elem_shape`. Every host write
path calls `_bump()`, which advances `generation`, so caches keyed on buffer contents (the
max-reducer's) can tell the buffer changed.

A buffer may have a `layout` (`qd.tensor(..., layout=...)`, `qd.field(..., order=...)`): a permutation
of the outer axes listing the canonical axis stored at each nesting level, outermost first. `arr` then
has the permuted *physical* shape; `shape` and every host method here stay canonical (they go through
`_host_view()`, a transposed numpy view), and kernels permute their subscripts (`frontend/values.py`).
"""

from __future__ import annotations

import numbers
from typing import Any, Iterator

import numpy as np

from qd._launch import storage_changed as _storage_changed
from qd.errors import HostIndexError, QuadrantsIndexError, QuadrantsRuntimeError, QuadrantsRuntimeTypeError
from qd.runtime import pyquadrants as _pyq
from qd.types import hooks
from qd.types.dtypes import DataType


class IndexCountError(QuadrantsIndexError, AssertionError):
    """Wrong number of indices in Python scope. Quadrants raises AssertionError for fields and an
    IndexError for ndarrays; this is both, so code written against either keeps working."""


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ImportError("qd: to_torch/from_torch need PyTorch, which is not installed "
                          "(pip install torch)") from None
    return torch


def wrap_int(value: int, dtype: DataType) -> int:
    """Two's-complement wrap of a Python int to `dtype`'s width (as a kernel store would)."""
    mask = (1 << dtype.bits) - 1
    v = int(value) & mask
    if dtype.is_signed and v >> (dtype.bits - 1):
        v -= 1 << dtype.bits
    return v


def cast_scalar(value: Any, dtype: DataType) -> Any:
    """`value` converted to a numpy scalar of `dtype`, wrapping integers and truncating floats."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1 and not isinstance(value, np.ndarray):
        value = value.item()
    if isinstance(value, np.ndarray):
        if value.size != 1:
            raise ValueError(f"qd: expected a scalar, got an array of shape {value.shape}")
        value = value.reshape(()).item()
    if dtype.bits == 1:
        return np.bool_(bool(value))
    if dtype.is_int:
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
            value = int(value)  # C cast: truncates toward zero
        return dtype.np_dtype.type(wrap_int(value, dtype))
    return dtype.np_dtype.type(value)


def to_python(x: Any, dtype: DataType) -> Any:
    """A numpy scalar as the Python number Quadrants returns (u1 reads as an int)."""
    v = x.item()
    return int(v) if dtype.bits == 1 else v


def element_object(a: np.ndarray, dtype: DataType) -> Any:
    """A vector/matrix element as a `qd.Vector`/`qd.Matrix`."""
    cls = hooks.impl.Vector if a.ndim == 1 else hooks.impl.Matrix
    return cls(a.tolist(), dt=dtype)


def as_array(value: Any) -> np.ndarray:
    """A value given for a vector/matrix element (sequence, numpy array or qd Vector/Matrix) as numpy."""
    if isinstance(value, np.ndarray):
        return value
    to_numpy = getattr(value, "to_numpy", None)
    if callable(to_numpy):
        return np.asarray(to_numpy())
    return np.asarray(value)


# Called with the object before every host write of its values while a `qd.ad.Tape` runs (set by
# `qd.runtime.ad_tape`: the Tape saves the contents an earlier launch's gradient needs, `qd.runtime.ad_snapshots`);
# None otherwise.
BEFORE_HOST_WRITE: Any = None


def before_host_write(obj: Any) -> None:
    """A host write into `obj` is about to change its values (`BEFORE_HOST_WRITE`)."""
    hook = BEFORE_HOST_WRITE
    if hook is not None:
        hook(obj)


class HostData:
    """Base of `Field` and `Ndarray`: owns the storage and implements the Python-scope data API."""

    _kind = "buffer"  # used in messages: "qd.field" or "qd.ndarray"

    dtype: DataType
    elem_shape: tuple[int, ...]
    generation: int
    escaped: bool = False  # storage shared outside qd (`to_torch(copy=False)`): writes may bypass `_bump`
    device_shared: bool = False  # the device copy shared outside qd (`to_torch(copy=False)` on qd.cuda): the same
    _arr_: np.ndarray | None = None  # (`_arr`)
    _layout_: tuple[int, ...] | None = None  # (`_layout`)
    _mirror: Any = None  # the device copy on a GPU arch (`qd/runtime/device.py`): synced lazily through `arr`
    _bulk_materializes = False  # fields: every bulk host operation materializes first (`qd/runtime/pyquadrants.py`)

    # The storage and its layout are set through these, which tell the launch plans (`qd._launch.storage_changed`):
    # a plan binds an ndarray once and trusts the binding until some storage or layout changes.
    @property
    def _arr(self) -> np.ndarray | None:
        return self._arr_

    @_arr.setter
    def _arr(self, a: np.ndarray | None) -> None:
        self._arr_ = a
        _storage_changed()

    @property
    def _layout(self) -> tuple[int, ...] | None:
        """The canonical axis per physical nesting level; None: canonical order."""
        return self._layout_

    @_layout.setter
    def _layout(self, lay: tuple[int, ...] | None) -> None:
        self._layout_ = lay
        _storage_changed()

    def _materialize(self, bulk: bool) -> None:
        """Materialize before a host operation where Quadrants does (`qd/runtime/pyquadrants.py`): before every
        bulk operation on a field, else when a field was declared since the last materialization."""
        if _pyq.pending or (bulk and self._bulk_materializes):
            _pyq.materialize()

    # ---------------------------------------------------------------- storage

    @property
    def arr(self) -> np.ndarray:
        """The storage: C-contiguous, shape `shape + elem_shape`, dtype `dtype.np_dtype`."""
        if self._arr is None:
            self._raise_no_storage()
        m = self._mirror
        if m is not None and m.device_dirty:
            m.to_host(self._arr)
        return self._arr

    def _storage(self) -> np.ndarray:
        """The host array as it is, without bringing it up to date from the device: for its shape, dtype and
        identity only (on a GPU arch its contents may be stale; `arr` syncs)."""
        if self._arr is None:
            self._raise_no_storage()
        return self._arr

    def _raise_no_storage(self) -> None:
        raise QuadrantsRuntimeError(f"{self._kind} has no storage")

    # ---------------------------------------------------------------- physical layout

    @property
    def layout(self) -> tuple[int, ...] | None:
        """The physical axis order (canonical axis per nesting level, outermost first); None if canonical."""
        return self._layout

    def _physical(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Canonical outer `shape` in storage order."""
        lay = self._layout
        return tuple(shape) if lay is None else tuple(shape[a] for a in lay)

    @property
    def _physical_shape(self) -> tuple[int, ...]:
        return self._physical(tuple(self.shape))

    def _host_view(self, sync: bool = True) -> np.ndarray:
        """The storage with canonical axes: `arr` itself, or a transposed view of it under a layout. With
        `sync=False` the host array as it is (no download from the device: for shapes and offsets)."""
        a = self.arr if sync else self._storage()
        lay = self._layout
        if lay is None:
            return a
        n = len(lay)
        return a.transpose(tuple(lay.index(k) for k in range(n)) + tuple(range(n, a.ndim)))

    def _relayout(self, layout: Any) -> None:
        """Store the outer axes in `layout` order from now on (None or the identity: canonical order),
        keeping the data. Unplaced storage only records the layout."""
        lay = tuple(int(a) for a in layout) if layout is not None else None
        if lay is not None and lay == tuple(range(len(lay))):
            lay = None
        if lay == self._layout:
            return
        if self._arr is None:
            self._layout = lay
            return
        canon = self._host_view()
        n = canon.ndim - len(self.elem_shape)
        self._layout = lay
        order = (lay or tuple(range(n))) + tuple(range(n, canon.ndim))
        self._arr = np.ascontiguousarray(canon.transpose(order))
        self._bump()

    def _bump(self) -> None:
        """A host write changed the contents (the device copy, if any, is now older; uploaded at once when
        the device copy is shared outside qd)."""
        self.generation += 1
        m = self._mirror
        if m is not None:
            m.host_dirty = True
            if m.shared:
                with m.rt.lock:
                    m.to_device(self._arr)

    def _bump_device(self) -> None:
        """A kernel on a GPU arch wrote the device copy (the host copy is now older)."""
        self.generation += 1
        self._mirror.device_dirty = True

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _offset(self) -> tuple[int, ...]:
        return (0,) * len(self.shape)

    # ---------------------------------------------------------------- indexing

    def _index_count_message(self, n: int) -> str:
        return f"{len(self.shape)}d {self._kind.removeprefix('qd.')} indexed with {n}d indices"

    def _normalize_key(self, key: Any) -> tuple[int, ...]:
        """Python-scope key → tuple of storage indices, with offset applied and bounds checked."""
        if key is None:
            key = ()
        elif isinstance(key, (tuple, list)):
            key = tuple(key)
        elif isinstance(key, np.ndarray) and key.ndim == 1:
            key = tuple(key.tolist())
        elif callable(getattr(key, "to_numpy", None)):
            key = tuple(np.asarray(key.to_numpy()).reshape(-1).tolist())
        else:
            key = (key,)
        if len(key) != len(self.shape):
            raise IndexCountError(self._index_count_message(len(key)))
        out = []
        for axis, (k, lo, n) in enumerate(zip(key, self._offset(), self.shape)):
            if isinstance(k, (bool, np.bool_)) or not isinstance(k, (numbers.Integral, np.integer)):
                raise TypeError(f"Detected illegal element of type: {type(k)}. "
                                f"Please be aware that slicing a {self._kind} is not supported so far.")
            k = int(k)
            if not lo <= k < lo + n:
                hint = " (negative indices do not wrap around)" if k < 0 and lo == 0 else ""
                off = f" and offset {self._offset()}" if any(self._offset()) else ""
                raise HostIndexError(f"index {k} is out of bounds for axis {axis} of {self._kind} with shape "
                                 f"{self.shape}{off}{hint}")
            out.append(k - lo)
        return tuple(out)

    def __getitem__(self, key: Any) -> Any:
        self._materialize(False)
        idx = self._normalize_key(key)
        m = self._mirror
        if m is not None and m.device_dirty:  # read the element alone from the device, not the whole buffer
            off, n = self._element_bytes(idx)
            x = np.frombuffer(m.read(off, n), dtype=self.dtype.np_dtype).reshape(self.elem_shape)
            x = x if self.elem_shape else x[()]
        else:
            x = self._host_view()[idx]
        if self.elem_shape:
            obj = element_object(x, self.dtype)
            if not isinstance(obj, np.ndarray):  # `x[i][j] = v` writes through, as in Quadrants
                obj._write_back = lambda m: self._store_element(idx, m)
            return obj
        return to_python(x, self.dtype)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._materialize(False)
        self._store_element(self._normalize_key(key), value)

    def _store_element(self, idx: tuple[int, ...], value: Any) -> None:
        """Store at storage indices `idx` (offset already applied)."""
        v = self._cast_array(value, self.elem_shape) if self.elem_shape else cast_scalar(value, self.dtype)
        if BEFORE_HOST_WRITE is not None:
            BEFORE_HOST_WRITE(self)
        m = self._mirror
        if m is not None and not m.host_dirty and not self.escaped:
            # write through to the device copy, the element alone (the host copy may be stale: it gets the value
            # too, which keeps it in step where it is not)
            self._host_view(sync=False)[idx] = v
            off, _ = self._element_bytes(idx)
            m.write(off, np.ascontiguousarray(v, dtype=self.dtype.np_dtype).tobytes())
            self.generation += 1
            return
        self._host_view()[idx] = v
        self._bump()

    def _element_bytes(self, idx: tuple[int, ...]) -> tuple[int, int]:
        """(byte offset in the storage, byte size) of the element at canonical storage indices `idx`."""
        view = self._host_view(sync=False)
        off = sum(int(i) * st for i, st in zip(idx, view.strides))
        return off, self.dtype.np_dtype.itemsize * int(np.prod(self.elem_shape, dtype=np.int64))

    def _cast_array(self, value: Any, target_shape: tuple[int, ...]) -> np.ndarray:
        """`value` (scalar or array) cast to dtype; its shape must be () or broadcast-free `target_shape`."""
        if isinstance(value, numbers.Number) or np.isscalar(value):
            return np.asarray(cast_scalar(value, self.dtype))
        a = as_array(value)
        if a.shape not in ((), tuple(target_shape)):
            raise ValueError(f"{self._kind}: value of shape {a.shape} does not match element shape "
                             f"{target_shape}")
        # numpy's unsafe cast wraps ints and truncates floats toward zero, as a kernel store does
        return a.astype(self.dtype.np_dtype, casting="unsafe")

    def __iter__(self) -> "Iterator[Any]":
        raise NotImplementedError("Struct for is only available in Quadrants scope.")

    # ---------------------------------------------------------------- bulk host writes and reads

    def fill(self, val: Any) -> None:
        """Set every element to `val` (a scalar, or for vector/matrix elements also one element). On a GPU arch
        the device copy is filled on the device, in order with the launches (no transfer)."""
        self._materialize(True)
        v = self._cast_array(val, self.elem_shape)
        if BEFORE_HOST_WRITE is not None:
            BEFORE_HOST_WRITE(self)
        m = self._mirror
        if m is None and not self.escaped:
            m = self._new_mirror()
        if m is not None and not self.escaped and m.fill(v):
            self.generation += 1  # (the host copy is not written: a host read downloads the device's)
            return
        self._overwrite_view()[...] = v
        self._bump()

    def _full_shape(self) -> tuple[int, ...]:
        return tuple(self.shape) + tuple(self.elem_shape)

    def _shape_mismatch(self, got: tuple[int, ...]) -> ValueError:
        return ValueError(f"Mismatch shape: {self._full_shape()} expected, but {tuple(got)} provided")

    def from_numpy(self, arr: Any) -> None:
        """Copy `arr` in (its shape must equal `shape + elem_shape`; values are cast to dtype)."""
        self._materialize(True)
        if not isinstance(arr, np.ndarray):
            if isinstance(arr, np.generic):
                arr = np.asarray(arr)
            else:
                raise TypeError(f"{np.ndarray} expected, but {type(arr)} provided")
        if tuple(arr.shape) != self._full_shape():
            es = tuple(self.elem_shape)
            squeezed = len(es) == 2 and es[1] == 1 and tuple(arr.shape) == tuple(self.shape) + (es[0],)
            if not squeezed:  # an n x 1 element given as (n,), as to_numpy returns it
                raise self._shape_mismatch(arr.shape)
            arr = arr.reshape(self._full_shape())
        if BEFORE_HOST_WRITE is not None:
            BEFORE_HOST_WRITE(self)
        np.copyto(self._overwrite_view(), arr, casting="unsafe")
        self._bump()
        self._upload_now()

    def _device_runtime(self) -> Any:
        """The current program's device runtime when it runs on a GPU arch and this storage is not empty."""
        from qd.runtime import device

        rt = device.current()
        return rt if rt is not None and self._arr is not None and self._arr.nbytes else None

    def _new_mirror(self) -> Any:
        """On a GPU arch, the device copy of storage that has none yet, made without an upload (a `fill` is about
        to write it on the device); None elsewhere."""
        from qd.runtime.device import Mirror

        rt = self._device_runtime()
        if rt is not None:
            self._mirror = Mirror(rt, self._arr.nbytes)
        return self._mirror

    def _upload_now(self) -> None:
        """On a GPU arch, a whole-array write from the host (`from_numpy`) is uploaded at once, as Quadrants'
        is: the data is meant for kernels, and the first launch after it then transfers nothing."""
        rt = self._device_runtime()
        if rt is not None:
            with rt.lock:
                rt.mirror_of(self)

    def _overwrite_view(self) -> np.ndarray:
        """The canonical host view for a write of every element: on a GPU arch not downloaded first (the device
        copy's contents are about to be replaced; the next launch uploads the host copy after the work before
        it), unless the device copy is shared outside qd (then a write is uploaded at once, `_bump`)."""
        m = self._mirror
        if m is not None and not m.shared and not self.escaped:
            m.device_dirty = False
        return self._host_view(sync=m is None or m.shared or self.escaped)

    def to_numpy(self, *args: Any, dtype: Any = None, keep_dims: bool = False, copy: Any = True) -> np.ndarray:
        """The data, shape `shape + elem_shape`, optionally cast to numpy `dtype`. Quadrants' signatures:
        `to_numpy(dtype=None, *, copy=True)` for scalar fields and ndarrays, `to_numpy(keep_dims=False,
        dtype=None, *, copy=True)` for vector/matrix fields, where an n x 1 element is returned as (n,)
        unless `keep_dims` (and keep_dims gives a vector field's elements as (n, 1)). `copy=False` returns
        a view sharing this storage (no dtype conversion then; on the CPU tiers only, where the host storage is
        the data); `copy=None` shares it where it can."""
        self._materialize(True)
        if args:
            if self._elem_positional_keep_dims():
                keep_dims, *rest = args
                if rest:
                    dtype = rest[0]
            else:
                dtype = args[0]
        view = self._host_view()
        es = tuple(self.elem_shape)
        if self._elem_positional_keep_dims():
            if len(es) == 2 and es[1] == 1 and not keep_dims:
                view = view.reshape(tuple(self.shape) + (es[0],))
            elif len(es) == 1 and keep_dims:
                view = view.reshape(tuple(self.shape) + (es[0], 1))
        out_dtype = view.dtype if dtype is None else _numpy_dtype(dtype)
        copy = self._aos_copy(copy)
        if copy is False:
            self._refuse_host_sharing("to_numpy")
        if copy is not True and out_dtype == view.dtype and self._host_is_the_data():
            self.escaped = True  # shared outside qd: writes through it bypass the generation counter
            return view
        if copy is False:
            raise ValueError(f"to_numpy(copy=False) cannot convert {view.dtype} to {out_dtype} without a copy")
        return np.array(view, dtype=out_dtype, copy=True, order="C")

    def _aos_copy(self, copy: Any) -> Any:
        """`copy` for a member of a struct field declared `layout=qd.Layout.AOS` (`qd/lang/struct.py`):
        Quadrants interleaves those members, so they never share storage (copy=False raises)."""
        if copy is True or not self.__dict__.get("_aos_member", False):
            return copy
        if copy is False:
            raise ValueError("Zero-copy not available: this member of an AoS struct field is interleaved with "
                             "the other members; use copy=True")
        return True

    @staticmethod
    def _host_is_the_data() -> bool:
        """Whether the host storage is the data (the CPU tiers), so a numpy array or CPU tensor may share it. On a
        GPU arch the device copy is: a kernel's writes land there while a shared host view would go stale, and the
        host view's writes would be uploaded over them (Quadrants refuses zero-copy numpy off the CPU too)."""
        from qd.runtime import device

        return device.current() is None

    def _refuse_host_sharing(self, what: str) -> None:
        """`copy=False` asked for a view of host storage where the host storage is not the data."""
        if not self._host_is_the_data():
            from qd.base import config

            arch = config.current().arch.name
            raise ValueError(f"{what}(copy=False): on arch={arch} the data lives in device memory, which a CPU "
                             f"array cannot share (use copy=None, which copies where it must, or copy=True)")

    def _elem_positional_keep_dims(self) -> bool:
        """Whether this is a vector/matrix field (whose to_numpy takes keep_dims first)."""
        return bool(self.elem_shape) and "field" in self._kind

    def _copy_source_check(self, other: Any) -> None:
        if not isinstance(other, HostData):
            raise TypeError(f"Cannot copy from a non-{self._kind.split('.')[-1]} object")
        if tuple(other.shape) != tuple(self.shape) or tuple(other.elem_shape) != tuple(self.elem_shape):
            raise ValueError(f"{self._kind} shape {self._full_shape()} does not match the source shape "
                             f"{other._full_shape()}")

    def copy_from(self, other: "HostData") -> None:
        """Copy all elements of another field/ndarray of the same shape (values cast to dtype)."""
        self._materialize(True)
        self._copy_source_check(other)
        if BEFORE_HOST_WRITE is not None:
            BEFORE_HOST_WRITE(self)
        np.copyto(self._host_view(), other._host_view(), casting="unsafe")
        self._bump()

    def from_torch(self, t: Any) -> None:
        """Copy a torch tensor in (any device; shape must equal `shape + elem_shape`)."""
        import_torch()
        if tuple(t.shape) != self._full_shape():
            raise self._shape_mismatch(tuple(t.shape))
        self.from_numpy(t.detach().to("cpu").contiguous().numpy())

    def to_torch(self, device: Any = None, copy: bool = True) -> Any:
        """A torch tensor of the data on `device` (default: CPU): a copy, or with `copy=False` a tensor sharing
        the data: on the CPU tiers a CPU tensor over the host storage, on qd.cuda a CUDA tensor over the device
        copy (`device` None or CUDA); elsewhere copy=False raises and copy=None copies. Writes through a shared
        tensor bypass the generation counter, so caches keyed on it (adstack sizes) re-read this buffer at every
        launch from then on."""
        self._materialize(True)
        torch = import_torch()
        copy = self._aos_copy(copy)
        if copy is not True:
            shared = self._shared_torch(torch, device)
            if shared is not None:
                return shared
            cpu_asked = device is None or torch.device(device).type == "cpu"
            if cpu_asked and copy is False:
                self._refuse_host_sharing("to_torch")
            if cpu_asked and self._host_is_the_data():
                self.escaped = True
                return torch.from_numpy(self._host_view())
            if copy is False:
                raise ValueError(f"to_torch(copy=False): the data is in CPU memory here; it cannot give a tensor "
                                 f"on {device} without a copy (use copy=True or copy=None)")
        t = torch.from_numpy(self.to_numpy())
        return t.to(device) if device is not None else t

    def _shared_torch(self, torch: Any, device: Any) -> Any:
        """On `qd.cuda`: a torch CUDA tensor over the device copy (no copy), or None (another arch, a physical
        layout other than the canonical one, or a CPU tensor asked for). The device copy is then the data: host
        reads download it, host writes upload at once, and the adstack sizes re-read it at every launch."""
        from qd.runtime import device as _device

        rt = _device.current()
        where = rt.backend.torch_cuda_device if rt is not None else None
        if where is None or self._arr is None:
            return None
        if device is not None and torch.device(device).type != "cuda":
            return None
        m = rt.mirror_of(self)
        m.share(self._arr)
        self.device_shared = True
        view = self._host_view(sync=False)  # canonical axes over the physical storage (strided under a layout)
        return torch.as_tensor(_DeviceView(m, view), device=torch.device("cuda", where))

    # ---------------------------------------------------------------- printing

    def __str__(self) -> str:
        if self._arr is None:
            return f"<{self._kind}: no storage>"
        return str(self._host_view())

    def __repr__(self) -> str:
        if self._arr is None:
            return f"<{self._kind}: no storage>"
        body = np.array2string(self._host_view(), separator=", ", prefix=self._kind + "(")
        return f"{self._kind}({body}, dtype={self.dtype})"


class _DeviceView:
    """A device copy as a CUDA array interface (what torch wraps without a copy); the tensor keeps it, and
    through it the mirror and its memory, alive."""

    def __init__(self, mirror: Any, view: np.ndarray) -> None:
        """`view`: the host storage's canonical view, whose shape and byte strides the device copy shares."""
        self.mirror = mirror
        strides = None if view.flags.c_contiguous else tuple(int(s) for s in view.strides)
        self.__cuda_array_interface__ = {"shape": tuple(int(n) for n in view.shape), "typestr": view.dtype.str,
                                         "data": (int(mirror.buf.address), False), "version": 3,
                                         "strides": strides, "stream": None}


def _numpy_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, DataType):
        return dtype.np_dtype
    return np.dtype(dtype)


def normalize_shape(shape: Any, kind: str) -> tuple[int, ...]:
    """An int or sequence of positive ints as a tuple; `kind` names the object in the error message."""
    if isinstance(shape, (numbers.Integral, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise QuadrantsRuntimeTypeError(f"{shape!r} is not a valid shape for {kind}") from None
    for n in shape:
        if not isinstance(n, (numbers.Integral, np.integer)) or isinstance(n, bool):
            raise QuadrantsRuntimeTypeError(f"{shape} is not a valid shape for {kind}: dimensions must be integers")
        if n <= 0 or n > 2**31 - 1:
            raise QuadrantsRuntimeError(f"{shape} is not a valid shape for {kind}: Every dimension of a "
                                        "Quadrants field should be positive (and below 2**31)")
    return tuple(int(n) for n in shape)
