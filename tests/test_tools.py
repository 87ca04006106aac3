"""`qd.tools`: PLY files parsed back equal what was written (and what Quadrants' PLYWriter writes); image files
round-trip through imwrite/imread with the [x, y], y-up axis convention."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import qd
from qd.tools import PLYWriter, image
from tests.peers import SKIP_REASON, peer_python, run_json

_PLY_DTYPES = {"char": "i1", "uchar": "u1", "short": "i2", "ushort": "u2", "int": "i4", "uint": "u4",
               "float": "f4", "double": "f8"}


# ---------------------------------------------------------------------------------------------- a PLY reader


def _read_header(data: bytes) -> tuple[str, list[tuple[str, int, list[tuple[str, ...]]]], int]:
    """(format, [(element, count, [(type, name) or ("list", count type, item type, name)])], body offset)."""
    end = data.index(b"end_header\n") + len(b"end_header\n")
    fmt, elements = "", []
    for line in data[:end].decode("ascii").splitlines():
        words = line.split()
        if words[0] == "format":
            fmt = words[1]
        elif words[0] == "element":
            elements.append((words[1], int(words[2]), []))
        elif words[0] == "property":
            elements[-1][2].append(tuple(words[1:]))
    return fmt, elements, end


def read_ply(path: Path) -> dict[str, dict[str, np.ndarray]]:
    """A PLY file's elements: {element: {property: column}}; a list property is a (count, k) array (every list of
    one file has the same length here)."""
    data = path.read_bytes()
    fmt, elements, offset = _read_header(data)
    if fmt == "ascii":
        rows = iter(data[offset:].decode("ascii").splitlines())
        return {name: _ascii_element(rows, count, props) for name, count, props in elements}
    order = "<" if fmt == "binary_little_endian" else ">"
    out = {}
    for name, count, props in elements:
        out[name], offset = _binary_element(data, offset, order, count, props)
    assert offset == len(data), "trailing bytes after the last element"
    return out


def _ascii_element(rows, count: int, props: list[tuple[str, ...]]) -> dict[str, np.ndarray]:
    values: dict[str, list] = {p[-1]: [] for p in props}
    for _ in range(count):
        words = next(rows).split()
        for p in props:
            if p[0] == "list":
                n = int(words.pop(0))
                values[p[-1]].append([int(w) for w in words[:n]])
                del words[:n]
            else:
                values[p[-1]].append(words.pop(0))
        assert not words
    return {p[-1]: np.array(values[p[-1]], dtype=_PLY_DTYPES[p[2] if p[0] == "list" else p[0]]) for p in props}


def _binary_element(data: bytes, offset: int, order: str, count: int,
                    props: list[tuple[str, ...]]) -> tuple[dict[str, np.ndarray], int]:
    fields = []
    for p in props:
        if p[0] == "list":  # fixed length: read the first count to know it
            n = int(np.frombuffer(data, dtype=order + _PLY_DTYPES[p[1]], count=1, offset=offset)[0])
            fields += [(p[-1] + "#n", order + _PLY_DTYPES[p[1]]), (p[-1], order + _PLY_DTYPES[p[2]], (n,))]
        else:
            fields.append((p[-1], order + _PLY_DTYPES[p[0]]))
    dtype = np.dtype(fields)
    rows = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
    return {p[-1]: rows[p[-1]] for p in props}, offset + dtype.itemsize * count


# ---------------------------------------------------------------------------------------------- PLY


def _mesh(rng: np.random.Generator, face_type: str = "tri") -> tuple[PLYWriter, dict]:
    nv, nf = 7, 4
    per = 3 if face_type == "tri" else 4
    d = {"pos": rng.random((3, nv)), "color": rng.random((3, nv)).astype(np.float32),
         "uv": rng.random((nv, 2)), "tag": rng.integers(0, 255, nv), "faces": rng.integers(0, nv, (nf, per)),
         "area": rng.random(nf)}
    w = PLYWriter(nv, nf, face_type, comment="qd test")
    w.add_vertex_pos(*d["pos"])
    w.add_vertex_color(*d["color"])
    w.add_vertex_channel("uv", "double", d["uv"])
    w.add_vertex_channel("tag", "uchar", d["tag"])
    w.add_vertex_id()
    w.add_faces(d["faces"].ravel())
    w.add_face_channel("area", "float", d["area"])
    w.add_face_id()
    return w, d


def _check_mesh(ply: dict, d: dict) -> None:
    v, f = ply["vertex"], ply["face"]
    assert list(v) == ["x", "y", "z", "red", "green", "blue", "uv_1", "uv_2", "tag", "id"]
    for axis, key in enumerate("xyz"):
        np.testing.assert_array_equal(v[key], d["pos"][axis].astype(np.float32))
        assert v[key].dtype == np.float32
    for axis, key in enumerate(("red", "green", "blue")):
        np.testing.assert_array_equal(v[key], d["color"][axis])
    np.testing.assert_array_equal(v["uv_1"], d["uv"][:, 0])  # double: exact
    np.testing.assert_array_equal(v["uv_2"], d["uv"][:, 1])
    np.testing.assert_array_equal(v["tag"], d["tag"])
    np.testing.assert_array_equal(v["id"], np.arange(len(v["id"])))
    np.testing.assert_array_equal(f["vertex_indices"], d["faces"])
    np.testing.assert_array_equal(f["area"], d["area"].astype(np.float32))
    np.testing.assert_array_equal(f["id"], np.arange(len(f["id"])))


@pytest.mark.parametrize("face_type", ["tri", "quad"])
@pytest.mark.parametrize("export", ["export", "export_ascii"])
def test_ply_parsed_back_equals_the_inputs(tmp_path: Path, export: str, face_type: str) -> None:
    w, d = _mesh(np.random.default_rng(1), face_type)
    getattr(w, export)(str(tmp_path / "m.ply"))
    text = (tmp_path / "m.ply").read_bytes()
    assert text.startswith(b"ply\nformat " + (b"ascii" if export == "export_ascii" else b"binary_"))
    assert b"comment qd test\n" in text
    _check_mesh(read_ply(tmp_path / "m.ply"), d)


def test_ply_point_cloud_and_frames(tmp_path: Path) -> None:
    w = PLYWriter(3)
    w.add_vertex_pos(np.arange(3.0), np.ones(3), np.zeros(3))
    w.add_vertex_normal(np.zeros(3), np.zeros(3), np.ones(3))
    w.export_frame(12, str(tmp_path / "cloud.ply"))
    w.export_frame_ascii(3, str(tmp_path / "text"))
    ply = read_ply(tmp_path / "cloud_000012.ply")
    assert list(ply) == ["vertex"] and list(ply["vertex"]) == ["x", "y", "z", "nx", "ny", "nz"]
    np.testing.assert_array_equal(read_ply(tmp_path / "text_000003.ply")["vertex"]["x"], [0, 1, 2])


def test_ply_accepts_qd_fields(arch: object, tmp_path: Path) -> None:
    pos = qd.Vector.field(3, qd.f32, shape=5)
    pos.from_numpy(np.arange(15, dtype=np.float32).reshape(5, 3))
    w = PLYWriter(5)
    w.add_vertex_channel("p", "float", pos)  # a (5, 3) channel: p_1, p_2, p_3
    w.add_vertex_pos(np.zeros(5), np.zeros(5), np.zeros(5))
    w.export(str(tmp_path / "f.ply"))
    v = read_ply(tmp_path / "f.ply")["vertex"]
    np.testing.assert_array_equal(np.stack([v["p_1"], v["p_2"], v["p_3"]], 1), pos.to_numpy())


def test_ply_refusals(tmp_path: Path) -> None:
    w = PLYWriter(2, 1)
    with pytest.warns(UserWarning, match="unknown PLY type 'half'"):
        w.add_vertex_channel("h", "half", np.zeros(2))
    with pytest.raises(ValueError, match="vertex positions are missing"):
        w.export(str(tmp_path / "x.ply"))
    w.add_vertex_pos(np.zeros(2), np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match="face indices"):  # add_faces never called: the indices are -1
        w.export(str(tmp_path / "x.ply"))
    with pytest.raises(ValueError, match="need 3 indices"):
        w.add_faces(np.arange(4))
    with pytest.raises(ValueError, match="shape"):
        w.add_vertex_channel("bad", "float", np.zeros(3))
    with pytest.raises(ValueError, match="face_type"):
        PLYWriter(2, 1, "hex")


def test_ply_matches_quadrants_plywriter(tmp_path: Path) -> None:
    """The same mesh through Quadrants' own PLYWriter (peer venv) parses to the same elements as through qd's."""
    python = peer_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    rng = np.random.default_rng(2)
    w, d = _mesh(rng)
    np.savez(tmp_path / "d.npz", **d)
    w.export(str(tmp_path / "qd.ply"))
    w.export_ascii(str(tmp_path / "qd_ascii.ply"))
    code = (f"import json, numpy as np\nfrom quadrants.tools import PLYWriter\nd = np.load({str(tmp_path / 'd.npz')!r})\n"
            "w = PLYWriter(7, 4, 'tri', comment='qd test')\nw.add_vertex_pos(*d['pos'])\n"
            "w.add_vertex_color(*d['color'])\nw.add_vertex_channel('uv', 'double', d['uv'].copy())\n"
            "w.add_vertex_channel('tag', 'uchar', d['tag'])\nw.add_vertex_id()\nw.add_faces(d['faces'].ravel())\n"
            "w.add_face_channel('area', 'float', d['area'])\nw.add_face_id()\n"
            f"w.export({str(tmp_path / 'q.ply')!r})\nw.export_ascii({str(tmp_path / 'q_ascii.ply')!r})\n"
            "print(json.dumps('ok'))\n")
    assert run_json(python, code, cwd=tmp_path) == "ok"
    for ours, theirs in (("qd.ply", "q.ply"), ("qd_ascii.ply", "q_ascii.ply")):
        a, b = read_ply(tmp_path / ours), read_ply(tmp_path / theirs)
        assert a.keys() == b.keys()
        for element in a:
            assert list(a[element]) == list(b[element])
            for prop in a[element]:
                np.testing.assert_array_equal(a[element][prop], b[element][prop], err_msg=f"{element}.{prop}")


# ---------------------------------------------------------------------------------------------- images


@pytest.fixture
def pil():
    return pytest.importorskip("PIL.Image", reason='Pillow is not installed (pip install "qd-lang[image]")')


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_imwrite_imread_round_trip_uint8(pil, tmp_path: Path, channels: int) -> None:
    img = np.random.default_rng(3).integers(0, 256, (5, 4, channels), dtype=np.uint8)
    qd.tools.imwrite(img, tmp_path / "a.png")
    back = qd.tools.imread(tmp_path / "a.png")
    assert back.shape == (5, 4, channels) and back.dtype == np.uint8
    np.testing.assert_array_equal(back, img)
    grey = img[:, :, 0]
    qd.tools.imwrite(grey, str(tmp_path / "g.png"))  # a 2-D image is greyscale
    np.testing.assert_array_equal(qd.tools.imread(str(tmp_path / "g.png"))[:, :, 0], grey)


def test_the_axis_convention_is_x_right_y_up(pil, tmp_path: Path) -> None:
    """img[x, y]: the file is height rows of width pixels, and img[0, 0] is its bottom-left pixel."""
    img = np.zeros((6, 3, 3), dtype=np.uint8)
    img[0, 0] = (255, 0, 0)  # bottom left: red
    img[5, 2] = (0, 255, 0)  # top right: green
    img[1, 2] = (0, 0, 255)  # top row, second column: blue
    qd.tools.imwrite(img, tmp_path / "axes.png")
    with pil.open(tmp_path / "axes.png") as f:
        rows = np.asarray(f)
    assert rows.shape == (3, 6, 3)  # (rows = height, columns = width, channels)
    assert tuple(rows[2, 0]) == (255, 0, 0) and tuple(rows[0, 5]) == (0, 255, 0) and tuple(rows[0, 1]) == (0, 0, 255)
    np.testing.assert_array_equal(qd.tools.imread(tmp_path / "axes.png"), img)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_images_scale_from_0_1(pil, tmp_path: Path, dtype: type) -> None:
    img = np.random.default_rng(4).uniform(-0.2, 1.2, (4, 5, 3)).astype(dtype)
    img[0, 0] = (0.0, 0.5, 1.0)
    qd.tools.imwrite(img, tmp_path / "f.png")
    back = qd.tools.imread(tmp_path / "f.png")
    np.testing.assert_array_equal(back, (np.clip(img, 0, 1) * 255).astype(np.uint8))  # truncated
    assert tuple(back[0, 0]) == (0, 127, 255)
    assert np.abs(back / 255.0 - np.clip(img, 0, 1)).max() < 1 / 255


def test_wide_integers_keep_their_top_byte(pil, tmp_path: Path) -> None:
    img = np.array([[0, 255], [256, 65535]], dtype=np.uint16)
    qd.tools.imwrite(img, tmp_path / "u16.png")
    np.testing.assert_array_equal(qd.tools.imread(tmp_path / "u16.png")[:, :, 0], [[0, 0], [1, 255]])
    with pytest.raises(ValueError, match="dtype int32"):
        qd.tools.imwrite(img.astype(np.int32), tmp_path / "i32.png")
    with pytest.raises(ValueError, match="shape"):
        qd.tools.imwrite(np.zeros((2, 2, 5), np.uint8), tmp_path / "c5.png")


def test_imread_converts_channels(pil, tmp_path: Path) -> None:
    img = np.random.default_rng(5).integers(0, 256, (3, 2, 3), dtype=np.uint8)
    qd.tools.imwrite(img, tmp_path / "c.png")
    assert qd.tools.imread(tmp_path / "c.png", channels=4).shape == (3, 2, 4)
    np.testing.assert_array_equal(qd.tools.imread(tmp_path / "c.png", channels=4)[:, :, 3], 255)
    assert qd.tools.imread(tmp_path / "c.png", channels=1).shape == (3, 2, 1)
    pil.fromarray(np.array([[1000, 65535]], dtype=np.uint16)).save(tmp_path / "w.png")  # 16-bit grey
    np.testing.assert_array_equal(qd.tools.imread(tmp_path / "w.png")[:, 0, 0], [1000 >> 8, 255])


def test_imwrite_a_qd_field(pil, arch: object, tmp_path: Path) -> None:
    """A field is written as its array is: f[x, y], y up; a vector field's components are the channels."""
    w, h = 6, 4
    rgb = qd.Vector.field(3, qd.f32, shape=(w, h))

    @qd.kernel
    def paint():
        for x, y in rgb:
            rgb[x, y] = qd.Vector([x / (w - 1), y / (h - 1), 0.25])

    paint()
    qd.tools.imwrite(rgb, tmp_path / "field.png")
    back = qd.tools.imread(tmp_path / "field.png")
    np.testing.assert_array_equal(back, (np.clip(rgb.to_numpy(), 0, 1) * 255).astype(np.uint8))
    assert tuple(back[w - 1, 0]) == (255, 0, 63) and tuple(back[0, h - 1]) == (0, 255, 63)
    grey = qd.field(qd.u8, shape=(w, h))
    grey.from_numpy(np.arange(w * h, dtype=np.uint8).reshape(w, h))
    qd.tools.imwrite(grey, tmp_path / "grey.png")
    np.testing.assert_array_equal(qd.tools.imread(tmp_path / "grey.png")[:, :, 0], grey.to_numpy())


def test_imresize_is_nearest_neighbour() -> None:
    img = np.arange(12).reshape(4, 3)
    out = qd.tools.imresize(img, 8, 6)
    assert out.shape == (8, 6)
    np.testing.assert_array_equal(out, img[np.arange(8) // 2][:, np.arange(6) // 2])
    assert qd.tools.imresize(img, 4, 3) is img
    assert qd.tools.imresize(np.zeros((4, 4, 3)), 2).shape == (2, 2, 3)


def test_without_pillow_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now fails
    with pytest.raises(ImportError, match=r'pip install "qd-lang\[image\]"'):
        image.imwrite(np.zeros((2, 2), np.uint8), tmp_path / "x.png")


def test_imwrite_matches_quadrants_when_it_has_one(pil, tmp_path: Path) -> None:
    """Quadrants' own imwrite, when the peer venv's Quadrants has one, writes the same pixels."""
    python = peer_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    has = run_json(python, "import json, quadrants\nprint(json.dumps(hasattr(quadrants.tools, 'imwrite')))",
                   cwd=tmp_path)
    if not has:
        pytest.skip("the peer venv's Quadrants has no quadrants.tools.imwrite (1.3.3 ships no image I/O): qd follows "
                    "the convention of its lineage (Taichi's ti.tools), checked in test_the_axis_convention_is_x_right_y_up")
    img = np.random.default_rng(6).random((5, 3, 3)).astype(np.float32)
    np.save(tmp_path / "img.npy", img)
    run_json(python, f"import json, numpy as np, quadrants\nquadrants.tools.imwrite(np.load({str(tmp_path / 'img.npy')!r}), "
                     f"{str(tmp_path / 'q.png')!r})\nprint(json.dumps(0))", cwd=tmp_path)
    qd.tools.imwrite(img, tmp_path / "qd.png")
    with pil.open(tmp_path / "q.png") as a, pil.open(tmp_path / "qd.png") as b:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
