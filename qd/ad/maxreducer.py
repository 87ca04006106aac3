"""The max-reducer's recognizer: which `MaxOverRange` nodes of a stack's size run in parallel (DESIGN §5).

A serial walk of `MaxOverRange(i, 0, a.shape[0], a[i])` over millions of elements would make the sizer
the bottleneck (and past `GUARD` iterations it refuses). The recognizer finds, in a serialised size
(`qd/ad/sizing.py`: 5 words per node, post-order, root last), the nodes the parallel evaluator
(`qd/_sizer.pyx: eval_max_parallel`) can take:

- a `MaxOverRange` whose `begin` and `end` are *closed*: constants, scalar arguments, shapes,
  integer reads at constant indices and `+ - * max min` of those (a `MaxOverRange` inside them is
  closed once an earlier round has replaced it by its value);
- whose body is in the grammar: constants, arguments, shapes, integer field/ndarray reads (any
  integer width, 64-bit included) indexed by expressions of constants and variables of the chain,
  `+ - * max min // %` (Quadrants' grammar, plus 64-bit leaves, min and the `//`/`%` that
  `qd.ndrange` and struct-for indices use), and nested `MaxOverRange`s over other variables with
  closed bounds (a multi-axis spec: the evaluator flattens the chain into one parallel range). A
  nested `MaxOverRange` whose bounds follow an outer variable (a triangular shape) is outside.
  Gates (`if` conditions over such reads, int or float, compared with each other or constants) are
  in the grammar too.

Each spec is extracted as a standalone serialised expression (root last). The caller evaluates the
specs of a round in parallel, substitutes each result for its node (`substitute`: the node becomes a
`Const`; its subtree is then unreferenced) and recognizes again: a spec whose bounds contained
another spec is found in a later round, and so is a spec whose body holds a range that is a spec alone
(evaluated first: once, not once per index). What is left is walked serially, within one `GUARD` of
iterations for the whole walk; a spec's flattened axes have no limit, the ranges nested in its body are
bounded by `NESTED_GUARD` (`qd/_sizer.pyx`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qd.base.abi import (K_ADD, K_ARG, K_CMP, K_CONST, K_DIV, K_FCMP, K_FCONST, K_FLOAD, K_GATE, K_INDEX, K_LOAD,
                         K_MAX, K_MIN, K_MOD, K_MOR, K_MUL, K_SHAPE, K_SUB, K_VAR, SIZE_WORDS)

_ARITH = (K_ADD, K_SUB, K_MUL, K_MAX, K_MIN, K_DIV, K_MOD)
_LEAVES = (K_CONST, K_ARG, K_SHAPE, K_FCONST)
# operand positions (0-based, after the kind word) that are node numbers, per kind
_REFS = {K_LOAD: (1,), K_FLOAD: (1,), K_INDEX: (2, 3), K_MOR: (1, 2, 3), K_GATE: (0, 1), K_CMP: (1, 2),
         K_FCMP: (1, 2), **{k: (0, 1) for k in _ARITH}}


@dataclass(frozen=True)
class Spec:
    """A recognized `MaxOverRange`: node `node` of its stack's code, as standalone code (root last)."""

    node: int
    code: tuple[int, ...]
    buffers: frozenset  # buffers its evaluation reads (for cache invalidation)
    args: frozenset  # scalar arguments it reads


class _Code:
    def __init__(self, words: Sequence[int]) -> None:
        self.w = words

    def kind(self, n: int) -> int:
        return self.w[n * SIZE_WORDS]

    def op(self, n: int, k: int) -> int:
        return self.w[n * SIZE_WORDS + 1 + k]

    def refs(self, n: int) -> list[int]:
        return [self.op(n, j) for j in _REFS.get(self.kind(n), ()) if self.op(n, j) >= 0]

    def closed(self, n: int) -> bool:
        """No bound variable and no unevaluated MaxOverRange below node `n`."""
        k = self.kind(n)
        if k in _LEAVES:
            return True
        if k in (K_VAR, K_MOR) or k not in _REFS:
            return False
        return all(self.closed(m) for m in self.refs(n))

    def body_ok(self, n: int, chain: frozenset) -> bool:
        k = self.kind(n)
        if k in _LEAVES:
            return True
        if k == K_VAR:
            return self.op(n, 0) in chain
        if k == K_MOR:
            return self.mor_ok(n, chain)
        if k not in _REFS:
            return False
        return all(self.body_ok(m, chain) for m in self.refs(n))

    def mor_ok(self, n: int, chain: frozenset = frozenset()) -> bool:
        var = self.op(n, 0)
        if var in chain or not (self.closed(self.op(n, 1)) and self.closed(self.op(n, 2))):
            return False
        return self.body_ok(self.op(n, 3), chain | {var})

    def subtree(self, n: int, seen: dict) -> int:
        """Copies node `n` and its operands into the extraction (`seen`: old -> new number)."""
        if n in seen:
            return seen[n]
        k = self.kind(n)
        ops = [self.op(n, j) for j in range(4)]
        for j in _REFS.get(k, ()):
            if ops[j] >= 0:
                ops[j] = self.subtree(ops[j], seen)
        out = self.out
        out += [k] + ops
        seen[n] = len(out) // SIZE_WORDS - 1
        return seen[n]

    def extract(self, n: int) -> tuple[int, ...]:
        self.out: list[int] = []
        self.subtree(n, {})
        return tuple(self.out)


def recognize(code: Sequence[int]) -> list[Spec]:
    """The outermost recognized `MaxOverRange` nodes reachable from the root of `code` (a node inside a
    recognized spec is part of it), in node order. A spec whose body (below its chain of axes) holds a
    recognizable range of its own, one that follows none of the spec's variables, waits for a later round:
    that range is evaluated first, once, instead of once per index of the spec."""
    c = _Code(code)
    n_nodes = len(code) // SIZE_WORDS
    reachable = _nodes_below(c, n_nodes - 1) if n_nodes else set()
    inside: set[int] = set()
    specs: list[Spec] = []
    for n in range(n_nodes - 1, -1, -1):  # from the root down: outer nodes first
        if n in inside or n not in reachable or c.kind(n) != K_MOR or not c.mor_ok(n) or _hoistable(c, n):
            continue
        sub = c.extract(n)
        inside |= _nodes_below(c, n)
        specs.append(Spec(n, sub, frozenset(_reads(sub, (K_LOAD, K_FLOAD, K_SHAPE))), frozenset(_reads(sub, (K_ARG,)))))
    return sorted(specs, key=lambda s: s.node)


def _hoistable(c: _Code, n: int) -> bool:
    """Whether the body of spec `n`, below its chain of nested ranges, holds a range recognizable alone."""
    while c.kind(n) == K_MOR:
        n = c.op(n, 3)
    return any(c.kind(m) == K_MOR and c.mor_ok(m) for m in _nodes_below(c, n))


def _nodes_below(c: _Code, n: int) -> set[int]:
    out = {n}
    for m in c.refs(n):
        out |= _nodes_below(c, m)
    return out


def _reads(code: Sequence[int], kinds: tuple) -> set[int]:
    return {code[n * SIZE_WORDS + 1] for n in range(len(code) // SIZE_WORDS) if code[n * SIZE_WORDS] in kinds}


def substitute(code: list[int], node: int, value: int) -> None:
    """Node `node` of `code` becomes `Const(value)` (in place)."""
    code[node * SIZE_WORDS: (node + 1) * SIZE_WORDS] = [K_CONST, int(value), 0, 0, 0]


__all__ = ["Spec", "recognize", "substitute"]
