"""The string formats of the job spec: the checks pydantic runs after each string is read.

They live apart from models.py so that the compile path can validate with pydantic-core alone
(compiler/coreschema.py): the generated validator in compiler/spec.py calls these functions by name.
Imports only `re`, `unicodedata` and pydantic-core.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

from ..tuples import NamedTuple

from pydantic_core import PydanticCustomError

from ..text import CONTROL


def _describe(char: str) -> str:
    """'\\n' for a C0/C1 control character; '\\u202e' (U+202E RIGHT-TO-LEFT OVERRIDE) for a format character."""
    if ord(char) < 0xa0:
        return repr(char)
    return f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, 'FORMAT CHARACTER')})"


def _invisible(value: str) -> tuple[int, str] | None:
    """The first control or format character of a string (the regex, then Unicode category Cf)."""
    match = CONTROL.search(value)
    if match:
        return match.start(), match.group()
    if value.isascii():
        return None
    found = next(((i, c) for i, c in enumerate(value) if unicodedata.category(c) == "Cf"), None)
    return found


def no_control(value: str) -> str:
    found = _invisible(value)
    if found is not None:
        raise PydanticCustomError(
            "unsafe_character",
            "contains the control character {char} at position {pos}; newlines, control characters and "
            "invisible format characters cannot be made safe in a generated script",
            {"char": _describe(found[1]), "pos": found[0]},
        )
    return value


class Format(NamedTuple):
    pattern: str
    description: str
    title: str
    example: str


# distribution/reference's grammar, without a digest-only form: [host[:port]/]path[:tag][@digest]
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?)"
_COMPONENT = r"(?:[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)"
_TAG = r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})"

FORMATS: dict[str, Format] = {
    "RunName": Format(
        r"[a-z0-9][a-z0-9-]{0,62}", "1-63 lowercase letters, digits and '-', starting with a letter or digit",
        "run name", "mcore-tp2-01",
    ),
    "Commit": Format(
        r"[0-9a-f]{40}", "a full git commit id: 40 lowercase hex digits", "commit",
        "571370c829ca768fe37244f4e2e7f28d8accc4ab",
    ),
    "ImageReference": Format(
        rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::{_TAG})?(?:@sha256:[0-9a-f]{{64}})?",
        "an image reference such as nvcr.io/nvidia/pytorch:25.03-py3", "image reference",
        "nvcr.io/nvidia/pytorch:25.03-py3",
    ),
    "Platform": Format(
        r"[a-z0-9]+/[a-z0-9_]+(?:/v[0-9]+)?", "an OCI platform such as linux/amd64", "platform", "linux/amd64",
    ),
    "RegistryHost": Format(_HOST, "a registry host name, optionally with :port", "registry", "cr.infini-ai.com"),
    "PathComponent": Format(
        _COMPONENT, "lowercase letters and digits, separated by '.', '_' or '-'", "namespace",
        "te-0123456789abcdef",
    ),
    "Repository": Format(
        rf"{_COMPONENT}(?:/{_COMPONENT})*", "a repository path such as megatron-core", "repository", "megatron-core",
    ),
    "Tag": Format(
        _TAG, "an image tag: letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-'", "tag",
        "0.18.2-cu128",
    ),
    "GitUrl": Format(
        r"(?:https?|ssh|git)://[^\s'\"\\]+|git@[^\s'\"\\:]+:[^\s'\"\\]+",
        "a git URL (https://, ssh://, git:// or git@host:path) without spaces, quotes or backslashes", "git URL",
        "https://github.com/NVIDIA/Megatron-LM.git",
    ),
    "AbsolutePath": Format(r"/[^\x00]*", "an absolute POSIX path (starting with '/')", "absolute path",
                           "/mnt/megatron"),
    "Split": Format(r"[0-9]+(?:,[0-9]+){0,2}", "train,valid,test weights such as 949,50,1", "split", "949,50,1"),
    "EnvName": Format(r"[A-Za-z_][A-Za-z0-9_]*", "an environment variable name: letters, digits and '_'",
                      "environment variable", "NCCL_DEBUG"),
}


def _checker(fmt: Format) -> Callable[[str], str]:
    """The check of one format: no control character, and the whole string matches."""

    def check(value: str) -> str:
        no_control(value)
        # compiled at its first use (re's cache keeps it): a spec uses some of these formats, and
        # compiling all of them at import took 0.8 ms of every compile
        if not re.fullmatch(fmt.pattern, value):
            raise PydanticCustomError("format", "must be " + fmt.description + " (got {value})",
                                      {"value": repr(value)})
        return value

    return check


CHECKS: dict[str, Callable[[str], str]] = {name: _checker(fmt) for name, fmt in FORMATS.items()}
