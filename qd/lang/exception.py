"""`qd.lang.exception`: Quadrants' module path for the exception classes (re-exports `qd/errors.py`)."""

from qd.errors import *  # noqa: F403
from qd.errors import __all__  # noqa: F401
