"""The visitor skeleton the three code generators share (`qd/codegen/emitter.py`): they handle the same statements,
and a statement none handles (one that only exists before lowering) is an error naming it and its line."""

from __future__ import annotations

import importlib
import inspect

import pytest

import qd  # noqa: F401  (the API face first: it registers what the generators' imports need)
from qd import ir
from qd.codegen.emitter import CodegenBase
from qd.errors import QuadrantsCompilationError
from qd.ops import Op
from qd.types import dtypes as T

# lowered before any code generator sees the kernel (offload, `qd/ad/adstack.py`)
BEFORE_CODEGEN = {"LocalAtomic", "AdStackAlloc", "AdStackLoadTop", "AdStackPop", "AdStackPush", "GraphDoWhile"}


def _generators() -> list[type[CodegenBase]]:
    return [importlib.import_module("qd.jit.llvm_fn").FnLowering, importlib.import_module("qd.gpu.spirv").FnEmitter,
            importlib.import_module("qd.gpu.opencl_c")._Fn]


def test_every_generator_handles_every_lowered_statement() -> None:
    names = {n for n, c in vars(ir).items() if inspect.isclass(c) and issubclass(c, ir.Stmt) and c is not ir.Stmt}
    for gen in _generators():
        assert issubclass(gen, CodegenBase)
        assert {n for n in names if not hasattr(gen, "s_" + n)} == BEFORE_CODEGEN, gen.__name__


@pytest.mark.parametrize("gen", _generators(), ids=lambda g: g.__name__)
def test_unhandled_statement_names_itself_and_its_line(gen: type[CodegenBase]) -> None:
    var = ir.Alloca(dtype=T.i32)
    s = ir.LocalAtomic(op=Op.ADD, var=var, value=ir.Const(dtype=T.i32, value=1), dtype=T.i32,
                       loc=ir.SrcLoc("kern.py", 7))
    with pytest.raises(QuadrantsCompilationError, match=r"kern\.py:7: .* no code for statement LocalAtomic"):
        gen.handler(s)
    assert gen.handler(var) is gen.handler(var)  # found once, then cached per class
