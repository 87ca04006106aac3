"""Test-only helpers that Quadrants' tests import from `quadrants._test_tools` (written for qd's shim)."""


def qd_init_same_arch(**options) -> None:
    """`qd.init(**options)` again on the arch qd runs on now (Quadrants' tests re-init with other options)."""
    import qd
    from qd.base import config as _config

    qd.init(arch=_config.current().arch, **options)
