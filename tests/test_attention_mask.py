"""The data loader's causal mask (issue 26, tests/fixtures/h200-hosts/call9): the compiler turns it off unless
--reset-attention-mask needs it, the spec can keep it, and where it is built the memory and step-time models
price it."""

from __future__ import annotations

import pytest

from compiler.load.compose import Override
from compiler.megatron import data_loader
from compiler.one_pass import compile_spec
from helpers import REPO

SPEC = "tests/e2e/te/te-s16384-b1.yaml"  # s 16384, micro batch 1: 268 MB of mask a micro batch
DEFAULT = "training.performance.attention_mask_in_dataloader=null"  # the spec keeps it as its run had it
FLAG = "--no-create-attention-mask-in-dataloader"


def compiled(*sets: str):
    result = compile_spec(str(REPO / SPEC), SPEC, overrides=tuple(Override(s) for s in (DEFAULT, *sets)))
    assert result.ok and result.files is not None and result.facts is not None, result.diagnostics
    return result


def test_off_by_default_and_said_why_in_the_plan() -> None:
    result = compiled()
    assert FLAG in result.files["launch.sh"]
    assert "a causal GPT needs no mask from the data loader" in result.files["plan.md"]
    assert result.facts.step_time is not None
    assert not any(t.name == "data-loader" for t in result.facts.step_time.terms)


def test_kept_where_the_spec_says_so_or_reset_attention_mask_needs_it() -> None:
    assert FLAG not in compiled("training.performance.attention_mask_in_dataloader=true").files["launch.sh"]
    reset = compiled('training.args=["--reset-attention-mask"]')
    assert FLAG not in reset.files["launch.sh"] and "--reset-attention-mask" in reset.files["launch.sh"]
    assert FLAG in compiled("training.performance.attention_mask_in_dataloader=false").files["launch.sh"]


def test_a_kept_mask_costs_memory_and_paces_the_step() -> None:
    off, on = compiled(), compiled("training.performance.attention_mask_in_dataloader=true")
    # bool [b, 1, s, s] on the stage that loads the batch
    grown = (on.facts.estimate.peak_mb - off.facts.estimate.peak_mb) * 1024 * 1024
    assert grown == pytest.approx(16384 * 16384, rel=0.05)
    step = on.facts.step_time
    loader = next(t for t in step.terms if t.name == "data-loader")
    assert step.seconds == pytest.approx(16384 * 16384 / data_loader.LOADER_MASK_BYTES_PER_S)
    assert loader.seconds > 0 and step.seconds > off.facts.step_time.seconds


def test_the_loader_rate_is_the_measured_pair() -> None:
    # te-s16384-b1 with the mask: 119.8 ms an iteration (call 9), 268 MB of mask a step
    assert data_loader.LOADER_MASK_BYTES_PER_S == pytest.approx(16384 * 16384 / 119.8e-3, rel=0.01)
