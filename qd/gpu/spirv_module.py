"""A SPIR-V binary module builder. It knows nothing of qd: ids, instructions, types and constants.

`Module` keeps one instruction list per logical section and writes them in the order the specification
requires (2.4 "Logical Layout of a Module"): capabilities, extensions, extended-instruction imports, the
memory model, entry points, execution modes, debug names, annotations, then types / constants / global
variables, then function definitions. Types and constants are deduplicated (one id per distinct type or
value), except where an id must stay distinct (`struct` with `unique=True`, for its own decorations).
Instruction operands are ints (ids and 32-bit literals), `str` (a nul-terminated UTF-8 literal, padded to
words) or `Wide(value, words)` (a multi-word literal, low word first).

    m = Module()
    m.capability(Capability.Shader)
    m.memory_model(AddressingModel.Logical, MemoryModel.GLSL450)
    f32 = m.float(32)
    fn = m.function(m.void(), m.function_type(m.void()))
    fn.label(); fn.op(Op.Return); fn.end()
    words = m.words()
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from qd.gpu.spirv_defs import (MAGIC, RESULT, AddressingModel, Capability, Decoration, ExecutionMode,
                               ExecutionModel, FunctionControl, MemoryModel, Op, StorageClass)

GENERATOR = 0  # registered tool id; 0 = unregistered


@dataclass(frozen=True)
class Wide:
    """A literal of `words` 32-bit words (a 64-bit constant: `Wide(v, 2)`), low word first."""

    value: int
    words: int


def _string_words(s: str) -> list[int]:
    data = s.encode("utf-8") + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def encode(op: int, operands: tuple) -> list[int]:
    """One instruction as words."""
    body: list[int] = []
    for x in operands:
        if isinstance(x, str):
            body += _string_words(x)
        elif isinstance(x, Wide):
            v = x.value & ((1 << (32 * x.words)) - 1)
            body += [(v >> (32 * k)) & 0xFFFFFFFF for k in range(x.words)]
        else:
            v = int(x)
            if not -(1 << 31) <= v < (1 << 32):
                raise ValueError(f"SPIR-V operand {v} of {Op(op).name} does not fit a word: use Wide")
            body.append(v & 0xFFFFFFFF)
    n = len(body) + 1
    if n >= 1 << 16:
        raise ValueError(f"SPIR-V instruction {Op(op).name} has {n} words (at most 65535)")
    return [(n << 16) | int(op)] + body


_SECTIONS = ("capabilities", "extensions", "imports", "memory_model", "entry_points", "execution_modes",
             "debug", "annotations", "globals", "functions")


class Module:
    def __init__(self, version: tuple[int, int] = (1, 3)) -> None:
        self.version = version
        self.bound = 1
        self.sec: dict[str, list[list[int]]] = {s: [] for s in _SECTIONS}
        self._types: dict[tuple, int] = {}
        self._consts: dict[tuple, int] = {}
        self._caps: set[int] = set()
        self._exts: set[str] = set()
        self._imports: dict[str, int] = {}

    # ------------------------------------------------------------ ids and raw instructions
    def id(self) -> int:
        i = self.bound
        self.bound += 1
        return i

    def _emit(self, section: str, op: Op, *operands: Any) -> None:
        self.sec[section].append(encode(op, operands))

    def _result(self, section: str, op: Op, *operands: Any, type_id: int | None = None) -> int:
        rid = self.id()
        ops = (type_id, rid) + operands if type_id is not None else (rid,) + operands
        self._emit(section, op, *ops)
        return rid

    # ------------------------------------------------------------ module-level declarations
    def capability(self, cap: Capability) -> None:
        if int(cap) not in self._caps:
            self._caps.add(int(cap))
            self._emit("capabilities", Op.Capability, cap)

    def extension(self, name: str) -> None:
        if name not in self._exts:
            self._exts.add(name)
            self._emit("extensions", Op.Extension, name)

    def import_ext(self, name: str) -> int:
        """The id of an extended instruction set (`"GLSL.std.450"`), imported once."""
        if name not in self._imports:
            self._imports[name] = self._result("imports", Op.ExtInstImport, name)
        return self._imports[name]

    def memory_model(self, addressing: AddressingModel, memory: MemoryModel) -> None:
        if self.sec["memory_model"]:
            raise ValueError("a SPIR-V module has one OpMemoryModel")
        self._emit("memory_model", Op.MemoryModel, addressing, memory)

    def entry_point(self, model: ExecutionModel, fn: int, name: str, interface: tuple[int, ...] = ()) -> None:
        self._emit("entry_points", Op.EntryPoint, model, fn, name, *interface)

    def execution_mode(self, fn: int, mode: ExecutionMode, *literals: int) -> None:
        self._emit("execution_modes", Op.ExecutionMode, fn, mode, *literals)

    def name(self, target: int, text: str) -> None:
        self._emit("debug", Op.Name, target, text)

    def member_name(self, struct_id: int, member: int, text: str) -> None:
        self._emit("debug", Op.MemberName, struct_id, member, text)

    def decorate(self, target: int, decoration: Decoration, *literals: int) -> None:
        self._emit("annotations", Op.Decorate, target, decoration, *literals)

    def member_decorate(self, struct_id: int, member: int, decoration: Decoration, *literals: int) -> None:
        self._emit("annotations", Op.MemberDecorate, struct_id, member, decoration, *literals)

    # ------------------------------------------------------------ types (deduplicated)
    def type(self, op: Op, *operands: Any, unique: bool = False) -> int:
        key = (int(op),) + tuple(operands)
        if not unique and key in self._types:
            return self._types[key]
        tid = self._result("globals", op, *operands)
        if not unique:
            self._types[key] = tid
        return tid

    def void(self) -> int:
        return self.type(Op.TypeVoid)

    def bool(self) -> int:
        return self.type(Op.TypeBool)

    def int(self, width: int, signed: bool) -> int:
        return self.type(Op.TypeInt, width, int(signed))

    def float(self, width: int) -> int:
        return self.type(Op.TypeFloat, width)

    def vector(self, component: int, count: int) -> int:
        return self.type(Op.TypeVector, component, count)

    def array(self, element: int, length: int) -> int:
        """A fixed-size array; `length` is a count (its u32 constant is made here)."""
        return self.type(Op.TypeArray, element, self.constant(self.int(32, False), length))

    def runtime_array(self, element: int, unique: bool = False) -> int:
        return self.type(Op.TypeRuntimeArray, element, unique=unique)

    def struct(self, *members: int, unique: bool = False) -> int:
        return self.type(Op.TypeStruct, *members, unique=unique)

    def float_widths(self) -> set[int]:
        """The widths of the float types declared so far."""
        return {key[1] for key in self._types if key[0] == Op.TypeFloat}

    def pointer(self, storage: StorageClass, pointee: int) -> int:
        return self.type(Op.TypePointer, storage, pointee)

    def function_type(self, ret: int, *params: int) -> int:
        return self.type(Op.TypeFunction, ret, *params)

    # ------------------------------------------------------------ constants (deduplicated)
    def _type_info(self, type_id: int) -> tuple:
        for key, tid in self._types.items():
            if tid == type_id:
                return key
        raise KeyError(f"id {type_id} is not a type of this module")

    def constant(self, type_id: int, value: Any) -> int:
        """A scalar constant of an int, float or bool type (ints wrap to the width; floats round)."""
        info = self._type_info(type_id)
        op = info[0]
        if op == Op.TypeBool:
            key = (type_id, bool(value))
            if key not in self._consts:
                self._consts[key] = self._result("globals", Op.ConstantTrue if value else Op.ConstantFalse,
                                                 type_id=type_id)
            return self._consts[key]
        width = info[1]
        if op == Op.TypeFloat:
            fmt, ifmt = {16: ("<e", "<H"), 32: ("<f", "<I"), 64: ("<d", "<Q")}[width]
            bits = struct.unpack(ifmt, struct.pack(fmt, float(value)))[0]
        elif op == Op.TypeInt:
            bits = int(value) & ((1 << width) - 1)
        else:
            raise TypeError(f"constant of a non-scalar type {Op(op).name}: use constant_composite")
        key = (type_id, bits)
        if key not in self._consts:
            lit = Wide(bits, 2) if width == 64 else bits
            self._consts[key] = self._result("globals", Op.Constant, lit, type_id=type_id)
        return self._consts[key]

    def constant_composite(self, type_id: int, *parts: int) -> int:
        key = (type_id, "composite") + parts
        if key not in self._consts:
            self._consts[key] = self._result("globals", Op.ConstantComposite, *parts, type_id=type_id)
        return self._consts[key]

    def variable(self, pointer_type: int, storage: StorageClass, initializer: int | None = None) -> int:
        """A module-scope OpVariable (storage buffers, built-in inputs, workgroup memory)."""
        extra = () if initializer is None else (initializer,)
        return self._result("globals", Op.Variable, storage, *extra, type_id=pointer_type)

    # ------------------------------------------------------------ functions
    def function(self, ret: int, fn_type: int, control: FunctionControl = FunctionControl.None_) -> "Function":
        return Function(self, ret, fn_type, control)

    # ------------------------------------------------------------ output
    def words(self) -> list[int]:
        if not self.sec["memory_model"]:
            raise ValueError("a SPIR-V module needs OpMemoryModel (Module.memory_model)")
        major, minor = self.version
        out = [MAGIC, (major << 16) | (minor << 8), GENERATOR, self.bound, 0]
        for s in _SECTIONS:
            for ins in self.sec[s]:
                out += ins
        return out

    def to_bytes(self) -> bytes:
        w = self.words()
        return struct.pack(f"<{len(w)}I", *w)


class Function:
    """A function being defined: `label()` opens a block, `op(...)` appends an instruction (returning its
    result id when the opcode has one), `end()` closes the function. Function-scope `OpVariable`s go to
    the first block, as the specification requires (`local`)."""

    def __init__(self, m: Module, ret: int, fn_type: int, control: FunctionControl) -> None:
        self.m = m
        self.id = m.id()
        self._head = [encode(Op.Function, (ret, self.id, control, fn_type))]
        self._params: list[list[int]] = []
        self._locals: list[list[int]] = []
        self._entry: list[list[int]] = []
        self._body: list[list[int]] = []
        self._first_label: list[int] | None = None
        self._open = True

    def param(self, type_id: int) -> int:
        pid = self.m.id()
        self._params.append(encode(Op.FunctionParameter, (type_id, pid)))
        return pid

    def label(self, label_id: int | None = None) -> int:
        lid = label_id if label_id is not None else self.m.id()
        ins = encode(Op.Label, (lid,))
        if self._first_label is None:
            self._first_label = ins
        else:
            self._body.append(ins)
        return lid

    def local(self, pointer_type: int, initializer: int | None = None) -> int:
        vid = self.m.id()
        extra = () if initializer is None else (initializer,)
        self._locals.append(encode(Op.Variable, (pointer_type, vid, StorageClass.Function) + extra))
        return vid

    def entry_op(self, op: Op, *operands: Any, type_id: int | None = None) -> int | None:
        """Like `op`, but the instruction goes to the end of the first block (after the function-scope
        variables), whatever block is open now: values computed once per invocation and used anywhere (the
        first block dominates every other). The caller ends the first block with its first `op` (a branch)."""
        return self._append(self._entry, op, operands, type_id)

    def op(self, op: Op, *operands: Any, type_id: int | None = None) -> int | None:
        """Append `op`. With a result id (per the grammar) the id is made here and returned; `type_id` is
        required exactly when the opcode has a result type."""
        return self._append(self._body, op, operands, type_id)

    def _append(self, out: list, op: Op, operands: tuple, type_id: int | None) -> int | None:
        if not self._open:
            raise ValueError("the function has ended")
        if self._first_label is None:
            raise ValueError("an instruction before the function's first OpLabel")
        has_type, has_result = RESULT[int(op)]
        if has_type != (type_id is not None):
            raise ValueError(f"{Op(op).name} {'needs' if has_type else 'takes no'} result type")
        rid = self.m.id() if has_result else None
        head = ((type_id,) if has_type else ()) + ((rid,) if has_result else ())
        out.append(encode(op, head + operands))
        return rid

    def end(self) -> int:
        if self._first_label is None:
            raise ValueError("a function definition needs at least one block")
        self._open = False
        self.m.sec["functions"] += (self._head + self._params + [self._first_label] + self._locals + self._entry
                                 + self._body
                                    + [encode(Op.FunctionEnd, ())])
        return self.id
