"""`qd._lib.core`: the enums Quadrants' tests read from its C++ core, re-exported from `qd.types.enums`."""

from qd.types.enums import AutodiffMode, DeviceCapability, Layout, SNodeGradType  # noqa: F401

__all__ = ["AutodiffMode", "DeviceCapability", "Layout", "SNodeGradType"]
