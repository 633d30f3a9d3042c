"""AIStudio: what the platform allows and how a training step becomes its job document.

The job document (job.json) is our own description of what AIStudio's creation page asks for; its
field names and order are those of aistudio_schema.AIStudioJob, which generates
schemas/aistudio-job.schema.json (tests validate every job.json against it). It is built as plain
dicts so that pydantic's model machinery stays off the compile path.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

PLATFORM = "aistudio"

# AIStudio refuses these mount points and anything below them.
RESERVED_MOUNTS = (
    "/bios", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/home", "/datadisk",
)
# Public data sets, mounted read-only in every job.
READ_ONLY_DATA = "/infini-data"

# Names the generated launch command sets or reads itself; a spec's env must not shadow them.
RESERVED_ENV = frozenset({
    "RUN_ROOT", "MEGATRON_ROOT", "MEGATRON_COMMIT", "PYTHONPATH", "PATH", "NNODES", "NODE_RANK",
    "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "EXPECTED_GPUS", "EXPECTED_NNODES", "LOG_DIR", "TRAIN_LOG",
})

JOB_SCHEMA_ID = "aistudio-job.schema.json"
JOB_DOCUMENT_VERSION: Final = 1
GENERATED_NOTICE = "Generated file: do not edit; change the spec and regenerate."
JOB_FILE = "job.json"


class AIStudioJob(NamedTuple):
    """What the job document says, as the plan derives it."""

    name: str
    image: str
    workers: int
    gpus_per_worker: int
    worker_flavor: str | None
    rdma: bool
    slow_training_detection: bool
    mount_path: str

    @property
    def distributed_framework(self) -> str:
        """The platform's framework choice: one worker runs `single`, several `pytorch_ddp`."""
        return "pytorch_ddp" if self.workers > 1 else "single"


def job_document(job: AIStudioJob, generated_by: dict[str, Any], launch_text: str) -> dict[str, Any]:
    """The AIStudio job document for a job, the header fields and its rendered launch command."""
    return {
        "document_version": JOB_DOCUMENT_VERSION,
        "generated_by": {**generated_by, "notice": GENERATED_NOTICE},
        "name": job.name, "image": job.image, "workers": job.workers, "gpus_per_worker": job.gpus_per_worker,
        "worker_flavor": job.worker_flavor, "distributed_framework": job.distributed_framework, "rdma": job.rdma,
        "slow_training_detection": job.slow_training_detection,
        "shared_storage": [{"mount_path": job.mount_path, "read_only": False}], "launch_command": launch_text,
    }
