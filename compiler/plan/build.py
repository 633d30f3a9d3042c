"""Plan stage: a validated spec and its facts -> Plan, every value the artifacts print.

Templates read the plan and decide nothing: numbers are computed here, paths are joined here, argv
lists are built here as shell words, and optional blocks are plan booleans. Derived values come
from the facts (check/facts.py), computed once per spec.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from .. import TOOL, __version__
from ..check.facts import Facts
from ..load.discover import lock_path
from ..megatron.packages import image_packages
from ..megatron.pretrain import training_time, vocab_size
from ..megatron.checkpoint import SAVE_PROBE, complete_save_files
from ..megatron.launch_env import launch_env
from ..megatron.runfiles import (
    RUN_CHECKPOINT_DIR, DATASETS_DIR, EXIT_RECORD, LATEST_CHECKPOINT, LAUNCH_LOG, NODES_DIR, RUNTIME_PROBE, RUNTIME_RECORD,
    TRAIN_LOG,
)
from ..platform.engine import DEFAULT_MASTER_PORT, Engine, StepRequest
from ..platform.images import ImagePins, image_pins
from ..platform.prices import PRICES, PriceRow, cost_of
from ..schema.record import replace, to_json
from ..schema.records import JobSpec

if TYPE_CHECKING:
    from ..load.lockfile import Lock
from .pictures import pictures, schedule_summary
from .report import data_rows, report, steps_section, stop_section, time_section
from .build_words import flag_words
from .init import init_plan, init_steps
from .prepare import data_check, prepare_plan, prepare_request
from .shell import Var, Word, under
from .types import Artifact, Header, ImagePlan, LaunchPlan, MegatronPlan, Plan, PretrainPlan, ReportSection, Step
from .verify import prepare_verify_plan, verify_plan

NGC_REGISTRY = "nvcr.io"  # NVIDIA's registry, where base images may want an API key login

IMAGE_ARTIFACTS = (Artifact("Dockerfile", "Dockerfile.j2"), Artifact("buildx.sh", "buildx.sh.j2"),
                   Artifact("regctl.sh", "regctl.sh.j2"))
LAUNCH = "launch.sh"
PREPARE = "prepare.sh"
SUMMARY_ARTIFACTS = (Artifact("plan.md", "plan.md.j2"),)


def spec_digest(spec: JobSpec) -> str:
    """sha256 of the resolved spec (defaults applied) as canonical JSON."""
    canonical = json.dumps(to_json(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _image_host(reference: str) -> str:
    first = reference.split("/", 1)[0]
    if "/" in reference and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def _base_mirror(spec: JobSpec) -> str:
    """nvcr.io/nvidia/pytorch:25.03-py3 -> REGISTRY/NAMESPACE/nvidia-pytorch:25.03-py3 (the seed's naming)."""
    ref = spec.image.base.split("@", 1)[0]
    name, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    return f"{spec.image.registry}/{spec.image.namespace}/{'-'.join(parts)}:{tag or 'latest'}"


def _train_request(spec: JobSpec, facts: Facts) -> StepRequest:
    """What the training step asks of the engine: every worker, with its GPUs."""
    res = spec.resources
    assert facts.mount_path is not None and facts.run_root is not None
    return StepRequest(kind="train", name=spec.name, nodes=res.workers, gpus_per_node=res.gpus_per_worker,
                       flavor=res.worker_flavor, rdma=res.rdma, slow_training_detection=res.slow_training_detection,
                       run_root=facts.run_root, mount_path=facts.mount_path, script=LAUNCH,
                       # the grace the engine's document sets for a stop to save (megatron/stop.py)
                       stop_grace_s=facts.stop.grace_s if facts.stop is not None and facts.engine.sets_grace else None)


def engine_step(adapter: Engine, request: StepRequest, spec: JobSpec, pins: ImagePins,
                before: tuple[Artifact, ...], after: tuple[Artifact, ...] = (), **values: Any) -> Step:
    """A step run as a job of the spec's engine: its artifacts with the engine's job document
    (which carries the step's script) after `before`, and the job."""
    document = adapter.document(request.kind)
    artifacts = before + (Artifact(document.file, document.template, embeds=request.script),) + after
    return Step(kind=request.kind, artifacts=artifacts, job=adapter.job(request, spec, pins), **values)


def _steps_report(spec: JobSpec, facts: Facts, steps: tuple[Step, ...]) -> tuple[ReportSection, ...]:
    """The Steps section, for plans of more than the training step."""
    runs = [s for s in steps if s.kind != "image"]
    if len(runs) < 2:
        return ()
    described = []
    for step in runs:
        job = step.job
        assert job is not None  # every step but the image runs as a job of the spec's engine
        runner = next(a.embeds for a in step.artifacts if a.embeds is not None)
        document = next(a.file for a in step.artifacts if a.embeds is not None)
        described.append((step.kind, f"{runner} as {document} ({job.describe()})"))
    rows = data_rows(spec, facts, vocab_size(spec.training)) if facts.prepared else ()
    return (steps_section(tuple(described), rows),)


def _bridge_install(spec: JobSpec) -> tuple[str, ...]:
    packages = image_packages(spec.init_from)
    # --no-deps: the validated set, nothing pip would resolve besides (docs/bridge.md)
    return ("pip", "install", "--no-cache-dir", "--no-deps") + packages if packages else ()


def pinning(spec: JobSpec, lock: Lock | None, spec_display: str, document: str) -> str:
    """How the base image is pinned, for the report."""
    if lock is None:
        return f"{spec.image.base}: unpinned (a tag can move): run `{TOOL} lock {spec_display}`"
    base = lock.base
    text = (f"{base.reference} pinned to {base.digest} for {base.platform} ({lock_path(spec_display)}, "
            f"resolved {base.resolved_at} with {base.resolved_with})")
    if lock.built is None:
        text += f"; {document} names the built image by its tag until `{TOOL} lock --record-built {spec_display}`"
    return text


def _pretrain_plan(spec: JobSpec, facts: Facts, prices: tuple[PriceRow, ...]) -> PretrainPlan | None:
    if not facts.is_pretrain:
        return None
    t = spec.training
    layout = facts.layout
    microbatches, virtual, iterations = facts.num_microbatches, facts.virtual_pipeline, facts.train_iters
    # validation guarantees these: the layout, the flags, a training length and a batch that divides
    assert layout is not None and facts.flags is not None and microbatches is not None and iterations is not None
    assert t.batch is not None and t.checkpoint is not None  # a complete pretrain spec
    step = facts.step_time
    total = None if step is None else training_time(step.seconds, layout.world, t.batch.global_, t.train_iters,
                                                      t.train_samples)
    gpu = None
    if step is not None:
        from ..megatron.timing import gpu_of_spec  # deferred: specs with a step time only

        found = gpu_of_spec(spec.resources)
        gpu = None if found is None else found.name
    return PretrainPlan(
        flags=facts.flags, train_iters=iterations,
        save_interval=t.checkpoint.save_interval,
        num_microbatches=microbatches, virtual_pipeline=virtual,
        estimate=facts.estimate, step_time=step, training_time=total,
        cost=None if total is None or gpu is None else cost_of(total.gpu_hours, prices, gpu, facts.engine.name),
        gpu=gpu, schedule=schedule_summary(layout.pipeline, virtual, microbatches),
        stages=_stage_peaks(facts.training if facts.training is not None else t, layout),
    )


def _stage_peaks(training: Any, layout: Any) -> tuple[Any, ...]:
    from ..megatron.stage_memory import stage_peaks  # deferred: pretrain specs only

    return tuple(stage_peaks(training, layout) or ())


def _launch_plan(spec: JobSpec, facts: Facts, pretrain: PretrainPlan | None, adapter: Engine) -> LaunchPlan:
    res, par = spec.resources, spec.parallelism
    assert facts.run_root is not None and facts.script is not None
    multi = res.workers > 1
    if multi:
        # The seed's multi-worker command: node count and rank come from the platform at run time.
        log_dir = Word((Var("RUN_ROOT"), f"/{NODES_DIR}/node-", Var("NODE_RANK")))
        distributed: tuple[Word, ...] = (
            Word(("--nproc_per_node=", Var("GPUS_PER_NODE"))),
            Word(("--nnodes=", Var("NNODES"))),
            Word(("--node_rank=", Var("NODE_RANK"))),
            Word(("--master_addr=", Var("MASTER_ADDR"))),
            Word(("--master_port=", Var("MASTER_PORT"))),
        )
    else:
        log_dir = Word((Var("RUN_ROOT"),))
        distributed = (Word.lit(f"--nproc_per_node={res.gpus_per_worker}"),)
    flag_lines = tuple(flag_words(f) for f in pretrain.flags) if pretrain else ()
    # the launch names Megatron's own files through $MEGATRON_ROOT, the one place the root is written
    root = facts.megatron_root
    script = (Word((Var("MEGATRON_ROOT"), facts.script[len(root):])) if facts.script.startswith(root + "/")
              else Word.lit(facts.script))
    torchrun = (
        ((Word.lit("torchrun"),),) + tuple((w,) for w in distributed) + ((script,),)
        + flag_lines + tuple((Word.lit(a),) for a in spec.training.args)
    )
    # the spec's training.env, then what Megatron needs beside it (each default with its reason; the spec's wins)
    env = {name: (value, "") for name, value in spec.training.env.items()}
    if pretrain is not None:
        for d in launch_env(spec.training, par.tensor, par.context):
            env.setdefault(d.name, (d.value, d.why))
    checkpoint = spec.training.checkpoint if pretrain is not None else None  # a complete pretrain spec's
    resume = spec.training.resume or (checkpoint is not None and checkpoint.resume)
    loads = pretrain is not None and any(f.name == "--load" for f in pretrain.flags)
    ckpt_format = checkpoint.format if checkpoint is not None else "torch_dist"
    assert facts.layout is not None  # a plan is built only for a spec whose layout divides
    return LaunchPlan(
        datasets_dir=Word((Var("MEGATRON_ROOT"), "/" + DATASETS_DIR)), node_env=adapter.node_env,
        expected_gpus=res.gpus_per_worker, expected_nodes=res.workers, multi_worker=multi,
        default_master_port=DEFAULT_MASTER_PORT, log_dir=log_dir,
        log_dir_shown=log_dir.as_text().replace("$RUN_ROOT", facts.run_root), torchrun=torchrun,
        tee=(Word.lit("tee"), Word.lit("-i")) + ((Word.lit("-a"),) if resume else ())
        + (Word((Var("TRAIN_LOG"),)),),
        env=tuple((name, value) for name, (value, _) in sorted(env.items())), has_env=bool(env),
        env_notes=tuple(f"{name}: {why}" for name, (_, why) in sorted(env.items()) if why), resume=resume, runtime_probe=RUNTIME_PROBE,
        checks_checkpoint=loads, checkpoint_dir=under("RUN_ROOT", RUN_CHECKPOINT_DIR), tracker=LATEST_CHECKPOINT,
        checkpoint_files=tuple(Word.lit(f) for f in complete_save_files(ckpt_format, facts.layout)),
        checkpoint_sharded=ckpt_format == "torch_dist", checkpoint_probe=SAVE_PROBE, train_iters=pretrain.train_iters if pretrain else 0,
        train_log=TRAIN_LOG, launch_log=LAUNCH_LOG, exit_record=EXIT_RECORD, runtime_record=RUNTIME_RECORD,
        data=data_check(spec, facts),
    )


def build_plan(spec: JobSpec, facts: Facts, spec_display: str, regenerate: str | None = None,
               lock: Lock | None = None, prices: tuple[PriceRow, ...] = PRICES) -> Plan:
    """Derive every value the artifacts need from a spec that validated without errors, its facts
    and its lock (the image digests), when it has one."""
    digest = spec_digest(spec)  # the spec as written (defaults applied), not what is derived over it
    assert facts.training is not None
    spec = replace(spec, training=facts.training)  # init_from's architecture and tokenizer filled in
    layout = facts.layout
    assert layout is not None and facts.run_root is not None and facts.mount_path is not None
    root = facts.megatron_root
    reference = f"{spec.image.registry}/{spec.image.namespace}/{spec.image.repository}:{spec.image.tag}"
    header = Header(tool=TOOL, version=__version__, spec=spec_display, spec_sha256=digest,
                    regenerate=regenerate or f"{TOOL} {spec_display}")
    pins = image_pins(spec.image.base, reference, lock.base.digest if lock else None,
                      lock.built.digest if lock and lock.built else None)
    image = ImagePlan(
        base=spec.image.base, from_reference=pins.docker_from, base_digest=pins.base_digest, pinned=pins.base_pinned,
        platform=spec.image.platform, registry=spec.image.registry, reference=reference,
        base_mirror=_base_mirror(spec), registry_username=spec.image.registry_username,
        has_registry_username=spec.image.registry_username is not None,
        ngc_login=_image_host(spec.image.base) == NGC_REGISTRY and spec.image.base_login != "never",
        ngc_login_required=_image_host(spec.image.base) == NGC_REGISTRY and spec.image.base_login == "always",
        base_login=spec.image.base_login,
        regctl_source=pins.regctl_source,
        installs_bridge=spec.init_from is not None,
        bridge_install=_bridge_install(spec),
    )
    megatron = MegatronPlan(
        repo=spec.megatron.repo, source_url=spec.megatron.repo.removesuffix(".git"), commit=spec.megatron.commit,
        root=root,
    )
    groups = layout.rank_groups()
    adapter = facts.engine
    pretrain = _pretrain_plan(spec, facts, prices)
    launch = _launch_plan(spec, facts, pretrain, adapter)
    verify = verify_plan(spec, layout, groups, pretrain, facts.is_bounded_example, facts.run_root,
                         facts.prepared or (), facts.converted)
    prepare = prepare_plan(spec, facts)
    prepare_steps: tuple[Step, ...] = ()
    if prepare is not None:
        assert spec.training.data is not None  # a preparation step prepares training's data
        prepare_verify = prepare_verify_plan(facts.prepared or (), spec.training.data.tokenizer, prepare.output_dir)
        prepare_steps = (engine_step(adapter, prepare_request(spec, facts.run_root, facts.mount_path, PREPARE), spec,
                                     pins, (Artifact(PREPARE, "prepare.sh.j2"),),
                                     (Artifact("verify-prepare.sh", "verify.sh.j2"),),
                                     prepare=prepare, verify=prepare_verify),)
    before, after = init_steps(spec, init_plan(spec, facts), facts.run_root, facts.mount_path,
                               lambda request, plan: engine_step(adapter, request, spec, pins,
                                                                 (Artifact(request.script, request.script + ".j2"),),
                                                                 init=plan))
    train = engine_step(adapter, _train_request(spec, facts), spec, pins, (),
                        (Artifact(LAUNCH, "launch.sh.j2"), Artifact("verify.sh", "verify.sh.j2")),
                        launch=launch, verify=verify, pretrain=pretrain)
    steps = (
        # regctl only adds files to a copy of the base: an image that pip-installs Bridge is built by buildx.sh
        (Step(kind="image", artifacts=IMAGE_ARTIFACTS[:2] if spec.init_from is not None else IMAGE_ARTIFACTS),)
        + before + prepare_steps + (train,) + after
    )
    return Plan(
        header=header, name=spec.name, world_size=layout.world, run_root=facts.run_root, platform=spec.platform,
        image=image, megatron=megatron, parallel=layout, groups=groups, worker_ranks=layout.ranks_per_worker(),
        dockerfile_copy=("Megatron-LM", root), steps=steps,
        report=report(spec, facts, groups, launch, pins.job_image, pretrain, pinning(spec, lock, spec_display, train.artifacts[0].file))
        + time_section(pretrain) + stop_section(facts, pretrain.save_interval if pretrain else 0)
        + _steps_report(spec, facts, steps),
        summary=SUMMARY_ARTIFACTS, pictures=pictures(layout, groups, pretrain),
    )
