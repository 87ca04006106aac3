"""Quadrants' print format for a value and a spec (`print(f"{x:.3f}")` in a kernel): the frontend formats
compile-time values with it, the runtime printed kernel values (`qd/runtime/status.py`)."""

from __future__ import annotations

import re
from typing import Any

_PRINTF = re.compile(r"([-+ #0]*)(\d*)(?:\.(\d*))?(?:hh|h|ll|l|j|z|t|L|q)?([diouxXfFeEgGaA]?)")


def printf_format(v: Any, spec: str, is_float: bool) -> str:
    """Quadrants' print format: a spec is a printf conversion without the `%` (`.10d`, `- #0.233lli`, `.2e`,
    length modifiers ignored); one without a conversion letter (`.1`) means `f` for floats, `d` for ints.
    A spec that is no printf spec is applied with Python's `format`."""
    m = _PRINTF.fullmatch(spec or "")
    if m is None:
        return format(float(v) if spec[-1:] in "eEfFgG%" else v, spec)
    flags, width, prec, conv = m.groups()
    conv = conv or ("f" if is_float else "d")
    if conv in "aA":
        return float(v).hex() if conv == "a" else float(v).hex().upper()
    if conv in "iu":
        conv = "d"
    v = float(v) if conv in "fFeEgG" else int(v)
    return f"%{flags}{width}{'' if prec is None else '.' + prec}{conv}" % v
