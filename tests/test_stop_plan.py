"""A stop that saves, at compile time: the derived times and flags (megatron/stop.py), the engines'
settings in their documents, plan.md's section, and the rules."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from compiler.megatron import stop
from compiler.platform.slurm import time_limit_seconds
from helpers import REPO, compile_text, diagnostics_for

GENERATED = REPO / "generated"
SPEC = (REPO / "tests" / "e2e" / "stop-resume.yaml").read_text()


@pytest.mark.parametrize("text, seconds", [
    ("30", 1800), ("30:15", 1815), ("04:00:00", 14400), ("2-0", 172800), ("2-03", 183600),
    ("1-02:03", 93780), ("1-02:03:04", 93784), ("UNLIMITED", None), ("0", None), ("1h", None),
])
def test_slurm_time_limits_in_seconds(text, seconds):
    assert time_limit_seconds(text) == seconds


def test_times_follow_their_definitions():
    t = stop.stop_times(checkpoint_bytes=50 * 10**9, write_gb_s=2.0, step_s=4.0, save_interval=500,
                        time_limit_s=4 * 3600, limit_source="x", grace_s=None, grace_source="-",
                        engine_sets_grace=True)
    assert t.write_s == 25.0
    assert t.needed_grace_s == math.ceil(4 + 25 + stop.FIRST_SAVE_S + stop.GRACE_MARGIN_S)
    assert t.grace_s == t.needed_grace_s and not t.grace_short  # the engine sets what a stop needs
    assert t.exit_duration_mins == math.floor((14400 - stop.START_MARGIN_S - 4 - 25 - stop.FIRST_SAVE_S
                                               - stop.GRACE_MARGIN_S) / 60)
    assert t.lost_per_kill_s == 2000.0
    # the fewest iterations between saves that keep saving under 5 % of the time
    n = t.suggested_save_interval
    assert 25 / (25 + n * 4) <= stop.SAVE_SHARE < 25 / (25 + (n - 1) * 4)


def test_an_engine_that_sets_no_grace_leaves_it_unknown_and_a_short_one_is_flagged():
    unknown = stop.stop_times(10**9, None, 1.0, 10, None, "-", None, "unknown", False)
    assert unknown.grace_s is None and not unknown.grace_short and unknown.exit_duration_mins is None
    assert unknown.write_gb_s == stop.DEFAULT_WRITE_GB_S and not unknown.write_rate_given
    short = stop.stop_times(10**9, None, 1.0, 10, None, "-", 5, "stop.grace_seconds", True)
    assert short.grace_s == 5 and short.grace_short


def _flags(files, name="launch.sh"):
    return files[name]


def test_the_flags_are_in_every_pretrain_launch_and_the_duration_under_a_limit():
    for stem in ("pretrain-mock", "gpt-7b", "gpt-7b-slurm", "gpt-7b-k8s", "qwen3-0.6b"):
        text = (GENERATED / stem / "launch.sh").read_text()
        assert "  --exit-signal-handler \\\n" in text, stem
    assert "--exit-duration-in-mins 7192" in (GENERATED / "gpt-7b-slurm" / "launch.sh").read_text()
    assert "  --exit-duration-in-mins" not in (GENERATED / "gpt-7b-k8s" / "launch.sh").read_text()
    assert "  --exit-signal-handler" not in (GENERATED / "tp2" / "launch.sh").read_text()  # not pretrain_gpt.py


def test_slurm_signals_the_batch_shell_before_the_limit_and_requeues():
    text = (GENERATED / "gpt-7b-slurm" / "job.sbatch").read_text()
    plan = (GENERATED / "gpt-7b-slurm" / "plan.md").read_text()
    grace = int(text.split("#SBATCH --signal=B:TERM@", 1)[1].split("\n", 1)[0])
    assert f"| engine grace | `{grace} s (derived" in plan
    assert "#SBATCH --requeue\n#SBATCH --open-mode=append\n" in text
    assert 'scontrol requeue "$SLURM_JOB_ID"' in text
    assert "--signal" not in (GENERATED / "tp2-dp2-slurm" / "job.sbatch").read_text()  # no handler to save


def test_kubernetes_sets_the_pods_grace():
    doc = yaml.safe_load((GENERATED / "gpt-7b-k8s" / "trainjob.yaml").read_text())
    pod = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    plan = (GENERATED / "gpt-7b-k8s" / "plan.md").read_text()
    assert f"| engine grace | `{pod['terminationGracePeriodSeconds']} s (derived" in plan


def test_kubernetes_limit_gives_the_duration():
    text = SPEC.replace("stop:\n  time_limit_minutes: 60\n", "platform: kubernetes\nkubernetes:\n"
                        "  volume:\n    claim: shared\n  active_deadline_seconds: 7200\n")
    result = compile_text(text, "tests/e2e/stop-k8s.yaml")
    assert result.ok, [d.message for d in result.diagnostics]
    assert "--exit-duration-in-mins 114" in result.files["launch.sh"]
    assert "terminationGracePeriodSeconds: 46" in result.files["trainjob.yaml"]


def test_aistudio_sets_no_grace_and_says_so():
    plan = (GENERATED / "gpt-7b" / "plan.md").read_text()
    assert "| engine grace | `unknown` |" in plan
    assert "has no stop signal, grace period or time limit setting" in plan
    keys = set(json.loads((GENERATED / "gpt-7b" / "job.json").read_text()))
    assert not [k for k in keys if "grace" in k or "signal" in k or "stop" in k]


def test_plan_md_shows_the_times_and_the_suggestion():
    plan = (GENERATED / "gpt-7b-slurm" / "plan.md").read_text()
    for row in ("stop signal", "checkpoint write", "grace a stop needs", "time limit", "--exit-duration-in-mins",
                "work lost per stop", "save\\_interval"):
        assert f"| {row} |" in plan, row


def test_raw_exit_flags_are_refused():
    text = SPEC.replace('args: ["--deterministic-mode", "--seed", "1234"]',
                        'args: ["--exit-signal", "SIGUSR1", "--exit-duration-in-mins", "10"]')
    codes = [d.code for d in diagnostics_for(text, "tests/e2e/x.yaml")]
    assert codes.count("args-duplicate-flag") == 2
