"""What a Megatron-LM configuration needs from the image (Transformer Engine, Apex), and the
configurations that crash whatever the image holds, at the pinned commit 571370c8.

A spec says which transformer implementation runs (`training.model.transformer_impl`) and whether
the fused kernels are used (`training.fused_kernels`); the image decides whether Transformer Engine
and Apex import. `transformer_impl: transformer_engine` cannot run without TE, so such a spec has
it; `local` runs Megatron's own layers, with Apex's fused norms when Apex imports and torch's
otherwise (megatron/core/models/gpt/gpt_layer_specs.py:62-76). Each row below is a crash seen on a
real H200 run (torch 2.11, no TE, no Apex), the Megatron line that raises it, and the change that
avoids it. `needs` is what an image must hold for the configuration to run: "" when nothing helps
(an error), else the packages whose presence would run it (a warning: the image may have them).
Beside them, the shapes at which a fused kernel the configuration asks for runs at all (the fused softmax).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..tuples import NamedTuple
from .performance import gradient_accumulation_fusion, grouped_gemm


class RuntimeConfig(NamedTuple):
    """The settings the rows read: typed fields, and Megatron's values for raw flags."""

    transformer_impl: str  # "local" | "transformer_engine"
    fused_kernels: bool
    sequence_parallel: bool
    tensor: int
    num_experts: int | None
    bias_linear: bool  # Megatron's add_bias_linear: not training.model.disable_bias_linear
    recompute_granularity: str | None  # after --recompute-activations, which makes it "selective"
    recompute_modules: tuple[str, ...]  # Megatron's default ["core_attn"] (transformer_config.py:1583)
    gradient_accumulation_fusion: bool = True  # Megatron's default (arguments.py:2600-2602, a store_false flag)
    rope_fusion: bool = False  # apply_rope_fusion with rotary embeddings (Megatron's default: on)
    swiglu: bool = False
    grouped_gemm: bool = False  # --moe-grouped-gemm (TE's TEGroupedMLP experts)
    bias_dropout_fusion: bool = True  # fused_kernels and no --no-bias-dropout-fusion
    bias_swiglu_fusion: bool = True  # fused_kernels and no --no-bias-swiglu-fusion (bias_activation_fusion)
    bias_gelu_fusion: bool = True  # fused_kernels and no --no-bias-gelu-fusion (GeLU's bias_activation_fusion)


class Need(NamedTuple):
    code: str
    applies: Callable[[RuntimeConfig], bool]
    needs: str  # "" : crashes whatever the image holds; else what an image must hold to run it
    field: tuple[str | int, ...]  # the spec field a diagnostic points at (refined by the rule for raw flags)
    cause: str  # what Megatron does, with its file:line at the pinned commit
    fix: str
    signature: str = ""  # what the crash prints (a regex), for the doctor to recognise it in a log


def _local(c: RuntimeConfig) -> bool:
    return c.transformer_impl == "local"


def _te_moe_bias(c: RuntimeConfig) -> bool:
    """Experts with linear biases on Transformer Engine's layers (the local path crashes on any MoE bias)."""
    return not _local(c) and c.num_experts is not None and c.bias_linear


_NO_MOE_BIAS = "set training.model.disable_bias_linear: true (MoE models train without linear biases)"


def _selective(c: RuntimeConfig, module: str) -> bool:
    return c.recompute_granularity == "selective" and module in c.recompute_modules


NEEDS: tuple[Need, ...] = (
    Need("megatron-needs-apex-or-te",
         lambda c: _local(c) and c.sequence_parallel and c.tensor > 1, "Apex or Transformer Engine",
         ("training", "sequence_parallel"),
         "sequence parallelism with transformer_impl: local uses Apex's fused LayerNorm, or, without Apex, "
         "torch's, which asserts 'sequence parallel not supported by torch LayerNorm' when the first "
         "TransformerLayer is built (megatron/core/transformer/torch_norm.py:50)",
         "set training.model.transformer_impl: transformer_engine (an image with Transformer Engine), or "
         "sequence_parallel: false", r"sequence parallel not supported by torch LayerNorm"),
    Need("megatron-needs-apex",
         lambda c: _local(c) and c.gradient_accumulation_fusion, "Apex (its fused_weight_gradient_mlp_cuda extension)",
         ("training", "fused_kernels"),
         "gradient accumulation fusion (on unless --no-gradient-accumulation-fusion) in the local implementation's "
         "linear layers needs Apex's fused_weight_gradient_mlp_cuda: without it ColumnParallelLinear raises "
         "'RuntimeError: ColumnParallelLinear was called with gradient_accumulation_fusion set to True but the custom "
         "CUDA extension fused_weight_gradient_mlp_cuda module is not found' "
         "(megatron/core/tensor_parallel/layers.py:956)",
         "set training.fused_kernels: false (it passes --no-gradient-accumulation-fusion), or use an image with Apex",
         r"fused_weight_gradient_mlp_cuda module is not found"),
    Need("megatron-needs-te",
         lambda c: _local(c) and c.rope_fusion, "Transformer Engine (1.4 or newer)",
         ("training", "fused_kernels"),
         "rotary embeddings with rope fusion on (Megatron's default) need Transformer Engine's fused kernel: without "
         "it TransformerConfig raises 'apply_rope_fusion is not available. Please install TE >= 1.4.' "
         "(megatron/core/transformer/transformer_config.py:1961)",
         "set training.fused_kernels: false (it passes --no-rope-fusion), or use an image with Transformer Engine",
         r"apply_rope_fusion is not available"),
    Need("megatron-local-crash",
         lambda c: _local(c) and c.num_experts is not None and c.bias_linear, "",
         ("training", "model", "disable_bias_linear"),
         "a mixture of experts with linear biases adds each expert's bias in place to the output of the "
         "tensor-parallel reduction, a view: the first forward raises 'RuntimeError: Output 0 of "
         "_ReduceFromModelParallelRegionBackward is a view and is being modified inplace' "
         "(megatron/core/transformer/mlp.py:348)",
         "set training.model.disable_bias_linear: true (the same model without biases runs)",
         r"_ReduceFromModelParallelRegionBackward is a view and is being modified inplace"),
    Need("megatron-moe-bias-crash",
         lambda c: _te_moe_bias(c) and c.grouped_gemm and c.bias_dropout_fusion, "",
         ("training", "model", "disable_bias_linear"),
         "Transformer Engine's grouped experts (--moe-grouped-gemm) with linear biases and the fused "
         "bias-dropout-add: TEGroupedMLP asserts 'bias_dropout_fusion is not supported in TEGroupedMLP when "
         "add_bias_linear=True' when the first TransformerLayer is built (megatron/core/transformer/moe/"
         "experts.py:194-196; seen on an H200, tests/fixtures/h200-hosts/call15/crashes)",
         f"{_NO_MOE_BIAS}, or training.fused_kernels: false",
         r"bias_dropout_fusion is not supported in TEGroupedMLP when add_bias_linear=True"),
    Need("megatron-moe-bias-crash",
         lambda c: _te_moe_bias(c) and c.swiglu and c.bias_swiglu_fusion, "",
         ("training", "model", "disable_bias_linear"),
         "experts with SwiGLU, linear biases and the fused bias-SwiGLU (on unless --no-bias-swiglu-fusion) "
         "weight each token by its router probability through weighted_bias_swiglu_impl, which raises "
         "'NotImplementedError: Bias is not supported for weighted swiglu fusion' at the first forward "
         "(megatron/core/fusions/fused_bias_swiglu.py:247, from moe/experts.py:717 or mlp.py:274; seen on an "
         "H200, tests/fixtures/h200-hosts/call15/crashes)",
         f"{_NO_MOE_BIAS}, or training.fused_kernels: false (it passes --no-bias-swiglu-fusion)",
         r"Bias is not supported for weighted swiglu fusion"),
    Need("megatron-moe-bias-crash",
         lambda c: _te_moe_bias(c) and not c.swiglu and c.bias_gelu_fusion, "",
         ("training", "model", "disable_bias_linear"),
         "GeLU experts with linear biases and the fused bias-GeLU (on with biases unless --no-bias-gelu-fusion) "
         "get the router's probabilities as a per-token scale, which only the SwiGLU and quick-GeLU fusions "
         "take: 'ValueError: Only support fusion of swiglu and quick_gelu with per_token_scale in MLP' at the "
         "first forward (megatron/core/transformer/mlp.py:291, SequentialMLP's experts; TE's grouped experts "
         "at moe/experts.py:734; read from the source, not seen on a device)",
         f"{_NO_MOE_BIAS}, or training.fused_kernels: false (it passes --no-bias-gelu-fusion)",
         r"Only support fusion of swiglu and quick_gelu (with per_token_scale in MLP|in TEGroupedMLP)"),
    Need("megatron-local-crash",
         lambda c: _local(c) and _selective(c, "mlp"), "",
         ("training", "args"),
         "selective recompute of the MLP with transformer_impl: local nests CheckpointFunction.backward "
         "frames until the GPU's memory is exhausted, even for a 650 MB model "
         "(megatron/core/tensor_parallel/random.py, CheckpointFunction)",
         "remove mlp from --recompute-modules (keep core_attn), or use training.recompute: {granularity: "
         "full}"),
    Need("megatron-needs-te",
         lambda c: _local(c) and _selective(c, "layernorm"), "Transformer Engine",
         ("training", "args"),
         "recomputing the layernorm goes through CheckpointWithoutOutput, which reads TE's "
         "FP8GlobalStateManager: without Transformer Engine it raises \"NameError: name "
         "'FP8GlobalStateManager' is not defined\" (megatron/core/tensor_parallel/random.py:667)",
         "remove layernorm from --recompute-modules, or use an image with Transformer Engine "
         "(transformer_impl: transformer_engine)", r"name 'FP8GlobalStateManager' is not defined"),
)


def runtime_config(t: Any, tensor: int, values: dict[str, Any]) -> RuntimeConfig:
    """The settings of a pretrain spec's training section T, with VALUES (validate.arg_values of the
    compiled arguments) for what raw flags may set."""
    granularity = values.get("recompute_granularity")
    if values.get("recompute_activations") is True:
        granularity = "selective"  # megatron/training/arguments.py:606-607
    modules = values.get("recompute_modules")
    if not isinstance(modules, (list, tuple)):
        modules = ["core_attn"]  # megatron/core/transformer/transformer_config.py:1583-1584
    return RuntimeConfig(
        transformer_impl=t.model.transformer_impl, fused_kernels=t.fused_kernels,
        sequence_parallel=t.sequence_parallel, tensor=tensor, num_experts=t.model.num_experts,
        bias_linear=not t.model.disable_bias_linear,
        recompute_granularity=granularity if isinstance(granularity, str) else None,
        recompute_modules=tuple(str(m) for m in modules),
        gradient_accumulation_fusion=gradient_accumulation_fusion(t),
        rope_fusion=(t.fused_kernels and t.model.position_embedding == "rope"
                     and values.get("apply_rope_fusion") is not False),
        swiglu=t.model.swiglu, grouped_gemm=grouped_gemm(t),
        bias_dropout_fusion=t.fused_kernels and values.get("bias_dropout_fusion") is not False,
        bias_swiglu_fusion=t.fused_kernels and values.get("bias_swiglu_fusion") is not False,
        bias_gelu_fusion=t.fused_kernels and values.get("bias_gelu_fusion") is not False,
    )


def needs(config: RuntimeConfig) -> Sequence[Need]:
    """The rows that apply to CONFIG, in table order."""
    return [n for n in NEEDS if n.applies(config)]


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
