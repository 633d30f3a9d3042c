"""The one pass: load -> validate -> plan -> render, with plain data between the stages."""

from __future__ import annotations

from typing import NamedTuple

from .compose import Override, compose
from .diagnostics import Diagnostic
from .spec import JobSpec
from .plan import Plan, build_plan
from .render import render
from .validate import validate


class CompileResult(NamedTuple):
    spec_file: str  # as diagnostics and headers print it
    diagnostics: list[Diagnostic]
    spec: JobSpec | None = None
    plan: Plan | None = None
    files: dict[str, str] | None = None  # artifact name -> text; None on errors or when not rendered
    bases: tuple[str, ...] = ()  # real paths of the base specs it extends

    @property
    def ok(self) -> bool:
        return self.plan is not None


def compile_spec(path: str, display: str, *, overrides: tuple[Override, ...] = (),
                 render_files: bool = True) -> CompileResult:
    """Compile one spec file (with its bases and --set overrides); plan and render run only when
    validation found no errors."""
    composed = compose(path, display, overrides)
    bases = tuple(composed.bases)
    diags = composed.diagnostics
    if composed.doc is None:
        return CompileResult(display, diags, bases=bases)
    spec, more = validate(composed.doc)
    diags = diags + more
    if spec is None:
        return CompileResult(display, diags, bases=bases)
    plan = build_plan(spec, display)
    files = render(plan) if render_files else None
    return CompileResult(display, diags, spec, plan, files, bases)
