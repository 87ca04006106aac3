"""Sphinx configuration of qd's documentation: `bash dev.sh docs` builds it into docs/_build/html.

The pages are the Markdown files of docs/ (read by MyST); the API reference (api.md) is generated from
qd's docstrings by autodoc. No extension here needs the network.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))  # the qd of this checkout (its compiled modules are built in place)

project = "qd"
author = "the qd developers"
copyright = "the qd developers"
release = version = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# qd's docstrings write names in single backticks (as Markdown does): show them as code
default_role = "literal"

myst_heading_anchors = 3          # `[text](page.md#a-heading)` links resolve to the heading
myst_enable_extensions = ["colon_fence"]
# The ```python blocks of the pages are run by tests/test_docs_examples.py; a `skip` or `gpu` after the
# language marks a block the test leaves out, which Pygments would otherwise not know as a lexer name.
highlight_language = "none"  # a block without a language is shown as text

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"undoc-members": False}

html_theme = "alabaster"
html_title = "qd documentation"
html_static_path: list = []
