"""check/facts.py: every derived value computed once, from what validated; absent when its inputs did not."""

from __future__ import annotations

from compiler.megatron import memory
from compiler.one_pass import compile_spec
from helpers import REPO, compile_text, resolved_text


def test_one_estimate_per_compile(monkeypatch):
    calls = []
    real = memory.estimate

    def counting(spec, layout):
        calls.append(layout)
        return real(spec, layout)

    monkeypatch.setattr(memory, "estimate", counting)
    result = compile_spec(str(REPO / "specs" / "gpt-7b.yaml"), "specs/gpt-7b.yaml")
    assert result.ok and result.plan is not None and result.plan.pretrain.estimate is not None
    assert len(calls) == 1, "the rules and the plan read the facts' estimate; neither computes another"


def test_facts_of_a_full_spec():
    result = compile_spec(str(REPO / "specs" / "tp2-dp2.yaml"), "specs/tp2-dp2.yaml", render_files=False)
    f = result.facts
    assert (f.world, f.layout.data, f.layout.expert_tensor) == (4, 2, 2)
    assert f.run_root == "/mnt/megatron/runs/mcore-tp2-dp2-01" and f.mount_path == "/mnt/megatron"
    assert f.script == "/opt/Megatron-LM/examples/run_simple_mcore_train_loop.py"
    assert f.is_bounded_example and not f.is_pretrain and f.flags is None and f.estimate is None
    assert f.platform == "aistudio" and f.read_only_roots == ("/infini-data",)


def test_a_fact_is_absent_when_its_inputs_did_not_validate(tmp_path):
    # tensor 3 does not divide 2 GPUs: no layout, but the run root is still known for the storage rules
    text = resolved_text("tp2").replace("  tensor: 2", "  tensor: 3")
    result = compile_text(text, tmp=tmp_path)
    assert not result.ok
    assert result.facts.layout is None and result.facts.world == 2
    assert result.facts.run_root == "/mnt/megatron/runs/mcore-tp2-01"


def test_the_default_run_root_is_derived_in_one_place(tmp_path):
    text = resolved_text("tp2").replace("  run_root: /mnt/megatron/runs/mcore-tp2-01\n", "  run_root: null\n")
    result = compile_text(text, tmp=tmp_path)
    assert result.ok
    from compiler.megatron.runfiles import default_run_root

    assert result.facts.run_root == default_run_root("/mnt/megatron", "mcore-tp2-01") == result.plan.run_root


def test_init_from_fills_the_model_from_config_json():
    result = compile_spec(str(REPO / "specs" / "qwen3-0.6b.yaml"), "specs/qwen3-0.6b.yaml", render_files=False)
    assert result.ok, result.diagnostics
    model = result.facts.training.model
    assert (model.num_layers, model.hidden_size, model.num_query_groups, model.vocab_size) == (28, 1024, 8, 151936)
    assert result.facts.training.data.tokenizer.type == "HuggingFaceTokenizer"
    assert result.facts.converted == "/mnt/megatron/checkpoints/qwen3-0-6b-ft/converted"
