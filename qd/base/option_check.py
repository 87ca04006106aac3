"""Validation of `qd.init` options and `qd.cfg` assignments: one rule per option, applied on every write.

`Config.__setattr__` (`qd/base/config.py`) passes each value through `checked(name, value, default)`,
so `qd.init(...)`, `QD_<NAME>` environment values and `qd.cfg.x = ...` are held to the same rules. A value
of the wrong type raises `QuadrantsRuntimeTypeError` (a TypeError) and one out of range raises
`QuadrantsOptionError` (a ValueError), both naming the option; nothing is silently coerced (a string
`"no"` for `debug` would be true). Options without an explicit rule follow the type of their default:
bool options take bools (and 0/1), int options ints (not bools, not floats), float options ints or
floats (finite), str options strings.

`cpu_max_num_threads` is clamped, with a warning, to `max_threads()`: OpenMP (libgomp) starts one OS
thread per requested thread, and a team far above the machine's cores exhausts the process's thread or
stack limits (20000 threads abort in libgomp's thread creation, 100000 overflow its stack) while giving
no speed. The cap is 8 threads per usable core, at most 1024 (never fewer than the usable cores).
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import warnings
from typing import Any

from qd.base.cache_dir import POLICIES
from qd.errors import QuadrantsOptionError, QuadrantsRuntimeTypeError, QuadrantsWarning

TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL = "trace", "debug", "info", "warn", "error", "critical"
LOG_LEVELS: tuple[str, ...] = (TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL)
JIT_MODES: tuple[str, ...] = ("auto", "interp", "eager")
THREADS_PER_CORE = 8  # the most oversubscription `cpu_max_num_threads` may ask for
THREAD_CAP = 1024


def usable_cores() -> int:
    """Cores this process may run on (a container or `taskset` may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def max_threads() -> int:
    """The most worker threads the CPU tiers start (see the module docstring)."""
    cores = usable_cores()
    return max(cores, min(THREAD_CAP, THREADS_PER_CORE * cores))


def _type_error(name: str, value: Any, wanted: str) -> QuadrantsRuntimeTypeError:
    return QuadrantsRuntimeTypeError(f"qd.init: option {name} must be {wanted}, got {value!r} "
                                     f"({type(value).__name__})")


def _int(name: str, value: Any, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _type_error(name, value, "an integer")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        span = f"at least {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise QuadrantsOptionError(f"qd.init: option {name}={v} is out of range: it must be {span}")
    return v


def _float(name: str, value: Any, lo: float = 0.0, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _type_error(name, value, "a number")
    v = float(value)
    if not math.isfinite(v) or v < lo or v > hi:
        span = f"at least {lo}" if hi == math.inf else f"in [{lo}, {hi}]"
        raise QuadrantsOptionError(f"qd.init: option {name}={value!r} is out of range: it must be a finite number "
                                   f"{span}")
    return v if isinstance(value, float) else value


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, (bool, numbers.Integral)) and not isinstance(value, str) and int(value) in (0, 1):
        return bool(value)
    if type(value).__name__ == "bool_":  # numpy's bool
        return bool(value)
    raise _type_error(name, value, "a bool")


def _threads(name: str, value: Any) -> int:
    v = _int(name, value, 1)
    cap = max_threads()
    if v > cap:
        warnings.warn(f"qd.init: {name}={v} is more threads than qd starts; using {cap} ({THREADS_PER_CORE} per "
                      f"usable core, at most {THREAD_CAP}, never fewer than the {usable_cores()} usable cores): "
                      f"threads beyond the cores give no speed, and thousands of them exhaust the process's thread "
                      f"or stack limits (a crash in OpenMP)", QuadrantsWarning, stacklevel=_caller_level())
        return cap
    return v


def _caller_level() -> int:
    """The `stacklevel` of the first frame outside qd's runtime package (the user's `qd.init` or `qd.cfg` write)."""
    here = os.path.dirname(os.path.abspath(__file__))
    f, level = sys._getframe(1), 1
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == here:
        f, level = f.f_back, level + 1
    return level


def log_level(value: Any) -> str:
    """A log level as qd stores it (Quadrants' spellings: `qd.WARN`, "warning", "ERROR", ...)."""
    if not isinstance(value, str):
        raise _type_error("log_level", value, f"one of the strings {', '.join(LOG_LEVELS)}")
    text = value.strip().lower()
    text = {"warning": WARN, "fatal": CRITICAL}.get(text, text)
    if text not in LOG_LEVELS:
        raise QuadrantsOptionError(f"qd.init: unknown log_level {value!r} (expected one of {', '.join(LOG_LEVELS)})")
    return text


def _jit(value: Any) -> str:
    if not isinstance(value, str):
        raise _type_error("jit", value, f"one of the strings {', '.join(JIT_MODES)}")
    if value not in JIT_MODES:
        raise QuadrantsOptionError(f"qd.init: unknown jit mode {value!r} (expected one of {', '.join(JIT_MODES)})")
    return value


def _path(name: str, value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)):
        raise _type_error(name, value, "a path (str or os.PathLike)")
    return os.fspath(value)


def _cleaning_policy(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _type_error(name, value, f"one of the strings {', '.join(POLICIES)}")
    if value not in POLICIES:
        raise QuadrantsOptionError(f"qd.init: unknown {name} {value!r} (expected one of {', '.join(POLICIES)}; "
                                   f"\"never\" keeps every entry)")
    return value


def _cache_cap(name: str, value: Any) -> int:
    v = _int(name, value)
    if v <= 0:  # (Quadrants accepts it, then fails when its program ends)
        raise QuadrantsOptionError(f"qd.init: option {name}={v} is out of range: the cache's size cap must be at "
                                   f"least 1 byte. To keep every entry pass offline_cache_cleaning_policy=\"never\"; "
                                   f"to keep no cache, offline_cache=False")
    return v


def _seed(name: str, value: Any) -> int:
    return _int(name, value, -(1 << 63), (1 << 64) - 1)  # kept as given, used modulo 2^64


def dtype_option(name: str, value: Any, want_float: bool) -> Any:
    """`default_fp` / `default_ip`: a scalar dtype of the right kind (a qd dtype, a numpy one, or Python's
    `float` / `int`, which here mean 64 bits: they cannot mean "the default" that is being set)."""
    from qd.types import dtypes

    if value is float or value is int:
        value = dtypes.f64 if value is float else dtypes.i64
    try:
        t = dtypes.to_dtype(value)
    except (TypeError, ValueError):
        t = None
    if not isinstance(t, dtypes.DataType):
        raise _type_error(name, value, f"a scalar {'float' if want_float else 'integer'} dtype such as "
                          f"{'qd.f32' if want_float else 'qd.i32'}")
    if t.is_float != want_float or t.name == "u1":
        raise QuadrantsRuntimeTypeError(f"qd.init: option {name} must be {'a float' if want_float else 'an integer'} "
                                        f"type, got {t}")
    return t


_RULES: dict[str, Any] = {
    "cpu_max_num_threads": _threads,
    "ad_stack_size": lambda n, v: _int(n, v, 0),
    "unrolling_limit": lambda n, v: _int(n, v, 0),
    "random_seed": _seed,
    "log_level": lambda n, v: log_level(v),
    "jit": lambda n, v: _jit(v),
    "offline_cache_file_path": _path,
    "debug_dump_path": _path,
    "device_memory_GB": lambda n, v: _float(n, v),
    "device_memory_fraction": lambda n, v: _float(n, v, 0.0, 1.0),
    "ad_stack_sparse_threshold_bytes": lambda n, v: _int(n, v, 0),
    "offline_cache_max_size_of_files": _cache_cap,
    "offline_cache_cleaning_policy": _cleaning_policy,
    "offline_cache_cleaning_factor": lambda n, v: _float(n, v, 0.0, 1.0),
    "num_compile_threads": lambda n, v: _int(n, v, 1),
    "opt_level": lambda n, v: _int(n, v, 0),
    "external_optimization_level": lambda n, v: _int(n, v, 0),
}


def checked(name: str, value: Any, default: Any) -> Any:
    """`value` for option `name` (whose default is `default`) as qd keeps it, or the error it deserves."""
    rule = _RULES.get(name)
    if rule is not None:
        return rule(name, value)
    if isinstance(default, bool):
        return _bool(name, value)
    if isinstance(default, int):
        return _int(name, value, 0)
    if isinstance(default, float):
        return _float(name, value)
    if isinstance(default, str) and not isinstance(value, str):
        raise _type_error(name, value, "a string")
    return value


__all__ = ["JIT_MODES", "LOG_LEVELS", "checked", "dtype_option", "log_level", "max_threads", "usable_cores"]
