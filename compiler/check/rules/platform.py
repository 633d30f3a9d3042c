"""Engine rules: the engine's section is there when the spec runs on it and only then, and its values
are ones the engine accepts (each adapter's own `check`: Slurm's time format and mounts, Kubernetes names)."""

from __future__ import annotations

from typing import Iterator

from ...diagnostics import Diagnostic, Severity
from ...platform.engine import EngineFacts
from ...platform.engines import engine_sections
from ..context import RuleContext


def check_platform_sections(ctx: RuleContext) -> Iterator[Diagnostic]:
    platform = ctx.facts.platform
    for name, section in engine_sections():
        given = ctx.sections.get(section) is not None
        if name == platform and not given:
            yield ctx.locate("platform-section", f"platform: {platform} needs a {section} section", ("platform",),
                             hint=f"add `{section}:` with the job's {section} settings (README: platforms)")
        elif name != platform and given and ctx.doc.data.get(section) is not None:
            yield ctx.locate("platform-section", f"{section} is set, but the spec runs on {platform}", (section,),
                             key=True, hint=f"set `platform: {name}`, or remove the {section} section")


def check_engine(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The spec's engine's own rules, on its section when that validated."""
    engine = ctx.facts.engine
    if engine.section is None or engine.section not in ctx.sections:
        return
    res = ctx.sections.get("resources")
    facts = EngineFacts(name=ctx.facts.name, mount_path=ctx.facts.mount_path,
                        worker_flavor=None if res is None else res.worker_flavor, resources_valid=res is not None)
    for finding in engine.check(ctx.sections[engine.section], facts):
        yield ctx.locate(finding.code, finding.message, finding.key_path, hint=finding.hint,
                         severity=Severity(finding.severity))
