"""The one pass over one spec: load -> check -> plan -> render, with plain data between the stages.

Importing this module imports every stage (YAML, the validator, Jinja); the pydantic model classes
load only for a compile with --set (schema/models.py), as a validated spec is made of records.
"""

from __future__ import annotations

from typing import Any

from .tuples import NamedTuple
from .check.facts import Facts
from .check.pins import check_pins
from .check.validate import check
from .text import is_utf8, shown
from .diagnostics import Diagnostic, make_error
from .load.attachments import hf_config
from .load.compose import compose
from .load.override import Override
from .load.repoconfig import GUARDRAILS, PRICES, load_configs
from .load.source import SourceDoc
from .plan.build import build_plan
from .plan.guardrails import NONE, Guardrails, absolute, guardrails_of
from .plan.types import Plan
from .render.render import render
from .platform.prices import price_table
from .schema.records import JobSpec


class CompileResult(NamedTuple):
    spec_file: str  # as diagnostics and headers print it
    diagnostics: list[Diagnostic]
    spec: JobSpec | None = None  # the validated spec
    plan: Plan | None = None
    files: dict[str, str] | None = None  # artifact name -> text; None on errors or when not rendered
    bases: tuple[str, ...] = ()  # real paths of the base specs it extends
    facts: Facts | None = None
    doc: SourceDoc | None = None  # the composed spec, with the location of every value
    guardrails: Guardrails = NONE  # the repository's thresholds (plan/guardrails.py)

    @property
    def ok(self) -> bool:
        return self.plan is not None


def _expects_string(path: tuple[str | int, ...]) -> bool:
    """Whether the spec field at `path` takes a string (typed --set values). The pydantic models
    are imported only for a compile with --set."""
    from .schema.models import annotation_at  # deferred: --set only: the type an overridden key takes comes from the models

    return annotation_at(path) is str


def compile_spec(path: str, display: str, *, overrides: tuple[Override, ...] = (), render_files: bool = True,
                 recorded: str | None = None, regenerate: str | None = None, require_lock: bool = False) -> CompileResult:
    """Compile one spec file (with its bases and --set overrides); plan and render run only when
    checking found no errors."""
    if not (is_utf8(path) and is_utf8(display)):
        where = shown(display)
        return CompileResult(where, [make_error(
            "spec-path", f"the spec's path {where} holds a byte that is not UTF-8: every generated file names its spec, "
            "in text", hint="rename the file and its directories in UTF-8", file=where, line=1, column=1)])
    composed = compose(path, display, overrides, _expects_string)
    bases = tuple(composed.bases)
    diags = composed.diagnostics
    if composed.doc is None:
        return CompileResult(display, diags, bases=bases)
    config, config_diags = hf_config(composed.doc, path)
    diags = diags + config_diags
    checked = check(composed.doc, config)
    diags = diags + checked.diagnostics
    if checked.spec is None or any(d.is_error for d in diags):
        return CompileResult(display, diags, bases=bases, facts=checked.facts)
    lock, pin_diags = check_pins(composed.doc, checked.spec, path, display, require=require_lock)
    if pin_diags:
        return CompileResult(display, diags + pin_diags, bases=bases, facts=checked.facts)

    (prices_doc, config_diags), (guards_doc, guard_file_diags) = load_configs(path, PRICES, GUARDRAILS)
    prices, price_diags = price_table(prices_doc)
    guards, guard_diags = guardrails_of(guards_doc)
    config_diags = config_diags + price_diags + guard_file_diags + guard_diags
    if config_diags:
        return CompileResult(display, diags + config_diags, bases=bases, facts=checked.facts)
    plan = build_plan(checked.spec, checked.facts, recorded or display, regenerate, lock, prices)
    diags = diags + absolute(guards, plan.pretrain, composed.doc, display)
    files = render(plan) if render_files else None
    return CompileResult(display, diags, checked.spec, plan, files, bases, checked.facts, composed.doc, guards)
