"""The minimal Vulkan compute runtime (`qd/gpu/vulkan.py`): a module built by `spirv_module` runs on the
device (lavapipe on CPU machines) and matches numpy. Skipped, with the reason, without a Vulkan driver."""

from __future__ import annotations

import numpy as np
import pytest

from qd.gpu import vulkan as qvk
from tests.test_spirv_module import _doubling_shader


@pytest.fixture(scope="module")
def device():
    try:
        dev = qvk.Device()
    except qvk.VulkanUnavailable as e:
        pytest.skip(f"no Vulkan device: {e}")
    yield dev
    dev.close()


@pytest.mark.parametrize("width", [32, 64])
def test_dispatch_matches_numpy(device, width: int) -> None:
    n = 1000  # not a multiple of the workgroup size 64: the last group's extra invocations read past n
    dt = np.float32 if width == 32 else np.float64
    x = np.linspace(-3.0, 3.0, n).astype(dt)
    pad = 1024  # buffers hold a whole number of workgroups
    src, dst = device.buffer(pad * x.itemsize), device.buffer(pad * x.itemsize)
    src.write(np.concatenate([x, np.zeros(pad - n, dt)]))
    pipe = device.pipeline(_doubling_shader(width).words(), 2)
    try:
        device.dispatch(pipe, [src, dst], (pad // 64, 1, 1))
        got = dst.view(dt, n).copy()
    finally:
        pipe.destroy()
        src.destroy()
        dst.destroy()
    want = (np.sin(x) if width == 32 else np.abs(x)) * 2 + np.arange(n)
    np.testing.assert_allclose(got, want.astype(dt), rtol=1e-5 if width == 32 else 0, atol=1e-5 if width == 32 else 0)


def test_bad_device_name_is_a_clear_error(device, monkeypatch) -> None:
    monkeypatch.setenv("QD_VULKAN_DEVICE", "no-such-gpu")
    with pytest.raises(qvk.VulkanUnavailable, match="matches none of the Vulkan devices"):
        qvk.Device()
