"""`qd.lang.misc`: Quadrants' module path for archs, axes and extension queries (re-exports only)."""

from qd.extension import is_extension_supported  # noqa: F401
from qd.runtime.api import *  # noqa: F403
from qd.runtime.api import __all__ as _runtime_all
from qd import extension  # noqa: F401

__all__ = [*_runtime_all, "extension", "is_extension_supported"]
