"""The layer rule of DESIGN §1, checked over the imports of every module (`tools/layers.py` holds the table):
no module imports one of a higher layer, function-level imports and implied package faces included, so no import
cycle crosses layers; and what the low layers call up through `qd.types.hooks` is registered by `import qd`."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _layers():
    spec = importlib.util.spec_from_file_location("qd_layers", ROOT / "tools" / "layers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_module_has_a_layer() -> None:
    layers = _layers()
    for m in layers.modules():
        layers.layer_of(m)  # KeyError names a module no layer claims


def test_no_module_imports_a_higher_layer() -> None:
    bad = _layers().violations()
    assert not bad, "imports of a higher layer (DESIGN §1; a call up goes through qd.types.hooks):\n" + "\n".join(bad)


def test_no_cycle_crosses_layers() -> None:
    layers = _layers()
    for cycle in layers.cycles():
        assert len({layers.layer_of(m) for m in cycle}) == 1, f"an import cycle across layers: {cycle}"


def test_the_check_sees_function_level_and_package_imports() -> None:
    """The checker itself: an upward import inside a function, and one through a package face, are found."""
    layers = _layers()
    mods = {"qd.ir": Path("qd/ir.py"), "qd.runtime": Path("qd/runtime/__init__.py"),
            "qd.runtime.launch": Path("qd/runtime/launch.py"), "qd.types": Path("qd/types/__init__.py"),
            "qd.types.dtypes": Path("qd/types/dtypes.py")}
    edges = {"qd.ir": {"qd.runtime.launch": 7}, "qd.types.dtypes": {"qd.types": 0}, "qd.types": {"qd.runtime": 3}}
    src = "def f():\n    from qd.runtime import launch\n"
    node = next(n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom))
    assert list(layers._imported(node, "qd.ir", False, mods)) == ["qd.runtime.launch"]
    orig = layers.modules
    layers.modules = lambda: {k: layers.ROOT / v for k, v in mods.items()}
    try:
        bad = layers.violations(edges)
    finally:
        layers.modules = orig
    assert any("qd.ir (ir) imports qd.runtime.launch" in b for b in bad)
    assert any("qd.types (floor) imports qd.runtime (runtime)" in b for b in bad)


def test_import_qd_registers_every_hook() -> None:
    code = "import qd\nfrom qd.types import hooks\nprint(hooks.missing())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def test_an_unregistered_hook_says_so() -> None:
    from qd.types.hooks import _Impl

    with pytest.raises(RuntimeError, match="'Matrix' is registered when the module providing it is imported"):
        _Impl().Matrix  # noqa: B018


def test_qd_ads_public_names_come_from_the_runtime() -> None:
    """`qd.ad`'s Quadrants names live beside the runtime they drive; `import qd` sets them on the package, so both
    spellings work in a fresh process."""
    code = ("from qd.ad import Tape, FwdMode, clear_all_gradients, grad_for, grad_replaced, no_grad\n"
            "import qd\nfrom qd.runtime import ad_custom, ad_tape\n"
            "assert qd.ad.Tape is Tape is ad_custom.Tape and qd.ad.FwdMode is FwdMode is ad_tape.FwdMode\n"
            "assert sorted(qd.ad.__all__) == sorted(n for n in qd.ad.__all__ if hasattr(qd.ad, n))\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "ok"
