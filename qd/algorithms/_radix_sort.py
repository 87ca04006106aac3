"""`qd.algorithms.sort`, `sort_scratch_slots`: Quadrants 1.3.3's device-wide LSB radix sort contract, on every tier.

The contract (Quadrants' `quadrants.algorithms.sort`): a `@qd.func(requires_top_level=True)` called at the top level
of the caller's kernel, so its phases stay top-level loops with the barrier between offloaded tasks between them:

    sort(keys, tmp_keys, values, tmp_values, scratch, n, key_dtype, has_values, end_bit, log256_max_n)

- `keys`, `tmp_keys` (and `values`, `tmp_values` when `has_values`; otherwise any placeholders) are distinct 1-D
  fields or ndarrays; `n` is a 0-d integer field or ndarray read once on the device (`n[()]`), the count of keys
  to sort; `scratch` is a 1-D u32 field or ndarray of at least `sort_scratch_slots(count, log256_max_n)` slots.
- Compile-time: `key_dtype` (u32, i32, f32, u64, i64, f64), `has_values`, `end_bit` (the low key bits ordered: a
  multiple of 16 up to the key width, so the 8-bit passes are even in number and the result lands in `keys`) and
  `log256_max_n`, the scan depth D (1 to 4; any count works, a count up to 256**D takes the parallel scan).
- The first `count` keys come back ascending, stably (values follow their keys). Signed keys order as numbers;
  float keys by their bits mapped to a monotone order: numbers as numpy orders them, -0.0 before +0.0, NaNs with
  the sign bit first and the others last (Quadrants' twiddle). `tmp_keys`, `tmp_values` and `scratch` are
  clobbered.

What qd does differently inside (qd has no `qd.simt`: no shared memory, no block barrier, no block-wide rank),
with Quadrants' scratch layout and size (a digit-major table `scratch[d * tiles + t]` of the 256 digit counts of
each tile of 256 keys, then the scan's partials):
- histogram: one thread per tile counts its keys' digits serially into its own column (no atomics);
- scan: the same staircase (D - 1 levels of 256-entry block sums, an exclusive scan of the top level, D - 1 levels
  down), each block's 256 entries scanned serially by one thread; a top level longer than 256 entries (a count
  above 256**D) is scanned serially, so it is slower there, not wrong;
- scatter: each tile's thread walks its keys in order and takes the next offset of its column for each, which is
  what makes the sort stable without a block-wide rank;
- signed and float keys are mapped to sortable bits when a digit is taken and never rewritten (Quadrants twiddles
  them in place before the first pass and after the last), so keys move as they are.
Each pass is O(count) work on count / 256 threads with 256-long serial runs: well suited to the CPU tiers, correct
and untuned on GPUs. A count above the keys' length, or a scratch too small for it, skips the sort rather than
write out of bounds (Quadrants does not check); with `debug=True` an assert names it.
"""

from __future__ import annotations

from typing import Any

from qd.errors import QuadrantsTypeError
from qd.frontend.api import bit_cast, func, static
from qd.frontend.builtins import max_ as _max
from qd.frontend.builtins import min_ as _min
from qd.types.annotations import template
from qd.types.dtypes import f32, f64, i32, i64, u32, u64

TILE = 256  # keys per tile (Quadrants' BLOCK_DIM): one thread each in the histogram and scatter phases
RADIX_BITS = 8
RADIX = 1 << RADIX_BITS
MAX_LOG256_MAX_N = 4  # 256**4 = 2**32 covers every i32-indexed buffer (Quadrants' cap)

_WIDTH = {u32: 32, i32: 32, f32: 32, u64: 64, i64: 64, f64: 64}


def _validate_log256_max_n(log256_max_n: int) -> None:
    if not isinstance(log256_max_n, int) or not 1 <= log256_max_n <= MAX_LOG256_MAX_N:
        raise ValueError(f"log256_max_n={log256_max_n!r}: the scan depth must be an int from 1 to {MAX_LOG256_MAX_N} "
                         f"(buffers are indexed by i32, and {RADIX}**{MAX_LOG256_MAX_N} = 2**32 already covers them)")


def _key_width(key_dtype: Any) -> int:
    width = _WIDTH.get(key_dtype)
    if width is None:
        raise QuadrantsTypeError(f"qd.algorithms.sort: key_dtype {key_dtype} is not supported (u32, i32, f32, u64, "
                                 "i64 or f64)")
    return width


def _check_end_bit(end_bit: Any, width: int) -> None:
    if not isinstance(end_bit, int) or end_bit < 16 or end_bit > width or end_bit % 16:
        raise ValueError(f"qd.algorithms.sort: end_bit={end_bit!r}; it must be a multiple of 16 from 16 to the key "
                         f"width {width} (an even number of 8-bit passes, so the result lands in `keys`)")


def _min_log256_for_n(n: int) -> int:
    """The smallest depth D >= 1 with 256**D >= n."""
    d, cap = 1, RADIX
    while cap < n:
        cap, d = cap * RADIX, d + 1
    return d


def sort_scratch_slots(n: Any, log256_max_n: int | None = None) -> Any:
    """The u32 scratch slots `sort` needs for `n` keys at scan depth `log256_max_n` (default: the least depth for
    `n`, host only): the tiles' digit table, `ceil(n / 256) * 256`, plus one partial per 256 entries of each of
    the D - 1 levels above it; at least 1, so it can size an allocation. With an explicit depth it is plain
    arithmetic, so a kernel can call it on a device-read count."""
    if log256_max_n is None:
        log256_max_n = _min_log256_for_n(n)
    _validate_log256_max_n(log256_max_n)
    level = (n + (TILE - 1)) // TILE * RADIX
    total = level
    for _ in range(log256_max_n - 1):
        level = (level + (TILE - 1)) // TILE
        total = total + level
    return total + (total < 1)


@func
def _sortable_digit(key: Any, key_dtype: template(), shift: template()) -> i32:
    """Digit `(bits >> shift) & 255` of `key`'s bits in an unsigned order that is the key's order."""
    if static(_WIDTH[key_dtype] == 32):
        bits = bit_cast(key, u32)
        if static(key_dtype == i32):
            bits = bits ^ u32(0x80000000)
        elif static(key_dtype == f32):
            bits = bits ^ (bit_cast(bit_cast(bits, i32) >> 31, u32) | u32(0x80000000))
        return i32((bits >> u32(shift)) & u32(RADIX - 1))
    else:
        wide = bit_cast(key, u64)
        if static(key_dtype == i64):
            wide = wide ^ u64(0x8000000000000000)
        elif static(key_dtype == f64):
            wide = wide ^ (bit_cast(bit_cast(wide, i64) >> 63, u64) | u64(0x8000000000000000))
        return i32((wide >> u64(shift)) & u64(RADIX - 1))


@func
def _count_digits(src: template(), scratch: template(), count: i32, tiles: i32, key_dtype: template(),
                  shift: template()) -> None:
    for t in range(tiles):
        for d in range(RADIX):
            scratch[d * tiles + t] = u32(0)
        for j in range(_min(count - t * TILE, TILE)):
            slot = _sortable_digit(src[t * TILE + j], key_dtype, shift) * tiles + t
            scratch[slot] = scratch[slot] + u32(1)


@func
def _block_sums(scratch: template(), off: i32, length: i32, up: i32, blocks: i32) -> None:
    """scratch[up + b] = the sum of the b-th block of 256 entries of the level at `off`."""
    for b in range(blocks):
        s = u32(0)
        for j in range(b * TILE, _min(b * TILE + TILE, length)):
            s += scratch[off + j]
        scratch[up + b] = s


@func
def _serial_scan(scratch: template(), off: i32, length: i32) -> None:
    """Exclusive scan of the top level, by one thread."""
    for _ in range(1):
        run = u32(0)
        for j in range(length):
            v = scratch[off + j]
            scratch[off + j] = run
            run += v


@func
def _block_scans(scratch: template(), off: i32, length: i32, up: i32, blocks: i32) -> None:
    """Exclusive scan of each 256-entry block of the level at `off`, from its block's scanned sum at `up + b`."""
    for b in range(blocks):
        run = scratch[up + b]
        for j in range(b * TILE, _min(b * TILE + TILE, length)):
            v = scratch[off + j]
            scratch[off + j] = run
            run += v


@func
def _scatter(src: template(), dst: template(), vsrc: template(), vdst: template(), scratch: template(), count: i32,
             tiles: i32, key_dtype: template(), shift: template(), has_values: template()) -> None:
    for t in range(tiles):
        for j in range(_min(count - t * TILE, TILE)):
            i = t * TILE + j
            key = src[i]
            slot = _sortable_digit(key, key_dtype, shift) * tiles + t
            pos = i32(scratch[slot])
            scratch[slot] = u32(pos + 1)
            dst[pos] = key
            if static(has_values):
                vdst[pos] = vsrc[i]


def _exclusive_scan(scratch: Any, length: Any, depth: int) -> None:
    """Emit the staircase scan of `scratch[0:length]` (Python at compile time: `depth` is a constant)."""
    offs, lens = [0], [length]
    for _ in range(depth - 1):
        offs.append(offs[-1] + lens[-1])
        lens.append((lens[-1] + (TILE - 1)) // TILE)
    for k in range(depth - 1):
        _block_sums(scratch, offs[k], lens[k], offs[k + 1], lens[k + 1])
    _serial_scan(scratch, offs[-1], lens[-1])
    for k in reversed(range(depth - 1)):
        _block_scans(scratch, offs[k], lens[k], offs[k + 1], lens[k + 1])


def _emit_pass(p: int, keys: Any, tmp_keys: Any, values: Any, tmp_values: Any, scratch: Any, count: Any, tiles: Any,
               key_dtype: Any, has_values: bool, depth: int) -> None:
    """One 8-bit pass (Python at compile time): even passes go keys -> tmp_keys, odd ones back."""
    src, dst = (keys, tmp_keys) if p % 2 == 0 else (tmp_keys, keys)
    vsrc, vdst = (values, tmp_values) if p % 2 == 0 else (tmp_values, values)
    _count_digits(src, scratch, count, tiles, key_dtype, p * RADIX_BITS)
    _exclusive_scan(scratch, tiles * RADIX, depth)
    _scatter(src, dst, vsrc, vdst, scratch, count, tiles, key_dtype, p * RADIX_BITS, has_values)


@func(requires_top_level=True)
def sort(keys: template(), tmp_keys: template(), values: template(), tmp_values: template(), scratch: template(),
         n: template(), key_dtype: template(), has_values: template(), end_bit: template(),
         log256_max_n: template()) -> None:
    """Sort the first `n[()]` keys (and values) ascending; see the module docstring for the contract."""
    _validate_log256_max_n(log256_max_n)
    _check_end_bit(end_bit, _key_width(key_dtype))
    count = _max(i32(n[()]), 0)
    fits = count <= keys.shape[0] and sort_scratch_slots(count, log256_max_n) <= scratch.shape[0]
    assert fits, "qd.algorithms.sort: n exceeds the keys' length, or scratch has fewer than sort_scratch_slots(n) slots"
    count = count * i32(fits)
    tiles = (count + (TILE - 1)) // TILE
    for p in static(range(end_bit // RADIX_BITS)):
        _emit_pass(p, keys, tmp_keys, values, tmp_values, scratch, count, tiles, key_dtype, has_values, log256_max_n)


__all__ = ["sort", "sort_scratch_slots"]
