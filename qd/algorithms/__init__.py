"""`qd.algorithms`: whole-array primitives. `parallel_sort` and `PrefixSumExecutor` are called from Python scope
(`_host.py`); `sort` is Quadrants' device-wide radix sort, a `@qd.func` called at the top level of a kernel, with
`sort_scratch_slots` sizing its scratch (`_radix_sort.py`)."""

from qd.algorithms._host import PrefixSumExecutor, parallel_sort
from qd.algorithms._radix_sort import sort, sort_scratch_slots

__all__ = ["PrefixSumExecutor", "parallel_sort", "sort", "sort_scratch_slots"]


def __getattr__(name: str) -> object:
    """A Quadrants `qd.algorithms` name qd lacks (the graph-composable scans, ...) raises an error naming its feature
    (qd/_unsupported.py)."""
    from qd._unsupported import missing

    raise missing("qd.algorithms", name)
