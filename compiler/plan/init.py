"""init_from's steps: download (optional), convert before training, export (optional) after."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Callable

from ..check.facts import Facts
from ..megatron.runfiles import RUN_CHECKPOINT_DIR
from ..platform.engine import StepRequest
from ..schema.records import JobSpec
from .types import InitPlan, Step


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of the config as canonical JSON: what convert.sh and download.sh compare on the storage."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def init_plan(spec: JobSpec, facts: Facts) -> InitPlan | None:
    """The values of init_from's scripts, or None without init_from."""
    init = spec.init_from
    if init is None:
        return None
    assert facts.converted is not None and facts.hf_config is not None and facts.run_root is not None
    size = facts.convert
    return InitPlan(
        hf_path=init.huggingface.path, config=init.huggingface.config, config_sha256=config_digest(facts.hf_config),
        modelscope=init.huggingface.modelscope or "", converted=facts.converted,
        checkpoint=f"{facts.run_root}/{RUN_CHECKPOINT_DIR}", export=init.export.path if init.export else "",
        **({} if size is None else {"convert_gpus": size.gpus, "convert_tensor": size.tensor,
                                    "convert_expert": size.expert, "convert_gib_per_gpu": math.ceil(size.gib_per_gpu)}),
        export_gib=math.ceil(facts.export_gib or 0.0),
    )


def init_steps(spec: JobSpec, plan: InitPlan | None, run_root: str, mount: str,
               engine_step: Callable[[StepRequest, InitPlan], Step]) -> tuple[tuple[Step, ...], tuple[Step, ...]]:
    """(the steps before training, the steps after it), each a job of the spec's engine on one node
    (`engine_step` makes the step of a request): convert on the GPUs the model needs (facts.convert),
    download and export on CPUs."""
    if plan is None:
        return (), ()

    def step(kind: str, gpus: int) -> Step:
        request = StepRequest(kind=kind, name=f"{spec.name}-{kind}"[:63], nodes=1, gpus_per_node=gpus,
                              flavor=spec.resources.worker_flavor if gpus else None, rdma=False,
                              slow_training_detection=False, run_root=run_root, mount_path=mount,
                              script=f"{kind}.sh")
        return engine_step(request, plan)

    before = ((step("download", 0),) if plan.modelscope else ()) + (step("convert", max(plan.convert_gpus, 1)),)
    after = (step("export", 0),) if plan.export else ()
    return before, after
