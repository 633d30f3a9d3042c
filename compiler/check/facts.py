"""Facts: every value derived from a spec, computed once from the sections that validated.

A fact is None when its inputs did not validate, so the rules still run on a partial spec. The rules
and the plan both read facts; neither derives them again.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from ..tuples import NamedTuple
from ..megatron.data import DATA_DIR, Prefix, prefixes
from ..megatron.flags import Flag, SpecView, flags
from ..megatron.hf.model import HFModel
from ..megatron.parallel import ParallelLayout, parallel_layout, world_size
from ..megatron.pretrain import (
    MODEL_REQUIRED, REQUIRED_SECTIONS, is_bounded_example, is_pretrain, num_microbatches, train_iterations,
    virtual_pipeline_size,
)
from ..megatron.runfiles import SHARED_CHECKPOINTS_DIR, default_run_root
from ..megatron.stop import stop_flags, stop_times
from ..paths import is_within, normalize_path
from ..platform.engine import Engine
from ..platform.engines import DEFAULT_ENGINE, engine
from ..schema.defaults import MEGATRON_ROOT
from ..schema.record import extend, replace
from ..schema.records import Training

if TYPE_CHECKING:  # the models themselves load only for the specs that need them (docs/performance.md)
    from ..load.attachments import ConfigJson
    from ..megatron.hf.size import ConvertSize
    from ..megatron.huggingface import HFArchitecture
    from ..megatron.memory import Estimate
    from ..megatron.stop import StopTimes
    from ..megatron.timing import StepTime


class Facts(NamedTuple):
    name: str | None
    platform: str  # the engine's name, the spec's `platform:`
    engine: Engine  # its adapter (platform/engines.py)
    read_only_roots: tuple[str, ...]  # the engine's read-only data mounts (AIStudio's /infini-data)
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
    train_iters: int | None  # the iterations the run trains (from train_samples for sample-based training)
    num_microbatches: int | None  # global batch / (micro batch × data parallel), when it divides
    virtual_pipeline: int | None  # Megatron's virtual_pipeline_model_parallel_size (None: no interleaving)
    prepare_output_dir: str | None  # the preparation step's output directory (default applied)
    prepared: tuple[Prefix, ...] | None  # the prefixes it writes, which training reads
    training: Training | None  # training as the rules and the plan read it: the model init_from derives filled in
    hf: HFArchitecture | None  # init_from's architecture, from the committed config.json
    hf_error: str | None  # why it could not be derived
    hf_config: ConfigJson | None  # the committed config.json it derives from (with where each key sits)
    converted: str | None  # init_from's converted checkpoint directory (default applied)
    stop: StopTimes | None  # a stop that saves: the grace it needs, --exit-duration-in-mins (megatron/stop.py)
    convert: ConvertSize | None = None  # the conversion job sized from the model (None: no init_from model)
    export_gib: float | None = None  # the export job's CPU memory
    hf_error_key: str | None = None  # the config.json key hf_error is about ("rope_scaling.beta_fast"), if one


def _converted(init: Any, mount: str | None, name: str | None) -> str | None:
    """init_from's converted checkpoint: as written, else {mount}/checkpoints/{name}/converted."""
    if init is None:
        return None
    if init.converted is not None:
        return normalize_path(init.converted)
    return None if mount is None else normalize_path(f"{mount}/{SHARED_CHECKPOINTS_DIR}/{name or 'run'}/converted")


def script_path(script: str, megatron_root: str) -> str:
    """The training script as an absolute path: relative scripts live under megatron.root."""
    if script.startswith("/"):
        return normalize_path(script)
    return normalize_path(posixpath.join(megatron_root, script))


def _init_from(init: Any, config: dict[str, Any] | None,
               tensor: int) -> tuple[HFArchitecture | None, str | None, str | None]:
    if init is None or config is None:
        return None, None, None
    from ..megatron.huggingface import HFConfigError  # deferred: init_from specs only: Hugging Face's architecture tables
    from ..megatron.huggingface import derive as derive_architecture  # deferred: init_from specs only: Hugging Face's architecture tables

    try:
        return derive_architecture(config, tensor_parallel=tensor), None, None
    except HFConfigError as exc:
        return None, str(exc), exc.key


def effective_training(training: Training | None, hf: HFArchitecture | None,
                       hf_path: str | None = None) -> Training | None:
    """training with init_from's model architecture (the spec's own fields are checked against it
    by a rule) and the model directory's tokenizer; training itself without init_from."""
    if hf_path is None or training is None:
        return training
    changes: dict[str, Any] = {}
    if hf is not None and training.model is not None:
        from ..megatron.huggingface import hf_model_fields  # deferred: init_from specs only: Hugging Face's architecture tables

        changes["model"] = extend(training.model, HFModel, **hf_model_fields(hf))
    if training.data is not None:
        tokenizer = replace(training.data.tokenizer, type="HuggingFaceTokenizer", model=hf_path, vocab_file=None,
                            merge_file=None)
        changes["data"] = replace(training.data, tokenizer=tokenizer)
    return replace(training, **changes)


def derive(sections: dict[str, Any], name: str | None, platform: str = DEFAULT_ENGINE,
           hf_config: ConfigJson | None = None) -> Facts:
    """The facts of the sections that validated (see the module docstring)."""
    adapter = engine(platform)
    res, par, training = sections.get("resources"), sections.get("parallelism"), sections.get("training")
    init = sections.get("init_from")
    hf, hf_error, hf_error_key = _init_from(init, hf_config, par.tensor if par is not None else 1)
    training = effective_training(training, hf, None if init is None else init.huggingface.path)
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
    root = normalize_path(megatron.root if megatron is not None else MEGATRON_ROOT)
    script = None if training is None else script_path(training.script, root)
    escapes = (training is not None and not training.script.startswith("/") and script is not None
               and not is_within(script, root))
    pretrain = training is not None and is_pretrain(training.script)
    bounded = training is not None and is_bounded_example(training.script, root)
    complete = (training is not None and pretrain and all(getattr(training, s) is not None for s in REQUIRED_SECTIONS)
                and all(getattr(training.model, f) is not None for f in MODEL_REQUIRED))
    prepare = training.data.prepare if training is not None and training.data is not None else None
    out_dir = prepared = None
    if prepare is not None and (prepare.output_dir is not None or mount is not None):
        out_dir = normalize_path(prepare.output_dir or f"{mount}/{DATA_DIR}/{name or 'data'}")
        prepared = prefixes([(i.path, i.weight) for i in prepare.inputs], list(prepare.json_keys), out_dir)
    iterations = microbatches = virtual = None
    if training is not None and training.batch is not None:
        if training.train_iters is not None or training.train_samples is not None:
            iterations = train_iterations(training.train_iters, training.train_samples, training.batch.global_)
        if layout is not None and training.batch.global_ % (training.batch.micro * layout.data) == 0:
            microbatches = num_microbatches(training.batch.global_, training.batch.micro, layout.data)
    if training is not None and training.model is not None and training.model.num_layers is not None \
            and layout is not None:
        virtual = virtual_pipeline_size(training.model.num_layers, layout.pipeline, training.virtual_pipeline)
    flag_list = est = step = stop = None
    if complete and training is not None and par is not None and (prepare is None or prepared is not None):
        converted_dir = _converted(init, mount, name)
        view = SpecView(training, par, res, prepared, hf, None if init is None else init.huggingface.path,
                        converted_dir, sections.get("image"))
        flag_list = tuple(flags(view))
        # no estimate without a training length (megatron-train-length reports that spec instead),
        # nor when the micro-batches do not divide the batch (megatron-batch)
        if layout is not None and res is not None and iterations is not None and microbatches is not None:
            # pretrain_gpt.py specs only: the bounded example never imports the models
            from ..megatron.memory import estimate  # deferred: complete pretrain specs only: the memory model
            from ..megatron.timing import spec_step_time  # deferred: complete pretrain specs only: the step-time model

            est = estimate(view, layout)
            if est is not None:
                step = spec_step_time(view, layout=layout, est=est)
        stop = _stop(sections, adapter, training, est, step)
        flag_list += stop_flags(stop)
    return Facts(
        name=name, platform=platform, engine=adapter, read_only_roots=adapter.read_only_data,
        world=world, layout=layout, mount_path=mount, run_root=run_root, run_root_written=written,
        megatron_root=root, script=script, script_escapes_root=escapes, is_pretrain=pretrain,
        is_bounded_example=bounded, pretrain_complete=complete, flags=flag_list, estimate=est, step_time=step,
        train_iters=iterations, num_microbatches=microbatches, virtual_pipeline=virtual,
        prepare_output_dir=out_dir, prepared=prepared, training=training, hf=hf, hf_error=hf_error, hf_config=hf_config,
        converted=_converted(init, mount, name), stop=stop, hf_error_key=hf_error_key, **_init_jobs(hf, res),
    )


def _stop(sections: dict[str, Any], adapter: Engine, training: Any, est: Estimate | None,
          step: StepTime | None) -> StopTimes | None:
    """The stop's times, from the checkpoint estimate, the step time, and the engine's limit (its own
    setting, else stop.time_limit_minutes) and grace (stop.grace_seconds, else what the engine sets)."""
    if est is None:
        return None
    section = sections.get("stop")
    engine_section = sections.get(adapter.section) if adapter.section is not None else None
    limit = adapter.time_limit_seconds(engine_section)
    limit_source = f"{adapter.section}.{adapter.limit_field}"
    grace = rate = None
    if section is not None:
        if limit is None and section.time_limit_minutes is not None:
            limit, limit_source = section.time_limit_minutes * 60, "stop.time_limit_minutes"
        grace, rate = section.grace_seconds, section.write_gb_s
    return stop_times(est.checkpoint_bytes_per_save, rate, None if step is None else step.seconds,
                      training.checkpoint.save_interval, limit, limit_source, grace,
                      "stop.grace_seconds" if grace is not None else f"unknown: {adapter.title} sets none",
                      adapter.sets_grace)


def _init_jobs(hf: HFArchitecture | None, res: Any) -> dict[str, Any]:
    """The conversion job's GPUs and the export job's memory, from the model's parameters."""
    if hf is None or res is None:
        return {}
    from ..megatron.gpus import gpu_of_flavor  # deferred: init_from specs only: the GPU table
    from ..megatron.hf.size import GIB, convert_size, export_gib  # deferred: init_from specs only: model sizes

    gpu = gpu_of_flavor(res.worker_flavor)
    memory_gb = res.gpu_memory_gb or (gpu.memory_gb if gpu is not None else None)
    if memory_gb is None:
        return {"export_gib": export_gib(hf)}
    return {"convert": convert_size(hf, memory_gb * 1e9 / GIB, res.gpus_per_worker), "export_gib": export_gib(hf)}
