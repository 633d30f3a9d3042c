"""Load stage: spec bytes -> plain data plus a location for every key and value, or diagnostics.

PyYAML composes a node tree (with the C parser where it is available); we construct the Python
values ourselves so that we see every mapping key (duplicates are errors, not 'last one wins'),
bound how far aliases may expand, and remember how each scalar was spelled, so that a later stage
can say "`3.10` was read as the float 3.1; quote it".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic, Span, make_error
from ..text import printable
from .inputs import read_bytes

try:  # the C parser is several times faster and gives the same marks
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Base = yaml.SafeLoader

_RESOLVER = yaml.resolver.Resolver()


@lru_cache(maxsize=4096)
def _resolve(kind: type, value: str, implicit: tuple[bool, bool]) -> str:
    resolved: str = _RESOLVER.resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
    return resolved


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader, with the tag of each scalar memoised: resolving it is the slowest part of
    composing a small spec, and the same scalars recur across specs (a resolver without path
    resolvers is a pure function of its arguments)."""

    def resolve(self, kind: type, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and isinstance(value, str):
            return _resolve(kind, value, tuple(implicit))
        resolved: str = super().resolve(kind, value, implicit)
        return resolved

KeyPath = tuple[str | int, ...]

# A small spec has a few hundred nodes; this bounds what anchors and aliases can expand into.
MAX_NODES = 20_000
MAX_YAML_DEPTH = 64
MAX_INT_BITS = 256  # an integer spec value past 2**256 is a typo, and prints as nothing Python will print

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"

_constructor = yaml.constructor.SafeConstructor()


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def is_identifier(key: object) -> bool:
    """Whether a key is a word a message may quote: an unknown key that is not (a line of another
    file read through a link, a secret) is reported without being echoed."""
    return isinstance(key, str) and _IDENTIFIER.fullmatch(key) is not None


class Location(NamedTuple):
    """Where a value came from: the file and the span in it."""

    file: str
    span: Span


class ScalarSpelling(NamedTuple):
    """How a scalar was written: its source text and whether it was plain (unquoted)."""

    text: str
    plain: bool


class SourceDoc(NamedTuple):
    """A loaded spec: its data and, per key path, where the value and its key are."""

    file: str
    text: str
    data: dict[str, Any]
    values: dict[KeyPath, Location]  # KeyPath -> Location of the value
    keys: dict[KeyPath, Location]  # KeyPath -> Location of the key that names it
    spellings: dict[KeyPath, ScalarSpelling]  # KeyPath -> ScalarSpelling for plain scalars that are not strings

    def value_location(self, path: KeyPath) -> Location | None:
        """The location of the value at `path`, or of its nearest ancestor that has one."""
        path = tuple(path)
        while True:
            if path in self.values:
                return self.values[path]
            if not path:
                return None
            path = path[:-1]


_new_tuple = tuple.__new__


class _Abort(Exception):
    """Stops construction once a diagnostic that makes the rest meaningless is recorded."""


def _line_lengths(text: str) -> list[int]:
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [len(line) for line in lines]


def _clamp(text: str, line0: int, col0: int, lengths: list[int] | None = None) -> tuple[int, int]:
    """0-based parser marks -> 1-based (line, column) that lie inside `text` (whose line lengths
    may be given, computed once per document)."""
    lengths = _line_lengths(text) if lengths is None else lengths
    line0 = max(0, min(line0, len(lengths) - 1))
    col0 = max(0, min(col0, lengths[line0]))
    return line0 + 1, col0 + 1


def _span(text: str, node: yaml.Node, lengths: list[int] | None = None) -> Span:
    line, col = _clamp(text, node.start_mark.line, node.start_mark.column, lengths)
    end_line, end_col = node.end_mark.line + 1, node.end_mark.column + 1
    return Span(line, col, max(end_line, line), end_col)


class _Builder:
    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.lengths = _line_lengths(text)
        self.values: dict[KeyPath, Location] = {}
        self.keys: dict[KeyPath, Location] = {}
        self.spellings: dict[KeyPath, ScalarSpelling] = {}
        self.diags: list[Diagnostic] = []
        self.nodes = 0

    def location(self, node: yaml.Node) -> Location:
        """_span's result without its clamping where the mark already lies inside the text."""
        start, end = node.start_mark, node.end_mark
        line0, col0 = start.line, start.column
        lengths = self.lengths
        if line0 >= len(lengths) or col0 > lengths[line0]:
            line0, col0 = _clamp(self.text, line0, col0, lengths)
            line0, col0 = line0 - 1, col0 - 1
        line, end_line = line0 + 1, end.line + 1
        # tuple.__new__ directly: the NamedTuples' own __new__ is a Python call, and this runs for
        # every key and value of every spec
        span = _new_tuple(Span, (line, col0 + 1, end_line if end_line > line else line, end.column + 1))
        return _new_tuple(Location, (self.file, span))

    def error(self, code: str, message: str, node: yaml.Node, path: KeyPath, hint: str | None = None) -> None:
        span = _span(self.text, node, self.lengths)
        self.diags.append(
            make_error(
                code, message, hint=hint, file=self.file, line=span.line, column=span.column,
                end_line=span.end_line, end_column=span.end_column, key_path=tuple(path),
            )
        )

    def build(self, node: yaml.Node, path: KeyPath, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES or depth > MAX_YAML_DEPTH:
            self.error(
                "yaml-alias-limit",
                f"the document expands past {MAX_NODES} values or {MAX_YAML_DEPTH} levels of nesting",
                node, path, hint="a job spec needs no deep anchors or aliases; write the values out",
            )
            raise _Abort
        self.values[path] = self.location(node)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.error("yaml-tag", f"unsupported YAML tag {_short_tag(node.tag)!r}", node, path, hint="remove the tag")
            return [self.build(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.MappingNode)
        if node.tag != _MAP:
            self.error("yaml-tag", f"unsupported YAML tag {_short_tag(node.tag)!r}", node, path, hint="remove the tag")
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                self.error(
                    "yaml-merge-key", "YAML merge keys (<<) are not supported in a job spec", key_node, path,
                    hint="write the keys out, or share them through a base spec",
                )
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else "a collection"
                self.error(
                    "yaml-key-type", f"mapping key {shown!r} is not a string (YAML read it as {_kind(key_node)})",
                    key_node, path, hint=f"quote the key: '{shown}'" if isinstance(key_node, yaml.ScalarNode) else None,
                )
                continue
            key = key_node.value
            child = path + (key,)
            if key in result:
                first = self.keys[child].span
                self.error(
                    "yaml-duplicate-key", f"duplicate key {key!r} (first defined at line {first.line})",
                    key_node, child, hint="remove one of them; YAML would silently keep the last",
                )
                continue
            self.keys[child] = self.location(key_node)
            result[key] = self.build(value_node, child, depth + 1)
        return result

    def scalar(self, node: yaml.ScalarNode, path: KeyPath) -> Any:
        tag = node.tag
        plain = not node.style  # the C parser reports '' for plain scalars, the Python one None
        if tag == _STR or tag == _TIMESTAMP:
            # timestamps stay the strings they were written as: no spec field is a date
            return node.value
        if tag == _NULL:
            return None
        value: Any
        try:
            if tag == _BOOL:
                value = _constructor.construct_yaml_bool(node)
            elif tag == _INT:
                value = _constructor.construct_yaml_int(node)
                if value.bit_length() > MAX_INT_BITS:  # 0x... and 0o... of any length: Python prints none past 4300 digits
                    self.error("yaml-tag", f"{node.value[:24]}... is too large an integer for any spec value", node, path,
                               hint="no size, count or limit of a job has more than a few dozen digits")
                    return None
            elif tag == _FLOAT:
                value = _constructor.construct_yaml_float(node)
            else:
                self.error("yaml-tag", f"unsupported YAML tag {_short_tag(tag)!r}", node, path, hint="remove the tag")
                return node.value
        except (ValueError, yaml.YAMLError):
            self.error("yaml-tag", f"cannot read {node.value!r} as {tag.rsplit(':', 1)[-1]}", node, path)
            return node.value
        if plain:
            self.spellings[path] = ScalarSpelling(node.value, plain=True)
        return value


def _short_tag(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag


def _kind(node: yaml.Node) -> str:
    tag = getattr(node, "tag", "")
    return {
        _BOOL: "a boolean", _INT: "an integer", _FLOAT: "a float", _NULL: "null",
        _MAP: "a mapping", _SEQ: "a list",
    }.get(tag, "a non-string")


def _tab_at(text: str, line0: int, column0: int) -> bool:
    """Whether a parser error points at (or just after) a tab in the line's indentation or at it."""
    lines = text.split("\n")
    if not 0 <= line0 < len(lines):
        return False
    row = lines[line0]
    return "\t" in row[: column0 + 1] and row[: column0 + 1].strip(" \t") == "" or row[column0: column0 + 1] == "\t"


def _position_of_offset(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line0 = before.count("\n")
    col0 = offset - (before.rfind("\n") + 1)
    return _clamp(text, line0, col0)


def _file_error(file: str, code: str, message: str, hint: str | None = None, line: int | None = None,
                column: int | None = None) -> Diagnostic:
    return make_error(code, message, hint=hint, file=file, line=line, column=column)


def decode(file: str, raw: bytes) -> tuple[str | None, list[Diagnostic]]:
    """Bytes -> text (UTF-8, an optional BOM dropped), or an `encoding` diagnostic at the bad byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = raw[: exc.start].decode("utf-8", errors="replace")
        line, col = _position_of_offset(good + " ", len(good))
        return None, [_file_error(
            file, "encoding", f"the spec is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
            hint="save the file as UTF-8", line=line, column=col,
        )]
    if text.startswith("\ufeff"):
        text = text[1:]
    return text, []


def _compose(file: str, text: str) -> tuple[list[yaml.Node] | None, list[Diagnostic]]:
    """YAML text -> its documents' nodes, or the diagnostic that explains why there are none."""
    try:
        return list(yaml.compose_all(text, Loader=_Loader)), []
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = _clamp(text, mark.line, mark.column) if mark else (None, None)
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{exc.context}: {problem}" if "while" not in exc.context else f"{problem} ({exc.context})"
        hint = None
        if mark is not None and _tab_at(text, mark.line, mark.column):
            problem = f"a tab character: YAML does not indent with tabs ({problem})"
            hint = "indent with spaces"
        return None, [_file_error(file, "yaml-syntax", problem, line=line, column=col, hint=hint)]
    except yaml.reader.ReaderError as exc:
        line, col = _position_of_offset(text, exc.position)
        return None, [_file_error(
            file, "yaml-syntax", f"character {exc.character!r} is not allowed in YAML", line=line, column=col,
            hint="remove the control character",
        )]
    except yaml.YAMLError as exc:  # pragma: no cover - every PyYAML error we know is one of the above
        return None, [_file_error(file, "yaml-syntax", str(exc).splitlines()[0])]
    except RecursionError:
        return None, [_file_error(
            file, "yaml-alias-limit", "the document nests too deeply to read", line=1, column=1,
        )]


def load_value(file: str, text: str) -> tuple[Any, list[Diagnostic]]:
    """One YAML value (a --set value) -> its data under the spec loader's rules and limits (tags, keys, aliases,
    nesting, integers), or the diagnostics; an empty text is null."""
    documents, diags = _compose(file, text)
    if documents is None:
        return None, diags
    documents = [d for d in documents if d is not None]
    if not documents:
        return None, []
    builder = _Builder(file, text)
    try:
        value = builder.build(documents[0], ())
    except _Abort:
        return None, builder.diags
    if len(documents) > 1:
        return None, [_file_error(file, "yaml-multi-document", "the value holds more than one YAML document")]
    return value, builder.diags


def load_text(file: str, text: str) -> tuple[SourceDoc | None, list[Diagnostic]]:
    """YAML text -> SourceDoc, or the diagnostics that explain why there is none."""
    documents, diags = _compose(file, text)
    if documents is None:
        return None, diags
    documents = [d for d in documents if d is not None]
    if not documents:
        return None, [_file_error(
            file, "yaml-empty", "the spec is empty", line=1, column=1,
            hint="start from `megatron-compile init NAME`, or see the README's spec reference",
        )]
    if len(documents) > 1:
        second = documents[1]
        line, col = _clamp(text, second.start_mark.line, second.start_mark.column)
        return None, [_file_error(
            file, "yaml-multi-document", f"the spec holds {len(documents)} YAML documents; one spec is one document",
            hint="split them into one file per job", line=line, column=col,
        )]
    root = documents[0]
    builder = _Builder(file, text)
    if not isinstance(root, yaml.MappingNode):
        builder.error(
            "yaml-not-mapping", f"the top level of a spec must be a mapping, not {_kind(root)}", root, (),
            hint="start the file with `version: 1`",
        )
        return None, builder.diags
    try:
        data = builder.build(root, ())
    except _Abort:
        return None, builder.diags
    doc = SourceDoc(file=file, text=text, data=data, values=builder.values, keys=builder.keys,
                    spellings=builder.spellings)
    return doc, builder.diags


def load_file(path: str, display: str | None = None) -> tuple[SourceDoc | None, list[Diagnostic]]:
    """Read a spec from disk; `display` is the name diagnostics print (defaults to `path`)."""
    file = display or path
    if printable(file) != file:  # the path is echoed into generated comments and shell words, each one line
        return None, [_file_error(printable(file), "file-unreadable",
                                  "a spec's file name may not hold a control character (a newline, a tab, ...)",
                                  hint="rename the file")]
    try:
        raw = read_bytes(path)
    except OSError as exc:
        return None, [_file_error(file, "file-unreadable", f"cannot read the spec: {exc.strerror or exc}",
                                  hint="name a spec file (.yaml), a directory of them or a glob")]
    text, diags = decode(file, raw)
    if text is None:
        return None, diags
    return load_text(file, text)
