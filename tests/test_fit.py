"""tools/fit_utilisation.py: the fit recovers known constants; the committed fit meets the acceptance."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from compiler.megatron.gpus import GPUS
from compiler.megatron.flops import FlopsArgs
from compiler.megatron.timing import CALIBRATION, Calibration, Parallel, step_time

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import fit_utilisation as fu  # noqa: E402

MEASUREMENTS = REPO / "tests" / "fixtures" / "measurements"


def synthetic(truth: Calibration) -> list[fu.Measured]:
    """Single-GPU runs of varied shapes whose 'measured' time is the model's under `truth`."""
    runs = []
    shapes = [(4, 1024, 16, 2048, 4), (8, 1024, 16, 2048, 4), (4, 2048, 16, 2048, 2), (4, 1024, 16, 8192, 1),
              (12, 1536, 12, 4096, 2), (16, 3072, 24, 2048, 1), (4, 1024, 16, 2048, 1), (4, 1024, 16, 2048, 8)]
    for i, (layers, h, heads, s, b) in enumerate(shapes):
        args = FlopsArgs(num_layers=layers, hidden_size=h, num_attention_heads=heads, kv_channels=h // heads,
                         ffn_hidden_size=4 * h, seq_length=s, padded_vocab_size=32000)
        par = Parallel(tensor=1, pipeline=1, context=1, data=1, micro_batch=b, global_batch=b * (1 + i % 2),
                       gpus_per_worker=1, workers=1, local_attention=True, fused_kernels=False,
                       recompute="full" if i == 4 else None, recompute_method="uniform", recompute_num_layers=1)
        unit = step_time(args, par, GPUS["h200"], 1e8, calibration=fu.UNIT)
        measured = step_time(args, par, GPUS["h200"], 1e8, calibration=truth).seconds * 1e3
        runs.append(fu.Measured(f"run{i}", "synthetic", measured, 10, unit, "h200"))
    return runs


def test_fit_recovers_the_constants_that_made_the_times() -> None:
    truth = Calibration(0.37, 41.0, 23.0, "truth", True, 12.0)
    cal, fit_set, check_set = fu.calibrate(synthetic(truth))
    assert len(fit_set) == 4 and len(check_set) == 4
    assert cal.utilisation == pytest.approx(0.37, abs=1e-4)
    assert cal.attention_bytes_per_score == pytest.approx(41.0, abs=0.01)
    assert cal.elementwise_bytes == pytest.approx(23.0, abs=0.01)
    assert cal.iteration_overhead_ms == pytest.approx(12.0, abs=0.01)
    for m in fit_set + check_set:
        assert fu.model_ms(m, cal) == pytest.approx(m.median_ms, rel=1e-3)


def test_fit_keeps_constants_non_negative() -> None:
    truth = Calibration(0.5, 0.0, 0.0, "truth", True, 0.0)
    runs = synthetic(truth)
    noisy = [r._replace(median_ms=r.median_ms * (0.97 if i % 2 else 1.03)) for i, r in enumerate(runs)]
    cal, _, _ = fu.calibrate(noisy)
    assert min(cal.attention_bytes_per_score, cal.elementwise_bytes, cal.iteration_overhead_ms) >= 0
    assert 0.4 < cal.utilisation < 0.6


def test_module_text_replaces_only_the_fit_block() -> None:
    text = (REPO / "compiler" / "megatron" / "timing.py").read_text()
    new = fu.module_text(Calibration(0.25, 40.0, 12.5, "fitted on x", True, 30.0), text)
    assert "utilisation=0.2500" in new and "iteration_overhead_ms=30.00" in new
    assert new.count("# BEGIN FIT") == 1 and len(new.splitlines()) - len(text.splitlines()) < 10
    namespace: dict = {}
    block = new[new.index("CALIBRATION:"):new.index("# END FIT")]
    exec(block, {"Calibration": Calibration}, namespace)  # the block is valid Python naming the fit
    assert namespace["CALIBRATION"]["h200"].utilisation == 0.25


@pytest.mark.skipif(not (REPO / "tools" / "measurements.py").is_file() or not MEASUREMENTS.is_dir(),
                    reason="no measurements on this branch yet (branch measure brings them)")
def test_committed_fit_is_within_tolerance_on_every_measured_configuration() -> None:
    runs = fu.load(REPO)
    assert len(runs) >= 8
    cal = CALIBRATION["h200"]
    fit_set, check_set = fu.split_halves(runs)
    assert cal.source.startswith(f"fitted on {len(fit_set)} H200 runs")
    extra = fu.extra_check()
    assert extra is not None
    for m in fit_set + check_set + [extra]:
        err = (fu.model_ms(m, cal) - m.median_ms) / m.median_ms
        assert abs(err) <= fu.TOLERANCE, (m.name, m.median_ms, err)


@pytest.mark.skipif(not (REPO / "tools" / "measurements.py").is_file() or not MEASUREMENTS.is_dir(),
                    reason="no measurements on this branch yet (branch measure brings them)")
def test_performance_model_doc_is_what_the_script_writes() -> None:
    runs = fu.load(REPO)
    fit_set, check_set = fu.split_halves(runs)
    text = fu.document(CALIBRATION["h200"], fit_set, check_set, fu.extra_check())
    assert (REPO / "docs" / "performance-model.md").read_text() == text, \
        "regenerate with python tools/fit_utilisation.py --write"
