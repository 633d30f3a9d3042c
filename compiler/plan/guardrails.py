"""Guardrails: a repository's thresholds (`.megatron-compile/guardrails.yaml`) on what a job costs
and how full it fills a GPU, and on how much a change adds, turned into located diagnostics.

    cost: {warn: 20000, fail: 100000, currency: USD}   # the run's cost (platform/prices.py)
    memory_fraction: {warn: 0.90, fail: 0.95}          # the peak estimate over the GPU's memory
    gpu_hours_increase_percent: {warn: 10, fail: 50}   # against the base revision (`diff` only)

A compile (and so `--check`) applies the absolute ones; `megatron-compile diff` also the increase.
Each diagnostic points at the spec's line a fix would change and names the threshold's line.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from ..diagnostics import Diagnostic, Severity, make_error
from ..load.source import SourceDoc

KINDS = ("cost", "memory_fraction", "gpu_hours_increase_percent")
LEVELS = ("warn", "fail")


class Threshold(NamedTuple):
    kind: str
    level: str  # warn | fail
    value: float
    where: str  # guardrails.yaml:LINE


class Guardrails(NamedTuple):
    thresholds: tuple[Threshold, ...] = ()
    currency: str | None = None  # cost thresholds are in this currency

    def of(self, kind: str) -> tuple[Threshold, ...]:
        """The thresholds of a kind, the failing one first."""
        return tuple(sorted((t for t in self.thresholds if t.kind == kind), key=lambda t: t.level != "fail"))


NONE = Guardrails()


def _file_error(doc: SourceDoc, path: tuple[str | int, ...], message: str) -> Diagnostic:
    loc = doc.value_location(path)
    where: dict[str, Any] = {"file": doc.file}
    if loc is not None:
        where.update(line=loc.span.line, column=loc.span.column)
    return make_error("guardrails-file", message, key_path=path, hint="keys: cost {warn, fail, currency}, "
                      "memory_fraction {warn, fail}, gpu_hours_increase_percent {warn, fail}", **where)


def guardrails_of(doc: SourceDoc | None) -> tuple[Guardrails, list[Diagnostic]]:
    """The thresholds of a guardrails file (NONE without one), each malformed entry a located error."""
    if doc is None:
        return NONE, []
    if not isinstance(doc.data, dict):
        return NONE, [_file_error(doc, (), "a guardrails file is a mapping")]
    found: list[Threshold] = []
    diags: list[Diagnostic] = []
    currency = None
    for kind, entry in doc.data.items():
        if kind not in KINDS:
            diags.append(_file_error(doc, (kind,), f"unknown guardrail {kind!r}"))
            continue
        if not isinstance(entry, dict):
            diags.append(_file_error(doc, (kind,), f"{kind}: expected a mapping of warn and fail"))
            continue
        for level, value in entry.items():
            if kind == "cost" and level == "currency" and isinstance(value, str):
                currency = value
                continue
            if level not in LEVELS:
                diags.append(_file_error(doc, (kind, level), f"{kind}.{level}: expected warn or fail"))
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                diags.append(_file_error(doc, (kind, level), f"{kind}.{level} must be a non-negative number"))
                continue
            loc = doc.value_location((kind, level))
            found.append(Threshold(kind, level, float(value), f"{doc.file}:{loc.span.line}" if loc else doc.file))
    if any(t.kind == "cost" for t in found) and currency is None:
        diags.append(_file_error(doc, ("cost",), "cost: give the thresholds' currency (cost.currency: USD)"))
    return Guardrails(tuple(found), currency), diags


def _at(doc: SourceDoc | None, display: str, paths: tuple[tuple[str, ...], ...]) -> dict[str, Any]:
    if doc is not None:
        for path in paths:
            if path in doc.values:
                loc = doc.values[path]
                return {"file": loc.file, "line": loc.span.line, "column": loc.span.column, "key_path": path}
    return {"file": display}


def _crossed(thresholds: tuple[Threshold, ...], value: float) -> Threshold | None:
    return next((t for t in thresholds if value > t.value), None)


def _diagnostic(code: str, threshold: Threshold, message: str, hint: str, where: dict[str, Any]) -> Diagnostic:
    severity = Severity.ERROR if threshold.level == "fail" else Severity.WARNING
    return Diagnostic(code=code, severity=severity, message=f"{message} ({threshold.where}: {threshold.level} above "
                      f"{threshold.value:g})", hint=hint, **where)


COST_KEYS = (("training", "train_iters"), ("training", "train_samples"), ("resources", "workers"))
MEMORY_KEYS = (("training", "batch", "micro"), ("parallelism", "tensor"), ("resources", "gpus_per_worker"))


def absolute(guards: Guardrails, pretrain: Any, doc: SourceDoc | None, display: str) -> list[Diagnostic]:
    """The cost and memory thresholds a plan's training step crosses."""
    if pretrain is None or not guards.thresholds:
        return []
    diags = []
    cost = pretrain.cost
    crossed = None if cost is None else _crossed(guards.of("cost"), cost.amount)
    if cost is not None and crossed is not None:
        if guards.currency is not None and guards.currency != cost.currency:
            diags.append(make_error("guardrail-cost", f"the cost is in {cost.currency} but the guardrail in "
                                    f"{guards.currency}", hint="give the price rows and cost.currency one currency",
                                    **_at(doc, display, COST_KEYS)))
        else:
            diags.append(_diagnostic("guardrail-cost", crossed, f"the run costs {cost.amount:,.0f} {cost.currency}",
                                     "fewer iterations or GPUs, or raise the guardrail in review",
                                     _at(doc, display, COST_KEYS)))
    est = pretrain.estimate
    fraction = None if est is None else est.peak_fraction_of_gpu
    crossed = None if fraction is None else _crossed(guards.of("memory_fraction"), fraction)
    if fraction is not None and crossed is not None:
        diags.append(_diagnostic("guardrail-memory", crossed, f"the peak memory estimate is {fraction:.1%} of the "
                                 "GPU", "a smaller training.batch.micro, recompute, or more tensor or pipeline "
                                 "parallelism", _at(doc, display, MEMORY_KEYS)))
    return diags


def increase(guards: Guardrails, base_hours: float | None, head_hours: float | None, doc: SourceDoc | None,
             display: str) -> list[Diagnostic]:
    """The GPU-hours increase threshold a change crosses, against the base revision's GPU-hours."""
    if base_hours is None or head_hours is None or base_hours <= 0:
        return []
    percent = (head_hours / base_hours - 1) * 100
    crossed = _crossed(guards.of("gpu_hours_increase_percent"), percent)
    if crossed is None:
        return []
    return [_diagnostic("guardrail-gpu-hours", crossed, f"GPU-hours rise {percent:+.1f} % ({base_hours:,.1f} -> "
                        f"{head_hours:,.1f})", "check the change is meant; the guardrail is there to make it "
                        "visible", _at(doc, display, COST_KEYS))]
