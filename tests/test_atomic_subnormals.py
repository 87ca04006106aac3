"""f32 atomic adds keep subnormals under `fast_math=False`, on every tier: PTX's `atom.add.f32` flushes subnormal
inputs and results to zero, which issue 27's fuzz campaign found on an H200 (a cell that should hold -4e-40 held 0),
so the CUDA tier adds through a compare-and-swap loop there (`Target.f32_atomic_add_flushes`)."""

from typing import Any

import numpy as np

import qd
from tests.conftest import init_arch


def test_f32_atomic_add_keeps_subnormals_without_fast_math(arch: Any) -> None:
    init_arch(arch, fast_math=False)
    v = np.array([-4e-40, 3e-41, 1e-45, -2.5e-39], np.float32)  # subnormal f32 values (below 1.18e-38)

    @qd.kernel
    def acc(x: qd.types.ndarray(qd.f32, 1), cell: qd.types.ndarray(qd.f32, 1), each: qd.types.ndarray(qd.f32, 1)):
        for i in range(x.shape[0]):
            qd.atomic_add(cell[0], x[i])
            qd.atomic_add(each[i], x[i])

    cell, each = np.zeros(1, np.float32), np.zeros(4, np.float32)
    acc(v, cell, each)
    assert each.view(np.uint32).tolist() == v.view(np.uint32).tolist()
    assert cell[0] == np.float32(v.astype(np.float64).sum())  # each partial sum is exact in f32 (all subnormal)
