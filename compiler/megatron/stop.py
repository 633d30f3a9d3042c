"""A stop that saves: what Megatron-LM does on a stop signal and a time limit, and the times the
compiler derives for it (docs/stop-resume.md).

Megatron at the pinned commit 571370c8:
- `--exit-signal-handler` installs DistributedSignalHandler(args.exit_signal) at start-up
  (megatron/training/global_vars.py:148-149); its handler only sets a flag
  (megatron/training/dist_signal_handler.py:68-69). The flag is read after every iteration, in
  checkpoint_and_decide_exit (megatron/training/training.py:2970-2985), all-gathered over every rank
  (any rank's signal stops them all): the iteration in flight finishes, the checkpoint is saved
  (synchronously; with --async-save the save is finalized, blocking, before the exit:
  training.py:3793), and the process exits with status 0 (training.py:3821).
- `--exit-signal` defaults to SIGTERM (megatron/training/config/training_config.py:83), the signal
  every engine sends first, so the compiler does not pass it.
- `--exit-duration-in-mins` (an int) is compared after every iteration with the minutes since
  pretrain_gpt.py's first line (_PROGRAM_START_TIME, pretrain_gpt.py:8 and :387;
  training.py:3018-3037): past it, a checkpoint is saved unless one was just saved, and the run
  exits with status 0. The engine's clock starts earlier (the image, the launch's checks and the
  dataset helper's build), so the duration leaves START_MARGIN_S for that.
"""

from __future__ import annotations

import math

from ..tuples import NamedTuple
from .flags import STOP_FLAGS, Flag

SIGNAL = "SIGTERM"  # Megatron's default --exit-signal; launch.sh forwards it to every training process
SIGNAL_HANDLER_FLAG, _, EXIT_DURATION_FLAG = STOP_FLAGS

# The write rate of a checkpoint to the shared storage, all ranks together, when the spec does not
# give stop.write_gb_s: 1 GB/s is what one NFS client or a small parallel file system sustains for
# large sequential writes (an assumption, stated in plan.md; measure yours with the save time
# Megatron logs and set stop.write_gb_s).
DEFAULT_WRITE_GB_S = 1.0
# A process's first torch_dist save starts the saving worker, which imports Megatron: 12.9 s and
# 11.7 s on the H200 for a 28 MB checkpoint, later saves 0.12-0.34 s (tests/fixtures/h200-stop-resume,
# `save-checkpoint` timers). A stop before the first regular save of a start pays it.
FIRST_SAVE_S = 15
# After the save: the barrier before sys.exit, NCCL's teardown, the processes' exit, torchrun's
# and launch.sh's records (training.py:3803-3821): 8.5 s from the SIGTERM to launch.sh's exit on the
# H200, the save included (tests/fixtures/h200-stop-resume); 30 s leaves room for a larger job.
GRACE_MARGIN_S = 30
# Between the engine's clock start and pretrain_gpt.py's first line (the container's start, the
# launch's checks, the dataset helper's build) and after the exit: what --exit-duration-in-mins
# leaves free of the limit besides the iteration in flight and the save.
START_MARGIN_S = 300
# The save_interval suggested keeps the time spent saving under this share of the training time.
SAVE_SHARE = 0.05


class StopTimes(NamedTuple):
    """The stop's times for one spec: what it costs to stop cleanly, and what the flags say."""

    write_s: float  # estimated time to write one checkpoint
    write_gb_s: float  # the write rate it assumes
    write_rate_given: bool  # stop.write_gb_s was written in the spec
    step_s: float | None  # one iteration (the step-time model), None when the GPU is unknown
    needed_grace_s: int  # the iteration in flight + the save + FIRST_SAVE_S + GRACE_MARGIN_S
    grace_s: int | None  # the engine's grace: the spec's, or the adapter's default, or unknown
    grace_source: str  # where grace_s comes from, for plan.md
    time_limit_s: int | None  # the engine's time limit, None when it has none
    limit_source: str
    exit_duration_mins: int | None  # --exit-duration-in-mins, None without a limit
    save_interval: int
    suggested_save_interval: int | None  # None without a step time
    lost_per_kill_s: float | None  # work lost by a stop without a save: save_interval iterations
    save_share: float | None  # the share of training time spent saving at save_interval

    @property
    def grace_short(self) -> bool:
        """The engine kills before a stop could save."""
        return self.grace_s is not None and self.grace_s < self.needed_grace_s


def write_seconds(checkpoint_bytes: int, write_gb_s: float) -> float:
    """The time to write one checkpoint of this size at this rate."""
    return checkpoint_bytes / (write_gb_s * 1e9)


def needed_grace(step_s: float | None, write_s: float) -> int:
    """Seconds between the stop signal and the kill that let the iteration in flight finish and the
    checkpoint be written: ceil(step + write + FIRST_SAVE_S + GRACE_MARGIN_S)."""
    return math.ceil((step_s or 0.0) + write_s + FIRST_SAVE_S + GRACE_MARGIN_S)


def exit_duration(time_limit_s: int, step_s: float | None, write_s: float) -> int:
    """--exit-duration-in-mins: whole minutes of the limit less the start margin, one iteration
    (the check runs after each) and the save; may be below 1 when the limit is too short."""
    return math.floor((time_limit_s - START_MARGIN_S - (step_s or 0.0) - write_s - FIRST_SAVE_S - GRACE_MARGIN_S)
                      / 60)


def suggested_save_interval(step_s: float, write_s: float) -> int:
    """The fewest iterations between saves that keep saving under SAVE_SHARE of the training time."""
    return max(1, math.ceil(write_s * (1 - SAVE_SHARE) / (SAVE_SHARE * step_s)))


def stop_times(checkpoint_bytes: int, write_gb_s: float | None, step_s: float | None, save_interval: int,
               time_limit_s: int | None, limit_source: str, grace_s: int | None, grace_source: str,
               engine_sets_grace: bool) -> StopTimes:
    """The stop's times; an engine that sets its grace itself (engine_sets_grace) gets the needed
    grace when the spec gives none."""
    rate = write_gb_s if write_gb_s is not None else DEFAULT_WRITE_GB_S
    write = write_seconds(checkpoint_bytes, rate)
    need = needed_grace(step_s, write)
    if grace_s is None and engine_sets_grace:
        grace_s, grace_source = need, "derived: the iteration in flight + the save + the margin"
    duration = None if time_limit_s is None else exit_duration(time_limit_s, step_s, write)
    suggested = lost = share = None
    if step_s is not None and step_s > 0:
        suggested = suggested_save_interval(step_s, write)
        lost = save_interval * step_s
        share = write / (write + save_interval * step_s)
    return StopTimes(write, rate, write_gb_s is not None, step_s, need, grace_s, grace_source, time_limit_s,
                     limit_source, duration, save_interval, suggested, lost, share)


def stop_flags(times: StopTimes | None) -> tuple[Flag, ...]:
    """The flags of a stop that saves: the signal handler always, the exit duration under a limit."""
    out = [Flag(SIGNAL_HANDLER_FLAG)]
    if times is not None and times.exit_duration_mins is not None and times.exit_duration_mins >= 1:
        out.append(Flag(EXIT_DURATION_FLAG, (str(times.exit_duration_mins),)))
    return tuple(out)


def minutes(seconds: float) -> str:
    """A duration for plan.md: 42 s, 3.5 min, 2.1 h."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 120:
        return f"{seconds:,.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds / 3600:,.1f} h"
