#!/usr/bin/env python3
"""docs/memory-model.md's measured tables: the compiler's memory estimate against every H200 run kept.

Reads, never types: the logs of tests/fixtures/measurements/<config>/train.log (through
tools/measurements.py), the two fixture runs (tests/fixtures/h200-pretrain-tp1-run/train.log and
h200-pretrain-2workers-run/node-0.log), the doctor corpus's GPU runs that logged their memory
(tests/fixtures/failed-runs/gpu-*/run/train.log) and tests/fixtures/memory-earlier-runs.json (five
runs whose logs were not kept); compiles each run's spec in memory and runs the compiler's estimator on it.

    python tools/memory_table.py            # the Markdown tables
    python tools/memory_table.py --json     # every row's figures
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tools"))

import measurements  # noqa: E402  (tools/ is no package)

from compiler.load.compose import Override  # noqa: E402
from compiler.one_pass import compile_spec  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures"
EARLIER = FIXTURES / "memory-earlier-runs.json"
# The fixture runs: (spec, log). The tp1 run had --use-distributed-optimizer, which
# specs/pretrain-mock.yaml has since dropped: at data parallel 1 both hold 18 bytes per parameter
# (theoretical_memory_usage.py:264-270), so its figures are the spec's.
FIXTURE_RUNS = (
    ("specs/pretrain-mock.yaml", FIXTURES / "h200-pretrain-tp1-run" / "train.log"),
    ("tests/e2e/pretrain-mock-2workers.yaml", FIXTURES / "h200-pretrain-2workers-run" / "node-0.log"),
)


@dataclass(frozen=True)
class Row:
    """One measured run against the estimate."""

    run: str
    spec: str
    shape: str
    logged_theoretical_total_mb: float | None  # None where the log was not kept
    theoretical_total_mb: float
    peak_estimate_mb: float
    measured_max_allocated_mb: float
    error: float  # (estimate - measured) / measured
    peak_at: str
    checkpoint_estimate_bytes: int
    checkpoint_on_disk_bytes: int | None


def _estimate(spec: str, mask: bool = True):
    """The spec's estimate as its run ran: every measured run built the data loader's causal mask (Megatron's
    default, which compiled launches kept until issue 26; a log says so where it was turned off)."""
    sets = (Override(f"training.performance.attention_mask_in_dataloader={'true' if mask else 'false'}"),)
    result = compile_spec(str(REPO / spec), spec, overrides=sets)
    assert result.plan is not None and result.plan.pretrain is not None, (spec, result.diagnostics)
    est = result.plan.pretrain.estimate
    assert est is not None, spec
    return est


def _row(run: str, spec: str, shape: str, logged: float | None, measured: float, disk: int | None,
         mask: bool = True) -> Row:
    est = _estimate(spec, mask)
    return Row(run, spec, shape, logged, est.megatron_theoretical_total_mb, est.peak_mb, measured,
               round((est.peak_mb - measured) / measured, 4), est.peak_at, est.checkpoint_bytes_per_save, disk)


def _logged(run: str, spec: str, log: Path, disk: int | None) -> Row:
    text = log.read_text(encoding="utf-8", errors="replace")
    m = measurements.parse_log(run, text)
    assert m.max_allocated_mb is not None, log
    mask = not re.search(r"create_attention_mask_in_dataloader \.+ False", text)
    return _row(run, spec, m.shape, m.theoretical_total_mb, m.max_allocated_mb, disk, mask)


# Logs whose memory report is not of their spec's model, and why they are left out.
NOT_OF_ITS_SPEC = {
    "gpu-checkpoint-model-mismatch": "its train.log is gpu-checkpoint-saved's run (hidden 256), appended with the "
                                     "resume of hidden 512 that fails while loading: the memory it reports is the "
                                     "first run's",
}


def failed_runs() -> list[tuple[str, str, Path]]:
    """The GPU runs of the doctor's corpus whose log has a memory report: (run, spec, log). They ran
    the tiny model of tests/e2e/failed/ (a few hundred MB), where the estimate's unmodelled residual
    (the CUDA context's allocations, tens of MB) is a large share."""
    out = []
    for log in sorted((FIXTURES / "failed-runs").glob("gpu-*/run/train.log")):
        name = log.parent.parent.name
        text = log.read_text(encoding="utf-8", errors="replace")
        # a run that trained (an iteration line) and reported its memory
        if name not in NOT_OF_ITS_SPEC and "max allocated" in text and re.search(r" iteration +\d+/ *\d+ \|", text):
            out.append((name, f"tests/e2e/failed/{name}.yaml", log))
    return out


def rows() -> list[Row]:
    """Every measured run: the measurement logs (local layers, then through Transformer Engine), the
    two fixture runs, the GPU runs of the doctor's corpus that logged their memory, the five earlier runs."""
    earlier = json.loads(EARLIER.read_text(encoding="utf-8"))
    disk = earlier["fixture_checkpoint_bytes_on_disk"]
    out = [_logged(m.config, measurements.spec_of(m.config), directory / m.config / "train.log", None)
           for directory in (measurements.DEFAULT_DIR, measurements.TE_DIR) for m in measurements.collect(directory)]
    out += [_logged(log.parent.name, spec, log, disk.get(spec)) for spec, log in FIXTURE_RUNS]
    out += [_logged(name, spec, log, None) for name, spec, log in failed_runs()]
    for run in earlier["runs"]:
        spec = run["spec"]
        out.append(_row(Path(spec).stem.removeprefix("mem-"), spec, "(log not kept)", None,
                        run["max_allocated_mb"], run["checkpoint_bytes_on_disk"]))
    return out


def _pct(value: float) -> str:
    return f"{value * 100:+.1f} %"


def markdown(table: list[Row]) -> str:
    """The peak table and the checkpoint table."""
    out = ["| run | spec | shape | Megatron total MB (log) | Megatron total MB (estimator) | peak estimate MB "
           "| measured max allocated MB | error | peak at |",
           "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in table:
        logged = "—" if r.logged_theoretical_total_mb is None else f"{r.logged_theoretical_total_mb:.2f}"
        out.append(f"| {r.run} | {r.spec} | {r.shape} | {logged} | {r.theoretical_total_mb:.2f} "
                   f"| {r.peak_estimate_mb:.2f} | {r.measured_max_allocated_mb:.2f} | {_pct(r.error)} | {r.peak_at} |")
    worst = max(table, key=lambda r: abs(r.error))
    out += ["", f"{len(table)} runs; the largest error is {_pct(worst.error)} ({worst.run}).", "",
            "| run | checkpoint estimate B | checkpoint on disk B | error |", "|---|---:|---:|---:|"]
    for r in table:
        if r.checkpoint_on_disk_bytes is not None:
            error = (r.checkpoint_estimate_bytes - r.checkpoint_on_disk_bytes) / r.checkpoint_on_disk_bytes
            out.append(f"| {r.run} | {r.checkpoint_estimate_bytes} | {r.checkpoint_on_disk_bytes} | {error * 100:+.2f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the tables (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print every row's figures as JSON")
    ns = parser.parse_args(argv)
    table = rows()
    sys.stdout.write(json.dumps([asdict(r) for r in table], indent=2) + "\n" if ns.json else markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
