"""Time per iteration of pretrain_gpt.py on a GPU type, before a GPU is spent (issue 26).

The model adds terms each priced on its own (docs/performance-model.md lists every constant and its
source):

    micro batch, per stage  = max(GPU, host) + the MoE layers' host time after each token-count sync
        GPU  = layer_time.stage_work: GEMMs and batched matmuls from the measured GEMM/bmm tables,
               bandwidth-bound passes counted from the source at their measured per-element cost,
               the fp32 gradient accumulation at the measured HBM rate, the head and the embedding
        host = HOST_SPEED x (the profiled host time of a layer pass x passes + of the rest of a micro
               batch) (host_time.py) + MoE's launches x the measured launch cost
    pipeline (1F1B)          = m x the slowest stage + (pp - 1) / v x the mean stage   (the bubble)
    communication            = comm_time: latency + bytes / bandwidth per link class, less overlap
    optimizer                = the measured AdamW step on the rank's shard + the grad norm, zeroing
                               and the parameter copy at the HBM rate
    iteration                = HOST_SPEED x (the profiled iteration's host work + per parameter tensor
                               without Apex or TE: the gradient norm's sync and the optimizer's copies)

The host's work is measured in profiled runs (host_time.py); its speed, HOST_SPEED, is the one constant
of the runs without TE fitted on the H200 runs (tools/validate_timing.py, leave-one-out). STACK_FACTOR
scales the GPU time for software stacks no H200 run used (Transformer Engine, Megatron-DeepSpeed);
fitted on the published runs (docs/performance-model.md), labelled so. Other GPUs than the H200
scale the GEMMs by the dense peak and the passes by the HBM bandwidth of gpus.py's table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ..tuples import NamedTuple
from .comm_time import communication
from .flops import flops_args, flops_split
from . import host_time, rates
from .host_time import iteration_tensors, layer_passes
from .optimizer_time import optimizer_seconds
from .packages import image_optimizer
from .gpus import GPUS, MEASURED_GPU, Gpu, gpu_named, gpu_of_flavor
from .layer_time import Model, StageWork, _recomputed_fraction, stage_work
from .memory import Estimate, estimate
from .parallel import ParallelLayout, parallel_layout, world_size
from .performance import gradient_accumulation_fusion, grouped_gemm, nan_check, qk_layernorm, resolve
from .pretrain import num_microbatches, padded_vocab_size, virtual_pipeline_size, vocab_size
from .data_loader import LOADER_MASK_BYTES_PER_S, loader_seconds, mask_bytes
from .schedule import bubble_fraction

if TYPE_CHECKING:  # the spec as the step model reads it
    from ..schema.records import JobSpec
    from .flags import SpecView

# BEGIN FIT (tools/validate_timing.py --write; docs/performance-model.md has the runs and the folds)
HOST_SPEED = 0.515
MODEL_ERROR = 0.35
MEASURED_SPREAD: dict[str, tuple[float, float]] = {"host": (0.69, 2.07), "GPU": (0.91, 1.59), "host-calibrated": (0.64, 1.40)}
TE_HOST_PER_LAYER = 0.003600
TE_HOST_PER_ITERATION = 0.009436
TE_HOST_PER_MICROBATCH = 0.012000
FUSED_ATTENTION_SHARE = 0.70
TE_HOST_FORWARD_SHARE = 0.80
STACK_FACTOR: dict[str, float] = {"local": 1.0, "te": 0.989, "deepspeed": 0.638}
FP8_GEMM_FACTOR = 0.60
# END FIT
FIT_SOURCE = "fitted by tools/validate_timing.py on the kept H200 runs (leave-one-out in docs/performance-model.md)"
# The profiled host figures (host_time.py) at the fitted host speed: a micro batch beyond its layers, a
# dense layer pass, an iteration beyond its parameter tensors
HOST_PER_MICROBATCH = HOST_SPEED * host_time.MICROBATCH_S
HOST_PER_LAYER = HOST_SPEED * host_time.LAYER_PASS_S
HOST_PER_ITERATION = HOST_SPEED * host_time.ITERATION_S
# Fused attention's cost per causal score beside its FLOPs: the attention dropout (Megatron's default 0.1,
# which compiled specs keep), whose random numbers cuDNN draws in the forward kernel and again in the
# backward, measured on Transformer Engine's DotProductAttention itself (tools/fused_attention_bench.py,
# tests/fixtures/h200-hosts/call8: forward and backward at b1 h16 s16384 d64, 8.01 ms with dropout 0.1 and
# 4.53 ms without, over 2^31 causal scores; s8192 gives 1.40 ps); softmax and its statistics ride in the FLOPs
FUSED_ATTENTION_SCORE_S = 1.62e-12
# FP8 GEMMs on Hopper run at twice the bf16 rate on paper; the published H100 steps (dgxc rows of
# tests/fixtures/published) give the whole step, not the GEMM: STACK_FACTOR["te-fp8"] carries it.


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
    expert_tensor: int | None = None
    tp_comm_overlap: bool = False  # --tp-comm-overlap (Transformer Engine)
    precision: str = "bf16"  # bf16, fp16 or fp8
    stack: str = "local"  # the software stack STACK_FACTOR keys: local, te, te-fp8, deepspeed-fp16 …
    model: Model = Model()
    fused_softmax: bool | None = None  # --masked-softmax-fusion (None: as fused_kernels)
    bias_activation_fusion: bool | None = None  # --bias-swiglu-fusion / --bias-gelu-fusion (None: as fused_kernels)
    grad_accumulation_fusion: bool | None = None  # --gradient-accumulation-fusion (wgrad into main_grad; None: as fused_kernels)
    grouped_gemm: bool = False  # --moe-grouped-gemm (TE's GroupedLinear experts)
    cross_entropy_fusion: bool = False  # --cross-entropy-loss-fusion
    fused_attention_share: float | None = None  # None: the fitted FUSED_ATTENTION_SHARE
    fused_attention_score_s: float | None = None  # None: FUSED_ATTENTION_SCORE_S (the measured dropout's)
    attention_mask: bool = False  # the data loader builds the causal mask (performance.Options.attention_mask)
    # --check-for-nan-in-loss-and-grad (Megatron's default; arguments.py:1164-1170 turns it off for fp16
    # with dynamic loss scaling): None, as Megatron decides
    nan_check: bool | None = None
    optimizer: str | None = None  # what Megatron imports: "te", "apex" or "torch" (host_time.optimizer_impl); None: the stack's
    # the cluster's host time over the model's (resources.host_time_factor, from `megatron-compile calibrate`): every
    # host figure scales by it; None: uncalibrated, the lent hosts' fit
    host_factor: float | None = None

    @property
    def world(self) -> int:
        return world_size(self.workers, self.gpus_per_worker)

    @property
    def microbatches(self) -> int:
        return num_microbatches(self.global_batch, self.micro_batch, self.data)

    @property
    def grad_bytes(self) -> int:
        # arguments.py:1172-1184: bf16 accumulates and reduces fp32 gradients; fp16 its own dtype
        return 2 if self.precision == "fp16" else 4


class Term(NamedTuple):
    name: str
    seconds: float
    exposed: bool  # counted in the iteration time (False: overlapped with compute)
    measured: bool  # a measured rate or a measured run backs this term
    note: str


class StageTime(NamedTuple):
    stage: str  # "first" or "last"
    microbatch_s: float  # one micro batch, forward and backward, on this stage
    gpu_s: float
    host_s: float
    layers: int
    launch_s: float = 0.0  # MoE's routing launches on the host
    moe_host_s: float = 0.0  # the experts' host time: TE's beyond their GPU time, the local experts' whole (stage_microbatch)
    gemm_share: float = 0.0  # of gpu_s, the dense GEMMs' (what FP8 speeds up)
    passes: float = 0.0  # layer passes the host runs (a recomputed forward its measured share of one)
    expert_passes: float = 0.0  # local expert passes a micro batch (layer_time StageWork; their wait is in moe_host_s)
    expert_gpu_s: float = 0.0  # one local expert pass's GPU seconds


Bound = Literal["host", "GPU"]


class StepTime(NamedTuple):
    seconds: float  # per iteration: the exposed terms summed
    terms: tuple[Term, ...]
    flops: float  # Megatron's FLOPs per iteration (the global batch)
    tokens_per_second: float
    tflops_per_gpu: float  # what Megatron would log as throughput per GPU
    utilisation: float  # Megatron's FLOPs over the GPU's dense peak in the estimated time
    utilisation_source: str
    stages: tuple[StageTime, ...] = ()
    virtual_pipeline: int | None = None  # Megatron's virtual pipeline size of the layout timed
    bound: Bound = "GPU"  # what sets the pace (pace())
    # seconds per iteration the kept H200 runs of that bound make of this estimate: MEASURED_SPREAD's ratios of
    # measured to leave-one-out estimate (lent hosts run Megatron's Python at speeds of their own)
    spread_s: tuple[float, float] = (0.0, 0.0)
    # whether the kept runs behind MEASURED_SPREAD covered this estimate's GPU and layout (H200, one GPU a
    # model replica: no tensor, pipeline, context or expert parallelism; data parallel 1 or 2)
    spread_covers: bool = False
    host_calibrated: bool = False  # the host figures carry the spec's resources.host_time_factor

    def term(self, name: str) -> Term:
        """The term of that name."""
        return next(t for t in self.terms if t.name == name)


def _scale(gpu: Gpu, w: StageWork, factor: float, fp8: bool = False) -> float:
    """The stage's GPU seconds on `gpu`: the H200's measured rates scaled by the datasheet peak
    (GEMMs, attention) and HBM bandwidth (the passes), times the stack's factor; FP8 scales the GEMMs
    by FP8_GEMM_FACTOR (fitted on the published FP8 rows)."""
    ref = GPUS[MEASURED_GPU]
    gemm = (w.gemm + w.moe) * (FP8_GEMM_FACTOR if fp8 else 1.0)  # the experts' time is mostly GEMMs
    compute = (gemm + w.attention + w.head * 0.7) * ref.bf16_dense_tflops / gpu.bf16_dense_tflops
    memory = (w.elementwise + w.grad_accumulation + w.embedding + w.head * 0.3) * ref.hbm_tb_s / gpu.hbm_tb_s
    return (compute + memory) * factor


def stack_factor(par: Parallel, gpu: Gpu | None = None) -> tuple[float, bool]:
    """The stack's GPU-time factor and whether one was fitted for it. Transformer Engine on the H200 has
    runs of its own (its terms are fitted on them): no factor there; elsewhere the published fit's."""
    if gpu is not None and gpu.name == MEASURED_GPU and _te(par) and par.precision != "fp8":
        return 1.0, True
    return STACK_FACTOR.get(par.stack, 1.0), par.stack in STACK_FACTOR


def step_time(args: Any, par: Parallel, gpu: Gpu, params_per_rank: float,
              host_per_microbatch: float | None = None, host_per_iteration: float | None = None,
              stack: float | None = None, te_host_per_layer: float | None = None,
              host_speed: float | None = None) -> StepTime:
    """Seconds per iteration for Megatron args `args` (FlopsArgs) on layout `par` of `gpu`s;
    params_per_rank: the most loaded rank's parameters (the memory estimator's). The host constants
    and the stack factor default to the committed fit (tools/validate_timing.py passes its folds'):
    host_speed scales every profiled host figure; host_per_microbatch replaces a micro batch's beyond
    its layers, host_per_iteration the whole iteration's."""
    speed = HOST_SPEED if host_speed is None else host_speed
    # a micro batch beyond its layers: the local profile's at the host's speed, TE's fitted (its multi-micro-batch runs)
    h_mb = host_per_microbatch if host_per_microbatch is not None else TE_HOST_PER_MICROBATCH if _te(par) \
        else speed * host_time.MICROBATCH_S
    factor, fitted = (stack, True) if stack is not None else stack_factor(par, gpu)
    # a layer pass on the host: Transformer Engine's layers TE_HOST_PER_LAYER (fitted on the TE runs), the local
    # layer's the profiled figure at the host's speed, by its architecture (host_time.layer_factor); a stack no
    # H200 run used (Megatron-DeepSpeed) its launches at the measured launch cost, which published_check.py fits on
    launch = rates.host_seconds_per_launch()
    h_layer = host_time.layer_factor(args, par) * (
        (TE_HOST_PER_LAYER if te_host_per_layer is None else te_host_per_layer) if _te(par)
        else speed * host_time.LAYER_PASS_S if par.stack == "local" else host_time.LAUNCHES_PER_LAYER * launch)
    if _te(par) and par.fused_attention_share is None:
        par = par._replace(fused_attention_share=FUSED_ATTENTION_SHARE)
    if _te(par) and par.fused_attention_score_s is None:
        par = par._replace(fused_attention_score_s=FUSED_ATTENTION_SCORE_S)
    pp, m, v = par.pipeline, par.microbatches, par.virtual_pipeline or 1
    hf = 1.0 if par.host_factor is None else par.host_factor
    layers = args.num_layers // pp
    passes = layer_passes(par, layers)
    # the host's share of a micro batch before the loss's sync: the local layer's measured, Transformer
    # Engine's (whose forward carries most of its Python) fitted on the TE runs
    forward_share = TE_HOST_FORWARD_SHARE if _te(par) else host_time.MICROBATCH_FORWARD_SHARE
    stages: list[StageTime] = []
    works: list[StageWork] = []
    for name, first, last in ((("first", True, pp == 1),) + ((("last", False, True),) if pp > 1 else ())):
        w = stage_work(args, par.model, par, layers, first, last)
        g = _scale(gpu, w, factor, par.precision == "fp8")
        host = (w.launches * launch + h_mb + h_layer * passes) * hf
        micro, moe_host = host_time.stage_microbatch(g, host, _nan_check(par), forward_share, w.moe_wait * hf,
                                                     w.expert_passes, w.expert_gpu, speed * hf)
        share = _scale(gpu, w._replace(attention=0, elementwise=0, grad_accumulation=0, head=0, embedding=0),
                       factor, par.precision == "fp8") / g if g else 0.0
        stages.append(StageTime(name, micro, g, host, layers,
                                w.launches * launch, moe_host, share, passes, w.expert_passes, w.expert_gpu))
        works.append(w)
    if host_per_iteration is not None:
        h_it = host_per_iteration
    elif _te(par):
        h_it = TE_HOST_PER_ITERATION
    else:
        h_it = speed * (host_time.ITERATION_S + host_time.PER_TENSOR_S * iteration_tensors(args, par))
    h_it *= hf
    slowest = max(s.microbatch_s for s in stages)
    mean = sum(s.microbatch_s for s in stages) / len(stages)
    compute = m * slowest
    bubble = bubble_fraction(pp, par.virtual_pipeline, m) * m * mean  # (pp - 1) / v micro batches
    w0 = works[-1]
    attention_s = _scale(gpu, w0._replace(gemm=0, elementwise=0, grad_accumulation=0, moe=0, head=0, embedding=0),
                         factor) / max(1, layers)
    comms = communication(args, par, gpu, layers, params_per_rank, _recomputed_fraction(par, layers),
                          backward_s=stages[-1].gpu_s * 2 / 3, forward_s=stages[0].gpu_s / 3, attention_s=attention_s,
                          moe_layers=max(w.moe_layers for w in works))
    opt_s, opt_note = optimizer_seconds(par, gpu, params_per_rank)
    optimizer = Term("optimizer", opt_s, True, True, opt_note)
    critical = max(stages, key=lambda s: s.microbatch_s)
    dominant = pace(critical.host_s + critical.moe_host_s, critical.gpu_s, False)
    terms = [
        Term("compute", compute, True, True,
             f"{m} micro batches x {slowest * 1e3:.2f} ms on the slowest stage ({dominant}-bound; "
             f"measured GEMM, bmm and per-element rates on the H200{'' if gpu.name == MEASURED_GPU else ', scaled to ' + gpu.name}"
             f"{'' if factor == 1.0 else f', x {factor:.2f} for the {par.stack} stack' + ('' if fitted else ' (no fit)')})"),
        Term("bubble", bubble, True, False, f"1F1B: (pp-1)/v = ({pp}-1)/{v} of a micro batch"),
    ]
    for c in comms:
        terms.append(Term(c.name, c.seconds, c.exposed >= c.seconds * 0.999, False, c.note))
        if 0 < c.exposed < c.seconds * 0.999:
            terms.append(Term(c.name + "-exposed", c.exposed, True, False, "what the overlap leaves on the critical path"))
    terms.append(optimizer)
    terms.append(Term("iteration", h_it, True, True, "Megatron's host-side step work per iteration, " + (
        f"Transformer Engine's {FIT_SOURCE}" if _te(par) else
        f"profiled (host_time.py{'' if host_time.fused_optimizer(par) else '; its gradient norm syncs per parameter tensor'}) "
        f"at the host's speed {FIT_SOURCE}")))
    seconds = sum(t.seconds for t in terms if t.exposed)
    loader = loader_seconds(args, par)
    loader_bound = loader > seconds
    if loader_bound:  # the data loader sets the pace: the step waits for its masks
        terms.append(Term("data-loader", loader - seconds, True, True,
                          f"the data loader's causal masks, {m} x {mask_bytes(args, par) / 1e6:.0f} MB, at the measured "
                          f"{LOADER_MASK_BYTES_PER_S / 1e9:.2f} GB/s take {loader * 1e3:.1f} ms, longer than the rest of the step"))
        seconds = loader
    split = flops_split(args, par.global_batch)
    tokens = par.global_batch * args.seq_length
    util = split.total / (seconds * par.world * gpu.bf16_dense_tflops * 1e12)
    source = (f"host per micro batch {h_mb * 1e3:.2f} ms, per layer pass {h_layer * 1e3:.2f} ms and per iteration "
              f"{h_it * 1e3:.2f} ms: profiled (host_time.py) at a host speed"
              f"{', TE micro batch, layer pass, iteration and forward share' if _te(par) else ''} {FIT_SOURCE}"
              f"{'' if par.host_factor is None else f', all x {hf:.2f} on this cluster (resources.host_time_factor)'}; "
              "every other rate measured on the H200 (tools/microbench.py)")
    bound = pace(critical.host_s + critical.moe_host_s, critical.gpu_s, loader_bound)
    # a calibrated host-bound estimate has the spread of the runs calibrated by their host's other runs
    lo, hi = MEASURED_SPREAD[f"{bound}-calibrated" if par.host_factor is not None and bound == "host" else bound]
    covers = (gpu.name == MEASURED_GPU and par.tensor == par.pipeline == par.context == par.expert == 1
              and par.data <= 2)
    return StepTime(seconds, tuple(terms), split.total, tokens / seconds, split.total / (seconds * 1e12 * par.world),
                    util, source, tuple(stages), par.virtual_pipeline, bound, (seconds * lo, seconds * hi), covers,
                    par.host_factor is not None)


def pace(host_s: float, gpu_s: float, loader_bound: bool) -> Bound:
    """What sets a step's pace, from its slowest stage's micro batch: "host" where the host's work on it (its
    launches, layers and schedule, and MoE's waits after each token-count sync) exceeds the GPU's, or the data
    loader's bound exceeds the step; else "GPU" (the NaN check's split at the loss may still leave some host
    time on the critical path: the micro batch's time says how much). The one rule for plan.md's label and
    spread and tools/validate_timing.py's rows."""
    return "host" if loader_bound or host_s > gpu_s else "GPU"


def _nan_check(par: Parallel) -> bool:
    return par.precision != "fp16" if par.nan_check is None else par.nan_check


def _te(par: Parallel) -> bool:
    return par.stack.startswith("te")


def fake_rank_seconds(step: StepTime, stage: str, microbatches: int) -> float:
    """One rank of the layout run alone with --fake-process-group (every collective skipped; tools/fakepg.py
    SEQUENTIAL=1): its stage's micro batches, its optimizer step and the iteration's host work. No pipeline
    bubble (no rank waits for another) and no communication: the rest of step_time's figure for that stage."""
    mb = next(s.microbatch_s for s in step.stages if s.stage == stage)
    return microbatches * mb + step.term("optimizer").seconds + step.term("iteration").seconds


# ---------------------------------------------------------------------------- from a spec


def gpu_of_spec(resources: Any, name: str | None = None) -> Gpu | None:
    """The GPU a --gpu name or the spec's worker flavor says."""
    return gpu_named(name) if name is not None else gpu_of_flavor(resources.worker_flavor)


def spec_step_time(spec: SpecView | JobSpec, gpu: Gpu | None = None, *, layout: ParallelLayout | None = None,
                   est: Estimate | None = None) -> StepTime | None:
    """The step model for a pretrain spec, on its layout with its memory estimate (the facts pass
    both; computed here when a caller has neither); None when the estimator cannot size it or the
    GPU is unknown."""
    t, res, par = spec.training, spec.resources, spec.parallelism
    assert res is not None  # the facts size a spec whose resources validated
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
    try:
        return step_time(flops_args(t.model, padded), parallel_of(spec, layout), gpu, est.parameters_most_loaded_rank)
    except NotImplementedError:
        return None


def parallel_of(spec: SpecView | JobSpec, layout: ParallelLayout) -> Parallel:
    """A spec's layout and batch as the step model's Parallel."""
    t, res = spec.training, spec.resources
    rec, m = t.recompute, t.model
    # a complete pretrain spec (check/facts.py pretrain_complete; `size` checks its own)
    assert res is not None and m is not None and m.num_layers is not None and t.batch is not None
    options = resolve(t, layout.data)  # the performance options as the launch passes them
    local = m.transformer_impl == "local"
    return Parallel(
        tensor=layout.tensor, pipeline=layout.pipeline, context=layout.context, data=layout.data,
        micro_batch=t.batch.micro, global_batch=t.batch.global_, gpus_per_worker=res.gpus_per_worker,
        workers=res.workers, expert=layout.expert, expert_tensor=layout.expert_tensor,
        virtual_pipeline=virtual_pipeline_size(m.num_layers, layout.pipeline, t.virtual_pipeline),
        # arguments.py:1378-1384: Megatron switches sequence parallel off with TP=1
        sequence_parallel=t.sequence_parallel and layout.tensor > 1,
        distributed_optimizer=t.distributed_optimizer,
        recompute=None if rec is None else rec.granularity,
        recompute_method=None if rec is None else rec.method,
        recompute_num_layers=None if rec is None else rec.num_layers,
        overlap_grad_reduce=options.overlap_grad_reduce, overlap_param_gather=options.overlap_param_gather,
        tp_comm_overlap=options.tp_comm_overlap, cross_entropy_fusion=options.cross_entropy_fusion,
        grouped_gemm=grouped_gemm(t), nan_check=nan_check(t), attention_mask=options.attention_mask,
        rdma=res.rdma, host_factor=res.host_time_factor, local_attention=local, fused_kernels=t.fused_kernels,
        grad_accumulation_fusion=gradient_accumulation_fusion(t),
        precision=t.precision, stack="local" if local else "te", optimizer=image_optimizer(spec.image, not local),
        model=Model(bias=not m.disable_bias_linear, rope=m.position_embedding == "rope",
                    learned_position=m.position_embedding == "learned_absolute",
                    layernorm=m.normalization != "RMSNorm", dtype="fp16" if t.precision == "fp16" else "bf16",
                    untied=m.untie_embeddings, qk_norm=qk_layernorm(t)),
    )
