"""`qd.lang`: the `quadrants.lang` package path, kept so Quadrants code that reaches into it runs (re-exports only)."""

from qd.lang import _kernel_types, _template_mapper, buffer_view, exception, impl, misc, util  # noqa: F401


def __getattr__(name: str) -> object:
    """`qd.lang.ops` is loaded on use (it re-exports qd.frontend, which imports qd.lang). Quadrants' `lang` re-exports
    its top-level names (`quadrants.lang.Field`): qd's are answered from `qd`; a name qd lacks raises an error naming
    its feature (qd/_unsupported.py)."""
    if name == "ops":
        import importlib

        return importlib.import_module("qd.lang.ops")
    import qd

    if not name.startswith("_") and name in vars(qd):
        return vars(qd)[name]
    from qd._unsupported import missing

    raise missing("qd.lang", name)
