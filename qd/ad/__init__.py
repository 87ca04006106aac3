"""`qd.ad`: automatic differentiation (DESIGN §5). Per-op partials live in `rules.py`; `forward.py` is
the forward-mode pass; `reverse.py` the reverse-mode pass
(`kernel.grad`); `tape.py` the host-side managers (`FwdMode`, `clear_all_gradients`); `custom.py`
the reverse-mode `Tape` and the custom-gradient decorators (`grad_replaced`, `grad_for`, `no_grad`)."""

from qd.ad.custom import Tape, grad_for, grad_replaced, no_grad
from qd.ad.tape import FwdMode, clear_all_gradients

__all__ = ["FwdMode", "Tape", "clear_all_gradients", "grad_for", "grad_replaced", "no_grad"]
