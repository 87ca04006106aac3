"""Every ```python block of the documentation (docs/*.md, README.md) runs.

A page's blocks run in order, joined into one script, in a fresh Python process (QD_ARCH=cpu, so a page
that asks for a GPU tier falls back to the CPU on a machine without one); the process must exit 0. A block
opened with ```python plus a marker is treated differently; keep the set of marked blocks small:

- ```python skip  : not run (a fragment or a listing; the reason is given on the page, next to the block);
- ```python gpu   : run only where a GPU tier is available (otherwise the page's test says it left it out);
- ```python raises: run in a process of its own after the page's other blocks, and must fail (a page that shows
  an error on purpose); its blocks see the page's earlier blocks.

A page may also hold hidden set-up code that the reader does not need to see (the imports and data a fragment
uses): an HTML comment that opens with `<!-- python` runs as a block at its place; it is not rendered.

Pages that another branch edits, whose blocks this test cannot mark, get their markers from `OVERRIDES`.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("*.md")) + [ROOT / "README.md"]

# page -> {block index (0-based, among the page's ```python blocks): marker}, for pages edited elsewhere
OVERRIDES = {
    # a line-numbered listing, a script that fails on purpose (post mortem), a fragment of calls on that listing
    "debugger.md": {0: "skip", 1: "raises", 2: "skip"},
}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$"
                    r"|^(?P<hidden><!-- python)\n(?P<hbody>.*?)^-->[ \t]*$", re.MULTILINE | re.DOTALL)


def python_blocks(page: Path) -> list[tuple[str, str, int]]:
    """The page's ```python blocks: (marker or "", code, line number of the fence)."""
    text = page.read_text()
    out = []
    for m in _FENCE.finditer(text):
        if m.group("hidden"):
            out.append(("", m.group("hbody"), text.count("\n", 0, m.start()) + 1))
            continue
        words = m.group("info").split()
        if not words or words[0] != "python":
            continue
        marker = words[1] if len(words) > 1 else ""
        indent = len(m.group("indent"))
        body = "".join(line[indent:] + "\n" for line in m.group("body").splitlines())
        out.append((marker, body, text.count("\n", 0, m.start()) + 1))
    overrides = OVERRIDES.get(page.name, {})
    return [(overrides.get(n, marker), body, line) for n, (marker, body, line) in enumerate(out)]


def _gpu_available() -> bool:
    probe = "import qd, sys; sys.exit(0 if any(qd.is_arch_supported(a) for a in (qd.cuda, qd.vulkan)) else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, check=False).returncode == 0


def _script(blocks: list[tuple[str, str, int]], page: Path) -> str:
    # each block keeps its own line numbers in tracebacks: a `# line N` comment heads it
    return "".join(f"# {page.name}, block at line {line}\n{body}\n" for _, body, line in blocks)


def _run(code: str, tmp_path: Path, name: str) -> subprocess.CompletedProcess:
    script = tmp_path / name
    script.write_text(code)
    env = dict(os.environ, QD_ARCH="cpu", PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    env.pop("QD_JIT", None)
    return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                          timeout=300)


MARKERS = {"", "skip", "gpu", "raises"}


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    blocks = python_blocks(page)
    unknown = {marker for marker, _, _ in blocks} - MARKERS
    assert not unknown, f"{page.name}: unknown block markers {sorted(unknown)} (known: {sorted(MARKERS - {''})})"
    gpu = any(marker == "gpu" for marker, _, _ in blocks) and _gpu_available()
    runnable = [b for b in blocks if b[0] == "" or (b[0] == "gpu" and gpu)]
    proc = _run(_script(runnable, page), tmp_path, "page.py")
    assert proc.returncode == 0, f"{page.name}'s examples failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    for marker, body, line in blocks:
        if marker != "raises":
            continue
        before = [b for b in runnable if b[2] < line]
        proc = _run(_script(before + [(marker, body, line)], page), tmp_path, f"raises_{line}.py")
        assert proc.returncode != 0, f"{page.name}: the block at line {line} is marked `raises` but ran cleanly"
        assert "Traceback" in proc.stderr, proc.stderr[-3000:]


_LEFT_OUT = [(p, line, marker) for p in PAGES for marker, _, line in python_blocks(p) if marker in ("skip", "gpu")]


@pytest.mark.parametrize("page,line,marker", _LEFT_OUT, ids=[f"{p.name}:{line}" for p, line, _ in _LEFT_OUT])
def test_left_out_blocks(page: Path, line: int, marker: str) -> None:
    """One skipped test per block the page test leaves out, so that the run's summary lists them."""
    if marker == "gpu" and _gpu_available():
        return  # it ran in test_page_examples_run
    pytest.skip(f"{page.name}, block at line {line}: marked `{marker}`"
                + (" (no GPU tier here)" if marker == "gpu" else ""))


def test_markers_are_few() -> None:
    """Marked blocks are the exception: at most a fifth of all blocks are skipped."""
    blocks = [b for p in PAGES for b in python_blocks(p)]
    skipped = [b for b in blocks if b[0] == "skip"]
    assert len(skipped) * 5 <= len(blocks), f"{len(skipped)} of {len(blocks)} python blocks are marked skip"
