"""plan.md's pictures, as Mermaid (GitHub and GitLab draw it in a pull request): the pipeline
schedule per stage, the peak memory per GPU by term against the GPU, and which worker and GPU holds
which rank of each group. Every label is built here from plan values (numbers and fixed words, no
spec text); large jobs are summarised so that a picture stays readable and small.
"""

from __future__ import annotations

from typing import Any

from ..megatron.parallel import ParallelLayout, RankLayout
from ..megatron.schedule import bubble_fraction, pp_rank_microbatches, timeline
from .types import Picture, PretrainPlan, ScheduleSummary

MAX_TASKS = 320  # schedule passes drawn, at most
MAX_STAGE_TASKS = 24  # passes of one stage that fit a page's width with their labels
MAX_RANK_NODES = 64  # above: one node per worker
MAX_WORKERS = 16  # above: the first and last workers, the rest counted


def schedule_summary(pipeline: int, virtual: int | None, microbatches: int) -> ScheduleSummary:
    """Megatron's warm-up and steady passes per stage, and the bubble."""
    kind = "no pipeline" if pipeline == 1 else "1F1B" if virtual is None else "interleaved 1F1B"
    per_stage = [pp_rank_microbatches(microbatches, virtual or 1, pipeline, pipeline, rank, virtual)
                 for rank in range(pipeline)]
    return ScheduleSummary(kind, bubble_fraction(pipeline, virtual, microbatches), tuple(s[2] for s in per_stage),
                           tuple(s[3] for s in per_stage))


def _drawn(pipeline: int, virtual: int | None, m: int) -> tuple[int, list[int]]:
    """The microbatches and the stages drawn: all, unless the picture would pass MAX_TASKS passes."""
    chunks = virtual or 1
    # a stage of more than MAX_STAGE_TASKS passes is drawn for fewer micro-batches: its warm-up and
    # cool-down stay whole (they depend on the pipeline, not on m), the steady part is shorter
    small = m * 2 * chunks <= MAX_STAGE_TASKS and 2 * m * chunks * pipeline <= MAX_TASKS
    drawn_m = m if small else min(m, pipeline if virtual else 2 * pipeline)
    stages = list(range(pipeline))
    while 2 * drawn_m * chunks * len(stages) > MAX_TASKS and len(stages) > 2:
        half = len(stages) // 2 - 1  # keep the first and the last stages, where warm-up is longest and shortest
        stages = stages[:max(half, 1)] + stages[-max(half, 1):]
    return drawn_m, stages


def schedule_picture(pretrain: PretrainPlan, pipeline: int) -> Picture | None:
    """A Gantt chart of one iteration: each stage's passes in Megatron's order, placed in time."""
    summary = pretrain.schedule
    if summary is None or pipeline < 2:
        return None
    m, virtual = pretrain.num_microbatches, pretrain.virtual_pipeline
    drawn_m, stages = _drawn(pipeline, virtual, m)
    placed = timeline(pipeline, drawn_m, virtual)
    span = max(slot.end for slots in placed for slot in slots)
    # Mermaid's Gantt reads times as dates: milliseconds (dateFormat x), one unit a second on the axis
    lines = ["---", "config:", "  gantt:", "    displayMode: compact", "---", "gantt",
             f"  title {summary.kind}, pipeline {pipeline}" + (f" × {virtual} virtual stages" if virtual else "")
             + f", bubble {summary.bubble_fraction:.1%}", "  dateFormat x", "  axisFormat %s",
             f"  tickInterval {next(t for t in (1, 2, 5, 10, 20, 50, 100, 1000) if span / t <= 40)}second"]
    tags = {"warm-up": "done, ", "cool-down": "done, "}
    for stage in stages:
        lines.append(f"  section stage {stage}")
        for i, slot in enumerate(placed[stage]):
            op = slot.op
            name = f"{op.kind}{op.microbatch}" + (f".{op.chunk}" if virtual else "")
            tag = tags.get(op.phase, "active, " if op.kind == "B" else "")
            lines.append(f"  {name} :{tag}s{stage}p{i}, {slot.start * 1000}, {slot.end * 1000}")
    phases = "; ".join(f"stage {s}: {summary.warmup[s]} warm-up, {summary.steady[s]} steady 1F1B, "
                       f"{summary.warmup[s]} cool-down" for s in stages)
    caption = (f"One iteration per pipeline stage in Megatron's order (get_pp_rank_microbatches, "
               f"get_schedule_table): warm-up forwards and cool-down backwards in grey, the steady 1F1B pairs in "
               f"blue (a forward dark, a backward light); F3 is micro-batch 3's forward" + (", F3.1 of model chunk 1" if virtual else "")
               + "; a backward takes twice a forward (time in forward passes). Bubble (pp-1)/(v·m) = "
               f"{summary.bubble_fraction:.2%} of the work with {m} micro-batches. {phases}.")
    if drawn_m < m or len(stages) < pipeline:
        caption += (f" Drawn for {drawn_m} of the {m} micro-batches" + (f" and stages {', '.join(map(str, stages))}"
                    if len(stages) < pipeline else "") + ": warm-up and cool-down are the same, the steady part "
                    "repeats.")
    return Picture("Pipeline schedule", caption, tuple(lines))


def memory_picture(pretrain: PretrainPlan) -> Picture | None:
    """A pie of the peak estimate per GPU by term, with what is left of the GPU's memory."""
    est = pretrain.estimate
    if est is None:
        return None
    terms: tuple[tuple[str, float], ...] = (("weights, gradients, optimizer", est.weights_and_optimizer_mb),
             ("position embeddings", est.position_embeddings_mb), ("attention scores", est.attention_buffer_mb),
             (f"layer activations at {est.peak_at}", est.layer_activations_mb), ("logits and loss", est.loss_mb))
    lines = ["pie showData"]
    if est.gpu_memory_gb is None:
        title = f"Peak estimate per GPU: {est.peak_mb:,.0f} MiB (GPU memory unknown)"
    else:
        from ..megatron.memory import GB, MB  # deferred: specs with an estimate only (it loads the memory model)

        capacity = est.gpu_memory_gb * GB / MB
        title = (f"Peak estimate per GPU: {est.peak_mb:,.0f} MiB, {est.peak_fraction_of_gpu:.1%} of "
                 f"{est.gpu_memory_gb:g} GB")
        if capacity > est.peak_mb:
            terms += (("free", round(capacity - est.peak_mb, 2)),)
        else:
            title += ": over the GPU's memory"
    lines.append(f"  title {title}")
    lines += [f'  "{label}" : {value:.2f}' for label, value in terms if value > 0]
    caption = ("The peak estimate per GPU (the most loaded rank) by term, in MiB, against the GPU's memory; "
               "the table above gives each term and docs/memory-model.md where it comes from.")
    return Picture("Memory per GPU", caption, tuple(lines))


def _position(groups: list[list[int]]) -> dict[int, tuple[int, int]]:
    """rank -> (its group's index, its index in the group)."""
    return {rank: (g, i) for g, group in enumerate(groups) for i, rank in enumerate(group)}


def _crossing(groups: list[list[int]], gpus_per_worker: int) -> list[list[int]]:
    return [g for g in groups if len({rank // gpus_per_worker for rank in g}) > 1]


def rank_picture(layout: ParallelLayout, groups: RankLayout) -> Picture:
    """Workers and their GPUs, each with its rank and its place in every group; the ranks of a TP or
    EP group that spans workers are marked."""
    expert = layout.expert_groups() if layout.expert > 1 else None
    tp, pp, dp, cp = (_position(groups.tensor), _position(groups.pipeline), _position(groups.data),
                      _position(groups.context))
    ep = _position(expert.expert) if expert else {}
    crossing = {name: _crossing(found, layout.gpus_per_worker) for name, found in
                (("TP", groups.tensor), ("EP", expert.expert if expert else []))}
    marked = {rank for found in crossing.values() for group in found for rank in group}
    per_gpu = layout.world <= MAX_RANK_NODES
    # rank by rank: left to right, GPUs of a worker in a row; Mermaid's layout stacks unlinked
    # workers bottom-up, so they are written last first. One node a worker: top to bottom, linked.
    lines = ["flowchart LR" if per_gpu else "flowchart TB", "  classDef crosses fill:#f8d7da,stroke:#b02a37"]
    workers = list(range(layout.workers))
    if len(workers) > MAX_WORKERS:
        workers = workers[:MAX_WORKERS // 2] + [-1] + workers[-MAX_WORKERS // 2:]
    if per_gpu:
        workers.reverse()
    chain = []
    for w in workers:
        if w < 0:
            lines.append(f'  more["… {layout.workers - MAX_WORKERS} more workers"]')
            chain.append("more")
            continue
        ranks = list(range(w * layout.gpus_per_worker, (w + 1) * layout.gpus_per_worker))
        if per_gpu:
            lines.append(f'  subgraph w{w}["worker {w}"]')
            for gpu, rank in enumerate(ranks):
                label = (f"GPU {gpu} · rank {rank}<br/>tp {tp[rank][1]} · pp {pp[rank][1]} · dp {dp[rank][1]}"
                         + (f" · cp {cp[rank][1]}" if layout.context > 1 else "")
                         + (f" · ep {ep[rank][1]}" if expert else ""))
                lines.append(f'    r{rank}["{label}"]' + (":::crosses" if rank in marked else ""))
            lines.append("  end")
        else:
            stages = sorted({pp[r][1] for r in ranks})
            stage = f"pp stage {stages[0]}" if len(stages) == 1 else f"pp stages {stages[0]}-{stages[-1]}"
            label = (f"worker {w} · GPUs 0-{len(ranks) - 1} · ranks {ranks[0]}-{ranks[-1]}<br/>TP groups "
                     f"{tp[ranks[0]][0]}-{tp[ranks[-1]][0]} · {stage}")
            lines.append(f'  n{w}["{label}"]' + (":::crosses" if marked & set(ranks) else ""))
            chain.append(f"n{w}")
    if len(chain) > 1:  # invisible links: the workers top to bottom in order
        lines.append("  " + " ~~~ ".join(chain))
    said = []
    for name, found in crossing.items():
        total = len(groups.tensor) if name == "TP" else len(expert.expert) if expert else 0
        if total:
            said.append(f"{len(found)} of {total} {name} groups cross workers" if found
                        else f"every {name} group stays within a worker")
    caption = ("Which worker and GPU holds which rank (torchrun: worker × GPUs per worker + GPU), and its index "
               "in its tensor (tp), pipeline (pp), data (dp)" + (", context (cp)" if layout.context > 1 else "")
               + (" and expert (ep)" if expert else "") + " group, as Megatron's RankGenerator lays them out; "
               + "; ".join(said) + (" (marked red: their traffic leaves the worker)" if marked else "") + "."
               + ("" if per_gpu else f" One node per worker above {MAX_RANK_NODES} ranks.")
               + ("" if layout.workers <= MAX_WORKERS else f" The first and last {MAX_WORKERS // 2} workers drawn."))
    return Picture("Ranks on workers", caption, tuple(lines))


def pictures(layout: ParallelLayout, groups: RankLayout, pretrain: Any) -> tuple[Picture, ...]:
    """plan.md's pictures for a plan: the rank map always, the schedule and memory for pretraining."""
    found = [rank_picture(layout, groups)]
    if pretrain is not None:
        found += [p for p in (schedule_picture(pretrain, layout.pipeline), memory_picture(pretrain)) if p is not None]
    return tuple(found)
