"""The MoE and MLA families (issue 30): the compiled flags against Bridge v0.5.1's own providers,
field by field, every refusal named, and no config.json value that crashes the derivation."""

from __future__ import annotations

import json
import math
import shutil
import sys
import types
from pathlib import Path

import pytest

from compiler.megatron.flops import flops_args, num_floating_point_operations
from compiler.megatron.hf.moe import layer_freq_flag
from compiler.megatron.hf.size import convert_size, export_gib, parameter_count
from compiler.megatron.huggingface import HFConfigError, UnsupportedArchitecture, derive, hf_model_fields
from compiler.megatron.hf.model import HFModel
from compiler.schema.record import extend, replace
from compiler.one_pass import compile_spec
from helpers import REPO

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PROVIDERS = sorted((FIXTURES / "bridge-providers").glob("*.json"))
MEGATRON_FLAGS = set((FIXTURES / "megatron-571370c8-flags.txt").read_text().split())


def config(name: str) -> dict:
    return json.loads((FIXTURES / "hf-configs" / name / "config.json").read_text())


def test_the_fixture_covers_every_supported_family():
    families = {derive(config(json.loads(p.read_text())["config"])).family for p in PROVIDERS}
    assert families == {"llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v2", "deepseek_v3", "glm4_moe"}


@pytest.mark.parametrize("path", PROVIDERS, ids=lambda p: p.stem)
def test_flags_give_the_model_bridge_builds_field_by_field(path):
    """tools/bridge/provider_fields.py ran Bridge's provider_bridge and Megatron's own parser on
    these flags; the flags must still be the ones derived now, and every field must agree."""
    record = json.loads(path.read_text())
    arch = derive(config(record["config"]))
    assert list(arch.flags) == record["flags"] and list(arch.te_flags) == record["te_flags"], "regenerate the fixture"
    bridge, megatron = record["bridge"], record["megatron"]
    differing = {}
    for field, want in bridge.items():
        got = megatron[field]
        if want in (None, "<absent>") and got in (None, "<absent>"):
            continue  # a field neither side's config class sets
        if field == "kv_channels" and want is None:
            # the provider leaves it to TransformerConfig.__post_init__: hidden / heads
            want = bridge["hidden_size"] // bridge["num_attention_heads"]
        if isinstance(want, float) or isinstance(got, float):
            if want is not None and got is not None and math.isclose(want, got, rel_tol=1e-12):
                continue
        if want != got:
            differing[field] = (want, got)
    assert differing == {}


@pytest.mark.parametrize("path", PROVIDERS, ids=lambda p: p.stem)
def test_every_flag_exists_in_megatrons_parser(path):
    arch = derive(config(json.loads(path.read_text())["config"]))
    assert {w for w in arch.flags + arch.te_flags if w.startswith("--")} <= MEGATRON_FLAGS


def test_deepseek_v3_flags():
    a = derive(config("DeepSeek-V3"))
    words = " ".join(a.flags)
    for part in ("--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
                 "--qk-pos-emb-head-dim 64 --v-head-dim 128 --rotary-scaling-factor 40.0 --mscale 1.0 "
                 "--mscale-all-dim 1.0",
                 "--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 --moe-layer-freq ([0]*3+[1]*58) "
                 "--moe-shared-expert-intermediate-size 2048 --moe-router-score-function sigmoid",
                 "--moe-router-enable-expert-bias --moe-router-num-groups 8 --moe-router-group-topk 4 "
                 "--moe-router-topk-scaling-factor 2.5", "--mtp-num-layers 1", "--padded-vocab-size 129280"):
        assert part in words
    assert "--group-query-attention" not in words  # MLA refuses GQA (arguments.py:1760)


def test_mla_without_yarn_still_writes_all_three_rope_flags():
    c = dict(config("DeepSeek-V3"), rope_scaling=None)
    words = " ".join(derive(c).flags)
    assert "--rotary-scaling-factor 1.0 --mscale 1.0 --mscale-all-dim 1.0" in words


def test_deepseek_v2_lite_has_no_q_lora_and_softmax_before_topk():
    a = derive(config("DeepSeek-V2-Lite"))
    assert a.mla is not None and a.mla.q_lora_rank is None and "--q-lora-rank" not in a.flags
    assert a.moe is not None and a.moe.pre_softmax and a.moe.shared_expert_size == 2 * 1408
    assert a.moe.layer_freq == (0,) + (1,) * 26


def test_qwen3_moe_norm_topk_prob_sets_the_router():
    assert not derive(config("Qwen3-30B-A3B")).moe.pre_softmax  # type: ignore[union-attr]
    off = derive(dict(config("Qwen3-30B-A3B"), norm_topk_prob=False))
    assert "--moe-router-pre-softmax" in off.flags


def test_glm45_partial_rotary_qkv_bias_and_dense_layers():
    a = derive(config("GLM-4.5"))
    assert a.rotary_percent == 0.5 and a.add_qkv_bias and a.qk_layernorm
    assert a.moe is not None and a.moe.layer_freq[:4] == (0, 0, 0, 1) and a.moe.bias_update_rate == 0.0
    assert "--mtp-loss-scaling-factor" in a.flags


def test_qwen3_without_head_dim_takes_transformers_default_128():
    c = {k: v for k, v in config("Qwen3-0.6B").items() if k != "head_dim"}
    assert derive(c).kv_channels == 128
    c = dict(config("Qwen3-30B-A3B"))
    del c["head_dim"]  # Qwen3MoeConfig has no head_dim default: hidden / heads
    assert derive(c).kv_channels == 2048 // 32


def test_layer_freq_flag_round_trips_through_megatrons_syntax():
    freq = (0, 0, 1, 1, 1)
    text = layer_freq_flag(freq)
    assert text == "([0]*2+[1]*3)" and list(eval(text)) == list(freq)  # moe_freq_type's own eval


REFUSALS = [
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 8192}},
     "rope_scaling.original_max_position_embeddings = 8192: Megatron-LM fixes it at 4096"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 16}}, "rope_scaling.beta_fast"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "beta_slow": 2}}, "rope_scaling.beta_slow"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "mscale": 1.0}}, "rope_scaling has no factor"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "linear", "factor": 2}}, "rope_scaling type 'linear'"),
    ("DeepSeek-V3", {"norm_topk_prob": False}, "norm_topk_prob = false: Megatron's sigmoid router"),
    ("DeepSeek-V3", {"topk_group": 2}, "num_experts_per_tok 8 // topk_group 2 = 4"),
    ("DeepSeek-V3", {"scoring_func": "softmax"}, "scoring_func 'softmax'"),
    ("DeepSeek-V3", {"rope_interleave": False}, "rope_interleave = false"),
    ("DeepSeek-V3", {"moe_layer_freq": 2}, "moe_layer_freq = 2"),
    ("DeepSeek-V3", {"first_k_dense_replace": 99}, "first_k_dense_replace 99 exceeds"),
    ("DeepSeek-V3", {"attention_bias": True}, "attention_bias = true"),
    ("DeepSeek-V2-Lite", {"topk_method": "group_limited_greedy", "n_group": 8, "topk_group": 3},
     "num_experts_per_tok 6 // topk_group 3 = 2"),
    ("Qwen3-30B-A3B", {"decoder_sparse_step": 2}, "decoder_sparse_step = 2"),
    ("Qwen3-30B-A3B", {"mlp_only_layers": [0, 1]}, "mlp_only_layers = [0, 1]"),
    ("Qwen3-30B-A3B", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                        "original_max_position_embeddings": 32768}},
     "rope_scaling type 'yarn' for qwen3_moe"),
    ("Qwen3-30B-A3B", {"num_experts_per_tok": 200}, "num_experts_per_tok 200 exceeds num_experts 128"),
    ("GLM-4.5", {"n_shared_experts": 2}, "n_shared_experts 2"),
    ("GLM-4.5", {"partial_rotary_factor": 1.5}, "partial_rotary_factor 1.5"),
]


@pytest.mark.parametrize(("name", "change", "reason"), REFUSALS, ids=[f"{n}-{next(iter(c))}" for n, c, _ in REFUSALS])
def test_refusals_name_the_field_and_why(name, change, reason):
    with pytest.raises(HFConfigError) as err:
        derive(dict(config(name), **change))
    assert reason in str(err.value)


@pytest.mark.parametrize(("arch", "reason"), [
    ("MixtralForCausalLM", "no Mixtral bridge"), ("Gemma2ForCausalLM", "soft-capping"),
    ("Gemma3ForCausalLM", "five of every six layers"), ("GptOssForCausalLM", "--enable-gpt-oss"),
    ("FalconForCausalLM", "not supported"),
])
def test_refused_families_say_why(arch, reason):
    with pytest.raises(UnsupportedArchitecture, match=reason):
        derive(dict(config("Llama-2-7b-hf"), architectures=[arch]))


HOSTILE = ("x", -1, 0, 1.5, True, [], {}, [1], float("nan"), 1e308, None)


@pytest.mark.parametrize("name", ["Qwen3-30B-A3B", "DeepSeek-V3", "DeepSeek-V2-Lite", "GLM-4.5", "Qwen3-0.6B"])
def test_no_value_of_any_key_crashes_the_derivation(name):
    """Altered copies of real files: every key set to each hostile value gives flags or a refusal."""
    base = config(name)
    nested = {k: v for k, v in base.items() if isinstance(v, dict)}
    cases = [(k, v) for k in base for v in HOSTILE]
    cases += [(f"{k}.{kk}", v) for k, d in nested.items() for kk in d for v in HOSTILE]
    for key, value in cases:
        c = json.loads(json.dumps(base))
        if "." in key:
            parent, child = key.split(".")
            c[parent][child] = value
        else:
            c[key] = value
        try:
            derive(c)
        except HFConfigError:
            pass


def test_mla_and_moe_reach_the_flops():
    a = derive(config("DeepSeek-V3"))
    base = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "gpt-7b.yaml", render_files=False).spec.training.model
    model = extend(replace(base, seq_length=4096, ffn_hidden_size=None), HFModel, **hf_model_fields(a))
    args = flops_args(model, a.vocab_size)
    assert args.multi_latent_attention and args.q_lora_rank == 1536 and args.moe_layer_freq[:4] == [0, 0, 0, 1]
    assert args.mtp_num_layers == 1 and args.moe_shared_expert_intermediate_size == 2048
    assert num_floating_point_operations(args, 1) > 0


def test_a_refused_config_is_a_located_init_from_config_error(tmp_path):
    shutil.copy(REPO / "specs" / "base.yaml", tmp_path / "base.yaml")
    shutil.copy(REPO / "specs" / "qwen3-0.6b.yaml", tmp_path / "spec.yaml")
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)
    bad = dict(config("DeepSeek-V3"), rope_scaling={"type": "yarn", "factor": 40, "beta_fast": 16})
    (tmp_path / "models" / "qwen3-0.6b" / "config.json").write_text(json.dumps(bad))
    result = compile_spec(str(tmp_path / "spec.yaml"), "spec.yaml", render_files=False)
    found = [d for d in result.diagnostics if d.code == "init-from-config"]
    assert found and found[0].line is not None and found[0].column is not None
    assert "rope_scaling.beta_fast = 16" in found[0].message and found[0].key_path[-1] == "config"


def test_mla_with_the_local_layer_spec_is_refused_at_transformer_impl(tmp_path):
    shutil.copy(REPO / "specs" / "base.yaml", tmp_path / "base.yaml")
    text = (REPO / "specs" / "qwen3-0.6b.yaml").read_text().replace("seq_length: 4096", "seq_length: 4096\n    transformer_impl: local")
    (tmp_path / "spec.yaml").write_text(text)
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-0.6b" / "config.json").write_text(json.dumps(config("DeepSeek-V3")))
    result = compile_spec(str(tmp_path / "spec.yaml"), "spec.yaml", render_files=False)
    found = [d for d in result.diagnostics if d.code == "init-from-config"]
    assert found and found[0].key_path == ("training", "model", "transformer_impl") and "k_channels" in found[0].message


def _export_python(monkeypatch) -> dict:
    """The Python that the generated export.sh runs (its functions; main() is not called; torch,
    imported at its top, is a stand-in module here)."""
    monkeypatch.setitem(sys.modules, "torch", types.ModuleType("torch"))
    text = (REPO / "generated" / "qwen3-0.6b" / "export.sh").read_text()
    body = text.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
    namespace: dict = {"__name__": "export_sh"}
    exec(compile(body, "export.sh", "exec"), namespace)  # noqa: S102 - the generated script's own code
    return namespace


def test_export_keeps_norm_topk_prob_of_the_source_config(tmp_path, monkeypatch):
    source, out = tmp_path / "hf", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    (source / "config.json").write_text(json.dumps(config("Qwen3-30B-A3B")))
    (out / "config.json").write_text(json.dumps(dict(config("Qwen3-30B-A3B"), norm_topk_prob=False)))
    _export_python(monkeypatch)["keep_source_values"](str(source), str(out))
    assert json.loads((out / "config.json").read_text())["norm_topk_prob"] is True


@pytest.mark.parametrize(("name", "published"), [
    ("Qwen3-30B-A3B", 30.5e9), ("DeepSeek-V3", 671e9 + 14e9), ("DeepSeek-V2-Lite", 15.7e9), ("GLM-4.5", 355e9),
    ("Qwen3-0.6B", 0.6e9), ("Llama-3.1-8B", 8.03e9), ("Qwen2-7B", 7.6e9), ("Llama-2-7b-hf", 6.74e9),
])
def test_parameter_counts_match_the_published_sizes(name, published):
    assert parameter_count(derive(config(name))).total == pytest.approx(published, rel=0.01)


LLAMA_70B = dict(config("Llama-3.1-8B"), hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                 num_attention_heads=64)


def test_conversion_is_sized_from_the_parameters():
    h200 = 141e9 / 1024 ** 3
    small = convert_size(derive(config("Qwen3-30B-A3B")), h200, 8)
    assert (small.gpus, small.expert) == (1, 1) and 60 < small.gib_per_gpu < h200
    big = convert_size(derive(LLAMA_70B), h200, 8)
    assert (big.gpus, big.tensor) == (2, 2)  # 70.6 B parameters are not planned on one GPU
    assert convert_size(derive(LLAMA_70B), h200, 1).gpus == 0
    assert convert_size(derive(config("GLM-4.5")), h200, 8).gpus == 0  # 139 GiB a GPU even with EP 8
    glm = convert_size(derive(config("GLM-4.5")), 180e9 / 1024 ** 3, 8)  # a 180 GB GPU: experts over 8
    assert (glm.gpus, glm.expert) == (8, 8)
    assert convert_size(derive(config("DeepSeek-V3")), h200, 8).gpus == 0
    assert export_gib(derive(config("Qwen3-30B-A3B"))) == pytest.approx(30.5e9 * 5 / 1024 ** 3, rel=0.01)


def test_a_model_too_large_to_convert_on_one_worker_is_an_error_naming_the_memory(tmp_path):
    shutil.copy(REPO / "specs" / "base.yaml", tmp_path / "base.yaml")
    shutil.copy(REPO / "specs" / "qwen3-0.6b.yaml", tmp_path / "spec.yaml")
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-0.6b" / "config.json").write_text(json.dumps(config("DeepSeek-V3")))
    result = compile_spec(str(tmp_path / "spec.yaml"), "spec.yaml", render_files=False)
    found = [d for d in result.diagnostics if d.code == "init-from-config" and "GiB" in d.message]
    assert found and found[0].is_error and "682.6 B parameters" in found[0].message
    assert found[0].key_path == ("init_from", "huggingface", "config")


def test_the_generated_convert_step_asks_for_the_gpus_it_needs():
    text = (REPO / "generated" / "qwen3-30b-a3b" / "convert.sh").read_text()
    assert "GPUS=1\n" in text and 'torchrun --nproc_per_node="$GPUS"' in text
    deepseek = (REPO / "generated" / "deepseek-v3" / "convert.sh").read_text()
    assert "GPUS=0\n" in deepseek and "convert it on several workers" in deepseek


def test_keys_left_out_take_the_config_class_defaults_bridge_sees():
    full = derive(config("DeepSeek-V3"))
    trimmed = {k: v for k, v in config("DeepSeek-V3").items()
               if k not in ("n_group", "topk_group", "q_lora_rank", "n_routed_experts", "moe_intermediate_size",
                            "first_k_dense_replace", "routed_scaling_factor", "n_shared_experts")}
    assert derive(trimmed).flags == full.flags  # DeepseekV3Config's defaults are DeepSeek-V3's values
    nulls = dict(config("DeepSeek-V3"), q_lora_rank=None)
    assert "--q-lora-rank" not in derive(nulls).flags  # null, unlike absent, is no q compression


def test_glm_with_the_local_layer_spec_is_refused_too(tmp_path):
    shutil.copy(REPO / "specs" / "base.yaml", tmp_path / "base.yaml")
    text = (REPO / "specs" / "qwen3-0.6b.yaml").read_text().replace("seq_length: 4096", "seq_length: 4096\n    transformer_impl: local")
    (tmp_path / "spec.yaml").write_text(text)
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True)
    (tmp_path / "models" / "qwen3-0.6b" / "config.json").write_text(json.dumps(config("GLM-4.5")))
    result = compile_spec(str(tmp_path / "spec.yaml"), "spec.yaml", render_files=False)
    found = [d for d in result.diagnostics if d.key_path == ("training", "model", "transformer_impl")]
    assert found and "grouped experts" in found[0].message
