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
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from ..check.validate import is_number
from ..load.discover import recorded_path
from ..megatron.flags import IMPLIED, UNFUSED_FLAGS, import_table
from ..platform.aistudio import RESERVED_ENV
from .compile import check_written, refuses_overwrite, relative_to_spec

MARKER = re.compile(r"@(unset|runtime):([A-Za-z0-9_.-]+)@")
NOOP_COMMANDS = ("mkdir", "rm", "cp", "mv", "ln", "touch", "chmod", "chown", "pip", "pip3", "git", "wget", "curl",
                 "apt-get", "conda", "module", "sleep", "tee", "sudo", "export_env", "srun", "scontrol")
RUNTIME_COMMANDS = ("date", "hostname", "nvidia-smi", "nproc", "whoami", "uuidgen", "shuf")
TORCHRUN_VALUE_OPTIONS = {
    "nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "rdzv_id", "rdzv_backend",
    "rdzv_endpoint", "rdzv_conf", "max_restarts", "monitor_interval", "start_method", "role", "log_dir",
    "redirects", "tee", "local_addr", "logs_specs", "local_ranks_filter",
}
SHELL_VARIABLES = {"PWD", "OLDPWD", "SHLVL", "_"}
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
        return (f'[ -e "{record}.env" ] || env -0 > "{record}.env"; '
                f'{{ printf "%s\\0" {program} "$@"; printf "\\n"; }} >> "{record}"; exit 0')

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


def record_script(script: Path, positional: list[str], env: dict[str, str] | None = None,
                  timeout: float = 30) -> Recorded:
    """Run the script under bash against the stubs; returns the launcher's first recorded argv."""
    bash = shutil.which("bash")
    if bash is None:
        raise ImportFailed("bash is needed to import a script")
    unset: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mc-import-") as tmp:
        work = Path(tmp)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        record = work / "record"
        _stubs(bin_dir, record)
        base_env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8", **(env or {})}
        for _ in range(32):
            record.write_bytes(b"")
            Path(f"{record}.env").unlink(missing_ok=True)
            run_env = dict(base_env)
            run_env.update({name: f"@unset:{name}@" for name in unset})
            proc = subprocess.run([bash, "-u", str(script.resolve()), *positional], cwd=work, env=run_env,
                                  capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
            missing = re.search(r"(\$?[A-Za-z_0-9@*#]+): unbound variable", proc.stderr)
            if missing and not record.read_bytes():
                name = missing.group(1).lstrip("$")
                if name.isdigit():
                    raise ImportFailed(f"the script reads positional parameter ${name}: pass it after `--`")
                if name in unset:
                    break
                unset.append(name)
                continue
            break
        raw = record.read_bytes()
        env_file = Path(f"{record}.env")
        exported = env_file.read_bytes().decode(errors="replace").split("\0") if env_file.exists() else []
    seen_env = dict(item.split("=", 1) for item in exported if "=" in item)
    launched_env = {k: v for k, v in seen_env.items()
                    if k not in base_env and k not in unset and k not in SHELL_VARIABLES
                    and not k.startswith("BASH_FUNC")}
    calls = [c for c in raw.split(b"\n") if c]
    if not calls:
        raise ImportFailed("the script never started torchrun, python -m torch.distributed.run, or a "
                           f"*.py with python (bash exit status {proc.returncode}: {proc.stderr.strip()[-300:]})")
    argv = calls[0].decode().split("\0")[:-1]
    program, rest = argv[0], argv[1:]
    if program.startswith("python"):
        for index, token in enumerate(rest):
            if token.endswith(".py"):
                return Recorded([], token, rest[index + 1:], unset, len(calls), launched_env)
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
    return Recorded(launcher, rest[index], rest[index + 1:], unset, len(calls), launched_env)


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
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def _marker_reason(text: str) -> str:
    kind, name = MARKER.search(text).groups()  # type: ignore[union-attr]
    return f"it depends on the unset variable {name}" if kind == "unset" else f"it is computed at run time by `{name}`"


def to_spec(recorded: Recorded, name: str) -> ImportResult:
    """Map a recorded launch to spec data and the report of everything not mapped one to one."""
    report: list[str] = []
    data: dict = {"version": 1, "name": name}
    for variable in recorded.unset:
        report.append(f"unset variable {variable}: the script read it; values using it are not typed")
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
    raw: list[str] = []
    names = {g[0] for g in groups}
    precision_set = False
    for flag, values in groups:
        if os.path.basename(script) != "pretrain_gpt.py":
            raw += [flag, *values] if flag else list(values)
            continue
        if flag in MANAGED:
            if flag == "--load":
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
        if "train_iters" not in training:
            report.append("training.train_iters: no --train-iters (the script may use --train-samples); fill it in")
        par = data.get("parallelism")
        if par:
            data["parallelism"] = par
    if raw:
        training["args"] = raw
    env = {}
    for key, value in sorted(recorded.env.items()):
        if key in RESERVED_ENV or key.startswith(("MASTER_", "NODE_RANK", "NNODES")):
            report.append(f"environment {key}: dropped; the launch command sets it")
        elif MARKER.search(value):
            report.append(f"environment {key}={_show(value)}: dropped ({_marker_reason(value)})")
        else:
            env[key] = value
    if env:
        training["env"] = env
    return ImportResult(data=_ordered(data), report=report, recorded=recorded)


def _show(text: str) -> str:
    """A recorded value as the script wrote it: markers back to $NAME or $(command)."""
    return MARKER.sub(lambda m: f"${m.group(2)}" if m.group(1) == "unset" else f"$({m.group(2)})", text)


ORDER = ("extends", "version", "name", "image", "megatron", "resources", "storage", "parallelism", "training")
TRAINING_ORDER = ("script", "model", "batch", "train_iters", "optimizer", "precision", "data", "checkpoint",
                  "sequence_parallel", "distributed_optimizer", "recompute", "virtual_pipeline", "fused_kernels",
                  "logging", "eval", "args", "env", "resume")


def _ordered(data: dict) -> dict:
    out = {k: data[k] for k in ORDER if k in data}
    if "training" in out:
        t = out["training"]
        out["training"] = {k: t[k] for k in TRAINING_ORDER if k in t}
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
                  env: dict[str, str] | None = None) -> ImportResult:
    """Record and map a launch script."""
    return to_spec(record_script(script, positional or [], env), name)


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
        result = import_script(Path(args.script), name, script_args, env)
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
