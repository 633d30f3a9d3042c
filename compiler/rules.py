"""Semantic rules: each takes the sections that validated and yields located diagnostics.

A rule names the sections it needs; it runs only when all of them validated, so a schema error in
one section never hides a rule about another. Every rule's code is in diagnostics.CODES and has a
case in tests/bad_specs/.
"""

from __future__ import annotations

import posixpath
import re
from typing import NamedTuple
from typing import Any, Callable, Iterable, Iterator

from .coreschema import Record
from .diagnostics import Diagnostic, Severity, dotted
from .layout import data_parallel_size, divisors, is_within, model_parallel_size, normalize_path, world_size
from .pretrain import (
    BOUNDED_EXAMPLE, PRETRAIN_SCRIPT, PRETRAIN_SECTIONS, REQUIRED_SECTIONS, is_bounded_example, is_pretrain,
    virtual_pipeline_size,
)
from .source import SourceDoc

# AIStudio refuses these mount points and anything below them.
RESERVED_MOUNTS = (
    "/bios", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/home", "/datadisk",
)
READ_ONLY_DATA = "/infini-data"

# Names the generated launch command sets or reads itself; a spec's env must not shadow them.
RESERVED_ENV = frozenset({
    "RUN_ROOT", "MEGATRON_ROOT", "MEGATRON_COMMIT", "PYTHONPATH", "PATH", "NNODES", "NODE_RANK",
    "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "EXPECTED_GPUS", "EXPECTED_NNODES", "LOG_DIR", "TRAIN_LOG",
})

_CREDENTIALS = (
    (re.compile(r"nvapi-[A-Za-z0-9_-]{8,}"), "an NGC API key (nvapi-…)"),
    (re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), "a bearer token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key block"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), "a GitHub token"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"://[^/\s:@]+:[^/\s@]+@"), "a password inside a URL"),
)


class RuleContext(NamedTuple):
    doc: SourceDoc
    sections: dict[str, Record]
    name: str | None
    locate: Callable[..., Diagnostic]  # (code, message, path, *, key=False, hint=None, severity=…)


class Rule(NamedTuple):
    code: str
    needs: tuple[str, ...]
    check: Callable[[RuleContext], Iterable[Diagnostic]]


def _storage_paths(ctx: RuleContext) -> tuple[str, str, tuple]:
    """(mount path, run root, key path of the run root) with the run root's default applied."""
    storage: Any = ctx.sections["storage"]
    if storage.run_root is not None:
        return storage.mount_path, storage.run_root, ("storage", "run_root")
    return storage.mount_path, f"{storage.mount_path}/runs/{ctx.name or 'run'}", ("storage",)


def check_run_root(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    norm_mount, norm_root = normalize_path(mount), normalize_path(run_root)
    if norm_root == norm_mount:
        yield ctx.locate(
            "run-root-is-mount", f"storage.run_root ({run_root}) is the mount path itself", where,
            hint=f"give every run its own directory, e.g. {norm_mount.rstrip('/')}/runs/{ctx.name or 'NAME'}",
        )
    elif not is_within(norm_root, norm_mount):
        yield ctx.locate(
            "run-root-outside-mount",
            f"storage.run_root ({norm_root}) is not inside storage.mount_path ({norm_mount}); the worker's "
            "root filesystem is discarded when the job ends, so the checkpoint and logs would be lost",
            where, hint=f"put the run root under {norm_mount}, or leave it out for {norm_mount}/runs/<name>",
        )


def check_read_only(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    if is_within(mount, READ_ONLY_DATA):
        yield ctx.locate(
            "read-only-storage", f"storage.mount_path ({normalize_path(mount)}) is under {READ_ONLY_DATA}, "
            "which is public and read-only", ("storage", "mount_path"),
            hint="mount a writable shared storage, e.g. /mnt/megatron",
        )
    elif is_within(run_root, READ_ONLY_DATA):
        yield ctx.locate(
            "read-only-storage", f"storage.run_root ({normalize_path(run_root)}) is under {READ_ONLY_DATA}, "
            "which is public and read-only", where, hint="write runs under the writable mount path",
        )


def check_reserved_mount(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount = normalize_path(ctx.sections["storage"].mount_path)  # type: ignore[attr-defined]
    blocked = "/" if mount == "/" else next(
        (r for r in RESERVED_MOUNTS if mount == r or mount.startswith(r + "/")), None)  # both normalised
    if blocked:
        what = "the root directory" if blocked == "/" else (mount if mount == blocked else f"under {blocked}")
        yield ctx.locate(
            "reserved-mount-path", f"storage.mount_path ({mount}) is {what}, which AIStudio does not allow as a mount point",
            ("storage", "mount_path"), hint="use a path such as /mnt/megatron",
        )


def _world(ctx: RuleContext) -> tuple[int, str]:
    res: Any = ctx.sections["resources"]
    world = world_size(res.workers, res.gpus_per_worker)
    return world, f"workers {res.workers} × gpus_per_worker {res.gpus_per_worker} = {world}"


def _sizes_hint(world: int, what: str) -> str:
    options = divisors(world)
    listed = ", ".join(str(d) for d in options[:-1]) + (" or " if len(options) > 1 else "") + str(options[-1])
    return f"with {world} GPU{'s' if world != 1 else ''}, {what} must be {listed}"


def check_parallel_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    par: Any = ctx.sections["parallelism"]
    world, how = _world(ctx)
    if world % par.tensor:
        yield ctx.locate(
            "parallel-divisibility", f"parallelism.tensor ({par.tensor}) must divide the world size ({how})",
            ("parallelism", "tensor"), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )
        return
    product = model_parallel_size(par.tensor, par.pipeline, par.context)
    if world % product:
        culprit = "pipeline" if world % (par.tensor * par.pipeline) else "context"
        yield ctx.locate(
            "parallel-divisibility",
            f"tensor × pipeline × context ({par.tensor} × {par.pipeline} × {par.context} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", culprit), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )


def check_expert_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron/core/parallel_state.py, initialize_model_parallel: the expert RankGenerator needs
    # world % (expert_tensor × expert × pipeline) == 0.
    par: Any = ctx.sections["parallelism"]
    world, how = _world(ctx)
    etp = par.expert_tensor or par.tensor
    product = etp * par.expert * par.pipeline
    if par.expert > 1 and world % product:
        yield ctx.locate(
            "expert-divisibility",
            f"expert_tensor × expert × pipeline ({etp} × {par.expert} × {par.pipeline} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", "expert"), hint=_sizes_hint(world, "expert_tensor × expert × pipeline")
            + ("; expert_tensor defaults to tensor" if par.expert_tensor is None else ""),
        )


def _is_bounded_example(ctx: RuleContext) -> bool:
    megatron: Any = ctx.sections.get("megatron")
    root = megatron.root if megatron is not None else "/opt/Megatron-LM"
    return is_bounded_example(ctx.sections["training"].script, root)  # type: ignore[attr-defined]


def check_bounded_layout(ctx: RuleContext) -> Iterator[Diagnostic]:
    if not _is_bounded_example(ctx):
        return
    par: Any = ctx.sections["parallelism"]
    why = f"{BOUNDED_EXAMPLE} hard-codes tensor=2, pipeline=1 and ignores the spec"
    wanted = {"tensor": 2, "pipeline": 1, "context": 1, "expert": 1}
    world, how = _world(ctx)
    for field, value in wanted.items():
        actual = getattr(par, field)
        # a size that does not even divide the world size is parallel-divisibility's to report
        if actual != value and world % actual == 0:
            yield ctx.locate(
                "bounded-example-layout", f"parallelism.{field} must be {value} for the bounded example (got {actual})",
                ("parallelism", field),
                hint=f"{why}; set {field}: {value}, or train with pretrain_gpt.py for another layout",
            )
    if world % 2:
        yield ctx.locate(
            "bounded-example-layout", f"the bounded example needs an even world size ({how})",
            ("resources", "gpus_per_worker"), hint=f"{why}; its TP=2 groups need pairs of GPUs",
        )


def check_bounded_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    training: Any = ctx.sections["training"]
    if _is_bounded_example(ctx) and training.args:
        yield ctx.locate(
            "bounded-example-args", f"training.args must be empty for the bounded example (got {len(training.args)})",
            ("training", "args"),
            hint=f"{BOUNDED_EXAMPLE} reads no arguments; the job would run something other than what was reviewed",
        )


def check_image_values(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron.root becomes the Dockerfile's ENV PYTHONPATH and regctl's --env PYTHONPATH=…: Docker
    # treats a backslash inconsistently across instructions, and ':' would split PYTHONPATH in two.
    root = ctx.sections["megatron"].root  # type: ignore[attr-defined]
    bad = sorted({ch for ch in root if ch in "\\:"})
    if bad:
        yield ctx.locate(
            "unsafe-character", f"megatron.root contains {' and '.join(repr(c) for c in bad)}, which cannot be "
            "carried safely into the image's PYTHONPATH", ("megatron", "root"),
            hint="choose a directory name without backslashes or colons, e.g. /opt/Megatron-LM",
        )


def check_reserved_env(ctx: RuleContext) -> Iterator[Diagnostic]:
    for name in ctx.sections["training"].env:  # type: ignore[attr-defined]
        if name in RESERVED_ENV:
            yield ctx.locate(
                "reserved-env", f"training.env.{name} is set by the launch command itself", ("training", "env", name),
                key=True, hint="the spec's own fields control it; remove it from training.env",
            )


def check_rdma(ctx: RuleContext) -> Iterator[Diagnostic]:
    res: Any = ctx.sections["resources"]
    if res.rdma and res.workers == 1:
        yield ctx.locate(
            "rdma-single-worker", "resources.rdma is on for a single worker, where it carries no traffic",
            ("resources", "rdma"), severity=Severity.WARNING, hint="turn it off, or use several workers",
        )


def _strings(value: Any, path: tuple) -> Iterator[tuple[tuple, str, bool]]:
    """(path, text, is_key) for every string in the raw data, keys included."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, path + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield path + (key,), key, True
            yield from _strings(item, path + (key,))


# One pass over every string first; the patterns one by one only for a string that matched.
_ANY_CREDENTIAL = re.compile("|".join(f"(?:{p.pattern})" for p, _ in _CREDENTIALS), re.IGNORECASE)


def _all_text(value: Any, out: list[str]) -> list[str]:
    """Every string in the raw data, keys included (what _strings walks, without the paths)."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for item in value:
            _all_text(item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                out.append(key)
            _all_text(item, out)
    return out


def check_credentials(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A spec almost never holds a credential: one search over all its text first (every string is
    # in it verbatim, so nothing a string matches is missed), the walk with paths only on a match.
    if not _ANY_CREDENTIAL.search("\n".join(_all_text(ctx.doc.data, []))):
        return
    for path, text, is_key in _strings(ctx.doc.data, ()):
        if not _ANY_CREDENTIAL.search(text):
            continue
        for pattern, what in _CREDENTIALS:
            if pattern.search(text):
                yield ctx.locate(
                    "credential-in-spec", f"{dotted(path)} looks like {what}; a spec is committed and its "
                    "artifacts are reviewed, so it must hold no secret", path, key=is_key,
                    hint="remove it; the generated scripts prompt for credentials or read them from the environment",
                )
                break


# ---- pretrain_gpt.py: what Megatron-LM asserts at the pinned commit (571370c8), checked before a GPU


def _pretrain(ctx: RuleContext) -> Any:
    training: Any = ctx.sections["training"]
    return training if is_pretrain(training.script) else None


def check_pretrain_sections(ctx: RuleContext) -> Iterator[Diagnostic]:
    training: Any = ctx.sections["training"]
    if is_pretrain(training.script):
        for name in REQUIRED_SECTIONS:
            if getattr(training, name) is None:
                yield ctx.locate(
                    "pretrain-missing-section", f"training.{name} is required to train with {PRETRAIN_SCRIPT}",
                    ("training",), hint=f"add training.{name}; see the README's pretrain reference",
                )
    else:
        for name in PRETRAIN_SECTIONS:
            if getattr(training, name) is not None:
                yield ctx.locate(
                    "pretrain-section-unused",
                    f"training.{name} applies to {PRETRAIN_SCRIPT} only; {training.script} would never see it",
                    ("training", name), key=True,
                    hint=f"remove it, or pass the script's own flags in training.args",
                )


def check_megatron_model(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.model is None:
        return
    m, par = t.model, ctx.sections["parallelism"]
    tp = par.tensor  # type: ignore[attr-defined]
    here = ("training", "model")
    # arguments.py:1283 (kv_channels unset): hidden_size % num_attention_heads == 0
    if m.hidden_size % m.num_attention_heads:
        yield ctx.locate(
            "megatron-hidden-heads", f"training.model.hidden_size ({m.hidden_size}) must be a multiple of "
            f"num_attention_heads ({m.num_attention_heads})", here + ("hidden_size",),
            hint="Megatron derives the head size as hidden_size / num_attention_heads",
        )
    # megatron/core/transformer/transformer_config.py:1195: num_attention_heads % TP == 0
    if m.num_attention_heads % tp:
        yield ctx.locate(
            "megatron-heads-tp", f"training.model.num_attention_heads ({m.num_attention_heads}) must be a "
            f"multiple of parallelism.tensor ({tp})", here + ("num_attention_heads",),
            hint="each tensor-parallel rank holds num_attention_heads / tensor heads",
        )
    # transformer_config.py:1209-1212: query groups a multiple or a divisor of TP
    groups = m.num_query_groups
    if groups is not None and groups % tp and tp % groups:
        yield ctx.locate(
            "megatron-query-groups-tp", f"training.model.num_query_groups ({groups}) must be a multiple or a "
            f"divisor of parallelism.tensor ({tp})", here + ("num_query_groups",),
        )
    if groups is not None and m.num_attention_heads % groups:
        # megatron/core/transformer/attention.py splits heads evenly over the query groups
        yield ctx.locate(
            "megatron-query-groups-tp", f"training.model.num_attention_heads ({m.num_attention_heads}) must be a "
            f"multiple of num_query_groups ({groups})", here + ("num_query_groups",),
        )
    # arguments.py:1299: max_position_embeddings >= seq_length
    if m.max_position_embeddings < m.seq_length:
        yield ctx.locate(
            "megatron-max-position", f"training.model.max_position_embeddings ({m.max_position_embeddings}) must be "
            f"at least seq_length ({m.seq_length})", here + ("max_position_embeddings",),
        )
    # arguments.py:1286-1289: seq_length % (2 × CP) == 0 when CP > 1
    cp = par.context  # type: ignore[attr-defined]
    if cp > 1 and m.seq_length % (2 * cp):
        yield ctx.locate(
            "megatron-seq-cp", f"training.model.seq_length ({m.seq_length}) must be a multiple of 2 × "
            f"parallelism.context ({2 * cp})", here + ("seq_length",),
            hint="context parallelism splits each sequence into 2 × context chunks",
        )
    # arguments.py:1486-1489: EP > 1 needs experts, and experts % EP == 0
    ep = par.expert  # type: ignore[attr-defined]
    if ep > 1 and m.num_experts is None:
        yield ctx.locate(
            "megatron-experts", f"parallelism.expert ({ep}) needs training.model.num_experts",
            ("parallelism", "expert"), hint="set num_experts, or expert: 1 for a dense model",
        )
    elif m.num_experts is not None and m.num_experts % ep:
        yield ctx.locate(
            "megatron-experts", f"training.model.num_experts ({m.num_experts}) must be a multiple of "
            f"parallelism.expert ({ep})", here + ("num_experts",),
        )
    if m.num_experts is not None and m.moe_router_topk > m.num_experts:
        # megatron/core/transformer/moe/router.py: topk picks among num_experts
        yield ctx.locate(
            "megatron-experts", f"training.model.moe_router_topk ({m.moe_router_topk}) exceeds num_experts "
            f"({m.num_experts})", here + ("moe_router_topk",),
        )


def check_megatron_pipeline(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.model is None:
        return
    pp = ctx.sections["parallelism"].pipeline  # type: ignore[attr-defined]
    layers = t.model.num_layers
    # arguments.py:976-977 (and :947 with virtual stages): num_layers % PP == 0
    if layers % pp:
        yield ctx.locate(
            "megatron-layers-pp", f"training.model.num_layers ({layers}) must be a multiple of "
            f"parallelism.pipeline ({pp})", ("training", "model", "num_layers"),
            hint="each pipeline stage holds num_layers / pipeline layers",
        )
        return
    if t.virtual_pipeline is None:
        return
    per_stage = layers // pp
    # arguments.py:951-952: layers per stage % layers per virtual stage == 0
    if per_stage % t.virtual_pipeline:
        yield ctx.locate(
            "megatron-virtual-pipeline", f"training.virtual_pipeline ({t.virtual_pipeline} layers per virtual "
            f"stage) must divide the {per_stage} layers of each pipeline stage", ("training", "virtual_pipeline"),
        )
    # arguments.py:969-973: the interleaved schedule (without p2p overlap) needs pipeline > 2
    elif virtual_pipeline_size(layers, pp, t.virtual_pipeline) is not None and pp <= 2:
        yield ctx.locate(
            "megatron-virtual-pipeline", f"training.virtual_pipeline needs parallelism.pipeline > 2 (got {pp}) for "
            "Megatron's interleaved schedule", ("training", "virtual_pipeline"),
            hint="remove virtual_pipeline, or use more pipeline stages",
        )


def check_megatron_batch(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.batch is None:
        return
    par: Any = ctx.sections["parallelism"]
    world, how = _world(ctx)
    product = model_parallel_size(par.tensor, par.pipeline, par.context)
    if world % product:
        return  # parallel-divisibility reports it; DP is undefined
    dp = data_parallel_size(world, par.tensor, par.pipeline, par.context)
    # megatron/core/num_microbatches_calculator.py:381: global % (micro × DP) == 0
    if t.batch.global_ % (t.batch.micro * dp):
        yield ctx.locate(
            "megatron-batch", f"training.batch.global ({t.batch.global_}) must be a multiple of micro × data "
            f"parallel ({t.batch.micro} × {dp} = {t.batch.micro * dp})", ("training", "batch", "global"),
            hint=f"data parallel is {dp} = world {world} / (tensor × pipeline × context {product}); "
            f"try global {t.batch.micro * dp * max(1, round(t.batch.global_ / (t.batch.micro * dp)))}",
        )


def check_megatron_optimizer(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.optimizer is None:
        return
    # arguments.py:1304-1305: min_lr <= lr
    if t.optimizer.min_lr > t.optimizer.lr:
        yield ctx.locate(
            "megatron-lr", f"training.optimizer.min_lr ({t.optimizer.min_lr}) must not exceed lr ({t.optimizer.lr})",
            ("training", "optimizer", "min_lr"),
        )


def check_megatron_data(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.data is None:
        return
    data = t.data
    # arguments.py:1510-1513: one data source: mock data or data paths, not both, not neither
    if data.mock and data.paths:
        yield ctx.locate(
            "megatron-data-source", "training.data.mock and training.data.paths are both set; Megatron takes one "
            "data source", ("training", "data", "paths"), hint="remove paths for mock data, or mock for real data",
        )
    elif not data.mock and not data.paths:
        yield ctx.locate(
            "megatron-data-source", "training.data needs paths (preprocessed .bin/.idx prefixes) or mock: true",
            ("training", "data"),
        )
    if data.weights is not None and len(data.weights) != len(data.paths):
        yield ctx.locate(
            "megatron-data-source", f"training.data.weights has {len(data.weights)} weights for {len(data.paths)} "
            "paths; a blend takes one weight per path", ("training", "data", "weights"),
        )
    if data.mock:
        if data.tokenizer.type != "NullTokenizer":
            yield ctx.locate(
                "megatron-mock-tokenizer", f"mock data needs the NullTokenizer (got {data.tokenizer.type})",
                ("training", "data", "tokenizer", "type"), hint="set tokenizer: {type: NullTokenizer}",
            )
        if t.model is not None and t.model.vocab_size is None:
            yield ctx.locate(
                "megatron-mock-tokenizer", "mock data with the NullTokenizer needs training.model.vocab_size",
                ("training", "model"), hint="add vocab_size, e.g. 32000",
            )
    storage: Any = ctx.sections.get("storage")
    for index, path in enumerate(data.paths):
        where = ("training", "data", "paths", index)
        if path.endswith((".bin", ".idx")):
            yield ctx.locate(
                "data-path", f"training.data.paths[{index}] names a file ({path}); Megatron wants the prefix",
                where, hint=f"write {path[:-4]}: Megatron opens {posixpath.basename(path[:-4])}.bin and .idx",
            )
        elif storage is not None and not (is_within(path, storage.mount_path) or is_within(path, READ_ONLY_DATA)):
            yield ctx.locate(
                "data-path", f"training.data.paths[{index}] ({normalize_path(path)}) is not under the job's mount "
                f"({normalize_path(storage.mount_path)}) or {READ_ONLY_DATA}, so the workers cannot read it",
                where, hint="put preprocessed data on the shared storage",
            )


def check_sequence_parallel(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    # arguments.py:1378-1384: sequence parallel with TP=1 is switched off with a warning
    if t is not None and t.sequence_parallel and ctx.sections["parallelism"].tensor == 1:  # type: ignore[attr-defined]
        yield ctx.locate(
            "megatron-sequence-parallel", "training.sequence_parallel has no effect with parallelism.tensor 1; "
            "Megatron switches it off", ("training", "sequence_parallel"), severity=Severity.WARNING,
            hint="remove it, or use tensor parallelism",
        )


def check_distributed_optimizer_resume(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.model is None or t.checkpoint is None:
        return
    # megatron/core/optimizer/distrib_optimizer.py:793: without Apex or TE the distributed optimizer
    # takes its step from the optimizer state, which is empty when a checkpoint is loaded (seen on a
    # real resume, docs/e2e.md). A local transformer without fused kernels is the sign of such an image.
    no_te = t.model.transformer_impl == "local" and not t.fused_kernels
    if t.distributed_optimizer and t.checkpoint.resume and no_te:
        yield ctx.locate(
            "distributed-optimizer-resume", "resuming a distributed-optimizer checkpoint fails without Apex or "
            "Transformer Engine, which transformer_impl: local with fused_kernels: false suggests",
            ("training", "distributed_optimizer"), severity=Severity.WARNING,
            hint="use an image with Transformer Engine, or set distributed_optimizer: false",
        )


def check_duplicate_flags(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or any(getattr(t, name) is None for name in REQUIRED_SECTIONS):
        return
    from .pretrain import arg_flag_name, flag_names

    if not t.args:
        return
    owned = flag_names(_SpecView(t, ctx.sections["parallelism"], ctx.sections.get("resources")))
    for index, arg in enumerate(t.args):
        name = arg_flag_name(arg)
        if name in owned:
            yield ctx.locate(
                "args-duplicate-flag", f"training.args[{index}] sets {name}, which the spec's typed sections already "
                "set", ("training", "args", index), hint="change the typed field instead; a flag given twice is "
                "ambiguous to review",
            )


def check_memory(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or any(getattr(t, name) is None for name in REQUIRED_SECTIONS):
        return
    from .estimate import estimate, layout_of

    res: Any = ctx.sections["resources"]
    layout = layout_of(res, ctx.sections["parallelism"])
    if layout is None or t.batch.global_ % (t.batch.micro * layout.data):
        return
    est = estimate(_SpecView(t, ctx.sections["parallelism"], res), layout)
    if est is None or est.peak_fraction_of_gpu is None:
        return
    detail = (f"the peak memory estimate per GPU is {est.peak_mb / 1024:.1f} GiB "
              f"({est.peak_fraction_of_gpu:.0%} of the GPU's {est.gpu_memory_gb:g} GB)")
    hint = "lower training.batch.micro, recompute activations, or add tensor/pipeline parallelism; " \
           "`megatron-compile --explain` shows the breakdown"
    if est.peak_fraction_of_gpu > 1.0:
        yield ctx.locate("memory-over-capacity", detail + "; the job would run out of memory",
                         ("training", "batch", "micro"), hint=hint)
    elif est.peak_fraction_of_gpu > 0.9:
        yield ctx.locate("memory-near-capacity", detail + "; allocator fragmentation may push it over",
                         ("training", "batch", "micro"), severity=Severity.WARNING, hint=hint)


class _SpecView(NamedTuple):
    """The sections of a spec that validated, where pretrain helpers expect a whole spec."""

    training: Any
    parallelism: Any
    resources: Any


RULES: tuple[Rule, ...] = (
    Rule("run-root-is-mount", ("storage",), check_run_root),
    Rule("read-only-storage", ("storage",), check_read_only),
    Rule("reserved-mount-path", ("storage",), check_reserved_mount),
    Rule("parallel-divisibility", ("resources", "parallelism"), check_parallel_divisibility),
    Rule("expert-divisibility", ("resources", "parallelism"), check_expert_divisibility),
    Rule("bounded-example-layout", ("training", "parallelism", "resources"), check_bounded_layout),
    Rule("bounded-example-args", ("training",), check_bounded_args),
    Rule("unsafe-character", ("megatron",), check_image_values),
    Rule("reserved-env", ("training",), check_reserved_env),
    Rule("rdma-single-worker", ("resources",), check_rdma),
    Rule("credential-in-spec", (), check_credentials),
    Rule("pretrain-missing-section", ("training",), check_pretrain_sections),
    Rule("megatron-heads-tp", ("training", "parallelism"), check_megatron_model),
    Rule("megatron-layers-pp", ("training", "parallelism"), check_megatron_pipeline),
    Rule("megatron-batch", ("training", "parallelism", "resources"), check_megatron_batch),
    Rule("megatron-lr", ("training",), check_megatron_optimizer),
    Rule("megatron-data-source", ("training",), check_megatron_data),
    Rule("megatron-sequence-parallel", ("training", "parallelism"), check_sequence_parallel),
    Rule("args-duplicate-flag", ("training", "parallelism"), check_duplicate_flags),
    Rule("memory-over-capacity", ("training", "parallelism", "resources"), check_memory),
    Rule("distributed-optimizer-resume", ("training",), check_distributed_optimizer_resume),
)


def run_rules(ctx: RuleContext) -> list[Diagnostic]:
    """Every rule whose sections validated, in order."""
    out: list[Diagnostic] = []
    for rule in RULES:
        if all(name in ctx.sections for name in rule.needs):
            out.extend(rule.check(ctx))
    return out
