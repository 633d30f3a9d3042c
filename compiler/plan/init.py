"""init_from's steps: download (optional), convert before training, export (optional) after."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..check.facts import Facts
from ..megatron.runfiles import CHECKPOINT_DIR
from ..platform.aistudio import AIStudioJob
from .types import Artifact, InitPlan, Step


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of the config as canonical JSON: what convert.sh and download.sh compare on the storage."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def init_plan(spec: Any, facts: Facts) -> InitPlan | None:
    """The values of init_from's scripts, or None without init_from."""
    init = spec.init_from
    if init is None:
        return None
    assert facts.converted is not None and facts.hf_config is not None and facts.run_root is not None
    return InitPlan(
        hf_path=init.huggingface.path, config=init.huggingface.config, config_sha256=config_digest(facts.hf_config),
        modelscope=init.huggingface.modelscope or "", converted=facts.converted,
        checkpoint=f"{facts.run_root}/{CHECKPOINT_DIR}", export=init.export.path if init.export else "",
    )


def _job(spec: Any, image: str, mount: str, kind: str, gpus: int) -> AIStudioJob:
    return AIStudioJob(name=f"{spec.name}-{kind}"[:63], image=image, workers=1, gpus_per_worker=gpus,
                       worker_flavor=spec.resources.worker_flavor if gpus else None, rdma=False,
                       slow_training_detection=False, mount_path=mount)


def init_steps(spec: Any, plan: InitPlan | None, image: str, mount: str) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """(the steps before training, the steps after it). AIStudio gets a job document per step; the
    other engines run the scripts as jobs of their own (the report says how)."""
    if plan is None:
        return (), ()
    documents = spec.platform == "aistudio"

    def step(kind: str, gpus: int) -> Step:
        artifacts: tuple[Artifact, ...] = (Artifact(f"{kind}.sh", f"{kind}.sh.j2"),)
        if documents:
            artifacts += (Artifact(f"job-{kind}.json", None, embeds=f"{kind}.sh"),)
        return Step(kind=kind, artifacts=artifacts, init=plan, job=_job(spec, image, mount, kind, gpus) if documents
                    else None)

    before = ((step("download", 0),) if plan.modelscope else ()) + (step("convert", 1),)
    after = (step("export", 0),) if plan.export else ()
    return before, after
