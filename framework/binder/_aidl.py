"""The AIDL compiler's front end: ``.aidl`` text in, resolved and checked definitions out.

npuemu declares every binder interface and parcelable once, in AIDL, exactly as an
Android tree would (``android/hardware/npu/IScheduling.aidl``, ...). As Android's
``aidl`` tool, the compiler runs ahead of time: this module parses and resolves the
files (``parse_aidl``, ``resolve``), ``aidlc`` writes the Python module of each
package, and ``aidl_support`` is what those modules call when imported::

    npuemu aidl                      # make aidl: npuemu's own trees
    from interfaces.android.hardware.npu import IScheduling, WorkInfo

The subset understood is what the project needs, with AIDL's own rules:

* ``package``, ``import``; one top-level type per file, named like the file, in the
  directory its package names (``android/hardware/npu/WorkInfo.aidl``).
* ``parcelable`` with typed fields, defaults (``int x = 1 << 2;``, ``E e = E.B;``,
  ``int[] a = {1, 2};``) and ``const`` declarations.
* ``interface`` and ``oneway interface``; methods with ``in`` / ``out`` / ``inout``
  arguments and ``oneway`` methods (which must return void and take only ``in``
  arguments); ``const int`` and ``const String``. Transaction codes follow
  declaration order from ``FIRST_CALL_TRANSACTION`` = 1, as the AIDL compiler does.
* ``enum`` backed by ``byte`` (AIDL's default), ``int`` or ``long`` through
  ``@Backing(type="...")``; values implicit (previous + 1, from 0) or constant
  expressions that may name earlier enumerators.
* Types: the primitives, ``String``, ``T[]``, fixed ``T[n]``, ``List<T>``, ``IBinder``,
  interfaces, parcelables, enums, ``ParcelFileDescriptor``, ``SharedMemory``;
  ``@nullable`` where AIDL allows it. Any other annotation, with or without
  parameters, is kept as metadata (``Annotation``).
* ``//``, ``/* */`` and ``/** javadoc */`` comments; a javadoc right before a
  declaration becomes the generated class's docstring.

Parsing is a lark LALR grammar; a syntax error is an ``AidlSyntaxError`` whose text is
``file:line:column: message``. Everything after parsing (an unknown type, an import
of a definition that no file provides, a name defined twice, a oneway method with a
result) is an ``AidlResolutionError`` in the same form, pointing at the offending
line. The definitions (``ParcelableDef``, ``MethodDef``...) are what ``aidlc`` compiles
and what a generated module lists at its bottom.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import lark
from lark import Token, Tree

from . import _parcel
from ._status import FIRST_CALL_TRANSACTION

__all__ = [
    "AidlError",
    "AidlResolutionError",
    "AidlSyntaxError",
    "Annotation",
    "ArgDef",
    "EnumDef",
    "FieldDef",
    "InterfaceDef",
    "MethodDef",
    "ParcelableDef",
    "TypeRef",
    "parse_aidl",
    "resolve",
]


# --------------------------------------------------------------------------- errors


class AidlError(Exception):
    """A problem in an ``.aidl`` file; ``str()`` is ``file:line:column: message``."""

    def __init__(self, message: str, filename: str | None = None, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = [str(self.filename) if self.filename else "<aidl>"]
        if self.line is not None:
            where.append(str(self.line))
            if self.column is not None:
                where.append(str(self.column))
        return f"{':'.join(where)}: {self.message}"

    def __reduce__(self):
        return (type(self), (self.message, self.filename, self.line, self.column))


class AidlSyntaxError(AidlError):
    """The text is not AIDL (as far as npuemu's subset goes)."""


class AidlResolutionError(AidlError):
    """The text parses but does not make sense: unknown types, duplicates, bad values."""


# --------------------------------------------------------------------------- public definitions


@dataclass(frozen=True)
class Annotation:
    """``@Name`` or ``@Name(key=value, ...)``; a lone positional parameter is ``value``."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        return default

    def __str__(self) -> str:
        if not self.params:
            return f"@{self.name}"
        inner = ", ".join(f"{k}={v!r}" if not isinstance(v, str) else f'{k}="{v}"' for k, v in self.params)
        return f"@{self.name}({inner})"


def _find_annotation(annotations: tuple[Annotation, ...], name: str) -> Annotation | None:
    for a in annotations:
        if a.name == name:
            return a
    return None


@dataclass(frozen=True)
class TypeRef:
    """One use of a type, resolved: user types carry their qualified name."""

    name: str
    args: tuple[TypeRef, ...] = ()
    array: int | None = None  # None: not an array; -1: T[]; n >= 0: fixed T[n]
    nullable: bool = False
    annotations: tuple[Annotation, ...] = ()

    def __str__(self) -> str:
        s = self.name
        if self.args:
            s += "<" + ", ".join(str(a) for a in self.args) + ">"
        if self.array is not None:
            s += "[]" if self.array < 0 else f"[{self.array}]"
        return ("@nullable " if self.nullable else "") + s

    def annotation(self, name: str) -> Annotation | None:
        return _find_annotation(self.annotations, name)


@dataclass(frozen=True)
class ArgDef:
    name: str
    type: TypeRef
    direction: str  # "in" | "out" | "inout"


@dataclass(frozen=True, eq=False)
class MethodDef:
    """One method of an interface, with its transaction code and, in a generated module,
    the four functions the compiler wrote for it (None in the front end's output):

    ``encode_call(args, ctx)`` takes the tuple of in and inout arguments in declaration
    order; ``decode_call(data, ctx)`` returns that tuple; ``encode_reply(result, outs,
    ctx)`` writes the result then the out/inout values; ``decode_reply(data, ctx)``
    returns the result, or ``(result, *outs)`` when there are outs. Encoding raises
    TypeError / ValueError naming the argument; decoding raises only
    ``BadParcelableException``.
    """

    name: str
    code: int
    oneway: bool
    args: tuple[ArgDef, ...]
    return_type: TypeRef
    annotations: tuple[Annotation, ...] = ()
    doc: str | None = field(default=None, repr=False)
    encode_call: Callable[[tuple, Any], list] = field(default=None, repr=False)  # type: ignore[assignment]
    decode_call: Callable[[Any, Any], tuple] = field(default=None, repr=False)  # type: ignore[assignment]
    encode_reply: Callable[[Any, tuple, Any], list] = field(default=None, repr=False)  # type: ignore[assignment]
    decode_reply: Callable[[Any, Any], Any] = field(default=None, repr=False)  # type: ignore[assignment]

    @property
    def in_args(self) -> tuple[ArgDef, ...]:
        return tuple(a for a in self.args if a.direction != "out")

    @property
    def out_args(self) -> tuple[ArgDef, ...]:
        return tuple(a for a in self.args if a.direction != "in")

    def annotation(self, name: str) -> Annotation | None:
        return _find_annotation(self.annotations, name)


@dataclass(frozen=True, eq=False)
class InterfaceDef:
    """An AIDL interface; ``name`` (qualified) is also its binder DESCRIPTOR."""

    name: str
    oneway: bool
    methods: tuple[MethodDef, ...]
    constants: Mapping[str, int | str]
    annotations: tuple[Annotation, ...] = ()
    filename: str | None = field(default=None, repr=False)
    line: int | None = field(default=None, repr=False)
    doc: str | None = field(default=None, repr=False)
    _by_code: Mapping[int, MethodDef] = field(default_factory=dict, repr=False)
    _by_name: Mapping[str, MethodDef] = field(default_factory=dict, repr=False)
    cls: type = field(default=None, repr=False)  # type: ignore[assignment]  # the generated class

    @property
    def descriptor(self) -> str:
        return self.name

    @property
    def simple_name(self) -> str:
        return self.name.rpartition(".")[2]

    def method_by_code(self, code: int) -> MethodDef | None:
        return self._by_code.get(code)

    def method(self, name: str) -> MethodDef:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.name} has no method {name!r}") from None

    def annotation(self, name: str) -> Annotation | None:
        return _find_annotation(self.annotations, name)


@dataclass(frozen=True, eq=False)
class FieldDef:
    name: str
    type: TypeRef
    # The declared default (or the type's zero) when it is one shared immutable value or
    # a declared list; None where each instance builds its own (a nested parcelable).
    default: Any
    annotations: tuple[Annotation, ...] = ()
    line: int | None = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class ParcelableDef:
    """An AIDL parcelable; ``cls`` is the generated frozen class."""

    name: str
    fields: tuple[FieldDef, ...]
    constants: Mapping[str, int | str]
    annotations: tuple[Annotation, ...] = ()
    filename: str | None = field(default=None, repr=False)
    line: int | None = field(default=None, repr=False)
    doc: str | None = field(default=None, repr=False)
    cls: type = field(default=None, repr=False)  # type: ignore[assignment]

    def annotation(self, name: str) -> Annotation | None:
        return _find_annotation(self.annotations, name)


@dataclass(frozen=True, eq=False)
class EnumDef:
    """An AIDL enum; ``cls`` is the generated IntEnum."""

    name: str
    backing: str  # "byte" | "int" | "long"
    enumerators: tuple[tuple[str, int], ...]
    annotations: tuple[Annotation, ...] = ()
    filename: str | None = field(default=None, repr=False)
    line: int | None = field(default=None, repr=False)
    doc: str | None = field(default=None, repr=False)
    cls: type = field(default=None, repr=False)  # type: ignore[assignment]

    def annotation(self, name: str) -> Annotation | None:
        return _find_annotation(self.annotations, name)


Definition = ParcelableDef | EnumDef | InterfaceDef

# --------------------------------------------------------------------------- grammar

_GRAMMAR = r"""
start: package_decl? import_decl* declaration*

package_decl: "package" qname ";"
import_decl: "import" qname ";"
qname: NAME ("." NAME)*

declaration: annotation* (parcelable | interface | enum)

parcelable: "parcelable" NAME "{" parcelable_member* "}"
?parcelable_member: field | const_decl
field: annotation* type NAME ("=" expr)? ";"

interface: ONEWAY? "interface" NAME "{" interface_member* "}"
?interface_member: method | const_decl
method: annotation* ONEWAY? type NAME "(" [arg ("," arg)*] ")" ";"
arg: annotations type NAME -> arg_plain
   | annotations DIRECTION annotations type NAME -> arg_directed
annotations: annotation*

const_decl: annotation* "const" type NAME "=" expr ";"

enum: "enum" NAME "{" [enumerator ("," enumerator)* ","?] "}"
enumerator: annotation* NAME ("=" expr)?

type: qname type_args? array?
type_args: "<" type_arg ("," type_arg)* ">"
type_arg: annotation* type
array: "[" INT? "]"

annotation: "@" qname annotation_params?
annotation_params: "(" [annotation_param ("," annotation_param)*] ")"
annotation_param: NAME "=" expr -> named_param
                | expr -> positional_param

?expr: bor
?bor: bxor | bor "|" bxor -> or_
?bxor: band | bxor "^" band -> xor
?band: shift | band "&" shift -> and_
?shift: sum | shift "<" "<" sum -> lshift | shift ">" ">" sum -> rshift
?sum: product | sum "+" product -> add | sum "-" product -> sub
?product: unary | product "*" unary -> mul | product "/" unary -> div | product "%" unary -> mod
?unary: "-" unary -> neg | "+" unary -> pos | "~" unary -> invert | "!" unary -> not_ | atom
?atom: INT -> int_lit
     | FLOAT -> float_lit
     | STRING -> string_lit
     | CHAR -> char_lit
     | "true" -> true
     | "false" -> false
     | qname -> ref
     | "(" expr ")"
     | "{" [expr ("," expr)* ","?] "}" -> array_lit

ONEWAY.2: /\boneway\b/
DIRECTION.2: /\b(inout|in|out)\b/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
FLOAT.2: /(\d+\.\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?|\d+[eE][+-]?\d+[fFdD]?|\d+[fFdD]/
INT: /0[xX][0-9a-fA-F]+[lL]?|\d+[lL]?/
STRING: /"([^"\\\n]|\\.)*"/
CHAR: /'([^'\\\n]|\\.)'/

COMMENT: /\/\/[^\n]*/ | /\/\*(.|\n)*?\*\//
%import common.WS
%ignore WS
%ignore COMMENT
"""

# What the expected-token list of a syntax error calls each named terminal.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a float",
    "STRING": "a string",
    "CHAR": "a char literal",
    "DIRECTION": "in/out/inout",
    "ONEWAY": "oneway",
    "$END": "end of file",
}


@functools.cache
def _parser() -> lark.Lark:
    """The LALR parser, built once per process (a lark parser is reentrant).

    Computing the LALR tables takes ~0.4 s on a small machine, paid by every process
    that loads AIDL at boot, so the built parser is kept beside this module's bytecode
    in ``__pycache__``, named by a hash of the grammar and the lark and Python
    versions: the same trust and staleness rules as the ``.pyc`` files next to it, and
    not written under PYTHONDONTWRITEBYTECODE either. A cache that cannot be read or
    written is simply rebuilt.
    """
    key = hashlib.sha256(f"{_GRAMMAR}|{lark.__version__}|{sys.version_info[:2]}".encode()).hexdigest()[:16]
    cache = Path(__file__).with_name("__pycache__") / f"_aidl_grammar.{key}.lark"
    try:
        with open(cache, "rb") as f:
            return lark.Lark.load(f)
    except Exception:  # missing, half-written by a racing process, or unreadable
        pass
    parser = lark.Lark(_GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True)
    if sys.dont_write_bytecode:  # PYTHONDONTWRITEBYTECODE: no .pyc, so no cache either
        return parser
    try:
        cache.parent.mkdir(exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            parser.save(f)
        os.replace(tmp, cache)  # atomic: a concurrent reader sees all of it or nothing
    except OSError:
        pass
    return parser


# --------------------------------------------------------------------------- raw syntax tree

_Pos = tuple[int, int]


@dataclass
class _RawType:
    name: str
    args: list[_RawType]
    array: int | None
    annotations: tuple[Annotation, ...]
    pos: _Pos


@dataclass
class _RawMember:
    kind: str  # "field" | "const" | "method" | "enumerator"
    name: str
    pos: _Pos
    annotations: tuple[Annotation, ...] = ()
    type: _RawType | None = None
    expr: Any = None
    oneway: bool = False
    args: list[tuple[str, str, _RawType, _Pos]] = field(default_factory=list)
    doc: str | None = None


@dataclass
class _RawDecl:
    kind: str  # "parcelable" | "interface" | "enum"
    name: str
    pos: _Pos
    annotations: tuple[Annotation, ...]
    members: list[_RawMember]
    oneway: bool = False
    doc: str | None = None
    file: _RawFile | None = None

    @property
    def qualified(self) -> str:
        assert self.file is not None
        return f"{self.file.package}.{self.name}" if self.file.package else self.name


@dataclass
class _RawFile:
    filename: str
    package: str
    package_pos: _Pos | None
    imports: list[tuple[str, _Pos]]
    decls: list[_RawDecl]
    root: Path | None
    path: Path


# Expressions are tuples: ("lit", value, pos) | ("char", str, pos) | ("ref", qname, pos)
# | ("bin", op, a, b, pos) | ("un", op, a, pos) | ("arr", [items], pos)


def _unescape(body: str, filename: str, pos: _Pos) -> str:
    if "\\" not in body:
        return body
    out = []
    i = 0
    simple = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt == "u" and len(body) >= i + 6:
            try:
                out.append(chr(int(body[i + 2 : i + 6], 16)))
            except ValueError:
                raise AidlSyntaxError(f"bad unicode escape {body[i:i + 6]!r}", filename, *pos) from None
            i += 6
        else:
            raise AidlSyntaxError(f"unknown escape \\{nxt}", filename, *pos)
    return "".join(out)


def _pos_of(meta_or_token: Any) -> _Pos:
    return (meta_or_token.line, meta_or_token.column)


class _Builder:
    """Turns lark's tree for one file into _Raw* objects (positions kept for errors)."""

    def __init__(self, filename: str, text: str, docs: list[Token]):
        self.filename = filename
        self.text = text
        self.docs = docs  # DOC_COMMENT tokens, in order

    def doc_before(self, start_pos: int) -> str | None:
        """The javadoc that ends right before ``start_pos`` (only whitespace between)."""
        best = None
        for tok in self.docs:
            if tok.end_pos <= start_pos:
                best = tok
            else:
                break
        if best is None or self.text[best.end_pos : start_pos].strip():
            return None
        lines = best.value[3:-2].splitlines()
        cleaned = [ln.strip().removeprefix("*").strip() for ln in lines]
        doc = "\n".join(cleaned).strip()
        return doc or None

    # ---- small pieces

    def qname(self, t: Tree) -> str:
        return ".".join(str(tok) for tok in t.children)

    def annotation(self, t: Tree) -> Annotation:
        name = self.qname(t.children[0])
        params: list[tuple[str, Any]] = []
        if len(t.children) > 1 and t.children[1] is not None:
            for p in t.children[1].children:
                if p is None:
                    continue
                if p.data == "named_param":
                    key, value = str(p.children[0]), p.children[1]
                else:
                    key, value = "value", p.children[0]
                val = _eval_static(self.expr(value), self.filename)
                params.append((key, tuple(val) if isinstance(val, list) else val))
        return Annotation(name, tuple(params))

    def annotations(self, items: list) -> tuple[Annotation, ...]:
        return tuple(self.annotation(a) for a in items if isinstance(a, Tree) and a.data == "annotation")

    def type(self, t: Tree, extra: tuple[Annotation, ...] = ()) -> _RawType:
        name = self.qname(t.children[0])
        args: list[_RawType] = []
        array: int | None = None
        for c in t.children[1:]:
            if c is None:
                continue
            if c.data == "type_args":
                for ta in c.children:
                    *anns, inner = ta.children
                    args.append(self.type(inner, self.annotations(anns)))
            elif c.data == "array":
                size = c.children[0] if c.children else None
                if size is None:
                    array = -1
                else:
                    digits = str(size).rstrip("lL")
                    array = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
                    if array <= 0:
                        raise AidlResolutionError(
                            f"a fixed-size array needs a positive size, got {array}", self.filename, *_pos_of(size)
                        )
        return _RawType(name, args, array, extra, _pos_of(t.meta))

    def expr(self, t: Any) -> Any:
        if isinstance(t, Token):  # not reached with this grammar, but keep it total
            return ("lit", str(t), _pos_of(t))
        pos = _pos_of(t.meta)
        d = t.data
        if d == "int_lit":
            text = str(t.children[0])
            s = text.rstrip("lL")
            if s[:2].lower() != "0x":
                return ("lit", int(s), pos)
            # As the AIDL compiler does, a hex literal is a bit pattern: one that fits in
            # 32 bits is an int (0xFFFFFFFF is -1), one with an L suffix a long.
            v = int(s, 16)
            if text[-1] in "lL":
                if v < (1 << 64) and v >= (1 << 63):
                    v -= 1 << 64
            elif (1 << 31) <= v < (1 << 32):
                v -= 1 << 32
            return ("lit", v, pos)
        if d == "float_lit":
            return ("lit", float(str(t.children[0]).rstrip("fFdD")), pos)
        if d == "string_lit":
            return ("lit", _unescape(str(t.children[0])[1:-1], self.filename, pos), pos)
        if d == "char_lit":
            return ("char", _unescape(str(t.children[0])[1:-1], self.filename, pos), pos)
        if d == "true":
            return ("lit", True, pos)
        if d == "false":
            return ("lit", False, pos)
        if d == "ref":
            return ("ref", self.qname(t.children[0]), pos)
        if d == "array_lit":
            return ("arr", [self.expr(c) for c in t.children if c is not None], pos)
        if d in ("neg", "pos", "invert", "not_"):
            return ("un", d, self.expr(t.children[0]), pos)
        return ("bin", d, self.expr(t.children[0]), self.expr(t.children[1]), pos)

    # ---- declarations

    def file(self, tree: Tree, root: Path | None, path: Path) -> _RawFile:
        package, package_pos, imports, decls = "", None, [], []
        for c in tree.children:
            if c is None:
                continue
            if c.data == "package_decl":
                package, package_pos = self.qname(c.children[0]), _pos_of(c.meta)
            elif c.data == "import_decl":
                imports.append((self.qname(c.children[0]), _pos_of(c.meta)))
            else:
                decls.append(self.declaration(c))
        f = _RawFile(self.filename, package, package_pos, imports, decls, root, path)
        for d in decls:
            d.file = f
        return f

    def declaration(self, t: Tree) -> _RawDecl:
        *anns, body = t.children
        annotations = self.annotations(anns)
        doc = self.doc_before(t.meta.start_pos)
        kids = body.children
        if body.data == "parcelable":
            name = kids[0]
            members = [self.member(m) for m in kids[1:]]
            return _RawDecl("parcelable", str(name), _pos_of(name), annotations, members, doc=doc)
        if body.data == "interface":
            oneway = isinstance(kids[0], Token) and kids[0].type == "ONEWAY"
            if oneway:
                kids = kids[1:]
            elif kids[0] is None:
                kids = kids[1:]
            name = kids[0]
            members = [self.member(m) for m in kids[1:]]
            return _RawDecl("interface", str(name), _pos_of(name), annotations, members, oneway, doc=doc)
        name = kids[0]
        members = [self.member(m) for m in kids[1:] if m is not None]
        return _RawDecl("enum", str(name), _pos_of(name), annotations, members, doc=doc)

    def member(self, t: Tree) -> _RawMember:
        doc = self.doc_before(t.meta.start_pos)
        kids = [k for k in t.children]
        anns = []
        while kids and isinstance(kids[0], Tree) and kids[0].data == "annotation":
            anns.append(kids.pop(0))
        annotations = self.annotations(anns)
        if t.data == "enumerator":
            name = kids[0]
            expr = self.expr(kids[1]) if len(kids) > 1 and kids[1] is not None else None
            return _RawMember("enumerator", str(name), _pos_of(name), annotations, expr=expr, doc=doc)
        if t.data == "field":
            typ, name = kids[0], kids[1]
            expr = self.expr(kids[2]) if len(kids) > 2 and kids[2] is not None else None
            return _RawMember("field", str(name), _pos_of(name), annotations, self.type(typ, annotations), expr, doc=doc)
        if t.data == "const_decl":
            typ, name, value = kids
            return _RawMember("const", str(name), _pos_of(name), annotations, self.type(typ, annotations), self.expr(value), doc=doc)
        # method
        oneway = False
        if kids and kids[0] is None:
            kids.pop(0)
        if kids and isinstance(kids[0], Token) and kids[0].type == "ONEWAY":
            oneway = True
            kids.pop(0)
        typ, name, *argtrees = kids
        type_anns = tuple(a for a in annotations if a.name in _TYPE_ANNOTATIONS)
        method_anns = tuple(a for a in annotations if a.name not in _TYPE_ANNOTATIONS)
        args = []
        for a in argtrees:
            if a is None:
                continue
            if a.data == "arg_plain":
                a_anns, a_type, a_name = a.children
                direction, all_anns = "in", self.annotations(a_anns.children)
                explicit = False
            else:
                a_anns, direction_tok, more_anns, a_type, a_name = a.children
                direction = str(direction_tok)
                all_anns = self.annotations(a_anns.children) + self.annotations(more_anns.children)
                explicit = True
            args.append((str(a_name), direction if explicit else "in", self.type(a_type, all_anns), _pos_of(a_name)))
        return _RawMember(
            "method", str(name), _pos_of(name), method_anns, self.type(typ, type_anns), oneway=oneway, args=args, doc=doc
        )


_TYPE_ANNOTATIONS = frozenset({"nullable", "utf8InCpp"})


def _syntax_error(e: lark.exceptions.UnexpectedInput, filename: str, text: str) -> AidlSyntaxError:
    line, column = getattr(e, "line", -1), getattr(e, "column", -1)
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        rest = text[e.pos_in_stream :] if 0 <= e.pos_in_stream < len(text) else ""
        if rest.startswith("/*"):
            msg = "unterminated /* comment"
        elif rest[:1] in ("\"", "'"):
            msg = f"unterminated {'string' if rest[0] == chr(34) else 'char'} literal"
        else:
            msg = f"unexpected character {rest[:1] or '?'!r}"
    elif isinstance(e, lark.exceptions.UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            msg = "unexpected end of file"
            line = None  # lark puts $END on the last token; point past it instead
        elif text.startswith("/*", tok.start_pos or 0):
            return AidlSyntaxError("unterminated /* comment", filename, line, column)
        else:
            msg = f"unexpected {str(tok)!r}"
        words = []
        terms = {t.name: t for t in _parser().terminals}
        for name in sorted(e.expected):
            if name in _TERMINAL_WORDS:
                words.append(_TERMINAL_WORDS[name])
            elif name in terms and terms[name].pattern.type == "str":
                words.append(repr(terms[name].pattern.value))
            else:
                words.append(name.lower())
        if words:
            msg += ", expected " + (words[0] if len(words) == 1 else "one of " + ", ".join(sorted(set(words))))
    else:
        msg = "unexpected end of file"
    if line is None or line < 1:
        line = text.count("\n") + 1
        column = len(text) - (text.rfind("\n") + 1) + 1
    return AidlSyntaxError(msg, filename, line, column)


def parse_aidl(text: str, filename: str = "<aidl>", *, root: Path | None = None, path: Path | None = None) -> _RawFile:
    """Parse one file's text (no resolution); raises AidlSyntaxError."""
    try:
        tree = _parser().parse(text)
    except lark.exceptions.UnexpectedInput as e:
        raise _syntax_error(e, filename, text) from None
    # Comments are dropped by the grammar; doc comments are found by a separate scan.
    return _Builder(filename, text, _doc_comments(text)).file(tree, root, path or Path(filename))


def _doc_comments(text: str) -> list[Token]:
    """The ``/** ... */`` comments of ``text`` with their offsets (strings and // skipped)."""
    out: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j < 0 else j + 2
            if text.startswith("/**", i) and end - i >= 5:
                tok = Token("DOC_COMMENT", text[i:end])
                tok.start_pos, tok.end_pos = i, end
                out.append(tok)
            i = end
        else:
            i += 1
    return out


# --------------------------------------------------------------------------- constant expressions


class _EnumVal(int):
    """An enumerator's value as it appears in an expression: an int that remembers its enum."""

    enum_name: str
    member: str

    def __new__(cls, value: int, enum_name: str, member: str) -> _EnumVal:
        self = super().__new__(cls, value)
        self.enum_name = enum_name
        self.member = member
        return self


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _evaluate(e: Any, lookup: Callable[[str, _Pos], Any], filename: str) -> Any:
    kind = e[0]
    if kind == "lit":
        return e[1]
    if kind == "char":
        if len(e[1]) != 1:
            raise AidlResolutionError("a char literal holds one character", filename, *e[2])
        return ("char", e[1])
    if kind == "ref":
        return lookup(e[1], e[2])
    if kind == "arr":
        return [_evaluate(x, lookup, filename) for x in e[1]]
    if kind == "un":
        op, v, pos = e[1], _evaluate(e[2], lookup, filename), e[3]
        if op == "not_":
            if isinstance(v, bool):
                return not v
            raise AidlResolutionError("'!' needs a boolean", filename, *pos)
        if op == "invert":
            if _is_int(v):
                return ~int(v)
            raise AidlResolutionError("'~' needs an integer", filename, *pos)
        if _is_int(v) or isinstance(v, float):
            return -v if op == "neg" else +v
        raise AidlResolutionError(f"unary '{'-' if op == 'neg' else '+'}' needs a number", filename, *pos)
    op, pos = e[1], e[4]
    a, b = _evaluate(e[2], lookup, filename), _evaluate(e[3], lookup, filename)
    if op == "add" and isinstance(a, str) and isinstance(b, str):
        return a + b
    numeric = (_is_int(a) or isinstance(a, float)) and (_is_int(b) or isinstance(b, float))
    symbol = {"or_": "|", "xor": "^", "and_": "&", "lshift": "<<", "rshift": ">>", "add": "+", "sub": "-",
              "mul": "*", "div": "/", "mod": "%"}[op]
    if op in ("or_", "xor", "and_", "lshift", "rshift"):
        if not (_is_int(a) and _is_int(b)):
            raise AidlResolutionError(f"'{symbol}' needs integers", filename, *pos)
        a, b = int(a), int(b)
        if op in ("lshift", "rshift") and not 0 <= b < 64:
            raise AidlResolutionError(f"shift count {b} is out of range 0..63", filename, *pos)
        return {"or_": a | b, "xor": a ^ b, "and_": a & b}.get(op) if op in ("or_", "xor", "and_") else (
            a << b if op == "lshift" else a >> b
        )
    if not numeric:
        raise AidlResolutionError(f"'{symbol}' needs numbers", filename, *pos)
    if op in ("div", "mod") and b == 0:
        raise AidlResolutionError("division by zero", filename, *pos)
    if _is_int(a) and _is_int(b):
        a, b = int(a), int(b)
        if op == "div":  # Java truncates toward zero
            q = abs(a) // abs(b)
            return q if (a >= 0) == (b >= 0) else -q
        if op == "mod":
            r = abs(a) % abs(b)
            return r if a >= 0 else -r
    return {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b if op == "div" else 0,
            "mod": (a % b) if op == "mod" else 0}[op]


def _eval_static(e: Any, filename: str) -> Any:
    """An annotation parameter: literals and arithmetic only."""

    def lookup(name: str, pos: _Pos) -> Any:
        raise AidlResolutionError(f"annotation parameters cannot name {name!r}", filename, *pos)

    v = _evaluate(e, lookup, filename)
    return v[1] if isinstance(v, tuple) and v and v[0] == "char" else v


# --------------------------------------------------------------------------- loading

_PRIMITIVES = ("boolean", "byte", "char", "int", "long", "float", "double")
_ZEROS: dict[str, Any] = {
    "boolean": False, "byte": 0, "char": "\0", "int": 0, "long": 0, "float": 0.0, "double": 0.0, "String": "",
}
_BUILTINS = frozenset(_PRIMITIVES + ("String", "void", "IBinder", "ParcelFileDescriptor", "SharedMemory", "List"))
_UNSUPPORTED = {
    "Map": "Map is not supported by npuemu's AIDL; use a parcelable or two lists",
    "CharSequence": "CharSequence is Java-only; use String",
    "FileDescriptor": "use ParcelFileDescriptor",
    "ParcelableHolder": "ParcelableHolder is not supported by npuemu's AIDL",
}
_CONST_TYPES = frozenset(_PRIMITIVES + ("String",))
_INT_BITS = {"byte": 8, "int": 32, "long": 64}


class _Loader:
    def __init__(self, files: list[_RawFile]):
        self.files = files
        self.decls: dict[str, _RawDecl] = {}
        self.defs: dict[str, Definition] = {}
        self.const_values: dict[tuple[str, str], Any] = {}
        self.evaluating: set[tuple[str, str]] = set()

    def err(self, msg: str, f: _RawFile | None, pos: _Pos | None) -> AidlResolutionError:
        return AidlResolutionError(msg, f.filename if f else None, *(pos or (None, None)))

    # ---- phase 1: index

    def index(self) -> None:
        for f in self.files:
            if len(f.decls) == 0:
                raise self.err("the file declares no parcelable, interface or enum", f, (1, 1))
            if len(f.decls) > 1:
                d = f.decls[1]
                raise self.err(
                    f"only one type per file: {d.name} must go in its own {d.name}.aidl", f, d.pos
                )
            d = f.decls[0]
            if f.root is not None:
                if d.name != f.path.stem:
                    raise self.err(f"{d.kind} {d.name} must be in a file named {d.name}.aidl", f, d.pos)
                rel = f.path.parent.relative_to(f.root)
                expected = ".".join(rel.parts)
                if f.package != expected:
                    where = "/".join(rel.parts) or "the root"
                    raise self.err(
                        f"package {f.package or '(none)'} does not match the file's directory "
                        f"{where} under {f.root} (expected package {expected or '(none)'})",
                        f,
                        f.package_pos or (1, 1),
                    )
            q = d.qualified
            if d.name in _BUILTINS:
                raise self.err(f"{d.name} is a builtin type and cannot be redefined", f, d.pos)
            if q in self.decls:
                other = self.decls[q]
                assert other.file is not None
                raise self.err(
                    f"{q} is defined twice (first at {other.file.filename}:{other.pos[0]})", f, d.pos
                )
            self.decls[q] = d

    def check_imports(self) -> None:
        for f in self.files:
            seen: dict[str, str] = {}
            for name, pos in f.imports:
                if name not in self.decls:
                    expected = name.replace(".", "/") + ".aidl"
                    raise self.err(f"import {name}: no file defines it (looked for {expected} under the roots)", f, pos)
                simple = name.rpartition(".")[2]
                if simple in seen and seen[simple] != name:
                    raise self.err(f"import {name} clashes with import {seen[simple]}", f, pos)
                seen[simple] = name

    def resolve_name(self, f: _RawFile, name: str, pos: _Pos) -> str:
        """The qualified name of a user type as written in file ``f``."""
        if "." in name:
            if name in self.decls:
                return name
            first = name.partition(".")[0]
            for imp, _ in f.imports:
                if imp.rpartition(".")[2] == first:
                    raise self.err(f"nested types are not supported: {name}", f, pos)
            raise self.err(f"unknown type {name}", f, pos)
        for imp, _ in f.imports:
            if imp.rpartition(".")[2] == name:
                return imp
        q = f"{f.package}.{name}" if f.package else name
        if q in self.decls:
            return q
        hint = ""
        candidates = sorted(k for k in self.decls if k.rpartition(".")[2] == name)
        if candidates:
            hint = f" (did you mean to import {candidates[0]}?)"
        raise self.err(f"unknown type {name}{hint}", f, pos)

    # ---- types

    def typeref(self, f: _RawFile, t: _RawType, *, allow_void: bool = False, context: str = "") -> TypeRef:
        anns = t.annotations
        nullable = any(a.name == "nullable" for a in anns)
        if t.name in _UNSUPPORTED:
            raise self.err(_UNSUPPORTED[t.name], f, t.pos)
        if t.name in _BUILTINS:
            name = t.name
        else:
            name = self.resolve_name(f, t.name, t.pos)
        if name == "List":
            if len(t.args) != 1:
                raise self.err("List takes exactly one type argument: List<T>", f, t.pos)
            if t.array is not None:
                raise self.err("arrays of List are not supported", f, t.pos)
            args = (self.typeref(f, t.args[0]),)
            if args[0].name == "void":
                raise self.err("List<void> is not a type", f, t.pos)
        else:
            if t.args:
                raise self.err(f"{t.name} takes no type arguments", f, t.pos)
            args = ()
        if name == "void":
            if not allow_void:
                raise self.err("void is only a return type", f, t.pos)
            if t.array is not None or nullable:
                raise self.err("void cannot be an array or @nullable", f, t.pos)
        if nullable and name in _PRIMITIVES and t.array is None:
            raise self.err(f"a primitive {name} cannot be @nullable", f, t.pos)
        if nullable and self.kind_of(name) == "enum" and t.array is None:
            raise self.err(f"an enum ({name}) cannot be @nullable", f, t.pos)
        return TypeRef(name, args, t.array, nullable, anns)

    def kind_of(self, name: str) -> str:
        if name in _BUILTINS:
            return "builtin"
        return self.decls[name].kind

    def zero(self, tr: TypeRef) -> Any:
        """The default of a field of type ``tr`` that declares none, when it is one shared
        immutable value; None where each instance makes its own (a list, a parcelable)."""
        if tr.nullable or tr.array is not None and tr.name != "byte" or tr.name == "List":
            return None
        if tr.array is not None:
            return bytes(max(tr.array, 0))
        if tr.name in _ZEROS:
            return _ZEROS[tr.name]
        d = self.defs.get(tr.name)
        if isinstance(d, EnumDef):
            return next(iter(d.cls))  # an enum's zero is its first enumerator
        return None  # a parcelable (made per instance), a binder or descriptor (None)

    # ---- constants

    def scope_lookup(self, d: _RawDecl) -> Callable[[str, _Pos], Any]:
        f = d.file
        assert f is not None

        def lookup(name: str, pos: _Pos) -> Any:
            if "." not in name:
                if any(m.name == name and m.kind in ("const", "enumerator") for m in d.members):
                    return self.member_value(d, name, pos)
                raise self.err(f"unknown constant {name} in {d.name}", f, pos)
            type_part, _, member = name.rpartition(".")
            try:
                q = self.resolve_name(f, type_part, pos)
            except AidlResolutionError:
                raise self.err(f"unknown constant {name}", f, pos) from None
            target = self.decls[q]
            if not any(m.name == member and m.kind in ("const", "enumerator") for m in target.members):
                raise self.err(f"{q} has no constant or enumerator {member}", f, pos)
            return self.member_value(target, member, pos)

        return lookup

    def member_value(self, d: _RawDecl, name: str, pos: _Pos) -> Any:
        key = (d.qualified, name)
        if key in self.const_values:
            return self.const_values[key]
        if key in self.evaluating:
            raise self.err(f"the value of {d.name}.{name} depends on itself", d.file, pos)
        self.evaluating.add(key)
        try:
            if d.kind == "enum":
                value = self.enum_values(d)[name]
            else:
                m = next(m for m in d.members if m.name == name and m.kind == "const")
                assert m.type is not None
                tr = self.typeref(d.file, m.type)  # type: ignore[arg-type]
                if tr.name not in _CONST_TYPES or tr.array is not None:
                    raise self.err(f"a const must be a primitive or String, not {tr}", d.file, m.pos)
                raw = _evaluate(m.expr, self.scope_lookup(d), d.file.filename)  # type: ignore[union-attr]
                value = self.coerce(raw, tr, d.file, m.pos, f"const {m.name}")
        finally:
            self.evaluating.discard(key)
        self.const_values[key] = value
        return value

    def enum_values(self, d: _RawDecl) -> dict[str, Any]:
        """Every enumerator's value in ``d``, as _EnumVal (computed once, in order)."""
        cache_key = (d.qualified, "\0enum")
        if cache_key in self.const_values:
            return self.const_values[cache_key]
        backing = self.enum_backing(d)
        bits = _INT_BITS[backing]
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        values: dict[str, Any] = {}
        prev: int | None = None
        own = {m.name for m in d.members}
        f = d.file
        assert f is not None
        outer = self.scope_lookup(d)

        for m in d.members:
            if m.expr is None:
                v = 0 if prev is None else prev + 1
            else:

                def lookup(name: str, pos: _Pos) -> Any:
                    if "." not in name and name in own:
                        if name not in values:
                            raise self.err(f"{name} is used before it is defined", f, pos)
                        return values[name]
                    return outer(name, pos)

                v = _evaluate(m.expr, lookup, f.filename)
                if not _is_int(v):
                    raise self.err(f"enumerator {m.name} needs an integer value", f, m.pos)
            v = int(v)
            if not lo <= v <= hi:
                raise self.err(f"enumerator {m.name} = {v} does not fit the {backing} backing ({lo}..{hi})", f, m.pos)
            if m.name in values:
                raise self.err(f"enumerator {m.name} is defined twice in {d.name}", f, m.pos)
            values[m.name] = _EnumVal(v, d.qualified, m.name)
            prev = v
        self.const_values[cache_key] = values
        return values

    def enum_backing(self, d: _RawDecl) -> str:
        a = _find_annotation(d.annotations, "Backing")
        if a is None:
            return "byte"
        t = a.get("type")
        if t not in _INT_BITS:
            raise self.err(f'@Backing(type=...) must be "byte", "int" or "long", not {t!r}', d.file, d.pos)
        return t

    def coerce(self, v: Any, tr: TypeRef, f: _RawFile | None, pos: _Pos, what: str) -> Any:
        """A constant-expression value converted to ``tr``'s Python value, or an error."""
        def fail(msg: str) -> AidlResolutionError:
            return self.err(f"{what}: {msg}", f, pos)

        if tr.array is not None or tr.name == "List":
            if not isinstance(v, list):
                raise fail(f"expected an array value {{...}} for {tr}")
            elem_tr = tr.args[0] if tr.name == "List" else TypeRef(tr.name)
            if tr.array is not None and tr.array >= 0 and len(v) != tr.array:
                raise fail(f"{tr} needs exactly {tr.array} values, got {len(v)}")
            items = [self.coerce(x, elem_tr, f, pos, what) for x in v]
            if tr.name == "byte" and tr.array is not None:
                return bytes(x & 0xFF for x in items)
            return items
        if isinstance(v, list):
            raise fail(f"an array value cannot be a {tr}")
        name = tr.name
        if isinstance(v, tuple) and v and v[0] == "char":
            if name == "char" or name == "String":
                return v[1]
            raise fail(f"a char literal is not a {name}")
        if name in _INT_BITS:
            if not _is_int(v):
                raise fail(f"expected an integer for {name}, got {v!r}")
            bits = _INT_BITS[name]
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            v = int(v)
            if not lo <= v <= hi:
                raise fail(f"{v} does not fit in {name} ({lo}..{hi})")
            return v
        if name == "boolean":
            if not isinstance(v, bool):
                raise fail(f"expected true or false, got {v!r}")
            return v
        if name in ("float", "double"):
            if not (_is_int(v) or isinstance(v, float)):
                raise fail(f"expected a number for {name}, got {v!r}")
            try:
                return (_parcel.check_float if name == "float" else _parcel.check_double)(float(v))
            except (TypeError, ValueError) as e:
                raise fail(str(e)) from None
        if name == "char":
            raise fail("expected a char literal such as 'a'")
        if name == "String":
            if not isinstance(v, str):
                raise fail(f"expected a string, got {v!r}")
            return v
        if name in _BUILTINS or self.kind_of(name) != "enum":
            raise fail(f"a {name} cannot have a default value")
        d = self.defs[name]
        assert isinstance(d, EnumDef)
        if isinstance(v, _EnumVal):
            if v.enum_name != name:
                raise fail(f"{v.enum_name}.{v.member} is not a {name}")
            return d.cls[v.member]
        if _is_int(v):
            try:
                return d.cls(int(v))
            except ValueError:
                raise fail(f"{v} is not a value of {name}") from None
        raise fail(f"expected an enumerator of {name}, got {v!r}")

    # ---- phase 2: definitions

    def build(self) -> dict[str, Definition]:
        self.index()
        self.check_imports()
        # Enums and parcelables (fields later) first: every type can then refer to every other.
        for q, d in self.decls.items():
            if d.kind == "enum":
                self.defs[q] = self.make_enum(d)
        for q, d in self.decls.items():
            if d.kind == "parcelable":
                self.defs[q] = self.make_parcelable(d)
        for q, d in self.decls.items():
            if d.kind == "interface":
                self.defs[q] = self.make_interface(d)
        for q, d in self.decls.items():
            if d.kind == "parcelable":
                self.finish_parcelable(d)
        self.check_recursion()
        # Classes and codecs are the back end's: aidlc writes them, as Python.
        return dict(sorted(self.defs.items()))

    def make_enum(self, d: _RawDecl) -> EnumDef:
        f = d.file
        if not d.members:
            raise self.err(f"enum {d.name} needs at least one enumerator", f, d.pos)
        values = self.enum_values(d)
        for name in values:
            if name.startswith("_") or name in ("name", "value"):
                m = next(m for m in d.members if m.name == name)
                raise self.err(f"enumerator name {name!r} is reserved in Python enums", f, m.pos)
        try:
            cls = enum.IntEnum(d.name, [(k, int(v)) for k, v in values.items()], module=f.package or "aidl")  # type: ignore[union-attr]
        except (TypeError, ValueError) as e:
            raise self.err(f"enum {d.name}: {e}", f, d.pos) from None
        cls.__doc__ = d.doc or f"AIDL enum {d.qualified}."
        edef = EnumDef(
            d.qualified,
            self.enum_backing(d),
            tuple((k, int(v)) for k, v in values.items()),
            d.annotations,
            f.filename,  # type: ignore[union-attr]
            d.pos[0],
            d.doc,
            cls,
        )
        cls.__aidl__ = edef  # type: ignore[attr-defined]
        return edef

    def check_names(self, d: _RawDecl) -> None:
        seen: dict[str, _RawMember] = {}
        for m in d.members:
            if m.name in seen:
                first = seen[m.name]
                what = {"field": "field", "const": "constant", "method": "method", "enumerator": "enumerator"}
                raise self.err(
                    f"{m.name} is declared twice in {d.name} (as {what[first.kind]} at line {first.pos[0]}"
                    + (", and AIDL has no overloading)" if m.kind == first.kind == "method" else ")"),
                    d.file,
                    m.pos,
                )
            seen[m.name] = m

    def make_parcelable(self, d: _RawDecl) -> ParcelableDef:
        f = d.file
        self.check_names(d)
        for m in d.members:
            if m.kind == "method":
                raise self.err("a parcelable cannot declare methods", f, m.pos)
            if m.kind == "field":
                problem = _parcel.field_name_problem(m.name)
                if problem:
                    raise self.err(f"field {m.name}: {problem}", f, m.pos)
        consts = {m.name: self.member_value(d, m.name, m.pos) for m in d.members if m.kind == "const"}
        return ParcelableDef(
            d.qualified,
            (),
            types.MappingProxyType(consts),
            d.annotations,
            f.filename,  # type: ignore[union-attr]
            d.pos[0],
            d.doc,
        )

    def finish_parcelable(self, d: _RawDecl) -> None:
        f = d.file
        pdef = self.defs[d.qualified]
        assert isinstance(pdef, ParcelableDef)
        fields = []
        for m in d.members:
            if m.kind != "field":
                continue
            assert m.type is not None
            tr = self.typeref(f, m.type)  # type: ignore[arg-type]
            default = self.zero(tr)
            if m.expr is not None:
                raw = _evaluate(m.expr, self.scope_lookup(d), f.filename)  # type: ignore[union-attr]
                value = self.coerce(raw, tr, f, m.pos, f"field {m.name}")
                default = value
            fields.append(FieldDef(m.name, tr, default, m.annotations, m.pos[0]))
        object.__setattr__(pdef, "fields", tuple(fields))

    def check_recursion(self) -> None:
        """A parcelable that always contains itself has no finite default; AIDL refuses it too."""
        state: dict[str, int] = {}

        def visit(q: str, trail: list[str]) -> None:
            state[q] = 1
            pdef = self.defs[q]
            assert isinstance(pdef, ParcelableDef)
            for fd in pdef.fields:
                t = fd.type
                if t.nullable or t.array is not None or t.name == "List" or t.name in _BUILTINS:
                    continue
                if self.kind_of(t.name) != "parcelable":
                    continue
                if state.get(t.name) == 1:
                    d = self.decls[q]
                    cycle = " -> ".join(trail + [q, t.name])
                    raise self.err(
                        f"field {fd.name} makes {cycle} contain itself; mark it @nullable", d.file, (fd.line or 0, 1)
                    )
                if t.name not in state:
                    visit(t.name, trail + [q])
            state[q] = 2

        for q, d in self.decls.items():
            if d.kind == "parcelable" and q not in state:
                visit(q, [])

    def make_interface(self, d: _RawDecl) -> InterfaceDef:
        f = d.file
        self.check_names(d)
        consts: dict[str, Any] = {}
        methods: list[MethodDef] = []
        for m in d.members:
            if m.kind == "const":
                consts[m.name] = self.member_value(d, m.name, m.pos)
            elif m.kind == "field":
                raise self.err("an interface cannot declare fields (did you mean a method or a const?)", f, m.pos)
        code = FIRST_CALL_TRANSACTION
        for m in d.members:
            if m.kind != "method":
                continue
            assert m.type is not None
            ret = self.typeref(f, m.type, allow_void=True)  # type: ignore[arg-type]
            oneway = m.oneway or d.oneway
            args = []
            arg_names: set[str] = set()
            for name, direction, rt, pos in m.args:
                if name in arg_names:
                    raise self.err(f"argument {name} of {m.name} is declared twice", f, pos)
                arg_names.add(name)
                at = self.typeref(f, rt)  # type: ignore[arg-type]
                if direction != "in":
                    movable = at.array is not None or at.name == "List" or (
                        at.name not in _BUILTINS and self.kind_of(at.name) == "parcelable"
                    )
                    if not movable:
                        raise self.err(
                            f"'{direction} {at} {name}': only arrays, Lists and parcelables can be out or inout",
                            f,
                            pos,
                        )
                    if oneway:
                        raise self.err(
                            f"oneway method {m.name} cannot have {direction} argument {name}", f, pos
                        )
                args.append(ArgDef(name, at, direction))
            if oneway and ret.name != "void":
                raise self.err(f"oneway method {m.name} must return void, not {ret}", f, m.pos)
            methods.append(MethodDef(m.name, code, oneway, tuple(args), ret, m.annotations, m.doc))
            code += 1
        if code - 1 > 0x00FFFFFF:
            raise self.err("too many methods for the transaction code range", f, d.pos)
        return InterfaceDef(
            d.qualified,
            d.oneway,
            tuple(methods),
            types.MappingProxyType(consts),
            d.annotations,
            f.filename,  # type: ignore[union-attr]
            d.pos[0],
            d.doc,
            types.MappingProxyType({md.code: md for md in methods}),
            types.MappingProxyType({md.name: md for md in methods}),
        )


def resolve(files: list[_RawFile]) -> dict[str, Definition]:
    """The front end's last phase: every definition of ``files``, resolved and checked."""
    return _Loader(files).build()
