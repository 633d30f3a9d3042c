"""Stop rules: a stop must be able to save before the engine kills the job (docs/stop-resume.md)."""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron.stop import FIRST_SAVE_S, GRACE_MARGIN_S, START_MARGIN_S, minutes
from ..context import RuleContext


def _where(ctx: RuleContext, field: str, engine_path: tuple[str, ...] | None) -> tuple[str, ...]:
    """The spec's own stop field when it was written, else the engine's setting, else the stop section."""
    if ctx.doc.value_location(("stop", field)) is not None:
        return ("stop", field)
    return engine_path or ("stop",)


def check_stop(ctx: RuleContext) -> Iterator[Diagnostic]:
    times = ctx.facts.stop
    if times is None:
        return
    step = f"one iteration {minutes(times.step_s)} + " if times.step_s is not None else ""
    need = f"{step}a save {minutes(times.write_s)} + {FIRST_SAVE_S} s to start saving + {GRACE_MARGIN_S} s to exit"
    if times.grace_short:
        yield ctx.locate(
            "stop-grace-short", f"the engine's grace after its stop signal ({times.grace_s} s, {times.grace_source}) "
            f"is shorter than a stop needs to save ({times.needed_grace_s} s: {need}): a stop loses the work since "
            "the last save", _where(ctx, "grace_seconds", None), severity=Severity.WARNING,
            hint=f"give the job a grace of at least {times.needed_grace_s} s, or a faster storage (stop.write_gb_s)")
    if times.exit_duration_mins is not None and times.exit_duration_mins < 1 and times.time_limit_s is not None:
        yield ctx.locate(
            "stop-time-limit-short", f"the time limit ({minutes(times.time_limit_s)}, {times.limit_source}) leaves no "
            f"whole minute of training after {START_MARGIN_S} s to start, {need} to stop",
            _where(ctx, "time_limit_minutes", None),
            hint=f"a limit of at least {minutes(times.time_limit_s + 60 * (1 - times.exit_duration_mins))}")


def check_stop_limit(ctx: RuleContext) -> Iterator[Diagnostic]:
    section, adapter = ctx.sections.get("stop"), ctx.facts.engine
    if section is None or section.time_limit_minutes is None or adapter.limit_field is None:
        return
    field = f"{adapter.section}.{adapter.limit_field}"
    yield ctx.locate("stop-time-limit-engine", f"stop.time_limit_minutes is for an engine without a time limit "
                     f"of its own; {adapter.title}'s is {field}, which the job document sets",
                     ("stop", "time_limit_minutes"), hint=f"remove it and set {field}")
