"""Issue 30, acceptance 4: real published config.json files of the supported and refused families
(tests/fixtures/hf-configs/README.md says where each came from) and systematically altered copies of
them. Each must compile to the model Bridge v0.5.1 builds or be refused naming the field and why;
none may crash the derivation or the compile."""

from __future__ import annotations

import json
import math
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
    "Kimi-K2-Instruct": "refused: rope_scaling.beta_fast = 1.0",
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
    found = [d for d in _compile_with(tmp_path, json.dumps(config("Kimi-K2-Instruct"))).diagnostics
             if d.code == "init-from-config"]
    assert found and "beta_fast" in found[0].message and found[0].hint


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
