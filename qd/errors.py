"""Quadrants' exception classes (also reachable as `qd.lang.exception`)."""


class QuadrantsCompilationError(Exception):
    """`qd.QuadrantsCompilationError`: a kernel or func could not be compiled. Raised when the kernel is first
    called (compiled) for a given set of template arguments, with the kernel source line in the message;
    the base class of `QuadrantsSyntaxError`, `QuadrantsNameError`, `QuadrantsIndexError`,
    `QuadrantsTypeError`, `QuadrantsArchError` and `QuadrantsNotImplementedError`, so one `except` catches
    them all. A failed `qd.static_assert` raises it directly."""


class QuadrantsSyntaxError(QuadrantsCompilationError, SyntaxError):
    """`qd.QuadrantsSyntaxError`: a construct a kernel or func cannot compile: unsupported Python syntax, a runtime
    value where a compile-time one is needed (`qd.static(n)` of a kernel argument), a `qd.func` called from
    Python scope, an atomic on a non-writable target. Also a `SyntaxError`."""


class QuadrantsNameError(QuadrantsCompilationError, NameError):
    """`qd.QuadrantsNameError`: a name used in a kernel or func that is defined neither locally nor in the
    function's globals or closure. Also a `NameError`."""


class QuadrantsIndexError(QuadrantsCompilationError, IndexError):
    """`qd.QuadrantsIndexError`: found at compile time: the wrong number of indices for a field, ndarray or matrix,
    or a constant index out of range of a vector or matrix. Also an `IndexError`."""


class QuadrantsTypeError(QuadrantsCompilationError, TypeError):
    """`qd.QuadrantsTypeError`: a type error found at compile time (a bit operation on floats, a float
    `qd.atomic_cas`, a bad struct member type, an integer literal outside its dtype's range), or a wrong
    argument to a host-side helper such as `qd.algorithms.parallel_sort`. Also a `TypeError`."""


class QuadrantsRuntimeError(RuntimeError):
    """`qd.QuadrantsRuntimeError`: an error raised by the runtime rather than the compiler: while running a
    kernel, or while setting up fields and SNodes (a non-positive field dimension). The base of
    `QuadrantsAssertionError`, `QuadrantsRuntimeTypeError`, `QuadrantsOptionError` and `SparseSNodeError`.
    Also a `RuntimeError`."""


class QuadrantsAssertionError(QuadrantsRuntimeError, AssertionError):
    """`qd.QuadrantsAssertionError`: a check that failed while a kernel ran: an `assert` in the kernel (in debug
    mode), an out-of-bounds field/ndarray access or local-matrix index (with `debug=True` or
    `check_out_of_bound=True`), or an autodiff stack overflow. Also an `AssertionError`."""


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
    """`qd.QuadrantsTypeWarning`: Quadrants' warning category for type issues, kept for code that filters on it
    (`warnings.filterwarnings("ignore", category=qd.QuadrantsTypeWarning)`)."""


class QuadrantsWarning(Warning):
    """`qd.QuadrantsWarning`: Quadrants' general warning category, kept for code that filters on it."""


class QuadrantsArchError(QuadrantsCompilationError, ValueError):
    """A kernel uses an operation its arch lacks (`qd.simt` on the CPU tiers). A ValueError, as in Quadrants."""


class QuadrantsNotImplementedError(QuadrantsCompilationError, NotImplementedError):
    """`qd.QuadrantsNotImplementedError`: a kernel uses a construct the compiler recognises but does not implement.
    A `QuadrantsCompilationError` and a `NotImplementedError`."""


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
