"""`megatron-compile size SPEC`: the layouts Megatron accepts for a spec's model and batch that fit the
GPU, ranked by estimated time per iteration or GPU-hours, each with the --set lines that produce it.

    megatron-compile size SPEC [--gpu h200] [--max-gpus N] [--gpus-per-worker 8] [--top K]
                               [--rank time|gpu-hours] [--explain-rank] [--format text|json]

--max-gpus is at most MAX_GPUS (16384: the largest world a spec can give, 1024 workers of 16 GPUs),
--gpus-per-worker at most 16 (the spec's own limit), --top at most MAX_TOP; each at least 1. A value
outside is a usage error (exit 2). With --format json stdout is one JSON object whatever happens after
the arguments are parsed: the layouts, or {"ok": false, "diagnostics": [...]} (exit 1, 2 for --gpu).

Three stages, cheapest first: `candidate_layouts` enumerates the layouts Megatron's own divisibility
rules allow (a pure function of the model's shape and the batch); the memory estimator and the
step-time model size each (no compile); then, in rank order, each candidate's overrides go through
the compiler's own compose/validate/rules path (`compile_candidate`) and only those that compile
with no diagnostic at all, error or warning, are printed, until --top of them.
"""

from __future__ import annotations

import json
import math
from typing import Any, TextIO

from ..tuples import NamedTuple
from ..load.override import Override
from ..megatron import divisibility as div
from ..megatron.memory import estimate
from ..megatron.parallel import data_parallel_size, model_parallel_size, parallel_layout, world_size
from ..megatron.pretrain import training_time
from ..megatron.timing import MODEL_ERROR, spec_step_time
from ..one_pass import compile_spec
from ..schema.record import new, replace
from ..schema.records import JobSpec, Recompute
from ..megatron.gpus import Gpu, gpu_named, gpu_of_flavor
from ..diagnostics import Diagnostic, format_text, make_error, to_json_obj
from .size_cli import _parser, _text

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
MICRO_BATCHES = (1, 2, 4, 8)
CONTEXT_SIZES = (1, 2, 4, 8)
RECOMPUTE = (None, "selective", "full")
# memory-near-capacity warns above 90 % of the GPU (rules.py check_memory): a clean compile needs less
CLEAN_PEAK_FRACTION = 0.9


def compile_candidate(path: str, display: str, overrides: tuple[str, ...]) -> list[Any]:
    """Every diagnostic compiling the spec with these --set overrides gives (the CLI's own path)."""
    result = compile_spec(path, display, overrides=tuple(Override(o) for o in overrides), render_files=False)
    return list(result.diagnostics) if result.ok else list(result.diagnostics) or ["no plan"]


# ---------------------------------------------------------------------------- enumeration


class ModelFacts(NamedTuple):
    """What Megatron's layout rules read of the model."""

    num_layers: int
    num_attention_heads: int
    num_query_groups: int | None
    seq_length: int
    num_experts: int | None = None
    expert: int = 1  # the spec's expert parallel size, kept as it is


class Candidate(NamedTuple):
    workers: int
    gpus_per_worker: int
    tensor: int
    pipeline: int
    context: int
    micro: int
    virtual_pipeline: int | None  # layers per virtual stage (the spec's field), None: no interleaving
    recompute: str | None
    distributed_optimizer: bool

    @property
    def world(self) -> int:
        return world_size(self.workers, self.gpus_per_worker)

    @property
    def data(self) -> int:
        return data_parallel_size(self.world, self.tensor, self.pipeline, self.context)

    @property
    def sequence_parallel(self) -> bool:
        # on wherever it can be: it shards activations and moves the same bytes as TP's all-reduces
        return self.tensor > 1

    @property
    def shape(self) -> tuple[Any, ...]:
        """The parallel layout itself, without the knobs that only decide whether it fits."""
        return (self.workers, self.gpus_per_worker, self.tensor, self.pipeline, self.context, self.virtual_pipeline)

    def overrides(self, rdma: bool = False) -> tuple[str, ...]:
        """The --set lines, in the spec's own field names, that turn the spec into this layout."""
        out = [
            f"resources.workers={self.workers}", f"resources.gpus_per_worker={self.gpus_per_worker}",
            f"parallelism.tensor={self.tensor}", f"parallelism.pipeline={self.pipeline}",
            f"parallelism.context={self.context}", f"training.batch.micro={self.micro}",
            f"training.sequence_parallel={_yaml(self.sequence_parallel)}",
            f"training.distributed_optimizer={_yaml(self.distributed_optimizer)}",
            f"training.virtual_pipeline={_yaml(self.virtual_pipeline)}",
            # null first: a mapping given by --set merges into the spec's, and a method or
            # num_layers left from the spec would contradict the granularity chosen here
            "training.recompute=null",
        ]
        if self.recompute == "selective":
            out.append("training.recompute.granularity=selective")
        elif self.recompute == "full":
            # transformer_config.py:1556-1568: full needs a method and recompute_num_layers
            out += ["training.recompute.granularity=full", "training.recompute.method=uniform",
                    "training.recompute.num_layers=1"]
        if self.workers == 1 and rdma:
            out.append("resources.rdma=false")  # rules.py check_rdma warns: no traffic to carry
        return tuple(out)


def _yaml(value: object) -> str:
    return "null" if value is None else ("true" if value is True else "false" if value is False else str(value))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _divisors_of(n: int) -> set[int]:
    """The divisors of n (n >= 1), in O(sqrt n)."""
    out: set[int] = set()
    for d in range(1, math.isqrt(n) + 1):
        if n % d == 0:
            out.update((d, n // d))
    return out


def possible_worlds(model: ModelFacts, global_batch: int, gpus_per_worker: int) -> set[int]:
    """Every world size a layout can have: TP x PP x CP x DP with TP a divisor of the worker's GPUs, PP of the
    layers, CP one of CONTEXT_SIZES and DP of the global batch (batch_splits: global % (micro x DP) == 0). A
    superset of candidate_layouts' worlds, and as small whatever --max-gpus is."""
    splits = {tp * pp * cp for tp in _divisors(gpus_per_worker) for pp in _divisors(model.num_layers)
              for cp in CONTEXT_SIZES}
    return {m * dp for m in splits for dp in _divisors_of(global_batch)} if global_batch >= 1 else set()


def world_shapes(max_gpus: int, gpus_per_worker: int, worlds: set[int] | None = None) -> list[tuple[int, int]]:
    """(workers, GPUs per worker): one worker with 1, 2, 4 … GPUs below a full one, then whole workers; with
    `worlds`, only the whole-worker shapes whose world is one of them (possible_worlds), whatever max_gpus is."""
    shapes = [(1, g) for g in (1, 2, 4, 8, 16) if g < gpus_per_worker and g <= max_gpus]
    if worlds is None:
        shapes += [(w, gpus_per_worker) for w in range(1, max_gpus // gpus_per_worker + 1)]
    else:
        shapes += [(w // gpus_per_worker, gpus_per_worker) for w in sorted(worlds)
                   if w % gpus_per_worker == 0 and 0 < w <= max_gpus]
    return shapes


def _virtual_options(num_layers: int, pipeline: int) -> list[int | None]:
    """No interleaving, and 2 or 4 virtual stages per rank where Megatron accepts the split
    (pretrain.pipeline_split_refusal, the pipeline rule's own check)."""
    per_stage = num_layers // pipeline
    options: list[int | None] = [None] + [per_stage // v for v in (2, 4) if per_stage % v == 0]
    return [o for o in options if o is None or div.pipeline_split_ok(num_layers, pipeline, o)]


def candidate_layouts(model: ModelFacts, global_batch: int, max_gpus: int,
                      gpus_per_worker: int) -> list[Candidate]:
    """Every layout Megatron's divisibility rules accept for this model and global batch, TP within
    one worker; memory and the compiler's other rules are checked later."""
    out: list[Candidate] = []
    groups = model.num_query_groups
    worlds = possible_worlds(model, global_batch, gpus_per_worker)
    for workers, gpw in world_shapes(max_gpus, gpus_per_worker, worlds):
        world = world_size(workers, gpw)
        for tp in _divisors(gpw):
            # the rules' own predicates (megatron/divisibility.py), each citing Megatron's line
            if not (div.heads_split_over_tp(model.num_attention_heads, tp) and div.groups_fit_tp(groups, tp)):
                continue
            for cp in CONTEXT_SIZES:
                if world % (tp * cp) or not div.sequence_splits_over_cp(model.seq_length, cp):
                    continue
                for pp in _divisors(model.num_layers):
                    if world % model_parallel_size(tp, pp, cp) or not div.pipeline_split_ok(model.num_layers, pp):
                        continue
                    dp = data_parallel_size(world, tp, pp, cp)
                    if model.expert > 1 and world % (tp * model.expert * pp):
                        continue
                    for micro in MICRO_BATCHES:
                        if not div.batch_splits(global_batch, micro, dp):
                            continue
                        for vpp in _virtual_options(model.num_layers, pp):
                            for recompute in RECOMPUTE:
                                for dist in ((True, False) if dp > 1 else (False,)):
                                    out.append(Candidate(workers, gpw, tp, pp, cp, micro, vpp, recompute, dist))
    return out


# ---------------------------------------------------------------------------- sizing


class Sized(NamedTuple):
    candidate: Candidate
    peak_gb: float
    peak_fraction: float
    step: Any  # timing.StepTime
    train_seconds: float | None
    gpu_hours: float | None


def candidate_spec(spec: JobSpec, c: Candidate, gpu: Gpu) -> JobSpec:
    """The spec as the candidate's overrides would make it, for the estimator and the step model."""
    t = spec.training
    assert t.batch is not None  # main refuses a spec without one
    recompute = None
    if c.recompute == "selective":
        recompute = new(Recompute, granularity="selective", method=None, num_layers=None)
    elif c.recompute == "full":
        recompute = new(Recompute, granularity="full", method="uniform", num_layers=1)
    training = replace(t, batch=replace(t.batch, micro=c.micro), sequence_parallel=c.sequence_parallel,
                       distributed_optimizer=c.distributed_optimizer, virtual_pipeline=c.virtual_pipeline,
                       recompute=recompute)
    resources = replace(spec.resources, workers=c.workers, gpus_per_worker=c.gpus_per_worker,
                        gpu_memory_gb=gpu.memory_gb, rdma=spec.resources.rdma and c.workers > 1)
    parallelism = replace(spec.parallelism, tensor=c.tensor, pipeline=c.pipeline, context=c.context)
    return replace(spec, training=training, resources=resources, parallelism=parallelism)


def size_candidate(spec: JobSpec, c: Candidate, gpu: Gpu) -> Sized | None:
    """Memory and time of one candidate; None when it does not fit the GPU cleanly."""
    view = candidate_spec(spec, c, gpu)
    res, par = view.resources, view.parallelism
    layout = parallel_layout(res.workers, res.gpus_per_worker, par.tensor, par.pipeline, par.context, par.expert,
                             par.expert_tensor)
    if layout is None:
        return None
    est = estimate(view, layout)
    if est is None or est.peak_fraction_of_gpu is None or est.peak_fraction_of_gpu > CLEAN_PEAK_FRACTION:
        return None
    step = spec_step_time(view, gpu, layout=layout, est=est)
    if step is None:
        return None
    t = spec.training
    assert t.batch is not None  # main refuses a spec without one
    total = training_time(step.seconds, c.world, t.batch.global_, t.train_iters, t.train_samples)
    return Sized(c, est.peak_mb * 2**20 / 1e9, est.peak_fraction_of_gpu, step,
                 None if total is None else total.seconds, None if total is None else total.gpu_hours)


def rank_key(s: Sized, by: str) -> tuple[Any, ...]:
    """Time per iteration, or GPU-hours (time × GPUs when train_iters is unknown); ties by the other."""
    gpu_seconds = s.step.seconds * s.candidate.world
    return (s.step.seconds, gpu_seconds) if by == "time" else (gpu_seconds, s.step.seconds)


def ranked_layouts(path: str, display: str, spec: JobSpec, gpu: Gpu, max_gpus: int, gpus_per_worker: int,
                   top: int, by: str) -> tuple[list[Sized], int, int]:
    """The top layouts that fit and compile cleanly (one per parallel shape: its fastest micro batch,
    recompute and optimizer choice), with how many were enumerated and how many fit."""
    t, m = spec.training, spec.training.model
    # main refuses a spec without these
    assert m is not None and m.num_layers is not None and m.num_attention_heads is not None and t.batch is not None
    facts = ModelFacts(m.num_layers, m.num_attention_heads, m.num_query_groups, m.seq_length, m.num_experts,
                       spec.parallelism.expert)
    candidates = candidate_layouts(facts, t.batch.global_, max_gpus, gpus_per_worker)
    sized = [s for s in (size_candidate(spec, c, gpu) for c in candidates) if s is not None]
    sized.sort(key=lambda s: rank_key(s, by))
    chosen: list[Sized] = []
    seen: set[tuple[Any, ...]] = set()
    for s in sized:
        if s.candidate.shape in seen:
            continue
        if compile_candidate(path, display, _overrides(s.candidate, spec, gpu)):
            continue
        seen.add(s.candidate.shape)
        chosen.append(s)
        if len(chosen) == top:
            break
    return chosen, len(candidates), len(sized)


def _overrides(c: Candidate, spec: JobSpec, gpu: Gpu) -> tuple[str, ...]:
    """The candidate's --set lines, and the GPU's memory when --gpu is not the flavor's GPU."""
    extra: tuple[str, ...] = ()
    flavor_gpu = gpu_of_flavor(spec.resources.worker_flavor)
    if flavor_gpu is None or flavor_gpu.name != gpu.name:
        # the flavor names another GPU (or none): let the user pick the flavor, size memory by --gpu
        extra = ("resources.worker_flavor=null", f"resources.gpu_memory_gb={gpu.memory_gb:g}")
    return c.overrides(rdma=spec.resources.rdma) + extra


# ---------------------------------------------------------------------------- output


def tie_groups(chosen: list[Sized], error: float) -> list[list[int]]:
    """Ranks (1-based) grouped where the step times lie within the model's error of the group's
    fastest: their order inside a group is not something the model can tell apart."""
    groups: list[list[int]] = []
    start = 0.0
    for rank, s in enumerate(chosen, 1):
        if groups and s.step.seconds <= start * (1 + error):
            groups[-1].append(rank)
        else:
            groups.append([rank])
            start = s.step.seconds
    return groups


def _row(rank: int, s: Sized, overrides: tuple[str, ...], num_layers: int, tie: int) -> dict[str, Any]:
    c = s.candidate
    return {"tie_group": tie,
        "rank": rank, "gpus": c.world, "workers": c.workers, "gpus_per_worker": c.gpus_per_worker,
        "tensor": c.tensor, "pipeline": c.pipeline, "context": c.context, "data": c.data,
        "layers_per_virtual_stage": c.virtual_pipeline,
        "virtual_pipeline": s.step.virtual_pipeline, "micro": c.micro, "recompute": c.recompute,
        "sequence_parallel": c.sequence_parallel, "distributed_optimizer": c.distributed_optimizer,
        "peak_gb": round(s.peak_gb, 1), "peak_fraction": s.peak_fraction,
        "step_ms": round(s.step.seconds * 1e3, 1), "tokens_per_second": round(s.step.tokens_per_second),
        "train_hours": None if s.train_seconds is None else round(s.train_seconds / 3600, 2),
        "gpu_hours": None if s.gpu_hours is None else round(s.gpu_hours, 1),
        "terms_ms": {t.name: round(t.seconds * 1e3, 2) for t in s.step.terms if t.exposed},
        "terms": [{"name": t.name, "ms": round(t.seconds * 1e3, 3), "exposed": t.exposed, "measured": t.measured,
                   "note": t.note} for t in s.step.terms],
        "set": list(overrides),
    }


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile size`: argv without the subcommand; the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    display = args.spec

    def fail(diags: list[Diagnostic], text: str, code: int = EXIT_FAIL) -> int:
        """The diagnostics: one JSON object on stdout with --format json, else `text` on stderr."""
        if args.format == "json":
            json.dump({"ok": False, "spec": display, "diagnostics": [to_json_obj(d) for d in diags]}, out, indent=1)
            out.write("\n")
        else:
            err.write(text)
        return code

    base = compile_spec(args.spec, display, render_files=False)
    if not base.ok:
        diags = list(base.diagnostics) or [make_error("file-unreadable", "does not compile", file=display)]
        return fail(diags, format_text(diags) + "\n")
    spec = base.spec
    assert spec is not None  # a spec that compiled
    if base.facts is not None and base.facts.training is not None:
        spec = replace(spec, training=base.facts.training)  # init_from's derived model filled in
    t = spec.training
    if t.model is None or t.batch is None or t.model.num_layers is None or t.model.num_attention_heads is None:
        message = "size needs a pretrain_gpt.py spec with training.model and training.batch"
        return fail([make_error("pretrain-missing-section", message, file=display)], f"{display}: {message}\n")
    try:
        gpu = gpu_named(args.gpu) if args.gpu else (gpu_of_flavor(spec.resources.worker_flavor) or gpu_named("h200"))
    except KeyError as exc:
        return fail([make_error("value", f"--gpu: {exc.args[0]}", file=display)],
                    f"megatron-compile size: {exc.args[0]}\n", EXIT_USAGE)
    # the spec's world is within MAX_GPUS (the schema's limits), and --max-gpus is (_count)
    max_gpus = args.max_gpus or world_size(spec.resources.workers, spec.resources.gpus_per_worker)
    chosen, enumerated, fit = ranked_layouts(args.spec, display, spec, gpu, max_gpus, args.gpus_per_worker,
                                             args.top, args.rank)
    groups = tie_groups(chosen, MODEL_ERROR)
    tie_of = {rank: g for g, members in enumerate(groups, 1) for rank in members}
    rows = [_row(i, s, _overrides(s.candidate, spec, gpu), t.model.num_layers, tie_of[i]) for i, s in enumerate(chosen, 1)]
    if args.format == "json":
        json.dump({"ok": bool(rows), "spec": display, "gpu": gpu.name, "max_gpus": max_gpus, "gpus_per_worker": args.gpus_per_worker,
                   "rank_by": args.rank, "enumerated": enumerated, "fit": fit,
                   "utilisation": chosen[0].step.utilisation if chosen else None,
                   "utilisation_source": chosen[0].step.utilisation_source if chosen else None,
                   "model_error": MODEL_ERROR, "tie_groups": groups, "layouts": rows}, out, indent=1)
        out.write("\n")
    else:
        source = f"\ncalibration: utilisation {chosen[0].step.utilisation:.3f}, {chosen[0].step.utilisation_source}" if chosen else ""
        tie = (f"tie: layouts of one group differ by less than the model's error ({MODEL_ERROR:.0%}, "
               "docs/performance-model.md), so their order is not a ranking\n") if len(rows) > 1 else ""
        header = (f"{tie}{display}: {len(rows)} shown, the fastest of each parallel shape, of {enumerated} layouts "
                  f"enumerated ({fit} fit {gpu.memory_gb:g} GB "
                  f"{gpu.name.upper()} under {CLEAN_PEAK_FRACTION:.0%}), ranked by {args.rank}, up to {max_gpus} GPUs, "
                  f"{args.gpus_per_worker} per worker{source}")
        _text(rows, header, chosen if args.explain_rank else None, out)
    if not rows:
        err.write(f"{display}: no layout fits {max_gpus} {gpu.name.upper()} GPUs and compiles cleanly\n")
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:], sys.stdout, sys.stderr))
