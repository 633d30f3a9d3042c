"""Storage rules: where a run may write, on the platform's shared storage."""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic
from ...megatron.runfiles import default_run_root
from ...paths import is_within, normalize_path
from ..context import RuleContext


def _storage_paths(ctx: RuleContext) -> tuple[str, str, tuple[str | int, ...]]:
    """(mount path, run root, key path of the run root) with the run root's default applied."""
    storage: Any = ctx.sections["storage"]
    facts = ctx.facts
    assert facts.run_root is not None
    if facts.run_root_written is not None:
        return storage.mount_path, facts.run_root_written, ("storage", "run_root")
    return storage.mount_path, facts.run_root, ("storage",)


def check_run_root(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    norm_mount, norm_root = normalize_path(mount), normalize_path(run_root)
    if norm_root == norm_mount:
        yield ctx.locate(
            "run-root-is-mount", f"storage.run_root ({run_root}) is the mount path itself", where,
            hint=f"give every run its own directory, e.g. {default_run_root(norm_mount, ctx.facts.name or 'NAME')}",
        )
    elif not is_within(norm_root, norm_mount):
        yield ctx.locate(
            "run-root-outside-mount",
            f"storage.run_root ({norm_root}) is not inside storage.mount_path ({norm_mount}); the worker's "
            "root filesystem is discarded when the job ends, so the checkpoint and logs would be lost",
            where, hint=f"put the run root under {norm_mount}, or leave it out for {default_run_root(norm_mount, '<name>')}",
        )


def check_read_only(ctx: RuleContext) -> Iterator[Diagnostic]:
    mount, run_root, where = _storage_paths(ctx)
    for data in ctx.facts.engine.read_only_data:  # AIStudio's /infini-data
        if is_within(mount, data):
            yield ctx.locate(
                "read-only-storage", f"storage.mount_path ({normalize_path(mount)}) is under {data}, "
                "which is public and read-only", ("storage", "mount_path"),
                hint="mount a writable shared storage, e.g. /mnt/megatron",
            )
        elif is_within(run_root, data):
            yield ctx.locate(
                "read-only-storage", f"storage.run_root ({normalize_path(run_root)}) is under {data}, "
                "which is public and read-only", where, hint="write runs under the writable mount path",
            )


def check_reserved_mount(ctx: RuleContext) -> Iterator[Diagnostic]:
    engine = ctx.facts.engine
    if not engine.reserved_mounts:  # AIStudio's list; other engines mount where the cluster allows
        return
    mount = normalize_path(ctx.sections["storage"].mount_path)
    blocked = "/" if mount == "/" else next(
        (r for r in engine.reserved_mounts if mount == r or mount.startswith(r + "/")), None)  # both normalised
    if blocked:
        what = "the root directory" if blocked == "/" else (mount if mount == blocked else f"under {blocked}")
        yield ctx.locate(
            "reserved-mount-path", f"storage.mount_path ({mount}) is {what}, which {engine.title} does not allow as a mount point",
            ("storage", "mount_path"), hint="use a path such as /mnt/megatron",
        )


def check_script_in_root(ctx: RuleContext) -> Iterator[Diagnostic]:
    # A relative training.script is resolved under megatron.root; '..' that climb out of it name a
    # file the image's Megatron-LM checkout does not hold (../../pretrain_hybrid.py -> /pretrain_hybrid.py).
    if ctx.facts.script_escapes_root:
        script = ctx.sections["training"].script
        yield ctx.locate(
            "script-outside-root", f"training.script ({script}) leaves megatron.root ({ctx.facts.megatron_root}): "
            f"it resolves to {ctx.facts.script}", ("training", "script"),
            hint="write the script relative to Megatron-LM's root (pretrain_hybrid.py, examples/…/x.py), or as an "
            "absolute path",
        )
