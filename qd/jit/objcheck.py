"""Structural checks of a cached ELF object before LLVM's object loader sees it (issue 27 item 13).

LLVM's RuntimeDyld trusts the object it loads: a section or symbol table pointing outside the file, a symbol or
relocation naming an entry that is not there, an unknown relocation type or an address far outside its
section make it read wild memory, abort ("Invalid data was encountered", UNREACHABLE) or patch code at a wild
address. A cache entry's digest only says that the bytes are the ones stored; `problem` says what of the
structure the loader relies on is wrong, so the entry is a miss instead of a crash. What the checks cannot
see (machine code that is valid but wrong) only the digest guards.

Only 64-bit little-endian relocatable ELF files are checked (what `CpuTarget` emits on Linux); other formats
(Mach-O, COFF) are the loader's alone.
"""

from __future__ import annotations

import platform
import struct
import sys

_ELF_MAGIC = b"\x7fELF"
_MACHINES = {"x86_64": 62, "amd64": 62, "aarch64": 183, "arm64": 183, "ppc64le": 21, "riscv64": 243}
_SHT_SYMTAB, _SHT_STRTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 3, 4, 8, 9
_SHN_LORESERVE, _SHN_ABS, _SHN_COMMON = 0xFF00, 0xFFF1, 0xFFF2
_STT_FUNC, _STT_SECTION, _STT_FILE = 2, 3, 4
_SYMBOL_TYPES = frozenset({0, 1, 2, _STT_SECTION, _STT_FILE})  # no common, TLS or indirect symbols in qd's code
_BINDINGS = frozenset({0, 1, 2})  # local, global, weak
# the x86-64 relocation types LLVM's RuntimeDyldELF resolves (others reach `llvm_unreachable`), by the bytes
# each patches
_X86_64_RELOCS = {0: 0, 1: 8, 2: 4, 4: 4, 8: 4, 9: 4, 10: 4, 11: 4, 12: 2, 13: 2, 14: 1, 15: 1, 24: 8, 25: 8,
                  26: 4, 27: 8, 29: 8, 41: 4, 42: 4}
_ADDEND_SLACK = 64  # a PC-relative reference to a section: its offset less the instruction's tail


def _section_table(data: bytes) -> tuple[list[tuple[int, ...]], str | None]:
    """The section headers (name, type, offset, size, link, info, entsize), or a reason they cannot be read."""
    if len(data) < 64 or data[:4] != _ELF_MAGIC:
        return [], "no ELF header"
    if data[4] != 2 or data[5] != 1 or data[6] != 1:
        return [], "not a 64-bit little-endian ELF file of version 1"
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    want = _MACHINES.get(platform.machine().lower())
    if e_type != 1:
        return [], f"ELF type {e_type} is no relocatable object"
    if want is not None and e_machine != want:
        return [], f"ELF machine {e_machine} is not this machine's ({want})"
    shoff, = struct.unpack_from("<Q", data, 40)
    ehsize, _, phnum, shentsize, shnum, shstrndx = struct.unpack_from("<HHHHHH", data, 52)
    if ehsize != 64 or shentsize != 64 or phnum != 0:
        return [], "unexpected ELF header sizes"
    if shnum == 0 or shstrndx >= shnum or shoff < 64 or shoff + 64 * shnum > len(data):
        return [], "the section table lies outside the file"
    out = []
    for i in range(shnum):
        name, typ, _flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + 64 * i)
        out.append((name, typ, off, size, link, info, entsize))
    return out, None


def _sections_problem(data: bytes, secs: list[tuple[int, ...]]) -> str | None:
    n = len(secs)
    for i, (_name, typ, off, size, link, info, entsize) in enumerate(secs):
        if typ != _SHT_NOBITS and (off > len(data) or size > len(data) - off):
            return f"section {i} lies outside the file"
        if link >= n:
            return f"section {i} links to section {link} of {n}"
        if typ in (_SHT_SYMTAB, _SHT_RELA, _SHT_REL):
            want = 16 if typ == _SHT_REL else 24
            if entsize != want or size % want:
                return f"section {i} has entries of {entsize} bytes"
        if typ == _SHT_SYMTAB and secs[link][1] != _SHT_STRTAB:
            return f"symbol table {i} names no string table"
        if typ in (_SHT_RELA, _SHT_REL) and (secs[link][1] != _SHT_SYMTAB or info >= n):
            return f"relocation section {i} names no symbol table or target section"
        if typ == _SHT_STRTAB and size and data[off + size - 1] != 0:
            return f"string table {i} does not end in NUL"
    shstr = secs[struct.unpack_from("<H", data, 62)[0]]  # e_shstrndx (< the count: `_section_table`)
    if shstr[1] != _SHT_STRTAB or any(s[0] >= shstr[3] for s in secs[1:]):
        return "section names outside the section name table"
    return None


def _symbols(data: bytes, secs: list[tuple[int, ...]], table: int) -> tuple[list[tuple[str, int, int, int, int]],
                                                                           str | None]:
    """The (name, section, value, type, size) of symbol table `table`, or a reason it is wrong."""
    _, _, off, size, link, _, _ = secs[table]
    _, _, str_off, str_size, _, _, _ = secs[link]
    out = []
    for k, (st_name, st_info, _other, shndx, value, st_size) in enumerate(
            struct.iter_unpack("<IBBHQQ", data[off:off + size])):
        if st_name >= max(str_size, 1):
            return [], f"symbol {k}'s name lies outside its string table"
        if st_info & 0xF not in _SYMBOL_TYPES or st_info >> 4 not in _BINDINGS:
            return [], f"symbol {k} has type {st_info & 0xF} and binding {st_info >> 4}"
        if shndx and shndx < _SHN_LORESERVE:
            if shndx >= len(secs):
                return [], f"symbol {k} is in section {shndx} of {len(secs)}"
            sec = secs[shndx]
            if value > sec[3] or st_size > sec[3] - value:
                return [], f"symbol {k} lies outside its section"
        elif shndx and shndx not in (_SHN_ABS, _SHN_COMMON):
            return [], f"symbol {k} has the reserved section index {shndx:#x}"
        end = data.find(b"\0", str_off + st_name, str_off + str_size)
        out.append((data[str_off + st_name:end].decode("latin-1"), shndx, value, st_info & 0xF, st_size))
    return out, None


def _relocations_problem(data: bytes, secs: list[tuple[int, ...]], i: int, syms: list) -> str | None:
    _, typ, off, size, _, target, _ = secs[i]
    target_size = secs[target][3]
    x86_64 = struct.unpack_from("<H", data, 18)[0] == 62
    fmt = "<QQq" if typ == _SHT_RELA else "<QQ"
    for k, entry in enumerate(struct.iter_unpack(fmt, data[off:off + size])):
        r_offset, r_info = entry[0], entry[1]
        sym, rtype = r_info >> 32, r_info & 0xFFFFFFFF
        if sym >= len(syms):
            return f"relocation {k} of section {i} names symbol {sym} of {len(syms)}"
        if x86_64 and rtype not in _X86_64_RELOCS:
            return f"relocation {k} of section {i} has type {rtype}, which LLVM's loader does not resolve"
        width = _X86_64_RELOCS[rtype] if x86_64 else 1
        if r_offset > target_size or target_size - r_offset < width:
            return f"relocation {k} of section {i} patches outside its section"
        _, shndx, _, stype, _ = syms[sym]
        if stype == _STT_FILE:
            return f"relocation {k} of section {i} names a file symbol"
        if typ == _SHT_RELA:
            addend = entry[2]
            if stype == _STT_SECTION and 0 < shndx < len(secs) and not (
                    -_ADDEND_SLACK <= addend <= secs[shndx][3] + _ADDEND_SLACK):
                return f"relocation {k} of section {i} points outside section {shndx}"
            if abs(addend) >= 1 << 32:
                return f"relocation {k} of section {i} has the addend {addend}"
    return None


def problem(data: bytes, symbols: list[str]) -> str | None:
    """Why LLVM's object loader must not load `data` (a reason), or None; `symbols` must be defined in it."""
    if not sys.platform.startswith("linux") and data[:4] != _ELF_MAGIC:
        return None  # another object format: the loader's alone
    secs, why = _section_table(data)
    if why is not None:
        return why
    why = _sections_problem(data, secs)
    if why is not None:
        return why
    tables = [i for i, s in enumerate(secs) if s[1] == _SHT_SYMTAB]
    if len(tables) != 1:
        return f"{len(tables)} symbol tables"
    syms, why = _symbols(data, secs, tables[0])
    if why is not None:
        return why
    for i, s in enumerate(secs):
        if s[1] in (_SHT_RELA, _SHT_REL):
            if s[4] != tables[0]:
                return f"relocation section {i} uses another symbol table"
            why = _relocations_problem(data, secs, i, syms)
            if why is not None:
                return why
    defined = {name for name, shndx, *_ in syms if shndx}
    missing = [s for s in symbols if s not in defined]
    return f"the symbols {missing} are not defined" if missing else None


def function_sizes(data: bytes) -> dict[str, int]:
    """The byte size of each function an ELF object defines (empty for another format or a malformed object)."""
    if data[:4] != _ELF_MAGIC:
        return {}
    secs, why = _section_table(data)
    tables = [i for i, s in enumerate(secs) if s[1] == _SHT_SYMTAB] if why is None else []
    if len(tables) != 1:
        return {}
    syms, why = _symbols(data, secs, tables[0])
    return {} if why else {name: size for name, shndx, _, kind, size in syms if shndx and kind == _STT_FUNC}


__all__ = ["function_sizes", "problem"]
