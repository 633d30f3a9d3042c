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


def test_the_loader_rate_is_the_measured_run() -> None:
    # te-s16384-b1 with the mask (call 9): its median iteration after the third, for 268 MB of mask a step
    import re
    import statistics

    log = REPO / "tests" / "fixtures" / "h200-hosts" / "call9" / "te-s16384-b1-mask" / "train.log"
    its = [float(x) for x in re.findall(r"elapsed time per iteration \(ms\): ([\d.]+)", log.read_text())][3:]
    assert data_loader.LOADER_MASK_BYTES_PER_S == pytest.approx(16384 * 16384 / (statistics.median(its) / 1e3), rel=0.005)


def test_the_loader_builds_the_whole_mask_whatever_context_parallelism_slices() -> None:
    from compiler.megatron.timing import Parallel

    par = Parallel(tensor=1, pipeline=1, context=2, data=1, micro_batch=1, global_batch=1, gpus_per_worker=2,
                   workers=1, attention_mask=True)

    class Args:
        seq_length = 16384

    assert data_loader.mask_bytes(Args, par) == 16384 * 16384


def diagnostics(*sets: str) -> list:
    return compile_spec(str(REPO / SPEC), SPEC, overrides=tuple(Override(s) for s in (DEFAULT, *sets))).diagnostics


def test_sft_refuses_the_mask_and_reset_masks_want_it() -> None:
    # sft_dataset.py:174 asserts neither; the default (off) passes
    assert not [d for d in diagnostics('training.args=["--sft"]') if d.code == "performance-option"]
    refused = [d for d in diagnostics('training.args=["--sft"]', "training.performance.attention_mask_in_dataloader=true")
               if d.code == "performance-option"]
    assert refused and refused[0].severity.name == "ERROR" and "sft_dataset.py:174" in refused[0].message
    warned = [d for d in diagnostics('training.args=["--reset-attention-mask"]',
                                     "training.performance.attention_mask_in_dataloader=false")
              if d.code == "performance-option"]
    assert warned and warned[0].severity.name == "WARNING" and "documents attend to each other" in warned[0].message


def test_the_flag_in_raw_args_names_the_field_that_decides_it() -> None:
    found = [d for d in diagnostics('training.args=["--no-create-attention-mask-in-dataloader"]')
             if d.code == "args-duplicate-flag"]
    assert found and "training.performance.attention_mask_in_dataloader" in (found[0].hint or "")
