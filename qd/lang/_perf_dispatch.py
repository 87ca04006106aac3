"""`qd.perf_dispatch`: Quadrants' autotuning dispatcher (the `quadrants.lang._perf_dispatch` path).

`@qd.perf_dispatch(get_geometry_hash=...)` turns a prototype (its body is never run) into a dispatcher;
`@dispatcher.register` / `@dispatcher.register(is_compatible=pred)` adds an arm (a kernel or any Python
function with the prototype's parameter names, in any order); calling the dispatcher runs one arm per call:

- The key of a call is `get_geometry_hash(*args, **kwargs)`, any hashable value; every key is tuned apart.
- The compatible arms are those whose `is_compatible(*args, **kwargs)` is true (no predicate: always). None:
  `QuadrantsRuntimeError`. One: it is chosen at once, untimed.
- Several: each call runs the compatible arm with the fewest trials for that key (ties: registration order).
  An arm's first `first_warmup` trials (`warmup` in later rounds) run untimed; its next `active` trials are
  timed between two `qd.sync()`s (so queued device work is neither charged to it nor left out). Once every
  compatible arm has `warmup + active` trials, the arm of least mean time is kept for that key.
- A kept arm is re-tuned from scratch after `repeat_after_count` further calls for its key or
  `repeat_after_seconds` since it was chosen, whichever comes first (a value <= 0 turns a trigger off; with
  neither given, every 300 calls).
- `QD_PERFDISPATCH_FORCE=dispatcher:arm,...` forces arms by function name (an unknown name is reported and
  tuning goes on); `QD_PERFDISPATCH_PRINT_DEBUG=1` prints the choices, which also go to `qd._logging.debug`.

The state is kept under Quadrants' attribute names (`_trial_count_by_dispatch_impl_by_geometry_hash`, ...),
which Quadrants' own tests read.
"""

from __future__ import annotations

import inspect
import os
import time
from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any

from qd import _logging
from qd.errors import QuadrantsRuntimeError, QuadrantsSyntaxError
from qd.runtime import pyquadrants

NUM_FIRST_WARMUP: int = 1
NUM_WARMUP: int = 0
NUM_ACTIVE: int = 1
DEFAULT_REPEAT_AFTER_COUNT: int = 300

QD_PERFDISPATCH_PRINT_DEBUG: bool = os.environ.get("QD_PERFDISPATCH_PRINT_DEBUG", "0") == "1"


def _parse_force_map(raw: str | None) -> dict[str, str]:
    """`"dispatcher:arm,other:arm2"` as {dispatcher: arm}; empty entries are skipped."""
    out: dict[str, str] = {}
    for entry in (raw or "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        if ":" not in entry:
            raise ValueError(f"Malformed QD_PERFDISPATCH_FORCE entry {entry!r}: expected 'dispatcher:implementation'")
        name, arm = entry.split(":", 1)
        out[name.strip()] = arm.strip()
    return out


_FORCE_MAP: dict[str, str] = _parse_force_map(os.environ.get("QD_PERFDISPATCH_FORCE"))
_ANY_FORCE_ACTIVE: bool = bool(_FORCE_MAP)


def _python_function(fn: Any) -> Callable:
    """The Python function behind a qd kernel or func (their `fn`), or `fn` itself."""
    return getattr(fn, "fn", fn)


def _signature(fn: Any) -> inspect.Signature:
    py = _python_function(fn)
    try:
        return inspect.signature(py, eval_str=True)
    except (NameError, AttributeError, SyntaxError) as e:
        raise QuadrantsSyntaxError(f"Invalid type annotation in `{getattr(py, '__qualname__', py)}`: {e}") from e


def _where(fn: Callable) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}: " if code is not None else ""


class DispatchImpl:
    """A registered arm: calling it calls the arm; `is_compatible` is its predicate (None: always)."""

    _qd_dispatch_impl = True  # `@qd.kernel` over a registered arm is refused (KERNEL_ANNOTATION_ORDER)

    def __init__(self, implementation: Any, is_compatible: Callable[..., bool] | None) -> None:
        self.__wrapped__ = implementation
        self.is_compatible = is_compatible
        self.implementation2 = _python_function(implementation)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def get_implementation2(self) -> Callable:
        return self.implementation2

    @property
    def __name__(self) -> str:
        return self.implementation2.__name__


class PerformanceDispatcher:
    """The dispatcher `@qd.perf_dispatch` makes of a prototype (see the module docstring)."""

    def __init__(self, get_geometry_hash: Callable[..., Hashable], fn: Callable, num_first_warmup: int | None = None,
                 num_warmup: int | None = None, num_active: int | None = None, repeat_after_count: int | None = None,
                 repeat_after_seconds: float | None = None) -> None:
        self._name: str = _python_function(fn).__name__
        self._where = _where(_python_function(fn))
        self.num_first_warmup = NUM_FIRST_WARMUP if num_first_warmup is None else int(num_first_warmup)
        self.num_warmup = NUM_WARMUP if num_warmup is None else int(num_warmup)
        self.num_active = NUM_ACTIVE if num_active is None else int(num_active)
        if self.num_active < 1:
            raise QuadrantsSyntaxError(f"{self._where}perf_dispatch '{self._name}': active={num_active}; at least one "
                                       "timed call per implementation is needed to compare them")
        if repeat_after_count is None and repeat_after_seconds is None:
            repeat_after_count = DEFAULT_REPEAT_AFTER_COUNT
        self.repeat_after_count = repeat_after_count
        self.repeat_after_seconds = repeat_after_seconds
        self._param_names: list[str] = list(_signature(fn).parameters)
        self._get_geometry_hash = get_geometry_hash
        self._dispatch_impls: list[DispatchImpl] = []
        self._forced_impl: DispatchImpl | None = None
        self._force_resolved = False
        self._trial_count_by_dispatch_impl_by_geometry_hash: dict[Hashable, dict[DispatchImpl, int]] = \
            defaultdict(lambda: defaultdict(int))
        self._times_by_dispatch_impl_by_geometry_hash: dict[Hashable, dict[DispatchImpl, list[float]]] = \
            defaultdict(lambda: defaultdict(list))
        self._fastest_dispatch_impl_by_geometry_hash: dict[Hashable, DispatchImpl] = {}
        self._calls_since_last_update_by_geometry_hash: dict[Hashable, int] = defaultdict(int)
        self._last_check_time_by_geometry_hash: dict[Hashable, float] = defaultdict(float)
        self._first_eval_completed: set[Hashable] = set()
        self._cached_args: tuple | None = None
        self._cached_kwargs: dict | None = None
        self._cached_impl: DispatchImpl | None = None

    # ---------------------------------------------------------------- registration

    def register(self, implementation: Any = None, *, is_compatible: Callable[..., bool] | None = None) -> Any:
        """Add an arm (`@d.register` or `@d.register(is_compatible=pred)`); `pred` gets the call's arguments."""
        if implementation is not None:
            return self._register(implementation, is_compatible)
        return lambda fn: self._register(fn, is_compatible)

    def _register(self, fn: Any, is_compatible: Callable[..., bool] | None) -> DispatchImpl:
        names = list(_signature(fn).parameters)
        py = _python_function(fn)
        self._debug(f"perf_dispatch '{self._name}': registered '{py.__name__}'", _ANY_FORCE_ACTIVE)
        unknown = [n for n in names if n not in self._param_names]
        if unknown or len(names) != len(self._param_names):
            what = f"parameter(s) {', '.join(unknown)} not in" if unknown else \
                f"{len(names)} parameters where there are {len(self._param_names)} in"
            raise QuadrantsSyntaxError(
                f"{_where(py)}[PERFDISPATCH_ANNOTATION_SEQUENCE_MISMATCH] '{py.__name__}' has {what} the prototype "
                f"of perf_dispatch '{self._name}' ({', '.join(self._param_names)}): an implementation takes the "
                "prototype's parameters, by the same names")
        impl = DispatchImpl(fn, is_compatible)
        self._dispatch_impls.append(impl)
        return impl

    # ---------------------------------------------------------------- calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._force_resolved:
            self._resolve_force()
        if self._forced_impl is not None:
            return self._forced_impl(*args, **kwargs)
        if self._cached_impl is not None and self._same_call(args, kwargs):
            return self._cached_impl(*args, **kwargs)
        key = self._get_geometry_hash(*args, **kwargs)
        fastest = self._fastest_dispatch_impl_by_geometry_hash.get(key)
        if fastest is not None:
            if not self._due_for_retuning(key):
                return fastest(*args, **kwargs)
            self._restart(key)
        compatible = [d for d in self._dispatch_impls if d.is_compatible is None or d.is_compatible(*args, **kwargs)]
        if not compatible:
            raise QuadrantsRuntimeError(
                f"{self._where}perf_dispatch '{self._name}': none of its {len(self._dispatch_impls)} registered "
                f"implementations ({self._arm_names()}) is compatible with this call (every is_compatible returned "
                "False): register one for these arguments")
        if len(compatible) == 1:
            return self._choose_only(key, compatible[0], args, kwargs)
        return self._trial(key, compatible, args, kwargs)

    def _same_call(self, args: tuple, kwargs: dict) -> bool:
        """Whether this call passes the very objects of the call that chose the single compatible arm."""
        ca, ck = self._cached_args, self._cached_kwargs
        return (ca is not None and ck is not None and len(args) == len(ca) and len(kwargs) == len(ck)
                and all(a is b for a, b in zip(args, ca)) and all(k in ck and v is ck[k] for k, v in kwargs.items()))

    def _due_for_retuning(self, key: Hashable) -> bool:
        due = False
        if self.repeat_after_count is not None and self.repeat_after_count > 0:
            self._calls_since_last_update_by_geometry_hash[key] += 1
            due = self._calls_since_last_update_by_geometry_hash[key] >= self.repeat_after_count
        if self.repeat_after_seconds is not None and self.repeat_after_seconds > 0:
            due = due or time.time() - self._last_check_time_by_geometry_hash[key] >= self.repeat_after_seconds
        return due

    def _restart(self, key: Hashable) -> None:
        self._times_by_dispatch_impl_by_geometry_hash[key].clear()
        self._trial_count_by_dispatch_impl_by_geometry_hash[key].clear()
        del self._fastest_dispatch_impl_by_geometry_hash[key]
        self._calls_since_last_update_by_geometry_hash[key] = 0

    def _choose_only(self, key: Hashable, impl: DispatchImpl, args: tuple, kwargs: dict) -> Any:
        self._fastest_dispatch_impl_by_geometry_hash[key] = impl
        self._last_check_time_by_geometry_hash[key] = time.time()
        self._cached_args, self._cached_kwargs, self._cached_impl = args, kwargs, impl
        self._debug(f"perf_dispatch '{self._name}': chose '{impl.__name__}' out of {len(self._dispatch_impls)} "
                    "registered functions. Only 1 was compatible.")
        return impl(*args, **kwargs)

    def _trial(self, key: Hashable, compatible: list[DispatchImpl], args: tuple, kwargs: dict) -> Any:
        """Run the compatible arm with the fewest trials for `key`; time it past its warm-up calls."""
        counts = self._trial_count_by_dispatch_impl_by_geometry_hash[key]
        impl = min(compatible, key=lambda d: counts.get(d, 0))
        warmup = self.num_warmup if key in self._first_eval_completed else self.num_first_warmup
        timed = counts.get(impl, 0) >= warmup
        counts[impl] += 1
        if not timed:
            return impl(*args, **kwargs)
        rt = pyquadrants.get_runtime()
        rt.sync()
        start = time.perf_counter()
        result = impl(*args, **kwargs)
        rt.sync()
        self._times_by_dispatch_impl_by_geometry_hash[key][impl].append(time.perf_counter() - start)
        if all(counts.get(d, 0) >= warmup + self.num_active for d in compatible):
            self._keep_fastest(key)
        return result

    def _keep_fastest(self, key: Hashable) -> None:
        times = self._times_by_dispatch_impl_by_geometry_hash[key]
        fastest = min(times, key=lambda d: sum(times[d]) / len(times[d]))
        self._fastest_dispatch_impl_by_geometry_hash[key] = fastest
        self._first_eval_completed.add(key)
        self._last_check_time_by_geometry_hash[key] = time.time()
        self._debug(f"perf_dispatch '{self._name}': chose '{fastest.__name__}' out of {len(self._dispatch_impls)} "
                    "registered functions.")

    # ---------------------------------------------------------------- forcing and messages

    def _resolve_force(self) -> None:
        """Apply `QD_PERFDISPATCH_FORCE` at the first call, once every arm is registered."""
        self._force_resolved = True
        if not _ANY_FORCE_ACTIVE:
            return
        self._debug(f"perf_dispatch '{self._name}': available implementations: [{self._arm_names()}]", True)
        wanted = _FORCE_MAP.get(self._name)
        if wanted is None:
            return
        for d in self._dispatch_impls:
            if d.__name__ == wanted:
                self._forced_impl = d
                print(f"perf_dispatch '{self._name}': forced to '{wanted}' via QD_PERFDISPATCH_FORCE")
                return
        print(f"[perf_dispatch] WARNING: QD_PERFDISPATCH_FORCE requested '{wanted}' for '{self._name}', but no such "
              f"implementation found. Available: [{self._arm_names()}]. Falling back to normal benchmarking.")

    def _arm_names(self) -> str:
        return ", ".join(f"'{d.__name__}'" for d in self._dispatch_impls)

    def _debug(self, text: str, also_print: bool = False) -> None:
        _logging.debug(text)
        if QD_PERFDISPATCH_PRINT_DEBUG or also_print:
            print(text)


def perf_dispatch(*, get_geometry_hash: Callable[..., Hashable], first_warmup: int = NUM_FIRST_WARMUP,
                  warmup: int = NUM_WARMUP, active: int = NUM_ACTIVE, repeat_after_count: int | None = None,
                  repeat_after_seconds: float | None = None) -> Callable[[Callable], PerformanceDispatcher]:
    """Make the decorated prototype a dispatcher over the arms registered on it (see the module docstring)."""

    def decorate(fn: Callable) -> PerformanceDispatcher:
        return PerformanceDispatcher(get_geometry_hash, fn, first_warmup, warmup, active, repeat_after_count,
                                     repeat_after_seconds)

    return decorate


__all__ = ["perf_dispatch"]
