"""plan/: a plan is a list of steps, each declaring its artifacts once; the platform picks the job's document."""

from __future__ import annotations

import pytest

from compiler.one_pass import compile_spec
from helpers import REPO

CASES = {
    "tp2": (("image", "train"), ["Dockerfile", "buildx.sh", "regctl.sh", "job.json", "launch.sh", "verify.sh", "plan.md"]),
    "tp2-dp2-slurm": (("image", "train"), ["Dockerfile", "buildx.sh", "regctl.sh", "job.sbatch", "launch.sh",
                                           "verify.sh", "plan.md"]),
    "tp2-dp2-k8s": (("image", "train"), ["Dockerfile", "buildx.sh", "regctl.sh", "trainjob.yaml", "launch.sh",
                                         "verify.sh", "plan.md"]),
    "pretrain-prepared": (("image", "prepare", "train"), ["Dockerfile", "buildx.sh", "regctl.sh", "prepare.sh",
                                                          "job-prepare.json", "verify-prepare.sh", "job.json",
                                                          "launch.sh", "verify.sh", "plan.md"]),
    "qwen3-0.6b": (("image", "download", "convert", "train", "export"),
                   ["Dockerfile", "buildx.sh", "download.sh", "job-download.json", "convert.sh", "job-convert.json",
                    "job.json", "launch.sh", "verify.sh", "export.sh", "job-export.json", "plan.md"]),
}


@pytest.mark.parametrize("stem", sorted(CASES))
def test_steps_and_their_artifacts(stem):
    kinds, artifacts = CASES[stem]
    result = compile_spec(str(REPO / "specs" / f"{stem}.yaml"), f"specs/{stem}.yaml")
    assert result.ok, result.diagnostics
    assert tuple(s.kind for s in result.plan.steps) == kinds
    assert list(result.plan.artifacts) == artifacts
    assert list(result.files) == artifacts, "render writes exactly the plan's artifacts, in its order"


def test_every_job_document_embeds_its_rendered_script():
    result = compile_spec(str(REPO / "specs" / "qwen3-0.6b.yaml"), "specs/qwen3-0.6b.yaml")
    import json

    for step in result.plan.steps:
        for artifact in step.artifacts:
            if artifact.embeds is not None and artifact.file.endswith(".json"):
                assert json.loads(result.files[artifact.file])["launch_command"] == result.files[artifact.embeds]


def test_a_term_that_costs_nothing_is_not_called_unmeasured():
    """plan.md marks an estimated communication term "[not measured]", but not a term that is zero
    because the layout has none of it (gpt-7b has no context parallelism)."""
    plan = (REPO / "generated" / "gpt-7b" / "plan.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in plan.splitlines() if line.startswith("| ")}
    assert "0.0 ms: no context parallelism" in rows["cp"]
    assert "[not measured]" in rows["tp"]


@pytest.mark.parametrize(("stem", "experts"), [("qwen3-30b-a3b", True), ("gpt-7b", False)])
def test_a_stage_row_shows_the_experts_host_time_where_there_is_one(stem, experts):
    """plan.md's per-stage row carries the experts' host time (timing.StageTime.moe_host_s), the largest host term of
    a MoE plan, beside its GPU and host figures; a dense plan has none to show."""
    result = compile_spec(str(REPO / "specs" / f"{stem}.yaml"), f"specs/{stem}.yaml")
    stage = result.facts.step_time.stages[0]
    row = next(line for line in result.files["plan.md"].splitlines() if line.startswith("| first stage"))
    assert (f"experts' host {stage.moe_host_s * 1e3:,.1f})" in row) is experts
    assert (stage.moe_host_s > 0) is experts and f"GPU {stage.gpu_s * 1e3:,.1f}, host {stage.host_s * 1e3:,.1f}" in row
