"""qd: a kernel language embedded in Python, API-compatible with Quadrants.

This module only re-exports; each area keeps its public names in its own `api` module.
"""

from qd.errors import *  # noqa: F403
from qd.types.dtypes import (f16, f32, f64, float16, float32, float64, i8, i16, i32, i64, int8, int16,
                             int32, int64, u1, u8, u16, u32, u64, uint1, uint8, uint16, uint32, uint64)
from qd.runtime.api import *  # noqa: F403  (init, reset, sync, archs, cfg, field, ndarray, root, ...)
from qd.frontend.api import *  # noqa: F403  (func, static, ndrange, atomics, math builtins, ...)
from qd.runtime.kernel import Kernel, kernel, pure  # noqa: F401  (`@qd.kernel` launches: it is the runtime's)
from qd.lang.api import *  # noqa: F403  (Vector, Matrix, BufferView, ...)
from qd import types, math, extension, lang, ad, algorithms, _lib  # noqa: E402,F401
from qd.lang import simt  # noqa: E402,F401  (`qd.simt`)
from qd import profiler as profiler  # `qd.profiler` (Quadrants' profiler functions)

# The compile pipeline is loaded with qd, not at the first kernel call: a first call pays for its own
# work only. (LLVM itself is initialised in the background by qd.init on qd.cpu.)
import qd.runtime.launch  # noqa: E402,F401
import qd.runtime.device  # noqa: E402,F401  (registers the GPU tiers)
import qd.runtime.device_array  # noqa: E402,F401  (registers its hook: another library's device arrays in place)
import qd.passes.runner  # noqa: E402,F401

# `qd.ad`'s public names live beside the runtime they drive (the package itself is the compile side, below it)
from qd.runtime.ad_custom import Tape as _Tape, grad_for as _grad_for, grad_replaced as _grad_replaced  # noqa: E402
from qd.runtime.ad_custom import no_grad as _no_grad  # noqa: E402
from qd.runtime.ad_tape import FwdMode as _FwdMode, clear_all_gradients as _clear_all_gradients  # noqa: E402

ad.Tape, ad.grad_for, ad.grad_replaced, ad.no_grad = _Tape, _grad_for, _grad_replaced, _no_grad
ad.FwdMode, ad.clear_all_gradients = _FwdMode, _clear_all_gradients

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`qd.debug` and `qd.tools` are imported on first use: a program that never debugs never loads them. A
    Quadrants name qd lacks raises an error naming its feature (qd/_unsupported.py)."""
    if name in ("debug", "tools"):
        import importlib

        return importlib.import_module(f"qd.{name}")
    from qd._unsupported import missing

    raise missing("qd", name)
