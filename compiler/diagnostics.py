"""Diagnostics: located, coded messages collected by every stage and formatted once by the CLI."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Iterable, Sequence

from .tuples import NamedTuple


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Span(NamedTuple):
    """A 1-based source range; end is exclusive of the last column, as editors count."""

    line: int
    column: int
    end_line: int
    end_column: int


class Diagnostic(NamedTuple):
    code: str  # stable kebab-case name from CODES; users filter and tests match on it
    severity: Severity
    message: str  # one line, says what is wrong
    file: str  # the spec path as the user wrote it (or '<--set>' style origins)
    line: int | None = None  # 1-based; None only when the whole file is concerned
    column: int | None = None  # 1-based
    end_line: int | None = None
    end_column: int | None = None
    key_path: tuple[str | int, ...] = ()  # e.g. ("parallelism", "tensor")
    hint: str | None = None  # how to fix it, when there is something useful to say

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


# The registry of codes: the public names of every check. A test asserts that each code has a case
# in tests/bad_specs/ and that the code never emits one not listed here.
CODES: dict[str, str] = {
    # YAML and file level
    "file-unreadable": "the spec file cannot be read",
    "spec-path": "the spec's path is not UTF-8 text",
    "encoding": "the spec is not UTF-8",
    "yaml-syntax": "YAML syntax error",
    "yaml-empty": "the spec file is empty",
    "yaml-multi-document": "the spec holds more than one YAML document",
    "yaml-not-mapping": "the top level of a spec must be a mapping",
    "yaml-duplicate-key": "a key appears twice in one mapping",
    "yaml-key-type": "a mapping key is not a string",
    "yaml-alias-limit": "anchors and aliases expand past the limit",
    "yaml-tag": "an explicit YAML tag a spec does not use",
    "yaml-merge-key": "a YAML merge key (<<)",
    "yaml-implicit-type": "a plain YAML scalar was read as a non-string where a string is expected",
    # composition
    "extends-missing": "a base spec named in extends does not exist",
    "extends-cycle": "specs extend each other in a cycle",
    "link-outside-repository": "a base or a lock is a symbolic link to a file outside the repository",
    "extends-not-spec": "a base named in extends is not a .yaml/.yml spec file",
    "set-value": "a --set override that is malformed",
    # schema
    "unknown-key": "a key the schema does not define",
    "missing-key": "a required key is absent",
    "type": "a value of the wrong type",
    "value": "a value outside its allowed range or format",
    "unsupported-version": "spec version not supported",
    # platform
    "run-root-outside-mount": "the run root is not inside the shared-storage mount",
    "run-root-is-mount": "the run root is the mount path itself",
    "read-only-storage": "a writable path under the public read-only /infini-data",
    "reserved-mount-path": "AIStudio rejects this mount point",
    "script-outside-root": "a relative training.script climbs out of megatron.root",
    "rdma-single-worker": "RDMA has no effect for a single worker",
    "slow-detection": "slow-training detection off for a long run, on where it has nothing to read, or starved",
    "job-routing": "a job the platform runs with another tool (LoRA/QLoRA, GRPO/PPO)",
    "megatron-lr-warmup": "warmup that is not shorter than the LR decay",
    "platform-section": "the engine's section is missing, or one is given for another engine",
    "slurm-time-limit": "a Slurm time limit sbatch does not read",
    "slurm-name": "a Slurm partition or account name sbatch does not take (a space, a quote)",
    "kubernetes-runtime": "kubernetes.runtime is not a torch runtime, which sets the PET_* variables the launch reads",
    "kubernetes-pull-secret": "the TrainJob names no image pull secret for the private registry",
    # the repository's settings (.megatron-compile/) and `diff`
    "price-table": "a row of .megatron-compile/prices.yaml that is malformed",
    "guardrails-file": "an entry of .megatron-compile/guardrails.yaml that is malformed",
    "guardrail-cost": "the run's cost is above a guardrail",
    "guardrail-memory": "the peak memory estimate's fraction of the GPU is above a guardrail",
    "guardrail-gpu-hours": "a change raises the GPU-hours more than a guardrail allows",
    "diff-git": "the base revision cannot be read through git",
    "slurm-mount": "the Slurm container does not mount the shared storage",
    "kubernetes-name": "a name the Kubernetes API server rejects",
    "skypilot-accelerator": "a SkyPilot task without a GPU type",
    "stop-grace-short": "the engine kills a stopped job before its checkpoint can be written",
    "stop-time-limit-short": "the time limit leaves no minute of training before the stop's save",
    "stop-time-limit-engine": "stop.time_limit_minutes given for an engine whose own section holds its limit",
    # parallelism
    "parallel-divisibility": "tensor x pipeline x context does not divide the world size",
    "expert-divisibility": "expert-tensor x expert x pipeline does not divide the world size",
    "bounded-example-layout": "the bounded example hard-codes its parallel layout",
    "bounded-example-args": "the bounded example takes no arguments",
    "tensor-spans-workers": "a tensor-parallel group holds GPUs of two workers",
    # safety
    "unsafe-character": "a value holds characters that cannot be made safe in an artifact",
    "env-empty-credential": "training.env sets a credential variable to an empty value",
    "script-not-in-megatron": "training.script is not a file of Megatron-LM at megatron.commit",
    "args-parallel-mismatch": "a parallel size in training.args differs from parallelism",
    "path-glob": "a path is a glob pattern where one file is read",
    "credential-in-spec": "a value looks like a credential",
    "reserved-env": "an environment variable the launch command owns",
    "visible-devices": "CUDA_VISIBLE_DEVICES lists another number of GPUs than a worker's ranks",
    "import-marker": "a placeholder `import` wrote for a value it could not know (@unset:X@, @runtime:date@)",
    # pretrain_gpt.py: Megatron-LM's own argument rules
    "pretrain-missing-section": "pretrain_gpt.py needs a typed section the spec lacks",
    "pretrain-section-unused": "a pretrain section given for another script",
    "megatron-hidden-heads": "hidden_size is not a multiple of num_attention_heads",
    "megatron-ffn-size": "with swiglu, a hidden_size too small for Megatron's derived FFN width",
    "megatron-heads-tp": "num_attention_heads is not a multiple of tensor parallel",
    "megatron-query-groups-tp": "num_query_groups does not fit tensor parallel or the heads",
    "megatron-max-position": "max_position_embeddings is below seq_length",
    "megatron-seq-cp": "seq_length is not a multiple of 2 × context parallel",
    "megatron-experts": "expert parallel and num_experts disagree",
    "megatron-layers-pp": "num_layers is not a multiple of pipeline parallel",
    "megatron-virtual-pipeline": "the virtual pipeline does not fit the pipeline",
    "megatron-batch": "global batch is not a multiple of micro batch × data parallel",
    "megatron-lr": "min_lr exceeds lr",
    "megatron-train-length": "not exactly one of train_iters and train_samples, or a schedule of the other kind",
    "megatron-data-source": "not exactly one data source",
    "megatron-mock-tokenizer": "mock data needs the null tokenizer and a vocab size",
    "megatron-sequence-parallel": "sequence parallel without tensor parallel",
    "fp8-unused": "training.fp8 without training.precision: fp8",
    "fp8-transformer-engine": "FP8 without Transformer Engine's layers, where Megatron trains in BF16 silently",
    "fp8-gpu": "an FP8 recipe the GPU cannot run, or a GPU the compiler cannot tell",
    "fp8-dimensions": "a GEMM dimension Transformer Engine's FP8 GEMM refuses (multiples of 8 and 16)",
    "fp8-recipe": "an FP8 option Megatron refuses with the chosen recipe",
    "performance-option": "a performance option Megatron's rules refuse for this layout",
    "data-path": "a data path the job cannot read or that names a file, not a prefix",
    "init-from": "init_from on a job that cannot take it, or a Bridge release for another Megatron",
    "init-from-config": "init_from's config.json cannot be read, or describes an architecture not supported",
    "init-from-path": "a model, converted or exported path off the writable shared storage",
    "init-from-contradiction": "a typed model field that contradicts init_from's config.json",
    "prepare-input-path": "a preparation input the job cannot read, or two inputs of one name",
    "prepare-output-path": "a preparation output directory that is not writable shared storage of its own",
    "tokenizer-files": "a tokenizer without the files its type needs, or one that cannot prepare text",
    "prepare-vocab": "a vocabulary size that contradicts the tokenizer's",
    "args-duplicate-flag": "training.args repeats a flag the typed sections set",
    "megatron-unknown-flag": "a flag Megatron-LM's parser does not know at the pinned commit",
    "megatron-removed-flag": "a flag an older Megatron-LM release had and the pinned commit rejects",
    "megatron-flag-value": "a flag value Megatron-LM's parser rejects (type or choices)",
    "megatron-flag-arity": "a flag given the wrong number of values, or a value no flag takes",
    "megatron-help-flag": "-h/--help, which makes Megatron print its help and exit instead of training",
    "distributed-optimizer-resume": "a distributed-optimizer resume that fails without Apex or TE",
    "megatron-validate-args": "a raw flag Megatron's parser accepts and its validate_args or TransformerConfig refuses at start",
    "megatron-needs-apex-or-te": "a configuration that crashes unless the image has Apex or Transformer Engine",
    "megatron-needs-te": "a configuration that crashes unless the image has Transformer Engine",
    "megatron-needs-apex": "a configuration that crashes unless the image has Apex",
    "megatron-local-crash": "a configuration that crashes in Megatron whatever the image holds",
    "args-unread-shape-flag": "a raw flag that changes the model's shape where the estimates do not look",
    "megatron-moe-bias-crash": "experts with linear biases and a fused kernel TE's or Megatron's MoE path refuses",
    "memory-over-capacity": "the peak memory estimate exceeds the GPU's memory",
    "memory-near-capacity": "the peak memory estimate is above 90% of the GPU's memory",
    "storage-over-quota": "the run's checkpoints, logs and TensorBoard exceed storage.quota_gb",
    "storage-near-quota": "the run's checkpoints, logs and TensorBoard are above 90% of storage.quota_gb",
    # output (emit stage): about the files on disk, not the spec
    "not-generated-file": "an output path holds a file megatron-compile did not generate",
    "write-failed": "an artifact could not be written",
    "output-conflict": "two specs would write the same output directory",
    "no-specs": "nothing to compile was found",
    "lock-invalid": "the spec's lock file cannot be read",
    "lock-stale": "the spec's lock no longer matches its image section",
    "image-unpinned": "--require-lock and the spec has no lock",
    "artifact-stale": "a committed artifact differs from what its spec compiles to",
    "artifact-missing": "an artifact its spec compiles to is not on disk",
    "artifact-extra": "a file in a spec's output directory that the spec does not produce",
    "calibrate-log": "a log given to `megatron-compile calibrate` has no steady iterations of the spec's job",
}

# Codes about files on disk rather than a spec's content; tests/bad_specs/ covers all the others.
OUTPUT_CODES = frozenset({"price-table", "guardrails-file", "guardrail-cost", "guardrail-memory",
                          "guardrail-gpu-hours", "diff-git", "set-value", "file-unreadable", "spec-path", "not-generated-file", "write-failed", "output-conflict", "no-specs",
                          "artifact-stale", "artifact-missing", "artifact-extra", "image-unpinned", "calibrate-log"})


def dotted(path: Iterable[str | int]) -> str:
    """('training', 'args', 0) -> 'training.args[0]'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "the spec"


def make_error(code: str, message: str, *, hint: str | None = None, **where: object) -> Diagnostic:
    """Build an error diagnostic; `where` takes file/line/column/key_path fields."""
    return Diagnostic(code=code, severity=Severity.ERROR, message=message, hint=hint, **where)  # type: ignore[arg-type]


def sort_diagnostics(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    """Order by file, position and code, and drop exact repeats."""
    seen: set[tuple[str, int | None, int | None, str, str]] = set()
    unique = []
    for d in diags:
        key = (d.file, d.line, d.column, d.code, d.message)
        if key not in seen:
            seen.add(key)
            unique.append(d)
    return sorted(unique, key=lambda d: (d.file, d.line or 0, d.column or 0, d.code, d.message))


def _location(d: Diagnostic) -> str:
    if d.line is None:
        return d.file
    return f"{d.file}:{d.line}:{d.column or 1}"


def format_text(diags: Sequence[Diagnostic]) -> str:
    """`file:line:col: severity: message  [code]`, an indented hint line, and no summary."""
    lines = []
    for d in diags:
        lines.append(f"{_location(d)}: {d.severity.value}: {d.message}  [{d.code}]")
        if d.hint:
            lines.append(f"  hint: {d.hint}")
    return "\n".join(lines) + ("\n" if lines else "")


def summary_line(diags: Sequence[Diagnostic], file: str) -> str | None:
    """`2 errors, 1 warning in specs/x.yaml`, or None when there is nothing to say. `file` comes as the
    caller shows it (text.shown: a name with undecodable bytes escaped)."""
    errors = sum(1 for d in diags if d.severity is Severity.ERROR)
    warnings = sum(1 for d in diags if d.severity is Severity.WARNING)
    parts = []
    if errors:
        parts.append(f"{errors} error{'s' if errors != 1 else ''}")
    if warnings:
        parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
    if not parts:
        return None
    return f"{', '.join(parts)} in {file}"


def to_json_obj(d: Diagnostic) -> dict[str, Any]:
    """A diagnostic as a JSON-ready dict with stable keys."""
    obj = d._asdict()
    obj["severity"] = d.severity.value
    obj["key_path"] = list(d.key_path)
    return obj


def format_json(diags: Sequence[Diagnostic]) -> str:
    """The diagnostics as one JSON list."""
    return json.dumps([to_json_obj(d) for d in diags], indent=2, ensure_ascii=False) + "\n"


def _gh_escape(text: str, *, prop: bool) -> str:
    # GitHub's workflow-command escaping (actions/toolkit command.ts).
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def format_github(diags: Sequence[Diagnostic]) -> str:
    """GitHub Actions `::error file=…,line=…,col=…::message` annotations."""
    out = []
    for d in diags:
        level = {"error": "error", "warning": "warning", "note": "notice"}[d.severity.value]
        props = [f"file={_gh_escape(d.file, prop=True)}"]
        if d.line is not None:
            props.append(f"line={d.line}")
            props.append(f"col={d.column or 1}")
        if d.end_line is not None:
            props.append(f"endLine={d.end_line}")
        props.append(f"title={_gh_escape(d.code, prop=True)}")
        message = d.message + (f"\nhint: {d.hint}" if d.hint else "")
        out.append(f"::{level} {','.join(props)}::{_gh_escape(message, prop=False)}")
    return "\n".join(out) + ("\n" if out else "")
