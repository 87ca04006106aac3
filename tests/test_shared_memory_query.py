"""`qd.lang.impl.get_max_shared_memory_bytes(*, is_lowerbound_ok)` (Quadrants' `python/quadrants/lang/impl.py`;
Genesis sizes its shared tiles with it, `genesis/utils/misc.py`): on a GPU arch the device's own limit, compared
with the driver's query made here; on the host archs 0 when a lower bound will do, else an error."""

from __future__ import annotations

import ctypes

import pytest

import qd
from qd.lang import impl
from qd.runtime import device


def _driver_value(arch_name: str) -> int:
    """The limit as the arch's driver reports it, asked here without the backend's method."""
    backend = device.runtime(arch_name).backend
    if arch_name == "vulkan":
        props = backend.dev.vk.vkGetPhysicalDeviceProperties(backend.dev.physical)
        assert props.limits.maxComputeSharedMemorySize >= 16384  # the Vulkan spec's minimum
        return int(props.limits.maxComputeSharedMemorySize)
    if arch_name == "opencl":
        import pyopencl as cl

        d = backend.device
        assert d.get_info(cl.device_info.LOCAL_MEM_TYPE) in (cl.device_local_mem_type.LOCAL,
                                                              cl.device_local_mem_type.GLOBAL)
        return int(d.get_info(cl.device_info.LOCAL_MEM_SIZE))
    drv = backend.drv
    optin, default = ctypes.c_int(), ctypes.c_int()
    assert drv.lib.cuDeviceGetAttribute(ctypes.byref(optin), 97, drv.device) == 0  # ..._PER_BLOCK_OPTIN
    assert drv.lib.cuDeviceGetAttribute(ctypes.byref(default), 8, drv.device) == 0  # ..._PER_BLOCK (48 KiB)
    assert optin.value >= default.value >= 48 * 1024
    return optin.value


def test_max_shared_memory_bytes(arch: qd.base.arch.Arch) -> None:
    if not arch.is_gpu:
        assert impl.get_max_shared_memory_bytes(is_lowerbound_ok=True) == 0
        with pytest.raises(qd.QuadrantsRuntimeError, match=f"{arch.name}.*is_lowerbound_ok=True"):
            impl.get_max_shared_memory_bytes(is_lowerbound_ok=False)
        return
    want = _driver_value(arch.name)
    assert want > 0
    assert impl.get_max_shared_memory_bytes(is_lowerbound_ok=True) == want
    assert impl.get_max_shared_memory_bytes(is_lowerbound_ok=False) == want


def test_keyword_only() -> None:
    with pytest.raises(TypeError):
        impl.get_max_shared_memory_bytes(True)  # type: ignore[misc]
