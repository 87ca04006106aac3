"""The Vulkan tier's backend for the device runtime (`qd/runtime/device.py`): an allocator, a copy engine
and a launcher over `qd/gpu/vulkan.py`, and the compiler from offloaded IR to pipelines (`qd/gpu/spirv.py`).

This is all a GPU tier adds (GPU.md §1): the runtime owns mirrors, launch slots, pending work and errors.
Memory: device-local buffers where the device has them (host-visible ones are mapped and copied by memcpy:
all of lavapipe's memory), staging buffers otherwise. A launch is one command buffer: a barrier, zero fills
of per-launch scratch, then one dispatch per task with barriers between, queued for submission (launches made
while the device is busy go out together: `Device.submit_recorded`).
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from qd import ir
from qd.gpu import spirv, spirv_cache
from qd.gpu.backend import DeviceBackend
from qd.gpu.spirv_float import FloatControls
from qd.gpu.spirv_simt import uses_subgroups
from qd.gpu.vulkan import Buffer, Device, Pipeline

_programs = itertools.count(1)


# llvmpipe (lavapipe) ends the loops of an invocation after 65535 iterations in all, without an error: the
# emitter counts iterations there and fails loudly first (`spirv.Caps.loop_limit`)
LLVMPIPE_LOOP_LIMIT = 65535
# llvmpipe drops the execution masks of loops and ifs nested deeper than this (gallivm's LP_MAX_TGSI_NESTING),
# silently: the emitter flattens deep ifs and refuses deep loops there (`spirv.Caps.max_nesting`)
LLVMPIPE_NESTING = 80


def _tuning(name: str, default: int) -> int:
    return int(os.environ.get(name, "") or default)


def _hide_zeros(llvmpipe: bool, fc: FloatControls, float64: bool) -> bool:
    """Whether constant float zeros are hidden from the driver under fast_math=False (`qd/gpu/spirv_float.py`):
    on llvmpipe, whose LLVM builder folds them whatever the float controls, and on a device that cannot preserve
    signed zeros, inf and NaN in every float width qd uses. `QD_VULKAN_HIDE_ZEROS=0|1` decides instead (to check
    a driver's own float controls: tests/gpu_checks/vulkan_specials.py)."""
    env = os.environ.get("QD_VULKAN_HIDE_ZEROS", "")
    if env:
        return env != "0"
    return llvmpipe or not all(w in fc.preserve for w in ((32, 64) if float64 else (32,)))


@dataclass
class Program:
    """A kernel instance compiled for one device: its SPIR-V kernel and one pipeline per task."""

    kernel: spirv.SpirvKernel
    pipelines: list[Pipeline]
    compile_ms: float = 0.0
    from_cache: bool = False
    queries: Any = None  # timestamp query pool (`VulkanBackend._queries`)
    serial: int = field(default_factory=lambda: next(_programs))


class VulkanBackend(DeviceBackend):
    name = "vulkan"

    def __init__(self) -> None:
        self.dev = Device()
        f = self.dev.features
        missing = [k for k in ("int64", "device_address") if not f[k]]
        if missing:
            raise RuntimeError(f"qd: Vulkan device {self.dev.name} lacks {', '.join(missing)} (shaderInt64 and "
                               f"bufferDeviceAddress are required by the vulkan tier)")
        limit = int(self.dev.props.limits.maxComputeWorkGroupCount[0])
        cpu = self.dev.props.deviceType == self.dev.vk.VK_PHYSICAL_DEVICE_TYPE_CPU
        llvmpipe = "llvmpipe" in self.dev.name
        fc = FloatControls(**f["float_controls"])
        lim = self.dev.props.limits
        self.subgroups = f["subgroups"]
        self.caps = spirv.Caps(float64=f["float64"], int64_atomics=f["int64_atomics"],
                               float32_atomic_add=f["float32_atomic_add"], float64_atomic_add=f["float64_atomic_add"],
                               subgroup_arith=f["subgroup_arith"],
                               loop_limit=LLVMPIPE_LOOP_LIMIT if llvmpipe else 0,
                               per_index_grid=cpu, float_controls=fc, hide_zeros=_hide_zeros(llvmpipe, fc, f["float64"]),
                               max_nesting=_tuning("QD_VULKAN_MAX_NESTING", LLVMPIPE_NESTING if llvmpipe else 0),
                               subgroup_ops=self.subgroups["ops"], shared_bytes=int(lim.maxComputeSharedMemorySize),
                               max_local_size=min(int(lim.maxComputeWorkGroupInvocations),
                                                  int(lim.maxComputeWorkGroupSize[0])),
                               shared_int64_atomics=f["shared_int64_atomics"])
        # `max_groups`: enough invocations to fill the device, for tasks that gain from running several indices
        # per invocation (reductions accumulate in registers, adstack rows) or whose range is unknown on the
        # host; the grid-stride loop covers the rest. `group_limit`: the grid of the other range tasks (on a
        # CPU device one invocation per index: few loop iterations each, see `loop_limit`).
        env = os.environ.get("QD_VULKAN_GROUPS", "")  # "max_groups,group_limit" (tuning)
        self.max_groups = min(limit, 8 * (os.cpu_count() or 2) if cpu else 4096)
        # measured on an H100 (W1 saxpy 2^28, clocks up): 8192 groups of 128 stream 2.7 TB/s; 32768 or one
        # invocation per index no faster
        self.group_limit = limit if cpu else min(limit, 8192)
        self.loop_limit = self.caps.loop_limit
        if env:
            self.max_groups, self.group_limit = (min(limit, int(x)) for x in env.split(","))
        self._staging: Buffer | None = None
        fam = self.dev.vk.vkGetPhysicalDeviceQueueFamilyProperties(self.dev.physical)[self.dev.family]
        self.timestamps = bool(fam.timestampValidBits) and bool(self.dev.props.limits.timestampComputeAndGraphics)
        self.tick_ns = float(self.dev.props.limits.timestampPeriod)

    def device_caps(self) -> dict[str, int]:
        """Quadrants' `DeviceCapability` values for this device as qd's SPIR-V uses it: 16-bit and float
        atomics are always there (CAS loops where the device has no native ones; f64 ones need 64-bit atomics)."""
        f = self.dev.features
        a64 = int(f["int64_atomics"])
        out = {"spirv_version=66304": 1, "spirv_version=66560": 1, "spirv_version=66816": 1,
               "spirv_has_int8": int(f["int8"]), "spirv_has_int16": int(f["int16"]), "spirv_has_int64": 1,
               "spirv_has_float16": 1, "spirv_has_float64": int(f["float64"]), "spirv_has_atomic_int64": a64,
               "spirv_has_physical_storage_buffer": 1,
               "spirv_has_subgroup_basic": int(bool(self.subgroups["ops"] & 0x1)),
               "spirv_has_subgroup_ballot": int(bool(self.subgroups["ops"] & 0x8)),
               "spirv_has_subgroup_arithmetic": int(f["subgroup_arith"])}
        for kind in ("float16", "float", "float64"):
            ok = a64 if kind == "float64" else 1
            for suffix in ("", "_add", "_minmax"):
                out[f"spirv_has_atomic_{kind}{suffix}"] = ok
        return out

    @property
    def subgroup_size(self) -> int:
        """The lanes of one subgroup (`VkPhysicalDeviceSubgroupProperties.subgroupSize`, read once when the device
        opened): `qd.simt.subgroup.group_size()` on the vulkan arch. Every pipeline runs with it: fixed on devices
        whose size cannot vary (lavapipe, NVIDIA), pinned per pipeline elsewhere (`_pipeline`)."""
        return int(self.subgroups["size"])

    @property
    def device_name(self) -> str:
        return self.dev.name

    # ------------------------------------------------------------ memory
    def alloc(self, nbytes: int, host: bool = False) -> Buffer:
        return self.dev.buffer(nbytes, host)

    def free(self, buf: Buffer) -> None:
        buf.destroy()

    def _stage(self, nbytes: int) -> Buffer:
        if self._staging is None or self._staging.nbytes < nbytes:
            if self._staging is not None:
                self._staging.destroy()
            self._staging = self.dev.buffer(max(nbytes, 1 << 20), host=True)
        return self._staging

    def upload(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        """Host -> device at byte `offset`, complete when it returns (the caller has waited for work using `buf`)."""
        data = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        if not data.nbytes:
            return
        if buf.mapped:
            buf.view(np.uint8, data.nbytes, offset)[:] = data
            return
        st = self._stage(data.nbytes)
        st.view(np.uint8, data.nbytes)[:] = data
        cmd = self.dev.begin()
        self.dev.copy(cmd, st, buf, data.nbytes, dst_offset=offset)
        self.dev.wait(self.dev.submit(cmd))

    def download(self, buf: Buffer, arr: np.ndarray, offset: int = 0) -> None:
        """Device (from byte `offset`) -> host into C-contiguous `arr`, complete when it returns."""
        out = arr.reshape(-1).view(np.uint8)
        if not out.nbytes:
            return
        if buf.mapped:
            out[:] = buf.view(np.uint8, out.nbytes, offset)
            return
        st = self._stage(out.nbytes)
        cmd = self.dev.begin()
        self.dev.copy(cmd, buf, st, out.nbytes, src_offset=offset)
        self.dev.wait(self.dev.submit(cmd))
        out[:] = st.view(np.uint8, out.nbytes)

    def fill(self, buf: Buffer, nbytes: int, pattern: int) -> Any:
        """Enqueues filling the first `nbytes` (rounded up to 4) of `buf` with the 32-bit `pattern`."""
        cmd = self.dev.begin()
        self.dev.vk.vkCmdFillBuffer(cmd, buf.handle, 0, (int(nbytes) + 3) & ~3, pattern & 0xFFFFFFFF)
        return self.dev.submit(cmd)

    # ------------------------------------------------------------ code
    def compile(self, k: ir.KernelIR, fast_math: bool, print_words: int, cache_dir: str | None = None) -> Program:
        """Pipelines of offloaded kernel `k`. With `cache_dir`, the SPIR-V comes from / goes to the on-disk cache
        (key: the IR text, the device's caps, fast_math, print capacity, qd version and the emitter's sources)."""
        t0 = time.perf_counter()
        key = spirv_cache.key(k, repr((self.caps, print_words, spirv.TUNING)), fast_math) if cache_dir else ""
        sk = spirv_cache.load(cache_dir, key, k) if cache_dir else None
        from_cache = sk is not None
        if sk is None:
            sk = spirv.build_spirv(k, self.caps, fast_math, print_words)
            if cache_dir:
                spirv_cache.store(cache_dir, key, sk)
        dump = os.environ.get("QD_DUMP_SPIRV")  # a folder: every module as <kernel>_<task>.spv (debugging)
        if dump:
            os.makedirs(dump, exist_ok=True)
            for n, t in enumerate(sk.tasks):
                with open(os.path.join(dump, f"{k.name}_{n}.spv"), "wb") as f:
                    f.write(struct.pack(f"<{len(t.words)}I", *t.words))
        if VALIDATE:
            for n, t in enumerate(sk.tasks):
                validate(t.words, f"task {n} of kernel {k.name}")
        pipelines = []
        try:
            for n, t in enumerate(sk.tasks):
                pipelines.append(self._pipeline(t))
        except Exception as e:  # noqa: BLE001  whatever the driver raises: named below
            for p in pipelines:
                p.destroy()
            if from_cache:  # a cached module the driver refuses: deleted, and built afresh (issue 27 item 13)
                spirv_cache.discard(cache_dir, key)
                return self.compile(k, fast_math, print_words, cache_dir)
            raise RuntimeError(f"qd: the Vulkan driver of {self.dev.name} could not compile task {len(pipelines)} of "
                               f"kernel {k.name} ({type(e).__name__}); set QD_DUMP_SPIRV=<folder> to keep its "
                               f"SPIR-V") from None
        if from_cache:
            spirv_cache.confirm(cache_dir, key)
        return Program(sk, pipelines, compile_ms=(time.perf_counter() - t0) * 1e3, from_cache=from_cache)

    def _pipeline(self, t: spirv.SpirvTask) -> Pipeline:
        """The pipeline of one task. A task using subgroup operations on a device whose subgroup size may vary per
        pipeline gets the size its kernel compiled against (`subgroup_size`), and full subgroups where its local
        size is a multiple of it and the device can require them (`VK_EXT_subgroup_size_control`)."""
        sg = self.subgroups
        if not (sg["control"] and uses_subgroups(t.task)):
            return self.dev.pipeline(t.words, 0, push_bytes=8)
        size = self.subgroup_size
        full = sg["full"] and t.local_size % size == 0 and t.local_size <= size * sg["max_subgroups"]
        return self.dev.pipeline(t.words, 0, push_bytes=8, subgroup_size=size, full_subgroups=full)

    def release(self, prog: Program) -> None:
        for p in prog.pipelines:
            p.destroy()

    # ------------------------------------------------------------ launches
    def enqueue(self, prog: Program, slot: Buffer, groups: list[int], zero: list[tuple[Buffer, int]],
                streams: list | None = None, bufs: dict | None = None, printbuf: Buffer | None = None) -> Any:
        """Submits one launch: zero fills, then every task with `groups[t]` workgroups. The command buffer is
        recorded once per (program, slot, grid, fills, timestamps) and kept on the slot (pooled, so it comes
        back): a repeated launch is one command buffer for `Device.submit_recorded` to queue. A launch made on
        an idle device writes timestamps (`elapsed_ms`); one queued behind running work does not (they cost
        the device about 5 us a launch, which a stream of small launches would pay)."""
        idle = self.dev.idle()
        stamp = self.timestamps and idle
        key = (prog.serial, tuple(groups), tuple((b.serial, n) for b, n in zero) if zero else (), stamp)
        cache = slot.__dict__.setdefault("recorded", {})
        cmd = cache.get(key)
        if cmd is None:
            cmd = cache[key] = self._record(prog, slot, groups, zero, stamp)
        return self.dev.submit_recorded(cmd, idle)

    def _queries(self, prog: Program) -> Any:
        """The program's timestamp query pool (2 queries: start and end of a launch), made once. Every launch of
        the program writes it; `elapsed_ms` reads the last completed one when asked (no cost per launch)."""
        if prog.queries is None and self.timestamps:
            vk = self.dev.vk
            prog.queries = vk.vkCreateQueryPool(self.dev.device, vk.VkQueryPoolCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, queryType=vk.VK_QUERY_TYPE_TIMESTAMP,
                queryCount=2), None)
        return prog.queries

    def elapsed_ms(self, prog: Program) -> float | None:
        """Device time of the program's last completed launch made on an idle device (`enqueue`), or None (no
        timestamps, or one still running)."""
        if prog.queries is None:
            return None
        vk = self.dev.vk
        out = vk.ffi.new("uint64_t[2]")
        rc = vk.lib.vkGetQueryPoolResults(self.dev.device, prog.queries, 0, 2, 16, out, 8, vk.VK_QUERY_RESULT_64_BIT)
        if rc != vk.VK_SUCCESS:
            return None
        return (int(out[1]) - int(out[0])) * self.tick_ns * 1e-6

    def _record(self, prog: Program, slot: Buffer, groups: list[int], zero: list[tuple[Buffer, int]],
                stamp: bool) -> Any:
        dev = self.dev
        vk = dev.vk
        cmd = dev.begin(once=False)
        pool = self._queries(prog) if stamp else None
        if pool is not None:
            vk.vkCmdResetQueryPool(cmd, pool, 0, 2)
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, pool, 0)
        if zero:
            for buf, nbytes in zero:
                dev.fill_zero(cmd, buf, nbytes)
            dev.barrier(cmd)
        push = struct.pack("<Q", slot.address)
        for t, (pipe, g) in enumerate(zip(prog.pipelines, groups)):
            if t:
                dev.barrier(cmd)
            if g > 0:
                dev.run(cmd, pipe, push, (g, 1, 1))
        if pool is not None:
            vk.vkCmdWriteTimestamp(cmd, vk.VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool, 1)
        return dev.end(cmd)

    def done(self, work: Any) -> bool:
        return self.dev.done(work)

    def wait(self, work: Any) -> None:
        self.dev.wait(work)


# QD_SPIRV_VALIDATE=1 runs `spirv-val` on every module before the driver sees it (the test suite sets it)
VALIDATE = os.environ.get("QD_SPIRV_VALIDATE", "") not in ("", "0")


def validate(words: list[int], what: str) -> None:
    """Raises RuntimeError with spirv-val's message when the module is invalid SPIR-V for Vulkan 1.2."""
    import shutil
    import subprocess
    import tempfile

    val = shutil.which("spirv-val")
    if val is None:
        raise RuntimeError("QD_SPIRV_VALIDATE is set but spirv-val is not installed (apt-get install spirv-tools)")
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(struct.pack(f"<{len(words)}I", *words))
        f.flush()
        r = subprocess.run([val, "--target-env", "vulkan1.2", f.name], check=False, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"qd: invalid SPIR-V for {what}: {(r.stdout + r.stderr).strip()}")


__all__ = ["Program", "VulkanBackend", "validate"]
