"""The documentation builds with no warnings, and its API reference covers qd's public names.

The build is Sphinx with warnings as errors (what `bash dev.sh docs` runs), into a temporary directory; it is
skipped, with the reason, where Sphinx or MyST is not installed (`dev.sh test` installs them: pyproject's
`docs` extra).
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import qd

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_docs_build_without_warnings(tmp_path: Path) -> None:
    missing = [m for m in ("sphinx", "myst_parser") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (pip install 'qd-lang[docs]'; dev.sh test installs them)")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-E",
                           "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, f"the docs build failed or warned:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert (tmp_path / "html" / "api.html").is_file()


def _public_names() -> set[str]:
    import qd.frontend.api
    import qd.lang.api
    import qd.runtime.api

    names = set(qd.runtime.api.__all__) | set(qd.frontend.api.__all__) | set(qd.lang.api.__all__)
    names |= set(qd.errors.__all__)
    names |= {n for n in vars(qd.types.dtypes) if isinstance(getattr(qd.types.dtypes, n), qd.types.DataType)
              and hasattr(qd, n)}
    names |= {"kernel", "Kernel", "pure"}
    return names


def test_api_reference_names_every_public_name() -> None:
    """Every public name of `qd` is on the API reference page (documented by autodoc or named in its text)."""
    text = (DOCS / "api.md").read_text()
    mentioned = set(re.findall(r"\bqd\.(\w+)", text))
    missing = sorted(_public_names() - mentioned)
    assert not missing, f"public names missing from docs/api.md: {missing}"


def test_init_docstring_lists_every_option_that_acts() -> None:
    """`help(qd.init)` shows every option qd acts on (the table of qd/base/config.py's module docstring)."""
    from qd.base import config

    doc = qd.init.__doc__
    missing = [name for name in [*config._EFFECTIVE, "check_out_of_bound"] if not re.search(rf"\b{name}\b", doc)]
    assert not missing, f"qd.init's docstring does not describe these options: {missing}"


def test_docs_links_resolve() -> None:
    """Relative links of README.md and docs/*.md point at files of the repository."""
    bad = []
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            if not path.exists() or ROOT not in path.parents:
                bad.append(f"{page.name}: {target}")
        bad += [f"{page.name}: {ref}" for ref in re.findall(r"`(\.\./[^`]*)`", page.read_text())]
    assert not bad, f"links to paths outside the repository or that do not exist: {bad}"
