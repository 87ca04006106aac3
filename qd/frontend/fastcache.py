"""The fastcache of `@qd.kernel(fastcache=True)` kernels: a new process loads the instance, skipping frontend and passes.

A kernel marked `fastcache=True` (or `pure=True`) promises that its code reads nothing but its parameters
(`qd/frontend/purity.py` refuses what it can see). So an instance is determined by `key`: the kernel's identity
and the digest of its file, the digest of qd's own sources, the config options the frontend and the passes read,
the mode (primal, forward, reverse, validation) and every parameter: its annotation, and for an ndarray its dtype,
dimensions, element shape, size class and layout, for a template value its value (objects structurally: their
members, recursively; an ndarray reached through one by dtype and shape). A launch whose key cannot be made
(a field reached through a template, a value of a kind this module does not know) takes the normal path.

An entry (`<offline_cache_file_path>/fastcache/<key>.qfc`) holds the instance after the passes in the flat form of
`qd/ir_pack.py`, written with `marshal`, plus what a launch needs beside the IR: the paths from the
template arguments to the objects bound to its buffers, its guards, hidden arguments and written buffers, the IR
digests (so the native code cache finds its code without digesting the IR again: `qd.codegen.cache.ir_digest`),
and the digests of every file whose code the build ran (the kernel's, the funcs', Python helpers'): an entry
whose files changed since is a miss. Entries are written atomically and start with the sha256 of the rest; a
corrupt, stale or unreadable entry is a miss that deletes itself; one removed by another process's cleaning
(`qd/base/cache_dir.py`, which a load marks the entry used for) is a miss. `qd.init(src_ll_cache=False)` (or
`offline_cache=False`) turns the fastcache off.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import marshal
import os
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

from qd import _logging, ir_pack
from qd.base import cache_dir as _cache_dir
from qd.codegen import cache as _cache
from qd.frontend import guards as _guards
from qd.frontend import purity as _purity
from qd.frontend import values as _v
from qd.frontend.arg_leaves import UNCHECKED
from qd.frontend.args import resolved_param
from qd.frontend.instance import KernelInstance
from qd.types import dtypes
from qd.types.dtypes import DataType
from qd.types.hooks import impl as _impl

FORMAT = 2
# config options the frontend, AD and the passes read (`fast_math` too: the entry records the native key's input)
_OPTIONS = ("arch", "default_fp", "default_ip", "debug", "check_out_of_bound", "fast_math", "short_circuit_operators",
            "unrolling_limit", "ad_stack_experimental_enabled", "ad_stack_size")
_MAX_DEPTH = 8
_QD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Observations:
    """What the fastcache did at a kernel's last compile (Quadrants' `src_ll_cache_observations`)."""

    cache_key_generated: bool = False
    cache_validated: bool = False
    cache_loaded: bool = False
    cache_stored: bool = False


class Unsupported(Exception):
    """A parameter value the key cannot describe: the launch takes the normal path."""


def wanted(kernel: Any) -> bool:
    """Whether `kernel` is marked for the fastcache (`fastcache=True`, `pure=True` or `@qd.pure`)."""
    o = kernel.options
    return bool(o.get("fastcache") or o.get("pure") or getattr(kernel.fn, "is_pure", False))


def active(cfg: Any) -> bool:
    return bool(getattr(cfg, "src_ll_cache", True) and cfg.offline_cache)


# ------------------------------------------------------------------ digests

_files: dict[str, tuple[tuple, str]] = {}
_qd: list[str] = []


def file_digest(path: str) -> str | None:
    """sha256 of the file at `path` (kept per process while its mtime and size stay); None: unreadable."""
    try:
        st = os.stat(path)
        stamp = (st.st_mtime_ns, st.st_size)
        hit = _files.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        with open(path, "rb") as f:
            d = hashlib.sha256(f.read()).hexdigest()
    except (OSError, ValueError):
        return None
    _files[path] = (stamp, d)
    return d


def qd_digest() -> str:
    """sha256 of qd's own sources (Python, Cython, C headers): a changed qd never reuses an entry."""
    if not _qd:
        h = hashlib.sha256()
        for root, dirs, names in os.walk(_QD_DIR):
            dirs.sort()
            for n in sorted(names):
                if n.endswith((".py", ".pyx", ".pxd", ".pxi", ".h")):
                    p = os.path.join(root, n)
                    h.update(os.path.relpath(p, _QD_DIR).encode() + b"\0" + (file_digest(p) or "").encode())
        _qd.append(h.hexdigest())
    return _qd[0]


# ------------------------------------------------------------------ the key


def _qualname(x: Any) -> str:
    return f"{getattr(x, '__module__', '?')}.{getattr(x, '__qualname__', getattr(x, '__name__', '?'))}"


def canon(x: Any, depth: int = 0) -> str:
    """A text of annotation or key entry `x` that is the same in every process (Unsupported: no such text)."""
    if depth > _MAX_DEPTH:
        raise Unsupported("an annotation nested too deeply")
    if x is None or isinstance(x, (bool, int, float, str)):
        return f"{type(x).__name__}:{x!r}"
    if x is UNCHECKED:
        return "unchecked"
    if isinstance(x, DataType):
        return f"dt:{x.name}"
    if isinstance(x, enum.Enum):
        return f"enum:{_qualname(type(x))}.{x.name}"
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(canon(e, depth + 1) for e in x) + ")"
    if isinstance(x, dict):
        return "{" + ",".join(f"{canon(k, depth + 1)}:{canon(v, depth + 1)}" for k, v in x.items()) + "}"
    if isinstance(x, (type, types.FunctionType)):
        return f"type:{_qualname(x)}"
    if isinstance(x, np.dtype):
        return f"np:{x.str}"
    if isinstance(getattr(x, "__dict__", None), dict):
        return f"obj:{_qualname(type(x))}" + canon(vars(x), depth + 1)
    raise Unsupported(f"an annotation of type {type(x).__name__}")


def _lifts(v: Any) -> bool:
    return getattr(type(v), "_qd_template_primitives", True) is False


def stable(v: Any, depth: int = 0, lifted: bool = False) -> str:
    """A text of template value `v` equal in two processes only where the instances it makes are the same
    (`lifted`: primitives are runtime arguments of a `template_primitives=False` object: their type only)."""
    if depth > _MAX_DEPTH:
        raise Unsupported("a template value nested too deeply")
    if type(v) in _impl.TENSOR_TYPES:
        v = v._impl
    if isinstance(v, enum.Enum):
        return f"enum:{_qualname(type(v))}.{v.name}={v.value!r}"
    if v is None or isinstance(v, (bool, int, float, str, np.number, np.bool_)):
        return type(v).__name__ if lifted and v is not None and not isinstance(v, str) else f"{type(v).__name__}={v!r}"
    if isinstance(v, DataType):
        return f"dt:{v.name}"
    if isinstance(v, _impl.BufferView):
        return f"view({stable(v.arr, depth + 1)},{v.offset},{v.size})"
    kind = _v.global_kind(v)
    if kind == "field" or getattr(type(v), "_qd_component_view", False):
        raise Unsupported("a qd.field reached through a template argument (fields never take the fastcache)")
    if kind is not None:
        dt, shape, es = _v.describe_object(v)
        return f"nd({dt.name},{tuple(shape)},{tuple(es)},{getattr(v, '_layout', None)})"
    if getattr(v, "_is_qd_func", False) or getattr(v, "_is_qd_kernel", False) or \
            isinstance(v, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        text = _purity.capture_text(v)  # code by where it is, with its closure's values (factories' funcs differ)
        if text is None:
            raise Unsupported(f"a template function {_qualname(v)} whose closure has no stable text")
        return text
    if hasattr(v, "entries") and hasattr(v, "_map"):
        return f"m{tuple(_v.shape_of(v))}(" + ",".join(stable(e, depth + 1) for e in v.entries) + ")"
    if isinstance(v, (tuple, list)):
        return f"{type(v).__name__}(" + ",".join(stable(e, depth + 1, lifted) for e in v) + ")"
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return f"dc:{_qualname(type(v))}(" + ",".join(
            f"{f.name}={stable(getattr(v, f.name), depth + 1, lifted)}" for f in dataclasses.fields(v)) + ")"
    d = getattr(v, "__dict__", None)
    if isinstance(d, dict):
        lifted = lifted or _lifts(v)
        return f"obj:{_qualname(type(v))}(" + ",".join(
            f"{k}={stable(x, depth + 1, lifted)}" for k, x in d.items()) + ")"
    raise Unsupported(f"a template value of type {_qualname(type(v))}")


def _params(sig: Any, values: list, key: tuple) -> list[str]:
    """The key's text of every parameter: name, kind and annotation, with its value's part."""
    out: list[str] = []
    i = 0
    for p, v in zip(sig.params, values):
        p = resolved_param(p, v)
        part = f"{p.name}|{p.kind}|{canon(p.ann)}"
        if p.kind == "template":
            part += "|" + stable(v)
            i += 1
        elif p.kind in ("ndarray", "view"):
            part += "|" + canon(key[i])
            i += 1
            if i < len(key) and key[i] is UNCHECKED:
                part += "|unchecked"
                i += 1
        out.append(part)
    return out


def make_key(kernel: Any, values: list, key: tuple, mode: str, nd_grads: tuple, cfg: Any) -> str | None:
    """The fastcache key of an instance (`key`: `qd.frontend.args.convert`'s instantiation key of the call), or None
    where the launch takes the normal path (an unsupported parameter: logged at warn level; an unreadable file)."""
    fn = kernel.fn
    code = getattr(fn, "__code__", None)
    digest = file_digest(code.co_filename) if code is not None else None
    if digest is None:
        return None
    try:
        params = _params(kernel.signature, values, key)
    except Unsupported as e:
        _logging.warn(f"[FASTCACHE][PARAM_INVALID] kernel {fn.__name__}: {e}; it compiles without the fastcache")
        return None
    closure = []  # the kernel's own closure (two kernels of one `def` in a factory differ by it)
    for cell in fn.__closure__ or ():
        try:
            text = _purity.capture_text(cell.cell_contents)
        except ValueError:  # an empty cell
            text = "empty"
        if text is None:
            _logging.debug(f"[FASTCACHE] kernel {fn.__name__}: a closure variable has no stable text; it compiles "
                           f"without the fastcache")
            return None
        closure.append(text)
    from qd import __version__

    opts = [f"{o}={getattr(cfg, o, None)!s}" for o in _OPTIONS]
    arch = getattr(cfg, "arch", None)
    if getattr(arch, "is_gpu", False):  # `qd.simt.subgroup.group_size()` is the device's, baked into the IR
        opts.append(f"subgroup={arch.subgroup_size()}")
    parts = [str(FORMAT), __version__, qd_digest(), _qualname(fn), code.co_filename, str(code.co_firstlineno), digest,
             canon({k: v for k, v in sorted(kernel.options.items()) if k == "graph"}), mode, repr(nd_grads), *opts,
             *params, *closure]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


# ------------------------------------------------------------------ entries


def directory(cfg: Any) -> str:
    return os.path.join(str(cfg.offline_cache_file_path), "fastcache")


def _path(cfg: Any, key: str) -> str:
    return os.path.join(directory(cfg), key + ".qfc")


def discard(cfg: Any, key: str) -> None:
    try:
        os.unlink(_path(cfg, key))
    except OSError:
        pass


def _binding_paths(inst: KernelInstance, sig: Any, values: list) -> list | None:
    """Per buffer: None (bound at launch, or nothing) or (value index, path) from a template argument to the object
    bound; None for the whole where one is not reached that way (a field, a captured object)."""
    tmpl = [i for i, (p, v) in enumerate(zip(sig.params, values)) if resolved_param(p, v).kind == "template"]
    out: list = []
    for b in inst.bindings:
        if b is None:
            out.append(None)
            continue
        if _v.global_kind(b) != "ndarray":
            return None
        at = next(((i, ()) for i in tmpl if values[i] is b), None) or \
            next(((g.value_index, g.path) for g in inst.guards if g.target is b), None)
        if at is None:
            return None
        out.append(at)
    return out


def store(cfg: Any, key: str, kernel: Any, inst: KernelInstance, values: list, sources: set) -> bool:
    """Writes the entry of `inst` (best effort); False where it has no entry (something it holds cannot be
    rebuilt in another process) or the cache cannot be written."""
    if getattr(sources, "unstable", None):
        _logging.debug(f"[FASTCACHE] kernel {kernel.fn.__name__}: not stored, it reads {sources.unstable} from "
                       f"outside its parameters and the cache could not check it again")
        return False
    paths = _binding_paths(inst, kernel.signature, values)
    counter = inst.counter
    if paths is None or inst.stale is not None or (counter is not None and (counter.counter is not None
                                                                            or counter.bindings)):
        return False
    files = sorted(sources | {kernel.fn.__code__.co_filename})
    digests = [file_digest(f) for f in files]
    if any(d is None for d in digests):
        return False
    irs = [inst.ir] + ([counter.ir] if counter is not None else [])
    try:
        records, roots = ir_pack.pack(irs)
    except ir_pack.Unpackable:
        return False
    if len(irs) == 1 and "_qd_ir_digest" not in inst.ir.__dict__:  # the code cache's digest, from this pack
        _cache.set_ir_digest(inst.ir, _cache.packed_digest(records, roots))
    hidden = tuple((*h[:3], h[3].name, *h[4:]) if h[0] == "lifted" else h for h in inst.hidden)
    counter_meta = None if counter is None else (tuple(sorted(counter.written)), counter.written_args)
    entry = (FORMAT, key, tuple(zip(files, digests)), records, roots, tuple(_cache.ir_digest(k) for k in irs),
             tuple(paths), tuple((g.value_index, g.path) for g in inst.guards), hidden, tuple(sorted(inst.written)),
             inst.written_args, counter_meta, tuple(getattr(sources, "captures", ())))
    try:
        body = marshal.dumps(entry)
    except ValueError:  # a value marshal cannot write (a guard path through an unusual key)
        return False
    try:
        os.makedirs(directory(cfg), exist_ok=True)
        _cache.write_atomic(_path(cfg, key), hashlib.sha256(body).digest() + body)
    except OSError:
        return False
    return True


def _read(cfg: Any, key: str) -> tuple | None:
    try:
        with open(_path(cfg, key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    entry = None
    if len(data) > 32 and hashlib.sha256(data[32:]).digest() == data[:32]:
        try:
            entry = marshal.loads(data[32:])
        except (EOFError, ValueError, TypeError):
            entry = None
    if not isinstance(entry, tuple) or len(entry) != 13 or entry[0] != FORMAT or entry[1] != key:
        discard(cfg, key)
        return None
    _cache_dir.touch(_path(cfg, key))  # a use: recency for the size cap's "lru" cleaning
    return entry


def load(cfg: Any, key: str, values: list, obs: Observations, kernel_fn: Any) -> KernelInstance | None:
    """The instance stored under `key`, or None: no entry, a corrupt one or one whose files changed (both deleted),
    one whose captured globals read other values now (`purity.revalidate`: kept, another process may match it), or
    one whose bound objects are not found in this call's template arguments."""
    entry = _read(cfg, key)
    if entry is None:
        return None
    _, _, files, records, roots, digests, paths, guard_paths, hidden, written, written_args, counter_meta, \
        captures = entry
    if any(file_digest(f) != d for f, d in files):
        discard(cfg, key)
        return None
    if not _purity.revalidate(captures, kernel_fn):
        return None
    obs.cache_validated = True
    try:
        bindings = tuple(None if p is None else _guards.resolve(values[p[0]], p[1]) for p in paths)
        guards = tuple(_guards.Guard(vi, path, _guards.resolve(values[vi], path)) for vi, path in guard_paths)
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    if any(b is not None and _v.global_kind(b) != "ndarray" for b in bindings):
        return None
    try:
        irs = ir_pack.unpack(records, roots)
    except ValueError:
        discard(cfg, key)
        return None
    for k, d in zip(irs, digests):
        _cache.set_ir_digest(k, d)
    counter = None
    if counter_meta is not None:
        counter = KernelInstance(irs[1], irs[1], (), frozenset(counter_meta[0]), counter_meta[1])
    hidden = tuple((*h[:3], dtypes.by_name(h[3]), *h[4:]) if h[0] == "lifted" else h for h in hidden)
    return KernelInstance(irs[0], irs[0], bindings, frozenset(written), written_args, hidden, guards, None, {},
                          counter)


__all__ = ["Observations", "active", "canon", "discard", "file_digest", "load", "make_key", "qd_digest", "stable",
           "store", "wanted"]
