"""Quadrants' exception classes (also reachable as `qd.lang.exception`)."""


class QuadrantsCompilationError(Exception):
    """A kernel or function could not be compiled."""


class QuadrantsSyntaxError(QuadrantsCompilationError, SyntaxError):
    """Unsupported or invalid syntax inside a kernel."""


class QuadrantsNameError(QuadrantsCompilationError, NameError):
    """An undefined name inside a kernel."""


class QuadrantsIndexError(QuadrantsCompilationError, IndexError):
    """Wrong number of indices, or a constant index out of range."""


class QuadrantsTypeError(QuadrantsCompilationError, TypeError):
    """A type error found at compile time."""


class QuadrantsRuntimeError(RuntimeError):
    """An error raised while running a kernel."""


class QuadrantsAssertionError(QuadrantsRuntimeError, AssertionError):
    """A failed `assert`, bound check or adstack overflow in a kernel."""


class HostIndexError(IndexError, AssertionError):
    """An out-of-bounds host access to a field or ndarray (`x[i]` in Python scope). It is an IndexError, as
    for numpy, and an AssertionError, as Quadrants raises in debug mode; qd checks it in every mode."""


class QuadrantsRuntimeTypeError(QuadrantsRuntimeError, TypeError):
    """A kernel argument of the wrong type."""

    @staticmethod
    def get(pos: int, needed: str, provided: str) -> "QuadrantsRuntimeTypeError":
        return QuadrantsRuntimeTypeError(
            f"Argument {pos} (type={provided}) cannot be converted into required type {needed}")


class QuadrantsOptionError(QuadrantsRuntimeError, ValueError):
    """A `qd.init` option (or `qd.cfg` attribute) with a value qd refuses; a wrong type is a
    `QuadrantsRuntimeTypeError`."""


class SparseSNodeError(QuadrantsRuntimeError, NotImplementedError):
    """A sparse SNode (`qd.root.pointer`, `.bitmasked`, `.dynamic`, ...): qd supports dense SNodes only. A
    QuadrantsRuntimeError worded as Quadrants words it on a backend without sparse SNodes, so code matching on that
    keeps matching, and a NotImplementedError, as every Quadrants feature qd lacks (`UnsupportedFeatureError`)."""


class QuadrantsTypeWarning(Warning):
    pass


class QuadrantsWarning(Warning):
    pass


class QuadrantsArchError(QuadrantsCompilationError, ValueError):
    """A kernel uses an operation its arch lacks (`qd.simt` on the CPU tiers). A ValueError, as in Quadrants."""


class QuadrantsNotImplementedError(QuadrantsCompilationError, NotImplementedError):
    pass


class UnsupportedFeatureError(NotImplementedError, AttributeError):
    """A Quadrants name qd does not implement (yet), looked up on a qd module (`qd.checkpoint`, `qd.linalg`).

    A NotImplementedError, so the message (it names the Quadrants feature and the docs page listing every
    unsupported one) is what a user sees; and an AttributeError, so code that probes the namespace
    (`hasattr(qd, "x")`, `getattr(qd, "x", None)`) keeps working. The two bases combine: AttributeError's instance
    layout extends NotImplementedError's (BaseException's) by its `name`/`obj` slots, so Python finds one layout.
    `obj` stays unset: with it, Python appends a "Did you mean" guess to the message, which misleads here. A
    `from qd import x` of such a name still reports only Python's "cannot import name" (the import statement
    replaces any AttributeError)."""

    def __init__(self, message: str, name: str | None = None) -> None:
        super().__init__(message)
        self.name = name


__all__ = [
    "QuadrantsCompilationError", "QuadrantsSyntaxError", "QuadrantsNameError", "QuadrantsIndexError",
    "QuadrantsTypeError", "QuadrantsRuntimeError", "QuadrantsAssertionError", "QuadrantsRuntimeTypeError",
    "QuadrantsTypeWarning", "QuadrantsWarning", "QuadrantsNotImplementedError", "HostIndexError", "QuadrantsOptionError",
    "QuadrantsArchError", "UnsupportedFeatureError", "SparseSNodeError",
]
