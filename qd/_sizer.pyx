# cython: language_level=3, boundscheck=False, wraparound=False
"""Host-side evaluation for adstack sizing (DESIGN §5).

For now it holds the parallel integer max reduction the max-reducer will build on; the SizeExpr
bytecode evaluator lands with the adstack issue.
"""

import os

from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from cython.parallel cimport parallel, prange, threadid


def reduce_max_i64(const int64_t[::1] values, int64_t initial, int nthreads=0) -> int:
    """max(initial, *values), computed nogil over `nthreads` OpenMP threads (0: all cores).

    Each thread reduces its own slice into its own slot; the slots are combined at the end."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int t, nth = nthreads if nthreads > 0 else (os.cpu_count() or 1)
    cdef int64_t best = initial
    cdef int64_t* slots = <int64_t*>malloc(nth * sizeof(int64_t))
    for t in range(nth):
        slots[t] = initial
    with nogil, parallel(num_threads=nth):
        for i in prange(n, schedule="static"):
            if values[i] > slots[threadid()]:
                slots[threadid()] = values[i]
    for t in range(nth):
        if slots[t] > best:
            best = slots[t]
    free(slots)
    return best
