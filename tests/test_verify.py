"""verify_kernel: accepts valid IR, rejects each kind of broken invariant with a naming message."""

from __future__ import annotations

import pytest

from qd import ir
from qd.ops import Op
from qd.types.dtypes import f32, f64, i32, i64, u1
from qd.verify import IRVerifyError, verify_kernel
from test_ir_text import ARGS, FIELD, NDARR, B, kernel, sample_kernel


def k_of(b: B, **kw) -> ir.KernelIR:
    kw.setdefault("args", ARGS)
    kw.setdefault("buffers", (FIELD, NDARR))
    return kernel(b.block(), **kw)


def bad(k: ir.KernelIR, *words: str) -> str:
    with pytest.raises(IRVerifyError) as e:
        verify_kernel(k)
    msg = str(e.value)
    for w in words:
        assert w in msg, msg
    return msg


def test_sample_is_valid():
    verify_kernel(sample_kernel())


def test_offloaded_sample_is_valid():
    from qd.passes.offload import offload
    verify_kernel(offload(sample_kernel()))


def test_use_before_def():
    b = B()
    late = ir.Const(dtype=i32, value=1)
    b.op(Op.ADD, i32, late, late)
    b.emit(late)
    bad(k_of(b), "add i32", "not defined")


def test_use_outside_block():
    b = B()
    z = b.const(i32, 0)
    with b.for_(z, z) as i:
        inner = b.op(Op.ADD, i32, i, z)
    b.op(Op.ADD, i32, inner, z)
    bad(k_of(b), "not defined")


def test_loop_var_outside_loop():
    b = B()
    z = b.const(i32, 0)
    with b.for_(z, z) as i:
        pass
    b.op(Op.ADD, i32, i, z)
    bad(k_of(b), "%i0")


def test_statement_twice():
    b = B()
    c = b.const(i32, 0)
    b.emit(c)
    bad(k_of(b), "twice")


@pytest.mark.parametrize("case", ["same", "cmp", "float", "int", "select", "arity"])
def test_op_type_rules(case):
    b = B()
    x, y, fx = b.const(i32, 1), b.const(i64, 2), b.const(f32, 1.0)
    if case == "same":
        b.op(Op.ADD, i32, x, y)
    elif case == "cmp":
        b.op(Op.CMP_LT, i32, x, x)
    elif case == "float":
        b.op(Op.SQRT, i32, x)
    elif case == "int":
        b.op(Op.BIT_AND, f32, fx, fx)
    elif case == "select":
        b.op(Op.SELECT, i32, x, x, x)
    else:
        b.op(Op.NEG, i32, x, x)
    bad(k_of(b), "k: `")


def test_local_store_dtype():
    b = B()
    a = b.alloca(f32)
    b.store(a, b.const(i32, 1))
    bad(k_of(b), "local_store", "stores i32 into a f32 alloca")


def test_global_ptr_rules():
    for idx_count, dt, buf, word in [(1, f32, 0, "indices"), (2, f64, 0, "pointer dtype"),
                                     (2, f32, 7, "out of range")]:
        b = B()
        z = b.const(i32, 0)
        b.ptr(buf, [z] * idx_count, dt)
        bad(k_of(b), "global_ptr", word)
    b = B()
    z = b.const(f32, 0.0)
    b.ptr(0, [z, z], f32)
    bad(k_of(b), "not an integer")


def test_global_store_dtype():
    b = B()
    z = b.const(i32, 0)
    p = b.ptr(0, [z, z], f32)
    b.gstore(p, z)
    bad(k_of(b), "global_store", "stores i32")


def test_break_continue_outside_loop():
    b = B()
    b.emit(ir.Break())
    bad(k_of(b), "break outside")
    b = B()
    b.emit(ir.Continue())
    bad(k_of(b), "continue outside")
    b = B()  # break in a parallel loop is not allowed, continue is
    z = b.const(i32, 0)
    with b.for_(z, z, parallel=True):
        b.emit(ir.Break())
    bad(k_of(b), "break")


def test_nested_parallel_for():
    b = B()
    z = b.const(i32, 0)
    with b.for_(z, z):
        with b.for_(z, z, parallel=True):
            pass
    bad(k_of(b), "parallel for is only allowed at the top level")


def test_return_rules():
    b = B()
    z = b.const(i32, 0)
    with b.for_(z, z):
        b.emit(ir.Return(values=(z,)))
    bad(k_of(b, rets=(i32,)), "return inside a loop")
    b = B()
    b.emit(ir.Return(values=(b.const(i32, 0),)))
    bad(k_of(b, rets=(f32,)), "returns i32")


def test_check_and_arg_rules():
    b = B()
    b.emit(ir.Check(cond=b.const(u1, 1), check=3))
    bad(k_of(b), "check index #3")
    b = B()
    b.arg(0, f32)
    bad(k_of(b), "arg_load 0 : f32", "is i32")
    b = B()
    b.arg(1, f32)
    bad(k_of(b), "not a scalar")


def test_const_range():
    b = B()
    b.const(i32, 1 << 40)
    bad(k_of(b), "out of range")


def test_message_has_location():
    b = B()
    b.emit(ir.Break(loc=ir.SrcLoc("m.py", 7, 2)))
    bad(k_of(b), "m.py:7:2")


def test_task_rules():
    b = B()
    z = b.const(i32, 0)
    var = ir.LoopVar(i32)
    t = ir.Task(kind="range", body=ir.Block(), var=var, prologue=ir.Block(), begin=z, end=z)
    bad(kernel(ir.Block(), tasks=(ir.Task(kind="serial", body=b.block()), t)), "prologue")
    # a task may not reference another task's values
    b2 = B()
    b2.op(Op.ADD, i32, z, z)
    bad(kernel(ir.Block(), tasks=(ir.Task(kind="serial", body=b.block()),
                                  ir.Task(kind="serial", body=b2.block()))), "not defined")
    # body may use prologue values and the var
    b3 = B()
    b3.op(Op.ADD, i32, var, z)
    ok = ir.Task(kind="range", body=b3.block(), var=var, prologue=ir.Block((z,)), begin=z, end=z)
    verify_kernel(kernel(ir.Block(), tasks=(ok,)))


def test_ndarray_arg_needs_its_buffer():
    bad(kernel(ir.Block(), args=ARGS, buffers=(FIELD,)), "arg a", "not an ndarray buffer")
