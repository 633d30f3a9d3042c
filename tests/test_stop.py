"""A stop that saves, run for real under bash: launch.sh (tests/e2e/stop-resume.yaml's) with a stub
torchrun whose worker behaves as Megatron's --exit-signal-handler does (finishes the iteration, saves,
exits 0), and the checks of the run's saves before torchrun (a damaged tracker, a save cut short)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import REPO, compile_text, localize_launch, make_stub_bin, write_exe

SPEC = (REPO / "tests" / "e2e" / "stop-resume.yaml").read_text()
SAVE_FILES = (".metadata", "metadata.json", "common.pt", "__0_0.distcp")

# A worker as Megatron's handler behaves: SIGTERM sets a flag; after the iteration in flight it saves
# iter_N (the files of a torch_dist save, metadata.json last), then the tracker, and exits 0. torchrun
# (bash here) starts it as a child in a session of its own, as torch's SubprocessHandler does.
WORKER = r"""
ckpt="$RUN_ROOT_FOR_STUB/ckpt"
stop=""
trap 'stop=1' TERM
i=${STUB_START:-0}
while [ "$i" -lt 200 ]; do
  i=$((i + 1))
  echo " iteration $i/ 200 | consumed samples: $((i * 16)) | learning rate: 1.0E-03 | lm loss: 5.0E+00 | grad norm: 1.000 |"
  sleep 0.05
  if [ -n "$stop" ]; then
    dir=$(printf '%s/iter_%07d' "$ckpt" "$i")
    mkdir -p "$dir"
    for f in common.pt __0_0.distcp .metadata metadata.json; do echo x >"$dir/$f"; done
    printf '%s' "$i" >"$ckpt/latest_checkpointed_iteration.txt"
    echo "exiting program after receiving SIGTERM."
    exit 0
  fi
done
"""


def _setup(tmp: Path, launch: str) -> tuple[Path, dict[str, str]]:
    bin_dir = make_stub_bin(tmp)
    write_exe(bin_dir / "worker", WORKER)
    write_exe(bin_dir / "torchrun", """
        printf '%s\\0' "$@" > "$STUB_CALLS/torchrun.argv"
        setsid worker &
        echo $! > "$STUB_CALLS/worker.pid"
        wait $!
    """)
    run_root, megatron = tmp / "mnt" / "run", tmp / "megatron"
    megatron.mkdir(exist_ok=True)
    (tmp / "calls").mkdir(exist_ok=True)
    script = tmp / "launch.sh"
    script.write_text(localize_launch(launch, run_root, megatron))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_GPUS": "1", "STUB_CALLS": str(tmp / "calls"),
           "MEGATRON_COMMIT": "571370c829ca768fe37244f4e2e7f28d8accc4ab", "HOME": str(tmp),
           "RUN_ROOT_FOR_STUB": str(run_root)}
    return run_root, env


@pytest.fixture(scope="module")
def launch() -> str:
    return compile_text(SPEC, "tests/e2e/stop-resume.yaml").files["launch.sh"]


def _save(root: Path, iteration: int, files=SAVE_FILES) -> Path:
    d = root / "ckpt" / f"iter_{iteration:07d}"
    d.mkdir(parents=True, exist_ok=True)
    for f in files:
        (d / f).write_text("x")
    return d


def _stopped(tmp: Path, launch: str, after: str = " iteration 5/") -> tuple[int, Path]:
    run_root, env = _setup(tmp, launch)
    proc = subprocess.Popen(["bash", str(tmp / "launch.sh")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    log = run_root / "train.log"
    for _ in range(400):
        if log.exists() and after in log.read_text():
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60), run_root


def test_a_stop_is_forwarded_to_the_workers_which_save_and_the_record_says_so(tmp_path, launch):
    status, run_root = _stopped(tmp_path, launch)
    assert status == 143
    saved = (run_root / "ckpt" / "latest_checkpointed_iteration.txt").read_text()
    record = (run_root / "exit_status").read_text().splitlines()
    assert record == ["143", "stopped: SIGTERM", f"saved_iteration: {saved}", "torchrun_status: 0"]
    log = (run_root / "train.log").read_text()
    assert log.rstrip().endswith("exiting program after receiving SIGTERM."), "train.log lost the save's lines"
    launch_log = (run_root / "launch.log").read_text()
    assert f"stopped by SIGTERM and saved at iteration {saved}" in launch_log


def test_a_stop_without_a_save_is_told_apart(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    # a torchrun whose worker dies on the signal (no handler yet: still starting)
    write_exe(tmp_path / "bin" / "torchrun", """
        echo " iteration 1/ 200 |"
        sleep 30 &
        wait $!
    """)
    proc = subprocess.Popen(["bash", str(tmp_path / "launch.sh")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    for _ in range(400):
        if (run_root / "train.log").exists() and "iteration 1/" in (run_root / "train.log").read_text():
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    record = (run_root / "exit_status").read_text().splitlines()
    assert record[:2] == ["143", "stopped: SIGTERM"] and not any(r.startswith("saved_iteration") for r in record)


def test_a_killed_launch_leaves_running_in_the_record(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    proc = subprocess.Popen(["bash", str(tmp_path / "launch.sh")], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    for _ in range(400):
        if (run_root / "train.log").exists() and "iteration 2/" in (run_root / "train.log").read_text():
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    os.kill(int((tmp_path / "calls" / "worker.pid").read_text()), signal.SIGKILL)  # its own session: not in the group
    assert (run_root / "exit_status").read_text() == "running\n"


@pytest.mark.parametrize("tracker", ["garbage\n", "", "12abc", "release", "50\ngarbage\n", "5 0", "-50", "0x32"])
def test_a_tracker_that_is_not_an_iteration_stops_the_launch_before_torchrun(tmp_path, launch, tracker):
    run_root, env = _setup(tmp_path, launch)
    _save(run_root, 50)
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text(tracker)
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "not an iteration" in proc.stderr and "the newest complete save is 50" in proc.stderr
    assert not (tmp_path / "calls" / "torchrun.argv").exists()


def test_saves_without_a_tracker_stop_the_launch(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    _save(run_root, 50)
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "would start from random weights" in proc.stderr and "(the newest complete save is 50)" in proc.stderr
    assert not (tmp_path / "calls" / "torchrun.argv").exists()


@pytest.mark.parametrize("kept", [(), ("common.pt",), ("common.pt", "__0_0.distcp"),
                                  ("common.pt", "__0_0.distcp", ".metadata"),
                                  (".metadata", "metadata.json", "common.pt")])
def test_a_save_cut_short_falls_back_to_the_newest_complete_one(tmp_path, launch, kept):
    run_root, env = _setup(tmp_path, launch)
    env["STUB_START"] = "50"
    _save(run_root, 50)
    _save(run_root, 73, kept)
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("73")
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "calls" / "torchrun.argv").read_text().split("\0")
    assert argv[-3:-1] == ["--ckpt-step", "50"]
    assert "the save of iteration 73 is incomplete" in (run_root / "launch.log").read_text()


def test_no_complete_save_refuses(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    _save(run_root, 73, ("common.pt",))
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("73")
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no earlier save is complete" in proc.stderr


@pytest.mark.parametrize("tracker", ["150", "150\n", " 150 \n", "0150"])
def test_a_tracker_megatron_reads_passes(tmp_path, launch, tracker):
    run_root, env = _setup(tmp_path, launch)
    env["STUB_START"] = "199"
    _save(run_root, 150)
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text(tracker)
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "resuming from the save of iteration 150" in (run_root / "launch.log").read_text()


def test_a_complete_tracker_save_passes_no_step(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    env["STUB_START"] = "150"
    _save(run_root, 150)
    _save(run_root, 160, ("common.pt",))  # newer than the tracker: a save cut short, which Megatron ignores
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("150\n")
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "--ckpt-step" not in (tmp_path / "calls" / "torchrun.argv").read_text().split("\0")
    assert (run_root / "exit_status").read_text() == "0\n"


def test_job_sbatch_forwards_the_stop_to_srun_and_requeues(tmp_path):
    """job.sbatch under bash with stub srun and scontrol: Slurm's SIGTERM to the batch shell
    (--signal=B:TERM@GRACE) reaches srun at once, and the stopped job requeues itself."""
    import re

    text = (REPO / "generated" / "gpt-7b-slurm" / "job.sbatch").read_text()
    text = re.sub(r"^RUN_ROOT=.*$", f"RUN_ROOT='{tmp_path / 'run'}'", text, count=1, flags=re.M)
    (tmp_path / "job.sbatch").write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    calls.mkdir()
    write_exe(bin_dir / "scontrol", """
        printf '%s\\n' "$*" >> "$STUB_CALLS/scontrol"
        [ "$1" = show ] && echo node0
        exit 0
    """)
    write_exe(bin_dir / "srun", """
        trap 'kill "$child"; echo "srun: got TERM" >> "$STUB_CALLS/srun"; exit 143' TERM
        sleep 30 >/dev/null 2>&1 &
        child=$!
        echo started >> "$STUB_CALLS/srun"
        wait "$child"
    """)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_CALLS": str(calls), "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "node[0-3]", "HOME": str(tmp_path)}
    proc = subprocess.Popen(["bash", str(tmp_path / "job.sbatch")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    for _ in range(200):
        if (calls / "srun").exists():
            break
        time.sleep(0.02)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert time.monotonic() - start < 10, "the trap waited for srun to end by itself"
    assert proc.returncode == 143
    assert (calls / "srun").read_text() == "started\nsrun: got TERM\n"
    assert (calls / "scontrol").read_text().splitlines()[-1] == "requeue 7"
    assert "job.sbatch: srun exited with status 143" in out


def _dcp_save(directory: Path) -> None:
    """A real torch.distributed.checkpoint save (the torch_dist format's .metadata and shard), plus
    the files Megatron writes beside them."""
    import torch
    import torch.distributed.checkpoint as dcp

    dcp.save({"weight": torch.arange(4000, dtype=torch.float32), "bias": torch.ones(7)}, checkpoint_id=str(directory))
    for name in ("common.pt", "metadata.json"):
        (directory / name).write_text("x")


def test_the_probe_measures_each_shard_against_metadata(tmp_path):
    pytest.importorskip("torch")
    import sys

    from compiler.megatron.checkpoint import SAVE_PROBE

    save = tmp_path / "iter_0000050"
    _dcp_save(save)
    probe = [sys.executable, "-", str(save)]
    ok = subprocess.run(probe, input=SAVE_PROBE, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    shard = next(save.glob("*.distcp"))
    size = shard.stat().st_size
    with open(shard, "r+b") as f:
        f.truncate(size // 2)
    cut = subprocess.run(probe, input=SAVE_PROBE, capture_output=True, text=True, timeout=120)
    assert cut.returncode == 1
    assert cut.stdout.strip() == f"{shard} holds {size // 2} bytes of the {size} its save wrote"
    (save / ".metadata").write_bytes(b"not a pickle")
    bad = subprocess.run(probe, input=SAVE_PROBE, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stdout.startswith(f"{save}/.metadata cannot be read")


def test_a_shard_cut_short_falls_back_with_the_real_probe(tmp_path, launch):
    pytest.importorskip("torch")
    import sys

    run_root, env = _setup(tmp_path, launch)
    env["STUB_START"] = "50"
    # python - DIR (the probe) is the real one; anything else the stub's runtime record
    write_exe(tmp_path / "bin" / "python", f"""
        if [ "${{1:-}}" = - ]; then exec {sys.executable} "$@"; fi
        echo "torch: 0.0-stub"; echo "cuda: none"; echo "gpu_count: ${{STUB_GPUS:-0}}"
    """)
    for iteration in (50, 73):
        _dcp_save(run_root / "ckpt" / f"iter_{iteration:07d}")
    shard = next((run_root / "ckpt" / "iter_0000073").glob("*.distcp"))
    with open(shard, "r+b") as f:
        f.truncate(100)
    (run_root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("73")
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "calls" / "torchrun.argv").read_text().split("\0")[-3:-1] == ["--ckpt-step", "50"]
    assert f"({shard} holds 100 bytes of the" in (run_root / "launch.log").read_text()


def test_megatron_stopping_on_its_own_time_limit_is_a_stop_that_saved(tmp_path, launch):
    """--exit-duration-in-mins: Megatron saves and exits 0 before the last iteration; the launch
    records a stop that saved and exits 143, so the engine restarts the job."""
    run_root, env = _setup(tmp_path, launch)
    write_exe(tmp_path / "bin" / "torchrun", """
        dir="$RUN_ROOT_FOR_STUB/ckpt/iter_0000042"
        mkdir -p "$dir"
        for f in common.pt __0_0.distcp .metadata metadata.json; do echo x >"$dir/$f"; done
        printf 42 >"$RUN_ROOT_FOR_STUB/ckpt/latest_checkpointed_iteration.txt"
        echo "exiting program after 54.0 minutes"
    """)
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143
    assert (run_root / "exit_status").read_text().splitlines() == [
        "143", "stopped: Megatron's exit condition (--exit-duration-in-mins or --exit-interval)",
        "saved_iteration: 42", "torchrun_status: 0"]


def test_a_finished_run_records_0(tmp_path, launch):
    run_root, env = _setup(tmp_path, launch)
    write_exe(tmp_path / "bin" / "torchrun", """
        dir="$RUN_ROOT_FOR_STUB/ckpt/iter_0000200"
        mkdir -p "$dir"
        printf 200 >"$RUN_ROOT_FOR_STUB/ckpt/latest_checkpointed_iteration.txt"
    """)
    proc = subprocess.run(["bash", str(tmp_path / "launch.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and (run_root / "exit_status").read_text() == "0\n"


@pytest.mark.parametrize("srun_status, requeued", [(143, True), (1, False), (0, False)])
def test_job_sbatch_requeues_a_launch_that_stopped_on_its_own(tmp_path, srun_status, requeued):
    import re

    text = (REPO / "generated" / "gpt-7b-slurm" / "job.sbatch").read_text()
    text = re.sub(r"^RUN_ROOT=.*$", f"RUN_ROOT='{tmp_path / 'run'}'", text, count=1, flags=re.M)
    (tmp_path / "job.sbatch").write_text(text)
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    calls.mkdir()
    write_exe(bin_dir / "scontrol", """
        printf '%s\\n' "$*" >> "$STUB_CALLS/scontrol"
        [ "$1" = show ] && echo node0
        exit 0
    """)
    write_exe(bin_dir / "srun", f"exit {srun_status}\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_CALLS": str(calls), "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "node0", "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(tmp_path / "job.sbatch")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == srun_status
    assert ("requeue 7" in (calls / "scontrol").read_text()) == requeued
