"""The AIStudio job document (job.json) as plain data, built from the plan.

Its field names and order are those of aistudio.AIStudioJob, which owns them and generates
schemas/aistudio-job.schema.json; tests assert the order and validate every job.json against the
schema. Plain dicts here keep pydantic's model machinery off the compile path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .plan import Plan

JOB_SCHEMA_ID = "aistudio-job.schema.json"
JOB_DOCUMENT_VERSION = 1
GENERATED_NOTICE = "Generated file: do not edit; change the spec and regenerate."


def job_document(plan: Plan, launch_text: str) -> dict:
    """The AIStudio job document for a plan and its rendered launch command."""
    h, job = plan.header, plan.job
    generated_by = {"tool": "megatron-compile", "version": h.version, "spec": h.spec, "spec_sha256": h.spec_sha256,
                    "regenerate": h.regenerate, "notice": GENERATED_NOTICE}
    return {
        "document_version": JOB_DOCUMENT_VERSION, "generated_by": generated_by,
        "name": job.name, "image": job.image, "workers": job.workers, "gpus_per_worker": job.gpus_per_worker,
        "worker_flavor": job.worker_flavor, "distributed_framework": job.distributed_framework, "rdma": job.rdma,
        "slow_training_detection": job.slow_training_detection,
        "shared_storage": [{"mount_path": job.mount_path, "read_only": False}], "launch_command": launch_text,
    }
