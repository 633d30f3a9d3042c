"""The templates' language, and nothing more: `{{ value | quoting_filter }}`, `{% if [not] value %}`,
`{% for x[, y] in value %}`, `{% else %}` and their ends, where a value is a plan name and its
attributes (`plan.launch.log_dir`). Anything else in a template is refused when it is parsed.

This is the subset of Jinja the templates were held to (docs/architecture.md, "Logic-free
templates"), rendered with Jinja's whitespace rules for trim_blocks, lstrip_blocks and
keep_trailing_newline, so a template reads and renders as it did under Jinja (tests/test_templating.py
renders every template of every spec both ways). Parsing is a regular-expression scan, not code
generation: the six templates of a compile parse in about a millisecond where Jinja spent 20 ms
compiling them, every run (docs/performance.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable, Union

# a tag: {{ expression }} or {% statement %}, with Jinja's whitespace-control signs on a statement
_TAG = re.compile(r"\{\{(.*?)\}\}|\{%([-+]?)(.*?)([-+]?)%\}", re.S)
_VALUE = r"(\w+(?:\.\w+)*)"
_OUTPUT = re.compile(rf'^\s*{_VALUE}\s*\|\s*(\w+)(?:\("([^"]*)"\))?\s*$')
_IF = re.compile(rf"^\s*if\s+(not\s+)?{_VALUE}\s*$")
_FOR = re.compile(rf"^\s*for\s+(\w+)(?:\s*,\s*(\w+))?\s+in\s+{_VALUE}\s*$")
_NEWLINES = re.compile(r"\r\n|\r|\n")
_BLANK = re.compile(r"\s+")


class TemplateError(Exception):
    """A template outside the language, or one that names a value the plan does not have: a bug of
    the compiler's own templates or plan, never a user's error."""


class Output:
    """`{{ value | filter }}` or `{{ value | filter("argument") }}`."""

    __slots__ = ("value", "quote", "argument")

    def __init__(self, value: tuple[str, ...], quote: Callable[..., Any], argument: str | None) -> None:
        self.value, self.quote, self.argument = value, quote, argument


class Block:
    """`{% if [not] value %}` or `{% for names in value %}`: its body, and what `{% else %}` holds."""

    __slots__ = ("kind", "value", "negated", "names", "body", "otherwise")

    def __init__(self, kind: str, value: tuple[str, ...], negated: bool = False, names: tuple[str, ...] = ()) -> None:
        self.kind, self.value, self.negated, self.names = kind, value, negated, names
        self.body: list[Node] = []
        self.otherwise: list[Node] = []


Node = Union[str, Output, Block]


def parse(source: str, filters: Mapping[str, Callable[..., Any]], name: str = "<template>") -> list[Node]:
    """A template's text as nodes (text, outputs, blocks); TemplateError for anything outside the
    language or a filter not in `filters`."""
    source = _NEWLINES.sub("\n", source)  # as Jinja reads a template
    if "{#" in source:  # Jinja's comment: text here, so refused rather than printed
        raise TemplateError(f"{name}:{source.count(chr(10), 0, source.index('{#')) + 1}: use shell comments, "
                            "not template comments")
    root: list[Node] = []
    open_blocks: list[tuple[Block, list[Node]]] = []  # each open block, and the list it sits in
    nodes = root
    position = 0
    line_starting = True  # the text before a tag starts a line (Jinja's lstrip_blocks condition)
    for match in _TAG.finditer(source):
        text = source[position:match.start()]
        end = match.end()
        statement = match.group(3)
        if statement is not None:
            text, end = _strip_around(source, text, end, match.group(2), match.group(4), line_starting)
        if text:
            nodes.append(text)
        line_starting = source[match.start():end].endswith("\n")
        position = end
        if statement is None:
            nodes.append(_output(match.group(1), filters, name, source, match.start()))
            continue
        word = statement.strip()
        block = _block(statement)
        if block is not None:
            nodes.append(block)
            open_blocks.append((block, nodes))
            nodes = block.body
        elif word == "else" and open_blocks and nodes is not open_blocks[-1][0].otherwise:
            nodes = open_blocks[-1][0].otherwise
        elif word in ("endif", "endfor") and open_blocks and open_blocks[-1][0].kind == word[3:]:
            nodes = open_blocks.pop()[1]
        else:
            line = source.count("\n", 0, match.start()) + 1
            raise TemplateError(f"{name}:{line}: {{%{statement}%}} is not in the templates' language (if, for, "
                                "else and their ends)")
    if open_blocks:
        raise TemplateError(f"{name}: a {open_blocks[-1][0].kind} block is not closed")
    if source[position:]:
        nodes.append(source[position:])
    return root


def _strip_around(source: str, text: str, end: int, left: str, right: str, line_starting: bool) -> tuple[str, int]:
    """Jinja's whitespace rules around a statement tag: `{%-` strips the whitespace before it, and
    lstrip_blocks the indentation of a tag alone at the start of its line; `-%}` strips the
    whitespace after it, and trim_blocks the one newline that ends its line."""
    if left == "-":
        text = text.rstrip()
    elif left != "+":
        start = text.rfind("\n") + 1
        if (start > 0 or line_starting) and _BLANK.fullmatch(text, start):
            text = text[:start]
    if right == "-":
        while end < len(source) and source[end].isspace():
            end += 1
    elif right != "+" and source.startswith("\n", end):
        end += 1
    return text, end


def _output(expression: str, filters: Mapping[str, Callable[..., Any]], name: str, source: str, offset: int) -> Output:
    match = _OUTPUT.match(expression)
    if match is None or match.group(2) not in filters:
        line = source.count("\n", 0, offset) + 1
        raise TemplateError(f"{name}:{line}: {{{{{expression}}}}} is not `value | quoting filter`")
    return Output(tuple(match.group(1).split(".")), filters[match.group(2)], match.group(3))


def _block(statement: str) -> Block | None:
    match = _IF.match(statement)
    if match is not None:
        return Block("if", tuple(match.group(2).split(".")), negated=match.group(1) is not None)
    match = _FOR.match(statement)
    if match is not None:
        names = (match.group(1),) if match.group(2) is None else (match.group(1), match.group(2))
        return Block("for", tuple(match.group(3).split(".")), names=names)
    return None


def _lookup(scope: Mapping[str, Any], value: tuple[str, ...]) -> Any:
    """A plan value: a name, then each attribute (or, as Jinja does, the key of a mapping)."""
    try:
        found = scope[value[0]]
    except KeyError:
        raise TemplateError(f"{value[0]} is not defined") from None
    for part in value[1:]:
        try:
            found = getattr(found, part)
        except AttributeError:
            if not isinstance(found, Mapping) or part not in found:
                raise TemplateError(f"{'.'.join(value)}: {type(found).__name__} has no {part}") from None
            found = found[part]
    return found


def render(nodes: list[Node], scope: Mapping[str, Any], finalize: Callable[[Any], Any]) -> str:
    """The text of parsed nodes with the names in `scope`; every output passes `finalize`."""
    out: list[str] = []
    _render(nodes, scope, finalize, out)
    return "".join(out)


def _render(nodes: list[Node], scope: Mapping[str, Any], finalize: Callable[[Any], Any], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, Output):
            value = _lookup(scope, node.value)
            quoted = node.quote(value) if node.argument is None else node.quote(value, node.argument)
            out.append(str(finalize(quoted)))
        elif node.kind == "if":
            chosen = node.body if bool(_lookup(scope, node.value)) != node.negated else node.otherwise
            _render(chosen, scope, finalize, out)
        else:
            looped = False
            inner = dict(scope)
            for item in _lookup(scope, node.value):
                looped = True
                if len(node.names) == 1:
                    inner[node.names[0]] = item
                else:
                    inner[node.names[0]], inner[node.names[1]] = item
                _render(node.body, inner, finalize, out)
            if not looped:
                _render(node.otherwise, scope, finalize, out)


class Template:
    """A parsed template; render(**names) gives its text."""

    def __init__(self, source: str, name: str, filters: Mapping[str, Callable[..., Any]],
                 finalize: Callable[[Any], Any]) -> None:
        self.name = name
        self.nodes = parse(source, filters, name)
        self._finalize = finalize

    def render(self, **scope: Any) -> str:
        return render(self.nodes, scope, self._finalize)
