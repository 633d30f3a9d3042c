"""plan.md's and --explain's report: what a spec resolves to, as titled tables of text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..check.facts import Facts
from ..megatron.data import (LEVEL, TOKENS_PER_INPUT_BYTE, TOKENS_PER_SECOND_MAX, TOKENS_PER_SECOND_PER_WORKER,
                             estimate_prefix, token_bytes)
from ..megatron.fp8 import PUBLISHED_STEP_RATIO_SOURCE, recipe_of
from ..megatron.parallel import RANK_ORDER, RankLayout
from ..megatron.performance import resolve
from ..megatron.runfiles import RUN_CHECKPOINT_DIR, EXIT_RECORD, RUNTIME_RECORD, TRAIN_LOG
from ..megatron.flags import STOP_FLAGS
from ..megatron.pretrain import TrainingTime
from ..megatron.stop import FIRST_SAVE_S, GRACE_MARGIN_S, SAVE_SHARE, SIGNAL, START_MARGIN_S, minutes
from ..schema.records import JobSpec
from .types import LaunchPlan, PretrainPlan, ReportSection

if TYPE_CHECKING:  # the step-time model is imported where a spec has a step time (check/facts.py), not here
    from ..megatron.timing import StepTime


# A large job's report stays readable and small (1024 workers x 16 GPUs listed every rank: 0.5 MB):
# the first and last groups and workers are written out, the rest counted; --explain --format json
# has every group.
SHOWN_GROUPS = 6
SHOWN_RANKS = 16
SHOWN_WORKERS = 8


def _ranks_text(ranks: list[int]) -> str:
    if len(ranks) <= SHOWN_RANKS:
        return ",".join(str(r) for r in ranks)
    return ",".join(str(r) for r in ranks[:4]) + ",…," + ",".join(str(r) for r in ranks[-2:]) + f" ({len(ranks)} ranks)"


def _groups_text(groups: list[list[int]]) -> str:
    shown = ["[" + _ranks_text(list(g)) + "]" for g in groups]
    if len(shown) <= SHOWN_GROUPS:
        return " ".join(shown)
    return " ".join(shown[:4]) + " … " + " ".join(shown[-2:]) + f" ({len(shown)} groups)"


def _worker_rows(per_worker: list[list[int]]) -> tuple[tuple[str, str], ...]:
    rows = [(f"worker {w} ranks", _ranks_text(list(ranks))) for w, ranks in enumerate(per_worker)]
    if len(rows) <= SHOWN_WORKERS:
        return tuple(rows)
    hidden = len(rows) - 6
    middle = (f"workers 4-{len(rows) - 3} ranks", f"… ({hidden} workers, {len(per_worker[0])} consecutive ranks each)")
    return tuple(rows[:4]) + (middle,) + tuple(rows[-2:])


def _mb(value: float) -> str:
    """A memory figure in MiB (2**20 bytes: what Megatron's memory report calls MB)."""
    return f"{value:,.2f} MiB"


def _bytes(value: int) -> str:
    return f"{value:,} B ({value / 1024**3:,.2f} GiB)"


def report(spec: JobSpec, facts: Facts, groups: RankLayout, launch: LaunchPlan, reference: str,
           pretrain: PretrainPlan | None, pinning: str) -> tuple[ReportSection, ...]:
    """The sections of plan.md and --explain."""
    parallel = facts.layout
    assert parallel is not None and facts.run_root is not None and facts.script is not None
    world, run_root = parallel.world, facts.run_root
    res = spec.resources
    log_dir = launch.log_dir_shown
    sections = [
        ReportSection("Job", (
            ("name", spec.name),
            ("image", reference),
            ("base image", pinning),
            ("workers", str(res.workers)),
            ("GPUs per worker", str(res.gpus_per_worker)),
            ("world size", f"{world} = workers {res.workers} × gpus_per_worker {res.gpus_per_worker}"),
            ("script", facts.script),
        )),
        ReportSection("Parallelism", (
            ("tensor", str(parallel.tensor)),
            ("pipeline", str(parallel.pipeline)),
            ("context", str(parallel.context)),
            ("expert", f"{parallel.expert} (expert_tensor {parallel.expert_tensor})" if parallel.expert > 1
             else str(parallel.expert)),
            ("data (derived)", f"{parallel.data} = {world} / (tensor {parallel.tensor} × pipeline {parallel.pipeline} "
                               f"× context {parallel.context})"),
            ("rank order", f"{'-'.join(RANK_ORDER)} (Megatron Core's default)"),
            ("tensor groups", _groups_text(groups.tensor)),
            ("context groups", _groups_text(groups.context)),
            ("data groups", _groups_text(groups.data)),
            ("pipeline groups", _groups_text(groups.pipeline)),
        ) + _worker_rows([list(r) for r in parallel.ranks_per_worker()])),
        ReportSection("Paths", (
            ("run root", run_root),
            ("train log", f"{log_dir}/{TRAIN_LOG}"),
            ("runtime record", f"{log_dir}/{RUNTIME_RECORD}"),
            ("exit status record", f"{log_dir}/{EXIT_RECORD}"),
            ("checkpoint", f"{run_root}/{RUN_CHECKPOINT_DIR}"),
        )),
    ]
    if pretrain is not None:
        t = spec.training
        assert t.batch is not None  # a complete pretrain spec (check/facts.py pretrain_complete)
        rows = [
            ("train iterations", str(pretrain.train_iters)),
            ("micro × global batch", f"{t.batch.micro} × {t.batch.global_}"),
            ("microbatches per step", str(pretrain.num_microbatches)),
            ("virtual pipeline size", str(pretrain.virtual_pipeline or "none")),
            ("save interval", str(pretrain.save_interval)),
        ]
        est = pretrain.estimate
        if est is None:
            rows.append(("estimates", "none: set training.model.vocab_size for memory and checkpoint estimates"))
        else:
            rows += estimate_rows(est, spec.storage.quota_gb)
        sections.append(ReportSection("Training and estimates", tuple(rows)))
        sections.append(performance_section(t, parallel.data))
    return tuple(sections)


def performance_section(t: Any, data_parallel: int) -> ReportSection:
    """Each performance option the launch passes or leaves off, and why (megatron/performance.py), and
    FP8's recipe and step-time source (megatron/fp8.py)."""
    rows = list(resolve(t, data_parallel).reasons)
    recipe = recipe_of(t)
    if recipe is not None:
        from ..megatron.timing import FP8_GEMM_FACTOR  # deferred: FP8 specs only: the step-time model

        rows.append(("FP8", f"format {recipe.format}, recipe {recipe.recipe}, amax history {recipe.amax_history_len} "
                            f"({recipe.amax_compute_algo}), on a BF16 base, through Transformer Engine"))
        rows.append(("FP8 step time", f"the time estimate takes FP8 GEMMs at {FP8_GEMM_FACTOR:g}x BF16's GEMM time "
                                      "(megatron/timing.py; tools/published_check.py fits it on the published FP8 "
                                      f"rows); {PUBLISHED_STEP_RATIO_SOURCE}"))
    return ReportSection("Performance options", tuple(rows))


def _size(value: float) -> str:
    return f"{value / 1024**2:,.1f} MiB"


def steps_section(steps: tuple[tuple[str, str], ...], data_rows: tuple[tuple[str, str], ...]) -> ReportSection:
    """The steps in the order they run, and the data estimates of a preparation step."""
    rows = tuple((f"{i}. {kind}", text) for i, (kind, text) in enumerate(steps, 1))
    return ReportSection("Steps", rows + data_rows)


def data_rows(spec: JobSpec, facts: Facts, vocab: int | None) -> tuple[tuple[str, str], ...]:
    """Per prefix: its estimated tokens, .bin and .idx bytes and tokenizing time, from the inputs'
    stated sizes at the stated rates."""
    data = spec.training.data
    prepare = None if data is None else data.prepare
    assert prepare is not None  # a spec with a preparation step (plan/prepare.py prepare_plan)
    rows: list[tuple[str, str]] = [("data output", str(facts.prepare_output_dir))]
    sizes = {i.path: i.size_mb for i in prepare.inputs}
    total = 0.0
    for p in facts.prepared or ():
        size = sizes.get(p.input)
        name = f"{p.stem}_{p.key}_{LEVEL}"
        if size is None:
            rows.append((name, f"no estimate: give training.data.prepare.inputs[].size_mb for {p.input}"))
            continue
        est = estimate_prefix(size * 1024**2, vocab, prepare.workers)
        total += est.bin_bytes + est.idx_bytes
        rows.append((name, f"~{est.tokens:,} tokens; .bin {_size(est.bin_bytes)} ({token_bytes(vocab)} B a token), "
                           f".idx {_size(est.idx_bytes)}; ~{est.seconds:,.0f} s with {prepare.workers} workers"))
    rows.append(("data on shared storage", f"~{_size(total)} at {TOKENS_PER_INPUT_BYTE} tokens per input byte and "
                                           f"{TOKENS_PER_SECOND_PER_WORKER:,.0f} tokens/s per worker, {TOKENS_PER_SECOND_MAX:,.0f} "
                                           "at most (stated rates, measured with a small BPE)"))
    return tuple(rows)


def time_section(pretrain: PretrainPlan | None) -> tuple[ReportSection, ...]:
    """Time per iteration, tokens/s, time to train and GPU-hours on the flavor's GPU, with every term
    of the step model and whether a measured run backs it (megatron/timing.py)."""
    step = None if pretrain is None else pretrain.step_time
    if pretrain is None or step is None:
        return ()
    rows = [("time per iteration", f"{step.seconds * 1e3:,.0f} ms ({step.tokens_per_second:,.0f} tokens/s, "
                                   f"{step.tflops_per_gpu:.0f} TFLOP/s per GPU by Megatron's count)")]
    total = pretrain.training_time
    rows.append(("validation spread", spread_text(step, total)))
    if total is not None:
        rows.append(("time to train", f"{total.iterations:,} iterations: {total.seconds / 3600:,.1f} h, "
                                      f"{total.gpu_hours:,.0f} GPU-hours"))
        rows.append(("cost", cost_text(pretrain)))
    for term in step.terms:
        state = "" if term.exposed else " (overlapped, not added)"
        # a term that costs nothing (no context parallelism, no pipeline) has nothing to measure
        label = "" if term.measured or not term.seconds else " [not measured]"
        rows.append((term.name, f"{term.seconds * 1e3:,.1f} ms{state}{label}: {term.note}"))
    rows.append(("calibration", f"{step.utilisation_source}; constants and sources in docs/performance-model.md"))
    return (ReportSection("Time (estimate)", tuple(rows)),) + stage_section(pretrain)


def spread_text(step: StepTime, total: TrainingTime | None) -> str:
    """Where the kept H200 runs of the estimate's kind (host- or GPU-bound) fell around their leave-one-out
    estimates, applied to this one (timing.MEASURED_SPREAD), and whether those runs covered its layout."""
    lo, hi = step.spread_s
    calibrated = step.bound == "host" and step.host_calibrated
    why = ("" if step.bound != "host" else "; calibrated by resources.host_time_factor, as those runs were by their "
           "host's other runs" if calibrated else "; a host-bound step is Megatron's Python, which the lent hosts ran "
           "at speeds of their own (`megatron-compile calibrate` narrows it: README)")
    text = (f"{step.bound}-bound by the model: the kept H200 runs of that kind (one GPU a model replica) took {lo / step.seconds:.2f}-"
            f"{hi / step.seconds:.2f}x their leave-one-out estimates (docs/performance-model.md){why}: "
            f"{lo * 1e3:,.0f}-{hi * 1e3:,.0f} ms an iteration")
    if total is not None:
        text += (f", {minutes(total.seconds * lo / step.seconds)} to {minutes(total.seconds * hi / step.seconds)} "
                 "to train")
    if not step.spread_covers:
        text += ("; this GPU or layout is outside what those runs covered (one H200, no tensor, pipeline, context "
                 "or expert parallelism): their spread, not a measured one for it (a tensor- or pipeline-parallel "
                 "rank's compute alone was measured, with --fake-process-group; its collectives and bubble were not)")
    return text


def stage_section(pretrain: PretrainPlan) -> tuple[ReportSection, ...]:
    """Peak memory and micro-batch time of the first and the last pipeline stage (one row when
    pipeline is 1): megatron/stage_memory.py and the step model's stages."""
    step = pretrain.step_time
    times = {s.stage: s for s in step.stages} if step is not None else {}
    rows = []
    for peak in pretrain.stages:
        text = (f"peak {peak.peak_mb / 1024:,.2f} GiB (weights and optimizer {peak.weights_mb / 1024:,.2f}, "
                f"activations {peak.activations_mb / 1024:,.2f} at {peak.at})")
        stage = times.get(peak.stage)
        if stage is not None:
            experts = f", experts' host {stage.moe_host_s * 1e3:,.1f}" if stage.moe_host_s else ""
            text += (f"; a micro batch {stage.microbatch_s * 1e3:,.1f} ms (GPU {stage.gpu_s * 1e3:,.1f}, "
                     f"host {stage.host_s * 1e3:,.1f}{experts}) over {stage.layers} layers")
        rows.append((f"{peak.stage} stage (rank {peak.rank})", text))
    return (ReportSection("Pipeline stages (estimate)", tuple(rows)),) if rows else ()


def cost_text(pretrain: PretrainPlan) -> str:
    """The GPU-hours in money, with the rate and where it comes from; or why there is no figure."""
    cost = pretrain.cost
    if cost is None:
        return (f"no price for GPU {pretrain.gpu} on {'this engine' if pretrain.gpu else 'an unknown GPU'}: add a row "
                "to .megatron-compile/prices.yaml")
    return (f"{cost.amount:,.0f} {cost.currency} at {cost.per_gpu_hour:g} {cost.currency} per GPU-hour ({cost.gpu}, "
            f"engine {cost.engine}; {cost.source}, read {cost.date}; {cost.where})")


def estimate_rows(est: Any, quota_gb: float | None) -> list[tuple[str, str]]:
    """The memory and storage estimate, term by term (docs/memory-model.md says where each comes from)."""
    rows = [
        ("tokens per step", f"{est.tokens_per_step:,}"),
        ("parameters", f"{est.parameters_total:,} total, {est.parameters_most_loaded_rank:,} on the most "
                       "loaded rank"),
        ("weights + gradients + optimizer per GPU", _mb(est.weights_and_optimizer_mb)),
        ("activations per GPU (Megatron's formula)", _mb(est.activations_mb)),
        ("Megatron's theoretical total per GPU", _mb(est.megatron_theoretical_total_mb)),
        ("attention path assumed", est.attention),
        ("peak: weights + gradients + optimizer", _mb(est.held_weights_mb if est.held_weights_mb is not None
                                                       else est.weights_and_optimizer_mb)),
        ("peak: learned position embeddings", _mb(est.position_embeddings_mb)),
        ("peak: unfused attention's score buffer", _mb(est.attention_buffer_mb)),
        (f"peak: layer activations at {est.peak_at}", _mb(est.layer_activations_mb)),
        ("peak: logits and head at the loss", _mb(est.loss_mb)),
        ("peak: cuBLAS (and TE's) workspaces", _mb(est.workspace_mb)),
        ("peak estimate per GPU", _mb(est.peak_mb)),
        ("GPU memory", "unknown: set resources.gpu_memory_gb" if est.gpu_memory_gb is None
         else f"{est.gpu_memory_gb:g} GB, peak at {est.peak_fraction_of_gpu:.0%}"),
    ]
    if est.not_measured:
        rows.append(("not yet measured", "; ".join(est.not_measured)))
    rows += [
        ("checkpoint per save", _bytes(est.checkpoint_bytes_per_save)),
        ("checkpoints retained", f"{est.checkpoint_saves} save{'s' if est.checkpoint_saves != 1 else ''}, "
                                 f"{_bytes(est.checkpoint_bytes_retained)}"),
        ("logs and TensorBoard", f"{est.log_bytes + est.tensorboard_bytes:,} B "
                                 f"({(est.log_bytes + est.tensorboard_bytes) / 1e6:,.1f} MB)"
                                 + (", TensorBoard not measured" if est.tensorboard_bytes else "")),
        ("shared storage the run needs", _bytes(est.storage_bytes) + (
            "" if quota_gb is None else f", {est.storage_bytes / (quota_gb * 1000**3):.0%} of storage.quota_gb "
                                        f"{quota_gb:g} GB")),
    ]
    return rows


def stop_section(facts: Facts, save_interval: int) -> tuple[ReportSection, ...]:
    """A stop that saves (docs/stop-resume.md): the flags, the engine's settings, the grace it needs
    and the work a stop loses, from megatron/stop.py's times."""
    if not facts.is_pretrain or facts.flags is None:
        return ()
    adapter = facts.engine
    flags = " ".join(f.name + "".join(" " + v for v in f.values) for f in facts.flags if f.name in STOP_FLAGS)
    rows = [
        ("stop signal", f"{SIGNAL}: launch.sh passes it to each Megatron process ({flags}); the iteration in flight "
                        "finishes, a checkpoint is saved, and exit_status reads `143`, `stopped: SIGTERM`, "
                        "`saved_iteration: N`; a restart loads it and continues at N+1"),
        ("engine", adapter.stop_note),
        ("restart", "launch.sh checks ckpt/ before torchrun: a tracker that is not an iteration, or saves without "
                    "a tracker, stop the launch; a save cut short falls back to the newest complete one "
                    "(--ckpt-step)"),
    ]
    times = facts.stop
    if times is None:
        rows.append(("stop times", "none: no checkpoint estimate (set training.model.vocab_size)"))
        return (ReportSection("Stop and resume", tuple(rows)),)
    rate = f"{times.write_gb_s:g} GB/s" + ("" if times.write_rate_given else " (assumed; stop.write_gb_s)")
    step = "unknown (no step-time model for this GPU)" if times.step_s is None else minutes(times.step_s)
    rows += [
        ("checkpoint write", f"{minutes(times.write_s)}: the checkpoint at {rate}"),
        ("grace a stop needs", f"{times.needed_grace_s} s = one iteration {step} + the save {minutes(times.write_s)} "
                               f"+ {FIRST_SAVE_S} s to start the first save + {GRACE_MARGIN_S} s to exit"),
        ("engine grace", "unknown" if times.grace_s is None else f"{times.grace_s} s ({times.grace_source})"
         + (": SHORTER than a stop needs" if times.grace_short else "")),
        ("time limit", "none" if times.time_limit_s is None else f"{minutes(times.time_limit_s)} ({times.limit_source})"),
    ]
    if times.exit_duration_mins is not None:
        rows.append(("--exit-duration-in-mins", f"{times.exit_duration_mins} = the limit less {START_MARGIN_S} s to "
                     "start, one iteration, the save and the exit, in whole minutes (Megatron counts from "
                     "pretrain_gpt.py's start)"))
    if times.lost_per_kill_s is not None and times.save_share is not None:
        rows.append(("work lost per stop", f"none with the grace (saved at the next iteration); a kill without a "
                     f"signal (a lost node, SIGKILL) loses up to save_interval {save_interval} × {step} = "
                     f"{minutes(times.lost_per_kill_s)}"))
        rows.append(("save_interval", f"{save_interval}: saving takes {times.save_share:.1%} of the time; "
                     f"suggested {times.suggested_save_interval} (saving under {SAVE_SHARE:.0%} of the time, "
                     f"the fewest iterations lost to a kill)"))
    return (ReportSection("Stop and resume", tuple(rows)),)
