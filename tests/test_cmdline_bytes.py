"""Found by a fuzz campaign over the command line and the specs (issue 26's session, 41,000 cases): inputs that
gave a traceback. Each now gives a located diagnostic and exit 1. The command line runs in a child, its argv as
bytes, as a shell passes a byte that is not UTF-8 (Python keeps it as a lone surrogate)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from compiler.load.jsonfile import key_positions

REPO = Path(__file__).resolve().parent.parent
CLI = REPO / ".venv" / "bin" / "megatron-compile"
SPEC = REPO / "tests" / "e2e" / "mem-l4.yaml"


def run(*argv: str | bytes | Path, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    command: list[str | bytes] = [str(CLI)] if CLI.exists() else [sys.executable, "-m", "compiler"]
    args = [a if isinstance(a, bytes) else str(a) for a in argv]
    proc = subprocess.run([*command, *args], capture_output=True, text=True, errors="replace", timeout=120,
                          stdin=subprocess.DEVNULL, cwd=cwd, env=dict(os.environ, LC_ALL="C.UTF-8"))
    assert "Traceback" not in proc.stdout + (proc.stdout + proc.stderr), (proc.stdout + (proc.stdout + proc.stderr))[-3000:]
    return proc


def test_a_set_value_or_key_with_a_byte_that_is_not_utf8_is_a_set_error(tmp_path: Path) -> None:
    for raw in (b"training.train_iters=\xff", b"training.env.FOO=\xff", b"na\xffme=x"):
        proc = run(SPEC, "-o", tmp_path, "--set", raw)
        assert proc.returncode == 1
        (line,) = [x for x in (proc.stdout + proc.stderr).splitlines() if "[set-value]" in x]
        shown = raw.decode("utf-8", "backslashreplace")
        # located at the byte, on the --set as the user wrote it
        column = 7 + raw.index(b"\xff")
        assert line.startswith(f"--set {shown}:1:{column}: error: ")
        assert "not UTF-8" in line


def test_a_spec_path_with_a_byte_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    spec = os.fsencode(tmp_path) + b"/x\xff.yaml"
    Path(os.fsdecode(spec)).write_text(SPEC.read_text())
    out = tmp_path / "out"
    for argv in ((spec, "-o", out), (spec, "-o", out, "--check"), (tmp_path, "-o", out)):
        proc = run(*argv)
        assert proc.returncode == 1 and "[spec-path]" in (proc.stdout + proc.stderr) and "x\\xff.yaml" in (proc.stdout + proc.stderr)
    assert not out.exists() or not any(out.iterdir())


def test_import_reads_a_script_s_output_that_is_not_utf8(tmp_path: Path) -> None:
    script = tmp_path / "launch.sh"
    script.write_bytes(b'#!/bin/bash\nprintf "\\xff\\n"\ntorchrun --nproc_per_node=8 /opt/Megatron-LM/pretrain_gpt.py '
                       b'--num-layers 2\n')
    proc = run("import", script, "-o", tmp_path / "imported.yaml")
    assert proc.returncode in (0, 1)


def test_fp8_without_a_batch_and_a_hidden_size_below_the_heads_are_diagnostics(tmp_path: Path) -> None:
    text = SPEC.read_text()
    no_batch = tmp_path / "fp8.yaml"
    no_batch.write_text(text)
    proc = run(no_batch, "-o", tmp_path / "a", "--set", "training.precision=fp8", "--set", "training.batch=null")
    assert proc.returncode == 1 and "training.batch" in (proc.stdout + proc.stderr)
    tiny = tmp_path / "tiny.yaml"
    tiny.write_text(text.replace("    hidden_size: 1024\n", "    hidden_size: 1\n    swiglu: true\n"))
    for argv in ((tiny, "-o", tmp_path / "b"), ("size", tiny), (tiny, "--explain", "-o", tmp_path / "c")):
        proc = run(*argv)
        assert proc.returncode == 1
        both = proc.stdout + proc.stderr
        assert "[megatron-hidden-heads]" in both and "[megatron-ffn-size]" in both


def test_key_positions_of_a_large_table_are_each_key_s() -> None:
    # a config.json's id2label of many entries: each key's line found by bisection, each search from the last key
    table = {str(i): f"LABEL_{i}" for i in range(5000)}
    text = '{\n  "hidden_size": 64,\n  "id2label": {\n' + ",\n".join(f'    "{k}": "{v}"' for k, v in table.items()) \
        + '\n  }\n}\n'
    import json

    where = key_positions(text, json.loads(text))
    assert where["hidden_size"] == (2, 3) and where["id2label"] == (3, 3)
    assert where["id2label.0"] == (4, 5) and where["id2label.4999"] == (5003, 5)
