"""The job spec v1 as pydantic models: shape, types, ranges and formats only.

Optional pretrain fields default to Megatron-LM's own defaults, and the compiler passes a flag only
for a field the spec sets, so an imported script round-trips to the same flags.

Field names are the public interface (the spec's YAML keys). Cross-field rules live in
check/rules/, derived values in check/facts.py. Every string type rejects control characters:
nothing a spec says may break a line in a generated artifact.

The compile path does not import this module: it validates with pydantic-core and the plain Record
classes of schema/records.py, both derived from these models (schema/validator.py, with the core
schema committed in schema/validator_schema.py). After changing a model, run `python -m
compiler.schema.generate` and `megatron-compile schema`; tests fail until both are regenerated.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from ..load import limits
from .defaults import MEGATRON_REPO, MEGATRON_ROOT
from .formats import CHECKS, FORMATS, no_control
from .sections import _CONFIG, Fp8, Performance, _Section

SPEC_SCHEMA_ID = "megatron-job.schema.json"


def _format(name: str) -> object:
    """A string type of one of formats.FORMATS: its check, and the pattern in the JSON Schema."""
    fmt = FORMATS[name]
    schema: dict[str, Any] = {"type": "string", "pattern": fmt.pattern, "description": f"{fmt.title}: {fmt.description}",
                    "examples": [fmt.example]}
    return Annotated[str, AfterValidator(CHECKS[name]), WithJsonSchema(schema)]


Text = Annotated[str, AfterValidator(no_control)]
NonEmptyText = Annotated[str, Field(min_length=1), AfterValidator(no_control)]

RunName = _format("RunName")
Commit = _format("Commit")
ImageReference = _format("ImageReference")
Platform = _format("Platform")
RegistryHost = _format("RegistryHost")
PathComponent = _format("PathComponent")
Repository = _format("Repository")
Tag = _format("Tag")
GitUrl = _format("GitUrl")
AbsolutePath = _format("AbsolutePath")
Split = _format("Split")
EnvName = _format("EnvName")


class Image(_Section):
    """The image the job runs: built from `base` and pushed to `registry/namespace/repository:tag`."""

    base: ImageReference  # type: ignore[valid-type]
    platform: Platform = "linux/amd64"  # type: ignore[valid-type]
    registry: RegistryHost  # type: ignore[valid-type]
    namespace: PathComponent  # type: ignore[valid-type]
    repository: Repository  # type: ignore[valid-type]
    tag: Tag  # type: ignore[valid-type]
    registry_username: Text | None = None
    # The NGC login of buildx.sh/regctl.sh for an nvcr.io base: auto logs in only when NGC_API_KEY
    # is set (the PyTorch images pull anonymously), always requires it (a prompt on a terminal),
    # never skips it.
    base_login: Literal["auto", "always", "never"] = "auto"


class Megatron(_Section):
    """The Megatron-LM source baked into the image, pinned to one commit."""

    repo: GitUrl = MEGATRON_REPO  # type: ignore[valid-type]
    commit: Commit  # type: ignore[valid-type]
    root: AbsolutePath = MEGATRON_ROOT  # type: ignore[valid-type]


class Resources(_Section):
    """What the AIStudio job asks for."""

    workers: int = Field(ge=1, le=1024)
    gpus_per_worker: int = Field(ge=1, le=16)
    worker_flavor: NonEmptyText | None = None
    rdma: bool = False
    slow_training_detection: bool = False
    gpu_memory_gb: float | None = Field(default=None, gt=0, le=limits.MAX_GPU_MEMORY_GB)  # default: from worker_flavor (H200, H100, A100)
    # the cluster's host time over the step model's (what `megatron-compile calibrate` prints from a run of
    # specs/calibrate-host.yaml on it): a host-bound step scales by it; default: the lent H200 hosts' fit
    host_time_factor: float | None = Field(default=None, ge=0.1, le=10.0)


class Storage(_Section):
    """The writable shared storage mounted into every worker."""

    mount_path: AbsolutePath  # type: ignore[valid-type]
    run_root: AbsolutePath | None = None  # type: ignore[valid-type]
    # The share's quota in GB (10^9 bytes): the compiler compares the run's estimated checkpoints,
    # logs and TensorBoard with it (a warning above 90 %, an error above 100 %).
    quota_gb: float | None = Field(default=None, gt=0, le=limits.MAX_STORAGE_GB)


class Parallelism(_Section):
    """Model-parallel sizes; data parallel is derived from the world size, never written."""

    tensor: int = Field(default=1, ge=1, le=limits.MAX_PARALLEL)
    pipeline: int = Field(default=1, ge=1, le=limits.MAX_PARALLEL)
    context: int = Field(default=1, ge=1, le=limits.MAX_PARALLEL)
    expert: int = Field(default=1, ge=1, le=limits.MAX_PARALLEL)
    expert_tensor: int | None = Field(default=None, ge=1, le=limits.MAX_PARALLEL)  # Megatron defaults it to `tensor`


class Model(_Section):
    """The GPT architecture (pretrain_gpt.py); each field is the Megatron-LM flag of the same name."""

    # required unless init_from gives the architecture (a rule says so: the schema cannot)
    num_layers: int | None = Field(default=None, ge=1, le=limits.MAX_LAYERS)
    hidden_size: int | None = Field(default=None, ge=1, le=limits.MAX_HIDDEN)
    num_attention_heads: int | None = Field(default=None, ge=1, le=limits.MAX_HEADS)
    ffn_hidden_size: int | None = Field(default=None, ge=1, le=limits.MAX_FFN)  # Megatron: 4 × hidden (× 2/3, rounded to 64, with swiglu)
    num_query_groups: int | None = Field(default=None, ge=1, le=limits.MAX_HEADS)  # set: grouped-query attention
    seq_length: int = Field(ge=1, le=limits.MAX_POSITIONS)
    max_position_embeddings: int | None = Field(default=None, ge=1, le=limits.MAX_POSITIONS)
    vocab_size: int | None = Field(default=None, ge=1, le=limits.MAX_VOCAB)  # before padding; required with the null tokenizer
    make_vocab_size_divisible_by: int = Field(default=128, ge=1, le=limits.MAX_VOCAB)
    swiglu: bool = False
    normalization: Literal["LayerNorm", "RMSNorm"] = "LayerNorm"
    position_embedding: Literal["learned_absolute", "rope", "none"] = "learned_absolute"
    rotary_base: int | None = Field(default=None, ge=1, le=limits.MAX_ROTARY_BASE)  # RoPE's theta (--rotary-base; Megatron: 10000)
    untie_embeddings: bool = False
    disable_bias_linear: bool = False
    num_experts: int | None = Field(default=None, ge=1, le=limits.MAX_EXPERTS)
    moe_router_topk: int = Field(default=2, ge=1, le=limits.MAX_TOPK)
    moe_ffn_hidden_size: int | None = Field(default=None, ge=1, le=limits.MAX_FFN)
    transformer_impl: Literal["local", "transformer_engine"] = "transformer_engine"


class Batch(_Section):
    micro: int = Field(ge=1, le=limits.MAX_MICRO_BATCH)
    # global is a Python keyword; the YAML key stays `global`
    global_: int = Field(ge=1, le=limits.MAX_GLOBAL_BATCH, alias="global")

    model_config = ConfigDict(**_CONFIG, populate_by_name=True)


class Optimizer(_Section):
    lr: float = Field(gt=0)
    min_lr: float = Field(default=0.0, ge=0)
    decay_style: Literal["constant", "linear", "cosine", "inverse-square-root", "WSD"] = "linear"
    warmup_iters: int = Field(default=0, ge=0, le=limits.MAX_ITERATIONS)
    decay_iters: int | None = Field(default=None, ge=1, le=limits.MAX_ITERATIONS)  # default: train_iters
    warmup_samples: int | None = Field(default=None, ge=0, le=limits.MAX_ITERATIONS)  # sample-based training (train_samples)
    decay_samples: int | None = Field(default=None, ge=1, le=limits.MAX_ITERATIONS)  # default: train_samples
    weight_decay: float = Field(default=0.01, ge=0)
    clip_grad: float = Field(default=1.0, ge=0)
    adam_beta1: float = Field(default=0.9, gt=0, lt=1)
    adam_beta2: float = Field(default=0.999, gt=0, lt=1)


class Tokenizer(_Section):
    type: Literal[
        "NullTokenizer", "GPT2BPETokenizer", "HuggingFaceTokenizer", "SentencePieceTokenizer",
        "GPTSentencePieceTokenizer", "Llama2Tokenizer", "TikTokenizer",
    ] = "GPT2BPETokenizer"  # Megatron's default
    vocab_file: AbsolutePath | None = None  # type: ignore[valid-type]
    merge_file: AbsolutePath | None = None  # type: ignore[valid-type]
    model: NonEmptyText | None = None  # a path or a Hugging Face directory (--tokenizer-model)


class PrepareInput(_Section):
    """One JSON-lines file to tokenize, on the shared storage or under /infini-data."""

    path: AbsolutePath  # type: ignore[valid-type]
    weight: float | None = Field(default=None, gt=0)  # its share of the blend (default 1)
    size_mb: float | None = Field(default=None, gt=0, le=limits.MAX_INPUT_MB)  # for the storage and time estimates


class Prepare(_Section):
    """A preparation step: Megatron-LM's tools/preprocess_data.py turns each input into .bin/.idx
    prefixes, which become training.data.paths; one tokenizer serves both steps."""

    inputs: list[PrepareInput] = Field(min_length=1)
    json_keys: list[NonEmptyText] = Field(default=["text"], min_length=1)
    output_dir: AbsolutePath | None = None  # type: ignore[valid-type]  # default {mount_path}/data/{name}
    append_eod: bool = True
    workers: int = Field(default=8, ge=1, le=256)
    flavor: NonEmptyText | None = None  # the AIStudio flavor of the preparation job (CPUs, no GPU)


class Data(_Section):
    """Mock data, the .bin/.idx prefixes of preprocessed text, or a preparation step that makes them."""

    prepare: Prepare | None = None
    mock: bool = False
    paths: list[AbsolutePath] = Field(default_factory=list)  # type: ignore[valid-type]
    weights: list[float] | None = None  # a blend: one weight per path (--data-path w1 p1 w2 p2 …)
    split: Split | None = None  # type: ignore[valid-type]
    tokenizer: Tokenizer = Field(default_factory=Tokenizer)


class Checkpoint(_Section):
    """Megatron-LM's own checkpoints under $RUN_ROOT/ckpt: model, optimizer, scheduler, RNG, iteration."""

    save_interval: int = Field(ge=1, le=limits.MAX_ITERATIONS)  # Megatron asserts save needs save_interval > 0
    format: Literal["torch_dist", "torch"] = "torch_dist"
    resume: bool = True  # --load from the same directory: a restarted job continues
    # On resume Megatron asserts the LR/WD schedule equals the checkpoint's; a run extended with more
    # iterations changes it: `spec` takes the spec's (--override-opt_param-scheduler), `checkpoint`
    # keeps the saved one (--use-checkpoint-opt_param-scheduler).
    scheduler: Literal["strict", "spec", "checkpoint"] = "strict"


class Recompute(_Section):
    granularity: Literal["full", "selective"]
    method: Literal["uniform", "block"] | None = None
    num_layers: int | None = Field(default=None, ge=1, le=limits.MAX_LAYERS)


class Logging(_Section):
    interval: int = Field(default=100, ge=1, le=limits.MAX_ITERATIONS)
    tensorboard: bool = False  # --tensorboard-dir $RUN_ROOT/tensorboard
    throughput: bool = False


class Evaluation(_Section):
    interval: int | None = Field(default=None, ge=1, le=limits.MAX_ITERATIONS)
    iters: int = Field(default=100, ge=0, le=limits.MAX_ITERATIONS)


class Training(_Section):
    """What torchrun starts on every worker; the typed sections apply to pretrain_gpt.py."""

    script: NonEmptyText = "examples/run_simple_mcore_train_loop.py"
    args: list[Text] = Field(default_factory=list)
    env: dict[EnvName, Text] = Field(default_factory=dict)  # type: ignore[valid-type]
    # An existing train.log under the run root means a run already happened there; launch.sh stops
    # rather than overwrite it unless the spec says this run continues it.
    resume: bool = False
    model: Model | None = None
    batch: Batch | None = None
    train_iters: int | None = Field(default=None, ge=1, le=limits.MAX_ITERATIONS)  # exactly one of train_iters and train_samples
    train_samples: int | None = Field(default=None, ge=1, le=limits.MAX_ITERATIONS)  # sample-based training (--train-samples)
    optimizer: Optimizer | None = None
    precision: Literal["bf16", "fp16", "fp32", "fp8"] = "bf16"  # fp8: FP8 GEMMs on bf16 (training.fp8)
    fp8: Fp8 | None = None  # FP8's recipe; default: Fp8's defaults
    data: Data | None = None
    checkpoint: Checkpoint | None = None
    sequence_parallel: bool = False
    distributed_optimizer: bool = False
    recompute: Recompute | None = None
    virtual_pipeline: int | None = Field(default=None, ge=1, le=limits.MAX_LAYERS)  # layers per virtual pipeline stage
    fused_kernels: bool = True  # false: --no-persist-layer-norm and the other --no-*-fusion flags
    performance: Performance | None = None  # default: every option at its default (megatron/performance.py)
    logging: Logging = Field(default_factory=Logging)
    eval: Evaluation = Field(default_factory=Evaluation)


class Stop(_Section):
    """A stop that saves (docs/stop-resume.md): the engine's limit and grace, the storage's write rate."""

    time_limit_minutes: int | None = Field(default=None, ge=1)  # an engine with no limit setting (AIStudio)
    grace_seconds: int | None = Field(default=None, ge=1, le=65535)  # signal to kill; default: the adapter's
    # checkpoint write rate, all ranks (default 1.0): 1 MB/s to 100 TB/s, past either end a typo (a denormal overflowed)
    write_gb_s: float | None = Field(default=None, ge=1e-3, le=1e5)


class SlurmContainer(_Section):
    """pyxis/enroot: the image every task runs in, and the storage it mounts."""

    image: NonEmptyText | None = None  # default: the built image, in enroot's registry#repository form
    mounts: list[NonEmptyText] = Field(default_factory=list)  # SRC:DST[:FLAGS]; one must mount storage.mount_path


class Slurm(_Section):
    """A Slurm batch job: one srun task per node, in the image through pyxis."""

    partition: NonEmptyText
    account: NonEmptyText | None = None
    time_limit: NonEmptyText = "04:00:00"  # sbatch --time: minutes, [days-]hours:minutes[:seconds], …
    exclusive: bool = True  # whole nodes: multi-node NCCL wants every GPU and NIC of a node
    container: SlurmContainer = Field(default_factory=SlurmContainer)


class KubernetesVolume(_Section):
    claim: NonEmptyText  # the PersistentVolumeClaim of the shared storage, mounted at storage.mount_path


class Kubernetes(_Section):
    """A Kubeflow Trainer (v2) TrainJob on a ClusterTrainingRuntime."""

    namespace: NonEmptyText | None = None
    runtime: NonEmptyText = "torch-distributed"  # the ClusterTrainingRuntime
    volume: KubernetesVolume
    queue: NonEmptyText | None = None  # Kueue's LocalQueue, as the kueue.x-k8s.io/queue-name label
    active_deadline_seconds: int | None = Field(default=None, ge=1)
    image_pull_secrets: list[NonEmptyText] = Field(default_factory=list)  # dockerconfigjson Secrets: a private registry


class SkyPilotStorage(_Section):
    """The shared storage: a bucket SkyPilot mounts at storage.mount_path on every node."""

    name: NonEmptyText  # the bucket
    store: Literal["s3", "gcs", "azure", "r2", "ibm", "oci", "cos", "nebius"] | None = None  # default: SkyPilot's
    mode: Literal["MOUNT", "MOUNT_CACHED"] = "MOUNT_CACHED"  # MOUNT_CACHED: SkyPilot's advice for checkpoints


class SkyPilot(_Section):
    """A SkyPilot task: num_nodes nodes of the GPU type, in the image, the bucket mounted."""

    accelerator: NonEmptyText | None = None  # SkyPilot's GPU name (H200, H100, A100-80GB); default resources.worker_flavor
    cloud: NonEmptyText | None = None  # e.g. kubernetes, aws, gcp; default: any cloud SkyPilot may use
    storage: SkyPilotStorage


class HuggingFaceSource(_Section):
    """A Hugging Face model: its config.json committed beside the spec, its directory on the storage."""

    config: NonEmptyText  # relative to the spec's directory: the architecture flags derive from it offline
    path: AbsolutePath  # type: ignore[valid-type]  # the model directory (config, weights, tokenizer) on the storage
    modelscope: NonEmptyText | None = None  # a ModelScope model id: compile download.sh, which fills `path`


class InitExport(_Section):
    path: AbsolutePath  # type: ignore[valid-type]  # where export.sh writes Hugging Face weights after training


class InitFrom(_Section):
    """Continue from Hugging Face weights, converted by Megatron Bridge (convert.sh) before training."""

    huggingface: HuggingFaceSource
    bridge: Literal["0.5.1"] = "0.5.1"  # Bridge v0.5.1 pairs with Megatron Core 0.18 (the pinned commit's)
    converted: AbsolutePath | None = None  # type: ignore[valid-type]  # default {mount}/checkpoints/{name}/converted
    export: InitExport | None = None


class JobSpec(_Section):
    """A Megatron training job on AIStudio (or Slurm, Kubernetes, SkyPilot), spec format v1."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, defer_build=True,
        json_schema_extra={"$id": SPEC_SCHEMA_ID, "title": "megatron-compile job spec v1"},
    )

    version: Literal[1]
    name: RunName  # type: ignore[valid-type]
    image: Image
    megatron: Megatron
    resources: Resources
    storage: Storage
    parallelism: Parallelism = Field(default_factory=Parallelism)
    training: Training = Field(default_factory=Training)
    init_from: InitFrom | None = None
    stop: Stop = Field(default_factory=Stop)
    platform: Literal["aistudio", "slurm", "kubernetes", "skypilot"] = "aistudio"  # the engine the job runs on
    slurm: Slurm | None = None
    kubernetes: Kubernetes | None = None
    skypilot: SkyPilot | None = None


def unwrap(annotation: Any) -> Any:
    """Optional[X] and Annotated[X, …] -> X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return annotation
            annotation = args[0]
        else:
            return annotation


def key_names(model: type[BaseModel]) -> list[str]:
    """A model's keys as a spec spells them (aliases, such as batch.global)."""
    return [info.alias or name for name, info in model.model_fields.items()]


def annotation_at(path: tuple[Any, ...]) -> Any:
    """The type the spec takes at a key path (a model class, str, int, …), or None for no such key."""
    annotation: Any = JobSpec
    for part in path:
        annotation = unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            fields = annotation.model_fields
            info = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
            if info is None:
                return None
            annotation = info.annotation
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        elif typing.get_origin(annotation) is list and isinstance(part, int):
            annotation = typing.get_args(annotation)[0]
        else:
            return None
    return unwrap(annotation)
