"""Issue 30, acceptance 4: real published config.json files of the supported and refused families
(tests/fixtures/hf-configs/README.md says where each came from) and systematically altered copies of
them. Each must compile to the model Bridge v0.5.1 builds or be refused naming the field and why;
none may crash the derivation or the compile."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from compiler.megatron.huggingface import HFConfigError, UnsupportedArchitecture, derive
from compiler.one_pass import compile_spec
from helpers import REPO, load_tool

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONFIGS = FIXTURES / "hf-configs"
PROVIDERS = FIXTURES / "bridge-providers"
MEGATRON_FLAGS = set((FIXTURES / "megatron-571370c8-flags.txt").read_text().split())
alter = load_tool("bridge/hf_alterations")


def config(name: str) -> dict:
    return json.loads((CONFIGS / name / "config.json").read_text())


# every real file of the corpus: the family it compiles to, or what its refusal must say
REAL: dict[str, str] = {
    "Qwen3-0.6B": "qwen3", "Qwen3-8B": "qwen3", "Qwen3-30B-A3B": "qwen3_moe", "Qwen3-235B-A22B": "qwen3_moe",
    "Qwen3-Coder-480B-A35B-Instruct": "qwen3_moe", "Qwen2-7B": "qwen2", "Qwen2.5-0.5B": "qwen2",
    "Llama-2-7b-hf": "llama", "Llama-3.1-8B": "llama", "Mistral-7B-v0.1": "mistral",
    "DeepSeek-V2-Lite": "deepseek_v2", "DeepSeek-V3": "deepseek_v3", "DeepSeek-R1": "deepseek_v3",
    "DeepSeek-V3.1-NVFP4": "deepseek_v3", "Moonlight-16B-A3B": "deepseek_v3", "GLM-4.5": "glm4_moe",
    "Llama-3.2-1B": "refused: llama3 rope scaling factor 32.0",
    "DeepSeek-V2": "refused: num_experts_per_tok 6 // topk_group 3 = 2",
    "Kimi-K2-Instruct": "refused: model_type = 'kimi_k2'",
    "Mixtral-8x7B-v0.1": "refused: Bridge v0.5.1 has no Mixtral bridge",
    "gpt-oss-20b": "refused: --enable-gpt-oss",
    "Llama-4-Scout-17B-16E-Instruct": "refused: Bridge v0.5.1 has no bridge for it",
    "Qwen1.5-MoE-A2.7B": "refused: Bridge v0.5.1 has no bridge for it",
    "Qwen3-Next-80B-A3B-Thinking": "refused: Bridge v0.5.1 converts it (qwen/qwen3_next_bridge.py",
    "gemma-2-2b": "refused: soft-capping", "gemma-3-1b-it": "refused: five of every six layers",
}
STAND_INS = {"tiny-deepseek-v3-transformers5", "tiny-llama-transformers5", "tiny-qwen3-moe-transformers5"}


def test_the_corpus_table_lists_every_committed_config():
    assert {p.name for p in CONFIGS.iterdir() if p.is_dir()} == set(REAL) | STAND_INS


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_real_config_compiles_to_its_family_or_is_refused_with_the_reason(name):
    want = REAL[name]
    if want.startswith("refused: "):
        with pytest.raises(HFConfigError) as err:
            derive(config(name))
        assert want.removeprefix("refused: ") in str(err.value)
        assert str(err.value).startswith("config.json ")
        return
    arch = derive(config(name))
    assert arch.family == want
    # every supported real file has Bridge's own provider beside the compiled flags (test_bridge_mapping.py
    # compares the two field by field)
    record = json.loads((PROVIDERS / f"{name}.json").read_text())
    assert record["config"] == name and record["flags"] == list(arch.flags)


def _check_flags(arch) -> None:
    words = arch.flags + arch.te_flags
    assert all(isinstance(w, str) and w for w in words)
    assert {w for w in words if w.startswith("--")} <= MEGATRON_FLAGS
    for w in words:
        if not w.startswith("--"):
            try:
                assert math.isfinite(float(w))
            except ValueError:
                pass  # a word: rope, RMSNorm, sigmoid, ([0]*3+[1]*58)


@pytest.mark.parametrize("name", sorted(REAL))
def test_no_altered_copy_crashes_the_derivation(name):
    """Every key removed, set to each hostile value, every rope_scaling variant and meaning-changing value:
    flags Megatron's parser knows, or a refusal that starts with config.json and names a key."""
    refusals = 0
    for case, altered in alter.alterations(name, config(name)):
        try:
            arch = derive(altered)
        except UnsupportedArchitecture:
            refusals += 1
        except HFConfigError as err:
            refusals += 1
            assert str(err).startswith("config.json "), case
        else:
            _check_flags(arch)
    assert refusals > 0


@pytest.mark.parametrize("value", [[], "x", 3, None, True])
def test_a_config_that_is_no_object_is_refused(value):
    with pytest.raises(HFConfigError, match="must hold an object"):
        derive(value)  # type: ignore[arg-type]


def _compile_with(tmp_path: Path, text: str):
    shutil.copy(REPO / "specs" / "base.yaml", tmp_path / "base.yaml")
    shutil.copy(REPO / "specs" / "qwen3-0.6b.yaml", tmp_path / "spec.yaml")
    (tmp_path / "models" / "qwen3-0.6b").mkdir(parents=True, exist_ok=True)
    (tmp_path / "models" / "qwen3-0.6b" / "config.json").write_text(text)
    return compile_spec(str(tmp_path / "spec.yaml"), "spec.yaml", render_files=False)


@pytest.mark.parametrize(("text", "says"), [
    ("[1, 2]", "holds no JSON object"),
    ('{"architectures": ["Qwen3ForCausalLM"],', "is not valid JSON"),
    ("", "is not valid JSON"),
    ('{"num_hidden_layers": NaN}', "NaN"),
    ('{"hidden_size": 1' + "0" * 30 + "}", "more than 18 digits"),
    ("[" * 100 + "]" * 100, "nests deeper"),
    ('{"num_nextn_predict_layers": 100000000000000000}', "num_nextn_predict_layers"),
])
def test_unreadable_config_json_is_a_located_diagnostic(tmp_path, text, says):
    found = [d for d in _compile_with(tmp_path, text).diagnostics if d.code == "init-from-config"]
    assert found and says in found[0].message and found[0].line is not None and found[0].hint


def test_a_config_json_over_the_size_limit_is_refused_without_reading_it_all(tmp_path):
    text = json.dumps(dict(config("Qwen3-0.6B"), padding="x" * (5 << 20)))
    found = [d for d in _compile_with(tmp_path, text).diagnostics if d.code == "init-from-config"]
    assert found and found[0].line is not None


@pytest.mark.parametrize("name", ["DeepSeek-V3", "GLM-4.5", "Moonlight-16B-A3B", "Qwen3-30B-A3B", "Qwen3-0.6B"])
def test_altered_copies_through_the_whole_compile_never_crash(tmp_path, name):
    """The compile, not only the derivation: each altered copy gives diagnostics, each error located."""
    for case, altered in list(alter.alterations(name, config(name), hostile=False))[::3]:
        result = _compile_with(tmp_path, json.dumps(altered))
        for d in result.diagnostics:
            if d.is_error:
                assert d.line is not None, (case, d.message)


def test_a_refused_config_says_how_to_go_on(tmp_path):
    # Kimi K2 publishes the DeepSeek-V3 class under its own model_type; loaded as deepseek_v3, its YaRN
    # beta_fast 1 is what Megatron's MLA cannot express
    kimi = dict(config("Kimi-K2-Instruct"), model_type="deepseek_v3")
    found = [d for d in _compile_with(tmp_path, json.dumps(kimi)).diagnostics if d.code == "init-from-config"]
    assert found and "rope_scaling.beta_fast = 1.0" in found[0].message and found[0].hint
    assert found[0].line is not None and found[0].key_path == ("init_from", "huggingface", "config")


@pytest.mark.parametrize("family_config", ["DeepSeek-V3", "DeepSeek-V2-Lite", "GLM-4.5"])
def test_tied_embeddings_are_refused_where_bridge_always_unties(family_config):
    with pytest.raises(HFConfigError, match="tie_word_embeddings = true"):
        derive(dict(config(family_config), tie_word_embeddings=True))
    assert derive(dict(config("Qwen3-0.6B"), tie_word_embeddings=True)).untie_embeddings is False


def test_layer_counts_beyond_any_model_are_refused_not_allocated():
    with pytest.raises(HFConfigError, match="num_hidden_layers = 1000000000000 exceeds"):
        derive(dict(config("Qwen3-30B-A3B"), num_hidden_layers=10 ** 12))
    with pytest.raises(HFConfigError, match="num_nextn_predict_layers = 100000000000000000 exceeds"):
        derive(dict(config("DeepSeek-V3"), num_nextn_predict_layers=10 ** 17))


# Altered copies run through Bridge v0.5.1's own provider and Megatron-LM's parser
# (tools/bridge/altered_fields.py wrote tests/fixtures/bridge-providers/altered.json, offline on a CPU)
ALTERED = json.loads((FIXTURES / "bridge-altered.json").read_text())
SWEPT = ("Qwen3-30B-A3B", "DeepSeek-V3", "GLM-4.5", "DeepSeek-V2-Lite", "Moonlight-16B-A3B", "Qwen3-0.6B",
         "Llama-3.1-8B", "Mistral-7B-v0.1", "Qwen2-7B")


def _explained(field: str, arch, altered: dict) -> bool:
    """The two differences the compiler makes on purpose (docs/bridge.md)."""
    if field == "moe_router_pre_softmax":
        # Qwen3-MoE without norm_topk_prob: transformers' router does not renormalise; Bridge's provider
        # always does (qwen3_moe_bridge.py:63); the flags follow the model the weights were trained as
        return arch.family == "qwen3_moe" and not altered.get("norm_topk_prob")
    if field == "num_query_groups":
        # multi-latent attention builds no weight from it; Bridge copies num_key_value_heads, the flags keep
        # heads (without --group-query-attention), so that TP never re-splits the heads (attention.py:334-340)
        return arch.mla is not None
    return False


def test_every_altered_copy_that_compiles_builds_the_model_bridge_builds():
    tool = load_tool("bridge/altered_fields")
    missing, stale, failing, unexplained = [], [], [], {}
    for name in SWEPT:
        for case, altered in alter.alterations(name, config(name), hostile=False):
            try:
                arch = derive(altered)
            except HFConfigError:
                continue
            record = ALTERED.get(case)
            if record is None:
                missing.append(case)
            elif record["flags"] != tool.flags_digest(arch.flags, arch.te_flags):
                stale.append(case)
            elif "differing" not in record:
                failing.append((case, record))
            else:
                wrong = {f: v for f, v in record["differing"].items() if not _explained(f, arch, altered)}
                if wrong:
                    unexplained[case] = wrong
    assert not missing and not stale, "rerun tools/bridge/altered_fields.py"
    assert failing == [] and unexplained == {}


def test_the_bridge_comparison_covers_hundreds_of_copies():
    assert len(ALTERED) > 500 and {case.split(":")[0] for case in ALTERED} == set(SWEPT)


def test_a_config_transformers_refuses_to_load_is_refused_naming_the_field():
    """transformers 5.8.1's config classes are strict dataclasses: Bridge's conversion would stop at
    AutoConfig; the compile says so first (class_fields.py, generated from the classes)."""
    for key, value, says in (("use_cache", "x", "use_cache = 'x' is not true or false"),
                             ("initializer_range", 1, "initializer_range = 1 is not a number with a decimal point"),
                             ("hidden_size", None, "hidden_size = None is not an integer"),
                             ("model_type", "qwen3", "model_type = 'qwen3'")):
        with pytest.raises(HFConfigError, match=re.escape(says)):
            derive(dict(config("Qwen3-30B-A3B"), **{key: value}))
    with pytest.raises(HFConfigError, match="model_type = '\\(left out\\)'"):
        derive({k: v for k, v in config("DeepSeek-V3").items() if k != "model_type"})


def test_the_type_table_never_refuses_what_transformers_loads():
    """tools/bridge/class_fields.py --check tried each JSON value on each field of each class; the compile
    refuses a value only where the class refused it (the class also checks values against each other)."""
    from compiler.megatron.hf.class_fields import field_kinds
    from compiler.megatron.hf.keys import _matches

    tried = ("x", -1, 0, 1, 1.5, 2.0, True, False, [], [1], ["a"], {}, None)
    record = json.loads((FIXTURES / "hf-class-fields-check.json").read_text())
    agree = 0
    for key, accepted in record.items():
        family, field = key.split(".", 1)
        for value in tried:
            loads = any(value == a and type(value) is type(a) for a in accepted)
            kinds = field_kinds(family, field)
            assert kinds is not None, key
            ours = _matches(value, kinds)
            assert ours or not loads, (key, value)
            agree += ours == loads
    assert agree > 0.95 * len(record) * len(tried)


def test_llama3_rope_is_checked_as_transformers_reads_it():
    base = config("Llama-3.1-8B")
    for key in ("factor", "low_freq_factor", "high_freq_factor"):
        scaling = {k: v for k, v in base["rope_scaling"].items() if k != key}
        with pytest.raises(HFConfigError, match=f"has no {key}: transformers refuses"):
            derive(dict(base, rope_scaling=scaling))
    # left out, original_max_position_embeddings is max_position_embeddings (131072), not Megatron's 8192
    scaling = {k: v for k, v in base["rope_scaling"].items() if k != "original_max_position_embeddings"}
    with pytest.raises(HFConfigError, match="original_max_position_embeddings = 131072"):
        derive(dict(base, rope_scaling=scaling))


# Each defect the Bridge comparison of altered copies found, as the fix now answers it:
# (config, change, expected: a refusal's words, or {attribute: value} of the derived architecture)
FOUND = [
    ("Qwen3-0.6B", {"num_experts": 64}, "num_experts = 64 in a qwen3 config: a dense model has no experts"),
    ("Llama-3.1-8B", {"use_qk_norm": True}, "use_qk_norm = True in a llama config"),
    ("Qwen3-30B-A3B", {"n_group": 8}, "n_group = 8 in a qwen3_moe config"),
    ("Qwen3-30B-A3B", {"scoring_func": "sigmoid"}, "scoring_func = 'sigmoid' in a qwen3_moe config"),
    ("Qwen3-30B-A3B", {"routed_scaling_factor": 2.5}, "routed_scaling_factor = 2.5 in a qwen3_moe config"),
    ("Qwen3-30B-A3B", {"num_nextn_predict_layers": 1}, "num_nextn_predict_layers = 1 in a qwen3_moe config"),
    ("DeepSeek-V3", {"num_experts": 64}, "num_experts = 64 in a deepseek_v3 config"),
    ("DeepSeek-V3", {"mtp_num_hidden_layers": 1}, "mtp_num_hidden_layers = 1 in a deepseek_v3 config"),
    ("Qwen3-30B-A3B", {"num_experts_per_tok": 1}, "num_experts_per_tok 1 with norm_topk_prob true"),
    ("Qwen3-0.6B", {"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5 in a qwen3 config"),
    ("DeepSeek-V3", {"n_group": None}, "topk_group = 4 with n_group null or left out"),
    ("DeepSeek-V3", {"n_group": 256}, "n_group 256 leaves 1 of the 256 routed experts in a group"),
    ("DeepSeek-V3", {"n_group": 128, "topk_group": 2}, "num_experts_per_tok 8 from topk_group 2 groups"),
    ("DeepSeek-V2-Lite", {"topk_group": None}, "n_group = 1 with topk_group null or left out"),
    # RoPE rotates pairs of dimensions: an odd rotated count crashes Megatron (review)
    ("Qwen3-0.6B", {"head_dim": 127}, "rotates 127 dimensions"),
    ("GLM-4.5", {"head_dim": 126}, "rotates 63 dimensions"),
    ("DeepSeek-V3", {"qk_rope_head_dim": 63}, "qk_rope_head_dim 63 is odd"),
    # V2's group_limited_greedy scores a group by its maximum: one expert a group is enough (review)
    ("DeepSeek-V2-Lite", {"n_group": 64, "topk_group": 6, "num_experts_per_tok": 6, "topk_method": "group_limited_greedy"},
     {"moe": ("num_groups", 64)}),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}},
     "no original_max_position_embeddings, so transformers and Bridge take max_position_embeddings 163840"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "mscale": 0.707,
                                      "original_max_position_embeddings": 4096}}, "mscale = 0.707 without mscale_all_dim"),
    ("DeepSeek-V3", {"rope_scaling": {"type": "yarn", "factor": 40, "mscale": 0,
                                      "original_max_position_embeddings": 4096}}, "must be positive"),
    # keys left out take the transformers class defaults Bridge reads
    ("DeepSeek-V3", {"intermediate_size": "<drop>"}, {"ffn_hidden_size": 18432}),
    ("Qwen3-30B-A3B", {"intermediate_size": "<drop>", "num_key_value_heads": "<drop>"},
     {"ffn_hidden_size": 6144, "num_query_groups": 4}),
    ("GLM-4.5", {"partial_rotary_factor": "<drop>", "num_key_value_heads": "<drop>"},
     {"rotary_percent": 0.5, "num_query_groups": 8}),
    ("Mistral-7B-v0.1", {"sliding_window": "<drop>", "num_key_value_heads": "<drop>"},
     {"window_size": (4095, 0), "num_query_groups": 8}),
    ("Mistral-7B-v0.1", {"attention_dropout": 0.1}, {"attention_dropout": 0.0}),  # Bridge's provider drops it
    ("Llama-3.1-8B", {"partial_rotary_factor": 0.5, "rope_scaling": None}, {"rotary_percent": 1.0}),
    ("DeepSeek-V2-Lite", {"aux_loss_alpha": "<drop>"}, {"moe": ("aux_loss_coeff", 0.0)}),
    ("DeepSeek-V2-Lite", {"aux_loss_alpha": "<drop>", "router_aux_loss_coef": 0.01}, {"moe": ("aux_loss_coeff", 0.01)}),
    ("DeepSeek-V3", {"head_dim": None}, {"kv_channels": 7168 // 128}),
    ("DeepSeek-V2-Lite", {"head_dim": None}, {"kv_channels": 64}),
    ("DeepSeek-V3", {"rope_scaling": "<drop>", "rope_theta": "<drop>",
                     "rope_parameters": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                         "original_max_position_embeddings": 4096, "rope_theta": 10000}},
     {"mla": ("rotary_scaling_factor", 40.0)}),
]


@pytest.mark.parametrize(("name", "change", "expected"), FOUND, ids=[f"{n}-{'-'.join(c)}" for n, c, _ in FOUND])
def test_each_defect_the_bridge_comparison_found_stays_fixed(name, change, expected):
    altered = {k: v for k, v in config(name).items() if change.get(k) != "<drop>"}
    altered.update({k: v for k, v in change.items() if v != "<drop>"})
    if isinstance(expected, str):
        with pytest.raises(HFConfigError) as err:
            derive(altered)
        assert expected in str(err.value)
        return
    arch = derive(altered)
    for attribute, value in expected.items():
        if isinstance(value, tuple) and attribute in ("moe", "mla"):
            assert getattr(getattr(arch, attribute), value[0]) == value[1]
        else:
            assert getattr(arch, attribute) == value


@pytest.mark.parametrize(("name", "change", "key"), [
    ("Kimi-K2-Instruct", {"model_type": "deepseek_v3"}, '"beta_fast"'),
    ("Llama-3.2-1B", {}, '"factor"'),
    ("DeepSeek-V2", {}, '"n_group"'),
    ("Qwen3-30B-A3B", {"use_cache": "x"}, '"use_cache"'),
    ("Mixtral-8x7B-v0.1", {}, '"architectures"'),
])
def test_a_refusal_points_at_the_key_in_config_json(tmp_path, name, change, key):
    text = json.dumps(dict(config(name), **change), indent=2)
    found = [d for d in _compile_with(tmp_path, text).diagnostics if d.code == "init-from-config"]
    assert found and found[0].file.endswith("models/qwen3-0.6b/config.json")
    line = text.splitlines()[found[0].line - 1]
    assert line[found[0].column - 1:].startswith(key)
    assert found[0].key_path == ("init_from", "huggingface", "config") and found[0].hint
