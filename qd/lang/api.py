"""Public names of `qd.lang`: vectors and matrices (re-exported at `qd` top level)."""

from qd.lang.matrix import Matrix, Vector
from qd.lang.misc import is_extension_enabled
from qd.types.annotations import Template

__all__: list[str] = ["Matrix", "Vector", "is_extension_enabled", "Template"]
