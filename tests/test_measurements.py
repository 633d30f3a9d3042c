"""tools/measurements.py over the committed H200 logs of tests/fixtures/measurements and, through
Transformer Engine, tests/fixtures/te-h200/measurements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from helpers import load_tool

REPO = Path(__file__).resolve().parent.parent
MEASUREMENTS = REPO / "tests" / "fixtures" / "measurements"
TE = REPO / "tests" / "fixtures" / "te-h200" / "measurements"


def _load_tool():
    """tools/measurements.py as a module (tools/ is no package)."""
    return load_tool("measurements")


m = _load_tool()
ROWS = m.collect(MEASUREMENTS)
TE_ROWS = m.collect(TE)


def test_every_config_has_a_peak_and_a_median_time():
    assert len(ROWS) >= 17 and len(TE_ROWS) >= 8
    assert all(row.args["transformer_impl"] == "transformer_engine" for row in TE_ROWS)
    for row in ROWS + TE_ROWS:
        assert row.max_allocated_mb is not None and row.max_allocated_mb > 0, row.config
        assert row.median_ms_per_iteration is not None and row.median_ms_per_iteration > 0, row.config
        assert row.theoretical_weight_and_optimizer_mb is not None, row.config
        assert row.theoretical_activation_mb is not None, row.config
        assert row.parameters is not None, row.config
        # a complete run: every iteration logged, enough of them past the warm-up for a median
        assert row.iterations_logged == row.train_iters >= m.WARMUP_ITERATIONS + 8, row.config
        assert row.tokens_per_s == pytest.approx(row.tokens_per_iteration / row.median_ms_per_iteration * 1000, abs=0.1)


@pytest.mark.parametrize("row", ROWS + TE_ROWS, ids=[r.config for r in ROWS + TE_ROWS])
def test_each_log_is_the_run_of_its_spec(row):
    """The log's arguments are the committed spec's: the table describes what the spec asks for."""
    spec = yaml.safe_load((REPO / m.spec_of(row.config)).read_text())
    model, batch = spec["training"]["model"], spec["training"]["batch"]
    expected = {
        "num_layers": model["num_layers"], "hidden_size": model["hidden_size"],
        "num_attention_heads": model["num_attention_heads"], "seq_length": model["seq_length"],
        "vocab_size": model["vocab_size"], "micro_batch_size": batch["micro"], "global_batch_size": batch["global"],
        "train_iters": spec["training"]["train_iters"],
        "num_query_groups": model.get("num_query_groups", 1),
        "recompute_granularity": (spec["training"].get("recompute") or {}).get("granularity"),
    }
    assert {k: row.args[k] for k in expected} == {k: str(v) for k, v in expected.items()}


def test_table_is_deterministic_and_complete():
    table = m.markdown(ROWS)
    assert table == m.markdown(m.collect(MEASUREMENTS))
    lines = table.splitlines()
    assert len(lines) == 2 + len(ROWS)
    assert all(line.count("|") == 10 for line in lines)
    assert "—" not in table  # no missing figure
    data = json.loads(m.to_json(ROWS))
    assert [d["config"] for d in data] == sorted(d["config"] for d in data)
    assert m.to_json(ROWS) == m.to_json(m.collect(MEASUREMENTS))


@pytest.mark.parametrize("directory, marker", [
    (MEASUREMENTS, "<!-- table: python tools/measurements.py -->\n"),
    (TE, "<!-- table: python tools/measurements.py tests/fixtures/te-h200/measurements -->\n")])
def test_readme_holds_the_generated_table(directory, marker):
    """The committed table is what the tool prints for the committed logs (regenerate it, don't edit it)."""
    readme = (directory / "README.md").read_text()
    assert readme.split(marker, 1)[1].split("<!-- end table -->", 1)[0] == m.markdown(m.collect(directory))


LOG = """------------------------ arguments ------------------------
  global_batch_size ............................... 2
  micro_batch_size ................................ 2
  num_layers ...................................... 4
  seq_length ...................................... 1024
  train_iters ..................................... 6
-------------------- end of arguments ---------------------
  global_batch_size ............................... 99
 > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1234
 [2026-12-01 09:28:42.2] iteration        1/       6 | consumed samples: 2 | elapsed time per iteration (ms): 900.0 | throughput per GPU (TFLOP/s/GPU): 1.0 | lm loss: 1
Theoretical memory footprints: weight and optimizer=10.50 MB, activation=20.25 MB, total=30.75 MB
[Rank 0] (after 1 iterations) memory (MB) | allocated: 5.00 | max allocated: 40.00 | reserved: 50.00 | max reserved: 50.00
 [2026-12-01 09:28:42.3] iteration        2/       6 | consumed samples: 4 | elapsed time per iteration (ms): 500.0 | throughput per GPU (TFLOP/s/GPU): 2.0 |
[Rank 0] (after 2 iterations) memory (MB) | allocated: 5.00 | max allocated: 45.50 | reserved: 50.00 | max reserved: 50.00
 [2026-12-01 09:28:42.4] iteration        3/       6 | consumed samples: 6 | elapsed time per iteration (ms): 300.0 | throughput per GPU (TFLOP/s/GPU): 3.0 |
 [2026-12-01 09:28:42.5] iteration        4/       6 | consumed samples: 8 | elapsed time per iteration (ms): 10.0 | throughput per GPU (TFLOP/s/GPU): 4.0 |
 [2026-12-01 09:28:42.6] iteration        5/       6 | consumed samples: 10 | elapsed time per iteration (ms): 30.0 | throughput per GPU (TFLOP/s/GPU): 6.0 |
 [2026-12-01 09:28:42.7] iteration        6/       6 | consumed samples: 12 | elapsed time per iteration (ms): 20.0 | throughput per GPU (TFLOP/s/GPU): 5.0 |
"""


def test_parse_log_takes_the_figures_past_the_warm_up():
    row = m.parse_log("x", LOG)
    assert row.args["global_batch_size"] == "2"  # the dump, not a later line of the same form
    assert row.parameters == 1234
    assert (row.theoretical_weight_and_optimizer_mb, row.theoretical_activation_mb) == (10.5, 20.25)
    assert row.max_allocated_mb == 45.5
    assert row.median_ms_per_iteration == 20.0  # iterations 4..6 only
    assert row.median_tflops_per_gpu == 5.0
    assert row.tokens_per_iteration == 2048 and row.tokens_per_s == 102400.0
    assert row.iteration_ms == [900.0, 500.0, 300.0, 10.0, 30.0, 20.0]


def test_parse_log_leaves_missing_figures_missing():
    cut = "\n".join(line for line in LOG.splitlines() if "memory (MB)" not in line and "iteration " not in line)
    row = m.parse_log("x", cut)
    assert row.max_allocated_mb is None and row.median_ms_per_iteration is None and row.tokens_per_s is None
    assert "—" in m.markdown([row])
