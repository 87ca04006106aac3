"""Compile workers (DESIGN §7): LLVM's optimisation and machine code for the CPU tier's background compiles, in
helper processes.

llvmlite runs every LLVM call of a process under one lock, so a compile in a thread of the program shares LLVM with
everything else the process does through llvmlite (numba in Genesis; qd's own cache loads and quick compiles), and
several compile threads are no faster than one. A worker is a Python process running `serve()`: it takes a module's
LLVM IR text and answers its object code (optimised as `qd.jit.cpu.object_code` does in-process), which the program
then loads as it loads a cached object; or, for the CUDA tier, a module's PTX (`qd.jit.nvptx.optimise`: a large
kernel's modules are optimised side by side).

`QD_COMPILE_WORKERS` says how many (default: one per core, at most four; none on one core; `0`: none). A compile
never waits for a worker: with none idle it runs in-process, and from the program's eighth compile on a worker is
started in the background for the compiles after it (so a small program pays nothing for the start-up); a GPU tier
starts them all at its first kernel of several modules (`prestart`). Measured
on 2 cores, 24 independent kernels of ~0.3 s compile each: 7.3 s in-process, 5.4 s with the default two workers
(started from the eighth compile); one worker alone gains nothing there. A worker that cannot start, or dies, turns the workers off for the process with
one warning: compiles go on in-process. Workers end with the program (they exit when their pipe closes).
"""

from __future__ import annotations

import atexit
import os
import pickle
import struct
import subprocess
import sys
import threading
from typing import Any, BinaryIO

_HEADER = struct.Struct("<Q")
MAX_WORKERS = 4
START_AFTER = 8  # the compile from which workers are started (a program of a few kernels compiles in-process)


class ParseError(Exception):
    """The module's IR did not parse or verify in the worker (the message is LLVM's)."""


def _send(f: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)))
    f.write(data)
    f.flush()


def _recv(f: BinaryIO) -> Any:
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the compile worker's pipe closed")
    (n,) = _HEADER.unpack(head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError("the compile worker's pipe closed mid-message")
    return pickle.loads(data)


def count() -> int:
    """How many workers this process may use (0: none)."""
    text = os.environ.get("QD_COMPILE_WORKERS", "").strip()
    if text:
        try:
            return max(0, min(int(text), 64))
        except ValueError:
            raise ValueError(f"QD_COMPILE_WORKERS={text!r}: expected a number of worker processes (0: none)") from None
    cores = os.cpu_count() or 1
    return min(MAX_WORKERS, cores) if cores >= 2 else 0


class Worker:
    """One worker process; `compile_object` while the caller holds it (from `take` until `give_back`)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # the program's qd, wherever it came from
        env["QD_COMPILE_WORKERS"] = "0"
        self.proc = subprocess.Popen([sys.executable, "-c", "from qd.jit.compile_worker import serve; serve()"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def compile_object(self, text: str, fast_math: bool, quick: bool = False) -> bytes | None:
        """The object code of LLVM IR `text`, or None where the worker died (workers are then off: the caller
        compiles in-process). Raises `ParseError` where the IR does not parse or verify, RuntimeError where LLVM
        failed. The caller gives the worker back (`give_back`) when it is done with it."""
        return self._ask(("object", text, fast_math, quick))

    def compile_ptx(self, text: str, kernels: list[str], arch: str) -> str | None:
        """The PTX of LLVM IR `text` whose entry points are `kernels` (`qd.jit.nvptx.optimise`), or None where the
        worker died; raises as `compile_object`."""
        return self._ask(("ptx", text, kernels, arch))

    def _ask(self, request: tuple) -> Any:
        try:
            _send(self.proc.stdin, request)
            status, payload = _recv(self.proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            with _lock:
                if self in _all:
                    _all.remove(self)
            self.proc.kill()
            _turn_off(f"a compile worker stopped ({e!r}; exit code {self.proc.wait()})")
            return None
        if status == "parse":
            raise ParseError(payload)
        if status != "ok":
            raise RuntimeError(f"LLVM failed in a compile worker: {payload}")
        return payload

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001  (shutdown: a stuck worker is killed)
            self.proc.kill()


_lock = threading.Lock()
_idle: list[Worker] = []
_all: list[Worker] = []
_starting = 0
_asked = 0  # compiles asked for so far
_off = False


def enabled() -> bool:
    return not _off and count() > 0


def take() -> Worker | None:
    """An idle worker, now, or None: then the caller compiles in-process, and from the program's `START_AFTER`-th
    compile on a worker is started in the background where fewer than `count()` exist (a program never waits for a
    worker's start-up, ~0.3 s, and one of a few kernels never pays for it)."""
    global _starting, _asked
    with _lock:
        if _off:
            return None
        _asked += 1
        if _idle:
            return _idle.pop()
        if len(_all) + _starting >= count() or _asked < START_AFTER:
            return None
        _starting += 1
    threading.Thread(target=_start_one, name="qd-compile-worker-start", daemon=True).start()
    return None


def prestart() -> None:
    """Starts in the background the workers `count()` allows that are not there yet: a GPU tier's first kernel of
    several modules (`qd.jit.nvptx`) calls it, so that the large kernels after it find their workers ready."""
    global _starting
    with _lock:
        if _off:
            return
        n = max(0, count() - len(_all) - _starting)
        _starting += n
    for _ in range(n):
        threading.Thread(target=_start_one, name="qd-compile-worker-start", daemon=True).start()


def give_back(w: Worker) -> None:
    """`w`, taken with `take`, is idle again (a worker that died is not)."""
    with _lock:
        if w in _all and w not in _idle:
            _idle.append(w)


def _start_one() -> None:
    global _starting
    w = None
    try:
        w = Worker()
        if _recv(w.proc.stdout) != ("ready",):
            raise OSError("unexpected first message")
    except (OSError, EOFError, pickle.UnpicklingError) as e:
        if w is not None:
            w.proc.kill()
        _turn_off(f"a compile worker could not start ({e!r})")
        return
    finally:
        with _lock:
            _starting -= 1
    with _lock:
        _all.append(w)
        _idle.append(w)


def _turn_off(why: str) -> None:
    global _off
    with _lock:
        if _off:
            return
        _off = True
    sys.stderr.write(f"[qd] warning: {why}; compiling in this process from now on\n")


@atexit.register
def _close_all() -> None:
    with _lock:
        workers = list(_all)
        _all.clear()
        _idle.clear()
    for w in workers:
        w.close()


def serve() -> None:
    """A worker's loop: ("object", IR text, fast_math, quick) or ("ptx", IR text, entry points, GPU arch) in, ("ok",
    object code or PTX) / ("parse", message) / ("error", message) out, until the pipe closes. The protocol's stdout
    is kept for the replies; anything printed goes to stderr."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    requests = sys.stdin.buffer
    import llvmlite.binding as llvm

    from qd.jit import cpu

    cpu._machine()  # LLVM's target, before the program's first request
    try:
        _send(replies, ("ready",))
        while True:
            request = _recv(requests)
            if request[0] == "ptx":
                _send(replies, _ptx(*request[1:]))
            else:
                _send(replies, _compile(llvm, cpu, *request[1:]))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):  # the program ended
        return


def _compile(llvm: Any, cpu: Any, text: str, fast_math: bool, quick: bool) -> tuple[str, Any]:
    try:
        mod = llvm.parse_assembly(text)
        mod.verify()
    except RuntimeError as e:
        return "parse", str(e)
    try:
        return "ok", cpu.object_code(mod, fast_math, quick, cpu.slp_for(text))
    except Exception as e:  # noqa: BLE001  reported to the program, which raises it where it compiled
        return "error", repr(e)


def _ptx(text: str, kernels: list[str], arch: str) -> tuple[str, Any]:
    from qd.jit import nvptx

    try:
        return "ok", nvptx.optimise(text, kernels, arch)
    except RuntimeError as e:  # LLVM's parser and verifier raise RuntimeError
        return "parse", str(e)
    except Exception as e:  # noqa: BLE001  reported to the program, which raises it where it compiled
        return "error", repr(e)
