"""AIStudio: what the platform allows and how a step becomes its job document (the engine adapter).

The job document (job.json) is our own description of what AIStudio's creation page asks for; its
field names and order are those of aistudio_schema.AIStudioJob, which generates
schemas/aistudio-job.schema.json (tests validate every job.json against it). It is built as plain
dicts so that pydantic's model machinery stays off the compile path.
"""

from __future__ import annotations

from typing import Any, Final, Iterator

from ..tuples import NamedTuple
from .engine import (DEFAULT_MASTER_PORT, Document, DocumentFile, EngineFacts, EnvParam, Finding, NodeEnv, StepRequest,
                     step_document)
from ..schema.records import JobSpec
from .images import ImagePins

# AIStudio refuses these mount points and anything below them.
RESERVED_MOUNTS = (
    "/bios", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/home", "/datadisk",
)
# Public data sets, mounted read-only in every job.
READ_ONLY_DATA = "/infini-data"

JOB_SCHEMA_ID = "aistudio-job.schema.json"
JOB_DOCUMENT_VERSION: Final = 1
GENERATED_NOTICE = "Generated file: do not edit; change the spec and regenerate."
JOB_FILE = "job.json"

NODE_ENV = NodeEnv(
    note=("The AIStudio launch command: paste it into the job's start command (job.json carries it too).",),
    comment=(
        "AIStudio's PyTorch DDP framework injects the worker count as WORLD_SIZE and this worker's index",
        "as RANK. They are read into names of our own and checked against the spec; torchrun gives each",
        "process its own WORLD_SIZE and RANK, so the platform's values are not passed on.",
    ),
    shown_names=(),
    nnodes=EnvParam("WORLD_SIZE", "AIStudio WORLD_SIZE is required", True),
    node_rank=EnvParam("RANK", "AIStudio RANK is required", True),
    master_addr=EnvParam("MASTER_ADDR", "AIStudio MASTER_ADDR is required", True),
    master_port=EnvParam("MASTER_PORT", str(DEFAULT_MASTER_PORT), False),
    nodes_named="WORLD_SIZE", rank_named="RANK", unit="worker", unset=("WORLD_SIZE", "RANK"),
    task_count=None, task_count_shown=None, task_hint="",
)


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

    def describe(self) -> str:
        """Workers, GPUs and flavor, for plan.md's Steps section."""
        text = (f"{self.workers} worker(s) × {self.gpus_per_worker} GPU(s)" if self.gpus_per_worker
                else "1 worker, CPUs only")
        return text + (f", flavor {self.worker_flavor}" if self.worker_flavor else "")


class AIStudio:
    """The AIStudio engine adapter (engine.Engine)."""

    name: str = "aistudio"
    title: str = "AIStudio"
    section: str | None = None  # resources and storage are AIStudio's own terms: no section of its own
    node_env: NodeEnv = NODE_ENV
    read_only_data: tuple[str, ...] = (READ_ONLY_DATA,)
    reserved_mounts: tuple[str, ...] = RESERVED_MOUNTS
    watches_step_time: bool = True
    limit_field: str | None = None
    sets_grace: bool = False
    stop_note: str = ("AIStudio's job document has no stop signal, grace period or time limit setting that this "
                      "compiler knows of: launch.sh saves on the SIGTERM it gets, within whatever grace the "
                      "platform gives (stop.grace_seconds states it, and is then checked); stop.time_limit_minutes "
                      "gives a limit for --exit-duration-in-mins")

    def time_limit_seconds(self, section: Any) -> int | None:
        return None

    def document(self, kind: str) -> DocumentFile:
        return step_document(JOB_FILE, kind, None)

    def job(self, request: StepRequest, spec: JobSpec, pins: ImagePins) -> AIStudioJob:
        return AIStudioJob(
            name=request.name, image=pins.job_image, workers=request.nodes, gpus_per_worker=request.gpus_per_node,
            worker_flavor=request.flavor, rdma=request.rdma, slow_training_detection=request.slow_training_detection,
            mount_path=request.mount_path,
        )

    def render(self, job: AIStudioJob, header: tuple[str, ...], generated_by: dict[str, str],
               script: str) -> Document:
        return Document("json", (), job_document(job, generated_by, script))

    def check(self, section: Any, facts: EngineFacts) -> Iterator[Finding]:
        return iter(())


ENGINE = AIStudio()


def job_document(job: AIStudioJob, generated_by: dict[str, str], launch_text: str) -> dict[str, Any]:
    """The AIStudio job document for a job, the header fields and its rendered launch command."""
    return {
        "document_version": JOB_DOCUMENT_VERSION,
        "generated_by": {**generated_by, "notice": GENERATED_NOTICE},
        "name": job.name, "image": job.image, "workers": job.workers, "gpus_per_worker": job.gpus_per_worker,
        "worker_flavor": job.worker_flavor, "distributed_framework": job.distributed_framework, "rdma": job.rdma,
        "slow_training_detection": job.slow_training_detection,
        "shared_storage": [{"mount_path": job.mount_path, "read_only": False}], "launch_command": launch_text,
    }
