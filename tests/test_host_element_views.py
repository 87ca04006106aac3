"""Issue 33's wrong values: a host-side write through a field or ndarray element's component accessor lands
(`u[1, 0, 0].y = 3` was lost on a detached copy: Quadrants' `test_linalg::test_vector_xyzw_accessor`), and
`qd.math`'s unsigned vector types follow `default_ip` (Quadrants' `default_up`: `test_math_module::
test_vector_types_f64`)."""

from __future__ import annotations

import numpy as np
import pytest

import qd


@pytest.mark.parametrize("holder", ["field", "ndarray"])
def test_component_writes_on_host_elements_write_through(arch, holder):
    make = qd.Vector.field if holder == "field" else qd.Vector.ndarray
    u = make(4, qd.f32, shape=(2, 3))
    want = np.zeros((2, 3, 4), np.float32)
    u[1, 0].y = 3
    want[1, 0, 1] = 3
    u[1, 0].b = 4  # (rgba names the same components)
    want[1, 0, 2] = 4
    u[0, 2].xw = (7, 8)
    want[0, 2, [0, 3]] = 7, 8
    u[0, 1].fill(2)
    want[0, 1] = 2
    u[1, 2].x += 1.5
    want[1, 2, 0] += 1.5
    u[1, 1][3] = 6
    want[1, 1, 3] = 6
    np.testing.assert_array_equal(u.to_numpy(), want)
    m = (qd.Matrix.field if holder == "field" else qd.Matrix.ndarray)(2, 2, qd.i32, shape=3)
    m[1][0, 1] = 9
    m[2].fill(5)
    want_m = np.zeros((3, 2, 2), np.int32)
    want_m[1, 0, 1] = 9
    want_m[2] = 5
    np.testing.assert_array_equal(m.to_numpy(), want_m)


def test_a_detached_vector_is_not_written_back(arch):
    """A vector made on the host (not read from a field) has nothing to write through to."""
    v = qd.Vector([1.0, 2.0])
    v.y = 5
    assert list(v) == [1.0, 5.0]


@pytest.mark.parametrize("ip", ["i32", "i64"])
def test_unsigned_math_vectors_follow_default_ip(ip):
    wide = ip == "i64"
    qd.init(arch=qd.cpu, default_ip=getattr(qd, ip), default_fp=qd.f64 if wide else qd.f32, log_level="warn")
    up = qd.u64 if wide else qd.u32
    assert qd.math.uvec2.dtype is up and qd.math.uvec4.field(shape=2).dtype is up
    assert qd.math.ivec3.dtype is getattr(qd, ip)

    @qd.dataclass
    class Ray:
        pos: qd.math.vec3
        id: qd.math.uvec2

    top = 2**63 - 1 if wide else 2**32 - 1

    @qd.kernel
    def ray_id() -> qd.u64:
        ray = Ray(qd.math.vec3(3.14159265358), id=qd.math.uvec2(qd.u64(top)))
        return ray.id.x

    assert ray_id() == top
