"""The one pass: load -> validate -> plan -> render, with plain data between the stages."""

from __future__ import annotations

from dataclasses import dataclass, field

from .diagnostics import Diagnostic
from .models import JobSpec
from .plan import Plan, build_plan
from .render import render
from .source import load_file
from .validate import validate


@dataclass(frozen=True)
class CompileResult:
    spec_file: str  # as diagnostics and headers print it
    diagnostics: list[Diagnostic] = field(default_factory=list)
    spec: JobSpec | None = None
    plan: Plan | None = None
    files: dict[str, str] = field(default_factory=dict)  # artifact name -> text; empty on errors

    @property
    def ok(self) -> bool:
        return self.plan is not None


def compile_spec(path: str, display: str, *, render_files: bool = True) -> CompileResult:
    """Compile one spec file; plan and render run only when validation found no errors."""
    doc, diags = load_file(path, display)
    if doc is None:
        return CompileResult(display, diags)
    spec, more = validate(doc)
    diags = diags + more
    if spec is None:
        return CompileResult(display, diags)
    plan = build_plan(spec, display)
    files = render(plan) if render_files else {}
    return CompileResult(display, diags, spec, plan, files)
