"""The offline cache's place and size cap (`qd/base/cache_dir.py`, issue 32): the default path under the platform's
cache directory (an explicit path and `QD_OFFLINE_CACHE_FILE_PATH` win), Quadrants' cleaning rule (at least the cap:
the `floor(factor * entries)` least recently used go, "fifo" by write time, "never"/"version" keep all), loads that
mark an entry used, cleaning when a program ends, and readers that lose an entry to another process's cleaning.

Recency is set with `os.utime` (access time = last use, modification time = written), never by sleeping.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import qd
from qd.base import cache_dir
from qd.base import config as _config
from qd.codegen import cache
from qd.errors import QuadrantsOptionError, QuadrantsRuntimeTypeError, QuadrantsWarning
from tests.conftest import init_arch

_T0 = 1_700_000_000 * 10**9  # a fixed epoch (ns) for the entries' times
_HOUR = 3600 * 10**9


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> int:
    """`touch`'s clock moved a day ahead; the time it reads (ns). Entries a test loads are given access times
    in the next hours: after their change time, so a read alone does not move them (Linux's `relatime` moves the
    access time of a file read when it is not after the modification or change time, or is a day old), and
    only a load that marks the entry used makes it the most recent."""
    t = time.time_ns() + 24 * _HOUR
    monkeypatch.setattr(cache_dir, "_now", lambda: t)
    return t


def _key(i: int) -> str:
    return f"{i:064x}"


def _make(root: Path, kind: str, i: int, exts: tuple[str, ...], size: int = 1000, used: int = 0,
          written: int = 0) -> list[Path]:
    """Entry `i` of `kind` under `root`: one file per extension, `size` bytes in all; used and written at
    `_T0` + the given seconds."""
    d = root / kind
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for n, ext in enumerate(exts):
        p = d / f"{_key(i)}.{ext}"
        p.write_bytes(b"x" * (size // len(exts) + (size % len(exts) if n == 0 else 0)))
        os.utime(p, ns=(_T0 + used * 10**9, _T0 + written * 10**9))
        paths.append(p)
    return paths


def _eight(root: Path) -> dict[int, list[Path]]:
    """Eight entries of 1000 bytes of every kind; entry i was used at second 10 + i, written at second 8 - i."""
    kinds = [("cpu", ("o", "meta")), ("fastcache", ("qfc",)), ("vulkan", ("o", "meta")), ("cuda", ("o", "meta"))]
    return {i: _make(root, kinds[i % 4][0], i, kinds[i % 4][1], used=10 + i, written=8 - i) for i in range(8)}


def _left(made: dict[int, list[Path]]) -> set[int]:
    """The entries with all their files still there (a removed entry has none left)."""
    for i, paths in made.items():
        assert len({p.exists() for p in paths}) == 1, f"entry {i} half removed"
    return {i for i, paths in made.items() if paths[0].exists()}


# ------------------------------------------------------------------ the rule


def test_lru_removes_the_least_recently_used_share(tmp_path: Path) -> None:
    made = _eight(tmp_path)
    assert cache_dir.evict(str(tmp_path), "lru", 8000, 0.25) == 2  # 8000 bytes: at the cap
    assert _left(made) == {2, 3, 4, 5, 6, 7}
    assert cache_dir.evict(str(tmp_path), "lru", 6000, 0.5) == 3  # floor(0.5 * 6)
    assert _left(made) == {5, 6, 7}


def test_under_the_cap_nothing_goes(tmp_path: Path) -> None:
    made = _eight(tmp_path)
    assert cache_dir.evict(str(tmp_path), "lru", 8001, 1.0) == 0
    assert _left(made) == set(range(8))


def test_fifo_orders_by_write_time(tmp_path: Path) -> None:
    made = _eight(tmp_path)
    assert cache_dir.evict(str(tmp_path), "fifo", 1, 0.25) == 2
    assert _left(made) == set(range(6))  # 7 and 6 were written first


@pytest.mark.parametrize("policy", ["never", "version"])
def test_never_and_version_keep_everything(tmp_path: Path, policy: str) -> None:
    made = _eight(tmp_path)
    assert cache_dir.evict(str(tmp_path), policy, 1, 1.0) == 0
    assert _left(made) == set(range(8))


def test_a_share_of_no_whole_entry_removes_none(tmp_path: Path) -> None:
    made = {i: _make(tmp_path, "cpu", i, ("o", "meta"), used=i) for i in range(3)}
    assert cache_dir.evict(str(tmp_path), "lru", 1, 0.25) == 0  # floor(0.25 * 3) = 0, as Quadrants
    assert cache_dir.evict(str(tmp_path), "lru", 1, 0.34) == 1
    assert _left(made) == {1, 2}


def test_only_cache_entries_are_counted_or_removed(tmp_path: Path) -> None:
    """A cache path pointed at a directory that holds other files: they neither count towards the cap nor go."""
    made = {i: _make(tmp_path, "cpu", i, ("o", "meta"), size=10, used=i) for i in range(4)}
    (tmp_path / "notes.txt").write_bytes(b"n" * 100_000)
    (tmp_path / "cpu" / "README").write_bytes(b"r" * 100_000)
    (tmp_path / "cpu" / ("ab" * 31 + ".o")).write_bytes(b"s" * 100_000)  # 62 hex digits: not a key
    assert cache_dir.evict(str(tmp_path), "lru", 41, 1.0) == 0  # the entries hold 40 bytes
    assert cache_dir.evict(str(tmp_path), "lru", 40, 1.0) == 4
    assert _left(made) == set()
    assert (tmp_path / "notes.txt").exists() and (tmp_path / "cpu" / "README").exists()
    assert (tmp_path / "cpu" / ("ab" * 31 + ".o")).exists()


def test_a_cleaning_in_progress_is_not_repeated(tmp_path: Path) -> None:
    """While another process holds the cleaning lock, a process that ends skips cleaning (no double share)."""
    import fcntl

    made = _eight(tmp_path)
    with open(tmp_path / ".clean.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert cache_dir.evict(str(tmp_path), "lru", 1, 0.25) == 0
    assert _left(made) == set(range(8))
    assert cache_dir.evict(str(tmp_path), "lru", 1, 0.25) == 2


# ------------------------------------------------------------------ loads mark entries used


def test_a_loaded_native_entry_survives(tmp_path: Path, later: int) -> None:
    cache.store(str(tmp_path / "cpu"), _key(1), b"code one", {"meta": 1})
    cache.store(str(tmp_path / "cpu"), _key(2), b"code two", {"meta": 2})
    now = time.time_ns()
    written = now - 2 * _HOUR
    for p in (tmp_path / "cpu").iterdir():  # entry 1 used before entry 2
        os.utime(p, ns=(now + (_HOUR if _key(1) in p.name else 2 * _HOUR), written))
    assert cache.load(str(tmp_path / "cpu"), _key(1)) == (b"code one", {"meta": 1})
    used = {e.paths[0].split(os.sep)[-1][:64]: e for e in cache_dir.entries(str(tmp_path))}
    assert used[_key(1)].used_ns == later and used[_key(1)].written_ns == written  # the written time is kept
    assert cache_dir.evict(str(tmp_path), "lru", 1, 0.5) == 1
    assert cache.load(str(tmp_path / "cpu"), _key(1)) is not None and cache.load(str(tmp_path / "cpu"), _key(2)) is None


def test_a_loaded_fastcache_entry_survives(tmp_path: Path, later: int) -> None:
    def run() -> qd.Kernel:
        init_arch(qd.interp, offline_cache_file_path=str(tmp_path), offline_cache_cleaning_policy="never")

        @qd.kernel(fastcache=True)
        def k(x: qd.types.ndarray(qd.i32, 1)):
            for i in x:
                x[i] += 1

        x = np.zeros(4, np.int32)
        k(x)
        assert (x == 1).all()
        return k

    assert vars(run()._primal.src_ll_cache_observations)["cache_stored"]
    entry = next((tmp_path / "fastcache").glob("*.qfc"))
    old = _make(tmp_path, "fastcache", 7, ("qfc",))  # an entry no one loads
    now = time.time_ns()
    os.utime(old[0], ns=(now + 2 * _HOUR, now - 2 * _HOUR))
    os.utime(entry, ns=(now + _HOUR, now - 2 * _HOUR))  # used before it, until loaded
    assert vars(run()._primal.src_ll_cache_observations)["cache_loaded"]
    qd.reset()
    assert os.stat(entry).st_atime_ns == later
    assert cache_dir.evict(str(tmp_path), "lru", 1, 0.5) == 1
    assert entry.exists() and not old[0].exists()


# ------------------------------------------------------------------ when cleaning runs


def test_a_program_cleans_its_cache_when_it_ends(tmp_path: Path) -> None:
    made = _eight(tmp_path)
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path), offline_cache_max_size_of_files=1)
    assert _left(made) == set(range(8))  # not at the start
    qd.reset()
    assert _left(made) == set(range(2, 8))  # the default factor, 0.25, and policy, "lru"
    qd.reset()  # no program: nothing more
    assert _left(made) == set(range(2, 8))
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path), offline_cache_max_size_of_files=1,
              offline_cache_cleaning_policy="never")
    qd.reset()
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path), offline_cache_max_size_of_files=1, offline_cache=False)
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path))  # (the previous program ends here) under 100 MiB
    assert _left(made) == set(range(2, 8))
    init_arch(qd.interp, offline_cache_file_path=str(tmp_path), offline_cache_max_size_of_files=6000)
    init_arch(qd.interp)
    assert _left(made) == set(range(3, 8))


def test_a_program_cleans_its_cache_at_exit(tmp_path: Path) -> None:
    made = _eight(tmp_path)
    script = (f"import qd\nqd.init(arch=qd.interp, log_level='warn', offline_cache_file_path={str(tmp_path)!r}, "
              f"offline_cache_max_size_of_files=1, offline_cache_cleaning_factor=0.5)\n")
    _python(script, tmp_path)
    assert _left(made) == set(range(4, 8))


# ------------------------------------------------------------------ options


def test_bad_cleaning_options_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(QuadrantsOptionError, match="offline_cache_cleaning_policy.*never, version, lru, fifo"):
        qd.init(arch=qd.interp, offline_cache_cleaning_policy="LRU")
    with pytest.raises(QuadrantsRuntimeTypeError, match="offline_cache_cleaning_policy"):
        qd.init(arch=qd.interp, offline_cache_cleaning_policy=1)
    with pytest.raises(QuadrantsOptionError, match="offline_cache_max_size_of_files=0 .*at least 1 byte"):
        qd.init(arch=qd.interp, offline_cache_max_size_of_files=0)  # (Quadrants fails on it when the program ends)
    monkeypatch.setenv("QD_OFFLINE_CACHE_MAX_SIZE_OF_FILES", "-5")
    with pytest.raises(QuadrantsOptionError, match="offline_cache_max_size_of_files=-5"):
        qd.init(arch=qd.interp)
    monkeypatch.delenv("QD_OFFLINE_CACHE_MAX_SIZE_OF_FILES")
    with pytest.raises(QuadrantsOptionError, match="offline_cache_cleaning_factor"):
        qd.init(arch=qd.interp, offline_cache_cleaning_factor=1.5)


def test_cleaning_options_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QD_OFFLINE_CACHE_CLEANING_POLICY", "fifo")
    monkeypatch.setenv("QD_OFFLINE_CACHE_MAX_SIZE_OF_FILES", "12345")
    init_arch(qd.interp, offline_cache_cleaning_factor=0.5)
    assert (qd.cfg.offline_cache_cleaning_policy, qd.cfg.offline_cache_max_size_of_files,
            qd.cfg.offline_cache_cleaning_factor) == ("fifo", 12345, 0.5)
    monkeypatch.delenv("QD_OFFLINE_CACHE_CLEANING_POLICY")
    monkeypatch.delenv("QD_OFFLINE_CACHE_MAX_SIZE_OF_FILES")
    init_arch(qd.interp)
    assert (qd.cfg.offline_cache_cleaning_policy, qd.cfg.offline_cache_max_size_of_files,
            qd.cfg.offline_cache_cleaning_factor) == ("lru", 100 * 1024 * 1024, 0.25)  # Quadrants' defaults


# ------------------------------------------------------------------ where the cache is


def test_the_default_path_is_the_platform_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QD_OFFLINE_CACHE_FILE_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    init_arch(qd.interp)
    assert qd.cfg.offline_cache_file_path == str(tmp_path / "xdg" / "qd")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _config.Config().offline_cache_file_path == str(tmp_path / "home" / ".cache" / "qd")
    init_arch(qd.interp)
    assert qd.cfg.offline_cache_file_path == str(tmp_path / "home" / ".cache" / "qd")


def test_an_explicit_path_and_the_environment_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("QD_OFFLINE_CACHE_FILE_PATH", str(tmp_path / "env"))
    init_arch(qd.interp)
    assert qd.cfg.offline_cache_file_path == str(tmp_path / "env")
    with pytest.warns(QuadrantsWarning, match="QD_OFFLINE_CACHE_FILE_PATH"):
        init_arch(qd.interp, offline_cache_file_path=str(tmp_path / "arg"))
    assert qd.cfg.offline_cache_file_path == str(tmp_path / "arg")


# ------------------------------------------------------------------ readers that lose entries


_KERNEL = """
import sys
import numpy as np
import qd

def run(cache):
    qd.init(arch=qd.cpu, log_level="warn", jit="eager", offline_cache_file_path=cache)

    @qd.kernel
    def k(x: qd.types.ndarray(qd.f32, 1)) -> qd.f32:
        s = 0.0
        for i in x:
            x[i] = x[i] * 2.0 + 1.0
            s += x[i]
        return s

    x = np.arange(100, dtype=np.float32)
    assert k(x) == 10000.0 and x[99] == 199.0, (x[99],)
    return k.stats["from_cache"]
"""


def _child(script: str, where: Path, *args: str) -> subprocess.Popen:
    """A Python process running `script` (written to `where`/child.py: kernels need a source file)."""
    path = where / "child.py"
    path.write_text(textwrap.dedent(script))
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return subprocess.Popen([sys.executable, str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def _python(script: str, where: Path, *args: str) -> str:
    """The output of `script` run to its end in a new process (which must succeed)."""
    p = _child(script, where, *args)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    return out


@pytest.mark.parametrize("lost", ["o", "meta", "both"])
def test_an_entry_removed_between_listing_and_loading_compiles_again(tmp_path: Path, lost: str) -> None:
    """The listing sees the entry, another process's cleaning removes its files, then the load: a miss that
    compiles again (the right result), not a crash; the entry is stored anew."""
    script = _KERNEL + "print('FROM', run(sys.argv[1]), run(sys.argv[1]))"
    assert "FROM False True" in _python(script, tmp_path, str(tmp_path / "cache"))
    listed = [e for e in cache_dir.entries(str(tmp_path / "cache")) if os.sep + "cpu" + os.sep in e.paths[0]]
    assert listed and all(len(e.paths) == 2 for e in listed)
    for e in listed:
        for p in e.paths:
            if lost == "both" or p.endswith("." + lost):
                os.unlink(p)
    assert "FROM False True" in _python(script, tmp_path, str(tmp_path / "cache"))


def test_processes_loading_while_others_clean(tmp_path: Path) -> None:
    """Two processes each run a fastcache kernel and a native one, then end with a cap of 1 byte and factor 1
    (every entry goes), 12 times: each loads entries the other is removing. All runs right, none crashes."""
    for n in range(2):
        (tmp_path / str(n)).mkdir()
    script = _KERNEL + textwrap.dedent("""
        cache = sys.argv[1]
        hits = 0
        for n in range(12):
            hits += bool(run(cache))

            @qd.kernel(fastcache=True)
            def f(y: qd.types.ndarray(qd.i32, 1)):
                for i in y:
                    y[i] += 3

            y = np.zeros(5, np.int32)
            f(y)
            assert (y == 3).all()
            qd.cfg.offline_cache_max_size_of_files = 1
            qd.cfg.offline_cache_cleaning_factor = 1.0
            qd.reset()
        print("DONE", hits)
    """)
    procs = [_child(script, tmp_path / str(n), str(tmp_path / "cache")) for n in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0 and "DONE" in out, err[-3000:]
