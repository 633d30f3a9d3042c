"""GPU and host time of one micro batch on one pipeline stage, from measured kernel rates (rates.py).

Every term is counted from the source at the pinned commit (571370c8) and priced with a rate the
micro-benchmark measured on its own; the one exception is fused attention (Transformer Engine), whose
share of the GEMM rate and cost per score timing.py passes in, fitted on the TE runs:

- GEMMs: each Linear of the layer (QKV, projection, FC1, FC2; the experts', the router's, the output
  layer's) as three GEMMs (forward, data gradient, weight gradient) at the shapes it issues on this
  rank, priced by the measured GEMM table;
- the unfused attention (`transformer_impl: local`, dot_product_attention.py:189-231): baddbmm and
  bmm forward, four batched matmuls backward, priced by the measured bmm table; the score passes
  (mask, softmax, dropout) by the measured per-element cost. Fused attention (Transformer Engine)
  is priced as its FLOPs (the causal half) at the measured GEMM rate of the layer's largest GEMM;
- bandwidth-bound passes: norms, bias adds, GeLU/SwiGLU, dropouts, residual adds, RoPE, GQA's
  repeated K/V, the embedding, the fp32 cross entropy, each with its measured per-element cost;
  fused kernels (`fused_kernels: true`: fused LayerNorm, bias-GeLU, bias-dropout-add) drop the passes
  they fuse;
- the fp32 gradient accumulation where the launch passes `--no-gradient-accumulation-fusion` (TE's
  layers too then; the TE runs on the lent H200, which has no Apex for Megatron's own output layer, did):
  main_grad.add_ per parameter and micro batch, at the measured HBM rate;
- MoE (moe_layer.py, experts.py SequentialMLP): the router GEMM and its softmax/top-k, permutation
  and un-permutation of the routed tokens, every local expert one after another at its share of the
  tokens (balanced routing). The token counts change every step, so every expert GEMM has a shape
  cuBLAS has not planned: its host call costs EXPERT_GEMM_HOST_S (heuristic query and allocation,
  measured in a profile), far longer than the GEMM, and the host synchronisations for the token
  counts (token_dispatcher.py:299 .cpu(), :305 .item(), experts.py:1234 .tolist()) leave the GPU
  nothing queued: each expert call's host time beyond its GPU time is waited for (`moe_wait`).

Host: a layer pass, a micro batch and an iteration cost what the profiled runs measured
(host_time.py, scaled by timing.HOST_SPEED); MoE's routing and local experts add their kernel launches
(LAUNCHES_*, counts read from the source) at the measured launch cost.
"""

from __future__ import annotations

from typing import Any

from ..tuples import NamedTuple
from . import rates

# Kernel launches a MoE layer adds to the dense layer pass host_time.py measured (forward + backward),
# counted from the source: per local expert, and the routing.
LAUNCHES_PER_EXPERT = 14
LAUNCHES_MOE_ROUTING = 40  # router GEMM, softmax, top-k, aux bookkeeping, permute, unpermute, fwd + bwd
# Host time of one expert GEMM call (aten::mm) at a token count cuBLAS has not seen: the mean over the
# expert GEMM calls of two profiled steps of moe8-top2 (tests/fixtures/measurements/profiles/
# moe8-top2-prof-trace.json.gz: 0.376 and 0.333 ms, the dense calls' 47 us mean taken out; the
# profiler's own cost per op is in it, so this is an upper bound). Six calls per expert and micro
# batch (forward 2, backward 4), for SequentialMLP (moe_grouped_gemm off, the default).
EXPERT_GEMM_HOST_S = 3.54e-4
EXPERT_GEMMS = 6
# Fused attention (TE, cuDNN): its FLOPs (the causal half) at a share of the layer's GEMM rate, plus a
# cost per computed score that does not grow with the head size (the attention dropout's random numbers,
# forward and again backward). 0.6 and nothing per score is the assumption for systems no run here
# measured (tools/published_check.py); timing.py passes the share fitted on Transformer Engine's H200
# runs (timing.FUSED_ATTENTION_SHARE) and the measured dropout's cost per score (FUSED_ATTENTION_SCORE_S).
FUSED_ATTENTION_SHARE = 0.6
CROSS_ENTROPY_BYTES = 52
# --cross-entropy-loss-fusion (fusions/fused_cross_entropy.py, torch.compile'd): max 2 bytes a logit
# (bf16 read), predicted logits and exp 6 (read 2, write the fp32 exp 4), the division 8 in place; the
# gradient 6 (fp32 read, bf16 write)
FUSED_CROSS_ENTROPY_BYTES = 22


# Kernels torch's fallback softmax (fused_softmax.py forward_torch_softmax: float, scale, masked_fill,
# softmax, half) launches beyond the fused kernel's one, each way
SOFTMAX_FALLBACK_LAUNCHES = 4


def fused_softmax_available(b: int, heads_per_rank: int, sq: float, sk: float) -> bool:
    """Whether Megatron's fused scale-mask-softmax runs (fused_softmax.py:238-268 at the pinned commit,
    the same test in Megatron-DeepSpeed's megatron/model/fused_softmax.py): 16 < sk <= 4096, sq and sk
    multiples of 4, and the attention batches (micro batch x heads a rank) a multiple of 4 and, causal,
    of the kernel's batches per block (scaled_masked_softmax.h get_batch_per_block: 128 threads a block
    in warps of min(32, sk rounded up to a power of two) lanes, two batches a warp up to 128 keys)."""
    attn_batches = b * heads_per_rank
    if not (16 < sk <= 4096 and sq % 4 == 0 and sk % 4 == 0 and attn_batches % 4 == 0):
        return False
    keys = 1 << max(0, int(sk - 1).bit_length())
    per_block = (128 // min(keys, 32)) * (2 if keys <= 128 else 1)
    return attn_batches % per_block == 0


class StageWork(NamedTuple):
    """Seconds of one micro batch on one stage's GPU, by term, and the host's launches."""

    gemm: float
    attention: float
    elementwise: float
    grad_accumulation: float
    moe: float  # routing, permutation and the experts' GEMMs
    head: float  # output layer, final norm, cross entropy (last stage)
    embedding: float  # first stage
    launches: int  # MoE's kernel launches beyond the measured dense layer pass (routing, local experts)
    moe_layers: int  # layers whose host waits for the GPU (token counts)
    recompute: float  # the forward repeated by recompute (in the terms above too)
    moe_wait: float = 0.0  # the expert calls' host time beyond their GPU time, waited for (all MoE layers)

    @property
    def gpu(self) -> float:
        return self.gemm + self.attention + self.elementwise + self.grad_accumulation + self.moe + self.head + self.embedding


class Model(NamedTuple):
    """What the layer's kernels depend on beyond Megatron's FLOP arguments."""

    bias: bool = True
    rope: bool = False
    learned_position: bool = True
    layernorm: bool = True  # False: RMSNorm (one statistic, no bias)
    dtype: str = "bf16"  # GEMM table: bf16 or fp16 (fp8 uses bf16's table and the FP8 ratio)
    untied: bool = False  # --untie-embeddings-and-output-weights: the output layer's own weight


def _ffn_in(args: Any, ffn: int) -> int:
    return 2 * ffn if args.swiglu else ffn


def stage_work(args: Any, model: Model, par: Any, layers: int, first: bool, last: bool) -> StageWork:
    """One micro batch's work on one GPU of a stage holding `layers` layers (par: timing.Parallel)."""
    tp, cp, b = par.tensor, par.context, par.micro_batch
    h, s = args.hidden_size, args.seq_length / cp
    tokens = b * s
    heads = args.num_attention_heads
    groups = args.num_query_groups if args.group_query_attention and args.num_query_groups else heads
    d = args.kv_channels
    q, kv = heads * d, groups * d
    dt = model.dtype
    sp = tp if par.sequence_parallel else 1
    fused = par.fused_kernels
    moe = args.num_experts is not None
    # recompute: full re-runs a share of the layers' forward, selective core attention's forward
    fraction = _recomputed_fraction(par, layers)
    # -- GEMMs of attention (and of the dense MLP)
    attn_gemm = rates.linear_seconds(tokens, (q + 2 * kv) / tp, h, dt) + rates.linear_seconds(tokens, h, q / tp, dt)
    attn_fwd = rates.gemm_seconds(tokens, (q + 2 * kv) / tp, h, "fwd", dt) + rates.gemm_seconds(tokens, h, q / tp, "fwd", dt)
    mlp_gemm = mlp_fwd = 0.0
    if not moe:
        f = args.ffn_hidden_size
        mlp_gemm = rates.linear_seconds(tokens, _ffn_in(args, f) / tp, h, dt) + rates.linear_seconds(tokens, h, f / tp, dt)
        mlp_fwd = rates.gemm_seconds(tokens, _ffn_in(args, f) / tp, h, "fwd", dt) + rates.gemm_seconds(tokens, h, f / tp, "fwd", dt)
    # -- core attention
    bh = b * heads / tp
    scores = bh * s * args.seq_length if par.local_attention else 0.0
    softmax_asked = fused if par.fused_softmax is None else par.fused_softmax  # --masked-softmax-fusion
    if par.local_attention:
        qk, pv = rates.bmm_seconds(bh, s, d, "qk"), rates.bmm_seconds(bh, s, d, "pv")
        # the passes between the matmuls (masked_fill_ on a view and autograd's CopySlices, softmax,
        # dropout, forward and backward) at their cost measured as one sequence (rates.py); the
        # forward is about a third of it
        # with Megatron's fused scale-mask-softmax (Apex or TE kernels, fused_kernels: true) the mask,
        # softmax and its backward are one pass each way (10 bytes a score) and dropout stays
        # and only at the shapes its kernel takes (fused_softmax_available): else torch's fp32 softmax
        fused_softmax = softmax_asked and fused_softmax_available(b, heads // tp, s, args.seq_length)
        per_score = rates.attention_score_seconds(args.seq_length) if not fused_softmax else (
            rates.op_seconds("dropout", 1) + 10 / rates.hbm_bytes_per_second())
        core_fwd = qk + pv + scores * per_score / 3
        core = 2 * qk + 4 * pv + scores * per_score
        # the reshape copies of q, k, v (views of the QKV output), GQA's repeated K/V, the context's permute
        core += rates.op_seconds("add", tokens * ((q + 2 * kv) + (2 * q if groups != heads else 0) + q) / tp)
    else:
        flops = 4 * b * s * args.seq_length * q / tp / 2  # forward, causal half
        share = getattr(par, "fused_attention_share", None) or FUSED_ATTENTION_SHARE
        rate = 2.0 * tokens * h * h / rates.gemm_seconds(tokens, h, h, "fwd", dt) * share
        per_score = bh * s * args.seq_length / 2 * (getattr(par, "fused_attention_score_s", None) or 0.0)
        core_fwd = flops / rate + per_score / 3
        core = 3.5 * flops / rate + per_score  # backward about 2.5 forwards
    selective = core_fwd if par.recompute == "selective" else 0.0
    # -- bandwidth-bound passes per layer
    sbh = tokens * h / sp
    norm = 2 * rates.op_seconds("layernorm", sbh) * (1.0 if model.layernorm else 0.8)
    if fused:  # fused bias-dropout-add: one pass each
        bda = 2 * rates.op_seconds("dropout", sbh)
    else:
        bda = 2 * (rates.op_seconds("dropout", sbh) + rates.op_seconds("add", sbh) * (2 if model.bias else 1))
    ew = norm + bda
    if model.bias and not fused:
        ew += rates.op_seconds("add", tokens * (q + 2 * kv) / tp)
    if model.rope:
        ew += 3 * rates.op_seconds("scale", tokens * (q + kv) / tp)
    if not moe:
        f = args.ffn_hidden_size / tp
        act = rates.op_seconds("gelu", tokens * f) + (rates.op_seconds("scale", tokens * f) if args.swiglu else 0.0)
        if model.bias and not fused:
            act += rates.op_seconds("add", tokens * _ffn_in(args, args.ffn_hidden_size) / tp)
        ew += act
    ew_fwd = ew / 3  # forward is about a third of forward + backward (the measured fwd/fwd+bwd ratios)
    # -- MoE
    moe_s = moe_fwd = moe_wait = 0.0
    launches = 0
    # the softmax fallback's launches beyond the fused kernel's (forward_torch_softmax's cast, scale,
    # masked_fill and cast back beside the softmax; their backward ops), a recomputed forward's again
    fallback = par.local_attention and not fused_softmax and softmax_asked
    softmax_launches = SOFTMAX_FALLBACK_LAUNCHES * (2 + fraction) if fallback else 0.0
    if moe:
        moe_s, moe_fwd, expert_launches, moe_wait = _moe(args, par, tokens, dt)
        launches += expert_launches
    per_layer = attn_gemm + core + ew + moe_s + mlp_gemm
    per_layer_fwd = attn_fwd + core_fwd + ew_fwd + moe_fwd + mlp_fwd
    recompute = layers * (fraction * per_layer_fwd + (1 - fraction) * selective)
    # -- gradient accumulation into fp32 main_grad (par.grad_accumulation_fusion; None: as fused_kernels)
    layer_params = (h * (q + 2 * kv) + q * h) / tp + (0 if moe else (_ffn_in(args, args.ffn_hidden_size) + args.ffn_hidden_size) * h / tp)
    stage_params = layers * layer_params
    head = emb = 0.0
    vocab = args.padded_vocab_size / tp
    if last:
        logits = tokens * vocab
        # vocab-parallel cross entropy (cross_entropy.py): .float() 6 bytes a logit, max 4, subtract 8,
        # exp 8, sum 4, divide 8 forward; the gradient's mul_ 8 and the cast back 6: 52 bytes
        head = rates.linear_seconds(tokens, vocab, h, dt) + rates.op_seconds("layernorm", sbh) + (
            (FUSED_CROSS_ENTROPY_BYTES if getattr(par, "cross_entropy_fusion", False) else CROSS_ENTROPY_BYTES)
            * logits / rates.hbm_bytes_per_second())
        stage_params += vocab * h
    if first:
        emb = 2 * rates.op_seconds("add", sbh) + rates.op_seconds("dropout", sbh)
        if model.learned_position:
            emb += rates.op_seconds("add", sbh)
        stage_params += vocab * h
    fused_accumulation = getattr(par, "grad_accumulation_fusion", None)
    # bf16's gradient into fp32 main_grad at the rate measured in traces; fp16 accumulates in its own dtype
    # (arguments.py:1172-1184): a same-dtype add, 6 bytes at the HBM rate
    accumulate = 0.0 if (fused if fused_accumulation is None else fused_accumulation) else \
        stage_params * (6 / rates.hbm_bytes_per_second() if getattr(par, "precision", "bf16") == "fp16"
                        else rates.GRAD_ACCUMULATION_S_PER_PARAM)
    return StageWork(
        gemm=layers * (attn_gemm + mlp_gemm) + fraction * layers * (attn_fwd + mlp_fwd),
        attention=layers * core + recompute_attention(fraction, selective, core_fwd, layers),
        elementwise=layers * ew * (1 + fraction / 3),
        grad_accumulation=accumulate,
        moe=layers * moe_s * (1 + fraction / 3),
        head=head, embedding=emb, launches=int(layers * (launches * (1 + fraction / 3) + softmax_launches)),
        moe_layers=layers if moe else 0, recompute=recompute, moe_wait=layers * moe_wait * (1 + fraction / 3))


def recompute_attention(fraction: float, selective: float, core_fwd: float, layers: int) -> float:
    """Core attention's forward repeated: by full recompute (its share of layers) or selective."""
    return layers * (fraction * core_fwd + (1 - fraction) * selective)


def _recomputed_fraction(par: Any, layers: int) -> float:
    """Share of a stage's layers that full recompute re-runs (transformer_block.py
    _checkpointed_forward): uniform every layer, block the first recompute_num_layers per chunk."""
    if par.recompute != "full":
        return 0.0
    if par.recompute_method == "block":
        chunks = par.virtual_pipeline or 1  # model chunks per rank
        chunk = layers // chunks
        return min(1.0, (par.recompute_num_layers or chunk) / max(1, chunk))
    return 1.0


def _moe(args: Any, par: Any, tokens: float, dt: str) -> tuple[float, float, int, float]:
    """(fwd+bwd, fwd, launches, host wait) of one MoE layer's MLP part on this rank."""
    e, k, h = args.num_experts, args.moe_router_topk, args.hidden_size
    f = args.moe_ffn_hidden_size or args.ffn_hidden_size
    ep, etp = par.expert, par.expert_tensor or par.tensor
    local = max(1, e // ep)
    # balanced routing: a rank routes its own tokens (1/TP of them with sequence parallel, which MoE
    # with TP > 1 needs); each expert receives tokens·k/E from every rank of its EP group, and its
    # expert-tensor group of ETP ranks gathers theirs (the GEMM dimensions split ETP ways)
    own = tokens / par.tensor if par.sequence_parallel else tokens
    per_expert = own * k / e * ep * etp
    routed = per_expert * local
    gemm = sum(rates.linear_seconds(per_expert, _ffn_in(args, f) / etp, h, dt) + rates.linear_seconds(per_expert, h, f / etp, dt)
               for _ in range(local))
    gemm_fwd = local * (rates.gemm_seconds(per_expert, _ffn_in(args, f) / etp, h, "fwd", dt)
                        + rates.gemm_seconds(per_expert, h, f / etp, "fwd", dt))
    router = rates.linear_seconds(tokens, e, h, dt) + rates.op_seconds("softmax", tokens * e) * 2
    act = rates.op_seconds("gelu", routed * f / etp) + (rates.op_seconds("scale", routed * f / etp) if args.swiglu else 0.0)
    permute = 2 * rates.op_seconds("add", routed * h) * 2  # gather and scatter-add of the routed tokens
    total = gemm + router + act + permute
    fwd = gemm_fwd + (router + act + permute) / 3
    # each expert's calls: their host time (new-shape GEMMs and the other launches) against their GPU
    # time; what the host takes beyond the GPU is waited for, the synchronisations leaving nothing queued
    host = EXPERT_GEMMS * EXPERT_GEMM_HOST_S + LAUNCHES_PER_EXPERT * rates.host_seconds_per_launch()
    wait = local * max(0.0, host - (gemm + act) / local)
    return total, fwd, LAUNCHES_MOE_ROUTING + LAUNCHES_PER_EXPERT * local, wait
