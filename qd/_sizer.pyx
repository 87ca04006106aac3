# cython: language_level=3, boundscheck=False, wraparound=False
"""Host-side evaluation for adstack sizing (DESIGN §5).

For now it holds the parallel integer max reduction the max-reducer will build on; the SizeExpr
bytecode evaluator lands with the adstack issue.
"""

from libc.stdint cimport int64_t
from cython.parallel cimport prange


def reduce_max_i64(const int64_t[::1] values, int64_t initial, int nthreads=0) -> int:
    """max(initial, *values), computed nogil over `nthreads` OpenMP threads (0: all cores)."""
    cdef Py_ssize_t i, n = values.shape[0]
    cdef int64_t best = initial
    cdef int nth = nthreads if nthreads > 0 else 1
    if nthreads <= 0:
        import os
        nth = os.cpu_count() or 1
    for i in prange(n, nogil=True, num_threads=nth):
        best = max(best, values[i])
    return best
