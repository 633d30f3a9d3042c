"""`megatron-compile import`, part two: a recorded launch -> spec data and the report.

The launcher's options become resources, each recorded flag a typed field through the compiler's own
flag table (import_flags.py) or training.args verbatim, pretrain_gpt.py's training section is
completed, and everything that was not mapped one to one is listed in the report (written as
comments at the top of the spec by importer.py).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from ..check.rules.safety import credential_flags, credential_shape, is_credential_env
from ..megatron import PINNED_COMMIT
from ..megatron.flags import UNFUSED_FLAGS
from ..megatron.scripts import script_problem
from ..megatron.runfiles import RUN_CHECKPOINT_DIR
from ..platform.engine import RESERVED_ENV
from ..schema.defaults import MEGATRON_ROOT
from ..schema.models import JobSpec
from .import_flags import Mapped, map_flags
from .import_fp8 import fp8_and_performance
from .import_record import (MARKER, TOP_DIRECTORIES, TORCHRUN_VALUE_OPTIONS, ImportFailed, Recorded,
                            _marker_reason, _show, flag_groups)


@dataclass
class ImportResult:
    data: dict[str, Any]
    report: list[str]
    recorded: Recorded


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


def _refuse_preprocessing(recorded: Recorded) -> None:
    """Megatron's tools/preprocess_data.py is data preparation, not a training launch: say so, with
    the spec section that compiles it (prepare.sh) beside the training it feeds."""
    if posixpath.basename(recorded.script) != "preprocess_data.py":
        return
    given = dict(flag_groups(recorded.args))
    prefix = (given.get("--output-prefix") or ("/mnt/megatron/data/NAME",))[0]
    inputs = ", ".join(f"{{path: {v}}}" for v in given.get("--input", ("/mnt/megatron/corpus/INPUT.jsonl",)))
    keys = ", ".join(given.get("--json-keys", ("text",)))
    tokenizer = {flag.lstrip("-").replace("tokenizer-", "").replace("-file", "_file").replace("-", "_"): v[0]
                 for flag, v in given.items() if flag in ("--tokenizer-type", "--vocab-file", "--merge-file",
                                                         "--tokenizer-model") and v}
    tok = ", ".join(f"{k}: {v}" for k, v in tokenizer.items()) or "type: GPT2BPETokenizer"
    raise ImportFailed(
        "this script runs Megatron's tools/preprocess_data.py, the data preparation, not a training launch. "
        "Give it to the training spec as its preparation step (megatron-compile compiles prepare.sh, its CPU job "
        "and verify-prepare.sh, and derives --data-path from it):\n"
        f"  training:\n    data:\n      prepare:\n        inputs: [{inputs}]\n        json_keys: [{keys}]\n"
        f"        output_dir: {posixpath.dirname(prefix) or prefix}\n"
        f"        workers: {(given.get('--workers') or ('8',))[0]}\n"
        f"        append_eod: {'true' if '--append-eod' in given else 'false'}\n"
        f"      tokenizer: {{{tok}}}\n"
        "(the prefixes are {output_dir}/{input stem}_{key}_document; the input file's stem replaces "
        f"{posixpath.basename(prefix)})")


def to_spec(recorded: Recorded, name: str) -> ImportResult:
    """Map a recorded launch to spec data and the report of everything not mapped one to one."""
    _refuse_preprocessing(recorded)
    report: list[str] = []
    _resolve_script(recorded, report)
    data: dict[str, Any] = {"version": 1, "name": name}
    report += _launch_notes(recorded)
    data["resources"] = _resources(_launcher_options(recorded.launcher), report)
    script = recorded.script
    pretrain = os.path.basename(script) == "pretrain_gpt.py"
    data["training"] = {"script": "pretrain_gpt.py" if pretrain else script}
    if not pretrain:
        report.append(f"script {script}: not pretrain_gpt.py; every flag goes to training.args")
    groups = flag_groups(recorded.args)
    _refuse_warm_start(groups)
    groups = _in_megatron_tree(_drop_credentials(groups, report), report)
    mapped = Mapped(data, report)
    map_flags(groups, pretrain, mapped, recorded.unset)
    training = data["training"]
    if pretrain:
        _complete_pretrain(training, {flag for flag, _ in groups}, mapped)
    if mapped.raw:
        training["args"] = mapped.raw
    env = _environment(recorded.env, report)
    if env:
        training["env"] = env
    return ImportResult(data=_ordered(data), report=report, recorded=recorded)


def _resolve_script(recorded: Recorded, report: list[str]) -> None:
    """A script Megatron-LM moved is imported at its new place; one it does not have is refused."""
    problem = script_problem(recorded.script, MEGATRON_ROOT, PINNED_COMMIT)
    if problem is not None and problem.moved_to is not None:
        report.append(f"script {recorded.script}: Megatron-LM moved it; imported as {problem.moved_to}")
        recorded.script = problem.moved_to
    elif problem is not None:  # a spec naming it would be refused too (script-not-in-megatron)
        launched = problem.message.replace(f"training.script ({recorded.script})", f"the script launches {recorded.script}, which", 1)
        raise ImportFailed(f"{launched}; {problem.hint}")


def _launch_notes(recorded: Recorded) -> list[str]:
    """What the recording saw besides the flags: variables expanded empty, $RANDOM, repeated launches."""
    notes = [f"unset variable {variable}: the script read it and bash expanded it empty; "
             f"import with --env {variable}=VALUE if the job sets it" for variable in recorded.unset]
    notes += recorded.notes
    if any(MARKER.search(t) and "@runtime:RANDOM@" in t for t in recorded.launcher + recorded.args):
        notes.append("$RANDOM: the script draws values at random; they are reported where used")
    if recorded.calls > 1:
        notes.append(f"the launcher ran {recorded.calls} times; imported the first")
    return notes


def _resources(options: dict[str, str], report: list[str]) -> dict[str, Any]:
    """resources from torchrun's --nproc-per-node and --nnodes; its other options are dropped, and said so."""
    resources: dict[str, Any] = {}
    for option, target in (("nproc_per_node", "gpus_per_worker"), ("nnodes", "workers")):
        value = options.pop(option, "1")
        if value.isdigit():
            resources[target] = int(value)
        else:
            resources[target] = 1
            why = _marker_reason(value) if MARKER.search(value) else f"{value!r} is not a fixed count"
            report.append(f"torchrun --{option} {_show(value)}: not mapped ({why}); set resources.{target}")
    for option, value in options.items():
        if option in ("node_rank", "master_addr", "master_port", "rdzv_id", "rdzv_backend", "rdzv_endpoint", "standalone"):
            report.append(f"torchrun --{option}: dropped; the launch command takes it from the platform")
        else:
            report.append(f"torchrun --{option}={value}: dropped; the generated launch command does not pass it")
    return resources


def _complete_pretrain(training: dict[str, Any], names: set[str], mapped: Mapped) -> None:
    """pretrain_gpt.py's training section completed: precision, FP8 and the performance options, the
    unfused kernels, what Megatron or the spec adds, and what the script left for the user to fill in."""
    report, raw = mapped.report, mapped.raw
    if not mapped.precision_set:
        training["precision"] = "fp32"
    fp8_and_performance(training, mapped.typed_apart, report)
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
    if "--exit-signal-handler" not in names:
        report.append("--exit-signal-handler: added (a stop saves: launch.sh passes SIGTERM to Megatron)")
    if "--save" not in names:
        report.append(f"--save: added; the spec always saves checkpoints under $RUN_ROOT/{RUN_CHECKPOINT_DIR}")
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


def _environment(env: dict[str, str], report: list[str]) -> dict[str, str]:
    """The script's exported variables the job keeps: credentials, the launch's own and run-time ones dropped."""
    kept = {}
    for key, value in sorted(env.items()):
        if is_credential_env(key) or credential_shape(value):
            report.append(f"environment {key}: dropped, never written (a credential); give it to the job through "
                          "the platform's secrets or job environment variables")
        elif key in RESERVED_ENV or key.startswith(("MASTER_", "NODE_RANK", "NNODES")):
            report.append(f"environment {key}: dropped; the launch command sets it")
        elif MARKER.search(value):
            report.append(f"environment {key}={_show(value)}: dropped ({_marker_reason(value)})")
        else:
            kept[key] = value
    return kept


def _refuse_warm_start(groups: list[tuple[str, tuple[str, ...]]]) -> None:
    """`--load DIR` other than `--save`'s DIR warm-starts from a checkpoint the spec cannot re-point."""
    given = dict(groups)
    load, save = given.get("--load"), given.get("--save")
    if not load or load == ("",) or any(MARKER.search(v) for v in load):
        return
    if save is not None and [posixpath.normpath(v) for v in load] == [posixpath.normpath(v) for v in save]:
        return
    raise ImportFailed(
        f"--load {' '.join(load)} is not the --save directory ({' '.join(map(_show, save)) if save else 'none'}): the script "
        f"starts from an existing checkpoint, and a spec's --load is always its own $RUN_ROOT/{RUN_CHECKPOINT_DIR}, so importing "
        "it would silently train from scratch. Remove --load from the script (or make it equal --save) and "
        "import again, then add the checkpoint to the spec: a Megatron checkpoint as training.args "
        f"[--pretrained-checkpoint, {' '.join(load)}] (with --finetune to load weights only); Hugging Face "
        "weights converted to such a checkpoint first (docs/bridge.md)")


def _in_megatron_tree(groups: list[tuple[str, tuple[str, ...]]], report: list[str]) -> list[tuple[str, tuple[str, ...]]]:
    """`$PWD/examples/…` is a file of Megatron-LM's source (the script runs from its root): the image's copy."""
    tree = re.compile(r"^@runtime:PWD@/((?:%s)/[^@]*)$" % "|".join(TOP_DIRECTORIES))
    mapped = []
    for flag, values in groups:
        new = tuple(tree.sub(lambda m: posixpath.join(MEGATRON_ROOT, m.group(1)), v) for v in values)
        if new != values:
            report.append(f"{flag} {' '.join(_show(v) for v in values)}: replaced by {' '.join(new)}, the file of "
                          "Megatron-LM's source in the image (megatron.root's default; change it with the root)")
        mapped.append((flag, new))
    return mapped


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



# The spec's keys in the schema's order (every section: platform, slurm, kubernetes, init_from…);
# extends first. A key the schema does not know still comes out, after them: dropping it loses a value.
SPEC_KEY_ORDER = ("extends", *JobSpec.model_fields)
TRAINING_ORDER = ("script", "model", "batch", "train_iters", "train_samples", "optimizer", "precision", "fp8", "data",
                  "checkpoint", "sequence_parallel", "distributed_optimizer", "recompute", "virtual_pipeline",
                  "fused_kernels", "performance", "logging", "eval", "args", "env", "resume")


def _ordered(data: dict[str, Any]) -> dict[str, Any]:
    out = {**{k: data[k] for k in SPEC_KEY_ORDER if k in data}, **data}
    if "training" in out:
        t = out["training"]
        # a key not in TRAINING_ORDER still comes out, after the ordered ones: dropping it loses a value
        out["training"] = {**{k: t[k] for k in TRAINING_ORDER if k in t}, **t}
    return out


