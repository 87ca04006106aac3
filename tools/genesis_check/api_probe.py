"""Which `quadrants` names that Genesis uses resolve in the `quadrants` this venv imports (Quadrants, or qd via the shim).

    python api_probe.py [--genesis DIR] [--all]

Reads Genesis' source without running it (Python's ast): every `import quadrants ...` / `from quadrants... import
...` binds names, and every attribute chain rooted at such a name (`qd.lang.impl.PyQuadrants.materialize`,
`impl.PyQuadrants`) is a use. Each use is resolved by importing and `getattr`, step by step; what fails is reported
at its first missing link (`quadrants.lang.impl.PyQuadrants`), with the number of uses, of files, and the first
place. Run in the Quadrants venv every name should resolve (a check of the probe itself); run in the qd venv it
lists, in one pass, the API that Genesis would hit one error at a time. Attributes of objects that only exist at
run time (a field's `.to_numpy`) are out of its reach; `--all` also prints the names that resolve.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT_MODULE = "quadrants"
_MISSING = object()


def genesis_dir() -> Path:
    spec = importlib.util.find_spec("genesis")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("api_probe.py: genesis is not installed in this venv (pass --genesis DIR)")
    return Path(next(iter(spec.submodule_search_locations)))


def bindings(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted quadrants path it is bound to, from every import in the file."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for al in node.names:
                if al.name == ROOT_MODULE or al.name.startswith(ROOT_MODULE + "."):
                    if al.asname:
                        out[al.asname] = al.name
                    else:  # `import quadrants.lang.impl` binds `quadrants`
                        out[ROOT_MODULE] = ROOT_MODULE
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module == ROOT_MODULE or node.module.startswith(ROOT_MODULE + ".")):
            for al in node.names:
                if al.name != "*":
                    out[al.asname or al.name] = f"{node.module}.{al.name}"
    return out


def chain(node: ast.AST) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"], or None when the chain is not rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def uses(path: Path) -> list[tuple[str, int]]:
    """(dotted quadrants path, line) for every import and every maximal attribute chain on an imported name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError):
        return []
    bound = bindings(tree)
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(al.name, node.lineno) for al in node.names
                    if al.name == ROOT_MODULE or al.name.startswith(ROOT_MODULE + ".")]
        elif isinstance(node, ast.ImportFrom):
            out += [(target, node.lineno) for target in bindings(node).values()]
    if not bound:
        return out
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            inner.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
            parts = chain(node)
            if parts and parts[0] in bound and len(parts) > 1:
                out.append((".".join([bound[parts[0]], *parts[1:]]), node.lineno))
    return out


def resolve(dotted: str, cache: dict[str, Any]) -> str | None:
    """None when every link resolves, else the dotted prefix that is missing."""
    parts = dotted.split(".")
    obj: Any = _MISSING
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix in cache:
            obj = cache[prefix]
        else:
            nxt: Any = _MISSING
            if obj is not _MISSING:
                try:
                    nxt = getattr(obj, parts[i - 1])
                except Exception:  # noqa: BLE001 - AttributeError, or a lookup that raises: missing here
                    nxt = _MISSING
            if nxt is _MISSING:
                try:
                    nxt = importlib.import_module(prefix)
                except Exception:  # noqa: BLE001 - ImportError, or an error inside the module
                    nxt = _MISSING
            cache[prefix] = obj = nxt
        if obj is _MISSING:
            return prefix
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--genesis", type=Path, help="Genesis' package folder (default: the installed genesis)")
    p.add_argument("--all", action="store_true", help="also list the names that resolve")
    a = p.parse_args(argv)
    gdir = a.genesis or genesis_dir()
    quadrants = importlib.import_module(ROOT_MODULE)
    quadrants.init(arch=quadrants.cpu)  # some names (`qd.root`) exist only once initialised
    print(f"quadrants = {quadrants.__file__}; genesis = {gdir}")
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for f in sorted(gdir.rglob("*.py")):
        for dotted, line in uses(f):
            found[dotted].append((str(f.relative_to(gdir.parent)), line))
    cache: dict[str, Any] = {}
    missing: dict[str, list[tuple[str, int]]] = defaultdict(list)
    ok = 0
    for dotted, where in found.items():
        gap = resolve(dotted, cache)
        if gap is None:
            ok += len(where)
        else:
            missing[gap].extend(where)
    n_uses = sum(len(w) for w in found.values())
    print(f"{len(found)} distinct quadrants paths, {n_uses} uses; {ok} uses resolve, "
          f"{n_uses - ok} do not, through {len(missing)} missing names:")
    rows = sorted(missing.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for gap, where in rows:
        files = {f for f, _ in where}
        first = min(where)
        print(f"  {gap}: {len(where)} uses in {len(files)} files (first {first[0]}:{first[1]})")
    if a.all:
        print("resolved:")
        for dotted in sorted(found):
            if resolve(dotted, cache) is None:
                print(f"  {dotted}: {len(found[dotted])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
