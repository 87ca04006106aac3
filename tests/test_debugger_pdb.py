"""The debugger console at pdb parity: each pdb command over a small kernel, scripted, with its output and stops."""

from __future__ import annotations

import io
import os
import re

import numpy as np
import pytest

import qd
import qd.debug
from qd.runtime import tiers as _tiers
from tests.test_debugger import marker_line

HERE = os.path.abspath(__file__)


def line_of(marker: str) -> int:
    return marker_line(HERE, marker)


@qd.func
def add3(a: qd.f32, b: qd.f32) -> qd.f32:  # @add3_def
    c = a + b + 3.0  # @add3_body
    return c  # @add3_ret


def host_helper():  # @host_def
    return 1


@qd.kernel  # @k_deco
def k(x: qd.types.ndarray(dtype=qd.f32, ndim=1), n: qd.i32):
    for i in range(x.shape[0]):
        s = 0.0  # @k_s
        for j in range(n):  # @k_loop
            s += add3(x[i], j)  # @k_call

        x[i] = s  # @k_store


@pytest.fixture(autouse=True)
def _program():
    qd.init(arch=qd.interp, random_seed=7)
    yield
    assert _tiers.WRAPPED is None, "a debugger stayed attached"
    qd.reset()


def session(cmds, **kw):
    """Runs k over 3 elements (n = 3) stopped at its first line; returns the console's output."""
    out = io.StringIO()
    x = np.arange(3, dtype=np.float32)
    qd.debug.run(k, x, 3, commands=cmds, stdout=out, **kw)
    np.testing.assert_array_equal(x, [sum(v + j + 3.0 for j in range(3)) for v in range(3)])  # unchanged results
    return out.getvalue()


def stops(text):
    """(line, thread, reason) of each stop."""
    return [(int(m[1]), int(m[2]), m[3]) for m in re.finditer(r"^> \S+:(\d+) in \S+ \(thread (\d+), task \d+\)  \[(.*)\]$",
                                                             text, re.MULTILINE)]


def L(marker):
    return line_of(marker)


def test_break_with_comma_condition_and_listing():
    text = session([f"b {L('k_call')}, j == 2", "b", "c", "p j, s", "c"])
    assert f"breakpoint 1 at {HERE}:{L('k_call')} if j == 2" in text
    assert "Num Type         Disp Enb   Where\n1   breakpoint   keep yes   at" in text and "\tstop only if j == 2" in text
    assert stops(text)[1:] == [(L("k_call"), 0, f"breakpoint 1 at {HERE}:{L('k_call')} if j == 2")]
    assert "(qd-dbg) p j, s\n(2, 7.0)\n" in text  # s = (0+0+3) + (0+1+3)


def test_break_by_function_name_kernel_and_func_and_refusals():
    text = session(["b add3", "b k", "b host_helper", "b nothing_here", "b np", "c", "c"])
    assert f"breakpoint 1 at {HERE}:{L('add3_def')} (the first line of add3 where a thread stops)" in text
    assert f"breakpoint 2 at {HERE}:{L('k_s')} (the first line of k where a thread stops)" in text
    assert "*** host_helper is host code, not a @qd.kernel or @qd.func" in text
    assert "*** no function 'nothing_here' is defined" in text
    assert "*** np is a module, not a function" in text
    assert [s[0] for s in stops(text)] == [L("k_s"), L("add3_def"), L("add3_def")]


def test_break_by_file_and_function_name():
    """pdb's `b file:function`: the function looked up in that file; host code and a missing name refused."""
    text = session([f"b {HERE}:add3", f"b {HERE}:host_helper", f"b {HERE}:nothing_here", "c", "c"])
    assert f"breakpoint 1 at {HERE}:{L('add3_def')} (the first line of add3 where a thread stops)" in text
    assert f"*** host_helper ({HERE}:{L('host_def')}) is host code" in text
    assert "*** no function 'nothing_here' is defined" in text
    assert [s[0] for s in stops(text)][1:] == [L("add3_def"), L("add3_def")]


def test_break_by_function_name_before_the_run_reads_the_script():
    out = io.StringIO()
    con = qd.debug.Console(["b add3", "b host_helper"], stdout=out, main_file=HERE)
    assert con.setup(qd.debug.Debugger(con))
    text = out.getvalue()
    assert f"breakpoint 1 at {HERE}:{L('add3_def')}" in text
    assert f"*** host_helper ({HERE}:{L('host_def')}) is host code" in text


def test_invalid_breakpoints_say_why():
    text = session(["b 99999", f"b {L('k_call') + 1}", f"b {L('host_def') + 1}", "b nowhere.py:3", f"b {L('k_call')}, i >", "b",
                    "c"])
    assert "(qd-dbg) b 99999\n*** End of file" in text
    assert f"*** Blank or comment: {HERE}:{L('k_call') + 1}" in text
    assert f"*** {HERE}:{L('host_def') + 1} is host code" in text and "nearest kernel line" in text
    assert "*** 'nowhere.py' not found" in text and "is not a Python expression" in text
    assert "(qd-dbg) b\nno breakpoints\n" in text


def test_tbreak_stops_once_and_is_deleted():
    text = session([f"tbreak {L('add3_body')}", "c", "b", "c"])
    assert f"temporary breakpoint 1 at {HERE}:{L('add3_body')}" in text
    assert [s[0] for s in stops(text)] == [L("k_s"), L("add3_body")]
    assert stops(text)[1][2].endswith(": deleted") and "(qd-dbg) b\nno breakpoints\n" in text


def test_disable_skips_and_enable_restores():
    text = session([f"b {L('add3_body')}", "disable 1", "b", "c"])
    assert f"Disabled breakpoint 1 at {HERE}:{L('add3_body')}" in text and "keep no " in text
    assert [s[0] for s in stops(text)] == [L("k_s")]
    text = session([f"b {L('add3_body')}", "disable 1", "enable 1", "c", "c", "disable 1", "c"])
    assert f"Enabled breakpoint 1 at {HERE}:{L('add3_body')}" in text
    assert [s[0] for s in stops(text)] == [L("k_s"), L("add3_body"), L("add3_body")]
    assert "*** there is no breakpoint 7" in session(["disable 7", "c"])


def test_ignore_counts_crossings():
    text = session([f"b {L('add3_body')}", "ignore 1 2", "c", "p b", "b", "c"])
    assert "Will ignore next 2 crossings of breakpoint 1." in text
    assert "(qd-dbg) p b\n2.0\n" in text  # j = 0 and 1 passed, j == 2 stops
    assert "\tbreakpoint already hit 3 times" in text
    assert "Will stop next time breakpoint 1 is reached." in session([f"b {L('add3_body')}", "ignore 1", "c", "c"])


def test_condition_sets_and_removes():
    text = session([f"b {L('add3_body')}", "condition 1 b == 1", "c", "p b", "condition 1", "c", "p b", "cl", "c"])
    assert "New condition set for breakpoint 1." in text and "Breakpoint 1 is now unconditional." in text
    assert "(qd-dbg) p b\n1.0\n(qd-dbg) condition 1" in text and "(qd-dbg) p b\n2.0\n" in text


def test_condition_that_raises_stops_and_names_the_error():
    text = session([f"b {L('add3_body')}, nope > 1", "ignore 1 5", "c", "c"])
    assert stops(text)[1][0] == L("add3_body")
    assert "the condition raised NameError: name 'nope' is not defined; stopping as if it were true" in text


def test_clear_by_number_and_by_file_line():
    text = session([f"b {L('add3_body')}", f"b {L('k_store')}", f"b {L('k_s')}", "cl 1",
                    f"cl test_debugger_pdb.py:{L('k_store')}", "b", "cl 9", "c"])
    assert f"Deleted breakpoint 1 at {HERE}:{L('add3_body')}" in text
    assert f"Deleted breakpoint 2 at {HERE}:{L('k_store')}" in text
    assert f"3   breakpoint   keep yes   at {HERE}:{L('k_s')}" in text and "*** there is no breakpoint 9" in text


def test_step_next_return_and_empty_line_repeats():
    text = session(["n", "", "s", "s", "r", "c"])
    assert [s[0] for s in stops(text)] == [L("k_s"), L("k_loop"), L("k_call"), L("add3_def"), L("add3_body"),
                                           L("k_call")]
    assert [s[2] for s in stops(text)][1:] == ["next", "next", "step", "step", "finish"]
    assert "(qd-dbg) \n> " in text  # the empty line ran `n` again


def test_until_leaves_the_loop_and_until_line():
    text = session([f"until {L('k_call')}", "p j", "until", "", "p j", "c"])
    got = stops(text)
    assert got[1] == (L("k_call"), 0, "until") and "(qd-dbg) p j\n0\n" in text
    # `until` at the call: the loop header (a lower line) does not stop; the next stop is after the loop
    assert got[2] == (L("k_store"), 0, "until")
    assert f"*** ValueError: \"until\" line number {L('k_s')}" in session([f"until {L('k_s')}", "c"])


def test_jump_and_retval_are_refused_with_the_reason():
    text = session(["j 30", "retval", "help jump", "c"])
    assert "*** RuntimeError: jump is not supported in a kernel (help jump says why)" in text
    assert "*** RuntimeError: retval is not kept for an inlined @qd.func" in text
    assert "each value is defined once" in text


def test_list_longlist_where_up_down():
    text = session([f"b {L('add3_body')}", "c", "l", "ll", "w", "u", "a", "d", "a", "q"])
    assert f"{L('add3_body'):4d}B-> " in text  # a breakpoint and the current line
    ll = text.split("(qd-dbg) ll\n")[1].split("(qd-dbg) w")[0].splitlines()
    assert [int(re.match(r"\s*(\d+)", t)[1]) for t in ll] == list(range(L("add3_def") - 1, L("add3_ret") + 1))
    assert f"> {HERE}:{L('add3_body')} in add3" in text.split("(qd-dbg) w\n")[1]
    assert "(qd-dbg) u\n> " in text and f":{L('k_call')} in k (thread 0" in text.split("(qd-dbg) u\n")[1]
    args_k = text.split("(qd-dbg) a\n")[1].split("(qd-dbg)")[0]
    args_f = text.split("(qd-dbg) a\n")[2].split("(qd-dbg)")[0]
    assert args_k.startswith("x = [0., 1., 2.]\nn = 3\n") and "s =" not in args_k  # only the arguments
    assert args_f == "a = 0.0\nb = 0.0\n"


def test_list_continues_and_l_n_is_around_n():
    text = session(["l", "l", f"l {L('k_store')}", f"l {L('k_s')}, 2", "c"])
    first = text.split("(qd-dbg) l\n")[1].splitlines()
    assert int(first[0].split()[0]) == L("k_s") - 5 and len(first) >= 11
    second = text.split("(qd-dbg) l\n")[2].splitlines()
    assert int(second[0].split()[0]) == L("k_s") + 6
    around = text.split(f"(qd-dbg) l {L('k_store')}\n")[1].splitlines()
    assert int(around[0].split()[0]) == L("k_store") - 5
    rng = text.split(f"(qd-dbg) l {L('k_s')}, 2\n")[1].splitlines()[:3]
    assert [int(re.match(r"\s*(\d+)", t)[1]) for t in rng] == [L("k_s"), L("k_s") + 1, L("k_s") + 2]


def test_p_pp_and_default_expression():
    text = session(["n", "p x * 2", "pp x", "pp [i, {'n': n}]", "i + n", "c"])
    assert "(qd-dbg) p x * 2\n[0., 2., 4.]\n" in text
    assert "(qd-dbg) pp x\n[0., 1., 2.]\n" in text
    assert "(qd-dbg) pp [i, {'n': n}]\n[0, {'n': 3}]\n" in text
    assert "(qd-dbg) i + n\n3\n" in text  # a line that is no command is printed


def test_display_prints_on_change_only():
    text = session([f"b {L('add3_body')}", "n", "display s", "display", "c", "c", "undisplay s", "c", "display", "q"])
    assert "(qd-dbg) display s\ndisplay s: 0.0\n" in text and "Currently displaying:\ns: 0.0" in text
    # in add3 (a func frame) the kernel's `s` is not visible: shown once when it changes to an error, then not
    assert text.count("display s: <NameError") == 1
    assert "no expressions displayed" in text


def test_help_lists_and_explains_commands():
    text = session(["h", "help b", "help tbreak", "help until", "help nothing", "c"])
    assert "tbreak" in text.split("(qd-dbg) help b")[0] and "unt [line]" in text
    assert "(qd-dbg) help b\nb(reak) [ ([filename:]lineno | [filename:]function) [, condition] ]\nSet a breakpoint" in text
    assert "(qd-dbg) help tbreak\ntbreak [" in text and "unt(il) [lineno]\n" in text
    assert "*** KeyError: \"no command 'nothing' (h lists them)\"" in text


def test_completion_of_commands_and_frame_names():
    seen = {}

    def on_stop(dbg, frame, reason):
        con.frame = frame
        seen["cmds"] = con.completenames("un")
        seen["names"] = con.completedefault("a", "p a", 2, 3)
        seen["x"] = con.completedefault("x.sh", "p x.sh", 2, 6)
        seen["help"] = con.complete_help("tb")
        return "continue"

    con = qd.debug.Console([])
    x = np.arange(3, dtype=np.float32)
    with qd.debug.session(on_stop=on_stop, breakpoints=[f"{HERE}:{L('add3_body')}"]):
        k(x, 1)
    assert seen["cmds"] == ["undisplay", "unt", "until"]
    assert {"a", "add3", "adstack"} <= set(seen["names"]) and all(n.startswith("a") for n in seen["names"])
    assert seen["x"] == ["x.shape"] and seen["help"] == ["tbreak"]
