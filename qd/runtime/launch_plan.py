"""Arming the compiled launch plans of kernel instances (`qd/_launch.pyx`, DESIGN §7).

After a call has taken the Python path (`Kernel._run`), its tier's `plan` (`qd/runtime/tiers.py`: `arm_host`
for `cpu`, `arm_device` for a GPU arch) returns the plan later calls of the same shape can launch through, or
None. A plan is built once per instance, from what never changes for
it (its parameters, buffers, tasks, returns); `arm` makes it valid for the live config. On `qd.cpu` the
plan runs the native code itself; on a GPU arch it checks the call the same way and hands the launch
arguments to the tier's launcher (`qd/runtime/device_launch.py`). An instance with template guards
(fields reached through `self`) checks them at every call. What a plan cannot do, the Python path keeps
doing: instances with hidden/lifted arguments or `while`-loop counting kernels, `qd.types.struct`/matrix/view
parameters, f16 scalars, torch tensors, non-contiguous arrays, numpy scalar arguments,
reverse mode with ndarray gradients, adstacks on GPU archs, the interpreter tier, forward and validation
modes.

Plans and threads: a plan runs one launch at a time (a call from another thread meanwhile takes the Python
path, which has launch states of its own); it stands aside while any thread compiles a kernel or has a
`qd.ad.Tape` / `FwdMode` open (the Python path then decides per thread); an instance's plan is built once.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from qd import _launch
from qd.base import abi
from qd.base import config as _config
from qd.frontend import args as _args
from qd.frontend import builder as _builder
from qd.frontend import guards as _guards
from qd.runtime import ad_tape as _tape
from qd.runtime import launch as _launch_mod
from qd.runtime import tiers as _tiers
from qd.runtime._hostdata import HostData
from qd.runtime.ndarray import Ndarray
from qd.runtime.status import flush_prints
from qd.types import dtypes
from qd.types import hooks as _hooks
from qd.types.dtypes import DataType, MatrixType

_config.on_change(_launch.bump_epoch)  # plans armed under the old options re-arm


def arm_host(ck: Any, sig: _args.Signature, values: list, bindings: Sequence[Any], guards: tuple = ()) -> Any:
    """The armed plan of instance `ck` on the `cpu` tier (`qd.runtime.launch.NativeTier.plan`) after a call with
    leaf values `values` ran on the Python path, or None: plans run the optimised native code only (quick code is
    replaced soon). `guards`: the instance's template guards (`qd/frontend/guards.py`), checked at every call."""
    tier = ck.tier
    if ck.plan is False or tier is None or tier.native is None or tier.native.quick or tier.failed:
        return None
    plan = _plan_of(ck, sig, values, bindings, guards, None)
    if plan is None:
        return None
    tier.plan = plan
    cfg = _config.current()
    plan.arm(int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, int(cfg.cpu_max_num_threads or 1))
    return plan


def arm_device(ck: Any, sig: _args.Signature, values: list, bindings: Sequence[Any], guards: tuple,
               rt: Any) -> Any:
    """The armed plan of instance `ck` on the device tier of runtime `rt` (`DeviceTier.plan`), or None: it checks
    the call as on the CPU and launches through the tier's C launcher where it has one for this instance under
    this config, else through `device_launch.launch`."""
    if ck.plan is False:
        return None
    plan = _plan_of(ck, sig, values, bindings, guards, rt)
    if plan is None:
        return None
    cfg = _config.current()
    plan.arm(int(cfg.random_seed) & 0xFFFFFFFFFFFFFFFF, int(cfg.cpu_max_num_threads or 1))
    from qd.runtime import device_launch  # (it imports this module)

    # the parameter of each launch argument (a field-backed `qd.Tensor` is a template: it has none)
    params = [i for i, p in enumerate(_resolved(sig, values)) if p.kind != "template"]
    plan.runner = device_launch.runner(rt, ck, bindings, params)
    return plan


def _plan_of(ck: Any, sig: _args.Signature, values: list, bindings: Sequence[Any], guards: tuple, rt: Any) -> Any:
    """The plan of `ck` (on the device of runtime `rt`, or the CPU tier), built once; None where there is none."""
    plan = ck.plan
    if plan is None:
        if not _plain_arrays(sig, values):  # this call's arrays do not show the plan's; a later call's may
            return None
        with _BUILDING:  # one plan per instance, however many threads arm it first
            plan = ck.plan
            if plan is None:
                plan = _build(ck, sig, values, bindings, rt) or False
                if plan is not False and guards:
                    plan.members_unchanged = lambda args: not _guards.stale(guards, args)
                if plan is not False:
                    plan.owner = ck  # (what `_launch.last_launched` answers after its launches)
                ck.plan = plan
    return plan or None


_BUILDING = threading.Lock()


def _build(ck: Any, sig: _args.Signature, values: list, bindings: Sequence[Any], device_rt: Any) -> Any:
    """The plan of an instance (on the device of runtime `device_rt`, or the CPU tier), or None where its
    launches need the Python path."""
    gpu = device_rt is not None
    k = ck.ir
    structs = _struct_spec(sig)
    if k.task_loops and not gpu:  # `qd.graph.do_while` loops: the CPU launch reads their counters between runs of
        return None               # tasks (Python path); on a device `device_launch` does, after the plan's checks
    if ck.counts is not None or structs is False or \
            (ck.adstack is not None and (ck.adstack.counter is not None or gpu)):
        return None
    params = _params(k, sig, values, ck.written)
    buffers = _buffers(k, bindings, ck.written, gpu)
    if params is None or buffers is None:
        return None
    rets = [abi.value_code(dt) for dt in k.rets]
    rt = sig.return_type
    restructure = None if rt is None or isinstance(rt, DataType) else sig.restructure_return
    sc = _launch_mod._Scratch(ck, interp=False, host_prints=not gpu)
    guards = [(vars(_tape), "_any_active", None), (vars(_tiers), "WRAPPED", None),
              (vars(_config), "_current", _config.current())]
    common = (params, buffers)
    if gpu:
        from qd.runtime import device_launch

        run = functools.partial(device_launch.launch, device_rt, ck, list(bindings))
        plan = _launch.Plan(sc.launch, sc, sc.args, sc.status, sc.printlen, sc.rets, *common, [], rets, restructure,
                            None, None, guards, _builder.COMPILING, Ndarray, run)
        return _with_arguments(plan, sig, structs)
    native = ck.tier.native
    tasks = [(t.kind == "serial", t.fn, t.prologue or 0, t.min_parallel) for t in native.tasks]

    launch_params = [i for i, p in enumerate(_resolved(sig, values)) if p.kind != "template"]

    def call(args: tuple) -> tuple[list, list, list]:
        """(launch args, owner and array of every buffer) of a planned call, as the Python path has them."""
        launch_args = [args[i] for i in launch_params]
        owners = _launch_mod._owners(ck, bindings, launch_args)
        return launch_args, owners, [getattr(o, "arr", o) if o is not None else None for o in owners]

    def on_failure(rc: int, args: tuple) -> None:
        launch_args, _, arrays = call(args) if ck.adstack is not None else ([], [], [])
        raise _launch_mod._failure(ck, native.check_args, sc.status, arrays, launch_args)

    def on_prints() -> None:
        flush_prints(k, native.prints, sc.printbuf, int(sc.printlen[0]), int(sc.status[abi.STATUS_DROPPED]))

    plan = _launch.Plan(sc.launch, sc, sc.args, sc.status, sc.printlen, sc.rets, *common, tasks, rets, restructure,
                        on_failure, on_prints, guards, _builder.COMPILING, Ndarray)
    if ck.adstack is not None and not _with_adstack(plan, ck, sc, bindings, launch_params, call):
        return None
    return _with_arguments(plan, sig, structs)


def _with_arguments(plan: Any, sig: _args.Signature, structs: list | None) -> Any:
    """`plan` taking apart the dataclass arguments `structs` describes (`_struct_spec`) and the `qd.Tensor` wrappers
    `Signature.bind` takes off (where the signature may get one: a dataclass or a `qd.Tensor` parameter)."""
    if structs is not None:
        plan.with_structs(structs)
    if structs is not None or any(p.kind == "tensor" for p in sig.params):
        plan.with_wrappers(_hooks.impl.TENSOR_TYPES)
    return plan


def _struct_spec(sig: _args.Signature) -> list | None | bool:
    """What a plan needs to take dataclass arguments apart (`Plan.with_structs`): per parameter as written, None or
    (its dataclass, the member paths of its leaves); None for a flat signature; False where a parameter is a
    `qd.types.struct` (a host `Struct` or dict: the Python path converts it)."""
    if sig.flat:
        return None
    spec: list = []
    for p in sig.user_params:
        if p.kind != "struct":
            spec.append(None)
        elif isinstance(p.ann, type):
            spec.append((p.ann, tuple(tuple(leaf.path) for leaf in p.leaves)))
        else:
            return False
    return spec


def _with_adstack(plan: Any, ck: Any, sc: Any, bindings: Sequence[Any], launch_params: list, call: Any) -> bool:
    """Gives `plan` its adstack heaps (those of its launch state `sc`): `AdStackPlan.bind` through a hook, called
    again only when what the sizes read (buffers' owners and generations, integer scalars) changed."""
    ad = ck.adstack
    param_of = {a: i for a, i in enumerate(launch_params)}  # launch arg -> parameter
    heaps = [ad.meta] + sorted(ad.heap_of.values())

    def hook(args: tuple) -> list:
        launch_args, owners, arrays = call(args)
        cfg = _config.current()
        ad.bind(arrays, owners, launch_args, int(cfg.cpu_max_num_threads or 1), int(cfg.ad_stack_size or 0), sc.heap)
        return [(b, arrays[b]) for b in heaps]

    reads = []
    for b in ad.reads:
        d = ck.ir.buffers[b]
        if d.kind not in ("field", "ndarray"):
            return False
        reads.append((bindings[b], -1) if d.kind == "field" else (None, param_of[d.arg]))
    plan.with_adstack(hook, sc.heap, reads, [param_of[a] for a in ad.scalar_args])
    return True


def _expected_template(v: Any, name: str) -> Any:
    """What a plan compares template argument `v` with: `v`, or a weak reference to it where it keys the instance
    by identity (a `@qd.data_oriented` object made per use): the plan must not keep it alive, since the instance
    goes with it (`Kernel._drop_with`)."""
    if _args.keyed_by_identity(v, name):
        try:
            return weakref.ref(v)
        except TypeError:  # (not weakly referenceable: kept)
            pass
    return v


def _params(k: Any, sig: _args.Signature, values: list, written: frozenset) -> list | None:
    """Per parameter: (kind, slot, code, storage ndim, written, expected) (see `_launch.Plan`)."""
    buffer_of = {d.arg: b for b, d in enumerate(k.buffers) if d.kind == "ndarray"}
    out: list = []
    ai = 0  # the launch argument (ArgDecl) of the parameter
    for p, v in zip(_resolved(sig, values), values):
        if p.kind == "template":
            out.append((abi.P_TEMPLATE, 0, 0, 0, 0, _expected_template(v, p.name)))
        elif p.kind == "scalar":
            code = abi.value_code(dtypes.to_dtype(p.ann))
            if code is None or (code & abi.V_FLOAT and code & abi.V_BITS == 16):
                return None
            out.append((abi.P_SCALAR, ai, code, 0, 0, None))
            ai += 1
        elif p.kind == "ndarray":
            b = buffer_of.get(ai)
            entry = _ndarray_param(p, v, b, written, k.buffers[b].large if b is not None else 0)
            if entry is None:
                return None
            out.append(entry)
            ai += 1
        else:
            return None
    return out


def _resolved(sig: _args.Signature, values: list) -> list:
    """The leaf parameters as this call's values make them: a `qd.Tensor` one is a template for a field and an
    ndarray parameter for an ndarray (`args.resolved_param`; a later call with the other kind misses the plan)."""
    return [_args.resolved_param(p, v) for p, v in zip(sig.params, values)]


def _plain_arrays(sig: _args.Signature, values: list) -> bool:
    """Every ndarray argument of this call is a qd ndarray or a C-contiguous numpy array (what a plan takes)."""
    return all(isinstance(v, Ndarray) or (type(v) is np.ndarray and v.flags.c_contiguous)
               for p, v in zip(_resolved(sig, values), values) if p.kind == "ndarray")


def _ndarray_param(p: Any, v: Any, b: int | None, written: frozenset, large: int) -> tuple | None:
    if b is None:
        return None
    dt, ndim, es, _, _ = _args.ndarray_spec(p, v)
    layout = getattr(v, "_layout", None)
    ann_es = tuple(p.ann.dtype.shape) if isinstance(p.ann.dtype, MatrixType) else ()
    npd = np.dtype(dt.np_dtype)
    numpy_ok = layout is None and ann_es == tuple(es) and dtypes.from_numpy_dtype(npd) is dt
    return (abi.P_NDARRAY, b, npd.num if numpy_ok else -1, ndim + len(es), int(b in written),
            ((dt, tuple(es)), layout, tuple(es), large))


def _buffers(k: Any, bindings: Sequence[Any], written: frozenset, gpu: bool) -> list | None:
    """Per buffer: (kind, owner or array, written) (on a GPU arch: checked, and bound by its launcher)."""
    out: list = []
    for b, d in enumerate(k.buffers):
        if d.kind == "field":
            owner = bindings[b]
            if not isinstance(owner, HostData) or (owner._mirror is not None and not gpu):
                return None
            out.append((abi.B_FIELD, owner, b in written))
        elif d.kind == "ndarray":
            out.append((abi.B_ARG, None, False))
        elif d.kind == "temp":
            out.append((abi.B_TEMP, np.zeros(d.shape, dtype=d.dtype.np_dtype), False))
        elif d.kind.startswith("adstack"):
            out.append((abi.B_ADSTACK, None, False))
        elif d.kind == "shared" and gpu:  # (the GPU launcher binds nothing for a block-shared array)
            continue
        else:
            return None
    return [] if gpu else out
