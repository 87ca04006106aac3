"""Reverse mode on the host: `qd.ad.Tape` and the custom-gradient decorators.

`with qd.ad.Tape(loss):` records every primal kernel launch its thread makes in its block (`Kernel._run` reads
the thread's `qd.runtime.ad_tape.state().tape` at every launch) as `(kernel, args)` in `tape.calls`; on exit it
seeds `loss.grad` with 1 and runs each recorded call's `.grad(*args)` in reverse order.
`qd.ad.grad_replaced` wraps a Python function that launches kernels: inside a tape it is recorded as one
call (its own launches are not) whose backward is the function registered with `qd.ad.grad_for`.
`qd.ad.no_grad` does the same with a backward that does nothing. `grad_check=[fields]` compares the
gradients of those fields with central finite differences after the backward pass.

`validation=True` warns when debug is off; with `qd.init(debug=True)` the primal launches recorded by
the tape run their validation instance (`Kernel._run`, `qd/ad/validation.py`), which raises
`QuadrantsAssertionError` when a launch writes a field element (of a field with a grad) it has read.
As in Quadrants, a validating tape marks each recorded function `autodiff_mode = AutodiffMode.VALIDATION`
(the previous modes are kept in `tape.modes` and restored on exit), and the backward pass runs on exit
even when the block raised (the block's exception then propagates, chained to any the backward raises).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import numpy as np

from qd.runtime import ad_tape as _t
from qd.runtime.ad_snapshots import Snapshots
from qd.runtime.fields import Field, all_fields
from qd.runtime.ndarray import Ndarray
from qd.types.enums import AutodiffMode, SNodeGradType

_NO_ADJOINT_FIELD = ("Gradients of loss are not allocated, please use qd.field(..., needs_grad=True)"
                     " for all fields that are required by autodiff.")
_NO_ADJOINT_NDARRAY = ("Gradients of loss are not allocated, please set needs_grad=True for all ndarrays "
                       "that are required by autodiff.")
_VALIDATION_NO_DEBUG = ("Debug mode is disabled, autodiff valid check will not work. Please specify "
                        "`qd.init(debug=True)` to enable the check.")


def _debug_on() -> bool:
    from qd.base import config as _config

    try:
        return bool(_config.current().debug)
    except Exception:  # pragma: no cover - no program yet
        return False


class _GradChecker:
    """Central finite differences of the recorded primal calls, in directions of random tangents."""

    EPS = 2.0 ** np.arange(-3, -30, -2).astype(np.float64)

    def __init__(self, loss: Any, to_check: list) -> None:
        self.loss = loss
        self.to_check = to_check
        self.result: list[bool | None] = [None] * len(to_check)

    def snapshot(self) -> None:
        self.fields = [f for f in all_fields() if f._role is SNodeGradType.PRIMAL and f._placed]
        self.backups = [f.to_numpy().copy() for f in self.fields]

    def _restore(self) -> None:
        for f, b in zip(self.fields, self.backups):
            f.from_numpy(b)

    def _loss_after(self, x: Any, value: np.ndarray, calls: list, kwargs: list) -> float:
        self._restore()
        x.from_numpy(value)
        for (fn, args), kw in zip(calls, kwargs):
            fn(*args, **kw)
        return float(np.asarray(self.loss.to_numpy(), dtype=np.float64).reshape(-1)[0])

    def check(self, calls: list, kwargs: list) -> None:
        assert self.loss.dtype.np_dtype == np.float64, "Only f64 is supported when checking grad."
        rng = np.random.default_rng(0)
        for i, x in enumerate(self.to_check):
            if x is self.loss:
                self.result[i] = True
                continue
            base = self.backups[[j for j, f in enumerate(self.fields) if f is x][0]] \
                if any(f is x for f in self.fields) else x.to_numpy().copy()
            g = np.asarray(x.grad.to_numpy(), dtype=np.float64)
            rel_errors = []
            ok = False
            for eps in self.EPS:
                tangent = rng.random(base.shape)
                pos = self._loss_after(x, (base + eps * tangent).astype(base.dtype), calls, kwargs)
                neg = self._loss_after(x, (base - eps * tangent).astype(base.dtype), calls, kwargs)
                numerical = (pos - neg) * 0.5 / eps
                autodiff = float(np.sum(g * tangent))
                err = abs(autodiff - numerical)
                rel_errors.append(err / (abs(autodiff) + (1e-20 if numerical == 0 else 0.0))
                                  if autodiff != 0 or numerical == 0 else float("inf"))
                if err * 100 <= abs(autodiff):
                    ok = True
                    break
            self.result[i] = ok
            if ok:
                print("variable", i, "passes grad check")
            else:
                print("variable", i, "has relative error", min(rel_errors), ", expected relative error 0.01")
        # Leave the fields as the primal pass left them.
        self._restore()
        for (fn, args), kw in zip(calls, kwargs):
            fn(*args, **kw)
        assert all(self.result), "Grad check failed: Not all variables pass grad check"


class Tape:
    """Reverse-mode autodiff of the kernels launched in a `with` block: `with qd.ad.Tape(loss=loss): ...`.

    The Tape records the kernel launches of its block (and the calls of `qd.ad.grad_replaced` /
    `qd.ad.no_grad` functions) in `calls`. When the block ends and `loss` was given, it sets `loss.grad`
    to 1 and runs the recorded launches' gradients in reverse order, so every field, ndarray or tensor
    with `needs_grad=True` that they read ends up holding d loss / d itself in its `.grad`.

    Arguments:

    loss
        A 0-D field with `needs_grad=True` (or a one-element ndarray or torch tensor). Without it the
        Tape only records; nothing runs at the end.
    clear_gradients
        `True` (the default): every gradient field is set to zero on entry (`qd.ad.clear_all_gradients`),
        and `loss`'s gradient in any case.
    validation
        `True`: check that the kernels follow the rules reverse mode needs (warns unless
        `qd.init(debug=True)`).
    grad_check
        A list of fields: after the reverse pass, compare their gradients with central finite differences
        of the recorded calls, and fail if they disagree.

    Errors: a read the gradient would replay with a value overwritten since (by a later kernel of the
    Tape, or from the host inside the Tape) raises `qd.QuadrantsCompilationError` naming the lines (see the
    autodiff page); a `loss` that is not a scalar, or has no gradient, raises `RuntimeError`.
    """

    def __init__(self, loss: Any = None, clear_gradients: bool = True, validation: bool = False,
                 grad_check: list | None = None) -> None:
        self.calls: list[tuple[Callable, tuple]] = []
        self.modes: list[AutodiffMode] = []
        self._kwargs: list[dict] = []
        self.launches: list = []  # `qd.ad.stale_reads.Launch` of every recorded kernel launch, in order
        self.snapshots = Snapshots()  # the copies its reverse pass puts back (`qd.runtime.ad_snapshots`)
        self.entered = False
        self.skipped: list = []  # gradients another thread had claimed on entry (`own`)
        self.gradient_evaluated = False
        self.clear_gradients = clear_gradients
        self.validation = validation
        if validation and not _debug_on():
            warnings.warn(_VALIDATION_NO_DEBUG, Warning)
        self.eval_on_exit = loss is not None
        self.loss = loss
        self.grad_checker: _GradChecker | None = None
        if grad_check:
            assert isinstance(grad_check, list), \
                "grad_check should be a list of fields that need to check gradients."
            self.grad_checker = _GradChecker(loss, grad_check)

    def __enter__(self) -> "Tape":
        assert not self.entered, "Tape can be entered only once."
        self.entered = True
        loss = self.loss
        if isinstance(loss, Field):
            if len(loss.shape) != 0:
                raise RuntimeError("The loss of `Tape` must be a 0-D field, i.e. scalar")
            if not loss.has_grad():
                raise RuntimeError(_NO_ADJOINT_FIELD)
            _t.claim([loss.grad])
            if self.clear_gradients:
                self.skipped = _t.clear_unclaimed_gradients(SNodeGradType.ADJOINT)
            loss.fill(0.0)
        elif isinstance(loss, Ndarray):
            if loss._get_nelement() != 1:
                raise RuntimeError("The loss of `Tape` must be an ndarray with only one element")
            if loss.grad is None:
                raise RuntimeError(_NO_ADJOINT_NDARRAY)
            if self.clear_gradients:
                self.skipped = _t.clear_unclaimed_gradients(SNodeGradType.ADJOINT)
            loss.fill(0.0)
        elif loss is not None:
            if not hasattr(loss, "numel"):
                raise RuntimeError("The loss of `Tape` must be a qd.field, a qd.ndarray or a torch tensor")
            import torch  # pylint: disable=C0415

            if loss.numel() != 1:
                raise RuntimeError("The loss of `Tape` must be a tensor only contains one element")
            if not loss.requires_grad:
                raise RuntimeError("Gradients of loss are not allocated, please set requires_grad=True for all "
                                   "tensors that are required by autodiff.")
            with torch.no_grad():
                loss.fill_(0.0)
        elif self.clear_gradients:
            self.skipped = _t.clear_unclaimed_gradients(SNodeGradType.ADJOINT)
        if self.grad_checker is not None:
            self.grad_checker.snapshot()
        _t.state().tape = self
        _t.activate(self)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Quadrants evaluates the gradients on exit whether or not the block raised; where they fail too, the
        # block's own exception is the one that propagates.
        state = _t.state()
        if state.tape is self:
            state.tape = None
        _t.deactivate(self)
        try:
            if self.eval_on_exit:
                try:
                    self.grad()
                except Exception:
                    if exc_type is None:
                        raise
        finally:
            # Newest first, so a function recorded several times gets back its mode from before the tape.
            for (func, _), mode in zip(reversed(self.calls), reversed(self.modes)):
                _set_mode(func, mode)

    def insert(self, func: Callable, args: tuple, kwargs: dict | None = None) -> None:
        """Records one primal call (a kernel launch, or a `grad_replaced` / `no_grad` function); a
        validating tape marks it `AutodiffMode.VALIDATION` until the tape exits."""
        mode = getattr(func, "autodiff_mode", AutodiffMode.NONE)
        assert mode in (AutodiffMode.NONE, AutodiffMode.VALIDATION), "Inserted funcs should be forward kernels."
        self.modes.append(mode)
        if self.validation:
            _set_mode(func, AutodiffMode.VALIDATION)
        self.calls.append((func, args))
        self._kwargs.append(kwargs or {})

    def launching(self, launch: Any) -> None:
        """Before a kernel launch in the block (recorded, or inside a `grad_replaced` function): saves what it
        overwrites of what earlier launches' gradients read, and what its own gradient reads as it was before it
        (`qd.runtime.ad_snapshots`). A recorded launch is the last call recorded."""
        if launch.reads or launch.before:
            launch.call = len(self.calls) - 1
        self.snapshots.launching(launch)

    def launched(self, launch: Any) -> None:
        """A recorded kernel's launch: its accesses and the objects behind its buffers (`qd.ad.stale_reads`)."""
        self.launches.append(launch)

    def host_write(self, obj: Any) -> None:
        """Before a host write into `obj` while the block runs (`qd.runtime._hostdata.BEFORE_HOST_WRITE`)."""
        self.snapshots.host_write(obj)

    @property
    def saved(self) -> dict:
        """What the Tape copied to keep its gradients right: {"copies": n, "bytes": b} (`qd.runtime.ad_snapshots`)."""
        return self.snapshots.stats()

    def own(self, bindings: list) -> None:
        """A launch of this thread in the block binds `bindings`: their gradients are this Tape's
        (`qd.runtime.ad_tape.adopt`: cleared now where another thread had claimed them when the Tape was entered)."""
        _t.adopt(self.skipped, [getattr(b, "grad", None) for b in bindings if isinstance(b, Field)])

    # `Kernel._run` calls this name.
    record = insert

    def grad(self) -> None:
        """Seeds `loss.grad` with 1 and runs the recorded calls' gradients in reverse order (once)."""
        assert self.entered, "Before evaluating gradients tape must be entered."
        assert not self.gradient_evaluated, "Gradients of grad can be evaluated only once."
        loss = self.loss
        if isinstance(loss, (Field, Ndarray)):
            loss.grad.fill(1.0)
        elif loss is not None:
            import torch  # pylint: disable=C0415

            if loss.grad is None:
                loss.grad = torch.ones_like(loss)
            else:
                with torch.no_grad():
                    loss.grad.fill_(1.0)
        _check_stale(self.launches)
        state = _t.state()
        snaps = self.snapshots
        try:
            for call in range(len(self.calls) - 1, -1, -1):
                (func, args), kw = self.calls[call], self._kwargs[call]
                g = getattr(func, "grad", None)
                if g is None:
                    if hasattr(func, "grad"):
                        raise RuntimeError(f"`{getattr(func, '__name__', func)}` is decorated by qd.ad.grad_replaced "
                                           "but has no gradient function; register one with qd.ad.grad_for")
                    continue
                # the objects its replay reads as the forward launch saw them (`Kernel._run` checks `before`)
                state.before = snaps.put_back(call)
                try:
                    g(*args, **kw)
                finally:
                    state.before = frozenset()
                snaps.release(call)
        finally:
            snaps.finish()
        self.gradient_evaluated = True
        if self.grad_checker is not None:
            self.grad_checker.check(self.calls, self._kwargs)


def _check_stale(launches: list) -> None:
    """Refuses a Tape whose kernel reads (where its gradient needs the value) what a later kernel of the Tape or the
    host writes: that kernel's gradient would replay the read with the later value (a silently wrong gradient)."""
    from qd.ad.stale_reads import tape_outside_write, tape_stale_reads
    from qd.ad.validation import _where
    from qd.errors import QuadrantsCompilationError

    def reads(reader: Any, read: Any) -> str:
        name = reader.buffer_names[read.buffer] or "a field or ndarray"
        return f"Tape: kernel `{reader.name}` reads `{name}`{_where(read.loc)}"

    outside = tape_outside_write(launches)  # reads its replay gets from a saved copy are not counted
    if outside is not None:
        raise QuadrantsCompilationError(
            f"{reads(*outside)}, and it was written after that launch by something other than this Tape's kernels "
            f"(from the host: from_numpy, fill, an element store; or a kernel the Tape did not record): the "
            f"gradient would replay that read with the new values. Write it before the Tape, or in a kernel")
    # an overwrite of what the Tape could not save (an object without a generation counter: a raw numpy array, a
    # torch tensor)
    # (the Tape saves every overwrite of a tracked object, `ad_snapshots.storage`, before it happens: its reads are
    # served, and only the others are looked at)
    from qd.runtime.ad_snapshots import storage

    hit = next((h for h in tape_stale_reads(launches, skip=lambda owner: storage(owner) is not None)
                if h[1].buffer not in h[0].saved), None)
    if hit is not None:
        reader, read, writer, write = hit
        raise QuadrantsCompilationError(
            f"{reads(reader, read)} and kernel `{writer.name}`, launched after it in this Tape, writes it"
            f"{_where(write.loc)}: `{reader.name}`'s gradient would replay that read with the later value. Keep "
            f"each step's state in its own cells (a time-indexed field, `x[t + 1, i] = f(x[t, i])`) or take the "
            f"gradient before the overwrite")


def _set_mode(func: Callable, mode: AutodiffMode) -> None:
    try:
        func.autodiff_mode = mode
    except AttributeError:  # a callable that takes no attributes
        pass


def _recorded(func: Callable, grad: Callable | None) -> Callable:
    @functools.wraps(func)
    def decorated(*args: Any, **kwargs: Any) -> Any:
        state = _t.state()
        tape = state.tape
        outer = state.grad_replaced
        if tape is not None and not outer:
            tape.insert(decorated, args, kwargs)
        state.grad_replaced = True
        try:
            return func(*args, **kwargs)
        finally:
            state.grad_replaced = outer

    decorated.grad = grad
    decorated.autodiff_mode = AutodiffMode.NONE
    decorated._qd_grad_replaced = True
    return decorated


def grad_replaced(func: Callable) -> Callable:
    """Decorates a Python function that launches kernels: inside `qd.ad.Tape` it is recorded as one call
    whose gradient is the function registered with `qd.ad.grad_for(func)`."""
    return _recorded(func, None)


def grad_for(primal: Callable) -> Callable[[Callable], Callable]:
    """`@qd.ad.grad_for(primal)`: registers the decorated function as the gradient of `primal`, which
    must be decorated by `qd.ad.grad_replaced`."""

    def decorator(func: Callable) -> Callable:
        if not hasattr(primal, "grad"):
            raise RuntimeError(f"Primal function `{getattr(primal, '__name__', primal)}` must be decorated by "
                               "qd.ad.grad_replaced")
        if primal.grad is not None:
            raise RuntimeError(
                "Primal function must be a **python** function instead of a quadrants kernel. Please wrap the "
                "quadrants kernel in a @qd.ad.grad_replaced decorated python function instead.")

        @functools.wraps(func)
        def decorated(*args: Any, **kwargs: Any) -> Any:
            return func(*args, **kwargs)

        primal.grad = decorated
        return decorated

    return decorator


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def no_grad(func: Callable) -> Callable:
    """Decorates a function (or kernel) whose gradient is skipped by `qd.ad.Tape`: it is recorded with
    an empty gradient function and the kernels it launches are not recorded."""
    return _recorded(func, _nothing)


__all__ = ["Tape", "grad_replaced", "grad_for", "no_grad"]
