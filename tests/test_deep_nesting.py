"""Deeply nested `if`s (issue 27 item 4: on lavapipe, 85 nested `if`s each doing `c += 1` gave 79, the driver's
execution-mask stacks being 80 deep): 90 levels on every tier against a closed form; on Vulkan, the emitter's flat
`if`s (`qd/gpu/spirv_flow.py`) with breaks, continues, else branches, inner loops and values crossing guarded runs,
against the interpreter; and a clear compile-time error for loops nested past the driver's limit."""

import dataclasses
import importlib.util
import itertools
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError

DEPTH = 90  # Python allows 100 indentation levels: the kernel needs DEPTH + 4
MOD = 97
_counter = itertools.count()


def load_kernel(src: str, directory: str) -> Callable:
    """`kern` of source `src`, from a file (qd reads a kernel's source from its file)."""
    name = f"qd_nested_{os.getpid()}_{next(_counter)}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kern


def counting_source(depth: int = DEPTH) -> str:
    """`depth` nested `if (w + d) % MOD != 0:` levels, each counting into c (3 per level, 3 more through an inner
    loop every tenth level) and the failing level's `else` recording d + 1 in e."""
    lines = ["import qd", "", "", "@qd.kernel", "def kern(a: qd.types.ndarray(qd.i32, 1), o: qd.types.ndarray(qd.i32, 2)):",
             "    for i in range(a.shape[0]):", "        c = 0", "        e = 0", "        w = a[i]"]

    def level(d: int, ind: str) -> list[str]:
        if d == depth:
            return []
        i2 = ind + "    "
        out = [f"{ind}if (w + {d}) % {MOD} != 0:", f"{i2}c += 1"]
        if d % 10 == 5:
            out += [f"{i2}for k in range(3):", f"{i2}    c += k"]
        return out + level(d + 1, i2) + [f"{i2}c += 2", f"{ind}else:", f"{i2}e += {d + 1}"]
    return "\n".join(lines + level(0, " " * 8) + ["        o[i, 0] = c", "        o[i, 1] = e"]) + "\n"


def counting_want(a: np.ndarray, depth: int = DEPTH) -> np.ndarray:
    out = np.zeros((len(a), 2), np.int32)
    for i, w in enumerate(a.tolist()):
        stop = next((d for d in range(depth) if (w + d) % MOD == 0), depth)
        out[i] = (3 * stop + 3 * sum(1 for d in range(stop) if d % 10 == 5), stop + 1 if stop < depth else 0)
    return out


def test_ninety_nested_ifs_count_right(arch: Any, tmp_path: Any) -> None:
    kern = load_kernel(counting_source(), str(tmp_path))
    a = np.arange(MOD, dtype=np.int32)
    o = np.zeros((MOD, 2), np.int32)
    kern(a, o)
    want = counting_want(a)
    bad = np.nonzero((o != want).any(axis=1))[0]
    assert not len(bad), f"w = {bad[:8].tolist()}: want {want[bad[:8]].tolist()}, got {o[bad[:8]].tolist()}"


def mixed_source(depth: int) -> str:
    """Nested `if`s with an inner loop that breaks, a `break` and a `continue` of the enclosing loop, `else`
    branches, and values defined before an `if` used inside it and after it (they cross flat guards)."""
    lines = ["import qd", "", "", "@qd.kernel",
             "def kern(a: qd.types.ndarray(qd.i32, 1), o: qd.types.ndarray(qd.i32, 1)) -> qd.i32:",
             "    t = 0", "    for i in range(a.shape[0]):", "        c = 0", "        e = 0", "        w = a[i]",
             "        for j in range(3):"]

    def level(d: int, ind: str) -> list[str]:
        if d == depth:
            return [f"{ind}c += 1000 + j"]
        i2 = ind + "    "
        out = [f"{ind}v{d} = w * {d % 5 + 1} + j", f"{ind}if v{d} % 7 != {d % 7}:", f"{i2}c += v{d} % 3 + 1"]
        if d % 9 == 4:
            out += [f"{i2}for k in range(w % 4):", f"{i2}    c += k", f"{i2}    if c > 40 + j:", f"{i2}        break"]
        if d % 13 == 7:
            out += [f"{i2}if w == 5 + j:", f"{i2}    break"]
        out += level(d + 1, i2) + [f"{i2}c += v{d} % 5"]
        if d % 11 == 3:
            out += [f"{ind}else:", f"{i2}e += v{d}", f"{i2}if w == 8:", f"{i2}    continue", f"{i2}e += 1"]
        return out
    tail = ["            e += 100", "        o[i] = c * 1000 + e", "        t += c", "    return t"]
    return "\n".join(lines + level(0, " " * 12) + tail) + "\n"


@pytest.fixture
def vulkan_nesting(arch: Any) -> Iterator[Callable[[int], None]]:
    """Sets the vulkan backend's `Caps.max_nesting` (restored after the test)."""
    from qd.runtime import device

    be = device.current().backend
    saved = be.caps

    def set_limit(n: int) -> None:
        be.caps = dataclasses.replace(saved, max_nesting=n)
    yield set_limit
    qd.sync()
    be.caps = saved


def _run_mixed(src: str, directory: str) -> tuple[int, list[int]]:
    a = ((np.arange(60) * 7919) % 23).astype(np.int32)
    o = np.zeros(60, np.int32)
    t = load_kernel(src, directory)(a, o)
    return int(t), o.tolist()


@pytest.mark.archs("vulkan")
@pytest.mark.parametrize("limit", [18, 24, 80])
def test_flat_ifs_agree_with_the_interpreter(arch: Any, vulkan_nesting: Any, tmp_path: Any, limit: int) -> None:
    """At `max_nesting` 18 every `if` below depth 2 is flat, at 24 from depth 8 (guards inside guards), at 80
    (llvmpipe's) from 64."""
    src = mixed_source(40 if limit < 80 else 80)
    vulkan_nesting(limit)
    got = _run_mixed(src, str(tmp_path))
    qd.init(arch=qd.interp, log_level="warn")
    assert got == _run_mixed(src, str(tmp_path))


@pytest.mark.archs("vulkan")
def test_loops_nested_past_the_driver_limit_raise(arch: Any, vulkan_nesting: Any, tmp_path: Any) -> None:
    vulkan_nesting(8)  # flat `if`s from depth 0; a construct deeper than 2 is an error
    kern = load_kernel(mixed_source(6), str(tmp_path))
    with pytest.raises(QuadrantsCompilationError, match=r"qd_nested_\w+\.py:\d+: loops and ifs nested 3 deep"):
        kern(np.zeros(4, np.int32), np.zeros(4, np.int32))
