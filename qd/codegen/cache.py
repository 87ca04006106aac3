"""The on-disk cache of compiled kernels (`offline_cache`, `offline_cache_file_path`).

An entry is the object code of one kernel instance plus a small pickle of its task symbols and
print/check tables, under a key hashing everything the machine code depends on: the IR (its digest,
`ir_digest`, kept on the IR object; the fastcache sets it on the IRs it rebuilds), the
target (triple, CPU, features, LLVM version, and the digest of the tier's own generator sources), fast_math,
the qd version and the sources of this shared floor (qd/codegen). Entries are written atomically (temp file +
rename); a corrupt, truncated or stale entry reads as a miss and is rebuilt, never an error, and so is one that
another process's cleaning removed while it was read. A load marks the entry used (`qd.base.cache_dir`: the size
cap and its least-recently-used cleaning).

An entry whose digest matches can still be bad for the loader it feeds (issue 27 item 13: a bad object made LLVM's
object loader or PoCL's binary loader crash every later run). `load_with` runs the caller's loader: an entry it
refuses (raises) is a miss that deletes it; and while it loads, a marker file (`<key>.loading`) names the process,
so an entry whose marker names a process that no longer runs crashed that process: it is deleted instead of
loaded again. With `until_confirmed` the marker stays until the caller's `confirm` (the CPU tier: after the
code's first run) or the normal end of the process.
"""

from __future__ import annotations

import atexit
import hashlib
import marshal
import os
import pickle
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

from qd import ir
from qd.base import cache_dir

_FORMAT = 1
_R = TypeVar("_R")
_digests: dict[tuple[str, str], str] = {}


def sources_digest(directory: str, prefix: str = "") -> str:
    """Hash of a code generator's sources (the `.py` files in `directory` whose names start with `prefix`):
    a changed generator never reuses old artifacts. The LLVM tiers hash qd/jit, the SPIR-V cache qd/gpu/spirv*
    (each into its `target_key`); `key_for` adds qd/codegen's."""
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


def ir_digest(k: ir.KernelIR) -> str:
    """The sha256 of `k`'s IR, computed once per IR object and kept on it; an IR the fastcache rebuilt carries
    the digest it was stored with (`set_ir_digest`), so a warm process digests no IR to find its native code.
    The digest is of the flat form `qd.ir_pack` writes (`packed_digest`: every field of every object, source
    positions included, in a deterministic order), ~1.5x faster than printing the IR text; an IR that form cannot
    write is digested through its text (`qd.ir_text.print_kernel`)."""
    d = k.__dict__.get("_qd_ir_digest")
    if d is None:
        from qd import ir_pack

        try:
            d = packed_digest(*ir_pack.pack([k]))
        except ir_pack.Unpackable:
            from qd.ir_text import print_kernel

            d = hashlib.sha256(b"text\0" + print_kernel(k).encode()).hexdigest()
        set_ir_digest(k, d)
    return d


def packed_digest(records: list[tuple], roots: list[int]) -> str:
    """The digest of one IR from its `qd.ir_pack.pack` form (records and roots of that IR alone). marshal's
    version 2 writes no back-references, so equal records give equal bytes whatever objects they share."""
    from qd import ir_pack

    h = hashlib.sha256(b"pack\0" + ir_pack.schema_digest().encode())
    h.update(marshal.dumps((records, roots), 2))
    return h.hexdigest()


def set_ir_digest(k: ir.KernelIR, digest: str) -> None:
    object.__setattr__(k, "_qd_ir_digest", digest)  # (a frozen dataclass; not a field: never compared)


def key_for(k: ir.KernelIR, target_key: str, fast_math: bool) -> str:
    from qd import __version__

    h = hashlib.sha256()
    for part in (str(_FORMAT), __version__, _codegen_sources_digest(), target_key, str(bool(fast_math)),
                 ir_digest(k)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def default_dir() -> str:
    from qd.base import config

    return os.path.join(str(config.current().offline_cache_file_path), "cpu")


def _paths(directory: str | None, key: str) -> tuple[str, str]:
    d = directory or default_dir()
    return os.path.join(d, key + ".o"), os.path.join(d, key + ".meta")


def _marker(directory: str | None, key: str) -> str:
    return os.path.join(directory or default_dir(), key + ".loading")


def discard(directory: str | None, key: str) -> None:
    """Deletes entry `key` (best effort: a cache that cannot be written keeps it)."""
    for path in (*_paths(directory, key), _marker(directory, key)):
        try:
            os.unlink(path)
        except OSError:
            pass


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _crashed_loading(directory: str | None, key: str) -> bool:
    """Whether a process that no longer runs was loading entry `key` (its marker is still there)."""
    try:
        with open(_marker(directory, key)) as f:
            pid = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return False
    return pid != os.getpid() and not _running(pid)


_unconfirmed: set[str] = set()  # markers this process keeps until `confirm` (or its normal end)


def _drop_marker(marker: str) -> None:
    """Removes `marker` if it still names this process (another may have loaded the entry since)."""
    try:
        with open(marker) as f:
            mine = f.read().strip() == str(os.getpid())
        if mine:
            os.unlink(marker)
    except OSError:
        pass


def confirm(directory: str | None, key: str) -> None:
    """The code loaded from entry `key` (`load_with(until_confirmed=True)`) ran: its marker goes."""
    marker = _marker(directory, key)
    if marker in _unconfirmed:
        _unconfirmed.discard(marker)
        _drop_marker(marker)


@atexit.register
def _at_exit() -> None:  # a normal end: code loaded but never run crashed nothing
    for marker in list(_unconfirmed):
        _drop_marker(marker)


def load_with(directory: str | None, key: str, loader: Callable[[bytes, Any], _R], until_confirmed: bool = False,
              refusals: tuple[type[BaseException], ...] = (Exception,)) -> _R | None:
    """`loader(obj, meta)` of entry `key`, or None (a miss): no entry, a bad one (`load`), one that crashed a
    process while it loaded, or one `loader` refuses by raising one of `refusals`; the last two are deleted (other
    exceptions propagate). While `loader` runs (with `until_confirmed`, until `confirm` of a result that is not
    None), the entry's marker names this process (see the module docstring)."""
    if _crashed_loading(directory, key):
        discard(directory, key)
        return None
    hit = load(directory, key)
    if hit is None:
        return None
    marker = _marker(directory, key)
    try:
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
    except OSError:  # a cache that cannot be written: loaded unguarded
        marker = ""
    out = None
    try:
        out = loader(*hit)
    except refusals:  # the loader refuses the entry: a miss that deletes it
        discard(directory, key)
    finally:  # (an interrupt is no fault of the entry)
        if marker and until_confirmed and out is not None:
            _unconfirmed.add(marker)
        elif marker:
            _drop_marker(marker)
    return out


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
    cache_dir.touch(meta_path)  # a use: recency for the size cap's "lru" cleaning
    return obj, meta


def write_atomic(path: str, data: bytes) -> None:
    """Writes `data` to `path` through a temporary file and a rename: a reader sees the old file or the new one."""
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
        write_atomic(obj_path, obj)
        write_atomic(meta_path, pickle.dumps((_FORMAT, key, hashlib.sha256(obj).hexdigest(), meta)))
    except OSError:
        pass
