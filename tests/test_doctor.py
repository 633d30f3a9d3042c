"""megatron-compile doctor against real failed runs (tests/fixtures/failed-runs) and real good ones.

Each fixture is what a generated launch command left in its run root when one thing was broken
(tools/failed_runs_cpu.py on a CPU with the real torchrun and gloo; tools/failed_runs_device.sh on an
H200 with pretrain_gpt.py), with its spec and the diagnosis expected of it (expected.json, written
by hand from what was broken). The good runs are the H200 fixtures that verify.sh passes.
"""

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from compiler.commands.doctor import main
from compiler.megatron.failures import DoctorFacts, RunFiles, WorkerFiles, diagnose
from helpers import FIXTURES, REPO

FAILED = FIXTURES / "failed-runs"
CORPUS = sorted(p.name for p in FAILED.iterdir() if (p / "expected.json").exists())


def materialize(fixture: Path, root: Path) -> Path:
    """The fixture's run root, with its checkpoint rebuilt from the listing (names and sizes)."""
    shutil.copytree(fixture / "run", root)
    listing = fixture / "ckpt-files.txt"
    if listing.exists():
        for line in listing.read_text().splitlines():
            name, size = line.rsplit(" ", 1)
            path = root / "ckpt" / name
            if not path.exists():  # latest_checkpointed_iteration.txt is kept as it was
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"\0" * min(int(size), 64))
    return root


def doctor(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_corpus_is_there():
    assert len(CORPUS) >= 11, CORPUS


@pytest.mark.parametrize("name", CORPUS)
def test_each_failed_run_gets_its_diagnosis(tmp_path, name):
    fixture = FAILED / name
    expected = json.loads((fixture / "expected.json").read_text())
    root = materialize(fixture, tmp_path / "run")
    code, out, err = doctor(str(fixture / "spec.yaml"), str(root), "--format", "json")
    report = json.loads(out)
    assert report["healthy"] is expected["healthy"], out
    assert code == (0 if expected["healthy"] else 1), err
    assert [f["cause"] for f in report["findings"]] == expected["causes"], json.dumps(report["findings"], indent=1)
    if expected["healthy"]:
        assert report["verify"]["passed"] is True
        return
    first, want = report["findings"][0], expected["first"]
    assert (first["cause"], first["worker"], first["rank"]) == (want["cause"], want["worker"], want["rank"])
    quoted = first["evidence"][0]
    assert quoted["file"] == want["evidence_file"]
    assert want["evidence_contains"] in quoted["text"]
    if quoted["line"]:
        # the quoted line is the file's line, as it reads there (terminal colours aside)
        text = (root / quoted["file"]).read_text().splitlines()[quoted["line"] - 1]
        assert quoted["text"] in text or want["evidence_contains"] in text
    assert set(want["fix_fields"]) <= {f["field"] for f in first["fixes"]}


@pytest.mark.parametrize("name", CORPUS)
def test_the_text_report_names_cause_evidence_and_fix(tmp_path, name):
    fixture = FAILED / name
    expected = json.loads((fixture / "expected.json").read_text())
    root = materialize(fixture, tmp_path / "run")
    code, out, _ = doctor(str(fixture / "spec.yaml"), str(root))
    if expected["healthy"]:
        assert code == 0 and "healthy: verify.sh passed" in out
        return
    assert code == 1
    assert f"1. [{expected['first']['cause']}]" in out
    assert "   evidence " in out and "   fix " in out


# --- real good runs: the H200 fixtures verify.sh passes -------------------------------------------

COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"


def _runtime(gpus: int, extra: str = "") -> str:
    return f"torch: 2.11.0+cu130\ncuda: 13.0\ngpu_count: {gpus}\nmegatron_commit: {COMMIT}\n{extra}"


def test_a_real_two_worker_run_is_healthy_with_iterations_only_in_the_last_workers_log(tmp_path):
    src = FIXTURES / "h200-pretrain-2workers-run"
    root = tmp_path / "run"
    for node in (0, 1):
        d = root / "nodes" / f"node-{node}"
        d.mkdir(parents=True)
        shutil.copy(src / f"node-{node}.log", d / "train.log")
        (d / "runtime.txt").write_text(_runtime(1, f"nnodes: 2\nnode_rank: {node}\n"))
        (d / "exit_status").write_text("0\n")
    assert not re.search(r" iteration +\d+/ *\d+ \|", (root / "nodes/node-0/train.log").read_text())
    (root / "ckpt" / "iter_0000020").mkdir(parents=True)
    (root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("20")
    for name in (src / "ckpt_files.txt").read_text().split():
        (root / "ckpt" / "iter_0000020" / name).write_bytes(b"x" * 64)
    code, out, err = doctor(str(REPO / "tests/e2e/pretrain-mock-2workers.yaml"), str(root))
    assert code == 0, out + err
    assert "healthy: verify.sh passed 25 of 25 checks" in out


def test_a_real_two_worker_run_whose_last_worker_log_is_cut_is_not_healthy(tmp_path):
    src = FIXTURES / "h200-pretrain-2workers-run"
    root = tmp_path / "run"
    for node in (0, 1):
        d = root / "nodes" / f"node-{node}"
        d.mkdir(parents=True)
        text = (src / f"node-{node}.log").read_text()
        if node == 1:  # the log as if the last iterations never reached it
            text = "\n".join(x for x in text.splitlines() if "iteration       20/" not in x and "iteration       15/" not in x)
        (d / "train.log").write_text(text)
        (d / "runtime.txt").write_text(_runtime(1, f"nnodes: 2\nnode_rank: {node}\n"))
        (d / "exit_status").write_text("0\n")
    code, out, _ = doctor(str(REPO / "tests/e2e/pretrain-mock-2workers.yaml"), str(root), "--format", "json")
    report = json.loads(out)
    assert code == 1
    first = report["findings"][0]
    assert first["cause"] == "logs-incomplete" and first["worker"] == 1
    assert "iteration       10/      20" in first["evidence"][0]["text"]


def test_a_real_tp2_run_is_healthy(tmp_path):
    src = FIXTURES / "h200-tp2-run"
    root = tmp_path / "run"
    root.mkdir()
    shutil.copy(src / "train.log", root / "train.log")
    shutil.copy(src / "runtime.txt", root / "runtime.txt")
    (root / "exit_status").write_text("0\n")
    for line in (src / "ckpt_files.txt").read_text().splitlines():
        name, size = line.rsplit(" ", 1)
        (root / "ckpt" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "ckpt" / name).write_bytes(b"\0" * int(size))
    code, out, err = doctor(str(REPO / "specs/tp2.yaml"), str(root))
    assert code == 0, out + err
    assert "healthy" in out


# --- the pure functions -----------------------------------------------------------------------


def test_an_unknown_failure_quotes_the_first_error_looking_line_of_each_worker():
    files = RunFiles("/r", (
        WorkerFiles(0, "nodes/node-0", train_log="starting\nUserWarning: ignore me\nsomething odd: Segmentation fault "
                    "(core dumped) Error\n", launch_log="launch.sh: started x\n", exit_status="139\n"),
        WorkerFiles(1, "nodes/node-1", train_log="fine\nzzz FAILED here\n", launch_log="launch.sh: started y\n",
                    exit_status="139\n"),
    ))
    findings = diagnose(files, DoctorFacts(workers=2, gpus_per_worker=1))
    assert [f.cause for f in findings] == ["unknown"]
    assert [(e.file, e.line) for e in findings[0].evidence] == [("nodes/node-0/train.log", 3),
                                                                 ("nodes/node-1/train.log", 2)]


def test_a_run_root_that_does_not_exist(tmp_path):
    code, _, err = doctor(str(FAILED / "cpu-gpu-count" / "spec.yaml"), str(tmp_path / "nothing"))
    assert code == 1 and "no run root" in err


def test_a_spec_that_does_not_compile(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\n")
    code, _, err = doctor(str(bad), str(tmp_path))
    assert code == 2 and err
