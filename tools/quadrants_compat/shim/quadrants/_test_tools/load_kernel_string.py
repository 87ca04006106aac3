"""`load_kernel_from_string(source, name)`: a context manager that writes `source` to a real file in a
temporary directory, imports it as module `name` (kernels need their source on disk for `inspect`), and
yields the module's attribute `name`."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def _import_from(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


@contextmanager
def load_kernel_from_string(source: str, name: str) -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.py"
        path.write_text(source)
        try:
            yield _import_from(path, name)
        finally:
            sys.modules.pop(name, None)
