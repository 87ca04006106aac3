"""Device-resident arrays of other libraries passed as ndarray arguments, used in place (DESIGN §10).

An object with `__cuda_array_interface__` (a torch CUDA tensor, a CuPy or Numba device array) passed where a
kernel declares an ndarray, on `qd.cuda`, becomes a `DeviceArray`: its device address, extents and dtype are
bound directly (no copy, no qd mirror). The interface's `stream` says where its producer works: the launch
waits for that stream first and the stream waits for the launch after (`CudaBackend.enqueue`), so a program
mixing torch and qd needs no explicit synchronisation. Such an array has no generation counter: adstack sizes
that read it are computed again at every launch. `arr` is a host copy (for sizers and error messages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qd.errors import QuadrantsRuntimeTypeError
from qd.types import hooks


class DeviceArray:
    def __init__(self, source: Any, name: str) -> None:
        try:
            cai = source.__cuda_array_interface__
        except RuntimeError:  # torch refuses it on a tensor that requires grad: its data, detached
            source = source.detach()
            cai = source.__cuda_array_interface__
        self.source = source  # keeps the memory alive while a launch uses it
        self.shape = tuple(int(n) for n in cai["shape"])
        self.ndim = len(self.shape)
        self.dtype = np.dtype(cai["typestr"])
        self.address = int(cai["data"][0] or 0)
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.stream = cai.get("stream")  # None: no ordering needed; 1, 2: the default streams; else a handle
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(self.shape, self.dtype.itemsize):
            raise QuadrantsRuntimeTypeError(f"Argument '{name}': a device array passed to a kernel must be "
                                            f"C-contiguous (strides {tuple(strides)}); pass .contiguous()")

    @property
    def arr(self) -> np.ndarray:
        """A host copy of the data (after the work on the device is done)."""
        from qd.runtime import device

        out = np.empty(self.shape, self.dtype)
        rt = device.runtime("cuda")
        rt.sync()
        rt.backend.download(self, out)
        return out


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out, acc = [], itemsize
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return tuple(reversed(out))


def from_interface(v: Any, name: str) -> DeviceArray | None:
    """`v` as a DeviceArray when it is a device array and the program runs on `qd.cuda`, else None."""
    if not hasattr(type(v), "__cuda_array_interface__"):  # the class: torch's property raises on some tensors
        return None
    from qd.base import config

    if config.current().arch.name != "cuda":
        return None
    return DeviceArray(v, name)


__all__ = ["DeviceArray", "from_interface"]


hooks.register(device_array=from_interface)
