"""Shared test helpers: compiling specs in memory and running generated launch.sh under stubs."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import stat
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from compiler.one_pass import compile_spec
from compiler.load.source import load_text
from compiler.check.validate import check

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load_tool(name: str):
    """tools/NAME.py as a module (tools/ is no package; its scripts import each other by name)."""
    if str(REPO / "tools") not in sys.path:
        sys.path.insert(0, str(REPO / "tools"))
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

# The start of every stand-in training script run under torchrun (Slurm, the engine targets, the
# launcher): a gloo process group and one all-reduce whose sum shows every rank took part. Each test
# appends how its ranks end.
GLOO_ALL_REDUCE = '''
import os, sys
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
print(f"rank {rank} of world {world}: all_reduce sum {value.item():.0f}", flush=True)
'''


def gloo_tool_lines(tool: str, port: int, out: Path, *args: str) -> list[dict]:
    """tools/TOOL under torchrun with two CPU ranks on gloo (skipped without torch): the JSON lines it wrote to
    `out` (passed as --out)."""
    import json

    import pytest

    pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0 --extra-index-url "
                                        "https://download.pytorch.org/whl/cpu)")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
         str(REPO / "tools" / tool), "--backend", "gloo", *args, "--out", str(out)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in out.read_text().splitlines()]


def compile_text(text: str, name: str = "specs/test.yaml", tmp: Path | None = None):
    """Compile spec text written to a temporary file; returns the CompileResult."""
    import tempfile

    directory = Path(tmp or tempfile.mkdtemp())
    path = directory / Path(name).name
    path.write_text(text, encoding="utf-8")
    return compile_spec(str(path), name)


def resolved_text(stem: str) -> str:
    """specs/<stem>.yaml with its bases merged: a complete spec that stands alone in any directory.
    Its first lines are two header comments, so line N of the spec is line N + 2 here."""
    from compiler.commands.resolved import resolved_yaml

    result = compile_spec(str(SPECS / f"{stem}.yaml"), f"specs/{stem}.yaml")
    assert result.ok, result.diagnostics
    return resolved_yaml(result.spec, f"specs/{stem}.yaml")


def diagnostics_for(text: str, name: str = "specs/test.yaml"):
    """Load and validate spec text; returns the diagnostics."""
    doc, diags = load_text(name, text)
    if doc is None:
        return diags
    more = check(doc).diagnostics
    return diags + more


def write_exe(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + textwrap.dedent(body).lstrip("\n"))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@dataclass
class StubRun:
    returncode: int
    stdout: str
    stderr: str
    run_root: Path
    calls: Path

    def log_dir(self, node_rank: int | None = None) -> Path:
        return self.run_root if node_rank is None else self.run_root / "nodes" / f"node-{node_rank}"

    def torchrun_argv(self) -> list[str]:
        raw = (self.calls / "torchrun.argv").read_bytes().decode()
        return raw.split("\0")[:-1]


def make_stub_bin(directory: Path) -> Path:
    """Stubs for nvidia-smi, make, python and torchrun, driven by STUB_* variables."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    write_exe(bin_dir / "nvidia-smi", """
        for ((i = 0; i < ${STUB_GPUS:-0}; i++)); do echo "$i"; done
    """)
    write_exe(bin_dir / "make", """
        printf '%s\\0' "$@" > "$STUB_CALLS/make.argv"
    """)
    write_exe(bin_dir / "python", """
        echo "torch: 0.0-stub"
        echo "cuda: none"
        echo "gpu_count: ${STUB_GPUS:-0}"
    """)
    write_exe(bin_dir / "torchrun", """
        printf '%s\\0' "$@" > "$STUB_CALLS/torchrun.argv"
        env > "$STUB_CALLS/torchrun.env"
        pwd > "$STUB_CALLS/torchrun.cwd"
        for ((i = 0; i < 200; i++)); do echo "stub training line $i"; done
        echo "stub stderr line" >&2
        printf 'STUB-LAST-LINE'
        echo
        exit "${STUB_TORCHRUN_STATUS:-0}"
    """)
    return bin_dir


def localize_launch(script: str, run_root: Path, megatron_root: Path) -> str:
    """The generated launch.sh with its run root and Megatron root moved to temporary directories."""
    script, n1 = re.subn(r"^RUN_ROOT=.*$", f"RUN_ROOT='{run_root}'", script, count=1, flags=re.M)
    script, n2 = re.subn(r"^MEGATRON_ROOT=.*$", f"MEGATRON_ROOT='{megatron_root}'", script, count=1, flags=re.M)
    assert n1 == 1 and n2 == 1, "launch.sh no longer assigns RUN_ROOT and MEGATRON_ROOT on their own lines"
    return script


def run_launch(script_text: str, tmp: Path, *, gpus: int, status: int = 0, env: dict | None = None,
               localize: bool = True) -> StubRun:
    """Run a launch.sh text under bash with the stubs first on PATH."""
    bin_dir = make_stub_bin(tmp)
    calls = tmp / "calls"
    calls.mkdir(exist_ok=True)
    run_root = tmp / "mnt" / "run"
    megatron_root = tmp / "megatron"
    megatron_root.mkdir(exist_ok=True)
    if localize:
        script_text = localize_launch(script_text, run_root, megatron_root)
    script = tmp / "launch.sh"
    script.write_text(script_text)
    full_env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp), "STUB_GPUS": str(gpus),
        "STUB_TORCHRUN_STATUS": str(status), "STUB_CALLS": str(calls),
        "MEGATRON_COMMIT": "571370c829ca768fe37244f4e2e7f28d8accc4ab",
    }
    full_env.update(env or {})
    proc = subprocess.run(["bash", str(script)], cwd=tmp, env=full_env, capture_output=True, text=True, timeout=60)
    return StubRun(proc.returncode, proc.stdout, proc.stderr, run_root, calls)
