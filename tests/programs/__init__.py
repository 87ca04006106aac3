"""Published Taichi / difftaichi programs, ported headless, that run unchanged under `import qd`.

Each module here is one program: its source address and revision in its docstring, `import taichi as ti`
turned into `import qd as ti` (and Taichi names Quadrants renamed), its GUI, file output and command line
removed, and nothing else changed. It does not call `ti.init`: whoever loads it has initialised qd (or
Quadrants) first, on the tier under test, with the program's own `ti.init` options.

`load(name, **params)` executes a fresh copy of program `name` (its fields are declared anew) with some
top-level constants replaced, so that a test can shrink its sizes and step counts: `load("billiards",
steps=64, max_steps=128)` runs the module with `steps = 64` and `max_steps = 128` in place of the
published values, as if the published file had said so (line numbers, and so qd's error messages, still
point into the file). A parameter that names no top-level assignment is an error. Sibling modules the program
imports (`from mass_spring_robot_config import robots`) are loaded fresh with it, since they may hold state.

This package imports neither qd nor Quadrants: `record_quadrants.py` runs the same programs and drivers in
Quadrants' own venv, with `qd` standing for `quadrants`.
"""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# The upstream revisions the ports were taken from (each module's docstring names its file).
DIFFTAICHI_REV = "9f4ee522a0a01e6b1aae1d3551c7fd1f6ed56081"
TAICHI_REV = "ba0e81dce559fb63a5958bf82feb1d00c55c02fe"

_PARAMS = "__program_params__"


def _param(name: str, like: ast.expr) -> ast.expr:
    sub = ast.Subscript(value=ast.Name(id=_PARAMS, ctx=ast.Load()), slice=ast.Constant(value=name), ctx=ast.Load())
    return ast.copy_location(sub, like)


def _replace_constants(tree: ast.Module, names: set[str], path: Path) -> None:
    """Rewrites `NAME = <expr>` at module level into `NAME = __program_params__["NAME"]` for NAME in `names`
    (in `A, B = <expr>, <expr>` too, element by element); raises KeyError naming the parameters that match no
    such assignment."""
    found: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in names:
            node.value = _param(target.id, node.value)
            found.add(target.id)
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and \
                len(target.elts) == len(node.value.elts):
            for k, (t, v) in enumerate(zip(target.elts, node.value.elts)):
                if isinstance(t, ast.Name) and t.id in names:
                    node.value.elts[k] = _param(t.id, v)
                    found.add(t.id)
    missing = names - found
    if missing:
        raise KeyError(f"{path.name} has no top-level assignment to {', '.join(sorted(missing))}")
    ast.fix_missing_locations(tree)


def _sibling_imports(tree: ast.Module) -> list[str]:
    """Names of the modules of this folder that `tree` imports at top level (`import x`, `from x import y`)."""
    out: list[str] = []
    for node in tree.body:
        mods = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        out += [m for m in mods if (HERE / f"{m}.py").is_file()]
    return out


def _exec(name: str, params: dict[str, Any]) -> types.ModuleType:
    path = HERE / f"{name}.py"
    tree = ast.parse(path.read_text(), filename=str(path))
    _replace_constants(tree, set(params), path)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    setattr(module, _PARAMS, dict(params))
    saved: dict[str, types.ModuleType | None] = {}
    try:
        for dep in _sibling_imports(tree):
            saved[dep] = sys.modules.get(dep)
            sys.modules[dep] = _exec(dep, {})
        exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - a program file of this folder
    finally:
        for dep, old in saved.items():
            if old is None:
                sys.modules.pop(dep, None)
            else:
                sys.modules[dep] = old
    return module


def load(name: str, **params: Any) -> types.ModuleType:
    """A fresh copy of program `name` executed with the given top-level constants (see the module docstring).
    qd (or Quadrants) must be initialised already: the program declares its fields when it is loaded."""
    return _exec(name, params)
