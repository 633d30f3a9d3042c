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
    # acceptance is 25 %; mlm-h100-32b and the vTrain rows docs/performance-model.md names stay over it
    assert result["max"] <= 0.41


def test_leaving_out_a_rows_kin_holds_the_figures(result: dict[str, Any]) -> None:
    """Each row predicted without the other measurements of its configuration and its weak-scaling
    series: the same thresholds as plain leave-one-row-out (a configuration measured twice must not
    carry the median)."""
    assert result["strict_median"] <= 0.10
    assert result["strict_max"] <= 0.41


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
