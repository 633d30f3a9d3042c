"""The one flag table: each typed spec field and the Megatron-LM flag it compiles to.

The plan passes the flags the table gives, the rules refuse raw args that repeat one, and `import`
maps a script's flags back to the same fields, all from FLAGS below. A new typed flag is one row
here plus its field in schema/models.py. Flag names and defaults are those of
megatron/training/arguments.py at the pinned commit 571370c829ca768fe37244f4e2e7f28d8accc4ab.
"""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..tuples import NamedTuple
from ..schema.records import Image, Parallelism, Resources, Training
from .data import Prefix
from .fp8 import recipe_of
from .parallel import data_parallel_size, world_size
from .performance import FLAGS as PERFORMANCE_FLAGS, bridge_te_kernels, launch_flags, resolve
from .runfiles import RUN_CHECKPOINT_DIR, TENSORBOARD_DIR

if TYPE_CHECKING:  # the architecture tables load for init_from specs only
    from .huggingface import HFArchitecture

# When a row's flag is passed. A field left out is Megatron's own default, so only what a spec
# says differs from Megatron appears on the command line.
ALWAYS = "always"  # a required field
GIVEN = "given"  # the spec wrote the field (after extends and --set), even if equal to the default
SET = "set"  # the field is not null
TRUE = "true"  # a switch: the field is true
NOT_DEFAULT = "not-default"  # the value differs from Megatron's default, or the spec wrote it
EQUALS = "equals"  # the field equals the row's constant (kind const:VALUE)

# What fused_kernels: false passes besides --no-persist-layer-norm (kernels that need Apex or TE).
UNFUSED_FLAGS = ("--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion", "--no-bias-gelu-fusion",
                 "--no-bias-dropout-fusion")


class Flag(NamedTuple):
    """One Megatron-LM flag and its values (none for a switch). A value may reference the run root."""

    name: str
    values: tuple[str, ...] = ()
    run_root_relative: bool = False  # the single value is a path under $RUN_ROOT


class SpecView(NamedTuple):
    """The sections of a spec that validated, as Megatron's helpers read a whole spec
    (check/facts.py builds it: training with init_from's architecture and tokenizer filled in)."""

    training: Training
    parallelism: Parallelism
    resources: Resources | None
    prepared: tuple[Prefix, ...] | None = None  # the preparation step's prefixes: training's data
    hf: HFArchitecture | None = None  # init_from's architecture: its flags replace the typed model's
    hf_path: str | None = None  # the Hugging Face directory: its tokenizer
    converted: str | None = None  # the converted checkpoint: --pretrained-checkpoint
    image: Image | None = None  # the image the job runs in: what it installs decides Megatron's optimizer


class Row(NamedTuple):
    """A typed field and its flag. kind: int | float | str | switch | const:VALUE | run-root:DIR."""

    flag: str
    path: tuple[str, ...]  # the field in the spec, as YAML spells it
    kind: str
    when: str
    requires: tuple[str, ...] | None = None  # passed only when this other field is truthy
    default: object = None  # Megatron's default, for NOT_DEFAULT


class Custom(NamedTuple):
    """Flags derived from several fields at once, at their place in the order. Owned flags are
    the typed sections' alone; the others (the --no-*-fusion switches) a spec may pass in raw args
    when its typed fields do not already pass them."""

    flags: tuple[str, ...]
    derive: Callable[[SpecView], Iterator[Flag]]
    owned: bool = True


def _path(text: str) -> tuple[str, ...]:
    return tuple(text.split("."))


def _kernel_flags(spec: SpecView) -> Iterator[Flag]:
    t = spec.training
    m = t.model
    assert m is not None  # a complete pretrain spec (check/facts.py)
    if m.transformer_impl == "local" or not t.fused_kernels:
        # Megatron asserts persist_layer_norm is off with torch's LayerNorm (no Apex, no TE)
        yield Flag("--no-persist-layer-norm")
    if not t.fused_kernels:
        yield from (Flag(f) for f in UNFUSED_FLAGS)
        if m.swiglu:
            yield Flag("--no-bias-swiglu-fusion")
        if m.position_embedding == "rope":
            # TransformerConfig (transformer_config.py:1961) refuses rope fusion without TE >= 1.4
            yield Flag("--no-rope-fusion")


# FP8 (megatron/fp8.py): the BF16 base precision and TE's recipe; --bf16 stays the precision row's.
FP8_FLAGS = ("--fp8-format", "--fp8-recipe", "--fp8-amax-history-len", "--fp8-amax-compute-algo")


# Megatron's defaults (transformer_config.py:518-555): a value equal to one is passed only when the
# spec wrote it, as NOT_DEFAULT rows do; the format has none (None means no FP8).
FP8_MEGATRON_DEFAULTS = (None, "delayed", 1, "most_recent")


def _fp8_flags(spec: SpecView) -> Iterator[Flag]:
    recipe = recipe_of(spec.training)
    if recipe is None:
        return
    written = spec.training.fp8.model_fields_set if spec.training.fp8 is not None else frozenset()
    yield Flag("--bf16")
    for name, field, value, default in zip(FP8_FLAGS, recipe._fields, recipe, FP8_MEGATRON_DEFAULTS):
        if value != default or field in written:
            yield Flag(name, (str(value),))


def _performance_flags(spec: SpecView) -> Iterator[Flag]:
    res, par = spec.resources, spec.parallelism
    data = 1 if res is None else data_parallel_size(world_size(res.workers, res.gpus_per_worker), par.tensor,
                                                    par.pipeline, par.context)
    yield from (Flag(name, values) for name, values in launch_flags(resolve(spec.training, data)))


def _data_path_flags(spec: SpecView) -> Iterator[Flag]:
    data = spec.training.data
    assert data is not None  # a complete pretrain spec (check/facts.py)
    if data.mock:
        return
    prepared = spec.prepared  # a preparation step's prefixes
    if prepared:
        if any(p.weight is not None for p in prepared):
            yield Flag("--data-path", tuple(v for p in prepared for v in (number(p.weight or 1.0), p.prefix)))
        else:
            yield Flag("--data-path", tuple(p.prefix for p in prepared))
        return
    if data.weights is not None:
        yield Flag("--data-path", tuple(v for w, p in zip(data.weights, data.paths) for v in (number(w), p)))
    else:
        yield Flag("--data-path", tuple(data.paths))


def R(flag: str, path: str, kind: str, when: str, requires: str | None = None, default: object = None) -> Row:
    return Row(flag, _path(path), kind, when, _path(requires) if requires else None, default)


FLAGS: tuple[Row | Custom, ...] = (
    R("--tensor-model-parallel-size", "parallelism.tensor", "int", NOT_DEFAULT, default=1),
    R("--pipeline-model-parallel-size", "parallelism.pipeline", "int", NOT_DEFAULT, default=1),
    R("--context-parallel-size", "parallelism.context", "int", NOT_DEFAULT, default=1),
    R("--expert-model-parallel-size", "parallelism.expert", "int", NOT_DEFAULT, default=1),
    R("--expert-tensor-parallel-size", "parallelism.expert_tensor", "int", SET),
    R("--num-layers-per-virtual-pipeline-stage", "training.virtual_pipeline", "int", SET),
    R("--sequence-parallel", "training.sequence_parallel", "switch", TRUE),
    R("--use-distributed-optimizer", "training.distributed_optimizer", "switch", TRUE),
    R("--num-layers", "training.model.num_layers", "int", ALWAYS),
    R("--hidden-size", "training.model.hidden_size", "int", ALWAYS),
    R("--num-attention-heads", "training.model.num_attention_heads", "int", ALWAYS),
    R("--ffn-hidden-size", "training.model.ffn_hidden_size", "int", SET),
    R("--group-query-attention", "training.model.num_query_groups", "switch", SET),
    R("--num-query-groups", "training.model.num_query_groups", "int", SET),
    R("--seq-length", "training.model.seq_length", "int", ALWAYS),
    R("--max-position-embeddings", "training.model.max_position_embeddings", "int", ALWAYS),
    R("--vocab-size", "training.model.vocab_size", "int", SET),
    R("--make-vocab-size-divisible-by", "training.model.make_vocab_size_divisible_by", "int", GIVEN),
    R("--swiglu", "training.model.swiglu", "switch", TRUE),
    R("--normalization", "training.model.normalization", "str", GIVEN),
    R("--position-embedding-type", "training.model.position_embedding", "str", GIVEN),
    R("--rotary-base", "training.model.rotary_base", "int", SET),
    R("--untie-embeddings-and-output-weights", "training.model.untie_embeddings", "switch", TRUE),
    R("--disable-bias-linear", "training.model.disable_bias_linear", "switch", TRUE),
    R("--num-experts", "training.model.num_experts", "int", SET),
    R("--moe-router-topk", "training.model.moe_router_topk", "int", GIVEN, requires="training.model.num_experts"),
    R("--moe-ffn-hidden-size", "training.model.moe_ffn_hidden_size", "int", SET, requires="training.model.num_experts"),
    R("--transformer-impl", "training.model.transformer_impl", "str", GIVEN),
    Custom(("--no-persist-layer-norm", *UNFUSED_FLAGS, "--no-bias-swiglu-fusion", "--no-rope-fusion"), _kernel_flags,
           owned=False),
    R("--recompute-granularity", "training.recompute.granularity", "str", SET),
    R("--recompute-method", "training.recompute.method", "str", SET),
    R("--recompute-num-layers", "training.recompute.num_layers", "int", SET),
    R("--micro-batch-size", "training.batch.micro", "int", ALWAYS),
    R("--global-batch-size", "training.batch.global", "int", ALWAYS),
    R("--train-iters", "training.train_iters", "int", SET),
    R("--train-samples", "training.train_samples", "int", SET),
    R("--lr", "training.optimizer.lr", "float", ALWAYS),
    R("--min-lr", "training.optimizer.min_lr", "float", GIVEN),
    R("--lr-decay-style", "training.optimizer.decay_style", "str", GIVEN),
    R("--lr-warmup-iters", "training.optimizer.warmup_iters", "int", GIVEN),
    R("--lr-decay-iters", "training.optimizer.decay_iters", "int", SET),
    R("--lr-warmup-samples", "training.optimizer.warmup_samples", "int", SET),
    R("--lr-decay-samples", "training.optimizer.decay_samples", "int", SET),
    R("--weight-decay", "training.optimizer.weight_decay", "float", GIVEN),
    R("--clip-grad", "training.optimizer.clip_grad", "float", GIVEN),
    R("--adam-beta1", "training.optimizer.adam_beta1", "float", GIVEN),
    R("--adam-beta2", "training.optimizer.adam_beta2", "float", GIVEN),
    R("--bf16", "training.precision", "const:bf16", EQUALS),
    R("--fp16", "training.precision", "const:fp16", EQUALS),
    Custom(FP8_FLAGS, _fp8_flags),
    R("--mock-data", "training.data.mock", "switch", TRUE),
    Custom(("--data-path",), _data_path_flags),
    R("--split", "training.data.split", "str", SET),
    R("--tokenizer-type", "training.data.tokenizer.type", "str", GIVEN),
    R("--vocab-file", "training.data.tokenizer.vocab_file", "str", SET),
    R("--merge-file", "training.data.tokenizer.merge_file", "str", SET),
    R("--tokenizer-model", "training.data.tokenizer.model", "str", SET),
    R("--save", "training.checkpoint", f"run-root:{RUN_CHECKPOINT_DIR}", ALWAYS),
    R("--save-interval", "training.checkpoint.save_interval", "int", ALWAYS),
    R("--ckpt-format", "training.checkpoint.format", "str", GIVEN),
    R("--load", "training.checkpoint.resume", f"run-root:{RUN_CHECKPOINT_DIR}", TRUE),
    R("--override-opt_param-scheduler", "training.checkpoint.scheduler", "const:spec", EQUALS,
      requires="training.checkpoint.resume"),
    R("--use-checkpoint-opt_param-scheduler", "training.checkpoint.scheduler", "const:checkpoint", EQUALS,
      requires="training.checkpoint.resume"),
    R("--log-interval", "training.logging.interval", "int", GIVEN),
    R("--eval-interval", "training.eval.interval", "int", GIVEN),
    R("--eval-iters", "training.eval.iters", "int", GIVEN),
    R("--log-throughput", "training.logging.throughput", "switch", TRUE),
    R("--tensorboard-dir", "training.logging.tensorboard", f"run-root:{TENSORBOARD_DIR}", TRUE),
    Custom(PERFORMANCE_FLAGS, _performance_flags),
)

ROWS: tuple[Row, ...] = tuple(r for r in FLAGS if isinstance(r, Row))
# A stop that saves (megatron/stop.py derives them from the stop section, the engine's limit and the
# estimates, after the table's flags): the launch forwards SIGTERM, so no other --exit-signal.
STOP_FLAGS = ("--exit-signal-handler", "--exit-signal", "--exit-duration-in-mins")
# Flags the typed sections own whether or not this spec sets them: raw args must not repeat them.
OWNED_FLAGS = frozenset(r.flag for r in ROWS) | frozenset(
    f for c in FLAGS if isinstance(c, Custom) and c.owned for f in c.flags) | frozenset(
    ("--pretrained-checkpoint", "--exit-on-missing-checkpoint") + STOP_FLAGS)


def attribute(name: str) -> str:
    """The record attribute of a YAML key: `global` is `global_` (a Python keyword)."""
    return name + "_" if keyword.iskeyword(name) else name


def _lookup(spec: SpecView, path: tuple[str, ...]) -> tuple[Any, Any]:
    """(the section holding the field, the field's value); (None, None) when a section is absent."""
    section: Any = spec
    for name in path[:-1]:
        section = getattr(section, attribute(name))
        if section is None:
            return None, None
    return section, getattr(section, attribute(path[-1]))


def number(value: float) -> str:
    """A float as Python (and so Megatron's argparse) round-trips it: 0.0001, 1e-05, 1.0."""
    return repr(float(value))


def _passes(row: Row, section: Any, value: Any) -> bool:
    if section is None:
        return False
    if row.when == ALWAYS:
        return True
    if row.when == GIVEN:
        return row.path[-1] in section.model_fields_set or attribute(row.path[-1]) in section.model_fields_set
    if row.when == SET:
        return value is not None
    if row.when == TRUE:
        return bool(value)
    if row.when == NOT_DEFAULT:
        return value != row.default or row.path[-1] in section.model_fields_set
    if row.when == EQUALS:
        result: bool = value == row.kind.partition(":")[2]
        return result
    raise ValueError(f"unknown condition {row.when!r}")


def _flag(row: Row, value: Any) -> Flag:
    kind, _, arg = row.kind.partition(":")
    if kind in ("switch", "const"):
        return Flag(row.flag)
    if kind == "run-root":
        return Flag(row.flag, (arg,), run_root_relative=True)
    return Flag(row.flag, (number(value) if kind == "float" else str(value),))


# With init_from, the architecture and the tokenizer come from the Hugging Face model: its flags
# (megatron/huggingface.py) take the place of these rows, at the first of them.
MODEL_PATH = ("training", "model")
HF_MODEL_FIELDS = frozenset({
    "num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "num_query_groups",
    "max_position_embeddings", "vocab_size", "make_vocab_size_divisible_by", "swiglu", "normalization",
    "position_embedding", "rotary_base", "untie_embeddings", "disable_bias_linear", "num_experts", "moe_router_topk",
    "moe_ffn_hidden_size",
})
INIT_FLAGS = ("--pretrained-checkpoint", "--exit-on-missing-checkpoint")


def _words_to_flags(words: tuple[str, ...]) -> list[Flag]:
    out: list[Flag] = []
    for word in words:
        if word.startswith("--"):
            out.append(Flag(word))
        else:
            out[-1] = out[-1]._replace(values=out[-1].values + (word,))
    return out


def _hf_replaces(row: Row) -> bool:
    return ((row.path[:2] == MODEL_PATH and row.path[2] in HF_MODEL_FIELDS)
            or row.path[: len(TOKENIZER_PATH)] == TOKENIZER_PATH)


def flags(spec: SpecView) -> list[Flag]:
    """Every flag the typed sections of a pretrain spec set, in the table's order."""
    out: list[Flag] = []
    hf = spec.hf  # init_from's architecture
    for entry in FLAGS:
        if isinstance(entry, Custom):
            out.extend(entry.derive(spec))
            continue
        if hf is not None and _hf_replaces(entry):
            if entry.flag == "--num-layers":
                out.extend(_words_to_flags(hf.flags))
                assert spec.training.model is not None  # a complete pretrain spec (check/facts.py)
                if bridge_te_kernels(spec.training):
                    out.extend(Flag(f) for f in hf.te_flags)  # Bridge's MoE kernel choices, TE only
            elif entry.flag == "--tokenizer-type":
                from .huggingface import tokenizer_flags as hf_tokenizer_flags  # deferred: init_from specs only

                assert spec.hf_path is not None  # an architecture comes with its directory
                out.extend(_words_to_flags(hf_tokenizer_flags(spec.hf_path)))
            continue
        if entry.requires is not None and not _lookup(spec, entry.requires)[1]:
            continue
        section, value = _lookup(spec, entry.path)
        if _passes(entry, section, value):
            out.append(_flag(entry, value))
        if hf is not None and spec.converted is not None and entry.flag == "--load" and _passes(entry, section, value):
            # restart-safe: the first start loads the converted weights (no run checkpoint yet), a
            # restart its own checkpoint; never a silent random start (checkpointing.py:1628-1636)
            out += [Flag(INIT_FLAGS[0], (spec.converted,)), Flag(INIT_FLAGS[1])]
    return out


TOKENIZER_PATH = ("training", "data", "tokenizer")


def tokenizer_flags(spec: SpecView) -> list[Flag]:
    """The tokenizer's flags alone, from the same rows as training's: tools/preprocess_data.py
    reads them with Megatron's own _add_tokenizer_args, so both steps tokenize alike by construction."""
    if spec.hf is not None:
        from .huggingface import tokenizer_flags as hf_tokenizer_flags  # deferred: init_from specs only

        assert spec.hf_path is not None  # an architecture comes with its directory
        return _words_to_flags(hf_tokenizer_flags(spec.hf_path))
    out = []
    for row in ROWS:
        if row.path[: len(TOKENIZER_PATH)] == TOKENIZER_PATH:
            section, value = _lookup(spec, row.path)
            if _passes(row, section, value):
                out.append(_flag(row, value))
    return out


def arg_flag_name(arg: str) -> str:
    """The flag a raw training.args entry names: `--flag` or `--flag=value` -> `--flag`."""
    return arg.split("=", 1)[0]


def import_table() -> dict[str, tuple[tuple[str, ...], str]]:
    """flag -> (spec path, kind) for the flags `import` turns back into typed fields: every row whose
    flag alone determines its field's value."""
    table: dict[str, tuple[tuple[str, ...], str]] = {}
    for row in ROWS:
        if row.kind.startswith("run-root") or (row.kind == "switch" and row.when != TRUE):
            continue
        if row.kind.startswith("const:") and row.requires is not None:
            continue
        table[row.flag] = (row.path, row.kind)
    return table


# Flags `import` turns into typed fields of their own (training.fp8, training.performance).
IMPORTED_TYPED = frozenset(FP8_FLAGS) | frozenset(PERFORMANCE_FLAGS)
# Flags the compiler derives from other fields; present in a script, they are implied, not copied.
IMPLIED = (frozenset(f for c in FLAGS if isinstance(c, Custom) for f in c.flags
                     if f != "--data-path" and f not in IMPORTED_TYPED)
           | frozenset(r.flag for r in ROWS if r.kind == "switch" and r.when != TRUE)
           | frozenset(r.flag for r in ROWS if r.kind.startswith("const:") and r.requires is not None))


def at_default(flag: str, values: tuple[str, ...]) -> bool:
    """Whether a typed flag passes the value Megatron takes without it (a NOT_DEFAULT row whose
    field was written out at the default): Megatron receives the same value either way."""
    for row in ROWS:
        if row.flag == flag and row.when == NOT_DEFAULT and row.default is not None and row.kind != "switch":
            shown = number(float(str(row.default))) if row.kind == "float" else str(row.default)
            return values == (shown,)
    return False
