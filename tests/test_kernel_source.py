"""A kernel's source is found without `inspect.getsourcelines` (`qd/frontend/context.py: _quick_source`, whose
tokenizer costs a new process ~8 ms at its first kernel): the same lines as inspect's, or inspect itself where
the quick cut is not one definition. Sources are cached per code object (by identity) and read fresh for a new
one: a reloaded module or a re-run notebook cell runs its new body, two files never share a source, and a file
edited without a reload is refused where its lines no longer hold the function."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import linecache
import os
import sys

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsCompilationError, QuadrantsNameError
from qd.frontend.context import _quick_source, source_of


def _decorated(
    x: qd.types.ndarray(qd.f32, 1),
    k: qd.f32,
) -> None:  # a signature closed at the def's indentation
    for i in range(x.shape[0]):
        x[i] += k
        # a comment at the end


def _ends_in_text_at_column_zero() -> str:
    return """first
second at column zero"""


def test_quick_source_equals_inspect() -> None:
    for fn in (_decorated, test_quick_source_equals_inspect, _quick_source):
        lines, start, _ = _quick_source(fn)
        assert (lines, start) == tuple(inspect.getsourcelines(fn))


def test_falls_back_where_the_cut_is_not_one_definition() -> None:
    assert _quick_source(_ends_in_text_at_column_zero) is None
    assert _quick_source(lambda x: x) is None


def test_kernel_with_such_a_signature_runs_and_errors_point_at_its_lines(qd_program) -> None:
    kernel = qd.kernel(_decorated)
    x = np.zeros(4, np.float32)
    kernel(x, 2.0)
    np.testing.assert_array_equal(x, np.full(4, 2.0, np.float32))

    @qd.kernel
    def bad(
        x: qd.types.ndarray(qd.f32, 1),
    ):
        for i in range(x.shape[0]):
            x[i] = undefined_name  # noqa: F821

    with open(__file__) as f:
        where = next(n for n, text in enumerate(f, 1) if "= undefined_name" in text)
    with pytest.raises(QuadrantsNameError, match="undefined_name") as info:
        bad(x)
    assert f"{__file__}:{where}:" in str(info.value)


# ------------------------------------------------------------------ stale sources (a reload, notebooks)

_MODULE = '''import qd
{pre}
@qd.kernel
def fill(x: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        v: {ann} = {value}
        x[i] = v


@qd.kernel
def other(x: qd.types.ndarray(qd.f32, 1)):
    for i in range(x.shape[0]):
        x[i] = -1.0
'''


def _write(path, pre: str = "", ann: str = "qd.f32", value: str = "1.5") -> None:
    """Writes the module, its mtime moved on: an edit within the same second must look changed too."""
    old = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(_MODULE.format(pre=pre, ann=ann, value=value))
    ns = max(old + 2_000_000_000, path.stat().st_mtime_ns)
    os.utime(path, ns=(ns, ns))


def _import(path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def modules(tmp_path):
    sys.path.insert(0, str(tmp_path))
    names: list[str] = []
    yield tmp_path, names
    sys.path.remove(str(tmp_path))
    for n in names:
        sys.modules.pop(n, None)


def test_a_reloaded_module_runs_its_new_body(qd_program, modules) -> None:
    tmp, names = modules
    path = tmp / "qd_src_reload.py"
    _write(path, value="1.5")
    names.append("qd_src_reload")
    mod = importlib.import_module("qd_src_reload")
    x = np.zeros(3, np.float32)
    mod.fill(x)
    np.testing.assert_array_equal(x, np.full(3, 1.5, np.float32))
    _write(path, value="2.5")  # the same lines, another body
    importlib.reload(mod)
    mod.fill(x)
    np.testing.assert_array_equal(x, np.full(3, 2.5, np.float32))


def test_equal_code_objects_in_two_files_keep_their_own_sources(qd_program, modules) -> None:
    """`v: qd.i32 = 1.5` and `v: qd.f32 = 1.5` compile to equal code objects (Python drops local annotations, and
    code equality ignores the file), but qd reads the annotation: each kernel must be built from its own file."""
    tmp, names = modules
    _write(tmp / "qd_src_int.py", ann="qd.i32")
    _write(tmp / "qd_src_float.py", ann="qd.f32")
    names += ["qd_src_int", "qd_src_float"]
    a, b = _import(tmp / "qd_src_int.py", "qd_src_int"), _import(tmp / "qd_src_float.py", "qd_src_float")
    assert a.fill.fn.__code__ == b.fill.fn.__code__  # what made them share one source
    x = np.zeros(2, np.float32)
    a.fill(x)
    np.testing.assert_array_equal(x, np.full(2, 1.0, np.float32))  # 1.5 stored into an i32 local
    b.fill(x)
    np.testing.assert_array_equal(x, np.full(2, 1.5, np.float32))


def test_a_file_edited_without_a_reload_is_refused_where_its_lines_moved(qd_program, modules) -> None:
    tmp, names = modules
    path = tmp / "qd_src_moved.py"
    _write(path)
    names.append("qd_src_moved")
    mod = importlib.import_module("qd_src_moved")
    x = np.zeros(2, np.float32)
    mod.fill(x)  # compiled before the edit: keeps its source
    _write(path, pre="\n\n\n")  # three lines inserted above both kernels, the module not reloaded
    with pytest.raises(QuadrantsCompilationError, match="importlib.reload") as info:
        mod.other(x)
    assert f"{path}:{mod.other.fn.__code__.co_firstlineno}:" in str(info.value)
    mod.fill(x)
    np.testing.assert_array_equal(x, np.full(2, 1.5, np.float32))
    importlib.reload(mod)
    mod.other(x)
    np.testing.assert_array_equal(x, np.full(2, -1.0, np.float32))


def test_notebook_cells_registered_in_linecache(qd_program) -> None:
    """IPython keeps each cell's text in linecache under a name with no file behind it (mtime None, which
    `checkcache` keeps); a cell run again is a new name and new code objects."""
    results = []
    for n, value in enumerate(("3.0", "4.0")):
        name = f"<ipython-input-{n}-qdtest>"
        text = _MODULE.format(pre="", ann="qd.f32", value=value)
        linecache.cache[name] = (len(text), None, text.splitlines(True), name)
        scope: dict = {}
        exec(compile(text, name, "exec"), scope)  # noqa: S102 - the test's own cell
        x = np.zeros(2, np.float32)
        scope["fill"](x)
        results.append(x[0])
        linecache.cache.pop(name, None)
    assert results == [3.0, 4.0]


def test_closures_of_one_def_share_one_parsed_source(qd_program) -> None:
    def make(c: float):
        @qd.kernel
        def add(x: qd.types.ndarray(qd.f32, 1)):
            for i in range(x.shape[0]):
                x[i] += c

        return add

    k1, k2 = make(1.0), make(10.0)
    x = np.zeros(2, np.float32)
    k1(x)
    k2(x)
    np.testing.assert_array_equal(x, np.full(2, 11.0, np.float32))
    assert source_of(k1.fn) is source_of(k2.fn)
