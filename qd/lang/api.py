"""Public names of `qd.lang`: vectors and matrices (re-exported at `qd` top level)."""

from qd.lang.matrix import Matrix, Vector

__all__: list[str] = ["Matrix", "Vector"]
