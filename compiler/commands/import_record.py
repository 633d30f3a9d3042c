"""`megatron-compile import`, part one: run the launch script under bash against recording stubs.

Approach: bash itself runs the script, in a throw-away directory with a clean environment, against
recording stubs: `torchrun` (and `python -m torch.distributed.run|launch`, `python …pretrain_gpt.py`)
writes its argv and exits; commands with side effects (mkdir, rm, cp, pip, git, …) do nothing; commands
whose output differs per machine or per run (date, hostname, nvidia-smi, …) print a marker, so a
value computed at run time is recognised in the recorded argv. The script runs under `bash -u`: an
unset variable stops it, is reported, and is set empty for the next attempt (what bash gives it). So
arrays, line continuations, `${VAR:-default}`, functions and positional parameters expand exactly as
bash expands them. Slurm (`srun`, `sbatch`) is not followed: `which srun` finds nothing, so a script
that picks Slurm when it is there takes its interactive branch, and one that only submits to Slurm is
refused with what to do. Limits: the script runs for real apart from the stubs (only run scripts you
trust; the environment is empty, the working directory temporary); a launcher started more than once
is imported from its first call; branches taken on the machine's state see the stubs' answers.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..schema.defaults import MEGATRON_ROOT

MARKER = re.compile(r"@(unset|runtime):([A-Za-z0-9_.-]+)@")
NOOP_COMMANDS = ("mkdir", "rm", "cp", "mv", "ln", "touch", "chmod", "chown", "pip", "pip3", "git", "wget", "curl",
                 "apt-get", "conda", "module", "sleep", "tee", "sudo", "export_env", "scontrol")
# Commands that run another command (uv run python …, nsys profile … torchrun …): the stub runs it
# from the first word that is a launcher, and does nothing when there is none.
WRAPPER_COMMANDS = ("uv", "nsys", "numactl", "taskset", "nohup", "stdbuf", "ncu")
RUNTIME_COMMANDS = ("date", "hostname", "nvidia-smi", "nproc", "whoami", "uuidgen", "shuf")
TORCHRUN_VALUE_OPTIONS = {
    "nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "rdzv_id", "rdzv_backend",
    "rdzv_endpoint", "rdzv_conf", "max_restarts", "monitor_interval", "start_method", "role", "log_dir",
    "redirects", "tee", "local_addr", "logs_specs", "local_ranks_filter",
}
SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_", "BASH_ENV"}
# The top-level entry points of Megatron-LM at the pinned commit (`git ls-tree 571370c8`): the import
# runs a script in a directory holding placeholders of them, as if in Megatron-LM's root.
ENTRY_POINTS = ("gpt_builders.py", "hybrid_builders.py", "mamba_builders.py", "model_provider.py", "pretrain_gpt.py",
                "pretrain_hybrid.py", "pretrain_mamba.py", "pretrain_vlm.py", "setup.py", "train_rl.py")
TOP_DIRECTORIES = ("docker", "docs", "examples", "images", "megatron", "scripts", "tasks", "tests", "tools")
RANDOM_SEEDS = (1, 2)
# Slurm hands the launch to a cluster the import cannot follow: these record that they were called.
SLURM_COMMANDS = ("srun", "sbatch", "salloc")
# DeepSpeed's launchers start Megatron-DeepSpeed (or another DeepSpeed job), not Megatron-LM.
DEEPSPEED_COMMANDS = ("deepspeed", "ds")
DEEPSPEED_FLAGS = ("--deepspeed", "--deepspeed_config", "--deepspeed-config", "--zero-stage", "--deepspeed-activation-checkpointing")


class ImportFailed(Exception):
    """The script could not be imported; the message says why."""


@dataclass
class Recorded:
    launcher: list[str]  # torchrun options (before the script)
    script: str
    args: list[str]  # everything after the script
    unset: list[str] = field(default_factory=list)
    calls: int = 1
    env: dict[str, str] = field(default_factory=dict)  # what the script exported for the launcher
    notes: list[str] = field(default_factory=list)  # how the script's path was mapped



def _write_stub(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _stubs(directory: Path, record: Path) -> None:
    def recorder(program: str) -> str:
        # the working directory first: a relative script path is relative to it
        return (f'[ -e "{record}.env" ] || env -0 > "{record}.env"; '
                f'{{ printf "%s\\0" "$PWD" {program} "$@"; printf "\\n"; }} >> "{record}"; exit 0')

    _write_stub(directory / "torchrun", recorder("torchrun") + "\n")
    for name in ("python", "python3"):
        # python -m torch.distributed.run|launch … is torchrun; python …/x.py … a single process
        _write_stub(directory / name, (
            'if [ "${1:-}" = -m ] && { [ "${2:-}" = torch.distributed.run ] || [ "${2:-}" = torch.distributed.launch ]; }; then\n'
            f'  shift 2; {recorder("torchrun")}\n'
            'fi\n'
            # a python helper's output ($(python3 make_data_args.py)) is known only at run time
            'printf "@runtime:python@"\n'
            'for a in "$@"; do case "$a" in *.py) ' + recorder("python") + ' ;; esac; done\n'
            'exit 0\n'
        ))
    for name in NOOP_COMMANDS:
        _write_stub(directory / name, "exit 0\n")
    for name in RUNTIME_COMMANDS:
        _write_stub(directory / name, f'printf "@runtime:{name}@"\n')
    for name in WRAPPER_COMMANDS:
        _write_stub(directory / name, (
            'while [ $# -gt 0 ]; do case "$1" in python|python3|torchrun|*/python|*/python3|*/torchrun) '
            'exec "$@" ;; esac; shift; done\nexit 0\n'))
    for name in SLURM_COMMANDS:
        _write_stub(directory / name, f'printf "%s\\n" {name} >> "{record}.slurm"; exit 0\n')
    for name in DEEPSPEED_COMMANDS:
        _write_stub(directory / name, f'printf "%s\\n" {name} >> "{record}.deepspeed"; exit 0\n')
    # `which srun` answers "not there": a script that submits to Slurm when it can takes its torchrun branch
    _write_stub(directory / "which", (
        'status=0; for a in "$@"; do case "$a" in -*) ;; ' + "|".join(SLURM_COMMANDS) + ') status=1 ;; '
        '*) command -v -- "$a" || status=1 ;; esac; done; exit $status\n'))


def _megatron_tree(root: Path) -> None:
    """A directory laid out like Megatron-LM's root, so a script's `[ -f pretrain_gpt.py ]` passes."""
    for name in ENTRY_POINTS:
        (root / name).write_text("# placeholder written by megatron-compile import\n")
    for name in TOP_DIRECTORIES:
        (root / name).mkdir()


def _tail(text: str, lines: int = 10) -> str:
    """The last lines a script printed, indented, or '(nothing)'."""
    kept = [line for line in text.strip("\n").splitlines()][-lines:]
    return "\n".join(f"    {line}" for line in kept) if kept else "    (nothing)"


def _run_once(bash: str, script: Path, positional: list[str], cwd: Path, env: dict[str, str],
              timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([bash, "-u", str(script.resolve()), *positional], cwd=cwd, env=env,
                              capture_output=True, text=True, errors="replace", timeout=timeout,
                              stdin=subprocess.DEVNULL)  # a byte that is not UTF-8 read as U+FFFD
    except subprocess.TimeoutExpired as exc:
        def text(data: bytes | str | None) -> str:
            return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
        raise ImportFailed(
            f"the script was still running after {timeout:g} s (waiting for input, a service or a loop?) and was "
            f"stopped; give it what it waits for, or a longer --timeout.\n  stdout (last lines):\n"
            f"{_tail(text(exc.stdout))}\n  stderr (last lines):\n{_tail(text(exc.stderr))}") from None


def _calls(record: Path) -> list[list[str]]:
    return [c.decode(errors="replace").split("\0")[:-1] for c in record.read_bytes().split(b"\n") if c]


def record_script(script: Path, positional: list[str], env: dict[str, str] | None = None,
                  timeout: float = 30, cwd: str | None = None) -> Recorded:
    """Run the script under bash against the stubs; returns the launcher's first recorded argv.

    `cwd`: where the script runs; relative, inside the placeholder Megatron-LM root (default: the root
    itself), absolute, a real directory. An unset variable is found with `bash -u` and then set empty
    for the next run, so the script sees what bash gives it: an empty value.
    """
    bash = shutil.which("bash")
    if bash is None:
        raise ImportFailed("bash is needed to import a script")
    unset: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mc-import-") as tmp:
        work = Path(tmp).resolve()
        bin_dir, home, root = work / "bin", work / "home", work / "Megatron-LM"
        for directory in (bin_dir, home, root):
            directory.mkdir()
        _megatron_tree(root)
        record = work / "record"
        _stubs(bin_dir, record)
        run_dir = _run_dir(root, cwd)
        bash_env = work / "bash_env"
        base_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
                    "BASH_ENV": str(bash_env), **(env or {})}
        runs: list[list[list[str]]] = []
        for seed in RANDOM_SEEDS:  # a second run with another $RANDOM seed finds the values it chose
            bash_env.write_text(f"RANDOM={seed}\n")
            proc = None
            for _ in range(64):
                record.write_bytes(b"")
                Path(f"{record}.slurm").unlink(missing_ok=True)
                Path(f"{record}.env").unlink(missing_ok=True)
                run_env = dict(base_env)
                run_env.update({name: "" for name in unset})
                proc = _run_once(bash, script, positional, run_dir, run_env, timeout)
                missing = re.search(r"(\$?[A-Za-z_0-9@*#]+): unbound variable", proc.stderr)
                if missing and not record.read_bytes():
                    name = missing.group(1).lstrip("$")
                    if name.isdigit():
                        raise ImportFailed(f"the script reads positional parameter ${name}: pass it after `--`")
                    if name in unset or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                        break
                    unset.append(name)
                    continue
                break
            assert proc is not None
            calls = _calls(record)
            if Path(f"{record}.deepspeed").exists() and not any(c[1] == "torchrun" for c in calls):
                raise ImportFailed(DEEPSPEED_REFUSAL + " (the script calls DeepSpeed's launcher, `deepspeed`)")
            if not calls and Path(f"{record}.slurm").exists():
                used = sorted(set(Path(f"{record}.slurm").read_text().split()))
                raise ImportFailed(
                    f"the script hands its launch to Slurm ({', '.join(used)}), which the import does not follow: "
                    "Slurm starts the training processes on its own cluster, and the platform starts them with "
                    "torchrun. Import the command Slurm runs instead: a script that calls torchrun (or python -m "
                    "torch.distributed.run) with the same training flags, --nproc_per_node the GPUs per node and "
                    "--nnodes the node count.")
            if not calls:
                raise ImportFailed(
                    "the script never started torchrun, python -m torch.distributed.run, or a *.py with python "
                    f"(bash exit status {proc.returncode}).\n  stdout (last lines):\n{_tail(proc.stdout)}\n"
                    f"  stderr (last lines):\n{_tail(proc.stderr)}\n"
                    "  If it tests for files or runs from another directory, --cwd DIR picks where it runs "
                    "(relative: inside a placeholder Megatron-LM root).")
            runs.append(calls)
            if len(runs) == 1:
                env_file = Path(f"{record}.env")
                exported = env_file.read_bytes().decode(errors="replace").split("\0") if env_file.exists() else []
    seen_env = dict(item.split("=", 1) for item in exported if "=" in item)
    launched_env = {k: v for k, v in seen_env.items()
                    if k not in base_env and k not in unset and k not in SHELL_VARIABLES
                    and not k.startswith("BASH_FUNC")}
    chosen = _launch_index(runs[0])
    first = _mark_random(runs[0][chosen], runs[1][chosen] if len(runs[1]) == len(runs[0]) else runs[0][chosen])
    first = [_mark_temporary(token, work, root) for token in first]
    launched_env = {k: _mark_temporary(v, work, root) for k, v in launched_env.items()}
    pwd, program, rest = first[0], first[1], first[2:]
    where = _Where(pwd, root, work, str(run_dir) if cwd is not None and os.path.isabs(cwd) else None)
    if program.startswith("python"):
        for index, token in enumerate(rest):
            if token.endswith(".py"):
                _refuse_deepspeed(rest[index + 1:])
                return Recorded([], where.script(token), rest[index + 1:], unset, len(runs[0]), launched_env,
                                where.notes)
    launcher: list[str] = []
    index = 0
    while index < len(rest) and rest[index].startswith("-"):
        option = rest[index]
        launcher.append(option)
        name = option.lstrip("-").split("=", 1)[0].replace("-", "_")
        if name in ("m", "module"):
            raise ImportFailed(
                f"torchrun {option} {_show(rest[index + 1]) if index + 1 < len(rest) else ''}: the script runs a Python "
                "module, and training.script names a file of Megatron-LM, not a module. Launch the module's file "
                "instead (torchrun … megatron/…/x.py, or pretrain_gpt.py) and import again")
        if "=" not in option and name in TORCHRUN_VALUE_OPTIONS and index + 1 < len(rest):
            _check_option_value(option, rest[index + 1], unset)
            launcher.append(rest[index + 1])
            index += 1
        index += 1
    if index >= len(rest):
        raise ImportFailed("torchrun was started without a training script")
    if not rest[index].endswith(".py"):
        raise ImportFailed(
            f"torchrun's training script is {_show(rest[index])!r}, not a Python file: an option before it lost its "
            "value (an empty variable expands to nothing, and the option takes the next word)"
            + (f"; unset here: {', '.join(unset)}" if unset else "") + ". Give every torchrun option a value "
            "(--env NAME=VALUE) and import again")
    _refuse_deepspeed(rest[index + 1:])
    return Recorded(launcher, where.script(rest[index]), rest[index + 1:], unset, len(runs[0]), launched_env,
                    where.notes)


DEEPSPEED_REFUSAL = (
    "this is a DeepSpeed job (Megatron-DeepSpeed or DeepSpeed's launcher), not a Megatron-LM one: megatron-compile "
    "compiles Megatron-LM's own torchrun launch, whose flags and checkpoints differ (no --deepspeed, ZeRO is "
    "--use-distributed-optimizer). Port the job to Megatron-LM's pretrain_gpt.py flags and import that script, or "
    "keep launching it with DeepSpeed's tools")


def _refuse_deepspeed(args: list[str]) -> None:
    """A training command with DeepSpeed's flags is Megatron-DeepSpeed's, not Megatron-LM's."""
    used = sorted({a.split("=", 1)[0] for a in args if a.split("=", 1)[0] in DEEPSPEED_FLAGS})
    if used:
        raise ImportFailed(f"{DEEPSPEED_REFUSAL} (it passes {', '.join(used)})")


# Numeric torchrun options and what their value may be: a count, or the forms torchrun reads
_OPTION_VALUE = {"nproc_per_node": re.compile(r"[0-9]+|gpu|cpu|auto|xpu|@(?:unset|runtime):[A-Za-z0-9_.-]+@"),
                 "nnodes": re.compile(r"[0-9]+(?::[0-9]+)?|@(?:unset|runtime):[A-Za-z0-9_.-]+@")}


def _check_option_value(option: str, value: str, unset: list[str]) -> None:
    """`--nproc_per_node` followed by `--nnodes` (or by the script) lost its value to an empty variable."""
    name = option.lstrip("-").replace("-", "_")
    pattern = _OPTION_VALUE.get(name)
    if value.startswith("-") or value.endswith(".py") or (pattern is not None and not pattern.fullmatch(value)):
        raise ImportFailed(
            f"torchrun {option} has no value of its own: it took the next word, {_show(value)!r} (an empty or unset "
            "variable expands to nothing)" + (f"; unset here: {', '.join(unset)}" if unset else "")
            + f". Give {option} a value (import with --env NAME=VALUE) and import again")


def _launch_index(calls: list[list[str]]) -> int:
    """Which recorded call is the training launch: the first torchrun; without one, the first python
    call of a training script (a helper inside $(python3 …) runs first and is not the trainer)."""
    for index, call in enumerate(calls):
        if call[1] == "torchrun":
            return index
    for index, call in enumerate(calls):
        scripts = [posixpath.basename(t) for t in call[2:] if t.endswith(".py")]
        if scripts and scripts[0].startswith(("pretrain_", "train", "finetune")):
            return index
    return 0


def _run_dir(root: Path, cwd: str | None) -> Path:
    """Where the script runs (see record_script)."""
    if cwd is None:
        return root
    if os.path.isabs(cwd):
        if not os.path.isdir(cwd):
            raise ImportFailed(f"--cwd {cwd}: no such directory")
        return Path(cwd)
    target = Path(posixpath.normpath(posixpath.join(str(root), cwd)))
    if not (target == root or root in target.parents):
        raise ImportFailed(f"--cwd {cwd}: a relative --cwd is a directory inside Megatron-LM's root "
                           "(examples/mamba), not above it")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _mark_random(first: list[str], second: list[str]) -> list[str]:
    """Tokens that changed with $RANDOM's seed become a marker: the script chose them at random."""
    if len(first) != len(second):
        return first
    return [a if a == b else "@runtime:RANDOM@" for a, b in zip(first, second)]


def _mark_temporary(token: str, work: Path, root: Path) -> str:
    """The importer's temporary directory in a value becomes a marker: it is the script's $PWD or $HOME."""
    token = token.replace(str(root), "@runtime:PWD@")
    return token.replace(str(work / "home"), "@runtime:HOME@").replace(str(work), "@runtime:PWD@")


class _Where:
    """Maps the launched script's path to training.script, noting what it changed."""

    def __init__(self, pwd: str, root: Path, work: Path, real_root: str | None) -> None:
        self.pwd, self.root, self.work, self.real_root = pwd, str(root), str(work), real_root
        self.notes: list[str] = []

    def script(self, token: str) -> str:
        real = token.replace("@runtime:PWD@", self.root)
        if MARKER.search(real):
            raise ImportFailed(f"the training script {_show(token)} depends on a value known only at run time")
        path = posixpath.normpath(posixpath.join(self.pwd.replace("@runtime:PWD@", self.root), real))
        for root in (self.root, self.real_root):
            if root is not None and path.startswith(root.rstrip("/") + "/"):
                return posixpath.relpath(path, root)
        pwd = self.pwd.replace("@runtime:PWD@", self.root)
        inside = path == self.work or path.startswith(self.work + "/")
        if inside or not real.startswith("/") and (pwd == self.work or pwd.startswith(self.work + "/")):
            raise ImportFailed(
                f"the script launches {token} relative to the directory it runs in, and that resolves outside "
                "Megatron-LM's root: the script expects to run from another directory. Pass --cwd DIR, DIR "
                "relative to Megatron-LM's root (e.g. --cwd examples/mamba for ../../pretrain_hybrid.py)")
        base = posixpath.basename(path)
        if base in ENTRY_POINTS:
            if path != posixpath.join(MEGATRON_ROOT, base):
                self.notes.append(f"script {token}: imported as {base} under megatron.root")
            return base
        return path



def flag_groups(args: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """['--a', '1', '--b', '--c=2'] -> [('--a', ('1',)), ('--b', ()), ('--c', ('2',))]."""
    groups: list[tuple[str, list[str]]] = []
    for token in args:
        if token.startswith("--"):
            name, sep, value = token.partition("=")
            groups.append((name, [value] if sep else []))
        elif groups:
            groups[-1][1].append(token)
        else:
            groups.append(("", [token]))
    return [(name, tuple(values)) for name, values in groups]



def _marker_reason(text: str) -> str:
    kind, name = MARKER.search(text).groups()  # type: ignore[union-attr]
    if kind == "unset":
        return f"it depends on the unset variable {name}"
    if name == "RANDOM":
        return "the script draws it from $RANDOM"
    if name in ("PWD", "HOME"):
        return f"it holds ${name}, a temporary directory while importing; import with --cwd DIR or fix the value"
    return f"it is computed at run time by `{name}`"



def _show(text: str) -> str:
    """A recorded value as the script wrote it: markers back to $NAME or $(command)."""
    return MARKER.sub(lambda m: f"${m.group(2)}" if m.group(1) == "unset" or m.group(2).isupper()
                      else f"$({m.group(2)})", text)

