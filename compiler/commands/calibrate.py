"""`megatron-compile calibrate SPEC LOG`: the cluster's host time factor from one run of SPEC on it.

    megatron-compile calibrate specs/calibrate-host.yaml /mnt/megatron/runs/calibrate-host/train.log

Reads the log's iterations (the median after the warm-up) and Megatron's argument dump (checked against the spec),
and prints resources.host_time_factor: the factor on the step model's host figures that gives the measured step
(compiler/megatron/host_calibration.py). Exit 0 with the factor, 1 where the run cannot give one (the spec does not
compile, the log has no steady iterations or is another job's, or the step is the GPU's), 2 on usage.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..diagnostics import format_text
from ..megatron.host_calibration import calibrate, measured_step, mismatches
from ..megatron.parallel import parallel_layout
from ..megatron.memory import estimate
from ..megatron.timing import spec_step_time
from ..one_pass import compile_spec
from ..schema.record import replace

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="megatron-compile calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("spec", metavar="SPEC", help="the spec the run was compiled from (specs/calibrate-host.yaml)")
    parser.add_argument("log", metavar="LOG", help="the run's train.log (the last rank's, which prints the iterations)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile calibrate`: argv without the subcommand; the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        with open(args.log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as exc:
        err.write(f"megatron-compile calibrate: cannot read {args.log}: {exc.strerror}\n")
        return EXIT_USAGE
    base = compile_spec(args.spec, args.spec, render_files=False)
    if not base.ok or base.spec is None or base.facts is None or base.facts.training is None:
        err.write(format_text(list(base.diagnostics)) + "\n" if base.diagnostics else f"{args.spec}: does not compile\n")
        return EXIT_FAIL
    spec = replace(base.spec, training=base.facts.training)
    t, res, par = spec.training, spec.resources, spec.parallelism
    measured = measured_step(text)
    if measured is None:
        err.write(f"{args.log}: fewer than 2 iteration lines after iteration 3: run the job longer (logging.interval 1)\n")
        return EXIT_FAIL
    m = t.model
    wrong = mismatches(measured.args, {} if m is None or t.batch is None else {
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "seq_length": m.seq_length,
        "micro_batch_size": t.batch.micro, "global_batch_size": t.batch.global_})
    if wrong:
        err.write(f"{args.log}: not a run of {args.spec}: " + "; ".join(wrong) + "\n")
        return EXIT_FAIL
    layout = parallel_layout(res.workers, res.gpus_per_worker, par.tensor, par.pipeline, par.context, par.expert,
                             par.expert_tensor)
    est = None if layout is None else estimate(spec, layout)

    def step_s(factor: float) -> float:
        view = replace(spec, resources=replace(res, host_time_factor=factor))
        step = spec_step_time(view, layout=layout, est=est)
        assert step is not None  # checked below at factor 1
        return step.seconds

    if layout is None or est is None or spec_step_time(spec, layout=layout, est=est) is None:
        err.write(f"{args.spec}: the step model cannot time this spec (a pretrain_gpt.py spec with a model, a batch "
                  "and a known GPU)\n")
        return EXIT_FAIL
    cal = calibrate(step_s, measured.seconds)
    report: dict[str, Any] = {
        "spec": args.spec, "log": args.log, "measured_ms": round(measured.seconds * 1e3, 1),
        "iterations": measured.iterations, "model_ms": round(cal.model_s * 1e3, 1),
        "host_share": round(cal.host_share, 2), "host_time_factor": cal.factor, "why": cal.why or None}
    if args.format == "json":
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        out.write(f"{args.spec} on {args.log}: {report['measured_ms']} ms a step (the median of {measured.iterations} "
                  f"iterations after the warm-up); the step model at the lent hosts' fit: {report['model_ms']} ms\n")
        if cal.factor is None:
            out.write(f"no calibration: {cal.why}\n")
        else:
            out.write(f"resources.host_time_factor: {cal.factor:.2f}\n"
                      "(set it in the resources of the specs that run on this cluster, e.g. their shared base spec)\n")
    return EXIT_OK if cal.factor is not None else EXIT_FAIL
