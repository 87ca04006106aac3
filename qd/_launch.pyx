# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled launch plans (DESIGN §7): a kernel call that repeats the shape of an earlier one launches
without running the frontend's Python.

A `Plan` belongs to one kernel instance (`qd/runtime/launch_plan.py` builds it from the instance and
the call that armed it). A call goes through it when everything the Python path would decide is
decided the same way again, which the plan checks itself at every call:

- nothing the Python path reads changed: the config (`bump_epoch`, called on every option change), no
  `qd.ad.Tape` / `FwdMode` is active, no kernel is being compiled in any thread, no tier wrapper (the debugger)
  is registered (the plan's guards: a dict entry that must still hold the same object), the fields and ndarrays the
  instance reached through its template arguments (`members_unchanged`, `qd/frontend/guards.py`);
- every argument has the type and layout the instance was made for: a template argument is the same
  object (or an equal int/float/bool/str, as the instantiation key compares them), a scalar is a
  Python int/float/bool that converts to its parameter's dtype (an int in the 64-bit range of the
  parameter's signedness: `qd.frontend.args._scalar`), an ndarray argument
  is a qd Ndarray with the same dtype, element shape and layout (one that passed before: the same storage and
  layout; the one the plan is bound to: nothing read while no storage or layout changed anywhere, `storage_changed`),
  or a C-contiguous, native-order numpy array of the dtype and dimensions of the instance (writeable
  where the kernel writes it); a dataclass argument is exactly its parameter's class, and its leaves are such
  arguments (`with_structs`); `qd.Tensor` wrappers are taken off first (`with_wrappers`).

Anything else returns `MISS`, and the caller takes the Python path, which raises the same errors as
ever. A plan binds buffers (data pointers and extents into the interpreter's `Launch`), packs scalars
into the native argument words, runs the native tasks, bumps the generation counters of the buffers
the kernel writes, and hands failures, prints and returns to the host code that formats them.

Launch numbers (a key of `qd.random`) are counted here, for every tier: `next_launch_id`.
"""

from libc.stdint cimport INT32_MAX, int64_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy, memset
from cpython.dict cimport PyDict_GetItem
from cpython.long cimport (PyLong_AsLongLongAndOverflow, PyLong_AsUnsignedLongLong, PyLong_FromLongLong,
                         PyLong_FromUnsignedLongLong)
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_FromDouble
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport PyObject
from cpython.pythread cimport PyThread_get_thread_ident
cimport numpy as cnp
import weakref
import numpy as np

from qd._abi cimport (B_FIELD, B_TEMP, MAX_NDIM, P_NDARRAY, P_SCALAR, P_TEMPLATE, RC_DONE, RC_FAILED, RC_INTERRUPTED,
                      S_FIELD, S_TEMP, STATUS_DROPPED, STATUS_FLAG, V_BITS, V_BOOL, V_FLOAT, V_SIGNED, W_ARG, W_BUF,
                      W_CONST, W_SHAPE, W_STATUS, W_TWIN, qd_rng_key)
from qd._interp cimport Launch

cnp.import_array()

_WeakRef = weakref.ref

MISS = object()  # what `Plan.launch` returns when the call must take the Python path

# parameter kinds (P_*), buffer kinds (B_*), value codes (V_*: the dtype class, the bit width in the low byte), a
# runner's context word kinds (W_*) and buffer sources (S_*): the launch ABI, `qd/base/abi.py`

cdef inline int size_class(cnp.npy_intp* dims, int nd) noexcept:
    """`qd.ir.size_class` of the `nd` outer axes `dims`: 0 fewer than 2^31 cells (an empty axis counted as 1), 1
    more with every axis below 2^31, 2 an axis of 2^31 or more (the instance's `BufferDecl.large` must match)."""
    cdef int k
    cdef int64_t cells = 1
    cdef int cls = 0
    for k in range(nd):
        if dims[k] > INT32_MAX:
            return 2
        if cls == 0 and dims[k] > 1:
            cells *= dims[k]
            if cells > INT32_MAX:
                cls = 1
    return cls


def size_class_of(tuple shape):
    """`size_class` of `shape` (for tests: it must agree with `qd.ir.size_class`)."""
    cdef cnp.npy_intp dims[MAX_NDIM]
    cdef int k
    if len(shape) > MAX_NDIM:
        raise ValueError("too many axes")
    for k in range(len(shape)):
        dims[k] = shape[k]
    return size_class(dims, len(shape))


cdef uint64_t _epoch = 1
cdef uint64_t _storage_epoch = 1
cdef uint64_t _launch_id = 0


def storage_changed():
    """A field's or ndarray's storage or layout was replaced (`HostData._arr` / `_layout` are set): plans check the
    ndarrays they bound again before trusting them (`Plan.nd_bound`)."""
    global _storage_epoch
    _storage_epoch += 1


def bump_epoch():
    """Invalidates every armed plan (a config option changed); the next call of each kernel takes the
    Python path once and re-arms its plan."""
    global _epoch
    _epoch += 1


def next_launch_id():
    """The number of the next launch of this program (every tier takes one per launch)."""
    global _launch_id
    cdef uint64_t r = _launch_id
    _launch_id += 1
    return r


def reset_launch_ids():
    global _launch_id
    _launch_id = 0


cdef object _last_launched = None  # the instance (`CompiledKernel`) the program launched last


def note_launched(object ck):
    """`ck` was launched (the Python path; a plan notes its own launches)."""
    global _last_launched
    _last_launched = ck


def last_launched():
    """The kernel instance launched last (Quadrants' `prog.get_..._on_last_call` queries read it), or None."""
    return _last_launched


_U64_MAX = (1 << 64) - 1


cdef inline bint scalar_bits(object v, int code, uint64_t* out):
    """The register bits of scalar argument `v` for a parameter of value code `code` (`register_bits`);
    False where the Python path must convert it (or refuse it)."""
    cdef int overflow = 0
    cdef long long ll
    cdef double d
    cdef float f
    cdef int bits = code & V_BITS
    cdef uint64_t u
    t = type(v)
    if t is float:
        if not (code & V_FLOAT):
            return False
        d = PyFloat_AS_DOUBLE(v)
    elif t is int or t is bool:
        ll = PyLong_AsLongLongAndOverflow(v, &overflow)
        if not (code & V_FLOAT):
            if overflow:  # past the i64 range: an unsigned parameter takes up to 2**64 - 1
                if overflow < 0 or code & (V_SIGNED | V_BOOL) or v > _U64_MAX:
                    return False
                u = PyLong_AsUnsignedLongLong(v)
            elif ll < 0 and not (code & V_SIGNED):  # unsigned parameters (u1 too) take no negative values
                return False
            else:
                u = <uint64_t>ll
            if code & V_BOOL:
                out[0] = 1 if u != 0 else 0
                return True
            if bits < 64:
                u &= (<uint64_t>1 << bits) - 1
                if (code & V_SIGNED) and (u >> (bits - 1)):
                    u |= ~((<uint64_t>1 << bits) - 1)
            out[0] = u
            return True
        if overflow:
            return False
        d = <double>ll
    else:
        return False
    if bits == 64:
        out[0] = (<uint64_t*>&d)[0]
    else:
        f = <float>d
        out[0] = (<uint32_t*>&f)[0]
    return True


cdef inline object decode(int code, uint64_t bits):
    """A Python value from the register bits of a return value (`qd.runtime.status.decode`)."""
    cdef float f
    cdef uint32_t w
    if code & V_FLOAT:
        if (code & V_BITS) == 64:
            return PyFloat_FromDouble((<double*>&bits)[0])
        w = <uint32_t>bits
        f = (<float*>&w)[0]
        return PyFloat_FromDouble(f)
    if code & V_SIGNED:
        return PyLong_FromLongLong(<long long>bits)
    return PyLong_FromUnsignedLongLong(bits)


cdef class KernelEntry:
    """The entry of a `@qd.kernel` call (`qd.runtime.kernel.Kernel` derives from it), in C: a call without keyword
    arguments goes straight to the kernel's compiled launch plan (`_plan`, `Plan.launch`), with no Python frame in
    between; any other call, and a call the plan misses, goes to the kernel's `_call`."""
    cdef public object _plan

    def __call__(self, *args, **kwargs):
        cdef object plan = self._plan
        cdef object r
        if plan is not None and not kwargs:
            r = plan.launch(args)
            if r is not MISS:
                return r
        return self._call(args, kwargs)


cdef class Plan:
    """The compiled launch of one CPU kernel instance (see the module docstring). Built by
    `qd.runtime.launch_plan.build`; `arm` makes it valid for the current config."""

    cdef uint64_t epoch
    cdef Launch st
    cdef object scratch          # the `_Scratch` whose arrays `st` points into (kept alive)
    cdef uint64_t* argwords      # the native argument words (`Ctx.args`)
    cdef int64_t* status
    cdef int64_t* printlen
    cdef uint64_t* rets
    # parameters
    cdef Py_ssize_t nparams
    cdef int* pkind
    cdef int* pslot              # scalar: its argument word; ndarray: its buffer
    cdef int* pcode              # scalar: value code; ndarray: numpy type number (-1: numpy arrays refused)
    cdef int* pndim              # ndarray: dimensions of the storage (outer + element)
    cdef int* pwritten           # ndarray: the kernel writes it (bump its generation)
    cdef list pexpect            # template: the value; ndarray: (qd spec, layout, element shape, size class)
    # buffers
    cdef Py_ssize_t nbuf
    cdef int* bkind
    cdef list bobj               # field: its owner; temp: its array
    cdef list keep               # the arrays of the running launch, by buffer
    cdef list bumped_fields      # field owners the kernel writes
    # tasks
    cdef Py_ssize_t ntasks
    cdef int* tserial
    cdef uint64_t* tfn
    cdef uint64_t* tprologue
    cdef int64_t* tminpar
    # returns, outcome handlers
    cdef Py_ssize_t nrets
    cdef int* rcode
    cdef object restructure      # None, or the signature's rebuild of a compound return
    cdef object on_failure       # (rc, args) -> raises the recorded error
    cdef object on_prints        # () -> prints the records
    # guards
    cdef list guards             # (dict, key, expected object) triples
    cdef list builder_stack      # the kernels being compiled, in every thread (`qd.frontend.builder.COMPILING`): empty
    cdef object nd_base          # the qd Ndarray class
    cdef object device_run       # a GPU tier: its launcher, (launch args) -> returns; None: the CPU tier
    # dataclass arguments: per parameter as written, None (itself a leaf) or (its class, the member path of each
    # of its leaves); None where the signature is flat. The call's arguments become the leaves' values first.
    cdef list struct_spec
    cdef Py_ssize_t nuser
    cdef tuple wrappers          # `qd.Tensor` wrapper classes taken off the arguments (their `_impl`), or None
    cdef list struct_kept        # per parameter as written: (argument, its leaves) of the last frozen dataclass
                                 # argument walked (every dataclass on its paths frozen), or None
    cdef list nd_seen            # per parameter: (qd ndarray, its storage, its layout) of the last that passed every
                                 # check, or None
    cdef list nd_bound           # per parameter: the qd ndarray the plan's launch state is bound to, valid while no
                                 # storage or layout changed anywhere since `bound_epoch` (then nothing is read from
                                 # it: Genesis passes ~450 a launch); or None
    cdef uint64_t bound_epoch    # `_storage_epoch` when every ndarray parameter was last checked and bound
    cdef uint64_t fields_epoch   # `_storage_epoch` when every field buffer was last checked and bound
    cdef public object runner    # a GPU tier's launch in C (`CudaRunner`), tried before `device_run`; or None
    cdef public object owner     # the instance (`CompiledKernel`) whose launches it makes (`last_launched`)
    cdef public object members_unchanged  # (args) -> bool: the fields/ndarrays reached through templates are the
                                          # instance's (`qd/frontend/guards.py`); None: no such members
    cdef uint64_t seed
    cdef int nthreads
    cdef bint busy
    cdef public long long launches
    # adstacks: the heap binding is kept while nothing its sizes read changed (`AdStackPlan.sizes_for`'s key)
    cdef object ad_hook          # (args) -> [(buffer, array)]: sizes the stacks, lays out the heaps
    cdef object ad_plan          # the plan's own `AdStackHeap` (its `layout` is part of what the hook saw)
    cdef list ad_reads           # per buffer the sizes read: its owner (a field) or the parameter it comes from
    cdef list ad_int_params      # the integer scalar parameters (the sizes may read them)
    cdef list ad_seen            # what the last hook call saw: owners, generations, scalars, layout
    cdef list ad_arrays          # [(buffer, array)] from the last hook call

    def __cinit__(self):
        self.busy = False
        self.launches = 0

    def __dealloc__(self):
        free(self.pkind); free(self.pslot); free(self.pcode); free(self.pndim); free(self.pwritten)
        free(self.bkind); free(self.tserial); free(self.tfn); free(self.tprologue); free(self.tminpar)
        free(self.rcode)

    def __init__(self, object st, object scratch, uint64_t[::1] argwords, int64_t[::1] status,
                 int64_t[::1] printlen, uint64_t[::1] rets, list params, list buffers, list tasks, list rets_codes,
                 object restructure, object on_failure, object on_prints, list guards, list builder_stack,
                 object nd_base, object device_run=None):
        """`params`: per parameter (P kind, slot, code, ndim, written, expected); `buffers`: per buffer
        (B kind, owner/array or None); `tasks`: (serial, fn, prologue, min_parallel)."""
        cdef Py_ssize_t i
        self.st, self.scratch = <Launch?>st, scratch
        self.argwords, self.status, self.printlen, self.rets = &argwords[0], &status[0], &printlen[0], &rets[0]
        self.nparams = len(params)
        self.pkind = <int*>calloc(self.nparams + 1, sizeof(int))
        self.pslot = <int*>calloc(self.nparams + 1, sizeof(int))
        self.pcode = <int*>calloc(self.nparams + 1, sizeof(int))
        self.pndim = <int*>calloc(self.nparams + 1, sizeof(int))
        self.pwritten = <int*>calloc(self.nparams + 1, sizeof(int))
        self.pexpect = []
        for i, (kind, slot, code, ndim, written, expected) in enumerate(params):
            self.pkind[i], self.pslot[i], self.pcode[i], self.pndim[i], self.pwritten[i] = \
                kind, slot, code, ndim, written
            self.pexpect.append(expected)
        self.nbuf = len(buffers)
        self.bkind = <int*>calloc(self.nbuf + 1, sizeof(int))
        self.bobj = []
        self.bumped_fields = []
        for i, (kind, obj, written) in enumerate(buffers):
            self.bkind[i] = kind
            self.bobj.append(obj)
            if kind == B_FIELD and written:
                self.bumped_fields.append(obj)
        self.keep = [None] * self.nbuf
        self.ntasks = len(tasks)
        self.tserial = <int*>calloc(self.ntasks + 1, sizeof(int))
        self.tfn = <uint64_t*>calloc(self.ntasks + 1, sizeof(uint64_t))
        self.tprologue = <uint64_t*>calloc(self.ntasks + 1, sizeof(uint64_t))
        self.tminpar = <int64_t*>calloc(self.ntasks + 1, sizeof(int64_t))
        for i, (serial, fn, prologue, minpar) in enumerate(tasks):
            self.tserial[i], self.tfn[i], self.tprologue[i], self.tminpar[i] = serial, fn, prologue, minpar
        self.nrets = len(rets_codes)
        self.rcode = <int*>calloc(self.nrets + 1, sizeof(int))
        for i, code in enumerate(rets_codes):
            self.rcode[i] = code
        self.restructure, self.on_failure, self.on_prints = restructure, on_failure, on_prints
        self.guards, self.builder_stack, self.nd_base = guards, builder_stack, nd_base
        self.device_run = device_run
        self.runner = None
        self.nd_seen = [None] * self.nparams
        self.nd_bound = [None] * self.nparams
        self.bound_epoch = self.fields_epoch = 0
        self.members_unchanged = None
        self.ad_hook = None
        self.struct_spec = None
        self.wrappers = None

    def with_structs(self, list spec) -> None:
        """Dataclass parameters: per parameter as written, None or (its class, the member paths of its leaves in
        the signature's leaf order)."""
        self.struct_spec, self.nuser = spec, len(spec)
        self.struct_kept = [None] * self.nuser

    def with_wrappers(self, tuple classes) -> None:
        """Arguments (and dataclass leaves) of these classes are `qd.Tensor` wrappers: launched as their `_impl`,
        as `Signature.bind` does."""
        self.wrappers = classes

    cdef inline object _bare(self, object v):
        if self.wrappers is not None and type(v) in self.wrappers:
            return v._impl
        return v

    cdef object _unwrapped(self, tuple args):
        """`args` with every `qd.Tensor` wrapper replaced by what it wraps."""
        cdef Py_ssize_t i
        for i in range(len(args)):
            if type(args[i]) in self.wrappers:
                return tuple([self._bare(v) for v in args])
        return args

    cdef object _leaves(self, tuple args):
        """The leaf values of a call through dataclass arguments (`Signature.bind`'s), or None where an argument
        is not exactly its parameter's dataclass or lacks a member (the Python path says why)."""
        cdef Py_ssize_t i
        cdef list out = []
        if len(args) != self.nuser:
            return None
        for i in range(self.nuser):
            v = args[i]
            spec = self.struct_spec[i]
            if spec is None:
                out.append(self._bare(v))
            elif self.struct_kept[i] is not None and (<tuple>self.struct_kept[i])[0] is v:
                out.extend(<tuple>(<tuple>self.struct_kept[i])[1])  # a frozen argument seen before: the same members
            elif type(v) is not (<tuple>spec)[0] or not self._walk(i, v, (<tuple>spec)[1], out):
                return None
        return tuple(out)

    cdef bint _walk(self, Py_ssize_t i, object v, tuple paths, list out) except -1:
        """Appends the leaves of dataclass argument `v` of parameter `i` to `out` (False: a member is missing), and
        keeps them for the next call with `v` where `v` and every dataclass on the way are frozen (their members
        cannot be assigned: `object.__setattr__` on a frozen dataclass goes around that, and a plan would then
        launch with the members of before)."""
        cdef Py_ssize_t k, n, start = len(out)
        cdef bint frozen = _frozen(v)
        cdef tuple path
        try:
            for path in paths:
                x = v
                n = len(path)
                for k in range(n - 1):
                    x = getattr(x, path[k])
                    frozen = frozen and _frozen(x)
                out.append(self._bare(getattr(x, path[n - 1])))
        except AttributeError:
            return False
        self.struct_kept[i] = (v, tuple(out[start:])) if frozen else None
        return True

    def with_adstack(self, object hook, object ad_plan, list reads, list int_params):
        """Adstack heaps through `hook` (see `ad_hook`); `reads`: per buffer the sizes read, (owner, -1) for a
        field, (None, parameter) for an ndarray argument."""
        self.ad_hook, self.ad_plan, self.ad_reads, self.ad_int_params = hook, ad_plan, reads, int_params
        self.ad_seen = None
        self.ad_arrays = None

    cdef list _ad_inputs(self, tuple args):
        """What the stack sizes depend on now, or None when something has no trustworthy generation."""
        out = []
        for owner, param in self.ad_reads:
            o = owner if param < 0 else args[param]
            g = getattr(o, "generation", None)
            if g is None or getattr(o, "escaped", False) or getattr(o, "device_shared", False):
                return None
            out.append(o)
            out.append(g)
        for param in self.ad_int_params:
            out.append(args[param])
        out.append(self.ad_plan.layout)
        return out

    cdef bint _adstack(self, tuple args):
        """Binds the adstack meta words and heaps, sizing them again only when their inputs changed."""
        seen = self._ad_inputs(args)
        cdef Py_ssize_t k, owners = 2 * len(self.ad_reads)  # owners at the even places before that: by identity
        fresh = seen is not None and self.ad_seen is not None and len(seen) == len(self.ad_seen)
        if fresh:
            for k in range(len(seen)):
                a, b = seen[k], self.ad_seen[k]
                if a is not b and (k < owners and k % 2 == 0 or a != b):
                    fresh = False
                    break
        if not fresh:
            self.ad_arrays = self.ad_hook(args)
            seen = self._ad_inputs(args)
            self.ad_seen = seen  # None: size again at every launch (an input without a generation)
        for b, arr in self.ad_arrays:
            if not cnp.PyArray_CheckExact(arr) or not self._bind(b, arr):
                return False
        return True

    def arm(self, uint64_t seed, int nthreads):
        """Valid from now until the next `bump_epoch`, with this `qd.random` seed and thread count."""
        self.seed, self.nthreads = seed, nthreads
        self.epoch = _epoch
        self.ad_seen = None  # the heaps were laid out for the threads and options of before
        if self.struct_spec is not None:  # what was checked under the old options is checked again
            self.struct_kept = [None] * self.nuser
        self.nd_seen = [None] * self.nparams
        self.nd_bound = [None] * self.nparams
        self.bound_epoch = self.fields_epoch = 0

    cdef inline bint _bind(self, Py_ssize_t b, object arr):
        """Points buffer `b` at numpy array `arr` (its data and extents)."""
        cdef cnp.ndarray a = <cnp.ndarray>arr
        cdef int nd = cnp.PyArray_NDIM(a)
        cdef cnp.npy_intp* dims = cnp.PyArray_DIMS(a)
        cdef int k
        if nd > MAX_NDIM:
            return False
        self.st.bufs[b] = <char*>cnp.PyArray_DATA(a)
        for k in range(MAX_NDIM):
            self.st.shapes[b * MAX_NDIM + k] = dims[k] if k < nd else 0
        self.keep[b] = arr
        return True

    cdef inline bint _guarded(self):
        cdef PyObject* cur
        if self.epoch != _epoch or self.busy or PyList_GET_SIZE(self.builder_stack) != 0:
            return False
        for d, key, expected in self.guards:
            cur = PyDict_GetItem(d, key)
            if cur != <PyObject*>expected:
                return False
        return True

    cdef inline object _ndarray(self, Py_ssize_t i, object v):
        """The storage of ndarray argument `v` of parameter `i`, or None if `v` does not fit the plan. A qd ndarray
        that passed every check before passes them again while its storage and layout are the same (a qd
        ndarray's dtype, element shape and size are its own for good; `qd.reset` drops the storage) and, on the
        CPU tier, it has no device copy. The plan holds that ndarray until another takes its place or the plan
        is armed again."""
        cdef object a
        cdef object seen = self.nd_seen[i]
        if seen is not None and (<tuple>seen)[0] is v:
            a = v._arr
            if a is (<tuple>seen)[1] and v._layout is (<tuple>seen)[2] and \
                    (self.device_run is not None or v._mirror is None) and \
                    (not self.pwritten[i] or cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a)):
                return a
        a = self._ndarray_checked(i, v)
        if a is not None and isinstance(v, self.nd_base):
            self.nd_seen[i] = (v, a, v._layout)
        return a

    cdef inline object _ndarray_checked(self, Py_ssize_t i, object v):
        cdef object a
        cdef tuple exp = <tuple>self.pexpect[i]
        if isinstance(v, self.nd_base):
            if (self.device_run is None and v._mirror is not None) or getattr(v, "_qd_arg_spec", None) != exp[0] \
                    or v._layout != exp[1]:
                return None
            a = v._arr
            if not cnp.PyArray_CheckExact(a):
                return None
        elif cnp.PyArray_CheckExact(v):
            a = v
            if self.pcode[i] < 0 or cnp.PyArray_TYPE(<cnp.ndarray>a) != self.pcode[i] or \
                    not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a) or not cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray>a):
                return None
            if exp[2] and tuple(a.shape[self.pndim[i] - len(exp[2]):]) != exp[2]:
                return None
        else:
            return None
        if cnp.PyArray_NDIM(<cnp.ndarray>a) != self.pndim[i] or \
                size_class(cnp.PyArray_DIMS(<cnp.ndarray>a), self.pndim[i] - len(exp[2])) != exp[3]:
            return None
        if self.pwritten[i] and not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>a):  # the Python path refuses it
            return None
        return a

    def launch(self, tuple args):
        """Launches the instance with `args` (the kernel's positional arguments), or returns `MISS`
        without side effects when the call must take the Python path. One launch at a time: the plan is
        busy from its first write into its launch state to its returns (a call from another thread meanwhile,
        or from the same thread's hooks, misses and takes the Python path, which has launch states of its own).
        The plan's memory of arguments seen before (`struct_kept`, `nd_seen`) is read and written only while busy."""
        global _last_launched
        if not self._guarded():
            return MISS
        _last_launched = self.owner
        self.busy = True
        try:
            if self.struct_spec is not None:
                args = self._leaves(args)
                if args is None:
                    return MISS
            elif self.wrappers is not None:
                args = self._unwrapped(args)
            if len(args) != self.nparams:
                return MISS
            return self._launch(args)
        finally:
            self.busy = False

    cdef object _launch(self, tuple args):
        cdef Py_ssize_t i, n = self.nparams
        cdef int kind, rc = 0
        cdef object v, e, a
        cdef uint64_t storage0 = _storage_epoch  # (a storage another thread replaces meanwhile: checked next time)
        cdef bint bound = self.bound_epoch == storage0  # no storage changed since every ndarray was checked and bound
        cdef bint fields_bound
        cdef list nd_bound = self.nd_bound
        for i in range(n):
            v = args[i]
            kind = self.pkind[i]
            if kind == P_SCALAR:
                if not scalar_bits(v, self.pcode[i], &self.argwords[self.pslot[i]]):
                    return MISS
            elif kind == P_NDARRAY:
                if bound and <PyObject*>v == PyList_GET_ITEM(nd_bound, i) and \
                        (not self.pwritten[i] or cnp.PyArray_ISWRITEABLE(<cnp.ndarray>v._arr)):
                    continue  # the ndarray bound last time, with the storage and layout it had then
                a = self._ndarray(i, v)
                if a is None or (self.device_run is None and not self._bind(self.pslot[i], a)):
                    nd_bound[i] = None
                    return MISS
                nd_bound[i] = v if isinstance(v, self.nd_base) else None
            else:
                e = self.pexpect[i]
                if type(e) is _WeakRef:  # (a template keying the instance by identity, held weakly)
                    e = e()
                if v is not e and not (type(v) is type(e) and (type(e) is int or type(e) is float or type(e) is bool
                                                                or type(e) is str) and v == e):
                    return MISS
        self.bound_epoch = storage0  # (every ndarray parameter is checked and bound now)
        if self.members_unchanged is not None and not self.members_unchanged(args):
            return MISS
        if self.device_run is not None:
            if self.runner is not None and (<CudaRunner>self.runner).run(self, args):
                self.launches += 1
                return None
            return self._device(args)
        fields_bound = self.fields_epoch == storage0  # (as the ndarrays: bound, and no storage changed since)
        for i in range(self.nbuf):
            kind = self.bkind[i]
            if kind == B_FIELD and not fields_bound:
                v = self.bobj[i]
                a = v._arr
                if v._mirror is not None or not cnp.PyArray_CheckExact(a) or not self._bind(i, a):
                    return MISS
            elif kind == B_TEMP:
                a = self.bobj[i]
                memset(cnp.PyArray_DATA(<cnp.ndarray>a), 0, cnp.PyArray_NBYTES(<cnp.ndarray>a))
                self._bind(i, a)
        self.fields_epoch = storage0
        if self.ad_hook is not None and not self._adstack(args):
            return MISS
        self.st.reset(self.seed, _next_id(), self.nthreads)
        for i in range(self.ntasks):
            if self.tserial[i]:
                rc = self.st.native_serial(self.tfn[i], i)
            else:
                rc = self.st.native_range(self.tprologue[i], self.tfn[i], i, self.tminpar[i])
            if rc != RC_DONE:
                break
        self.launches += 1
        self._bump(args)
        if self.printlen[0] or self.status[STATUS_DROPPED]:
            self.on_prints()
        if rc == RC_FAILED or rc < 0 or self.status[STATUS_FLAG]:
            self.on_failure(rc, args)
        if rc == RC_INTERRUPTED:  # a signal handler raised during the launch (Ctrl-C): the kernel stopped early
            raise self.st.interruption()
        return self._returns()

    cdef object _device(self, tuple args):
        """A GPU tier's launch: the arguments that are launch arguments (templates are not), to its launcher."""
        cdef Py_ssize_t i
        launch_args = [args[i] for i in range(self.nparams) if self.pkind[i] != P_TEMPLATE]
        self.launches += 1
        r = self.device_run(launch_args)
        return r if self.restructure is None else self.restructure(r)

    cdef inline void _bump(self, tuple args):
        """Generation counters of the qd ndarrays and fields the kernel may have written."""
        cdef Py_ssize_t i
        for i in range(self.nparams):
            if self.pwritten[i]:
                v = args[i]
                if not cnp.PyArray_CheckExact(v):  # a qd ndarray
                    v.generation += 1
        for v in self.bumped_fields:
            v.generation += 1

    cdef inline object _returns(self):
        cdef Py_ssize_t i
        if self.nrets == 0:
            r = None
        elif self.nrets == 1:
            r = decode(self.rcode[0], self.rets[0])
        else:
            r = tuple([decode(self.rcode[i], self.rets[i]) for i in range(self.nrets)])
        return r if self.restructure is None else self.restructure(r)


cdef inline uint64_t _next_id() noexcept:
    global _launch_id
    cdef uint64_t r = _launch_id
    _launch_id += 1
    return r


cdef inline bint _frozen(object x):
    """Whether `x` is an instance of a frozen dataclass."""
    params = getattr(type(x), "__dataclass_params__", None)
    return params is not None and bool(getattr(params, "frozen", False))


# ---------------------------------------------------------------------------------------------------------------
# The CUDA tier's launch in C
include "_launch_cuda.pxi"
