"""The doctor on failures made now: tools/failed_runs_cpu.py's scenarios run with the real torchrun
(gloo on the CPU) through the generated launch.sh, then diagnosed, so that the committed corpus
cannot drift from what launch.sh and torchrun really leave. Skips without torch (the CPU build)."""

import io
import json
import sys

import pytest

from helpers import REPO

pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url https://download.pytorch.org/whl/cpu)")
sys.path.insert(0, str(REPO / "tools"))
import failed_runs_cpu  # noqa: E402

from compiler.commands.doctor import main  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "failed-runs"


@pytest.mark.parametrize("name", ["cpu-gpu-count", "cpu-megatron-not-importable", "cpu-rank-raises"])
def test_a_failure_made_now_gets_the_corpus_diagnosis(tmp_path, name):
    scenario = next(s for s in failed_runs_cpu.SCENARIOS if s.name == name)
    failed_runs_cpu.run(scenario, work=tmp_path)
    base = tmp_path / name
    out = io.StringIO()
    code = main([str(base / "spec.yaml"), str(base / "mnt" / "runs" / name), "--format", "json"], out, io.StringIO())
    report = json.loads(out.getvalue())
    expected = json.loads((FIXTURES / name / "expected.json").read_text())
    assert code == 1
    assert [f["cause"] for f in report["findings"]] == expected["causes"], out.getvalue()
    first = report["findings"][0]
    assert expected["first"]["evidence_contains"] in first["evidence"][0]["text"]
