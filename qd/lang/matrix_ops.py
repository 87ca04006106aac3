"""Linear algebra and construction helpers of `qd.Matrix` / `qd.Vector`.

Every function is plain Python over the matrix's entries, so it computes numbers in Python scope
and emits IR inside kernels (entries are then frontend `Expr`s). Nothing branches on a runtime
value: data-dependent choices (pivoting) go through `select`. Shapes are checked when the
function is called, i.e. at compile time inside kernels, with Quadrants' messages.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from qd.errors import QuadrantsTypeError
from qd.lang import matrix as _m
from qd.types.dtypes import MatrixType


def _b() -> Any:
    from qd.frontend import builtins

    return builtins


def _is_zero(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == 0


# ---------------------------------------------------------------- checks


def _need_matrix(x: Any, what: str = "not tensor type: {}") -> None:
    if not isinstance(x, _m.Matrix):
        raise QuadrantsTypeError(what.format(type(x)))


def _need_vector(x: Any, what: str = "expected a vector, got {}") -> None:
    if not isinstance(x, _m.Matrix) or x.ndim != 1:
        raise QuadrantsTypeError(what.format(type(x) if not isinstance(x, _m.Matrix) else x.get_shape()))


def _need_square(x: Any, limit: int | None = None) -> None:
    _need_matrix(x)
    if x.ndim != 2 or x.n != x.m:
        raise QuadrantsTypeError(f"expected a square matrix, got shape {x.get_shape()}")
    if limit is not None and x.n >= limit:
        raise QuadrantsTypeError(f"only dimension < {limit} is supported, got shape {x.get_shape()}")


def _need_same_shape(x: Any, y: Any) -> None:
    if x.get_shape() != y.get_shape():
        shapes = [x.get_shape(), y.get_shape()]
        raise QuadrantsTypeError(f"required shapes to be the same, got shapes {shapes}")


def _rows(mat: Any) -> list[list]:
    return [list(mat.entries[i * mat.m:(i + 1) * mat.m]) for i in range(mat.n)]


def _from_rows(rows: list[list]) -> Any:
    return _m.Matrix._make([x for r in rows for x in r], len(rows), len(rows[0]) if rows else 0, 2)


# ---------------------------------------------------------------- reductions and norms


def reduce_entries(mat: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """fn(...fn(fn(e0, e1), e2)..., e_last) over the row-major entries."""
    _need_matrix(mat)
    result = mat.entries[0]
    for x in mat.entries[1:]:
        result = fn(result, x)
    return result


def _truth(x: Any) -> Any:
    return bool(x) if isinstance(x, (bool, np.bool_)) else x


def any_(mat: Any) -> Any:
    """1 (True) if any entry is nonzero."""
    return _truth(reduce_entries(mat._map(lambda x: x != 0), operator.or_))


def all_(mat: Any) -> Any:
    """1 (True) if every entry is nonzero."""
    return _truth(reduce_entries(mat._map(lambda x: x != 0), operator.and_))


def norm_sqr(mat: Any) -> Any:
    return reduce_entries(mat * mat, operator.add)


def frobenius_inner(x: Any, y: Any) -> Any:
    _need_matrix(x)
    _need_matrix(y)
    _need_same_shape(x, y)
    return reduce_entries(x * y, operator.add)


def norm(mat: Any, eps: Any = 0) -> Any:
    s = norm_sqr(mat)
    s = s if _is_zero(eps) else s + eps
    return _m.keep_np_float(s, _b().sqrt(s))


def norm_inv(mat: Any, eps: Any = 0) -> Any:
    s = norm_sqr(mat)
    s = s if _is_zero(eps) else s + eps
    return _m.keep_np_float(s, _b().rsqrt(s))


def normalized(vec: Any, eps: Any = 0) -> Any:
    """vec / |vec| (eps, if given, is added to the norm as Quadrants does)."""
    _need_vector(vec)
    length = norm(vec)
    invlen = 1 / (length if _is_zero(eps) else length + eps)
    return invlen * vec


# ---------------------------------------------------------------- products


def dot(x: Any, y: Any) -> Any:
    _need_vector(x, "lhs for dot is not a vector")
    _need_vector(y, "rhs for dot is not a vector")
    _need_same_shape(x, y)
    return reduce_entries(x * y, operator.add)


def cross(x: Any, y: Any) -> Any:
    """2-D: the scalar x0*y1 - x1*y0; 3-D: the cross product vector."""
    _need_vector(x, "lhs for cross is not a vector")
    _need_vector(y, "rhs for cross is not a vector")
    _need_same_shape(x, y)
    a, b = x.entries, y.entries
    if x.n == 2:
        return a[0] * b[1] - a[1] * b[0]
    if x.n == 3:
        return _m.Matrix._make([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                                a[0] * b[1] - a[1] * b[0]], 3, 1, 1)
    raise QuadrantsTypeError(f"only dimension < 4 is supported, got shape {x.get_shape()}")


def outer_product(x: Any, y: Any) -> Any:
    _need_vector(x, "lhs for outer_product is not a vector")
    _need_vector(y, "rhs for outer_product is not a vector")
    return _m.Matrix._make([a * b for a in x.entries for b in y.entries], x.n, y.n, 2)


def _sum_products(xs: list, ys: list) -> Any:
    result = xs[0] * ys[0]
    for a, b in zip(xs[1:], ys[1:]):
        result = result + a * b
    return result


def matmul(x: Any, y: Any) -> Any:
    """mat @ mat, mat @ vec, vec @ mat (vec treated as a row) and vec @ vec (the dot product)."""
    if x.ndim == 1 and y.ndim == 1:
        return dot(x, y)
    if x.ndim == 1:
        if x.n != y.n:
            raise QuadrantsTypeError(f"dimension mismatch between {x.get_shape()} and {y.get_shape()} "
                                     "for left multiplication")
        return matmul(transpose(y), x)
    if x.m != y.n:
        raise QuadrantsTypeError(f"dimension mismatch between {x.get_shape()} and {y.get_shape()} "
                                 "for matrix multiplication")
    rows = _rows(x)
    if y.ndim == 1:
        return _m.Matrix._make([_sum_products(r, y.entries) for r in rows], x.n, 1, 1)
    cols = [y.entries[j::y.m] for j in range(y.m)]
    return _m.Matrix._make([_sum_products(r, c) for r in rows for c in cols], x.n, y.m, 2)


# ---------------------------------------------------------------- square matrices


def transpose(mat: Any) -> Any:
    _need_matrix(mat)
    if mat.ndim == 1:
        raise QuadrantsTypeError("`transpose()` cannot apply to a vector. If you want something like "
                                 "`a @ b.transpose()`, write `a.outer_product(b)` instead.")
    return _m.Matrix._make([mat.entries[i * mat.m + j] for j in range(mat.m) for i in range(mat.n)],
                           mat.m, mat.n, 2)


def trace(mat: Any) -> Any:
    _need_square(mat)
    result = mat.entries[0]
    for i in range(1, mat.n):
        result = result + mat.entries[i * mat.n + i]
    return result


def _minor(rows: list[list], i: int, j: int) -> list[list]:
    return [r[:j] + r[j + 1:] for k, r in enumerate(rows) if k != i]


def _det(rows: list[list]) -> Any:
    """Laplace expansion along the first column (closed form; used for n <= 4)."""
    n = len(rows)
    if n == 1:
        return rows[0][0]
    if n == 2:
        return rows[0][0] * rows[1][1] - rows[0][1] * rows[1][0]
    result = rows[0][0] * _det(_minor(rows, 0, 0))
    for i in range(1, n):
        term = rows[i][0] * _det(_minor(rows, i, 0))
        result = result - term if i % 2 else result + term
    return result


def determinant(mat: Any) -> Any:
    _need_square(mat, 5)
    return _det(_rows(mat))


def inverse(mat: Any) -> Any:
    """Closed-form adjugate / determinant for n <= 4; Gauss-Jordan with partial pivoting up to 12."""
    _need_square(mat, 13)
    rows, n = _rows(mat), mat.n
    if n == 1:
        return _from_rows([[1.0 / rows[0][0]]])
    if n > 4:
        return _inverse_pivoting(rows)
    inv_det = 1.0 / _det(rows)
    adj = [[_det(_minor(rows, j, i)) for j in range(n)] for i in range(n)]  # cofactor (j, i)
    return _from_rows([[inv_det * (c if (i + j) % 2 == 0 else -c) for j, c in enumerate(r)]
                       for i, r in enumerate(adj)])


def _inverse_pivoting(rows: list[list]) -> Any:
    """Forward elimination with partial pivoting (row swaps through `select`), then back substitution."""
    b = _b()
    n = len(rows)
    a = [list(r) for r in rows]
    e = [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]
    for k in range(n):
        for p in range(k + 1, n):
            swap = b.abs(a[p][k]) > b.abs(a[k][k])
            for mat, start in ((a, k), (e, 0)):
                for j in range(start, n):
                    hi, lo = mat[k][j], mat[p][j]
                    mat[k][j], mat[p][j] = b.select(swap, lo, hi), b.select(swap, hi, lo)
        for i in range(k + 1, n):
            f = a[i][k] / a[k][k]
            for j in range(k + 1, n):
                a[i][j] = a[i][j] - f * a[k][j]
            for j in range(n):
                e[i][j] = e[i][j] - f * e[k][j]
    inv: list[list] = [[0.0] * n for _ in range(n)]
    for c in range(n):
        for i in range(n - 1, -1, -1):
            s = e[i][c]
            for j in range(i + 1, n):
                s = s - a[i][j] * inv[j][c]
            inv[i][c] = s / a[i][i]
    return _from_rows(inv)


# ---------------------------------------------------------------- construction


def filled(val: Any, dt: Any, n: int, m: int | None = None) -> Any:
    if m is None:
        return _m.Vector([val] * n, dt=dt)
    return _m.Matrix([[val] * m for _ in range(n)], dt=dt)


def stack_rows(rows: list) -> Any:
    """A matrix whose rows are the given vectors or lists (all of one length)."""
    out = []
    for r in rows:
        if isinstance(r, _m.Matrix):
            _need_vector(r, "Cols/rows must be a list of lists, or a list of vectors")
            out.append(list(r.entries))
        elif isinstance(r, list):
            out.append(list(r))
        else:
            raise QuadrantsTypeError("Cols/rows must be a list of lists, or a list of vectors")
    if len({len(r) for r in out}) > 1:
        raise QuadrantsTypeError(f"required shapes to be the same, got shapes {[(len(r),) for r in out]}")
    return _m.Matrix(out)


def _flatten_args(args: tuple) -> list:
    entries: list = []
    for x in args:
        if isinstance(x, _m.Matrix):
            entries += x.entries
        elif isinstance(x, np.ndarray):
            entries += list(x.ravel())
        elif isinstance(x, (list, tuple)):
            entries += _flatten_args(tuple(x))
        else:
            entries.append(x)
    return entries


def instantiate_type(mtype: MatrixType, args: tuple) -> Any:
    """`vec3(1)` (broadcast), `vec3(1, 2, 3)`, `vec3([1, 2, 3])`, `vec4(v.xyz, 1.0)`, `mat2([[..], [..]])`."""
    if len(args) == 0:
        raise QuadrantsTypeError("Custom type instances need to be created with an initial value.")
    size = mtype.n * (1 if mtype.ndim == 1 else mtype.m)
    if len(args) == 1 and _m.is_scalar(args[0]):
        entries = [args[0]] * size
    else:
        entries = _flatten_args(args)
    if len(entries) != size:
        raise QuadrantsTypeError(f"{mtype} takes {size} values, got {len(entries)}")
    out = _m.Matrix._make(entries, mtype.n, 1 if mtype.ndim == 1 else mtype.m, mtype.ndim)
    return out.cast(mtype.dtype) if mtype.dtype is not None else out


# ---------------------------------------------------------------- fields and ndarrays


def _elem_dtype(mtype: MatrixType) -> Any:
    if mtype.dtype is not None:
        return mtype.dtype
    from qd.base import config

    return config.current().default_fp


def make_field(mtype: MatrixType, shape: Any = None, order: Any = None, name: str = "", offset: Any = None,
               needs_grad: bool = False, needs_dual: bool = False, layout: Any = None,
               ndim: Any = None) -> Any:
    """A field of `mtype` elements (`layout` is accepted; storage is always per element)."""
    from qd.runtime.fields import Field

    return Field(_elem_dtype(mtype), shape, elem_shape=mtype.shape, name=name, offset=offset,
                 needs_grad=needs_grad, needs_dual=needs_dual, order=order)


def make_ndarray(mtype: MatrixType, shape: Any, needs_grad: bool = False) -> Any:
    from qd.runtime.ndarray import Ndarray

    if shape is None:
        raise QuadrantsTypeError("an ndarray needs a shape")
    return Ndarray._from_elem(_elem_dtype(mtype), shape, mtype.shape, needs_grad)

