"""validate_args offline (compiler/megatron/validate.py), the pipeline split, and what needs TE or Apex.

The refusals are Megatron's own statements (data/megatron_validate.json, read from the pinned source by
tools/megatron_validate_args.py); the cases below are the ones real H200 runs crashed on, and the
layouts NVIDIA runs that Megatron accepts.
"""

import os
from pathlib import Path

import pytest

from compiler.megatron.pretrain import PipelineSplit, pipeline_split_refusal
from compiler.megatron.validate import DATA_FILE, arg_values, refusals, validate_meta
from helpers import diagnostics_for, load_tool, resolved_text

MEGATRON = Path(os.environ.get("MEGATRON_LM_DIR", "/work/ext/megatron-lm"))

BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
        "--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "8",
        "--train-iters", "10", "--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "1000"]


def first(argv, world=8):
    found = refusals(arg_values(argv)[0], world)
    return found[0] if found else None


def test_a_plain_argument_list_is_not_refused():
    assert first(BASE) is None


def test_checkpoint_activations_exits_in_validate_args():
    r = first(BASE + ["--checkpoint-activations"])
    assert r is not None and "no longer valid, use --recompute-activations" in r.message
    assert r.where.startswith("megatron/training/arguments.py:6") and "checkpoint_activations" in r.reads


def test_weight_decay_incr_style_needs_start_and_end():
    r = first(BASE + ["--weight-decay-incr-style", "cosine"])
    assert r is not None and r.line == 1344 and "start_weight_decay" in r.reads
    assert first(BASE + ["--weight-decay-incr-style", "cosine", "--start-weight-decay", "0.01",
                         "--end-weight-decay", "0.1"]) is None


def test_fp16_and_bf16_together():
    r = first(BASE + ["--fp16", "--bf16"])
    assert r is not None and "bf16" in r.reads


def test_126_layers_on_pipeline_8_as_nvidia_runs_llama_405b():
    argv = [*BASE[:1], "126", *BASE[2:], "--pipeline-model-parallel-size", "8"]
    assert first(argv) is not None  # 126 % 8: refused
    assert first(argv + ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]) is None
    assert first(argv + ["--decoder-first-pipeline-num-layers", "14", "--decoder-last-pipeline-num-layers", "16"]) is None


def test_the_pipeline_split_is_megatrons():
    assert pipeline_split_refusal(PipelineSplit(126, 8)) is not None
    assert pipeline_split_refusal(PipelineSplit(126, 8, account_for_embedding=True, account_for_loss=True)) is None
    assert pipeline_split_refusal(PipelineSplit(126, 8, first_stage_layers=14, last_stage_layers=16)) is None
    bad = pipeline_split_refusal(PipelineSplit(126, 8, first_stage_layers=13, last_stage_layers=15))
    assert bad is not None and "transformer_config.py" in bad.source
    mixed = pipeline_split_refusal(PipelineSplit(126, 8, account_for_loss=True, first_stage_layers=14))
    assert mixed is not None and mixed.field == "args"
    # a virtual pipeline on 2 stages: Megatron's default p2p overlap allows it
    assert pipeline_split_refusal(PipelineSplit(8, 2, layers_per_virtual_stage=2)) is None
    refused = pipeline_split_refusal(PipelineSplit(8, 2, layers_per_virtual_stage=2, overlap_p2p_comm=False))
    assert refused is not None and refused.field == "pipeline"
    assert pipeline_split_refusal(PipelineSplit(12, 2, layers_per_virtual_stage=4)) is not None  # 6 % 4


def test_a_spec_with_126_layers_on_pipeline_8_compiles_with_megatrons_flags():
    text = resolved_text("pretrain-mock").replace("num_layers: 4\n", "num_layers: 126\n")
    text = text.replace("gpus_per_worker: 1\n", "gpus_per_worker: 8\n").replace("  pipeline: 1\n", "  pipeline: 8\n")
    assert "num_layers: 126" in text and "pipeline: 8" in text
    codes = {d.code for d in diagnostics_for(text)}
    assert "megatron-layers-pp" in codes
    split = text.replace("  args: []\n", "  args: [--account-for-embedding-in-pipeline-split, "
                         "--account-for-loss-in-pipeline-split]\n")
    assert split != text
    assert "megatron-layers-pp" not in {d.code for d in diagnostics_for(split)}


def test_the_data_names_the_pinned_commit_and_source():
    meta = validate_meta()
    assert meta["megatron_commit"].startswith("571370c8") and meta["source"] == "megatron/training/arguments.py"


@pytest.mark.allow_ci_skip  # a checkout of Megatron-LM is never committed here; the committed data file is tested above
@pytest.mark.skipif(not all((MEGATRON / f).exists() for f in (
    "megatron/training/arguments.py", "megatron/training/argument_utils.py",
    "megatron/core/transformer/transformer_config.py", "megatron/core/model_parallel_config.py")),
    reason="needs a Megatron-LM checkout at the pinned commit (MEGATRON_LM_DIR, default /work/ext/megatron-lm)")
def test_the_data_file_is_fresh():
    tool = load_tool("megatron_validate_args")
    assert tool.render(tool.extract(MEGATRON)) == DATA_FILE.read_text(), \
        "run tools/megatron_validate_args.py to regenerate compiler/megatron/data/megatron_validate.json"


def test_fp16_keeps_main_grad_in_fp16_16_bytes_per_parameter():
    from compiler.megatron.memory import bytes_per_parameter
    assert bytes_per_parameter(False, 1, "bf16") == 18
    assert bytes_per_parameter(False, 1, "fp16") == 16  # param.main_grad.dtype=torch.float16 on the H200
    assert bytes_per_parameter(True, 4, "fp16") == 4 + 12 / 4


def test_a_typed_selective_recompute_with_a_method_is_refused_where_megatron_refuses_it():
    r = first(BASE + ["--recompute-granularity", "selective", "--recompute-method", "uniform"])
    assert r is not None and r.line == 1371


MOE = BASE + ["--num-experts", "4", "--moe-ffn-hidden-size", "64", "--disable-bias-linear"]


def test_top_1_softmax_routing_is_refused_where_transformer_config_refuses_it():
    r = first(MOE + ["--moe-router-topk", "1"])
    assert r is not None and r.where == "megatron/core/transformer/transformer_config.py:2112"
    assert not r.in_validate_args and "moe_router_topk" in r.reads and "pre-softmax" in r.message
    assert first(MOE + ["--moe-router-topk", "1", "--moe-router-pre-softmax"]) is None
    assert first(MOE + ["--moe-router-topk", "1", "--moe-router-score-function", "sigmoid"]) is None
    assert first(MOE + ["--moe-router-topk", "2"]) is None


def test_config_fields_come_from_their_renamed_dests():
    # fp8_param is --fp8-param-gather (core_transformer_config_from_args renames it)
    r = first(BASE + ["--fp8-param-gather"])
    assert r is not None and r.where.endswith("transformer_config.py:1298") and "fp8_param_gather" in r.reads
    assert first(BASE + ["--fp8-param-gather", "--fp8-format", "hybrid"]) is None


def test_another_config_class_or_an_unknown_field_refuses_nothing():
    # multi-latent attention picks MLATransformerConfig (other defaults, its own __post_init__): not judged
    assert all(r.in_validate_args for r in refusals(arg_values(MOE + ["--moe-router-topk", "1",
                                                                      "--multi-latent-attention"])[0], 8))
    from compiler.megatron import validate
    config = validate._data()["config"]
    assert config["fields"]["num_query_groups"] is None  # set under an `if` there: unknown
    assert config["fields"]["num_moe_experts"] == "args.num_experts"
    assert [p["class"] for p in config["programs"]] == ["ModelParallelConfig", "TransformerConfig"]
