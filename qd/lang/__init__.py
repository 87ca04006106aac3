"""`qd.lang`: the `quadrants.lang` package path, kept so Quadrants code that reaches into it runs (re-exports only)."""

from qd.lang import _kernel_types, _template_mapper, buffer_view, exception, impl, misc, util  # noqa: F401


def __getattr__(name: str) -> object:
    """`qd.lang.ops` is loaded on use (it re-exports qd.frontend, which imports qd.lang)."""
    if name == "ops":
        import importlib

        return importlib.import_module("qd.lang.ops")
    raise AttributeError(f"module 'qd.lang' has no attribute {name!r}")
