"""Platform rules: each engine's section is there when the spec runs on it, and its values are ones
the engine accepts (Slurm's time format and mounts, Kubernetes names)."""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic
from ...platform import kubernetes, slurm
from ..context import RuleContext

ENGINE_SECTIONS = ("slurm", "kubernetes")


def check_platform_sections(ctx: RuleContext) -> Iterator[Diagnostic]:
    platform = ctx.facts.platform
    for section in ENGINE_SECTIONS:
        given = ctx.sections.get(section) is not None
        if section == platform and not given:
            yield ctx.locate("platform-section", f"platform: {platform} needs a {section} section", ("platform",),
                             hint=f"add `{section}:` with the job's {section} settings (README: platforms)")
        elif section != platform and given and ctx.doc.data.get(section) is not None:
            yield ctx.locate("platform-section", f"{section} is set, but the spec runs on {platform}", (section,),
                             key=True, hint=f"set `platform: {section}`, or remove the {section} section")


def check_slurm(ctx: RuleContext) -> Iterator[Diagnostic]:
    if ctx.facts.platform != slurm.PLATFORM:
        return
    job: Any = ctx.sections["slurm"]
    if not slurm.TIME_LIMIT.fullmatch(job.time_limit):
        yield ctx.locate("slurm-time-limit", f"slurm.time_limit ({job.time_limit}) is not a time sbatch reads",
                         ("slurm", "time_limit"),
                         hint="write minutes, hours:minutes:seconds or days-hours:minutes:seconds, e.g. 04:00:00")
    mount = ctx.facts.mount_path
    if mount is not None and mount not in slurm.mount_destinations(list(job.container.mounts)):
        yield ctx.locate("slurm-mount", f"slurm.container.mounts does not mount the shared storage at "
                         f"storage.mount_path ({mount}), so the run root would be lost with the container",
                         ("slurm", "container"), hint=f"add a mount SRC:{mount}, SRC being the cluster's shared file system")


def check_kubernetes(ctx: RuleContext) -> Iterator[Diagnostic]:
    if ctx.facts.platform != kubernetes.PLATFORM:
        return
    job: Any = ctx.sections["kubernetes"]
    name = ctx.facts.name
    if name is not None and not kubernetes.is_label(name):
        yield ctx.locate("kubernetes-name", f"name ({name}) is not an RFC 1123 label, which the TrainJob's "
                         "name and its pods' names must be", ("name",), hint="end it with a letter or digit")
    checks = (("namespace", job.namespace, kubernetes.is_label, "an RFC 1123 label"),
              ("runtime", job.runtime, kubernetes.is_subdomain, "an RFC 1123 subdomain"),
              ("queue", job.queue, kubernetes.is_label_value, "a label value"))
    for field, value, ok, what in checks:
        if value is not None and not ok(value):
            yield ctx.locate("kubernetes-name", f"kubernetes.{field} ({value}) is not {what}",
                             ("kubernetes", field), hint="lowercase letters, digits and '-', alphanumeric at both ends")
    if not kubernetes.is_subdomain(job.volume.claim):
        yield ctx.locate("kubernetes-name", f"kubernetes.volume.claim ({job.volume.claim}) is not an RFC 1123 "
                         "subdomain, which a PersistentVolumeClaim's name is", ("kubernetes", "volume", "claim"),
                         hint="lowercase letters, digits, '-' and '.'")
