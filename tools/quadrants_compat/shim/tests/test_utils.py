"""qd's stand-in for Quadrants' `tests/test_utils.py` (written from scratch for the compat runner).

`test(arch=..., exclude=..., require=..., **options)` marks a test to run once per qd arch that is
available here (`interp`, `cpu`, and the GPU tiers whose device opens, `vulkan` today; `QD_WANTED_ARCHS=cpu` or `^interp` narrows the set), skipping
visibly when nothing is left. The `req_arch` / `req_options` parameters it adds are consumed by the
autouse fixture in `qd_compat_plugin.py`, which calls `qd.init` before and `qd.reset` after each test.
"""

from __future__ import annotations

import os
import platform
import tempfile
from typing import Any, Iterable

import pytest

import qd
from qd.base import arch as _arch
from qd.extension import is_extension_supported

_QD_ARCHS = (qd.interp, qd.cpu, qd.vulkan, qd.cuda, qd.opencl)  # the built ones that open here run


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


def _expand(archs: Iterable[Any], cpu_means_interp: bool = False) -> list[Any]:
    """Arch names/objects as qd archs (`qd.gpu`: every GPU arch). With `cpu_means_interp`, `qd.cpu` also
    stands for `qd.interp`: a Quadrants test written for its CPU backend (`arch=qd.cpu`, `exclude=qd.cpu`)
    applies to both of qd's CPU tiers."""
    out: list[Any] = []
    for a in archs:
        if isinstance(a, str):
            a = _arch.to_arch(a)
        out.extend(_arch.GPU_ORDER if a is qd.gpu else (a, qd.interp) if cpu_means_interp and a is qd.cpu else (a,))
    return out


def expected_archs() -> list[Any]:
    """The archs tests run on: qd's available archs, narrowed by `QD_WANTED_ARCHS` (names; `^` excludes)."""
    archs = [a for a in _QD_ARCHS if a.available()]
    wanted = os.environ.get("QD_WANTED_ARCHS", "")
    exclude = wanted.startswith("^")
    names = [n for n in wanted.lstrip("^").split(",") if n.strip()]
    if not names:
        return archs
    chosen = set(_expand(names))
    return [a for a in archs if (a in chosen) != exclude]


def _excluded(a: Any, exclude: list[Any]) -> bool:
    system = platform.system()
    for item in exclude:
        if isinstance(item, (list, tuple)):
            ex_arch = item[0] if item else None
            ex_sys = item[1] if len(item) > 1 else None
        else:
            ex_arch, ex_sys = item, None
        arch_hit = ex_arch is None or a in _expand([ex_arch], cpu_means_interp=True)
        sys_hit = ex_sys is None or ex_sys == system
        if arch_hit and sys_hit:
            return True
    return False


def _missing_exts(a: Any, require: list[Any]) -> list[str]:
    out = []
    for ext in require:
        try:
            ok = is_extension_supported(a, ext)
        except ValueError:
            ok = False
        if not ok:
            out.append(str(ext))
    return out


def test(arch: Any = None, exclude: Any = None, require: Any = None, **options: Any) -> Any:
    """Run the decorated test on every expected arch in `arch`, not in `exclude`, supporting `require`."""
    wanted = _expand(_as_list(arch), cpu_means_interp=True)
    expected = expected_archs()
    archs = [a for a in expected if not wanted or a in wanted]
    require = _as_list(require)
    excl = _as_list(exclude)
    reasons: list[str] = []
    params = []
    if not archs:
        reasons.append(f"no qd arch among {[getattr(a, 'name', a) for a in wanted]} is available")
    for a in archs:
        if _excluded(a, excl):
            reasons.append(f"{a.name} excluded")
            continue
        missing = _missing_exts(a, require)
        if missing:
            reasons.append(f"{a.name} lacks extension(s) {', '.join(missing)}")
            continue
        opts = dict(options)
        # Quadrants' harness: the adstack is on only where a test requires it; elsewhere Quadrants' own
        # default (off) holds, which the "without adstack" tests check. qd's default is on.
        opts.setdefault("ad_stack_experimental_enabled", qd.extension.adstack in require)
        params.append(pytest.param(a, opts, id=f"arch={a.name}"))

    def decorator(func: Any) -> Any:
        func.__qd_test__ = True
        if not params:
            return pytest.mark.skip(reason="qd: " + "; ".join(reasons))(func)
        return pytest.mark.parametrize("req_arch,req_options", params)(func)

    return decorator


def get_rel_eps() -> float:
    return 1e-6


class _BoolEq:
    def __init__(self, value: bool) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return bool(self.value) == bool(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __repr__(self) -> str:
        return f"approx({self.value})"


def approx(expected: Any, **kwargs: Any) -> Any:
    """`pytest.approx` with a relative tolerance of at least `get_rel_eps()`; booleans compare by truth."""
    if isinstance(expected, bool):
        return _BoolEq(expected)
    kwargs["rel"] = max(kwargs.get("rel", 1e-6), get_rel_eps())
    return pytest.approx(expected, **kwargs)


def allclose(x: Any, y: Any, **kwargs: Any) -> bool:
    return x == approx(y, **kwargs)


def make_temp_file(*args: Any, **kwargs: Any) -> str:
    fd, name = tempfile.mkstemp(*args, **kwargs)
    os.close(fd)
    return name


def mkdir_p(path: str) -> None:
    os.makedirs(path, exist_ok=True)


def skip_if_f64_unsupported(dtype: Any) -> None:
    """Every qd arch supports f64; nothing to skip."""


def torch_op(*, output_shapes: Any = ((1,),), output_dtype: Any = None) -> Any:
    """Wrap a kernel `k(*inputs, *outputs)` over torch tensors as a torch autograd op: the forward pass
    makes zeroed outputs of `output_shapes` and launches `k`; the backward pass sets the outputs' `.grad`
    to the incoming gradients, zeroes the inputs' `.grad` and launches `k.grad`."""

    def wrap(kern: Any) -> Any:
        import torch

        dtype = torch.double if output_dtype is None else output_dtype

        class _Op(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *inputs: Any) -> Any:
                outs = tuple(torch.zeros(s, dtype=dtype, requires_grad=True) for s in output_shapes)
                kern(*inputs, *outs)
                ctx.save_for_backward(*inputs, *outs)
                return outs

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                saved = ctx.saved_tensors
                inputs, outs = saved[:len(saved) - len(grads)], saved[len(saved) - len(grads):]
                for t in inputs:
                    if t.grad is None:
                        t.grad = torch.zeros_like(t)
                    t.grad.fill_(0)
                for t, g in zip(outs, grads):
                    t.grad = g.contiguous()
                kern.grad(*inputs, *outs)
                return tuple(t.grad for t in inputs)

        return lambda *args: _Op.apply(*args)

    return wrap


__all__ = ["test", "torch_op", "approx", "allclose", "expected_archs", "get_rel_eps", "make_temp_file", "mkdir_p",
           "skip_if_f64_unsupported"]
