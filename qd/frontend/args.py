"""Kernel/func parameters: annotation kinds, argument checking and conversion, instantiation keys.

Parameter kinds: 'template' (`qd.template()`: compile-time, keyed by identity for objects and by
value for hashable Python values), 'scalar' (qd dtypes, `int`, `float`), 'matrix' (a vector/matrix
type: unrolled into scalar args), 'ndarray' (`qd.types.ndarray(...)`: a qd Ndarray, numpy array or
CPU torch tensor; keyed by dtype, ndim and element shape), 'view' (`BufferView[dtype]` or bare
`BufferView`: a `qd.BufferView`; launched as its ndarray plus two i32 args, offset and size, so only the
ndarray's dtype, ndim and element shape are in the key), 'tensor' (`qd.Tensor`: per call, a field-backed
value (or None) is a 'template' and an ndarray-backed one an 'ndarray'; `resolved_param`).

`qd.Tensor` wrappers (`qd/lang/tensor.py`) are taken off every argument in `Signature.bind`, so whatever
the annotation, the rest of this module only sees bare fields and ndarrays. An ndarray's physical layout
(`HostData.layout`) is part of its key and of its `GlobalTensor`.

A kernel parameter annotated with a dataclass type (`s: State`, Quadrants' typed-dataclass argument) is
flattened: `Signature.params` holds one leaf parameter per member (`s.a`, `s.b`, nested dataclasses
recursively) with the member's annotation as its kind, and `Signature.bind` expands a call's dataclass
argument into its members' values, so conversion, keys and gradients see plain parameters. In the kernel
body, `s` is a `values.StructRef` whose attributes are the leaves' bindings.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from typing import Any, Callable

import numpy as np

from qd import ir
from qd.errors import QuadrantsRuntimeError, QuadrantsRuntimeTypeError, QuadrantsSyntaxError
from qd.frontend import arg_leaves as _kept_leaves
from qd.frontend import values as _v
from qd.frontend.arg_leaves import UNCHECKED, matches_annotation, unchecked  # noqa: F401 (re-exported)
from qd.types import dtypes
from qd.types import hooks as _hooks
from qd.types.annotations import BufferViewType, NdarrayType, Template
from qd.types.dtypes import DataType, MatrixType
from qd.types.struct_type import StructType


class Param:
    def __init__(self, name: str, kind: str, ann: Any, default: Any) -> None:
        self.name = name
        self.kind = kind
        self.ann = ann
        self.default = default
        self.leaves: list[Param] = []  # kind "struct": the member leaves (see the module docstring)
        self.path: tuple = ()  # a leaf of a dataclass parameter: its member names from the argument


def _resolve(ann: Any, fn: Callable) -> Any:
    if isinstance(ann, str):
        try:
            return eval(ann, fn.__globals__)  # noqa: S307 - annotations of the user's own function
        except Exception as e:  # noqa: BLE001
            raise QuadrantsSyntaxError(f"cannot resolve annotation {ann!r} of {fn.__name__}: {e}") from None
    return ann


def _norm_ann(ann: Any) -> Any:
    if ann is NdarrayType:
        return NdarrayType()
    if ann is _hooks.impl.BufferView:
        return BufferViewType()
    return ann


def _is_dataclass_type(ann: Any) -> bool:
    return (isinstance(ann, type) and dataclasses.is_dataclass(ann)) or isinstance(ann, StructType)


def _leaves(p: Param, fn: Callable, path: tuple = ()) -> list[Param]:
    """The leaf parameters of dataclass parameter `p`: one per member, nested dataclasses flattened;
    each leaf's `path` is its chain of member names from the argument."""
    out: list[Param] = []
    hints = p.ann.members if isinstance(p.ann, StructType) else _member_annotations(p.ann, fn)  # in member order
    for member, raw in hints.items():
        ann = _norm_ann(raw)
        name = f"{p.name}.{member}"
        if _is_dataclass_type(ann):
            out.extend(_leaves(Param(name, "struct", ann, inspect.Parameter.empty), fn, path + (member,)))
            continue
        leaf = Param(name, _kind(name, ann, 1, True), ann, inspect.Parameter.empty)
        leaf.path = path + (member,)
        out.append(leaf)
    return out


def _member_annotations(cls: type, fn: Callable) -> dict:
    """`cls`'s member annotations, resolved where written as strings (`from __future__ import annotations`)
    in the class's module, then in the kernel's globals."""
    mod = sys.modules.get(cls.__module__)
    out = {}
    for f in dataclasses.fields(cls):
        ann = f.type
        if isinstance(ann, str):
            try:
                ann = eval(ann, {**fn.__globals__, **(vars(mod) if mod else {})})  # noqa: S307 - the user's own class
            except Exception as e:  # noqa: BLE001
                raise QuadrantsSyntaxError(f"cannot resolve annotation {ann!r} of {cls.__name__}.{f.name}: {e}") \
                    from None
        out[f.name] = ann
    return out


def _struct_values(p: Param, v: Any) -> list:
    """The values of dataclass parameter `p`'s leaves in argument `v` (in `_leaves` order)."""
    if isinstance(p.ann, StructType):
        return struct_arg_values(p, v)
    if not isinstance(v, p.ann):
        raise QuadrantsRuntimeTypeError(f"Argument '{p.name}' (type={type(v).__name__}) cannot be converted into "
                                        f"required type {p.ann.__name__} (a dataclass)")
    out = []
    for leaf in p.leaves:
        x = v
        for attr in leaf.path:
            x = getattr(x, attr)
        out.append(x)
    return out


def struct_arg_values(p: Param, v: Any) -> list:
    """The leaf values of struct-typed parameter `p` from a host struct or a dict."""
    t = p.ann
    vt = v.__dict__.get("_type") if isinstance(v, _hooks.impl.Struct) else None
    if not isinstance(v, (_hooks.impl.Struct, dict)) or (vt is not None and vt is not t and not t.same_layout(vt)):
        raise QuadrantsRuntimeTypeError(f"Argument {type(v)} cannot be converted into required type {t!r}")
    out = []
    for leaf in p.leaves:
        x = v
        for attr in leaf.path:
            if not isinstance(x, (_hooks.impl.Struct, dict)) or attr not in x.keys():
                raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': no member '{'.'.join(leaf.path)}' in the "
                                                f"struct passed for {t!r}")
            x = x[attr]
        out.append(x)
    return out


def _kind(name: str, ann: Any, index: int, is_kernel: bool) -> str:
    if ann is inspect.Parameter.empty:
        if not is_kernel or (index == 0 and name == "self"):
            return "template" if is_kernel else "any"
        raise QuadrantsSyntaxError(f'Kernel argument "{name}" must be type annotated')
    if ann is Template or isinstance(ann, Template):
        return "template"
    if ann is NdarrayType or isinstance(ann, NdarrayType):
        return "ndarray"
    if isinstance(ann, BufferViewType):
        return "view"
    if isinstance(ann, type) and issubclass(ann, _hooks.impl.Tensor):
        return "tensor"
    if isinstance(ann, MatrixType):
        return "matrix"
    if isinstance(ann, DataType) or ann in (int, float, bool):
        return "scalar"
    if is_kernel:
        raise QuadrantsSyntaxError(f'Invalid type annotation of kernel argument "{name}": {ann!r}')
    return "any"


class Signature:
    """The parsed signature of a kernel or func (built once)."""

    def __init__(self, fn: Callable, is_kernel: bool) -> None:
        sig = inspect.signature(fn)
        self.fn = fn
        self.user_params: list[Param] = []  # as written; a dataclass parameter has kind "struct"
        for i, p in enumerate(sig.parameters.values()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise QuadrantsSyntaxError(f"*args / **kwargs are not supported in {fn.__name__}")
            ann = _norm_ann(_resolve(p.annotation, fn))
            if is_kernel and _is_dataclass_type(ann):
                self.user_params.append(Param(p.name, "struct", ann, p.default))
            else:
                self.user_params.append(Param(p.name, _kind(p.name, ann, i, is_kernel), ann, p.default))
        self.flat = not any(p.kind == "struct" for p in self.user_params)
        self.params: list[Param] = []  # the leaves: what conversion, keys and launches see
        for p in self.user_params:
            if p.kind == "struct":
                p.leaves = _leaves(p, fn)
                self.params.extend(p.leaves)
            else:
                self.params.append(p)
        rt = _resolve(sig.return_annotation, fn)
        self.return_type = None if rt in (inspect.Signature.empty, None) else _norm_ret(rt)
        self._names = {p.name: i for i, p in enumerate(self.user_params)}

    def bind(self, args: tuple, kwargs: dict) -> list:
        """The values of the leaf parameters for a call."""
        if not kwargs and len(args) == len(self.user_params):  # the common call: all positional
            return _unwrapped(list(args) if self.flat else self._flatten(args))
        out = self.positional(args, kwargs)
        return _unwrapped(out if self.flat else self._flatten(out))

    def positional(self, args: tuple, kwargs: dict) -> list:
        """A call's arguments as written, in parameter order: keywords placed, defaults filled in (the errors of a
        call that does not fit the signature)."""
        n = len(self.user_params)
        if len(args) > n:
            raise QuadrantsSyntaxError(f"Too many arguments to {self.fn.__name__}(): it takes {n}, {len(args)} were "
                                       f"given")
        out = list(args) + [inspect.Parameter.empty] * (n - len(args))
        for k, v in kwargs.items():
            i = self._names.get(k)
            if i is None:
                raise QuadrantsSyntaxError(f"Unexpected argument '{k}' to {self.fn.__name__}(): it has no parameter of "
                                           f"that name")
            if i < len(args):
                raise QuadrantsSyntaxError(f"Multiple values for argument '{k}' of {self.fn.__name__}(): given by "
                                           f"position and by keyword")
            out[i] = v
        for i, v in enumerate(out):
            if v is inspect.Parameter.empty:
                d = self.user_params[i].default
                if d is inspect.Parameter.empty:
                    raise QuadrantsSyntaxError(f"Missing argument '{self.user_params[i].name}' of {self.fn.__name__}(): "
                                               f"it has no default")
                out[i] = d
        return out

    def _flatten(self, values: Any) -> list:
        out: list = []
        for p, v in zip(self.user_params, values):
            if p.kind == "struct":
                out.extend(_struct_values(p, v))
            else:
                out.append(v)
        return out

    def restructure_return(self, result: Any) -> Any:
        rt = self.return_type
        if rt is None:
            return None
        flat = list(result) if isinstance(result, tuple) else [result]
        it = iter(flat)
        return _rebuild(rt, it)


def _unwrapped(values: list) -> list:
    """`values` with every `qd.Tensor` wrapper replaced by its field or ndarray (in place)."""
    for i, v in enumerate(values):
        if type(v) in _hooks.impl.TENSOR_TYPES:
            values[i] = v._impl
    return values


def resolved_param(p: Param, v: Any) -> Param:
    """Parameter `p` as its value `v` makes it: a `qd.Tensor` parameter is a template for a field (or None)
    and an ndarray parameter otherwise; any other parameter is itself."""
    if p.kind != "tensor":
        return p
    as_field = v is None or _v.global_kind(v) == "field"
    attr = "_as_template" if as_field else "_as_ndarray"
    q = p.__dict__.get(attr)
    if q is None:
        q = Param(p.name, "template", Template(), p.default) if as_field else \
            Param(p.name, "ndarray", NdarrayType(), p.default)
        q.path = p.path
        setattr(p, attr, q)
    return q


def _norm_ret(rt: Any) -> Any:
    origin = getattr(rt, "__origin__", None)
    if origin is tuple:
        return tuple(_norm_ret(a) for a in rt.__args__)
    if isinstance(rt, (tuple, list)):
        return tuple(_norm_ret(a) for a in rt)
    if isinstance(rt, (MatrixType, StructType)):
        return rt
    return dtypes.to_dtype(rt)


def _rebuild(rt: Any, it: Any) -> Any:
    if isinstance(rt, tuple):
        return tuple(_rebuild(r, it) for r in rt)
    if isinstance(rt, StructType):
        return rt(**{k: _rebuild(mt, it) for k, mt in rt.members.items()})
    if isinstance(rt, MatrixType):
        n = rt.n * (rt.m if rt.ndim == 2 else 1)
        vals = [next(it) for _ in range(n)]
        try:
            return _v.make_matrix(vals, rt.shape)
        except ImportError:
            return np.array(vals).reshape(rt.shape)
    return next(it)


# ---------------------------------------------------------------- kernel arguments

def _type_error(p: Param, needed: str, got: Any) -> QuadrantsRuntimeTypeError:
    return QuadrantsRuntimeTypeError(f"Argument '{p.name}' (type={type(got).__name__}) cannot be converted into "
                                     f"required type {needed}")


def _template_key(v: Any, name: str) -> Any:
    """The instantiation key of template argument `v` of parameter `name`."""
    if isinstance(v, (int, float, bool, str, type(None), np.number)):
        return ("v", type(v), v)
    if type(v) in _hooks.impl.TENSOR_TYPES:  # a wrapper inside a template value: keyed as its field or ndarray
        v = v._impl
    if isinstance(v, _hooks.impl.BufferView):  # baked into the instance (`views.from_host`): keyed by value
        return ("view", _template_key(v.arr, name), v.offset, v.size)
    if dataclasses.is_dataclass(v) and not isinstance(v, type) and v.__dataclass_params__.frozen:
        return ("dc", type(v)) + tuple(_template_key(getattr(v, f.name), name) for f in dataclasses.fields(v))
    if _v.global_kind(v) is not None:
        return ("id", id(v))
    if hasattr(v, "entries") and hasattr(v, "_map"):
        return ("m", tuple(_v.shape_of(v)), tuple(_template_key(e, name) for e in v.entries))
    if isinstance(v, (tuple, list)):
        return (type(v).__name__,) + tuple(_template_key(x, name) for x in v)
    if _is_host_array(v):
        raise QuadrantsRuntimeTypeError(
            f"Argument '{name}': a {type(v).__module__.split('.')[0]} array cannot be passed for a qd.template() "
            f"parameter: its values would be baked into the kernel when it compiles, and later changes to the array "
            f"never seen. Annotate the parameter qd.types.ndarray() to read the array at every launch (or pass a "
            f"tuple of numbers for compile-time constants)")
    try:
        hash(v)
    except TypeError:
        return ("id", id(v))
    if type(v).__hash__ is object.__hash__:
        return ("id", id(v))
    return ("v", type(v), v)


def _is_host_array(v: Any) -> bool:
    """`v` is another library's array (numpy, torch, CuPy, ...): mutable memory, no compile-time value."""
    t = type(v)
    return isinstance(v, np.ndarray) or any(hasattr(t, a) for a in ("__array_interface__", "__cuda_array_interface__",
                                                                      "__dlpack__"))


def _scalar(p: Param, v: Any) -> Any:
    dt = dtypes.to_dtype(p.ann)
    if isinstance(v, (bool, np.bool_)):
        return int(v) if dt.is_int else float(v)
    if isinstance(v, (int, np.integer)):
        v = int(v)
        if dt.is_int:
            return _int_in_range(p.name, dt, v)
        try:
            return float(v)
        except OverflowError:
            raise QuadrantsRuntimeTypeError(f"Argument '{p.name}' (int {v}) is too large for required type {dt}: "
                                            f"pass a value within the float64 range") from None
    if isinstance(v, (float, np.floating)):
        if dt.is_int:
            raise _type_error(p, str(dt), v)
        return float(v)
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return _scalar(p, v[()])
    raise _type_error(p, str(dt), v)


def _int_in_range(name: str, dt: DataType, v: int) -> int:
    """`v` for integer parameter `name` of `dt`, as Quadrants takes it: a signed parameter any i64, an unsigned one
    (u1 too) any u64, a narrower dtype keeping the low bits (two's complement, as the kernel's own casts). A value
    outside that 64-bit range is refused: it has no 64-bit pattern to keep."""
    lo, hi = (-(1 << 63), 1 << 63) if dt.is_signed else (0, 1 << 64)
    if lo <= v < hi:
        return v
    what = "a signed" if dt.is_signed else "an unsigned"
    raise QuadrantsRuntimeTypeError(
        f"Argument '{name}' (int {v}) is out of range for required type {dt}: {what} integer parameter takes "
        f"values in [{'-2**63' if lo else '0'}, {'2**63' if dt.is_signed else '2**64'}) (a narrower dtype keeps "
        f"the low bits of that 64-bit value); pass a value in that range")


def _matrix_args(p: Param, v: Any) -> list:
    t: MatrixType = p.ann
    if hasattr(v, "entries"):
        flat = list(v.entries)
    elif hasattr(v, "to_numpy"):
        flat = list(np.asarray(v.to_numpy()).reshape(-1))
    else:
        try:
            flat = list(np.asarray(v).reshape(-1))
        except Exception:  # noqa: BLE001
            raise _type_error(p, repr(t), v) from None
    n = t.n * (t.m if t.ndim == 2 else 1)
    if len(flat) != n:
        raise _type_error(p, repr(t), v)
    sp = Param(p.name, "scalar", t.dtype or float, None)
    return [_scalar(sp, x) for x in flat]


_NP_DTYPES: dict = {}


def ndarray_spec(p: Param, v: Any) -> tuple[DataType, int, tuple, Any, Callable | None]:
    """(scalar dtype, ndim, element shape, launch object, post-launch callback) of an ndarray argument."""
    ann: NdarrayType = p.ann
    post = None
    spec = getattr(v, "_qd_arg_spec", None)  # cached on qd ndarrays: their dtype never changes
    native = True  # a qd ndarray: its checks against the annotation can be switched off (`_template_mapper`)
    if spec is not None:
        dt, es = spec
        arr, obj = v._storage(), v  # shape and dtype only: no device sync
    elif hasattr(v, "arr") and _v.global_kind(v) == "ndarray":
        dt, _, es = _v.describe_object(v)
        arr, obj = v._storage(), v
        try:
            v._qd_arg_spec = (dt, es)
        except AttributeError:
            pass
    else:
        native = False
        arr, obj, post = _as_numpy(p, v)
        es = ann.dtype.shape if isinstance(ann.dtype, MatrixType) else ()
        dt = _NP_DTYPES.get(arr.dtype)
        if dt is None:
            try:
                dt = _NP_DTYPES[arr.dtype] = dtypes.from_numpy_dtype(arr.dtype)
            except TypeError:
                raise _type_error(p, repr(ann), v) from None
    checked = not native or _kept_leaves.arg_checks()
    want_es = ann.dtype.shape if isinstance(ann.dtype, MatrixType) else None
    want_dt = ann.dtype.dtype if isinstance(ann.dtype, MatrixType) else ann.dtype
    if checked and want_es is not None and tuple(es) != tuple(want_es):
        raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': expected element shape {tuple(want_es)}, got "
                                        f"{tuple(es)}")
    if checked and want_dt is not None and dt is not want_dt:
        raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': expected an ndarray of dtype {want_dt}, got {dt}")
    ndim = arr.ndim - len(es)
    if ndim < 0 or len(arr.shape) < len(es) or tuple(arr.shape[ndim:]) != tuple(es):
        raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': array of shape {arr.shape} does not end with the "
                                        f"element shape {tuple(es)}")
    if checked and ann.ndim is not None and ndim != ann.ndim:
        raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': expected ndim {ann.ndim}, got ndim {ndim}")
    return dt, ndim, tuple(es), obj, post


def size_class(obj: Any, ndim: int) -> int:
    """`ir.size_class` of the outer axes of launch object `obj` (from `ndarray_spec`, `ndim` outer axes)."""
    return ir.size_class(tuple(int(n) for n in obj.shape[:ndim]))


def view_spec(p: Param, v: Any) -> tuple[DataType, int, tuple, Any, Callable | None]:
    """`ndarray_spec` of the ndarray behind BufferView argument `v` (QuadrantsRuntimeTypeError when `v` is no
    BufferView: a plain ndarray where a view is declared is refused)."""
    if not isinstance(v, _hooks.impl.BufferView):
        raise QuadrantsRuntimeTypeError(f"Argument {p.name} expects a BufferView, got {type(v).__name__}")
    nd = getattr(p, "_ndarray_param", None)
    if nd is None:
        nd = p._ndarray_param = Param(p.name, "ndarray", p.ann.ndarray_type, None)
    return ndarray_spec(nd, v.arr)


def _as_numpy(p: Param, v: Any) -> tuple[np.ndarray, Any, Callable | None]:
    mod = type(v).__module__
    if mod.startswith("torch"):
        if getattr(v, "is_cuda", False) or str(getattr(v, "device", "cpu")) != "cpu":
            _ensure_torch_grad(v)
            dev = _device_array(v, p.name)
            if dev is None:
                raise QuadrantsRuntimeTypeError(f"Argument '{p.name}': a torch tensor on {v.device} is used in place "
                                                f"on qd.cuda only; on {_arch_name()} pass a CPU tensor or a qd.ndarray")
            return dev, dev, None
        _ensure_torch_grad(v)
        t = v.detach()
        if t.is_contiguous():
            a = t.numpy()
            return a, a, None
        import torch

        a = np.ascontiguousarray(t.numpy())

        def back_t() -> None:
            v.data.copy_(torch.from_numpy(a))
        return a, a, back_t
    if hasattr(type(v), "__cuda_array_interface__"):  # CuPy, Numba device arrays
        dev = _device_array(v, p.name)
        if dev is not None:
            return dev, dev, None
    if isinstance(v, np.ndarray):
        if v.flags.c_contiguous:
            return v, v, None
        a = np.ascontiguousarray(v)
        if not v.flags.writeable:  # the copy stays read-only: a kernel that writes it is refused at the launch
            a.flags.writeable = False
            return a, a, None

        def back() -> None:
            v[...] = a
        return a, a, back
    raise QuadrantsRuntimeTypeError(f"Invalid type for argument {p.name}, got {v!r}: its parameter is "
                                    f"{p.ann!r}; pass a qd.ndarray, a numpy array or a torch tensor")


def _device_array(v: Any, name: str) -> Any:
    """A device array used in place on qd.cuda (`qd/runtime/device_array.py`), or None on another arch."""
    return _hooks.impl.device_array(v, name)


def _arch_name() -> str:
    from qd.frontend.builder import cfg

    return str(cfg().arch)


def _launch_arity(p: Param) -> int:
    """How many launch args (ArgDecls) parameter `p` takes (as `convert` lays them out)."""
    if p.kind == "template":
        return 0
    if p.kind == "matrix":
        t: MatrixType = p.ann
        return t.n * (t.m if t.ndim == 2 else 1)
    if p.kind == "view":
        return 3
    return 1


_NON_CONTIGUOUS_GRAD = ("Non contiguous gradient tensors are not supported, please call tensor.grad.contiguous() "
                        "before passing it into quadrants kernel.")


def _grad_of(p: Param, v: Any) -> Any:
    """The gradient array launched with ndarray argument `v` by a reverse-mode launch, or None. As in
    Quadrants: `qd.types.ndarray(needs_grad=...)` decides when given; otherwise a qd ndarray has one when
    it was made with `needs_grad=True` and a torch tensor when it `requires_grad`; numpy arrays have none."""
    want = getattr(p.ann, "needs_grad", None)
    if want is False:
        return None
    if hasattr(v, "arr") and _v.global_kind(v) == "ndarray":
        return getattr(v, "grad", None)
    if not type(v).__module__.startswith("torch") or not (want or v.requires_grad):
        return None
    _ensure_torch_grad(v)
    if not v.grad.is_contiguous():
        raise ValueError(_NON_CONTIGUOUS_GRAD)
    if v.grad.is_cuda:
        return _device_array(v.grad, f"{p.name}.grad") or v.grad.detach().cpu().numpy()
    return v.grad.detach().numpy()


def _ensure_torch_grad(v: Any) -> None:
    """Quadrants gives a torch tensor that requires grad a zero `.grad` when it is launched without one."""
    if v.requires_grad and v.grad is None:
        import torch

        v.grad = torch.zeros_like(v)


def grad_args(sig: Signature, values: list) -> list[tuple[int, Any]]:
    """(launch arg index, gradient array) of every ndarray argument that has a gradient, for a
    reverse-mode launch (the gradients are appended to the launch args in this order)."""
    out: list[tuple[int, Any]] = []
    i = 0
    for p, v in zip(sig.params, values):
        p = resolved_param(p, v)
        if p.kind == "ndarray":
            g = _grad_of(p, v)
            if g is not None:
                out.append((i, g))
        i += _launch_arity(p)
    return out


def _param_of_launch_arg(sig: Signature, index: int, values: list) -> int:
    """The parameter (index into `sig.params`) whose launch args include launch arg `index`."""
    table = getattr(sig, "_launch_params", None)
    if table is None:
        table = [i for i, (p, v) in enumerate(zip(sig.params, values))
                 for _ in range(_launch_arity(resolved_param(p, v)))]
        if not any(p.kind == "tensor" for p in sig.params):  # otherwise the table depends on the values
            sig._launch_params = table  # type: ignore[attr-defined]
    return table[index]


def hidden_args(sig: Signature, values: list, hidden: tuple) -> list:
    """The launch values of an instance's hidden ndarray args: for each (launch arg index of ndarray
    argument x, "grad") that the kernel reads as `x.grad`, x's gradient array. A qd ndarray needs
    `needs_grad=True`; a torch tensor gives its `.grad` (made as zeros when it requires grad and has
    none, as `grad_args` does); numpy arrays have none."""
    out: list = []
    for h in hidden:
        if h[0] == "lifted":
            out.append(_lifted_value(values, *h[1:]))
            continue
        ai, attr = h
        pi = _param_of_launch_arg(sig, ai, values)
        out.append(_hidden_of(resolved_param(sig.params[pi], values[pi]), values[pi], attr))
    return out


def _lifted_value(values: list, value_index: int, path: tuple, dt: DataType, name: str) -> Any:
    """The launch value of a lifted primitive member (`values.LiftedObject`), read now through `path`."""
    from qd.frontend.guards import resolve

    v = resolve(values[value_index], path)
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)) and not dt.is_float:
        return _int_in_range(name, dt, int(v))
    if dt.is_float and isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, (float, np.floating)):
        raise TypeError(f"member '{name}' was an int when the kernel compiled and is a float ({v!r}) now: passing "
                        f"it as the integer kernel argument it became would truncate it; keep its type, or make "
                        f"it a float from the start")
    raise TypeError(f"member '{name}' is a runtime {dt} kernel argument (template_primitives=False), but it is a "
                    f"{type(v).__name__} now")


def _hidden_of(p: Param, v: Any, attr: str) -> Any:
    where = f"Argument '{p.name}': the kernel reads {p.name}.{attr}, but"
    if getattr(p.ann, "needs_grad", None) is False:
        raise QuadrantsRuntimeError(f"{where} the parameter is annotated qd.types.ndarray(needs_grad=False)")
    if hasattr(v, "arr") and _v.global_kind(v) == "ndarray":
        g = getattr(v, attr, None)
        if g is None:
            raise QuadrantsRuntimeError(f"{where} the ndarray passed has no {attr} (create it with needs_grad=True)")
        src, arr = v._storage(), g._storage()
    elif type(v).__module__.startswith("torch"):
        if v.grad is None and v.requires_grad:
            _ensure_torch_grad(v)
        if v.grad is None:
            raise QuadrantsRuntimeError(f"{where} the torch tensor passed has no .grad (it does not require grad)")
        if not v.grad.is_contiguous():
            raise ValueError(_NON_CONTIGUOUS_GRAD)
        if v.is_cuda:
            src, arr = _device_array(v, p.name), _device_array(v.grad, f"{p.name}.grad")
            if src is None:
                raise QuadrantsRuntimeError(f"{where} a torch tensor on {v.device} is used on qd.cuda only")
        else:
            src, arr = v.detach().numpy(), v.grad.detach().numpy()
        g = arr
    else:
        raise QuadrantsRuntimeError(f"{where} a {type(v).__name__} has no {attr}; pass a qd.ndarray made with "
                                    "needs_grad=True or a torch tensor that requires grad")
    if arr.dtype != src.dtype or arr.shape != src.shape:
        raise QuadrantsRuntimeError(f"{where} its {attr} (dtype {arr.dtype}, shape {arr.shape}) does not match it "
                                    f"(dtype {src.dtype}, shape {src.shape})")
    return g


def keyed_by_identity(v: Any, name: str) -> bool:
    """Whether template argument `v` keys its instance by its identity (`("id", id(v))`: a `@qd.data_oriented`
    object, a field, any unhashable object): the instance is only valid while it lives."""
    return _template_key(v, name)[0] == "id"


def identity_keyed(sig: Signature, values: list) -> list:
    """The template arguments of a call that key its instance by their identity (`keyed_by_identity`)."""
    out = []
    for p, v in zip(sig.params, values):
        p = resolved_param(p, v)
        if p.kind == "template" and keyed_by_identity(v, p.name):
            out.append(v)
    return out


def convert(sig: Signature, values: list) -> tuple[tuple, list, list]:
    """(instantiation key, launch args per ArgDecl, post-launch callbacks) of a kernel call."""
    key: list = []
    args: list = []
    post: list = []
    for p, v in zip(sig.params, values):
        p = resolved_param(p, v)
        if p.kind == "template":
            key.append(_template_key(v, p.name))
        elif p.kind == "scalar":
            args.append(_scalar(p, v))
        elif p.kind == "matrix":
            args.extend(_matrix_args(p, v))
        elif p.kind == "view":
            dt, ndim, es, obj, cb = view_spec(p, v)
            key.append((dt, ndim, es, size_class(obj, ndim)))
            args.extend((obj, v.offset, v.size))
            if cb is not None:
                post.append(cb)
        else:
            hit = _kept_leaves.kept(p.ann, v, _kept_leaves.arg_checks())
            if hit is None:
                hit = _leaf(p, v)
            entry, unchecked_, obj, cb = hit
            key.append(entry)
            if unchecked_:
                key.append(UNCHECKED)  # an instance whose launches must take the Python path, which checks
            args.append(obj)
            if cb is not None:
                post.append(cb)
    return tuple(key), args, post


def _leaf(p: Param, v: Any) -> tuple:
    """(key entry, taken unchecked, launch object, post-launch callback) of ndarray argument `v`, kept on a qd
    ndarray for its parameter (`arg_leaves`)."""
    dt, ndim, es, obj, cb = ndarray_spec(p, v)
    lay = getattr(obj, "_layout", None)
    large = size_class(obj, ndim)
    checks = _kept_leaves.arg_checks()
    out = ((dt, ndim, es, large) if lay is None else (dt, ndim, es, large, lay),
           not checks and not matches_annotation(p.ann, dt, ndim, es), obj, cb)
    if cb is None and obj is v and getattr(v, "_qd_arg_spec", None) is not None:
        _kept_leaves.keep(p.ann, v, checks, lay, out)
    return out


def bind_kernel_params(t: Any, sig: Signature, values: list, assigned: set) -> None:
    """Declare the kernel's args/buffers (same order as `convert`) and bind the parameter names."""
    b = t.b
    for i, (p, v) in enumerate(zip(sig.params, values)):
        p = resolved_param(p, v)
        if p.kind == "template":
            t.ctx.bind(p.name, _v.LiftedObject(v, i, ()) if _v.lifts_primitives(v) else t.wrap_global(v, p.name))
        elif p.kind == "scalar":
            dt = dtypes.to_dtype(p.ann)
            i = b.add_arg(ir.ArgDecl(name=p.name, kind="scalar", dtype=dt))
            t.ctx.bind(p.name, _v.ParamRef(i, dt))  # (immutable, as in Quadrants: `assign_name` refuses a store)
        elif p.kind == "matrix":
            mt: MatrixType = p.ann
            dt = mt.dtype or _cfg_fp()
            n = mt.n * (mt.m if mt.ndim == 2 else 1)
            idx = [b.add_arg(ir.ArgDecl(name=f"{p.name}_{k}", kind="scalar", dtype=dt)) for k in range(n)]
            ref = _v.MatrixParamRef(idx, dt, mt.shape)
            t.ctx.bind(p.name, t.init_var(_v.read(ref), name=p.name) if p.name in assigned else ref)
        else:
            spec = view_spec(p, v) if p.kind == "view" else ndarray_spec(p, v)
            large = size_class(spec[3], spec[1])
            tensor = _bind_ndarray(b, p.name, *spec[:3], getattr(spec[3], "_layout", None),
                                   clamp=getattr(p.ann, "boundary", "unsafe") == "clamp", large=large)
            t.ctx.bind(p.name, _view_param(b, p.name, tensor) if p.kind == "view" else tensor)
    for p in sig.user_params:
        if p.kind == "struct":
            t.ctx.bind(p.name, _struct_ref(t, p))


def _struct_ref(t: Any, p: Param) -> _v.StructRef:
    """The body's value of dataclass parameter `p`, over its leaves' bindings (bound just before)."""
    if isinstance(p.ann, StructType):
        from qd.frontend.structs import param_struct

        return param_struct(p.ann, {leaf.path: t.ctx.find_local(leaf.name)[1] for leaf in p.leaves})
    root = _v.StructRef(p.ann.__name__, {})
    for leaf in p.leaves:
        node = root
        for attr in leaf.path[:-1]:
            node = node.members.setdefault(attr, _v.StructRef(attr, {}))
        node.members[leaf.path[-1]] = t.ctx.find_local(leaf.name)[1]
    return root


def _bind_ndarray(b: Any, name: str, dt: DataType, ndim: int, es: tuple,
                  layout: tuple | None = None, clamp: bool = False, large: int = ir.SMALL) -> _v.GlobalTensor:
    """Declares an ndarray launch arg and its buffer (physical axes); its GlobalTensor (canonical axes).
    `large`: the argument's `ir.size_class` (part of the instantiation key)."""
    ai = len(b.args)
    bi = len(b.buffers)
    b.add_arg(ir.ArgDecl(name=name, kind="ndarray", dtype=dt, buffer=bi))
    decl = ir.BufferDecl(kind="ndarray", dtype=dt, ndim=ndim, elem_shape=es, arg=ai, name=name, large=large)
    b.add_buffer(("arg", ai), decl, None)
    if clamp:
        b.clamped.add(bi)
    return _v.GlobalTensor(bi, decl, layout=layout, clamp=clamp)


def _view_param(b: Any, name: str, tensor: _v.GlobalTensor) -> Any:
    """A BufferView parameter after its ndarray: declares the i32 launch args offset and size."""
    from qd.frontend.views import bind_param

    oi = b.add_arg(ir.ArgDecl(name=f"{name}.offset", kind="scalar", dtype=dtypes.i32))
    si = b.add_arg(ir.ArgDecl(name=f"{name}.size", kind="scalar", dtype=dtypes.i32))
    return bind_param(tensor, oi, si)


def _func_view(p: Param, v: Any) -> Any:
    """The view passed to a func parameter annotated BufferView (by reference)."""
    from qd.frontend.views import ViewValue

    if not isinstance(v, ViewValue):
        raise QuadrantsSyntaxError(f"Argument {p.name} expects a BufferView, got {type(v).__name__}")
    want = p.ann.dtype
    if want is not None and not isinstance(want, MatrixType) and v.dtype is not want:
        raise QuadrantsSyntaxError(f"Argument {p.name} expects a BufferView of {want}, got one of {v.dtype}")
    return v


def _cfg_fp() -> DataType:
    from qd.frontend.builder import cfg

    return cfg().default_fp


def bind_func_params(t: Any, sig: Signature, values: list) -> None:
    """Bind a func's parameters: templates and tensors by reference, everything else by value."""
    for p, v in zip(sig.params, values):
        if p.kind in ("template", "ndarray", "tensor"):
            t.ctx.bind(p.name, t.wrap_global(v, p.name))
        elif p.kind == "view":
            t.ctx.bind(p.name, _func_view(p, t.wrap_global(v, p.name)))
        elif p.kind == "matrix":
            t.ctx.bind(p.name, t.init_var(v, p.ann, p.name))
        elif p.kind == "scalar":
            t.ctx.bind(p.name, t.init_var(v, dtypes.to_dtype(p.ann), p.name))
        else:
            t.ctx.bind(p.name, t.init_var(v, name=p.name))
