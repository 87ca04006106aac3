"""The code caches' IR digest (`qd.codegen.cache.ir_digest`): the sha256 of the IR's flat form (`qd.ir_pack`).
It keys native code across processes, so it must be the same for the same kernel in another process (whatever
objects that process shares or interns), and different whenever the IR differs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np

import qd
from qd import ir_pack
from qd.codegen import cache
from tests.conftest import init_arch

_CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import qd
    from qd.codegen import cache
    qd.init(arch=qd.cpu, log_level="error", offline_cache=False)
    C = float(sys.argv[1])

    @qd.func
    def g(a: qd.f32) -> qd.f32:
        s = 0.0
        for j in range(3):
            s += qd.sin(a * j) * C
        return s

    @qd.kernel
    def k(y: qd.types.ndarray(qd.f32, 1)):
        for i in y:
            y[i] = g(y[i])

    k(np.zeros(4, np.float32))
    (inst,) = k._instances.values()
    print(cache.ir_digest(inst[0].ir))
""")


def _digest_in_child(script, c: float, seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, str(script), str(c)], check=False, capture_output=True, text=True, env=env,
                         timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_the_digest_is_the_same_in_another_process_and_changes_with_the_ir(tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    a, b = _digest_in_child(script, 2.0, "1"), _digest_in_child(script, 2.0, "2")
    assert a == b and len(a) == 64
    assert _digest_in_child(script, 3.0, "1") != a


def test_an_unpacked_ir_has_the_digest_of_the_ir_it_was_packed_from(tmp_path) -> None:
    init_arch(qd.cpu, offline_cache=False)

    @qd.kernel
    def k(n: qd.i32, y: qd.types.ndarray(qd.f32, 1)):
        for i in y:
            if y[i] > n:
                y[i] = qd.sqrt(y[i]) + n

    k(1, np.ones(4, np.float32))
    (inst,) = k._instances.values()
    kir = inst[0].ir
    records, roots = ir_pack.pack([kir])
    (back,) = ir_pack.unpack(records, roots)
    assert "_qd_ir_digest" not in back.__dict__
    assert cache.ir_digest(back) == cache.ir_digest(kir) == cache.packed_digest(records, roots)


def test_graph_kernels_keep_their_flag_through_text_and_pack() -> None:
    """`@qd.kernel(graph=True)` reaches the IR (`KernelIR.graph`: the CUDA tier launches such a kernel as one graph),
    survives the text form and the flat form, and keys other native code than the same kernel without it."""
    from qd.ir_text import parse_kernel, print_kernel

    qd.init(arch=qd.cpu, log_level="error", offline_cache=False)
    irs = {}
    for graph in (False, True):
        @qd.kernel(graph=graph)
        def k(y: qd.types.ndarray(qd.f32, 1)):
            for i in y:
                y[i] = y[i] * 2.0

        k(np.ones(4, np.float32))
        (inst,) = k._instances.values()
        irs[graph] = inst[0].ir
    assert irs[True].graph and not irs[False].graph
    assert parse_kernel(print_kernel(irs[True])).graph and not parse_kernel(print_kernel(irs[False])).graph
    records, roots = ir_pack.pack([irs[True]])
    assert ir_pack.unpack(records, roots)[0].graph
    assert cache.ir_digest(irs[True]) != cache.ir_digest(irs[False])
