"""The fastcache of `@qd.kernel(fastcache=True)` (`qd/frontend/fastcache.py`): a new process loads the instance
from disk (no frontend, no passes) and computes the same; anything that determines the instance changes the key
(a func's source, a template value, a dtype, an option, the mode); the purity rule (`qd/frontend/purity.py`);
parameters the key cannot describe take the normal path; a corrupt entry is a miss that is rewritten."""

from __future__ import annotations

import enum
import json
import math
import os
import subprocess
import sys
import textwrap
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError, QuadrantsWarning
from qd import ir_pack
from qd.frontend import fastcache
from qd.ir_text import print_kernel
from tests.conftest import init_arch

_HELPER = """
import qd

@qd.func
def bump(v, c):
    return v * {scale} + c
"""

_CHILD = """
import json, os, sys
import numpy as np
import qd
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helper

arch, cache, tmpl, dt, debug, src_ll = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1", \\
    sys.argv[6] == "1"
qd.init(arch=getattr(qd, arch), log_level="warn", offline_cache_file_path=cache, debug=debug, src_ll_cache=src_ll,
        **({{"jit": "eager"}} if arch == "cpu" else {{}}))
DT = getattr(qd, dt)

@qd.kernel(fastcache=True)
def k(n: qd.i32, y: qd.types.ndarray(), z: qd.types.ndarray(), c: qd.template()) -> qd.f32:
    t = 0.0
    for i in range(y.shape[0]):
        y[i] = helper.bump(y[i] + n, c)
        t += y[i]
    for i in range(z.shape[0]):
        if z[i] > 2:
            z[i] = z[i] * 2 + c
    return t

y = np.linspace(0, 3, 16).astype(np.dtype(DT.np_dtype)); z = np.arange(5, dtype=np.float32)
t = k(2, y, z, tmpl)
print("RESULT " + json.dumps({{"t": float(t), "y": y.tolist(), "z": z.tolist(),
                              "obs": vars(k._primal.src_ll_cache_observations)}}), flush=True)
"""


def _expected(tmpl: float, scale: float, dt: type) -> tuple[float, list, list]:
    y = np.linspace(0, 3, 16).astype(dt)
    y = ((y + dt(2)) * dt(scale) + dt(tmpl)).astype(dt)
    z = np.arange(5, dtype=np.float32)
    z = np.where(z > 2, z * 2 + np.float32(tmpl), z)
    return float(y.astype(np.float64).sum()), y.tolist(), z.tolist()


def _child(root: Path, arch: str, tmpl: float = 1.5, dt: str = "f32", debug: bool = False, src_ll: bool = True,
           scale: float = 2.0) -> dict:
    """One child process's results and fastcache observations (helper.py written with `scale`)."""
    (root / "helper.py").write_text(textwrap.dedent(_HELPER.format(scale=scale)))
    (root / "child.py").write_text(textwrap.dedent(_CHILD.format()))
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               POCL_CACHE_DIR=str(root / "pocl"), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, str(root / "child.py"), arch, str(root / "cache"), str(tmpl), dt,
                        str(int(debug)), str(int(src_ll))], capture_output=True, text=True, env=env, timeout=300,
                       check=False)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert r.returncode == 0 and line is not None, r.stdout + r.stderr
    out = json.loads(line[7:])
    t, y, z = _expected(tmpl, scale, np.float64 if dt == "f64" else np.float32)
    np.testing.assert_allclose(out["y"], y, rtol=1e-6)
    assert out["z"] == z
    assert out["t"] == pytest.approx(t, rel=1e-5)
    return out["obs"]


def test_second_process_loads_the_instance(arch: qd.base.arch.Arch, tmp_path: Path) -> None:
    first = _child(tmp_path, arch.name)
    assert first == {"cache_key_generated": True, "cache_validated": False, "cache_loaded": False,
                     "cache_stored": True}
    assert len(list((tmp_path / "cache" / "fastcache").glob("*.qfc"))) == 1
    second = _child(tmp_path, arch.name)
    assert second["cache_loaded"] and second["cache_validated"] and not second["cache_stored"]
    off = _child(tmp_path, arch.name, src_ll=False)  # qd.init(src_ll_cache=False): the normal path
    assert not off["cache_key_generated"] and not off["cache_loaded"]


def test_what_determines_the_instance_misses(tmp_path: Path) -> None:
    """A changed func source, template value, dtype or option is a miss (computing the new right values)."""
    assert _child(tmp_path, "interp")["cache_stored"]
    edited = _child(tmp_path, "interp", scale=3.0)  # helper.py changed: the entry's file digest no longer matches
    assert edited["cache_key_generated"] and not edited["cache_loaded"] and edited["cache_stored"]
    assert _child(tmp_path, "interp", scale=3.0)["cache_loaded"]
    for change in ({"tmpl": 2.5}, {"dt": "f64"}, {"debug": True}):
        obs = _child(tmp_path, "interp", scale=3.0, **change)
        assert not obs["cache_loaded"] and obs["cache_stored"], change
    assert len(list((tmp_path / "cache" / "fastcache").glob("*.qfc"))) == 4


# ------------------------------------------------------------------ in one process (qd.init clears the instances)


def _again(arch: qd.base.arch.Arch, cache: Path, **kw: object) -> None:
    init_arch(arch, offline_cache_file_path=str(cache), **kw)


def _obs(k: qd.Kernel) -> dict:
    return vars(k._primal.src_ll_cache_observations)


def test_corrupt_entry_is_a_miss(tmp_path: Path) -> None:
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path))

    @qd.kernel(fastcache=True)
    def k(x: qd.types.ndarray(qd.i32, 1)):
        for i in x:
            x[i] = x[i] * 3 + i

    for damage in (lambda b: b[:-7], lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], lambda b: b""):
        x = np.arange(6, dtype=np.int32)
        k(x)
        (entry,) = (tmp_path / "fastcache").glob("*.qfc")
        entry.write_bytes(damage(entry.read_bytes()))
        _again(qd.interp, tmp_path)
        x = np.arange(6, dtype=np.int32)
        k(x)
        assert x.tolist() == [i * 4 for i in range(6)]
        assert not _obs(k)["cache_loaded"] and _obs(k)["cache_stored"]
        _again(qd.interp, tmp_path)
        k(x)
        assert _obs(k)["cache_loaded"] and x.tolist() == [i * 13 for i in range(6)]


def test_modes_key_apart_and_grad_loads(tmp_path: Path) -> None:
    init_arch(qd.cpu, offline_cache_file_path=str(tmp_path))

    @qd.kernel(fastcache=True)
    def sq(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            y[i] = x[i] * x[i]

    sig_values = [np.zeros(3, np.float32), np.zeros(3, np.float32)]
    from qd.frontend.args import convert

    key = convert(sq.signature, sig_values)[0]
    cfg = qd.cfg
    keys = {m: fastcache.make_key(sq, sig_values, key, m, (), cfg) for m in ("", "fwd", "grad", "validate")}
    assert len(set(keys.values())) == 4

    def run() -> tuple[list, list]:
        x = qd.ndarray(qd.f32, 3, needs_grad=True)
        y = qd.ndarray(qd.f32, 3, needs_grad=True)
        x.from_numpy(np.array([1.0, 2.0, -3.0], np.float32))
        sq(x, y)
        y.grad.from_numpy(np.ones(3, np.float32))
        sq.grad(x, y)
        return y.to_numpy().tolist(), x.grad.to_numpy().tolist()

    assert run() == ([1.0, 4.0, 9.0], [2.0, 4.0, -6.0])
    assert len(list((tmp_path / "fastcache").glob("*.qfc"))) == 2
    _again(qd.cpu, tmp_path)
    assert run() == ([1.0, 4.0, 9.0], [2.0, 4.0, -6.0])
    assert _obs(sq)["cache_loaded"]  # (the grad instance, compiled last)


@qd.data_oriented
class _Holder:
    def __init__(self, n: int, arr: object) -> None:
        self.n = n
        self.arr = arr

    @qd.kernel(fastcache=True)
    def fill(self, out: qd.types.ndarray(qd.i32, 1)):
        for i in out:
            out[i] = self.arr[i] + self.n


def test_data_oriented_members_key_and_bind(tmp_path: Path) -> None:
    """A data-oriented template argument is keyed by its members (primitive values, ndarray dtype and shape); the
    ndarray bound through it is found again in the new call's argument."""
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path))
    a = qd.ndarray(qd.i32, 4)
    a.from_numpy(np.array([1, 2, 3, 4], np.int32))
    out = np.zeros(4, np.int32)
    _Holder(10, a).fill(out)
    assert out.tolist() == [11, 12, 13, 14] and _obs(_Holder.fill)["cache_stored"]
    _again(qd.interp, tmp_path)
    b = qd.ndarray(qd.i32, 4)
    b.from_numpy(np.array([5, 6, 7, 8], np.int32))
    _Holder(10, b).fill(out)
    assert out.tolist() == [15, 16, 17, 18] and _obs(_Holder.fill)["cache_loaded"]
    _again(qd.interp, tmp_path)
    b = qd.ndarray(qd.i32, 4)
    b.from_numpy(np.array([5, 6, 7, 8], np.int32))
    _Holder(20, b).fill(out)  # another baked primitive: another instance
    assert out.tolist() == [25, 26, 27, 28] and not _obs(_Holder.fill)["cache_loaded"]


def test_unsupported_parameters_fall_back(tmp_path: Path) -> None:
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path))
    f = qd.field(qd.f32, 4)

    @qd.kernel(fastcache=True)
    def k(t: qd.template(), out: qd.types.ndarray(qd.f32, 1)):
        for i in out:
            out[i] = t[i] + 1

    out = np.zeros(4, np.float32)
    f.from_numpy(np.arange(4, dtype=np.float32))
    k(f, out)  # a field: the normal path, silently right
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert _obs(k) == {"cache_key_generated": False, "cache_validated": False, "cache_loaded": False,
                       "cache_stored": False}

    @qd.kernel(fastcache=True)
    def via_member(h: qd.template(), out: qd.types.ndarray(qd.f32, 1)):
        for i in out:
            out[i] = h.arr[i] * 2

    via_member(_Holder(0, f), out)
    assert out.tolist() == [0.0, 2.0, 4.0, 6.0] and not _obs(via_member)["cache_key_generated"]
    assert not list((tmp_path / "fastcache").glob("*.qfc"))


# ------------------------------------------------------------------ purity


class _Color(enum.IntEnum):
    RED = 1
    BLUE = 2


lowercase_global = 3
UPPER_GLOBAL = 4
namespace = types.SimpleNamespace(count=5, PI_ISH=3)


def test_purity_rule(tmp_path: Path) -> None:
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path))
    f = qd.field(qd.i32, 2)

    @qd.kernel(fastcache=True)
    def reads_global() -> qd.i32:
        return lowercase_global

    @qd.kernel(fastcache=True)
    def reads_field() -> qd.i32:
        return f[0]

    @qd.func
    def helper() -> qd.i32:
        return lowercase_global

    @qd.kernel(fastcache=True)
    def through_func() -> qd.i32:
        return helper()

    @qd.kernel(fastcache=True)
    def reads_attribute() -> qd.i32:
        return namespace.count

    for k in (reads_global, reads_field, through_func, reads_attribute):
        with pytest.raises(QuadrantsCompilationError, match="PURE.VIOLATION"):
            k()

    @qd.kernel
    def not_pure() -> qd.i32:
        return lowercase_global + namespace.count

    assert not_pure() == 8

    @qd.kernel(fastcache=True)
    def allowed() -> qd.f32:
        return _Color.BLUE + math.pi + np.pi + qd.math.pi

    assert allowed() == pytest.approx(2 + 3 * math.pi, rel=1e-6)

    @qd.kernel(fastcache=True)
    def warns() -> qd.i32:
        return UPPER_GLOBAL + namespace.PI_ISH + qd.static(lowercase_global)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert warns() == 10
    assert sum(issubclass(w.category, QuadrantsWarning) and "PURE.VIOLATION" in str(w.message) for w in caught) == 3

    @qd.pure
    @qd.kernel
    def old_spelling() -> qd.i32:
        return lowercase_global

    with pytest.raises(QuadrantsCompilationError, match="lowercase_global"):
        old_spelling()


# ------------------------------------------------------------------ the flat IR form


def test_ir_pack_round_trip(tmp_path: Path) -> None:
    assert ir_pack.unpackable_classes() == []
    init_arch(qd.cpu, offline_cache_file_path=str(tmp_path), debug=True)  # (checks in the IR too)

    @qd.func
    def g(a: qd.f32) -> qd.f32:
        s = 0.0
        for j in range(3):
            if a > j:
                s += qd.sin(a * j)
            else:
                s -= 1
        return s

    @qd.kernel
    def k(n: qd.i32, y: qd.types.ndarray(qd.f32, 1)):
        for i in y:
            y[i] = g(y[i] + n)
            assert y[i] < 100, "too big"
        print("n =", n)

    k(2, np.zeros(4, np.float32))
    (inst,) = k._instances.values()
    kir = inst[0].ir
    records, roots = ir_pack.pack([kir])
    (back,) = ir_pack.unpack(records, roots)
    assert print_kernel(back) == print_kernel(kir)
    assert back.buffers[0].dtype is qd.f32
    with pytest.raises(ValueError):
        ir_pack.unpack([(), (999, 1)], [1])


# ------------------------------------------------------------------ captured state the key cannot see

_CAPTURE_CHILD = """
import json, os, sys
import numpy as np
import qd
qd.init(arch=qd.interp, log_level="error", offline_cache_file_path=sys.argv[1])
import consts

SCALE = float(sys.argv[2])  # an UPPERCASE global: Quadrants only warns; qd records it and checks it before a load


@qd.func
def twice(v):
    return v * 2


@qd.func
def thrice(v):
    return v * 3


def make(f):
    @qd.kernel(fastcache=True)
    def k(y: qd.types.ndarray()):
        for i in range(y.shape[0]):
            y[i] = f(qd.cast(y[i], consts.DT)) * SCALE
    return k


out = {{}}
for name, f in (("twice", twice), ("thrice", thrice)):
    y = np.arange(4, dtype=np.float64) + 0.1
    k = make(f)
    k(y)
    out[name] = (y.tolist(), vars(k._primal.src_ll_cache_observations))
print("RESULT " + json.dumps(out), flush=True)
"""


def _capture_child(root: Path, scale: float, dt: str) -> dict:
    (root / "consts.py").write_text("import os\nimport qd\nDT = getattr(qd, os.environ['QD_TEST_DT'])\n")
    (root / "child.py").write_text(textwrap.dedent(_CAPTURE_CHILD.format()))
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo), str(root)]), QD_TEST_DT=dt,
               PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, str(root / "child.py"), str(root / "cache"), str(scale)], capture_output=True,
                       text=True, env=env, timeout=300, check=False)
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert r.returncode == 0 and line is not None, r.stdout + r.stderr
    out = json.loads(line[7:])
    base = np.arange(4, dtype=np.float64) + 0.1
    cast = base.astype(np.float32).astype(np.float64) if dt == "f32" else base
    for name, factor in (("twice", 2), ("thrice", 3)):
        want = cast * factor * scale
        np.testing.assert_allclose(out[name][0], want, rtol=1e-6 if dt == "f32" else 1e-12)
    return {name: out[name][1] for name in out}


def test_captured_globals_and_factory_closures(tmp_path: Path) -> None:
    """Two kernels of one `def` in a factory (closures over different funcs) key apart; a captured UPPERCASE global
    and a module's dtype attribute (values the source does not show: set from argv / the environment) are
    recorded and checked before a load: a new value is a miss with the right result, never the old kernel."""
    first = _capture_child(tmp_path, 2.0, "f32")
    assert first["twice"]["cache_stored"] and first["thrice"]["cache_stored"]  # two keys: not the first's kernel
    again = _capture_child(tmp_path, 2.0, "f32")
    assert again["twice"]["cache_loaded"] and again["thrice"]["cache_loaded"]
    scaled = _capture_child(tmp_path, 5.0, "f32")  # SCALE differs: the recorded capture does not match
    assert not scaled["twice"]["cache_loaded"] and not scaled["thrice"]["cache_loaded"]
    wide = _capture_child(tmp_path, 5.0, "f64")  # consts.DT differs
    assert not wide["twice"]["cache_loaded"]
