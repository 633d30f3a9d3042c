"""Issue 27's device logs (tests/fixtures/te-h200): TE ran on the H200, and the Megatron run was the
compiled launch command of its spec. What was not measured is said in the README and the docs."""

from __future__ import annotations

import sys

from compiler.one_pass import compile_spec
from helpers import FIXTURES, REPO

sys.path.insert(0, str(REPO / "tools"))
from measurements import parse_args_dump  # noqa: E402

TE = FIXTURES / "te-h200"


def test_every_smoke_check_passed_on_the_h200():
    lines = [line for line in (TE / "smoke.txt").read_text().splitlines() if line[:4] in ("ok  ", "FAIL")]
    assert len(lines) == 5 and all(line.startswith("ok   ") for line in lines)
    assert "NVIDIA H200 (sm_90)" in lines[0] and "transformer_engine 2.14.1" in lines[0]
    assert "FusedAttention backend" in (TE / "smoke.txt").read_text()


def test_the_te_run_is_the_compiled_launch_of_its_spec():
    args = parse_args_dump((TE / "te-l4" / "train.log").read_text().splitlines())
    result = compile_spec(str(REPO / "tests/e2e/te/te-l4.yaml"), "tests/e2e/te/te-l4.yaml", render_files=False)
    assert result.ok
    flags = {f.name: f.values for f in result.facts.flags}
    assert args["transformer_impl"] == flags["--transformer-impl"][0] == "transformer_engine"
    assert args["gradient_accumulation_fusion"] == "False" and "--no-gradient-accumulation-fusion" in \
        result.facts.training.args
    assert args["cross_entropy_loss_fusion"] == "True" and "--cross-entropy-loss-fusion" in flags
    assert args["manual_gc"] == "True" and args["manual_gc_interval"] == flags["--manual-gc-interval"][0]
    assert args["hidden_size"] == flags["--hidden-size"][0] and args["seq_length"] == flags["--seq-length"][0]
    assert "before the start of training step" in (TE / "te-l4" / "train.log").read_text()
