# cython: language_level=3
"""The interpreter's launch state, shared with the compiled launch plans of `qd/_launch.pyx`."""

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t

from qd._abi cimport Ctx  # the native launch context, rendered from qd/base/abi.py

cdef extern from "_interp_support.h" nogil:
    ctypedef union qd_reg:
        int64_t i
        uint64_t u
        double d
        float f
        int32_t i32
        uint32_t u32

# Native (LLVM) task entry points; the ABI of qd/jit/llvm.py.
ctypedef int32_t (*native_serial_t)(Ctx*) noexcept nogil
ctypedef void (*native_prologue_t)(Ctx*, int64_t*) noexcept nogil
ctypedef int32_t (*native_body_t)(Ctx*, int64_t, int64_t) noexcept nogil


cdef class Launch:
    cdef Ctx ctx
    cdef object _keep
    cdef public object status
    cdef public object printbuf
    cdef public object printlen
    cdef public object rets
    cdef uint64_t seed
    cdef uint64_t launch_id
    cdef int nthreads
    cdef int nbuf
    cdef char** bufs
    cdef int64_t* shapes
    # interruption (Ctrl-C): the launching thread, when it is Python's main thread, runs Python's signal
    # handlers between its chunks; one that raises stops the launch (`stop`) and its exception waits in
    # `pending` until the launch path raises it
    cdef int64_t stop
    cdef bint can_poll
    cdef int64_t next_poll
    cdef object pending

    cdef void reset(self, uint64_t seed, uint64_t launch_id, int nthreads) noexcept
    cdef int native_serial(self, uint64_t fn, int task_id) noexcept
    cdef int native_range(self, uint64_t prologue, uint64_t body, int task_id, int64_t min_parallel) noexcept
    cdef int _range(self, const int32_t[::1] prologue, const int32_t[::1] body, uint64_t[::1] template,
                    int var, int begin, int end, int task_id, int64_t wlo, int64_t whi, int64_t min_parallel,
                    int64_t* be)
    cdef int _parallel(self, const int32_t* body, qd_reg* R0, int64_t nregs, int var, int64_t lo,
                       int64_t hi, int64_t min_parallel) noexcept
    cdef int _native_parallel(self, native_body_t f, int64_t lo, int64_t hi, int64_t min_parallel) noexcept
    cdef void _chunks(self, native_body_t f, const int32_t* body, qd_reg* R, int var, Ctx* ctx, int64_t* cursor,
                      int64_t hi, int64_t c, int64_t cmax, int nth, bint poller) noexcept nogil
    cdef void _poll(self) noexcept nogil
    cdef int _outcome(self) noexcept
