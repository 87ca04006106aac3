"""`with qd.graph.parallel_context():` regions of `with qd.graph.parallel():` sections in `graph=True` kernels
(Quadrants' fork/join sections; qd runs them in order on every tier): results against numpy, the structure checks
Quadrants makes, and the no-op context managers outside kernels."""

# ruff: noqa: SIM117  (a region and its sections are nested `with` statements by definition)
from __future__ import annotations

import numpy as np
import pytest

import qd
from qd.errors import QuadrantsSyntaxError


def test_sections_run_and_a_later_loop_sees_them(arch):
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.f32, 1), y: qd.types.ndarray(qd.f32, 2), z: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel_context():
            with qd.graph.parallel():
                for i in range(x.shape[0]):
                    x[i] = x[i] + 1.0
            for b in qd.static(range(2)):  # (unrolled into two more sections)
                with qd.graph.parallel():
                    for i in range(y.shape[1]):
                        y[b, i] = y[b, i] + (b + 2.0)
            if qd.static(True):
                pass
        for i in range(z.shape[0]):
            z[i] = x[i] + y[0, i] + y[1, i]

    n = 64
    x, y, z = qd.ndarray(qd.f32, (n,)), qd.ndarray(qd.f32, (2, n)), qd.ndarray(qd.f32, (n,))
    for rep in range(1, 4):
        k(x, y, z)
        np.testing.assert_array_equal(z.to_numpy(), np.full(n, rep * (1 + 2 + 3), np.float32))


def test_a_region_inside_a_do_while_loop(arch):
    @qd.kernel(graph=True)
    def k(x: qd.types.ndarray(qd.i32, 1), y: qd.types.ndarray(qd.i32, 1), counter: qd.types.ndarray(qd.i32, 0)):
        while qd.graph.do_while(counter):
            with qd.graph.parallel_context():
                with qd.graph.parallel():
                    for i in range(x.shape[0]):
                        x[i] += 1
                with qd.graph.parallel():
                    for i in range(y.shape[0]):
                        y[i] += 2
            for _ in range(1):
                counter[()] = counter[()] - 1

    x, y, counter = qd.ndarray(qd.i32, (16,)), qd.ndarray(qd.i32, (16,)), qd.ndarray(qd.i32, ())
    counter[()] = 3
    k(x, y, counter)
    np.testing.assert_array_equal(x.to_numpy(), np.full(16, 3, np.int32))
    np.testing.assert_array_equal(y.to_numpy(), np.full(16, 6, np.int32))


def _bodies():
    """Kernels Quadrants refuses, with the message each must name."""
    x = qd.ndarray(qd.f32, (8,))

    @qd.kernel(graph=True)
    def outside(x: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel():
            for i in x:
                x[i] = 1.0

    @qd.kernel
    def not_graph(x: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel_context():
            with qd.graph.parallel():
                for i in x:
                    x[i] = 1.0

    @qd.kernel(graph=True)
    def loose_work(x: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel_context():
            for i in x:
                x[i] = 1.0

    @qd.kernel(graph=True)
    def runtime_if(x: qd.types.ndarray(qd.f32, 1), flag: qd.i32):
        with qd.graph.parallel_context():
            if flag:
                with qd.graph.parallel():
                    for i in x:
                        x[i] = 1.0

    @qd.kernel(graph=True)
    def nested_section(x: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel_context():
            with qd.graph.parallel():
                with qd.graph.parallel():
                    for i in x:
                        x[i] = 1.0

    @qd.kernel(graph=True)
    def with_args(x: qd.types.ndarray(qd.f32, 1)):
        with qd.graph.parallel_context():
            with qd.graph.parallel(name="a"):
                for i in x:
                    x[i] = 1.0

    @qd.kernel(graph=True)
    def loop_in_section(x: qd.types.ndarray(qd.f32, 1), counter: qd.types.ndarray(qd.i32, 0)):
        with qd.graph.parallel_context():
            with qd.graph.parallel():
                while qd.graph.do_while(counter):
                    for i in x:
                        x[i] = 1.0

    @qd.kernel(graph=True)
    def other_with(x: qd.types.ndarray(qd.f32, 1)):
        with open("f"):
            pass

    counter = qd.ndarray(qd.i32, ())
    return [(lambda: outside(x), r"qd\.graph\.parallel\(\) can only be used .* inside a qd\.graph\.parallel_context"),
            (lambda: not_graph(x), r"requires @qd\.kernel\(graph=True\)"),
            (lambda: loose_work(x), r"may contain only .with qd\.graph\.parallel"),
            (lambda: runtime_if(x, 1), r"may contain only .with qd\.graph\.parallel"),
            (lambda: nested_section(x), r"sections cannot be nested"),
            (lambda: with_args(x), r"qd\.graph\.parallel\(\) takes no arguments"),
            (lambda: loop_in_section(x, counter), r"qd\.graph\.do_while\(\) cannot appear inside a qd\.graph\.parallel"),
            (lambda: other_with(x), r"'with' statements are not supported")]


def test_malformed_regions_are_refused_with_quadrants_messages(arch):
    for call, pattern in _bodies():
        with pytest.raises(QuadrantsSyntaxError, match=pattern):
            call()


def test_outside_kernels_they_do_nothing():
    seen = []
    with qd.graph.parallel_context():
        with qd.graph.parallel():
            seen.append("a")
        with qd.graph_parallel():
            seen.append("b")
    assert seen == ["a", "b"]
