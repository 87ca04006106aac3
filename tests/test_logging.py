"""`qd._logging`: Quadrants' logging functions, levels, and qd's own messages going through them (so a program
that replaces them, as Genesis does, receives qd's messages)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import qd
from qd import _logging

_LINE = re.compile(r"^\[(?P<L>[TDIWEC]) \d\d/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3} \d+\] "
                   r"\[test_logging\.py:(?P<fn>\w+)@(?P<line>\d+)\] (?P<msg>.*)$")


@pytest.fixture(autouse=True)
def _keep_level() -> Iterator[None]:
    saved = _logging.get_logging_level()
    yield
    _logging.set_logging_level(saved)


def test_levels_and_format(capsys: pytest.CaptureFixture) -> None:
    assert (qd._logging.TRACE, qd._logging.DEBUG, qd._logging.INFO, qd._logging.WARN, qd._logging.ERROR,
            qd._logging.CRITICAL) == ("trace", "debug", "info", "warn", "error", "critical")
    assert qd.WARN == qd._logging.WARN and qd._logging.supported_log_levels[0] == "debug"
    assert qd.is_logging_effective is qd._logging.is_logging_effective
    qd._logging.set_logging_level("info")
    assert qd._logging.is_logging_effective("info") and not qd._logging.is_logging_effective("debug")
    qd._logging.info("hello {} {name}", 3, name="x")
    qd._logging.debug("not shown {}")  # below the level: not even formatted (no IndexError)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    m = _LINE.match(err[0])
    assert m is not None, err[0]
    assert (m["L"], m["fn"], m["msg"]) == ("I", "test_levels_and_format", "hello 3 x")


def test_error_and_critical_raise_only_when_effective(capsys: pytest.CaptureFixture) -> None:
    qd._logging.set_logging_level("warn")
    with pytest.raises(RuntimeError, match=r"\[test_logging\.py:.*\] bad 1$"):
        qd._logging.error("bad {}", 1)
    assert "] bad 1" in capsys.readouterr().err
    qd._logging.set_logging_level("critical")
    qd._logging.error("quiet")
    with pytest.raises(RuntimeError):
        qd._logging.critical("loud")
    qd._logging.set_logging_level("off")
    qd._logging.critical("silent")
    assert not qd._logging.is_logging_effective("critical")
    assert "quiet" not in capsys.readouterr().err


def test_set_logging_level_checks_and_persists(qd_program: object) -> None:
    with pytest.raises(RuntimeError, match="Unknown logging level 'loud'"):
        qd.set_logging_level("loud")
    qd.set_logging_level("trace")
    assert qd._logging.is_logging_effective("trace") and qd.cfg.log_level == "trace"
    qd.set_logging_level("Warning")
    assert qd._logging.get_logging_level() == "warn"
    qd.reset()  # the level is the process's, as in Quadrants
    assert qd._logging.get_logging_level() == "warn"
    qd.init(arch=qd.interp, log_level="error")
    assert qd._logging.get_logging_level() == "error"


def test_replaced_functions_receive_qds_messages(qd_program: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Genesis does `setattr(qd._logging, name, partial(logger.log, level))`: qd's messages reach it whatever the
    level (filtering is the original function's job), and `_get_logging` gives the original back."""
    got: list[tuple[str, str]] = []
    for name in ("trace", "debug", "info", "warn"):
        monkeypatch.setattr(qd._logging, name, lambda msg, _n=name: got.append((_n, msg)))

    @qd.kernel
    def k(x: qd.types.ndarray(qd.i32, 1)) -> None:
        for i in x:
            x[i] += 1

    k(qd.ndarray(qd.i32, 4))
    assert ("trace", "Materializing kernel k in primal mode...") in got
    monkeypatch.setenv("QD_ARCH", "interp")
    qd.init(log_level="warn")
    assert ("info", "Following QD_ARCH setting up for arch=interp") in got
    qd._logging.info = qd._logging._get_logging(qd._logging.INFO)
    assert qd._logging.info.__name__ == "info"
