"""What Megatron-LM refuses or crashes on at start, decided before the job has its GPUs.

Three rules, each citing Megatron's line at the pinned commit:
- the pipeline split (megatron/pretrain.py: pipeline_split_refusal), exactly Megatron's checks, with
  the raw flags that change it (uneven first/last stages, the embedding and loss counted as layers,
  p2p overlap);
- validate_args on the compiled arguments (megatron/validate.py, derived from Megatron's source by
  tools/megatron_validate_args.py): a raw flag the parser accepts and validate_args refuses;
- what needs Transformer Engine or Apex, and what crashes whatever the image holds (megatron/kernels.py).
"""

from __future__ import annotations

from typing import Any, Iterator

from ...diagnostics import Diagnostic, Severity
from ...megatron import PINNED_SHORT
from ...megatron.pretrain import SPLIT_CONFIG_SOURCE_LINES, SPLIT_SOURCE_LINES, PipelineSplit, pipeline_split_refusal
from ...megatron.flags import FLAGS, Row
from ..context import RuleContext

COMMIT = PINNED_SHORT


def _pretrain(ctx: RuleContext) -> Any:
    t = ctx.sections["training"]
    if not ctx.facts.is_pretrain or t.model is None or t.model.num_layers is None:
        return None
    return t


def _values(ctx: RuleContext, t: Any) -> tuple[dict[str, Any], dict[str, int]]:
    """Megatron's values for the compiled arguments (typed flags, then raw args), and for each dest set by
    a raw arg, that arg's index in training.args. Nothing is loaded for a spec without raw args."""
    if not t.args:
        return {}, {}
    from ...megatron.validate import arg_values  # deferred: its data loads only for specs with raw args

    typed = [tok for f in ctx.facts.flags or () for tok in (f.name, *f.values)]
    values, where = arg_values(typed + list(t.args))
    return values, {d: i - len(typed) for d, i in where.items() if i >= len(typed)}


def split_of(t: Any, pipeline: int, values: dict[str, Any]) -> PipelineSplit:
    """The pipeline split a pretrain spec asks for: its typed fields and Megatron's values for raw flags."""
    def get(dest: str, default: Any) -> Any:
        value = values.get(dest, default)
        return default if not isinstance(value, type(default)) and value is not None else value
    return PipelineSplit(
        num_layers=t.model.num_layers, pipeline=pipeline, layers_per_virtual_stage=t.virtual_pipeline,
        account_for_embedding=bool(get("account_for_embedding_in_pipeline_split", False)),
        account_for_loss=bool(get("account_for_loss_in_pipeline_split", False)),
        first_stage_layers=values.get("decoder_first_pipeline_num_layers") if isinstance(
            values.get("decoder_first_pipeline_num_layers"), int) else None,
        last_stage_layers=values.get("decoder_last_pipeline_num_layers") if isinstance(
            values.get("decoder_last_pipeline_num_layers"), int) else None,
        overlap_p2p_comm=values.get("overlap_p2p_comm") is not False,
    )


_SPLIT_FIELDS = {"num_layers": ("training", "model", "num_layers"), "virtual_pipeline": ("training", "virtual_pipeline"),
                 "pipeline": ("parallelism", "pipeline"), "args": ("training", "args")}
_SPLIT_HINTS = {
    "num_layers": "use a multiple of the pipeline size, or let Megatron count the embedding and the loss as layers "
                  "(training.args: --account-for-embedding-in-pipeline-split, --account-for-loss-in-pipeline-split), "
                  "or give the first/last stage their own layer counts (--decoder-first-pipeline-num-layers, "
                  "--decoder-last-pipeline-num-layers)",
    "virtual_pipeline": "pick layers per virtual stage that divide the layers of each pipeline stage",
    "pipeline": "use more pipeline stages, or remove training.virtual_pipeline (or the flag that turns p2p overlap off)",
    "args": "change the pipeline flags in training.args so that the stages add up",
}


def check_pipeline_split(ctx: RuleContext) -> Iterator[Diagnostic]:
    t = _pretrain(ctx)
    if t is None:
        return
    values, where = _values(ctx, t)
    refusal = pipeline_split_refusal(split_of(t, ctx.sections["parallelism"].pipeline, values))
    if refusal is None:
        return
    path: tuple[str | int, ...] = _SPLIT_FIELDS[refusal.field]
    if refusal.field == "args":
        index = min((where[d] for d in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                                        "account_for_embedding_in_pipeline_split",
                                        "account_for_loss_in_pipeline_split") if d in where), default=None)
        path = ("training", "args", index) if index is not None else ("training", "model", "num_layers")
    code = "megatron-layers-pp" if refusal.field == "num_layers" else (
        "megatron-virtual-pipeline" if refusal.field in ("virtual_pipeline", "pipeline") else "megatron-layers-pp")
    yield ctx.locate(code, f"{refusal.message}: Megatron refuses it at start ({refusal.source} at {COMMIT})",
                     path, hint=_SPLIT_HINTS[refusal.field])


# The lines of validate_args the typed rules already word in the spec's terms (each a refusal the typed
# rules report on the bad-spec corpus: megatron-batch 710, megatron-train-length 1230-1250,
# megatron-hidden-heads 1283, megatron-seq-cp 1287, megatron-max-position 1299, megatron-lr 1305,
# megatron-experts 1487-1488; parallel-divisibility 425). Every other refusal is reported here.
TYPED_RULE_LINES = frozenset({425, 710, 1230, 1232, 1234, 1237, 1244, 1246, 1248, 1251, 1283, 1287, 1299, 1305,
                              1487, 1488}) | frozenset(SPLIT_SOURCE_LINES)
# The lines of TransformerConfig.__post_init__ (transformer_config.py) the typed rules already report:
# megatron-heads-tp 1196, megatron-experts 1327, and the pipeline split (megatron-layers-pp).
TYPED_RULE_CONFIG_LINES = frozenset({1196, 1327}) | frozenset(SPLIT_CONFIG_SOURCE_LINES)


def _typed_field(dest: str) -> tuple[str, ...] | None:
    """The typed spec field whose flag sets DEST, if one does (the one flag table)."""
    from ...megatron.argflags import _surface  # deferred: the argument surface loads only when a refusal is found
    names = {name for name, entry in _surface(False).flags.items() if entry["dest"] == dest}
    return next((row.path for row in FLAGS if isinstance(row, Row) and row.flag in names), None)


def check_validate_args(ctx: RuleContext) -> Iterator[Diagnostic]:
    """What validate_args refuses at start (an exit, an assert, a raise) that no typed rule reports: a raw
    flag's, located at training.args[i], or a typed field's, located at that field."""
    t = _pretrain(ctx)
    if t is None or not ctx.facts.pretrain_complete or ctx.facts.layout is None:
        return
    from ...megatron.validate import arg_values, refusals  # deferred: Megatron's validate_args table loads only for complete pretrain specs

    typed = [tok for f in ctx.facts.flags or () for tok in (f.name, *f.values)]
    values, at = arg_values(typed + list(t.args))
    where = {d: i - len(typed) for d, i in at.items() if i >= len(typed)}
    for refusal in refusals(values, ctx.facts.layout.world):
        raw = sorted(where[d] for d in refusal.reads if d in where)
        who = "validate_args" if refusal.in_validate_args else "TransformerConfig"
        typed_lines = TYPED_RULE_LINES if refusal.in_validate_args else TYPED_RULE_CONFIG_LINES
        if raw:
            index = raw[0]
            flags = ", ".join(dict.fromkeys(t.args[i].split("=", 1)[0] for i in raw))
            if refusal.line in (SPLIT_SOURCE_LINES if refusal.in_validate_args else SPLIT_CONFIG_SOURCE_LINES):
                continue
            yield ctx.locate(
                "megatron-validate-args", f"training.args[{index}]: Megatron's {who} refuses {flags} at "
                f"start on every rank ({refusal.where} at {COMMIT}): {refusal.message}", ("training", "args", index),
                hint=_validate_hint(refusal.message, flags))
            return
        if refusal.line in typed_lines:
            continue
        fields = [p for p in (_typed_field(d) for d in refusal.reads) if p is not None]
        if not fields:
            continue
        names = ", ".join(dict.fromkeys(".".join(p) for p in fields))
        yield ctx.locate(
            "megatron-validate-args", f"{names}: Megatron's {who} refuses this at start on every rank "
            f"({refusal.where} at {COMMIT}): {refusal.message}", fields[0], hint=f"change {names} so that Megatron's "
            f"check holds" + (f": `{refusal.message[7:]}`" if refusal.message.startswith("assert ") else ""))
        return


def _validate_hint(message: str, flags: str) -> str:
    if message.startswith("assert "):
        return f"make `{message[7:]}` hold: give the flags it reads, or remove {flags}"
    return f"remove {flags}; Megatron says: {message}" if "use" in message else f"remove or change {flags}"


def check_kernel_needs(ctx: RuleContext) -> Iterator[Diagnostic]:
    """Configurations that need Transformer Engine or Apex (a warning: the image may hold them), and
    those that crash whatever the image holds (an error)."""
    t = _pretrain(ctx)
    if t is None:
        return
    from ...megatron.kernels import needs, runtime_config  # deferred: the kernel table loads only for pretrain specs

    values, where = _values(ctx, t)
    config = runtime_config(t, ctx.sections["parallelism"].tensor, values)
    for need in needs(config):
        path: tuple[str | int, ...] = need.field
        if path == ("training", "args"):
            index = where.get("recompute_modules")
            path = ("training", "args", index) if index is not None else ("training",)
        if need.needs:
            message = (f"{need.cause}; it runs only on an image with {need.needs}, which transformer_impl: local "
                       "does not need and so the spec does not promise")
            yield ctx.locate(need.code, message, path, severity=Severity.WARNING, hint=need.fix)
        else:
            yield ctx.locate(need.code, f"{need.cause}, whatever the image holds", path, hint=need.fix)
