"""What every engine adapter says, and the data it says it with.

An engine (AIStudio, Slurm, Kubernetes, SkyPilot) is one module of this package holding one
adapter object, listed by name in engines.ENGINES (TorchX's scheduler table, NeMo-Run's
executors). The rest of the compiler asks the adapter and never compares an engine's name:

- `node_env`: how a worker learns the node count, its node rank and the rendezvous address, as
  the names of the engine's variables (NeMo-Run's ExecutorMacros). launch.sh prints them and has
  no branch per engine.
- `document(kind)`: the file (and template, if it is templated) of a step's job document; every
  step (train, prepare, download, convert, export) has one, on the spec's own engine.
- `job(request, spec, pins)`: the values that document prints, from the step's resources, the
  spec's engine section and the image pins; `render(job, …)` makes the document of a job whose
  document has no template, as data the render stage serialises.
- `check(section, facts)`: the engine's own rules, as findings the check stage locates.
- data the shared rules read: read-only data mounts, reserved mount points, whether the engine
  watches the step time (slow-training detection).

Adding an engine setting: add the field to the engine's section model (schema/models.py), read
it in the adapter's `job` into a field of its Job, print it in its document or template, and
give it a rule in `check` when the engine refuses some values.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol, runtime_checkable

from ..tuples import NamedTuple
from ..schema.records import JobSpec
from .images import ImagePins

# torchrun's default rendezvous port, where an engine does not set one.
DEFAULT_MASTER_PORT = 29500

# Names the generated launch command sets or reads itself; a spec's env must not shadow them.
RESERVED_ENV = frozenset({
    "RUN_ROOT", "MEGATRON_ROOT", "MEGATRON_COMMIT", "PYTHONPATH", "PATH", "NNODES", "NODE_RANK",
    "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "EXPECTED_GPUS", "EXPECTED_NNODES", "LOG_DIR", "TRAIN_LOG",
})


class EnvParam(NamedTuple):
    """One of the engine's variables as launch.sh reads it: `${SOURCE:?TEXT}` (required, TEXT the
    error) or `${SOURCE:-TEXT}` (TEXT the fallback)."""

    source: str
    text: str
    required: bool


class NodeEnv(NamedTuple):
    """How a worker of a multi-node job learns its place, as launch.sh prints it."""

    note: tuple[str, ...]  # launch.sh's opening comment: where the engine runs it
    comment: tuple[str, ...]  # where the values below come from
    shown_names: tuple[tuple[str, str], ...]  # shell variables naming the sources in messages (NODES_FROM=…)
    nnodes: EnvParam
    node_rank: EnvParam
    master_addr: EnvParam
    master_port: EnvParam
    nodes_named: str  # the node count's source as messages name it, inside double quotes
    rank_named: str  # the node rank's source, the same way
    unit: str  # what the engine calls a node: worker or node
    unset: tuple[str, ...]  # the engine's variables cleared after reading (torchrun sets its own)
    task_count: EnvParam | None  # the tasks the engine started, which must be one per node
    task_count_shown: EnvParam | None  # the same, as the error message prints it
    task_hint: str  # how to start one task per node

    @property
    def has_unset(self) -> bool:
        return bool(self.unset)

    @property
    def checks_task_count(self) -> bool:
        return self.task_count is not None


class StepRequest(NamedTuple):
    """What one step asks of the engine, whatever the engine."""

    kind: str  # train, prepare, download, convert, export
    name: str  # the job's name
    nodes: int
    gpus_per_node: int
    flavor: str | None  # the worker flavor (AIStudio), None for the engine's default
    rdma: bool
    slow_training_detection: bool
    run_root: str
    mount_path: str
    script: str  # the step's script, which the document carries: launch.sh, prepare.sh, convert.sh…
    stop_grace_s: int | None = None  # training: the grace a stop gets to save (megatron/stop.py), None: none set


class DocumentFile(NamedTuple):
    """A step's job document: its file, and its template when it is templated (else Engine.render)."""

    file: str
    template: str | None


def step_document(train_file: str, kind: str, template: str | None) -> DocumentFile:
    """A step's job document on an engine: the training step's file, or another step's, named after
    it (job.json -> job-prepare.json), with the engine's template (None: Engine.render makes it)."""
    if kind == "train":
        return DocumentFile(train_file, template)
    stem, _, extension = train_file.partition(".")
    return DocumentFile(f"{stem}-{kind}.{extension}", template)


def nodes_and_gpus(nodes: int, gpus: int | str) -> str:
    """A job's resources as plan.md's Steps section says them; `gpus` is a count per node or the
    engine's own accelerator text (`H100:8`), 0 or empty for CPUs only."""
    if not gpus:
        return f"{nodes} node(s), CPUs only"
    return f"{nodes} node(s) × {gpus if isinstance(gpus, str) else f'{gpus} GPU(s)'}"


class Document(NamedTuple):
    """A job document as data; the render stage writes it as `format` (json or yaml)."""

    format: str
    comments: tuple[str, ...]  # YAML comment lines before the document (JSON has none)
    body: dict[str, Any]


class Job(Protocol):
    """The values of one step's job document."""

    def describe(self) -> str:
        """The resources it asks for, for plan.md's Steps section."""
        ...


class Finding(NamedTuple):
    """An engine rule's finding, which the check stage locates in the spec."""

    code: str
    message: str
    key_path: tuple[str | int, ...]
    hint: str
    severity: str = "error"  # or "warning": the job may still run (a Severity value)


class EngineFacts(NamedTuple):
    """What an engine's rules read besides its own section."""

    name: str | None
    mount_path: str | None
    worker_flavor: str | None
    resources_valid: bool  # resources validated: worker_flavor is what the spec says


@runtime_checkable
class Engine(Protocol):
    """An engine adapter (see the module docstring)."""

    name: str  # the spec's `platform:` value
    title: str  # as prose names it
    section: str | None  # the spec's section of the engine's settings, None when it has none
    node_env: NodeEnv
    read_only_data: tuple[str, ...]  # mounts the engine provides read-only
    reserved_mounts: tuple[str, ...]  # mount points the engine refuses, and anything below them
    watches_step_time: bool  # it offers slow-training detection, which reads Megatron's iteration lines
    # A stop (docs/stop-resume.md): the engine's time-limit setting in its section (None: it has none),
    # whether its document sets the grace between its stop signal and the kill, and what it does at
    # a stop, for plan.md
    limit_field: str | None
    sets_grace: bool
    stop_note: str

    def time_limit_seconds(self, section: Any) -> int | None:
        """The engine's time limit from its section, None for none (or no section)."""
        ...

    def document(self, kind: str) -> DocumentFile:
        """The job document of a step of this kind."""
        ...

    def job(self, request: StepRequest, spec: JobSpec, pins: ImagePins) -> Job:
        """The job of one step, from what it asks, the spec's engine section and the image pins."""
        ...

    def render(self, job: Any, header: tuple[str, ...], generated_by: dict[str, str], script: str) -> Document:
        """The document of a job of this engine whose document has no template, given the header
        lines, the header as fields and the step's rendered script."""
        ...

    def check(self, section: Any, facts: EngineFacts) -> Iterator[Finding]:
        """The engine's own rules on its section."""
        ...
