"""The code-generation floor: what every tier's code generator shares and no tier owns.

`emitter.py` (the statement visitor the LLVM, SPIR-V and OpenCL C generators subclass), `reduce.py` (which
atomics of a range task become per-thread accumulators), `tables.py` (the print and check-argument tables a
launch decodes with), `cache.py` (the on-disk cache of compiled kernels). Rank 3 of
the layer table: imports only the floor, the IR and the compile passes, never a tier (qd.jit, qd.gpu) or the
runtime.
"""
