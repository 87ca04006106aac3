"""Public names of `qd.lang`: vectors, matrices, buffer views, small-matrix decompositions and the autotuning
dispatcher `perf_dispatch`, `outer` (re-exported at `qd` top level)."""

from qd.lang import graph, stream
from qd.lang._perf_dispatch import perf_dispatch
from qd.lang.buffer_view import BufferView
from qd.lang.graph import do_while as graph_do_while
from qd.lang.graph import parallel as graph_parallel
from qd.lang.graph import parallel_context as graph_parallel_context
from qd.lang.linalg import eig, make_spd, polar_decompose, solve, svd, sym_eig
from qd.lang.matrix import Matrix, Vector
from qd.lang.misc import is_extension_enabled
from qd.lang.outer import outer
from qd.lang.stream import Event, Stream, create_event, create_stream, stream_parallel
from qd.lang.struct import Struct, StructField, dataclass
from qd.lang.tensor import Backend, MatrixTensor, Tensor, VectorTensor, tensor, wrap
from qd.types.annotations import Template
from qd.types.enums import Layout

__all__: list[str] = ["BufferView", "Matrix", "Vector", "is_extension_enabled", "Template", "polar_decompose",
                      "svd", "sym_eig", "make_spd", "eig", "solve",
                      "Backend", "Tensor", "VectorTensor", "MatrixTensor", "tensor", "wrap",
                      "Struct", "StructField", "dataclass", "Layout", "perf_dispatch", "outer", "graph",
                      "graph_do_while", "graph_parallel", "graph_parallel_context", "stream", "Stream", "Event",
                      "create_stream", "create_event", "stream_parallel"]
