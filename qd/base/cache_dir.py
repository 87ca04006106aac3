"""The offline cache directory (`offline_cache_file_path`): where it is by default, and its size cap.

**Where.** `qd.init(offline_cache_file_path=...)` wins, then `QD_OFFLINE_CACHE_FILE_PATH` (both applied by
`qd.init`, `qd/runtime/program.py`), then `default_path()`: the platform's per-user cache directory from
`platformdirs` (`~/.cache/qd` on Linux, or `$XDG_CACHE_HOME/qd`; `~/Library/Caches/qd` on macOS).

**What is in it.** One subdirectory per kind of entry (`cpu`, `cuda`, `vulkan`, `opencl` for native code,
`fastcache` for frontend instances). An entry is the files of one subdirectory that share a key, a sha256 in hex:
`<key>.o` + `<key>.meta` (+ a `<key>.loading` marker) for native code (`qd/codegen/cache.py`), `<key>.qfc` for the
fastcache (`qd/frontend/fastcache.py`). Only files named so are ever counted or removed, so a cache path pointed at
a directory that holds other files loses none of them.

**Recency.** An entry's last use is the latest access time of its files: a store writes them (access time =
modification time = now) and a load calls `touch`, which moves the access time to now and keeps the modification
time, so the modification time stays the time the entry was written (what "fifo" orders by).

**Cleaning** (Quadrants' `offline_cache_cleaning_policy`, `offline_cache_max_size_of_files`,
`offline_cache_cleaning_factor`; `clean`) runs when a program ends: at `qd.reset()`, so also at the next
`qd.init`, and at interpreter exit, as Quadrants cleans when its program is finalized. With policy "lru" or "fifo",
when the entries' total size is at least the cap, the `floor(factor * entries)` least recently used ("lru") or
oldest written ("fifo") entries are removed (none where that count is 0): Quadrants' rule. "never" removes
nothing; so does "version" in qd (Quadrants removes another version's cache with it; qd's keys hash the qd version
and the generators' sources, so such entries are never read again, and "lru"/"fifo" age them out). Unlike
Quadrants, whose cap bounds only its compiled-kernel cache, the cap counts every kind of entry here.

**Many processes.** Entries are written by rename, so a reader sees a whole file or none; eviction only unlinks
whole entries, and a reader that loses one (between listing and opening, or between its two files) reads a miss and
compiles again. One process cleans a directory at a time (an exclusive `flock` on `<path>/.clean.lock`, not waited
for: a process that finds it held skips, the holder is doing the work), so processes ending together do not each
remove a share.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import time
from typing import Any

from qd import _logging

POLICIES: tuple[str, ...] = ("never", "version", "lru", "fifo")
_ENTRY_FILE = re.compile(r"([0-9a-f]{64})\.[a-z]+")
_LOCK = ".clean.lock"
_now = time.time_ns  # the clock `touch` reads (a test moves it forward)


def default_path() -> str:
    """The default `offline_cache_file_path`: the platform's per-user cache directory for qd, read now (so a
    changed `XDG_CACHE_HOME` or `HOME` counts)."""
    import platformdirs

    return platformdirs.user_cache_dir("qd", appauthor=False)


def touch(path: str) -> None:
    """Marks the entry file `path` as used now (its access time; the modification time is kept). Best effort: a
    file another process removed meanwhile, or a read-only cache, is no error."""
    try:
        os.utime(path, ns=(_now(), os.stat(path).st_mtime_ns))
    except OSError:
        pass


@dataclasses.dataclass
class Entry:
    """One cache entry: its files, their total size, its last use and when it was written (ns)."""

    paths: list[str]
    size: int = 0
    used_ns: int = 0
    written_ns: int = 0


def entries(root: str) -> list[Entry]:
    """Every entry under `root` (see the module docstring); files that vanish while listed are left out."""
    found: dict[tuple[str, str], Entry] = {}
    try:
        kinds = [d.path for d in os.scandir(root) if d.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for kind in kinds:
        try:
            files = list(os.scandir(kind))
        except OSError:
            continue
        for f in files:
            m = _ENTRY_FILE.fullmatch(f.name)
            if m is None:
                continue
            try:
                st = f.stat(follow_symlinks=False)
            except OSError:
                continue
            e = found.setdefault((kind, m.group(1)), Entry([]))
            e.paths.append(f.path)
            e.size += st.st_size
            e.used_ns = max(e.used_ns, st.st_atime_ns, st.st_mtime_ns)
            e.written_ns = max(e.written_ns, st.st_mtime_ns)
    return list(found.values())


def victims(found: list[Entry], policy: str, max_size: int, factor: float) -> list[Entry]:
    """The entries `policy` removes from `found` (Quadrants' rule, in the module docstring)."""
    if policy not in ("lru", "fifo") or sum(e.size for e in found) < max_size:
        return []
    count = math.floor(factor * len(found))
    order = (lambda e: e.used_ns) if policy == "lru" else (lambda e: e.written_ns)
    return sorted(found, key=order)[:count]


def _remove(e: Entry) -> None:
    for path in e.paths:
        try:
            os.unlink(path)
        except OSError:  # gone already (another process discarded it), or not ours to remove
            pass


def evict(root: str, policy: str, max_size: int, factor: float) -> int:
    """Applies the cleaning rule to the cache at `root` once, unless another process is cleaning it; returns
    how many entries were removed."""
    try:
        import fcntl
    except ImportError:  # (not POSIX: cleaned unlocked; a removal that loses a race is harmless)
        fcntl = None
    try:
        lock = os.open(os.path.join(root, _LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:  # no cache there, or one that cannot be written
        return 0
    try:
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return 0
        gone = victims(entries(root), policy, max_size, factor)
        for e in gone:
            _remove(e)
        return len(gone)
    finally:
        os.close(lock)  # (releases the lock)


def clean(cfg: Any) -> None:
    """The end of a program with options `cfg`: its cache is cleaned by its policy (never an error: a program
    ends whatever the disk says)."""
    if not cfg.offline_cache or cfg.offline_cache_cleaning_policy not in ("lru", "fifo"):
        return
    root = str(cfg.offline_cache_file_path)
    try:
        n = evict(root, cfg.offline_cache_cleaning_policy, cfg.offline_cache_max_size_of_files,
                  cfg.offline_cache_cleaning_factor)
    except OSError as e:
        _logging.debug(f"offline cache {root}: not cleaned ({e})")
        return
    if n:
        _logging.debug(f"offline cache {root}: {n} entries removed ({cfg.offline_cache_cleaning_policy})")


__all__ = ["POLICIES", "Entry", "clean", "default_path", "entries", "evict", "touch", "victims"]
