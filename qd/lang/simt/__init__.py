"""`qd.simt`: thread-group programming on the GPU tiers (Quadrants' `quadrants.lang.simt`).

- `block`: the threads of one GPU block (CUDA block, Vulkan/OpenCL workgroup; its size is the loop's
  `qd.loop_config(block_dim=...)`): `sync`, `mem_fence`, `thread_idx`, `global_thread_idx`, `SharedArray`, and the
  block-wide reductions;
- `subgroup`: the lanes of one subgroup (a CUDA warp): lane ids, shuffles, broadcasts, ballots, votes, reductions;
- `warp`: CUDA's masked warp operations (cuda only);
- `grid`: `mem_fence` over the whole device;
- `Tile16x16`, `Tile32x32`: register-resident N x N tiles (`qd/lang/simt/tile.py`, loaded on first use).

The CPU tiers have no thread groups: a kernel using these fails to compile there with a `QuadrantsArchError` (a
ValueError) naming the operation and the arch. Contract for every operation: the threads of a block (a subgroup)
reach a barrier or a subgroup operation together, in uniform control flow; a range whose length is a multiple of
`block_dim` gives every thread of a block the same number of iterations.
"""

from typing import Any

from qd.lang.simt import block, grid, subgroup, warp

__all__ = ["Tile16x16", "Tile32x32", "block", "grid", "subgroup", "warp"]


def __getattr__(name: str) -> Any:
    """`Tile16x16` / `Tile32x32` (qd/lang/simt/tile.py) load on first use, as in Quadrants."""
    if name in ("Tile16x16", "Tile32x32"):
        from qd.lang.simt import tile

        return getattr(tile, name)
    from qd._unsupported import missing

    raise missing("qd.simt", name)
