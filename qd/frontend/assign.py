"""Assignments: locals (type fixed by the first assignment), unpacking, stores through subscripts and
swizzles, augmented assignment (atomic on globals for `+= -= &= |= ^=`)."""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from typing import Any

from qd import ir
from qd.errors import QuadrantsSyntaxError, QuadrantsTypeError, QuadrantsTypeWarning
from qd.frontend import expr as _e
from qd.frontend import mindex as _mi
from qd.frontend import simt as _simt
from qd.frontend import structs as _s
from qd.frontend import values as _v
from qd.frontend.expr import Expr
from qd.frontend.views import ViewValue
from qd.ops import Op
from qd.types import dtypes
from qd.types.dtypes import MatrixType

_ATOMIC_AUG = {ast.Add: Op.ADD, ast.Sub: Op.SUB, ast.BitAnd: Op.BIT_AND, ast.BitOr: Op.BIT_OR,
               ast.BitXor: Op.BIT_XOR}
# On a kernel-scope local inside a parallel loop `*=` is atomic too (Quadrants leaves it a racy
# load-multiply-store; qd gives the product, which is the only result a user can want).
_ATOMIC_LOCAL_AUG = {**_ATOMIC_AUG, ast.Mult: Op.MUL}


_AUG_NAME = {Op.ADD: "add", Op.SUB: "sub", Op.BIT_AND: "and", Op.BIT_OR: "or", Op.BIT_XOR: "xor", Op.MUL: "mul"}
_NARROWING_WARNED: dict[str, dict] = {}  # per file: the warnings registry (a line warns once per process)


def warn_if_narrowing(b: Any, value: Any, dst: dtypes.DataType, what: str) -> None:
    """Quadrants' warning, a `QuadrantsTypeWarning` at the statement's line, when storing `value` in a `dst` place
    may lose precision: the promoted type of the two is not `dst` (`acc = 0; acc += 0.5 * i` truncates). Not for a
    Python int literal that `dst` holds exactly (`x[i] = 3` into a u8 field: Quadrants warns there)."""
    if isinstance(value, Expr):
        src = value.dtype
    elif _e.is_number(value):
        src = _e.literal_dtype(value)
        if src.is_int and dst.is_int and _int_fits(int(value), dst):
            return
    else:
        return
    if src == dst or dtypes.promote(dst, src) == dst or b.loc is None:
        return
    loc = b.loc
    warnings.warn_explicit(f"{what} may lose precision: {dst} <- {src} (in {loc.func}); qd.cast(value, qd.{dst}) "
                           f"converts explicitly", QuadrantsTypeWarning, loc.file, loc.line,
                           registry=_NARROWING_WARNED.setdefault(loc.file, {}))


def _int_fits(v: int, dt: dtypes.DataType) -> bool:
    lo, hi = (-(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1) if dt.is_signed else (0, (1 << dt.bits) - 1)
    return lo <= v <= hi


_AUG_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
               ast.Pow: "**", ast.MatMult: "@", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<",
               ast.RShift: ">>"}


def _kind_of(value: Any) -> str:
    """A target's kind in words, for the error of a deferred update it does not take."""
    if _e.is_matrix(value):
        return f"a {'x'.join(map(str, _v.shape_of(value)))} matrix"
    if isinstance(value, Expr):
        return f"a {value.dtype} scalar"
    if isinstance(value, _s.StructVal):
        return f"the struct {value._name()}"
    return "an element or another place" if value is None else f"a {type(value).__name__}"


@dataclass
class LV:
    """Addressable places: `refs` are Allocas or GlobalPtrs; `shape` None for a scalar."""

    refs: list
    shape: tuple | None = None
    exact: bool = False  # a slice of a vector/matrix: a vector/matrix stored there must have its shape


@dataclass
class DynLV:
    """An element chosen by a runtime index among `options`."""

    index: Expr
    options: list


@dataclass
class SeqLV:
    items: list


class AssignMixin:
    # -------------------------------------------------------------- statements
    def visit_Assign(self, node: ast.Assign) -> None:
        value = self.visit(node.value)
        static = self._is_static_call(node.value)
        for t in node.targets:
            self.assign_target(t, value, static)

    def _is_static_call(self, node: ast.expr) -> bool:
        from qd.frontend.ranges import static

        if not isinstance(node, ast.Call):
            return False
        try:
            return self._peek(node.func) is static
        except Exception:  # noqa: BLE001
            return False

    def _peek(self, node: ast.expr) -> Any:
        """Resolve a Name/Attribute chain without emitting IR (None when it is not static)."""
        if isinstance(node, ast.Name):
            found, v = self.ctx.find_local(node.id)
            return v if found else self.ctx.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self._peek(node.value)
            return getattr(base, node.attr, None)
        return None

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name):
            raise QuadrantsSyntaxError("annotated assignment is only supported on simple names")
        found, binding = self.ctx.find_local(node.target.id)
        if found and isinstance(binding, _v.ParamRef):
            raise QuadrantsSyntaxError(f'Kernel argument "{node.target.id}" is immutable in the kernel. If you want '
                                       f"to change its value, please create a new variable.")
        ann = self.visit(node.annotation)
        value = self.visit(node.value) if node.value is not None else 0
        self.ctx.bind(node.target.id, self.init_var(value, ann, node.target.id))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        from qd.frontend.exprs import op_of_aug

        name = op_of_aug(node.op)
        rhs = self.visit(node.value)
        if self._struct_augassign(node, rhs):
            return
        if isinstance(node.target, ast.Name):
            from qd.frontend.exprs import _PYOPS, is_runtime

            if self._shared_local_aug(node.target.id, node.op, rhs):
                return
            cur = self.visit(ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node.target))
            if isinstance(node.op, ast.MatMult):
                new = cur @ rhs
            elif is_runtime(cur) or is_runtime(rhs):
                new = _e.binary(name, cur, rhs)
            else:
                new = _PYOPS[type(node.op)](cur, rhs)
            self.assign_name(node.target.id, new)
            return
        lv = self.lvalue(node.target)
        self._aug_store(lv, node.op, name, rhs)

    def _struct_augassign(self, node: ast.AugAssign, rhs: Any) -> bool:
        """`s op= x` where `s` is a struct whose type defines `_augassign(other, op)` (a register tile's
        `tile -= qd.outer(a, b)`): the method does the update (`op` is the AST operator name, "Sub" for `-=`).
        A deferred right side (`qd.outer(...)`) on any other target is an error. False when neither applies."""
        target = self._struct_place(node.target)
        if target is not None and target.stype is not None and "_augassign" in target.stype.methods:
            target.member("_augassign")(rhs, type(node.op).__name__)
            return True
        if getattr(rhs, "_qd_is_deferred", False):
            if isinstance(node.target, ast.Name):  # the error path only: what the target is, for the message
                target = self.visit(ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node.target))
            raise QuadrantsTypeError(
                f"`{ast.unparse(node.target)} {_AUG_SYMBOL.get(type(node.op), '?')}= {ast.unparse(node.value)}`: "
                f"the target is {_kind_of(target)}, which takes no deferred update. qd.outer(a, b) is only valid as "
                "the right side of `tile -= qd.outer(a, b)` on a register tile (qd.simt.Tile16x16 / Tile32x32, or a "
                "@qd.dataclass defining _augassign); for the outer product of two vectors as a matrix, write "
                "`a.outer_product(b)`.")
        return False

    def _struct_place(self, target: ast.expr) -> _s.StructVal | None:
        """The struct a Name / Attribute target denotes (a local, `self` in a method, a nested member), found
        without emitting IR; None for anything else."""
        if isinstance(target, ast.Name):
            found, v = self.ctx.find_local(target.id)
        elif isinstance(target, ast.Attribute):
            base = self._struct_place(target.value)
            found, v = base is not None, base.members.get(target.attr) if base is not None else None
        else:
            return None
        v = v.sv if isinstance(v, _s.SelfRef) else v
        return v if found and isinstance(v, _s.StructVal) else None

    def _shared_local_aug(self, name: str, op: ast.operator, rhs: Any) -> bool:
        """`s op= rhs` on a local declared outside the enclosing parallel loop: an atomic update
        (`LocalAtomic`), so every iteration's contribution lands (Quadrants: `+= -= &= |= ^=` are atomic;
        qd adds `*=`). False, with nothing emitted, for any other target or operator."""
        if type(op) not in _ATOMIC_LOCAL_AUG:
            return False
        found, binding = self.ctx.find_local(name)
        lv = self._binding_lv(binding) if found else None
        if not isinstance(lv, LV) or not all(isinstance(r, ir.Alloca) and self.b.shared_local(r) for r in lv.refs):
            return False
        if type(op) in (ast.BitAnd, ast.BitOr, ast.BitXor) and not all(r.dtype.is_int for r in lv.refs):
            raise QuadrantsTypeError(f"bitwise augmented assignment on a {lv.refs[0].dtype} variable")
        atomic = _ATOMIC_LOCAL_AUG[type(op)]
        for ref, v in zip(lv.refs, self._entries_for(lv, rhs)):
            warn_if_narrowing(self.b, v, ref.dtype, f"Atomic {_AUG_NAME[atomic]}")
            self.b.local_atomic(atomic, ref, _e.as_expr(v).value)
        return True

    def _aug_store(self, lv: Any, op: ast.operator, name: str, rhs: Any) -> None:
        if isinstance(lv, SeqLV):
            raise QuadrantsSyntaxError("augmented assignment to a tuple is not supported")
        if isinstance(lv, DynLV):
            self._dyn_each(lv, lambda opt: self._aug_store(opt, op, name, rhs))
            return
        if not isinstance(lv, LV):
            raise QuadrantsSyntaxError("augmented assignment target is not assignable")
        vals = self._entries_for(lv, rhs)
        for ref, v in zip(lv.refs, vals):
            if isinstance(ref, ir.GlobalPtr) and type(op) in _ATOMIC_AUG:
                if type(op) not in (ast.Add, ast.Sub) and not ref.dtype.is_int:
                    raise QuadrantsTypeError(f"bitwise augmented assignment on a {ref.dtype} element")
                warn_if_narrowing(self.b, v, ref.dtype, f"Atomic {_AUG_NAME[_ATOMIC_AUG[type(op)]]}")
                val = _e.cast_expr(_e.as_expr(v), ref.dtype)
                self.b.emit(ir.AtomicRMW, op=_ATOMIC_AUG[type(op)], ptr=ref, value=val.value, dtype=ref.dtype)
                continue
            cur = self._load_ref(ref)
            if not name:
                raise QuadrantsSyntaxError("'@=' on an element is not supported")
            self._store_ref(ref, _e.binary(name, cur, v))

    # -------------------------------------------------------------- targets
    def assign_target(self, target: ast.expr, value: Any, static: bool = False) -> None:
        if isinstance(target, ast.Name):
            if static:
                self.ctx.bind(target.id, value)
            else:
                self.assign_name(target.id, value)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            items = self._unpack(value, len(target.elts))
            for t, v in zip(target.elts, items):
                self.assign_target(t, v, static)
            return
        if static:
            raise QuadrantsSyntaxError("Static assign cannot be used on elements in arrays")
        self.store(self.lvalue(target), value)

    def _unpack(self, value: Any, n: int) -> list:
        if _e.is_matrix(value):
            shape = _v.shape_of(value)
            ents = list(value.entries)
            items = ents if len(shape) == 1 else [
                _v.make_matrix(ents[r * shape[1]:(r + 1) * shape[1]], (shape[1],)) for r in range(shape[0])]
        elif isinstance(value, Expr):
            raise QuadrantsSyntaxError("cannot unpack a scalar runtime value")
        else:
            try:
                items = list(value)
            except TypeError:
                raise QuadrantsSyntaxError(f"Cannot unpack type: {type(value).__name__}") from None
        if len(items) != n:
            raise QuadrantsSyntaxError("The number of targets is not equal to value length")
        return items

    def assign_name(self, name: str, value: Any) -> None:
        found, binding = self.ctx.find_local(name)
        if not found:
            self.ctx.bind(name, self.init_var(value, name=name))
            return
        lv = self._binding_lv(binding)
        if lv is None:
            if isinstance(binding, (_v.ParamRef, _v.MatrixParamRef)):
                raise QuadrantsSyntaxError(f'Kernel argument "{name}" is immutable in the kernel. If you want to '
                                           f"change its value, please create a new variable.")
            # a loop index or another read-only value: the name now denotes a new local (Python semantics
            # for the rest of the body; Quadrants' ndrange indices are locals too)
            self.ctx.bind(name, self.init_var(value, name=name))
            return
        self.store(lv, value)

    def _binding_lv(self, binding: Any) -> Any:
        if isinstance(binding, _v.Var):
            return LV([binding.alloca])
        if isinstance(binding, _v.MatrixVar):
            return LV(list(binding.allocas), tuple(binding.shape))
        if isinstance(binding, Expr) and binding.ptr is not None:
            return LV([binding.ptr])
        if _e.is_matrix(binding) and all(isinstance(x, Expr) and x.ptr is not None for x in binding.entries):
            return LV([x.ptr for x in binding.entries], _v.shape_of(binding))
        if isinstance(binding, _s.StructVal):
            return binding
        if type(binding) in (tuple, list):
            items = [self._binding_lv(x) for x in binding]
            return SeqLV(items) if all(i is not None for i in items) else None
        return None

    def init_var(self, value: Any, ann: Any = None, name: str = "") -> Any:
        """A fresh local holding `value` (numbers, Exprs and matrices get Allocas; objects bind as-is).
        `name` is the source name, recorded on the Allocas for the debugger (`v[i]` per component)."""
        b = self.b
        if isinstance(value, (_s.StructVal, _s.SelfRef)) or isinstance(ann, _s.StructType):
            return _s.init_local(self, value, ann, name)
        if isinstance(ann, MatrixType) or (ann is None and _e.is_matrix(value)):
            if not _e.is_matrix(value):
                value = _v.make_matrix([value] * (ann.n * (ann.m if ann.ndim == 2 else 1)), ann.shape)
            dt = ann.dtype if isinstance(ann, MatrixType) and ann.dtype is not None else _v.matrix_dtype(value)
            allocas = []
            names = _component_names(name, _v.shape_of(value))
            for e, nm in zip(value.entries, names):
                a = b.alloca(dt, nm)
                b.store(a, _e.as_expr(e).value)
                allocas.append(a)
            return _v.MatrixVar(allocas, _v.shape_of(value))
        if ann is not None:
            dt = dtypes.to_dtype(ann)
            if _e.is_matrix(value):
                raise QuadrantsTypeError(f"cannot assign a matrix to a variable annotated {dt}")
        elif isinstance(value, Expr):
            dt = value.dtype
        elif _e.is_number(value):
            dt = _e.literal_dtype(value)
        elif type(value) in (tuple, list):
            return type(value)(self.init_var(x) for x in value)
        else:
            return value
        a = b.alloca(dt, name)
        warn_if_narrowing(b, value, dt, "Assign")
        b.store(a, _e.cast_expr(_e.as_expr(value), dt).value)
        return _v.Var(a)

    # -------------------------------------------------------------- lvalues
    def lvalue(self, node: ast.expr) -> Any:
        """An LV/DynLV/SeqLV for assignable targets, or the plain value for other objects."""
        if isinstance(node, ast.Name):
            found, binding = self.ctx.find_local(node.id)
            if found:
                lv = self._binding_lv(binding)
                return lv if lv is not None else _v.read(binding)
            return self.wrap_global(self.ctx.lookup(node.id), node.id)
        if isinstance(node, ast.Subscript):
            base = self.lvalue(node.value)
            if isinstance(base, ViewValue) and isinstance(node.slice, ast.Slice):
                return self.view_slice(base, node.slice)
            tiled = _simt.tile_slice(self, base, node.slice)
            if tiled is not None:
                return tiled
            return self._lv_subscript(base, self.visit(node.slice))
        if isinstance(node, ast.Attribute):
            base = self.lvalue(node.value)
            return self._lv_attribute(base, node.attr)
        return self.visit(node)

    def _lv_subscript(self, base: Any, idx: Any) -> Any:
        if isinstance(base, _s.StructFieldRef):
            return base.element(self.index_list(idx))
        if isinstance(base, _s.UnpackedGroup):
            return base.sv.member_lv(base.member_name(idx))
        if isinstance(base, (_v.GlobalTensor, ViewValue)):
            refs = base.ptrs(self.index_list(idx))
            return LV(refs, tuple(base.elem_shape) or None)
        if isinstance(base, SeqLV):
            if isinstance(idx, Expr):
                raise QuadrantsSyntaxError("a tuple can only be indexed by compile-time values")
            return base.items[idx]
        if isinstance(base, LV):
            return self._lv_index(base, idx)
        if isinstance(base, (LV, DynLV)):
            raise QuadrantsSyntaxError("nested runtime indexing of an assignment target is not supported")
        return self.subscript(base, idx) if not isinstance(base, (list, dict)) else \
            self.wrap_global(base[idx])

    def _lv_index(self, lv: LV, idx: Any) -> Any:
        """The places `lv[idx]` names (`frontend/mindex.py`): an LV, or a DynLV over the places a runtime
        index chooses among (`m[q, :]`: one row per value of `q`)."""
        if lv.shape is None:
            raise QuadrantsSyntaxError("a scalar cannot be indexed")
        sel = _mi.select(lv.shape, idx)
        index, options = _mi.places(sel)
        shape = sel.shape or None
        lvs = [LV([lv.refs[p] for p in opt], shape, exact=shape is not None) for opt in options]
        return lvs[0] if index is None else DynLV(index, lvs)

    def _lv_attribute(self, base: Any, attr: str) -> Any:
        from qd.frontend.exprs import _SWIZZLE

        if isinstance(base, _s.StructVal):
            return base.member_lv(attr)
        if isinstance(base, LV) and base.shape is not None and all(c in _SWIZZLE for c in attr):
            refs = [base.refs[_SWIZZLE[c]] for c in attr]
            return LV(refs, None if len(refs) == 1 else (len(refs),))
        if isinstance(base, (LV, DynLV, SeqLV)):
            raise QuadrantsSyntaxError(f"cannot assign to attribute '{attr}' of a local value")
        if isinstance(base, (_v.GlobalTensor, _v.StructRef, _v.LiftedObject)) or base is None or isinstance(base, Expr):
            return self.attribute(base, attr)
        return self.wrap_global(getattr(base, attr), attr)

    # -------------------------------------------------------------- stores
    def store(self, lv: Any, value: Any) -> None:
        if hasattr(lv, "qd_assign"):  # a target standing for several places (qd.simt's tile slices and `tile[:]`)
            return lv.qd_assign(value)
        if isinstance(lv, _s.StructVal):
            return _s.store(self, lv, value)
        if isinstance(lv, SeqLV):
            for item, v in zip(lv.items, self._unpack(value, len(lv.items))):
                self.store(item, v)
            return
        if isinstance(lv, DynLV):
            self._dyn_each(lv, lambda opt: self.store(opt, value))
            return
        if not isinstance(lv, LV):
            raise QuadrantsSyntaxError("the assignment target is not assignable (not a local variable, "
                                       "field element or ndarray element)")
        for ref, v in zip(lv.refs, self._entries_for(lv, value)):
            self._store_ref(ref, v)

    def _entries_for(self, lv: LV, value: Any) -> list:
        if type(value) in (list, tuple) and lv.shape is not None:
            flat = [x for row in value for x in (row if type(row) in (list, tuple) else [row])]
            value = _v.make_matrix(flat, (len(flat),))
        if lv.shape is None:
            if _e.is_matrix(value):
                raise QuadrantsTypeError("cannot assign a vector/matrix to a scalar")
            return [value]
        if _e.is_matrix(value):
            if len(value.entries) != len(lv.refs) or lv.exact and _v.shape_of(value) != lv.shape:
                raise QuadrantsTypeError(f"cannot assign a value of shape {_v.shape_of(value)} to a place of shape "
                                         f"{lv.shape}")
            return list(value.entries)
        return [value] * len(lv.refs)

    def _dyn_each(self, lv: DynLV, fn: Any) -> None:
        b = self.b
        for k, opt in enumerate(lv.options):
            cond = _e.binary("eq", lv.index, k)
            b.push()
            b.depth += 1
            try:
                fn(opt)
            finally:
                b.depth -= 1
                blk = b.pop()
            b.emit(ir.If, cond=cond.value, then=blk)

    def _load_ref(self, ref: Any) -> Expr:
        if isinstance(ref, ir.GlobalPtr):
            return Expr(self.b.global_load(ref), ptr=ref)
        return Expr(self.b.load(ref), ptr=ref)

    def _store_ref(self, ref: Any, value: Any) -> None:
        if isinstance(value, Expr) or _e.is_number(value):
            warn_if_narrowing(self.b, value, ref.dtype, "Assign")
            v = _e.cast_expr(value, ref.dtype)
        else:
            raise QuadrantsTypeError(f"cannot store a value of type {type(value).__name__} in a kernel variable")
        if isinstance(ref, ir.GlobalPtr):
            self.b.emit(ir.GlobalStore, ptr=ref, value=v.value)
        else:
            self.b.store(ref, v.value)

    def bind_static_target(self, target: ast.expr, item: Any) -> None:
        """Bind a loop/comprehension target to a compile-time item (no Allocas)."""
        if isinstance(target, ast.Name):
            self.ctx.bind(target.id, item)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            for t, v in zip(target.elts, self._unpack(item, len(target.elts))):
                self.bind_static_target(t, v)
            return
        raise QuadrantsSyntaxError("unsupported loop target")


__all__ = ["LV", "AssignMixin", "DynLV", "SeqLV"]


def _component_names(name: str, shape: tuple) -> list[str]:
    """`v[0]`, `v[1]`... (or `m[0, 1]`...) for the components of a vector or matrix local named `name`."""
    if not name:
        return [""] * (shape[0] * (shape[1] if len(shape) == 2 else 1))
    if len(shape) == 1:
        return [f"{name}[{i}]" for i in range(shape[0])]
    return [f"{name}[{i}, {j}]" for i in range(shape[0]) for j in range(shape[1])]
