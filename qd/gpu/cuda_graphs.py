"""CUDA graphs of the C launcher (DESIGN §10): `qd.graph.do_while` loops kept on the device (a conditional WHILE
node), and `@qd.kernel(graph=True)` kernels launched whole.

Without it, the C launcher (`qd._launch.CudaRunner`) runs a loop's tasks, waits for the stream and reads the loop's
counter after every iteration: the host never runs ahead of the device (Genesis' constraint solve, one such loop a
step, made its CUDA steps 1.1-1.7x Quadrants', whose loops stay on the device). Here a loop is one graph launch: a
WHILE node whose condition is 1 at every launch (a do-while: the body runs once before the first test), and whose
body is the loop's task kernels, then `qd_loop_cond`, a one-thread kernel that sets the condition to "the counter is
nonzero and no failure was recorded" with `cudaGraphSetConditional` (CUDA's device runtime, `libcudadevrt.a`,
linked in by the driver's linker).

The graph's kernels read their Ctx from a slot of the runner's own (the launcher copies the launch's slot there
before each graph launch) with a random key of 0 (the frontend refuses `qd.random` in a do_while loop). Nested
loops stay task by task. The graph is made again when the counter's device address or a task's grid changes. A
failure recorded in the loop ends the loop (the tasks after it still run; the error is raised at the next sync, as
for any launch).

A `@qd.kernel(graph=True)` kernel (Genesis' step kernels, as in Quadrants) is one graph: its tasks a chain of kernel
nodes, its loops conditional nodes in the chain, so a call is one `cuGraphLaunch` instead of a `cuLaunchKernel` per
task (Genesis' rigid step: ~115 task launches in six calls). Not where a task draws `qd.random` (a graph replays one
key), where a loop nests in another, or where grids keep changing (made again at most `MAX_REMAKES` times; then
task by task): those launch task by task, as without `graph=True`.

`unavailable(drv)` says why graphs cannot be used (the driver predates conditional nodes, CUDA 12.4; no
`libcudadevrt.a`: CUDA_HOME, /usr/local/cuda; `QD_CUDA_GRAPH_LOOPS=0`); loops then wait for the stream as before.
"""

from __future__ import annotations

import ctypes
import glob
import os
from ctypes import POINTER, byref, c_int, c_uint, c_uint64, c_void_p
from typing import Any

from qd.base.abi import STATUS_FLAG
from qd.gpu.cuda_driver import CudaError, _log_options, check

CU_GRAPH_NODE_TYPE_CONDITIONAL = 13
CU_GRAPH_COND_TYPE_WHILE = 1
CU_GRAPH_COND_ASSIGN_DEFAULT = 1
CU_JIT_INPUT_PTX = 1
CU_JIT_INPUT_LIBRARY = 4
MIN_DRIVER = 12040  # conditional WHILE nodes


class _KernelParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", c_void_p), ("gridDimX", c_uint), ("gridDimY", c_uint), ("gridDimZ", c_uint),
                ("blockDimX", c_uint), ("blockDimY", c_uint), ("blockDimZ", c_uint), ("sharedMemBytes", c_uint),
                ("kernelParams", POINTER(c_void_p)), ("extra", POINTER(c_void_p)), ("kern", c_void_p),
                ("ctx", c_void_p)]


class _CondParams(ctypes.Structure):  # CUDA_CONDITIONAL_NODE_PARAMS
    _fields_ = [("handle", c_uint64), ("type", c_int), ("size", c_uint), ("phGraph_out", POINTER(c_void_p)),
                ("ctx", c_void_p)]


class _NodeParams(ctypes.Structure):  # CUgraphNodeParams: the type, then a 232-byte union, then a reserved word
    _fields_ = [("type", c_int), ("reserved0", c_int * 3), ("conditional", _CondParams),
                ("rest", ctypes.c_longlong * 25), ("reserved2", ctypes.c_longlong)]


_PROTOS = {
    "cuGraphCreate": (POINTER(c_void_p), c_uint),
    "cuGraphDestroy": (c_void_p,),
    "cuGraphConditionalHandleCreate": (POINTER(c_uint64), c_void_p, c_void_p, c_uint, c_uint),
    "cuGraphAddNode": (POINTER(c_void_p), c_void_p, POINTER(c_void_p), ctypes.c_size_t, POINTER(_NodeParams)),
    "cuGraphAddKernelNode_v2": (POINTER(c_void_p), c_void_p, POINTER(c_void_p), ctypes.c_size_t,
                                POINTER(_KernelParams)),
    "cuGraphInstantiateWithFlags": (POINTER(c_void_p), c_void_p, ctypes.c_ulonglong),
    "cuGraphExecDestroy": (c_void_p,),
    "cuGraphLaunch": (c_void_p, c_void_p),
    "cuLinkAddFile_v2": (c_void_p, c_int, ctypes.c_char_p, c_uint, c_void_p, c_void_p),
}

_COND_PTX = """.version 8.0
.target {arch}
.address_size 64
.extern .func cudaGraphSetConditional(.param .b64 handle, .param .b32 value);
.visible .entry qd_loop_cond(.param .u64 counter, .param .u32 nbytes, .param .u64 status, .param .u64 handle)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [counter];
    ld.param.u32 %r1, [nbytes];
    ld.param.u64 %rd2, [status];
    ld.param.u64 %rd3, [handle];
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
NEXT:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    cvt.u64.u32 %rd4, %r2;
    add.u64 %rd5, %rd1, %rd4;
    ld.volatile.global.u8 %r4, [%rd5];
    or.b32 %r3, %r3, %r4;
    add.u32 %r2, %r2, 1;
    bra NEXT;
DONE:
    ld.volatile.global.u64 %rd6, [%rd2];
    setp.ne.u32 %p2, %r3, 0;
    setp.eq.u64 %p3, %rd6, 0;
    and.pred %p2, %p2, %p3;
    selp.u32 %r5, 1, 0, %p2;
    {{
    .param .b64 param0;
    .param .b32 param1;
    st.param.b64 [param0], %rd3;
    st.param.b32 [param1], %r5;
    call.uni cudaGraphSetConditional, (param0, param1);
    }}
    ret;
}}
"""


def devrt_path() -> str | None:
    """CUDA's device runtime library (`libcudadevrt.a`), or None."""
    for root in filter(None, (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda")):
        hits = sorted(glob.glob(os.path.join(root, "lib64", "libcudadevrt.a")))
        if hits:
            return hits[-1]
    return None


def unavailable(drv: Any, loops: bool = True) -> str | None:
    """Why graphs cannot be used on this driver (None: they can); `loops`: graphs holding `qd.graph.do_while` loops
    (conditional nodes and the device runtime), else kernel nodes only."""
    if os.environ.get("QD_CUDA_GRAPH_LOOPS", "1") == "0":
        return "QD_CUDA_GRAPH_LOOPS=0"
    if loops and drv.version < MIN_DRIVER:
        return f"the driver ({drv.version}) predates conditional graph nodes (CUDA 12.4)"
    if loops and devrt_path() is None:
        return "no libcudadevrt.a (the CUDA toolkit's device runtime; set CUDA_HOME)"
    try:
        for name, args in _PROTOS.items():
            fn = getattr(drv.lib, name)
            fn.argtypes, fn.restype = list(args), c_int
    except AttributeError as e:
        return f"the driver lacks {e}"
    return None


def _cond_function(drv: Any, arch: str) -> c_void_p:
    """`qd_loop_cond`, linked with the device runtime, loaded once per driver."""
    fn = getattr(drv, "_qd_loop_cond", None)
    if fn is not None:
        return fn
    lib = drv.lib
    drv.enter()
    log, opts, vals = _log_options()
    state = c_void_p()
    check(lib.cuLinkCreate_v2(2, opts, vals, byref(state)), "cuLinkCreate")
    try:
        ptx = _COND_PTX.format(arch=arch).encode()
        rc = lib.cuLinkAddData_v2(state, CU_JIT_INPUT_PTX, ptx, len(ptx), b"qd_loop_cond.ptx", 0, None, None)
        if not rc:
            rc = lib.cuLinkAddFile_v2(state, CU_JIT_INPUT_LIBRARY, devrt_path().encode(), 0, None, None)
        if rc:
            raise CudaError(f"CUDA could not link the loop condition kernel: {log.value.decode(errors='replace')}")
        out, size = c_void_p(), ctypes.c_size_t()
        check(lib.cuLinkComplete(state, byref(out), byref(size)), "cuLinkComplete")
        module = drv.load_module(ctypes.string_at(out, size.value))
    finally:
        lib.cuLinkDestroy(state)
    fn = c_void_p()
    check(lib.cuModuleGetFunction(byref(fn), module, b"qd_loop_cond"), "cuModuleGetFunction(qd_loop_cond)")
    drv._qd_loop_cond = fn
    return fn


class KernelGraph:
    """An instantiated graph (`exec`) of a run of a kernel's tasks, made for given task grids and counter addresses:
    a chain of kernel nodes in launch order, where a `qd.graph.do_while` loop is a conditional WHILE node whose body
    chains the loop's tasks and `qd_loop_cond`. A loop alone is what the C launcher makes for a loop; a whole
    `@qd.kernel(graph=True)` kernel, tasks and loops, is one such graph (one `cuGraphLaunch` a call)."""

    def __init__(self, drv: Any, arch: str, items: list, ctx_addr: int, status: int) -> None:
        """`items`, in order: ("task", function, block, grid, dynamic shared bytes) or ("loop", its tasks as
        (function, block, grid, shared), counter address, counter bytes); `ctx_addr`: the device address of the Ctx
        the kernels read; `status`: the device address of the status words (a failure recorded ends a loop)."""
        self.drv, lib = drv, drv.lib
        drv.enter()
        self.graph, self.exec = c_void_p(), c_void_p()
        check(lib.cuGraphCreate(byref(self.graph), 0), "cuGraphCreate")
        ctx_word, key = c_uint64(ctx_addr), c_uint64(0)
        task_args = (c_void_p * 2)(ctypes.addressof(ctx_word), ctypes.addressof(key))
        prev = None
        try:
            for item in items:
                if item[0] == "task":
                    prev = self._kernel(self.graph, prev, (c_void_p(item[1]), *item[2:], task_args))
                else:
                    prev = self._loop(prev, arch, item, task_args, status)
            check(lib.cuGraphInstantiateWithFlags(byref(self.exec), self.graph, 0), "cuGraphInstantiate")
        except BaseException:
            self.close()
            raise

    def _kernel(self, graph: Any, prev: Any, kernel: tuple) -> c_void_p:
        """A kernel node of `graph` after `prev` (None: a root): `kernel` = (function, block, grid, shared, args)."""
        fn, block, grid, shared, args = kernel
        kp = _KernelParams(func=fn, gridDimX=max(1, grid), gridDimY=1, gridDimZ=1, blockDimX=block, blockDimY=1,
                           blockDimZ=1, sharedMemBytes=shared, kernelParams=ctypes.cast(args, POINTER(c_void_p)),
                           extra=None, kern=None, ctx=None)
        node = c_void_p()
        deps = (c_void_p * 1)(prev) if prev is not None else None
        check(self.drv.lib.cuGraphAddKernelNode_v2(byref(node), graph, deps, 1 if deps else 0, byref(kp)),
              "cuGraphAddKernelNode")
        return node

    def _loop(self, prev: Any, arch: str, item: tuple, task_args: Any, status: int) -> c_void_p:
        """A conditional WHILE node of the graph after `prev`, set to 1 at every launch (a do-while), whose body
        runs the loop's tasks, then `qd_loop_cond`."""
        lib, drv = self.drv.lib, self.drv
        _, tasks, counter, nbytes = item
        handle = c_uint64()
        check(lib.cuGraphConditionalHandleCreate(byref(handle), self.graph, drv.ctx, 1, CU_GRAPH_COND_ASSIGN_DEFAULT),
              "cuGraphConditionalHandleCreate")
        params = _NodeParams()
        params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL
        params.conditional.handle, params.conditional.type = handle.value, CU_GRAPH_COND_TYPE_WHILE
        params.conditional.size, params.conditional.ctx = 1, drv.ctx
        node = c_void_p()
        deps = (c_void_p * 1)(prev) if prev is not None else None
        check(lib.cuGraphAddNode(byref(node), self.graph, deps, 1 if deps else 0, byref(params)),
              "cuGraphAddNode(conditional)")
        body = params.conditional.phGraph_out[0]  # (the driver's array of the node's body graphs)
        cond_words = (c_uint64(counter), c_uint(nbytes), c_uint64(status + 8 * STATUS_FLAG), c_uint64(handle.value))
        cond_args = (c_void_p * 4)(*(ctypes.addressof(w) for w in cond_words))
        last = None
        for fn, block, grid, shared in tasks:
            last = self._kernel(body, last, (c_void_p(fn), block, grid, shared, task_args))
        self._kernel(body, last, (_cond_function(drv, arch), 1, 1, 0, cond_args))
        return node

    def close(self) -> None:
        """Frees the graph (an instance still running is freed when it completes)."""
        if self.exec or self.graph:
            self.drv.enter()
            if self.exec:
                self.drv.lib.cuGraphExecDestroy(self.exec)
            if self.graph:
                self.drv.lib.cuGraphDestroy(self.graph)
            self.exec = self.graph = c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110  (interpreter shutdown)
            pass
