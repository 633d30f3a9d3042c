"""compiler.megatron.huggingface: Megatron-LM architecture flags from a Hugging Face config.json."""

import json
from pathlib import Path

import pytest

from compiler.megatron.huggingface import (
    MODEL_FIELDS,
    SUPPORTED_ARCHITECTURES,
    HFConfigError,
    UnsupportedArchitecture,
    contradictions,
    derive,
    expected_model_fields,
    tokenizer_flags,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
# Every option string of Megatron-LM's parser at 571370c8 (add_megatron_arguments), dumped there.
MEGATRON_FLAGS = set((FIXTURES / "megatron-571370c8-flags.txt").read_text().split())


def config(name: str) -> dict:
    """A stored config.json (tests/fixtures/hf-configs/<name>/config.json)."""
    return json.loads((FIXTURES / "hf-configs" / name / "config.json").read_text())


def tail(rope: str, norm: str, extra: str, vocab: int) -> str:
    """The flags every supported family ends with."""
    return (f"--position-embedding-type rope {rope} --normalization RMSNorm --norm-epsilon {norm} "
            f"--swiglu --disable-bias-linear {extra}--attention-dropout 0.0 --hidden-dropout 0.0 "
            f"--padded-vocab-size {vocab}")


EXPECTED = {
    "Llama-2-7b-hf": (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 "
        "--kv-channels 128 --max-position-embeddings 4096 "
        + tail("--rotary-base 10000 --rotary-percent 1.0", "1e-05",
               "--untie-embeddings-and-output-weights ", 32000)),
    "Llama-3.1-8B": (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --kv-channels 128 "
        "--max-position-embeddings 131072 "
        + tail("--rotary-base 500000 --rotary-percent 1.0 --use-rope-scaling "
               "--rope-scaling-factor 8.0", "1e-05", "--untie-embeddings-and-output-weights ",
               128256)),
    "Qwen2.5-0.5B": (
        "--num-layers 24 --hidden-size 896 --ffn-hidden-size 4864 --num-attention-heads 14 "
        "--group-query-attention --num-query-groups 2 --kv-channels 64 "
        "--max-position-embeddings 32768 "
        + tail("--rotary-base 1000000 --rotary-percent 1.0", "1e-06", "--add-qkv-bias ", 151936)),
    "Qwen2-7B": (
        "--num-layers 28 --hidden-size 3584 --ffn-hidden-size 18944 --num-attention-heads 28 "
        "--group-query-attention --num-query-groups 4 --kv-channels 128 "
        "--max-position-embeddings 131072 "
        + tail("--rotary-base 1000000 --rotary-percent 1.0", "1e-06",
               "--add-qkv-bias --untie-embeddings-and-output-weights ", 152064)),
    "Qwen3-0.6B": (
        "--num-layers 28 --hidden-size 1024 --ffn-hidden-size 3072 --num-attention-heads 16 "
        "--group-query-attention --num-query-groups 8 --kv-channels 128 "
        "--max-position-embeddings 40960 "
        + tail("--rotary-base 1000000 --rotary-percent 1.0", "1e-06", "--qk-layernorm ", 151936)),
    "Mistral-7B-v0.1": (
        "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
        "--group-query-attention --num-query-groups 8 --kv-channels 128 "
        "--max-position-embeddings 32768 "
        + tail("--rotary-base 10000 --rotary-percent 1.0", "1e-05",
               "--untie-embeddings-and-output-weights --window-size 4095,0 ", 32000)),
    # the device experiment's model, saved by transformers 5.8.1 (rope_parameters layout)
    "tiny-llama-transformers5": (
        "--num-layers 2 --hidden-size 256 --ffn-hidden-size 768 --num-attention-heads 4 "
        "--group-query-attention --num-query-groups 2 --kv-channels 64 "
        "--max-position-embeddings 16384 "
        + tail("--rotary-base 10000 --rotary-percent 1.0 --use-rope-scaling "
               "--rope-scaling-factor 8.0", "1e-05", "", 1000)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_exact_flags(name):
    assert " ".join(derive(config(name)).flags) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_flag_exists_in_megatron_at_the_pinned_commit(name):
    options = [f for f in derive(config(name)).flags if f.startswith("--")]
    assert options and set(options) <= MEGATRON_FLAGS, set(options) - MEGATRON_FLAGS


def test_tokenizer_flags_exist_and_name_the_model_directory():
    flags = tokenizer_flags("/mnt/megatron/models/Qwen3-0.6B")
    assert flags == ("--tokenizer-type", "HuggingFaceTokenizer",
                     "--tokenizer-model", "/mnt/megatron/models/Qwen3-0.6B")
    assert {f for f in flags if f.startswith("--")} <= MEGATRON_FLAGS


def test_typed_values_of_qwen3():
    a = derive(config("Qwen3-0.6B"))
    assert (a.family, a.architecture) == ("qwen3", "Qwen3ForCausalLM")
    assert a.kv_channels == 128 != a.hidden_size // a.num_attention_heads  # head_dim is explicit
    assert (a.qk_layernorm, a.add_qkv_bias, a.untie_embeddings) == (True, False, False)
    assert (a.rotary_base, a.rope_scaling_factor, a.window_size) == (1000000, None, None)


def test_llama2_without_gqa_keys_gets_no_gqa_flags():
    a = derive(config("Llama-2-7b-hf"))
    assert a.num_query_groups == a.num_attention_heads == 32
    assert "--group-query-attention" not in a.flags and "--num-query-groups" not in a.flags


def test_llama_3_2_is_refused_because_pretrain_gpt_ignores_the_rope_factor():
    with pytest.raises(HFConfigError, match=r"factor 32\.0.*gpt_builders\.py:94"):
        derive(config("Llama-3.2-1B"))


def test_the_two_rope_layouts_give_the_same_flags():
    legacy = config("tiny-llama-transformers5")
    params = legacy.pop("rope_parameters")
    legacy["rope_theta"] = params.pop("rope_theta")
    legacy["rope_scaling"] = params
    assert derive(legacy).flags == derive(config("tiny-llama-transformers5")).flags


def test_unsupported_architecture_lists_the_supported_ones():
    cfg = dict(config("Llama-2-7b-hf"), architectures=["GemmaForCausalLM"])
    with pytest.raises(UnsupportedArchitecture) as e:
        derive(cfg)
    for arch in SUPPORTED_ARCHITECTURES:
        assert arch in str(e.value)
    with pytest.raises(UnsupportedArchitecture, match="exactly one"):
        derive(dict(cfg, architectures=[]))


@pytest.mark.parametrize("change, match", [
    ({"rope_theta": 10000.5}, "not an integer"),
    ({"hidden_act": "gelu"}, "only silu"),
    ({"attention_bias": True}, "o_proj"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "'linear' is not supported"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 2.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
     "low_freq_factor"),
    ({"num_key_value_heads": 5}, "must divide"),
    ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
])
def test_llama_refusals(change, match):
    with pytest.raises(HFConfigError, match=match):
        derive(dict(config("Llama-3.1-8B"), **change))


def test_qwen_enabled_sliding_window_is_refused_and_yarn_too():
    with pytest.raises(HFConfigError, match="use_sliding_window"):
        derive(dict(config("Qwen2-7B"), use_sliding_window=True))
    with pytest.raises(HFConfigError, match="rope_scaling type 'yarn' for qwen3: .*no flag for the YaRN factor"):
        derive(dict(config("Qwen3-0.6B"), rope_scaling={"rope_type": "yarn", "factor": 4.0}))


def test_vocab_must_divide_by_tensor_parallel():
    assert derive(config("Qwen3-0.6B"), tensor_parallel=8).vocab_size == 151936
    with pytest.raises(HFConfigError, match="tensor parallel 3"):
        derive(config("Qwen3-0.6B"), tensor_parallel=3)


def test_model_fields_name_only_project_fields_and_config_keys():
    assert set(MODEL_FIELDS) == set(expected_model_fields(derive(config("Qwen3-0.6B"))))
    assert set(MODEL_FIELDS) == {
        "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
        "seq_length", "max_position_embeddings", "vocab_size", "swiglu", "normalization",
        "position_embedding", "untie_embeddings", "disable_bias_linear"}


def test_contradictions_name_both_locations():
    cfg = config("Qwen3-0.6B")
    a = derive(cfg)
    spec = {"num_layers": 28, "hidden_size": 896, "seq_length": 65536, "normalization": "LayerNorm",
            "untie_embeddings": True, "num_query_groups": 8, "swiglu": True}
    found = {c.field: c for c in contradictions(a, spec, cfg)}
    assert set(found) == {"hidden_size", "seq_length", "normalization", "untie_embeddings"}
    msg = found["hidden_size"].message("models/qwen3-0.6b/config.json")
    assert msg.startswith("training.model.hidden_size = 896 contradicts "
                          "models/qwen3-0.6b/config.json hidden_size = 1024")
    assert found["untie_embeddings"].hf_value is True  # tie_word_embeddings
    assert contradictions(a, {"seq_length": 4096, "num_query_groups": 8}, cfg) == []


def test_mha_spelled_as_query_groups_equal_to_heads_is_no_contradiction():
    cfg = config("Llama-2-7b-hf")
    assert contradictions(derive(cfg), {"num_query_groups": 32}, cfg) == []
    assert [c.field for c in contradictions(derive(cfg), {"num_query_groups": 8}, cfg)] == [
        "num_query_groups"]
