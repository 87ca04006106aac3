"""qd's layer table and the import graph it is checked against (DESIGN §1; `tests/test_layers.py` runs the check).

Every module of `qd/` (the Python files and the Cython modules `qd/*.pyx`) belongs to one layer; a module imports
only modules of its own layer or of lower ones. Every import counts: module-level, inside functions, under
`if TYPE_CHECKING:`, and the import of a package's `__init__` that importing any module of the package implies.
The API face `qd/__init__.py` is the one exemption as a target (every `import qd.x` runs it first).

`python tools/layers.py` prints the layers, the imports that break the rule, and the largest import cycles.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Low to high. A name is a module or a package (its modules, unless a longer name claims them).
# Backends sit below the frontend: they compile IR, never Python source, and the frontend needs none of them.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("floor", ("qd.errors", "qd._unsupported", "qd._logging", "qd.ops", "qd.types", "qd.base", "qd.extension")),
    ("ir", ("qd.ir", "qd.ir_text", "qd.ir_parse", "qd.ir_pack", "qd.ir_emit", "qd.verify")),
    ("ad", ("qd.ad",)),  # the AD transforms of the IR (the host-side Tape is the runtime's)
    ("passes", ("qd.passes",)),  # the pass pipeline, the AD passes included
    ("codegen", ("qd.codegen",)),  # what every tier's code generator shares
    ("backends", ("qd.bytecode", "qd._interp", "qd._sizer", "qd.jit", "qd.gpu")),
    ("frontend", ("qd.frontend",)),
    ("runtime", ("qd.runtime", "qd._launch")),
    ("api", ("qd.lang", "qd.math", "qd.algorithms", "qd.debug", "qd._tensor", "qd._lib", "qd.profiler", "qd.tools",
             "qd")),
)
# Pairs of a lower layer's packages that stay apart although the order would allow the import.
APART: tuple[tuple[str, str], ...] = (("qd.jit", "qd.ad"), ("qd.gpu", "qd.ad"), ("qd.codegen", "qd.ad"),
                                      ("qd.bytecode", "qd.ad"))
API_FACE = "qd"


def modules() -> dict[str, Path]:
    """Every module of qd by dotted name (a package by its `__init__`)."""
    out: dict[str, Path] = {}
    for p in sorted((ROOT / "qd").rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    for p in sorted((ROOT / "qd").glob("*.pyx")):
        out[f"qd.{p.stem}"] = p
    return out


def layer_of(module: str) -> int:
    """The index in `LAYERS` of the longest name that claims `module` (KeyError: no layer claims it)."""
    best, rank = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for n in names:
            if (module == n or module.startswith(n + ".")) and len(n) > best:
                best, rank = len(n), i
    if rank is None:
        raise KeyError(f"{module} is in no layer of tools/layers.py: add it to LAYERS")
    return rank


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _known(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name if name.startswith("qd") else None


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, mods: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_pkg else 0)]
            base = ".".join(parts + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    for n in names:
        known = _known(n, mods)
        if known is not None:
            yield known


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(qd[\w.]*)\s+c?import\s+([\w, ]+)|c?import\s+(qd[\w.]*))", re.MULTILINE)


def _pyx_imports(text: str, mods: dict[str, Path]) -> Iterator[tuple[str, int]]:
    for m in _PYX_IMPORT.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group(3):
            names = [m.group(3)]
        else:
            names = [f"{m.group(1)}.{n.strip()}" for n in m.group(2).split(",") if n.strip()] or [m.group(1)]
        for n in names:
            known = _known(n, mods)
            if known is not None:
                yield known, line


def imports() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of its first import} (line 0: the implied import of a package face)."""
    mods = modules()
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    for m, path in mods.items():
        text = path.read_text()
        if path.suffix == ".pyx":
            found = list(_pyx_imports(text, mods))
        else:
            is_pkg = path.name == "__init__.py"
            found = [(d, node.lineno) for node in ast.walk(ast.parse(text))
                     if isinstance(node, (ast.Import, ast.ImportFrom)) for d in _imported(node, m, is_pkg, mods)]
        for d, line in found:
            if d != m:
                edges[m].setdefault(d, line)
        parts = m.split(".")
        for i in range(2, len(parts)):  # the faces of the enclosing packages, below the API face
            face = ".".join(parts[:i])
            if face in mods:
                edges[m].setdefault(face, 0)
    return edges


def violations(edges: dict[str, dict[str, int]] | None = None) -> list[str]:
    """Every import of a module of a higher layer (or of a pair kept `APART`), as `file:line: a (layer) imports b
    (layer)`."""
    edges = imports() if edges is None else edges
    mods = modules()
    out = []
    for m, targets in sorted(edges.items()):
        for d, line in sorted(targets.items()):
            apart = any(_within(m, x) and _within(d, y) for x, y in APART)
            if d != API_FACE and (layer_of(d) > layer_of(m) or apart):
                where = f"{mods[m].relative_to(ROOT)}:{line}" if line else f"{mods[m].relative_to(ROOT)} (its package)"
                out.append(f"{where}: {m} ({LAYERS[layer_of(m)][0]}) imports {d} ({LAYERS[layer_of(d)][0]})")
    return out


def cycles(edges: dict[str, dict[str, int]] | None = None) -> list[list[str]]:
    """The import cycles (strongly connected components of more than one module), largest first; imports of the
    API face are left out (every module implies it)."""
    edges = imports() if edges is None else edges
    graph = {m: [d for d in ds if d != API_FACE] for m, ds in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, succ in graph.items():  # Tarjan's algorithm, iterative (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(succ))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found, key=len, reverse=True)


def main() -> int:
    edges = imports()
    for name, names in LAYERS:
        print(f"{name:9} {' '.join(names)}")
    bad = violations(edges)
    print(f"\n{len(edges)} modules, {sum(len(d) for d in edges.values())} imports, {len(bad)} upward")
    for b in bad:
        print("  " + b)
    found = cycles(edges)
    print(f"cycles: {[len(c) for c in found] or 'none'}")
    for c in found:
        layers = sorted({LAYERS[layer_of(m)][0] for m in c})
        print(f"  {len(c)} modules in {', '.join(layers)}: {' '.join(c)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
