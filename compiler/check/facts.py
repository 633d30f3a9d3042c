"""Facts: every value derived from a spec, computed once from the sections that validated.

A fact is None when its inputs did not validate, so the rules still run on a partial spec. The rules
and the plan both read facts; neither derives them again.
"""

from __future__ import annotations

import posixpath
from typing import Any, NamedTuple

from ..megatron.data import DATA_DIR, Prefix, prefixes
from ..megatron.flags import Flag, flags
from ..megatron.memory import Estimate, estimate
from ..megatron.parallel import ParallelLayout, parallel_layout, world_size
from ..megatron.pretrain import REQUIRED_SECTIONS, is_bounded_example, is_pretrain
from ..megatron.runfiles import default_run_root
from ..megatron.timing import StepTime, spec_step_time
from ..paths import is_within, normalize_path
from ..platform.aistudio import READ_ONLY_DATA

DEFAULT_MEGATRON_ROOT = "/opt/Megatron-LM"
PLATFORMS = ("aistudio", "slurm", "kubernetes")
DEFAULT_PLATFORM = "aistudio"


class SpecView(NamedTuple):
    """The sections of a spec that validated, where Megatron's helpers read a whole spec."""

    training: Any
    parallelism: Any
    resources: Any
    prepared: tuple[Prefix, ...] | None = None  # the preparation step's prefixes: training's data


class Facts(NamedTuple):
    name: str | None
    platform: str  # the engine: aistudio, slurm or kubernetes
    read_only_roots: tuple[str, ...]  # the platform's read-only data mounts (AIStudio's /infini-data)
    world: int | None  # workers × GPUs per worker
    layout: ParallelLayout | None  # None when the sizes do not divide the world
    mount_path: str | None  # normalised
    run_root: str | None  # normalised, the default applied
    run_root_written: str | None  # storage.run_root as the spec wrote it
    megatron_root: str  # normalised
    script: str | None  # the training script, absolute and normalised
    script_escapes_root: bool  # a relative training.script whose '..' leave megatron.root
    is_pretrain: bool
    is_bounded_example: bool
    pretrain_complete: bool  # pretrain_gpt.py with every required section
    flags: tuple[Flag, ...] | None  # pretrain_gpt.py's typed flags
    estimate: Estimate | None
    step_time: StepTime | None  # the step-time model on the worker flavor's GPU
    prepare_output_dir: str | None  # the preparation step's output directory (default applied)
    prepared: tuple[Prefix, ...] | None  # the prefixes it writes, which training reads


def script_path(script: str, megatron_root: str) -> str:
    """The training script as an absolute path: relative scripts live under megatron.root."""
    if script.startswith("/"):
        return normalize_path(script)
    return normalize_path(posixpath.join(megatron_root, script))


def derive(sections: dict[str, Any], name: str | None, platform: str = DEFAULT_PLATFORM) -> Facts:
    """The facts of the sections that validated (see the module docstring)."""
    res, par, training = sections.get("resources"), sections.get("parallelism"), sections.get("training")
    storage, megatron = sections.get("storage"), sections.get("megatron")
    world = layout = None
    if res is not None:
        world = world_size(res.workers, res.gpus_per_worker)
        if par is not None:
            layout = parallel_layout(res.workers, res.gpus_per_worker, par.tensor, par.pipeline, par.context,
                                     par.expert, par.expert_tensor)
    mount = run_root = written = None
    if storage is not None:
        mount = normalize_path(storage.mount_path)
        written = storage.run_root
        run_root = normalize_path(written) if written is not None else default_run_root(mount, name or "run")
    root = normalize_path(megatron.root if megatron is not None else DEFAULT_MEGATRON_ROOT)
    script = None if training is None else script_path(training.script, root)
    escapes = (training is not None and not training.script.startswith("/") and script is not None
               and not is_within(script, root))
    pretrain = training is not None and is_pretrain(training.script)
    bounded = training is not None and is_bounded_example(training.script, root)
    complete = pretrain and all(getattr(training, s) is not None for s in REQUIRED_SECTIONS)
    prepare = training.data.prepare if training is not None and training.data is not None else None
    out_dir = prepared = None
    if prepare is not None and (prepare.output_dir is not None or mount is not None):
        out_dir = normalize_path(prepare.output_dir or f"{mount}/{DATA_DIR}/{name or 'data'}")
        prepared = prefixes([(i.path, i.weight) for i in prepare.inputs], list(prepare.json_keys), out_dir)
    flag_list = est = step = None
    if complete and par is not None and (prepare is None or prepared is not None):
        view = SpecView(training, par, res, prepared)
        flag_list = tuple(flags(view))
        # no estimate without a training length: megatron-train-length reports that spec instead
        length = training.train_iters is not None or training.train_samples is not None
        if layout is not None and res is not None and length and \
                training.batch.global_ % (training.batch.micro * layout.data) == 0:
            est = estimate(view, layout)
            if est is not None:
                step = spec_step_time(view, layout=layout, est=est)
    return Facts(
        name=name, platform=platform, read_only_roots=(READ_ONLY_DATA,) if platform == "aistudio" else (),
        world=world, layout=layout, mount_path=mount, run_root=run_root, run_root_written=written,
        megatron_root=root, script=script, script_escapes_root=escapes, is_pretrain=pretrain,
        is_bounded_example=bounded, pretrain_complete=complete, flags=flag_list, estimate=est, step_time=step,
        prepare_output_dir=out_dir, prepared=prepared,
    )
