"""`qd.ad`: automatic differentiation (DESIGN §5). Per-op partials live in `rules.py`; `forward.py` is
the forward-mode pass; `reverse.py` the reverse-mode pass
(`kernel.grad`); `tape.py` the host-side managers (`FwdMode`, `clear_all_gradients`)."""

from qd.ad.tape import FwdMode, clear_all_gradients

__all__ = ["FwdMode", "clear_all_gradients"]
