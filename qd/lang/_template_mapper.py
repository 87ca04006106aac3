"""`qd.lang._template_mapper`: the path of Quadrants' kernel-argument mapper, kept for what Quadrants code does
with it (qd maps arguments to instantiation keys in `qd/frontend/args.py`).

Genesis writes `qd.lang._template_mapper.__builtins__["__debug__"] = False` outside its debug mode. A module's
`__builtins__` is the builtins namespace of the process, so that write is process-wide; Quadrants reads it on
its launch path as the switch of the checks that a Quadrants ndarray argument matches its annotation (dtype,
element shape, ndim). qd reads it the same way (`arg_checks`): with it off, a `qd.ndarray` argument is taken as
it is and the instance is compiled for its own dtype and shape, as in Quadrants; numpy arrays and torch tensors
are checked always (so are they in Quadrants). Python's own `__debug__` (`python -O`) is a compile-time constant
that this write does not change.
"""

from __future__ import annotations

from qd.frontend.arg_leaves import arg_checks  # noqa: F401  (where qd reads the switch)
