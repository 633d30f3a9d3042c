"""Semantic rules: each takes the sections that validated and yields located diagnostics.

A rule names the sections it needs; it runs only when all of them validated, so a schema error in
one section never hides a rule about another. Every rule's code is in diagnostics.CODES and has a
case in tests/bad_specs/.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from pydantic import BaseModel

from .diagnostics import Diagnostic, Severity, dotted
from .layout import divisors, is_within, model_parallel_size, normalize_path, world_size
from .source import SourceDoc

BOUNDED_EXAMPLE = "examples/run_simple_mcore_train_loop.py"

# AIStudio refuses these mount points and anything below them.
RESERVED_MOUNTS = (
    "/bios", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/root",
    "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/home", "/datadisk",
)
READ_ONLY_DATA = "/infini-data"

# Names the generated launch command sets or reads itself; a spec's env must not shadow them.
RESERVED_ENV = frozenset({
    "RUN_ROOT", "MEGATRON_ROOT", "MEGATRON_COMMIT", "PYTHONPATH", "PATH", "NNODES", "NODE_RANK",
    "GPUS_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
    "EXPECTED_GPUS", "EXPECTED_NNODES", "LOG_DIR", "TRAIN_LOG",
})

_CREDENTIALS = (
    (re.compile(r"nvapi-[A-Za-z0-9_-]{8,}"), "an NGC API key (nvapi-…)"),
    (re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE), "a bearer token"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key block"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), "a GitHub token"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "an AWS access key id"),
    (re.compile(r"://[^/\s:@]+:[^/\s@]+@"), "a password inside a URL"),
)


@dataclass(frozen=True)
class RuleContext:
    doc: SourceDoc
    sections: dict[str, BaseModel]
    name: str | None
    locate: Callable[..., Diagnostic]  # (code, message, path, *, key=False, hint=None, severity=…)


@dataclass(frozen=True)
class Rule:
    code: str
    needs: tuple[str, ...]
    check: Callable[[RuleContext], Iterable[Diagnostic]]


def _storage_paths(ctx: RuleContext) -> tuple[str, str, tuple]:
    """(mount path, run root, key path of the run root) with the run root's default applied."""
    storage: Any = ctx.sections["storage"]
    if storage.run_root is not None:
        return storage.mount_path, storage.run_root, ("storage", "run_root")
    return storage.mount_path, f"{storage.mount_path}/runs/{ctx.name or 'run'}", ("storage",)


def check_run_root(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    norm_mount, norm_root = normalize_path(mount), normalize_path(run_root)
    if norm_root == norm_mount:
        yield ctx.locate(
            "run-root-is-mount", f"storage.run_root ({run_root}) is the mount path itself", where,
            hint=f"give every run its own directory, e.g. {norm_mount.rstrip('/')}/runs/{ctx.name or 'NAME'}",
        )
    elif not is_within(norm_root, norm_mount):
        yield ctx.locate(
            "run-root-outside-mount",
            f"storage.run_root ({norm_root}) is not inside storage.mount_path ({norm_mount}); the worker's "
            "root filesystem is discarded when the job ends, so the checkpoint and logs would be lost",
            where, hint=f"put the run root under {norm_mount}, or leave it out for {norm_mount}/runs/<name>",
        )


def check_read_only(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    if is_within(mount, READ_ONLY_DATA):
        yield ctx.locate(
            "read-only-storage", f"storage.mount_path ({normalize_path(mount)}) is under {READ_ONLY_DATA}, "
            "which is public and read-only", ("storage", "mount_path"),
            hint="mount a writable shared storage, e.g. /mnt/megatron",
        )
    elif is_within(run_root, READ_ONLY_DATA):
        yield ctx.locate(
            "read-only-storage", f"storage.run_root ({normalize_path(run_root)}) is under {READ_ONLY_DATA}, "
            "which is public and read-only", where, hint="write runs under the writable mount path",
        )


def check_reserved_mount(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount = normalize_path(ctx.sections["storage"].mount_path)  # type: ignore[attr-defined]
    blocked = "/" if mount == "/" else next((r for r in RESERVED_MOUNTS if is_within(mount, r)), None)
    if blocked:
        what = "the root directory" if blocked == "/" else (mount if mount == blocked else f"under {blocked}")
        yield ctx.locate(
            "reserved-mount-path", f"storage.mount_path ({mount}) is {what}, which AIStudio does not allow as a mount point",
            ("storage", "mount_path"), hint="use a path such as /mnt/megatron",
        )


def _world(ctx: RuleContext) -> tuple[int, str]:
    res: Any = ctx.sections["resources"]
    world = world_size(res.workers, res.gpus_per_worker)
    return world, f"workers {res.workers} × gpus_per_worker {res.gpus_per_worker} = {world}"


def _sizes_hint(world: int, what: str) -> str:
    options = divisors(world)
    listed = ", ".join(str(d) for d in options[:-1]) + (" or " if len(options) > 1 else "") + str(options[-1])
    return f"with {world} GPU{'s' if world != 1 else ''}, {what} must be {listed}"


def check_parallel_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    par: Any = ctx.sections["parallelism"]
    world, how = _world(ctx)
    if world % par.tensor:
        yield ctx.locate(
            "parallel-divisibility", f"parallelism.tensor ({par.tensor}) must divide the world size ({how})",
            ("parallelism", "tensor"), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )
        return
    product = model_parallel_size(par.tensor, par.pipeline, par.context)
    if world % product:
        culprit = "pipeline" if world % (par.tensor * par.pipeline) else "context"
        yield ctx.locate(
            "parallel-divisibility",
            f"tensor × pipeline × context ({par.tensor} × {par.pipeline} × {par.context} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", culprit), hint=_sizes_hint(world, "tensor × pipeline × context"),
        )


def check_expert_divisibility(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron/core/parallel_state.py, initialize_model_parallel: the expert RankGenerator needs
    # world % (expert_tensor × expert × pipeline) == 0.
    par: Any = ctx.sections["parallelism"]
    world, how = _world(ctx)
    etp = par.expert_tensor or par.tensor
    product = etp * par.expert * par.pipeline
    if par.expert > 1 and world % product:
        yield ctx.locate(
            "expert-divisibility",
            f"expert_tensor × expert × pipeline ({etp} × {par.expert} × {par.pipeline} = {product}) "
            f"must divide the world size ({how})",
            ("parallelism", "expert"), hint=_sizes_hint(world, "expert_tensor × expert × pipeline")
            + ("; expert_tensor defaults to tensor" if par.expert_tensor is None else ""),
        )


def _is_bounded_example(ctx: RuleContext) -> bool:
    script = ctx.sections["training"].script  # type: ignore[attr-defined]
    if script.startswith("/"):
        megatron: Any = ctx.sections.get("megatron")
        root = megatron.root if megatron is not None else "/opt/Megatron-LM"
        return normalize_path(script) == normalize_path(f"{root}/{BOUNDED_EXAMPLE}")
    return normalize_path(script) == BOUNDED_EXAMPLE


def check_bounded_layout(ctx: RuleContext) -> Iterator[Diagnostic]:
    if not _is_bounded_example(ctx):
        return
    par: Any = ctx.sections["parallelism"]
    why = f"{BOUNDED_EXAMPLE} hard-codes tensor=2, pipeline=1 and ignores the spec"
    wanted = {"tensor": 2, "pipeline": 1, "context": 1, "expert": 1}
    world, how = _world(ctx)
    for field, value in wanted.items():
        actual = getattr(par, field)
        # a size that does not even divide the world size is parallel-divisibility's to report
        if actual != value and world % actual == 0:
            yield ctx.locate(
                "bounded-example-layout", f"parallelism.{field} must be {value} for the bounded example (got {actual})",
                ("parallelism", field),
                hint=f"{why}; set {field}: {value}, or train with pretrain_gpt.py for another layout",
            )
    if world % 2:
        yield ctx.locate(
            "bounded-example-layout", f"the bounded example needs an even world size ({how})",
            ("resources", "gpus_per_worker"), hint=f"{why}; its TP=2 groups need pairs of GPUs",
        )


def check_bounded_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    training: Any = ctx.sections["training"]
    if _is_bounded_example(ctx) and training.args:
        yield ctx.locate(
            "bounded-example-args", f"training.args must be empty for the bounded example (got {len(training.args)})",
            ("training", "args"),
            hint=f"{BOUNDED_EXAMPLE} reads no arguments; the job would run something other than what was reviewed",
        )


def check_image_values(ctx: RuleContext) -> Iterator[Diagnostic]:
    # megatron.root becomes the Dockerfile's ENV PYTHONPATH and regctl's --env PYTHONPATH=…: Docker
    # treats a backslash inconsistently across instructions, and ':' would split PYTHONPATH in two.
    root = ctx.sections["megatron"].root  # type: ignore[attr-defined]
    bad = sorted({ch for ch in root if ch in "\\:"})
    if bad:
        yield ctx.locate(
            "unsafe-character", f"megatron.root contains {' and '.join(repr(c) for c in bad)}, which cannot be "
            "carried safely into the image's PYTHONPATH", ("megatron", "root"),
            hint="choose a directory name without backslashes or colons, e.g. /opt/Megatron-LM",
        )


def check_reserved_env(ctx: RuleContext) -> Iterator[Diagnostic]:
    for name in ctx.sections["training"].env:  # type: ignore[attr-defined]
        if name in RESERVED_ENV:
            yield ctx.locate(
                "reserved-env", f"training.env.{name} is set by the launch command itself", ("training", "env", name),
                key=True, hint="the spec's own fields control it; remove it from training.env",
            )


def check_rdma(ctx: RuleContext) -> Iterator[Diagnostic]:
    res: Any = ctx.sections["resources"]
    if res.rdma and res.workers == 1:
        yield ctx.locate(
            "rdma-single-worker", "resources.rdma is on for a single worker, where it carries no traffic",
            ("resources", "rdma"), severity=Severity.WARNING, hint="turn it off, or use several workers",
        )


def _strings(value: Any, path: tuple) -> Iterator[tuple[tuple, str, bool]]:
    """(path, text, is_key) for every string in the raw data, keys included."""
    if isinstance(value, str):
        yield path, value, False
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, path + (i,))
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                yield path + (key,), key, True
            yield from _strings(item, path + (key,))


def check_credentials(ctx: RuleContext) -> Iterator[Diagnostic]:
    for path, text, is_key in _strings(ctx.doc.data, ()):
        for pattern, what in _CREDENTIALS:
            if pattern.search(text):
                yield ctx.locate(
                    "credential-in-spec", f"{dotted(path)} looks like {what}; a spec is committed and its "
                    "artifacts are reviewed, so it must hold no secret", path, key=is_key,
                    hint="remove it; the generated scripts prompt for credentials or read them from the environment",
                )
                break


RULES: tuple[Rule, ...] = (
    Rule("run-root-is-mount", ("storage",), check_run_root),
    Rule("read-only-storage", ("storage",), check_read_only),
    Rule("reserved-mount-path", ("storage",), check_reserved_mount),
    Rule("parallel-divisibility", ("resources", "parallelism"), check_parallel_divisibility),
    Rule("expert-divisibility", ("resources", "parallelism"), check_expert_divisibility),
    Rule("bounded-example-layout", ("training", "parallelism", "resources"), check_bounded_layout),
    Rule("bounded-example-args", ("training",), check_bounded_args),
    Rule("unsafe-character", ("megatron",), check_image_values),
    Rule("reserved-env", ("training",), check_reserved_env),
    Rule("rdma-single-worker", ("resources",), check_rdma),
    Rule("credential-in-spec", (), check_credentials),
)


def run_rules(ctx: RuleContext) -> list[Diagnostic]:
    """Every rule whose sections validated, in order."""
    out: list[Diagnostic] = []
    for rule in RULES:
        if all(name in ctx.sections for name in rule.needs):
            out.extend(rule.check(ctx))
    return out
