"""The Quadrants names qd does not have, and the error a lookup of one raises.

One table for every qd module that mirrors a Quadrants one: `MISSING[module][name]` is the key of the feature the
name belongs to, and `FEATURES[key]` says what the feature is and what to use in qd instead. Each such module's
`__getattr__` ends with `raise missing(<module>, name)`: a name of the table raises `UnsupportedFeatureError` (a
NotImplementedError naming the feature, and an AttributeError, so `hasattr` stays False), any other name the plain
AttributeError Python would raise.

The table was written by hand from Quadrants 1.3.3's public namespaces (`dir()` of `quadrants`, `quadrants.types`,
`.math`, `.lang`, `.algorithms`, `.graph`, `.simt`, `.tools`) less qd's. `tests/test_unsupported_names.py` checks
that no name of it exists in qd (a feature that lands must leave the table), that every public Quadrants name is in
qd or here, and that `docs/unsupported.md` lists every name.
"""

from __future__ import annotations

from typing import NamedTuple

from qd.errors import UnsupportedFeatureError

DOCS_PAGE = "docs/unsupported.md"


class Feature(NamedTuple):
    """A Quadrants feature qd lacks: what it is, and what qd offers instead ("" when nothing)."""

    what: str
    instead: str = ""


FEATURES: dict[str, Feature] = {
    "sparse": Feature("sparse SNodes and cell activation (pointer/bitmasked/dynamic SNodes, activate, deactivate, "
                      "is_active, append, length, rescale_index, the qd.sparse helpers)",
                      "dense fields (qd.field(..., shape=...), qd.root.dense), with an activity mask in a field"),
    "fields_builder": Feature("FieldsBuilder (SNode trees built and finalized at run time)",
                              "qd.field(..., shape=...) or qd.root.dense(...).place(...)"),
    "quant": Feature("quantized types and bit-packed fields (qd.types.quant, qd.BitpackedFields)",
                     "full-width dtypes (qd.u8, qd.u16, qd.f16)"),
    "get_addr": Feature("raw device addresses of field cells (qd.get_addr)",
                        "ndarrays, or to_numpy()/to_torch() to hand data to other code"),
    "mesh": Feature("meshes (qd.Mesh, qd.MeshInstance, qd.mesh_local, qd.mesh_patch_idx)",
                    "fields or ndarrays of vertices and element indices"),
    "checkpoint": Feature("checkpoints of graph kernels (qd.checkpoint, qd.GraphStatus)"),
    "sparse_linalg": Feature("sparse matrices and solvers (qd.linalg: SparseMatrix, SparseMatrixBuilder, "
                             "SparseSolver, SparseCG, MatrixFreeCG, MatrixFreeBICGSTAB, LinearOperator, "
                             "qd.sparse_matrix_builder)",
                             "small dense matrices: qd.solve, qd.svd, qd.sym_eig; or numpy/scipy on to_numpy()"),
    "clock": Feature("device cycle counters (qd.clock_counter, qd.clock_freq_hz)",
                     "time.perf_counter() around a launch and qd.sync()"),
    "global_thread_idx": Feature("qd.global_thread_idx()", "qd.simt.block.global_thread_idx()"),
    "dump_compile_config": Feature("qd.dump_compile_config (the compile configuration, for fastcache diagnostics)",
                                   "qd.cfg"),
    "python_arch": Feature("Quadrants' Python backend (qd.python)", "qd.interp, qd's reference interpreter"),
    "ref": Feature("reference parameters of real functions (qd.ref, qd.types.ref)",
                   "return values, or a field/ndarray the function writes"),
    "frexp": Feature("qd.frexp (a float split into mantissa and exponent)"),
    "device_capability": Feature("qd.DeviceCapability (device capability flags of Quadrants' runtime)"),
    "format": Feature("qd.Format (texture and image formats of Quadrants' runtime)"),
    "interop": Feature("qd.interop (Apple Metal/MPS interop)", "to_torch()/from_torch(), torch tensors as arguments"),
    "experimental": Feature("qd.experimental (real_func, warnings)", "qd.real_func"),
    "scan_reduce": Feature("graph-composable scans, reductions and stream compaction (qd.algorithms' "
                           "exclusive_scan_*, reduce_*, reduce_by_key_add, select and their *_scratch_slots)",
                           "qd.algorithms.PrefixSumExecutor (inclusive scan), atomics in a kernel"),
    "simt_sorting": Feature("subgroup sorting (qd.simt.sorting: bitonic_sort_kv, bitonic_sort_kv_tiled)",
                            "qd.algorithms.sort (device-wide radix sort)"),
    "math_fns": Feature("qd.math.fns (the n-th set bit of a 32-bit mask)", "qd.math.ffs, qd.math.popcnt"),
    "internals": Feature("a module of Quadrants' implementation (no public API of its own)",
                         "the public names, which qd has at qd.*, qd.types.*, qd.lang.*"),
    "vtk": Feature("VTK output (qd.tools.write_vtk, qd.tools.vtk; Quadrants' needs pyevtk)",
                   "pyevtk's gridToVTK on field.to_numpy()"),
    "diagnose": Feature("qd.tools.diagnose (prints the system environment)"),
    "imshow": Feature("qd.tools.imshow (shows an image in a window: Quadrants' GUI)",
                      "qd.tools.imwrite, then any image viewer"),
}

MISSING: dict[str, dict[str, str]] = {
    "qd": {
        "activate": "sparse", "deactivate": "sparse", "deactivate_all_snodes": "sparse", "is_active": "sparse",
        "no_activate": "sparse", "append": "sparse", "length": "sparse", "rescale_index": "sparse",
        "sparse": "sparse",
        "FieldsBuilder": "fields_builder",
        "BitpackedFields": "quant",
        "get_addr": "get_addr",
        "Mesh": "mesh", "MeshInstance": "mesh", "mesh_local": "mesh", "mesh_patch_idx": "mesh",
        "checkpoint": "checkpoint", "GraphStatus": "checkpoint",
        "linalg": "sparse_linalg", "sparse_matrix_builder": "sparse_linalg",
        "clock_counter": "clock", "clock_freq_hz": "clock",
        "global_thread_idx": "global_thread_idx",
        "dump_compile_config": "dump_compile_config",
        "python": "python_arch",
        "ref": "ref",
        "frexp": "frexp",
        "DeviceCapability": "device_capability",
        "Format": "format",
        "interop": "interop",
        "experimental": "experimental",
    },
    "qd.types": {
        "quant": "quant", "ref": "ref", "sparse_matrix_builder": "sparse_linalg",
        "compound_types": "internals", "ndarray_type": "internals", "utils": "internals",
    },
    "qd.math": {"fns": "math_fns"},
    # qd.lang also answers every name qd has (Quadrants' lang re-exports them), and looks names up in "qd" too.
    "qd.lang": {
        "mesh": "mesh", "graph_status": "checkpoint", "kernel_checkpoint": "checkpoint",
        "any_array": "internals", "ast": "internals", "common_ops": "internals", "expr": "internals",
        "intrinsics": "internals", "kernel_arguments": "internals", "kernel_impl": "internals",
        "runtime_ops": "internals", "shell": "internals", "snode": "internals", "source_builder": "internals",
    },
    "qd.algorithms": {
        "exclusive_scan_add": "scan_reduce", "exclusive_scan_max": "scan_reduce", "exclusive_scan_min": "scan_reduce",
        "exclusive_scan_scratch_slots": "scan_reduce", "reduce_add": "scan_reduce", "reduce_max": "scan_reduce",
        "reduce_min": "scan_reduce", "reduce_scratch_slots": "scan_reduce", "reduce_by_key_add": "scan_reduce",
        "reduce_by_key_scratch_slots": "scan_reduce", "select": "scan_reduce", "select_scratch_slots": "scan_reduce",
    },
    "qd.graph": {},  # (do_while, parallel_context and parallel: all there)
    "qd.simt": {"sorting": "simt_sorting", "tile_slicing": "internals"},
    "qd.tools": {"write_vtk": "vtk", "vtk": "vtk", "diagnose": "diagnose", "imshow": "imshow"},
}

# A module whose missing names may also be qd's (`qd.lang.checkpoint` is `qd.checkpoint`'s feature).
_ALSO = {"qd.lang": "qd"}


def feature_of(module: str, name: str) -> str | None:
    """The feature key of `module.name` in the table, or None when the table does not hold the name."""
    key = MISSING.get(module, {}).get(name)
    if key is None and module in _ALSO:
        key = MISSING[_ALSO[module]].get(name)
    return key


def message(module: str, name: str, key: str) -> str:
    """The error message for `module.name` of feature `key`: the feature, that qd lacks it, what instead, the docs."""
    feature = FEATURES[key]
    text = f"{module}.{name} is not implemented in qd yet (Quadrants feature: {feature.what})."
    if feature.instead:
        text += f" Instead: {feature.instead}."
    return text + f" qd's {DOCS_PAGE} lists every Quadrants name qd lacks."


def missing(module: str, name: str) -> AttributeError:
    """The exception a failed lookup of `module.name` raises: `UnsupportedFeatureError` for a name of the table,
    else Python's own AttributeError. For a module's `__getattr__`: `raise missing(__name__, name)`."""
    key = feature_of(module, name)
    if key is None:
        return AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
    return UnsupportedFeatureError(message(module, name, key), name=name)
