"""The device runtime shared by every GPU tier (GPU.md §1-2): device-resident data with lazily synced host
mirrors, asynchronous launches, and errors and prints that come back at the next synchronising point.

A tier adds a *backend*, a `qd.gpu.backend.DeviceBackend` (the declared protocol: an allocator, a copy
engine, a compiler, a launcher and its completion, the device's caps and grid sizes; optional parts have
defaults there). Everything else lives here and in `qd/runtime/device_launch.py`.

- **Mirrors.** A field or ndarray used on a GPU arch gets a `Mirror`: its device buffer and two dirty flags.
  `HostData.arr` (every host read and write goes through it) calls `Mirror.to_host` when the device copy is
  newer; every host write path calls `_bump`, which marks the host copy newer, uploaded before the next
  launch that binds it. A kernel that writes a buffer marks the device copy newer (and bumps the generation
  counter, as on the CPU tiers).
- **Pending launches.** A launch enqueues work and returns; its record (slot, prints, what to copy back) waits
  in `pending`. `sync()` waits for all of it, then reads every record in launch order: prints are flushed,
  the first failure is raised (the others' records are still released). Host reads sync; each launch first
  collects finished records (`poll`), so an error also surfaces at the next launch, Quadrants' "raised at
  the next Python entry". Uploads wait for pending work first (it may still read the old contents).
- **Slots.** The small host-visible buffer of one launch (status, print length, returns, context words) comes
  from a free list and goes back when its record is read.
"""

from __future__ import annotations

import atexit
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from qd.gpu.backend import DeviceBackend
from qd.runtime import program

MAX_PENDING = 64  # launches in flight before a launch waits for the oldest (bounds slot memory)


class Mirror:
    """The device copy of one field or ndarray."""

    __slots__ = ("rt", "buf", "nbytes", "host_dirty", "device_dirty", "shared", "__weakref__")

    def __init__(self, rt: "DeviceRuntime", nbytes: int) -> None:
        self.rt, self.nbytes = rt, nbytes
        self.buf = rt.backend.alloc(nbytes)
        self.host_dirty = True
        self.device_dirty = False
        # the device copy is shared outside qd (`share`): it is the data; host reads download it every time
        # (`device_dirty` stays set) and host writes are uploaded at once
        self.shared = False

    def to_host(self, arr: np.ndarray) -> None:
        """Bring the host copy up to date: waits for pending work (raising its errors), then downloads."""
        with self.rt.lock:
            self.rt.sync()
            if self.device_dirty:
                self.rt.backend.download(self.buf, arr)
                self.device_dirty = self.shared

    def read(self, offset: int, nbytes: int) -> bytes:
        """`nbytes` of the device copy at `offset` (waits for pending work first, raising its errors)."""
        self.rt.sync()
        out = np.empty(nbytes, np.uint8)
        self.rt.backend.download(self.buf, out, offset)
        return out.tobytes()

    def write(self, offset: int, data: bytes) -> None:
        """Writes `data` into the device copy at `offset` (after pending work, which may still read it)."""
        with self.rt.lock:
            self.rt.wait_all()
            self.rt.backend.upload(self.buf, np.frombuffer(data, np.uint8), offset)

    def fill(self, value: np.ndarray) -> bool:
        """Fills the device copy with one element `value` on the device, in order with the launches (the host
        copy is then older: downloaded when read); False when the element is no repeated 32-bit pattern (the
        caller then writes the host copy)."""
        raw = np.ascontiguousarray(value).tobytes()
        if len(set(raw)) == 1:
            word = raw[:1] * 4
        elif len(raw) in (2, 4) or (len(raw) % 4 == 0 and raw == raw[:4] * (len(raw) // 4)):
            word = (raw * 2)[:4]
        else:
            return False
        pattern = int.from_bytes(word, "little")
        with self.rt.lock:
            self.rt.submit(Record(self.rt.backend.fill(self.buf, self.nbytes, pattern), lambda: None))
        self.host_dirty, self.device_dirty = False, True
        return True

    def to_device(self, arr: np.ndarray) -> Any:
        if self.host_dirty:
            self.rt.wait_all()
            self.rt.backend.upload(self.buf, arr)
            self.host_dirty = False
        return self.buf

    def share(self, arr: np.ndarray) -> None:
        """From now on the device copy is reached outside qd (a torch tensor over it): brought up to date, with
        the launches before it done, and the source of every host read from then on."""
        with self.rt.lock:
            self.to_device(arr)
            self.rt.sync()
            self.shared = self.device_dirty = True

    def __del__(self) -> None:
        try:
            self.rt.free_later(self.buf)
        except Exception:  # interpreter shutdown
            pass


@dataclass(slots=True)
class Record:
    """One launch in flight: what its completion must be checked and released for."""

    work: Any
    finish: Callable[[], BaseException | None]  # reads status and prints; returns the error to raise, if any
    release: list = field(default_factory=list)  # (pool key, buffer) pairs to recycle


class DeviceRuntime:
    """One GPU arch's device in this process (kept across `qd.init`: opening a device is slow)."""

    def __init__(self, backend: DeviceBackend) -> None:
        self.backend = backend
        self.lock = threading.RLock()  # launches, syncs and host transfers from several Python threads
        self.pending: list[Record] = []
        self.pool: dict[Any, list] = {}
        self.dead: list = []  # buffers whose owners died while work may still use them
        # the C launchers (`qd._launch.CudaRunner`) with launches since the last sync: their launches have no
        # records; `sync` waits for the stream and collects their status
        self.runners: list = []
        self.dead_after: list = []  # (buffer, event after the work that may use it): freed once it is done

    # ------------------------------------------------------------ buffers
    def mirror_of(self, hd: Any) -> Mirror:
        """The device buffer of field/ndarray `hd`, made on first use, brought up to date."""
        m = hd._mirror
        arr = hd._arr
        if m is None or m.rt is not self or m.nbytes != arr.nbytes:
            m = hd._mirror = Mirror(self, arr.nbytes)
        if hd.escaped:  # the storage is shared outside qd: writes may have bypassed `_bump`
            m.host_dirty = True
        m.to_device(arr)
        return m

    def take(self, key: Any, make: Callable[[], Any]) -> Any:
        """A pooled buffer (slots, print buffers, scratch) for one launch; give it back with the record."""
        free = self.pool.get(key)
        return free.pop() if free else make()

    def scratch(self, nbytes: int, host: bool = False) -> tuple[Any, Any]:
        """(pool key, buffer) of at least `nbytes` (sizes rounded up to a power of two)."""
        size = 1 << max(8, (max(1, int(nbytes)) - 1).bit_length())
        key = ("scratch", size, host)
        return key, self.take(key, lambda: self.backend.alloc(size, host))

    def free_later(self, buf: Any) -> None:
        if self.runners:  # launches without records in flight: freed after the work enqueued so far
            self._reap()
            self.dead_after.append((buf, self.backend.fence()))
        elif self.pending:
            self.dead.append(buf)
        else:
            self.backend.free(buf)

    def _reap(self, all_done: bool = False) -> None:
        """Frees the buffers of `dead_after` whose work is done (all of them after a full synchronisation)."""
        todo, self.dead_after = self.dead_after, []  # (a free can collect a mirror, which calls back here)
        for buf, ev in todo:
            if all_done or self.backend.done(ev):
                self.backend.wait(ev)
                self.backend.free(buf)
            else:
                self.dead_after.append((buf, ev))

    # ------------------------------------------------------------ pending work
    def submit(self, rec: Record) -> None:
        self.pending.append(rec)
        if len(self.pending) > MAX_PENDING:
            for old in self.pending:  # the oldest launch still in flight (those before were waited for)
                if old.work is not None:
                    self.backend.wait(old.work)
                    old.work = None
                    break

    def wait_all(self) -> None:
        """Waits for every launch in flight; their records stay for `sync` to read."""
        for rec in self.pending:
            if rec.work is not None:
                self.backend.wait(rec.work)
                rec.work = None
        if self.runners:
            self.backend.synchronize()

    def poll(self) -> None:
        """Reads the records of launches that have finished, in order; raises the first failure."""
        with self.lock:
            self._poll()

    def _poll(self) -> None:
        done = 0
        for rec in self.pending:
            if rec.work is not None and not self.backend.done(rec.work):
                break
            done += 1
        if done:
            self._read(done)

    def sync(self) -> None:
        """Waits for all work, then reads every record in launch order; raises the first failure."""
        with self.lock:
            if not self.pending and not self.runners:
                return
            self.wait_all()
            runners, self.runners = self.runners, []
            self._reap(all_done=True)
            try:
                self._read(len(self.pending))
            finally:  # after the records' errors (launched first, as a rule): the runners'
                errors = [e for e in (r.collect() for r in runners) if e is not None]
            if errors:
                raise errors[0]

    def _read(self, n: int) -> None:
        recs, self.pending = self.pending[:n], self.pending[n:]
        first: BaseException | None = None
        for rec in recs:
            if rec.work is not None:
                self.backend.wait(rec.work)
                rec.work = None
            try:
                err = rec.finish()
            except BaseException as e:  # never lose the release of the others
                err = e
            if err is not None and first is None:
                first = err
            for key, buf in rec.release:
                self.pool.setdefault(key, []).append(buf)
        if not self.pending and not self.runners:
            for buf in self.dead:
                self.backend.free(buf)
            self.dead.clear()
        if first is not None:
            raise first


# ------------------------------------------------------------------ the runtime of each GPU arch

_FACTORIES: dict[str, Callable[[], Any]] = {}
_RUNTIMES: dict[str, DeviceRuntime] = {}
_FAILED: dict[str, str] = {}


def register(arch_name: str, factory: Callable[[], Any]) -> None:
    _FACTORIES[arch_name] = factory


_OPENING = threading.Lock()


def runtime(arch_name: str) -> DeviceRuntime:
    """The runtime of a GPU arch, its device opened on first use (once, whichever threads ask for it first);
    RuntimeError saying why it cannot be."""
    rt = _RUNTIMES.get(arch_name)
    if rt is not None:
        return rt
    with _OPENING:
        rt = _RUNTIMES.get(arch_name)
        if rt is not None:
            return rt
        if arch_name in _FAILED:
            raise RuntimeError(_FAILED[arch_name])
        try:
            backend = _FACTORIES[arch_name]()
        except Exception as e:
            _FAILED[arch_name] = f"qd: the {arch_name} device could not be opened: {e}"
            raise RuntimeError(_FAILED[arch_name]) from None
        import qd.runtime.device_launch  # noqa: F401  the launcher, loaded with the device, not at the first launch
        rt = _RUNTIMES[arch_name] = DeviceRuntime(backend)
    return rt


def probe(arch_name: str) -> Callable[[], bool]:
    def run() -> bool:
        try:
            runtime(arch_name)
        except RuntimeError:
            return False
        return True
    return run


def reason(arch_name: str) -> Callable[[], str]:
    return lambda: _FAILED.get(arch_name, f"the {arch_name} device is not available")


def current() -> DeviceRuntime | None:
    """The runtime of the current program's arch when it is a GPU arch, else None."""
    from qd.base import config

    a = config.current().arch
    if not getattr(a, "is_gpu", False):
        return None
    return runtime(a.name)


def started(cfg: Any) -> None:
    """`qd.init` started a program on a GPU arch: its backend may prepare (`CudaBackend.started`)."""
    runtime(cfg.arch.name).backend.started(cfg)


def sync_all() -> None:
    for rt in list(_RUNTIMES.values()):
        rt.sync()


def _on_reset() -> None:
    """`qd.reset()` / a new `qd.init`: pending work finishes; an error it recorded belongs to the program that
    ended, so it is reported as a warning here rather than raised into the next one (never dropped)."""
    import warnings

    from qd.errors import QuadrantsWarning

    for rt in list(_RUNTIMES.values()):
        try:
            rt.sync()
        except Exception as e:
            warnings.warn(f"qd: a kernel error was pending when the program was reset: {type(e).__name__}: {e}",
                          QuadrantsWarning, stacklevel=2)


program.on_reset(_on_reset)


def _at_exit() -> None:
    """A kernel error still pending when the program ends is reported, never dropped."""
    import sys

    for rt in list(_RUNTIMES.values()):
        try:
            rt.sync()
        except Exception as e:
            print(f"qd: a kernel error was pending at exit (raised at qd.sync(), which the program never called): "
                  f"{type(e).__name__}: {e}", file=sys.stderr)


atexit.register(_at_exit)


def _register_tiers() -> None:
    from qd import extension as _ext
    from qd.base import arch as _arch

    def vulkan() -> Any:
        from qd.gpu.vulkan_tier import VulkanBackend

        return VulkanBackend()
    register("vulkan", vulkan)
    _arch.set_available(_arch.vulkan, probe("vulkan"), reason("vulkan"))
    _arch.set_subgroup_size(_arch.vulkan, lambda: runtime("vulkan").backend.subgroup_size)  # (read once per device)
    # the vulkan tier requires shaderInt64 and uses f64 where the device has it (a clear error where not)
    _ext.set_supported("vulkan", {_ext.adstack, _ext.data64, _ext.assertion, _ext.dynamic_index})

    def cuda() -> Any:
        from qd.gpu.cuda_tier import CudaBackend

        return CudaBackend()
    register("cuda", cuda)
    _arch.set_available(_arch.cuda, probe("cuda"), reason("cuda"))
    _ext.set_supported("cuda", {_ext.adstack, _ext.data64, _ext.assertion, _ext.dynamic_index})

    def opencl() -> Any:
        from qd.gpu.opencl_tier import OpenCLBackend

        return OpenCLBackend()
    register("opencl", opencl)
    _arch.set_available(_arch.opencl, probe("opencl"), reason("opencl"))
    _ext.set_supported("opencl", {_ext.adstack, _ext.data64, _ext.assertion, _ext.dynamic_index})


_register_tiers()


__all__ = ["DeviceRuntime", "Mirror", "Record", "current", "register", "runtime", "sync_all"]
