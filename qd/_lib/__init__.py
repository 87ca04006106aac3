"""`qd._lib`: the module path of Quadrants' C++ extension that its tests reach (`qd._lib.core.DeviceCapability`)."""

from qd._lib import core  # noqa: F401
