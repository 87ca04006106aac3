"""`qd.lang.misc`: Quadrants' module path for archs, axes and extension queries (re-exports only)."""

from qd.extension import is_extension_supported  # noqa: F401
from qd.runtime.api import *  # noqa: F403
from qd.runtime.api import __all__ as _runtime_all
from qd import extension  # noqa: F401



def is_extension_enabled(ext: "extension.Extension | str") -> bool:
    """Whether `ext` is usable now: supported on the current arch (and, for adstack, enabled in the config)."""
    from qd.base import config as _config

    cfg = _config.current()
    ok = is_extension_supported(cfg.arch, ext)
    if str(ext) == str(extension.adstack):
        ok = ok and bool(cfg.ad_stack_experimental_enabled)
    return ok


def loop_unique(val: object, covers: object = None) -> object:
    """Quadrants' hint that `val` differs between iterations of the enclosing parallel loop (it lets
    Quadrants demote atomics). A hint only: qd returns `val` unchanged."""
    return val


__all__ = [*_runtime_all, "loop_unique", "extension", "is_extension_supported", "is_extension_enabled"]
