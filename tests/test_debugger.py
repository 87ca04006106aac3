"""The kernel debugger (`qd.debug`): stepping, breakpoints, locals, call stacks, reverse-mode kernels,
post mortem, the terminal front end, and results identical to undebugged launches."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import qd
import qd.debug
from qd.runtime import tiers as _tiers

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


def marker_line(path: str, marker: str) -> int:
    """The line of file `path` that ends with the comment `# @marker`."""
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# @{marker}"):
                return n
    raise KeyError(marker)


def line_of(marker: str) -> int:
    """The line of this file that ends with the comment `# @marker`."""
    return marker_line(HERE, marker)


def where(marker: str) -> str:
    return f"test_debugger.py:{line_of(marker)}"


@qd.func
def twice(a: qd.f32) -> qd.f32:  # @twice_def
    t = a * 2.0  # @twice_body
    return t  # @twice_ret


def make_kernel():
    @qd.kernel  # @k_decorator
    def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1)):  # @k_def
        for i in range(x.shape[0]):  # @k_for
            v = qd.Vector([1.0, 2.0, 3.0])  # @k_vec
            s = 0.0  # @k_s
            for j in range(2):  # @k_inner
                s += twice(x[i] + j)  # @k_call
            x[i] = s + v[0] + v[1] * v[2]  # @k_store
    return k


@pytest.fixture(autouse=True)
def _program():
    qd.init(arch=qd.interp, random_seed=7)
    yield
    assert _tiers.WRAPPED is None, "a debugger stayed attached"
    qd.reset()


def _data() -> np.ndarray:
    return np.arange(5, dtype=np.float32) * 0.5  # @host


def _undebugged(kernel, *args):
    kernel(*args)


class Recorder:
    """An `on_stop` callback that records frames and answers from a script of commands."""

    def __init__(self, script=("step",) * 1000, inspect=None):
        self.script, self.inspect, self.stops = list(script), inspect, []

    def __call__(self, dbg, frame, reason):
        self.stops.append((frame.loc.line, frame.tid, reason, dict(frame.locals()), len(frame.stack())))
        if self.inspect is not None:
            self.inspect(dbg, frame)
        return self.script.pop(0) if self.script else "continue"


def test_step_visits_lines_through_loops_and_funcs():
    k = make_kernel()
    ref = _data()
    k(ref)
    x = _data()
    rec = Recorder()
    dbg = qd.debug.run(k, x, on_stop=rec)
    lines = [(s.line, s.depth) for s in dbg.visited if s.tid == 0]
    call = [(line_of("k_call"), 0), (line_of("twice_def"), 1), (line_of("twice_body"), 1), (line_of("twice_ret"), 1),
            (line_of("k_call"), 0)]
    assert lines == [(line_of("k_vec"), 0), (line_of("k_s"), 0), (line_of("k_inner"), 0)] + call + \
        [(line_of("k_inner"), 0)] + call + [(line_of("k_inner"), 0), (line_of("k_store"), 0)]
    assert {s.tid for s in dbg.visited} == {0}  # only the first thread is followed by default
    np.testing.assert_array_equal(x, ref)


def test_next_steps_over_funcs_and_finish_returns():
    k = make_kernel()
    x = _data()
    rec = Recorder(["next"] * 4 + ["step"] * 2 + ["finish", "continue"])
    qd.debug.run(k, x, on_stop=rec)
    lines = [s[0] for s in rec.stops]
    assert lines[:5] == [line_of("k_vec"), line_of("k_s"), line_of("k_inner"), line_of("k_call"), line_of("k_inner")]
    # two steps from the inner loop's test go into the func, finish comes back to the call line
    assert lines[5:] == [line_of("k_call"), line_of("twice_def"), line_of("k_call")]
    assert rec.stops[6][4] == 2 and rec.stops[7][4] == 1  # call stack depth: kernel + func, then kernel


def test_breakpoint_with_thread_condition_locals_and_globals():
    k = make_kernel()
    ref = _data()
    k(ref)
    x = _data()
    seen = {}

    def inspect(dbg, frame):
        seen.setdefault("locals", frame.locals())
        seen.setdefault("x_i", float(frame.eval("x[i]")))
        seen.setdefault("bt", frame.backtrace())

    rec = Recorder([], inspect)
    with qd.debug.session(on_stop=rec, breakpoints=[where("k_store") + " if tid == 3"]):
        k(x)
    assert [(s[0], s[1]) for s in rec.stops] == [(line_of("k_store"), 3)]
    loc = seen["locals"]
    assert loc["i"] == 3
    np.testing.assert_array_equal(loc["v"], np.array([1.0, 2.0, 3.0], np.float32))
    # s = twice(1.5 + 0) + twice(1.5 + 1) = 3 + 5
    assert loc["s"] == 8.0 and seen["x_i"] == 1.5
    np.testing.assert_array_equal(x, ref)


def test_func_frame_locals_and_backtrace():
    k = make_kernel()
    frames = []

    def on_stop(dbg, frame, reason):
        frames.append((frame.locals(), frame.backtrace(), frame.where()))
        frame.level = 1
        frames.append((frame.locals(), None, frame.where()))
        return "continue"

    with qd.debug.session(on_stop=on_stop, breakpoints=[where("twice_ret")], threads=[2]):
        k(_data())
    inner, outer = frames[0], frames[1]
    assert inner[0] == {"a": 1.0, "t": 2.0}  # thread 2, j == 0: a = x[2] + 0
    assert "in twice" in inner[2] and "in k" in outer[2]
    assert outer[0]["i"] == 2 and outer[0]["j"] == 0 and "a" not in outer[0]
    assert inner[1][0].startswith("  ") and f":{line_of('k_call')} in k" in inner[1][0]
    assert f":{line_of('twice_ret')} in twice" in inner[1][2] and inner[1][2].startswith(">")


def test_thread_switch_and_results_identical_with_all_threads_walked():
    k = make_kernel()
    ref = _data()
    k(ref)
    x = _data()
    dbg = qd.debug.run(k, x, threads="all", on_stop=Recorder([]))
    assert {s.tid for s in dbg.visited} == set(range(5))
    np.testing.assert_array_equal(x, ref)

    def on_stop(dbg, frame, reason):
        if frame.tid == 0:
            dbg.follow(4)
        return "continue"

    x2 = _data()
    rec = Recorder([])
    qd.debug.run(k, x2, on_stop=lambda d, f, r: (rec(d, f, r), on_stop(d, f, r))[1])
    assert [(s[1], s[2]) for s in rec.stops] == [(0, "step"), (4, "thread 4")]
    np.testing.assert_array_equal(x2, ref)


def _random_print_kernel():
    out = qd.field(qd.f32, shape=8)
    cnt = qd.field(qd.i32, shape=())

    @qd.kernel
    def rk() -> qd.i32:
        for i in range(8):
            r = qd.random(qd.f32)
            out[i] = r * 2.0 + qd.sin(qd.cast(i, qd.f32))
            qd.atomic_add(cnt[None], i)
            if i == 5:
                print("TEST_DBG", i, r)
        total = 0
        for i in range(1):
            total = cnt[None] * 3
        return total
    return rk, out, cnt


def test_random_prints_atomics_returns_identical(capfd):
    rk, out, cnt = _random_print_kernel()
    r1 = rk()
    ref = out.to_numpy()
    qd.sync()
    printed1 = [ln for ln in capfd.readouterr().out.splitlines() if "TEST_DBG" in ln]
    qd.init(arch=qd.interp, random_seed=7)  # the same launch number, so the same draws
    rk, out, cnt = _random_print_kernel()
    dbg = qd.debug.run(rk, threads=[5, 2], on_stop=Recorder(["continue"]))
    printed2 = [ln for ln in capfd.readouterr().out.splitlines() if "TEST_DBG" in ln]
    assert dbg.result == r1 == 28 * 3
    np.testing.assert_array_equal(out.to_numpy(), ref)
    assert printed1 == printed2 and len(printed1) == 1
    assert {s.tid for s in dbg.visited} >= {2, 5}


def test_reverse_mode_adstack_depth_and_adjoints():
    n = 4
    x = qd.field(qd.f32, shape=n, needs_grad=True)
    m = qd.field(qd.i32, shape=n)
    loss = qd.field(qd.f32, shape=(), needs_grad=True)

    @qd.kernel
    def k():
        for i in range(n):
            s = x[i]
            for j in range(m[i]):  # @rev_loop
                s = s * qd.sin(s) + 1.0  # @rev_body
            loss[None] += s  # @rev_acc

    def setup():
        x.from_numpy(np.linspace(0.1, 0.4, n).astype(np.float32))
        m.from_numpy(np.array([1, 2, 3, 0], np.int32))
        loss[None] = 0
        x.grad.fill(0)
        loss.grad[None] = 1.0

    setup()
    k()
    k.grad()
    ref = x.grad.to_numpy()
    setup()
    k()
    depths, adjs = [], []

    def on_stop(dbg, frame, reason):
        depths.append(dict(frame.adstack_depths()))
        adjs.append(frame.locals().get("s.adj"))
        return "continue"

    with qd.debug.session(on_stop=on_stop, breakpoints=[where("rev_body") + " if tid == 2"]):
        k.grad()
    np.testing.assert_array_equal(x.grad.to_numpy(), ref)
    seq = [next(iter(d.values())) for d in depths]
    # the forward replay pushes one value per iteration (1, 2, 3); the sweep replays each
    # iteration after popping its value (2, 1, 0)
    assert seq == [1, 2, 3, 2, 1, 0]
    assert adjs[0] == 0.0 and adjs[-1] != 0.0


def test_check_failure_stops_and_post_mortem():
    qd.init(arch=qd.interp, debug=True)

    @qd.kernel
    def oob(y: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(5):
            y[i] = i * 1.0  # @oob_store

    y = np.zeros(3, np.float32)
    with pytest.raises(qd.QuadrantsAssertionError) as info:
        oob(y)
    rec = Recorder([])
    dbg = qd.debug.pm(info.value, on_stop=rec)
    assert [(s[0], s[1]) for s in rec.stops] == [(line_of("oob_store"), 3)]
    assert dbg.failure.startswith("check failed (bounds)") and "index 3" in dbg.failure
    assert rec.stops[0][3]["i"] == 3
    np.testing.assert_array_equal(y, [0, 1, 2])  # post mortem works on copies

    rec2 = Recorder([])
    with pytest.raises(qd.QuadrantsAssertionError):
        with qd.debug.session(on_stop=rec2, threads=[3]):  # a followed thread stops at its failure
            oob(np.zeros(3, np.float32))
    assert [(s[0], s[1]) for s in rec2.stops] == [(line_of("oob_store"), 3)]
    assert rec2.stops[0][2].startswith("check failed (bounds)")


def test_set_trace_debugs_only_the_next_launch():
    k = make_kernel()
    out = io.StringIO()
    qd.debug.set_trace(commands=["p s", "n", "n", "p s", "locals", "c"], stdout=out)
    x = _data()
    k(x)
    assert _tiers.WRAPPED is None
    k(x)  # not debugged
    text = out.getvalue()
    assert f"test_debugger.py:{line_of('k_vec')} in k (thread 0, task 0)  [step]" in text
    assert "(qd-dbg) p s\n*** NameError" in text  # s is not assigned yet
    assert "(qd-dbg) p s\n0.0" in text
    assert "v = [1., 2., 3.]" in text and "i = 0" in text


SCRIPT = '''
import numpy as np
import qd

qd.init(arch=qd.cpu, debug=True, cpu_max_num_threads=1)  # one thread: the first failing index is 3


@qd.func
def smooth(a: qd.f32, b: qd.f32) -> qd.f32:
    m = 0.5 * (a + b)
    return m


@qd.kernel
def blur(x: qd.types.ndarray(dtype=qd.f32, ndim=1), y: qd.types.ndarray(dtype=qd.f32, ndim=1)):
    for i in range(x.shape[0] - 1):
        acc = 0.0
        for k in range(2):
            acc += smooth(x[i], x[i + k])
        y[i] = acc


x = np.arange(6, dtype=np.float32) ** 2
y = np.zeros(6, dtype=np.float32)
blur(x, y)
print("y =", y)
blur(x, y[:3])
'''


def test_terminal_front_end(tmp_path):
    script = tmp_path / "demo.py"
    script.write_text(SCRIPT)
    cmds = "b demo.py:19 if tid == 3\nc\nlocals\ns\ns\nbt\np a + b\nr\nn\np acc\nl 1\nc\np k\nq\np i\n"
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-m", "qd.debug", str(script)], input=cmds, capture_output=True,
                         text=True, cwd=tmp_path, env=env, timeout=120)
    out = res.stdout
    assert res.returncode == 1, res.stderr
    assert "breakpoint 1 at demo.py:19 if tid == 3" in out
    # task 1: with debug=True, `x.shape[0] - 1` is checked for overflow in a serial task 0 before the loop
    assert "demo.py:19 in blur (thread 3, task 1)  [breakpoint 1" in out
    assert "(qd-dbg) locals\ni = 3\nk = 0\nacc = 0.0\n" in out
    assert "demo.py:9 in smooth (thread 3, task 1)  [step]" in out
    assert "(qd-dbg) p a + b\n18.0\n" in out
    assert "(qd-dbg) p acc\n9.0\n" in out
    assert "(qd-dbg) p k\n1\n" in out
    assert "y = [ 0.5  3.5 10.5 21.5 36.5  0. ]" in out
    assert "post mortem: re-running the failing thread" in out
    assert "[check failed (bounds): Out of bound access: kernel[blur] tid=3: index 3" in out
    assert "(qd-dbg) p i\n3\n" in out


def test_terminal_bare_line_before_the_run_means_the_main_script(tmp_path):
    """`b 19` typed before the program runs is line 19 of the script (as in pdb), not of any file."""
    script = tmp_path / "demo.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT)
    res = subprocess.run([sys.executable, "-m", "qd.debug", str(script)], input="b 19 if tid == 2\nb x\nc\np i\nq\n",
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    out = res.stdout
    assert f"breakpoint 1 at {script}:19 if tid == 2" in out, out + res.stderr
    assert "*** no function 'x' is defined here or in" in out  # a name is a function breakpoint (as pdb)
    assert "demo.py:19 in blur (thread 2, task 1)  [breakpoint 1" in out
    assert "(qd-dbg) p i\n2\n" in out


def test_control_flow_matrices_and_ndrange_identical_when_all_threads_walked():
    out = qd.field(qd.f32, shape=(3, 4))
    cnt = qd.field(qd.i32, shape=3)

    @qd.kernel
    def cf(w: qd.i32):
        for i, j in qd.ndrange(3, 4):
            m = qd.Matrix([[1.0, 2.0], [3.0, 4.0]]) * (i + 1)  # @cf_mat
            acc = 0.0
            n = 0
            while n < w + i:
                n += 1
                if n % 2 == 0:
                    continue
                if n > 5:
                    break
                acc += m[0, 1] * n - m[1, 0]
            out[i, j] = acc + j * m[1, 1]  # @cf_out
            qd.atomic_add(cnt[i], n)

    cf(4)
    ref, ref_cnt = out.to_numpy(), cnt.to_numpy()
    out.fill(0)
    cnt.fill(0)
    mats = []

    def on_stop(dbg, frame, reason):
        mats.append((frame.tid, frame.locals()))
        return "continue"

    qd.debug.run(cf, 4, threads="all", on_stop=on_stop, stop_at_start=False,
                 breakpoints=[where("cf_out") + " if tid == 6"])
    np.testing.assert_array_equal(out.to_numpy(), ref)
    np.testing.assert_array_equal(cnt.to_numpy(), ref_cnt)
    assert [t for t, _ in mats] == [6]
    loc = mats[0][1]
    # i == 1: m = 2 * [[1, 2], [3, 4]]; m[0, 0] is never read, so the compiler removed it
    assert (loc["m[0, 1]"], loc["m[1, 0]"], loc["m[1, 1]"]) == (4.0, 6.0, 8.0) and "m[0, 0]" not in loc
    assert loc["i_j"] == 6 and (loc["i"], loc["j"]) == (1, 2)  # an ndrange's flat index and its indices
    assert loc["n"] == 5 and loc["acc"] == (4 * 1 - 6) + (4 * 3 - 6) + (4 * 5 - 6)


def test_console_breakpoint_by_line_list_and_help():
    k = make_kernel()
    out = io.StringIO()
    cmds = [f"b {line_of('k_store')}", "b", "c", "l 1", "p x[i] * 2", "thread", "h", "display s", "s", "s",
            "undisplay", "s", "cl", "c"]
    qd.debug.run(k, _data(), commands=cmds, stdout=out, threads=[0, 1])
    text = out.getvalue()
    assert f"breakpoint 1 at {HERE}:{line_of('k_store')}" in text
    assert f"{line_of('k_store'):4d} ->             x[i] = s + v[0] + v[1] * v[2]  # @k_store" in text
    assert "(qd-dbg) p x[i] * 2\n0.0\n" in text
    assert "thread 0 of task 0" in text and "step (into funcs)" in text
    # thread 0 at the breakpoint: s = twice(0) + twice(1); then thread 1's first lines, before s is set
    assert text.count("display s: 2.0") == 1 and text.count("display s: <NameError") == 1  # on change (pdb)
    assert f"test_debugger.py:{line_of('k_vec')} in k (thread 1, task 0)  [step]" in text


def test_breakpoint_on_any_file_and_kernel_filter():
    k = make_kernel()
    other = make_kernel()
    rec = Recorder([])
    with qd.debug.session(on_stop=rec, breakpoints=[str(line_of("twice_body"))], kernels=["k"]) as dbg:
        k(_data())
    assert [s[0] for s in rec.stops] == [line_of("twice_body")] * 2  # thread 0, j = 0 and 1
    assert dbg.breakpoints[0].hits == 2
    rec2 = Recorder([])
    with qd.debug.session(on_stop=rec2, breakpoints=[str(line_of("twice_body"))], kernels=["nothing"]):
        other(_data())
    assert rec2.stops == []


def test_pm_from_an_except_block_with_assert():
    qd.init(arch=qd.interp, debug=True)

    @qd.kernel
    def checked(y: qd.types.ndarray(dtype=qd.f32, ndim=1)):
        for i in range(y.shape[0]):
            v = y[i] * 2.0
            assert v < 5.0, "too big"  # @pm_assert

    out = io.StringIO()
    try:
        checked(np.arange(4, dtype=np.float32))
    except qd.QuadrantsAssertionError:
        dbg = qd.debug.pm(commands=["p v, i", "bt", "c"], stdout=out)
    text = out.getvalue()
    assert f"test_debugger.py:{line_of('pm_assert')} in checked (thread 3, task 0)  [check failed (assert): too big" \
        in text
    assert "(qd-dbg) p v, i\n(6.0, 3)\n" in text
    assert dbg.failure.startswith("check failed (assert)")


def test_debugged_launch_equals_native_code_on_cpu():
    """On qd.cpu (native code) a debugged launch (interpreter + walker) gives the same bits with fast_math=False."""
    qd.init(arch=qd.cpu, jit="eager", fast_math=False)
    k = make_kernel()
    x = np.linspace(-3, 3, 37).astype(np.float32)
    ref = x.copy()
    k(ref)
    assert k.stats["last_tier"] == "cpu"
    dbg = qd.debug.run(k, x, threads="all", on_stop=Recorder([]))
    np.testing.assert_array_equal(x.view(np.uint32), ref.view(np.uint32))
    assert len({s.tid for s in dbg.visited}) == 37


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_terminal_front_end_on_a_pseudo_terminal(tmp_path):
    import pty
    import select
    import time

    script = tmp_path / "demo.py"
    script.write_text(SCRIPT)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the debugger on a terminal
        os.chdir(tmp_path)
        os.environ["PYTHONPATH"] = ROOT
        os.execv(sys.executable, [sys.executable, "-m", "qd.debug", "demo.py"])
    out = b""

    def read_until(token: bytes, timeout: float = 60.0, count: int = 1) -> None:
        nonlocal out
        end = time.time() + timeout
        while out.count(token) < count and time.time() < end:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    data = os.read(fd, 4096)
                except OSError:
                    return
                if not data:
                    return
                out += data

    try:
        for n, cmd in enumerate([b"b demo.py:10\n", b"c\n", b"bt\n", b"p a, b\n"], 1):
            read_until(b"(qd-dbg) ", count=n)  # the n-th prompt: the previous command is done
            os.write(fd, cmd)
        read_until(b"(0.0, 0.0)")
        os.write(fd, b"q\n")
        read_until(b"post mortem")
        os.write(fd, b"q\n")
        read_until(b"the never printed token", 5.0)
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    text = out.decode().replace("\r\n", "\n")
    assert "> demo.py:10 in smooth (thread 0, task 1)  [breakpoint 1 at demo.py:10]" in text
    assert "  demo.py:19 in blur\n" in text and "> demo.py:10 in smooth\n" in text
    assert "(0.0, 0.0)" in text and "post mortem: re-running the failing thread" in text


SCRIPT_VEC_REV = '''
import numpy as np
import qd

qd.init(arch=qd.cpu)
x = qd.field(qd.f32, shape=4, needs_grad=True)
m = qd.field(qd.i32, shape=4)
loss = qd.field(qd.f32, shape=(), needs_grad=True)
vel = qd.Vector.field(2, qd.f32, shape=4)


@qd.kernel
def k():
    for i in range(4):
        s = x[i]
        for j in range(m[i]):
            s = s * qd.sin(s) + 1.0
        loss[None] += s


@qd.kernel
def push(dt: qd.f32):
    for i in range(4):
        v = vel[i] + qd.Vector([1.0, 2.0]) * dt
        vel[i] = v


x.from_numpy(np.linspace(0.1, 0.4, 4).astype(np.float32))
m.from_numpy(np.array([1, 2, 3, 0], np.int32))
k()
loss.grad[None] = 1.0
k.grad()
push(0.5)
print("grad", x.grad.to_numpy(), "vel", vel.to_numpy()[1])
'''


def test_terminal_front_end_reverse_mode_and_vectors(tmp_path):
    script = tmp_path / "vr.py"
    script.write_text(SCRIPT_VEC_REV)
    env = dict(os.environ, PYTHONPATH=ROOT)

    def run(cmds: str) -> str:
        res = subprocess.run([sys.executable, "-m", "qd.debug", str(script)], input=cmds, capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    plain = run("c\n")
    # k() stops 3 times (j = 0, 1, 2), then k.grad: 3 replay iterations, 3 sweep iterations; then push
    out = run("b vr.py:17 if tid == 2\nb vr.py:24 if tid == 1\nc\nlocals\nc\nc\nc\nlocals\np x.grad[i]\n"
              "c\nc\nc\nlocals\nc\nc\nc\nn\nlocals\np v * 2\nc\n")
    assert "(qd-dbg) locals\ni = 2\nj = 0\ns = 0.3\n(qd-dbg)" in out  # the forward launch: no adjoints
    stack = "[adstack 0 (f32 carried by the loop at line 16)]"
    assert f"s = 0.3\ns.adj = 0.0\n{stack} depth = 1\n" in out  # the replay's first push
    assert f"s.adj = 1.0\n{stack} depth = 2\n" in out  # the sweep's first iteration: one popped
    assert "(qd-dbg) p x.grad[i]\n0.0\n" in out
    assert "vr.py:25 in push (thread 1, task 0)  [next]" in out
    assert "v = [0.5, 1. ]" in out and "(qd-dbg) p v * 2\n[1., 2.]" in out
    assert plain.splitlines()[-2] == out.splitlines()[-2] and plain.splitlines()[-2].startswith("grad")


# ------------------------------------------------------------------ where a breakpoint can stop


def test_breakpoints_where_no_thread_ever_stops_are_refused_as_pdb_does():
    dbg = qd.debug.Debugger()
    with open(HERE) as f:
        blank = next(n for n, text in enumerate(f, 1) if not text.strip())
    refused = {
        "test_debugger.py:0": "End of file", "test_debugger.py:99999": "End of file",
        f"test_debugger.py:{blank}": "Blank or comment",
        f"test_debugger.py:{line_of('comment')}": "Blank or comment",
        f"test_debugger.py:{line_of('host')}": "is host code, outside every @qd.kernel and @qd.func",
        "no_such_file.py:3": "'no_such_file.py' not found",
        "test_debugger.py:x": "give file:line or a line number",
        "0": "End of file",
    }
    # @comment
    for where_, why in refused.items():
        with pytest.raises(qd.debug.BreakpointError, match=why):
            dbg.break_at(where_)
    with pytest.raises(qd.debug.BreakpointError, match="nearest kernel line is"):
        dbg.break_at(f"{HERE}:{line_of('host')}")
    with pytest.raises(qd.debug.BreakpointError, match="not a Python expression"):
        dbg.break_at(where("k_store"), "i ==")
    assert dbg.breakpoints == [] and issubclass(qd.debug.BreakpointError, ValueError)


def test_breakpoint_on_a_line_no_thread_stops_at_moves_to_the_next_kernel_line():
    k = make_kernel()
    rec = Recorder([])
    with qd.debug.session(on_stop=rec, breakpoints=[where("k_def"), where("k_for")]) as dbg:
        k(_data())
    # a kernel's def and its top-level loop header run in the launcher: both moved to the loop's first line
    assert [bp.line for bp in dbg.breakpoints] == [line_of("k_vec")] * 2
    assert all("moved to the next kernel line" in bp.note for bp in dbg.breakpoints)
    assert [(s[0], s[1]) for s in rec.stops] == [(line_of("k_vec"), 0)]
    bp = qd.debug.Debugger().break_at(where("twice_def"))  # a func's def binds its arguments: a stop
    assert bp.line == line_of("twice_def") and bp.note == ""


def test_condition_that_raises_stops_and_says_so_as_pdb():
    k = make_kernel()
    ref = _data()
    k(ref)
    x = _data()
    rec = Recorder([])
    with qd.debug.session(on_stop=rec, breakpoints=[where("k_store") + " if no_such_name > 1"]):
        k(x)
    assert len(rec.stops) == 1 and rec.stops[0][0] == line_of("k_store")
    assert "the condition raised NameError: name 'no_such_name' is not defined" in rec.stops[0][2]
    np.testing.assert_array_equal(x, ref)


def test_console_refusals_read_like_pdb():
    k = make_kernel()
    out = io.StringIO()
    cmds = ["b 0", "b 99999", f"b {line_of('comment')}", f"b {line_of('host')}", "b nowhere.py:1",
            f"b {line_of('k_def')}", "b", "c"]
    qd.debug.run(k, _data(), commands=cmds, stdout=out)
    text = out.getvalue()
    assert "(qd-dbg) b 0\n*** End of file" in text and "(qd-dbg) b 99999\n*** End of file" in text
    assert f"*** Blank or comment: {HERE}:{line_of('comment')}" in text
    assert f"*** {HERE}:{line_of('host')} is host code" in text and "*** 'nowhere.py' not found" in text
    assert (f"breakpoint 1 at {HERE}:{line_of('k_vec')} (no thread stops at line {line_of('k_def')}: moved to the "
            f"next kernel line)") in text
