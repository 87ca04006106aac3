"""`qd.tools.imwrite`, `imread`, `imresize`: image files to and from arrays indexed as fields are, `img[x, y]`.

The convention is that of Quadrants' lineage (Taichi's `ti.tools`; Quadrants 1.3.3 itself ships no image I/O): an
image array has shape (width, height) or (width, height, channels), x runs to the right and y *up*, so file row 0
(the top) holds y = height - 1. A field of shape (w, h), or a vector field of n = 1, 3 or 4 components, is written
as it is displayed.

Values on write: uint8 as they are; uint16/32/64 their top byte (Taichi divides by max // 256, which wraps the
largest values round to small ones: 65535 -> 257 -> 1); floats clipped to [0, 1] and scaled by 255, truncated
(1.0 -> 255, 0.5 -> 127), as Taichi's. `imread` returns uint8 of shape (w, h, c).

The files go through Pillow, an optional dependency (`pip install "qd-lang[image]"`); its absence is reported only
when an image is read or written. The format follows the file's extension (.png, .jpg, .bmp, ...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}  # channels <-> Pillow mode


def _pil_image() -> Any:
    """Pillow's `Image` module, or an ImportError saying how to install it."""
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError('qd.tools image I/O needs Pillow, which is not installed (pip install "qd-lang[image]", '
                          f"or pip install pillow): {e}") from e
    return Image


def _as_array(img: Any) -> np.ndarray:
    """A numpy array of an image: numpy arrays as they are, qd fields and ndarrays through `to_numpy()`."""
    return np.asarray(img.to_numpy() if hasattr(img, "to_numpy") else img)


def to_uint8(img: np.ndarray) -> np.ndarray:
    """`img`'s values as uint8 (see the module's docstring): the conversion `imwrite` applies."""
    if img.dtype == np.uint8:
        return img
    if img.dtype in (np.uint16, np.uint32, np.uint64):
        return (img >> (8 * img.dtype.itemsize - 8)).astype(np.uint8)
    if np.issubdtype(img.dtype, np.floating):
        return (np.clip(img, 0.0, 1.0) * 255.0).astype(np.uint8)
    raise ValueError(f"qd.tools.imwrite: images of dtype {img.dtype} are not supported "
                     "(uint8, uint16, uint32, uint64, or floats in [0, 1])")


def to_rows(img: Any) -> np.ndarray:
    """An image array `img[x, y(, c)]` as file rows `rows[row, column, c]`, uint8, contiguous: what Pillow writes."""
    arr = _as_array(img)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[2] not in _MODES:
        raise ValueError(f"qd.tools.imwrite: an image has shape (w, h) or (w, h, c) with c in 1..4, got {arr.shape}")
    return np.ascontiguousarray(to_uint8(arr).swapaxes(0, 1)[::-1])


def from_rows(rows: np.ndarray) -> np.ndarray:
    """File rows `rows[row, column(, c)]` as an image array `img[x, y, c]` (the inverse of `to_rows`)."""
    if rows.ndim == 2:
        rows = rows[:, :, None]
    return np.ascontiguousarray(rows[::-1].swapaxes(0, 1))


def imwrite(img: Any, filename: Any) -> None:
    """Write `img` (a numpy array, qd field or ndarray, indexed [x, y(, c)], c in 1..4) to the file `filename`."""
    rows = to_rows(img)
    # Pillow infers the mode from the shape (uint8: L, LA, RGB, RGBA); its `mode` argument is deprecated
    image = _pil_image().fromarray(rows[:, :, 0] if rows.shape[2] == 1 else rows)
    image.save(str(filename))


def imread(filename: Any, channels: int = 0) -> np.ndarray:
    """Read an image file as uint8 of shape (w, h, c), indexed [x, y] with y up. `channels`: 0 keeps the file's
    (grey 1, grey+alpha 2, colour 3, colour+alpha 4); 1..4 converts to that many."""
    if channels not in (0, *_MODES):
        raise ValueError(f"qd.tools.imread: channels is 0 (the file's) or 1..4, got {channels}")
    with _pil_image().open(str(filename)) as image:
        image = _to_8bit(image)
        mode = _MODES[channels] if channels else _natural_mode(image)
        rows = np.asarray(image if image.mode == mode else image.convert(mode))
    return from_rows(rows)


def _to_8bit(image: Any) -> Any:
    """A 16-bit greyscale image (Pillow's modes I;16* and I) as 8-bit, each value's top byte (Pillow's own
    conversion clips at 255 instead)."""
    if image.mode.startswith("I"):
        wide = np.asarray(image).astype(np.int64)
        return _pil_image().fromarray(np.clip(wide >> 8, 0, 255).astype(np.uint8))
    return image


def _natural_mode(image: Any) -> str:
    """The mode an image reads in when no channel count is asked for: its own when it is one of L, LA, RGB, RGBA;
    else colour, with alpha when the image has transparency (palette images, CMYK, bilevel, ...)."""
    if image.mode in _MODES.values():
        return image.mode
    if image.mode == "1":
        return "L"
    has_alpha = "A" in image.getbands() or "transparency" in image.info
    return "RGBA" if has_alpha else "RGB"


def imresize(img: Any, w: int, h: int | None = None) -> np.ndarray:
    """`img` (indexed [x, y(, c)]) resized to w x h (h defaults to w) by nearest neighbour: output cell (x, y)
    takes input cell (floor(x * W / w), floor(y * H / h)). Any dtype; an image already that size is returned as
    it is."""
    arr = _as_array(img)
    h = w if not h else h
    if (w, h) == arr.shape[:2]:
        return arr
    xs = np.clip((np.arange(w) * (arr.shape[0] / w)).astype(np.int64), 0, arr.shape[0] - 1)
    ys = np.clip((np.arange(h) * (arr.shape[1] / h)).astype(np.int64), 0, arr.shape[1] - 1)
    return arr[np.ix_(xs, ys)]


__all__ = ["imread", "imresize", "imwrite"]
