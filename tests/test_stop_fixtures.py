"""The H200 stop-and-resume runs (tests/fixtures/h200-stop-resume, docs/stop-resume.md): the resumed
runs' losses equal the uninterrupted run's, and today's verify.sh and doctor read the run roots."""

from __future__ import annotations

import io
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import REPO, compile_text, load_tool

FIXTURE = REPO / "tests" / "fixtures" / "h200-stop-resume"
SPEC = REPO / "tests" / "e2e" / "stop-resume.yaml"


def _compare_module():
    return load_tool("stop_resume_compare")


@pytest.mark.parametrize("root, loaded", [("stop-resume", 83), ("stop-damaged", 50)])
def test_the_resumed_losses_equal_the_uninterrupted_runs(root, loaded):
    lines, equal = _compare_module().compare(FIXTURE / "stop-ref", FIXTURE / root, 5)
    assert equal, "\n".join(lines)
    assert lines[0] == f"resumed from iteration {loaded}: first logged iteration {loaded + 1}"
    assert sum("bitwise equal" in line for line in lines[1:6]) == 5
    assert lines[-1].endswith(f"{200 - loaded} of {200 - loaded} float32 losses bitwise equal")


def test_a_different_loss_is_caught(tmp_path):
    """The comparison can fail: one printed loss changed in a copy of the resumed log."""
    for root in ("stop-ref", "stop-resume"):
        shutil.copytree(FIXTURE / root, tmp_path / root)
    log = tmp_path / "stop-resume" / "train.log"
    log.write_text(log.read_text().replace("lm loss: 4.248181E-02", "lm loss: 4.248182E-02"))
    lines, equal = _compare_module().compare(tmp_path / "stop-ref", tmp_path / "stop-resume", 5)
    assert not equal and any("iteration 86" in line and "DIFFERENT" in line for line in lines)


def _run_root(tmp: Path, name: str) -> Path:
    """A fixture run root with stand-ins (sparse files of the listed sizes) for its checkpoint files."""
    root = tmp / name
    shutil.copytree(FIXTURE / name, root)
    for line in (root / "ckpt-listing.txt").read_text().splitlines():
        path, size = line.rsplit(" ", 1)
        target = root / path
        if target.exists() or int(size) == 4096 and "." not in Path(path).name and "__" not in path:
            target.mkdir(parents=True, exist_ok=True) if not target.exists() else None
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "wb") as f:
            f.truncate(int(size))
    return root


@pytest.fixture(scope="module")
def verify_sh() -> str:
    return compile_text(SPEC.read_text(), "tests/e2e/stop-resume.yaml").files["verify.sh"]


def _verify(tmp: Path, verify_sh: str, root: Path) -> subprocess.CompletedProcess:
    script = tmp / "verify.sh"
    script.write_text(verify_sh)
    return subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["stop-ref", "stop-resume", "stop-damaged"])
def test_verify_passes_the_finished_runs(tmp_path, verify_sh, name):
    proc = _verify(tmp_path, verify_sh, _run_root(tmp_path, name))
    assert proc.returncode == 0, proc.stdout
    line = next(x for x in proc.stdout.splitlines() if "restarts continue from their save" in x)
    expected = {"stop-ref": "found no restart",
                "stop-resume": "found start 2: loaded 83, first iteration 84, loss 4.005871E-02 -> 3.388380E-02",
                "stop-damaged": "found start 2: loaded 50, first iteration 51, loss at 51 1.184975E-01 before, "
                                "1.184975E-01 now"}[name]
    assert line.endswith(expected), line


def test_verify_says_a_stopped_run_saved(tmp_path, verify_sh):
    """stop-notracker's exit record is the stopped run's (the restart refused before writing one)."""
    proc = _verify(tmp_path, verify_sh, _run_root(tmp_path, "stop-notracker"))
    assert proc.returncode == 1
    assert ("FAIL  torchrun exit status: expected 0, found 143: stopped by SIGTERM and saved at iteration 83: "
            "a restart continues from it") in proc.stdout


def test_verify_catches_a_restart_from_scratch(tmp_path, verify_sh):
    root = _run_root(tmp_path, "stop-resume")
    log = root / "train.log"
    text = log.read_text()
    # the restart's load line gone and its iterations renumbered from 1: a silent start from scratch
    text = text.replace("successfully loaded checkpoint from", "did not load from")
    head, sep, tail = text.partition("did not load from")
    tail = tail.replace(" iteration       84/", " iteration        1/", 1)
    log.write_text(head + sep + tail)
    proc = _verify(tmp_path, verify_sh, root)
    assert "FAIL  restarts continue from their save: expected each restart resumes where its save left off, " \
           "found start 2 loaded no save and began at iteration 1" in proc.stdout


def test_doctor_says_stopped_and_saved(tmp_path):
    from compiler.commands import doctor

    root = _run_root(tmp_path, "stop-notracker")
    full = (FIXTURE / "stop-resume" / "train.log").read_text()
    end = full.index("[exiting program after receiving SIGTERM.]")
    (root / "train.log").write_text(full[:full.index("\n", end) + 1])
    (root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("83")
    out, err = io.StringIO(), io.StringIO()
    code = doctor.main([str(SPEC), str(root)], out, err)
    assert code == 1
    text = out.getvalue()
    assert text.splitlines()[1].startswith("STOPPED, SAVED: 1 finding")
    assert "1. [stopped-saved] (worker 0) worker 0 was stopped by SIGTERM" in text
    assert "saved a checkpoint at iteration 83 on the way out" in text
    assert "killed-sigterm" not in text
