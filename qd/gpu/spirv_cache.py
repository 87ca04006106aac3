"""The on-disk cache of SPIR-V modules (`offline_cache`, `offline_cache_file_path`/vulkan), with the CPU tier's
key scheme (`qd/codegen/cache.py`): an entry is every task's words (one binary file) plus a pickle of the context
layout and per-task facts, keyed by the IR text, the device's capabilities, fast_math, the qd version and the
sources of the SPIR-V emitter; written atomically, and a corrupt or stale entry reads as a miss.

An entry whose digest matches but whose modules are no SPIR-V a driver can take (issue 27 item 13) is a miss that
deletes it: words that do not split into the tasks, a module whose header or instruction stream is broken
(`problem`), or one the driver then refuses (the tier calls `discard` and builds afresh). Until the tier has made
its pipelines (`confirm`), the entry's marker names the process: one that crashed the driver is deleted by the
next process (`qd.codegen.cache.load_with`).
"""

from __future__ import annotations

import os

import numpy as np

from qd import ir
from qd.codegen import cache as _cache
from qd.gpu import spirv


def key(k: ir.KernelIR, device_key: str, fast_math: bool) -> str:
    digest = _cache.sources_digest(os.path.dirname(__file__), "spirv")
    return _cache.key_for(k, f"spirv {device_key} {digest}", fast_math)


def store(directory: str, key_: str, sk: spirv.SpirvKernel) -> None:
    words = b"".join(np.asarray(t.words, dtype=np.uint32).tobytes() for t in sk.tasks)  # a kernel may have no task
    meta = ([len(t.words) for t in sk.tasks], [t.local_size for t in sk.tasks], [t.reduces for t in sk.tasks],
            list(sk.ctx))
    _cache.store(directory, key_, words, meta)


_MAGIC = 0x07230203
_MAX_BOUND = 1 << 22  # far above any module qd emits


def problem(words: np.ndarray) -> str | None:
    """Why `words` are no well-formed SPIR-V module (header, then instructions whose word counts tile the rest),
    or None. What a driver may still refuse (operands, ids, types) it reports as an error, which `discard`s."""
    if len(words) < 5 or int(words[0]) != _MAGIC:
        return "no SPIR-V header"
    version, bound, schema = int(words[1]), int(words[3]), int(words[4])
    if version & 0xFF0000FF or not 0x10000 <= version <= 0x10600 or not 0 < bound <= _MAX_BOUND or schema:
        return f"SPIR-V header version {version:#x}, bound {bound}, schema {schema}"
    counts = (words >> 16).tolist()
    pos, n = 5, len(words)
    while pos < n:
        wc = counts[pos]
        if wc == 0 or pos + wc > n:
            return f"the instruction at word {pos} has {wc} words of {n - pos} left"
        pos += wc
    return None


def _kernel(raw: bytes, meta: tuple, k: ir.KernelIR) -> spirv.SpirvKernel:
    """The kernel of a cache entry (`load`'s loader): ValueError where its words are not its tasks' modules."""
    lengths, sizes, reduces, ctx = meta
    if len(raw) % 4:
        raise ValueError("SPIR-V words of an odd size")
    words = np.frombuffer(raw, dtype=np.uint32)
    if len(lengths) != len(k.tasks) or sum(lengths) != len(words) or not len(sizes) == len(reduces) == len(lengths):
        raise ValueError("the words do not split into the kernel's tasks")
    tasks, pos = [], 0
    for t, n, ls, red in zip(k.tasks, lengths, sizes, reduces):
        why = problem(words[pos:pos + n])
        if why is not None:
            raise ValueError(f"cached SPIR-V refused: {why}")
        tasks.append(spirv.SpirvTask(t.kind, words[pos:pos + n].tolist(), int(ls), t, bool(red)))
        pos += n
    return spirv.assemble(k, tasks, [tuple(c) for c in ctx])


def load(directory: str, key_: str, k: ir.KernelIR) -> spirv.SpirvKernel | None:
    """The cached kernel of offloaded `k`, or None (a miss; a bad entry is deleted). A kernel that comes back is on
    probation until `confirm` (see the module docstring)."""
    return _cache.load_with(directory, key_, lambda raw, meta: _kernel(raw, meta, k), until_confirmed=True)


def confirm(directory: str, key_: str) -> None:
    """The driver made pipelines of the entry's modules: it is sound."""
    _cache.confirm(directory, key_)


def discard(directory: str, key_: str) -> None:
    """The driver refused the entry's modules: deleted (the tier builds them afresh)."""
    _cache.discard(directory, key_)


__all__ = ["confirm", "discard", "key", "load", "problem", "store"]
