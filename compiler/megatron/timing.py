"""Time per iteration of pretrain_gpt.py on a GPU type, before a GPU is spent.

FLOPs per iteration are Megatron's own (flops.py, a port of num_floating_point_operations). Time per iteration is a sum of labelled terms (docs/performance-model.md), on the GPU of the
slowest (last) pipeline stage:

    compute          = FLOPs (+ recompute, + the masked half an unfused attention computes)
                       / (dense bf16 peak × utilisation)
    attention-memory = score elements × bytes per score / HBM bandwidth      (unfused attention only)
    elementwise      = tokens × hidden × layers × bytes per unit / HBM bandwidth
    logits-memory    = the fp32 cross-entropy's bytes / HBM bandwidth
    bubble           = the four above × (pp - 1) / (v × m)   1F1B, v virtual stages, m microbatches
    tp, cp, dp, pp, ep communication = bytes / (link bandwidth × efficiency)
    optimizer        = Adam's bytes over the rank's parameters / HBM bandwidth
    overhead         = a fixed time per iteration (host-side work)

Utilisation, bytes per score, bytes per elementwise unit and the per-iteration overhead are fitted on measured single-GPU runs
(tools/fit_utilisation.py, CALIBRATION below); the communication terms come from message sizes and
datasheet bandwidths, and no multi-GPU run has checked them yet, so each says `measured=False`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .flops import FlopsSplit, flops_args, flops_split
from .gpus import LINK_EFFICIENCY, Gpu, gpu_named, gpu_of_flavor, worker_network
from .memory import Estimate, estimate
from .parallel import ParallelLayout, parallel_layout, world_size
from .pretrain import num_microbatches, padded_vocab_size, train_iterations, virtual_pipeline_size, vocab_size
from .schedule import bubble_fraction



class Calibration(NamedTuple):
    """The fitted constants of one GPU type (tools/fit_utilisation.py)."""

    utilisation: float  # achieved fraction of the dense bf16 peak on Megatron's FLOPs
    attention_bytes_per_score: float  # HBM bytes per attention score per layer, fwd+bwd (unfused attention)
    elementwise_bytes: float  # HBM bytes per token, hidden unit and layer, fwd+bwd, between the GEMMs
    source: str
    fitted: bool = False  # measured runs back these numbers
    iteration_overhead_ms: float = 0.0  # per iteration, whatever the model: Megatron's host-side step work


# Fitted by tools/fit_utilisation.py (docs/performance-model.md); a GPU without its own fit uses the
# H200's, and with none at all DEFAULT_CALIBRATION, which is an assumption and says so.
# BEGIN FIT (tools/fit_utilisation.py --write; docs/performance-model.md has the runs)
CALIBRATION: dict[str, Calibration] = {
    "h200": Calibration(
        utilisation=0.6218, attention_bytes_per_score=84.25, elementwise_bytes=417.26,
        source='fitted on 9 H200 runs (b1, gqa4-h2048, h1536, l12-full-u1, l24-full-b12, l4-sel, s4096-b2, s8192-l4, v151936) by tools/fit_utilisation.py; checked on the other 8',
        fitted=True, iteration_overhead_ms=16.87),
}
# END FIT
DEFAULT_CALIBRATION = Calibration(
    0.4, 48.0, 0.0, "assumed (no fit): 40 % of peak; 48 bytes per score is a count of the unfused "
    "attention's passes (baddbmm, scale, mask, softmax, dropout, bmm and their backward)")

BF16_BYTES = 2
FP32_BYTES = 4
# The vocab-parallel cross-entropy (megatron/core/tensor_parallel/cross_entropy.py) casts the logits
# to fp32 and makes about ten passes over them forward and backward (max, subtract, exp, sum, divide,
# the gradient): 40 bytes per logit, counted, not fitted.
LOGITS_BYTES_PER_ELEMENT = 40
# The fit's elementwise bytes come from runs without fused kernels (--no-bias-gelu-fusion,
# --no-bias-dropout-fusion, --no-persist-layer-norm, torch LayerNorm). With the fusions a layer makes
# about 40 % of those passes over its activations (a count: fused LayerNorm, bias-GeLU and
# bias-dropout-add each read and write once where the unfused ops make two or three passes). Not measured.
FUSED_ELEMENTWISE_SHARE = 0.4
# Adam with fp32 main params (megatron/core/optimizer/optimizer.py, Float16OptimizerWithFloat16Params):
# per local parameter it reads the fp32 grad, main param, exp_avg, exp_avg_sq (16 bytes) and writes
# main param, both moments (12) and the bf16 model param (2).
ADAM_BYTES_PER_PARAM = 30
HBM_EFFICIENCY = 0.8  # streaming kernels reach about 80 % of the HBM datasheet rate; an assumption


# ---------------------------------------------------------------------------- the step model


class Parallel(NamedTuple):
    """One parallel layout and batch in Megatron's terms, and the kernels the run uses."""

    tensor: int
    pipeline: int
    context: int
    data: int
    micro_batch: int
    global_batch: int
    gpus_per_worker: int
    workers: int
    expert: int = 1
    virtual_pipeline: int | None = None  # virtual stages per pipeline rank (None: no interleaving)
    sequence_parallel: bool = False
    distributed_optimizer: bool = False
    recompute: str | None = None  # None, "selective" or "full"
    recompute_method: str | None = None  # "uniform" or "block" (full only)
    recompute_num_layers: int | None = None
    overlap_grad_reduce: bool = False  # arguments.py:2750, off unless the job passes the flag
    overlap_param_gather: bool = False  # arguments.py:2771
    rdma: bool = False
    local_attention: bool = False  # transformer_impl: local, the unfused attention of dot_product_attention.py
    fused_kernels: bool = True  # training.fused_kernels: false passes the --no-*-fusion flags

    @property
    def world(self) -> int:
        return world_size(self.workers, self.gpus_per_worker)

    @property
    def microbatches(self) -> int:
        return num_microbatches(self.global_batch, self.micro_batch, self.data)


class Term(NamedTuple):
    name: str
    seconds: float
    exposed: bool  # counted in the iteration time (False: overlapped with compute)
    measured: bool  # a measured run backs this term's constants
    note: str


class StepTime(NamedTuple):
    seconds: float  # per iteration: the exposed terms summed
    terms: tuple[Term, ...]
    flops: float  # Megatron's FLOPs per iteration (the global batch)
    tokens_per_second: float
    tflops_per_gpu: float  # what Megatron would log as throughput per GPU
    utilisation: float
    utilisation_source: str

    def term(self, name: str) -> Term:
        """The term of that name."""
        return next(t for t in self.terms if t.name == name)


class Work(NamedTuple):
    """One iteration's work on one GPU of the slowest (last) pipeline stage, before any constant."""

    megatron_flops: float  # Megatron's own count for this GPU's share
    flops: float  # what runs: + recompute, + the masked half a local attention computes anyway
    scores: float  # attention-score elements the local attention streams through HBM (0 when fused)
    elementwise: float  # tokens × hidden × layers: what the non-GEMM ops scale with
    logits_bytes: float  # the fp32 cross-entropy's traffic


# Recomputing repeats the forward, a third of the forward-and-backward work (training.py:626's 3x).
FORWARD_SHARE = 1 / 3


def _recomputed_fraction(par: Parallel, layers_per_stage: int) -> float:
    """Share of a stage's layers that full recompute re-runs (transformer_block.py _checkpointed_forward):
    uniform re-runs every layer; block the first recompute_num_layers of each model chunk."""
    if par.recompute != "full":
        return 0.0
    if par.recompute_method == "block":
        chunk = layers_per_stage // (par.virtual_pipeline or 1)
        return min(1.0, (par.recompute_num_layers or chunk) / max(1, chunk))
    return 1.0


def work(args: Any, par: Parallel) -> Work:
    """The per-GPU work of one iteration on the last pipeline stage (it holds the output layer:
    Megatron splits layers evenly and account_for_*_in_pipeline_split are off by default)."""
    split = flops_split(args, par.global_batch)
    pp, tp, cp = par.pipeline, par.tensor, par.context
    layers = args.num_layers // pp
    gpus = par.world // pp
    core_per_layer = split.core_attention / (args.num_layers + (args.mtp_num_layers or 0))
    megatron = (split.per_layer * layers + split.logits) / gpus
    fraction = _recomputed_fraction(par, layers)
    selective = par.recompute == "selective"
    # transformer_config.py:1583-1584: selective recompute re-runs core attention's forward
    recompute = split.per_layer * layers * fraction * FORWARD_SHARE + (
        core_per_layer * layers * FORWARD_SHARE if selective else 0.0)
    # Megatron counts the causal half of QK^T and (QK^T)V (training.py:724-730); the local
    # attention multiplies the whole s × s and masks afterwards
    unmasked = core_per_layer * layers * (1 + FORWARD_SHARE * (fraction or selective)) if par.local_attention else 0.0
    tokens = par.global_batch * args.seq_length / (par.data * cp)
    scores = 0.0
    if par.local_attention:
        per_layer = par.global_batch / par.data * (args.num_attention_heads / tp) * (args.seq_length / cp) * args.seq_length
        scores = per_layer * layers * (1 + FORWARD_SHARE * (fraction or selective))
    # sequence parallel shards the norms, dropouts and residual adds over TP; without it only the
    # MLP's and attention's inner parts are sharded, and the rest dominates
    elementwise = tokens * args.hidden_size * layers / (tp if par.sequence_parallel else 1) * (1 + FORWARD_SHARE * fraction)
    logits = LOGITS_BYTES_PER_ELEMENT * tokens * args.padded_vocab_size / tp
    return Work(megatron, megatron + (recompute + unmasked) / gpus, scores, elementwise, logits)


def _ring(n: int, bytes_: float, gb_s: float, all_reduce: bool) -> float:
    """Seconds for one ring collective over n ranks: all-reduce moves 2(n-1)/n of the message per
    rank, reduce-scatter and all-gather (n-1)/n (NCCL's bus-bandwidth convention)."""
    if n <= 1:
        return 0.0
    factor = 2 * (n - 1) / n if all_reduce else (n - 1) / n
    return factor * bytes_ / (gb_s * 1e9 * LINK_EFFICIENCY)


def calibration_for(gpu: Gpu) -> Calibration:
    """The GPU's own fit, else the H200's (noted in its source), else DEFAULT_CALIBRATION."""
    if gpu.name in CALIBRATION:
        return CALIBRATION[gpu.name]
    if "h200" in CALIBRATION:
        fit = CALIBRATION["h200"]
        return fit._replace(source=f"the H200 fit applied to {gpu.name}: {fit.source}")
    return DEFAULT_CALIBRATION


def step_time(args: Any, par: Parallel, gpu: Gpu, params_per_rank: float, utilisation: float | None = None,
              calibration: Calibration | None = None) -> StepTime:
    """Seconds per iteration for Megatron args `args` (FlopsArgs) on layout `par` of `gpu`s;
    params_per_rank is the most loaded rank's parameter count (the memory estimator's). A given
    utilisation replaces the calibration's."""
    cal = calibration or calibration_for(gpu)
    if utilisation is not None:
        cal = cal._replace(utilisation=utilisation, source="utilisation given")
    w = work(args, par)
    split = flops_split(args, par.global_batch)
    pp, m, v = par.pipeline, par.microbatches, par.virtual_pipeline or 1
    peak = gpu.bf16_dense_tflops * 1e12 * cal.utilisation
    hbm = gpu.hbm_tb_s * 1e12 * HBM_EFFICIENCY
    compute = w.flops / peak
    attention = cal.attention_bytes_per_score * w.scores / hbm
    elementwise = cal.elementwise_bytes * w.elementwise / hbm * (FUSED_ELEMENTWISE_SHARE if par.fused_kernels else 1.0)
    logits = w.logits_bytes / hbm
    per_microbatch_work = compute + attention + elementwise + logits
    bubble = per_microbatch_work * bubble_fraction(pp, v, m)
    terms = [
        Term("compute", compute, True, cal.fitted,
             f"{w.flops / 1e12:.1f} TFLOP on a last-stage GPU ({w.megatron_flops / 1e12:.1f} by Megatron's count"
             f"{', + recompute' if par.recompute else ''}{', + the masked half' if par.local_attention else ''}) at "
             f"{cal.utilisation:.3f} of {gpu.bf16_dense_tflops:g} TFLOP/s"),
        Term("attention-memory", attention, True, cal.fitted,
             f"{w.scores / 1e9:.1f} G attention scores × {cal.attention_bytes_per_score:.0f} bytes through HBM "
             "(unfused attention)" if par.local_attention else "fused attention keeps the scores on chip"),
        Term("elementwise", elementwise, True, cal.fitted and not par.fused_kernels,
             f"{cal.elementwise_bytes:.1f} bytes per token, hidden unit and layer through HBM (norms, activations, "
             "dropouts, residuals)" + (f", × {FUSED_ELEMENTWISE_SHARE} for fused kernels" if par.fused_kernels else "")),
        Term("logits-memory", logits, True, False,
             f"{LOGITS_BYTES_PER_ELEMENT} bytes per logit of the fp32 cross-entropy (a count, not fitted)"),
        Term("bubble", bubble, True, False, f"1F1B: (pp-1)/(v·m) = ({pp}-1)/({v}·{m}) of the work above"),
        Term("overhead", cal.iteration_overhead_ms / 1e3, True, cal.fitted,
             "per iteration whatever the model: the optimizer's launches, grad-norm, timers and logging on the host"),
    ]
    terms += _communication(args, par, gpu, params_per_rank, split, peak, _recomputed_fraction(par, args.num_layers // pp))
    terms.append(_optimizer(par, gpu, params_per_rank))
    seconds = sum(t.seconds for t in terms if t.exposed)
    tokens = par.global_batch * args.seq_length
    return StepTime(seconds, tuple(terms), split.total, tokens / seconds,
                    split.total / (seconds * 1e12 * par.world), cal.utilisation, cal.source)


def _communication(args: Any, par: Parallel, gpu: Gpu, params_per_rank: float, split: FlopsSplit,
                   peak: float, recompute_fraction: float) -> list[Term]:
    """The TP, CP, DP, PP and EP terms: message sizes over the link each group crosses."""
    pp, tp, cp, dp = par.pipeline, par.tensor, par.context, par.data
    m, v, b = par.microbatches, par.virtual_pipeline or 1, par.micro_batch
    layers = args.num_layers // pp
    net = worker_network(par.rdma, par.gpus_per_worker)

    def link(span: int) -> tuple[float, str]:
        # ranks are laid out tp-cp-ep-dp-pp (parallel_state.py RankGenerator): a group whose
        # consecutive span fits in one worker stays on NVLink
        if span <= par.gpus_per_worker:
            return gpu.nvlink_gb_s, gpu.intra_link
        return net.gb_s_per_gpu, "worker network"

    activation = b * (args.seq_length / cp) * args.hidden_size * BF16_BYTES
    out: list[Term] = []
    # TP: two all-reduces per layer forward and two backward (attention and MLP outputs); with
    # sequence parallel an all-gather + reduce-scatter pair each, the same bytes. Full recompute
    # repeats the forward's. Not overlapped: --tp-comm-overlap is off by default and needs TE's userbuffers.
    bw, where = link(tp)
    per_layer = 4 + 2 * recompute_fraction
    tp_s = layers * m * per_layer * _ring(tp, activation, bw, all_reduce=True)
    out.append(Term("tp", tp_s, True, False, f"{per_layer:g} all-reduce equivalents of {activation / 2**20:.0f} MiB "
                    f"per layer and microbatch over {where}" if tp > 1 else "no tensor parallelism"))
    # CP: ring attention passes each rank's K and V chunk around cp-1 times forward, K, V and their
    # gradients backward (3 × (cp-1) chunks); Transformer Engine overlaps them with attention compute.
    groups = args.num_query_groups if args.group_query_attention else args.num_attention_heads
    kv = 2 * b * (args.seq_length / cp) * max(1, groups // tp) * args.kv_channels * BF16_BYTES
    bw, where = link(tp * cp)
    cp_comm = layers * m * 3 * (cp - 1) * kv / (bw * 1e9 * LINK_EFFICIENCY)
    attention = split.core_attention / (args.num_layers + (args.mtp_num_layers or 0)) * layers / (par.world // pp) / peak
    out.append(Term("cp", max(0.0, cp_comm - attention), True, False,
                    f"{cp_comm * 1e3:.1f} ms of K/V exchange over {where}, less the {attention * 1e3:.1f} ms of "
                    "attention it overlaps" if cp > 1 else "no context parallelism"))
    # DP: gradients are fp32 in bf16 training (arguments.py:1172-1184) and reduced over the data
    # parallel group with the context-parallel ranks in it (CP ranks hold the same weights:
    # megatron/core/distributed/distributed_data_parallel.py:83,201 reduce over dp_cp_group); the
    # distributed optimizer reduce-scatters them and all-gathers the bf16 parameters, else one all-reduce.
    bw, where = link(tp * cp * dp)
    grads = params_per_rank * FP32_BYTES
    dp = dp * cp
    if par.distributed_optimizer:
        reduce = _ring(dp, grads, bw, all_reduce=False)
        gather = _ring(dp, params_per_rank * BF16_BYTES, bw, all_reduce=False)
        out.append(Term("dp-grads", reduce, not par.overlap_grad_reduce, False,
                        f"reduce-scatter of {grads / 2**30:.2f} GiB fp32 grads over {where}"
                        + (", overlapped with backward" if par.overlap_grad_reduce else "")))
        out.append(Term("dp-params", gather, not par.overlap_param_gather, False,
                        f"all-gather of the bf16 params over {where}"
                        + (", overlapped with forward" if par.overlap_param_gather else "")))
    else:
        out.append(Term("dp-grads", _ring(dp, grads, bw, all_reduce=True), not par.overlap_grad_reduce, False,
                        f"all-reduce of {grads / 2**30:.2f} GiB fp32 grads over {where}"
                        + (", overlapped with backward" if par.overlap_grad_reduce else "")))
    # PP: each microbatch's activation goes forward and its gradient back across every stage
    # boundary, v times with interleaving; the tensor is sequence-sharded with SP (schedules.py get_tensor_shapes).
    message = activation / (tp if par.sequence_parallel and tp > 1 else 1)
    bw, where = (net.gb_s_per_gpu, "worker network") if pp > 1 and par.world > par.gpus_per_worker else (
        gpu.nvlink_gb_s, gpu.intra_link)
    pp_s = 2 * m * v * message / (bw * 1e9 * LINK_EFFICIENCY) if pp > 1 else 0.0
    out.append(Term("pp", pp_s, True, False, f"2·m·v = {2 * m * v} sends of {message / 2**20:.1f} MiB over {where}"
                    if pp > 1 else "no pipeline parallelism"))
    if par.expert > 1 and args.num_experts is not None:
        # four all-to-alls per MoE layer and microbatch (dispatch and combine, forward and backward)
        bw, where = link(par.expert * tp)
        tokens = activation * args.moe_router_topk
        ep_s = layers * m * 4 * (par.expert - 1) / par.expert * tokens / (bw * 1e9 * LINK_EFFICIENCY)
        out.append(Term("ep", ep_s, True, False, f"all-to-all of routed tokens over {where}"))
    return out


def _optimizer(par: Parallel, gpu: Gpu, params_per_rank: float) -> Term:
    """Adam's step streams its state through HBM: memory-bound, not FLOP-bound."""
    # the distributed optimizer shards over data × context parallel ranks (training.py:1586-1588)
    local = params_per_rank / (par.data * par.context) if par.distributed_optimizer else params_per_rank
    bytes_ = ADAM_BYTES_PER_PARAM * local + FP32_BYTES * params_per_rank  # + zeroing the grad buffer
    return Term("optimizer", bytes_ / (gpu.hbm_tb_s * 1e12 * HBM_EFFICIENCY), True, False,
                f"{bytes_ / 2**30:.1f} GiB of Adam state and grads through {gpu.hbm_tb_s:g} TB/s HBM")


class TrainingTime(NamedTuple):
    iterations: int
    seconds: float
    gpu_hours: float


def training_time(step: StepTime, world: int, global_batch: int, train_iters: int | None = None,
                  train_samples: int | None = None) -> TrainingTime | None:
    """Time to train_iters, or to train_samples // global batch (training.py:1504, constant batch)."""
    if train_iters is None and train_samples is None:
        return None
    iterations = train_iterations(train_iters, train_samples, global_batch)
    seconds = iterations * step.seconds
    return TrainingTime(iterations, seconds, seconds * world / 3600)


# ---------------------------------------------------------------------------- from a spec


def gpu_of_spec(resources: Any, name: str | None = None) -> Gpu | None:
    """The GPU a --gpu name or the spec's worker flavor says."""
    return gpu_named(name) if name is not None else gpu_of_flavor(resources.worker_flavor)


def spec_step_time(spec: Any, gpu: Gpu | None = None, utilisation: float | None = None,
                   calibration: Calibration | None = None, *, layout: ParallelLayout | None = None,
                   est: Estimate | None = None) -> StepTime | None:
    """The step model for a pretrain spec, on its layout with its memory estimate (the facts pass
    both; computed here when a caller has neither); None when the estimator cannot size it or the
    GPU is unknown."""
    t, res, par = spec.training, spec.resources, spec.parallelism
    gpu = gpu or gpu_of_flavor(res.worker_flavor)
    if gpu is None or t.model is None or t.batch is None:
        return None
    if layout is None:
        layout = parallel_layout(res.workers, res.gpus_per_worker, par.tensor, par.pipeline, par.context, par.expert,
                                 par.expert_tensor)
    vocab = vocab_size(t)
    if layout is None or vocab is None:
        return None
    est = est if est is not None else estimate(spec, layout)
    if est is None:
        return None
    padded = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, layout.tensor)
    return step_time(flops_args(t.model, padded), parallel_of(spec, layout), gpu,
                     est.parameters_most_loaded_rank, utilisation, calibration)


def parallel_of(spec: Any, layout: Any) -> Parallel:
    """A spec's layout and batch as the step model's Parallel."""
    t, res = spec.training, spec.resources
    rec = t.recompute
    args = set(t.args)
    return Parallel(
        tensor=layout.tensor, pipeline=layout.pipeline, context=layout.context, data=layout.data,
        micro_batch=t.batch.micro, global_batch=t.batch.global_, gpus_per_worker=res.gpus_per_worker,
        workers=res.workers, expert=layout.expert,
        virtual_pipeline=virtual_pipeline_size(t.model.num_layers, layout.pipeline, t.virtual_pipeline),
        # arguments.py:1378-1384: Megatron switches sequence parallel off with TP=1
        sequence_parallel=t.sequence_parallel and layout.tensor > 1,
        distributed_optimizer=t.distributed_optimizer,
        recompute=None if rec is None else rec.granularity,
        recompute_method=None if rec is None else rec.method,
        recompute_num_layers=None if rec is None else rec.num_layers,
        overlap_grad_reduce="--overlap-grad-reduce" in args, overlap_param_gather="--overlap-param-gather" in args,
        rdma=res.rdma, local_attention=t.model.transformer_impl == "local", fused_kernels=t.fused_kernels,
    )
