"""The AIStudio training-job document: our field names, in one place.

AIStudio publishes no API for creating a training job, so job.json is our own document of what
the creation page asks for (workers, GPUs per worker, distributed framework, image, shared storage,
RDMA, slow-training detection, launch command). Its JSON Schema is generated from this model into
schemas/aistudio-job.schema.json.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .aistudio import GENERATED_NOTICE, JOB_DOCUMENT_VERSION
from .aistudio import JOB_SCHEMA_ID as JOB_SCHEMA_ID  # re-exported: commands/schema.py reads it here


class GeneratedBy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    tool: Literal["megatron-compile"] = "megatron-compile"
    version: str
    spec: str = Field(description="the spec this document was compiled from")
    spec_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    regenerate: str = Field(description="the command that regenerates this file")
    notice: Literal[GENERATED_NOTICE] = GENERATED_NOTICE  # type: ignore[valid-type]


class SharedStorage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    mount_path: str = Field(pattern=r"^/", description="the container path the writable shared storage is mounted at")
    read_only: bool = False


class AIStudioJobDocument(BaseModel):
    """One AIStudio training job, as the platform's creation page asks for it."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, defer_build=True,
        json_schema_extra={"$id": JOB_SCHEMA_ID, "title": "AIStudio training job (megatron-compile)"},
    )

    document_version: Literal[1] = JOB_DOCUMENT_VERSION
    generated_by: GeneratedBy
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    image: str = Field(description="the image reference the workers run; the one buildx.sh and regctl.sh push")
    workers: int = Field(ge=1)
    gpus_per_worker: int = Field(ge=0, le=16)  # 0: a CPU job (data preparation)
    worker_flavor: str | None = Field(description="the platform's worker flavor name; null lets the user pick")
    distributed_framework: Literal["single", "pytorch_ddp"]
    rdma: bool
    slow_training_detection: bool
    shared_storage: list[SharedStorage] = Field(min_length=1)
    launch_command: str = Field(description="the bash launch command, identical to launch.sh")
