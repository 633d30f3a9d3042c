"""tools/published_check.py on tests/fixtures/published/disclosed.csv: issue 26's acceptance 2 figures as
they stand, held so that a change which worsens them fails (the 25 % max is not met: the worst fold is held)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from helpers import load_tool

published = load_tool("published_check")


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return published.check()  # type: ignore[attr-defined,no-any-return]


def test_rows_refused_at_most_a_tenth(result: dict[str, Any]) -> None:
    assert len(result["refused"]) <= 0.1 * result["total"]


def test_median_error_within_10_percent_and_the_worst_fold_held(result: dict[str, Any]) -> None:
    assert result["median"] <= 0.10
    # 4.8 % (4.3 % before the unfused attention's batched matmuls stopped taking a launch-bound bench row as a GPU
    # rate, rates.gpu_set: the vTrain rows at 2-4 heads a rank; 4.6 % at d576f38)
    assert result["median"] <= 0.049
    # acceptance is 25 %; mlm-h100-32b and the vTrain rows docs/performance-model.md names stay over it
    assert result["max"] <= 0.31  # mlm-h100-32b +30.6 % (+40.0 % before changes 10 and 12)
    vtrain = [abs(o["error"]) for o in result["rows"] if o["id"].startswith("vtrain")]
    assert max(vtrain) <= 0.27  # h2048 TP 4 micro batch 2 +26.4 %; TP 8 micro batch 1 was -31.8 % before changes 8-11
    assert sum(abs(o["error"]) > 0.25 for o in result["rows"]) <= 2  # 7 before changes 8-11


def test_the_overlap_is_fitted_per_stack_and_one_is_the_additive_form(result: dict[str, Any]) -> None:
    f = result["factors"]
    assert 0.0 <= f["deepspeed-overlap"] <= 1.0 and 0.0 <= f["te-overlap"] <= 1.0
    rows = list(csv.DictReader(published.CSV.open()))  # type: ignore[attr-defined]
    c = published._base(next(r for r in rows if r["id"].startswith("vtrain")))  # type: ignore[attr-defined]
    hosts = (1e-3, 1e-3, 5e-5, 2e-5, 2e-3)
    added = c.base + (0.6 - 1) * c.gpu + sum(h * n for h, n in zip(hosts, published._counts(c)))  # type: ignore[attr-defined]
    assert published.predict(c, 0.6, 1.0, hosts, 1.0) == pytest.approx(added)  # type: ignore[attr-defined]
    # with none the shorter side hides whole: never more than the sides added, never less than the longer
    hidden = published.predict(c, 0.6, 1.0, hosts, 0.0)  # type: ignore[attr-defined]
    # the GPU side alone: base - gpu - tp + 0.6 gpu + tp (equal where the host side hides whole: a float's rounding)
    assert c.base - 0.4 * c.gpu + hosts[4] <= hidden + 1e-12 and hidden < added


def test_leaving_out_a_rows_kin_holds_the_figures(result: dict[str, Any]) -> None:
    """Each row predicted without the other measurements of its configuration, its weak-scaling series and
    its sweep: the same thresholds as plain leave-one-row-out (a configuration measured twice, or a sweep's
    other layouts, must not carry the figures)."""
    assert result["strict_median"] <= 0.10
    assert result["strict_median"] <= 0.050  # 4.9 % (4.7 % before rates.gpu_set; the H200 fit of calls 6-10 moved it from 4.6)
    assert result["strict_max"] <= 0.31


def test_every_sweep_ranks_its_layouts(result: dict[str, Any]) -> None:
    assert len(result["spearman"]) == 8
    assert min(result["spearman"].values()) >= 0.85


def test_weak_scaling_within_3_points(result: dict[str, Any]) -> None:
    assert result["weak_scaling_pp"] and max(result["weak_scaling_pp"].values()) <= 0.03


def test_a_rows_own_measurement_never_informs_its_prediction(result: dict[str, Any], tmp_path: Path) -> None:
    # leave-one-row-out: doubling one row's measured step time leaves that row's prediction as it was
    rows = list(csv.DictReader(published.CSV.open()))  # type: ignore[attr-defined]
    target = next(r for r in rows if r["id"] == "mlm-h100-16b")
    target["measured_step_s"] = str(2 * float(target["measured_step_s"]))
    path = tmp_path / "disclosed.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    moved = {o["id"]: o["loo_s"] for o in published.check(path)["rows"]}  # type: ignore[attr-defined]
    before = {o["id"]: o["loo_s"] for o in result["rows"]}
    assert moved["mlm-h100-16b"] == pytest.approx(before["mlm-h100-16b"], rel=1e-12)


def test_fused_softmax_runs_only_at_the_shapes_its_kernel_takes() -> None:
    """fused_softmax.py is_kernel_available: b x heads a rank a multiple of 4 and of the kernel's batches per
    block (4 at 1024 keys, 8 at 128 or fewer); the vTrain TP 8 rows at micro batch 1 (16 heads: 2 a rank) fall
    back to torch's softmax, which costs its GPU passes and launches."""
    from compiler.megatron.flops import FlopsArgs
    from compiler.megatron.kernels import fused_softmax_available
    from compiler.megatron.layer_time import Model, stage_work
    from compiler.megatron.timing import Parallel
    assert fused_softmax_available(1, 4, 1024, 1024) and fused_softmax_available(2, 2, 1024, 1024)
    assert not fused_softmax_available(1, 2, 1024, 1024)  # 2 attention batches
    assert not fused_softmax_available(1, 4, 128, 128)  # 8 batches a block at 128 keys
    assert fused_softmax_available(2, 4, 128, 128)
    assert not fused_softmax_available(4, 4, 8192, 8192)  # sk over 4096
    args = FlopsArgs(num_layers=2, hidden_size=1024, num_attention_heads=16, kv_channels=64, ffn_hidden_size=4096,
                     seq_length=1024, padded_vocab_size=51200)

    def work(tp: int, micro: int, softmax: bool | None = None) -> Any:
        par = Parallel(tensor=tp, pipeline=1, context=1, data=1, micro_batch=micro, global_batch=micro,
                       gpus_per_worker=8, workers=1, local_attention=True, fused_kernels=True, recompute="full",
                       recompute_method="uniform", recompute_num_layers=1, fused_softmax=softmax)
        return stage_work(args, Model(), par, 2, True, True)

    fallback, fused, unfused = work(8, 1), work(4, 1), work(8, 1, softmax=False)
    assert fallback.launches == 2 * 4 * 3 and fused.launches == 0  # 4 more each way, the recompute's again
    # the fallback's passes over the scores are the unfused ones (--no-masked-softmax-fusion's), not the kernel's
    assert fallback.attention == pytest.approx(unfused.attention)
    assert work(8, 2).attention < fallback.attention * 2


def test_host_counts_follow_what_the_host_issues() -> None:
    """A call's cost per other rank of its group multiplies calls x (TP - 1); Transformer Engine's userbuffers
    (--tp-comm-overlap) issue no torch.distributed call, so such rows count none."""
    rows = {r["id"]: r for r in csv.DictReader(published.CSV.open())}  # type: ignore[attr-defined]
    tp8 = published._base(rows["vtrain-s-h1024-l12-g8-tp8-dp1-pp1-gb16-mb1"])  # type: ignore[attr-defined]
    slots, passes, calls, peers, iteration = published._counts(tp8)  # type: ignore[attr-defined]
    assert calls == 16 * 12 * (2 * 2 + 2) and peers == 7 * calls and iteration == 1.0  # fwd, recompute, bwd
    overlapped = published._base(rows["mlm-h100-32b"])  # type: ignore[attr-defined]
    assert overlapped.calls == 0.0 and published._counts(overlapped)[3] == 0.0  # type: ignore[attr-defined]
