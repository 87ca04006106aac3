"""Target hooks of the LLVM code generator: everything that differs between LLVM targets.

`qd/jit/llvm.py` writes one `llvmlite.ir.Module` for every target; what differs (triple, data
layout, how a math function is called, address spaces, conversions a target lacks, extra entry
points) is asked of a `Target`. `CpuTarget` is the host x86-64/arm64 through MCJIT; the NVPTX tier
adds a subclass, not a second code generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from llvmlite import ir

if TYPE_CHECKING:
    import llvmlite.binding as llvm

F32 = ir.FloatType()
F64 = ir.DoubleType()
F16 = ir.HalfType()
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)

# qd op name -> the C function the interpreter calls (suffix 'f' for f32).
LIBM = ("sin", "cos", "tan", "asin", "acos", "tanh", "exp", "log", "pow", "atan2")
# Ops LLVM has an intrinsic for whose lowering is exact on every target (rounding, sqrt, fabs).
EXACT_INTRINSICS = {"sqrt": "llvm.sqrt", "floor": "llvm.floor", "ceil": "llvm.ceil", "rint": "llvm.rint",
                    "fabs": "llvm.fabs"}


class Target:
    """Base target: generic hooks valid for any LLVM target (override what differs)."""

    name = "generic"
    triple = ""
    data_layout = ""
    global_addrspace = 0  # address space of kernel buffers

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
        return b.fpext(b.fptrunc(x, F16), F32)

    def add_entry_points(self, module: ir.Module, tasks: list) -> None:
        """Hook for targets whose launch needs wrappers (GPU kernels); the CPU needs none."""


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
        self._tm: llvm.TargetMachine | None = None
        self.data_layout = str(self.target_machine().target_data)

    def target_machine(self) -> llvm.TargetMachine:
        """A shared machine for optimising and emitting objects. Never hand it to an execution
        engine: llvmlite's `create_mcjit_compiler` takes ownership of the machine it is given and
        frees it with the engine (use `new_target_machine()` there)."""
        if self._tm is None:
            self._tm = self.new_target_machine()
        return self._tm

    def new_target_machine(self) -> llvm.TargetMachine:
        """A fresh machine for the host CPU (name and features, so F16C conversions are inline)."""
        import llvmlite.binding as llvm

        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
            opt=self.opt_level, reloc="default", codemodel="jitdefault", jit=True)

    def optimize(self, mod: llvm.ModuleRef) -> None:
        """Runs the new pass manager's O`opt_level` pipeline (vectorizers on) over `mod`."""
        import llvmlite.binding as llvm

        pto = llvm.create_pipeline_tuning_options(speed_level=self.opt_level)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.target_machine(), pto)
        pb.getModulePassManager().run(mod, pb)


__all__ = ["EXACT_INTRINSICS", "LIBM", "CpuTarget", "Target"]
