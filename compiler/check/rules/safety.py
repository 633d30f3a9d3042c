"""Safety rules: no secret in a spec, no value that cannot be carried safely into an artifact."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ...diagnostics import Diagnostic, dotted
from ...platform.aistudio import RESERVED_ENV
from ..context import RuleContext

_CREDENTIALS = (
    (re.compile(r"nvapi-[A-Za-z0-9_-]{8,}"), "an NGC API key (nvapi-…)"),
    (re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), "a bearer token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key block"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), "a GitHub token"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"://[^/\s:@]+:[^/\s@]+@"), "a password inside a URL"),
)


def check_image_values(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron.root becomes the Dockerfile's ENV PYTHONPATH and regctl's --env PYTHONPATH=…: Docker
    # treats a backslash inconsistently across instructions, and ':' would split PYTHONPATH in two.
    root = ctx.sections["megatron"].root  # type: ignore[attr-defined]
    bad = sorted({ch for ch in root if ch in "\\:"})
    if bad:
        yield ctx.locate(
            "unsafe-character", f"megatron.root contains {' and '.join(repr(c) for c in bad)}, which cannot be "
            "carried safely into the image's PYTHONPATH", ("megatron", "root"),
            hint="choose a directory name without backslashes or colons, e.g. /opt/Megatron-LM",
        )


def check_reserved_env(ctx: RuleContext) -> Iterator[Diagnostic]:
    for name in ctx.sections["training"].env:  # type: ignore[attr-defined]
        if name in RESERVED_ENV:
            yield ctx.locate(
                "reserved-env", f"training.env.{name} is set by the launch command itself", ("training", "env", name),
                key=True, hint="the spec's own fields control it; remove it from training.env",
            )


def _strings(value: Any, path: tuple) -> Iterator[tuple[tuple, str, bool]]:
    """(path, text, is_key) for every string in the raw data, keys included."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, path + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield path + (key,), key, True
            yield from _strings(item, path + (key,))


# One pass over every string first; the patterns one by one only for a string that matched.
_ANY_CREDENTIAL = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _CREDENTIALS), re.IGNORECASE)


def _all_text(value: Any, out: list[str]) -> list[str]:
    """Every string in the raw data, keys included (what _strings walks, without the paths)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _all_text(item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                out.append(key)
            _all_text(item, out)
    return out


def check_credentials(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A spec almost never holds a credential: one search over all its text first (every string is
    # in it verbatim, so nothing a string matches is missed), the walk with paths only on a match.
    if not _ANY_CREDENTIAL.search("\n".join(_all_text(ctx.doc.data, []))):
        return
    for path, text, is_key in _strings(ctx.doc.data, ()):
        if not _ANY_CREDENTIAL.search(text):
            continue
        for pattern, what in _CREDENTIALS:
            if pattern.search(text):
                yield ctx.locate(
                    "credential-in-spec", f"{dotted(path)} looks like {what}; a spec is committed and its "
                    "artifacts are reviewed, so it must hold no secret", path, key=is_key,
                    hint="remove it; the generated scripts prompt for credentials or read them from the environment",
                )
                break
