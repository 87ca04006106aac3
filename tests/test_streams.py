"""Quadrants' streams and events (`qd/lang/stream.py`): launches on streams, events between them and
`with qd.stream_parallel():` blocks give the in-order results on every tier (qd keeps one in-order queue), with
Quadrants' handles (0 on the host tiers) and refusals."""

from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsRuntimeError, QuadrantsSyntaxError


def test_launches_on_streams_and_events_between_them(arch):
    n = 256
    x, y = qd.field(qd.f32, shape=n), qd.field(qd.f32, shape=n)

    @qd.kernel
    def fill(v: qd.f32):
        for i in x:
            x[i] = v

    @qd.kernel
    def copy(a: qd.types.ndarray(qd.f32, 1)):
        for i in x:
            y[i] = x[i] + a[i]

    a = qd.ndarray(qd.f32, (n,))
    a.from_numpy(np.arange(n, dtype=np.float32))
    with qd.create_stream() as s1, qd.create_stream() as s2, qd.create_event() as e:
        assert (s1.handle == 0) == (not qd.cfg.arch.is_gpu) and (e.handle == 0) == (not qd.cfg.arch.is_gpu)
        for rep in range(3):
            fill(float(rep), qd_stream=s1)
            e.record(s1)
            e.wait(s2)
            copy(a, qd_stream=s2)
            s2.synchronize()
            np.testing.assert_array_equal(y.to_numpy(), np.arange(n, dtype=np.float32) + rep)
    assert s1.handle == 0 and e.handle == 0  # (destroyed on exit)


def test_stream_parallel_blocks(arch):
    n = 128
    a, b = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.f32, (n,))

    @qd.kernel
    def fill(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 1), v: qd.f32):
        with qd.stream_parallel():
            for i in x:
                x[i] = v
            for i in x:
                x[i] += 1.0
        with qd.stream_parallel():
            for i in y:
                y[i] = v * 2.0

    for v in (1.0, 2.5, 4.0):
        fill(a, b, v)
        np.testing.assert_array_equal(a.to_numpy(), np.full(n, v + 1, np.float32))
        np.testing.assert_array_equal(b.to_numpy(), np.full(n, v * 2, np.float32))


def test_refusals(arch):
    x = qd.field(qd.f32, shape=(), needs_grad=True)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def compute():
        loss[None] = x[None] ** 2

    @qd.kernel(graph=True)
    def graph_kernel():
        x[None] = 1.0

    s = qd.create_stream()
    with pytest.raises(QuadrantsRuntimeError, match="not compatible with autograd Tape"), qd.ad.Tape(loss):
        compute(qd_stream=s)
    with pytest.raises(QuadrantsRuntimeError, match="not compatible with autodiff"):
        compute.grad(qd_stream=s)
    with pytest.raises(QuadrantsRuntimeError, match="not compatible with graph=True"):
        graph_kernel(qd_stream=s)
    compute(qd_stream=None)  # (no stream: an ordinary launch)

    @qd.kernel
    def mixed():
        with qd.stream_parallel():
            x[None] = 1.0
        x[None] = 2.0

    @qd.kernel(graph=True)
    def in_graph():
        with qd.stream_parallel():
            x[None] = 1.0

    @qd.func
    def helper():
        with qd.stream_parallel():
            x[None] = 1.0

    @qd.kernel
    def via_func():
        helper()

    @qd.kernel
    def two_managers():
        with qd.stream_parallel(), qd.stream_parallel():
            x[None] = 1.0

    @qd.kernel
    def with_as():
        with qd.stream_parallel() as _s:
            x[None] = 1.0

    for kernel, pattern in ((mixed, "all top-level statements"), (in_graph, "not compatible with graph=True"),
                            (via_func, "only be used inside @qd.kernel"), (two_managers, "single context manager"),
                            (with_as, "with .* as")):
        with pytest.raises(QuadrantsSyntaxError, match=pattern):
            kernel()


def test_outside_kernels_it_does_nothing():
    seen = []
    with qd.stream_parallel():
        seen.append(1)
    assert seen == [1]
