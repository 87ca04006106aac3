"""The copies a `qd.ad.Tape` saves so that its reverse pass replays every read with the value the forward pass read.

The reverse pass of a kernel replays its reads after the forward launches ran (`qd/ad/reverse.py`). Where a later
launch of the Tape or a host write overwrites cells an earlier launch's gradient needs (`qd.ad.stale_reads`), the
Tape keeps a copy of the whole object from just before that overwrite, and where a kernel's gradient needs a buffer
as it was before the kernel itself wrote it (`before_launch_buffers`: `x[i] = x[i] * w`), a copy from just before
its launch. Copies are keyed by (object, generation counter): one copy serves every read that needs that state.

When the Tape replays a launch's gradient it puts the saved contents back into the live object (its own host write,
so a GPU tier's device copy is uploaded), and after the last gradient the contents the forward pass ended with.
Only primal values are copied; gradients are never touched. Objects without a generation counter (raw numpy arrays,
torch tensors passed as ndarrays) cannot be tracked: reads of those stay refused (`custom._check_stale`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd.ad.stale_reads import Launch, access_values, overlap
from qd.runtime._hostdata import HostData


def storage(owner: Any) -> HostData | None:
    """The object whose storage `owner` is (a field component's parent), when the Tape can copy and track it."""
    if getattr(type(owner), "_qd_component_view", False):  # on the class: a Field's __getattr__ costs ~5 us
        owner = owner._field
    if isinstance(owner, HostData) and getattr(owner, "_arr", None) is not None:
        return owner
    return None


@dataclass
class _Pending:
    """The reads of one launch of one object that no overwrite has reached yet."""

    launch: Launch
    buffers: set
    values: list  # the reads' `access_values`
    done: bool = False


@dataclass
class _Reads:
    """The pending reads of one object, indexed by the value each fixes in an index dimension (a write that fixes
    dimension p first looks up only the reads that fix p to the same value or leave it open). A launch's reads are
    kept as they came (`defer`) and indexed at the first write into the object after them, in the dimensions such
    writes fix: the reads of an object the Tape never writes (a controller's weights, read by every step) cost one
    list entry a launch, and those of a time-indexed state one index entry a read."""

    entries: list = field(default_factory=list)
    index: dict = field(default_factory=dict)  # dimension p -> {value or None: [(entry, read values)]}
    deferred: list = field(default_factory=list)  # (launch, its buffers of this object, their reads)

    def defer(self, launch: Launch, buffers: list, reads: list) -> None:
        self.deferred.append((launch, buffers, reads))

    def _add_deferred(self) -> None:
        for launch, buffers, reads in self.deferred:
            entry = _Pending(launch, set(buffers), list(dict.fromkeys(access_values(r, launch.args) for r in reads)))
            self.entries.append(entry)
            for p, by_value in self.index.items():
                _index(by_value, entry, p)
        self.deferred.clear()

    def _dimension(self, p: int) -> dict:
        by_value = self.index.get(p)
        if by_value is None:
            by_value = self.index[p] = {}
            for e in self.entries:
                if not e.done:
                    _index(by_value, e, p)
        return by_value

    def hits(self, wv: tuple | None) -> list[_Pending]:
        """The pending entries a write with values `wv` (None: every cell) may reach."""
        if self.deferred:
            self._add_deferred()
        fixed = [] if wv is None else [(p, v) for p, v in enumerate(wv) if v is not None]
        if not fixed:
            return [e for e in self.entries if not e.done]
        p, v = fixed[0]
        by_value = self._dimension(p)
        out = []
        for e, rv in by_value.get(v, []) + by_value.get(None, []):
            if not e.done and overlap(rv, wv) and all(e is not o for o in out):
                out.append(e)
        return out


def _index(by_value: dict, entry: _Pending, p: int) -> None:
    for rv in entry.values:
        if p < len(rv):
            by_value.setdefault(rv[p], []).append((entry, rv))


@dataclass
class _Copy:
    array: np.ndarray
    uses: int = 0


class Snapshots:
    """The copies of one Tape: saved during its forward block, put back during its reverse pass."""

    def __init__(self) -> None:
        self.copies: dict = {}  # (id(obj), generation) -> _Copy
        self.pending: dict = {}  # id(obj) -> _Reads
        self.restores: dict = {}  # call index -> {id(obj): (obj, key, before)}
        self.content: dict = {}  # id(obj) -> (key, generation right after the Tape put that copy back)
        self.final: dict = {}  # id(obj) -> (obj, its contents as the forward pass left them)
        self.made = 0
        self.bytes = 0

    # ---------------------------------------------------------------- forward block

    def _save(self, obj: HostData) -> tuple:
        key = (id(obj), obj.generation)
        if key not in self.copies:
            a = np.array(obj._host_view(), copy=True)
            self.copies[key] = _Copy(a)
            self.made += 1
            self.bytes += a.nbytes
        return key

    def _use(self, launch: Launch, obj: HostData, key: tuple, before: bool) -> None:
        plan = self.restores.setdefault(launch.call, {})
        if id(obj) not in plan:
            plan[id(obj)] = (obj, key, before)
            self.copies[key].uses += 1

    def _overwritten(self, entries: list[_Pending], obj: HostData) -> None:
        if not entries:
            return
        key = self._save(obj)
        for e in entries:
            e.done = True
            e.launch.saved |= e.buffers
            self._use(e.launch, obj, key, False)

    def launching(self, launch: Launch) -> None:
        """Before `launch` runs: saves what it overwrites of earlier launches' needed reads, and what its own
        gradient reads as it was before it; then keeps its needed reads as pending."""
        for b in launch.before:
            obj = storage(launch.owners[b])
            if obj is not None:
                self._use(launch, obj, self._save(obj), True)
        for w in launch.writes:
            obj = storage(launch.owners[w.buffer])
            reads = self.pending.get(id(obj)) if obj is not None else None
            if reads is not None:
                self._overwritten(reads.hits(access_values(w, launch.args)), obj)
        mine: dict = {}  # id(obj) -> (obj, its buffers, their reads)
        for b, reads in launch.reads_of.items():
            obj = storage(launch.owners[b])
            if obj is not None:
                e = mine.get(id(obj))
                if e is None:
                    e = mine[id(obj)] = (obj, [], [])
                e[1].append(b)
                e[2].extend(reads)
        for obj, buffers, reads in mine.values():
            self.pending.setdefault(id(obj), _Reads()).defer(launch, buffers, reads)

    def host_write(self, obj: Any) -> None:
        """Before a host write into `obj` (`from_numpy`, `fill`, `x[i] = v`, ...): saves it where a launch's
        pending read needs its current contents."""
        obj = storage(obj)
        reads = self.pending.pop(id(obj), None) if obj is not None else None
        if reads is not None:
            self._overwritten(reads.hits(None), obj)

    # ---------------------------------------------------------------- reverse pass

    def put_back(self, call: int) -> frozenset:
        """Before the gradient of call `call`: the objects its replay reads get the contents it needs. Returns the
        ids of the objects now as they were before that launch (its `before` buffers)."""
        before = set()
        for oid, (obj, key, is_before) in self.restores.get(call, {}).items():
            cur = self.content.get(oid)
            if cur is None and obj.generation == key[1]:
                pass  # never overwritten: the live contents are those
            elif cur is None or cur[0] != key or cur[1] != obj.generation:
                if oid not in self.final:
                    self.final[oid] = (obj, np.array(obj._host_view(), copy=True))
                obj.from_numpy(self.copies[key].array)
                self.content[oid] = (key, obj.generation)
            if is_before:
                before.add(oid)
        return frozenset(before)

    def release(self, call: int) -> None:
        """After the gradient of call `call`: drops the copies no earlier call needs."""
        for _, key, _ in self.restores.pop(call, {}).values():
            c = self.copies.get(key)
            if c is not None:
                c.uses -= 1
                if c.uses <= 0:
                    del self.copies[key]

    def finish(self) -> None:
        """After the reverse pass: every object the Tape changed gets back the contents the forward pass left."""
        for obj, a in self.final.values():
            obj.from_numpy(a)
        self.final.clear()
        self.content.clear()
        self.copies.clear()
        self.restores.clear()
        self.pending.clear()

    def stats(self) -> dict:
        """Copies made and their bytes (all of the forward block's, whether or not still held)."""
        return {"copies": self.made, "bytes": self.bytes}


class LaunchCopies:
    """`kernel.grad` outside a Tape: the objects one primal launch overwrites that its gradient reads as they were
    before it (`before_launch_buffers`: `x[i] = x[i] * x[i]`), copied just before that launch. The kernel keeps the
    copies of its last launch per thread, for one reverse launch: `put_back` gives the objects those contents for
    it, `restore` the contents they had when it was called. Memory: one copy of each such object per kernel and
    thread; time: one copy per launch, made only where the kernel has a buffer with a gradient."""

    def __init__(self, objs: list[HostData]) -> None:
        self.saved = {id(o): (o, np.array(o._host_view(), copy=True)) for o in objs}

    def ids(self) -> frozenset:
        return frozenset(self.saved)

    def put_back(self) -> list:
        current = []
        for obj, a in self.saved.values():
            current.append((obj, np.array(obj._host_view(), copy=True)))
            obj.from_numpy(a)
        return current

    @staticmethod
    def restore(current: list) -> None:
        for obj, a in current:
            obj.from_numpy(a)


__all__ = ["LaunchCopies", "Snapshots", "storage"]
