"""Public names of `qd.lang`: vectors, matrices and buffer views (re-exported at `qd` top level)."""

from qd.lang.buffer_view import BufferView
from qd.lang.matrix import Matrix, Vector
from qd.lang.misc import is_extension_enabled
from qd.types.annotations import Template

__all__: list[str] = ["BufferView", "Matrix", "Vector", "is_extension_enabled", "Template"]
