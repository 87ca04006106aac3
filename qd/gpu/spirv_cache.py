"""The on-disk cache of SPIR-V modules (`offline_cache`, `offline_cache_file_path`/vulkan), with the CPU tier's
key scheme (`qd/jit/cache.py`): an entry is every task's words (one binary file) plus a pickle of the context
layout and per-task facts, keyed by the IR text, the device's capabilities, fast_math, the qd version and the
sources of the SPIR-V emitter; written atomically, and a corrupt or stale entry reads as a miss.
"""

from __future__ import annotations

import os

import numpy as np

from qd import ir
from qd.gpu import spirv
from qd.jit import cache as _cache

def key(k: ir.KernelIR, device_key: str, fast_math: bool) -> str:
    digest = _cache.sources_digest(os.path.dirname(__file__), "spirv")
    return _cache.key_for(k, f"spirv {device_key} {digest}", fast_math)


def store(directory: str, key_: str, sk: spirv.SpirvKernel) -> None:
    words = b"".join(np.asarray(t.words, dtype=np.uint32).tobytes() for t in sk.tasks)  # a kernel may have no task
    meta = ([len(t.words) for t in sk.tasks], [t.local_size for t in sk.tasks], [t.reduces for t in sk.tasks],
            list(sk.ctx))
    _cache.store(directory, key_, words, meta)


def load(directory: str, key_: str, k: ir.KernelIR) -> spirv.SpirvKernel | None:
    """The cached kernel of offloaded `k`, or None (a miss)."""
    hit = _cache.load(directory, key_)
    if hit is None:
        return None
    raw, (lengths, sizes, reduces, ctx) = hit
    words = np.frombuffer(raw, dtype=np.uint32)
    if len(lengths) != len(k.tasks) or sum(lengths) != len(words):
        return None
    tasks, pos = [], 0
    for t, n, ls, red in zip(k.tasks, lengths, sizes, reduces):
        tasks.append(spirv.SpirvTask(t.kind, words[pos:pos + n].tolist(), ls, t, red))
        pos += n
    return spirv.assemble(k, tasks, [tuple(c) for c in ctx])


__all__ = ["key", "load", "store"]
