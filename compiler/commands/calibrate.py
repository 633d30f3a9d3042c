"""`megatron-compile calibrate SPEC LOG...`: the cluster's host time factor from runs of SPEC on it.

    megatron-compile calibrate specs/calibrate-host.yaml run1/train.log run2/train.log run3/train.log

Reads each log's iterations (the median after the warm-up) and Megatron's argument dump (checked against the spec),
solves each run for the factor on the step model's host figures that gives its measured step
(compiler/megatron/host_calibration.py) and prints resources.host_time_factor: the median of the runs' factors. One
lent host ran the same job 137-172 ms within minutes (tests/fixtures/h200-hosts/call24): one run is one draw of that
noise, so three or more are asked for. Exit 0 with the factor, 1 where the runs cannot give one (the spec does not
compile, a log has no steady iterations, is binary or is another job's, or the step is the GPU's), 2 on usage (a
LOG or SPEC missing, a directory, a FIFO or a device: each LOG is read as the doctor reads a run's logs,
doctor_read.read_bounded, regular files only and the head and tail of one over 8 MiB). With --format json stdout is
one JSON object whatever happens after the arguments are parsed: the report, or {"ok": false, "diagnostics": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from typing import Any, TextIO

from ..diagnostics import Diagnostic, format_text, make_error, to_json_obj
from ..megatron.host_calibration import FEWEST_RUNS, Calibration, calibrate, expected_args, measured_step, mismatches
from ..megatron.timing import spec_step_time
from ..one_pass import compile_spec
from ..schema.record import replace
from .doctor_read import read_bounded

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="megatron-compile calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("spec", metavar="SPEC", help="the spec the runs were compiled from (specs/calibrate-host.yaml)")
    parser.add_argument("logs", nargs="+", metavar="LOG",
                        help="each run's train.log (the last rank's, which prints the iterations); three or more")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


# the code of a diagnostic about a log's content (not a spec's: diagnostics.CODES does not list it)
LOG_CODE = "calibrate-log"


def _read(path: str) -> tuple[str | None, str | None, bool]:
    """(the log's text, why it cannot be used, whether that is a usage error): a log is read as the doctor reads a
    run's (doctor_read.read_bounded): a FIFO or a device is refused, not read (a read would block or never end)."""
    got = read_bounded(path)
    if got.text is not None:
        return got.text, None, False
    problem = got.problem or "no such file"
    return None, problem, not problem.startswith("is binary")


def main(argv: list[str], out: TextIO, err: TextIO) -> int:
    """`megatron-compile calibrate`: argv without the subcommand; the exit code."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)

    def fail(diags: list[Diagnostic], text: str, code: int) -> int:
        """The diagnostics: one JSON object on stdout with --format json, else `text` on stderr."""
        if args.format == "json":
            json.dump({"ok": False, "spec": args.spec, "host_time_factor": None,
                       "diagnostics": [to_json_obj(d) for d in diags]}, out, indent=1)
            out.write("\n")
        else:
            err.write(text)
        return code

    if not os.path.isfile(args.spec):
        what = "is a directory" if os.path.isdir(args.spec) else "is not a file"
        message = f"{what}: give the one spec the logs ran (the calibration job, e.g. specs/calibrate-host.yaml)"
        return fail([make_error("file-unreadable", message, file=args.spec)],
                    f"megatron-compile calibrate: {args.spec} {message}\n", EXIT_USAGE)
    texts: dict[str, str] = {}
    unreadable: list[tuple[str, str, bool]] = []
    for log in dict.fromkeys(args.logs):
        text, problem, usage = _read(log)
        if text is None:
            unreadable.append((log, problem or "", usage))
        else:
            texts[log] = text
    if unreadable:
        code = EXIT_USAGE if any(usage for _, _, usage in unreadable) else EXIT_FAIL
        diags = [make_error("file-unreadable" if usage else LOG_CODE, f"cannot read the log: {problem}", file=log)
                 for log, problem, usage in unreadable]
        return fail(diags, "".join(f"megatron-compile calibrate: cannot read {log}: {problem}\n"
                                   for log, problem, _ in unreadable), code)
    base = compile_spec(args.spec, args.spec, render_files=False)
    if not base.ok or base.spec is None or base.facts is None or base.facts.training is None:
        diags = list(base.diagnostics) or [make_error("file-unreadable", "does not compile", file=args.spec)]
        return fail(diags, format_text(list(base.diagnostics)) + "\n" if base.diagnostics
                    else f"{args.spec}: does not compile\n", EXIT_FAIL)
    facts = base.facts
    layout, est = facts.layout, facts.estimate
    if layout is None or est is None or facts.step_time is None:
        message = ("the step model cannot time this spec (a pretrain_gpt.py spec with a model, a batch and a known "
                   "GPU)")
        return fail([make_error("pretrain-missing-section", message, file=args.spec)], f"{args.spec}: {message}\n",
                    EXIT_FAIL)
    spec = replace(base.spec, training=facts.training)
    res = spec.resources
    expected = expected_args(spec.training)

    def step_s(factor: float) -> float:
        step = spec_step_time(replace(spec, resources=replace(res, host_time_factor=factor)), layout=layout, est=est)
        assert step is not None  # timed above without a factor
        return step.seconds

    problems: list[tuple[str, str]] = []
    runs = []
    for log, text in texts.items():
        measured = measured_step(text)
        if measured is None:
            problems.append((log, "fewer than 2 of Megatron's iteration lines after iteration 3: not the log of the "
                             "rank that prints them (one worker: the run root's train.log), or a run stopped early "
                             "(logging.interval 1, 40 iterations)"))
            continue
        if not measured.args:
            problems.append((log, "no Megatron argument dump (`------ arguments ------`) to check against the spec: "
                             "give the whole train.log of a one-worker run"))
            continue
        wrong = mismatches(measured.args, expected)
        if wrong:
            problems.append((log, f"not a run of {args.spec}: " + "; ".join(wrong)))
            continue
        runs.append((log, measured, calibrate(step_s, measured.seconds)))
    if problems:
        return fail([make_error(LOG_CODE, problem, file=log) for log, problem in problems],
                    "".join(f"{log}: {problem}\n" for log, problem in problems), EXIT_FAIL)
    factors = [c.factor for _, _, c in runs if c.factor is not None]
    factor = round(statistics.median(factors), 2) if len(factors) == len(runs) else None
    report: dict[str, Any] = {
        "ok": factor is not None, "spec": args.spec, "model_ms": round(runs[0][2].model_s * 1e3, 1), "host_time_factor": factor,
        "runs": [_run(log, measured, cal) for log, measured, cal in runs]}
    if args.format == "json":
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        out.write(f"{args.spec}: the step model at the lent hosts' fit: {report['model_ms']} ms a step\n")
        for r in report["runs"]:
            out.write(f"  {r['log']}: {r['measured_ms']} ms (the median of {r['iterations']} iterations after the "
                      f"warm-up): " + (f"x{r['factor']:.2f}\n" if r["factor"] is not None else f"no factor: {r['why']}\n"))
        if factor is None:
            err.write("no calibration: every run must give a factor (specs/calibrate-host.yaml is host-bound)\n")
        else:
            runs_text = f"the median of {len(factors)} runs, x{min(factors):.2f} to x{max(factors):.2f}" \
                if len(factors) > 1 else "one run"
            out.write(f"resources.host_time_factor: {factor:.2f} ({runs_text})\n"
                      "(set it in the resources of the specs that run on this cluster, e.g. their shared base spec)\n")
            if len(factors) < FEWEST_RUNS:
                out.write(f"note: a host's runs of one job differ by up to a quarter from one to the next: give "
                          f"{FEWEST_RUNS} runs or more\n")
    return EXIT_OK if factor is not None else EXIT_FAIL


def _run(log: str, measured: Any, cal: Calibration) -> dict[str, Any]:
    return {"log": log, "measured_ms": round(measured.seconds * 1e3, 1), "iterations": measured.iterations,
            "factor": cal.factor, "host_share": round(cal.host_share, 2), "why": cal.why or None}
