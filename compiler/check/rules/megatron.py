"""Megatron-LM's rules for pretrain_gpt.py at the pinned commit (571370c8), checked before a GPU.

Each rule cites the line of Megatron it reproduces; tools/megatron_conformance.py runs Megatron's own
parser on the compiled flags to keep them in agreement.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron import PINNED_SHORT, cited
from ...megatron.flags import OWNED_FLAGS, arg_flag_name
from ...megatron.performance import FIELD_OF as PERFORMANCE_FIELD_OF
from ...megatron import divisibility as div
from ...megatron.parallel import model_parallel_size
from ...megatron.pretrain import (
    MODEL_REQUIRED, PRETRAIN_SCRIPT, PRETRAIN_SECTIONS, REQUIRED_SECTIONS, ffn_hidden_size,
)
from ...paths import is_within, normalize_path
from ..context import RuleContext
from .parallel import world_text


def _pretrain(ctx: RuleContext) -> Any:
    return ctx.sections["training"] if ctx.facts.is_pretrain else None


def check_pretrain_sections(ctx: RuleContext) -> Iterator[Diagnostic]:
    training: Any = ctx.sections["training"]
    if ctx.facts.is_pretrain:
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
                    hint="remove it, or pass the script's own flags in training.args",
                )


def _model_known(t: Any) -> bool:
    """The model's required fields are there (given, or derived by init_from): its rules can run."""
    return t is not None and t.model is not None and all(getattr(t.model, f) is not None for f in MODEL_REQUIRED)


def check_megatron_model(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if not _model_known(t):
        return
    m, par = t.model, ctx.sections["parallelism"]
    tp = par.tensor
    here = ("training", "model")
    # kv_channels unset: hidden_size % num_attention_heads == 0
    if not div.head_size_derives(m):
        yield ctx.locate(
            "megatron-hidden-heads", f"training.model.hidden_size ({m.hidden_size}) must be a multiple of "
            f"num_attention_heads ({m.num_attention_heads})", here + ("hidden_size",),
            hint=cited("Megatron derives the head size as hidden_size / num_attention_heads",
                       "megatron/training/arguments.py:1282-1283"),
        )
    if m.ffn_hidden_size is None and ffn_hidden_size(m) < 1:
        yield ctx.locate(
            "megatron-ffn-size", f"with swiglu and no ffn_hidden_size Megatron sizes the FFN int(4 × hidden_size × 2/3 "
            f"/ 64) × 64, which is 0 at hidden_size {m.hidden_size}: the MLP would have no width",
            here + ("hidden_size",),
            hint="set training.model.ffn_hidden_size, or a hidden_size of 24 or more; Megatron derives the width at "
                 f"megatron/training/arguments.py:1271-1278 ({PINNED_SHORT}) and builds the MLP without a check",
        )
    if not div.heads_split_over_tp(m.num_attention_heads, tp):
        yield ctx.locate(
            "megatron-heads-tp", f"training.model.num_attention_heads ({m.num_attention_heads}) must be a "
            f"multiple of parallelism.tensor ({tp})", here + ("num_attention_heads",),
            hint=cited("each tensor-parallel rank holds num_attention_heads / tensor heads",
                       "megatron/core/transformer/transformer_config.py:1195"),
        )
    # query groups a multiple or a divisor of TP
    groups = m.num_query_groups
    if not div.groups_fit_tp(groups, tp):
        yield ctx.locate(
            "megatron-query-groups-tp", f"training.model.num_query_groups ({groups}) must be a multiple or a "
            f"divisor of parallelism.tensor ({tp})", here + ("num_query_groups",),
            hint=cited(None, "megatron/core/transformer/transformer_config.py:1209-1213"),
        )
    if not div.heads_split_over_groups(m.num_attention_heads, groups):
        # megatron/core/transformer/attention.py splits heads evenly over the query groups
        yield ctx.locate(
            "megatron-query-groups-tp", f"training.model.num_attention_heads ({m.num_attention_heads}) must be a "
            f"multiple of num_query_groups ({groups})", here + ("num_query_groups",),
        )
    if m.max_position_embeddings < m.seq_length:
        yield ctx.locate(
            "megatron-max-position", f"training.model.max_position_embeddings ({m.max_position_embeddings}) must be "
            f"at least seq_length ({m.seq_length})", here + ("max_position_embeddings",),
            hint=cited(None, "megatron/training/arguments.py:1298-1299"),
        )
    # seq_length % (2 × CP) == 0 when CP > 1
    cp = par.context
    if not div.sequence_splits_over_cp(m.seq_length, cp):
        yield ctx.locate(
            "megatron-seq-cp", f"training.model.seq_length ({m.seq_length}) must be a multiple of 2 × "
            f"parallelism.context ({2 * cp})", here + ("seq_length",),
            hint=cited("context parallelism splits each sequence into 2 × context chunks",
                       "megatron/training/arguments.py:1286-1289"),
        )
    # EP > 1 needs experts, and experts % EP == 0
    ep = par.expert
    if ep > 1 and m.num_experts is None:
        yield ctx.locate(
            "megatron-experts", f"parallelism.expert ({ep}) needs training.model.num_experts",
            ("parallelism", "expert"), hint=cited("set num_experts, or expert: 1 for a dense model",
                                                  "megatron/training/arguments.py:1487"),
        )
    elif not div.experts_split_over_ep(m.num_experts, ep):
        yield ctx.locate(
            "megatron-experts", f"training.model.num_experts ({m.num_experts}) must be a multiple of "
            f"parallelism.expert ({ep})", here + ("num_experts",),
            hint=cited(None, "megatron/training/arguments.py:1488-1489"),
        )
    if m.num_experts is not None and m.moe_router_topk > m.num_experts:
        # megatron/core/transformer/moe/router.py: topk picks among num_experts
        yield ctx.locate(
            "megatron-experts", f"training.model.moe_router_topk ({m.moe_router_topk}) exceeds num_experts "
            f"({m.num_experts})", here + ("moe_router_topk",),
        )


def check_megatron_batch(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.batch is None:
        return
    par: Any = ctx.sections["parallelism"]
    world, how = world_text(ctx)
    layout = ctx.facts.layout
    if layout is None:
        return  # parallel-divisibility reports it; DP is undefined
    product, dp = model_parallel_size(par.tensor, par.pipeline, par.context), layout.data
    # global % (micro × DP) == 0
    if not div.batch_splits(t.batch.global_, t.batch.micro, dp):
        yield ctx.locate(
            "megatron-batch", f"training.batch.global ({t.batch.global_}) must be a multiple of micro × data "
            f"parallel ({t.batch.micro} × {dp} = {t.batch.micro * dp})", ("training", "batch", "global"),
            hint=f"data parallel is {dp} = world {world} / (tensor × pipeline × context {product}); "
            f"try global {t.batch.micro * dp * max(1, round(t.batch.global_ / (t.batch.micro * dp)))}; "
            + cited(None, "megatron/core/num_microbatches_calculator.py:381"),
        )


def check_megatron_optimizer(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.optimizer is None:
        return
    # lr_warmup_steps < lr_decay_steps (decay defaults to the training length); a real H200 run failed on it at
    # start (tests/fixtures/failed-runs)
    o = t.optimizer
    if t.train_iters is not None and o.warmup_iters and o.warmup_iters >= (o.decay_iters or t.train_iters):
        decay = o.decay_iters or t.train_iters
        yield ctx.locate(
            "megatron-lr-warmup", f"training.optimizer.warmup_iters ({o.warmup_iters}) must be below the LR decay's "
            f"{decay} iterations ({'decay_iters' if o.decay_iters else 'train_iters'})",
            ("training", "optimizer", "warmup_iters"),
            hint=cited(f"warm up for fewer than {decay} iterations", "megatron/core/optimizer_param_scheduler.py:160"),
        )
    if t.optimizer.min_lr > t.optimizer.lr:
        yield ctx.locate(
            "megatron-lr", f"training.optimizer.min_lr ({t.optimizer.min_lr}) must not exceed lr ({t.optimizer.lr})",
            ("training", "optimizer", "min_lr"), hint=cited(None, "megatron/training/arguments.py:1304-1305"),
        )


def check_megatron_data(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None or t.data is None:
        return
    data = t.data
    # one data source: mock data or data paths, not both (arguments.py refuses both), not neither; a
    # preparation step is the third way to give the paths
    if data.prepare is not None and (data.mock or data.paths):
        other = "mock" if data.mock else "paths"
        yield ctx.locate(
            "megatron-data-source", f"training.data.prepare derives the training data, but training.data.{other} "
            "is set too; Megatron takes one data source", ("training", "data", other), key=True,
            hint=f"remove training.data.{other}: the prepared prefixes become --data-path",
        )
    elif data.prepare is not None:
        pass
    elif data.mock and data.paths:
        yield ctx.locate(
            "megatron-data-source", "training.data.mock and training.data.paths are both set; Megatron takes one "
            "data source", ("training", "data", "paths"),
            hint=cited("remove paths for mock data, or mock for real data", "megatron/training/arguments.py:1510-1513"),
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
        elif storage is not None and not (is_within(path, storage.mount_path)
                                          or any(is_within(path, r) for r in ctx.facts.read_only_roots)):
            also = "".join(f" or {r}" for r in ctx.facts.read_only_roots)
            yield ctx.locate(
                "data-path", f"training.data.paths[{index}] ({normalize_path(path)}) is not under the job's mount "
                f"({normalize_path(storage.mount_path)}){also}, so the workers cannot read it",
                where, hint="put preprocessed data on the shared storage",
            )


def check_sequence_parallel(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    # sequence parallel with TP=1 is switched off with a warning (arguments.py:1378-1384)
    if t is not None and t.sequence_parallel and ctx.sections["parallelism"].tensor == 1:
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
    if t is None or not ctx.facts.pretrain_complete:
        return
    if not t.args:
        return
    owned = OWNED_FLAGS | {f.name for f in ctx.facts.flags or ()}
    for index, arg in enumerate(t.args):
        name = arg_flag_name(arg)
        field = PERFORMANCE_FIELD_OF.get(name)
        if name in owned and field is not None:
            yield ctx.locate(
                "args-duplicate-flag", f"training.args[{index}] sets {name}, which training.performance.{field} "
                "decides (megatron/performance.py: the compiler passes it or leaves it off, and plan.md says why)",
                ("training", "args", index), hint=f"set training.performance.{field} and drop {name} from training.args",
            )
        elif name in owned:
            yield ctx.locate(
                "args-duplicate-flag", f"training.args[{index}] sets {name}, which the spec's typed sections already "
                "set", ("training", "args", index), hint="change the typed field instead; a flag given twice is "
                "ambiguous to review",
            )


def _memory_terms(est: Any) -> str:
    """The largest terms of the peak estimate, in GiB, largest first."""
    terms = [("weights, gradients and optimizer", est.weights_and_optimizer_mb + est.position_embeddings_mb),
             (f"layer activations at {est.peak_at}", est.layer_activations_mb),
             ("the unfused attention's score buffer", est.attention_buffer_mb),
             ("the logits at the loss", est.loss_mb)]
    top = sorted((t for t in terms if t[1] > 0), key=lambda t: -t[1])[:3]
    return ", ".join(f"{name} {mb / 1024:.1f} GiB" for name, mb in top)


def _memory_hint(t: Any, ctx: RuleContext) -> str:
    """The changes the spec has not made, each with its estimated effect (the estimator re-run)."""
    layout = ctx.facts.layout
    from ...megatron.memory import alternatives  # deferred: specs with a memory estimate only: the memory model

    options = alternatives(t, layout) if layout is not None else []
    shown = "; ".join(f"{label}: \u2212{-delta / 1024**3:.1f} GiB" for label, delta in options[:4])
    more = "or add tensor or pipeline parallelism"
    return (f"estimated effect on the peak: {shown}; {more}" if shown else more.capitalize()) + \
        "; `megatron-compile --explain` shows every term"


def check_memory(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    est = ctx.facts.estimate
    if t is None or est is None or est.peak_fraction_of_gpu is None:
        return
    from ...megatron.memory import MEASURED_ERROR  # deferred: specs with a memory estimate only: the memory model
    detail = (f"the peak memory estimate per GPU is {est.peak_mb / 1024:.1f} GiB "
              f"({est.peak_fraction_of_gpu:.0%} of the GPU's {est.gpu_memory_gb:g} GB): {_memory_terms(est)}")
    # An error only when the estimate less its uncertainty is still over: the measured error bound,
    # doubled where a term of this spec was never measured (docs/memory-model.md).
    margin = MEASURED_ERROR * (2 if est.not_measured else 1)
    if est.peak_fraction_of_gpu * (1 - margin) > 1.0:
        yield ctx.locate("memory-over-capacity", detail + "; the job would run out of memory",
                         ("training", "batch", "micro"), hint=_memory_hint(t, ctx))
    elif est.peak_fraction_of_gpu > 0.9:
        verdict = "it may not fit" if est.peak_fraction_of_gpu > 1.0 else "allocator fragmentation may push it over"
        yield ctx.locate("memory-near-capacity", f"{detail}; {verdict} (the estimate is within "
                         f"{margin:.0%} of measured runs)", ("training", "batch", "micro"),
                         severity=Severity.WARNING, hint=_memory_hint(t, ctx))


def check_storage_quota(ctx: RuleContext) -> Iterator[Diagnostic]:
    """The run's shared-storage total (checkpoints retained, logs, TensorBoard) against storage.quota_gb."""
    storage, est = ctx.sections["storage"], ctx.facts.estimate
    quota = storage.quota_gb
    if quota is None or est is None:
        return
    from ...megatron.memory import GB  # deferred: specs with a memory estimate only: the memory model
    fraction = est.storage_bytes / (quota * GB)
    detail = (f"the run needs about {est.storage_bytes / GB:,.1f} GB of shared storage ({fraction:.0%} of "
              f"storage.quota_gb {quota:g}): {est.checkpoint_saves} checkpoint save"
              f"{'s' if est.checkpoint_saves != 1 else ''} of {est.checkpoint_bytes_per_save / GB:,.1f} GB, "
              f"logs and TensorBoard {(est.log_bytes + est.tensorboard_bytes) / 1e6:,.1f} MB")
    hint = ("raise training.checkpoint.save_interval (Megatron keeps every save), or raise the quota; "
            "`megatron-compile --explain` shows the breakdown")
    if fraction > 1.0:
        yield ctx.locate("storage-over-quota", detail, ("storage", "quota_gb"), hint=hint)
    elif fraction > 0.9:
        yield ctx.locate("storage-near-quota", detail, ("storage", "quota_gb"), severity=Severity.WARNING,
                         hint=hint)


def check_training_length(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None:
        return
    here = ("training",)
    if t.train_iters is None and t.train_samples is None:
        yield ctx.locate(
            "megatron-train-length", f"training.train_iters or training.train_samples is required to train with "
            f"{PRETRAIN_SCRIPT}", here, hint="add train_iters: N (iterations) or train_samples: N (samples)",
        )
        return
    if t.train_iters is not None and t.train_samples is not None:
        yield ctx.locate(
            "megatron-train-length", "training.train_iters and training.train_samples are both set; Megatron trains "
            "by one of them", here + ("train_samples",), key=True, hint="keep one: iterations or samples",
        )
        return
    o = t.optimizer
    if o is None:
        return
    # arguments.py:1227-1252: the schedule's warmup and decay must count the same unit as training
    if t.train_iters is not None:
        wrong = [(f, "expected iteration-based") for f in ("warmup_samples", "decay_samples") if getattr(o, f) is not None]
        fix = {"warmup_samples": "warmup_iters", "decay_samples": "decay_iters"}
    else:
        wrong = [(f, "expected sample-based") for f in ("decay_iters",) if getattr(o, f) is not None]
        if o.warmup_iters:
            wrong.append(("warmup_iters", "expected sample-based"))
        fix = {"decay_iters": "decay_samples", "warmup_iters": "warmup_samples"}
    for field, why in wrong:
        unit = "iterations" if t.train_iters is not None else "samples"
        yield ctx.locate(
            "megatron-train-length", f"training.optimizer.{field} does not fit training by {unit}: Megatron asserts "
            f"'{why} learning rate {'warmup' if 'warmup' in field else 'decay'}'", ("training", "optimizer", field),
            key=True, hint=f"use training.optimizer.{fix[field]} instead",
        )
