"""The memory model's parameter counts for the MoE and MLA families (issue 30): multi-latent
attention, first dense layers, shared experts and MTP layers, against hf/size.py's count of every
weight Bridge builds and the published sizes."""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path

import pytest

from compiler.megatron.param_counts import counts
from compiler.megatron.hf.model import HFModel
from compiler.megatron.huggingface import derive, hf_model_fields
from compiler.megatron.hf.size import parameter_count
from compiler.megatron.parallel import ParallelLayout
from compiler.one_pass import compile_spec
from compiler.schema.record import extend, replace
from helpers import REPO

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ONE_GPU = ParallelLayout(1, 1, 1, 1, 1, 1, 1, 1, 1)
CONFIGS = ("Qwen3-30B-A3B", "DeepSeek-V3", "DeepSeek-V2-Lite", "GLM-4.5", "Qwen3-0.6B", "Llama-3.1-8B", "Qwen2-7B")


def config(name: str) -> dict:
    return json.loads((FIXTURES / "hf-configs" / name / "config.json").read_text())


@pytest.fixture(scope="module")
def base():
    return compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "gpt-7b.yaml", render_files=False).spec.training


def training_of(base, a, args=(), **model):
    m = extend(replace(base.model, ffn_hidden_size=None), HFModel, **hf_model_fields(a))
    return types.SimpleNamespace(model=replace(m, **model) if model else m, args=list(args))


def left_out_by_megatron(a) -> int:
    """What theoretical_memory_usage.py does not count and size.py does: QKV biases, QK norms
    (non-MLA), the expert-score bias (a buffer, not a weight)."""
    layers = a.num_layers + ((a.moe.mtp_layers or 0) if a.moe is not None else 0)
    out = 0
    if a.mla is None:
        q, kv = a.num_attention_heads * a.kv_channels, 2 * a.num_query_groups * a.kv_channels
        out += layers * ((q + kv) if a.add_qkv_bias else 0) + layers * (2 * a.kv_channels if a.qk_layernorm else 0)
    if a.moe is not None and a.moe.expert_bias:
        moe_layers = sum(a.moe.layer_freq) + (a.moe.mtp_layers or 0) * a.moe.layer_freq[-1]
        out += moe_layers * a.moe.num_experts
    return out


@pytest.mark.parametrize("name", CONFIGS)
def test_memory_counts_every_weight_size_py_counts(base, name):
    a = derive(config(name))
    c = counts(training_of(base, a), ONE_GPU, a.vocab_size)
    assert c["total"] + left_out_by_megatron(a) == parameter_count(a).total


def test_deepseek_v3_is_its_published_size(base):
    """671 B in the main model and 14 B in its MTP module (the model card); the count before issue
    30 treated all 61 layers as MoE with standard attention and no MTP: 702.2 B."""
    a = derive(config("DeepSeek-V3"))
    total = counts(training_of(base, a), ONE_GPU, a.vocab_size)["total"]
    assert total == pytest.approx(685e9, rel=0.005)
    no_mtp = counts(training_of(base, a, mtp_num_layers=None), ONE_GPU, a.vocab_size)["total"]
    assert no_mtp == pytest.approx(671e9, rel=0.005)
    dense_first = counts(training_of(base, a, moe_layer_freq=None), ONE_GPU, a.vocab_size)["total"]
    assert dense_first > total + 10e9  # the three dense layers counted as MoE layers


def test_expert_parallelism_splits_only_the_routed_experts(base):
    a = derive(config("DeepSeek-V3"))
    t = training_of(base, a)
    one = counts(t, ONE_GPU, a.vocab_size)
    ep8 = counts(t, ParallelLayout(1, 8, 8, 1, 1, 1, 8, 1, 8), a.vocab_size)
    routed = 58 * 256 * 3 * 7168 * 2048 + 1 * 256 * 3 * 7168 * 2048  # 58 MoE layers and the MTP layer
    assert one["expert"] == routed and ep8["expert"] == routed / 8
    # at TP 8 the dense side is split 8 ways whatever EP is, the experts only by EP (ETP is 1)
    tp8 = counts(t, ParallelLayout(1, 8, 8, 8, 1, 1, 1, 1, 1), a.vocab_size)
    tp8_ep8 = counts(t, ParallelLayout(1, 8, 8, 8, 1, 1, 8, 1, 1), a.vocab_size)
    assert tp8["tp"] == pytest.approx(one["tp"] / 8) and tp8_ep8["tp"] == tp8["tp"]
    assert tp8["replicated"] == tp8_ep8["replicated"] == one["replicated"]
    assert tp8["expert"] == routed and tp8_ep8["expert"] == routed / 8


def test_the_shared_expert_gate_counts_when_training_args_turn_it_on(base):
    """theoretical_memory_usage.py:119-123: h per MoE layer (the MTP layer's too), replicated; only
    with shared experts (Qwen3-MoE has none)."""
    a = derive(config("DeepSeek-V3"))
    off = counts(training_of(base, a), ONE_GPU, a.vocab_size)
    on = counts(training_of(base, a, args=["--moe-shared-expert-gate"]), ONE_GPU, a.vocab_size)
    assert on["total"] - off["total"] == 7168 * (58 + 1)
    assert on["replicated"] - off["replicated"] == 7168 * (58 + 1) and on["tp"] == off["tp"]
    q = derive(config("Qwen3-30B-A3B"))
    assert (counts(training_of(base, q, args=["--moe-shared-expert-gate"]), ONE_GPU, q.vocab_size)
            == counts(training_of(base, q), ONE_GPU, q.vocab_size))


ROUTED_LAYER = 256 * 3 * 7168 * 2048  # one DeepSeek-V3 MoE layer's routed experts


def test_each_pipeline_stage_holds_its_own_experts_and_the_last_the_mtp_layer(base):
    """60 layers (3 dense) over PP 4: the first stage's layers 0-14 have 12 MoE layers, the last's
    45-59 fifteen and the MTP layer (mtp_on_this_rank: the last stage). Megatron's most loaded shard
    puts 1/4 of all routed experts plus the MTP layer's on every stage."""
    from compiler.megatron.param_counts import stage_counts

    a = derive(dict(config("DeepSeek-V3"), num_hidden_layers=60))
    t = training_of(base, a)
    layout = ParallelLayout(1, 8, 8, 1, 4, 1, 2, 1, 2)
    first, middle, last = (stage_counts(t, layout, a.vocab_size, r, None) for r in (0, 1, 3))
    assert first[1] == 12 * ROUTED_LAYER / 2 and middle[1] == 15 * ROUTED_LAYER / 2
    assert last[1] == (15 + 1) * ROUTED_LAYER / 2
    assert counts(t, layout, a.vocab_size)["expert"] == (57 / 4 + 1) * ROUTED_LAYER / 2
    # at TP = EP = 1 the stages add up to the whole model, plus the MTP layer's copy of the embedding
    one = ParallelLayout(1, 4, 4, 1, 4, 1, 1, 1, 1)
    held = sum(sum(stage_counts(t, one, a.vocab_size, r, None)) for r in range(4))
    assert held == counts(t, one, a.vocab_size)["total"] + 7168 * a.vocab_size
    # the dense side: the last stage holds the MTP layer's attention, shared expert, norms and eh_proj
    mtp = counts(t, ONE_GPU, a.vocab_size)["total"] - counts(training_of(base, a, mtp_num_layers=None), ONE_GPU,
                                                             a.vocab_size)["total"]
    assert last[0] - middle[0] == pytest.approx(mtp - ROUTED_LAYER + 7168 + 2 * 7168 * a.vocab_size)


def test_without_a_pipeline_the_one_stage_holds_megatrons_most_loaded_shard():
    """specs/deepseek-v3.yaml (PP 1): the stage's parameters are Megatron's most loaded shard, the
    MTP layer's attention, shared expert and norms included (before: only its routed experts)."""
    from compiler.megatron.pretrain import padded_vocab_size, vocab_size
    from compiler.megatron.stage_memory import stage_peaks

    facts = compile_spec(str(REPO / "specs" / "deepseek-v3.yaml"), "deepseek-v3.yaml", render_files=False).facts
    (only,) = stage_peaks(facts.training, facts.layout)
    t, layout = facts.training, facts.layout
    padded = padded_vocab_size(vocab_size(t), t.model.make_vocab_size_divisible_by, layout.tensor)
    c = counts(t, layout, padded)
    assert layout.pipeline == 1 and only.parameters == round(c["tp"] + c["replicated"] + c["expert"])


def test_virtual_stages_hold_interleaved_layers():
    from compiler.megatron.param_counts import stage_layers

    assert stage_layers(8, 2, 2, 0) == [0, 1, 4, 5] and stage_layers(8, 2, 2, 1) == [2, 3, 6, 7]
    assert stage_layers(6, 3, None, 2) == [4, 5]


# --- the activation model (activations.py) for the same layouts ---

def shape(base, a, layout=ONE_GPU, **changes):
    from compiler.megatron.memory import shape_of

    t = types.SimpleNamespace(**{k: getattr(base, k) for k in (
        "recompute", "args", "batch", "fused_kernels", "precision", "sequence_parallel", "virtual_pipeline",
        "performance", "distributed_optimizer")},
        model=replace(training_of(base, a).model, seq_length=4096))
    x = shape_of(t, layout, a.vocab_size, 8)
    return dataclasses.replace(x, **changes) if changes else x


def test_first_dense_layers_keep_a_dense_mlp_on_the_first_stage(base):
    from compiler.megatron import activations as act

    a = derive(dict(config("DeepSeek-V3"), intermediate_size=12288))  # a dense MLP unlike the MoE one
    x = shape(base, a, mtp_layers=0)
    assert x.moe_layers[:4] == (0, 0, 0, 1) and x.mla is not None and x.shared_ffn == 2048
    all_moe = dataclasses.replace(x, moe_layers=None)
    dense, moe = act.full_layer(x, False).kept, act.full_layer(x, True).kept
    assert dense != moe
    assert act.microbatch_profile(x)[0] - act.microbatch_profile(all_moe)[0] == pytest.approx(3 * (dense - moe))


def test_shared_experts_keep_an_mlp_over_every_token(base):
    from compiler.megatron import activations as act

    x = shape(base, derive(config("DeepSeek-V3")))
    no_shared = dataclasses.replace(x, shared_ffn=0)
    tokens = x.seq * x.micro
    swiglu_kept = 3 if x.fused else 4  # fc1 out (2 ffn), [SiLU out,] fc2 in
    assert act.full_layer(x, True).mlp - act.full_layer(no_shared, True).mlp == 2 * tokens * 2048 * swiglu_kept


def test_mtp_layers_sit_on_the_last_stage_with_their_logits(base):
    from compiler.megatron import activations as act

    a = derive(config("DeepSeek-V3"))
    x = shape(base, a, pp=2)
    none = dataclasses.replace(x, mtp_layers=0)
    assert act.microbatch_profile(x, 0) == act.microbatch_profile(none, 0)
    extra = act.microbatch_profile(x, 1)[0] - act.microbatch_profile(none, 1)[0]
    assert extra == act.full_layer(x, True).kept + 2 * x.seq * x.micro * 2 * x.hidden  # a layer and eh_proj's input
    per_logit = act.FUSED_CE_BYTES_PER_LOGIT if x.ce_fusion else 6  # the fused cross entropy holds 10 (issue 27)
    assert act.loss_bytes(x) - act.loss_bytes(none) == per_logit * x.seq * x.micro * x.vocab  # its logits


def test_mla_keeps_its_latent_and_head_tensors(base):
    """DeepSeek-V3's MLA at TP 1: per token h + 2·q_lora + 2·kv_lora + rope (whole) and
    n·(qk+rope) [q up] + n·(qk+v) [kv up] + n·rope [rotated] + 2·n·(qk+rope) [q, k] + 2·n·v [v, proj in]."""
    from compiler.megatron import activations as act

    x = shape(base, derive(config("DeepSeek-V3")))
    n, h = 128, 7168
    per_token = h + 2 * 1536 + 2 * 512 + 64 + n * 192 + n * 256 + n * 64 + 2 * n * 192 + 2 * n * 128
    assert act.full_layer(x, True).attention_linear == 2 * x.seq * x.micro * per_token
    standard = dataclasses.replace(x, mla=None)
    assert act.full_layer(x, True).attention_linear > 2 * act.full_layer(standard, True).attention_linear
