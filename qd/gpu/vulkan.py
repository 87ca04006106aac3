"""A minimal Vulkan compute runtime (the `vulkan` PyPI package over the system loader): device selection,
host-visible storage buffers, compute pipelines from SPIR-V words, and synchronous dispatches.

This is the first layer of the Vulkan tier (issue 12): it runs modules that `spirv_module.Module` builds.
The device runtime of `../shared/GPU.md` (device-resident data with host mirrors, asynchronous launches,
status and print buffers, recorded command buffers) is built on top of it.

Device choice: `QD_VULKAN_DEVICE` (a substring of the device name), else the first discrete GPU, else the
first integrated GPU, else the first device (lavapipe on CPU machines). Errors name what is missing.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np


class VulkanUnavailable(RuntimeError):
    """No Vulkan loader, driver or device here (the message says which and what to install)."""


def _vk() -> Any:
    try:
        import vulkan as vk
    except ImportError as e:
        raise VulkanUnavailable("the `vulkan` Python package is not installed (pip install vulkan)") from e
    except OSError as e:  # the package loads libvulkan at import
        raise VulkanUnavailable(f"the Vulkan loader could not be loaded ({e}); install libvulkan1 (and "
                                f"mesa-vulkan-drivers for lavapipe on a CPU machine)") from e
    return vk


# Vulkan 1.2 core values the `vulkan` package lacks (its KHR aliases of them are None); fixed by the spec.
_SPEC = {"VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT": 0x00020000, "VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT": 0x00000002}


def _const(vk: Any, name: str) -> int:
    """A Vulkan constant from the package, or the specification's value where the package lacks it."""
    v = getattr(vk, name, None) if name in dir(vk) else None
    return v if v is not None else _SPEC[name]


_TYPE_RANK = {2: 0, 1: 1, 3: 2, 4: 3, 0: 4}  # discrete, integrated, virtual, CPU, other


class Buffer:
    """A host-visible, host-coherent storage buffer, mapped for its whole life."""

    def __init__(self, dev: "Device", nbytes: int) -> None:
        vk = dev.vk
        self.dev, self.nbytes = dev, max(4, int(nbytes))
        bda = dev.features["device_address"]
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | (_const(vk, 'VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT') if bda else 0)
        info = vk.VkBufferCreateInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=self.nbytes,
                                     usage=usage, sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE)
        self.handle = vk.vkCreateBuffer(dev.device, info, None)
        req = vk.vkGetBufferMemoryRequirements(dev.device, self.handle)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        mtype = dev.memory_type(req.memoryTypeBits, want)
        flags = vk.VkMemoryAllocateFlagsInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                             flags=_const(vk, 'VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT')) if bda else None
        alloc = vk.VkMemoryAllocateInfo(sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
                                        memoryTypeIndex=mtype, pNext=flags)
        self.memory = vk.vkAllocateMemory(dev.device, alloc, None)
        vk.vkBindBufferMemory(dev.device, self.handle, self.memory, 0)
        # the buffer's device address (PhysicalStorageBuffer pointers), or None without the feature
        # (through the raw cffi function: the package's wrapper of it returns its argument)
        self.address: int | None = None
        if bda:
            info = vk.VkBufferDeviceAddressInfo(sType=vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                                buffer=self.handle)
            self.address = int(vk.lib.vkGetBufferDeviceAddress(dev.device, vk.ffi.addressof(info)))
        self._map = vk.vkMapMemory(dev.device, self.memory, 0, self.nbytes, 0)

    def view(self, dtype: Any, count: int | None = None) -> np.ndarray:
        """A numpy view of the mapped memory (no copy)."""
        dt = np.dtype(dtype)
        n = self.nbytes // dt.itemsize if count is None else int(count)
        return np.frombuffer(self._map, dtype=dt, count=n)

    def write(self, arr: np.ndarray) -> None:
        data = np.ascontiguousarray(arr).view(np.uint8).ravel()
        if data.nbytes > self.nbytes:
            raise ValueError(f"{data.nbytes} bytes do not fit a {self.nbytes}-byte buffer")
        self.view(np.uint8, data.nbytes)[:] = data

    def destroy(self) -> None:
        vk = self.dev.vk
        if self.handle is not None:
            vk.vkUnmapMemory(self.dev.device, self.memory)
            vk.vkDestroyBuffer(self.dev.device, self.handle, None)
            vk.vkFreeMemory(self.dev.device, self.memory, None)
            self.handle = None


class Pipeline:
    """A compute pipeline of one SPIR-V module whose entry point reads `nbuffers` storage buffers at
    descriptor set 0, bindings 0..nbuffers-1."""

    def __init__(self, dev: "Device", words: list[int], nbuffers: int, entry: str = "main",
                 push_bytes: int = 0) -> None:
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
                                                   pName=entry)
        self.handle = vk.vkCreateComputePipelines(dev.device, None, 1, [vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=self.layout)], None)[0]
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
        vk.vkDestroyDescriptorPool(d, self.pool, None)
        vk.vkDestroyPipeline(d, self.handle, None)
        vk.vkDestroyPipelineLayout(d, self.layout, None)
        vk.vkDestroyDescriptorSetLayout(d, self.set_layout, None)
        vk.vkDestroyShaderModule(d, self.module, None)


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
        have12 = vk.VkPhysicalDeviceVulkan12Features(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
        have = vk.VkPhysicalDeviceFeatures2(sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=have12)
        vk.vkGetPhysicalDeviceFeatures2(self.physical, have)
        # what qd turns on where the device has it: 64-bit ints/floats, and buffer device addresses
        # (PhysicalStorageBuffer pointers: no per-binding size cap, e.g. 128 MiB on lavapipe)
        self.features = {"int64": bool(have.features.shaderInt64), "float64": bool(have.features.shaderFloat64),
                         "device_address": bool(have12.bufferDeviceAddress),
                         "int64_atomics": bool(have12.shaderBufferInt64Atomics)}
        want12 = vk.VkPhysicalDeviceVulkan12Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
            bufferDeviceAddress=int(self.features["device_address"]),
            shaderBufferInt64Atomics=int(self.features["int64_atomics"]))
        want = vk.VkPhysicalDeviceFeatures2(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=want12,
            features=vk.VkPhysicalDeviceFeatures(shaderInt64=int(self.features["int64"]),
                                                 shaderFloat64=int(self.features["float64"])))
        self.device = vk.vkCreateDevice(self.physical, vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=want, queueCreateInfoCount=1,
            pQueueCreateInfos=[queue]), None)
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.cmd_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=self.family,
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)
        self._mem = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)

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

    def memory_type(self, bits: int, flags: int) -> int:
        for i in range(self._mem.memoryTypeCount):
            if bits & (1 << i) and (self._mem.memoryTypes[i].propertyFlags & flags) == flags:
                return i
        raise VulkanUnavailable(f"Vulkan device {self.name} has no host-visible coherent memory for a buffer")

    def buffer(self, nbytes: int) -> Buffer:
        return Buffer(self, nbytes)

    def pipeline(self, words: list[int], nbuffers: int, entry: str = "main", push_bytes: int = 0) -> Pipeline:
        return Pipeline(self, words, nbuffers, entry, push_bytes)

    def dispatch(self, pipeline: Pipeline, buffers: list[Buffer], groups: tuple[int, int, int],
                 push: bytes = b"") -> None:
        """Bind `buffers`, push `push` (e.g. buffer device addresses), run `groups` workgroups and wait."""
        vk = self.vk
        pipeline.bind(buffers)
        cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, commandPool=self.cmd_pool,
            level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
        vk.vkBeginCommandBuffer(cmd, vk.VkCommandBufferBeginInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
            flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT))
        vk.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.handle)
        vk.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1,
                                   [pipeline.set], 0, None)
        if push:
            vk.vkCmdPushConstants(cmd, pipeline.layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, len(push),
                                  vk.ffi.from_buffer(push))
        vk.vkCmdDispatch(cmd, *groups)
        vk.vkEndCommandBuffer(cmd)
        fence = vk.vkCreateFence(self.device, vk.VkFenceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO),
                                 None)
        try:
            vk.vkQueueSubmit(self.queue, 1, [vk.VkSubmitInfo(sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                                                             commandBufferCount=1, pCommandBuffers=[cmd])], fence)
            vk.vkWaitForFences(self.device, 1, [fence], vk.VK_TRUE, 60 * 10**9)
        finally:
            vk.vkDestroyFence(self.device, fence, None)
            vk.vkFreeCommandBuffers(self.device, self.cmd_pool, 1, [cmd])

    def close(self) -> None:
        vk = self.vk
        if self.device is not None:
            vk.vkDeviceWaitIdle(self.device)
            vk.vkDestroyCommandPool(self.device, self.cmd_pool, None)
            vk.vkDestroyDevice(self.device, None)
            vk.vkDestroyInstance(self.instance, None)
            self.device = None
