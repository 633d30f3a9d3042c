"""SkyPilot: the task a step becomes (task.yaml), and how its nodes find each other (the engine adapter).

SkyPilot runs a task's `run:` script once on each of `num_nodes` nodes, in `resources.image_id`'s
container (`docker:` images), with SKYPILOT_NUM_NODES, SKYPILOT_NODE_RANK and SKYPILOT_NODE_IPS
(one address a line, node 0's first) set (SkyPilot's docs: "Distributed Multi-Node Jobs"). The
shared storage is a bucket mounted at storage.mount_path (`file_mounts` with `mode: MOUNT_CACHED`
by default, which SkyPilot recommends for checkpoints). tests/fixtures/skypilot/ holds SkyPilot's
own task schema, which every generated task.yaml is validated against.
"""

from __future__ import annotations

from typing import Any, Iterator

from ..tuples import NamedTuple
from .engine import (DEFAULT_MASTER_PORT, Document, DocumentFile, EngineFacts, EnvParam, Finding, NodeEnv, StepRequest,
                     nodes_and_gpus, step_document)
from ..schema.records import JobSpec
from .images import ImagePins

TASK_FILE = "task.yaml"
TASK_TEMPLATE = "task.yaml.j2"

NODE_ENV = NodeEnv(
    note=("The SkyPilot launch command: task.yaml's run section carries it and SkyPilot runs it on every node,",
          "in the image."),
    comment=(
        "SkyPilot runs task.yaml's run section once on every node, with SKYPILOT_NUM_NODES (num_nodes),",
        "SKYPILOT_NODE_RANK (this node's index) and SKYPILOT_NODE_IPS (one address a line, node 0's",
        "first); the run section exports node 0's address as MASTER_ADDR, and MASTER_PORT.",
    ),
    shown_names=(("NODES_FROM", "SKYPILOT_NUM_NODES"), ("RANK_FROM", "SKYPILOT_NODE_RANK")),
    nnodes=EnvParam("SKYPILOT_NUM_NODES", "SkyPilot SKYPILOT_NUM_NODES is required: run this from task.yaml", True),
    node_rank=EnvParam("SKYPILOT_NODE_RANK", "SkyPilot SKYPILOT_NODE_RANK is required: run this from task.yaml",
                       True),
    master_addr=EnvParam("MASTER_ADDR", "task.yaml exports MASTER_ADDR", True),
    master_port=EnvParam("MASTER_PORT", str(DEFAULT_MASTER_PORT), False),
    nodes_named="$NODES_FROM", rank_named="$RANK_FROM", unit="node", unset=(),
    task_count=None, task_count_shown=None, task_hint="",
)


class SkyPilotJob(NamedTuple):
    """What task.yaml (or a step's task-KIND.yaml) says, as the plan derives it."""

    file: str
    name: str
    nodes: int
    accelerators: str  # GPU:COUNT, "" for a step on CPUs
    image_id: str  # docker:REFERENCE
    cloud: str | None
    mount_path: str
    bucket: str
    store: str | None
    mode: str
    rendezvous: bool  # the training step: node 0's address is exported for torchrun's rendezvous
    default_master_port: int
    script: str

    @property
    def has_gpus(self) -> bool:
        return bool(self.accelerators)

    @property
    def has_cloud(self) -> bool:
        return self.cloud is not None

    @property
    def has_store(self) -> bool:
        return self.store is not None

    def describe(self) -> str:
        """Nodes and GPUs, for plan.md's Steps section."""
        return nodes_and_gpus(self.nodes, self.accelerators)


class SkyPilot:
    """The SkyPilot engine adapter (engine.Engine)."""

    name: str = "skypilot"
    title: str = "SkyPilot"
    section: str | None = "skypilot"
    node_env: NodeEnv = NODE_ENV
    read_only_data: tuple[str, ...] = ()
    reserved_mounts: tuple[str, ...] = ()
    watches_step_time: bool = False
    limit_field: str | None = None
    sets_grace: bool = False
    stop_note: str = ("task.yaml has no stop grace or time limit setting: a managed job (`sky jobs launch`) "
                      "recovers a preempted cluster and runs run: again, which resumes from the save on the "
                      "mounted bucket; the cloud's preemption notice is the grace a stop gets (stop.grace_seconds "
                      "states it, and is then checked)")

    def time_limit_seconds(self, section: Any) -> int | None:
        return None

    def document(self, kind: str) -> DocumentFile:
        return step_document(TASK_FILE, kind, TASK_TEMPLATE)

    def job(self, request: StepRequest, spec: JobSpec, pins: ImagePins) -> SkyPilotJob:
        sky = spec.skypilot
        assert sky is not None  # the platform-section rule refuses a spec without it
        gpu = sky.accelerator or spec.resources.worker_flavor
        return SkyPilotJob(
            file=self.document(request.kind).file, name=request.name, nodes=request.nodes,
            accelerators=f"{gpu}:{request.gpus_per_node}" if request.gpus_per_node else "",
            image_id=f"docker:{pins.job_image}", cloud=sky.cloud, mount_path=request.mount_path,
            bucket=sky.storage.name, store=sky.storage.store, mode=sky.storage.mode,
            rendezvous=request.kind == "train", default_master_port=DEFAULT_MASTER_PORT, script=request.script,
        )

    def render(self, job: SkyPilotJob, header: tuple[str, ...], generated_by: dict[str, str],
               script: str) -> Document:
        raise AssertionError("task.yaml is rendered from its template")

    def check(self, section: Any, facts: EngineFacts) -> Iterator[Finding]:
        if section.accelerator is None and facts.resources_valid and facts.worker_flavor is None:
            yield Finding("skypilot-accelerator", "SkyPilot needs the GPU type: neither skypilot.accelerator nor "
                          "resources.worker_flavor names it", ("skypilot",),
                          "set skypilot.accelerator to SkyPilot's name of the GPU, e.g. H200")


ENGINE = SkyPilot()
