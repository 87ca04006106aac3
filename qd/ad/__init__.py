"""`qd.ad`: automatic differentiation (DESIGN §5), the compile side: per-op partials in `rules.py`, the
forward-mode pass `forward.py`, the reverse-mode pass `reverse.py` (`kernel.grad`), the adstack and its sizes.

Quadrants' public names of `qd.ad` (`Tape`, `FwdMode`, `clear_all_gradients`, `grad_replaced`, `grad_for`,
`no_grad`) drive launches, so they live beside the runtime (`qd/runtime/ad_tape.py`, `ad_custom.py`); the API
face `qd/__init__.py` sets them on this package (`qd.ad.Tape`, `from qd.ad import Tape` after `import qd`)."""

__all__ = ["FwdMode", "Tape", "clear_all_gradients", "grad_for", "grad_replaced", "no_grad"]
