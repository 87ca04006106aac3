# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Host-side evaluation for adstack sizing (DESIGN §5).

`eval_size` runs a serialised `SizeExpr` (`qd/ad/sizing.py`: 5 int64 words per node, post-order,
root last) nogil against live buffers and scalar arguments. A `MaxOverRange` walks its range
serially; the walk as a whole is bounded: every range charges its iterations when it is entered, and
the walk raises as soon as the total would pass `GUARD` (so nested ranges, each small, cannot add up
to an unbounded walk; a size is never truncated). An index outside a buffer raises instead of reading
past it. `eval_max_parallel` runs a recognized spec's flattened axes in parallel at any extent; the
ranges nested in its body are walked per index, and their worst-case total (closed bounds: known
before the walk) must stay within `NESTED_GUARD`. `reduce_max_i64` is the parallel integer max
reduction the max-reducer builds on.
"""

import os

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MAX
from libc.stdlib cimport calloc, free, malloc
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_C_CONTIGUOUS, PyBUF_FORMAT
from cython.parallel cimport parallel, prange, threadid

import numpy as np

# the serialised SizeExpr's node kinds, words per node, comparison codes and walk guard: the launch ABI
from qd._abi cimport (CMP_EQ, CMP_GE, CMP_GT, CMP_LE, CMP_LT, K_ADD, K_ARG, K_CMP, K_CONST, K_COUNT, K_DIV, K_FCMP,
                      K_FCONST, K_FLOAD, K_GATE, K_INDEX, K_LOAD, K_MAX, K_MIN, K_MOD, K_MOR, K_MUL, K_SHAPE, K_SUB,
                      K_VAR, MAX_NDIM, SIZE_GUARD, SIZE_WORDS)

DEF MAX_VARS = 64
DEF MAX_DEPTH = 256

DEF INT64_MIN_ = -9223372036854775807 - 1


cdef inline int64_t max_i64(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


ctypedef union Bits:
    int64_t i
    double d

GUARD = SIZE_GUARD  # MaxOverRange iterations one serial walk may take, all its ranges together
NESTED_GUARD = 1 << 28  # iterations of the ranges nested in a parallel spec's body, over all its indices


ctypedef struct Buf:
    char* data
    int code      # element type: 0 i8 1 i16 2 i32 3 i64 4 u8 5 u16 6 u32 7 u64 (u1 is u8) 8 f32 9 f64; -1 unbound
    int ndim
    int64_t shape[MAX_NDIM]

ctypedef struct State:
    const int64_t* code
    Buf* bufs
    int nbufs
    const int64_t* args
    int nargs
    const int64_t* counts
    int ncounts
    int64_t vars[MAX_VARS]
    int64_t guard
    int64_t walked  # iterations the ranges entered so far charged (their total is bounded by `guard`)
    int err       # 0 ok, 1 guard, 2 index out of range, 3 unbound buffer, 4 too deep, 5 nested guard
    int64_t info[4]

_CODES = {np.dtype(np.int8): 0, np.dtype(np.int16): 1, np.dtype(np.int32): 2, np.dtype(np.int64): 3,
          np.dtype(np.uint8): 4, np.dtype(np.uint16): 5, np.dtype(np.uint32): 6, np.dtype(np.uint64): 7,
          np.dtype(np.bool_): 4, np.dtype(np.float32): 8, np.dtype(np.float64): 9}


cdef inline int64_t _read(Buf* b, int64_t lin) noexcept nogil:
    if b.code == 0:
        return (<int8_t*>b.data)[lin]
    if b.code == 1:
        return (<int16_t*>b.data)[lin]
    if b.code == 2:
        return (<int32_t*>b.data)[lin]
    if b.code == 3:
        return (<int64_t*>b.data)[lin]
    if b.code == 4:
        return (<uint8_t*>b.data)[lin]
    if b.code == 5:
        return (<uint16_t*>b.data)[lin]
    if b.code == 6:
        return (<uint32_t*>b.data)[lin]
    return <int64_t>(<uint64_t*>b.data)[lin]


cdef inline double _readf(Buf* b, int64_t lin) noexcept nogil:
    if b.code == 8:
        return (<float*>b.data)[lin]
    if b.code == 9:
        return (<double*>b.data)[lin]
    return <double>_read(b, lin)


cdef inline int64_t _cmp(int64_t op, double a, double b) noexcept nogil:
    if op == CMP_LT:
        return a < b
    if op == CMP_LE:
        return a <= b
    if op == CMP_GT:
        return a > b
    if op == CMP_GE:
        return a >= b
    if op == CMP_EQ:
        return a == b
    return a != b


cdef inline int64_t _icmp(int64_t op, int64_t a, int64_t b) noexcept nogil:
    if op == CMP_LT:
        return a < b
    if op == CMP_LE:
        return a <= b
    if op == CMP_GT:
        return a > b
    if op == CMP_GE:
        return a >= b
    if op == CMP_EQ:
        return a == b
    return a != b


cdef inline int64_t _floordiv(int64_t a, int64_t b) noexcept nogil:
    if b == 0:
        return 0
    cdef int64_t q = a // b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef int64_t _ev(State* s, int64_t n, int depth) noexcept nogil:
    cdef const int64_t* w = s.code + n * SIZE_WORDS
    cdef int64_t k = w[0], a, b, lo, hi, best, v, i
    cdef Bits x, y
    cdef Buf* buf
    if s.err:
        return 0
    if depth > MAX_DEPTH:
        s.err = 4
        return 0
    if k == K_CONST:
        return w[1]
    if k == K_ARG:
        return s.args[w[1]] if w[1] < s.nargs else 0
    if k == K_VAR:
        return s.vars[w[1]]
    if k == K_COUNT:
        return s.counts[w[1]] if w[1] < s.ncounts else 0
    if k == K_FCONST:
        return w[1]
    if k == K_GATE:
        a = _ev(s, w[1], depth + 1)
        if (a != 0) == (w[3] != 0):
            return _ev(s, w[2], depth + 1)
        return 0
    if k == K_CMP:
        return _icmp(w[1], _ev(s, w[2], depth + 1), _ev(s, w[3], depth + 1))
    if k == K_FCMP:
        x.i = _ev(s, w[2], depth + 1)
        y.i = _ev(s, w[3], depth + 1)
        return _cmp(w[1], x.d, y.d)
    if k == K_SHAPE or k == K_INDEX or k == K_LOAD or k == K_FLOAD:
        if w[1] >= s.nbufs or s.bufs[w[1]].code < 0:
            s.err = 3
            s.info[0] = w[1]
            return 0
        buf = &s.bufs[w[1]]
        if k == K_SHAPE:
            return buf.shape[w[2]]
        if k == K_LOAD:
            return _read(buf, _ev(s, w[2], depth + 1) if w[2] >= 0 else 0)
        if k == K_FLOAD:
            x.d = _readf(buf, _ev(s, w[2], depth + 1) if w[2] >= 0 else 0)
            return x.i
        i = _ev(s, w[3], depth + 1)
        if s.err == 0 and (i < 0 or i >= buf.shape[w[2]]):
            s.err = 2
            s.info[0], s.info[1], s.info[2], s.info[3] = w[1], w[2], i, buf.shape[w[2]]
            return 0
        if w[4] < 0:
            return i
        return _ev(s, w[4], depth + 1) * buf.shape[w[2]] + i
    if k == K_MOR:
        lo = _ev(s, w[2], depth + 1)
        hi = _ev(s, w[3], depth + 1)
        if s.err == 0 and hi > lo and <uint64_t>hi - <uint64_t>lo > <uint64_t>(s.guard - s.walked):
            s.err = 1  # charged up front: the walk never does more than `guard` iterations before it raises
            s.info[0] = s.walked
            s.info[1] = <int64_t>(<uint64_t>hi - <uint64_t>lo) if <uint64_t>hi - <uint64_t>lo < <uint64_t>INT64_MAX else INT64_MAX
            return 0
        if hi > lo:
            s.walked += hi - lo
        best = 0
        i = lo
        while i < hi and s.err == 0:
            s.vars[w[1]] = i
            v = _ev(s, w[4], depth + 1)
            if v > best:
                best = v
            i += 1
        return best
    a = _ev(s, w[1], depth + 1)
    b = _ev(s, w[2], depth + 1)
    if k == K_ADD:
        return a + b
    if k == K_SUB:
        return a - b if a > b else 0
    if k == K_MUL:
        return a * b
    if k == K_MAX:
        return a if a > b else b
    if k == K_MIN:
        return a if a < b else b
    if k == K_DIV:
        return _floordiv(a, b)
    if b == 0:
        return 0
    return a - _floordiv(a, b) * b


cdef Buf* _bind(list arrays) except NULL:
    """C views of the buffers (the caller keeps the arrays alive while they are used)."""
    cdef int nb = len(arrays), b, k
    cdef Buf* bufs = <Buf*>malloc((nb + 1) * sizeof(Buf))
    cdef Py_buffer view
    cdef object arr
    for b in range(nb):
        arr = arrays[b]
        bufs[b].code = -1
        if arr is None or arr.dtype not in _CODES:
            continue
        PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS)
        bufs[b].data = <char*>view.buf
        bufs[b].ndim = view.ndim
        for k in range(MAX_NDIM):
            bufs[b].shape[k] = view.shape[k] if k < view.ndim else 1
        PyBuffer_Release(&view)
        bufs[b].code = _CODES[arr.dtype]
    return bufs


cdef void _init(State* s, const int64_t[::1] code, Buf* bufs, int nb, const int64_t[::1] args, int64_t guard,
                const int64_t[::1] counts):
    cdef int i
    s.code = &code[0]
    s.bufs = bufs
    s.nbufs = nb
    s.args = &args[0] if args.shape[0] else NULL
    s.nargs = args.shape[0]
    s.counts = &counts[0] if counts is not None and counts.shape[0] else NULL
    s.ncounts = counts.shape[0] if counts is not None else 0
    s.guard = guard
    s.walked = 0
    s.err = 0
    for i in range(MAX_VARS):
        s.vars[i] = 0


def eval_size(const int64_t[::1] code, list arrays, const int64_t[::1] args, int64_t guard=GUARD,
              const int64_t[::1] counts=None) -> int:
    """The value of the serialised size `code`; `arrays[b]` is buffer `b`'s numpy array (or None),
    `args` the scalar arguments as int64 and `counts` the counting kernel's while-loop counts.
    Raises RuntimeError past the guard or out of range."""
    cdef State s
    cdef int64_t out = 0, root = code.shape[0] // 5 - 1
    cdef Buf* bufs = _bind(arrays)
    try:
        _init(&s, code, bufs, len(arrays), args, guard, counts)
        if root >= 0:
            with nogil:
                out = _ev(&s, root, 0)
    finally:
        free(bufs)
    _raise(&s, guard)
    return out


cdef int64_t _plain_read(const int64_t[::1] code, int64_t node, int64_t slot, int64_t* buf, int64_t* shift) noexcept:
    """Whether node `node` is `read(b, [var]) + c` (or `- c`, clamped, or the bare read) of a 1-D buffer
    indexed by bound variable `slot` itself; sets the buffer and the constant (negative: subtracted)."""
    cdef int64_t k = code[node * SIZE_WORDS], x = node, c = 0, lin
    if k == K_SUB or k == K_ADD:
        if code[code[node * SIZE_WORDS + 2] * SIZE_WORDS] != K_CONST:
            return 0
        c = code[code[node * SIZE_WORDS + 2] * SIZE_WORDS + 1]
        c = -c if k == K_SUB else c
        x = code[node * SIZE_WORDS + 1]
    if code[x * SIZE_WORDS] != K_LOAD:
        return 0
    lin = code[x * SIZE_WORDS + 2]
    if (lin < 0 or code[lin * SIZE_WORDS] != K_INDEX or code[lin * SIZE_WORDS + 2] != 0
            or code[lin * SIZE_WORDS + 4] >= 0):
        return 0
    if (code[code[lin * SIZE_WORDS + 3] * SIZE_WORDS] != K_VAR
            or code[code[lin * SIZE_WORDS + 3] * SIZE_WORDS + 1] != slot):
        return 0
    buf[0] = code[x * SIZE_WORDS + 1]
    shift[0] = c
    return 1


cdef inline int64_t _max_run(Buf* b, int64_t lo, int64_t hi) noexcept nogil:
    """max over b[lo:hi] (serial; typed loops the compiler vectorises)."""
    cdef int64_t i, m = INT64_MIN_
    cdef int32_t* p32 = <int32_t*>b.data
    cdef int64_t* p64 = <int64_t*>b.data
    cdef int32_t m32 = -2147483647 - 1
    if b.code == 2:  # an i32 accumulator: one SIMD max per lane
        for i in range(lo, hi):
            m32 = p32[i] if p32[i] > m32 else m32
        m = m32
    elif b.code == 3:
        for i in range(lo, hi):
            m = max_i64(m, p64[i])
    else:
        for i in range(lo, hi):
            m = max_i64(m, _read(b, i))
    return m


cdef int64_t _max_slice(Buf* b, int64_t lo, int64_t hi, int nth) noexcept nogil:
    """max over b[lo:hi] of a 1-D integer buffer: one contiguous run per chunk, on `nth` threads."""
    cdef int64_t best = INT64_MIN_, c, n = hi - lo, chunk, c0, c1, m
    cdef int64_t nchunks = nth * 4 if n > nth * 4 else 1
    cdef int64_t* out = <int64_t*>malloc(nchunks * sizeof(int64_t))
    chunk = (n + nchunks - 1) // nchunks
    for c in prange(nchunks, num_threads=nth, schedule="static"):
        c0 = lo + c * chunk
        c1 = c0 + chunk if c0 + chunk < hi else hi
        m = _max_run(b, c0, c1) if c0 < c1 else INT64_MIN_
        out[c] = m
    for c in range(nchunks):
        best = max_i64(best, out[c])
    free(out)
    return best


cdef inline int64_t _sat_add(int64_t a, int64_t b) noexcept nogil:
    return a + b if a < INT64_MAX - b else INT64_MAX


cdef inline int64_t _sat_mul(int64_t a, int64_t b) noexcept nogil:
    if a == 0 or b == 0:
        return 0
    return a * b if a <= INT64_MAX // b else INT64_MAX


cdef int64_t _nested_work(State* s, int64_t n, int depth) noexcept nogil:
    """The most `MaxOverRange` iterations one evaluation of node `n` walks, when every range below it has
    closed bounds (a recognized spec's body; saturating). A gate counts as taken; a bound that cannot be
    evaluated (an index out of range: the walk reports it if it gets there) counts as an empty range."""
    cdef const int64_t* w = s.code + n * SIZE_WORDS
    cdef int64_t k = w[0], lo, hi, total = 0
    cdef State probe
    if depth > MAX_DEPTH:
        return 0
    if k == K_MOR:
        probe = s[0]
        probe.err = 0
        lo = _ev(&probe, w[2], depth + 1)
        hi = _ev(&probe, w[3], depth + 1)
        if probe.err or hi <= lo:
            return 0
        return _sat_mul(hi - lo, _sat_add(1, _nested_work(s, w[4], depth + 1)))
    if k == K_LOAD or k == K_FLOAD:
        return _nested_work(s, w[2], depth + 1) if w[2] >= 0 else 0
    if k == K_INDEX:
        total = _nested_work(s, w[3], depth + 1)
        return _sat_add(total, _nested_work(s, w[4], depth + 1)) if w[4] >= 0 else total
    if k == K_CMP or k == K_FCMP:
        return _sat_add(_nested_work(s, w[2], depth + 1), _nested_work(s, w[3], depth + 1))
    if k == K_GATE or (k >= K_ADD and k <= K_MOD):
        return _sat_add(_nested_work(s, w[1], depth + 1), _nested_work(s, w[2], depth + 1))
    return 0


cdef int64_t _chain(State* s0, int64_t root, int64_t* lo, int64_t* ext, int64_t* slot, int* nax) noexcept:
    """Reads the chain of nested `MaxOverRange`s at `root` (at most 8 axes: their slots, begins and extents,
    evaluated in `s0`), checks the ranges nested in the body against `NESTED_GUARD` (error 5 in `s0`) and
    returns the body's node; `s0.info[0]` is then the flattened extent (0: empty)."""
    cdef const int64_t* code = s0.code
    cdef int64_t node = root, total = 1, nested
    nax[0] = 0
    while code[node * SIZE_WORDS] == K_MOR and nax[0] < 8:
        slot[nax[0]] = code[node * SIZE_WORDS + 1]
        lo[nax[0]] = _ev(s0, code[node * SIZE_WORDS + 2], 0)
        ext[nax[0]] = _ev(s0, code[node * SIZE_WORDS + 3], 0) - lo[nax[0]]
        total = 0 if ext[nax[0]] <= 0 else _sat_mul(total, ext[nax[0]])
        nax[0] += 1
        node = code[node * SIZE_WORDS + 4]
    if s0.err == 0 and total > 0:
        nested = _sat_mul(total, _nested_work(s0, node, 0))
        if nested > NESTED_GUARD:
            s0.err = 5
            s0.info[0], s0.info[1] = nested, total
            return node
    s0.info[0] = total
    return node


def check_spec_walk(const int64_t[::1] code, list arrays, const int64_t[::1] args) -> None:
    """Raises as `eval_max_parallel` would before walking (bounds of the axes, the `NESTED_GUARD`): for the
    GPU tiers, which run the spec as a generated kernel and must not launch an unbounded walk."""
    cdef State s0
    cdef int64_t lo[8], ext[8], slot[8]
    cdef int nax = 0
    cdef Buf* bufs = _bind(arrays)
    try:
        _init(&s0, code, bufs, len(arrays), args, GUARD, None)
        _chain(&s0, code.shape[0] // 5 - 1, lo, ext, slot, &nax)
    finally:
        free(bufs)
    _raise(&s0, GUARD)


def eval_max_parallel(const int64_t[::1] code, list arrays, const int64_t[::1] args, int nthreads=0) -> int:
    """The value of a recognized `MaxOverRange` spec (`qd/ad/maxreducer.py`; root last, a K_MOR whose
    chain of nested K_MORs with closed bounds forms the axes), reduced over `nthreads` OpenMP threads
    (0: all cores), at any extent: no guard applies to the axes; the ranges nested in the body may walk at most
    `NESTED_GUARD` iterations in all (checked before the walk). An empty range gives 0."""
    cdef State s0, s
    cdef int64_t root = code.shape[0] // 5 - 1, node, total = 1, idx, rem, v, best = 0, fbuf = 0, fshift = 0, kind
    cdef int64_t lo[8], ext[8], slot[8]
    cdef int nax = 0, a, t, nth = nthreads if nthreads > 0 else (os.cpu_count() or 1)
    cdef int64_t* bests
    cdef int* errs
    cdef int64_t (*infos)[4]
    cdef Buf* bufs = _bind(arrays)
    try:
        _init(&s0, code, bufs, len(arrays), args, NESTED_GUARD, None)
        node = _chain(&s0, root, lo, ext, slot, &nax)
        _raise(&s0, GUARD)
        total = s0.info[0]
        if total == 0:
            return 0
        if total < 16384:  # starting threads would cost more than the walk
            nth = 1
        kind = _plain_read(code, node, slot[0], &fbuf, &fshift) if nax == 1 else 0
        if kind and fbuf < s0.nbufs and bufs[fbuf].code >= 0 and bufs[fbuf].ndim == 1:
            if lo[0] < 0 or lo[0] + ext[0] > bufs[fbuf].shape[0]:  # the walk would report this read
                s0.err = 2
                s0.info[0], s0.info[1], s0.info[2] = fbuf, 0, (lo[0] if lo[0] < 0 else lo[0] + ext[0] - 1)
                s0.info[3] = bufs[fbuf].shape[0]
                _raise(&s0, GUARD)
            best = _max_slice(&bufs[fbuf], lo[0], lo[0] + ext[0], nth) + fshift
            return best if best > 0 else 0
        bests = <int64_t*>calloc(nth, sizeof(int64_t))
        errs = <int*>calloc(nth, sizeof(int))
        infos = <int64_t(*)[4]>calloc(nth, 4 * sizeof(int64_t))
        with nogil, parallel(num_threads=nth):
            s = s0
            for idx in prange(total, schedule="static"):
                if s.err:
                    continue
                if nax == 1:
                    s.vars[slot[0]] = lo[0] + idx
                else:
                    rem = idx
                    for a in range(nax - 1, -1, -1):
                        s.vars[slot[a]] = lo[a] + rem % ext[a]
                        rem = rem // ext[a]
                v = _ev(&s, node, 0)
                if v > bests[threadid()]:
                    bests[threadid()] = v
                if s.err and errs[threadid()] == 0:
                    errs[threadid()] = s.err
                    infos[threadid()][0], infos[threadid()][1] = s.info[0], s.info[1]
                    infos[threadid()][2], infos[threadid()][3] = s.info[2], s.info[3]
        for t in range(nth):
            if errs[t] and s0.err == 0:
                s0.err = errs[t]
                s0.info[0], s0.info[1], s0.info[2], s0.info[3] = infos[t][0], infos[t][1], infos[t][2], infos[t][3]
            if bests[t] > best:
                best = bests[t]
        free(bests)
        free(errs)
        free(infos)
    finally:
        free(bufs)
    _raise(&s0, GUARD)
    return best


cdef int _raise(State* s, int64_t guard) except -1:
    if s.err == 1:
        raise RuntimeError(f"adstack sizing: the serial walk of its MaxOverRanges needs more than {guard} iterations "
                           f"(a range of {s.info[1]} after {s.info[0]} already walked) and exceeds the {guard} guard; "
                           f"the enclosing loops' shape is outside the parallel max-reducer's grammar (e.g. a "
                           f"triangular nest, whose inner bound follows an outer index)")
    if s.err == 5:
        raise RuntimeError(f"adstack sizing: the ranges nested in a parallel MaxOverRange would walk up to "
                           f"{s.info[0]} iterations over its {s.info[1]} indices, which exceeds the {NESTED_GUARD} "
                           f"guard of nested walks")
    if s.err == 2:
        raise RuntimeError(f"adstack sizing: index {s.info[2]} is out of range [0, {s.info[3]}) on axis "
                           f"{s.info[1]} of buffer @{s.info[0]}")
    if s.err == 3:
        raise RuntimeError(f"adstack sizing: buffer @{s.info[0]} is not bound or has an unsupported dtype")
    if s.err == 4:
        raise RuntimeError(f"adstack sizing: the size expression is nested deeper than {MAX_DEPTH}")
    return 0


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
