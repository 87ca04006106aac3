"""`qd.profiler`'s kernel profiler: Quadrants' functions over the launch records of `qd/runtime/profiler.py`.

Turn it on with `qd.init(kernel_profiler=True)` (or `qd.cfg.kernel_profiler = True`); every `@qd.kernel` launch
is then recorded under the kernel's Python name (`kernel.grad` launches under `<name>_reverse_grad`, launches
inside `qd.ad.FwdMode` under `<name>_forward_grad`). Times are in ms, except `get_kernel_profiler_total_time`
(seconds, as in Quadrants). What a time covers on each tier is said in `qd/runtime/profiler.py`: the launch
itself on `interp` and `cpu`; on a GPU tier the wall clock of a launch made between two device synchronisations
(Quadrants' default CUDA toolkit reads device events instead, and splits a kernel into its offloaded tasks).

Differences from Quadrants, all where Quadrants' records are per offloaded task: a record is one whole launch,
named by the kernel alone (Quadrants prints `fill_c60_0_kernel_0_range_for`); `query_kernel_profiler_info(name)`
matches that name exactly (Quadrants sums every task whose name starts with `name`). `'trace'` mode prints each
launch's real start time relative to the first, and an empty trace prints an empty table. With the profiler off
each function warns and returns what Quadrants' does (None, or 0.0 for the total time).
"""

from __future__ import annotations

from qd import _logging
from qd.base import config
from qd.errors import QuadrantsOptionError, QuadrantsRuntimeTypeError
from qd.runtime import device
from qd.runtime import profiler as _records
from qd.runtime.profiler import LaunchRecord

_OFF = "use 'qd.init(kernel_profiler = True)' to turn on KernelProfiler."


class StatisticalResult:
    """The launches of one kernel name: how many, and their total, min and max time in ms."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counter = 0
        self.min_time = 0.0
        self.max_time = 0.0
        self.total_time = 0.0

    def __lt__(self, other: StatisticalResult) -> bool:
        return self.total_time < other.total_time

    def insert_record(self, time: float) -> None:
        """Counts one launch of `time` ms."""
        if self.counter == 0:
            self.min_time = self.max_time = time
        self.counter += 1
        self.total_time += time
        self.min_time = min(self.min_time, time)
        self.max_time = max(self.max_time, time)

    @property
    def avg_time(self) -> float:
        return self.total_time / self.counter if self.counter else 0.0


class KernelProfilerQueryResult:
    """What `query_kernel_profiler_info` returns: `counter` launches and their `min`, `max`, `avg` time in ms
    (all 0 for a name never launched), as Quadrants' object of that name."""

    def __init__(self, counter: int = 0, min: float = 0.0, max: float = 0.0, avg: float = 0.0) -> None:
        self.counter = counter
        self.min = min
        self.max = max
        self.avg = avg

    def __repr__(self) -> str:
        return f"KernelProfilerQueryResult(counter={self.counter}, min={self.min}, max={self.max}, avg={self.avg})"


def statistics(records: list[LaunchRecord]) -> dict[str, StatisticalResult]:
    """The records counted per kernel name, the largest total time first (ties in order of first launch)."""
    results: dict[str, StatisticalResult] = {}
    for rec in records:
        res = results.get(rec.name)
        if res is None:
            res = results[rec.name] = StatisticalResult(rec.name)
        res.insert_record(rec.ms)
    return dict(sorted(results.items(), key=lambda item: item[1].total_time, reverse=True))


class KernelProfiler:
    """The kernel profiler of the live program. Its mode is the config's `kernel_profiler` option; its records
    are the runtime's (`qd/runtime/profiler.py`)."""

    COUNT = "count"  # per kernel name: count, total, min, avg, max
    TRACE = "trace"  # every launch, in order

    def set_kernel_profiler_mode(self, mode: bool = False) -> None:
        """Turns the profiler on or off for the live program (as `qd.cfg.kernel_profiler = mode`)."""
        if type(mode) is not bool:
            raise QuadrantsRuntimeTypeError(
                f"qd.profiler: the kernel profiler mode must be a bool (True or False), not {type(mode).__name__}")
        config.current().kernel_profiler = mode

    def get_kernel_profiler_mode(self) -> bool:
        return bool(config.current().kernel_profiler)

    def set_toolkit(self, toolkit_name: str = "default") -> bool:
        """Only the 'default' toolkit exists in qd (no CUPTI): another name warns and returns False."""
        if self._off():
            return False
        if toolkit_name == "default":
            return True
        _logging.warn(f"Failed to set kernel profiler toolkit ({toolkit_name}): qd has only the 'default' "
                      "toolkit, keep using (default).")
        return False

    def get_total_time(self) -> float:
        """The time of every recorded launch, in seconds."""
        if self._off():
            return 0.0
        return sum(rec.ms for rec in _records.records()) / 1e3

    def clear_info(self) -> None:
        """Drops every record (the mode stays)."""
        if not self._off():
            _records.clear()

    def query_info(self, name: str) -> KernelProfilerQueryResult | None:
        """The launches recorded under `name` exactly (see the module docstring)."""
        if self._off():
            return None
        res = statistics(_records.records()).get(name)
        if res is None:
            return KernelProfilerQueryResult()
        return KernelProfilerQueryResult(res.counter, res.min_time, res.max_time, res.avg_time)

    def print_info(self, mode: str = COUNT) -> None:
        """Prints the 'count' table (per kernel name) or the 'trace' table (per launch)."""
        if self._off():
            return
        if mode == self.COUNT:
            print(count_table(_records.records()))
        elif mode == self.TRACE:
            print(trace_table(_records.records()))
        else:
            raise QuadrantsOptionError(
                f"qd.profiler.print_kernel_profiler_info: mode must be 'count' or 'trace', not {mode!r}")

    def _off(self) -> bool:
        """True (after the warning Quadrants gives) while the profiler is off."""
        if not config.current().kernel_profiler:
            _logging.warn(_OFF)
            return True
        return False


def _title(mode: str) -> str:
    """`Kernel Profiler(count, default) @ X64`, with ` on <device>` on a GPU arch."""
    rt = device.current()
    on = f" on {rt.backend.device_name}" if rt is not None else ""
    return f"Kernel Profiler({mode}, default) @ {config.current().arch.name.upper()}{on}"


def _framed(title: str, columns: str, rows: list[str], summary: str) -> str:
    width = max(len(columns), len(title))
    outer, inner = "=" * width, "-" * width
    return "\n".join([outer, title, outer, columns, inner, *rows, inner, summary, outer])


def count_table(records: list[LaunchRecord]) -> str:
    """The 'count' table: one row per kernel name, the largest total time first."""
    stats = statistics(records)
    total_ms = sum(r.total_time for r in stats.values())
    rows = []
    for r in stats.values():
        share = 100.0 * r.total_time / total_ms if total_ms > 0 else 0.0
        rows.append(f"[{share:6.2f}% {r.total_time / 1e3:7.3f} s {r.counter:6d}x |"
                    f"{r.min_time:9.3f} {r.avg_time:9.3f} {r.max_time:9.3f} ms] {r.name}")
    columns = "[      %     total   count |      min       avg       max   ] Kernel name"
    summary = f"[100.00%] Total execution time: {total_ms / 1e3:7.3f} s   number of results: {len(stats)}"
    return _framed(_title("count"), columns, rows, summary)


def trace_table(records: list[LaunchRecord]) -> str:
    """The 'trace' table: one row per launch in launch order, its start relative to the first launch's."""
    t0 = records[0].start if records else 0.0
    rows = [f"[{(rec.start - t0) * 1e3:9.3f} ms |{rec.ms:9.3f} ms ] {rec.name}" for rec in records]
    columns = "[  start.time | kernel.time ] Kernel name"
    return _framed(_title("trace"), columns, rows, f"Number of records:  {len(records)}")


_default = KernelProfiler()


def get_default_kernel_profiler() -> KernelProfiler:
    """`qd.profiler.get_default_kernel_profiler()`: the one `KernelProfiler` object of the process (Quadrants
    keeps one too). Its methods mirror the module functions: `set_kernel_profiler_mode(mode)`,
    `get_kernel_profiler_mode()`, `set_toolkit(name)`, `get_total_time()`, `clear_info()`, `query_info(name)`,
    `print_info(mode)`."""
    return _default


def print_kernel_profiler_info(mode: str = "count") -> None:
    """Prints the profiled launches: `'count'` (default) a table per kernel name sorted by total time (share,
    total s, count, min/avg/max ms); `'trace'` every launch in order (start and duration, ms). Another mode
    raises `QuadrantsOptionError` (a ValueError, as Quadrants'). Needs `qd.init(kernel_profiler=True)`."""
    get_default_kernel_profiler().print_info(mode)


def query_kernel_profiler_info(name: str) -> KernelProfilerQueryResult | None:
    """The launches of kernel `name` (`fill.__name__`; `<name>_reverse_grad` for `kernel.grad`) since the last
    clear: an object with `counter`, `min`, `max`, `avg` (ms); all 0 for a name never launched."""
    return get_default_kernel_profiler().query_info(name)


def clear_kernel_profiler_info() -> None:
    """`qd.profiler.clear_kernel_profiler_info()`: drop every kernel launch recorded so far; the profiler stays
    on, so later launches are recorded afresh. Afterwards `get_kernel_profiler_total_time()` is 0.0 and
    `query_kernel_profiler_info(name)` reports `counter=0` until the kernel runs again. With the profiler off
    (no `qd.init(kernel_profiler=True)`) it only logs a warning saying how to turn it on."""
    get_default_kernel_profiler().clear_info()


def get_kernel_profiler_total_time() -> float:
    """`qd.profiler.get_kernel_profiler_total_time()`: the summed time of every kernel launch recorded since
    `qd.init(kernel_profiler=True)` or the last `clear_kernel_profiler_info()`, as a float in seconds (note:
    `query_kernel_profiler_info` reports milliseconds), as Quadrants does. With the profiler off it logs a
    warning and returns 0.0."""
    return get_default_kernel_profiler().get_total_time()


def set_kernel_profiler_toolkit(toolkit_name: str = "default") -> bool:
    """Quadrants' choice of toolkit: qd has 'default' only (True); 'cupti' or another warns and returns False."""
    return get_default_kernel_profiler().set_toolkit(toolkit_name)


__all__ = [
    "KernelProfiler",
    "KernelProfilerQueryResult",
    "StatisticalResult",
    "clear_kernel_profiler_info",
    "get_default_kernel_profiler",
    "get_kernel_profiler_total_time",
    "print_kernel_profiler_info",
    "query_kernel_profiler_info",
    "set_kernel_profiler_toolkit",
]
