"""What a rule reads: the document, the sections that validated, the facts derived from them."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic
from ..load.source import SourceDoc
from .facts import Facts


class RuleContext(NamedTuple):
    doc: SourceDoc
    sections: dict[str, Any]  # section name -> its validated record
    facts: Facts
    locate: Callable[..., Diagnostic]  # (code, message, path, *, key=False, hint=None, severity=…)


class Rule(NamedTuple):
    code: str
    needs: tuple[str, ...]
    check: Callable[[RuleContext], Iterable[Diagnostic]]
