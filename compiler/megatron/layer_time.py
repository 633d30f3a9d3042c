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
- bandwidth-bound passes (bias adds, dropouts, residual adds, the fp32 cross entropy) at their measured per-element
  cost; the local layers' unfused paths (SwiGLU on strided views, RoPE, torch's norms by width, GQA's repeated K/V)
  and the word embedding by measured tables (rates.layer_path_seconds, gqa_repeat_seconds, embedding_seconds);
  fused kernels (`fused_kernels: true`: TE's norms and RoPE, bias-activation, bias-dropout-add) drop what they fuse;
- the fp32 gradient accumulation where the launch passes `--no-gradient-accumulation-fusion` (TE's
  layers too then; the TE runs on the lent H200, which has no Apex for Megatron's own output layer, did):
  main_grad.add_ per parameter and micro batch, at the measured HBM rate;
- MoE (moe_layer.py, experts.py SequentialMLP): the router GEMM and its softmax/top-k, permutation and
  un-permutation of the routed tokens, every local expert one after another at its share of the tokens
  (balanced routing), its unfused activation path measured (rates.expert_activation_seconds). The token
  counts' host syncs (token_dispatcher.py:299 .cpu(), :305 .item(), experts.py:1234 .tolist()) leave the
  GPU nothing queued: each expert's host time beyond its GPU time is waited for. Megatron's local experts'
  host time is host_time.stage_microbatch's (LOCAL_EXPERT_SHARE of a layer pass, measured; its forward's
  waited for, its backward's beside the GPU): StageWork carries the expert passes and each one's GPU
  seconds (`expert_passes`, `expert_gpu`); Transformer Engine's experts wait here (`moe_wait`: its
  SequentialMLP six GEMM calls at EXPERT_GEMM_HOST_S, its grouped GEMMs their fitted costs).

Host: a layer pass, a micro batch and an iteration cost what the profiled runs measured
(host_time.py, scaled by timing.HOST_SPEED); MoE's routing adds its kernel launches (LAUNCHES_MOE_ROUTING,
counted from the source) at the measured launch cost, a local expert its measured host time (host_time.stage_microbatch).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tuples import NamedTuple
from . import rates
from .flops import moe_pattern, query_groups
from .kernels import SOFTMAX_FALLBACK_LAUNCHES, fused_softmax_available

# Kernel launches a MoE layer's routing adds to the dense layer pass host_time.py measured (forward + backward),
# counted from the source (a local expert's whole host work is host_time.LOCAL_EXPERT_SHARE, measured)
LAUNCHES_MOE_ROUTING = 40  # router GEMM, softmax, top-k, aux bookkeeping, permute, unpermute, fwd + bwd
# Transformer Engine's SequentialMLP (TE Linear experts, moe_grouped_gemm off): host time of one expert GEMM call at a
# token count cuBLAS has not seen, six a micro batch (forward 2, backward 4). The mean over the expert GEMM calls of
# two profiled steps of moe8-top2 (tests/fixtures/measurements/profiles/moe8-top2-prof-trace.json.gz: 0.376 and 0.333
# ms, the dense calls' 47 us mean taken out; the profiler's own cost per op is in it). It priced Megatron's local
# experts too until device call 34 measured their whole host work on Megatron's modules (host_time.LOCAL_EXPERT_SHARE:
# 1.25 ms an expert and micro batch on that host, where this made 2.26); TE's experts are heavier modules that no
# bench has timed, and their one run (call15/te-moe32-top8-seq) is within 10 % at this figure, so it stays theirs.
EXPERT_GEMM_HOST_S = 3.54e-4
EXPERT_GEMMS = 6
# TE's grouped experts (--moe-grouped-gemm, TEGroupedMLP): one GroupedLinear call a Linear and direction, whose
# Python and C++ walk the local experts (their weights, splits and cuBLAS GEMMs), and each expert weight's own
# gradient hook: the host's time a MoE layer and micro batch (GROUPED_MOE_LAYER_HOST_S) and an expert GEMM (six an
# expert), waited for beyond the experts' GPU time after the token-count sync. Measured on runs designated before
# device call 16 (tools/grouped_experts_fit.py: the top-8 sweep of Qwen3-30B-A3B's MoE block, 8 to 128 experts,
# tests/fixtures/h200-hosts/call15 and call16; least squares on the relative error): they fit to -25..+26 %, the
# host's cost not being linear in the experts (8 -> 16 experts cost 139 ms an iteration, 16 -> 128 319 ms; call 18:
# changing token counts cost ~14 ms a MoE layer and micro batch, constant ones not). Left out: te-moe32-top2
# (never seen before), te-ds-mla-moe and te-moe8-top2 (seen with the slope alone); their errors and call 17's
# pre-registered ones are in docs/performance-model.md. A profile of te-moe32-top8 (call15/experiments):
# GroupedLinear's forward 4.1 ms and backward 7.2 ms a call at 32 experts.
GROUPED_EXPERT_GEMM_HOST_S = 7.8e-5
GROUPED_MOE_LAYER_HOST_S = 6.5e-3
# Fused attention (TE, cuDNN): its FLOPs (the causal half) at a share of the layer's GEMM rate, plus a
# cost per computed score that does not grow with the head size (the attention dropout's random numbers,
# forward and again backward). 0.6 and nothing per score is the assumption for systems no run here
# measured (tools/published_check.py); timing.py passes the share fitted on Transformer Engine's H200
# runs (timing.FUSED_ATTENTION_SHARE) and the measured dropout's cost per score (FUSED_ATTENTION_SCORE_S).
FUSED_ATTENTION_SHARE = 0.6
# Megatron's vocab_parallel_cross_entropy (cross_entropy.py), forward and backward, in bytes a logit at the measured
# HBM rate, counted from its passes: .float() 6, max 4, subtract 8, exp 8, sum 4, divide 8; the gradient's mul_ 8 and
# the cast back 6. Timed on the H200 (tools/head_bench.py, tests/fixtures/h200-hosts/call27/head-bench.json, eight
# shapes of 131 M to 2.1 G logits) the head as a whole (the output layer's three GEMMs and this) came within -6.6 to
# +0.3 % of the model's terms; alone, the cross entropy took 71-85 bytes a logit and the GEMMs -11 to +1 % from the table:
# the parts differ, their sum, which a step pays, holds, and neither is bent to the other
CROSS_ENTROPY_BYTES = 52
# --cross-entropy-loss-fusion (fusions/fused_cross_entropy.py, torch.compile'd): max 2 bytes a logit
# (bf16 read), predicted logits and exp 6 (read 2, write the fp32 exp 4), the division 8 in place; the
# gradient 6 (fp32 read, bf16 write)
FUSED_CROSS_ENTROPY_BYTES = 22


class StageWork(NamedTuple):
    """Seconds of one micro batch on one stage's GPU, by term, and the host's launches."""

    gemm: float
    attention: float
    elementwise: float
    grad_accumulation: float
    moe: float  # routing, permutation and the experts' GEMMs
    head: float  # output layer, final norm, cross entropy (last stage)
    embedding: float  # first stage
    launches: int  # MoE's routing launches beyond the measured dense layer pass (a local expert's host: expert_passes)
    moe_layers: int  # layers whose host waits for the GPU (token counts)
    recompute: float  # the forward repeated by recompute (in the terms above too)
    moe_wait: float = 0.0  # TE's expert calls' host time beyond their GPU time, waited for (all MoE layers)
    expert_passes: float = 0.0  # Megatron's local experts run a micro batch (all MoE layers; a recomputed forward a third)
    expert_gpu: float = 0.0  # one local expert's GPU seconds a pass (its GEMMs and activation)

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
    qk_norm: bool = False  # --qk-layernorm: each head's query and key normalised (MLA: its latent norms, priced as MLA's)


def _ffn_in(args: Any, ffn: float) -> float:
    return 2 * ffn if args.swiglu else ffn


def _attention_linears(args: Any, tp: int, sp: int, local: bool) -> list[tuple[float, float, float]]:
    """(rows divisor, out features on this rank, in features) of each of the attention's Linears over a micro
    batch's tokens: QKV and the projection; multi-latent attention's (multi_latent_attention.py
    MLASelfAttention) q (or its down projection, q_lora, and up projection), the kv down projection (kv_lora
    and the shared RoPE part), the kv up projection and the projection. The down projections: TE's are
    duplicated on every TP rank over the rank's own sequence shard (TELinear "duplicated", no communication:
    1/SP of the rows), the local spec's column-parallel (gpt_layer_specs.py:123-125, :422-424); the up
    projections column-parallel."""
    h, heads = args.hidden_size, args.num_attention_heads
    if getattr(args, "multi_latent_attention", False):
        qk = args.qk_head_dim + args.qk_pos_emb_head_dim
        rows, split = (1, tp) if local else (sp, 1)  # the down projections' rows divisor and output split
        q = [(1, heads * qk / tp, h)] if args.q_lora_rank is None else \
            [(rows, args.q_lora_rank / split, h), (1, heads * qk / tp, args.q_lora_rank)]
        return q + [(rows, (args.kv_lora_rank + args.qk_pos_emb_head_dim) / split, h),
                    (1, heads * (args.qk_head_dim + args.v_head_dim) / tp, args.kv_lora_rank),
                    (1, h, heads * args.v_head_dim / tp)]
    groups = query_groups(args)
    q, kv = heads * args.kv_channels, groups * args.kv_channels
    return [(1, (q + 2 * kv) / tp, h), (1, h, q / tp)]


def _head_dims(args: Any) -> tuple[int, int]:
    """The query/key and the value head sizes the core attention multiplies."""
    if getattr(args, "multi_latent_attention", False):
        return args.qk_head_dim + args.qk_pos_emb_head_dim, args.v_head_dim
    return args.kv_channels, args.kv_channels


def _linears(shapes: Sequence[tuple[float, float, float]], tokens: float, dt: str) -> tuple[float, float]:
    """(forward + backward, forward) of Linears at these (rows divisor, out, in) shapes over `tokens` rows."""
    return (sum(rates.linear_seconds(tokens / rows, n, k, dt) for rows, n, k in shapes),
            sum(rates.gemm_seconds(tokens / rows, n, k, "fwd", dt) for rows, n, k in shapes))


def _weights(shapes: Sequence[tuple[float, float, float]]) -> float:
    """The parameters of Linears at these shapes on the rank."""
    return sum(n * k for _, n, k in shapes)


def _activation_fused(par: Any) -> bool:  # --bias-swiglu-fusion / --bias-gelu-fusion (None: as fused_kernels)
    return bool(par.fused_kernels if getattr(par, "bias_activation_fusion", None) is None else par.bias_activation_fusion)


def _mlp(args: Any, par: Any, ffn: float, tokens: float, dt: str) -> tuple[float, float, float, float]:
    """(GEMMs fwd+bwd, GEMMs fwd, activation passes fwd+bwd, parameters on the rank) of a dense MLP of
    `ffn` (the dense layer's, or the shared experts' on every token), split TP ways. SwiGLU without the fusion is
    mlp.py's path on FC1's two strided halves (measured: rates.layer_path_seconds); fused, or GeLU, passes."""
    h, tp = args.hidden_size, par.tensor
    shapes = [(1, _ffn_in(args, ffn) / tp, h), (1, h, ffn / tp)]
    gemm, fwd = _linears(shapes, tokens, dt)
    if args.swiglu and not _activation_fused(par):
        act = rates.layer_path_seconds("swiglu", tokens, ffn / tp)
    else:
        act = rates.op_seconds("gelu", tokens * ffn / tp) + (rates.op_seconds("scale", tokens * ffn / tp) if args.swiglu else 0.0)
    return gemm, fwd, act, _weights(shapes)


def norm_seconds(par: Any, model: Model, rows: float, width: float) -> float:
    """One norm's forward and backward over `rows` vectors of `width`: the local layers' torch module measured by rows
    and width (narrow norms reduce their weight gradient over many rows); Apex's or TE's at the pass's rate."""
    if par.local_attention and not par.fused_kernels:  # fused: Apex's norm, or TE's
        return rates.layer_path_seconds("layernorm" if model.layernorm else "rmsnorm", rows, width)
    return rates.op_seconds("layernorm", rows * width) * (1.0 if model.layernorm else 0.8)


def _stage_moe_layers(args: Any, layers: int, first: bool, last: bool) -> int:
    """MoE layers of the stage's `layers`: the pattern's first ones on the first stage, its last ones on the
    last (--moe-layer-freq; DeepSeek's first dense layers); timing.step_time prices those two stages."""
    pattern = moe_pattern(args)
    return sum(pattern[:layers]) if first else sum(pattern[-layers:])


def stage_work(args: Any, model: Model, par: Any, layers: int, first: bool, last: bool) -> StageWork:
    """One micro batch's work on one GPU of a stage holding `layers` layers (par: timing.Parallel); on the
    last stage the MTP layers too (each a layer like the last, its eh_proj, norms and its own logits)."""
    tp, cp, b = par.tensor, par.context, par.micro_batch
    h, s = args.hidden_size, args.seq_length / cp
    tokens = b * s
    heads = args.num_attention_heads
    groups = query_groups(args)
    d = args.kv_channels
    q, kv = heads * d, groups * d
    d_qk, d_v = _head_dims(args)
    mla = getattr(args, "multi_latent_attention", False)
    dt = model.dtype
    sp = tp if par.sequence_parallel else 1
    fused = par.fused_kernels
    n_moe = _stage_moe_layers(args, layers, first, last)
    mtp = (getattr(args, "mtp_num_layers", None) or 0) if last else 0
    if mtp:  # each MTP layer is a layer like the model's last
        n_moe += mtp * moe_pattern(args)[-1]
    n_dense = layers + mtp - n_moe
    n_all = layers + mtp
    # recompute: full re-runs a share of the layers' forward, selective core attention's forward
    fraction = _recomputed_fraction(par, layers)
    # -- GEMMs of attention, of the dense MLP (dense layers) and of MTP's eh_proj (2h -> h)
    shapes = _attention_linears(args, tp, sp, par.local_attention)
    attn_gemm, attn_fwd = _linears(shapes, tokens, dt)
    attn_params = _weights(shapes)
    mlp_gemm, mlp_fwd, mlp_act, mlp_params = _mlp(args, par, args.ffn_hidden_size, tokens, dt)
    eh_proj = [(1, h / tp, 2 * h)]  # an MTP layer's eh_proj (2h -> h)
    eh_gemm, eh_fwd = _linears(eh_proj, tokens, dt)
    mtp_gemm, mtp_fwd = mtp * eh_gemm, mtp * eh_fwd
    # -- core attention
    bh = b * heads / tp
    scores = bh * s * args.seq_length if par.local_attention else 0.0
    softmax_asked = fused if par.fused_softmax is None else par.fused_softmax  # --masked-softmax-fusion
    if par.local_attention:
        qk, pv = rates.bmm_seconds(bh, s, d_qk, "qk"), rates.bmm_seconds(bh, s, d_v, "pv")
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
        core += rates.op_seconds("add", tokens * (q + 2 * kv + q) / tp) + (  # q, k, v's copies, the context's permute
            rates.gqa_repeat_seconds(tokens, q / tp, heads / groups) if groups != heads else 0.0)
    else:
        # forward, causal half: QK^T over the query/key head size, PV over the value's (MLA's differ)
        flops = 2 * b * s * args.seq_length * heads * (d_qk + d_v) / tp / 2
        share = getattr(par, "fused_attention_share", None) or FUSED_ATTENTION_SHARE
        rate = 2.0 * tokens * h * h / rates.gemm_seconds(tokens, h, h, "fwd", dt) * share
        per_score = bh * s * args.seq_length / 2 * (getattr(par, "fused_attention_score_s", None) or 0.0)
        core_fwd = flops / rate + per_score / 3
        core = 3.5 * flops / rate + per_score  # backward about 2.5 forwards
    selective = core_fwd if par.recompute == "selective" else 0.0
    # -- bandwidth-bound passes per layer
    sbh = tokens * h / sp
    norm = 2 * norm_seconds(par, model, tokens / sp, h)
    if fused:  # fused bias-dropout-add: one pass each
        bda = 2 * rates.op_seconds("dropout", sbh)
    else:
        bda = 2 * (rates.op_seconds("dropout", sbh) + rates.op_seconds("add", sbh) * (2 if model.bias else 1))
    ew = norm + bda
    if model.bias and not fused and not mla:  # MLA's Linears have no bias
        ew += rates.op_seconds("add", tokens * (q + 2 * kv) / tp)
    if mla:
        # the latent norms (q_lora, kv_lora: --qk-layernorm, which every converted DeepSeek model has; over the
        # rank's rows as the down projections), RoPE on the positional parts only (the query's per head, the
        # key's shared), and the concatenations of each head's query and key from their two parts
        pe = args.qk_pos_emb_head_dim
        ew += model.qk_norm * sum(norm_seconds(par, model, tokens / sp, rank) for rank in (args.q_lora_rank, args.kv_lora_rank) if rank)
        ew += 3 * rates.op_seconds("scale", tokens * (heads * pe / tp + pe))
        ew += rates.op_seconds("add", tokens * 2 * heads * d_qk / tp)
    elif model.rope and not fused:  # rope_utils' unfused path on the query's and the key's heads, measured
        ew += rates.layer_path_seconds("rope", tokens, q / tp) + rates.layer_path_seconds("rope", tokens, kv / tp)
    elif model.rope:  # TE's fused RoPE (apply_rope_fusion, which fused_kernels keeps): a pass each way
        ew += 3 * rates.op_seconds("scale", tokens * (q + kv) / tp)
    if model.qk_norm and not mla:  # a norm over each head's query and key (attention.py:1648-1652), after QKV
        if par.local_attention and not fused:  # torch's, measured by rows (a head each) and the head's width
            ew += norm_seconds(par, model, tokens * heads / tp, d) + norm_seconds(par, model, tokens * groups / tp, d)
        else:
            ew += rates.QK_NORM_S_PER_ELEMENT[rates.qk_norm_module(not par.local_attention, model.layernorm)] * tokens * (q + kv) / tp
    if model.bias and not fused:
        mlp_act += rates.op_seconds("add", tokens * _ffn_in(args, args.ffn_hidden_size) / tp)
    # each MTP layer's two norms beside the layer's (enorm, hnorm); its final norm is the head's below
    ew_mtp = 2 * norm_seconds(par, model, tokens / sp, h)
    ew_fwd = ew / 3  # forward is about a third of forward + backward (the measured fwd/fwd+bwd ratios)
    # -- MoE
    moe_s = moe_fwd = moe_wait = expert_passes = expert_gpu = 0.0
    launches = 0
    moe_params = 0.0
    # the softmax fallback's launches beyond the fused kernel's (forward_torch_softmax's cast, scale,
    # masked_fill and cast back beside the softmax; their backward ops), a recomputed forward's again
    fallback = par.local_attention and not fused_softmax and softmax_asked
    softmax_launches = SOFTMAX_FALLBACK_LAUNCHES * (2 + fraction) if fallback else 0.0
    if n_moe:
        moe_s, moe_fwd, launches, moe_wait, moe_params, expert_passes, expert_gpu = _moe(args, par, tokens, dt)
    dense_fwd = mlp_fwd + mlp_act / 3
    attn_layer_fwd = attn_fwd + core_fwd + ew_fwd
    recompute = (fraction * (n_all * attn_layer_fwd + n_dense * dense_fwd + n_moe * moe_fwd)
                 + (1 - fraction) * n_all * selective)
    # -- gradient accumulation into fp32 main_grad (par.grad_accumulation_fusion; None: as fused_kernels)
    stage_params = n_all * attn_params + n_dense * mlp_params + n_moe * moe_params + mtp * _weights(eh_proj)
    head = emb = 0.0
    vocab = args.padded_vocab_size / tp
    if last:
        logits = tokens * vocab
        # vocab-parallel cross entropy (cross_entropy.py) at its counted bytes a logit (CROSS_ENTROPY_BYTES)
        head = (1 + mtp) * (rates.linear_seconds(tokens, vocab, h, dt) + norm_seconds(par, model, tokens / sp, h) + (
            (FUSED_CROSS_ENTROPY_BYTES if getattr(par, "cross_entropy_fusion", False) else CROSS_ENTROPY_BYTES)
            * logits / rates.hbm_bytes_per_second()))
        stage_params += vocab * h
    if first:
        # the word embedding's lookup and its backward at the rank's vocabulary shard (measured:
        # rates.embedding_seconds), the embedding dropout; a learned position embedding's own lookup (a table of
        # the sequence's rows: below the bench's smallest, 32768, priced as that) and the add
        emb = rates.embedding_seconds(tokens, h, vocab, tp) + rates.op_seconds("dropout", sbh)
        if model.learned_position:
            emb += rates.embedding_seconds(tokens, h, args.seq_length) + rates.op_seconds("add", sbh)
        stage_params += vocab * h
    fused_accumulation = getattr(par, "grad_accumulation_fusion", None)
    # bf16's gradient into fp32 main_grad at the rate measured in traces; fp16 accumulates in its own dtype
    # (arguments.py:1172-1184): a same-dtype add, 6 bytes at the HBM rate
    accumulate = 0.0 if (fused if fused_accumulation is None else fused_accumulation) else \
        stage_params * (6 / rates.hbm_bytes_per_second() if getattr(par, "precision", "bf16") == "fp16"
                        else rates.GRAD_ACCUMULATION_S_PER_PARAM)
    return StageWork(
        gemm=n_all * attn_gemm + n_dense * mlp_gemm + mtp_gemm + fraction * (n_all * attn_fwd + n_dense * mlp_fwd + mtp_fwd),
        attention=n_all * core + recompute_attention(fraction, selective, core_fwd, n_all),
        elementwise=(n_all * ew + n_dense * mlp_act + mtp * ew_mtp) * (1 + fraction / 3),
        grad_accumulation=accumulate,
        moe=n_moe * moe_s * (1 + fraction / 3),
        head=head, embedding=emb, launches=int(n_moe * launches * (1 + fraction / 3) + n_all * softmax_launches),
        moe_layers=n_moe, recompute=recompute, moe_wait=n_moe * moe_wait * (1 + fraction / 3),
        expert_passes=n_moe * expert_passes * (1 + fraction / 3), expert_gpu=expert_gpu)


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


def _moe(args: Any, par: Any, tokens: float, dt: str) -> tuple[float, float, int, float, float, float, float]:
    """(fwd+bwd, fwd, launches, TE's host wait, parameters on the rank, local expert passes, a local expert's GPU
    seconds) of one MoE layer's MLP part on this rank: the router, the routed experts and the shared experts
    (moe_layer.py; shared_experts.py: a dense MLP of moe_shared_expert_intermediate_size on every token, split TP
    ways)."""
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
    shapes = [(1, _ffn_in(args, f) / etp, h), (1, h, f / etp)]
    one, one_fwd = _linears(shapes, per_expert, dt)
    gemm, gemm_fwd = local * one, local * one_fwd
    router = rates.linear_seconds(tokens, e, h, dt) + rates.op_seconds("softmax", tokens * e) * 2
    grouped = getattr(par, "grouped_gemm", False)
    if not grouped and not (_activation_fused(par) and args.swiglu):  # mlp.py:313-335 unfused (a GeLU never fuses with the
        # per-token scale): each expert's path on strided and broadcast views measured, SequentialMLP's two cats
        act = local * rates.expert_activation_seconds(per_expert, f / etp, bool(args.swiglu)) + (
            2 * routed * h * 4 / rates.hbm_bytes_per_second() if local > 1 else 0.0)  # experts.py:1234-1249
    else:  # the fused weighted SwiGLU, or TE's grouped experts: one pass each way
        act = rates.op_seconds("gelu", routed * f / etp) + (rates.op_seconds("scale", routed * f / etp) if args.swiglu else 0.0)
    permute = 2 * rates.op_seconds("add", routed * h) * 2  # gather and scatter-add of the routed tokens
    shared_ffn = getattr(args, "moe_shared_expert_intermediate_size", None) or 0
    sh_gemm, sh_fwd, sh_act, sh_params = _mlp(args, par, shared_ffn, tokens, dt) if shared_ffn else (0.0,) * 4
    total = gemm + router + act + permute + sh_gemm + sh_act
    fwd = gemm_fwd + sh_fwd + (router + act + permute + sh_act) / 3
    # each expert's host time beyond its GPU time is waited for (the token-count syncs leave nothing queued): the
    # local experts' passes host_time.stage_microbatch prices (LOCAL_EXPERT_SHARE); TE's SequentialMLP six GEMM calls
    # at a shape cuBLAS has not planned; TE's grouped experts each one's share of the GroupedLinear calls
    wait, passes = 0.0, 0.0
    if grouped:
        wait = max(0.0, GROUPED_MOE_LAYER_HOST_S + local * EXPERT_GEMMS * GROUPED_EXPERT_GEMM_HOST_S - gemm - act)
    elif getattr(par, "stack", "local") == "local":
        passes = local
    else:
        wait = local * max(0.0, EXPERT_GEMMS * EXPERT_GEMM_HOST_S - (gemm + act) / local)
    params = local * _weights(shapes) + sh_params + e * h
    return total, fwd, LAUNCHES_MOE_ROUTING, wait, params, passes, (gemm + act) / local
