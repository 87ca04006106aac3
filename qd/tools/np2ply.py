"""`qd.tools.PLYWriter`: point clouds and meshes (per-vertex and per-face channels) written as PLY files.

The API is Quadrants' (`quadrants.tools.np2ply.PLYWriter`): declare the vertex and face counts, add channels
(`add_vertex_pos`, `add_vertex_color`, `add_vertex_channel`, `add_faces`, `add_face_channel`, ...), then `export`
(binary, the machine's byte order), `export_ascii`, or `export_frame` / `export_frame_ascii` (`<path>_000012.ply`).
A channel of n columns becomes n properties `key_1`..`key_n`; a channel of an unknown PLY type is skipped with a
warning, as Quadrants skips it. Besides numpy arrays, every channel accepts what has `.to_numpy()` (qd fields and
ndarrays).
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import numpy as np

# PLY's scalar types and the numpy dtypes they store.
PLY_TYPES: dict[str, type] = {
    "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
    "int": np.int32, "uint": np.uint32, "float": np.float32, "double": np.float64,
}
_FACE_SIZES = {"tri": 3, "quad": 4}


def _as_array(data: Any) -> np.ndarray:
    """A numpy view of a channel's data: numpy arrays as they are, qd fields and ndarrays through `to_numpy()`."""
    return np.asarray(data.to_numpy() if hasattr(data, "to_numpy") else data)


def _frame_path(series_num: int, path: str) -> str:
    """Frame `series_num` of a series at `path`: `<path without .ply>_<6 digits>.ply`."""
    return f"{path.removesuffix('.ply')}_{series_num:06d}.ply"


class _Element:
    """One PLY element (the vertices, or the faces): its count and its named, typed property columns."""

    def __init__(self, kind: str, count: int) -> None:
        self.kind = kind
        self.count = count
        self.names: list[str] = []
        self.types: list[str] = []
        self.columns: list[np.ndarray] = []

    def add(self, key: str, data_type: str, data: Any) -> None:
        """Add a channel: one column (`key`) for 1-D data, n columns (`key_1`..`key_n`) for (count, n) data."""
        if data_type not in PLY_TYPES:
            warnings.warn(f"PLYWriter: unknown PLY type {data_type!r}: the {self.kind} channel {key!r} is skipped "
                          f"(types: {', '.join(PLY_TYPES)})", stacklevel=3)
            return
        arr = _as_array(data)
        if arr.ndim == 1 and arr.size == self.count:
            self._add_column(key, data_type, arr)
            return
        if arr.ndim != 2 or not self.count or arr.size % self.count:  # as Quadrants: any 2-D array of count * n values, row-major
            raise ValueError(f"PLYWriter: the {self.kind} channel {key!r} has shape {arr.shape}; it needs "
                             f"({self.count},) or ({self.count}, n)")
        cols = arr.reshape(self.count, arr.size // self.count)
        for c in range(cols.shape[1]):
            self._add_column(f"{key}_{c + 1}", data_type, cols[:, c])

    def _add_column(self, name: str, data_type: str, column: np.ndarray) -> None:
        if name in self.names:
            warnings.warn(f"PLYWriter: duplicate {self.kind} channel {name!r}", stacklevel=4)
        self.names.append(name)
        self.types.append(data_type)
        self.columns.append(column.astype(PLY_TYPES[data_type]))

    def header_lines(self) -> list[str]:
        return [f"property {t} {n}" for t, n in zip(self.types, self.names)]


class PLYWriter:
    """Collects vertex and face channels and writes them as a PLY file (see the module's docstring).

    Args:
        num_vertices: the number of vertices (> 0).
        num_faces: the number of faces (>= 0).
        face_type: "tri" (3 vertices a face) or "quad" (4).
        comment: the header's comment line.
    """

    def __init__(self, num_vertices: int, num_faces: int = 0, face_type: str = "tri",
                 comment: str = "created by PLYWriter") -> None:
        if num_vertices <= 0:
            raise ValueError(f"PLYWriter: num_vertices must be positive, got {num_vertices}")
        if num_faces < 0:
            raise ValueError(f"PLYWriter: num_faces must not be negative, got {num_faces}")
        if face_type not in _FACE_SIZES:
            raise ValueError(f"PLYWriter: face_type must be 'tri' or 'quad', got {face_type!r}")
        self.num_vertices = num_vertices
        self.num_faces = num_faces
        self.face_type = face_type
        self.comment = comment
        self._vertices = _Element("vertex", num_vertices)
        self._faces = _Element("face", num_faces)
        self.face_indices = -np.ones((num_faces, _FACE_SIZES[face_type]), dtype=np.int32)

    # ------------------------------------------------------------------ vertex channels

    def add_vertex_channel(self, key: str, data_type: str, data: Any) -> None:
        """A per-vertex channel of PLY type `data_type` ("float", "int", "uchar", ...): shape (n,) or (n, k)."""
        self._vertices.add(key, data_type, data)

    def add_vertex_pos(self, x: Any, y: Any, z: Any) -> None:
        """The vertices' coordinates (properties x, y, z; float)."""
        self._add_vertex_floats(("x", "y", "z"), (x, y, z))

    def add_vertex_normal(self, nx: Any, ny: Any, nz: Any) -> None:
        """Normals at the vertices (nx, ny, nz; float)."""
        self._add_vertex_floats(("nx", "ny", "nz"), (nx, ny, nz))

    def add_vertex_vel(self, vx: Any, vy: Any, vz: Any) -> None:
        """Velocities at the vertices (vx, vy, vz; float)."""
        self._add_vertex_floats(("vx", "vy", "vz"), (vx, vy, vz))

    def add_vertex_color(self, r: Any, g: Any, b: Any) -> None:
        """Colours at the vertices (red, green, blue; float)."""
        self._add_vertex_floats(("red", "green", "blue"), (r, g, b))

    def add_vertex_alpha(self, alpha: Any) -> None:
        """Opacity at the vertices (Alpha; float)."""
        self._add_vertex_floats(("Alpha",), (alpha,))

    def add_vertex_rgba(self, r: Any, g: Any, b: Any, a: Any) -> None:
        """Colours and opacity at the vertices (red, green, blue, Alpha; float)."""
        self._add_vertex_floats(("red", "green", "blue", "Alpha"), (r, g, b, a))

    def add_vertex_id(self) -> None:
        """Each vertex's index (id; int)."""
        self.add_vertex_channel("id", "int", np.arange(self.num_vertices))

    def add_vertex_piece(self, piece: Any) -> None:
        """A piece number per vertex (piece; int)."""
        self.add_vertex_channel("piece", "int", piece)

    def _add_vertex_floats(self, keys: tuple[str, ...], arrays: tuple[Any, ...]) -> None:
        for key, data in zip(keys, arrays):
            self.add_vertex_channel(key, "float", data)

    # ------------------------------------------------------------------ faces

    def add_faces(self, indices: Any) -> None:
        """The faces' vertex indices: num_faces * (3 or 4) integers, in any shape."""
        per_face = _FACE_SIZES[self.face_type]
        arr = _as_array(indices)
        if arr.size != per_face * self.num_faces:
            raise ValueError(f"PLYWriter: {self.num_faces} {self.face_type} faces need {per_face * self.num_faces} "
                             f"indices, got {arr.size}")
        self.face_indices = arr.reshape(self.num_faces, per_face).astype(np.int32)

    def add_face_channel(self, key: str, data_type: str, data: Any) -> None:
        """A per-face channel of PLY type `data_type`: shape (num_faces,) or (num_faces, k)."""
        self._faces.add(key, data_type, data)

    def add_face_id(self) -> None:
        """Each face's index (id; int)."""
        self.add_face_channel("id", "int", np.arange(self.num_faces))

    def add_face_piece(self, piece: Any) -> None:
        """A piece number per face (piece; int)."""
        self.add_face_channel("piece", "int", piece)

    # ------------------------------------------------------------------ output

    def sanity_check(self) -> None:
        """Raise ValueError unless the positions are set and every face index names a vertex."""
        missing = [c for c in ("x", "y", "z") if c not in self._vertices.names]
        if missing:
            raise ValueError(f"PLYWriter: the vertex positions are missing ({', '.join(missing)}): "
                             "call add_vertex_pos first")
        if self.num_faces and (self.face_indices.min() < 0 or self.face_indices.max() >= self.num_vertices):
            raise ValueError(f"PLYWriter: face indices must lie in [0, {self.num_vertices}); call add_faces "
                             "with valid indices")

    def header(self, fmt: str) -> str:
        """The PLY header for format `fmt` ("ascii", "binary_little_endian", "binary_big_endian")."""
        lines = ["ply", f"format {fmt} 1.0", f"comment {self.comment}",
                 f"element vertex {self.num_vertices}", *self._vertices.header_lines()]
        if self.num_faces:
            lines += [f"element face {self.num_faces}", "property list uchar int vertex_indices",
                      *self._faces.header_lines()]
        return "\n".join(lines + ["end_header"]) + "\n"

    def export(self, path: str) -> None:
        """Write a binary PLY file in the machine's byte order."""
        self.sanity_check()
        with open(path, "wb") as f:
            f.write(self.header(f"binary_{sys.byteorder}_endian").encode("ascii"))
            f.write(_packed_rows(self._vertices.columns).tobytes())
            if self.num_faces:
                f.write(self._face_rows().tobytes())

    def export_ascii(self, path: str) -> None:
        """Write an ASCII PLY file (floats printed in their shortest exact form)."""
        self.sanity_check()
        with open(path, "w", encoding="ascii") as f:
            f.write(self.header("ascii"))
            f.writelines(" ".join(str(col[i]) for col in self._vertices.columns) + "\n"
                         for i in range(self.num_vertices))
            per_face = self.face_indices.shape[1]
            for i in range(self.num_faces):
                fields = [str(per_face), *map(str, self.face_indices[i]), *(str(c[i]) for c in self._faces.columns)]
                f.write(" ".join(fields) + "\n")

    def export_frame(self, series_num: int, path: str) -> None:
        """`export` to `<path>_<series_num, 6 digits>.ply` (a trailing .ply of `path` is dropped first)."""
        self.export(_frame_path(series_num, path))

    def export_frame_ascii(self, series_num: int, path: str) -> None:
        """`export_ascii` to `<path>_<series_num, 6 digits>.ply`."""
        self.export_ascii(_frame_path(series_num, path))

    def _face_rows(self) -> np.ndarray:
        per_face = self.face_indices.shape[1]
        count = np.full(self.num_faces, per_face, dtype=np.uint8)
        return _packed_rows([count, *(self.face_indices[:, j] for j in range(per_face)), *self._faces.columns])


def _packed_rows(columns: list[np.ndarray]) -> np.ndarray:
    """The columns as one packed record array (no padding), each value in the machine's byte order: a binary PLY
    element's body."""
    fields = [(f"f{i}", col.dtype) for i, col in enumerate(columns)]  # PLY names may repeat; these may not
    rows = np.empty(len(columns[0]), dtype=np.dtype(fields))
    for (field, _), col in zip(fields, columns):
        rows[field] = col
    return rows


__all__ = ["PLYWriter"]
