"""The memory model's parameter counts for the MoE and MLA families (issue 30): multi-latent
attention, first dense layers, shared experts and MTP layers, against hf/size.py's count of every
weight Bridge builds and the published sizes."""

from __future__ import annotations

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


def training_of(base, a, **model):
    m = extend(replace(base.model, ffn_hidden_size=None), HFModel, **hf_model_fields(a))
    return types.SimpleNamespace(model=replace(m, **model) if model else m)


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
    assert ep8["tp"] == one["tp"] and ep8["replicated"] == one["replicated"]
