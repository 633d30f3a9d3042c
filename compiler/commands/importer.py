"""`megatron-compile import SCRIPT`: an existing Megatron-LM launch script -> a spec.

Approach: bash itself runs the script, in a throw-away directory with a clean environment, against
recording stubs: `torchrun` (and `python -m torch.distributed.run|launch`, `python …pretrain_gpt.py`)
writes its argv and exits; commands with side effects (mkdir, rm, cp, pip, git, …) do nothing; commands
whose output differs per machine or per run (date, hostname, nvidia-smi, …) print a marker, so a
value computed at run time is recognised in the recorded argv. The script runs under `bash -u`: an
unset variable stops it, is reported, and is given a marker value for the next attempt. So arrays,
line continuations, `${VAR:-default}`, functions and positional parameters expand exactly as bash
expands them. Limits: the script runs for real apart from the stubs (only run scripts you trust; the
environment is empty, the working directory temporary); a launcher started more than once is imported
from its first call; branches taken on the machine's state see the stubs' answers.

The recorded flags are mapped back to typed fields with the compiler's own flag table; flags the
spec cannot type go to training.args verbatim; everything that was not mapped one to one is listed
in the report and as comments at the top of the written spec.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from ..check.rules.safety import credential_flags, credential_shape, is_credential_env
from ..check.validate import is_number
from ..load.discover import recorded_path
from ..megatron.flags import IMPLIED, UNFUSED_FLAGS, import_table
from ..platform.aistudio import RESERVED_ENV
from .compile import check_written, refuses_overwrite, relative_to_spec

MARKER = re.compile(r"@(unset|runtime):([A-Za-z0-9_.-]+)@")
NOOP_COMMANDS = ("mkdir", "rm", "cp", "mv", "ln", "touch", "chmod", "chown", "pip", "pip3", "git", "wget", "curl",
                 "apt-get", "conda", "module", "sleep", "tee", "sudo", "export_env", "srun", "scontrol")
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
MANAGED = {
    "--save": "checkpoints go to $RUN_ROOT/ckpt on the shared storage",
    "--load": "a resumed run loads from $RUN_ROOT/ckpt (training.checkpoint.resume)",
    "--tensorboard-dir": "TensorBoard writes to $RUN_ROOT/tensorboard (training.logging.tensorboard)",
}

# flag -> (spec path, type), from the one flag table; types: int, float, str, switch, const:<value>.
FLAG_TABLE: dict[str, tuple[tuple[str, ...], str]] = import_table()

SEED_BASE = {
    "image": {"base": "nvcr.io/nvidia/pytorch:25.03-py3", "platform": "linux/amd64", "registry": "cr.infini-ai.com",
              "namespace": "te-0123456789abcdef", "repository": "megatron-core", "tag": "0.18.2-cu128"},
    "megatron": {"repo": "https://github.com/NVIDIA/Megatron-LM.git",
                 "commit": "571370c829ca768fe37244f4e2e7f28d8accc4ab", "root": "/opt/Megatron-LM"},
    "storage": {"mount_path": "/mnt/megatron"},
}


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


@dataclass
class ImportResult:
    data: dict
    report: list[str]
    recorded: Recorded


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
              timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([bash, "-u", str(script.resolve()), *positional], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
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
    first = _mark_random(runs[0][0], runs[1][0] if len(runs[1]) == len(runs[0]) else runs[0][0])
    first = [_mark_temporary(token, work, root) for token in first]
    launched_env = {k: _mark_temporary(v, work, root) for k, v in launched_env.items()}
    pwd, program, rest = first[0], first[1], first[2:]
    where = _Where(pwd, root, work, str(run_dir) if cwd is not None and os.path.isabs(cwd) else None)
    if program.startswith("python"):
        for index, token in enumerate(rest):
            if token.endswith(".py"):
                return Recorded([], where.script(token), rest[index + 1:], unset, len(runs[0]), launched_env,
                                where.notes)
    launcher: list[str] = []
    index = 0
    while index < len(rest) and rest[index].startswith("-"):
        option = rest[index]
        launcher.append(option)
        name = option.lstrip("-").split("=", 1)[0].replace("-", "_")
        if "=" not in option and name in TORCHRUN_VALUE_OPTIONS and index + 1 < len(rest):
            launcher.append(rest[index + 1])
            index += 1
        index += 1
    if index >= len(rest):
        raise ImportFailed("torchrun was started without a training script")
    return Recorded(launcher, where.script(rest[index]), rest[index + 1:], unset, len(runs[0]), launched_env,
                    where.notes)


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
            if path != posixpath.join(SEED_BASE["megatron"]["root"], base):
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


def _launcher_options(tokens: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        name, sep, value = token.lstrip("-").partition("=")
        name = name.replace("-", "_")
        if not sep and name in TORCHRUN_VALUE_OPTIONS and index + 1 < len(tokens):
            value = tokens[index + 1]
            index += 1
        options[name] = value if (sep or name in TORCHRUN_VALUE_OPTIONS) else "true"
        index += 1
    return options


def _set(data: dict, path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value


def _convert(kind: str, values: tuple[str, ...]) -> Any:
    if kind == "switch":
        if values:
            raise ValueError("a switch takes no value")
        return True
    if kind.startswith("const:"):
        return kind.split(":", 1)[1]
    if len(values) != 1:
        raise ValueError(f"expected one value, got {len(values)}")
    text = values[0]
    if MARKER.search(text):
        raise ValueError(_marker_reason(text))
    if kind not in ("int", "float") and re.search(r"[\"']", text):
        raise ValueError("it holds quote characters, which Megatron receives as they are")
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def _marker_reason(text: str) -> str:
    kind, name = MARKER.search(text).groups()  # type: ignore[union-attr]
    if kind == "unset":
        return f"it depends on the unset variable {name}"
    if name == "RANDOM":
        return "the script draws it from $RANDOM"
    if name in ("PWD", "HOME"):
        return f"it holds ${name}, a temporary directory while importing; import with --cwd DIR or fix the value"
    return f"it is computed at run time by `{name}`"


def to_spec(recorded: Recorded, name: str) -> ImportResult:
    """Map a recorded launch to spec data and the report of everything not mapped one to one."""
    report: list[str] = []
    data: dict = {"version": 1, "name": name}
    for variable in recorded.unset:
        report.append(f"unset variable {variable}: the script read it and bash expanded it empty; "
                      f"import with --env {variable}=VALUE if the job sets it")
    report += recorded.notes
    if any(MARKER.search(t) and "@runtime:RANDOM@" in t for t in recorded.launcher + recorded.args):
        report.append("$RANDOM: the script draws values at random; they are reported where used")
    if recorded.calls > 1:
        report.append(f"the launcher ran {recorded.calls} times; imported the first")
    options = _launcher_options(recorded.launcher)
    resources: dict = {}
    for option, target in (("nproc_per_node", "gpus_per_worker"), ("nnodes", "workers")):
        value = options.pop(option, "1")
        if value.isdigit():
            resources[target] = int(value)
        else:
            resources[target] = 1
            why = _marker_reason(value) if MARKER.search(value) else f"{value!r} is not a fixed count"
            report.append(f"torchrun --{option} {_show(value)}: not mapped ({why}); set resources.{target}")
    data["resources"] = resources
    for option, value in options.items():
        if option in ("node_rank", "master_addr", "master_port", "rdzv_id", "rdzv_backend", "rdzv_endpoint", "standalone"):
            report.append(f"torchrun --{option}: dropped; the launch command takes it from the platform")
        else:
            report.append(f"torchrun --{option}={value}: dropped; the generated launch command does not pass it")
    script = recorded.script
    data["training"] = {"script": "pretrain_gpt.py" if os.path.basename(script) == "pretrain_gpt.py" else script}
    if os.path.basename(script) != "pretrain_gpt.py":
        report.append(f"script {script}: not pretrain_gpt.py; every flag goes to training.args")
    groups = flag_groups(recorded.args)
    _refuse_warm_start(groups)
    groups = _drop_credentials(groups, report)
    raw: list[str] = []
    names = {g[0] for g in groups}
    precision_set = False
    for flag, values in groups:
        if os.path.basename(script) != "pretrain_gpt.py":
            marked = next((v for v in values if MARKER.search(v)), None)
            if marked is not None:
                report.append(f"{flag} {' '.join(_show(v) for v in values)}: dropped ({_marker_reason(marked)}); "
                              "give it a fixed value in training.args")
                continue
            raw += [flag, *values] if flag else list(values)
            continue
        if flag in MANAGED:
            if flag == "--load":
                if not values or values == ("",):
                    report.append("--load: dropped (its value is empty)")
                    continue
                _set(data, ("training", "checkpoint", "resume"), True)
            if flag == "--tensorboard-dir":
                _set(data, ("training", "logging", "tensorboard"), True)
            report.append(f"{flag} {' '.join(values)}: replaced; {MANAGED[flag]}")
            continue
        if flag == "--data-path":
            marked = next((v for v in values if MARKER.search(v)), None)
            if marked is not None:
                report.append(f"--data-path {' '.join(_show(v) for v in values)}: dropped ({_marker_reason(marked)}); "
                              "set training.data.paths")
                continue
            if len(values) % 2 == 0 and values and all(is_number(v) for v in values[::2]):
                _set(data, ("training", "data", "weights"), [float(v) for v in values[::2]])
                _set(data, ("training", "data", "paths"), list(values[1::2]))
            elif any(is_number(v) for v in values):
                report.append(f"--data-path {' '.join(values)}: not a list of paths nor of weight/path pairs; "
                              "set training.data")
            else:
                _set(data, ("training", "data", "paths"), list(values))
            continue
        if flag in IMPLIED:
            continue
        marked = next((v for v in values if MARKER.search(v)), None)
        if marked is not None:
            report.append(f"{flag} {' '.join(_show(v) for v in values)}: dropped ({_marker_reason(marked)}); "
                          "give it a fixed value in the spec")
            continue
        entry = FLAG_TABLE.get(flag)
        if entry is None:
            raw += [flag, *values] if flag else list(values)
            report.append(f"{' '.join([flag, *values]) if flag else ' '.join(values)}: no typed field; "
                          "passed through verbatim in training.args")
            continue
        path, kind = entry
        if flag == "--split" and len(values) == 1 and re.fullmatch(r"(['\"])[0-9.,]+\1", values[0]):
            # Megatron reads only the split's digits and dots (re.findall(r"[.0-9]+", split),
            # megatron/core/datasets/blended_megatron_dataset_config.py:164): the quotes change nothing
            report.append(f"--split {values[0]}: typed as {values[0][1:-1]} (Megatron ignores the quotes)")
            values = (values[0][1:-1],)
        if not values and kind != "switch" and not kind.startswith("const:"):
            because = f"; unset {', '.join(recorded.unset)} expanded empty" if recorded.unset else ""
            report.append(f"{flag}: dropped (no value{because}); give it a value in the spec")
            continue
        try:
            value = _convert(kind, values)
        except ValueError as exc:
            raw += [flag, *values]
            report.append(f"{flag} {' '.join(values)}: not typed ({exc}); passed through verbatim")
            continue
        if path == ("training", "precision"):
            precision_set = True
        _set(data, path, value)
    training = data["training"]
    if os.path.basename(script) == "pretrain_gpt.py":
        if not precision_set:
            training["precision"] = "fp32"
        unfused = set(UNFUSED_FLAGS)
        if unfused <= names:
            training["fused_kernels"] = False
        else:
            for flag in sorted(unfused & names):
                raw.append(flag)
                report.append(f"{flag}: passed through verbatim (fused_kernels: false needs all of "
                              f"{', '.join(UNFUSED_FLAGS)})")
        impl_local = training.get("model", {}).get("transformer_impl") == "local"
        if "--no-persist-layer-norm" in names and not (impl_local or training.get("fused_kernels") is False):
            raw.append("--no-persist-layer-norm")
        elif (impl_local or training.get("fused_kernels") is False) and "--no-persist-layer-norm" not in names:
            report.append("--no-persist-layer-norm: added (Megatron asserts it without Apex and Transformer Engine)")
        if "--num-query-groups" in names and "--group-query-attention" not in names:
            report.append("--group-query-attention: added (num_query_groups implies it)")
        if "--group-query-attention" in names and "--num-query-groups" not in names:
            report.append("--group-query-attention without --num-query-groups: Megatron's default of 1 group is "
                          "not typed; set training.model.num_query_groups")
        if "--save" not in names:
            report.append("--save: added; the spec always saves checkpoints under $RUN_ROOT/ckpt")
        checkpoint = training.setdefault("checkpoint", {})
        checkpoint.setdefault("resume", False)
        if "save_interval" not in checkpoint:
            iters = training.get("train_iters", 1000)
            checkpoint["save_interval"] = iters
            report.append(f"--save-interval: added as train_iters ({iters}), one checkpoint at the end")
        for section in ("model", "batch", "optimizer", "data"):
            if section not in training:
                report.append(f"training.{section}: the script sets none of its flags; fill it in")
        if "train_iters" not in training and "train_samples" not in training:
            report.append("training.train_iters: neither --train-iters nor --train-samples; fill one in")
        par = data.get("parallelism")
        if par:
            data["parallelism"] = par
    if raw:
        training["args"] = raw
    env = {}
    for key, value in sorted(recorded.env.items()):
        if is_credential_env(key) or credential_shape(value):
            report.append(f"environment {key}: dropped, never written (a credential); give it to the job through "
                          "the platform's secrets or job environment variables")
        elif key in RESERVED_ENV or key.startswith(("MASTER_", "NODE_RANK", "NNODES")):
            report.append(f"environment {key}: dropped; the launch command sets it")
        elif MARKER.search(value):
            report.append(f"environment {key}={_show(value)}: dropped ({_marker_reason(value)})")
        else:
            env[key] = value
    if env:
        training["env"] = env
    return ImportResult(data=_ordered(data), report=report, recorded=recorded)


def _refuse_warm_start(groups: list[tuple[str, tuple[str, ...]]]) -> None:
    """`--load DIR` other than `--save`'s DIR warm-starts from a checkpoint the spec cannot re-point."""
    given = dict(groups)
    load, save = given.get("--load"), given.get("--save")
    if not load or load == ("",) or any(MARKER.search(v) for v in load):
        return
    if save is not None and [posixpath.normpath(v) for v in load] == [posixpath.normpath(v) for v in save]:
        return
    raise ImportFailed(
        f"--load {' '.join(load)} is not the --save directory ({' '.join(save) if save else 'none'}): the script "
        "starts from an existing checkpoint, and a spec's --load is always its own $RUN_ROOT/ckpt, so importing "
        "it would silently train from scratch. Remove --load from the script (or make it equal --save) and "
        "import again, then add the checkpoint to the spec: a Megatron checkpoint as training.args "
        f"[--pretrained-checkpoint, {' '.join(load)}] (with --finetune to load weights only); Hugging Face "
        "weights as training.init_from")


def _drop_credentials(groups: list[tuple[str, tuple[str, ...]]], report: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """Flags whose name or value is a credential are dropped, never written, and reported."""
    kept = []
    for flag, values in groups:
        tokens = [flag, *values] if flag else list(values)
        if credential_flags(tokens) or any(credential_shape(v) for v in values):
            report.append(f"{flag or values[0]}: dropped, never written (a credential); give it to the job "
                          "through the platform's secrets or job environment variables")
            continue
        kept.append((flag, values))
    return kept


def _show(text: str) -> str:
    """A recorded value as the script wrote it: markers back to $NAME or $(command)."""
    return MARKER.sub(lambda m: f"${m.group(2)}" if m.group(1) == "unset" or m.group(2).isupper()
                      else f"$({m.group(2)})", text)


ORDER = ("extends", "version", "name", "image", "megatron", "resources", "storage", "parallelism", "training")
TRAINING_ORDER = ("script", "model", "batch", "train_iters", "train_samples", "optimizer", "precision", "data", "checkpoint",
                  "sequence_parallel", "distributed_optimizer", "recompute", "virtual_pipeline", "fused_kernels",
                  "logging", "eval", "args", "env", "resume")


def _ordered(data: dict) -> dict:
    out = {k: data[k] for k in ORDER if k in data}
    if "training" in out:
        t = out["training"]
        # a key not in TRAINING_ORDER still comes out, after the ordered ones: dropping it loses a value
        out["training"] = {**{k: t[k] for k in TRAINING_ORDER if k in t}, **t}
    return out


def render_spec(result: ImportResult, source: str, extends: str | None) -> str:
    """The spec file: schema line, provenance, the report as comments, then the YAML."""
    data = dict(result.data)
    if extends is not None:
        data.pop("version", None)
        data = {"extends": extends, **data}
    else:
        data = {**{k: v for k, v in data.items() if k in ("version", "name")}, **SEED_BASE,
                **{k: v for k, v in data.items() if k not in ("version", "name")}}
    lines = ["# yaml-language-server: $schema=../schemas/megatron-job.schema.json",
             f"# Imported by `megatron-compile import` from {source}."]
    if extends is None:
        lines.append("# image, megatron and storage are the seed's defaults: review them, or extend a base spec.")
    if result.report:
        lines.append("# Not mapped one to one (review each):")
        lines += [f"#   - {line}" for line in result.report]
    body = yaml.safe_dump(_ordered(data), sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    return "\n".join(lines) + "\n" + body


def import_script(script: Path, name: str, positional: list[str] | None = None,
                  env: dict[str, str] | None = None, cwd: str | None = None, timeout: float = 30) -> ImportResult:
    """Record and map a launch script."""
    return to_spec(record_script(script, positional or [], env, timeout=timeout, cwd=cwd), name)


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile import SCRIPT -o specs/NAME.yaml [--extends BASE] [-- SCRIPT-ARGS…]`."""
    parser = argparse.ArgumentParser(
        prog="megatron-compile import",
        description="Turn an existing Megatron-LM launch script into a spec: bash runs the script against "
        "recording stubs, recognised flags become typed fields, the rest goes to training.args, and what is "
        "not mapped one to one is reported and written as comments.")
    parser.add_argument("script")
    parser.add_argument("-o", "--output", required=True, metavar="SPEC", help="the spec file to write")
    parser.add_argument("--name", help="the run name (default: the output file's stem)")
    parser.add_argument("--extends", metavar="BASE",
                        help="extend this base spec (default: base.yaml beside the output, when it exists)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable the script reads (repeatable)")
    parser.add_argument("--cwd", metavar="DIR",
                        help="where the script runs: relative, a directory inside a placeholder Megatron-LM root "
                        "(default: that root, holding its entry points); absolute, a real directory")
    parser.add_argument("--timeout", type=float, default=30, metavar="SECONDS",
                        help="stop a script still running after this long (default 30)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    parser.epilog = "Positional parameters for the script follow `--`: import run.sh -o specs/x.yaml -- /ckpt /data"
    script_args: list[str] = []
    if "--" in argv:
        argv, script_args = argv[: argv.index("--")], argv[argv.index("--") + 1:]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    target = Path(args.output)
    if refuses_overwrite(target, args.force, err):
        return 1
    name = args.name or re.sub(r"[^a-z0-9-]+", "-", target.stem.lower()).strip("-")[:63] or "imported"
    env = dict(item.split("=", 1) for item in args.env if "=" in item)
    try:
        result = import_script(Path(args.script), name, script_args, env, args.cwd, args.timeout)
    except (ImportFailed, OSError) as exc:
        err.write(f"{args.script}: cannot import: {exc}\n")
        return 1
    extends = args.extends
    if extends is None and (target.parent / "base.yaml").is_file() and target.name != "base.yaml":
        extends = "base.yaml"
    elif extends is not None:
        extends = relative_to_spec(extends, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_spec(result, recorded_path(args.script), extends), encoding="utf-8")
    err.write(f"wrote {target}\n")
    for line in result.report:
        err.write(f"  not mapped one to one: {line}\n")
    return check_written(target, "text", out, err)
