"""Random kernels as a tree of typed expressions and statements, rendered twice: as a `@qd.kernel` (the
qd text) and as a plain Python function `ref(...)` that runs every parallel loop serially (the reference
text, see `reference.py` for what it assumes).

A program has the signature `kern(a: i32[n], b: i64[n], x: f32[n], y: f64[n], oa: i32[n], ob: i64[n],
ox: f32[n], oy: f64[n], acci: i32[4], accf: f32[4], kso_i: i64[8], kso_f: f64[8]) -> T`:

- 2-4 kernel-scope locals (i32 i64 f32 f64) initialised by literals before the loops;
- one or two top-level parallel loops `for i in range(a.shape[0])`, with plain top-level statements
  between them (assignments to kernel-scope locals, which are serial there);
- in a loop body: per-iteration locals (declared, assigned, `+= -= *=`), inner serial `for` loops with
  data-dependent trip counts (`range(e % 5)`), `while c < e % 4:` counting loops, `if/else` on data,
  `if cond: break`, writes `oa[i] = e` / `oa[i] += e` at the loop index, reads of inputs at computed
  indices (`a[(i + j) % a.shape[0]]`, `a[e % a.shape[0]]`) and of outputs at `[i]`, atomic accumulation
  into shared cells (`acci[c] += e`, `qd.atomic_max(accf[c], e)`), and reductions into kernel-scope
  locals (`s += e`, `s -= e`, `s *= e`, `qd.atomic_add/sub/mul/min/max(s, e)`);
- after the loops every kernel-scope local is stored to `kso_i` / `kso_f` and one is returned.

Rules that keep the serial reference valid (every valid thread order gives the same result): within one
parallel loop a kernel-scope local or a shared cell gets updates of one op family only (add/sub, mul,
min, max), a local updated in a loop is never read in that loop, and a kernel-scope local is never stored
plainly inside a parallel loop. Each float local and float output is declared *exact* or *fuzzy* up front:
exact ones only ever hold values computed the same way on every tier (no `qd.sin`, no order-dependent float
reduction) and are compared bit for bit; only exact values reach comparisons, int casts and indices.

Options (`GenOptions`): `shared_mul` (`*=` / `qd.atomic_mul` on kernel-scope locals), `shared_updates`
(reductions into kernel-scope locals at all), `racy_store` (plain `s = s + e` stores to kernel-scope
locals in a parallel loop: a race, for hunting, off by default), `bit_casts` (`qd.bit_cast` f32<->i32,
f64<->i64, f32 -> f16 -> i16 and i16 -> f16 -> f32, see `BitCast`), `loop_reductions` (kernel-scope reductions
favoured inside data-dependent inner loops, beside their atomics), `loop_shapes` (parallel loops also as
`qd.ndrange(n, 1)` and over i64 bounds straddling 2^31), `max_n`;
`specials` (issue 27: IEEE specials,
float literals inf, -inf, nan, 0.0 and -0.0 often, such inputs (and subnormals) in `x`/`y`, float `/` and `%`,
and exact floats compared with the sign of zero; exact min/max reductions add 0.0 to their values, so no
order-dependent -0 reaches them); `deep_ifs` (issue 27: one chain of up to that many nested `if`s, at most 88,
each level's condition mostly true, in some parallel loop).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

INTS = ("i32", "i64")
FLOATS = ("f32", "f64")
TYPES = INTS + FLOATS
WRAP = {"i32": "w32", "i64": "w64"}
FT = {"f32": "F32", "f64": "F64"}
NP = {"i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64}

INPUTS = {"a": "i32", "b": "i64", "x": "f32", "y": "f64"}
OUTPUTS = {"oa": "i32", "ob": "i64", "ox": "f32", "oy": "f64"}
CELLS = {"acci": "i32", "accf": "f32"}
N_CELLS = 4
BIG_BASE = 2**31 - 3  # a "big" parallel loop's i64 bounds straddle 2^31
N_KSO = 8
ARG_ORDER = list(INPUTS) + list(OUTPUTS) + list(CELLS) + ["kso_i", "kso_f"]
ARG_TYPES = {**INPUTS, **OUTPUTS, **CELLS, "kso_i": "i64", "kso_f": "f64"}

INT_LITS = [0, 1, -1, 2, 3, 5, 7, -7, 13, 100, -100, 65535, 2147483647, -2147483647]
I64_LITS = [1 << 40, -(1 << 33) + 5, 9223372036854775807]
FLOAT_LITS = [0.0, 0.5, 1.5, -0.25, 2.0, -1.0, 3.0, 0.125]
SPECIAL_LITS = [0.0, -0.0, 0.0, -0.0, float("inf"), float("-inf"), float("nan")]  # `GenOptions.specials`
SPECIAL_INPUTS = {"f32": [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-40, -3e-39],
                  "f64": [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-310, 5e-324]}
MAX_DEEP_IFS = 88  # Python allows 100 indentation levels; a chain may start inside three compound statements


@dataclass
class GenOptions:
    shared_updates: bool = True  # reductions into kernel-scope locals inside parallel loops
    shared_mul: bool = True  # `*=` / qd.atomic_mul on kernel-scope locals (atomic since the LocalAtomic fix)
    racy_store: bool = False  # plain `s = s + e` to a kernel-scope local in a parallel loop (a race)
    bit_casts: bool = True  # qd.bit_cast f32<->i32, f64<->i64 and through f16<->i16 (`BitCast`)
    loop_reductions: bool = True  # reductions into kernel-scope locals favoured inside inner for/while loops
    loop_shapes: bool = True  # parallel loops also as `qd.ndrange(n, 1)` and over i64 bounds near 2^31
    max_n: int = 300
    specials: bool = False  # IEEE specials: inf/nan/+-0 literals and inputs, float / and %, signed-zero compare
    deep_ifs: int = 0  # a chain of up to this many nested ifs (0: none)


# ------------------------------------------------------------------ expressions


class E:
    ty: str
    fuzzy: bool = False

    def qd(self) -> str:
        raise NotImplementedError

    def ref(self) -> str:
        raise NotImplementedError


@dataclass
class Lit(E):
    ty: str
    v: Any
    fuzzy: bool = False

    def qd(self) -> str:
        if self.ty in FLOATS and np.isnan(self.v):  # typed: Python's min/max would fold a bare nan its own way
            return f"qd.{self.ty}(qd.math.nan)"
        if self.ty in FLOATS and np.isinf(self.v):
            text = "qd.math.inf" if self.v > 0 else "(-qd.math.inf)"
            return text if self.ty == "f32" else f"qd.f64({text})"
        if self.ty in ("i32", "f32"):
            return f"({self.v!r})" if np.signbit(self.v) else repr(self.v)
        return f"qd.{self.ty}({self.v!r})"

    def ref(self) -> str:
        if self.ty in INTS:
            return f"({self.v!r})"
        v = f"float('{self.v!r}')" if not np.isfinite(self.v) else repr(self.v)
        return f"{FT[self.ty]}({v})"


@dataclass
class Var(E):
    ty: str
    name: str
    fuzzy: bool = False

    def qd(self) -> str:
        return self.name

    def ref(self) -> str:
        return self.name


@dataclass
class Idx:
    """An index into an array of length n: `i`, `(i + k) % n`, `(i + j) % n`, `e % n`, `0`."""

    kind: str
    k: int = 0
    j: str = ""
    e: E | None = None

    def qd(self) -> str:
        if self.kind == "i":
            return "i"
        if self.kind == "zero":
            return "0"
        if self.kind == "ik":
            return f"(i + {self.k}) % a.shape[0]"
        if self.kind == "ij":
            return f"(i + {self.j}) % a.shape[0]"
        return f"qd.i32({self.e.qd()} % a.shape[0])"

    def ref(self) -> str:
        if self.kind == "i":
            return "i"
        if self.kind == "zero":
            return "0"
        if self.kind == "ik":
            return f"(i + {self.k}) % n"
        if self.kind == "ij":
            return f"(i + {self.j}) % n"
        return f"({self.e.ref()}) % n"


@dataclass
class Load(E):
    ty: str
    arr: str
    idx: Idx
    fuzzy: bool = False

    def qd(self) -> str:
        return f"{self.arr}[{self.idx.qd()}]"

    def ref(self) -> str:
        s = f"{self.arr}[{self.idx.ref()}]"
        return f"int({s})" if self.ty in INTS else s


@dataclass
class Bin(E):
    ty: str
    op: str
    l: E
    r: E
    fuzzy: bool = False

    def qd(self) -> str:
        l, r = self.l.qd(), self.r.qd()
        if self.op in ("min", "max"):
            return f"qd.{self.op}({l}, {r})"
        if self.op in ("<<", ">>"):
            return f"({l} {self.op} ({r} & 7))"
        return f"({l} {self.op} {r})"

    def ref(self) -> str:
        l, r = self.l.ref(), self.r.ref()
        if self.ty in INTS:
            w = WRAP[self.ty]
            if self.op in ("+", "-", "*"):
                return f"{w}({l} {self.op} {r})"
            if self.op == "//":
                return f"fdiv({l}, {r}, {w})"
            if self.op == "%":
                return f"mod({l}, {r}, {w})"
            if self.op == "<<":
                return f"{w}({l} << ({r} & 7))"
            if self.op == ">>":
                return f"({l} >> ({r} & 7))"
            if self.op in ("min", "max"):
                return f"{self.op}({l}, {r})"
            return f"({l} {self.op} {r})"
        if self.op in ("min", "max"):
            return f"f{self.op}({l}, {r})"
        if self.op == "%":
            return f"ffmod({l}, {r})"
        return f"({l} {self.op} {r})"


@dataclass
class Un(E):
    ty: str
    op: str
    e: E
    fuzzy: bool = False

    def qd(self) -> str:
        e = self.e.qd()
        return {"neg": f"(-{e})", "inv": f"(~{e})", "abs": f"abs({e})", "sqrt": f"qd.sqrt(abs({e}))",
                "sin": f"qd.sin({e})"}[self.op]

    def ref(self) -> str:
        e = self.e.ref()
        if self.ty in INTS:
            w = WRAP[self.ty]
            return {"neg": f"{w}(-{e})", "inv": f"(~{e})", "abs": f"{w}(abs({e}))"}[self.op]
        ft = FT[self.ty]
        return {"neg": f"(-{e})", "abs": f"abs({e})", "sqrt": f"fsqrt(abs({e}), {ft})",
                "sin": f"fsin({e}, {ft})"}[self.op]


@dataclass
class Cast(E):
    ty: str
    e: E
    fuzzy: bool = False

    def qd(self) -> str:
        if self.ty in INTS and self.e.ty in FLOATS:
            return f"qd.{self.ty}(qd.max(qd.min({self.e.qd()}, 1000.0), -1000.0))"
        return f"qd.{self.ty}({self.e.qd()})"

    def ref(self) -> str:
        e, src = self.e.ref(), self.e.ty
        if self.ty in INTS:
            w = WRAP[self.ty]
            if src in INTS:
                return f"{w}({e})"
            ft = FT[src]
            return f"f2i(fmax(fmin({e}, {ft}(1000.0)), {ft}(-1000.0)), {w})"
        if src in INTS:
            return f"i2f({e}, {FT[self.ty]})"
        return f"{FT[self.ty]}({e})"


# `BitCast` kinds: (result type, operand type). The operand is masked or the result canonicalised so that
# every tier must agree bit for bit: NaN and zero bits are canonical (arithmetic NaN payloads and a min/max
# reduction's zero sign are not part of the op table), and ints reinterpreted as floats land on finite,
# normal values of moderate magnitude (2^-8..2^8: no denormal or overflow behaviour is tested through them).
BITCASTS = {"f16_bits": ("i32", "f32"), "bits_f16": ("f32", "i32"), "f32_bits": ("i32", "f32"),
            "bits_f32": ("f32", "i32"), "f64_bits": ("i64", "f64"), "bits_f64": ("f64", "i64")}
_F32_SIGN_MANT, _F64_SIGN_MANT = -2139095041, -9218868437227405313  # 0x807FFFFF, 0x800FFFFFFFFFFFFF


@dataclass
class BitCast(E):
    """`qd.bit_cast` of an exact operand (see `BITCASTS`); the reference reinterprets with numpy's `.view`."""

    ty: str
    kind: str
    e: E
    fuzzy: bool = False

    def qd(self) -> str:
        x = self.e.qd()
        canon = {"f16_bits": "0x7E00", "f32_bits": "0x7FC00000", "f64_bits": "qd.i64(9221120237041090560)"}
        if self.kind in canon:  # NaN -> the canonical quiet NaN's bits, zero -> +0's bits
            zero = "0" if self.ty == "i32" else "qd.i64(0)"
            to = {"f16_bits": f"qd.i32(qd.bit_cast(qd.f16({x}), qd.i16))",
                  "f32_bits": f"qd.bit_cast({x}, qd.i32)", "f64_bits": f"qd.bit_cast({x}, qd.i64)"}[self.kind]
            return f"qd.select(({x}) != ({x}), {canon[self.kind]}, qd.select(({x}) == 0.0, {zero}, {to}))"
        if self.kind == "bits_f16":  # 16 bits with the exponent's low bit cleared: a finite half
            return f"qd.f32(qd.bit_cast(qd.i16(({x}) & 0xFBFF), qd.f16))"
        if self.kind == "bits_f32":
            return f"qd.bit_cast((({x}) & ({_F32_SIGN_MANT})) | (((({x}) >> 23) & 15) + 119) << 23, qd.f32)"
        return (f"qd.bit_cast((({x}) & qd.i64({_F64_SIGN_MANT})) | (((({x}) >> 52) & 15) + 1015) << 52, "
                f"qd.f64)")

    def ref(self) -> str:
        return f"bitcast_{self.kind}({self.e.ref()})"


@dataclass
class Cmp:
    op: str
    l: E
    r: E

    def qd(self) -> str:
        return f"{self.l.qd()} {self.op} {self.r.qd()}"

    def ref(self) -> str:
        return f"{self.l.ref()} {self.op} {self.r.ref()}"


def _constant(e: E) -> bool:
    """Whether `e` reads nothing (literals and ops on them only)."""
    if isinstance(e, Lit):
        return True
    if isinstance(e, (Var, Load)):
        return False
    if isinstance(e, Bin):
        return _constant(e.l) and _constant(e.r)
    return _constant(e.e)


# ------------------------------------------------------------------ statements


class S:
    def qd(self, ind: str) -> list[str]:
        raise NotImplementedError

    def ref(self, ind: str) -> list[str]:
        raise NotImplementedError

    def blocks(self) -> list[list[S]]:
        return []


@dataclass
class Decl(S):
    """`name = qd.T(e)`: a new local (kernel-scope at top level, per-iteration in a loop)."""

    name: str
    ty: str
    e: E

    def qd(self, ind: str) -> list[str]:
        e = Cast(self.ty, self.e).qd()  # also when the types agree: qd.T(e) fixes the local's type
        return [f"{ind}{self.name} = {e}"]

    def ref(self, ind: str) -> list[str]:
        return [f"{ind}{self.name} = {Cast(self.ty, self.e).ref() if self.e.ty != self.ty else self.e.ref()}"]


@dataclass
class Assign(S):
    name: str
    e: E

    def qd(self, ind: str) -> list[str]:
        return [f"{ind}{self.name} = {self.e.qd()}"]

    def ref(self, ind: str) -> list[str]:
        return [f"{ind}{self.name} = {self.e.ref()}"]


# op family of an update: which ops a loop may mix on one target (they commute)
FAMILY = {"+=": "add", "-=": "add", "atomic_add": "add", "atomic_sub": "add", "*=": "mul", "atomic_mul": "mul",
          "atomic_min": "min", "atomic_max": "max"}


def _update_ref(target: str, load: str, ty: str, op: str, e: str) -> str:
    """The reference of `target op= e` (`load` reads the target's current value)."""
    sym = {"+=": "+", "-=": "-", "*=": "*", "atomic_add": "+", "atomic_sub": "-", "atomic_mul": "*"}.get(op)
    if sym is not None and ty not in INTS and sym != "*":
        val = f"facc({load}, {e}, {sym!r})"  # a float add/sub reduction: its operands' magnitude is recorded
    elif sym is not None:
        val = f"{WRAP[ty]}({load} {sym} {e})" if ty in INTS else f"({load} {sym} {e})"
    else:
        fn = op[len("atomic_"):]
        val = f"{fn}({load}, {e})" if ty in INTS else f"f{fn}({load}, {e})"
    return f"{target} = {val}"


@dataclass
class Update(S):
    """`t op= e` or `qd.atomic_op(t, e)` on a local or an array element `arr[idx]`."""

    target: str  # a local name, or `arr[idx]` (qd text; the reference text is `ref_target`)
    ref_target: str
    ty: str
    op: str
    e: E

    def qd(self, ind: str) -> list[str]:
        if self.op.startswith("atomic_"):
            return [f"{ind}qd.{self.op}({self.target}, {self.e.qd()})"]
        return [f"{ind}{self.target} {self.op} {self.e.qd()}"]

    def ref(self, ind: str) -> list[str]:
        load = f"int({self.ref_target})" if ("[" in self.ref_target and self.ty in INTS) else self.ref_target
        return [ind + _update_ref(self.ref_target, load, self.ty, self.op, self.e.ref())]


@dataclass
class Store(S):
    arr: str
    idx: str
    e: E

    def qd(self, ind: str) -> list[str]:
        return [f"{ind}{self.arr}[{self.idx}] = {self.e.qd()}"]

    def ref(self, ind: str) -> list[str]:
        return [f"{ind}{self.arr}[{self.idx}] = {self.e.ref()}"]


@dataclass
class If(S):
    cond: Cmp
    then: list[S]
    els: list[S]

    def qd(self, ind: str) -> list[str]:
        out = [f"{ind}if {self.cond.qd()}:"] + _body(self.then, ind + "    ", "qd")
        if self.els:
            out += [f"{ind}else:"] + _body(self.els, ind + "    ", "qd")
        return out

    def ref(self, ind: str) -> list[str]:
        out = [f"{ind}if {self.cond.ref()}:"] + _body(self.then, ind + "    ", "ref")
        if self.els:
            out += [f"{ind}else:"] + _body(self.els, ind + "    ", "ref")
        return out

    def blocks(self) -> list[list[S]]:
        return [self.then, self.els]


@dataclass
class Break(S):
    cond: Cmp

    def qd(self, ind: str) -> list[str]:
        return [f"{ind}if {self.cond.qd()}:", f"{ind}    break"]

    def ref(self, ind: str) -> list[str]:
        return [f"{ind}if {self.cond.ref()}:", f"{ind}    break"]


@dataclass
class For(S):
    """An inner serial loop `for j in range(count)`; `parallel` marks a top-level loop over `a.shape[0]`."""

    var: str
    count: E | None
    body: list[S]
    parallel: bool = False
    shape: str = "range"  # of a parallel loop: "range", "ndrange" (`qd.ndrange(n, 1)`), "big" (i64 near 2^31)

    def qd(self, ind: str) -> list[str]:
        if not self.parallel:
            return [f"{ind}for {self.var} in range({self.count.qd()}):"] + _body(self.body, ind + "    ", "qd")
        head = {"range": ["for i in range(a.shape[0]):"],
                "ndrange": ["for i, i_one in qd.ndrange(a.shape[0], 1):"],
                "big": [f"for i_big in range(qd.i64({BIG_BASE}), qd.i64({BIG_BASE}) + a.shape[0]):",
                        f"    i = qd.i32(i_big - {BIG_BASE})"]}[self.shape]
        return [ind + h for h in head] + _body(self.body, ind + "    ", "qd")

    def ref(self, ind: str) -> list[str]:
        rng = "n" if self.parallel else self.count.ref()
        return [f"{ind}for {self.var} in range({rng}):"] + _body(self.body, ind + "    ", "ref")

    def blocks(self) -> list[list[S]]:
        return [self.body]


@dataclass
class While(S):
    """`c = 0; while c < bound: body; c += 1` (bound is `e % 4`, so at most 3 iterations)."""

    var: str
    bound: E
    body: list[S]

    def _lines(self, ind: str, how: str) -> list[str]:
        b = getattr(self.bound, how)()
        c = self.var
        return ([f"{ind}{c} = 0", f"{ind}while {c} < {b}:"] + _body(self.body, ind + "    ", how)
                + [f"{ind}    {c} += 1"])

    def qd(self, ind: str) -> list[str]:
        return self._lines(ind, "qd")

    def ref(self, ind: str) -> list[str]:
        return self._lines(ind, "ref")

    def blocks(self) -> list[list[S]]:
        return [self.body]


@dataclass
class Return(S):
    name: str

    def qd(self, ind: str) -> list[str]:
        return [f"{ind}return {self.name}"]

    def ref(self, ind: str) -> list[str]:
        return [f"{ind}return {self.name}"]


def _body(stmts: list[S], ind: str, how: str) -> list[str]:
    out: list[str] = []
    for s in stmts:
        out += getattr(s, how)(ind)
    return out or [f"{ind}pass"]


# ------------------------------------------------------------------ programs


@dataclass
class Program:
    seed: int
    n: int
    ret_ty: str
    body: list[S]
    fuzzy: dict[str, np.ndarray]  # per output array: which elements are compared with a tolerance
    ret_fuzzy: bool
    options: GenOptions = field(default_factory=GenOptions)

    def qd_source(self, name: str = "kern") -> str:
        params = ", ".join(f"{a}: qd.types.ndarray(qd.{ARG_TYPES[a]}, 1)" for a in ARG_ORDER)
        lines = ["import qd", "", "", "@qd.kernel", f"def {name}({params}) -> qd.{self.ret_ty}:"]
        return "\n".join(lines + _body(self.body, "    ", "qd")) + "\n"

    def ref_source(self) -> str:
        lines = [f"def ref({', '.join(ARG_ORDER)}):", "    n = a.shape[0]"]
        return "\n".join(lines + _body(self.body, "    ", "ref")) + "\n"

    def inputs(self) -> dict[str, np.ndarray]:
        """The launch's arrays (inputs drawn from the seed; outputs zeroed)."""
        rng = np.random.default_rng(self.seed)
        n = self.n
        arrs: dict[str, np.ndarray] = {}
        for name, ty in INPUTS.items():
            if ty in INTS:
                info = np.iinfo(NP[ty])
                v = rng.integers(-20, 21, n)
                wide = rng.random(n) < 0.15
                v = np.where(wide, rng.integers(info.min, info.max, n, dtype=NP[ty], endpoint=True), v)
                arrs[name] = v.astype(NP[ty])
                if n >= 4 and rng.random() < 0.5:
                    arrs[name][rng.integers(0, n, 3)] = [info.min, info.max, 0]
            else:
                v = rng.integers(-32, 33, n) / 16.0
                frac = rng.random(n) < 0.3
                v = np.where(frac, rng.standard_normal(n), v)
                arrs[name] = v.astype(NP[ty])
        if self.options.specials:  # drawn after the others: the default inputs of a seed stay as they were
            for name, ty in INPUTS.items():
                if ty in FLOATS:
                    where = rng.random(n) < 0.25
                    arrs[name][where] = rng.choice(np.array(SPECIAL_INPUTS[ty], NP[ty]), int(where.sum()))
        for name, ty in OUTPUTS.items():
            arrs[name] = np.zeros(n, NP[ty])
        for name, ty in CELLS.items():
            arrs[name] = np.zeros(N_CELLS, NP[ty])
        arrs["kso_i"] = np.zeros(N_KSO, np.int64)
        arrs["kso_f"] = np.zeros(N_KSO, np.float64)
        return arrs


@dataclass
class _Local:
    ty: str
    fuzzy: bool  # may hold fuzzy values (declared so up front; only floats)
    writable: bool = True


class Generator:
    """`Generator(seed, options).program()`: one random program, a function of the seed alone."""

    def __init__(self, seed: int, options: GenOptions | None = None) -> None:
        self.seed = seed
        self.opt = options or GenOptions()
        self.r = random.Random(seed)
        self.names = 0
        self.ks: dict[str, _Local] = {}  # kernel-scope locals
        self.scopes: list[dict[str, _Local]] = []  # per-iteration locals, innermost last
        self.loopvars: list[str] = []  # inner loop indices (i32)
        self.in_par = False
        self.reduced: dict[str, str] = {}  # kernel-scope local -> op family, in the current parallel loop
        self.cell_family: dict[tuple[str, int], str] = {}
        self.out_fuzzy = {name: (ty in FLOATS and self.r.random() < 0.5) for name, ty in OUTPUTS.items()}
        self.depth = 0  # statement nesting inside a parallel loop
        self.inner = 0  # enclosing inner loops (for `break`)
        self.budget = 0
        self.chained = False  # the program has its deep if chain (`GenOptions.deep_ifs`)

    def fresh(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    # ---------------------------------------------------------- expressions
    def readable(self, ty: str, exact: bool) -> list[Var]:
        out = []
        for name, loc in self.ks.items():
            if loc.ty == ty and name not in self.reduced and not (exact and loc.fuzzy):
                out.append(Var(ty, name, loc.fuzzy))
        for scope in self.scopes:
            for name, loc in scope.items():
                if loc.ty == ty and not (exact and loc.fuzzy):
                    out.append(Var(ty, name, loc.fuzzy))
        if ty == "i32":
            out += [Var("i32", v) for v in self.loopvars]
            if self.in_par:
                out.append(Var("i32", "i"))
        return out

    def idx(self) -> Idx:
        if not self.in_par:
            return Idx("zero")
        k = self.r.random()
        if k < 0.5:
            return Idx("i")
        if k < 0.7:
            return Idx("ik", k=self.r.randint(1, 5))
        if k < 0.85 and self.loopvars:
            return Idx("ij", j=self.r.choice(self.loopvars))
        return Idx("e", e=self.expr("i32", 1, exact=True))

    def leaf(self, ty: str, exact: bool) -> E:
        r = self.r.random()
        vars_ = self.readable(ty, exact)
        if r < 0.35 and vars_:
            return self.r.choice(vars_)
        if r < 0.7:
            arr = [k for k, t in INPUTS.items() if t == ty][0]
            return Load(ty, arr, self.idx())
        if r < 0.8 and self.in_par:
            arr = [k for k, t in OUTPUTS.items() if t == ty][0]
            if not (exact and self.out_fuzzy[arr]):
                return Load(ty, arr, Idx("i"), self.out_fuzzy[arr])
        if ty in INTS:
            lits = INT_LITS + (I64_LITS if ty == "i64" else [])
            return Lit(ty, self.r.choice(lits))
        if self.opt.specials and self.r.random() < 0.6:
            return Lit(ty, self.r.choice(SPECIAL_LITS))
        return Lit(ty, self.r.choice(FLOAT_LITS))

    def expr(self, ty: str, depth: int, exact: bool = False) -> E:
        e = self._expr(ty, depth, exact)
        if not isinstance(e, (Lit, Var, Load)) and _constant(e):
            # an op on Python literals only is folded by Python before qd sees it (no wrap, no f32):
            # not qd's semantics, so never generate one
            return self.leaf(ty, exact) if not self.readable(ty, exact) else self.r.choice(self.readable(ty, exact))
        return e

    def _expr(self, ty: str, depth: int, exact: bool = False) -> E:
        if depth <= 0 or self.r.random() < 0.25:
            return self.leaf(ty, exact)
        k = self.r.random()
        if k < 0.6:
            if ty in INTS:
                op = self.r.choice(["+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "min", "max", "+", "*"])
            else:
                op = self.r.choice(["+", "-", "*", "min", "max", "+", "*"] + (["/", "%", "*"] if self.opt.specials else []))
            l, r = self.expr(ty, depth - 1, exact), self.expr(ty, depth - 1, exact)
            return Bin(ty, op, l, r, l.fuzzy or r.fuzzy)
        if k < 0.8:
            if ty in INTS:
                op = self.r.choice(["neg", "inv", "abs"])
            else:
                op = self.r.choice(["neg", "abs", "sqrt"] + ([] if exact else ["sin", "sin"]))
            e = self.expr(ty, depth - 1, exact)
            return Un(ty, op, e, e.fuzzy or op == "sin")
        if self.opt.bit_casts and k > 0.95:
            kind = self.r.choice([kd for kd, (res, _) in BITCASTS.items() if res == ty])
            return BitCast(ty, kind, self.expr(BITCASTS[kind][1], depth - 1, exact=True))
        src = self.r.choice([t for t in TYPES if t != ty])
        e = self.expr(src, depth - 1, exact or ty in INTS)  # float -> int casts only of exact values
        return Cast(ty, e, e.fuzzy)

    def cond(self) -> Cmp:
        ty = self.r.choice(TYPES)
        if ty in INTS and self.r.random() < 0.4:
            return Cmp("==", Bin(ty, "%", self.expr(ty, 2, True), Lit(ty, self.r.choice([2, 3, 4]))), Lit(ty, 0))
        return Cmp(self.r.choice(["<", "<=", ">", "==", "!="]), self.expr(ty, 2, True), self.expr(ty, 1, True))

    # ---------------------------------------------------------- statements
    def block(self, n: int) -> list[S]:
        self.scopes.append({})
        out = [s for s in (self.stmt() for _ in range(n)) if s is not None]
        self.scopes.pop()
        return out

    def stmt(self) -> S | None:
        self.budget -= 1
        r = self.r.random()
        compound = self.depth < 3 and self.budget > 0
        if self.opt.loop_reductions and self.inner and self.reduced and r < 0.1:
            return self.shared_update()  # a reduction beside the atomics of a data-dependent loop
        if compound and self.opt.deep_ifs and not self.chained and self.in_par and self.r.random() < 0.3:
            self.chained = True
            return self.deep_if_chain(self.r.randint(1, min(self.opt.deep_ifs, MAX_DEEP_IFS)))
        if compound and r < 0.12:
            return self.if_stmt()
        if compound and r < 0.22:
            return self.for_stmt()
        if compound and r < 0.28:
            return self.while_stmt()
        if self.inner and r < 0.32:
            return Break(self.cond())
        if r < 0.45:
            return self.decl()
        if r < 0.58:
            return self.local_update()
        if r < 0.72:
            return self.store()
        if r < 0.82:
            return self.cell_update()
        return self.shared_update() or self.store()

    def decl(self) -> S:
        ty = self.r.choice(TYPES)
        fuzzy = ty in FLOATS and self.r.random() < 0.5
        e = self.expr(self.r.choice([ty, ty, self.r.choice(TYPES)]), 3, exact=not fuzzy)
        name = self.fresh("t")
        self.scopes[-1][name] = _Local(ty, fuzzy)
        return Decl(name, ty, e)

    def local_update(self) -> S | None:
        cands = [(n, loc) for sc in self.scopes for n, loc in sc.items() if loc.writable]
        if not cands:
            return self.decl()
        name, loc = self.r.choice(cands)
        e = self.expr(loc.ty, 2, exact=not loc.fuzzy)
        op = self.r.choice(["=", "+=", "-=", "*=", "atomic_add", "atomic_max", "atomic_min"])
        if op == "=":
            return Assign(name, e)
        return Update(name, name, loc.ty, op, e)

    def store(self) -> S:
        arr = self.r.choice(list(OUTPUTS))
        ty = OUTPUTS[arr]
        e = self.expr(ty, 3, exact=not self.out_fuzzy[arr])
        if self.r.random() < 0.3:
            op = self.r.choice(["+=", "-=", "atomic_add", "atomic_max"])
            return Update(f"{arr}[i]", f"{arr}[i]", ty, op, e)
        return Store(arr, "i", e)

    def cell_update(self) -> S:
        arr = self.r.choice(list(CELLS))
        ty = CELLS[arr]
        c = self.r.randrange(N_CELLS)
        fam = self.cell_family.setdefault((arr, c), self.r.choice(["add", "add", "min", "max"]))
        op = self.r.choice([o for o, f in FAMILY.items() if f == fam and o != "*=" and o != "atomic_mul"])
        e = self.expr(ty, 2, exact=False)
        return Update(f"{arr}[{c}]", f"{arr}[{c}]", ty, op, e)

    def shared_update(self) -> S | None:
        if not self.reduced:
            return None
        name = self.r.choice(list(self.reduced))
        loc, fam = self.ks[name], self.reduced[name]
        if fam == "racy":
            e = self.expr(loc.ty, 2, exact=not loc.fuzzy)
            return Assign(name, Bin(loc.ty, "+", Var(loc.ty, name, loc.fuzzy), e, loc.fuzzy))
        op = self.r.choice([o for o, f in FAMILY.items() if f == fam])
        e = self.expr(loc.ty, 2, exact=not loc.fuzzy)
        if fam == "mul" and loc.ty in FLOATS:  # keep float products in range: factors in [0.5, 1.5]
            e = Bin(loc.ty, "max", Bin(loc.ty, "min", e, Lit(loc.ty, 1.5), e.fuzzy), Lit(loc.ty, 0.5), e.fuzzy)
        if self.opt.specials and fam in ("min", "max") and loc.ty in FLOATS:  # -0 + 0 = +0: no order-dependent zero
            e = Bin(loc.ty, "+", e, Lit(loc.ty, 0.0), e.fuzzy)
        return Update(name, name, loc.ty, op, e)

    def deep_if_chain(self, levels: int) -> S:
        """`levels` nested ifs (`GenOptions.deep_ifs`), each with simple statements around the next level and
        sometimes an else branch; a level's condition holds for ~99% of values (`e % 97 != k`), now and then a
        random one, so the deep levels run."""
        if self.r.random() < 0.9:
            c = Cmp("!=", Bin("i32", "%", self.expr("i32", 1, True), Lit("i32", 97)), Lit("i32", self.r.randint(0, 96)))
        else:
            c = self.cond()
        budget, self.budget = self.budget, -(10**9)  # simple statements only: no compound statement inside
        self.scopes.append({})
        then = [s for s in (self.stmt() for _ in range(self.r.randint(0, 2))) if s is not None]
        if levels > 1:
            then.append(self.deep_if_chain(levels - 1))
        then += [s for s in (self.stmt() for _ in range(self.r.randint(0, 1))) if s is not None]
        self.scopes.pop()
        els = self.block(1) if self.r.random() < 0.25 else []
        self.budget = budget
        return If(c, then, els)

    def if_stmt(self) -> S:
        self.depth += 1
        c = self.cond()
        then = self.block(self.r.randint(1, 3))
        els = self.block(self.r.randint(0, 2))
        self.depth -= 1
        return If(c, then, els)

    def for_stmt(self) -> S:
        self.depth += 1
        count = Bin("i32", "%", self.expr("i32", 2, True), Lit("i32", 5))
        var = self.fresh("j")
        self.loopvars.append(var)
        self.inner += 1
        body = self.block(self.r.randint(1, 4))
        self.inner -= 1
        self.loopvars.pop()
        self.depth -= 1
        return For(var, count, body)

    def while_stmt(self) -> S:
        self.depth += 1
        bound = Bin("i32", "%", self.expr("i32", 2, True), Lit("i32", 4))
        var = self.fresh("c")
        self.scopes.append({var: _Local("i32", False, writable=False)})
        self.inner += 1
        body = self.block(self.r.randint(1, 3))
        self.inner -= 1
        self.scopes.pop()
        self.depth -= 1
        return While(var, bound, body)

    def par_loop(self) -> S:
        self.in_par = True
        self.reduced = {}
        self.cell_family = {}
        if self.opt.shared_updates:
            for name, loc in self.ks.items():
                if self.r.random() < 0.6:
                    fams = ["add", "add", "min", "max"] + (["mul"] if self.opt.shared_mul else [])
                    if loc.ty in FLOATS and not loc.fuzzy:
                        fams = ["min", "max"]
                    self.reduced[name] = self.r.choice(fams)
        if self.opt.racy_store and self.ks and self.r.random() < 0.5:
            self.reduced[self.r.choice(list(self.ks))] = "racy"
        self.budget = self.r.randint(4, 12)
        shape = self.r.choice(["range", "range", "ndrange", "big"]) if self.opt.loop_shapes else "range"
        body = self.block(self.r.randint(2, 7))
        if self.reduced and not any(isinstance(s, Update) and s.target in self.reduced for s in body):
            s = self.shared_update()  # make sure the loop reduces into a kernel-scope local
            if s is not None:
                body.append(s)
        self.in_par = False
        self.reduced = {}
        return For("i", None, body, parallel=True, shape=shape)

    def program(self) -> Program:
        r = self.r
        n = r.choice([1, 2, 5, 16, 33, 64, 100, self.opt.max_n])
        body: list[S] = []
        for _ in range(r.randint(2, 4)):
            ty = r.choice(TYPES)
            name = self.fresh("s")
            self.ks[name] = _Local(ty, ty in FLOATS and r.random() < 0.6)
            lits = INT_LITS[:11] if ty in INTS else FLOAT_LITS
            v = r.choice(lits) if ty in INTS else r.choice(lits[1:])
            body.append(Decl(name, ty, Lit(ty, v)))
        self.scopes.append({})  # top-level: kernel-scope locals are in self.ks
        for k in range(r.randint(1, 2)):
            if k:
                for _ in range(r.randint(0, 2)):  # serial statements between the loops
                    name = r.choice(list(self.ks))
                    loc = self.ks[name]
                    body.append(Assign(name, self.expr(loc.ty, 2, exact=not loc.fuzzy)))
            body.append(self.par_loop())
        fuzzy = {name: np.zeros(n, bool) for name in INPUTS}  # inputs are compared too: nothing writes them
        fuzzy.update({name: np.full(n, self.out_fuzzy[name]) for name in OUTPUTS})
        fuzzy["acci"] = np.zeros(N_CELLS, bool)
        fuzzy["accf"] = np.ones(N_CELLS, bool)
        fuzzy["kso_i"] = np.zeros(N_KSO, bool)
        fuzzy["kso_f"] = np.zeros(N_KSO, bool)
        for k, (name, loc) in enumerate(self.ks.items()):
            arr = "kso_i" if loc.ty in INTS else "kso_f"
            body.append(Store(arr, str(k), Cast("i64" if loc.ty in INTS else "f64", Var(loc.ty, name, loc.fuzzy))))
            fuzzy[arr][k] = loc.fuzzy
        ret = r.choice(list(self.ks))
        body.append(Return(ret))
        return Program(self.seed, n, self.ks[ret].ty, body, fuzzy, self.ks[ret].fuzzy, self.opt)


def generate(seed: int, options: GenOptions | None = None) -> Program:
    return Generator(seed, options).program()
