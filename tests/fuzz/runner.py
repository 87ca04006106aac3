"""Run generated programs on the qd tiers and on the serial reference, compare, and shrink mismatches.

`check(program)` returns a `Verdict`: per tier (`interp`, `cpu`), the outputs that differ from the
reference (or the exception the tier raised); `shrink(program, verdict)` drops statements (and replaces
expressions by leaves) while the same tiers keep failing, and `fuzz(...)` is the time-bounded loop.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import os
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import qd

from .generator import (FLOATS, INTS, MAX_DEEP_IFS, NP, E, GenOptions, Program, S, generate, Bin, Un, Cast, Lit, Var,
                        Load, Decl, Assign, Update, Store, If, For, While, Break, _constant)
from .reference import run_reference

# the tiers compared with the reference: `QD_FUZZ_TIERS=interp,cpu,vulkan` (or `--tiers`) adds a GPU tier
TIERS = tuple(t for t in os.environ.get("QD_FUZZ_TIERS", "interp,cpu").split(",") if t)
# `QD_FUZZ_THREADS=4` (or `--threads`) launches every program from that many Python threads at once
THREADS = int(os.environ.get("QD_FUZZ_THREADS", "1"))
_DIR = tempfile.mkdtemp(prefix="qd_fuzz_")
_counter = itertools.count()
_current: str | None = None  # the tier qd is initialised on (one qd.init per tier switch)


def _init(tier: str) -> None:
    global _current
    if _current == tier:
        return
    if _current is not None:
        qd.reset()
    kw: dict[str, Any] = {"jit": "eager"} if tier == "cpu" else {}
    qd.init(arch=getattr(qd, tier), fast_math=False, offline_cache=False, log_level="error", **kw)
    _current = tier


def release() -> None:
    """`qd.reset()` if the runner initialised qd."""
    global _current
    if _current is not None:
        qd.reset()
        _current = None


def _load(src: str) -> Callable:
    """A fresh module holding `kern` (qd reads a kernel's source from its file)."""
    name = f"qd_fuzz_k{os.getpid()}_{next(_counter)}"
    path = os.path.join(_DIR, name + ".py")
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.kern


@dataclass
class Outcome:
    arrays: dict[str, np.ndarray] | None = None
    ret: Any = None
    error: str | None = None
    magnitude: float = 0.0  # the reference's: the largest value a float reduction added (`reference.facc`)


def _launch(kern: Callable, arrays: dict[str, np.ndarray], repeat: int) -> list[Outcome]:
    """`repeat` launches of `kern`, each on fresh copies of `arrays`; stops at the first exception."""
    out = []
    for _ in range(repeat):
        arrs = {k: v.copy() for k, v in arrays.items()}
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                ret = kern(**arrs)
            out.append(Outcome(arrs, ret))
        except Exception as e:  # noqa: BLE001
            msg = "".join(traceback.format_exception_only(type(e), e)).strip()
            out.append(Outcome(error=msg.splitlines()[0] if msg else type(e).__name__))
            break
    return out


def _launch_threaded(kern: Callable, arrays: dict[str, np.ndarray], repeat: int, threads: int) -> list[Outcome]:
    """`_launch` in `threads` Python threads at once (released together; the kernel's first call too, so its
    compile races), every outcome of every thread."""
    start = threading.Barrier(threads)
    results: list[list[Outcome]] = [[] for _ in range(threads)]

    def work(k: int) -> None:
        start.wait()
        results[k] = _launch(kern, arrays, repeat)

    pool = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return [o for r in results for o in r]


def run_tier(tier: str, src: str, arrays: dict[str, np.ndarray], repeat: int = 1,
             threads: int | None = None) -> list[Outcome]:
    """Launch the kernel of `src` `repeat` times on `tier` (fresh copies of `arrays` each time), from
    `threads` Python threads at once when it is above 1."""
    _init(tier)
    try:
        kern = _load(src)
    except Exception as e:  # noqa: BLE001
        return [Outcome(error=f"{type(e).__name__}: {e}")]
    threads = THREADS if threads is None else threads
    if threads > 1:
        return _launch_threaded(kern, arrays, repeat, threads)
    return _launch(kern, arrays, repeat)


# ------------------------------------------------------------------ comparison

# Fuzzy values: one tolerance for f32 and f64 alike (an f64 value may carry an f32 sin's ulp or an f32
# reduction's order), relative to the largest finite magnitude in the array.
RTOL = 1e-3


def _float_diff(want: np.ndarray, got: np.ndarray, fuzzy: np.ndarray, magnitude: float = 0.0,
                signed_zeros: bool = False) -> np.ndarray:
    """Indices where float `got` differs from `want`: exact elements must be equal (NaN == NaN, any NaN; and
    -0 == +0, a min/max reduction may keep either zero, unless `signed_zeros`); fuzzy ones within tolerance
    (relative to the array's largest magnitude, or to `magnitude`, the largest a float reduction added)."""
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    if fuzzy.shape != w.shape:  # a shrunk candidate's arrays may differ in length from the original's mask
        fuzzy = np.full(w.shape, bool(np.any(fuzzy)))
    both_nan = np.isnan(w) & np.isnan(g)
    equal = (w == g) & (np.signbit(w) == np.signbit(g)) if signed_zeros else w == g
    exact_bad = ~(equal | both_nan)
    finite = np.isfinite(w) & (np.abs(w) <= 1e20)
    # `magnitude` is not capped: where a reduction added values above 1e20 another order's rounding (thousands
    # or more) can reach a fuzzy value through `qd.sin`, and no bound on it is tighter (campaign seed 1600162)
    scale = max(1.0, float(np.max(np.abs(w[finite]), initial=0.0)), magnitude)
    rtol = RTOL
    with np.errstate(all="ignore"):
        fuzzy_bad = finite & ~(np.abs(w - g) <= rtol * scale)
    return np.nonzero(np.where(fuzzy, fuzzy_bad, exact_bad))[0]


def compare(program: Program, ref: Outcome, got: Outcome) -> list[str]:
    """The differences between the reference and a tier's outcome, one line each (empty: agreement)."""
    if got.error is not None:
        return [f"raised {got.error}"]
    diffs = []
    signed = program.options.specials
    for name, want in ref.arrays.items():
        have = got.arrays[name]
        if want.dtype.kind == "f":
            bad = _float_diff(want, have, program.fuzzy[name], ref.magnitude, signed)
        else:
            bad = np.nonzero(want != have)[0]
        if len(bad):
            k = bad[:4]
            diffs.append(f"{name}[{k.tolist()}]: want {want[k].tolist()} got {have[k].tolist()}"
                         + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else ""))
    ty = program.ret_ty
    if ty in INTS:
        ok = int(ref.ret) == int(got.ret)
    else:
        w, g = np.array([ref.ret], NP[ty]), np.array([got.ret], NP[ty])
        ok = len(_float_diff(w, g, np.array([program.ret_fuzzy]), ref.magnitude, signed)) == 0
    if not ok:
        diffs.append(f"return: want {ref.ret!r} got {got.ret!r}")
    return diffs


@dataclass
class Verdict:
    program: Program
    ref_error: str | None = None
    diffs: dict[str, list[str]] = field(default_factory=dict)  # tier -> differences (non-empty only)

    @property
    def ok(self) -> bool:
        return self.ref_error is None and not self.diffs

    @property
    def signature(self) -> tuple:
        """What shrinking keeps: which tiers fail, and whether by an exception or by a value."""
        return tuple(sorted((t, d[0].startswith("raised ")) for t, d in self.diffs.items()))

    def report(self) -> str:
        p = self.program
        lines = [f"qd fuzz mismatch: seed {p.seed}, n = {p.n}, options {p.options}"]
        for tier, d in sorted(self.diffs.items()):
            lines += [f"  {tier} vs reference:"] + [f"    {x}" for x in d]
        lines += ["--- kernel ---", p.qd_source().rstrip(), "--- reference ---", p.ref_source().rstrip()]
        return "\n".join(lines)


def check(program: Program, tiers: tuple[str, ...] = TIERS, repeat: int = 1) -> Verdict:
    """Run `program` on the reference and on `tiers`; a tier fails when any of `repeat` launches differs."""
    arrays = program.inputs()
    v = Verdict(program)
    try:
        ref_arrays, ret, magnitude = run_reference(program.ref_source(), arrays)
    except Exception as e:  # noqa: BLE001
        v.ref_error = f"{type(e).__name__}: {e}"
        return v
    ref = Outcome(ref_arrays, ret, magnitude=magnitude)
    src = program.qd_source()
    for tier in tiers:
        for got in run_tier(tier, src, arrays, repeat):
            d = compare(program, ref, got)
            if d:
                v.diffs[tier] = d
                break
    return v


# ------------------------------------------------------------------ shrinking


def _stmt_paths(body: list[S], prefix: tuple = ()) -> list[tuple]:
    """Paths (block indices, statement index) of every statement, outermost first."""
    out = []
    for k, s in enumerate(body):
        out.append(prefix + (k,))
        for b, blk in enumerate(s.blocks()):
            out += _stmt_paths(blk, prefix + (k, b))
    return out


def _block_at(body: list[S], path: tuple) -> list[S]:
    blk = body
    for k in range(0, len(path) - 1, 2):
        blk = blk[path[k]].blocks()[path[k + 1]]
    return blk


def _without(program: Program, path: tuple) -> Program | None:
    p = copy.deepcopy(program)
    blk = _block_at(p.body, path)
    s = blk[path[-1]]
    if type(s).__name__ == "Return" or (isinstance(s, For) and s.parallel and
                                         sum(isinstance(t, For) and t.parallel for t in p.body) == 1):
        return None
    del blk[path[-1]]
    return p


def _simpler(e: E) -> list[E]:
    """Smaller expressions of `e`'s type: its same-typed operands, a literal."""
    out: list[E] = []
    for name in ("l", "r", "e"):
        c = getattr(e, name, None)
        if isinstance(c, E) and c.ty == e.ty and not _constant(c):
            out.append(c)
    if not isinstance(e, Lit):
        out.append(Lit(e.ty, 1 if e.ty in INTS else 1.0))
    return out


def shrink(verdict: Verdict, tiers: tuple[str, ...] = TIERS, repeat: int = 3, budget_s: float = 120.0,
           log: Callable[[str], None] | None = None) -> Verdict:
    """Drop statements one by one, then simplify expressions, while the failing tiers stay the same."""
    want = verdict.signature
    best = verdict
    deadline = time.monotonic() + budget_s
    fail_tiers = tuple(t for t in tiers if t in verdict.diffs)

    def still(p: Program) -> Verdict | None:
        v = check(p, fail_tiers, repeat)
        if v.ref_error is None and v.signature == want:
            return v
        return None

    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for path in reversed(_stmt_paths(best.program.body)):
            if time.monotonic() > deadline:
                break
            if len(path) > 1 and path[:-1] and not _valid_path(best.program.body, path):
                continue
            cand = _without(best.program, path)
            if cand is None:
                continue
            v = still(cand)
            if v is not None:
                best, changed = v, True
                if log:
                    log(f"  shrink: dropped a statement ({len(_stmt_paths(best.program.body))} left)")
        # smaller n
        for n in (1, 2, 4, 8, 16, 64):
            if n < best.program.n and time.monotonic() < deadline:
                cand = copy.deepcopy(best.program)
                cand.n = n
                for k, arr in cand.fuzzy.items():
                    if len(arr) == best.program.n:
                        cand.fuzzy[k] = arr[:n]
                v = still(cand)
                if v is not None:
                    best, changed = v, True
                    break
        # simpler expressions
        k = 0
        while time.monotonic() < deadline:
            slots = _exprs_all(best.program)
            if k >= len(slots):
                break
            owner_path, name = slots[k]
            done = False
            for repl in _simpler(getattr(_resolve(best.program, owner_path), name)):
                cand = copy.deepcopy(best.program)
                setattr(_resolve(cand, owner_path), name, repl)
                v = still(cand)
                if v is not None:
                    best, changed, done = v, True, True
                    break
            if not done:
                k += 1
    # the final check with every tier, to report them all
    final = check(best.program, tiers, repeat)
    return final if final.signature == want else best


def _valid_path(body: list[S], path: tuple) -> bool:
    try:
        _block_at(body, path)[path[-1]]
        return True
    except (IndexError, AttributeError):
        return False


def _exprs_all(program: Program) -> list[tuple[tuple, str]]:
    """Every expression slot of the program as (path from the program to its owner, attribute)."""
    out: list[tuple[tuple, str]] = []

    def walk(node: Any, path: tuple) -> None:
        for name in ("cond", "count", "bound", "e", "l", "r"):
            child = getattr(node, name, None)
            if child is None or isinstance(child, (str, int)):
                continue
            if isinstance(child, E):
                out.append((path, name))
            walk(child, path + (name,))
        if isinstance(node, S):
            for b, blk in enumerate(node.blocks()):
                for k, s in enumerate(blk):
                    walk(s, path + (("blk", b, k),))

    for k, s in enumerate(program.body):
        walk(s, (("top", k),))
    return out


def _resolve(program: Program, path: tuple) -> Any:
    node: Any = program
    for step in path:
        if isinstance(step, tuple):
            if step[0] == "top":
                node = node.body[step[1]]
            else:
                node = node.blocks()[step[1]][step[2]]
        else:
            node = getattr(node, step)
    return node


# ------------------------------------------------------------------ the loop


def fuzz(seconds: float, seed: int, options: GenOptions | None = None, max_cases: int | None = None,
         repeat: int = 1, do_shrink: bool = True, log: Callable[[str], None] = print,
         shrink_budget_s: float = 120.0, tiers: tuple[str, ...] = TIERS) -> tuple[int, list[Verdict]]:
    """Check programs of seeds `seed, seed + 1, ...` for `seconds` (or `max_cases`); returns (count, failures
    shrunk)."""
    end = time.monotonic() + seconds
    failures: list[Verdict] = []
    count = 0
    s = seed
    while time.monotonic() < end and (max_cases is None or count < max_cases):
        program = generate(s, options)
        v = check(program, tiers, repeat=repeat)
        count += 1
        if v.ref_error is not None:
            log(f"seed {s}: the reference raised {v.ref_error} (a generator bug)\n{program.ref_source()}")
            failures.append(v)
        elif not v.ok:
            log(f"seed {s}: mismatch on {', '.join(sorted(v.diffs))}; shrinking ...")
            if do_shrink:
                v = shrink(v, tiers, budget_s=shrink_budget_s)
            log(v.report())
            failures.append(v)
        s += 1
    release()
    return count, failures


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=None, help="stop after this many programs")
    ap.add_argument("--no-shared-mul", action="store_true", help="no *= / atomic_mul on kernel-scope locals")
    ap.add_argument("--no-shared-updates", action="store_true", help="no reductions into kernel-scope locals")
    ap.add_argument("--racy-store", action="store_true", help="also plain stores s = s + e (races)")
    ap.add_argument("--max-n", type=int, default=300)
    ap.add_argument("--specials", action="store_true",
                    help="IEEE specials: inf/nan/+-0 literals and inputs, float / and %%, signed zeros compared")
    ap.add_argument("--deep-ifs", type=int, default=0, metavar="N",
                    help=f"one chain of up to N nested ifs per program (at most {MAX_DEEP_IFS})")
    ap.add_argument("--repeat", type=int, default=1, help="launches per tier (races show up more often)")
    ap.add_argument("--threads", type=int, default=None, help="launch from this many Python threads at once")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--tiers", default=",".join(TIERS), help="comma-separated qd archs (e.g. interp,cpu,vulkan)")
    ap.add_argument("--show", type=int, default=None, help="print the program of this seed and exit")
    a = ap.parse_args(argv)
    if a.threads is not None:
        global THREADS
        THREADS = a.threads
    opt = GenOptions(shared_updates=not a.no_shared_updates, shared_mul=not a.no_shared_mul,
                     racy_store=a.racy_store, max_n=a.max_n, specials=a.specials, deep_ifs=a.deep_ifs)
    if a.show is not None:
        p = generate(a.show, opt)
        print(p.qd_source())
        print(p.ref_source())
        return 0
    t0 = time.monotonic()
    count, failures = fuzz(a.seconds, a.seed, opt, a.cases, a.repeat, not a.no_shrink,
                           log=lambda m: print(m, flush=True), tiers=tuple(a.tiers.split(",")))
    print(f"qd fuzz: {count} programs in {time.monotonic() - t0:.0f} s, seeds {a.seed}..{a.seed + count - 1}, "
          f"{len(failures)} mismatches", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
