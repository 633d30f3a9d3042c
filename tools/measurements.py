#!/usr/bin/env python3
"""The measured memory and step time of tests/fixtures/measurements/<config>/train.log, as a table.

Each train.log is what one compiled pretrain_gpt.py launch printed on an H200 (tools/measure_device.sh
ran them). This reads, from Megatron's own lines only:

- the argument dump (`------ arguments ------` .. `---- end of arguments ----`,
  megatron/training/arguments.py:_print_args), for the shape;
- `number of parameters on (tensor, pipeline) model parallel rank (0, 0): N`;
- `Theoretical memory footprints: weight and optimizer=W MB, activation=A MB, total=T MB`
  (megatron/training/theoretical_memory_usage.py:453);
- `[Rank 0] (...) memory (MB) | allocated: .. | max allocated: M | ...`
  (megatron/training/utils/common_utils.py:282): the largest M, torch's peak since the start;
- ` iteration k/ n | ... | elapsed time per iteration (ms): T | throughput per GPU (TFLOP/s/GPU): F`
  (megatron/training/training.py:training_log), one per iteration with log interval 1.

    python tools/measurements.py [DIR] [--json]

prints a Markdown table (or JSON), sorted by config name, the same for the same logs.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from compiler.megatron.host_calibration import args_dump  # noqa: E402

DEFAULT_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "measurements"
# The runs through Transformer Engine (issue 27, tools/te_measure_device.sh), in the same format
TE_DIR = DEFAULT_DIR.parent / "te-h200" / "measurements"
# The first iterations include CUDA/cuBLAS warm-up and the lazy Adam state allocation.
WARMUP_ITERATIONS = 3

_PARAMS = re.compile(r"number of parameters on \(tensor, pipeline\) model parallel rank \(0, 0\): (\d+)")
_THEORY = re.compile(r"Theoretical memory footprints: weight and optimizer=([\d.]+) MB, "
                     r"activation=([\d.]+) MB, total=([\d.]+) MB")
_MAX_ALLOC = re.compile(r"^\[Rank 0\] .*memory \(MB\) \| allocated: [\d.]+ \| max allocated: ([\d.]+)")
_ITER = re.compile(r" iteration +(\d+)/ *(\d+) \|.*\| elapsed time per iteration \(ms\): ([\d.]+)"
                   r"(?: \| throughput per GPU \(TFLOP/s/GPU\): ([\d.]+))?")

# The arguments that make up the shape, as Megatron names them in the dump.
SHAPE_ARGS = (
    "num_layers", "hidden_size", "num_attention_heads", "group_query_attention", "num_query_groups",
    "ffn_hidden_size", "kv_channels", "seq_length", "micro_batch_size", "global_batch_size", "vocab_size",
    "swiglu", "normalization", "position_embedding_type", "untie_embeddings_and_output_weights",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "transformer_impl",
    "use_distributed_optimizer", "params_dtype", "world_size", "tensor_model_parallel_size",
    "pipeline_model_parallel_size", "context_parallel_size", "data_parallel_size", "train_iters",
)


@dataclass(frozen=True)
class Measurement:
    """One configuration's figures; None where its log lacks the line."""

    config: str
    shape: str
    args: dict[str, str]
    parameters: int | None
    theoretical_weight_and_optimizer_mb: float | None
    theoretical_activation_mb: float | None
    theoretical_total_mb: float | None
    max_allocated_mb: float | None
    iterations_logged: int
    train_iters: int | None
    median_ms_per_iteration: float | None
    tokens_per_iteration: int
    tokens_per_s: float | None
    median_tflops_per_gpu: float | None
    iteration_ms: list[float] = field(default_factory=list)


def spec_of(config: str) -> str:
    """The spec a config's run was compiled from: tests/e2e/te/te-<name>.yaml for the runs through
    Transformer Engine (tools/te_measure_device.sh, issue 27), else tests/e2e/mem-<config>.yaml."""
    return f"tests/e2e/te/{config}.yaml" if config.startswith("te-") else f"tests/e2e/mem-{config}.yaml"


def parse_args_dump(lines: list[str]) -> dict[str, str]:
    """The `name ..... value` pairs between Megatron's arguments markers (the compiler's reader)."""
    return args_dump(lines)


def _int(args: dict[str, str], key: str) -> int | None:
    """An integer argument, or None when absent or None."""
    value = args.get(key)
    return int(value) if value is not None and value.lstrip("-").isdigit() else None


def shape_text(args: dict[str, str]) -> str:
    """A short description: L4 h1024 a16 g4 ffn5440, s2048 b4 gbs4, v100277, SwiGLU RMSNorm rope untied, recompute."""
    parts = [f"L{args.get('num_layers')} h{args.get('hidden_size')} a{args.get('num_attention_heads')}"]
    if args.get("group_query_attention") == "True":
        parts[0] += f" g{args.get('num_query_groups')}"
    parts.append(f"s{args.get('seq_length')} b{args.get('micro_batch_size')} gbs{args.get('global_batch_size')}")
    parts.append(f"v{args.get('vocab_size')}")
    block = []
    if args.get("swiglu") == "True":
        block.append(f"SwiGLU ffn{args.get('ffn_hidden_size')}")
    if args.get("normalization", "LayerNorm") != "LayerNorm":
        block.append(args["normalization"])
    if args.get("position_embedding_type", "learned_absolute") != "learned_absolute":
        block.append(args["position_embedding_type"])
    if args.get("untie_embeddings_and_output_weights") == "True":
        block.append("untied")
    if block:
        parts.append(" ".join(block))
    granularity = args.get("recompute_granularity", "None")
    if granularity != "None":
        method = args.get("recompute_method", "None")
        parts.append(f"recompute {granularity}" + ("" if method == "None" else
                                                   f" {method} {args.get('recompute_num_layers')}"))
    return ", ".join(parts)


def _median(values: list[float]) -> float | None:
    """The median to 1/100 (an even count averages two logged figures), or None for no values."""
    return round(statistics.median(values), 2) if values else None


def parse_log(config: str, text: str) -> Measurement:
    """One train.log's Measurement."""
    lines = text.splitlines()
    args = parse_args_dump(lines)
    params = theory = None
    peaks: list[float] = []
    iterations: dict[int, tuple[float, float | None]] = {}
    for line in lines:
        if params is None and (m := _PARAMS.search(line)):
            params = int(m.group(1))
        elif theory is None and (m := _THEORY.search(line)):
            theory = tuple(float(g) for g in m.groups())
        elif m := _MAX_ALLOC.search(line):
            peaks.append(float(m.group(1)))
        elif m := _ITER.search(line):
            # a resumed log could repeat an iteration; the last one printed wins
            iterations[int(m.group(1))] = (float(m.group(3)), float(m.group(4)) if m.group(4) else None)
    steady = [iterations[k] for k in sorted(iterations) if k > WARMUP_ITERATIONS]
    median_ms = _median([ms for ms, _ in steady])
    tokens = (_int(args, "global_batch_size") or 0) * (_int(args, "seq_length") or 0)
    return Measurement(
        config=config,
        shape=shape_text(args),
        args={k: args[k] for k in SHAPE_ARGS if k in args},
        parameters=params,
        theoretical_weight_and_optimizer_mb=theory[0] if theory else None,
        theoretical_activation_mb=theory[1] if theory else None,
        theoretical_total_mb=theory[2] if theory else None,
        max_allocated_mb=max(peaks) if peaks else None,
        iterations_logged=len(iterations),
        train_iters=_int(args, "train_iters"),
        median_ms_per_iteration=median_ms,
        tokens_per_iteration=tokens,
        tokens_per_s=round(tokens / (median_ms / 1000.0), 1) if median_ms else None,
        median_tflops_per_gpu=_median([f for _, f in steady if f is not None]),
        iteration_ms=[iterations[k][0] for k in sorted(iterations)],
    )


def collect(directory: Path) -> list[Measurement]:
    """Every DIR/<config>/train.log, sorted by config."""
    return [parse_log(log.parent.name, log.read_text(encoding="utf-8", errors="replace"))
            for log in sorted(directory.glob("*/train.log"))]


def _cell(value: float | int | None, digits: int = 2) -> str:
    """A table cell: fixed decimals, or a dash for a missing figure."""
    if value is None:
        return "—"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def markdown(rows: list[Measurement]) -> str:
    """The Markdown table."""
    head = ("| config | shape | parameters | Megatron weight+optimizer MB | Megatron activation MB "
            "| measured max allocated MB | median ms/iteration (after 3) | tokens/s | TFLOP/s/GPU |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
    body = "".join(
        f"| {r.config} | {r.shape} | {_cell(r.parameters)} | {_cell(r.theoretical_weight_and_optimizer_mb)} "
        f"| {_cell(r.theoretical_activation_mb)} | {_cell(r.max_allocated_mb)} "
        f"| {_cell(r.median_ms_per_iteration)} | {_cell(r.tokens_per_s, 0)} | {_cell(r.median_tflops_per_gpu, 1)} |\n"
        for r in rows)
    return head + body


def to_json(rows: list[Measurement]) -> str:
    """The rows as JSON, keys sorted."""
    return json.dumps([asdict(r) for r in rows], indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table of DIR (default tests/fixtures/measurements)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    ns = parser.parse_args(argv)
    rows = collect(ns.dir)
    if not rows:
        print(f"no */train.log under {ns.dir}", file=sys.stderr)
        return 1
    sys.stdout.write(to_json(rows) if ns.json else markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
