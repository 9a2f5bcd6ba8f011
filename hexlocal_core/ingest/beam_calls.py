"""The remote calls a compiled module makes, with the file, line and function of each site.

Read from the BEAM file's own tables, not from debug info (which `debug_info: false` and
`beam_lib:strip` remove, and whose Elixir AST is a moving target):

    AtU8 / Atom  the atom table; `ImpT` (imports) and `ExpT` (exports) index into it
    ImpT         every `Mod:fun/arity` the module calls remotely: the exact set of uses
    Code         the instructions: `func_info` names the function that follows, `line`
                 sets the current position, `call_ext`, `call_ext_last`, `call_ext_only`
                 call an import; a `move` of an external fun literal (`&Decimal.add/2`)
                 is a use too
    Line         the position table `line` indexes: file names and line numbers
    LitT         the literal table (zlib), read only for external funs `fun M:F/A`
    Attr         the module attributes (ETF): `behaviour` (either spelling)

Code is decoded with the compact term encoding (the low 3 bits of a byte are the tag).
An opcode outside `OPCODE_ARITY` stops the walk for that module: the calls seen keep
their lines, the imports not reached are reported without one, and the reason is
counted. Bad bytes raise nothing but `BeamSkipped`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

from attrs import frozen

from hexlocal_core.cancel import checkpoint
from hexlocal_core.errors import IngestError
from hexlocal_core.ingest import etf
from hexlocal_core.ingest.beam_file import (
    MAX_BEAM_BYTES,
    BeamSkipped,
    chunks_of,
    read_capped,
    real_path,
)
from hexlocal_core.model import Atom
from hexlocal_core.untrusted import clip, decode_text

MAX_LITERALS_BYTES = 16 * 1024 * 1024  # a module's inflated literal table
MAX_ARG_BYTES = 1024  # a compact-term integer of more bytes is not from a compiler
MAX_LIST_ARGS = 1 << 20
_CHECK_EVERY = 4096  # instructions between cancellation checks

# The instructions read; every other one is skipped by its arity.
FUNC_INFO, INT_CODE_END, MOVE, LINE = 2, 3, 64, 153
# Opcode -> which operand is an import index: call_ext, call_ext_last, call_ext_only, and
# the BIF calls (bif0/1/2/3, gc_bif1/2/3), whose imports are `erlang` functions.
IMPORT_OPERAND = {7: 1, 8: 1, 78: 1, 9: 0, 10: 1, 11: 1, 124: 2, 125: 2, 152: 2, 185: 1}

# Opcode -> arity, BEAM format 0: lib/compiler/src/genop.tab (OTP 25: 1-180; OTP 26 adds
# update_record/5 and bs_match/3, OTP 27 executable_line/2, OTP 28 debug_line/4, OTP 29
# bif3/6 and the native record instructions 186-191).
# Retired opcodes (a leading `-` in genop.tab) are absent: no compiler since R15 emits them.
OPCODE_ARITY: dict[int, int] = {
    1: 1, 2: 3, 3: 0, 4: 2, 5: 3, 6: 2, 7: 2, 8: 3, 9: 2, 10: 4, 11: 5, 12: 2, 13: 3,
    14: 2, 15: 3, 16: 2, 17: 1, 18: 1, 19: 0, 20: 0, 21: 0, 22: 0, 23: 2, 24: 1, 25: 1,
    26: 2, 39: 3, 40: 3, 41: 3, 42: 3, 43: 3, 44: 3, 45: 2, 46: 2, 47: 2, 48: 2, 49: 2,
    50: 2, 51: 2, 52: 2, 53: 2, 55: 2, 56: 2, 57: 2, 58: 3, 59: 3, 60: 3, 61: 1, 62: 2,
    63: 1, 64: 2, 65: 3, 66: 3, 67: 3, 69: 3, 70: 2, 71: 1, 72: 1, 73: 0, 74: 1, 75: 1,
    77: 2, 78: 2, 89: 5, 90: 5, 91: 5, 92: 2, 94: 0, 95: 1, 96: 2, 97: 2, 98: 4, 99: 4,
    100: 4, 101: 4, 102: 3, 103: 1, 104: 2, 105: 1, 106: 1, 107: 1, 108: 2, 109: 6,
    111: 5, 112: 1, 113: 2, 114: 2, 115: 3, 116: 5, 117: 7, 118: 7, 119: 7, 120: 5,
    121: 3, 122: 2, 123: 2, 124: 5, 125: 6, 129: 2, 130: 1, 131: 3, 132: 4, 133: 0,
    134: 8, 135: 6, 136: 2, 137: 6, 138: 5, 139: 4, 140: 5, 141: 4, 142: 5, 143: 4,
    144: 3, 145: 3, 146: 3, 147: 3, 148: 3, 149: 0, 150: 1, 151: 1, 152: 7, 153: 1,
    154: 5, 155: 5, 156: 2, 157: 3, 158: 3, 159: 4, 160: 0, 161: 0, 162: 2, 163: 2,
    164: 2, 165: 3, 166: 4, 167: 3, 168: 2, 169: 2, 170: 4, 171: 3, 172: 1, 173: 2,
    174: 1, 175: 1, 176: 1, 177: 6, 178: 3, 179: 0, 180: 1, 181: 5, 182: 3, 183: 2,
    184: 4, 185: 6, 186: 2, 187: 4, 188: 3, 189: 6, 190: 3, 191: 5,
}  # fmt: skip

# Compact term tags (the low 3 bits) and extended (z) sub-tags.
TAG_U, TAG_I, TAG_A, TAG_X, TAG_Y, TAG_F, TAG_H, TAG_Z = range(8)
Z_LIST, Z_FLOAT_REG, Z_ALLOC_LIST, Z_LITERAL, Z_TYPED_REG = 1, 2, 3, 4, 5
LITERAL = 0x100 | Z_LITERAL  # how `skip_operand` tags a literal-table index
FLOAT_REG = 0x100 | Z_FLOAT_REG

Mfa = tuple[str, str, int]  # (module as written, function, arity): ("Decimal", "cmp", 2)


@frozen
class CallSite:
    """One use of `Mod.fun/arity`: where it is, when the module says so."""

    module: str  # the callee, `Elixir.` dropped: "Decimal", "lists"
    function: str
    arity: int
    caller: str | None  # "bigger?/2", None when the walk did not reach it
    file: str | None
    line: int | None
    fun_ref: bool = False  # `&Mod.fun/arity`, not a call


@frozen
class ModuleCalls:
    """What one compiled module uses of other modules."""

    module: str  # `Elixir.` dropped
    calls: tuple[CallSite, ...]
    behaviours: tuple[str, ...]  # modules it implements (`use Ecto.Repo` puts one here)
    exports: frozenset[tuple[str, int]]
    has_lines: bool  # a Line chunk was there to say where each call is
    has_attributes: bool  # an Attr chunk was there (beam_lib:strip drops it)
    stopped: str | None = None  # why the code walk ended early, counted by the scan


@frozen
class BeamCalls:
    """Every module of a set of ebin folders, and what was skipped and why."""

    modules: tuple[ModuleCalls, ...]
    skipped: dict[str, int]  # reason -> files
    stopped: dict[str, int]  # reason -> modules whose walk ended early
    files: int


def display(module: str) -> str:
    return module.removeprefix("Elixir.")


def read_beam_calls(data: bytes) -> ModuleCalls:
    """The remote calls of one `.beam` file.

    :raises BeamSkipped: not_beam, truncated, no_atoms, no_imports, bad_gzip.
    """
    chunks = chunks_of(gunzipped(data))
    atoms = read_atoms(chunks.get("AtU8"), chunks.get("Atom"))
    imports = _mfa_table(chunks.get("ImpT"), atoms, "ImpT")
    if imports is None:
        raise BeamSkipped("no_imports", f"{clip(display(atoms[0]))} has no import table")
    exports = _mfa_table(chunks.get("ExpT"), atoms, "ExpT") or []
    lines = _line_table(chunks.get("Line"))
    walk = _Walk(atoms, imports, lines, _fun_literals(chunks.get("LitT"), atoms))
    stopped = walk.run(chunks.get("Code"))
    behaviours, has_attrs = _behaviours(chunks.get("Attr"))
    seen = {(s.module, s.function, s.arity) for s in walk.sites}
    unplaced = tuple(
        CallSite(display(m), f, a, None, None, None)
        for m, f, a in dict.fromkeys(imports)
        if (display(m), f, a) not in seen
    )
    return ModuleCalls(
        module=display(atoms[0]),
        calls=(*walk.sites, *unplaced),
        behaviours=behaviours,
        exports=frozenset((f, a) for _, f, a in exports),
        has_lines=lines is not None,
        has_attributes=has_attrs,
        stopped=stopped,
    )


def calls_from_ebins(ebins: Sequence[Path], *, max_file_bytes: int = MAX_BEAM_BYTES) -> BeamCalls:
    """Every `*.beam` of `ebins`; an unreadable file is counted under its reason."""
    modules: list[ModuleCalls] = []
    skipped: dict[str, int] = {}
    stopped: dict[str, int] = {}
    files = 0
    for ebin in ebins:
        root = real_path(ebin)
        for path in sorted(ebin.glob("*.beam")):
            checkpoint()
            files += 1
            try:
                found = read_beam_calls(read_capped(path, max_file_bytes, root))
            except BeamSkipped as exc:
                skipped[exc.reason] = skipped.get(exc.reason, 0) + 1
                continue
            if found.stopped:
                stopped[found.stopped] = stopped.get(found.stopped, 0) + 1
            modules.append(found)
    return BeamCalls(tuple(modules), skipped, stopped, files)


def gunzipped(data: bytes, limit: int = MAX_BEAM_BYTES) -> bytes:
    """The beam itself: `beam_lib:strip` (and so stripped releases) writes beams gzipped,
    which the loader accepts; inflated to at most `limit` bytes."""
    if data[:2] != b"\x1f\x8b":
        return data
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as exc:
        raise BeamSkipped("bad_gzip", f"a gzipped beam that does not inflate: {exc}") from exc
    if len(out) > limit or not inflater.eof:
        raise BeamSkipped("bad_gzip", f"a gzipped beam larger than {limit} bytes or cut short")
    return out


# --- tables ------------------------------------------------------------------------------


def read_atoms(utf8: bytes | None, latin1: bytes | None) -> list[str]:
    """The atom table, index 0 first (the module). OTP 28 writes a negative count when the
    lengths use the compact encoding."""
    table, encoding = (utf8, "utf-8") if utf8 is not None else (latin1, "latin-1")
    if table is None or len(table) < 4:
        raise BeamSkipped("no_atoms", "BEAM file has no atom table")
    (count,) = struct.unpack_from(">i", table, 0)
    compact, count = count < 0, abs(count)
    if count == 0 or count > len(table):
        raise BeamSkipped("no_atoms", "BEAM atom table is empty or overstates its size")
    reader = _Reader(table, 4)
    out: list[str] = []
    try:
        for _ in range(count):
            length = reader.compact_length() if compact else reader.byte()
            out.append(reader.take(length).decode(encoding))
    except (_Stop, UnicodeDecodeError) as exc:
        raise BeamSkipped("no_atoms", "BEAM atom table is truncated or not text") from exc
    return out


def _mfa_table(data: bytes | None, atoms: list[str], what: str) -> list[Mfa] | None:
    """ImpT rows (module, function, arity) or ExpT rows (function, arity, label) as
    (module, function, arity); rows naming no atom are dropped."""
    if data is None or len(data) < 4:
        return None
    (count,) = struct.unpack_from(">I", data, 0)
    count = min(count, (len(data) - 4) // 12)
    rows: list[Mfa] = []
    for i in range(count):
        a, b, c = struct.unpack_from(">III", data, 4 + 12 * i)
        if what == "ImpT" and 0 < a <= len(atoms) and 0 < b <= len(atoms) and c < 256:
            rows.append((atoms[a - 1], atoms[b - 1], c))
        elif what == "ExpT" and 0 < a <= len(atoms) and b < 256:
            rows.append((atoms[0], atoms[a - 1], b))
    return rows


@frozen
class _Lines:
    items: tuple[tuple[int, int], ...]  # (file index, line); item 0 is "no position"
    files: tuple[str, ...]  # index 0 is the module's placeholder `Mod.erl`


def _line_table(data: bytes | None) -> _Lines | None:
    """The Line chunk: version 0, flags, instruction count, item count, name count, the
    items (compact `i` lines, `a` switching the file), then the names (u16 size + text)."""
    if data is None or len(data) < 20:
        return None
    version, _flags, _instrs, item_count, name_count = struct.unpack_from(">5I", data, 0)
    if version != 0 or item_count > len(data) or name_count > len(data):
        return None
    reader = _Reader(data, 20)
    items: list[tuple[int, int]] = [(0, 0)]
    file_index = 0
    try:
        while len(items) <= item_count:
            tag, value = reader.operand()
            if tag == TAG_A:
                file_index = value
            elif tag == TAG_I:
                items.append((file_index, value))
            else:
                return None
        names = ["?"]
        for _ in range(name_count):
            size = struct.unpack(">H", reader.take(2))[0]
            names.append(decode_text(reader.take(size)))
    except _Stop:
        return None
    return _Lines(tuple(items), tuple(names))


def _fun_literals(data: bytes | None, atoms: list[str]) -> dict[int, Mfa]:
    """Literal index -> (module, function, arity) for each external fun literal."""
    if data is None or len(data) < 4:
        return {}
    (size,) = struct.unpack_from(">I", data, 0)
    body = data[4:] if size == 0 else _inflate(data[4:], size)
    if body is None or len(body) < 4:
        return {}
    (count,) = struct.unpack_from(">I", body, 0)
    pos, out = 4, {}
    for index in range(min(count, len(body) // 4)):
        if pos + 4 > len(body):
            break
        (length,) = struct.unpack_from(">I", body, pos)
        term = body[pos + 4 : pos + 4 + length]
        pos += 4 + length
        if len(term) > 2 and term[0] == etf.VERSION and term[1] == 113:  # EXPORT_EXT
            mfa = _export_fun(term[2:])
            if mfa is not None:
                out[index] = mfa
    return out


def _inflate(data: bytes, size: int) -> bytes | None:
    if size > MAX_LITERALS_BYTES:
        return None
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, size + 1)
    except zlib.error:
        return None
    return out if len(out) == size else None


def _export_fun(data: bytes) -> Mfa | None:
    """`Module, Function, Arity` of an EXPORT_EXT: two atoms and a small integer (the
    ETF decoder refuses funs, which no Docs chunk holds, so these few bytes are read here)."""
    reader = _Reader(data, 0)
    try:
        module, function = _etf_atom(reader), _etf_atom(reader)
        if reader.byte() != etf.SMALL_INTEGER:
            return None
        return module, function, reader.byte()
    except (_Stop, UnicodeDecodeError):
        return None


def _etf_atom(reader: _Reader) -> str:
    tag = reader.byte()
    if tag in (etf.SMALL_ATOM_UTF8, etf.SMALL_ATOM):
        size = reader.byte()
    elif tag in (etf.ATOM_UTF8, etf.ATOM):
        size = struct.unpack(">H", reader.take(2))[0]
    else:
        raise _Stop("bad_literal")
    return reader.take(size).decode(
        "utf-8" if tag in (etf.SMALL_ATOM_UTF8, etf.ATOM_UTF8) else "latin-1"
    )


def _behaviours(data: bytes | None) -> tuple[tuple[str, ...], bool]:
    """The `behaviour`/`behavior` attributes of the Attr chunk (an ETF keyword list)."""
    if data is None:
        return (), False
    try:
        term = etf.decode(data)
    except IngestError:
        return (), True
    found: list[str] = []
    for pair in term if isinstance(term, list) else []:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            continue
        key, value = pair
        if key in (Atom("behaviour"), Atom("behavior")) and isinstance(value, list):
            found.extend(display(v.name) for v in value if isinstance(v, Atom))
    return tuple(dict.fromkeys(found)), True


# --- the code walk -------------------------------------------------------------------------


class _Stop(Exception):
    """The bytes end or make no sense here: the walk ends (a reason, never a crash)."""


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Stop("truncated")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise _Stop("truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def compact_length(self) -> int:
        tag, value = self.operand()
        if tag != TAG_U:
            raise _Stop("bad_operand")
        return value

    def value(self, first: int) -> int:
        """The number a compact term carries: 4 bits, 11 bits, or 2-8+ following bytes."""
        if first & 0x08 == 0:
            return first >> 4
        if first & 0x10 == 0:
            return ((first & 0xE0) << 3) | self.byte()
        size = (first >> 5) + 2
        if size == 9:  # the size itself follows as a `u` term, minus 9
            size = self.compact_length() + 9
        if size > MAX_ARG_BYTES:
            raise _Stop("bad_operand")
        return int.from_bytes(self.take(size), "big")

    def operand(self) -> tuple[int, int]:
        first = self.byte()
        tag = first & 0x07
        return tag, self.value(first)

    def skip_operand(self, nested: bool = False) -> tuple[int, int]:
        """One operand, whatever it holds; extended ones read their parts. A list holds
        no list and a typed register wraps a plain `x` or `y`, which is all a compiler
        writes, so a hostile chain of extended tags stops instead of recursing."""
        tag, value = self.operand()
        if tag != TAG_Z:
            return tag, value
        if value in (Z_FLOAT_REG, Z_LITERAL):
            return 0x100 | value, self.compact_length()
        if value == Z_TYPED_REG:
            register = self.operand()
            if register[0] not in (TAG_X, TAG_Y):
                raise _Stop("bad_operand")
            self.compact_length()
            return register
        if value in (Z_LIST, Z_ALLOC_LIST) and not nested:
            count = self.compact_length()
            if count > MAX_LIST_ARGS or count > len(self.data) - self.pos:
                raise _Stop("bad_operand")
            for _ in range(count * (2 if value == Z_ALLOC_LIST else 1)):
                self.skip_operand(nested=True)
            return TAG_Z, value
        raise _Stop("bad_operand")


class _Walk:
    """One pass over the Code chunk, recording each call of an import where it is."""

    def __init__(
        self, atoms: list[str], imports: list[Mfa], lines: _Lines | None, funs: dict[int, Mfa]
    ) -> None:
        self.atoms = atoms
        self.imports = imports
        self.lines = lines
        self.funs = funs
        self.sites: list[CallSite] = []
        self.caller: str | None = None
        self.position: tuple[str | None, int | None] = (None, None)

    def run(self, code: bytes | None) -> str | None:
        """None when the code ended where it should, else why the walk stopped."""
        if code is None or len(code) < 8:
            return "no_code"
        (header,) = struct.unpack_from(">I", code, 0)
        reader = _Reader(code, 4 + header)
        count = 0
        try:
            while reader.pos < len(code):
                count += 1
                if count % _CHECK_EVERY == 0:
                    checkpoint()
                opcode = reader.byte()
                if opcode == INT_CODE_END:
                    return None
                arity = OPCODE_ARITY.get(opcode)
                if arity is None:
                    return "unknown_opcode"
                self.step(opcode, [reader.skip_operand() for _ in range(arity)])
        except _Stop as exc:
            return str(exc)
        return "no_code_end"

    def step(self, opcode: int, args: list[tuple[int, int]]) -> None:
        if opcode == FUNC_INFO:
            self.caller = f"{self.atom(args[1][1])}/{args[2][1]}"
        elif opcode == LINE:
            self.position = self.where(args[0][1])
        elif opcode in IMPORT_OPERAND:
            tag, index = args[IMPORT_OPERAND[opcode]]
            if tag == TAG_U and 0 <= index < len(self.imports):
                self.add(self.imports[index], fun_ref=False)
        elif opcode == MOVE and args[0][0] == LITERAL and args[0][1] in self.funs:
            self.add(self.funs[args[0][1]], fun_ref=True)

    def add(self, mfa: Mfa, *, fun_ref: bool) -> None:
        module, function, arity = mfa
        file, line = self.position
        self.sites.append(
            CallSite(display(module), function, arity, self.caller, file, line, fun_ref)
        )

    def atom(self, index: int) -> str:
        return self.atoms[index - 1] if 0 < index <= len(self.atoms) else "?"

    def where(self, index: int) -> tuple[str | None, int | None]:
        if self.lines is None or not 0 < index < len(self.lines.items):
            return None, None
        file_index, line = self.lines.items[index]
        files = self.lines.files
        name = files[file_index] if 0 < file_index < len(files) else None
        return name, line
