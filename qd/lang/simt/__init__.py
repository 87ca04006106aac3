"""`qd.simt`: thread-group programming on the GPU tiers (Quadrants' `quadrants.lang.simt`).

- `block`: the threads of one GPU block (CUDA block, Vulkan/OpenCL workgroup; its size is the loop's
  `qd.loop_config(block_dim=...)`): `sync`, `mem_fence`, `thread_idx`, `global_thread_idx`, `SharedArray`, and the
  block-wide reductions;
- `subgroup`: the lanes of one subgroup (a CUDA warp): lane ids, shuffles, broadcasts, ballots, votes, reductions;
- `warp`: CUDA's masked warp operations (cuda only);
- `grid`: `mem_fence` over the whole device.

The CPU tiers have no thread groups: a kernel using these fails to compile there with a `QuadrantsArchError` (a
ValueError) naming the operation and the arch. Contract for every operation: the threads of a block (a subgroup)
reach a barrier or a subgroup operation together, in uniform control flow; a range whose length is a multiple of
`block_dim` gives every thread of a block the same number of iterations.
"""

from qd.lang.simt import block, grid, subgroup, warp

__all__ = ["block", "grid", "subgroup", "warp"]
