"""A compact flat form of `KernelIR`s for the fastcache (`qd/frontend/fastcache.py`): `pack` / `unpack`.

Every object of a kernel's IR (statements, blocks, loop variables, source positions, declarations, dtypes, ops)
becomes one record of a table, in an order where a record only refers to earlier ones: a tuple of its class's
index and its fields, each field encoded by the kind its annotation names (`_KIND`): a plain value as itself, an
object as the index of its record (0 is None), a tuple of objects as a tuple of indices. The table is made of
ints, strings, floats and tuples only, so `marshal` writes and reads it fast.

`unpack` rebuilds each object without running its constructor (`cls.__new__` and its `__dict__`, which frozen
dataclasses allow), through a decoder generated per class. Identity is kept where the IR relies on it: a dtype is
the `qd.types.dtypes` singleton of its name, an op the `qd.ops.Op` member of its value, and every use of a
statement or loop variable refers to one object (a loop variable gets a fresh `uid` of this process). A class
whose field has an annotation `_KIND` does not know makes `pack` raise `Unpackable` (the caller stores nothing).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from qd import ir
from qd.ops import Op
from qd.types import dtypes
from qd.types.dtypes import DataType


class Unpackable(Exception):
    """The IR holds something this form cannot write (an unknown field annotation, nesting too deep)."""


RAW, REF, REFS, OPTREFS, MIXED = range(5)
_KIND: dict[str, int] = {
    "str": RAW, "int": RAW, "bool": RAW, "int | float": RAW, "tuple[int, ...]": RAW, "tuple[str, ...]": RAW,
    "SrcLoc | None": REF, "Value": REF, "Alloca": REF, "GlobalPtr": REF, "LoopVar": REF, "LoopVar | None": REF,
    "Value | None": REF, "Block": REF, "KernelIR | None": REF, "DataType": REF, "Op": REF,
    "tuple['SrcLoc', ...]": REFS, "tuple[ArgDecl, ...]": REFS, "tuple[BufferDecl, ...]": REFS,
    "tuple[CheckDecl, ...]": REFS, "tuple[DataType, ...]": REFS, "tuple[StackDecl, ...]": REFS,
    "tuple[Stmt, ...]": REFS, "tuple[Value, ...]": REFS, "tuple[TaskLoop, ...]": REFS,
    "tuple[Task, ...] | None": OPTREFS, "tuple[str | Value, ...]": MIXED,
}
# fields encoded first (a task's prologue defines values its body reads)
_FIRST = {ir.Task: ("prologue",)}
_DTYPE, _OP = 0, 1  # the two tags before the classes'


def _classes() -> list[type]:
    out = [c for c in vars(ir).values() if isinstance(c, type) and dataclasses.is_dataclass(c) and c.__module__ == ir.__name__]
    return sorted(out, key=lambda c: c.__name__)


_CLASSES = _classes()
_TAG = {c: i + 2 for i, c in enumerate(_CLASSES)}


def _schema(cls: type) -> tuple[tuple[str, int], ...] | None:
    """(field name, kind) of every field of `cls`, the `_FIRST` ones first; None where one has no known kind."""
    fs = [(f.name, _KIND.get(f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")))
          for f in dataclasses.fields(cls) if not (cls is ir.LoopVar and f.name == "uid")]
    if any(k is None for _, k in fs):
        return None
    first = _FIRST.get(cls, ())
    return tuple(sorted(fs, key=lambda nk: nk[0] not in first))  # type: ignore[arg-type]


_SCHEMA = {c: _schema(c) for c in _CLASSES}


_SCHEMA_DIGEST: list[str] = []


def schema_digest() -> str:
    """A digest of this form's class tags and field layouts: records made by another layout never match."""
    if not _SCHEMA_DIGEST:
        import hashlib

        text = repr([(c.__name__, _TAG[c], _SCHEMA[c]) for c in _CLASSES])
        _SCHEMA_DIGEST.append(hashlib.sha256(text.encode()).hexdigest())
    return _SCHEMA_DIGEST[0]


def unpackable_classes() -> list[str]:
    """The IR classes this form cannot write (a test keeps it empty)."""
    return [c.__name__ for c, s in _SCHEMA.items() if s is None]


class _Packer:
    def __init__(self) -> None:
        self.records: list[tuple] = [()]  # 0: None
        self.index: dict[int, int] = {}
        self.keep: list[Any] = []  # keys of `index` are ids: their objects stay alive
        self.locs: dict[tuple, int] = {}

    def ref(self, x: Any) -> int:
        if x is None:
            return 0
        i = self.index.get(id(x))
        if i is not None:
            return i
        if isinstance(x, ir.SrcLoc):
            return self._loc(x)
        if isinstance(x, DataType):
            rec: tuple = (_DTYPE, x.name)
        elif isinstance(x, Op):
            rec = (_OP, x.value)
        else:
            schema = _SCHEMA.get(type(x))
            if schema is None:
                raise Unpackable(f"no flat form for {type(x).__name__}")
            rec = (_TAG[type(x)],) + tuple(self._field(getattr(x, n), k) for n, k in schema)
        return self._add(x, rec)

    def _add(self, x: Any, rec: tuple) -> int:
        self.records.append(rec)
        i = len(self.records) - 1
        self.index[id(x)] = i
        self.keep.append(x)
        return i

    def _loc(self, loc: ir.SrcLoc) -> int:
        key = (loc.file, loc.line, loc.col, loc.func, tuple(self.ref(s) for s in loc.stack), loc.var)
        i = self.locs.get(key)
        if i is None:
            i = self.locs[key] = self._add(loc, (_TAG[ir.SrcLoc], *key))
        else:
            self.index[id(loc)] = i
            self.keep.append(loc)
        return i

    def _field(self, v: Any, kind: int) -> Any:
        if kind == RAW:
            return v
        if kind == REF:
            return self.ref(v)
        if kind == REFS or (kind == OPTREFS and v is not None):
            return tuple(self.ref(x) for x in v)
        if kind == OPTREFS:
            return None
        return tuple(x if isinstance(x, str) else self.ref(x) for x in v)  # MIXED


def pack(kernels: list[ir.KernelIR]) -> tuple[list[tuple], list[int]]:
    """(records, the record index of each kernel of `kernels`)."""
    p = _Packer()
    try:
        roots = [p.ref(k) for k in kernels]
    except RecursionError:
        raise Unpackable("the IR nests too deeply") from None
    return p.records, roots


# ------------------------------------------------------------------ reading


def _decoder_source(cls: type, schema: tuple[tuple[str, int], ...]) -> str:
    exprs = []
    for i, (name, kind) in enumerate(schema, start=1):
        if kind == RAW:
            e = f"r[{i}]"
        elif kind == REF:
            e = f"o[r[{i}]]"
        elif kind == REFS:
            e = f"tuple([o[j] for j in r[{i}]])"
        elif kind == OPTREFS:
            e = f"(None if r[{i}] is None else tuple([o[j] for j in r[{i}]]))"
        else:
            e = f"tuple([j if j.__class__ is str else o[j] for j in r[{i}]])"
        exprs.append(f"{name!r}: {e}")
    if cls is ir.LoopVar:
        return "lambda r, o: _LoopVar(o[r[1]], r[2])" if [n for n, _ in schema] == ["dtype", "name"] else ""
    return f"lambda r, o: _make(_C{_TAG[cls]}, {{{', '.join(exprs)}}})"


def _make(cls: type, d: dict) -> Any:
    x = cls.__new__(cls)
    x.__dict__.update(d)
    return x


def _srcloc(r: tuple, o: list) -> ir.SrcLoc:
    return _make(ir.SrcLoc, {"file": r[1], "line": r[2], "col": r[3], "func": r[4],
                             "stack": tuple([o[j] for j in r[5]]), "var": r[6]})


def _decoders() -> list:
    env: dict[str, Any] = {"_make": _make, "_LoopVar": ir.LoopVar}
    env.update({f"_C{t}": c for c, t in _TAG.items()})
    out: list = [lambda r, o: dtypes.by_name(r[1]), lambda r, o: Op(r[1])]
    for c in _CLASSES:
        schema = _SCHEMA[c]
        src = _decoder_source(c, schema) if schema is not None and c is not ir.SrcLoc else ""
        out.append(_srcloc if c is ir.SrcLoc else eval(src, env) if src else None)  # (our own text)
    return out


_DECODERS = _decoders()


def unpack(records: list[tuple], roots: list[int]) -> list[Any]:
    """The objects at `roots` of a table `pack` wrote (ValueError: a table this qd cannot read)."""
    o: list[Any] = [None]
    append = o.append
    decs = _DECODERS
    try:
        for r in records[1:]:
            append(decs[r[0]](r, o))
    except (IndexError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"a flat IR table that does not decode: {e}") from None
    return [o[i] for i in roots]


__all__ = ["Unpackable", "pack", "unpack", "unpackable_classes"]
