"""The preparation step: tools/preprocess_data.py per input, into a temporary directory, published
prefix by prefix with a manifest written last."""

from __future__ import annotations

from ..check.facts import Facts
from ..megatron.data import MANIFEST_SUFFIX, PREPROCESS_SCRIPT, Prefix, tokenizer_record
from ..megatron.pretrain import padded_vocab_size, vocab_size
from ..megatron.flags import SpecView, tokenizer_flags
from ..platform.engine import StepRequest
from ..schema.records import JobSpec
from .build_words import flag_words
from .shell import Var, Word
from .types import DataCheck, PrepareInputPlan, PrepareOutput, PreparePlan

# Counts of a published prefix, read back with Megatron's own reader.
COUNT_PROBE = (
    "import sys; from megatron.core.datasets.indexed_dataset import IndexedDataset; "
    "ds = IndexedDataset(sys.argv[1]); print('documents:', len(ds.document_indices) - 1); "
    "print('sequences:', len(ds)); print('tokens:', int(ds.sequence_lengths.sum())); "
    # the largest token id, which launch.sh compares with the model's embedding rows (numpy is in every
    # image Megatron runs in; without it, the line is left out and launch.sh skips that comparison)
    "import importlib.util; np = importlib.util.find_spec('numpy') and __import__('numpy'); "
    "np and print('max_token_id:', int(np.memmap(sys.argv[1] + '.bin', dtype=ds.index.dtype, mode='r').max()) "
    "if len(ds) else -1)"
)


def prepare_plan(spec: JobSpec, facts: Facts) -> PreparePlan | None:
    """The preparation of a spec with training.data.prepare, or None."""
    data = spec.training.data
    if data is None or data.prepare is None:
        return None
    prepare = data.prepare
    assert facts.prepared is not None and facts.prepare_output_dir is not None
    by_input: dict[str, list[Prefix]] = {}
    for p in facts.prepared:
        by_input.setdefault(p.input, []).append(p)
    hf_path = None if facts.hf is None or spec.init_from is None else spec.init_from.huggingface.path
    view = SpecView(spec.training, spec.parallelism, spec.resources, hf=facts.hf, hf_path=hf_path)
    tokenizer = tuple(flag_words(f) for f in tokenizer_flags(view))
    inputs = []
    for path, prefixes in by_input.items():
        stem = prefixes[0].stem
        command = (
            (Word.lit("python"), Word((Var("MEGATRON_ROOT"), "/" + PREPROCESS_SCRIPT))),
            (Word.lit("--input"), Word.lit(path)),
            (Word.lit("--output-prefix"), Word((Var("tmp"), "/" + stem))),
            (Word.lit("--json-keys"),) + tuple(Word.lit(k) for k in prepare.json_keys),
            (Word.lit("--workers"), Word.lit(str(prepare.workers))),
        ) + (((Word.lit("--append-eod"),),) if prepare.append_eod else ()) + tokenizer
        outputs = tuple(PrepareOutput(p.key, p.prefix.rsplit("/", 1)[1], p.prefix) for p in prefixes)
        inputs.append(PrepareInputPlan(path, stem, outputs, command))
    # What a prefix is made from besides its input: a manifest that records anything else is stale
    # and prepare.sh prepares that input again (the tokenizer's files are hashed when it runs).
    manifest = tokenizer_record(data.tokenizer) + (("append_eod", "true" if prepare.append_eod else "false"),)
    model = data.tokenizer.model
    if model is None and facts.hf is not None and spec.init_from is not None:
        model = spec.init_from.huggingface.path  # the tokenizer of the model the job continues
    vocabulary = tuple(value for value in (data.tokenizer.vocab_file, data.tokenizer.merge_file, model)
                       if isinstance(value, str) and value.startswith("/"))
    return PreparePlan(output_dir=facts.prepare_output_dir, inputs=tuple(inputs), manifest=manifest,
                       vocabulary=vocabulary, count_probe=COUNT_PROBE)


def prepare_request(spec: JobSpec, run_root: str, mount: str, script: str) -> StepRequest:
    """What the preparation asks of the engine: one node, CPUs and the shared storage, no GPU."""
    data = spec.training.data
    assert data is not None and data.prepare is not None  # a spec with a preparation step (prepare_plan)
    return StepRequest(kind="prepare", name=f"{spec.name}-prepare"[:63], nodes=1, gpus_per_node=0,
                       flavor=data.prepare.flavor, rdma=False, slow_training_detection=False,
                       run_root=run_root, mount_path=mount, script=script)


def data_check(spec: JobSpec, facts: Facts) -> DataCheck:
    """What launch.sh checks of the data before torchrun (the prefixes a preparation writes, or the spec's
    paths): a prefix never prepared, or prepared with another tokenizer or a larger vocabulary, fails
    there with its reason in launch.log, not in Megatron after the job has its GPUs."""
    t = spec.training
    data = t.data if facts.is_pretrain else None
    if data is None or data.mock:
        return DataCheck(False, (), MANIFEST_SUFFIX, (), False, 0)
    prefixes = tuple(p.prefix for p in facts.prepared) if facts.prepared else tuple(data.paths)
    lines = tuple(f"{name}: {value}" for name, value in tokenizer_record(data.tokenizer))
    vocab = vocab_size(t) if t.model is not None else None
    rows = padded_vocab_size(vocab, t.model.make_vocab_size_divisible_by, spec.parallelism.tensor) \
        if vocab and t.model is not None else 0
    return DataCheck(bool(prefixes), prefixes, MANIFEST_SUFFIX, lines, bool(rows), rows)
