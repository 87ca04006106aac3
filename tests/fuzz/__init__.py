"""A differential fuzzer (Csmith-style, time-bounded): random kernels run on `qd.interp`, on `qd.cpu` and on a
serial pure-Python/numpy reference, compared output by output; a mismatch is shrunk to a small kernel.

`generator.py` builds the programs, `reference.py` states (in its docstring) and implements the reference's
semantics, `runner.py` runs, compares and shrinks. `python -m tests.fuzz --seconds 600 --seed N` fuzzes for
a while; `tests/test_fuzz_differential.py` runs a fixed set of seeds in CI.
"""
