"""init_from: continuing from Hugging Face weights through Megatron Bridge, checked before a GPU."""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity, make_error
from ...megatron import BRIDGE_MEGATRON
from ...megatron.hf.families import NEEDS_TE
from ...megatron.pretrain import MODEL_REQUIRED, PRETRAIN_SCRIPT
from ...paths import is_within
from ..context import RuleContext

HERE = ("init_from",)


def check_model_fields(ctx: RuleContext) -> Iterator[Diagnostic]:
    training = ctx.sections["training"]
    if not ctx.facts.is_pretrain or training.model is None or "init_from" in ctx.sections:
        return
    for field in MODEL_REQUIRED:
        if getattr(training.model, field) is None:
            yield ctx.locate("missing-key", f"missing required key '{field}' in training.model", ("training", "model"),
                             hint=f"add `{field}:` to training.model, or take the architecture from init_from")


_REFUSAL_HINT = ("commit the model's config.json as published; a model this refusal names cannot continue from its "
                 "Hugging Face weights through Bridge v0.5.1 and pretrain_gpt.py (docs/bridge.md lists the families "
                 "that can)")


def _refusal(ctx: RuleContext, error: str, key: str | None) -> Diagnostic:
    """The derivation's refusal, at the config.json key it names (its parent object's key, else the spec's
    init_from.huggingface.config when the file does not hold the key)."""
    config = ctx.facts.hf_config
    positions = config.positions if config is not None else {}
    where = positions.get(key) or positions.get((key or "").split(".")[0]) if key else None
    message = f"init_from.huggingface.config: {error}"
    if config is None or where is None:
        return ctx.locate("init-from-config", message, HERE + ("huggingface", "config"), hint=_REFUSAL_HINT)
    return make_error("init-from-config", message, hint=_REFUSAL_HINT, file=config.shown, line=where[0],
                      column=where[1], key_path=HERE + ("huggingface", "config"))


def check_init_from(ctx: RuleContext) -> Iterator[Diagnostic]:
    init: Any = ctx.sections["init_from"]
    facts = ctx.facts
    if not facts.is_pretrain:
        yield ctx.locate("init-from", f"init_from needs training.script: {PRETRAIN_SCRIPT} (the converted "
                         "checkpoint is a Megatron-LM GPT)", HERE, key=True)
        return
    if facts.hf_error is not None:
        yield _refusal(ctx, facts.hf_error, facts.hf_error_key)
    model = ctx.sections["training"].model
    if facts.hf is not None and facts.hf.family in NEEDS_TE and model is not None and model.transformer_impl == "local":
        yield ctx.locate("init-from-config", f"init_from.huggingface.config: {facts.hf.architecture}: "
                         f"{NEEDS_TE[facts.hf.family]}; neither Bridge's conversion nor training can build it "
                         "with transformer_impl: local", ("training", "model", "transformer_impl"),
                         hint="use transformer_impl: transformer_engine (an image with Transformer Engine)")
    size = facts.convert
    # with init_from.converted given, the conversion is done elsewhere: convert.sh only checks it is
    # there and refuses to convert, naming the memory (templates/convert.sh.j2)
    if facts.hf is not None and size is not None and size.gpus == 0 and init.converted is None:
        from ...megatron.hf.size import parameter_count  # deferred: init_from specs only: model sizes

        res: Any = ctx.sections.get("resources")
        gpus = res.gpus_per_worker if res is not None else 1
        yield ctx.locate("init-from-config", f"init_from.huggingface.config: converting {facts.hf.architecture} "
                         f"({parameter_count(facts.hf).total / 1e9:.1f} B parameters, {size.gib_total:.0f} GiB in "
                         f"bf16) needs {size.gib_per_gpu:.0f} GiB on each GPU even split over the {gpus} GPUs of one "
                         "worker, more than a GPU holds; the generated convert step runs on one worker",
                         HERE + ("huggingface", "config"),
                         hint="convert on several workers outside this job and set init_from.converted to that "
                              "checkpoint (convert.sh then only checks it is there)")
    training = ctx.doc.data.get("training", {})
    checkpoint = training.get("checkpoint") if isinstance(training, dict) else None
    if isinstance(checkpoint, dict) and checkpoint.get("resume") is False:
        yield ctx.locate("init-from", "init_from needs training.checkpoint.resume: true: the converted weights "
                         "load only where the run's own checkpoint does not exist yet (--load)",
                         ("training", "checkpoint", "resume"),
                         hint="remove resume: false; a restart then continues the run's own checkpoint")
    pinned = BRIDGE_MEGATRON[init.bridge]
    megatron: Any = ctx.sections.get("megatron")
    if megatron is not None and megatron.commit != pinned:
        yield ctx.locate("init-from", f"init_from.bridge {init.bridge} was checked against Megatron-LM "
                         f"{pinned[:10]} (Core 0.18), but megatron.commit is {megatron.commit[:10]}",
                         ("megatron", "commit"), severity=Severity.WARNING,
                         hint="convert with the Bridge release that pairs with the pinned Megatron commit")
    mount, roots, run_root = facts.mount_path, facts.read_only_roots, facts.run_root
    if mount is None:
        return
    source = init.huggingface.path
    if not (is_within(source, mount) or any(is_within(source, r) for r in roots)):
        yield ctx.locate("init-from-path", f"init_from.huggingface.path ({source}) is not on the job's storage "
                         f"({mount}{''.join(' or ' + r for r in roots)})", HERE + ("huggingface", "path"),
                         hint="download the model onto the shared storage (init_from.huggingface.modelscope does)")
    outputs = [("converted", facts.converted, HERE + (("converted",) if init.converted else ()))]
    if init.export is not None:
        outputs.append(("export.path", init.export.path, HERE + ("export", "path")))
    for name, path, where in outputs:
        if path is None:
            continue
        if any(is_within(path, r) for r in roots) or not is_within(path, mount) or path == mount:
            yield ctx.locate("init-from-path", f"init_from.{name} ({path}) is not writable shared storage under "
                             f"{mount}", where, hint=f"write it under {mount}/checkpoints/")
        elif run_root is not None and is_within(path, run_root):
            yield ctx.locate("init-from-path", f"init_from.{name} ({path}) is inside the run root ({run_root}); "
                             "weights outlive a run", where, hint=f"write it under {mount}/checkpoints/")


def check_init_contradictions(ctx: RuleContext) -> Iterator[Diagnostic]:
    hf = ctx.facts.hf
    init: Any = ctx.sections["init_from"]
    model = ctx.sections["training"].model
    if hf is None or model is None:
        return
    from ...megatron.huggingface import contradictions  # deferred: init_from specs only

    given = {f: getattr(model, f) for f in model.model_fields_set}
    # the spec's own values: the effective model reads the architecture's
    raw = ctx.doc.data.get("training", {}).get("model", {})
    given = {f: raw.get(f) for f in given if isinstance(raw, dict) and f in raw}
    for c in contradictions(hf, given, ctx.facts.hf_config or {}):
        yield ctx.locate("init-from-contradiction", c.message(init.huggingface.config), ("training", "model", c.field),
                         hint=f"remove training.model.{c.field}: init_from gives it")
