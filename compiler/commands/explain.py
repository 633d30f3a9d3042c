"""What a spec resolves to, for people (--explain) and for CI gates (--explain --format json)."""

from __future__ import annotations

import json
from typing import Any

from ..megatron.parallel import RANK_ORDER
from ..megatron.runfiles import RUN_CHECKPOINT_DIR, EXIT_RECORD, RUNTIME_RECORD, TRAIN_LOG
from ..plan.types import Plan


def explain_data(plan: Plan) -> dict[str, Any]:
    """The plan's derived values as a JSON-ready dict with a stable key order."""
    par = plan.parallel
    launch = plan.launch
    log_dir = launch.log_dir_shown
    return {
        "spec": plan.header.spec,
        "name": plan.name,
        "image": plan.image.reference,
        "platform": plan.platform,
        "workers": plan.parallel.workers,
        "gpus_per_worker": plan.parallel.gpus_per_worker,
        "world_size": plan.world_size,
        "tensor_parallel": par.tensor,
        "pipeline_parallel": par.pipeline,
        "context_parallel": par.context,
        "expert_parallel": par.expert,
        "expert_tensor_parallel": par.expert_tensor,
        "data_parallel": par.data,
        "rank_order": "-".join(RANK_ORDER),
        "groups": {
            "tensor": plan.groups.tensor,
            "context": plan.groups.context,
            "data": plan.groups.data,
            "pipeline": plan.groups.pipeline,
        },
        "workers_ranks": [list(r) for r in plan.worker_ranks],
        "run_root": plan.run_root,
        "paths": {
            "train_log": f"{log_dir}/{TRAIN_LOG}",
            "runtime": f"{log_dir}/{RUNTIME_RECORD}",
            "exit_status": f"{log_dir}/{EXIT_RECORD}",
            "checkpoint": f"{plan.run_root}/{RUN_CHECKPOINT_DIR}",
        },
        **_pretrain_data(plan),
        **_timing_data(plan),
    }


def _timing_data(plan: Plan) -> dict[str, Any]:
    """The step-time model's figures and terms (megatron/timing.py)."""
    pre = plan.pretrain
    if pre is None:
        return {}
    step, total = pre.step_time, pre.training_time
    if step is None:
        return {"timing": None}
    return {"timing": {
        "seconds_per_iteration": step.seconds,
        "bound": step.bound,
        "validation_spread_seconds": list(step.spread_s),
        "validation_spread_covers": step.spread_covers,
        "tokens_per_second": step.tokens_per_second,
        "tflops_per_gpu": step.tflops_per_gpu,
        "flops_per_iteration": step.flops,
        "train_iterations": None if total is None else total.iterations,
        "train_seconds": None if total is None else total.seconds,
        "gpu_hours": None if total is None else total.gpu_hours,
        "calibration": step.utilisation_source,
        "terms": [term._asdict() for term in step.terms],
        "stages": [stage._asdict() for stage in step.stages],  # first and last pipeline stage
        "gpu": pre.gpu,
    }, "stage_memory_mb": [peak._asdict() for peak in pre.stages], "cost": None if pre.cost is None else {
        "amount": pre.cost.amount, "currency": pre.cost.currency, "per_gpu_hour": pre.cost.per_gpu_hour,
        "gpu": pre.cost.gpu, "engine": pre.cost.engine, "date": pre.cost.date, "source": pre.cost.source,
        "where": pre.cost.where,
    }}


def _pretrain_data(plan: Plan) -> dict[str, Any]:
    pre = plan.pretrain
    if pre is None:
        return {}
    out: dict[str, Any] = {"train_iters": pre.train_iters, "num_microbatches": pre.num_microbatches,
                 "virtual_pipeline_parallel": pre.virtual_pipeline,
                 "schedule": None if pre.schedule is None else pre.schedule._asdict()}
    est = pre.estimate
    if est is None:
        return {**out, "memory_mb": None, "checkpoint_bytes": None}
    return {
        **out,
        "tokens_per_step": est.tokens_per_step,
        "parameters": {"total": est.parameters_total, "most_loaded_rank": est.parameters_most_loaded_rank},
        "memory_mb": {
            "weights_and_optimizer": est.weights_and_optimizer_mb,
            "activations": est.activations_mb,
            "megatron_theoretical_total": est.megatron_theoretical_total_mb,
            "position_embeddings": est.position_embeddings_mb,
            "attention_buffer": est.attention_buffer_mb,
            "layer_activations": est.layer_activations_mb,
            "loss": est.loss_mb,
            "peak": est.peak_mb,
        },
        "peak_at": est.peak_at,
        "attention": est.attention,
        "not_measured": list(est.not_measured),
        "gpu_memory_gb": est.gpu_memory_gb,
        "peak_fraction_of_gpu": est.peak_fraction_of_gpu,
        "checkpoint_bytes": {
            "per_save": est.checkpoint_bytes_per_save,
            "saves": est.checkpoint_saves,
            "retained": est.checkpoint_bytes_retained,
        },
        "storage_bytes": {
            "checkpoints": est.checkpoint_bytes_retained,
            "logs": est.log_bytes,
            "tensorboard": est.tensorboard_bytes,
            "total": est.storage_bytes,
        },
    }


def explain_text(plan: Plan) -> str:
    """The plan's report (the same tables as plan.md) as aligned text."""
    lines = [f"{plan.header.spec}: {plan.name}"]
    for section in plan.report:
        lines.append(f"  {section.title}")
        width = max(len(label) for label, _ in section.rows)
        for label, value in section.rows:
            lines.append(f"    {label:<{width}}  {value}")
    return "\n".join(lines) + "\n"


def explain_json(plans: list[Plan], diagnostics: list[dict[str, Any]]) -> str:
    """One JSON document of one shape, whatever was found: {"specs": [...], "diagnostics": [...]}."""
    document = {"specs": [explain_data(p) for p in plans], "diagnostics": diagnostics}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
