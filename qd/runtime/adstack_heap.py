"""The adstack heap at launch: sizes from live data, the per-thread layout, the overflow error (DESIGN §5).

Before a reverse-mode kernel with adstacks runs, every stack's serialised `SizeExpr` is evaluated by
`qd/_sizer.pyx` against the bound buffers and scalar arguments (or `qd.init(ad_stack_size=N)` forces N
slots). Stacks of one dtype share a heap: a thread's slice holds each stack's slots at its offset;
`capacity`, `offset` and the per-thread `stride` go to the `adstack.meta` buffer that the lowered
IR reads (`qd/ad/adstack.py`). Heaps are kept per kernel instance and grow on demand.

Sizes are reused while nothing they read has changed: the cache key holds the scalar arguments and,
for each buffer a size reads, the identity and generation counter of its owner (bumped by every host
write path and by kernels that write it). A buffer without a generation counter (a raw numpy array
or torch tensor), or one whose memory was shared with `to_torch(copy=False)`, is re-read at every
launch. An overflow drops the cached sizes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from qd import _sizer, ir
from qd.ad.adstack import META_WORDS
from qd.ad.sizing import buffers_read, counted_ids, reads_data
from qd.errors import QuadrantsAssertionError


class AdStackPlan:
    """Per compiled kernel instance: its stacks, their buffers, the heap and the size cache."""

    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.codes = [np.array(st.size, dtype=np.int64) for st in k.stacks]
        self.meta = next(b for b, d in enumerate(k.buffers) if d.kind == "adstack_meta")
        self.heap_of = {d.dtype: b for b, d in enumerate(k.buffers) if d.kind == "adstack"}
        self.reads = sorted(set().union(*(buffers_read(st.size) for st in k.stacks)))
        self.dynamic = any(reads_data(st.size) for st in k.stacks)
        self.counted_loops = sorted({c for st in k.stacks for c in counted_ids(st.size)})
        self.counter: Any = None  # the counting kernel's CompiledKernel when a while loop has stacks
        self.counts: np.ndarray | None = None
        self.scalar_args = [i for i, a in enumerate(k.args) if a.kind == "scalar" and a.dtype.is_int]
        self.key: Any = None
        self.sizes: list[int] = []
        self.arrays: dict[int, np.ndarray] = {}
        self.sizing_runs = 0  # how often the sizer ran (tests check that unchanged inputs reuse sizes)

    # -------------------------------------------------------------- sizes

    def cache_key(self, owners: Sequence[Any], args: Sequence[Any], forced: int) -> Any:
        if self.counter is not None:
            return None  # while-loop counts come from this launch's counting kernel
        parts: list[Any] = [forced]
        for b in self.reads:
            owner = owners[b]
            gen = getattr(owner, "generation", None)
            if gen is None or getattr(owner, "escaped", False):
                return None  # no counter, or memory shared outside qd's write paths: always re-evaluate
            parts.append((id(owner), gen))
        parts += [int(args[i]) for i in self.scalar_args]
        return tuple(parts)

    def evaluate(self, arrays: Sequence[Any], args: Sequence[Any]) -> list[int]:
        """Every stack's size, computed now from the bound data."""
        ints = np.zeros(max(1, len(self.k.args)), dtype=np.int64)
        for i in self.scalar_args:
            ints[i] = int(args[i])
        bound = [a if b in self.reads else None for b, a in enumerate(arrays)]
        self.sizing_runs += 1
        return [int(_sizer.eval_size(code, bound, ints, _sizer.GUARD, self.counts)) for code in self.codes]

    def sizes_for(self, owners: Sequence[Any], arrays: Sequence[Any], args: Sequence[Any], forced: int) -> list[int]:
        if forced > 0:
            return [forced] * len(self.codes)
        key = self.cache_key(owners, args, forced) if self.dynamic else ("const",)
        if key is None or key != self.key:
            self.sizes = self.evaluate(arrays, args)
            self.key = key
        return self.sizes

    # -------------------------------------------------------------- heap

    def bind(self, arrays: list, owners: Sequence[Any], args: Sequence[Any], nthreads: int, forced: int) -> None:
        """Fills `arrays` (by buffer index) with the meta buffer and the heaps for this launch."""
        sizes = self.sizes_for(owners, arrays, args, forced)
        meta = np.zeros(max(1, len(sizes) * META_WORDS), dtype=np.int64)
        stride: dict = {}
        for k, (st, n) in enumerate(zip(self.k.stacks, sizes)):
            cap = max(1, n)
            meta[k * META_WORDS] = cap
            meta[k * META_WORDS + 1] = stride.get(st.dtype, 0)
            stride[st.dtype] = stride.get(st.dtype, 0) + cap
        for k, st in enumerate(self.k.stacks):
            meta[k * META_WORDS + 2] = stride[st.dtype]
        arrays[self.meta] = meta
        for dt, b in self.heap_of.items():
            need = max(1, nthreads) * stride[dt]
            heap = self.arrays.get(b)
            if heap is None or heap.shape[0] < need:
                heap = self.arrays[b] = np.empty(max(need, 2 * (0 if heap is None else heap.shape[0])),
                                                 dtype=dt.np_dtype)
            arrays[b] = heap

    # -------------------------------------------------------------- overflow

    def overflow_error(self, check: ir.CheckDecl, count: int, cap: int, tid: int, forced: int,
                       arrays: Sequence[Any], args: Sequence[Any]) -> QuadrantsAssertionError:
        k = int(check.message.split()[1])
        st = self.k.stacks[k]
        self.key = None  # size again at the next launch
        try:
            recomputed = str(self.evaluate(arrays, args)[k])
        except RuntimeError as e:
            recomputed = f"unknown ({e})"
        where = f"{st.loc.file}:{st.loc.line}" if st.loc else "?"
        why = (f"ad_stack_size={forced} forces {cap} slots" if forced > 0 else
               "the data its size was computed from changed during the launch")
        return QuadrantsAssertionError(
            f"Adstack overflow: kernel {self.k.name}, adstack {k} ({st.name}, loop at {where}), thread {tid}: "
            f"{cap} slots per thread were allocated and push {count + 1} did not fit; the size re-computed from "
            f"the current data is {recomputed}. Cause: {why}. Remedy: "
            + ("raise ad_stack_size in qd.init, or leave it 0 to size every stack exactly." if forced > 0 else
               "do not change the loop bounds' data inside the kernel that uses them, or set "
               "qd.init(ad_stack_size=N) with N large enough."))


__all__ = ["AdStackPlan"]
