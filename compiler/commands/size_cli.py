"""`megatron-compile size`'s command line and its text table (compiler/commands/size.py ranks the layouts)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

DESCRIPTION = "Rank the parallel layouts that fit a spec's model on a GPU type by estimated time per iteration."
# the options' bounds: the largest world and worker a spec can give (schema/models.py Resources: 1024 workers of at
# most 16 GPUs), and more layouts than anyone reads (each one printed is one more compile)
MAX_WORKERS = 1024
MAX_GPUS_PER_WORKER = 16
MAX_GPUS = MAX_WORKERS * MAX_GPUS_PER_WORKER
MAX_TOP = 1000


def _text(rows: list[dict[str, Any]], header: str, explain: list[Any] | None, out: TextIO) -> None:
    """The ranked layouts as a table; with `explain` (size.Sized, the chosen), each one's terms. Without a layout, the
    header's last line alone (what was enumerated and what fit; size.py says why on stderr)."""
    if not rows:
        out.write(header.splitlines()[-1] + "\n")
        return
    out.write(header + "\n")
    out.write(f"{'#':>3} {'tie':>3} {'GPUs':>4} {'wk':>3} {'TP':>2} {'PP':>2} {'CP':>2} {'DP':>3} {'VPP':>3} {'mb':>2} "
              f"{'recompute':<9} {'peak GB':>7} {'step ms':>8} {'tokens/s':>10} {'train h':>8} {'GPU-h':>8}\n")
    for row in rows:
        out.write(f"{row['rank']:>3} {'=' + str(row['tie_group']):>3} {row['gpus']:>4} {row['workers']:>3} {row['tensor']:>2} {row['pipeline']:>2} "
                  f"{row['context']:>2} {row['data']:>3} {row['virtual_pipeline'] or '-':>3} {row['micro']:>2} "
                  f"{row['recompute'] or '-':<9} {row['peak_gb']:>7.1f} {row['step_ms']:>8.0f} "
                  f"{row['tokens_per_second']:>10,} {_num(row['train_hours']):>8} {_num(row['gpu_hours']):>8}\n")
        out.write("      " + " ".join(f"--set {o}" for o in row["set"]) + "\n")
    if explain:
        out.write("\nterms per iteration (ms; [not measured]: no run backs the constants yet)\n")
        for rank, s in enumerate(explain, 1):
            out.write(f"{rank:>3}:\n")
            for term in s.step.terms:
                if term.exposed or term.seconds:
                    flag = "" if term.measured or not term.seconds else " [not measured]"
                    added = "" if term.exposed else " (not added)"
                    out.write(f"      {term.name:<16} {term.seconds * 1e3:10.1f}{added}{flag}  {term.note}\n")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def whole_number(most: int) -> Any:
    """An argparse type: a whole number from 1 to `most`; anything else is a usage error naming the option."""
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"{text[:40]} is outside 1 to {most}")
        return value
    return parse


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="megatron-compile size", description=DESCRIPTION)
    p.add_argument("spec", metavar="SPEC")
    p.add_argument("--gpu", help="GPU type (h200, h100, a100, h20, l40s); default: the spec's worker flavor, else h200")
    p.add_argument("--max-gpus", type=whole_number(MAX_GPUS), metavar="N",
                   help=f"most GPUs to use, 1 to {MAX_GPUS} (default: the spec's world size)")
    p.add_argument("--gpus-per-worker", type=whole_number(MAX_GPUS_PER_WORKER), default=8, metavar="N",
                   help=f"GPUs per worker for multi-worker layouts, 1 to {MAX_GPUS_PER_WORKER} (default 8)")
    p.add_argument("--top", type=whole_number(MAX_TOP), default=10, metavar="K",
                   help=f"how many layouts to print, 1 to {MAX_TOP} (default 10)")
    p.add_argument("--rank", choices=("time", "gpu-hours"), default="time", help="rank by time per iteration or GPU-hours")
    p.add_argument("--explain-rank", action="store_true", help="show each term (compute, bubble, communication)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p
