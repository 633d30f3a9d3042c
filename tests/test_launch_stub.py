"""generated/*/launch.sh run under bash with stub nvidia-smi, make, python and torchrun."""

import pytest

from helpers import REPO, run_launch

TP2 = (REPO / "generated" / "tp2" / "launch.sh").read_text()
TP2_DP2 = (REPO / "generated" / "tp2-dp2" / "launch.sh").read_text()
PLATFORM = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "10.0.0.1"}


def test_single_worker_runs_on_the_right_gpu_count(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=2)
    assert run.returncode == 0, run.stderr
    log = (run.run_root / "train.log").read_text()
    assert log.rstrip("\n").endswith("STUB-LAST-LINE"), "train.log lost its last line"
    assert "stub stderr line" in log, "stderr must reach train.log too"
    assert log.count("stub training line") == 200
    # Megatron's files are named through MEGATRON_ROOT, which the harness moved to a temporary directory
    megatron = tmp_path / "megatron"
    assert run.torchrun_argv() == ["--nproc_per_node=2", f"{megatron}/examples/run_simple_mcore_train_loop.py"]
    assert (run.calls / "make.argv").read_bytes().split(b"\0")[:-1] == [b"-C", f"{megatron}/megatron/core/datasets".encode()]
    assert (run.calls / "torchrun.cwd").read_text().strip() == str(run.run_root)
    assert (run.run_root / "runtime.txt").read_text() == (
        "torch: 0.0-stub\ncuda: none\ngpu_count: 2\nmegatron_commit: 571370c829ca768fe37244f4e2e7f28d8accc4ab\n"
    )
    assert (run.run_root / "exit_status").read_text() == "0\n"


@pytest.mark.parametrize("gpus", [0, 1, 3])
def test_single_worker_refuses_the_wrong_gpu_count(tmp_path, gpus):
    run = run_launch(TP2, tmp_path, gpus=gpus)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"launch.sh: the spec asks for 2 GPUs per worker, but nvidia-smi lists {gpus} on this worker"
    )
    assert not (run.calls / "torchrun.argv").exists()


def test_exit_status_is_torchruns_own(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=2, status=3)
    assert run.returncode == 3
    assert (run.run_root / "train.log").read_text().rstrip("\n").endswith("STUB-LAST-LINE")
    assert (run.run_root / "exit_status").read_text() == "3\n"


def test_missing_megatron_commit_is_a_clear_error(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=2, env={"MEGATRON_COMMIT": ""})
    assert run.returncode != 0
    assert "MEGATRON_COMMIT is required" in run.stderr


def test_an_earlier_run_is_not_overwritten(tmp_path):
    first = run_launch(TP2, tmp_path, gpus=2)
    assert first.returncode == 0
    before = (first.run_root / "train.log").read_bytes()
    (tmp_path / "calls" / "torchrun.argv").unlink()
    second = run_launch(TP2, tmp_path, gpus=2)
    assert second.returncode == 1
    assert "train.log already exists: an earlier run used this run root" in second.stderr
    assert (first.run_root / "train.log").read_bytes() == before
    assert not (tmp_path / "calls" / "torchrun.argv").exists()


def test_multi_worker_passes_platform_values_to_torchrun(tmp_path):
    run = run_launch(TP2_DP2, tmp_path, gpus=2, env=PLATFORM)
    assert run.returncode == 0, run.stderr
    assert run.torchrun_argv() == [
        "--nproc_per_node=2", "--nnodes=2", "--node_rank=1", "--master_addr=10.0.0.1", "--master_port=29500",
        f"{tmp_path / 'megatron'}/examples/run_simple_mcore_train_loop.py",
    ]
    node = run.log_dir(1)
    assert (node / "train.log").read_text().rstrip("\n").endswith("STUB-LAST-LINE")
    assert (node / "runtime.txt").read_text().endswith("nnodes: 2\nnode_rank: 1\nmaster_addr: 10.0.0.1\n")
    assert (node / "exit_status").read_text() == "0\n"
    env = dict(line.split("=", 1) for line in (run.calls / "torchrun.env").read_text().splitlines() if "=" in line)
    assert "WORLD_SIZE" not in env and "RANK" not in env, "the platform's WORLD_SIZE/RANK must not reach torchrun"


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0", "MASTER_ADDR": "h"}, "AIStudio WORLD_SIZE is required"),
    ({"WORLD_SIZE": "2", "MASTER_ADDR": "h"}, "AIStudio RANK is required"),
    ({"WORLD_SIZE": "2", "RANK": "0"}, "AIStudio MASTER_ADDR is required"),
    ({"WORLD_SIZE": "3", "RANK": "0", "MASTER_ADDR": "h"},
     "launch.sh: the spec asks for 2 workers, but the platform started 3 (WORLD_SIZE)"),
    ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_ADDR": "h"}, "launch.sh: RANK 2 is not below the worker count 2"),
    ({"WORLD_SIZE": "2", "RANK": "x", "MASTER_ADDR": "h"}, "launch.sh: RANK must be this worker's index, got 'x'"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "p"},
     "launch.sh: MASTER_PORT must be a port number, got 'p'"),
])
def test_multi_worker_checks_the_platform_values(tmp_path, env, message):
    run = run_launch(TP2_DP2, tmp_path, gpus=2, env=env)
    assert run.returncode != 0
    assert message in run.stderr
    assert not (run.calls / "torchrun.argv").exists()


def test_multi_worker_refuses_the_wrong_gpu_count(tmp_path):
    run = run_launch(TP2_DP2, tmp_path, gpus=1, env=PLATFORM)
    assert run.returncode == 1
    assert "the spec asks for 2 GPUs per worker, but nvidia-smi lists 1 on this worker" in run.stderr


def test_multi_worker_exit_status_propagates(tmp_path):
    run = run_launch(TP2_DP2, tmp_path, gpus=2, status=7, env=PLATFORM)
    assert run.returncode == 7
    assert (run.log_dir(1) / "exit_status").read_text() == "7\n"


def test_a_terminated_launch_still_records_an_exit_status(tmp_path):
    """SIGTERM to the launch command (a job being stopped): the trap records 143 for verify.sh."""
    import os
    import signal
    import subprocess
    import time

    from helpers import localize_launch, make_stub_bin, write_exe

    bin_dir = make_stub_bin(tmp_path)
    write_exe(bin_dir / "torchrun", """
        echo "training"
        sleep 2
        echo "STUB-LAST-LINE"
    """)
    run_root, megatron = tmp_path / "mnt" / "run", tmp_path / "megatron"
    megatron.mkdir()
    script = tmp_path / "launch.sh"
    script.write_text(localize_launch(TP2, run_root, megatron))
    (tmp_path / "calls").mkdir()
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_GPUS": "2", "STUB_CALLS": str(tmp_path / "calls"),
           "MEGATRON_COMMIT": "571370c829ca768fe37244f4e2e7f28d8accc4ab", "HOME": str(tmp_path)}
    proc = subprocess.Popen(["bash", str(script)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if (run_root / "train.log").exists() and "training" in (run_root / "train.log").read_text():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    # launch.sh passed SIGTERM to torchrun's child (the stub's sleep) and waited for torchrun, which
    # finished its output: the record says the launch was stopped, and how torchrun ended
    assert (run_root / "exit_status").read_text() == "143\nstopped: SIGTERM\ntorchrun_status: 0\n"
    assert (run_root / "train.log").read_text().rstrip().endswith("STUB-LAST-LINE")
