"""A cluster's host time factor from one run's log (issue 26): `megatron-compile calibrate SPEC LOG`.

A host-bound step is the host's Python, and the lent H200 hosts ran the same compiled job up to 2.2x apart
(tests/fixtures/h200-hosts/README.md). The step model's host figures (timing.py) are those hosts' fit; one run of a
host-bound job on a user's cluster (specs/calibrate-host.yaml) says how long that cluster's hosts take against them:
resources.host_time_factor, the factor every host figure of the model then takes (timing.Parallel.host_factor).
tools/validate_timing.py checks the factor the same way: each run predicted with its host's factor from that host's
other runs, never its own.
"""

from __future__ import annotations

import re
import statistics
from typing import Callable

from ..tuples import NamedTuple

# Megatron's iteration line (training.py training_log) and its argument dump (arguments.py _print_args)
ITERATION = re.compile(r" iteration +(\d+)/ *\d+ \|.*\| elapsed time per iteration \(ms\): ([\d.]+)")
ARGUMENT = re.compile(r"^  (\w+) \.+ (.*)$")
# the run's warm-up: its first logged interval and the iterations to the 3rd (the allocator, cuDNN's and NCCL's setup)
WARMUP_ITERATIONS = 3
# the factors tried, and the least share of the step the host must move at the factor found (d ln step / d ln factor):
# below it the step is the GPU's and says little of the host
FACTOR_RANGE = (0.1, 10.0)
LEAST_HOST_SHARE = 0.5


class Measured(NamedTuple):
    seconds: float  # the median time per iteration after the warm-up
    iterations: int  # how many it is the median of
    args: dict[str, str]  # Megatron's argument dump ({} where the log has none)


def measured_step(text: str) -> Measured | None:
    """The log's median time per iteration after the warm-up; None with fewer than 2 such iterations."""
    times = {int(m.group(1)): float(m.group(2)) for m in ITERATION.finditer(text)}
    steady = [times[k] for k in sorted(times)[1:] if k > WARMUP_ITERATIONS]
    if len(steady) < 2:
        return None
    return Measured(statistics.median(steady) / 1e3, len(steady), args_dump(text.splitlines()))


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


def mismatches(args: dict[str, str], expected: dict[str, int | None]) -> list[str]:
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

    if measured_s <= step_s(lo) or measured_s >= step_s(hi):
        return Calibration(None, model, share(1.0), f"no host factor from {lo:g} to {hi:g} gives the measured step")
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if step_s(mid) < measured_s else (lo, mid)
    factor = round((lo * hi) ** 0.5, 2)
    s = share(factor)
    if s < LEAST_HOST_SHARE:
        return Calibration(None, model, s, f"the host moves {s:.0%} of this step at the factor found: the step is the "
                           "GPU's, not the host's; calibrate with a host-bound job such as specs/calibrate-host.yaml")
    return Calibration(factor, model, s, "")
