# The CUDA tier's launch in C (`CudaRunner`): included by qd/_launch.pyx, whose names it uses (the plan, the
# ABI's words, `scalar_bits`); split out for size. `import`s and `cimport`s are qd/_launch.pyx's.

ctypedef int (*cu_launch_t)(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                            unsigned shmem, void* stream, void** params, void** extra) noexcept nogil
ctypedef int (*cu_htod_t)(uint64_t dst, const void* src, size_t n, void* stream) noexcept nogil
ctypedef int (*cu_record_t)(void* ev, void* stream) noexcept nogil
ctypedef int (*cu_event_t)(void* ev) noexcept nogil
ctypedef int (*cu_memset8_t)(uint64_t dst, unsigned char v, size_t n, void* stream) noexcept nogil
ctypedef int (*cu_stream_sync_t)(void* stream) noexcept nogil
ctypedef int (*cu_dtoh_t)(void* dst, uint64_t src, size_t n) noexcept nogil
ctypedef int (*cu_graph_launch_t)(void* graph_exec, void* stream) noexcept nogil

DEF TIMING_EVERY = 32  # a launch in this many records the program's timing events (`kernel.stats["device_ms"]`)
DEF MAX_REMAKES = 16  # a whole-kernel graph made this many times (grids keep changing): its tasks launch one by one


cdef class CudaRunner:
    """A CUDA kernel instance's launch from a `Plan` without Python (`qd/runtime/device_launch.py`'s
    `cuda_runner` builds it where the instance allows: fields and qd ndarrays only, no prints, returns, adstacks
    or debug checks).

    At every call it checks that each buffer's device copy is current (the Python path uploads when not, and
    the call goes there), packs the context words into a local array and compares them with those the current
    slot's device twin holds: equal (the same arrays and scalars as the last launch), nothing is copied; else
    the next slot of a ring of pinned host slots is filled and copied to its own twin (a slot is reused after
    the event recorded when it was left). Then one `cuLaunchKernel` per task with (the twin's Ctx, the task's
    random key), the generation counters of the buffers the kernel writes, and the device copies marked newer.

    Its kernels record a failure into status words of their own in mapped pinned memory: the runtime reads
    them at `qd.sync()` (`collect`, through the runtime's list of runners with launches since), and a launch
    seeing a failure recorded goes through the Python path, which syncs and raises it.

    A kernel with `qd.graph.do_while` loops (`KernelIR.task_loops`) runs its tasks in the order `ir.task_order`
    gives. A loop that may be a CUDA graph (`qd/gpu/cuda_graphs.py`: no loop nests in it or around it) is one graph
    launch, its condition tested on the device: the launch's slot is first copied to the graphs' own slot (`gslot`),
    and the graph is made (`make_graph`) at its first launch and again when its counter's address or a task's grid
    changed. Otherwise, after a loop's last task the stream is waited for and the loop's counter read from the
    device; a failure recorded by then ends the launch there (raised at the next sync, as any other).

    A `@qd.kernel(graph=True)` kernel that may be one graph (`make_whole` given) launches as one: its tasks and loops
    in one graph reading the graphs' slot, made at the first launch and again when a grid or a loop counter's
    address changed, up to `MAX_REMAKES` times; after that, or when it cannot be made, task by task as above."""

    cdef object rt
    cdef object check            # (code, what) -> raises CudaError
    cdef object enter            # makes the context current in the calling thread
    cdef object regrid           # (launch args, shapes) -> grids, when a value the grids read changed
    cdef object on_error         # (status words) -> the exception to raise
    cdef object keep             # the pinned slots, twins, status words and events (kept alive)
    cdef cu_launch_t cu_launch
    cdef cu_htod_t cu_htod
    cdef cu_record_t cu_record
    cdef cu_event_t cu_event_sync
    cdef cu_memset8_t cu_memset8
    cdef cu_stream_sync_t cu_stream_sync
    cdef cu_dtoh_t cu_dtoh
    cdef void* stream
    cdef unsigned long thread
    # tasks
    cdef Py_ssize_t ntasks
    cdef void** fns
    cdef unsigned* grids
    cdef unsigned* blocks
    cdef unsigned* shmem          # per task: the dynamic shared memory its launch asks for
    # `qd.graph.do_while` loops: per loop its first task, counter buffer and counter bytes; per task the loops
    # ending there (innermost first: `ends[end_at[i]:end_at[i + 1]]`)
    cdef Py_ssize_t nloops
    cdef int* loop_first
    cdef int* loop_cond
    cdef int* loop_nbytes
    cdef int* end_at
    cdef int* ends
    # loops as CUDA graphs: per task the graph loop starting there (-1: none); per loop its end, graph (NULL: not
    # made yet), and the counter address it was made for; per task the grid its graph was made for
    cdef int* graph_at
    cdef int* loop_end
    cdef void** gexec
    cdef uint64_t* gcounter
    cdef unsigned* ggrids
    cdef uint64_t gslot
    cdef long long slot_gen, gslot_gen
    cdef object make_graph
    cdef cu_graph_launch_t cu_graph_launch
    cdef public long long graph_launches
    cdef public bint last_graph  # the last launch was one graph of the whole kernel
    # the whole kernel as one graph: its exec (NULL: not made), the grids and loop counter addresses it was made for
    cdef object make_whole
    cdef bint whole
    cdef void* wexec
    cdef unsigned* wgrids
    cdef uint64_t* wcounter
    cdef int wmade
    # buffers
    cdef Py_ssize_t nbuf
    cdef int* bsrc               # S_FIELD, S_TEMP, or the parameter the buffer is
    cdef int* bwritten
    cdef list bowner             # field owners
    cdef list bmirror            # per buffer: the mirror its address and extents were read from
    cdef uint64_t* baddr
    cdef int64_t* bshape
    cdef uint64_t* tbytes        # temps: their size (zeroed at every launch)
    # context words
    cdef Py_ssize_t nwords, ctx0
    cdef int* wkind
    cdef uint64_t* wa
    cdef int* wb
    cdef uint64_t* words         # the words being packed
    # grid leaves: (kind 0 arg / 1 shape, a, b) and their values at the last launch
    cdef Py_ssize_t nleaves
    cdef int* lkind
    cdef int* la
    cdef int* lb
    cdef int64_t* lval
    cdef bint leaves_known
    # ring of slots
    cdef Py_ssize_t nring, cur
    cdef uint64_t** host
    cdef uint64_t* twin
    cdef void** events
    cdef int* recorded
    cdef bint cur_valid
    cdef int64_t* status
    cdef uint64_t status_dev
    cdef Py_ssize_t nstatus
    cdef void* ev_start
    cdef void* ev_end
    cdef public long long launches
    cdef public bint active      # launched since the runtime last collected its status

    def __cinit__(self):
        self.launches = 0
        self.active = False

    def __dealloc__(self):
        free(self.fns); free(self.grids); free(self.blocks); free(self.shmem)
        free(self.bsrc); free(self.bwritten); free(self.baddr)
        free(self.bshape); free(self.tbytes); free(self.wkind); free(self.wa); free(self.wb); free(self.words)
        free(self.lkind); free(self.la); free(self.lb); free(self.lval); free(self.host); free(self.twin)
        free(self.events); free(self.recorded)
        free(self.loop_first); free(self.loop_cond); free(self.loop_nbytes); free(self.end_at); free(self.ends)
        free(self.graph_at); free(self.loop_end); free(self.gexec); free(self.gcounter); free(self.ggrids)
        free(self.wgrids); free(self.wcounter)

    def __init__(self, object rt, dict fnptrs, uint64_t stream, object check, object enter, list tasks,
                 list buffers, list words, Py_ssize_t ctx0, list leaves, object regrid, list ring, tuple status,
                 tuple timing, object on_error, object keep, list loops=None, uint64_t gslot=0,
                 object make_graph=None, object make_whole=None):
        """`fnptrs`: driver function addresses by name; `tasks`: (function, block, grid, dynamic shared bytes);
        `buffers`: (source, written, field owner or temp bytes); `words`: (kind, a, b) per slot word from `ctx0` on;
        `leaves`: (0, launch arg, 0) / (1, buffer, axis) the grids read (`regrid` recomputes them); `ring`:
        (host pointer, twin address, event) per slot; `status`: (host pointer, device address, words); `timing`: the
        program's (start, end) events; `loops`: (first task, end task, counter buffer, counter bytes, may be a graph)
        per `qd.graph.do_while` loop, outer loops first; `gslot`: the device slot the loops' graphs read (0: no
        graphs); `make_graph(loop, grids, counter address, Ctx address)`: a loop's graph exec handle (0: it cannot be
        one; the loop then waits for the stream); `make_whole(grids, loop counter addresses, Ctx address)`: the
        whole kernel's (None: the kernel launches task by task)."""
        cdef Py_ssize_t i
        self.rt, self.check, self.enter, self.regrid, self.on_error, self.keep = rt, check, enter, regrid, on_error, keep
        self.cu_launch = <cu_launch_t><size_t>fnptrs["cuLaunchKernel"]
        self.cu_htod = <cu_htod_t><size_t>fnptrs["cuMemcpyHtoDAsync_v2"]
        self.cu_record = <cu_record_t><size_t>fnptrs["cuEventRecord"]
        self.cu_event_sync = <cu_event_t><size_t>fnptrs["cuEventSynchronize"]
        self.cu_memset8 = <cu_memset8_t><size_t>fnptrs["cuMemsetD8Async"]
        self.cu_stream_sync = <cu_stream_sync_t><size_t>fnptrs["cuStreamSynchronize"]
        self.cu_dtoh = <cu_dtoh_t><size_t>fnptrs["cuMemcpyDtoH_v2"]
        self.cu_graph_launch = <cu_graph_launch_t><size_t>fnptrs.get("cuGraphLaunch", 0)
        self.gslot, self.make_graph = gslot, make_graph
        self.slot_gen, self.gslot_gen, self.graph_launches = 0, -1, 0
        self.stream = <void*><size_t>stream
        self.thread = 0
        self.ntasks = len(tasks)
        self.fns = <void**>calloc(self.ntasks + 1, sizeof(void*))
        self.grids = <unsigned*>calloc(self.ntasks + 1, sizeof(unsigned))
        self.blocks = <unsigned*>calloc(self.ntasks + 1, sizeof(unsigned))
        self.shmem = <unsigned*>calloc(self.ntasks + 1, sizeof(unsigned))
        for i, (fn, block, grid, shared) in enumerate(tasks):
            self.fns[i], self.blocks[i], self.grids[i] = <void*><size_t>fn, block, max(1, grid)
            self.shmem[i] = shared
        self._set_loops(loops or [])
        self.make_whole, self.wexec, self.wmade, self.last_graph = make_whole, NULL, 0, False
        self.whole = make_whole is not None and gslot != 0 and self.cu_graph_launch != NULL
        self.wgrids = <unsigned*>calloc(self.ntasks + 1, sizeof(unsigned))
        self.wcounter = <uint64_t*>calloc(self.nloops + 1, sizeof(uint64_t))
        self.nbuf = len(buffers)
        self.bsrc = <int*>calloc(self.nbuf + 1, sizeof(int))
        self.bwritten = <int*>calloc(self.nbuf + 1, sizeof(int))
        self.baddr = <uint64_t*>calloc(self.nbuf + 1, sizeof(uint64_t))
        self.bshape = <int64_t*>calloc((self.nbuf + 1) * MAX_NDIM, sizeof(int64_t))
        self.tbytes = <uint64_t*>calloc(self.nbuf + 1, sizeof(uint64_t))
        self.bowner, self.bmirror = [], [None] * self.nbuf
        for i, (src, written, what) in enumerate(buffers):
            self.bsrc[i], self.bwritten[i] = src, written
            self.bowner.append(what if src == S_FIELD else None)
            if src == S_TEMP:
                self.baddr[i], self.tbytes[i], shape = what
                for k, n in enumerate(shape):
                    self.bshape[i * MAX_NDIM + k] = n
        self.ctx0, self.nwords = ctx0, ctx0 + len(words)
        self.wkind = <int*>calloc(self.nwords + 1, sizeof(int))
        self.wa = <uint64_t*>calloc(self.nwords + 1, sizeof(uint64_t))
        self.wb = <int*>calloc(self.nwords + 1, sizeof(int))
        self.words = <uint64_t*>calloc(self.nwords + 1, sizeof(uint64_t))
        for i, (kind, a, b) in enumerate(words):
            self.wkind[ctx0 + i], self.wa[ctx0 + i], self.wb[ctx0 + i] = kind, <uint64_t>a, b
        self.nleaves = len(leaves)
        self.lkind = <int*>calloc(self.nleaves + 1, sizeof(int))
        self.la = <int*>calloc(self.nleaves + 1, sizeof(int))
        self.lb = <int*>calloc(self.nleaves + 1, sizeof(int))
        self.lval = <int64_t*>calloc(self.nleaves + 1, sizeof(int64_t))
        for i, (kind, a, b) in enumerate(leaves):
            self.lkind[i], self.la[i], self.lb[i] = kind, a, b
        self.leaves_known = False
        self.nring = len(ring)
        self.host = <uint64_t**>calloc(self.nring + 1, sizeof(uint64_t*))
        self.twin = <uint64_t*>calloc(self.nring + 1, sizeof(uint64_t))
        self.events = <void**>calloc(self.nring + 1, sizeof(void*))
        self.recorded = <int*>calloc(self.nring + 1, sizeof(int))
        for i, (h, d, ev) in enumerate(ring):
            self.host[i], self.twin[i], self.events[i] = <uint64_t*><size_t>h, d, <void*><size_t>ev
        self.cur, self.cur_valid = 0, False
        self.status = <int64_t*><size_t>status[0]
        self.status_dev, self.nstatus = status[1], status[2]
        self.ev_start, self.ev_end = <void*><size_t>timing[0], <void*><size_t>timing[1]

    cdef void _set_loops(self, list loops):
        cdef Py_ssize_t i, j, n = 0
        self.nloops = len(loops)
        self.loop_first = <int*>calloc(self.nloops + 1, sizeof(int))
        self.loop_cond = <int*>calloc(self.nloops + 1, sizeof(int))
        self.loop_nbytes = <int*>calloc(self.nloops + 1, sizeof(int))
        self.end_at = <int*>calloc(self.ntasks + 2, sizeof(int))
        self.ends = <int*>calloc(self.nloops + 1, sizeof(int))
        self.graph_at = <int*>calloc(self.ntasks + 1, sizeof(int))
        self.loop_end = <int*>calloc(self.nloops + 1, sizeof(int))
        self.gexec = <void**>calloc(self.nloops + 1, sizeof(void*))
        self.gcounter = <uint64_t*>calloc(self.nloops + 1, sizeof(uint64_t))
        self.ggrids = <unsigned*>calloc(self.ntasks + 1, sizeof(unsigned))
        for i in range(self.ntasks):
            self.graph_at[i] = -1
        for j, (first, end, cond, nbytes, graph) in enumerate(loops):
            self.loop_first[j], self.loop_cond[j], self.loop_nbytes[j] = first, cond, min(8, nbytes)
            self.loop_end[j] = end
            if graph and self.gslot and self.cu_graph_launch != NULL and end > first:
                self.graph_at[first] = j
        for i in range(self.ntasks):  # at a shared last task the innermost loop (listed after its outer one) first
            self.end_at[i] = n
            for j in reversed(range(self.nloops)):
                first, end = loops[j][0], loops[j][1]
                if end > first and end - 1 == i:
                    self.ends[n] = j
                    n += 1
        self.end_at[self.ntasks] = n

    cdef int _after(self, Py_ssize_t i) except -2:
        """The task after task `i`: a loop's first task while its counter is nonzero, else i + 1; -1 when a task
        recorded a failure (the launch stops there)."""
        cdef Py_ssize_t k
        cdef int lp
        cdef uint64_t v
        for k in range(self.end_at[i], self.end_at[i + 1]):
            lp = self.ends[k]
            self._call(self.cu_stream_sync(self.stream), "cuStreamSynchronize")
            if self.status[STATUS_FLAG] != 0:
                return -1
            v = 0
            self._call(self.cu_dtoh(&v, self.baddr[self.loop_cond[lp]], self.loop_nbytes[lp]), "cuMemcpyDtoH")
            if v != 0:
                return self.loop_first[lp]
        return <int>(i + 1)

    cdef bint _graph_loop(self, int lp) except -1:
        """Launches loop `lp` as its graph (made or made again where needed); False when it cannot be one (it is
        then run task by task from now on)."""
        cdef Py_ssize_t t, first = self.loop_first[lp], end = self.loop_end[lp]
        cdef uint64_t counter = self.baddr[self.loop_cond[lp]]
        cdef bint fresh = self.gexec[lp] != NULL and self.gcounter[lp] == counter
        for t in range(first, end):
            fresh = fresh and self.ggrids[t] == self.grids[t]
        if not fresh:
            ex = self.make_graph(lp, [self.grids[t] for t in range(first, end)], counter,
                                 self.gslot + 8 * self.ctx0)
            if not ex:
                self.graph_at[first] = -1
                return False
            self.gexec[lp], self.gcounter[lp] = <void*><size_t>ex, counter
            for t in range(first, end):
                self.ggrids[t] = self.grids[t]
        if self.gslot_gen != self.slot_gen:  # (the slot's words changed since the graphs' slot was filled)
            self._call(self.cu_htod(self.gslot, self.host[self.cur], 8 * self.nwords, self.stream),
                       "cuMemcpyHtoDAsync")
            self.gslot_gen = self.slot_gen
        self._call(self.cu_graph_launch(self.gexec[lp], self.stream), "cuGraphLaunch")
        self.graph_launches += 1
        return True

    @property
    def has_graph(self):
        """A graph of the whole kernel is made (Quadrants' graph cache counts these)."""
        return self.wexec != NULL

    @property
    def graph_builds(self):
        """How many times the whole kernel's graph was made."""
        return self.wmade

    cdef bint _whole_graph(self) except -1:
        """Launches the kernel as its graph (made, or made again where needed); False when it cannot be one (it then
        launches task by task from now on)."""
        cdef Py_ssize_t t, j
        cdef bint fresh = self.wexec != NULL
        for t in range(self.ntasks):
            fresh = fresh and self.wgrids[t] == self.grids[t]
        for j in range(self.nloops):
            fresh = fresh and self.wcounter[j] == self.baddr[self.loop_cond[j]]
        if not fresh:
            ex = 0
            if self.wmade < MAX_REMAKES:
                ex = self.make_whole([self.grids[t] for t in range(self.ntasks)],
                                     [self.baddr[self.loop_cond[j]] for j in range(self.nloops)],
                                     self.gslot + 8 * self.ctx0)
            if not ex:
                self.whole, self.wexec = False, NULL
                return False
            self.wexec, self.wmade = <void*><size_t>ex, self.wmade + 1
            for t in range(self.ntasks):
                self.wgrids[t] = self.grids[t]
            for j in range(self.nloops):
                self.wcounter[j] = self.baddr[self.loop_cond[j]]
        if self.gslot_gen != self.slot_gen:  # (the slot's words changed since the graphs' slot was filled)
            self._call(self.cu_htod(self.gslot, self.host[self.cur], 8 * self.nwords, self.stream),
                       "cuMemcpyHtoDAsync")
            self.gslot_gen = self.slot_gen
        self._call(self.cu_graph_launch(self.wexec, self.stream), "cuGraphLaunch")
        self.graph_launches += 1
        return True

    cdef inline bint _call(self, int rc, str what) except False:
        if rc != 0:
            self.check(rc, what)
        return True

    cdef bint _bind(self, Plan plan, tuple args) except -1:
        """Reads each buffer's device address and extents (from its mirror, when the mirror changed); False
        when a device copy is missing or older than the host copy (the Python path uploads it)."""
        cdef Py_ssize_t b, k
        cdef int src
        cdef tuple shape
        for b in range(self.nbuf):
            src = self.bsrc[b]
            if src == S_TEMP:
                continue
            owner = self.bowner[b] if src == S_FIELD else args[src]
            if cnp.PyArray_CheckExact(owner):  # a numpy array: copied in (and back) by the Python path
                return False
            m = owner._mirror
            if m is None or owner.escaped or m.host_dirty:
                return False
            if m is not self.bmirror[b]:
                arr = owner._arr
                if m.rt is not self.rt or m.nbytes != arr.nbytes or cnp.PyArray_NDIM(<cnp.ndarray>arr) > MAX_NDIM:
                    return False
                shape = arr.shape
                self.baddr[b] = m.buf.address
                for k in range(MAX_NDIM):
                    self.bshape[b * MAX_NDIM + k] = shape[k] if k < len(shape) else 0
                self.bmirror[b] = m
        return True

    cdef void _pack(self, Plan plan, Py_ssize_t slot) noexcept:
        cdef Py_ssize_t i
        cdef int kind
        cdef uint64_t a
        for i in range(self.ctx0, self.nwords):
            kind, a = self.wkind[i], self.wa[i]
            if kind == W_BUF:
                self.words[i] = self.baddr[a]
            elif kind == W_SHAPE:
                self.words[i] = <uint64_t>self.bshape[a * MAX_NDIM + self.wb[i]]
            elif kind == W_ARG:
                self.words[i] = plan.argwords[a]
            elif kind == W_STATUS:
                self.words[i] = self.status_dev + 8 * a
            elif kind == W_TWIN:
                self.words[i] = self.twin[slot] + 8 * a
            else:
                self.words[i] = a

    cdef bint _regrid(self, Plan plan, tuple args) except False:
        """The grids again when a scalar or extent they read changed since the last launch."""
        cdef Py_ssize_t i, k
        cdef int64_t v
        cdef bint same = self.leaves_known
        for i in range(self.nleaves):
            v = <int64_t>plan.argwords[self.la[i]] if self.lkind[i] == 0 else \
                self.bshape[self.la[i] * MAX_NDIM + self.lb[i]]
            if v != self.lval[i]:
                same = False
                self.lval[i] = v
        if same:
            return True
        launch_args = [args[i] for i in range(plan.nparams) if plan.pkind[i] != P_TEMPLATE]
        shapes = {i: tuple([self.bshape[i * MAX_NDIM + k] for k in range(MAX_NDIM)]) for i in range(self.nbuf)}
        for i, g in enumerate(self.regrid(launch_args, shapes)):
            self.grids[i] = max(1, g)
        self.leaves_known = True
        return True

    cdef bint run(self, Plan plan, tuple args) except -1:
        """Launches the instance (see the class docstring); False when this call must take the Python path."""
        cdef Py_ssize_t i, b, nxt
        cdef uint64_t ctx_addr, key
        cdef void* params[2]
        cdef unsigned long me = PyThread_get_thread_ident()
        cdef bint timing
        if self.status[STATUS_FLAG] != 0:  # an earlier launch failed: raised here, at the next launch
            self.rt.sync()
        if not self._bind(plan, args):
            return False
        if not self.rt.lock.acquire(False):  # another thread is in the runtime: the Python path waits its turn
            return False
        try:
            if me != self.thread:
                self.enter()
                self.thread = me
            if self.nleaves:
                self._regrid(plan, args)
            self._pack(plan, self.cur)
            if not self.cur_valid or memcmp(&self.words[self.ctx0], &self.host[self.cur][self.ctx0],
                                            8 * (self.nwords - self.ctx0)) != 0:
                self._next_slot(plan)
            for b in range(self.nbuf):
                if self.bsrc[b] == S_TEMP and self.tbytes[b]:
                    self._call(self.cu_memset8(self.baddr[b], 0, self.tbytes[b], self.stream), "cuMemsetD8Async")
            ctx_addr = self.twin[self.cur] + 8 * self.ctx0
            params[0], params[1] = &ctx_addr, &key
            timing = self.launches % TIMING_EVERY == 0
            if timing:
                self._call(self.cu_record(self.ev_start, self.stream), "cuEventRecord")
            launch = _next_id()
            self.last_graph = self.whole and self._whole_graph()
            i = self.ntasks if self.last_graph else 0
            while 0 <= i < self.ntasks:
                if self.graph_at[i] >= 0 and self._graph_loop(self.graph_at[i]):
                    i = self.loop_end[self.graph_at[i]]
                    continue
                key = qd_rng_key(plan.seed, launch, i, 0)
                self._call(self.cu_launch(self.fns[i], self.grids[i], 1, 1, self.blocks[i], 1, 1, self.shmem[i],
                                          self.stream, params, NULL), "cuLaunchKernel")
                i = self._after(i) if self.nloops else i + 1
            if timing:
                self._call(self.cu_record(self.ev_end, self.stream), "cuEventRecord")
            self.launches += 1
            if not self.active:
                self.active = True
                self.rt.runners.append(self)
        finally:
            self.rt.lock.release()
        for b in range(self.nbuf):
            if self.bwritten[b] and self.bsrc[b] != S_TEMP:
                owner = self.bowner[b] if self.bsrc[b] == S_FIELD else args[self.bsrc[b]]
                owner.generation += 1
                (<object>self.bmirror[b]).device_dirty = True
        return True

    cdef bint _next_slot(self, Plan plan) except False:
        """Moves to the next slot of the ring (waiting for its last launches, long done as a rule), fills it and
        copies it to its twin."""
        if self.cur_valid:
            self._call(self.cu_record(self.events[self.cur], self.stream), "cuEventRecord")
            self.recorded[self.cur] = 1
        self.cur = (self.cur + 1) % self.nring
        if self.recorded[self.cur]:
            self._call(self.cu_event_sync(self.events[self.cur]), "cuEventSynchronize")
            self.recorded[self.cur] = 0
        self._pack(plan, self.cur)
        memcpy(&self.host[self.cur][self.ctx0], &self.words[self.ctx0], 8 * (self.nwords - self.ctx0))
        self._call(self.cu_htod(self.twin[self.cur], self.host[self.cur], 8 * self.nwords, self.stream),
                   "cuMemcpyHtoDAsync")
        self.cur_valid = True
        self.slot_gen += 1
        return True

    def collect(self):
        """After the runtime synchronised: the error the kernels recorded since the last call (their status words
        cleared for the next), or None."""
        self.active = False
        if self.status[STATUS_FLAG] == 0:
            return None
        words = np.array([self.status[i] for i in range(self.nstatus)], dtype=np.int64)
        memset(self.status, 0, 8 * self.nstatus)
        return self.on_error(words)
