"""The LLVM code generator (`qd/jit/llvm.py`): modules verify, and JIT-run through MCJIT + ctypes with a
hand-built `Ctx`, they give the interpreter's results — bit for bit for every op and cast of the op
table (transcendentals call the same libm), and for prints, checks, returns and `qd.random`.

This file carries its own small native launcher (`_run_native`), independent of the runtime's, so
the generator is tested on its own.
"""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

import qd
from qd import _launch as _clib
from qd import ir
from qd.base import abi, config
from qd.frontend import args as _args
from qd.ops import INFO, Op
from qd.runtime import launch as _launch
from qd.types import dtypes as T

llvm = pytest.importorskip("llvmlite.binding")

from qd.jit.llvm import build_module
from qd.jit.targets import CpuTarget

_M = 0xFFFFFFFFFFFFFFFF
N = 97
RNG = np.random.default_rng(77)


class Ctx(ctypes.Structure):
    """The native launch context, from the launch ABI's layout (every field 8 bytes)."""
    _fields_ = [(n, ctypes.c_void_p if ptr else ctypes.c_uint64 if c.startswith("u") else ctypes.c_int64)
                for (n, c), ptr in zip(abi.CTX_LAYOUT, abi.CTX_POINTERS, strict=True)]


_TARGET: CpuTarget | None = None


def _target() -> CpuTarget:
    global _TARGET
    if _TARGET is None:
        _TARGET = CpuTarget()
    return _TARGET


def _compile(k: ir.KernelIR, fast_math: bool):
    built = build_module(k, _target(), fast_math)
    mod = llvm.parse_assembly(str(built.module))
    mod.verify()
    _target().optimize(mod)
    ee = llvm.create_mcjit_compiler(mod, _target().new_target_machine())  # the engine owns it
    ee.finalize_object()
    return built, ee


_SERIAL = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(Ctx))
_PROLOGUE = ctypes.CFUNCTYPE(None, ctypes.POINTER(Ctx), ctypes.POINTER(ctypes.c_int64))
_BODY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.POINTER(Ctx), ctypes.c_int64, ctypes.c_int64)


def _run_native(ck, bindings, args, fast_math: bool = False, chunks: int = 3):
    """Runs offloaded `ck.ir` natively; returns (rets words, status, print records, prints table)."""
    k = ck.ir
    built, ee = _compile(k, fast_math)
    arrays = _launch._arrays(ck, bindings, args)
    addrs = np.array([a.__array_interface__["data"][0] for a in arrays] or [0], dtype=np.uint64)
    shapes = np.zeros(max(1, len(arrays)) * abi.MAX_NDIM, dtype=np.int64)
    for j, a in enumerate(arrays):
        shapes[j * abi.MAX_NDIM: j * abi.MAX_NDIM + a.ndim] = a.shape
    argbits = np.array([abi.register_bits(a.dtype, args[i]) if a.kind == "scalar" else 0
                        for i, a in enumerate(k.args)] or [0], dtype=np.uint64)
    status = np.zeros(abi.STATUS_WORDS, np.int64)
    printbuf = np.zeros(1 << 12, np.int64)
    printlen = np.zeros(1, np.int64)
    rets = np.zeros(max(1, len(k.rets)), np.uint64)
    ctx = Ctx(addrs.ctypes.data, shapes.ctypes.data, None, rets.ctypes.data, status.ctypes.data,
              printbuf.ctypes.data, printlen.ctypes.data, len(printbuf), 0, 0, 0, 0, argbits.ctypes.data)
    seed = int(config.current().random_seed) & _M
    for n, t in enumerate(built.tasks):
        ctx.rng_base = abi.rng_key(seed, 0, n, 0)
        if t.kind == "serial":
            rc = _SERIAL(ee.get_function_address(t.fn))(ctypes.byref(ctx))
        else:
            be = (ctypes.c_int64 * 2)()
            _PROLOGUE(ee.get_function_address(t.prologue))(ctypes.byref(ctx), be)
            lo, hi = be[0], be[1]
            body = _BODY(ee.get_function_address(t.fn))
            cuts = np.linspace(lo, hi, chunks + 1).astype(np.int64) if hi > lo else [lo, lo]
            rc = 0
            for a, b in itertools.pairwise(cuts):
                rc = body(ctypes.byref(ctx), int(a), int(b))
                if rc:
                    break
        if rc:
            break
    del arrays
    return rets, status, printbuf[:printlen[0]].copy(), built


def _interp(ck, bindings, args):
    _clib.reset_launch_ids()
    return _launch.launch(ck, bindings, args)


@pytest.fixture(autouse=True)
def _program():
    qd.init(arch=qd.interp, log_level="warn", random_seed=5)
    yield
    qd.reset()


# ------------------------------------------------------------------ every op and cast, vs the interpreter

def _op_kernel(op: Op, in_dts: list[T.DataType], out_dt: T.DataType) -> ir.KernelIR:
    bufs = tuple(ir.BufferDecl("ndarray", d, ndim=1, arg=j, name=f"a{j}")
                 for j, d in enumerate(in_dts + [out_dt]))
    args = tuple(ir.ArgDecl(f"a{j}", "ndarray", b.dtype, j) for j, b in enumerate(bufs))
    var = ir.LoopVar(T.i32, "i")
    stmts: list[ir.Stmt] = []
    vals = []
    for j, d in enumerate(in_dts):
        p = ir.GlobalPtr(buffer=j, indices=(var,), dtype=d)
        ld = ir.GlobalLoad(ptr=p, dtype=d)
        stmts += [p, ld]
        vals.append(ld)
    res = ir.OpStmt(op=op, args=tuple(vals), dtype=out_dt)
    po = ir.GlobalPtr(buffer=len(in_dts), indices=(var,), dtype=out_dt)
    stmts += [res, po, ir.GlobalStore(ptr=po, value=res)]
    zero, end = ir.Const(dtype=T.i32, value=0), ir.ExternalShape(buffer=0, axis=0)
    loop = ir.RangeFor(var=var, begin=zero, end=end, body=ir.Block(tuple(stmts)), parallel=True)
    return ir.KernelIR(f"op_{op.value}", args, bufs, (), (), ir.Block((zero, end, loop)))


def _values(dt: T.DataType, op: Op | None = None, slot: int = 0) -> np.ndarray:
    if dt is T.u1:
        return RNG.integers(0, 2, N).astype(np.bool_)
    if dt.is_int:
        info = np.iinfo(dt.np_dtype)
        if op in (Op.SHL, Op.SHR, Op.BIT_SHR) and slot == 1:
            return RNG.integers(0, 2 * dt.bits, N).astype(dt.np_dtype)
        if op is Op.POW:
            return RNG.integers(-3 if dt.is_signed else 0, 7, N).astype(dt.np_dtype)
        edge = [0, 1, info.max, info.min, info.max - 1] + ([-1, -2, -7] if dt.is_signed else [7, 2])
        rest = RNG.integers(info.min, info.max, N - len(edge), dtype=dt.np_dtype, endpoint=True)
        return np.concatenate([np.array(edge, dtype=dt.np_dtype), rest])
    v = RNG.standard_normal(N) * np.exp(RNG.uniform(-3, 3, N))
    v[:8] = [0.0, -0.0, 1.0, -1.0, np.nan, np.inf, -0.0, 0.0] if slot != 1 else \
        [-0.0, 0.0, np.nan, 1.0, -1.0, -np.inf, 0.0, -0.0]  # mixed zeros and NaNs in binary ops
    if op in (Op.ASIN, Op.ACOS):
        v[8:] = RNG.uniform(-1, 1, N - 8)
    return v.astype(dt.np_dtype)


def _compare_op(op: Op, in_dts: list[T.DataType], out_dt: T.DataType, xs: list[np.ndarray]) -> None:
    k = _op_kernel(op, in_dts, out_dt)
    ck = _launch.compile_kernel(k)
    want = np.zeros(N, out_dt.np_dtype)
    _interp(ck, [None] * len(ck.ir.buffers), [*xs, want])
    for fast in (False, True):
        got = np.zeros(N, out_dt.np_dtype)
        _run_native(ck, [None] * len(ck.ir.buffers), [*xs, got], fast_math=fast)
        _assert_same_bits(got, want, f"{op.value} {in_dts} -> {out_dt} fast_math={fast}")


def _assert_same_bits(got: np.ndarray, want: np.ndarray, msg: str) -> None:
    """Equal bits, the sign of zero included; any NaN equals any NaN (sign and payload of a NaN are
    no part of the contract: libm's compat wrappers and soft-float conversions differ there)."""
    if got.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=msg)
        got, want = got[~nan].view(f"u{got.itemsize}"), want[~nan].view(f"u{want.itemsize}")
    np.testing.assert_array_equal(got, want, err_msg=msg)


def _op_dtypes(op: Op) -> list[T.DataType]:
    rule = INFO[op].rule
    if rule == "float":
        return list(T.FLOATS)
    if rule == "int":
        return list(T.INTS)  # u1 takes no int-rule op (the interpreter's narrow CLZ misreads u1 constants)
    return [d for d in T.ALL if d is not T.u1 or rule == "cmp"]


OP_CASES = [(op, dt) for op in Op if op not in (Op.CAST, Op.BIT_CAST, Op.SELECT) for dt in _op_dtypes(op)]


@pytest.mark.parametrize("op,dt", OP_CASES, ids=[f"{o.value}-{d.name}" for o, d in OP_CASES])
def test_op_bit_exact_with_interpreter(op: Op, dt: T.DataType) -> None:
    xs = [_values(dt, op, j) for j in range(INFO[op].arity)]
    _compare_op(op, [dt] * len(xs), T.u1 if INFO[op].rule == "cmp" else dt, xs)


@pytest.mark.parametrize("dt", [T.i8, T.u16, T.f16, T.f32, T.f64], ids=lambda d: d.name)
def test_select_bit_exact(dt: T.DataType) -> None:
    xs = [_values(T.u1), _values(dt), _values(dt)]
    _compare_op(Op.SELECT, [T.u1, dt, dt], dt, xs)


CAST_CASES = [(s, d) for s in T.ALL for d in T.ALL if s is not d]


@pytest.mark.parametrize("src,dst", CAST_CASES, ids=[f"{s.name}-{d.name}" for s, d in CAST_CASES])
def test_cast_bit_exact(src: T.DataType, dst: T.DataType) -> None:
    a = _values(src)
    if src.is_float and dst.is_int:  # out-of-range float -> int is undefined
        lo = 0 if not dst.is_signed else -100
        a = np.nan_to_num(np.clip(a.astype(np.float64) * 10, lo, 100)).astype(src.np_dtype)
    _compare_op(Op.CAST, [src], dst, [a])


def test_f64_to_f16_rounds_once() -> None:
    # values just beside f16 rounding ties, where double -> float -> half would round twice
    h = np.arange(0x0400, 0x7C00, 97, dtype=np.uint16).view(np.float16).astype(np.float64)
    ulp = np.spacing(h.astype(np.float16)).astype(np.float64)
    a = np.concatenate([h + ulp / 2 + 1e-12 * h, h + ulp / 2, h + ulp / 2 - 1e-12 * h, -h - ulp / 2,
                        [1e-9, 6e-8, 3e-8, 70000.0, 65519.99, 65520.0, np.nan, -np.inf]])
    _compare_op(Op.CAST, [T.f64], T.f16, [a[:N]])
    _compare_op(Op.CAST, [T.f64], T.f16, [a[-N:]])


@pytest.mark.parametrize("pair", [(T.f32, T.i32), (T.i32, T.f32), (T.f64, T.u64), (T.u16, T.i16), (T.f16, T.i16),
                                  (T.u16, T.f16)],
                         ids=lambda p: f"{p[0].name}-{p[1].name}")
def test_bit_cast_bit_exact(pair) -> None:
    src, dst = pair
    _compare_op(Op.BIT_CAST, [src], dst, [_values(src)])


ATOMIC_CASES = [(op, dt) for dt in (T.i8, T.u16, T.i32, T.u64, T.f16, T.f32, T.f64)
                for op in (Op.ADD, Op.SUB, Op.MIN, Op.MAX) + ((Op.BIT_XOR,) if dt.is_int else ())]


@pytest.mark.parametrize("op,dt", ATOMIC_CASES, ids=[f"{o.value}-{d.name}" for o, d in ATOMIC_CASES])
def test_atomics_return_old_values_like_the_interpreter(op: Op, dt: T.DataType) -> None:
    """`out[i] = atomic_op(acc[0], x[i])` in index order (one chunk at a time, as the interpreter runs
    fewer than 4096 indices): every old value and the final cell bit for bit."""
    bufs = tuple(ir.BufferDecl("ndarray", dt, ndim=1, arg=j, name=n) for j, n in enumerate(("x", "acc", "out")))
    args = tuple(ir.ArgDecl(b.name, "ndarray", dt, j) for j, b in enumerate(bufs))
    var = ir.LoopVar(T.i32, "i")
    c0 = ir.Const(dtype=T.i32, value=0)
    px = ir.GlobalPtr(buffer=0, indices=(var,), dtype=dt)
    lx = ir.GlobalLoad(ptr=px, dtype=dt)
    pa = ir.GlobalPtr(buffer=1, indices=(c0,), dtype=dt)
    old = ir.AtomicRMW(op=op, ptr=pa, value=lx, dtype=dt)
    po = ir.GlobalPtr(buffer=2, indices=(var,), dtype=dt)
    body = ir.Block((c0, px, lx, pa, old, po, ir.GlobalStore(ptr=po, value=old)))
    zero, end = ir.Const(dtype=T.i32, value=0), ir.ExternalShape(buffer=0, axis=0)
    loop = ir.RangeFor(var=var, begin=zero, end=end, body=body, parallel=True)
    ck = _launch.compile_kernel(ir.KernelIR("atomics", args, bufs, (), (), ir.Block((zero, end, loop))))
    x = _values(dt) if dt.is_float else (_values(dt) // 3).astype(dt.np_dtype)
    acc0 = np.array([x[5]], dt.np_dtype)
    acc, out = acc0.copy(), np.zeros(N, dt.np_dtype)
    _interp(ck, [None] * 3, [x, acc, out])
    for fast in (False, True):
        acc2, out2 = acc0.copy(), np.zeros(N, dt.np_dtype)
        _run_native(ck, [None] * 3, [x, acc2, out2], fast_math=fast)
        _assert_same_bits(out2, out, f"{op} {dt}")
        _assert_same_bits(acc2, acc, f"{op} {dt}")


# ------------------------------------------------------------------ kernels from the frontend

def _instance(kern, *call_args):
    """Runs `kern` on the interpreter; returns its result and (ck, bindings, launch args) to rerun."""
    _clib.reset_launch_ids()
    res = kern(*call_args)
    (ck, bindings), = kern._instances.values()
    _, launch_args, _ = _args.convert(kern.signature, kern.signature.bind(call_args, {}))
    return res, ck, bindings, launch_args


def test_sum_of_squares_reduction_vectorizes_and_matches() -> None:
    @qd.kernel
    def sumsq(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            s[0] += x[i] * x[i]

    x = RNG.standard_normal(10007).astype(np.float32)
    _, ck, b, _la = _instance(sumsq, x, np.zeros(1, np.float32))
    s = np.zeros(1, np.float32)
    _run_native(ck, b, [x, s], fast_math=True, chunks=5)
    assert s[0] == pytest.approx(float(np.sum(x.astype(np.float64) ** 2)), rel=1e-5)
    built, _ee = _compile(ck.ir, True)
    mod = llvm.parse_assembly(str(built.module))
    _target().optimize(mod)
    assert "<8 x float>" in str(mod) or "<4 x float>" in str(mod)
    assert str(mod).count("atomicrmw") == 1


def test_reduction_min_max_int_and_sub() -> None:
    @qd.kernel
    def red(x: qd.types.ndarray(qd.i32, 1), f: qd.types.ndarray(qd.f64, 1), o: qd.types.ndarray(qd.i32, 1),
            g: qd.types.ndarray(qd.f64, 1)):
        for i in range(x.shape[0]):
            qd.atomic_min(o[0], x[i])
            qd.atomic_max(o[1], x[i])
            o[2] -= x[i]
            qd.atomic_max(g[0], f[i])
            g[1] -= f[i]
            qd.atomic_min(g[2], f[i])

    x = RNG.integers(-1000, 1000, 5000).astype(np.int32)
    f = RNG.standard_normal(5000)
    f[7] = np.nan  # fmax/fmin skip NaN; the sum becomes NaN
    o0, g0 = np.array([0, 0, 5], np.int32), np.array([-np.inf, 1.0, 0.0])
    o1, g1 = o0.copy(), g0.copy()
    _, ck, b, _ = _instance(red, x, f, o1, g1)
    assert ck.ir.tasks is not None
    for fast in (False, True):
        o, g = o0.copy(), g0.copy()
        _run_native(ck, b, [x, f, o, g], fast_math=fast)
        np.testing.assert_array_equal(o, o1)
        assert list(o) == [min(0, x.min()), max(0, x.max()), 5 - int(x.sum())]
        np.testing.assert_array_equal(g, g1)  # g[1] is NaN on both
    f[7] = 0.5
    g = g0.copy()
    _run_native(ck, b, [x, f, o0.copy(), g], fast_math=True)
    assert g[1] == pytest.approx(1.0 - f.sum(), rel=1e-12) and g[2] == min(0.0, f.min())


def test_reduction_keeps_the_sign_of_zero_and_skips_shared_buffers() -> None:
    @qd.kernel
    def red(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            s[0] += x[i]
            s[1] = s[0]  # another access to s: no accumulator, per-index atomics

    @qd.kernel
    def neg0(x: qd.types.ndarray(qd.f32, 1), s: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            s[0] += x[i]

    x = np.full(4, -0.0, np.float32)
    s0 = np.array([-0.0, 0.0], np.float32)
    _, ck, b, _ = _instance(neg0, x, s0.copy())
    s = s0.copy()
    _run_native(ck, b, [x, s])
    assert np.signbit(s[0])
    _, ck, b, _ = _instance(red, x, s0.copy())
    built = build_module(ck.ir, _target(), True)
    assert str(built.module).count("atomicrmw") == 1 and "acc" not in str(built.module)


def test_prints_checks_returns_and_random_match_interpreter(capsys) -> None:
    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1), r: qd.types.ndarray(qd.f32, 1), q: qd.types.ndarray(qd.i32, 1),
          n: qd.i32) -> qd.i32:
        t = 0
        for j in range(n):
            if j % 3 == 0:
                continue
            t += j
        for i in range(r.shape[0]):
            r[i] = qd.random() + qd.random(qd.f32) * 0.5
            q[i] = qd.random(qd.i32)
            if i == 2:
                print("i", i, x[i], qd.f64(x[i]) * 2)
        print("t", t)
        return t

    x = np.arange(8, dtype=np.float32)
    r0, q0 = np.zeros(8, np.float32), np.zeros(8, np.int32)
    res, ck, b, _ = _instance(k, x, r0, q0, 9)
    capsys.readouterr()
    r, q = np.zeros(8, np.float32), np.zeros(8, np.int32)
    rets, status, prints, built = _run_native(ck, b, [x, r, q, 9])
    assert int(rets[0]) == res and status[0] == 0
    np.testing.assert_array_equal(r, r0)
    np.testing.assert_array_equal(q, q0)
    assert built.prints == ck.code.prints
    recs = [int(w) for w in prints]
    assert recs[:3] == [0, 2, 3]
    assert recs[3:6] == [2, int(np.float32(2).view(np.uint32)), int(np.float64(4).view(np.int64))]
    assert recs[6:] == [1, 0, 1, res]


def test_failed_check_records_status() -> None:
    qd.init(arch=qd.interp, log_level="warn", debug=True)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1), y: qd.types.ndarray(qd.i32, 1)):
        for i in range(x.shape[0]):
            assert x[i] < 5, "x too big"
            y[0] += 1

    x = np.arange(10, dtype=np.int32)
    with pytest.raises(Exception, match="x too big"):
        _instance(k, x, np.zeros(1, np.int32))
    (ck, b), = k._instances.values()
    y = np.zeros(1, np.int32)
    _, status, _, built = _run_native(ck, b, [x, y], chunks=1)
    assert status[0] == 1 and status[2] == 5 and built.check_args == ck.code.check_args
    assert y[0] == 0  # the failed chunk drops its partial sum


def test_serial_loops_while_break_matrices_and_ndrange() -> None:
    @qd.kernel
    def k(a: qd.types.ndarray(qd.i64, 2), v: qd.types.ndarray(qd.types.vector(3, qd.f32), 1)) -> qd.i64:
        for i, j in qd.ndrange(a.shape[0], a.shape[1]):
            s = qd.i64(0)
            m = i
            while True:
                if m <= 0:
                    break
                s += m * 7 + j
                m -= 1
            a[i, j] = s ** 2 // 3 - (s % -5)
        for i in v:
            v[i] = v[i] * 2.0 + qd.Vector([1.0, qd.sqrt(qd.f32(i)), qd.sin(qd.f32(i))])
        tot = qd.i64(0)
        for q in range(4):
            for w in range(3):
                if w == 1:
                    continue
                tot += q * w
        return tot

    a0 = np.zeros((5, 6), np.int64)
    v0 = RNG.standard_normal((7, 3)).astype(np.float32)
    a, v = a0.copy(), v0.copy()
    res, ck, b, _ = _instance(k, a, v)
    a2, v2 = a0.copy(), v0.copy()
    rets, _status, _, _ = _run_native(ck, b, [a2, v2])
    np.testing.assert_array_equal(a2, a)
    np.testing.assert_array_equal(v2.view(np.uint32), v.view(np.uint32))
    assert int(rets[0]) == res


def test_field_kernel_f16_u8_matches_interpreter() -> None:
    f = qd.field(qd.f16, shape=(4, 3))
    g = qd.field(qd.u8, shape=(4,))

    @qd.kernel
    def k(s: qd.f32):
        for i, j in f:
            f[i, j] = f[i, j] * s + qd.f16(j) / 3
            g[i] += qd.u8(j + 250)

    k(1.5)
    f0, g0 = f.to_numpy(), g.to_numpy()
    k(1.5)
    f1, g1 = f.to_numpy(), g.to_numpy()
    f.from_numpy(f0)
    g.from_numpy(g0)
    (ck, b), = k._instances.values()
    _run_native(ck, b, [1.5])
    np.testing.assert_array_equal(f.to_numpy().view(np.uint16), f1.view(np.uint16))
    np.testing.assert_array_equal(g.to_numpy(), g1)


_SLP_MODULE = """
define void @add4(ptr noalias %a, ptr noalias %b) {
  %a1 = getelementptr float, ptr %a, i64 1
  %a2 = getelementptr float, ptr %a, i64 2
  %a3 = getelementptr float, ptr %a, i64 3
  %b1 = getelementptr float, ptr %b, i64 1
  %b2 = getelementptr float, ptr %b, i64 2
  %b3 = getelementptr float, ptr %b, i64 3
  %x0 = load float, ptr %a
  %x1 = load float, ptr %a1
  %x2 = load float, ptr %a2
  %x3 = load float, ptr %a3
  %y0 = load float, ptr %b
  %y1 = load float, ptr %b1
  %y2 = load float, ptr %b2
  %y3 = load float, ptr %b3
  %s0 = fadd float %x0, %y0
  %s1 = fadd float %x1, %y1
  %s2 = fadd float %x2, %y2
  %s3 = fadd float %x3, %y3
  store float %s0, ptr %a
  store float %s1, ptr %a1
  store float %s2, ptr %a2
  store float %s3, ptr %a3
  ret void
}
"""


def test_the_slp_vectorizer_runs_below_the_size_limit_only():
    """Four adjacent scalar adds become one vector add with the SLP vectorizer, and stay scalar without it; a
    module's IR text above `SLP_MAX_IR_CHARS` goes without it (its time grows faster than the module)."""
    from qd.jit import cpu

    tm, _ = cpu._machine()
    out = {}
    for slp in (True, False):
        mod = llvm.parse_assembly(_SLP_MODULE)
        cpu._optimise(mod, tm, 3, slp)
        out[slp] = str(mod)
    assert "<4 x float>" in out[True] and "<4 x float>" not in out[False]
    assert cpu.slp_for(_SLP_MODULE) and not cpu.slp_for("x" * (cpu.SLP_MAX_IR_CHARS + 1))


def test_gpu_functions_make_buffer_addresses_where_used():
    """On the NVPTX target, buffer addresses, strides and arguments are made where they are used, not at function
    entry (`Target.hoist_launch_values`): held from the entry, the hundreds of buffers of a Genesis kernel spilled
    4 KB per thread. The CPU target keeps making them once at entry."""
    from llvmlite import ir as L

    from qd.jit import nvptx

    qd.init(arch=qd.interp, log_level="warn")
    try:
        n = 24
        xs = [qd.field(qd.f32, shape=8) for _ in range(n)]

        @qd.kernel
        def k(m: qd.i32):
            for i in range(8):
                if i < m:
                    for j in qd.static(range(n)):
                        xs[j][i] += qd.f32(j) * m

        k(3)
        (ck, _), = k._instances.values()
        entry_loads = {}
        for name, t in (("nvptx", nvptx.target()), ("cpu", CpuTarget())):
            mod = build_module(ck.ir, t, True)[0]
            body = next(f for f in mod.functions if f.name.endswith("_body0"))
            entry_loads[name] = sum(isinstance(x, L.LoadInstr) for x in body.blocks[0].instructions)
    finally:
        qd.reset()
    assert entry_loads["cpu"] >= n  # every buffer's address, once
    assert entry_loads["nvptx"] <= 4  # the launch context's own fields only
