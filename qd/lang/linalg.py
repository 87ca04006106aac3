"""Small-matrix decompositions: `qd.polar_decompose`, `qd.svd`, `qd.sym_eig`, `qd.make_spd`, `qd.eig`,
`qd.solve`.

Like `qd.lang.matrix_ops`, every function is plain Python over a `qd.Matrix`'s entries: inside a kernel
(or a func) the entries are frontend `Expr`s and the code emits IR, fully unrolled; in Python scope it
computes on numpy scalars. Nothing branches on a runtime value: data-dependent choices (signs, pivots,
sorting, degenerate cases) are `select`s, and iterative methods run a fixed number of sweeps chosen per
dtype. Every scalar is computed at the requested float dtype `dt` (default: `default_fp`), constants
included, so an f32 decomposition never widens to f64 through a literal.

Methods:
- 2x2 polar: the closed form A = U P with U = (A ± cof A) / |A ± cof A| (sign of det A) and
  P = (AᵀA + |det A| I) / |A ± cof A|; branch-free and differentiable (reverse mode included). As in
  Quadrants, U is a reflection when det A < 0 and P is always symmetric positive semidefinite. U's entries
  are divided by the norm (not multiplied by its inverse): a rotation's U is within 1 ulp of it.
- symmetric eigenproblems: cyclic Jacobi rotations (a 2x2 needs exactly one).
- 3x3 SVD: Jacobi on AᵀA gives V (a rotation), its columns are sorted by descending singular value,
  then Givens QR of A V gives U (a rotation) and sigma = diag(R). Hence det U = det V = +1 and the sign
  of det A sits in sigma[2], Quadrants' convention; 3x3 polar is U Vᵀ (a rotation) and V sigma Vᵀ.
- 2x2 SVD: from the 2x2 polar and the eigenvectors of P: sigma >= 0 descending, V a rotation; V is I or the
  swap where P is diagonal to 1e-5 of its scale (f32; ~84 epsilons in f64), as Quadrants does near the identity,
  so U Vᵀ is exactly the polar factor there.
Inputs are scaled by the largest power of two at most their largest entry first (exact: its exponent bits), so
f32 neither overflows nor underflows on squares and the scaling rounds nothing.
"""

from __future__ import annotations

from typing import Any

from qd.errors import QuadrantsTypeError
from qd.lang.matrix import Matrix
from qd.types import dtypes
from qd.types.dtypes import DataType

Rows = list[list[Any]]

# Jacobi sweeps per size: one more than the worst case measured over random, clustered, graded and
# repeated spectra (f32: 3 for 3x3, 4 for 4x4, 5 for 6x6; f64: 4, 5 and 7). One sweep is exact for a 2x2.
_SWEEPS_F32 = {2: 1, 3: 4, 4: 5, 5: 6, 6: 6}
_SWEEPS_F64 = {2: 1, 3: 5, 4: 6, 5: 7, 6: 8}
_MAX_SYM_EIG = 6
# 2x2 SVD: an off-diagonal of the polar factor P at most this fraction of its largest diagonal entry is dropped
# (V = I or the swap). f32: Quadrants' 1e-5 (it compares |P01| < 1e-5 absolutely, so at unit scale the two agree);
# f64: as many units of its epsilon (~84). Dropping it moves sigma by at most that much.
_FLAT_F32 = 1e-5
_FLAT_F64 = 1e-5 * 2.0 ** -52 / 2.0 ** -23
_EXPONENT_BITS = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}


def _b() -> Any:
    from qd.frontend import builtins

    return builtins


class _Num:
    """Scalar arithmetic at one float dtype (constants, sqrt and select keep it)."""

    def __init__(self, dt: DataType) -> None:
        self.dt = dt

    def c(self, x: Any) -> Any:
        """`x` (a number or a scalar Expr) as a value of dtype dt."""
        return _b().cast(x, self.dt)

    def sqrt(self, x: Any) -> Any:
        return self.c(_b().sqrt(x))

    def sel(self, cond: Any, a: Any, b: Any) -> Any:
        return _b().select(cond, self.c(a), self.c(b))

    def abs(self, x: Any) -> Any:
        return _b().abs(x)

    def max(self, xs: list) -> Any:
        result = xs[0]
        for x in xs[1:]:
            result = _b().max(result, x)
        return result

    def safe(self, x: Any, is_zero: Any) -> Any:
        """`x`, or 1 where `is_zero`: a denominator that never divides by zero (also in the adjoint)."""
        return self.sel(is_zero, 1, x)

    def pow2_floor(self, x: Any) -> Any:
        """The largest power of two at most `x` (> 0: its exponent bits alone), an exact scale factor and a
        constant to autodiff; `x` itself where that is 0 (a subnormal or zero `x`)."""
        bits = dtypes.to_dtype(f"u{self.dt.bits}")
        exponent = _b().bit_cast(self.c(x), bits) & _b().cast(_EXPONENT_BITS[self.dt.bits], bits)
        p = _b().bit_cast(exponent, self.dt)
        return self.sel(p == 0, x, p)


# ---------------------------------------------------------------- checks and conversion


def _float_dtype(dt: Any, fname: str) -> DataType:
    if dt is None:
        from qd.base import config

        return config.current().default_fp
    d = dtypes.to_dtype(dt)
    if not d.is_float:
        raise QuadrantsTypeError(f"qd.{fname} computes in a float type, got dt={d}")
    return d


def _square(a: Any, fname: str, sizes: tuple[int, ...], sizes_text: str) -> int:
    """The size n of the square matrix `a`, which `qd.<fname>` supports (else a QuadrantsTypeError)."""
    if not isinstance(a, Matrix) or a.ndim != 2:
        got = f"a vector of {a.n}" if isinstance(a, Matrix) else type(a).__name__
        raise QuadrantsTypeError(f"qd.{fname} takes a square qd.Matrix, got {got}")
    if a.n != a.m or a.n not in sizes:
        raise QuadrantsTypeError(f"qd.{fname} supports {sizes_text}, got {a.n}x{a.m}")
    return a.n


def _rows(a: Matrix, num: _Num) -> Rows:
    return [[num.c(a.entries[i * a.m + j]) for j in range(a.m)] for i in range(a.n)]


def _matrix(rows: Rows, dt: DataType) -> Matrix:
    return Matrix._make([x for r in rows for x in r], len(rows), len(rows[0]), 2, dt)


def _vector(vals: list, dt: DataType) -> Matrix:
    return Matrix._make(list(vals), len(vals), 1, 1, dt)


def _scale(rows: Rows, num: _Num) -> tuple[Rows, Any, Any]:
    """(rows / m, m, zero): m is the largest power of two at most the largest |entry| (so the scaling rounds
    nothing and the largest scaled entry is in [1, 2)); zero where every entry is 0 (rows unchanged, m = 0)."""
    big = num.max([num.abs(x) for r in rows for x in r])
    zero = big == 0
    m = num.pow2_floor(big)
    inv = num.c(1) / num.safe(m, zero)
    return [[x * inv for x in r] for r in rows], m, zero


def _matmul(x: Rows, y: Rows) -> Rows:
    out = []
    for r in x:
        row = []
        for j in range(len(y[0])):
            s = r[0] * y[0][j]
            for k in range(1, len(y)):
                s = s + r[k] * y[k][j]
            row.append(s)
        out.append(row)
    return out


def _transpose(x: Rows) -> Rows:
    return [list(c) for c in zip(*x)]


def _identity(n: int, num: _Num) -> Rows:
    return [[num.c(1 if i == j else 0) for j in range(n)] for i in range(n)]


# ---------------------------------------------------------------- rotations


def _jacobi_angle(app: Any, aqq: Any, apq: Any, num: _Num) -> tuple[Any, Any, Any]:
    """(c, s, t) of the rotation J = [[c, s], [-s, c]] (in the plane p, q) with (JᵀAJ)[p][q] = 0,
    the smaller of the two angles (|t| <= 1, t = s / c). No rotation when apq = 0."""
    tau = aqq - app
    den = num.abs(tau) + num.sqrt(tau * tau + 4 * apq * apq)
    t = 2 * apq * num.sel(tau < 0, -1, 1) / num.safe(den, den == 0)
    c = num.c(1) / num.sqrt(1 + t * t)
    return c, t * c, t


def _jacobi_eig(a: Rows, sweeps: int, num: _Num) -> tuple[list, Rows]:
    """Eigenvalues (unsorted) and eigenvectors (columns of an orthogonal matrix with det +1) of the
    symmetric matrix `a`, by `sweeps` cyclic Jacobi sweeps."""
    n = len(a)
    a = [list(r) for r in a]
    v = _identity(n, num)
    for _ in range(sweeps):
        for p in range(n - 1):
            for q in range(p + 1, n):
                c, s, t = _jacobi_angle(a[p][p], a[q][q], a[p][q], num)
                apq = a[p][q]
                app, aqq = a[p][p] - t * apq, a[q][q] + t * apq
                for k in range(n):
                    if k != p and k != q:
                        akp, akq = a[k][p], a[k][q]
                        a[k][p] = a[p][k] = c * akp - s * akq
                        a[k][q] = a[q][k] = s * akp + c * akq
                a[p][p], a[q][q] = app, aqq
                a[p][q] = a[q][p] = num.c(0)
                for k in range(n):
                    vkp, vkq = v[k][p], v[k][q]
                    v[k][p], v[k][q] = c * vkp - s * vkq, s * vkp + c * vkq
    return [a[i][i] for i in range(n)], v


def _givens(x: Any, y: Any, num: _Num) -> tuple[Any, Any]:
    """(c, s) with [[c, s], [-s, c]] @ (x, y) = (r, 0), r = |(x, y)| >= 0; (1, 0) when x = y = 0."""
    m = _b().max(num.abs(x), num.abs(y))
    zero = m == 0
    inv = num.c(1) / num.safe(m, zero)
    xs, ys = x * inv, y * inv
    r = num.sqrt(xs * xs + ys * ys)
    rinv = num.c(1) / num.safe(r, zero)
    return num.sel(zero, 1, xs * rinv), num.sel(zero, 0, ys * rinv)


def _sort_columns(vals: list, vecs: Rows, descending: bool, keep_det: bool, num: _Num) -> tuple[list, Rows]:
    """`vals` sorted (a compare-exchange network) with the columns of `vecs` moved alongside; with
    `keep_det` a swap negates one of the two columns, so det(vecs) is unchanged."""
    n = len(vals)
    vals, vecs = list(vals), [list(r) for r in vecs]
    for end in range(n - 1, 0, -1):
        for i in range(end):
            j = i + 1
            swap = vals[i] < vals[j] if descending else vals[j] < vals[i]
            vals[i], vals[j] = num.sel(swap, vals[j], vals[i]), num.sel(swap, vals[i], vals[j])
            for r in vecs:
                moved = -r[i] if keep_det else r[i]
                r[i], r[j] = num.sel(swap, r[j], r[i]), num.sel(swap, moved, r[j])
    return vals, vecs


# ---------------------------------------------------------------- polar decomposition and SVD


def _polar2(a: Rows, num: _Num) -> tuple[Rows, Rows]:
    """A = U P for a 2x2 (closed form; U = I, P = 0 for the zero matrix)."""
    ((a00, a01), (a10, a11)), m, zero = _scale(a, num)
    det = a00 * a11 - a01 * a10
    sg = num.sel(det < 0, -1, 1)
    adet = num.abs(det)
    b0, b1 = a00 + sg * a11, a01 - sg * a10  # A + sg cof A = [[b0, b1], [-sg b1, sg b0]]
    r = b0 * b0 + b1 * b1  # its |det| = sum of squares + 2 |det A| >= 1 unless A = 0
    norm = num.sqrt(num.safe(r, zero))
    k = num.c(1) / norm
    u0, u1 = b0 / norm, b1 / norm  # (divided, not times k: a rotation's U is within 1 ulp of it, most often equal)
    u = [[num.sel(zero, 1, u0), num.sel(zero, 0, u1)], [num.sel(zero, 0, -sg * u1), num.sel(zero, 1, sg * u0)]]
    km = k * m
    p01 = (a00 * a01 + a10 * a11) * km
    p = [[(a00 * a00 + a10 * a10 + adet) * km, p01], [p01, (a01 * a01 + a11 * a11 + adet) * km]]
    return u, p


def _svd2(a: Rows, num: _Num) -> tuple[Rows, list, Rows]:
    """U, sigma (>= 0, descending), V of a 2x2: the eigenvectors of the polar factor P. Where P is diagonal to
    `_FLAT` of its scale (A near a rotation: MLS-MPM's resting material) V is I or the swap, so U Vᵀ is the polar
    factor exactly (`F - U Vᵀ` strain has no rounding of its own) and sigma is P's diagonal."""
    rot, p = _polar2(a, num)
    c, s, t = _jacobi_angle(p[0][0], p[1][1], p[0][1], num)
    flat = num.abs(p[0][1]) <= num.c(_FLAT_F64 if num.dt.bits > 32 else _FLAT_F32) * num.max([p[0][0], p[1][1]])
    c, s, t = num.sel(flat, 1, c), num.sel(flat, 0, s), num.sel(flat, 0, t)
    s1, s2 = p[0][0] - t * p[0][1], p[1][1] + t * p[0][1]
    swap = s1 < s2
    sig = [num.sel(swap, s2, s1), num.sel(swap, s1, s2)]
    v = [[num.sel(swap, s, c), num.sel(swap, -c, s)], [num.sel(swap, c, -s), num.sel(swap, s, c)]]
    return _matmul(rot, v), sig, v


def _svd3(a: Rows, num: _Num) -> tuple[Rows, list, Rows]:
    """U, sigma, V of a 3x3 with det U = det V = +1, sigma descending (sigma[2] < 0 iff det A < 0)."""
    sweeps = (_SWEEPS_F64 if num.dt is dtypes.f64 else _SWEEPS_F32)[3]
    a, m, _ = _scale(a, num)
    ata = _matmul(_transpose(a), a)
    for i in range(3):  # exactly symmetric
        for j in range(i):
            ata[i][j] = ata[j][i]
    lam, v = _jacobi_eig(ata, sweeps, num)
    _, v = _sort_columns(lam, v, descending=True, keep_det=True, num=num)
    r = _matmul(a, v)
    u = _identity(3, num)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        c, s = _givens(r[i][i], r[j][i], num)
        r[i], r[j] = [c * x + s * y for x, y in zip(r[i], r[j])], [c * y - s * x for x, y in zip(r[i], r[j])]
        for row in u:
            row[i], row[j] = c * row[i] + s * row[j], c * row[j] - s * row[i]
    return u, [r[i][i] * m for i in range(3)], v


def _diag(vals: list, num: _Num) -> Rows:
    n = len(vals)
    return [[vals[i] if i == j else num.c(0) for j in range(n)] for i in range(n)]


def _sym_product(v: Rows, d: list, num: _Num) -> Rows:
    """V diag(d) Vᵀ, exactly symmetric (the lower triangle mirrors the upper)."""
    n = len(v)
    out = [[num.c(0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            s = v[i][0] * d[0] * v[j][0]
            for k in range(1, n):
                s = s + v[i][k] * d[k] * v[j][k]
            out[i][j] = out[j][i] = s
    return out


def polar_decompose(A: Any, dt: Any = None) -> tuple[Matrix, Matrix]:
    """(U, P) with A = U P, U orthogonal and P symmetric, for a 2x2 or 3x3 matrix.

    2x2: closed form, differentiable; P is positive semidefinite (U is a reflection when det A < 0).
    3x3: from `svd`: U = U_s V_sᵀ is a rotation and P = V_s sigma V_sᵀ (indefinite when det A < 0)."""
    n = _square(A, "polar_decompose", (2, 3), "2x2 and 3x3 matrices")
    dtype = _float_dtype(dt, "polar_decompose")
    num = _Num(dtype)
    if n == 2:
        u, p = _polar2(_rows(A, num), num)
        return _matrix(u, dtype), _matrix(p, dtype)
    u, sig, v = _svd3(_rows(A, num), num)
    return _matrix(_matmul(u, _transpose(v)), dtype), _matrix(_sym_product(v, sig, num), dtype)


def svd(A: Any, dt: Any = None) -> tuple[Matrix, Matrix, Matrix]:
    """(U, sigma, V) with A = U sigma Vᵀ for a 2x2 or 3x3 matrix; sigma is a diagonal matrix, its
    entries in descending order.

    2x2: sigma >= 0 and V is a rotation (det U = sign of det A). 3x3: det U = det V = +1 and the sign of
    det A is carried by sigma[2, 2] (Quadrants' convention: U Vᵀ is always a rotation)."""
    n = _square(A, "svd", (2, 3), "2x2 and 3x3 matrices")
    dtype = _float_dtype(dt, "svd")
    num = _Num(dtype)
    u, sig, v = (_svd2 if n == 2 else _svd3)(_rows(A, num), num)
    return _matrix(u, dtype), _matrix(_diag(sig, num), dtype), _matrix(v, dtype)


# ---------------------------------------------------------------- eigenproblems


def _sym_eig(A: Any, dt: Any, fname: str) -> tuple[list, Rows, _Num]:
    n = _square(A, fname, tuple(range(1, _MAX_SYM_EIG + 1)), f"square matrices up to {_MAX_SYM_EIG}x{_MAX_SYM_EIG}")
    num = _Num(_float_dtype(dt, fname))
    if n == 1:
        return [num.c(A.entries[0])], [[num.c(1)]], num
    a, m, _ = _scale(_rows(A, num), num)
    for i in range(n):  # read the upper triangle only: the input is taken to be symmetric
        for j in range(i):
            a[i][j] = a[j][i]
    sweeps = (_SWEEPS_F64 if num.dt is dtypes.f64 else _SWEEPS_F32)[n]
    lam, v = _jacobi_eig(a, sweeps, num)
    lam, v = _sort_columns([x * m for x in lam], v, descending=False, keep_det=False, num=num)
    return lam, v, num


def sym_eig(A: Any, dt: Any = None) -> tuple[Matrix, Matrix]:
    """(eigenvalues, eigenvectors) of a symmetric n x n matrix, n <= 6 (its upper triangle is read):
    a vector of the eigenvalues in ascending order and an orthogonal matrix whose column i is the unit
    eigenvector of eigenvalue i. Cyclic Jacobi with a fixed sweep count."""
    lam, v, num = _sym_eig(A, dt, "sym_eig")
    return _vector(lam, num.dt), _matrix(v, num.dt)


def make_spd(A: Any, dt: Any = None) -> Matrix:
    """The symmetric positive semidefinite matrix nearest to the symmetric `A` (Frobenius norm):
    Q diag(max(lambda, 0)) Qᵀ from `sym_eig`; n <= 6."""
    lam, v, num = _sym_eig(A, dt, "make_spd")
    return _matrix(_sym_product(v, [_b().max(x, num.c(0)) for x in lam], num), num.dt)


def _unit_complex2(z: list, fallback: int, num: _Num) -> list:
    """z = (re0, im0, re1, im1) scaled to unit norm with its largest component real and positive;
    the unit vector e_fallback when z = 0."""
    m = num.max([num.abs(x) for x in z])
    zero = m == 0
    inv = num.c(1) / num.safe(m, zero)
    z = [x * inv for x in z]
    m0, m1 = z[0] * z[0] + z[1] * z[1], z[2] * z[2] + z[3] * z[3]
    first = m0 >= m1
    pr, pi = num.sel(first, z[0], z[2]), num.sel(first, z[1], z[3])  # the pivot component
    pmod = num.sqrt(pr * pr + pi * pi)
    scale = num.c(1) / num.safe(num.sqrt(m0 + m1) * pmod, zero)  # multiply by conj(pivot) / (|pivot| |z|)
    cr, ci = pr * scale, -pi * scale
    out = [z[0] * cr - z[1] * ci, z[0] * ci + z[1] * cr, z[2] * cr - z[3] * ci, z[2] * ci + z[3] * cr]
    unit = [1 if k == 2 * fallback else 0 for k in range(4)]
    return [num.sel(zero, e, x) for e, x in zip(unit, out)]


def eig(A: Any, dt: Any = None) -> tuple[Matrix, Matrix]:
    """Eigenvalues and right eigenvectors of a real 2x2 matrix, in complex form.

    Returns a 2x2 matrix whose row i is eigenvalue i as (real, imaginary) (real eigenvalues: the larger
    first; complex ones: positive imaginary part first) and a 4x2 matrix whose column i is the unit
    eigenvector of eigenvalue i as (re0, im0, re1, im1), its largest component real and positive."""
    _square(A, "eig", (2,), "2x2 matrices")
    num = _Num(_float_dtype(dt, "eig"))
    ((a, b), (c, d)), m, _ = _scale(_rows(A, num), num)
    tr, det = a + d, a * d - b * c
    gap = (a - d) * (a - d) + 4 * b * c  # tr² - 4 det without the cancellation
    real = gap >= 0
    root = num.sqrt(num.abs(gap))
    half = num.c(0.5)
    q = (tr + num.sel(tr < 0, -root, root)) * half  # the eigenvalue of larger magnitude (real case)
    other = det / num.safe(q, q == 0)
    re1 = num.sel(real, _b().max(q, other), tr * half)
    re2 = num.sel(real, _b().min(q, other), tr * half)
    im = num.sel(real, 0, root * half)  # eigenvalue 1 is re1 + i im, eigenvalue 2 is re2 - i im
    vecs = []
    for k, (mu_re, mu_im) in enumerate(((re2, -im), (re1, im))):
        # Columns of A - mu I, where mu is the other eigenvalue, are eigenvectors of this one.
        col0 = [a - mu_re, -mu_im, c, num.c(0)]
        col1 = [b, num.c(0), d - mu_re, -mu_im]
        n0 = col0[0] * col0[0] + col0[1] * col0[1] + c * c
        n1 = b * b + col1[2] * col1[2] + col1[3] * col1[3]
        pick = n0 >= n1
        vecs.append(_unit_complex2([num.sel(pick, x, y) for x, y in zip(col0, col1)], k, num))
    values = [[re1 * m, im * m], [re2 * m, -im * m]]
    return _matrix(values, num.dt), _matrix(_transpose(vecs), num.dt)


# ---------------------------------------------------------------- linear solve


def _check_pivot(pivot: Any) -> None:
    """Debug mode: a zero pivot fails at run time ("Matrix is singular in linear solve.")."""
    from qd import ir
    from qd.frontend import builder as bm
    from qd.frontend.expr import Expr

    bb = bm.current()
    if bb is None or not isinstance(pivot, Expr) or not bm.cfg().debug:
        return
    ok = pivot != 0
    check = bb.add_check(ir.CheckDecl(kind="assert", message="Matrix is singular in linear solve.", loc=bb.loc))
    bb.emit(ir.Check, cond=ok.value, check=check, args=())


def solve(A: Any, b: Any, dt: Any = None) -> Matrix:
    """x with A x = b for a 2x2 or 3x3 matrix A and a vector b: Gaussian elimination with partial
    pivoting. A singular A gives inf/nan (in debug mode, a QuadrantsAssertionError at run time)."""
    n = _square(A, "solve", (2, 3), "2x2 and 3x3 matrices")
    if not isinstance(b, Matrix) or len(b.entries) != n or (b.ndim == 2 and b.m != 1):
        got = f"shape {b.get_shape()}" if isinstance(b, Matrix) else type(b).__name__
        raise QuadrantsTypeError(f"qd.solve needs a vector of {n} for the right-hand side, got {got}")
    num = _Num(_float_dtype(dt, "solve"))
    ab = [row + [num.c(x)] for row, x in zip(_rows(A, num), b.entries)]
    for k in range(n):
        for p in range(k + 1, n):  # bring the largest |a[p][k]| into row k
            swap = num.abs(ab[p][k]) > num.abs(ab[k][k])
            for j in range(k, n + 1):
                hi, lo = ab[k][j], ab[p][j]
                ab[k][j], ab[p][j] = num.sel(swap, lo, hi), num.sel(swap, hi, lo)
        _check_pivot(ab[k][k])
        for i in range(k + 1, n):
            f = ab[i][k] / ab[k][k]
            for j in range(k + 1, n + 1):
                ab[i][j] = ab[i][j] - f * ab[k][j]
    x: list = [None] * n
    for i in range(n - 1, -1, -1):
        s = ab[i][n]
        for j in range(i + 1, n):
            s = s - ab[i][j] * x[j]
        x[i] = s / ab[i][i]
    return _vector(x, num.dt)
