"""A minimal Vulkan compute runtime (the `vulkan` PyPI package over the system loader): device selection,
buffers, compute pipelines from SPIR-V words, command buffers, and the submission queue (launches made while
the device is busy go out together; `Device.submit_recorded`).

This is the first layer of the Vulkan tier (issue 12): it runs modules that `spirv_module.Module` builds.
The device runtime of `../shared/GPU.md` (device-resident data with host mirrors, asynchronous launches,
status and print buffers, recorded command buffers) is built on top of it.

Device choice: `QD_VULKAN_DEVICE` (a substring of the device name), else the first discrete GPU, else the
first integrated GPU, else the first device (lavapipe on CPU machines). Errors name what is missing.
"""

from __future__ import annotations

import itertools
import os
import struct
import time
from typing import Any

import numpy as np


class VulkanUnavailable(RuntimeError):
    """No Vulkan loader, driver or device here (the message says which and what to install)."""


def _vk() -> Any:
    try:
        import vulkan as vk
    except ImportError as e:
        raise VulkanUnavailable('the `vulkan` Python package is not installed (pip install "qd-lang[vulkan]")') from e
    except OSError as e:  # the package loads libvulkan at import
        raise VulkanUnavailable(f"the Vulkan loader could not be loaded ({e}); install libvulkan1 (and "
                                f"mesa-vulkan-drivers for lavapipe on a CPU machine)") from e
    return vk


# Vulkan 1.2 core values the `vulkan` package lacks (its KHR aliases of them are None); fixed by the spec.
_SPEC = {"VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT": 0x00020000, "VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT": 0x00000002}


_consts: dict[str, int] = {}


def _const(vk: Any, name: str) -> int:
    """A Vulkan constant from the package, or the specification's value where the package lacks it (the
    package's KHR aliases of 1.2 core names are None); looked up once."""
    if name not in _consts:
        v = getattr(vk, name, None)
        _consts[name] = v if v is not None else _SPEC[name]
    return _consts[name]


_serials = itertools.count(1)  # identities of buffers that outlive no reuse (recorded command buffers key on them)
_TYPE_RANK = {2: 0, 1: 1, 3: 2, 4: 3, 0: 4}  # discrete, integrated, virtual, CPU, other


class Buffer:
    """A storage buffer reached by device address. `host=True` asks for host-visible, host-coherent memory
    (launch slots, print buffers, staging); otherwise device-local memory is preferred. Host-visible memory
    (all of lavapipe's) is mapped for the buffer's whole life: `view` then reads and writes it directly."""

    def __init__(self, dev: "Device", nbytes: int, host: bool = True) -> None:
        vk = dev.vk
        self.dev, self.nbytes = dev, max(4, (int(nbytes) + 3) & ~3)  # whole words: fills work in 4-byte units
        self.serial = next(_serials)
        limit = dev.max_allocation
        if self.nbytes > limit:
            raise MemoryError(f"qd: a {self.nbytes}-byte buffer is larger than Vulkan device {dev.name} allows in one "
                              f"allocation ({limit} bytes)")
        bda = dev.features["device_address"]
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
                 | (_const(vk, 'VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT') if bda else 0))
        info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=self.nbytes,
                                     usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        self.handle = vk.vkCreateBuffer(dev.device, info, None)
        req = vk.vkGetBufferMemoryRequirements(dev.device, self.handle)
        visible = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        if host:
            mtype = dev.memory_type(req.memoryTypeBits, visible)
        else:
            mtype = dev.memory_type(req.memoryTypeBits, vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, fallback=visible)
        flags = vk.VkMemoryAllocateFlagsInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                             flags=_const(vk, 'VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT')) if bda else None
        alloc = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
                                        memoryTypeIndex=mtype, pNext=flags)
        try:
            self.memory = vk.vkAllocateMemory(dev.device, alloc, None)
        except (vk.VkErrorOutOfDeviceMemory, vk.VkErrorOutOfHostMemory) as e:
            vk.vkDestroyBuffer(dev.device, self.handle, None)
            self.handle = None
            raise MemoryError(f"qd: Vulkan device {dev.name} is out of memory for a {self.nbytes}-byte buffer "
                              f"({type(e).__name__})") from None
        vk.vkBindBufferMemory(dev.device, self.handle, self.memory, 0)
        # the buffer's device address (PhysicalStorageBuffer pointers), or None without the feature
        # (through the raw cffi function: the package's wrapper of it returns its argument)
        self.address: int | None = None
        if bda:
            info = vk.VkBufferDeviceAddressInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                buffer=self.handle)
            self.address = int(vk.lib.vkGetBufferDeviceAddress(dev.device, vk.ffi.addressof(info)))
        props = dev._mem.memoryTypes[mtype].propertyFlags
        self.mapped = (props & visible) == visible
        self._map = vk.vkMapMemory(dev.device, self.memory, 0, self.nbytes, 0) if self.mapped else None
        self._bytes: memoryview | None = None

    def view(self, dtype: Any, count: int | None = None, offset: int = 0) -> np.ndarray:
        """A numpy view of the mapped memory (no copy); host-visible buffers only."""
        if self._map is None:
            raise ValueError("a device-local buffer has no host view: copy it through a staging buffer")
        dt = np.dtype(dtype)
        n = (self.nbytes - offset) // dt.itemsize if count is None else int(count)
        return np.frombuffer(self._map, dtype=dt, count=n, offset=offset)

    def memory_view(self) -> memoryview:
        """The mapped memory as writable bytes (no copy; `struct.pack_into` fills a launch slot in one call)."""
        if self._bytes is None:
            if self._map is None:
                raise ValueError("a device-local buffer has no host view: copy it through a staging buffer")
            self._bytes = memoryview(self._map).cast("B")
        return self._bytes

    def write(self, arr: np.ndarray) -> None:
        data = np.ascontiguousarray(arr).view(np.uint8).ravel()
        if data.nbytes > self.nbytes:
            raise ValueError(f"{data.nbytes} bytes do not fit a {self.nbytes}-byte buffer")
        self.view(np.uint8, data.nbytes)[:] = data

    def destroy(self) -> None:
        vk = self.dev.vk
        if self.handle is not None and self.dev.device is not None:
            if self._map is not None:
                self._bytes = None
                vk.vkUnmapMemory(self.dev.device, self.memory)
            vk.vkDestroyBuffer(self.dev.device, self.handle, None)
            vk.vkFreeMemory(self.dev.device, self.memory, None)
        self.handle = None


class Pipeline:
    """A compute pipeline of one SPIR-V module whose entry point reads `nbuffers` storage buffers at
    descriptor set 0, bindings 0..nbuffers-1."""

    def __init__(self, dev: "Device", words: list[int], nbuffers: int, entry: str = "main",
                 push_bytes: int = 0, subgroup_size: int = 0, full_subgroups: bool = False) -> None:
        vk = dev.vk
        self.dev, self.nbuffers, self.push_bytes = dev, nbuffers, push_bytes
        code = struct.pack(f"<{len(words)}I", *words)
        self.module = vk.vkCreateShaderModule(dev.device, vk.VkShaderModuleCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code), pCode=code), None)
        bindings = [vk.VkDescriptorSetLayoutBinding(binding=i, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                    descriptorCount=1, stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT)
                    for i in range(nbuffers)]
        self.set_layout = vk.vkCreateDescriptorSetLayout(dev.device, vk.VkDescriptorSetLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, bindingCount=nbuffers,
            pBindings=bindings), None)
        ranges = [vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0, size=push_bytes)] \
            if push_bytes else []
        self.layout = vk.vkCreatePipelineLayout(dev.device, vk.VkPipelineLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1,
            pSetLayouts=[self.set_layout], pushConstantRangeCount=len(ranges),
            pPushConstantRanges=ranges or None), None)
        stage = vk.VkPipelineShaderStageCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                   stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=self.module,
                                                   pName=entry, **_pinned(vk, subgroup_size, full_subgroups))
        self.handle = vk.vkCreateComputePipelines(dev.device, None, 1, [vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=self.layout)], None)[0]
        self.pool = self.set = None
        if not nbuffers:
            return
        self.pool = vk.vkCreateDescriptorPool(dev.device, vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            flags=vk.VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT, maxSets=1, poolSizeCount=1,
            pPoolSizes=[vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                descriptorCount=max(1, nbuffers))]), None)
        self.set = vk.vkAllocateDescriptorSets(dev.device, vk.VkDescriptorSetAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, descriptorPool=self.pool, descriptorSetCount=1,
            pSetLayouts=[self.set_layout]))[0]

    def bind(self, buffers: list[Buffer]) -> None:
        vk = self.dev.vk
        if not buffers and not self.nbuffers:
            return
        if len(buffers) != self.nbuffers:
            raise ValueError(f"the pipeline reads {self.nbuffers} buffers, {len(buffers)} given")
        writes = [vk.VkWriteDescriptorSet(sType=vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, dstSet=self.set,
                                          dstBinding=i, descriptorCount=1,
                                          descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          pBufferInfo=[vk.VkDescriptorBufferInfo(buffer=b.handle, offset=0,
                                                                                 range=b.nbytes)])
                  for i, b in enumerate(buffers)]
        vk.vkUpdateDescriptorSets(self.dev.device, len(writes), writes, 0, None)

    def destroy(self) -> None:
        vk, d = self.dev.vk, self.dev.device
        if self.pool is not None:
            vk.vkDestroyDescriptorPool(d, self.pool, None)
        vk.vkDestroyPipeline(d, self.handle, None)
        vk.vkDestroyPipelineLayout(d, self.layout, None)
        vk.vkDestroyDescriptorSetLayout(d, self.set_layout, None)
        vk.vkDestroyShaderModule(d, self.module, None)


def _pinned(vk: Any, subgroup_size: int, full: bool) -> dict[str, Any]:
    """The shader stage's fields that pin its subgroup size (`VK_EXT_subgroup_size_control`), or none."""
    out: dict[str, Any] = {}
    if subgroup_size:
        out["pNext"] = vk.VkPipelineShaderStageRequiredSubgroupSizeCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
            requiredSubgroupSize=subgroup_size)
    if full:
        out["flags"] = vk.VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT
    return out


BATCH = 64  # launches submitted together at most
MAX_QUEUED_S = 0.002  # a queued launch goes out at the next launch after this long, even if the device is busy
SPIN_S = float(os.environ.get("QD_VULKAN_SPIN_S", "") or 0.003)  # `Device.wait` polls this long, then blocks
QUEUED, SUBMITTED, DONE = range(3)


class Submission:
    """Command buffers submitted together with one fence; every launch among them waits on it."""

    __slots__ = ("cmds", "once", "fence", "state", "since")

    def __init__(self) -> None:
        self.cmds: list = []
        self.once: list = []  # one-shot command buffers, recycled when it completes
        self.fence: Any = None  # a VkFence[1] while submitted
        self.state = QUEUED
        self.since = time.perf_counter()


class Device:
    """One Vulkan device and a compute queue."""

    def __init__(self) -> None:
        vk = self.vk = _vk()
        app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName="qd",
                                   applicationVersion=1, pEngineName="qd", engineVersion=1,
                                   apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
        try:
            self.instance = vk.vkCreateInstance(vk.VkInstanceCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app), None)
            physical = vk.vkEnumeratePhysicalDevices(self.instance)
        except vk.VkError as e:
            raise VulkanUnavailable(f"no Vulkan driver could start ({type(e).__name__}); install a driver "
                                    f"(mesa-vulkan-drivers gives lavapipe on a CPU machine)") from e
        if not physical:
            raise VulkanUnavailable("the Vulkan loader found no device (install mesa-vulkan-drivers for lavapipe)")
        self.physical = self._choose(physical)
        self.props = vk.vkGetPhysicalDeviceProperties(self.physical)
        self.name = self.props.deviceName
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next((i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT), None)
        if self.family is None:
            raise VulkanUnavailable(f"Vulkan device {self.name} has no compute queue")
        queue = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           queueFamilyIndex=self.family, queueCount=1, pQueuePriorities=[1.0])
        self.features, want = self._features(physical=self.physical)
        exts = [e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(self.physical, None)]
        enable = [x for x in ("VK_EXT_shader_atomic_float",) if x in exts and self.features["float32_atomic_add"]]
        if self.features["subgroups"]["control"]:
            enable.append("VK_EXT_subgroup_size_control")
        self.device = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=want, queueCreateInfoCount=1,
            pQueueCreateInfos=[queue], enabledExtensionCount=len(enable), ppEnabledExtensionNames=enable or None),
            None)
        self.max_allocation = self._max_allocation()
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=self.family,
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self._mem = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        self._free_cmds: list = []
        self._free_fences: list = []
        # how long `wait` polls before it blocks: on a GPU; a CPU device (lavapipe) needs the cores itself
        self.spin_s = 0.0 if self.props.deviceType == vk.VK_PHYSICAL_DEVICE_TYPE_CPU else SPIN_S
        self._infos: dict = {}  # recorded command buffer -> its submit info alone (and the array it points to)
        self._queued: Submission | None = None  # launches not submitted yet
        self.submissions = 0  # vkQueueSubmit calls made
        self.lost = ""  # why the device refused a submission (then nothing more is submitted)
        self._last: Submission | None = None  # the last submission

    def _features(self, physical: Any) -> tuple[dict, Any]:
        """What the device has of what qd uses, and the feature chain that turns exactly that on: 8/16/64-bit
        ints and their storage access, f64, buffer device addresses (PhysicalStorageBuffer pointers: no
        per-binding size cap, e.g. 128 MiB on lavapipe), 64-bit and float atomics, subgroup arithmetic; and the
        float controls it supports (properties, nothing to turn on)."""
        vk = self.vk
        fa = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT)
        h11 = vk.VkPhysicalDeviceVulkan11Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                                  pNext=fa)
        h12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                                  pNext=h11)
        have = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=h12)
        vk.vkGetPhysicalDeviceFeatures2(physical, have)
        sub = vk.VkPhysicalDeviceSubgroupProperties(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=sub))
        exts = [e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(physical, None)]
        has_fa = "VK_EXT_shader_atomic_float" in exts
        f = {"int64": bool(have.features.shaderInt64), "float64": bool(have.features.shaderFloat64),
             "int16": bool(have.features.shaderInt16), "int8": bool(h12.shaderInt8),
             "storage8": bool(h12.storageBuffer8BitAccess), "storage16": bool(h11.storageBuffer16BitAccess),
             "device_address": bool(h12.bufferDeviceAddress),
             "int64_atomics": bool(h12.shaderBufferInt64Atomics),
             "float32_atomic_add": has_fa and bool(fa.shaderBufferFloat32AtomicAdd),
             "float64_atomic_add": has_fa and bool(fa.shaderBufferFloat64AtomicAdd),
             "subgroup_arith": bool(sub.supportedOperations & vk.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)
             and bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT),
             "shared_int64_atomics": bool(h12.shaderSharedInt64Atomics),
             "subgroup_size": int(sub.subgroupSize), "float_controls": self._float_controls(physical),
             "subgroups": self._subgroups(physical, sub, exts)}
        wfa = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
            shaderBufferFloat32AtomicAdd=int(f["float32_atomic_add"]),
            shaderBufferFloat64AtomicAdd=int(f["float64_atomic_add"]))
        tail = wfa if has_fa else None
        sc = f["subgroups"]["control"]  # a subgroup size that may vary: pipelines of qd.simt pin it (`Pipeline`)
        wsc = vk.VkPhysicalDeviceSubgroupSizeControlFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES, pNext=tail,
            subgroupSizeControl=1, computeFullSubgroups=int(f["subgroups"]["full"])) if sc else None
        w11 = vk.VkPhysicalDeviceVulkan11Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                                  pNext=wsc if sc else tail,
                                                  storageBuffer16BitAccess=int(f["storage16"]))
        w12 = vk.VkPhysicalDeviceVulkan12Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, pNext=w11,
            bufferDeviceAddress=int(f["device_address"]), shaderBufferInt64Atomics=int(f["int64_atomics"]),
            shaderSharedInt64Atomics=int(f["shared_int64_atomics"]),
            shaderInt8=int(f["int8"]), storageBuffer8BitAccess=int(f["storage8"]))
        want = vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=w12,
            features=vk.VkPhysicalDeviceFeatures(shaderInt64=int(f["int64"]), shaderFloat64=int(f["float64"]),
                                                 shaderInt16=int(f["int16"])))
        self._keep = (wfa, wsc, w11, w12)  # the chain must outlive vkCreateDevice
        return f, want

    def _subgroups(self, physical: Any, sub: Any, exts: list[str]) -> dict[str, Any]:
        """What `qd.simt` needs of the device's subgroups: their size, the `VK_SUBGROUP_FEATURE_*` operations of
        compute shaders (0 where the compute stage has none), and `control`: the size may vary per pipeline (a
        `VK_EXT_subgroup_size_control` range min < max) and the device can pin it for compute, with `full`: it can
        also require full subgroups. Where min == max (lavapipe: 8, the lanes of its 256-bit vectors; NVIDIA: 32)
        every pipeline runs the reported size and nothing needs pinning."""
        vk = self.vk
        compute = bool(sub.supportedStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
        out = {"size": int(sub.subgroupSize), "ops": int(sub.supportedOperations) if compute else 0,
               "control": False, "full": False}
        if "VK_EXT_subgroup_size_control" not in exts:
            return out
        props = vk.VkPhysicalDeviceSubgroupSizeControlProperties(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=props))
        feats = vk.VkPhysicalDeviceSubgroupSizeControlFeatures(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES)
        vk.vkGetPhysicalDeviceFeatures2(physical, vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=feats))
        varies = props.minSubgroupSize < props.maxSubgroupSize
        out["control"] = bool(varies and feats.subgroupSizeControl
                              and props.requiredSubgroupSizeStages & vk.VK_SHADER_STAGE_COMPUTE_BIT)
        out["full"] = out["control"] and bool(feats.computeFullSubgroups)
        out["max_subgroups"] = int(props.maxComputeWorkgroupSubgroups)
        return out

    def _float_controls(self, physical: Any) -> dict[str, Any]:
        """The device's float controls (Vulkan 1.2 core, `VkPhysicalDeviceFloatControlsProperties`): per execution
        mode the float widths it supports, and the independence rules (`qd/gpu/spirv_float.py`). A device without
        them reports none."""
        vk = self.vk
        fc = vk.VkPhysicalDeviceFloatControlsProperties(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=fc))

        def widths(name: str) -> tuple[int, ...]:
            return tuple(w for w in (16, 32, 64) if getattr(fc, f"{name}Float{w}"))
        return {"preserve": widths("shaderSignedZeroInfNanPreserve"), "denorm_preserve": widths("shaderDenormPreserve"),
                "rte": widths("shaderRoundingModeRTE"), "denorm_independence": int(fc.denormBehaviorIndependence),
                "rounding_independence": int(fc.roundingModeIndependence)}

    def _max_allocation(self) -> int:
        vk = self.vk
        m3 = vk.VkPhysicalDeviceMaintenance3Properties(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES)
        vk.vkGetPhysicalDeviceProperties2(self.physical, vk.VkPhysicalDeviceProperties2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=m3))
        return int(m3.maxMemoryAllocationSize) or (1 << 62)

    def _choose(self, physical: list) -> Any:
        vk = self.vk
        want = os.environ.get("QD_VULKAN_DEVICE")
        props = [(d, vk.vkGetPhysicalDeviceProperties(d)) for d in physical]
        if want:
            hits = [d for d, p in props if want.lower() in p.deviceName.lower()]
            if not hits:
                names = ", ".join(p.deviceName for _, p in props)
                raise VulkanUnavailable(f"QD_VULKAN_DEVICE={want!r} matches none of the Vulkan devices: {names}")
            return hits[0]
        return min(props, key=lambda dp: _TYPE_RANK.get(dp[1].deviceType, 5))[0]

    def memory_type(self, bits: int, flags: int, fallback: int | None = None) -> int:
        for want in (flags, fallback):
            if want is None:
                continue
            for i in range(self._mem.memoryTypeCount):
                if bits & (1 << i) and (self._mem.memoryTypes[i].propertyFlags & want) == want:
                    return i
        raise VulkanUnavailable(f"Vulkan device {self.name} has no memory type with flags {flags:#x} for a buffer")

    def buffer(self, nbytes: int, host: bool = True) -> Buffer:
        return Buffer(self, nbytes, host)

    def pipeline(self, words: list[int], nbuffers: int, entry: str = "main", push_bytes: int = 0,
                 subgroup_size: int = 0, full_subgroups: bool = False) -> Pipeline:
        """A compute pipeline; `subgroup_size` (a device whose size varies, `_subgroups`' `control`) pins its
        subgroup size, `full_subgroups` requires every subgroup full (the local size a multiple of it)."""
        return Pipeline(self, words, nbuffers, entry, push_bytes, subgroup_size, full_subgroups)

    def dispatch(self, pipeline: Pipeline, buffers: list[Buffer], groups: tuple[int, int, int],
                 push: bytes = b"") -> None:
        """Bind `buffers`, push `push` (e.g. buffer device addresses), run `groups` workgroups and wait."""
        pipeline.bind(buffers)
        cmd = self.begin()
        self.run(cmd, pipeline, push, groups)
        self.wait(self.submit(cmd))

    # ------------------------------------------------------------ command buffers (the launcher's steps)
    def begin(self, once: bool = True) -> Any:
        """A command buffer in the recording state, starting with a full barrier: it sees every write of the
        work submitted before it (submission order) and of the host (mapped memory). `once=False` records one
        to submit again and again (`end`, then `submit_recorded`); it is never recycled."""
        vk = self.vk
        cmd = self._free_cmds.pop() if once and self._free_cmds else vk.vkAllocateCommandBuffers(
            self.device, vk.VkCommandBufferAllocateInfo(
                sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=self.cmd_pool,
                level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT if once else 0))
        self.barrier(cmd)
        return cmd

    def barrier(self, cmd: Any, host: bool = False) -> None:
        """Every earlier write is visible to every later command (and to the host with `host=True`)."""
        vk = self.vk
        dst_stage = vk.VK_PIPELINE_STAGE_HOST_BIT if host else vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
        dst = (vk.VK_ACCESS_HOST_READ_BIT | vk.VK_ACCESS_HOST_WRITE_BIT) if host else \
            (vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
        mb = vk.VkMemoryBarrier(sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                srcAccessMask=vk.VK_ACCESS_MEMORY_WRITE_BIT, dstAccessMask=dst)
        vk.vkCmdPipelineBarrier(cmd, vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, [mb], 0, None, 0, None)

    def fill_zero(self, cmd: Any, buf: Buffer, nbytes: int) -> None:
        self.vk.vkCmdFillBuffer(cmd, buf.handle, 0, (int(nbytes) + 3) & ~3, 0)

    def copy(self, cmd: Any, src: Buffer, dst: Buffer, nbytes: int, src_offset: int = 0, dst_offset: int = 0) -> None:
        vk = self.vk
        vk.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, [vk.VkBufferCopy(srcOffset=src_offset,
                                                                           dstOffset=dst_offset, size=nbytes)])

    def run(self, cmd: Any, pipeline: Pipeline, push: bytes, groups: tuple[int, int, int]) -> None:
        vk = self.vk
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        if pipeline.set is not None:
            vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1,
                                       [pipeline.set], 0, None)
        if push:
            vk.vkCmdPushConstants(cmd, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push),
                                  vk.ffi.from_buffer(push))
        vk.vkCmdDispatch(cmd, *groups)

    def end(self, cmd: Any) -> Any:
        """Ends a recording (with the barrier that makes its writes visible to the host); returns the command
        buffer, for `submit_recorded` again and again when it was begun with `once=False`."""
        self.barrier(cmd, host=True)
        self.vk.vkEndCommandBuffer(cmd)
        return cmd

    # ------------------------------------------------------------ submissions
    # A launch made while the device is still running earlier work is queued and submitted together with the
    # launches after it (one vkQueueSubmit, one fence): each submission costs the driver and the device tens
    # of microseconds, which would bound a stream of small launches. Queued work goes out as soon as the
    # device is idle (checked at every `done`, i.e. at every launch), when BATCH launches are queued, when the
    # oldest has waited MAX_QUEUED_S, and before anything waits for it. Quadrants' Vulkan runtime defers
    # every launch until its command list is 2 ms old or something synchronises.

    def submit(self, cmd: Any) -> "Submission":
        """Ends one-shot `cmd` (a copy, a fill) and submits it with whatever launches are queued before it."""
        self.end(cmd)
        sub = self._queue(cmd, once=True)
        self.flush()
        return sub

    def submit_recorded(self, cmd: Any, idle: bool | None = None) -> "Submission":
        """Queues a recording made with `begin(once=False)` + `end` (again); it goes out at once when the device
        is idle (`idle`: the caller's `idle()` of just before). Returns the submission it belongs to, to poll
        (`done`) or `wait` for."""
        if idle is None:
            idle = self.idle()
        sub = self._queue(cmd, once=False)
        if idle or len(sub.cmds) >= BATCH or time.perf_counter() - sub.since > MAX_QUEUED_S:
            self.flush()
        return sub

    def idle(self) -> bool:
        """Nothing is queued and everything submitted has completed."""
        return self._queued is None and self._finished(self._last)

    def _queue(self, cmd: Any, once: bool) -> "Submission":
        if self.lost:
            raise RuntimeError(self.lost)
        sub = self._queued
        if sub is None:
            sub = self._queued = Submission()
        sub.cmds.append(cmd)
        if once:
            sub.once.append(cmd)
        return sub

    def flush(self) -> None:
        """Submits the queued command buffers (raw calls: the package's wrappers cost tens of microseconds)."""
        sub = self._queued
        if sub is None:
            return
        if self.lost:
            raise RuntimeError(self.lost)
        vk = self.vk
        self._queued = None
        fence = self._free_fences.pop() if self._free_fences else vk.ffi.new("VkFence[1]", [vk.vkCreateFence(
            self.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)])
        one = sub.cmds[0] if len(sub.cmds) == 1 else None
        info = self._infos.get(one) if one is not None else None  # a lone launch: its submit info is kept
        if info is None:
            handles = vk.ffi.new("VkCommandBuffer[]", sub.cmds)
            info = (vk.ffi.new("VkSubmitInfo*", {"sType": vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                                 "commandBufferCount": len(sub.cmds), "pCommandBuffers": handles}),
                    handles)
            if one is not None and not sub.once:
                self._infos[one] = info
        rc = vk.lib.vkQueueSubmit(self.queue, 1, info[0], fence[0])
        if rc != vk.VK_SUCCESS:  # its launches never ran: every later submit and wait raises this too
            self._free_fences.append(fence)
            self._queued = sub
            self.lost = (f"qd: Vulkan device {self.name} refused a submission (VkResult {rc}); the device may be "
                         f"lost: the launches since the last completed one did not run")
            raise RuntimeError(self.lost)
        sub.fence, sub.state = fence, SUBMITTED
        self._last = sub
        self.submissions += 1

    def _finished(self, sub: "Submission | None") -> bool:
        """`sub` (None: no work) has completed; a completed submission is retired here."""
        if sub is None or sub.state == DONE:
            return True
        if sub.state == QUEUED or self.vk.lib.vkGetFenceStatus(self.device, sub.fence[0]) != self.vk.VK_SUCCESS:
            return False
        self._retire(sub)
        return True

    def _retire(self, sub: "Submission") -> None:
        vk = self.vk
        vk.lib.vkResetFences(self.device, 1, sub.fence)
        self._free_fences.append(sub.fence)
        for cmd in sub.once:
            vk.vkResetCommandBuffer(cmd, 0)
            self._free_cmds.append(cmd)
        sub.fence, sub.state, sub.once = None, DONE, []

    def done(self, sub: "Submission") -> bool:
        """Whether `sub` has completed; queued work is submitted here when the device has gone idle."""
        if sub.state == QUEUED:
            if self._finished(self._last):
                self.flush()
            return False
        return self._finished(sub)

    def wait(self, sub: "Submission") -> None:
        """Waits for `sub` (submitting it first if it is still queued) and retires it."""
        if sub.state == QUEUED:
            self.flush()
        if sub.state != SUBMITTED:
            return
        vk = self.vk
        if self.spin_s:  # poll first: a blocked wait wakes up 0.1-0.3 ms late (the driver's interrupt, the OS)
            end = time.perf_counter() + self.spin_s
            while time.perf_counter() < end:
                if vk.lib.vkGetFenceStatus(self.device, sub.fence[0]) == vk.VK_SUCCESS:
                    self._retire(sub)
                    return
        rc = vk.lib.vkWaitForFences(self.device, 1, sub.fence, vk.VK_TRUE, 600 * 10**9)
        if rc != vk.VK_SUCCESS:
            raise RuntimeError(f"qd: Vulkan device {self.name} did not finish a kernel within 600 s (VkResult {rc}: "
                               f"device lost, or a kernel that never ends)")
        self._retire(sub)

    def close(self) -> None:
        vk = self.vk
        if self.device is not None:
            if not self.lost:
                self.flush()
            vk.vkDeviceWaitIdle(self.device)
            for fence in self._free_fences:
                vk.vkDestroyFence(self.device, fence[0], None)
            vk.vkDestroyCommandPool(self.device, self.cmd_pool, None)
            vk.vkDestroyDevice(self.device, None)
            vk.vkDestroyInstance(self.instance, None)
            self.device = None
