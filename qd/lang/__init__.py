"""`qd.lang`: the `quadrants.lang` package path, kept so Quadrants code that reaches into it runs (re-exports only)."""

from qd.lang import buffer_view, exception, impl, misc, util  # noqa: F401
