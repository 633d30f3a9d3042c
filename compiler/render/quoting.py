"""Quoting filters, the only filters templates have: each returns Safe text for its target language.

Every `{{ … }}` in a template must end in one of these; the environment's `finalize` raises on
anything else, so a value that was not quoted for its target language can never reach an artifact.
"""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from typing import Any, Iterable, cast

import jinja2

from ..plan.shell import Var, Word
from ..platform.engine import EnvParam
from ..plan.types import Header
from ..text import CONTROL


class TemplateSafetyError(Exception):
    """A template printed a value that did not pass through a quoting filter (a bug, not user error)."""


class Safe(str):
    """Text already quoted for the language of the artifact it is printed into."""


_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOCKER_WORD = re.compile(r"[A-Za-z0-9._/:@-]+")


def _no_control(text: str, where: str) -> str:
    if CONTROL.search(text):
        raise TemplateSafetyError(f"control character in {where}: {text!r}")
    return text


def _scalar_text(value: Any) -> str:
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises UndefinedError naming the missing variable
    if isinstance(value, bool) or value is None:
        raise TemplateSafetyError(f"{value!r} has no single shell spelling; give the plan a string or an int")
    if isinstance(value, (str, int)):
        return str(value)
    raise TemplateSafetyError(f"cannot quote a {type(value).__name__} as one word")


_DQ_UNSAFE = re.compile(r'[$`"\\!]')


def _quote(text: str) -> str:
    """shlex.quote, except that text with single quotes and nothing double quotes would expand is
    double-quoted: `python -c "print('x')"` instead of shlex's `'print('"'"'x'"'"')'`."""
    quoted = shlex.quote(_no_control(text, "a shell word"))
    if "'" in text and not _DQ_UNSAFE.search(text):
        return f'"{text}"'
    return quoted


@lru_cache(maxsize=2048)
def _quote_cached(text: str) -> str:
    return _quote(text)


def sh(value: Any) -> Safe:
    """One literal shell word: bare when safe, else quoted."""
    return Safe(_quote_cached(_scalar_text(value)))


@lru_cache(maxsize=2048)  # plan Words are immutable and repeat across specs (paths, labels, flags)
def sh_word(word: Word) -> Safe:
    """A plan Word as one shell word: a leading literal that needs no quotes stays bare, and the rest
    is one double-quoted string with "$NAME" references when its literal text is inert inside double
    quotes; otherwise each part is quoted on its own and concatenated."""
    if not isinstance(word, Word):
        raise TemplateSafetyError(f"sh_word expects a plan Word, got {type(word).__name__}")
    parts = list(word.parts)
    for part in parts:
        if isinstance(part, Var):
            sh_name(part.name)
        else:
            _no_control(part, "a shell word")
    if all(isinstance(p, str) for p in parts):
        return Safe(_quote("".join(cast("list[str]", parts))))
    start = 1 if parts and isinstance(parts[0], str) and shlex.quote(parts[0]) == parts[0] else 0
    head = cast(str, parts[0]) if start else ""
    if start == len(parts):
        return Safe(head or "''")
    rest = range(start, len(parts))
    if all(isinstance(parts[i], Var) or not _DQ_UNSAFE.search(cast(str, parts[i])) for i in rest):
        body = "".join(word.reference(i) if isinstance(parts[i], Var) else cast(str, parts[i]) for i in rest)
        return Safe(head + '"' + body + '"')
    out = [head]
    for i in rest:
        part = parts[i]
        out.append(f'"{word.reference(i)}"' if isinstance(part, Var) else shlex.quote(part) if part else "")
    return Safe("".join(out))


def sh_command(lines: Iterable[Iterable[Word]]) -> Safe:
    """A command given as lines of words: words joined by spaces, lines by backslash continuations."""
    return Safe(" \\\n  ".join(" ".join(sh_word(w) for w in line) for line in lines))


def sh_inline(words: Iterable[Word]) -> Safe:
    """An argv as one command on one line."""
    return Safe(" ".join(sh_word(w) for w in words))


def sh_name(value: str) -> Safe:
    """A shell variable name, which cannot be quoted and so must match [A-Za-z_][A-Za-z0-9_]*."""
    if not isinstance(value, str) or not _SHELL_NAME.fullmatch(value):
        raise TemplateSafetyError(f"not a shell variable name: {value!r}")
    return Safe(value)


_PARAM_TEXT = re.compile(r"[^$`\\\"'}!]*")
_DQ_TEXT = re.compile(r"(?:[^$`\\\"!]|\$[A-Za-z_][A-Za-z0-9_]*)*")


def sh_param(param: EnvParam) -> Safe:
    """An engine's variable as launch.sh reads it: ${NAME:?message} or ${NAME:-fallback}. The text
    is the compiler's own, and refused if bash would expand or end anything in it."""
    if not isinstance(param, EnvParam) or not _PARAM_TEXT.fullmatch(param.text):
        raise TemplateSafetyError(f"not an engine variable with inert text: {param!r}")
    _no_control(param.text, "a parameter expansion")
    return Safe("${" + sh_name(param.source) + (":?" if param.required else ":-") + param.text + "}")


def sh_names(names: Iterable[str]) -> Safe:
    """Shell variable names separated by spaces (`unset A B`)."""
    return Safe(" ".join(sh_name(n) for n in names))


def dq_text(value: str) -> Safe:
    """Text printed inside a double-quoted shell string: $NAME references and nothing else bash expands."""
    if not isinstance(value, str) or not _DQ_TEXT.fullmatch(value):
        raise TemplateSafetyError(f"not inert double-quoted text: {value!r}")
    return Safe(_no_control(value, "a double-quoted string"))


def comment_text(value: str | int) -> Safe:
    """Text in one line of a comment (a line break is a control character, refused)."""
    return Safe(_no_control(_scalar_text(value), "a comment"))


def comment(header: Header, prefix: str = "# ") -> Safe:
    """The generated-file header as comment lines."""
    lines = [prefix + _no_control(line, "a comment") for line in header.lines()]
    return Safe("\n".join(lines))


def docker_word(value: str) -> Safe:
    """A Dockerfile word that needs no quoting (image references, commit ids)."""
    if not isinstance(value, str) or not _DOCKER_WORD.fullmatch(value):
        raise TemplateSafetyError(f"not a plain Dockerfile word: {value!r}")
    return Safe(value)


def docker_str(value: str) -> Safe:
    """A double-quoted Dockerfile ENV/LABEL value; backslashes are rejected at validation."""
    text = _no_control(_scalar_text(value), "a Dockerfile value")
    if "\\" in text:
        raise TemplateSafetyError(f"backslash in a Dockerfile value: {text!r}")
    return Safe('"' + text.replace('"', '\\"').replace("$", "\\$") + '"')


def docker_json(values: Iterable[str]) -> Safe:
    """A Dockerfile exec-form array (COPY ["src", "dst"]), paths with spaces included."""
    items = [_no_control(_scalar_text(v), "a Dockerfile path") for v in values]
    return Safe(json.dumps(items, ensure_ascii=False))


@lru_cache(maxsize=2048)
def md(value: str) -> Safe:
    """Markdown table text: pipes and markup characters escaped."""
    text = _no_control(_scalar_text(value), "Markdown")
    return Safe(re.sub(r"([\\`*_|<>\[\]])", r"\\\1", text))


@lru_cache(maxsize=2048)
def md_code(value: str) -> Safe:
    """A Markdown code span, fenced with more backticks than the value holds."""
    text = _no_control(_scalar_text(value), "Markdown").replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return Safe(f"{fence}{pad}{text}{pad}{fence}")


def mermaid(line: str) -> Safe:
    """A line of a Mermaid diagram inside a ```mermaid fence (built by plan/pictures.py from numbers
    and fixed words); refused if it could end the fence or hold a control character."""
    text = _no_control(_scalar_text(line), "Mermaid")
    if "`" in text:
        raise TemplateSafetyError("a Mermaid line holds a backtick, which could end its fence")
    return Safe(text)


HEREDOC_DELIMITER = "LAUNCH_SH"


def heredoc(text: str) -> Safe:
    """A generated script carried verbatim in a quoted here-document (<<'LAUNCH_SH': bash expands
    nothing in it); refused if a line of it would end the document early."""
    if not isinstance(text, str) or any(line == HEREDOC_DELIMITER for line in text.split("\n")):
        raise TemplateSafetyError("the embedded script holds the here-document's delimiter")
    return Safe(text.rstrip("\n"))


def yaml(value: Any) -> Safe:
    """A YAML scalar: an int as it is, a string JSON-quoted (JSON's strings are YAML's double-quoted ones)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Safe(str(value))
    return Safe(json.dumps(_no_control(_scalar_text(value), "a YAML string"), ensure_ascii=False))


def yaml_heredoc(text: str) -> Safe:
    """A generated script inside a YAML literal block (two spaces in) as a quoted here-document's body;
    refused if a line of it would end the document early."""
    lines = str(heredoc(text)).split("\n")
    for line in lines:
        _no_control(line.replace("\t", ""), "a YAML block")
    return Safe("\n".join("  " + line if line else "" for line in lines))


QUOTING_FILTERS = {
    "sh": sh, "sh_word": sh_word, "sh_command": sh_command, "sh_inline": sh_inline, "sh_name": sh_name, "comment": comment,
    "docker_word": docker_word, "docker_str": docker_str, "docker_json": docker_json, "md": md, "md_code": md_code,
    "heredoc": heredoc, "sh_param": sh_param, "sh_names": sh_names, "dq_text": dq_text, "comment_text": comment_text,
    "yaml": yaml, "yaml_heredoc": yaml_heredoc, "mermaid": mermaid,
}


def finalize(value: Any) -> Any:
    if isinstance(value, Safe):
        return value
    raise TemplateSafetyError(f"template printed {value!r} without a quoting filter")
