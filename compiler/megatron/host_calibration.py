"""A cluster's host time factor from runs' logs (issue 26): `megatron-compile calibrate SPEC LOG...`.

A host-bound step is the host's Python, and the lent H200 hosts ran the same compiled job up to 2.2x apart
(tests/fixtures/h200-hosts/README.md). The step model's host figures (timing.py) are those hosts' fit; runs of a
host-bound job on a user's cluster (specs/calibrate-host.yaml) say how long that cluster's hosts take against them:
resources.host_time_factor, the factor every host figure of the model then takes (timing.Parallel.host_factor).
tools/validate_timing.py checks the factor the same way: each run predicted with its host's factor from that host's
other runs, never its own.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Callable

from ..tuples import NamedTuple

# Megatron's iteration line (training.py training_log; the timestamp before it where it prints one) and its argument
# dump (arguments.py _print_args). A line is its first ITERATION head and its last ELAPSED after that head's `|`,
# matched apart, line by line: one pattern `head.*| elapsed` backtracks over the whole line at every head, quadratic
# in a line of many heads. ASCII digits only, the iteration's at most ITERATION_DIGITS (int() refuses 4,300), and a
# time that is one number (`.` or `1.2.3` is none): whatever a log holds, float() and int() take what is captured.
ITERATION_DIGITS = 18
ITERATION = re.compile(r"(?:\[([0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]+)\])? "
                       rf"iteration +([0-9]{{1,{ITERATION_DIGITS}}})/ *[0-9]+ \|")
ELAPSED_TEXT = "| elapsed time per iteration (ms): "
ELAPSED = re.compile(re.escape(ELAPSED_TEXT) + r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?![0-9.])")
ARGUMENT = re.compile(r"^  (\w+) \.+ (.*)$")
# the run's warm-up: its first logged interval and the iterations to the 3rd (the allocator, cuDNN's and NCCL's setup)
WARMUP_ITERATIONS = 3
# the factors tried, and the least share of the step the host must move at the factor found (d ln step / d ln factor):
# below it the step is the GPU's and says little of the host
FACTOR_RANGE = (0.1, 10.0)
LEAST_HOST_SHARE = 0.5
# runs a calibration asks for: one lent host ran the same compiled job 137-172 ms within minutes
# (tests/fixtures/h200-hosts/call24), so one run is one draw of the host's noise; the command takes their median
FEWEST_RUNS = 3


class Measured(NamedTuple):
    seconds: float  # the median time per iteration after the warm-up
    iterations: int  # how many it is the median of
    args: dict[str, str]  # Megatron's argument dump ({} where the log has none)


def measured_step(text: str) -> Measured | None:
    """The log's median time per iteration after the warm-up; None with fewer than 2 such iterations."""
    steady = steady_iterations(text)
    if len(steady) < 2:
        return None
    return Measured(statistics.median(steady) / 1e3, len(steady), args_dump(text.splitlines()))


def steady_iterations(text: str, after: str = "") -> list[float]:
    """The log's times per iteration (ms) after the warm-up, in iteration order: each iteration's last line (a log of
    two runs: the later), the first logged and those to WARMUP_ITERATIONS left out; with `after` (a timestamp as
    Megatron prints it), only the lines stamped later."""
    times = {int(head.group(2)): float(ms) for head, ms in iteration_lines(text)
             if not after or (head.group(1) or "") > after}
    return [times[k] for k in sorted(times)[1:] if k > WARMUP_ITERATIONS]


def iteration_lines(text: str) -> list[tuple[re.Match[str], str]]:
    """Each iteration line's head (ITERATION: its timestamp, group 1, and iteration, group 2) and its time per
    iteration (ms, as logged), in the log's order; linear in the text whatever it holds."""
    out = []
    for line in text.split("\n"):  # `.` stops at "\n" only, as the lines were matched before
        if ELAPSED_TEXT not in line:
            continue
        head = ITERATION.search(line)
        if head is None:
            continue
        last = None
        for last in ELAPSED.finditer(line, head.end()):  # after the head's own `|`, which is not the time's
            pass
        if last is not None:
            out.append((head, last.group(1)))
    return out


def args_dump(lines: list[str]) -> dict[str, str]:
    """The `name ..... value` pairs between Megatron's argument markers ({} where the log has none)."""
    out: dict[str, str] = {}
    inside = False
    for line in lines:
        if "------ arguments ------" in line:
            inside = True
        elif "end of arguments" in line:
            break
        elif inside and (m := ARGUMENT.match(line)):
            out[m.group(1)] = m.group(2).strip()
    return out


def expected_args(training: Any) -> dict[str, object]:
    """What Megatron's argument dump says of a spec's model and batch (training: the spec's training section),
    as the log's dump names it; None where the spec leaves Megatron to derive it."""
    m, b = training.model, training.batch
    if m is None or b is None:
        return {}
    return {"num_layers": m.num_layers, "hidden_size": m.hidden_size, "num_attention_heads": m.num_attention_heads,
            "ffn_hidden_size": m.ffn_hidden_size, "seq_length": m.seq_length, "micro_batch_size": b.micro,
            "global_batch_size": b.global_, "transformer_impl": m.transformer_impl, "swiglu": m.swiglu,
            "normalization": m.normalization, "position_embedding_type": m.position_embedding}


def mismatches(args: dict[str, str], expected: dict[str, object]) -> list[str]:
    """The arguments where the log's dump and the spec disagree ("name: log X, spec Y")."""
    return [f"{k}: log {args[k]}, spec {v}" for k, v in expected.items()
            if v is not None and k in args and args[k] != str(v)]


class Calibration(NamedTuple):
    factor: float | None  # None: the run cannot calibrate the host (why says)
    model_s: float  # the model's step at the lent hosts' fit (factor 1)
    host_share: float  # d ln step / d ln factor at the factor found (at 1 where none)
    why: str


def calibrate(step_s: Callable[[float], float], measured_s: float) -> Calibration:
    """The factor on the model's host figures that gives the measured step (step_s(factor): the model's
    seconds a step; it grows with the factor), by bisection in FACTOR_RANGE."""
    lo, hi = FACTOR_RANGE
    model = step_s(1.0)

    def share(f: float) -> float:
        return (step_s(f * 1.1) / step_s(f) - 1) / 0.1

    at_one = share(1.0)
    if at_one < LEAST_HOST_SHARE:  # a GPU-bound step slower than the model would blame the host for the GPU's gap
        return Calibration(None, model, at_one, f"the host moves {at_one:.0%} of this step by the model: the "
                           "step is the GPU's, not the host's; calibrate with a host-bound job such as "
                           "specs/calibrate-host.yaml")
    if measured_s <= step_s(lo):
        return Calibration(None, model, at_one, f"the run is faster than the model's step with a host {1 / lo:g}x "
                           "as fast as the lent hosts: the model's GPU side, not the host, is off for this job")
    if measured_s >= step_s(hi):
        return Calibration(None, model, at_one, f"the run is slower than the model's step with a host {hi:g}x as "
                           "slow as the lent hosts: not a host this model describes (a contended GPU?)")
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if step_s(mid) < measured_s else (lo, mid)
    factor = round((lo * hi) ** 0.5, 2)
    s = share(factor)
    if s < LEAST_HOST_SHARE:
        return Calibration(None, model, s, f"the host moves {s:.0%} of this step at the factor found: the step is "
                           "the GPU's there; calibrate with a host-bound job such as specs/calibrate-host.yaml")
    return Calibration(factor, model, s, "")
