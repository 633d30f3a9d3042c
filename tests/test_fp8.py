"""training.precision: fp8 and the performance options: flags, defaults, GPU rules, memory, sources."""

from __future__ import annotations

import csv
import statistics
import sys

from compiler.load.override import Override
from compiler.megatron import fp8, performance
from compiler.megatron.gpus import GPUS
from compiler.schema.models import Performance
from compiler.one_pass import compile_spec
from helpers import FIXTURES, REPO

sys.path.insert(0, str(REPO / "tools"))
from fp8_ratio import summary  # noqa: E402

FP8_SPEC = REPO / "tests" / "conformance_specs" / "fp8-tp2-dp4.yaml"


def _compiled(set_: list[str] | None = None):
    result = compile_spec(str(FP8_SPEC), "tests/conformance_specs/fp8-tp2-dp4.yaml", render_files=False,
                          overrides=tuple(Override(s) for s in set_ or ()))
    assert result.ok, result.diagnostics
    return result


def _names(result) -> list[str]:
    return [f.name for f in result.facts.flags]


def test_fp8_compiles_to_te_flags_on_a_bf16_base():
    flags = {f.name: f.values for f in _compiled().facts.flags}
    assert flags["--bf16"] == () and "--fp16" not in flags
    assert flags["--fp8-format"] == ("hybrid",)
    assert flags["--fp8-amax-history-len"] == ("1024",) and flags["--fp8-amax-compute-algo"] == ("max",)
    assert "--fp8-recipe" not in flags, "delayed is Megatron's default: passed only when the spec writes it"


def test_expert_defaults_at_data_parallel_4_with_the_distributed_optimizer():
    names = _names(_compiled())
    for flag in ("--overlap-grad-reduce", "--overlap-param-gather", "--cross-entropy-loss-fusion", "--manual-gc",
                 "--manual-gc-interval"):
        assert names.count(flag) == 1, flag
    assert "--tp-comm-overlap" not in names


class _T:
    """A training section as resolve() reads it."""

    def __init__(self, distributed_optimizer: bool, fused: bool = True, performance=None):
        self.distributed_optimizer, self.fused_kernels, self.performance = distributed_optimizer, fused, performance


def test_defaults_follow_megatrons_rules():
    one = performance.resolve(_T(True), 1)
    assert not one.overlap_grad_reduce and not one.overlap_param_gather, "nothing to overlap at data parallel 1"
    plain = performance.resolve(_T(False), 4)
    assert plain.overlap_grad_reduce and not plain.overlap_param_gather, "param gather needs the distributed optimizer"
    unfused = performance.resolve(_T(True, fused=False), 4)
    assert not unfused.cross_entropy_fusion and unfused.manual_gc
    off = performance.resolve(_T(True, performance=Performance(overlap_grad_reduce=False, manual_gc=False)), 4)
    assert not off.overlap_grad_reduce and not off.overlap_param_gather and not off.manual_gc


def test_the_resolver_defaults_are_the_schemas():
    assert performance._DEFAULTS._asdict() == Performance().model_dump()


def test_the_spec_turns_options_off():
    names = _names(_compiled(["training.performance.overlap_grad_reduce=false",
                              "training.performance.overlap_param_gather=false",
                              "training.performance.cross_entropy_fusion=false", "training.performance.manual_gc=false",
                              "training.performance.attention_mask_in_dataloader=true"]))
    assert not set(names) & set(performance.FLAGS)


def test_recipes_per_gpu_as_transformer_engine_checks_them():
    assert fp8.recipe_refusal("delayed", GPUS["h200"].compute_capability) is None
    assert fp8.recipe_refusal("tensorwise", GPUS["l40s"].compute_capability) is None
    assert fp8.recipe_refusal("delayed", GPUS["a100"].compute_capability) is not None
    assert fp8.recipe_refusal("blockwise", GPUS["l40s"].compute_capability) is not None
    assert fp8.recipe_refusal("blockwise", GPUS["h100"].compute_capability) is None
    assert fp8.recipe_refusal("mxfp8", GPUS["h200"].compute_capability) is not None
    assert fp8.recipe_refusal("mxfp8", (10, 0)) is None and fp8.recipe_refusal("mxfp8", (12, 0)) is not None


def test_fp8_memory_counts_weight_copies_and_amax_history():
    result = _compiled()
    t, layout = result.facts.training, result.facts.layout
    got = fp8.fp8_memory(t, layout)
    h, groups, ffn, layers = 2048, 4, 5440, 16  # ffn: swiglu's 4h·2/3, down to a multiple of 64
    head = h // 16
    per_layer = ((16 + 2 * groups) * head * h + 16 * head * h + 3 * ffn * h) / 2
    assert got.weight_copies == 2 * layers * per_layer
    assert got.amax_history == layers * 20 * (1024 + 1) * 4
    est = result.facts.estimate
    assert any(n.startswith("FP8 (delayed)") for n in est.not_measured)


def test_no_fp8_memory_for_bf16():
    result = _compiled(["training.precision=bf16"])
    assert fp8.fp8_memory(result.facts.training, result.facts.layout) is None


def test_published_ratio_is_recomputed_from_the_pairs():
    with open(FIXTURES / "published" / "fp8_bf16_pairs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    ratios = [float(r["fp8_step_s"]) / float(r["bf16_step_s"]) for r in rows]
    assert len(ratios) == 38 and all(r["fp8_id"].startswith("dgxc-") for r in rows)
    median, low, high = summary(ratios)
    assert median == fp8.PUBLISHED_STEP_RATIO == round(statistics.median(ratios), 3)
    assert (low, high) == fp8.PUBLISHED_STEP_RATIO_RANGE


def test_plan_says_which_options_are_on_and_why():
    text = "\n".join(f"{k} {v}" for s in _compiled().plan.report for k, v in s.rows)
    assert "overlap_param_gather" in text and "on by default" in text
    assert "FP8 step time" in text and "not measured on the H200" in text
