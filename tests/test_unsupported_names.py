"""Quadrants names qd lacks fail clearly: `qd/_unsupported.py`'s table against qd, Quadrants and the docs page."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

import qd
from qd import _unsupported
from qd.errors import UnsupportedFeatureError
from tests.peers import SKIP_REASON, peer_python, run_json

ROOT = Path(__file__).resolve().parent.parent
# The user-facing path of each module of the table, and the module that implements it.
MODULE_PATHS = {"qd": "qd", "qd.types": "qd.types", "qd.math": "qd.math", "qd.lang": "qd.lang",
                "qd.algorithms": "qd.algorithms", "qd.graph": "qd.lang.graph", "qd.simt": "qd.lang.simt",
                "qd.tools": "qd.tools"}
ENTRIES = [(m, n) for m, table in _unsupported.MISSING.items() for n in table]
# Quadrants modules compared (qd path, Quadrants attribute path), and Quadrants names that are no API.
COMPARED = ["", "types", "math", "linalg", "lang", "tools", "ad", "algorithms", "graph", "simt", "types.quant",
            "experimental", "sparse"]
NOT_API = {("qd.simt", "TYPE_CHECKING")}  # a typing constant left in Quadrants' namespace


def _module(path: str) -> object:
    return importlib.import_module(MODULE_PATHS[path])


def test_the_table_is_consistent() -> None:
    assert set(_unsupported.MISSING) == set(MODULE_PATHS)
    for module, name in ENTRIES:
        assert _unsupported.MISSING[module][name] in _unsupported.FEATURES, (module, name)
    used = {key for table in _unsupported.MISSING.values() for key in table.values()}
    assert used == set(_unsupported.FEATURES), "a feature no name uses"


@pytest.mark.parametrize(("module", "name"), ENTRIES, ids=[f"{m}.{n}" for m, n in ENTRIES])
def test_a_missing_name_is_absent_from_qd(module: str, name: str) -> None:
    """No name of the table exists in qd: neither an attribute nor a submodule. A feature that lands leaves the
    table (else its `__getattr__` entry would be dead, or hide a submodule)."""
    mod = _module(module)
    assert name not in vars(mod), f"{module}.{name} exists in qd: remove it from qd/_unsupported.py"
    if hasattr(mod, "__path__"):  # a package: no submodule of that name either
        assert importlib.util.find_spec(f"{MODULE_PATHS[module]}.{name}") is None
    assert not hasattr(mod, name)
    assert getattr(mod, name, "default") == "default"


@pytest.mark.parametrize(("module", "name"), ENTRIES, ids=[f"{m}.{n}" for m, n in ENTRIES])
def test_a_missing_name_raises_naming_its_feature(module: str, name: str) -> None:
    with pytest.raises(NotImplementedError) as info:
        getattr(_module(module), name)
    err = info.value
    assert isinstance(err, (UnsupportedFeatureError, AttributeError)) and err.name == name
    text = str(err)
    assert text.startswith(f"{module}.{name} is not implemented in qd yet")
    assert _unsupported.FEATURES[_unsupported.MISSING[module][name]].what in text
    assert "docs/unsupported.md" in text


def test_the_error_class_is_both() -> None:
    assert issubclass(UnsupportedFeatureError, NotImplementedError)
    assert issubclass(UnsupportedFeatureError, AttributeError)
    assert qd.UnsupportedFeatureError is UnsupportedFeatureError
    with pytest.raises(AttributeError):  # the way `hasattr` sees it
        qd.checkpoint  # noqa: B018


def test_other_names_raise_the_plain_attribute_error() -> None:
    for path in MODULE_PATHS:
        with pytest.raises(AttributeError) as info:
            _module(path).no_such_name_anywhere  # noqa: B018
        assert type(info.value) is AttributeError and info.value.name == "no_such_name_anywhere"


def test_qd_lang_answers_qd_names_and_qd_missing_names() -> None:
    """Quadrants' `lang` re-exports its top level: `qd.lang.Field` is `qd.Field`; `qd.lang.checkpoint` fails as
    `qd.checkpoint` does."""
    assert qd.lang.Field is qd.Field and qd.lang.kernel is qd.kernel
    with pytest.raises(NotImplementedError, match=r"^qd\.lang\.checkpoint is not implemented"):
        qd.lang.checkpoint  # noqa: B018
    assert not hasattr(qd.lang, "Mesh")


def test_the_docs_page_lists_every_name() -> None:
    page = (ROOT / "docs/unsupported.md").read_text()
    listed = set(re.findall(r"`(qd(?:\.\w+)+)`", page))
    missing = [f"{m}.{n}" for m, n in ENTRIES if f"{m}.{n}" not in listed]
    assert not missing, f"docs/unsupported.md lacks {missing}"


@functools.lru_cache(maxsize=1)
def _quadrants_names() -> dict[str, list[str] | None]:
    """Quadrants' public names per compared module (None: no such module), from the peer venv."""
    python = peer_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    code = ("import json, functools, quadrants\n"
            "out = {}\n"
            f"for m in {COMPARED!r}:\n"
            "    try:\n"
            "        mod = functools.reduce(getattr, m.split('.'), quadrants) if m else quadrants\n"
            "    except AttributeError:\n"
            "        out[m] = None; continue\n"
            "    out[m] = sorted(n for n in dir(mod) if not n.startswith('_'))\n"
            "print(json.dumps(out))\n")
    return run_json(python, code, cwd=Path("/"))


def _covered(path: str) -> bool:
    """Whether `qd.<path>` exists in qd or is named by the table (itself or a module above it)."""
    parts = path.split(".")
    obj: object = qd
    for i, part in enumerate(parts):
        here = ".".join(["qd", *parts[:i]])
        if here in MODULE_PATHS and _unsupported.feature_of(here, part) is not None:
            return True
        if (here, part) in NOT_API:
            return True
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return False
    return True


@pytest.mark.parametrize("module", COMPARED, ids=[m or "quadrants" for m in COMPARED])
def test_every_quadrants_name_is_in_qd_or_in_the_table(module: str) -> None:
    names = _quadrants_names().get(module)
    if names is None:
        pytest.skip(f"quadrants.{module} does not exist in the peer venv's Quadrants")
    prefix = f"{module}." if module else ""
    uncovered = [n for n in names if not _covered(prefix + n)]
    assert not uncovered, (f"Quadrants' {'quadrants.' + prefix}{uncovered} are neither in qd nor in "
                           "qd/_unsupported.py")


def test_sparse_snodes_raise_not_implemented() -> None:
    """`qd.root.pointer` exists (Quadrants code calls it) and refuses with Quadrants' wording, as a
    NotImplementedError too."""
    for kind in ("pointer", "bitmasked", "dynamic"):
        with pytest.raises(NotImplementedError, match=r"SNode is not supported on this backend.*unsupported\.md"):
            getattr(qd.root, kind)(qd.i, 8)
    with pytest.raises(qd.QuadrantsRuntimeError):
        qd.root.pointer(qd.i, 8)


def test_a_kernel_using_a_missing_name_names_the_feature(arch: object) -> None:
    x = qd.field(qd.f32, shape=4)

    @qd.kernel
    def k():
        for i in x:
            x[i] = qd.frexp(1.0)

    with pytest.raises(qd.QuadrantsCompilationError, match=r"qd\.frexp is not implemented in qd yet"):
        k()
