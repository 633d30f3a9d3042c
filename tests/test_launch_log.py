"""launch.log: what the generated launch.sh prints before torchrun also lands in the run root.

Run under bash with the stub nvidia-smi, make, python and torchrun of helpers.make_stub_bin.
"""

import os

from helpers import REPO, run_launch, write_exe

TP2 = (REPO / "generated" / "tp2" / "launch.sh").read_text()
TP2_DP2 = (REPO / "generated" / "tp2-dp2" / "launch.sh").read_text()
PLATFORM = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "10.0.0.1"}


def _first_on_path(override, tmp_path):
    """PATH with OVERRIDE's programs ahead of run_launch's stubs (which it writes to TMP/bin)."""
    return {"PATH": f"{override}:{tmp_path / 'bin'}:{os.environ['PATH']}"}


def test_a_good_launch_logs_its_steps_and_leaves_train_log_to_torchrun(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=2)
    assert run.returncode == 0, run.stderr
    log = (run.run_root / "launch.log").read_text().splitlines()
    assert log[0].startswith("launch.sh: started ")
    assert log[-2] == f"launch.sh: torchrun starts; its output is in {run.run_root}/train.log"
    assert log[-1] == "launch.sh: torchrun exited with status 0"
    train = (run.run_root / "train.log").read_text()
    assert "launch.sh:" not in train and train.count("stub training line") == 200
    assert "stub training line" not in "\n".join(log), "torchrun's output is train.log's, not launch.log's"


def test_the_gpu_check_leaves_its_reason_in_the_run_root(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=1)
    assert run.returncode == 1
    message = "launch.sh: the spec asks for 2 GPUs per worker, but nvidia-smi lists 1 on this worker"
    assert run.stderr.strip().splitlines()[-1] == message, "the console still shows it"
    assert (run.run_root / "launch.log").read_text().splitlines()[-1] == message
    assert not (run.run_root / "train.log").exists() and not (run.run_root / "exit_status").exists()


def test_a_failed_helper_build_logs_makes_output(tmp_path):
    override = tmp_path / "override"
    override.mkdir()
    write_exe(override / "make", """
        echo "make: Entering directory 'x'"
        echo "make: g++: No such file or directory" >&2
        echo "make: *** [Makefile:13: helpers_cpp.so] Error 127" >&2
        exit 2
    """)
    run = run_launch(TP2, tmp_path, gpus=2, env=_first_on_path(override, tmp_path))
    assert run.returncode == 1
    log = (run.run_root / "launch.log").read_text()
    assert "make: g++: No such file or directory\n" in log
    assert log.rstrip("\n").endswith("launch.sh: building Megatron's dataset helper failed: the image needs make, "
                                     "a C++ compiler, the Python headers and pybind11")
    assert "make: g++: No such file or directory" in run.stdout + run.stderr, "the console still shows it"


def test_a_failed_runtime_probe_logs_its_stderr_but_keeps_it_out_of_runtime_txt(tmp_path):
    override = tmp_path / "override"
    override.mkdir()
    write_exe(override / "python", """
        echo "torch: 0.0-stub"
        echo "ModuleNotFoundError: No module named 'megatron'" >&2
        exit 1
    """)
    run = run_launch(TP2, tmp_path, gpus=2, env=_first_on_path(override, tmp_path))
    assert run.returncode == 1
    log = (run.run_root / "launch.log").read_text()
    assert "ModuleNotFoundError: No module named 'megatron'\n" in log
    assert "launch.sh: the runtime probe (import torch, megatron.core) failed" in log
    assert (run.run_root / "runtime.txt").read_text() == "torch: 0.0-stub\n"
    assert "No module named 'megatron'" in run.stderr


def test_a_missing_commit_is_logged(tmp_path):
    run = run_launch(TP2, tmp_path, gpus=2, env={"MEGATRON_COMMIT": ""})
    assert run.returncode == 1
    assert "MEGATRON_COMMIT is required" in (run.run_root / "launch.log").read_text()


def test_a_second_launch_on_the_same_run_root_appends_its_refusal(tmp_path):
    first = run_launch(TP2, tmp_path, gpus=2)
    assert first.returncode == 0
    second = run_launch(TP2, tmp_path, gpus=2)
    assert second.returncode == 1
    log = (first.run_root / "launch.log").read_text()
    assert log.count("launch.sh: started ") == 2
    assert "launch.sh: torchrun exited with status 0" in log, "the first launch's lines are kept"
    assert log.rstrip("\n").endswith("to continue it")


def test_each_worker_logs_in_its_own_directory(tmp_path):
    run = run_launch(TP2_DP2, tmp_path, gpus=1, env=PLATFORM)
    assert run.returncode == 1
    log = (run.log_dir(1) / "launch.log").read_text()
    assert "as worker 1 of 2" in log.splitlines()[0]
    assert "but nvidia-smi lists 1 on this worker" in log


def test_the_platforms_worker_count_is_logged_once_the_rank_is_known(tmp_path):
    run = run_launch(TP2_DP2, tmp_path, gpus=2, env={**PLATFORM, "WORLD_SIZE": "3"})
    assert run.returncode == 1
    assert "the spec asks for 2 workers, but the platform started 3" in (run.log_dir(1) / "launch.log").read_text()
