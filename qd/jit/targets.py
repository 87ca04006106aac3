"""Target hooks of the LLVM code generator: everything that differs between LLVM targets.

`qd/jit/llvm.py` writes one `llvmlite.ir.Module` for every target; what differs (triple, data
layout, how a math function is called, address spaces, conversions a target lacks, extra entry
points) is asked of a `Target`. `CpuTarget` is the host x86-64/arm64 through MCJIT; the NVPTX tier
adds a subclass, not a second code generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llvmlite import ir

from qd.jit.vecmath import LLVM_MATH_INTRINSICS
from qd.ops import INFO, TRANSCENDENTAL, UNARY

if TYPE_CHECKING:
    import llvmlite.binding as llvm

F32 = ir.FloatType()
F64 = ir.DoubleType()
F16 = ir.HalfType()
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

# The op table's C math functions within a few ulps (`math_call` names; suffix 'f' for f32): the interpreter's libm.
LIBM = tuple(INFO[op].libm for op in TRANSCENDENTAL)
# The correctly rounded unary ones (sqrt, fabs, floor, ceil, rint): LLVM's intrinsic of that name is exact on every
# target.
EXACT_INTRINSICS = {INFO[op].libm: f"llvm.{INFO[op].libm}" for op in UNARY
                    if INFO[op].libm and op not in TRANSCENDENTAL}


class Target:
    """Base target: generic hooks valid for any LLVM target (override what differs)."""

    name = "generic"
    triple = ""
    data_layout = ""
    global_addrspace = 0  # address space of kernel buffers
    atomic_order = "seq_cst"  # of buffer atomics (results are read after the launch: any order is enough)
    strided_bodies = False  # range bodies take a step: `body(Ctx*, lo, hi, step)` runs lo, lo + step, ... < hi
    # launch-invariant values (buffer addresses, extents, strides, arguments) made once at function entry; False:
    # made where they are used, so that none lives across the function (a GPU's registers: a Genesis kernel
    # names hundreds of buffers, whose addresses held from the entry spilled 4 KB per thread)
    hoist_launch_values = True
    # whether the native f32 atomic add flushes subnormals (PTX's atom.add.f32 does): under fast_math=False such
    # an add is a compare-and-swap loop instead, so that it rounds as every other tier does
    f32_atomic_add_flushes = False

    def configure(self, module: ir.Module) -> None:
        """Sets triple and data layout on a fresh module."""
        if self.triple:
            module.triple = self.triple
        if self.data_layout:
            module.data_layout = self.data_layout

    def math_call(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
        """`name` (a libm base name such as 'sin', or 'sqrt'/'floor'/'ceil'/'rint'/'fabs') applied to
        float or double `args`; the result has the argument type."""
        ty = args[0].type
        if name in EXACT_INTRINSICS:
            fn = b.module.declare_intrinsic(EXACT_INTRINSICS[name], [ty])
            return b.call(fn, list(args))
        cname = name + ("f" if ty == F32 else "")
        fn = b.module.globals.get(cname)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), cname)
            fn.attributes.add("nounwind")
        return b.call(fn, list(args))

    def f64_to_f16(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`x` (double) correctly rounded to half, returned as a float holding that half value.

        Generic form without the `__truncdfhf2` libcall (absent from a JIT process): round to float
        with round-to-odd, then float -> half (exact double rounding, 24 >= 11 + 2 bits)."""
        f = b.fptrunc(x, F32)
        back = b.fpext(f, F64)
        inexact = b.fcmp_unordered("!=", back, x)  # NaN compares unequal but is kept as is
        is_nan = b.fcmp_unordered("uno", x, x)
        bits = b.bitcast(f, I32)
        too_big = b.fcmp_ordered(">", b.call(b.module.declare_intrinsic("llvm.fabs", [F64]), [back]),
                                 b.call(b.module.declare_intrinsic("llvm.fabs", [F64]), [x]))
        toward_zero = b.select(too_big, b.sub(bits, ir.Constant(I32, 1)), bits)
        odd = b.or_(toward_zero, ir.Constant(I32, 1))
        fixed = b.select(b.and_(inexact, b.not_(is_nan)), odd, bits)
        return self.f32_round_f16(b, b.bitcast(fixed, F32))

    def f32_round_f16(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """`x` (float) rounded to the nearest half, as a float."""
        return self.f16_from_bits(b, self.f16_to_bits(b, x))

    def int_abs(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """|x| of a signed int, wrapping (abs(INT_MIN) == INT_MIN, the op table's)."""
        zero = ir.Constant(x.type, 0)
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)

    def f16_from_bits(self, b: ir.IRBuilder, h: ir.Value) -> ir.Value:
        """The float of half bits `h` (i16) read from memory; a NaN keeps its sign and payload, quieted (x86's
        conversion: the contract of every tier, DESIGN §4)."""
        return b.fpext(b.bitcast(h, F16), F32)

    def f16_to_bits(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """The half bits (i16) of float `x` rounded to nearest even; a NaN keeps its sign and top 10 payload bits,
        quieted (as `f16_from_bits`)."""
        return b.bitcast(b.fptrunc(x, F16), I16)

    def add_entry_points(self, module: ir.Module, tasks: list, numbers: Sequence[int] | None = None) -> None:
        """Hook for targets whose launch needs wrappers (GPU kernels); the CPU needs none. `numbers`: the kernel's
        task numbers of `tasks` (a module holding some of its tasks); default 0, 1, ..."""

    def reduce_atomic(self, f: Any, op: Any, dt: Any, ptr: ir.Value, total: ir.Value, converged: bool) -> None:
        """A thread's reduction accumulator `total` into the cell at `ptr` (atomic `op`); `converged`: every
        thread of the launch executes this (a GPU target may first combine across threads)."""
        f.atomic(op, dt, ptr, total)

    def simt(self, b: ir.IRBuilder, s: Any, args: list) -> ir.Value | None:
        """A `qd.simt` operation (`qd.ir.Simt`); targets without thread groups have none (the frontend refuses
        them before they get here)."""
        from qd.errors import QuadrantsCompilationError

        raise QuadrantsCompilationError(f"qd.simt operation {s.op!r} is not supported by the {self.name} target")

    def shared_base(self, module: ir.Module, k: Any, buf: int, elem: ir.Type) -> ir.Value:
        """The base pointer of block-shared buffer `buf` of kernel `k` (`qd.simt.block.SharedArray`)."""
        from qd.errors import QuadrantsCompilationError

        raise QuadrantsCompilationError(f"qd.simt.block.SharedArray is not supported by the {self.name} target")


class CpuTarget(Target):
    """The host CPU through MCJIT: host triple, CPU name and features (F16C gives hardware
    float <-> half conversions, so no runtime library is needed)."""

    name = "cpu"

    def __init__(self, opt_level: int = 3) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.opt_level = opt_level
        self.triple = llvm.get_process_triple()
        self.cpu_name = llvm.get_host_cpu_name()
        self.features = llvm.get_host_cpu_features().flatten()  # (0.4 ms a call: asked once)
        self._tms: dict[int, llvm.TargetMachine] = {}
        self.data_layout = str(self.target_machine().target_data)

    def target_machine(self, opt: int | None = None) -> llvm.TargetMachine:
        """A shared machine for optimising and emitting objects at `opt` (default: the target's level); a new
        machine costs 0.6 ms and makes its first object slower. Never hand it to an execution engine:
        llvmlite's `create_mcjit_compiler` takes ownership of the machine it is given and frees it with the
        engine (use `new_target_machine()` there)."""
        opt = self.opt_level if opt is None else opt
        if opt not in self._tms:
            self._tms[opt] = self.new_target_machine(opt)
        return self._tms[opt]

    def math_call(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
        """libm's functions as LLVM's math intrinsics (`llvm.sin.f32`): a scalar one is the same libm call, and
        the loop vectorizer widens them into calls of glibc's vector math (`qd/jit/vecmath.py`); exact ones
        (sqrt, floor, ...) as the base class does. Vector arguments get the vector intrinsic (`llvm.sin.v8f32`)."""
        if name not in LLVM_MATH_INTRINSICS and name not in EXACT_INTRINSICS:
            return super().math_call(b, name, args)
        ty = args[0].type  # (a vector type in lanes: `qd/jit/llvm_spmd.py`)
        elem = ty.element if isinstance(ty, ir.VectorType) else ty
        suffix = ("f32" if elem == F32 else "f64") if elem is ty else f"v{ty.count}{'f32' if elem == F32 else 'f64'}"
        iname = f"{EXACT_INTRINSICS.get(name, 'llvm.' + name)}.{suffix}"
        fn = b.module.globals.get(iname)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), iname)
        return b.call(fn, list(args))

    def new_target_machine(self, opt: int | None = None) -> llvm.TargetMachine:
        """A fresh machine for the host CPU (name and features, so F16C conversions are inline), generating
        code at `opt` (default: the target's level)."""
        import llvmlite.binding as llvm

        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(
            cpu=self.cpu_name, features=self.features,
            opt=self.opt_level if opt is None else opt, reloc="default", codemodel="jitdefault", jit=True)

    def optimize(self, mod: llvm.ModuleRef) -> None:
        """Runs the new pass manager's O`opt_level` pipeline (vectorizers on) over `mod`."""
        import llvmlite.binding as llvm

        pto = llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.target_machine(), pto)
        pb.getModulePassManager().run(mod, pb)


class NvptxTarget(Target):
    """NVIDIA GPUs through LLVM's NVPTX back end (PTX text for the CUDA driver to load).

    Each task gets a kernel (`ptx_kernel`) taking the device address of the launch's `Ctx` and the task's
    `rng_base`: every thread copies the Ctx to its own (its `slot` is its global index, the adstack row it
    owns), then a serial task runs on thread 0 and a range task's body runs the grid-stride loop
    (`strided_bodies`: lo = begin + global index, step = the grid's thread count). Math calls are
    libdevice's (`__nv_sinf`, ...), linked by `qd.jit.nvptx`; buffer atomics are relaxed."""

    name = "nvptx"
    triple = "nvptx64-nvidia-cuda"
    atomic_order = "monotonic"
    strided_bodies = True
    hoist_launch_values = False
    f32_atomic_add_flushes = True

    def __init__(self, arch: str = "sm_90") -> None:
        import llvmlite.binding as llvm

        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()
        self.arch = arch
        self.name = f"nvptx-{arch}"
        self._tm = llvm.Target.from_triple(self.triple).create_target_machine(cpu=arch, opt=3)
        self.data_layout = str(self._tm.target_data)

    def target_machine(self) -> llvm.TargetMachine:
        return self._tm

    def int_abs(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """|x| with its negation through an opaque copy of `x` (PTX `mov`), so that LLVM cannot form `abs.s32`,
        which ptxas takes to be non-negative: `abs(INT_MIN) % m` became an unsigned remainder on an H200."""
        w = x.type.width
        reg = {16: "h", 32: "r", 64: "l"}.get(w)
        if reg is None:
            return super().int_abs(b, x)
        copy = b.asm(ir.FunctionType(x.type, [x.type]), f"mov.b{w} $0, $1;", f"={reg},{reg}", [x], False)
        zero = ir.Constant(x.type, 0)
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, copy), x)

    def f16_from_bits(self, b: ir.IRBuilder, h: ir.Value) -> ir.Value:
        """PTX's `cvt.f32.f16` gives the canonical NaN for every NaN: a NaN is rebuilt from its bits instead."""
        sign = b.shl(b.zext(b.and_(h, ir.Constant(I16, 0x8000)), I32), ir.Constant(I32, 16))
        mant = b.shl(b.zext(b.and_(h, ir.Constant(I16, 0x3FF)), I32), ir.Constant(I32, 13))
        nan = b.or_(b.or_(sign, ir.Constant(I32, 0x7FC00000)), mant)
        is_nan = b.icmp_unsigned(">", b.and_(h, ir.Constant(I16, 0x7FFF)), ir.Constant(I16, 0x7C00))
        return b.select(is_nan, b.bitcast(nan, F32), b.fpext(b.bitcast(h, F16), F32))

    def f16_to_bits(self, b: ir.IRBuilder, x: ir.Value) -> ir.Value:
        """PTX's `cvt.rn.f16.f32` gives 0x7FFF for every NaN: a NaN's half is built from its bits instead."""
        u = b.bitcast(x, I32)
        sign = b.and_(b.trunc(b.lshr(u, ir.Constant(I32, 16)), I16), ir.Constant(I16, 0x8000))
        mant = b.and_(b.trunc(b.lshr(u, ir.Constant(I32, 13)), I16), ir.Constant(I16, 0x3FF))
        nan = b.or_(b.or_(sign, ir.Constant(I16, 0x7E00)), mant)
        return b.select(b.fcmp_unordered("uno", x, x), nan, b.bitcast(b.fptrunc(x, F16), I16))

    def math_call(self, b: ir.IRBuilder, name: str, args: Sequence[ir.Value]) -> ir.Value:
        if name in EXACT_INTRINSICS:
            return super().math_call(b, name, args)
        ty = args[0].type
        cname = f"__nv_{name}" + ("f" if ty == F32 else "")
        fn = b.module.globals.get(cname)
        if fn is None:
            fn = ir.Function(b.module, ir.FunctionType(ty, [ty] * len(args)), cname)
        return b.call(fn, list(args))

    def simt(self, b: ir.IRBuilder, s: Any, args: list) -> ir.Value | None:
        from qd.jit import nvptx_simt

        return nvptx_simt.lower(b, s, args)

    def shared_base(self, module: ir.Module, k: Any, buf: int, elem: ir.Type) -> ir.Value:
        from qd.jit import nvptx_simt

        return nvptx_simt.shared_base(module, k, buf, elem)

    def add_entry_points(self, module: ir.Module, tasks: list, numbers: Sequence[int] | None = None) -> None:
        from qd.base.abi import CTX_FIELDS
        from qd.jit.llvm_fn import PTR

        for t in tasks:
            for name in (t.fn, t.prologue):
                if name:
                    f = module.globals[name]
                    f.linkage = "internal"
                    f.attributes.add("alwaysinline")
        for n, t in zip(range(len(tasks)) if numbers is None else numbers, tasks):
            k = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64]), t.fn.rsplit("_", 1)[0] + f"_kernel{n}")
            k.calling_convention = "ptx_kernel"
            b = ir.IRBuilder(k.append_basic_block("entry"))
            n_words = len(CTX_FIELDS)  # every Ctx field is 8 bytes
            ctx = b.alloca(I64, size=ir.Constant(I32, n_words), name="ctx")
            gtid = self._global_index(b, module)
            own = {CTX_FIELDS.index("rng_base"): k.args[1], CTX_FIELDS.index("slot"): gtid}
            for w in range(n_words):
                v = own[w] if w in own else b.load(b.gep(k.args[0], [ir.Constant(I64, w)], source_etype=I64), typ=I64)
                b.store(v, b.gep(ctx, [ir.Constant(I64, w)], source_etype=I64))
            if t.kind == "serial":
                run, done = k.append_basic_block("run"), k.append_basic_block("done")
                b.cbranch(b.icmp_signed("==", gtid, ir.Constant(I64, 0)), run, done)
                b.position_at_end(run)
                b.call(module.globals[t.fn], [ctx])
                b.branch(done)
                b.position_at_end(done)
            else:
                be = b.alloca(I64, size=ir.Constant(I32, 2), name="be")
                b.call(module.globals[t.prologue], [ctx, be])
                lo = b.load(be, typ=I64)
                hi = b.load(b.gep(be, [ir.Constant(I64, 1)], source_etype=I64), typ=I64)
                b.call(module.globals[t.fn], [ctx, b.add(lo, gtid), hi, self._grid_threads(b, module)])
            b.ret_void()

    def reduce_atomic(self, f: Any, op: Any, dt: Any, ptr: ir.Value, total: ir.Value, converged: bool) -> None:
        """A block's accumulators combined, then one atomic from its first thread (32-bit and 64-bit ints and
        floats; add, sub, min, max and the bitwise ops): each warp's 32 by shuffles, then the warps' results
        through shared memory after a barrier. Elsewhere, or where a thread may have stopped early (a check:
        every thread of the block must reach the shuffles and the barrier), each thread's own atomic."""
        from qd.ops import Op

        combine = Op.ADD if op is Op.SUB else op
        bits = 8 * dt.itemsize
        if not converged or bits not in (32, 64) or dt.bits == 1 or combine not in (
                Op.ADD, Op.MIN, Op.MAX, Op.BIT_AND, Op.BIT_OR, Op.BIT_XOR) or (dt.is_float and combine not in (
                Op.ADD, Op.MIN, Op.MAX)):
            return f.atomic(op, dt, ptr, total)
        b, module = f.b, f.b.module
        v = total
        for off in (16, 8, 4, 2, 1):
            v = self._combine(b, combine, dt, v, self._shfl_down(b, v, off))
        tid = b.call(self._sreg_fn(module, "tid.x"), [])
        lane, warp = b.and_(tid, ir.Constant(I32, 31)), b.lshr(tid, ir.Constant(I32, 5))
        # one word per warp of the block (at most 1024 threads: 32 warps); each reduction has its own
        arr = ir.ArrayType(v.type, 32)
        smem = ir.GlobalVariable(module, arr, module.get_unique_name("qd_block_reduce"), addrspace=3)
        smem.linkage, smem.initializer, smem.align = "internal", ir.Constant(arr, ir.Undefined), 8
        zero = ir.Constant(I32, 0)
        with b.if_then(b.icmp_unsigned("==", lane, zero)):
            b.store(v, b.gep(smem, [zero, warp]))
        barrier = module.globals.get("llvm.nvvm.barrier0") or ir.Function(
            module, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0")
        b.call(barrier, [])
        with b.if_then(b.icmp_unsigned("==", tid, zero)):
            nwarps = b.lshr(b.add(b.call(self._sreg_fn(module, "ntid.x"), []), ir.Constant(I32, 31)),
                            ir.Constant(I32, 5))
            acc = b.alloca(v.type, name="block_total")
            b.store(b.load(b.gep(smem, [zero, zero]), typ=v.type), acc)
            for w in range(1, 32):  # unrolled; the warps the block has
                here = ir.Constant(I32, w)
                with b.if_then(b.icmp_unsigned("<", here, nwarps)):
                    x = b.load(b.gep(smem, [zero, here]), typ=v.type)
                    b.store(self._combine(b, combine, dt, b.load(acc, typ=v.type), x), acc)
            f.atomic(op, dt, ptr, b.load(acc, typ=v.type))

    @staticmethod
    def _combine(b: ir.IRBuilder, combine: Any, dt: Any, v: ir.Value, w: ir.Value) -> ir.Value:
        """Two partial results of a reduction combined (`combine`: ADD, MIN, MAX or a bitwise op)."""
        from qd.jit.llvm_ops import fminmax
        from qd.ops import Op

        if dt.is_float:
            return b.fadd(v, w) if combine is Op.ADD else fminmax(b, combine is Op.MIN, v, w)
        if combine is Op.ADD:
            return b.add(v, w)
        if combine in (Op.MIN, Op.MAX):
            cmp = ("<" if combine is Op.MIN else ">")
            less = b.icmp_signed(cmp, v, w) if dt.is_signed else b.icmp_unsigned(cmp, v, w)
            return b.select(less, v, w)
        return {Op.BIT_AND: b.and_, Op.BIT_OR: b.or_, Op.BIT_XOR: b.xor}[combine](v, w)

    def _shfl_down(self, b: ir.IRBuilder, v: ir.Value, off: int) -> ir.Value:
        """`v` of the lane `off` above (clamped to the warp), over all 32 lanes; 64-bit values as two halves."""
        name = "llvm.nvvm.shfl.sync.down.i32"
        fn = b.module.globals.get(name) or ir.Function(b.module, ir.FunctionType(I32, [I32] * 4), name)
        full, clamp = ir.Constant(I32, -1), ir.Constant(I32, 0x1F)
        ty = v.type
        if ty == I32 or ty == F32:
            x = b.bitcast(v, I32) if ty == F32 else v
            r = b.call(fn, [full, x, ir.Constant(I32, off), clamp])
            return b.bitcast(r, F32) if ty == F32 else r
        x = b.bitcast(v, I64) if ty == F64 else v
        lo = b.call(fn, [full, b.trunc(x, I32), ir.Constant(I32, off), clamp])
        hi = b.call(fn, [full, b.trunc(b.lshr(x, ir.Constant(I64, 32)), I32), ir.Constant(I32, off), clamp])
        r = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
        return b.bitcast(r, F64) if ty == F64 else r

    @staticmethod
    def _sreg_fn(module: ir.Module, name: str) -> ir.Function:
        fn = module.globals.get(f"llvm.nvvm.read.ptx.sreg.{name}")
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
        return fn

    @classmethod
    def _sreg(cls, b: ir.IRBuilder, module: ir.Module, name: str) -> ir.Value:
        return b.zext(b.call(cls._sreg_fn(module, name), []), I64)

    def _global_index(self, b: ir.IRBuilder, module: ir.Module) -> ir.Value:
        return b.add(b.mul(self._sreg(b, module, "ctaid.x"), self._sreg(b, module, "ntid.x")),
                     self._sreg(b, module, "tid.x"))

    def _grid_threads(self, b: ir.IRBuilder, module: ir.Module) -> ir.Value:
        return b.mul(self._sreg(b, module, "nctaid.x"), self._sreg(b, module, "ntid.x"))


__all__ = ["EXACT_INTRINSICS", "LIBM", "CpuTarget", "NvptxTarget", "Target"]
