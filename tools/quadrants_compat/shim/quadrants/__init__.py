"""Compat shim: `import quadrants` gives qd.

Every `quadrants.<a>.<b>` that this shim package does not itself hold as a file is served as an alias of
`qd.<a>.<b>` (the very same module object, so classes and singletons compare identical). Top-level
attributes fall through to `qd`. This is a dev tool for running Quadrants' tests against qd; it holds
no implementation of its own beyond Quadrants' test-only helpers (`quadrants._test_tools`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Sequence

import qd
from qd import *  # noqa: F401,F403


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The target module is already executed by `import_module`."""


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Runs after the normal finders: a `quadrants.x` with no shim file maps to `qd.x` when that exists."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("quadrants."):
            return None
        qd_name = "qd." + fullname[len("quadrants."):]
        try:
            if importlib.util.find_spec(qd_name) is None:
                return None
        except ModuleNotFoundError:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(qd_name))


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _AliasFinder())

# Submodules that qd binds as attributes are aliased eagerly, so `quadrants.lang is qd.lang`.
for _name in ("lang", "types", "math", "extension", "ad", "errors"):
    _mod = getattr(qd, _name, None)
    if isinstance(_mod, ModuleType):
        sys.modules.setdefault(f"quadrants.{_name}", _mod)
        globals()[_name] = _mod


def __getattr__(name: str) -> Any:
    """`qd`'s attribute; a Quadrants name qd lacks keeps qd's error, which names the feature."""
    try:
        return getattr(qd, name)
    except qd.UnsupportedFeatureError:
        raise
    except AttributeError:
        raise AttributeError(f"module 'quadrants' (qd compat shim) has no attribute {name!r}") from None
