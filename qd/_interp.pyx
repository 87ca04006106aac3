# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""qd's reference interpreter: runs the register bytecode of `qd/bytecode/lower.py`, nogil.

The op semantics live in the opcode table (`qd/bytecode/opcodes.py`), rendered into
`_interp_ops.pxi`; this file holds the dispatch loop, the launch state and the parallel driver.
A range task runs its prologue once, then its body once per iteration, chunked over OpenMP
threads, each thread with a private copy of the register file. Failures (checks) are recorded in
the status buffer; the host turns them into exceptions after the launch.

Chunks are taken from a shared cursor and sized by time: each thread scales its next chunk so that it
runs about `CHUNK_NS` (never more indices than the fixed schedule's chunk), so every thread comes back
to the driver often. Between its chunks the launching thread, when it is Python's main thread, runs
Python's signal handlers (`PyErr_CheckSignals`, the GIL taken for it) every `POLL_NS`: Ctrl-C's
KeyboardInterrupt (or whatever a handler raises) stops the launch within about a chunk, every thread
skips the chunks left, and the launch path raises it (`rc == RC_INTERRUPTED`); the next launch runs
normally. A serial task, and a range too small to go parallel, run in one call, without polling.
"""

from libc.stdint cimport INT64_MIN, INT64_MAX, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, malloc, free
from libc.string cimport memcpy, memset
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS
from cython.parallel cimport prange, parallel, threadid
from cpython.exc cimport PyErr_CheckSignals
from cpython.pythread cimport PyThread_get_thread_ident
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from qd._abi cimport (MAX_CHECK_ARGS, MAX_NDIM, PRINT_HEAD, RAND_F32_SHIFT, RAND_F64_SHIFT, RC_DONE, RC_FAILED,
                      RC_INTERRUPTED, RC_RETURNED, RNG_GOLDEN, RNG_TID_MIX, STATUS_ARGS, STATUS_CHECK, STATUS_DROPPED,
                      STATUS_FLAG, STATUS_NARGS, STATUS_TID, STATUS_WORDS, qd_mix64, qd_rng_key)

import threading

include "_interp_externs.pxi"

cdef extern from "_interp_support.h" nogil:
    int64_t qd_floordiv_i64(int64_t a, int64_t b)
    int64_t qd_mod_i64(int64_t a, int64_t b)
    uint64_t qd_floordiv_u64(uint64_t a, uint64_t b)
    uint64_t qd_mod_u64(uint64_t a, uint64_t b)
    int64_t qd_ipow_i64(int64_t a, int64_t b)
    uint64_t qd_ipow_u64(uint64_t a, uint64_t b)
    float qd_fmodf(float a, float b)
    double qd_fmod(double a, double b)
    int64_t qd_clz32(uint32_t x)
    int64_t qd_clz64(uint64_t x)
    float qd_h2f(uint16_t h)
    uint16_t qd_f2h(float f)
    float qd_round_f16(float f)
    float qd_round_f16_d(double d)
    float qd_bits_to_f16(uint16_t h)
    uint16_t qd_f16_to_bits(float f)
    int64_t __atomic_fetch_add(int64_t* p, int64_t v, int order)
    int64_t __atomic_load_n(int64_t* p, int order)
    void __atomic_store_n(int64_t* p, int64_t v, int order)
    bint __atomic_compare_exchange_n(int64_t* p, int64_t* expected, int64_t desired, bint weak,
                                     int success, int failure)
    int __ATOMIC_SEQ_CST
    int __ATOMIC_RELAXED

# `Ctx` (the launch context native code receives, `qd/_abi.pxd`) and `Launch` are declared in `_interp.pxd`; the
# status buffer's layout, the return codes and the random generator's constants come from the launch ABI.

DEF CHUNK_NS = 20000000  # a chunk's target duration: how soon every thread sees a stop
DEF POLL_NS = 20000000   # how often the launching thread runs Python's signal handlers
cdef unsigned long _MAIN_THREAD = threading.main_thread().ident


cdef inline int64_t _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline void qd_fail(Ctx* ctx, int32_t check_id, const int32_t* regs, int32_t n,
                         qd_reg* R) noexcept nogil:
    cdef int64_t expected = 0
    cdef int k
    if not __atomic_compare_exchange_n(&ctx.status[STATUS_FLAG], &expected, 1, False, __ATOMIC_SEQ_CST,
                                       __ATOMIC_RELAXED):
        return  # an earlier failure is already recorded
    ctx.status[STATUS_CHECK] = check_id
    ctx.status[STATUS_TID] = ctx.tid
    ctx.status[STATUS_NARGS] = n if n < MAX_CHECK_ARGS else MAX_CHECK_ARGS
    for k in range(ctx.status[STATUS_NARGS]):
        ctx.status[STATUS_ARGS + k] = R[regs[k]].i


cdef inline void qd_print(Ctx* ctx, int32_t print_id, const int32_t* regs, int32_t n,
                          qd_reg* R) noexcept nogil:
    cdef int64_t pos = __atomic_fetch_add(ctx.printlen, n + PRINT_HEAD, __ATOMIC_SEQ_CST)
    cdef int k
    if pos + n + PRINT_HEAD > ctx.printcap:
        __atomic_fetch_add(&ctx.status[STATUS_DROPPED], 1, __ATOMIC_SEQ_CST)
        return
    ctx.printbuf[pos] = print_id
    ctx.printbuf[pos + 1] = ctx.tid
    ctx.printbuf[pos + 2] = n
    for k in range(n):
        ctx.printbuf[pos + PRINT_HEAD + k] = R[regs[k]].i


cdef inline uint64_t qd_rand(Ctx* ctx) noexcept nogil:
    if ctx.rng_ctr == 0:
        ctx.rng_key = qd_mix64(ctx.rng_base ^ (<uint64_t>ctx.tid * RNG_TID_MIX))
    ctx.rng_ctr += 1
    return qd_mix64(ctx.rng_key + ctx.rng_ctr * RNG_GOLDEN)


# `run(code, R, ctx)`: the dispatch loop, rendered from the opcode table.
include "_interp_ops.pxi"


cdef class Launch:
    """The state of kernel launches of one instance: buffer addresses and shapes (bound per launch
    through the buffer protocol), operand table, status and print buffers, return slots.

    One object serves consecutive launches (`start` rebinds and resets it): creating it per launch
    cost more than the rest of a small launch."""

    def __init__(self, int nbuf, const int32_t[::1] operands, int64_t[::1] status, int64_t[::1] printbuf,
                 int64_t[::1] printlen, uint64_t[::1] rets, uint64_t[::1] args):
        self._keep = (operands, status, printbuf, printlen, rets, args)
        self.nbuf = nbuf
        self.bufs = <char**>calloc(nbuf + 1, sizeof(char*))
        self.shapes = <int64_t*>calloc((nbuf + 1) * MAX_NDIM, sizeof(int64_t))
        self.ctx.bufs = self.bufs
        self.ctx.shapes = self.shapes
        self.ctx.args = &args[0]
        self.status, self.printbuf, self.printlen, self.rets = status, printbuf, printlen, rets
        self.ctx.operands = &operands[0] if operands.shape[0] else NULL
        self.ctx.status = &status[0]
        self.ctx.printbuf = &printbuf[0]
        self.ctx.printlen = &printlen[0]
        self.ctx.printcap = printbuf.shape[0]
        self.ctx.rets = &rets[0]
        self.ctx.tid = 0
        self.ctx.slot = 0
        self.nthreads = 1

    def __dealloc__(self):
        free(self.bufs)
        free(self.shapes)

    def start(self, list arrays, uint64_t seed, uint64_t launch_id, int nthreads):
        """Binds buffer `b` to `arrays[b]` (C-contiguous; kept alive by the caller during the launch)
        and resets the status buffer and the print counter."""
        cdef Py_buffer view
        cdef int b, k
        if len(arrays) != self.nbuf:
            raise ValueError(f"expected {self.nbuf} buffers, got {len(arrays)}")
        for b in range(self.nbuf):
            PyObject_GetBuffer(arrays[b], &view, PyBUF_C_CONTIGUOUS)
            self.bufs[b] = <char*>view.buf
            for k in range(MAX_NDIM):
                self.shapes[b * MAX_NDIM + k] = view.shape[k] if k < view.ndim else 0
            PyBuffer_Release(&view)
        self.reset(seed, launch_id, nthreads)

    cdef void reset(self, uint64_t seed, uint64_t launch_id, int nthreads) noexcept:
        """Clears the status buffer and the print counter for a launch with this key and thread count."""
        memset(self.ctx.status, 0, STATUS_WORDS * sizeof(int64_t))
        self.ctx.printlen[0] = 0
        self.seed = seed
        self.launch_id = launch_id
        self.nthreads = nthreads if nthreads > 0 else 1
        self.stop = 0
        self.pending = None
        self.can_poll = PyThread_get_thread_ident() == _MAIN_THREAD

    def interruption(self):
        """The exception a signal handler raised during the last launch (which returned `RC_INTERRUPTED`)."""
        e, self.pending = self.pending, None
        return e if e is not None else KeyboardInterrupt()

    def fill_template(self, uint64_t[::1] tpl, const int64_t[:, ::1] shape_regs,
                      const int64_t[:, ::1] stride_regs):
        """Writes launch-invariant registers: extents (reg, buf, axis) and element strides (reg, buf,
        axis: the product of the extents after `axis`)."""
        cdef Py_ssize_t r
        cdef int64_t stride, k, b
        for r in range(shape_regs.shape[0]):
            tpl[shape_regs[r, 0]] = <uint64_t>self.shapes[shape_regs[r, 1] * MAX_NDIM + shape_regs[r, 2]]
        for r in range(stride_regs.shape[0]):
            b = stride_regs[r, 1]
            stride = 1
            for k in range(stride_regs[r, 2] + 1, MAX_NDIM):
                if self.shapes[b * MAX_NDIM + k]:
                    stride *= self.shapes[b * MAX_NDIM + k]
            tpl[stride_regs[r, 0]] = <uint64_t>stride

    def run_serial(self, const int32_t[::1] code, uint64_t[::1] template, int task_id):
        """Runs a serial task on one thread; returns the bytecode's exit code."""
        cdef int64_t n = template.shape[0]
        cdef qd_reg* R = <qd_reg*>malloc((n + 1) * sizeof(qd_reg))
        cdef int rc
        memcpy(R, &template[0], n * sizeof(qd_reg))
        self.ctx.tid = 0
        self.ctx.rng_base = qd_rng_key(self.seed, self.launch_id, task_id, 0)
        self.ctx.rng_ctr = 0
        with nogil:
            rc = run(&code[0], R, &self.ctx)
        free(R)
        return rc

    def run_range(self, const int32_t[::1] prologue, const int32_t[::1] body, uint64_t[::1] template,
                  int var, int begin, int end, int task_id, int64_t min_parallel=4096):
        """Runs a range task: the prologue once, then the body for every index in [begin, end);
        on several threads when there are at least `min_parallel` indices."""
        cdef int64_t be[2]
        return self._range(prologue, body, template, var, begin, end, task_id, INT64_MIN, INT64_MAX,
                           min_parallel, be)

    def run_range_window(self, const int32_t[::1] prologue, const int32_t[::1] body, uint64_t[::1] template,
                         int var, int begin, int end, int task_id, int64_t wlo, int64_t whi):
        """`run_range` restricted to the indices of [begin, end) that lie in the window [wlo, whi), on one
        thread (the debugger runs the threads it does not follow this way). Returns (rc, begin, end)."""
        cdef int64_t be[2]
        cdef int rc = self._range(prologue, body, template, var, begin, end, task_id, wlo, whi, 1 << 62, be)
        return rc, be[0], be[1]

    cdef int _range(self, const int32_t[::1] prologue, const int32_t[::1] body, uint64_t[::1] template,
                    int var, int begin, int end, int task_id, int64_t wlo, int64_t whi, int64_t min_parallel,
                    int64_t* be):
        """The prologue once (its bounds go to `be`), then the body over [begin, end) ∩ [wlo, whi)."""
        cdef int64_t n = template.shape[0]
        cdef qd_reg* R = <qd_reg*>malloc((n + 1) * sizeof(qd_reg))
        cdef int rc
        cdef int64_t lo, hi
        memcpy(R, &template[0], n * sizeof(qd_reg))
        self.ctx.tid = 0
        self.ctx.rng_base = qd_rng_key(self.seed, self.launch_id, task_id, 0)
        self.ctx.rng_ctr = 0
        with nogil:
            rc = run(&prologue[0], R, &self.ctx)
        be[0], be[1] = R[begin].i, R[end].i
        lo = be[0] if be[0] > wlo else wlo
        hi = be[1] if be[1] < whi else whi
        if rc == RC_DONE and hi > lo:
            rc = self._parallel(&body[0], R, n, var, lo, hi, min_parallel)
        free(R)
        return rc

    cdef int _parallel(self, const int32_t* body, qd_reg* R0, int64_t nregs, int var, int64_t lo,
                       int64_t hi, int64_t min_parallel) noexcept:
        cdef int64_t total = hi - lo, cursor = lo, cmax
        cdef int nth = self.nthreads
        cdef qd_reg* R
        cdef Ctx ctx
        if total < min_parallel or total < 2 or nth == 1:
            nth = 1
        cmax = total // (nth * 16) + 1
        if cmax > 65536:
            cmax = 65536
        if nth == 1:
            R = <qd_reg*>malloc((nregs + 1) * sizeof(qd_reg))
            memcpy(R, R0, nregs * sizeof(qd_reg))
            ctx = self.ctx
            ctx.slot = 0
            with nogil:
                self._chunks(NULL, body, R, var, &ctx, &cursor, hi, 16 if cmax > 16 else cmax, cmax, 1, self.can_poll)
            free(R)
            return self._outcome()
        with nogil, parallel(num_threads=nth):
            R = <qd_reg*>malloc((nregs + 1) * sizeof(qd_reg))
            memcpy(R, R0, nregs * sizeof(qd_reg))
            ctx = self.ctx
            ctx.slot = threadid()
            self._chunks(NULL, body, R, var, &ctx, &cursor, hi, 16 if cmax > 16 else cmax, cmax, nth,
                         self.can_poll and threadid() == 0)
            free(R)
        return self._outcome()

    cdef void _chunks(self, native_body_t f, const int32_t* body, qd_reg* R, int var, Ctx* ctx, int64_t* cursor,
                      int64_t hi, int64_t c, int64_t cmax, int nth, bint poller) noexcept nogil:
        """One of `nth` threads' share of a range: chunks [s, s + c) taken from `cursor` until none is left or the
        launch failed or stopped; run by `f` (native) or by the bytecode `body` index by index. Each next chunk
        is scaled to run about CHUNK_NS, and holds at most `cmax` indices and a 1/nth of those left (so the
        threads finish together). The `poller` runs Python's signal handlers every POLL_NS."""
        cdef int64_t s, e, i, t0 = _now(), t1, left
        cdef double want
        if poller:
            self.next_poll = t0 + POLL_NS
        while __atomic_load_n(&ctx.status[STATUS_FLAG], __ATOMIC_RELAXED) == 0 and \
                __atomic_load_n(&self.stop, __ATOMIC_RELAXED) == 0:
            s = __atomic_fetch_add(cursor, c, __ATOMIC_RELAXED)
            if s >= hi:
                break
            e = s + c if c < hi - s else hi
            if f != NULL:
                f(ctx, s, e)
            else:
                for i in range(s, e):
                    R[var].i = i
                    ctx.tid = i
                    ctx.rng_ctr = 0
                    if run(body, R, ctx) != RC_DONE:
                        break
            t1 = _now()
            want = <double>c * CHUNK_NS / <double>(t1 - t0 + 1)
            left = (hi - __atomic_load_n(cursor, __ATOMIC_RELAXED)) // nth + 1
            if want > <double>cmax:
                want = <double>cmax
            if want > <double>left:
                want = <double>left
            c = <int64_t>want if want >= 1.0 else 1
            t0 = t1
            if poller and t1 >= self.next_poll:
                self.next_poll = t1 + POLL_NS
                self._poll()

    cdef void _poll(self) noexcept nogil:
        """Runs Python's pending signal handlers (on the main thread, the GIL taken for it); one that raises
        (Ctrl-C: KeyboardInterrupt) stops the launch and leaves its exception in `pending`."""
        with gil:
            try:
                PyErr_CheckSignals()
            except BaseException as e:
                self.pending = e
                __atomic_store_n(&self.stop, 1, __ATOMIC_RELAXED)

    cdef int _outcome(self) noexcept:
        """A chunked range's return code: RC_FAILED a check failed, RC_INTERRUPTED a signal handler raised, else
        RC_DONE."""
        if self.ctx.status[STATUS_FLAG] != 0:
            return RC_FAILED
        if self.stop:
            return RC_INTERRUPTED
        return RC_DONE

    # ------------------------------------------------------------------ native (LLVM) tasks

    def run_native_serial(self, uint64_t fn, int task_id):
        """Runs a compiled serial task; returns its exit code (RC_DONE, RC_FAILED, RC_RETURNED)."""
        return self.native_serial(fn, task_id)

    cdef int native_serial(self, uint64_t fn, int task_id) noexcept:
        cdef native_serial_t f = <native_serial_t><size_t>fn
        cdef int32_t rc
        self.ctx.rng_base = qd_rng_key(self.seed, self.launch_id, task_id, 0)
        with nogil:
            rc = f(&self.ctx)
        return rc

    def run_native_range(self, uint64_t prologue, uint64_t body, int task_id, int64_t min_parallel):
        """Runs a compiled range task: the prologue gives [begin, end); the body runs chunks of it,
        on several threads when there are at least `min_parallel` indices."""
        return self.native_range(prologue, body, task_id, min_parallel)

    cdef int native_range(self, uint64_t prologue, uint64_t body, int task_id, int64_t min_parallel) noexcept:
        cdef native_prologue_t p = <native_prologue_t><size_t>prologue
        cdef native_body_t f = <native_body_t><size_t>body
        cdef int64_t be[2]
        self.ctx.rng_base = qd_rng_key(self.seed, self.launch_id, task_id, 0)
        with nogil:
            p(&self.ctx, be)
        if be[1] <= be[0]:
            return RC_DONE
        return self._native_parallel(f, be[0], be[1], min_parallel)

    cdef int _native_parallel(self, native_body_t f, int64_t lo, int64_t hi, int64_t min_parallel) noexcept:
        cdef int64_t total = hi - lo, cursor = lo, cmax, c0
        cdef int nth = self.nthreads
        cdef int32_t r
        cdef Ctx ctx
        if total < min_parallel or total < 2:
            with nogil:
                r = f(&self.ctx, lo, hi)
            return r
        # Heavy bodies (inner loops) get small chunks; light ones at most one chunk per thread, so a
        # recognised reduction does few atomics. Both start small and grow to run about CHUNK_NS each.
        if min_parallel <= 2:
            cmax = total // (nth * 16) + 1
            c0 = 1
        else:
            cmax = (total + nth - 1) // nth
            c0 = 4096 if cmax > 4096 else cmax
        if nth == 1:
            with nogil:
                self._chunks(f, NULL, NULL, 0, &self.ctx, &cursor, hi, c0, cmax, 1, self.can_poll)
            return self._outcome()
        with nogil, parallel(num_threads=nth):
            ctx = self.ctx  # private: the slot differs per thread
            ctx.slot = threadid()
            self._chunks(f, NULL, NULL, 0, &ctx, &cursor, hi, c0, cmax, nth, self.can_poll and threadid() == 0)
        return self._outcome()
