"""What a spec resolves to, for people (--explain) and for CI gates (--explain --format json)."""

from __future__ import annotations

import json

from .plan import Plan


def explain_data(plan: Plan) -> dict:
    """The plan's derived values as a JSON-ready dict with a stable key order."""
    par = plan.parallel
    launch = plan.launch
    log_dir = launch.log_dir.as_text().replace("$RUN_ROOT", plan.run_root)
    return {
        "spec": plan.header.spec,
        "name": plan.name,
        "image": plan.image.reference,
        "workers": plan.job.workers,
        "gpus_per_worker": plan.job.gpus_per_worker,
        "world_size": plan.world_size,
        "tensor_parallel": par.tensor,
        "pipeline_parallel": par.pipeline,
        "context_parallel": par.context,
        "expert_parallel": par.expert,
        "expert_tensor_parallel": par.expert_tensor,
        "data_parallel": par.data,
        "rank_order": "tp-cp-ep-dp-pp",
        "groups": {
            "tensor": par.layout.tensor,
            "context": par.layout.context,
            "data": par.layout.data,
            "pipeline": par.layout.pipeline,
        },
        "workers_ranks": [list(r) for r in par.worker_ranks],
        "run_root": plan.run_root,
        "paths": {
            "train_log": f"{log_dir}/train.log",
            "runtime": f"{log_dir}/runtime.txt",
            "exit_status": f"{log_dir}/exit_status",
            "checkpoint": f"{plan.run_root}/ckpt",
        },
    }


def _groups(groups: list[list[int]]) -> str:
    return " ".join("[" + ",".join(str(r) for r in g) + "]" for g in groups)


def explain_text(plan: Plan) -> str:
    """A short human report of explain_data."""
    d = explain_data(plan)
    lines = [
        f"{d['spec']}: {d['name']}",
        f"  image            {d['image']}",
        f"  world size       {d['world_size']} = workers {d['workers']} × gpus_per_worker {d['gpus_per_worker']}",
        f"  parallelism      tensor {d['tensor_parallel']}, pipeline {d['pipeline_parallel']}, "
        f"context {d['context_parallel']}, expert {d['expert_parallel']} (expert_tensor {d['expert_tensor_parallel']})",
        f"  data parallel    {d['data_parallel']} = {d['world_size']} / (tensor {d['tensor_parallel']} × pipeline "
        f"{d['pipeline_parallel']} × context {d['context_parallel']})",
        f"  rank order       {d['rank_order']}",
    ]
    for name, groups in d["groups"].items():
        lines.append(f"  {name + ' groups':<16} {_groups(groups)}")
    for index, ranks in enumerate(d["workers_ranks"]):
        lines.append(f"  worker {index:<9} ranks {','.join(str(r) for r in ranks)}")
    lines.append(f"  run root         {d['run_root']}")
    for name, path in d["paths"].items():
        lines.append(f"  {name:<16} {path}")
    return "\n".join(lines) + "\n"


def explain_json(plans: list[Plan]) -> str:
    """One JSON document: an object for one spec, a list for several."""
    data = [explain_data(p) for p in plans]
    return json.dumps(data[0] if len(data) == 1 else data, indent=2, ensure_ascii=False) + "\n"
