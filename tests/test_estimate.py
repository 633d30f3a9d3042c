"""The estimator: Megatron's own figures for the real fixture run, and the measured table in docs."""

import re

import pytest

from compiler.pipeline import compile_spec
from helpers import FIXTURES, REPO


def estimate_of(path):
    result = compile_spec(str(REPO / path), path)
    assert result.ok, result.diagnostics
    return result.plan.pretrain.estimate


def test_fixture_configuration_gives_megatrons_printed_figures():
    # tests/fixtures/h200-pretrain-tp1-run/train.log printed exactly these (with the distributed
    # optimizer; at data parallel 1 it costs the same 18 bytes per parameter as Adam without it)
    line = next(l for l in (FIXTURES / "h200-pretrain-tp1-run" / "train.log").read_text().splitlines()
                if l.startswith("Theoretical memory footprints"))
    printed = [float(x) for x in re.findall(r"=([0-9.]+) MB", line)]
    est = estimate_of("specs/pretrain-mock.yaml")
    assert printed == [1426.82, 1692.67, 3119.48]
    assert [est.weights_and_optimizer_mb, est.activations_mb, est.megatron_theoretical_total_mb] == printed


def test_fixture_peak_estimate_is_within_20_percent_of_the_measured_peak():
    measured = max(float(x) for x in re.findall(r"max allocated: ([0-9.]+)",
                                                (FIXTURES / "h200-pretrain-tp1-run" / "train.log").read_text()))
    assert measured == 9855.97
    est = estimate_of("specs/pretrain-mock.yaml")
    assert abs(est.peak_mb - measured) / measured < 0.20
    assert est.peak_mb > est.megatron_theoretical_total_mb


ROW = re.compile(r"^\| (\S+\.yaml) \| [^|]+ \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| [^|]+ \| (\d+) \| (\d+) \|", re.M)


def test_memory_model_table_matches_the_estimator():
    rows = ROW.findall((REPO / "docs" / "memory-model.md").read_text())
    assert len(rows) >= 4, "docs/memory-model.md must hold at least 4 measured configurations"
    for path, megatron_total, peak, measured, ckpt_estimate, ckpt_disk in rows:
        est = estimate_of(path)
        assert float(megatron_total) == est.megatron_theoretical_total_mb, path
        assert float(peak) == est.peak_mb, f"{path}: the table's estimate is stale"
        assert int(ckpt_estimate) == est.checkpoint_bytes_per_save, path
        assert abs(est.peak_mb - float(measured)) / float(measured) < 0.20, path
        assert abs(est.checkpoint_bytes_per_save - int(ckpt_disk)) / int(ckpt_disk) < 0.05, path


def test_gpt_7b_estimates():
    est = estimate_of("specs/gpt-7b.yaml")
    assert est.parameters_total == 8_032_358_400  # Llama-3-8B's shape: 32 layers, 4096 hidden, 128256 vocab
    assert est.attention_scores_mb == 0  # Transformer Engine's fused attention
    assert est.num_microbatches == 128  # 512 / (1 × DP 4)
    assert est.tokens_per_step == 512 * 4096
    assert est.checkpoint_saves == 50
    assert est.checkpoint_bytes_retained == 50 * est.checkpoint_bytes_per_save


@pytest.mark.parametrize("flavor, gb", [("H200", 141.0), ("gpu-h100-80g", 80.0), ("A100-SXM", 80.0), ("L40", None)])
def test_gpu_memory_from_the_flavor(flavor, gb):
    from compiler.megatron.memory import gpu_memory_gb
    from compiler.schema.models import Resources

    assert gpu_memory_gb(Resources(workers=1, gpus_per_worker=1, worker_flavor=flavor)) == gb


@pytest.mark.parametrize("change", [
    ("  virtual_pipeline: null", "  virtual_pipeline: 8"),  # 4 layers on 1 stage: 0 virtual stages of 8
    ("    num_experts: null", "    num_experts: 4"),
])
def test_layouts_the_rules_reject_are_not_estimated(change, tmp_path):
    """Found by the mutation property test: the memory rule divided by zero on a layout that other
    rules report (no virtual stage, no expert data-parallel replica)."""
    from helpers import compile_text, resolved_text

    text = resolved_text("pretrain-mock")
    assert change[0] in text
    text = text.replace(*change)
    if "num_experts" in change[1]:  # 2 GPUs, PP 2 × EP 2: no expert data-parallel replica
        text = text.replace("gpus_per_worker: 1", "gpus_per_worker: 2").replace("  pipeline: 1\n", "  pipeline: 2\n")
        text = text.replace("  expert: 1\n", "  expert: 2\n").replace(
            "distributed_optimizer: false", "distributed_optimizer: true")
    result = compile_text(text, tmp=tmp_path)
    assert not result.ok and any(d.is_error for d in result.diagnostics)
