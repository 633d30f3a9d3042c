"""`megatron-compile init`: a commented spec whose arithmetic is consistent as written.

The layout comes from the options; the model is a small GPT on mock data sized so that every
Megatron rule holds: heads a multiple of tensor parallel, layers of pipeline parallel, the sequence
of 2 × context parallel, the global batch of micro × data parallel.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import TextIO

import yaml

from ..diagnostics import sort_diagnostics
from ..megatron.parallel import data_parallel_size, world_size
from ..megatron.runfiles import RUN_CHECKPOINT_DIR
from ..one_pass import compile_spec
from .compile import print_diagnostics, refuses_overwrite, relative_to_spec
from .seed import SEED_BASE
from .size_cli import MAX_GPUS, MAX_GPUS_PER_WORKER, MAX_WORKERS, whole_number

SCHEMA_LINE = "# yaml-language-server: $schema=../schemas/megatron-job.schema.json"


def _y(value: object) -> str:
    """A YAML scalar as safe_dump spells it (quoted only where YAML needs it)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix("\n...").strip()


def scaffold(name: str, *, workers: int, gpus_per_worker: int, tensor: int, pipeline: int, context: int,
             extends: str | None = None) -> str:
    """The text of a new spec; the caller compiles it to refuse impossible layouts."""
    world = world_size(workers, gpus_per_worker)
    # an impossible layout still gets a text (the caller refuses it with the compiler's diagnostics)
    data_parallel = max(1, data_parallel_size(world, max(1, tensor), max(1, pipeline), max(1, context)))
    heads = 16 * tensor  # a multiple of tensor parallel
    hidden = 64 * heads  # head size 64
    layers = 2 * pipeline  # a multiple of pipeline parallel
    seq = 1024 * context  # a multiple of 2 × context parallel
    micro = 1
    global_batch = micro * data_parallel * 8
    image = SEED_BASE["image"]
    shared = (
        f"extends: {_y(extends)}            # the image, the Megatron commit and the storage\n"
        if extends is not None else
        "version: 1\n"
        "image:                            # the image the job runs, built by buildx.sh or regctl.sh\n"
        f"  base: {image['base']}\n"
        f"  registry: {image['registry']:<22}# your availability zone's registry\n"
        f"  namespace: {image['namespace']:<21}# your tenant ID\n"
        f"  repository: {image['repository']}\n"
        f"  tag: {image['tag']}\n"
        "megatron:\n"
        f"  commit: {SEED_BASE['megatron']['commit']}   # Megatron Core 0.18.2, pinned\n"
        "storage:\n"
        f"  mount_path: {SEED_BASE['storage']['mount_path']:<20}# writable shared storage; the run root goes below it\n"
    )
    return (
        f"{SCHEMA_LINE}\n"
        f"#\n"
        f"# Written by `megatron-compile init`: {workers} worker(s) × {gpus_per_worker} GPU(s) = world size {world};\n"
        f"# tensor {tensor} × pipeline {pipeline} × context {context} leaves data parallel {data_parallel}.\n"
        f"# A GPT sized to the layout, on mock data: replace training.model and training.data with your own, then run\n"
        f"# `megatron-compile --explain` on this file to see the layout and the memory estimates.\n"
        f"{shared}"
        f"name: {_y(name)}\n"
        f"resources:\n"
        f"  workers: {workers}\n"
        f"  gpus_per_worker: {gpus_per_worker}\n"
        f"parallelism:                      # data parallel is derived: world / (tensor × pipeline × context)\n"
        f"  tensor: {tensor}\n"
        f"  pipeline: {pipeline}\n"
        f"  context: {context}\n"
        f"training:\n"
        f"  script: pretrain_gpt.py\n"
        f"  model:\n"
        f"    num_layers: {layers}                   # a multiple of pipeline\n"
        f"    hidden_size: {hidden}\n"
        f"    num_attention_heads: {heads}          # a multiple of tensor\n"
        f"    seq_length: {seq}                # a multiple of 2 × context when context > 1\n"
        f"    max_position_embeddings: {seq}\n"
        f"    vocab_size: 32000\n"
        f"  batch:\n"
        f"    micro: {micro}\n"
        f"    global: {global_batch}                     # a multiple of micro × data parallel ({micro} × {data_parallel})\n"
        f"  train_iters: 1000\n"
        f"  optimizer:\n"
        f"    lr: 0.0003\n"
        f"    min_lr: 0.00003\n"
        f"    decay_style: cosine\n"
        f"    warmup_iters: 100\n"
        f"  data:\n"
        f"    mock: true                      # or paths: [/mnt/megatron/data/<corpus>_text_document]\n"
        f"    tokenizer:\n"
        f"      type: NullTokenizer\n"
        f"  checkpoint:\n"
        f"    save_interval: 500              # saved under $RUN_ROOT/{RUN_CHECKPOINT_DIR}; a restarted job resumes\n"
    )


def _extends(given: str | None, target: Path, err: TextIO) -> str | None:
    """The `extends` path to write, relative to the spec; '' (after saying why) when BASE is not found."""
    if given is None:
        # like import: a base.yaml beside the new spec is the base to extend
        beside = target.parent / "base.yaml"
        return "base.yaml" if beside.is_file() and target.name != "base.yaml" else None
    if Path(given).is_file():  # as the shell sees it: from the working directory
        return relative_to_spec(given, target)
    if (target.parent / given).is_file():  # as a spec writes it: from the spec's directory
        return given
    err.write(f"--extends {given}: no such file, neither from the working directory nor from {target.parent or '.'}/\n")
    return ""


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile init NAME [--workers N --gpus-per-worker G --tp T --pp P --cp C] [-o FILE]`."""
    parser = argparse.ArgumentParser(prog="megatron-compile init",
                                     description="Write a commented spec that compiles as written.")
    parser.add_argument("name", help="the run name: lowercase letters, digits and '-'")
    parser.add_argument("-o", "--output", help="the spec file (default: specs/NAME.yaml)")
    # whole numbers within what a spec can give, so that a 0 is the option's usage error, not a spec's knock-ons
    parser.add_argument("--workers", type=whole_number(MAX_WORKERS), default=1, metavar="N")
    parser.add_argument("--gpus-per-worker", type=whole_number(MAX_GPUS_PER_WORKER), default=8, metavar="N")
    parser.add_argument("--tp", type=whole_number(MAX_GPUS), default=1, metavar="N", help="tensor parallel")
    parser.add_argument("--pp", type=whole_number(MAX_GPUS), default=1, metavar="N", help="pipeline parallel")
    parser.add_argument("--cp", type=whole_number(MAX_GPUS), default=1, metavar="N", help="context parallel")
    parser.add_argument("--extends", metavar="BASE",
                        help="extend a base spec instead of writing image/megatron/storage: a path from the working "
                        "directory, or from the spec's directory (default: base.yaml beside the spec, when it exists)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    target = Path(args.output or f"specs/{args.name}.yaml")
    if refuses_overwrite(target, args.force, err):
        return 1
    extends = _extends(args.extends, target, err)
    if extends == "":
        return 2
    text = scaffold(args.name, workers=args.workers, gpus_per_worker=args.gpus_per_worker, tensor=args.tp,
                    pipeline=args.pp, context=args.cp, extends=extends)
    # Refuse an impossible layout with the compiler's own diagnostics, before anything is written.
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / target.name
        probe.write_text(text, encoding="utf-8")
        if extends is not None:
            probe = target.parent / f".{target.name}.init-probe"
            probe.write_text(text, encoding="utf-8")
        try:
            result = compile_spec(str(probe), str(target), render_files=False)
        finally:
            if extends is not None:
                probe.unlink()
    if not result.ok or result.diagnostics:
        print_diagnostics(sort_diagnostics(result.diagnostics), "text", out)
        err.write(f"{target}: not written; the layout above cannot run (its lines are the spec init would write: --tp, "
                  "--pp and --cp set parallelism.tensor, .pipeline and .context, --workers and --gpus-per-worker "
                  "resources.workers and .gpus_per_worker)\n")
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    assert result.plan is not None  # result.ok: the plan was made
    err.write(f"wrote {target}: world size {result.plan.world_size}, data parallel {result.plan.parallel.data}\n")
    return 0
