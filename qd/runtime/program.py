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
    """Drop all fields, ndarrays, the root SNode tree and kernel caches; restore the default config. The runtime
    object's `clear` runs first (`qd/runtime/pyquadrants.py`); the program's offline cache is cleaned last
    (`_end_program`)."""
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
    """`qd.sync()`: materialize (`qd/runtime/pyquadrants.py`), then `synchronize()`."""
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
    """Start a program: reset, read options (kwargs win over `QD_<NAME>`), select the arch.

    `arch` may be an arch, its name, or a list (the first available is used). `QD_ARCH` (a name or a
    comma-separated list) overrides `arch`, as in Quadrants, so a script can be moved to another arch
    without editing it; `QD_JIT` overrides `jit` the same way.
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
