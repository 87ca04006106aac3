"""The on-disk cache of compiled kernels (`offline_cache`, `offline_cache_file_path`).

An entry is the object code of one kernel instance plus a small pickle of its task symbols and
print/check tables, under a key hashing everything the machine code depends on: the IR text, the
target (triple, CPU, features, LLVM version), fast_math, the qd version and the code generator's own
source. Entries are written atomically (temp file + rename); a corrupt, truncated or stale entry
reads as a miss and is rebuilt, never an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from typing import Any

from qd import ir

_FORMAT = 1
_digests: dict[tuple[str, str], str] = {}


def sources_digest(directory: str, prefix: str = "") -> str:
    """Hash of a code generator's sources (the `.py` files in `directory` whose names start with `prefix`):
    a changed generator never reuses old artifacts. The CPU tier hashes qd/jit, the SPIR-V cache qd/gpu/spirv*."""
    key = (directory, prefix)
    if key not in _digests:
        h = hashlib.sha256()
        for name in sorted(os.listdir(directory)):
            if name.startswith(prefix) and name.endswith(".py"):
                with open(os.path.join(directory, name), "rb") as f:
                    h.update(name.encode() + f.read())
        _digests[key] = h.hexdigest()
    return _digests[key]


def _codegen_sources_digest() -> str:
    return sources_digest(os.path.dirname(__file__))


def key_for(k: ir.KernelIR, target_key: str, fast_math: bool) -> str:
    from qd import __version__
    from qd.ir_text import print_kernel

    h = hashlib.sha256()
    for part in (str(_FORMAT), __version__, _codegen_sources_digest(), target_key, str(bool(fast_math)),
                 print_kernel(k)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def default_dir() -> str:
    from qd.runtime import config

    return os.path.join(str(config.current().offline_cache_file_path), "cpu")


def _paths(directory: str | None, key: str) -> tuple[str, str]:
    d = directory or default_dir()
    return os.path.join(d, key + ".o"), os.path.join(d, key + ".meta")


def load(directory: str | None, key: str) -> tuple[bytes, Any] | None:
    obj_path, meta_path = _paths(directory, key)
    try:
        with open(meta_path, "rb") as f:
            fmt, meta_key, digest, meta = pickle.load(f)
        with open(obj_path, "rb") as f:
            obj = f.read()
    except Exception:  # noqa: BLE001  a missing or unreadable entry is a miss
        return None
    # The digest guards LLVM's object loader against a truncated or overwritten object file.
    if fmt != _FORMAT or meta_key != key or hashlib.sha256(obj).hexdigest() != digest:
        return None
    return obj, meta


def _write_atomic(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def store(directory: str | None, key: str, obj: bytes, meta: Any) -> None:
    """Best effort: a cache that cannot be written (read-only disk, no space) is skipped."""
    obj_path, meta_path = _paths(directory, key)
    try:
        os.makedirs(os.path.dirname(obj_path), exist_ok=True)
        _write_atomic(obj_path, obj)
        _write_atomic(meta_path, pickle.dumps((_FORMAT, key, hashlib.sha256(obj).hexdigest(), meta)))
    except OSError:
        pass
