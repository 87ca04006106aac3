"""The program configuration (`qd.cfg`): Quadrants' option names, their defaults, and the live instance.

`current()` returns the live `Config`; before `qd.init` that is a default one, so code that reads the
config (dtype defaults, bounds checks) works without an explicit `init`. `qd.init` replaces it.

Options and what they do in qd. "no effect" options are accepted so that Quadrants code runs unchanged.
Every value is checked when it is set (`qd/base/option_check.py`): a wrong type or an out-of-range value
raises an error naming the option.

| option                           | default            | in qd                                              |
| -------------------------------- | ------------------ | -------------------------------------------------- |
| arch                             | cpu                | the tier kernels run on (`qd/base/arch.py`)        |
| default_fp / default_ip          | f32 / i32          | what `float` / `int` mean in kernels and field     |
|                                  |                    | dtypes                                             |
| default_up (read-only)           | u32                | always the unsigned type of default_ip, as in      |
|                                  |                    | Quadrants                                          |
| debug                            | False              | asserts and bounds checks on every tier; implies   |
|                                  |                    | check_out_of_bound                                 |
| check_out_of_bound               | False              | bounds checks on global accesses                   |
| fast_math                        | True               | allows contraction/reassociation (DESIGN.md        |
|                                  |                    | section 4)                                         |
| random_seed                      | 0                  | key of the counter-based `qd.random`               |
| offline_cache / _file_path       | True / platform    | on-disk cache of compiled artifacts; the path:     |
|                                  | cache dir          | argument, else QD_OFFLINE_CACHE_FILE_PATH, else    |
|                                  |                    | platformdirs' user cache dir for "qd"              |
|                                  |                    | (~/.cache/qd on Linux; `qd/base/cache_dir.py`)     |
| offline_cache_max_size_of_files  | 100 MiB            | size cap (bytes, at least 1) of every entry kind;  |
|                                  |                    | at or above it when a program ends, cleaning       |
|                                  |                    | removes entries (`qd/base/cache_dir.py`)           |
| offline_cache_cleaning_policy    | "lru"              | "lru" (least recently loaded/stored first),        |
|                                  |                    | "fifo" (first written first), "never", "version"   |
|                                  |                    | (removes nothing in qd)                            |
| offline_cache_cleaning_factor    | 0.25               | share of the entries a cleaning removes            |
| src_ll_cache                     | True               | fastcache of `fastcache=True` kernels (needs       |
|                                  |                    | offline_cache; `qd/frontend/fastcache.py`)         |
| print_non_pure                   | False              | prints each compiled kernel not marked fastcache   |
| log_level                        | "info"             | "info" prints the start banner; "warn"/"error" do  |
|                                  |                    | not                                                |
| jit                              | "auto"             | "auto" / "interp" / "eager" tiering (DESIGN.md     |
|                                  |                    | section 7)                                         |
| cpu_max_num_threads              | usable cores       | worker threads of the CPU tier (CPU affinity aware)|
|                                  |                    | at most 8 per usable core and 1024 (clamped, with  |
|                                  |                    | a warning)                                         |
| print_ir                         | False              | prints each kernel's IR after the passes           |
| ad_stack_experimental_enabled    | True               | allows adstacks in reverse mode                    |
| ad_stack_size                    | 0                  | 0: size every adstack exactly per launch; N: fixed |
|                                  |                    | size                                               |
| enable_fallback                  | True               | unbuilt/unavailable arch falls back to cpu         |
|                                  |                    | (`qd.init`)                                        |
| print_full_traceback             | False              | compile and argument errors keep qd's own frames   |
|                                  |                    | (else their traceback ends at the kernel call)     |
| short_circuit_operators          | True               | `and`/`or` in kernels short-circuit                |
| unrolling_limit                  | 32                 | a `qd.static` loop past it warns (SyntaxWarning);  |
|                                  |                    | past 256 x it is refused; 0: no limit              |
| kernel_profiler                  | False              | times every kernel launch for `qd.profiler`        |
|                                  |                    | (`qd/runtime/profiler.py`; launches take the Python|
|                                  |                    | path while on)                                     |
| ad_stack_sparse_threshold_bytes  | 100 MiB            | no effect: qd sizes every adstack heap exactly     |
| cfg_optimization                 | True               | no effect (qd's passes do not depend on it)        |
| advanced_optimization, opt_level | True, 1            | no effect                                          |
| force_scalarize_matrix           | False              | no effect: qd always scalarizes vectors and        |
|                                  |                    | matrices                                           |
| gdb_trigger                      | False              | no effect                                          |
| timeline                         | False              | no effect                                          |
| verbose, verbose_kernel_launches | True, False        | no effect                                          |
| every other Quadrants option     | (see _NO_EFFECT)   | no effect: accepted for compatibility              |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from qd.base import cache_dir, option_check

# log levels as Quadrants spells them (`qd.WARN` etc. are these strings); other modules read them here
from qd.base.option_check import CRITICAL, DEBUG, ERROR, INFO, JIT_MODES, LOG_LEVELS, TRACE, WARN  # noqa: F401
from qd.types import dtypes

# Options qd acts on (or that other parts of qd read), with their defaults.
_EFFECTIVE: dict[str, Any] = {
    "debug": False,
    "fast_math": True,
    "random_seed": 0,
    "offline_cache": True,
    "offline_cache_file_path": cache_dir.default_path(),  # (read again by every `Config()`)
    "offline_cache_cleaning_policy": "lru",
    "offline_cache_max_size_of_files": 100 * 1024 * 1024,
    "offline_cache_cleaning_factor": 0.25,
    "log_level": INFO,
    "jit": "auto",
    "cpu_max_num_threads": option_check.usable_cores(),
    "print_ir": False,
    "ad_stack_experimental_enabled": True,
    "ad_stack_size": 0,
    "enable_fallback": True,
    "print_full_traceback": False,
    "short_circuit_operators": True,
    "unrolling_limit": 32,
    "src_ll_cache": True,  # the fastcache of `@qd.kernel(fastcache=True)` kernels (`qd/frontend/fastcache.py`)
    "print_non_pure": False,  # prints the name of every kernel compiled that is not marked fastcache=True
    "kernel_profiler": False,  # every launch timed for `qd.profiler` (`qd/runtime/profiler.py`)
}

# Quadrants options accepted without effect in qd (same names and defaults as Quadrants).
_NO_EFFECT: dict[str, Any] = {
    "ad_stack_sparse_threshold_bytes": 100 * 1024 * 1024,
    "cfg_optimization": True,
    "advanced_optimization": True,
    "opt_level": 1,
    "external_optimization_level": 3,
    "force_scalarize_matrix": False,
    "real_matrix_scalarize": True,
    "gdb_trigger": False,
    "timeline": False,
    "verbose": True,
    "verbose_kernel_launches": False,
    "validate_autodiff": False,
    "simd_width": 0,
    "max_vector_width": 8,
    "raise_on_templated_floats": False,
    "print_preprocessed_ir": False,
    "print_accessor_ir": False,
    "print_ir_dbg_info": False,
    "print_struct_llvm_ir": False,
    "print_kernel_llvm_ir": False,
    "print_kernel_llvm_ir_optimized": False,
    "print_kernel_asm": False,
    "print_kernel_amdgcn": False,
    "debug_dump_path": "/tmp/ir/",
    "serial_schedule": False,
    "simplify_before_lower_access": True,
    "lower_access": True,
    "simplify_after_lower_access": True,
    "move_loop_invariant_outside_if": False,
    "cache_loop_invariant_global_vars": True,
    "demote_dense_struct_fors": True,
    "constant_folding": True,
    "use_llvm": True,
    "flatten_if": False,
    "make_thread_local": True,
    "make_block_local": True,
    "detect_read_only": True,
    "half2_vectorization": False,
    "make_cpu_multithreading_loop": True,
    "default_cpu_block_dim": 32,
    "cpu_block_dim_adaptive": True,
    "default_gpu_block_dim": 128,
    "gpu_max_reg": 0,
    "saturating_grid_dim": 0,
    "max_block_dim": 0,
    "device_memory_GB": 1.0,
    "device_memory_fraction": 0.0,
    "quant_opt_store_fusion": True,
    "quant_opt_atomic_demotion": True,
    "make_mesh_block_local": True,
    "num_compile_threads": 4,
    "vk_api_version": "",
    "cuda_stack_limit": 0,
}

OPTIONS: dict[str, Any] = {**_EFFECTIVE, **_NO_EFFECT, "check_out_of_bound": False}
NO_EFFECT_OPTIONS: frozenset[str] = frozenset(_NO_EFFECT)


class Config:
    """One program's options. Attribute names are Quadrants' (`qd.cfg.arch`, `qd.cfg.debug`, ...)."""

    def __init__(self) -> None:
        from qd.base import arch as _arch

        self.arch = _arch.cpu
        self.default_fp = dtypes.f32
        self.default_ip = dtypes.i32
        for name, default in OPTIONS.items():
            setattr(self, name, default)
        self.offline_cache_file_path = cache_dir.default_path()  # the environment as it is now

    # check_out_of_bound is implied by debug (as Quadrants' CompileConfig::fit does), also when
    # `qd.cfg.debug` is set after init, hence a property rather than a one-off fix-up.
    @property
    def check_out_of_bound(self) -> bool:
        return self._check_out_of_bound or bool(self.debug)

    @check_out_of_bound.setter
    def check_out_of_bound(self, value: bool) -> None:
        self._check_out_of_bound = bool(value)

    @property
    def default_up(self) -> dtypes.DataType:
        return dtypes.unsigned_of(self.default_ip)

    def __setattr__(self, name: str, value: Any) -> None:
        # A misspelled option must not silently create a new attribute.
        if name not in _SETTABLE and not name.startswith("_"):
            raise AttributeError(f"qd.cfg has no option {name!r}")
        if name in OPTIONS:  # a wrong type or value raises naming the option (`qd/base/option_check.py`)
            value = option_check.checked(name, value, OPTIONS[name])
        elif name in ("default_fp", "default_ip"):
            value = option_check.dtype_option(name, value, name == "default_fp")
        super().__setattr__(name, value)
        _changed()  # e.g. compiled launch plans were armed for the options as they were

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in ("arch", "default_fp", "default_ip", "debug"))
        return f"Config({items}, ...)"


_SETTABLE: frozenset[str] = frozenset(OPTIONS) | {"arch", "default_fp", "default_ip"}

_listeners: list[Callable[[], None]] = []


def _changed() -> None:
    for listener in _listeners:
        listener()


def on_change(listener: Callable[[], None]) -> None:
    """Call `listener()` whenever an option is set or another config is installed (the runtime registers the
    launch plans' epoch here: plans armed under the old options must re-arm)."""
    if listener not in _listeners:
        _listeners.append(listener)


_current: Config | None = None


def current() -> Config:
    """The live config (a default one until `qd.init` installs its own)."""
    global _current
    if _current is None:
        _current = Config()
    return _current


def install(cfg: Config | None) -> None:
    """Make `cfg` the live config; None restores a fresh default one on next use."""
    global _current
    _current = cfg
    _changed()


def option_type(name: str) -> type:
    """The type an option's value has (used to parse `QD_<NAME>` environment variables)."""
    return type(OPTIONS[name])
