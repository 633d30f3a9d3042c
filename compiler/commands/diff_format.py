"""`diff`'s report as text, as one pull-request comment (markdown), and as JSON for tools.

The markdown starts with a hidden marker, so a workflow finds its own comment and updates it, then
one summary row per job, then each job's changes collapsed in <details>; it never passes the
character budget (GitHub's comment limit, 65,535): rows and details that do not fit are counted
instead of shown.
"""

from __future__ import annotations

import json
from typing import Any

from ..diagnostics import Diagnostic, format_text, to_json_obj
from .diff_model import Change, DiffReport, SpecDiff, headline

MARKER = "<!-- megatron-compile-diff -->"
SHOWN_IN_SUMMARY = 6  # headline changes in a job's summary line
VALUE_CHARS = 120  # a longer value is cut in text and markdown (JSON has it whole)


def number(value: Any) -> str:
    """A value as a reader reads it: ints with separators, floats to 4 significant digits below
    1,000 (else to one decimal), the rest as JSON."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS - 1] + "…"


def relative(change: Change) -> str:
    """' (+7.7 %)' for a number that changed, else ''."""
    old, new = change.base, change.head
    if isinstance(old, bool) or isinstance(new, bool) or not isinstance(old, (int, float)) \
            or not isinstance(new, (int, float)) or old == 0:
        return ""
    return f" ({(new / old - 1) * 100:+.1f} %)"


def arrow(change: Change, sep: str = "->") -> str:
    old = "(none)" if change.base is None and change.kind != "spec" else number(change.base)
    new = "(none)" if change.head is None and change.kind != "spec" else number(change.head)
    return f"{old} {sep} {new}{relative(change)}"


def shown(spec: SpecDiff) -> list[Change]:
    """The changes text and markdown list: for a new spec its headline values (every value is new;
    --format json has them all), else every value but the artifacts'."""
    if spec.status == "added":
        return [c for c in headline(list(spec.changes)) if c.head is not None]
    return [c for c in spec.changes if c.kind != "artifact"]


def _artifacts(changes: tuple[Change, ...]) -> list[str]:
    return [c.label for c in changes if c.kind == "artifact"]


def status_text(spec: SpecDiff) -> str:
    if spec.status == "renamed":
        return f"renamed from {spec.renamed_from} (the same job)"
    if spec.status == "changed" and spec.base is not None and not spec.base.ok:
        return "changed (it did not compile at the base)"
    if spec.status == "unchanged" and _artifacts(spec.changes):
        return f"no change ({', '.join(_artifacts(spec.changes))} differ in form only: the same values)"
    return {"unchanged": "no change"}.get(spec.status, spec.status)


def summary(spec: SpecDiff, sep: str = "->") -> str:
    """One line: what was typed (the first two spec values), then the headline changes of a job."""
    typed = [c for c in spec.changes if c.kind == "spec"][:2]
    shown = typed + headline(list(spec.changes))[:SHOWN_IN_SUMMARY]
    parts = [f"{c.label} {arrow(c, sep)}" for c in shown]
    rest = len([c for c in spec.changes if c.kind != "artifact"]) - len(shown)
    if rest > 0:
        parts.append(f"{rest} more value{'s' if rest != 1 else ''}")
    if spec.errors:
        parts.append(f"{len(spec.errors)} error{'s' if len(spec.errors) != 1 else ''}")
    failing = [g for g in spec.guardrails if g.is_error]
    if spec.guardrails:
        parts.append(f"guardrails: {len(failing)} failed, {len(spec.guardrails) - len(failing)} warned")
    return "; ".join(parts)


def counts(report: DiffReport) -> str:
    tally: dict[str, int] = {}
    for spec in report.specs:
        tally[spec.status] = tally.get(spec.status, 0) + 1
    order = ("changed", "added", "removed", "renamed", "error", "unchanged")
    return ", ".join(f"{tally[s]} {'no change' if s == 'unchanged' else s}" for s in order if s in tally)


def render_text(report: DiffReport) -> str:
    """For a terminal: each spec's status and its changes, then the totals."""
    lines = [f"base {report.revision.commit[:12]} ({report.revision.described}) -> work tree"]
    for spec in report.specs:
        lines.append(f"{spec.path}: {status_text(spec)}")
        lines += [f"  {change.kind} {change.label}: {arrow(change)}" for change in shown(spec)]
        if _artifacts(spec.changes) and spec.status not in ("added", "unchanged"):
            lines.append(f"  artifacts changed: {', '.join(_artifacts(spec.changes))}")
        lines += ["  " + line for line in format_text(list(spec.guardrails) + list(spec.errors)).splitlines()]
    if report.diagnostics:
        lines += format_text(list(report.diagnostics)).splitlines()
    lines.append(f"{len(report.specs)} spec{'s' if len(report.specs) != 1 else ''}: {counts(report) or 'none'}")
    return "\n".join(lines) + "\n"


def _json_spec(spec: SpecDiff) -> dict[str, Any]:
    return {"path": spec.path, "status": spec.status, "renamed_from": spec.renamed_from,
            "changes": [c.to_json() for c in spec.changes],
            "guardrails": [to_json_obj(d) for d in spec.guardrails], "errors": [to_json_obj(d) for d in spec.errors]}


def render_json(report: DiffReport) -> str:
    """One document: the base, every spec with every change (values exactly as each compile gives
    them), and the exit code."""
    return json.dumps({"base": {"commit": report.revision.commit, "described": report.revision.described},
                       "specs": [_json_spec(s) for s in report.specs],
                       "diagnostics": [to_json_obj(d) for d in report.diagnostics],
                       "exit_code": report.exit_code()}, indent=2, ensure_ascii=False) + "\n"


def _md(text: str) -> str:
    """Text inside a table cell: no pipes or line breaks to end it, no HTML."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\n", " "))


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`"


def _diagnostic_line(d: Diagnostic) -> str:
    where = d.file + (f":{d.line}" if d.line else "") + (f":{d.column}" if d.column else "")
    mark = "❌" if d.is_error else "⚠️"
    return f"{mark} {_code(where)} {_md(d.message)} [{d.code}]"


def _details(spec: SpecDiff) -> str:
    rows = [f"| {_md(c.label)} | {_md(number(c.base))} | {_md(number(c.head))}{relative(c)} |"
            for c in shown(spec)]
    body = [f"<details><summary><code>{_md(spec.path)}</code>: {_md(status_text(spec))}, {len(rows)} value"
            f"{'s' if len(rows) != 1 else ''}</summary>", ""]
    body += [_diagnostic_line(d) + "<br>" for d in spec.guardrails + spec.errors]
    if rows:
        body += ["", "| value | base | head |", "|---|---|---|"] + rows
    if _artifacts(spec.changes) and spec.status != "added":
        body += ["", "Artifacts changed: " + ", ".join(_code(a) for a in _artifacts(spec.changes))]
    return "\n".join(body + ["", "</details>", ""])


def render_markdown(report: DiffReport, budget: int = 65_535) -> str:
    """One pull-request comment: the marker, the totals, a row per job, then details while they fit."""
    moved = [s for s in report.specs if s.status != "unchanged"]
    failing = sum(1 for s in report.specs for g in s.guardrails if g.is_error)
    head = [MARKER, "### megatron-compile diff", "",
            f"Base {_code(report.revision.commit[:12])} ({_md(report.revision.described)}) → this change: "
            f"**{len(moved)} of {len(report.specs)} specs change** ({counts(report) or 'none'})"
            + (f"; **{failing} guardrail failure{'s' if failing != 1 else ''}**" if failing else "") + ".", ""]
    head += [_diagnostic_line(d) for d in report.diagnostics]
    tail_reserve = 200  # the closing note about what was left out
    text = "\n".join(head) + "\n"
    if moved:
        text += "| spec | change | what it does |\n|---|---|---|\n"
    shown_rows = 0
    for spec in moved:
        row = f"| {_code(spec.path)} | {_md(status_text(spec))} | {_md(summary(spec, '→'))} |\n"
        if len(text) + len(row) + tail_reserve > budget:
            break
        text += row
        shown_rows += 1
    if shown_rows < len(moved):
        text += f"\n… and {len(moved) - shown_rows} more specs change: run `megatron-compile diff` for all of them.\n"
        return text
    text += "\n"
    shown_details = 0
    for spec in moved:
        block = _details(spec)
        if len(text) + len(block) + tail_reserve > budget:
            break
        text += block
        shown_details += 1
    if shown_details < len(moved):
        text += (f"\nDetails of {len(moved) - shown_details} more specs left out (comment limit): run "
                 "`megatron-compile diff` locally.\n")
    return text
