"""tools/fakepg.py plan: a rank runs the compiled launch's arguments and its environment."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
E2E = REPO / "tests" / "e2e"


def _fakepg():
    spec = importlib.util.spec_from_file_location("fakepg", REPO / "tools" / "fakepg.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _compile(tmp: Path, name: str) -> Path:
    gen = tmp / "gen"
    cmd = [sys.executable, "-m", "compiler", str(E2E / f"{name}.yaml"), "-o", str(gen), "-q",
           "--set", "image.base=docker.io/library/python:3.11"]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    return gen


def test_a_local_experts_rank_carries_the_launchs_cublaslt_cache(tmp_path: Path) -> None:
    fakepg = _fakepg()
    gen = _compile(tmp_path, "fpg-moe-e16-f1024-mb16-soak")
    (entry,) = fakepg.plan(gen, specs=E2E)
    assert entry["launch_env"] == {"CUBLASLT_HEURISTICS_CACHE_CAPACITY": "1048576"}
    env = fakepg.rank_env(entry, 0, {"PATH": "/bin"})
    assert env["CUBLASLT_HEURISTICS_CACHE_CAPACITY"] == "1048576" and env["FAKEPG_ENV"] == "[]"
    # an entry's own variable wins: a run of the default cache is an entry that says so
    env = fakepg.rank_env({**entry, "env": {"CUBLASLT_HEURISTICS_CACHE_CAPACITY": "8192"}}, 0, {})
    assert env["CUBLASLT_HEURISTICS_CACHE_CAPACITY"] == "8192"
    assert env["FAKEPG_ENV"] == '["CUBLASLT_HEURISTICS_CACHE_CAPACITY"]'


def test_exports_are_read_as_the_shell_reads_them() -> None:
    fakepg = _fakepg()
    launch = "x=1\nexport A=1048576\nexport B='two words'\nexport MASTER_ADDR MASTER_PORT\n  export C=indented\n"
    assert fakepg.launch_env(launch) == {"A": "1048576", "B": "two words"}


def test_an_older_plan_without_launch_env_runs_as_before() -> None:
    env = _fakepg().rank_env({"name": "x", "stage": "first", "rank": 0, "world": 2, "args": []}, 3, {})
    assert env["MASTER_PORT"] == "31003" and env["FAKEPG_LAUNCH_ENV"] == "[]" and "CUBLASLT_HEURISTICS_CACHE_CAPACITY" not in env


def test_a_dense_rank_carries_nothing_the_launch_does_not_export(tmp_path: Path) -> None:
    fakepg = _fakepg()
    gen = _compile(tmp_path, "fam-qwen3-06b")
    (entry,) = fakepg.plan(gen, specs=E2E)
    assert entry["launch_env"] == {} and "export " not in (gen / "fam-qwen3-06b" / "launch.sh").read_text()
