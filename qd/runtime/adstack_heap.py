"""The adstack heap at launch: sizes from live data, the per-thread layout, the overflow error (DESIGN §5).

Before a reverse-mode kernel with adstacks runs, every stack's serialised `SizeExpr` is evaluated by
`qd/_sizer.pyx` against the bound buffers and scalar arguments (or `qd.init(ad_stack_size=N)` forces N
slots). Stacks of one dtype share a heap: a thread's slice holds each stack's slots at its offset;
`capacity`, `offset` and the per-thread `stride` go to the `adstack.meta` buffer that the lowered
IR reads (`qd/ad/adstack.py`). On the CPU tiers the heaps belong to a launch state (`AdStackHeap`, one per
`qd.runtime.launch._Scratch`: launches of one instance from several Python threads never share rows) and
grow on demand; the sizes and their cache belong to the instance and are computed under its `lock`.

Sizes are reused while nothing they read has changed: the cache key holds the scalar arguments and,
for each buffer a size reads, the identity and generation counter of its owner (bumped by every host
write path and by kernels that write it). A buffer without a generation counter (a raw numpy array
or torch tensor), or one whose memory was shared with `to_torch(copy=False)`, is re-read at every
launch. An overflow drops the cached sizes.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Sequence

import numpy as np

from qd import _sizer, ir
from qd.ad.adstack import META_WORDS
from qd.ad.maxreducer import Spec, recognize, substitute
from qd.ad.reducer_task import spec_kernel
from qd.ad.sizing import buffers_read, counted_ids, reads_data
from qd.errors import QuadrantsAssertionError, QuadrantsRuntimeError
from qd.jit.lanes import lanes_for


class AdStackHeap:
    """The heaps and meta words of one launch state: a launch has them to itself while it runs."""

    def __init__(self) -> None:
        self.layout: Any = None  # (sizes, heap rows) the meta words and heaps were laid out for
        self.meta_words: np.ndarray | None = None
        self.arrays: dict[int, np.ndarray] = {}  # buffer index -> heap


class AdStackPlan:
    """Per compiled kernel instance: its stacks, their buffers and the size cache (the heaps: `AdStackHeap`)."""

    def __init__(self, k: ir.KernelIR) -> None:
        self.k = k
        self.codes = [tuple(st.size) for st in k.stacks]
        self.distinct = list(dict.fromkeys(self.codes))  # stacks of one loop share one size: sized once
        self.meta = next(b for b, d in enumerate(k.buffers) if d.kind == "adstack_meta")
        self.heap_of = {d.dtype: b for b, d in enumerate(k.buffers) if d.kind == "adstack"}
        self.reads = sorted(set().union(*(buffers_read(st.size) for st in k.stacks)))
        self.dynamic = any(reads_data(st.size) for st in k.stacks)
        self.counted_loops = sorted({c for st in k.stacks for c in counted_ids(st.size)})
        self.counter: Any = None  # the counting kernel's CompiledKernel when a while loop has stacks
        self.counts: np.ndarray | None = None
        self.scalar_args = [i for i, a in enumerate(k.args) if a.kind == "scalar" and a.dtype.is_int]
        # the sizes, their cache and the while-loop counts, shared by the instance's launches: read and written
        # under this lock (re-entrant: sizing may launch the reducer kernels, and an overflow sizes again)
        self.lock = threading.RLock()
        self.key: Any = None
        self.sizes: list[int] = []
        self.sizing_runs = 0  # how often the sizer ran (tests check that unchanged inputs reuse sizes)
        self.spec_cache: dict = {}  # (size code, node) -> (inputs key, value) of recognized MaxOverRanges
        self.first_round: dict[tuple, list[Spec]] = {}  # size code -> its recognized specs
        self.task_kernels: dict[tuple, Any] = {}  # spec code -> its compiled reducer kernel (QD_MAXREDUCER=task)
        self.arrays_of: dict[tuple, np.ndarray] = {}  # code words as the int64 arrays the sizer reads
        self.nthreads = 1  # the CPU threads of the last launch (the parallel max-reducer runs on as many)
        self.last_heap: AdStackHeap | None = None  # the heap of the last launch (the benchmarks report it)
        # heap rows per launch thread: the CPU tier may run the kernel's bodies in SIMD lanes, a row each
        self.lanes = lanes_for(k)
        # on a GPU arch: `bound` holds the buffers' owners (device-resident), recognized specs run as the
        # generated reducer kernel on the device (64-bit atomic max where `wide`), host copies only for the walk
        self.device = False
        self.wide = True

    # -------------------------------------------------------------- sizes

    def cache_key(self, owners: Sequence[Any], args: Sequence[Any], forced: int) -> Any:
        if self.counter is not None:
            return None  # while-loop counts come from this launch's counting kernel
        key = _inputs_key(self.reads, owners)
        return None if key is None else (forced, key, tuple(int(args[i]) for i in self.scalar_args))

    def evaluate(self, arrays: Sequence[Any], args: Sequence[Any], owners: Sequence[Any] | None = None) -> list[int]:
        """Every stack's size, computed now from the bound data: recognized `MaxOverRange`s in parallel
        (cached per node while their inputs are unchanged), the rest by the serial walk."""
        ints = np.zeros(max(1, len(self.k.args)), dtype=np.int64)
        for i in self.scalar_args:
            ints[i] = int(args[i])
        bound = [a if b in self.reads else None for b, a in enumerate(arrays)]
        with self.lock:
            self.sizing_runs += 1
            value = {code: self.size_or_raise(code, bound, ints, owners, args) for code in self.distinct}
        return [value[code] for code in self.codes]

    def size_or_raise(self, code: tuple, bound: list, ints: np.ndarray, owners: Sequence[Any] | None,
                      args: Sequence[Any] = ()) -> int:
        """`size_of`, with the sizer's errors (a walk past its guard, a read out of range) told as a Quadrants
        error naming the kernel, the stack's loop and what to do."""
        try:
            return self.size_of(code, bound, ints, owners, args)
        except QuadrantsRuntimeError:
            raise
        except RuntimeError as e:
            raise self.sizing_error(self.codes.index(code), str(e)) from None

    def sizing_error(self, k: int, why: str) -> QuadrantsRuntimeError:
        st = self.k.stacks[k]
        where = f"{st.loc.file}:{st.loc.line}" if st.loc else "?"
        remedy = ("set qd.init(ad_stack_size=N) with N at least the loop's largest trip count (the sizer is then "
                  "skipped), or give the loops around it bounds that do not follow each other's indices"
                  if "guard" in why else "check the data the loop's bounds read")
        why = why.removeprefix("adstack sizing: ")
        return QuadrantsRuntimeError(f"Adstack sizing failed: kernel {self.k.name}, adstack {k} ({st.name}) of the loop "
                                     f"at {where}: {why}. qd never truncates a size. Remedy: {remedy}.")

    def size_of(self, code: tuple, bound: list, ints: np.ndarray, owners: Sequence[Any] | None,
                args: Sequence[Any] = ()) -> int:
        if code not in self.first_round:  # recognition depends on the code only: done once per plan
            self.first_round[code] = recognize(code)
        specs = self.first_round[code]
        if not specs:
            return int(_sizer.eval_size(self.array_of(code), _host(bound), ints, _sizer.GUARD, self.counts))
        words = list(code)
        while specs:  # rounds: a spec whose bounds held another spec is recognized once that one is a Const
            for sp in specs:
                substitute(words, sp.node, self.spec_value(code, sp, bound, ints, owners, args))
            specs = recognize(words)
        rest = _host(bound) if reads_data(tuple(words)) else [None] * len(bound)
        return int(_sizer.eval_size(np.array(words, dtype=np.int64), rest, ints, _sizer.GUARD, self.counts))

    def task_value(self, sp: Spec, bound: list, args: Sequence[Any]) -> int:
        """The spec evaluated by its generated qd kernel (`qd/ad/reducer_task.py`) on the launch's tier:
        the GPU tiers' path, selectable on the CPU tiers with QD_MAXREDUCER=task (tests compare both)."""
        from qd.runtime.launch import compile_kernel
        from qd.runtime.tiers import launch_inner

        wide = self.wide if self.device else MAXREDUCER_WIDE
        ck = self.task_kernels.get((sp.code, wide))
        if ck is None:
            ck = self.task_kernels[(sp.code, wide)] = compile_kernel(spec_kernel(self.k, sp.code, wide=wide))
            ck.counts = np.zeros(2, dtype=np.int64 if wide else np.uint32)
        ck.counts[:] = 0
        launch_inner(ck, bound, args)
        if int(ck.counts[1]):
            raise RuntimeError("adstack sizing: a trip count does not fit the 32-bit max-reducer; qd refuses to "
                               "truncate it")
        return int(ck.counts[0])

    def array_of(self, code: tuple) -> np.ndarray:
        arr = self.arrays_of.get(code)
        if arr is None:
            arr = self.arrays_of[code] = np.array(code, dtype=np.int64)
        return arr

    def spec_value(self, code: tuple, sp: Spec, bound: list, ints: np.ndarray, owners: Sequence[Any] | None,
                   args: Sequence[Any] = ()) -> int:
        inputs = None if owners is None else _inputs_key(sorted(sp.buffers), owners)
        if inputs is not None:
            inputs = (inputs, tuple(int(ints[a]) for a in sorted(sp.args)))
            hit = self.spec_cache.get((code, sp.node, sp.code))
            if hit is not None and hit[0] == inputs:
                return hit[1]
        global _dispatches
        _dispatches += 1
        if MAXREDUCER_TASKS or self.device:
            _sizer.check_spec_walk(self.array_of(sp.code), _host(bound), ints)  # no unbounded walk on the device
            value = self.task_value(sp, bound, args)
        else:
            value = int(_sizer.eval_max_parallel(self.array_of(sp.code), _host(bound), ints, self.nthreads))
        if inputs is not None:
            self.spec_cache[(code, sp.node, sp.code)] = (inputs, value)
        return value

    def sizes_for(self, owners: Sequence[Any], arrays: Sequence[Any], args: Sequence[Any], forced: int) -> list[int]:
        if forced > 0:
            return [forced] * len(self.codes)
        key = self.cache_key(owners, args, forced) if self.dynamic else ("const",)
        with self.lock:
            if key is None or key != self.key:
                self.sizes = self.evaluate(arrays, args, owners)
                self.key = key
            return self.sizes

    # -------------------------------------------------------------- heap

    def bind(self, arrays: list, owners: Sequence[Any], args: Sequence[Any], nthreads: int, forced: int,
             heap: AdStackHeap | None = None) -> None:
        """Fills `arrays` (by buffer index) with the meta buffer and the heaps of `heap` (the launch's own; a new
        one if None) for this launch (a slice per thread and lane: `lanes`); the layout of the heap's previous
        launch is reused as it is when the sizes and threads are the same."""
        heap = AdStackHeap() if heap is None else heap
        nthreads = max(1, nthreads)
        rows = nthreads * self.lanes
        with self.lock:
            self.nthreads = nthreads
            sizes = self.sizes_for(owners, arrays, args, forced)
        layout = (tuple(sizes), rows)
        if layout != heap.layout:
            self.lay_out(heap, sizes, rows)
            heap.layout = layout
        arrays[self.meta] = heap.meta_words
        for b, arr in heap.arrays.items():
            arrays[b] = arr
        self.last_heap = heap

    def lay_out(self, heap: AdStackHeap, sizes: Sequence[int], rows: int) -> None:
        """Meta words and heaps for `rows` contiguous slices (one per thread, or per lane of a thread)."""
        heap.meta_words, stride = self.meta_for(sizes)
        for dt, b in self.heap_of.items():  # grown on demand, never shrunk
            need = rows * stride[dt]
            arr = heap.arrays.get(b)
            if arr is None or arr.shape[0] < need:
                heap.arrays[b] = np.empty(max(need, 2 * (0 if arr is None else arr.shape[0])), dtype=dt.np_dtype)

    def meta_for(self, sizes: Sequence[int], rows: int = 0) -> tuple[np.ndarray, dict]:
        """The `adstack.meta` words (per stack: capacity, offset, stride, step; `qd/ad/adstack.py`) and the
        slots a thread needs per heap dtype. `rows` > 0: the threads' stacks interleaved over that many heap
        rows (the GPU tiers: a warp's accesses are adjacent); 0: a contiguous slice per thread."""
        meta = np.zeros(max(1, len(sizes) * META_WORDS), dtype=np.int64)
        stride: dict = {}
        for k, (st, n) in enumerate(zip(self.k.stacks, sizes)):
            cap = max(1, n)
            meta[k * META_WORDS] = cap
            meta[k * META_WORDS + 1] = stride.get(st.dtype, 0) * max(1, rows)
            stride[st.dtype] = stride.get(st.dtype, 0) + cap
        for k, st in enumerate(self.k.stacks):
            meta[k * META_WORDS + 2] = 1 if rows else stride[st.dtype]
            meta[k * META_WORDS + 3] = rows if rows else 1
        return meta, stride

    # -------------------------------------------------------------- overflow

    def overflow_error(self, check: ir.CheckDecl, count: int, cap: int, tid: int, forced: int,
                       arrays: Sequence[Any], args: Sequence[Any]) -> QuadrantsAssertionError:
        k = int(check.message.split()[1])
        st = self.k.stacks[k]
        with self.lock:
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


def _host(bound: Sequence[Any]) -> list:
    """The host arrays of `bound` (owners on a GPU arch: their host copies, synced; arrays as they are)."""
    return [getattr(a, "arr", a) if a is not None else None for a in bound]


def _inputs_key(buffers: Sequence[int], owners: Sequence[Any]) -> tuple | None:
    """Identity and generation of the owner of every buffer in `buffers`, or None when one cannot be
    trusted to change its generation on writes (a raw array, or storage shared outside qd). Owners
    are held weakly: a freed owner's entry never matches a new object at the same address."""
    parts = []
    for b in buffers:
        owner = owners[b]
        gen = getattr(owner, "generation", None)
        if gen is None or getattr(owner, "escaped", False) or getattr(owner, "device_shared", False):
            return None
        try:
            parts.append((weakref.ref(owner), gen))
        except TypeError:
            return None
    return tuple(parts)


# QD_MAXREDUCER=task runs recognized specs as generated qd kernels (the GPU tiers' path) instead of the
# Cython reduction; QD_MAXREDUCER=task32 uses the 32-bit atomic variant. Read at import (tests set them).
MAXREDUCER_TASKS = os.environ.get("QD_MAXREDUCER", "") in ("task", "task32")
MAXREDUCER_WIDE = os.environ.get("QD_MAXREDUCER", "") != "task32"

_dispatches = 0  # parallel max-reducer evaluations (Quadrants' test hook: the program's dispatch count)


def dispatch_count() -> int:
    return _dispatches


def reset_dispatch_count() -> None:
    global _dispatches
    _dispatches = 0


__all__ = ["AdStackHeap", "AdStackPlan", "dispatch_count", "reset_dispatch_count"]
