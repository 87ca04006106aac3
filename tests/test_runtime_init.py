"""qd.init / reset / cfg, archs and their fallback, environment options, the extension table."""

import pytest

import qd
from qd.base import config as _config
from qd.errors import QuadrantsOptionError, QuadrantsRuntimeTypeError, QuadrantsWarning
from qd.lang import impl
from qd.runtime import program


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("QD_ARCH", "QD_DEBUG", "QD_DEFAULT_FP", "QD_DEFAULT_IP", "QD_LOG_LEVEL", "QD_RANDOM_SEED",
                 "QD_FAST_MATH", "QD_OPT_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    yield
    qd.reset()


def test_defaults_before_init():
    qd.reset()
    assert qd.cfg.arch is qd.cpu
    assert qd.cfg.default_fp is qd.f32 and qd.cfg.default_ip is qd.i32 and qd.cfg.default_up is qd.u32
    assert qd.cfg.debug is False and qd.cfg.check_out_of_bound is False
    assert qd.cfg.fast_math is True and qd.cfg.enable_fallback is True and qd.cfg.offline_cache is True
    assert qd.cfg.ad_stack_experimental_enabled is True and qd.cfg.ad_stack_size == 0
    assert qd.cfg.log_level == "info" and qd.cfg.jit == "auto" and qd.cfg.random_seed == 0


def test_init_sets_options_and_banner(capsys):
    qd.init(arch=qd.interp, default_fp=qd.f64, default_ip=qd.i64, random_seed=7, debug=True)
    assert "[qd] Starting on arch=interp" in capsys.readouterr().out
    assert qd.cfg.arch is qd.interp
    assert qd.cfg.default_fp is qd.f64 and qd.cfg.default_ip is qd.i64 and qd.cfg.default_up is qd.u64
    assert qd.cfg.random_seed == 7
    assert qd.cfg.check_out_of_bound is True  # implied by debug
    assert impl.current_cfg() is _config.current()
    assert impl.get_runtime().default_fp is qd.f64
    assert qd.field(float, 2).dtype is qd.f64


def test_init_resets_config():
    qd.init(arch=qd.interp, debug=True, log_level=qd.WARN)
    qd.init(arch=qd.interp, log_level=qd.WARN)
    assert qd.cfg.debug is False


def test_quiet_log_levels(capsys):
    for level in (qd.WARN, qd.ERROR, "warn", "ERROR"):
        qd.init(arch=qd.interp, log_level=level)
        assert "Starting" not in capsys.readouterr().out
        assert qd.cfg.log_level == str(level).lower()
    for level in (qd.INFO, qd.DEBUG, qd.TRACE):
        qd.init(arch=qd.interp, log_level=level)
        assert "Starting on arch=interp" in capsys.readouterr().out


def test_bad_log_level():
    with pytest.raises(ValueError):
        qd.init(log_level="loud")


def test_unknown_keyword():
    with pytest.raises(KeyError, match="Unrecognized keyword argument"):
        qd.init(arch=qd.interp, foo_bar=233)
    with pytest.raises(KeyError, match="default_up"):
        qd.init(default_up=qd.u64)


def test_test_mode_returns_config():
    cfg = qd.init(_test_mode=True, log_level="warn")
    assert cfg is _config.current()


def test_env_overrides(monkeypatch):
    monkeypatch.setenv("QD_DEBUG", "1")
    monkeypatch.setenv("QD_DEFAULT_FP", "64")
    monkeypatch.setenv("QD_RANDOM_SEED", "42")
    monkeypatch.setenv("QD_LOG_LEVEL", "warn")
    qd.init(arch=qd.interp)
    assert qd.cfg.debug is True and qd.cfg.check_out_of_bound is True
    assert qd.cfg.default_fp is qd.f64
    assert qd.cfg.random_seed == 42
    assert qd.cfg.log_level == "warn"


def test_kwargs_win_over_env(monkeypatch):
    monkeypatch.setenv("QD_DEBUG", "1")
    monkeypatch.setenv("QD_DEFAULT_FP", "64")
    with pytest.warns(QuadrantsWarning, match="overridden"):
        qd.init(arch=qd.interp, debug=False, default_fp=qd.f32, log_level="warn")
    assert qd.cfg.debug is False and qd.cfg.default_fp is qd.f32


def test_bad_env_values(monkeypatch):
    monkeypatch.setenv("QD_DEFAULT_FP", "16")
    with pytest.raises(ValueError, match="QD_DEFAULT_FP"):
        qd.init(arch=qd.interp)
    monkeypatch.setenv("QD_DEFAULT_FP", "32")
    monkeypatch.setenv("QD_DEFAULT_IP", "64")
    qd.init(arch=qd.interp, log_level="warn")
    assert qd.cfg.default_ip is qd.i64


def test_env_arch(monkeypatch):
    monkeypatch.setenv("QD_ARCH", "interp")
    qd.init(arch=qd.cpu, log_level="warn")
    assert qd.cfg.arch is qd.interp


def test_cfg_proxy_follows_init():
    qd.init(arch=qd.interp, log_level="warn")
    qd.cfg.debug = True
    assert _config.current().debug is True and qd.cfg.check_out_of_bound is True
    qd.init(arch=qd.cpu, log_level="warn")
    assert qd.cfg.arch is qd.cpu and qd.cfg.debug is False
    with pytest.raises(AttributeError):
        qd.cfg.no_such_option = 1


# ------------------------------------------------------------------ archs


def test_arch_registry():
    assert qd.x64 is qd.cpu or qd.arm64 is qd.cpu
    assert qd.get_host_arch_list() == [qd.cpu]
    assert qd.is_arch_supported(qd.cpu) and qd.is_arch_supported(qd.interp)
    for a in (qd.metal, qd.amdgpu):
        assert not qd.is_arch_supported(a)
    # vulkan, cuda and opencl are built: supported exactly when a device opens here (lavapipe and PoCL in CI,
    # no CUDA driver there), and `gpu` when one of them is
    vk, cu, cl = (a.unavailable_reason() is None for a in (qd.vulkan, qd.cuda, qd.opencl))
    assert qd.is_arch_supported(qd.vulkan) == vk and qd.is_arch_supported(qd.cuda) == cu
    assert qd.is_arch_supported(qd.opencl) == cl
    assert qd.is_arch_supported(qd.gpu) == (vk or cu or cl)
    assert qd.lang.misc.get_host_arch_list() == [qd.cpu]


# what `qd.init` says of an arch it cannot use: metal is not built; cuda and opencl are, and need a driver and
# a device
_WHY = {"metal": "not built yet", "opencl": "could not be opened", "cuda": "could not be opened"}


def _unusable(name: str) -> None:
    if getattr(qd, name).unavailable_reason() is None:
        pytest.skip(f"{name} runs on this machine")


@pytest.mark.parametrize("name", ["cuda", "opencl", "metal"])
def test_gpu_fallback_warns(name):
    _unusable(name)
    with pytest.warns(QuadrantsWarning, match=f"{_WHY[name]}.*; falling back to cpu"):
        qd.init(arch=getattr(qd, name), log_level="warn")
    assert qd.cfg.arch is qd.cpu


@pytest.mark.parametrize("name", ["cuda", "opencl", "metal"])
def test_no_fallback_raises(name):
    _unusable(name)
    with pytest.raises(RuntimeError, match=_WHY[name]):
        qd.init(arch=getattr(qd, name), enable_fallback=False, log_level="warn")


def test_gpu_picks_the_first_gpu_arch_that_opens():
    """`qd.gpu` is the first available of cuda, vulkan, opencl (Quadrants' order)."""
    usable = [a for a in (qd.cuda, qd.vulkan, qd.opencl) if a.unavailable_reason() is None]
    if not usable:
        pytest.skip(f"no GPU arch is available here: {qd.vulkan.unavailable_reason()}")
    qd.init(arch=qd.gpu, log_level="warn")
    assert qd.cfg.arch is usable[0]


def test_missing_vulkan_driver_is_a_clear_error(monkeypatch):
    """A machine without a usable Vulkan device: `qd.init(arch=qd.vulkan, enable_fallback=False)` raises a
    RuntimeError naming what is missing (the test forces the probe's failure)."""
    from qd.runtime import device

    monkeypatch.setitem(device._FAILED, "vulkan", "qd: the vulkan device could not be opened: no driver (test)")
    monkeypatch.delitem(device._RUNTIMES, "vulkan", raising=False)
    with pytest.raises(RuntimeError, match="could not be opened: no driver"):
        qd.init(arch=qd.vulkan, enable_fallback=False, log_level="warn")


def test_arch_list_and_names():
    qd.init(arch=[qd.metal, qd.interp], log_level="warn")
    assert qd.cfg.arch is qd.interp
    qd.init(arch="interp", log_level="warn")
    assert qd.cfg.arch is qd.interp
    qd.init(arch="cpu", log_level="warn")
    assert qd.cfg.arch is qd.cpu
    with pytest.raises(ValueError, match="unknown arch"):
        qd.init(arch="tpu")


# ------------------------------------------------------------------ reset hooks, sync, extensions


def test_reset_hooks_run():
    calls = []

    def hook():
        calls.append(1)

    program.on_reset(hook)
    try:
        qd.reset()
        qd.init(arch=qd.interp, log_level="warn")
        assert len(calls) == 2
    finally:
        program._reset_hooks.remove(hook)


def test_sync_works():
    qd.init(arch=qd.interp, log_level="warn")
    qd.sync()


def test_extension_table():
    ext = qd.extension
    for arch in (qd.cpu, qd.interp):
        for e in (ext.adstack, ext.data64, ext.assertion, ext.dynamic_index):
            assert qd.lang.misc.is_extension_supported(arch, e)
        for e in (ext.sparse, ext.quant, ext.quant_basic, ext.bls, ext.mesh):
            assert not ext.is_extension_supported(arch, e)
    assert ext.is_extension_supported(qd.cuda, ext.adstack) and not ext.is_extension_supported(qd.metal, ext.adstack)


def test_impl_runtime_facade():
    rt = impl.get_runtime()
    rt.prog._reset_max_reducer_dispatch_count()
    assert rt.prog._get_max_reducer_dispatch_count() == 0
    assert rt.prog.config() is _config.current()
    assert impl.default_cfg().debug is False
    with pytest.raises(NotImplementedError):
        impl.call_internal("test_active_mask")


def test_arch_names_survive_package_imports():
    # `qd/gpu/` is a package too; importing its submodules must not rebind the arch.
    import importlib
    import pkgutil

    for pkg in ("qd.gpu", "qd.bytecode"):
        for info in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            importlib.import_module(f"{pkg}.{info.name}")
    assert isinstance(qd.interp, qd.Arch) and isinstance(qd.gpu, qd.Arch)


# ------------------------------------------------------------------ option values are checked


@pytest.mark.parametrize("option, value, error", [
    ("cpu_max_num_threads", "many", QuadrantsRuntimeTypeError),
    ("cpu_max_num_threads", 4.0, QuadrantsRuntimeTypeError),
    ("cpu_max_num_threads", True, QuadrantsRuntimeTypeError),
    ("cpu_max_num_threads", 0, QuadrantsOptionError),
    ("cpu_max_num_threads", -3, QuadrantsOptionError),
    ("ad_stack_size", -1, QuadrantsOptionError),
    ("ad_stack_size", "8", QuadrantsRuntimeTypeError),
    ("unrolling_limit", 2.5, QuadrantsRuntimeTypeError),
    ("random_seed", "a", QuadrantsRuntimeTypeError),
    ("random_seed", 1 << 70, QuadrantsOptionError),
    ("device_memory_GB", "x", QuadrantsRuntimeTypeError),
    ("device_memory_GB", -1.0, QuadrantsOptionError),
    ("device_memory_GB", float("nan"), QuadrantsOptionError),
    ("device_memory_fraction", 2.0, QuadrantsOptionError),
    ("offline_cache_file_path", 3, QuadrantsRuntimeTypeError),
    ("debug", "no", QuadrantsRuntimeTypeError),  # a truthy string would turn debug on
    ("fast_math", 2, QuadrantsRuntimeTypeError),
    ("log_level", 3, QuadrantsRuntimeTypeError),
    ("log_level", "loud", QuadrantsOptionError),
    ("jit", "fast", QuadrantsOptionError),
    ("default_fp", "x", QuadrantsRuntimeTypeError),
    ("default_fp", qd.i32, QuadrantsRuntimeTypeError),
    ("default_fp", qd.types.vector(3, qd.f32), QuadrantsRuntimeTypeError),
    ("default_ip", 3, QuadrantsRuntimeTypeError),
    ("default_ip", qd.f64, QuadrantsRuntimeTypeError),
    ("opt_level", "3", QuadrantsRuntimeTypeError),  # a no-effect option is still typed
])
def test_wrong_option_values_are_refused_naming_the_option(option, value, error):
    with pytest.raises(error, match=option):
        qd.init(arch=qd.interp, **{"log_level": "warn", option: value})
    assert issubclass(error, (TypeError, ValueError)) and issubclass(error, qd.QuadrantsRuntimeError)


def test_cfg_writes_are_checked_too():
    qd.init(arch=qd.interp, log_level="warn")
    with pytest.raises(QuadrantsRuntimeTypeError, match="cpu_max_num_threads"):
        qd.cfg.cpu_max_num_threads = "many"
    with pytest.raises(QuadrantsOptionError, match="ad_stack_size"):
        qd.cfg.ad_stack_size = -5
    qd.cfg.log_level = "WARNING"
    assert qd.cfg.log_level == "warn"


def test_good_option_values_are_kept():
    import pathlib

    qd.init(arch=qd.interp, log_level="warn", cpu_max_num_threads=1, ad_stack_size=64, random_seed=-7,
            device_memory_GB=2, offline_cache_file_path=pathlib.Path("/tmp/qd-cache"), debug=1, jit="interp",
            default_ip=qd.i64, default_fp=qd.f64)
    c = qd.cfg
    assert (c.cpu_max_num_threads, c.ad_stack_size, c.random_seed, c.device_memory_GB) == (1, 64, -7, 2)
    assert c.offline_cache_file_path == "/tmp/qd-cache" and c.debug is True and c.jit == "interp"


def test_bad_thread_count_in_the_environment(monkeypatch):
    monkeypatch.setenv("QD_CPU_MAX_NUM_THREADS", "many")
    with pytest.raises(QuadrantsOptionError, match="QD_CPU_MAX_NUM_THREADS"):
        qd.init(arch=qd.interp, log_level="warn")


@pytest.mark.parametrize("tier", ["interp", "cpu"])
def test_huge_thread_count_is_clamped_and_launches(tier):
    """100000 threads crashed in OpenMP at the first launch (20000 aborted in its thread creation): qd.init
    clamps them with a warning, and the launch runs on the clamped team."""
    import numpy as np

    from qd.base import option_check

    with pytest.warns(QuadrantsWarning, match="cpu_max_num_threads=100000"):
        qd.init(arch=getattr(qd, tier), log_level="warn", cpu_max_num_threads=100000)
    assert qd.cfg.cpu_max_num_threads == option_check.max_threads() <= max(1024, option_check.usable_cores())

    @qd.kernel
    def inc(x: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            x[i] += 1.0

    x = np.arange(100_000, dtype=np.float32)
    inc(x)
    inc(x)
    np.testing.assert_array_equal(x, np.arange(100_000, dtype=np.float32) + 2)


_NO_GPU_PACKAGES = """
import sys, warnings
sys.modules["vulkan"] = None    # as if the packages were not installed: their import raises ImportError
sys.modules["pyopencl"] = None
import qd
from qd.runtime import device
device._FAILED["cuda"] = "no CUDA driver (test)"  # (the test forces the cuda probe's failure too)
device._RUNTIMES.pop("cuda", None)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    qd.init(arch=qd.gpu, log_level="warn")
print(qd.cfg.arch.name)
print("\\n".join(str(x.message) for x in w))
"""


def test_gpu_fallback_names_each_gpu_arch_reason_and_its_fix(tmp_path):
    """Issue 32: with the `vulkan` and `pyopencl` packages missing, `arch=qd.gpu` falls back to cpu saying, per GPU
    arch, why it cannot run and the command that fixes it (not only "no GPU arch is available")."""
    import subprocess
    import sys

    script = tmp_path / "no_gpu_packages.py"
    script.write_text(_NO_GPU_PACKAGES)
    r = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    arch, *messages = r.stdout.strip().splitlines()
    assert arch == qd.cpu.name
    text = "\n".join(messages)
    assert "no GPU arch is available on this machine" in text and "falling back to cpu" in text
    assert "cuda: no CUDA driver (test)" in text
    assert 'vulkan: ' in text and 'pip install "qd-lang[vulkan]"' in text
    assert 'opencl: ' in text and 'pip install "qd-lang[opencl]"' in text
