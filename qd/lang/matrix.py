"""`qd.Matrix` / `qd.Vector`: small matrices unrolled into their scalar entries.

A matrix holds a flat row-major list `entries` of scalars. In Python scope a scalar is a Python
number or a numpy scalar (a typed matrix keeps numpy scalars of its dtype, so host arithmetic
follows numpy as Quadrants' numpy-backed host matrices do); inside a kernel being compiled it may
also be a frontend `Expr`. Every operation is written once with Python operators and the scalar
builtins of `qd.frontend.builtins`, so the same code computes on the host and emits IR in kernels.

Contract with the frontend: `.entries`, `.n`, `.m`, `.ndim` (1 for vectors, 2 for matrices),
`.dtype` (explicit, else inferred from the entries; None when empty), `_map(fn)`,
`_zip(other, fn)` (scalars broadcast; shapes must match), `_map_entries(entries)` (same shape,
new entries) and `Matrix._make(entries, n, m, ndim, dt)` (fast constructor from flat entries).
Linear algebra lives in `qd.lang.matrix_ops`.
"""

from __future__ import annotations

import itertools
import numbers
import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from qd.errors import QuadrantsIndexError, QuadrantsSyntaxError, QuadrantsTypeError
from qd.lang import matrix_ops as _ops
from qd.types import dtypes, hooks
from qd.types.dtypes import DataType, MatrixType

_SCALAR = (numbers.Number, np.generic)


def _b() -> Any:
    from qd.frontend import builtins

    return builtins


def _is_expr(x: Any) -> bool:
    from qd.frontend.expr import Expr

    return isinstance(x, Expr)


def is_scalar(x: Any) -> bool:
    """A Python/numpy number or a frontend Expr (what a matrix entry may be)."""
    return isinstance(x, _SCALAR) or _is_expr(x)


def _as_entry(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    if not is_scalar(x):
        raise QuadrantsTypeError(f"a matrix entry must be a scalar, got {type(x).__name__}")
    return x


def entry_dtype(x: Any) -> DataType:
    """The dtype an entry has (Python literals take the config defaults, as in kernels)."""
    if isinstance(x, np.generic):
        return dtypes.to_dtype(x.dtype)
    if _is_expr(x):
        return x.dtype
    from qd.frontend.expr import literal_dtype

    return literal_dtype(x)


def _cast_entry(x: Any, dt: DataType) -> Any:
    if isinstance(x, np.generic) and x.dtype == dt.np_dtype or _is_expr(x) and x.dtype is dt:
        return x
    return _b().cast(x, dt)


def _parse(arr: Any) -> tuple[list, int, int, int]:
    """(flat entries, n, m, ndim) of a nested list / tuple / ndarray / Matrix."""
    if isinstance(arr, Matrix):
        return list(arr.entries), arr.n, arr.m, arr.ndim
    if isinstance(arr, np.ndarray):
        if arr.ndim not in (1, 2):
            raise QuadrantsTypeError(f"a Matrix is built from a 1-D or 2-D array, got shape {arr.shape}")
        n, m = (arr.shape[0], 1) if arr.ndim == 1 else arr.shape
        return list(arr.ravel()), n, m, arr.ndim
    if not isinstance(arr, (list, tuple)):
        raise QuadrantsTypeError("An Matrix/Vector can only be initialized with an array-like object")
    if len(arr) == 0:
        return [], 0, 1, 1
    if isinstance(arr[0], Matrix):
        raise QuadrantsTypeError("cols/rows required when using list of vectors (use qd.Matrix.rows / cols)")
    if isinstance(arr[0], (list, tuple, np.ndarray)):
        rows = [list(r) for r in arr]
        m = len(rows[0])
        if any(len(r) != m for r in rows):
            lengths = [len(r) for r in rows]
            raise QuadrantsTypeError(f"rows of a Matrix must have equal lengths, got {lengths}")
        return [_as_entry(x) for r in rows for x in r], len(rows), m, 2
    return [_as_entry(x) for x in arr], len(arr), 1, 1


class Matrix:
    """A small matrix of scalars, row-major: `qd.Matrix([[1, 2], [3, 4]])`.

    In a kernel a matrix is a value held in registers (its size is fixed when the kernel is compiled), with
    `+ - * /` elementwise, `@` the matrix product, `m[i, j]` an entry, and the methods `transpose()`,
    `determinant()`, `inverse()`, `trace()`, `norm()`, `dot()`, `sum()`, `max()`, `min()`... On the host it
    is a small container that converts with `to_numpy()`.

    `arr` is a list of rows (or a flat list with `ndim=1`, or a numpy array); `dt` the dtype of the entries
    (by default inferred: `qd.init`'s `default_fp` for floats, `default_ip` for ints). Rows of different
    lengths raise `qd.QuadrantsTypeError`.

    `qd.Matrix.field(n, m, dtype, shape=...)` and `qd.Matrix.ndarray(n, m, dtype, shape)` make arrays of
    matrices; `qd.types.matrix(n, m, dtype)` is the type for annotations.
    """

    _is_quadrants_class = True
    _is_matrix_class = True
    __array_priority__ = 1000
    __hash__ = object.__hash__

    entries: list
    n: int
    m: int
    ndim: int
    _dt: DataType | None

    def __init__(self, arr: Any, dt: Any = None, ndim: int | None = None) -> None:
        entries, n, m, nd = _parse(arr)
        if ndim is not None and ndim != nd:
            if ndim == 1 and (m == 1 or n == 1):
                n, m, nd = n * m, 1, 1
            elif ndim == 2 and nd == 1:
                m, nd = 1, 2
            else:
                raise QuadrantsTypeError(f"cannot view a {nd}-D array as a {ndim}-D matrix")
        self._init(entries, n, m, nd, dt)

    def _init(self, entries: list, n: int, m: int, ndim: int, dt: Any) -> None:
        dt = dtypes.to_dtype(dt) if dt is not None else None
        self.entries = [_cast_entry(x, dt) for x in entries] if dt is not None else entries
        self.n, self.m, self.ndim, self._dt = n, m, ndim, dt

    @staticmethod
    def _make(entries: list, n: int, m: int = 1, ndim: int = 2, dt: DataType | None = None) -> Matrix:
        """A matrix (a `Vector` when ndim == 1) of flat row-major `entries` (taken as they are)."""
        out = object.__new__(Vector if ndim == 1 else Matrix)
        out.entries, out.n, out.m, out.ndim, out._dt = entries, n, m, ndim, dt
        return out

    @staticmethod
    def _from_entries(entries: list, shape: tuple[int, ...], dt: DataType | None = None) -> Matrix:
        """A Vector (shape (n,)) or Matrix (shape (n, m)) of flat `entries`, converted to `dt` if given."""
        if dt is not None:
            entries = [_cast_entry(x, dt) for x in entries]
        if len(shape) == 1:
            return Matrix._make(entries, shape[0], 1, 1, dt)
        return Matrix._make(entries, shape[0], shape[1], 2, dt)

    # ------------------------------------------------------------ shape and dtype
    @property
    def dtype(self) -> DataType | None:
        if self._dt is not None:
            return self._dt
        if not self.entries:
            return None
        result = entry_dtype(self.entries[0])
        for x in self.entries[1:]:
            result = dtypes.promote(result, entry_dtype(x))
        return result

    def get_shape(self) -> tuple[int, ...]:
        return (self.n,) if self.ndim == 1 else (self.n, self.m)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Any]:
        if self.ndim == 1:
            return iter(list(self.entries))
        return ([self.entries[i * self.m + j] for j in range(self.m)] for i in range(self.n))

    @property
    def _members(self) -> list:
        return self.entries

    # ------------------------------------------------------------ elementwise plumbing
    def _map_entries(self, entries: list, dt: DataType | None = None) -> Matrix:
        return Matrix._make(entries, self.n, self.m, self.ndim, dt)

    def _map(self, fn: Callable[[Any], Any]) -> Matrix:
        """Elementwise unary: a new matrix of `fn(entry)`. A host float computed from a numpy float
        entry is converted back to that entry's numpy type (numpy ufuncs keep f32, so do we)."""
        return self._map_entries([keep_np_float(x, fn(x)) for x in self.entries])

    def _zip(self, other: Any, fn: Callable[[Any, Any], Any], name: str = "") -> Matrix:
        """Elementwise binary `fn(self_entry, other_entry)`; a scalar `other` is broadcast."""
        o = _operand(other)
        if o is NotImplemented:
            raise QuadrantsTypeError(f"unsupported operand type(s) for matrix {name or 'operation'}: "
                                     f"{type(other).__name__}")
        if isinstance(o, Matrix):
            if o.get_shape() != self.get_shape():
                what = f"matrix '{name}'" if name else "elementwise matrix operation"
                raise QuadrantsTypeError(f"shape mismatch in {what}: {self.get_shape()} and {o.get_shape()}")
            return self._map_entries([keep_np_float(a, fn(a, b)) for a, b in zip(self.entries, o.entries)])
        return self._map_entries([keep_np_float(a, fn(a, o)) for a in self.entries])

    def _binop(self, other: Any, fn: Callable[[Any, Any], Any], name: str, reflected: bool = False) -> Any:
        o = _operand(other)
        if o is NotImplemented:
            return NotImplemented
        if reflected:
            return self._zip(o, lambda a, b: fn(b, a), name)
        return self._zip(o, fn, name)

    # ------------------------------------------------------------ indexing
    def __getitem__(self, key: Any) -> Any:
        rows, cols, shape = self._parse_key(key)
        vals = [self._fetch(r, c) for r in rows for c in cols]
        if not shape:
            return vals[0]
        return Matrix._make(vals, shape[0], shape[1] if len(shape) == 2 else 1, len(shape))

    def __setitem__(self, key: Any, value: Any) -> None:
        rows, cols, _ = self._parse_key(key)
        count = len(rows) * len(cols)
        if isinstance(value, (Matrix, list, tuple, np.ndarray)):
            vals = _parse(value)[0] if not isinstance(value, Matrix) else list(value.entries)
            if len(vals) != count:
                raise QuadrantsTypeError(f"cannot assign {len(vals)} values to {count} matrix entries")
        else:
            vals = [value] * count
        for (r, c), v in zip(itertools.product(rows, cols), vals):
            self._store(r, c, self._cast_store(v))
        self._written()

    def _written(self) -> None:
        """An element of a field/ndarray read in Python scope writes through to it: `x[i][j] = v`, `x[i].y = v`,
        `x[i].xy = u`, `x[i].fill(v)`."""
        write_back = self.__dict__.get("_write_back")
        if write_back is not None:
            write_back(self)

    def _cast_store(self, v: Any) -> Any:
        v = _as_entry(v)
        return _cast_entry(v, self._dt) if self._dt is not None else v

    def _parse_key(self, key: Any) -> tuple[list, list, tuple[int, ...]]:
        """Row and column selections of `key`, and the shape of the result (() for one entry)."""
        keys = list(key) if isinstance(key, tuple) else [key]
        if self.ndim == 1:
            if len(keys) != 1:
                raise QuadrantsIndexError(f"a vector takes 1 index, got {len(keys)}")
            rows = _select_axis(keys[0], self.n)
            return rows, [0], (len(rows),) if isinstance(keys[0], slice) else ()
        if len(keys) == 1:
            keys.append(slice(None))  # m[i] is row i
        if len(keys) != 2:
            raise QuadrantsIndexError(f"a matrix takes 1 or 2 indices, got {len(keys)}")
        rows, cols = _select_axis(keys[0], self.n), _select_axis(keys[1], self.m)
        shape = tuple(len(s) for k, s in zip(keys, (rows, cols)) if isinstance(k, slice))
        return rows, cols, shape

    def _check_runtime_index(self, r: Any, c: Any) -> None:
        if self.ndim == 1:
            _b().check_local_index(r, self.n, f"a local vector of size {self.n}")
            return
        what = f"a local matrix of shape ({self.n}, {self.m})"
        _b().check_local_index(r, self.n, f"axis 0 of {what}")
        _b().check_local_index(c, self.m, f"axis 1 of {what}")

    def _fetch(self, r: Any, c: Any) -> Any:
        self._check_runtime_index(r, c)
        m, e = self.m, self.entries
        if isinstance(r, int) and isinstance(c, int):
            return e[r * m + c]
        if isinstance(r, int):
            return _choose(c, e[r * m:(r + 1) * m])
        if isinstance(c, int):
            return _choose(r, e[c::m])
        return _choose(r * m + c, e)

    def _store(self, r: Any, c: Any, value: Any) -> None:
        if isinstance(r, int) and isinstance(c, int):
            self.entries[r * self.m + c] = value
            return
        self._check_runtime_index(r, c)
        sel = _b().select
        for i in range(self.n):
            for j in range(self.m):
                hit = _both(r == i, c == j)
                if hit is not False:
                    k = i * self.m + j
                    self.entries[k] = sel(hit, value, self.entries[k])

    def _set_entries(self, value: Any) -> None:
        self[(slice(None),) * self.ndim] = value

    # ------------------------------------------------------------ operators
    def __add__(self, o: Any) -> Any: return self._binop(o, operator.add, "+")
    def __radd__(self, o: Any) -> Any: return self._binop(o, operator.add, "+", True)
    def __sub__(self, o: Any) -> Any: return self._binop(o, operator.sub, "-")
    def __rsub__(self, o: Any) -> Any: return self._binop(o, operator.sub, "-", True)
    def __mul__(self, o: Any) -> Any: return self._binop(o, operator.mul, "*")
    def __rmul__(self, o: Any) -> Any: return self._binop(o, operator.mul, "*", True)
    def __truediv__(self, o: Any) -> Any: return self._binop(o, operator.truediv, "/")
    def __rtruediv__(self, o: Any) -> Any: return self._binop(o, operator.truediv, "/", True)
    def __floordiv__(self, o: Any) -> Any: return self._binop(o, operator.floordiv, "//")
    def __rfloordiv__(self, o: Any) -> Any: return self._binop(o, operator.floordiv, "//", True)
    def __mod__(self, o: Any) -> Any: return self._binop(o, operator.mod, "%")
    def __rmod__(self, o: Any) -> Any: return self._binop(o, operator.mod, "%", True)
    def __pow__(self, o: Any) -> Any: return self._binop(o, operator.pow, "**")
    def __rpow__(self, o: Any) -> Any: return self._binop(o, operator.pow, "**", True)
    def __and__(self, o: Any) -> Any: return self._binop(o, operator.and_, "&")
    def __rand__(self, o: Any) -> Any: return self._binop(o, operator.and_, "&", True)
    def __or__(self, o: Any) -> Any: return self._binop(o, operator.or_, "|")
    def __ror__(self, o: Any) -> Any: return self._binop(o, operator.or_, "|", True)
    def __xor__(self, o: Any) -> Any: return self._binop(o, operator.xor, "^")
    def __rxor__(self, o: Any) -> Any: return self._binop(o, operator.xor, "^", True)
    def __lshift__(self, o: Any) -> Any: return self._binop(o, operator.lshift, "<<")
    def __rlshift__(self, o: Any) -> Any: return self._binop(o, operator.lshift, "<<", True)
    def __rshift__(self, o: Any) -> Any: return self._binop(o, operator.rshift, ">>")
    def __rrshift__(self, o: Any) -> Any: return self._binop(o, operator.rshift, ">>", True)
    def __lt__(self, o: Any) -> Any: return self._binop(o, operator.lt, "<")
    def __le__(self, o: Any) -> Any: return self._binop(o, operator.le, "<=")
    def __gt__(self, o: Any) -> Any: return self._binop(o, operator.gt, ">")
    def __ge__(self, o: Any) -> Any: return self._binop(o, operator.ge, ">=")
    def __eq__(self, o: object) -> Any: return self._binop(o, operator.eq, "==")  # type: ignore[override]
    def __ne__(self, o: object) -> Any: return self._binop(o, operator.ne, "!=")  # type: ignore[override]
    def __neg__(self) -> Matrix: return self._map(operator.neg)
    def __pos__(self) -> Matrix: return self._map(operator.pos)
    def __abs__(self) -> Matrix: return self._map(abs)
    def __invert__(self) -> Matrix: return self._map(operator.invert)

    def __matmul__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if not isinstance(o, Matrix) else _ops.matmul(self, o)

    def __rmatmul__(self, other: Any) -> Any:
        o = _operand(other)
        return NotImplemented if not isinstance(o, Matrix) else _ops.matmul(o, self)

    # ------------------------------------------------------------ linear algebra (qd.lang.matrix_ops)
    def dot(self, other: Any) -> Any: return _ops.dot(self, _operand(other))
    def cross(self, other: Any) -> Any: return _ops.cross(self, _operand(other))
    def outer_product(self, other: Any) -> Matrix: return _ops.outer_product(self, _operand(other))
    def frobenius_inner(self, other: Any) -> Any: return _ops.frobenius_inner(self, _operand(other))
    def transpose(self) -> Matrix: return _ops.transpose(self)
    def trace(self) -> Any: return _ops.trace(self)
    def determinant(self) -> Any: return _ops.determinant(self)
    def inverse(self) -> Matrix: return _ops.inverse(self)
    def sum(self) -> Any: return _ops.reduce_entries(self, operator.add)
    def max(self) -> Any: return _ops.reduce_entries(self, _b().max)
    def min(self) -> Any: return _ops.reduce_entries(self, _b().min)
    def any(self) -> Any: return _ops.any_(self)
    def all(self) -> Any: return _ops.all_(self)
    def norm_sqr(self) -> Any: return _ops.norm_sqr(self)
    def norm(self, eps: Any = 0) -> Any: return _ops.norm(self, eps)
    def norm_inv(self, eps: Any = 0) -> Any: return _ops.norm_inv(self, eps)
    def normalized(self, eps: Any = 0) -> Matrix: return _ops.normalized(self, eps)

    def cast(self, dtype: Any) -> Matrix:
        """A copy with every entry converted to `dtype`."""
        dt = dtypes.to_dtype(dtype)
        return self._map_entries([_b().cast(x, dt) for x in self.entries], dt)

    def fill(self, val: Any) -> None:
        """Sets every entry to `val` (in place)."""
        v = self._cast_store(val)
        self.entries[:] = [v] * len(self.entries)
        self._written()

    # ------------------------------------------------------------ constructors
    @staticmethod
    def zero(dt: Any, n: int, m: int | None = None) -> Matrix:
        return _ops.filled(0, dt, n, m)

    @staticmethod
    def one(dt: Any, n: int, m: int | None = None) -> Matrix:
        return _ops.filled(1, dt, n, m)

    @staticmethod
    def unit(n: int, i: int, dt: Any = None) -> Matrix:
        if not 0 <= i < n:
            raise QuadrantsIndexError(f"unit vector index {i} out of range for length {n}")
        return Vector([int(i == j) for j in range(n)], dt=dt if dt is not None else int)

    @staticmethod
    def identity(dt: Any, n: int) -> Matrix:
        return Matrix([[int(i == j) for j in range(n)] for i in range(n)], dt=dt)

    @staticmethod
    def diag(dim: int, val: Any) -> Matrix:
        if not isinstance(dim, (int, np.integer)):
            raise QuadrantsTypeError(f"not an integer: {dim} of type {type(dim).__name__}")
        return Matrix._make([val if i == j else 0 for i in range(dim) for j in range(dim)], dim, dim, 2)

    @staticmethod
    def rows(rows: list) -> Matrix:
        """A matrix whose rows are the given vectors / lists."""
        return _ops.stack_rows(rows)

    @staticmethod
    def cols(cols: list) -> Matrix:
        """A matrix whose columns are the given vectors / lists."""
        return _ops.transpose(_ops.stack_rows(cols))

    # ------------------------------------------------------------ host conversion
    def _host_entries(self) -> list:
        if any(_is_expr(x) for x in self.entries):
            raise QuadrantsSyntaxError("a matrix of runtime values has no host value (it lives in a kernel)")
        return self.entries

    def to_numpy(self, dtype: Any = None) -> np.ndarray:
        dt = dtypes.to_dtype(dtype).np_dtype if dtype is not None else (
            self._dt.np_dtype if self._dt is not None else None)
        return np.array(self._host_entries(), dtype=dt).reshape(self.get_shape())

    def to_list(self) -> list:
        flat = [x.item() if isinstance(x, np.generic) else x for x in self._host_entries()]
        if self.ndim == 1:
            return flat
        return [flat[i * self.m:(i + 1) * self.m] for i in range(self.n)]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.to_numpy()
        return arr if dtype is None else arr.astype(dtype)

    def __str__(self) -> str:
        if any(_is_expr(x) for x in self.entries):
            return f"<{self.n}x{self.m} qd.Matrix>"
        return str(self.to_numpy())

    __repr__ = __str__

    # ------------------------------------------------------------ fields and ndarrays
    @classmethod
    def field(cls, n: int, m: int, dtype: Any, shape: Any = None, order: Any = None, name: str = "",
              offset: Any = None, needs_grad: bool = False, needs_dual: bool = False, layout: Any = None,
              ndim: int | None = None) -> Any:
        """Declare a field whose elements are `n` x `m` matrices of `dtype`.

        `qd.Matrix.field(3, 3, qd.f32, shape=100)` is 100 3x3 matrices; `f[i]` is one matrix and `f[i][r, c]`
        one entry. `ndim=1` makes the elements vectors of `n` (as `qd.Vector.field`). The other arguments are
        `qd.field`'s (`shape`, `order`, `name`, `offset`, `needs_grad`, `needs_dual`); `layout` is
        `qd.Layout.AOS` (the default: each matrix contiguous) or `qd.Layout.SOA` (each entry its own
        array). `f.to_numpy()` has shape `shape + (n, m)`.
        """
        mt = dtypes.vector(n, dtype) if ndim == 1 else dtypes.matrix(n, m, dtype)
        return _ops.make_field(mt, shape=shape, order=order, name=name, offset=offset,
                               needs_grad=needs_grad, needs_dual=needs_dual, layout=layout)

    @classmethod
    def ndarray(cls, n: int, m: int, dtype: Any, shape: Any, needs_grad: bool = False) -> Any:
        """Make a zero-filled ndarray whose elements are `n` x `m` matrices of `dtype` (see `qd.ndarray`);
        its `to_numpy()` has shape `shape + (n, m)`. A kernel takes it through
        `qd.types.ndarray(qd.types.matrix(n, m, dtype), ndim)`."""
        return _ops.make_ndarray(dtypes.matrix(n, m, dtype), shape, needs_grad)

    @classmethod
    def tensor(cls, n: int, m: int, dtype: Any, shape: Any, **kwargs: Any) -> Any:
        """`qd.Matrix.tensor`: a `qd.Tensor` of n x m matrices on either backend (`qd/lang/tensor.py`)."""
        from qd.lang.tensor import matrix_tensor

        return matrix_tensor(n, m, dtype, shape, **kwargs)

    @staticmethod
    def _typed_field(mtype: MatrixType, shape: Any = None, **kwargs: Any) -> Any:
        return _ops.make_field(mtype, shape=shape, **kwargs)

    @staticmethod
    def _typed_ndarray(mtype: MatrixType, shape: Any = None, needs_grad: bool = False, **kwargs: Any) -> Any:
        return _ops.make_ndarray(mtype, shape, needs_grad)

    @staticmethod
    def _from_type(mtype: MatrixType, args: tuple) -> Matrix:
        """`qd.types.matrix(n, m, dt)(*args)` / `qd.types.vector(n, dt)(*args)` (GLSL-style)."""
        return _ops.instantiate_type(mtype, args)


class Vector(Matrix):
    """A small vector of scalars: `qd.Vector([1.0, 2.0, 3.0])`, or `qd.Vector([1, 2], dt=qd.f32)`.

    A `qd.Matrix` with one column: in a kernel a value held in registers, with `+ - * /` elementwise,
    `v[i]` an entry, `v.x`/`v.y`/`v.z`/`v.w` (and swizzles such as `v.xy`), and `dot()`, `cross()`,
    `norm()`, `normalized()`, `outer_product()`, `sum()`... `arr` must be flat (a list, or an n x 1 / 1 x n
    nesting): anything else raises `qd.QuadrantsTypeError`. `dt` is the dtype of the entries (inferred by
    default).

    `qd.Vector.field(n, dtype, shape=...)` and `qd.Vector.ndarray(n, dtype, shape)` make arrays of vectors;
    `qd.types.vector(n, dtype)` (or `qd.math.vec3` etc.) is the type for annotations.
    """

    def __init__(self, arr: Any, dt: Any = None, **kwargs: Any) -> None:
        entries, n, m, nd = _parse(arr)
        if nd != 1 and not (nd == 2 and (m == 1 or n == 1)):
            raise QuadrantsTypeError(f"a Vector is built from a flat list, got a {n}x{m} array")
        self._init(entries, n * m, 1, 1, dt)

    @classmethod
    def field(cls, n: int, dtype: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Declare a field whose elements are vectors of `n` entries of `dtype`.

        `qd.Vector.field(3, qd.f32, shape=(64, 64))` is a 64 x 64 grid of 3-vectors; `f[i, j]` is one vector
        and `f[i, j][k]` one entry. The other arguments are `qd.Matrix.field`'s (`shape`, `order`, `name`,
        `offset`, `needs_grad`, `needs_dual`, `layout`), given by keyword. `f.to_numpy()` has shape
        `shape + (n,)`.
        """
        kwargs["ndim"] = 1
        return Matrix.field(n, 1, dtype, *args, **kwargs)

    @classmethod
    def ndarray(  # type: ignore[override]
            cls, n: int, dtype: Any, shape: Any, needs_grad: bool = False) -> Any:
        """Make a zero-filled ndarray whose elements are vectors of `n` entries of `dtype` (see `qd.ndarray`);
        its `to_numpy()` has shape `shape + (n,)`. A kernel takes it through
        `qd.types.ndarray(qd.types.vector(n, dtype), ndim)`."""
        return _ops.make_ndarray(dtypes.vector(n, dtype), shape, needs_grad)

    @classmethod
    def tensor(cls, n: int, dtype: Any, shape: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """`qd.Vector.tensor`: a `qd.Tensor` of n-vectors on either backend (`qd/lang/tensor.py`)."""
        from qd.lang.tensor import vector_tensor

        return vector_tensor(n, dtype, shape, **kwargs)


# ---------------------------------------------------------------- helpers


def _operand(x: Any) -> Any:
    """`x` as a Matrix or a scalar, or NotImplemented when it is neither."""
    if isinstance(x, Matrix) or is_scalar(x):
        return x
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x[()]
    if isinstance(x, (list, tuple, np.ndarray)):
        return Matrix(x)
    return NotImplemented


def keep_np_float(src: Any, r: Any) -> Any:
    if type(r) in (float, int) and isinstance(src, np.floating):
        return type(src)(r)
    return r


def _select_axis(k: Any, size: int) -> list:
    """Indices along one axis: a slice gives a list of ints, an int/Expr a one-element list."""
    if isinstance(k, slice):
        return list(range(size))[k]
    if isinstance(k, (bool, np.bool_)):
        raise QuadrantsIndexError("a bool is not a matrix index")
    if isinstance(k, (int, np.integer)):
        k = int(k)
        if not -size <= k < size:
            raise QuadrantsIndexError(f"index {k} is out of range for a matrix axis of size {size}")
        return [k % size]
    if _is_expr(k):
        if not k.dtype.is_int:
            raise QuadrantsTypeError(f"a matrix index must be an integer, got {k.dtype}")
        return [k]
    raise QuadrantsIndexError(f"invalid matrix index of type {type(k).__name__}")


def _both(a: Any, b: Any) -> Any:
    """`a and b` where each is a Python bool (static index) or a u1 Expr (runtime index)."""
    if a is False or b is False:
        return False
    return b if a is True else a if b is True else a & b


def _choose(idx: Any, items: list) -> Any:
    """items[idx] for a runtime index: a select chain (the last item for out-of-range indices)."""
    sel = _b().select
    result = items[-1]
    for k in range(len(items) - 2, -1, -1):
        result = sel(idx == k, items[k], result)
    return result


def _gen_swizzles(cls: type) -> type:
    """GLSL swizzles `.x .xy .rgb .stpq ...` (up to 4 letters of one group) as properties."""
    for group in ("xyzw", "rgba", "stpq"):
        for length in range(1, 5):
            for pattern in itertools.product(group, repeat=length):
                setattr(cls, "".join(pattern), _swizzle_property(group, "".join(pattern)))
    return cls


def _swizzle_property(group: str, pattern: str) -> property:
    idx = [group.index(ch) for ch in pattern]

    def check(self: Matrix) -> None:
        if self.ndim != 1 or max(idx) >= self.n:
            valid = tuple(sorted(group[:self.n])) if self.ndim == 1 else ()
            raise QuadrantsSyntaxError(f"vec{self.n} only has attributes={valid}, got={tuple(pattern)}")

    def get(self: Matrix) -> Any:
        check(self)
        if len(idx) == 1:
            return self.entries[idx[0]]
        return Matrix._make([self.entries[i] for i in idx], len(idx), 1, 1)

    def set_(self: Matrix, value: Any) -> None:
        check(self)
        vals = [value] if len(idx) == 1 else list(value)
        if len(vals) != len(idx):
            raise QuadrantsTypeError(f"value len does not match the swizzle pattern={pattern}")
        for i, v in zip(idx, vals):
            self.entries[i] = self._cast_store(v)
        self._written()

    return property(get, set_)


_gen_swizzles(Matrix)


hooks.register(Matrix=Matrix, Vector=Vector)
