"""Rules of the preparation step: readable inputs, writable outputs, one tokenizer with its files."""

from __future__ import annotations

import re

from typing import Any, Iterator

from ...diagnostics import Diagnostic
from ...megatron.data import NEEDS_MODEL, NEEDS_VOCAB_AND_MERGES, input_stem
from ...megatron.pretrain import KNOWN_VOCAB
from ...paths import is_within, normalize_path
from ..context import RuleContext

HERE = ("training", "data", "prepare")


def _prepare(ctx: RuleContext) -> Any:
    training = ctx.sections["training"]
    if not ctx.facts.is_pretrain or training.data is None:
        return None
    return training.data.prepare


GLOB = r"[*?\[]"  # what a shell or glob() would expand; a spec's path is taken literally (re.search: compiled at the first use)


def check_data_path_globs(ctx: RuleContext) -> Iterator[Diagnostic]:
    # --data-path takes prefixes literally (Megatron opens PREFIX.bin and PREFIX.idx): a pattern there
    # fails when the job runs, as it does for a preparation's input
    data = ctx.sections["training"].data
    if data is None:
        return
    for index, path in enumerate(data.paths):
        if re.search(GLOB, path):
            yield ctx.locate(
                "path-glob", f"training.data.paths[{index}] ({path}) is a pattern: Megatron opens each prefix's "
                ".bin and .idx by name, so the pattern would be taken as a file name and fail when the job runs",
                ("training", "data", "paths", index), hint="list each prefix (without .bin/.idx) in training.data.paths",
            )


def check_prepare_paths(ctx: RuleContext) -> Iterator[Diagnostic]:
    prepare = _prepare(ctx)
    mount = ctx.facts.mount_path
    if prepare is None or mount is None:
        return
    stems: dict[str, int] = {}
    for index, item in enumerate(prepare.inputs):
        where: tuple[str | int, ...] = HERE + ("inputs", index, "path")
        path = normalize_path(item.path)
        if re.search(GLOB, path):
            # the path reaches tools/preprocess_data.py quoted, as one file, and each input's prefix is
            # named at compile time (training reads it): a pattern cannot be either
            yield ctx.locate(
                "path-glob", f"training.data.prepare.inputs[{index}].path ({path}) is a pattern: the preparation "
                "reads one file per input and names its prefix from the file, so the pattern would be taken as a "
                "file name and fail when the job runs", where,
                hint="list each file as an input: inputs: [{path: /mnt/…/a.jsonl}, {path: /mnt/…/b.jsonl}] "
                "(`ls` the directory on the storage to write them)",
            )
            continue
        if not (is_within(path, mount) or any(is_within(path, r) for r in ctx.facts.read_only_roots)):
            also = "".join(f" or {r}" for r in ctx.facts.read_only_roots)
            yield ctx.locate(
                "prepare-input-path", f"training.data.prepare.inputs[{index}].path ({path}) is not under the job's "
                f"mount ({mount}){also}, so the preparation job cannot read it", where,
                hint="put the corpus on the shared storage",
            )
        stem = input_stem(path)
        if stem in stems:
            yield ctx.locate(
                "prepare-input-path", f"training.data.prepare.inputs[{index}].path and inputs[{stems[stem]}] have the "
                f"same file name ({stem}), so their prefixes would overwrite each other", where,
                hint="rename one of the files, or prepare them into different output directories",
            )
        stems.setdefault(stem, index)
    out = ctx.facts.prepare_output_dir
    if out is None:
        return
    where = HERE + ("output_dir",) if prepare.output_dir is not None else HERE
    run_root = ctx.facts.run_root
    read_only = next((r for r in ctx.facts.read_only_roots if is_within(out, r)), None)
    if read_only is not None:
        yield ctx.locate("prepare-output-path", f"the preparation's output directory ({out}) is under "
                         f"{read_only}, which is public and read-only", where,
                         hint=f"write the prefixes under the mount, e.g. {mount}/data/<name>")
    elif not is_within(out, mount) or out == mount:
        yield ctx.locate("prepare-output-path", f"the preparation's output directory ({out}) is not inside the "
                         f"writable mount ({mount}); the job's own filesystem is discarded when it ends", where,
                         hint=f"write the prefixes under the mount, e.g. {mount}/data/<name>")
    elif run_root is not None and is_within(out, run_root):
        yield ctx.locate("prepare-output-path", f"the preparation's output directory ({out}) is inside the run "
                         f"root ({run_root}); data outlives a run and is shared by runs", where,
                         hint=f"write the prefixes beside the runs, e.g. {mount}/data/<name>")


def check_prepare_tokenizer(ctx: RuleContext) -> Iterator[Diagnostic]:
    prepare = _prepare(ctx)
    if prepare is None:
        return
    training = ctx.sections["training"]
    tok = training.data.tokenizer
    where = ("training", "data", "tokenizer")
    if tok.type == "NullTokenizer":
        yield ctx.locate("tokenizer-files", "the NullTokenizer cannot tokenize text for a preparation step",
                         where + ("type",), hint="choose the tokenizer the model is trained with, e.g. GPT2BPETokenizer")
    if tok.type in NEEDS_VOCAB_AND_MERGES:
        for field in ("vocab_file", "merge_file"):
            if getattr(tok, field) is None:
                yield ctx.locate("tokenizer-files", f"training.data.tokenizer.{field} is required: {tok.type} reads "
                                 "its vocabulary and merges from files", where,
                                 hint=f"add {field}: /mnt/…/{'vocab.json' if field == 'vocab_file' else 'merges.txt'}")
    if tok.type in NEEDS_MODEL and tok.model is None:
        yield ctx.locate("tokenizer-files", f"training.data.tokenizer.model is required: {tok.type} loads a "
                         "tokenizer model (a file or a Hugging Face directory)", where,
                         hint="add model: /mnt/…/tokenizer")
    model = training.model
    known = KNOWN_VOCAB.get(tok.type)
    if model is not None and model.vocab_size is not None and known is not None and tok.vocab_file is None \
            and model.vocab_size != known:
        yield ctx.locate("prepare-vocab", f"training.model.vocab_size ({model.vocab_size}) differs from "
                         f"{tok.type}'s vocabulary of {known}", ("training", "model", "vocab_size"),
                         hint=f"set vocab_size: {known}, or give the tokenizer's own vocab_file")
