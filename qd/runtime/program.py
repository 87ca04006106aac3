"""Program lifetime: `qd.init` (options from kwargs and `QD_<NAME>` environment), `qd.reset`, `qd.sync`.

Other modules that hold per-program state (field registries, the root SNode tree, kernel caches)
register a callback with `on_reset(fn)`; `reset()` calls every callback, then restores the default
config.
"""

from __future__ import annotations

import atexit
import copy
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

from qd import _logging
from qd.base import arch as _arch
from qd.base import cache_dir, option_check
from qd.base import config as _config
from qd.errors import QuadrantsOptionError, QuadrantsWarning
from qd.runtime import pyquadrants
from qd.types import dtypes

_reset_hooks: list[Callable[[], None]] = []

# Keywords of Quadrants' `init` that are not config options; accepted, with the effect noted.
_INIT_ONLY = {
    "_test_mode": False,          # returns the config instead of None; nothing else differs in qd
    "require_version": None,      # no effect: qd's version numbers are not Quadrants'
}


def on_reset(hook: Callable[[], None]) -> None:
    """Register `hook` to run at every `qd.reset()` (and so at every `qd.init`)."""
    if hook not in _reset_hooks:
        _reset_hooks.append(hook)


def reset() -> None:
    """End the current program: drop every field, ndarray, the SNode trees and the compiled kernels' instances,
    and restore the default configuration (`qd.init` calls it first).

    Fields and ndarrays made before the reset cannot be used after it (they raise
    `qd.QuadrantsRuntimeError` naming the reset); kernels are recompiled at their next call. The disk cache
    of compiled code is kept, and cleaned to its size cap. The logging level set by `qd.set_logging_level`
    is kept, as in Quadrants.
    """
    # the runtime object's `clear` runs first (`qd/runtime/pyquadrants.py`); the program's offline cache is
    # cleaned last (`_end_program`)
    pyquadrants.clear()
    for hook in _reset_hooks:
        hook()
    _end_program()
    _config.install(None)


_program: _config.Config | None = None  # the options of the program `qd.init` started, until it ends


def _end_program() -> None:
    """The program `qd.init` started ends (`qd.reset`, the next `qd.init`, interpreter exit): its offline cache
    is cleaned by its policy and size cap (`qd/base/cache_dir.py`), as Quadrants cleans when a program ends."""
    global _program
    cfg, _program = _program, None
    if cfg is not None:
        cache_dir.clean(cfg)


atexit.register(_end_program)


def sync() -> None:
    """Wait for every kernel launched so far to finish, and raise the errors they recorded.

    On the GPU tiers (`qd.vulkan`, `qd.cuda`, `qd.opencl`) launches are asynchronous: a kernel's errors
    (an adstack overflow; with `debug=True` failed `assert`s and bounds checks, as
    `qd.QuadrantsAssertionError`) and its `print` output come back here, or at the next read from the host
    (`to_numpy()`, `f[i]`). On `qd.cpu` and `qd.interp` launches finish before the call returns, so `sync`
    only places fields declared but not placed yet. Timing a GPU kernel needs `qd.sync()` before reading
    the clock.
    """
    # materialize (`qd/runtime/pyquadrants.py`), then `synchronize()`
    pyquadrants.materialize()
    synchronize()


def synchronize() -> None:
    """Wait for the device and raise any error recorded by kernels (via the launch path, once it exists)."""
    from qd.runtime import launch

    fn = getattr(launch, "sync", None)
    if fn is not None:
        fn()


# ------------------------------------------------------------------ parsing options


def _parse_bool(name: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise QuadrantsOptionError(f"Invalid {name}={text!r}: expected 0 or 1")


def _parse_env(key: str, text: str) -> Any:
    name = "QD_" + key.upper()
    t = _config.option_type(key)
    if t is bool:
        return _parse_bool(name, text)
    try:
        return t(text)
    except ValueError:
        raise QuadrantsOptionError(f"Invalid {name}={text!r}: expected {'an' if t is int else 'a'} {t.__name__}") from None


def _apply_options(cfg: _config.Config, kwargs: dict[str, Any]) -> None:
    """Set every option from kwargs (winning) or `QD_<NAME>`; consumed keys are removed from kwargs. Each
    value is checked as it is set (`Config.__setattr__`)."""
    for key in _config.OPTIONS:
        env_name = "QD_" + key.upper()
        env_value = os.environ.get(env_name, "")
        if key in kwargs:
            if env_value:
                warnings.warn(f"Environment variable {env_name}={env_value} overridden by qd.init argument "
                              f'"{key}"', QuadrantsWarning, stacklevel=3)
            setattr(cfg, key, kwargs.pop(key))
        elif env_value:
            setattr(cfg, key, _parse_env(key, env_value))


def _dtype_from_env(name: str, options: dict[str, dtypes.DataType]) -> dtypes.DataType | None:
    text = os.environ.get(name, "")
    if not text:
        return None
    if text not in options:
        raise QuadrantsOptionError(f"Invalid {name}={text}, should be {' or '.join(options)}")
    return options[text]


def _resolve_default(arg: Any, env_name: str, options: dict[str, dtypes.DataType], float_wanted: bool,
                     what: str) -> dtypes.DataType | None:
    env = _dtype_from_env(env_name, options)
    if arg is None:
        return env
    if env is not None:
        warnings.warn(f'Environment variable {env_name} overridden by qd.init argument "{what}"',
                      QuadrantsWarning, stacklevel=4)
    return option_check.dtype_option(what, arg, float_wanted)


# ------------------------------------------------------------------ init


def init(arch: Any = None, default_fp: Any = None, default_ip: Any = None,
         **kwargs: Any) -> _config.Config | None:
    """Start a program: reset qd (`qd.reset`), set the options, and choose the arch kernels run on.

    `qd.init(arch=qd.cpu, debug=True)`. Call it before declaring fields or launching kernels; calling it
    again ends the previous program (its fields and ndarrays are destroyed). Without any call, qd runs
    with the defaults on `qd.cpu`.

    `arch` may be an arch (`qd.cpu`, `qd.interp`, `qd.vulkan`, `qd.cuda`, `qd.opencl`, `qd.gpu`), its name,
    or a list (the first available one is used). The environment variable `QD_ARCH` (a name or a
    comma-separated list) overrides `arch`, as in Quadrants, so a script moves to another arch without
    editing it; `QD_JIT` overrides `jit` the same way. An arch that is not available here falls back to
    `qd.cpu` with a warning, unless `enable_fallback=False`. `default_fp` / `default_ip` (`qd.f32` or
    `qd.f64`, `qd.i32` or `qd.i64`) are what `float` and `int` mean in kernels and field dtypes.

    Every other option is a keyword argument, or else read from the environment variable `QD_<NAME>`
    (`QD_DEBUG=1`); the keyword wins. Each value is checked: a wrong type raises
    `qd.QuadrantsRuntimeTypeError`, a value out of range `qd.QuadrantsOptionError`, both naming the option,
    and an unknown name raises `KeyError`. The options that
    change what qd does:

    debug
        `False`. Bounds checks on every global access and checked `assert`s, on every tier; failures raise
        `qd.QuadrantsAssertionError` naming the kernel, thread, index and line. Implies `check_out_of_bound`.
    check_out_of_bound
        `False`. Bounds checks on global accesses only.
    fast_math
        `True`. Lets the compiler contract and reassociate float arithmetic and use vector math libraries;
        `False` makes `qd.cpu` agree with `qd.interp` bit for bit.
    random_seed
        `0`. The key of `qd.random`'s counter-based generator.
    jit
        `"auto"`. On `qd.cpu`: `"auto"` interprets a kernel's first launches while LLVM compiles it in the
        background; `"eager"` compiles before the first launch; `"interp"` never compiles.
    cpu_max_num_threads
        The usable cores. Worker threads of the CPU tiers (at most 8 per usable core and 1024).
    offline_cache, offline_cache_file_path
        `True`, the platform's cache directory (`~/.cache/qd` on Linux). The disk cache of compiled code.
    offline_cache_max_size_of_files
        100 MiB. The cache's size cap; when a program ends above it, entries are removed.
    offline_cache_cleaning_policy
        `"lru"`. Which entries go first: `"lru"`, `"fifo"`, `"never"` (`"version"` removes nothing).
    offline_cache_cleaning_factor
        `0.25`. The share of the entries a cleaning removes.
    src_ll_cache
        `True`. The disk cache of `@qd.kernel(fastcache=True)` kernels (needs `offline_cache`).
    print_non_pure
        `False`. Print each compiled kernel that is not a fastcache kernel.
    ad_stack_experimental_enabled
        `True`. Allow adstacks (loops with data-dependent trip counts) in reverse mode.
    ad_stack_size
        `0`. `0` sizes every adstack exactly from the data before each reverse launch; `N` forces `N`
        slots (a push beyond them raises an overflow error).
    enable_fallback
        `True`. An arch that is not built or has no driver falls back to `qd.cpu`; `False` raises.
    log_level
        `"info"`. `"info"` prints the start banner; `"warn"` and `"error"` do not.
    print_ir
        `False`. Print each kernel's IR after the passes.
    print_full_traceback
        `False`. Compile and argument errors keep qd's own frames (otherwise their traceback ends at the
        kernel call).
    short_circuit_operators
        `True`. `and` / `or` in kernels short-circuit.
    unrolling_limit
        `32`. A `qd.static` loop with more iterations warns; past 256 times that it is refused; `0`: no limit.
    kernel_profiler
        `False`. Time every launch for `qd.profiler`.

    Every other Quadrants option (`advanced_optimization`, `device_memory_GB`, ...) is accepted and has no
    effect, so Quadrants code runs unchanged. After `qd.init` the options are `qd.cfg`'s attributes.
    Returns `None` (the `Config` when called with `_test_mode=True`).
    """
    if "default_up" in kwargs:
        raise KeyError("'default_up' is always the unsigned type of 'default_ip'. "
                       "Please set 'default_ip' instead.")
    # Copy first: the arguments may reference items of the config that reset() is about to replace.
    kwargs = copy.copy(kwargs)
    init_only = {k: kwargs.pop(k, v) for k, v in _INIT_ONLY.items()}
    if os.environ.get("QD_JIT"):  # like QD_ARCH, QD_JIT overrides the argument (DESIGN §7)
        kwargs.pop("jit", None)
    reset()

    cfg = _config.Config()
    fp = _resolve_default(default_fp, "QD_DEFAULT_FP", {"32": dtypes.f32, "64": dtypes.f64}, True,
                          "default_fp")
    ip = _resolve_default(default_ip, "QD_DEFAULT_IP", {"32": dtypes.i32, "64": dtypes.i64}, False,
                          "default_ip")
    cfg.default_fp = fp or cfg.default_fp
    cfg.default_ip = ip or cfg.default_ip
    _apply_options(cfg, kwargs)
    if kwargs:
        raise KeyError(f"Unrecognized keyword argument(s) for qd.init: {', '.join(kwargs)}")

    _logging.set_logging_level(cfg.log_level)
    env_arch = os.environ.get("QD_ARCH", "")
    if env_arch:
        _logging.info(f"Following QD_ARCH setting up for arch={env_arch}")
        arch = [a for a in env_arch.split(",") if a.strip()]
    cfg.arch = _arch.select(arch, cfg.enable_fallback)
    _config.install(cfg)
    global _program
    _program = cfg
    if cfg.arch is _arch.cpu:
        from qd.jit import tiering

        tiering.prewarm()
    elif getattr(cfg.arch, "is_gpu", False):
        from qd.runtime import device

        device.started(cfg)
    if cfg.log_level not in (_config.WARN, _config.ERROR, _config.CRITICAL):
        print(f"[qd] Starting on arch={cfg.arch.name}")
        sys.stdout.flush()
    return cfg if init_only["_test_mode"] else None


def set_logging_level(level: str) -> None:
    """Quadrants' `qd.set_logging_level`: the process-wide level of `qd._logging` (kept across `qd.reset`, as
    Quadrants keeps it), and `qd.cfg.log_level` unless it is "off" (not a config value)."""
    _logging.set_logging_level(level)
    if _logging.get_logging_level() != _logging.OFF:
        _config.current().log_level = _logging.get_logging_level()
