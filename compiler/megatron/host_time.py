"""Megatron's host work per layer pass, per micro batch and per iteration, measured in torch-profiler
traces of pretrain_gpt.py on the lent H200 (issue 26).

Where the GPU has little to do, a step is the host's time: Python, autograd and the kernel launches of
every op. tests/fixtures/measurements/profiles holds two profiled runs of compiled launch commands
(`transformer_impl: local`, no Apex or TE, bf16, the distributed optimizer, log interval 1);
`python tools/trace_summary.py TRACE --phases` splits each profiled step into its micro batches (the data
loader's `__next__` opens one), each micro batch's forward (main thread) and backward (autograd thread),
each dense layer's forward and backward (between consecutive QKV Linear calls), and the iteration's own
host work after the last backward (the host's time waiting in synchronising calls taken out: that is the
GPU's optimizer work, priced on its own):

- tiny-l2-h256 (L2 h256, 4 micro batches, 28 parameter tensors): a micro batch 17.2 ms from one data
  loader call to the next, of which each dense layer 5.76 ms (forward 2.66, backward 3.10), the rest
  (embedding, output layer and cross entropy, loss function, the schedule's Python) 5.64 ms; the forward
  0.505 of the micro batch's forward and backward; the iteration 10.1 ms;
- moe8-top2 (L4 with 8 local experts, 1 micro batch, 96 parameter tensors): the iteration 22.6 ms.

The iteration's host work grows with the parameter tensors: without Apex or TE the gradient norm is
megatron/core/utils.py:1185 local_multi_tensor_l2_norm, a torch.norm and a host sync (`torch.tensor` of
CUDA scalars) per tensor, and the distributed optimizer copies each tensor's gradient to its fp32 main
gradient and each main parameter back (distrib_optimizer.py). The two traces give 0.184 ms a tensor and
4.94 ms for the rest (the optimizer step's launches, timers, logging, the barrier of the interval timer).

These are profiled times on one lent machine: torch.profiler adds a few microseconds to each op and each
lent host runs Python at its own speed. timing.HOST_SPEED converts them to a run's time: the one host
constant of the model, fitted on the runs without TE (tools/validate_timing.py, leave-one-out). The split
between layers, micro batch and iteration is measured; only its scale is fitted.
"""

from __future__ import annotations

from typing import Any

from .flops import query_groups
from .layer_time import _recomputed_fraction

# profiled seconds (tools/trace_summary.py --phases on the fixtures; tests/test_host_time.py recomputes them)
LAYER_PASS_S = 5.76e-3  # one dense layer's forward and backward
LAYER_FORWARD_SHARE = 0.46  # of it, the forward (what full recompute repeats)
PROFILED_MICROBATCH_S = 5.64e-3  # a micro batch beyond its layers, as the profile split it (0.98 of a layer pass)
# A micro batch beyond its layers, in layer passes, unprofiled (device call 43, tools/host_split_fit.py, by the rule
# written down before it ran): the tiny GPT at 1-8 layers x 1-8 micro batches, each point twice, on one host, each
# run over its neighbouring references' speed: 2.162 passes (90 % 1.45-3.80), where the profile's 0.98 lies outside.
# The profiler adds its cost to every op, most of them a layer's: it took the split toward the layers. Call 42's grid,
# without the references, could not tell (0.21-4.29: the host drifted 30 %). The iteration's terms stay the
# profile's (the grid's intervals for them hold 0).
MICROBATCH_PASSES = 2.162
MICROBATCH_S = LAYER_PASS_S * MICROBATCH_PASSES
MICROBATCH_FORWARD_SHARE = 0.505  # of a micro batch's host time, before the loss (the NaN check's sync)
ITERATION_S = 4.94e-3  # the iteration's host work beyond its per-tensor part
PER_TENSOR_S = 1.84e-4  # per parameter tensor of the rank, without Apex or TE (grad norm sync, copies): the slope
# of a line through the two profiles (28 and 96 tensors; the second's iteration also holds MoE work), not measured alone
# A local layer pass's host time by architecture, against the GPT layer (LayerNorm, GeLU, biases, one key/value head
# a query head) the profile measured: tools/layer_host_bench.py timed Megatron's own TransformerBlock at the pinned
# commit under its DDP, the local spec with the compiled launches' unfused kernels, each feature alone on the GPT
# layer, 40 rounds interleaved (tests/fixtures/h200-hosts/call21/pre-bench.txt; each feature's median layer pass over
# the GPT layer's, less one; the rounds' quartiles are about +-15 % of a pass). RoPE's rotations are a dozen small ops
# each way unfused; the query/key norms two modules more; without biases their adds and gradients go. Added up they
# give the Llama layer 1.33 (measured 1.31) and Qwen3's 1.42 (1.35). Call 22 ran RoPE beside its twin on one host:
# +14.6 % a step, where this share gives +30 %. Transformer Engine's layer is not scaled: of its features the bench
# resolved only the query/key norms (+25 %) and no biases (-10 %) beyond the rounds' spread, and TE's features added
# overshoot its whole Qwen3 layer (1.16 against 1.05 of GPT's 4.47 ms); its fitted pass is over the TE runs of every
# architecture, and TE's query/key norms' host time is priced nowhere else.
# Megatron's local experts (SequentialMLP, moe_grouped_gemm off): one expert's host time a micro batch, forward and
# backward (its two Linear modules, their autograd functions, the activation, the probabilities' product, the token
# slicing, each weight's gradient hook, its GEMM calls at token counts cuBLAS meets new or again), as a share of the
# GPT layer pass. Measured on Megatron's own MoE layer at the pinned commit (tools/moe_host_bench.py, device call 34,
# tests/fixtures/h200-hosts/call34/moe_host-bench.json): the local spec with the allgather dispatcher in its DDP at
# h256 and 8192 tokens a step, a new input each step (the token counts change as in training), 16 interleaved
# rounds: the layer pass's least-squares slope over 8, 16, 32 and 64 experts at top 2, 1.245 ms an expert, over the
# GPT layer pass timed in the same rounds (3.709 ms): 0.336, decided before the call (its README). The top-4 and
# top-8 rows sit 5-14 % under the line; Python's automatic collector changed the slope by less than the rounds'
# spread (1.31 against 1.25 ms: no term for --manual-gc off); the same input every step (every count planned) 0.99.
LOCAL_EXPERT_SHARE = 0.336
# Of it, the forward's (the host's time until the MoE block's forward returns, the token-count synchronisations
# within it): the least-squares slope over the experts of the forward layer pass over that of the whole layer pass,
# device call 35's bench (tests/fixtures/h200-hosts/call35/moe_host-bench.json: 0.271 against 0.718 ms an
# expert), by the rule written down before it. The backward has no synchronisation: its share runs beside the GPU.
LOCAL_EXPERT_FORWARD_SHARE = 0.377


LAYER_FEATURES = {"rope": 0.353, "swiglu": 0.046, "gqa": 0.087, "rmsnorm": 0.006, "no-bias": -0.158, "qk-norm": 0.089}


def layer_features(args: Any, par: Any) -> tuple[str, ...]:
    """The features of LAYER_FEATURES a local model's layers have (args: FlopsArgs; par: timing.Parallel): RoPE
    only unfused (fused_kernels: false, as the bench ran it: a fused RoPE is one kernel each way), SwiGLU only in a
    dense model's layers (a MoE layer's experts are priced on their own); none on another stack, nor with
    multi-latent attention (TE's in every run here)."""
    if par.stack != "local" or getattr(args, "multi_latent_attention", False):
        return ()
    m = par.model
    on = {"rope": m.rope and not par.fused_kernels, "swiglu": args.swiglu and args.num_experts is None,
          "gqa": query_groups(args) < args.num_attention_heads, "rmsnorm": not m.layernorm, "no-bias": not m.bias,
          "qk-norm": m.qk_norm}
    return tuple(f for f, v in on.items() if v)


def layer_factor(args: Any, par: Any) -> float:
    """A layer pass's host time over the GPT layer's: 1 plus each of its features' measured share (layer_features)."""
    return 1.0 + sum(LAYER_FEATURES[f] for f in layer_features(args, par))


# Kernels a local layer launches a pass (norms, linears and their bias adds, RoPE, the attention's reshapes,
# softmax, dropouts, residuals, forward and backward; counted from the source): the host floor of a stack
# no profile measured, at the measured launch cost
LAUNCHES_PER_LAYER = 120


def param_tensors(args: Any, model: Any, layers: int, first: bool, last: bool, untied: bool = False,
                  expert_parallel: int = 1) -> int:
    """Parameter tensors on a stage: each layer's norms (weight, and bias with LayerNorm) and linears
    (weight, and bias with add_bias_linear: QKV, projection, FC1, FC2; with MoE the router and each
    local expert's FC1 and FC2: num_experts / EP of them), the first stage's word (and learned position) embeddings, the last
    stage's final norm and output layer (the embedding's copy where tied and the stages differ)."""
    norm = 2 if model.layernorm else 1
    linear = 2 if model.bias else 1
    per_layer = 2 * norm + 2 * linear + (2 * norm if model.qk_norm else 0)  # --qk-layernorm: the query's and key's
    if args.num_experts is None:
        per_layer += 2 * linear
    else:
        per_layer += 1 + 2 * linear * max(1, args.num_experts // expert_parallel)
    n = layers * per_layer
    if first:
        n += 1 + (1 if model.learned_position else 0)
    if last:
        n += norm + (1 if untied or not first else 0)
    return n


# The GPU's share of a micro batch before its loss: a third (the backward's two GEMMs per forward one)
GPU_FORWARD_SHARE = 1 / 3


def stage_microbatch(gpu_s: float, host_s: float, nan_check: bool, forward_share: float, te_wait: float,
                     expert_passes: float, expert_gpu_s: float, host_speed: float) -> tuple[float, float]:
    """(a stage's micro batch seconds, its experts' host seconds) from its GPU and host time (microbatch_seconds).
    Each of `expert_passes` local expert passes (SequentialMLP) takes its measured host time, LOCAL_EXPERT_SHARE of
    the profiled layer pass at the host's speed. Its forward share (LOCAL_EXPERT_FORWARD_SHARE) comes after the
    token-count synchronisations, which leave nothing queued: what it takes beyond the expert's forward GPU time
    (GPU_FORWARD_SHARE of `expert_gpu_s`) is waited for. Its backward has no synchronisation and joins the backward's
    host work beside the GPU's. `te_wait`: Transformer Engine's experts' host time beyond their GPU time, waited for."""
    expert = host_speed * LOCAL_EXPERT_SHARE * LAYER_PASS_S
    forward = expert_passes * max(0.0, LOCAL_EXPERT_FORWARD_SHARE * expert - expert_gpu_s * GPU_FORWARD_SHARE)
    backward = expert_passes * (1 - LOCAL_EXPERT_FORWARD_SHARE) * expert
    micro = microbatch_seconds(gpu_s, host_s, nan_check, forward_share, backward) + te_wait + forward
    return micro, te_wait + forward + backward


def microbatch_seconds(gpu_s: float, host_s: float, nan_check: bool,
                       forward_share: float = MICROBATCH_FORWARD_SHARE, backward_host_s: float = 0.0) -> float:
    """One micro batch from its GPU and host time. With the NaN check, the loss function's isnan/isinf
    (pretrain_gpt.py:151-165, rerun_state_machine.validate_result: a host sync) splits it: the host
    cannot launch the backward before the GPU has finished the forward, so forward and backward each
    take the longer of the two (the host's forward `forward_share` of its time); without it the host
    runs ahead across both. `backward_host_s`: host work of the backward alone (the local experts')."""
    if not nan_check:
        return max(gpu_s, host_s + backward_host_s)
    return (max(gpu_s * GPU_FORWARD_SHARE, host_s * forward_share)
            + max(gpu_s * (1 - GPU_FORWARD_SHARE), host_s * (1 - forward_share) + backward_host_s))


# Megatron's warning where neither TE nor Apex imports (optimizer/__init__.py:25): torch's AdamW and the per-tensor
# gradient norm follow; a log without it ran TE's (no lent host had Apex; tools/validate_timing.py reads it)
TORCH_OPTIMIZER_WARNING = "Transformer Engine and Apex are not installed. Falling back to Torch optimizers."


def optimizer_impl(par: Any) -> str:
    """The optimizer and gradient norm Megatron imports (par: timing.Parallel): TE's FusedAdam and multi-tensor
    norm wherever TE imports (optimizer/__init__.py:14, clip_grads.py:12), whatever transformer_impl the layers
    take, else Apex's (:20; the Megatron-DeepSpeed stack); torch's AdamW (foreach) and the per-tensor
    local_multi_tensor_l2_norm only without either: "te", "apex" or "torch". par.optimizer where the run says
    what its environment installed (tools/validate_timing.py reads Megatron's fallback warning), else the stack's."""
    if par.optimizer is not None:
        return str(par.optimizer)
    return "te" if par.stack.startswith("te") else "apex" if par.stack.startswith("deepspeed") else "torch"


def fused_optimizer(par: Any) -> bool:
    """Whether the optimizer and gradient norm are fused multi-tensor kernels (TE's or Apex's)."""
    return optimizer_impl(par) != "torch"


def layer_passes(par: Any, layers: int) -> float:
    """Layer passes a stage's host runs a micro batch (par: timing.Parallel): each layer's forward and
    backward, and full recompute's forward again: the local layer's measured share of a pass
    (LAYER_FORWARD_SHARE); Transformer Engine's, which no profile measured, the GPU's third."""
    share = GPU_FORWARD_SHARE if par.stack.startswith("te") else LAYER_FORWARD_SHARE
    return layers * (1 + _recomputed_fraction(par, layers) * share)


def iteration_tensors(args: Any, par: Any) -> int:
    """Parameter tensors the most loaded stage's optimizer walks one by one (without Apex or TE: the local
    gradient norm's sync, the distributed optimizer's copies); 0 with a fused optimizer."""
    if fused_optimizer(par):
        return 0
    pp, layers = par.pipeline, args.num_layers // par.pipeline
    stages = ((True, pp == 1),) + (((False, True),) if pp > 1 else ())
    return max(param_tensors(args, par.model, layers, first, last, par.model.untied, par.expert)
               for first, last in stages)
