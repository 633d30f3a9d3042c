"""What a pretrain_gpt.py step holds on one GPU beyond the weights, tensor by tensor, at its peak.

Every figure is a tensor shape from the source at the pinned commit (571370c8) and the dtype of the
tensor, times what autograd keeps of it: nothing here is fitted to a run. `bytes` below counts one
micro batch on one GPU; `s` is the sequence on this rank (s / CP), `b` the micro batch, `e` the
activation dtype's size (2 for bf16/fp16, 4 for fp32), `n`/`g` the heads and query groups.

The layer (megatron/core/models/gpt/gpt_layer_specs.py, local and TE specs):
- norms: each of the two keeps its input [s, b, h] and its statistics in fp32 (mean and rstd for
  LayerNorm, rstd for RMSNorm);
- attention projections: the QKV linear keeps its input; the split q, k, v are views of the QKV
  output (attention.py get_query_key_value_tensors), which the attention keeps; unfused RoPE
  (rope_utils.py _apply_rotary_pos_emb_bshd) keeps rotate_half(q), rotate_half(k) and its new q;
  the unfused attention repeats GQA's k and v to n heads (dot_product_attention.py:170-176) and
  keeps the repeats; the
  output projection keeps its input [s, b, h/TP];
- core attention, unfused (`transformer_impl: local`, dot_product_attention.py:189-231): the softmax
  keeps its [b, n/TP, s, s] output (attention_softmax_in_fp32 is off), the dropout its bool mask,
  the value bmm the dropout output: 2e + 1 bytes per score. The scores go through Megatron's global
  memory buffer (dot_product_attention.py:189, a [b·n/TP, s, s] tensor of e bytes kept for the whole
  run), and the backward of one layer holds four score-sized tensors of e bytes at once: the
  gradient of the masked scores and, in autograd's CopySlices for the in-place masked_fill_ on a
  view (utils.py:54; PyTorch's torch/csrc/autograd/functions/tensor.cpp CopySlices::apply_impl),
  its base-sized copy, the clone it hands masked_fill's backward, and that backward's output. The
  dropout mask is bool on CUDA (PyTorch's aten/src/ATen/native/cuda/Dropout.cu dropout_cuda). Fused attention (Transformer Engine) keeps no scores, only the output's
  log-sum-exp [b, n/TP, s] in fp32 (measured through TE on the H200, issue 27: the TE layers' kept
  bytes match this count to a few MB a layer, tests/fixtures/te-h200/measurements);
- MLP: the fc1 input; GeLU keeps fc1's output and fc2 its input (4 × h each); SwiGLU keeps fc1's
  output (2 × ffn), SiLU's output and fc2's input (ffn each), or with the fused bias-SwiGLU fc1's
  output and fc2's input;
- MoE (moe_layer.py, token_dispatcher.py, experts.py): the router and the dispatcher keep the
  pre-MLP norm's output; the experts' fc1 keeps the permuted tokens [s·b·k, h] (k = top-k); between
  fc1 and fc2 the dense MLP's tensors for s·b·k tokens, plus, unless a fused weighted SwiGLU takes the
  router's probabilities in (experts.py bias_act_func), the activation's output [s·b·k, ffn] that
  the multiplication by the probabilities keeps;
- the two bias-dropout-adds keep their bool masks [s, b, h].
The micro batch on the GPU (pretrain_gpt.py get_batch, first and last stage): the token ids Megatron
counts (8sb) and the dataloader's causal mask, bool [b, 1, s, s] (--create-attention-mask-in-dataloader
is Megatron's default; measured on the H200: at s16384 b1 its 256 MiB are in the peak).
Tensors before a column-parallel linear are whole on every TP rank unless sequence parallel splits
them; tensors between a column- and a row-parallel linear are split by TP.

MoE and MLA layers (derived from the source, not measured): an MoE layer's MLP keeps each routed
token's expert activations, spread over EP x ETP ranks, and its shared experts' (moe_layer_freq: the
first dense layers keep a dense MLP's); multi-latent attention (multi_latent_attention.py
get_query_key_value_tensors) keeps the down projections' input, the compressed q and kv before and
after their norms (the up projections' inputs), the up projections' outputs, the rotated rope parts,
the assembled query and key, the value and the output projection's input; MTP layers
(multi_token_prediction.py) sit on the last stage: a layer like the last one, the concatenated
[s, b, 2h] input of eh_proj and its own logits.

Recompute (transformer_config.py:1583-1584: --recompute-modules defaults to core_attn) drops what a
recomputed module keeps and holds it again, for one layer at a time, during that layer's backward;
full recompute keeps each recomputed unit's input only (transformer_block.py _checkpointed_forward).
"""

from __future__ import annotations

from dataclasses import dataclass

# cuBLAS workspaces torch's caching allocator holds (and counts in max_allocated): 32 MiB after the
# first GEMM, 64 MiB once a backward has run (a second stream's handle). Measured on the H200 with
# tools/cublas_workspace.py (tests/fixtures/microbench/cublas-workspace.txt).
CUBLAS_WORKSPACE_BYTES = 64 * 2**20

# Transformer Engine's own cuBLAS workspace (transformer_engine/pytorch/cpp_extensions/gemm.py
# get_cublas_workspace_size_bytes, TE 2.14.1): 32 MiB + 1 KiB on Hopper and later (4 MiB before; the
# larger is counted), one per device, allocated through torch; grouped GEMMs (TE's GroupedLinear,
# --moe-grouped-gemm) add one more per cuBLAS stream (tex.get_num_cublas_streams(): 4).
TE_WORKSPACE_BYTES = 32 * 2**20 + 1024
TE_GROUPED_GEMM_STREAMS = 4
# The fused vocab-parallel cross entropy (--cross-entropy-loss-fusion, fusions/fused_cross_entropy.py,
# torch.compile'd): bytes per logit at its peak, measured on the H200 on its own
# (tools/ce_memory_probe.py, tests/fixtures/te-h200/ce-probe.txt: 10.00 in the forward and the
# backward, the unfused one 6.00) and in the 13 runs through TE (tests/fixtures/te-h200/measurements,
# vocabularies 32000 to 151936): one more fp32 logits-sized buffer beside the fp32 copy and the
# 16-bit logits or gradient, which the compiled functions allocate where the unfused code updates
# its input in place.
FUSED_CE_BYTES_PER_LOGIT = 10

# The selective-recompute modules modelled here; moe, moe_act, shared_experts and mla_up_proj change
# no dense GPT layer's figure (transformer_layer.py:436-503).
MODELLED_MODULES = ("core_attn", "mlp", "layernorm")


@dataclass(frozen=True)
class Shape:
    """What the activation figures depend on, as plain numbers (the estimator's inputs)."""

    layers: int
    hidden: int
    heads: int
    groups: int
    kv_channels: int
    ffn: int
    seq: int
    micro: int
    vocab: int  # padded
    swiglu: bool
    rmsnorm: bool
    rope: bool
    bias: bool
    fused: bool  # fused_kernels
    local_attention: bool  # transformer_impl: local
    num_experts: int | None
    topk: int
    moe_ffn: int
    elem: int  # bytes of an activation element
    tp: int
    pp: int
    cp: int
    ep: int
    etp: int
    sp: bool
    microbatches: int
    vpp: int | None
    recompute: str | None  # None, "selective" or "full"
    modules: tuple[str, ...]  # selective recompute's modules
    method: str | None  # full recompute: "uniform" or "block"
    recompute_layers: int | None
    moe_layers: tuple[int, ...] | None = None  # 1 for an MoE layer (moe_layer_freq); None: every layer
    shared_ffn: int = 0  # the shared experts' intermediate size
    mla: tuple[int | None, int, int, int, int] | None = None  # q_lora, kv_lora, qk, qk rope, v head dims
    mtp_layers: int = 0
    ce_fusion: bool = False  # --cross-entropy-loss-fusion (performance.py)
    grouped_gemm: bool = False  # --moe-grouped-gemm (TE's grouped experts)
    attention_mask: bool = True  # --create-attention-mask-in-dataloader (Megatron's default)

    def is_moe(self, layer: int) -> bool:
        """Whether layer `layer` (0-based, counting MTP layers after the last) has an MoE MLP."""
        if self.num_experts is None:
            return False
        if self.moe_layers is None:
            return True
        return bool(self.moe_layers[min(layer, len(self.moe_layers) - 1)])


@dataclass(frozen=True)
class Layer:
    """One layer's bytes by module: what it keeps after its forward, and what its backward holds."""

    norms: float
    attention_linear: float
    core_attention: float  # kept after the forward
    core_attention_backward: float  # held while the layer's core attention runs backward
    mlp: float
    dropout_masks: float
    mlp_backward: float = 0.0  # the gradients held at once while the layer's MLP runs backward

    @property
    def kept(self) -> float:
        return self.norms + self.attention_linear + self.core_attention + self.mlp + self.dropout_masks


def scores_elements(x: Shape) -> float:
    """Elements of one [b, n/TP, s, s] score tensor (local attention refuses CP > 1)."""
    return x.micro * (x.heads / x.tp) * x.seq ** 2


def full_layer(x: Shape, moe: bool | None = None) -> Layer:
    """A layer with nothing recomputed (an MoE layer unless `moe` says which; dense without experts)."""
    moe = x.num_experts is not None if moe is None else moe
    s, b, h, e, tp = x.seq / x.cp, x.micro, x.hidden, x.elem, x.tp
    whole = tp if x.sp else 1  # [s, b, h] tensors outside the TP region
    sbh = s * b * h
    stats = 8 if not x.rmsnorm else 4
    norms = 2 * (e * sbh + stats * s * b) / whole
    q, kv = x.heads * x.kv_channels, x.groups * x.kv_channels
    attention = e * sbh / whole + e * s * b * (q + 2 * kv) / tp + e * sbh / tp  # QKV in, QKV out, proj in
    if x.mla is not None:
        attention = _mla_attention(x, s * b, whole)
    elif x.rope and not x.fused:
        attention += e * s * b * (q + kv) / tp + e * s * b * q / tp  # rotate_half(q), rotate_half(k), new q
        if x.groups == x.heads:
            attention += e * s * b * kv / tp  # the new k, kept by the score matmul
    if x.groups != x.heads and x.local_attention:  # TE's fused attention takes the groups as they are
        attention += 2 * e * s * b * q / tp  # k and v repeated to n heads
    if x.local_attention:
        core = (2 * e + 1) * scores_elements(x)
        core_backward = 4 * e * scores_elements(x)
    else:
        core = core_backward = 4 * b * (x.heads / tp) * s  # log-sum-exp in fp32
    # the MLP's backward: the gradient of fc2's input and, from the activation's backward, of fc1's
    # output (2 ffn with SwiGLU) at once, beside the incoming gradient [s, b, h] (and its all-gather
    # over TP with sequence parallel, for fc2's weight gradient)
    grads = 3 if x.swiglu else 2
    incoming = e * sbh * (1 + (1 / tp if x.sp else 0))
    if not moe:
        mlp = e * sbh / whole + _mlp_inner(x, x.ffn, s * b) / tp
        mlp_backward = e * s * b * x.ffn * grads / tp + incoming
    else:  # each token's top-k experts: s·b·k routed tokens a rank on balanced routing, ffn split by
        # ETP; the shared experts over every token (not measured)
        routed = s * b * x.topk
        probs_output = 0 if (x.swiglu and x.fused) else e * routed * x.moe_ffn  # kept for × probs
        mlp = (e * sbh / whole + e * routed * h + (_mlp_inner(x, x.moe_ffn, routed) + probs_output) / x.etp
               + _mlp_inner(x, x.shared_ffn, s * b) / tp)
        mlp_backward = e * routed * x.moe_ffn * grads / x.etp + incoming
    masks = 2 * sbh / whole
    return Layer(norms, attention, core, core_backward, mlp, masks, mlp_backward)


def _mla_attention(x: Shape, tokens: float, whole: int) -> float:
    """Multi-latent attention's kept tensors (module docstring), e bytes each; the up projections
    and everything after them are split by TP, the compressed q and kv are whole on every rank."""
    assert x.mla is not None
    q_lora, kv_lora, qk, rope, v = x.mla
    n = x.heads / x.tp
    compressed = 2 * (q_lora or 0) + 2 * kv_lora + rope  # norm inputs and outputs, k's rope part
    q_up = n * (qk + rope)
    split = q_up + n * (qk + v) + n * rope + 2 * n * (qk + rope) + n * v + n * v  # ups, rope, q, k, v, proj in
    return x.elem * tokens * (x.hidden / whole + compressed + split)


def _mlp_inner(x: Shape, ffn: int, tokens: float) -> float:
    """What the activation between fc1 and fc2 keeps, over all TP ranks."""
    e = x.elem
    if x.swiglu:
        return e * tokens * ffn * (3 if x.fused else 4)  # fc1 out (2 ffn), [SiLU out,] fc2 in
    return e * tokens * ffn * 2  # fc1 out, fc2 in


def kept_layer(x: Shape, moe: bool | None = None) -> Layer:
    """A layer as selective recompute of x.modules leaves it after its forward."""
    full = full_layer(x, moe)
    if x.recompute != "selective":
        return full
    s, b, e = x.seq / x.cp, x.micro, x.elem
    whole = x.tp if x.sp else 1
    core, mlp, norms, attention = full.core_attention, full.mlp, full.norms, full.attention_linear
    if "core_attn" in x.modules:
        core = 0.0
    if "mlp" in x.modules:
        mlp = e * s * b * x.hidden / whole  # the checkpoint keeps its input only
    if "layernorm" in x.modules:  # the norm outputs (QKV and fc1 inputs) are recomputed
        attention -= e * s * b * x.hidden / whole
        mlp -= e * s * b * x.hidden / whole if "mlp" not in x.modules else 0
    return Layer(norms, attention, core, full.core_attention_backward, mlp, full.dropout_masks, full.mlp_backward)


def layer_input(x: Shape) -> float:
    """What a fully recomputed unit keeps: its input hidden states."""
    return x.elem * (x.seq / x.cp) * x.micro * x.hidden / (x.tp if x.sp else 1)


def stage_layers(x: Shape) -> int:
    """Layers on one pipeline stage (per virtual stage times the virtual stages)."""
    return x.layers // x.pp


def recomputed_units(x: Shape) -> list[tuple[int, bool]]:
    """The stage's layers as (layers in the unit, recomputed in full) in forward order."""
    n = stage_layers(x)
    if x.recompute != "full":
        return [(1, False)] * n
    k = x.recompute_layers or 1
    if x.method == "block":  # the first k layers of the stage, each on its own (transformer_block.py)
        k = min(k, n)
        return [(1, True)] * k + [(1, False)] * (n - k)
    units = [(k, True)] * (n // k)
    return units + ([(n % k, True)] if n % k else [])


def backward_extra(layer: Layer) -> float:
    """What a layer's backward holds beyond what the layer kept: its core attention's backward set or
    its MLP's gradients, the larger (with fused attention the MLP's)."""
    return max(layer.core_attention_backward - layer.core_attention, layer.mlp_backward)


def microbatch_profile(x: Shape, stage: int = 0) -> tuple[float, float]:
    """(kept after the forward, highest backward peak) of one micro batch on pipeline stage `stage`:
    its layers as moe_layers says (the first dense layers sit on the first stage), and on the last
    stage the MTP layers, each a layer like the last plus eh_proj's [s, b, 2h] input."""
    n = stage_layers(x)
    kinds = [x.is_moe(stage * n + i) for i in range(n)]
    full = {k: full_layer(x, k) for k in set(kinds)}
    kept = {k: kept_layer(x, k) for k in set(kinds)}
    done = peak = 0.0
    i = 0
    for size, recomputed in recomputed_units(x):
        unit = kinds[i:i + size]
        i += size
        if recomputed:  # the unit runs its forward again, keeping everything, then its backward
            held = sum(full[k].kept for k in unit) + backward_extra(full[unit[-1]])
            unit_kept = layer_input(x)
        else:
            one = kept[unit[0]]
            held = one.kept + backward_extra(one)
            unit_kept = one.kept
        peak = max(peak, done + held)
        done += unit_kept
    if stage == x.pp - 1 and x.mtp_layers:
        mtp = full_layer(x, x.is_moe(x.layers))  # MTP layers are not recomputed (transformer_block.py)
        s = x.seq / x.cp
        per_layer = mtp.kept + x.elem * s * x.micro * 2 * x.hidden / (x.tp if x.sp else 1)
        peak = max(peak, done + x.mtp_layers * per_layer + backward_extra(mtp))
        done += x.mtp_layers * per_layer
    return done, peak


def in_flight(x: Shape) -> float:
    """Micro batches whose activations the first stage holds (1F1B warm-up; Megatron's own
    interleaving factor, theoretical_memory_usage.py:399-413)."""
    if x.pp == 1:
        return 1.0
    if x.vpp is not None:
        return x.pp * (1 + (x.pp - 1) / (x.pp * x.vpp))
    return float(min(x.pp, x.microbatches))


def attention_mask_bytes(x: Shape) -> float:
    """The dataloader's causal mask, bool [b, 1, s/CP, s], on the first and the last stage."""
    return x.micro * (x.seq / x.cp) * x.seq if x.attention_mask else 0.0


def first_stage_extra(x: Shape) -> float:
    """The embedding's bool dropout mask [s, b, h], the int64 token ids Megatron counts (8sb) and the
    dataloader's attention mask."""
    s = x.seq / x.cp
    return s * x.micro * x.hidden / (x.tp if x.sp else 1) + 8 * s * x.micro + attention_mask_bytes(x)


def loss_bytes(x: Shape) -> float:
    """The last stage's head: the final norm's and the output layer's inputs, and the logits: the
    16-bit logits with their fp32 copy in the cross-entropy's forward, or its fp32 softmax with the
    16-bit gradient autograd casts it to (cross_entropy.py:35, 230): 6 bytes per logit in bf16;
    the fused cross entropy FUSED_CE_BYTES_PER_LOGIT."""
    s, b = x.seq / x.cp, x.micro
    inputs = 2 * x.elem * s * b * x.hidden / (x.tp if x.sp else 1)
    logit_bytes = FUSED_CE_BYTES_PER_LOGIT if x.ce_fusion else 4 + (x.elem if x.elem < 4 else 0)
    return inputs + logit_bytes * s * b * x.vocab / x.tp * (1 + x.mtp_layers)  # and each MTP layer's logits


def attention_buffer_bytes(x: Shape) -> float:
    """Megatron's global memory buffer for the unfused scores, allocated once (the "mpu" buffer)."""
    return x.elem * scores_elements(x) if x.local_attention else 0.0


def activation_peak(x: Shape) -> tuple[float, float, str]:
    """(the layers' bytes, the loss's bytes, where) at the step's peak: the first stage's backward of
    its last layer with the warm-up micro batches held, or the last stage at the loss."""
    kept, backward = microbatch_profile(x)
    extra = first_stage_extra(x)
    first = (in_flight(x) - 1) * kept + backward + extra
    last_kept = kept if x.pp == 1 else microbatch_profile(x, x.pp - 1)[0]
    # 1F1B: the last stage holds one micro batch (and its batch's mask)
    last_layers = last_kept + (extra if x.pp == 1 else attention_mask_bytes(x))
    if first >= last_layers + loss_bytes(x):
        return first, 0.0, "a layer's backward"
    return last_layers, loss_bytes(x), "the loss"


def workspace_bytes(x: Shape) -> float:
    """The GEMM libraries' workspaces torch's allocator holds: cuBLAS's through torch (Megatron's
    own output layer and the local layers), and with Transformer Engine TE's (grouped GEMMs: one a stream)."""
    te = 0 if x.local_attention else TE_WORKSPACE_BYTES * (1 + (TE_GROUPED_GEMM_STREAMS if x.grouped_gemm else 0))
    return CUBLAS_WORKSPACE_BYTES + te
