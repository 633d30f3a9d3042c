"""The H200 round trips of issue 30 (tests/fixtures/moe-device, tests/fixtures/mla-device; their
READMEs say how they ran): first losses against transformers on the same batch, a SIGTERM'd and
restarted run against an uninterrupted one, the export scored by transformers against Megatron's
own loss on the same weights, and the exported config.json against the committed one."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from helpers import REPO, load_tool

MOE = REPO / "tests" / "fixtures" / "moe-device"
MLA = REPO / "tests" / "fixtures" / "mla-device"
LOSS = re.compile(r" iteration +(\d+)/ *\d+ \|.*?lm loss: ([^ ]+) \|")


def _compare():
    return load_tool("stop_resume_compare")


def losses(root) -> dict[int, float]:
    """The first start's printed losses (iteration -> lm loss)."""
    out: dict[int, float] = {}
    for m in LOSS.finditer((root / "train.log").read_text()):
        out.setdefault(int(m.group(1)), float(m.group(2)))
    return out


def hf(fixture, iteration: int) -> float:
    return json.loads((fixture / "hf-batches.json").read_text())["losses"][str(iteration)]["hf_loss_float32"]


@pytest.mark.parametrize("fixture, run", [(MOE, "run3"), (MLA, "run4")])
def test_the_first_loss_is_transformers_loss_on_the_same_batch(fixture, run):
    """Megatron's iteration-1 loss (bf16, from the converted weights) against transformers' on the
    exact first global batch (fp32 arithmetic on the bf16 weights): Qwen3-MoE 2.999623 vs 2.999583,
    DeepSeek-V3-shaped (MLA through TE) 2.807888 vs 2.807985."""
    for root in ("stopped", "reference"):
        assert losses(fixture / f"{run}-{root}")[1] == pytest.approx(hf(fixture, 1), rel=1e-4)


def test_the_qwen3_moe_restart_continues_the_uninterrupted_run():
    lines, equal = _compare().compare(MOE / "run3-reference", MOE / "run3-stopped", 16)
    assert equal, "\n".join(lines)
    assert lines[0] == "resumed from iteration 4: first logged iteration 5"
    assert sum("equal" in line for line in lines[1:17]) == 16  # iterations 5-20, all of the restart's
    record = (MOE / "run3-summary.txt").read_text()
    assert "exit record: 143 stopped: SIGTERM saved_iteration: 4 torchrun_status: 0" in record


def test_a_different_resumed_loss_is_caught(tmp_path):
    for root in ("run3-reference", "run3-stopped"):
        shutil.copytree(MOE / root, tmp_path / root)
    log = tmp_path / "run3-stopped" / "train.log"
    text = log.read_text()
    assert text.count("lm loss: 2.850768E+00") == 1  # iteration 13 of the restart
    log.write_text(text.replace("lm loss: 2.850768E+00", "lm loss: 2.850769E+00"))
    lines, equal = _compare().compare(tmp_path / "run3-reference", tmp_path / "run3-stopped", 16)
    assert not equal and any("iteration 13" in line and "DIFFERENT" in line for line in lines)


def test_the_deepseek_stop_saved_and_matched_the_uninterrupted_run():
    """Run 4 (no time was left for its restart): SIGTERM during the iteration-10 save, the stop's save
    at 11, and every iteration before it equal to the reference run's."""
    stopped, reference = losses(MLA / "run4-stopped"), losses(MLA / "run4-reference")
    assert sorted(stopped) == list(range(1, 12)) and sorted(reference) == list(range(1, 22))
    assert all(stopped[i] == reference[i] for i in stopped)
    assert (MLA / "run4-stopped" / "exit_status").read_text().split("\n")[:3] == [
        "143", "stopped: SIGTERM", "saved_iteration: 11"]
    assert "multi_latent_attention .......................... True" in (MLA / "run4-stopped" / "train.log").read_text()
    assert "transformer_impl ................................ transformer_engine" in (
        MLA / "run4-stopped" / "train.log").read_text()


def test_the_deepseek_restart_continues_the_uninterrupted_run():
    """Run 5 (mla-device/README.md): the same stop at 11, then launch.sh again: it loaded iteration 11
    and iterations 12-20 equal the uninterrupted run's as printed (13 is the restart's averaged line).
    The command's budget then stopped the iteration-20 save, so the exit record says so and export.sh
    did not run on the device."""
    lines, equal = _compare().compare(MLA / "run5-reference", MLA / "run5-restarted", 9)
    assert equal, "\n".join(lines)
    assert lines[0] == "resumed from iteration 11: first logged iteration 12"
    assert sum("equal" in line for line in lines[1:10]) == 9  # iterations 12-20
    assert "exit record: 143 stopped: SIGTERM saved_iteration: 11 torchrun_status: 0" in (
        MLA / "run5-summary.txt").read_text()
    assert (MLA / "run5-restarted" / "exit_status").read_text().split("\n")[:2] == ["143", "stopped: SIGTERM"]


def test_the_export_scores_as_megatron_does_on_the_same_weights():
    """export.sh of the restarted run's iteration-20 save, loaded by transformers and scored on batch
    21, against the uninterrupted run's iteration-21 loss (its iteration-20 weights, which the
    restarted run's equal: the losses above are bitwise equal): 2.740434 vs 2.740651."""
    score = json.loads((MOE / "run3-export-score.json").read_text())
    assert score["class"] == "Qwen3MoeForCausalLM" and score["params"] == 750336
    assert score["losses"]["21"]["hf_loss_float32"] == pytest.approx(losses(MOE / "run3-reference")[21], rel=2e-4)
    # and not the source weights' loss on that batch: the export holds the trained weights
    assert abs(score["losses"]["21"]["hf_loss_float32"] - hf(MOE, 21)) > 0.05


def test_the_export_keeps_the_committed_config():
    exported = json.loads((MOE / "run3-export-config.json").read_text())
    committed = json.loads((REPO / "tests" / "e2e" / "models" / "tiny-qwen3-moe" / "config.json").read_text())
    assert exported["norm_topk_prob"] is committed["norm_topk_prob"] is True
    assert exported == committed


def test_the_averaged_line_is_held_to_one_unit_of_the_last_digit(tmp_path):
    """The restart's second line (the mean of its first two losses, rebuilt from the printed ones)
    may be one unit off in the last printed digit, never two."""
    for root in ("run3-reference", "run3-stopped"):
        shutil.copytree(MOE / root, tmp_path / root)
    log = tmp_path / "run3-stopped" / "train.log"
    text = log.read_text()
    assert text.count("lm loss: 2.928323E+00") == 1
    log.write_text(text.replace("lm loss: 2.928323E+00", "lm loss: 2.928322E+00"))
    lines, equal = _compare().compare(tmp_path / "run3-reference", tmp_path / "run3-stopped", 16)
    assert not equal and any("iteration 6" in line and "DIFFERENT" in line for line in lines)


def test_the_mla_export_mapping_round_trips_on_a_cpu():
    """The CPU round trip (mla-device/README.md): the export of the unchanged converted weights is the
    source model: every tensor bitwise, the same config, the same loss on batch 1."""
    record = json.loads((MLA / "cpu-round-trip.json").read_text())
    assert record["export_tensors"] == 91 and record["export_tensors_differing_from_source"] == []
    assert record["export_config_differences"] == {}
    assert record["export_hf_loss_batch1_fp32"] == hf(MLA, 1)
    assert record["megatron_loss_eval_rows"] == pytest.approx(record["hf_loss_eval_rows_fp32"], rel=1e-4)


def test_the_mla_round_trip_under_te_restarts_exports_and_scores():
    """Run 6 (mla-device/README.md): the whole round trip of the tiny DeepSeek-V3 with Transformer
    Engine in one device call: convert.sh, the stop at 11, launch.sh again to 20 with iterations 12-20
    equal to the uninterrupted run's, verify.sh 20 of 20, then export.sh of the iteration-20 save,
    loaded by transformers and scored on batch 21 against the uninterrupted run's iteration-21 loss
    (its iteration-20 weights): 2.567135 vs 2.567142."""
    lines, equal = _compare().compare(MLA / "run6-reference", MLA / "run6-restarted", 9)
    assert equal, "\n".join(lines)
    assert lines[0] == "resumed from iteration 11: first logged iteration 12"
    summary = (MLA / "run6-summary.txt").read_text()
    assert "exit record: 143 stopped: SIGTERM saved_iteration: 11 torchrun_status: 0" in summary
    assert "verify.sh exit 0: 20 of 20 checks passed" in summary and "export.sh exit 0" in summary
    assert (MLA / "run6-restarted" / "exit_status").read_text().split("\n")[0] == "0"
    score = json.loads((MLA / "run6-export-score.json").read_text())
    assert score["class"] == "DeepseekV3ForCausalLM" and score["params"] == 953504
    assert score["losses"]["21"]["hf_loss_float32"] == pytest.approx(losses(MLA / "run6-reference")[21], rel=2e-4)
    # and not the source weights' loss on that batch: the export holds the trained weights
    assert abs(score["losses"]["21"]["hf_loss_float32"] - hf(MLA, 21)) > 0.05


def test_the_mla_export_keeps_the_committed_config():
    """Bridge's DeepSeek-V3 export under TE wrote the committed config.json back, key for key
    (norm_topk_prob, the group-limited routing, routed_scaling_factor, first_k_dense_replace included)."""
    exported = json.loads((MLA / "run6-export-config.json").read_text())
    committed = json.loads((REPO / "tests" / "e2e" / "models" / "tiny-deepseek-v3" / "config.json").read_text())
    assert exported == committed
