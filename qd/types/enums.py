"""Quadrants' enums reached by user code and its tests (`qd.types.enums`)."""

from enum import Enum


class AutodiffMode(Enum):
    NONE = 0
    VALIDATION = 1
    FORWARD = 2
    REVERSE = 3
    CHECK_AUTODIFF_VALID = 4


class SNodeGradType(Enum):
    PRIMAL = 0
    ADJOINT = 1
    DUAL = 2
    ADJOINT_CHECKBIT = 3


class Layout(Enum):
    AOS = 0
    SOA = 1


class DeviceCapability:
    """Quadrants' names of what a GPU device offers (`prog.get_device_caps().get(cap)`); qd reports them for
    its Vulkan tier (`qd/gpu/vulkan_tier.py`: `VulkanBackend.device_caps`)."""

    spirv_version_1_3 = "spirv_version=66304"
    spirv_version_1_4 = "spirv_version=66560"
    spirv_version_1_5 = "spirv_version=66816"
    spirv_has_int8 = "spirv_has_int8"
    spirv_has_int16 = "spirv_has_int16"
    spirv_has_int64 = "spirv_has_int64"
    spirv_has_float16 = "spirv_has_float16"
    spirv_has_float64 = "spirv_has_float64"
    spirv_has_atomic_int64 = "spirv_has_atomic_int64"
    spirv_has_atomic_float16 = "spirv_has_atomic_float16"
    spirv_has_atomic_float16_add = "spirv_has_atomic_float16_add"
    spirv_has_atomic_float16_minmax = "spirv_has_atomic_float16_minmax"
    spirv_has_atomic_float = "spirv_has_atomic_float"
    spirv_has_atomic_float_add = "spirv_has_atomic_float_add"
    spirv_has_atomic_float_minmax = "spirv_has_atomic_float_minmax"
    spirv_has_atomic_float64 = "spirv_has_atomic_float64"
    spirv_has_atomic_float64_add = "spirv_has_atomic_float64_add"
    spirv_has_atomic_float64_minmax = "spirv_has_atomic_float64_minmax"
    spirv_has_variable_ptr = "spirv_has_variable_ptr"
    spirv_has_physical_storage_buffer = "spirv_has_physical_storage_buffer"
    spirv_has_subgroup_basic = "spirv_has_subgroup_basic"
    spirv_has_subgroup_vote = "spirv_has_subgroup_vote"
    spirv_has_subgroup_arithmetic = "spirv_has_subgroup_arithmetic"
    spirv_has_subgroup_ballot = "spirv_has_subgroup_ballot"
    spirv_has_non_semantic_info = "spirv_has_non_semantic_info"
    spirv_has_no_integer_wrap_decoration = "spirv_has_no_integer_wrap_decoration"
