"""verify.sh against run roots built from real runs (tests/fixtures), intact and broken check by check."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import FIXTURES, REPO, resolved_text

COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
TP2 = FIXTURES / "h200-tp2-run"
PRETRAIN = FIXTURES / "h200-pretrain-tp1-run"


def verify(stem, run_root, *extra):
    proc = subprocess.run(["bash", str(REPO / "generated" / stem / "verify.sh"), *extra, str(run_root)],
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def _ckpt_from_listing(directory: Path, listing: Path):
    directory.mkdir(parents=True, exist_ok=True)
    for line in listing.read_text().splitlines():
        name, size = line.rsplit(" ", 1)
        (directory / name).write_bytes(b"\0" * int(size))


def tp2_run(root: Path) -> Path:
    """The seed's single-worker run, as the real one left it, plus launch.sh's exit record."""
    root.mkdir(parents=True)
    shutil.copy(TP2 / "train.log", root / "train.log")
    shutil.copy(TP2 / "runtime.txt", root / "runtime.txt")
    (root / "exit_status").write_text("0\n")
    _ckpt_from_listing(root / "ckpt", TP2 / "ckpt_files.txt")
    return root


def tp2_dp2_run(root: Path) -> Path:
    """Two workers, each with the real 2-rank log and runtime record, one shared checkpoint."""
    for node in (0, 1):
        d = root / "nodes" / f"node-{node}"
        d.mkdir(parents=True)
        shutil.copy(TP2 / "train.log", d / "train.log")
        (d / "runtime.txt").write_text((TP2 / "runtime.txt").read_text() + f"nnodes: 2\nnode_rank: {node}\n")
        (d / "exit_status").write_text("0\n")
    _ckpt_from_listing(root / "ckpt", TP2 / "ckpt_files.txt")
    return root


def pretrain_run(root: Path) -> Path:
    """The real pretrain_gpt.py run: its log, and the checkpoint files its README lists."""
    root.mkdir(parents=True)
    shutil.copy(PRETRAIN / "train.log", root / "train.log")
    (root / "runtime.txt").write_text(f"torch: 2.11.0+cu130\ncuda: 13.0\ngpu_count: 1\nmegatron_commit: {COMMIT}\n")
    (root / "exit_status").write_text("0\n")
    (root / "ckpt").mkdir()
    (root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("20")
    iteration = root / "ckpt" / "iter_0000020"
    iteration.mkdir()
    for name in (".metadata", "metadata.json", "common.pt", "__0_0.distcp"):
        (iteration / name).write_bytes(b"x" * 64)
    return root


TP2_PASS = """\
ok    torchrun exit status: expected 0, found 0
ok    runtime gpu_count: expected 2, found 2
ok    runtime megatron_commit: expected {c}, found {c}
ok    iterations 0-4 on every rank: expected 0:2 1:2 2:2 3:2 4:2, found 0:2 1:2 2:2 3:2 4:2
ok    'Successfully loaded the model' on every rank: expected 2 lines, found 2 lines
ok    checkpoint ckpt/.metadata: expected a file, found {r}/ckpt/.metadata
ok    checkpoint ckpt/metadata.json: expected a file, found {r}/ckpt/metadata.json
ok    checkpoint ckpt/common.pt: expected a file, found {r}/ckpt/common.pt
ok    checkpoint shard of rank 0: expected a file, found {r}/ckpt/__0_0.distcp
ok    checkpoint shard of rank 1: expected a file, found {r}/ckpt/__1_0.distcp
10 of 10 checks passed for {r}
"""


def test_the_real_tp2_run_passes(tmp_path):
    root = tp2_run(tmp_path / "run")
    code, out, _ = verify("tp2", root)
    assert code == 0
    assert out == TP2_PASS.format(c=COMMIT, r=root)


def test_json_output(tmp_path):
    root = tp2_run(tmp_path / "run")
    code, out, _ = verify("tp2", root, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["passed"] is True and data["run_root"] == str(root)
    assert len(data["checks"]) == 10
    assert data["checks"][0] == {"check": "torchrun exit status", "status": "pass", "expected": "0", "found": "0"}
    (root / "exit_status").write_text("1\n")
    code, out, _ = verify("tp2", root, "--json")
    assert code == 1 and json.loads(out)["passed"] is False


def _break_and_verify(tmp_path, breaker, stem="tp2", build=tp2_run):
    root = build(tmp_path / "run")
    breaker(root)
    code, out, _ = verify(stem, root)
    failures = [line for line in out.splitlines() if line.startswith("FAIL")]
    return code, failures, root


def test_missing_shard(tmp_path):
    code, failures, root = _break_and_verify(tmp_path, lambda r: (r / "ckpt" / "__1_0.distcp").unlink())
    assert code == 1
    assert failures == [f"FAIL  checkpoint shard of rank 1: expected a file, found nothing at {root}/ckpt/__1_0.distcp"]


def test_truncated_log(tmp_path):
    def truncate(root):
        lines = (root / "train.log").read_text().splitlines(keepends=True)
        cut = next(i for i, line in enumerate(lines) if line.startswith("Iteration 4:")) + 1
        (root / "train.log").write_text("".join(lines[:cut]))

    code, failures, _ = _break_and_verify(tmp_path, truncate)
    assert code == 1
    assert failures == [
        "FAIL  iterations 0-4 on every rank: expected 0:2 1:2 2:2 3:2 4:2, found 0:2 1:2 2:2 3:2 4:1",
        "FAIL  'Successfully loaded the model' on every rank: expected 2 lines, found 0 lines",
    ]


def test_wrong_commit(tmp_path):
    def wrong(root):
        text = (root / "runtime.txt").read_text().replace(COMMIT, "0" * 40)
        (root / "runtime.txt").write_text(text)

    code, failures, _ = _break_and_verify(tmp_path, wrong)
    assert code == 1
    assert failures == [f"FAIL  runtime megatron_commit: expected {COMMIT}, found {'0' * 40}"]


def test_wrong_gpu_count(tmp_path):
    code, failures, _ = _break_and_verify(
        tmp_path, lambda r: (r / "runtime.txt").write_text((r / "runtime.txt").read_text().replace("gpu_count: 2", "gpu_count: 1")))
    assert failures == ["FAIL  runtime gpu_count: expected 2, found 1"]


def test_nonzero_exit_record(tmp_path):
    code, failures, _ = _break_and_verify(tmp_path, lambda r: (r / "exit_status").write_text("143\n"))
    assert code == 1
    assert failures == ["FAIL  torchrun exit status: expected 0, found 143"]


def test_missing_exit_record(tmp_path):
    code, failures, root = _break_and_verify(tmp_path, lambda r: (r / "exit_status").unlink())
    assert failures == [f"FAIL  torchrun exit status: expected 0, found no record ({root}/exit_status)"]


def test_multi_worker_run_passes(tmp_path):
    root = tp2_dp2_run(tmp_path / "run")
    code, out, _ = verify("tp2-dp2", root)
    assert code == 0, out
    assert out.splitlines()[-1] == f"19 of 19 checks passed for {root}"
    assert "ok    runtime node_rank (worker 1): expected 1, found 1" in out


def test_multi_worker_missing_worker(tmp_path):
    code, failures, root = _break_and_verify(
        tmp_path, lambda r: shutil.rmtree(r / "nodes" / "node-1"), stem="tp2-dp2", build=tp2_dp2_run)
    assert code == 1
    d = f"{root}/nodes/node-1"
    assert failures == [
        f"FAIL  torchrun exit status (worker 1): expected 0, found no record ({d}/exit_status)",
        f"FAIL  runtime gpu_count (worker 1): expected 2, found no file {d}/runtime.txt",
        f"FAIL  runtime megatron_commit (worker 1): expected {COMMIT}, found no file {d}/runtime.txt",
        f"FAIL  runtime node_rank (worker 1): expected 1, found no file {d}/runtime.txt",
        f"FAIL  runtime nnodes (worker 1): expected 2, found no file {d}/runtime.txt",
        f"FAIL  iterations 0-4 on every rank (worker 1): expected iterations 0-4 x 2, found no file {d}/train.log",
        f"FAIL  'Successfully loaded the model' on every rank (worker 1): expected 2 lines, found no file {d}/train.log",
    ]


def test_multi_worker_same_node_rank_twice(tmp_path):
    def same_rank(root):
        path = root / "nodes" / "node-1" / "runtime.txt"
        path.write_text(path.read_text().replace("node_rank: 1", "node_rank: 0"))

    code, failures, _ = _break_and_verify(tmp_path, same_rank, stem="tp2-dp2", build=tp2_dp2_run)
    assert failures == ["FAIL  runtime node_rank (worker 1): expected 1, found 0"]


PRETRAIN_PASS = """\
ok    torchrun exit status: expected 0, found 0
ok    runtime gpu_count: expected 1, found 1
ok    runtime megatron_commit: expected {c}, found {c}
ok    Megatron argument world_size: expected 1, found 1
ok    Megatron argument tensor_model_parallel_size: expected 1, found 1
ok    Megatron argument pipeline_model_parallel_size: expected 1, found 1
ok    Megatron argument context_parallel_size: expected 1, found 1
ok    Megatron argument expert_model_parallel_size: expected 1, found 1
ok    Megatron argument data_parallel_size: expected 1, found 1
ok    last logged iteration: expected 20, found 20
ok    restarts continue from their save: expected each restart resumes where its save left off, found no restart
ok    no skipped or NaN iterations: expected 0 bad intervals, found 0 bad intervals
ok    latest checkpointed iteration: expected 20, found 20
ok    checkpoint ckpt/iter_0000020/.metadata: expected a file, found {r}/ckpt/iter_0000020/.metadata
ok    checkpoint ckpt/iter_0000020/metadata.json: expected a file, found {r}/ckpt/iter_0000020/metadata.json
ok    checkpoint ckpt/iter_0000020/common.pt: expected a file, found {r}/ckpt/iter_0000020/common.pt
ok    checkpoint shard of rank 0: expected a file, found {r}/ckpt/iter_0000020/__0_0.distcp
17 of 17 checks passed for {r}
"""


def test_the_real_pretrain_run_passes(tmp_path):
    root = pretrain_run(tmp_path / "run")
    code, out, _ = verify("pretrain-mock", root)
    assert code == 0, out
    assert out == PRETRAIN_PASS.format(c=COMMIT, r=root)


@pytest.mark.parametrize("breaker, failure", [
    (lambda r: _edit(r / "train.log", "iteration       20/      20", "iteration       15/      20", last=True),
     "FAIL  last logged iteration: expected 20, found 15"),
    (lambda r: _edit(r / "train.log", "number of nan iterations:   0 |", "number of nan iterations:   2 |", last=True),
     "FAIL  no skipped or NaN iterations: expected 0 bad intervals, found 1 bad intervals"),
    (lambda r: _edit(r / "train.log", "  tensor_model_parallel_size ...................... 1",
                     "  tensor_model_parallel_size ...................... 2"),
     "FAIL  Megatron argument tensor_model_parallel_size: expected 1, found 2"),
    (lambda r: (r / "ckpt" / "latest_checkpointed_iteration.txt").write_text("10"),
     "FAIL  latest checkpointed iteration: expected 20, found 10"),
])
def test_broken_pretrain_runs(tmp_path, breaker, failure):
    code, failures, _ = _break_and_verify(tmp_path, breaker, stem="pretrain-mock", build=pretrain_run)
    assert code == 1
    assert failures == [failure]


def _edit(path, old, new, last=False):
    text = path.read_text()
    assert old in text
    index = text.rindex(old) if last else text.index(old)
    path.write_text(text[:index] + new + text[index + len(old):])


def test_usage():
    code, _, err = verify("tp2", "a", "b")
    assert code == 2 and "usage: verify.sh [--json] [RUN_ROOT]" in err


# --- pretrain_gpt.py on 2 workers × 1 GPU (DP=2 across them), from a real run ----------------------

TWO_WORKERS = FIXTURES / "h200-pretrain-2workers-run"


def _e2e_verify(tmp_path: Path, stem: str) -> Path:
    """tests/e2e/<stem>.yaml's verify.sh, compiled now (.e2e/ is not committed)."""
    from compiler.one_pass import compile_spec

    result = compile_spec(str(REPO / "tests" / "e2e" / f"{stem}.yaml"), f"tests/e2e/{stem}.yaml")
    assert result.ok, result.diagnostics
    script = tmp_path / f"{stem}-verify.sh"
    script.write_text(result.files["verify.sh"])
    return script


def pretrain_2workers_run(root: Path) -> Path:
    """The real run: each worker's log as its train.log, its runtime record, one shared checkpoint."""
    for node in (0, 1):
        d = root / "nodes" / f"node-{node}"
        d.mkdir(parents=True)
        shutil.copy(TWO_WORKERS / f"node-{node}.log", d / "train.log")
        (d / "runtime.txt").write_text(f"torch: 2.11.0+cu130\ncuda: 13.0\ngpu_count: 1\nmegatron_commit: {COMMIT}\n"
                                       f"nnodes: 2\nnode_rank: {node}\n")
        (d / "exit_status").write_text("0\n")
    (root / "ckpt").mkdir()
    (root / "ckpt" / "latest_checkpointed_iteration.txt").write_text("20")
    iteration = root / "ckpt" / "iter_0000020"
    iteration.mkdir()
    for name in (TWO_WORKERS / "ckpt_files.txt").read_text().split():
        (iteration / name).write_bytes(b"x" * 64)
    return root


def test_the_real_two_worker_pretrain_run_passes(tmp_path):
    script = _e2e_verify(tmp_path, "pretrain-mock-2workers")
    root = pretrain_2workers_run(tmp_path / "run")
    proc = subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"25 of 25 checks passed for {root}" in proc.stdout  # the real run: 23, before rank 1's shard and the restarts were checked
    assert "ok    Megatron argument data_parallel_size: expected 2, found 2" in proc.stdout
    # Megatron logs iterations on the last rank only: they are in worker 1's log, and verify.sh says so
    assert not re.search(r" iteration +\d+/", (TWO_WORKERS / "node-0.log").read_text())
    assert "ok    last logged iteration (worker 1, the last rank's): expected 20, found 20" in proc.stdout
    assert "ok    no skipped or NaN iterations (worker 1, the last rank's)" in proc.stdout


def test_every_data_parallel_ranks_shard_is_required_with_fully_parallel_save(tmp_path):
    script = _e2e_verify(tmp_path, "pretrain-mock-2workers")
    root = pretrain_2workers_run(tmp_path / "run")
    (root / "ckpt" / "iter_0000020" / "__1_0.distcp").unlink()
    proc = subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert (f"FAIL  checkpoint shard of rank 1: expected a file, found nothing at "
            f"{root}/ckpt/iter_0000020/__1_0.distcp") in proc.stdout.splitlines()


def _shard_labels(result) -> list[str]:
    return [c.args[0].parts[0] for c in result.plan.verify.checks if c.function == "check_file"]


def test_without_fully_parallel_save_only_replica_zero_writes(tmp_path):
    from helpers import compile_text

    text = (REPO / "tests" / "e2e" / "pretrain-mock-2workers.yaml").read_text()
    text = text.replace("extends: ../../specs/pretrain-mock.yaml", f"extends: {REPO / 'specs' / 'pretrain-mock.yaml'}")
    on = compile_text(text, tmp=tmp_path)
    off = compile_text(text + "training:\n  args: [--no-ckpt-fully-parallel-save]\n", tmp=tmp_path)
    assert on.ok and off.ok, off.diagnostics
    assert [x for x in _shard_labels(on) if "shard" in x] == ["checkpoint shard of rank 0", "checkpoint shard of rank 1"]
    assert [x for x in _shard_labels(off) if "shard" in x] == ["checkpoint shard of rank 0"]


def test_a_legacy_torch_checkpoint_is_one_file_per_model_parallel_rank(tmp_path):
    from helpers import compile_text

    text = resolved_text("pretrain-mock").replace("format: torch_dist", "format: torch")
    text = text.replace("gpus_per_worker: 1", "gpus_per_worker: 4").replace("tensor: 1", "tensor: 2")
    text = text.replace("pipeline: 1", "pipeline: 2")
    result = compile_text(text, tmp=tmp_path)
    assert result.ok, result.diagnostics
    assert _shard_labels(result) == [f"checkpoint ckpt/iter_0000020/mp_rank_{tp:02d}_{pp:03d}/model_optim_rng.pt"
                                     for tp in (0, 1) for pp in (0, 1)]


# --- fp16: the loss scaler's skipped iterations ----------------------------------------------------

def _skips(root: Path, counts: dict[int, tuple[int, int]]) -> None:
    """Set the skipped and NaN counts of the iteration lines of the real pretrain run's log."""
    log = root / "train.log"
    lines = log.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        found = re.search(r" iteration +(\d+)/", line)
        if found and int(found.group(1)) in counts and "number of skipped iterations" in line:
            skipped, nan = counts[int(found.group(1))]
            line = re.sub(r"number of skipped iterations: +\d+", f"number of skipped iterations: {skipped:3d}", line)
            lines[i] = re.sub(r"number of nan iterations: +\d+", f"number of nan iterations: {nan:3d}", line)
    log.write_text("".join(lines))


@pytest.mark.parametrize("precision, counts, failure", [
    # the scaler's search: iteration 1 and half of 2-5 skipped, then steps: healthy under fp16
    ("fp16", {1: (1, 0), 5: (2, 0)}, None),
    ("fp16", {1: (1, 0), 5: (4, 0), 10: (5, 0), 15: (5, 0), 20: (5, 0)},
     "FAIL  no NaN iterations, a step taken: expected a step taken, found every logged iteration was skipped by "
     "the fp16 loss scaler"),
    ("fp16", {10: (0, 1)}, "FAIL  no NaN iterations, a step taken: expected 0 bad intervals, found 1 bad intervals"),
    # without a loss scaler a skipped iteration is a failure
    ("bf16", {1: (1, 0)}, "FAIL  no skipped or NaN iterations: expected 0 bad intervals, found 1 bad intervals"),
])
def test_skipped_iterations_fail_only_where_no_loss_scaler_explains_them(tmp_path, precision, counts, failure):
    from compiler.load.override import Override
    from compiler.one_pass import compile_spec

    result = compile_spec(str(REPO / "specs" / "pretrain-mock.yaml"), "specs/pretrain-mock.yaml",
                          overrides=(Override(f"training.precision={precision}"),))
    assert result.ok and result.files is not None, result.diagnostics
    script = tmp_path / "verify.sh"
    script.write_text(result.files["verify.sh"])
    root = pretrain_run(tmp_path / "run")
    _skips(root, counts)
    proc = subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True)
    failures = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert failures == ([] if failure is None else [failure]), proc.stdout
    assert proc.returncode == (0 if failure is None else 1)


# -- a large job (issue 29, item 12): the same checks, looped at run time, in a small file ---------


def _large(tmp_path, workers=1024, gpus=16):
    """specs/pretrain-mock.yaml (a small GPT, pretrain_gpt.py) on `workers` x `gpus` GPUs."""
    from compiler.load.override import Override
    from compiler.one_pass import compile_spec

    sets = (f"resources.workers={workers}", f"resources.gpus_per_worker={gpus}",
            f"training.batch.global={4 * workers * gpus}")
    result = compile_spec(str(REPO / "specs" / "pretrain-mock.yaml"), "specs/pretrain-mock.yaml",
                          overrides=tuple(Override(s) for s in sets))
    assert result.ok, result.diagnostics
    return result


def test_a_1024_by_16_job_has_a_small_verify_sh_and_plan_md(tmp_path):
    result = _large(tmp_path)
    assert len(result.files["verify.sh"]) < 30_000 and len(result.files["plan.md"]) < 30_000
    assert "check_workers workers 0 1023" in result.files["verify.sh"]


def test_the_looped_worker_checks_report_each_worker(tmp_path):
    result = _large(tmp_path, workers=12, gpus=1)
    script = tmp_path / "verify.sh"
    script.write_text(result.files["verify.sh"])
    root = tmp_path / "run"
    commit = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
    for w in range(12):
        node = root / "nodes" / f"node-{w}"
        node.mkdir(parents=True)
        (node / "exit_status").write_text("0\n" if w != 7 else "1\n")
        rank = w if w != 3 else 4
        (node / "runtime.txt").write_text(f"gpu_count: 1\nmegatron_commit: {commit}\nnode_rank: {rank}\nnnodes: 12\n")
    proc = subprocess.run(["bash", str(script), str(root)], capture_output=True, text=True, timeout=120)
    assert "FAIL  torchrun exit status (worker 7): expected 0, found 1" in proc.stdout
    assert "FAIL  runtime node_rank (worker 3): expected 3, found 4" in proc.stdout
    assert "ok    runtime nnodes (worker 11): expected 12, found 12" in proc.stdout
    assert proc.returncode != 0


def test_the_looped_shard_check_counts_the_missing(tmp_path):
    result = _large(tmp_path, workers=16, gpus=8)
    line = next(l for l in result.files["verify.sh"].splitlines() if l.startswith("check_shards '"))
    script = tmp_path / "shards.sh"
    functions = result.files["verify.sh"][: result.files["verify.sh"].index("\ncheck_workers workers")]
    directory = line.split('"$RUN_ROOT/', 1)[1].split('/__"', 1)[0]  # ckpt/iter_N
    ckpt = tmp_path / "run" / directory
    ckpt.mkdir(parents=True)
    for rank in range(128):
        if rank not in (5, 77):
            (ckpt / f"__{rank}_0.distcp").write_text("x")
    script.write_text(functions + "\n" + line + "\n")
    proc = subprocess.run(["bash", str(script), str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert "2 missing, e.g." in proc.stdout and "__5_0.distcp" in proc.stdout, proc.stdout + proc.stderr
